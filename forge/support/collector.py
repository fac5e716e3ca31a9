"""Pausing Python's cyclic garbage collector around Forge's own stages.

With a model's objects alive (right after torch.export, or while an executor holds its
weights), one full collection costs 0.2-0.3 s for GPT-2: more than import, Phase 2 or
Phases 3-4 themselves. Building and rewriting IR makes no cyclic garbage worth that
before the stage ends, so the stages run with the collector paused.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """No cyclic garbage collection inside the block (nests; restores the collector's
    state on the way out)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
