#!/usr/bin/env bash
# The encoder's CPU kernels side by side on one machine: what the CPU has, the kernels' tests,
# `cargo bench -p aegis-kernels` (GFLOP/s per kernel kind on the encoder's shapes) and the encoder
# bench (`cargo bench -p aegis-engine --bench encoder`) for each kind the CPU runs, on THREADS
# cores (default 2, pinned with taskset where the machine has more).
#
#   scripts/bench-cpu-kernels.sh            # build here and run
#   scripts/bench-cpu-kernels.sh pack       # build, strip and bundle into target/cpu-kernels/ (about
#                                           # 15 MB) for a machine without Rust (the device tool's)
#   BUNDLE=target/cpu-kernels scripts/bench-cpu-kernels.sh   # there: run the bundle
#   BASELINE=DIR ...                        # also another build's gemm-bench and encoder-bench,
#                                           # each run just before this build's, side by side
#
# The encoder: AEGIS_ENCODER_DIR or the cache scripts/setup-encoder.sh fills; where neither holds
# one (a machine the 1.2 GB cannot reach), a synthetic folder of the real shape and random weights
# (scripts/reference/synthetic_encoder.py, numpy): the same arithmetic, so the same time, and the
# agreement tests' cosines then describe random weights, not the shipped model.
set -euo pipefail
cd "$(dirname "$0")/.."

built() { # the executable cargo names for a test or bench target
  cargo "$@" --no-run --message-format=json 2>/dev/null |
    python3 -c 'import json,sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("executable"): print(m["executable"])'
}

if [[ "${1:-}" == pack || -z "${BUNDLE:-}" ]]; then
  BUNDLE=target/cpu-kernels
  rm -rf "$BUNDLE" && mkdir -p "$BUNDLE"
  strip -o "$BUNDLE/kernels-tests" "$(built test --release -p aegis-kernels --lib)"
  strip -o "$BUNDLE/gemm-bench" "$(built bench -p aegis-kernels --bench gemm)"
  strip -o "$BUNDLE/encoder-bench" "$(built bench -p aegis-engine --bench encoder)"
  strip -o "$BUNDLE/engine-tests" "$(built test --release -p aegis-engine --test tests)"
  tokenizer="${AEGIS_ENCODER_DIR:-$HOME/.cache/aegis/models/embeddinggemma-300m}/tokenizer.json"
  [[ -f "$tokenizer" ]] && xz -T0 -6 -c "$tokenizer" >"$BUNDLE/tokenizer.json.xz"
  du -sh "$BUNDLE" >&2
  [[ "${1:-}" == pack ]] && exit 0
fi

threads="${THREADS:-2}"
pin=()
if (($(nproc) > threads)) && command -v taskset >/dev/null; then
  pin=(taskset -c "0-$((threads - 1))")
fi
export RAYON_NUM_THREADS="$threads"

echo "## machine"
grep -m1 "model name" /proc/cpuinfo || true
echo "cores: $(nproc), running on $threads"
echo "features: $(grep -m1 -o 'amx[a-z_0-9]*\|avx512_bf16\|avx512_vnni\|avx_vnni' /proc/cpuinfo | sort -u | tr '\n' ' ')"
uname -r

echo "## kernel tests"
"$BUNDLE/kernels-tests" --nocapture --test-threads 1 2>&1 || echo "kernel tests: exit $?"

# Each bench of this build, after the same bench of BASELINE's where one is given.
side_by_side() { # name, then the command with BIN standing for the bench's folder
  local name="$1" dir
  shift
  for dir in ${BASELINE:+"$BASELINE"} "$BUNDLE"; do
    echo "# $dir"
    "${@//BIN/$dir}" || echo "$name: exit $?"
  done
}

echo "## kernels, GFLOP/s (cargo bench -p aegis-kernels)"
side_by_side gemm "${pin[@]}" BIN/gemm-bench
if (($(nproc) > threads)); then
  echo "## kernels on all $(nproc) cores"
  RAYON_NUM_THREADS="$(nproc)" side_by_side gemm BIN/gemm-bench
fi

encoder="${AEGIS_ENCODER_DIR:-$HOME/.cache/aegis/models/embeddinggemma-300m}"
if [[ ! -f "$encoder/modules.json" ]]; then
  encoder=/tmp/synthetic-encoder
  if [[ ! -f "$encoder/modules.json" ]]; then
    xz -dc "$BUNDLE/tokenizer.json.xz" >/tmp/tokenizer.json
    python3 scripts/reference/synthetic_encoder.py --tokenizer /tmp/tokenizer.json --out "$encoder"
  fi
  echo "(synthetic encoder of the real shape in $encoder)"
fi
export AEGIS_ENCODER_DIR="$encoder"

echo "## encoder, every kind this CPU runs"
side_by_side encoder "${pin[@]}" BIN/encoder-bench
if grep -q amx_bf16 /proc/cpuinfo; then
  echo "## encoder, precise without AMX (AEGIS_CPU_KERNELS_OFF=amx-bf16)"
  AEGIS_CPU_KERNELS_OFF=amx-bf16 AEGIS_BENCH_ENCODER_WEIGHTS=precise \
    side_by_side encoder "${pin[@]}" BIN/encoder-bench
fi
if grep -q amx_int8 /proc/cpuinfo; then
  # amx-int8 follows avx512-vnni in the dispatch order until measured: this is that measure.
  echo "## encoder, int8 on AMX tiles (AEGIS_CPU_KERNELS_OFF=avx512-vnni)"
  AEGIS_CPU_KERNELS_OFF=avx512-vnni AEGIS_BENCH_ENCODER_WEIGHTS=int8 \
    side_by_side encoder "${pin[@]}" BIN/encoder-bench
  echo "## the int8 agreement test on AMX tiles"
  AEGIS_CPU_KERNELS_OFF=avx512-vnni "$BUNDLE/engine-tests" int8 --nocapture --test-threads 1 2>&1 || true
fi

echo "## the encoder's agreement tests (kernels against candle's f32)"
"$BUNDLE/engine-tests" kernels_agree --nocapture --test-threads 1 2>&1 || true
