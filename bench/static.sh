#!/usr/bin/env bash
# Static files: requests per second from weir's `kind = "static"` route and
# from nginx (`sendfile on`, one worker) serving the same directory, for a
# 1 KiB and a 100 KiB file, HTTP/1.1 keep-alive (wrk, 32 connections, one
# thread). Both servers get one worker on CPU 0, wrk runs on CPU 1. On a
# shared or 2-core machine the figures are noisy: compare them with each
# other, run by run, not with another machine's.
#   bash bench/static.sh [seconds]     (needs target/release/weir or
#   WEIR=path, nginx, wrk; apt-get install nginx wrk)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WEIR=${WEIR:-$ROOT/target/release/weir}
secs=${1:-10}
work=$(mktemp -d)
trap 'kill $(cat "$work"/pids 2>/dev/null) 2>/dev/null || true; rm -rf "$work"' EXIT
chmod 755 "$work"; mkdir -p "$work/www"
head -c 1024 /dev/urandom > "$work/www/1k.bin"
head -c 102400 /dev/urandom > "$work/www/100k.bin"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
ng=$(free_port); wp=$(free_port)
cat > "$work/nginx.conf" <<CONF
worker_processes 1; daemon off; pid $work/nginx.pid; error_log $work/error.log;
events { worker_connections 4096; }
http { access_log off; sendfile on; tcp_nopush on; include /etc/nginx/mime.types;
  server { listen 127.0.0.1:$ng; root $work/www; keepalive_requests 1000000; } }
CONF
cat > "$work/weir.toml" <<CONF
[server]
workers = 1
[connections]
max_requests = 0
[log]
access_log = false
[[listener]]
name = "web"
address = "127.0.0.1:$wp"
[[route]]
kind = "static"
root = "$work/www"
CONF
taskset -c 0 nginx -c "$work/nginx.conf" -e "$work/startup.log" & echo $! >> "$work/pids"
taskset -c 0 "$WEIR" run --config "$work/weir.toml" 2>/dev/null & echo $! >> "$work/pids"
for port in $ng $wp; do
  for _ in $(seq 100); do curl -sf -o /dev/null "http://127.0.0.1:$port/1k.bin" && break; sleep 0.05; done
done
rps() { taskset -c 1 wrk -t1 -c32 -d"${secs}s" "$1" | awk '/Requests\/sec/ {print $2}'; }
printf '%-10s %14s %14s\n' file "weir req/s" "nginx req/s"
for f in 1k.bin 100k.bin; do
  printf '%-10s %14s %14s\n' "$f" "$(rps "http://127.0.0.1:$wp/$f")" "$(rps "http://127.0.0.1:$ng/$f")"
done
