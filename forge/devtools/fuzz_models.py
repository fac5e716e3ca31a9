"""Differential fuzzing: random small PyTorch modules, compiled by the full pipeline and
executed through NNFactory + CPU callables, must match eager PyTorch.

A module is described by a `ModelSpec`: hidden size, sequence length, a weight seed and
a stack of `BlockSpec`s from a small grammar: linear layers with activations, norms,
residual adds, views and transposes, softmax, and attention blocks (causal or additive
masks, scaled either way, grouped-query heads, rotary halves). The spec is plain data,
so a failing case can be shrunk (blocks dropped, options simplified, sizes reduced while
it still fails the same way) and saved as JSON: `test/python/devtools/test_fuzz_regressions.py`
replays every saved spec.

    forge fuzz-models --cases 500
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import random
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import torch
from torch import nn

from forge.devtools.shrink import Budget, ddmin
from forge.runtime.compile import compile_model
from forge.support.campaign import Campaign
from forge.support.diagnostics import ForgeError, one_line

KINDS = ("mlp", "norm", "attention", "shuffle", "softmax")
ACTIVATIONS: dict[str, Callable[[], nn.Module]] = {
    "relu": nn.ReLU,
    "gelu": nn.GELU,
    "gelu-tanh": lambda: nn.GELU("tanh"),
    "silu": nn.SiLU,
    "tanh": nn.Tanh,
}
NORMS = ("layer", "rms")
MASKS = ("none", "causal_where", "additive")
HIDDEN_SIZES = (4, 8, 16, 32)
SEQ_LENGTHS = (1, 2, 4, 8, 12)
REGRESSIONS = Path("test/python/regressions/models")
"""Default save directory for shrunk failures, relative to the repository root."""


@dataclass(frozen=True)
class BlockSpec:
    """One block of the grammar. Every option's default is its simplest form: the
    shrinker moves options towards their defaults."""

    kind: str
    residual: bool = False
    activation: str = "relu"
    """mlp: the activation between the two linears."""
    wide: bool = False
    """mlp: hidden -> 2 * hidden -> hidden instead of hidden -> hidden -> hidden."""
    norm: str = "layer"
    """norm: LayerNorm ("layer") or RMSNorm ("rms")."""
    heads: int = 1
    kv_heads: int = 1
    """attention: key/value heads; fewer than `heads` is grouped-query attention."""
    q_bias: bool = False
    k_bias: bool = False
    v_bias: bool = False
    rotate: bool = False
    """attention: a RoPE-style rotation of q and k by halves."""
    divide: bool = False
    """attention: scores / sqrt(d) instead of scores * d**-0.5."""
    mask: str = "none"
    """attention: none, causal_where (torch.where with finfo.min) or additive (-1e9)."""

    def to_json(self) -> dict[str, Any]:
        """The kind and the options that differ from their defaults."""
        defaults = BlockSpec(self.kind)
        return {
            f.name: getattr(self, f.name)
            for f in fields(self)
            if f.name == "kind" or getattr(self, f.name) != getattr(defaults, f.name)
        }


@dataclass(frozen=True)
class ModelSpec:
    """A whole random module: what the generator draws, the shrinker reduces and a
    regression file stores."""

    blocks: tuple[BlockSpec, ...]
    hidden: int = 16
    seq: int = 8
    seed: int = 0
    """Seeds the weights and the inputs."""

    def problem(self) -> str | None:
        """Why this spec cannot be built (None if it can): shrinking proposes candidates
        blindly and skips the invalid ones."""
        if not self.blocks:
            return "no blocks"
        if self.hidden < 1 or self.seq < 1:
            return f"hidden {self.hidden} and seq {self.seq} must be positive"
        for i, b in enumerate(self.blocks):
            where = f"block {i} ({b.kind})"
            if b.kind not in KINDS:
                return f"{where}: kind must be one of {', '.join(KINDS)}"
            if b.activation not in ACTIVATIONS:
                return f"{where}: activation must be one of {', '.join(ACTIVATIONS)}"
            if b.norm not in NORMS or b.mask not in MASKS:
                return f"{where}: norm must be one of {NORMS}, mask one of {MASKS}"
            if b.heads < 1 or b.kv_heads < 1 or self.hidden % b.heads or b.heads % b.kv_heads:
                return f"{where}: heads {b.heads} must divide hidden, kv_heads {b.kv_heads} heads"
            if b.rotate and (self.hidden // b.heads) % 2:
                return f"{where}: rotate needs an even head dim"
        return None

    def describe(self) -> str:
        blocks = " ".join(
            ",".join(f"{k}={v}" if k != "kind" else v for k, v in b.to_json().items())
            for b in self.blocks
        )
        return f"hidden {self.hidden} seq {self.seq} seed {self.seed}: {blocks}"

    def to_json(self) -> dict[str, Any]:
        return {
            "hidden": self.hidden,
            "seq": self.seq,
            "seed": self.seed,
            "blocks": [b.to_json() for b in self.blocks],
        }

    @classmethod
    def from_json(cls, data: Any, source: str = "spec") -> ModelSpec:
        """Parse and validate a saved spec; any problem is one ForgeError naming `source`."""
        if not isinstance(data, dict) or not isinstance(data.get("blocks"), list):
            raise ForgeError(f"{source}: expected an object with a 'blocks' list")
        names = {f.name for f in fields(BlockSpec)}
        try:
            blocks = []
            for b in data["blocks"]:
                if not isinstance(b, dict) or set(b) - names:
                    raise ForgeError(f"{source}: bad block {b!r} (options: {sorted(names)})")
                blocks.append(BlockSpec(**b))
            spec = cls(tuple(blocks), int(data["hidden"]), int(data["seq"]), int(data["seed"]))
        except (KeyError, TypeError, ValueError) as e:
            raise ForgeError(f"{source}: {one_line(str(e))}") from e
        if problem := spec.problem():
            raise ForgeError(f"{source}: {problem}")
        return spec


def generate(seed: int) -> ModelSpec:
    """The spec of case `seed`: one to four random blocks, small random sizes."""
    rng = random.Random(seed)
    hidden = rng.choice((8, 16, 16, 32))
    seq = rng.choice((4, 8, 8, 12))
    blocks = []
    for _ in range(rng.randint(1, 4)):
        kind = rng.choice(KINDS)
        residual = rng.random() < 0.5
        if kind == "mlp":
            act = rng.choice(list(ACTIVATIONS))
            blocks.append(BlockSpec(kind, residual, activation=act, wide=rng.random() < 0.5))
        elif kind == "norm":
            blocks.append(BlockSpec(kind, residual, norm=rng.choice(NORMS)))
        elif kind == "attention":
            heads = rng.choice([h for h in (1, 2, 4) if hidden % h == 0])
            kv_heads = rng.choice([k for k in (1, 2, 4) if heads % k == 0])
            bias = [rng.random() < 0.5 for _ in range(3)]
            blocks.append(
                BlockSpec(
                    kind,
                    residual,
                    heads=heads,
                    kv_heads=kv_heads,
                    q_bias=bias[0],
                    k_bias=bias[1],
                    v_bias=bias[2],
                    rotate=rng.random() < 0.5 and (hidden // heads) % 2 == 0,
                    divide=rng.random() < 0.5,
                    mask=rng.choice(MASKS),
                )
            )
        else:
            blocks.append(BlockSpec(kind, residual))
    return ModelSpec(tuple(blocks), hidden, seq, seed)


class Attention(nn.Module):
    """softmax(q k^T * scale + mask) v with optional GQA, RoPE-style rotation, causal mask."""

    def __init__(self, spec: BlockSpec, hidden: int, seq: int):
        super().__init__()
        self.spec = spec
        self.heads, self.kv_heads = spec.heads, spec.kv_heads
        self.head_dim = hidden // spec.heads
        self.q = nn.Linear(hidden, self.heads * self.head_dim, bias=spec.q_bias)
        self.k = nn.Linear(hidden, self.kv_heads * self.head_dim, bias=spec.k_bias)
        self.v = nn.Linear(hidden, self.kv_heads * self.head_dim, bias=spec.v_bias)
        self.o = nn.Linear(self.heads * self.head_dim, hidden)
        self.register_buffer("causal", torch.tril(torch.ones(seq, seq, dtype=torch.bool)))

    def split(self, x: torch.Tensor, heads: int) -> torch.Tensor:
        b, s, _ = x.shape
        return x.view(b, s, heads, self.head_dim).transpose(1, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        q = self.split(self.q(x), self.heads)
        k = self.split(self.k(x), self.kv_heads)
        v = self.split(self.v(x), self.kv_heads)
        if self.spec.rotate:
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
        if self.spec.divide:
            scores = scores / math.sqrt(self.head_dim)
        else:
            scores = scores * self.head_dim**-0.5
        if self.spec.mask == "causal_where":
            scores = torch.where(self.causal[:s, :s], scores, torch.finfo(scores.dtype).min)
        elif self.spec.mask == "additive":
            scores = scores + torch.zeros(s, s).masked_fill(~self.causal[:s, :s], -1e9)
        probs = torch.softmax(scores, dim=-1)
        out = (probs @ v).transpose(1, 2).reshape(b, s, self.heads * self.head_dim)
        return self.o(out)


def _block(spec: BlockSpec, hidden: int, seq: int) -> nn.Module:
    if spec.kind == "mlp":
        width = 2 * hidden if spec.wide else hidden
        act = ACTIVATIONS[spec.activation]()
        return nn.Sequential(nn.Linear(hidden, width), act, nn.Linear(width, hidden))
    if spec.kind == "norm":
        return nn.LayerNorm(hidden) if spec.norm == "layer" else nn.RMSNorm(hidden)
    if spec.kind == "attention":
        return Attention(spec, hidden, seq)
    return nn.Identity()


class RandomModule(nn.Module):
    """The module a `ModelSpec` describes (an int builds `generate(seed)`)."""

    def __init__(self, spec: ModelSpec | int):
        super().__init__()
        self.spec = generate(spec) if isinstance(spec, int) else spec
        if problem := self.spec.problem():
            raise ForgeError(f"invalid model spec: {problem}")
        torch.manual_seed(self.spec.seed)
        self.kinds = [b.kind for b in self.spec.blocks]
        self.blocks = nn.ModuleList(
            _block(b, self.spec.hidden, self.spec.seq) for b in self.spec.blocks
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for spec, block in zip(self.spec.blocks, self.blocks, strict=True):
            if spec.kind == "shuffle":
                b, s, h = x.shape
                y = x.transpose(1, 2).contiguous().view(b, h, s).transpose(1, 2) * 2.0
            elif spec.kind == "softmax":
                y = torch.softmax(x, dim=-1)
            else:
                y = block(x)
            x = x + y if spec.residual else y
        return x


@dataclass
class Outcome:
    kind: str
    """match, mismatch or error."""
    detail: str = ""
    worst: float = 0.0

    @property
    def signature(self) -> str:
        """What a shrunk case must keep: mismatch, or the exception type of an error."""
        return f"error: {self.detail.split(':')[0]}" if self.kind == "error" else self.kind


def inputs(spec: ModelSpec, trial: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(spec.seed * 7919 + trial)
    return torch.randn(1, spec.seq, spec.hidden, generator=generator)


def check(spec: ModelSpec, tolerance: float = 1e-5, trials: int = 2) -> Outcome:
    """Compile `spec`'s module with Forge (NNFactory + CPU) and compare with eager on
    `trials` random inputs."""
    model = RandomModule(spec).eval()
    try:
        executor, _ = compile_model(model, (inputs(spec, -1),))
        worst = 0.0
        for trial in range(trials):
            x = inputs(spec, trial)
            with torch.no_grad():
                expected = model(x)
            (actual,) = executor(x)
            worst = max(worst, float((actual - expected).abs().max()))
    except Exception as e:
        return Outcome("error", f"{type(e).__name__}: {one_line(str(e))}")
    if worst <= tolerance:
        return Outcome("match", worst=worst)
    return Outcome("mismatch", f"max-abs {worst:.2e}", worst)


def _simpler_blocks(b: BlockSpec) -> Iterator[BlockSpec]:
    """Each option back to its default, one at a time; attention heads to plain
    multi-head, then to one head."""
    defaults = BlockSpec(b.kind)
    if b.kind == "attention" and b.kv_heads != b.heads:
        yield replace(b, kv_heads=b.heads)
    if b.kind == "attention" and b.heads > 1:
        yield replace(b, heads=1, kv_heads=1)
        yield replace(b, heads=b.heads // 2, kv_heads=max(1, b.kv_heads // 2))
    for f in fields(b):
        if f.name not in ("kind", "heads", "kv_heads") and getattr(b, f.name) != getattr(
            defaults, f.name
        ):
            yield replace(b, **{f.name: getattr(defaults, f.name)})


def simpler(spec: ModelSpec) -> Iterator[ModelSpec]:
    """One-step simplifications of `spec`: a block option, the sizes, the seed."""
    for i, b in enumerate(spec.blocks):
        for candidate in _simpler_blocks(b):
            yield replace(spec, blocks=(*spec.blocks[:i], candidate, *spec.blocks[i + 1 :]))
    for hidden in HIDDEN_SIZES:
        if hidden < spec.hidden:
            yield replace(spec, hidden=hidden)
    for seq in SEQ_LENGTHS:
        if seq < spec.seq:
            yield replace(spec, seq=seq)
    if spec.seed:
        yield replace(spec, seed=0)


def shrink(
    spec: ModelSpec,
    fails: Callable[[ModelSpec], bool],
    max_checks: int = 120,
    seconds: float = 300.0,
) -> ModelSpec:
    """Delta debugging on a spec while `fails` holds: drop blocks (ddmin), then take the
    first one-step simplification that still fails, until none does or the budget is
    spent. `fails(spec)` is assumed."""
    budget = Budget(max_checks, seconds)
    seen: dict[ModelSpec, bool] = {}

    def test(candidate: ModelSpec) -> bool:
        if candidate.problem():
            return False
        if candidate not in seen:
            seen[candidate] = budget.spend() and fails(candidate)
        return seen[candidate]

    while True:
        blocks = ddmin(spec.blocks, lambda bs, s=spec: test(replace(s, blocks=tuple(bs))))
        spec = replace(spec, blocks=tuple(blocks))
        step = next((c for c in simpler(spec) if test(c)), None)
        if step is None:
            return spec
        spec = step


def write_spec(
    data: dict[str, Any], prefix: str, outcome: Outcome, directory: Path, origin: str
) -> Path:
    """Write a shrunk failure's spec as `prefix-<digest>.json`, named after its content
    (so it is saved once), with what failed and where it came from (not read back)."""
    digest = hashlib.sha1(json.dumps(data, sort_keys=True).encode()).hexdigest()[:10]
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{prefix}-{digest}.json"
    record = {"failure": f"{outcome.kind}: {outcome.detail}", "origin": origin, **data}
    path.write_text(json.dumps(record, indent=2) + "\n")
    return path


def read_spec(path: Path) -> Any:
    """A saved spec's JSON; a file that cannot be read is one ForgeError."""
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise ForgeError(f"{path}: {one_line(str(e))}") from e


def save_spec(spec: ModelSpec, outcome: Outcome, directory: Path, origin: str) -> Path:
    return write_spec(spec.to_json(), "model", outcome, directory, origin)


def load_spec(path: Path) -> ModelSpec:
    return ModelSpec.from_json(read_spec(path), str(path))


def fails_like(outcome: Outcome, tolerance: float) -> Callable[[ModelSpec], bool]:
    """The shrinking predicate: a candidate still fails with `outcome`'s signature."""
    wanted = outcome.signature
    return lambda spec: check(spec, tolerance).signature == wanted


@dataclass
class Failure:
    spec: ModelSpec
    outcome: Outcome
    shrunk: ModelSpec | None = None
    saved: Path | None = None

    def format(self) -> str:
        lines = [f"case seed {self.spec.seed} ({self.spec.describe()}): {self.outcome.detail}"]
        if self.shrunk is not None:
            lines.append(f"    shrunk to {self.shrunk.describe()}")
        if self.saved is not None:
            lines.append(f"    saved {self.saved}")
        return "\n".join(lines)


@dataclass
class ModelFuzzResult:
    counts: Counter[str] = field(default_factory=Counter)
    failures: list[Failure] = field(default_factory=list)
    worst: float = 0.0

    def summary(self) -> str:
        total = sum(self.counts.values())
        return (
            f"{total} random modules: {self.counts['match']} match eager, "
            f"{total - self.counts['match']} fail; worst max-abs {self.worst:.2e}"
        )


def crashed(spec: Any, why: str) -> Outcome:
    """The outcome of a case whose Ray worker died, ran out of memory or hung."""
    return Outcome("error", f"WorkerCrash: {why}")


def fuzz_models(
    cases: int,
    seed: int = 0,
    tolerance: float = 1e-5,
    save_dir: Path | None = None,
    shrink_failures: bool = True,
    max_shrunk: int = 3,
    campaign: Campaign | None = None,
) -> ModelFuzzResult:
    """Compile and compare `cases` generated modules (run by `campaign`, in order; serial
    by default); the first `max_shrunk` failures are shrunk here (keeping their failure
    signature) and, with `save_dir`, saved as JSON specs."""
    result = ModelFuzzResult()
    specs = [generate(case) for case in range(seed, seed + cases)]
    check_case = functools.partial(check, tolerance=tolerance)
    outcomes = (campaign or Campaign()).map(check_case, specs, crashed)
    for spec, outcome in zip(specs, outcomes, strict=True):
        result.counts[outcome.kind] += 1
        result.worst = max(result.worst, outcome.worst)
        if outcome.kind == "match":
            continue
        failure = Failure(spec, outcome)
        result.failures.append(failure)
        if not shrink_failures or len(result.failures) > max_shrunk:
            continue
        failure.shrunk = shrink(spec, fails_like(outcome, tolerance))
        if save_dir is not None:
            final = check(failure.shrunk, tolerance)
            origin = f"forge fuzz-models, case seed {spec.seed}, tolerance {tolerance:g}"
            failure.saved = save_spec(failure.shrunk, final, save_dir, origin)
    return result
