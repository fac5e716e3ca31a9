"""`forge generate`: streamed tokens, timing figures, `--check` against eager
`model.generate`, sampling, and one-line errors."""

from __future__ import annotations

from pathlib import Path

import pytest
import transformers
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from forge.cli import main
from forge.commands.generate import TextStream

SMALL = ["--tiny", "--capacity", "32", "--prompt-capacity", "8", "--max-new-tokens", "4"]


def test_generate_greedy_check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The tiny GPT-2 widened (`models.widened`): at its own init greedy decoding repeats
    # one token, which a decode step that ignores its cache would give too.
    factory = tmp_path / "wide.py"
    factory.write_text(
        "from forge.frontend import models\n\n\n"
        "def gpt2():\n    return models.widened(models.build_model('gpt2', tiny=True))\n"
    )
    # 11 prompt tokens through prefill chunks of 8: two chunks.
    argv = ["generate", f"{factory}:gpt2", *SMALL[1:], "--prompt-len", "11", "--check"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    tokens = next(line for line in out.splitlines() if line.startswith("tokens:"))
    assert len(tokens.split()) == 1 + 4 and len(set(tokens.split()[1:])) > 1, tokens
    for text in (
        "compile prefill:",
        "compile decode:",
        "cache: 32 positions; 2 of 2 attention layer(s) write and attend in one paged",
        "prefill chunk(s): 2",
        "time to first token:",
        "decode latency per token: mean",
        "P99",
        "tokens/s",
        "KiB",
        "peak RSS:",
        "check: ok: 4 of 4 tokens agree with eager model.generate (greedy)",
    ):
        assert text in out, text


def test_generate_check_says_mismatch_and_exits_1(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A wrong lowering (linear layers negated, the LM head's among them, put in by a
    monkeypatch: a test, not the main path) changes the greedy tokens: MISMATCH, eager's
    tokens, exit 1."""
    from forge.conversion import nnfactory_graph

    lower_linear = nnfactory_graph.lower_linear

    def negated(b: nnfactory_graph.GraphBuilder, op: object) -> nnfactory_graph.Node:
        return b.factory.eltwise_mul(lower_linear(b, op), b.constant(-1.0))

    nnfactory_graph.clear_cache()
    monkeypatch.setattr(nnfactory_graph, "lower_linear", negated)
    argv = ["generate", "gpt2", *SMALL, "--prompt-len", "6", "--check", "--no-cache"]
    assert main(argv) == 1
    out = capsys.readouterr().out
    assert "check: MISMATCH: " in out and "eager tokens: [" in out
    nnfactory_graph.clear_cache()


def test_generate_int8_dynamic_prefill(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["generate", "llama-3.2-1b", *SMALL, "--prompt-ids", "1,2,3", "--no-cache"]
    assert main([*argv, "--precision", "int8", "--dynamic-prefill"]) == 0
    out = capsys.readouterr().out
    assert "time to first token:" in out
    tokens = next(line for line in out.splitlines() if line.startswith("tokens:"))
    assert len(tokens.split()) == 1 + 4


def test_generate_rounds_the_cache_to_whole_blocks(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["generate", "gpt2", "--tiny", "--capacity", "20", "--prompt-capacity", "4"]
    assert main([*argv, "--max-new-tokens", "2", "--prompt-len", "3", "--no-cache"]) == 0
    assert "cache: 32 positions (20 rounded up to whole blocks); 2 of 2" in capsys.readouterr().out


def test_generate_sampling(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["generate", "llama-3.2-1b", *SMALL, "--prompt-ids", "1,2,3", "--check"]
    assert main([*argv, "--temperature", "0.8", "--top-k", "5", "--seed", "2"]) == 0
    out = capsys.readouterr().out
    assert "temperature 0.8, top-k 5, seed 2" in out
    assert "tokens agree with eager" in out


def _error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(argv) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


def test_generate_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert "the prompt is empty" in _error(["generate", "gpt2", *SMALL, "--prompt-ids", ""], capsys)
    err = _error(["generate", "gpt2", *SMALL, "--prompt-len", "40"], capsys)
    assert "does not fit the cache of 32 positions" in err
    err = _error(["generate", "gpt2", *SMALL, "--top-k", "3"], capsys)
    assert "top_k needs a temperature" in err
    err = _error(["generate", "gpt2", *SMALL, "--dynamic-prefill"], capsys)
    assert "dynamic_prefill needs precision 'int8', got 'fp32'" in err
    factory = tmp_path / "linear.py"
    factory.write_text(
        "import torch\n\n\ndef make():\n    return torch.nn.Linear(4, 4), (torch.randn(2, 4),)\n"
    )
    err = _error(["generate", f"{factory}:make", *SMALL], capsys)
    assert "generation needs a transformers causal LM" in err
    err = _error(["generate", "gpt2", *SMALL, "--prompt", "hello"], capsys)
    assert "--prompt needs a tokenizer and gpt2 has none" in err
    err = _error(["generate", "gpt2", *SMALL, "--prompt", "hello", "--prompt-ids", "1"], capsys)
    assert "not allowed with argument --prompt" in err


def test_text_stream_waits_for_whole_characters() -> None:
    """Byte-level tokens split "é" (2 bytes) and "日本" (3 bytes each): the streamed pieces
    hold no broken character and add up to the decoded text."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    trainer = trainers.BpeTrainer(
        vocab_size=len(alphabet), initial_alphabet=alphabet, show_progress=False
    )
    tokenizer.train_from_iterator(["hello"], trainer)
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tokenizer)
    text = "héllo 日本"
    ids = fast(text)["input_ids"]
    assert len(ids) == len(text.encode())  # one token per byte
    assert any(fast.decode(ids[:n]).endswith("\ufffd") for n in range(len(ids)))

    pieces: list[str] = []
    stream = TextStream(fast, pieces.append)
    for token in ids:
        stream.add(token)
    stream.finish()
    assert "".join(pieces) == text
    assert not any("\ufffd" in piece for piece in pieces)
