"""The machine bench/driver.py runs on: how much CPU other processes take
(the machine is shared: each run waits, bounded, for quiet and records what
others used during it), the load average, and the CPU, memory and tool
versions the report names."""

import os
import re
import subprocess
import sys
import time

from plan import ROOT
from procs import children, log, pid_cpu_seconds, system_busy_seconds


class Quiet:
    """Measures and avoids other people's load around each run."""

    def __init__(self, procs, plan, results):
        self.procs, self.plan, self.results = procs, plan, results
        self._m0 = None

    def own_cpu_seconds(self):
        """CPU used by this harness: its servers, finished clients, itself."""
        total = 0.0
        for p in self.procs.live.values():
            for pid in [p.pid] + children(p.pid):
                total += pid_cpu_seconds(pid)
        t = os.times()
        return total + t.user + t.system + t.children_user + t.children_system

    def foreign_load(self, seconds=0.5):
        """Cores used by processes outside the harness over a short window."""
        b0, o0, t0 = system_busy_seconds(), self.own_cpu_seconds(), time.monotonic()
        time.sleep(seconds)
        b1, o1, t1 = system_busy_seconds(), self.own_cpu_seconds(), time.monotonic()
        return max(0.0, (b1 - b0) - (o1 - o0)) / (t1 - t0)

    def wait_quiet(self):
        """Before a run: wait (bounded) until other processes leave the CPUs."""
        budget = self.plan["quiet_wait_total"] - self.results.quiet_waited
        start = time.monotonic()
        load = self.foreign_load()
        warned = False
        while load > 0.25 and time.monotonic() - start < min(self.plan["quiet_wait_run"], budget):
            if not warned:
                log(f"  (other processes use {load:.2f} cores; waiting for a quiet machine)")
                warned = True
            load = self.foreign_load(1.0)
        self.results.quiet_waited += time.monotonic() - start

    def begin(self):
        self.wait_quiet()
        self._m0 = (system_busy_seconds(), self.own_cpu_seconds(), time.monotonic())

    def end(self, label):
        """After a run: record how many cores other processes used during it."""
        b0, o0, t0 = self._m0
        b1, o1, t1 = system_busy_seconds(), self.own_cpu_seconds(), time.monotonic()
        foreign = max(0.0, (b1 - b0) - (o1 - o0)) / max(1e-6, t1 - t0)
        self.results.contention.append((label, foreign))
        return foreign


def loadavg():
    """The 1-minute load average."""
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def versions(weir):
    """The first line of each tool's version, weir's with its git revision."""
    def first_line(argv):
        try:
            r = subprocess.run(argv, capture_output=True, text=True, timeout=10)
            return ((r.stdout or "") + (r.stderr or "")).strip().splitlines()[0]
        except Exception:  # noqa: BLE001
            return "?"
    rev = subprocess.run(["git", "-C", ROOT, "describe", "--always", "--dirty", "--abbrev=12"],
                         capture_output=True, text=True).stdout.strip()
    return dict(
        weir=f"{first_line([weir, '--version'])} (git {rev or '?'})",
        nginx=first_line(["nginx", "-v"]),
        haproxy=first_line(["haproxy", "-v"]),
        wrk=first_line(["wrk", "-v"]).split(" Copyright")[0],
        h2load=first_line(["h2load", "--version"]),
        slowhttptest=(re.search(r"version [\d.]+", subprocess.run(["slowhttptest", "-h"], capture_output=True,
                                                                    text=True).stdout or "") or [None])[0] or "?",
        curl=first_line(["curl", "--version"]).split(" (")[0],
        openssl=first_line(["openssl", "version"]),
        python=sys.version.split()[0],
    )


def machine():
    """CPU count and model, kernel, memory."""
    model = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    mem = "?"
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal"):
                mem = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
    return dict(nproc=os.cpu_count(), model=model, kernel=os.uname().release, memory=mem)
