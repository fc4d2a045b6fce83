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
# shellcheck source=scripts/apt-install.sh
source "$(dirname "${BASH_SOURCE[0]}")/apt-install.sh"

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
apt_install "Open MPI (mpirun, mpicc and its headers) and libclang" "${missing[@]}"

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
