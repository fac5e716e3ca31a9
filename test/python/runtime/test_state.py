"""Buffers a model mutates in forward follow PyTorch semantics: the executor writes
their new values back in place after every call, so outputs *and* state match eager
over several calls (the groundwork a KV cache stands on)."""

from __future__ import annotations

import copy
import importlib.util
from pathlib import Path

import pytest
import torch

from forge.cli import main
from forge.frontend.capture import capture
from forge.frontend.importer import import_program
from forge.runtime.compile import compile_model
from forge.runtime.reference import ReferenceExecutor

STATEFUL = Path(__file__).resolve().parents[2] / "import" / "Inputs" / "stateful.py"


def _factory(name: str) -> tuple[torch.nn.Module, torch.Tensor]:
    spec = importlib.util.spec_from_file_location("stateful", STATEFUL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    model, (x,) = getattr(module, name)()
    return model, x


@pytest.mark.parametrize("name", ["counter", "bn_train"])
def test_outputs_and_state_match_eager_over_calls(name: str) -> None:
    model, x = _factory(name)
    eager = copy.deepcopy(model)
    executor, _ = compile_model(model, (x,))
    generator = torch.Generator().manual_seed(0)
    for _ in range(3):
        xi = torch.randn(x.shape, generator=generator)
        (out,) = executor(xi)
        with torch.no_grad():
            ref = eager(xi)
        assert (out - ref).abs().max() <= 1e-5
        for (key, mine), theirs in zip(model.named_buffers(), eager.buffers(), strict=True):
            assert torch.allclose(mine.double(), theirs.double(), atol=1e-6), key
    assert any(
        not torch.equal(a, b)
        for a, b in zip(model.buffers(), _factory(name)[0].buffers(), strict=True)
    )


def test_written_state_is_never_baked_into_a_graph() -> None:
    """The counter is read inside the NNFactory segment: bound at every call, so the
    graph sees each new value (a constant would keep the first)."""
    model, x = _factory("counter")
    executor, _ = compile_model(model, (x,))
    assert executor.npu_ops == 3
    outs = [executor(x)[0] for _ in range(3)]
    assert torch.allclose(outs[1], 2 * outs[0]) and torch.allclose(outs[2], 3 * outs[0])


def test_the_reference_executor_writes_back_too() -> None:
    model, x = _factory("counter")
    program = import_program(capture(model, (x,)))
    reference = ReferenceExecutor(program.function, program.weights, 1)
    assert len(reference(x)) == 1
    assert float(program.weights["count"]) == 1.0


def test_forge_compile_compares_from_identical_state(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["compile", f"{STATEFUL}:counter", "--runs", "2"]) == 0
    out = capsys.readouterr().out
    assert "state: 1 buffer(s) updated in place as eager does, max-abs diff 0.000e+00" in out
    diff = float(out.split("max-abs logit diff ")[1].split(",")[0])
    assert diff <= 1e-5
