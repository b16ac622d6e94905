#!/usr/bin/env bash
# Installs schemathesis (the property-based API tester) once into a virtual environment outside
# the repository and prints its path. The suite runs it against a live `aegis serve` to hold
# /openapi.json to what the server does (crates/aegis-cli/tests/serve.rs).
#
# Where: $AEGIS_CACHE (default ~/.cache/aegis)/schemathesis-<version>/bin/schemathesis.
set -euo pipefail

SCHEMATHESIS_VERSION="4.32.5"

cache="${AEGIS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/aegis}"
dest="$cache/schemathesis-$SCHEMATHESIS_VERSION"
binary="$dest/bin/schemathesis"

die() { printf 'setup-schemathesis: error: %s\n' "$*" >&2; exit 1; }

if [ -x "$binary" ] && "$binary" --version >/dev/null 2>&1; then
  echo "$binary"
  exit 0
fi
python3 -c 'import ensurepip' >/dev/null 2>&1 || die "python3 venv is needed (apt-get install python3-venv)"
printf 'setup-schemathesis: installing schemathesis==%s from PyPI\n' "$SCHEMATHESIS_VERSION" >&2
rm -rf "$dest"
python3 -m venv "$dest"
"$dest/bin/pip" install --quiet --disable-pip-version-check "schemathesis==$SCHEMATHESIS_VERSION" \
  || die "pip could not install schemathesis"
"$binary" --version >/dev/null || die "schemathesis does not run"
echo "$binary"
