#!/usr/bin/env bash
# Sets up everything on a fresh machine (system tools, the default model) and runs aegis on it.
#   scripts/run.sh check "Bagaimana cara top up saldo?"
# With no arguments it checks a sample message.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/setup-model.sh >/dev/null
[ $# -gt 0 ] || set -- check "Bagaimana cara top up saldo?"
exec cargo run --quiet --release -p aegis-cli -- "$@"
