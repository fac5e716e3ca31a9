"""Shrinking and saving fuzz failures. No real failure is known, so the shrinkers are
checked on injected ones: synthetic predicates, a broken CPU kernel and a broken pass."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

import forge.runtime.executor
from forge.cli import main
from forge.devtools import fuzz_models as fm
from forge.devtools.fuzz_models import BlockSpec, ModelSpec
from forge.dialects import npu
from forge.support.diagnostics import ForgeError
from forge.tools.fuzz_ir import (
    ddmin,
    fuzz,
    lit_test,
    run_case,
    shrink_case,
    shrink_lines,
    signature,
)
from forge.transforms.npu_dce import NpuDCEPass

EXP = (
    "// a comment\n"
    "func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {\n"
    "  %0 = npu.relu %x : tensor<4xf32>\n"
    "  %1 = npu.exp %0 : tensor<4xf32>\n"
    "  %2 = npu.neg %x : tensor<4xf32>\n"
    "  func.return %1 : tensor<4xf32>\n"
    "}\n"
)


def test_ddmin_finds_the_minimal_failing_subset() -> None:
    checks: list[list[int]] = []

    def fails(items: list[int]) -> bool:
        checks.append(items)
        return {3, 11} <= set(items)

    assert ddmin(list(range(16)), fails) == [3, 11]
    assert len(checks) < 60


def test_shrink_lines_keeps_only_the_lines_that_matter() -> None:
    text = "".join(f"line {i}\n" for i in range(40))
    assert shrink_lines(text, lambda t: "line 7\n" in t and "line 30\n" in t) == (
        "line 7\nline 30\n"
    )


def test_model_shrinker_reaches_the_minimal_spec() -> None:
    """A synthetic bug: any rotated attention block fails."""
    spec = ModelSpec(
        (
            BlockSpec("mlp", True, activation="gelu", wide=True),
            BlockSpec(
                "attention",
                True,
                heads=4,
                kv_heads=2,
                q_bias=True,
                rotate=True,
                divide=True,
                mask="additive",
            ),
            BlockSpec("norm", norm="rms"),
            BlockSpec("softmax", True),
        ),
        hidden=32,
        seq=12,
        seed=5,
    )

    def fails(s: ModelSpec) -> bool:
        return any(b.kind == "attention" and b.rotate for b in s.blocks)

    shrunk = fm.shrink(spec, fails)
    assert shrunk == ModelSpec((BlockSpec("attention", rotate=True),), hidden=4, seq=1, seed=0)


def test_specs_round_trip_and_bad_specs_are_one_line_errors(tmp_path: Path) -> None:
    spec = fm.generate(16)
    assert ModelSpec.from_json(json.loads(json.dumps(spec.to_json()))) == spec
    with pytest.raises(ForgeError, match="heads 3 must divide hidden"):
        ModelSpec.from_json(
            {"hidden": 8, "seq": 4, "seed": 0, "blocks": [{"kind": "attention", "heads": 3}]}
        )
    bad = tmp_path / "bad.json"
    bad.write_text('{"blocks": [{"kind": "mlp", "colour": "red"}], "hidden": 8}')
    with pytest.raises(ForgeError, match="bad block"):
        fm.load_spec(bad)


def test_the_grammar_keeps_its_coverage() -> None:
    blocks = [b for seed in range(60) for b in fm.generate(seed).blocks]
    assert {b.kind for b in blocks} == set(fm.KINDS)
    attention = [b for b in blocks if b.kind == "attention"]
    assert {b.mask for b in attention} == set(fm.MASKS)
    assert any(b.kv_heads < b.heads for b in attention) and any(b.rotate for b in attention)
    assert {b.norm for b in blocks if b.kind == "norm"} == set(fm.NORMS)
    assert {b.activation for b in blocks if b.kind == "mlp"} == set(fm.ACTIVATIONS)
    assert any(b.residual for b in blocks)


def _break_cpu_sdpa(monkeypatch: pytest.MonkeyPatch) -> None:
    """Masked attention runs on the CPU; scale its kernel's output so it is wrong."""
    original = forge.runtime.executor.cpu_kernel

    def broken(op: object) -> object:
        kernel = original(op)
        if isinstance(op, npu.SDPAOp):
            return lambda *args: kernel(*args) * 1.5
        return kernel

    monkeypatch.setattr(forge.runtime.executor, "cpu_kernel", broken)


def test_a_broken_kernel_is_found_shrunk_and_saved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _break_cpu_sdpa(monkeypatch)
    # Seed 9: norm, masked 4-head attention, shuffle (hidden 32).
    result = fm.fuzz_models(cases=1, seed=9, save_dir=tmp_path)
    assert result.counts["mismatch"] == 1
    (failure,) = result.failures
    assert failure.shrunk == ModelSpec(
        (BlockSpec("attention", mask="causal_where"),), hidden=4, seq=1, seed=0
    )
    assert failure.saved is not None and failure.saved.parent == tmp_path
    saved = json.loads(failure.saved.read_text())
    assert saved["failure"].startswith("mismatch") and "case seed 9" in saved["origin"]
    assert fm.load_spec(failure.saved) == failure.shrunk
    assert fm.check(failure.shrunk).kind == "mismatch"
    monkeypatch.undo()
    assert fm.check(failure.shrunk).kind == "match"


def test_fuzz_models_cli_saves_to_save_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _break_cpu_sdpa(monkeypatch)
    code = main(["fuzz-models", "--cases", "1", "--seed", "20", "--save-dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 1 and "0 match eager, 1 fail" in out and "shrunk to" in out
    assert len(list(tmp_path.glob("model-*.json"))) == 1


def _break_dce_on_exp(monkeypatch: pytest.MonkeyPatch) -> None:
    original = NpuDCEPass.apply

    def broken(self: NpuDCEPass, ctx: object, op: object) -> None:
        if any(isinstance(o, npu.ExpOp) for o in op.walk()):  # type: ignore[attr-defined]
            raise RuntimeError("deliberately broken on npu.exp")
        original(self, ctx, op)  # type: ignore[arg-type]

    monkeypatch.setattr(NpuDCEPass, "apply", broken)


def test_ir_shrinker_keeps_the_failure_class(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _break_dce_on_exp(monkeypatch)
    text, wanted, message = shrink_case(EXP, "forge-pipeline", tmp_path, timeout=20)
    assert wanted == "internal error: RuntimeError" and "npu.exp" in message
    # npu.exp needs its operand, so the relu stays; the neg and the comment go.
    assert text == "".join(EXP.splitlines(keepends=True)[i] for i in (1, 2, 3, 5, 6))
    assert signature("internal error", message) == wanted
    assert signature("diagnostic", "x.mlir:1:1: error: y") == "diagnostic"


def test_saved_lit_test_fails_now_and_asserts_one_diagnostic_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _break_dce_on_exp(monkeypatch)
    text, wanted, message = shrink_case(EXP, "forge-pipeline", tmp_path, timeout=20)
    test = lit_test(text, wanted, message, "forge-pipeline")
    assert "// RUN: not forge-opt %s -p forge-pipeline 2>&1 | filecheck %s\n" in test
    saved = tmp_path / "case.mlir"
    saved.write_text(test)
    # The header is comments only: the saved test reproduces the same failure class.
    assert signature(*run_case(saved, "forge-pipeline", 20)) == wanted
    check_file = tmp_path / "checks.mlir"
    check_file.write_text(test)
    filecheck = Path(sys.executable).parent / "filecheck"
    for output, ok in (
        (f"{saved}:3:8: error: 'npu.exp' op something is wrong\n", True),
        (f"forge-opt: error: {message.split('error: ', 1)[1]}\n", False),
        ("Traceback (most recent call last):\nforge-opt: error: x\n", False),
        ("a.mlir:1:1: error: x\nsecond line\n", False),
    ):
        run = subprocess.run([filecheck, check_file], input=output, text=True, capture_output=True)
        assert (run.returncode == 0) == ok, output


def test_fuzz_ir_shrinks_and_saves_failures(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _break_dce_on_exp(monkeypatch)
    (tmp_path / "test").mkdir()
    padding = "".join(f"// comment {i}: most mutations land here\n" for i in range(20))
    (tmp_path / "test" / "exp.mlir").write_text(padding + EXP)
    save_dir = tmp_path / "regressions"
    result = fuzz(tmp_path, 2, 0, "npu-dce", tmp_path / "work", save_dir=save_dir)
    assert result.bad >= 1, result.summary()
    saved = sorted(save_dir.glob("fuzz-*.mlir"))
    assert len(result.regressions) == 2 * result.bad  # in the workdir, then in save_dir
    assert len(saved) == 1  # both mutants shrink to the same case, saved once
    for path in saved:
        assert "// RUN: not forge-opt %s -p npu-dce 2>&1 | filecheck %s" in path.read_text()
        assert signature(*run_case(path, "npu-dce", 20)) == "internal error: RuntimeError"


def test_a_hang_is_a_hang_and_its_lit_test_cannot_hang_lit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """forge-opt turns exceptions into 'internal error' lines; the alarm must get through."""

    def stuck(self: NpuDCEPass, ctx: object, op: object) -> None:
        time.sleep(30)

    monkeypatch.setattr(NpuDCEPass, "apply", stuck)
    case = tmp_path / "case.mlir"
    case.write_text(EXP)
    assert run_case(case, "npu-dce", timeout=1) == ("hang", "")
    test = lit_test(EXP, "hang", "", "npu-dce")
    assert "// RUN: not timeout 60 forge-opt %s -p npu-dce 2>&1 | filecheck %s\n" in test
