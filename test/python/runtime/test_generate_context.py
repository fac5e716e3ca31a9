"""Generation never decodes without its context (issue 52): a model whose step writes no
cache (transformers' OpenAI GPT, whose forward takes none) is refused in one line instead
of decoding every token from itself alone, and GPT-Neo's local attention windows hold in
both programs. The factories are the issue's, usable as `forge generate FILE.py:NAME`:
weights at std 0.3, where the logits are not flat and a model that ignores its context
or its window gives other tokens (1 of 8 agreed before)."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import torch

import forge
from forge.cli import main
from forge.devtools.fuzz_transformers import eager_greedy
from forge.frontend.models import widened
from forge.frontend.static_cache import StaticCacheLM, capture_programs
from forge.runtime.generate import compile_lm
from forge.support.diagnostics import ForgeError

HERE = Path(__file__)
PROMPT = torch.randint(0, 512, (1, 16), generator=torch.Generator().manual_seed(5))


def _scaled(model: torch.nn.Module) -> torch.nn.Module:
    """The issue's `_scaled`: matrices at std 0.3, seed 3."""
    return widened(model, 0.3, seed=3).eval()


def openai_gpt() -> tuple[torch.nn.Module, tuple[torch.Tensor]]:
    from transformers import OpenAIGPTConfig, OpenAIGPTLMHeadModel

    torch.manual_seed(0)
    config = OpenAIGPTConfig(
        vocab_size=512,
        n_positions=128,
        n_embd=64,
        n_layer=2,
        n_head=4,
        attn_implementation="eager",
        use_cache=False,
    )
    return _scaled(OpenAIGPTLMHeadModel(config)), (PROMPT,)


def _gpt_neo(window: int, kinds: list[str]) -> torch.nn.Module:
    from transformers import GPTNeoConfig, GPTNeoForCausalLM

    torch.manual_seed(0)
    config = GPTNeoConfig(
        vocab_size=512,
        max_position_embeddings=128,
        hidden_size=64,
        num_layers=len(kinds),
        num_heads=4,
        window_size=window,
        attention_types=[[kinds, 1]],
        bos_token_id=1,
        eos_token_id=2,
        attn_implementation="eager",
        use_cache=False,
    )
    return _scaled(GPTNeoForCausalLM(config))


def gpt_neo_local() -> tuple[torch.nn.Module, tuple[torch.Tensor]]:
    """Every layer local, a window of 2 positions."""
    return _gpt_neo(2, ["local", "local"]), (PROMPT,)


def gpt_neo_mixed() -> tuple[torch.nn.Module, tuple[torch.Tensor]]:
    """A global layer and a local one of 3 positions (GPT-Neo's released pattern)."""
    return _gpt_neo(3, ["global", "local"]), (PROMPT,)


def _eager(model: torch.nn.Module, prompt: torch.Tensor, n: int) -> tuple[list[int], list]:
    return eager_greedy(model, prompt, n)


def _one_line_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(argv) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


def test_a_model_that_writes_no_cache_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    """OpenAI GPT's forward takes no cache: the wrapper's cache reaches it through
    **kwargs and no layer is written. Refused by `forge generate` (exit 1, one line)
    and by `forge.compile_lm`, before anything is compiled."""
    argv = ["generate", f"{HERE}:openai_gpt", "--capacity", "32", "--prompt-capacity", "8"]
    err = _one_line_error([*argv, "--prompt-len", "8", "--max-new-tokens", "8", "--check"], capsys)
    assert "OpenAIGPTLMHeadModel wrote none of its 2 cache layers in an eager step" in err
    model, _ = openai_gpt()
    with pytest.raises(ForgeError, match="wrote none of its 2 cache layers") as info:
        forge.compile_lm(model, capacity=32, prompt_capacity=8)
    assert "\n" not in str(info.value)


def test_a_layer_that_neither_writes_nor_shares_is_refused() -> None:
    """A layer writing another layer's cache (GPT-Neo's second layer pointed at the
    first's) leaves its own unwritten: an error naming it, never a silent KV-sharing
    consumer (which only the config's `DummyLayer`s are)."""
    model, _ = gpt_neo_mixed()
    model.transformer.h[1].attn.attention.layer_id = 0
    with pytest.raises(ForgeError, match=r"layer\(s\) 1 neither write nor share a cache layer"):
        capture_programs(model, capacity=32, prompt_capacity=8)


def test_gpt_neo_local_window_cli(capsys: pytest.CaptureFixture[str]) -> None:
    """The issue's acceptance: every layer local at window 2, 8 of 8 tokens."""
    argv = ["generate", f"{HERE}:gpt_neo_local", "--capacity", "32", "--prompt-capacity", "8"]
    assert main([*argv, "--prompt-len", "8", "--max-new-tokens", "8", "--check", "--no-cache"]) == 0
    assert "check: ok: 8 of 8 tokens agree with eager model.generate" in capsys.readouterr().out


def test_gpt_neo_windows_in_chunked_prefill_and_decode() -> None:
    """A global and a local layer, a 7-token prompt through prefill chunks of 3: the
    tokens and every step's logits are eager's; the eager static-cache wrapper agrees
    too, and the model's own window rows are left as they were."""
    model, _ = gpt_neo_mixed()
    local = model.transformer.h[1].attn.attention
    bias = local.bias.clone()
    prompt = PROMPT[:, :7]
    tokens, logits = _eager(model, prompt, 8)
    assert len(set(tokens)) > 2, f"degenerate greedy tokens {tokens}"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lm = compile_lm(model, capacity=32, prompt_capacity=3)
    assert lm.generate(prompt, 8, keep_logits=True) == tokens
    assert lm.stats.prefill_chunks == 3
    worst = max(float((a - b).abs().max()) for a, b in zip(lm.step_logits, logits, strict=True))
    assert worst < 1e-4
    assert torch.equal(local.bias, bias) and "bias" not in local.__dict__


def test_window_rows_are_the_step_positions() -> None:
    """The rows a local layer reads over a static cache of 8 positions for a step at
    positions 3 and 4, window 2: the last two rows see {2, 3} and {3, 4}."""
    model, _ = gpt_neo_local()
    wrapper = StaticCacheLM(model, 8)
    assert len(wrapper.local_windows.layers) == 2
    rows = wrapper.local_windows.rows(torch.tensor([3, 4]), 8)[0, 0]
    assert rows.shape == (8, 8) and not rows[:6].any()
    assert rows[6].nonzero().flatten().tolist() == [2, 3]
    assert rows[7].nonzero().flatten().tolist() == [3, 4]
    model.config.window_size = 0
    with pytest.raises(ForgeError, match="local attention layers but no positive `window_size`"):
        StaticCacheLM(model, 8)
