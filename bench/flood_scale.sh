#!/usr/bin/env bash
# Issue 13's end-to-end scale check: weir's CPU per accepted connection
# under a connection flood at the cap, with the cap at 1,000 and at 15,000
# (this machine's hard limit of 20,000 descriptors rules out more end to
# end; examples/registry_scale.rs covers 100,000 and 1,000,000).
#
#   bash bench/flood_scale.sh [SECONDS] [REPS]     (WEIR_BIN=path to compare another build)
#
# The flood (examples/conn_flood.rs, on core 1) keeps cap + 2,000
# half-sent heads open, so every accept at the cap evicts one; weir runs
# on core 0. Reported: accepted connections/s and weir's CPU (user +
# system, from /proc) per accepted connection, per cap, alternated.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$HERE")
cd "$ROOT"
seconds=${1:-10}
reps=${2:-3}
cargo build --profile dist --bin weir --example conn_flood >/dev/null
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$tmp"' EXIT

cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
metric() { curl -s "http://127.0.0.1:$1/metrics" | awk -v m="$2" 'index($0, m) == 1 {print $NF; exit}'; }

echo "| cap | rep | accepted/s at the cap | weir CPU µs per accepted connection | evicted in the window |"
echo "|---|---|---|---|---|"
for rep in $(seq "$reps"); do
  for cap in ${CAPS:-1000 15000}; do
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    admin=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    cat > "$tmp/weir.toml" <<TOML
[log]
level = "error"
access_log = false
[server]
workers = 1
[connections]
max = $cap
request_head_timeout = "60s"
# Only evictions recycle slots here: the pressure rule (heads closed after
# 1 s above 80 % of the cap) would otherwise keep the cap from filling.
pressure_timeout = "60s"
[admin]
address = "127.0.0.1:$admin"
[[listener]]
address = "127.0.0.1:$port"
[[route]]
upstream = "http://127.0.0.1:9"
TOML
    taskset -c 0 "${WEIR_BIN:-target/dist/weir}" run --config "$tmp/weir.toml" 2>"$tmp/weir.log" &
    pid=$!
    for _ in $(seq 100); do curl -s "http://127.0.0.1:$admin/health" >/dev/null && break; sleep 0.1; done
    tick=$(getconf CLK_TCK)
    # The flood runs long enough to fill the cap and then for the window;
    # only the window, at the cap, is measured.
    taskset -c 1 target/dist/examples/conn_flood "127.0.0.1:$port" $((cap + 2000)) $((seconds + 60)) >"$tmp/flood.json" &
    flood=$!
    for _ in $(seq 600); do
      open=$(metric $admin 'weir_connections_open'); [ "${open:-0}" -ge "$cap" ] && break; sleep 0.1
    done
    before=$(cpu $pid); acc0=$(metric $admin 'weir_connections_accepted_total'); rec0=$(metric $admin 'weir_connections_closed_total{reason="reclaimed"}')
    sleep "$seconds"
    after=$(cpu $pid); acc1=$(metric $admin 'weir_connections_accepted_total'); rec1=$(metric $admin 'weir_connections_closed_total{reason="reclaimed"}')
    kill $flood 2>/dev/null; wait $flood 2>/dev/null || true
    kill -TERM $pid 2>/dev/null || { echo "weir died:"; cat "$tmp/weir.log"; }; wait $pid 2>/dev/null || true
    python3 - "$cap" "$rep" "$before" "$after" "$tick" "$acc0" "$acc1" "$seconds" "${rec0:-0}" "${rec1:-0}" <<'PY'
import sys
cap, rep, before, after, tick, a0, a1, secs, r0, r1 = sys.argv[1:]
accepted = float(a1) - float(a0)
cpu_us = (float(after) - float(before)) / float(tick) * 1e6
print(f"| {cap} | {rep} | {accepted / float(secs):.0f} | {cpu_us / max(accepted, 1):.1f} | {float(r1) - float(r0):.0f} |")
PY
  done
done
