"""Phase 1: capture a PyTorch model at the ATen level with `torch.export`.

Tied weights (GPT-2's `wte`/`lm_head`) are resolved by tensor identity, so the
importer can give each physical tensor exactly one function argument.
"""

from __future__ import annotations

import contextlib
import io
import logging
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from forge.frontend import stamping
from forge.frontend.complex_pairs import lower_complex
from forge.frontend.functionalize import functionalize_buffer_writes
from forge.support.diagnostics import ForgeError


class CaptureError(ForgeError):
    """`torch.export` rejected the model; the message is torch's first line."""


@dataclass
class Captured:
    """An exported program plus what the importer needs to name its weights."""

    exported: torch.export.ExportedProgram
    tied_map: dict[str, str]
    """Every parameter/buffer name -> the canonical name of its physical tensor."""
    tensors: dict[str, torch.Tensor]
    """Canonical name -> tensor (parameters, buffers and lifted constants)."""
    example_inputs: tuple[torch.Tensor, ...]
    example_kwargs: dict[str, Any] = field(default_factory=dict)
    export_seconds: float = 0.0
    stamped: str = ""
    """Which layers were stamped rather than traced (`forge.frontend.stamping`), if any."""


def resolve_tied_weights(model: torch.nn.Module) -> dict[str, str]:
    """Map each parameter/buffer name to the first name bound to the same tensor."""
    canonical_by_id: dict[int, str] = {}
    tied: dict[str, str] = {}
    named = [
        *model.named_parameters(remove_duplicate=False),
        *model.named_buffers(remove_duplicate=False),
    ]
    for name, tensor in named:
        canonical = canonical_by_id.setdefault(id(tensor), name)
        tied[name] = canonical
    return tied


@contextlib.contextmanager
def _quiet_torch_logs() -> Iterator[None]:
    """torch.export logs its guard failures as warnings; our diagnostic says it once."""
    loggers = [logging.getLogger(name) for name in ("torch", "torch.export", "torch._dynamo")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


@contextlib.contextmanager
def _no_stack_traces() -> Iterator[None]:
    """FX records the Python stack of every node it traces (`node.meta["stack_trace"]`),
    which Forge never reads: about 0.15 s of GPT-2's 1 s export (median of 6 each,
    alternating, AMD EPYC Zen 4)."""
    before = torch.fx.config.do_not_emit_stack_traces
    torch.fx.config.do_not_emit_stack_traces = True
    try:
        yield
    finally:
        torch.fx.config.do_not_emit_stack_traces = before


def mutates(exported: torch.export.ExportedProgram) -> bool:
    """Whether the exported graph still holds in-place ops (torch.export's training IR
    keeps them; only a functionalized graph names the mutations in its signature)."""
    for node in exported.graph.nodes:
        schema = getattr(node.target, "_schema", None)
        if node.op == "call_function" and schema is not None and schema.is_mutable:
            return True
    return False


def _first_line(error: BaseException) -> str:
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return lines[0] if lines else type(error).__name__


def _rope_hint(model: torch.nn.Module) -> str:
    """Why a transformers model with run-time RoPE scaling fails to export: "dynamic" and
    "longrope" recompute their frequencies from the largest position at run time, a
    data-dependent branch (found by `forge fuzz-models --family transformers`)."""
    inner = getattr(model, "model", None)  # a StaticCacheLM wraps the causal LM
    config = getattr(model, "config", None) or getattr(inner, "config", None)
    rope = getattr(config, "rope_parameters", None)
    kind = rope.get("rope_type") if isinstance(rope, dict) else None
    if kind not in ("dynamic", "longrope"):
        return ""
    return f" (its '{kind}' RoPE scaling updates the frequencies from the positions at run time)"


def _lazy_graph_modules() -> contextlib.AbstractContextManager[Any]:
    """torch.export generates and compiles the Python code of its GraphModules six
    times over; lazy GraphModules write it only when it is run or read (the importer
    reads the graph, not the code). GPT-2's capture, one warm process, alternating:
    median 1.64 -> 1.23 s on an AMD EPYC Zen 3. A torch without the (private) switch
    captures as before."""
    try:
        from torch.fx._lazy_graph_module import _use_lazy_graph_module
    except ImportError:  # pragma: no cover - the pinned torch has it
        return contextlib.nullcontext()
    return _use_lazy_graph_module(True)


def _export(
    model: torch.nn.Module,
    example_inputs: Sequence[torch.Tensor],
    kwargs: dict[str, Any],
    dynamic_shapes: Any,
    stack: stamping.Stack | None,
) -> torch.export.ExportedProgram:
    """`torch.export.export`, with `stack` cut to its traced layers when given."""
    cut = stamping.traced_layers(stack) if stack is not None else contextlib.nullcontext()
    try:
        with (
            cut,
            warnings.catch_warnings(),
            torch.no_grad(),
            _quiet_torch_logs(),
            _no_stack_traces(),
            _lazy_graph_modules(),
            contextlib.redirect_stderr(io.StringIO()),  # torch prints the failing graph
        ):
            warnings.simplefilter("ignore")
            return torch.export.export(
                model, tuple(example_inputs), kwargs=kwargs, dynamic_shapes=dynamic_shapes
            )
    except Exception as e:  # torch raises many kinds; the user needs the first line
        raise CaptureError(
            f"torch.export could not capture {type(model).__name__}: {_first_line(e)}"
            f"{_rope_hint(model)}"
        ) from e


def _functional(
    model: torch.nn.Module, exported: torch.export.ExportedProgram
) -> torch.export.ExportedProgram:
    """`exported` with its in-place ops functionalized (their writes become
    `BUFFER_MUTATION` outputs), or as it is when it has none. A model that says its
    state changes are all in-place writes of whole buffers (`writes_only_buffers`: the
    KV-cache programs) has them rewritten in the graph; others are retraced, which also
    finds the writes an op makes behind its schema (BatchNorm's running statistics in
    train mode)."""
    if not mutates(exported):
        return exported
    if getattr(model, "writes_only_buffers", False) and functionalize_buffer_writes(exported):
        return exported
    try:
        with (
            warnings.catch_warnings(),
            _quiet_torch_logs(),
            _no_stack_traces(),
            _lazy_graph_modules(),
            torch.no_grad(),
        ):
            warnings.simplefilter("ignore")
            return exported.run_decompositions({})
    except Exception as e:  # torch raises many kinds; the user needs the first line
        raise CaptureError(
            f"torch.export could not functionalize the state updates of "
            f"{type(model).__name__}: {_first_line(e)}"
        ) from e


def capture(
    model: torch.nn.Module,
    example_inputs: Sequence[torch.Tensor],
    dynamic_shapes: Any = None,
    example_kwargs: Mapping[str, Any] | None = None,
) -> Captured:
    """`torch.export.export` in the mode the model is in (as eager would run it), with
    tied-weight resolution. A graph that mutates state in place (`add_` on a buffer,
    BatchNorm's running statistics in train mode) is functionalized, so its signature
    lists the mutations (`BUFFER_MUTATION` outputs) the executor writes back."""
    import time

    kwargs = dict(example_kwargs or {})
    start = time.perf_counter()
    stack = stamping.find_stack(model) if stamping.enabled() and dynamic_shapes is None else None
    exported, stamped = None, ""
    if stack is not None:
        try:
            exported = _functional(
                model, _export(model, example_inputs, kwargs, dynamic_shapes, stack)
            )
            stamping.stamp(exported, stack)
            last = stamping.TRACED - 1
            stamped = (
                f"layers {last + 1}-{len(stack.layers) - 1} of {stack.path} stamped from "
                f"layer {last} (torch.export traced {stamping.TRACED} of {len(stack.layers)})"
            )
        except (stamping.Mismatch, CaptureError):
            exported = None  # the model is exported whole
    if exported is None:
        exported = _functional(model, _export(model, example_inputs, kwargs, dynamic_shapes, None))
    lower_complex(exported)  # complex rotary (DeepSeek-V2, Llama 4) as real pairs
    seconds = time.perf_counter() - start

    tied_map = resolve_tied_weights(model)
    state = dict(model.named_parameters(remove_duplicate=False))
    state.update(dict(model.named_buffers(remove_duplicate=False)))
    tensors: dict[str, torch.Tensor] = {}
    for name, canonical in tied_map.items():
        tensors.setdefault(canonical, state[name].detach())
    for name, constant in exported.constants.items():
        if isinstance(constant, torch.Tensor):
            tensors.setdefault(name, constant.detach())
    return Captured(exported, tied_map, tensors, tuple(example_inputs), kwargs, seconds, stamped)
