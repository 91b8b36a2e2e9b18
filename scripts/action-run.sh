#!/usr/bin/env bash
# The shell half of action.yml (the one-step GitHub Action), runnable by
# hand: installs servegate without a Rust toolchain (the wheel from PyPI
# into a venv of its own), runs the suites and exits with servegate's
# status (0 passed, 1 a trial failed, 2 a bad suite, 3 an unreachable
# target or failed launch, 4 the filter matched no trial, 130
# interrupted), or with 9 when servegate could not be installed (a code
# servegate never returns, so a failed install never reads as a failed
# trial). servegate itself appends the Markdown report to
# $GITHUB_STEP_SUMMARY and prints the annotations (an invalid suite's at
# its line); a failed run's status and its meaning are added to the
# summary here.
#
# Inputs, as the action passes them:
#   INPUT_SUITES   suite files or directories, separated by spaces or lines
#                  (empty: servegate's default, suites/)
#   INPUT_TARGET   a server URL (empty: each suite's own target, the
#                  embedded simulator unless the suite names a server)
#   INPUT_FILTER   a libtest filter (empty: every trial)
#   INPUT_EXACT    `true`: the filter matches whole trial names only
#   INPUT_SKIP     trial names (substrings, or whole with INPUT_EXACT) to
#                  skip, separated by spaces or lines
#   INPUT_CLIENT_THREADS  client threads of every gate (empty: the suites')
#   INPUT_CLIENT_LIMITED  `fail` or `warn` for a gate whose client was the
#                  bottleneck (empty: the suites')
#   INPUT_VERSION  a servegate version on PyPI, `latest`, a path to a wheel
#                  or to a directory of wheels (installed from there alone),
#                  or a servegate executable (used as it is); empty: this
#                  checkout's Cargo.toml version
#
#   INPUT_VERSION=target/wheels/servegate-….whl INPUT_SUITES=suites/sglang.yaml scripts/action-run.sh
#
# Outputs ($GITHUB_OUTPUT): `run-dir`, the directory of the run records
# (runs/<run>/ and latest/) and the history's page (history.html), which
# the action uploads.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
temp=${RUNNER_TEMP:-$(mktemp -d)}
out="$temp/servegate-out"
mkdir -p "$out"
if [ -n "${GITHUB_OUTPUT:-}" ]; then
    echo "run-dir=$out" >>"$GITHUB_OUTPUT"
fi

absolute() { echo "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"; }
# The inputs are checked before anything is installed: a wrong one exits 2
# at once, said as an annotation and in the summary.
bad_input() {
    echo "::error title=servegate action::$1"
    if [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then
        printf '\n**servegate action: an input is invalid** (exit 2): %s; no suite ran.\n' "$1" >>"$GITHUB_STEP_SUMMARY"
    fi
    exit 2
}
case ${INPUT_CLIENT_LIMITED:-} in
    '' | fail | warn) ;;
    *) bad_input "client-limited must be fail or warn, not '${INPUT_CLIENT_LIMITED}'" ;;
esac
case ${INPUT_EXACT:-} in
    '' | true | false) ;;
    *) bad_input "exact must be true or false, not '${INPUT_EXACT}'" ;;
esac
case ${INPUT_CLIENT_THREADS:-} in
    '') ;;
    *[!0-9]* | 0*) bad_input "client-threads must be a number from 1 to 256, not '${INPUT_CLIENT_THREADS}'" ;;
    *)
        if [ "${#INPUT_CLIENT_THREADS}" -gt 3 ] || [ "$INPUT_CLIENT_THREADS" -gt 256 ]; then
            bad_input "client-threads must be a number from 1 to 256, not '${INPUT_CLIENT_THREADS}'"
        fi
        ;;
esac
# The action's own code for "servegate could not be installed".
not_installed=9
install_failed() {
    echo "::error title=servegate action::servegate could not be installed: $1"
    if [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then
        printf '\n**servegate could not be installed** (exit %s): %s; no suite ran.\n' \
            "$not_installed" "$1" >>"$GITHUB_STEP_SUMMARY"
    fi
    exit "$not_installed"
}
version=${INPUT_VERSION:-}
if [ -z "$version" ]; then
    version=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$here/Cargo.toml" | head -n 1)
fi
if [ -f "$version" ] && [ -x "$version" ]; then
    bin=$(absolute "$version")
else
    pip_args=()
    case $version in
        latest) pip_args=(servegate) ;;
        *.whl) pip_args=(--no-index "$(absolute "$version")") ;;
        */* | .)
            [ -d "$version" ] || install_failed "no wheel directory $version"
            pip_args=(--no-index --find-links "$(absolute "$version")" servegate)
            ;;
        *) pip_args=("servegate==$version") ;;
    esac
    venv="$temp/servegate-venv"
    echo "servegate action: pip install ${pip_args[*]} into $venv"
    python3 -m venv "$venv" || install_failed "python3 -m venv $venv failed"
    "$venv/bin/pip" install --quiet --disable-pip-version-check "${pip_args[@]}" \
        || install_failed "pip install ${pip_args[*]} failed (the log above says why)"
    bin="$venv/bin/servegate"
fi
"$bin" --version || install_failed "$bin does not run"

set -f # suite names are paths, not patterns
# shellcheck disable=SC2206 # split on spaces and lines, by design
suites=(${INPUT_SUITES:-})
set +f
args=(run ${suites[@]+"${suites[@]}"} --out-dir "$out")
if [ -n "${INPUT_TARGET:-}" ]; then
    args+=(--target "$INPUT_TARGET")
fi
if [ -n "${INPUT_CLIENT_THREADS:-}" ]; then
    args+=(--client-threads "$INPUT_CLIENT_THREADS")
fi
if [ -n "${INPUT_CLIENT_LIMITED:-}" ]; then
    args+=(--client-limited "$INPUT_CLIENT_LIMITED")
fi
libtest=()
if [ -n "${INPUT_FILTER:-}" ]; then
    libtest+=("$INPUT_FILTER")
fi
if [ "${INPUT_EXACT:-}" = true ]; then
    libtest+=(--exact)
fi
set -f
# shellcheck disable=SC2206 # split on spaces and lines, by design
skips=(${INPUT_SKIP:-})
set +f
for skip in ${skips[@]+"${skips[@]}"}; do
    libtest+=(--skip "$skip")
done
if [ ${#libtest[@]} -gt 0 ]; then
    args+=(-- "${libtest[@]}")
fi

echo "servegate action: servegate ${args[*]}"
status=0
"$bin" "${args[@]}" || status=$?
# servegate's own report is in the summary already; a failed run also says
# why it failed in words, since an invalid suite or an unreachable target
# may leave a report of no trials at all.
summary=${GITHUB_STEP_SUMMARY:-}
if [ -n "$summary" ] && [ "$status" -ne 0 ]; then
    case $status in
        1) why="a trial failed" ;;
        2) why="a suite file is invalid (its annotation says where), or an argument is" ;;
        3) why="a target could not be reached or a server failed to launch" ;;
        4) why="the filter matched no trial" ;;
        130) why="the run was interrupted (its record holds what was measured)" ;;
        *) why="servegate stopped unexpectedly (it crashed or was killed)" ;;
    esac
    printf '\n**servegate exited with %s: %s**; the job log says where.\n' "$status" "$why" >>"$summary"
fi
# The history's page beside the records (uploaded with them): every key
# figure's series the history holds (a team's PostgreSQL: every runner's),
# changes of level marked. The history is SERVEGATE_HISTORY where the
# workflow names one (a team's PostgreSQL, a cached SQLite file), else the
# run's own; a page that cannot be drawn is said, never a changed status.
case ${SERVEGATE_HISTORY:-} in
    off | none) ;;
    *)
        "$bin" history --out-dir "$out" report -o "$out/history.html" \
            || echo "servegate action: no history page (the history could not be read)"
        ;;
esac
echo "servegate action: exit $status, run records in $out"
exit "$status"
