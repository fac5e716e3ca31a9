"""torch.compile(model, backend="forge") on the tiny variants of the six models."""

from __future__ import annotations

import warnings

import pytest
import torch

from forge.conversion import nnfactory_graph
from forge.frontend import models
from forge.runtime import dynamo


@pytest.mark.parametrize("name", list(models.SPECS))
def test_torch_compile_backend(name: str) -> None:
    torch._dynamo.reset()
    model = models.build_model(name, tiny=True)
    args, kwargs = models.example_inputs(model, seq=16)
    compiled = torch.compile(model, backend="forge")
    graphs_before = nnfactory_graph.STATS.compiles + nnfactory_graph.STATS.hits
    with warnings.catch_warnings(record=True) as caught, torch.no_grad():
        warnings.simplefilter("always")
        for seed in range(2):
            ids = torch.randint(
                0, 256, args[0].shape, generator=torch.Generator().manual_seed(seed)
            )
            out = compiled(ids, **kwargs).logits
            ref = model(ids, **kwargs).logits
            assert (out - ref).abs().max() <= 1e-4
            assert torch.equal(out.argmax(-1), ref.argmax(-1))
    fallbacks = [str(w.message) for w in caught if str(w.message).startswith("forge:")]
    assert not fallbacks, fallbacks
    # Forge really compiled the graph: NNFactory segments were built for it.
    assert nnfactory_graph.STATS.compiles + nnfactory_graph.STATS.hits > graphs_before


def test_each_sequence_length_is_compiled_by_forge(monkeypatch: pytest.MonkeyPatch) -> None:
    """Dynamo recompiles with symbolic sizes at the second length; Forge compiles one
    static executor per concrete shape instead of running the graph eagerly."""
    compiled_shapes: list[tuple[int, ...]] = []
    original = dynamo.compile_model

    def counting(module: torch.nn.Module, args: tuple, **options: object) -> object:
        compiled_shapes.append(tuple(args[0].shape))
        return original(module, args, **options)

    monkeypatch.setattr(dynamo, "compile_model", counting)
    torch._dynamo.reset()
    model = models.build_model("gpt2", tiny=True)
    compiled = torch.compile(model, backend="forge")
    with warnings.catch_warnings(record=True) as caught, torch.no_grad():
        warnings.simplefilter("always")
        for seq in (16, 24, 32, 24):
            ids = torch.randint(0, 256, (1, seq), generator=torch.Generator().manual_seed(seq))
            out, ref = compiled(ids).logits, model(ids).logits
            assert (out - ref).abs().max() <= 1e-4
    assert not [w for w in caught if str(w.message).startswith("forge:")]
    assert sorted(set(compiled_shapes)) == [(1, 16), (1, 24), (1, 32)]
    assert compiled_shapes.count((1, 24)) == 1  # the second call at 24 hits the cache


def test_the_shape_bound_evicts_with_one_warning() -> None:
    torch._dynamo.reset()
    dynamo._warned.clear()
    model = models.build_model("gpt2", tiny=True)
    compiled = torch.compile(model, backend="forge", options={"max_shapes": 1})
    with warnings.catch_warnings(record=True) as caught, torch.no_grad():
        warnings.simplefilter("always")
        for seq in (16, 24, 32):
            ids = torch.randint(0, 256, (1, seq))
            assert (compiled(ids).logits - model(ids).logits).abs().max() <= 1e-4
    evictions = [w for w in caught if "input shapes for one graph" in str(w.message)]
    assert len(evictions) == 1


def test_an_unknown_option_is_an_error() -> None:
    torch._dynamo.reset()
    model = models.build_model("gpt2", tiny=True)
    compiled = torch.compile(model, backend="forge", options={"speed": "max"})
    with pytest.raises(Exception, match="unknown forge backend option"):
        compiled(torch.randint(0, 256, (1, 8)))


class _ClampToFloor(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.lin(x)
        return torch.maximum(torch.full_like(y, -1e9), y)


def test_check_option_raises_on_a_wrong_result(monkeypatch: pytest.MonkeyPatch) -> None:
    """options={"check": True} runs each call eagerly too and judges the pair by the rule
    `forge check` uses; a wrong lowering (the relu form of maximum, put back here by a
    monkeypatch) is a ForgeError naming the mismatch, not a wrong answer."""
    from forge.conversion.nnfactory_graph import GraphBuilder
    from forge.support.diagnostics import ForgeError

    torch.manual_seed(0)
    model, x = _ClampToFloor().eval(), torch.randn(2, 8)
    torch._dynamo.reset()
    with torch.no_grad():
        out = torch.compile(model, backend="forge", options={"check": True})(x)
    assert torch.allclose(out, model(x), atol=1e-6)

    def relu_form(b: GraphBuilder, name: str, lhs: object, rhs: object) -> object:
        return b.factory.eltwise_add(lhs, b.factory.relu(b.sub(rhs, lhs)))

    nnfactory_graph.clear_cache()
    monkeypatch.setattr(GraphBuilder, "extreme", relu_form)
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="forge", options={"check": True})
    with pytest.raises(ForgeError, match="MISMATCH against eager: fp32 rule"), torch.no_grad():
        compiled(x)
    nnfactory_graph.clear_cache()
