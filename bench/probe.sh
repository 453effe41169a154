#!/usr/bin/env bash
# probe.sh LABEL -- one snapshot of the counters bench/run.sh turns into per-phase costs.
# Called by loadgen --hook between its phases (untimed). Prints one line:
#   PROBE|label|unix_ms|cpu_busy|cpu_total|nodeflow|postgres|loadgen|xact_commit|wal_bytes|wal_records
# CPU figures are clock ticks (USER_HZ) from /proc: the whole machine (busy, total), the node-flow
# server (NF_PID: its pid, or every replica's, separated by spaces), every process of the bench
# cluster (postmaster and children) and the loadgen
# (the parent of the shell that runs this hook). xact_commit is the node-flow database's
# (NF_DB), WAL is cluster-wide. The sleep lets backends flush their statistics (they do so at
# most once a second while busy).
set -uo pipefail
label="$1"
sleep "${PROBE_SLEEP:-1.2}"
ticks() { # utime+stime of one pid, 0 if gone
  local s; s=$(cat "/proc/$1/stat" 2>/dev/null) || { echo 0; return; }
  s="${s##*) }"; set -- $s; echo $(( ${12} + ${13} ))
}
read -r _ u n s i io irq sirq st _ < /proc/stat
busy=$((u + n + s + irq + sirq + st)); total=$((busy + i + io))
nf=0
for p in ${NF_PID:-0}; do nf=$((nf + $(ticks "$p"))); done
pm=$(head -1 "${BENCH_PGBASE:-/tmp/bench-pg18}/data/postmaster.pid" 2>/dev/null || echo 0)
pg=$(ticks "$pm")
for c in $(cat /proc/"$pm"/task/*/children 2>/dev/null); do pg=$((pg + $(ticks "$c"))); done
lg=$(ticks "$(ps -o ppid= -p "$PPID" | tr -d ' ')")
db=$(psql -h "${PGHOST:-/tmp/bench-pg18/sock}" -p "${PGPORT:-55433}" -U postgres -d postgres -AtF'|' -c \
  "select (select xact_commit from pg_stat_database where datname = '${NF_DB:-nfbench_1}'), wal_bytes, wal_records from pg_stat_wal")
echo "PROBE|$label|$(date +%s%3N)|$busy|$total|$nf|$pg|$lg|$db"
