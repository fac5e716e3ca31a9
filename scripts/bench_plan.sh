#!/usr/bin/env bash
# Phases 3-4 benchmark (not part of the tests): forge-pipeline on the six full-size models:
# placement, vregs, buffers, rho_buf, planned vs lower-bound bytes, transitions, time.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$ROOT/scripts/setup.sh"
"${FORGE_VENV:-$ROOT/.venv}/bin/forge" plan
