"""The one rule every comparison with eager is judged by (forge.runtime.agreement)."""

from __future__ import annotations

import math

import torch

from forge.runtime.agreement import (
    Agreement,
    Sample,
    agreement,
    difference,
    judge,
    judge_samples,
)


def test_difference_counts_moved_nan_and_inf_as_infinite() -> None:
    nan, inf = math.nan, math.inf
    eager = torch.tensor([nan, inf, -inf, 1.0, 2.0])
    assert float(difference(eager, eager.clone()).max()) == 0.0
    for wrong in ([0.0, inf, -inf, 1.0, 2.0], [nan, 3e38, -inf, 1.0, 2.0], [nan, inf, inf, 1, 2]):
        assert float(difference(eager, torch.tensor(wrong)).max()) == inf
    assert float(difference(eager, torch.tensor([nan, inf, -inf, 1.5, 2.0])).max()) == 0.5


def test_fp32_rule_limit_and_lost_nan() -> None:
    assert judge(Agreement(1e-5, 1.0), "fp32").ok
    assert not judge(Agreement(2e-5, 1.0), "fp32").ok  # no noise measure given
    lost = judge(agreement(torch.tensor([[math.nan, 1.0]]), torch.tensor([[0.0, 1.0]])), "fp32")
    assert not lost.ok and "NaN or infinity" in lost.rule and lost.word == "MISMATCH"


def test_narrow_rule_is_kl() -> None:
    assert judge(Agreement(0.5, 0.8, kl=5e-3), "int8").ok
    assert not judge(Agreement(0.5, 1.0, kl=2e-2), "fp16").ok
    assert not judge(Agreement(math.inf, 1.0, kl=0.0), "mixed").ok


class _Scaled(torch.nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.maximum(a * 1e8, b)


def test_fp32_noise_is_judged_element_by_element() -> None:
    """maximum(a * 1e8, b): eager fp32 is units away from fp64 where a * 1e8 wins, so a
    global spread would excuse an error of 2 where b wins; elementwise it does not."""
    model = _Scaled()
    generator = torch.Generator().manual_seed(0)
    args = [torch.randn(4, 8, generator=generator) for _ in range(2)]
    expected = model(*args)
    small = expected.abs() < 1e3
    wrong = torch.where(small, expected + 2.0, expected)
    rounding = torch.where(small, expected, torch.nextafter(expected, 2 * expected))  # one ulp
    verdicts = {}
    for name, actual in (("wrong", wrong), ("rounding", rounding)):
        seen = [Sample(args, [expected], [actual])]
        verdicts[name] = judge_samples(model, seen, {}, "fp32")[1]
    assert not verdicts["wrong"].ok and "beyond fp32 noise" in verdicts["wrong"].rule
    assert verdicts["rounding"].ok and "within fp32 noise" in verdicts["rounding"].rule
