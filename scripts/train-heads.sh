#!/usr/bin/env bash
# Retrains the shipped heads in prompt_guard/heads/ from the permissive training data there, and
# sets each validator's threshold to the highest recall that flags at most 1.5% of the benign rows
# on out-of-fold scores: the target is 2% on messages the heads never saw, and a threshold cut at
# exactly 2% of these rows measured 2.2% under nested cross-validation (spam), so the cut keeps a
# margin. Layers 6, 8 and 11 are the candidates: the issue-17 measurement found the middle layers
# best, and each candidate costs about 25 s per validator to cross-validate here.
# Deterministic: the same model, data and machine give the same files, bit for bit.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-model.sh >/dev/null
cargo run --release --locked -p aegis-cli -- train \
    --model default \
    --prompts prompt_guard \
    --data prompt_guard/heads/dev-permissive.jsonl \
    --data prompt_guard/heads/train-1.jsonl \
    --data prompt_guard/heads/train-2.jsonl \
    --data prompt_guard/heads/authored.jsonl \
    --layers 6,8,11 \
    --tune-thresholds \
    --benign-budget 0.015 \
    "$@"
