"""`forge bench`: Forge against eager PyTorch, torch.compile, OpenVINO and ONNX Runtime.

Every backend runs in a child process of one `forge bench` run, so none of them
shares a thread pool, an OpenVINO core or an allocator with another. Each child builds
the same seeded model and feeds the same prompt. The children compile one after the
other (nothing else runs meanwhile), then stay alive while the parent times them in
interleaved rounds (A B C, B C A, ...): on a noisy machine a slow spell then costs
every backend alike. Measured:

* compile time from the model object to a ready executable (tracing/export included:
  torch.export for Forge, `convert_model` for OpenVINO, `torch.onnx.export` for
  ONNX Runtime, the first call for torch.compile), and to the first output;
* latency over `runs` timed calls after one warm-up: mean, P50 and P99;
* the logits' max-abs difference and KL divergence against eager, at fp32.

OpenVINO's Python API and ONNX Runtime are the optional `bench` extra
(`pip install -e .[bench]`); a missing one is reported as skipped, not as a failure.

A backend is one `build` function (in the child: compile, return how to run once) and
one `register(Backend(...))` at module level; `--backends`, the run order, the report's
tables and `forge report`'s plot all read the registry. A backend registered outside
this module is found by the child importing the module that registers it.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from forge.devtools.numerics import agreement
from forge.diagnostics import ForgeError
from forge.frontend.loading import Loaded, load_model
from forge.runtime.executor import compile_model


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
    """A module of the optional `bench` extra it needs; missing: skipped, not failed."""
    scratch_env: str | None = None
    """An environment variable the child gets, naming a fresh directory removed with it
    (a compile cache that must not carry over from one compile to the next)."""


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


def label(name: str) -> str:
    backend = REGISTRY.get(name)
    return backend.label if backend is not None else name


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

    start = time.perf_counter()
    built = backend.build(Workload(loaded, module, ids, mask, threads))
    if backend.compiles == AHEAD:
        result.ready_seconds = time.perf_counter() - start
    result.detail = built.detail
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
    return Built(lambda: _to_torch(request(feed)[0]))


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
    return Built(lambda: _to_torch(session.run(None, feed)[0]))


register(Backend("forge", "Forge (segments)", build_forge))
register(Backend("forge-op", "Forge (granularity=op)", build_forge_op))
register(Backend("eager", "torch eager", build_eager, compiles=NEVER))
register(
    Backend(
        "inductor",
        "torch.compile (inductor)",
        build_inductor,
        compiles=AT_FIRST_CALL,
        # A fresh cache per process: inductor's on-disk cache would otherwise turn
        # every compile after the first into a cache hit.
        scratch_env="TORCHINDUCTOR_CACHE_DIR",
    )
)
register(Backend("openvino", "OpenVINO 2024.4 CPU", build_openvino, extra="openvino"))
register(Backend("onnxruntime", "ONNX Runtime CPU", build_onnxruntime, extra="onnxruntime"))


# ---------------------------------------------------------------------------- parent


@dataclass
class BenchReport:
    model: str
    seq: int
    threads: int
    runs: int
    tiny: bool
    results: dict[str, BackendResult]

    def ran(self, backend: str) -> BackendResult | None:
        result = self.results.get(backend)
        return result if result is not None and not result.skipped else None

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
            "numerics": {
                name: {"max_abs": r.max_abs, "kl": r.kl, "top1": r.top1} for name, r in ran.items()
            },
            "skipped": {name: r.skipped for name, r in self.results.items() if r.skipped},
            "results": {name: asdict(r) for name, r in self.results.items()},
        }

    def format(self) -> str:
        lines = [
            f"forge bench: {self.model}{' (tiny)' if self.tiny else ''}, batch 1, seq "
            f"{self.seq}, {self.threads} thread(s), {self.runs} timed runs each, fp32",
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
                f"  {label(name):<26}{r.ready_seconds:>8.2f} s  "
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
                f"  {label(name):<26}{lat['mean']:>8.2f} {lat['p50']:>8.2f} {lat['p99']:>8.2f}"
                f" {lat['p99'] / lat['p50']:>8.2f} {versus}"
            )
        lines += ["", "numerics vs eager (logits)      max-abs          KL    top-1"]
        for name, r in self.results.items():
            if r.skipped or name == "eager":
                continue
            lines.append(
                f"  {label(name):<26}{r.max_abs:>11.3e} {r.kl:>11.3e} {r.top1 * 100:>7.2f}%"
            )
        details = [(n, r.detail) for n, r in self.results.items() if r.detail and not r.skipped]
        if details:
            lines.append("")
            lines += [f"  {label(n)}: {d}" for n, d in details]
        skipped = [(n, r.skipped) for n, r in self.results.items() if r.skipped]
        if skipped:
            lines.append("")
            lines += [f"skipped {label(n)}: {why}" for n, why in skipped]
        return "\n".join(lines)


def _available(backend: str) -> str:
    """Empty when `backend` can run here, else why not."""
    module = REGISTRY[backend].extra
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
) -> BenchReport:
    """Compile `backends` one after the other, each in its own child process, then time
    them in `rounds` interleaved rounds, so that a slow spell of a noisy machine hits
    every backend alike instead of whichever ran during it. Compilation is repeated
    `compile_repeats` times, interleaved the same way, in fresh processes; the report
    gives the median."""
    unknown = [b for b in backends if b not in REGISTRY]
    if unknown:
        known = ", ".join(REGISTRY)
        raise ForgeError(f"unknown backend(s): {', '.join(unknown)} (known: {known})")
    if runs < 1:
        raise ForgeError("--runs must be at least 1")
    if compile_repeats < 1:
        raise ForgeError("--compile-repeats must be at least 1")
    threads = threads or os.cpu_count() or 1
    results: dict[str, BackendResult] = {}
    children: dict[str, _Child] = {}
    compiles: dict[str, list[tuple[float, float]]] = {}
    wanted = list(dict.fromkeys(backends))
    for backend in wanted:
        why = _available(backend)
        if why:
            results[backend] = BackendResult(backend, skipped=why)
    runnable = [b for b in wanted if b not in results]
    try:
        for r in range(compile_repeats):
            for backend in _rotated(runnable, r):
                if backend in results and results[backend].skipped:
                    continue
                if progress is not None:
                    progress(f"compiling {label(backend)} ({r + 1}/{compile_repeats}) ...")
                child = _Child(backend, model, tiny, seq, threads, timeout)
                if child.result.skipped:
                    results[backend] = child.result
                    stale = children.pop(backend, None)
                    if stale is not None:
                        stale.close()
                    continue
                ready, first = child.result.ready_seconds, child.result.first_output_seconds
                if ready is not None and first is not None:
                    compiles.setdefault(backend, []).append((ready, first))
                if backend in children:
                    child.close()  # one compiled process per backend is timed
                    continue
                results[backend] = child.result
                children[backend] = child
        for backend, samples in compiles.items():
            result = results[backend]
            result.ready_seconds = _median([ready for ready, _ in samples])
            result.first_output_seconds = _median([first for _, first in samples])
            result.compile_samples = [ready for ready, _ in samples]
        times: dict[str, list[float]] = {name: [] for name in children}
        rounds = max(1, min(rounds, runs))
        if progress is not None and children:
            progress(f"timing {len(children)} backend(s): {runs} runs each in {rounds} rounds ...")
        for r in range(rounds):
            share = runs // rounds + (1 if r < runs % rounds else 0)
            for name in _rotated(list(children), r):
                measured = children[name].run(share)
                if measured is None:
                    results[name].skipped = f"failed while timing: {children[name].error}"
                    children.pop(name).close()
                    times.pop(name)
                    continue
                times[name].extend(measured)
        for name, measured in times.items():
            results[name].latency_ms = summarize(measured)
    finally:
        for child in children.values():
            child.close()
    return BenchReport(model, seq, threads, runs, tiny, results)


MARKER = "FORGE-BENCH "


def _rotated(items: list[str], by: int) -> list[str]:
    """`items` starting at position `by` (mod len): who goes first changes every round."""
    if not items:
        return items
    k = by % len(items)
    return items[k:] + items[:k]


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


class _Child:
    """A backend in its own process: compiled at construction, timed on request.

    Protocol on its stdin/stdout: it prints `FORGE-BENCH {result json}` when compiled,
    then answers each `run K` line with `FORGE-BENCH [K times in ms]`."""

    def __init__(
        self, backend: str, model: str, tiny: bool, seq: int, threads: int, timeout: float
    ):
        self.error = ""
        self.timeout = timeout
        command = [sys.executable, "-c", CHILD_MAIN, backend, model, str(int(tiny))]
        command += [str(seq), str(threads)]
        env = {**os.environ, "OMP_NUM_THREADS": str(threads), "TOKENIZERS_PARALLELISM": "false"}
        registered_in = _registered_in(REGISTRY[backend])
        if registered_in is not None:
            command.append(registered_in)
            env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        self.scratch: str | None = None
        scratch_env = REGISTRY[backend].scratch_env
        if scratch_env is not None:
            self.scratch = tempfile.mkdtemp(prefix=f"forge-bench-{backend}-")
            env[scratch_env] = self.scratch
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        ready = self._answer()
        if ready is None:
            self.result = BackendResult(backend, skipped=f"failed: {self.error}")
            self.close()
        else:
            self.result = BackendResult(**ready)

    def _answer(self) -> Any:
        """The next protocol line's payload, or None (and `error`) if the child died."""
        assert self.process.stdout is not None
        timer = threading.Timer(self.timeout, self.process.kill)
        timer.start()
        try:
            for line in self.process.stdout:
                if line.startswith(MARKER):
                    return json.loads(line[len(MARKER) :])
        finally:
            timer.cancel()
        self.process.wait()
        if self.process.returncode and self.process.returncode < 0:
            self.error = f"killed after {self.timeout:.0f} s"
            return None
        assert self.process.stderr is not None
        tail = [line for line in self.process.stderr.read().splitlines() if line.strip()]
        self.error = (tail[-1] if tail else f"exit code {self.process.returncode}")[:300]
        return None

    def run(self, runs: int) -> list[float] | None:
        assert self.process.stdin is not None
        try:
            self.process.stdin.write(f"run {runs}\n")
            self.process.stdin.flush()
        except BrokenPipeError:
            self.error = "the process ended"
            return None
        return self._answer()

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
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
    print(MARKER + json.dumps(asdict(result)), flush=True)
    for line in sys.stdin:
        command, _, count = line.partition(" ")
        if command != "run":
            break
        print(MARKER + json.dumps(timed_runs(run, int(count))), flush=True)
    return 0
