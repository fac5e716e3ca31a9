"""Tiny configs of every decoder-only text model type the installed transformers has.

The coverage sweep (forge.devtools.coverage) runs each causal-LM type of
`MODEL_FOR_CAUSAL_LM_MAPPING_NAMES` as a new user would try it: the type's default
config from `AutoConfig.for_model(type)`, shrunk by rules rather than by hand, with
seeded weights. Which types it keeps (`excluded` says why not):

* encoder-decoder models (the default config has `is_encoder_decoder`): their causal-LM
  class is the decoder half of a seq2seq model;
* encoder-only models used as decoders (the type also has a masked-LM class, as BERT,
  RoBERTa, ELECTRA...): a bidirectional encoder with a causal mask switched on;
* multimodal wrappers (the config nests a `text_config` or a vision, audio or speech
  config, or the type has an image-text-to-text class): their text part is a type of
  its own;
* types without a default config (`AutoConfig.for_model(type)` raises: a draft model
  that needs its target's sizes).

Shrinking rules (`SHRINK`, applied to the integer fields of the default config, by
name or by suffix, and to the named ones it leaves None): hidden 64, 2 layers, vocab
512, 4 attention heads of 16 dims (key/value heads 2 where the default has fewer
key/value heads than heads, else 4), every intermediate size 128 (an expert's 32), 4
experts of which 2 per token (1 shared), LoRA ranks 32, positions 128. A list as long
as the default layer count keeps its first entry and the first that differs (a hybrid
keeps one layer of each of its first two kinds); experts-per-token left None in a
config with experts becomes 2; a nested config (BLT's) is shrunk by the same rules.
`OVERRIDES` lists what a type needs beyond the rules. Weights are redrawn at std 0.3
(1-D parameters get noise of std 0.1): at the default init logits are flat and greedy
decoding repeats one token, which would let a broken cache pass.
"""

from __future__ import annotations

import contextlib
import functools
import warnings
from collections.abc import Iterator
from typing import Any

import torch

from forge.support.diagnostics import ForgeError, one_line

HIDDEN = 64
LAYERS = 2
VOCAB = 512
HEADS = 4
HEAD_DIM = HIDDEN // HEADS
KV_HEADS = 2
INTERMEDIATE = 128
EXPERT_INTERMEDIATE = 32
EXPERTS = 4
EXPERTS_PER_TOKEN = 2
POSITIONS = 128
STD = 0.3
MAX_PARAMETERS = 20_000_000
"""A tiny model has 1-3 M parameters; above this a size field escaped the rules (the
model is not built: the sweep shares its machine)."""
VECTOR_STD = 0.1

SHRINK: dict[str, int] = {
    "hidden_size": HIDDEN,
    "hidden_size_global": HIDDEN,
    "n_embd": HIDDEN,
    "d_model": HIDDEN,
    "embed_dim": HIDDEN,
    "num_hidden_layers": LAYERS,
    "n_layer": LAYERS,
    "n_layers": LAYERS,
    "num_layers": LAYERS,
    "vocab_size": VOCAB,
    "num_attention_heads": HEADS,
    "n_head": HEADS,
    "n_heads": HEADS,
    "num_heads": HEADS,
    "head_dim": HEAD_DIM,
    "rotary_dim": HEAD_DIM // 2,
    "qk_head_dim": 2 * HEAD_DIM,  # MLA: its nope and rope parts, HEAD_DIM each
    "zero_expert_num": EXPERTS,
    "attn_layer_period": LAYERS,
    "attn_layer_offset": 1,
    "vocab_size_per_layer_input": VOCAB,
    "hidden_size_per_layer_input": HEAD_DIM,
    "num_kv_shared_layers": 0,
    "kv_channels": HEAD_DIM,
    "intermediate_size": INTERMEDIATE,
    "n_inner": INTERMEDIATE,
    "ffn_dim": INTERMEDIATE,
    "ffn_hidden_size": INTERMEDIATE,
    "d_ff": INTERMEDIATE,
    "num_experts": EXPERTS,
    "num_local_experts": EXPERTS,
    "n_routed_experts": EXPERTS,
    "moe_num_experts": EXPERTS,
    "num_experts_per_tok": EXPERTS_PER_TOKEN,
    "num_experts_per_token": EXPERTS_PER_TOKEN,
    "moe_topk": EXPERTS_PER_TOKEN,
    "moe_k": EXPERTS_PER_TOKEN,
    "moe_num_shared_experts": 1,
    "moe_layer_end_index": LAYERS - 1,
    "n_shared_experts": 1,
    "num_shared_experts": 1,
    "n_group": 1,
    "topk_group": 1,
    "first_k_dense_replace": 1,
    "max_position_embeddings": POSITIONS,
    "n_positions": POSITIONS,
    "n_ctx": POSITIONS,
}
"""Config field -> its tiny value, for the fields the default config has."""
SUFFIXES: dict[str, int] = {
    "_intermediate_size": EXPERT_INTERMEDIATE,
    "_ffn_hidden_size": EXPERT_INTERMEDIATE,
    "_lora_rank": 32,
    "_head_dim": HEAD_DIM,
    "_vocab_size": VOCAB,
}
"""Field-name suffix -> tiny value (MoE and shared-expert sizes, DeepSeek's MLA ranks and
head parts, Inkling's unpadded vocabulary), where no `SHRINK` entry names the field."""
LAYER_FIELDS = ("num_hidden_layers", "n_layer", "n_layers", "num_layers")
HEAD_FIELDS = ("num_attention_heads", "n_head", "n_heads", "num_heads")
KV_HEAD_FIELDS = ("num_key_value_heads", "num_kv_heads", "multi_query_group_num", "kv_n_heads")
EXPERT_FIELDS = ("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts")
TOP_K_FIELDS = ("num_experts_per_tok", "num_experts_per_token", "moe_topk", "moe_k")
SPECIAL_IDS = {"bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0}

OVERRIDES: dict[str, dict[str, Any]] = {
    "mamba2": {"num_heads": 8},  # hidden * expand must equal heads * head_dim
    "zaya": {"num_experts_per_tok": 1},  # the only top-k it implements
    "kolibri1_1": {"index_num_heads": 2},  # at most the query heads of a key head
    "lfm2_moe": {"layer_types": ["conv", "full_attention"]},  # its default has none
    # Input, looped and output sections of 1 layer each (the dict form counts its
    # attention and MLP blocks apart: 6 for 3 layers).
    "dory": {
        "num_hidden_layers": 6,
        "layer_types": ["sliding_attention", "mlp"] * 3,
        "n_input_layers": 2,
        "n_recurrent_layers": 2,
        "n_output_layers": 2,
    },
}
"""Type -> config fields beyond the rules (the few types the rules do not fit)."""


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """transformers' config and model warnings off (a sweep builds two hundred)."""
    import transformers

    verbosity = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        transformers.logging.set_verbosity(verbosity)


def causal_lm_types() -> dict[str, str]:
    """Every causal-LM type of the installed transformers -> its model class name."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    return dict(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)


@functools.cache
def default_config(model_type: str) -> Any:
    from transformers import AutoConfig

    with quiet():
        return AutoConfig.for_model(model_type)


def excluded(model_type: str) -> str | None:
    """Why the sweep leaves `model_type` out (see the module docstring), or None."""
    from transformers.models.auto import modeling_auto

    if model_type in modeling_auto.MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES:
        return "multimodal wrapper (an image-text-to-text model)"
    try:
        config = default_config(model_type)
    except Exception as e:
        return f"no default config: {one_line(str(e))[:120]}"
    if getattr(config, "is_encoder_decoder", False):
        return "encoder-decoder"
    nested = [name for name in getattr(config, "sub_configs", {}) if _multimodal_part(name)]
    if nested:
        return f"multimodal wrapper (its config nests {', '.join(nested)})"
    if model_type in modeling_auto.MODEL_FOR_MASKED_LM_MAPPING_NAMES:
        return "encoder-only (it has a masked-LM class too)"
    return None


def _multimodal_part(name: str) -> bool:
    """A sub-config name of a multimodal wrapper: its text model or another modality's."""
    return name == "text_config" or any(w in name for w in ("vision", "audio", "speech"))


def decoder_types() -> list[str]:
    """The causal-LM types the sweep keeps, sorted."""
    return sorted(t for t in causal_lm_types() if excluded(t) is None)


def tiny_kwargs(model_type: str) -> dict[str, Any]:
    """The config fields the shrinking rules (and `OVERRIDES`) set for `model_type`."""
    kwargs = shrunk(default_config(model_type).to_dict())
    kwargs.update(OVERRIDES.get(model_type, {}))
    return kwargs


def shrunk(defaults: dict[str, Any]) -> dict[str, Any]:
    """The fields of a config's `to_dict()` the rules change, with their tiny values; a
    nested config (a dict with a layer count) is shrunk by the same rules."""
    kwargs: dict[str, Any] = {}
    layers = _default_layers(defaults)
    for name, value in defaults.items():
        if isinstance(value, dict) and _default_layers(value) is not None:
            kwargs[name] = {**value, **shrunk(value)}
        elif isinstance(value, list) and layers and len(value) == layers:
            kwargs[name] = _layer_sample(value)
        elif (tiny := _tiny_int(name, value)) is not None:
            kwargs[name] = tiny
    heads = next((defaults[n] for n in HEAD_FIELDS if _is_int(defaults.get(n))), None)
    for name in KV_HEAD_FIELDS:
        if name in defaults and defaults[name] is None:
            kwargs[name] = HEADS
        elif _is_int(defaults.get(name)):
            kwargs[name] = KV_HEADS if heads is not None and defaults[name] < heads else HEADS
    if any(_is_int(defaults.get(n)) for n in EXPERT_FIELDS):
        for name in TOP_K_FIELDS:
            if name in defaults and defaults[name] is None:
                kwargs[name] = EXPERTS_PER_TOKEN
    kwargs.update({k: v for k, v in SPECIAL_IDS.items() if k in defaults})
    return kwargs


def _layer_sample(values: list[Any]) -> list[Any]:
    """A per-layer list cut to `LAYERS` entries: the first and the first that differs
    from it (a hybrid keeps one layer of each of its first two kinds)."""
    other = next((v for v in values if v != values[0]), values[0])
    return [values[0], other][:LAYERS]


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _tiny_int(name: str, value: Any) -> int | None:
    """The tiny value of an integer field the rules name, else None."""
    if name in SHRINK and (value is None or _is_int(value)):
        return SHRINK[name]  # None too: a size the model needs (Ministral's head_dim)
    if not _is_int(value):
        return None
    return next((v for suffix, v in SUFFIXES.items() if name.endswith(suffix)), None)


def _default_layers(defaults: dict[str, Any]) -> int | None:
    return next((defaults[n] for n in LAYER_FIELDS if _is_int(defaults.get(n))), None)


def tiny_config(model_type: str) -> Any:
    """`model_type`'s tiny config: its default config with `tiny_kwargs` applied, built
    again from the arguments so fields derived in `__init__` (layer types, head
    dims) follow the tiny sizes."""
    from transformers import AutoConfig

    kwargs = tiny_kwargs(model_type)
    try:
        with quiet():
            return AutoConfig.for_model(model_type, **kwargs)
    except Exception as e:
        raise ForgeError(f"unsupported: {model_type}: tiny config: {one_line(str(e))}") from e


def tiny_model(model_type: str, seed: int = 0) -> torch.nn.Module:
    """`model_type`'s causal LM at its tiny config, fp32, eval mode, weights redrawn
    (see the module docstring)."""
    from transformers import AutoModelForCausalLM

    config = tiny_config(model_type)
    with quiet(), torch.device("meta"):
        shape = AutoModelForCausalLM.from_config(config)
    parameters = sum(p.numel() for p in shape.parameters())
    if parameters > MAX_PARAMETERS:
        raise ForgeError(
            f"unsupported: {model_type}: the shrinking rules leave {parameters / 1e6:.0f} M "
            f"parameters (more than {MAX_PARAMETERS / 1e6:.0f} M): a size field they miss"
        )
    torch.manual_seed(seed)
    with quiet():
        model = AutoModelForCausalLM.from_config(config)
    model = model.eval().float()
    redraw(model, seed)
    return model


def redraw(
    model: torch.nn.Module, seed: int, std: float = STD, vector_std: float = VECTOR_STD
) -> None:
    """Matrices drawn at `std`, 1-D parameters shifted by noise of `vector_std`."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in model.parameters():
            noise = torch.randn(parameter.shape, generator=generator)
            if parameter.dim() >= 2:
                parameter.copy_(noise * std)
            else:
                parameter.add_(noise * vector_std)
