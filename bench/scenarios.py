"""The seven scenarios of bench/driver.py, one class each. A scenario
declares its figures, runs its clients against every target in turn
(A B C A B C ...), and adds each run's values to the figures; it restarts a
proxy that died (a finding, in the report's problems). docs/benchmarks.md
(its Method section, written by report.py) says what each one measures."""

import os
import re
import signal
import subprocess
import sys
import time

from plan import (ADMISSION_CONNS, ATTACK, ATTACK_RATE, BENCH, CAP, GATE, H1_CONNS, LABEL, PROXIES,
                  TARGETS)
from procs import BenchError, log, tail


class Scenario:
    """What every scenario works with; `run()` measures."""

    number = None
    title = None     # as logged: "scenario N: TITLE"

    def __init__(self, bench):
        self.plan, self.results = bench.plan, bench.results
        self.servers, self.clients, self.quiet = bench.servers, bench.clients, bench.quiet
        self.procs, self.work, self.shm = bench.procs, bench.work, bench.shm

    def warm(self, targets, https=False):
        for t in targets:
            port = self.servers.https_port(t) if https else self.servers.http_port(t)
            self.clients.wrk(port, "/1k", 16, 1, scheme="https" if https else "http")


class KeepAlive(Scenario):
    """1. HTTP/1.1 keep-alive: wrk on a 1 KiB file."""

    number, title = 1, "HTTP/1.1 keep-alive"

    def run(self):
        reps, d = self.plan["reps"], self.plan["d_h1"]
        figure = self.results.figure
        rps = figure(1, "s1_rps", "HTTP/1.1 keep-alive 1 KiB: requests/s", "req/s", "higher")
        p50 = figure(1, "s1_p50", "HTTP/1.1 keep-alive 1 KiB: p50 latency", "ms", "lower", digits=2)
        p99 = figure(1, "s1_p99", "HTTP/1.1 keep-alive 1 KiB: p99 latency", "ms", "lower", digits=2)
        cpu = figure(1, "s1_cpu", "HTTP/1.1 keep-alive 1 KiB: proxy CPU per request", "µs", "lower",
                     targets=PROXIES, digits=1)
        err = figure(1, "s1_err", "HTTP/1.1 keep-alive 1 KiB: errors", "count", "lower", chart=False)
        self.warm(TARGETS)
        for i in range(reps):
            for t in TARGETS:
                self.quiet.begin()
                c0 = self.servers.cpu_seconds(t) if t != "direct" else 0
                r = self.clients.wrk(self.servers.http_port(t), "/1k", H1_CONNS, d)
                other = self.quiet.end(f"1 {t}")
                if t != "direct":
                    cpu.add(t, (self.servers.cpu_seconds(t) - c0) / max(1, r["requests"]) * 1e6)
                rps.add(t, r["rps"])
                p50.add(t, r["p50_us"] / 1000)
                p99.add(t, r["p99_us"] / 1000)
                err.add(t, r["socket_errors"] + r["status"])
                log(f"  s1 rep {i + 1}/{reps} {t:8} {r['rps']:10.0f} req/s  p50 {r['p50_us'] / 1000:.2f} ms"
                    f"  p99 {r['p99_us'] / 1000:.2f} ms  errors {r['socket_errors'] + r['status']}  [other load {other:.2f}]")
                if t != "direct":
                    self.servers.ensure_alive(t, "scenario 1")


class Http2(Scenario):
    """2. HTTP/2 over TLS: h2load, 8 connections x 8 streams, on a 1 KiB file."""

    number, title = 2, "HTTP/2 over TLS"

    def run(self):
        reps, d = self.plan["reps"], self.plan["d_h2"]
        figure = self.results.figure
        rps = figure(2, "s2_rps", "HTTP/2 over TLS 1 KiB: requests/s", "req/s", "higher")
        p50 = figure(2, "s2_p50", "HTTP/2 over TLS 1 KiB: p50 latency", "ms", "lower", digits=2)
        p99 = figure(2, "s2_p99", "HTTP/2 over TLS 1 KiB: p99 latency", "ms", "lower", digits=2)
        cpu = figure(2, "s2_cpu", "HTTP/2 over TLS 1 KiB: proxy CPU per request", "µs", "lower",
                     targets=PROXIES, digits=1)
        err = figure(2, "s2_err", "HTTP/2 over TLS 1 KiB: failed requests", "count", "lower", chart=False)
        logfile = os.path.join(self.work, "h2load.log")
        for i in range(reps):
            for t in TARGETS:
                if os.path.exists(logfile):
                    os.unlink(logfile)
                self.quiet.begin()
                c0 = []
                r = self.clients.h2load_duration(self.servers.https_port(t), d, logfile, after_warmup=lambda: c0.append(
                    self.servers.cpu_seconds(t) if t != "direct" else 0))
                other = self.quiet.end(f"2 {t}")
                if t != "direct":
                    cpu.add(t, (self.servers.cpu_seconds(t) - c0[0]) / max(1, r["done"]) * 1e6)
                rps.add(t, r["rps"])
                p50.add(t, r["p50_us"] / 1000 if r["p50_us"] is not None else None)
                p99.add(t, r["p99_us"] / 1000 if r["p99_us"] is not None else None)
                err.add(t, r["failed"])
                self.results.tls_info.setdefault(t, {}).update(
                    {k: r[k] for k in ("protocol", "cipher", "kx", "alpn")})
                if r["alpn"] != "h2":
                    self.results.problems.append(f"{LABEL[t]}: h2load negotiated {r['alpn']}, not h2")
                p99s = f"{r['p99_us'] / 1000:.2f}" if r["p99_us"] is not None else "n/a"
                log(f"  s2 rep {i + 1}/{reps} {t:8} {r['rps']:10.0f} req/s  p99 {p99s} ms  failed {r['failed']}  [other load {other:.2f}]")
                if t != "direct":
                    self.servers.ensure_alive(t, "scenario 2")


class TlsHandshakes(Scenario):
    """3. New TLS connections: batches of full handshakes, one request each."""

    number, title = 3, "new TLS connections"

    def run(self):
        reps, d, n = self.plan["reps"], self.plan["d_tls"], self.plan["tls_batch"]
        figure = self.results.figure
        cps = figure(3, "s3_cps", "New TLS connections (1 request each): connections/s", "conn/s", "higher")
        cpu = figure(3, "s3_cpu", "New TLS connections: proxy CPU per connection", "µs", "lower",
                     targets=PROXIES, digits=0)
        err = figure(3, "s3_err", "New TLS connections: failed", "count", "lower", chart=False)
        for t in TARGETS:
            self.clients.h2load_batch(self.servers.https_port(t), 20)  # warm-up
        for i in range(reps):
            for t in TARGETS:
                ok = failed = 0
                secs = 0.0
                self.quiet.begin()
                c0 = self.servers.cpu_seconds(t) if t != "direct" else 0
                end = time.monotonic() + d
                while time.monotonic() < end:
                    b = self.clients.h2load_batch(self.servers.https_port(t), n)
                    if b is None:
                        failed += n
                        continue
                    ok += b["succeeded"]
                    failed += b["failed"]
                    secs += b["seconds"]
                    self.results.tls_info.setdefault(t, {})["handshake"] = f"{b['protocol']} {b['cipher']}"
                other = self.quiet.end(f"3 {t}")
                rate = ok / secs if secs > 0 else 0.0
                cps.add(t, rate)
                if t != "direct":
                    cpu.add(t, (self.servers.cpu_seconds(t) - c0) / max(1, ok + failed) * 1e6)
                err.add(t, failed)
                log(f"  s3 rep {i + 1}/{reps} {t:8} {rate:10.0f} conn/s  ({ok} ok, {failed} failed)  [other load {other:.2f}]")
                if t != "direct":
                    self.servers.ensure_alive(t, "scenario 3")


class LargeBodies(Scenario):
    """4. Large bodies: one large download and one large upload with curl."""

    number, title = 4, "large bodies"

    def run(self):
        reps = self.plan["big_reps"]
        gib = self.plan["big"] / (1 << 30)
        size = f"{gib:g} GiB" if gib >= 1 else f"{self.plan['big'] >> 20} MiB"
        figure = self.results.figure
        dl = figure(4, "s4_down", f"{size} streamed response: throughput", "MiB/s", "higher")
        dl_rss = figure(4, "s4_down_rss", f"{size} streamed response: proxy peak RSS", "MiB", "lower",
                        targets=PROXIES, digits=1)
        ul = figure(4, "s4_up", f"{size} upload: throughput", "MiB/s", "higher")
        ul_rss = figure(4, "s4_up_rss", f"{size} upload: proxy peak RSS", "MiB", "lower",
                        targets=PROXIES, digits=1)
        upload = os.path.join(self.shm, "upload.bin")
        for i in range(reps):
            for kind, fig, rss_fig in (("down", dl, dl_rss), ("up", ul, ul_rss)):
                for t in TARGETS:
                    self.quiet.begin()
                    if t != "direct":
                        self.servers.reset_peak(t)
                    url = f"http://127.0.0.1:{self.servers.http_port(t)}" + ("/big" if kind == "down" else "/upload/blob")
                    r = self.clients.curl_transfer(url, upload if kind == "up" else None)
                    other = self.quiet.end(f"4 {kind} {t}")
                    peak = None
                    if t != "direct":
                        peak = self.servers.rss_kib(t, "VmHWM") / 1024
                        rss_fig.add(t, peak)
                    if r["ok"]:
                        fig.add(t, r["mib_s"])
                    else:
                        fig.add(t, None)
                        fig.notes.append(f"{LABEL[t]}: {kind} failed: {r['error']}")
                        self.results.problems.append(f"{LABEL[t]}: large {kind}load failed: {r['error']}")
                    peak_s = f"peak RSS {peak:.1f} MiB" if peak is not None else ""
                    speed = f"{r['mib_s']:8.0f} MiB/s" if r.get("mib_s") else "  failed"
                    log(f"  s4 rep {i + 1}/{reps} {kind:4} {t:8} {speed}  {peak_s}  [other load {other:.2f}]")
                    if t != "direct":
                        self.servers.ensure_alive(t, f"scenario 4 ({kind}load)")
                    try:
                        os.unlink(os.path.join(self.shm, "upload", "blob"))
                    except FileNotFoundError:
                        pass


class IdleConnections(Scenario):
    """5. Idle connections: bench/hold.py holds N connections open; the
    proxy's RSS before and after, per connection. A fresh proxy each time."""

    number = 5
    UPLOAD = 1 << 20   # the body each connection carries in the `upload` variant

    @property
    def title(self):
        return f"{self.results.idle_count} idle connections"

    def run(self):
        count = self.results.idle_count
        reps = self.plan["idle_reps"]
        figure = self.results.figure
        plain = figure(5, "s5_plain", f"{count:,} idle keep-alive connections, plain: RSS per connection",
                       "KiB", "lower", targets=PROXIES, digits=1)
        tls = figure(5, "s5_tls", f"{count:,} idle keep-alive connections, TLS: RSS per connection",
                     "KiB", "lower", targets=PROXIES, digits=1)
        total = figure(5, "s5_tls_total", f"{count:,} idle TLS connections: proxy RSS", "MiB", "lower",
                       targets=PROXIES, digits=1, chart=False)
        # An idle connection's footprint must not depend on what it carried:
        # fewer connections here, since each first uploads 1 MiB.
        up_count = min(count, 1000)
        after_upload = figure(5, "s5_upload", f"{up_count:,} idle keep-alive connections after a 1 MiB "
                              "upload each, plain: RSS per connection", "KiB", "lower", targets=PROXIES,
                              digits=1)
        for i in range(reps):
            for proto, fig in (("plain", plain), ("tls", tls), ("upload", after_upload)):
                n = up_count if proto == "upload" else count
                for t in PROXIES:
                    self.measure(i, reps, proto, t, n, fig, total)

    def measure(self, i, reps, proto, t, n, fig, total):
        # a fresh process per measurement: memory freed by an earlier
        # measurement would otherwise be reused and hide the cost
        self.servers.stop_proxy(t)
        self.servers.start_proxy(t, "idle")
        https = proto == "tls"
        port = self.servers.https_port(t) if https else self.servers.http_port(t)
        self.clients.wrk(port, "/1k", 16, 1, scheme="https" if https else "http")
        time.sleep(0.5)
        self.quiet.begin()
        before = self.servers.rss_kib(t)
        h, ready, out_path = self.hold(t, proto, port, n)
        time.sleep(2)
        after = self.servers.rss_kib(t)
        other = self.quiet.end(f"5 {proto} {t}")
        closed = self.release(h, t, out_path)
        opened, failed = int(ready.group(1)), int(ready.group(2))
        per = (after - before) / opened if opened else None
        fig.add(t, per)
        if proto == "tls":
            total.add(t, after / 1024)
        self.results.idle_info[(t, proto, i)] = dict(opened=opened, failed=failed, closed=closed,
                                                     before_kib=before, after_kib=after,
                                                     seconds=float(ready.group(3)),
                                                     errors=ready.group(4))
        if failed or closed:
            self.results.problems.append(
                f"{LABEL[t]}: idle {proto}: {failed} of {n} connections failed to open "
                f"({ready.group(4)}), {closed} closed by the server while held")
        per_s = f"{per:.1f}" if per is not None else "n/a"
        log(f"  s5 rep {i + 1}/{reps} {proto:5} {t:8} RSS {before / 1024:.1f} -> {after / 1024:.1f} MiB, "
            f"{per_s} KiB/conn (opened {opened}, failed {failed}, closed while held {closed}, "
            f"{ready.group(3)} s to open)  [other load {other:.2f}]")
        self.servers.ensure_alive(t, f"scenario 5 ({proto})")

    def hold(self, t, proto, port, n):
        """Start hold.py against `port` and wait until it holds its connections:
        (its process, its READY line, the file it writes to)."""
        argv = [sys.executable, os.path.join(BENCH, "hold.py"), "--port", str(port),
                "--count", str(n), "--hold", "180"] + (["--tls"] if proto == "tls" else []) + \
            (["--upload", str(self.UPLOAD)] if proto == "upload" else [])
        out_path = os.path.join(self.work, f"hold.{t}.{proto}.out")
        with open(out_path, "wb") as out:
            h = self.procs.start(f"hold-{t}", argv, cpus=self.clients.cpus,
                                 stdin=subprocess.PIPE, stdout=out)
        deadline = time.monotonic() + 150
        while time.monotonic() < deadline and h.poll() is None:
            with open(out_path) as f:
                m = re.search(r"^READY opened=(\d+) failed=(\d+) seconds=([\d.]+) errors=(.*)$",
                              f.read(), re.M)
            if m:
                return h, m, out_path
            time.sleep(0.2)
        self.procs.stop(f"hold-{t}", sig=signal.SIGKILL)
        raise BenchError(f"hold.py against {t} did not finish opening:\n{tail(out_path)}")

    def release(self, h, t, out_path):
        """Let hold.py close its connections; how many the server had closed (None: unknown)."""
        h.stdin.close()
        try:
            h.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass
        self.procs.stop(f"hold-{t}", sig=signal.SIGKILL)
        with open(out_path) as f:
            text = f.read()
        done = re.search(r"DONE held=(\d+) closed_by_server=(\d+)", text)
        return int(done.group(2)) if done else None


class Slowloris(Scenario):
    """6. Slowloris: legitimate wrk load before and during a slowhttptest
    attack of 3x the connection cap."""

    number, title = 6, "slowloris"

    def run(self):
        reps, d = self.plan["attack_reps"], self.plan["d_attack"]
        figure = self.results.figure
        # The upstream alone under the same attack: the machine's own limit,
        # since the attacker shares the CPUs with everything else.
        frac = figure(6, "s6_frac", f"Slowloris ({ATTACK} conns vs cap {CAP}): legit req/s during / before",
                      "ratio", "higher", targets=TARGETS, digits=3)
        during = figure(6, "s6_during", "Slowloris: legit requests/s during the attack", "req/s", "higher",
                        targets=TARGETS, chart=False)
        errs = figure(6, "s6_err", "Slowloris: legit errors during the attack", "count", "lower",
                      targets=TARGETS, chart=False)
        ramp = ATTACK / ATTACK_RATE + 1.0
        for i in range(reps):
            for t in TARGETS:
                port = self.servers.http_port(t)
                self.quiet.begin()
                before = self.clients.wrk(port, "/1k", H1_CONNS, d)
                out_path = os.path.join(self.work, f"slowloris.{t}.{i}.out")
                length = int(ramp + d + 5)
                with open(out_path, "wb") as out:
                    # line-buffered, so its status survives being killed
                    self.procs.start("slowloris", [
                        "stdbuf", "-oL", "slowhttptest", "-H", "-c", str(ATTACK), "-r", str(ATTACK_RATE), "-i", "5", "-x", "24",
                        "-p", "3", "-l", str(length), "-u", f"http://127.0.0.1:{port}/1k"],
                        cpus=self.clients.cpus, stdout=out)
                time.sleep(ramp)
                dur = self.clients.wrk(port, "/1k", H1_CONNS, d)
                self.procs.stop("slowloris", sig=signal.SIGKILL)
                other = self.quiet.end(f"6 {t}")
                connected, closed = self.attack_connected(out_path)
                f = dur["rps"] / before["rps"] if before["rps"] > 0 else None
                e = dur["socket_errors"] + dur["status"]
                frac.add(t, f)
                during.add(t, dur["rps"])
                errs.add(t, e)
                self.results.attack_info[(t, i)] = dict(before=before, during=dur, connected=connected, closed=closed)
                log(f"  s6 rep {i + 1}/{reps} {t:8} before {before['rps']:8.0f} req/s, during {dur['rps']:8.0f} req/s "
                    f"({f:.3f}), errors during {e} (connect {dur['connect']}, read {dur['read']}, "
                    f"timeout {dur['timeout']}, status {dur['status']}); attacker peak connected {connected}, "
                    f"closed by server {closed}  [other load {other:.2f}]")
                if t != "direct":
                    self.servers.ensure_alive(t, "scenario 6")
                self.recover(t)

    @staticmethod
    def attack_connected(path):
        """The attacker's peak connected count and connections closed, from its status output."""
        try:
            with open(path, "rb") as f:
                text = re.sub(r"\x1b\[[0-9;]*m", "", f.read().decode(errors="replace"))
        except OSError:
            return None, None
        conn = [int(x) for x in re.findall(r"connected:\s+(\d+)", text)]
        closed = [int(x) for x in re.findall(r"closed:\s+(\d+)", text)]
        return (max(conn) if conn else None), (max(closed) if closed else None)

    def recover(self, t):
        """Wait until the proxy answers again after an attack (bounded)."""
        deadline = time.monotonic() + 40
        url = f"http://127.0.0.1:{self.servers.http_port(t)}/1k"
        while time.monotonic() < deadline:
            r = subprocess.run(["curl", "-s", "-o", "/dev/null", "--max-time", "2", "-w", "%{http_code}", url],
                               capture_output=True, text=True)
            if r.stdout.strip() == "200":
                time.sleep(1)
                return
            time.sleep(0.5)
        self.results.problems.append(f"{LABEL[t]}: still not answering 40 s after the slowloris attack ended")


class Admission(Scenario):
    """7. Admission: 4x more clients than the gate lets in, on a 50 ms upstream."""

    number, title = 7, "admission saturation"

    def run(self):
        reps, d = self.plan["reps"], self.plan["d_admission"]
        figure = self.results.figure
        rps = figure(7, "s7_rps", f"Admission ({ADMISSION_CONNS} clients, gate {GATE}, 50 ms upstream): "
                                  "requests/s", "req/s", "higher", targets=PROXIES)
        good = figure(7, "s7_good", "Admission: answered 2xx/s", "req/s", "higher", targets=PROXIES)
        p99 = figure(7, "s7_p99", "Admission: p99 latency (2xx and 503)", "ms", "lower", targets=PROXIES, digits=2)
        shed = figure(7, "s7_shed", "Admission: share shed (non-2xx)", "ratio", "higher", targets=PROXIES,
                      chart=False, digits=3)
        for t in PROXIES:
            self.clients.wrk(self.servers.http_port(t), "/slow", 16, 1)
        for i in range(reps):
            for t in PROXIES:
                self.quiet.begin()
                r = self.clients.wrk(self.servers.http_port(t), "/slow", ADMISSION_CONNS, d, timeout="5s")
                other = self.quiet.end(f"7 {t}")
                ok = r["requests"] - r["status"]
                secs = r["duration_us"] / 1e6
                rps.add(t, r["rps"])
                good.add(t, ok / secs)
                p99.add(t, r["p99_us"] / 1000)
                shed.add(t, r["status"] / r["requests"] if r["requests"] else None)
                self.results.admission_info[(t, i)] = r
                log(f"  s7 rep {i + 1}/{reps} {t:8} {r['rps']:9.0f} req/s, 2xx {ok / secs:7.0f}/s, "
                    f"shed {r['status']}, p99 {r['p99_us'] / 1000:.2f} ms, socket errors {r['socket_errors']}  [other load {other:.2f}]")
                self.servers.ensure_alive(t, "scenario 7")


# by number; driver.py's Bench.run decides the order (those on the standard
# caps, then 7 behind its gate, then 5 with raised caps)
ALL = (KeepAlive, Http2, TlsHandshakes, LargeBodies, IdleConnections, Slowloris, Admission)
