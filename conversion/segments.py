"""How a scheduled function splits into steps: maximal runs of NPU ops (NNFactory
segments) and single CPU ops. The executor and the plan printer (`-t python`) both
split with these, so the printed plan has the executed plan's steps."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from xdsl.dialects import func
from xdsl.ir import Operation

from forge.transforms.npu_schedule_affinity import body_ops, device_of

GRANULARITIES = ("segment", "op")
WEIGHT_BINDINGS = ("constants", "parameters")
"""How weights reach NNFactory graphs: baked in as constants when the graph is built
(OpenVINO pre-packs them; the default), or bound as parameters at every call (graphs
of identical layers then share one compile, as `granularity="op"` benefits from)."""


def device_runs(function: func.FuncOp) -> Iterator[tuple[str, list[Operation]]]:
    """The body in schedule order as ("npu", a maximal run of NPU ops) and ("cpu", [op])
    items. Shared with `forge.conversion.plan_to_python`, so the printed plan has the
    executed plan's steps."""
    run: list[Operation] = []
    for op in body_ops(function.body.block):
        if device_of(op) == "npu":
            run.append(op)
            continue
        if run:
            yield "npu", run
            run = []
        yield "cpu", [op]
    if run:
        yield "npu", run


def npu_groups(run: Sequence[Operation], granularity: str) -> list[list[Operation]]:
    """The NNFactory segments a run of NPU ops becomes: the whole run, or one per op."""
    return [list(run)] if granularity == "segment" else [[op] for op in run]
