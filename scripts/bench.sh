#!/usr/bin/env bash
# Runs `aegis bench` on the default model: (a) the original method, (b) one prompt at a time,
# (c) our fast path and (d) llama.cpp on the same GGUF. Sets up llama-cpp-python for (d) in a
# virtual environment outside the clone (~/.cache/aegis/llama-venv) on first use; pass
# --no-llama-cpp to skip (d). Other arguments go to `aegis bench` (see `aegis bench --help`).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-model.sh >/dev/null

llama=1
args=()
for arg in "$@"; do
    if [[ "$arg" == "--no-llama-cpp" ]]; then llama=0; else args+=("$arg"); fi
done

if [[ "$llama" == 1 ]]; then
    venv="${AEGIS_CACHE:-$HOME/.cache/aegis}/llama-venv"
    if ! "$venv/bin/python" -c "import llama_cpp" 2>/dev/null; then
        echo "building llama-cpp-python into $venv (once; several minutes)" >&2
        python3 -m venv "$venv"
        "$venv/bin/pip" install --quiet cmake ninja
        # A portable CPU build: the -march=native build of 0.3.36 crashed on this project's dev
        # machine (a VM whose CPU reports AMX), so pick instruction sets explicitly.
        flags="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"
        if grep -q avx512f /proc/cpuinfo 2>/dev/null; then
            flags="$flags -DGGML_AVX512=ON"
        fi
        CMAKE_ARGS="$flags -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TESTS=OFF" \
            "$venv/bin/pip" install --quiet --no-cache-dir "llama-cpp-python==0.3.36"
    fi
    args+=(--llama-python "$venv/bin/python")
fi

exec cargo run --release --locked -p aegis-cli -- bench "${args[@]}"
