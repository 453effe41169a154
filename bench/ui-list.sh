#!/usr/bin/env bash
# bench/ui-list.sh -- the dashboard's executions list over 100,000 executions, in Chromium.
#
#   bench/ui-list.sh [BUILD_DIR] [RUNS]      defaults: build-rel, 10
#
# A release build (meson setup build-rel --buildtype=release; ninja -C build-rel nodeflow)
# serves a fresh database (nf_ui_list on the local cluster of tools/bootstrap.sh, or
# NODEFLOW_DATABASE_URL's server) holding 100,000 executions of `default`, started one
# second apart over the last 28 hours: 1% RUNNING, 9% FAILED, the rest COMPLETED, each with
# a ~150-byte input. `tests/ui/dashboard.test.mjs big` then goes, RUNS times after a cold
# load, from another page of the dashboard to the list ("any status") and times, in the
# page, from the navigation to the frame after its first 50 rows are drawn; it prints each
# run, the median and the most, with the time of the list's request as the page saw it.
# The load average is printed before and after: on a shared machine it is the figures'
# context. Stops the server it started and drops its database on exit.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${1:-build-rel}"
RUNS="${2:-10}"
BIN="$ROOT/$BUILD/nodeflow"
LISTEN="${UI_LIST_LISTEN:-127.0.0.1:18410}"
[ -x "$BIN" ] || { echo "no $BIN: meson setup $BUILD --buildtype=release && ninja -C $BUILD nodeflow" >&2; exit 2; }
if [ -z "${NODEFLOW_DATABASE_URL:-}" ]; then eval "$("$ROOT/tools/bootstrap.sh" env)"; fi
ADMIN="$NODEFLOW_DATABASE_URL"
URL="${ADMIN%/*}/nf_ui_list"
SERVER_PID=""

cleanup() {
  local rc=$?
  set +e
  [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null && wait "$SERVER_PID" 2>/dev/null
  psql -q "$ADMIN" -c 'DROP DATABASE IF EXISTS "nf_ui_list"' >/dev/null 2>&1
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

psql -q "$ADMIN" -c 'DROP DATABASE IF EXISTS "nf_ui_list"' -c 'CREATE DATABASE "nf_ui_list"' >/dev/null
NODEFLOW_DATABASE_URL="$URL" "$BIN" migrate >/dev/null
t0=$(date +%s.%N)
psql -q -v ON_ERROR_STOP=1 "$URL" <<'SQL'
INSERT INTO "WorkflowExecutions" ("namespaceId", "defName", "defVersion", "status", "input",
  "correlationId", "startedAt", "updatedAt", "endedAt", "reasonForIncompletion")
SELECT n."id", 'bulk_' || (g % 7), 1,
  CASE WHEN g % 100 = 0 THEN 'RUNNING' WHEN g % 10 = 0 THEN 'FAILED' ELSE 'COMPLETED' END,
  jsonb_build_object('customer', jsonb_build_object('id', g % 1000, 'name', 'customer ' || (g % 1000)),
    'order', jsonb_build_object('id', 'o-' || g, 'amount', g % 997, 'lines', g % 9 + 1), 'note', 'seeded'),
  'c-' || g,
  now() - g * interval '1 second', now(),
  CASE WHEN g % 100 = 0 THEN NULL ELSE now() - g * interval '1 second' + interval '2 seconds' END,
  CASE WHEN g % 10 = 0 AND g % 100 <> 0 THEN 'seeded failure' END
FROM "Namespaces" n, generate_series(1, 100000) g
WHERE n."name" = 'default';
ANALYZE "WorkflowExecutions";
SQL
printf 'seeded 100,000 executions in %.1f s\n' "$(echo "$(date +%s.%N) - $t0" | bc)"

NODEFLOW_DATABASE_URL="$URL" NODEFLOW_LISTEN="$LISTEN" "$BIN" serve >/dev/null 2>&1 &
SERVER_PID=$!
for _ in $(seq 300); do curl -sf "http://$LISTEN/readyz" >/dev/null && break; sleep 0.2; done
curl -sf "http://$LISTEN/readyz" >/dev/null || { echo "the server did not become ready" >&2; exit 1; }

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
(cd "$ROOT/tests/ui" && [ -d node_modules/playwright-core ] || npm ci --ignore-scripts >/dev/null)
(cd "$ROOT/tests/ui" && NODEFLOW_URL="http://$LISTEN" NODEFLOW_UI_BIG_RUNS="$RUNS" node dashboard.test.mjs big)
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
