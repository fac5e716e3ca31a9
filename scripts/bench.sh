#!/usr/bin/env bash
# Side-by-side benchmark (not part of the tests): GPT-2 compile time and latency for
# Forge, Forge with granularity=op, torch eager, torch.compile (inductor), OpenVINO CPU
# and ONNX Runtime CPU, fp32, in one run with ratios; then PNG plots of the results.
# Installs the optional `bench` extra (openvino, onnxruntime, onnxscript) into the venv.
# Extra arguments go to `forge bench` (e.g. --runs 80 --backends forge,onnxruntime).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$ROOT/scripts/setup.sh"
BIN=${FORGE_VENV:-$ROOT/.venv}/bin
cd "$ROOT"
"$BIN/python" -m pip install --disable-pip-version-check -q -e ".[bench]" 2>&1 \
  | grep -v "^WARNING: Location" || true
mkdir -p build
"$BIN/forge" bench gpt2 --json build/bench.json "$@"
"$BIN/forge" report --bench build/bench.json --bench-only -o build/report
