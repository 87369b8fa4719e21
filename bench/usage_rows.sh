#!/usr/bin/env bash
# What usage rows cost a request: the same LLM route at RATE requests/s
# (open loop, half streaming, examples/llm_bench.rs) through weir without
# a database, with its usage rows in SQLite, and with them in PostgreSQL
# (where Debian's is installed: a cluster made here with initdb, fsync on).
# The three instances run side by side on core 0, one loaded at a time,
# runs alternated (off, sqlite, postgres, off, …) so machine noise falls
# on all; the mock provider and the load on core 1. Each run checks that
# every answered request left a row (weir_usage_rows_written_total).
#   bash bench/usage_rows.sh [RATE] [SECONDS] [RUNS]   (WEIR_BIN=, BENCH_BIN= for other builds)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WEIR=${WEIR_BIN:-$ROOT/target/release/weir}
BENCH=${BENCH_BIN:-$ROOT/target/release/examples/llm_bench}
rate=${1:-1000}; secs=${2:-10}; runs=${3:-5}
work=$(mktemp -d)
chmod 755 "$work"
trap 'kill $(cat "$work"/pids 2>/dev/null) 2>/dev/null || true; sleep 0.5; rm -rf "$work"' EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 300); do (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return; sleep 0.1; done; echo "port $1 never opened" >&2; exit 1; }

mock=$(free_port)
taskset -c 1 "$BENCH" mock "$mock" 0 2>"$work/mock.log" & echo $! >> "$work/pids"
wait_port "$mock"

modes=(off sqlite)
pgbin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)
if [ -n "$pgbin" ] && [ -x "$pgbin/initdb" ]; then
  modes+=(postgres)
  # PostgreSQL refuses to run as root: the cluster belongs to nobody then.
  as() { if [ "$(id -u)" = 0 ]; then setpriv --reuid=nobody --regid=nogroup --clear-groups "$@"; else "$@"; fi; }
  mkdir -m 777 "$work/pg"; echo bench > "$work/pg/pw"; chmod 644 "$work/pg/pw"
  as "$pgbin/initdb" -D "$work/pg/data" -U weir --auth=scram-sha-256 -E UTF8 --pwfile="$work/pg/pw" >/dev/null
  pg=$(free_port)
  as "$pgbin/postgres" -D "$work/pg/data" -p "$pg" -k "$work/pg" -c listen_addresses=127.0.0.1 \
    >"$work/pg.log" 2>&1 & echo $! >> "$work/pids"
  wait_port "$pg"
fi

declare -A port admin pid
for mode in "${modes[@]}"; do
  port[$mode]=$(free_port); admin[$mode]=$(free_port)
  case $mode in
    off) db="" ;;
    sqlite) db=$'[database]\nurl = "sqlite:'"$work"'/usage.db"' ;;
    postgres) db=$'[database]\nurl = "postgres://weir:bench@127.0.0.1:'"$pg"'/postgres"' ;;
  esac
  cat > "$work/$mode.toml" <<CONF
[server]
workers = 1
[log]
access_log = false
level = "warn"
[admin]
address = "127.0.0.1:${admin[$mode]}"
$db
[[listener]]
name = "web"
address = "127.0.0.1:${port[$mode]}"
[[route]]
name = "openai"
kind = "openai"
path = "/v1"
[[route.upstreams]]
name = "mock"
url = "http://127.0.0.1:$mock"
CONF
  taskset -c 0 "$WEIR" run --config "$work/$mode.toml" 2>"$work/$mode.log" & echo $! >> "$work/pids"
  pid[$mode]=$!
  wait_port "${port[$mode]}"
done

# A warm-up second each: connections to the mock and the database open.
for mode in "${modes[@]}"; do
  taskset -c 1 "$BENCH" load "http://127.0.0.1:${port[$mode]}" /v1/chat/completions "$rate" 1 0.5 >/dev/null
done
# weir's CPU time (all its threads, user + system), in clock ticks.
cpu() { awk '{print $14 + $15}' "/proc/${pid[$1]}/stat"; }
rows() { curl -sf "http://127.0.0.1:${admin[$1]}/metrics" | awk '/^weir_usage_rows_written_total/ {s+=$2} END {print s+0}'; }
for r in $(seq "$runs"); do
  for mode in "${modes[@]}"; do
    before=$(rows "$mode"); cpu0=$(cpu "$mode")
    out=$(taskset -c 1 "$BENCH" load "http://127.0.0.1:${port[$mode]}" /v1/chat/completions "$rate" "$secs" 0.5)
    # Rows are written in batches off the request path: wait for the last.
    answered=$(python3 -c 'import json,sys; print(sum(json.loads(sys.argv[1])["statuses"].values()))' "$out")
    for _ in $(seq 100); do
      [ "$mode" = off ] || [ $(( $(rows "$mode") - before )) -ge "$answered" ] && break; sleep 0.1
    done
    echo "{\"mode\":\"$mode\",\"run\":$r,\"rows\":$(( $(rows "$mode") - before )),\"cpu_ticks\":$(( $(cpu "$mode") - cpu0 )),\"load\":$out}" | tee -a "$work/runs.jsonl"
  done
done

python3 - "$work/runs.jsonl" "$rate" "$secs" <<'PY'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
rate, secs = sys.argv[2], sys.argv[3]
med = lambda xs: statistics.median(xs)
print(f"\n{rate} requests/s for {secs} s, half streaming; medians of {max(r['run'] for r in runs)} alternated runs; "
      f"load average {open('/proc/loadavg').read().split()[0]} at the end")
print("| usage rows | answered/s | errors | rows written | weir CPU µs/request | json total p99 ms | stream first p99 ms | stream total p99 ms |")
print("|---|---|---|---|---|---|---|---|")
hz = __import__("os").sysconf("SC_CLK_TCK")
base = {}
for mode in dict.fromkeys(r["mode"] for r in runs):
    rs = [r for r in runs if r["mode"] == mode]
    row = {k: med([r["load"][kind][f] for r in rs]) for k, kind, f in
           [("j", "json", "total_p99_ms"), ("sf", "stream", "first_p99_ms"), ("st", "stream", "total_p99_ms")]}
    base = base or row
    d = lambda k: "" if row is base else f" ({row[k] - base[k]:+.2f})"
    answered = sum(sum(r["load"]["statuses"].values()) for r in rs)
    ok = sum(r["load"]["statuses"].get("200", 0) for r in rs)
    cpu = med([r["cpu_ticks"] / hz * 1e6 / max(1, sum(r["load"]["statuses"].values())) for r in rs])
    rows = "—" if mode == "off" else f"{sum(r['rows'] for r in rs)} of {answered}"
    print(f"| {mode} | {med([r['load']['answered_per_s'] for r in rs]):.0f} | "
          f"{sum(r['load']['errors'] for r in rs) + answered - ok} | {rows} | {cpu:.1f} | "
          f"{row['j']:.2f}{d('j')} | {row['sf']:.2f}{d('sf')} | {row['st']:.2f}{d('st')} |")
PY
