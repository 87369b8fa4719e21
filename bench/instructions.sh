#!/usr/bin/env bash
# Instructions per proxied request, counted by valgrind's callgrind: exact
# and repeatable whatever else this shared machine is doing, so a lever
# worth a few percent of CPU shows (the harness's wall-clock CPU figures
# are noisier than that). weir (workers = 1) proxies HTTP/1.1 keep-alive
# GETs of 1 KiB to nginx; h2load sends a fixed count. Two runs, of N and
# 6N requests; the difference divided by 5N cancels start-up and shutdown.
#   bash bench/instructions.sh [N]        (WEIR_BIN= to measure another build;
#                                          H2=1: HTTP/2 over TLS from the client;
#                                          LLM=1: an LLM route, below;
#                                          AUTH=token|key, with LLM=1: the client
#                                          presents a static client token, or a
#                                          runtime key from [database];
#                                          TRACES=1: [telemetry.traces] on, every request
#                                          sampled, exported over OTLP/HTTP to nginx;
#                                          KEEP=DIR: keep the callgrind files there)
# LLM=1 measures a `kind = "anthropic"` route instead: nginx answers a
# Messages JSON (bench/frontier.py's), and the frontier load generator
# (FRONTIER_BIN=, default target/dist/examples/frontier) POSTs 1 KiB
# Messages requests at concurrency 1, a fixed count of them.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WEIR=${WEIR_BIN:-$ROOT/target/dist/weir}
n=${1:-2000}
work=$(mktemp -d)
trap 'kill $(cat "$work"/pids 2>/dev/null) 2>/dev/null || true; rm -rf "$work"' EXIT
chmod 755 "$work"; mkdir -p "$work/html"; head -c 1024 /dev/zero > "$work/html/1k"
upstream_location="root $work/html;"
route=""
if [[ -n "${LLM:-}" ]]; then
  (cd "$ROOT/bench" && python3 -c "
import frontier
open('$work/body.json', 'w').write(frontier.body(1024))
open('$work/answer.json', 'w').write(frontier.ANSWER)")
  answer=$(sed -e 's/\\/\\\\/g' -e "s/'/\\\\'/g" "$work/answer.json")
  upstream_location="location / { default_type application/json; return 200 '$answer'; }"
  case "${AUTH:-}" in
    "") route_keys="" ;;
    token) route_keys="" ; export WEIR_BENCH_TOKEN=sk-bench
      route_tail=$'[[route.clients]]\nname = "bench"\ntoken_env = "WEIR_BENCH_TOKEN"' ;;
    key) route_keys="runtime_keys = true" ;;
    *) echo "AUTH is token or key" >&2; exit 2 ;;
  esac
  route=$'name = "anthropic"\nkind = "anthropic"\n'"$route_keys"$'\n[[route.upstreams]]\nname = "static"\nurl'
fi
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
up=$(free_port); px=$(free_port)
if [[ "${AUTH:-}" == key ]]; then
  # Keys are made through the running weir's admin API, into its SQLite
  # file (kept across the two runs: the key made in the first serves both).
  ad=$(free_port); printf admin-bench > "$work/admin-token"
  top=$'[admin]\naddress = "127.0.0.1:'"$ad"$'"\ntoken_file = "'"$work"$'/admin-token"\n[database]\nurl = "sqlite:'"$work"$'/weir.db"'
fi
cat > "$work/nginx.conf" <<CONF
worker_processes 1; daemon off; pid $work/nginx.pid; error_log $work/error.log;
events { worker_connections 4096; }
http { access_log off; client_body_temp_path $work/body;
  server { listen 127.0.0.1:$up; $upstream_location keepalive_requests 1000000;
    location = /v1/traces { default_type application/x-protobuf; return 200 ''; } } }
CONF
nginx -c "$work/nginx.conf" & echo $! >> "$work/pids"
cat > "$work/weir.toml" <<CONF
[server]
workers = 1
[connections]
max_requests = 0
[log]
access_log = false
level = "error"
${top:-}
$(if [[ -n "${TRACES:-}" ]]; then printf '[telemetry.traces]\nendpoint = "http://127.0.0.1:%s/v1/traces"\nsampling_ratio = 1.0' "$up"; fi)
[[listener]]
name = "web"
address = "127.0.0.1:$px"
$(if [[ -n "${H2:-}" ]]; then echo "tls = { certificates = [{ cert = \"$work/cert.pem\", key = \"$work/key.pem\" }] }"; fi)
[[route]]
${route:-upstream} = "http://127.0.0.1:$up"
${route_tail:-}
CONF
if [[ -n "${H2:-}" ]]; then
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=localhost \
    -keyout "$work/key.pem" -out "$work/cert.pem" 2>/dev/null
  url="https://127.0.0.1:$px/1k"; client=(h2load); probe=(curl -sk -o /dev/null)
else
  url="http://127.0.0.1:$px/1k"; client=(h2load --h1); probe=(curl -s -o /dev/null)
fi
if [[ -n "${LLM:-}" ]]; then
  url="http://127.0.0.1:$px/v1/messages"
  headers=("x-api-key: sk-bench" "anthropic-version: 2023-06-01")
  probe=(curl -sf -o /dev/null -H "${headers[0]}" -H "${headers[1]}" --data-binary @"$work/body.json")
  # Called as h2load is: -n N -c 1 URL.
  frontier() {
    FRONTIER_REQUESTS=$2 "${FRONTIER_BIN:-$ROOT/target/dist/examples/frontier}" "$5" \
      "$work/body.json" 3600 1 "${headers[@]}"
  }
  client=(frontier); c1=1
fi
count() {
  valgrind --tool=callgrind --callgrind-out-file="$work/cg.$1" "$WEIR" run --config "$work/weir.toml" 2>"$work/vg.$1" &
  local pid=$!
  if [[ "${AUTH:-}" == key ]]; then
    for _ in $(seq 1500); do curl -sf -o /dev/null -H "authorization: Bearer admin-bench" "http://127.0.0.1:$ad/admin/keys" && break; sleep 0.2; done
    [[ -s "$work/key" ]] || curl -sf -H "authorization: Bearer admin-bench" -H "content-type: application/json" \
      --data '{"user":"bench"}' "http://127.0.0.1:$ad/admin/keys" \
      | python3 -c 'import json,sys; print(json.load(sys.stdin)["key"], end="")' > "$work/key"
    headers[0]="x-api-key: $(cat "$work/key")"
    probe=(curl -sf -o /dev/null -H "${headers[0]}" -H "${headers[1]}" --data-binary @"$work/body.json")
  fi
  # Under valgrind, and on a busy machine, start-up takes a while.
  for _ in $(seq 1500); do "${probe[@]}" "$url" && break; sleep 0.2; done
  "${client[@]}" -n "$1" -c "${c1:-4}" "$url" >"$work/h2load.$1" 2>&1
  kill -TERM $pid; wait $pid 2>/dev/null || true
  if [[ -n "${LLM:-}" ]] && ! grep -q "\"requests\":$1,.*\"errors\":0," "$work/h2load.$1"; then
    echo "load failed: $(cat "$work/h2load.$1")" >&2; exit 1
  fi
  if [[ -z "${LLM:-}" ]] && ! grep -q " $1 succeeded, 0 failed" "$work/h2load.$1"; then
    echo "load failed: $(cat "$work/h2load.$1")" >&2; exit 1
  fi
  if [[ -n "${KEEP:-}" ]]; then mkdir -p "$KEEP"; cp "$work/cg.$1" "$KEEP/"; fi
  awk '/^summary:|^totals:/ {print $2; exit}' "$work/cg.$1"
}
small=$(count "$n"); large=$(count $((6 * n)))
python3 -c "print(f'instructions per request: {($large - $small) / (5 * $n):.0f}  (Ir {$small} for $n, {$large} for $((6 * n)))')"
