"""The compile driver: key -> lookup -> hit: load; miss: capture, import, plan, build
-> store.

`compile_model` is the one straight path from a `torch.nn.Module` to a ready
`CompiledNPUExecutor`: the build options (`forge.conversion.kernel_choice.BuildOptions`,
made once from the host profile) and the pipeline options are hashed into the compile
cache's key (`compile_cache.entry_key`); a hit loads the entry's planned IR and builds
its graphs under the same options; a miss captures (unless the key already did),
imports, plans and builds, then stores the entry. The cache exposes key, lookup and
store; it calls nothing back.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import time
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from forge.conversion.kernel_choice import BuildOptions
from forge.dialects.context import entry_function
from forge.frontend.capture import Captured, capture
from forge.frontend.importer import import_program
from forge.frontend.loading import ordered_inputs
from forge.runtime.build_notes import QUANTIZED_NOTES, kernel_notes
from forge.runtime.compile_cache import (
    CachedProgram,
    CompileCache,
    EntryKey,
    blob_folder,
    entry_key,
    note,
    open_cache,
)
from forge.runtime.executor import CompiledNPUExecutor
from forge.runtime.host_profile import load_host_profile
from forge.runtime.precision import measure_mixed_precision
from forge.support.collector import collector_paused
from forge.support.diagnostics import ForgeError
from forge.transforms.forge_pipeline import ForgePipelinePass, plan
from forge.transforms.host_profile import load_profile
from forge.transforms.npu_linear_scan import allocate


@dataclass
class CompileReport:
    """What `compile_model` did and how long each phase took (seconds)."""

    plan: Any
    """The `forge.transforms.forge_pipeline.PlanReport` (Phase 2, placement, schedule,
    allocation)."""
    export_seconds: float
    import_seconds: float
    optimize_seconds: float
    """Phase 2 (npu-optimize)."""
    phase34_seconds: float
    """Placement, scheduling, vregs, liveness and buffer allocation."""
    conversion_seconds: float
    """Building the executor, NNFactory graph builds and compiles included."""
    nnfactory_compile_seconds: float
    """The part of `conversion_seconds` spent building and compiling NNFactory graphs."""
    segments: int
    npu_ops: int
    fallback_ops: int
    input_names: list[str]
    notes: list[str] = field(default_factory=list)
    in_spec: Any = None
    """torch.export's pytree spec of the example `(args, kwargs)`: its leaves, in order, are
    the tensor inputs (`input_names`) and the constants in `input_constants`."""
    out_spec: Any = None
    """torch.export's pytree spec of the model's output: its leaves, in order, are the
    executor's results and the constants in `output_constants`."""
    input_constants: dict[int, Any] = field(default_factory=dict)
    """Leaf index of `in_spec` -> the non-tensor value (`use_cache=False`, an int, ...)
    torch.export specialized the graph to; the executor takes no argument for it."""
    output_constants: dict[int, Any] = field(default_factory=dict)
    """Leaf index of `out_spec` -> the non-tensor value the model returns there (the
    executor returns tensors only)."""
    cache: str = "off"
    """The compile cache: "hit" (no import nor pipeline ran, nor the export when the key
    came from the model object: `plan` is None and `plan_summary` holds its figures),
    "miss" (compiled; `cache_stored` says whether the entry was stored) or "off"."""
    cache_entry: str = ""
    """The cache entry's key (its folder's name) when the cache was on."""
    cache_key_from: str = ""
    """What the key was computed from: "the model object", or "the captured program
    (why the object did not prove it)" (`forge.runtime.cache_trust`)."""
    cache_stored: bool = False
    """A miss: whether the entry was stored (a folder that cannot be written, or an
    entry over the limit, is not)."""
    cache_key_seconds: float = 0.0
    """Computing the cache key (weights fingerprint included)."""
    cache_load_seconds: float = 0.0
    """A hit: checking the entry's files and parsing its IR."""
    cache_store_seconds: float = 0.0
    """A miss: writing the entry (checksums of OpenVINO's blobs included)."""
    plan_summary: dict[str, Any] | None = None
    """On a hit, the stored figures of the plan (`cache_files.plan_summary`)."""
    conversion_kernel_seconds: float = 0.0
    """CPU time in the kernel during the conversion (all threads): on a host where new
    memory is slow to touch (a VM whose free pages go back to the hypervisor), most of a
    large model's conversion."""
    conversion_page_faults: int = 0
    """Minor page faults during the conversion (first touches of new memory)."""

    @classmethod
    def of_build(
        cls, executor: CompiledNPUExecutor, notes: list[str], **phases: Any
    ) -> CompileReport:
        """The report of a compile that built `executor`: its figures, `notes` then the
        executor's, and `phases` (the other fields)."""
        return cls(
            conversion_seconds=executor.build_seconds,
            nnfactory_compile_seconds=executor.compile_seconds,
            conversion_kernel_seconds=executor.build_kernel_seconds,
            conversion_page_faults=executor.build_page_faults,
            segments=len(executor.segments),
            npu_ops=executor.npu_ops,
            fallback_ops=executor.fallback_ops,
            notes=[*notes, *executor.notes],
            **phases,
        )

    @property
    def total_seconds(self) -> float:
        return (
            self.export_seconds
            + self.import_seconds
            + self.optimize_seconds
            + self.phase34_seconds
            + self.conversion_seconds
            + self.cache_key_seconds
            + self.cache_load_seconds
            + self.cache_store_seconds
        )

    def format_times(self) -> str:
        rows = [
            ("torch.export", self.export_seconds),
            ("import", self.import_seconds),
            ("optimize (Phase 2)", self.optimize_seconds),
            ("phases 3-4", self.phase34_seconds),
            ("conversion", self.conversion_seconds),
        ]
        lines = [f"  {name:<20}{seconds:>9.3f} s" for name, seconds in rows]
        lines.append(
            f"  {'  of which NNFactory':<20}{self.nnfactory_compile_seconds:>9.3f} s "
            f"({self.segments} segment(s))"
        )
        if self.conversion_page_faults:
            lines.append(
                f"  {'  in the kernel':<20}{self.conversion_kernel_seconds:>9.3f} s "
                f"(CPU time, all threads; {self.conversion_page_faults:,} minor page "
                "faults: first touches of new memory)"
            )
        if self.cache != "off":
            lines.append(f"  {'cache key':<20}{self.cache_key_seconds:>9.3f} s")
            stage = ("cache load", self.cache_load_seconds)
            if self.cache == "miss":
                stage = ("cache store", self.cache_store_seconds)
            lines.append(f"  {stage[0]:<20}{stage[1]:>9.3f} s")
        lines.append(f"  {'total':<20}{self.total_seconds:>9.3f} s")
        return "\n".join(lines)


@dataclass(frozen=True)
class CompileRequest:
    """What a compile is asked for, besides the model and its examples."""

    precision: str
    """The whole-program precision npu-assign-precision writes into the IR."""
    profile: str
    """The host profile's path (placement and the build options' rules)."""
    options: BuildOptions
    pipeline: Mapping[str, Any]
    """forge-pipeline's other options (alpha, layout, iterations, skip)."""
    dynamic_quantized: bool | None
    notes: tuple[str, ...] = ()
    """Notes made before anything compiled (a measured profile, forced quantization)."""

    def key_options(self) -> dict[str, Any]:
        """Every option the compile cache's key holds: the request, with the profile's
        contents (not its path alone: a re-measured profile misses)."""
        return {
            "precision": self.precision,
            "profile": self.profile,
            "profile_digest": hashlib.sha256(Path(self.profile).read_bytes()).hexdigest(),
            "pipeline": dict(self.pipeline),
            "build": dataclasses.asdict(self.options),
            "dynamic_quantized": self.dynamic_quantized,
        }


def compile_model(
    model: torch.nn.Module,
    args: Sequence[Any],
    kwargs: Mapping[str, Any] | None = None,
    precision: str = "fp32",
    granularity: str = "segment",
    profile: str | None = None,
    cache: bool | CompileCache | None = None,
    dynamic_quantized: bool | None = None,
    captured: Captured | None = None,
    pipeline: Mapping[str, Any] | None = None,
) -> tuple[CompiledNPUExecutor, CompileReport]:
    """capture -> import_program -> plan -> CompiledNPUExecutor, timing each phase.

    `dynamic_quantized` (int8 only): True also quantizes the activations of the int8
    MatMuls at run time (`forge.conversion.kernel_choice.BuildOptions.for_host`), no
    longer weight-only int8; False keeps them weight-only; None (the default) does
    what the host profile measured faster for each graph's row count, as OpenVINO's own
    default does on CPUs with int8 kernels (weight-only where nothing was measured).

    `profile` is npu-place-devices' host profile (default: this host's, measured on
    first use and cached, `forge.runtime.host_profile.load_host_profile`).
    `pipeline` are forge-pipeline's other options (alpha, layout, iterations, skip:
    `forge autotune --latency` compiles its configurations so).
    `cache` (off by default; True: `forge.runtime.compile_cache`'s default folder) skips
    everything up to the NNFactory build when the same model, inputs and options were
    compiled before, and lets OpenVINO load its compiled graphs. `captured` is
    torch.export's capture of `model` when it was already made.

    When `model` is garbage-collected, the executor releases the model memory its
    graphs baked in (`CompiledNPUExecutor.release_weights`)."""
    request = _request(precision, granularity, profile, dynamic_quantized, pipeline)
    store = open_cache(cache)
    if store is None:
        return _build(model, args, kwargs, request, captured)
    entry = entry_key(model, args, kwargs, request.key_options())
    with collector_paused():
        hit = store.lookup(entry.key, model)
        if hit is not None:
            return _load(model, hit, request, entry, store)
    staging, why = store.stage(entry.key)
    folder = blob_folder(staging)
    request = dataclasses.replace(
        request, options=dataclasses.replace(request.options, blob_folder=folder)
    )
    try:
        executor, report = _build(model, args, kwargs, request, entry.captured)
    except BaseException:
        if staging is not None:
            store.remove(staging)
        raise
    start = time.perf_counter()
    if staging is not None:
        why = store.store(staging, entry.key, entry.fields, executor, report, model)
    if why is not None:
        note(why)
    report.cache, report.cache_entry, report.cache_key_seconds = "miss", entry.key, entry.seconds
    report.cache_store_seconds = time.perf_counter() - start
    report.cache_stored, report.cache_key_from = why is None, entry.key_from
    return executor, report


def _request(
    precision: str,
    granularity: str,
    profile: str | None,
    dynamic_quantized: bool | None,
    pipeline: Mapping[str, Any] | None,
) -> CompileRequest:
    """The request, checked before anything is captured, with its first notes."""
    notes: list[str] = []
    if dynamic_quantized and precision != "int8":
        raise ForgeError(
            f"dynamic quantization quantizes the activations of int8-weight MatMuls: it "
            f"needs precision 'int8', got '{precision}'"
        )
    if dynamic_quantized is True:
        notes.append(
            f"{QUANTIZED_NOTES[0]} to int8 at run time (dynamic quantization, groups of 32)"
        )
    if profile is None:
        host = load_host_profile()
        profile = str(host.path)
        if host.built:
            notes.append(f"measured this host's profile in {host.load_seconds:.1f} s: {host.path}")
    pipeline = dict(pipeline or {})
    ForgePipelinePass(**pipeline)
    options = BuildOptions.for_host(
        load_profile(profile), dynamic_quantized, granularity=granularity
    )
    return CompileRequest(precision, profile, options, pipeline, dynamic_quantized, tuple(notes))


def _load(
    model: torch.nn.Module,
    hit: CachedProgram,
    request: CompileRequest,
    entry: EntryKey,
    store: CompileCache,
) -> tuple[CompiledNPUExecutor, CompileReport]:
    """The executor of a cache entry: its planned IR, the model's own tensors, built
    under the request's options (the entry's key holds them)."""
    function = entry_function(hit.module)
    options = dataclasses.replace(request.options, blob_folder=blob_folder(hit.path))
    executor = CompiledNPUExecutor(
        function, hit.weights, hit.num_inputs, options, allocation=allocate(function)
    )
    store.touch(hit)
    export = entry.captured.export_seconds if entry.captured is not None else 0.0
    return _release_when_collected(model, executor), CompileReport.of_build(
        executor,
        list(hit.meta["notes"]),
        plan=None,
        export_seconds=export,
        import_seconds=0.0,
        optimize_seconds=0.0,
        phase34_seconds=0.0,
        input_names=list(hit.meta["input_names"]),
        in_spec=hit.in_spec,
        out_spec=hit.out_spec,
        input_constants=hit.input_constants,
        output_constants=hit.output_constants,
        plan_summary=hit.meta["summary"],
        cache="hit",
        cache_entry=entry.key,
        cache_key_seconds=entry.seconds,
        cache_load_seconds=hit.load_seconds,
        cache_key_from=entry.key_from,
    )


def _build(
    model: torch.nn.Module,
    args: Sequence[Any],
    kwargs: Mapping[str, Any] | None,
    request: CompileRequest,
    captured: Captured | None,
) -> tuple[CompiledNPUExecutor, CompileReport]:
    """The miss: capture (unless `captured`), import, plan, build."""
    if captured is None:
        captured = capture(model, tuple(args), example_kwargs=dict(kwargs or {}))
    program = import_program(captured)
    notes = [*request.notes, *program.notes]
    start = time.perf_counter()
    fp16_weights = None
    if request.precision == "mixed":
        inputs = ordered_inputs(model, args, dict(kwargs or {}), program.input_names)
        mixed = measure_mixed_precision(program.function, program.weights, inputs)
        fp16_weights = mixed.fp16_weights
        notes.append(mixed.note())
    report = plan(
        program.module,
        **request.pipeline,
        profile=request.profile,
        precision=request.precision,
        fp16_weights=fp16_weights,
    )
    plan_seconds = time.perf_counter() - start
    program.module.verify()
    executor = CompiledNPUExecutor(
        program.function,
        program.weights,
        len(program.input_names),
        options=request.options,
        allocation=report.allocation,
    )
    forced = request.dynamic_quantized
    profile = load_profile(request.profile)
    notes += kernel_notes(executor.decisions, profile, request.precision, forced)
    return _release_when_collected(model, executor), CompileReport.of_build(
        executor,
        notes,
        plan=report,
        export_seconds=captured.export_seconds,
        import_seconds=program.import_seconds,
        optimize_seconds=max(0.0, plan_seconds - report.phase34_seconds),
        phase34_seconds=report.phase34_seconds,
        input_names=list(program.input_names),
        **_specs(captured),
    )


def _specs(captured: Captured) -> dict[str, Any]:
    """torch.export's pytree specs of the program, and the non-tensor inputs and outputs
    it specialized (`CompileReport.in_spec` and the fields after it)."""
    exported = captured.exported
    kinds = torch.export.graph_signature  # InputKind, OutputKind, ConstantArgument
    signature = exported.graph_signature
    user_inputs = [s.arg for s in signature.input_specs if s.kind == kinds.InputKind.USER_INPUT]
    user_outputs = [s.arg for s in signature.output_specs if s.kind == kinds.OutputKind.USER_OUTPUT]
    constant = kinds.ConstantArgument
    return {
        "in_spec": exported.call_spec.in_spec,
        "out_spec": exported.call_spec.out_spec,
        "input_constants": {
            i: a.value for i, a in enumerate(user_inputs) if isinstance(a, constant)
        },
        "output_constants": {
            i: a.value for i, a in enumerate(user_outputs) if isinstance(a, constant)
        },
    }


def _release_when_collected(
    model: torch.nn.Module, executor: CompiledNPUExecutor
) -> CompiledNPUExecutor:
    """`executor`, set to release the memory its graphs share with `model` once nobody
    holds the model: OpenVINO's packed copy is the one that runs then (unless
    FORGE_RELEASE_WEIGHTS=0). The callback holds neither the model nor the executor."""
    if os.environ.get("FORGE_RELEASE_WEIGHTS", "1") == "0":
        return executor
    ref = weakref.ref(executor)

    def release() -> None:
        alive = ref()
        if alive is not None:
            alive.release_weights()

    weakref.finalize(model, release).atexit = False
    return executor
