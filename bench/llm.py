#!/usr/bin/env python3
"""LLM route benchmark: weir and LiteLLM's proxy in front of the same mock
provider, against that provider direct, in one run (driven by bench/llm.sh).

Scenarios (each target alternated, REPS repetitions, medians reported):
  rate   open-loop load at RATE req/s, half of the requests streaming, for
         OpenAI chat completions and Anthropic messages: time to the first
         body bytes and total time, p50/p99; "added" = through - direct.
  light  the same at LIGHT req/s, a rate LiteLLM can sustain on this machine,
         so its added latency is measured unsaturated too.
  over   overload: a provider whose streams take ~0.4 s, CLIENTS closed-loop
         clients against a weir route gated at GATE (4x the gate) and
         against LiteLLM (no gate configured): what each answers.
  trans  translation: Anthropic Messages streams at RATE/s through weir,
         untranslated (Anthropic upstream) and translated (the same mock's
         Responses API), alternated: added time to the first event, and
         weir's CPU per stream and per upstream event. `--translation-only`
         runs just this one (no LiteLLM needed) and writes --out with it.

Writes the report (markdown) to the path given with --out.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from procs import BIN, Procs, free_port, tree_cpu_seconds, wait_http

APIS = [("OpenAI chat completions", "/v1/chat/completions"), ("Anthropic messages", "/v1/messages")]


def load(url, path, rate, seconds, stream_share, concurrency=None, model="bench"):
    cmd = ["taskset", "-c", "1", os.path.join(BIN, "examples", "llm_bench"), "load", url, path,
           str(rate), str(seconds), str(stream_share)]
    if concurrency:
        cmd.append(str(concurrency))
    env = dict(os.environ, BENCH_MODEL=model)
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 120, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


def wait_idle(pid, limit=120):
    """A saturated proxy keeps working on requests its clients gave up on;
    measure nothing else on its core until it has stopped (under 5 % of a
    core for a second)."""
    deadline = time.time() + limit
    last = tree_cpu_seconds(pid)
    while time.time() < deadline:
        time.sleep(1)
        now = tree_cpu_seconds(pid)
        if now - last < 0.05:
            return
        last = now


def med(values):
    values = [v for v in values if v is not None and v == v]  # drop missing and NaN
    return statistics.median(values) if values else float("nan")


def fmt(v):
    return "—" if v is None or v != v else f"{v:.2f}"


def weir_config(tmp, ports, gate):
    path = os.path.join(tmp, "weir.toml")
    with open(path, "w") as f:
        f.write(f"""[log]
access_log = false
level = "warn"
[[listener]]
name = "web"
address = "127.0.0.1:{ports['weir']}"
[[route]]
name = "openai"
kind = "openai"
path = "/v1"
[[route.upstreams]]
name = "mock"
url = "http://127.0.0.1:{ports['mock']}"
[[route]]
name = "anthropic"
kind = "anthropic"
path = "/v1/messages"
[[route.upstreams]]
name = "mock"
url = "http://127.0.0.1:{ports['mock']}"
[[route]]
name = "translated"
kind = "anthropic"
path = "/translated"
[[route.upstreams]]
name = "mock-responses"
url = "http://127.0.0.1:{ports['mock']}"
protocol = "openai_responses"
[[route]]
name = "gated"
kind = "openai"
path = "/gated"
max_concurrent_requests = {gate}
[[route.upstreams]]
name = "slow"
url = "http://127.0.0.1:{ports['slow']}"
""")
    return path


def litellm_config(tmp, ports):
    path = os.path.join(tmp, "litellm.yaml")
    with open(path, "w") as f:
        f.write(f"""model_list:
  - model_name: bench
    litellm_params:
      model: openai/bench
      api_base: http://127.0.0.1:{ports['mock']}/v1
      api_key: sk-bench
  - model_name: claude-bench
    litellm_params:
      model: anthropic/bench
      api_base: http://127.0.0.1:{ports['mock']}
      api_key: sk-bench
  - model_name: slow
    litellm_params:
      model: openai/bench
      api_base: http://127.0.0.1:{ports['slow']}/v1
      api_key: sk-bench
litellm_settings:
  drop_params: true
""")
    return path


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--tmp", required=True)
    ap.add_argument("--litellm", required=True, help="the litellm executable")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--translation-only", action="store_true")
    ap.add_argument("--trans-out", required=True, help="where the translation section goes")
    a = ap.parse_args()
    reps, seconds = (1, 3) if a.quick else (3, 10)
    rate, light = 1000, 50
    gate, clients = 32, 128

    procs = Procs(a.tmp, own_group=True)
    ports = {k: free_port() for k in ["mock", "slow", "weir", "litellm"]}
    try:
        procs.start("mock", [os.path.join(BIN, "examples", "llm_bench"), "mock", str(ports["mock"]), "0"], 1)
        procs.start("slow", [os.path.join(BIN, "examples", "llm_bench"), "mock", str(ports["slow"]), "20"], 1)
        weir = procs.start("weir", [os.path.join(BIN, "weir"), "run", "--config",
                                    weir_config(a.tmp, ports, gate)], 0)
        if a.translation_only:
            if not wait_http(f"http://127.0.0.1:{ports['weir']}/v1/models"):
                sys.exit(f"weir did not come up; see {a.tmp}/weir.log")
            write(a.trans_out, translation(ports, weir, reps, seconds, rate))
            return
        litellm = procs.start("litellm", [a.litellm, "--config", litellm_config(a.tmp, ports),
                                          "--port", str(ports["litellm"]), "--num_workers", "1"], 0)
        for name, url in [("weir", f"http://127.0.0.1:{ports['weir']}/v1/models"),
                          ("litellm", f"http://127.0.0.1:{ports['litellm']}/health/liveliness")]:
            if not wait_http(url):
                sys.exit(f"{name} did not come up; see {a.tmp}/{name}.log")

        targets = {
            "direct": f"http://127.0.0.1:{ports['mock']}",
            "weir": f"http://127.0.0.1:{ports['weir']}",
            "LiteLLM": f"http://127.0.0.1:{ports['litellm']}",
        }
        results = rates(targets, [("rate", rate), ("light", light)], reps, seconds, litellm)
        write(a.trans_out, translation(ports, weir, reps, seconds, rate))
        over = overload(targets, seconds, clients)
    finally:
        procs.stop_all()
    write(a.out, report(results, over, targets, litellm_version(a.litellm), reps, seconds, rate, light,
                        gate, clients))


def rates(targets, scenarios, reps, seconds, litellm):
    """Each (scenario, rate) for each API, targets alternated: every run's result
    by (scenario, API, target)."""
    results = {}
    for scenario, r in scenarios:
        for api, path in APIS:
            for rep in range(reps):
                for target, url in targets.items():
                    # LiteLLM names the Anthropic-provider deployment apart.
                    model = "claude-bench" if (target == "LiteLLM" and "messages" in path) else "bench"
                    print(f"[{time.strftime('%H:%M:%S')}] {scenario} {api} rep {rep + 1}/{reps} {target}", flush=True)
                    res = load(url, path, r, seconds, 0.5, model=model)
                    results.setdefault((scenario, api, target), []).append(res)
                    if target == "LiteLLM":
                        wait_idle(litellm.pid)
                    time.sleep(1)
    return results


def overload(targets, seconds, clients):
    """Closed-loop streaming clients against weir's gated route and LiteLLM."""
    over = {}
    for target, url, path in [("weir", targets["weir"], "/gated/v1/chat/completions"),
                              ("LiteLLM", targets["LiteLLM"], "/v1/chat/completions")]:
        print(f"[{time.strftime('%H:%M:%S')}] overload {target}", flush=True)
        over[target] = load(url, path, 0, seconds, 1.0, clients, model="slow" if target == "LiteLLM" else "bench")
    return over


def report(results, over, targets, litellm_version, reps, seconds, rate, light, gate, clients):
    """The markdown section of bench/llm-results.md, as lines."""
    lines = []
    w = lines.append
    w(f"### LLM routes: weir and LiteLLM {litellm_version} over the same mock provider")
    w("")
    w(f"Measured by `bash bench/llm.sh` on {time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores, loopback. "
      f"The mock provider is weir's own (`examples/llm_bench.rs mock`: canned 20-word answers, "
      f"streams as 27 events sent back to back) on core 1 with the load generator; the proxy on core 0; "
      f"LiteLLM's proxy with one worker and no database; after each LiteLLM run the next waits until "
      f"LiteLLM is idle again (a saturated LiteLLM keeps working on requests its clients gave up on, "
      f"on the core weir uses). Open-loop load (a request starts on schedule "
      f"whether or not earlier ones finished), half of the requests streaming; {reps} alternated "
      f"repetitions of {seconds} s each, medians. *first* = time to the first body bytes (for a stream, "
      f"the first event), *total* = to the end of the body. *added* = through the proxy minus direct.")
    w("")
    for scenario, r in [("rate", rate), ("light", light)]:
        w(f"**{r} requests/s**" + (" (the rate the issue asks for)" if scenario == "rate" else
                                   " (a rate LiteLLM sustains on this machine)"))
        w("")
        w("| API | target | answered/s | errors | json first p50 / p99 ms | stream first p50 / p99 ms | stream total p99 ms | added stream first p99 ms |")
        w("|---|---|---|---|---|---|---|---|")
        for api, _ in APIS:
            base = results[(scenario, api, "direct")]
            base_p99 = med([x["stream"]["first_p99_ms"] for x in base])
            for target in targets:
                rs = results[(scenario, api, target)]
                g = lambda kind, key: med([x[kind][key] for x in rs])  # noqa: E731
                mine = g("stream", "first_p99_ms")
                added = "" if target == "direct" else fmt(mine - base_p99 if mine == mine and base_p99 == base_p99 else None)
                w(f"| {api} | {target} | {med([x['answered_per_s'] for x in rs]):.0f} | "
                  f"{med([x['errors'] for x in rs]):.0f} | {fmt(g('json', 'first_p50_ms'))} / {fmt(g('json', 'first_p99_ms'))} | "
                  f"{fmt(g('stream', 'first_p50_ms'))} / {fmt(g('stream', 'first_p99_ms'))} | {fmt(g('stream', 'total_p99_ms'))} | {added} |")
        w("")
    w(f"**Overload**: {clients} closed-loop clients (4× a gate of {gate}) streaming from a provider whose "
      f"answers take ~0.4 s, for {seconds} s. weir's route is gated (`max_concurrent_requests = {gate}`); "
      f"LiteLLM has no equivalent configured, so its behaviour is reported as it is.")
    w("")
    w("| target | answered/s | statuses | errors (timeouts, resets) | 200: stream total p50 / p99 ms |")
    w("|---|---|---|---|---|")
    for target, res in over.items():
        statuses = ", ".join(f"{k}: {v}" for k, v in sorted(res["statuses"].items()))
        w(f"| {target} | {res['answered_per_s']:.0f} | {statuses} | {res['errors']} | "
          f"{fmt(res['stream']['total_p50_ms'])} / {fmt(res['stream']['total_p99_ms'])} |")
    w("")
    w("`503+ra` is a 503 carrying `Retry-After`; an error is a request that got no complete answer "
      "within 30 s or whose connection broke.")
    return lines


def write(path, lines):
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


def translation(ports, weir, reps, seconds, rate):
    """Claude Code-style streams through weir, untranslated and translated
    (Messages -> Responses), alternated, against the provider direct."""
    runs = {}
    targets = [
        ("direct (Anthropic API)", f"http://127.0.0.1:{ports['mock']}", "/v1/messages", None),
        ("weir, untranslated", f"http://127.0.0.1:{ports['weir']}", "/v1/messages", weir),
        ("weir, translated to Responses", f"http://127.0.0.1:{ports['weir']}", "/translated/v1/messages", weir),
    ]
    for rep in range(reps):
        for name, url, path, proc in targets:
            print(f"[{time.strftime('%H:%M:%S')}] translation rep {rep + 1}/{reps} {name}", flush=True)
            before = tree_cpu_seconds(proc.pid) if proc else 0.0
            res = load(url, path, rate, seconds, 1.0)
            used = tree_cpu_seconds(proc.pid) - before if proc else None
            res["cpu_us_per_stream"] = (used * 1e6 / max(1, res["answered_per_s"] * seconds)) if proc else None
            runs.setdefault(name, []).append(res)
            time.sleep(1)
    lines = [
        "### Translation: Claude Code streams on an OpenAI Responses upstream",
        "",
        f"Measured by `bash bench/llm.sh` (or `bash bench/llm.sh --translation-only`) on "
        f"{time.strftime('%Y-%m-%d')}: {rate} Anthropic Messages streams/s (open loop) for {seconds} s, "
        f"{reps} alternated repetitions, medians. The same mock provider answers the untranslated route "
        f"with its Anthropic API (27 events per stream) and the translated one with its Responses API "
        f"(28 events, mapped to 26 Anthropic events). *added* = through weir minus direct; CPU is weir's "
        f"process (user + system) over the run, divided by the streams answered.",
        "",
        "| target | answered/s | errors | first event p50 / p99 ms | added first p99 ms | stream total p99 ms | weir CPU µs per stream | per upstream event |",
        "|---|---|---|---|---|---|---|---|",
    ]
    base = med([x["stream"]["first_p99_ms"] for x in runs[targets[0][0]]])
    for name, _, _, proc in targets:
        rs = runs[name]
        g = lambda key: med([x["stream"][key] for x in rs])  # noqa: E731
        first99 = g("first_p99_ms")
        added = "" if proc is None else fmt(first99 - base)
        cpu = med([x["cpu_us_per_stream"] for x in rs]) if proc else None
        events = 28 if "translated to" in name else 27
        lines.append(
            f"| {name} | {med([x['answered_per_s'] for x in rs]):.0f} | {med([x['errors'] for x in rs]):.0f} | "
            f"{fmt(g('first_p50_ms'))} / {fmt(first99)} | {added} | {fmt(g('total_p99_ms'))} | "
            f"{fmt(cpu) if cpu else '—'} | {fmt(cpu / events) if cpu else '—'} |")
    lines.append("")
    return lines


def litellm_version(exe):
    py = os.path.join(os.path.dirname(exe), "python")
    try:
        return subprocess.run([py, "-c", "import importlib.metadata as m; print(m.version('litellm'))"],
                              capture_output=True, text=True, timeout=60).stdout.strip()
    except Exception:  # noqa: BLE001
        return "?"


if __name__ == "__main__":
    main()
