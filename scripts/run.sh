#!/usr/bin/env bash
# Sets up everything on a fresh machine (system tools, the default model and encoder, the UI) and
# opens the desktop console on them:
#   scripts/run.sh
# With arguments it runs the aegis command line instead:
#   scripts/run.sh check "Bagaimana cara top up saldo?"
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/setup-model.sh >/dev/null
# EmbeddingGemma-300M: the shipped heads read its sentence embedding.
bash scripts/setup-encoder.sh >/dev/null
if [ $# -gt 0 ]; then
  exec cargo run --quiet --release -p aegis-cli -- "$@"
fi
bash scripts/build-ui.sh
exec cargo run --quiet --release -p aegis-console
