#!/usr/bin/env python3
"""report.py LOG -- the tables of one bench/run.sh log (markdown).

Reads RESULT| lines (node-flow and peers), TASKS|/LATENCY|/CHAIN| (node-flow), PROBE| (per-phase
counters from probe.sh), TABLE| (rows written per table), STMT| (pg_stat_statements, with
--stats), SAMPLE| (pg_stat_activity and top samples), MINUTE|/SOAK|/DEAD| (the paced soak's
per-minute latency and dead tuples) and the limit.sh RESULT lines, and prints: the comparison
table with node-flow's ratio to each peer, the targets, and per node-flow shape where its time
and its database work went.
"""
import collections
import re
import sys

HZ = 100  # USER_HZ


def num(s):
    try:
        return float(s)
    except (TypeError, ValueError):
        return None


def fmt(x, d=0):
    return "-" if x is None else f"{x:,.{d}f}"


def main(path):
    results = []  # (system, e2e, enq, drain, setting, notes)
    probes = collections.defaultdict(dict)  # shape -> label -> fields
    tables = collections.defaultdict(list)
    stmts = collections.defaultdict(list)
    waits = collections.defaultdict(collections.Counter)
    tops = collections.defaultdict(lambda: collections.defaultdict(list))
    lat = {}
    chain = {}  # system -> start → last task percentiles (CHAIN|)
    minutes = collections.defaultdict(list)  # system -> [(m, n, p50, p99)]
    soak = {}  # system -> (first p99, last p99, ratio, minutes)
    dead = collections.defaultdict(list)  # shape -> [(m, live, dead, autovacuums)]
    limits = []  # (name, tps, setting)
    shape = None
    for line in open(path, errors="replace"):
        line = line.rstrip("\n")
        m = re.match(r"== node-flow (\d+)-task workflows \(N=\d+, ([\w ]+?)(?: rate=[\d.]+)?"
                     r"(?: replicas=(\d+))?\)(?: \[(.+?)\])?", line)
        if m:
            shape = m.group(1) + ("" if m.group(2) == "phased" else " " + m.group(2))
            if m.group(3):
                shape += " x" + m.group(3)
            if m.group(4):
                shape = m.group(1) + " " + m.group(4)
            continue
        if line.startswith("== peers"):
            shape = None
        p = line.split("|")
        if p[0] == "RESULT" and len(p) >= 6 and p[1].startswith("limit:"):
            limits.append((p[1], num(p[2]), p[5]))
        elif p[0] == "RESULT" and len(p) >= 6:
            results.append((p[1], num(p[2]), num(p[3]), num(p[4]), p[5], "|".join(p[6:])))
        elif p[0] == "LATENCY":
            lat[p[1]] = dict(kv.split("=", 1) for kv in p[2:] if "=" in kv)
        elif p[0] == "CHAIN":
            chain[p[1]] = dict(kv.split("=", 1) for kv in p[2:] if "=" in kv)
        elif p[0] == "MINUTE" and len(p) >= 6:
            minutes[p[1]].append((int(p[2]), int(p[3]), num(p[4]), num(p[5])))
        elif p[0] == "SOAK" and len(p) >= 6:
            soak[p[1]] = (num(p[2]), num(p[3]), num(p[4]), int(p[5]))
        elif p[0] == "DEAD" and len(p) >= 6:
            dead[p[1]].append((int(p[2]), num(p[3]), num(p[4]), num(p[5])))
        elif p[0] == "PROBE" and shape:
            probes[shape][p[1]] = [num(x) for x in p[2:]]
        elif p[0] == "TABLE":
            tables[p[1]].append(p[2:])
        elif p[0] == "STMT" and len(p) >= 7:
            stmts[p[1]].append([num(x) for x in p[2:6]] + ["|".join(p[6:])])
        elif p[0] == "SAMPLE" and len(p) >= 3:
            if p[2] == "WAIT" and len(p) >= 6:
                waits[p[1]][(p[4], p[5][:40])] += 1
            elif p[2] == "TOP" and len(p) >= 6:
                tops[p[1]][p[5]].append((p[3], num(p[4]) or 0))

    def notes(r):
        return dict(kv.split("=", 1) for kv in r[5].split() if "=" in kv)

    def steps_per_s(r):
        """tasks (node-flow) or steps (DBOS) per second in the drain phase."""
        n = notes(r)
        for k in ("tasks_per_s_drain", "steps_per_s_drain"):
            if k in n:
                return num(n[k])
        return None

    by = {}
    for r in results:
        by.setdefault(r[0], r)
    nf1 = by.get("node-flow 1-task")
    nf5 = by.get("node-flow 5-task")

    print("## Throughput (jobs or workflows per second; N per system in the log header)\n")
    print("| system | wf or jobs/s e2e | enqueue/s | drain/s | tasks or steps/s (drain) "
          "| node-flow 1-task e2e ÷ this | node-flow 5-task tasks/s ÷ this steps/s |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in results:
        sps = steps_per_s(r)
        ratio1 = f"{nf1[1] / r[1]:.2f}×" if nf1 and r[1] and not r[0].startswith("node-flow") else ""
        ratio5 = ""
        if nf5 and sps and r[0].startswith("DBOS"):
            ratio5 = f"{steps_per_s(nf5) / sps:.2f}×"
        print(f"| {r[0]} | {fmt(r[1])} | {fmt(r[2])} | {fmt(r[3])} | {fmt(sps)} | {ratio1} | {ratio5} |")
    print()
    print("Settings:")
    for r in results:
        print(f"- {r[0]}: {r[4]}")
    print()

    print("## Targets\n")
    print("| target | node-flow | peer | ratio | met? |")
    print("|---|---:|---:|---:|---|")

    def target(label, ours, theirs, want):
        if ours is None or not theirs:
            print(f"| {label} | {fmt(ours)} | {fmt(theirs)} | - | not measured |")
            return
        q = ours / theirs
        print(f"| {label} | {fmt(ours)} | {fmt(theirs)} | {q:.2f}× | "
              f"{'yes' if q >= want else 'no'} (want ≥ {want}×) |")

    d1, d3, g20 = by.get("DBOS 1-step"), by.get("DBOS 3-step"), by.get("graphile-worker")
    target("1-task wf/s e2e vs DBOS 1-step wf/s e2e", nf1 and nf1[1], d1 and d1[1], 3)
    target("1-task wf/s e2e vs graphile-worker (c=20) jobs/s e2e", nf1 and nf1[1], g20 and g20[1], 1.5)
    target("5-task tasks/s (drain) vs DBOS 3-step steps/s (drain)", nf5 and steps_per_s(nf5),
           d3 and steps_per_s(d3), 3)
    for r in results:
        m = re.match(r"node-flow 1-task x(\d+) replicas$", r[0])
        if m and nf1:
            target(f"1-task wf/s e2e on {m.group(1)} replicas vs on 1", r[1], nf1[1], 0.9)
    if nf5 and d3:
        n5, nd = notes(nf5), notes(d3)
        target("5-task tasks/s e2e vs DBOS 3-step steps/s e2e", num(n5.get("tasks_per_s_e2e")),
               d3[1] * 3 if d3[1] else None, 3)
    queue_limit = max((t for name, t, _ in limits if name.startswith("limit: queue") and t),
                      default=None)
    target("1-task wf/s e2e vs limit.sh one-commit-per-job queue (best c)", nf1 and nf1[1],
           queue_limit, 0.4)
    half = lat.get("node-flow 1-task latency at half peak")
    if half:
        p99 = num(half.get("p99_ms"))
        print(f"| enqueue→worker p99 at half the peak | {fmt(p99, 1)} ms | | | "
              f"{'yes' if p99 is not None and p99 < 10 else 'no'} (want < 10 ms) |")
    else:
        print("| enqueue→worker p99 at half the peak | - | | | not measured (--latency) |")
    for sysname, (first, last, ratio, mins) in sorted(soak.items()):
        print(f"| soak ({mins} min at 70% of peak): last minute's p99 ÷ first's | "
              f"{fmt(last, 1)} ms | {fmt(first, 1)} ms | {ratio:.2f}× | "
              f"{'yes' if ratio <= 1.2 else 'no'} (want ≤ 1.2×) |")
    if not soak:
        print("| soak: last minute's p99 ÷ first's | - | | | not measured (--soak MIN) |")
    print()
    if limits:
        print("limit.sh on the same cluster: " +
              "; ".join(f"{name} ({setting}) {fmt(t)}/s" for name, t, setting in limits))
        print()
    for sysname, rows in sorted(minutes.items()):
        print(f"{sysname}, per minute (by when the worker received the task): " +
              ", ".join(f"m{m} n={n} p50 {fmt(p50, 1)} p99 {fmt(p99, 1)} ms"
                        for m, n, p50, p99 in rows))
        print()
    for shape, rows in sorted(dead.items()):
        print(f'"TaskQueues" during node-flow {shape}, per minute: ' +
              ", ".join(f"m{m} live {fmt(lv)} dead {fmt(dd)} autovacuums {fmt(av)}"
                        for m, lv, dd, av in rows))
        print()

    for s in sorted(lat):
        L = lat[s]
        print(f"- {s}: start response → first task in a worker's poll: p50 {L.get('p50_ms')} ms, "
              f"p90 {L.get('p90_ms')} ms, p99 {L.get('p99_ms')} ms (n={L.get('n')})")
    for s in sorted(chain):
        L = chain[s]
        print(f"- {s}: start response → last task in a worker's poll: p50 {L.get('p50_ms')} ms, "
              f"p90 {L.get('p90_ms')} ms, p99 {L.get('p99_ms')} ms (n={L.get('n')})")
    print()

    for shape in sorted(probes):
        pr = probes[shape]
        parts = shape.split()
        sysname = " ".join([f"node-flow {parts[0]}-task"] + parts[1:])
        r = by.get(sysname) or by.get(sysname + " replicas")  # "1 x3": "…-task x3 replicas"
        n = int(notes(r)["n"]) if r and "n" in notes(r) else None
        print(f"## {sysname}: where the time and the work went\n")
        print("| phase | wall s | machine busy | node-flow CPU | postgres CPU | loadgen CPU "
              "| other CPU | postgres ms/wf | txn/wf | WAL B/wf | WAL rec/wf |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        labels = [l for l in ("start", "enqueued", "done") if l in pr]
        for a, b in zip(labels, labels[1:]):
            A, B = pr[a], pr[b]
            if len(B) >= 15:  # B's CPU as its hook was entered: the phase alone
                wall = (B[9] - A[0]) / 1000
                busy, total = B[10] - A[1], B[11] - A[2]
                nf, pg, lg = B[12] - A[3], B[13] - A[4], B[14] - A[5]
            else:  # older logs: the probe's sleep (and what else the hooks did) counted in
                wall = (B[0] - A[0]) / 1000 - 1.2
                busy, total = B[1] - A[1], B[2] - A[2]
                nf, pg, lg = B[3] - A[3], B[4] - A[4], B[5] - A[5]
            cores = total / HZ / max(wall + (0 if len(B) >= 15 else 1.2), 1e-9)
            other = max(busy - nf - pg - lg, 0)

            def pct(x):
                return f"{100 * x / total * cores:.0f}%" if total else "-"
            per = (lambda x: f"{x / n:.2f}") if n else (lambda x: "-")
            perb = (lambda x: f"{x / n:,.0f}") if n else (lambda x: "-")
            # Every tick from this probe's end to the next's, the wait included: what a
            # phase set going (a decider's backlog) may finish while the hook waits.
            pg_ms = (lambda x: f"{1000 * x / HZ / n:.2f}") if n else (lambda x: "-")
            # Transactions that wrote (ids assigned) when the probes read the next id, else
            # the commits the statistics system had reported (older logs).
            txn = B[15] - A[15] if len(A) >= 16 and len(B) >= 16 else B[6] - A[6]
            print(f"| {a}→{b} | {wall:.1f} | {pct(busy)} of {cores:.0f} cores | {pct(nf)} | {pct(pg)} | "
                  f"{pct(lg)} | {pct(other)} | {pg_ms(B[4] - A[4])} | {per(txn)} | "
                  f"{perb(B[7] - A[7])} | {per(B[8] - A[8])} |")
        print("\n(CPU as % of one core, averaged over the phase; 'other' is every process outside "
              "the benchmark, i.e. what else ran on the machine. postgres ms/wf: PostgreSQL's CPU "
              "time from the phase's start to the end of the probe after it, which waits 1.2 s, "
              "per workflow. txn/wf: transactions that wrote, per workflow (before 2026-12-07 "
              "04:00Z: commits as the statistics system reported them, which lag by up to ten "
              "seconds); WAL rec/wf lags the same way, WAL B/wf does not.)\n")
        if tables.get(shape):
            print("Rows written per workflow, by table (inserts / updates (HOT) / deletes):\n")
            for t in tables[shape]:
                ins, upd, hot, dele = (int(x) for x in t[1:5])
                if n:
                    print(f"- {t[0]}: {ins / n:.2f} / {upd / n:.2f} ({hot / n:.2f}) / {dele / n:.2f}")
            print()
        st = stmts.get(shape)
        if st and n:
            calls = sum(x[0] for x in st)
            wal = sum(x[2] for x in st)
            ms = sum(x[3] for x in st) or 1
            print(f"Statements (pg_stat_statements, enqueue and drain, top {len(st)} by time): "
                  f"{calls / n:.2f} calls/wf, {wal / n:,.0f} WAL B/wf\n")
            print("| calls/wf | rows/call | WAL B/wf | time share | statement |")
            print("|---:|---:|---:|---:|---|")
            for c, r, wb, t, q in st[:15]:
                print(f"| {c / n:.2f} | {r / max(c, 1):.1f} | {wb / n:,.0f} | {100 * t / ms:.0f}% "
                      f"| `{q[:80]}` |")
            print()
        w = waits.get(shape)
        if w:
            tot = sum(w.values())
            print(f"Backend samples (pg_stat_activity every 0.5 s, {tot} non-idle samples), top 12:\n")
            print("| share | wait event (CPU = none) | statement |")
            print("|---:|---|---|")
            for (ev, q), c in w.most_common(12):
                print(f"| {100 * c / tot:.0f}% | {ev} | `{q}` |")
            ev = collections.Counter()
            for (e, _), c in w.items():
                ev[e] += c
            print("\nBy wait event: " + ", ".join(f"{e} {100 * c / tot:.0f}%" for e, c in ev.most_common(8)))
            print()
        t = tops.get(shape)
        if t:
            samples = len({k for v in t.values() for k, _ in v}) or 1
            mean = {cmd: sum(c for _, c in v) / samples for cmd, v in t.items()}
            print(f"top, {samples} samples: mean %CPU per command (all its processes summed): " +
                  ", ".join(f"{k} {v:.0f}%" for k, v in sorted(mean.items(), key=lambda kv: -kv[1])[:6]))
            print()


if __name__ == "__main__":
    main(sys.argv[1])
