#!/usr/bin/env bash
# The figures issue 47's closing note compares before and after, counted
# the same way each time (run it at any commit; it reads src/ only):
#   - src files over 600 lines (whole files, unit tests included);
#   - functions returning `Result<_, String>`, in all of src/ and in the
#     harness, record and report floors;
#   - public items: lines declaring a `pub` (not `pub(crate)`) fn, struct,
#     enum, trait, type, const, static, mod or use;
#   - locks in the harness: `Mutex<` and `RwLock<` written in src/harness/.
set -euo pipefail
cd "$(dirname "$0")/.."
over=$(find src -name '*.rs' -exec wc -l {} + | awk '$2 != "total" && $1 > 600' | sort -rn)
echo "src files over 600 lines: $(printf '%s' "$over" | grep -c . || true)"
[ -z "$over" ] || printf '%s\n' "$over" | sed 's/^/  /'
strings() { grep -rE -- '-> *(std::result::)?Result<.*, *String>' "$@" | grep -c . || true; }
echo "fns returning Result<_, String>: $(strings src) (harness $(strings src/harness), record $(strings src/record), report $(strings src/report))"
echo "pub items: $(grep -rE '^\s*pub (fn|async fn|struct|enum|trait|type|const|static|mod|use) ' src | grep -c .)"
echo "locks in src/harness: $(grep -rE '(Mutex|RwLock)<' src/harness | grep -c . || true)"
