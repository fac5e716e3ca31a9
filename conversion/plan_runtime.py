"""What a printed plan (`forge-opt -t python`) calls besides NNFactory and
`graph_call.GraphCall`: the weights as the graph stores them, the StridedSlice binding,
large constants unpacked, a compile with OpenVINO's snippets. Kept apart from the
printer so that a printed program imports only these."""

from __future__ import annotations

import base64
import importlib
import zlib
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from forge.conversion import cached_attention, kernel_choice, nnfactory_graph
from forge.conversion.graph_call import GraphInput
from forge.conversion.nnfactory_backend import PACKAGE
from forge.target.cpu_kernels import attend_cached, check_run  # noqa: F401 (printed)


def weight_arrays(
    tensor: torch.Tensor,
    dtype: Any,
    storage: str = "float",
    reduce_dim: int = 1,
    transposed: bool = False,
) -> list[np.ndarray]:
    """A weight as the graph stores it, by `GraphInput.arrays` itself: `[converted]`, or
    `[int8, scale]` (storage int8, one scale per channel kept along `reduce_dim`); an
    fp16 weight `transposed` is kept [out, in]."""
    spec = GraphInput(np.dtype(dtype), storage, reduce_dim, transposed=transposed)
    return spec.arrays(tensor)


def mark_decompression(convert: Any) -> None:
    """`GraphBuilder.widen`'s backend call: the Convert of fp16 weights marked as a
    decompression (`nnfactory_graph._mark_decompression`)."""
    nnfactory_graph._mark_decompression()(convert.node)


def mark_llm(f: Any) -> None:
    """What `_compile` does before compiling a graph with fp16 weights kept fp16: mark
    it as a language model's for OpenVINO (`nnfactory_graph._mark_llm`)."""
    nnfactory_graph._mark_llm()(f._mm)


def strided_slice(
    f: Any,
    x: Any,
    begin: Any,
    end: Any,
    stride: Any,
    begin_mask: Sequence[int],
    end_mask: Sequence[int],
) -> Any:
    """`GraphBuilder.slice`'s backend call: StridedSlice through the corrected binding
    (`nnfactory_graph._strided_slice`), which `NNFactory` itself does not offer."""
    begins = np.asarray(begin_mask, dtype=np.uint32)
    ends = np.asarray(end_mask, dtype=np.uint32)
    node = nnfactory_graph._strided_slice()(
        f._mm, x.node, begin.node, end.node, stride.node, begins.size, begins, ends.size, ends
    )
    return importlib.import_module(f"{PACKAGE}.backend.tensor").Tensor(f, node)


def paged_attention(
    f: Any,
    query: Any,
    key: Any,
    value: Any,
    key_cache: Any,
    value_cache: Any,
    start: Any,
    kv_heads: int,
    rows: int,
    blocks: int,
    size: int,
    scale: float,
    window: int = 0,
) -> Any:
    """`lower_cached_attention`'s backend call: OpenVINO's PagedAttentionExtension
    through the binding scripts/build_nnfactory.sh adds (`paged_attention_binding`)."""
    handles = (query, key, value, key_cache, value_cache, start)
    node = cached_attention.paged_attention_binding()(
        f._mm, *(h.node for h in handles), kv_heads, rows, blocks, size, scale, window
    )
    return importlib.import_module(f"{PACKAGE}.backend.tensor").Tensor(f, node)


def eltwise_extreme(f: Any, name: str, x: Any, y: Any) -> Any:
    """`GraphBuilder.extreme`'s backend call: `eltwise_max` or `eltwise_min`, OpenVINO's
    Maximum/Minimum with torch's NaN semantics (`nnfactory_graph._nan_propagating`)."""
    node = nnfactory_graph._nan_propagating(name)(f._mm, x.node, y.node)
    return importlib.import_module(f"{PACKAGE}.backend.tensor").Tensor(f, node)


def unpack_array(data: str, dtype: Any, shape: Sequence[int]) -> np.ndarray:
    """A constant too large to print as a literal (zlib-compressed, base64)."""
    raw = zlib.decompress(base64.b64decode(data))
    return np.frombuffer(raw, dtype=dtype).reshape(shape).copy()


def compile_with_snippets(factory: Any, mode: str) -> None:
    """`factory.compile()` with OpenVINO's snippets `mode`, as `compile_model` compiled
    the graph (printed programs call it where the host profile turned snippets on)."""
    with kernel_choice.nnfactory_env(**{kernel_choice.SNIPPETS_ENV: mode}):
        factory.compile()
