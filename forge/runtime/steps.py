"""One step of an executor's plan: a segment call or a CPU kernel over value slots
(`forge.runtime.executor` builds and runs them, `forge.runtime.kv_state` marks the
state they read)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch


@dataclass(frozen=True)
class Step:
    run: Callable[..., Any]
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    device: str
    """Where the step runs: "npu" for an NNFactory segment, else "cpu"."""
    segment: bool
    """An NNFactory segment call (returns a tuple); else a CPU kernel (a value for one
    output, a sequence for several)."""
    targets: tuple[torch.Tensor | None, ...] = ()
    """Per output: its view of the arena (the physical buffer linear scan chose), or
    None for outputs that get fresh storage (function results, views, dynamic sizes)."""
    state_inputs: tuple[int, ...] = ()
    """Segment steps: the bound inputs (indices into `inputs`) that are state the caller
    owns, such as a KV cache read by attention (counted apart in `ExecutionStats`)."""
    threaded: bool = False
    """A CPU kernel worth torch's whole thread pool (`wants_threads`); the other CPU
    steps of an executor with segments run on one thread (`forge.runtime.threads`)."""
    cache_updates: tuple[int, int] | None = None
    """A step of `npu.cache_update`s: (slot of their positions, dim). The next cache
    update at the same positions and dim joins it (`cache_updates_kernel`)."""
    pure: bool = False
    """A CPU kernel whose results depend only on its inputs' values, with no side effect
    (`is_deterministic`): it may join a `Table`."""
    tabled: bool = False
    """Computed by an earlier step's `Table`: skipped (it still counts its device)."""
    traffic: tuple[int, int, int] | None = None
    """Segment steps whose bound inputs and outputs all have static shapes: their
    (bytes in, state bytes in, bytes out), counted once here instead of summed from the
    tensors at every call."""
