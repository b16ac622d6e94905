#!/usr/bin/env bash
# Installs one pinned PyPI package once into a virtual environment of its own outside the
# repository, and prints the path of one of that environment's executables.
#   scripts/setup-python-tool.sh PACKAGE VERSION EXECUTABLE
# Where: $AEGIS_CACHE (default ~/.cache/aegis)/PACKAGE-VERSION/bin/EXECUTABLE.
set -euo pipefail

package="$1" version="$2" executable="$3"
cache="${AEGIS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/aegis}"
dest="$cache/$package-$version"

die() { printf 'setup-%s: error: %s\n' "$package" "$*" >&2; exit 1; }
installed() {
  "$dest/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('$package') != '$version')" \
    >/dev/null 2>&1
}

if ! installed; then
  python3 -c 'import ensurepip' >/dev/null 2>&1 || die "python3 venv is needed (apt-get install python3-venv)"
  printf 'setup-%s: installing %s==%s from PyPI\n' "$package" "$package" "$version" >&2
  rm -rf "$dest"
  python3 -m venv "$dest"
  "$dest/bin/pip" install --quiet --disable-pip-version-check "$package==$version" \
    || die "pip could not install $package"
  installed || die "$package $version is not what was installed"
fi
[ -x "$dest/bin/$executable" ] || die "the environment has no $executable"
echo "$dest/bin/$executable"
