"""IR fuzzing: mutated corpus files end in success or one diagnostic line, and the
classifier does catch internal errors."""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from forge.tools.fuzz_ir import (
    GOOD,
    LARGE_DIMS,
    NESTING_DEPTHS,
    OUT_OF_MEMORY,
    PIPELINE_INPUT,
    PIPELINES,
    IrCase,
    _crashed,
    enlarge_dim,
    fuzz,
    fuzz_pipelines,
    nest_type,
    run_case,
)
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


def test_large_dimension_mutants_stay_consistent() -> None:
    """A huge dimension replaces or joins one tensor type everywhere it occurs, so the
    module often stays valid and reaches the passes."""
    rng = random.Random(0)
    mutants = {enlarge_dim(VALID, rng) for _ in range(40)}
    assert VALID not in mutants
    for mutant in mutants:
        (only,) = set(re.findall(r"tensor<[^>]*>", mutant))
        assert any(dim in only for dim in LARGE_DIMS), mutant


def test_nesting_mutants_wrap_one_type() -> None:
    rng = random.Random(0)
    depths = set()
    for _ in range(40):
        mutant = nest_type(VALID, rng)
        depth = max(mutant.count("tuple<"), mutant.count("((") + 1)
        depths.add(depth)
        assert mutant.count("tensor<4xf32>") == 3
    assert depths & set(NESTING_DEPTHS)


@pytest.mark.parametrize(
    "text",
    [
        # A splat of 6e8 elements: parsing it took 2.4 GB before the dense-literal bound.
        "func.func @f() -> tensor<2x3x100000000xf32> {\n"
        "  %0 = arith.constant dense<1.0> : tensor<2x3x100000000xf32>\n"
        "  func.return %0 : tensor<2x3x100000000xf32>\n}\n",
        VALID.replace("4xf32", "100000000x100000000xf32"),
        VALID.replace("tensor<4xf32>", "tuple<" * 400 + "tensor<4xf32>" + ">" * 400, 1),
    ],
    ids=["splat", "huge-arguments", "deep-type"],
)
def test_hostile_types_end_well_within_the_cap(text: str, tmp_path: Path) -> None:
    case = tmp_path / "case.mlir"
    case.write_text(text)
    outcome, message = run_case(case, "forge-pipeline", timeout=60, memory_mb=512)
    assert outcome in ("ok", "diagnostic"), message


@pytest.mark.parametrize(
    "allocate",
    [lambda: bytearray(1 << 40), lambda: torch.empty(1 << 38)],
    ids=["python", "torch"],
)
def test_an_allocation_past_the_cap_is_an_out_of_memory_finding(
    allocate: Callable[[], object], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cap makes an allocation fail at once, and the outcome names it: a finding,
    neither an internal error nor a process the kernel kills."""
    case = tmp_path / "valid.mlir"
    case.write_text(VALID)

    def greedy(self: NpuDCEPass, ctx: object, op: object) -> None:
        allocate()

    monkeypatch.setattr(NpuDCEPass, "apply", greedy)
    outcome, _ = run_case(case, "npu-dce", timeout=20, memory_mb=256)
    assert outcome == OUT_OF_MEMORY
    assert OUT_OF_MEMORY not in GOOD
    monkeypatch.undo()
    assert run_case(case, "npu-dce", timeout=20, memory_mb=256)[0] == "ok"  # cap lifted


def test_a_worker_ray_stopped_for_memory_is_out_of_memory() -> None:
    case = IrCase("case.mlir", VALID, "npu-dce", 20)
    assert _crashed(case, "out of memory: Task was killed")[0] == OUT_OF_MEMORY
    assert _crashed(case, "worker crashed: ...")[0] == "crash"


def test_pipeline_mutants_carry_flag_spellings(tmp_path: Path) -> None:
    """Some mutants run with extra flags in mlir-opt's spellings; none ends badly."""
    from forge.tools.fuzz_ir import mutate_flags

    rng = random.Random(0)
    drawn = [mutate_flags(rng) for _ in range(40)]
    assert any(flags for flags in drawn) and any(not flags for flags in drawn)
    assert any(word.startswith("-") and not word.startswith("--") for f in drawn for word in f)
    result = fuzz_pipelines(cases=30, seed=11, workdir=tmp_path)
    assert result.bad == 0, result.failures
