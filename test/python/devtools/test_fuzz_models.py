"""Differential fuzzing: random modules compiled through the full pipeline (NNFactory
segments + CPU callables) match eager PyTorch."""

from __future__ import annotations

from forge.devtools.fuzz_models import RandomModule, fuzz_models


def test_random_modules_match_eager() -> None:
    result = fuzz_models(cases=12, seed=100)
    assert result.counts["match"] == 12, result.failures
    assert result.worst <= 1e-5


def test_the_grammar_covers_attention_and_mlps() -> None:
    kinds = {kind for seed in range(40) for kind in RandomModule(seed).kinds}
    assert {"mlp", "norm", "attention", "shuffle", "softmax"} <= kinds


def test_a_mismatch_is_reported() -> None:
    result = fuzz_models(cases=2, seed=100, tolerance=-1.0, shrink_failures=False)
    assert result.counts["mismatch"] == 2 and len(result.failures) == 2
