#!/usr/bin/env bash
# The whole test suite on a fresh machine: system tools, the default model, then every test,
# including the real-model ones (llama.cpp reference, prompt boundary, real probabilities).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/setup-model.sh >/dev/null
cargo fmt --all -- --check
cargo test --workspace --locked
