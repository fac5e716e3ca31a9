"""IR fuzzing: mutated corpus files end in success or one diagnostic line, and the
classifier does catch internal errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from forge.tools.fuzz_ir import PIPELINE_INPUT, PIPELINES, fuzz, fuzz_pipelines, run_case
from forge.transforms.npu_dce import NpuDCEPass

ROOT = Path(__file__).resolve().parents[3]
VALID = "func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {\n  func.return %x : tensor<4xf32>\n}\n"


def test_mutants_through_the_full_pipeline(tmp_path: Path) -> None:
    result = fuzz(ROOT, cases=60, seed=7, pipeline="forge-pipeline", workdir=tmp_path)
    assert sum(result.counts.values()) == 60
    assert result.bad == 0, result.failures
    assert result.counts["diagnostic"] > 0 and result.counts["ok"] > 0


def test_pipeline_string_mutants(tmp_path: Path) -> None:
    """Malformed pipeline strings are one diagnostic line each, never a traceback."""
    result = fuzz_pipelines(cases=60, seed=3, workdir=tmp_path)
    assert sum(result.counts.values()) == 60
    assert result.bad == 0, result.failures
    assert result.counts["diagnostic"] > 0


def test_pipeline_seeds_are_valid(tmp_path: Path) -> None:
    """The unmutated pipelines all run: mutants start from something forge-opt accepts."""
    case = tmp_path / "input.mlir"
    case.write_text(PIPELINE_INPUT)
    outcomes = {pipeline: run_case(case, pipeline, timeout=60) for pipeline in PIPELINES}
    assert all(outcome == "ok" for outcome, _ in outcomes.values()), outcomes


def test_classifier_reports_internal_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    case = tmp_path / "valid.mlir"
    case.write_text(VALID)
    assert run_case(case, "npu-dce", timeout=20)[0] == "ok"
    assert run_case(case, "no-such-pass", timeout=20)[0] == "diagnostic"

    def broken(self: NpuDCEPass, ctx: object, op: object) -> None:
        raise RuntimeError("deliberately broken pass")

    monkeypatch.setattr(NpuDCEPass, "apply", broken)
    outcome, message = run_case(case, "npu-dce", timeout=20)
    assert outcome == "internal error" and "deliberately broken pass" in message
