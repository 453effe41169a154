#!/usr/bin/env bash
# sample.sh DB -- until killed: every 0.5 s, what each backend of DB is doing (pg_stat_activity),
# one line per backend:  WAIT|state|wait_event_type:wait_event|first 50 chars of the query
# and every 5 s the busy processes:  TOP|sample|%cpu|command
#
# One psql and one connection for the whole run (\watch), not one of each per sample: a psql
# started twice a second (its start and its backend's) took about 6 % of the machine's CPU
# samples in a paced run, which the peers, measured without a sampler, did not pay.
set -uo pipefail
db="$1"
( k=0
  while :; do
    top -b -n 1 -w 200 2>/dev/null | awk -v k="$k" 'NR > 7 && $9 > 2 { printf "TOP|%s|%s|%s\n", k, $9, $12 }'
    k=$((k + 10)); sleep 5
  done ) &
top_pid=$!
echo "select 'WAIT|'||state||'|'||coalesce(wait_event_type||':'||wait_event,'CPU')||'|'||
            left(regexp_replace(query, '\s+', ' ', 'g'), 50)
       from pg_stat_activity where datname = '$db' and pid <> pg_backend_pid()
        and state <> 'idle' and backend_type = 'client backend' \\watch 0.5" |
  psql -h "${PGHOST:-/tmp/bench-pg18/sock}" -p "${PGPORT:-55433}" -U postgres -d postgres -At 2>/dev/null &
psql_pid=$!
trap 'kill "$top_pid" "$psql_pid" 2>/dev/null; exit 0' TERM INT
wait
