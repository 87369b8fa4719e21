"""What one run of bench/driver.py measured: every figure with its raw
values per target, and what was seen along the way (problems, TLS
parameters, attack and idle-connection details, the machine's load).
Saved as JSON (`--save-results`) and read back (`--render`), so the report
can be written again without rerunning."""

import datetime
import json
import statistics
import time

from plan import TARGETS
from procs import log


class Figure:
    """One figure (a row of the report): its values per target, in run order."""

    def __init__(self, scenario, key, label, unit, better, chart=True, targets=TARGETS, digits=0):
        self.scenario, self.key, self.label, self.unit = scenario, key, label, unit
        self.better, self.chart, self.targets, self.digits = better, chart, targets, digits
        self.values = {t: [] for t in targets}
        self.notes = []

    def add(self, target, value):
        self.values[target].append(value)

    def median(self, target):
        vals = [v for v in self.values.get(target, []) if v is not None]
        return statistics.median(vals) if vals else None

    def ratio(self, peer):
        w, p = self.median("weir"), self.median(peer)
        if w is None or p is None or p == 0:
            return None
        return w / p

    def verdict(self, peer):
        r = self.ratio(peer)
        if r is None:
            if self.median("weir") == 0 and self.median(peer) == 0:
                return "="
            return None
        if abs(r - 1) <= 0.05:
            return "≈"
        good = r > 1 if self.better == "higher" else r < 1
        return "better" if good else "worse"


class Results:
    """Everything the report is written from."""

    # saved as they are; the KEYED dicts have tuple keys, saved as lists
    STATE = ("skipped", "problems", "tls_info", "loadavg", "scenarios_run", "idle_count", "idle_caps",
             "contention", "quiet_waited", "weir_log_summary", "weir_log_lines", "cpus_proxy", "cpus_client",
             "nofile", "workers")
    KEYED = ("attack_info", "idle_info", "admission_info")

    def __init__(self, quick, workers):
        self.quick = quick
        self.workers = workers
        self.nofile = None
        self.cpus_proxy = self.cpus_client = None
        self.figures = []
        self.fig = {}
        self.skipped = {}
        self.problems = []      # things seen while benchmarking (crashes, errors)
        self.tls_info = {}
        self.attack_info = {}
        self.idle_info = {}
        self.admission_info = {}
        self.loadavg = []
        self.started = time.time()
        self.scenarios_run = []
        self.idle_count = None
        self.idle_caps = None
        self.contention = []
        self.quiet_waited = 0.0
        self.weir_log_summary = None
        self.weir_log_lines = None
        self.saved_versions = None  # from a saved file: the versions of that run
        self.run_date = None        # from a saved file: when it ran

    def figure(self, *args, **kw):
        f = Figure(*args, **kw)
        self.figures.append(f)
        self.fig[f.key] = f
        return f

    def save(self, path, versions):
        """Write the results as JSON; `versions()` says what ran."""
        state = {k: getattr(self, k, None) for k in self.STATE}
        for k in self.KEYED:
            state[k] = [[list(key) if isinstance(key, tuple) else key, v] for key, v in getattr(self, k).items()]
        state["figures"] = [dict(scenario=f.scenario, key=f.key, label=f.label, unit=f.unit, better=f.better,
                                 chart=f.chart, targets=f.targets, digits=f.digits, values=f.values, notes=f.notes)
                            for f in self.figures]
        state["elapsed"] = time.time() - self.started
        state["date"] = f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M}"
        state["quick"] = bool(self.quick)
        state["versions"] = versions()
        with open(path, "w") as f:
            json.dump(state, f, indent=1)
        log(f"results saved to {path}")

    def load(self, path):
        with open(path) as f:
            state = json.load(f)
        for k in self.STATE:
            setattr(self, k, state.get(k))
        for k in self.KEYED:
            setattr(self, k, {tuple(key) if isinstance(key, list) else key: v for key, v in state.get(k, [])})
        self.tls_info = state.get("tls_info") or {}
        self.skipped = {int(k): v for k, v in (state.get("skipped") or {}).items()}
        self.figures = []
        for d in state["figures"]:
            f = self.figure(d["scenario"], d["key"], d["label"], d["unit"], d["better"], chart=d["chart"],
                            targets=d["targets"], digits=d["digits"])
            f.values, f.notes = d["values"], d["notes"]
        self.started = time.time() - state["elapsed"]
        self.quick = state["quick"]
        self.saved_versions = state.get("versions")
        self.run_date = state.get("date")
