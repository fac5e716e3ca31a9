"""Buffer writes made functional without retracing the program.

A KV-cache program's only in-place ops are its state writes: each layer's
`keys.index_copy_(...)` and `values.index_copy_(...)`, the wrapper's
`cache_length.copy_(...)`. torch.export records them as in-place ops on the buffers'
placeholders, and every later read of the buffer reads the op's result. Making such a
graph functional needs no retrace: each write becomes its functional overload
(`aten.index_copy`), and its result the buffer's new value, a `BUFFER_MUTATION` output
of the signature. `run_decompositions` does the same by tracing the whole program
again through functionalization: 1.4-2.0 s of a GPT-2 program's 2-2.5 s capture (AMD
EPYC Zen 3, one process).

An op can also change state behind its schema (`aten.batch_norm` updates the running
statistics in train mode without saying so), which only a retrace finds; so capture
takes this path only for a model that says its state changes are all in-place buffer
writes (`writes_only_buffers`, as `StaticCacheLM` does). Even then only the simplest
form is taken: a buffer written once, directly (not through a view),
by an in-place op with a functional overload of the same arguments, the write being
the placeholder's only use (so nothing reads the old value or holds a view of it); and
in-place ops on fresh temporaries nothing else reads (`torch.tensor(...)`'s
`detach_`). Anything else returns False and the caller runs `run_decompositions`.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.export.graph_signature import InputKind, OutputKind, OutputSpec, TensorArgument
from torch.fx import Node


def functional_overload(target: Any) -> Any:
    """`aten.x.overload` for the in-place `aten.x_.overload`, or None."""
    schema = getattr(target, "_schema", None)
    if schema is None:
        return None
    namespace, _, name = schema.name.partition("::")
    if namespace != "aten" or not name.endswith("_") or name.startswith("_"):
        return None
    packet = getattr(torch.ops.aten, name[:-1], None)
    overload = getattr(packet, target._overloadname, None) if packet is not None else None
    if overload is None or len(overload._schema.arguments) != len(schema.arguments):
        return None
    return overload


def functionalize_buffer_writes(exported: torch.export.ExportedProgram) -> bool:
    """Make every in-place op of `exported` a functional write of its buffer, in place;
    False (the graph untouched) where one is not of the simple form."""
    graph = exported.graph
    signature = exported.graph_signature
    if any(spec.kind != OutputKind.USER_OUTPUT for spec in signature.output_specs):
        return False
    buffers = {
        spec.arg.name: spec.target
        for spec in signature.input_specs
        if spec.kind == InputKind.BUFFER and spec.target is not None
    }
    rewrites: list[tuple[Node, Any]] = []
    writes: list[tuple[Node, str]] = []
    for node in graph.nodes:
        schema = getattr(node.target, "_schema", None)
        if node.op != "call_function" or schema is None or not schema.is_mutable:
            continue
        functional = functional_overload(node.target)
        written = node.args[0] if node.args else None
        if functional is None or not isinstance(written, Node) or len(written.users) != 1:
            return False
        if written.op == "placeholder" and written.name in buffers:
            writes.append((node, buffers[written.name]))
        elif not _fresh(written):  # `torch.tensor(...).detach_()`: nobody else holds it
            return False
        rewrites.append((node, functional))
    if not writes:
        return False
    for node, functional in rewrites:
        node.target = functional
    order = {spec.target: i for i, spec in enumerate(signature.input_specs)}
    writes.sort(key=lambda write: order[write[1]])
    output = next(node for node in reversed(graph.nodes) if node.op == "output")
    results = [node for node, _ in writes] + list(output.args[0])
    output.args = (type(output.args[0])(results),)
    signature.output_specs[:] = [
        OutputSpec(OutputKind.BUFFER_MUTATION, TensorArgument(node.name), target)
        for node, target in writes
    ] + list(signature.output_specs)
    return True


def _fresh(node: Node) -> bool:
    """Whether `node` computes a new tensor (not a view of another)."""
    schema = getattr(node.target, "_schema", None)
    return (
        node.op == "call_function"
        and schema is not None
        and not schema.is_mutable
        and len(schema.returns) == 1
        and schema.returns[0].alias_info is None
    )
