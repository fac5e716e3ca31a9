"""A causal LM with a static KV cache, as two exportable programs: prefill and decode.

transformers' `TorchExportableModuleWithStaticCache` wraps a causal LM with a
`StaticCache` whose key/value tensors are registered buffers of the wrapper, and whose
forward is `(input_ids, cache_position) -> logits`. The cache update is a buffer
mutation: `capture` functionalizes it, the importer lists the buffers in `npu.writes`
and the executor copies their new values back after each call. Two programs compiled
from the SAME wrapper instance therefore share one cache (and one set of weights):

* prefill: `input_ids` [1, prompt_capacity] (the prompt, right-padded with zeros),
  `cache_position` = arange(prompt_capacity); the next token is read at the prompt's
  last real position;
* decode: `input_ids` [1, 1], `cache_position` = [position].

No attention mask or position ids are needed: positions are the cache positions, and
the padded rows of the prefill are overwritten by the decode steps before any real
token attends to them (each step writes its row at `position` before attending to
rows `0..position`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from forge.diagnostics import ForgeError
from forge.frontend.loading import max_positions


def _base_wrapper() -> type[torch.nn.Module]:
    from transformers.integrations.executorch import TorchExportableModuleWithStaticCache

    return TorchExportableModuleWithStaticCache


class StaticCacheLM(torch.nn.Module):
    """`TorchExportableModuleWithStaticCache` that non-strict `torch.export` captures
    with its cache as mutable buffers.

    Non-strict export replaces module attributes (parameters, buffers) by traced
    tensors, but the `StaticCache` object keeps references to the original tensors;
    export would lift those as *constants*, so the cache mutation would not be a
    buffer mutation and `run_decompositions` fails. Before every call we therefore
    re-point each cache layer's `keys`, `values` and `cumulative_length` at the
    wrapper's own (possibly traced) buffers.
    """

    def __init__(self, model: torch.nn.Module, capacity: int):
        super().__init__()
        base = _base_wrapper()
        generation = model.generation_config
        saved = (generation.use_cache, generation.cache_implementation)
        # The transformers wrapper insists on a static-cache generation config; set it
        # for construction only, so the model's own `generate` is unchanged.
        generation.use_cache, generation.cache_implementation = True, "static"
        try:
            inner = base(model, batch_size=1, max_cache_len=capacity)
        finally:
            generation.use_cache, generation.cache_implementation = saved
        # Adopt the wrapper's submodules and buffers (not a subclass instance, so the
        # model's generation config is restored before anything reads it again).
        self.model = inner.model
        self.static_cache = inner.static_cache
        self.capacity = capacity
        self.num_layers = len(self.static_cache.layers)
        for name, buffer in inner.named_buffers(recurse=False):
            self.register_buffer(name, buffer, persistent=False)
        self._forward = base.forward

    def cache_buffers(self) -> list[torch.Tensor]:
        """The cache state: every layer's keys, values and cumulative length."""
        return [
            getattr(self, f"{kind}_{i}")
            for i in range(self.num_layers)
            for kind in ("key_cache", "value_cache", "cumulative_length")
        ]

    def reset_cache(self) -> None:
        """Zero the cache in place (the compiled programs hold these tensors)."""
        with torch.no_grad():
            for buffer in self.cache_buffers():
                buffer.zero_()

    def forward(self, input_ids: torch.Tensor, cache_position: torch.Tensor) -> torch.Tensor:
        for i, layer in enumerate(self.static_cache.layers):
            layer.keys = getattr(self, f"key_cache_{i}")
            layer.values = getattr(self, f"value_cache_{i}")
            layer.cumulative_length = getattr(self, f"cumulative_length_{i}")
        return self._forward(self, input_ids=input_ids, cache_position=cache_position)


@dataclass
class StaticCachePrograms:
    wrapper: StaticCacheLM
    prefill_kwargs: dict[str, Any]
    """Example kwargs of the prefill program (input_ids [1, prompt_capacity])."""
    decode_kwargs: dict[str, Any]
    """Example kwargs of the decode program (input_ids [1, 1])."""
    capacity: int
    prompt_capacity: int


def check_causal_lm(model: Any) -> None:
    config = getattr(model, "config", None)
    if (
        not isinstance(model, torch.nn.Module)
        or config is None
        or getattr(model, "generation_config", None) is None
        or not hasattr(model, "get_output_embeddings")
        or model.get_output_embeddings() is None
    ):
        raise ForgeError(
            f"generation needs a transformers causal LM (with an LM head and a "
            f"generation config), got {type(model).__name__}"
        )


def capture_programs(
    model: torch.nn.Module, capacity: int, prompt_capacity: int
) -> StaticCachePrograms:
    """One `StaticCacheLM` around `model` (cache of `capacity` positions) and example
    kwargs for its prefill (`prompt_capacity` tokens) and decode (1 token) programs."""
    check_causal_lm(model)
    if prompt_capacity < 1:
        raise ForgeError(f"prompt capacity must be at least 1, got {prompt_capacity}")
    if capacity < prompt_capacity:
        raise ForgeError(
            f"cache capacity {capacity} is smaller than the prompt capacity {prompt_capacity}"
        )
    limit = max_positions(model)
    if limit is not None and capacity > limit:
        raise ForgeError(f"cache capacity {capacity} exceeds the model's {limit} positions")
    wrapper = StaticCacheLM(model, capacity).eval()
    prefill = {
        "input_ids": torch.zeros(1, prompt_capacity, dtype=torch.long),
        "cache_position": torch.arange(prompt_capacity),
    }
    decode = {
        "input_ids": torch.zeros(1, 1, dtype=torch.long),
        "cache_position": torch.tensor([min(prompt_capacity, capacity - 1)]),
    }
    return StaticCachePrograms(wrapper, prefill, decode, capacity, prompt_capacity)
