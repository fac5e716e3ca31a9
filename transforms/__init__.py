"""Forge's passes, one module each, and the registry `forge-opt -p` looks names up in."""

from __future__ import annotations

from collections.abc import Callable

from xdsl.passes import ModulePass

# Generic xDSL passes that work on `npu` IR and that compiler engineers expect to have.
GENERIC_XDSL_PASSES = ("canonicalize", "cse", "dce", "apply-individual-rewrite")


def _forge_passes() -> dict[str, Callable[[], type[ModulePass]]]:
    return {}


def get_all_passes() -> dict[str, Callable[[], type[ModulePass]]]:
    """Pass name -> factory returning the pass class (imported lazily, like xDSL)."""
    from xdsl.transforms import get_all_passes as xdsl_passes

    generic = xdsl_passes()
    passes = {name: generic[name] for name in GENERIC_XDSL_PASSES}
    passes.update(_forge_passes())
    return passes
