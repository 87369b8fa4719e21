#!/usr/bin/env bash
# The frontier benchmark (bench/frontier.py says what is measured): added
# latency at concurrency 1 and requests/s under p99 bounds, for the
# upstream direct, nginx, a weir proxy route and a weir LLM route, with
# 1 KiB and 50 KiB bodies.
#
#   bash bench/frontier.sh              full run (about 9 minutes)
#   bash bench/frontier.sh --quick      a smoke run (about 2 minutes)
#   bash bench/frontier.sh --litellm    also LiteLLM 1.100.5 at concurrency 1-4
#
# Writes bench/frontier-results.md and puts it into docs/benchmarks.md
# between the `frontier-bench` markers.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$HERE")
cd "$ROOT"
args=()
for arg in "$@"; do
    case "$arg" in
        --quick) args+=(--quick) ;;
        --litellm)
            venv=${LITELLM_VENV:-$ROOT/target/tmp/litellm-venv}
            if ! "$venv/bin/python" -c "import litellm" >/dev/null 2>&1; then
                echo "installing litellm[proxy]==1.100.5 into $venv"
                python3 -m venv "$venv"
                "$venv/bin/pip" install --quiet 'litellm[proxy]==1.100.5'
            fi
            args+=(--litellm "$venv/bin/litellm") ;;
        *) echo "unknown option $arg" >&2; exit 2 ;;
    esac
done
command -v nginx >/dev/null || { apt-get install -y -q nginx >/dev/null; }
cargo build --profile dist --bin weir --example frontier --example llm_bench
ulimit -n 20000 || true

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 "$HERE/frontier.py" --out "$HERE/frontier-results.md" --tmp "$tmp" \
    --json "$HERE/frontier-runs.json" "${args[@]}"

python3 "$HERE/splice_results.py" "$ROOT/docs/benchmarks.md" "frontier-bench=$HERE/frontier-results.md"
echo "wrote bench/frontier-results.md and updated docs/benchmarks.md"
