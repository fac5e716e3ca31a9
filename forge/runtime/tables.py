"""CPU steps whose results depend only on a few small input values, run once per value.

A decode step computes its attention mask on the CPU from `cache_position` alone: a
dozen kernels (shape ops, `le`, `where`, casts) that run cold after every graph call,
about a fifth of GPT-2's host time per token. Their results are the same whenever the
position is, so the executor keeps them in a `Table` keyed by the input values: one
lookup instead of the kernels, after the first call at each position.

Only deterministic kernels without side effects join a table, only inputs the caller
passes (small integer or boolean tensors the function never writes) key it, and a
table hands out no value the caller receives (a function result: the caller may change
it); state written back from a table's value is copied, so the table's stays as it is.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import torch
from xdsl.dialects.builtin import IntegerType, TensorType
from xdsl.ir import Attribute

KEY_ELEMENTS = 256
"""Inputs of at most this many elements can key a table (a decode step's positions)."""
MAX_ENTRIES = 4096
"""Distinct keys a table keeps; later keys are computed at every call."""
MAX_BYTES = 16 << 20
"""Bytes of results a table keeps; beyond them, later keys are computed at every call."""
MIN_STEPS = 2
"""Fewer steps than this are left as they are: a lookup costs about one kernel."""


class TableStep(Protocol):
    """What a table needs of an executor step (`forge.runtime.steps.Step`)."""

    run: Callable[..., Any]
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    segment: bool
    threaded: bool
    pure: bool


@dataclass(frozen=True)
class Chain:
    """Steps a table replaces: `members` (indices into the step list, in order), the
    slots that key it and the slots it hands out (those read outside it)."""

    members: tuple[int, ...]
    keys: tuple[int, ...]
    outputs: tuple[int, ...]


def find_chain(
    steps: Sequence[TableStep],
    keys: Collection[int],
    protected: Collection[int],
    read_after: Collection[int] = (),
) -> Chain | None:
    """The steps computable from `keys` alone (and constants), none of them producing a
    `protected` slot (the function's results, operands of kernels that may write them);
    None when fewer than `MIN_STEPS`.
    `read_after`: slots read after the steps (state written back from them)."""
    available = set(keys)
    members: list[int] = []
    for index, step in enumerate(steps):
        if step.segment or step.threaded or not step.pure:
            continue
        if any(slot in protected for slot in step.outputs):
            continue
        if all(slot in available for slot in step.inputs):
            members.append(index)
            available.update(step.outputs)
    if len(members) < MIN_STEPS:
        return None
    inside = set(members)
    produced = {slot for m in members for slot in steps[m].outputs}
    read_outside = {slot for i, step in enumerate(steps) if i not in inside for slot in step.inputs}
    read_outside.update(read_after)
    used_keys = sorted({slot for m in members for slot in steps[m].inputs if slot in keys})
    outputs = tuple(sorted(produced & read_outside))
    return Chain(tuple(members), tuple(used_keys), outputs)


class Table:
    """`chain`'s steps as one call `run(*keys) -> outputs`, each distinct key computed
    once. Results never share memory with a key tensor (the caller may change it)."""

    def __init__(self, steps: Sequence[TableStep], chain: Chain):
        self.chain = chain
        self._steps = [(steps[m].run, steps[m].inputs, steps[m].outputs) for m in chain.members]
        self._rows: dict[tuple[Any, ...], tuple[Any, ...]] = {}
        self.bytes = 0
        self.hits = 0
        self.misses = 0

    def __call__(self, *keys: torch.Tensor) -> Any:
        """The outputs (one output: the value itself, as a CPU kernel returns it)."""
        key = tuple((k.dtype, tuple(k.shape), tuple(k.reshape(-1).tolist())) for k in keys)
        values = self._rows.get(key)
        if values is not None:
            self.hits += 1
        else:
            self.misses += 1
            values = self._compute(keys)
            size = sum(v.nbytes for v in values if isinstance(v, torch.Tensor))
            if len(self._rows) < MAX_ENTRIES and self.bytes + size <= MAX_BYTES:
                self._rows[key] = values
                self.bytes += size
        return values[0] if len(values) == 1 else values

    def _compute(self, keys: Sequence[torch.Tensor]) -> tuple[Any, ...]:
        env: dict[int, Any] = dict(zip(self.chain.keys, keys, strict=True))
        for run, inputs, outputs in self._steps:
            result = run(*(env[i] for i in inputs))
            if len(outputs) == 1:
                result = (result,)
            env.update(zip(outputs, result, strict=True))
        storages = {k.untyped_storage().data_ptr() for k in keys}
        return tuple(_unshared(env[slot], storages) for slot in self.chain.outputs)


def _unshared(value: Any, storages: set[int]) -> Any:
    """`value`, copied if it is a view of a key's memory."""
    if isinstance(value, torch.Tensor) and value.untyped_storage().data_ptr() in storages:
        return value.clone()
    return value


def key_slots(types: Sequence[Attribute], written: Collection[int]) -> set[int]:
    """Of the caller's inputs (their IR types, in order), those that can key a table:
    static integer or boolean tensors of at most `KEY_ELEMENTS`, never written."""
    slots = set()
    for slot, value_type in enumerate(types):
        if slot in written or not isinstance(value_type, TensorType):
            continue
        shape = value_type.get_shape()
        if any(d < 0 for d in shape) or not isinstance(value_type.element_type, IntegerType):
            continue
        if math.prod(shape) <= KEY_ELEMENTS:
            slots.add(slot)
    return slots
