#!/usr/bin/env bash
# Regenerates what the wheel and the release archives install beside the
# binary (packaging/wheel-data/data/share/): the manual pages and the
# completions of bash, zsh and fish, from the command line's own
# definition. tests/cli/manual.rs keeps them equal to what the binary
# prints, and says to run this when they differ.
#
#   scripts/generate-share.sh [SERVEGATE]   # default: cargo run's binary
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-}
if [ -z "$bin" ]; then
    cargo build --quiet
    bin=target/debug/servegate
fi
share=packaging/wheel-data/data/share
rm -rf "$share"
mkdir -p "$share/man/man1" "$share/bash-completion/completions" \
    "$share/zsh/site-functions" "$share/fish/vendor_completions.d"
"$bin" man --dir "$share/man/man1"
"$bin" completions bash >"$share/bash-completion/completions/servegate"
"$bin" completions zsh >"$share/zsh/site-functions/_servegate"
"$bin" completions fish >"$share/fish/vendor_completions.d/servegate.fish"
echo "generate-share: $(find "$share" -type f | wc -l) files in $share"
