"""Replays every shrunk whole-transformer failure saved under
test/python/regressions/transformers by `forge fuzz-models --family transformers`: each
must compile, generate and match eager, as must two fixed cases (a chunked prefill among
them), so the test checks something however many files are saved."""

from __future__ import annotations

from pathlib import Path

import pytest

from forge.devtools.fuzz_transformers import TransformerSpec, check, generate, load_spec

SAVED = sorted(
    (Path(__file__).resolve().parents[1] / "regressions" / "transformers").glob("*.json")
)
FIXED_SEEDS = (6, 14)
"""With transformers 5.24: a Phi-3 with GQA, its 19-token prompt in prefill chunks of 4,
and a StarCoder2 with linear RoPE, a sliding window of 3 and a 15-token prompt."""


def _specs() -> list[tuple[str, TransformerSpec | Path]]:
    saved: list[tuple[str, TransformerSpec | Path]] = [(p.stem, p) for p in SAVED]
    return saved + [(f"seed-{seed}", generate(seed)) for seed in FIXED_SEEDS]


@pytest.mark.parametrize(("name", "case"), _specs(), ids=[n for n, _ in _specs()])
def test_saved_spec_matches_eager(name: str, case: TransformerSpec | Path) -> None:
    spec = load_spec(case) if isinstance(case, Path) else case
    outcome = check(spec)
    assert outcome.kind == "match", f"{name}: {spec.describe()}: {outcome.detail}"
