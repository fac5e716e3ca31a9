#!/usr/bin/env bash
# Install whatever is missing, then run every test: ruff, mypy, the lit/FileCheck suites,
# pytest.
# Exits non-zero if any of them fails (all of them run regardless).
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$ROOT/scripts/setup.sh" || exit 1
BIN=${FORGE_VENV:-$ROOT/.venv}/bin
cd "$ROOT"

status=0
echo "== ruff"
"$BIN/ruff" check . && "$BIN/ruff" format --check . || status=1
echo "== mypy (scripts/typecheck.sh)"
bash "$ROOT/scripts/typecheck.sh" || status=1
echo "== lit (FileCheck suites under test/)"
"$BIN/lit" -sv test/ || status=1
echo "== pytest (test/python)"
"$BIN/pytest" test/python || status=1
exit $status
