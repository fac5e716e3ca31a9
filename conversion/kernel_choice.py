"""How a program's graphs are built: one explicit, frozen record of the build choices.

`BuildOptions` holds every choice the graph builder follows besides the IR (which states
the precision, npu-assign-precision's): the segment granularity, how weights are bound,
the host profile's measured kernel, snippets and int8-dynamic rules, and the
activations' quantization. The executor passes it down to `build_segment`, the graph
builder keys its compiled graphs on it (`graph_key`), and the compile cache hashes it
into its key; no context variable or process-wide setting carries a choice, so a build
on any thread follows the record it is given. NNFactory's own settings (snippets mode,
quantization group) are set in the environment only around the one compile that reads
them (`nnfactory_env`).

`Decision` is what the builder records for each choice it made (op, kernel, reason):
the compile notes print from those records (`forge.runtime.build_notes`).
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Hashable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from xdsl.dialects.builtin import TensorType
from xdsl.ir import Operation

from forge.conversion.segments import GRANULARITIES, WEIGHT_BINDINGS
from forge.dialects import npu
from forge.dialects.shapes import DYNAMIC
from forge.support.diagnostics import ForgeError

if TYPE_CHECKING:
    from forge.transforms.host_profile import HostProfile

KernelRule = tuple[tuple[int, str], ...]
"""(rows, kernel) per measured row count (`forge.transforms.host_profile.KernelTiming`),
kernel one of `LINEAR_KERNELS`; a linear takes the nearest one's (log scale), none
measured: "fused"."""

SnippetsRule = tuple[tuple[int, bool], ...]
"""(rows, snippets on) per measured row count (`forge.transforms.host_profile.
KernelTiming.snippets`): an fp32 graph whose largest linear has the nearest row count
(log scale) compiles with OpenVINO's snippets on or off; none measured: off."""

Int8DynamicRule = tuple[tuple[int, bool], ...]
"""(rows, activations quantized) per measured row count (`forge.transforms.host_profile.
KernelTiming.int8_dynamic`): a graph with int8 weights whose largest linear has the
nearest row count (log scale) quantizes its activations at run time or not; none
measured: weight-only."""

LINEAR_KERNELS = ("fused", "apart", "onednn")
"""How an fp32 linear reaches OpenVINO. "fused": as it is (OpenVINO fuses an activation
into the FullyConnected, which then runs oneDNN's kernel; a plain linear runs MLAS).
"apart": activations kept out of the FullyConnected, so every linear runs MLAS.
"onednn": activations fused and every plain linear given an exact post-op, so every
linear runs oneDNN's kernel.

A FullyConnected with a post-op (a fused activation) cannot take OpenVINO's MLAS
kernel: with fp32 weights it runs oneDNN's brgemm/brgconv instead. Which wins depends
on the host and the rows: on an AMD EPYC Zen 4 (2 cores) MLAS reads a one-row (decode)
product's weights about 20% faster (12 GPT-2 MLPs 8.5 -> 7.0 ms), and oneDNN computes a
100-row (prompt) product about 12% faster (24 GPT-2 linears 55.0 -> 48.4 ms).
`forge doctor --profile` measures it."""

INT8_KERNELS = ("fused", "apart")
"""How an int8-weight linear with an activation reaches OpenVINO (its kernel is oneDNN's
either way): the activation fused into the FullyConnected, or computed after it."""

FP16_KERNELS = ("wide", "narrow")
"""How weights `fp16` asks for reach OpenVINO's CPU plugin. "narrow": stored fp16
behind a Convert marked as a decompression in a graph marked as a large language
model's (`mark_llm`), the one case in which the plugin's FullyConnected keeps them fp16
and widens them in the kernel: half the bytes to read, more work per byte. "wide":
where that does not pay, the weights as they are (fp32, the model's own memory), run
by the fp32 kernels. Not their fp16 values widened to fp32: a copy the size of the fp32
weights, made and packed at compile for nothing faster (Llama-3.2-1B's prefill: 7 GB
more memory touched and 89 s to compile against 45 s on an AMD EPYC Zen 3, 2 cores,
where first touches of new memory cost about 10 s per GiB)."""

SNIPPETS_ENV = "NNFACTORY_SNIPPETS_MODE"
BLOBS_ENV = "NNFACTORY_CACHE_DIR"
"""OpenVINO's model cache folder, read by NNFactory's C++ at every graph compile
(scripts/build_nnfactory.sh) on a core that keeps the last setting."""
DYNAMIC_QUANTIZATION_ENV = "NNFACTORY_DYNAMIC_QUANTIZATION_GROUP_SIZE"

DYNAMIC_QUANTIZATION_GROUP = 32
"""Activations per scale when OpenVINO quantizes them at run time (its CPU default)."""

KERNEL_REASONS = {
    "apart": "activations kept out of OpenVINO's FullyConnected, so that it runs MLAS",
    "onednn": "given an exact post-op, so that OpenVINO's FullyConnected runs oneDNN",
}
"""Why a linear left OpenVINO's own kernel, by the kernel it was lowered for."""

OWN_KERNEL = "OpenVINO's own kernel"
INT8_APART = "the activation computed after OpenVINO's FullyConnected"
"""Why an int8-weight linear's activation was kept out of its FullyConnected."""


@dataclass(frozen=True)
class BuildOptions:
    """Every choice a program's graphs are built under, besides the IR.

    `snippets_mode` and `quantization_group` are NNFactory's settings when forced (the
    user's NNFACTORY_SNIPPETS_MODE and NNFACTORY_DYNAMIC_QUANTIZATION_GROUP_SIZE, read
    once when the record is made, or `dynamic_quantized`); None leaves them to the
    measured rules."""

    granularity: str = "segment"
    """One NNFactory graph per maximal run of NPU ops ("segment") or per op ("op")."""
    weights_as: str = "constants"
    """Weights baked into the graphs ("constants") or bound per call ("parameters")."""
    linear_kernels: KernelRule = ()
    """The fp32 linears' kernel per row count (`LINEAR_KERNELS`)."""
    int8_kernels: KernelRule = ()
    """The int8-weight linears' form per row count (`INT8_KERNELS`)."""
    fp16_kernels: KernelRule = ()
    """How fp16 weights are stored per row count (`FP16_KERNELS`)."""
    snippets: SnippetsRule = ()
    int8_dynamic: Int8DynamicRule = ()
    snippets_mode: str | None = field(default_factory=lambda: os.environ.get(SNIPPETS_ENV))
    quantization_group: str | None = field(
        default_factory=lambda: os.environ.get(DYNAMIC_QUANTIZATION_ENV)
    )
    blob_folder: str | None = field(default=None, compare=False)
    """Where OpenVINO writes (and finds) its compiled blobs: a compile cache entry's
    folder, "" for none; None leaves it to the user's NNFACTORY_CACHE_DIR. Not a choice
    of what is built: no key holds it."""

    def __post_init__(self) -> None:
        if self.weights_as not in WEIGHT_BINDINGS:
            raise ForgeError(
                f"weights_as must be one of {', '.join(WEIGHT_BINDINGS)}, got '{self.weights_as}'"
            )
        if self.granularity not in GRANULARITIES:
            raise ForgeError(
                f"granularity must be one of {', '.join(GRANULARITIES)}, got '{self.granularity}'"
            )
        unknown = [kernel for _rows, kernel in self.linear_kernels if kernel not in LINEAR_KERNELS]
        unknown += [kernel for _rows, kernel in self.int8_kernels if kernel not in INT8_KERNELS]
        unknown += [kernel for _rows, kernel in self.fp16_kernels if kernel not in FP16_KERNELS]
        if unknown:
            raise ForgeError(f"unknown linear kernel(s) {', '.join(unknown)}")

    @classmethod
    def for_host(
        cls, profile: HostProfile | None, dynamic_quantized: bool | None = None, **choices: Any
    ) -> BuildOptions:
        """The record that follows `profile`'s measured choices: the fp32 and int8
        linears' kernel forms and the fp16 weights', OpenVINO's snippets and whether
        int8 graphs quantize their activations; with no profile, OpenVINO's own forms,
        fp16 weights narrow, no snippets, int8 weight-only. `dynamic_quantized` True
        quantizes the activations of int8-weight MatMuls at run time in groups of
        `DYNAMIC_QUANTIZATION_GROUP` (int8 x int8 products, about twice as fast as
        weight-only int8 for a prompt here, and further from the fp32 logits), False
        keeps them weight-only, None leaves it to the profile. `choices` are the other
        fields (granularity, weights_as)."""
        if dynamic_quantized is not None:
            group = DYNAMIC_QUANTIZATION_GROUP if dynamic_quantized else 0
            choices["quantization_group"] = str(group)
        if profile is None:
            return cls(**choices)
        return cls(
            linear_kernels=profile.kernel_rule(),
            int8_kernels=profile.int8_kernel_rule(),
            fp16_kernels=profile.fp16_kernel_rule(),
            snippets=profile.snippets_rule(),
            int8_dynamic=profile.int8_dynamic_rule(),
            **choices,
        )

    def settings(self, ops: Sequence[Operation], fp32: bool, int8: bool) -> dict[str, str]:
        """NNFactory's settings for compiling the graph of `ops` (`nnfactory_env`): its
        snippets mode, its quantization group (`fp32`, `int8`: see `snippets_for`,
        `quantization_group_for`) and OpenVINO's blob folder."""
        blobs = self.blob_folder
        return {
            SNIPPETS_ENV: self.snippets_for(ops, measured=fp32),
            DYNAMIC_QUANTIZATION_ENV: self.quantization_group_for(ops, int8),
            BLOBS_ENV: blobs if blobs is not None else os.environ.get(BLOBS_ENV, ""),
        }

    def graph_key(self) -> Hashable:
        """The choices a graph's contents depend on, for the key of a compiled graph."""
        return (
            self.snippets_mode,
            self.quantization_group,
            self.int8_dynamic,
            self.linear_kernels,
            self.int8_kernels,
            self.fp16_kernels,
            self.snippets,
        )

    def kernel_rule(self, storage: str) -> KernelRule:
        """The rule for linears whose weights are stored as `storage` ("float", "int8")."""
        return self.int8_kernels if storage == "int8" else self.linear_kernels

    def fp16_form(self, rows: int) -> str:
        """How fp16 weights read by products of `rows` rows are stored (`FP16_KERNELS`):
        the nearest measured row count's form; none measured: "narrow", what was asked."""
        return _nearest(self.fp16_kernels, rows) if self.fp16_kernels else "narrow"

    def snippets_for(self, ops: Sequence[Operation], measured: bool = True) -> str:
        """How OpenVINO's CPU plugin may use snippets (JIT-fused subgraphs) for this
        graph: `snippets_mode` where the user set it, else what the host profile
        measured for a graph of its rows (`measured` False for graphs that are not fp32
        throughout, which the profile did not time), else `DISABLE`.

        Snippets fuse MatMul-Softmax-MatMul(-Transpose) into one MHA kernel and runs of
        elementwise ops into one loop, and in 2024.4 the MHA kernel computes garbage
        when the heads and sequence dims are equal (found by `forge fuzz-models`;
        test_nnfactory_graph has the cases): such graphs are always compiled without
        snippets, whatever the variable or the profile says. They cost compile time
        (GPT-2's graph 0.73 -> 0.83 s on an AMD EPYC Zen 3) and pay off on some hosts
        and row counts only, so the profile decides."""
        if _ambiguous_attention(ops):
            return "DISABLE"
        if self.snippets_mode is not None:
            return self.snippets_mode
        rule = self.snippets if measured else ()
        rows = graph_rows(ops)
        if not rule or rows is None:
            return "DISABLE"
        return "ENABLE" if _nearest(rule, rows) else "DISABLE"

    def quantization_group_for(self, ops: Sequence[Operation], int8: bool) -> str:
        """The activations' quantization group this graph compiles with (0: weight-only):
        `quantization_group` where forced, else, for a graph with int8 weights (`int8`),
        what the host profile measured for its rows, else 0."""
        if self.quantization_group is not None:
            return self.quantization_group
        rows = graph_rows(ops)
        if not int8 or rows is None or not int8_dynamic_at(self.int8_dynamic, rows):
            return "0"
        return str(DYNAMIC_QUANTIZATION_GROUP)


@dataclass(frozen=True)
class Decision:
    """One choice the graph builder made: for the op at `index` of its segment (a
    linear of `rows` rows; -1 for the whole graph), `kind` ("kernel", "int8 kernel",
    "fp16 weights", "snippets", "quantization group") chose `kernel`, for `reason`."""

    index: int
    op: str
    rows: int
    kind: str
    kernel: str
    reason: str


def _ambiguous_attention(ops: Sequence[Operation]) -> bool:
    """Whether an attention product of `ops` has equal heads and sequence dims (where
    OpenVINO 2024.4's snippets MHA kernel computes garbage)."""
    for op in ops:
        if not isinstance(op, npu.SDPAOp | npu.MatmulOp):
            continue
        for value in [*op.operands, *op.results]:
            shape = value.type.get_shape() if isinstance(value.type, TensorType) else ()
            if len(shape) >= 4 and shape[-3] == shape[-2]:
                return True
    return False


def graph_rows(ops: Sequence[Operation]) -> int | None:
    """The rows of a graph's largest linear (what its rules are looked up by), or None
    when it has no linear."""
    rows = [linear_rows(op) for op in ops if isinstance(op, npu.WEIGHTED_LINEAR_OPS)]
    return max(rows) if rows else None


def int8_dynamic_at(rule: Int8DynamicRule, rows: int) -> bool:
    """Whether `rule` quantizes the activations of a graph whose largest linear has
    `rows` rows (the nearest measured row count's choice; none measured: no)."""
    return bool(rule) and bool(_nearest(rule, rows))


def _nearest(rule: Sequence[tuple[int, Any]], rows: int) -> Any:
    """The value of `rule`'s entry whose row count is nearest `rows` (log scale)."""
    bucket = min(rule, key=lambda entry: abs(math.log(max(rows, 1) / max(entry[0], 1))))
    return bucket[1]


def linear_kernel(rule: KernelRule, rows: int) -> str:
    """`rule`'s kernel for a product of `rows` rows: the nearest measured row count's."""
    return _nearest(rule, rows) if rule else "fused"


def linear_rows(op: npu.LinearOp | npu.AddmmOp | npu.FusedLinearOp) -> int:
    """The rows of a linear's product (its input's dims but the last; a dynamic dim
    counts as one)."""
    shape = op.input.type.get_shape() if isinstance(op.input.type, TensorType) else ()
    return math.prod(1 if dim == DYNAMIC else dim for dim in shape[:-1])


@contextlib.contextmanager
def nnfactory_env(**settings: str) -> Iterator[None]:
    """NNFactory's settings (`SNIPPETS_ENV`, `DYNAMIC_QUANTIZATION_ENV`, by variable
    name) in the environment around one graph compile, which reads them; put back
    afterwards. The one place a build writes the environment."""
    before = {name: os.environ.get(name) for name in settings}
    os.environ.update(settings)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
