"""`forge-opt -t python`: the printed plan is the executor's plan, and it runs.

The program is exec'd with NNFactory and torch and called with the executor's
arguments; it must give the executor's outputs, segment for segment."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest
import torch
from conftest import CPU_PROFILE, PROFILES, TinyModel, load_tiny
from xdsl.dialects.builtin import ModuleOp, StringAttr

from forge.conversion import nnfactory_graph
from forge.conversion.graph_call import GraphCall
from forge.conversion.kernel_choice import BuildOptions
from forge.conversion.nnfactory_backend import NNFactoryUnavailable
from forge.conversion.segments import GRANULARITIES, arena_layout
from forge.dialects import dtypes
from forge.dialects.context import entry_function
from forge.frontend.loading import ordered_inputs
from forge.runtime.executor import CompiledNPUExecutor
from forge.runtime.precision import linear_ops
from forge.support.diagnostics import ForgeError
from forge.tools.forge_opt import main
from forge.tools.plan_to_python import plan_to_python
from forge.transforms.forge_pipeline import plan
from forge.transforms.host_profile import load_profile
from forge.transforms.npu_assign_precision import record_precision

SAMPLE = Path(__file__).parents[2] / "samples" / "gpt2_attention.mlir"


def run_program(
    source: str,
    arguments: list[torch.Tensor],
    weights: dict[str, torch.Tensor] | None = None,
    namespace: dict[str, object] | None = None,
) -> tuple[torch.Tensor, ...]:
    """exec the program (in `namespace`); `build(weights)` when it bakes weights in,
    then `run`."""
    namespace = {} if namespace is None else namespace
    exec(compile(source, "<plan>", "exec"), namespace)
    if "build" in namespace:
        namespace["build"](weights)  # type: ignore[operator]
    return namespace["run"](*arguments)  # type: ignore[operator]


def check_program(
    tiny: TinyModel,
    module: ModuleOp,
    precision: str,
    granularity: str,
    weights_as: str,
    profile: Path | None = None,
) -> str:
    """The printed program, run, gives the executor's outputs bit for bit (both built
    under `profile`'s kernel choices, as `compile_model` builds with it)."""
    program = tiny.program
    options = BuildOptions.for_host(
        load_profile(profile) if profile else None, granularity=granularity, weights_as=weights_as
    )
    record_precision(entry_function(module), precision)  # the IR states it
    executor = CompiledNPUExecutor(module, program.weights, len(program.input_names), options)
    source = plan_to_python(module, precision, granularity, weights_as, profile=str(profile or ""))
    assert source.count(" = seg") + source.count("\n    seg") >= len(executor.segments)
    assert f"{len(executor.segments)} NNFactory segment(s)" in source
    assert f"{executor.static_transitions()} NPU<->CPU transition(s)" in source
    assert f"weights {weights_as})" in source
    assert ("def build(W):" in source) == (weights_as == "constants")
    # The comments name the arena buffers the executor writes the intermediates to.
    assert executor.arena is not None
    base = executor.arena.data_ptr()
    offsets = [
        t.data_ptr() - base for step in executor.steps for t in step.targets if t is not None
    ]
    printed = [int(o) for o in re.findall(r" in buffer \d+ @ byte (\d+)", source)]
    assert offsets and Counter(printed) == Counter(offsets)

    inputs = ordered_inputs(tiny.model, tiny.args, tiny.kwargs, program.input_names)
    names = [a.name_hint for a in entry_function(module).body.block.args]
    weights = [program.weights[n] for n in names[len(inputs) :]]
    expected = executor(*inputs)
    namespace: dict[str, object] = {}
    got = run_program(source, [*inputs, *weights], program.weights, namespace)
    # Each segment of the program is the runtime's own GraphCall, bound as the
    # executor's segment is.
    calls = [namespace[f"seg{k}"] for k in range(len(executor.segments))]
    assert all(type(c) is GraphCall for c in calls)
    assert [(c.inputs, c.results, c.dtypes) for c in calls] == [  # type: ignore[attr-defined]
        (s.call.inputs, s.call.results, s.call.dtypes) for s in executor.segments
    ]
    assert len(got) == len(expected)
    for a, b in zip(got, expected, strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape
        assert torch.equal(a, b)
    return source


@pytest.mark.parametrize(
    ("name", "granularity", "precision", "weights_as"),
    [
        ("gpt2", "segment", "fp32", "constants"),
        ("gpt2", "segment", "fp32", "parameters"),
        ("gpt2", "op", "fp32", "parameters"),
        ("llama-3.2-1b", "segment", "fp16", "constants"),
        ("gpt2", "segment", "int8", "constants"),
        ("gpt2", "op", "int8", "parameters"),
    ],
)
def test_program_runs_as_the_executor(
    name: str, granularity: str, precision: str, weights_as: str
) -> None:
    tiny = load_tiny(name)
    module = tiny.fresh_module()
    plan(module)
    source = check_program(tiny, module, precision, granularity, weights_as)
    if weights_as == "constants":
        # Weights are baked in by name, converted as GraphInput.arrays converts them,
        # not printed as data.
        assert 'weight_arrays(W["' in source and "f.constant(unpack_array(" not in source
    if precision == "int8":
        # Every linear weight is stored int8 with its scale: two constants, or two
        # parameters bound by GraphCall as Segment.__call__ binds them.
        assert '"int8", reduce_dim=' in source
        if weights_as == "parameters":
            assert "np.int8)  # " in source and ": scale" in source


def test_head_on_the_cpu_prints_packed_linear() -> None:
    """A head npu-place-devices moved to the CPU is printed as the executor runs it: a
    PackedLinear made in build(W), bit-equal to the executor. (With this profile the
    CPU wins every linear, so the layers' linears are packed too.)"""
    tiny = load_tiny("gpt2")
    module = tiny.fresh_module()
    plan(module, profile=str(CPU_PROFILE))
    source = check_program(tiny, module, "fp32", "segment", "constants")
    assert "from forge.target.cpu_kernels import PackedLinear" in source
    head = re.search(r"(pack\d+) = PackedLinear\(W\['[\w.]+'\], in_out=False, rows=\d+", source)
    assert head is not None
    assert re.search(rf"\n    \w+ = {head.group(1)}\(\w+\)\n    return", source)


@pytest.mark.parametrize("fp16_form", ["wide", "narrow"])
def test_mixed_follows_the_precision_attributes(fp16_form: str) -> None:
    """fp16 weights print in the form the host profile's rule gives them: the fp32
    weights as they are (fp16 measured slower), or kept fp16 behind a Convert marked as
    a decompression, in a graph marked as a language model's."""
    tiny = load_tiny("gpt2")
    module = tiny.fresh_module()
    plan(module)
    linears = linear_ops(entry_function(module))
    assert len(linears) >= 3
    linears[0].attributes["precision"] = StringAttr("fp16")
    linears[1].attributes["precision"] = StringAttr("fp32")
    linears[2].attributes["precision"] = StringAttr("int8")
    narrow = fp16_form == "narrow"
    for weights_as in ("constants", "parameters"):
        profile = PROFILES / f"host-profile-fp16-{fp16_form}.json"
        source = check_program(tiny, module, "mixed", "segment", weights_as, profile)
        assert ('"fp16"' in source) == narrow and '"int8", reduce_dim=' in source
        if weights_as == "parameters":
            assert 'GraphInput(np.float32, "int8", reduce_dim=' in source
            assert ('GraphInput(np.float32, "fp16")' in source) == narrow
        marked = fp16_form == "narrow" and weights_as == "constants"
        assert ("mark_decompression(" in source) == marked
        assert ("mark_llm(f)" in source) == marked


def test_identical_layers_share_one_graph() -> None:
    tiny = load_tiny("gpt2")
    module = tiny.fresh_module()
    plan(module)
    source = plan_to_python(module, granularity="op")
    assert "# the same graph (cache hit)" in source


def test_cpu_steps_are_aten_calls() -> None:
    tiny = load_tiny("gpt2")
    module = tiny.fresh_module()
    plan(module)
    source = plan_to_python(module)
    assert "torch.ops.aten.where.ScalarOther(v6, v7, -3.4028234663852886e+38)" in source
    assert "# cpu: " in source and "# npu: seg0: " in source


def test_fallback_group_runs_on_the_cpu() -> None:
    from xdsl.context import Context
    from xdsl.dialects.builtin import Builtin
    from xdsl.dialects.func import Func

    from forge.dialects.npu import NPU
    from forge.tools.forge_opt import LocatingParser

    ctx = Context()
    for dialect in (Builtin, Func, NPU):
        ctx.load_dialect(dialect)
    text = (
        "func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {\n"
        '  %0 = npu.generic "aten.cumsum.default"(%x, 0 : i64) {device = "npu"}'
        " : (tensor<4xf32>) -> tensor<4xf32>\n"
        "  func.return %0 : tensor<4xf32>\n}\n"
    )
    module = LocatingParser(ctx, text, "f.mlir").parse_module()
    executor = CompiledNPUExecutor(module, {}, 1)
    source = plan_to_python(module)
    assert executor.fallback_ops == 1 and "NNFactory cannot lower it" in source
    x = torch.arange(4.0)
    assert torch.equal(run_program(source, [x])[0], executor(x)[0])


def test_target_options() -> None:
    from io import StringIO

    from xdsl.context import Context

    from forge.tools.plan_to_python import PythonTarget

    tiny = load_tiny("gpt2")
    module = tiny.fresh_module()
    plan(module)
    out = StringIO()
    PythonTarget(granularity="op", precision="int8", weights="parameters").emit(
        Context(), module, out
    )
    source = out.getvalue()
    assert "(precision int8, granularity op, weights parameters)" in source
    assert "def build(" not in source and "W[" not in source and "np.int8)" in source
    assert PythonTarget().weights == "constants" and PythonTarget().precision == "fp32"
    with pytest.raises(ValueError, match="weights must be one of constants, parameters"):
        PythonTarget(weights="inline")


def test_forge_opt_prints_the_plan(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(SAMPLE), "-p", "forge-pipeline", "--emit", "python"]) == 0
    out = capsys.readouterr().out
    assert "def run(hidden, c_attn_weight, c_attn_bias, mask):" in out
    assert "(v19,) = seg0(hidden, c_attn_bias, c_attn_weight, v1)" in out


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ([], "'npu.view' op has no 'device'"),
        (["-p", "forge-pipeline", "-t", "python{precision=int4}"], "precision must be one of"),
        (["-p", "forge-pipeline", "-t", "python{weights=x}"], "weights must be one of"),
        (["-p", "forge-pipeline", "-t", "python{granularity=x}"], "granularity must be one of"),
        (["-p", "forge-pipeline", "-t", "python{"], "invalid target: Expected argument name"),
    ],
)
def test_errors_are_one_line(
    args: list[str], expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([str(SAMPLE), "-t", "python", *args]) == 1
    err = capsys.readouterr().err
    assert expected in err and err.count("\n") == 1 and "Traceback" not in err


def test_missing_nnfactory_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def unavailable() -> None:
        raise NNFactoryUnavailable("NNFactory (intel-npu-acceleration-library 1.4.0) is missing")

    monkeypatch.setattr(nnfactory_graph, "load_backend", unavailable)
    assert main([str(SAMPLE), "-p", "forge-pipeline", "-t", "python"]) == 1
    err = capsys.readouterr().err
    assert err == "forge-opt: error: NNFactory (intel-npu-acceleration-library 1.4.0) is missing\n"


def test_program_imports_the_runtime_graph_call() -> None:
    """The printed program calls segments through the executor's GraphCall, not a copy."""
    tiny = load_tiny("gpt2")
    module = tiny.fresh_module()
    plan(module)
    source = plan_to_python(module)
    assert "from forge.conversion.graph_call import GraphCall, GraphInput" in source
    assert "from forge.conversion.plan_runtime import strided_slice" in source


def test_graph_call_without_a_graph_passes_inputs_through() -> None:
    """A segment whose outputs are all its inputs: copies, in the IR's dtypes."""
    call = GraphCall(None, [None, None], [(False, 1), (False, 0)], [torch.float16, torch.float32])
    a, b = torch.arange(3.0), torch.ones(2)
    x, y = call(a, b)
    assert x.dtype == torch.float16 and torch.equal(x, b.half())
    assert torch.equal(y, a) and y.data_ptr() != a.data_ptr()
    with pytest.raises(ForgeError, match="segment expects 2 inputs, got 1"):
        call(a)


def test_arena_layout_is_the_executors() -> None:
    """The executor's arena is `arena_layout`'s: its size, and a view at every place
    of a value with a slot; function results are never placed."""
    tiny = load_tiny("gpt2")
    module = tiny.fresh_module()
    plan(module)
    function = entry_function(module)
    executor = CompiledNPUExecutor(
        module,
        tiny.program.weights,
        len(tiny.program.input_names),
        options=BuildOptions(granularity="op"),
    )
    layout = arena_layout(function)
    assert executor.fallback_ops == 0
    assert layout is not None and executor.arena is not None
    assert executor.arena.numel() == layout.planned_bytes
    returned = set(function.body.block.last_op.operands)  # type: ignore[union-attr]
    assert layout.places and not returned & set(layout.places)
    base = executor.arena.data_ptr()
    offsets = sorted(
        t.data_ptr() - base for step in executor.steps for t in step.targets if t is not None
    )
    assert len(offsets) == executor.arena_values
    slotted = [v for s in executor.segments for v in s.outputs] + [
        r
        for op in function.body.block.ops
        if op.attributes.get("device") == StringAttr("cpu")
        for r in op.results
    ]
    assert offsets == sorted(layout.places[v].offset for v in slotted if v in layout.places)
    for place in layout.places.values():
        assert place.offset + place.nbytes <= layout.planned_bytes


def test_arena_layout_needs_an_allocation() -> None:
    """No allocation given and none in the IR (npu-linear-scan has not run): no arena."""
    tiny = load_tiny("gpt2")
    assert arena_layout(entry_function(tiny.fresh_module())) is None


def test_precisions_are_spelled_once() -> None:
    """Every precision list is `dtypes.PROGRAM_PRECISIONS`: the graph's activation dtypes, the
    plan printer, and the CLI's choices (as is `GRANULARITIES`)."""
    from forge.cli import build_parser

    assert tuple(nnfactory_graph.ACTIVATION_DTYPES) == dtypes.PROGRAM_PRECISIONS
    assert nnfactory_graph.QUANTIZED_PRECISIONS is dtypes.QUANTIZED_PRECISIONS
    parser = build_parser()
    commands = next(a for a in parser._actions if a.dest == "command").choices
    for name in ("compile", "ablate"):
        options = {a.dest: a.choices for a in commands[name]._actions}
        assert tuple(options["precision"]) == dtypes.PROGRAM_PRECISIONS
    granularity = {a.dest: a.choices for a in commands["compile"]._actions}["granularity"]
    assert tuple(granularity) == GRANULARITIES
    tiny = load_tiny("gpt2")
    module = tiny.fresh_module()
    plan(module)
    with pytest.raises(ForgeError, match=", ".join(dtypes.PROGRAM_PRECISIONS)):
        plan_to_python(module, "int4")


def test_graphs_compiled_with_snippets_print_so(monkeypatch: pytest.MonkeyPatch) -> None:
    """A graph compiled with OpenVINO's snippets on (the host profile's choice, or the
    user's) prints a compile that turns them on, and runs as the executor's."""
    monkeypatch.setenv("NNFACTORY_SNIPPETS_MODE", "ENABLE")
    tiny = load_tiny("gpt2")
    module = tiny.fresh_module()
    plan(module)
    source = check_program(tiny, module, "fp32", "segment", "constants")
    assert 'compile_with_snippets(f, "ENABLE")' in source
    assert "import compile_with_snippets, strided_slice" in source
    monkeypatch.setenv("NNFACTORY_SNIPPETS_MODE", "DISABLE")
    source = plan_to_python(module, "fp32", "segment", "constants")
    assert "compile_with_snippets" not in source and "f.compile()" in source


CACHED_STEP = """
func.func @step(%q: tensor<1x4x2x8xf32>, %k: tensor<1x2x2x8xf32>, %v: tensor<1x2x2x8xf32>, %pos: tensor<2xi64>, %kc: tensor<1x2x32x8xf32>, %vc: tensor<1x2x32x8xf32>) -> (tensor<1x4x2x8xf32>, tensor<1x2x32x8xf32>, tensor<1x2x32x8xf32>) attributes {npu.writes = ["kc", "vc"]} {
  %s = npu.run_start %pos {capacity = 32 : i64} : tensor<2xi64> -> tensor<1xi64>
  %a = npu.cached_attention %q, %k, %v into %kc, %vc at %s {scale = 3.535534e-01 : f64} : (tensor<1x4x2x8xf32>, tensor<1x2x2x8xf32>, tensor<1x2x2x8xf32>, tensor<1x2x32x8xf32>, tensor<1x2x32x8xf32>, tensor<1xi64>) -> tensor<1x4x2x8xf32>
  func.return %a, %kc, %vc : tensor<1x4x2x8xf32>, tensor<1x2x32x8xf32>, tensor<1x2x32x8xf32>
}
"""  # noqa: E501


def test_paged_attention_prints_and_runs() -> None:
    """A cached attention in a graph prints as the `paged_attention` binding call over
    caches bound where they live (`written=True`), and the program writes the caller's
    caches in place as the executor does."""
    from forge.dialects.context import make_context
    from forge.tools.forge_opt import LocatingParser

    module = LocatingParser(make_context(), CACHED_STEP, "step.mlir").parse_module()
    plan(module)
    generator = torch.Generator().manual_seed(0)
    q, k, v = (
        torch.randn(shape, generator=generator)
        for shape in ([1, 4, 2, 8], [1, 2, 2, 8], [1, 2, 2, 8])
    )
    pos = torch.tensor([3, 4])
    caches = {"kc": torch.zeros(1, 2, 32, 8), "vc": torch.zeros(1, 2, 32, 8)}
    executor = CompiledNPUExecutor(module, caches, 4)
    assert len(executor.segments) == 1
    source = plan_to_python(module)
    assert "paged_attention(f, " in source and "written=True" in source
    expected = executor(q, k, v, pos)[0]
    assert torch.equal(caches["kc"][:, :, 3:5], k) and torch.equal(caches["vc"][:, :, 3:5], v)
    printed = {name: torch.zeros(1, 2, 32, 8) for name in caches}
    got = run_program(source, [q, k, v, pos, printed["kc"], printed["vc"]])[0]
    assert torch.equal(got, expected)
    assert all(torch.equal(printed[name], caches[name]) for name in caches)
