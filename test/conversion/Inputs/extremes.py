"""Models whose maximum/minimum operands differ by orders of magnitude or hold NaN: a
lowering of max(x, y) as x + relu(y - x) loses every digit of the small operand and
turns NaN into a number (issue 50)."""

from __future__ import annotations

import torch


class Clamp(torch.nn.Module):
    """`op(full(bound), linear(x))`, a clamp against a large constant."""

    def __init__(self, op: str, bound: float):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)
        self.op = getattr(torch, op)
        self.bound = bound

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.lin(x)
        return self.op(torch.full_like(y, self.bound), y)


class Scaled(torch.nn.Module):
    """`maximum(a * 1e8, b)`: operands of very different magnitudes."""

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.maximum(a * 1e8, b)


class NanMask(torch.nn.Module):
    """`op(y, sqrt(x))`, whose second operand is NaN wherever `x` is negative."""

    def __init__(self, op: str):
        super().__init__()
        self.op = getattr(torch, op)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return self.op(y, torch.sqrt(x))


def _inputs(count: int) -> tuple[torch.Tensor, ...]:
    return tuple(torch.randn(2, 8) for _ in range(count))


def max_of_full() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    return Clamp("maximum", -1e9).eval(), _inputs(1)


def min_of_full() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    return Clamp("minimum", 1e9).eval(), _inputs(1)


def max_of_scaled() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    return Scaled().eval(), _inputs(2)


def max_of_nan() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    return NanMask("maximum").eval(), _inputs(2)


def min_of_nan() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    return NanMask("minimum").eval(), _inputs(2)
