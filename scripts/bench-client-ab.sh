#!/usr/bin/env bash
# The project's regression bench of its own client: `servegate bench-client`
# cells run by this tree's release build and by a reference build,
# alternating, REPEATS times each, with medians and new/ref ratios — a
# machine's noise moves both alike, so read the ratios. Where oha is on the
# PATH (a raw-HTTP load tool that parses no tokens: the floor), its CPU per
# token against the same stamped simulator is measured beside them.
#
#   scripts/bench-client-ab.sh [REF]
#
# REF: a commit (default: HEAD when the tree has changes, else HEAD~1),
# built once into target/bench-ab/<commit>/ (a full release build the
# first time), or SERVEGATE_REF_BIN=path/to/servegate to skip the build.
# CELLS (default "paced unpaced slow"; "big" adds 10,000 streams), REPEATS
# (default 3), DURATION (default 5s), OUT (default target/bench-ab/last.txt);
# SERVEGATE_NEW_BIN names this tree's build instead of building it (the
# `smoke` cell, two streams, is tests/cli/bench_client.rs's). HISTORY=path
# (or a postgres:// URL) keeps every run's rows in that run history under
# its commit (`bench-client --history`): this tree's as HEAD's hash
# (`+dirty` with changes), REF's as its hash, or REF_COMMIT's with
# SERVEGATE_REF_BIN (a build without `--history` is not kept; a
# PostgreSQL URL's password shows in `ps` on the command line: use
# PGPASSWORD);
# `servegate history --history path list` reads them.
set -euo pipefail
# A relative HISTORY names a file where the script was started.
if [ -n "${HISTORY:-}" ] && [[ $HISTORY != /* && $HISTORY != postgres://* && $HISTORY != postgresql://* ]]; then
    HISTORY=$PWD/$HISTORY
fi
cd "$(dirname "$0")/.."
repeats=${REPEATS:-3}
duration=${DURATION:-5s}
cells=${CELLS:-paced unpaced slow}
out=${OUT:-target/bench-ab/last.txt}

ref_commit=${REF_COMMIT:-}
if [ -n "${SERVEGATE_REF_BIN:-}" ]; then
    ref_bin=$SERVEGATE_REF_BIN
    ref_name=$ref_bin
else
    ref=${1:-}
    if [ -z "$ref" ]; then
        if git diff --quiet HEAD; then ref=HEAD~1; else ref=HEAD; fi
    fi
    commit=$(git rev-parse --verify "$ref^{commit}")
    ref_commit=$commit
    dir=target/bench-ab/$commit
    ref_bin=$dir/target/release/servegate
    ref_name="$ref ($(git log -1 --format='%h %s' "$commit" | cut -c1-60))"
    if [ ! -x "$ref_bin" ]; then
        echo "bench-client-ab: building $ref_name into $dir" >&2
        mkdir -p "$dir/src"
        git archive "$commit" | tar -x -C "$dir/src"
        cargo build --release --quiet --manifest-path "$dir/src/Cargo.toml" --target-dir "$dir/target"
    fi
fi
if [ -n "${SERVEGATE_NEW_BIN:-}" ]; then
    new_bin=$SERVEGATE_NEW_BIN
else
    cargo build --release --quiet
    new_bin=target/release/servegate
fi
mkdir -p "$(dirname "$out")"
new_commit=$(git rev-parse HEAD)
git diff --quiet HEAD || new_commit="$new_commit+dirty"
# Each side's bench-client options, asked once: a reference can be older
# than some of them.
declare -A help=(
    [ref]=$("$ref_bin" bench-client --help 2>/dev/null || true)
    [new]=$("$new_bin" bench-client --help 2>/dev/null || true)
)
# What a side's runs add to bench-client's arguments: the history, where
# the build has it (a reference older than `--history` has not).
keep() {
    local who=$1 commit=$2
    if [ -n "${HISTORY:-}" ] && [ -n "$commit" ] && [[ ${help[$who]} == *--history* ]]; then
        printf '%s\n' --history "$HISTORY" --commit "$commit"
    fi
}

# Each cell: a name and bench-client's arguments.
declare -A args=(
    [paced]="--itl 10ms --tokens 128 --streams 1,64,256"
    [unpaced]="--itl 0ms --tokens 256 --streams 512 --pack 16"
    [slow]="--itl 100ms --tokens 32 --streams 1000,4000"
    [big]="--itl 100ms --tokens 32 --streams 10000"
    [smoke]="--itl 5ms --tokens 8 --streams 2"
)
# The tables themselves, kept beside the summary (the TTFT breakdown is in them).
raw=${out%.txt}.raw
rm -rf "$raw" && mkdir -p "$raw"
for cell in $cells; do
    [ -n "${args[$cell]:-}" ] || { echo "bench-client-ab: no cell $cell (paced, unpaced, slow, big, smoke)" >&2; exit 2; }
    # At 100 ms a token a 32-token answer takes 3.2 s: a longer window.
    case $cell in slow | big) d=10s ;; *) d=$duration ;; esac
    for i in $(seq 1 "$repeats"); do
        for who in ref new; do
            bin=$ref_bin
            kept=$ref_commit
            if [ "$who" = new ]; then bin=$new_bin; kept=$new_commit; fi
            if [[ ${args[$cell]} == *--pack* ]] && [[ ${help[$who]} != *--pack* ]]; then
                echo "bench-client-ab: $bin has no --pack (before 212a76e): the $cell cell needs it; leave it out with CELLS" >&2
                exit 2
            fi
            mapfile -t history < <(keep "$who" "$kept")
            echo "bench-client-ab: $cell, $who, run $i of $repeats" >&2
            # shellcheck disable=SC2086
            "$bin" bench-client ${args[$cell]} --duration "$d" ${history[@]+"${history[@]}"} >"$raw/$cell.$who.$i" 2>&1 \
                || { echo "bench-client-ab: $who failed on $cell:" >&2; cat "$raw/$cell.$who.$i" >&2; exit 1; }
        done
        # The floor, between the same repeats: the paced cell's streams,
        # and the unpaced one's.
        if command -v oha >/dev/null 2>&1; then
            case $cell in
                paced) floor=(1 64 256) ;;
                unpaced) floor=(512) ;;
                *) floor=() ;;
            esac
            for streams in ${floor[@]+"${floor[@]}"}; do
                echo "bench-client-ab: $cell, oha, $streams streams, run $i of $repeats" >&2
                python3 scripts/bench-client-ab.py oha "$new_bin" "$cell" "$streams" >>"$raw/oha"
            done
        fi
    done
done
python3 scripts/bench-client-ab.py summary "$raw" "$ref_name" "$(git describe --always --dirty)" | tee "$out"
