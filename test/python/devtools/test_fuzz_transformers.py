"""Whole-transformer differential fuzzing: specs are plain data drawn deterministically
from every available transformers family, round-trip through JSON with one-line
validation errors, real cases compile and generate as eager does, failures shrink, and
`forge fuzz-models --family transformers` runs."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from forge.cli import main
from forge.devtools.fuzz_transformers import (
    TransformerSpec,
    _fp32_noise,
    available_families,
    build,
    check,
    generate,
    load_spec,
    save_spec,
    shrink,
)
from forge.runtime import generate as generate_module
from forge.runtime.generate import CompiledLM
from forge.support.diagnostics import ForgeError

SEEDS = range(200)


@pytest.fixture(scope="module")
def specs() -> list[TransformerSpec]:
    return [generate(seed) for seed in SEEDS]


def test_generation_is_deterministic_and_covers_every_family(specs: list[TransformerSpec]) -> None:
    assert [generate(seed) for seed in SEEDS] == specs
    families = available_families()
    expected = {"llama", "mistral", "qwen2", "qwen3", "gemma", "phi3", "gpt2", "gpt-neo"}
    assert expected | {"gpt-neox"} <= set(families)
    assert {s.family for s in specs} == set(families)
    assert all(s.problem() is None for s in specs)
    assert all(1 <= s.layers <= 3 and 16 <= s.hidden <= 64 and s.vocab <= 256 for s in specs)


def test_generation_draws_the_features(specs: list[TransformerSpec]) -> None:
    options = [(s.family, s.heads, s.options) for s in specs]
    ropes = {o["rope_parameters"]["rope_type"] for _, _, o in options if "rope_parameters" in o}
    assert {"default", "linear", "llama3", "yarn"} <= ropes
    partial = [
        o["rope_parameters"].get("partial_rotary_factor", 1.0)
        for _, _, o in options
        if "rope_parameters" in o
    ]
    assert min(partial) < 1.0
    assert any(o.get("num_key_value_heads", h) < h for _, h, o in options)  # GQA
    assert {o.get("tie_word_embeddings") for _, _, o in options} >= {True, False}
    assert any(o.get("sliding_window") for f, _, o in options if f == "mistral")
    assert any(o.get("use_sliding_window") for f, _, o in options if f == "qwen2")
    neo = [o["attention_types"][0][0] for f, _, o in options if f == "gpt-neo"]
    assert any("local" in kinds for kinds in neo) and any("global" in kinds for kinds in neo)
    assert any(o.get("attention_bias") for _, _, o in options)
    assert any(o.get("mlp_bias") for _, _, o in options)
    assert any(o.get("attn_implementation") == "eager" for _, _, o in options)
    activations = {o.get("hidden_act") for _, _, o in options}
    assert {"silu", "gelu", "gelu_pytorch_tanh", "relu"} <= activations
    assert any(s.prompt > s.prompt_capacity for s in specs)  # chunked prefill


def test_json_round_trip(specs: list[TransformerSpec], tmp_path: Path) -> None:
    for spec in specs[:40]:
        data = json.loads(json.dumps(spec.to_json()))
        assert TransformerSpec.from_json(data) == spec
    from forge.devtools.fuzz_models import Outcome

    path = save_spec(specs[0], Outcome("mismatch", "x"), tmp_path, "a test")
    assert path.name.startswith(f"{specs[0].family}-")
    assert load_spec(path) == specs[0]
    assert save_spec(specs[0], Outcome("mismatch", "x"), tmp_path, "again") == path


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"family": "nope"}, "family must be one of"),
        ({"layers": "2"}, "'layers' must be an integer"),
        ({"colour": 1}, "unknown key"),
        ({"overrides": []}, "'overrides' must be an object"),
        ({"overrides": {"no_such_field": 1}}, "has no field"),
        ({"hidden": 30, "heads": 4}, "must divide hidden"),
        ({"heads": 4, "overrides": {"num_key_value_heads": 3}}, "must divide heads"),
        ({"prompt": 30, "new_tokens": 8, "capacity": 32}, "must fit the cache"),
        ({"overrides": {"rope_parameters": {"rope_type": "no-such-rope"}}}, "rope_type must be"),
    ],
)
def test_validation_errors_are_one_line(change: dict, message: str) -> None:
    data = {**TransformerSpec("llama").to_json(), **change}
    with pytest.raises(ForgeError, match=message) as info:
        TransformerSpec.from_json(data, "case.json")
    assert "\n" not in str(info.value) and "case.json: " in str(info.value)
    with pytest.raises(ForgeError, match="expected an object"):
        TransformerSpec.from_json([1, 2], "case.json")


def test_real_cases_match_eager() -> None:
    """GQA, llama3 RoPE and biases, prompt of 7 through prefill chunks of 3; a Qwen3
    (QK-norm) with a sliding window shorter than the prompt."""
    llama = TransformerSpec(
        "llama",
        layers=2,
        hidden=32,
        heads=4,
        vocab=96,
        seq=6,
        prompt=7,
        prompt_capacity=3,
        capacity=16,
        new_tokens=5,
        overrides=(
            ("attention_bias", True),
            ("num_key_value_heads", 2),
            (
                "rope_parameters",
                {
                    "rope_type": "llama3",
                    "rope_theta": 100.0,
                    "factor": 4.0,
                    "low_freq_factor": 1.0,
                    "high_freq_factor": 4.0,
                    "original_max_position_embeddings": 8,
                },
            ),
        ),
    )
    qwen3 = TransformerSpec(
        "qwen3",
        layers=2,
        hidden=32,
        heads=2,
        vocab=64,
        seq=5,
        prompt=6,
        prompt_capacity=4,
        capacity=16,
        new_tokens=5,
        overrides=(("sliding_window", 3), ("use_sliding_window", True)),
        seed=3,
    )
    for spec in (llama, qwen3):
        assert spec.problem() is None
        outcome = check(spec)
        assert outcome.kind == "match", f"{spec.describe()}: {outcome.detail}"
        assert outcome.worst <= 1e-4 and not outcome.degenerate


def test_a_mismatch_and_an_error_are_reported() -> None:
    spec = TransformerSpec("gpt2", layers=1, hidden=16, heads=2, vocab=32, seq=4)
    outcome = check(spec, ("forward",), tolerance=-1.0)
    assert outcome.kind == "mismatch" and outcome.check == "forward"
    assert outcome.signature == "mismatch in forward"
    # Dynamic RoPE recomputes its frequencies from the largest position at run time:
    # torch.export refuses the data-dependent branch, a one-line error (not drawn).
    dynamic = {"rope_type": "dynamic", "rope_theta": 100.0, "factor": 2.0}
    spec = TransformerSpec("llama", layers=1, overrides=(("rope_parameters", dynamic),))
    outcome = check(spec, ("forward",))
    assert outcome.kind == "error" and outcome.detail.startswith("CaptureError: ")
    assert "\n" not in outcome.detail and outcome.signature == "error: CaptureError in forward"
    assert "its 'dynamic' RoPE scaling updates the frequencies" in outcome.detail


def test_fp32_noise_rule_tells_rounding_from_a_wrong_result() -> None:
    """Logits a few ulps off pass; a 1e-3 shift, or one wrong row, does not. The spread
    of an ill-conditioned model (unscaled attention, one key/value head) is measured
    from its own one-ulp weight perturbations, not from eager's single sample."""
    spec = TransformerSpec("llama", layers=2, hidden=32, heads=4, vocab=64, seq=6, seed=5)
    model = build(spec)
    x = torch.randint(3, 64, (1, 6), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        eager = model(x, use_cache=False).logits
    ulps = eager * (1 + 2.0**-23)
    assert _fp32_noise(model, [x], slice(None), [ulps], [eager], 1e-5).startswith("within")
    shifted = eager + 1e-3
    assert _fp32_noise(model, [x], slice(None), [shifted], [eager], 1e-5).startswith("beyond")
    wrong_row = eager.clone()
    wrong_row[0, -1] = eager[0, -2]
    verdict = _fp32_noise(model, [x], slice(-1, None), [wrong_row[:, -1:]], [eager[:, -1:]], 1e-5)
    assert verdict.startswith("beyond")


def test_shrink_resets_overrides_and_halves_sizes() -> None:
    spec = generate(0)
    spec = replace(
        spec,
        layers=3,
        hidden=64,
        heads=4,
        overrides=(
            ("attention_bias", True),
            ("mlp_bias", True),
            ("num_key_value_heads", 2),
            ("tie_word_embeddings", True),
        ),
    )
    assert spec.problem() is None

    def fails(candidate: TransformerSpec) -> bool:  # "a bug needs tied embeddings"
        return candidate.options.get("tie_word_embeddings") is True

    shrunk = shrink(spec, fails)
    assert shrunk.options == {"tie_word_embeddings": True}
    assert shrunk.layers == 1 and shrunk.heads == 1 and shrunk.hidden < spec.hidden
    assert shrunk.vocab < spec.vocab and shrunk.seed == 0
    assert shrunk.problem() is None and fails(shrunk)


def test_cli_transformers_family(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["fuzz-models", "--family", "transformers", "--cases", "2", "--seed", "7"]
    assert main([*argv, "--save-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("2 random transformers: 2 match eager, 0 mismatch, 0 error")
    assert not list(tmp_path.iterdir())
    assert main(["fuzz-models", "--family", "transformers", "--cases", "-1"]) == 1
    assert "argument --cases: expected an integer from 0" in capsys.readouterr().err


def test_cases_run_through_the_given_mapper(tmp_path: Path) -> None:
    """A campaign's mapper runs `check` on the specs and returns outcomes in order; a
    crashed worker's outcome (a plain `Outcome`) counts as an error and is saved as found
    (shrinking it in the driver could crash the driver)."""
    from forge.devtools.fuzz_models import Outcome
    from forge.devtools.fuzz_transformers import TransformerOutcome, fuzz_transformers

    given: list[TransformerSpec] = []

    def mapper(fn: object, items: list[TransformerSpec]) -> list[Outcome]:
        assert fn is check
        given.extend(items)
        crash = Outcome("error", "WorkerCrash: the worker died")
        return [crash if s.seed == 6 else TransformerOutcome("match", worst=1e-6) for s in items]

    result = fuzz_transformers(3, seed=5, save_dir=tmp_path, run_cases=mapper)
    assert [s.seed for s in given] == [5, 6, 7]
    assert result.counts == {"match": 2, "error": 1}
    (failure,) = result.failures
    assert failure.shrunk is None and failure.saved is not None
    assert load_spec(failure.saved) == generate(6)


class _Forgetful:
    """A decode program planted with the bug the fuzzer must catch: it empties the cache
    before every step, so each token is decoded from itself alone (what OpenAI GPT's
    decode did before it was refused)."""

    def __init__(self, lm: CompiledLM):
        self.decode = lm.decode
        self.wrapper = lm.wrapper

    def __call__(self, input_ids: torch.Tensor, cache_position: torch.Tensor) -> torch.Tensor:
        self.wrapper.reset_cache()
        return self.decode(input_ids, cache_position)

    def __getattr__(self, name: str) -> object:
        return getattr(self.decode, name)


def test_a_decode_that_ignores_the_cache_is_caught(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`forge fuzz-models --family transformers` with a decode step that forgets the
    cache (planted here, in the test only): every case is a generate mismatch, and at
    std 0.3 the tokens themselves differ (at the default 0.02 greedy decoding often
    repeats one token whatever the context)."""
    compile_lm = generate_module.compile_lm

    def planted(*args: object, **kwargs: object) -> CompiledLM:
        lm = compile_lm(*args, **kwargs)
        lm.decode = _Forgetful(lm)  # type: ignore[assignment]
        return lm

    monkeypatch.setattr(generate_module, "compile_lm", planted)
    argv = ["fuzz-models", "--family", "transformers", "--cases", "3", "--seed", "7"]
    assert main([*argv, "--no-shrink", "--save-dir", str(tmp_path)]) == 1
    captured = capsys.readouterr()
    assert captured.out.startswith("3 random transformers: 0 match eager, 3 mismatch, 0 error")
    assert captured.err.count("generate tokens differ") == 3, captured.err
    assert not list(tmp_path.iterdir())
