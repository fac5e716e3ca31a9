"""Layer stamping (forge.frontend.stamping): torch.export traces three layers of a stack
of interchangeable ones, the rest are copied in the graph. The imported IR must be the
one a whole export gives (forward programs, and the prefill and decode programs that
write a KV cache), and anything that makes layers differ must fall back."""

from __future__ import annotations

import pytest
import torch
import transformers

from forge.frontend import models, stamping
from forge.frontend.capture import capture
from forge.frontend.importer import import_program
from forge.frontend.static_cache import capture_programs
from forge.runtime.compile import compile_model
from forge.runtime.generate import compile_lm

LAYER_KEYS = ("num_hidden_layers", "n_layer")


def four_layers(name: str) -> torch.nn.Module:
    """The tiny built-in model with four layers instead of two."""
    spec = models.get_spec(name)
    settings = {**spec.full, **spec.tiny, "attn_implementation": "eager"}
    for key in LAYER_KEYS:
        if key in settings:
            settings[key] = 4
    settings.pop("layer_types", None)
    config = getattr(transformers, spec.config_class)(**settings)
    torch.manual_seed(0)
    return getattr(transformers, spec.model_class)(config).eval()


def inputs(model: torch.nn.Module, seq: int = 8) -> tuple[tuple, dict]:
    return models.example_inputs(model, seq=seq)


def imported_ir(model: torch.nn.Module, stamp: bool, monkeypatch: pytest.MonkeyPatch) -> tuple:
    monkeypatch.setenv("FORGE_LAYER_STAMPING", "1" if stamp else "0")
    args, kwargs = inputs(model)
    captured = capture(model, args, example_kwargs=kwargs)
    return str(import_program(captured).module), captured.stamped


@pytest.mark.parametrize("name", ["gpt2", "llama-3.2-1b", "qwen2-0.5b", "granite-350m"])
def test_stamped_ir_is_the_whole_exports(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    model = four_layers(name)
    stamped, note = imported_ir(model, True, monkeypatch)
    whole, whole_note = imported_ir(model, False, monkeypatch)
    assert note.startswith("layers 3-3 of ") and "traced 3 of 4" in note
    assert whole_note == ""
    assert stamped == whole


def test_stamped_model_runs_as_eager(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORGE_LAYER_STAMPING", "1")
    model = four_layers("llama-3.2-1b")
    args, kwargs = inputs(model)
    executor, report = compile_model(model, args, kwargs, cache=False)
    assert any("stamped from layer 2" in note for note in report.notes)
    with torch.no_grad():
        for seed in range(3):
            ids = torch.randint(
                0,
                model.config.vocab_size,
                args[0].shape,
                generator=torch.Generator().manual_seed(seed),
            )
            want = model(ids, **kwargs).logits
            (got,) = executor(ids, kwargs["attention_mask"])
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


def test_hybrid_layers_are_exported_whole() -> None:
    """LFM2 lists conv and attention layers in `layer_types`: no stack to stamp."""
    model = models.build_model("lfm2-2.6b", tiny=True)
    assert stamping.find_stack(model) is None


def test_a_layer_with_other_settings_is_not_stamped() -> None:
    model = four_layers("gpt2")
    assert stamping.find_stack(model) is not None
    model.transformer.h[3].attn.scale_attn_weights = False
    assert stamping.find_stack(model) is None


def test_layers_of_other_shapes_are_not_stamped() -> None:
    model = four_layers("gpt2")
    model.transformer.h[2].mlp.c_fc.weight = torch.nn.Parameter(torch.zeros(64, 8))
    assert stamping.find_stack(model) is None


def test_a_model_that_writes_caches_says_no() -> None:
    class Writes(torch.nn.Module):
        layer_stamping = False

        def __init__(self) -> None:
            super().__init__()
            self.layers = torch.nn.ModuleList(torch.nn.Linear(4, 4) for _ in range(4))

    assert stamping.find_stack(Writes()) is None


class Layer(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.linear(x))


class Stack(torch.nn.Module):
    """Five interchangeable layers, called one after another."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.layers = torch.nn.ModuleList(Layer() for _ in range(5))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x)
        return x


class Alternating(Stack):
    """The parent treats odd layers differently: visible between layers 1 and 2."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for i, layer in enumerate(self.layers):
            x = layer(x) if i % 2 == 0 else torch.relu(layer(x))
        return x


class Between(Stack):
    """The same op between every two layers: outside the layers, so not stamped."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x) * 0.5
        return x


def count(captured: object, op: str) -> int:
    graph = captured.exported.graph  # type: ignore[attr-defined]
    return sum(1 for n in graph.nodes if n.op == "call_function" and op in str(n.target))


@pytest.mark.parametrize("model_class", [Alternating, Between])
def test_layers_traced_differently_are_exported_whole(model_class: type[Stack]) -> None:
    """The pairing fails, torch.export runs on the whole model, and the program is the
    model's (every layer's ops, the ops between them)."""
    model = model_class().eval()
    x = torch.randn(2, 8)
    captured = capture(model, (x,))
    assert captured.stamped == ""
    assert count(captured, "tanh") == 5
    executor, _ = compile_model(model, (x,), cache=False)
    with torch.no_grad():
        torch.testing.assert_close(executor(x)[0], model(x))


def test_plain_stack_is_stamped_and_exact() -> None:
    model = Stack().eval()
    x = torch.randn(2, 8)
    captured = capture(model, (x,))
    assert captured.stamped == (
        "layers 3-4 of layers stamped from layer 2 (torch.export traced 3 of 5)"
    )
    assert count(captured, "tanh") == 5
    weights = {s.target for s in captured.exported.graph_signature.input_specs if s.target}
    assert weights == {f"layers.{i}.linear.{w}" for i in range(5) for w in ("weight", "bias")}
    executor, _ = compile_model(model, (x,), cache=False)
    with torch.no_grad():
        torch.testing.assert_close(executor(x)[0], model(x))


def test_off_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORGE_LAYER_STAMPING", "0")
    captured = capture(Stack().eval(), (torch.randn(2, 8),))
    assert captured.stamped == ""


class CountsCalls(torch.nn.Module):
    """Bumps a buffer of its own in place at every call."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("calls", torch.zeros(1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls.add_(1)
        return super().forward(x)


class Counting(CountsCalls, Stack):
    """The parent bumps a buffer in place, around the layers: stamped, and the write
    stays the program's."""


def test_state_written_around_the_layers_is_kept() -> None:
    model = Counting().eval()
    x = torch.randn(2, 8)
    captured = capture(model, (x,))
    assert captured.stamped.startswith("layers 3-4 of layers")
    assert count(captured, "tanh") == 5
    executor, _ = compile_model(model, (x,), cache=False)
    with torch.no_grad():
        want = Counting().eval()(x)
        torch.testing.assert_close(executor(x)[0], want)
        executor(x)
    assert model.calls.item() == 2


class OwnCounter(CountsCalls, Layer):
    """A layer that bumps a buffer of its own: not a state the stack names."""


class CountingLayers(Stack):
    def __init__(self) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList(OwnCounter() for _ in range(5))


def test_layers_writing_unnamed_state_are_exported_whole() -> None:
    model = CountingLayers().eval()
    captured = capture(model, (torch.randn(2, 8),))
    assert captured.stamped == ""
    assert count(captured, "tanh") == 5
    written = [s.target for s in captured.exported.graph_signature.output_specs if s.target]
    assert written == [f"layers.{i}.calls" for i in range(5)]


def program_ir(
    wrapper: torch.nn.Module, kwargs: dict, stamp: bool, mp: pytest.MonkeyPatch
) -> tuple:
    mp.setenv("FORGE_LAYER_STAMPING", "1" if stamp else "0")
    captured = capture(wrapper, (), example_kwargs=dict(kwargs))
    return str(import_program(captured).module), captured.stamped


@pytest.mark.parametrize("name", ["gpt2", "llama-3.2-1b"])
def test_cache_programs_are_stamped_as_whole_exports(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Prefill and decode write every layer's keys and values: the stamped layers read
    and write their own cache buffers, and the IR is the whole export's."""
    programs = capture_programs(four_layers(name), 16, 4)
    for kwargs in (programs.prefill_kwargs, programs.decode_kwargs):
        stamped, note = program_ir(programs.wrapper, kwargs, True, monkeypatch)
        whole, _ = program_ir(programs.wrapper, kwargs, False, monkeypatch)
        assert "traced 3 of 4" in note
        assert 'npu.writes = ["key_cache.0", "value_cache.0"' in stamped
        assert '"key_cache.3", "value_cache.3", "cache_length"]' in stamped
        assert stamped == whole


def test_stamped_cache_programs_generate_as_eager(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORGE_LAYER_STAMPING", "1")
    model = models.widened(four_layers("llama-3.2-1b"))
    lm = compile_lm(model, capacity=24, prompt_capacity=4)
    notes = lm.prefill.report.notes + lm.decode.report.notes
    assert sum("stamped from layer 2" in note for note in notes) == 2
    for seed in range(3):
        prompt = torch.randint(1, 256, (1, 6), generator=torch.Generator().manual_seed(seed))
        want = model.generate(
            prompt,
            attention_mask=torch.ones_like(prompt),
            do_sample=False,
            max_new_tokens=8,
            pad_token_id=0,
            eos_token_id=None,
        )[0, 6:].tolist()
        lm.reset()
        assert lm.generate(prompt, 8) == want
