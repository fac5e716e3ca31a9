"""docs/first-pattern.md shows the tutorial's files verbatim (CI runs them via lit)."""

from __future__ import annotations

from pathlib import Path

DOCS = Path(__file__).resolve().parents[3] / "docs"


def test_tutorial_page_shows_the_files_that_run() -> None:
    page = (DOCS / "first-pattern.md").read_text()
    for name, fence in (("fold_double_neg.py", "python"), ("fold-double-neg.mlir", "mlir")):
        source = (DOCS / "tutorial" / name).read_text()
        assert f"```{fence}\n{source}```" in page, f"docs/first-pattern.md is out of date: {name}"
