#!/usr/bin/env bash
# Miri over the framework's unsafe modules whose unit tests Miri can run: the record
# queues, batches and slots (`channel`), the rings, their wake-up words and the ranks' board
# (under the detector's all-reduce), the export table, the proxies, the property slabs and
# the codec. Not run by CI: it needs a nightly toolchain with Miri (`rustup toolchain install
# nightly --component miri rust-src`, a download) and takes about twelve minutes on a 2-core
# machine.
#
# What Miri cannot run: a fiber switch (inline assembly, `fiber/mod.rs`), MPI, a second
# process, `readlink` or `dl_iterate_phdr` (`wire::code_id`, which the envelopes' validation
# uses: the rest of `wire`), and, in reasonable time, the fuzz tests of the envelopes (10^5
# cases) and of the codec (`random_bytes_never_abort`). Leaks are not checked: the slabs'
# blocks are never freed by design (`property/slab.rs`, invariant 1) and the export tests
# leak their stand-in properties.
#
#   bash scripts/miri.sh            # every module below
#   bash scripts/miri.sh channel::  # the modules whose path starts with the argument
set -euo pipefail
cd "$(dirname "$0")/.."

export MIRIFLAGS="${MIRIFLAGS:--Zmiri-permissive-provenance -Zmiri-ignore-leaks}"
modules=(channel:: transport::wake transport::ring:: runtime::quiesce_ranks::shm
    runtime::export::tests runtime::proxy::tests property::slab wire::codec)

ran=0
for m in "${modules[@]}"; do
    [[ -n "${1:-}" && "$m" != "$1"* ]] && continue
    echo "== miri: $m"
    cargo +nightly miri test -p skein --lib "$m" -- --skip code_id --skip fuzz --skip random_bytes
    ran=$((ran + 1))
done
if ((ran == 0)); then
    echo "error: no module of this script starts with '$1' (${modules[*]})" >&2
    exit 1
fi
