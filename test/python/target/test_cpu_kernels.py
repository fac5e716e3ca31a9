"""CPU kernels the executor runs outside NNFactory graphs."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from forge.conversion.graph_call import GraphInput
from forge.support.diagnostics import ForgeError
from forge.target.cpu_kernels import attend_cached, cache_updates_kernel, check_run


def _caches(count: int, dtype: torch.dtype = torch.float32) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    return [torch.randn(1, 3, 8, 4, generator=generator).to(dtype) for _ in range(count)]


@pytest.mark.parametrize("positions", [[5], [0, 1, 2], [6, 2, 4], [7, 7]])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_cache_updates_match_index_copy(positions: list[int], dtype: torch.dtype) -> None:
    """One call writes every cache as `index_copy_` would, at any positions (a run, a
    single row, an unordered set, a repeated row) and returns the caches themselves."""
    index = torch.tensor(positions)
    caches = _caches(3, dtype)
    expected = [c.clone() for c in caches]
    generator = torch.Generator().manual_seed(1)
    rows = [torch.randn(1, 3, len(positions), 4, generator=generator).to(dtype) for _ in caches]
    for cache, update in zip(expected, rows, strict=True):
        cache.index_copy_(2, index, update)
    pairs = [t for pair in zip(caches, rows, strict=True) for t in pair]
    result = cache_updates_kernel(2)(index, *pairs)
    assert all(r is c for r, c in zip(result, caches, strict=True))
    for cache, want in zip(caches, expected, strict=True):
        assert torch.equal(cache, want)


def test_one_cache_update_returns_the_cache() -> None:
    (cache,) = _caches(1)
    result = cache_updates_kernel(-2)(torch.tensor([3]), cache, torch.ones(1, 3, 1, 4))
    assert result is cache
    assert torch.equal(cache[:, :, 3], torch.ones(1, 3, 4))


def test_cache_update_errors_are_index_copy_errors() -> None:
    """Rows past the end or of the wrong shape fail as `index_copy_` fails."""
    (cache,) = _caches(1)
    kernel = cache_updates_kernel(2)
    with pytest.raises(IndexError):
        kernel(torch.tensor([8]), cache, torch.ones(1, 3, 1, 4))
    with pytest.raises(IndexError):
        kernel(torch.tensor([1]), cache, torch.ones(1, 3, 2, 4))


def test_one_row_writes_fail_as_index_copy_fails_with_several_caches() -> None:
    """The one-row path (row views and `_foreach_copy_`) takes only writes `index_copy_`
    would make: past the end, a wrong shape (which a copy would broadcast) or another
    dtype go to `index_copy_` and fail there."""
    kernel = cache_updates_kernel(2)
    caches = _caches(2)
    row = torch.ones(1, 3, 1, 4)
    with pytest.raises(IndexError):
        kernel(torch.tensor([8]), caches[0], row, caches[1], row)
    with pytest.raises(IndexError):
        kernel(torch.tensor([-1]), caches[0], row, caches[1], row)
    narrow = torch.ones(1, 3, 1, 1)  # copy_ would broadcast it over the row
    with pytest.raises(RuntimeError):
        kernel(torch.tensor([2]), caches[0], narrow, caches[1], narrow)
    with pytest.raises(RuntimeError):
        kernel(torch.tensor([2]), caches[0], row.double(), caches[1], row.double())


def test_row_views_follow_the_caches_they_are_given() -> None:
    """Views kept for a position belong to the caches of that call: other caches at the
    same position are written, not the first ones again."""
    kernel = cache_updates_kernel(2)
    first, second = _caches(2), [c.clone() for c in _caches(2)]
    row = torch.full((1, 3, 1, 4), 7.0)
    kernel(torch.tensor([4]), first[0], row, first[1], row)
    before = [c.clone() for c in first]
    kernel(torch.tensor([4]), second[0], row * 2, second[1], row * 2)
    assert all(torch.equal(a, b) for a, b in zip(first, before, strict=True))
    assert all(torch.equal(c[:, :, 4:5], row * 2) for c in second)


def _stacked(count: int) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """Caches as slices of one tensor, as `StaticCacheLM` stacks them."""
    stack = torch.randn(count, 3, 8, 4, generator=torch.Generator().manual_seed(0))
    return stack, [stack[k : k + 1] for k in range(count)]


@pytest.mark.parametrize("position", [0, 5, 7])
def test_stacked_rows_are_one_copy_with_index_copy_results(position: int) -> None:
    """Caches that are slices of one tensor and rows that are slices of one buffer (a
    pinned graph output) take the one-block path; the caches end as `index_copy_`
    leaves them, at every position, and returned as themselves."""
    _, caches = _stacked(4)
    block = torch.randn(4, 3, 1, 4, generator=torch.Generator().manual_seed(2))
    rows = [block[k : k + 1] for k in range(4)]
    expected = [c.clone() for c in caches]
    for cache, row in zip(expected, rows, strict=True):
        cache.index_copy_(2, torch.tensor([position]), row)
    kernel = cache_updates_kernel(2)
    views = kernel.row_views  # type: ignore[attr-defined]
    pairs = [t for pair in zip(caches, rows, strict=True) for t in pair]
    result = kernel(torch.tensor([position]), *pairs)
    assert views.blocks[position] is not None  # the block path wrote them
    assert all(r is c for r, c in zip(result, caches, strict=True))
    for cache, want in zip(caches, expected, strict=True):
        assert torch.equal(cache, want)


def test_rows_that_are_not_one_block_are_still_written() -> None:
    """Rows in separate tensors, caches out of order, or rows inside the caches' own
    storage are written one by one, as `index_copy_` would."""
    stack, caches = _stacked(3)
    apart = [torch.full((1, 3, 1, 4), float(k)) for k in range(3)]
    shuffled = [caches[2], caches[0], caches[1]]
    inside = [stack[k : k + 1, :, 6:7] for k in range(3)]  # not contiguous: apart
    for order, rows in ((caches, apart), (shuffled, apart), (caches, inside)):
        expected = [c.clone() for c in order]
        for cache, row in zip(expected, rows, strict=True):
            cache.index_copy_(2, torch.tensor([1]), row.clone())
        pairs = [t for pair in zip(order, rows, strict=True) for t in pair]
        cache_updates_kernel(2)(torch.tensor([1]), *pairs)
        for cache, want in zip(order, expected, strict=True):
            assert torch.equal(cache, want)


def test_stacked_rows_fail_as_index_copy_fails() -> None:
    """Past the end, negative, or another dtype: not the block path, and `index_copy_`'s
    error."""
    _, caches = _stacked(2)
    block = torch.ones(2, 3, 1, 4)
    kernel = cache_updates_kernel(2)
    for position, rows in ((8, block), (-1, block), (2, block.double())):
        pairs = [caches[0], rows[0:1], caches[1], rows[1:2]]
        with pytest.raises((IndexError, RuntimeError)):
            kernel(torch.tensor([position]), *pairs)


@pytest.mark.parametrize("first", [0, 3, 5])
def test_a_run_of_positions_is_written_as_slices(first: int) -> None:
    """A prefill chunk's consecutive positions: stacked caches and rows in one buffer
    take one strided copy, separate rows a copy per cache; the caches end as
    `index_copy_` leaves them."""
    positions = torch.arange(first, first + 3)
    block = torch.randn(4, 3, 3, 4, generator=torch.Generator().manual_seed(3))
    one = [block[k : k + 1] for k in range(4)]
    for rows in (one, [r.clone() for r in block.split(1)]):
        _, caches = _stacked(4)
        expected = [c.clone() for c in caches]
        for cache, row in zip(expected, rows, strict=True):
            cache.index_copy_(2, positions, row)
        kernel = cache_updates_kernel(2)
        pairs = [t for pair in zip(caches, rows, strict=True) for t in pair]
        result = kernel(positions, *pairs)
        views = kernel.row_views  # type: ignore[attr-defined]
        assert (views.source is not None) == (rows is one)  # one block: one strided copy
        assert all(r is c for r, c in zip(result, caches, strict=True))
        for cache, want in zip(caches, expected, strict=True):
            assert torch.equal(cache, want)


def test_runs_that_are_not_slices_fail_as_index_copy_fails() -> None:
    """Past the end, negative, rows of another length, shape or dtype: `index_copy_`
    writes them, and fails there."""
    _, caches = _stacked(2)
    kernel = cache_updates_kernel(2)
    rows = torch.ones(2, 3, 3, 4)
    cases = (
        (torch.arange(6, 9), rows),
        (torch.arange(-1, 2), rows),
        (torch.arange(0, 2), rows),
        (torch.arange(0, 3), torch.ones(2, 3, 3, 1)),
        (torch.arange(0, 3), rows.double()),
    )
    for positions, block in cases:
        pairs = [caches[0], block[0:1], caches[1], block[1:2]]
        with pytest.raises((IndexError, RuntimeError)):
            kernel(positions, *pairs)


def test_check_run_passes_a_run_and_refuses_the_rest() -> None:
    assert check_run(torch.tensor([5, 6, 7]), 8).tolist() == [5]
    assert check_run(torch.tensor([0]), 1).tolist() == [0]
    for positions, capacity in (([1, 3], 8), ([2, 1], 8), ([7, 8], 8), ([-1, 0], 8)):
        with pytest.raises(ForgeError, match="consecutive positions within the cache's"):
            check_run(torch.tensor(positions), capacity)


@pytest.mark.parametrize("heads", [2, 4])
@pytest.mark.parametrize("start", [0, 5])
@pytest.mark.parametrize("window", [0, 2])
def test_attend_cached_is_the_written_cache_under_the_causal_mask(
    heads: int, start: int, window: int
) -> None:
    """The CPU form of `npu.cached_attention`: index_copy into both caches, then
    attention over the whole cache with row p seeing rows up to start + p (with a
    window W, only the last W of them)."""
    generator = torch.Generator().manual_seed(start + heads)
    q = torch.randn(1, heads, 3, 8, generator=generator)
    k, v = (torch.randn(1, 2, 3, 8, generator=generator) for _ in range(2))
    caches = [torch.randn(1, 2, 16, 8, generator=generator) for _ in range(2)]
    positions = torch.arange(start, start + 3)
    written = [c.clone().index_copy_(2, positions, x) for c, x in zip(caches, (k, v), strict=True)]
    seen = torch.arange(16) <= positions[:, None]
    if window:
        seen &= torch.arange(16) > positions[:, None] - window
    want = torch.nn.functional.scaled_dot_product_attention(
        q, *written, attn_mask=seen, scale=0.3, enable_gqa=heads != 2
    )
    got = attend_cached(q, k, v, *caches, torch.tensor([start]), scale=0.3, window=window)
    assert torch.allclose(got, want, atol=1e-6)
    assert all(torch.equal(c, w) for c, w in zip(caches, written, strict=True))


def test_written_graph_inputs_are_the_callers_memory() -> None:
    """A cache a graph writes in place is bound as the tensor's own memory, never a
    converted or contiguous copy (the writes would be lost)."""
    spec = GraphInput(np.dtype(np.float32), written=True)
    cache = torch.zeros(1, 2, 32, 8)
    (array,) = spec.arrays(cache)
    assert array.ctypes.data == cache.data_ptr()
    with pytest.raises(ForgeError, match="contiguous float32 tensor"):
        spec.arrays(cache.transpose(2, 3))
    with pytest.raises(ForgeError, match="contiguous float32 tensor"):
        spec.arrays(cache.double())
