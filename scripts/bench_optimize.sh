#!/usr/bin/env bash
# Phase 2 benchmark (not part of the tests): npu-optimize on the six full-size models
# (per-pass report, node reduction, attention layers fused, milliseconds), then the
# optimized IR of full-size GPT-2 executed against eager PyTorch.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$ROOT/scripts/setup.sh"
BIN=${FORGE_VENV:-$ROOT/.venv}/bin
"$BIN/forge" optimize
"$BIN/forge" check gpt2 --optimize --inputs 3
