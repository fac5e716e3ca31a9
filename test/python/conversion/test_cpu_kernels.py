"""CPU kernels the executor runs outside NNFactory graphs."""

from __future__ import annotations

import pytest
import torch

from forge.conversion.cpu_kernels import cache_updates_kernel


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
