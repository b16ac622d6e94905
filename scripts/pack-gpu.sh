#!/usr/bin/env bash
# Packs what scripts/bench-gpu.sh needs on a GPU machine that has no Rust toolchain and no network
# into target/gpu-bundle/ (about 20 MiB): the CUDA `aegis` binary and the engine's test binary
# built with CUDA (both stripped and xz-compressed), the Gemma 3 tokenizer, and the CUDA runtime
# library they link (libcudart.so.12, or .13 with CUDA_RUNTIME=13).
# bench-gpu.sh unpacks the bundle by itself when it finds one.
#
#   scripts/pack-gpu.sh                   # builds with scripts/build-cuda.sh first (CUDA_COMPUTE_CAP applies)
#   CUDA_RUNTIME=13 scripts/pack-gpu.sh   # for a CUDA 13 machine (driver 580+, PyTorch cu130)
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/build-cuda.sh
tests="$(scripts/build-cuda.sh --engine-tests)"
[[ -x "$tests" ]] || { echo "pack-gpu: the engine's CUDA test binary did not build" >&2; exit 1; }
scripts/setup-model.sh >/dev/null
cache="${AEGIS_CACHE:-$HOME/.cache/aegis}"
runtime="${CUDA_RUNTIME:-12}"
cudart="$cache/cuda-12.4/lib64/libcudart.so.12"
[[ "$runtime" == 13 ]] && cudart="$cache/cuda13-libs/lib64/libcudart.so.13"
if command -v nvcc >/dev/null && [[ "$runtime" == 12 ]]; then
    cudart="$(cd "$(dirname "$(command -v nvcc)")/.." && pwd)/lib64/libcudart.so.12"
fi
export CARGO_TARGET_DIR="${CUDA_TARGET_DIR:-target/cuda}"

bundle=target/gpu-bundle
rm -rf "$bundle" && mkdir -p "$bundle"
strip -o "$bundle/aegis" "$CARGO_TARGET_DIR/release/aegis"
strip -o "$bundle/engine-tests" "$tests"
cp "${AEGIS_MODEL_DIR:-$cache/models/gemma-3-270m}/tokenizer.json" "$bundle/"
cp -L "$cudart" "$bundle/"
xz -T0 -6 "$bundle/aegis" "$bundle/engine-tests" "$bundle/tokenizer.json"
du -sh "$bundle"/* >&2
echo "pack-gpu: carry $bundle to the GPU machine, then run scripts/bench-gpu.sh there" >&2
