"""Numeric command-line flags, checked where argparse reads them.

A flag's type is one of the validators below, so a value out of range is the parser's
one-line error naming the flag and the range (`argument --seed: expected an integer
from 0 to 4294967295, got 99999999999999999999999`), never an overflow deep inside torch
or a sleep of 10^20 seconds. One definition per kind of value: counts, sizes, seeds,
threads, seconds, positive reals.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

MAX_SEED = 2**32 - 1
"""Seeds go to torch, NumPy and `random`; NumPy's are 32-bit."""

MAX_COUNT = 2**31 - 1
"""Counts (tokens, runs, cases, positions) beyond this are no plausible request
and overflow C integers in torch and OpenVINO."""

MAX_THREADS = 1024
"""Each thread is a real one (torch, OpenMP, OpenVINO start them up front); no host Forge
runs on has more cores than this."""

MAX_SECONDS = 7 * 24 * 3600
"""A timeout longer than a week is no timeout (and `signal.alarm` takes 32 bits)."""


def integer(low: int, high: int) -> Callable[[str], int]:
    """An argparse type: an integer from `low` to `high`."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or not low <= value <= high:
            raise argparse.ArgumentTypeError(
                f"expected an integer from {low} to {high}, got '{text}'"
            )
        return value

    return parse


def positive_real(text: str) -> float:
    """An argparse type: a finite number above 0 (no nan, no inf)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a finite number above 0, got '{text}'")
    return value


seed = integer(0, MAX_SEED)
count = integer(1, MAX_COUNT)
"""At least one: runs, tokens, positions, processes."""
size = integer(0, MAX_COUNT)
"""Zero allowed: a campaign of no cases; an empty prompt, which the command words itself."""
threads = integer(1, MAX_THREADS)
seconds = integer(1, MAX_SECONDS)
