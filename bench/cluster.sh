#!/usr/bin/env bash
# What sharing limits through Redis adds to a request (bench/cluster.py says
# how it is measured).
#
#   bash bench/cluster.sh            full run (about 2 minutes)
#   bash bench/cluster.sh --quick    one short repetition
#
# Writes bench/cluster-results.md and puts it into docs/benchmarks.md
# between the `cluster-bench` markers.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$HERE")
cd "$ROOT"
command -v redis-server >/dev/null || apt-get install -y -q redis-server >/dev/null
command -v nginx >/dev/null || apt-get install -y -q nginx >/dev/null
cargo build --profile dist --bin weir --example llm_bench
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 "$HERE/cluster.py" --out "$HERE/cluster-results.md" --tmp "$tmp" "$@"
python3 "$HERE/splice_results.py" "$ROOT/docs/benchmarks.md" "cluster-bench=$HERE/cluster-results.md"
echo "wrote bench/cluster-results.md and updated docs/benchmarks.md"
