#!/usr/bin/env bash
# The user guide (docs/guide, an mdBook) builds, and no relative link in it, the README or the
# other Markdown under docs/ is broken (scripts/check-links.py: files and #anchors; web links are
# not checked). mdBook is installed once from crates.io into a cache outside the clone
# (AEGIS_TOOLS_DIR, default ~/.cache/aegis/tools); the book is built into a temporary folder.
#
#     bash scripts/check-docs.sh
#     AEGIS_GUIDE_OUT=/tmp/aegis-guide bash scripts/check-docs.sh    # keep the built book there to read it
set -euo pipefail
cd "$(dirname "$0")/.."
version=0.5.4
tools="${AEGIS_TOOLS_DIR:-$HOME/.cache/aegis/tools}"
mdbook="$tools/bin/mdbook"
if ! "$mdbook" --version 2>/dev/null | grep -qx "mdbook v$version"; then
  echo "check-docs: installing mdbook $version into $tools (once; about 10 minutes on two cores)" >&2
  cargo install mdbook --version "$version" --locked --root "$tools" --quiet
fi
if [[ -n "${AEGIS_GUIDE_OUT:-}" ]]; then
  mkdir -p "$AEGIS_GUIDE_OUT"
  out=$(cd "$AEGIS_GUIDE_OUT" && pwd)
else
  out=$(mktemp -d)
  trap 'rm -rf "$out"' EXIT
fi
"$mdbook" build docs/guide --dest-dir "$out"
test -f "$out/index.html"
python3 scripts/check-links.py README.md docs prompt_guard/heads/README.md
