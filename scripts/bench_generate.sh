#!/usr/bin/env bash
# `forge bench MODEL --generate` (not part of the tests): generation with Forge, HF eager,
# HF static cache + torch.compile and OpenVINO GenAI, side by side in one run.
#
# OpenVINO GenAI 2026.4 and optimum-intel need their own transformers, which conflict
# with Forge's pins (transformers, torch), so they live in a
# separate venv, $FORGE_GENAI_VENV (default build/venv-genai), built here and rebuilt only
# when this script changes. `forge bench --generate` runs its GenAI rows with that venv's
# python; without it those rows say why and the rest of the table still prints.
#
# Usage: scripts/bench_generate.sh [MODEL] [forge bench options]   (default: gpt2)
#        scripts/bench_generate.sh --setup-only                    (just build the venv)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
FORGE_BIN=${FORGE_VENV:-$ROOT/.venv}/bin
GENAI_VENV=${FORGE_GENAI_VENV:-$ROOT/build/venv-genai}
STAMP=$GENAI_VENV/.forge-genai-stamp
cd "$ROOT"

bash "$ROOT/scripts/setup.sh"

want=$(sha256sum "$ROOT/scripts/bench_generate.sh" | cut -d' ' -f1)
if [ "$(cat "$STAMP" 2>/dev/null)" != "$want" ]; then
  echo "[genai] building $GENAI_VENV (openvino-genai, optimum-intel; a few minutes)"
  # The interpreter Forge's venv was made from: same Python version in both venvs.
  base=$("$FORGE_BIN/python" -c 'import sys; print(sys._base_executable)')
  mkdir -p "$ROOT/build"
  log=$ROOT/build/pip-genai.log
  "$base" -m venv --clear "$GENAI_VENV"
  # torch first, at Forge's pin (a CPU wheel where pip is set up to find one), so that
  # optimum-intel does not pull a newer torch with its CUDA libraries. torchvision, which
  # optimum-intel pulls in, is removed again: PyPI's build does not load with the CPU
  # torch ("operator torchvision::nms does not exist" breaks transformers' import).
  # The last step checks that both import.
  if ! { "$GENAI_VENV/bin/python" -m pip install --disable-pip-version-check -q --upgrade pip \
         && "$GENAI_VENV/bin/python" -m pip install --disable-pip-version-check -q "torch==2.13.0" \
         && "$GENAI_VENV/bin/python" -m pip install --disable-pip-version-check -q \
              "torch==2.13.0" "openvino-genai==2026.4.*" "openvino-tokenizers==2026.4.*" \
              "openvino==2026.4.*" "optimum-intel[openvino]==2.2.*" "nncf>=3.3" \
         && "$GENAI_VENV/bin/python" -m pip uninstall --disable-pip-version-check -q -y torchvision \
         && "$GENAI_VENV/bin/python" -c "import openvino_genai, optimum.exporters.openvino"
       } >"$log" 2>&1
  then
    grep -v "^WARNING: Location" "$log" | tail -n 20 >&2
    echo "[genai] error: pip failed; full log in $log (the GenAI rows will say so)" >&2
    [ "${1:-}" = "--setup-only" ] && exit 1
  else
    echo "$want" > "$STAMP"
  fi
fi
[ "${1:-}" = "--setup-only" ] && exit 0

model=${1:-gpt2}
[ $# -gt 0 ] && shift
exec "$FORGE_BIN/forge" bench "$model" --generate --genai-python "$GENAI_VENV/bin/python" "$@"
