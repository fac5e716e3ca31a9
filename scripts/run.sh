#!/usr/bin/env bash
# Install whatever is missing, then run the main job.
# Until `forge compile` lands (Phase 1-4 issues), the main job checks NNFactory on this
# machine and runs a pass pipeline over a sample GPT-2 attention block, printing the IR.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$ROOT/scripts/setup.sh"
BIN=${FORGE_VENV:-$ROOT/.venv}/bin
cd "$ROOT"

"$BIN/forge" doctor
"$BIN/forge-opt" test/samples/gpt2_attention.mlir -p cse,dce --time-passes
