#!/usr/bin/env bash
# probe.sh LABEL -- one snapshot of the counters bench/run.sh turns into per-phase costs.
# Called by loadgen --hook between its phases (untimed). Prints one line:
#   PROBE|label|unix_ms|cpu_busy|cpu_total|nodeflow|postgres|loadgen|xact_commit|wal_bytes|wal_records|
#         in_unix_ms|in_cpu_busy|in_cpu_total|in_nodeflow|in_postgres|in_loadgen|next_xid
# CPU figures are clock ticks (USER_HZ) from /proc: the whole machine (busy, total), the node-flow
# server (NF_PID: its pid, or every replica's, separated by spaces), every process of the bench
# cluster (postmaster and children) and the loadgen (the parent of the shell that runs this
# hook). They are read twice: the in_ ones as the hook is entered (the end of the phase before
# it), the others after the sleep (the start of the phase after it, as late as can be). A
# phase's CPU is the next probe's in_ figures less this one's: neither the sleep nor anything
# else the hooks do is in it.
# wal_bytes is the WAL's position (cluster-wide; exact at once); next_xid the next transaction
# id (cluster-wide), so its difference counts exactly the transactions that wrote. xact_commit
# (NF_DB's) and wal_records are the statistics system's: a backend reports them at most once a
# second while busy and, once idle, only after ten seconds, so a phase's figures may hold the
# end of the phase before it. The sleep lets most of them arrive.
set -uo pipefail
label="$1"
ticks() { # utime+stime of the given pids (those gone count 0), in one read
  local f=() p
  for p; do f+=("/proc/$p/stat"); done
  [ ${#f[@]} -gt 0 ] || { echo 0; return; }
  cat "${f[@]}" 2>/dev/null | awk '{ sub(/.*\) /, ""); t += $12 + $13 } END { print t + 0 }'
}
pm=$(head -1 "${BENCH_PGBASE:-/tmp/bench-pg18}/data/postmaster.pid" 2>/dev/null || echo 0)
lgpid=$(ps -o ppid= -p "$PPID" | tr -d ' ')
cpu() { # unix_ms|busy|total|nodeflow|postgres|loadgen, as near one instant as a shell gets
  local now=${EPOCHREALTIME/./} u n s i io irq sirq st
  read -r _ u n s i io irq sirq st _ < /proc/stat
  echo "$((now / 1000))|$((u + n + s + irq + sirq + st))|$((u + n + s + irq + sirq + st + i + io))|$(ticks ${NF_PID:-0})|$(ticks "$pm" $(cat /proc/"$pm"/task/*/children 2>/dev/null))|$(ticks "$lgpid")"
}
entered=$(cpu)
sleep "${PROBE_SLEEP:-1.2}"
db=$(psql -h "${PGHOST:-/tmp/bench-pg18/sock}" -p "${PGPORT:-55433}" -U postgres -d postgres -AtF'|' -c \
  "select (select xact_commit from pg_stat_database where datname = '${NF_DB:-nfbench_1}'),
          pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint, wal_records,
          pg_snapshot_xmax(pg_current_snapshot()) from pg_stat_wal")
left=$(cpu)
echo "PROBE|$label|$left|${db%|*}|$entered|${db##*|}"
