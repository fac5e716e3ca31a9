"""Differential fuzzing: random small PyTorch modules, compiled by the full pipeline and
executed through NNFactory + CPU callables, must match eager PyTorch.

A module is a random stack of blocks from a small grammar: linear layers with
activations, norms, residual adds, views and transposes, softmax, and attention blocks
(causal or additive masks, scaled either way, grouped-query heads, rotary halves).

    forge fuzz-models --cases 500
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import nn

Block = Callable[[torch.Tensor], torch.Tensor]


class Attention(nn.Module):
    """softmax(q k^T * scale + mask) v with optional GQA, RoPE-style rotation, causal mask."""

    def __init__(self, rng: random.Random, hidden: int, seq: int):
        super().__init__()
        self.heads = rng.choice([h for h in (1, 2, 4) if hidden % h == 0])
        self.kv_heads = rng.choice([k for k in (1, 2, 4) if self.heads % k == 0])
        self.head_dim = hidden // self.heads
        self.q = nn.Linear(hidden, self.heads * self.head_dim, bias=rng.random() < 0.5)
        self.k = nn.Linear(hidden, self.kv_heads * self.head_dim, bias=rng.random() < 0.5)
        self.v = nn.Linear(hidden, self.kv_heads * self.head_dim, bias=rng.random() < 0.5)
        self.o = nn.Linear(self.heads * self.head_dim, hidden)
        self.rotate = rng.random() < 0.5 and self.head_dim % 2 == 0
        self.divide = rng.random() < 0.5
        self.mask_kind = rng.choice(["causal_where", "additive", "none"])
        self.register_buffer("causal", torch.tril(torch.ones(seq, seq, dtype=torch.bool)))

    def split(self, x: torch.Tensor, heads: int) -> torch.Tensor:
        b, s, _ = x.shape
        return x.view(b, s, heads, self.head_dim).transpose(1, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        q = self.split(self.q(x), self.heads)
        k = self.split(self.k(x), self.kv_heads)
        v = self.split(self.v(x), self.kv_heads)
        if self.rotate:
            half = self.head_dim // 2
            q = torch.cat((-q[..., half:], q[..., :half]), dim=-1) * 0.5 + q
            k = torch.cat((-k[..., half:], k[..., :half]), dim=-1) * 0.5 + k
        groups = self.heads // self.kv_heads
        if groups > 1:
            k = k[:, :, None].expand(b, self.kv_heads, groups, s, self.head_dim)
            k = k.reshape(b, self.heads, s, self.head_dim)
            v = v[:, :, None].expand(b, self.kv_heads, groups, s, self.head_dim)
            v = v.reshape(b, self.heads, s, self.head_dim)
        scores = q @ k.transpose(-1, -2)
        scores = scores / math.sqrt(self.head_dim) if self.divide else scores * self.head_dim**-0.5
        if self.mask_kind == "causal_where":
            scores = torch.where(self.causal[:s, :s], scores, torch.finfo(scores.dtype).min)
        elif self.mask_kind == "additive":
            scores = scores + torch.zeros(s, s).masked_fill(~self.causal[:s, :s], -1e9)
        probs = torch.softmax(scores, dim=-1)
        out = (probs @ v).transpose(1, 2).reshape(b, s, self.heads * self.head_dim)
        return self.o(out)


class RandomModule(nn.Module):
    def __init__(self, seed: int, hidden: int = 16, seq: int = 8):
        super().__init__()
        rng = random.Random(seed)
        self.description: list[str] = []
        self.blocks = nn.ModuleList()
        self.kinds: list[str] = []
        for _ in range(rng.randint(1, 4)):
            kind = rng.choice(["mlp", "norm", "attention", "shuffle", "softmax"])
            self.kinds.append(kind)
            self.description.append(kind)
            if kind == "mlp":
                act = rng.choice([nn.ReLU(), nn.GELU(), nn.GELU("tanh"), nn.SiLU(), nn.Tanh()])
                width = rng.choice([hidden, 2 * hidden])
                self.blocks.append(
                    nn.Sequential(nn.Linear(hidden, width), act, nn.Linear(width, hidden))
                )
            elif kind == "norm":
                self.blocks.append(rng.choice([nn.LayerNorm(hidden), nn.RMSNorm(hidden)]))
            elif kind == "attention":
                self.blocks.append(Attention(rng, hidden, seq))
            else:
                self.blocks.append(nn.Identity())
        self.residual = [rng.random() < 0.5 for _ in self.kinds]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for kind, block, residual in zip(self.kinds, self.blocks, self.residual, strict=True):
            if kind == "shuffle":
                b, s, h = x.shape
                y = x.transpose(1, 2).contiguous().view(b, h, s).transpose(1, 2) * 2.0
            elif kind == "softmax":
                y = torch.softmax(x, dim=-1)
            else:
                y = block(x)
            x = x + y if residual else y
        return x


@dataclass
class ModelFuzzResult:
    counts: Counter[str] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)
    worst: float = 0.0

    def summary(self) -> str:
        total = sum(self.counts.values())
        return (
            f"{total} random modules: {self.counts['match']} match eager, "
            f"{total - self.counts['match']} fail; worst max-abs {self.worst:.2e}"
        )


def fuzz_models(cases: int, seed: int = 0, tolerance: float = 1e-5) -> ModelFuzzResult:
    """Compile each random module with Forge (NNFactory + CPU) and compare with eager on
    2 random inputs; a failure records the seed and what the module was."""
    from forge.executor import compile_model

    result = ModelFuzzResult()
    for case in range(cases):
        torch.manual_seed(seed + case)
        model = RandomModule(seed + case).eval()
        x = torch.randn(1, 8, 16)
        try:
            executor, _ = compile_model(model, (x,))
            worst = 0.0
            for trial in range(2):
                xi = torch.randn(1, 8, 16, generator=torch.Generator().manual_seed(trial))
                with torch.no_grad():
                    expected = model(xi)
                (actual,) = executor(xi)
                worst = max(worst, float((actual - expected).abs().max()))
        except Exception as e:
            result.counts["error"] += 1
            result.failures.append(
                f"seed {seed + case} {model.description}: {type(e).__name__}: {e}"
            )
            continue
        result.worst = max(result.worst, worst)
        if worst <= tolerance:
            result.counts["match"] += 1
        else:
            result.counts["mismatch"] += 1
            result.failures.append(f"seed {seed + case} {model.description}: max-abs {worst:.2e}")
    return result
