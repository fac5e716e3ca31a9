"""How far a compiled result is from eager, and when it agrees: the one rule that
`forge check`, `forge compile`, `forge generate --check`, torch.compile's checking mode
and the fuzzers judge by.

fp32: max-abs at most `FP32_LIMIT` against eager; above that only within fp32 noise,
that is no further from an fp64 copy of the model than twice the model's own fp32
spread plus the limit (`fp32_noise`; docs/reliability.md, "The fp32 rule"). fp16, int8
and mixed store weights narrower and are judged by the distribution they give:
KL(eager || compiled) of the softmax over the last dim at most `NARROW_KL`. At every
precision NaN and infinities must sit where eager's do (`difference`).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._pytree import tree_leaves


@dataclass(frozen=True)
class Agreement:
    max_abs: float
    """Largest |compiled - eager| over all outputs and inputs."""
    top1: float
    """Fraction of positions whose argmax over the last dim agrees (worst input)."""
    kl: float = 0.0
    """KL(eager || compiled) of softmax over the last dim, mean over positions, in nats
    (worst input); 0 for outputs that are not floating point."""


def difference(expected: torch.Tensor, actual: torch.Tensor) -> torch.Tensor:
    """|actual - expected| elementwise in fp64, where equal values (infinities of one
    sign included) and NaN against NaN count 0, and NaN against a number counts inf: a
    lost or invented NaN is the worst difference, never one that compares false."""
    e, a = expected.double(), actual.double()
    same = (a == e) | (torch.isnan(a) & torch.isnan(e))
    diff = (a - e).abs().nan_to_num(nan=math.inf, posinf=math.inf)
    return torch.where(same, torch.zeros_like(diff), diff)


def agreement(expected: torch.Tensor, actual: torch.Tensor) -> Agreement:
    """Max-abs difference (`difference`), top-1 agreement and KL divergence of one
    output pair; top-1 and KL over the rows eager and compiled both hold finite."""
    max_abs = float(difference(expected, actual).max()) if expected.numel() else 0.0
    if expected.dim() == 0 or expected.numel() == 0 or not expected.dtype.is_floating_point:
        return Agreement(max_abs, 1.0)
    finite = (torch.isfinite(expected) & torch.isfinite(actual)).all(-1)
    if not finite.any():
        return Agreement(max_abs, 1.0)
    expected, actual = expected.double()[finite], actual.double()[finite]
    top1 = (actual.argmax(-1) == expected.argmax(-1)).double().mean().item()
    log_p = torch.log_softmax(expected, dim=-1)
    log_q = torch.log_softmax(actual, dim=-1)
    kl = (log_p.exp() * (log_p - log_q)).sum(-1).mean().item()
    return Agreement(max_abs, top1, max(kl, 0.0))


def worst(agreements: Sequence[Agreement]) -> Agreement:
    return Agreement(
        max((a.max_abs for a in agreements), default=0.0),
        min((a.top1 for a in agreements), default=1.0),
        max((a.kl for a in agreements), default=0.0),
    )


def eager_outputs(model: torch.nn.Module, args: Sequence[Any], kwargs: dict[str, Any]) -> list:
    with torch.no_grad():
        out = model(*args, **kwargs)
    if hasattr(out, "logits"):
        return [out.logits]
    return [t for t in tree_leaves(out) if isinstance(t, torch.Tensor)]


@dataclass(frozen=True)
class Sample:
    """One random input and the outputs eager and the compiled program gave for it."""

    args: list[Any]
    expected: list[torch.Tensor]
    actual: list[torch.Tensor]


def worst_of(seen: Sequence[Sample]) -> Agreement:
    return worst(
        [
            agreement(e, a)
            for sample in seen
            for e, a in zip(sample.expected, sample.actual, strict=True)
        ]
    )


FP32_LIMIT = 1e-5
"""Max-abs difference from eager that passes an fp32 program without further question."""
NARROW_KL = 1e-2
"""KL(eager || compiled) in nats that passes an fp16, int8 or mixed program."""
NOISE_SAMPLES = 3
"""Copies of a model with its weights (and then its linear layers' inputs) moved by up to
one fp32 ulp, to measure how far fp32 rounding alone moves its outputs (`fp32_spread`)."""

Outputs = Callable[[torch.nn.Module], list[torch.Tensor]]
"""A model's outputs on fixed inputs (in the model's own float dtype)."""


@dataclass(frozen=True)
class Verdict:
    ok: bool
    rule: str
    """The figures the verdict was reached on, and the rule's limit."""

    @property
    def word(self) -> str:
        return "ok" if self.ok else "MISMATCH"


def judge(agree: Agreement, precision: str, noise: Callable[[], str] | None = None) -> Verdict:
    """The verdict on `agree` for a program at `precision`; `noise` gives the
    `fp32_noise` verdict for an fp32 program beyond the limit (None: none is taken)."""
    lost = "" if math.isfinite(agree.max_abs) else " (a NaN or infinity not where eager's is)"
    if precision != "fp32":
        ok = agree.kl <= NARROW_KL and not lost
        return Verdict(ok, f"{precision} rule: KL {agree.kl:.3e} (limit {NARROW_KL:g}){lost}")
    if agree.max_abs <= FP32_LIMIT:
        return Verdict(True, f"fp32 rule: max-abs {agree.max_abs:.3e} (limit {FP32_LIMIT:g})")
    above = f"fp32 rule: max-abs {agree.max_abs:.3e} above {FP32_LIMIT:g}{lost}"
    if noise is None or lost:
        return Verdict(False, above)
    detail = noise()
    return Verdict(detail.startswith("within"), f"{above}, {detail}")


def judge_samples(
    model: torch.nn.Module, seen: Sequence[Sample], kwargs: dict[str, Any], precision: str
) -> tuple[Agreement, Verdict]:
    """The worst agreement of `seen` and the verdict on it (`judge`), the fp32 noise
    measured on `model` with the same inputs."""
    agree = worst_of(seen)

    def noise() -> str:
        outputs = module_outputs([s.args for s in seen], kwargs)
        actual = [t for s in seen for t in s.actual]
        expected = [t for s in seen for t in s.expected]
        return fp32_noise(model, outputs, actual, expected)

    return agree, judge(agree, precision, noise)


def module_outputs(inputs: Sequence[Sequence[Any]], kwargs: dict[str, Any]) -> Outputs:
    """`Outputs` of a plain module on each of `inputs`: float tensors are cast to the
    model's float dtype (fp64 for `double` copies)."""

    def outputs(model: torch.nn.Module) -> list[torch.Tensor]:
        dtype = next((p.dtype for p in model.parameters() if p.is_floating_point()), None)
        dtype = dtype or (torch.float64 if getattr(model, "_forge_fp64", False) else None)
        found = []
        for args in inputs:
            cast = [_as_float(a, dtype) for a in args]
            found.extend(eager_outputs(model, cast, kwargs))
        return found

    return outputs


def _as_float(value: Any, dtype: torch.dtype | None) -> Any:
    if dtype is None or not isinstance(value, torch.Tensor) or not value.is_floating_point():
        return value
    return value.to(dtype)


def fp32_noise(
    model: torch.nn.Module,
    outputs: Outputs,
    actual: Sequence[torch.Tensor],
    expected: Sequence[torch.Tensor],
    tolerance: float = FP32_LIMIT,
) -> str:
    """Whether outputs further than `tolerance` from eager are fp32 rounding. `actual` and
    `expected` are the compiled program's and eager's `outputs(model)`.

    The compiled program passes if every element of it is no further from an fp64 copy
    of the model than twice that element's fp32 spread, plus two fp32 ulps of the
    element and the tolerance. The spread is
    the largest distance from fp64 among valid fp32 runs: eager itself, eager with its
    other attention implementations, and `NOISE_SAMPLES` copies with every weight and
    every linear layer's input moved by up to one ulp (`fp32_spread`). One eager sample
    underestimates it on ill-conditioned models: a Granite with attention_multiplier 1
    and one key/value head moves 2.5e-4 under a one-ulp change of its weights where eager
    happened to land 4e-5 from fp64. Element by element, because rounding scales with
    each element's own magnitude: in max(a * 1e8, b) the large elements round by units
    and the ones b wins by 1e-7, where an error of 2.0 is no rounding."""
    with torch.no_grad():
        exact = outputs(double(model))
        forge_error = _errors(actual, exact)
        eager_error = _errors(expected, exact)
        spread = _widest([eager_error, fp32_spread(model, outputs, exact)])
    excess = max(
        float((f - 2 * w - _ulps_of(e, 2) - tolerance).max()) if f.numel() else -math.inf
        for f, w, e in zip(forge_error, spread, exact, strict=True)
    )
    verdict = "within" if excess <= 0 else "beyond"
    return (
        f"{verdict} fp32 noise: vs fp64, forge {_largest(forge_error):.2e}, eager fp32 "
        f"{_largest(eager_error):.2e}, fp32 spread {_largest(spread):.2e}"
    )


def double(model: torch.nn.Module) -> torch.nn.Module:
    """An fp64 copy of `model`. GPT-2's `reorder_and_upcast_attn` casts scores to fp32
    and refuses any other dtype; in fp64 the same math is its plain attention."""
    copied = copy.deepcopy(model).double()
    copied._forge_fp64 = True  # a model without parameters still runs in fp64
    for module in copied.modules():
        if getattr(module, "reorder_and_upcast_attn", False):
            module.reorder_and_upcast_attn = False
    return copied


def _ulps_of(exact: torch.Tensor, count: int) -> torch.Tensor:
    """`count` fp32 units in the last place of each finite element of `exact`."""
    return exact.double().abs().nan_to_num(posinf=0.0, neginf=0.0) * (count * 2.0**-23)


Errors = list[torch.Tensor]
"""Per output, the elementwise distance of a run from the fp64 model."""


def _errors(a: Sequence[torch.Tensor], exact: Sequence[torch.Tensor]) -> Errors:
    return [difference(y, x) for x, y in zip(a, exact, strict=True)]


def _widest(runs: Sequence[Errors]) -> Errors:
    """The elementwise largest of several runs' errors."""
    widest = list(runs[0])
    for run in runs[1:]:
        widest = [torch.maximum(w, e) for w, e in zip(widest, run, strict=True)]
    return widest


def _largest(errors: Errors) -> float:
    return max((float(e.max()) for e in errors if e.numel()), default=0.0)


def fp32_spread(model: torch.nn.Module, outputs: Outputs, exact: Sequence[torch.Tensor]) -> Errors:
    """The largest distance from the fp64 model, element by element, among the fp32
    variants `fp32_noise` describes: the other attention implementations against the fp64
    model; and copies with every weight moved by up to one ulp, first against their own
    fp64 copy (the rounding of a model next to this one), then with every activation
    entering a linear layer moved by up to one ulp as well, against the unmoved fp64
    model (a backward-stable fp32 computation is the exact result of inputs moved by a
    few ulps, whatever its summation order)."""
    runs = [[torch.zeros(e.shape, dtype=torch.float64) for e in exact]]
    for implementation in ("eager", "sdpa"):
        variant = copy.deepcopy(model)
        try:
            variant.set_attn_implementation(implementation)
        except (AttributeError, ValueError, ImportError):
            continue
        runs.append(_errors(outputs(variant), exact))
    generator = torch.Generator().manual_seed(0)
    for _ in range(NOISE_SAMPLES):
        variant = copy.deepcopy(model)
        for parameter in variant.parameters():
            parameter.mul_(1 + ulps(parameter, generator))
        # the rounding of a model one ulp away, against its own exact result ...
        runs.append(_errors(outputs(variant), outputs(double(variant))))
        # ... and with its linear layers' inputs moved too, against this model's
        for module in variant.modules():
            weight = getattr(module, "weight", None)
            if isinstance(weight, torch.Tensor) and weight.dim() == 2:
                module.register_forward_pre_hook(_perturb_inputs(generator))
        runs.append(_errors(outputs(variant), exact))
    return _widest(runs)


def ulps(like: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Relative moves of up to one fp32 ulp, one per element of `like`."""
    return (torch.rand(like.shape, generator=generator) * 2 - 1) * 2.0**-24


def _perturb_inputs(generator: torch.Generator) -> Callable[..., Any]:
    def hook(module: torch.nn.Module, args: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple(
            a * (1 + ulps(a, generator).to(a.dtype))
            if isinstance(a, torch.Tensor) and a.is_floating_point()
            else a
            for a in args
        )

    return hook
