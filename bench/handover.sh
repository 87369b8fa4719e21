#!/usr/bin/env bash
# Requests lost across a hand-over, and the p99 across it: keep-alive
# clients (wrk -t1 -c20, GET of 1 KiB through the proxy to nginx) while the
# proxy is replaced mid-run, the way each is replaced in production:
#   weir     SIGUSR2 (binary upgrade: the new process adopts the sockets,
#            the old one drains)
#   nginx    USR2 (new master on the inherited sockets), then QUIT to the old
#   haproxy  a new process started with -sf <old pid> (soft stop)
# "lost" is wrk's read + write errors: a request written on a connection
# that was then closed unanswered (connect errors are counted apart: a
# refused connect was never written and a client retries it).
#   bash bench/handover.sh [RUNS]      (default 5; targets alternate per run)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WEIR=${WEIR_BIN:-$ROOT/target/dist/weir}
runs=${1:-5}
for tool in wrk nginx haproxy; do
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
up=$(free_port)
cat > "$work/upstream.conf" <<CONF
worker_processes 1; daemon off; pid $work/upstream.pid; error_log $work/upstream.err;
events { worker_connections 4096; }
http { access_log off; server { listen 127.0.0.1:$up; root $work/html; keepalive_requests 1000000; } }
CONF
nginx -c "$work/upstream.conf" >"$work/upstream.out" 2>&1 &

wait_port() { for _ in $(seq 100); do (echo > /dev/tcp/127.0.0.1/$1) 2>/dev/null && return 0; sleep 0.05; done; return 1; }
wait_port "$up"

# Start the proxy under test on $2; echo its pid.
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
name = "up"
upstream = "http://127.0.0.1:$up"
CONF
      "$WEIR" run --config "$work/weir.toml" >"$work/weir.log" 2>&1 &
      echo $! ;;
    nginx)
      # Daemonised, as in production: a foreground nginx ignores USR2.
      rm -f "$work/proxy.pid" "$work/proxy.pid.oldbin"
      cat > "$work/proxy.conf" <<CONF
worker_processes 1; daemon on; pid $work/proxy.pid; error_log $work/proxy.err;
events { worker_connections 4096; }
http { access_log off;
  upstream u { server 127.0.0.1:$up; keepalive 64; }
  server { listen 127.0.0.1:$port; keepalive_requests 1000000;
    location / { proxy_pass http://u; proxy_http_version 1.1; proxy_set_header Connection ""; } } }
CONF
      nginx -c "$work/proxy.conf" >"$work/nginx.out" 2>&1
      for _ in $(seq 100); do [ -s "$work/proxy.pid" ] && break; sleep 0.02; done
      cat "$work/proxy.pid" ;;
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
    server u 127.0.0.1:$up
CONF
      haproxy -f "$work/haproxy.cfg" -p "$work/haproxy.pid" >"$work/haproxy.out" 2>&1 &
      echo $! ;;
  esac
}

# Replace the running proxy ($2 = its pid) the way its users do.
hand_over() {
  local target=$1 pid=$2
  case $target in
    weir) kill -USR2 "$pid" ;;
    nginx)
      kill -USR2 "$pid"
      for _ in $(seq 100); do [ -f "$work/proxy.pid.oldbin" ] && break; sleep 0.02; done
      sleep 0.5
      kill -QUIT "$pid" ;;
    haproxy)
      haproxy -f "$work/haproxy.cfg" -p "$work/haproxy.pid" -sf "$pid" >>"$work/haproxy.out" 2>&1 & ;;
  esac
}

results="$work/results"
for run in $(seq "$runs"); do
  for target in weir nginx haproxy; do
    port=$(free_port)
    pid=$(start "$target" "$port")
    wait_port "$port"
    wrk -t1 -c20 -d6s --latency "http://127.0.0.1:$port/1k" >"$work/wrk.out" 2>&1 &
    wrk_pid=$!
    sleep 3
    hand_over "$target" "$pid"
    wait "$wrk_pid" || true
    # Did the hand-over happen? (A run without one would prove nothing.)
    case $target in
      weir) grep -q "the new process is ready" "$work/weir.log" && handed=yes || handed=NO ;;
      nginx) [ "$(cat "$work/proxy.pid" 2>/dev/null)" != "$pid" ] && handed=yes || handed=NO ;;
      haproxy) [ "$(cat "$work/haproxy.pid" 2>/dev/null)" != "$pid" ] && handed=yes || handed=NO ;;
    esac
    socket=$(grep -o 'Socket errors:.*' "$work/wrk.out" || true)
    num() { echo "$socket" | grep -o "$1 [0-9]*" | grep -o '[0-9]*' || echo 0; }
    connect=$(num connect); read=$(num read); write=$(num write); timeout=$(num timeout)
    non2xx=$(grep -o 'Non-2xx or 3xx responses: [0-9]*' "$work/wrk.out" | grep -o '[0-9]*$' || echo 0)
    total=$(grep -o '[0-9]* requests in' "$work/wrk.out" | grep -o '^[0-9]*' || echo 0)
    p99=$(awk '$1=="99%"{print $2}' "$work/wrk.out")
    echo "$target run $run (handed over: $handed): requests $total, lost $((read + write)), refused $connect, timeouts $timeout, non-2xx $non2xx, p99 $p99"
    echo "$target $((read + write)) $connect $non2xx $p99" >> "$results"
    case $target in
      weir) pkill -f "$work/weir.toml" || true ;;
      nginx) pkill -f "$work/proxy.conf" || true ;;
      haproxy) pkill -f "$work/haproxy.cfg" || true ;;
    esac
    sleep 1
  done
done

echo
echo "| proxy | lost per run (median, max) | refused connects (median) | non-2xx (median) | p99 across the hand-over (median) |"
echo "|---|---|---|---|---|"
for target in weir nginx haproxy; do
  python3 - "$results" "$target" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.startswith(sys.argv[2] + " ")]
lost = [int(r[1]) for r in rows]; refused = [int(r[2]) for r in rows]; bad = [int(r[3]) for r in rows]
def ms(v):
    for unit, f in (("us", 0.001), ("ms", 1), ("s", 1000)):
        if v.endswith(unit) and v[:-len(unit)].replace(".", "", 1).isdigit():
            return float(v[:-len(unit)]) * f
    return float("nan")
p99 = [ms(r[4]) for r in rows if len(r) > 4]
print(f"| {sys.argv[2]} | {statistics.median(lost):g} ({max(lost)}) | {statistics.median(refused):g} | {statistics.median(bad):g} | {statistics.median(p99):.2f} ms |")
PY
done
