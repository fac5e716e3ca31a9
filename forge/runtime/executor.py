"""Run a planned `npu` function: NNFactory segments for NPU ops, CPU kernels for the rest.

After `forge.transforms.forge_pipeline.plan` the function body is in its scheduled order
and every op carries a `device`. The executor walks that order once, at build time:

* each maximal run of consecutive `npu` ops becomes one NNFactory `Segment`
  (`granularity="segment"`), or one segment per op (`granularity="op"`, one
  dispatch per NPU op); a run NNFactory cannot lower (`NoNpuLowering`) falls back to
  CPU kernels op by op, counted in `fallback_ops` and explained in `notes`;
* every other op becomes its pre-resolved `cpu_kernel`.

The result is a flat list of steps (callable, input slots, output slots, device) over
a list of values, as in `ReferenceExecutor`; weights are bound once, in the template, and
converted (or quantized, under `int8`/`mixed`) once, when their segment is built.
A call copies the template, feeds the inputs and runs the steps in order.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import os
import resource
import time
import weakref
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.ir import Operation, SSAValue

from forge.conversion.graph_call import GraphCall
from forge.conversion.kernel_choice import (
    FP16_KERNELS,
    dynamic_quantization,
    host_choices,
    int8_dynamic_at,
    linear_kernel,
    linear_rows,
)
from forge.conversion.nnfactory_graph import NoNpuLowering, Segment, build_segment
from forge.conversion.segments import (
    GRANULARITIES,
    WEIGHT_BINDINGS,
    arena_layout,
    check_memory,
    device_runs,
    npu_groups,
)
from forge.conversion.weight_spill import SpillUnavailable, spilled_bytes
from forge.dialects import npu
from forge.dialects.context import entry_function
from forge.dialects.dtypes import PRECISIONS
from forge.frontend.capture import Captured, capture
from forge.frontend.importer import import_program
from forge.frontend.loading import ordered_inputs
from forge.runtime.compile_cache import (
    CachedProgram,
    CompileCache,
    cache_root,
    compile_with_cache,
    open_cache,
)
from forge.runtime.host_profile import load_host_profile
from forge.runtime.input_contract import input_contract
from forge.runtime.precision import measure_mixed_precision
from forge.runtime.tables import Table, find_chain, key_slots
from forge.runtime.threads import graph_threads
from forge.support.diagnostics import ForgeError
from forge.target.cpu_kernels import (
    cache_updates_kernel,
    cpu_kernel,
    packed_linear_kernel,
    wants_threads,
)
from forge.transforms.forge_pipeline import plan
from forge.transforms.host_profile import HostProfile, load_profile
from forge.transforms.npu_fold_constants import is_deterministic
from forge.transforms.npu_linear_scan import AllocationReport, allocate, byte_size
from forge.transforms.npu_liveness import is_view
from forge.transforms.npu_schedule_affinity import check_schedule, device_of


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


@dataclass
class ExecutionStats:
    calls: int = 0
    """Executor calls these figures cover."""
    dispatches: int = 0
    """NNFactory segment calls."""
    transitions: int = 0
    """Consecutive steps whose devices differ (the scheduler's transition count)."""
    bytes_in: int = 0
    """Bytes of the tensors bound to segment parameters (weights baked in as constants
    are not bound, so they do not count)."""
    bytes_out: int = 0
    """Bytes of the tensors segments returned."""
    state_bytes_in: int = 0
    """The part of `bytes_in` that is state read where it lives (a KV cache read by the
    attention), not a copy: it grows with the cache, the rest of the traffic does not."""
    bytes_written_back: int = 0
    """Bytes copied into state arguments after the call (`npu.writes` results that no
    `npu.cache_update` wrote in place)."""

    @property
    def bytes_moved(self) -> int:
        return self.bytes_in + self.bytes_out

    def add(self, other: ExecutionStats) -> None:
        self.calls += other.calls
        self.dispatches += other.dispatches
        self.transitions += other.transitions
        self.bytes_in += other.bytes_in
        self.bytes_out += other.bytes_out
        self.state_bytes_in += other.state_bytes_in
        self.bytes_written_back += other.bytes_written_back


class CompiledNPUExecutor:
    """A planned function as NNFactory segments interleaved with CPU kernels.

    `stats` holds the figures of the last call (reset at every call); `total_stats`
    accumulates them over all calls since construction.
    """

    def __init__(
        self,
        module_or_function: ModuleOp | func.FuncOp,
        weights: Mapping[str, torch.Tensor],
        num_inputs: int,
        precision: str | None = None,
        granularity: str = "segment",
        allocation: AllocationReport | None = None,
        weights_as: str = "constants",
    ):
        function = entry_function(module_or_function)
        self.function = function
        """The planned function this executor runs."""
        precision = _precision_of(function, precision)
        if weights_as not in WEIGHT_BINDINGS:
            raise ForgeError(
                f"weights_as must be one of {', '.join(WEIGHT_BINDINGS)}, got '{weights_as}'"
            )
        if granularity not in GRANULARITIES:
            raise ForgeError(
                f"granularity must be one of {', '.join(GRANULARITIES)}, got '{granularity}'"
            )
        start, usage = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
        check_schedule(function)
        check_memory(function, allocation.planned_bytes if allocation else None, num_inputs)
        args = function.body.block.args
        names = [a.name_hint or f"arg{i}" for i, a in enumerate(args)]
        missing = [n for n in names[num_inputs:] if n not in weights]
        if missing:
            raise ForgeError(f"no tensor given for weight argument(s): {', '.join(missing)}")
        self.precision = precision
        self.granularity = granularity
        self.num_inputs = num_inputs
        self.input_names = names[:num_inputs]
        self.contract = input_contract(function, num_inputs)
        """What every call must pass (shapes, dtypes, ids inside their tables)."""
        self.segments: list[Segment] = []
        self.fallback_ops = 0
        self.notes: list[str] = []

        self._slots: dict[SSAValue, int] = {a: i for i, a in enumerate(args)}
        self._num_args = len(args)
        """Slots below this are arguments; those from `num_inputs` on are weights."""
        self._template: list[Any] = [None] * len(args)
        for i in range(num_inputs, len(args)):
            self._template[i] = weights[names[i]]
        self._steps: list[Step] = []
        self.weights_as = weights_as
        self._writes = npu.write_backs(function)
        """(result index, argument slot): results copied into state after every call."""
        written = {arg for _, arg in self._writes}
        self._constants: dict[SSAValue, torch.Tensor] = (
            {
                args[i]: self._template[i]
                for i in range(num_inputs, len(args))
                if i not in written  # state changes between calls: bound, never baked
            }
            if weights_as == "constants"
            else {}
        )

        runs = list(device_runs(function))
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="forge-pack") as packer:
            self._packing = self._pack_ahead(runs, packer)
            """Per CPU linear: its packed kernel, being made on `packer`'s thread."""
            self.packed_ahead = len(self._packing)
            """CPU linears whose weights were packed while the graphs compiled."""
            for device, ops in runs:
                if device == "npu":
                    self._add_npu_run(ops)
                else:
                    self._add_cpu(ops[0])
        self.spilled_copy_bytes = self._spill_copies()
        """Weights converted or quantized for the graphs, moved out of the resident set
        once compiled (`_spill_copies`)."""
        self.arena, self.arena_values = self._bind_buffers(function, allocation)
        terminator = function.body.block.last_op
        assert isinstance(terminator, func.ReturnOp)
        slots = tuple(self._slot(v) for v in terminator.arguments)
        user_results = len(slots) - len(self._writes)
        self._results = slots[:user_results]
        self._write_slots = tuple((slots[r], a) for r, a in npu.copied_write_backs(function))
        """(result slot, argument slot): copied back after a call (an `npu.cache_update`
        wrote the others in place)."""
        self._steps = self._mark_state_inputs(function, written)
        self.pinned_rows = self._pin_cache_rows()
        """Graph results written straight into one buffer the cache updates read."""
        self.table = self._tabulate(function, written)
        """The `Table` of CPU results keyed by small inputs (a decode step's mask), or
        None."""
        self.npu_ops = sum(len(s.ops) for s in self.segments)
        self.compile_seconds = sum(s.compile_seconds for s in self.segments)
        """NNFactory build+compile time of the graphs this executor compiled (cache hits
        cost nothing)."""
        self.build_seconds = time.perf_counter() - start
        now = resource.getrusage(resource.RUSAGE_SELF)
        self.build_kernel_seconds = now.ru_stime - usage.ru_stime
        """Of the build, CPU time the process spent in the kernel (every thread)."""
        self.build_page_faults = now.ru_minflt - usage.ru_minflt
        """Minor page faults during the build: first touches of new memory, mostly
        OpenVINO's packed copies of the weights (a page each)."""
        self.stats = ExecutionStats()
        self.total_stats = ExecutionStats()
        self.released_bytes = 0
        """Model memory `release_weights` moved out of the resident set."""

    def _spill_copies(self) -> int:
        """Move the weights converted or quantized for the graphs (fp16 values, int8
        matrices) out of the resident set as soon as the graphs are compiled: OpenVINO
        runs its own packed copy, and these are no model's memory, so they need not wait
        for the model's release (`release_weights`); a program compiled next (a decode
        step after its prompt) then does not find them resident. The bytes moved."""
        if os.environ.get("FORGE_RELEASE_WEIGHTS", "1") == "0":
            return 0
        return self._spill(cache_root() / "weights", copies_only=True)

    def _spill(self, folder: Path, copies_only: bool = False) -> int:
        """Every graph's constants (or only its `copies`) spilled to `folder`; the bytes
        moved, and a note when nothing could move."""
        before = spilled_bytes()
        graphs = {id(s.graph): s.graph for s in self.segments if s.graph is not None}
        try:
            for graph in graphs.values():
                graph.spill_weights(folder, copies_only=copies_only)
        except (SpillUnavailable, OSError) as e:
            what = "converted weights" if copies_only else "weights"
            self.notes.append(f"{what} stay in memory: {e}")
        return spilled_bytes() - before

    def release_weights(self, folder: Path | None = None) -> int:
        """Move the memory the graphs' constants share with the model out of the
        resident set (`forge.conversion.weight_spill`; default folder: the cache
        root's `weights/`): OpenVINO runs its own packed copy. The bytes moved; when
        nothing could move, `notes` says why."""
        moved = self._spill(folder or cache_root() / "weights")
        self.released_bytes += moved
        return moved

    # -- building

    def _slot(self, value: SSAValue) -> int:
        return self._slots[value]

    def _new_slots(self, values: Sequence[SSAValue]) -> tuple[int, ...]:
        slots = []
        for v in values:
            self._slots[v] = len(self._template)
            self._template.append(None)
            slots.append(self._slots[v])
        return tuple(slots)

    def _add_cpu(self, op: Operation) -> None:
        if isinstance(op, npu.CacheUpdateOp):
            self._add_cache_update(op)
            return
        inputs = tuple(self._slot(v) for v in op.operands)
        outputs = self._new_slots(op.results)
        step = Step(self._cpu_kernel(op), inputs, outputs, "cpu", False)
        self._steps.append(replace(step, threaded=wants_threads(op), pure=is_deterministic(op)))

    def _add_cache_update(self, op: npu.CacheUpdateOp) -> None:
        """One step for a run of cache updates at the same positions and dim: a decode
        step writes a row into every layer's keys and values, and one call for all of
        them saves a dispatch per cache."""
        dim = op.dim.value.data
        key = (self._slot(op.positions), dim)
        pair = (self._slot(op.cache), self._slot(op.update))
        outputs = self._new_slots(op.results)
        last = self._steps[-1] if self._steps else None
        if last is not None and last.cache_updates == key:
            self._steps[-1] = replace(
                last, inputs=last.inputs + pair, outputs=last.outputs + outputs
            )
            return
        step = Step(cache_updates_kernel(dim), (key[0], *pair), outputs, "cpu", False)
        self._steps.append(replace(step, cache_updates=key))

    def _cpu_kernel(self, op: Operation) -> Callable[..., Any]:
        """`cpu_kernel(op)`, except that a linear whose weight is baked in (a weight
        argument, weights as constants) gets its weight packed once (`PackedLinear`),
        by `_pack_ahead`'s thread when the executor has graphs to compile meanwhile."""
        packing = self._packing.pop(op, None)
        if packing is not None:
            return packing.result()
        weight = self._baked_weight(op)
        return cpu_kernel(op) if weight is None else packed_linear_kernel(op, weight)

    def _baked_weight(self, op: Operation) -> torch.Tensor | None:
        """The weight `_cpu_kernel` packs for `op`, or None."""
        if self.weights_as != "constants" or not isinstance(op, npu.WEIGHTED_LINEAR_OPS):
            return None
        return self._constants.get(op.weight)

    def _pack_ahead(
        self, runs: Sequence[tuple[str, list[Operation]]], packer: ThreadPoolExecutor
    ) -> dict[Operation, Future[Callable[..., Any]]]:
        """Start packing the CPU linears' weights on `packer`'s thread while the graphs
        compile, when there are graphs: OpenVINO's compile keeps one core busy, and a
        packed LM head (1 GB for Llama-3.2-1B) is mostly first touches of new memory,
        which the other core fills at the same time (docs/compile-time.md)."""
        if not any(device == "npu" for device, _ in runs):
            return {}
        packing: dict[Operation, Future[Callable[..., Any]]] = {}
        for device, ops in runs:
            weight = self._baked_weight(ops[0]) if device == "cpu" else None
            if weight is not None:
                packing[ops[0]] = packer.submit(packed_linear_kernel, ops[0], weight)
        return packing

    def _add_npu_run(self, ops: list[Operation]) -> None:
        if not ops:
            return
        for group in npu_groups(ops, self.granularity):
            try:
                segment = build_segment(group, self.precision, constants=self._constants)
            except NoNpuLowering as e:
                self.fallback_ops += len(group)
                self.notes.append(f"{len(group)} NPU-placed op(s) run on the CPU: {e}")
                for op in group:
                    self._add_cpu(op)
                continue
            inputs = tuple(self._slot(v) for v in segment.inputs)
            for index, slot in enumerate(inputs):
                if self.num_inputs <= slot < self._num_args:
                    segment.freeze(index, self._template[slot])
            # Values of the segment nobody outside reads get no slot.
            outputs = self._new_slots(segment.outputs)
            self.segments.append(segment)
            self._steps.append(Step(segment, inputs, outputs, "npu", True))

    def _mark_state_inputs(self, function: func.FuncOp, written: set[int]) -> list[Step]:
        """The steps, each segment's bound inputs that hold state marked: the written
        arguments, the caches updated in place and views of either."""
        args = function.body.block.args
        state: set[SSAValue] = {args[i] for i in written}
        for op in function.body.block.ops:
            if op.operands and op.operands[0] in state and is_view(op):
                state.update(op.results)
        slots = {self._slots[v] for v in state if v in self._slots}
        steps = []
        for step in self._steps:
            if not step.segment:
                steps.append(step)
                continue
            state_inputs = tuple(i for i in step.run.bound if step.inputs[i] in slots)
            traffic = _static_traffic(step.run, state_inputs)
            steps.append(replace(step, state_inputs=state_inputs, traffic=traffic))
        return steps

    def _pin_cache_rows(self) -> int:
        """Have the graph write the rows a run of cache updates copies into the caches
        (a decode step's new keys and values) into one buffer of its own, bound once
        (`GraphCall.pin`): the update step then reads them as one block, and into caches
        that are slices of one tensor it writes them in one strided copy
        (`cache_updates_kernel`). Only rows nothing else reads: no other step, no
        function result, no arena buffer. Returns how many rows were pinned."""
        uses = Counter(slot for step in self._steps for slot in step.inputs)
        uses.update((*self._results, *(r for r, _ in self._write_slots)))
        producers = {
            slot: (position, index)
            for position, step in enumerate(self._steps)
            if step.segment
            for index, slot in enumerate(step.outputs)
        }
        pinned = 0
        for step in self._steps:  # entries are replaced in place, never added
            if step.cache_updates is None or step.tabled:
                continue
            rows = step.inputs[2::2]
            if len(rows) < 2 or any(uses[r] != 1 or r not in producers for r in rows):
                continue
            if len({producers[r][0] for r in rows}) != 1:
                continue
            position = producers[rows[0]][0]
            segment_step = self._steps[position]
            outputs = [producers[r][1] for r in rows]
            if not _pin_block(segment_step.run.call, outputs):
                continue
            pinned += len(outputs)
            if segment_step.targets:  # pinned, not in the arena buffer linear scan gave
                targets = tuple(
                    None if i in outputs else t for i, t in enumerate(segment_step.targets)
                )
                self._steps[position] = replace(segment_step, targets=targets)
        return pinned

    def _tabulate(self, function: func.FuncOp, written: set[int]) -> Table | None:
        """Compute the CPU steps computable from small inputs alone in one `Table` step,
        placed before the first of them; they stay in place, skipped, so the device
        sequence (and its transition count) is the schedule's."""
        types = [a.type for a in function.body.block.args[: self.num_inputs]]
        caches = {
            step.inputs[i]
            for step in self._steps
            if step.cache_updates
            for i in range(1, len(step.inputs), 2)
        }
        keys = key_slots(types, written | caches)
        sources = {slot for slot, _ in self._write_slots}
        # Values handed to the caller, or to a kernel that may write its operands (a
        # cache update), are never a table's: they could be changed in place.
        written_by_kernels = {
            slot
            for step in self._steps
            if not step.segment and not step.pure
            for slot in step.inputs
        }
        protected = set(self._results) | written_by_kernels
        chain = find_chain(self._steps, keys, protected, sources) if keys else None
        if chain is None:
            return None
        # The values stay the table's own, out of the arena: the table runs before the
        # steps it replaces, when the buffers linear scan gave their values may still
        # hold others. (A graph reading a small one binds its staged copy.)
        table = Table(self._steps, chain)
        first = chain.members[0]
        for index in chain.members:
            self._steps[index] = replace(self._steps[index], tabled=True)
        step = Step(table, chain.keys, chain.outputs, "cpu", False)
        self._steps.insert(first, step)  # a CPU step before a CPU step: no new transition
        return table

    def _bind_buffers(
        self, function: func.FuncOp, allocation: AllocationReport | None
    ) -> tuple[torch.Tensor | None, int]:
        """Give every intermediate with a slot its view of one arena, at its place in
        `arena_layout` (the rule the printed plan shows). Returns the arena and how many
        values live in it."""
        layout = arena_layout(function, allocation)
        if layout is None:
            return None, 0
        arena = torch.empty(layout.planned_bytes, dtype=torch.uint8)
        views = {
            self._slots[value]: place.view(arena)
            for value, place in layout.places.items()
            if value in self._slots
        }
        self._steps = [
            replace(step, targets=tuple(views.get(slot) for slot in step.outputs))
            for step in self._steps
        ]
        return arena, len(views)

    # -- running

    @property
    def steps(self) -> list[Step]:
        return list(self._steps)

    def static_transitions(self) -> int:
        """Device changes between consecutive steps of the plan (what a call counts)."""
        return sum(a.device != b.device for a, b in itertools.pairwise(self._steps))

    def __call__(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        self.contract.check(inputs)
        env = self._template.copy()
        env[: self.num_inputs] = inputs
        stats = ExecutionStats(calls=1)
        previous: str | None = None
        policy = graph_threads() if self.segments else contextlib.nullcontext(0)
        with torch.no_grad(), policy as pool:
            threads = 1
            for step in self._steps:
                if previous is not None and step.device != previous:
                    stats.transitions += 1
                previous = step.device
                if step.tabled:
                    continue
                if pool and (wanted := pool if step.threaded else 1) != threads:
                    torch.set_num_threads(wanted)  # graph_threads restores it on exit
                    threads = wanted
                args = [env[i] for i in step.inputs]
                outs = step.outputs
                if step.segment:
                    result = step.run(*args, out=step.targets)
                    stats.dispatches += 1
                    if step.traffic is not None:
                        stats.bytes_in += step.traffic[0]
                        stats.state_bytes_in += step.traffic[1]
                        stats.bytes_out += step.traffic[2]
                    else:
                        stats.bytes_in += sum(args[i].nbytes for i in step.run.bound)
                        stats.state_bytes_in += sum(args[i].nbytes for i in step.state_inputs)
                        stats.bytes_out += sum(t.nbytes for t in result)
                    for slot, value in zip(outs, result, strict=True):
                        env[slot] = value
                    continue
                result = step.run(*args)
                if not outs:
                    continue
                if len(outs) == 1:
                    result = (result,)
                targets = step.targets or (None,) * len(outs)
                for slot, value, target in zip(outs, result, targets, strict=True):
                    env[slot] = _store(value, target)
            if pool and threads != 1:  # back to one thread for the caller's block
                torch.set_num_threads(1)
            if self._write_slots:  # in place, as eager mutates state; one call for all
                states = [env[state] for _, state in self._write_slots]
                torch._foreach_copy_(states, [env[result] for result, _ in self._write_slots])
                stats.bytes_written_back += sum(state.nbytes for state in states)
        self.stats = stats
        self.total_stats.add(stats)
        return tuple(env[i] for i in self._results)


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


def _store(value: Any, target: torch.Tensor | None) -> Any:
    """`value`, copied into its arena buffer when it has one."""
    if (
        target is None
        or not isinstance(value, torch.Tensor)
        or value.shape != target.shape
        or value.dtype != target.dtype
    ):
        return value
    return target.copy_(value)


# ----------------------------------------------------------------- whole compile


@dataclass
class CompileReport:
    """What `compile_model` did and how long each phase took (seconds)."""

    plan: Any
    """The `forge.transforms.forge_pipeline.PlanReport` (Phase 2, placement, schedule,
    allocation)."""
    export_seconds: float
    import_seconds: float
    optimize_seconds: float
    """Phase 2 (npu-optimize)."""
    phase34_seconds: float
    """Placement, scheduling, vregs, liveness and buffer allocation."""
    conversion_seconds: float
    """Building the executor, NNFactory graph builds and compiles included."""
    nnfactory_compile_seconds: float
    """The part of `conversion_seconds` spent building and compiling NNFactory graphs."""
    segments: int
    npu_ops: int
    fallback_ops: int
    input_names: list[str]
    notes: list[str] = field(default_factory=list)
    in_spec: Any = None
    """torch.export's pytree spec of the example `(args, kwargs)`: its leaves, in order, are
    the tensor inputs (`input_names`) and the constants in `input_constants`."""
    out_spec: Any = None
    """torch.export's pytree spec of the model's output: its leaves, in order, are the
    executor's results and the constants in `output_constants`."""
    input_constants: dict[int, Any] = field(default_factory=dict)
    """Leaf index of `in_spec` -> the non-tensor value (`use_cache=False`, an int, ...)
    torch.export specialized the graph to; the executor takes no argument for it."""
    output_constants: dict[int, Any] = field(default_factory=dict)
    """Leaf index of `out_spec` -> the non-tensor value the model returns there (the
    executor returns tensors only)."""
    cache: str = "off"
    """The compile cache: "hit" (no import nor pipeline ran, nor the export when the key
    came from the model object: `plan` is None and `plan_summary` holds its figures),
    "miss" (compiled; `cache_stored` says whether the entry was stored) or "off"."""
    cache_entry: str = ""
    """The cache entry's key (its folder's name) when the cache was on."""
    cache_key_from: str = ""
    """What the key was computed from: "the model object", or "the captured program
    (why the object did not prove it)" (`forge.runtime.cache_trust`)."""
    cache_stored: bool = False
    """A miss: whether the entry was stored (a folder that cannot be written, or an
    entry over the limit, is not)."""
    cache_key_seconds: float = 0.0
    """Computing the cache key (weights fingerprint included)."""
    cache_load_seconds: float = 0.0
    """A hit: checking the entry's files and parsing its IR."""
    cache_store_seconds: float = 0.0
    """A miss: writing the entry (checksums of OpenVINO's blobs included)."""
    plan_summary: dict[str, Any] | None = None
    """On a hit, the stored figures of the plan (`cache_files.plan_summary`)."""
    conversion_kernel_seconds: float = 0.0
    """CPU time in the kernel during the conversion (all threads): on a host where new
    memory is slow to touch (a VM whose free pages go back to the hypervisor), most of a
    large model's conversion."""
    conversion_page_faults: int = 0
    """Minor page faults during the conversion (first touches of new memory)."""

    @property
    def total_seconds(self) -> float:
        return (
            self.export_seconds
            + self.import_seconds
            + self.optimize_seconds
            + self.phase34_seconds
            + self.conversion_seconds
            + self.cache_key_seconds
            + self.cache_load_seconds
            + self.cache_store_seconds
        )

    def format_times(self) -> str:
        rows = [
            ("torch.export", self.export_seconds),
            ("import", self.import_seconds),
            ("optimize (Phase 2)", self.optimize_seconds),
            ("phases 3-4", self.phase34_seconds),
            ("conversion", self.conversion_seconds),
        ]
        lines = [f"  {name:<20}{seconds:>9.3f} s" for name, seconds in rows]
        lines.append(
            f"  {'  of which NNFactory':<20}{self.nnfactory_compile_seconds:>9.3f} s "
            f"({self.segments} segment(s))"
        )
        if self.conversion_page_faults:
            lines.append(
                f"  {'  in the kernel':<20}{self.conversion_kernel_seconds:>9.3f} s "
                f"(CPU time, all threads; {self.conversion_page_faults:,} minor page "
                "faults: first touches of new memory)"
            )
        if self.cache != "off":
            lines.append(f"  {'cache key':<20}{self.cache_key_seconds:>9.3f} s")
            stage = ("cache load", self.cache_load_seconds)
            if self.cache == "miss":
                stage = ("cache store", self.cache_store_seconds)
            lines.append(f"  {stage[0]:<20}{stage[1]:>9.3f} s")
        lines.append(f"  {'total':<20}{self.total_seconds:>9.3f} s")
        return "\n".join(lines)


def _precision_of(function: func.FuncOp, asked: str | None) -> str:
    """The precision the executor runs `function` at: the one npu-assign-precision
    recorded in the IR (fp32 when it did not run); `asked`, for IR the pass has not
    annotated, or to confirm the recorded one."""
    recorded = npu.program_precision(function)
    precision = asked or recorded or "fp32"
    if precision not in PRECISIONS:
        raise ForgeError(f"precision must be one of {', '.join(PRECISIONS)}, got '{precision}'")
    if recorded is not None and precision != recorded:
        raise ForgeError(
            f"the IR was assigned precision {recorded} (npu-assign-precision), not {precision}"
        )
    return precision


def compile_model(
    model: torch.nn.Module,
    args: Sequence[Any],
    kwargs: Mapping[str, Any] | None = None,
    precision: str = "fp32",
    granularity: str = "segment",
    profile: str | None = None,
    cache: bool | CompileCache | None = None,
    dynamic_quantized: bool | None = None,
    captured: Captured | None = None,
) -> tuple[CompiledNPUExecutor, CompileReport]:
    """capture -> import_program -> plan -> CompiledNPUExecutor, timing each phase.

    `dynamic_quantized` (int8 only): True also quantizes the activations of the int8
    MatMuls at run time (`forge.conversion.kernel_choice.dynamic_quantization`), no
    longer weight-only int8; False keeps them weight-only; None (the default) does
    what the host profile measured faster for each graph's row count, as OpenVINO's own
    default does on CPUs with int8 kernels (weight-only where nothing was measured).

    `profile` is npu-place-devices' host profile (default: this host's, measured on
    first use and cached, `forge.runtime.host_profile.load_host_profile`).
    `cache` (off by default; True: `forge.runtime.compile_cache`'s default folder) skips
    everything up to the NNFactory build when the same model, inputs and options were
    compiled before, and lets OpenVINO load its compiled graphs. `captured` is
    torch.export's capture of `model` when it was already made (the cache's key).

    When `model` is garbage-collected, the executor releases the model memory its
    graphs baked in (`CompiledNPUExecutor.release_weights`)."""
    notes: list[str] = []
    if dynamic_quantized and precision != "int8":
        raise ForgeError(
            f"dynamic quantization quantizes the activations of int8-weight MatMuls: it "
            f"needs precision 'int8', got '{precision}'"
        )
    if dynamic_quantized is True:
        notes.append(
            f"{QUANTIZED_NOTES[0]} to int8 at run time (dynamic quantization, groups of 32)"
        )
    if profile is None:
        host = load_host_profile()
        profile = str(host.path)
        if host.built:
            notes.append(f"measured this host's profile in {host.load_seconds:.1f} s: {host.path}")
    store = open_cache(cache)
    if store is not None:
        # The profile's contents, not its path, decide placement: a re-measured profile misses.
        options = {"precision": precision, "granularity": granularity, "profile": profile}
        options["dynamic_quantized"] = dynamic_quantized
        options["profile_digest"] = hashlib.sha256(Path(profile).read_bytes()).hexdigest()
        return compile_with_cache(
            store,
            model,
            args,
            kwargs,
            options,
            capture=lambda: capture(model, tuple(args), example_kwargs=dict(kwargs or {})),
            cold=lambda captured: compile_model(
                model,
                args,
                kwargs,
                precision,
                granularity,
                profile,
                None,
                dynamic_quantized,
                captured=captured,
            ),
            warm=lambda hit: _from_cache(
                model, hit, precision, granularity, dynamic_quantized, profile
            ),
        )

    if captured is None:
        captured = capture(model, tuple(args), example_kwargs=dict(kwargs or {}))
    program = import_program(captured)
    exported = captured.exported
    kinds = torch.export.graph_signature  # InputKind, OutputKind, ConstantArgument
    user_inputs = [
        s.arg for s in exported.graph_signature.input_specs if s.kind == kinds.InputKind.USER_INPUT
    ]
    user_outputs = [
        s.arg
        for s in exported.graph_signature.output_specs
        if s.kind == kinds.OutputKind.USER_OUTPUT
    ]
    notes = [*notes, *program.notes]
    start = time.perf_counter()
    fp16_weights = None
    if precision == "mixed":
        inputs = ordered_inputs(model, args, dict(kwargs or {}), program.input_names)
        mixed = measure_mixed_precision(program.function, program.weights, inputs)
        fp16_weights = mixed.fp16_weights
        notes.append(mixed.note())
    report = plan(
        program.module,
        profile=profile,
        precision=precision,
        fp16_weights=fp16_weights,
    )
    plan_seconds = time.perf_counter() - start
    program.module.verify()
    host = load_profile(profile)
    for note in (
        _kernel_note(program.function, host, precision),
        _snippets_note(host, precision),
        _int8_dynamic_note(program.function, host, precision, dynamic_quantized),
    ):
        notes += [note] if note else []
    with dynamic_quantization(dynamic_quantized), host_choices(host):
        executor = CompiledNPUExecutor(
            program.function,
            program.weights,
            len(program.input_names),
            granularity=granularity,
            allocation=report.allocation,
        )
    return _release_when_collected(model, executor), CompileReport(
        plan=report,
        export_seconds=captured.export_seconds,
        import_seconds=program.import_seconds,
        optimize_seconds=max(0.0, plan_seconds - report.phase34_seconds),
        phase34_seconds=report.phase34_seconds,
        conversion_seconds=executor.build_seconds,
        nnfactory_compile_seconds=executor.compile_seconds,
        conversion_kernel_seconds=executor.build_kernel_seconds,
        conversion_page_faults=executor.build_page_faults,
        segments=len(executor.segments),
        npu_ops=executor.npu_ops,
        fallback_ops=executor.fallback_ops,
        input_names=list(program.input_names),
        notes=[*notes, *executor.notes],
        in_spec=exported.call_spec.in_spec,
        out_spec=exported.call_spec.out_spec,
        input_constants={
            i: a.value for i, a in enumerate(user_inputs) if isinstance(a, kinds.ConstantArgument)
        },
        output_constants={
            i: a.value for i, a in enumerate(user_outputs) if isinstance(a, kinds.ConstantArgument)
        },
    )


KERNEL_REASONS = {
    "apart": "activations kept out of OpenVINO's FullyConnected, so that it runs MLAS",
    "onednn": "given an exact post-op, so that OpenVINO's FullyConnected runs oneDNN",
}


def _kernel_note(function: func.FuncOp, profile: HostProfile, precision: str) -> str:
    """A note naming the linears the host profile's kernel rule (`host_choices`) moves
    off OpenVINO's own choice (fp32, int8) or whose fp16 weights it keeps fp16 (fp16,
    mixed), with the times behind it."""
    if precision == "int8":
        return _int8_kernel_note(function, profile)
    if precision != "fp32":
        return _fp16_kernel_note(function, profile, precision)
    rule = profile.kernel_rule()
    moved: dict[str, list[int]] = {}
    for op in function.walk():
        if not isinstance(op, npu.WEIGHTED_LINEAR_OPS) or device_of(op) == "cpu":
            continue
        kernel = linear_kernel(rule, linear_rows(op))
        activation = isinstance(op, npu.FusedLinearOp) and op.activation.data != "none"
        if kernel == ("apart" if activation else "onednn"):  # else OpenVINO's own kernel
            moved.setdefault(kernel, []).append(linear_rows(op))
    if not moved:
        return ""
    what = "; ".join(
        f"{len(rows)} linear(s) at {', '.join(map(str, sorted(set(rows))))} row(s) "
        f"{KERNEL_REASONS[kernel]}"
        for kernel, rows in moved.items()
    )
    measured = ", ".join(
        f"{k.rows} row(s) OpenVINO's own {k.fused_ms:.3g} ms, all MLAS {k.apart_ms:.3g} ms"
        + (f", all oneDNN {k.onednn_ms:.3g} ms" if k.onednn_ms is not None else "")
        for k in profile.kernels
    )
    return f"{what} (host profile: {measured})"


def _int8_kernel_note(function: func.FuncOp, profile: HostProfile) -> str:
    """The int8-weight linears whose activation the profile moves out of OpenVINO's
    FullyConnected, with the times behind it (nothing when none)."""
    rule = profile.int8_kernel_rule()
    rows = [
        linear_rows(op)
        for op in function.walk()
        if isinstance(op, npu.FusedLinearOp)
        and op.activation.data != "none"
        and device_of(op) != "cpu"
        and linear_kernel(rule, linear_rows(op)) == "apart"
    ]
    if not rows:
        return ""
    measured = ", ".join(
        f"{k.rows} row(s) fused {k.int8_fused_ms:.3g} ms, apart {k.int8_apart_ms:.3g} ms"
        for k in profile.kernels
        if k.int8_fused_ms is not None and k.int8_apart_ms is not None
    )
    return (
        f"{len(rows)} int8 linear(s) at {', '.join(map(str, sorted(set(rows))))} row(s) "
        f"with the activation computed after OpenVINO's FullyConnected (host profile: "
        f"{measured})"
    )


def _fp16_kernel_note(function: func.FuncOp, profile: HostProfile, precision: str) -> str:
    """The row counts whose fp16 weights stay fp16 in OpenVINO's kernel and those that
    run their fp32 weights instead (where fp16 measured slower), with the times behind
    it (nothing without fp16 measurements: every one stays fp16, as asked)."""
    measured = ", ".join(
        f"{k.rows} row(s) fp32 weights {k.fp16_wide_ms:.3g} ms, kept fp16 {k.fp16_narrow_ms:.3g} ms"
        for k in profile.kernels
        if k.fp16_wide_ms is not None and k.fp16_narrow_ms is not None
    )
    if not measured:
        return ""
    rule = profile.fp16_kernel_rule()
    rows = {
        linear_rows(op)
        for op in function.walk()
        if isinstance(op, npu.WEIGHTED_LINEAR_OPS)
        and device_of(op) != "cpu"
        and npu.weight_storage(op.weight, precision) == "fp16"
    }
    forms = {
        form: sorted(r for r in rows if linear_kernel(rule, r) == form) for form in FP16_KERNELS
    }
    parts = []
    if forms["narrow"]:
        parts.append(
            "kept fp16 in OpenVINO's kernel for linears of "
            f"{', '.join(map(str, forms['narrow']))} row(s)"
        )
    if forms["wide"]:
        parts.append(
            "run as their fp32 weights, with the fp32 kernels, for linears of "
            f"{', '.join(map(str, forms['wide']))} row(s), where fp16 measured slower"
        )
    if not parts:
        return ""
    return f"fp16 weights {'; '.join(parts)} (host profile: {measured})"


QUANTIZED_NOTES = ("activations of the int8 MatMuls quantized", "int8 linears at")
"""How the notes of a program whose int8 activations are quantized at run time begin
(forced, then chosen by the host profile)."""


def _int8_dynamic_note(
    function: func.FuncOp, profile: HostProfile, precision: str, forced: bool | None
) -> str:
    """For an int8 program left to the profile: the row counts whose graphs quantize
    their activations at run time, with the times behind it (nothing when none do)."""
    rule = profile.int8_dynamic_rule()
    if precision != "int8" or forced is not None or not any(on for _, on in rule):
        return ""
    rows = {
        linear_rows(op)
        for op in function.walk()
        if isinstance(op, npu.WEIGHTED_LINEAR_OPS) and device_of(op) != "cpu"
    }
    quantized = sorted(r for r in rows if int8_dynamic_at(rule, r))
    if not quantized:
        return ""
    measured = ", ".join(
        f"{k.rows} row(s) weight-only {k.int8_fused_ms:.3g} ms, "
        f"quantized {k.int8_dynamic_ms:.3g} ms"
        for k in profile.kernels
        if k.int8_dynamic_ms is not None and k.int8_fused_ms is not None
    )
    return (
        f"{QUANTIZED_NOTES[1]} {', '.join(map(str, quantized))} row(s) quantize their activations "
        f"at run time (OpenVINO's dynamic quantization, groups of 32; host profile: "
        f"{measured}; --weight-only or dynamic_quantized=False keeps them fp32)"
    )


def _snippets_note(profile: HostProfile, precision: str) -> str:
    """For an fp32 program: the row counts whose graphs compile with OpenVINO's snippets
    on, with the times behind it (nothing when none do)."""
    on = [k for k in profile.kernels if k.snippets]
    if precision != "fp32" or not on:
        return ""
    measured = ", ".join(
        f"{k.rows} row(s) off {k.snippets_baseline_ms:.3g} ms, on {k.snippets_ms:.3g} ms"
        for k in profile.kernels
        if k.snippets_ms is not None
    )
    rows = ", ".join(str(k.rows) for k in on)
    return (
        f"graphs whose linears have about {rows} row(s) compile with OpenVINO's snippets "
        f"on (host profile: {measured})"
    )


def _release_when_collected(
    model: torch.nn.Module, executor: CompiledNPUExecutor
) -> CompiledNPUExecutor:
    """`executor`, set to release the memory its graphs share with `model` once nobody
    holds the model: OpenVINO's packed copy is the one that runs then (unless
    FORGE_RELEASE_WEIGHTS=0). The callback holds neither the model nor the executor."""
    if os.environ.get("FORGE_RELEASE_WEIGHTS", "1") == "0":
        return executor
    ref = weakref.ref(executor)

    def release() -> None:
        alive = ref()
        if alive is not None:
            alive.release_weights()

    weakref.finalize(model, release).atexit = False
    return executor


def _from_cache(
    model: torch.nn.Module,
    hit: CachedProgram,
    precision: str,
    granularity: str,
    dynamic_quantized: bool | None = None,
    profile: str | None = None,
) -> tuple[CompiledNPUExecutor, CompileReport]:
    """The executor of a cache entry: its planned IR, the model's own tensors (the
    entry's key holds the profile's digest: the same rule as when it was stored)."""
    function = entry_function(hit.module)
    host = load_profile(profile) if profile else None
    with dynamic_quantization(dynamic_quantized), host_choices(host):
        executor = CompiledNPUExecutor(
            function,
            hit.weights,
            hit.num_inputs,
            precision,
            granularity=granularity,
            allocation=allocate(function),
        )
    return _release_when_collected(model, executor), CompileReport(
        plan=None,
        export_seconds=0.0,
        import_seconds=0.0,
        optimize_seconds=0.0,
        phase34_seconds=0.0,
        conversion_seconds=executor.build_seconds,
        nnfactory_compile_seconds=executor.compile_seconds,
        conversion_kernel_seconds=executor.build_kernel_seconds,
        conversion_page_faults=executor.build_page_faults,
        segments=len(executor.segments),
        npu_ops=executor.npu_ops,
        fallback_ops=executor.fallback_ops,
        input_names=list(hit.meta["input_names"]),
        notes=[*hit.meta["notes"], *executor.notes],
        in_spec=hit.in_spec,
        out_spec=hit.out_spec,
        input_constants=hit.input_constants,
        output_constants=hit.output_constants,
        plan_summary=hit.meta["summary"],
    )
