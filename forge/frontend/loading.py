"""Loading a model the way every command does: a built-in name, a local Hugging Face
checkpoint directory or `file.py:factory`, then capture and import (written once here)."""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._pytree import tree_leaves
from xdsl.dialects.builtin import ModuleOp

from forge.frontend import models
from forge.frontend.capture import Captured, capture
from forge.frontend.checkpoint import is_checkpoint_dir, load_checkpoint, load_tokenizer
from forge.frontend.importer import ImportedProgram, import_program
from forge.support.diagnostics import ForgeError


@dataclass
class Loaded:
    name: str
    model: Any
    args: tuple[Any, ...]
    kwargs: dict[str, Any]


def load_model(
    reference: str,
    tiny: bool,
    seq: int,
    seed: int = 0,
    *,
    allow_pickle: bool = False,
    trust_remote_code: bool = False,
) -> Loaded:
    """A built-in name, a checkpoint directory or `file.py:factory`, with example inputs
    of `seq` tokens. A built-in name wins over a directory of that name (write ./NAME)."""
    if seq < 1:
        raise ForgeError(f"--seq must be at least 1, got {seq}")
    if reference in models.SPECS:
        model = models.build_model(reference, tiny=tiny, seed=seed)
        return causal_lm_loaded(reference, model, seq)
    if is_checkpoint_dir(reference):
        if tiny:
            raise ForgeError(
                f"--tiny is for built-in models; {reference} is a checkpoint directory "
                "(its config.json sets the size)"
            )
        model = load_checkpoint(
            reference, allow_pickle=allow_pickle, trust_remote_code=trust_remote_code
        )
        return causal_lm_loaded(reference, model, seq)
    factory = models.load_factory(reference)
    with models.user_code(reference, "the factory"):
        made = factory()
    if isinstance(made, tuple) and len(made) in (2, 3):
        model, args, *rest = made
        if not isinstance(model, torch.nn.Module) or not isinstance(args, tuple | list):
            raise ForgeError(
                f"{reference}: factory must return (torch.nn.Module, tuple of example args"
                f"[, dict of kwargs]), got ({type(model).__name__}, {type(args).__name__}, ...)"
            )
        if rest and not isinstance(rest[0], dict):
            raise ForgeError(
                f"{reference}: example kwargs must be a dict, got {type(rest[0]).__name__}"
            )
        return Loaded(reference, model, tuple(args), dict(rest[0]) if rest else {})
    if isinstance(made, torch.nn.Module) and hasattr(getattr(made, "config", None), "vocab_size"):
        return causal_lm_loaded(reference, made, seq)
    raise ForgeError(
        f"{reference}: factory must return (model, example_args[, example_kwargs]) "
        f"or a transformers causal LM, got {type(made).__name__}"
    )


def causal_lm_loaded(reference: str, model: torch.nn.Module, seq: int) -> Loaded:
    """A causal LM with a random prompt of `seq` tokens as its example inputs."""
    check_sequence_length(reference, model, seq)
    args, kwargs = models.example_inputs(model, seq=seq)
    return Loaded(reference, model, args, kwargs)


def tokenizer_of(reference: str, trust_remote_code: bool = False) -> Any | None:
    """The tokenizer saved in a checkpoint directory; None for built-in models, factories
    and directories without tokenizer files."""
    if reference in models.SPECS or not is_checkpoint_dir(reference):
        return None
    return load_tokenizer(reference, trust_remote_code=trust_remote_code)


def max_positions(model: torch.nn.Module) -> int | None:
    """The longest sequence the model's position embeddings or rotary tables cover."""
    config = getattr(model, "config", None)
    for field_name in ("max_position_embeddings", "n_positions", "n_ctx"):
        value = getattr(config, field_name, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def check_sequence_length(reference: str, model: torch.nn.Module, seq: int) -> None:
    limit = max_positions(model)
    if limit is not None and seq > limit:
        raise ForgeError(f"{reference}: --seq {seq} exceeds the model's {limit} positions")


def capture_and_import(loaded: Loaded) -> tuple[Captured, ImportedProgram]:
    """Phase 1: torch.export the loaded model and import it into the `npu` dialect."""
    captured = capture(loaded.model, loaded.args, example_kwargs=loaded.kwargs)
    return captured, import_program(captured)


@dataclass
class Program:
    """A captured and imported model, with what running it needs."""

    name: str
    module: ModuleOp
    num_inputs: int
    weights: dict[str, Any]
    loaded: Loaded
    seconds: float
    """torch.export and import."""


def program_of(loaded: Loaded) -> Program:
    captured, program = capture_and_import(loaded)
    return Program(
        loaded.name,
        program.module,
        len(program.input_names),
        dict(program.weights),
        loaded,
        captured.export_seconds + program.import_seconds,
    )


def load_program(
    reference: str,
    tiny: bool,
    seq: int,
    real_weights: bool,
    *,
    allow_pickle: bool = False,
    trust_remote_code: bool = False,
) -> Program:
    """Load, capture and import a model.

    Not on the meta device even when no weights are needed: there the transformers code
    adds device moves (`aten.to.device`) that the graph `forge compile` builds has not."""
    loaded = load_model(
        reference, tiny, seq, allow_pickle=allow_pickle, trust_remote_code=trust_remote_code
    )
    if real_weights and any(p.is_meta for p in loaded.model.parameters()):
        raise ForgeError(f"{reference}: built on the meta device (too large here); no latency")
    return program_of(loaded)


def ordered_inputs(
    model: torch.nn.Module, args: Sequence[Any], kwargs: dict[str, Any], names: Sequence[str]
) -> list[torch.Tensor]:
    """The tensors of (args, kwargs) in the order of the exported user inputs."""
    try:
        bound = inspect.signature(model.forward).bind(*args, **kwargs).arguments
    except (TypeError, ValueError):
        bound = {}
    if all(isinstance(bound.get(n), torch.Tensor) for n in names):
        return [bound[n] for n in names]
    return [t for t in tree_leaves((tuple(args), kwargs)) if isinstance(t, torch.Tensor)]
