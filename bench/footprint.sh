#!/usr/bin/env bash
# bench/footprint.sh -- two of the server's costs that do not depend on throughput:
#
#   1. memory: the server's RSS idle, then with 1,000 long-polls parked on an empty queue
#      (one client address, the default --max-parked-per-client), then after they ended;
#   2. the executions list: page 1 against page 500 (limit 50, keyset cursors), each
#      request timed 30 times, with 30,000 executions in the table.
#
#   bench/footprint.sh            build (like run.sh), run both, print a table
#   NF_BIN_PREBUILT=1             use bench/.build/nodeflow as it is
#
# Runs on the fresh cluster of the shared pg.sh (port 55433, the peers' settings), in its own
# database; stops everything it started on exit. Output: $BENCH_RESULTS/footprint-*.txt
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
SHARED="${BENCH_SHARED:-/work/shared/bench}"
export BENCH_DEPS="${BENCH_DEPS:-/tmp/pgbench-deps}"
export BENCH_RESULTS="${BENCH_RESULTS:-/tmp/nfb-results}"
eval "$("$SHARED/pg.sh" env)"
export PGHOST PGPORT PGUSER
NF_BIN="${NF_BIN:-$HERE/.build/nodeflow}"
DB=nfbench_footprint
WORK="$(mktemp -d /tmp/nfb-foot.XXXXXX)"
SERVER_PID=""
mkdir -p "$BENCH_RESULTS"
OUT="$BENCH_RESULTS/footprint-$(date -u +%Y%m%dT%H%M%SZ).txt"

cleanup() {
  local rc=$?
  set +e
  [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null && wait "$SERVER_PID" 2>/dev/null
  "$SHARED/pg.sh" stop >/dev/null 2>&1
  rm -rf "$WORK"
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ -z "${NF_BIN_PREBUILT:-}" ]; then
  make -C "$ROOT" --no-print-directory BUILD="$HERE/.build" build >"$WORK/build.log" 2>&1 ||
    { cat "$WORK/build.log"; echo "footprint.sh: build failed" >&2; exit 1; }
fi
cp "$NF_BIN" "$WORK/nfsrv"
"$SHARED/pg.sh" start >/dev/null
psql -q -d postgres -c "CREATE DATABASE $DB"
URL="postgresql://postgres@127.0.0.1:$PGPORT/$DB"
"$WORK/nfsrv" migrate --database-url "$URL" >/dev/null
"$WORK/nfsrv" serve --database-url "$URL" --listen 127.0.0.1:0 --log-level warn \
  >"$WORK/server.out" 2>"$WORK/server.err" &
SERVER_PID=$!
PORT=""
for _ in $(seq 100); do
  PORT=$(sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\).*|\1|p' "$WORK/server.out" "$WORK/server.err" | head -1)
  [ -n "$PORT" ] && break
  sleep 0.1
done
[ -n "$PORT" ] || { cat "$WORK/server.err"; echo "footprint.sh: server did not start" >&2; exit 1; }
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$PORT/readyz" >/dev/null && break; sleep 0.1; done

# 30,000 finished executions, one every 100 ms back from now, written directly (the list
# reads rows; how they were made does not matter to it).
psql -q -d "$DB" -c "
  INSERT INTO \"WorkflowExecutions\" (\"id\", \"namespaceId\", \"defName\", \"defVersion\",
    \"status\", \"input\", \"output\", \"startedAt\", \"endedAt\")
  SELECT uuidv7(-(g * interval '100 milliseconds')), n.\"id\", 'footprint', 1, 'COMPLETED',
         jsonb_build_object('i', g), '{\"ok\":true}',
         now() - g * interval '100 milliseconds', now() - g * interval '100 milliseconds'
    FROM generate_series(1, 30000) g, \"Namespaces\" n WHERE n.\"name\" = 'default';
  ANALYZE \"WorkflowExecutions\";"

python3 - "$PORT" "$SERVER_PID" >"$OUT" <<'PY'
import json, socket, statistics, sys, time, urllib.request

port, pid = int(sys.argv[1]), int(sys.argv[2])
base = f"http://127.0.0.1:{port}/v1/ns/default"

def rss_kib():
    with open(f"/proc/{pid}/status") as f:
        return {k: int(v.split()[0]) for k, v in (l.split(":", 1) for l in f)
                if k in ("VmRSS", "VmHWM")}

def metric(name):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics") as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
    return None

def req(path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    r = urllib.request.Request(base + path, data=data,
                               headers={"Content-Type": "application/json"},
                               method="POST" if data else "GET")
    with urllib.request.urlopen(r) as resp:
        return json.loads(resp.read())

print("# node-flow footprint")
# ---- 1. memory with 1,000 parked long-polls
idle = rss_kib()
body = json.dumps({"workerId": "footprint", "count": 1, "waitMs": 20000}).encode()
head = (f"POST /v1/ns/default/queues/foot_task/poll HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode()
socks = []
for i in range(1000):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(head + body)
    socks.append(s)
deadline = time.time() + 15
parked = None
while time.time() < deadline:
    parked = metric("nodeflow_http_parked")
    if parked is not None and parked >= 1000:
        break
    time.sleep(0.2)
held = rss_kib()
for s in socks:
    s.close()
time.sleep(2)
after = rss_kib()
print(f"parked polls seen by the server: {parked}")
print(f"RSS idle {idle['VmRSS']/1024:.1f} MiB | with 1,000 parked polls {held['VmRSS']/1024:.1f} MiB"
      f" | after they closed {after['VmRSS']/1024:.1f} MiB | peak (VmHWM) {after['VmHWM']/1024:.1f} MiB")

# ---- 2. page 1 vs page 500
def timed(path, n=30):
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        urllib.request.urlopen(base + path).read()
        ts.append((time.perf_counter() - t0) * 1000)
    return statistics.median(ts), max(ts)

cursor = None
first = "/workflows?status=COMPLETED&limit=50"
for page in range(1, 500):
    r = req(first + (f"&cursor={cursor}" if cursor else ""))
    cursor = r["nextCursor"]
    assert cursor, f"no cursor after page {page}"
p1 = timed(first)
p500 = timed(first + f"&cursor={cursor}")
items = req(first + f"&cursor={cursor}")["items"]
print(f"page 1: median {p1[0]:.2f} ms (max {p1[1]:.2f}) | page 500: median {p500[0]:.2f} ms"
      f" (max {p500[1]:.2f}), {len(items)} items | ratio {p500[0]/p1[0]:.2f}")
PY
cat "$OUT"
echo "written: $OUT"
