#!/usr/bin/env bash
# Installs OpenAI's official Python client once into a virtual environment outside the
# repository and prints that environment's python. The suite drives `aegis serve --upstream`
# with it, as a prototype would (crates/aegis-cli/tests/guarded_chat.rs).
#
# Where: $AEGIS_CACHE (default ~/.cache/aegis)/openai-<version>/bin/python.
set -euo pipefail

OPENAI_VERSION="3.57.0"

cache="${AEGIS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/aegis}"
dest="$cache/openai-$OPENAI_VERSION"
python="$dest/bin/python"

die() { printf 'setup-openai-client: error: %s\n' "$*" >&2; exit 1; }

if [ -x "$python" ] && "$python" -c 'import openai' >/dev/null 2>&1; then
  echo "$python"
  exit 0
fi
python3 -c 'import ensurepip' >/dev/null 2>&1 || die "python3 venv is needed (apt-get install python3-venv)"
printf 'setup-openai-client: installing openai==%s from PyPI\n' "$OPENAI_VERSION" >&2
rm -rf "$dest"
python3 -m venv "$dest"
"$dest/bin/pip" install --quiet --disable-pip-version-check "openai==$OPENAI_VERSION" \
  || die "pip could not install openai"
"$python" -c 'import openai' || die "the openai package does not import"
echo "$python"
