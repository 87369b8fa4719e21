"""Processes for every benchmark script in bench/: starting and stopping
them, what /proc says about them (children, CPU time, memory), and waiting
for a server to listen.

driver.py (bench/run.sh) records each process it starts in a pid file, so
that run.sh's exit trap can end them if the driver itself is killed;
llm.py, frontier.py and cluster.py start each process in a session of its
own and end the whole group. Both ways are `Procs`, chosen by its arguments.
"""

import datetime
import os
import random
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "target", "dist")


class BenchError(Exception):
    pass


def log(msg):
    print(f"[{datetime.datetime.now():%H:%M:%S}] {msg}", flush=True)


# --------------------------------------------------------------------------
# /proc


# Linux lists a thread's children in /proc/PID/task/TID/children only with
# CONFIG_PROC_CHILDREN; without it, every process's parent is read instead.
_HAS_CHILDREN_FILES = os.path.exists(f"/proc/{os.getpid()}/task/{os.getpid()}/children")


def children(pid):
    """The processes whose parent is `pid` (any of its threads)."""
    if not _HAS_CHILDREN_FILES:
        return _children_by_scan(pid)
    out = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children") as f:
                out += [int(c) for c in f.read().split()]
        except OSError:  # the thread ended
            pass
    return out


def _children_by_scan(pid):
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
    """A `/proc/PID/status` figure in KiB (`VmRSS`, `VmHWM`), 0 if gone."""
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
    """User + system CPU time of one process (all its threads) so far."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def tree_cpu_seconds(pid):
    """User + system CPU time of a process and its children so far."""
    return sum(pid_cpu_seconds(p) for p in [pid] + children(pid))


# --------------------------------------------------------------------------
# starting and stopping


class Procs:
    """Every process a benchmark starts, by name, each logging to
    WORK/NAME.log unless told otherwise.

    pidfile: append "PID NAME" for each process started (bench/run.sh's
    exit trap reads it). cwd: the processes' working directory (None: this
    one's). own_group: start each in a session of its own, and stop it by
    signalling its whole process group."""

    def __init__(self, work, pidfile=None, cwd=None, own_group=False):
        self.work = work
        self.pidfile = pidfile
        self.cwd = cwd
        self.own_group = own_group
        self.live = {}

    def start(self, name, argv, cpus=None, log_path=None, stdin=None, stdout=None):
        """Start `argv` (under `taskset -c CPUS` if given) as `name`."""
        if cpus is not None:
            argv = ["taskset", "-c", str(cpus)] + argv
        log_path = log_path or os.path.join(self.work, f"{name}.log")
        logf = open(log_path, "ab")
        p = subprocess.Popen(
            argv,
            stdin=stdin if stdin is not None else subprocess.DEVNULL,
            stdout=stdout if stdout is not None else logf,
            stderr=logf,
            cwd=self.cwd,
            **({"preexec_fn": os.setsid} if self.own_group else {}),
        )
        logf.close()
        p.log_path = log_path
        p.bench_name = name
        self.live[name] = p
        if self.pidfile:
            self._record(p, argv)
        return p

    def _record(self, p, argv):
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

    def stop(self, name, sig=signal.SIGTERM, grace=8.0):
        p = self.live.pop(name, None)
        if p is None:
            return
        if self.own_group:
            self._signal_group(p, sig)
            self._reap_group(p, grace)
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
        if self.own_group:
            # every group at once, then wait for each
            procs = list(self.live.values())
            self.live.clear()
            for p in procs:
                self._signal_group(p, signal.SIGTERM)
            for p in procs:
                self._reap_group(p, 10)
            return
        for name in list(self.live):
            try:
                self.stop(name, grace=5)
            except Exception as e:  # noqa: BLE001 - keep stopping the others
                print(f"stopping {name}: {e}", file=sys.stderr)

    @staticmethod
    def _signal_group(p, sig):
        try:
            os.killpg(p.pid, sig)
        except ProcessLookupError:
            pass

    @staticmethod
    def _reap_group(p, grace):
        try:
            p.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)


def tail(path, n=15):
    try:
        with open(path, "rb") as f:
            return "\n".join(f.read().decode(errors="replace").splitlines()[-n:])
    except OSError:
        return "(no log)"


def run(argv, timeout, cpus=None, check=True):
    """Run a command to its end; BenchError if it fails (with `check`) or hangs."""
    if cpus is not None:
        argv = ["taskset", "-c", cpus] + argv
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        raise BenchError(f"timed out after {timeout}s: {' '.join(argv)}") from e
    if check and r.returncode != 0:
        raise BenchError(f"failed ({r.returncode}): {' '.join(argv)}\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
    return r


# --------------------------------------------------------------------------
# ports


def free_port():
    """A loopback port the kernel says is free now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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


def wait_port(port, proc=None, timeout=20):
    """Until 127.0.0.1:PORT accepts; BenchError if `proc` exits first or time runs out."""
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


def wait_http(url, seconds=90):
    """Until `url` answers with any HTTP status; False if it never does."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            urllib.request.urlopen(url, timeout=2)
            return True
        except urllib.error.HTTPError:
            return True
        except Exception:  # noqa: BLE001 - not up yet
            time.sleep(0.5)
    return False
