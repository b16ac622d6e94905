#!/usr/bin/env bash
# Makes an EmbeddingGemma GGUF with its sentence-transformers dense projections from the cached
# encoder (scripts/setup-encoder.sh), for `llama-server --embeddings` to serve as a team's shared
# encoder (`--encoder-server`), and prints its path on its last line. The converter is llama.cpp's
# own (`convert_hf_to_gguf.py --sentence-transformers-dense-modules`) from the same pinned source
# that scripts/setup-llama-server.sh builds, so the file is what a team would make themselves.
#
# What the converter needs from PyPI (torch, transformers, sentencepiece: about 5 GB installed)
# goes into a throwaway environment and is deleted afterwards; only the GGUF is cached.
# The cached encoder folder has no `tokenizer.model`; it is rebuilt from the default model's GGUF
# (scripts/setup-model.sh), whose Gemma 3 vocabulary is checked piece by piece against the
# encoder's tokenizer.json first (scripts/lib/gguf_vocab_to_spm.py).
#
# Where: $AEGIS_CACHE (default ~/.cache/aegis)/encoder-gguf-<llama-cpp-python version>/
# embeddinggemma-300m-f32.gguf (1.2 GB; f32 so the tests compare the server with our encoder on
# the same numbers). Takes about 3 minutes the first time; afterwards it checks the file's sha256.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=lib/llama-cpp-source.sh
source "$here/lib/llama-cpp-source.sh"

TORCH_VERSION="2.11.0"
TRANSFORMERS_VERSION="4.57.6"
SENTENCEPIECE_VERSION="0.2.3"
# sentencepiece 0.2.3's generated protobuf code needs a runtime at least this new.
PROTOBUF_VERSION="7.36.2"
NUMPY_VERSION="2.2.6"

cache="${AEGIS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/aegis}"
dest="$cache/encoder-gguf-$LLAMA_CPP_PYTHON_VERSION"
gguf="$dest/embeddinggemma-300m-f32.gguf"

log() { printf 'setup-encoder-gguf: %s\n' "$*" >&2; }
die() { printf 'setup-encoder-gguf: error: %s\n' "$*" >&2; exit 1; }

if [ -f "$gguf" ] && [ -f "$gguf.sha256" ] && (cd "$dest" && sha256sum --quiet -c "$(basename "$gguf").sha256" >/dev/null 2>&1); then
  echo "$gguf"
  exit 0
fi

encoder=$(bash "$here/setup-encoder.sh" | tail -1)
[ -f "$encoder/modules.json" ] || die "no encoder folder from scripts/setup-encoder.sh"
model_dir=$(bash "$here/setup-model.sh" | tail -1)
gemma_gguf="$model_dir/gemma-3-270m-q4_k_m.gguf"
[ -f "$gemma_gguf" ] || die "no default model at $gemma_gguf from scripts/setup-model.sh"
python3 -c 'import ensurepip' >/dev/null 2>&1 || die "python3 venv is needed (apt-get install python3-venv)"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

log "downloading llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION (source) from PyPI for its converter"
src=$(llama_cpp_source "$work") || die "no llama.cpp source"

log "installing the converter's requirements (torch $TORCH_VERSION and others, about 3 GB) into a throwaway environment"
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install --quiet --no-cache-dir --disable-pip-version-check \
  "torch==$TORCH_VERSION" "transformers==$TRANSFORMERS_VERSION" "sentencepiece==$SENTENCEPIECE_VERSION" \
  "protobuf==$PROTOBUF_VERSION" "numpy==$NUMPY_VERSION" || die "pip could not install the converter's requirements"
export PYTHONPATH="$src/gguf-py"

# The converter reads the folder; link the encoder's files beside the rebuilt tokenizer.model.
folder="$work/embeddinggemma-300m"
mkdir -p "$folder"
for f in "$encoder"/*; do ln -s "$f" "$folder/"; done
"$work/venv/bin/python" "$here/lib/gguf_vocab_to_spm.py" "$gemma_gguf" "$encoder/tokenizer.json" "$folder/tokenizer.model" \
  || die "could not rebuild tokenizer.model from $gemma_gguf"

log "converting with llama.cpp's convert_hf_to_gguf.py (dense projections included)"
mkdir -p "$dest"
"$work/venv/bin/python" "$src/convert_hf_to_gguf.py" "$folder" --outtype f32 \
  --sentence-transformers-dense-modules --outfile "$work/out.gguf" >"$work/convert.log" 2>&1 \
  || { tail -30 "$work/convert.log" >&2; die "the converter failed"; }
grep -q "dense_2" "$work/convert.log" || die "the converter wrote no dense projections"
mv "$work/out.gguf" "$gguf"
(cd "$dest" && sha256sum "$(basename "$gguf")" > "$(basename "$gguf").sha256")
log "made $gguf"
echo "$gguf"
