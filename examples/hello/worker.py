#!/usr/bin/env python3
"""A node-flow worker for the `greet` task, using only Python's standard library.

    python3 examples/hello/worker.py [--server http://127.0.0.1:8080] [--once]

It long-polls the `greet` queue of the `default` namespace, computes a greeting
and reports it. With --once it stops after completing the last task (shout_ref)
of a hello workflow.
"""
import argparse
import json
import socket
import sys
import urllib.error
import urllib.request


def call(server, path, body):
    req = urllib.request.Request(
        server + path, data=json.dumps(body).encode(), method="POST",
        headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=40) as resp:
            return json.load(resp)
    except urllib.error.HTTPError as e:
        sys.exit(f"worker: {path}: {e.code} {e.read().decode()}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", default="http://127.0.0.1:8080")
    ap.add_argument("--namespace", default="default")
    ap.add_argument("--once", action="store_true",
                    help="exit after the last task of one hello workflow")
    args = ap.parse_args()
    queue = f"/v1/ns/{args.namespace}/queues/greet"
    worker = f"hello-worker@{socket.gethostname()}"
    print(f"worker {worker} polling {args.server}{queue}", flush=True)
    while True:
        tasks = call(args.server, queue + "/poll",
                     {"workerId": worker, "count": 10, "waitMs": 30000})["tasks"]
        for t in tasks:
            name = t["input"].get("name", "world")
            if t["input"].get("loud"):
                greeting = name.upper()  # shout what it was given
            else:
                greeting = f"Hello, {name}!"
            call(args.server, f"{queue}/tasks/{t['id']}/complete",
                 {"workerId": worker, "output": {"greeting": greeting}})
            print(f"{t['refName']}: {greeting}", flush=True)
            if args.once and t["refName"] == "shout_ref":
                return


if __name__ == "__main__":
    main()
