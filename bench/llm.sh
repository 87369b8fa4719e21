#!/usr/bin/env bash
# LLM route benchmark: weir vs LiteLLM's proxy over the same mock provider,
# against that provider direct (bench/llm.py says what is measured).
#
#   bash bench/llm.sh            full run (about 10 minutes on 2 cores)
#   bash bench/llm.sh --quick    one short repetition (about 3 minutes)
#   bash bench/llm.sh --translation-only [--quick]
#                                only the translation scenario (no LiteLLM)
#
# Builds target/dist/weir and the llm_bench example, installs
# litellm[proxy]==1.100.5 into a virtual environment (LITELLM_VENV, default
# target/tmp/litellm-venv) if missing, runs the scenarios, writes
# bench/llm-results.md and puts it into docs/benchmarks.md between the
# `llm-bench` markers (the main harness includes the same file).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$HERE")
cd "$ROOT"
quick=()
only=()
for arg in "$@"; do
    case "$arg" in
        --quick) quick=(--quick) ;;
        --translation-only) only=(--translation-only) ;;
    esac
done

venv=${LITELLM_VENV:-$ROOT/target/tmp/litellm-venv}
if [ "${#only[@]}" -eq 0 ] && ! "$venv/bin/python" -c "import litellm" >/dev/null 2>&1; then
    echo "installing litellm[proxy]==1.100.5 into $venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet 'litellm[proxy]==1.100.5'
fi
cargo build --profile dist --bin weir --example llm_bench

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 "$HERE/llm.py" --out "$HERE/llm-results.md" --trans-out "$HERE/translation-results.md" \
    --tmp "$tmp" --litellm "$venv/bin/litellm" "${quick[@]}" "${only[@]}"

# Each results file goes into docs/benchmarks.md between its markers.
python3 "$HERE/splice_results.py" "$ROOT/docs/benchmarks.md" \
    "llm-bench=$HERE/llm-results.md" "translation-bench=$HERE/translation-results.md"
echo "wrote bench/*-results.md and updated docs/benchmarks.md"
