"""forge-pipeline: Phase 2 through linear-scan allocation, consistent end to end."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import NPU_PROFILE, load_tiny

from forge.dialects import npu
from forge.dialects.context import entry_function
from forge.frontend.loading import ordered_inputs
from forge.frontend.models import SPECS
from forge.runtime.compile import compile_model
from forge.tools.forge_opt import main as forge_opt
from forge.transforms import run_pipeline
from forge.transforms.forge_pipeline import PHASE34_PASSES, ForgePipelinePass, plan
from forge.transforms.npu_optimize import PHASE2_PASSES
from forge.transforms.npu_schedule_affinity import check_schedule
from forge.tuning.ablate import ablate


@pytest.mark.parametrize("name", list(SPECS))
def test_plan_is_consistent_and_numerics_hold(name: str) -> None:
    tiny = load_tiny(name)
    module = tiny.fresh_module()
    report = plan(module)
    module.verify()
    function = entry_function(module)
    check_schedule(function)
    ops = [op for op in function.body.block.ops if isinstance(op, npu.NpuOp)]
    assert all(op.device is not None for op in ops)
    assert all(op.vreg is not None and op.live is not None for op in ops if op.results)
    allocation = report.allocation
    assert allocation.buffers <= 0.52 * allocation.allocated_values
    assert allocation.lower_bound_bytes <= allocation.planned_bytes
    assert report.schedule.transitions_after <= report.schedule.transitions_before
    agreement = tiny.agreement(module)
    assert agreement.max_abs <= 1e-5 and agreement.top1 == 1.0


def test_pass_and_python_api_agree() -> None:
    a = load_tiny("gpt2").fresh_module()
    b = load_tiny("gpt2").fresh_module()
    plan(a)
    records = run_pipeline(b, "forge-pipeline")
    assert str(a) == str(b)
    names = [r.name for r in records]
    assert names[-len(PHASE34_PASSES) :] == list(PHASE34_PASSES)
    assert set(names[: -len(PHASE34_PASSES)]) == set(PHASE2_PASSES)


def test_options_reach_phase2() -> None:
    module = load_tiny("gpt2").fresh_module()
    run_pipeline(module, "forge-pipeline{alpha=0 iterations=1}")
    assert not any(isinstance(op, npu.FusedLinearOp) for op in module.walk())


def _without(monkeypatch: pytest.MonkeyPatch, removed: str) -> None:
    """Remove `removed` from the one definition of the default pipeline."""
    original = ForgePipelinePass.passes

    def passes(self: ForgePipelinePass) -> list:
        return [p for p in original(self) if p.name != removed]

    monkeypatch.setattr(ForgePipelinePass, "passes", passes)


def _every_driver(tmp_path: Path) -> tuple[str, int, int, int]:
    """What forge-opt -p forge-pipeline prints, and the transitions `forge ablate`'s full
    row, `plan()` and `compile_model` (at run time) report, for tiny GPT-2."""
    tiny = load_tiny("gpt2")
    tmp_path.mkdir()
    source = tmp_path / "gpt2.mlir"
    source.write_text(str(tiny.fresh_module()))
    out = tmp_path / "out.mlir"
    assert forge_opt([str(source), "-p", "forge-pipeline", "-o", str(out)]) == 0
    module = tiny.fresh_module()
    report = ablate("gpt2", module, len(tiny.program.input_names), passes=(), precision="fp32")
    planned = plan(tiny.fresh_module())
    transitions = planned.schedule.transitions_after if planned.schedule else -1
    executor, _ = compile_model(tiny.model, tiny.args, tiny.kwargs, profile=str(NPU_PROFILE))
    executor(*ordered_inputs(tiny.model, tiny.args, tiny.kwargs, executor.input_names))
    return out.read_text(), report.full.transitions, transitions, executor.stats.transitions


def test_removing_a_pass_changes_every_driver(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    text, ablated, planned, ran = _every_driver(tmp_path / "full")
    assert ablated == planned == ran == 1
    _without(monkeypatch, "npu-schedule-affinity")
    text_without, ablated, planned, ran = _every_driver(tmp_path / "without")
    assert text_without != text  # forge-opt: imported op order, no scheduling
    assert planned == -1  # plan(): no schedule report
    assert ablated == ran == 4  # forge ablate and forge compile: unscheduled transitions
