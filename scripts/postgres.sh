#!/usr/bin/env bash
# A throwaway PostgreSQL cluster on 127.0.0.1, for the history store's tests against PostgreSQL and
# for developers trying the console on it:
#
#   scripts/postgres.sh start DIR [PORT]   initdb DIR if it holds no cluster yet, start the server
#                                          and print its URL (one line on stdout), e.g.
#                                          postgres://aegis@127.0.0.1:54321/aegis
#   scripts/postgres.sh stop DIR           stop it (quietly, if it is not running)
#
# Only the loopback address is listened on and trusted, without a password: for scratch databases,
# nothing else. The Unix socket lives in DIR, the server's log in DIR/log. Without PORT a free one
# is picked. Run as root (CI), the server runs as the `postgres` system user, since initdb and
# postgres refuse root. The server comes from scripts/install-deps.sh.
set -euo pipefail

usage() {
  echo "usage: $0 start DIR [PORT] | stop DIR" >&2
  exit 2
}

die() {
  echo "postgres.sh: $*" >&2
  exit 1
}

[ $# -ge 2 ] || usage
cmd=$1
dir=$2

# The server binaries: pg_config's bindir where it has them (Debian's pg_config may be libpq-dev's,
# naming a server that is not installed), else the newest /usr/lib/postgresql/*/bin.
find_bindir() {
  local d
  if command -v pg_config >/dev/null 2>&1; then
    d=$(pg_config --bindir 2>/dev/null || true)
    if [ -n "$d" ] && [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ]; then
      echo "$d"
      return
    fi
  fi
  for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
    if [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ]; then
      echo "$d"
      return
    fi
  done
  die "no PostgreSQL server found (initdb, pg_ctl): install it with scripts/install-deps.sh"
}
bindir=$(find_bindir)

# initdb and postgres refuse to run as root: as root, the cluster belongs to the postgres user.
as_server=()
if [ "$EUID" -eq 0 ]; then
  id -u postgres >/dev/null 2>&1 || die "running as root, but there is no postgres system user to run the server as"
  as_server=(runuser -u postgres --)
fi
run() { ${as_server[@]+"${as_server[@]}"} "$@"; }

running() {
  [ -f "$dir/PG_VERSION" ] && run "$bindir/pg_ctl" status -D "$dir" >/dev/null 2>&1
}

case $cmd in
  start)
    [ $# -le 3 ] || usage
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    if [ "$EUID" -eq 0 ]; then
      chown postgres: "$dir"
      run test -x "$dir" || die "the postgres user cannot reach $dir: use a folder it can (under /tmp, say)"
    fi
    if [ ! -f "$dir/PG_VERSION" ]; then
      echo "postgres.sh: creating a cluster in $dir" >&2
      # UTF-8 with the C collation: text sorts byte by byte, as under SQLite's BINARY collation.
      # (initdb wants DIR empty, so its output waits here until it has run.)
      if ! out=$(run "$bindir/initdb" -D "$dir" -U postgres -E UTF8 --no-locale \
          --auth-local=trust --auth-host=reject 2>&1); then
        echo "$out" >&2
        die "initdb failed in $dir"
      fi
      # Trusted without a password: the loopback address, and the Unix socket, which lives in DIR
      # (mode 0700, so only the cluster's owner reaches it). Every other host is refused.
      run tee "$dir/pg_hba.conf" >/dev/null <<'EOF'
# Written by scripts/postgres.sh: a throwaway cluster, trusted on the loopback address only.
local  all  all                 trust
host   all  all  127.0.0.1/32   trust
EOF
    fi
    if [ $# -eq 3 ]; then
      port=$3
    elif running; then
      # Already running: keep the port it was started on (line 4 of postmaster.pid).
      port=$(sed -n 4p "$dir/postmaster.pid")
    else
      port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    fi
    case $port in '' | *[!0-9]*) die "not a port number: $port" ;; esac
    if running; then
      running_port=$(sed -n 4p "$dir/postmaster.pid")
      [ "$running_port" = "$port" ] || die "already running in $dir on port $running_port, not $port"
      echo "postgres.sh: already running in $dir on port $port" >&2
    else
      run "$bindir/pg_ctl" start -w -D "$dir" -l "$dir/log" \
        -o "-c listen_addresses=127.0.0.1 -p $port -c unix_socket_directories='$dir'" >/dev/null \
        || die "the server did not start: see $dir/log"
    fi
    psql=("$bindir/psql" -X -q -tA -v ON_ERROR_STOP=1 -h "$dir" -p "$port" -U postgres -d postgres)
    if [ "$(run "${psql[@]}" -c "SELECT 1 FROM pg_roles WHERE rolname = 'aegis'")" != 1 ]; then
      # CREATEDB: the store's tests give each test a database of its own.
      run "${psql[@]}" -c "CREATE ROLE aegis LOGIN CREATEDB" >/dev/null
    fi
    if [ "$(run "${psql[@]}" -c "SELECT 1 FROM pg_database WHERE datname = 'aegis'")" != 1 ]; then
      run "${psql[@]}" -c "CREATE DATABASE aegis OWNER aegis" >/dev/null
    fi
    echo "postgres://aegis@127.0.0.1:$port/aegis"
    ;;
  stop)
    [ $# -eq 2 ] || usage
    [ -d "$dir" ] || exit 0
    dir=$(cd "$dir" && pwd)
    if running; then
      run "$bindir/pg_ctl" stop -w -m fast -D "$dir" >/dev/null
    fi
    ;;
  *)
    usage
    ;;
esac
