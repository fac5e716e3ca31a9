"""`forge compile`: compile to NNFactory segments, run and time vs eager."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from forge.dialects.precisions import PROGRAM_PRECISIONS
from forge.frontend.checkpoint import add_loading_flags, loading_options
from forge.support import flags
from forge.support.diagnostics import ForgeError

FEW_FALLBACKS = 3
"""More NPU-placed ops than this falling back to the CPU is a warning, not a note."""


def add_parser(sub: Any) -> None:
    parser = sub.add_parser("compile", help="compile to NNFactory segments, run and time vs eager")
    parser.add_argument("model", nargs="?", default="gpt2", help="model (default gpt2)")
    parser.add_argument("--seq", type=flags.count, default=128)
    parser.add_argument("--precision", default="fp32", choices=PROGRAM_PRECISIONS)
    parser.add_argument("--granularity", default="segment", choices=["segment", "op"])
    parser.add_argument(
        "--weight-only",
        action="store_true",
        help="with --precision int8: keep the activations fp32 everywhere (default: "
        "quantized at run time where the host profile measured that faster)",
    )
    parser.add_argument("--tiny", action="store_true")
    add_loading_flags(parser)
    parser.add_argument("--runs", type=flags.count, default=10, help="timed runs (default 10)")
    parser.add_argument(
        "--no-cache",
        action="store_true",
        help="compile from scratch and store nothing (default: the compile cache, "
        "`forge cache ls`)",
    )


def weight_only_option(ns: argparse.Namespace) -> bool | None:
    """`--weight-only` as `compile_model`'s `dynamic_quantized` (False; else None: the
    host profile decides); it needs int8 weights."""
    if not ns.weight_only:
        return None
    if ns.precision != "int8":
        raise ForgeError(f"--weight-only needs --precision int8, got {ns.precision}")
    return False


def run(ns: argparse.Namespace) -> int:
    # Imported when the command runs, not at `forge` start-up (torch and xDSL take seconds).
    import torch

    from forge.devtools.numerics import Sample, agreement, eager_outputs, random_args, worst
    from forge.frontend.loading import load_model, ordered_inputs
    from forge.runtime.agreement import FP32_LIMIT, judge_samples
    from forge.runtime.cache_files import plan_summary
    from forge.runtime.compile import compile_model

    if ns.runs < 1:
        raise ForgeError("--runs must be at least 1")
    mib = 1 << 20
    print(f"loading {ns.model}{' (tiny)' if ns.tiny else ''}, seq {ns.seq} ...", flush=True)
    loaded = load_model(ns.model, ns.tiny, ns.seq, **loading_options(ns))
    print("compiling (export, import, optimize, phases 3-4, NNFactory) ...", flush=True)
    executor, rep = compile_model(
        loaded.model,
        loaded.args,
        loaded.kwargs,
        ns.precision,
        ns.granularity,
        cache=not ns.no_cache,
        dynamic_quantized=weight_only_option(ns),
    )
    _print_cache(rep, asked=not ns.no_cache)
    # A cache hit ran no pipeline: its figures are the ones stored with the entry.
    summary = rep.plan_summary if rep.plan is None else plan_summary(rep.plan)
    p, a = summary["placement"], summary["allocation"]
    print(f"== Phase 2{' (cached)' if rep.plan is None else ''}\n{summary['phase2']}\n")
    print(
        f"placement: {p['npu_ops']} npu / {p['cpu_ops']} cpu ops; "
        f"{rep.segments} NNFactory segment(s) ({ns.granularity}), {rep.npu_ops} NPU ops, "
        f"{rep.fallback_ops} fallback op(s)"
    )
    for reason, count in p["measured"].items():  # the host profile's linear decisions
        print(f"  {'' if count == 1 else f'{count}x '}{reason}")
    print(
        f"buffers: {a['vregs']} vregs, {a['allocated_values']} owning, {a['buffers']} "
        f"buffers, rho_buf {a['rho_buf']:.3f}, planned {a['planned_bytes'] / mib:.2f} MiB "
        f"(bound {a['lower_bound_bytes'] / mib:.2f} MiB, ratio {a['ratio']:.3f})"
    )
    total_ops = p["npu_ops"] + p["cpu_ops"]
    share = rep.npu_ops / total_ops if total_ops else 0.0
    print(f"ran in NNFactory: {rep.npu_ops} of {total_ops} ops ({share * 100:.1f}%)")
    before, after = summary["transitions"]
    print(f"transitions: {before} -> {after}")
    if executor.arena is not None:
        print(
            f"arena: {executor.arena.numel() / mib:.2f} MiB allocated once; "
            f"{executor.arena_values} intermediate(s) live in their linear-scan buffers"
        )
    for note in rep.notes:
        fell_back = "NPU-placed op(s) run on the CPU" in note
        loud = fell_back and rep.fallback_ops > FEW_FALLBACKS
        print(f"{'warning' if loud else 'note'}: {note}", file=sys.stderr if loud else sys.stdout)
    print(f"compile time ({ns.precision}):\n{rep.format_times()}", flush=True)
    _print_peak_rss(loaded.model)

    args = random_args(loaded.model, loaded.args, torch.Generator().manual_seed(1))
    inputs = ordered_inputs(loaded.model, args, loaded.kwargs, executor.input_names)
    print(f"running on a random prompt: {ns.runs} run(s) each ...", flush=True)
    # Forge and eager start from the same state: buffers the model mutates (counters,
    # BatchNorm statistics) are restored between them, then compared too.
    initial = {name: b.detach().clone() for name, b in loaded.model.named_buffers()}
    actual = executor(*inputs)  # warm-up
    after_forge = {name: b.detach().clone() for name, b in loaded.model.named_buffers()}
    _restore(loaded.model, initial)
    expected = eager_outputs(loaded.model, args, loaded.kwargs)
    state = [
        agreement(b.detach(), after_forge[name])
        for name, b in loaded.model.named_buffers()
        if not torch.equal(initial[name], b)
    ]
    forge_ms = _latency(lambda: executor(*inputs), ns.runs)
    stats = executor.stats
    with torch.no_grad():
        eager_ms = _latency(lambda: loaded.model(*args, **loaded.kwargs), ns.runs)
    for label, (mean, p50, p99) in (("forge", forge_ms), ("eager", eager_ms)):
        print(f"latency {label}: mean {mean:.2f} ms, P50 {p50:.2f} ms, P99 {p99:.2f} ms")
    print(f"speedup vs eager (mean): {eager_ms[0] / forge_ms[0]:.2f}x")
    seen = [Sample(args, expected, list(actual))]
    agree, verdict = judge_samples(loaded.model, seen, loaded.kwargs, executor.precision)
    print(
        f"vs eager: max-abs logit diff {agree.max_abs:.3e}, KL {agree.kl:.3e}, "
        f"top-1 agreement {agree.top1 * 100:.2f}%; "
        f"per run {stats.dispatches} dispatches, {stats.transitions} transitions, "
        f"{stats.bytes_moved / mib:.2f} MiB in/out of NNFactory",
        flush=True,
    )
    if state:
        print(
            f"state: {len(state)} buffer(s) updated in place as eager does, "
            f"max-abs diff {worst(state).max_abs:.3e}"
        )
    # State is judged at fp32 only: narrow weights move BatchNorm statistics by design.
    state_ok = not state or executor.precision != "fp32" or worst(state).max_abs <= FP32_LIMIT
    print(f"check: {verdict.word if state_ok else 'MISMATCH'} ({verdict.rule})", flush=True)
    return 0 if verdict.ok and state_ok else 1


def _print_cache(rep: Any, asked: bool) -> None:
    """One line: what the compile cache did (`asked`: it was not turned off)."""
    if rep.cache == "off":
        why = "its folder cannot be used: see the warning" if asked else "--no-cache"
        print(f"compile cache: off ({why})")
        return
    entry = rep.cache_entry[:12]
    source = f"key from {rep.cache_key_from}"
    if rep.cache == "hit":
        skipped = "import nor pipeline" if rep.export_seconds else "export, import nor pipeline"
        print(
            f"compile cache: hit, entry {entry} (key {rep.cache_key_seconds:.3f} s, "
            f"load {rep.cache_load_seconds:.3f} s; no {skipped}; {source})"
        )
        return
    if not rep.cache_stored:
        print(f"compile cache: miss, nothing stored ({source})")
        return
    print(
        f"compile cache: miss, stored entry {entry} (key {rep.cache_key_seconds:.3f} s, "
        f"store {rep.cache_store_seconds:.3f} s; {source})"
    )


def _restore(model: Any, state: dict[str, Any]) -> None:
    import torch

    with torch.no_grad():
        for name, buffer in model.named_buffers():
            buffer.copy_(state[name])


def _latency(run: Any, runs: int) -> tuple[float, float, float]:
    """(mean, P50, P99) wall time of `run()` in milliseconds over `runs` calls."""
    from forge.devtools.bench import summarize, timed_runs

    figures = summarize(timed_runs(run, runs))
    return figures["mean"], figures["p50"], figures["p99"]


def _print_peak_rss(model: Any) -> None:
    """One line: the process's peak RSS so far (VmHWM) against the weights' bytes."""
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
    tensors = {id(t): t for t in (*model.parameters(), *model.buffers())}
    weights = sum(t.numel() * t.element_size() for t in tensors.values())
    mib = 1 << 20
    ratio = f" = {peak / weights:.2f}x" if weights else ""
    print(f"peak RSS after compile: {peak / mib:.0f} MiB (weights {weights / mib:.0f} MiB{ratio})")
