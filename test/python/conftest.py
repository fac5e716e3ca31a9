"""Shared helpers for the pytest suites."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch
from xdsl.dialects.builtin import ModuleOp

from forge.devtools.numerics import Agreement, compare
from forge.dialects.context import entry_function
from forge.frontend import models
from forge.frontend.capture import capture
from forge.frontend.importer import ImportedProgram, import_program
from forge.runtime.reference import ReferenceExecutor

PROFILES = Path(__file__).resolve().parents[1] / "transforms" / "Inputs"
NPU_PROFILE = PROFILES / "host-profile-npu.json"
"""A fixed host profile where NNFactory wins every linear: what compiles use in tests,
so plans do not depend on the machine (and no test run measures it but one)."""
CPU_PROFILE = PROFILES / "host-profile-cpu.json"
"""A fixed host profile where the CPU wins every linear, transitions included."""
os.environ["FORGE_HOST_PROFILE"] = str(NPU_PROFILE)
# Forge's caches (compile cache, host profiles) go to a private folder removed at exit,
# never the user's ~/.cache/forge.
_CACHE_ROOT = tempfile.mkdtemp(prefix="forge-test-cache-")
os.environ["FORGE_CACHE_DIR"] = _CACHE_ROOT
atexit.register(shutil.rmtree, _CACHE_ROOT, ignore_errors=True)


@dataclass
class TinyModel:
    name: str
    model: torch.nn.Module
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    program: ImportedProgram

    def fresh_module(self) -> ModuleOp:
        """A private copy of the imported IR, for passes to rewrite."""
        return self.program.module.clone()

    def agreement(self, module: ModuleOp, num_inputs: int = 3) -> Agreement:
        """Execute `module` against eager PyTorch on random inputs."""
        executor = ReferenceExecutor(
            entry_function(module), self.program.weights, len(self.program.input_names)
        )
        return compare(
            self.model, executor, self.args, self.kwargs, self.program.input_names, num_inputs
        )


_CACHE: dict[str, TinyModel] = {}


def load_tiny(name: str, seq: int = 16) -> TinyModel:
    """A tiny model variant, captured and imported once per test session."""
    key = f"{name}@{seq}"
    if key not in _CACHE:
        model = models.build_model(name, tiny=True)
        args, kwargs = models.example_inputs(model, seq=seq)
        program = import_program(capture(model, args, example_kwargs=kwargs))
        _CACHE[key] = TinyModel(name, model, args, kwargs, program)
    return _CACHE[key]


@pytest.fixture
def tiny() -> Callable[[str], TinyModel]:
    return load_tiny


@pytest.fixture
def captures(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every torch.export capture compile_model makes."""
    from forge.runtime import compile, compile_cache

    calls: list[Any] = []
    original = compile.capture

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(args[0])
        return original(*args, **kwargs)

    monkeypatch.setattr(compile, "capture", counting)  # a miss's capture
    monkeypatch.setattr(compile_cache, "capture", counting)  # a key's
    return calls
