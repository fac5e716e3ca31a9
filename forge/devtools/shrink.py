"""Shrinking failures, shared by the fuzzers: delta debugging under a budget."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")


def ddmin(items: Sequence[T], fails: Callable[[list[T]], bool]) -> list[T]:
    """Zeller's delta debugging: a 1-minimal sublist of `items` for which `fails` holds
    (removing any single remaining item makes it pass). `fails(items)` is assumed."""
    current, n = list(items), 2
    while len(current) >= 2:
        chunk = math.ceil(len(current) / n)
        subsets = [current[i : i + chunk] for i in range(0, len(current), chunk)]
        for i in range(len(subsets)):
            complement = [x for j, s in enumerate(subsets) if j != i for x in s]
            if fails(complement):
                current, n = complement, max(n - 1, 2)
                break
        else:
            if n >= len(current):
                break
            n = min(2 * n, len(current))
    return current


class Budget:
    """Stops a shrinker after `max_checks` predicate calls or `seconds` of wall time: a
    hang costs the whole timeout per check, so shrinking must be bounded."""

    def __init__(self, max_checks: int, seconds: float):
        self.left = max_checks
        self.deadline = time.monotonic() + seconds

    def spend(self) -> bool:
        self.left -= 1
        return self.left >= 0 and time.monotonic() < self.deadline
