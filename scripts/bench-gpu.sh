#!/usr/bin/env bash
# The GPU measurement (issue "Gemma on the GPU"): CPU/GPU agreement and the benchmark against the
# original method in PyTorch `transformers`, on synthetic Gemma 3 models of the 4B and 270M shapes.
# Runs on a GPU machine without a Rust toolchain: it needs a CUDA `aegis` binary built elsewhere
# by scripts/build-cuda.sh, the Gemma 3 tokenizer, and a Python with torch and transformers. A
# bundle from scripts/pack-gpu.sh (target/gpu-bundle) provides the first two and the engine's CUDA
# tests, which the agree step then runs too.
#
#   scripts/bench-gpu.sh [agree] [bench]          # both steps when none is named
#   scripts/bench-gpu.sh real encoder             # the real 270M's verdicts on GPU and CPU (its
#                                                 # weights in AEGIS_MODEL_DIR); EmbeddingGemma's
#                                                 # GPU path on a synthetic encoder
#
# Environment:
#   AEGIS_BIN        the CUDA binary (default target/cuda/release/aegis)
#   AEGIS_MODEL_DIR  folder with tokenizer.json (default ~/.cache/aegis/models/gemma-3-270m)
#   SHAPES           synthetic shapes to measure (default "4b 270m")
#   DEVICE           default cuda:0; `DEVICE=cpu SHAPES=tiny` smoke-tests this script anywhere
#   PYTHON           Python with torch + transformers for column (e) (default python3; "none" skips)
#   WORK             where synthetic models go (default /tmp/aegis-gpu; the 4B takes 7.3 GiB)
#   RESULTS          where the tables and JSON go (default $WORK/results)
#   RUNS, SECONDS_PER_LEVEL   passed to `aegis bench` as --runs and --seconds (default 20, 8)
set -euo pipefail
cd "$(dirname "$0")/.."

shapes="${SHAPES:-4b 270m}"
device="${DEVICE:-cuda:0}"
python="${PYTHON:-python3}"
work="${WORK:-/tmp/aegis-gpu}"
bundle=target/gpu-bundle
engine_tests=""
if [[ -z "${AEGIS_BIN:-}" && -f "$bundle/aegis.xz" ]]; then
    mkdir -p "$work/bin" "$work/model"
    xz -dc "$bundle/aegis.xz" >"$work/bin/aegis" && chmod +x "$work/bin/aegis"
    xz -dc "$bundle/engine-tests.xz" >"$work/bin/engine-tests" && chmod +x "$work/bin/engine-tests"
    [[ -f "$work/model/tokenizer.json" ]] || xz -dc "$bundle/tokenizer.json.xz" >"$work/model/tokenizer.json"
    export AEGIS_BIN="$work/bin/aegis" AEGIS_MODEL_DIR="${AEGIS_MODEL_DIR:-$work/model}"
    engine_tests="$work/bin/engine-tests"
    LD_LIBRARY_PATH="$PWD/$bundle${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
aegis="${AEGIS_BIN:-target/cuda/release/aegis}"
export AEGIS_MODEL_DIR="${AEGIS_MODEL_DIR:-$HOME/.cache/aegis/models/gemma-3-270m}"
results="${RESULTS:-$work/results}"
steps=("$@")
[[ ${#steps[@]} -eq 0 ]] && steps=(agree bench)
mkdir -p "$work" "$results"

[[ -x "$aegis" ]] || { echo "bench-gpu: no binary at $aegis (build it with scripts/build-cuda.sh)" >&2; exit 1; }
[[ -f "$AEGIS_MODEL_DIR/tokenizer.json" ]] || {
    echo "bench-gpu: no tokenizer.json in $AEGIS_MODEL_DIR (scripts/setup-model.sh fetches it)" >&2
    exit 1
}

# The binary loads cuBLAS and the CUDA runtime at run time: take them from a CUDA install or from
# the nvidia-*-cu12 wheels PyTorch brings, whichever this machine has.
lib_dirs=(/usr/local/cuda/lib64)
if [[ "$python" != none ]]; then
    while IFS= read -r dir; do lib_dirs+=("$dir"); done < <("$python" - <<'PY' 2>/dev/null || true
import glob, os
try:
    import nvidia
    for root in nvidia.__path__:
        for lib in sorted(glob.glob(os.path.join(root, "*", "lib"))):
            print(lib)
except ImportError:
    pass
PY
)
fi
for dir in "${lib_dirs[@]}"; do
    [[ -d "$dir" ]] && LD_LIBRARY_PATH="$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
done
export LD_LIBRARY_PATH

{
    echo "# GPU measurement, $(date -u +%Y-%m-%dT%H:%MZ)"
    command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv
    echo "cpu: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
    [[ "$python" != none ]] && "$python" -c "import torch, transformers; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'transformers', transformers.__version__)"
    "$aegis" --version
} | tee "$results/machine.txt"

# Matrices in bf16 (what the bf16 format runs) and in q4_0 (what the quantized kernels run, and
# the format of Google's QAT 4B GGUF).
synth() {
    local shape="$1" dtype="$2" out="$work/synthetic-$1-$2.gguf"
    [[ -f "$out" ]] || "$aegis" model synth --shape "$shape" --dtype "$dtype" --seed 1 --out "$out" >&2
    echo "$out"
}

for step in "${steps[@]}"; do
    case "$step" in
    agree)
        status=0
        if [[ -n "$engine_tests" ]]; then
            # The engine's own CUDA tests; those on the real 270M only when its weights are here.
            filters=(devices::cuda::gpu_f32 devices::cuda::gpu_bf16)
            [[ -f "$AEGIS_MODEL_DIR/gemma-3-270m-q4_k_m.gguf" ]] && filters=(devices::)
            "$engine_tests" --test-threads 1 --nocapture "${filters[@]}" 2>&1 \
                | tee "$results/engine-tests.txt" || status=1
        fi
        for shape in tiny $shapes; do
            for weights in f32 bf16; do
                model="$(synth "$shape" bf16)"
                echo "## agree: $shape, $weights on $device" | tee -a "$results/agree.md"
                "$aegis" model agree --model "$model" --device "$device" --weights "$weights" \
                    | tee -a "$results/agree.md" || status=1
            done
            model="$(synth "$shape" q4_0)"
            echo "## agree: $shape, quantized (q4_0) on $device" | tee -a "$results/agree.md"
            "$aegis" model agree --model "$model" --device "$device" --weights quantized \
                | tee -a "$results/agree.md" || status=1
        done
        [[ "$status" == 0 ]] || { echo "bench-gpu: devices DISAGREE (see $results/agree.md)" >&2; exit 1; }
        ;;
    real)
        # The shipped heads on the real 270M, GPU against CPU: the same verdicts, and scores within
        # the bf16 agreement's reach. Needs the weights in $AEGIS_MODEL_DIR (carried in slices to a
        # machine without network; their sha256 is checked first).
        weights="$AEGIS_MODEL_DIR/gemma-3-270m-q4_k_m.gguf"
        [[ -f "$weights" ]] || { echo "bench-gpu: real needs $weights" >&2; exit 1; }
        want="$(sed -n 's/^GGUF_SHA256="\(.*\)"$/\1/p' scripts/setup-model.sh)"
        echo "$want  $weights" | sha256sum --check | tee "$results/real.md"
        printf '%s\n' "makasih kak" "you are a worthless idiot and everyone hates you" \
            "Buy now!!! Limited offer, click http://cheap-pills.example to win a free iPhone" \
            "Put all your savings into this coin today, it will 10x by Friday, trust me" \
            "Pesanan INV-20931 sudah sampai, terima kasih ya" \
            "dasar goblok, mati aja lo" >"$work/messages.txt"
        for device_name in cpu "$device"; do
            # check's exit status says whether messages failed the guard, which some here must.
            "$aegis" check --device "$device_name" --no-history --file "$work/messages.txt" \
                >"$work/real-${device_name/:/}.jsonl" || true
        done
        "$python" - "$work/real-cpu.jsonl" "$work/real-${device/:/}.jsonl" <<'PY' | tee -a "$results/real.md"
import json, sys
cpu, gpu = ([json.loads(line) for line in open(path)] for path in sys.argv[1:3])
print("| message | verdict (CPU / GPU) | max score difference |")
print("|---|---|---|")
worst, same = 0.0, True
for a, b in zip(cpu, gpu):
    gap = max(abs(a["scores"][k] - b["scores"][k]) for k in a["scores"])
    worst, same = max(worst, gap), same and a["case"] == b["case"]
    print(f'| {a["question"][:40]} | {a["case"]} / {b["case"]} | {gap:.4f} |')
print(f"\n{len(cpu)} messages: verdicts {'the same' if same and len(cpu) == len(gpu) else 'DIFFER'}, largest score difference {worst:.4f}")
sys.exit(0 if same and len(cpu) == len(gpu) else 1)
PY
        ;;
    encoder)
        # EmbeddingGemma's GPU path on a synthetic folder of the real shape (the real 1.2 GB cannot
        # be carried): GPU against CPU embeddings, and their timings, through the engine's test.
        [[ -n "$engine_tests" ]] || { echo "bench-gpu: encoder needs the bundle's engine tests" >&2; exit 1; }
        encoder_dir="$work/synthetic-encoder"
        [[ -f "$encoder_dir/model.safetensors" ]] ||
            "$python" scripts/reference/synthetic_encoder.py --tokenizer "$AEGIS_MODEL_DIR/tokenizer.json" --out "$encoder_dir"
        AEGIS_ENCODER_DIR="$encoder_dir" "$engine_tests" --test-threads 1 --nocapture encoder::cuda:: 2>&1 \
            | tee "$results/encoder.txt"
        ;;
    bench)
        for shape in $shapes; do
            baseline=()
            [[ "$python" != none ]] && baseline=(--transformers-python "$python")
            AEGIS_SCRIPTS="$PWD/scripts" \
                "$aegis" bench --model "$(synth "$shape" bf16)" --device "$device" --weights bf16 \
                --runs "${RUNS:-20}" --seconds "${SECONDS_PER_LEVEL:-8}" "${baseline[@]}" \
                --json "$results/bench-$shape-bf16.json" | tee "$results/bench-$shape-bf16.md"
            # The quantized kernels, fast path only, for the format choice.
            "$aegis" bench --model "$(synth "$shape" q4_0)" --device "$device" --weights quantized \
                --runs "${RUNS:-20}" --fast-only \
                --json "$results/bench-$shape-q4_0.json" | tee "$results/bench-$shape-q4_0.md"
        done
        ;;
    *)
        echo "bench-gpu: unknown step $step (agree, bench, real or encoder)" >&2
        exit 2
        ;;
    esac
done
echo "bench-gpu: results in $results" >&2
