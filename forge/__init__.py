"""Forge: a PyTorch -> xDSL -> NNFactory graph compiler (FORGE-UGC).

The Python API (`forge.compile`, `forge.compile_lm`, `forge.CompiledModule`; see
docs/api.md) lives in `forge.runtime.api` and loads on first use: the `forge` CLI imports
this package at start-up, and importing torch takes seconds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from forge.runtime.api import CompiledModule, compile, compile_lm

__all__ = ["CompiledModule", "compile", "compile_lm"]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module 'forge' has no attribute '{name}'")
    from forge.runtime import api  # torch loads here, at first use (start-up speed)

    value = getattr(api, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
