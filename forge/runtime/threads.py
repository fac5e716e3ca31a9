"""One thread pool at a time: torch's OpenMP workers stay out of NNFactory's way.

NNFactory graphs run on OpenVINO's CPU plugin, whose own (TBB) threads take every core.
torch's intra-op pool is OpenMP, and libgomp's workers spin-wait after each parallel
kernel (milliseconds, unless `OMP_WAIT_POLICY=PASSIVE` was set before torch loaded). A
graph started right after a parallel torch kernel, even a tiny one (a cache slice
written in place, the argmax over GPT-2's 50257 logits), then shares its cores with
spinning workers: measured on a 2-core AMD EPYC, GPT-2's time to first token doubled and
its decode rate halved with torch at 2 threads instead of 1 (docs/generation-bench.md).

So an executor with NNFactory segments runs its CPU steps on one torch thread (they
are copies, masks and index arithmetic: microseconds), except the kernels that are
worth torch's pool (`forge.target.cpu_kernels.wants_threads`: matmuls, linears,
attention), which get the caller's thread count back for their call. The host loop of
`CompiledLM.generate` runs inside the same policy. `torch.set_num_threads` is
process-wide and costs well under a microsecond; the caller's count is restored on
exit.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

ENABLED = True
"""False runs every CPU step at the caller's torch thread count (for measuring)."""

_outer: list[int] = []
"""The caller's thread count while a `graph_threads` block is open (nested blocks share
the outermost one's)."""


@contextlib.contextmanager
def graph_threads() -> Iterator[int]:
    """Run torch on one thread inside. Yields the caller's thread count, for the kernels
    that want the pool, or 0 when the policy is off (`ENABLED`) or moot (one thread)."""
    if _outer:
        yield _outer[0]
        return
    outer = torch.get_num_threads()
    if not ENABLED or outer == 1:
        yield 0
        return
    _outer.append(outer)
    torch.set_num_threads(1)
    try:
        yield outer
    finally:
        _outer.clear()
        torch.set_num_threads(outer)
