"""A causal LM with a static cache, as two exportable programs: prefill and decode.

`StaticCacheLM` wraps a causal LM with transformers' `StaticCache`, every layer's state a
registered buffer of the wrapper, and a forward `(input_ids, cache_position) -> logits`
(the recipe of transformers' `TorchExportableModuleWithStaticCache`, which handles
attention layers only). The layer kinds (forge.frontend.cache_layers): attention layers
keep keys and values at every position; short-convolution layers (LFM2) keep their conv
input at every position. Every state update is a buffer mutation: `capture`
functionalizes it, the importer lists the buffers in `npu.writes` and the executor writes
their new values into them (in place for an `index_copy_` the pipeline turns into
`npu.cache_update`, by a copy after the call otherwise). Two programs compiled from the
SAME wrapper instance therefore share one cache (and one set of weights):

* prefill: `input_ids` [1, prompt_capacity] (the prompt, right-padded with zeros),
  `cache_position` = arange(prompt_capacity); the next token is read at the prompt's
  last real position;
* decode: `input_ids` [1, 1], `cache_position` = [position].

No attention mask or position ids are needed: positions are the cache positions, and
the padded rows of the prefill are overwritten by the decode steps before any real
token attends to (or convolves) them (each step writes its row at `position` before
reading rows up to `position`). Sliding windows come with transformers' masks, but for
GPT-Neo's local layers, which take theirs from their own `bias` rows at the end of the
keys (`LocalWindows`).
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch

from forge.frontend.loading import max_positions
from forge.frontend.unsupported import model_code, unsupported_construct
from forge.support.diagnostics import ForgeError


class LocalWindows:
    """GPT-Neo's local attention layers and their window over a static cache.

    Such a layer hides the keys outside its window with rows of its boolean `bias`
    buffer, the last `query_length` of the first `key_length` ones: the rows of the
    step's positions when the keys end at the step (a dynamic cache), but over a static
    cache of C positions always the rows of positions C - query_length ... C - 1, whose
    windows lie past every real position. For the length of a step the wrapper shadows
    each such layer's `bias` with rows whose last ones are the step's windows (a
    tensor computed from the step's positions, so both programs capture it); the
    model's buffer is not touched."""

    def __init__(self, model: torch.nn.Module):
        window = getattr(model.config, "window_size", None)
        self.window = window if isinstance(window, int) and window > 0 else 0
        self.layers = [
            module
            for module in model.modules()
            if getattr(module, "attention_type", None) == "local"
            and isinstance(getattr(module, "bias", None), torch.Tensor)
        ]
        if self.layers and not self.window:
            raise ForgeError(
                f"{type(model).__name__} has local attention layers but no positive "
                f"`window_size` in its config (got {window!r})"
            )

    def rows(self, positions: torch.Tensor, capacity: int) -> torch.Tensor:
        """[1, 1, capacity, capacity]: the last rows are each position's window (the
        keys at most `window - 1` positions before it), the others hide every key."""
        behind = positions[:, None] - torch.arange(capacity, device=positions.device)
        seen = (behind >= 0) & (behind < self.window)
        earlier = seen.new_zeros(capacity - positions.shape[0], capacity)
        return torch.cat([earlier, seen])[None, None]

    @contextlib.contextmanager
    def applied(self, positions: torch.Tensor, capacity: int) -> Iterator[None]:
        """Every local layer sees the step's window rows as its `bias` (an instance
        attribute, found before the module's buffers) for the length of the block."""
        if not self.layers:
            yield
            return
        rows = self.rows(positions, capacity)
        for layer in self.layers:
            layer.__dict__["bias"] = rows
        try:
            yield
        finally:
            for layer in self.layers:
                layer.__dict__.pop("bias", None)


class StaticCacheLM(torch.nn.Module):
    """A causal LM and its static cache, the cache's state as buffers that non-strict
    `torch.export` captures as mutable buffers.

    Non-strict export replaces module attributes (parameters, buffers) by traced
    tensors, but the cache layers keep references to the original tensors; export would
    lift those as *constants*, so the cache mutation would not be a buffer mutation and
    `run_decompositions` fails. Before every call we therefore re-point each cache
    layer's tensors at the wrapper's own (possibly traced) buffers.
    """

    layer_stamping = True
    """torch.export traces three layers of each program and the others are stamped
    from the third (forge.frontend.stamping); `layer_state` names what each writes."""

    cache_key_rebound = ("static_cache",)
    """forward points every tensor of the cache object at the wrapper's buffers or the
    step's inputs before the model reads it, so the compile cache keys the object's own
    tensors by shape and dtype, not by value (forge.runtime.cache_trust)."""

    writes_only_buffers = True
    """Its state changes are the caches' `index_copy_` and the length's `copy_`, in-place
    writes of whole buffers that capture makes functional in the graph
    (forge.frontend.functionalize) instead of retracing the program."""

    def __init__(self, model: torch.nn.Module, capacity: int):
        super().__init__()
        # Imported here: transformers takes seconds to import.
        from forge.frontend.cache_layers import ConvHistoryLayer, static_cache

        self.model = model
        self.capacity = capacity
        self.local_windows = LocalWindows(model)
        config = model.config.get_text_config()
        self.static_cache = static_cache(config, capacity)
        layers = self.static_cache.layers
        self.num_layers = len(layers)
        self.cache_stack: torch.Tensor | None = None
        """The tensor all keys and values are slices of (None when they are apart)."""
        self.conv = [i for i, layer in enumerate(layers) if isinstance(layer, ConvHistoryLayer)]
        self.attention = [i for i in range(self.num_layers) if i not in self.conv]
        self.attention_layers = len(self.attention)
        """Layers with keys and values (each one `npu.sdpa` in a compiled program)."""
        self._bindings = [
            (i, attribute, f"{name}_{i}")
            for i in self.attention
            for attribute, name in (("keys", "key_cache"), ("values", "value_cache"))
        ] + [(i, "history", f"conv_state_{i}") for i in self.conv]
        """(layer, its state attribute, the wrapper's buffer) for every layer's state."""
        self._initialize(config)
        for i, attribute, name in self._bindings:
            self.register_buffer(name, getattr(layers[i], attribute), persistent=False)
        self.register_buffer("cache_length", torch.zeros((), dtype=torch.long), persistent=False)
        """The step's first position, which every attention layer reports as its
        `cumulative_length` (the model derives its position ids and mask from it)."""

    def _initialize(self, config: Any) -> None:
        """Allocate every layer's state by one eager step at position 0 (the layers take
        their shapes from the tensors the model hands them, not from the config), then
        zero it. KV-sharing consumers, which the step does not write, are allocated from
        the config, as transformers' export recipe does; any other layer the step leaves
        unwritten is refused (`_check_written`)."""
        layers = self.static_cache.layers
        parameter = next(self.model.parameters())
        position = torch.zeros(1, dtype=torch.long, device=parameter.device)
        with torch.no_grad():
            self._step(position.view(1, 1), position)
        if len(layers) != self.num_layers:
            raise unsupported_construct(
                self.model,
                f"its forward adds {len(layers) - self.num_layers} layer(s) to the cache it "
                "is handed (looped layers); the static cache's layers are fixed",
            )
        self._check_written()
        if any(not layers[i].is_initialized for i in self.attention):
            from transformers.configuration_utils import get_head_shapes

            num_heads, head_dim = get_head_shapes(config)
            self.static_cache.early_initialization(
                1, num_heads, head_dim, parameter.dtype, parameter.device
            )
        with torch.no_grad():
            for i, attribute, _ in self._bindings:
                getattr(layers[i], attribute).zero_()
        self._stack_caches()

    def _check_written(self) -> None:
        """Refuse a model whose step leaves a cache layer it does not share unwritten: its
        decode step would see the step's token alone (OpenAI GPT's forward takes no
        cache, so every decode step would attend to one token at position 0)."""
        from forge.frontend.cache_layers import ConsumerLayer, unwritten_layers

        layers = self.static_cache.layers
        unwritten = unwritten_layers(layers)
        if not unwritten:
            return
        name = type(self.model).__name__
        own = [layer for layer in layers if not isinstance(layer, ConsumerLayer)]
        if len(unwritten) == len(own):
            raise ForgeError(
                f"{name} wrote none of its {len(own)} cache layers in an eager step "
                f"(its forward ignores the cache it is handed): static generation needs a "
                f"model that keeps its keys and values"
            )
        listed = ", ".join(map(str, unwritten))
        raise ForgeError(
            f"{name}'s layer(s) {listed} neither write nor share a cache layer in an eager "
            f"step: static generation would decode them without context"
        )

    def _stack_caches(self) -> None:
        """Put every attention layer's keys and values in one tensor, each a slice of it,
        when they share a shape and dtype. A decode step writes one row into each of the
        2 x layers caches; in one tensor those rows are one strided copy
        (`cache_updates_kernel`), which after the graph has streamed the weights through
        the CPU's caches costs less than 2 x layers copies of their own."""
        layers = self.static_cache.layers
        caches = [
            (layers[i], attribute, getattr(layers[i], attribute))
            for i, attribute, _ in self._bindings
            if attribute in ("keys", "values")
        ]
        if len(caches) < 2:
            return
        first = caches[0][2]
        if first.dim() == 0 or first.shape[0] != 1:
            return
        if any(t.shape != first.shape or t.dtype != first.dtype for _, _, t in caches):
            return
        stack = torch.zeros((len(caches), *first.shape[1:]), dtype=first.dtype, device=first.device)
        for k, (layer, attribute, _) in enumerate(caches):
            setattr(layer, attribute, stack[k : k + 1])
        self.cache_stack = stack

    def cache_buffers(self) -> list[torch.Tensor]:
        """The cache state: every attention layer's keys and values, every conv layer's
        input history, and the shared cache length."""
        return [getattr(self, name) for _, _, name in self._bindings] + [self.cache_length]

    def layer_state(self, index: int) -> tuple[str, ...]:
        """The buffers layer `index` of the stack writes (forge.frontend.stamping maps
        them from layer to layer)."""
        return tuple(name for i, _, name in self._bindings if i == index)

    def reset_cache(self) -> None:
        """Zero the cache in place (the compiled programs hold these tensors)."""
        stack = self.cache_stack
        with torch.no_grad():
            if stack is not None:
                stack.zero_()
            for buffer in self.cache_buffers():
                if stack is None or buffer._base is not stack:
                    buffer.zero_()

    def forward(
        self,
        input_ids: torch.Tensor,
        cache_position: torch.Tensor,
        logits_at: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Logits of every position, or with `logits_at` (1-D indices into the chunk)
        only of those: a prefill needs one row, and the vocabulary head on every padded
        row of the prompt would dominate the time to first token."""
        layers = self.static_cache.layers
        for i, attribute, name in self._bindings:
            setattr(layers[i], attribute, getattr(self, name))
        for i in self.attention:
            layers[i].cumulative_length = self.cache_length
        return self._step(input_ids, cache_position, logits_at)

    @property
    def keeps_logits(self) -> bool:
        """Whether the model's forward takes `logits_to_keep` (transformers' causal LMs)."""
        return "logits_to_keep" in inspect.signature(self.model.forward).parameters

    def _step(
        self,
        input_ids: torch.Tensor,
        cache_position: torch.Tensor,
        logits_at: torch.Tensor | None = None,
    ) -> torch.Tensor:
        layers = self.static_cache.layers
        # The model derives its position ids and mask from the cache length (the first
        # layer's `cumulative_length`): the step's first position, as transformers'
        # export wrapper sets it; the layers write at the step's positions.
        if self.attention:
            layers[self.attention[0]].cumulative_length.copy_(cache_position[0])
        for i in self.attention:
            layers[i].positions = cache_position
        for i in self.conv:
            layers[i].positions = cache_position
        keep = {} if logits_at is None else {"logits_to_keep": logits_at}
        with self.local_windows.applied(cache_position, self.capacity):
            out = self.model(
                input_ids=input_ids,
                attention_mask=None,
                cache=self.static_cache,
                use_cache=True,
                **keep,
            )
        return out.logits


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
    with model_code(model, "an eager step on the static cache"):
        wrapper = StaticCacheLM(model, capacity).eval()
    prefill = {
        "input_ids": torch.zeros(1, prompt_capacity, dtype=torch.long),
        "cache_position": torch.arange(prompt_capacity),
    }
    if wrapper.keeps_logits:  # one row of logits, at the prompt's last real token
        prefill["logits_at"] = torch.tensor([prompt_capacity - 1])
    decode = {
        "input_ids": torch.zeros(1, 1, dtype=torch.long),
        "cache_position": torch.tensor([min(prompt_capacity, capacity - 1)]),
    }
    return StaticCachePrograms(wrapper, prefill, decode, capacity, prompt_capacity)
