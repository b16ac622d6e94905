#!/usr/bin/env bash
# Retrains the shipped heads in prompt_guard/heads/ from the permissive training data there, and
# sets each validator's threshold to the highest recall that flags at most 1.5% of the benign rows
# on out-of-fold scores.
# Every choice (regularisation, layers, threshold) is made on folds that hold out whole sources
# (`--validation by-source`, the default): a user's traffic comes from sources no head saw, and
# random folds, which put one source on both sides of a split, overstate what it will see. The
# report prints the held-out-source figure first and the random-fold one beside it, then what each
# source's rows score at the chosen threshold.
# The benign budget is held on real messages people sent to assistants (benign-real.jsonl) and
# authored benign traffic; benign-holdout.jsonl and benign-real-holdout.jsonl are never trained on.
# The shipped heads read EmbeddingGemma-300M (prompt_guard/heads/*.json): on held-out sources it
# beats the 270M's hidden states on every validator (README, "Why the shipped heads read
# EmbeddingGemma"). Each validator chooses between the mean of the encoder's residual stream after
# layer 12 (a verdict whose heads all read it stops halfway through the encoder) and its sentence
# embedding (all 24 layers), on held-out sources; of two within 0.001 the cheaper wins. Layers
# 4 to 20 and concatenations were compared once (README); 12 and the embedding were the best.
# `scripts/train-heads.sh --encoder decoder` retrains the 270M's heads instead
# (prompt_guard/heads/decoder/, each with the threshold tuned with it); layers 6, 8 and 11 are
# their candidates, the issue-17 measurement having found the middle layers best.
# Give validator names to retrain only those (two at a time fit the 2-core machine).
# Deterministic: the same model, data and machine give the same files, bit for bit.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-model.sh >/dev/null
scripts/setup-encoder.sh >/dev/null
layers=12,embedding
args=" $* --encoder=${AEGIS_ENCODER:-} "
case "$args" in
  *" --encoder decoder "* | *" --encoder=decoder "*) layers=6,8,11 ;;
esac
cargo run --release --locked -p aegis-cli -- train \
    --model default \
    --prompts prompt_guard \
    --data prompt_guard/heads/dev-permissive.jsonl \
    --data prompt_guard/heads/train-1.jsonl \
    --data prompt_guard/heads/train-2.jsonl \
    --data prompt_guard/heads/authored.jsonl \
    --data prompt_guard/heads/authored-benign.jsonl \
    --data prompt_guard/heads/benign-real.jsonl \
    --layers "$layers" \
    --tune-thresholds \
    --benign-budget 0.015 \
    "$@"
