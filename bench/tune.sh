#!/usr/bin/env bash
# bench/tune.sh -- a small sweep of node-flow server and worker settings: each point is one
# `bench/run.sh --no-peers --only 1 --n $TUNE_N` (fresh cluster, fresh database, 1-task
# workflows), so points are independent. Prints the RESULT line of each point.
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
N="${TUNE_N:-5000}"
SHAPE="${TUNE_SHAPE:-1}"
point() { # "server flags" workers batch [mode]
  NF_SERVER_FLAGS="$1" NF_WORKERS="$2" NF_BATCH="$3" NF_MODE="${4:-phased}" NF_BIN_PREBUILT="${NF_BIN_PREBUILT:-}" \
    "$HERE/run.sh" --no-peers --only "$SHAPE" --n "$N" 2>&1 | grep -E '^RESULT|^LATENCY|failed'
  NF_BIN_PREBUILT=1
}
point "--http-threads 2 --db-pool-size 8 --decider-threads 2 --decider-batch 64" 4 100
point "--http-threads 4 --db-pool-size 16 --decider-threads 2 --decider-batch 256" 4 100
point "--http-threads 4 --db-pool-size 16 --decider-threads 1 --decider-batch 256" 4 100
point "--http-threads 8 --db-pool-size 24 --decider-threads 4 --decider-batch 256" 4 100
point "--http-threads 4 --db-pool-size 16 --decider-threads 2 --decider-batch 256" 8 200
point "--http-threads 4 --db-pool-size 16 --decider-threads 2 --decider-batch 256" 2 50
point "--http-threads 4 --db-pool-size 16 --decider-threads 2 --decider-batch 256" 4 100 mixed
