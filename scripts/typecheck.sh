#!/usr/bin/env bash
# mypy on Forge's package (settings: [tool.mypy] in pyproject.toml). The top-level folders
# map into the `forge` namespace (pyproject's package-dir), which mypy cannot follow, so
# the package is laid out as symlinks under build/typecheck/ and the paths in mypy's
# messages are mapped back to the checkout's.
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=${FORGE_VENV:-$ROOT/.venv}/bin
TREE=$ROOT/build/typecheck
rm -rf "$TREE" && mkdir -p "$TREE/forge"
for entry in "$ROOT"/forge/*; do ln -s "$entry" "$TREE/forge/$(basename "$entry")"; done
for folder in dialects transforms conversion tools; do ln -s "$ROOT/$folder" "$TREE/forge/$folder"; done
cd "$ROOT"
"$BIN/mypy" --config-file pyproject.toml --cache-dir build/mypy-cache build/typecheck/forge 2>&1 \
  | sed -E -e 's#^build/typecheck/forge/(dialects|transforms|conversion|tools)/#\1/#' \
      -e 's#^build/typecheck/##'
