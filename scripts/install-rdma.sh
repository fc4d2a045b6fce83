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
# shellcheck source=scripts/apt-install.sh
source "$(dirname "${BASH_SOURCE[0]}")/apt-install.sh"

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
apt_install "the rdma-core development files (libibverbs, librdmacm, their pkg-config files) and libclang" "${missing[@]}"

for lib in libibverbs librdmacm; do
    if ! pkg-config --exists "$lib"; then
        say "error: $lib still not found by pkg-config after installing ${missing[*]}" >&2
        exit 1
    fi
done
say "installed: ${missing[*]}"
