"""Greedy generation with a compiled prefill and decode sharing one static KV cache:
the tokens match `model.generate` (eager, dynamic cache), the per-step logits match the
eager static-cache wrapper, and attention is fused (one `npu.sdpa` per layer) in both
programs. A prompt longer than the prefill is prefilled in chunks with the same tokens;
sampling is deterministic for a seed."""

from __future__ import annotations

import warnings

import pytest
import torch

from forge.diagnostics import ForgeError
from forge.frontend import models
from forge.frontend.static_cache import StaticCacheLM, capture_programs
from forge.runtime.generate import CompiledLM, compile_lm

CAPACITY = 32
PROMPT_CAPACITY = 8
NEW_TOKENS = 8
MODELS = ["gpt2", "llama-3.2-1b"]


def _model(name: str) -> torch.nn.Module:
    """The tiny model, re-initialized with a larger seeded std: at the default init
    (std 0.02) greedy decoding repeats one token, which would let a broken cache pass."""
    model = models.build_model(name, tiny=True)
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for parameter in model.parameters():
            if parameter.dim() >= 2:
                parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.3)
    return model


@pytest.fixture(scope="module", params=MODELS)
def compiled(request: pytest.FixtureRequest) -> tuple[torch.nn.Module, CompiledLM]:
    model = _model(request.param)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lm = compile_lm(model, capacity=CAPACITY, prompt_capacity=PROMPT_CAPACITY)
    return model, lm


def _prompt(length: int = 5) -> torch.Tensor:
    return torch.randint(1, 256, (1, length), generator=torch.Generator().manual_seed(5))


def _eager_tokens(model: torch.nn.Module, prompt: torch.Tensor, n: int) -> list[int]:
    out = model.generate(
        prompt,
        attention_mask=torch.ones_like(prompt),
        do_sample=False,
        max_new_tokens=n,
        pad_token_id=0,
    )
    return out[0, prompt.shape[1] :].tolist()


def test_tokens_match_generate(compiled: tuple[torch.nn.Module, CompiledLM]) -> None:
    model, lm = compiled
    prompt = _prompt()
    eos = model.generation_config.eos_token_id
    tokens = lm.generate(prompt, NEW_TOKENS, eos_token_id=eos)
    assert tokens == _eager_tokens(model, prompt, NEW_TOKENS)
    assert len(tokens) == NEW_TOKENS and eos not in tokens
    assert len(set(tokens)) > 1, f"degenerate greedy tokens {tokens}"
    stats = lm.stats
    assert stats.stop_reason == "max_new_tokens"
    assert stats.prefill_seconds > 0
    assert len(stats.decode_seconds) == NEW_TOKENS - 1
    assert len(stats.decode_bytes_moved) == NEW_TOKENS - 1
    # The cache is reset at every call: a second run gives the same tokens.
    assert lm.generate(prompt, NEW_TOKENS, eos_token_id=eos) == tokens


def test_step_logits_match_eager_static_cache(
    compiled: tuple[torch.nn.Module, CompiledLM],
) -> None:
    model, lm = compiled
    prompt = _prompt()
    length = prompt.shape[1]
    tokens = lm.generate(prompt, NEW_TOKENS, keep_logits=True)
    eager = StaticCacheLM(model, CAPACITY).eval()
    padded = torch.zeros(1, PROMPT_CAPACITY, dtype=torch.long)
    padded[:, :length] = prompt
    with torch.no_grad():
        expected = [eager(padded, torch.arange(PROMPT_CAPACITY))[0, length - 1]]
        for step, token in enumerate(tokens[:-1]):
            position = torch.tensor([length + step])
            expected.append(eager(torch.tensor([[token]]), position)[0, -1])
    assert len(lm.step_logits) == len(expected) == NEW_TOKENS
    for step, (got, want) in enumerate(zip(lm.step_logits, expected, strict=True)):
        diff = (got - want).abs().max().item()
        assert diff <= 1e-4, f"step {step}: logits max-abs {diff:.3e}"


def test_attention_fused_in_both_programs(compiled: tuple[torch.nn.Module, CompiledLM]) -> None:
    _, lm = compiled
    layers = lm.num_layers
    assert layers == 2
    assert lm.prefill.count_ops("npu.sdpa") == layers
    assert lm.decode.count_ops("npu.sdpa") == layers


def test_programs_share_the_cache(compiled: tuple[torch.nn.Module, CompiledLM]) -> None:
    _, lm = compiled
    cache = {t.data_ptr() for t in lm.wrapper.cache_buffers()}
    for program in (lm.prefill, lm.decode):
        executor = program.executor
        written = {executor._template[slot].data_ptr() for _, slot in executor._write_slots}
        assert written and written <= cache


def test_stops_at_eos_and_capacity(compiled: tuple[torch.nn.Module, CompiledLM]) -> None:
    _, lm = compiled
    prompt = _prompt()
    tokens = lm.generate(prompt, NEW_TOKENS)
    eos = tokens[3]
    first = tokens.index(eos)
    assert lm.generate(prompt, NEW_TOKENS, eos_token_id=eos) == tokens[: first + 1]
    assert lm.stats.stop_reason == "eos"

    longest = CAPACITY - prompt.shape[1] + 1
    full = lm.generate(prompt, CAPACITY + 10)
    assert len(full) == longest
    assert full[:NEW_TOKENS] == tokens
    assert lm.stats.stop_reason == "capacity"
    assert "cache holds 32 positions" in lm.notes[0]


def test_chunked_prefill_matches_one_prefill_and_generate(
    compiled: tuple[torch.nn.Module, CompiledLM],
) -> None:
    """An 11-token prompt through prefill chunks of 4 (the last right-padded) gives the
    tokens of one 16-token prefill and of `model.generate`."""
    model, _ = compiled
    prompt = _prompt(11)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        chunked = compile_lm(model, capacity=CAPACITY, prompt_capacity=4)
        whole = compile_lm(model, capacity=CAPACITY, prompt_capacity=16)
    tokens = chunked.generate(prompt, NEW_TOKENS)
    assert chunked.stats.prefill_chunks == 3
    assert tokens == whole.generate(prompt, NEW_TOKENS)
    assert whole.stats.prefill_chunks == 1
    assert tokens == _eager_tokens(model, prompt, NEW_TOKENS)
    assert len(set(tokens)) > 1, f"degenerate greedy tokens {tokens}"


def test_chunked_prefill_last_chunk_moved_back(
    compiled: tuple[torch.nn.Module, CompiledLM],
) -> None:
    """A last chunk that would run past the cache ends at its last position instead:
    chunks of 7 at 0, 7, 14, 21 and 25 (not 28: positions 32-34 do not exist)."""
    model, _ = compiled
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lm = compile_lm(model, capacity=CAPACITY, prompt_capacity=7)
    prompt = _prompt(CAPACITY - 3)
    tokens = lm.generate(prompt, 3)
    assert lm.stats.prefill_chunks == 5
    assert tokens == _eager_tokens(model, prompt, 3)
    assert lm.stats.stop_reason == "max_new_tokens"


def test_prompt_errors(compiled: tuple[torch.nn.Module, CompiledLM]) -> None:
    _, lm = compiled
    with pytest.raises(ForgeError, match="does not fit the cache of 32 positions"):
        lm.generate(_prompt(CAPACITY), 2)
    with pytest.raises(ForgeError, match="the prompt is empty"):
        lm.generate([], 2)


def test_sampling_is_deterministic_for_a_seed(
    compiled: tuple[torch.nn.Module, CompiledLM],
) -> None:
    _, lm = compiled
    prompt = _prompt()
    greedy = lm.generate(prompt, NEW_TOKENS)
    sampled = lm.generate(prompt, NEW_TOKENS, temperature=1.5, top_k=20, seed=3)
    assert lm.generate(prompt, NEW_TOKENS, temperature=1.5, top_k=20, seed=3) == sampled
    others = [lm.generate(prompt, NEW_TOKENS, temperature=1.5, seed=s) for s in range(4, 8)]
    assert any(other != sampled for other in others)
    assert lm.generate(prompt, NEW_TOKENS, temperature=1e-6, seed=0) == greedy
    assert lm.generate(prompt, NEW_TOKENS, temperature=1.0, top_k=1, seed=9) == greedy
    with pytest.raises(ForgeError, match="temperature must be positive"):
        lm.generate(prompt, 2, temperature=0.0)
    with pytest.raises(ForgeError, match="top_k needs a temperature"):
        lm.generate(prompt, 2, top_k=5)


def test_capture_programs_errors() -> None:
    model = models.build_model("llama-3.2-1b", tiny=True)
    with pytest.raises(ForgeError, match="smaller than the prompt capacity"):
        capture_programs(model, capacity=4, prompt_capacity=8)
    with pytest.raises(ForgeError, match="exceeds the model's"):
        capture_programs(model, capacity=10**6, prompt_capacity=8)
    with pytest.raises(ForgeError, match="causal LM"):
        capture_programs(torch.nn.Linear(2, 2), capacity=8, prompt_capacity=4)
    # The model's own generation config is left as it was.
    assert model.generation_config.cache_implementation is None
