"""Comparing compiled execution with eager PyTorch on random inputs."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, TensorType

from forge.conversion.segments import check_memory
from forge.dialects.shapes import DYNAMIC
from forge.frontend.loading import ordered_inputs
from forge.runtime.agreement import (  # noqa: F401 (re-exported: tests and tools read them here)
    Agreement,
    Sample,
    agreement,
    difference,
    eager_outputs,
    worst,
    worst_of,
)
from forge.runtime.executor import CompiledNPUExecutor
from forge.runtime.reference import ReferenceExecutor
from forge.support.diagnostics import ForgeError
from forge.target.cpu_kernels import torch_dtype
from forge.transforms.npu_schedule_affinity import device_of


def random_like(example: torch.Tensor, generator: torch.Generator, high: int | None) -> Any:
    """A fresh random tensor shaped like `example` (token ids stay below `high`)."""
    if example.dtype == torch.bool:
        return example.clone()
    if not example.dtype.is_floating_point:
        if high is None:  # masks and other integer inputs: keep them
            return example.clone()
        return torch.randint(0, high, example.shape, generator=generator, dtype=example.dtype)
    return torch.randn(example.shape, generator=generator, dtype=example.dtype)


def random_args(
    model: torch.nn.Module, example_args: Sequence[Any], generator: torch.Generator
) -> list[Any]:
    """Fresh random tensors like `example_args` (the first one as token ids below the
    model's vocabulary, where it has one)."""
    vocab = getattr(getattr(model, "config", None), "vocab_size", None)
    return [
        random_like(a, generator, vocab if i == 0 else None) if isinstance(a, torch.Tensor) else a
        for i, a in enumerate(example_args)
    ]


def samples(
    model: torch.nn.Module,
    run: Callable[..., Sequence[torch.Tensor]],
    example_args: Sequence[Any],
    example_kwargs: dict[str, Any],
    input_names: Sequence[str],
    num_inputs: int = 3,
    seed: int = 1,
) -> list[Sample]:
    """`run` and eager `model` on `num_inputs` random inputs."""
    generator = torch.Generator().manual_seed(seed)
    seen = []
    for _ in range(num_inputs):
        args = random_args(model, example_args, generator)
        expected = eager_outputs(model, args, example_kwargs)
        actual = list(run(*ordered_inputs(model, args, example_kwargs, input_names)))
        seen.append(Sample(args, expected, actual))
    return seen


def compare(*args: Any, **kwargs: Any) -> Agreement:
    """Worst agreement of `run` with eager `model` over `num_inputs` random inputs (the
    arguments of `samples`)."""
    return worst_of(samples(*args, **kwargs))


TOLERANCES: dict[torch.dtype, float] = {
    torch.float64: 1e-10,
    torch.float32: 1e-5,
    torch.float16: 4e-3,
    torch.bfloat16: 3e-2,
}
"""`--check-numerics` tolerance per result dtype, relative to max(1, |result|): a few
units in the last place of the format (fp16 has 10 mantissa bits, bf16 7), so a pass may
round differently but not compute something else. Integer and boolean results must be
equal."""


def tolerance_for(dtype: torch.dtype) -> float:
    return TOLERANCES.get(dtype, 0.0)


class NumericsChecker:
    """`forge-opt --check-numerics`: execute every function of the IR before and after
    every pass on the same random inputs (every function argument, weights included, is
    random) and name the first pass that changes a result beyond its dtype's tolerance."""

    def __init__(self, num_inputs: int = 2, seed: int = 0):
        self.num_inputs = num_inputs
        self.seed = seed
        self._inputs: dict[str, list[list[torch.Tensor]]] = {}
        self._expected: dict[str, list[tuple[torch.Tensor, ...]]] = {}

    def _random_inputs(self, function: func.FuncOp) -> list[list[torch.Tensor]]:
        generator = torch.Generator().manual_seed(self.seed)
        runs = []
        for _ in range(self.num_inputs):
            tensors = []
            for arg in function.body.block.args:
                if not isinstance(arg.type, TensorType):
                    raise ForgeError(
                        f"--check-numerics: @{function.sym_name.data} has a non-tensor "
                        f"argument of type {arg.type}"
                    )
                shape = [2 if d == DYNAMIC else d for d in arg.type.get_shape()]
                dtype = torch_dtype(arg.type.get_element_type())
                if dtype.is_floating_point:
                    tensors.append(torch.randn(shape, generator=generator).to(dtype))
                else:  # indices and masks: small values stay in range
                    tensors.append(torch.randint(0, 2, shape, generator=generator).to(dtype))
            runs.append(tensors)
        return runs

    def _run(self, module: ModuleOp) -> dict[str, list[tuple[torch.Tensor, ...]]]:
        results = {}
        for function in _functions(module):
            name = function.sym_name.data
            inputs = self._inputs[name]
            executor = ReferenceExecutor(function, {}, num_inputs=len(inputs[0]))
            # Clones: a function may update its state arguments (npu.writes) in place.
            results[name] = [executor(*[t.clone() for t in run]) for run in inputs]
        return results

    def baseline(self, module: ModuleOp) -> None:
        for function in _functions(module):  # before any random input is drawn
            check_memory(function, None)
        self._inputs = {f.sym_name.data: self._random_inputs(f) for f in _functions(module)}
        self._expected = self._run(module)

    def check(self, module: ModuleOp, pass_name: str) -> None:
        """Raise ForgeError when `pass_name` changed the results beyond the tolerance."""
        names = {f.sym_name.data for f in _functions(module)}
        if names != set(self._expected):
            raise ForgeError(
                f"pass '{pass_name}' changed the module's functions "
                f"({', '.join(sorted(self._expected))} -> {', '.join(sorted(names))})"
            )
        actual = self._run(module)
        for name, runs in actual.items():
            largest, tolerance = _worst(self._expected[name], runs)
            if largest > tolerance:
                raise ForgeError(
                    f"pass '{pass_name}' changed the results: max-abs difference "
                    f"{largest:.3e} relative to max(1, |result|) (tolerance {tolerance:.0e}) on "
                    f"{len(runs)} random inputs of @{name}"
                )
        self._expected = actual

    def check_executable(self, module: ModuleOp) -> None:
        """Raise ForgeError when the compiled executable of a placed module (its NNFactory
        segments and CPU steps, every argument bound per call) differs from the reference
        executor's results beyond the tolerance: the lowerings, not the passes, are then
        wrong. A module no pass placed is left alone."""
        for function in _functions(module):
            if not any(device_of(op) == "npu" for op in function.body.walk()):
                continue
            name = function.sym_name.data
            inputs = self._inputs[name]
            executor = CompiledNPUExecutor(function, {}, num_inputs=len(inputs[0]))
            runs = [executor(*[t.clone() for t in run]) for run in inputs]
            largest, tolerance = _worst(self._expected[name], runs)
            if largest > tolerance:
                raise ForgeError(
                    f"the compiled executable (NNFactory segments and CPU steps) differs from "
                    f"the reference: max-abs difference {largest:.3e} relative to max(1, "
                    f"|result|) (tolerance {tolerance:.0e}) on {len(runs)} random inputs of "
                    f"@{name}"
                )


def _functions(module: ModuleOp) -> list[func.FuncOp]:
    return [op for op in module.walk() if isinstance(op, func.FuncOp) and op.body.blocks]


def _worst(
    expected: Sequence[tuple[torch.Tensor, ...]], actual: Sequence[tuple[torch.Tensor, ...]]
) -> tuple[float, float]:
    """The (relative difference, dtype tolerance) of the result furthest past its
    tolerance; (0, 0) when there are no results."""
    pairs = [
        (_relative_difference(e, a), tolerance_for(e.dtype))
        for expected_run, actual_run in zip(expected, actual, strict=True)
        for e, a in zip(expected_run, actual_run, strict=True)
    ]
    return max(pairs, key=lambda pair: pair[0] - pair[1], default=(0.0, 0.0))


def _relative_difference(e: torch.Tensor, a: torch.Tensor) -> float:
    """max `difference` / max(1, |e|) over the finite elements of `e`; inf when a NaN or
    an infinity is lost or invented."""
    if not e.numel():
        return 0.0
    largest = float(difference(e, a).max())
    finite = e[torch.isfinite(e)].double()
    scale = max(1.0, float(finite.abs().max())) if finite.numel() else 1.0
    return largest / scale
