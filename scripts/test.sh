#!/usr/bin/env bash
# The whole test suite on a fresh machine: system tools, the default model, then every test,
# including the real-model ones (llama.cpp reference, prompt boundary, real probabilities, the
# remote backend against a real llama.cpp server), the
# UI's unit tests, and the desktop app end to end under Xvfb.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/setup-model.sh >/dev/null
# EmbeddingGemma-300M: the shipped heads read it, and its reference test checks it against its
# NumPy oracle.
bash scripts/setup-encoder.sh >/dev/null
# llama.cpp's server, for the remote backend's tests against a real inference server.
AEGIS_LLAMA_SERVER="$(bash scripts/setup-llama-server.sh)"
export AEGIS_LLAMA_SERVER
# EmbeddingGemma as a GGUF with its dense projections, for the heads' tests through
# `llama-server --embeddings` (--encoder-server).
AEGIS_ENCODER_GGUF="$(bash scripts/setup-encoder-gguf.sh | tail -1)"
export AEGIS_ENCODER_GGUF
# schemathesis, for the test that holds /openapi.json to what a live server does.
AEGIS_SCHEMATHESIS="$(bash scripts/setup-schemathesis.sh)"
export AEGIS_SCHEMATHESIS
# OpenAI's Python client, for the test that drives `aegis serve --upstream` as a prototype would.
AEGIS_OPENAI_PYTHON="$(bash scripts/setup-openai-client.sh)"
export AEGIS_OPENAI_PYTHON
bash scripts/build-ui.sh
cargo fmt --all -- --check
# No two source files import each other, directly or round a loop.
python3 scripts/import-cycles.py
# The user guide builds and every link in it and the README resolves.
bash scripts/check-docs.sh
(cd ui && npm run --silent check && npm test --silent)
# The product's `aegis` leaves the research commands out: it must not link aegis-adapt.
if cargo tree --locked -p aegis-cli -e normal --prefix none | grep -q '^aegis-adapt '; then
  echo "test: aegis-cli links aegis-adapt without the lab feature" >&2
  exit 1
fi
# The models are set up above: a test that needs one must run, never be ignored for lack of it.
export AEGIS_REQUIRE_MODELS=1
# The lab feature too, so the research commands' tests run.
workspace=(--workspace --locked --features aegis-cli/lab)
cargo test "${workspace[@]}"
# The history tests once more on a real PostgreSQL (Debian's, a throwaway cluster on 127.0.0.1),
# so both engines pass the same tests: the store's, the HTTP server's and the console's binaries
# (but the console on a model server, whose history is its own SQLite file), and the CLI's tests
# of what it keeps in history (a check recorded and reviewed, a team, an import killed and
# resumed, examples, head versions, reviews trained on and exported). Each test makes a database
# of its own there (crates/aegis-scratch-db). The binaries are the ones just built: `cargo test
# -p …` would build the crates again with other features.
built="$(cargo test "${workspace[@]}" --no-run --message-format=json 2>/dev/null)"
test_binary() { python3 scripts/test-binary.py "$1" <<<"$built"; }
pg_dir="$(mktemp -d /tmp/aegis-test-postgres.XXXXXX)"
trap 'bash scripts/postgres.sh stop "$pg_dir" >/dev/null 2>&1 || true; rm -rf "$pg_dir"' EXIT
AEGIS_TEST_POSTGRES_URL="$(bash scripts/postgres.sh start "$pg_dir")"
export AEGIS_TEST_POSTGRES_URL
for crate in aegis-store aegis-server aegis-app; do
  binary="$(test_binary "crates/$crate/tests/tests.rs")"
  (cd "crates/$crate" && "$binary" --skip a_model_server_in_settings)
done
cli_tests="$(test_binary crates/aegis-cli/tests/tests.rs)"
(cd crates/aegis-cli && "$cli_tests" history:: teach::examples_merge teach::taught_examples \
  eval::reviewed_history heads::reviews_join)
unset AEGIS_TEST_POSTGRES_URL
bash scripts/e2e.sh
