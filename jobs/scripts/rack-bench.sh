#!/usr/bin/env bash
# Skein's rack mode against MPI on the same ranks, in one go: request throughput (echo), one
# blocking round trip (ping) and fetch-and-add on counters spread over the ranks, each beside
# its rsmpi baselines (AML-style aggregation, one message per request, ping-pong, aggregated
# increments and one-sided MPI_Accumulate), and what an empty round costs across the ranks
# (no MPI baseline). Rank 0 prints every table; the rows are also written as JSON.
#
# Usage:
#   jobs/scripts/rack-bench.sh [RANKS [OUT_DIR]]
#     RANKS    ranks to launch (default 2)
#     OUT_DIR  where echo.json, ping.json, fetch-add.json and rounds.json go (default
#              reports/rack-bench)
#
# Needs Open MPI (scripts/install-mpi.sh installs it). The commands it runs, under
# `mpirun -np RANKS` (one worker per rank, the MPI side one thread per rank):
#   skein bench echo --mpi --workers 1 --sizes 8,32,256,4096 --seconds 1 --repeat 3
#   skein bench ping --mpi --sizes 8,4096 --repeat 3
#   skein bench fetch-add --mpi --workers 1 --impls apply_then,array \
#       --objects 1,1024,1000000 --dist uniform --ops 4000000 --repeat 3
#   skein bench rounds --rounds 2000 --repeat 3
#
# Environment:
#   SKEIN        the skein binary to run (default: build target/release/skein with
#                `cargo build --release -p skein-jobs --features mpi` and use it)
#   MPIRUN       the MPI launcher (default mpirun)
#   MPIRUN_ARGS  extra launcher arguments, split on whitespace, e.g. "--hostfile hosts".
#                With Open MPI the script adds --oversubscribe --bind-to none (and
#                --allow-run-as-root when run as root) before them.
#   QUICK=1      tiny sizes (seconds in all): checks that everything runs, measures nothing
#   SKEIN_TRANSPORT  the transport of the Skein rows: auto (default: shared-memory rings
#                when every rank runs on one node), mpi or shm
set -euo pipefail

ranks=${1:-2}
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${2:-$root/reports/rack-bench}
if ! [[ "$ranks" =~ ^[0-9]+$ ]] || ((ranks < 2)); then
    echo "rack-bench.sh: RANKS must be a whole number of at least 2, got '$ranks'" >&2
    exit 2
fi
mpirun=${MPIRUN:-mpirun}
if ! command -v "$mpirun" >/dev/null; then
    echo "rack-bench.sh: '$mpirun' not found; install Open MPI with scripts/install-mpi.sh" >&2
    exit 1
fi
if [[ -z "${SKEIN:-}" ]]; then
    echo "building skein with the mpi feature..." >&2
    (cd "$root" && cargo build --release -p skein-jobs --features mpi >&2)
    SKEIN=$root/target/release/skein
fi
launch=("$mpirun")
if "$mpirun" --version 2>/dev/null | grep -q "Open MPI"; then
    launch+=(--oversubscribe --bind-to none)
    if [[ $(id -u) == 0 ]]; then
        launch+=(--allow-run-as-root)
    fi
fi
# shellcheck disable=SC2206 # split on whitespace, as documented
launch+=(${MPIRUN_ARGS:-} -np "$ranks" "$SKEIN")
mkdir -p "$out"

if [[ "${QUICK:-}" == 1 ]]; then
    echo_args=(--sizes 8,4096 --requests 2000)
    ping_args=(--sizes 8 --iters 200)
    add_args=(--objects 1,7 --ops 5000)
    rounds_args=(--rounds 20 --repeat 1)
else
    echo_args=(--sizes 8,32,256,4096 --seconds 1 --repeat 3)
    ping_args=(--sizes 8,4096 --repeat 3)
    add_args=(--objects 1,1024,1000000 --ops 4000000 --repeat 3)
    rounds_args=(--rounds 2000 --repeat 3)
fi

set -x
"${launch[@]}" bench echo --mpi --workers 1 "${echo_args[@]}" --json "$out/echo.json"
"${launch[@]}" bench ping --mpi "${ping_args[@]}" --json "$out/ping.json"
"${launch[@]}" bench fetch-add --mpi --workers 1 --impls apply_then,array --dist uniform \
    "${add_args[@]}" --json "$out/fetch-add.json"
"${launch[@]}" bench rounds "${rounds_args[@]}" --json "$out/rounds.json"
