"""`forge.compile` and `forge.compile_lm`: compiled modules are called like the model and
return what eager returns (tensors, dicts, tuples, transformers outputs), a call that does
not match the compiled one is a one-line ForgeError naming the argument, mutated buffers
stay in step with eager, generation matches `model.generate`, and `import forge` stays
free of torch."""

from __future__ import annotations

import copy
import subprocess
import sys
import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch

import forge
from forge.frontend import models
from forge.runtime.api import CompiledModule
from forge.runtime.compile import CompileReport
from forge.runtime.executor import CompiledNPUExecutor
from forge.support.diagnostics import ForgeError

TOLERANCE = 1e-5


class MLP(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up = torch.nn.Linear(16, 32)
        self.down = torch.nn.Linear(32, 8)

    def forward(self, x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        return self.down(torch.relu(self.up(x))) + bias


class Heads(torch.nn.Module):
    """Keyword arguments (a tensor, a float and a bool the graph is specialized to) and
    a dict of a tensor, a tuple and an int."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)

    def forward(
        self, x: torch.Tensor, *, gate: torch.Tensor, scale: float = 1.0, negate: bool = False
    ) -> dict[str, Any]:
        h = self.proj(x) * torch.sigmoid(gate) * scale
        if negate:
            h = -h
        return {"h": h, "pair": (h.sum(-1), x + 1), "width": 8}


class RunningMean(torch.nn.Module):
    """Mutates two buffers in forward, as BatchNorm's statistics or a KV cache do."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)
        self.register_buffer("mean", torch.zeros(8))
        self.register_buffer("calls", torch.zeros(()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls.add_(1)
        self.mean.mul_(0.5).add_(x.mean(0) * 0.5)
        return self.proj(x - self.mean) * self.calls


def _random(*shape: int, seed: int) -> torch.Tensor:
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed))


def _compile(model: torch.nn.Module, args: Any, kwargs: Any = None) -> CompiledModule:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.export and transformers warn about tracing
        return forge.compile(model, args, kwargs)


def _max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().max())


@pytest.fixture(scope="module")
def mlp() -> tuple[MLP, CompiledModule]:
    torch.manual_seed(0)
    model = MLP().eval()
    return model, _compile(model, (_random(4, 16, seed=1), _random(8, seed=2)))


@pytest.fixture(scope="module")
def heads() -> tuple[Heads, CompiledModule]:
    torch.manual_seed(0)
    model = Heads().eval()
    kwargs = {"gate": _random(2, 8, seed=2), "scale": 0.5, "negate": True}
    return model, _compile(model, (_random(2, 8, seed=1),), kwargs)


@pytest.fixture(scope="module")
def gpt2() -> tuple[torch.nn.Module, CompiledModule, dict[str, Any]]:
    model = models.build_model("gpt2", tiny=True)
    (ids,), kwargs = models.example_inputs(model, seq=8)
    example = {"input_ids": ids, **kwargs}  # attention_mask, use_cache=False
    return model, _compile(model, (), example), example


def test_positional_module_matches_eager(mlp: tuple[MLP, CompiledModule]) -> None:
    model, compiled = mlp
    assert isinstance(compiled, torch.nn.Module)
    assert isinstance(compiled.report, CompileReport)
    assert isinstance(compiled.executor, CompiledNPUExecutor)
    assert compiled.report.segments >= 1
    first = None
    for seed in range(3):
        x, bias = _random(4, 16, seed=10 + seed), _random(8, seed=20 + seed)
        out = compiled(x, bias)
        with torch.no_grad():
            ref = model(x, bias)
        assert isinstance(out, torch.Tensor) and out.shape == ref.shape
        assert _max_diff(out, ref) <= TOLERANCE
        if first is None:
            first = (out, out.clone())
    # A later call does not overwrite the tensor an earlier one returned.
    assert first is not None and torch.equal(first[0], first[1])


def test_keyword_module_returns_eager_structure(heads: tuple[Heads, CompiledModule]) -> None:
    model, compiled = heads
    x, gate = _random(2, 8, seed=5), _random(2, 8, seed=6)
    out = compiled(x, negate=True, gate=gate, scale=0.5)  # keyword order is free
    with torch.no_grad():
        ref = model(x, gate=gate, scale=0.5, negate=True)
    assert set(out) == set(ref) == {"h", "pair", "width"}
    assert isinstance(out["pair"], tuple) and len(out["pair"]) == 2
    assert out["width"] == 8
    assert _max_diff(out["h"], ref["h"]) <= TOLERANCE
    for mine, theirs in zip(out["pair"], ref["pair"], strict=True):
        assert _max_diff(mine, theirs) <= TOLERANCE
    assert compiled.report.input_names == ["x", "gate"]


def test_causal_lm_returns_logits_like_eager(
    gpt2: tuple[torch.nn.Module, CompiledModule, dict[str, Any]],
) -> None:
    model, compiled, _ = gpt2
    generator = torch.Generator().manual_seed(7)
    ids = torch.randint(0, model.config.vocab_size, (1, 8), generator=generator)
    mask = torch.ones_like(ids)
    out = compiled(input_ids=ids, attention_mask=mask, use_cache=False)
    with torch.no_grad():
        ref = model(input_ids=ids, attention_mask=mask, use_cache=False)
    assert type(out) is type(ref)
    assert out.logits.shape == ref.logits.shape
    assert _max_diff(out.logits, ref.logits) <= TOLERANCE
    assert out.past_key_values is None


def _mlp_call(x_shape: tuple[int, ...], dtype: torch.dtype = torch.float32) -> Callable:
    return lambda c: c(torch.zeros(x_shape, dtype=dtype), torch.zeros(8))


MLP_ERRORS = [
    pytest.param(
        _mlp_call((5, 16)), "x: expected shape [4, 16] float32, got [5, 16] float32", id="shape"
    ),
    pytest.param(
        _mlp_call((4, 16), torch.float64),
        "x: expected shape [4, 16] float32, got [4, 16] float64",
        id="dtype",
    ),
    pytest.param(
        lambda c: c(torch.zeros(4, 16)),
        "missing argument 'bias' (compiled with 2 positional argument(s): x, bias)",
        id="missing",
    ),
    pytest.param(
        lambda c: c(torch.zeros(4, 16), torch.zeros(8), torch.zeros(8)),
        "unexpected positional argument 'args[2]'",
        id="extra",
    ),
    pytest.param(
        lambda c: c(torch.zeros(4, 16), torch.zeros(8), scale=1.0),
        "unexpected keyword argument 'scale' (compiled with keyword arguments: none)",
        id="extra-keyword",
    ),
    pytest.param(
        lambda c: c([torch.zeros(4, 16)], torch.zeros(8)),
        "x: expected a tensor [4, 16] float32, got list(*)",
        id="structure",
    ),
    pytest.param(
        lambda c: c(torch.zeros(4, 16), 1.0),
        "bias: expected a tensor [8] float32, got 1.0",
        id="not-a-tensor",
    ),
]


@pytest.mark.parametrize(("call", "message"), MLP_ERRORS)
def test_mismatched_call_is_one_line(
    mlp: tuple[MLP, CompiledModule], call: Callable, message: str
) -> None:
    _, compiled = mlp
    with pytest.raises(ForgeError) as error:
        call(compiled)
    assert message in str(error.value)
    assert "\n" not in str(error.value)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"scale": 0.5, "negate": False}, "negate: compiled for the constant True, got False"),
        ({"scale": 2.0, "negate": True}, "scale: compiled for the constant 0.5, got 2.0"),
        ({"negate": True}, "missing keyword argument 'scale'"),
    ],
)
def test_specialized_constants_must_match(
    heads: tuple[Heads, CompiledModule], kwargs: dict[str, Any], message: str
) -> None:
    _, compiled = heads
    with pytest.raises(ForgeError, match=message):
        compiled(torch.zeros(2, 8), gate=torch.zeros(2, 8), **kwargs)


def test_causal_lm_call_errors(
    gpt2: tuple[torch.nn.Module, CompiledModule, dict[str, Any]],
) -> None:
    _, compiled, example = gpt2
    longer = torch.zeros(1, 9, dtype=torch.long)
    with pytest.raises(
        ForgeError, match=r"input_ids: expected shape \[1, 8\] int64, got \[1, 9\] int64"
    ):
        compiled(**{**example, "input_ids": longer})
    with pytest.raises(ForgeError, match="use_cache: compiled for the constant False, got True"):
        compiled(**{**example, "use_cache": True})
    with pytest.raises(ForgeError, match="missing keyword argument 'attention_mask'"):
        compiled(input_ids=example["input_ids"], use_cache=False)


def test_mutated_buffers_stay_in_step_with_eager() -> None:
    torch.manual_seed(0)
    model = RunningMean().eval()
    eager = copy.deepcopy(model)
    compiled = _compile(model, (_random(4, 8, seed=1),))
    for seed in range(4):
        x = _random(4, 8, seed=30 + seed)
        out = compiled(x)
        with torch.no_grad():
            ref = eager(x)
        assert _max_diff(out, ref) <= TOLERANCE
        # The executor writes into the model's own buffers, as eager does.
        assert float(model.calls) == float(eager.calls) == seed + 1
        assert _max_diff(model.mean, eager.mean) <= TOLERANCE
    assert float(model.mean.abs().sum()) > 0


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"model": lambda x: x, "example_args": ()}, "takes a torch.nn.Module, got function"),
        ({"example_args": 3}, "example_args must be a tuple"),
        ({"example_args": (), "precision": "fp64"}, "precision must be one of"),
        ({"example_args": (), "granularity": "layer"}, "granularity must be one of"),
    ],
)
def test_bad_compile_arguments(arguments: dict[str, Any], message: str) -> None:
    arguments = {"model": MLP(), **arguments}
    with pytest.raises(ForgeError, match=message):
        forge.compile(**arguments)


def test_a_single_tensor_is_the_positional_arguments() -> None:
    model = torch.nn.Linear(4, 2).eval()
    x = _random(3, 4, seed=0)
    compiled = _compile(model, x)
    with torch.no_grad():
        assert _max_diff(compiled(x), model(x)) <= TOLERANCE


def test_import_forge_does_not_import_torch() -> None:
    code = (
        "import forge, sys\n"
        "assert 'torch' not in sys.modules, 'torch imported'\n"
        "assert {'compile', 'compile_lm', 'CompiledModule'} <= set(dir(forge))\n"
        "forge.compile\n"
        "assert 'torch' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_lazy_names() -> None:
    from forge.runtime import api, generate

    assert forge.compile is api.compile
    assert forge.CompiledModule is api.CompiledModule
    assert forge.compile_lm is generate.compile_lm
    assert set(forge.__all__) == {"compile", "compile_lm", "CompiledModule"}
    with pytest.raises(AttributeError, match="no attribute 'compiler'"):
        _ = forge.compiler


def test_three_line_generation_matches_model_generate() -> None:
    model = models.widened(models.build_model("gpt2", tiny=True))
    prompt_ids = torch.randint(1, 256, (1, 5), generator=torch.Generator().manual_seed(5))

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lm = forge.compile_lm(model)
    ids = lm.generate(prompt_ids, max_new_tokens=32)

    eager = model.generate(
        prompt_ids,
        attention_mask=torch.ones_like(prompt_ids),
        do_sample=False,
        max_new_tokens=32,
        pad_token_id=0,
    )
    assert model.generation_config.eos_token_id not in ids  # else eager stopped early
    assert ids == eager[0, prompt_ids.shape[1] :].tolist()
    assert len(ids) == 32 and len(set(ids)) > 1
