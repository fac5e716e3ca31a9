"""Measure this host once, cache it, and let placement read the measurements.

A short microbenchmark suite (about 7 s on 2 cores) times, on the machine Forge runs
on, what placement used to decide by rule: each op in an NNFactory graph against the
executor's CPU kernel for it (linears by shape bucket, a vocabulary head among them,
attention, a layer norm, an elementwise run), the cost of one NPU<->CPU transition
(a small graph run as one segment against the same ops split into two), one
dispatch of a trivial graph, the OpenVINO thread setting that matters here (one
thread against all; the performance hint is LATENCY already, set by NNFactory's build),
the linear kernels by row count, and in the kernel each row count chose, OpenVINO's
snippets off against on.

Vocabulary heads are measured at 8192 outputs, not 50257 or 128256: the profile stays
within its time budget, and placement scales a bucket's times by FLOP to the op's
shape (`forge.transforms.host_profile`), which is linear in the output width for a GEMM.

The result is JSON (`forge.transforms.host_profile.FORMAT`), cached per host as
`host-profile-<key>.json` in Forge's cache root (`forge.support.host.cache_root`:
`$FORGE_CACHE_DIR`, else `$XDG_CACHE_HOME/forge`, else `~/.cache/forge`, a 0700 folder),
where the key hashes the CPU model, core count and the torch, OpenVINO, NNFactory and
Forge versions: a change of any of them measures again. A missing file is measured on
first use; an unreadable one gets a one-line note on stderr and is measured again.
`FORGE_HOST_PROFILE=PATH` makes every compile use that file instead (tests use fixed
profiles so their plans do not depend on the machine).
"""

from __future__ import annotations

import atexit
import hashlib
import importlib.util
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from xdsl.dialects import func

from forge.conversion.kernel_choice import INT8_KERNELS, LINEAR_KERNELS, BuildOptions
from forge.conversion.nnfactory_graph import build_segment
from forge.dialects import npu
from forge.dialects.context import entry_function, parse_module
from forge.support.diagnostics import ForgeError
from forge.support.files import atomic_write
from forge.support.host import (
    cache_folder,
    cores,
    cpu_model,
    distribution_version,
    nnfactory_build,
)
from forge.target.cpu_kernels import cpu_kernel, packed_linear_kernel
from forge.transforms.host_profile import (
    FORMAT,
    HostProfile,
    KernelTiming,
    ProfileError,
    profile_from_json,
    read_profile,
)
from forge.transforms.npu_assign_precision import record_precision

PROFILE_ENV = "FORGE_HOST_PROFILE"
"""A profile file every compile uses as it is (never measured nor rewritten)."""

SUITE = "11"
"""The suite's own version: changing what it measures invalidates every cached profile
(7: `apart` computes a tanh GELU through Sigmoid, not Tanh; 8: OpenVINO's snippets off
against on, per row count, and the int8 MLPs' activation fused against apart; 9: fp16
weights as fp32 values against kept fp16; 10: fp16 weights kept fp16 against the fp32
weights in the fp32 kernel form chosen, one set of MLP weights per row count; 11: the
int8 MLPs with their activations quantized at run time, against weight-only)."""

LINEAR_BUCKETS: tuple[tuple[int, int, int, str], ...] = (
    (1, 768, 768, ""),
    (1, 768, 8192, "head, decode, scaled vocabulary"),
    (128, 768, 768, ""),
    (128, 768, 3072, ""),
    (128, 3072, 768, ""),
    (128, 2048, 2048, ""),
    (128, 768, 8192, "head, scaled vocabulary"),
)
"""(rows, in, out, label): decode (1 row) and prefill (128 rows) linears of GPT-2- and
Llama-sized models; a label with `head` is a vocabulary head (one transition)."""

KERNEL_BUCKETS: tuple[tuple[int, int], ...] = ((1, 4), (128, 2))
"""(rows, MLP layers) at which the linear kernels are timed against each other: a
decode step's product reads its weights (four GPT-2 MLPs, 75 MB, more than a cache
holds), a prompt's computes (two MLPs, one per activation of `KERNEL_ACTIVATIONS`)."""

KERNEL_ACTIVATIONS = ("gelu_tanh", "silu")
"""The activations the kernel suite's MLPs take in turn: the ones the models fuse into
their first MLP linear (GPT-2's and Phi's tanh GELU, Llama's, Qwen's and Granite's SiLU
gate). What OpenVINO's oneDNN kernel costs with a fused activation depends on the
activation: on an AMD EPYC Zen 3 (2 cores, AVX2), four 128-row MLPs with tanh GELU,
OpenVINO's own form (oneDNN for the fused one) against all MLAS was 48.8 against 43.9
ms, where the erf GELU of suite 5 had measured them 4% apart (8.73 / 8.40 ms), under
the margin, and GPT-2's prefill ran 9% slower than it could."""

KERNEL_ROUND_SECONDS = 1.0

SWITCH_BUCKET = "128x2048x2048"
"""The linear bucket `switch_penalties` is measured on."""

ROUND_SECONDS = 2.0
"""How long the first block of timed rounds (every linear bucket and op against its CPU
kernel) runs once its graphs are compiled: 20 rounds or more on 2 cores."""
SUITE_SECONDS = 8.0
"""The wall time the suite aims at, compiles included: a block of rounds that starts
late (slow compiles, a busy host) runs shorter, down to `MIN_ROUNDS`, so that the build
stays within the 10 s it may take. On an AMD EPYC Zen 3 (2 cores, a slow-memory spell)
3 s, 1 s and 1 s of rounds had made 10.1-15.1 s builds."""
MIN_ROUNDS = 3
MAX_ROUNDS = 40

Pair = tuple[Callable[[], Any], ...]
"""What one comparison times: (the NNFactory side, the CPU side), or several graphs."""


# --------------------------------------------------------------------- the key


def host_key() -> dict[str, str]:
    """What the measurements depend on; any change measures again."""
    return {
        "cpu": cpu_model(),
        "cores": str(cores()),
        "torch": distribution_version("torch"),
        "openvino": distribution_version("openvino"),
        "nnfactory": nnfactory_build(),
        "forge": distribution_version("forge-ugc"),
        "suite": SUITE,
    }


def key_digest(key: dict[str, str]) -> str:
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]


def cache_path(key: dict[str, str] | None = None) -> Path:
    return cache_folder("host-profile") / f"host-profile-{key_digest(key or host_key())}.json"


# ---------------------------------------------------------------- measurement


def _rounds(pairs: dict[str, Pair], seconds: float = ROUND_SECONDS) -> dict[str, tuple[float, ...]]:
    """The fastest ms of each side of each pair, over rounds that run every pair once.
    Within a round every first side runs, then every second side (and so on, where
    the pairs have more sides), each block after an untimed call of its first
    function: an op in an NNFactory graph follows graph work and a CPU kernel follows
    CPU work, as they run in a plan (what switching devices costs is
    `switch_penalties`' to measure). Rounds spread each pair's samples over the whole
    suite, so a burst of load from other processes cannot spoil every sample of one
    pair; the minimum is the figure least disturbed by them (a parallel GEMM waits for
    its slowest thread: one busy core can double a run)."""
    sides = len(next(iter(pairs.values())))
    for pair in pairs.values():
        for run in pair:
            run()  # warm-up: page in weights and results, let OpenVINO pick its kernels
    best = {name: [float("inf")] * sides for name in pairs}
    deadline = time.perf_counter() + seconds
    rounds = 0
    while rounds < MAX_ROUNDS and (rounds < MIN_ROUNDS or time.perf_counter() < deadline):
        for side in range(sides):
            next(iter(pairs.values()))[side]()  # the block's device is the one running
            for name, pair in pairs.items():
                start = time.perf_counter()
                pair[side]()
                best[name][side] = min(best[name][side], (time.perf_counter() - start) * 1e3)
        rounds += 1
    return {name: tuple(times) for name, times in best.items()}


@dataclass(frozen=True)
class _Budget:
    """The suite's deadline, shared out among its blocks of rounds."""

    deadline: float

    def seconds(self, nominal: float, share: float) -> float:
        """At most `nominal`, and at most `share` of the time left to the deadline (the
        rest is for the compiles and blocks still to come)."""
        left = self.deadline - time.perf_counter()
        return max(0.0, min(nominal, left * share))


def switch_penalties(npu: Callable[[], Any], cpu: Callable[[], Any]) -> tuple[float, float]:
    """(ms an NNFactory graph loses right after a CPU kernel, ms a CPU kernel loses
    right after a graph), against each after its own kind: torch's OpenMP workers spin
    after a parallel kernel and OpenVINO's TBB workers after a graph, each holding the
    cores the other device's threads now need. On a 2-core AMD EPYC a 128x2048x2048
    linear in a graph took 9.8 ms after the CPU kernel against 5.5 ms after a graph:
    a cost of moving an op to the CPU that a split of one graph in two does not show."""
    best = {key: float("inf") for key in ("npu_npu", "cpu_npu", "cpu_cpu", "npu_cpu")}
    runs = {"npu": npu, "cpu": cpu}
    for _ in range(MIN_ROUNDS * 2):
        for key in best:
            before, timed = key.split("_")
            runs[before]()
            start = time.perf_counter()
            runs[timed]()
            best[key] = min(best[key], (time.perf_counter() - start) * 1e3)
    return (
        max(best["cpu_npu"] - best["npu_npu"], 0.0),
        max(best["npu_cpu"] - best["cpu_cpu"], 0.0),
    )


@dataclass
class _Graph:
    """A parsed one-function module and tensors for its arguments."""

    ops: list[npu.NpuOp]
    inputs: list[torch.Tensor]
    constants: dict[Any, torch.Tensor]
    """Weight arguments -> tensors, baked into the graph as the executor does."""
    function: func.FuncOp

    def segment(
        self,
        ops: Sequence[npu.NpuOp] | None = None,
        precision: str = "fp32",
        options: BuildOptions | None = None,
    ) -> Callable[[], Any]:
        record_precision(self.function, precision)  # the IR states it, as after the pipeline
        segment = build_segment(list(ops or self.ops), options, constants=self.constants)
        tensors = [self._tensor(v) for v in segment.inputs]
        return lambda: segment(*tensors)

    def _tensor(self, value: Any) -> torch.Tensor:
        if value in self.constants:
            return self.constants[value]
        index = value.index  # a block argument
        return self.inputs[index]


def _graph(text: str, shapes: Sequence[Sequence[int]], num_inputs: int) -> _Graph:
    function = entry_function(parse_module(text, "<host profile>"))
    assert isinstance(function, func.FuncOp)
    tensors = _uniform(shapes)
    args = function.body.block.args
    ops = [op for op in function.body.block.ops if isinstance(op, npu.NpuOp)]
    constants = {args[i]: tensors[i] for i in range(num_inputs, len(args))}
    return _Graph(ops, tensors[:num_inputs], constants, function)


def _uniform(shapes: Sequence[Sequence[int]]) -> list[torch.Tensor]:
    """Seeded values in [-0.05, 0.05): NumPy's float32 generator fills them 3x faster than
    `torch.randn` (the suite's weights took 1 s of a 10 s build with it); what the
    suite times does not depend on the values."""
    generator = np.random.default_rng(0)
    tensors = []
    for shape in shapes:
        values = generator.random(tuple(shape), dtype=np.float32)
        values -= 0.5
        values *= 0.1
        tensors.append(torch.from_numpy(values))
    return tensors


def _t(shape: Sequence[int]) -> str:
    return f"tensor<{'x'.join(map(str, shape))}xf32>"


def linear_pair(rows: int, in_features: int, out_features: int) -> Pair:
    """`x @ W^T` as an NNFactory single-op graph and as the executor's CPU kernel."""
    x, w, y = (rows, in_features), (out_features, in_features), (rows, out_features)
    text = (
        f"func.func @linear(%x: {_t(x)}, %w: {_t(w)}) -> {_t(y)} {{\n"
        f"  %0 = npu.linear %x, %w : ({_t(x)}, {_t(w)}) -> {_t(y)}\n"
        f"  func.return %0 : {_t(y)}\n}}"
    )
    graph = _graph(text, [x, w], 1)
    op = graph.ops[0]
    weight = graph.constants[op.operands[1]]
    kernel = packed_linear_kernel(op, weight)
    tensor = graph.inputs[0]
    return graph.segment(), lambda: kernel(tensor, weight)


def _mlps(rows: int, layers: int) -> _Graph:
    """GPT-2-sized MLPs (768 -> 3072 with an activation of `KERNEL_ACTIVATIONS` in
    turn, 3072 -> 768), `rows` rows, `layers` of them in a row."""
    x, h = _t((rows, 768)), _t((rows, 3072))
    w1, w2 = _t((3072, 768)), _t((768, 3072))
    params = ", ".join(f"%a{i}: {w1}, %b{i}: {w2}" for i in range(layers))
    body = []
    value = "%x"
    for i in range(layers):
        body.append(
            f"  %u{i} = npu.fused_linear {value}, %a{i} "
            f'{{activation = "{KERNEL_ACTIVATIONS[i % len(KERNEL_ACTIVATIONS)]}"}} : '
            f"({x}, {w1}) -> {h}"
        )
        body.append(f"  %d{i} = npu.linear %u{i}, %b{i} : ({h}, {w2}) -> {x}")
        value = f"%d{i}"
    text = (
        f"func.func @mlp(%x: {x}, {params}) -> {x} {{\n" + "\n".join(body) + "\n"
        f"  func.return {value} : {x}\n}}"
    )
    shapes = [(rows, 768)] + [(3072, 768), (768, 3072)] * layers
    return _graph(text, shapes, 1)


def _transformer_layers(rows: int, layers: int) -> _Graph:
    """GPT-2-sized transformer layers (12 heads of 64, causal attention over the `rows`
    rows, the MLP of `_mlps`), each block after a layer norm and before its residual
    add: what OpenVINO's snippets fuse (attention with its head transposes, elementwise
    runs) besides the linears."""
    x, h, g = _t((rows, 768)), _t((rows, 3072)), _t((768,))
    split, heads = _t((1, rows, 12, 64)), _t((1, 12, rows, 64))
    w, w1, w2 = _t((768, 768)), _t((3072, 768)), _t((768, 3072))
    norm = "{{normalized_shape = array<i64: 768>, eps = 1.000000e-05 : f64}}"
    swap = "{{dim0 = 1 : i64, dim1 = 2 : i64}}"
    layer = [
        f"%n{{i}} = npu.layer_norm {{x}} weight %g{{i}} : {g} bias %c{{i}} : {g} "
        f"{norm} : {x} -> {x}",
        *(
            f"%{p}{{i}} = npu.linear %n{{i}}, %w{p}{{i}} : ({x}, {w}) -> {x}\n"
            f"%{p}s{{i}} = npu.reshape %{p}{{i}} : {x} -> {split}\n"
            f"%{p}h{{i}} = npu.transpose %{p}s{{i}} {swap} : {split} -> {heads}"
            for p in "qkv"
        ),
        f"%a{{i}} = npu.sdpa %qh{{i}}, %kh{{i}}, %vh{{i}} {{{{scale = 1.250000e-01 : f64, "
        f"is_causal}}}} : ({heads}, {heads}, {heads}) -> {heads}",
        f"%at{{i}} = npu.transpose %a{{i}} {swap} : {heads} -> {split}",
        f"%ar{{i}} = npu.reshape %at{{i}} : {split} -> {x}",
        f"%o{{i}} = npu.linear %ar{{i}}, %wo{{i}} : ({x}, {w}) -> {x}",
        f"%r{{i}} = npu.add %o{{i}}, {{x}} : ({x}, {x}) -> {x}",
        f"%m{{i}} = npu.layer_norm %r{{i}} weight %e{{i}} : {g} bias %f{{i}} : {g} "
        f"{norm} : {x} -> {x}",
        f'%u{{i}} = npu.fused_linear %m{{i}}, %a1{{i}} {{{{activation = "{{act}}"}}}} : '
        f"({x}, {w1}) -> {h}",
        f"%d{{i}} = npu.linear %u{{i}}, %a2{{i}} : ({h}, {w2}) -> {x}",
        f"%y{{i}} = npu.add %d{{i}}, %r{{i}} : ({x}, {x}) -> {x}",
    ]
    params, body, value = [], [], "%x"
    for i in range(layers):
        act = KERNEL_ACTIVATIONS[i % len(KERNEL_ACTIVATIONS)]
        body += [line.format(i=i, x=value, act=act) for line in layer]
        params += [f"%g{i}: {g}, %c{i}: {g}, %wq{i}: {w}, %wk{i}: {w}, %wv{i}: {w}"]
        params += [f"%wo{i}: {w}, %e{i}: {g}, %f{i}: {g}, %a1{i}: {w1}, %a2{i}: {w2}"]
        value = f"%y{i}"
    text = (
        f"func.func @layers(%x: {x}, {', '.join(params)}) -> {x} {{\n"
        + "\n".join("  " + line for line in "\n".join(body).split("\n"))
        + f"\n  func.return {value} : {x}\n}}"
    )
    weights = [(768,), (768,), *[(768, 768)] * 4, (768,), (768,), (3072, 768), (768, 3072)]
    return _graph(text, [(rows, 768)] + weights * layers, 1)


def kernel_forms(graph: _Graph, rows: int) -> Pair:
    """`graph` (`_mlps`) as one NNFactory graph in each form of `LINEAR_KERNELS`:
    (fused, apart, onednn)."""
    forms = []
    for kernel in LINEAR_KERNELS:
        forms.append(graph.segment(options=BuildOptions(linear_kernels=((rows, kernel),))))
    return tuple(forms)


def int8_forms(graph: _Graph, rows: int) -> Pair:
    """`graph` (`_mlps`) with int8 weights, as one NNFactory graph in each form of
    `INT8_KERNELS`, weight-only, then in OpenVINO's form with the activations quantized
    at run time: (fused, apart, dynamic)."""
    forms = []
    for kernel in INT8_KERNELS:
        weight_only = BuildOptions.for_host(None, False, int8_kernels=((rows, kernel),))
        forms.append(graph.segment(precision="int8", options=weight_only))
    dynamic = BuildOptions.for_host(None, True, int8_kernels=((rows, "fused"),))
    forms.append(graph.segment(precision="int8", options=dynamic))
    return tuple(forms)


def fp16_forms(graph: _Graph, rows: int, kernel: str) -> Pair:
    """`graph` (`_mlps`) in each form of `FP16_KERNELS`: (wide: its fp32 weights in the
    fp32 kernel form `kernel`, which `kernel_forms` compiled already; narrow: its
    weights kept fp16)."""
    wide = graph.segment(options=BuildOptions(linear_kernels=((rows, kernel),)))
    narrow = graph.segment(precision="fp16", options=BuildOptions(fp16_kernels=((rows, "narrow"),)))
    return wide, narrow


def snippets_pair(rows: int, layers: int, kernel: str) -> Pair:
    """`_transformer_layers` with the linears in the form `kernel`, compiled with
    OpenVINO's snippets off and on (`BuildOptions.snippets`)."""
    graph = _transformer_layers(rows, layers)
    pair = []
    for enabled in (False, True):
        options = BuildOptions(linear_kernels=((rows, kernel),), snippets=((rows, enabled),))
        pair.append(graph.segment(options=options))
    return tuple(pair)


def _cpu_run(graph: _Graph) -> Callable[[], Any]:
    """The ops one by one through their CPU kernels, as the executor runs CPU steps."""
    kernels = [(cpu_kernel(op), op) for op in graph.ops]

    def run() -> None:
        values: dict[Any, torch.Tensor] = {}
        for kernel, op in kernels:
            args = [values.get(v) if v in values else graph._tensor(v) for v in op.operands]
            values[op.results[0]] = kernel(*args)

    return run


def ops_pair(text: str, shapes: Sequence[Sequence[int]], num_inputs: int) -> Pair:
    graph = _graph(text, shapes, num_inputs)
    return graph.segment(), _cpu_run(graph)


def _sdpa() -> tuple[str, Pair]:
    q, m = (1, 12, 128, 64), (1, 1, 128, 128)
    text = (
        f"func.func @attention(%q: {_t(q)}, %k: {_t(q)}, %v: {_t(q)}, %m: {_t(m)}) -> {_t(q)} {{\n"
        f"  %0 = npu.sdpa %q, %k, %v, %m {{scale = 1.250000e-01 : f64}} : "
        f"({_t(q)}, {_t(q)}, {_t(q)}, {_t(m)}) -> {_t(q)}\n"
        f"  func.return %0 : {_t(q)}\n}}"
    )
    return "1x12x128x64", ops_pair(text, [q, q, q, m], 4)


def _layer_norm() -> tuple[str, Pair]:
    x, g = (128, 768), (768,)
    text = (
        f"func.func @norm(%x: {_t(x)}, %g: {_t(g)}, %b: {_t(g)}) -> {_t(x)} {{\n"
        f"  %0 = npu.layer_norm %x weight %g : {_t(g)} bias %b : {_t(g)} "
        f"{{normalized_shape = array<i64: 768>, eps = 1.000000e-05 : f64}} : {_t(x)} -> {_t(x)}\n"
        f"  func.return %0 : {_t(x)}\n}}"
    )
    return "128x768", ops_pair(text, [x, g, g], 1)


def _elementwise() -> tuple[str, Pair]:
    x = (128, 3072)
    t = _t(x)
    text = (
        f"func.func @run(%x: {t}, %y: {t}) -> {t} {{\n"
        f"  %0 = npu.mul %x, %y : ({t}, {t}) -> {t}\n"
        f"  %1 = npu.add %0, %x : ({t}, {t}) -> {t}\n"
        f"  %2 = npu.gelu %1 : {t}\n"
        f"  func.return %2 : {t}\n}}"
    )
    return "mul,add,gelu 128x3072", ops_pair(text, [x, x], 2)


def dispatch_pair() -> Pair:
    """A trivial graph (an add of 8 floats), twice: one call is what any segment costs."""
    t = _t((1, 8))
    text = (
        f"func.func @tiny(%x: {t}, %y: {t}) -> {t} {{\n"
        f"  %0 = npu.add %x, %y : ({t}, {t}) -> {t}\n  func.return %0 : {t}\n}}"
    )
    graph = _graph(text, [(1, 8), (1, 8)], 2)
    run = graph.segment()
    return run, run


def transition_pair() -> Pair:
    """(one segment, the same two linears as two segments) at GPT-2's hidden size:
    the split adds a dispatch, a copy out and a copy in, i.e. the two transitions an op
    moved to the CPU between NPU ops costs."""
    x, w = (128, 768), (768, 768)
    t, tw = _t(x), _t(w)
    text = (
        f"func.func @pair(%x: {t}, %w1: {tw}, %w2: {tw}) -> {t} {{\n"
        f"  %0 = npu.linear %x, %w1 : ({t}, {tw}) -> {t}\n"
        f"  %1 = npu.linear %0, %w2 : ({t}, {tw}) -> {t}\n"
        f"  func.return %1 : {t}\n}}"
    )
    graph = _graph(text, [x, w, w], 1)
    whole = graph.segment()
    first, second = graph.segment(graph.ops[:1]), graph.segment(graph.ops[1:])
    return whole, lambda: second_after(first, second)


def second_after(first: Callable[[], Any], second: Callable[[], Any]) -> None:
    first()
    second()


def threads_pair() -> Pair:
    """OpenVINO's CPU plugin on a 128x768x768 MatMul, LATENCY hint, with all threads
    and with one: whether NNFactory's default (all) is right here."""
    import openvino as ov  # loaded by NNFactory's build already; its Python API here only

    try:
        import openvino.opset13 as ops  # OpenVINO 2025+
    except ImportError:
        import openvino.runtime.opset13 as ops  # 2024, where NNFactory is built

    parameter = ops.parameter([128, 768], ov.Type.f32)
    weight = ops.constant(torch.randn(768, 768).numpy())
    model = ov.Model([ops.matmul(parameter, weight, False, True)], [parameter])
    core = ov.Core()
    x = torch.randn(128, 768).numpy()
    requests = []
    for threads in (0, 1):
        config = {"PERFORMANCE_HINT": "LATENCY", "INFERENCE_NUM_THREADS": threads}
        requests.append(core.compile_model(model, "CPU", config).create_infer_request())
    return lambda: requests[0].infer([x]), lambda: requests[1].infer([x])


def build_profile() -> dict[str, Any]:
    """Run the suite; the profile as a JSON document (measurements and decisions)."""
    start = time.perf_counter()
    budget = _Budget(start + SUITE_SECONDS)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    with torch.no_grad():
        # A linear first: `_rounds` opens each block with its first pair's side. Pairs
        # whose sides both run graphs (dispatch, transition, threads) go last.
        pairs: dict[str, Pair] = {}
        for rows, in_features, out_features, _label in LINEAR_BUCKETS:
            pairs[f"linear {rows}x{in_features}x{out_features}"] = linear_pair(
                rows, in_features, out_features
            )
        shapes = {}
        for kind, make in (
            ("sdpa", _sdpa),
            ("layer_norm", _layer_norm),
            ("elementwise", _elementwise),
        ):
            shapes[kind], pairs[kind] = make()
        pairs["dispatch"] = dispatch_pair()
        pairs["transition"] = transition_pair()
        # OpenVINO's Python API is the optional bench extra; NNFactory does not need it.
        if importlib.util.find_spec("openvino") is not None:
            pairs["threads"] = threads_pair()
        times = _rounds(pairs, budget.seconds(ROUND_SECONDS, 0.4))
        # Graph against graph: in rounds of their own, so that neither side follows
        # the CPU kernels of the rounds above (see `switch_penalties`).
        # One set of MLP weights per row count serves every form timed on it.
        mlps = {rows: _mlps(rows, layers) for rows, layers in KERNEL_BUCKETS}
        kernels = {f"kernels {rows}": kernel_forms(mlps[rows], rows) for rows in mlps}
        times.update(_rounds(kernels, budget.seconds(KERNEL_ROUND_SECONDS, 0.3)))
        chosen = {rows: KernelTiming(rows, *times[f"kernels {rows}"]).kernel for rows in mlps}
        # Snippets in the form each row count chose, off against on, and the fp16
        # weights' two forms: pairs of graphs, in rounds of their own.
        graph_pairs = {f"fp16 {rows}": fp16_forms(mlps[rows], rows, chosen[rows]) for rows in mlps}
        graph_pairs |= {
            f"snippets {rows}": snippets_pair(rows, layers, chosen[rows])
            for rows, layers in KERNEL_BUCKETS
        }
        times.update(_rounds(graph_pairs, budget.seconds(KERNEL_ROUND_SECONDS, 0.6)))
        # The int8 MLPs' three forms (two weight-only, one quantizing the activations).
        int8 = {f"int8 {rows}": int8_forms(mlps[rows], rows) for rows in mlps}
        times.update(_rounds(int8, budget.seconds(KERNEL_ROUND_SECONDS, 0.6)))
        # At the largest prefill bucket (Llama's hidden size), where it costs the most.
        switch = switch_penalties(*pairs[f"linear {SWITCH_BUCKET}"])
    dispatch = times["dispatch"][0]
    linears = []
    for rows, in_features, out_features, label in LINEAR_BUCKETS:
        graph_ms, cpu_ms = times[f"linear {rows}x{in_features}x{out_features}"]
        linears.append(
            {
                "rows": rows,
                "in": in_features,
                "out": out_features,
                "label": label,
                "npu_graph_ms": round(graph_ms, 4),
                "npu_ms": round(max(graph_ms - dispatch, 0.0), 4),
                "cpu_ms": round(cpu_ms, 4),
            }
        )
    ops = []
    for kind, shape in shapes.items():
        graph_ms, cpu_ms = times[kind]
        ops.append(
            {
                "kind": kind,
                "shape": shape,
                "npu_graph_ms": round(graph_ms, 4),
                "npu_ms": round(max(graph_ms - dispatch, 0.0), 4),
                "cpu_ms": round(cpu_ms, 4),
            }
        )
    kernel_times = []
    for rows, _layers in KERNEL_BUCKETS:
        forms = dict(zip(LINEAR_KERNELS, times[f"kernels {rows}"], strict=True))
        off, on = times[f"snippets {rows}"]
        forms |= {"snippets_off": off, "snippets": on}
        int8 = ("int8_fused", "int8_apart", "int8_dynamic")
        forms |= dict(zip(int8, times[f"int8 {rows}"], strict=True))
        forms |= dict(zip(("fp16_wide", "fp16_narrow"), times[f"fp16 {rows}"], strict=True))
        kernel_times.append({"rows": rows} | {f"{k}_ms": round(ms, 4) for k, ms in forms.items()})
    whole_ms, split_ms = times["transition"]
    settings: dict[str, Any] = {
        "openvino_threads": os.cpu_count() or 1,
        "openvino_hint": "LATENCY",
        "torch_threads": torch.get_num_threads(),
        "load_average": round(load, 2),
    }
    if "threads" in times:
        all_ms, one_ms = times["threads"]
        settings["openvino_all_threads_ms"] = round(all_ms, 4)
        settings["openvino_one_thread_ms"] = round(one_ms, 4)
        settings["openvino_threads_decision"] = "all" if all_ms <= one_ms else "1"
    data: dict[str, Any] = {
        "format": FORMAT,
        "key": host_key(),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "dispatch_ms": round(dispatch, 4),
        # A split adds a graph call at least: noise cannot make it cheaper than one. An
        # op moved to the CPU also switches devices twice (one penalty each way).
        "transition_ms": round(max(split_ms - whole_ms, dispatch) / 2 + sum(switch) / 2, 4),
        "transition_measured": {
            "graph": "linear 128x768x768 -> linear 128x768x768",
            "one_segment_ms": round(whole_ms, 4),
            "two_segments_ms": round(split_ms, 4),
            "switch": f"linear {SWITCH_BUCKET}",
            "graph_after_cpu_ms": round(switch[0], 4),
            "cpu_after_graph_ms": round(switch[1], 4),
        },
        "linears": linears,
        "ops": ops,
        "kernels": kernel_times,
        "settings": settings,
    }
    data["build_seconds"] = round(time.perf_counter() - start, 3)
    profile = profile_from_json(data)
    data["decisions"] = [
        {
            "what": what,
            "npu_ms": round(e.npu_ms, 4),
            "cpu_ms": round(e.cpu_ms, 4),
            "hops": e.hops,
            "device": e.device,
        }
        for what, e in profile.decisions()
    ]
    return data


# ---------------------------------------------------------------------- cache


@dataclass(frozen=True)
class LoadedProfile:
    path: Path
    profile: HostProfile
    built: bool
    """Measured by this call (not read from the cache)."""
    load_seconds: float


def _write(path: Path, data: dict[str, Any]) -> None:
    folder = path.parent
    if not folder.exists():
        try:
            folder.mkdir(mode=0o700, parents=True)
        except OSError as e:
            raise ForgeError(f"cannot create {folder}: {e.strerror or e}") from e
    with atomic_write(path) as stream:
        json.dump(data, stream, indent=1)
        stream.write("\n")


def load_host_profile(rebuild: bool = False) -> LoadedProfile:
    """The profile every compile on this host uses: `$FORGE_HOST_PROFILE` as it is, else
    the cached one for this host's key, measured (and saved) when absent, stale or
    unreadable (with a one-line note on stderr for an unreadable file)."""
    start = time.perf_counter()
    fixed = os.environ.get(PROFILE_ENV)
    if fixed and not rebuild:
        profile = read_profile(fixed)
        return LoadedProfile(Path(fixed), profile, False, time.perf_counter() - start)
    key = host_key()
    path = cache_path(key)
    if path.exists() and not rebuild:
        try:
            profile = read_profile(path)
            if dict(profile.key) == key:
                return LoadedProfile(path, profile, False, time.perf_counter() - start)
            reason = "it was measured for another host key"
        except ProfileError as e:
            reason = e.args[0]
        print(
            f"note: host profile {path} is unreadable ({reason}); measuring again", file=sys.stderr
        )
    data = build_profile()
    path = _saved(path, data)
    return LoadedProfile(
        path, profile_from_json(data, str(path)), True, time.perf_counter() - start
    )


def _saved(path: Path, data: dict[str, Any]) -> Path:
    """Where the measured profile was written: `path`, or, when its folder cannot be
    written, a temporary file this process removes at exit (with a note: a cache that
    cannot be written must not fail the compile)."""
    try:
        _write(path, data)
        return path
    except (ForgeError, OSError) as e:
        reason = str(e).removeprefix("error: ") if isinstance(e, ForgeError) else e.strerror
    fd, name = tempfile.mkstemp(prefix="forge-host-profile-", suffix=".json")
    with os.fdopen(fd, "w") as stream:
        json.dump(data, stream, indent=1)
    atexit.register(Path(name).unlink, missing_ok=True)
    print(f"note: host profile not saved ({reason}); measured again next time", file=sys.stderr)
    return Path(name)


def format_profile(loaded: LoadedProfile) -> str:
    """The profile as `forge doctor` prints it: one row per decision, with the times."""
    p = loaded.profile
    how = "measured now" if loaded.built else f"loaded in {loaded.load_seconds * 1e3:.1f} ms"
    lines = [
        f"host profile {loaded.path} ({how}; built in {p.build_seconds:.2f} s)",
        "  host: " + ", ".join(f"{k} {v}" for k, v in p.key.items()),
        f"  transition {p.transition_ms:.3f} ms per NPU<->CPU hop; "
        f"graph dispatch {p.dispatch_ms:.3f} ms",
        f"  {'op':<52}{'NNFactory':>11}{'CPU':>11}{'hops':>6}  decision",
    ]
    for what, e in p.decisions():
        lines.append(
            f"  {what:<52}{e.npu_ms:>8.3f} ms{e.cpu_ms:>8.3f} ms{e.hops:>6}  {e.device.upper()}"
            f" (CPU total {e.cpu_total_ms:.3f} ms)"
        )
    s = p.settings or {}
    if "openvino_all_threads_ms" in s:
        lines.append(
            f"  OpenVINO threads: all ({s.get('openvino_threads')}) "
            f"{s['openvino_all_threads_ms']:.3f} ms vs 1 {s['openvino_one_thread_ms']:.3f} ms"
            f" -> {s.get('openvino_threads_decision')}; hint {s.get('openvino_hint')}"
        )
    if s.get("load_average", 0) > (os.cpu_count() or 1) / 2:
        lines.append(
            f"  measured with a load average of {s['load_average']}: other processes were "
            "busy, so times may be high; `forge doctor --profile --rebuild` measures again"
        )
    for k in p.kernels:
        onednn = f", all oneDNN {k.onednn_ms:.3f} ms" if k.onednn_ms is not None else ""
        lines.append(
            f"  linear kernels, {k.rows} row(s): OpenVINO's own {k.fused_ms:.3f} ms, all "
            f"MLAS {k.apart_ms:.3f} ms{onednn} -> {k.kernel}"
        )
        if k.int8_fused_ms is not None and k.int8_apart_ms is not None:
            lines.append(
                f"  int8 linear kernels, {k.rows} row(s): activation fused "
                f"{k.int8_fused_ms:.3f} ms, apart {k.int8_apart_ms:.3f} ms -> {k.int8_kernel}"
            )
        if k.int8_dynamic_ms is not None and k.int8_fused_ms is not None:
            lines.append(
                f"  int8 activations, {k.rows} row(s): weight-only {k.int8_fused_ms:.3f} ms "
                f"(fused), quantized at run time {k.int8_dynamic_ms:.3f} ms -> "
                f"{'quantized' if k.int8_dynamic else 'weight-only'}"
            )
        if k.fp16_wide_ms is not None and k.fp16_narrow_ms is not None:
            lines.append(
                f"  fp16 weights, {k.rows} row(s): fp32 weights {k.fp16_wide_ms:.3f} ms, "
                f"kept fp16 {k.fp16_narrow_ms:.3f} ms -> {k.fp16_kernel}"
            )
        if k.snippets_ms is not None:
            lines.append(
                f"  OpenVINO snippets, {k.rows} row(s), {k.kernel}: "
                f"off {k.snippets_baseline_ms:.3f} ms, "
                f"on {k.snippets_ms:.3f} ms -> {'on' if k.snippets else 'off'}"
            )
    lines.append(
        "  placement reads the linear rows (npu-place-devices{profile=...}); the other rows "
        "are measured for reference, and those ops stay on the NPU"
    )
    return "\n".join(lines)
