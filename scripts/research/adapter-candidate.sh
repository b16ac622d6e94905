#!/usr/bin/env bash
# Measures an encoder-adapter candidate (issue "Read who says it") on the tables the issue asks
# for, without touching prompt_guard/ or the history database: a copy of the templates with the
# adapter (or `none`, the plain encoder) in its heads/, every head retrained on it as
# scripts/train-heads.sh does (held-out-source ROC AUC and thresholds in train.txt), then the
# held-back kinds (kinds.txt), the never-trained benign messages (benign.txt) and, when OUT/../
# has none, the dev set's Indonesian tweets (tweets.txt: `--tweets FILE`).
# EXTRA_DATA (space-separated files) adds training rows to the shipped data: the per-kind data
# lever the issue compares against. The second set of held-back contempt rows is reported in
# contempt.txt.
#
#   scripts/research/adapter-candidate.sh ADAPTER|none OUT [TWEETS.jsonl [OUT-OF-FOLD]]
# OUT-OF-FOLD: the heads train on these embeddings of their rows (`aegis adapt --cross-fit K
# --out-of-fold FILE` with the adapter's settings and data) instead of the adapter's own reading.
# Needs the lab release build (cargo build --release -p aegis-cli --features lab).
set -euo pipefail
cd "$(dirname "$0")/../.."
adapter=$1
out=$2
tweets=${3:-}
out_of_fold=()
if [ -n "${4:-}" ]; then
  out_of_fold=(--out-of-fold "$4")
fi
aegis=target/release/aegis
heads=prompt_guard/heads
mkdir -p "$out"
rm -rf "$out/pg"
cp -r prompt_guard "$out/pg"
rm -f "$out/pg/heads/encoder-adapter.safetensors"
if [ "$adapter" != none ]; then
  cp "$adapter" "$out/pg/heads/encoder-adapter.safetensors"
fi
export AEGIS_DB="$out/history.db"
start=$(date +%s)
$aegis train --model default --prompts "$out/pg" \
  --data $heads/dev-permissive.jsonl --data $heads/train-1.jsonl --data $heads/train-2.jsonl \
  --data $heads/authored.jsonl --data $heads/authored-benign.jsonl --data $heads/benign-real.jsonl \
  ${EXTRA_DATA:+$(printf -- '--data %s ' $EXTRA_DATA)} \
  --layers embedding --tune-thresholds --benign-budget 0.01 "${out_of_fold[@]}" > "$out/train.txt" 2>&1
echo "heads retrained in $(( $(date +%s) - start )) s" >> "$out/train.txt"
$aegis check --prompts "$out/pg" --file docs/held-back/kinds-holdout.jsonl --json --no-history > "$out/kinds.json" || true
python3 scripts/kinds-report.py docs/held-back/kinds-holdout.jsonl "$out/kinds.json" > "$out/kinds.txt"
$aegis check --prompts "$out/pg" --file docs/held-back/contempt-holdout.jsonl --json --no-history > "$out/contempt.json" || true
python3 scripts/kinds-report.py docs/held-back/contempt-holdout.jsonl "$out/contempt.json" > "$out/contempt.txt"
$aegis eval --prompts "$out/pg" prompt_guard/heads/benign-real-holdout.jsonl --no-store > "$out/benign.txt" 2>&1
$aegis eval --prompts "$out/pg" prompt_guard/heads/benign-holdout.jsonl --no-store > "$out/benign-authored.txt" 2>&1
if [ -n "$tweets" ]; then
  $aegis eval --prompts "$out/pg" "$tweets" --no-store > "$out/tweets.txt" 2>&1
fi
grep -h -A12 "held-out" "$out/train.txt" | head -40 || true
cat "$out/kinds.txt" "$out/contempt.txt"
