"""forge-opt as a library and as a process: exit codes, one-line diagnostics, no tracebacks."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pytest

from forge.tools.forge_opt import main

ROOT = Path(__file__).resolve().parents[3]
SAMPLE = ROOT / "test" / "samples" / "gpt2_attention.mlir"


def run_main(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(args)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_pipeline_runs_and_prints(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_main([str(SAMPLE), "-p", "cse,dce"], capsys)
    assert code == 0, err
    assert "func.func @gpt2_attention" in out
    assert "%unused" not in out and "npu.transpose %ctx {dim0 = 2" not in out


def test_round_trip_is_identity(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, first, _ = run_main([str(SAMPLE)], capsys)
    assert code == 0
    again = tmp_path / "again.mlir"
    again.write_text(first)
    code, second, _ = run_main([str(again)], capsys)
    assert code == 0 and second == first


@pytest.mark.parametrize(
    ("args", "stdin", "expected"),
    [
        ([], "garbage\n", "error: Operation garbage is not registered"),
        ([str(SAMPLE), "-p", "no-such-pass"], "", "Unrecognized passes: ['no-such-pass']"),
        ([str(SAMPLE), "-p", "cse{bogus=1}"], "", 'Provided arguments ["bogus"] not found'),
        ([str(SAMPLE), "-p", "cse{"], "", "Expected argument name here (column 5)"),
        ([str(SAMPLE), "--no-such-flag"], "", "unrecognized arguments: --no-such-flag"),
        (["/does/not/exist.mlir"], "", "No such file or directory"),
    ],
)
def test_errors_are_one_line_exit_1(args: list[str], stdin: str, expected: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "forge.tools.forge_opt", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert expected in lines[0]
    assert "Traceback" not in proc.stderr


def test_verifier_error_has_location(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.mlir"
    bad.write_text(
        "func.func @f(%a: tensor<2x3xf32>) -> tensor<3x2xf32> {\n"
        "  %0 = npu.transpose %a {dim0 = 0 : i64, dim1 = 1 : i64}"
        " : tensor<2x3xf32> -> tensor<2x3xf32>\n"
        "  func.return %0 : tensor<2x3xf32>\n"
        "}\n"
    )
    code, _, err = run_main([str(bad)], capsys)
    assert code == 1
    assert err.strip().startswith(f"{bad}:2:3: error: 'npu.transpose' op result has shape 2x3")


def test_mutated_inputs_never_escape_as_exceptions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Random byte-level mutations of a real file: success or exit 1, nothing else."""
    text = SAMPLE.read_text()
    rng = random.Random(0)
    alphabet = '%:<>(){}[],=x0123456789-. \nnpu.fgtensorf32i64"@'
    for i in range(60):
        chars = list(text)
        for _ in range(rng.randint(1, 4)):
            pos = rng.randrange(len(chars))
            action = rng.choice(("delete", "insert", "replace"))
            if action == "delete":
                del chars[pos]
            elif action == "insert":
                chars.insert(pos, rng.choice(alphabet))
            else:
                chars[pos] = rng.choice(alphabet)
        case = tmp_path / f"mutant{i}.mlir"
        case.write_text("".join(chars))
        code, _, err = run_main([str(case), "-p", "cse,dce"], capsys)
        assert code in (0, 1)
        if code == 1:
            assert len(err.strip().splitlines()) == 1, err
            assert "internal error" not in err, err
