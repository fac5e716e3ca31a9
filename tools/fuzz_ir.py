"""IR fuzzing: mutated `.mlir` files through forge-opt must end in success or in one
diagnostic line with exit code 1: never a traceback, an internal error or a hang.

Besides edits of numbers, tokens and lines, mutants declare huge dimensions (one tensor
type enlarged everywhere it occurs, so the module often stays valid) and deeply nested
types. Each case runs under a memory cap (`--memory-mb`): an allocation past it is an
`out of memory` finding, not a campaign the kernel kills.

A bad mutant is shrunk by line-deletion delta debugging while it keeps its failure
signature, then written as a lit test that asserts the one-line diagnostic a fixed
forge-opt must give (so it fails until the bug is fixed):

    forge fuzz-ir --cases 2000 --pipeline forge-pipeline [--save-regressions]

`--mutate pipeline` fuzzes the other input a user types: the pass pipeline string.
Valid pipelines (flat and nested MLIR-style, with options) are mutated and run on one
small valid module; every outcome must again be success or one diagnostic line.

    forge fuzz-ir --mutate pipeline --cases 500
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import random
import re
import resource
import signal
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

from forge.devtools.shrink import Budget, ddmin
from forge.support.campaign import Campaign
from forge.support.diagnostics import ForgeError
from forge.tools.forge_opt import main

NUMBER = re.compile(r"-?\d+")
TOKENS = ["%0", "%x", ":", ",", "(", ")", "{", "}", "<", ">", "tensor<4xf32>", "i1", "f16", "?"]
GOOD = ("ok", "diagnostic")
OUT_OF_MEMORY = "out of memory"
ALLOCATION_FAILED = ("MemoryError", "can't allocate memory")
"""How a failed allocation reads in forge-opt's internal error line (Python, torch)."""
MEMORY_MB = 2048
"""The default address space a case may add to the fuzzing process."""
TENSOR_TYPE = re.compile(r"tensor<([^<>]*)>")
"""A tensor type with no type nested in it."""
LARGE_DIMS = ("100000000", "1000000000000", str(2**31), str(2**62), str(2**63 - 1))
NESTING_DEPTHS = (8, 60, 150, 400, 2000)
EXCEPTION_NAME = re.compile(r"(?:internal error: )?([A-Za-z_][\w.]*(?:Error|Exception|Hang)\b)")
LIT_DIRECTIVE = re.compile(r"\b(RUN|CHECK[\w-]*)(:)")
REGRESSIONS = Path("test/forge-opt/regressions")
"""Where --save-regressions copies shrunk cases, relative to the repository root."""


class Hang(BaseException):
    """Raised by the alarm; a BaseException so that forge-opt's own `except Exception`
    (which turns errors into 'internal error' lines) cannot swallow it."""


@dataclass
class FuzzResult:
    counts: Counter[str] = field(default_factory=Counter)
    failures: list[tuple[str, str]] = field(default_factory=list)
    """(outcome, first line of the mutated input's diagnostic) for bad outcomes."""
    regressions: list[Path] = field(default_factory=list)
    """Shrunk lit tests written for the failures (workdir, then the test folder)."""

    @property
    def bad(self) -> int:
        return sum(n for k, n in self.counts.items() if k not in GOOD)

    def summary(self) -> str:
        total = sum(self.counts.values())
        parts = ", ".join(f"{k} {n}" for k, n in sorted(self.counts.items()))
        bad = "tracebacks/internal errors/hangs/out of memory"
        return f"{total} cases: {parts}; {bad}: {self.bad}"


def corpus(root: Path) -> list[str]:
    """The repository's own `.mlir` files (tests, samples, tutorial), not saved regressions:
    they are known failures, and mutating them would only find the same bug again."""
    files = sorted(root.glob("test/**/*.mlir")) + sorted(root.glob("docs/**/*.mlir"))
    return [
        f.read_text() for f in files if "Output" not in f.parts and "regressions" not in f.parts
    ]


def enlarge_dim(text: str, rng: random.Random) -> str:
    """One tensor type given a huge dimension (replaced or added), everywhere it occurs:
    what costs memory proportional to declared sizes shows (a splat constant did)."""
    types = sorted({m.group(0) for m in TENSOR_TYPE.finditer(text)})
    if not types:
        return text
    chosen = rng.choice(types)
    dims = chosen[len("tensor<") : -1].split("x")
    at = rng.randrange(len(dims))  # the last part is the element type: insert before it
    if at < len(dims) - 1 and rng.random() < 0.5:
        dims[at] = rng.choice(LARGE_DIMS)
    else:
        dims.insert(at, rng.choice(LARGE_DIMS))
    return text.replace(chosen, "tensor<" + "x".join(dims) + ">")


def nest_type(text: str, rng: random.Random) -> str:
    """One tensor type wrapped in many levels of `tuple<...>` or parentheses: parsing,
    verifying and printing recurse per level."""
    found = list(TENSOR_TYPE.finditer(text))
    if not found:
        return text
    m = rng.choice(found)
    depth = rng.choice(NESTING_DEPTHS)
    opening, closing = rng.choice((("tuple<", ">"), ("(", ")")))
    nested = opening * depth + m.group(0) + closing * depth
    return text[: m.start()] + nested + text[m.end() :]


def mutate(text: str, rng: random.Random) -> str:
    """One to three edits: a number changed, a line dropped or duplicated, a token
    inserted, characters deleted, a huge dimension declared or a type nested deeply."""
    for _ in range(rng.randint(1, 3)):
        kind = rng.choice(("number", "drop", "dup", "token", "delete", "dim", "nest"))
        lines = text.splitlines(keepends=True)
        if kind == "number" and (matches := list(NUMBER.finditer(text))):
            m = rng.choice(matches)
            value = rng.choice(["0", "1", "-1", "7", "64", "9999999999", str(int(m.group()) + 1)])
            text = text[: m.start()] + value + text[m.end() :]
        elif kind in ("drop", "dup") and lines:
            i = rng.randrange(len(lines))
            lines[i : i + 1] = [] if kind == "drop" else [lines[i], lines[i]]
            text = "".join(lines)
        elif kind == "dim":
            text = enlarge_dim(text, rng)
        elif kind == "nest":
            text = nest_type(text, rng)
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


@contextlib.contextmanager
def memory_limit(megabytes: int | None) -> Iterator[None]:
    """At most `megabytes` more address space while the block runs (RLIMIT_AS above what
    the process maps now): an allocation past it fails at once (MemoryError, or torch's
    allocation error) instead of growing until the kernel kills the process."""
    if not megabytes:
        yield
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    with open("/proc/self/statm") as statm:
        mapped = int(statm.read().split()[0]) * resource.getpagesize()
    limit = mapped + (megabytes << 20)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def run_case(
    path: Path,
    pipeline: str,
    timeout: int,
    memory_mb: int | None = MEMORY_MB,
    flags: Sequence[str] = (),
) -> tuple[str, str]:
    """Run forge-opt in-process on one file with `-p pipeline` and `flags`, within
    `timeout` seconds and `memory_mb` MB more memory; (outcome, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    try:
        with (
            time_limit(timeout),
            memory_limit(memory_mb),
            contextlib.redirect_stdout(out),
            contextlib.redirect_stderr(err),
        ):
            argv = [str(path), "-p", pipeline, *flags, "-o", str(path.with_suffix(".out"))]
            code = main(argv)
    except Hang:
        return "hang", ""
    except MemoryError:
        return OUT_OF_MEMORY, "MemoryError"
    except BaseException as e:
        return "traceback", f"{type(e).__name__}: {e}"
    text = err.getvalue().strip()
    if code == 0:
        return "ok", text
    if code != 1:
        return f"exit {code}", text
    if "internal error" in text and any(sign in text for sign in ALLOCATION_FAILED):
        return OUT_OF_MEMORY, text
    if "internal error" in text:
        return "internal error", text
    if len(text.splitlines()) != 1:
        return "multi-line diagnostic", text
    return "diagnostic", text


@dataclass(frozen=True)
class IrCase:
    """One campaign case: an input text run through one pipeline (plain data, so a Ray
    worker can run it)."""

    name: str
    """The file name diagnostics show, the same wherever the case runs."""
    text: str
    pipeline: str
    timeout: int
    memory_mb: int | None = MEMORY_MB
    flags: tuple[str, ...] = ()
    """More forge-opt flags (the pipeline fuzzer's spellings)."""


def run_ir_case(case: IrCase) -> tuple[str, str]:
    """`run_case` on `case.text` in a private temporary directory; paths in the
    diagnostic read `case.name`, so every worker reports the same message."""
    with tempfile.TemporaryDirectory(prefix="forge-fuzz-ir-") as tmp:
        path = Path(tmp) / case.name
        path.write_text(case.text)
        outcome, message = run_case(path, case.pipeline, case.timeout, case.memory_mb, case.flags)
    return outcome, message.replace(str(path), case.name)


def _crashed(case: IrCase, why: str) -> tuple[str, str]:
    """A worker that died, hung or ran out of memory (Ray's verdicts); anything else is
    a crash."""
    if why.startswith("hang"):
        return "hang", ""
    if why.startswith(OUT_OF_MEMORY):
        return OUT_OF_MEMORY, why
    return "crash", why


def signature(outcome: str, message: str) -> str:
    """The failure class a shrunk case must keep: the outcome, plus the exception type for
    tracebacks and internal errors (so shrinking does not slide onto another bug)."""
    if outcome not in ("traceback", "internal error"):
        return outcome
    match = EXCEPTION_NAME.search(message)
    return f"{outcome}: {match.group(1)}" if match else outcome


def shrink_lines(
    text: str, fails: Callable[[str], bool], max_checks: int = 400, seconds: float = 120.0
) -> str:
    """Line-deletion delta debugging of `text` while `fails` holds (results are cached;
    once the budget is spent every further candidate counts as passing)."""
    budget = Budget(max_checks, seconds)
    seen: dict[str, bool] = {}

    def check(lines: list[str]) -> bool:
        candidate = "".join(lines)
        if candidate not in seen:
            seen[candidate] = budget.spend() and fails(candidate)
        return seen[candidate]

    return "".join(ddmin(text.splitlines(keepends=True), check))


def shrink_case(
    text: str,
    pipeline: str,
    workdir: Path,
    timeout: int,
    seconds: float = 120.0,
    hang_timeout: int = 5,
    memory_mb: int | None = MEMORY_MB,
) -> tuple[str, str, str]:
    """Shrink a bad mutant while its signature holds: (shrunk text, signature, message).
    A hang is shrunk with `hang_timeout` per run: every candidate that still hangs costs
    the whole limit, and a healthy case takes about a second."""
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / "shrinking.mlir"
    limit = timeout

    def outcome_of(candidate: str) -> tuple[str, str]:
        path.write_text(candidate)
        return run_case(path, pipeline, limit, memory_mb)

    outcome, message = outcome_of(text)
    wanted = signature(outcome, message)
    if outcome in GOOD:
        return text, wanted, message
    if outcome == "hang":
        limit = min(timeout, hang_timeout)
    shrunk = shrink_lines(text, lambda c: signature(*outcome_of(c)) == wanted, seconds=seconds)
    outcome, message = outcome_of(shrunk)
    return shrunk, signature(outcome, message), message


def quiet(line: str) -> str:
    """Defuse lit/FileCheck directives in copied text (`RUN:` -> `RUN :`)."""
    return LIT_DIRECTIVE.sub(r"\1 \2", line)


def lit_test(text: str, wanted: str, message: str, pipeline: str) -> str:
    """A lit test for a shrunk case: it passes only once forge-opt answers the input with
    one diagnostic line (no traceback, no internal error) and exit code 1."""
    body = "".join(quiet(line) for line in text.splitlines(keepends=True))
    if body and not body.endswith("\n"):
        body += "\n"
    was = quiet(message.splitlines()[0])[:200] if message else "(no output)"
    if wanted == "hang":
        was = "no output within the time limit"
    # A hang must not hang lit (nor an allocation grow for long): `timeout` kills it, and
    # the empty output fails the CHECK.
    tool = "timeout 60 forge-opt" if wanted in ("hang", OUT_OF_MEMORY) else "forge-opt"
    return (
        f"// Shrunk by forge fuzz-ir: {wanted}.\n"
        f"// Was: {was}\n"
        "// Passes once forge-opt rejects it with one diagnostic line (if the fix makes it\n"
        "// valid input, run `forge-opt %s -p ... -o /dev/null` instead).\n\n"
        f"// RUN: not {tool} %s -p {pipeline} 2>&1 | filecheck %s\n"
        "// CHECK-NOT: Traceback\n"
        "// CHECK: {{^[^ ]+}}: error:\n"
        "// CHECK-NOT: internal error\n"
        "// CHECK-NOT: {{^.}}\n\n"
        f"{body}"
    )


def save_regression(text: str, directory: Path) -> Path:
    """Write a lit test named after its content (the same shrunk case is saved once)."""
    directory.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha1(text.encode()).hexdigest()[:10]
    path = directory / f"fuzz-{digest}.mlir"
    path.write_text(text)
    return path


def fuzz(
    root: Path,
    cases: int,
    seed: int,
    pipeline: str,
    workdir: Path,
    timeout: int = 20,
    shrink: bool = True,
    save_dir: Path | None = None,
    campaign: Campaign | None = None,
    memory_mb: int | None = MEMORY_MB,
) -> FuzzResult:
    """`cases` mutants through forge-opt, each within `timeout` seconds and `memory_mb`
    MB; each bad one is kept, shrunk and written as a lit test under
    `workdir/regressions` (and copied to `save_dir` when given). The mutants are drawn
    here and run by `campaign` (in order, serial by default); failures shrink here, on
    the driver."""
    texts = corpus(root)
    if not texts:
        raise ForgeError(f"no .mlir corpus under {root}")
    rng = random.Random(seed)
    runs = [
        IrCase(f"case{i}.mlir", mutate(rng.choice(texts), rng), pipeline, timeout, memory_mb)
        for i in range(cases)
    ]
    result = FuzzResult()
    workdir.mkdir(parents=True, exist_ok=True)
    outcomes = (campaign or Campaign(timeout=timeout + 30)).map(run_ir_case, runs, _crashed)
    for case, (outcome, message) in zip(runs, outcomes, strict=True):
        result.counts[outcome] += 1
        if outcome in GOOD:
            continue
        kept = workdir / f"failure{len(result.failures)}.mlir"
        kept.write_text(case.text)
        result.failures.append((outcome, f"{kept}: {message.splitlines()[0] if message else ''}"))
        if not shrink:
            continue
        text, wanted, final = shrink_case(
            case.text, pipeline, workdir, timeout, memory_mb=memory_mb
        )
        test = lit_test(text, wanted, final, pipeline)
        result.regressions.append(save_regression(test, workdir / "regressions"))
        if save_dir is not None:
            result.regressions.append(save_regression(test, save_dir))
    return result


# ------------------------------------------------------------ pipeline strings

PIPELINES = (
    "npu-dce,npu-cse",
    "builtin.module(func.func(npu-cse,npu-dce))",
    "builtin.module(func.func(cse,canonicalize))",
    "func.func(npu-fuse-operators{alpha=0.5})",
    "npu-fuse-operators{alpha=0.4},npu-optimize-layout{layout=contiguous}",
    "npu-fold-constants{max_elements=4}",
    "forge-pipeline{iterations=1 alpha=0.5 skip=npu-cse}",
    "npu-assign-precision{precision=int8},npu-place-devices",
    "npu-optimize{iterations=2},npu-assign-vregs,npu-liveness,npu-linear-scan",
    'npu-assign-precision{precision=mixed fp16-weights=w1,"lm.weight"}',
)
"""Valid pipelines the mutants start from."""

PIPELINE_TOKENS = [
    "(", ")", "{", "}", ",", "=", " ", '"', "'", "builtin.module(", "func.func(", "npu-cse",
    "npu-dce", "alpha", "-1", "1e309", "nan", "\\", "\x00", "{{", "))", "=,", "skip=", "é",
]  # fmt: skip

PIPELINE_INPUT = """func.func @f(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> tensor<4x8xf32> {
  %0 = npu.linear %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %1 = npu.relu %0 : tensor<4x8xf32>
  %2 = npu.neg %1 : tensor<4x8xf32>
  %3 = npu.neg %2 : tensor<4x8xf32>
  func.return %3 : tensor<4x8xf32>
}
"""
"""The module every pipeline mutant runs on: small, valid, with something to rewrite."""


def mutate_pipeline(text: str, rng: random.Random) -> str:
    """One to three character-level edits: a token inserted, a span deleted or
    duplicated, or two characters swapped."""
    for _ in range(rng.randint(1, 3)):
        kind = rng.choice(("token", "delete", "dup", "swap"))
        at = rng.randint(0, len(text))
        if kind == "token":
            text = text[:at] + rng.choice(PIPELINE_TOKENS) + text[at:]
        elif kind == "delete" and text:
            text = text[:at] + text[at + rng.randint(1, 6) :]
        elif kind == "dup" and text:
            end = min(len(text), at + rng.randint(1, 12))
            text = text[:end] + text[at:end] + text[end:]
        elif kind == "swap" and len(text) > 1:
            i = rng.randrange(len(text) - 1)
            text = text[:i] + text[i + 1] + text[i] + text[i + 2 :]
    return text


FLAG_SPELLINGS = (
    ("--verify-each",), ("-verify-each",), ("--verify-each=false",), ("-verify-each=true",),
    ("--no-verify-each",), ("-verify-each=maybe",), ("--disable-verify",),
    ("-split-input-file",), ("--mlir-print-op-generic",), ("-print-op-generic",),
    ("-mlir-print-debuginfo",), ("--max-rewrites", "5"), ("-max-rewrites=0",),
    ("-max-iterations", "1"), ("--max-iterations=-1",), ("-p", "npu-dce"),
    ("--pass-pipeline=npu-cse",), ("-pass-pipeline", "builtin.module(npu-dce)"),
    ("--trace-patterns=NoSuchPattern",), ("--no-such-flag",), ("-x",), ("--mlir-",),
    ("-allow-unregistered-dialect",), ("--mlir-elide-elementsattrs-if-larger=2",),
)  # fmt: skip
"""Flags in mlir-opt's and forge-opt's spellings, right and wrong, that print nothing
beyond the result on success (no dumps or tables: a failing pipeline's stderr is then
its one diagnostic line)."""


def mutate_flags(rng: random.Random) -> tuple[str, ...]:
    """Zero to three flags of `FLAG_SPELLINGS`, in random order."""
    picked = rng.sample(FLAG_SPELLINGS, rng.randint(0, 3))
    return tuple(word for flag in picked for word in flag)


def fuzz_pipelines(
    cases: int,
    seed: int,
    workdir: Path,
    timeout: int = 20,
    campaign: Campaign | None = None,
    memory_mb: int | None = MEMORY_MB,
) -> FuzzResult:
    """`cases` mutated pipeline strings on `PIPELINE_INPUT`, each with random flag
    spellings (`mutate_flags`); the bad ones are listed with the pipeline and flags that
    caused them (a command line is its own reproducer)."""
    rng = random.Random(seed)
    result = FuzzResult()
    workdir.mkdir(parents=True, exist_ok=True)
    runs = [
        IrCase(
            "pipeline-input.mlir",
            PIPELINE_INPUT,
            mutate_pipeline(rng.choice(PIPELINES), rng),
            timeout,
            memory_mb,
            mutate_flags(rng),
        )
        for _ in range(cases)
    ]
    outcomes = (campaign or Campaign(timeout=timeout + 30)).map(run_ir_case, runs, _crashed)
    for case, (outcome, message) in zip(runs, outcomes, strict=True):
        result.counts[outcome] += 1
        if outcome not in GOOD:
            first = message.splitlines()[0] if message else ""
            flags = " ".join(case.flags)
            result.failures.append((outcome, f"-p {case.pipeline!r} {flags}: {first}"))
    return result
