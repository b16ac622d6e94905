# Sourced by the scripts that need llama.cpp's source: the llama.cpp vendored in the
# llama-cpp-python sdist on PyPI (the registry this machine can reach), pinned by sha256.
#   llama_cpp_source WORKDIR   prints the path of the unpacked llama.cpp inside WORKDIR.

LLAMA_CPP_PYTHON_VERSION="0.3.36"
LLAMA_CPP_PYTHON_SHA256="832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"

llama_cpp_source() {
  local work="$1"
  python3 -m pip download --quiet --no-deps --disable-pip-version-check --no-binary llama-cpp-python \
    -d "$work" "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION" >&2 || { echo "pip could not download llama-cpp-python" >&2; return 1; }
  local sdist="$work/llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION.tar.gz"
  [ -f "$sdist" ] || { echo "expected $sdist after the download" >&2; return 1; }
  local got
  got=$(sha256sum "$sdist" | cut -d' ' -f1)
  [ "$got" = "$LLAMA_CPP_PYTHON_SHA256" ] \
    || { echo "checksum mismatch for $(basename "$sdist"): expected $LLAMA_CPP_PYTHON_SHA256, got $got" >&2; return 1; }
  tar -xzf "$sdist" -C "$work"
  local src="$work/llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION/vendor/llama.cpp"
  [ -f "$src/CMakeLists.txt" ] || { echo "no vendored llama.cpp in the sdist" >&2; return 1; }
  echo "$src"
}
