#!/usr/bin/env python3
"""Summarise Benchmarks/scripts/tls-compare.sh's results.tsv as Markdown tables.

Medians over rounds; ratios are the median of the per-round ratios (both clients measured in
the same round, minutes apart at most), which is steadier on a noisy shared VM than a ratio of
medians.  Usage: tls-summary.py results.tsv
"""
import csv
import statistics
import sys
from collections import defaultdict


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def f(x, nd=0):
    if x is None:
        return "–"
    return f"{x:,.{nd}f}"


rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
by = defaultdict(list)            # (group, conns, client) -> rows
by_round = defaultdict(dict)      # (group, conns, round) -> client -> row
for r in rows:
    for k in ("requests", "errors", "rps", "cpu", "req_per_cpu_s", "seconds", "maxrss_kb", "nginx_cpu_pct", "handshakes", "resumed"):
        r[k] = float(r[k] or 0)
    for k in ("full_us", "resumed_us"):
        r[k] = float(r[k]) if r[k] not in ("", None) else None
    r["conns"] = int(r["conns"])
    by[(r["group"], r["conns"], r["client"])].append(r)
    by_round[(r["group"], r["conns"], r["round"])][r["client"]] = r


def ratio(group, conns, a, b, key):
    out = []
    for (g, c, _), m in by_round.items():
        if g == group and c == conns and a in m and b in m and m[b][key] > 0 and m[a]["requests"] > 0:
            out.append(m[a][key] / m[b][key])
    return med(out), (min(out) if out else None), (max(out) if out else None)


def rng(lo_hi):
    m, lo, hi = lo_hi
    if m is None:
        return "–"
    return f"**{m:.2f}** ({lo:.2f}–{hi:.2f})"


def per_conn_us(r):
    return r["seconds"] * r["conns"] / r["requests"] * 1e6 if r["requests"] else None


def cpu_per_conn_us(r):
    return r["cpu"] / r["requests"] * 1e6 if r["requests"] else None


groups = sorted({(r["group"], r["conns"]) for r in rows}, key=lambda x: (x[0] != "new-full", x[0] != "new-resumed", x[1]))
nrounds = len({r["round"] for r in rows})
errors = sum(r["errors"] for r in rows)
print(f"{nrounds} rounds; errors in all runs: {int(errors)}\n")

print("### 1. New-connection HTTPS (one GET per TLS connection), Hawser vs libcurl\n")
print("| mode | conns | client | req/s | req / client-CPU-s | nginx worker CPU | handshakes resumed | mean handshake µs | req/s hawser÷curl (min–max) | req/CPU-s hawser÷curl (min–max) |")
print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|")
for g, c in groups:
    if not g.startswith("new-"):
        continue
    for client in ("curl", "hawser"):
        rs = by.get((g, c, client), [])
        if not rs:
            continue
        res = sum(r["resumed"] for r in rs)
        hs = sum(r["handshakes"] for r in rs)
        us = med([(r["resumed_us"] if g == "new-resumed" else r["full_us"]) for r in rs])
        label = "libcurl (curl-multi)" if client == "curl" else "**hawser-load --session**"
        rr = rng(ratio(g, c, "hawser", "curl", "rps")) if client == "hawser" else ""
        rc = rng(ratio(g, c, "hawser", "curl", "req_per_cpu_s")) if client == "hawser" else ""
        print(f"| {g} | {c} | {label} | {f(med([r['rps'] for r in rs]))} | {f(med([r['req_per_cpu_s'] for r in rs]))} | "
              f"{f(med([r['nginx_cpu_pct'] for r in rs]))} % | {int(res):,} / {int(hs):,} | {f(us)} | {rr} | {rc} |")

print("\n### 2. Keep-alive HTTPS GET over one connection (c1)\n")
print("| client | req/s | req / client-CPU-s | client CPU | peak RSS | nginx worker CPU | req/s ÷ wrk (min–max) | req/CPU-s ÷ wrk (min–max) |")
print("|---|---:|---:|---:|---:|---:|---:|---:|")
names = {"wrk": "wrk -t1 -c1 (no verification)", "curl": "libcurl (curl-multi -c 1)",
         "hawser": "**hawser-load --session -c 1**", "hawser-loop": "**hawser-load --session --executor loop -c 1**",
         "hawser-completion": "**hawser-load --session --api completion -c 1**"}
for client in ("wrk", "curl", "hawser", "hawser-loop", "hawser-completion"):
    rs = by.get(("keepalive", 1, client), [])
    if not rs:
        continue
    rr = rng(ratio("keepalive", 1, client, "wrk", "rps")) if client != "wrk" else "1.00"
    rc = rng(ratio("keepalive", 1, client, "wrk", "req_per_cpu_s")) if client != "wrk" else "1.00"
    print(f"| {names[client]} | {f(med([r['rps'] for r in rs]))} | {f(med([r['req_per_cpu_s'] for r in rs]))} | "
          f"{f(med([r['cpu'] for r in rs]), 2)} s | {f(med([r['maxrss_kb'] for r in rs]))} KiB | {f(med([r['nginx_cpu_pct'] for r in rs]))} % | {rr} | {rc} |")

print("\n### 3. Resumed vs full handshake, per new connection\n")
print("Wall time per connection = run seconds × conns ÷ requests (connect + handshake + GET + close, "
      "per concurrent slot); client CPU per connection = client CPU ÷ requests (process start-up "
      "included); handshake = the client's own mean (Hawser: secureConnectionEnd − secureConnectionStart; "
      "libcurl: APPCONNECT − CONNECT).\n")
print("| client | conns | wall µs/conn full | resumed | full÷resumed | CPU µs/conn full | resumed | full÷resumed | handshake µs full | resumed | full÷resumed |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
conns_set = sorted({c for g, c in groups if g.startswith("new-")})
for client in ("curl", "hawser"):
    for c in conns_set:
        full = by.get(("new-full", c, client), [])
        res = by.get(("new-resumed", c, client), [])
        if not full or not res:
            continue
        wf, wr = med([per_conn_us(r) for r in full]), med([per_conn_us(r) for r in res])
        cf, cr = med([cpu_per_conn_us(r) for r in full]), med([cpu_per_conn_us(r) for r in res])
        hf, hr = med([r["full_us"] for r in full]), med([r["resumed_us"] for r in res])
        q = lambda a, b: f"{a / b:.2f}" if a and b else "–"
        print(f"| {'libcurl' if client == 'curl' else '**Hawser**'} | {c} | {f(wf)} | {f(wr)} | {q(wf, wr)} | {f(cf)} | {f(cr)} | {q(cf, cr)} | {f(hf)} | {f(hr)} | {q(hf, hr)} |")
