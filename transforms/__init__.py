"""Forge's passes, one module each, and the registry `forge-opt -p` looks names up in."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from types import ModuleType
from typing import TypeVar

from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass, PassPipeline

from forge.dialects.context import make_context
from forge.support.diagnostics import ForgeError, one_line
from forge.transforms.pattern_pass import PassRecord, collect_statistics

T = TypeVar("T")

# Generic xDSL passes that work on `npu` IR and that compiler engineers expect to have.
GENERIC_XDSL_PASSES = ("canonicalize", "cse", "dce", "apply-individual-rewrite")

# Pass name -> module under forge.transforms defining a ModulePass with that `name`.
FORGE_PASSES = {
    "npu-dce": "npu_dce",
    "npu-cse": "npu_cse",
    "npu-fold-constants": "npu_fold_constants",
    "npu-fuse-attention": "npu_fuse_attention",
    "npu-fuse-operators": "npu_fuse_operators",
    "npu-optimize-layout": "npu_optimize_layout",
    "npu-optimize": "npu_optimize",
    "npu-assign-precision": "npu_assign_precision",
    "npu-bubble-up-row-gather": "npu_bubble_up_row_gather",
    "npu-update-state-in-place": "npu_update_state_in_place",
    "npu-fuse-cached-attention": "npu_fuse_cached_attention",
    "npu-attend-before-write": "npu_attend_before_write",
    "npu-place-devices": "npu_place_devices",
    "npu-assign-vregs": "npu_assign_vregs",
    "npu-liveness": "npu_liveness",
    "npu-linear-scan": "npu_linear_scan",
    "npu-schedule-affinity": "npu_schedule_affinity",
    "npu-apply-pdl": "npu_apply_pdl",
    "forge-pipeline": "forge_pipeline",
}


def defined_in(module: ModuleType, base: type[T]) -> list[type[T]]:
    """The subclasses of `base` that `module` itself defines (not those it imports)."""
    return [
        value
        for value in vars(module).values()
        if isinstance(value, type)
        and issubclass(value, base)
        and value.__module__ == module.__name__
    ]


def _pass_class(module_name: str, pass_name: str) -> type[ModulePass]:
    module = importlib.import_module(f"{__name__}.{module_name}")
    for value in defined_in(module, ModulePass):
        if getattr(value, "name", None) == pass_name:
            return value
    raise LookupError(f"{module.__name__} defines no pass named '{pass_name}'")


def _forge_passes() -> dict[str, Callable[[], type[ModulePass]]]:
    return {
        pass_name: lambda m=module_name, p=pass_name: _pass_class(m, p)
        for pass_name, module_name in FORGE_PASSES.items()
    }


def get_all_passes() -> dict[str, Callable[[], type[ModulePass]]]:
    """Pass name -> factory returning the pass class (imported lazily, like xDSL)."""
    from xdsl.transforms import get_all_passes as xdsl_passes

    generic = xdsl_passes()
    passes = {name: generic[name] for name in GENERIC_XDSL_PASSES}
    passes.update(_forge_passes())
    return passes


def build_pipeline(spec: str) -> PassPipeline:
    try:
        return PassPipeline.parse_spec(get_all_passes(), spec)
    except Exception as e:
        raise ForgeError(f"invalid pass pipeline '{spec}': {one_line(str(e))}") from e


def run_pipeline(module: ModuleOp, spec: str, verify: bool = True) -> list[PassRecord]:
    """Apply `spec` (e.g. "npu-dce,npu-fuse-operators{alpha=0.5}") in place; the records of
    every pass that ran, in order."""
    pipeline = build_pipeline(spec)
    with collect_statistics() as records:
        pipeline.apply(make_context(), module)
    if verify:
        module.verify()
    return records
