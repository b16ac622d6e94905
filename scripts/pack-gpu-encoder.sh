#!/usr/bin/env bash
# Packs the real EmbeddingGemma for a GPU machine reached 64 MiB a call (the device tool), for
# `scripts/bench-gpu.sh encoder-real`: a bf16 copy (`aegis model encoder-bf16`, 0.6 GB) as one
# `tar | xz` cut into slices, the copy's sha256 list, and the real-model messages' verdicts from
# the original f32 folder on this CPU (CPU_REFERENCE). Output in target/gpu-encoder/.
#
#   scripts/pack-gpu-encoder.sh              # slices of 58.5 MB (with the 8 MB repo, under 64 MiB)
#   SLICE_BYTES=30000000 scripts/pack-gpu-encoder.sh
#
# On the GPU machine, once every slice is in one folder (carry one a call, copy each to /tmp):
#   cat part* | xz -dc | tar -C /tmp -xf -        # then, from the repo with the CUDA bundle:
#   AEGIS_ENCODER_DIR=/tmp/encoder-bf16 ENCODER_SHA256=…/encoder-bf16.sha256 \
#     CPU_REFERENCE=…/real-cpu-f32.jsonl scripts/bench-gpu.sh encoder-real
set -euo pipefail
cd "$(dirname "$0")/.."

out=target/gpu-encoder
aegis="${AEGIS_BIN:-target/release/aegis}"
[[ -n "${AEGIS_BIN:-}" ]] || cargo build --release --locked -p aegis-cli
rm -rf "$out" && mkdir -p "$out"
"$aegis" model encoder-bf16 "$out/encoder-bf16"
(cd "$out/encoder-bf16" && find . -type f | sort | xargs sha256sum) >"$out/encoder-bf16.sha256"
# check's exit status says whether messages failed the guard, which some here must.
"$aegis" check --no-history --file scripts/gpu-messages.txt >"$out/real-cpu-f32.jsonl" || true
tar -C "$out" -cf - encoder-bf16 | xz -T0 -1 >"$out/encoder-bf16.tar.xz"
sha256sum "$out/encoder-bf16.tar.xz" | sed "s|$out/||" >"$out/encoder-bf16.tar.xz.sha256"
split -b "${SLICE_BYTES:-58500000}" -d -a 2 "$out/encoder-bf16.tar.xz" "$out/part"
rm -rf "$out/encoder-bf16" "$out/encoder-bf16.tar.xz"
du -sh "$out"/* >&2
echo "pack-gpu-encoder: carry target/gpu-encoder/ a slice a call (see this script's header)" >&2
