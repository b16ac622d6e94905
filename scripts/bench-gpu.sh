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
#   scripts/bench-gpu.sh encoder-real             # the real EmbeddingGemma (a bf16 copy in
#                                                 # AEGIS_ENCODER_DIR) with the shipped heads:
#                                                 # agreement, verdicts, bench, sentence-transformers
#   scripts/bench-gpu.sh prompt-path              # the 4B prompt path through the worker, its
#                                                 # batch log, and BASELINE_BIN's bench beside it
#   scripts/bench-gpu.sh encoder-batches          # the same for the real encoder's heads
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
#   ENCODER_SHA256, CPU_REFERENCE, TEXTS   for encoder-real (see that step)
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
    [[ "$python" != none ]] && { "$python" -c "import torch, transformers; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'transformers', transformers.__version__)" 2>/dev/null || echo "torch: not importable by $python"; }
    "$aegis" --version
} | tee "$results/machine.txt"

# Matrices in bf16 (what the bf16 format runs) and in q4_0 (what the quantized kernels run, and
# the format of Google's QAT 4B GGUF).
synth() {
    local shape="$1" dtype="$2" out="$work/synthetic-$1-$2.gguf"
    [[ -f "$out" ]] || "$aegis" model synth --shape "$shape" --dtype "$dtype" --seed 1 --out "$out" >&2
    echo "$out"
}

# The real-model messages (scripts/gpu-messages.txt): six of every kind, and the heads test's
# reports quoting an insult (which must pass) beside the insults said (which must fail toxic).
real_messages() {
    cat scripts/gpu-messages.txt
}

# Two `check --file` JSONL outputs, message by message: the same verdicts, and the largest score
# difference. Exit status 1 when any verdict differs.
compare_verdicts() {
    "$python" - "$1" "$2" <<'PY'
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
}

# The worker's batch log (AEGIS_LOG=aegis_runtime=debug,aegis_guard=debug): per batch size, how
# many batches and their mean times, whole and split (the analysis, of which the encoder's read,
# against the verdicts): whether the model thread is the limit under load, and where it goes.
summarise_batches() {
    "$python" - "$1" <<'PY'
import re, sys
from collections import defaultdict
fields = lambda line: {k: float(v) for k, v in re.findall(r"(\w+)=([0-9.]+)", line)}
sizes = defaultdict(lambda: defaultdict(list))
for line in open(sys.argv[1], errors="replace"):
    line = re.sub(r"\x1b\[[0-9;]*m", "", line)
    f = fields(line)
    if "scored a batch" in line and "ms" in f:
        sizes[int(f["messages"])]["batch_ms"].append(f["ms"])
    elif "analyse_ms" in f and "verdicts_ms" in f:
        for key in ("analyse_ms", "verdicts_ms"):
            sizes[int(f["messages"])][key].append(f[key])
    elif "encoder read" in line and "texts" in f:
        sizes[int(f["texts"])]["encoder_ms"].append(f["ms"])
print("| messages | batches | batch ms | analyse ms | encoder ms | verdicts ms |")
print("|---|---|---|---|---|---|")
mean = lambda v: f"{sum(v) / len(v):.2f}" if v else "—"
for n in sorted(sizes):
    s = sizes[n]
    print(f"| {n} | {len(s['batch_ms'])} | {mean(s['batch_ms'])} | {mean(s['analyse_ms'])} | {mean(s['encoder_ms'])} | {mean(s['verdicts_ms'])} |")
PY
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
        real_messages >"$work/messages.txt"
        for device_name in cpu "$device"; do
            # check's exit status says whether messages failed the guard, which some here must.
            "$aegis" check --device "$device_name" --no-history --file "$work/messages.txt" \
                >"$work/real-${device_name/:/}.jsonl" || true
        done
        compare_verdicts "$work/real-cpu.jsonl" "$work/real-${device/:/}.jsonl" | tee -a "$results/real.md"
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
    encoder-real)
        # The real EmbeddingGemma with the shipped heads (issue 46). The folder is the bf16 copy
        # (`aegis model encoder-bf16`: 0.6 GB, carried in slices), checked against ENCODER_SHA256
        # (a `sha256sum` list written beside the copy). Then: the engine's CUDA test on it (GPU
        # against CPU embeddings, cosine); the verdicts of the real-model messages on the GPU and
        # the CPU here, and against CPU_REFERENCE (the same messages' JSONL from the original f32
        # folder on the machine that made the copy) when given; `aegis bench` with the heads on
        # the GPU (a synthetic 270M decoder beside it: the heads decide every validator);
        # `check --file` on TEXTS (one message a line) when given; and sentence-transformers on
        # the same folder and card (scripts/bench_encoder_st.py).
        encoder_dir="${AEGIS_ENCODER_DIR:?encoder-real needs AEGIS_ENCODER_DIR, the bf16 copy}"
        if [[ -n "${ENCODER_SHA256:-}" ]]; then
            manifest="$(realpath "$ENCODER_SHA256")"
            (cd "$encoder_dir" && sha256sum --check --quiet "$manifest") ||
                { echo "bench-gpu: $encoder_dir does not match $ENCODER_SHA256" >&2; exit 1; }
            echo "encoder files: sha256 OK ($(wc -l <"$manifest") files)" | tee "$results/encoder-real.md"
        fi
        if [[ -n "$engine_tests" ]]; then
            # A failure is reported, and the measurements below still run.
            AEGIS_ENCODER_DIR="$encoder_dir" "$engine_tests" --test-threads 1 --nocapture encoder::cuda:: 2>&1 \
                | tee "$results/encoder-real-test.txt" || echo "bench-gpu: the encoder's CUDA test FAILED" | tee -a "$results/encoder-real.md"
        fi
        real_messages >"$work/encoder-messages.txt"
        # The heads decide every validator: a synthetic decoder beside the encoder changes no
        # score (the real 270M's weights need not be carried too).
        decoder="$(synth tiny bf16)"
        for device_name in cpu "$device"; do
            "$aegis" check --model "$decoder" --device "$device_name" --encoder "$encoder_dir" --no-history \
                --file "$work/encoder-messages.txt" >"$work/encoder-${device_name/:/}.jsonl" || true
        done
        compare_verdicts "$work/encoder-cpu.jsonl" "$work/encoder-${device/:/}.jsonl" \
            | tee -a "$results/encoder-real.md" || true
        if [[ -n "${CPU_REFERENCE:-}" ]]; then
            echo "against the original f32 folder on the CPU:" | tee -a "$results/encoder-real.md"
            compare_verdicts "$CPU_REFERENCE" "$work/encoder-${device/:/}.jsonl" \
                | tee -a "$results/encoder-real.md" || true
        fi
        AEGIS_SCRIPTS="$PWD/scripts" \
            "$aegis" bench --model "$(synth 270m bf16)" --device "$device" --weights bf16 \
            --encoder "$encoder_dir" --runs "${RUNS:-20}" --seconds "${SECONDS_PER_LEVEL:-8}" \
            --json "$results/bench-encoder.json" | tee "$results/bench-encoder.md" || true
        if [[ -n "${TEXTS:-}" ]]; then
            # Its own summary line times the checking, not the load.
            "$aegis" check --model "$decoder" --device "$device" --encoder "$encoder_dir" --no-history --file "$TEXTS" \
                >"$work/texts.jsonl" 2>"$work/texts.err" || true
            grep 'checked:' "$work/texts.err" | sed "s|^|check --file $(basename "$TEXTS"): |" | tee -a "$results/encoder-real.md"
        fi
        if [[ "$python" != none && -f "$results/bench-encoder.json" ]]; then
            "$python" scripts/bench_encoder_st.py "$encoder_dir" "$results/bench-encoder.json" \
                "$results/st-encoder.json" "${SECONDS_PER_LEVEL:-8}" 2>&1 | tee "$results/st-encoder.txt" || true
        fi
        command -v nvidia-smi >/dev/null && nvidia-smi | tee "$results/nvidia-smi.txt"
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
    prompt-path)
        # The 4B prompt path through the worker (issue 46): the engine's CUDA test of the packed
        # fast path, then `aegis bench` on the synthetic 4B in bf16 (with transformers beside it),
        # its batch log summarised; then BASELINE_BIN, another build's binary, on the same card
        # right after, for the ratio. SKIP_TESTS=1 skips the tests (a second run on the same build).
        if [[ -n "$engine_tests" && -z "${SKIP_TESTS:-}" ]]; then
            "$engine_tests" --test-threads 1 --nocapture devices::cuda::gpu_f32 devices::cuda::gpu_bf16 \
                devices::cuda::gpu_fast_path 2>&1 | tee "$results/prompt-path-tests.txt" ||
                echo "bench-gpu: the engine's CUDA tests FAILED" | tee -a "$results/prompt-path-tests.txt"
        fi
        model="$(synth 4b bf16)"
        baseline=()
        [[ "$python" != none ]] && baseline=(--transformers-python "$python")
        AEGIS_LOG=aegis_runtime=debug,aegis_guard=debug AEGIS_SCRIPTS="$PWD/scripts" \
            "$aegis" bench --model "$model" --device "$device" --weights bf16 --encoder decoder --runs "${RUNS:-20}" \
            --seconds "${SECONDS_PER_LEVEL:-8}" "${baseline[@]}" --json "$results/prompt-path.json" \
            2>"$work/prompt-path.log" | tee "$results/prompt-path.md" || true
        summarise_batches "$work/prompt-path.log" | tee "$results/prompt-path-batches.txt"
        if [[ -x "${BASELINE_BIN:-}" ]]; then
            "$BASELINE_BIN" bench --model "$model" --device "$device" --weights bf16 --encoder decoder --runs "${RUNS:-20}" \
                --seconds "${SECONDS_PER_LEVEL:-8}" --json "$results/prompt-path-baseline.json" \
                | tee "$results/prompt-path-baseline.md" || true
        fi
        command -v nvidia-smi >/dev/null && nvidia-smi | tee "$results/nvidia-smi.txt"
        ;;
    encoder-batches)
        # The real encoder's heads through the worker only (AEGIS_ENCODER_DIR, the bf16 copy, as
        # encoder-real checked it): `aegis bench` with the batch log summarised, then
        # BASELINE_BIN's bench on the same card right after.
        encoder_dir="${AEGIS_ENCODER_DIR:?encoder-batches needs AEGIS_ENCODER_DIR, the bf16 copy}"
        model="$(synth 270m bf16)"
        AEGIS_LOG=aegis_runtime=debug,aegis_guard=debug \
            "$aegis" bench --model "$model" --device "$device" --weights bf16 --encoder "$encoder_dir" \
            --runs "${RUNS:-20}" --seconds "${SECONDS_PER_LEVEL:-8}" --json "$results/encoder-batches.json" \
            2>"$work/encoder-batches.log" | tee "$results/encoder-batches.md" || true
        summarise_batches "$work/encoder-batches.log" | tee "$results/encoder-batches-log.txt"
        if [[ -x "${BASELINE_BIN:-}" ]]; then
            "$BASELINE_BIN" bench --model "$model" --device "$device" --weights bf16 --encoder "$encoder_dir" \
                --runs "${RUNS:-20}" --seconds "${SECONDS_PER_LEVEL:-8}" \
                --json "$results/encoder-batches-baseline.json" | tee "$results/encoder-batches-baseline.md" || true
        fi
        ;;
    *)
        echo "bench-gpu: unknown step $step (agree, bench, real, encoder, encoder-real, prompt-path or encoder-batches)" >&2
        exit 2
        ;;
    esac
done
echo "bench-gpu: results in $results" >&2
