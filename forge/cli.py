"""`forge`: the ML engineer's entry point.

  forge import MODEL [--seq N] [--tiny] [-o FILE]   capture + import, print the npu IR
  forge models [--tiny] [--seq N]                   op counts and capture/import times
  forge check MODEL... [--tiny] [--optimize]        imported (optimized) IR vs eager PyTorch
  forge optimize [MODEL...] [--tiny]                Phase 2 report, node reduction, fusion
  forge plan [MODEL...] [--tiny]                    Phases 3-4: placement, buffers, transitions
  forge compile [MODEL] [--precision P] [--runs K]  compile to NNFactory, run, time vs eager
  forge bench [MODEL] [--backends B,...]            vs eager, inductor, OpenVINO, ONNX Runtime
  forge ablate MODEL...                             the pipeline with each pass removed
  forge autotune MODEL...                           cost-model search over alpha/layout/precision
  forge calibrate                                   fit the cost model to measured latency
  forge report [--bench FILE]                       PNG plots of passes, buffers, bench
  forge fuzz-ir / fuzz-models [--cases N]           differential and IR fuzzing
  forge doctor                                      NNFactory smoke test on this machine

MODEL is one of the built-in names (`forge models` lists them) or
`path/to/file.py:factory`, where `factory()` returns `(model, example_args)` or
`(model, example_args, example_kwargs)`, or a transformers causal LM.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from forge.diagnostics import ForgeError, one_line, report

TOOL = "forge"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise ForgeError(one_line(message))


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="forge", description="Forge graph compiler")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    imp = sub.add_parser("import", help="capture a model and print its npu IR")
    imp.add_argument("model", help="a built-in model name or path/to/file.py:factory")
    imp.add_argument("--seq", type=int, default=128, help="sequence length (default 128)")
    imp.add_argument("--tiny", action="store_true", help="the tiny variant of a built-in model")
    imp.add_argument("-o", "--output", help="write the IR here instead of stdout")

    models = sub.add_parser("models", help="op counts and capture/import times of the models")
    models.add_argument("--tiny", action="store_true")
    models.add_argument("--seq", type=int, default=128)
    models.add_argument("names", nargs="*", help="models to include (default: all six)")

    check = sub.add_parser("check", help="execute the imported IR and compare with eager")
    check.add_argument("models", nargs="+")
    check.add_argument("--tiny", action="store_true")
    check.add_argument("--seq", type=int, default=128)
    check.add_argument("--inputs", type=int, default=3, help="random inputs per model")

    opt = sub.add_parser("optimize", help="Phase 2 per-pass report and node reduction")
    opt.add_argument("names", nargs="*", help="models (default: all six)")
    opt.add_argument("--tiny", action="store_true")
    opt.add_argument("--seq", type=int, default=128)
    opt.add_argument("--iterations", type=int, default=2)
    opt.add_argument("--alpha", type=float, default=1.0)
    opt.add_argument("--layout", default="auto", choices=["auto", "contiguous", "channels-last"])
    opt.add_argument("--quiet", action="store_true", help="only the summary table")

    check.add_argument(
        "--optimize", action="store_true", help="run npu-optimize before executing the IR"
    )

    plan = sub.add_parser("plan", help="Phases 3-4: devices, buffers, transitions")
    plan.add_argument("names", nargs="*", help="models (default: all six)")
    plan.add_argument("--tiny", action="store_true")
    plan.add_argument("--seq", type=int, default=128)

    comp = sub.add_parser("compile", help="compile to NNFactory segments, run and time vs eager")
    comp.add_argument("model", nargs="?", default="gpt2", help="model (default gpt2)")
    comp.add_argument("--seq", type=int, default=128)
    comp.add_argument("--precision", default="fp32", choices=["fp32", "fp16", "int8", "mixed"])
    comp.add_argument("--granularity", default="segment", choices=["segment", "op"])
    comp.add_argument("--tiny", action="store_true")
    comp.add_argument("--runs", type=int, default=10, help="timed runs (default 10)")

    fuzz = sub.add_parser("fuzz-ir", help="mutated .mlir through forge-opt: no tracebacks")
    fuzz.add_argument("--cases", type=int, default=200)
    fuzz.add_argument("--seed", type=int, default=0)
    fuzz.add_argument("--pipeline", default="forge-pipeline")
    fuzz.add_argument("--workdir", default="build/fuzz-ir", help="mutants and failures go here")
    fuzz.add_argument(
        "--save-regressions",
        action="store_true",
        help="also copy shrunk failures as lit tests to test/forge-opt/regressions",
    )
    fuzz.add_argument("--no-shrink", action="store_true", help="keep failures as found")

    fuzzm = sub.add_parser("fuzz-models", help="random PyTorch modules vs eager, compiled")
    fuzzm.add_argument("--cases", type=int, default=100)
    fuzzm.add_argument("--seed", type=int, default=0)
    fuzzm.add_argument(
        "--save-dir",
        default=None,
        help="where shrunk failures go as JSON specs (default test/python/regressions/models)",
    )
    fuzzm.add_argument("--no-shrink", action="store_true", help="report failures unshrunk")

    bench = sub.add_parser(
        "bench", help="compile time and latency vs eager, inductor, OpenVINO, ONNX Runtime"
    )
    bench.add_argument("model", nargs="?", default="gpt2", help="model (default gpt2)")
    bench.add_argument("--seq", type=int, default=128)
    bench.add_argument("--tiny", action="store_true")
    bench.add_argument("--runs", type=int, default=40, help="timed runs per backend (default 40)")
    bench.add_argument("--threads", type=int, default=None, help="default: all cores")
    bench.add_argument(
        "--backends",
        default="all",
        help="comma-separated subset of forge,forge-op,eager,inductor,openvino,onnxruntime",
    )
    bench.add_argument("--json", dest="json_path", help="also write the results here")
    bench.add_argument(
        "--compile-repeats",
        type=int,
        default=3,
        help="fresh-process compiles per backend; the median is reported (default 3)",
    )
    bench.add_argument(
        "--rounds", type=int, default=10, help="interleaved timing rounds (default 10)"
    )

    rep = sub.add_parser("report", help="PNG plots: passes, buffers, transitions, bench results")
    rep.add_argument(
        "--model", action="append", help="a model to plan and plot (repeatable; default gpt2)"
    )
    rep.add_argument("--tiny", action="store_true")
    rep.add_argument("--seq", type=int, default=128)
    rep.add_argument("--bench", help="results of `forge bench --json FILE` to plot")
    rep.add_argument("--bench-only", action="store_true", help="plot --bench only, no model")
    rep.add_argument("-o", "--output", default="build/report", help="directory for the PNGs")

    abl = sub.add_parser("ablate", help="the pipeline with each pass removed in turn")
    abl.add_argument("models", nargs="+")
    abl.add_argument("--tiny", action="store_true")
    abl.add_argument("--seq", type=int, default=128)
    abl.add_argument("--precision", default="fp16", choices=["fp32", "fp16", "int8", "mixed"])
    abl.add_argument("--passes", help="comma-separated passes to remove (default: all)")
    abl.add_argument("--latency", action="store_true", help="also run each variant")
    abl.add_argument("--runs", type=int, default=3, help="timed runs with --latency")
    abl.add_argument("--cost-model", help="weights JSON (default: calibrated, else unit)")

    tune = sub.add_parser("autotune", help="cost-model grid search over Phase-2 options")
    tune.add_argument("models", nargs="+")
    tune.add_argument("--tiny", action="store_true")
    tune.add_argument("--seq", type=int, default=128)
    tune.add_argument("--full", action="store_true", help="also iterations 1 and 3 (135)")
    tune.add_argument("--top", type=int, default=10, help="ranked rows to print")
    tune.add_argument("--all", action="store_true", help="print every configuration")
    tune.add_argument("--cost-model", help="weights JSON (default: calibrated, else unit)")

    cal = sub.add_parser("calibrate", help="fit the cost model to latencies measured here")
    cal.add_argument("--points", type=int, default=144, help="(model, config) points to time")
    cal.add_argument("--models", help="comma-separated built-in models (default: all six, tiny)")
    cal.add_argument("--seqs", default="128", help="sequence lengths (default 128)")
    cal.add_argument("--depths", default="1,2,4", help="layer multipliers of the tiny models")
    cal.add_argument("--full", action="store_true", help="also full-size gpt2")
    cal.add_argument("--rounds", type=int, default=5, help="interleaved timing rounds")
    cal.add_argument("--runs", type=int, default=5, help="calls per point per round")
    cal.add_argument("--holdout", type=float, default=0.3, help="held-out configurations")
    cal.add_argument("--seed", type=int, default=0)
    cal.add_argument("-o", "--output", help="weights JSON (default $FORGE_COST_MODEL or ~/.cache)")
    cal.add_argument("--no-save", action="store_true", help="report only")

    sub.add_parser("doctor", help="build, compile and run a real NNFactory graph here")
    return parser


@dataclass
class Loaded:
    name: str
    model: Any
    args: tuple[Any, ...]
    kwargs: dict[str, Any]


def load_model(reference: str, tiny: bool, seq: int, seed: int = 0) -> Loaded:
    from forge import models

    if reference in models.SPECS:
        model = models.build_model(reference, tiny=tiny, seed=seed)
        args, kwargs = models.example_inputs(model, seq=seq)
        return Loaded(reference, model, args, kwargs)
    made = models.load_factory(reference)()
    if isinstance(made, tuple) and len(made) in (2, 3):
        model, args, *rest = made
        return Loaded(reference, model, tuple(args), dict(rest[0]) if rest else {})
    if hasattr(made, "config") and hasattr(made.config, "vocab_size"):
        args, kwargs = models.example_inputs(made, seq=seq)
        return Loaded(reference, made, args, kwargs)
    raise ForgeError(
        f"{reference}: factory must return (model, example_args[, example_kwargs]) "
        "or a transformers causal LM"
    )


def cmd_import(ns: argparse.Namespace) -> int:
    from forge.capture import capture
    from forge.importer import import_program

    loaded = load_model(ns.model, ns.tiny, ns.seq)
    captured = capture(loaded.model, loaded.args, example_kwargs=loaded.kwargs)
    program = import_program(captured)
    text = str(program.module) + "\n"
    if ns.output:
        with open(ns.output, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    for note in program.notes:
        print(f"note: {note}", file=sys.stderr)
    print(
        f"{loaded.name}: {program.op_count()} ops, {len(program.weight_names)} weight arguments; "
        f"torch.export {captured.export_seconds:.3f} s, import {program.import_seconds:.3f} s",
        file=sys.stderr,
    )
    return 0


def cmd_models(ns: argparse.Namespace) -> int:
    from forge import models
    from forge.capture import capture
    from forge.importer import import_program

    names = ns.names or list(models.SPECS)
    print(
        f"{'model':<14}{'device':>7}{'params':>15}{'FX nodes':>10}{'npu ops':>9}"
        f"{'attn layers':>13}{'export s':>10}{'import s':>10}"
    )
    for name in names:
        spec = models.get_spec(name)
        loaded = load_model(name, ns.tiny, ns.seq)
        params = sum(p.numel() for p in loaded.model.parameters())
        captured = capture(loaded.model, loaded.args, example_kwargs=loaded.kwargs)
        program = import_program(captured)
        device = next(loaded.model.parameters()).device.type
        fx_nodes = sum(1 for n in captured.exported.graph.nodes if n.op == "call_function")
        print(
            f"{name:<14}{device:>7}{params:>15,}{fx_nodes:>10}{program.op_count():>9}"
            f"{spec.attention_layers(ns.tiny):>13}{captured.export_seconds:>10.3f}"
            f"{program.import_seconds:>10.3f}",
            flush=True,
        )
    return 0


def cmd_check(ns: argparse.Namespace) -> int:
    from forge.capture import capture
    from forge.importer import import_program
    from forge.numerics import compare_logits
    from forge.reference import ReferenceExecutor

    failed = 0
    for name in ns.models:
        loaded = load_model(name, ns.tiny, ns.seq)
        captured = capture(loaded.model, loaded.args, example_kwargs=loaded.kwargs)
        program = import_program(captured)
        stage = "imported"
        if ns.optimize:
            from forge.transforms.npu_optimize import optimize

            optimize(program.module)
            program.module.verify()
            stage = "optimized"
        executor = ReferenceExecutor(program.function, program.weights, len(program.input_names))
        worst = compare_logits(loaded, executor, ns.inputs)
        ok = worst.max_abs <= 1e-5 and worst.top1 == 1.0
        failed += not ok
        print(
            f"{name} ({stage}): {'ok' if ok else 'MISMATCH'} over {ns.inputs} random inputs "
            f"(seq {ns.seq}): "
            f"fp32 max-abs logit diff {worst.max_abs:.3e} (limit 1e-05), "
            f"top-1 agreement {worst.top1 * 100:.2f}%",
            flush=True,
        )
    return 1 if failed else 0


def cmd_optimize(ns: argparse.Namespace) -> int:
    from forge import models
    from forge.capture import capture
    from forge.dialects import npu
    from forge.importer import import_program
    from forge.transforms.npu_optimize import optimize

    names = ns.names or list(models.SPECS)
    summary = []
    for name in names:
        loaded = load_model(name, ns.tiny, ns.seq)
        program = import_program(capture(loaded.model, loaded.args, example_kwargs=loaded.kwargs))
        report = optimize(program.module, ns.iterations, ns.alpha, ns.layout)
        program.module.verify()
        fused = sum(1 for op in program.module.walk() if isinstance(op, npu.SDPAOp))
        layers = models.get_spec(name).attention_layers(ns.tiny) if name in models.SPECS else 0
        summary.append((name, report, fused, layers))
        if not ns.quiet:
            print(f"== {name}\n{report.format()}\n", flush=True)
    print(
        f"{'model':<14}{'ops before':>11}{'ops after':>10}{'reduction':>11}{'sdpa':>6}"
        f"{'attn layers':>13}{'optimize ms':>13}"
    )
    for name, report, fused, layers in summary:
        print(
            f"{name:<14}{report.ops_before:>11}{report.ops_after:>10}"
            f"{report.reduction * 100:>10.1f}%{fused:>6}{layers:>13}{report.seconds * 1e3:>13.1f}"
        )
    mean = sum(r.reduction for _, r, _, _ in summary) / len(summary)
    print(f"{'average':<14}{'':>21}{mean * 100:>10.1f}%")
    unfused = [name for name, _, fused, layers in summary if fused != layers]
    return 1 if unfused else 0


def cmd_plan(ns: argparse.Namespace) -> int:
    from forge import models
    from forge.capture import capture
    from forge.importer import import_program
    from forge.pipeline import plan

    mib = 1 << 20
    print(
        f"{'model':<14}{'npu/cpu ops':>12}{'vregs':>7}{'owning':>8}{'buffers':>8}{'rho_buf':>8}"
        f"{'planned MiB':>12}{'bound MiB':>10}{'ratio':>7}{'transitions':>13}{'phase3-4 ms':>12}"
    )
    for name in ns.names or list(models.SPECS):
        loaded = load_model(name, ns.tiny, ns.seq)
        program = import_program(capture(loaded.model, loaded.args, example_kwargs=loaded.kwargs))
        report = plan(program.module)
        program.module.verify()
        p, s, a = report.placement, report.schedule, report.allocation
        print(
            f"{name:<14}{f'{p.npu_ops}/{p.cpu_ops}':>12}{a.vregs:>7}{a.allocated_values:>8}"
            f"{a.buffers:>8}{a.rho_buf:>8.3f}{a.planned_bytes / mib:>12.2f}"
            f"{a.lower_bound_bytes / mib:>10.2f}{a.ratio:>7.3f}"
            f"{f'{s.transitions_before} -> {s.transitions_after}':>13}"
            f"{report.phase34_seconds * 1e3:>12.1f}",
            flush=True,
        )
    return 0


def _latency(run: Any, runs: int) -> tuple[float, float, float]:
    """(mean, P50, P99) wall time of `run()` in milliseconds over `runs` calls."""
    from forge.bench import summarize, timed_runs

    figures = summarize(timed_runs(run, runs))
    return figures["mean"], figures["p50"], figures["p99"]


def cmd_compile(ns: argparse.Namespace) -> int:
    import torch

    from forge.executor import compile_model
    from forge.numerics import agreement, eager_outputs, ordered_inputs, random_like, worst

    if ns.runs < 1:
        raise ForgeError("--runs must be at least 1")
    mib = 1 << 20
    print(f"loading {ns.model}{' (tiny)' if ns.tiny else ''}, seq {ns.seq} ...", flush=True)
    loaded = load_model(ns.model, ns.tiny, ns.seq)
    print("compiling (export, import, optimize, phases 3-4, NNFactory) ...", flush=True)
    executor, rep = compile_model(
        loaded.model, loaded.args, loaded.kwargs, ns.precision, ns.granularity
    )
    p, s, a = rep.plan.placement, rep.plan.schedule, rep.plan.allocation
    print(f"== Phase 2\n{rep.plan.optimize.format()}\n")
    print(
        f"placement: {p.npu_ops} npu / {p.cpu_ops} cpu ops; "
        f"{rep.segments} NNFactory segment(s) ({ns.granularity}), {rep.npu_ops} NPU ops, "
        f"{rep.fallback_ops} fallback op(s)"
    )
    print(
        f"buffers: {a.vregs} vregs, {a.allocated_values} owning, {a.buffers} buffers, "
        f"rho_buf {a.rho_buf:.3f}, planned {a.planned_bytes / mib:.2f} MiB "
        f"(bound {a.lower_bound_bytes / mib:.2f} MiB, ratio {a.ratio:.3f})"
    )
    print(f"transitions: {s.transitions_before} -> {s.transitions_after}")
    if executor.arena is not None:
        print(
            f"arena: {executor.arena.numel() / mib:.2f} MiB allocated once; "
            f"{executor.arena_values} intermediate(s) live in their linear-scan buffers"
        )
    for note in rep.notes:
        print(f"note: {note}")
    print(f"compile time ({ns.precision}):\n{rep.format_times()}", flush=True)

    vocab = getattr(getattr(loaded.model, "config", None), "vocab_size", None)
    generator = torch.Generator().manual_seed(1)
    args = [
        random_like(x, generator, vocab if i == 0 else None) if isinstance(x, torch.Tensor) else x
        for i, x in enumerate(loaded.args)
    ]
    inputs = ordered_inputs(loaded.model, args, loaded.kwargs, executor.input_names)
    print(f"running on a random prompt: {ns.runs} run(s) each ...", flush=True)
    actual = executor(*inputs)  # warm-up
    expected = eager_outputs(loaded.model, args, loaded.kwargs)
    forge_ms = _latency(lambda: executor(*inputs), ns.runs)
    stats = executor.stats
    with torch.no_grad():
        eager_ms = _latency(lambda: loaded.model(*args, **loaded.kwargs), ns.runs)
    for label, (mean, p50, p99) in (("forge", forge_ms), ("eager", eager_ms)):
        print(f"latency {label}: mean {mean:.2f} ms, P50 {p50:.2f} ms, P99 {p99:.2f} ms")
    print(f"speedup vs eager (mean): {eager_ms[0] / forge_ms[0]:.2f}x")
    agree = worst([agreement(e, x) for e, x in zip(expected, actual, strict=True)])
    print(
        f"vs eager: max-abs logit diff {agree.max_abs:.3e}, KL {agree.kl:.3e}, "
        f"top-1 agreement {agree.top1 * 100:.2f}%; "
        f"per run {stats.dispatches} dispatches, {stats.transitions} transitions, "
        f"{stats.bytes_moved / mib:.2f} MiB in/out of NNFactory",
        flush=True,
    )
    return 0


def cmd_fuzz_ir(ns: argparse.Namespace) -> int:
    from pathlib import Path

    from forge.fuzz import REGRESSIONS, fuzz

    root = Path(__file__).resolve().parents[1]
    save_dir = root / REGRESSIONS if ns.save_regressions else None
    result = fuzz(
        root,
        ns.cases,
        ns.seed,
        ns.pipeline,
        Path(ns.workdir),
        shrink=not ns.no_shrink,
        save_dir=save_dir,
    )
    print(result.summary())
    for outcome, where in result.failures:
        print(f"  {outcome}: {where}")
    for path in result.regressions:
        print(f"  shrunk: {path}")
    return 1 if result.bad else 0


def cmd_fuzz_models(ns: argparse.Namespace) -> int:
    from pathlib import Path

    from forge.fuzz_models import REGRESSIONS, fuzz_models

    root = Path(__file__).resolve().parents[1]
    save_dir = Path(ns.save_dir) if ns.save_dir else root / REGRESSIONS
    result = fuzz_models(ns.cases, ns.seed, save_dir=save_dir, shrink_failures=not ns.no_shrink)
    print(result.summary())
    for failure in result.failures:
        print(f"  {failure.format()}")
    return 1 if result.failures else 0


def cmd_bench(ns: argparse.Namespace) -> int:
    import json

    from forge.bench import BACKENDS, run_bench

    backends = BACKENDS if ns.backends == "all" else tuple(ns.backends.split(","))
    report = run_bench(
        ns.model,
        backends,
        seq=ns.seq,
        runs=ns.runs,
        threads=ns.threads,
        tiny=ns.tiny,
        progress=lambda line: print(line, flush=True),
        rounds=ns.rounds,
        compile_repeats=ns.compile_repeats,
    )
    print(report.format())
    if ns.json_path:
        with open(ns.json_path, "w") as f:
            json.dump(report.to_json(), f, indent=2)
        print(f"wrote {ns.json_path}")
    failed = [r for r in report.results.values() if r.skipped.startswith("failed")]
    return 1 if failed or (report.ran("forge") is None and "forge" in backends) else 0


def cmd_report(ns: argparse.Namespace) -> int:
    from forge.report import cmd_report as run

    return run(ns)


def cmd_doctor(ns: argparse.Namespace) -> int:
    from forge.nnfactory import smoke_test

    result = smoke_test()
    print(result.summary())
    return 0 if result.ok else 1


COMMANDS = {
    "import": cmd_import,
    "models": cmd_models,
    "check": cmd_check,
    "optimize": cmd_optimize,
    "plan": cmd_plan,
    "fuzz-ir": cmd_fuzz_ir,
    "fuzz-models": cmd_fuzz_models,
    "compile": cmd_compile,
    "bench": cmd_bench,
    "report": cmd_report,
    "doctor": cmd_doctor,
    "ablate": lambda ns: __import__("forge.ablate", fromlist=["main"]).main(ns),
    "autotune": lambda ns: __import__("forge.autotune", fromlist=["main"]).main(ns),
    "calibrate": lambda ns: __import__("forge.calibrate", fromlist=["main"]).main(ns),
}


def main(argv: Sequence[str] | None = None) -> int:
    try:
        ns = build_parser().parse_args(argv)
        _quiet_transformers()
        return COMMANDS[ns.command](ns)
    except ForgeError as e:
        return report(e, TOOL)
    except KeyboardInterrupt:
        return 130
    except Exception as e:
        if os.environ.get("FORGE_TRACEBACK"):
            raise
        return report(
            ForgeError(
                f"internal error: {type(e).__name__}: {one_line(str(e))} "
                "(FORGE_TRACEBACK=1 shows the trace)"
            ),
            TOOL,
        )


def _quiet_transformers() -> None:
    try:
        import transformers

        transformers.logging.set_verbosity_error()
    except ImportError:
        pass


if __name__ == "__main__":
    sys.exit(main())
