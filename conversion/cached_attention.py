"""`npu.cached_attention`'s NNFactory lowering: OpenVINO's PagedAttentionExtension, the
node GenAI's graphs attend with, which writes the new keys and values into the cache
tensors the caller binds and attends over them, one node a layer.

The op's caches are [1, Hk, C, D]. The paged attention reads caches as blocks of 32
positions, [blocks, kv_heads, 32, D], and a sequence's blocks through a block table.
Presented as one sequence per key/value head with one kv head each, and the table
listing head h's C/32 blocks in order, [Hk x C/32, 1, 32, D] is the same memory as
[1, Hk, C, D]: the node writes row `start + p` of head h exactly where
`npu.cache_update` would, and the caches stay in the layout every other reader (eager
transformers, the CPU's kernels, the other program) knows. The tokens of sequence h are
that head's query rows: the query [1, Hk x G, P, D] as [Hk x P, G x D] (a transpose
first for G > 1, grouped-query attention), the new keys and values [1, Hk, P, D] as
[Hk x P, D] (a reshape).

The start position is the `npu.run_start` operand (checked on the CPU: a run in the
cache); the binding takes it as the i64 tensor and derives `past_lens` and the
context length from it inside the graph (scripts/build_nnfactory.sh,
`paged_attention_windowed`). The op's `window` is the node's `sliding_window` input
(0: none; W: each token sees its own position and the W - 1 before it, which is
transformers' sliding window: measured against that mask on OpenVINO 2026.4.1's CPU
plugin for windows 2, 3 and 5, prefill chunks with a past and decode steps).
"""

from __future__ import annotations

import ctypes
import importlib
from functools import cache
from typing import Any

from forge.conversion.nnfactory_graph import (
    PACKAGE,
    GraphBuilder,
    Node,
    NoNpuLowering,
    _shape,
    bindings,
)
from forge.dialects import npu
from forge.target.capabilities import PAGED_BLOCK, paged_cache_rejects


@cache
def paged_attention_binding() -> Any:
    """The backend's `paged_attention_windowed` (added by scripts/build_nnfactory.sh), or
    None on a build without it (then the op runs on the CPU)."""
    backend = bindings()
    fn = getattr(backend.lib, "paged_attention_windowed", None)
    if fn is None:
        return None
    fn.argtypes = [backend.handler] * 7 + [ctypes.c_size_t] * 4 + [ctypes.c_float, ctypes.c_int32]
    fn.restype = backend.handler
    return fn


def lower_cached_attention(b: GraphBuilder, op: npu.CachedAttentionOp) -> Node:
    paged = paged_attention_binding()
    if paged is None:
        raise NoNpuLowering("this NNFactory build has no paged_attention")
    _, heads, rows, size = _shape(op.query)
    _, kv_heads, capacity, _ = _shape(op.key_cache)
    rejected = paged_cache_rejects(op)
    if rejected is not None:
        raise NoNpuLowering(rejected)
    groups = heads // kv_heads
    f = b.factory
    query = b.node(op.query)
    if groups > 1:
        query = b.reshape(query, [kv_heads, groups, rows, size])
        query = f.transpose(query, [0, 2, 1, 3])
    query = b.reshape(query, [kv_heads * rows, groups * size])
    key = b.reshape(b.node(op.key), [kv_heads * rows, size])
    value = b.reshape(b.node(op.value), [kv_heads * rows, size])
    caches = [b.node(c) for c in (op.key_cache, op.value_cache)]
    start = b.node(op.start)
    handle = paged(
        f._mm,
        query.node,
        key.node,
        value.node,
        caches[0].node,
        caches[1].node,
        start.node,
        kv_heads,
        rows,
        capacity // PAGED_BLOCK,
        size,
        op.scale.value.data,
        op.window_size,
    )
    out = importlib.import_module(f"{PACKAGE}.backend.tensor").Tensor(f, handle)
    if groups == 1:
        return b.reshape(out, [1, heads, rows, size])
    out = f.transpose(b.reshape(out, [kv_heads, rows, groups, size]), [0, 2, 1, 3])
    return b.reshape(out, [1, heads, rows, size])
