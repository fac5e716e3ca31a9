"""torch.compile(model, backend="forge") on the tiny variants of the six models."""

from __future__ import annotations

import warnings

import pytest
import torch

from forge.conversion import nnfactory_graph
from forge.frontend import models


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
