"""The KV-cache (state) side of an executor's plan.

A decode step reads each layer's keys and values where they live and writes one new
row into each: `mark_state_inputs` marks the segment inputs that are such state (their
traffic is counted apart, `ExecutionStats.state_bytes_in`), and `pin_cache_rows` has a
graph write the new rows into one buffer of its own, which one strided copy then writes
into every cache (`cache_updates_kernel`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import cast

import torch
from xdsl.dialects import func
from xdsl.dialects.builtin import TensorType
from xdsl.ir import SSAValue

from forge.conversion.graph_call import GraphCall
from forge.conversion.nnfactory_graph import Segment
from forge.runtime.steps import Step
from forge.transforms.npu_linear_scan import byte_size
from forge.transforms.npu_liveness import is_view


def mark_state_inputs(
    function: func.FuncOp,
    steps: Sequence[Step],
    slot_of: Mapping[SSAValue, int],
    written: set[int],
) -> list[Step]:
    """`steps`, each segment's bound inputs that hold state marked (`Step.state_inputs`,
    with its static traffic): the `written` arguments, the caches updated in place and
    views of either."""
    args = function.body.block.args
    state: set[SSAValue] = {args[i] for i in written}
    for op in function.body.block.ops:
        if op.operands and op.operands[0] in state and is_view(op):
            state.update(op.results)
    slots = {slot_of[v] for v in state if v in slot_of}
    marked = []
    for step in steps:
        if not step.segment:
            marked.append(step)
            continue
        segment = cast(Segment, step.run)
        state_inputs = tuple(i for i in segment.bound if step.inputs[i] in slots)
        traffic = _static_traffic(segment, state_inputs)
        marked.append(replace(step, state_inputs=state_inputs, traffic=traffic))
    return marked


def pin_cache_rows(steps: list[Step], returned: Sequence[int]) -> int:
    """Have the graph write the rows a run of cache updates copies into the caches
    (a decode step's new keys and values) into one buffer of its own, bound once
    (`GraphCall.pin`): the update step then reads them as one block, and into caches
    that are slices of one tensor it writes them in one strided copy
    (`cache_updates_kernel`). Only rows nothing else reads: no other step, no
    function result, no arena buffer. `returned`: the slots the caller gets back (the
    function's results and those copied into state). Replaces entries of
    `steps` in place; returns how many rows were pinned."""
    uses = Counter(slot for step in steps for slot in step.inputs)
    uses.update(returned)
    producers = {
        slot: (position, index)
        for position, step in enumerate(steps)
        if step.segment
        for index, slot in enumerate(step.outputs)
    }
    pinned = 0
    for step in steps:  # entries are replaced in place, never added
        if step.cache_updates is None or step.tabled:
            continue
        rows = step.inputs[2::2]
        if len(rows) < 2 or any(uses[r] != 1 or r not in producers for r in rows):
            continue
        if len({producers[r][0] for r in rows}) != 1:
            continue
        position = producers[rows[0]][0]
        segment_step = steps[position]
        outputs = [producers[r][1] for r in rows]
        if not _pin_block(cast(Segment, segment_step.run).call, outputs):
            continue
        pinned += len(outputs)
        if segment_step.targets:  # pinned, not in the arena buffer linear scan gave
            targets = tuple(None if i in outputs else t for i, t in enumerate(segment_step.targets))
            steps[position] = replace(segment_step, targets=targets)
    return pinned


def _pin_block(call: GraphCall, outputs: Sequence[int]) -> bool:
    """Pin `outputs` of `call` (graph results of one shape and dtype, a batch of one)
    to consecutive slices of one new buffer: all of them, or none (False)."""
    shapes = {call.output_shape(i) for i in outputs}
    dtypes = {call.dtypes[i] for i in outputs}
    if len(shapes) != 1 or len(dtypes) != 1 or len(set(outputs)) != len(outputs):
        return False
    shape = shapes.pop()
    if not shape or shape[0] != 1:
        return False
    block = torch.empty((len(outputs), *shape[1:]), dtype=dtypes.pop())
    if not all(call.can_pin(i, block[k : k + 1]) for k, i in enumerate(outputs)):
        return False
    for k, i in enumerate(outputs):
        call.pin(i, block[k : k + 1])
    return True


def _static_traffic(segment: Segment, state_inputs: Sequence[int]) -> tuple[int, int, int] | None:
    """A segment's (bytes in, state bytes in, bytes out) per call from the IR's types,
    or None where a bound input or an output has a dynamic shape."""
    if not all(isinstance(v.type, TensorType) for v in [*segment.inputs, *segment.outputs]):
        return None
    bound = {i: byte_size(segment.inputs[i].type) for i in segment.bound}
    out = [byte_size(v.type) for v in segment.outputs]
    if None in bound.values() or None in out:  # state inputs are bound inputs
        return None
    state = sum(bound[i] for i in state_inputs)  # type: ignore[misc]
    return sum(bound.values()), state, sum(out)  # type: ignore[arg-type]
