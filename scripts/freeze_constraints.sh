#!/usr/bin/env bash
# Write scripts/constraints.txt from the project's environment: run it after
# scripts/test.sh passed there on newer releases, so that fresh set-ups (and CI) get them.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${FORGE_VENV:-$ROOT/.venv}
OUT=$ROOT/scripts/constraints.txt
{
  echo "# Versions the whole suite last passed with (scripts/test.sh); scripts/setup.sh installs within them."
  echo "# Refresh after a green run on newer releases: bash scripts/freeze_constraints.sh"
  # torch's local label (+cpu) names the wheel on this disk; the release is what pyproject pins.
  "$VENV/bin/python" -m pip freeze --exclude-editable --disable-pip-version-check 2>/dev/null \
    | sed 's/+cpu$//' | grep -v -i "^intel"
} > "$OUT"
echo "wrote $OUT ($(grep -c '==' "$OUT") pins)"
