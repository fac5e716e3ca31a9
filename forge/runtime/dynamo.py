"""`torch.compile(model, backend="forge")`.

Dynamo hands the backend an FX graph and example inputs; Forge re-captures that graph
with `torch.export` (ATen level), runs the whole pipeline and returns the compiled
executor as the graph's replacement. The backend is registered under the
`torch_dynamo_backends` entry point, so `backend="forge"` works without an import.
A graph Forge cannot compile runs eagerly, with a warning that says why.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any

import torch

from forge.diagnostics import ForgeError
from forge.runtime.executor import compile_model


def forge_backend(
    gm: torch.fx.GraphModule, example_inputs: Sequence[Any], **options: Any
) -> Callable[..., Any]:
    """Compile one Dynamo graph with Forge (options: precision, granularity)."""
    tensors = [x for x in example_inputs if isinstance(x, torch.Tensor)]
    if len(tensors) != len(example_inputs):
        warnings.warn("forge: graph has non-tensor inputs; running it eagerly", stacklevel=2)
        return gm.forward
    try:
        executor, _ = compile_model(
            gm,
            tuple(tensors),
            precision=options.get("precision", "fp32"),
            granularity=options.get("granularity", "segment"),
        )
    except ForgeError as e:
        warnings.warn(f"forge: {e}; running this graph eagerly", stacklevel=2)
        return gm.forward
    if executor.num_inputs != len(tensors):
        warnings.warn("forge: graph inputs were specialized; running it eagerly", stacklevel=2)
        return gm.forward

    def run(*args: torch.Tensor) -> Any:
        return executor(*args)

    return run
