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

The executor is the plan builder and its runner only: `forge.runtime.compile` drives a
whole compile, `forge.runtime.kv_state` holds the KV cache's side of the plan, and every
graph follows the `BuildOptions` record it is given.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import resource
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue

from forge.conversion.kernel_choice import BuildOptions, Decision
from forge.conversion.nnfactory_graph import NoNpuLowering, Segment, build_segment
from forge.conversion.segments import arena_layout, check_memory, device_runs, npu_groups
from forge.conversion.weight_spill import SpillUnavailable, spilled_bytes
from forge.dialects import contract, npu
from forge.dialects.context import entry_function
from forge.dialects.dtypes import check_precision
from forge.runtime.compile_cache import (
    cache_root,
)
from forge.runtime.input_contract import input_contract
from forge.runtime.kv_state import mark_state_inputs, pin_cache_rows
from forge.runtime.steps import Step
from forge.runtime.tables import Table, find_chain, key_slots
from forge.runtime.threads import graph_threads
from forge.support.diagnostics import ForgeError
from forge.target.cpu_kernels import (
    cache_updates_kernel,
    cpu_kernel,
    packed_linear_kernel,
    wants_threads,
)
from forge.transforms.npu_fold_constants import is_deterministic
from forge.transforms.npu_linear_scan import AllocationReport
from forge.transforms.npu_schedule_affinity import check_schedule


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
        options: BuildOptions | None = None,
        allocation: AllocationReport | None = None,
    ):
        function = entry_function(module_or_function)
        self.function = function
        """The planned function this executor runs."""
        self.options = options if options is not None else BuildOptions()
        """The build choices every graph of this executor follows."""
        start, usage = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
        check_schedule(function)
        check_memory(function, allocation.planned_bytes if allocation else None, num_inputs)
        args = function.body.block.args
        names = [a.name_hint or f"arg{i}" for i, a in enumerate(args)]
        missing = [n for n in names[num_inputs:] if n not in weights]
        if missing:
            raise ForgeError(f"no tensor given for weight argument(s): {', '.join(missing)}")
        self.precision = check_precision(contract.program_precision(function) or "fp32")
        """The precision npu-assign-precision recorded in the IR (fp32 where it did not
        run); the graphs read it from there."""
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
        self._writes = contract.write_backs(function)
        """(result index, argument slot): results copied into state after every call."""
        written = {arg for _, arg in self._writes}
        self._constants: dict[SSAValue, torch.Tensor] = (
            {
                args[i]: self._template[i]
                for i in range(num_inputs, len(args))
                if i not in written  # state changes between calls: bound, never baked
            }
            if self.options.weights_as == "constants"
            else {}
        )

        self._build_steps(function)
        self.spilled_copy_bytes = self._spill_copies()
        """Weights converted or quantized for the graphs, moved out of the resident set
        once compiled (`_spill_copies`)."""
        self.arena, self.arena_values = self._bind_buffers(function, allocation)
        self._bind_results(function, written)
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

    def _build_steps(self, function: func.FuncOp) -> None:
        """One step per NNFactory segment and per CPU op, in schedule order; the CPU
        linears' weights packed on a thread of their own while the graphs compile."""
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

    def _bind_results(self, function: func.FuncOp, written: set[int]) -> None:
        """Where the results and write-backs are, the state the segments read (the KV
        caches, `forge.runtime.kv_state`) and the table of CPU results."""
        terminator = function.body.block.last_op
        assert isinstance(terminator, func.ReturnOp)
        slots = tuple(self._slot(v) for v in terminator.arguments)
        user_results = len(slots) - len(self._writes)
        self._results = slots[:user_results]
        self._write_slots = tuple((slots[r], a) for r, a in contract.copied_write_backs(function))
        """(result slot, argument slot): copied back after a call (an `npu.cache_update`
        wrote the others in place)."""
        self._steps = mark_state_inputs(function, self._steps, self._slots, written)
        returned = (*self._results, *(result for result, _ in self._write_slots))
        self.pinned_rows = pin_cache_rows(self._steps, returned)
        """Graph results written straight into one buffer the cache updates read."""
        self.table = self._tabulate(function, written)
        """The `Table` of CPU results keyed by small inputs (a decode step's mask), or
        None."""

    @property
    def granularity(self) -> str:
        return self.options.granularity

    @property
    def weights_as(self) -> str:
        return self.options.weights_as

    @property
    def decisions(self) -> list[tuple[Decision, ...]]:
        """Per segment, what its graph's builder chose (`Segment.decisions`)."""
        return [segment.decisions for segment in self.segments]

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
                segment = build_segment(group, self.options, constants=self._constants)
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
