#!/usr/bin/env bash
# Imports point one way: checks the `crate::` paths of every crate of the workspace.
#
# * In every crate named on the command line (default: every member of the workspace), the top-level modules (`src/x.rs` or `src/x/`) import each other without
#   a cycle.
# * In the framework (`framework/src`), a top-level module imports only modules of the
#   layers below its own, in the order written at the top of `docs/ARCHITECTURE.md` (the
#   `LAYERS` list below is that order, bottom first). A module missing from the list is an
#   error: a new module gets its place in the document and here.
#
# Read: every `crate::name` in code (comments skipped), with `name` a top-level module or an
# item the crate root re-exports (`pub use module::...` in lib.rs, resolved to its module).
# Test code (files named `tests.rs` or `*_tests.rs`, and `#[cfg(test)]` modules and `use`
# lines) may use the whole crate, as the integration tests do, and is not read.
#
# Usage: scripts/check-layers.sh [CRATE_DIR...] (from anywhere; default: every member of the
# workspace, as the root Cargo.toml lists them; exits 1
# naming each offending file, line and import).
set -euo pipefail
cd "$(dirname "$0")/.."

# The framework's layers, bottom first: each module may import the ones before it.
LAYERS=(
    sync plain error run_ids stats fiber # base, each on the ones before it
    property                             # a property's memory
    channel                              # in-process lanes; no wire format
    wire                                 # bytes that leave a process; no handles
    rack                                 # the MPI bootstrap and the end of a run over ranks
    transport                            # the seam and its flavours
    runtime                              # workers, the loop, quiescence, reference counts
    trust                                # the handles and the delegation calls
    forge                                # test hook: a forged envelope (uses the handles)
)

# Known upward imports still to be inverted, each "FILE MODULE reason": FILE may import MODULE
# for now (reported as a note, not an error, and left out of the cycle search). Keep it short.
ALLOWED=(
)

status=0
crates=("$@")
if [[ ${#crates[@]} -eq 0 ]]; then
    # The workspace members: `members = ["a", "b", ...]` in the root Cargo.toml.
    read -r -a crates <<<"$(sed -n 's/^members *= *\[\(.*\)\]/\1/p' Cargo.toml | tr -d '",')"
fi
for crate in "${crates[@]}"; do
    crate=${crate%/}
    src=$crate/src
    root=$src/lib.rs
    [[ -f $root ]] || root=$src/main.rs
    if [[ ! -f $root ]]; then
        echo "error: $crate is not a crate folder (no src/lib.rs or src/main.rs)" >&2
        status=1
        continue
    fi
    layers=""
    if [[ $crate == framework ]]; then
        layers=$(printf '%s\n' "${LAYERS[@]}")
    fi
    allowed=$(printf '%s\n' "${ALLOWED[@]+"${ALLOWED[@]}"}")
    # Top-level modules: src/x.rs and src/x/ (the root file itself excluded).
    mods=$(find "$src" -mindepth 1 -maxdepth 1 \( -name '*.rs' -o -type d \) -printf '%f\n' |
        sed "s/\.rs$//" | { grep -v -x -e lib -e main || true; } | sort -u)
    files=$(find "$src" -name '*.rs' ! -path "$root" | sort)
    [[ -n $files ]] || continue
    # shellcheck disable=SC2086
    awk -v crate="$crate" -v src="$src/" -v root="$root" -v mods="$mods" -v layers="$layers" \
        -v allowed="$allowed" '
    function top_of(path,   rest, i) {
        rest = substr(path, length(src) + 1)
        i = index(rest, "/")
        if (i > 0) return substr(rest, 1, i - 1)
        sub(/\.rs$/, "", rest)
        return rest
    }
    function strip_comment(s,   i) {
        i = index(s, "//")
        if (i > 0) s = substr(s, 1, i - 1)
        return s
    }
    BEGIN {
        nm = split(mods, m, "\n")
        for (i = 1; i <= nm; i++) if (m[i] != "") ismod[m[i]] = 1
        nl = split(layers, l, "\n")
        for (i = 1; i <= nl; i++) level[l[i]] = i
        na = split(allowed, a, "\n")
        for (i = 1; i <= na; i++) if (a[i] != "") { split(a[i], p, " "); r = a[i]; sub(/^[^ ]+ [^ ]+ /, "", r); allow[p[1] " " p[2]] = r }
        # The crate root re-exports: `pub use module::...;` (possibly over several lines).
        stmt = ""
        while ((getline line < root) > 0) {
            if (stmt == "" && line !~ /^[ \t]*pub use /) continue
            stmt = stmt " " line
            if (line !~ /;/) continue
            s = stmt; stmt = ""
            sub(/^[ \t]*pub use[ \t]+/, "", s)
            first = s; sub(/::.*/, "", first); gsub(/[ \t]/, "", first)
            if (!(first in ismod)) continue
            gsub(/[{},;]/, " ", s)
            n = split(s, w, /[ \t]+/)
            for (i = 1; i <= n; i++) {
                name = w[i]; sub(/.*::/, "", name)
                if (name ~ /^[A-Za-z_][A-Za-z0-9_]*$/ && name != "self") reexport[name] = first
            }
        }
        close(root)
        bad = 0
    }
    FNR == 1 { skip_depth = -1; pending_test = 0; is_test = (FILENAME ~ /(^|\/|_)tests\.rs$/) }
    {
        if (is_test) next
        line = $0
        if (skip_depth >= 0) {
            t = line; opened = gsub(/\{/, "{", t); closed = gsub(/\}/, "}", t)
            skip_depth += opened - closed
            if (skip_depth <= 0) skip_depth = -1
            next
        }
        if (line ~ /^[ \t]*\/\//) next
        if (line ~ /^[ \t]*#\[cfg\((all\()?test[,)]/) { pending_test = 1; next }
        if (pending_test) {
            if (line ~ /^[ \t]*#\[/) next
            pending_test = 0
            if (line ~ /^[ \t]*(pub(\([a-z]+\))? )?mod [a-z_0-9]+ *\{/) {
                t = line; skip_depth = gsub(/\{/, "{", t) - gsub(/\}/, "}", t)
                if (skip_depth <= 0) skip_depth = -1
                next
            }
            if (line ~ /^[ \t]*use /) next
        }
        code = strip_comment(line)
        from = top_of(FILENAME)
        while (match(code, /crate::(\{|[A-Za-z_][A-Za-z0-9_]*)/)) {
            name = substr(code, RSTART + 7, RLENGTH - 7)
            code = substr(code, RSTART + RLENGTH)
            where = FILENAME ":" FNR
            if (name == "{") {
                group_names(code, where)
                code = ""
                continue
            }
            check(name, where)
        }
    }
    # The names at depth 1 of a group `crate::{a::x, b, c::{..}}` (`text`: what follows its
    # `{`), reading on over the next lines while the group is open.
    function group_names(text, where,   depth, c, i, tok) {
        depth = 1; tok = ""
        while (1) {
            for (i = 1; i <= length(text); i++) {
                c = substr(text, i, 1)
                if (c == "{") { depth++; continue }
                if (c == "}") {
                    depth--
                    if (depth == 0) { if (tok != "#") check(tok, where); return }
                    continue
                }
                if (depth != 1) continue
                if (c == ",") { if (tok != "#") check(tok, where); tok = ""; continue }
                if (c == ":") { if (tok != "#") check(tok, where); tok = "#"; continue }
                if (c ~ /[A-Za-z0-9_]/ && tok != "#") tok = tok c
            }
            if ((getline text) <= 0) return
            text = strip_comment(text)
        }
    }
    function check(name, where,   to) {
        if (name == "self" || name == "") return
        {
            to = ""
            if (name in ismod) to = name
            else if (name in reexport) to = reexport[name]
            else {
                printf "%s: `crate::%s` names an item of the crate root; name the module it lives in\n", where, name
                bad = 1; return
            }
            if (to == from) return
            if ((FILENAME " " to) in allow) {
                if (!((FILENAME " " to) in noted)) { noted[FILENAME " " to] = 1; printf "note: %s imports `%s`, allowed for now: %s\n", FILENAME, to, allow[FILENAME " " to] }
                return
            }
            edge[from " " to] = 1
            if (!((from " " to) in first_at)) first_at[from " " to] = where ": crate::" name
            if (layers != "") {
                if (!(from in level)) { if (!(from in unplaced)) { unplaced[from] = 1; printf "%s: module `%s` has no layer: give it one in docs/ARCHITECTURE.md and scripts/check-layers.sh\n", where, from; bad = 1 } ; return }
                if (!(to in level)) return
                if (level[to] >= level[from]) {
                    printf "%s: `%s` (layer %d) imports `crate::%s` (module `%s`, layer %d): a module imports only the layers below its own (docs/ARCHITECTURE.md)\n", where, from, level[from], name, to, level[to]
                    bad = 1
                }
            }
        }
    }
    function dfs(v,   k, p, w2) {
        color[v] = 1; stack[++sp] = v
        for (k in edge) {
            split(k, p, " ")
            if (p[1] != v) continue
            w2 = p[2]
            if (color[w2] == 1) {
                cyc = ""
                for (q = sp; q >= 1; q--) { cyc = stack[q] (cyc == "" ? "" : " -> ") cyc; if (stack[q] == w2) break }
                key = cyc " -> " w2
                if (!(key in seen_cycle)) {
                    seen_cycle[key] = 1
                    printf "%s: a cycle between top-level modules: %s -> %s (closing import: %s)\n", crate, cyc, w2, first_at[v " " w2]
                    cycles = 1
                }
            } else if (color[w2] == 0) dfs(w2)
        }
        color[v] = 2; sp--
    }
    END {
        for (k in edge) { split(k, p, " "); node[p[1]] = 1; node[p[2]] = 1 }
        cycles = 0; sp = 0
        for (v in node) if (color[v] == 0) dfs(v)
        if (cycles) bad = 1
        exit bad
    }' $files || status=1
done

if [[ $status -ne 0 ]]; then
    echo "error: imports go against the layering (see docs/ARCHITECTURE.md, \"Layers\")" >&2
    exit 1
fi
echo "layers: every crate's top-level modules import one way"
