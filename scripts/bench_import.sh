#!/usr/bin/env bash
# Phase 1 benchmark (not part of the tests): capture + import of the six full-size
# models (op counts, export and import seconds from the same run), then the imported
# IR of full-size GPT-2 and Llama-3.2-1B executed against eager PyTorch.
# Needs ~16 GiB of RAM (LFM2-2.6B in fp32); the 8B model is built on the meta device.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$ROOT/scripts/setup.sh"
BIN=${FORGE_VENV:-$ROOT/.venv}/bin
"$BIN/forge" models
"$BIN/forge" check gpt2 llama-3.2-1b --inputs 3
