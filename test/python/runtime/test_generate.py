"""Greedy generation with a compiled prefill and decode sharing one static cache, for all
six built-in models (LFM2's short convolutions included) and for architectures Forge
never names: the tokens match `model.generate` (eager, dynamic cache), the per-step
logits and the final cache match the eager static-cache wrapper, and attention is fused
(one `npu.sdpa` per attention layer) in both programs. A prompt longer than the prefill
is prefilled in chunks with the same tokens; sampling is deterministic for a seed."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import pytest
import torch

from forge.dialects import npu
from forge.frontend import models
from forge.frontend.static_cache import StaticCacheLM, capture_programs
from forge.runtime.generate import CompiledLM, compile_lm, greedy, whole_blocks
from forge.support.diagnostics import ForgeError

CAPACITY = 32
PROMPT_CAPACITY = 8
CHUNK = 3
"""Prefill size of the chunked programs: a 7-token prompt takes chunks at 0, 3 and 6."""
NEW_TOKENS = 8
STD = models.WIDE_STD
"""Re-initialization std of the weights (`models.widened`); larger stds give larger
logits and, at 0.8, per-step differences above 1e-4."""
STD_OF = {"granite-350m": 0.8}
"""Granite multiplies its tied embeddings by 12 and its layer outputs by 0.263: at 0.3 the
input embedding dominates the residual stream and greedy decoding repeats the last
token (its logits, divided by 4, stay small at 0.8)."""

TINY: dict[str, Any] = {
    "vocab_size": 256,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "max_position_embeddings": 256,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "pad_token_id": 0,
}
OTHER_ARCHITECTURES: dict[str, tuple[str, str, dict[str, Any]]] = {
    # name: (config class, model class, config beyond TINY): features the built-ins lack.
    "mistral": (  # a sliding window shorter than the prompt
        "MistralConfig",
        "MistralForCausalLM",
        {"num_key_value_heads": 2, "sliding_window": 4},
    ),
    "qwen3": (  # q/k RMSNorm
        "Qwen3Config",
        "Qwen3ForCausalLM",
        {"num_key_value_heads": 2, "head_dim": 16},
    ),
    "phi3": ("Phi3Config", "Phi3ForCausalLM", {}),  # fused qkv and gate_up projections
    "gpt-neox": (  # parallel residual, rotary on a quarter of each head
        "GPTNeoXConfig",
        "GPTNeoXForCausalLM",
        {"rotary_pct": 0.25},
    ),
    "gemma": (  # embeddings scaled by sqrt(hidden), (1 + w) RMSNorm, tanh GELU
        "GemmaConfig",
        "GemmaForCausalLM",
        {"num_key_value_heads": 1, "head_dim": 16},
    ),
    "olmo": (  # non-parametric LayerNorm, clipped q/k/v
        "OlmoConfig",
        "OlmoForCausalLM",
        {"clip_qkv": 0.5},
    ),
}


def _compile(
    model: torch.nn.Module, prompt_capacity: int, pipeline: dict[str, Any] | None = None
) -> CompiledLM:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return compile_lm(
            model, capacity=CAPACITY, prompt_capacity=prompt_capacity, pipeline=pipeline
        )


@dataclass
class Built:
    name: str
    model: torch.nn.Module
    lm: CompiledLM
    """Prefill of PROMPT_CAPACITY tokens."""


@pytest.fixture(scope="module", params=list(models.SPECS))
def built(request: pytest.FixtureRequest) -> Built:
    name = request.param
    model = models.widened(models.build_model(name, tiny=True), STD_OF.get(name, STD))
    return Built(name, model, _compile(model, PROMPT_CAPACITY))


@pytest.fixture(scope="module")
def chunked(built: Built) -> CompiledLM:
    """The same model with a prefill of CHUNK tokens."""
    return _compile(built.model, CHUNK)


def _prompt(length: int = 5) -> torch.Tensor:
    return torch.randint(1, 256, (1, length), generator=torch.Generator().manual_seed(5))


def _eager_tokens(
    model: torch.nn.Module, prompt: torch.Tensor, n: int, eos: int | None = None
) -> list[int]:
    """`model.generate`'s greedy tokens, stopping at `eos` only (not at the model's own
    EOS token, as `CompiledLM.generate` without an EOS does not either)."""
    out = model.generate(
        prompt,
        attention_mask=torch.ones_like(prompt),
        do_sample=False,
        max_new_tokens=n,
        pad_token_id=0,
        eos_token_id=eos,
    )
    return out[0, prompt.shape[1] :].tolist()


def _check_steps_match_eager(lm: CompiledLM, model: torch.nn.Module, prompt: torch.Tensor) -> None:
    """Greedy generation from `prompt` (in chunks if it is longer than the prefill) gives
    logits within 1e-4 of the eager static-cache wrapper fed the whole prompt at once and
    then the same tokens, and leaves the shared cache as that wrapper leaves its own."""
    length = prompt.shape[1]
    tokens = lm.generate(prompt, NEW_TOKENS, keep_logits=True)
    eager = StaticCacheLM(model, CAPACITY).eval()
    padded = torch.zeros(1, max(length, PROMPT_CAPACITY), dtype=torch.long)
    padded[:, :length] = prompt
    with torch.no_grad():
        expected = [eager(padded, torch.arange(padded.shape[1]))[0, length - 1]]
        for step, token in enumerate(tokens[:-1]):
            position = torch.tensor([length + step])
            expected.append(eager(torch.tensor([[token]]), position)[0, -1])
    assert len(lm.step_logits) == len(expected) == NEW_TOKENS
    for step, (got, want) in enumerate(zip(lm.step_logits, expected, strict=True)):
        diff = (got - want).abs().max().item()
        assert diff <= 1e-4, f"step {step}: logits max-abs {diff:.3e}"
    # Rows a chunk padded beyond the eager prefill are never read (the decode steps
    # overwrite them first), so the caches agree wherever eager wrote.
    for got, want in zip(lm.wrapper.cache_buffers(), eager.cache_buffers(), strict=True):
        assert got.shape == want.shape
        diff = (got.double() - want.double()).abs().max().item()
        assert diff <= 1e-4, f"cache differs by {diff:.3e}"


def test_tokens_match_generate(built: Built) -> None:
    model, lm = built.model, built.lm
    prompt = _prompt()
    eos = model.generation_config.eos_token_id
    tokens = lm.generate(prompt, NEW_TOKENS, eos_token_id=eos)
    assert tokens == _eager_tokens(model, prompt, NEW_TOKENS, eos)
    assert len(tokens) == NEW_TOKENS and eos not in tokens
    assert len(set(tokens)) > 1, f"degenerate greedy tokens {tokens}"
    stats = lm.stats
    assert stats.stop_reason == "max_new_tokens"
    assert stats.prefill_seconds > 0
    assert len(stats.decode_seconds) == NEW_TOKENS - 1
    assert len(stats.decode_bytes_moved) == NEW_TOKENS - 1
    # The cache is reset at every call: a second run gives the same tokens.
    assert lm.generate(prompt, NEW_TOKENS, eos_token_id=eos) == tokens


def test_step_logits_and_cache_match_eager_static_cache(built: Built) -> None:
    _check_steps_match_eager(built.lm, built.model, _prompt())


def test_attention_fused_in_both_programs(built: Built) -> None:
    lm = built.lm
    assert lm.num_layers == models.get_spec(built.name).config(tiny=True).num_hidden_layers
    assert lm.attention_layers == models.get_spec(built.name).attention_layers(tiny=True)
    for program in (lm.prefill, lm.decode):
        # Every layer's cache writes and attention are one paged-attention node, in the
        # graph (npu-fuse-cached-attention; the cache of 32 is one block).
        assert program.count_ops("npu.cached_attention") == lm.attention_layers
        assert program.count_ops("npu.sdpa") == 0
        assert program.count_ops("npu.run_start") == 1
        placed = {
            op.device.data
            for op in program.executor.function.walk()
            if isinstance(op, npu.CachedAttentionOp) and op.device is not None
        }
        assert placed == {"npu"}


def test_cache_writes_are_one_step(built: Built) -> None:
    """The attention layers' keys and values are written by the graph itself; what a
    program still writes on the CPU (LFM2's convolution histories) goes in steps of
    `cache_updates_kernel`, each several caches at once."""
    convolutions = built.lm.num_layers - built.lm.attention_layers
    for program in (built.lm.prefill, built.lm.decode):
        updates = program.count_ops("npu.cache_update")
        assert updates == convolutions
        writes = [s for s in program.executor.steps if s.cache_updates is not None]
        assert sum(len(step.outputs) for step in writes) == updates
        assert all(len(s.inputs) == 1 + 2 * len(s.outputs) for s in writes)


def test_decode_rows_go_in_as_one_block(built: Built) -> None:
    """Where every layer attends with caches of one shape (all models here but LFM2's
    hybrid), the keys and values are slices of one tensor, which the graphs bind where
    it lives and write in place (nothing pinned, nothing copied after the graph); the
    tokens stay eager's (`test_tokens_match_generate`)."""
    lm = built.lm
    stack = lm.wrapper.cache_stack
    caches = lm.wrapper.cache_buffers()[: 2 * lm.attention_layers]
    if stack is None:
        assert lm.attention_layers < lm.num_layers
        return
    assert all(cache._base is stack for cache in caches)
    assert lm.decode.executor.pinned_rows == 0
    lm.generate(_prompt(), NEW_TOKENS)
    assert stack.abs().sum() > 0
    lm.reset()
    assert stack.abs().sum() == 0


def test_cache_holds_every_layer_state(built: Built) -> None:
    """Keys and values per attention layer; the conv input at every position (after
    kernel - 1 zero columns) per LFM2 convolution layer; one cache length for all."""
    lm = built.lm
    buffers = lm.wrapper.cache_buffers()
    convs = lm.num_layers - lm.attention_layers
    assert len(buffers) == 2 * lm.attention_layers + convs + 1
    assert buffers[-1].shape == () and buffers[-1].dtype == torch.long
    for state in buffers[2 * lm.attention_layers : -1]:
        config = built.model.config
        assert list(state.shape) == [1, config.hidden_size, config.conv_L_cache - 1 + CAPACITY]
    lm.generate(_prompt(), NEW_TOKENS)
    written = _prompt().shape[1] + NEW_TOKENS - 1
    keys = buffers[0]
    assert keys.shape[2] == CAPACITY
    assert keys[:, :, :written].abs().sum() > 0
    assert keys[:, :, PROMPT_CAPACITY:].abs().sum() > 0  # decode rows beyond the prefill
    assert keys[:, :, max(written, PROMPT_CAPACITY) :].abs().sum() == 0


def test_stops_at_eos_and_capacity(built: Built) -> None:
    lm = built.lm
    prompt = _prompt()
    tokens = lm.generate(prompt, NEW_TOKENS)
    eos = tokens[3]
    first = tokens.index(eos)
    assert lm.generate(prompt, NEW_TOKENS, eos_token_id=eos) == tokens[: first + 1]
    assert lm.stats.stop_reason == "eos"
    # Several EOS ids (Llama 3's generation config): the first one produced stops.
    later = tokens[5]
    stop = min(tokens.index(later), first)
    assert lm.generate(prompt, NEW_TOKENS, eos_token_id=[later, eos]) == tokens[: stop + 1]
    assert lm.stats.stop_reason == "eos"

    longest = CAPACITY - prompt.shape[1] + 1
    full = lm.generate(prompt, CAPACITY + 10)
    assert len(full) == longest
    assert full[:NEW_TOKENS] == tokens
    assert lm.stats.stop_reason == "capacity"
    assert "cache holds 32 positions" in lm.notes[0]


def test_chunked_prefill_matches_one_prefill_and_generate(
    built: Built, chunked: CompiledLM
) -> None:
    """A 7-token prompt through prefill chunks of 3 (the last right-padded) gives the
    tokens of one 8-token prefill and of `model.generate`."""
    prompt = _prompt(7)
    tokens = chunked.generate(prompt, NEW_TOKENS)
    assert chunked.stats.prefill_chunks == 3
    assert tokens == built.lm.generate(prompt, NEW_TOKENS)
    assert built.lm.stats.prefill_chunks == 1
    assert tokens == _eager_tokens(built.model, prompt, NEW_TOKENS)
    assert len(set(tokens)) > 1, f"degenerate greedy tokens {tokens}"


def test_chunked_prefill_last_chunk_moved_back(built: Built, chunked: CompiledLM) -> None:
    """A last chunk that would run past the cache ends at its last position instead:
    chunks of 3 at 0, 3, ..., 27 and 29 (not 30: position 32 does not exist)."""
    prompt = _prompt(CAPACITY - 1)
    tokens = chunked.generate(prompt, 2)
    assert chunked.stats.prefill_chunks == 11
    assert tokens == _eager_tokens(built.model, prompt, 2)
    assert chunked.stats.stop_reason == "max_new_tokens"


def test_prompt_errors(built: Built) -> None:
    lm = built.lm
    with pytest.raises(ForgeError, match="does not fit the cache of 32 positions"):
        lm.generate(_prompt(CAPACITY), 2)
    with pytest.raises(ForgeError, match="the prompt is empty"):
        lm.generate([], 2)


def test_sampling_is_deterministic_for_a_seed(built: Built) -> None:
    lm = built.lm
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


@pytest.mark.parametrize("name", list(OTHER_ARCHITECTURES))
def test_other_architectures(name: str) -> None:
    """A tiny random model of an architecture Forge does not name: a 7-token prompt in
    prefill chunks of 3 gives `model.generate`'s greedy tokens, logits and cache within
    1e-4 of the eager static-cache wrapper, and one paged attention per layer (with
    Mistral's sliding window of 4 as the node's window)."""
    import transformers

    config_class, model_class, extra = OTHER_ARCHITECTURES[name]
    config = getattr(transformers, config_class)(**TINY, **extra, attn_implementation="eager")
    torch.manual_seed(0)
    model = models.widened(getattr(transformers, model_class)(config).eval(), STD)
    lm = _compile(model, CHUNK)
    prompt = _prompt(7)
    tokens = lm.generate(prompt, NEW_TOKENS)
    assert lm.stats.prefill_chunks == 3
    assert tokens == _eager_tokens(model, prompt, NEW_TOKENS)
    assert len(set(tokens)) > 1, f"degenerate greedy tokens {tokens}"
    _check_steps_match_eager(lm, model, prompt)
    assert lm.attention_layers == lm.num_layers == 2
    window = extra.get("sliding_window", 0)
    for program in (lm.prefill, lm.decode):
        fused = [op for op in program.executor.function.walk() if op.name == "npu.cached_attention"]
        assert [op.window_size for op in fused] == [window] * 2
        assert program.count_ops("npu.sdpa") == 0
        assert program.report.fallback_ops == 0  # the paged nodes run in the graph


def test_positions_must_be_a_run(built: Built) -> None:
    """A program fed positions that are not a run inside the cache fails with a one-line
    error before its graph writes a key or value (`npu.run_start` checks them on the
    CPU), instead of writing other rows than it attends over."""
    lm = built.lm
    lm.reset()
    ids = torch.zeros(1, PROMPT_CAPACITY, dtype=torch.long)
    gaps = torch.arange(PROMPT_CAPACITY)
    gaps[1] = 5
    with pytest.raises(ForgeError, match="consecutive positions within the cache's 32"):
        lm.prefill(ids, gaps)
    past_the_end = torch.arange(lm.capacity - 2, lm.capacity - 2 + PROMPT_CAPACITY)
    with pytest.raises(ForgeError, match="are not 8 consecutive"):
        lm.prefill(ids, past_the_end)
    keys_and_values = lm.wrapper.cache_buffers()[: 2 * lm.attention_layers]
    assert all(cache.abs().sum() == 0 for cache in keys_and_values)


@pytest.mark.parametrize("name", ["gpt2", "llama-3.2-1b"])
def test_unfused_attention_matches_eager(name: str) -> None:
    """Without npu-fuse-cached-attention (a cache that is not whole blocks, another
    mask) a step writes its caches on the CPU and attends before the write
    (npu-attend-before-write): the same logits and caches as eager."""
    model = models.widened(models.build_model(name, tiny=True), STD)
    lm = _compile(model, CHUNK, pipeline={"skip": ("npu-fuse-cached-attention",)})
    for program in (lm.prefill, lm.decode):
        assert program.count_ops("npu.cached_attention") == 0
        assert program.count_ops("npu.sdpa") == lm.attention_layers
        assert program.count_ops("npu.cache_update") == 2 * lm.attention_layers
    _check_steps_match_eager(lm, model, _prompt(7))


def test_capacity_is_whole_blocks() -> None:
    """compile_lm rounds the cache up to whole blocks of 32 positions where the model
    has them, and keeps it where it has not."""
    assert [whole_blocks(c, 1024) for c in (1, 32, 33, 132, 1000, 1024)] == [
        32,
        32,
        64,
        160,
        1024,
        1024,
    ]
    assert whole_blocks(1000, 1010) == 1000
    assert whole_blocks(100, None) == 128
    assert whole_blocks(0, 1024) == 0
    model = models.build_model("gpt2", tiny=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lm = compile_lm(model, capacity=20, prompt_capacity=4)
    assert lm.capacity == 32
    assert lm.wrapper.cache_buffers()[0].shape[2] == 32


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


def test_recurrent_state_is_refused() -> None:
    """An SSM state is not indexed by position (a right-padded prefill would run the
    padding through it): a clear error, not wrong tokens."""
    import transformers

    config = transformers.MambaConfig(
        vocab_size=256, hidden_size=64, num_hidden_layers=2, state_size=4
    )
    model = transformers.MambaForCausalLM(config).eval()
    with pytest.raises(ForgeError, match="does not support recurrent"):
        capture_programs(model, capacity=CAPACITY, prompt_capacity=PROMPT_CAPACITY)


@pytest.mark.parametrize(
    "logits",
    [
        [1.0, 3.0, 3.0, 2.0],  # ties: the first
        [1.0, float("nan"), 5.0, float("nan")],  # a NaN counts as the largest
        [float("-inf")] * 3,
        [float("inf"), 1.0, float("inf")],
    ],
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_greedy_is_torch_argmax(logits: list[float], dtype: torch.dtype) -> None:
    tensor = torch.tensor(logits, dtype=dtype)
    assert greedy(tensor) == int(tensor.argmax(-1).item())
    row = torch.tensor([logits, logits], dtype=dtype)[1]  # a view, as a logits row is
    assert greedy(row) == int(row.argmax(-1).item())
