"""Replays every shrunk fuzz-models failure saved under test/python/regressions/models:
each spec must compile through the full pipeline and match eager PyTorch."""

from __future__ import annotations

from pathlib import Path

import pytest

from forge.devtools.fuzz_models import check, load_spec

SAVED = sorted((Path(__file__).resolve().parents[1] / "regressions" / "models").glob("*.json"))


@pytest.mark.parametrize("path", SAVED, ids=[p.stem for p in SAVED])
def test_saved_spec_matches_eager(path: Path) -> None:
    spec = load_spec(path)
    outcome = check(spec)
    assert outcome.kind == "match", f"{spec.describe()}: {outcome.detail}"
