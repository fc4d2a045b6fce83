#!/usr/bin/env bash
# Installs what skein's RDMA verbs transport (cargo feature `rdma`) needs to build: the
# rdma-core development files (libibverbs and librdmacm with their headers and pkg-config
# files: rdma-sys links both and generates its bindings from their headers with bindgen) and
# libclang (bindgen). Debian package names: libibverbs-dev, librdmacm-dev, libclang-dev.
# Running the transport needs an RDMA device with an active port besides (none here:
# docs/rack-mode.md §4.6); building and linting need only this.
#
# Installs only what is missing, with apt-get, and says what it does. Needs root (or sudo) and
# apt-get; anywhere else it names what to install by hand and fails. The default build
# (without the feature) needs none of this. The `rdma` feature implies `mpi`: run
# scripts/install-mpi.sh too.
#
# Usage: scripts/install-rdma.sh
set -euo pipefail

say() { echo "install-rdma: $*"; }

missing=()
for lib in libibverbs librdmacm; do
    if pkg-config --exists "$lib" 2>/dev/null; then
        say "$lib found ($(pkg-config --modversion "$lib"))"
    else
        missing+=("$lib-dev")
    fi
done
if ! command -v pkg-config >/dev/null 2>&1; then
    missing+=(pkg-config)
fi
if compgen -G '/usr/lib/llvm-*/lib/libclang.so*' >/dev/null ||
    compgen -G '/usr/lib/llvm-*/lib/libclang-[0-9]*.so*' >/dev/null ||
    { [ -n "${LIBCLANG_PATH:-}" ] && ls "$LIBCLANG_PATH"/libclang*.so* >/dev/null 2>&1; }; then
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
    say "error: apt-get not found (not a Debian-like system): install the rdma-core" \
        "development files (libibverbs, librdmacm, their pkg-config files) and libclang" \
        "with this system's package manager" >&2
    exit 1
fi
if [ "$(id -u)" -eq 0 ]; then
    sudo=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    sudo=(sudo)
else
    say "error: installing ${missing[*]} needs root; run this script as root or with sudo rights" >&2
    exit 1
fi

export DEBIAN_FRONTEND=noninteractive
say "running: apt-get update"
"${sudo[@]}" apt-get update -q
say "running: apt-get install -y ${missing[*]}"
"${sudo[@]}" apt-get install -y -q "${missing[@]}"

for lib in libibverbs librdmacm; do
    if ! pkg-config --exists "$lib"; then
        say "error: $lib still not found by pkg-config after installing ${missing[*]}" >&2
        exit 1
    fi
done
say "installed: ${missing[*]}"
