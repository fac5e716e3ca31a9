"""`forge bench`: Forge against eager PyTorch, torch.compile, OpenVINO and ONNX Runtime.

Every backend runs in a child process of one `forge bench` run, one after the other,
so none of them shares a thread pool, an OpenVINO core or an allocator with another,
and the machine's load is as close as a noisy machine allows. Each child builds the
same seeded model, feeds the same prompt, and measures

* compile time from the model object to a ready executable (tracing/export included:
  torch.export for Forge, `convert_model` for OpenVINO, `torch.onnx.export` for
  ONNX Runtime, the first call for torch.compile), and to the first output;
* latency over `runs` timed calls after one warm-up: mean, P50 and P99;
* the logits' max-abs difference and KL divergence against eager, at fp32.

OpenVINO's Python API and ONNX Runtime are the optional `bench` extra
(`pip install -e .[bench]`); a missing one is reported as skipped, not as a failure.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from forge.diagnostics import ForgeError

BACKENDS = ("forge", "forge-op", "eager", "inductor", "openvino", "onnxruntime")
"""Everything `forge bench` can measure, in the order it runs them."""

LABELS = {
    "forge": "Forge (segments)",
    "forge-op": "Forge (granularity=op)",
    "eager": "torch eager",
    "inductor": "torch.compile (inductor)",
    "openvino": "OpenVINO 2024.4 CPU",
    "onnxruntime": "ONNX Runtime CPU",
}

OPTIONAL_MODULES = {"openvino": "openvino", "onnxruntime": "onnxruntime"}


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


def _timed_runs(run: Callable[[], Any], runs: int) -> dict[str, float]:
    import numpy as np

    times = []
    for _ in range(runs):
        start = time.perf_counter()
        run()
        times.append((time.perf_counter() - start) * 1e3)
    return {
        "mean": float(np.mean(times)),
        "p50": float(np.percentile(times, 50)),
        "p99": float(np.percentile(times, 99)),
    }


def _to_torch(x: Any) -> torch.Tensor:
    import numpy as np

    return torch.from_numpy(np.asarray(x)) if not isinstance(x, torch.Tensor) else x


def measure(backend: str, model_name: str, tiny: bool, seq: int, runs: int, threads: int) -> Any:
    """Run one backend in this process and return its `BackendResult`."""
    from forge.cli import load_model
    from forge.numerics import agreement

    torch.set_num_threads(threads)
    loaded = load_model(model_name, tiny, seq)
    ids = loaded.args[0]
    mask = loaded.kwargs["attention_mask"]
    module = LogitsOnly(loaded.model).eval()
    with torch.no_grad():
        expected = module(ids, mask)
    result = BackendResult(backend)

    start = time.perf_counter()
    if backend in ("forge", "forge-op"):
        from forge.executor import compile_model

        granularity = "op" if backend == "forge-op" else "segment"
        executor, report = compile_model(
            loaded.model, loaded.args, loaded.kwargs, "fp32", granularity
        )
        result.ready_seconds = time.perf_counter() - start
        inputs = [ids if n == "input_ids" else mask for n in executor.input_names]

        def run() -> Any:
            return executor(*inputs)[0]

        result.detail = (
            f"{len(executor.segments)} segment(s), export {report.export_seconds:.2f} s, "
            f"NNFactory {report.nnfactory_compile_seconds:.2f} s"
        )
    elif backend == "eager":

        def run() -> Any:
            with torch.no_grad():
                return module(ids, mask)

    elif backend == "inductor":
        compiled = torch.compile(module, backend="inductor")

        def run() -> Any:
            with torch.no_grad():
                return compiled(ids, mask)

    elif backend == "openvino":
        import openvino as ov

        with torch.no_grad():
            ov_model = ov.convert_model(
                module, example_input={"input_ids": ids, "attention_mask": mask}
            )
        request = ov.Core().compile_model(
            ov_model,
            "CPU",
            {
                "PERFORMANCE_HINT": "LATENCY",
                "INFERENCE_NUM_THREADS": threads,
                "INFERENCE_PRECISION_HINT": "f32",
            },
        )
        result.ready_seconds = time.perf_counter() - start
        feed = {"input_ids": ids.numpy(), "attention_mask": mask.numpy()}

        def run() -> Any:
            return _to_torch(request(feed)[0])

    elif backend == "onnxruntime":
        import tempfile

        import onnxruntime as ort

        path = Path(tempfile.mkdtemp(prefix="forge-bench-")) / "model.onnx"
        with torch.no_grad():
            torch.onnx.export(
                module, (ids, mask), str(path), input_names=["input_ids", "attention_mask"]
            )
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        result.ready_seconds = time.perf_counter() - start
        feed = {"input_ids": ids.numpy(), "attention_mask": mask.numpy()}

        def run() -> Any:
            return _to_torch(session.run(None, feed)[0])

    else:
        raise ForgeError(f"unknown backend '{backend}' (known: {', '.join(BACKENDS)})")

    actual = run()
    first = time.perf_counter() - start
    if backend != "eager":
        result.first_output_seconds = first
    if backend == "inductor":
        result.ready_seconds = first  # torch.compile compiles at the first call
    run()  # warm-up
    result.latency_ms = _timed_runs(run, runs)
    agree = agreement(expected, actual)
    result.max_abs, result.kl, result.top1 = agree.max_abs, agree.kl, agree.top1
    return result


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
            "compile: model object -> ready executable (and -> first output)",
        ]
        forge = self.ran("forge")
        for name, r in self.results.items():
            if r.skipped or r.ready_seconds is None:
                continue
            ratio = ""
            if forge is not None and forge.ready_seconds and name != "forge":
                ratio = f"  {r.ready_seconds / forge.ready_seconds:6.2f}x Forge's time"
            lines.append(
                f"  {LABELS[name]:<26}{r.ready_seconds:>9.2f} s  "
                f"({r.first_output_seconds or 0.0:.2f} s){ratio}"
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
                f"  {LABELS[name]:<26}{lat['mean']:>8.2f} {lat['p50']:>8.2f} {lat['p99']:>8.2f}"
                f" {lat['p99'] / lat['p50']:>8.2f} {versus}"
            )
        lines += ["", "numerics vs eager (logits)      max-abs          KL    top-1"]
        for name, r in self.results.items():
            if r.skipped or name == "eager":
                continue
            lines.append(
                f"  {LABELS[name]:<26}{r.max_abs:>11.3e} {r.kl:>11.3e} {r.top1 * 100:>7.2f}%"
            )
        details = [(n, r.detail) for n, r in self.results.items() if r.detail and not r.skipped]
        if details:
            lines.append("")
            lines += [f"  {LABELS[n]}: {d}" for n, d in details]
        skipped = [(n, r.skipped) for n, r in self.results.items() if r.skipped]
        if skipped:
            lines.append("")
            lines += [f"skipped {LABELS[n]}: {why}" for n, why in skipped]
        return "\n".join(lines)


def _available(backend: str) -> str:
    """Empty when `backend` can run here, else why not."""
    import importlib.util

    module = OPTIONAL_MODULES.get(backend)
    if module is not None and importlib.util.find_spec(module) is None:
        return f"'{module}' is not installed (pip install -e '.[bench]')"
    return ""


def run_bench(
    model: str,
    backends: Sequence[str],
    seq: int = 128,
    runs: int = 20,
    threads: int | None = None,
    tiny: bool = False,
    timeout: float = 1800.0,
    progress: Callable[[str], None] | None = None,
) -> BenchReport:
    """Measure `backends` one after the other, each in its own child process."""
    unknown = [b for b in backends if b not in BACKENDS]
    if unknown:
        raise ForgeError(f"unknown backend(s): {', '.join(unknown)} (known: {', '.join(BACKENDS)})")
    if runs < 1:
        raise ForgeError("--runs must be at least 1")
    threads = threads or os.cpu_count() or 1
    results: dict[str, BackendResult] = {}
    for backend in backends:
        why = _available(backend)
        if why:
            results[backend] = BackendResult(backend, skipped=why)
            continue
        if progress is not None:
            progress(f"measuring {LABELS[backend]} ...")
        results[backend] = _child(backend, model, tiny, seq, runs, threads, timeout)
    return BenchReport(model, seq, threads, runs, tiny, results)


def _child(
    backend: str, model: str, tiny: bool, seq: int, runs: int, threads: int, timeout: float
) -> BackendResult:
    command = [
        sys.executable,
        "-m",
        "forge.bench",
        backend,
        model,
        str(int(tiny)),
        str(seq),
        str(runs),
        str(threads),
    ]
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "TOKENIZERS_PARALLELISM": "false"}
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout, env=env, check=False
        )
    except subprocess.TimeoutExpired:
        return BackendResult(backend, skipped=f"timed out after {timeout:.0f} s")
    marker = "FORGE-BENCH-RESULT "
    for line in done.stdout.splitlines():
        if line.startswith(marker):
            return BackendResult(**json.loads(line[len(marker) :]))
    tail = [line for line in done.stderr.strip().splitlines() if line.strip()]
    why = tail[-1] if tail else f"exit code {done.returncode}"
    return BackendResult(backend, skipped=f"failed: {why[:300]}")


def _worker(argv: Sequence[str]) -> int:
    backend, model, tiny, seq, runs, threads = argv
    import warnings

    warnings.filterwarnings("ignore")
    try:
        import transformers

        transformers.logging.set_verbosity_error()
    except ImportError:
        pass
    result = measure(backend, model, bool(int(tiny)), int(seq), int(runs), int(threads))
    print("FORGE-BENCH-RESULT " + json.dumps(asdict(result)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(_worker(sys.argv[1:]))
