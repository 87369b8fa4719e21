#!/usr/bin/env python3
"""The weir benchmark driver, called by bench/run.sh (see docs/benchmarks.md).

It starts one common upstream (nginx serving static files, plus a slow
asyncio upstream for the admission scenario), then nginx, HAProxy and weir as
reverse proxies with equivalent configurations (bench/conf/), runs every
scenario against the upstream directly and through each proxy, alternating
targets (A B C A B C ...), and writes the medians and the ratios weir/nginx
and weir/HAProxy to docs/benchmarks.md and docs/benchmarks.png.

Every process it starts is recorded (pid and name) in WORK/pids, so that
run.sh's exit trap can end them even if this driver is killed; the driver
itself stops them on every exit path too.

This file holds the command line and the order of the run; the parts are
plan.py (durations, sizes), servers.py (upstreams, proxies, configs),
clients.py (wrk, h2load, curl), machine.py (other load, versions),
scenarios.py (the seven scenarios), results.py (what was measured, as
JSON) and report.py (the markdown and the chart), with procs.py (processes)
shared by every script in bench/.
"""

import argparse
import os
import signal
import subprocess
import sys

from clients import Clients
from machine import Quiet, loadavg, versions
from plan import FULL, PROXIES, QUICK, ROOT
from procs import BenchError, Procs, log, pick_ports
import report
from results import Results
from scenarios import ALL
from servers import Servers, weir_log_summary


class Bench:
    """One run: the machine's layout (CPUs, ports, fd limit) and the parts
    the scenarios work with."""

    def __init__(self, a):
        self.a = a
        self.plan = QUICK if a.quick else FULL
        self.work = a.work
        self.shm = a.shm
        self.weir = a.weir
        self.procs = Procs(self.work, pidfile=os.path.join(self.work, "pids"), cwd=self.work)
        workers = a.workers
        nofile = int(subprocess.run(["bash", "-c", "ulimit -n"], capture_output=True, text=True).stdout.strip())
        ncpu = os.cpu_count() or 1
        if ncpu > workers:
            cpus_proxy = f"0-{workers - 1}" if workers > 1 else "0"
            cpus_client = f"{workers}-{ncpu - 1}" if ncpu - workers > 1 else str(workers)
        else:
            cpus_proxy = cpus_client = None
        names = ["up_http", "up_https", "slow"] + [f"{p}_{k}" for p in PROXIES for k in ("http", "https")]
        self.port = dict(zip(names, pick_ports(len(names))))
        self.results = Results(quick=a.quick, workers=workers)
        self.results.nofile = nofile
        self.results.cpus_proxy, self.results.cpus_client = cpus_proxy, cpus_client
        self.servers = Servers(self.procs, self.results, self.work, self.shm, self.weir, workers, nofile,
                               cpus_proxy, cpus_client, self.port)
        self.clients = Clients(cpus_client, self.plan["big"])
        self.quiet = Quiet(self.procs, self.plan, self.results)

    def run(self):
        r = self.results
        only = set(int(x) for x in self.a.scenarios.split(",")) if self.a.scenarios else set(range(1, 8))
        log(f"work dir {self.work}, data on {self.shm}; ports {self.port}")
        log(f"workers per proxy: {r.workers}; proxies on CPUs {r.cpus_proxy}, clients and upstream on "
            f"{r.cpus_client}; fd limit {r.nofile}")
        self.servers.setup_files(self.plan["big"])
        self.servers.start_upstream()
        # idle scenario size: HAProxy reserves two descriptors per connection
        # (maxsock = 2 * maxconn + 15) and refuses to start above the fd limit.
        hap_max = min(16384, (r.nofile - 15) // 2)
        r.idle_count = min(self.plan["idle"], hap_max - 64)
        r.idle_caps = self.servers.idle_caps = dict(nginx=16384, haproxy=hap_max, weir=16384)

        scenarios = {cls.number: cls(self) for cls in ALL}
        std = [s for s in (1, 2, 3, 4, 6) if s in only]
        if std:
            self.start_proxies("standard")
            for s in std:
                self.announce(scenarios[s])
                self.measure(scenarios[s])
            self.stop_proxies()
        if 7 in only:
            self.announce(scenarios[7])
            ok, out = self.servers.weir_accepts_gate()
            if not ok:
                msg = "skipped: weir has no max_concurrent_requests yet"
                log(f"  {msg}\n{out}")
                r.skipped[7] = msg
            else:
                self.start_proxies("admission")
                self.measure(scenarios[7])
                self.stop_proxies()
        if 5 in only:
            self.announce(scenarios[5])
            self.measure(scenarios[5])  # starts a fresh proxy per measurement
            self.stop_proxies()
        r.loadavg.append(loadavg())
        self.read_weir_log()
        r.save(self.a.save_results or os.path.join(self.work, "results.json"), lambda: versions(self.weir))
        self.report()

    def announce(self, sc):
        """Before a scenario: the load average, and its title in the log."""
        self.results.loadavg.append(loadavg())
        log(f"scenario {sc.number}: {sc.title}")

    def measure(self, sc):
        sc.run()
        self.results.scenarios_run.append(sc.number)

    def start_proxies(self, profile):
        for t in PROXIES:
            self.servers.start_proxy(t, profile)

    def stop_proxies(self):
        for t in PROXIES:
            self.servers.stop_proxy(t)

    def read_weir_log(self):
        """weir's log over the whole run: panics are problems; the most frequent lines go in the report."""
        summary = weir_log_summary(self.work)
        if summary is None:
            return
        self.results.weir_log_lines, panics, self.results.weir_log_summary = summary
        if panics:
            self.results.problems.append("weir panicked:\n" + "\n".join(panics[:5]))

    def report(self):
        # The Method section's durations come from this invocation's plan
        # (--quick or not), not from the saved run's: `--render` a quick
        # run's results with --quick.
        report.write(self.results, self.plan, self.a.out_md, self.a.out_png, self.weir)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--work", help="temporary directory for configs, logs, pids (required to run)")
    ap.add_argument("--shm", help="directory on tmpfs for the large files (required to run)")
    ap.add_argument("--weir", default=os.path.join(ROOT, "target", "dist", "weir"), help="the weir binary")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--scenarios", default="", help="comma-separated subset, e.g. 1,2 (development)")
    ap.add_argument("--out-md", default=os.path.join(ROOT, "docs", "benchmarks.md"))
    ap.add_argument("--out-png", default=os.path.join(ROOT, "docs", "benchmarks.png"))
    ap.add_argument("--save-results", default="", help="also write the raw results (JSON) here")
    ap.add_argument("--render", default="", help="only write the report from saved results (JSON)")
    a = ap.parse_args()
    if a.render:
        a.work = a.shm = a.work or "/tmp"
    elif not (a.work and a.shm):
        ap.error("--work and --shm are required (bench/run.sh sets them)")

    bench = Bench(a)
    if a.render:
        bench.results.load(a.render)
        bench.report()
        return 0

    def on_signal(signum, _frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    try:
        bench.run()
    except BenchError as e:
        print(f"\nbench failed: {e}", file=sys.stderr)
        return 1
    finally:
        bench.procs.stop_all()
    return 0


if __name__ == "__main__":
    sys.exit(main())
