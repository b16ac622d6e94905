#!/usr/bin/env bash
# Retrains the shipped heads in prompt_guard/heads/ from the permissive training data there, and
# sets each validator's threshold to the highest recall that flags at most 2% of the benign rows
# (nested cross-validation reports what that choice scores on rows it never saw).
# Deterministic: the same model, data and machine give the same files, bit for bit.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-model.sh >/dev/null
cargo run --release --locked -p aegis-cli -- train \
    --model default \
    --prompts prompt_guard \
    --data prompt_guard/heads/dev-permissive.jsonl \
    --data prompt_guard/heads/train.jsonl \
    --data prompt_guard/heads/authored.jsonl \
    --tune-thresholds \
    "$@"
