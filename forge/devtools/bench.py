"""`forge bench`: Forge against eager PyTorch, torch.compile, OpenVINO and ONNX Runtime.

Every backend runs in a child process of one `forge bench` run, so none of them
shares a thread pool, an OpenVINO core or an allocator with another. Each child builds
the same seeded model and feeds the same prompt. The children compile one after the
other (nothing else runs meanwhile), then stay alive while the parent times them in
interleaved rounds (A B C, B C A, ...): on a noisy machine a slow spell then costs
every backend alike. Measured:

* compile time from the model object to a ready executable (tracing/export included:
  torch.export for Forge, `convert_model` for OpenVINO, `torch.onnx.export` for
  ONNX Runtime, the first call for torch.compile), and to the first output; each
  backend's library (Forge's modules, `openvino`, `onnxruntime`: a backend's `extra`)
  is imported before the clock starts, what the compile imports on its way after;
* latency over `runs` timed calls after the warm-ups (one before and one after the
  resident size is taken), each batch after a short pause (`SETTLE_SECONDS`): mean,
  P50 and P99;
* the logits' max-abs difference and KL divergence against eager, at fp32.

The peers run at their newest releases: `openvino` and `onnxruntime` run in the bench
venv (`scripts/bench.sh` builds it: the newest openvino, onnxruntime and onnxscript,
torch and transformers at Forge's versions, Forge without its dependencies), since
their newest pins may run ahead of Forge's (NNFactory is built on openvino 2026.4.1,
`scripts/build_nnfactory.sh`). A missing venv or extra is reported as skipped, not as
a failure; every table names each peer's version, as its child reports it.

Memory: each child reports its peak RSS after compiling and after timing, and its
resident size once ready. Before starting any, the parent estimates each backend's
resident size and compile peak (the weights' bytes times a per-backend factor measured
on GPT-2, plus a base) and compares them with MemAvailable: backends that fit together
are compiled and timed interleaved; where they do not, they are timed in groups one
after another (each group started, compiled, timed and stopped before the next), which
the report says in one line.

A backend is one `build` function (in the child: compile, return how to run once) and
one `register(Backend(...))` at module level; `--backends`, the run order, the report's
tables and `forge report`'s plot all read the registry. A backend registered outside
this module is found by the child importing the module that registers it.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import importlib
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from forge.devtools.children import Child
from forge.devtools.numerics import agreement
from forge.frontend import models
from forge.frontend.checkpoint import is_checkpoint_dir
from forge.frontend.loading import Loaded, load_model
from forge.runtime.compile import compile_model
from forge.support.diagnostics import ForgeError
from forge.support.host import cpu_description


@dataclass
class BackendResult:
    backend: str
    ready_seconds: float | None = None
    """Model object -> ready executable (None: nothing to compile, as for eager)."""
    first_output_seconds: float | None = None
    latency_ms: dict[str, float] = field(default_factory=dict)
    """mean, p50, p99 over the timed runs."""
    max_abs: float = 0.0
    kl: float = 0.0
    top1: float = 1.0
    detail: str = ""
    skipped: str = ""
    """Why the backend did not run (missing extra, failure); empty when it ran."""
    compile_samples: list[float] = field(default_factory=list)
    """`ready_seconds` of every repeat (fresh processes); `ready_seconds` is their median."""
    version: str = ""
    """The backend's library and version, as its child imported it ("OpenVINO 2026.4.1")."""
    round_ms: list[float] = field(default_factory=list)
    """The mean of each round's batch of timed calls, in round order."""
    process_ms: list[float] = field(default_factory=list)
    """The mean of its rounds in each fresh process it was timed in (`compile_repeats`)."""
    group: int = 0
    """The memory group it was timed in: backends of one group alternated round by round."""
    peak_rss_compile: int = 0
    """The child's peak RSS in bytes once compiled, checked and warmed up."""
    rss_ready: int = 0
    """Its resident size then, after dropping what the compile no longer needs."""
    peak_rss: int = 0
    """Its peak RSS after the timed runs (the whole child's life)."""
    estimate: tuple[int, int] = (0, 0)
    """The parent's estimate before starting it: (resident once ready, compile peak)."""


# -------------------------------------------------------------------------- backends

AHEAD = "ahead"
"""`build` compiles: the backend is ready when `build` returns."""
AT_FIRST_CALL = "first-call"
"""The first `run()` compiles (torch.compile): ready at the first output."""
NEVER = "never"
"""Nothing to compile (eager): no compile times at all."""


@dataclass(frozen=True)
class Workload:
    """What a backend's `build` gets in its child process: the seeded model and the
    prompt every backend is fed."""

    loaded: Loaded
    module: LogitsOnly
    """`loaded.model` returning just the logits, in eval mode."""
    ids: torch.Tensor
    mask: torch.Tensor
    threads: int


@dataclass(frozen=True)
class Built:
    """A compiled backend: `run()` computes the logits once."""

    run: Callable[[], Any]
    detail: str = ""
    """One line for the report (segments, where the compile time went)."""
    version: str = ""
    """The library and version that ran ("OpenVINO 2026.4.1"); fills `{version}` in labels."""


@dataclass(frozen=True)
class Footprint:
    """A backend's memory as `base + factor x weight bytes`, measured on GPT-2 (fp32,
    seq 128): `resident` once compiled and ready, `peak` while compiling."""

    base: int
    resident: float
    peak: float

    def estimate(self, weight_bytes: int) -> tuple[int, int]:
        """(resident once ready, compile peak) in bytes for a model of `weight_bytes`."""
        resident = self.base + int(self.resident * weight_bytes)
        return resident, max(resident, self.base + int(self.peak * weight_bytes))


MIB = 1 << 20
GIB = 1 << 30
DEFAULT_FOOTPRINT = Footprint(1 * GIB, 2.0, 3.0)
"""For a backend registered without one: cautious (two copies resident, three at peak)."""


@dataclass(frozen=True)
class Backend:
    """One thing `forge bench` can measure; `register` it to add it to every list."""

    name: str
    """What `--backends` and the JSON call it."""
    label: str
    """What the report's tables call it."""
    build: Callable[[Workload], Built]
    """Runs in the child process, timed as the compile: build the executable from
    `workload.module` (or `workload.loaded`) and say how to run it once. Must be a
    module-level function of an importable module (or script): the child imports
    that module to find the backend."""
    compiles: str = AHEAD
    """When it compiles: `AHEAD`, `AT_FIRST_CALL` or `NEVER`."""
    extra: str | None = None
    """A module of the optional `bench` extra it needs; missing: skipped, not failed.
    The child imports it before the compile's clock starts."""
    scratch_env: str | None = None
    """An environment variable the child gets, naming a fresh directory removed with it
    (a compile cache that must not carry over from one compile to the next)."""
    venv: str = ""
    """"": the child runs with this python (Forge's venv); `BENCH_VENV`: with the bench
    venv's, where the peers are at their newest (`scripts/bench.sh` builds it)."""
    memory: Footprint = DEFAULT_FOOTPRINT
    """What `forge bench` expects the child to take, to decide what runs together."""


REGISTRY: dict[str, Backend] = {}
"""Name -> backend, in the order `forge bench` runs and reports them."""


def register(backend: Backend) -> Backend:
    """Add `backend` to `forge bench` (its `--backends`, run order, tables and plot)."""
    if backend.name in REGISTRY:
        raise ForgeError(f"bench backend '{backend.name}' is already registered")
    if backend.compiles not in (AHEAD, AT_FIRST_CALL, NEVER):
        raise ForgeError(f"bench backend '{backend.name}': unknown compiles={backend.compiles!r}")
    REGISTRY[backend.name] = backend
    return backend


def backend_names() -> tuple[str, ...]:
    """Every registered backend, in the order `forge bench` runs them."""
    return tuple(REGISTRY)


BENCH_VENV = "bench"


def label(name: str, version: str = "") -> str:
    """The backend's name in the tables; `{version}` in it becomes the version its
    child reported (just the number: "OpenVINO 2026.4.1" -> "2026.4.1")."""
    backend = REGISTRY.get(name)
    text = backend.label if backend is not None else name
    number = version.rsplit(" ", 1)[-1]
    return text.replace("{version}", number) if number else text.replace(" {version}", "")


# ----------------------------------------------------------------------------- child


class LogitsOnly(torch.nn.Module):
    """`model(input_ids, attention_mask).logits` as a plain module (OpenVINO's tracer
    and the ONNX exporter want tensors out, not a ModelOutput with a cache)."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False)
        return out.logits


def timed_runs(run: Callable[[], Any], runs: int) -> list[float]:
    """Wall time of each of `runs` calls of `run()`, in milliseconds."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        run()
        times.append((time.perf_counter() - start) * 1e3)
    return times


def summarize(times: Sequence[float]) -> dict[str, float]:
    return {
        "mean": float(np.mean(times)),
        "p50": float(np.percentile(times, 50)),
        "p99": float(np.percentile(times, 99)),
    }


def _to_torch(x: Any) -> torch.Tensor:
    return torch.from_numpy(np.asarray(x)) if not isinstance(x, torch.Tensor) else x


def prepare(
    name: str, model_name: str, tiny: bool, seq: int, threads: int
) -> tuple[BackendResult, Callable[[], Any]]:
    """Compile one backend in this process, check its first output against eager, warm
    it up; returns its result (latency still empty) and a function running it once."""
    backend = REGISTRY.get(name)
    if backend is None:
        raise ForgeError(f"unknown backend '{name}' (known: {', '.join(REGISTRY)})")
    torch.set_num_threads(threads)
    loaded = load_model(model_name, tiny, seq)
    ids = loaded.args[0]
    mask = loaded.kwargs["attention_mask"]
    module = LogitsOnly(loaded.model).eval()
    with torch.no_grad():
        expected = module(ids, mask)
    result = BackendResult(name)
    if backend.extra is not None:
        # The backend's library is imported before the clock, as Forge's own modules
        # are (this module imports them): the clock times the compile, not the import
        # (OpenVINO's takes about 0.1 s, ONNX Runtime's 0.06 s on an AMD EPYC Zen 3).
        importlib.import_module(backend.extra)

    start = time.perf_counter()
    built = backend.build(Workload(loaded, module, ids, mask, threads))
    if backend.compiles == AHEAD:
        result.ready_seconds = time.perf_counter() - start
    result.detail = built.detail
    result.version = built.version
    actual = built.run()
    first = time.perf_counter() - start
    if backend.compiles != NEVER:
        result.first_output_seconds = first
    if backend.compiles == AT_FIRST_CALL:
        result.ready_seconds = first
    built.run()  # warm-up
    agree = agreement(expected, actual)
    result.max_abs, result.kl, result.top1 = agree.max_abs, agree.kl, agree.top1
    return result, built.run


# ------------------------------------------------------------------ built-in backends


def _forge(w: Workload, granularity: str) -> Built:
    executor, report = compile_model(
        w.loaded.model, w.loaded.args, w.loaded.kwargs, "fp32", granularity
    )
    inputs = [w.ids if n == "input_ids" else w.mask for n in executor.input_names]
    detail = (
        f"{len(executor.segments)} segment(s), export {report.export_seconds:.2f} s, "
        f"NNFactory {report.nnfactory_compile_seconds:.2f} s"
    )
    return Built(lambda: executor(*inputs)[0], detail)


def build_forge(w: Workload) -> Built:
    return _forge(w, "segment")


def build_forge_op(w: Workload) -> Built:
    return _forge(w, "op")


def build_eager(w: Workload) -> Built:
    def run() -> Any:
        with torch.no_grad():
            return w.module(w.ids, w.mask)

    return Built(run)


def build_inductor(w: Workload) -> Built:
    compiled = torch.compile(w.module, backend="inductor")

    def run() -> Any:
        with torch.no_grad():
            return compiled(w.ids, w.mask)

    return Built(run)


def build_openvino(w: Workload) -> Built:
    # Imported in the child that runs it: the optional `bench` extra.
    import openvino as ov

    with torch.no_grad():
        ov_model = ov.convert_model(
            w.module, example_input={"input_ids": w.ids, "attention_mask": w.mask}
        )
    request = ov.Core().compile_model(
        ov_model,
        "CPU",
        {
            "PERFORMANCE_HINT": "LATENCY",
            "INFERENCE_NUM_THREADS": w.threads,
            "INFERENCE_PRECISION_HINT": "f32",
        },
    )
    feed = {"input_ids": w.ids.numpy(), "attention_mask": w.mask.numpy()}
    version = f"OpenVINO {ov.__version__.split('-')[0]}"
    return Built(lambda: _to_torch(request(feed)[0]), version=version)


def build_onnxruntime(w: Workload) -> Built:
    # Imported in the child that runs it: the optional `bench` extra.
    import onnxruntime as ort

    path = Path(tempfile.mkdtemp(prefix="forge-bench-")) / "model.onnx"
    with torch.no_grad():
        torch.onnx.export(
            w.module, (w.ids, w.mask), str(path), input_names=["input_ids", "attention_mask"]
        )
    options = ort.SessionOptions()
    options.intra_op_num_threads = w.threads
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    shutil.rmtree(path.parent, ignore_errors=True)  # the session holds the model
    feed = {"input_ids": w.ids.numpy(), "attention_mask": w.mask.numpy()}
    version = f"ONNX Runtime {ort.__version__}"
    return Built(lambda: _to_torch(session.run(None, feed)[0]), version=version)


FOOTPRINTS: dict[str, Footprint] = {
    # Measured here on GPT-2 (475 MiB of fp32 weights, seq 128; `forge bench gpt2`):
    # base = the child's RSS on the tiny model, factors = (RSS - base) / weights,
    # rounded up. Resident after the compile's garbage is released (`release_memory`).
    "forge": Footprint(450 * MIB, 2.2, 2.9),
    "forge-op": Footprint(450 * MIB, 2.5, 3.3),
    "eager": Footprint(400 * MIB, 1.1, 1.8),
    "inductor": Footprint(500 * MIB, 1.2, 1.9),
    "openvino": Footprint(600 * MIB, 2.3, 4.1),
    "onnxruntime": Footprint(600 * MIB, 2.5, 3.1),
}

register(Backend("forge", "Forge (segments)", build_forge, memory=FOOTPRINTS["forge"]))
register(
    Backend("forge-op", "Forge (granularity=op)", build_forge_op, memory=FOOTPRINTS["forge-op"])
)
register(Backend("eager", "torch eager", build_eager, compiles=NEVER, memory=FOOTPRINTS["eager"]))
register(
    Backend(
        "inductor",
        "torch.compile (inductor)",
        build_inductor,
        compiles=AT_FIRST_CALL,
        memory=FOOTPRINTS["inductor"],
        # A fresh cache per process: inductor's on-disk cache would otherwise turn
        # every compile after the first into a cache hit.
        scratch_env="TORCHINDUCTOR_CACHE_DIR",
    )
)
register(
    Backend(
        "openvino",
        "OpenVINO {version} CPU",
        build_openvino,
        extra="openvino",
        venv=BENCH_VENV,
        memory=FOOTPRINTS["openvino"],
    )
)
register(
    Backend(
        "onnxruntime",
        "ONNX Runtime {version} CPU",
        build_onnxruntime,
        extra="onnxruntime",
        venv=BENCH_VENV,
        memory=FOOTPRINTS["onnxruntime"],
    )
)


def round_ratios(mine: Sequence[float], forge: Sequence[float]) -> list[float]:
    """Each round's figure over Forge's in the same round (rounds alternated the two)."""
    return [a / b for a, b in zip(mine, forge, strict=False) if b > 0]


def spread(ratios: Sequence[float]) -> str:
    """ "median x (min-max)" of the rounds' ratios."""
    return f"{statistics.median(ratios):.3f}x ({min(ratios):.3f}-{max(ratios):.3f})"


# ---------------------------------------------------------------------------- memory

FIT_FRACTION = 0.8
"""Of MemAvailable, what the children may plan to take together: the rest is headroom
for the estimates' error, the parent and whatever else the machine runs meanwhile."""


def mem_available(meminfo: str | None = None) -> int | None:
    """MemAvailable in bytes, from `meminfo` (the text of /proc/meminfo, read when None);
    None where there is no such line (not Linux)."""
    if meminfo is None:
        try:
            meminfo = Path("/proc/meminfo").read_text()
        except OSError:
            return None
    for line in meminfo.splitlines():
        key, _, value = line.partition(":")
        if key == "MemAvailable":
            return int(value.split()[0]) * 1024
    return None


def weight_bytes(model: str, tiny: bool) -> int | None:
    """The bytes of the model's weights, without allocating them: a built-in model is
    built on the meta device, a checkpoint directory sums its weight files; None for
    a `file.py:factory` (only running it would tell)."""
    if model in models.SPECS:
        meta = models.build_model(model, tiny=tiny, device="meta")
        tensors = {id(t): t for t in (*meta.parameters(), *meta.buffers())}
        return sum(t.numel() * t.element_size() for t in tensors.values())
    if is_checkpoint_dir(model):
        files = [*Path(model).glob("*.safetensors"), *Path(model).glob("*.bin")]
        return sum(f.stat().st_size for f in files) or None
    return None


def fits(group: Sequence[str], estimates: dict[str, tuple[int, int]], budget: int) -> bool:
    """Whether `group`'s children can live together: while one of them compiles (at its
    peak) the others sit at their resident size; the worst such moment within budget."""
    resident = sum(estimates[b][0] for b in group)
    return all(resident - estimates[b][0] + estimates[b][1] <= budget for b in group)


def plan_groups(
    backends: Sequence[str], estimates: dict[str, tuple[int, int]], budget: int
) -> list[list[str]]:
    """`backends` in order, cut into groups that each fit `budget` (bytes): a group's
    children are compiled and timed interleaved, the groups one after another. A
    backend that does not fit even alone gets a group of its own (and may still fit:
    the estimates are cautious)."""
    groups: list[list[str]] = []
    for backend in backends:
        if groups and fits([*groups[-1], backend], estimates, budget):
            groups[-1].append(backend)
        else:
            groups.append([backend])
    return groups


def sequence_note(
    groups: Sequence[Sequence[str]],
    estimates: dict[str, tuple[int, int]],
    available: int,
    budget: int,
) -> str:
    """One line: why the backends are timed in groups one after another."""
    together = sum(estimates[b][0] for g in groups for b in g)
    peak = max(estimates[b][1] - estimates[b][0] for g in groups for b in g)
    shown = " then ".join("[" + ", ".join(g) + "]" for g in groups)
    return (
        f"memory: all together would take about {(together + peak) / GIB:.1f} GiB (resident "
        f"sizes plus the largest compile peak), more than {budget / GIB:.1f} GiB "
        f"({FIT_FRACTION:.0%} of MemAvailable {available / GIB:.1f} GiB), so the backends "
        f"are timed in {len(groups)} groups one after another: {shown} (each started, "
        f"compiled, timed and stopped before the next; ratios across groups span time)"
    )


def memory_now() -> tuple[int, int]:
    """This process's (resident, peak resident) bytes: VmRSS and VmHWM."""
    fields: dict[str, int] = {}
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                fields[key] = int(value.split()[0]) * 1024
    except OSError:
        pass
    if "VmHWM" not in fields:
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        return fields.get("VmRSS", peak), peak
    return fields.get("VmRSS", fields["VmHWM"]), fields["VmHWM"]


def release_memory() -> None:
    """Free what the compile left behind (the eager model where the backend holds its own
    weights, tracing's garbage) and hand glibc's free pages back to the system, so the
    resident size reported is what the ready backend keeps."""
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):  # not glibc: nothing to trim
        ctypes.CDLL("libc.so.6").malloc_trim(0)


# ---------------------------------------------------------------------------- parent


@dataclass
class BenchReport:
    model: str
    seq: int
    threads: int
    runs: int
    tiny: bool
    results: dict[str, BackendResult]
    notes: list[str] = field(default_factory=list)
    """One line each: how the run was arranged (groups timed one after another)."""
    weight_bytes: int | None = None

    def ran(self, backend: str) -> BackendResult | None:
        result = self.results.get(backend)
        return result if result is not None and not result.skipped else None

    def paired_lines(self) -> list[str]:
        """Per backend timed in Forge's group: its rounds' batch means over Forge's. The
        means of the table pool every round; a host whose speed drifts by a few percent
        from minute to minute moves both sides of a round alike, so the rounds' ratios
        show how far apart two backends are and how often each was faster."""
        forge = self.ran("forge")
        if forge is None or not forge.round_ms:
            return []
        lines = []
        for name, r in self.results.items():
            if name == "forge" or self.ran(name) is None or r.group != forge.group:
                continue
            ratios = round_ratios(r.round_ms, forge.round_ms)
            if not ratios:
                continue
            faster = sum(1 for ratio in ratios if ratio > 1)
            lines.append(
                f"  {self.label(name):<26}{spread(ratios):>26}, Forge faster in "
                f"{faster}/{len(ratios)}"
            )
        return lines

    def label(self, backend: str) -> str:
        result = self.results.get(backend)
        return label(backend, result.version if result is not None else "")

    def to_json(self) -> dict[str, Any]:
        """The schema `forge report --bench` reads."""
        ran = {name: r for name, r in self.results.items() if not r.skipped}
        return {
            "model": self.model,
            "seq": self.seq,
            "threads": self.threads,
            "runs": self.runs,
            "tiny": self.tiny,
            "compile_seconds": {
                name: {"ready": r.ready_seconds, "first_output": r.first_output_seconds}
                for name, r in ran.items()
                if r.ready_seconds is not None
            },
            "latency_ms": {name: r.latency_ms for name, r in ran.items()},
            "latency_round_ms": {name: r.round_ms for name, r in ran.items()},
            "latency_process_ms": {name: r.process_ms for name, r in ran.items()},
            "numerics": {
                name: {"max_abs": r.max_abs, "kl": r.kl, "top1": r.top1} for name, r in ran.items()
            },
            "memory_bytes": {
                name: {
                    "peak_compile": r.peak_rss_compile,
                    "resident_ready": r.rss_ready,
                    "peak": r.peak_rss,
                    "estimate_resident": r.estimate[0],
                    "estimate_peak": r.estimate[1],
                }
                for name, r in ran.items()
            },
            "weight_bytes": self.weight_bytes,
            "versions": {name: r.version for name, r in ran.items() if r.version},
            "notes": self.notes,
            "skipped": {name: r.skipped for name, r in self.results.items() if r.skipped},
            "results": {name: asdict(r) for name, r in self.results.items()},
        }

    def format(self) -> str:
        lines = [
            f"forge bench: {self.model}{' (tiny)' if self.tiny else ''}, batch 1, seq "
            f"{self.seq}, {self.threads} thread(s), {self.runs} timed runs each, fp32",
            f"torch {torch.__version__.split('+')[0]}; {cpu_description()}",
        ]
        lines += self.notes
        lines += [
            "",
            "compile: model object -> ready executable, median over fresh processes",
            f"  {'':<26}{'ready':>9}    {'1st output':>10}  {'ready, each run':<24}  vs Forge",
        ]
        forge = self.ran("forge")
        for name, r in self.results.items():
            if r.skipped or r.ready_seconds is None:
                continue
            ratio = ""
            if forge is not None and forge.ready_seconds and name != "forge":
                ratio = f"{r.ready_seconds / forge.ready_seconds:6.2f}x"
            samples = " ".join(f"{x:.2f}" for x in r.compile_samples)
            lines.append(
                f"  {self.label(name):<26}{r.ready_seconds:>8.2f} s  "
                f"{r.first_output_seconds or 0.0:>8.2f} s   {samples:<24}  {ratio}"
            )
        lines += ["", "latency (ms)                    mean      P50      P99  P99/P50   vs Forge"]
        for name, r in self.results.items():
            if r.skipped:
                continue
            lat = r.latency_ms
            versus = ""
            if forge is not None and name != "forge":
                versus = f"{lat['mean'] / forge.latency_ms['mean']:>9.2f}x"
            lines.append(
                f"  {self.label(name):<26}{lat['mean']:>8.2f} {lat['p50']:>8.2f} {lat['p99']:>8.2f}"
                f" {lat['p99'] / lat['p50']:>8.2f} {versus}"
            )
        paired = self.paired_lines()
        if paired:
            lines += [
                "per round (mean of each round's batch, row / Forge: median, min-max; rounds "
                "where Forge was faster):",
                *paired,
            ]
        processes = [
            f"  {self.label(n):<26}" + " / ".join(f"{ms:.2f}" for ms in r.process_ms)
            for n, r in self.results.items()
            if not r.skipped and len(r.process_ms) > 1
        ]
        if processes:
            lines += ["per process (mean of the rounds each fresh process was timed in, ms):"]
            lines += processes
        lines += self._memory_lines()
        lines += ["", "numerics vs eager (logits)      max-abs          KL    top-1"]
        for name, r in self.results.items():
            if r.skipped or name == "eager":
                continue
            lines.append(
                f"  {self.label(name):<26}{r.max_abs:>11.3e} {r.kl:>11.3e} {r.top1 * 100:>7.2f}%"
            )
        details = [(n, r.detail) for n, r in self.results.items() if r.detail and not r.skipped]
        if details:
            lines.append("")
            lines += [f"  {self.label(n)}: {d}" for n, d in details]
        skipped = [(n, r.skipped) for n, r in self.results.items() if r.skipped]
        if skipped:
            lines.append("")
            lines += [f"skipped {self.label(n)}: {why}" for n, why in skipped]
        return "\n".join(lines)

    def _memory_lines(self) -> list[str]:
        """Peak RSS per child (compile, whole life), resident once ready, the estimate."""
        ran = [(n, r) for n, r in self.results.items() if not r.skipped and r.peak_rss]
        if not ran:
            return []
        weights = f", weights {self.weight_bytes / MIB:.0f}" if self.weight_bytes else ""
        lines = [
            "",
            f"memory (MiB{weights})".ljust(28) + "peak RSS  resident  peak RSS     estimated",
            f"  {'':<26}{'compiled':>8} {'ready':>9} {'timed':>9}  {'ready / peak':>12}",
        ]
        for name, r in ran:
            guess = f"{r.estimate[0] / MIB:>6.0f} / {r.estimate[1] / MIB:.0f}"
            row = (
                f"  {self.label(name):<26}{r.peak_rss_compile / MIB:>8.0f} "
                f"{r.rss_ready / MIB:>9.0f} {r.peak_rss / MIB:>9.0f}  "
            )
            lines.append(row + guess if r.estimate[1] else row.rstrip())
        return lines


def default_bench_python() -> Path:
    """`$FORGE_BENCH_PYTHON`, else the venv `scripts/bench.sh` builds."""
    given = os.environ.get("FORGE_BENCH_PYTHON")
    if given:
        return Path(given)
    return Path(__file__).resolve().parents[2] / "build" / "venv-bench" / "bin" / "python"


def _python_of(backend: str, bench_python: Path) -> str:
    return str(bench_python) if REGISTRY[backend].venv == BENCH_VENV else sys.executable


def _available(backend: str, bench_python: Path) -> str:
    """Empty when `backend` can run here, else why not."""
    entry = REGISTRY[backend]
    module = entry.extra
    if entry.venv == BENCH_VENV:
        if not bench_python.exists():
            return f"no bench venv at {bench_python} (bash scripts/bench.sh --setup-only builds it)"
        if module is None:
            return ""
        probe = (
            f"import importlib.util, sys; sys.exit(importlib.util.find_spec({module!r}) is None)"
        )
        done = subprocess.run(
            [str(bench_python), "-I", "-c", probe], env=foreign_env({}), check=False
        )
        return "" if done.returncode == 0 else f"'{module}' is not installed in {bench_python}"
    if module is not None and importlib.util.find_spec(module) is None:
        return f"'{module}' is not installed (pip install -e '.[bench]')"
    return ""


def run_bench(
    model: str,
    backends: Sequence[str],
    seq: int = 128,
    runs: int = 40,
    threads: int | None = None,
    tiny: bool = False,
    timeout: float = 1800.0,
    progress: Callable[[str], None] | None = None,
    rounds: int = 10,
    compile_repeats: int = 3,
    bench_python: Path | None = None,
    available: int | None = None,
) -> BenchReport:
    """Compile `backends` one after the other, each in its own child process, then time
    them in `rounds` interleaved rounds, so that a slow spell of a noisy machine hits
    every backend alike instead of whichever ran during it. Compilation is repeated
    `compile_repeats` times, interleaved the same way, in fresh processes; the report
    gives the median. Where the children would not fit in memory together
    (`available` bytes, default MemAvailable), groups that fit are timed one after
    another (`plan_groups`)."""
    unknown = [b for b in backends if b not in REGISTRY]
    if unknown:
        known = ", ".join(REGISTRY)
        raise ForgeError(f"unknown backend(s): {', '.join(unknown)} (known: {known})")
    if runs < 1:
        raise ForgeError("--runs must be at least 1")
    if compile_repeats < 1:
        raise ForgeError("--compile-repeats must be at least 1")
    threads = threads or os.cpu_count() or 1
    python = bench_python or default_bench_python()
    results: dict[str, BackendResult] = {}
    wanted = list(dict.fromkeys(backends))
    for backend in wanted:
        why = _available(backend, python)
        if why:
            results[backend] = BackendResult(backend, skipped=why)
    runnable = [b for b in wanted if b not in results]
    report = BenchReport(model, seq, threads, runs, tiny, results)
    groups = [runnable]
    try:
        report.weight_bytes = weight_bytes(model, tiny)
    except ForgeError:
        report.weight_bytes = None  # an unknown model: its children say so, one by one
    available = available if available is not None else mem_available()
    estimates = {}
    if report.weight_bytes is not None and runnable:
        estimates = {b: REGISTRY[b].memory.estimate(report.weight_bytes) for b in runnable}
        if available is not None:
            budget = int(available * FIT_FRACTION)
            groups = plan_groups(runnable, estimates, budget)
            if len(groups) > 1:
                report.notes.append(sequence_note(groups, estimates, available, budget))
                if progress is not None:
                    progress(report.notes[-1])
    if any(REGISTRY[b].venv != BENCH_VENV and b.startswith("forge") for b in runnable):
        report.notes.append(host_profile_note())
        if progress is not None:
            progress(report.notes[-1])
    for index, group in enumerate(groups):
        _bench_group(group, report, estimates, python, timeout, progress, rounds, compile_repeats)
        for backend in group:
            if backend in report.results:
                report.results[backend].group = index
    return report


PROFILE_PROBE = (
    "import json; from forge.runtime.host_profile import load_host_profile; "
    "p = load_host_profile(); print(json.dumps([p.built, p.load_seconds, str(p.path)]))"
)


def host_profile_note(timeout: float = 300.0) -> str:
    """Load this host's profile in a child of Forge's interpreter before any Forge child
    compiles, measuring it if the cache lacks it (a new host, or new library versions:
    `scripts/bench.sh` adds openvino's Python package, which is part of the key). A
    profile is measured once per host, so a cold compile's ready time never includes it;
    the note says what it cost here."""
    done = subprocess.run(
        [sys.executable, "-c", PROFILE_PROBE],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return f"host profile: could not be loaded before the compiles ({last})"
    built, seconds, path = json.loads(done.stdout.strip().splitlines()[-1])
    if built:
        return (
            f"host profile: measured in {seconds:.2f} s before the compiles ({path}; once "
            "per host and library versions, so no ready time below includes it)"
        )
    return f"host profile: {path}, cached (loaded in {seconds * 1e3:.1f} ms)"


def _bench_group(
    group: list[str],
    report: BenchReport,
    estimates: dict[str, tuple[int, int]],
    python: Path,
    timeout: float,
    progress: Callable[[str], None] | None,
    rounds: int,
    compile_repeats: int,
) -> None:
    """Compile `group` in `compile_repeats` fresh processes per backend, one set after
    another (each backend's previous child stopped first), and time every set: the
    `rounds` interleaved rounds are shared out among the sets, so that latency, like
    the compile, is not one process's draw (two fresh processes of one program can run
    its graphs 20-40% apart on a VM)."""
    results = report.results
    compiles: dict[str, list[tuple[float, float]]] = {}
    times: dict[str, list[float]] = {}
    round_ms: dict[str, list[float]] = {}
    process_ms: dict[str, list[float]] = {}
    peaks: dict[str, int] = {}
    runs = report.runs
    rounds = max(1, min(rounds, runs))
    done = 0
    for r in range(compile_repeats):
        children: dict[str, _Child] = {}
        try:
            for backend in rotated(group, r):
                if backend in results and results[backend].skipped:
                    continue
                if progress is not None:
                    progress(f"compiling {backend} ({r + 1}/{compile_repeats}) ...")
                child = _Child(
                    backend,
                    report.model,
                    report.tiny,
                    report.seq,
                    report.threads,
                    timeout,
                    _python_of(backend, python),
                )
                results[backend] = child.result
                if child.result.skipped:
                    child.close()
                    continue
                child.result.estimate = estimates.get(backend, (0, 0))
                ready, first = child.result.ready_seconds, child.result.first_output_seconds
                if ready is not None and first is not None:
                    compiles.setdefault(backend, []).append((ready, first))
                children[backend] = child
            share = rounds // compile_repeats + (1 if r < rounds % compile_repeats else 0)
            if progress is not None and children and share:
                progress(
                    f"timing {len(children)} backend(s): {share} of {rounds} round(s) in "
                    f"process set {r + 1}/{compile_repeats} ..."
                )
            for k in range(done, done + share):
                batch = runs // rounds + (1 if k < runs % rounds else 0)
                for name in rotated(list(children), k):
                    settle(len(children))
                    measured = children[name].run(batch)
                    if measured is None:
                        results[name].skipped = f"failed while timing: {children[name].error}"
                        children.pop(name).close()
                        continue
                    times.setdefault(name, []).extend(measured)
                    mean = float(np.mean(measured)) if measured else 0.0
                    round_ms.setdefault(name, []).append(mean)
            done += share
            for name, child in children.items():
                peaks[name] = max(peaks.get(name, 0), child.peak_rss)
                own = round_ms.get(name, [])[-share:] if share else []
                if own:
                    process_ms.setdefault(name, []).append(float(np.mean(own)))
        finally:
            for child in children.values():
                child.close()
    for backend in group:
        result = results.get(backend)
        if result is None or result.skipped:
            continue
        samples = compiles.get(backend, [])
        if samples:
            result.ready_seconds = _median([ready for ready, _ in samples])
            result.first_output_seconds = _median([first for _, first in samples])
            result.compile_samples = [ready for ready, _ in samples]
        if backend in times:
            result.latency_ms = summarize(times[backend])
            result.round_ms = round_ms[backend]
            result.process_ms = process_ms.get(backend, [])
            result.peak_rss = peaks.get(backend, 0)


MARKER = "FORGE-BENCH "

SETTLE_SECONDS = 0.5
"""The pause before each child's batch of timed calls. ONNX Runtime's worker threads
keep spinning after a call returns, and the next child's first call shares the cores
with them: on an AMD EPYC Zen 3 (2 cores), Forge's first call of a batch that followed
ONNX Runtime's took 216-239 ms against 190-200 for the rest (7 of 10 batches); with
this pause its batches start like ONNX Runtime's (182-190 ms)."""


def settle(children: int) -> None:
    """Let the previous child's threads go idle before the next child is timed."""
    if children > 1:
        time.sleep(SETTLE_SECONDS)


def rotated(items: list[str], by: int) -> list[str]:
    """`items` starting at position `by` (mod len): who goes first changes every round."""
    if not items:
        return items
    k = by % len(items)
    return items[k:] + items[:k]


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def foreign_env(env: dict[str, str]) -> dict[str, str]:
    """The environment for a child in another venv: nothing of Forge's venv (PYTHONPATH,
    VIRTUAL_ENV) leaks into it; `env` on top."""
    kept = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("PYTHON") and key != "VIRTUAL_ENV"
    }
    return kept | env


class _Child:
    """A backend in its own process: compiled at construction, timed on request.

    Protocol on its stdin/stdout: it prints `FORGE-BENCH {result json}` when compiled,
    then answers each `run K` line with `FORGE-BENCH {"ms": [K times], "peak_rss": B}`."""

    def __init__(
        self,
        backend: str,
        model: str,
        tiny: bool,
        seq: int,
        threads: int,
        timeout: float,
        python: str | None = None,
    ):
        self.peak_rss = 0
        python = python or sys.executable
        foreign = python != sys.executable
        # -I in another venv: Forge is installed there (without its dependencies).
        command = [python, *(["-I"] if foreign else []), "-c", CHILD_MAIN, backend, model]
        command += [str(int(tiny)), str(seq), str(threads)]
        env = {"OMP_NUM_THREADS": str(threads), "TOKENIZERS_PARALLELISM": "false"}
        env = foreign_env(env) if foreign else {**os.environ, **env}
        registered_in = _registered_in(REGISTRY[backend])
        if registered_in is not None:
            command.append(registered_in)
            if not foreign:
                env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        self.scratch: str | None = None
        scratch_env = REGISTRY[backend].scratch_env
        if scratch_env is not None:
            self.scratch = tempfile.mkdtemp(prefix=f"forge-bench-{backend}-")
            env[scratch_env] = self.scratch
        self.child = Child(command, env, MARKER, timeout)
        ready = self.child.answer()
        if ready is None:
            self.result = BackendResult(backend, skipped=f"failed: {self.error}")
            self.close()
        else:
            self.result = BackendResult(**{**ready, "estimate": tuple(ready["estimate"])})
            self.peak_rss = self.result.peak_rss_compile

    @property
    def error(self) -> str:
        return self.child.error

    def run(self, runs: int) -> list[float] | None:
        answer = self.child.ask(f"run {runs}")
        if answer is None:
            return None
        self.peak_rss = max(self.peak_rss, answer["peak_rss"])
        return answer["ms"]

    def close(self) -> None:
        self.child.close()
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)
            self.scratch = None


CHILD_MAIN = "import sys; from forge.devtools.bench import _worker; sys.exit(_worker(sys.argv[1:]))"
"""The child's program. Not `-m forge.devtools.bench`: as `__main__` this module would
be a second copy, and backends registered elsewhere go into the imported one."""


def _registered_in(backend: Backend) -> str | None:
    """What the child imports to find `backend`: None for the built-in ones, else the
    module that registers it, or the path of the script that does."""
    module = backend.build.__module__
    if module == __name__:
        return None
    if module == "__main__":
        return getattr(sys.modules["__main__"], "__file__", None) or module
    return module


def _load_registrations(source: str) -> None:
    """Import the module (or run the script, not as `__main__`) that registers a backend."""
    if not source.endswith(".py"):
        importlib.import_module(source)
        return
    spec = importlib.util.spec_from_file_location("forge_bench_backends", source)
    if spec is None or spec.loader is None:
        raise ForgeError(f"cannot load bench backends from {source}")
    spec.loader.exec_module(importlib.util.module_from_spec(spec))


def _worker(argv: Sequence[str]) -> int:
    backend, model, tiny, seq, threads, *sources = argv
    warnings.filterwarnings("ignore")
    try:
        # Imported in the child only: transformers takes seconds to import.
        import transformers

        transformers.logging.set_verbosity_error()
    except ImportError:
        pass
    for source in sources:
        _load_registrations(source)
    result, run = prepare(backend, model, bool(int(tiny)), int(seq), int(threads))
    release_memory()
    result.rss_ready, result.peak_rss_compile = memory_now()
    # Warm up again: the trim handed back memory a backend may reuse every call (Forge's
    # first call after it took 300-340 ms against 185-200 on an AMD EPYC Zen 3, 2
    # cores), which no caller of a ready executable pays.
    run()
    print(MARKER + json.dumps(asdict(result)), flush=True)
    for line in sys.stdin:
        command, _, count = line.partition(" ")
        if command != "run":
            break
        times = timed_runs(run, int(count))
        answer = {"ms": times, "peak_rss": memory_now()[1]}
        print(MARKER + json.dumps(answer), flush=True)
    return 0
