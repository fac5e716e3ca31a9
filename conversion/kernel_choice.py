"""Which kernels and OpenVINO settings graphs compile with.

The host profile (`forge.transforms.host_profile`) measures, on this machine, which form
of a linear runs faster at which row count, and whether OpenVINO's snippets pay off;
`host_choices` makes those choices context variables that `nnfactory_graph` reads while
it builds and compiles a graph (and puts in its cache key), so one process can compile
graphs under different choices without passing them through every lowering.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import os
from collections.abc import Hashable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from xdsl.dialects.builtin import TensorType
from xdsl.ir import Operation

from forge.dialects import npu
from forge.dialects.shapes import DYNAMIC
from forge.support.diagnostics import ForgeError

if TYPE_CHECKING:
    from forge.transforms.host_profile import HostProfile


def snippets_mode(ops: Sequence[Operation], measured: bool = True) -> str:
    """How OpenVINO's CPU plugin may use snippets (JIT-fused subgraphs) for this graph:
    NNFACTORY_SNIPPETS_MODE where the user set it, else what the host profile measured
    for a graph of its rows (`snippets_by_rows`; `measured` False for graphs that are
    not fp32 throughout, which the profile did not time), else `DISABLE`.

    Snippets fuse MatMul-Softmax-MatMul(-Transpose) into one MHA kernel and runs of
    elementwise ops into one loop, and in 2024.4 the MHA kernel computes garbage when
    the heads and sequence dims are equal (found by `forge fuzz-models`;
    test_nnfactory_graph has the cases): such graphs are always compiled without
    snippets, whatever the variable or the profile says. They cost compile time (GPT-2's
    graph 0.73 -> 0.83 s on an AMD EPYC Zen 3) and pay off on some hosts and row counts
    only, so the profile decides.
    """
    for op in ops:
        if not isinstance(op, npu.SDPAOp | npu.MatmulOp):
            continue
        for value in [*op.operands, *op.results]:
            shape = value.type.get_shape() if isinstance(value.type, TensorType) else ()
            if len(shape) >= 4 and shape[-3] == shape[-2]:
                return "DISABLE"
    if "NNFACTORY_SNIPPETS_MODE" in os.environ:
        return os.environ["NNFACTORY_SNIPPETS_MODE"]
    rule = _SNIPPETS.get() if measured else ()
    rows = [linear_rows(op) for op in ops if isinstance(op, npu.WEIGHTED_LINEAR_OPS)]
    if not rule or not rows:
        return "DISABLE"
    return "ENABLE" if _nearest(rule, max(rows)) else "DISABLE"


SnippetsRule = tuple[tuple[int, bool], ...]
"""(rows, snippets on) per measured row count (`forge.transforms.host_profile.
KernelTiming.snippets`): an fp32 graph whose largest linear has the nearest row count
(log scale) compiles with OpenVINO's snippets on or off; none measured: off."""

_SNIPPETS: contextvars.ContextVar[SnippetsRule] = contextvars.ContextVar("snippets", default=())


@contextlib.contextmanager
def snippets_by_rows(rule: SnippetsRule) -> Iterator[None]:
    """Graphs compiled inside use OpenVINO's snippets where `rule` says so for their
    rows (`snippets_mode`)."""
    token = _SNIPPETS.set(tuple(rule))
    try:
        yield
    finally:
        _SNIPPETS.reset(token)


Int8DynamicRule = tuple[tuple[int, bool], ...]
"""(rows, activations quantized) per measured row count (`forge.transforms.host_profile.
KernelTiming.int8_dynamic`): a graph with int8 weights whose largest linear has the
nearest row count (log scale) quantizes its activations at run time or not; none
measured: weight-only."""

_INT8_DYNAMIC: contextvars.ContextVar[Int8DynamicRule] = contextvars.ContextVar(
    "int8_dynamic", default=()
)


@contextlib.contextmanager
def int8_dynamic_by_rows(rule: Int8DynamicRule) -> Iterator[None]:
    """Graphs with int8 weights compiled inside quantize their activations at run time
    where `rule` says so for their rows (`dynamic_quantization_group`)."""
    token = _INT8_DYNAMIC.set(tuple(rule))
    try:
        yield
    finally:
        _INT8_DYNAMIC.reset(token)


DYNAMIC_QUANTIZATION_ENV = "NNFACTORY_DYNAMIC_QUANTIZATION_GROUP_SIZE"


def int8_dynamic_at(rule: Int8DynamicRule, rows: int) -> bool:
    """Whether `rule` quantizes the activations of a graph whose largest linear has
    `rows` rows (the nearest measured row count's choice; none measured: no)."""
    return bool(rule) and bool(_nearest(rule, rows))


def dynamic_quantization_group(ops: Sequence[Operation], int8: bool) -> str:
    """The activations' quantization group this graph compiles with (0: weight-only):
    what `dynamic_quantization` (or the user) set, else, for a graph with int8 weights
    (`int8`), what the host profile measured for its rows (`int8_dynamic_by_rows`),
    else 0."""
    if DYNAMIC_QUANTIZATION_ENV in os.environ:
        return os.environ[DYNAMIC_QUANTIZATION_ENV]
    rule = _INT8_DYNAMIC.get()
    if not int8 or not rule:
        return "0"
    rows = [linear_rows(op) for op in ops if isinstance(op, npu.WEIGHTED_LINEAR_OPS)]
    if not rows or not int8_dynamic_at(rule, max(rows)):
        return "0"
    return str(DYNAMIC_QUANTIZATION_GROUP)


@contextlib.contextmanager
def host_choices(profile: HostProfile | None) -> Iterator[None]:
    """Graphs built inside follow `profile`'s measured choices: the fp32 and int8
    linears' kernel forms and the fp16 weights' (`linear_kernels`), OpenVINO's
    snippets (`snippets_by_rows`) and whether int8 graphs quantize their activations
    (`int8_dynamic_by_rows`); with no profile, OpenVINO's own forms, fp16 weights
    narrow, no snippets, int8 weight-only."""
    kernels = profile.kernel_rule() if profile else ()
    int8 = profile.int8_kernel_rule() if profile else ()
    fp16 = profile.fp16_kernel_rule() if profile else ()
    snippets = profile.snippets_rule() if profile else ()
    dynamic = profile.int8_dynamic_rule() if profile else ()
    with (
        linear_kernels(kernels, int8=int8, fp16=fp16),
        snippets_by_rows(snippets),
        int8_dynamic_by_rows(dynamic),
    ):
        yield


def _nearest(rule: Sequence[tuple[int, Any]], rows: int) -> Any:
    """The value of `rule`'s entry whose row count is nearest `rows` (log scale)."""
    bucket = min(rule, key=lambda entry: abs(math.log(max(rows, 1) / max(entry[0], 1))))
    return bucket[1]


@contextlib.contextmanager
def _nnfactory_env(name: str, value: str) -> Iterator[None]:
    """`name` set to `value` while graphs compile: NNFactory's build reads its settings
    (NNFACTORY_SNIPPETS_MODE, NNFACTORY_DYNAMIC_QUANTIZATION_GROUP_SIZE) at every
    compile."""
    before = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            del os.environ[name]
        else:
            os.environ[name] = before


def snippets_env(mode: str) -> contextlib.AbstractContextManager[None]:
    return _nnfactory_env("NNFACTORY_SNIPPETS_MODE", mode)


def quantization_group_env(group: str) -> contextlib.AbstractContextManager[None]:
    return _nnfactory_env(DYNAMIC_QUANTIZATION_ENV, group)


DYNAMIC_QUANTIZATION_GROUP = 32
"""Activations per scale when OpenVINO quantizes them at run time (its CPU default)."""


def dynamic_quantization(enabled: bool | None) -> contextlib.AbstractContextManager[None]:
    """Graphs compiled inside quantize the activations of their int8-weight MatMuls to
    int8 at run time (True), in groups of `DYNAMIC_QUANTIZATION_GROUP` (OpenVINO's
    dynamic quantization: int8 x int8 products, about twice as fast as weight-only int8
    for a prompt here, and further from the fp32 logits), or stay weight-only (False);
    None leaves it to the host profile (`dynamic_quantization_group`)."""
    if enabled is None:
        return contextlib.nullcontext()
    group = DYNAMIC_QUANTIZATION_GROUP if enabled else 0
    return _nnfactory_env(DYNAMIC_QUANTIZATION_ENV, str(group))


KernelRule = tuple[tuple[int, str], ...]
"""(rows, kernel) per measured row count (`forge.transforms.host_profile.KernelTiming`),
kernel one of `LINEAR_KERNELS`; a linear takes the nearest one's (log scale), none
measured: "fused"."""

LINEAR_KERNELS = ("fused", "apart", "onednn")
"""How an fp32 linear reaches OpenVINO. "fused": as it is (OpenVINO fuses an activation
into the FullyConnected, which then runs oneDNN's kernel; a plain linear runs MLAS).
"apart": activations kept out of the FullyConnected, so every linear runs MLAS.
"onednn": activations fused and every plain linear given an exact post-op, so every
linear runs oneDNN's kernel."""

_LINEAR_KERNELS: contextvars.ContextVar[KernelRule] = contextvars.ContextVar(
    "linear_kernels", default=()
)


_INT8_KERNELS: contextvars.ContextVar[KernelRule] = contextvars.ContextVar(
    "int8_linear_kernels", default=()
)

_FP16_KERNELS: contextvars.ContextVar[KernelRule] = contextvars.ContextVar(
    "fp16_linear_kernels", default=()
)

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

INT8_KERNELS = ("fused", "apart")
"""How an int8-weight linear with an activation reaches OpenVINO (its kernel is oneDNN's
either way): the activation fused into the FullyConnected, or computed after it."""


@contextlib.contextmanager
def linear_kernels(
    rule: KernelRule, int8: KernelRule = (), fp16: KernelRule = ()
) -> Iterator[None]:
    """Graphs built inside lower each fp32 linear for the kernel `rule` gives its row
    count (`LINEAR_KERNELS`), each int8-weight linear for the form `int8` gives it
    (`INT8_KERNELS`), and store fp16 weights in the form `fp16` gives the rows of the
    linears reading them (`FP16_KERNELS`).

    A FullyConnected with a post-op (a fused activation) cannot take OpenVINO's MLAS
    kernel: with fp32 weights it runs oneDNN's brgemm/brgconv instead. Which wins
    depends on the host and the rows: on an AMD EPYC Zen 4 (2 cores) MLAS reads a
    one-row (decode) product's weights about 20% faster (12 GPT-2 MLPs 8.5 -> 7.0 ms),
    and oneDNN computes a 100-row (prompt) product about 12% faster (24 GPT-2 linears
    55.0 -> 48.4 ms). `forge doctor --profile` measures it."""
    unknown = [kernel for _rows, kernel in rule if kernel not in LINEAR_KERNELS]
    unknown += [kernel for _rows, kernel in int8 if kernel not in INT8_KERNELS]
    unknown += [kernel for _rows, kernel in fp16 if kernel not in FP16_KERNELS]
    if unknown:
        raise ForgeError(f"unknown linear kernel(s) {', '.join(unknown)}")
    token = _LINEAR_KERNELS.set(tuple(rule))
    int8_token = _INT8_KERNELS.set(tuple(int8))
    fp16_token = _FP16_KERNELS.set(tuple(fp16))
    try:
        yield
    finally:
        _FP16_KERNELS.reset(fp16_token)
        _INT8_KERNELS.reset(int8_token)
        _LINEAR_KERNELS.reset(token)


def fp16_form(rows: int) -> str:
    """How fp16 weights read by products of `rows` rows are stored (`FP16_KERNELS`):
    the nearest measured row count's form; none measured: "narrow", what was asked."""
    rule = _FP16_KERNELS.get()
    return _nearest(rule, rows) if rule else "narrow"


def linear_kernel(rule: KernelRule, rows: int) -> str:
    """`rule`'s kernel for a product of `rows` rows: the nearest measured row count's."""
    return _nearest(rule, rows) if rule else "fused"


def linear_rows(op: npu.LinearOp | npu.AddmmOp | npu.FusedLinearOp) -> int:
    """The rows of a linear's product (its input's dims but the last; a dynamic dim
    counts as one)."""
    shape = op.input.type.get_shape() if isinstance(op.input.type, TensorType) else ()
    return math.prod(1 if dim == DYNAMIC else dim for dim in shape[:-1])


def kernel_rule(storage: str) -> KernelRule:
    """The rule in force for linears whose weights are stored as `storage` ("float" or
    "int8")."""
    return _INT8_KERNELS.get() if storage == "int8" else _LINEAR_KERNELS.get()


def choices_key() -> Hashable:
    """Every choice in force, for the key of a graph compiled under them."""
    return (
        os.environ.get("NNFACTORY_SNIPPETS_MODE"),
        os.environ.get(DYNAMIC_QUANTIZATION_ENV),
        _INT8_DYNAMIC.get(),
        _LINEAR_KERNELS.get(),
        _INT8_KERNELS.get(),
        _FP16_KERNELS.get(),
        _SNIPPETS.get(),
    )
