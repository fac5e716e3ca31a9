"""forge-pipeline: Phase 2 through linear-scan allocation, consistent end to end."""

from __future__ import annotations

import pytest
from conftest import load_tiny

from forge.dialects import npu
from forge.dialects.context import entry_function
from forge.frontend.models import SPECS
from forge.transforms import run_pipeline
from forge.transforms.forge_pipeline import PHASE34_PASSES, plan
from forge.transforms.npu_optimize import PHASE2_PASSES
from forge.transforms.npu_schedule_affinity import check_schedule


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
