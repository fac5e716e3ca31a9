"""Local Hugging Face checkpoint directories as MODEL: offline loading, the tokenizer,
`forge generate DIR --prompt`, and the safe-loading refusals (pickles, remote code)."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
import transformers
from safetensors.torch import load_file, save_file
from tokenizers import Tokenizer, models, pre_tokenizers, trainers

from forge.cli import main
from forge.frontend.checkpoint import load_checkpoint, load_tokenizer
from forge.frontend.loading import load_model
from forge.frontend.models import build_model

SENTENCES = [
    "the cat sat on the mat",
    "a dog ran in the park and the cat ran after it",
    # Enough distinct words that the vocabulary fills the tiny model's 256 ids, so every
    # id the model generates decodes to a word.
    " ".join(f"w{i}" for i in range(300)),
]
IDS = torch.tensor([[3, 1, 4, 1, 5, 9, 2, 6]])


@dataclass
class Checkpoint:
    directory: Path
    logits: torch.Tensor
    """The saved model's logits for IDS."""


def save_tokenizer(directory: Path) -> None:
    """A word-level tokenizer trained here on SENTENCES: 256 ids, `<eos>` is id 0 (the
    tiny models' EOS)."""
    tokenizer = Tokenizer(models.WordLevel(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    trainer = trainers.WordLevelTrainer(
        vocab_size=256, special_tokens=["<eos>", "<unk>"], show_progress=False
    )
    tokenizer.train_from_iterator(SENTENCES, trainer)
    assert tokenizer.get_vocab_size() == 256
    fast = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, eos_token="<eos>", unk_token="<unk>"
    )
    fast.save_pretrained(directory)


def copy_config(source: Path, target: Path, **changes: object) -> Path:
    """`target` with the config files of `source` (config.json edited by `changes`)."""
    target.mkdir()
    config = json.loads((source / "config.json").read_text())
    (target / "config.json").write_text(json.dumps({**config, **changes}))
    shutil.copy(source / "generation_config.json", target)
    return target


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Checkpoint:
    directory = tmp_path_factory.mktemp("llama-tiny")
    model = build_model("llama-3.2-1b", tiny=True)
    model.save_pretrained(directory)
    save_tokenizer(directory)
    with torch.no_grad():
        logits = model(IDS).logits
    return Checkpoint(directory, logits)


def _error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(argv) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert "internal error" not in err
    return err


def _logits(model: torch.nn.Module) -> torch.Tensor:
    with torch.no_grad():
        return model(IDS).logits


def test_checkpoint_loads_as_saved(checkpoint: Checkpoint) -> None:
    model = load_checkpoint(checkpoint.directory)
    assert not model.training
    assert {p.dtype for p in model.parameters()} == {torch.float32}
    assert torch.equal(_logits(model), checkpoint.logits)
    loaded = load_model(str(checkpoint.directory), tiny=False, seq=8)
    assert loaded.args[0].shape == (1, 8)
    assert loaded.kwargs["attention_mask"].shape == (1, 8)


def test_tokenizer_is_found_only_when_saved(checkpoint: Checkpoint, tmp_path: Path) -> None:
    tokenizer = load_tokenizer(checkpoint.directory)
    assert tokenizer is not None
    ids = tokenizer("the cat sat")["input_ids"]
    assert len(ids) == 3 and tokenizer.decode(ids) == "the cat sat"
    assert tokenizer.eos_token_id == 0
    assert load_tokenizer(copy_config(checkpoint.directory, tmp_path / "bare")) is None


def test_generate_from_checkpoint_with_prompt(
    checkpoint: Checkpoint, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["generate", str(checkpoint.directory), "--prompt", "the cat sat on the mat"]
    small = ["--capacity", "32", "--prompt-capacity", "8", "--max-new-tokens", "5", "--check"]
    assert main([*argv, *small]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    tokens = [int(t) for t in next(x for x in lines if x.startswith("tokens:")).split()[1:]]
    text = next(x for x in lines if x.startswith("text: ")).removeprefix("text: ")
    tokenizer = load_tokenizer(checkpoint.directory)
    assert "prompt: 6 tokens; greedy" in out
    assert text and text == tokenizer.decode(tokens, skip_special_tokens=True)
    assert f"check: ok: {len(tokens)} of {len(tokens)} tokens agree with eager" in out


def test_compile_checkpoint(checkpoint: Checkpoint, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compile", str(checkpoint.directory), "--seq", "8", "--runs", "1"]) == 0
    assert "top-1 agreement 100.00%" in capsys.readouterr().out


def test_pickled_weights_need_allow_pickle(
    checkpoint: Checkpoint, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = load_file(checkpoint.directory / "model.safetensors")
    standard = copy_config(checkpoint.directory, tmp_path / "standard")
    torch.save(state, standard / "pytorch_model.bin")
    err = _error(["import", str(standard), "--seq", "4"], capsys)
    assert "pytorch_model.bin: pickled weights" in err and "--allow-pickle" in err
    loaded = load_model(str(standard), tiny=False, seq=4, allow_pickle=True)
    assert torch.equal(_logits(loaded.model), checkpoint.logits)
    assert main(["import", str(standard), "--seq", "4", "--allow-pickle"]) == 0
    assert capsys.readouterr().out.startswith("builtin.module")

    renamed = copy_config(checkpoint.directory, tmp_path / "renamed")
    torch.save(state, renamed / "weights.pt")
    torch.save({"not": "weights"}, renamed / "training_args.bin")
    assert "weights.pt: pickled weights" in _error(["import", str(renamed)], capsys)
    model = load_checkpoint(renamed, allow_pickle=True)
    assert torch.equal(_logits(model), checkpoint.logits)


def test_safetensors_under_another_name(checkpoint: Checkpoint, tmp_path: Path) -> None:
    renamed = copy_config(checkpoint.directory, tmp_path / "renamed")
    shutil.copy(checkpoint.directory / "model.safetensors", renamed / "weights.safetensors")
    assert torch.equal(_logits(load_checkpoint(renamed)), checkpoint.logits)


def test_remote_code_needs_trust(
    checkpoint: Checkpoint, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    auto_map = {"AutoModelForCausalLM": "modeling_mine.MineForCausalLM"}
    remote = copy_config(checkpoint.directory, tmp_path / "remote", auto_map=auto_map)
    shutil.copy(checkpoint.directory / "model.safetensors", remote)
    err = _error(["import", str(remote)], capsys)
    assert "auto_map" in err and "--trust-remote-code" in err
    # Trusted, the missing modeling_mine.py is still a one-line error.
    err = _error(["import", str(remote), "--trust-remote-code"], capsys)
    assert "the checkpoint does not load" in err

    unknown = copy_config(checkpoint.directory, tmp_path / "unknown", model_type="mine")
    shutil.copy(checkpoint.directory / "model.safetensors", unknown)
    err = _error(["import", str(unknown)], capsys)
    assert "model_type 'mine' is unknown" in err and "--trust-remote-code" in err


@pytest.mark.parametrize(
    ("config_text", "message"),
    [
        (None, "no config.json"),
        ("{not json", "config.json: not valid JSON"),
        ("[1, 2]", "expected a JSON object, got list"),
        ('{"vocab_size": 256}', "no model_type"),
        ('{"model_type": "t5"}', "model_type 't5' has no causal LM"),
    ],
)
def test_bad_configs_are_one_line_errors(
    config_text: str | None, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if config_text is not None:
        (tmp_path / "config.json").write_text(config_text)
    assert message in _error(["import", str(tmp_path)], capsys)


def test_missing_weights_are_refused(
    checkpoint: Checkpoint, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = copy_config(checkpoint.directory, tmp_path / "empty")
    assert "no weights" in _error(["import", str(empty)], capsys)
    partial = copy_config(checkpoint.directory, tmp_path / "partial")
    state = load_file(checkpoint.directory / "model.safetensors")
    del state["model.norm.weight"]
    save_file(state, partial / "model.safetensors")
    err = _error(["import", str(partial)], capsys)
    assert "lack 1 of the model's tensors (first: model.norm.weight)" in err


def test_non_causal_model_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = transformers.BertConfig(
        vocab_size=256,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
    )
    transformers.BertModel(config).save_pretrained(tmp_path)
    capsys.readouterr()  # save_pretrained's progress bar
    assert "BertModel is not a causal LM" in _error(["import", str(tmp_path)], capsys)


def test_tiny_with_a_directory_is_refused(
    checkpoint: Checkpoint, capsys: pytest.CaptureFixture[str]
) -> None:
    err = _error(["compile", str(checkpoint.directory), "--tiny"], capsys)
    assert "--tiny is for built-in models" in err


def test_prompt_needs_a_tokenizer(
    checkpoint: Checkpoint, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bare = copy_config(checkpoint.directory, tmp_path / "bare")
    shutil.copy(checkpoint.directory / "model.safetensors", bare)
    err = _error(["generate", str(bare), "--prompt", "the cat"], capsys)
    assert "--prompt needs a tokenizer" in err


def test_unused_tensors_are_listed_in_a_note(
    checkpoint: Checkpoint, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Tensors the config does not use (a layer beyond num_hidden_layers, an extra tensor)
    load with one note naming the first few and their count, as transformers warns."""
    extra = copy_config(checkpoint.directory, tmp_path / "extra")
    state = load_file(checkpoint.directory / "model.safetensors")
    layers = json.loads((extra / "config.json").read_text())["num_hidden_layers"]
    beyond = {
        k.replace("layers.0.", f"layers.{layers}."): v.clone()
        for k, v in state.items()
        if k.startswith("model.layers.0.")
    }
    state.update(beyond)
    state["stray.weight"] = torch.zeros(2)
    save_file(state, extra / "model.safetensors")
    capsys.readouterr()
    model = load_checkpoint(extra)
    assert torch.equal(_logits(model), checkpoint.logits)
    err = capsys.readouterr().err.strip().splitlines()
    unused = sorted([*beyond, "stray.weight"])
    assert err == [
        f"forge: note: {extra}: the weights hold {len(unused)} tensor(s) the model does not "
        f"use, ignored: {', '.join(unused[:3])}, ..."
    ]


def test_a_checkpoint_that_uses_every_tensor_loads_without_a_note(
    checkpoint: Checkpoint, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    load_checkpoint(checkpoint.directory)
    assert capsys.readouterr().err == ""
