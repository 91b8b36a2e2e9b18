#!/usr/bin/env bash
# What `pip install servegate` gives a user, checked end to end: builds the
# wheel with maturin (pyproject.toml: `bindings = "bin"`, the version
# pyproject's build-system pins), installs it into a fresh venv and runs the
# shipped suite against the embedded simulator with the installed binary,
# then the one-step action's script (scripts/action-run.sh) with that wheel.
# A release build (minutes): run by .github/workflows/ci.yml, not .ci/run.
#
#   scripts/wheel-smoke.sh            # the wheel lands in target/wheels/
#
# Under GitHub Actions it sets the step output `wheel` (the wheel's path).
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

maturin=$(python3 -c 'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["build-system"]["requires"][0])')
python3 -m venv "$work/build"
"$work/build/bin/pip" install --quiet "$maturin"
rm -f target/wheels/servegate-*.whl
start=$SECONDS
"$work/build/bin/maturin" build --release --locked --out target/wheels
wheel=$(ls target/wheels/servegate-*.whl)
echo "wheel-smoke: $wheel, $(du -k "$wheel" | cut -f1) KiB, built in $((SECONDS - start)) s"

# A user's path from here on: a fresh venv, the wheel, the first result.
start=$SECONDS
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install --quiet --no-index "$wheel"
servegate="$work/venv/bin/servegate"
# The venv's own copy, not a link into target/.
[ -f "$servegate" ] && [ ! -L "$servegate" ]
"$servegate" --version
# The manual pages and completions under the venv's prefix, as generated.
for f in man/man1/servegate.1 man/man1/servegate-run.1 bash-completion/completions/servegate \
    zsh/site-functions/_servegate fish/vendor_completions.d/servegate.fish; do
    cmp "$work/venv/share/$f" "packaging/wheel-data/data/share/$f"
done
"$servegate" run suites/sglang.yaml --out-dir "$work/out"
test -s "$work/out/latest/report.json"
echo "wheel-smoke: fresh venv to the first result in $((SECONDS - start)) s"

# The one-step action's script, installing the same wheel as `version`.
summary="$work/summary.md"
INPUT_VERSION="$wheel" INPUT_SUITES=suites/sglang.yaml RUNNER_TEMP="$work/action" \
    GITHUB_STEP_SUMMARY="$summary" GITHUB_OUTPUT="$work/action-output" \
    bash scripts/action-run.sh
grep -q "servegate: .* passed, 0 failed" "$summary"
if [ -n "${GITHUB_OUTPUT:-}" ]; then
    echo "wheel=$wheel" >>"$GITHUB_OUTPUT"
fi
echo "wheel-smoke: ok"
