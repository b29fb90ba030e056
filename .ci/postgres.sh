#!/usr/bin/env bash
# Starts a throwaway PostgreSQL cluster for the auth tests and prints
# `DATABASE_URL=postgres://…` as its LAST line (callers `eval`/export it).
#
#   eval "$(.ci/postgres.sh | tail -n 1)" && export DATABASE_URL
#
# Installs Debian's `postgresql` when missing (needs root), creates a cluster
# in a temp dir owned by the `postgres` user (initdb refuses root), listens on
# 127.0.0.1 only, on a free port, with password (scram) auth for TCP so the
# DSN carries a real password that the tests check never reaches a log line.
# Everything else goes to stderr. The stop command is printed to stderr.
set -euo pipefail

say() { echo "postgres.sh: $*" >&2; }

find_bin() {
  ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1
}

BIN="$(find_bin || true)"
if [ -z "$BIN" ] || [ ! -x "$BIN/initdb" ]; then
  if [ "$(id -u)" != 0 ]; then
    say "PostgreSQL is not installed and this is not root: install the 'postgresql' package first"
    exit 1
  fi
  say "installing postgresql"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq postgresql >&2
  BIN="$(find_bin)"
fi

# Run a command as the cluster owner: `postgres` when we are root, else ourselves.
if [ "$(id -u)" = 0 ]; then
  OWNER=postgres
  as_owner() { runuser -u postgres -- "$@"; }
else
  OWNER="$(id -un)"
  as_owner() { "$@"; }
fi

DIR="$(mktemp -d /tmp/sdmcp-pg.XXXXXX)"
chmod 755 "$DIR"
[ "$(id -u)" = 0 ] && chown "$OWNER" "$DIR"

# Hex only, so the URL and an `eval` need no quoting.
PASSWORD="$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')"
printf '%s\n' "$PASSWORD" >"$DIR/pwfile"
chmod 600 "$DIR/pwfile"
[ "$(id -u)" = 0 ] && chown "$OWNER" "$DIR/pwfile"

as_owner "$BIN/initdb" -D "$DIR/data" -U postgres --pwfile="$DIR/pwfile" \
  --auth-local=trust --auth-host=scram-sha-256 --no-sync >"$DIR/initdb.log" 2>&1 || {
  cat "$DIR/initdb.log" >&2
  exit 1
}
rm -f "$DIR/pwfile"

# A port is "free" when nothing answers on it; pg_ctl start can still lose a
# race for it, so start is retried on a new port.
port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

PORT=""
for _ in $(seq 1 20); do
  candidate=$((20000 + RANDOM % 40000))
  port_in_use "$candidate" && continue
  if as_owner "$BIN/pg_ctl" -D "$DIR/data" -l "$DIR/server.log" -w -t 60 \
    -o "-p $candidate -c listen_addresses=127.0.0.1 -k $DIR -c fsync=off -c synchronous_commit=off -c full_page_writes=off" \
    start >&2; then
    PORT="$candidate"
    break
  fi
  tail -n 5 "$DIR/server.log" >&2 || true
done
if [ -z "$PORT" ]; then
  say "could not start PostgreSQL on a free port"
  exit 1
fi

DB=sdmcp
as_owner "$BIN/psql" -h "$DIR" -p "$PORT" -U postgres -d postgres -v ON_ERROR_STOP=1 -q \
  -c "CREATE DATABASE $DB" >&2

say "cluster in $DIR (port $PORT); stop it with:"
if [ "$(id -u)" = 0 ]; then
  say "  runuser -u postgres -- $BIN/pg_ctl -D $DIR/data -m fast stop"
else
  say "  $BIN/pg_ctl -D $DIR/data -m fast stop"
fi
echo "DATABASE_URL=postgres://postgres:$PASSWORD@127.0.0.1:$PORT/$DB"
