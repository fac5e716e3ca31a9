"""npu-assign-precision: decide at which precision every linear weight is stored.

The one place a precision is decided. With `precision` other than fp32 the pass records
the whole-program precision on each function (`npu.precision`, which the executor
runs at; its activations are fp32 under every precision here) and gives every weighted
linear op (`npu.WEIGHTED_LINEAR_OPS`) whose weight is a 2-D float function argument a
`precision` attribute: fp16 under fp16, int8 under int8, and under mixed fp16 for the
weights named in `fp16-weights` (the measured most int8-sensitive layers,
`forge.runtime.precision`) and int8 for the others. Mixed without a measurement uses a
fixed rule so that the pass stays deterministic on text: the embedding table (a weight
also read by a non-linear op, e.g. GPT-2's tied wte) and the LM head (a linear whose
result is a function result) stay fp16, every other linear weight is int8.

fp32 writes nothing: it is what un-annotated IR means. The executor and the cost model
read the attributes back through `contract.weight_storage`. From text, options are separated
by spaces and names with dots quoted:
`forge-opt -p 'npu-assign-precision{precision=mixed fp16-weights="lm_head.weight",w1}'`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass

from forge.dialects import contract, npu
from forge.dialects.dtypes import check_precision
from forge.transforms.pattern_pass import run_on_functions


@dataclass
class PrecisionReport:
    """What npu-assign-precision decided for one function."""

    precision: str
    measured: bool
    """Mixed followed `fp16-weights` (False: the fallback rule, or not mixed)."""
    weights: dict[str, str] = field(default_factory=dict)
    """Weight argument name -> the precision it is stored at."""
    marked: int = 0
    """Linear ops given a `precision` attribute."""

    @property
    def fp16(self) -> list[str]:
        return [name for name, p in self.weights.items() if p == "fp16"]

    @property
    def int8(self) -> list[str]:
        return [name for name, p in self.weights.items() if p == "int8"]

    def format(self) -> str:
        rule = "measured" if self.measured else "fallback rule" if self.precision == "mixed" else ""
        how = f" ({rule})" if rule else ""
        return (
            f"precision {self.precision}{how}: {len(self.fp16)} fp16, {len(self.int8)} int8 "
            f"weight(s), {self.marked} linear op(s) marked"
        )


def fallback_keeps_fp16(weight: SSAValue, users: Sequence[Operation] | None = None) -> bool:
    """Mixed without a measurement: keep the embedding table (a weight some non-linear
    op also reads) and the LM head (a linear whose result a function returns) fp16.
    (`users`: `contract.weight_users(weight)`, when the caller has them.)"""
    if any(not isinstance(u.operation, npu.WEIGHTED_LINEAR_OPS) for u in weight.uses):
        return True
    return any(
        isinstance(u.operation, func.ReturnOp)
        for op in (contract.weight_users(weight) if users is None else users)
        for r in op.results
        for u in r.uses
    )


def choose(weight: SSAValue, precision: str, fp16_weights: tuple[str, ...] | None) -> str:
    """The precision linear weight `weight` is stored at (see the module docstring)."""
    if precision != "mixed":
        return precision
    if fp16_weights is not None:
        return "fp16" if getattr(weight, "name_hint", None) in fp16_weights else "int8"
    return "fp16" if fallback_keeps_fp16(weight) else "int8"


@dataclass(frozen=True)
class NpuAssignPrecisionPass(ModulePass):
    name = "npu-assign-precision"

    precision: str = "fp32"
    """fp32 | fp16 | int8 | mixed: the whole-program precision."""
    fp16_weights: tuple[str, ...] | None = None
    """mixed: the weight arguments kept at fp16 (the others int8), e.g. measured by
    `forge.runtime.precision`; unset: the fallback rule."""

    def __post_init__(self) -> None:
        check_precision(self.precision, ValueError)
        weights = self.fp16_weights
        if isinstance(weights, str):
            object.__setattr__(self, "fp16_weights", (weights,))
        elif weights is not None:
            object.__setattr__(self, "fp16_weights", tuple(weights))
        if weights is not None and self.precision != "mixed":
            raise ValueError(f"fp16-weights applies to precision mixed, not {self.precision}")

    def assign(self, function: func.FuncOp) -> PrecisionReport:
        report = PrecisionReport(
            self.precision, self.precision == "mixed" and self.fp16_weights is not None
        )
        if self.precision == "fp32":
            return report
        function.attributes[contract.PROGRAM_PRECISION] = StringAttr(self.precision)
        for op in function.walk():
            if not isinstance(op, npu.WEIGHTED_LINEAR_OPS):
                continue
            if not contract.is_linear_weight(op.weight):
                continue
            chosen = choose(op.weight, self.precision, self.fp16_weights)
            op.attributes["precision"] = StringAttr(chosen)
            report.weights[op.weight.name_hint or f"arg{op.weight.index}"] = chosen
            report.marked += 1
        return report

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        run_on_functions(self.name, op, self.assign, count=lambda r: r.marked)


def record_precision(function: func.FuncOp, precision: str) -> None:
    """Make `function` state `precision` (fp32: state none), as npu-assign-precision
    records it, leaving the linear ops' own `precision` attributes as they are (under
    mixed, unannotated weights are int8). For IR planned without a precision, or built
    by hand (the host profile's graphs, `-t python{precision=...}`): the IR is then, as
    after the pipeline, the one carrier of the precision."""
    if check_precision(precision) == "fp32":
        function.attributes.pop(contract.PROGRAM_PRECISION, None)
        return
    function.attributes[contract.PROGRAM_PRECISION] = StringAttr(precision)
