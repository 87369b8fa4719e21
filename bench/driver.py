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
"""

import argparse
import datetime
import json
import os
import random
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import textwrap
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(BENCH)
CONF = os.path.join(BENCH, "conf")

TARGETS = ["direct", "nginx", "haproxy", "weir"]
PROXIES = ["nginx", "haproxy", "weir"]
LABEL = {"direct": "upstream direct", "nginx": "nginx", "haproxy": "HAProxy", "weir": "weir"}

# Durations and sizes. A full run must stay under 15 minutes on 2 cores,
# --quick under 3 (build excluded when nothing changed).
FULL = dict(
    reps=3,
    d_h1=8,            # scenario 1, seconds per run
    d_h2=8,            # scenario 2
    d_tls=6,           # scenario 3
    tls_batch=100,     # scenario 3: connections opened at once by one h2load
    big=1 << 30,       # scenario 4: bytes
    big_reps=3,
    idle=10000,        # scenario 5: idle connections (capped by the fd limit)
    idle_reps=1,
    d_attack=8,        # scenario 6: seconds before, and seconds during the attack
    attack_reps=2,
    d_admission=8,     # scenario 7
    quiet_wait_run=20,     # at most this long before one run for other load to go away
    quiet_wait_total=120,  # and at most this long in the whole run
)
QUICK = dict(
    reps=1, d_h1=3, d_h2=3, d_tls=2, tls_batch=100, big=256 << 20, big_reps=1,
    idle=1000, idle_reps=1, d_attack=3, attack_reps=1, d_admission=3,
    quiet_wait_run=5, quiet_wait_total=20,
)

H1_CONNS = 64          # wrk connections (scenarios 1, 6)
H2_CONNS, H2_STREAMS = 8, 8
CAP = 1024             # connection cap of every proxy (scenarios 1-4, 6, 7)
ATTACK = 3 * CAP       # slowloris connections
ATTACK_RATE = 1024     # slowloris connections opened per second
GATE = 32              # scenario 7: concurrent requests admitted
SLOW_DELAY = 0.05      # scenario 7: seconds the slow upstream takes per request
ADMISSION_CONNS = 4 * GATE


def log(msg):
    print(f"[{datetime.datetime.now():%H:%M:%S}] {msg}", flush=True)


class BenchError(Exception):
    pass


# --------------------------------------------------------------------------
# processes


def children(pid):
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        # the command may contain spaces and parentheses: split after the last ')'
        fields = stat[stat.rfind(")") + 2:].split()
        if int(fields[1]) == pid:
            out.append(int(d))
    return out


def status_kib(pid, key):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def system_busy_seconds():
    """CPU time all CPUs spent busy since boot (from /proc/stat)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + (v[4] if len(v) > 4 else 0)
    return (sum(v[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def pid_cpu_seconds(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


class Procs:
    """Every process the harness starts, by name."""

    def __init__(self, work):
        self.work = work
        self.pidfile = os.path.join(work, "pids")
        self.live = {}

    def start(self, name, argv, cpus=None, log_path=None, stdin=None, stdout=None):
        if cpus is not None:
            argv = ["taskset", "-c", cpus] + argv
        log_path = log_path or os.path.join(self.work, f"{name}.log")
        logf = open(log_path, "ab")
        p = subprocess.Popen(
            argv,
            stdin=stdin if stdin is not None else subprocess.DEVNULL,
            stdout=stdout if stdout is not None else logf,
            stderr=logf,
            cwd=self.work,
        )
        logf.close()
        p.log_path = log_path
        p.bench_name = name
        self.live[name] = p
        # taskset execs the program: wait for that, so the recorded name is the
        # program's (run.sh's exit trap only kills a pid whose name matches)
        comm = ""
        for _ in range(100):
            try:
                with open(f"/proc/{p.pid}/comm") as f:
                    comm = f.read().strip()
            except OSError:
                break
            if comm != "taskset":
                break
            time.sleep(0.01)
        with open(self.pidfile, "a") as f:
            f.write(f"{p.pid} {comm or os.path.basename(argv[0])}\n")
        return p

    def stop(self, name, sig=signal.SIGTERM, grace=8.0):
        p = self.live.pop(name, None)
        if p is None:
            return
        kids = children(p.pid)
        if p.poll() is None:
            try:
                p.send_signal(sig)
                p.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=5)
            except ProcessLookupError:
                pass
        for k in kids:  # e.g. nginx workers, if the master was killed
            try:
                os.kill(k, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def stop_all(self):
        for name in list(self.live):
            try:
                self.stop(name, grace=5)
            except Exception as e:  # noqa: BLE001 - keep stopping the others
                print(f"stopping {name}: {e}", file=sys.stderr)


def tail(path, n=15):
    try:
        with open(path, "rb") as f:
            return "\n".join(f.read().decode(errors="replace").splitlines()[-n:])
    except OSError:
        return "(no log)"


def wait_port(port, proc=None, timeout=20):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise BenchError(
                f"{proc.bench_name} exited ({proc.returncode}) before listening on {port}:\n"
                + tail(proc.log_path)
            )
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise BenchError(f"nothing listens on 127.0.0.1:{port} after {timeout}s")


def pick_ports(n):
    """Free loopback ports below the ephemeral range (32768+), checked by binding."""
    chosen = set()
    rng = random.Random()
    attempts = 0
    while len(chosen) < n:
        attempts += 1
        if attempts > 10000:
            raise BenchError("cannot find free ports")
        port = rng.randrange(20000, 32000)
        if port in chosen:
            continue
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", port))
            chosen.add(port)
        except OSError:
            pass
        finally:
            s.close()
    return sorted(chosen)


def run(argv, timeout, cpus=None, check=True):
    if cpus is not None:
        argv = ["taskset", "-c", cpus] + argv
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        raise BenchError(f"timed out after {timeout}s: {' '.join(argv)}") from e
    if check and r.returncode != 0:
        raise BenchError(f"failed ({r.returncode}): {' '.join(argv)}\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
    return r


def render(template, values, dest):
    with open(os.path.join(CONF, template)) as f:
        text = f.read()
    for k, v in values.items():
        text = text.replace(f"@{k}@", str(v))
    left = re.findall(r"@[A-Z_]+@", text)
    if left:
        raise BenchError(f"{template}: unfilled placeholders {sorted(set(left))}")
    with open(dest, "w") as f:
        f.write(text)
    return dest


# --------------------------------------------------------------------------
# measurements


def percentile(sorted_values, p):
    if not sorted_values:
        return None
    k = max(0, min(len(sorted_values) - 1, int(round(p / 100.0 * len(sorted_values) + 0.5)) - 1))
    return sorted_values[k]


class Figure:
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


class Bench:
    def __init__(self, a):
        self.a = a
        self.plan = QUICK if a.quick else FULL
        self.work = a.work
        self.shm = a.shm
        self.weir = a.weir
        self.procs = Procs(self.work)
        self.workers = a.workers
        self.nofile = int(subprocess.run(["bash", "-c", "ulimit -n"], capture_output=True, text=True).stdout.strip())
        ncpu = os.cpu_count() or 1
        if ncpu > self.workers:
            self.cpus_proxy = f"0-{self.workers - 1}" if self.workers > 1 else "0"
            self.cpus_client = f"{self.workers}-{ncpu - 1}" if ncpu - self.workers > 1 else str(self.workers)
        else:
            self.cpus_proxy = self.cpus_client = None
        names = ["up_http", "up_https", "slow"] + [f"{p}_{k}" for p in PROXIES for k in ("http", "https")]
        self.port = dict(zip(names, pick_ports(len(names))))
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
        self.weir_gate_key = None
        self.idle_count = None
        self.idle_caps = None
        self.contention = []
        self.quiet_waited = 0.0

    # ---- figures ----

    def figure(self, *args, **kw):
        f = Figure(*args, **kw)
        self.figures.append(f)
        self.fig[f.key] = f
        return f

    # ---- files and upstreams ----

    def setup_files(self):
        for d in ("www", "upload", "body"):
            os.makedirs(os.path.join(self.shm, d), exist_ok=True)
        # nginx workers run as nobody: let them read the files and write uploads
        os.chmod(self.work, 0o755)
        os.chmod(self.shm, 0o755)
        os.chmod(os.path.join(self.shm, "www"), 0o755)
        os.chmod(os.path.join(self.shm, "upload"), 0o777)
        os.chmod(os.path.join(self.shm, "body"), 0o777)
        with open(os.path.join(self.shm, "www", "1k"), "wb") as f:
            f.write(os.urandom(1024))
        big = self.plan["big"]
        # sparse files on tmpfs: zeros, no memory used, no disk read in the way
        run(["truncate", "-s", str(big), os.path.join(self.shm, "www", "big")], 10)
        run(["truncate", "-s", str(big), os.path.join(self.shm, "upload.bin")], 10)
        for p in ("www/1k", "www/big"):
            os.chmod(os.path.join(self.shm, p), 0o644)
        # one self-signed RSA-2048 certificate per run, for every TLS listener
        self.cert = os.path.join(self.work, "cert.pem")
        self.key = os.path.join(self.work, "key.pem")
        self.pem = os.path.join(self.work, "cert+key.pem")
        run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
             "-keyout", self.key, "-out", self.cert, "-subj", "/CN=localhost",
             "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"], 60)
        with open(self.pem, "w") as out:
            for p in (self.cert, self.key):
                with open(p) as f:
                    out.write(f.read())
        os.chmod(self.key, 0o644)

    def nginx_argv(self, d, conf):
        return ["nginx", "-p", d, "-c", conf, "-e", os.path.join(d, "startup.log"), "-g", "daemon off;"]

    def start_upstream(self):
        d = os.path.join(self.work, "upstream")
        os.makedirs(d, exist_ok=True)
        conf = render("upstream.nginx.conf", dict(
            NOFILE=self.nofile, DIR=d, SHM=self.shm, HTTP_PORT=self.port["up_http"],
            HTTPS_PORT=self.port["up_https"], CERT=self.cert, KEY=self.key,
        ), os.path.join(d, "nginx.conf"))
        p = self.procs.start("upstream", self.nginx_argv(d, conf), cpus=self.cpus_client)
        wait_port(self.port["up_http"], p)
        wait_port(self.port["up_https"], p)
        p = self.procs.start("slow", [sys.executable, os.path.join(BENCH, "slow_upstream.py"),
                                      str(self.port["slow"]), str(SLOW_DELAY)], cpus=self.cpus_client)
        wait_port(self.port["slow"], p)

    # ---- proxies ----

    def profile(self, name):
        """Values for the config templates. `standard`: 1024-connection caps;
        `idle`: caps above the idle connection count and long keep-alive;
        `admission`: standard plus a gate of GATE concurrent requests."""
        v = dict(WORKERS=self.workers, NOFILE=self.nofile, KEEPALIVE="60s",
                 CAP_NGINX=CAP, CAP_HAPROXY=CAP, CAP_WEIR=CAP,
                 NGINX_HTTP_EXTRA="", NGINX_SERVER_EXTRA="", HAPROXY_FRONTEND_EXTRA="",
                 WEIR_SERVER_EXTRA="")
        if name == "idle":
            caps = self.idle_caps
            v.update(KEEPALIVE="300s", CAP_NGINX=caps["nginx"], CAP_HAPROXY=caps["haproxy"],
                     CAP_WEIR=caps["weir"])
        elif name == "admission":
            v.update(
                NGINX_HTTP_EXTRA=("    map $host $bench_all { default all; }\n"
                                  "    limit_conn_zone $bench_all zone=inflight:1m;\n"
                                  "    limit_conn_status 503;"),
                NGINX_SERVER_EXTRA=f"        limit_conn inflight {GATE};",
                HAPROXY_FRONTEND_EXTRA=(f"    http-request return status 503 content-type text/plain "
                                        f"string \"busy\" hdr Retry-After 1 if {{ be_conn(slow) ge {GATE} }}"),
                WEIR_SERVER_EXTRA=f"max_concurrent_requests = {GATE}",
            )
        return v

    def start_proxy(self, name, profile):
        v = self.profile(profile)
        d = os.path.join(self.work, name)
        os.makedirs(d, exist_ok=True)
        common = dict(DIR=d, HTTP_PORT=self.port[f"{name}_http"], HTTPS_PORT=self.port[f"{name}_https"],
                      UP_PORT=self.port["up_http"], SLOW_PORT=self.port["slow"],
                      CERT=self.cert, KEY=self.key, PEM=self.pem,
                      WORKERS=v["WORKERS"], NOFILE=v["NOFILE"], KEEPALIVE=v["KEEPALIVE"])
        if name == "nginx":
            conf = render("proxy.nginx.conf", dict(common, MAXCONN=v["CAP_NGINX"],
                                                   NGINX_HTTP_EXTRA=v["NGINX_HTTP_EXTRA"],
                                                   NGINX_SERVER_EXTRA=v["NGINX_SERVER_EXTRA"]),
                          os.path.join(d, f"nginx.{profile}.conf"))
            argv = self.nginx_argv(d, conf)
        elif name == "haproxy":
            conf = render("haproxy.cfg", dict(common, MAXCONN=v["CAP_HAPROXY"],
                                              HAPROXY_FRONTEND_EXTRA=v["HAPROXY_FRONTEND_EXTRA"]),
                          os.path.join(d, f"haproxy.{profile}.cfg"))
            run(["haproxy", "-c", "-q", "-f", conf], 30)
            argv = ["haproxy", "-f", conf, "-db"]
        else:
            conf = render("weir.toml", dict(common, MAXCONN=v["CAP_WEIR"],
                                            WEIR_SERVER_EXTRA=v["WEIR_SERVER_EXTRA"]),
                          os.path.join(d, f"weir.{profile}.toml"))
            run([self.weir, "check", "--config", conf], 30)
            argv = [self.weir, "run", "--config", conf]
        p = self.procs.start(name, argv, cpus=self.cpus_proxy, log_path=os.path.join(d, "log"))
        wait_port(self.port[f"{name}_http"], p)
        wait_port(self.port[f"{name}_https"], p)
        p.profile = profile
        return p

    def stop_proxy(self, name):
        self.procs.stop(name)

    def ensure_alive(self, name, context):
        """After a run: a proxy that died is a finding; restart it for the rest."""
        p = self.procs.live.get(name)
        if p is None or p.poll() is None:
            return True
        self.problems.append(f"{LABEL[name]} exited with status {p.returncode} during {context}; "
                             f"last log lines:\n{tail(p.log_path, 20)}")
        log(f"!! {name} died during {context} (status {p.returncode}); restarting it")
        profile = getattr(p, "profile", "standard")
        self.procs.live.pop(name, None)
        self.start_proxy(name, profile)
        return False

    def pids(self, name):
        p = self.procs.live[name]
        return [p.pid] + children(p.pid)

    def rss_kib(self, name, key="VmRSS"):
        return sum(status_kib(pid, key) for pid in self.pids(name))

    def cpu_seconds(self, name):
        """User + system CPU time of the proxy's processes (all threads)."""
        return sum(pid_cpu_seconds(pid) for pid in self.pids(name))

    # ---- the machine is shared: measure and avoid other people's load ----

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
        budget = self.plan["quiet_wait_total"] - self.quiet_waited
        start = time.monotonic()
        load = self.foreign_load()
        warned = False
        while load > 0.25 and time.monotonic() - start < min(self.plan["quiet_wait_run"], budget):
            if not warned:
                log(f"  (other processes use {load:.2f} cores; waiting for a quiet machine)")
                warned = True
            load = self.foreign_load(1.0)
        self.quiet_waited += time.monotonic() - start

    def begin(self):
        self.wait_quiet()
        self._m0 = (system_busy_seconds(), self.own_cpu_seconds(), time.monotonic())

    def end(self, label):
        """After a run: record how many cores other processes used during it."""
        b0, o0, t0 = self._m0
        b1, o1, t1 = system_busy_seconds(), self.own_cpu_seconds(), time.monotonic()
        foreign = max(0.0, (b1 - b0) - (o1 - o0)) / max(1e-6, t1 - t0)
        self.contention.append((label, foreign))
        return foreign

    def reset_peak(self, name):
        for pid in self.pids(name):
            try:
                with open(f"/proc/{pid}/clear_refs", "w") as f:
                    f.write("5")  # resets VmHWM to the current RSS
            except OSError as e:
                raise BenchError(f"cannot reset peak RSS of {name}: {e}") from e

    def http_port(self, target):
        return self.port["up_http"] if target == "direct" else self.port[f"{target}_http"]

    def https_port(self, target):
        return self.port["up_https"] if target == "direct" else self.port[f"{target}_https"]

    # ---- clients ----

    def wrk(self, port, path, conns, seconds, timeout="2s", scheme="http", headers=()):
        argv = ["wrk", "-t1", f"-c{conns}", f"-d{seconds}s", f"--timeout={timeout}",
                "-s", os.path.join(BENCH, "wrk_report.lua")]
        for h in headers:
            argv += ["-H", h]
        argv.append(f"{scheme}://127.0.0.1:{port}{path}")
        r = run(argv, seconds + 30, cpus=self.cpus_client, check=False)
        m = re.search(r"^WRKJSON (\{.*\})$", r.stdout, re.M)
        if not m:
            raise BenchError(f"wrk gave no result ({r.returncode}):\n{r.stdout[-1500:]}\n{r.stderr[-1500:]}")
        res = json.loads(m.group(1))
        res["rps"] = res["requests"] / (res["duration_us"] / 1e6)
        res["socket_errors"] = res["connect"] + res["read"] + res["write"] + res["timeout"]
        return res

    def h2load_duration(self, port, seconds, logfile, after_warmup=None):
        """h2load for `seconds` after a 1 s warm-up; `after_warmup()` is called when
        the measured phase starts (h2load logs and counts only that phase)."""
        argv = ["h2load", "-t1", f"-c{H2_CONNS}", f"-m{H2_STREAMS}", f"-D{seconds}",
                "--warm-up-time=1", f"--log-file={logfile}", f"https://127.0.0.1:{port}/1k"]
        if self.cpus_client is not None:
            argv = ["taskset", "-c", self.cpus_client] + argv
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            time.sleep(1.0)
            if after_warmup:
                after_warmup()
            out, err = p.communicate(timeout=seconds + 40)
        except BaseException:
            p.kill()
            p.wait()
            raise
        r = subprocess.CompletedProcess(argv, p.returncode, out, err)
        m = re.search(r"requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored", out)
        f = re.search(r"finished in ([\d.]+)(us|ms|s), ([\d.]+) req/s", out)
        if not m or not f:
            raise BenchError(f"h2load gave no result ({r.returncode}):\n{out[-1500:]}\n{r.stderr[-1500:]}")
        res = dict(done=int(m.group(3)), succeeded=int(m.group(4)), failed=int(m.group(5)),
                   rps=float(f.group(3)))
        for k, pat in (("protocol", r"TLS Protocol: (\S+)"), ("cipher", r"Cipher: (\S+)"),
                       ("kx", r"Server Temp Key: (.+)"), ("alpn", r"Application protocol: (\S+)")):
            mm = re.search(pat, out)
            res[k] = mm.group(1).strip() if mm else None
        rows = []
        try:
            with open(logfile) as fh:
                for line in fh:
                    parts = line.split()
                    if len(parts) >= 3:
                        rows.append((int(parts[0]), int(parts[1]), int(parts[2])))
        except OSError:
            pass
        # keep the main-duration requests only: the log may include the warm-up
        rows.sort()
        if len(rows) > res["done"]:  # the log holds the measured phase only; be safe anyway
            rows = rows[len(rows) - res["done"]:]
        lat = sorted(r_[2] for r_ in rows if r_[1] > 0)
        res["p50_us"] = percentile(lat, 50)
        res["p99_us"] = percentile(lat, 99)
        return res

    def h2load_batch(self, port, n):
        """n new TLS connections at once, one HTTP/1.1 request each, no resumption."""
        argv = ["h2load", "-t1", f"-c{n}", f"-n{n}", "--h1", f"https://127.0.0.1:{port}/1k"]
        r = run(argv, 30, cpus=self.cpus_client, check=False)
        out = r.stdout
        m = re.search(r"requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed", out)
        f = re.search(r"finished in ([\d.]+)(us|ms|s),", out)
        if not m or not f:
            return None
        scale = {"us": 1e-6, "ms": 1e-3, "s": 1.0}[f.group(2)]
        proto = re.search(r"TLS Protocol: (\S+)", out)
        cipher = re.search(r"Cipher: (\S+)", out)
        return dict(succeeded=int(m.group(4)), failed=int(m.group(5)),
                    seconds=float(f.group(1)) * scale,
                    protocol=proto.group(1) if proto else None,
                    cipher=cipher.group(1) if cipher else None)

    def curl_transfer(self, url, upload=None):
        argv = ["curl", "-sS", "-o", "/dev/null", "--max-time", "300", "-w",
                "%{http_code} %{size_download} %{size_upload} %{time_total}"]
        if upload:
            argv += ["-T", upload, "-H", "Expect:"]
        argv.append(url)
        r = run(argv, 320, cpus=self.cpus_client, check=False)
        parts = r.stdout.split()
        if r.returncode != 0 or len(parts) != 4:
            return dict(ok=False, error=(r.stderr or r.stdout).strip()[-300:])
        code, down, up, total = int(parts[0]), float(parts[1]), float(parts[2]), float(parts[3])
        size = up if upload else down
        ok = code in (200, 201, 204) and size == self.plan["big"]
        return dict(ok=ok, code=code, bytes=size, seconds=total,
                    mib_s=size / total / (1 << 20) if total > 0 else None,
                    error=None if ok else f"status {code}, {int(size)} bytes")

    def loadavg_sample(self):
        with open("/proc/loadavg") as f:
            self.loadavg.append(float(f.read().split()[0]))

    # ---- scenarios ----

    def warm(self, targets, https=False):
        for t in targets:
            port = self.https_port(t) if https else self.http_port(t)
            self.wrk(port, "/1k", 16, 1, scheme="https" if https else "http")

    def s1_keepalive(self):
        reps, d = self.plan["reps"], self.plan["d_h1"]
        rps = self.figure(1, "s1_rps", "HTTP/1.1 keep-alive 1 KiB: requests/s", "req/s", "higher")
        p50 = self.figure(1, "s1_p50", "HTTP/1.1 keep-alive 1 KiB: p50 latency", "ms", "lower", digits=2)
        p99 = self.figure(1, "s1_p99", "HTTP/1.1 keep-alive 1 KiB: p99 latency", "ms", "lower", digits=2)
        cpu = self.figure(1, "s1_cpu", "HTTP/1.1 keep-alive 1 KiB: proxy CPU per request", "µs", "lower",
                          targets=PROXIES, digits=1)
        err = self.figure(1, "s1_err", "HTTP/1.1 keep-alive 1 KiB: errors", "count", "lower", chart=False)
        self.warm(TARGETS)
        for i in range(reps):
            for t in TARGETS:
                self.begin()
                c0 = self.cpu_seconds(t) if t != "direct" else 0
                r = self.wrk(self.http_port(t), "/1k", H1_CONNS, d)
                other = self.end(f"1 {t}")
                if t != "direct":
                    cpu.add(t, (self.cpu_seconds(t) - c0) / max(1, r["requests"]) * 1e6)
                rps.add(t, r["rps"])
                p50.add(t, r["p50_us"] / 1000)
                p99.add(t, r["p99_us"] / 1000)
                err.add(t, r["socket_errors"] + r["status"])
                log(f"  s1 rep {i + 1}/{reps} {t:8} {r['rps']:10.0f} req/s  p50 {r['p50_us'] / 1000:.2f} ms"
                    f"  p99 {r['p99_us'] / 1000:.2f} ms  errors {r['socket_errors'] + r['status']}  [other load {other:.2f}]")
                if t != "direct":
                    self.ensure_alive(t, "scenario 1")

    def s2_h2(self):
        reps, d = self.plan["reps"], self.plan["d_h2"]
        rps = self.figure(2, "s2_rps", "HTTP/2 over TLS 1 KiB: requests/s", "req/s", "higher")
        p50 = self.figure(2, "s2_p50", "HTTP/2 over TLS 1 KiB: p50 latency", "ms", "lower", digits=2)
        p99 = self.figure(2, "s2_p99", "HTTP/2 over TLS 1 KiB: p99 latency", "ms", "lower", digits=2)
        cpu = self.figure(2, "s2_cpu", "HTTP/2 over TLS 1 KiB: proxy CPU per request", "µs", "lower",
                          targets=PROXIES, digits=1)
        err = self.figure(2, "s2_err", "HTTP/2 over TLS 1 KiB: failed requests", "count", "lower", chart=False)
        logfile = os.path.join(self.work, "h2load.log")
        for i in range(reps):
            for t in TARGETS:
                if os.path.exists(logfile):
                    os.unlink(logfile)
                self.begin()
                c0 = []
                r = self.h2load_duration(self.https_port(t), d, logfile, after_warmup=lambda: c0.append(
                    self.cpu_seconds(t) if t != "direct" else 0))
                other = self.end(f"2 {t}")
                if t != "direct":
                    cpu.add(t, (self.cpu_seconds(t) - c0[0]) / max(1, r["done"]) * 1e6)
                rps.add(t, r["rps"])
                p50.add(t, r["p50_us"] / 1000 if r["p50_us"] is not None else None)
                p99.add(t, r["p99_us"] / 1000 if r["p99_us"] is not None else None)
                err.add(t, r["failed"])
                self.tls_info.setdefault(t, {}).update(
                    {k: r[k] for k in ("protocol", "cipher", "kx", "alpn")})
                if r["alpn"] != "h2":
                    self.problems.append(f"{LABEL[t]}: h2load negotiated {r['alpn']}, not h2")
                p99s = f"{r['p99_us'] / 1000:.2f}" if r["p99_us"] is not None else "n/a"
                log(f"  s2 rep {i + 1}/{reps} {t:8} {r['rps']:10.0f} req/s  p99 {p99s} ms  failed {r['failed']}  [other load {other:.2f}]")
                if t != "direct":
                    self.ensure_alive(t, "scenario 2")

    def s3_tls_handshakes(self):
        reps, d, n = self.plan["reps"], self.plan["d_tls"], self.plan["tls_batch"]
        cps = self.figure(3, "s3_cps", "New TLS connections (1 request each): connections/s", "conn/s", "higher")
        cpu = self.figure(3, "s3_cpu", "New TLS connections: proxy CPU per connection", "µs", "lower",
                          targets=PROXIES, digits=0)
        err = self.figure(3, "s3_err", "New TLS connections: failed", "count", "lower", chart=False)
        for t in TARGETS:
            self.h2load_batch(self.https_port(t), 20)  # warm-up
        for i in range(reps):
            for t in TARGETS:
                ok = failed = 0
                secs = 0.0
                self.begin()
                c0 = self.cpu_seconds(t) if t != "direct" else 0
                end = time.monotonic() + d
                while time.monotonic() < end:
                    b = self.h2load_batch(self.https_port(t), n)
                    if b is None:
                        failed += n
                        continue
                    ok += b["succeeded"]
                    failed += b["failed"]
                    secs += b["seconds"]
                    self.tls_info.setdefault(t, {})["handshake"] = f"{b['protocol']} {b['cipher']}"
                other = self.end(f"3 {t}")
                rate = ok / secs if secs > 0 else 0.0
                cps.add(t, rate)
                if t != "direct":
                    cpu.add(t, (self.cpu_seconds(t) - c0) / max(1, ok + failed) * 1e6)
                err.add(t, failed)
                log(f"  s3 rep {i + 1}/{reps} {t:8} {rate:10.0f} conn/s  ({ok} ok, {failed} failed)  [other load {other:.2f}]")
                if t != "direct":
                    self.ensure_alive(t, "scenario 3")

    def s4_large(self):
        reps = self.plan["big_reps"]
        gib = self.plan["big"] / (1 << 30)
        size = f"{gib:g} GiB" if gib >= 1 else f"{self.plan['big'] >> 20} MiB"
        dl = self.figure(4, "s4_down", f"{size} streamed response: throughput", "MiB/s", "higher")
        dl_rss = self.figure(4, "s4_down_rss", f"{size} streamed response: proxy peak RSS", "MiB", "lower",
                             targets=PROXIES, digits=1)
        ul = self.figure(4, "s4_up", f"{size} upload: throughput", "MiB/s", "higher")
        ul_rss = self.figure(4, "s4_up_rss", f"{size} upload: proxy peak RSS", "MiB", "lower",
                             targets=PROXIES, digits=1)
        upload = os.path.join(self.shm, "upload.bin")
        for i in range(reps):
            for kind, fig, rss_fig in (("down", dl, dl_rss), ("up", ul, ul_rss)):
                for t in TARGETS:
                    self.begin()
                    if t != "direct":
                        self.reset_peak(t)
                    url = f"http://127.0.0.1:{self.http_port(t)}" + ("/big" if kind == "down" else "/upload/blob")
                    r = self.curl_transfer(url, upload if kind == "up" else None)
                    other = self.end(f"4 {kind} {t}")
                    peak = None
                    if t != "direct":
                        peak = self.rss_kib(t, "VmHWM") / 1024
                        rss_fig.add(t, peak)
                    if r["ok"]:
                        fig.add(t, r["mib_s"])
                    else:
                        fig.add(t, None)
                        fig.notes.append(f"{LABEL[t]}: {kind} failed: {r['error']}")
                        self.problems.append(f"{LABEL[t]}: large {kind}load failed: {r['error']}")
                    peak_s = f"peak RSS {peak:.1f} MiB" if peak is not None else ""
                    speed = f"{r['mib_s']:8.0f} MiB/s" if r.get("mib_s") else "  failed"
                    log(f"  s4 rep {i + 1}/{reps} {kind:4} {t:8} {speed}  {peak_s}  [other load {other:.2f}]")
                    if t != "direct":
                        self.ensure_alive(t, f"scenario 4 ({kind}load)")
                    try:
                        os.unlink(os.path.join(self.shm, "upload", "blob"))
                    except FileNotFoundError:
                        pass

    def s5_idle(self):
        count = self.idle_count
        reps = self.plan["idle_reps"]
        plain = self.figure(5, "s5_plain", f"{count:,} idle keep-alive connections, plain: RSS per connection",
                            "KiB", "lower", targets=PROXIES, digits=1)
        tls = self.figure(5, "s5_tls", f"{count:,} idle keep-alive connections, TLS: RSS per connection",
                          "KiB", "lower", targets=PROXIES, digits=1)
        total = self.figure(5, "s5_tls_total", f"{count:,} idle TLS connections: proxy RSS", "MiB", "lower",
                            targets=PROXIES, digits=1, chart=False)
        # An idle connection's footprint must not depend on what it carried:
        # fewer connections here, since each first uploads 1 MiB.
        up_count, up_size = min(count, 1000), 1 << 20
        after_upload = self.figure(5, "s5_upload", f"{up_count:,} idle keep-alive connections after a 1 MiB "
                                   "upload each, plain: RSS per connection", "KiB", "lower", targets=PROXIES,
                                   digits=1)
        for i in range(reps):
            for proto, fig in (("plain", plain), ("tls", tls), ("upload", after_upload)):
                n = up_count if proto == "upload" else count
                for t in PROXIES:
                    # a fresh process per measurement: memory freed by an earlier
                    # measurement would otherwise be reused and hide the cost
                    self.stop_proxy(t)
                    self.start_proxy(t, "idle")
                    https = proto == "tls"
                    self.wrk(self.https_port(t) if https else self.http_port(t), "/1k", 16, 1,
                             scheme="https" if https else "http")
                    time.sleep(0.5)
                    self.begin()
                    before = self.rss_kib(t)
                    port = self.https_port(t) if https else self.http_port(t)
                    argv = [sys.executable, os.path.join(BENCH, "hold.py"), "--port", str(port),
                            "--count", str(n), "--hold", "180"] + (["--tls"] if https else []) + \
                        (["--upload", str(up_size)] if proto == "upload" else [])
                    out_path = os.path.join(self.work, f"hold.{t}.{proto}.out")
                    with open(out_path, "wb") as out:
                        h = self.procs.start(f"hold-{t}", argv, cpus=self.cpus_client,
                                             stdin=subprocess.PIPE, stdout=out)
                    ready = None
                    deadline = time.monotonic() + 150
                    while time.monotonic() < deadline and h.poll() is None:
                        with open(out_path) as f:
                            m = re.search(r"^READY opened=(\d+) failed=(\d+) seconds=([\d.]+) errors=(.*)$",
                                          f.read(), re.M)
                        if m:
                            ready = m
                            break
                        time.sleep(0.2)
                    if not ready:
                        self.procs.stop(f"hold-{t}", sig=signal.SIGKILL)
                        raise BenchError(f"hold.py against {t} did not finish opening:\n{tail(out_path)}")
                    time.sleep(2)
                    after = self.rss_kib(t)
                    other = self.end(f"5 {proto} {t}")
                    h.stdin.close()
                    try:
                        h.wait(timeout=30)
                    except subprocess.TimeoutExpired:
                        pass
                    self.procs.stop(f"hold-{t}", sig=signal.SIGKILL)
                    with open(out_path) as f:
                        text = f.read()
                    done = re.search(r"DONE held=(\d+) closed_by_server=(\d+)", text)
                    opened, failed = int(ready.group(1)), int(ready.group(2))
                    closed = int(done.group(2)) if done else None
                    per = (after - before) / opened if opened else None
                    fig.add(t, per)
                    if proto == "tls":
                        total.add(t, after / 1024)
                    self.idle_info[(t, proto, i)] = dict(opened=opened, failed=failed, closed=closed,
                                                          before_kib=before, after_kib=after,
                                                          seconds=float(ready.group(3)),
                                                          errors=ready.group(4))
                    if failed or closed:
                        self.problems.append(
                            f"{LABEL[t]}: idle {proto}: {failed} of {n} connections failed to open "
                            f"({ready.group(4)}), {closed} closed by the server while held")
                    per_s = f"{per:.1f}" if per is not None else "n/a"
                    log(f"  s5 rep {i + 1}/{reps} {proto:5} {t:8} RSS {before / 1024:.1f} -> {after / 1024:.1f} MiB, "
                        f"{per_s} KiB/conn (opened {opened}, failed {failed}, closed while held {closed}, "
                        f"{ready.group(3)} s to open)  [other load {other:.2f}]")
                    self.ensure_alive(t, f"scenario 5 ({proto})")

    def attack_connected(self, path):
        try:
            with open(path, "rb") as f:
                text = re.sub(r"\x1b\[[0-9;]*m", "", f.read().decode(errors="replace"))
        except OSError:
            return None, None
        conn = [int(x) for x in re.findall(r"connected:\s+(\d+)", text)]
        closed = [int(x) for x in re.findall(r"closed:\s+(\d+)", text)]
        return (max(conn) if conn else None), (max(closed) if closed else None)

    def s6_slowloris(self):
        reps, d = self.plan["attack_reps"], self.plan["d_attack"]
        # The upstream alone under the same attack: the machine's own limit,
        # since the attacker shares the CPUs with everything else.
        frac = self.figure(6, "s6_frac", f"Slowloris ({ATTACK} conns vs cap {CAP}): legit req/s during / before",
                           "ratio", "higher", targets=TARGETS, digits=3)
        during = self.figure(6, "s6_during", "Slowloris: legit requests/s during the attack", "req/s", "higher",
                             targets=TARGETS, chart=False)
        errs = self.figure(6, "s6_err", "Slowloris: legit errors during the attack", "count", "lower",
                           targets=TARGETS, chart=False)
        ramp = ATTACK / ATTACK_RATE + 1.0
        for i in range(reps):
            for t in TARGETS:
                port = self.http_port(t)
                self.begin()
                before = self.wrk(port, "/1k", H1_CONNS, d)
                out_path = os.path.join(self.work, f"slowloris.{t}.{i}.out")
                length = int(ramp + d + 5)
                with open(out_path, "wb") as out:
                    # line-buffered, so its status survives being killed
                    self.procs.start("slowloris", [
                        "stdbuf", "-oL", "slowhttptest", "-H", "-c", str(ATTACK), "-r", str(ATTACK_RATE), "-i", "5", "-x", "24",
                        "-p", "3", "-l", str(length), "-u", f"http://127.0.0.1:{port}/1k"],
                        cpus=self.cpus_client, stdout=out)
                time.sleep(ramp)
                dur = self.wrk(port, "/1k", H1_CONNS, d)
                self.procs.stop("slowloris", sig=signal.SIGKILL)
                other = self.end(f"6 {t}")
                connected, closed = self.attack_connected(out_path)
                f = dur["rps"] / before["rps"] if before["rps"] > 0 else None
                e = dur["socket_errors"] + dur["status"]
                frac.add(t, f)
                during.add(t, dur["rps"])
                errs.add(t, e)
                self.attack_info[(t, i)] = dict(before=before, during=dur, connected=connected, closed=closed)
                log(f"  s6 rep {i + 1}/{reps} {t:8} before {before['rps']:8.0f} req/s, during {dur['rps']:8.0f} req/s "
                    f"({f:.3f}), errors during {e} (connect {dur['connect']}, read {dur['read']}, "
                    f"timeout {dur['timeout']}, status {dur['status']}); attacker peak connected {connected}, "
                    f"closed by server {closed}  [other load {other:.2f}]")
                if t != "direct":
                    self.ensure_alive(t, "scenario 6")
                self.recover(t)

    def recover(self, t):
        """Wait until the proxy answers again after an attack (bounded)."""
        deadline = time.monotonic() + 40
        url = f"http://127.0.0.1:{self.http_port(t)}/1k"
        while time.monotonic() < deadline:
            r = subprocess.run(["curl", "-s", "-o", "/dev/null", "--max-time", "2", "-w", "%{http_code}", url],
                               capture_output=True, text=True)
            if r.stdout.strip() == "200":
                time.sleep(1)
                return
            time.sleep(0.5)
        self.problems.append(f"{LABEL[t]}: still not answering 40 s after the slowloris attack ended")

    def weir_accepts_gate(self):
        d = os.path.join(self.work, "weir")
        os.makedirs(d, exist_ok=True)
        v = self.profile("admission")
        conf = render("weir.toml", dict(DIR=d, HTTP_PORT=1, HTTPS_PORT=2, UP_PORT=3, SLOW_PORT=4,
                                        CERT=self.cert, KEY=self.key, WORKERS=self.workers, NOFILE=self.nofile,
                                        KEEPALIVE="60s", MAXCONN=CAP, WEIR_SERVER_EXTRA=v["WEIR_SERVER_EXTRA"]),
                      os.path.join(d, "weir.gate-check.toml"))
        r = run([self.weir, "check", "--config", conf], 30, check=False)
        return r.returncode == 0, (r.stdout + r.stderr).strip()

    def s7_admission(self):
        reps, d = self.plan["reps"], self.plan["d_admission"]
        rps = self.figure(7, "s7_rps", f"Admission ({ADMISSION_CONNS} clients, gate {GATE}, 50 ms upstream): "
                                       "requests/s", "req/s", "higher", targets=PROXIES)
        good = self.figure(7, "s7_good", "Admission: answered 2xx/s", "req/s", "higher", targets=PROXIES)
        p99 = self.figure(7, "s7_p99", "Admission: p99 latency (2xx and 503)", "ms", "lower", targets=PROXIES, digits=2)
        shed = self.figure(7, "s7_shed", "Admission: share shed (non-2xx)", "ratio", "higher", targets=PROXIES,
                           chart=False, digits=3)
        for t in PROXIES:
            self.wrk(self.http_port(t), "/slow", 16, 1)
        for i in range(reps):
            for t in PROXIES:
                self.begin()
                r = self.wrk(self.http_port(t), "/slow", ADMISSION_CONNS, d, timeout="5s")
                other = self.end(f"7 {t}")
                ok = r["requests"] - r["status"]
                secs = r["duration_us"] / 1e6
                rps.add(t, r["rps"])
                good.add(t, ok / secs)
                p99.add(t, r["p99_us"] / 1000)
                shed.add(t, r["status"] / r["requests"] if r["requests"] else None)
                self.admission_info[(t, i)] = r
                log(f"  s7 rep {i + 1}/{reps} {t:8} {r['rps']:9.0f} req/s, 2xx {ok / secs:7.0f}/s, "
                    f"shed {r['status']}, p99 {r['p99_us'] / 1000:.2f} ms, socket errors {r['socket_errors']}  [other load {other:.2f}]")
                self.ensure_alive(t, "scenario 7")

    # ---- the whole run ----

    def main(self):
        only = set(int(x) for x in self.a.scenarios.split(",")) if self.a.scenarios else set(range(1, 8))
        log(f"work dir {self.work}, data on {self.shm}; ports {self.port}")
        log(f"workers per proxy: {self.workers}; proxies on CPUs {self.cpus_proxy}, clients and upstream on "
            f"{self.cpus_client}; fd limit {self.nofile}")
        self.setup_files()
        self.start_upstream()
        # idle scenario size: HAProxy reserves two descriptors per connection
        # (maxsock = 2 * maxconn + 15) and refuses to start above the fd limit.
        hap_max = min(16384, (self.nofile - 15) // 2)
        self.idle_count = min(self.plan["idle"], hap_max - 64)
        self.idle_caps = dict(nginx=16384, haproxy=hap_max, weir=16384)

        std = [s for s in (1, 2, 3, 4, 6) if s in only]
        if std:
            for t in PROXIES:
                self.start_proxy(t, "standard")
            steps = {1: ("1: HTTP/1.1 keep-alive", self.s1_keepalive), 2: ("2: HTTP/2 over TLS", self.s2_h2),
                     3: ("3: new TLS connections", self.s3_tls_handshakes),
                     4: ("4: large bodies", self.s4_large), 6: ("6: slowloris", self.s6_slowloris)}
            for s in std:
                self.loadavg_sample()
                log(f"scenario {steps[s][0]}")
                steps[s][1]()
                self.scenarios_run.append(s)
            for t in PROXIES:
                self.stop_proxy(t)
        if 7 in only:
            self.loadavg_sample()
            log("scenario 7: admission saturation")
            ok, out = self.weir_accepts_gate()
            if not ok:
                msg = "skipped: weir has no max_concurrent_requests yet"
                log(f"  {msg}\n{out}")
                self.skipped[7] = msg
            else:
                for t in PROXIES:
                    self.start_proxy(t, "admission")
                self.s7_admission()
                self.scenarios_run.append(7)
                for t in PROXIES:
                    self.stop_proxy(t)
        if 5 in only:
            self.loadavg_sample()
            log(f"scenario 5: {self.idle_count} idle connections")
            self.s5_idle()
            self.scenarios_run.append(5)
            for t in PROXIES:
                self.stop_proxy(t)
        self.loadavg_sample()
        self.scan_weir_log()
        self.save(self.a.save_results or os.path.join(self.work, "results.json"))
        self.report()

    # ---- results as JSON, so a report can be rendered again without rerunning ----

    STATE = ("skipped", "problems", "tls_info", "loadavg", "scenarios_run", "idle_count", "idle_caps",
             "contention", "quiet_waited", "weir_log_summary", "weir_log_lines", "cpus_proxy", "cpus_client",
             "nofile", "workers")
    KEYED = ("attack_info", "idle_info", "admission_info")

    def save(self, path):
        state = {k: getattr(self, k, None) for k in self.STATE}
        for k in self.KEYED:
            state[k] = [[list(key) if isinstance(key, tuple) else key, v] for key, v in getattr(self, k).items()]
        state["figures"] = [dict(scenario=f.scenario, key=f.key, label=f.label, unit=f.unit, better=f.better,
                                 chart=f.chart, targets=f.targets, digits=f.digits, values=f.values, notes=f.notes)
                            for f in self.figures]
        state["elapsed"] = time.time() - self.started
        state["date"] = f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M}"
        state["quick"] = bool(self.a.quick)
        state["versions"] = self.versions()
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
        self.a.quick = state["quick"]
        self.saved_versions = state.get("versions")
        self.run_date = state.get("date")

    def scan_weir_log(self):
        path = os.path.join(self.work, "weir", "log")
        try:
            with open(path, errors="replace") as f:
                lines = f.read().splitlines()
        except OSError:
            return
        self.weir_log_lines = len(lines)
        panics = [ln for ln in lines if "panicked" in ln or "panic" in ln.lower()]
        if panics:
            self.problems.append("weir panicked:\n" + "\n".join(panics[:5]))
        levels = {}
        for ln in lines:
            m = re.search(r"\b(ERROR|WARN)\b\s+(.*)$", re.sub(r"\x1b\[[0-9;]*m", "", ln))
            if m:
                msg = re.sub(r"\b\d{1,3}(\.\d{1,3}){3}(:\d+)?\b", "ADDR", m.group(2))
                key = f"{m.group(1)} {msg[:160]}"
                levels[key] = levels.get(key, 0) + 1
        self.weir_log_summary = sorted(levels.items(), key=lambda kv: -kv[1])[:10]

    # ---- output ----

    def fmt(self, f, v):
        if v is None:
            return "n/a"
        if f.digits == 0:
            return f"{v:,.0f}"
        return f"{v:,.{f.digits}f}"

    def table(self):
        rows = ["| # | figure | unit | better | upstream direct | nginx | HAProxy | weir | weir/nginx | weir/HAProxy |",
                "|---|---|---|---|---|---|---|---|---|---|"]
        for f in sorted(self.figures, key=lambda f: f.scenario):
            cells = []
            for t in TARGETS:
                cells.append(self.fmt(f, f.median(t)) if t in f.targets else "—")
            ratios = []
            for peer in ("nginx", "haproxy"):
                r, v = f.ratio(peer), f.verdict(peer)
                if r is None and v is None and f.median(peer) == 0 and f.median("weir"):
                    good = f.better == "higher"
                    ratios.append("∞ " + ("(better)" if good else "(**worse**)"))
                elif r is None:
                    ratios.append("=" if v == "=" else "n/a")
                else:
                    mark = {"better": " (better)", "worse": " (**worse**)", "≈": " (≈)"}[v]
                    ratios.append(f"{r:.2f}{mark}")
            rows.append(f"| {f.scenario} | {f.label} | {f.unit} | "
                        f"{f.better} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |")
        return "\n".join(rows)

    def chart(self, path):
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.patches import Patch
        from matplotlib.ticker import FixedLocator, NullLocator

        figs = [f for f in sorted(self.figures, key=lambda f: f.scenario) if f.chart
                and any(f.ratio(p) is not None or (f.median(p) == 0 and f.median("weir")) for p in ("nginx", "haproxy"))]
        if not figs:
            return False
        ratios = [f.ratio(p) for f in figs for p in ("nginx", "haproxy") if f.ratio(p)]
        lo = min([0.4] + [r / 1.8 for r in ratios])
        hi = max([2.0] + [r * 2.4 for r in ratios])
        n = len(figs)
        fig, ax = plt.subplots(figsize=(12, 0.5 * n + 1.9))
        ys = list(range(n))[::-1]
        h = 0.38
        for k, (peer, color) in enumerate((("nginx", "#2b7bba"), ("haproxy", "#e08214"))):
            for f, y in zip(figs, ys):
                yy = y + (h / 2 if k == 0 else -h / 2)
                r, verdict = f.ratio(peer), f.verdict(peer)
                if r is None:
                    if f.median(peer) == 0 and f.median("weir"):
                        good = f.better == "higher"
                        ax.text(1.02, yy, f"{LABEL[peer]} measured 0: weir {'better' if good else 'WORSE'}",
                                va="center", fontsize=7, color=color)
                    continue
                ax.barh(yy, abs(r - 1), left=min(r, 1.0), height=h, color=color)
                tag = {"better": "better", "worse": "WORSE", "≈": "≈"}.get(verdict, "")
                ax.text(r, yy, f" {r:.2f} {tag} " if r >= 1 else f" {r:.2f} {tag} ", va="center", fontsize=7,
                        ha="left" if r >= 1 else "right", fontweight="bold" if verdict == "worse" else "normal")
        ax.axvline(1.0, color="black", linewidth=0.8)
        ax.set_yticks(ys)
        ax.set_yticklabels([textwrap.fill(f"{f.scenario}. {f.label} ({f.better} is better)", 58)
                            for f in figs], fontsize=7.5)
        ax.set_xscale("log")
        ax.set_xlim(lo, hi)
        ticks = [t for t in (0.125, 0.25, 0.5, 0.75, 1, 1.5, 2, 4, 8, 16, 32, 64) if lo <= t <= hi]
        ax.xaxis.set_major_locator(FixedLocator(ticks))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xticklabels([f"{t:g}" for t in ticks])
        ax.set_xlabel("weir ÷ peer (log scale). 1 = equal; 'better'/'WORSE' is from weir's point of view")
        mode = " (quick mode)" if self.a.quick else ""
        ax.set_title(f"weir vs nginx and HAProxy: medians, {self.workers} worker(s), "
                     f"{datetime.date.today().isoformat()}{mode}", fontsize=10)
        ax.legend(handles=[Patch(color="#2b7bba", label="weir / nginx"),
                           Patch(color="#e08214", label="weir / HAProxy")], loc="upper right", fontsize=8)
        fig.tight_layout()
        fig.savefig(path, dpi=110, bbox_inches="tight")
        plt.close(fig)
        return True

    def versions(self):
        def first_line(argv):
            try:
                r = subprocess.run(argv, capture_output=True, text=True, timeout=10)
                return ((r.stdout or "") + (r.stderr or "")).strip().splitlines()[0]
            except Exception:  # noqa: BLE001
                return "?"
        rev = subprocess.run(["git", "-C", ROOT, "describe", "--always", "--dirty", "--abbrev=12"],
                             capture_output=True, text=True).stdout.strip()
        return dict(
            weir=f"{first_line([self.weir, '--version'])} (git {rev or '?'})",
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

    def machine(self):
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

    def findings(self):
        out = []
        for f in sorted(self.figures, key=lambda f: f.scenario):
            if not f.chart:
                continue
            worse = [LABEL[p] + f" ({f.ratio(p):.2f})" for p in ("nginx", "haproxy") if f.verdict(p) == "worse"]
            better = [LABEL[p] + f" ({f.ratio(p):.2f})" for p in ("nginx", "haproxy") if f.verdict(p) == "better"]
            if worse:
                out.append(f"- **weir loses** on *{f.label}* to " + " and ".join(worse) + ".")
            elif better and len(better) == 2:
                out.append(f"- weir leads on *{f.label}*: " + ", ".join(better) + ".")
        return out

    def report(self):
        md_path = self.a.out_md
        png_path = self.a.out_png
        elapsed = time.time() - self.started
        v = getattr(self, "saved_versions", None) or self.versions()
        m = self.machine()
        cmd = "bash bench/run.sh" + (" --quick" if self.a.quick else "") + (
            f" --workers {self.workers}" if self.workers != 1 else "")
        table = self.table()
        print("\n" + table + "\n", flush=True)
        for f in self.figures:
            rs = ", ".join(f"weir/{LABEL[p]} = {f.ratio(p):.3f}" if f.ratio(p) is not None else f"weir/{LABEL[p]} = n/a"
                           for p in ("nginx", "haproxy"))
            print(f"  {f.label}: {rs}")
        charted = self.chart(png_path)
        plan = self.plan
        lines = []
        w = lines.append
        w("# Benchmarks: weir vs nginx and HAProxy")
        w("")
        date = getattr(self, "run_date", None) or f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M}"
        w(f"Generated by `{cmd}` on {date} UTC "
          f"({elapsed / 60:.1f} minutes{', QUICK mode: 1 repeat, short runs — indicative only' if self.a.quick else ''}). "
          "Do not edit by hand: rerun the harness.")
        w("")
        w("## Machine and versions")
        w("")
        w(f"- CPU: {m['model']}, `nproc` = {m['nproc']}; memory {m['memory']}; kernel {m['kernel']}")
        w(f"- Load average (1 min) sampled before each scenario: {', '.join(f'{x:.2f}' for x in self.loadavg)}.")
        if self.contention:
            loads = sorted(x for _, x in self.contention)
            noisy = [f"{lbl} ({x:.2f})" for lbl, x in self.contention if x > 0.25]
            w(f"- The machine is shared. CPU used by processes outside the harness during each run (in cores, of "
              f"{os.cpu_count()}): median {statistics.median(loads):.2f}, max {loads[-1]:.2f}; the harness waited "
              f"{self.quiet_waited:.0f} s in total for quiet before runs. Runs disturbed by more than 0.25 core: "
              + (", ".join(noisy) if noisy else "none") + ".")
        for k in ("weir", "nginx", "haproxy", "wrk", "h2load", "slowhttptest", "curl", "openssl", "python"):
            w(f"- {k}: {v[k]}")
        w("")
        w("## Reproduce")
        w("")
        w("```sh")
        w("bash bench/run.sh            # full run, under 15 minutes on 2 cores")
        w("bash bench/run.sh --quick    # smoke run, under 3 minutes")
        w("```")
        w("")
        w(f"This file was produced by `{cmd}`. The script installs what is missing (apt: nginx, haproxy, wrk, "
          "nghttp2-client, slowhttptest; pip: matplotlib), builds `target/release/weir`, and runs everything on "
          "127.0.0.1 with ports it picks and checks; all servers are foreground processes it starts and kills, with "
          "their files in a temporary directory.")
        w("")
        w("## Results (medians)")
        w("")
        if charted:
            w("![weir / nginx and weir / HAProxy for every figure](benchmarks.png)")
            w("")
        w("Ratios are weir ÷ peer. Whether a ratio above 1 is good depends on the figure (column *better*); "
          "the verdict in brackets says which way it goes, and ≈ means within 5 %. *upstream direct* is the "
          "client talking to the upstream without a proxy, on the client's core: the ceiling for plain HTTP/1.1 "
          "(scenario 1), but not where a proxy takes work off that core (TLS in scenarios 2-3, where the upstream "
          "would terminate TLS itself on the client core, and the large transfers of scenario 4). *proxy CPU* is "
          "the proxy's user+system time from `/proc/PID/stat` divided by the requests (or connections) served: it "
          "compares the proxies even where the client core is the bottleneck. Where weir loses, the table says so.")
        w("")
        w(table)
        w("")
        for s, msg in sorted(self.skipped.items()):
            w(f"- Scenario {s}: {msg}.")
        not_run = [s for s in range(1, 8) if s not in self.scenarios_run and s not in self.skipped]
        if not_run:
            w(f"- Scenarios not run in this invocation: {', '.join(map(str, not_run))}.")
        w("")
        fnd = self.findings()
        if fnd:
            w("### Where weir stands")
            w("")
            lines.extend(fnd)
            w("")
        # The engineers' reading of the targets (issue 5), kept by hand in
        # bench/targets.md: what each ratio means and what limits it.
        targets_md = os.path.join(BENCH, "targets.md")
        if os.path.exists(targets_md):
            with open(targets_md) as f:
                lines.extend(f.read().rstrip().splitlines())
            w("")
        # The LLM routes' figures come from bench/llm.sh (a run of their
        # own); the last ones are kept in bench/llm-results.md.
        llm_md = os.path.join(BENCH, "llm-results.md")
        if os.path.exists(llm_md):
            w("<!-- llm-bench:start -->")
            with open(llm_md) as f:
                lines.extend(f.read().rstrip().splitlines())
            w("<!-- llm-bench:end -->")
            w("")
        # The runs of their own (bench/llm.sh --translation-only,
        # bench/frontier.sh, bench/cluster.sh) keep their last results beside
        # them, each between its markers.
        for marker, name in [("translation-bench", "translation-results.md"),
                             ("frontier-bench", "frontier-results.md"),
                             ("cluster-bench", "cluster-results.md")]:
            path = os.path.join(BENCH, name)
            if os.path.exists(path):
                w(f"<!-- {marker}:start -->")
                with open(path) as f:
                    lines.extend(f.read().rstrip().splitlines())
                w(f"<!-- {marker}:end -->")
                w("")
        if self.problems:
            w("### Problems seen during the run")
            w("")
            for p in self.problems:
                w("- " + p.replace("\n", "\n  "))
            w("")
        if getattr(self, "weir_log_summary", None):
            w(f"weir's log ({self.weir_log_lines} lines at level warn) — most frequent messages:")
            w("")
            w("```")
            for k, n in self.weir_log_summary:
                w(f"{n:6}  {k}")
            w("```")
            w("")
            if any("Illegal SNI" in k for k, _ in self.weir_log_summary):
                w("The `Illegal SNI` warnings come from the TLS warm-up with wrk, which sends `127.0.0.1` as SNI "
                  "(the hex in brackets): rustls logs one WARN line per such connection, not de-duplicated, so any "
                  "client can make weir write a log line per connection at the default level.")
                w("")
        w("## Method")
        w("")
        w(f"- **Targets.** The same upstream (nginx 1 worker, static files) is measured directly and behind each "
          f"proxy. nginx (`worker_processes {self.workers}`), HAProxy (`nbthread {self.workers}`) and weir "
          f"(`workers = {self.workers}`) run with equivalent configurations, checked in under `bench/conf/`: "
          "keep-alive to the upstream (64 idle connections kept, 90 s), the same timeouts (request head 10 s, "
          "keep-alive idle 60 s, send 30 s, upstream connect 5 s, upstream response 60 s), no limit on requests per "
          "connection, at most 100 HTTP/2 streams, listen backlog 1024, access logs off, the same forwarded headers "
          "(X-Forwarded-For/-Proto/-Host, X-Real-IP), TLS 1.2 and 1.3 (nginx 1.22 needs `ssl_protocols` for 1.3). "
          "Bodies are never written to disk: nginx keeps its default in-memory response buffering with "
          "`proxy_max_temp_file_size 0` (`proxy_buffering off` measured about half as fast on the large download, "
          "so it is not used) and streams uploads with `proxy_request_buffering off` (by default it would write a "
          "whole 1 GiB upload to disk before forwarding it). Buffer sizes are every proxy's defaults; nginx's "
          "16 KiB `client_body_buffer_size` limits its upload speed (64 KiB measured about 1.5× faster).")
        if self.cpus_proxy is not None:
            w(f"- **CPU placement.** The proxy under test is pinned to CPU {self.cpus_proxy}; the load generator, "
              f"the upstream and the attack tools share CPU {self.cpus_client} (`taskset`). The proxy thus has a core "
              "to itself, and the client+upstream core does the same work in every run. With more cores, raise "
              "`--workers`.")
        else:
            w("- **CPU placement.** Not pinned (not enough cores for a separate client core).")
        w(f"- **Alternation.** Every figure is measured {plan['reps']}× (scenario 4: {plan['big_reps']}×, 5: "
          f"{plan['idle_reps']}×, 6: {plan['attack_reps']}×) in the order upstream, nginx, HAProxy, weir, upstream, "
          "nginx, … and the median is reported. All raw runs are listed at the end.")
        w("- **TLS.** One self-signed RSA-2048 certificate is made per run (`openssl req -x509`) and used by every "
          "listener; RSA keeps the server's private-key operation the dominant handshake cost. HAProxy is given "
          "the TLS 1.3 suite order the clients ask for (AES-128-GCM first; by default it imposes its own, "
          "AES-256 first), so all three negotiate the same cipher (listed at the end).")
        w(f"- **1. HTTP/1.1 keep-alive.** `wrk -t1 -c{H1_CONNS} -d{plan['d_h1']}s` on a 1 KiB file; requests/s and "
          "wrk's p50/p99 (read with a Lua `done` hook, `bench/wrk_report.lua`). Errors are socket errors plus "
          "non-2xx/3xx.")
        w(f"- **2. HTTP/2 over TLS.** `h2load -t1 -c{H2_CONNS} -m{H2_STREAMS} -D{plan['d_h2']} --warm-up-time=1` "
          f"({H2_CONNS} connections × {H2_STREAMS} concurrent streams) on the 1 KiB file. h2load prints only "
          "min/max/mean/sd of request time, so p50/p99 are computed from its per-request `--log-file`.")
        w(f"- **3. New TLS connections.** Repeated `h2load -t1 -c{plan['tls_batch']} -n{plan['tls_batch']} --h1`: "
          f"{plan['tls_batch']} new connections at once, each a full TLS handshake and one HTTP/1.1 request, "
          f"for {plan['d_tls']} s; the rate is connections ÷ the sum of h2load's measured times (process start-up "
          "excluded). h2load gives every connection a fresh TLS session and never resumes, so every connection "
          "is a full handshake. `wrk -H 'Connection: close'` was rejected: wrk reuses its OpenSSL object after "
          "`SSL_clear`, which resumes the previous session — it measures resumptions, not handshakes "
          "(checked with nginx `$ssl_session_reused`).")
        big = plan['big']
        w(f"- **4. Large bodies.** `curl` downloads a {big >> 20} MiB file (sparse, on tmpfs, sent with sendfile by "
          f"the upstream) and uploads {big >> 20} MiB with `PUT` (`-T`, no `Expect`). The upstream accepts uploads "
          "with nginx's DAV module, which reads the whole body (to tmpfs) before it answers — so no proxy can "
          "answer before the last byte went through — and every target writes into the same sink. Throughput is "
          "bytes ÷ curl's total time. Peak RSS is `VmHWM` from `/proc/PID/status`, reset before every transfer "
          "by writing 5 to `/proc/PID/clear_refs`; for nginx it is the sum over master and workers.")
        w(f"- **5. Idle connections.** `bench/hold.py` (Python asyncio) opens {self.idle_count:,} connections, makes "
          "one HTTP/1.1 request on each (over TLS without session resumption for the TLS variant), and holds them "
          "idle; RSS (`VmRSS`, summed over processes) is read before and 2 s after, and the difference is divided "
          "by the connections held. Each measurement uses a freshly started proxy. In this scenario the caps are "
          f"raised and the keep-alive timeout is 300 s everywhere: nginx `worker_connections "
          f"{self.idle_caps['nginx']}`, HAProxy `maxconn {self.idle_caps['haproxy']}`, weir `[connections] max = "
          f"{self.idle_caps['weir']}` (so weir's load-aware reclaiming, which starts at 80 % of its cap, stays "
          f"off). HAProxy refuses to start unless 2 × maxconn + 15 descriptors fit in the fd limit "
          f"({self.nofile} here), which is why {self.idle_count:,} rather than 10,000 connections are held when the "
          "limit is 20,000.")
        w(f"- **6. Slowloris.** With the 1024-connection caps (nginx `worker_connections 1024`, HAProxy `maxconn "
          f"1024`, weir's default `[connections] max = 1024`): `wrk -c{H1_CONNS}` for {plan['d_attack']} s, then "
          f"`slowhttptest -H -c {ATTACK} -r {ATTACK_RATE} -i 5 -x 24` ({ATTACK} slow-header connections, 3× the cap, "
          f"opened over {ATTACK / ATTACK_RATE:.0f} s), and once they are open a fresh `wrk` run (new connections) for "
          f"{plan['d_attack']} s. Reported: the during/before ratio of legitimate requests/s, and wrk's errors "
          "during the attack (connect/read/write errors, timeouts over 2 s, non-2xx). Each proxy answers the attack "
          "in its own way — that is what is measured. The upstream-direct row runs the same attack against the "
          "upstream alone (nginx with 8,192 connections, so the attack never fills it): the attacker shares the "
          "CPUs with everything, so that row is the machine's own limit, and a proxy's ratio is read against it.")
        w(f"- **7. Admission.** The `/slow` route goes to `bench/slow_upstream.py`, an asyncio server that answers "
          f"every request after a {SLOW_DELAY * 1000:.0f} ms timer (nginx cannot sleep without third-party modules, "
          f"and `limit_rate` has one-second granularity). Each proxy admits {GATE} concurrent requests and sheds the "
          f"rest with 503: weir `[server] max_concurrent_requests = {GATE}`, nginx `limit_conn` on a constant key "
          f"({GATE}; it counts requests in progress), HAProxy `http-request return status 503 if {{ be_conn(slow) ge "
          f"{GATE} }}`. `wrk -c{ADMISSION_CONNS}` for {plan['d_admission']} s; with every slot busy the ceiling for "
          f"answered requests is {GATE} / {SLOW_DELAY:g} s = {GATE / SLOW_DELAY:.0f}/s. Requests/s counts 2xx and "
          "503; the p99 mixes both.")
        w("")
        w("## Raw runs")
        w("")
        w("<details><summary>every measured value, in run order</summary>")
        w("")
        w("| figure | target | runs |")
        w("|---|---|---|")
        for f in sorted(self.figures, key=lambda f: f.scenario):
            for t in f.targets:
                vals = ", ".join(self.fmt(f, x) for x in f.values[t])
                w(f"| {f.label} | {LABEL[t]} | {vals} |")
        w("")
        if self.tls_info:
            w("Negotiated TLS (h2load): " + "; ".join(
                f"{LABEL[t]}: {i.get('protocol')} {i.get('cipher')} {i.get('kx') or ''} ALPN {i.get('alpn')}".strip()
                for t, i in self.tls_info.items()))
            w("")
        if self.attack_info:
            w("Slowloris: attacker's peak connected count / connections closed by the server (slowhttptest): " + "; ".join(
                f"{LABEL[t]} run {i + 1}: {x['connected']} / {x['closed']}" for (t, i), x in self.attack_info.items()))
            w("")
        if self.idle_info:
            w("Idle connections (opened / failed / closed by the server while held; RSS before → after): " + "; ".join(
                f"{LABEL[t]} {p}: {x['opened']} / {x['failed']} / {x['closed']}; "
                f"{x['before_kib'] / 1024:.1f} → {x['after_kib'] / 1024:.1f} MiB"
                for (t, p, i), x in self.idle_info.items()))
            w("")
        w("</details>")
        w("")
        with open(md_path, "w") as f:
            f.write("\n".join(lines))
        log(f"wrote {md_path}" + (f" and {png_path}" if charted else ""))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--work", help="temporary directory for configs, logs, pids (required to run)")
    ap.add_argument("--shm", help="directory on tmpfs for the large files (required to run)")
    ap.add_argument("--weir", default=os.path.join(ROOT, "target", "release", "weir"), help="the weir binary")
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
        bench.load(a.render)
        bench.report()
        return 0

    def on_signal(signum, _frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    try:
        bench.main()
    except BenchError as e:
        print(f"\nbench failed: {e}", file=sys.stderr)
        return 1
    finally:
        bench.procs.stop_all()
    return 0


if __name__ == "__main__":
    sys.exit(main())
