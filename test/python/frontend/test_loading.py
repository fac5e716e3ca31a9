"""Loading models: every way a model reference can be wrong is a one-line error."""

from __future__ import annotations

from pathlib import Path

import pytest

from forge.cli import main


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["import", "gpt2", "--tiny", "--seq", "-5"], "argument --seq: expected an integer from 1"),
        (["import", "gpt2", "--tiny", "--seq", "300"], "--seq 300 exceeds the model's 256"),
        (["compile", "gpt2", "--tiny", "--seq", "100000"], "exceeds the model's 256 positions"),
    ],
)
def test_sequence_length_is_checked_at_load(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("raise RuntimeError('boom')", "the factory raised RuntimeError: boom"),
        ("return 3", "or a transformers causal LM, got int"),
        ("return lambda: 1", "or a transformers causal LM, got function"),
        ("return (torch.nn.Linear(2, 2), 5)", "got (Linear, int, ...)"),
        ("return (torch.nn.Linear(2, 2), (torch.ones(2),), 7)", "kwargs must be a dict"),
        ("sys.exit(0)", "the factory called sys.exit(0)"),
        ("raise SystemExit('bye')", "the factory called sys.exit('bye')"),
        ("raise KeyboardInterrupt", "the factory raised KeyboardInterrupt (not an interrupt)"),
    ],
)
def test_bad_factories_are_one_line_errors(
    body: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    factory = tmp_path / "factory.py"
    factory.write_text(f"import sys\n\nimport torch\n\n\ndef make():\n    {body}\n")
    assert main(["import", f"{factory}:make"]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err
    assert "internal error" not in err


@pytest.mark.parametrize("command", ["import", "generate"])
def test_a_model_file_that_exits_is_an_error(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Exiting while the file loads is an error too (it used to end `forge generate`
    with exit code 0 and no output)."""
    factory = tmp_path / "factory.py"
    factory.write_text("import sys\n\nsys.exit(0)\n")
    assert main([command, f"{factory}:make"]) == 1
    err = capsys.readouterr().err.strip()
    assert err == f"forge: error: {factory}: loading it called sys.exit(0)"


def test_ctrl_c_in_a_factory_stays_an_interrupt(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A real SIGINT while the factory runs is the user's interrupt: exit 130, no error."""
    factory = tmp_path / "factory.py"
    factory.write_text(
        "import os, signal, time\n\n\ndef make():\n"
        "    os.kill(os.getpid(), signal.SIGINT)\n    time.sleep(5)\n"
    )
    assert main(["import", f"{factory}:make"]) == 130
    assert capsys.readouterr().err == ""


def test_import_output_is_written_atomically(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out.mlir"
    out.write_text("KEEP\n")
    assert main(["import", "no-such-model", "-o", str(out)]) == 1
    assert out.read_text() == "KEEP\n"
    assert main(["import", "gpt2", "--tiny", "--seq", "8", "-o", str(out)]) == 0
    assert out.read_text().startswith("builtin.module")
    assert [p.name for p in tmp_path.iterdir()] == ["out.mlir"]
