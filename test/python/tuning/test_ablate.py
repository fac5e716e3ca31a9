"""forge ablate: the pipeline with each pass removed, on tiny models."""

from __future__ import annotations

import pytest
from conftest import load_tiny

from forge.cli import main
from forge.support.diagnostics import ForgeError
from forge.transforms.npu_optimize import PHASE2_PASSES
from forge.tuning.ablate import ABLATIONS, ablate, mean_ms


def test_one_row_per_removed_pass_after_the_full_pipeline() -> None:
    tiny = load_tiny("gpt2")
    report = ablate("gpt2", tiny.program.module, len(tiny.program.input_names))
    assert [r.removed for r in report.rows] == [None, *ABLATIONS]
    assert set(PHASE2_PASSES) < set(ABLATIONS)
    rows = {r.removed: r for r in report.rows}
    full = report.full
    assert full.ratio == 1.0
    for r in report.rows:
        assert r.ratio == pytest.approx(r.score / full.score)
    # without attention fusion each layer keeps two matmuls, softmax and the mask ops
    attention = rows["npu-fuse-attention"]
    assert attention.ops > full.ops and attention.ratio > 1.0
    assert attention.features.n_linear == full.features.n_linear + 2
    assert rows["npu-fuse-operators"].ops > full.ops
    # Phase 3-4 removals change the plan, not the graph
    for name in ("npu-place-devices", "npu-schedule-affinity", "npu-linear-scan"):
        assert rows[name].features == full.features
    assert rows["npu-linear-scan"].buffers > full.buffers
    assert rows["npu-schedule-affinity"].transitions >= full.transitions
    assert rows["npu-place-devices"].transitions == 0
    assert "npu-fuse-attention" in report.format()


def test_removing_the_scheduler_costs_transitions_on_llama() -> None:
    tiny = load_tiny("llama-3.2-1b")
    report = ablate("llama", tiny.program.module, 2, ["npu-schedule-affinity"])
    assert report.rows[1].transitions > report.full.transitions


def test_the_input_module_is_left_alone() -> None:
    tiny = load_tiny("gpt2")
    before = str(tiny.program.module)
    ablate("gpt2", tiny.program.module, 2, ["npu-dce"])
    assert str(tiny.program.module) == before


def test_unknown_passes_are_one_line_errors() -> None:
    with pytest.raises(ForgeError, match="cannot ablate npu-magic"):
        ablate("gpt2", load_tiny("gpt2").program.module, 2, ["npu-magic"])


def test_latency_runs_each_variant(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["ablate", "gpt2", "--tiny", "--seq", "8", "--passes", "npu-fuse-attention"]
    assert main([*args, "--latency", "--runs", "1", "--precision", "fp32"]) == 0
    out = capsys.readouterr().out
    assert "latency ms" in out and "CEI" in out and "eager:" in out
    assert "-npu-fuse-attention" in out


def test_cli_prints_one_table_per_model(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ablate", "gpt2", "llama-3.2-1b", "--tiny", "--seq", "8"]) == 0
    out = capsys.readouterr().out
    assert out.count("== ") == 2 and "full pipeline" in out
    assert main(["ablate", "gpt2", "--tiny", "--passes", "npu-nothing"]) == 1


def test_mean_ms_warms_up_first() -> None:
    calls = []
    assert mean_ms(lambda: calls.append(1), 3) >= 0.0
    assert len(calls) == 4
