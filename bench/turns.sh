#!/usr/bin/env bash
# A Codex turn's time through weir over its WebSocket transport vs over
# HTTP with SSE: the same Responses request, answered by nginx with the
# same canned Responses stream, sent one turn after another on one
# connection (examples/turns.rs). Runs alternate (ws, sse, ws, sse, …)
# so machine noise falls on both; prints each run and the medians.
#   bash bench/turns.sh [TURNS] [RUNS]     (WEIR_BIN=, TURNS_BIN= to measure other builds)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WEIR=${WEIR_BIN:-$ROOT/target/release/weir}
TURNS=${TURNS_BIN:-$ROOT/target/release/examples/turns}
n=${1:-2000}; runs=${2:-5}
work=$(mktemp -d)
trap 'kill $(cat "$work"/pids 2>/dev/null) 2>/dev/null || true; rm -rf "$work"' EXIT
chmod 755 "$work"
python3 - "$work/stream.sse" <<'PY'
import json, sys
text = ["Hello", " from", " the", " provider", "."]
item = {"id": "msg_1", "type": "message", "role": "assistant", "status": "completed",
        "content": [{"type": "output_text", "text": "".join(text), "annotations": []}]}
resp = {"id": "resp_1", "object": "response", "model": "gpt-5-codex", "output": []}
events = [("response.created", {"response": dict(resp, status="in_progress")}),
          ("response.output_item.added", {"output_index": 0, "item": dict(item, status="in_progress", content=[])}),
          ("response.content_part.added", {"item_id": "msg_1", "output_index": 0, "content_index": 0,
                                           "part": {"type": "output_text", "text": "", "annotations": []}})]
events += [("response.output_text.delta", {"item_id": "msg_1", "output_index": 0, "content_index": 0, "delta": t})
           for t in text]
events += [("response.output_item.done", {"output_index": 0, "item": item}),
           ("response.completed", {"response": dict(resp, status="completed", output=[item],
                                    usage={"input_tokens": 12, "output_tokens": 5, "total_tokens": 17})})]
with open(sys.argv[1], "w") as f:
    for i, (name, data) in enumerate(events):
        f.write(f"event: {name}\ndata: {json.dumps(dict(type=name, sequence_number=i, **data))}\n\n")
PY
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
up=$(free_port); px=$(free_port)
cat > "$work/nginx.conf" <<CONF
worker_processes 1; daemon off; pid $work/nginx.pid; error_log $work/error.log;
events { worker_connections 1024; }
http { access_log off; client_body_temp_path $work/body;
  server { listen 127.0.0.1:$up; keepalive_requests 1000000;
    # A file is served to GET only: a POST's 405 is answered with it too.
    location /v1/responses { default_type text/event-stream; alias $work/stream.sse;
      error_page 405 =200 \$uri; } } }
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
[[listener]]
name = "web"
address = "127.0.0.1:$px"
[[route]]
name = "codex"
kind = "openai"
[[route.upstreams]]
name = "canned"
url = "http://127.0.0.1:$up"
api_key_env = "HOME"
CONF
taskset -c 0 "$WEIR" run --config "$work/weir.toml" 2>"$work/weir.log" & echo $! >> "$work/pids"
for _ in $(seq 200); do curl -sf -o /dev/null -H 'content-type: application/json' \
  --data '{"model":"gpt-5-codex","input":"hi","stream":true}' "http://127.0.0.1:$px/v1/responses" && break; sleep 0.1; done
for r in $(seq "$runs"); do
  for mode in ws sse; do
    taskset -c 1 "$TURNS" "$mode" "127.0.0.1:$px" "$n" | tee -a "$work/runs.jsonl"
  done
done
python3 - "$work/runs.jsonl" <<'PY'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
for mode in ("ws", "sse"):
    rs = [r for r in runs if r["mode"] == mode]
    assert all(r["errors"] == 0 for r in rs), rs
    print(f"{mode}: median p50 {statistics.median(r['p50_us'] for r in rs)} µs, "
          f"median p99 {statistics.median(r['p99_us'] for r in rs)} µs over {len(rs)} runs")
ws = statistics.median(r["p50_us"] for r in runs if r["mode"] == "ws")
sse = statistics.median(r["p50_us"] for r in runs if r["mode"] == "sse")
print(f"a turn over WebSocket minus over SSE, median p50: {ws - sse:+.0f} µs")
PY
