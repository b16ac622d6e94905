#!/usr/bin/env bash
# Builds llama.cpp's own HTTP server (`llama-server`) once into a cache outside the repository and
# prints its path. The remote backend's tests start it on 127.0.0.1 with the default GGUF, so the
# console is tested against the real server a team would deploy, not a stand-in.
#
# Source: the llama.cpp vendored in the llama-cpp-python sdist on PyPI (the registry this machine
# can reach; the same llama.cpp the reference fixtures and `aegis bench` use), pinned by sha256.
# cmake and ninja come from PyPI into a private virtual environment.
#
# Where: $AEGIS_CACHE (default ~/.cache/aegis)/llama-server-<version>/llama-server.
# Takes about 20 minutes on 2 cores the first time; afterwards it only checks the binary runs.
set -euo pipefail

# shellcheck source=lib/llama-cpp-source.sh
source "$(dirname "$0")/lib/llama-cpp-source.sh"

cache="${AEGIS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/aegis}"
dest="$cache/llama-server-$LLAMA_CPP_PYTHON_VERSION"
binary="$dest/llama-server"

log() { printf 'setup-llama-server: %s\n' "$*" >&2; }
die() { printf 'setup-llama-server: error: %s\n' "$*" >&2; exit 1; }

if [ -x "$binary" ] && "$binary" --version >/dev/null 2>&1; then
  echo "$binary"
  exit 0
fi

command -v c++ >/dev/null 2>&1 || die "a C++ compiler is needed (apt-get install build-essential)"
python3 -c 'import ensurepip' >/dev/null 2>&1 || die "python3 venv is needed (apt-get install python3-venv)"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

log "downloading llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION (source) from PyPI"
src=$(llama_cpp_source "$work") || die "no llama.cpp source"

log "installing cmake and ninja from PyPI into a build environment"
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install --quiet --disable-pip-version-check cmake ninja || die "pip could not install cmake and ninja"
export PATH="$work/venv/bin:$PATH"

log "building llama-server (about 20 minutes on 2 cores)"
# A portable x86-64-v3 build (AVX2/FMA/F16C) rather than -march=native, so a cache copied to
# another machine of that class still runs. No curl/OpenSSL/web UI: the server only needs to
# serve a local GGUF file, and the prebuilt UI would be downloaded.
cmake -S "$src" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
  -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
  -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_UI=OFF \
  -DLLAMA_USE_PREBUILT_UI=OFF -DBUILD_SHARED_LIBS=OFF >"$work/configure.log" 2>&1 \
  || { tail -30 "$work/configure.log" >&2; die "cmake could not configure llama.cpp"; }
cmake --build "$work/build" --target llama-server -j "$(nproc)" >"$work/build.log" 2>&1 \
  || { tail -30 "$work/build.log" >&2; die "llama-server did not build"; }

mkdir -p "$dest"
install -m 755 "$work/build/bin/llama-server" "$binary.tmp"
mv "$binary.tmp" "$binary"
"$binary" --version >/dev/null 2>&1 || die "the built llama-server does not run"
log "built $binary"
echo "$binary"
