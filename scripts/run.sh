#!/usr/bin/env bash
# Install whatever is missing, then run the main job: compile GPT-2 (124M, seq 128) with
# the full pipeline (torch.export -> npu dialect -> Phase 2 -> placement, scheduling,
# buffers -> NNFactory graphs + CPU callables), run it on a random prompt, and print
# the report: per-pass table, buffers and transitions, compile time by phase, latency
# and the comparison with eager PyTorch. `forge doctor` first checks NNFactory here;
# then GPT-2 generates 16 tokens (prefill + decode over a static KV cache), checked
# against eager `model.generate`.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$ROOT/scripts/setup.sh"
BIN=${FORGE_VENV:-$ROOT/.venv}/bin
cd "$ROOT"

"$BIN/forge" doctor
"$BIN/forge" compile gpt2 --seq 128 --runs 10
"$BIN/forge" generate gpt2 --max-new-tokens 16 --prompt-len 20 --check
