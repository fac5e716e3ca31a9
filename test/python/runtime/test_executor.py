"""CompiledNPUExecutor: planned tiny models run as NNFactory segments + CPU kernels,
against eager PyTorch; dispatch and transition accounting; the `forge compile` CLI."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest
import torch
from conftest import CPU_PROFILE, NPU_PROFILE, load_tiny

from forge.conversion.kernel_choice import FP16_KERNELS, BuildOptions
from forge.devtools.numerics import compare, eager_outputs
from forge.dialects import contract
from forge.dialects.context import entry_function
from forge.frontend.loading import ordered_inputs
from forge.runtime.compile import compile_model
from forge.runtime.executor import CompiledNPUExecutor
from forge.support.diagnostics import ForgeError
from forge.transforms.forge_pipeline import PlanReport, plan
from forge.transforms.npu_assign_precision import record_precision

MODELS = ["gpt2", "llama-3.2-1b"]
FP32_ABS = 1e-4
FP16_REL = 5e-2


def planned(name: str) -> tuple[object, PlanReport, object]:
    tiny = load_tiny(name)
    module = tiny.fresh_module()
    return tiny, plan(module), module


def executor_for(
    tiny,
    module,
    precision: str = "fp32",
    granularity: str = "segment",
    options: BuildOptions | None = None,
):
    program = tiny.program
    options = options or BuildOptions(granularity=granularity)
    record_precision(entry_function(module), precision)  # the IR states it
    return CompiledNPUExecutor(module, program.weights, len(program.input_names), options)


def agreement(tiny, executor, num_inputs: int = 3):
    return compare(
        tiny.model, executor, tiny.args, tiny.kwargs, tiny.program.input_names, num_inputs
    )


@pytest.mark.parametrize("name", MODELS)
def test_fp32_matches_eager(name: str) -> None:
    tiny, _, module = planned(name)
    executor = executor_for(tiny, module)
    assert executor.segments and executor.fallback_ops == 0
    result = agreement(tiny, executor)
    assert result.max_abs <= FP32_ABS
    assert result.top1 == 1.0
    assert executor.stats.calls == 1 and executor.total_stats.calls == 3
    assert executor.stats.dispatches == len(executor.segments)
    assert executor.stats.bytes_in > 0 and executor.stats.bytes_out > 0


@pytest.mark.parametrize("name", MODELS)
def test_static_traffic_is_what_the_tensors_hold(name: str) -> None:
    """Segments of static shapes count their bytes once, from the IR's types: the same
    figures the bound tensors and results give at a call."""
    tiny, _, module = planned(name)
    executor = executor_for(tiny, module)
    inputs = ordered_inputs(tiny.model, tiny.args, tiny.kwargs, tiny.program.input_names)
    static = [s for s in executor.steps if s.segment and s.traffic is not None]
    assert static
    executor(*inputs)
    counted = (executor.stats.bytes_in, executor.stats.state_bytes_in, executor.stats.bytes_out)
    executor._steps = [replace(s, traffic=None) for s in executor._steps]
    executor(*inputs)
    summed = (executor.stats.bytes_in, executor.stats.state_bytes_in, executor.stats.bytes_out)
    assert counted == summed


@pytest.mark.parametrize("name", MODELS)
def test_op_granularity_same_logits_more_dispatches(name: str) -> None:
    tiny, _, module = planned(name)
    by_segment = executor_for(tiny, module, granularity="segment")
    by_op = executor_for(tiny, module, granularity="op")
    inputs = ordered_inputs(tiny.model, tiny.args, tiny.kwargs, tiny.program.input_names)
    for a, b in zip(by_segment(*inputs), by_op(*inputs), strict=True):
        assert float((a - b).abs().max()) <= FP32_ABS
    assert by_op.stats.dispatches == by_op.npu_ops
    assert by_op.stats.dispatches > by_segment.stats.dispatches
    assert agreement(tiny, by_op, 1).top1 == 1.0


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("granularity", ["segment", "op"])
def test_runtime_transitions_equal_scheduler(name: str, granularity: str) -> None:
    tiny, report, module = planned(name)
    executor = executor_for(tiny, module, granularity=granularity)
    inputs = ordered_inputs(tiny.model, tiny.args, tiny.kwargs, tiny.program.input_names)
    executor(*inputs)
    steps = executor.steps
    counted = sum(a.device != b.device for a, b in itertools.pairwise(steps))
    assert executor.stats.transitions == counted == executor.static_transitions()
    assert executor.stats.transitions == report.schedule.transitions_after
    assert len(entry_function(module).body.block.ops) > len([s for s in steps if not s.tabled])


@pytest.mark.parametrize("name", MODELS)
def test_fp16_runs_within_loose_tolerance(name: str) -> None:
    tiny, _, module = planned(name)
    executor = executor_for(tiny, module, precision="fp16")
    inputs = ordered_inputs(tiny.model, tiny.args, tiny.kwargs, tiny.program.input_names)
    actual = executor(*inputs)
    expected = eager_outputs(tiny.model, tiny.args, tiny.kwargs)
    for a, e in zip(actual, expected, strict=True):
        assert a.dtype == e.dtype and a.shape == e.shape
        scale = max(1.0, float(e.abs().max()))
        assert float((a.float() - e.float()).abs().max()) / scale <= FP16_REL


@pytest.mark.parametrize("form", FP16_KERNELS)
def test_fp16_forms_compute_with_their_weights(form: str) -> None:
    """`narrow` (`FP16_KERNELS`) computes what fp32 computes with each linear weight
    rounded to fp16; `wide` runs the fp32 weights as they are, the fp32 program's
    graph bit for bit, with no converted copy."""
    tiny, _, module = planned("gpt2")
    program = tiny.program
    num_inputs = len(program.input_names)
    options = BuildOptions(fp16_kernels=((1, form),))
    executor = executor_for(tiny, module, precision="fp16", options=options)
    stored = {spec.storage for s in executor.segments for spec in s.call.inputs if spec}
    assert ("fp16" in stored) == (form == "narrow")
    args = entry_function(module).body.block.args[num_inputs:]
    linear = {a.name_hint for a in args if contract.is_linear_weight(a)}
    assert linear
    weights = program.weights
    if form == "narrow":
        weights = {n: w.half().float() if n in linear else w for n, w in weights.items()}
    else:
        assert not any(s.graph.copies for s in executor.segments if s.graph is not None)
    record_precision(entry_function(module), "fp32")
    reference = CompiledNPUExecutor(module, weights, num_inputs)
    inputs = ordered_inputs(tiny.model, tiny.args, tiny.kwargs, program.input_names)
    for a, e in zip(executor(*inputs), reference(*inputs), strict=True):
        assert a.dtype == e.dtype == torch.float32 and a.shape == e.shape
        if form == "wide":
            assert torch.equal(a, e)
        scale = max(1.0, float(e.abs().max()))
        assert float((a - e).abs().max()) / scale <= 1e-4


class _TiedLM(torch.nn.Module):
    """An embedding whose table is also the LM head's weight (GPT-2's, Llama-3.2's)."""

    def __init__(self) -> None:
        super().__init__()
        self.wte = torch.nn.Embedding(64, 16)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.linear(self.wte(ids), self.wte.weight)


def test_a_tied_embedding_gathers_its_fp32_rows_where_the_head_reads_fp16() -> None:
    """With the head's weights kept fp16, the Gather reads the model's fp32 table as it
    is (no copy; OpenVINO would widen an fp16 table at compile at 11x its size), and
    the head the fp16 copy: the rows are exact, the head's products fp16-rounded."""
    torch.manual_seed(0)
    model = _TiedLM().eval()
    ids = torch.tensor([[3, 17, 63]])
    executor, _ = compile_model(model, (ids,), precision="fp16", profile=str(FP16_PROFILE))
    (graph,) = {id(s.graph): s.graph for s in executor.segments if s.graph}.values()
    assert [a.dtype for a in graph.copies] == [np.float16]  # the head's fp16 weights
    table = model.wte.weight.detach().numpy()
    assert any(np.shares_memory(a, table) for a in graph.keepalive)
    rows = model.wte.weight[ids]
    expected = torch.nn.functional.linear(rows, model.wte.weight.half().float())
    torch.testing.assert_close(executor(ids)[0], expected.detach(), rtol=1e-5, atol=1e-5)
    fp32, _ = compile_model(model, (ids,), profile=str(FP16_PROFILE))
    fp32_graph = next(s.graph for s in fp32.segments if s.graph)
    assert not fp32_graph.copies  # the fp32 program gathers and multiplies the same table


def test_compile_model_reports_every_phase() -> None:
    tiny = load_tiny("gpt2")
    executor, report = compile_model(tiny.model, tiny.args, tiny.kwargs)
    for seconds in (
        report.export_seconds,
        report.import_seconds,
        report.optimize_seconds,
        report.phase34_seconds,
        report.conversion_seconds,
    ):
        assert seconds >= 0.0
    assert report.conversion_seconds >= report.nnfactory_compile_seconds
    assert report.segments == len(executor.segments) and report.fallback_ops == 0
    assert "conversion" in report.format_times()
    # OpenVINO packs the weights into new memory: the faults and kernel time are counted
    assert report.conversion_page_faults > 0 and report.conversion_kernel_seconds >= 0.0
    assert "minor page faults" in report.format_times()
    result = compare(tiny.model, executor, tiny.args, tiny.kwargs, report.input_names, 1)
    assert result.max_abs <= FP32_ABS and result.top1 == 1.0


def test_forge_compile_cli() -> None:
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    done = subprocess.run(
        [sys.executable, "-m", "forge.cli", "compile", "gpt2", "--tiny", "--runs", "2"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert "latency forge: mean" in done.stdout
    assert "latency eager: mean" in done.stdout
    assert "top-1 agreement 100.00%" in done.stdout


@pytest.mark.parametrize("granularity", ["segment", "op"])
def test_intermediates_live_in_linear_scan_buffers(granularity: str) -> None:
    tiny, report, module = planned("gpt2")
    executor = executor_for(tiny, module, granularity=granularity)
    allocation = report.allocation
    assert executor.arena is not None and executor.arena.numel() == allocation.planned_bytes
    assert executor.arena_values > 0
    base = executor.arena.data_ptr()
    offsets: dict[int, set[int]] = {}
    for step in executor.steps:
        for target in step.targets:
            if target is None:
                continue
            offset = target.data_ptr() - base
            assert offset >= 0 and offset + target.nbytes <= allocation.planned_bytes
            offsets.setdefault(offset, set()).add(target.nbytes)
    # Linear scan reuses buffers: fewer distinct places than values bound to the arena.
    assert len(offsets) < executor.arena_values or granularity == "segment"
    inputs = ordered_inputs(tiny.model, tiny.args, tiny.kwargs, tiny.program.input_names)
    first = [t.clone() for t in executor(*inputs)]
    kept = executor(*inputs)
    other = [torch.randint_like(x, 0, 64) if i == 0 else x for i, x in enumerate(inputs)]
    executor(*other)
    # Results never live in the arena: a later call does not overwrite them.
    for a, b in zip(first, kept, strict=True):
        assert torch.equal(a, b)
    assert all(t.data_ptr() - base not in range(allocation.planned_bytes) for t in kept)


def test_weights_as_constants_or_parameters_agree() -> None:
    tiny, _, module = planned("gpt2")
    program = tiny.program
    inputs = ordered_inputs(tiny.model, tiny.args, tiny.kwargs, program.input_names)
    outputs, bound = {}, {}
    for weights_as in ("constants", "parameters"):
        options = BuildOptions(weights_as=weights_as)
        executor = CompiledNPUExecutor(
            module, program.weights, len(program.input_names), options=options
        )
        outputs[weights_as] = executor(*inputs)
        bound[weights_as] = executor.stats.bytes_in
    for a, b in zip(outputs["constants"], outputs["parameters"], strict=True):
        assert float((a - b).abs().max()) <= 1e-5
    weight_bytes = sum(t.nbytes for t in program.weights.values())
    assert bound["parameters"] >= bound["constants"] + weight_bytes // 2
    with pytest.raises(ForgeError, match="weights_as must be one of"):
        BuildOptions(weights_as="x")


@pytest.mark.parametrize("name", MODELS)
def test_head_on_the_cpu_packs_its_weight(name: str) -> None:
    """npu-place-devices moves the LM head to the CPU when the host profile measured the
    CPU faster; the executor runs it with its weight packed once, and the logits still
    match eager."""
    tiny = load_tiny(name)
    module = tiny.fresh_module()
    report = plan(module, profile=str(CPU_PROFILE))
    executor = executor_for(tiny, module)
    head = executor.steps[-1]
    assert head.device == "cpu" and "packed_linear_kernel" in head.run.__qualname__
    packed = [
        s for s in executor.steps if "packed_linear_kernel" in getattr(s.run, "__qualname__", "")
    ]
    assert executor.packed_ahead == len(packed)  # each packed while the graphs compiled
    assert any("measured faster" in why for why in report.placement.cpu_reasons)
    assert any("(head)" in why and "-> CPU" in why for why in report.placement.measured)
    result = agreement(tiny, executor)
    assert result.max_abs <= FP32_ABS and result.top1 == 1.0
    assert executor.stats.transitions == report.schedule.transitions_after

    default = tiny.fresh_module()
    plan(default, profile=str(NPU_PROFILE))  # NNFactory measured faster: all stay
    assert executor_for(tiny, default).steps[-1].device == "npu"


APART_PROFILE = NPU_PROFILE.with_name("host-profile-apart.json")
FP16_PROFILE = NPU_PROFILE.with_name("host-profile-fp16-narrow.json")
FP16_WIDE = NPU_PROFILE.with_name("host-profile-fp16-wide.json")


def _mlp(rows: int) -> tuple[torch.nn.Module, torch.Tensor]:
    """Linear, GELU, linear (one npu.fused_linear, one npu.linear) and an input."""
    torch.manual_seed(rows)
    model = torch.nn.Sequential(
        torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 32)
    ).eval()
    return model, torch.randn(rows, 32) * 3


def test_profile_decides_where_fp16_weights_stay_fp16_with_a_note() -> None:
    """A profile that measured fp16 weights faster kept fp16 keeps them so, one that
    measured the fp32 weights faster runs those (no fp16 copy), each with a note and
    the times; a profile without fp16 times keeps them fp16, as asked, without one."""
    model, x = _mlp(2)
    narrow, report = compile_model(model, (x,), precision="fp16", profile=str(FP16_PROFILE))
    wide, wide_report = compile_model(model, (x,), precision="fp16", profile=str(FP16_WIDE))
    asked, asked_report = compile_model(model, (x,), precision="fp16", profile=str(NPU_PROFILE))
    fp32, _ = compile_model(model, (x,), profile=str(FP16_WIDE))
    assert [n for n in report.notes if n.startswith("fp16 weights")] == [
        "fp16 weights kept fp16 in OpenVINO's kernel for linears of 2 row(s) (host "
        "profile: 1 row(s) fp32 weights 2 ms, kept fp16 1 ms, 128 row(s) fp32 weights "
        "6 ms, kept fp16 5 ms)"
    ]
    assert [n for n in wide_report.notes if n.startswith("fp16 weights")] == [
        "fp16 weights run as their fp32 weights, with the fp32 kernels, for linears of 2 "
        "row(s), where fp16 measured slower (host profile: 1 row(s) fp32 weights 1 ms, "
        "kept fp16 3 ms, 128 row(s) fp32 weights 5 ms, kept fp16 9 ms)"
    ]
    assert not any(n.startswith("fp16 weights") for n in asked_report.notes)

    def stored(executor: CompiledNPUExecutor) -> set[str]:
        return {spec.storage for s in executor.segments for spec in s.call.inputs if spec}

    assert "fp16" in stored(narrow) and "fp16" in stored(asked)
    assert stored(wide) == {"float"}
    torch.testing.assert_close(narrow(x)[0], asked(x)[0], rtol=0, atol=0)
    assert torch.equal(wide(x)[0], fp32(x)[0])
    torch.testing.assert_close(narrow(x)[0], wide(x)[0], rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("rows", [2, 128])
def test_profile_keeps_decode_activations_apart(rows: int) -> None:
    """A profile that measured MLAS faster with the activation apart at 2 rows (and not
    at 128): a 2-row MLP's activation is kept apart, with a note, and its outputs are
    those of the fused graph bit for bit; a 128-row one, and int8, stay fused."""
    model, x = _mlp(rows)
    fused, fused_report = compile_model(model, (x,), profile=str(NPU_PROFILE))
    apart, report = compile_model(model, (x,), profile=str(APART_PROFILE))
    notes = [n for n in report.notes if "kept out of OpenVINO's FullyConnected" in n]
    assert notes == (
        [
            f"1 linear(s) at {rows} row(s) activations kept out of OpenVINO's "
            "FullyConnected, so that it runs MLAS (host profile: 2 row(s) OpenVINO's own "
            "2 ms, all MLAS 1 ms, 128 row(s) OpenVINO's own 6 ms, all MLAS 6.1 ms)"
        ]
        if rows == 2
        else []
    )
    assert not any("FullyConnected" in n for n in fused_report.notes)
    assert torch.equal(apart(x)[0], fused(x)[0])
    _, int8 = compile_model(model, (x,), precision="int8", profile=str(APART_PROFILE))
    assert not any("FullyConnected" in n for n in int8.notes)


ONEDNN_PROFILE = NPU_PROFILE.with_name("host-profile-onednn.json")


@pytest.mark.parametrize("rows", [2, 128])
def test_profile_moves_prompt_linears_to_onednn(rows: int) -> None:
    """A profile that measured every linear faster on oneDNN at 2 rows (not at 128): a
    2-row MLP's plain linear gets the exact post-op, with a note, and its outputs equal
    the default graph's within fp32 rounding (another kernel sums in another order);
    a 128-row one, and int8, keep OpenVINO's own kernels."""
    model, x = _mlp(rows)
    default, _ = compile_model(model, (x,), profile=str(NPU_PROFILE))
    onednn, report = compile_model(model, (x,), profile=str(ONEDNN_PROFILE))
    notes = [n for n in report.notes if "runs oneDNN" in n]
    assert notes == (
        [
            f"1 linear(s) at {rows} row(s) given an exact post-op, so that OpenVINO's "
            "FullyConnected runs oneDNN (host profile: 2 row(s) OpenVINO's own 2 ms, all "
            "MLAS 2.1 ms, all oneDNN 1 ms, 128 row(s) OpenVINO's own 6 ms, all MLAS 6.1 "
            "ms, all oneDNN 5.9 ms)"
        ]
        if rows == 2
        else []
    )
    torch.testing.assert_close(onednn(x)[0], default(x)[0], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(onednn(x)[0], model(x), rtol=1e-4, atol=1e-4)
    _, int8 = compile_model(model, (x,), precision="int8", profile=str(ONEDNN_PROFILE))
    assert not any("oneDNN" in n for n in int8.notes)


def test_packed_linear_matches_aten() -> None:
    from forge.target.cpu_kernels import PackedLinear, packed_gemm_available

    torch.manual_seed(0)
    x, w, b = torch.randn(2, 5, 12), torch.randn(7, 12), torch.randn(7)
    expected = torch.nn.functional.linear(x, w, b)
    linear = PackedLinear(w, in_out=False, rows=10)
    assert (linear.packed is not None) == packed_gemm_available()
    assert torch.allclose(linear(x, b), expected, atol=1e-5)
    transposed = PackedLinear(w.t().contiguous(), in_out=True, rows=10, activation="gelu_tanh")
    gelu = torch.nn.functional.gelu(expected, approximate="tanh")
    assert torch.allclose(transposed(x, b), gelu, atol=1e-5)
    # Another row count than the plan's takes aten.linear.
    assert torch.allclose(linear(x[:1], b), expected[:1], atol=1e-5)


@pytest.mark.parametrize("shape", [(0, 8), (1, 0, 8)])
def test_zero_size_inputs_run_on_the_cpu(shape: tuple[int, ...]) -> None:
    """NNFactory builds no empty tensors (OpenVINO aborts on them): such ops are placed
    on the CPU, where torch runs them, and the result matches eager."""
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU()).eval()
    x = torch.randn(*shape)
    executor, report = compile_model(model, (x,))
    assert report.plan.placement.npu_ops == 0 and executor.npu_ops == 0
    (out,) = executor(x)
    assert out.shape == model(x).shape == (*shape[:-1], 8)


def test_a_build_on_a_worker_thread_follows_the_callers_options() -> None:
    """Build choices travel as one explicit record, not as ambient state: an executor
    built on a worker thread follows the options its caller made, its builder records
    each choice (op, kernel, reason), and no build choice is left in the environment."""
    from concurrent.futures import ThreadPoolExecutor

    from forge.conversion.kernel_choice import KERNEL_REASONS, OWN_KERNEL

    tiny, _, module = planned("gpt2")
    environment = dict(os.environ)
    options = BuildOptions(linear_kernels=((1, "onednn"),))  # every row count: oneDNN
    with ThreadPoolExecutor(max_workers=1) as pool:
        worker = pool.submit(executor_for, tiny, module, options=options).result()
    here = executor_for(tiny, module)
    assert dict(os.environ) == environment

    def kernels(executor: CompiledNPUExecutor) -> set[tuple[str, str, str]]:
        return {
            (d.op, d.kernel, d.reason)
            for decisions in executor.decisions
            for d in decisions
            if d.kind == "kernel"
        }

    assert ("npu.addmm", "onednn", KERNEL_REASONS["onednn"]) in kernels(worker)
    assert all(reason == OWN_KERNEL for _, _, reason in kernels(here))
    assert worker.segments[0].graph is not here.segments[0].graph
    inputs = ordered_inputs(tiny.model, tiny.args, tiny.kwargs, tiny.program.input_names)
    torch.testing.assert_close(worker(*inputs)[0], here(*inputs)[0], rtol=1e-4, atol=1e-4)


def test_int8_dynamic_note_says_what_the_graphs_were_built_with(tmp_path) -> None:
    """A profile that measured quantized activations faster at 2 rows: the 2-row int8
    MLP's graph is built quantizing them, and the note (printed from the builder's
    decisions) names its linears' rows with the times; forced weight-only, no note."""
    import json

    data = json.loads(APART_PROFILE.read_text())
    for entry in data["activations"]:
        entry.update(int8_fused_ms=2.0, int8_apart_ms=2.0, int8_dynamic_ms=1.0)
    profile = tmp_path / "host-profile-int8-dynamic.json"
    profile.write_text(json.dumps(data))
    model, x = _mlp(2)
    executor, report = compile_model(model, (x,), precision="int8", profile=str(profile))
    groups = {d.kernel for s in executor.decisions for d in s if d.kind == "quantization group"}
    assert groups == {"32"}
    assert [n for n in report.notes if n.startswith("int8 linears at")] == [
        "int8 linears at 2 row(s) quantize their activations at run time (OpenVINO's "
        "dynamic quantization, groups of 32; host profile: 2 row(s) weight-only 2 ms, "
        "quantized 1 ms, 128 row(s) weight-only 2 ms, quantized 1 ms; --weight-only or "
        "dynamic_quantized=False keeps them fp32)"
    ]
    _, weight_only = compile_model(
        model, (x,), precision="int8", profile=str(profile), dynamic_quantized=False
    )
    assert not any(n.startswith("int8 linears at") for n in weight_only.notes)
