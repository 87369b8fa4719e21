#!/usr/bin/env python3
"""The frontier benchmark: the latency one request feels through a proxy,
and how many requests/s each proxy carries with p99 under a bound.

The method of the public "On the Bench" AI-gateway board
(GetBusbar/benchmarking): one concurrency sweep per target, closed loop;
from it, the added latency at concurrency 1 (through the proxy minus
direct) and, for each p99 bound (1, 5, 10, 50 ms), the most requests/s a
target carried at a concurrency whose p99 stayed under the bound with no
error.

Targets, all POSTing the same Anthropic Messages body (1 KiB and a Claude
Code-sized 50 KiB, `model` last so a proxy that needs it reads the whole
body) to the same upstream:

- direct: the upstream itself (nginx `return 200` of a Messages answer);
- nginx: nginx 1.22 proxying (keep-alive upstream, request buffered in
  memory as an LLM route must);
- weir plain: a weir proxy route (streams the body through);
- weir LLM: a weir `kind = "anthropic"` route (reads the body for `model`);
- LiteLLM (`--litellm PATH`): its proxy, one worker, at low concurrency
  only (it carries ~50 requests/s on this machine).

The upstream and the load generator share core 1, the proxy under test has
core 0 (as bench/llm.py). Targets alternate within each repetition; the
report gives medians over repetitions.

Streams: the same Messages request with `"stream": true` to weir's mock
provider (`examples/llm_bench.rs mock`, 27 events 10 ms apart), direct,
through nginx (`proxy_buffering off`) and through a weir LLM route, at
concurrency 1, 16 and 64: time to the first token (the first read holding a
`content_block_delta`: a gateway that can fail over holds `message_start`
until content comes, so the first bytes are not what a user waits for), the
largest gap between two reads of one stream, and stream errors.

Memory: each proxy's RSS before the sweep (idle, after start), the most
sampled during the sweep (under load) and after it.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from procs import BIN, Procs, children, free_port, status_kib, wait_http  # noqa: E402

ANSWER = json.dumps({
    "id": "msg_bench", "type": "message", "role": "assistant", "model": "claude-bench",
    "content": [{"type": "text", "text": "Rivers carry water from the hills to the sea."}],
    "stop_reason": "end_turn", "stop_sequence": None,
    "usage": {"input_tokens": 12, "output_tokens": 11},
})


def body(size):
    """An Anthropic Messages request of about `size` bytes, `model` last."""
    filler = "The function reads the file, parses each line and returns the totals. "
    system = [{"type": "text", "text": "You are Claude Code. "}]
    tools = [{"name": f"tool_{i}", "description": "Runs a tool. " * 4,
              "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}}
             for i in range(4)]
    req = {"max_tokens": 1024, "system": system, "tools": tools, "stream": False,
           "messages": [{"role": "user", "content": ""}], "model": "claude-bench"}
    base = len(json.dumps(req))
    req["messages"][0]["content"] = (filler * (size // len(filler) + 1))[: max(0, size - base)]
    return json.dumps(req)


def nginx_upstream(tmp, port):
    answer = ANSWER.replace("\\", "\\\\").replace("'", "\\'")
    conf = f"""worker_processes 1;
error_log {tmp}/up-error.log warn;
pid {tmp}/up.pid;
daemon off;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    client_body_temp_path {tmp}/up_body;
    client_max_body_size 0;
    client_body_buffer_size 1m;
    keepalive_requests 1000000000;
    server {{
        listen 127.0.0.1:{port} reuseport;
        location / {{
            default_type application/json;
            return 200 '{answer}';
        }}
    }}
}}
"""
    path = os.path.join(tmp, "upstream.nginx.conf")
    open(path, "w").write(conf)
    return path


def nginx_proxy(tmp, port, up, mock):
    conf = f"""worker_processes 1;
error_log {tmp}/px-error.log warn;
pid {tmp}/px.pid;
daemon off;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    client_body_temp_path {tmp}/px_body;
    proxy_temp_path {tmp}/px_proxy;
    client_max_body_size 0;
    client_body_buffer_size 1m;   # the body stays in memory, as an LLM route keeps it
    keepalive_requests 1000000000;
    upstream up {{ server 127.0.0.1:{up}; keepalive 64; }}
    upstream mock {{ server 127.0.0.1:{mock}; keepalive 64; }}
    server {{
        listen 127.0.0.1:{port};
        location /stream/ {{
            proxy_pass http://mock/;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;   # each event as it comes, as an LLM stream needs
        }}
        location / {{
            proxy_pass http://up;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header X-Forwarded-For $remote_addr;
        }}
    }}
}}
"""
    path = os.path.join(tmp, "proxy.nginx.conf")
    open(path, "w").write(conf)
    return path


def weir_config(tmp, port, up, mock):
    conf = f"""[log]
access_log = false
level = "warn"
[connections]
max_requests = 0
[[listener]]
name = "web"
address = "127.0.0.1:{port}"
[[route]]
name = "plain"
path = "/plain"
upstream = "http://127.0.0.1:{up}"
[[route]]
name = "anthropic"
kind = "anthropic"
path = "/v1/messages"
[[route.upstreams]]
name = "static"
url = "http://127.0.0.1:{up}"
[[route]]
name = "stream"
kind = "anthropic"
path = "/stream"
[[route.upstreams]]
name = "mock"
url = "http://127.0.0.1:{mock}"
"""
    path = os.path.join(tmp, "weir.toml")
    open(path, "w").write(conf)
    return path


def litellm_config(tmp, up):
    conf = f"""model_list:
  - model_name: claude-bench
    litellm_params:
      model: anthropic/claude-bench
      api_base: http://127.0.0.1:{up}
      api_key: sk-bench
"""
    path = os.path.join(tmp, "litellm.yaml")
    open(path, "w").write(conf)
    return path


def load(url, body_file, seconds, concurrency, first_mark=None):
    cmd = ["taskset", "-c", "1", os.path.join(BIN, "examples", "frontier"), url, body_file,
           str(seconds), str(concurrency), "x-api-key: sk-bench", "anthropic-version: 2023-06-01"]
    env = dict(os.environ, **({"FRONTIER_FIRST": first_mark} if first_mark else {}))
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 60, env=env)
    if out.returncode != 0:
        sys.exit(f"load generator failed: {out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def rss_kib(pid):
    """A process's resident set, KiB (its nginx workers' for an nginx master)."""
    return sum(status_kib(p, "VmRSS") for p in children(pid) or [pid])


class Sampler:
    """The most RSS each watched process reached while it ran."""

    def __init__(self, pids):
        self.pids, self.peak, self.stop = pids, {k: 0 for k in pids}, threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.stop.wait(0.1):
            for k, pid in self.pids.items():
                self.peak[k] = max(self.peak[k], rss_kib(pid))

    def done(self):
        self.stop.set()
        self.thread.join()
        return self.peak


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--tmp", required=True)
    ap.add_argument("--litellm")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json", help="also write the raw runs here")
    a = ap.parse_args()
    reps, seconds, c1_seconds = (1, 1, 2) if a.quick else (3, 2, 6)
    sweep = [1, 2, 4, 8, 16, 32, 64] if a.quick else [1, 2, 4, 8, 16, 32, 64, 128]
    litellm_sweep = [1, 2, 4]

    ports = {k: free_port() for k in ["up", "mock", "nginx", "weir", "litellm"]}
    procs = Procs(a.tmp, own_group=True)
    runs = []
    try:
        for d in ["up_body", "px_body", "px_proxy"]:
            os.makedirs(os.path.join(a.tmp, d), exist_ok=True)
        procs.start("upstream", ["nginx", "-c", nginx_upstream(a.tmp, ports["up"]), "-p", a.tmp], 1)
        procs.start("mock", [os.path.join(BIN, "examples", "llm_bench"), "mock", str(ports["mock"]), "10"], 1)
        nginx = procs.start("nginx", ["nginx", "-c", nginx_proxy(a.tmp, ports["nginx"], ports["up"], ports["mock"]),
                                      "-p", a.tmp], 0)
        weir = procs.start("weir", [os.path.join(BIN, "weir"), "run", "--config",
                                    weir_config(a.tmp, ports["weir"], ports["up"], ports["mock"])], 0)
        targets = {
            "direct": f"http://127.0.0.1:{ports['up']}/v1/messages",
            "nginx": f"http://127.0.0.1:{ports['nginx']}/v1/messages",
            "weir plain": f"http://127.0.0.1:{ports['weir']}/plain/v1/messages",
            "weir LLM": f"http://127.0.0.1:{ports['weir']}/v1/messages",
        }
        if a.litellm:
            procs.start("litellm", [a.litellm, "--config", litellm_config(a.tmp, ports["up"]),
                                    "--port", str(ports["litellm"]), "--num_workers", "1"], 0)
            targets["LiteLLM"] = f"http://127.0.0.1:{ports['litellm']}/v1/messages"
        for name, url in targets.items():
            if not wait_http(url.rsplit("/v1/", 1)[0] + "/", 90):
                sys.exit(f"{name} did not come up; see {a.tmp}")
        bodies = {}
        for size in (1024, 51200):
            path = os.path.join(a.tmp, f"body-{size}.json")
            open(path, "w").write(body(size))
            bodies[size] = path
        stream_body = os.path.join(a.tmp, "body-stream.json")
        open(stream_body, "w").write(body(1024).replace('"stream": false', '"stream": true'))
        watched = {"nginx": nginx.pid, "weir": weir.pid}
        memory = {"idle": {k: rss_kib(p) for k, p in watched.items()}}
        sampler = Sampler(watched)
        for size, path in bodies.items():
            for c in sweep:
                for rep in range(reps):
                    for name, url in targets.items():
                        if name == "LiteLLM" and c not in litellm_sweep:
                            continue
                        secs = c1_seconds if c == 1 else seconds
                        r = load(url, path, secs, c)
                        r.update(target=name, body=size, rep=rep)
                        runs.append(r)
                        print(f"[{time.strftime('%H:%M:%S')}] {size} B c={c} rep {rep + 1}/{reps} "
                              f"{name}: {r['rps']:.0f} req/s p50 {r['p50_us']} µs p99 {r['p99_us']} µs "
                              f"errors {r['errors']}", flush=True)
        memory["under load (peak)"] = sampler.done()
        time.sleep(2)
        memory["after load"] = {k: rss_kib(p) for k, p in watched.items()}
        stream_targets = {
            "direct": f"http://127.0.0.1:{ports['mock']}/v1/messages",
            "nginx": f"http://127.0.0.1:{ports['nginx']}/stream/v1/messages",
            "weir LLM": f"http://127.0.0.1:{ports['weir']}/stream/v1/messages",
        }
        for c in (1, 16, 64):
            for rep in range(reps):
                for name, url in stream_targets.items():
                    r = load(url, stream_body, 3 if not a.quick else 1, c, "content_block_delta")
                    r.update(target=name, body="stream", rep=rep)
                    runs.append(r)
                    print(f"[{time.strftime('%H:%M:%S')}] stream c={c} rep {rep + 1}/{reps} {name}: "
                          f"{r['rps']:.0f} streams/s first p50 {r['first_p50_us']} µs gap p99 {r['gap_p99_us']} µs "
                          f"errors {r['errors']}", flush=True)
    finally:
        procs.stop_all()
    if a.json:
        json.dump({"runs": runs, "memory": memory}, open(a.json, "w"))
    open(a.out, "w").write(report(runs, list(targets), sweep, reps, seconds, c1_seconds)
                           + streams_and_memory(runs, memory))


def streams_and_memory(runs, memory):
    med = statistics.median
    out = ["**Streams** (27 events 10 ms apart from weir's mock provider; medians; *gap* = the largest "
           "gap between two reads of one stream, at p99 over streams)", "",
           "| c | target | streams/s | first token p50 / p99 µs | added first token p50 / p99 µs | gap p99 µs | "
           "added gap p99 µs | errors |", "|---|---|---|---|---|---|---|---|"]
    for c in sorted({r["concurrency"] for r in runs if r["body"] == "stream"}):
        def cell(t):
            rs = [r for r in runs if r["body"] == "stream" and r["target"] == t and r["concurrency"] == c]
            return {k: med([r[k] for r in rs]) for k in ("rps", "first_p50_us", "first_p99_us", "gap_p99_us")} | {
                "errors": sum(r["errors"] for r in rs)}
        d = cell("direct")
        for t in ("direct", "nginx", "weir LLM"):
            x = cell(t)
            added = "—" if t == "direct" else f"{x['first_p50_us'] - d['first_p50_us']:.0f} / {x['first_p99_us'] - d['first_p99_us']:.0f}"
            added_gap = "—" if t == "direct" else f"{x['gap_p99_us'] - d['gap_p99_us']:.0f}"
            out.append(f"| {c} | {t} | {x['rps']:,.0f} | {x['first_p50_us']:.0f} / {x['first_p99_us']:.0f} | {added} | "
                       f"{x['gap_p99_us']:.0f} | {added_gap} | {x['errors']} |")
    out += ["", "**Memory** (RSS, MiB; nginx: its worker)", "", "| moment | nginx | weir |", "|---|---|---|"]
    for moment, v in memory.items():
        out.append(f"| {moment} | {v['nginx'] / 1024:.1f} | {v['weir'] / 1024:.1f} |")
    return "\n".join(out) + "\n"


def report(runs, targets, sweep, reps, seconds, c1_seconds):
    med = statistics.median

    def cell(target, size, c):
        rs = [r for r in runs if r["target"] == target and r["body"] == size and r["concurrency"] == c]
        if not rs:
            return None
        return {
            "rps": med([r["rps"] for r in rs]),
            "p50": med([r["p50_us"] for r in rs]),
            "p99": med([r["p99_us"] for r in rs]),
            "p999": med([r["p999_us"] for r in rs]),
            "errors": sum(r["errors"] for r in rs),
        }

    out = [
        "### The frontier: added latency and requests/s under a p99 bound (`bash bench/frontier.sh`)",
        "",
        f"Measured on {time.strftime('%Y-%m-%d')}, 2 cores, loopback; the upstream (nginx `return 200` of a "
        "Messages answer) and the load generator (`examples/frontier.rs`, closed loop, one keep-alive "
        "connection per client) share core 1, the proxy has core 0. Body: an Anthropic Messages request "
        "with `model` last. Concurrency sweep "
        f"{', '.join(map(str, sweep))}; {c1_seconds} s at concurrency 1, {seconds} s elsewhere; "
        f"{reps} alternated repetitions, medians. *added* = through the proxy minus direct, same "
        "concurrency, same repetition's medians.",
        "",
    ]
    for size in sorted({r["body"] for r in runs if r["body"] != "stream"}):
        d1 = cell("direct", size, 1)
        out += [f"**{size // 1024} KiB body**", "",
                "| target | c=1 p50 µs | c=1 p99 µs | c=1 p99.9 µs | added p50 µs | added p99 µs | "
                "most req/s, p99 ≤ 1 ms | ≤ 5 ms | ≤ 10 ms | ≤ 50 ms | peak req/s |",
                "|---|---|---|---|---|---|---|---|---|---|---|"]
        for t in targets:
            c1 = cell(t, size, 1)
            if not c1:
                continue
            added = ("—", "—") if t == "direct" else (f"{c1['p50'] - d1['p50']:.0f}", f"{c1['p99'] - d1['p99']:.0f}")
            bounds = []
            cells = [cell(t, size, c) for c in sweep]
            cells = [x for x in cells if x]
            for bound_ms in (1, 5, 10, 50):
                ok = [x["rps"] for x in cells if x["p99"] <= bound_ms * 1000 and x["errors"] == 0]
                bounds.append(f"{max(ok):,.0f}" if ok else "none")
            peak = max(x["rps"] for x in cells)
            out.append(f"| {t} | {c1['p50']:.0f} | {c1['p99']:.0f} | {c1['p999']:.0f} | {added[0]} | {added[1]} | "
                       + " | ".join(bounds) + f" | {peak:,.0f} |")
        out += ["", "Per concurrency (req/s, p99 µs):", "",
                "| c | " + " | ".join(targets) + " |", "|---|" + "---|" * len(targets)]
        for c in sweep:
            row = []
            for t in targets:
                x = cell(t, size, c)
                row.append(f"{x['rps']:,.0f} / {x['p99']:.0f}" + (f" ({x['errors']} err)" if x and x["errors"] else "")
                           if x else "—")
            out.append(f"| {c} | " + " | ".join(row) + " |")
        out.append("")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    main()
