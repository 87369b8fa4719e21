"""The load generators of bench/driver.py, each run on the client CPU and
read into a dict: wrk (HTTP/1.1, with bench/wrk_report.lua), h2load
(HTTP/2 for a duration, or a batch of new TLS connections) and curl (one
large transfer)."""

import json
import os
import re
import subprocess
import time

from plan import BENCH, H2_CONNS, H2_STREAMS
from procs import BenchError, run


def percentile(sorted_values, p):
    if not sorted_values:
        return None
    k = max(0, min(len(sorted_values) - 1, int(round(p / 100.0 * len(sorted_values) + 0.5)) - 1))
    return sorted_values[k]


class Clients:
    """The clients, pinned to `cpus` (None: not pinned)."""

    def __init__(self, cpus, big):
        self.cpus = cpus
        self.big = big  # the size a large transfer must have moved

    def wrk(self, port, path, conns, seconds, timeout="2s", scheme="http", headers=()):
        argv = ["wrk", "-t1", f"-c{conns}", f"-d{seconds}s", f"--timeout={timeout}",
                "-s", os.path.join(BENCH, "wrk_report.lua")]
        for h in headers:
            argv += ["-H", h]
        argv.append(f"{scheme}://127.0.0.1:{port}{path}")
        r = run(argv, seconds + 30, cpus=self.cpus, check=False)
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
        if self.cpus is not None:
            argv = ["taskset", "-c", self.cpus] + argv
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
        lat = self._h2load_latencies(logfile, res["done"])
        res["p50_us"] = percentile(lat, 50)
        res["p99_us"] = percentile(lat, 99)
        return res

    @staticmethod
    def _h2load_latencies(logfile, done):
        """The sorted request times (µs) of h2load's `--log-file`, measured phase only."""
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
        if len(rows) > done:  # the log holds the measured phase only; be safe anyway
            rows = rows[len(rows) - done:]
        return sorted(r_[2] for r_ in rows if r_[1] > 0)

    def h2load_batch(self, port, n):
        """n new TLS connections at once, one HTTP/1.1 request each, no resumption."""
        argv = ["h2load", "-t1", f"-c{n}", f"-n{n}", "--h1", f"https://127.0.0.1:{port}/1k"]
        r = run(argv, 30, cpus=self.cpus, check=False)
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
        """One large download (or upload of the file `upload`): ok, status, MiB/s."""
        argv = ["curl", "-sS", "-o", "/dev/null", "--max-time", "300", "-w",
                "%{http_code} %{size_download} %{size_upload} %{time_total}"]
        if upload:
            argv += ["-T", upload, "-H", "Expect:"]
        argv.append(url)
        r = run(argv, 320, cpus=self.cpus, check=False)
        parts = r.stdout.split()
        if r.returncode != 0 or len(parts) != 4:
            return dict(ok=False, error=(r.stderr or r.stdout).strip()[-300:])
        code, down, up, total = int(parts[0]), float(parts[1]), float(parts[2]), float(parts[3])
        size = up if upload else down
        ok = code in (200, 201, 204) and size == self.big
        return dict(ok=ok, code=code, bytes=size, seconds=total,
                    mib_s=size / total / (1 << 20) if total > 0 else None,
                    error=None if ok else f"status {code}, {int(size)} bytes")
