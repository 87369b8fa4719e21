#!/usr/bin/env python3
"""What sharing limits through Redis adds to a request (issue 21): the same
weir route at 1,000 requests/s (open loop), its rate limit kept in Redis
(`limit_scope = "cluster"`) against kept in the process (`"local"`).

Two weir processes with one config but for `limit_scope`, both with a
`[cluster]` table on one redis-server, on core 0; the upstream (nginx
`return 200`), Redis and the load generator (`examples/llm_bench.rs load`,
1 KiB POSTs) on core 1. The limit is set high enough that nothing is
refused: what is measured is the decision's round trip. Targets alternate;
medians over repetitions. Also read: weir's own `weir_cluster_redis_seconds`
(the wait for Redis's answer, as weir sees it).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from procs import BIN, Procs, free_port, wait_http  # noqa: E402


def weir_toml(tmp, name, port, admin, up, redis, scope):
    path = os.path.join(tmp, f"{name}.toml")
    open(path, "w").write(f"""[log]
access_log = false
level = "warn"
[admin]
address = "127.0.0.1:{admin}"
[cluster]
url = "redis://127.0.0.1:{redis}"
[[listener]]
name = "web"
address = "127.0.0.1:{port}"
[[route]]
name = "limited"
path = "/"
upstream = "http://127.0.0.1:{up}"
rate_limit_per_second = 1000000
limit_scope = "{scope}"
""")
    return path


def redis_histogram(admin):
    text = urllib.request.urlopen(f"http://127.0.0.1:{admin}/metrics", timeout=5).read().decode()
    buckets = []
    count = 0
    for line in text.splitlines():
        if line.startswith("weir_cluster_redis_seconds_bucket"):
            le = line.split('le="')[1].split('"')[0]
            buckets.append((float("inf") if le == "+Inf" else float(le), float(line.split()[-1])))
        elif line.startswith("weir_cluster_redis_seconds_count"):
            count = float(line.split()[-1])
    return buckets, count


def quantile(buckets, count, q):
    for le, n in sorted(buckets):
        if count and n >= q * count:
            return le
    return float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--tmp", required=True)
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    reps, seconds, rate = (1, 3, 1000) if a.quick else (5, 10, 1000)
    ports = {k: free_port() for k in ["up", "redis", "shared", "local", "admin_shared", "admin_local"]}
    procs = Procs(a.tmp, own_group=True)
    results = {"cluster": [], "local": []}
    try:
        os.makedirs(os.path.join(a.tmp, "up_body"), exist_ok=True)
        up_conf = os.path.join(a.tmp, "up.conf")
        open(up_conf, "w").write(f"""worker_processes 1; daemon off; pid {a.tmp}/up.pid; error_log {a.tmp}/up-error.log;
events {{ worker_connections 4096; }}
http {{ access_log off; client_body_temp_path {a.tmp}/up_body; client_body_buffer_size 64k;
  keepalive_requests 1000000000;
  server {{ listen 127.0.0.1:{ports['up']}; location / {{ return 200 'ok'; }} }} }}
""")
        procs.start("upstream", ["nginx", "-c", up_conf, "-p", a.tmp], 1)
        procs.start("redis", ["redis-server", "--port", str(ports["redis"]), "--bind", "127.0.0.1",
                              "--save", "", "--appendonly", "no"], 1)
        time.sleep(0.5)
        for scope, name in (("cluster", "shared"), ("local", "local")):
            procs.start(name, [os.path.join(BIN, "weir"), "run", "--config",
                               weir_toml(a.tmp, name, ports[name], ports[f"admin_{name}"], ports["up"],
                                         ports["redis"], scope)], 0)
        for name in ("shared", "local"):
            if not wait_http(f"http://127.0.0.1:{ports[name]}/"):
                sys.exit(f"weir {name} did not come up; see {a.tmp}/{name}.log")
        for rep in range(reps):
            for scope, name in (("cluster", "shared"), ("local", "local")):
                cmd = ["taskset", "-c", "1", os.path.join(BIN, "examples", "llm_bench"), "load",
                       f"http://127.0.0.1:{ports[name]}", "/v1/messages", str(rate), str(seconds), "0"]
                out = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 60)
                r = json.loads(out.stdout.strip().splitlines()[-1])
                results[scope].append(r)
                print(f"[{time.strftime('%H:%M:%S')}] rep {rep + 1}/{reps} {scope}: "
                      f"p50 {r['json']['total_p50_ms']:.3f} ms p99 {r['json']['total_p99_ms']:.3f} ms "
                      f"statuses {r['statuses']} errors {r['errors']}", flush=True)
        buckets, count = redis_histogram(ports["admin_shared"])
    finally:
        procs.stop_all()
    open(a.out, "w").write("\n".join(report(results, buckets, count, rate, seconds, reps)))


def report(results, buckets, count, rate, seconds, reps):
    """The markdown of bench/cluster-results.md, as lines."""
    med = statistics.median
    row = {s: {k: med([r["json"][k] for r in rs]) for k in ("total_p50_ms", "total_p99_ms")}
           for s, rs in results.items()}
    statuses = {s: {} for s in results}
    for s, rs in results.items():
        for r in rs:
            for k, v in r["statuses"].items():
                statuses[s][k] = statuses[s].get(k, 0) + v
    lines = [
        "### Shared limits in Redis: what the round trip adds (`bash bench/cluster.sh`)",
        "",
        f"Measured on {time.strftime('%Y-%m-%d')}: one weir route at {rate} requests/s (open loop, 1 KiB POSTs, "
        f"{seconds} s × {reps} alternated repetitions, medians), its client rate limit decided by a Lua script "
        "in Redis (`limit_scope = \"cluster\"`) or in the process (`\"local\"`), everything else equal; "
        "weir on core 0, upstream, redis-server and load generator on core 1.",
        "",
        "| limits | p50 ms | p99 ms | statuses | errors |",
        "|---|---|---|---|---|",
    ]
    for s in ("local", "cluster"):
        lines.append(f"| {s} | {row[s]['total_p50_ms']:.3f} | {row[s]['total_p99_ms']:.3f} | {statuses[s]} | "
                     f"{sum(r['errors'] for r in results[s])} |")
    lines += [
        "",
        f"Added by Redis: **p50 {1000 * (row['cluster']['total_p50_ms'] - row['local']['total_p50_ms']):.0f} µs, "
        f"p99 {1000 * (row['cluster']['total_p99_ms'] - row['local']['total_p99_ms']):.0f} µs** "
        "(issue 21's target: p99 under 500 µs). weir's own `weir_cluster_redis_seconds` over the run "
        f"({count:.0f} decisions): p50 ≤ {quantile(buckets, count, 0.5) * 1e6:.0f} µs, "
        f"p99 ≤ {quantile(buckets, count, 0.99) * 1e6:.0f} µs (histogram bucket bounds).",
        "",
    ]
    return lines


if __name__ == "__main__":
    main()
