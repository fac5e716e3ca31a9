"""Differential fuzzing of whole transformers: random tiny decoder-only models drawn from
transformers' own config classes, compiled by Forge, must match eager PyTorch.

`forge fuzz-models` (family `blocks`, forge.devtools.fuzz_models) builds small
hand-written blocks; whole models exercise what those blocks do not: the interactions of
GQA, RoPE variants, QK-norm, sliding windows, softcapping, tied heads and the static KV
cache. A case is a `TransformerSpec`: a family (Llama, Mistral, Qwen2/3, Gemma 1/2,
Phi-3, GPT-2, GPT-Neo, GPT-NeoX, Granite, OLMo 1/2, ... whichever the installed
transformers has), its sizes, the config fields it draws beyond a tiny base
(`overrides`), a seed and the prompt. `check` builds the model with re-initialized
seeded weights and runs two checks against eager:

* forward: `forge.compile` of the forward pass, logits within 1e-5 (max-abs, fp32) on two
  random inputs, or, above that, within fp32 noise (`_fp32_noise`: no further from the
  fp64 model than twice eager fp32's own distance, plus 1e-5);
* generate: `compile_lm` (prefill + decode around one static cache; a prompt longer than
  the prefill goes in chunks) gives `model.generate(do_sample=False)`'s greedy tokens,
  and per-step logits within 1e-5 of eager's (or within fp32 noise, as the forward).

Weights are re-initialized with a seeded std (at the default init greedy decoding repeats
one token, which would let a broken cache pass) and 1-D parameters get noise (so zero
biases do not hide a dropped bias). `check` is a top-level function of plain data that
never raises nor prints, so a campaign can run it in worker processes (`run_cases`).

Failures shrink (override fields back to their defaults one at a time, sizes halved)
while they keep their signature, and are saved as JSON under
`test/python/regressions/transformers/`, which
`test/python/devtools/test_fuzz_transformer_regressions.py` replays.

    forge fuzz-models --family transformers --cases 100
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import io
import json
import random
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import torch

from forge.devtools.fuzz_models import (
    Failure,
    ModelFuzzResult,
    Outcome,
    read_spec,
    write_spec,
)
from forge.devtools.shrink import Budget
from forge.runtime.agreement import FP32_LIMIT, Outputs, fp32_noise
from forge.support.diagnostics import ForgeError, one_line

REGRESSIONS = Path("test/python/regressions/transformers")
"""Default save directory for shrunk failures, relative to the repository root."""
TOLERANCE = FP32_LIMIT
"""Max-abs logits difference of the forward check (fp32)."""
MAX_POSITIONS = 64
"""max_position_embeddings of every case (the cache capacity stays below it)."""
STD = 0.3
"""Re-initialization std of matrices: at the default init (0.02) greedy decoding repeats
one token, which would let a broken cache pass (test/python/runtime/test_generate.py)."""
VECTOR_STD = 0.1
"""Noise added to 1-D parameters (biases, norm weights), so zero biases do not hide a
dropped bias."""

# Activations every family's ACT2FN lookup knows.
ACTIVATIONS = ("silu", "gelu", "gelu_pytorch_tanh", "gelu_new", "relu")
HIDDEN = (16, 32, 48, 64)
VOCAB = (64, 128, 200, 256)


@dataclass(frozen=True)
class Family:
    """How to build one transformers architecture from a spec."""

    config: str
    """The config class in `transformers`."""
    model: str
    """The causal-LM class in `transformers`."""
    names: dict[str, str] = field(default_factory=dict)
    """Spec size -> config field where the config does not use the Llama names."""
    draw: Callable[[random.Random, TransformerSpec], dict[str, Any]] | None = None
    """Overrides beyond the tiny base."""
    std: float = STD
    embed_std: float | None = None
    """The input embedding's std, where it differs from `std` (see `build`)."""
    attention: str = "sdpa"
    """The base attn_implementation (an override may ask for "eager")."""


SIZE_NAMES = {
    "vocab": "vocab_size",
    "hidden": "hidden_size",
    "intermediate": "intermediate_size",
    "layers": "num_hidden_layers",
    "heads": "num_attention_heads",
    "positions": "max_position_embeddings",
}


@functools.cache
def _config_fields(name: str) -> frozenset[str]:
    """The fields a config class takes (its default instance's and its arguments)."""
    import transformers

    cls = getattr(transformers, name)
    with _quiet():
        defaults = cls().to_dict()
    return frozenset(defaults) | frozenset(inspect.signature(cls.__init__).parameters)


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _rope(rng: random.Random, kinds: Sequence[str], partial: bool = False) -> dict[str, Any]:
    """Random `rope_parameters` of one of `kinds` (transformers 5 names)."""
    kind = rng.choice(kinds)
    params: dict[str, Any] = {
        "rope_type": kind,
        "rope_theta": rng.choice((10000.0, 500000.0, 100.0)),
    }
    if kind in ("linear", "dynamic"):
        params["factor"] = rng.choice((2.0, 4.0, 0.5))
    elif kind == "llama3":
        params.update(
            factor=rng.choice((2.0, 8.0)),
            low_freq_factor=1.0,
            high_freq_factor=4.0,
            original_max_position_embeddings=rng.choice((16, 32)),
        )
    elif kind == "yarn":
        params.update(factor=rng.choice((2.0, 4.0)), original_max_position_embeddings=16)
    if partial:
        params["partial_rotary_factor"] = rng.choice((1.0, 0.5, 0.25))
    return params


ROPES = ("default", "default", "linear", "llama3", "yarn")
"""Not "dynamic" nor "longrope": they recompute the frequencies from the largest position
at run time (a data-dependent branch), which torch.export refuses (a CaptureError)."""


def _common(
    rng: random.Random,
    spec: TransformerSpec,
    *,
    gqa: bool = True,
    head_dim: bool = False,
    act: str = "hidden_act",
    bias: Sequence[str] = (),
    rope: Sequence[str] | None = ROPES,
    partial: bool = False,
    tied: float = 0.5,
) -> dict[str, Any]:
    """Overrides most decoder-only families share: GQA, head dim, tied embeddings (with
    probability `tied`), activation, biases, RoPE, attention implementation."""
    out: dict[str, Any] = {}
    if gqa and rng.random() < 0.7:
        out["num_key_value_heads"] = rng.choice(_divisors(spec.heads))
    if head_dim and rng.random() < 0.5:
        out["head_dim"] = rng.choice((4, 8, 16, 32))
    out["tie_word_embeddings"] = rng.random() < tied
    if act and rng.random() < 0.6:
        out[act] = rng.choice(ACTIVATIONS)
    for name in bias:
        if rng.random() < 0.4:
            out[name] = True
    if rope is not None and rng.random() < 0.6:
        out["rope_parameters"] = _rope(rng, rope, partial)
    if rng.random() < 0.3:
        out["attn_implementation"] = "eager"
    return out


def _sliding(rng: random.Random, spec: TransformerSpec, qwen: bool = False) -> dict[str, Any]:
    """A sliding window shorter than the prompt (Qwen2/3: on layers from max_window_layers)."""
    if rng.random() < 0.5:
        return {}
    window = rng.choice((2, 3, 4, 6, 8))
    if not qwen:
        return {"sliding_window": window}
    return {
        "use_sliding_window": True,
        "sliding_window": window,
        "max_window_layers": rng.randint(0, spec.layers),
    }


def _llama(rng: random.Random, spec: TransformerSpec) -> dict[str, Any]:
    return _common(rng, spec, head_dim=True, bias=("attention_bias", "mlp_bias"))


def _mistral(rng: random.Random, spec: TransformerSpec) -> dict[str, Any]:
    return {**_common(rng, spec, head_dim=True), **_sliding(rng, spec)}


def _qwen2(rng: random.Random, spec: TransformerSpec) -> dict[str, Any]:
    return {**_common(rng, spec), **_sliding(rng, spec, qwen=True)}


def _qwen3(rng: random.Random, spec: TransformerSpec) -> dict[str, Any]:
    out = _common(rng, spec, head_dim=True, bias=("attention_bias",))
    return {**out, **_sliding(rng, spec, qwen=True)}


def _gemma(rng: random.Random, spec: TransformerSpec) -> dict[str, Any]:
    return _common(rng, spec, head_dim=True, bias=("attention_bias",))


def _gemma2(rng: random.Random, spec: TransformerSpec) -> dict[str, Any]:
    # Tied, Gemma 2 echoes its input token: the scaled embedding dominates the residual
    # stream between the sandwich norms (26 of 30 greedy generations repeated one token).
    out = _common(
        rng, spec, head_dim=True, act="hidden_activation", bias=("attention_bias",), tied=0.15
    )
    out["sliding_window"] = rng.choice((2, 4, 8, 64))
    if rng.random() < 0.5:
        out["query_pre_attn_scalar"] = rng.choice((4, 16, 64))
    if rng.random() < 0.5:
        out["attn_logit_softcapping"] = rng.choice((None, 1.0, 5.0))
    if rng.random() < 0.5:
        out["final_logit_softcapping"] = rng.choice((None, 2.0, 10.0))
    return out


def _phi3(rng: random.Random, spec: TransformerSpec) -> dict[str, Any]:
    out = _common(rng, spec, partial=True)
    return {**out, **_sliding(rng, spec)}


def _gpt2(rng: random.Random, spec: TransformerSpec) -> dict[str, Any]:
    out = _common(rng, spec, gqa=False, act="activation_function", rope=None)
    for name in ("scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn"):
        if rng.random() < 0.3:
            out[name] = True
    if rng.random() < 0.2:
        out["scale_attn_weights"] = False
    return out


def _gpt_neox(rng: random.Random, spec: TransformerSpec) -> dict[str, Any]:
    out = _common(rng, spec, gqa=False, partial=True)
    if rng.random() < 0.4:
        out["use_parallel_residual"] = False
    if rng.random() < 0.3:
        out["attention_bias"] = False
    return out


def _gpt_neo(rng: random.Random, spec: TransformerSpec) -> dict[str, Any]:
    """Global and local layers (a window of `window_size` positions, shorter than most
    prompts), which GPT-Neo masks with its own per-layer rows, not transformers' masks."""
    out = _common(rng, spec, gqa=False, act="activation_function", rope=None)
    kinds = [rng.choice(("global", "local")) for _ in range(spec.layers)]
    out["attention_types"] = [[kinds, 1]]
    out["window_size"] = rng.choice((2, 3, 4, 8))
    return out


def _granite(rng: random.Random, spec: TransformerSpec) -> dict[str, Any]:
    out = _common(rng, spec, bias=("attention_bias", "mlp_bias"))
    for name, values in (
        ("embedding_multiplier", (12.0, 0.5, 2.0)),
        ("residual_multiplier", (0.25, 0.5)),
        ("attention_multiplier", (0.125, 0.25, 1.0)),
        ("logits_scaling", (4.0, 0.5, 8.0)),
    ):
        if rng.random() < 0.5:
            out[name] = rng.choice(values)
    return out


def _olmo(rng: random.Random, spec: TransformerSpec) -> dict[str, Any]:
    out = _common(rng, spec, bias=("attention_bias",))
    if rng.random() < 0.5:
        out["clip_qkv"] = rng.choice((0.5, 2.0, 8.0))
    return out


def _olmo2(rng: random.Random, spec: TransformerSpec) -> dict[str, Any]:
    # Tied, OLMo 2 echoes its input token as Gemma 2 does (post-norms): 8 of 30.
    return _common(rng, spec, bias=("attention_bias",), tied=0.15)


def _phi(rng: random.Random, spec: TransformerSpec) -> dict[str, Any]:
    out = _common(rng, spec, partial=True)
    if rng.random() < 0.5:
        out["qk_layernorm"] = True
    return out


def _stablelm(rng: random.Random, spec: TransformerSpec) -> dict[str, Any]:
    out = _common(rng, spec, bias=("use_qkv_bias",), partial=True)
    for name in ("qk_layernorm", "use_parallel_residual"):
        if rng.random() < 0.4:
            out[name] = True
    return out


def _starcoder2(rng: random.Random, spec: TransformerSpec) -> dict[str, Any]:
    out = _common(rng, spec)
    if rng.random() < 0.4:
        out["use_bias"] = False
    return {**out, **_sliding(rng, spec)}


FAMILIES: dict[str, Family] = {
    "llama": Family("LlamaConfig", "LlamaForCausalLM", draw=_llama),
    "mistral": Family("MistralConfig", "MistralForCausalLM", draw=_mistral),
    "qwen2": Family("Qwen2Config", "Qwen2ForCausalLM", draw=_qwen2),
    "qwen3": Family("Qwen3Config", "Qwen3ForCausalLM", draw=_qwen3),
    "gemma": Family("GemmaConfig", "GemmaForCausalLM", draw=_gemma),
    "gemma2": Family("Gemma2Config", "Gemma2ForCausalLM", draw=_gemma2, attention="eager"),
    "phi3": Family("Phi3Config", "Phi3ForCausalLM", draw=_phi3),
    "gpt2": Family(
        "GPT2Config",
        "GPT2LMHeadModel",
        names={
            "hidden": "n_embd",
            "intermediate": "n_inner",
            "layers": "n_layer",
            "heads": "n_head",
            "positions": "n_positions",
        },
        draw=_gpt2,
    ),
    "gpt-neo": Family(
        "GPTNeoConfig",
        "GPTNeoForCausalLM",
        names={"layers": "num_layers", "heads": "num_heads"},
        draw=_gpt_neo,
        attention="eager",
    ),
    "gpt-neox": Family("GPTNeoXConfig", "GPTNeoXForCausalLM", draw=_gpt_neox),
    "granite": Family("GraniteConfig", "GraniteForCausalLM", draw=_granite, std=0.8),
    "olmo": Family("OlmoConfig", "OlmoForCausalLM", draw=_olmo),
    "olmo2": Family("Olmo2Config", "Olmo2ForCausalLM", draw=_olmo2),
    "phi": Family("PhiConfig", "PhiForCausalLM", draw=_phi),
    "stablelm": Family("StableLmConfig", "StableLmForCausalLM", draw=_stablelm),
    "starcoder2": Family("Starcoder2Config", "Starcoder2ForCausalLM", draw=_starcoder2),
}
"""Every family the fuzzer knows; `available_families` keeps those transformers has."""


def available_families() -> list[str]:
    """The families whose config and model classes the installed transformers has."""
    import transformers

    return [
        name
        for name, f in FAMILIES.items()
        if hasattr(transformers, f.config) and hasattr(transformers, f.model)
    ]


@dataclass(frozen=True)
class TransformerSpec:
    """A whole tiny transformer and how it is exercised: what the generator draws, the
    shrinker reduces and a regression file stores."""

    family: str
    layers: int = 2
    hidden: int = 32
    heads: int = 4
    intermediate: int = 64
    vocab: int = 128
    overrides: tuple[tuple[str, Any], ...] = ()
    """Config fields beyond the tiny base, sorted by name (JSON values)."""
    seed: int = 0
    """Seeds the weights and the inputs."""
    seq: int = 8
    """Tokens of the forward check."""
    prompt: int = 5
    """Prompt tokens of the generate check."""
    prompt_capacity: int = 8
    """Prefill size: a longer prompt is prefilled in chunks."""
    capacity: int = 32
    """Static cache positions."""
    new_tokens: int = 8

    def __hash__(self) -> int:  # overrides hold dicts (rope_parameters)
        return hash(json.dumps(self.to_json(), sort_keys=True))

    @property
    def options(self) -> dict[str, Any]:
        return dict(self.overrides)

    def config_kwargs(self) -> dict[str, Any]:
        """The config's keyword arguments: the tiny base and the overrides."""
        names = {**SIZE_NAMES, **FAMILIES[self.family].names}
        sizes = {
            "vocab": self.vocab,
            "hidden": self.hidden,
            "intermediate": self.intermediate,
            "layers": self.layers,
            "heads": self.heads,
            "positions": MAX_POSITIONS,
        }
        base: dict[str, Any] = {names[k]: v for k, v in sizes.items()}
        family = FAMILIES[self.family]
        base.update(
            bos_token_id=1, eos_token_id=2, pad_token_id=0, attn_implementation=family.attention
        )
        # Some configs default these to a full-size model's (Gemma's head_dim 256,
        # Qwen2's 32 key/value heads): the tiny base sets them from its own sizes.
        fields = _config_fields(family.config)
        if "head_dim" in fields:
            base["head_dim"] = self.hidden // self.heads
        if "num_key_value_heads" in fields:
            base["num_key_value_heads"] = self.heads
        return {**base, **self.options}

    def problem(self) -> str | None:
        """Why this spec cannot be built (None if it can): shrinking proposes candidates
        blindly and skips the invalid ones."""
        if self.family not in FAMILIES:
            return f"family must be one of {', '.join(FAMILIES)}, got '{self.family}'"
        sizes = (self.layers, self.hidden, self.heads, self.intermediate, self.vocab, self.seq)
        if min(sizes) < 1 or min(self.prompt, self.prompt_capacity, self.new_tokens) < 1:
            return "sizes, lengths and token counts must be positive"
        if self.vocab < 8:
            return f"vocab {self.vocab} must be at least 8 (token ids 0-2 are special)"
        if self.prompt + self.new_tokens > self.capacity or self.prompt_capacity > self.capacity:
            return (
                f"prompt {self.prompt} + {self.new_tokens} new tokens and the prefill of "
                f"{self.prompt_capacity} must fit the cache of {self.capacity}"
            )
        if self.capacity > MAX_POSITIONS:
            return f"capacity {self.capacity} exceeds {MAX_POSITIONS} positions"
        if self.hidden % self.heads:
            return f"heads {self.heads} must divide hidden {self.hidden}"
        kv = self.options.get("num_key_value_heads", self.heads)
        if not isinstance(kv, int) or kv < 1 or self.heads % kv:
            return f"num_key_value_heads {kv} must divide heads {self.heads}"
        rope = self.options.get("rope_parameters", {})
        if not isinstance(rope, dict):
            return "rope_parameters must be an object"
        if "rope_type" in rope:
            from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

            kinds = ["default", *ROPE_INIT_FUNCTIONS]
            if rope["rope_type"] not in kinds:
                return f"rope_type must be one of {', '.join(kinds)}, got {rope['rope_type']!r}"
        config = self._config()
        if isinstance(config, str):
            return config
        head_dim = getattr(config, "head_dim", None) or self.hidden // self.heads
        rope = getattr(config, "rope_parameters", None) or {}
        rotary = int(head_dim * rope.get("partial_rotary_factor", 1.0))
        if rope and (head_dim % 2 or rotary % 2 or rotary < 4):
            return f"head dim {head_dim} and its rotary part {rotary} must be even, at least 4"
        return None

    def _config(self) -> Any:
        """The transformers config, or why it cannot be built."""
        import transformers

        family = FAMILIES[self.family]
        if not hasattr(transformers, family.config):
            return f"transformers {transformers.__version__} has no {family.config}"
        cls = getattr(transformers, family.config)
        unknown = sorted(
            set(self.options) - _config_fields(family.config) - {"attn_implementation"}
        )
        if unknown:
            return f"{family.config} has no field(s) {', '.join(unknown)}"
        try:
            with _quiet():
                return cls(**self.config_kwargs())
        except Exception as e:
            return f"{family.config}: {one_line(str(e))}"

    def describe(self) -> str:
        options = " ".join(f"{k}={_short(v)}" for k, v in self.overrides)
        return (
            f"{self.family} L{self.layers} h{self.hidden} heads {self.heads} "
            f"ffn {self.intermediate} vocab {self.vocab} seed {self.seed} seq {self.seq} "
            f"prompt {self.prompt}/{self.prompt_capacity} cache {self.capacity} "
            f"new {self.new_tokens}" + (f": {options}" if options else "")
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "family": self.family,
            "layers": self.layers,
            "hidden": self.hidden,
            "heads": self.heads,
            "intermediate": self.intermediate,
            "vocab": self.vocab,
            "seed": self.seed,
            "seq": self.seq,
            "prompt": self.prompt,
            "prompt_capacity": self.prompt_capacity,
            "capacity": self.capacity,
            "new_tokens": self.new_tokens,
            "overrides": dict(self.overrides),
        }

    @classmethod
    def from_json(cls, data: Any, source: str = "spec") -> TransformerSpec:
        """Parse and validate a saved spec; any problem is one ForgeError naming `source`."""
        if not isinstance(data, dict) or not isinstance(data.get("family"), str):
            raise ForgeError(f"{source}: expected an object with a 'family' string")
        overrides = data.get("overrides", {})
        if not isinstance(overrides, dict):
            raise ForgeError(f"{source}: 'overrides' must be an object")
        ints = [f.name for f in fields(cls) if f.type == "int"]
        unknown = set(data) - {"family", "overrides", "failure", "origin", *ints}
        if unknown:
            raise ForgeError(f"{source}: unknown key(s) {', '.join(sorted(unknown))}")
        values: dict[str, int] = {}
        for name in ints:
            if name not in data:
                continue
            if not isinstance(data[name], int) or isinstance(data[name], bool):
                raise ForgeError(f"{source}: '{name}' must be an integer, got {data[name]!r}")
            values[name] = data[name]
        spec = cls(data["family"], overrides=tuple(sorted(overrides.items())), **values)
        if problem := spec.problem():
            raise ForgeError(f"{source}: {problem}")
        return spec


def _short(value: Any) -> str:
    if isinstance(value, dict):
        kind = value.get("rope_type", "")
        rest = ",".join(f"{k}={v}" for k, v in value.items() if k != "rope_type")
        return f"{kind}({rest})"
    return str(value)


def generate(seed: int, families: Sequence[str] | None = None) -> TransformerSpec:
    """The spec of case `seed`: a family (cycling through `families`, default every
    available one, so consecutive seeds cover them all), random sizes and overrides."""
    names = list(families) if families is not None else available_families()
    if not names:
        raise ForgeError("no transformer family is available in the installed transformers")
    rng = random.Random(seed)
    family = names[seed % len(names)]
    while True:  # redraw what the family rejects (a rotary part of 3 dims...)
        spec = _draw(rng, family, seed)
        if spec.problem() is None:
            return spec


def _draw(rng: random.Random, family: str, seed: int) -> TransformerSpec:
    heads = rng.choice((1, 2, 4, 4, 8))
    hidden = rng.choice([h for h in HIDDEN if h % heads == 0 and (h // heads) % 4 == 0])
    capacity = rng.choice((16, 24, 32, 32))
    new_tokens = rng.randint(2, 8)
    prompt_capacity = rng.choice((1, 3, 4, 5, 8, 8))
    spec = TransformerSpec(
        family,
        layers=rng.randint(1, 3),
        hidden=hidden,
        heads=heads,
        intermediate=rng.choice((16, 32, 64, 96, 128)),
        vocab=rng.choice(VOCAB),
        seed=seed,
        seq=rng.randint(1, 12),
        prompt=rng.randint(1, capacity - new_tokens),
        prompt_capacity=min(prompt_capacity, capacity),
        capacity=capacity,
        new_tokens=new_tokens,
    )
    draw = FAMILIES[family].draw
    overrides = draw(rng, spec) if draw else {}
    return replace(spec, overrides=tuple(sorted(overrides.items())))


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """No warnings, no transformers logging, nothing on stdout (cases run in workers
    whose stdout is the campaign's report)."""
    import transformers

    verbosity = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            yield
    finally:
        transformers.logging.set_verbosity(verbosity)


def build(spec: TransformerSpec) -> torch.nn.Module:
    """The spec's model in eval mode, fp32, with seeded re-initialized weights."""
    import transformers

    if problem := spec.problem():
        raise ForgeError(f"invalid transformer spec: {problem}")
    family = FAMILIES[spec.family]
    config = getattr(transformers, family.config)(**spec.config_kwargs())
    torch.manual_seed(spec.seed)
    model = getattr(transformers, family.model)(config).eval().float()
    generator = torch.Generator().manual_seed(spec.seed)
    with torch.no_grad():
        for parameter in model.parameters():
            noise = torch.randn(parameter.shape, generator=generator)
            if parameter.dim() >= 2:
                parameter.copy_(noise * family.std)
            else:
                parameter.add_(noise * VECTOR_STD)
        embedding = model.get_input_embeddings().weight
        if family.embed_std is not None:
            embedding.mul_(family.embed_std / family.std)
    return model


def _ids(spec: TransformerSpec, length: int, trial: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(spec.seed * 7919 + trial)
    return torch.randint(3, spec.vocab, (1, length), generator=generator)


@dataclass
class TransformerOutcome(Outcome):
    """An `Outcome` that also says which check failed and how far generation drifted."""

    check: str = ""
    """forward, generate, or eager (the model itself failed): where the failure is."""
    generate_worst: float = 0.0
    """Max-abs difference of the per-step logits of generation vs eager."""
    degenerate: bool = False
    """Greedy generation repeated one token (a weak check of the cache)."""
    seconds: float = 0.0

    @property
    def signature(self) -> str:
        """What a shrunk case must keep: the check and the mismatch or exception type."""
        return f"{super().signature} in {self.check}" if self.kind != "match" else "match"


CHECKS = ("forward", "generate")


def check(
    spec: TransformerSpec, checks: Sequence[str] = CHECKS, tolerance: float = TOLERANCE
) -> TransformerOutcome:
    """Build `spec`'s model and compare Forge with eager: the compiled forward's logits on
    two random inputs, then greedy generation through `compile_lm`. Never raises (any
    exception is an "error" outcome) and prints nothing."""
    start = time.perf_counter()
    with _quiet():
        outcome = _check(spec, checks, tolerance)
    outcome.seconds = time.perf_counter() - start
    return outcome


def _error(e: BaseException, where: str) -> TransformerOutcome:
    return TransformerOutcome("error", f"{type(e).__name__}: {one_line(str(e))}", check=where)


def eager_greedy(
    model: torch.nn.Module, prompt: torch.Tensor, new_tokens: int
) -> tuple[list[int], list[torch.Tensor]]:
    """Eager `model.generate`'s greedy tokens and per-step logits: exactly `new_tokens`
    of them (no EOS stop), the reference every generation check compares with."""
    out = model.generate(
        prompt,
        attention_mask=torch.ones_like(prompt),
        do_sample=False,
        max_new_tokens=new_tokens,
        min_new_tokens=new_tokens,
        pad_token_id=0,
        eos_token_id=None,
        output_logits=True,
        return_dict_in_generate=True,
    )
    return out.sequences[0, prompt.shape[1] :].tolist(), [step[0] for step in out.logits]


def _check(spec: TransformerSpec, checks: Sequence[str], tolerance: float) -> TransformerOutcome:
    from forge.runtime.api import compile as forge_compile
    from forge.runtime.generate import compile_lm

    try:
        model = build(spec)
        inputs = [_ids(spec, spec.seq, trial) for trial in range(2)]
        prompt = _ids(spec, spec.prompt, -1)
        with torch.no_grad():
            expected = [model(x, use_cache=False).logits for x in inputs]
            eager_tokens, eager_logits = eager_greedy(model, prompt, spec.new_tokens)
    except Exception as e:
        return _error(e, "eager")

    worst, noise = 0.0, ""
    if "forward" in checks:
        try:
            compiled = forge_compile(model, (inputs[0],), {"use_cache": False})
            actual = [compiled(x, use_cache=False).logits for x in inputs]
        except Exception as e:
            return _error(e, "forward")
        worst = max(float((a - b).abs().max()) for a, b in zip(actual, expected, strict=True))
        if not worst <= tolerance:
            try:
                noise = _fp32_noise(model, inputs, slice(None), actual, expected, tolerance)
            except Exception as e:
                return _error(e, "forward fp64 reference")
            if not noise.startswith("within"):
                detail = f"forward logits max-abs {worst:.2e} ({noise})"
                return TransformerOutcome("mismatch", detail, worst, check="forward")

    generate_worst, degenerate = 0.0, False
    if "generate" in checks:
        try:
            lm = compile_lm(model, capacity=spec.capacity, prompt_capacity=spec.prompt_capacity)
            tokens = lm.generate(prompt, spec.new_tokens, keep_logits=True)
        except Exception as e:
            return _error(e, "generate")
        for got, want in zip(lm.step_logits, eager_logits, strict=False):
            generate_worst = max(generate_worst, float((got - want).abs().max()))
        degenerate = len(set(eager_tokens)) == 1 and len(eager_tokens) > 2
        if tokens != eager_tokens:
            step = next(
                (i for i, (a, b) in enumerate(zip(tokens, eager_tokens, strict=False)) if a != b),
                min(len(tokens), len(eager_tokens)),
            )
            gap = _gap(eager_logits[step]) if step < len(eager_logits) else float("nan")
            return TransformerOutcome(
                "mismatch",
                f"generate tokens differ at step {step} of {len(eager_tokens)} "
                f"(forge {tokens[step : step + 3]}, eager {eager_tokens[step : step + 3]}; "
                f"eager top-2 gap {gap:.2e}, step logits max-abs {generate_worst:.2e})",
                worst,
                check="generate",
                generate_worst=generate_worst,
            )
        if not generate_worst <= tolerance:
            # Step i's logits are the full sequence's at position prompt - 1 + i.
            sequence = torch.cat(
                [prompt, torch.tensor([eager_tokens[:-1]], dtype=prompt.dtype)], dim=1
            )
            window = slice(spec.prompt - 1, spec.prompt - 1 + len(eager_logits))
            got = torch.stack(lm.step_logits[: len(eager_logits)])[None]
            want = torch.stack(eager_logits)[None]
            try:
                verdict = _fp32_noise(model, [sequence], window, [got], [want], tolerance)
            except Exception as e:
                return _error(e, "generate fp64 reference")
            if not verdict.startswith("within"):
                return TransformerOutcome(
                    "mismatch",
                    f"generate step logits max-abs {generate_worst:.2e}, same tokens ({verdict})",
                    worst,
                    check="generate",
                    generate_worst=generate_worst,
                )
            noise = "; ".join(part for part in (noise, f"generate {verdict}") if part)
    return TransformerOutcome(
        "match", noise, worst, check="", generate_worst=generate_worst, degenerate=degenerate
    )


def _fp32_noise(
    model: torch.nn.Module,
    sequences: Sequence[torch.Tensor],
    window: slice,
    actual: Sequence[torch.Tensor],
    expected: Sequence[torch.Tensor],
    tolerance: float,
) -> str:
    """`forge.runtime.agreement.fp32_noise` on the logits at the positions `window` of
    `sequences` (`actual` and `expected` are Forge's and eager's there)."""
    return fp32_noise(model, _logits_at(sequences, window), actual, expected, tolerance)


def _logits_at(sequences: Sequence[torch.Tensor], window: slice) -> Outputs:
    def logits(model: torch.nn.Module) -> list[torch.Tensor]:
        return [model(x, use_cache=False).logits[:, window].double() for x in sequences]

    return logits


def _gap(logits: torch.Tensor) -> float:
    """How far the greedy choice is from a tie (a tiny gap may flip on float noise)."""
    top = torch.topk(logits.float(), 2).values
    return float(top[0] - top[1])


def _halves(value: int, least: int = 1) -> Iterator[int]:
    if value // 2 >= least:
        yield value // 2


def simpler(spec: TransformerSpec) -> Iterator[TransformerSpec]:
    """One-step simplifications: an override back to its default (dropped), fewer layers,
    then halved sizes, then shorter inputs and the seed 0."""
    for i in range(len(spec.overrides)):
        yield replace(spec, overrides=spec.overrides[:i] + spec.overrides[i + 1 :])
    if spec.layers > 1:
        yield replace(spec, layers=1)
        yield from (replace(spec, layers=n) for n in _halves(spec.layers))
    for name in ("heads", "hidden", "intermediate"):
        for n in _halves(getattr(spec, name)):
            yield replace(spec, **{name: n})
    if spec.heads > 1:  # heads and hidden together keep the head dim
        yield replace(spec, heads=spec.heads // 2, hidden=spec.hidden // 2)
    kv = spec.options.get("num_key_value_heads")
    if isinstance(kv, int) and kv > 1:
        halved = {**spec.options, "num_key_value_heads": kv // 2}
        yield replace(spec, overrides=tuple(sorted(halved.items())))
    yield from (replace(spec, vocab=n) for n in _halves(spec.vocab, 8))
    yield from (replace(spec, seq=n) for n in _halves(spec.seq))
    yield from (replace(spec, new_tokens=n) for n in _halves(spec.new_tokens))
    yield from (replace(spec, prompt=n) for n in _halves(spec.prompt))
    if spec.prompt_capacity > 1:
        yield replace(spec, prompt_capacity=min(spec.prompt, spec.prompt_capacity // 2) or 1)
    if spec.seed:
        yield replace(spec, seed=0)


def shrink(
    spec: TransformerSpec,
    fails: Callable[[TransformerSpec], bool],
    max_checks: int = 60,
    seconds: float = 600.0,
) -> TransformerSpec:
    """Take the first one-step simplification that still fails, until none does or the
    budget is spent. `fails(spec)` is assumed."""
    budget = Budget(max_checks, seconds)
    seen: dict[TransformerSpec, bool] = {spec: True}

    def test(candidate: TransformerSpec) -> bool:
        if candidate.problem():
            return False
        if candidate not in seen:
            seen[candidate] = budget.spend() and fails(candidate)
        return seen[candidate]

    while True:
        step = next((c for c in simpler(spec) if test(c)), None)
        if step is None:
            return spec
        spec = step


def fails_like(outcome: TransformerOutcome) -> Callable[[TransformerSpec], bool]:
    """The shrinking predicate: a candidate still fails the same check the same way
    (only that check runs: generation costs two compilations)."""
    wanted = outcome.signature
    checks = (outcome.check,) if outcome.check in CHECKS else CHECKS
    return lambda spec: check(spec, checks).signature == wanted


def save_spec(spec: TransformerSpec, outcome: Outcome, directory: Path, origin: str) -> Path:
    return write_spec(spec.to_json(), spec.family, outcome, directory, origin)


def load_spec(path: Path) -> TransformerSpec:
    return TransformerSpec.from_json(read_spec(path), str(path))


@dataclass
class TransformerFuzzResult(ModelFuzzResult):
    worst_generate: float = 0.0
    """Largest per-step logits difference of generation vs eager among the matches."""
    degenerate: int = 0
    """Cases whose eager greedy tokens were one token repeated."""
    noisy: int = 0
    """Matches beyond the tolerance but within fp32 noise (see `_fp32_noise`)."""
    seconds: list[float] = field(default_factory=list)
    """Per case, in the worker that ran it."""

    def summary(self) -> str:
        total = sum(self.counts.values())
        mean = sum(self.seconds) / len(self.seconds) if self.seconds else 0.0
        return (
            f"{total} random transformers: {self.counts['match']} match eager, "
            f"{self.counts['mismatch']} mismatch, {self.counts['error']} error; worst "
            f"forward max-abs {self.worst:.2e} ({self.noisy} above {TOLERANCE:g} within fp32 "
            f"noise), generate step logits {self.worst_generate:.2e}; {self.degenerate} "
            f"degenerate generations; {mean:.1f} s per case"
        )


def _serial(fn: Callable[[Any], Any], items: Sequence[Any]) -> Iterable[Any]:
    return map(fn, items)


def fuzz_transformers(
    cases: int,
    seed: int = 0,
    save_dir: Path | None = None,
    shrink_failures: bool = True,
    max_shrunk: int = 3,
    run_cases: Callable[[Callable[[Any], Any], Sequence[Any]], Iterable[Any]] | None = None,
    on_case: Callable[[TransformerSpec, TransformerOutcome], None] | None = None,
) -> TransformerFuzzResult:
    """Check `cases` generated transformers (seeds `seed`, `seed + 1`, ...) with
    `run_cases(check, specs)` (default: one after another here; a campaign passes a Ray
    mapper), then shrink the first `max_shrunk` failures here, keeping their signature,
    and save them as JSON specs in `save_dir`. `on_case` sees each result in order."""
    specs = [generate(case) for case in range(seed, seed + cases)]
    result = TransformerFuzzResult()
    outcomes = (run_cases or _serial)(check, specs)
    for spec, outcome in zip(specs, outcomes, strict=True):
        if on_case is not None:
            on_case(spec, outcome)
        result.counts[outcome.kind] += 1
        result.seconds.append(getattr(outcome, "seconds", 0.0))
        if outcome.kind == "match":
            result.worst = max(result.worst, outcome.worst)
            result.worst_generate = max(
                result.worst_generate, getattr(outcome, "generate_worst", 0.0)
            )
            result.degenerate += bool(getattr(outcome, "degenerate", False))
            result.noisy += outcome.worst > TOLERANCE
            continue
        result.failures.append(Failure(spec, outcome))
    for failure in result.failures[: max_shrunk if shrink_failures else 0]:
        spec = failure.spec
        origin = f"forge fuzz-models --family transformers, case seed {spec.seed}"
        if not isinstance(failure.outcome, TransformerOutcome):
            # A worker that crashed or hung (the campaign's outcome, not `check`'s):
            # shrinking it here could take the driver down too, so it is saved as found.
            if save_dir is not None:
                failure.saved = save_spec(spec, failure.outcome, save_dir, origin)
            continue
        shrunk = shrink(spec, fails_like(failure.outcome))
        failure.shrunk = shrunk
        if save_dir is not None:
            final = check(shrunk)
            failure.saved = save_spec(shrunk, final, save_dir, origin)
    return result
