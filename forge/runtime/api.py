"""The public Python API: `forge.compile` and `forge.compile_lm`, with PyTorch's habits.

`forge.compile(model, example_args, example_kwargs)` works like `torch_tensorrt.compile`:
it compiles the model for the static shapes of the examples (`compile_model`: torch.export,
import, plan, executor) and returns a `CompiledModule`, a `torch.nn.Module` called with the
model's own arguments that returns the model's own output structure. The executor under
it takes flat tensors and returns flat tensors; torch.export's pytree specs (kept in the
`CompileReport`) flatten the call and rebuild the output:

* the call's `(args, kwargs)` must have the example's structure; its tensor leaves are the
  executor's inputs, in order, and must have the example's shape and dtype;
* the non-tensor leaves torch.export specialized the graph to (`use_cache=False`, an int)
  must equal the example's value, since the compiled graph has no input for them;
* the executor's results and the constants torch.export recorded for non-tensor outputs
  are put back into the output spec (a dict, a tuple, a transformers `ModelOutput`...).

Every mismatch is a `ForgeError` of one line naming the argument, what was compiled and
what was given. Buffers the model mutates are written back by the executor, into the
model's own tensors, as eager would.

`compile_lm` (a causal LM with a static KV cache, `CompiledLM.generate`) is re-exported
from `forge.runtime.generate`.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._pytree import (
    KeyPath,
    TreeSpec,
    keystr,
    tree_flatten_with_path,
    tree_unflatten,
)

from forge.conversion.segments import GRANULARITIES
from forge.dialects.dtypes import check_precision
from forge.runtime.compile import CompileReport, compile_model
from forge.runtime.executor import CompiledNPUExecutor
from forge.runtime.generate import compile_lm
from forge.support.diagnostics import ForgeError

__all__ = ["CompiledModule", "compile", "compile_lm"]


@dataclass(frozen=True)
class TensorInput:
    """A tensor leaf of the compiled call: fed to the executor, shape and dtype fixed."""

    shape: tuple[int, ...]
    dtype: torch.dtype

    def __str__(self) -> str:
        return _tensor_text(self.shape, self.dtype)


@dataclass(frozen=True)
class ConstantInput:
    """A non-tensor leaf torch.export baked into the graph: a call must pass the same."""

    value: Any


Expected = TensorInput | ConstantInput


class CompiledModule(torch.nn.Module):
    """A model compiled by `forge.compile`: called like the model, for inference.

    `report` is the `CompileReport` (phase times, segments, notes); `executor` the
    `CompiledNPUExecutor` that runs the flat tensors."""

    def __init__(
        self,
        executor: CompiledNPUExecutor,
        report: CompileReport,
        inputs: Sequence[Expected],
        positional_names: Sequence[str] = (),
    ):
        super().__init__()
        if report.in_spec is None or report.out_spec is None:
            raise ForgeError("the compile report has no pytree specs (not from compile_model)")
        tensors = sum(isinstance(x, TensorInput) for x in inputs)
        if len(inputs) != report.in_spec.num_leaves or tensors != executor.num_inputs:
            raise ForgeError(
                f"torch.export's call has {report.in_spec.num_leaves} leaves ({tensors} "
                f"tensors) but the executor takes {executor.num_inputs} inputs"
            )
        self.executor = executor
        self.report = report
        self.inputs = tuple(inputs)
        """Per leaf of the compiled call's `(args, kwargs)`: what it must be."""
        self._positional_names = tuple(positional_names)
        """The model's positional parameter names, for messages."""

    def extra_repr(self) -> str:
        return (
            f"precision={self.executor.precision}, granularity={self.executor.granularity}, "
            f"inputs={self.report.input_names}, segments={len(self.executor.segments)}"
        )

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        leaves = self._flatten(args, kwargs)
        tensors = [self._check(name, value, expected) for (name, value), expected in leaves]
        results = self.executor(*(t for t in tensors if t is not None))
        return self._unflatten(results)

    # -- the call

    def _argument_name(self, index: int) -> str:
        if index < len(self._positional_names):
            return self._positional_names[index]
        return f"args[{index}]"

    def _flatten(
        self, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> list[tuple[tuple[str, Any], Expected]]:
        """(argument name, leaf) and its expectation, per leaf of the call, after checking
        the call has the compiled structure (keyword order does not matter)."""
        arg_specs = self.report.in_spec.child(0).children()
        kwarg_spec = self.report.in_spec.child(1)
        keys = list(kwarg_spec.context)
        compiled_args = ", ".join(self._argument_name(i) for i in range(len(arg_specs)))
        compiled_keys = ", ".join(keys) or "none"
        if len(args) < len(arg_specs):
            raise ForgeError(
                f"missing argument '{self._argument_name(len(args))}' (compiled with "
                f"{len(arg_specs)} positional argument(s): {compiled_args})"
            )
        if len(args) > len(arg_specs):
            raise ForgeError(
                f"unexpected positional argument '{self._argument_name(len(arg_specs))}' "
                f"(compiled with {len(arg_specs)} positional argument(s): {compiled_args})"
            )
        missing = [k for k in keys if k not in kwargs]
        if missing:
            raise ForgeError(
                f"missing keyword argument '{missing[0]}' (compiled with keyword "
                f"arguments: {compiled_keys})"
            )
        extra = [k for k in kwargs if k not in keys]
        if extra:
            raise ForgeError(
                f"unexpected keyword argument '{extra[0]}' (compiled with keyword "
                f"arguments: {compiled_keys})"
            )
        named = [
            *(
                (self._argument_name(i), a, s)
                for i, (a, s) in enumerate(zip(args, arg_specs, strict=True))
            ),
            *((k, kwargs[k], kwarg_spec.child(i)) for i, k in enumerate(keys)),
        ]
        leaves: list[tuple[str, Any]] = []
        for name, value, spec in named:
            flat, given = tree_flatten_with_path(value)
            if given != spec:
                expected = (
                    _expected_text(self.inputs[len(leaves)])
                    if spec.is_leaf()
                    else f"the structure {_structure(spec)}"
                )
                raise ForgeError(f"{name}: expected {expected}, got {_structure(given)}")
            leaves.extend((name + keystr(path), leaf) for path, leaf in flat)
        return list(zip(leaves, self.inputs, strict=True))

    @staticmethod
    def _check(name: str, value: Any, expected: Expected) -> torch.Tensor | None:
        """The tensor to feed for this leaf (None for a constant), or a one-line error."""
        if isinstance(expected, ConstantInput):
            if (
                isinstance(value, torch.Tensor)
                or type(value) is not type(expected.value)
                or value != expected.value
            ):
                given = _value_text(value)
                raise ForgeError(
                    f"{name}: compiled for the constant {expected.value!r}, got {given}"
                )
            return None
        if not isinstance(value, torch.Tensor):
            raise ForgeError(f"{name}: expected a tensor {expected}, got {_value_text(value)}")
        if tuple(value.shape) != expected.shape or value.dtype != expected.dtype:
            raise ForgeError(
                f"{name}: expected shape {expected}, got {_tensor_text(value.shape, value.dtype)}"
            )
        return value

    def _unflatten(self, results: Sequence[torch.Tensor]) -> Any:
        """The model's output structure, from the executor's tensors and the recorded
        non-tensor outputs."""
        spec = self.report.out_spec
        constants = self.report.output_constants
        if len(results) != spec.num_leaves - len(constants):
            raise ForgeError(
                f"the executor returned {len(results)} tensor(s); torch.export's output has "
                f"{spec.num_leaves - len(constants)}"
            )
        feed = iter(results)
        leaves = [constants[i] if i in constants else next(feed) for i in range(spec.num_leaves)]
        return tree_unflatten(leaves, spec)


def compile(
    model: torch.nn.Module,
    example_args: Sequence[Any] | torch.Tensor,
    example_kwargs: Mapping[str, Any] | None = None,
    *,
    precision: str = "fp32",
    granularity: str = "segment",
    cache: bool = False,
) -> CompiledModule:
    """`model` compiled for the shapes and dtypes of the example arguments (a tuple of
    positional arguments, or one tensor), called like `model` itself. `cache=True` uses
    the persistent compile cache (docs/compile-cache.md): off by default, as in
    `compile_model`, so a library call never writes to the user's cache folder unasked."""
    if not isinstance(model, torch.nn.Module):
        raise ForgeError(f"forge.compile takes a torch.nn.Module, got {type(model).__name__}")
    check_precision(precision)
    if granularity not in GRANULARITIES:
        raise ForgeError(
            f"granularity must be one of {', '.join(GRANULARITIES)}, got '{granularity}'"
        )
    args = _example_args(example_args)
    if example_kwargs is not None and not isinstance(example_kwargs, Mapping):
        raise ForgeError(f"example_kwargs must be a dict, got {type(example_kwargs).__name__}")
    kwargs = dict(example_kwargs or {})
    executor, report = compile_model(
        model, args, kwargs, precision=precision, granularity=granularity, cache=cache
    )
    flat, spec = tree_flatten_with_path((args, kwargs))
    if spec != report.in_spec:
        raise ForgeError("torch.export's input structure differs from the example's")
    inputs = [_expected(i, path, leaf, report) for i, (path, leaf) in enumerate(flat)]
    compiled = CompiledModule(executor, report, inputs, _positional_names(model))
    return compiled.train(model.training)  # the mode compiled, as `.training` reports it


def _example_args(example_args: Sequence[Any] | torch.Tensor) -> tuple[Any, ...]:
    if isinstance(example_args, torch.Tensor):
        return (example_args,)
    if isinstance(example_args, tuple | list):
        return tuple(example_args)
    raise ForgeError(
        f"example_args must be a tuple of positional arguments or a tensor, got "
        f"{type(example_args).__name__}"
    )


def _expected(index: int, path: KeyPath, leaf: Any, report: CompileReport) -> Expected:
    if index in report.input_constants:
        return ConstantInput(report.input_constants[index])
    if not isinstance(leaf, torch.Tensor):
        raise ForgeError(
            f"example input {keystr(path)} is a {type(leaf).__name__} that torch.export "
            "kept as a graph input; only tensors can be"
        )
    return TensorInput(tuple(leaf.shape), leaf.dtype)


def _positional_names(model: torch.nn.Module) -> list[str]:
    """The names of `model.forward`'s positional parameters (none when it has no
    inspectable signature)."""
    try:
        parameters = inspect.signature(model.forward).parameters.values()
    except (TypeError, ValueError):
        return []
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return [p.name for p in parameters if p.kind in positional]


def _tensor_text(shape: Sequence[int], dtype: torch.dtype) -> str:
    return f"{list(shape)} {str(dtype).removeprefix('torch.')}"


def _expected_text(expected: Expected) -> str:
    if isinstance(expected, TensorInput):
        return f"a tensor {expected}"
    return f"the constant {expected.value!r}"


def _value_text(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"a tensor {_tensor_text(value.shape, value.dtype)}"
    text = repr(value)
    return text if len(text) <= 40 else f"a {type(value).__name__}"


def _structure(spec: TreeSpec) -> str:
    """A pytree spec on one line: `*` for a leaf, `dict(a=*, b=list(*, *))` for nodes."""
    if spec.is_leaf():
        return "*"
    children = [_structure(c) for c in spec.children()]
    name = getattr(spec.type, "__name__", str(spec.type))
    if isinstance(spec.context, list | tuple) and len(spec.context) == len(children):
        children = [f"{k}={c}" for k, c in zip(spec.context, children, strict=True)]
    return f"{name}({', '.join(children)})"
