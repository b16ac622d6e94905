#!/usr/bin/env bash
# The guarded chat endpoint's cost, side by side: the default model on a real llama.cpp server,
# asked directly and through `aegis serve --upstream` (release build), by OpenAI's Python client.
#   scripts/bench-guarded-chat.sh [ROUNDS]      (default 3 rounds of 4 prompts per way)
# AEGIS_BIN names an aegis binary to use instead of building the release one. UPSTREAM_THREADS
# (default: every core) gives llama.cpp fewer threads; with RAYON_NUM_THREADS for the guard, the
# two can be kept on separate cores, as a guard beside a GPU server would be.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-3}"
llama="$(bash scripts/setup-llama-server.sh)"
python="$(bash scripts/setup-openai-client.sh)"
model_dir="$(bash scripts/setup-model.sh | tail -1)"
gguf="$(ls "$model_dir"/*.gguf | head -1)"
aegis="${AEGIS_BIN:-}"
if [ -z "$aegis" ]; then
  cargo build --release --locked -p aegis-cli >&2
  aegis=target/release/aegis
fi
threads="${UPSTREAM_THREADS:-$(nproc)}"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
upstream_port="$(free_port)"
guard_port="$(free_port)"
logs="$(mktemp -d)"
"$llama" --model "$gguf" --host 127.0.0.1 --port "$upstream_port" --ctx-size 8192 --parallel 4 \
  --threads "$threads" --swa-full >"$logs/llama.log" 2>&1 &
llama_pid=$!
"$aegis" serve --port "$guard_port" --no-history \
  --upstream "http://127.0.0.1:$upstream_port" >"$logs/aegis.log" 2>&1 &
guard_pid=$!
trap 'kill $llama_pid $guard_pid 2>/dev/null || true; rm -rf "$logs"' EXIT
for _ in $(seq 600); do
  if curl -sf "http://127.0.0.1:$upstream_port/health" >/dev/null \
    && curl -sf "http://127.0.0.1:$guard_port/health" | grep -q '"ready"'; then
    break
  fi
  sleep 0.5
done
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores; llama.cpp $threads threads, the guard ${RAYON_NUM_THREADS:-all}"
"$python" scripts/bench_guarded_chat.py "http://127.0.0.1:$upstream_port" "http://127.0.0.1:$guard_port" "$rounds"
