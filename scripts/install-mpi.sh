#!/usr/bin/env bash
# Installs what skein's rack mode (cargo feature `mpi`) needs to build and run: Open MPI
# (`mpirun`, and `mpicc` with the headers) and libclang (rsmpi generates its MPI bindings with
# bindgen). Debian package names: openmpi-bin, libopenmpi-dev, libclang-dev.
#
# Installs only what is missing, with apt-get, and says what it does. Needs root (or sudo) and
# apt-get; anywhere else it names what to install by hand and fails. The default build
# (without the feature) needs none of this.
#
# Usage: scripts/install-mpi.sh
set -euo pipefail

say() { echo "install-mpi: $*"; }

missing=()
if command -v mpirun >/dev/null 2>&1; then
    say "mpirun found: $(command -v mpirun)"
else
    missing+=(openmpi-bin)
fi
if command -v mpicc >/dev/null 2>&1; then
    say "mpicc found: $(command -v mpicc)"
else
    missing+=(libopenmpi-dev)
fi
have_libclang() {
    if [ -n "${LIBCLANG_PATH:-}" ] && ls "$LIBCLANG_PATH"/libclang*.so* >/dev/null 2>&1; then
        return 0
    fi
    if command -v ldconfig >/dev/null 2>&1 &&
        ldconfig -p 2>/dev/null | grep -Eq 'libclang(-[0-9.]+)?\.so'; then
        return 0
    fi
    # libclang.so itself (libclang-NN.so on some releases), not libclang-cpp.so, which
    # Open MPI's dependencies can bring without it and bindgen cannot load.
    compgen -G '/usr/lib/llvm-*/lib/libclang.so*' >/dev/null ||
        compgen -G '/usr/lib/llvm-*/lib/libclang-[0-9]*.so*' >/dev/null
}
if have_libclang; then
    say "libclang found"
else
    missing+=(libclang-dev)
fi

if [ ${#missing[@]} -eq 0 ]; then
    say "nothing to install"
    exit 0
fi

say "missing: ${missing[*]}"
if ! command -v apt-get >/dev/null 2>&1; then
    say "error: apt-get not found (not a Debian-like system): install Open MPI" \
        "(mpirun, mpicc and its headers) and libclang with this system's package manager" >&2
    exit 1
fi
if [ "$(id -u)" -eq 0 ]; then
    sudo=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    sudo=(sudo)
else
    say "error: installing ${missing[*]} needs root;" \
        "run this script as root or with sudo rights" >&2
    exit 1
fi

export DEBIAN_FRONTEND=noninteractive
say "running: apt-get update"
"${sudo[@]}" apt-get update -q
say "running: apt-get install -y ${missing[*]}"
"${sudo[@]}" apt-get install -y -q "${missing[@]}"

for cmd in mpirun mpicc; do
    if ! command -v "$cmd" >/dev/null 2>&1; then
        say "error: $cmd still not found after installing ${missing[*]}" >&2
        exit 1
    fi
done
if ! have_libclang; then
    say "error: libclang still not found after installing ${missing[*]}" >&2
    exit 1
fi
say "installed: ${missing[*]} ($(mpirun --version 2>/dev/null | head -n1))"
