#!/usr/bin/env bash
# End-to-end tests: builds the UI and the app, then drives the real app (real model, a fresh
# data folder, a scratch copy of the templates) in WebKitGTK through tauri-driver under Xvfb.
# Screenshots and timings land in $AEGIS_SCREENSHOTS (default target/e2e-screenshots).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
target=${CARGO_TARGET_DIR:-$root/target}
shots=${AEGIS_SCREENSHOTS:-$target/e2e-screenshots}

bash scripts/build-ui.sh
# The same targets and features as scripts/test.sh's `cargo test --workspace` (tests included, so dev-dependencies' features
# unify the same way): after the test run this only links the app, where `-p aegis-console`
# alone resolved other features and rebuilt much of the dependency tree.
cargo build --workspace --bins --tests --locked --features aegis-cli/lab
app="$target/debug/aegis-console"

scratch=$(mktemp -d)
# Apart from $scratch (mode 0700): as root the server runs as the postgres user.
postgres_dir=$(mktemp -d /tmp/aegis-e2e-postgres.XXXXXX)
cleanup() {
  [ -n "${driver_pid:-}" ] && kill "$driver_pid" 2>/dev/null || true
  bash scripts/postgres.sh stop "$postgres_dir" >/dev/null 2>&1 || true
  rm -rf "$postgres_dir"
  [ -n "${xvfb_pid:-}" ] && kill "$xvfb_pid" 2>/dev/null || true
  rm -rf "$scratch"
}
trap cleanup EXIT

cp -r prompt_guard "$scratch/prompts"
# The Teach test trains on the labelled files beside the heads: a small authored sample stands in
# for the shipped 12,000 rows, which an empty feature cache would take many minutes to encode.
rm "$scratch/prompts/heads/"*.jsonl
cp ui/e2e/fixtures/teach-data.jsonl ui/e2e/fixtures/teach-benign-holdout.jsonl "$scratch/prompts/heads/"
mkdir -p "$scratch/data" "$shots"

# The team's history for the two-window test (ui/e2e/team.test.mjs): a throwaway PostgreSQL.
postgres_url=$(bash scripts/postgres.sh start "$postgres_dir")

display=:$((90 + RANDOM % 100))
Xvfb "$display" -screen 0 1400x900x24 -nolisten tcp >/dev/null 2>&1 &
xvfb_pid=$!
port=$((4500 + RANDOM % 400))
# The app inherits this environment through tauri-driver and WebKitWebDriver.
DISPLAY=$display AEGIS_DATA_DIR="$scratch/data" AEGIS_PROMPTS="$scratch/prompts" \
  RUST_LOG=${RUST_LOG:-info} \
  tauri-driver --port "$port" --native-port $((port + 1000)) >"$shots/app.log" 2>&1 &
driver_pid=$!
for _ in $(seq 50); do
  curl -sf "http://127.0.0.1:$port/status" >/dev/null 2>&1 && break
  sleep 0.2
done

AEGIS_WEBDRIVER="http://127.0.0.1:$port" AEGIS_APP="$app" AEGIS_PROMPTS="$scratch/prompts" \
  AEGIS_SCREENSHOTS="$shots" AEGIS_E2E_HTTP_PORT=$((18000 + RANDOM % 1000)) \
  DISPLAY=$display AEGIS_E2E_POSTGRES_URL="$postgres_url" AEGIS_E2E_TEAM_PORT=$((port + 2)) \
  node --test --test-concurrency=1 ui/e2e/
echo "e2e: screenshots and timings in $shots"
