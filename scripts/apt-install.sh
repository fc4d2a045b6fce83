# Shared by scripts/install-mpi.sh and scripts/install-rdma.sh (sourced, not run): finding
# libclang, and installing missing Debian packages with apt-get as root or with sudo.
# The sourcing script defines `say` (its messages' prefix) before calling these.

# True when libclang itself is found (bindgen loads it): $LIBCLANG_PATH, the linker cache,
# or an LLVM install. libclang-cpp.so, which other packages can bring without it, does not
# count.
have_libclang() {
    if [ -n "${LIBCLANG_PATH:-}" ] && ls "$LIBCLANG_PATH"/libclang*.so* >/dev/null 2>&1; then
        return 0
    fi
    if command -v ldconfig >/dev/null 2>&1 &&
        ldconfig -p 2>/dev/null | grep -Eq 'libclang(-[0-9.]+)?\.so'; then
        return 0
    fi
    compgen -G '/usr/lib/llvm-*/lib/libclang.so*' >/dev/null ||
        compgen -G '/usr/lib/llvm-*/lib/libclang-[0-9]*.so*' >/dev/null
}

# apt_install WHAT PACKAGE...: installs the packages with apt-get (root, or sudo without a
# password), or fails naming WHAT to install by hand where apt-get or the rights are missing.
apt_install() {
    local what=$1
    shift
    if ! command -v apt-get >/dev/null 2>&1; then
        say "error: apt-get not found (not a Debian-like system): install $what" \
            "with this system's package manager" >&2
        exit 1
    fi
    local sudo=()
    if [ "$(id -u)" -ne 0 ]; then
        if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
            sudo=(sudo)
        else
            say "error: installing $* needs root; run this script as root or with sudo rights" >&2
            exit 1
        fi
    fi
    export DEBIAN_FRONTEND=noninteractive
    say "running: apt-get update"
    "${sudo[@]}" apt-get update -q
    say "running: apt-get install -y $*"
    "${sudo[@]}" apt-get install -y -q "$@"
}
