"""The six models of the paper, built from transformers config classes.

Public architecture sizes (from each model's `config.json`), seeded random weights:
nothing is downloaded. Each model also has a tiny variant with the same features
(GQA, tied embeddings, Granite's multipliers, LFM2's conv/attention mix) for tests.
Models that do not fit in memory are built on the meta device for graph-level work.
"""

from __future__ import annotations

import importlib.util
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import torch

from forge.support.diagnostics import ForgeError

LLAMA3_ROPE_1B = {
    "rope_type": "llama3",
    "rope_theta": 500000.0,
    "factor": 32.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8192,
}
LFM2_ATTENTION_LAYERS = (2, 5, 9, 13, 17, 21, 24, 27)


@dataclass(frozen=True)
class ModelSpec:
    name: str
    config_class: str
    model_class: str
    full: dict[str, Any]
    tiny: dict[str, Any]
    source: str
    fits_in_memory: bool = True
    defaults: dict[str, Any] = field(default_factory=dict)

    def config(self, tiny: bool = False) -> Any:
        import transformers

        kwargs = {**self.full, **(self.tiny if tiny else {}), "attn_implementation": "eager"}
        return getattr(transformers, self.config_class)(**kwargs)

    def attention_layers(self, tiny: bool = False) -> int:
        config = self.config(tiny)
        types = getattr(config, "layer_types", None)
        if types is not None and self.name.startswith("lfm2"):
            return sum(1 for t in types if t == "full_attention")
        return int(config.num_hidden_layers)


TINY_DECODER = {
    "vocab_size": 256,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 256,
}
TINY_LLAMA3 = {**TINY_DECODER, "head_dim": 16, "max_position_embeddings": 16384}
"""llama3 RoPE scaling needs max_position_embeddings above its original 8192."""

SPECS: dict[str, ModelSpec] = {
    spec.name: spec
    for spec in (
        ModelSpec(
            "gpt2",
            "GPT2Config",
            "GPT2LMHeadModel",
            {
                "vocab_size": 50257,
                "n_positions": 1024,
                "n_embd": 768,
                "n_layer": 12,
                "n_head": 12,
                "activation_function": "gelu_new",
                "layer_norm_epsilon": 1e-5,
                "tie_word_embeddings": True,
                "bos_token_id": 50256,
                "eos_token_id": 50256,
            },
            {
                "vocab_size": 256,
                "n_positions": 256,
                "n_embd": 64,
                "n_layer": 2,
                "n_head": 4,
                "bos_token_id": 0,
                "eos_token_id": 0,
            },
            "openai-community/gpt2 (124,439,808 parameters)",
        ),
        ModelSpec(
            "granite-350m",
            "GraniteConfig",
            "GraniteForCausalLM",
            {
                "vocab_size": 100352,
                "hidden_size": 1024,
                "intermediate_size": 2048,
                "num_hidden_layers": 28,
                "num_attention_heads": 16,
                "num_key_value_heads": 4,
                "hidden_act": "silu",
                "max_position_embeddings": 32768,
                "rms_norm_eps": 1e-5,
                "rope_theta": 10000.0,
                "attention_bias": False,
                "mlp_bias": False,
                "tie_word_embeddings": True,
                "embedding_multiplier": 12.0,
                "attention_multiplier": 0.015625,
                "residual_multiplier": 0.263,
                "logits_scaling": 4.0,
                "bos_token_id": 100257,
                "eos_token_id": 100257,
                "pad_token_id": 100256,
            },
            {**TINY_DECODER, "bos_token_id": 0, "eos_token_id": 0, "pad_token_id": 1},
            "ibm-granite/granite-4.0-350m: a dense all-attention GraniteMoeHybrid, "
            "equivalent to GraniteForCausalLM (352,379,904 parameters)",
        ),
        ModelSpec(
            "qwen2-0.5b",
            "Qwen2Config",
            "Qwen2ForCausalLM",
            {
                "vocab_size": 151936,
                "hidden_size": 896,
                "intermediate_size": 4864,
                "num_hidden_layers": 24,
                "num_attention_heads": 14,
                "num_key_value_heads": 2,
                "hidden_act": "silu",
                "max_position_embeddings": 131072,
                "rms_norm_eps": 1e-6,
                "rope_theta": 1000000.0,
                "tie_word_embeddings": True,
                "use_sliding_window": False,
                "bos_token_id": 151643,
                "eos_token_id": 151643,
            },
            {**TINY_DECODER, "bos_token_id": 0, "eos_token_id": 0},
            "Qwen/Qwen2-0.5B (494,032,768 parameters)",
        ),
        ModelSpec(
            "llama-3.2-1b",
            "LlamaConfig",
            "LlamaForCausalLM",
            {
                "vocab_size": 128256,
                "hidden_size": 2048,
                "intermediate_size": 8192,
                "num_hidden_layers": 16,
                "num_attention_heads": 32,
                "num_key_value_heads": 8,
                "head_dim": 64,
                "hidden_act": "silu",
                "max_position_embeddings": 131072,
                "rms_norm_eps": 1e-5,
                "rope_parameters": LLAMA3_ROPE_1B,
                "tie_word_embeddings": True,
                "bos_token_id": 128000,
                "eos_token_id": 128001,
            },
            {**TINY_LLAMA3, "bos_token_id": 0, "eos_token_id": 0},
            "meta-llama/Llama-3.2-1B (1,235,814,400 parameters)",
        ),
        ModelSpec(
            "lfm2-2.6b",
            "Lfm2Config",
            "Lfm2ForCausalLM",
            {
                "vocab_size": 65536,
                "hidden_size": 2048,
                "intermediate_size": 10752,
                "num_hidden_layers": 30,
                "num_attention_heads": 32,
                "num_key_value_heads": 8,
                "max_position_embeddings": 128000,
                "norm_eps": 1e-5,
                "rope_theta": 1000000.0,
                "conv_bias": False,
                "conv_L_cache": 3,
                "block_multiple_of": 256,
                "block_ffn_dim_multiplier": 1.0,
                "block_auto_adjust_ff_dim": False,
                "layer_types": [
                    "full_attention" if i in LFM2_ATTENTION_LAYERS else "conv" for i in range(30)
                ],
                "tie_word_embeddings": True,
                "pad_token_id": 0,
                "bos_token_id": 1,
                "eos_token_id": 7,
            },
            {
                **TINY_DECODER,
                "num_hidden_layers": 4,
                "layer_types": ["conv", "full_attention", "conv", "full_attention"],
                "bos_token_id": 1,
                "eos_token_id": 2,
            },
            "LiquidAI/LFM2-2.6B (2,569,272,320 parameters; attention at layers "
            "2, 5, 9, 13, 17, 21, 24, 27, short convolutions elsewhere)",
        ),
        ModelSpec(
            "llama-3.1-8b",
            "LlamaConfig",
            "LlamaForCausalLM",
            {
                "vocab_size": 128256,
                "hidden_size": 4096,
                "intermediate_size": 14336,
                "num_hidden_layers": 32,
                "num_attention_heads": 32,
                "num_key_value_heads": 8,
                "head_dim": 128,
                "hidden_act": "silu",
                "max_position_embeddings": 131072,
                "rms_norm_eps": 1e-5,
                "rope_parameters": {**LLAMA3_ROPE_1B, "factor": 8.0},
                "tie_word_embeddings": False,
                "bos_token_id": 128000,
                "eos_token_id": 128001,
            },
            {**TINY_LLAMA3, "bos_token_id": 0, "eos_token_id": 0},
            "meta-llama/Llama-3.1-8B (8,030,261,248 parameters; fp32 does not fit in "
            "24 GiB, so the full model is built on the meta device)",
            fits_in_memory=False,
        ),
    )
}


class UnknownModel(ForgeError):
    pass


def get_spec(name: str) -> ModelSpec:
    if name not in SPECS:
        raise UnknownModel(f"unknown model '{name}' (known: {', '.join(SPECS)})")
    return SPECS[name]


def build_model(
    name: str, tiny: bool = False, seed: int = 0, device: str | None = None
) -> torch.nn.Module:
    """A model with seeded random weights, in eval mode. `device="meta"` allocates nothing;
    models that do not fit in memory default to it at full size."""
    import transformers

    spec = get_spec(name)
    config = spec.config(tiny)
    if device is None:
        device = "cpu" if tiny or spec.fits_in_memory else "meta"
    torch.manual_seed(seed)
    model_class = getattr(transformers, spec.model_class)
    with torch.device(device):
        model = model_class(config)
    return model.eval()


WIDE_STD = 0.3
"""The std `widened` redraws matrices at: the built-ins' own init (0.02) leaves a tiny
model's logits nearly flat, so greedy decoding repeats one token whatever the context
and a program that ignores its cache or its mask still gives eager's tokens."""


def widened(model: torch.nn.Module, std: float = WIDE_STD, seed: int = 1) -> torch.nn.Module:
    """`model` with every matrix (every parameter of two or more dims) redrawn from
    N(0, std) with a generator seeded by `seed`, in place; vectors are kept."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in model.parameters():
            if parameter.dim() >= 2:
                parameter.copy_(torch.randn(parameter.shape, generator=generator) * std)
    return model


def example_inputs(
    model: torch.nn.Module, seq: int = 128, batch: int = 1, seed: int = 0
) -> tuple[tuple[torch.Tensor, ...], dict[str, Any]]:
    """(input_ids,) and kwargs with an all-ones attention mask and no KV cache."""
    generator = torch.Generator().manual_seed(seed)
    vocab = int(model.config.vocab_size)
    device = next(model.parameters()).device
    ids = torch.randint(0, vocab, (batch, seq), generator=generator).to(device)
    mask = torch.ones(batch, seq, dtype=torch.long, device=device)
    return (ids,), {"attention_mask": mask, "use_cache": False}


@contextmanager
def user_code(where: str, what: str) -> Iterator[None]:
    """Run a user's model file or factory: whatever it raises, a `sys.exit()` and a
    `KeyboardInterrupt` of its own included, is one error naming `where` and `what`
    (a factory that exits would otherwise end the command, silently and with its
    code). Ctrl-C while it runs stays an interrupt (exit 130)."""
    interrupted = False

    def on_interrupt(signum: int, frame: FrameType | None) -> None:
        nonlocal interrupted
        interrupted = True
        raise KeyboardInterrupt

    in_main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, on_interrupt) if in_main_thread else None
    try:
        yield
    except ForgeError:
        raise
    except SystemExit as e:
        raise ForgeError(f"{where}: {what} called sys.exit({e.code!r})") from e
    except KeyboardInterrupt as e:
        if interrupted:
            raise
        raise ForgeError(f"{where}: {what} raised KeyboardInterrupt (not an interrupt)") from e
    except Exception as e:
        raise ForgeError(f"{where}: {what} raised {type(e).__name__}: {e}") from e
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)


def load_factory(reference: str) -> Callable[[], torch.nn.Module | tuple[Any, ...]]:
    """`path/to/file.py:factory` -> the factory function defined there."""
    path_text, _, attr = reference.rpartition(":")
    path = Path(path_text)
    if not path_text or not attr or not path.is_file():
        raise UnknownModel(
            f"'{reference}' is not a model name, checkpoint directory or path/to/file.py:factory"
        )
    spec = importlib.util.spec_from_file_location(f"forge_user_model_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    with user_code(str(path), "loading it"):
        spec.loader.exec_module(module)
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise UnknownModel(f"{path} defines no callable '{attr}'")
    return factory
