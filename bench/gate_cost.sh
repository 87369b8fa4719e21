#!/usr/bin/env bash
# The request gate's cost on the hot path: weir's CPU per proxied request
# with max_concurrent_requests = 1024 (the default gate) and = 0 (no gate),
# alternated, 200k HTTP/1.1 keep-alive requests each (h2load --h1, fixed
# count, so CPU per request is exact). The proxy runs on CPU 0, nginx (the
# upstream) and h2load on CPU 1.
#   bash bench/gate_cost.sh [reps]     (needs target/dist/weir, nginx, h2load)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WEIR=$ROOT/target/dist/weir
reps=${1:-3}
work=$(mktemp -d)
trap 'kill $(cat "$work"/pids 2>/dev/null) 2>/dev/null || true; rm -rf "$work"' EXIT
chmod 755 "$work"; mkdir -p "$work/html"; head -c 1024 /dev/zero > "$work/html/1k"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
up=$(free_port); px=$(free_port)
cat > "$work/nginx.conf" <<CONF
worker_processes 1; daemon off; pid $work/nginx.pid; error_log $work/error.log;
events { worker_connections 4096; }
http { access_log off; server { listen 127.0.0.1:$up; root $work/html; keepalive_requests 1000000; } }
CONF
taskset -c 1 nginx -c "$work/nginx.conf" & echo $! >> "$work/pids"
for gate in 1024 0; do
  cat > "$work/weir-$gate.toml" <<CONF
[server]
workers = 1
max_concurrent_requests = $gate
[connections]
max_requests = 0
[log]
access_log = false
[[listener]]
name = "web"
address = "127.0.0.1:$px"
[[route]]
upstream = "http://127.0.0.1:$up"
CONF
done
tck=$(getconf CLK_TCK)
run() {
  taskset -c 0 "$WEIR" run --config "$work/weir-$1.toml" 2>/dev/null & local pid=$!
  for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$px/1k" && break; sleep 0.05; done
  taskset -c 1 h2load --h1 -n 20000 -c 32 -t 1 "http://127.0.0.1:$px/1k" >/dev/null 2>&1
  read -r u s < <(awk '{print $14, $15}' /proc/$pid/stat)
  taskset -c 1 h2load --h1 -n 200000 -c 32 -t 1 "http://127.0.0.1:$px/1k" > "$work/out" 2>&1
  read -r u2 s2 < <(awk '{print $14, $15}' /proc/$pid/stat)
  kill $pid; wait $pid 2>/dev/null || true
  grep -q "200000 succeeded" "$work/out" || { echo "requests failed:" >&2; cat "$work/out" >&2; exit 1; }
  echo $(( ((u2-u) + (s2-s)) * 1000000 / tck / 200000 ))
}
on=(); off=()
for i in $(seq "$reps"); do on+=("$(run 1024)"); off+=("$(run 0)"); done
med() { printf '%s\n' "$@" | sort -n | sed -n "$(( ($# + 1) / 2 ))p"; }
echo "CPU µs per request, gate 1024: ${on[*]} (median $(med "${on[@]}"))"
echo "CPU µs per request, no gate:   ${off[*]} (median $(med "${off[@]}"))"
