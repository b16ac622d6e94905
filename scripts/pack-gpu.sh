#!/usr/bin/env bash
# Packs what scripts/bench-gpu.sh needs on a GPU machine that has no Rust toolchain and no network
# into target/gpu-bundle/ (about 20 MiB): the CUDA `aegis` binary and the engine's test binary
# built with CUDA (both stripped and xz-compressed), the Gemma 3 tokenizer, and libcudart.so.12.
# bench-gpu.sh unpacks the bundle by itself when it finds one.
#
#   scripts/pack-gpu.sh            # builds with scripts/build-cuda.sh first (CUDA_COMPUTE_CAP applies)
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/build-cuda.sh
scripts/setup-model.sh >/dev/null
cache="${AEGIS_CACHE:-$HOME/.cache/aegis}"
cuda_home="$cache/cuda-12.4"
if command -v nvcc >/dev/null; then cuda_home="$(cd "$(dirname "$(command -v nvcc)")/.." && pwd)"; fi
export PATH="$cuda_home/bin:$PATH" CUDA_COMPUTE_CAP="${CUDA_COMPUTE_CAP:-90}"
export LIBRARY_PATH="$cuda_home/lib64:$cuda_home/lib64/stubs${LIBRARY_PATH:+:$LIBRARY_PATH}"
export CARGO_TARGET_DIR="${CUDA_TARGET_DIR:-target/cuda}"
tests="$(cargo test --release --locked -p aegis-engine --features cuda --no-run --message-format=json-render-diagnostics \
    | sed -n 's/.*"executable":"\([^"]*\/tests-[^"]*\)".*/\1/p' | tail -n 1)"
[[ -x "$tests" ]] || { echo "pack-gpu: the engine's CUDA test binary did not build" >&2; exit 1; }

bundle=target/gpu-bundle
rm -rf "$bundle" && mkdir -p "$bundle"
strip -o "$bundle/aegis" "$CARGO_TARGET_DIR/release/aegis"
strip -o "$bundle/engine-tests" "$tests"
cp "${AEGIS_MODEL_DIR:-$cache/models/gemma-3-270m}/tokenizer.json" "$bundle/"
cp -L "$cuda_home/lib64/libcudart.so.12" "$bundle/"
xz -T0 -6 "$bundle/aegis" "$bundle/engine-tests" "$bundle/tokenizer.json"
du -sh "$bundle"/* >&2
echo "pack-gpu: carry $bundle to the GPU machine, then run scripts/bench-gpu.sh there" >&2
