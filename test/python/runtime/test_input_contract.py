"""One input contract for every entry point: token ids outside the vocabulary, and
inputs of another shape or dtype than compiled, are a one-line ForgeError naming the
input, the value and the bound, where eager raises IndexError."""

from __future__ import annotations

import warnings
from collections.abc import Iterator

import pytest
import torch

import forge
from forge.cli import main
from forge.frontend import models
from forge.runtime.input_contract import check_token_ids
from forge.support.diagnostics import ForgeError

VOCAB = 256
"""The tiny GPT-2's vocabulary."""
NO_CACHE = {"use_cache": False}


@pytest.fixture(scope="module")
def gpt2() -> Iterator[torch.nn.Module]:
    model = models.build_model("gpt2", tiny=True)
    assert model.config.vocab_size == VOCAB
    yield model


def ids_with(value: int) -> torch.Tensor:
    ids = torch.randint(0, VOCAB, (1, 8), generator=torch.Generator().manual_seed(0))
    ids[0, 3] = value
    return ids


@pytest.mark.parametrize("value", [VOCAB, VOCAB + 1000, -1])
def test_forge_compile_checks_token_ids(gpt2: torch.nn.Module, value: int) -> None:
    compiled = forge.compile(gpt2, (ids_with(0),), NO_CACHE)
    with pytest.raises(IndexError):
        gpt2(ids_with(value), **NO_CACHE)  # eager refuses too
    with pytest.raises(ForgeError) as error:
        compiled(ids_with(value), **NO_CACHE)
    assert str(error.value) == f"error: input_ids: id {value} is outside the vocabulary of {VOCAB}"
    assert compiled(ids_with(VOCAB - 1), **NO_CACHE).logits.shape == (1, 8, VOCAB)


def test_torch_compile_checks_token_ids(gpt2: torch.nn.Module) -> None:
    torch._dynamo.reset()
    compiled = torch.compile(gpt2, backend="forge")
    with torch.no_grad():
        compiled(ids_with(0), **NO_CACHE)
        with pytest.raises(ForgeError, match=f"id {VOCAB + 7} is outside the vocabulary of 256"):
            compiled(ids_with(VOCAB + 7), **NO_CACHE)
    torch._dynamo.reset()


def test_compile_lm_generate_checks_token_ids(gpt2: torch.nn.Module) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lm = forge.compile_lm(gpt2, capacity=32, prompt_capacity=8)
    with pytest.raises(ForgeError, match=f"id {VOCAB} is outside the vocabulary of {VOCAB}$"):
        lm.generate([1, 2, VOCAB], max_new_tokens=2)
    with pytest.raises(ForgeError, match=f"id -5 is outside the vocabulary of {VOCAB}$"):
        lm.generate(torch.tensor([[1, -5]]), max_new_tokens=2)
    assert len(lm.generate([1, 2, VOCAB - 1], max_new_tokens=2)) == 2


def test_the_executor_checks_shapes_and_dtypes(gpt2: torch.nn.Module) -> None:
    executor = forge.compile(gpt2, (ids_with(0),), NO_CACHE).executor
    with pytest.raises(ForgeError, match=r"input_ids: compiled for 1x8 torch\.int64, got 1x9"):
        executor(torch.zeros(1, 9, dtype=torch.int64))
    with pytest.raises(ForgeError, match=r"compiled for 1x8 torch\.int64, got 1x8 torch\.int32"):
        executor(torch.zeros(1, 8, dtype=torch.int32))
    with pytest.raises(ForgeError, match="expected 1 inputs, got 2"):
        executor(ids_with(0), ids_with(0))


def test_forge_generate_uses_the_same_definition(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(ForgeError, match=r"^error: prompt id 300 is outside the vocabulary"):
        check_token_ids([1, 300], VOCAB, "prompt id")
    args = ["generate", "gpt2", "--tiny", "--prompt-ids", f"1,{VOCAB}", "--max-new-tokens", "1"]
    assert main([*args, "--no-cache"]) == 1
    err = capsys.readouterr().err.strip()
    assert err == f"forge: error: prompt id {VOCAB} is outside the vocabulary of {VOCAB}"
