"""The cost model: Score(G), the fusion gain ratio (FGR) and the compile efficiency index (CEI).

Score(G) = w1·n_ops + w2·n_weights + w3·n_linear + w4·d_graph + w5·s_params, over the
entry function of an `npu` module (see docs/cost-model.md for every feature):

- n_ops: ops in the function body, `func.return` excluded (`count_ops`).
- n_weights: weight arguments (the arguments after the inputs) that some op reads,
  plus `npu.constant` ops: the tensors the graph binds besides its inputs.
- n_linear: contractions: `npu.linear`, `npu.matmul`, `npu.addmm`, `npu.fused_linear`,
  `npu.sdpa` (one fused attention counts once), and `npu.generic` mm/bmm/conv ops.
- d_graph: ops on the longest path of the dataflow DAG (arguments are depth 0).
- s_params: MiB of those parameters stored at precision precision (`param_bytes`).

The paper gives no values for w1..w5, so `CostModel.default()` uses 1 for each, with
s_params in MiB: every term then reads in its natural unit (ops, tensors, levels, MiB)
and no term is favoured before `forge calibrate` fits the weights to measurements.
Weights are saved as JSON; `CostModel.current()` loads `$FORGE_COST_MODEL` or
`cost_model.json` in Forge's cache root (`forge.support.host.cache_root`) when that
file exists.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path

from xdsl.dialects import func
from xdsl.dialects.builtin import IntegerType, ModuleOp
from xdsl.ir import Operation, SSAValue

from forge.dialects import contract, npu
from forge.dialects.context import entry_function, infer_num_inputs
from forge.dialects.dtypes import check_precision
from forge.dialects.shapes import element_type, is_float, numel, shape_of
from forge.support.diagnostics import ForgeError
from forge.support.files import atomic_write
from forge.support.host import cache_folder
from forge.transforms.npu_assign_precision import fallback_keeps_fp16

MIB = 1 << 20

STORAGE_BYTES = {"fp32": 4, "fp16": 2, "int8": 1}
"""Bytes per element of a weight stored at a per-op `precision` attribute."""

SCALE_BYTES = 2
"""An int8 weight carries one fp16 scale per output channel (symmetric per-channel)."""

LINEAR_OPS = (npu.LinearOp, npu.MatmulOp, npu.AddmmOp, npu.FusedLinearOp, npu.SDPAOp)
"""Named ops n_linear counts."""

LINEAR_GENERIC_PREFIXES = (
    "aten.mm.",
    "aten.bmm.",
    "aten.baddbmm.",
    "aten.addmm.",
    "aten.matmul.",
    "aten.linear.",
    "aten.conv",
    "aten.convolution.",
)
"""`npu.generic` opcodes n_linear also counts (contractions without a named op)."""

FEATURES = ("n_ops", "n_weights", "n_linear", "d_graph", "s_params")

COST_MODEL_ENV = "FORGE_COST_MODEL"
DEFAULT_NAME = "cost_model.json"


# ------------------------------------------------------------------- parameters


@dataclass(frozen=True)
class Param:
    """One parameter tensor and what its bytes depend on."""

    name: str
    numel: int
    element_bytes: int
    """Bytes per element of its own type (float params are re-priced per precision)."""
    is_float: bool
    channels: int = 0
    """Output channels if it is a linear weight (`contract.is_linear_weight`), else 0."""
    mixed: str = "int8"
    """Its storage under mixed as the IR says (`contract.weight_storage`)."""
    fallback: str = "int8"
    """Its storage under npu-assign-precision's fallback rule for mixed (fp16 for the
    embedding table and the LM head)."""

    def bytes_at(self, precision: str, annotated: bool) -> int:
        """Bytes stored at `precision`; `annotated` says npu-assign-precision has run, so
        mixed follows the IR, else the pass's fallback rule (as if it ran unmeasured)."""
        if not self.is_float:
            return self.numel * self.element_bytes
        storage = self.storage(precision, annotated)
        if storage == "int8":
            return self.numel + self.channels * SCALE_BYTES
        return self.numel * STORAGE_BYTES[storage]

    def storage(self, precision: str, annotated: bool) -> str:
        """A linear weight's storage is `contract.weight_storage`'s (under mixed: the IR's if
        annotated, else the fallback rule's); other float params are fp32 at fp32 and
        fp16 otherwise."""
        if not self.channels or precision in ("fp32", "fp16"):
            return "fp32" if precision == "fp32" else "fp16"
        if precision == "int8":
            return "int8"
        return self.mixed if annotated else self.fallback


def _element_bytes(value: SSAValue) -> int:
    element = element_type(value.type)
    if isinstance(element, IntegerType):
        return max(1, element.width.data // 8)
    return getattr(element, "bitwidth", 32) // 8


def _param(value: SSAValue, name: str) -> Param | None:
    shape = shape_of(value.type)
    count = numel(shape)
    if count is None:
        return None
    floating = is_float(element_type(value.type))
    users = contract.weight_users(value)
    if not contract.is_linear_weight(value, users):
        return Param(name, count, _element_bytes(value), floating)
    return Param(
        name,
        count,
        _element_bytes(value),
        floating,
        shape[1] if npu.weight_in_out(users[0]) else shape[0],
        contract.weight_storage(value, "mixed", users) or "int8",
        "fp16" if fallback_keeps_fp16(value, users) else "int8",
    )


# --------------------------------------------------------------------- features


@dataclass(frozen=True)
class Features:
    """The five features of one graph at one precision."""

    n_ops: int
    n_weights: int
    n_linear: int
    d_graph: int
    s_params: float
    """MiB of parameters at `precision`."""
    precision: str = "fp16"

    def vector(self) -> tuple[float, ...]:
        return tuple(float(getattr(self, name)) for name in FEATURES)


@dataclass(frozen=True)
class Structure:
    """The precision-independent analysis of a graph; `at(precision)` prices its parameters.

    Computed once per graph, so that scoring a graph at several precisions (autotuning's
    precision axis) walks the IR once."""

    n_ops: int
    n_weights: int
    n_linear: int
    d_graph: int
    params: tuple[Param, ...]
    annotated: bool
    """Some op carries a `precision` attribute (npu-assign-precision has run)."""

    def param_bytes(self, precision: str) -> int:
        check_precision(precision)
        return sum(p.bytes_at(precision, self.annotated) for p in self.params)

    def assigned(self, fp16_weights: Sequence[str]) -> Structure:
        """This graph as `npu-assign-precision{precision=mixed fp16-weights=...}` would
        annotate it (the named linear weights fp16, the others int8, e.g. measured by
        `forge.runtime.precision.program_fp16_weights`): how `mixed` is priced without
        running the pass on every configuration's graph."""
        kept = set(fp16_weights)
        params = tuple(
            replace(p, mixed="fp16" if p.name in kept else "int8") if p.channels else p
            for p in self.params
        )
        return replace(self, params=params, annotated=True)

    def at(self, precision: str) -> Features:
        return Features(
            self.n_ops,
            self.n_weights,
            self.n_linear,
            self.d_graph,
            self.param_bytes(precision) / MIB,
            precision,
        )


def is_linear(op: Operation) -> bool:
    if type(op) in _LINEAR_TYPES:  # exact types: isinstance on the ABC-based ops is slow
        return True
    return type(op) is npu.GenericOp and op.opcode.startswith(LINEAR_GENERIC_PREFIXES)


_LINEAR_TYPES = frozenset(LINEAR_OPS)


def _body(op: Operation) -> Iterator[Operation]:
    """The ops nested in `op`, in order; plain loops (walk() is slower)."""
    for region in op.regions:
        for block in region.blocks:
            for child in block.ops:
                yield child
                if child.regions:
                    yield from _body(child)


def depth(function: func.FuncOp) -> int:
    """Ops on the longest dataflow path through the body (arguments are depth 0)."""
    return _scan(function).depth


@dataclass(frozen=True)
class BodyScan:
    """What one pass over a function body finds (`_scan`)."""

    n_ops: int
    """Ops, `func.return` excluded."""
    n_linear: int
    """Contractions (`is_linear`)."""
    constants: tuple[npu.ConstantOp, ...]
    depth: int
    """Ops on the longest dataflow path."""
    annotated: bool
    """Some op carries a `precision` attribute."""


def _scan(function: func.FuncOp) -> BodyScan:
    """One pass over the body: ops, contractions, constants, depth, precision attributes."""
    level: dict[SSAValue, int] = {}
    n_ops = n_linear = longest = 0
    constants: list[npu.ConstantOp] = []
    annotated = False
    for op in _body(function):
        kind = type(op)
        if kind is func.ReturnOp:
            continue
        n_ops += 1
        n_linear += is_linear(op)
        if kind is npu.ConstantOp:
            constants.append(op)
        annotated = annotated or "precision" in op.attributes
        d = 1 + max((level.get(v, 0) for v in op.operands), default=0)
        for r in op.results:
            level[r] = d
        longest = max(longest, d)
    return BodyScan(n_ops, n_linear, tuple(constants), longest, annotated)


def analyze(module: ModuleOp | func.FuncOp, num_inputs: int | None = None) -> Structure:
    """Walk the entry function once: op, weight and contraction counts, depth, params."""
    function = entry_function(module)
    if num_inputs is None:
        num_inputs = infer_num_inputs(function)
    args = function.body.block.args
    if not 0 <= num_inputs <= len(args):
        raise ForgeError(f"num_inputs must lie in [0, {len(args)}], got {num_inputs}")
    weights = [arg for arg in args[num_inputs:] if arg.uses]
    params = [
        p
        for i, arg in enumerate(weights)
        if (p := _param(arg, arg.name_hint or f"arg{num_inputs + i}")) is not None
    ]
    scan = _scan(function)
    params += [
        p
        for i, c in enumerate(scan.constants, 1)
        if (p := _param(c.result, f"constant{i}")) is not None
    ]
    return Structure(
        scan.n_ops,
        len(weights) + len(scan.constants),
        scan.n_linear,
        scan.depth,
        tuple(params),
        scan.annotated,
    )


def features(
    module: ModuleOp | func.FuncOp, precision: str = "fp16", num_inputs: int | None = None
) -> Features:
    return analyze(module, num_inputs).at(precision)


# ---------------------------------------------------------------------- the model


@dataclass(frozen=True)
class CostModel:
    """Score(G) = Σ w_i · x_i over `FEATURES`; lower is better."""

    n_ops: float = 1.0
    n_weights: float = 1.0
    n_linear: float = 1.0
    d_graph: float = 1.0
    s_params: float = 1.0
    """Per MiB."""
    source: str = "uncalibrated (unit weights)"
    path: str = field(default="", compare=False)
    """The file it was loaded from ("" for the default); not saved."""

    @classmethod
    def default(cls) -> CostModel:
        return cls()

    @property
    def calibrated(self) -> bool:
        return bool(self.path)

    def describe(self) -> str:
        """Which model this is (the file it came from, or uncalibrated) and its weights."""
        w = ", ".join(f"w{i}={v:.4g}" for i, v in enumerate(self.weights, 1))
        where = f"{self.path}: {self.source}" if self.path else self.source
        return f"{where} ({w}; s_params in MiB)"

    @property
    def weights(self) -> tuple[float, ...]:
        return tuple(getattr(self, name) for name in FEATURES)

    def score(self, x: Features | Structure, precision: str = "fp16") -> float:
        f = x.at(precision) if isinstance(x, Structure) else x
        return sum(w * v for w, v in zip(self.weights, f.vector(), strict=True))

    def terms(self, f: Features) -> dict[str, float]:
        """Each feature's contribution to the score."""
        return {n: w * v for n, w, v in zip(FEATURES, self.weights, f.vector(), strict=True)}

    def fgr(self, unfused: Features, fused: Features) -> float:
        """Fusion gain ratio: Score(unfused) / Score(fused); compare at one precision."""
        if unfused.precision != fused.precision:
            raise ForgeError(
                f"FGR compares one precision, got {unfused.precision} and {fused.precision}"
            )
        fused_score = self.score(fused)
        if fused_score <= 0:
            raise ForgeError(f"FGR needs a positive fused score, got {fused_score}")
        return self.score(unfused) / fused_score

    # -- persistence

    def save(self, path: str | os.PathLike[str] | None = None) -> Path:
        target = Path(path) if path is not None else default_path()
        target.parent.mkdir(parents=True, exist_ok=True)
        data = {k: v for k, v in asdict(self).items() if k != "path"}
        with atomic_write(target) as f:
            f.write(json.dumps(data, indent=2) + "\n")
        return target

    @classmethod
    def load(cls, path: str | os.PathLike[str] | None = None) -> CostModel:
        source = Path(path) if path is not None else default_path()
        try:
            data = json.loads(source.read_text())
        except OSError as e:
            raise ForgeError(f"{source}: cannot read the cost model: {e.strerror}") from e
        except json.JSONDecodeError as e:
            raise ForgeError(f"{source}: not a JSON cost model: {e.msg}") from e
        return replace(cls.from_dict(data, str(source)), path=str(source))

    @classmethod
    def from_dict(cls, data: object, where: str = "cost model") -> CostModel:
        known = {f.name for f in fields(cls)} - {"path"}
        if not isinstance(data, Mapping):
            raise ForgeError(f"{where}: expected a JSON object of weights")
        unknown = sorted(set(data) - known)
        if unknown:
            raise ForgeError(f"{where}: unknown key(s) {', '.join(map(str, unknown))}")
        for name in FEATURES:
            value = data.get(name, 1.0)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ForgeError(f"{where}: weight '{name}' must be a number, got {value!r}")
        return cls(**{k: (v if k == "source" else float(v)) for k, v in data.items()})

    @classmethod
    def current(cls, path: str | os.PathLike[str] | None = None) -> CostModel:
        """`path` if given; else the calibrated model at `default_path()` if it exists;
        else the uncalibrated default."""
        if path is not None:
            return cls.load(path)
        if default_path().is_file():
            return cls.load()
        return cls.default()


def default_path() -> Path:
    """Where calibrated weights live: `$FORGE_COST_MODEL`, else Forge's cache root."""
    override = os.environ.get(COST_MODEL_ENV)
    return Path(override).expanduser() if override else cache_folder("cost-model") / DEFAULT_NAME


def cei(speedup: float, compile_seconds: float) -> float:
    """Compile efficiency index: speedup over eager per second of compilation."""
    if compile_seconds <= 0:
        raise ForgeError(f"CEI needs a positive compile time, got {compile_seconds} s")
    return speedup / compile_seconds


def cei_from_latency(eager_ms: float, forge_ms: float, compile_seconds: float) -> float:
    """CEI from measured mean latencies: (eager / forge) / compile seconds."""
    if forge_ms <= 0:
        raise ForgeError(f"CEI needs a positive latency, got {forge_ms} ms")
    return cei(eager_ms / forge_ms, compile_seconds)
