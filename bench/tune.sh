#!/usr/bin/env bash
# bench/tune.sh -- a small sweep of node-flow server and worker settings: each point is one
# `bench/run.sh --no-peers --only $TUNE_SHAPE --n $TUNE_N --mixed-n 0` (fresh cluster, fresh
# database), so points are independent. The first point builds (unless NF_BIN_PREBUILT=1),
# the others reuse that binary. Prints the RESULT line of each point.
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
N="${TUNE_N:-5000}"
SHAPE="${TUNE_SHAPE:-1}"
point() { # "server flags" workers batch
  NF_SERVER_FLAGS="$1" NF_WORKERS="$2" NF_BATCH="$3" NF_BIN_PREBUILT="${NF_BIN_PREBUILT:-}" \
    "$HERE/run.sh" --no-peers --only "$SHAPE" --n "$N" --mixed-n 0 2>&1 |
    grep -E '^RESULT|failed|exited' | cut -d'|' -f2-6
  NF_BIN_PREBUILT=1
}
S="--http-threads 4 --db-pool-size 16"
point "--http-threads 2 --db-pool-size 8 --decider-threads 2 --decider-batch 64" 4 100  # defaults
point "$S --decider-threads 2 --decider-batch 256" 4 100
point "$S --decider-threads 1 --decider-batch 256" 4 100
point "$S --decider-threads 4 --decider-batch 256" 4 100
point "$S --decider-threads 2 --decider-batch 1000" 4 100
point "$S --decider-threads 2 --decider-batch 256" 8 200
point "$S --decider-threads 2 --decider-batch 256" 16 100
point "--http-threads 8 --db-pool-size 32 --decider-threads 2 --decider-batch 256" 16 100
point "$S --decider-threads 2 --decider-batch 256" 4 100  # the second point again: the noise
point "$S --decider-threads 1 --decider-batch 256" 16 100
point "$S --decider-threads 1 --decider-batch 1000" 16 100
point "$S --decider-threads 1 --decider-batch 256" 4 100   # the third point again
