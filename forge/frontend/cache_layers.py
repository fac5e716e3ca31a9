"""The static cache of a causal LM, one layer kind at a time, as exportable state.

transformers' `StaticCache` picks a layer class per layer type. Two kinds have state that
two fixed-shape programs (a right-padded prefill and a one-token decode) can share:

* attention (`StaticLayer`, as `PositionedLayer`): keys and values at every cache
  position, written with `index_copy_` at the step's positions. Sliding-window layers
  become plain ones (the mask still applies the window; the cache is merely longer than
  needed) and KV-sharing consumers an empty `ConsumerLayer`, as transformers' own export
  wrapper does. Every other layer must be written by the model's own step
  (`unwritten_layers`): one that is not (a model whose forward takes no cache, as
  transformers' OpenAI GPT) would decode from the step's token alone.
* short convolution (`LinearAttentionLayer` with conv states only, e.g. LFM2): transformers
  keeps the last `L - 1` conv inputs, which after a right-padded prefill would be the
  padding, not the prompt's last tokens. `ConvHistoryLayer` instead keeps the conv input at
  every cache position (plus `L - 1` zero columns before position 0), written with
  `index_copy_` like keys and values, and hands the convolution the window of the `L - 1`
  positions before the step and the step itself. So it has the KV cache's semantics:
  padded positions are overwritten by the decode steps before anything reads them, and a
  chunk re-run over positions already written reads and writes the same values.

Other kinds (recurrent SSM or linear-attention states, hybrid or indexed layers) have no
position-indexed form here and are refused with a ForgeError.

This module imports transformers at the top: import it when a wrapper is built.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers.cache_utils import (
    DummyLayer,
    LinearAttentionLayer,
    StaticCache,
    StaticLayer,
    StaticSlidingWindowLayer,
)

from forge.support.diagnostics import ForgeError


class ConvHistoryLayer(LinearAttentionLayer):
    """A short-convolution layer's state as its input at every cache position.

    `history` is [batch, channels, kernel - 1 + capacity]: column `kernel - 1 + p` holds
    position p's conv input, the first `kernel - 1` columns stay zero (the causal
    padding before position 0). It is allocated on the first (eager) call; the wrapper
    then registers it as a buffer and sets `positions` before every call.

    `has_previous_state` is never set, so the model takes its multi-token path for every
    step: `update_conv_state` returns the window, `causal_conv1d_fn` convolves it and the
    model keeps the step's last `seq_len` outputs."""

    def __init__(self, capacity: int):
        super().__init__(number_of_states=1)
        self.capacity = capacity
        self.kernel = 0
        self.history: torch.Tensor | None = None
        self.positions: torch.Tensor | None = None

    def update_conv_state(
        self,
        conv_states: torch.Tensor,
        state_idx: int = 0,
        conv_kernel_size: int | None = None,
        **kwargs: Any,
    ) -> torch.Tensor:
        if state_idx != 0 or conv_kernel_size is None:
            raise ForgeError(
                "static generation supports one conv state per layer with an explicit "
                "kernel size (as LFM2 has)"
            )
        if self.positions is None:
            raise ForgeError("the conv cache layer was called without cache positions")
        if self.history is None:
            self.kernel = conv_kernel_size
            batch, channels = conv_states.shape[:2]
            width = self.kernel - 1 + self.capacity
            self.history = torch.zeros(
                batch, channels, width, dtype=conv_states.dtype, device=conv_states.device
            )
        before = self.kernel - 1
        self.history.index_copy_(2, self.positions + before, conv_states)
        window = self.positions[0] + torch.arange(
            conv_states.shape[-1] + before, device=conv_states.device
        )
        return self.history.index_select(2, window)

    def get_seq_length(self) -> torch.Tensor:
        """The step's first position. transformers >= 5.25 asks the first layer for the
        cache length (earlier releases skipped linear-attention layers for the first
        attention one); LFM2's first layer is a convolution, whose own counter
        (`cumulative_length_linear`) this layer never advances."""
        if self.positions is None:
            raise ForgeError("the conv cache layer was asked its length without cache positions")
        return self.positions[0]

    def update_recurrent_state(
        self, recurrent_states: torch.Tensor, state_idx: int = 0, **kwargs: Any
    ) -> torch.Tensor:
        raise ForgeError(
            "static generation does not support recurrent (SSM / linear-attention) states"
        )


def static_cache(config: Any, capacity: int) -> StaticCache:
    """transformers' `StaticCache` for `config`, every layer replaced by its exportable
    kind (see the module docstring); a layer kind without one raises ForgeError."""
    cache = StaticCache(max_cache_len=capacity, config=config)
    for i, layer in enumerate(cache.layers):
        cache.layers[i] = _exportable(layer, capacity, i)
    return cache


class PositionedLayer(StaticLayer):
    """transformers' `StaticLayer`, writing at the positions the wrapper hands it.

    `StaticLayer.update` derives its positions from its own `cumulative_length` and
    then adds the step's length to it, so every layer carries one more piece of state,
    set and advanced in each program. The wrapper instead points every layer's
    `cumulative_length` at one shared tensor (the step's first position, which the
    model reads for its position ids and mask) and sets `positions` before every call;
    `update` writes there and advances nothing. Every layer's state is then its keys
    and values alone, which is what lets torch.export trace three layers of a program
    and stamp the others (forge.frontend.stamping)."""

    def __init__(self, capacity: int):
        super().__init__(capacity)
        self.positions: torch.Tensor | None = None

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        if self.positions is None:
            raise ForgeError("the attention cache layer was called without cache positions")
        self.keys.index_copy_(2, self.positions, key_states)
        self.values.index_copy_(2, self.positions, value_states)
        return self.keys, self.values


class ConsumerLayer(PositionedLayer):
    """A layer the config keeps no keys and values for (transformers' `DummyLayer`): a
    KV-sharing consumer, which reads another layer's cache, or a layer without attention.
    The model's step may leave it unwritten; it is allocated empty."""

    def __init__(self) -> None:
        super().__init__(0)


def unwritten_layers(layers: list[Any]) -> list[int]:
    """The layers a model's step at position 0 left without state: neither written (an
    attention layer's keys and values, a conv layer's history) nor a `ConsumerLayer`."""
    return [
        i
        for i, layer in enumerate(layers)
        if not isinstance(layer, ConsumerLayer)
        and not (
            layer.history is not None
            if isinstance(layer, ConvHistoryLayer)
            else layer.is_initialized
        )
    ]


def _exportable(layer: Any, capacity: int, index: int) -> Any:
    kind = type(layer)
    if kind in (StaticLayer, StaticSlidingWindowLayer):
        return PositionedLayer(capacity)
    if kind is DummyLayer:
        return ConsumerLayer()
    if kind is LinearAttentionLayer:
        return ConvHistoryLayer(capacity)
    raise ForgeError(
        f"static generation does not support cache layer {index} of kind {kind.__name__}"
    )
