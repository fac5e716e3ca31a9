#!/usr/bin/env bash
# Side-by-side benchmark (not part of the tests): GPT-2 compile time, latency and peak RSS
# for Forge, Forge with granularity=op, torch eager, torch.compile (inductor), OpenVINO CPU
# and ONNX Runtime CPU at their newest releases,
# fp32, in one run with ratios; then PNG plots of the results.
#
# The peers are measured at their newest releases, which may run ahead of Forge's pins
# (NNFactory is built on openvino 2026.4.1), so they run in a bench venv, $FORGE_BENCH_VENV (default
# build/venv-bench): torch at Forge's pin, transformers at the version Forge's venv has (so
# every backend runs the same model code), the newest openvino, onnxruntime and onnxscript,
# and Forge itself without its dependencies (the children build the model with Forge's
# loading code). Built here, rebuilt when this script or Forge's transformers changes.
# The `bench` extra (openvino at NNFactory's version, onnxruntime, onnxscript) goes into
# Forge's venv: the host profile reads OpenVINO's thread setting through its Python API.
#
# Usage: scripts/bench.sh [MODEL] [forge bench options]   (default gpt2; e.g. --runs 80
#        --backends forge,onnxruntime, or llama-3.2-1b --compile-repeats 1)
#        scripts/bench.sh --setup-only             (just build the bench venv)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=${FORGE_VENV:-$ROOT/.venv}/bin
BENCH_VENV=${FORGE_BENCH_VENV:-$ROOT/build/venv-bench}
STAMP=$BENCH_VENV/.forge-bench-stamp
cd "$ROOT"
bash "$ROOT/scripts/setup.sh"
"$BIN/python" -m pip install --disable-pip-version-check -q -e ".[bench]" 2>&1 \
  | grep -v "^WARNING: Location" || true
mkdir -p build

transformers=$("$BIN/python" -c 'import transformers; print(transformers.__version__)')
want=$( { cat "$ROOT/scripts/bench.sh"; echo "$transformers"; } | sha256sum | cut -d' ' -f1)
if [ "$(cat "$STAMP" 2>/dev/null)" != "$want" ]; then
  echo "[bench] building $BENCH_VENV (newest openvino, onnxruntime, onnxscript; a few minutes)"
  # The interpreter Forge's venv was made from: same Python version in both venvs.
  base=$("$BIN/python" -c 'import sys; print(sys._base_executable)')
  log=$ROOT/build/pip-bench.log
  "$base" -m venv --clear "$BENCH_VENV"
  # torch first, at Forge's pin (a CPU wheel where pip is set up to find one), so that
  # nothing pulls a newer torch with its CUDA libraries. The last step checks the imports
  # a child makes there: Forge's loading code and the two peers.
  if ! { "$BENCH_VENV/bin/python" -m pip install --disable-pip-version-check -q --upgrade pip \
         && "$BENCH_VENV/bin/python" -m pip install --disable-pip-version-check -q "torch==2.13.0" \
         && "$BENCH_VENV/bin/python" -m pip install --disable-pip-version-check -q \
              "torch==2.13.0" "transformers==$transformers" "xdsl==0.75.0" numpy \
              "openvino>=2026.4" onnxruntime onnxscript onnx \
         && "$BENCH_VENV/bin/python" -m pip install --disable-pip-version-check -q --no-deps -e "$ROOT" \
         && "$BENCH_VENV/bin/python" -I -c \
              "import openvino, onnxruntime, onnxscript, forge.devtools.bench"
       } >"$log" 2>&1
  then
    grep -v "^WARNING: Location" "$log" | tail -n 20 >&2
    echo "[bench] error: pip failed; full log in $log (the newest peers' rows will say so)" >&2
    [ "${1:-}" = "--setup-only" ] && exit 1
  else
    echo "$want" > "$STAMP"
  fi
fi
[ "${1:-}" = "--setup-only" ] && exit 0

MODEL=gpt2
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then MODEL=$1; shift; fi  # a model name first
"$BIN/forge" bench "$MODEL" --bench-python "$BENCH_VENV/bin/python" --json build/bench.json "$@"
"$BIN/forge" report --bench build/bench.json --bench-only -o build/report
