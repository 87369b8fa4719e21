#!/usr/bin/env bash
# weir's gzip beside nginx's gzip, at the same level, on the same upstream
# body: requests per second and proxy CPU per request, one worker each,
# wrk asking `Accept-Encoding: gzip` (and, for weir, also without it: what
# compression adds to the same proxying).
#
#   bash bench/compress.sh            20 s per measurement
#   bash bench/compress.sh --quick    5 s per measurement
#
# LEVEL (default 6) is the gzip level of both; BODY_KIB (default 100) the
# size of the page the origin serves; WEIR_BIN a weir binary to measure
# instead of building the dist profile. Writes bench/compress-results.md.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$HERE")
cd "$ROOT"
DURATION=20
[[ "${1:-}" == "--quick" ]] && DURATION=5
LEVEL=${LEVEL:-6}
BODY_KIB=${BODY_KIB:-100}
CONNS=${CONNS:-32}
command -v nginx >/dev/null || apt-get install -y -q nginx >/dev/null
command -v wrk >/dev/null || apt-get install -y -q wrk >/dev/null
if [[ -z "${WEIR_BIN:-}" ]]; then
    cargo build --profile dist --bin weir
    WEIR_BIN="${CARGO_TARGET_DIR:-$ROOT/target}/dist/weir"
fi

tmp=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$tmp"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
ORIGIN=$(free_port); NGINX=$(free_port); WEIR=$(free_port)

# A page that compresses like HTML does: markup around varied text.
mkdir -p "$tmp/www"
python3 - "$tmp/www/page.html" "$BODY_KIB" <<'PY'
import random, sys
random.seed(7)
words = "the of and weir proxy upstream client request response stream page list item table row cell link style script data value".split()
out = ["<!doctype html><html><head><title>bench</title></head><body><table>"]
size = 0
while size < int(sys.argv[2]) * 1024:
    row = "<tr><td class=\"c%d\">%s</td><td><a href=\"/item/%d\">%s</a></td></tr>\n" % (
        random.randrange(9), " ".join(random.choice(words) for _ in range(8)),
        random.randrange(100000), random.choice(words))
    out.append(row); size += len(row)
out.append("</table></body></html>\n")
open(sys.argv[1], "w").write("".join(out))
PY

nginx_conf() { # name, server block
    cat >"$tmp/$1.conf" <<CONF
daemon off;
master_process off;
worker_processes 1;
pid $tmp/$1.pid;
error_log $tmp/$1-error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    types { text/html html; }
    client_body_temp_path $tmp/$1-body;
    proxy_temp_path $tmp/$1-proxy;
    fastcgi_temp_path $tmp/$1-fcgi;
    uwsgi_temp_path $tmp/$1-uwsgi;
    scgi_temp_path $tmp/$1-scgi;
    $2
}
CONF
}
nginx_conf origin "server { listen 127.0.0.1:$ORIGIN; root $tmp/www; }"
nginx_conf proxy "upstream origin { server 127.0.0.1:$ORIGIN; keepalive 64; }
    server { listen 127.0.0.1:$NGINX;
        gzip on; gzip_comp_level $LEVEL; gzip_proxied any; gzip_vary on;
        location / { proxy_pass http://origin; proxy_http_version 1.1; proxy_set_header Connection \"\"; } }"
cat >"$tmp/weir.toml" <<TOML
[server]
workers = 1
[log]
access_log = false
[[listener]]
name = "web"
address = "127.0.0.1:$WEIR"
[[route]]
upstream = "http://127.0.0.1:$ORIGIN"
[route.compress]
algorithms = ["gzip"]
gzip_level = $LEVEL
TOML

nginx -p "$tmp" -c "$tmp/origin.conf" & pids+=($!)
nginx -p "$tmp" -c "$tmp/proxy.conf" & nginx_pid=$!; pids+=($nginx_pid)
"$WEIR_BIN" run --config "$tmp/weir.toml" 2>"$tmp/weir.log" & weir_pid=$!; pids+=($weir_pid)
for port in "$ORIGIN" "$NGINX" "$WEIR"; do
    for _ in $(seq 100); do curl -sf -o /dev/null "http://127.0.0.1:$port/page.html" && break; sleep 0.1; done
done

# Both proxies must answer gzip that decodes to the page.
for port in "$NGINX" "$WEIR"; do
    curl -sf -H 'Accept-Encoding: gzip' "http://127.0.0.1:$port/page.html" | gzip -dc | cmp - "$tmp/www/page.html"
done
gz_size() { curl -sf -H 'Accept-Encoding: gzip' "http://127.0.0.1:$1/page.html" | wc -c; }

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
TICK=$(getconf CLK_TCK)
results=()
measure() { # label, port, pid, accept-encoding header or ""
    local hdr=() before after out rps reqs
    [[ -n "$4" ]] && hdr=(-H "Accept-Encoding: $4")
    before=$(cpu_ticks "$3")
    out=$(wrk -t1 -c"$CONNS" -d"${DURATION}s" "${hdr[@]}" "http://127.0.0.1:$2/page.html")
    after=$(cpu_ticks "$3")
    rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
    reqs=$(awk '/requests in/ {print $1}' <<<"$out")
    local us=$(python3 -c "print(round(($after - $before) / $TICK / max($reqs, 1) * 1e6))")
    results+=("| $1 | ${4:-none} | $rps | $us |")
}
measure "nginx gzip $LEVEL" "$NGINX" "$nginx_pid" gzip
measure "weir gzip $LEVEL" "$WEIR" "$weir_pid" gzip
measure "weir, uncompressed" "$WEIR" "$weir_pid" ""

{
    echo "### Compression: weir's gzip beside nginx's (noisy machine)"
    echo
    echo "One worker each, $CONNS connections, ${DURATION}s per row, a ${BODY_KIB} KiB HTML page from an"
    echo "nginx origin (compressed to $(gz_size "$NGINX") bytes by nginx, $(gz_size "$WEIR") by weir)."
    echo "CPU is the proxy process's user + system time per request. $(nproc) cores shared with"
    echo "the origin and wrk, and with other work: the figures are noisy, compare them within a run."
    echo
    echo "| proxy | Accept-Encoding | requests/s | CPU µs/request |"
    echo "|---|---|---|---|"
    printf '%s\n' "${results[@]}"
} | tee "$HERE/compress-results.md"
