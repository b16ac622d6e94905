#!/usr/bin/env bash
# Installs the UI's locked npm packages and builds ui/dist, which the app embeds.
set -euo pipefail
cd "$(dirname "$0")/../ui"
[ -d node_modules ] && [ node_modules/.package-lock.json -nt package-lock.json ] || npm ci --no-fund --no-audit
npm run build --silent
