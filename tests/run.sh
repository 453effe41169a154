#!/usr/bin/env bash
# tests/run.sh BUILD_DIR [GLOB] — runs every test binary of a build (by default the
# sanitizer build of `make test`) against the local PostgreSQL 18.
#
# It prepares what the tests share: a migrated template database that each
# integration test clones, a PostgreSQL 15 server for the refusal tests, and
# the environment the harness reads (tests/support/harness.h).  Each binary is
# a Criterion suite; their "Synthesis" lines are added up into the plain
# closing line "N passed, N failed".  Exit status: 0 only if all passed.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
BUILD=${1:-build-test}
FILTER=${2:-}   # optional glob over binary names, e.g. 'integration_*'
cd "$ROOT"
[[ "$BUILD" = /* ]] || BUILD="$ROOT/$BUILD"

eval "$(tools/bootstrap.sh env)"
: "${NODEFLOW_DATABASE_URL:?}"

# The conninfo of another database on the same server, whatever the form of
# NODEFLOW_DATABASE_URL (URL or key=value).
url_for() {
  python3 - "$NODEFLOW_DATABASE_URL" "$1" <<'PY'
import sys, urllib.parse
url, name = sys.argv[1], sys.argv[2]
if url.startswith(("postgresql://", "postgres://")):
    p = urllib.parse.urlsplit(url)
    print(urllib.parse.urlunsplit((p.scheme, p.netloc, "/" + name, p.query, "")))
else:
    parts = [kv for kv in url.split() if not kv.startswith("dbname=")]
    print(" ".join(parts + ["dbname=" + name]))
PY
}

# Several runs may share one server (two checkouts, a developer and an
# editor's test task): every database of this run is named after its id.
export NODEFLOW_TEST_RUN=$$
export NODEFLOW_TEST_ADMIN_URL="$NODEFLOW_DATABASE_URL"
export NODEFLOW_TEST_TEMPLATE="nf_test_${NODEFLOW_TEST_RUN}_template"
export NODEFLOW_BIN="$BUILD/nodeflow"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export NODEFLOW_LOG_LEVEL=${NODEFLOW_LOG_LEVEL:-warn}

PSQL=/usr/lib/postgresql/15/bin/psql
[ -x "$PSQL" ] || PSQL=psql
admin_sql() { "$PSQL" -X -q -v ON_ERROR_STOP=1 "$NODEFLOW_DATABASE_URL" -c "$1" >/dev/null; }

# Databases left by earlier runs that were interrupted: those whose run is
# no longer a live process.
leftovers=$("$PSQL" -X -At "$NODEFLOW_DATABASE_URL" -c \
  "SELECT datname FROM pg_database WHERE datname LIKE 'nf\_test\_%'")
for db in $leftovers; do
  run=${db#nf_test_}; run=${run%%_*}
  [[ "$run" =~ ^[0-9]+$ ]] && kill -0 "$run" 2>/dev/null && continue
  admin_sql "DROP DATABASE IF EXISTS \"$db\" WITH (FORCE)"
done

pg15_was_running=1   # until this run knows better
cleanup() {
  [ "$pg15_was_running" = 1 ] || tools/bootstrap.sh pg15 stop >/dev/null 2>&1 || true
  for db in $("$PSQL" -X -At "$NODEFLOW_DATABASE_URL" -c \
      "SELECT datname FROM pg_database WHERE datname LIKE 'nf\_test\_${NODEFLOW_TEST_RUN}\_%'"); do
    admin_sql "DROP DATABASE IF EXISTS \"$db\" WITH (FORCE)" || true
  done
}
trap cleanup EXIT

echo "tests: migrating template database $NODEFLOW_TEST_TEMPLATE"
admin_sql "CREATE DATABASE \"$NODEFLOW_TEST_TEMPLATE\""
"$NODEFLOW_BIN" migrate --database-url "$(url_for "$NODEFLOW_TEST_TEMPLATE")" >/dev/null

# PostgreSQL 15, for the tests that prove the server refuses it.
# It is stopped afterwards only if this run started it.
pg15_was_running=0
tools/bootstrap.sh pg15 status >/dev/null 2>&1 && pg15_was_running=1
tools/bootstrap.sh pg15 start >/dev/null
NODEFLOW_TEST_PG15_URL=$(tools/bootstrap.sh pg15 url)
export NODEFLOW_TEST_PG15_URL

# Conductor's JavaScript SDK for e2e_conductor_sdk, pinned by
# tests/conductor_sdk/package-lock.json.  Installed like the PostgreSQL
# package of tools/bootstrap.sh: npm ci, no install scripts, and again only
# when the lock file changed.  Its optional AI peers conflict, hence
# --legacy-peer-deps.
conductor_sdk() {
  local dir="$ROOT/tests/conductor_sdk"
  cmp -s "$dir/package-lock.json" "$dir/node_modules/.installed-lock.json" && return 0
  command -v npm >/dev/null 2>&1 || { echo "tests: npm not found; run: tools/bootstrap.sh deps" >&2; return 1; }
  echo "tests: installing Conductor's JavaScript SDK into tests/conductor_sdk/node_modules"
  ( cd "$dir" && npm ci --legacy-peer-deps --no-audit --no-fund --no-update-notifier \
      --ignore-scripts --loglevel=error >&2 ) &&
    cp "$dir/package-lock.json" "$dir/node_modules/.installed-lock.json"
}
if [ -z "$FILTER" ] || [[ e2e_conductor_sdk == $FILTER ]]; then
  conductor_sdk || echo "tests: the Conductor SDK did not install; e2e_conductor_sdk will fail" >&2
fi

# playwright-core for e2e_ui, which drives the dashboard in Debian's
# chromium, pinned by tests/ui/package-lock.json; installed like the SDK.
ui_driver() {
  local dir="$ROOT/tests/ui"
  cmp -s "$dir/package-lock.json" "$dir/node_modules/.installed-lock.json" && return 0
  command -v npm >/dev/null 2>&1 || { echo "tests: npm not found; run: tools/bootstrap.sh deps" >&2; return 1; }
  echo "tests: installing playwright-core into tests/ui/node_modules"
  ( cd "$dir" && npm ci --no-audit --no-fund --no-update-notifier \
      --ignore-scripts --loglevel=error >&2 ) &&
    cp "$dir/package-lock.json" "$dir/node_modules/.installed-lock.json"
}
if [ -z "$FILTER" ] || [[ e2e_ui == $FILTER ]]; then
  ui_driver || echo "tests: playwright-core did not install; e2e_ui will fail" >&2
fi

passed=0 failed=0 status=0

# Static checks, each counted as one test: the layering of src/ (and every
# header compiling on its own), and the pinned formatting.
static_check() {
  local name=$1; shift
  [ -z "$FILTER" ] || [[ "$name" == $FILTER ]] || return 0
  echo "== $name"
  if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); status=1; fi
}
# shellcheck disable=SC2046  # word splitting of the flags is intended
static_check check_layers python3 tools/check_layers.py cc \
  $(pkg-config --cflags jansson libpq libmicrohttpd)
static_check check_format tools/format.sh --check
for bin in "$BUILD"/tests/unit_* "$BUILD"/tests/integration_* "$BUILD"/tests/e2e_*; do
  [ -f "$bin" ] && [ -x "$bin" ] || continue
  [ -z "$FILTER" ] || [[ "$(basename "$bin")" == $FILTER ]] || continue
  name=$(basename "$bin")
  echo "== $name"
  log=$(mktemp)
  set +e
  "$bin" --jobs 2 --short-filename 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  set -e
  line=$(grep -a 'Synthesis:' "$log" | tail -n 1 || true)
  rm -f "$log"
  if [ -z "$line" ]; then
    echo "tests: $name printed no summary (exit $rc)"
    failed=$((failed + 1)); status=1; continue
  fi
  # [====] Synthesis: Tested: 5 | Passing: 4 | Failing: 1 | Crashing: 0
  ok=$(sed -E 's/.*Passing: ([0-9]+).*/\1/' <<<"$line")
  bad=$(sed -E 's/.*Failing: ([0-9]+).*/\1/' <<<"$line")
  passed=$((passed + ok)); failed=$((failed + bad))
  if [ "$rc" -ne 0 ] && [ "$bad" -eq 0 ]; then
    # Every test passed but the binary did not exit cleanly (a sanitizer
    # report, a crash in the runner): counted as one failure, so the
    # closing line never says "0 failed" on a red run.
    echo "tests: $name exited with status $rc after its tests passed"
    failed=$((failed + 1))
  fi
  [ "$rc" -eq 0 ] && [ "$bad" -eq 0 ] || status=1
done

# The fault harness (tools/chaos/chaos.py, docs/reliability.md), a short run
# on this build's binary counted as one test: about 10 replica kills and one
# PostgreSQL restart, on a PostgreSQL of its own and free ports.  `make chaos`
# runs the full one.
static_check chaos env CHAOS_SECONDS="${NODEFLOW_CHAOS_SECONDS:-45}" \
  CHAOS_KILL_EVERY=4 CHAOS_PG_RESTARTS=1 CHAOS_RATE=2 \
  NODEFLOW_CHAOS_PGPORT=0 CHAOS_BASE_PORT=0 \
  python3 tools/chaos/chaos.py

# The fuzz targets (fuzz/, built by clang in a build of their own), each run
# for a few seconds and counted as one test; `make fuzz` runs each for 10
# million executions.
FUZZ_BUILD=${NODEFLOW_FUZZ_BUILD:-$BUILD-fuzz}
FUZZ_SECONDS=${NODEFLOW_FUZZ_SECONDS:-5}
fuzz_names=()
for t in $(tools/fuzz.sh list); do
  [ -z "$FILTER" ] || [[ "$t" == $FILTER ]] || continue
  fuzz_names+=("$t")
done
if [ ${#fuzz_names[@]} -gt 0 ]; then
  echo "== fuzz build $FUZZ_BUILD"
  if tools/fuzz.sh build "$FUZZ_BUILD"; then
    for t in "${fuzz_names[@]}"; do
      static_check "$t" tools/fuzz.sh run "$FUZZ_BUILD" "$t" \
        -max_total_time="$FUZZ_SECONDS"
    done
  else
    echo "tests: the fuzz build failed"
    failed=$((failed + ${#fuzz_names[@]})); status=1
  fi
fi

echo "$passed passed, $failed failed"
exit "$status"
