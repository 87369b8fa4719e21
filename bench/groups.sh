#!/usr/bin/env bash
# One slow server in a group of three: what each proxy's load balancing
# makes of it. Two fast servers (nginx, 1 KiB static) and one that answers
# every request 50 ms late (bench/slow_upstream.py), behind
#   weir     servers = [a, b, slow]   (balance = "p2c_ewma", the default)
#   nginx    upstream { least_conn; ... } with keep-alive to the servers
#   haproxy  backend with balance leastconn
# Load: wrk -t1 -c32 GET /1k for 8 s, keep-alive, the targets alternated
# per run; the report is the median of RUNS runs of requests/s and p50/p99.
# How many requests the slow server got is read from its own counter.
#   bash bench/groups.sh [RUNS]      (default 3)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WEIR=${WEIR_BIN:-$ROOT/target/dist/weir}
runs=${1:-3}
for tool in wrk nginx haproxy python3; do
  command -v "$tool" >/dev/null || { echo "needs $tool (apt-get install wrk nginx haproxy)"; exit 1; }
done
[ -x "$WEIR" ] || (cd "$ROOT" && cargo build --profile dist --quiet)
work=$(mktemp -d)
cleanup() {
  pkill -f "$work/" 2>/dev/null || true
  sleep 0.3
  pkill -9 -f "$work/" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
chmod 755 "$work"; mkdir -p "$work/html"; head -c 1024 /dev/zero > "$work/html/1k"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 100); do (echo > /dev/tcp/127.0.0.1/$1) 2>/dev/null && return 0; sleep 0.05; done; return 1; }

a=$(free_port); b=$(free_port); slow=$(free_port)
cat > "$work/upstream.conf" <<CONF
worker_processes 1; daemon off; pid $work/upstream.pid; error_log $work/upstream.err;
events { worker_connections 4096; }
http { access_log off;
  server { listen 127.0.0.1:$a; root $work/html; keepalive_requests 1000000; }
  server { listen 127.0.0.1:$b; root $work/html; keepalive_requests 1000000; } }
CONF
nginx -c "$work/upstream.conf" >"$work/upstream.out" 2>&1 &
# The slow server counts the requests it gets and writes the count to a
# file on SIGUSR1, read before and after each run.
cat > "$work/slow.py" <<'PY'
import asyncio, sys, signal
sys.path.insert(0, sys.argv[3])
import slow_upstream as s
count = 0
class Counting(s.Slow):
    def data_received(self, data):
        global count
        count += data.count(b"\r\n\r\n")
        super().data_received(data)
def dump(*_):
    open(sys.argv[4], "w").write(str(count))
async def main():
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGUSR1, dump)
    server = await loop.create_server(lambda: Counting(float(sys.argv[2])), "127.0.0.1", int(sys.argv[1]))
    await server.serve_forever()
asyncio.run(main())
PY
python3 "$work/slow.py" "$slow" 0.05 "$ROOT/bench" "$work/slow.count" >"$work/slow.out" 2>&1 &
slow_pid=$!
wait_port "$a"; wait_port "$b"; wait_port "$slow"

start() {
  local target=$1 port=$2
  case $target in
    weir)
      cat > "$work/weir.toml" <<CONF
[server]
workers = 1
watch_config = false
[log]
access_log = false
[connections]
max = 4096
[[listener]]
name = "web"
address = "127.0.0.1:$port"
[[route]]
name = "group"
servers = ["http://127.0.0.1:$a", "http://127.0.0.1:$b", "http://127.0.0.1:$slow"]
CONF
      "$WEIR" run --config "$work/weir.toml" >"$work/weir.log" 2>&1 &
      echo $! ;;
    nginx)
      cat > "$work/proxy.conf" <<CONF
worker_processes 1; daemon off; pid $work/proxy.pid; error_log $work/proxy.err;
events { worker_connections 4096; }
http { access_log off;
  upstream u { least_conn; server 127.0.0.1:$a; server 127.0.0.1:$b; server 127.0.0.1:$slow; keepalive 64; }
  server { listen 127.0.0.1:$port; keepalive_requests 1000000;
    location / { proxy_pass http://u; proxy_http_version 1.1; proxy_set_header Connection ""; } } }
CONF
      nginx -c "$work/proxy.conf" >"$work/nginx.out" 2>&1 &
      echo $! ;;
    haproxy)
      cat > "$work/haproxy.cfg" <<CONF
global
    nbthread 1
    maxconn 4096
defaults
    mode http
    option http-keep-alive
    timeout connect 5s
    timeout server 60s
    timeout client 30s
    timeout http-keep-alive 60s
frontend fe
    bind 127.0.0.1:$port
    default_backend be
backend be
    balance leastconn
    server a 127.0.0.1:$a
    server b 127.0.0.1:$b
    server slow 127.0.0.1:$slow
CONF
      haproxy -f "$work/haproxy.cfg" >"$work/haproxy.out" 2>&1 &
      echo $! ;;
  esac
}

slow_count() {
  rm -f "$work/slow.count"
  kill -USR1 "$slow_pid"
  for _ in $(seq 50); do [ -s "$work/slow.count" ] && break; sleep 0.02; done
  cat "$work/slow.count"
}

results="$work/results"
for run in $(seq "$runs"); do
  for target in weir nginx haproxy; do
    port=$(free_port)
    pid=$(start "$target" "$port")
    wait_port "$port"
    before=$(slow_count)
    wrk -t1 -c32 -d8s --latency "http://127.0.0.1:$port/1k" >"$work/wrk.out" 2>&1 || true
    after=$(slow_count)
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    rps=$(awk '/^Requests\/sec/{print $2}' "$work/wrk.out")
    total=$(grep -o '[0-9]* requests in' "$work/wrk.out" | grep -o '^[0-9]*' || echo 0)
    p50=$(awk '$1=="50%"{print $2}' "$work/wrk.out")
    p99=$(awk '$1=="99%"{print $2}' "$work/wrk.out")
    errors=$(grep -o 'Non-2xx or 3xx responses: [0-9]*' "$work/wrk.out" | grep -o '[0-9]*$' || echo 0)
    to_slow=$((after - before))
    echo "$target run $run: $rps req/s, p50 $p50, p99 $p99, to the slow server $to_slow of $total, non-2xx $errors"
    echo "$target $rps $p50 $p99 $to_slow $total" >> "$results"
  done
done

echo
echo "medians of $runs runs (wrk -t1 -c32, 8 s; one of three servers 50 ms slow):"
python3 - "$results" <<'PY'
import sys, statistics
def ms(t):
    for unit, f in (("us", 0.001), ("ms", 1.0), ("s", 1000.0)):
        if t.endswith(unit) and not (unit == "s" and t.endswith(("us", "ms"))):
            return float(t[: -len(unit)]) * f
    return float(t)
rows = {}
for line in open(sys.argv[1]):
    t, rps, p50, p99, slow, total = line.split()
    rows.setdefault(t, []).append((float(rps), ms(p50), ms(p99), int(slow) / max(int(total), 1)))
print("| proxy | requests/s | p50 ms | p99 ms | share to the slow server |")
print("|---|---|---|---|---|")
for t, r in rows.items():
    med = lambda i: statistics.median(x[i] for x in r)
    print(f"| {t} | {med(0):,.0f} | {med(1):.2f} | {med(2):.2f} | {med(3):.1%} |")
PY
