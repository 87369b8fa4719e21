"""The servers of a bench/driver.py run: the files and certificate they
serve, the common upstream (nginx, plus bench/slow_upstream.py), and nginx,
HAProxy and weir as proxies, each from its template in bench/conf/ filled
for a profile (standard caps, idle connections, admission gate); and what
/proc says about a running proxy (CPU time, RSS)."""

import os
import re
import sys

from plan import BENCH, CAP, CONF, GATE, LABEL, SLOW_DELAY
from procs import (BenchError, children, log, pid_cpu_seconds, run, status_kib, tail,
                   wait_port)


def render(template, values, dest):
    """bench/conf/TEMPLATE with every @KEY@ replaced, written to `dest`."""
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


def make_files(work, shm, big):
    """The files served and uploaded (on tmpfs) and one self-signed RSA-2048
    certificate for every TLS listener; returns (cert, key, cert+key) paths."""
    for d in ("www", "upload", "body"):
        os.makedirs(os.path.join(shm, d), exist_ok=True)
    # nginx workers run as nobody: let them read the files and write uploads
    os.chmod(work, 0o755)
    os.chmod(shm, 0o755)
    os.chmod(os.path.join(shm, "www"), 0o755)
    os.chmod(os.path.join(shm, "upload"), 0o777)
    os.chmod(os.path.join(shm, "body"), 0o777)
    with open(os.path.join(shm, "www", "1k"), "wb") as f:
        f.write(os.urandom(1024))
    # sparse files on tmpfs: zeros, no memory used, no disk read in the way
    run(["truncate", "-s", str(big), os.path.join(shm, "www", "big")], 10)
    run(["truncate", "-s", str(big), os.path.join(shm, "upload.bin")], 10)
    for p in ("www/1k", "www/big"):
        os.chmod(os.path.join(shm, p), 0o644)
    cert = os.path.join(work, "cert.pem")
    key = os.path.join(work, "key.pem")
    pem = os.path.join(work, "cert+key.pem")
    run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
         "-keyout", key, "-out", cert, "-subj", "/CN=localhost",
         "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"], 60)
    with open(pem, "w") as out:
        for p in (cert, key):
            with open(p) as f:
                out.write(f.read())
    os.chmod(key, 0o644)
    return cert, key, pem


def weir_log_summary(work):
    """weir's log over the run: (lines, panic lines, the ten most frequent
    ERROR/WARN messages with counts), or None if there is no log."""
    path = os.path.join(work, "weir", "log")
    try:
        with open(path, errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    panics = [ln for ln in lines if "panicked" in ln or "panic" in ln.lower()]
    levels = {}
    for ln in lines:
        m = re.search(r"\b(ERROR|WARN)\b\s+(.*)$", re.sub(r"\x1b\[[0-9;]*m", "", ln))
        if m:
            msg = re.sub(r"\b\d{1,3}(\.\d{1,3}){3}(:\d+)?\b", "ADDR", m.group(2))
            key = f"{m.group(1)} {msg[:160]}"
            levels[key] = levels.get(key, 0) + 1
    return len(lines), panics, sorted(levels.items(), key=lambda kv: -kv[1])[:10]


class Servers:
    """The upstreams and proxies of one run, on the ports picked for it."""

    def __init__(self, procs, results, work, shm, weir, workers, nofile, cpus_proxy, cpus_client, port):
        self.procs, self.results = procs, results
        self.work, self.shm, self.weir = work, shm, weir
        self.workers, self.nofile = workers, nofile
        self.cpus_proxy, self.cpus_client = cpus_proxy, cpus_client
        self.port = port
        self.idle_caps = None   # the caps of the `idle` profile, set once the fd limit is known
        self.cert = self.key = self.pem = None

    def setup_files(self, big):
        self.cert, self.key, self.pem = make_files(self.work, self.shm, big)

    def http_port(self, target):
        return self.port["up_http"] if target == "direct" else self.port[f"{target}_http"]

    def https_port(self, target):
        return self.port["up_https"] if target == "direct" else self.port[f"{target}_https"]

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
        self.results.problems.append(f"{LABEL[name]} exited with status {p.returncode} during {context}; "
                                     f"last log lines:\n{tail(p.log_path, 20)}")
        log(f"!! {name} died during {context} (status {p.returncode}); restarting it")
        profile = getattr(p, "profile", "standard")
        self.procs.live.pop(name, None)
        self.start_proxy(name, profile)
        return False

    def weir_accepts_gate(self):
        """Whether `weir check` takes `max_concurrent_requests` (and its message)."""
        d = os.path.join(self.work, "weir")
        os.makedirs(d, exist_ok=True)
        v = self.profile("admission")
        conf = render("weir.toml", dict(DIR=d, HTTP_PORT=1, HTTPS_PORT=2, UP_PORT=3, SLOW_PORT=4,
                                        CERT=self.cert, KEY=self.key, WORKERS=self.workers, NOFILE=self.nofile,
                                        KEEPALIVE="60s", MAXCONN=CAP, WEIR_SERVER_EXTRA=v["WEIR_SERVER_EXTRA"]),
                      os.path.join(d, "weir.gate-check.toml"))
        r = run([self.weir, "check", "--config", conf], 30, check=False)
        return r.returncode == 0, (r.stdout + r.stderr).strip()

    # ---- a running proxy, as /proc sees it ----

    def pids(self, name):
        p = self.procs.live[name]
        return [p.pid] + children(p.pid)

    def rss_kib(self, name, key="VmRSS"):
        return sum(status_kib(pid, key) for pid in self.pids(name))

    def cpu_seconds(self, name):
        """User + system CPU time of the proxy's processes (all threads)."""
        return sum(pid_cpu_seconds(pid) for pid in self.pids(name))

    def reset_peak(self, name):
        for pid in self.pids(name):
            try:
                with open(f"/proc/{pid}/clear_refs", "w") as f:
                    f.write("5")  # resets VmHWM to the current RSS
            except OSError as e:
                raise BenchError(f"cannot reset peak RSS of {name}: {e}") from e
