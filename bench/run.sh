#!/usr/bin/env bash
# weir benchmark harness: weir vs nginx vs HAProxy on loopback.
#
#   bash bench/run.sh            full run (under 15 minutes on 2 cores)
#   bash bench/run.sh --quick    smoke run (under 3 minutes)
#   options: --workers N (default 1), --skip-build, --scenarios 1,2,... (a subset, for development),
#            --out-md FILE --out-png FILE (default docs/benchmarks.md, docs/benchmarks.png),
#            --save-results FILE (raw results as JSON; `python3 bench/driver.py --render FILE` rewrites the report)
#
# Installs what is missing (apt: nginx haproxy wrk nghttp2-client slowhttptest;
# pip: matplotlib), builds target/dist/weir, then hands over to
# bench/driver.py. Every server is a foreground process started here, with its
# files under a temporary directory; the exit trap ends all of them. The
# system's nginx/haproxy configuration and services are never used.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$HERE")

driver_args=()
skip_build=0
while (($#)); do
    case "$1" in
        --quick) driver_args+=(--quick) ;;
        --workers|--scenarios|--out-md|--out-png|--save-results)
            [[ $# -ge 2 ]] || { echo "$1 needs a value" >&2; exit 2; }
            driver_args+=("$1" "$2"); shift ;;
        --skip-build) skip_build=1 ;;
        -h|--help) awk 'NR > 1 && /^#/ { print; next } NR > 1 { exit }' "$0"; exit 0 ;;
        *) echo "unknown option: $1 (try --help)" >&2; exit 2 ;;
    esac
    shift
done

log() { printf '[%(%H:%M:%S)T] %s\n' -1 "$*"; }

# ---- dependencies ------------------------------------------------------------
missing=()
for pair in nginx:nginx haproxy:haproxy wrk:wrk h2load:nghttp2-client slowhttptest:slowhttptest \
            curl:curl openssl:openssl taskset:util-linux; do
    command -v "${pair%%:*}" >/dev/null 2>&1 || missing+=("${pair#*:}")
done
if ((${#missing[@]})); then
    if [[ $(id -u) -ne 0 ]]; then
        echo "missing: ${missing[*]} (run as root, or install them)" >&2
        exit 1
    fi
    log "installing ${missing[*]}"
    # Debian starts a package's service on install; keep the system nginx and
    # haproxy stopped (policy-rc.d exit 101 = "not allowed"), unless the
    # machine already has a policy.
    policy_added=0
    if [[ ! -e /usr/sbin/policy-rc.d ]]; then
        printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
        chmod 755 /usr/sbin/policy-rc.d
        policy_added=1
    fi
    export DEBIAN_FRONTEND=noninteractive
    rc=0
    { apt-get update -qq && apt-get install -y -qq "${missing[@]}"; } || rc=$?
    if ((policy_added)); then rm -f /usr/sbin/policy-rc.d; fi
    ((rc == 0)) || { echo "apt-get failed ($rc)" >&2; exit 1; }
fi
if ! python3 -c 'import matplotlib' 2>/dev/null; then
    log "installing matplotlib"
    python3 -m pip install --quiet matplotlib
fi

# ---- weir --------------------------------------------------------------------
if ((skip_build == 0)); then
    log "cargo build --profile dist"
    (cd "$ROOT" && cargo build --profile dist --quiet)
fi
WEIR="$ROOT/target/dist/weir"
[[ -x $WEIR ]] || { echo "no $WEIR (build failed?)" >&2; exit 1; }

# ---- limits, temporary directories, cleanup ------------------------------------
hard=$(ulimit -Hn)
if [[ $hard == unlimited ]]; then hard=65536; fi
ulimit -n "$hard"

WORK=$(mktemp -d /tmp/weir-bench.XXXXXX)
SHM_BASE=/dev/shm
[[ -d $SHM_BASE && -w $SHM_BASE ]] || SHM_BASE=/tmp
SHM=$(mktemp -d "$SHM_BASE/weir-bench-data.XXXXXX")

DRIVER_PID=
cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    # First let the driver stop what it started (it handles SIGTERM).
    if [[ -n $DRIVER_PID ]] && kill -0 "$DRIVER_PID" 2>/dev/null; then
        kill -TERM "$DRIVER_PID" 2>/dev/null || true
        for _ in $(seq 1 150); do
            kill -0 "$DRIVER_PID" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "$DRIVER_PID" 2>/dev/null || true
    fi
    # Then anything left (the driver was killed?): only the recorded pids, and
    # only if they still run the same program.
    if [[ -f $WORK/pids ]]; then
        local pid comm sig left
        for sig in TERM KILL; do
            left=0
            while read -r pid comm; do
                [[ -r /proc/$pid/comm ]] || continue
                [[ $(cat "/proc/$pid/comm" 2>/dev/null) == "$comm" ]] || continue
                left=1
                for child in $(pgrep -P "$pid" 2>/dev/null || true); do
                    kill "-$sig" "$child" 2>/dev/null || true
                done
                kill "-$sig" "$pid" 2>/dev/null || true
            done < "$WORK/pids"
            if ((left == 0)); then break; fi
            if [[ $sig == TERM ]]; then sleep 1; fi
        done
    fi
    if [[ ${KEEP_WORK:-0} == 1 ]]; then
        log "kept $WORK"
    else
        rm -rf "$WORK"
    fi
    rm -rf "$SHM"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

log "fd limit $(ulimit -n); work dir $WORK"
# In the background, so that a signal to this script runs the trap at once
# (bash delays traps until a foreground child exits).
python3 "$HERE/driver.py" --work "$WORK" --shm "$SHM" --weir "$WEIR" "${driver_args[@]}" &
DRIVER_PID=$!
wait "$DRIVER_PID"
