"""Local Hugging Face checkpoint directories as models: `config.json`, weights and
(optionally) tokenizer files, loaded offline.

Loading is safe by default: weights are read through safetensors, and neither pickles
(which can run code when unpickled) nor the checkpoint's own Python code (`auto_map`) are
touched unless the user asks with `--allow-pickle` / `--trust-remote-code`.

torch and transformers are imported inside the functions: the commands import this
module when they build their parsers (`add_loading_flags`), at `forge` start-up."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from forge.support.diagnostics import ForgeError, note, one_line

if TYPE_CHECKING:
    import torch

ALLOW_PICKLE = "--allow-pickle"
TRUST_REMOTE_CODE = "--trust-remote-code"

CONFIG = "config.json"
GENERATION_CONFIG = "generation_config.json"
SAFE_WEIGHTS = ("model.safetensors", "model.safetensors.index.json")
"""The safetensors `from_pretrained` finds by itself (one file, or a sharded index)."""
PICKLE_WEIGHTS = ("pytorch_model.bin", "pytorch_model.bin.index.json")
"""The pickles `from_pretrained` finds by itself."""
PICKLE_SUFFIXES = (".bin", ".pt", ".pth")
TRAINING_STATE = ("training_args.bin", "optimizer.pt", "scheduler.pt", "scaler.pt", "rng_state")
"""Pickles a `transformers.Trainer` checkpoint holds besides the weights (names or prefixes)."""
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "tokenizer.model",
    "spiece.model",
    "vocab.json",
    "vocab.txt",
)


def add_loading_flags(parser: argparse.ArgumentParser) -> None:
    """The two opt-ins to unsafe loading, for every command that takes a MODEL."""
    parser.add_argument(
        ALLOW_PICKLE,
        action="store_true",
        help="load a checkpoint's pickled weights (*.bin, *.pt, *.pth) with "
        "torch.load(weights_only=True) when it has no safetensors",
    )
    parser.add_argument(
        TRUST_REMOTE_CODE,
        action="store_true",
        help="run the Python code a checkpoint ships (auto_map in config.json)",
    )


def loading_options(ns: argparse.Namespace) -> dict[str, bool]:
    """The keyword options of `load_model` that `add_loading_flags` parsed."""
    return {"allow_pickle": ns.allow_pickle, "trust_remote_code": ns.trust_remote_code}


def is_checkpoint_dir(reference: str | Path) -> bool:
    """A directory as MODEL names a checkpoint; what is missing in it is its own error."""
    return Path(reference).is_dir()


@dataclass(frozen=True)
class Weights:
    files: tuple[Path, ...]
    safe: bool
    """safetensors (tensors only), not pickles."""
    standard: bool
    """Named as `from_pretrained` expects, so it finds (and shards) them itself."""


def load_checkpoint(
    path: str | Path, allow_pickle: bool = False, trust_remote_code: bool = False
) -> torch.nn.Module:
    """The causal LM saved in directory `path` (fp32, eval mode), read from local files only."""
    directory = Path(path)
    config_dict = read_config(directory)
    check_remote_code(directory, config_dict, trust_remote_code)
    if "auto_map" not in config_dict:
        check_causal_lm_config(directory, config_dict)
    weights = find_weights(directory)
    if not weights.safe and not allow_pickle:
        raise ForgeError(
            f"{weights.files[0]}: pickled weights can run code when loaded; convert them to "
            f"model.safetensors, or pass {ALLOW_PICKLE} to read them with "
            "torch.load(weights_only=True)"
        )
    try:
        with _no_progress_bars():
            model, info = _from_pretrained(directory, weights, trust_remote_code)
    except ForgeError:
        raise
    except Exception as e:
        raise ForgeError(
            f"{directory}: the checkpoint does not load: {type(e).__name__}: {one_line(str(e))}"
        ) from e
    missing = sorted(info["missing_keys"])
    if missing:
        raise ForgeError(
            f"{directory}: the weights lack {len(missing)} of the model's tensors "
            f"(first: {missing[0]}); they would be left random"
        )
    unused = sorted(info["unexpected_keys"])
    if unused:
        note(f"{directory}: {unused_tensors(unused)}")
    return model.eval()


def unused_tensors(names: list[str], shown: int = 3) -> str:
    """What a note says of the weights' tensors the model does not use (more layers
    than the config's, leftovers): how many, and the first few names."""
    first = ", ".join(names[:shown]) + (", ..." if len(names) > shown else "")
    return f"the weights hold {len(names)} tensor(s) the model does not use, ignored: {first}"


def load_tokenizer(path: str | Path, trust_remote_code: bool = False) -> Any | None:
    """The tokenizer saved in directory `path`; None when it has no tokenizer files."""
    directory = Path(path)
    if not any((directory / name).is_file() for name in TOKENIZER_FILES):
        return None
    import transformers

    try:
        return transformers.AutoTokenizer.from_pretrained(
            directory, local_files_only=True, trust_remote_code=trust_remote_code
        )
    except Exception as e:
        raise ForgeError(
            f"{directory}: its tokenizer does not load: {type(e).__name__}: {one_line(str(e))}"
        ) from e


def read_config(directory: Path) -> dict[str, Any]:
    path = directory / CONFIG
    if not path.is_file():
        raise ForgeError(
            f"{directory}: no {CONFIG}; a checkpoint directory holds {CONFIG} and weights, "
            "as model.save_pretrained(DIR) writes them"
        )
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ForgeError(f"{path}: not valid JSON: {e.msg} (line {e.lineno})") from e
    except (OSError, UnicodeDecodeError) as e:
        raise ForgeError(f"{path}: cannot read it: {e}") from e
    if not isinstance(config, dict):
        raise ForgeError(f"{path}: expected a JSON object, got {type(config).__name__}")
    return config


def check_remote_code(directory: Path, config: dict[str, Any], trust_remote_code: bool) -> None:
    """Refuse a config only the checkpoint's own Python code can build, unless trusted."""
    if trust_remote_code:
        return
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    path = directory / CONFIG
    if "auto_map" in config:
        raise ForgeError(
            f"{path}: auto_map asks to run Python code shipped with the checkpoint; "
            f"pass {TRUST_REMOTE_CODE} if you trust it"
        )
    model_type = config.get("model_type")
    if not isinstance(model_type, str):
        raise ForgeError(f"{path}: no model_type, so transformers cannot tell the architecture")
    if model_type not in CONFIG_MAPPING:
        raise ForgeError(
            f"{path}: model_type '{model_type}' is unknown to this transformers; it needs "
            f"the checkpoint's own code ({TRUST_REMOTE_CODE}) or a newer transformers"
        )


def check_causal_lm_config(directory: Path, config: dict[str, Any]) -> None:
    """Refuse an architecture that is not a causal LM (an encoder, a seq2seq model)."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    path = directory / CONFIG
    model_type = config.get("model_type")
    if model_type not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        raise ForgeError(f"{path}: model_type '{model_type}' has no causal LM in transformers")
    causal: set[str] = set()
    for names in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.values():
        causal.update([names] if isinstance(names, str) else names)
    architectures = config.get("architectures") or []
    if architectures and not any(name in causal for name in architectures):
        raise ForgeError(
            f"{path}: {', '.join(map(str, architectures))} is not a causal LM "
            "(Forge loads ...ForCausalLM and ...LMHeadModel checkpoints)"
        )


def find_weights(directory: Path) -> Weights:
    """The weight files, safetensors first; pickles only when there are none."""
    for name in SAFE_WEIGHTS:
        if (directory / name).is_file():
            return Weights((directory / name,), safe=True, standard=True)
    safe = sorted(directory.glob("*.safetensors"))
    if safe:
        return Weights(tuple(safe), safe=True, standard=False)
    for name in PICKLE_WEIGHTS:
        if (directory / name).is_file():
            return Weights((directory / name,), safe=False, standard=True)
    pickles = sorted(
        p
        for p in directory.iterdir()
        if p.is_file() and p.suffix in PICKLE_SUFFIXES and not p.name.startswith(TRAINING_STATE)
    )
    if pickles:
        return Weights(tuple(pickles), safe=False, standard=False)
    raise ForgeError(
        f"{directory}: no weights (model.safetensors, or pytorch_model.bin with {ALLOW_PICKLE})"
    )


@contextmanager
def _no_progress_bars() -> Iterator[None]:
    """transformers draws a progress bar while it reads weights; not in a command's output."""
    from transformers.utils import logging as transformers_logging

    were_on = transformers_logging.is_progress_bar_enabled()
    transformers_logging.disable_progress_bar()
    try:
        yield
    finally:
        if were_on:
            transformers_logging.enable_progress_bar()


def _from_pretrained(
    directory: Path, weights: Weights, trust_remote_code: bool
) -> tuple[torch.nn.Module, dict[str, Any]]:
    """The model and transformers' loading info (missing keys, ...), fp32."""
    import torch
    import transformers

    config = transformers.AutoConfig.from_pretrained(
        directory, local_files_only=True, trust_remote_code=trust_remote_code
    )
    options: dict[str, Any] = {
        "dtype": torch.float32,
        # The attention the built-in models use: the graph Forge's passes fuse.
        "attn_implementation": "eager",
        "output_loading_info": True,
    }
    if not weights.standard:
        return _from_state_dict(directory, config, weights, options)
    return transformers.AutoModelForCausalLM.from_pretrained(
        directory,
        config=config,
        local_files_only=True,
        trust_remote_code=trust_remote_code,
        use_safetensors=weights.safe,
        weights_only=True,
        **options,
    )


def _from_state_dict(
    directory: Path, config: Any, weights: Weights, options: dict[str, Any]
) -> tuple[torch.nn.Module, dict[str, Any]]:
    """Load weight files `from_pretrained` does not look for (other names, unindexed shards)."""
    import torch
    import transformers
    from safetensors.torch import load_file
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING

    if type(config) not in MODEL_FOR_CAUSAL_LM_MAPPING:
        raise ForgeError(
            f"{weights.files[0]}: weights under this name load only for transformers' own "
            "architectures; save them as model.safetensors"
        )
    state: dict[str, torch.Tensor] = {}
    for file in weights.files:
        if weights.safe:
            state.update(load_file(file))
        else:
            state.update(torch.load(file, map_location="cpu", weights_only=True))
    model_class = MODEL_FOR_CAUSAL_LM_MAPPING[type(config)]
    model, info = model_class.from_pretrained(None, config=config, state_dict=state, **options)
    if (directory / GENERATION_CONFIG).is_file():
        model.generation_config = transformers.GenerationConfig.from_pretrained(
            directory, local_files_only=True
        )
    return model, info
