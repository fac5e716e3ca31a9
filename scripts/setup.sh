#!/usr/bin/env bash
# Create (or refresh) the project's virtual environment and build NNFactory.
# Idempotent: when nothing that decides the environment has changed, it returns in seconds.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${FORGE_VENV:-$ROOT/.venv}
PYTHON=${PYTHON:-python3}
STAMP=$VENV/.forge-setup-stamp

cd "$ROOT"
want=$(cat pyproject.toml scripts/setup.sh scripts/build_nnfactory.sh | sha256sum | cut -d' ' -f1)

if [ ! -x "$VENV/bin/python" ]; then
  echo "[setup] creating virtual environment $VENV"
  "$PYTHON" -m venv "$VENV"
fi

if [ "$(cat "$STAMP" 2>/dev/null)" != "$want" ]; then
  echo "[setup] installing forge and its dependencies (torch==2.13.0, xdsl, lit, filecheck, ...)"
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip 2>&1 | grep -v "^WARNING: Location" || true
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check -e ".[test]" 2>&1 \
    | grep -v "^WARNING: Location" || true
  "$VENV/bin/python" -c "import torch, xdsl, forge" \
    || { echo "[setup] error: the Python dependencies did not install" >&2; exit 1; }
  bash scripts/build_nnfactory.sh "$VENV"
  echo "$want" > "$STAMP"
fi
