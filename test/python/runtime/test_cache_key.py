"""The compile cache's key is sound: two models of the same object shape but different
programs never share an entry. Each pair compiles twice with the cache on; the second
misses (or is right), and both agree with eager within the fp32 rule."""

from __future__ import annotations

import dataclasses
import functools
import importlib
import sys
import types
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F

from forge.conversion import nnfactory_graph
from forge.devtools.numerics import tolerance_for
from forge.frontend import models
from forge.frontend.static_cache import StaticCacheLM
from forge.runtime.cache_trust import model_fields
from forge.runtime.compile import compile_model
from forge.runtime.generate import compile_lm

X = torch.randn(2, 8, generator=torch.Generator().manual_seed(3))


class Block(torch.nn.Module):
    """The issue's reproducer: the activation is an attribute."""

    def __init__(self, act: Any):
        super().__init__()
        torch.manual_seed(0)
        self.lin = torch.nn.Linear(8, 8)
        self.act = act

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.lin(x))


@dataclasses.dataclass
class Options:
    scale: float


class Scaled(torch.nn.Module):
    def __init__(self, options: Options):
        super().__init__()
        torch.manual_seed(0)
        self.lin = torch.nn.Linear(8, 8)
        self.options = options

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(x) * self.options.scale


class Plain(torch.nn.Module):
    """A model the fast path proves: its own file, plain attributes, a buffer."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.lin = torch.nn.Linear(8, 8)
        self.register_buffer("shift", torch.linspace(-1.0, 1.0, 8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.lin(x)) + self.shift


GLOBAL_SCALE = 2.0


class Global(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(x) * GLOBAL_SCALE


def tanh_forward(self: Plain, x: torch.Tensor) -> torch.Tensor:
    """Another forward of the same file, swapped in for Plain.forward."""
    return torch.tanh(self.lin(x)) + self.shift


def closing_over(k: float) -> torch.nn.Module:
    """The same class body; the program differs only in a closure cell."""

    class Closure(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            torch.manual_seed(0)
            self.lin = torch.nn.Linear(8, 8)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.lin(x) * k

    return Closure()


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("FORGE_CACHE_DIR", str(tmp_path / "forge"))
    monkeypatch.delenv("FORGE_CACHE_MAX_BYTES", raising=False)
    nnfactory_graph.clear_cache()
    yield tmp_path / "forge" / "compile"
    nnfactory_graph.clear_cache()


def compiled(model: torch.nn.Module) -> Any:
    """Compile with the cache on; the outputs must agree with eager (fp32 rule)."""
    nnfactory_graph.clear_cache()
    run, report = compile_model(model.eval(), (X,), cache=True)
    expected = model(X)
    error = (run(X)[0] - expected).abs().max().item()
    assert error <= tolerance_for(torch.float32) * max(1.0, expected.abs().max().item())
    return report


def second_misses(first: torch.nn.Module, change: Callable[[], torch.nn.Module]) -> Any:
    a = compiled(first)
    b = compiled(change())
    assert a.cache == "miss" and b.cache == "miss"
    assert a.cache_entry != b.cache_entry
    return b


def test_a_function_attribute_is_keyed_on_the_captured_program(cache: Path, captures: list) -> None:
    report = second_misses(Block(F.gelu), lambda: Block(torch.tanh))
    assert report.cache_key_from == "the captured program (Block.act is a function)"
    assert len(captures) == 2  # one export per miss: the key's capture is reused
    again = compiled(Block(F.gelu))
    assert again.cache == "hit" and again.export_seconds > 0 and len(captures) == 3


def test_a_dataclass_option(cache: Path) -> None:
    second_misses(Scaled(Options(2.0)), lambda: Scaled(Options(3.0)))


def test_a_partial_function_attribute(cache: Path) -> None:
    report = second_misses(
        Block(functools.partial(F.gelu, approximate="tanh")),
        lambda: Block(functools.partial(F.gelu, approximate="none")),
    )
    assert report.cache_key_from == "the captured program (Block.act is a function)"


def test_a_closure(cache: Path) -> None:
    report = second_misses(closing_over(2.0), lambda: closing_over(3.0))
    assert report.cache_key_from == "the model object"


def test_a_changed_buffer(cache: Path) -> None:
    model = Plain()

    def changed() -> torch.nn.Module:
        with torch.no_grad():
            model.shift[3] += 0.5
        return model

    report = second_misses(model, changed)
    assert report.cache_key_from == "the model object"


def test_a_method_replaced_on_the_class(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def patched() -> torch.nn.Module:
        monkeypatch.setattr(Plain, "forward", tanh_forward)
        return Plain()

    second_misses(Plain(), patched)


def test_a_method_replaced_on_the_instance(cache: Path) -> None:
    def patched() -> torch.nn.Module:
        model = Plain()
        model.forward = types.MethodType(tanh_forward, model)
        return model

    report = second_misses(Plain(), patched)
    assert report.cache_key_from.startswith("the captured program (Plain.forward is a")


HELPER = "import torch\n\n\ndef act(x):\n    return {body}\n"
MODEL = """import torch
import helper_act


class Helped(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x):
        return helper_act.act(self.lin(x))
"""


def test_an_edited_helper_module(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = tmp_path / "src"
    source.mkdir()
    (source / "helper_act.py").write_text(HELPER.format(body="torch.relu(x)"))
    (source / "helped_model.py").write_text(MODEL)
    monkeypatch.syspath_prepend(str(source))
    for name in ("helper_act", "helped_model"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    helped = importlib.import_module("helped_model")

    def edited() -> torch.nn.Module:
        (source / "helper_act.py").write_text(HELPER.format(body="torch.sigmoid(x) * 3"))
        importlib.reload(sys.modules["helper_act"])
        return helped.Helped()

    report = second_misses(helped.Helped(), edited)
    assert "helper_act of a plain file" in report.cache_key_from


def test_the_fast_path_refuses_what_it_cannot_prove(monkeypatch: pytest.MonkeyPatch) -> None:
    gpt2 = models.build_model("gpt2", tiny=True, seed=0)
    assert isinstance(model_fields(gpt2), dict)  # transformers' classes: keyed by version
    mlp = type(gpt2.transformer.h[0].mlp)
    monkeypatch.setattr(mlp, "forward", lambda self, x: x)
    assert str(model_fields(gpt2)).startswith("GPT2MLP.forward was replaced by test_cache_key.")
    monkeypatch.undo()
    handle = gpt2.transformer.h[0].register_forward_hook(lambda *a: None)
    assert model_fields(gpt2) == "transformer.h.0 has a hook"
    handle.remove()
    gpt2.transformer.h[0].helper = torch.tanh
    assert model_fields(gpt2) == "transformer.h.0.helper is a function"


def test_a_changed_module_global(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A plain file's global that forward reads is keyed by its value."""

    def rebound() -> torch.nn.Module:
        monkeypatch.setattr(sys.modules[__name__], "GLOBAL_SCALE", 3.0)
        return Global()

    report = second_misses(Global(), rebound)
    assert report.cache_key_from == "the model object"


def test_generation_programs_hit_from_the_model_object(cache: Path) -> None:
    """Forge's StaticCacheLM keys from the model object, and the first program's export
    (which leaves its traces in the cache object) does not change the second's key."""
    reports = []
    for _ in range(2):
        nnfactory_graph.clear_cache()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            lm = compile_lm(models.build_model("gpt2", tiny=True), cache=True, capacity=32)
        reports.append([lm.prefill.report, lm.decode.report])
    assert [r.cache for r in reports[0]] == ["miss", "miss"]
    assert [r.cache for r in reports[1]] == ["hit", "hit"]
    assert {r.cache_key_from for r in reports[1]} == {"the model object"}


@pytest.mark.parametrize("name", list(models.SPECS))
def test_built_in_models_key_from_the_model_object(name: str) -> None:
    """transformers' classes (keyed by version), their kernel tables (held modules) and
    caches (a library's objects of plain state) qualify for the fast path."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = models.build_model(name, tiny=True)
        wrapper = StaticCacheLM(model, 32)
    assert isinstance(model_fields(model), dict)
    assert isinstance(model_fields(wrapper), dict)
