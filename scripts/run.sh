#!/usr/bin/env bash
# Install whatever is missing, then run the main job.
# Until `forge compile` lands (the executor issue), the main job checks NNFactory on this
# machine, runs Phase 2 (npu-optimize) over full-size GPT-2 and prints its per-pass
# report, and shows the IR of a GPT-2 attention block after the pipeline.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$ROOT/scripts/setup.sh"
BIN=${FORGE_VENV:-$ROOT/.venv}/bin
cd "$ROOT"

"$BIN/forge" doctor
echo "[run] GPT-2 124M, seq 128: torch.export -> npu dialect -> npu-optimize"
"$BIN/forge" optimize gpt2
echo "[run] a GPT-2 attention block after -p npu-optimize"
"$BIN/forge-opt" test/samples/gpt2_attention.mlir -p npu-optimize --pass-statistics
