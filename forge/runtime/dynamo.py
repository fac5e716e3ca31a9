"""`torch.compile(model, backend="forge")`.

Dynamo hands the backend an FX graph and example inputs; Forge re-captures that graph
with `torch.export` (ATen level), runs the whole pipeline and returns the compiled
executor as the graph's replacement. The backend is registered under the
`torch_dynamo_backends` entry point, so `backend="forge"` works without an import.

Forge compiles static shapes (an NPU runs static programs). When Dynamo recompiles a
graph with symbolic sizes (the second sequence length a model sees), the backend
compiles one executor per concrete shape on first use and keeps the most recent
`max_shapes` of them (8 by default; passing the bound evicts the least recently used,
with a warning). A graph Forge cannot compile runs eagerly, with a warning that names
the reason, once per reason.
"""

from __future__ import annotations

import warnings
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import torch

from forge.runtime.agreement import Sample, eager_outputs, judge_samples
from forge.runtime.compile import compile_model
from forge.runtime.executor import CompiledNPUExecutor
from forge.support.diagnostics import ForgeError

MAX_SHAPES = 8
"""Executors kept per Dynamo graph (one per concrete input shape)."""

_warned: set[str] = set()


def warn_once(reason: str) -> None:
    """Warn about `reason` the first time it occurs in this process."""
    if reason in _warned:
        return
    _warned.add(reason)
    warnings.warn(f"forge: {reason}", stacklevel=3)


class _Specialized(torch.nn.Module):
    """The Dynamo graph with its integer (symbolic size) inputs fixed to one call's
    values, so torch.export sees a static graph of tensors only."""

    def __init__(self, gm: torch.fx.GraphModule, constants: Sequence[Any]):
        super().__init__()
        self.gm = gm
        self.constants = list(constants)
        """Per graph input: its fixed value, or None where a tensor goes."""

    def forward(self, *tensors: torch.Tensor) -> Any:
        feed = iter(tensors)
        args = [next(feed) if c is None else c for c in self.constants]
        return self.gm(*args)


class ShapeCache:
    """One compiled executor per concrete input shape of a Dynamo graph."""

    def __init__(self, gm: torch.fx.GraphModule, options: dict[str, Any]):
        self.gm = gm
        self.precision = options.get("precision", "fp32")
        self.granularity = options.get("granularity", "segment")
        self.max_shapes = int(options.get("max_shapes", MAX_SHAPES))
        self.cache = options.get("cache", False)
        """The compile cache (off unless options={"cache": True}): a graph's generated
        code is keyed on its capture (forge.runtime.cache_trust), with the example
        inputs and the weights it holds, like any model."""
        self.check = bool(options.get("check", False))
        """Checking mode (options={"check": True}): every call also runs the graph
        eagerly and raises ForgeError when the compiled result fails the rule
        `forge check` and `forge compile` judge by (`forge.runtime.agreement`)."""
        self.executors: OrderedDict[tuple, CompiledNPUExecutor | None] = OrderedDict()

    @staticmethod
    def key(args: Sequence[Any]) -> tuple:
        return tuple(
            ("t", tuple(a.shape), a.dtype) if isinstance(a, torch.Tensor) else ("v", a)
            for a in args
        )

    def executor_for(self, args: Sequence[Any]) -> CompiledNPUExecutor | None:
        key = self.key(args)
        if key in self.executors:
            self.executors.move_to_end(key)
            return self.executors[key]
        if len(self.executors) >= self.max_shapes:
            self.executors.popitem(last=False)
            warn_once(
                f"more than {self.max_shapes} input shapes for one graph; recompiling "
                "evicted shapes (raise options={'max_shapes': N})"
            )
        self.executors[key] = self._compile(args)
        return self.executors[key]

    def _compile(self, args: Sequence[Any]) -> CompiledNPUExecutor | None:
        tensors = tuple(a for a in args if isinstance(a, torch.Tensor))
        constants = [None if isinstance(a, torch.Tensor) else a for a in args]
        module: torch.nn.Module = (
            self.gm if len(tensors) == len(args) else _Specialized(self.gm, constants)
        )
        try:
            executor, _ = compile_model(
                module,
                tensors,
                precision=self.precision,
                granularity=self.granularity,
                cache=self.cache,
            )
        except ForgeError as e:
            warn_once(f"{e}; running this graph eagerly")
            return None
        except Exception as e:  # an internal error must not take the user's model down
            warn_once(f"internal error {type(e).__name__}: {e}; running this graph eagerly")
            return None
        if executor.num_inputs != len(tensors):
            warn_once("graph inputs were specialized away by torch.export; running it eagerly")
            return None
        return executor

    def __call__(self, *args: Any) -> Any:
        executor = self.executor_for(args)
        if executor is None:
            return self.gm(*args)
        outputs = executor(*(a for a in args if isinstance(a, torch.Tensor)))
        if self.check:
            self._check(args, outputs, executor.precision)
        return outputs

    def _check(self, args: Sequence[Any], outputs: Sequence[torch.Tensor], precision: str) -> None:
        sample = Sample(list(args), eager_outputs(self.gm, args, {}), list(outputs))
        _, verdict = judge_samples(self.gm, [sample], {}, precision)
        if not verdict.ok:
            raise ForgeError(f"MISMATCH against eager: {verdict.rule}")


def forge_backend(
    gm: torch.fx.GraphModule, example_inputs: Sequence[Any], **options: Any
) -> Callable[..., Any]:
    """Compile one Dynamo graph with Forge (options: precision, granularity,
    max_shapes, cache, check). Static graphs compile now; graphs with symbolic sizes compile per
    concrete shape at their first call."""
    options = {**(options.pop("options", None) or {}), **options}  # torch.compile(options=)
    unknown = set(options) - {"precision", "granularity", "max_shapes", "cache", "check"}
    if unknown:
        raise ForgeError(f"unknown forge backend option(s): {', '.join(sorted(unknown))}")
    cache = ShapeCache(gm, options)
    if all(isinstance(x, torch.Tensor) for x in example_inputs) and not any(
        isinstance(d, torch.SymInt) for x in example_inputs for d in x.shape
    ):
        cache.executor_for(example_inputs)
    return cache
