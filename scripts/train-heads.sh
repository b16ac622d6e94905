#!/usr/bin/env bash
# Retrains the shipped heads in prompt_guard/heads/ from the permissive training data there, and
# tunes each validator's threshold by nested cross-validation (written only when it measures better).
# Deterministic: the same model, templates and data give the same files, bit for bit.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-model.sh >/dev/null
cargo run --release --locked -p aegis-cli -- train \
    --model default \
    --prompts prompt_guard \
    --data prompt_guard/heads/dev-permissive.jsonl \
    --data prompt_guard/heads/authored.jsonl \
    --tune-thresholds \
    "$@"
