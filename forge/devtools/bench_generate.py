"""`forge bench MODEL --generate`: token generation with Forge against HF eager, HF with a
static cache and torch.compile, and OpenVINO GenAI, side by side in one run.

Every row runs in its own child process, one after the other: each builds the same
seeded model, makes the same seeded random prompt, compiles, generates once as a warm-up
and then `rounds` more times, reports back as one JSON line and exits before the next
starts (a full-size model is in memory once at a time). With fewer threads than cores,
each child is pinned to that many cores (NNFactory's OpenVINO sizes its pool by the
cores it may use, not by torch's thread count). Forge runs at fp32 and with int8
weights. Measured, per row:

* ready: model object -> ready to generate. Forge: `compile_lm` (torch.export and both
  programs, prefill and decode). HF static + torch.compile: the first `generate`'s extra
  time over the median of the later ones (that call compiles). OpenVINO GenAI: the
  optimum-intel export of the saved weights plus `LLMPipeline`'s load (compile).
* TTFT: from the `generate` call to the first new token (prefill and its choice).
* decode tokens/s: new tokens after the first, over the time from the first to the last.
* agreement: how many of the greedy tokens equal HF eager's at the same position.

OpenVINO GenAI 2026 and optimum-intel need their own transformers (and pin openvino
2026.4 themselves), which conflict with Forge's pins. They run with the
python of a separate venv (`scripts/bench_generate.sh` builds it), reading the weights
saved with `save_pretrained` to a temporary directory: one child exports them OFFLINE
with `optimum-cli export openvino`, another loads the result into `LLMPipeline` and
generates from token ids (an `ov.Tensor`: no tokenizer is needed, none is made). Their
program is `_genai_main`, sent as source with `python -c`, since Forge is not installed
in that venv. A row that cannot run (no venv, a failed export) says why in one line.
"""

from __future__ import annotations

import functools
import inspect
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import torch

from forge.diagnostics import ForgeError, one_line
from forge.frontend.loading import load_model
from forge.frontend.static_cache import check_causal_lm
from forge.runtime.generate import compile_lm


@dataclass(frozen=True)
class Row:
    """One backend of the generation bench."""

    name: str
    """What `--backends` and the JSON call it."""
    label: str
    """What the table calls it."""
    genai: str = ""
    """The optimum-cli `--weight-format` of an OpenVINO GenAI row (run in its venv)."""
    precision: str = "fp32"
    """A Forge row's `compile_lm` precision."""
    dynamic_prefill: bool = False
    """A Forge row's `compile_lm(dynamic_prefill=...)`."""


ROWS: dict[str, Row] = {
    row.name: row
    for row in (
        Row("forge", "Forge (compile_lm)"),
        Row("forge-int8", "Forge int8 weights", precision="int8"),
        Row(
            "forge-int8-dq",
            "Forge int8, dynamic prefill",
            precision="int8",
            dynamic_prefill=True,
        ),
        Row("eager", "HF eager (dynamic cache)"),
        Row("hf-static", "HF static cache + compile"),
        Row("genai-fp32", "OpenVINO GenAI fp32", genai="fp32"),
        Row("genai-int8", "OpenVINO GenAI int8 weights", genai="int8"),
    )
}
"""Every row, in the order they run and print."""

REFERENCE = "eager"
"""The row whose tokens the others are compared with."""


def row_names() -> tuple[str, ...]:
    return tuple(ROWS)


@dataclass(frozen=True)
class GenerateSpec:
    """What every child gets: the model, the prompt's recipe and how to time it."""

    model: str
    tiny: bool = False
    prompt_len: int = 100
    max_new_tokens: int = 32
    seed: int = 0
    rounds: int = 3
    threads: int = 1
    prompt_capacity: int | None = None
    """Forge's prefill size (default: the prompt's length, one prefill like HF's)."""

    @property
    def capacity(self) -> int:
        """Cache positions: the prompt and every new token (HF's static cache too)."""
        return self.prompt_len + self.max_new_tokens


@dataclass
class RowResult:
    backend: str
    version: str = ""
    ready_seconds: float | None = None
    """Model object -> ready to generate; None for HF eager (nothing to compile)."""
    ttft_ms: list[float] = field(default_factory=list)
    """Time to first token of each timed round."""
    decode_tps: list[float] = field(default_factory=list)
    """Decode tokens/s of each timed round."""
    tokens: list[int] = field(default_factory=list)
    """The new tokens (the same in every round: greedy)."""
    prompt: list[int] = field(default_factory=list)
    detail: str = ""
    skipped: str = ""
    """Why the row did not run (one line); empty when it ran."""

    @property
    def ttft(self) -> float | None:
        return statistics.median(self.ttft_ms) if self.ttft_ms else None

    @property
    def tps(self) -> float | None:
        return statistics.median(self.decode_tps) if self.decode_tps else None


# --------------------------------------------------------------- child: Forge's venv


def make_prompt(vocab: int, length: int, seed: int) -> list[int]:
    """The seeded random prompt (as `forge generate --prompt-len`)."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab, (length,), generator=generator).tolist()


def load_lm(spec: GenerateSpec) -> tuple[Any, list[int]]:
    """The seeded model (eval mode) and the prompt."""
    model = load_model(spec.model, spec.tiny, 1).model
    check_causal_lm(model)
    if any(p.is_meta for p in model.parameters()):
        raise ForgeError(f"{spec.model}: built on the meta device (too large here); no generation")
    return model, make_prompt(int(model.config.vocab_size), spec.prompt_len, spec.seed)


@dataclass
class Timed:
    """One `generate` call: its tokens and figures."""

    tokens: list[int]
    seconds: float
    ttft_ms: float
    decode_tps: float


def timing(start: float, stamps: Sequence[float], tokens: list[int], end: float) -> Timed:
    """Figures from the call's start and each new token's time stamp."""
    ttft = (stamps[0] - start) * 1e3 if stamps else 0.0
    span = stamps[-1] - stamps[0] if len(stamps) > 1 else 0.0
    tps = (len(stamps) - 1) / span if span > 0 else 0.0
    return Timed(tokens, end - start, ttft, tps)


def timed_rounds(call: Callable[[], Timed], rounds: int, result: RowResult) -> list[Timed]:
    """One warm-up call, then `rounds` timed ones into `result`; all the calls."""
    calls = [call()]
    for _ in range(rounds):
        calls.append(call())
    timed = calls[1:]
    result.ttft_ms = [t.ttft_ms for t in timed]
    result.decode_tps = [t.decode_tps for t in timed]
    result.tokens = timed[0].tokens
    differing = sum(1 for t in timed if t.tokens != result.tokens)
    if differing:
        result.detail += f"; {differing} round(s) gave other tokens"
    return calls


def run_forge(spec: GenerateSpec, row: str = "forge") -> RowResult:
    model, prompt = load_lm(spec)
    result = RowResult(row, version=f"forge-ugc {_forge_version()}", prompt=prompt)
    prompt_capacity = spec.prompt_capacity or spec.prompt_len
    start = time.perf_counter()
    lm = compile_lm(
        model,
        capacity=spec.capacity,
        prompt_capacity=prompt_capacity,
        precision=ROWS[row].precision,
        dynamic_prefill=ROWS[row].dynamic_prefill,
    )
    result.ready_seconds = time.perf_counter() - start
    pre, dec = lm.prefill.report, lm.decode.report
    result.detail = (
        f"compile prefill ({prompt_capacity} tokens) {pre.total_seconds:.2f} s, "
        f"{pre.segments} segment(s); decode {dec.total_seconds:.2f} s, {dec.segments} "
        f"segment(s); cache of {spec.capacity} positions"
    )
    if ROWS[row].dynamic_prefill:
        result.detail += (
            "; int8 weights (symmetric, per channel); prefill activations quantized at run "
            "time (groups of 32), decode fp32 activations"
        )
    elif ROWS[row].precision == "int8":
        result.detail += "; int8 weight-only (symmetric, per channel), fp32 activations"

    def call() -> Timed:
        stamps: list[float] = []
        start = time.perf_counter()
        tokens = lm.generate(
            prompt, spec.max_new_tokens, on_token=lambda _: stamps.append(time.perf_counter())
        )
        own.append((lm.stats.prefill_seconds * 1e3, lm.stats.tokens_per_second))
        return timing(start, stamps, tokens, time.perf_counter())

    own: list[tuple[float, float]] = []
    timed_rounds(call, spec.rounds, result)
    result.detail += (
        f"; its own stats: prefill {statistics.median(p for p, _ in own[1:]):.1f} ms, "
        f"decode {statistics.median(t for _, t in own[1:]):.1f} tokens/s"
    )
    return result


def _hf_generate(model: Any, prompt: list[int], spec: GenerateSpec, static: bool) -> Timed:
    """`model.generate(do_sample=False)`, EOS off (every row makes all the tokens), the
    new tokens time-stamped by a streamer."""
    import copy

    from transformers.generation.streamers import BaseStreamer

    class Stamps(BaseStreamer):
        """`put` gets the prompt first, then each new token."""

        def __init__(self) -> None:
            self.calls = 0
            self.times: list[float] = []

        def put(self, value: Any) -> None:
            self.calls += 1
            if self.calls > 1:
                self.times.append(time.perf_counter())

        def end(self) -> None:
            pass

    # On the model's own config: `generate` fills a None it is given from there.
    model.generation_config.eos_token_id = None
    config = copy.deepcopy(model.generation_config)
    config.update(
        do_sample=False,
        max_new_tokens=spec.max_new_tokens,
        pad_token_id=0,
        disable_compile=True,  # torch.compile is ours (hf-static), not generate's own
        cache_implementation="static" if static else None,
    )
    ids = torch.tensor([prompt])
    stamps = Stamps()
    start = time.perf_counter()
    with torch.no_grad():
        out = model.generate(
            ids, attention_mask=torch.ones_like(ids), generation_config=config, streamer=stamps
        )
    end = time.perf_counter()
    return timing(start, stamps.times, out[0, len(prompt) :].tolist(), end)


def _hf_version() -> str:
    import transformers

    return f"transformers {transformers.__version__}, torch {torch.__version__}"


def run_eager(spec: GenerateSpec) -> RowResult:
    model, prompt = load_lm(spec)
    result = RowResult("eager", version=_hf_version(), prompt=prompt)
    timed_rounds(lambda: _hf_generate(model, prompt, spec, static=False), spec.rounds, result)
    return result


def run_hf_static(spec: GenerateSpec) -> RowResult:
    """HF's recipe for compiled generation: a static cache and `torch.compile` of the
    forward (prefill and decode graphs, compiled by the first call)."""
    model, prompt = load_lm(spec)
    result = RowResult("hf-static", version=_hf_version(), prompt=prompt)
    model.forward = torch.compile(model.forward, fullgraph=True)
    calls = timed_rounds(
        lambda: _hf_generate(model, prompt, spec, static=True), spec.rounds, result
    )
    later = statistics.median(t.seconds for t in calls[1:])
    result.ready_seconds = max(calls[0].seconds - later, 0.0)
    result.detail = (
        f"cache_implementation='static', torch.compile(model.forward, fullgraph=True) "
        f"(inductor); first generate {calls[0].seconds:.2f} s, later ones {later:.2f} s"
    )
    return result


def save_weights(spec: GenerateSpec, directory: str) -> RowResult:
    """`save_pretrained` the seeded model for the OpenVINO GenAI rows."""
    model, prompt = load_lm(spec)
    model.save_pretrained(directory)
    model.generation_config.save_pretrained(directory)
    return RowResult("save", prompt=prompt)


MARKER = "FORGE-GENBENCH "
CHILD_MAIN = (
    "import sys; from forge.devtools.bench_generate import _worker; sys.exit(_worker(sys.argv[1:]))"
)


def _worker(argv: Sequence[str]) -> int:
    """A child in Forge's venv: run one row (or save the weights), print its result."""
    role, spec_json, *rest = argv
    warnings.filterwarnings("ignore")
    # Imported in the child only: transformers takes seconds to import.
    import transformers

    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    spec = GenerateSpec(**json.loads(spec_json))
    torch.set_num_threads(spec.threads)
    runners: dict[str, Callable[[GenerateSpec], RowResult]] = {
        **{
            name: functools.partial(run_forge, row=name)
            for name in ROWS
            if name.startswith("forge")
        },
        "eager": run_eager,
        "hf-static": run_hf_static,
    }
    try:
        if role == "save":
            result = save_weights(spec, rest[0])
        elif role in runners:
            result = runners[role](spec)
        else:
            raise ForgeError(f"unknown generation bench role '{role}'")
    except ForgeError as e:
        print(e, file=sys.stderr)  # the parent reports the last line: this one
        return 1
    print(MARKER + json.dumps(asdict(result)), flush=True)
    return 0


def _forge_version() -> str:
    try:
        version = metadata.version("forge-ugc")
    except metadata.PackageNotFoundError:
        version = "?"
    root = Path(__file__).resolve().parents[2]
    head = subprocess.run(
        ["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    return f"{version} ({head})" if head else version


# ------------------------------------------------------------ child: the GenAI venv


def _genai_main(argv: list[str]) -> int:
    """The OpenVINO GenAI child, run by the GenAI venv's python from this function's
    source (so it imports nothing of Forge's). `export HF_DIR OUT FORMAT`: optimum-cli
    export, in process, timed without its imports. `run OUT SPEC_JSON PROMPT_JSON`:
    load an `LLMPipeline`, generate from token ids, time it with GenAI's own metrics.
    Prints one `FORGE-GENBENCH {json}` line."""
    import json
    import statistics
    import sys
    import time

    marker = "FORGE-GENBENCH "
    role = argv[0]
    if role == "export":
        hf_dir, out, weight_format = argv[1:4]
        # Imported before the clock starts: the export, not optimum's import, is timed.
        import optimum.exporters.openvino  # noqa: F401
        from optimum.commands.optimum_cli import main as optimum_cli

        sys.argv = ["optimum-cli", "export", "openvino", "--model", hf_dir]
        sys.argv += ["--task", "text-generation-with-past", "--weight-format", weight_format, out]
        start = time.perf_counter()
        optimum_cli()
        seconds = time.perf_counter() - start
        print(marker + json.dumps({"export_seconds": seconds}), flush=True)
        return 0

    import numpy as np
    import openvino as ov
    import openvino_genai

    out, spec_json, prompt_json = argv[1:4]
    spec = json.loads(spec_json)
    prompt = json.loads(prompt_json)
    # No prefix caching (on by default in the pipeline's paged-attention backend): every
    # round feeds the same prompt, whose prefill would otherwise be a cache hit.
    scheduler = openvino_genai.SchedulerConfig()
    scheduler.enable_prefix_caching = False
    properties = {
        "INFERENCE_PRECISION_HINT": "f32",
        "KV_CACHE_PRECISION": "f32",
        "INFERENCE_NUM_THREADS": spec["threads"],
        "scheduler_config": scheduler,
    }
    start = time.perf_counter()
    pipe = openvino_genai.LLMPipeline(out, "CPU", **properties)
    load_seconds = time.perf_counter() - start
    config = openvino_genai.GenerationConfig()
    config.max_new_tokens = spec["max_new_tokens"]
    config.do_sample = False
    config.ignore_eos = True
    ids = ov.Tensor(np.array([prompt], dtype=np.int64))
    runs = []
    for _ in range(1 + spec["rounds"]):
        results = pipe.generate(ids, config)
        metrics = results.perf_metrics
        tpot = metrics.get_tpot().mean
        runs.append((list(results.tokens[0]), metrics.get_ttft().mean, 1e3 / tpot if tpot else 0))
    timed = runs[1:]
    tokens = timed[0][0]
    report = {
        "version": f"openvino-genai {openvino_genai.__version__.split('-')[0]}",
        "load_seconds": load_seconds,
        "ttft_ms": [t[1] for t in timed],
        "decode_tps": [t[2] for t in timed],
        "tokens": tokens,
        "differing": sum(1 for t in timed if t[0] != tokens),
        "median_ttft": statistics.median(t[1] for t in timed),
    }
    print(marker + json.dumps(report), flush=True)
    return 0


GENAI_PROGRAM = (
    textwrap.dedent(inspect.getsource(_genai_main))
    + "\nimport sys\nsys.exit(_genai_main(sys.argv[1:]))\n"
)
"""`_genai_main` as a program for `python -c`, read when this module is imported: an
edit of the file during a long run must not change (or break) what later rows run."""


def genai_program() -> str:
    return GENAI_PROGRAM


def default_genai_python() -> Path:
    """`$FORGE_GENAI_PYTHON`, else the venv `scripts/bench_generate.sh` builds."""
    given = os.environ.get("FORGE_GENAI_PYTHON")
    if given:
        return Path(given)
    return Path(__file__).resolve().parents[2] / "build" / "venv-genai" / "bin" / "python"


# -------------------------------------------------------------------------- parent


@dataclass
class ChildAnswer:
    payload: dict[str, Any] | None
    error: str = ""
    """One line: why there is no payload."""


def run_child(
    command: list[str], env: dict[str, str], timeout: float, cores: int | None = None
) -> ChildAnswer:
    """Run a child to its end; its `MARKER` line, or the last line of its stderr.

    `cores`: the child may run on that many CPUs only (the first ones this process may
    use). Thread-count settings do not reach every pool: NNFactory's OpenVINO takes one
    thread per core it may run on, whatever torch's count, so `--threads 1` without this
    would time Forge's graphs on every core against GenAI's one thread."""
    allowed = sorted(os.sched_getaffinity(0))
    pinned = allowed[:cores] if cores is not None and cores < len(allowed) else None
    try:
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            env=env,
            timeout=timeout,
            check=False,
            preexec_fn=(lambda: os.sched_setaffinity(0, pinned)) if pinned else None,
        )
    except subprocess.TimeoutExpired:
        return ChildAnswer(None, f"killed after {timeout:.0f} s")
    for line in reversed(done.stdout.splitlines()):
        if line.startswith(MARKER):
            return ChildAnswer(json.loads(line[len(MARKER) :]))
    tail = [line for line in done.stderr.splitlines() if line.strip()]
    why = tail[-1] if tail else f"exit code {done.returncode}"
    return ChildAnswer(None, one_line(why)[:300])


def _forge_child(role: str, spec: GenerateSpec, timeout: float, *extra: str) -> ChildAnswer:
    command = [sys.executable, "-c", CHILD_MAIN, role, json.dumps(asdict(spec)), *extra]
    env = {
        **os.environ,
        "OMP_NUM_THREADS": str(spec.threads),
        "TOKENIZERS_PARALLELISM": "false",
    }
    scratch = None
    if role == "hf-static":
        # A fresh inductor cache: a warm one would turn the compile into a cache hit.
        scratch = tempfile.mkdtemp(prefix="forge-bench-generate-inductor-")
        env["TORCHINDUCTOR_CACHE_DIR"] = scratch
    try:
        return run_child(command, env, timeout, spec.threads)
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


def _genai_child(python: Path, args: list[str], threads: int, timeout: float) -> ChildAnswer:
    # -I: nothing of Forge's venv (PYTHONPATH, user site) leaks into the GenAI venv.
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("PYTHON") and key != "VIRTUAL_ENV"
    }
    env |= {
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "OMP_NUM_THREADS": str(threads),
        "TOKENIZERS_PARALLELISM": "false",
    }
    return run_child([str(python), "-I", "-c", genai_program(), *args], env, timeout, threads)


def _result(answer: ChildAnswer, backend: str) -> RowResult:
    if answer.payload is None:
        return RowResult(backend, skipped=f"failed: {answer.error}")
    return RowResult(**answer.payload)


def run_genai_rows(
    spec: GenerateSpec,
    rows: Sequence[str],
    python: Path,
    timeout: float,
    progress: Callable[[str], None],
) -> dict[str, RowResult]:
    """The OpenVINO GenAI rows: save the weights, then per row export and generate."""
    if not python.exists():
        why = f"no GenAI venv at {python} (scripts/bench_generate.sh builds it)"
        return {row: RowResult(row, skipped=why) for row in rows}
    results: dict[str, RowResult] = {}
    scratch = Path(tempfile.mkdtemp(prefix="forge-bench-genai-"))
    try:
        progress("saving the weights for OpenVINO GenAI (save_pretrained) ...")
        hf_dir = scratch / "hf"
        saved = _forge_child("save", spec, timeout, str(hf_dir))
        if saved.payload is None:
            why = f"failed to save the weights: {saved.error}"
            return {row: RowResult(row, skipped=why) for row in rows}
        prompt = saved.payload["prompt"]
        for row in rows:
            weight_format = ROWS[row].genai
            out = scratch / f"ov-{weight_format}"
            progress(
                f"exporting {ROWS[row].label} (optimum-cli --weight-format {weight_format}) ..."
            )
            export_args = ["export", str(hf_dir), str(out), weight_format]
            exported = _genai_child(python, export_args, spec.threads, timeout)
            if exported.payload is None:
                results[row] = RowResult(row, skipped=f"export failed: {exported.error}")
                continue
            progress(f"generating with {ROWS[row].label} ...")
            run_args = ["run", str(out), json.dumps(asdict(spec)), json.dumps(prompt)]
            ran = _genai_child(python, run_args, spec.threads, timeout)
            shutil.rmtree(out, ignore_errors=True)
            if ran.payload is None:
                results[row] = RowResult(row, skipped=f"failed: {ran.error}")
                continue
            results[row] = _genai_result(row, spec, prompt, exported.payload, ran.payload)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return results


def _genai_result(
    row: str, spec: GenerateSpec, prompt: list[int], exported: dict, ran: dict
) -> RowResult:
    export_seconds = exported["export_seconds"]
    load_seconds = ran["load_seconds"]
    detail = (
        f"optimum-cli export openvino --weight-format {ROWS[row].genai} {export_seconds:.2f} s "
        f"+ LLMPipeline load {load_seconds:.2f} s; CPU, f32 inference and KV cache, "
        "no prefix caching, token ids in (no tokenizer)"
    )
    if ran["differing"]:
        detail += f"; {ran['differing']} round(s) gave other tokens"
    return RowResult(
        row,
        version=ran["version"],
        ready_seconds=export_seconds + load_seconds,
        ttft_ms=ran["ttft_ms"],
        decode_tps=ran["decode_tps"],
        tokens=ran["tokens"],
        prompt=prompt,
        detail=detail,
    )


def cpu_name() -> str:
    """`lscpu`'s model name, family and model, and the core count."""
    try:
        text = subprocess.run(
            ["lscpu"], capture_output=True, text=True, check=False, env={"LC_ALL": "C"}
        ).stdout
    except OSError:
        text = ""
    fields = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        fields[key.strip()] = value.strip()
    name = fields.get("Model name") or "unknown CPU"
    family = fields.get("CPU family")
    model = fields.get("Model")
    where = f" (family {family}, model {model})" if family and model else ""
    return f"{name}{where}, {os.cpu_count()} core(s)"


@dataclass
class GenerateReport:
    spec: GenerateSpec
    cpu: str
    results: dict[str, RowResult]
    load: tuple[float, float] = (0.0, 0.0)
    """The 1-minute load average before the first row and after the last: on a shared
    machine, other work slows every figure."""

    def ran(self, row: str) -> RowResult | None:
        result = self.results.get(row)
        return result if result is not None and not result.skipped else None

    def agreement(self, row: str) -> tuple[int, int] | None:
        """(tokens equal to the reference's at the same position, tokens), or None."""
        result, reference = self.ran(row), self.ran(REFERENCE)
        if result is None or reference is None:
            return None
        same = sum(1 for a, b in zip(result.tokens, reference.tokens, strict=False) if a == b)
        return same, max(len(result.tokens), len(reference.tokens))

    def to_json(self) -> dict[str, Any]:
        return {
            "spec": asdict(self.spec),
            "cpu": self.cpu,
            "load_average": list(self.load),
            "rows": {
                name: {
                    **asdict(r),
                    "ttft_median_ms": r.ttft,
                    "decode_tps_median": r.tps,
                    "agreement": self.agreement(name),
                }
                for name, r in self.results.items()
            },
        }

    def format(self) -> str:
        spec = self.spec
        lines = [
            f"forge bench --generate: {spec.model}{' (tiny)' if spec.tiny else ''}, batch 1, "
            f"prompt of {spec.prompt_len} seeded random tokens (seed {spec.seed}), "
            f"{spec.max_new_tokens} new tokens, greedy, fp32 activations, {spec.threads} thread(s)",
            f"CPU: {self.cpu}; load average {self.load[0]:.2f} before, {self.load[1]:.2f} after",
            f"median of {spec.rounds} round(s) after 1 warm-up; ratios: row / Forge "
            "(ready and TTFT: lower is better; tokens/s: higher is better)",
            "",
            f"  {'':<30}{'version':<40}{'ready':>9} {'':>7} {'TTFT':>10} {'':>7}"
            f" {'decode':>9} {'':>7}  agree",
            f"  {'':<30}{'':<40}{'s':>9} {'':>7} {'ms':>10} {'':>7} {'tok/s':>9}",
        ]
        forge = self.ran("forge")
        for name, r in self.results.items():
            label = ROWS[name].label
            if r.skipped:
                lines.append(f"  {label:<30}skipped: {r.skipped}")
                continue
            agree = self.agreement(name)
            ready = forge.ready_seconds if forge is not None else None
            ttft = forge.ttft if forge is not None else None
            tps = forge.tps if forge is not None else None
            lines.append(
                f"  {label:<30}{r.version[:39]:<40}"
                f"{_cell(r.ready_seconds, '.2f', 9)} {_ratio(r.ready_seconds, ready)}"
                f" {_cell(r.ttft, '.1f', 10)} {_ratio(r.ttft, ttft)}"
                f" {_cell(r.tps, '.1f', 9)} {_ratio(r.tps, tps)}"
                f"  {f'{agree[0]}/{agree[1]}' if agree else '-'}"
            )
        details = [(n, r.detail) for n, r in self.results.items() if r.detail and not r.skipped]
        if details:
            lines.append("")
            lines += [f"  {ROWS[n].label}: {d}" for n, d in details]
        return "\n".join(lines)


def _cell(value: float | None, fmt: str, width: int) -> str:
    return f"{'-':>{width}}" if value is None else f"{value:>{width}{fmt}}"


def _ratio(value: float | None, forge: float | None) -> str:
    if value is None or not forge:
        return f"{'':>7}"
    return f"{value / forge:>6.2f}x"


def run_generate_bench(
    spec: GenerateSpec,
    rows: Sequence[str],
    genai_python: Path | None = None,
    timeout: float = 3600.0,
    progress: Callable[[str], None] | None = None,
) -> GenerateReport:
    """Run `rows` one after the other, each in its own child process (GenAI rows with
    `genai_python`), and collect the report."""
    unknown = [r for r in rows if r not in ROWS]
    if unknown:
        known = ", ".join(ROWS)
        raise ForgeError(f"unknown --generate backend(s): {', '.join(unknown)} (known: {known})")
    if spec.rounds < 1:
        raise ForgeError(f"--rounds must be at least 1, got {spec.rounds}")
    if spec.prompt_len < 1:
        raise ForgeError(f"--prompt-len must be at least 1, got {spec.prompt_len}")
    if spec.max_new_tokens < 2:
        raise ForgeError(
            f"--max-new-tokens must be at least 2 (decode speed needs two), "
            f"got {spec.max_new_tokens}"
        )
    if spec.prompt_capacity is not None and spec.prompt_capacity < 1:
        raise ForgeError(f"--prompt-capacity must be at least 1, got {spec.prompt_capacity}")
    say = progress or (lambda _: None)
    load_before = os.getloadavg()[0]
    wanted = [r for r in ROWS if r in rows]  # the table's order
    results: dict[str, RowResult] = {}
    for row in [r for r in wanted if not ROWS[r].genai]:
        say(f"running {ROWS[row].label} ...")
        results[row] = _result(_forge_child(row, spec, timeout), row)
    genai = [r for r in wanted if ROWS[r].genai]
    if genai:
        python = genai_python or default_genai_python()
        results |= run_genai_rows(spec, genai, python, timeout, say)
    prompts = {tuple(r.prompt) for r in results.values() if not r.skipped}
    if len(prompts) > 1:
        raise ForgeError("the rows were fed different prompts (the seeded prompt is not stable)")
    load = (load_before, os.getloadavg()[0])
    return GenerateReport(spec, cpu_name(), {r: results[r] for r in wanted}, load)
