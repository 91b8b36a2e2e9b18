#!/usr/bin/env bash
# Runs a command with the machine loaded the way busy hosts are: stress-ng
# workers on every core for the CPU, its caches and its memory (what a GPU
# host's own processes, a compiler or another test run do beside
# servegate). A test that passes only on an idle machine fails here.
# Plain spin loops are scheduled politely and miss what this load finds.
#
#   scripts/under-load.sh cargo test --no-fail-fast
#
# stress-ng comes from Debian's packages (installed when missing); it
# stops when the command does, and after an hour in any case.
set -euo pipefail
if ! command -v stress-ng >/dev/null 2>&1; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq stress-ng) >/dev/null 2>&1 \
        || { echo "under-load: stress-ng could not be installed" >&2; exit 1; }
fi
n=$(nproc)
stress-ng --cpu "$n" --cache "$n" --vm "$n" --vm-bytes 512M --timeout 3600s --quiet &
load=$!
trap 'kill "$load" 2>/dev/null || true; wait "$load" 2>/dev/null || true' EXIT
# Let every worker start before the command does.
sleep 2
echo "under-load: stress-ng --cpu $n --cache $n --vm $n --vm-bytes 512M running beside: $*" >&2
"$@"
