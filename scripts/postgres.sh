#!/usr/bin/env bash
# A throwaway PostgreSQL for Recourse's tests, without Docker.
#
#   scripts/postgres.sh start DIR   create a cluster in DIR/data if there is none, start it on
#                                   127.0.0.1 on a free port (55432 and up), wait until it
#                                   accepts connections, and print exactly one line on stdout:
#                                   postgres://postgres@127.0.0.1:PORT/postgres
#                                   (already running: print its URL again)
#   scripts/postgres.sh stop DIR    fast shutdown; nothing to do (and no error) when not running
#
# Layout of DIR: data/ (the cluster, trust authentication, UTF8, locale C), log (initdb's,
# pg_ctl's and the server's log), the unix socket (.s.PGSQL.PORT) and a lock file. Settings
# for parallel tests: max_connections=300 and, unless RECOURSE_PG_DURABLE=1 (benchmarks),
# fsync, synchronous_commit and full_page_writes off. They are rewritten at every start, in
# DIR/data/recourse.conf.
#
# Binaries: $RECOURSE_PG_BINDIR, else `pg_config --bindir`, else the highest
# /usr/lib/postgresql/*/bin; when none has a server, Debian's `postgresql` package is installed
# (sudo when not root). The script never uses nor stops the Debian system cluster. As root, the
# cluster runs as the `postgres` OS user (PostgreSQL refuses to run as root): DIR is chowned to
# it, so DIR's parent directories must be searchable by it (a directory under /tmp is).
#
# It can also be sourced: that only defines `recourse_postgres start|stop DIR`, which runs in a
# subshell (its `set -euo pipefail` and `exit` stay inside).

recourse_postgres() (
  set -euo pipefail
  unset PGDATA PGHOST PGHOSTADDR PGPORT PGOPTIONS PGUSER PGDATABASE
  die() { echo "postgres.sh: $*" >&2; exit 1; }
  usage() { echo "usage: postgres.sh start|stop DIR" >&2; exit 2; }
  [ $# -eq 2 ] || usage
  local cmd=$1 dir=$2
  case "$cmd" in start | stop) ;; *) usage ;; esac
  [ -n "$dir" ] || usage

  local timeout=${RECOURSE_PG_START_TIMEOUT:-60}

  # --- binaries -------------------------------------------------------------------------------
  has_server() { [ -x "$1/initdb" ] && [ -x "$1/pg_ctl" ] && [ -x "$1/postgres" ] && [ -x "$1/pg_isready" ]; }
  find_bindir() {
    local d
    for d in "${RECOURSE_PG_BINDIR:-}" "$(pg_config --bindir 2>/dev/null || true)" \
      $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
      if [ -n "$d" ] && has_server "$d"; then
        echo "$d"
        return 0
      fi
    done
    return 1
  }
  as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }
  install_postgres() {
    command -v apt-get >/dev/null ||
      die "PostgreSQL server binaries not found and apt-get is unavailable: install PostgreSQL (initdb, pg_ctl) or set RECOURSE_PG_BINDIR"
    if [ "$(id -u)" -ne 0 ] && ! command -v sudo >/dev/null; then
      die "PostgreSQL server binaries not found and cannot install them (not root, no sudo): apt-get install postgresql"
    fi
    echo "postgres.sh: installing Debian's postgresql package" >&2
    as_root apt-get update -qq >&2 || die "cannot install PostgreSQL: apt-get update failed"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null ||
      die "cannot install PostgreSQL: apt-get install postgresql failed"
  }

  # --- the directory and who runs the server --------------------------------------------------
  if [ "$cmd" = stop ]; then
    # Nothing there, nothing to stop.
    [ -f "$dir/data/PG_VERSION" ] || exit 0
  fi
  mkdir -p "$dir" || die "cannot create $dir"
  dir=$(cd "$dir" && pwd -P)
  local data=$dir/data log=$dir/log
  # The server runs with DIR as its working directory (root's may be unreadable to it).
  cd "$dir"

  local run_as=""
  if [ "$(id -u)" -eq 0 ]; then
    id postgres >/dev/null 2>&1 ||
      die "running as root needs the unprivileged 'postgres' OS user (Debian's postgresql package creates it)"
    run_as=postgres
  fi
  run() { if [ -n "$run_as" ]; then runuser -u "$run_as" -- "$@"; else "$@"; fi; }
  # Write a file as the server's user, so it owns what it later reads or appends to.
  write_file() { run tee "$1" >/dev/null; }

  # One start or stop at a time per DIR. The lock's descriptor must not reach the server.
  exec 9>>"$dir/.postgres.sh.lock"
  flock -w "$timeout" 9 || die "$dir is locked by another postgres.sh for ${timeout} s"

  local bindir
  if [ "$cmd" = stop ]; then
    bindir=$(find_bindir) || die "PostgreSQL binaries not found, cannot stop the cluster in $data"
    if ! run "$bindir/pg_ctl" -D "$data" status >/dev/null 2>&1; then
      exit 0
    fi
    run "$bindir/pg_ctl" -D "$data" -m fast -w -t "$timeout" stop >>"$log" 2>&1 9>&- || {
      tail -n 20 "$log" >&2 || true
      die "could not stop the PostgreSQL in $data (log above, in $log)"
    }
    exit 0
  fi

  # --- start ------------------------------------------------------------------------------------
  bindir=$(find_bindir) || {
    install_postgres
    bindir=$(find_bindir) || die "cannot install PostgreSQL: no server binaries after apt-get install postgresql"
  }

  if [ -n "$run_as" ]; then
    chown "$run_as:" "$dir"
    if ! run test -w "$dir" -a -x "$dir"; then
      local p=$dir blocked=""
      while [ "$p" != / ]; do
        p=$(dirname "$p")
        run test -x "$p" || blocked=$p
      done
      die "the '$run_as' OS user cannot reach $dir${blocked:+: $blocked is not searchable by it (chmod o+x it, or use another directory)}"
    fi
  fi
  [ -e "$log" ] || : >"$log"
  [ -z "$run_as" ] || chown "$run_as:" "$log" "$dir/.postgres.sh.lock"

  # The socket path DIR/.s.PGSQL.PORT must fit in sun_path (107 bytes and a NUL).
  if [ $((${#dir} + 15)) -gt 107 ]; then
    die "$dir is too long for a unix socket directory (at most 92 characters)"
  fi

  # Run "$@" with no descriptor above 2 (the lock, and whatever the caller let through: the
  # server lives on and must not keep a caller's pipe open).
  detached() (
    local fd n
    for fd in /proc/"$BASHPID"/fd/*; do
      n=${fd##*/}
      [ "$n" -le 2 ] || eval "exec $n>&-" 2>/dev/null || true
    done
    "$@"
  )
  log_tail() { echo "--- last lines of $log:" >&2; tail -n "${1:-25}" "$log" >&2 || true; }
  port_of() { sed -n 4p "$data/postmaster.pid" 2>/dev/null; }
  wait_ready() {
    local port=$1 i
    for ((i = 0; i < timeout * 10; i++)); do
      if "$bindir/pg_isready" -q -h 127.0.0.1 -p "$port" -U postgres -d postgres -t 2 9>&-; then
        return 0
      fi
      sleep 0.1
    done
    return 1
  }

  if [ ! -f "$data/PG_VERSION" ]; then
    if [ -d "$data" ] && [ -n "$(ls -A "$data")" ]; then
      die "$data exists but holds no PostgreSQL cluster"
    fi
    local nosync=--no-sync
    [ "${RECOURSE_PG_DURABLE:-0}" != 1 ] || nosync=
    run "$bindir/initdb" -D "$data" -U postgres --auth=trust --encoding=UTF8 --locale=C $nosync \
      >>"$log" 2>&1 9>&- || {
      log_tail
      die "initdb failed in $data (log above)"
    }
    printf "\n# Recourse's test settings (scripts/postgres.sh rewrites this file at every start).\ninclude_if_exists = 'recourse.conf'\n" |
      run tee -a "$data/postgresql.conf" >/dev/null
  elif [ -n "$run_as" ] && [ "$(stat -c %U "$data")" != "$run_as" ]; then
    chown -R "$run_as:" "$data"
  fi

  # Already running (an earlier start): the same URL again.
  if run "$bindir/pg_ctl" -D "$data" status >/dev/null 2>&1; then
    local port
    port=$(port_of)
    [ -n "$port" ] && wait_ready "$port" || {
      log_tail
      die "the PostgreSQL in $data runs but does not accept connections on 127.0.0.1:${port:-?}"
    }
    echo "postgres://postgres@127.0.0.1:$port/postgres"
    exit 0
  fi

  local durable_settings="fsync = off
synchronous_commit = off
full_page_writes = off"
  [ "${RECOURSE_PG_DURABLE:-0}" != 1 ] || durable_settings="# RECOURSE_PG_DURABLE=1: fsync, synchronous_commit and full_page_writes at their defaults"
  local q_dir=${dir//\'/\'\'}

  # Try ports from 55432 up; a port taken meanwhile (another cluster starting at the same
  # moment) makes the server fail to bind, and the next one is tried.
  local port=${RECOURSE_PG_PORT_BASE:-55432} last=$((${RECOURSE_PG_PORT_BASE:-55432} + 200)) started=""
  for (( ; port < last; port++)); do
    # Skip a port something already listens on.
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      continue
    fi
    write_file "$data/recourse.conf" <<EOF
# Written by scripts/postgres.sh at every start.
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$q_dir'
max_connections = 300
timezone = 'UTC'
log_timezone = 'UTC'
$durable_settings
EOF
    local before
    before=$(stat -c %s "$log")
    if detached run "$bindir/pg_ctl" -D "$data" -l "$log" -w -t "$timeout" start </dev/null >>"$log" 2>&1; then
      started=yes
      break
    fi
    if tail -c +"$((before + 1))" "$log" | grep -q -e 'Address already in use' -e 'could not create any TCP/IP sockets'; then
      continue
    fi
    log_tail
    die "PostgreSQL did not start in $data (log above)"
  done
  [ -n "$started" ] || die "no free port for PostgreSQL on 127.0.0.1 in ${RECOURSE_PG_PORT_BASE:-55432}..$((last - 1))"

  wait_ready "$port" || {
    log_tail
    die "PostgreSQL in $data did not accept connections on 127.0.0.1:$port within ${timeout} s (log above)"
  }
  echo "postgres://postgres@127.0.0.1:$port/postgres"
)

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
  set -euo pipefail
  recourse_postgres "$@"
fi
