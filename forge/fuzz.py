"""IR fuzzing: mutated `.mlir` files through forge-opt must end in success or in one
diagnostic line with exit code 1: never a traceback, an internal error or a hang.

    forge fuzz-ir --cases 2000 --pipeline forge-pipeline
"""

from __future__ import annotations

import contextlib
import io
import random
import re
import signal
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

from forge.diagnostics import ForgeError

NUMBER = re.compile(r"-?\d+")
TOKENS = ["%0", "%x", ":", ",", "(", ")", "{", "}", "<", ">", "tensor<4xf32>", "i1", "f16", "?"]


class Hang(Exception):
    pass


@dataclass
class FuzzResult:
    counts: Counter[str] = field(default_factory=Counter)
    failures: list[tuple[str, str]] = field(default_factory=list)
    """(outcome, first line of the mutated input's diagnostic) for bad outcomes."""

    @property
    def bad(self) -> int:
        return sum(n for k, n in self.counts.items() if k not in ("ok", "diagnostic"))

    def summary(self) -> str:
        total = sum(self.counts.values())
        parts = ", ".join(f"{k} {n}" for k, n in sorted(self.counts.items()))
        return f"{total} cases: {parts}; tracebacks/internal errors/hangs: {self.bad}"


def corpus(root: Path) -> list[str]:
    """The repository's own `.mlir` files (tests, samples, tutorial)."""
    files = sorted(root.glob("test/**/*.mlir")) + sorted(root.glob("docs/**/*.mlir"))
    return [f.read_text() for f in files if "Output" not in f.parts]


def mutate(text: str, rng: random.Random) -> str:
    """One to three edits: a number changed, a line dropped or duplicated, a token
    inserted, or characters deleted."""
    for _ in range(rng.randint(1, 3)):
        kind = rng.choice(("number", "drop", "dup", "token", "delete"))
        lines = text.splitlines(keepends=True)
        if kind == "number" and (matches := list(NUMBER.finditer(text))):
            m = rng.choice(matches)
            value = rng.choice(["0", "1", "-1", "7", "64", "9999999999", str(int(m.group()) + 1)])
            text = text[: m.start()] + value + text[m.end() :]
        elif kind in ("drop", "dup") and lines:
            i = rng.randrange(len(lines))
            lines[i : i + 1] = [] if kind == "drop" else [lines[i], lines[i]]
            text = "".join(lines)
        elif kind == "token":
            pos = rng.randrange(len(text) + 1)
            text = text[:pos] + rng.choice(TOKENS) + text[pos:]
        elif text:
            pos = rng.randrange(len(text))
            text = text[:pos] + text[pos + rng.randint(1, 8) :]
    return text


@contextlib.contextmanager
def time_limit(seconds: int) -> Iterator[None]:
    def on_alarm(signum: int, frame: FrameType | None) -> None:
        raise Hang()

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def run_case(path: Path, pipeline: str, timeout: int) -> tuple[str, str]:
    """Run forge-opt in-process on one file; (outcome, stderr)."""
    from forge.tools.forge_opt import main

    out, err = io.StringIO(), io.StringIO()
    try:
        with time_limit(timeout), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main([str(path), "-p", pipeline, "-o", str(path.with_suffix(".out"))])
    except Hang:
        return "hang", ""
    except BaseException as e:
        return "traceback", f"{type(e).__name__}: {e}"
    text = err.getvalue().strip()
    if code == 0:
        return "ok", text
    if code != 1:
        return f"exit {code}", text
    if "internal error" in text:
        return "internal error", text
    if len(text.splitlines()) != 1:
        return "multi-line diagnostic", text
    return "diagnostic", text


def fuzz(
    root: Path, cases: int, seed: int, pipeline: str, workdir: Path, timeout: int = 20
) -> FuzzResult:
    texts = corpus(root)
    if not texts:
        raise ForgeError(f"no .mlir corpus under {root}")
    rng = random.Random(seed)
    result = FuzzResult()
    workdir.mkdir(parents=True, exist_ok=True)
    for i in range(cases):
        path = workdir / f"case{i}.mlir"
        path.write_text(mutate(rng.choice(texts), rng))
        outcome, message = run_case(path, pipeline, timeout)
        result.counts[outcome] += 1
        if outcome not in ("ok", "diagnostic"):
            kept = workdir / f"failure{len(result.failures)}.mlir"
            path.replace(kept)
            result.failures.append(
                (outcome, f"{kept}: {message.splitlines()[0] if message else ''}")
            )
    return result
