"""docs/passes.md is generated from the passes; it must match what the code says now."""

from __future__ import annotations

from pathlib import Path

from forge.tools.gen_pass_docs import render
from forge.transforms import FORGE_PASSES

PAGE = Path(__file__).resolve().parents[3] / "docs" / "passes.md"


def test_pass_reference_is_current() -> None:
    assert PAGE.read_text() == render(), (
        "docs/passes.md is stale: run `python -m forge.tools.gen_pass_docs > docs/passes.md`"
    )


def test_every_pass_is_documented() -> None:
    text = PAGE.read_text()
    for name in FORGE_PASSES:
        assert f"## `{name}`" in text
