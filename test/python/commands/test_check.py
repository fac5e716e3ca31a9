"""`forge check` and `forge compile` judge what runs: the compiled executable against
eager by the one rule (`forge.runtime.agreement`), MISMATCH and exit 1 when it fails.

The factories of test/conversion/Inputs/extremes.py clamp against 1e9 and hold NaN: the
relu form of maximum/minimum the NNFactory binding replaced got them wrong with exit 0
(issue 50), and `forge check` passed them because it ran the reference executor only
(issue 51). The old form comes back here through a monkeypatch, only in a test."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from forge.cli import main
from forge.conversion import nnfactory_graph
from forge.conversion.nnfactory_graph import GraphBuilder, Node

EXTREMES = Path(__file__).resolve().parents[2] / "conversion" / "Inputs" / "extremes.py"
FACTORIES = ["max_of_full", "min_of_full", "max_of_scaled", "max_of_nan", "min_of_nan"]


def relu_form(b: GraphBuilder, name: str, x: Node, y: Node) -> Node:
    """max(x, y) = x + relu(y - x), min(x, y) = x - relu(x - y): the old lowering."""
    f = b.factory
    if name == "eltwise_max":
        return f.eltwise_add(x, f.relu(b.sub(y, x)))
    return b.sub(x, f.relu(b.sub(x, y)))


@pytest.fixture
def old_lowering(monkeypatch: pytest.MonkeyPatch) -> None:
    nnfactory_graph.clear_cache()  # no graph of the right form may answer
    monkeypatch.setattr(GraphBuilder, "extreme", relu_form)
    yield
    nnfactory_graph.clear_cache()


def model(factory: str) -> str:
    return f"{EXTREMES}:{factory}"


@pytest.mark.parametrize("factory", FACTORIES)
def test_check_passes_the_exact_lowering(factory: str, capsys: Any) -> None:
    assert main(["check", model(factory), "--inputs", "2"]) == 0
    out = capsys.readouterr().out
    assert f"{factory} (compiled): ok" in out
    assert f"{factory} (reference, imported): ok" in out


@pytest.mark.parametrize("factory", FACTORIES)
def test_check_fails_what_runs_wrong(factory: str, old_lowering: None, capsys: Any) -> None:
    """The executable and the reference differ: the compiled comparison fails, the
    reference one passes, and the exit status is 1."""
    assert main(["check", model(factory), "--inputs", "2"]) == 1
    out = capsys.readouterr().out
    assert f"{factory} (compiled): MISMATCH" in out
    assert f"{factory} (reference, imported): ok" in out


@pytest.mark.parametrize("factory", FACTORIES)
def test_compile_judges_its_comparison(factory: str, capsys: Any) -> None:
    assert main(["compile", model(factory), "--runs", "1", "--no-cache"]) == 0
    out = capsys.readouterr().out
    assert "check: ok (fp32 rule: max-abs" in out
    assert "0 fallback op(s)" in out  # maximum/minimum ran in NNFactory


@pytest.mark.parametrize("factory", ["max_of_full", "max_of_scaled", "min_of_nan"])
def test_compile_says_mismatch_and_exits_1(factory: str, old_lowering: None, capsys: Any) -> None:
    assert main(["compile", model(factory), "--runs", "1", "--no-cache"]) == 1
    assert "check: MISMATCH (fp32 rule: max-abs" in capsys.readouterr().out
