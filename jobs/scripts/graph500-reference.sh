#!/usr/bin/env bash
# Builds and runs the official Graph500 MPI reference 3.0.1 (graph500/graph500, branch
# `newreference`, commit f89d643ce4aaae9a823d310c6ab2dd10e3d2982c) for `skein compare
# --engines ...,graph500-mpi`. The reference's source is never stored in this repository:
# it comes from GRAPH500_SRC, or is cloned into the cache when GRAPH500_SRC is unset.
#
# Usage:
#   graph500-reference.sh build                      build (or reuse) the binary, print its path
#   graph500-reference.sh run SCALE EDGEFACTOR RANKS build, then run
#                                                    graph500_reference_bfs_sssp SCALE EDGEFACTOR
#                                                    under mpirun -np RANKS; its stdout goes to
#                                                    stdout, everything else to stderr
#
# Environment:
#   GRAPH500_SRC     an unmodified source tree of the reference at the commit above (the folder
#                    holding src/, generator/ and aml/). Unset: the commit is cloned into
#                    $SKEIN_CACHE/graph500-f89d643 (needs git and the network).
#   SKEIN_CACHE      the cache folder (default ${XDG_CACHE_HOME:-$HOME/.cache}/skein); builds
#                    go to $SKEIN_CACHE/graph500-build/KEY, one per source tree and mpicc.
#   MPICC            the MPI C compiler (default mpicc).
#   MPIRUN           the MPI launcher (default mpirun).
#   MPIRUN_ARGS      extra launcher arguments, split on whitespace, e.g. "--hostfile hosts".
#                    With Open MPI the script adds --oversubscribe --bind-to none (and
#                    --allow-run-as-root when run as root) before them.
#   SKIP_BFS, SKIP_VALIDATION   passed to the reference, which reads them itself.
set -euo pipefail
# Command substitutions (`src=$(source_tree)`) run in subshells, which do not inherit
# `set -e` by default: without this a failure inside one (a `die`) would end only that
# subshell and the caller would carry on with an empty value. The `|| exit` after each
# substitution below makes the caller stop too.
shopt -s inherit_errexit

COMMIT=f89d643ce4aaae9a823d310c6ab2dd10e3d2982c
REPO_URL=https://github.com/graph500/graph500.git
BINARY=graph500_reference_bfs_sssp

die() {
    echo "graph500-reference: error: $*" >&2
    exit 1
}
note() {
    echo "graph500-reference: $*" >&2
}

usage() {
    sed -n '7,13p' "$0" >&2 2>/dev/null || true
    die "usage: graph500-reference.sh build | run SCALE EDGEFACTOR RANKS"
}

cache_root() {
    if [[ -n "${SKEIN_CACHE:-}" ]]; then
        echo "$SKEIN_CACHE"
    elif [[ -n "${XDG_CACHE_HOME:-}" ]]; then
        echo "$XDG_CACHE_HOME/skein"
    elif [[ -n "${HOME:-}" ]]; then
        echo "$HOME/.cache/skein"
    else
        die "no cache folder: set SKEIN_CACHE, XDG_CACHE_HOME or HOME"
    fi
}

# Prints the source tree: GRAPH500_SRC, or a clone of the pinned commit in the cache.
source_tree() {
    local src
    if [[ -n "${GRAPH500_SRC:-}" ]]; then
        src=$GRAPH500_SRC
        [[ -d "$src" ]] || die "GRAPH500_SRC=$src is not a folder"
        if [[ -d "$src/.git" ]] && command -v git >/dev/null; then
            local head
            head=$(git -C "$src" rev-parse HEAD 2>/dev/null || true)
            if [[ -n "$head" && "$head" != "$COMMIT" ]]; then
                note "warning: GRAPH500_SRC is at commit $head, not the pinned $COMMIT"
            fi
        fi
    else
        src="$(cache_root)/graph500-${COMMIT:0:7}"
        if [[ ! -f "$src/src/main.c" ]]; then
            command -v git >/dev/null ||
                die "GRAPH500_SRC is not set and git is not installed to clone the reference; set GRAPH500_SRC to a source tree of graph500/graph500 at commit $COMMIT"
            note "GRAPH500_SRC is not set: cloning $REPO_URL at $COMMIT into $src"
            local tmp="$src.tmp.$$"
            rm -rf "$tmp"
            mkdir -p "$tmp"
            if ! (git -C "$tmp" init -q &&
                git -C "$tmp" remote add origin "$REPO_URL" &&
                git -C "$tmp" fetch -q --depth 1 origin "$COMMIT" &&
                git -C "$tmp" checkout -q FETCH_HEAD) >&2; then
                rm -rf "$tmp"
                die "GRAPH500_SRC is not set and cloning $REPO_URL (commit $COMMIT) failed (no network?); set GRAPH500_SRC to a source tree of the reference at that commit"
            fi
            rm -rf "$src"
            mv "$tmp" "$src"
        fi
    fi
    for f in src/main.c src/Makefile generator/make_graph.c aml/aml.c; do
        [[ -f "$src/$f" ]] || die "${GRAPH500_SRC:+GRAPH500_SRC=}$src is not a Graph500 reference tree: $f is missing"
    done
    (cd "$src" && pwd)
}

# Builds the binary in a copy of the tree under the cache (the source stays untouched) and
# prints its path. Rebuilds when a source file is newer than the binary.
build() {
    local src mpicc key dir log
    src=$(source_tree) || exit 1
    mpicc=${MPICC:-mpicc}
    command -v "$mpicc" >/dev/null ||
        die "$mpicc not found: the Graph500 reference needs an MPI C compiler (install Open MPI or MPICH, or set MPICC)"
    key=$(printf '%s\n%s\n' "$src" "$(command -v "$mpicc")" | cksum | cut -d' ' -f1)
    dir="$(cache_root)/graph500-build/$key"
    if [[ -x "$dir/src/$BINARY" ]] &&
        [[ -z "$(find "$src" -newer "$dir/src/$BINARY" -type f -print -quit)" ]]; then
        echo "$dir/src/$BINARY"
        return
    fi
    note "building $BINARY from $src in $dir"
    # Built in a private folder and renamed into place, so that concurrent builds of the
    # same tree do not trip over each other.
    local work="$dir.tmp.$$"
    rm -rf "$work"
    mkdir -p "$work"
    cp -R "$src/src" "$src/generator" "$src/aml" "$work/"
    log="$work/build.log"
    # The stock Makefile flags, plus -fcommon: the reference defines globals in headers,
    # which GCC 10 and later reject without it.
    if ! make -C "$work/src" MPICC="$mpicc -fcommon" "$BINARY" >"$log" 2>&1; then
        echo "---- last lines of $log ----" >&2
        tail -n 30 "$log" >&2
        die "building $BINARY failed (full log: $log)"
    fi
    [[ -x "$work/src/$BINARY" ]] || die "the build did not produce $work/src/$BINARY (log: $log)"
    rm -rf "$dir"
    mv "$work" "$dir" 2>/dev/null || [[ -x "$dir/src/$BINARY" ]] || die "cannot move $work to $dir"
    rm -rf "$work"
    echo "$dir/src/$BINARY"
}

is_uint() {
    [[ "$1" =~ ^[0-9]+$ ]]
}

run() {
    [[ $# -eq 3 ]] || usage
    local scale=$1 ef=$2 ranks=$3 bin mpirun
    is_uint "$scale" && ((scale >= 1 && scale <= 42)) || die "SCALE must be an integer in 1..42, not '$scale'"
    is_uint "$ef" && ((ef >= 1)) || die "EDGEFACTOR must be a positive integer, not '$ef'"
    is_uint "$ranks" && ((ranks >= 1)) || die "RANKS must be a positive integer, not '$ranks'"
    # common.h defines SIZE_MUST_BE_A_POWER_OF_TWO: any other count aborts.
    (((ranks & (ranks - 1)) == 0)) || die "RANKS must be a power of two (the reference aborts otherwise), not $ranks"
    bin=$(build) || exit 1
    mpirun=${MPIRUN:-mpirun}
    command -v "$mpirun" >/dev/null || die "$mpirun not found: set MPIRUN to the MPI launcher"
    local args=()
    if "$mpirun" --version 2>/dev/null | grep -q "Open MPI"; then
        args+=(--oversubscribe --bind-to none)
        [[ $(id -u) -eq 0 ]] && args+=(--allow-run-as-root)
    fi
    local extra=()
    # shellcheck disable=SC2206 # word splitting is the documented behaviour
    [[ -n "${MPIRUN_ARGS:-}" ]] && extra=(${MPIRUN_ARGS})
    note "running $mpirun ${args[*]} ${extra[*]} -np $ranks $bin $scale $ef"
    local status=0
    "$mpirun" "${args[@]}" "${extra[@]}" -np "$ranks" "$bin" "$scale" "$ef" || status=$?
    ((status == 0)) || die "$BINARY $scale $ef under $mpirun -np $ranks failed with exit status $status"
}

case "${1:-}" in
build)
    [[ $# -eq 1 ]] || usage
    build
    ;;
run)
    shift
    run "$@"
    ;;
*) usage ;;
esac
