"""Buffer writes made functional without retracing (forge.frontend.functionalize): the
KV-cache programs take it, anything but a plain write of a whole buffer falls back to
`run_decompositions`, and both give the eager results."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from torch.export.graph_signature import OutputKind

from forge.frontend import models
from forge.frontend.capture import capture
from forge.frontend.functionalize import functional_overload, functionalize_buffer_writes
from forge.frontend.static_cache import capture_programs
from forge.runtime.compile import compile_model


def exported_in_place(module: torch.nn.Module, *args: torch.Tensor) -> torch.export.ExportedProgram:
    with torch.no_grad():
        return torch.export.export(module, args)


class Writes(torch.nn.Module):
    """A buffer written by `step(buffer, x)` in place, and nothing else changing state."""

    writes_only_buffers = True

    def __init__(self, step: Callable[[torch.Tensor, torch.Tensor], object]) -> None:
        super().__init__()
        self.register_buffer("state", torch.zeros(2, 4))
        self.step = step

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.step(self.state, x)
        return self.state * 2 + x


def copy_all(state: torch.Tensor, x: torch.Tensor) -> None:
    state.copy_(x)


def write_rows(state: torch.Tensor, x: torch.Tensor) -> None:
    state.index_copy_(0, torch.tensor([1]), x[:1])


def through_a_view(state: torch.Tensor, x: torch.Tensor) -> None:
    state[:1].copy_(x[:1])


def twice(state: torch.Tensor, x: torch.Tensor) -> None:
    state.add_(x)
    state.mul_(2)


def read_first(state: torch.Tensor, x: torch.Tensor) -> None:
    x.add_(state.sum())  # reads the old value, then writes the input
    state.add_(1)


def read_old_value(state: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    old = state * 3
    state.add_(old)
    return old


@pytest.mark.parametrize("step", [copy_all, write_rows])
def test_a_whole_buffer_written_once_is_made_functional(step: Callable) -> None:
    exported = exported_in_place(Writes(step).eval(), torch.randn(2, 4))
    assert functionalize_buffer_writes(exported)
    specs = exported.graph_signature.output_specs
    assert [(s.kind, s.target) for s in specs] == [
        (OutputKind.BUFFER_MUTATION, "state"),
        (OutputKind.USER_OUTPUT, None),
    ]
    assert not any(
        getattr(n.target, "_schema", None) is not None and n.target._schema.is_mutable
        for n in exported.graph.nodes
        if n.op == "call_function"
    )


@pytest.mark.parametrize("step", [through_a_view, twice, read_first, read_old_value])
def test_other_writes_are_left_to_run_decompositions(step: Callable) -> None:
    exported = exported_in_place(Writes(step).eval(), torch.randn(2, 4))
    before = str(exported.graph)
    assert not functionalize_buffer_writes(exported)
    assert str(exported.graph) == before


@pytest.mark.parametrize("step", [copy_all, write_rows, through_a_view, twice, read_old_value])
def test_both_ways_run_as_eager(step: Callable) -> None:
    """Three calls, the state carried from call to call."""
    model, reference = Writes(step).eval(), Writes(step).eval()
    x = torch.randn(2, 4, generator=torch.Generator().manual_seed(0))
    executor, _ = compile_model(model, (x,), cache=False)
    with torch.no_grad():
        for seed in range(3):
            x = torch.randn(2, 4, generator=torch.Generator().manual_seed(seed))
            torch.testing.assert_close(executor(x)[0], reference(x))
    torch.testing.assert_close(model.state, reference.state)


class TrainBatchNorm(torch.nn.Module):
    writes_only_buffers = False  # aten.batch_norm writes its statistics unannounced

    def __init__(self) -> None:
        super().__init__()
        self.bn = torch.nn.BatchNorm1d(4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(x)


def test_writes_behind_a_schema_are_found_by_the_retrace() -> None:
    """In train mode BatchNorm updates three buffers; the in-place op torch.export shows
    is only the batch counter's. Without the model's word, capture retraces."""
    captured = capture(TrainBatchNorm().train(), (torch.randn(8, 4),))
    written = {s.target for s in captured.exported.graph_signature.output_specs if s.target}
    assert written == {"bn.running_mean", "bn.running_var", "bn.num_batches_tracked"}


def test_functional_overloads() -> None:
    aten = torch.ops.aten
    assert functional_overload(aten.index_copy_.default) is aten.index_copy.default
    assert functional_overload(aten.add_.Tensor) is aten.add.Tensor
    assert functional_overload(aten.add.Tensor) is None  # not in place
    assert functional_overload(len) is None


def test_cache_programs_take_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Prefill and decode write each layer's keys and values and the cache length, all
    made functional here: capture never retraces them."""

    def retrace(*args: object, **kwargs: object) -> None:
        raise AssertionError("run_decompositions was called")

    monkeypatch.setattr(torch.export.ExportedProgram, "run_decompositions", retrace)
    model = models.build_model("gpt2", tiny=True)
    programs = capture_programs(model, 16, 4)
    for kwargs in (programs.prefill_kwargs, programs.decode_kwargs):
        captured = capture(programs.wrapper, (), example_kwargs=dict(kwargs))
        written = [
            s.target
            for s in captured.exported.graph_signature.output_specs
            if s.kind == OutputKind.BUFFER_MUTATION
        ]
        caches = [f"{kind}_cache_{i}" for i in range(2) for kind in ("key", "value")]
        assert written == [*caches, "cache_length"]
