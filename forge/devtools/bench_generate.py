"""`forge bench MODEL --generate`: token generation with Forge against HF eager, HF with a
static cache and torch.compile, and OpenVINO GenAI, side by side in one run.

Every row runs in its own child process. Each builds the same seeded model, makes the
same seeded random prompt and compiles; then the children stay alive while the parent
asks them for one `generate` call at a time, in interleaved rounds (A B C, B C A, ...):
a warm-up round, then `rounds` timed ones. On a noisy machine a slow spell then costs
every row alike instead of whichever ran during it, so the ratios are same-time ratios.
Where the rows would not fit in memory together (each child's resident size and compile
peak estimated from the weights' bytes, against MemAvailable), groups that fit run one
after another, and the report says so. With fewer threads than cores, each child is
pinned to that many cores (NNFactory's OpenVINO sizes its pool by the cores it may use,
not by torch's thread count). Forge runs at fp32, with fp16 and with int8 weights, each
compared with OpenVINO GenAI at the same weights. Measured, per row:

* ready: model object -> ready to generate. Forge: `compile_lm` (torch.export and both
  programs, prefill and decode). HF static + torch.compile: the first `generate`'s extra
  time over the median of the later ones (that call compiles). OpenVINO GenAI: the
  optimum-intel export of the saved weights plus `LLMPipeline`'s load (compile).
* TTFT: from the `generate` call to the first new token (prefill and its choice).
* decode tokens/s: new tokens after the first, over the time from the first to the last.
* agreement: how many of the greedy tokens equal HF eager's at the same position.
* peak RSS of the child (compile and generation).

OpenVINO GenAI 2026 and optimum-intel need their own transformers (and pin openvino
2026.4 themselves), which conflict with Forge's pins. They run with the
python of a separate venv (`scripts/bench_generate.sh` builds it), reading the weights
saved with `save_pretrained` to a temporary directory: one child exports them OFFLINE
with `optimum-cli export openvino` (before any row starts: nothing else runs while it
does), another loads the result into `LLMPipeline` and generates from token ids (an
`ov.Tensor`: no tokenizer is needed, none is made). Their program is `_genai_main`, sent
as source with `python -c`, since Forge is not installed in that venv. A row that
cannot run (no venv, a failed export) says why in one line.
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
from pathlib import Path
from typing import Any

import torch

from forge.devtools.bench import (
    DEFAULT_FOOTPRINT,
    FIT_FRACTION,
    MIB,
    Footprint,
    foreign_env,
    host_profile_note,
    mem_available,
    memory_now,
    plan_groups,
    release_memory,
    rotated,
    round_ratios,
    sequence_note,
    settle,
    spread,
    weight_bytes,
)
from forge.devtools.children import Child
from forge.frontend.loading import load_model
from forge.frontend.static_cache import check_causal_lm
from forge.runtime.build_notes import QUANTIZED_NOTES
from forge.runtime.compile import CompileReport
from forge.runtime.generate import compile_lm
from forge.support.diagnostics import ForgeError
from forge.support.host import SOURCE_ROOT, cpu_description, distribution_version


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
    memory: Footprint = DEFAULT_FOOTPRINT
    """The child's resident size once ready and its compile peak (`plan_groups`)."""

    @property
    def forge(self) -> bool:
        return self.name.startswith("forge")

    @property
    def weights(self) -> str:
        """Its weights' precision: fp32, fp16 or int8 (rows of one are compared)."""
        return self.genai or self.precision


FOOTPRINTS: dict[str, Footprint] = {
    # Measured on GPT-2 (475 MiB of fp32 weights, prompt 100, 32 new tokens, `bash
    # scripts/bench_generate.sh gpt2`): base = the child's RSS on the tiny model,
    # factors = (peak RSS - base) / weights, rounded up.
    "forge": Footprint(450 * MIB, 3.4, 3.6),
    "forge-int8": Footprint(450 * MIB, 2.4, 2.8),
    "forge-fp16": Footprint(450 * MIB, 2.9, 3.2),
    "eager": Footprint(400 * MIB, 1.3, 1.4),
    "hf-static": Footprint(500 * MIB, 1.4, 2.0),
    "genai-fp32": Footprint(300 * MIB, 2.2, 2.6),
    "genai-int8": Footprint(300 * MIB, 0.8, 1.0),
    "genai-fp16": Footprint(300 * MIB, 1.2, 1.6),
}

ROWS: dict[str, Row] = {
    row.name: row
    for row in (
        Row("forge", "Forge (compile_lm)", memory=FOOTPRINTS["forge"]),
        Row("forge-int8", "Forge int8 weights", precision="int8", memory=FOOTPRINTS["forge-int8"]),
        Row("forge-fp16", "Forge fp16 weights", precision="fp16", memory=FOOTPRINTS["forge-fp16"]),
        Row(
            "forge-int8-dq",
            "Forge int8, dynamic prefill",
            precision="int8",
            dynamic_prefill=True,
            memory=FOOTPRINTS["forge-int8"],
        ),
        Row("eager", "HF eager (dynamic cache)", memory=FOOTPRINTS["eager"]),
        Row("hf-static", "HF static cache + compile", memory=FOOTPRINTS["hf-static"]),
        Row("genai-fp32", "OpenVINO GenAI fp32", genai="fp32", memory=FOOTPRINTS["genai-fp32"]),
        Row(
            "genai-int8",
            "OpenVINO GenAI int8 weights",
            genai="int8",
            memory=FOOTPRINTS["genai-int8"],
        ),
        Row(
            "genai-fp16",
            "OpenVINO GenAI fp16 weights",
            genai="fp16",
            memory=FOOTPRINTS["genai-fp16"],
        ),
    )
}
"""Every row, in the order they run and print."""

WEIGHTS_ORDER = ("fp32", "fp16", "int8")
FORGE_ROW = {
    weights: next(
        r.name for r in ROWS.values() if r.forge and r.weights == weights and not r.dynamic_prefill
    )
    for weights in WEIGHTS_ORDER
}
"""The Forge row an OpenVINO GenAI row of each weights' precision is compared with: the
plain Forge row at that precision."""

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
    processes: int = 1
    """Fresh children per row, one after another, each timed for `rounds` rounds."""

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
    rss_ready: int = 0
    """The child's resident bytes once ready to generate."""
    peak_rss: int = 0
    """The child's peak resident bytes (compile and every generate call)."""
    group: int = 0
    """The memory group it ran in (`plan_rows`): rows of one group were interleaved."""
    per_process: list[dict[str, float | None]] = field(default_factory=list)
    """With several processes: each one's ready time and median TTFT and decode speed."""

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


@dataclass
class Session:
    """A row ready to generate, in its child: what it reports once ready, and one call."""

    result: RowResult
    call: Callable[[], Timed]
    own: Callable[[], list[float]] | None = None
    """Forge's own figures of the last call: [prefill ms, decode tokens/s]."""


def _activations(report: CompileReport) -> str:
    """How an int8 program's activations ran: quantized at run time (forced, or where the
    host profile measured it faster: `compile_model`'s notes say which) or fp32."""
    if any(note.startswith(QUANTIZED_NOTES) for note in report.notes):
        return "quantized at run time (groups of 32)"
    return "fp32"


def prepare_forge(spec: GenerateSpec, row: str = "forge") -> Session:
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
        f"segment(s); cache of {lm.capacity} positions"
        + (f" ({spec.capacity} rounded to whole blocks)" if lm.capacity != spec.capacity else "")
        + f", {lm.prefill.count_ops('npu.cached_attention')} paged attention node(s) a program"
    )
    if ROWS[row].precision == "int8":
        result.detail += (
            f"; int8 weights (symmetric, per channel); activations: prefill "
            f"{_activations(pre)}, decode {_activations(dec)}"
        )
    elif ROWS[row].precision == "fp16":
        result.detail += "; fp16 weights, fp32 activations"

    def call() -> Timed:
        stamps: list[float] = []
        start = time.perf_counter()
        tokens = lm.generate(
            prompt, spec.max_new_tokens, on_token=lambda _: stamps.append(time.perf_counter())
        )
        return timing(start, stamps, tokens, time.perf_counter())

    def own() -> list[float]:
        return [lm.stats.prefill_seconds * 1e3, lm.stats.tokens_per_second]

    return Session(result, call, own)


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


def prepare_eager(spec: GenerateSpec) -> Session:
    model, prompt = load_lm(spec)
    result = RowResult("eager", version=_hf_version(), prompt=prompt)
    return Session(result, lambda: _hf_generate(model, prompt, spec, static=False))


def prepare_hf_static(spec: GenerateSpec) -> Session:
    """HF's recipe for compiled generation: a static cache and `torch.compile` of the
    forward (prefill and decode graphs, compiled by the first call: the warm-up)."""
    model, prompt = load_lm(spec)
    result = RowResult("hf-static", version=_hf_version(), prompt=prompt)
    model.forward = torch.compile(model.forward, fullgraph=True)
    return Session(result, lambda: _hf_generate(model, prompt, spec, static=True))


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
    """A child in Forge's venv: save the weights and print the prompt, or get one row
    ready, print its `RowResult`, then answer each `round` line on stdin with one timed
    `generate` call (`Timed`, the peak RSS, Forge's own figures)."""
    role, spec_json, *rest = argv
    warnings.filterwarnings("ignore")
    # Imported in the child only: transformers takes seconds to import.
    import transformers

    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    spec = GenerateSpec(**json.loads(spec_json))
    torch.set_num_threads(spec.threads)
    preparers: dict[str, Callable[[GenerateSpec], Session]] = {
        **{name: functools.partial(prepare_forge, row=name) for name in ROWS if ROWS[name].forge},
        "eager": prepare_eager,
        "hf-static": prepare_hf_static,
    }
    try:
        if role == "save":
            print(MARKER + json.dumps(asdict(save_weights(spec, rest[0]))), flush=True)
            return 0
        if role not in preparers:
            raise ForgeError(f"unknown generation bench role '{role}'")
        session = preparers[role](spec)
        release_memory()
        session.result.rss_ready, session.result.peak_rss = memory_now()
        print(MARKER + json.dumps(asdict(session.result)), flush=True)
        for line in sys.stdin:
            if line.strip() != "round":
                break
            answer = asdict(session.call())
            answer["peak_rss"] = memory_now()[1]
            answer["own"] = session.own() if session.own is not None else None
            print(MARKER + json.dumps(answer), flush=True)
    except ForgeError as e:
        print(e, file=sys.stderr)  # the parent reports the last line: this one
        return 1
    return 0


def _forge_version() -> str:
    version = distribution_version("forge-ugc", missing="?")
    head = subprocess.run(
        ["git", "-C", str(SOURCE_ROOT), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    return f"{version} ({head})" if head else version


# ------------------------------------------------------------ child: the GenAI venv


def _genai_main(argv: list[str]) -> int:
    """The OpenVINO GenAI child, run by the GenAI venv's python from this function's
    source (so it imports nothing of Forge's). `export HF_DIR OUT FORMAT`: optimum-cli
    export, in process, timed without its imports; prints one `FORGE-GENBENCH {json}`
    line. `run OUT SPEC_JSON`: load an `LLMPipeline`, print the load time, then answer
    each `round` line on stdin with one `generate` from the token ids, timed with
    GenAI's own metrics."""
    import json
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

    out, spec_json = argv[1:3]
    spec = json.loads(spec_json)
    prompt = spec["prompt"]
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

    def peak_rss() -> int:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
        return 0

    start = time.perf_counter()
    pipe = openvino_genai.LLMPipeline(out, "CPU", **properties)
    load_seconds = time.perf_counter() - start
    config = openvino_genai.GenerationConfig()
    config.max_new_tokens = spec["max_new_tokens"]
    config.do_sample = False
    config.ignore_eos = True
    ids = ov.Tensor(np.array([prompt], dtype=np.int64))
    version = f"openvino-genai {openvino_genai.__version__.split('-')[0]}"
    ready = {"version": version, "load_seconds": load_seconds, "peak_rss": peak_rss()}
    print(marker + json.dumps(ready), flush=True)
    for line in sys.stdin:
        if line.strip() != "round":
            break
        start = time.perf_counter()
        results = pipe.generate(ids, config)
        seconds = time.perf_counter() - start
        metrics = results.perf_metrics
        tpot = metrics.get_tpot().mean
        answer = {
            "tokens": list(results.tokens[0]),
            "seconds": seconds,
            "ttft_ms": metrics.get_ttft().mean,
            "decode_tps": 1e3 / tpot if tpot else 0.0,
            "peak_rss": peak_rss(),
        }
        print(marker + json.dumps(answer), flush=True)
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
    """A child that answers once and exits (saving the weights, an export): its `MARKER`
    payload, or the last line of its stderr. `cores`: as `Child`."""
    child = Child(command, env, MARKER, timeout, cores)
    try:
        payload = child.answer()
        return ChildAnswer(payload, child.error)
    finally:
        child.close()


def _forge_command(role: str, spec: GenerateSpec, *extra: str) -> list[str]:
    return [sys.executable, "-c", CHILD_MAIN, role, json.dumps(asdict(spec)), *extra]


def _forge_env(spec: GenerateSpec) -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": str(spec.threads), "TOKENIZERS_PARALLELISM": "false"}


def _genai_command(python: Path, *args: str) -> list[str]:
    # -I: nothing of Forge's venv (PYTHONPATH, user site) leaks into the GenAI venv.
    return [str(python), "-I", "-c", genai_program(), *args]


def _genai_env(threads: int) -> dict[str, str]:
    return foreign_env(
        {
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "OMP_NUM_THREADS": str(threads),
            "TOKENIZERS_PARALLELISM": "false",
        }
    )


class RowChild:
    """One row's child, ready to generate and kept alive between its calls."""

    def __init__(
        self,
        command: list[str],
        env: dict[str, str],
        spec: GenerateSpec,
        timeout: float,
        scratch: str | None = None,
    ):
        self.scratch = scratch
        """A folder of the child's own (HF static's inductor cache), removed with it."""
        self.child = Child(command, env, MARKER, timeout, spec.threads)
        self.ready: dict[str, Any] | None = self.child.answer()
        """What it printed once ready, or None (then `error` says why)."""
        self.calls: list[dict[str, Any]] = []
        """Every `generate` call's answer, the warm-up first."""

    @property
    def error(self) -> str:
        return self.child.error

    def call(self) -> bool:
        """One `generate` call into `calls`; False when the child failed."""
        answer = self.child.ask("round")
        if answer is None:
            return False
        self.calls.append(answer)
        return True

    def close(self) -> None:
        self.child.close()
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)
            self.scratch = None


def finish_row(result: RowResult, calls: Sequence[dict[str, Any]]) -> RowResult:
    """`result` with the figures of its calls (the first is the warm-up)."""
    timed = calls[1:]
    result.ttft_ms = [c["ttft_ms"] for c in timed]
    result.decode_tps = [c["decode_tps"] for c in timed]
    result.tokens = list(timed[0]["tokens"])
    result.peak_rss = max([result.peak_rss, *(c.get("peak_rss", 0) for c in calls)])
    if result.backend == "hf-static":
        later = statistics.median(c["seconds"] for c in timed)
        result.ready_seconds = max(calls[0]["seconds"] - later, 0.0)
        result.detail = (
            f"cache_implementation='static', torch.compile(model.forward, fullgraph=True) "
            f"(inductor); first generate {calls[0]['seconds']:.2f} s, later ones {later:.2f} s"
        )
    differing = sum(1 for c in timed if list(c["tokens"]) != result.tokens)
    if differing:
        result.detail += f"; {differing} round(s) gave other tokens"
    own = [c["own"] for c in timed if c.get("own")]
    if own:
        result.detail += (
            f"; its own stats: prefill {statistics.median(p for p, _ in own):.1f} ms, "
            f"decode {statistics.median(t for _, t in own):.1f} tokens/s"
        )
    return result


@dataclass
class Exported:
    """The OpenVINO GenAI rows' exports, made before any row starts."""

    prompt: list[int] = field(default_factory=list)
    rows: dict[str, tuple[Path, dict[str, Any]]] = field(default_factory=dict)
    """Row -> (its exported folder, the export child's payload)."""
    skipped: dict[str, RowResult] = field(default_factory=dict)


def export_genai_rows(
    spec: GenerateSpec,
    rows: Sequence[str],
    python: Path,
    scratch: Path,
    timeout: float,
    progress: Callable[[str], None],
) -> Exported:
    """Save the weights, then export each GenAI row with optimum-cli, one child at a time."""
    exported = Exported()
    if not python.exists():
        why = f"no GenAI venv at {python} (scripts/bench_generate.sh builds it)"
        exported.skipped = {row: RowResult(row, skipped=why) for row in rows}
        return exported
    progress("saving the weights for OpenVINO GenAI (save_pretrained) ...")
    hf_dir = scratch / "hf"
    saved = run_child(
        _forge_command("save", spec, str(hf_dir)), _forge_env(spec), timeout, spec.threads
    )
    if saved.payload is None:
        why = f"failed to save the weights: {saved.error}"
        exported.skipped = {row: RowResult(row, skipped=why) for row in rows}
        return exported
    exported.prompt = saved.payload["prompt"]
    for row in rows:
        weight_format = ROWS[row].genai
        out = scratch / f"ov-{weight_format}"
        progress(f"exporting {ROWS[row].label} (optimum-cli --weight-format {weight_format}) ...")
        command = _genai_command(python, "export", str(hf_dir), str(out), weight_format)
        answer = run_child(command, _genai_env(spec.threads), timeout, spec.threads)
        if answer.payload is None:
            exported.skipped[row] = RowResult(row, skipped=f"export failed: {answer.error}")
            continue
        exported.rows[row] = (out, answer.payload)
    shutil.rmtree(hf_dir, ignore_errors=True)
    return exported


def start_row(
    row: str, spec: GenerateSpec, python: Path, exported: Exported, timeout: float
) -> tuple[RowChild, RowResult]:
    """Start `row`'s child and wait until it is ready: the child and the row's result so
    far (skipped, with the reason, when it failed)."""
    if ROWS[row].genai:
        out, export = exported.rows[row]
        request = json.dumps({**asdict(spec), "prompt": exported.prompt})
        command = _genai_command(python, "run", str(out), request)
        child = RowChild(command, _genai_env(spec.threads), spec, timeout)
    else:
        env = _forge_env(spec)
        scratch = None
        if row == "hf-static":
            # A fresh inductor cache: a warm one would turn the compile into a cache hit.
            scratch = tempfile.mkdtemp(prefix="forge-bench-generate-inductor-")
            env["TORCHINDUCTOR_CACHE_DIR"] = scratch
        child = RowChild(_forge_command(row, spec), env, spec, timeout, scratch)
    if child.ready is None:
        return child, RowResult(row, skipped=f"failed: {child.error}")
    if ROWS[row].genai:
        return child, _genai_result(row, exported.prompt, export, child.ready)
    return child, RowResult(**child.ready)


def _genai_result(row: str, prompt: list[int], exported: dict, ready: dict) -> RowResult:
    export_seconds = exported["export_seconds"]
    load_seconds = ready["load_seconds"]
    detail = (
        f"optimum-cli export openvino --weight-format {ROWS[row].genai} {export_seconds:.2f} s "
        f"+ LLMPipeline load {load_seconds:.2f} s; CPU, f32 inference and KV cache, "
        "no prefix caching, token ids in (no tokenizer)"
    )
    return RowResult(
        row,
        version=ready["version"],
        ready_seconds=export_seconds + load_seconds,
        prompt=prompt,
        detail=detail,
        peak_rss=ready["peak_rss"],
    )


def run_group(
    group: Sequence[str],
    spec: GenerateSpec,
    start: Callable[[str], tuple[RowChild, RowResult]],
    progress: Callable[[str], None],
) -> dict[str, RowResult]:
    """`run_processes` `spec.processes` times, one after another, merged: each row's
    rounds in order, its ready time the median, each process's figures in
    `per_process`. Two fresh processes of one program can run its graphs 20-40% apart
    (where the memory behind its weights landed); one process per row makes a ratio
    partly a draw, several show the spread."""
    first = run_processes(group, spec, start, progress)
    if spec.processes <= 1:
        return first
    runs = [first]
    for index in range(1, spec.processes):
        # A row that failed (or was skipped) in a process is not started again: its
        # result is that failure, and a retry would cost a compile or an export.
        live = [row for row in group if not any(run[row].skipped for run in runs)]
        if not live:
            break
        progress(f"process {index + 1} of {spec.processes} for {', '.join(live)} ...")
        runs.append(run_processes(live, spec, start, progress))
    results = {}
    for row in group:
        done = [run[row] for run in runs if row in run]
        failed = next((r for r in done if r.skipped), None)
        results[row] = failed if failed is not None else merge_processes(done)
    return results


def merge_processes(done: Sequence[RowResult]) -> RowResult:
    """One row's results from several processes as one: rounds in order, ready time and
    resident sizes over all of them, each process's own figures kept."""
    first = done[0]
    readies = [r.ready_seconds for r in done if r.ready_seconds is not None]
    merged = RowResult(
        first.backend,
        version=first.version,
        ready_seconds=statistics.median(readies) if readies else None,
        ttft_ms=[t for r in done for t in r.ttft_ms],
        decode_tps=[t for r in done for t in r.decode_tps],
        tokens=first.tokens,
        prompt=first.prompt,
        detail=first.detail,
        rss_ready=max(r.rss_ready for r in done),
        peak_rss=max(r.peak_rss for r in done),
        group=first.group,
        per_process=[
            {"ready_seconds": r.ready_seconds, "ttft_ms": r.ttft, "decode_tps": r.tps} for r in done
        ],
    )
    if any(r.tokens != first.tokens for r in done):
        merged.detail += "; the processes gave different tokens"
    return merged


def run_processes(
    group: Sequence[str],
    spec: GenerateSpec,
    start: Callable[[str], tuple[RowChild, RowResult]],
    progress: Callable[[str], None],
) -> dict[str, RowResult]:
    """Start `group`'s rows one after the other (each compiles alone), then ask them for
    a warm-up and `spec.rounds` timed calls in interleaved rounds, then stop them."""
    results: dict[str, RowResult] = {}
    children: dict[str, RowChild] = {}
    try:
        for row in group:
            progress(f"compiling {ROWS[row].label} ...")
            child, results[row] = start(row)
            if results[row].skipped:
                child.close()
                continue
            children[row] = child
        if children:
            progress(
                f"generating with {', '.join(children)}: 1 warm-up and {spec.rounds} timed "
                "round(s), interleaved ..."
            )
        for r in range(1 + spec.rounds):
            for row in rotated(list(children), r):
                settle(len(children))
                if children[row].call():
                    continue
                why = f"failed while generating: {children[row].error}"
                results[row] = RowResult(row, skipped=why)
                children.pop(row).close()
        for row, child in children.items():
            finish_row(results[row], child.calls)
    finally:
        for child in children.values():
            child.close()
    return results


def plan_rows(
    spec: GenerateSpec, rows: Sequence[str], available: int | None = None
) -> tuple[list[list[str]], str]:
    """`rows` in groups whose children fit in memory together (`available` bytes,
    default MemAvailable), and a note when there is more than one group. The fp32 rows
    are grouped first, then the fp16 ones, then the int8 ones: a row shares its group
    with the rows it is compared with where memory allows."""
    if not rows:
        return [], ""
    rows = sorted(rows, key=lambda row: WEIGHTS_ORDER.index(ROWS[row].weights))
    try:
        weights = weight_bytes(spec.model, spec.tiny)
    except ForgeError:
        weights = None  # an unknown model: its children say so
    available = available if available is not None else mem_available()
    if weights is None or available is None:
        return [list(rows)], ""
    estimates = {row: ROWS[row].memory.estimate(weights) for row in rows}
    budget = int(available * FIT_FRACTION)
    groups = plan_groups(rows, estimates, budget)
    if len(groups) == 1:
        return groups, ""
    return groups, sequence_note(groups, estimates, available, budget)


@dataclass
class GenerateReport:
    spec: GenerateSpec
    cpu: str
    results: dict[str, RowResult]
    load: tuple[float, float] = (0.0, 0.0)
    """The 1-minute load average before the first row and after the last: on a shared
    machine, other work slows every figure."""
    notes: list[str] = field(default_factory=list)
    """One line each: how the run was arranged where it is not the default (groups)."""

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
            "notes": self.notes,
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
            f"median of {self._rounds_text()}, the rows' calls interleaved "
            "(A B C, B C A, ...); ratios: row / Forge "
            "(ready and TTFT: lower is better; tokens/s: higher is better)",
            *self.notes,
            "",
            f"  {'':<30}{'version':<40}{'ready':>9} {'':>7} {'TTFT':>10} {'':>7}"
            f" {'decode':>9} {'':>7} {'peak RSS':>9}  agree",
            f"  {'':<30}{'':<40}{'s':>9} {'':>7} {'ms':>10} {'':>7} {'tok/s':>9} {'':>7}"
            f" {'MiB':>9}",
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
                f" {_cell(r.peak_rss / MIB if r.peak_rss else None, '.0f', 9)}"
                f"  {f'{agree[0]}/{agree[1]}' if agree else '-'}"
            )
        paired = self.paired_lines()
        if paired:
            lines += [
                "",
                "per round, the calls side by side (row / Forge: median, min-max; "
                "rounds where Forge was ahead):",
                *paired,
            ]
        processes = self.process_lines()
        if processes:
            lines += ["", "per process (median of its rounds): TTFT ms; decode tok/s", *processes]
        details = [(n, r.detail) for n, r in self.results.items() if r.detail and not r.skipped]
        if details:
            lines.append("")
            lines += [f"  {ROWS[n].label}: {d}" for n, d in details]
        return "\n".join(lines)

    def _rounds_text(self) -> str:
        rounds = self.spec.rounds
        if self.spec.processes <= 1:
            return f"{rounds} round(s) after 1 warm-up"
        return (
            f"{rounds * self.spec.processes} round(s): {self.spec.processes} fresh processes per "
            f"row, one after another, each {rounds} round(s) after 1 warm-up"
        )

    def process_lines(self) -> list[str]:
        """Each row's figures process by process, where it ran in several."""
        lines = []
        for name, result in self.results.items():
            if result.skipped or len(result.per_process) < 2:
                continue
            ttft = " / ".join(_figure(p["ttft_ms"], ".1f") for p in result.per_process)
            tps = " / ".join(_figure(p["decode_tps"], ".1f") for p in result.per_process)
            lines.append(f"    {ROWS[name].label:<28}TTFT {ttft}; decode {tps}")
        return lines

    def counterpart(self, row: str) -> RowResult | None:
        """The Forge row an OpenVINO GenAI row is compared with round by round (the same
        weights' precision), when both ran in one group, so that their calls alternated."""
        result = self.ran(row)
        if result is None or not ROWS[row].genai:
            return None
        forge = self.ran(FORGE_ROW[ROWS[row].weights])
        if forge is None or forge.group != result.group:
            return None
        return forge

    def paired_lines(self) -> list[str]:
        """Per OpenVINO GenAI row: its TTFT and decode speed over its Forge counterpart's
        in each round. The medians of the table can sit within a host's run-to-run spread; the
        calls of one round ran seconds apart, so their ratios show how far apart the
        rows really are and how often each was ahead."""
        lines = []
        for name in self.results:
            forge = self.counterpart(name)
            result = self.ran(name)
            if forge is None or result is None:
                continue
            ttft = round_ratios(result.ttft_ms, forge.ttft_ms)
            tps = round_ratios(result.decode_tps, forge.decode_tps)
            if not ttft or not tps:
                continue
            ahead_ttft = sum(1 for r in ttft if r > 1)
            ahead_tps = sum(1 for r in tps if r < 1)
            lines.append(
                f"    {ROWS[name].label:<28}TTFT {spread(ttft)}, Forge ahead in "
                f"{ahead_ttft}/{len(ttft)}; decode {spread(tps)}, Forge ahead in "
                f"{ahead_tps}/{len(tps)}"
            )
        return lines


def _figure(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


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
    available: int | None = None,
) -> GenerateReport:
    """Run `rows`, each in its own child process (GenAI rows with `genai_python`, their
    exports first): the children compile one after the other, then generate in
    interleaved rounds; rows that do not fit in memory together (`available` bytes,
    default MemAvailable) run in groups one after another. Collect the report."""
    unknown = [r for r in rows if r not in ROWS]
    if unknown:
        known = ", ".join(ROWS)
        raise ForgeError(f"unknown --generate backend(s): {', '.join(unknown)} (known: {known})")
    if spec.rounds < 1:
        raise ForgeError(f"--rounds must be at least 1, got {spec.rounds}")
    if spec.processes < 1:
        raise ForgeError(f"--processes must be at least 1, got {spec.processes}")
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
    python = genai_python or default_genai_python()
    scratch = Path(tempfile.mkdtemp(prefix="forge-bench-generate-"))
    results: dict[str, RowResult] = {}
    notes: list[str] = []
    try:
        exported = Exported()
        genai = [r for r in wanted if ROWS[r].genai]
        if genai:
            exported = export_genai_rows(spec, genai, python, scratch, timeout, say)
            results |= exported.skipped
        groups, note = plan_rows(spec, [r for r in wanted if r not in results], available)
        if note:
            say(note)
        if any(ROWS[r].forge for g in groups for r in g):
            profile = host_profile_note()
            say(profile)
            notes.append(profile)
        for index, group in enumerate(groups):
            start = functools.partial(
                start_row, spec=spec, python=python, exported=exported, timeout=timeout
            )
            ran = run_group(group, spec, start, say)
            for result in ran.values():
                result.group = index
            results |= ran
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    prompts = {tuple(r.prompt) for r in results.values() if not r.skipped}
    if len(prompts) > 1:
        raise ForgeError("the rows were fed different prompts (the seeded prompt is not stable)")
    load = (load_before, os.getloadavg()[0])
    if note:
        notes.insert(0, note)
    rows = {r: results[r] for r in wanted}
    return GenerateReport(spec, cpu_description(family=True), rows, load, notes)
