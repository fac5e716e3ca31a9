#!/usr/bin/env bash
# Create (or refresh) the project's virtual environment and build NNFactory.
# Idempotent: when nothing that decides the environment has changed, it returns in seconds.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${FORGE_VENV:-$ROOT/.venv}
PYTHON=${PYTHON:-python3}
STAMP=$VENV/.forge-setup-stamp

cd "$ROOT"
want=$(cat pyproject.toml scripts/constraints.txt scripts/setup.sh scripts/build_nnfactory.sh | sha256sum | cut -d' ' -f1)

if [ ! -x "$VENV/bin/python" ]; then
  echo "[setup] creating virtual environment $VENV"
  "$PYTHON" -m venv "$VENV"
fi

if [ "$(cat "$STAMP" 2>/dev/null)" != "$want" ]; then
  echo "[setup] installing forge and its dependencies (torch==2.13.0, xdsl, lit, filecheck, ray, ...)"
  mkdir -p "$ROOT/build"
  log=$ROOT/build/pip.log
  if ! { "$VENV/bin/python" -m pip install --disable-pip-version-check --upgrade pip \
         && "$VENV/bin/python" -m pip install --disable-pip-version-check \
             -c scripts/constraints.txt -e ".[test,distributed]"; } >"$log" 2>&1
  then
    grep -v "^WARNING: Location" "$log" | tail -n 20 >&2
    echo "[setup] error: pip failed; full log in $log" >&2
    exit 1
  fi
  bash scripts/build_nnfactory.sh "$VENV"
  echo "$want" > "$STAMP"
else
  echo "[setup] environment is up to date ($VENV)"
fi
