#!/usr/bin/env bash
# Held-out-source ROC AUC of today's training recipe against issue 64's own baseline, c409b5c
# (the guide's research note, "Against the issue's own baseline"). Comparing each candidate only
# with the heads just before it let small steps add up unseen; this retrains both recipes with
# the same binary, over several fold dealings, and compares them on the rows both trained on,
# per language and per public source (`compare-scores.py --by-source`).
#
#   scripts/research/baseline-auc.sh OUT VALIDATOR [FOLDS...]      # FOLDS default: 4 5 6 7
#
# The baseline: c409b5c's six data files and flags (no hidden layer, no writers' rows; toxic's
# contempt reading as then), trained by the lab release build. Today's: scripts/train-heads.sh
# itself (built with the lab feature), with EXTRA_DATA (space-separated files) added to its data
# to measure a candidate's rows, and EXTRA_ARGS (space-separated) added to its flags to measure a
# candidate's training (`EXTRA_ARGS="--by-language harassment"`). Both leave AMX out and write nothing but OUT; a dry run takes
# 15 s to 3 min here.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=$1
key=$2
shift 2
folds=("$@")
[ ${#folds[@]} -gt 0 ] || folds=(4 5 6 7)
baseline=c409b5c
aegis=target/release/aegis
heads=prompt_guard/heads
mkdir -p "$out/baseline-data"
for file in dev-permissive train-1 train-2 authored authored-benign benign-real authored-contempt; do
  git show "$baseline:$heads/$file.jsonl" > "$out/baseline-data/$file.jsonl"
done
baseline_data=()
for file in dev-permissive train-1 train-2 authored authored-benign benign-real; do
  baseline_data+=(--data "$out/baseline-data/$file.jsonl")
done
baseline_reading=()
if [ "$key" = toxic ]; then
  baseline_reading=(--reading "toxic:contempt=$out/baseline-data/authored-contempt.jsonl"
    --reading-budget 0.002 --reading-layers 16)
fi
extra_data=()
for file in ${EXTRA_DATA:-}; do
  extra_data+=(--data "$file")
done
read -r -a extra_args <<<"${EXTRA_ARGS:-}"

train_baseline() { # FOLDS
  local k=$1
  AEGIS_CPU_KERNELS_OFF="${AEGIS_CPU_KERNELS_OFF:+$AEGIS_CPU_KERNELS_OFF,}amx-bf16" "$aegis" train --model default --encoder-weights precise --prompts prompt_guard \
    --layers embedding --tune-thresholds --benign-budget 0.01 \
    "${baseline_data[@]}" ${baseline_reading[@]+"${baseline_reading[@]}"} \
    --folds "$k" --dry-run --scores-out "$out/baseline-$key-$k.jsonl" "$key" \
    > "$out/baseline-$key-$k.log" 2>&1
}
cargo build --release --locked -q -p aegis-cli --features lab
for k in "${folds[@]}"; do
  train_baseline "$k"
  AEGIS_TRAIN_FEATURES=lab scripts/train-heads.sh ${extra_data[@]+"${extra_data[@]}"} \
    ${extra_args[@]+"${extra_args[@]}"} --folds "$k" --dry-run --scores-out "$out/today-$key-$k.jsonl" "$key" \
    > "$out/today-$key-$k.log" 2>&1
  echo "== $key, $k folds: $baseline's recipe -> today's"
  python3 scripts/research/compare-scores.py --by-source \
    "$out/baseline-$key-$k.jsonl" "$out/today-$key-$k.jsonl"
done
