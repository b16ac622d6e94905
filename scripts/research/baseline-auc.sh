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
# contempt reading as then). Today's: scripts/train-heads.sh's data and flags, with OUT_DATA
# (space-separated files) in place of its data when set, to measure a candidate's rows. Both leave
# AMX out as train-heads.sh does and write nothing but OUT. Needs the lab release build
# (cargo build --release -p aegis-cli --features lab); a dry run takes 15 s to 3 min here.
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
export AEGIS_CPU_KERNELS_OFF="${AEGIS_CPU_KERNELS_OFF:+$AEGIS_CPU_KERNELS_OFF,}amx-bf16"
mkdir -p "$out/baseline-data"
for file in dev-permissive train-1 train-2 authored authored-benign benign-real authored-contempt; do
  git show "$baseline:$heads/$file.jsonl" > "$out/baseline-data/$file.jsonl"
done
baseline_data=()
for file in dev-permissive train-1 train-2 authored authored-benign benign-real; do
  baseline_data+=(--data "$out/baseline-data/$file.jsonl")
done
today_data=()
for file in ${OUT_DATA:-$heads/dev-permissive.jsonl $heads/train-1.jsonl $heads/train-2.jsonl \
    $heads/authored.jsonl $heads/authored-benign.jsonl $heads/benign-real.jsonl \
    $heads/authored-writers.jsonl $heads/authored-writers-harassment.jsonl}; do
  today_data+=(--data "$file")
done
baseline_reading=()
today_reading=()
if [ "$key" = toxic ]; then
  baseline_reading=(--reading "toxic:contempt=$out/baseline-data/authored-contempt.jsonl"
    --reading-budget 0.002 --reading-layers 16)
  today_reading=(--reading "toxic:contempt=$heads/authored-contempt.jsonl" --reading-budget 0.002
    --reading-layers 16)
fi
today_hidden=()
case $key in toxic | harassment) today_hidden=(--hidden "$key:64") ;; esac
train() { # NAME FOLDS FLAGS...
  local name=$1 k=$2
  shift 2
  "$aegis" train --model default --encoder-weights precise --prompts prompt_guard \
    --layers embedding --tune-thresholds --benign-budget 0.01 "$@" \
    --folds "$k" --dry-run --scores-out "$out/$name-$key-$k.jsonl" "$key" \
    > "$out/$name-$key-$k.log" 2>&1
}
for k in "${folds[@]}"; do
  train baseline "$k" "${baseline_data[@]}" ${baseline_reading[@]+"${baseline_reading[@]}"}
  train today "$k" "${today_data[@]}" ${today_reading[@]+"${today_reading[@]}"} \
    ${today_hidden[@]+"${today_hidden[@]}"}
  echo "== $key, $k folds: $baseline's recipe -> today's"
  python3 scripts/research/compare-scores.py --by-source \
    "$out/baseline-$key-$k.jsonl" "$out/today-$key-$k.jsonl"
done
