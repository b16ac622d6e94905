#!/usr/bin/env bash
# Every held-back kind of issue "Read who says it" at once: the rows of kinds-holdout.jsonl, the
# contempt-holdout files, exclamation-holdout.jsonl and address-holdout.jsonl (never trained on)
# through `aegis check`, then each kind's rate per language pooled over the files, as
# scripts/kinds-report.py prints it for one file. Ten rows a kind and language in one file move
# a rate by a tenth a row; pooled, the contempt rows are 62 a language.
#
#     scripts/held-back-report.sh                    # the shipped templates and heads
#     scripts/held-back-report.sh --prompts DIR      # any `aegis check` options
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
held=docs/held-back
cat "$held/kinds-holdout.jsonl" "$held"/contempt-holdout*.jsonl \
  "$held/exclamation-holdout.jsonl" "$held/address-holdout.jsonl" > "$work/held-back.jsonl"
status=0
cargo run --release --locked -q -p aegis-cli -- check --file "$work/held-back.jsonl" --json \
  --no-history "$@" > "$work/verdicts.json" || status=$?
# `aegis check` exits 1 when a message fails a validator, which held-back rows are written to do.
[ "$status" -le 1 ] || exit "$status"
python3 scripts/kinds-report.py "$work/held-back.jsonl" "$work/verdicts.json"
