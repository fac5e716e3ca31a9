"""npu-optimize: the six passes to a fixed point, its report, determinism, numerics."""

from __future__ import annotations

import pytest
from conftest import load_tiny

from forge.dialects import npu
from forge.frontend.models import SPECS
from forge.transforms import run_pipeline
from forge.transforms.npu_optimize import PHASE2_PASSES, optimize
from forge.transforms.pattern_pass import count_ops


@pytest.mark.parametrize("name", list(SPECS))
def test_optimized_models_match_eager_and_fuse_every_attention(name: str) -> None:
    tiny = load_tiny(name)
    module = tiny.fresh_module()
    report = optimize(module)
    module.verify()
    assert [row.name for row in report.rows] == list(PHASE2_PASSES)
    assert report.ops_after == count_ops(module) < report.ops_before
    sdpa = sum(isinstance(op, npu.SDPAOp) for op in module.walk())
    assert sdpa == SPECS[name].attention_layers(tiny=True)
    agreement = tiny.agreement(module)
    assert agreement.max_abs <= 1e-5 and agreement.top1 == 1.0


def test_two_runs_print_identical_ir() -> None:
    texts = set()
    for _ in range(2):
        module = load_tiny("llama-3.2-1b").fresh_module()
        optimize(module)
        texts.add(str(module))
    assert len(texts) == 1


def test_report_accounts_for_every_run() -> None:
    module = load_tiny("gpt2").fresh_module()
    report = optimize(module, iterations=3)
    assert 1 <= report.rounds <= 3
    assert len(report.runs) == report.rounds * len(PHASE2_PASSES)
    # the last round changed nothing, unless the round limit stopped the loop
    last = report.runs[-len(PHASE2_PASSES) :]
    assert report.rounds == 3 or not any(r.rewrites for r in last)
    for before, after in zip(report.runs, report.runs[1:], strict=False):
        assert before.ops_after == after.ops_before
    assert "npu-fuse-attention" in report.format()


def test_skip_leaves_a_pass_out() -> None:
    module = load_tiny("gpt2").fresh_module()
    report = optimize(module, skip=["npu-fuse-attention"])
    assert "npu-fuse-attention" not in [r.name for r in report.rows]
    assert not any(isinstance(op, npu.SDPAOp) for op in module.walk())


def test_pipeline_spec_matches_python_api() -> None:
    a = load_tiny("qwen2-0.5b").fresh_module()
    b = load_tiny("qwen2-0.5b").fresh_module()
    optimize(a, iterations=2, alpha=0.6, layout="contiguous")
    records = run_pipeline(b, "npu-optimize{iterations=2 alpha=0.6 layout=contiguous}")
    assert str(a) == str(b)
    assert {r.name for r in records} == set(PHASE2_PASSES)
