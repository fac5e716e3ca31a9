"""Generation with a static cache: a compiled prefill and a compiled decode.

`compile_lm` wraps a causal LM in one `StaticCacheLM` (forge.frontend.static_cache) and
compiles two programs from that same instance through the full pipeline
(`compile_model`): prefill (the prompt right-padded to `prompt_capacity` tokens) and
decode (one token). Both executors bind the wrapper's tensors, so there is one copy of
the weights and one cache (keys and values of attention layers, conv inputs of
short-convolution layers, all indexed by position): the cache update each program makes
(`npu.writes`) lands in the shared buffers, where the other program reads it.

`CompiledLM.generate` runs the host loop: reset the cache, prefill, choose the next
token at the prompt's last position, then decode one token at a time at positions L,
L+1, ... until `max_new_tokens`, EOS, or the cache capacity. A prompt longer than
`prompt_capacity` (P) is prefilled in chunks continuing the same cache: chunk k covers
positions [kP, (k+1)P), the last one right-padded (and, if it would run past the cache,
moved back to end at the cache's last position: its overlap with the previous chunk
recomputes the same keys and values). Padded positions are overwritten by the decode
steps before any real token attends to them (the causal mask hides kv > pos).

Tokens are chosen greedily (argmax) by default; with a temperature they are sampled from
softmax(logits / temperature), restricted to the `top_k` largest logits, with a
`torch.Generator` seeded by `seed`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from forge.frontend.loading import max_positions
from forge.frontend.static_cache import StaticCacheLM, capture_programs
from forge.runtime.compile import CompileReport, compile_model
from forge.runtime.compile_cache import CompileCache
from forge.runtime.executor import CompiledNPUExecutor
from forge.runtime.threads import graph_threads
from forge.support.diagnostics import ForgeError
from forge.target.capabilities import PAGED_BLOCK


@dataclass
class Program:
    """One compiled program (prefill or decode) and how to feed it."""

    executor: CompiledNPUExecutor
    report: CompileReport
    input_names: list[str]

    def __call__(
        self, input_ids: torch.Tensor, cache_position: torch.Tensor, row: int = 0
    ) -> torch.Tensor:
        """The logits [1, rows, vocab]: of every position, or, for a program that takes
        `logits_at`, only of position `row` of the chunk (then one row)."""
        given = {"input_ids": input_ids, "cache_position": cache_position}
        if self.one_row:
            given["logits_at"] = torch.tensor([row])
        return self.executor(*(given[name] for name in self.input_names))[0]

    @property
    def one_row(self) -> bool:
        """Whether the program returns only the logits of the row it is asked for."""
        return "logits_at" in self.input_names

    def count_ops(self, name: str) -> int:
        """Ops called `name` in the planned function (on any device)."""
        return sum(1 for op in self.executor.function.walk() if op.name == name)


@dataclass
class GenerationStats:
    """Figures of the last `generate` call."""

    prompt_tokens: int = 0
    prefill_seconds: float = 0.0
    """All prefill chunks, choosing the first token included (time to first token)."""
    prefill_chunks: int = 0
    decode_seconds: list[float] = field(default_factory=list)
    """Per decode step (one token each)."""
    decode_bytes_moved: list[int] = field(default_factory=list)
    """Per decode step: bytes in and out of NNFactory segments (executor stats)."""
    prefill_bytes_moved: int = 0
    stop_reason: str = ""
    """"max_new_tokens", "eos" or "capacity"."""

    @property
    def tokens_per_second(self) -> float:
        total = sum(self.decode_seconds)
        return len(self.decode_seconds) / total if total else 0.0


class CompiledLM:
    """A causal LM compiled as a prefill and a decode program sharing one static cache."""

    def __init__(
        self,
        wrapper: StaticCacheLM,
        prefill: Program,
        decode: Program,
        capacity: int,
        prompt_capacity: int,
        precision: str,
    ):
        self.wrapper = wrapper
        self.prefill = prefill
        self.decode = decode
        self.capacity = capacity
        self.prompt_capacity = prompt_capacity
        self.precision = precision
        self.num_layers = wrapper.num_layers
        self.attention_layers = wrapper.attention_layers
        """Layers with a KV cache (the others, e.g. LFM2's convolutions, have none)."""
        self.stats = GenerationStats()
        self.notes: list[str] = []
        """Notes of the last `generate` call (why it stopped early, ...)."""
        self.step_logits: list[torch.Tensor] = []
        """With `keep_logits`: the logits each token was chosen from ([vocab] each)."""

    def reset(self) -> None:
        """Empty the cache (zero its buffers in place, where both programs read them)."""
        self.wrapper.reset_cache()

    @graph_threads()  # the host loop's torch ops on one thread, as the executors' own
    def generate(
        self,
        input_ids: torch.Tensor | Sequence[int],
        max_new_tokens: int,
        eos_token_id: int | Sequence[int] | None = None,
        keep_logits: bool = False,
        temperature: float | None = None,
        top_k: int | None = None,
        seed: int | None = None,
        on_token: Callable[[int], None] | None = None,
    ) -> list[int]:
        """The new tokens (an EOS token, when produced, included).

        Greedy by default; with `temperature`, sampled from softmax(logits /
        temperature) over the `top_k` largest logits (all without `top_k`) with a
        generator seeded by `seed` (the same seed gives the same tokens). A prompt longer
        than the prefill program is prefilled in chunks. Generation stops at
        `max_new_tokens`, after `eos_token_id` (one id or several), or when the cache is
        full (a note says so). `on_token` is called with each token as soon as it is chosen."""
        prompt = _prompt_ids(input_ids)
        length = len(prompt)
        check_prompt_length(length, self.capacity)
        if max_new_tokens < 0:
            raise ForgeError(f"max_new_tokens must be at least 0, got {max_new_tokens}")
        generator = sampler(temperature, top_k, seed)
        stops = _eos_set(eos_token_id)
        self.stats = GenerationStats(prompt_tokens=length)
        self.notes = []
        self.step_logits = []
        if max_new_tokens == 0:
            self.stats.stop_reason = "max_new_tokens"
            return []

        def choose(logits: torch.Tensor) -> int:
            if keep_logits:
                self.step_logits.append(logits.detach().clone())
            token = _choose(logits, temperature, top_k, generator)
            if on_token is not None:
                on_token(token)
            return token

        self.reset()
        start = time.perf_counter()
        bytes_moved = 0
        chunk_size = self.prompt_capacity
        chunks = -(-length // chunk_size)
        for k in range(chunks):
            # The last chunk ends at the cache's end at the latest (re-running positions
            # the previous chunk wrote, with the same tokens: same keys and values).
            begin = min(k * chunk_size, self.capacity - chunk_size)
            real = prompt[begin : min(begin + chunk_size, length)]
            ids = torch.zeros(1, chunk_size, dtype=torch.long)
            ids[0, : len(real)] = torch.tensor(real, dtype=torch.long)
            last = length - 1 - begin  # the prompt's last token (in the last chunk)
            row = min(max(last, 0), chunk_size - 1)
            logits = self.prefill(ids, torch.arange(begin, begin + chunk_size), row)
            bytes_moved += self.prefill.executor.stats.bytes_moved
        tokens = [choose(logits[0, 0 if self.prefill.one_row else last])]
        self.stats.prefill_seconds = time.perf_counter() - start
        self.stats.prefill_chunks = chunks
        self.stats.prefill_bytes_moved = bytes_moved

        # One token id and one position tensor for every step, written through NumPy
        # (0.2 us against 7-8 us for a new tensor; the executor reads them by value).
        token_ids = torch.zeros(1, 1, dtype=torch.long)
        cache_position = torch.zeros(1, dtype=torch.long)
        token_slot, position_slot = token_ids.numpy(), cache_position.numpy()
        while True:
            if len(tokens) >= max_new_tokens:
                self.stats.stop_reason = "max_new_tokens"
                break
            if tokens[-1] in stops:
                self.stats.stop_reason = "eos"
                break
            position = length + len(tokens) - 1
            if position >= self.capacity:
                self.stats.stop_reason = "capacity"
                self.notes.append(
                    f"stopped after {len(tokens)} of {max_new_tokens} new tokens: the cache "
                    f"holds {self.capacity} positions"
                )
                break
            start = time.perf_counter()
            token_slot[0, 0], position_slot[0] = tokens[-1], position
            logits = self.decode(token_ids, cache_position)
            self.stats.decode_seconds.append(time.perf_counter() - start)
            self.stats.decode_bytes_moved.append(self.decode.executor.stats.bytes_moved)
            tokens.append(choose(logits[0, -1]))
            del logits  # free again at the next step: the graph writes into the same memory
        return tokens


def _eos_set(eos_token_id: int | Sequence[int] | None) -> frozenset[int]:
    """The ids generation stops after (Llama 3's generation config lists several)."""
    if eos_token_id is None:
        return frozenset()
    if isinstance(eos_token_id, int):
        return frozenset({eos_token_id})
    return frozenset(int(t) for t in eos_token_id)


def check_prompt_length(length: int, capacity: int) -> None:
    """A prompt must be non-empty and leave the cache room for one generated token."""
    if length < 1:
        raise ForgeError("the prompt is empty")
    if length > capacity - 1:
        raise ForgeError(
            f"prompt of {length} tokens does not fit the cache of {capacity} positions "
            f"(at most {capacity - 1})"
        )


def sampler(
    temperature: float | None, top_k: int | None, seed: int | None
) -> torch.Generator | None:
    """The generator sampling draws from, or None for greedy decoding."""
    if temperature is None:
        if top_k is not None:
            raise ForgeError("top_k needs a temperature (greedy decoding ignores it)")
        return None
    if not temperature > 0:
        raise ForgeError(f"temperature must be positive, got {temperature}")
    if top_k is not None and top_k < 1:
        raise ForgeError(f"top_k must be at least 1, got {top_k}")
    generator = torch.Generator()
    if seed is None:
        generator.seed()
    else:
        generator.manual_seed(seed)
    return generator


def _choose(
    logits: torch.Tensor,
    temperature: float | None,
    top_k: int | None,
    generator: torch.Generator | None,
) -> int:
    if generator is None or temperature is None:
        return greedy(logits)
    scores = logits.detach().float() / temperature
    if top_k is not None and top_k < scores.numel():
        values, indices = torch.topk(scores, top_k)
    else:
        values, indices = scores, torch.arange(scores.numel())
    probabilities = torch.softmax(values, dim=-1)
    pick = torch.multinomial(probabilities, 1, generator=generator)
    return int(indices[pick].item())


def greedy(logits: torch.Tensor) -> int:
    """The index of the largest logit (the first of equal ones; a NaN counts as the
    largest, as in torch). NumPy's argmax: on one thread torch's takes 136 us for
    GPT-2's 50,257 logits on an AMD EPYC Zen 3, NumPy's 14 us, per generated token."""
    if logits.dtype in (torch.float32, torch.float64) and logits.dim() == 1:
        return int(logits.detach().numpy().argmax())
    return int(logits.argmax(-1).item())


def _prompt_ids(input_ids: torch.Tensor | Sequence[int]) -> list[int]:
    if isinstance(input_ids, torch.Tensor):
        if input_ids.dim() == 2:
            if input_ids.shape[0] != 1:
                raise ForgeError(
                    f"generation runs one sequence at a time, got a batch of {input_ids.shape[0]}"
                )
            input_ids = input_ids[0]
        if input_ids.dim() != 1:
            raise ForgeError(f"input_ids must be [1, L] or [L], got shape {list(input_ids.shape)}")
        prompt = [int(t) for t in input_ids.tolist()]
    else:
        prompt = [int(t) for t in input_ids]
    if not prompt:
        raise ForgeError("the prompt is empty")
    return prompt


def _program(
    wrapper: StaticCacheLM,
    kwargs: dict,
    precision: str,
    granularity: str,
    cache: bool | CompileCache | None = None,
    dynamic_quantized: bool | None = None,
    pipeline: Mapping[str, Any] | None = None,
) -> Program:
    executor, report = compile_model(
        wrapper,
        (),
        kwargs,
        precision=precision,
        granularity=granularity,
        cache=cache,
        dynamic_quantized=dynamic_quantized,
        pipeline=pipeline,
    )
    names = list(report.input_names)
    unexpected = [n for n in names if n not in ("input_ids", "cache_position", "logits_at")]
    if unexpected:
        raise ForgeError(
            f"the static-cache program has unexpected input(s): {', '.join(unexpected)}"
        )
    return Program(executor, report, names)


def whole_blocks(capacity: int, limit: int | None) -> int:
    """`capacity` rounded up to whole blocks of the paged cache (`PAGED_BLOCK` positions),
    where the model has that many positions: npu-fuse-cached-attention fuses a layer's
    cache writes and attention only over whole blocks, and the extra positions cost a
    few rows of cache (the causal mask hides them)."""
    if capacity < 1:
        return capacity  # capture_programs says what is wrong with it
    rounded = -(-capacity // PAGED_BLOCK) * PAGED_BLOCK
    return rounded if limit is None or rounded <= limit else capacity


def compile_lm(
    model: torch.nn.Module,
    capacity: int = 128,
    prompt_capacity: int = 32,
    precision: str = "fp32",
    granularity: str = "segment",
    cache: bool | CompileCache | None = None,
    dynamic_prefill: bool = False,
    dynamic_quantized: bool | None = None,
    pipeline: Mapping[str, Any] | None = None,
) -> CompiledLM:
    """Compile `model`'s prefill (`prompt_capacity` tokens) and decode (1 token) programs
    around one static cache of `capacity` positions, rounded up to whole blocks of 32
    where the model has the positions (`whole_blocks`; `CompiledLM.capacity` is the
    result), and `cache` the compile cache (one entry per program; off by default).

    `dynamic_quantized` (int8 only) is `compile_model`'s, for both programs: None (the
    default) quantizes the activations at run time where the host profile measured it
    faster for the program's row count, True everywhere, False nowhere (weight-only).
    `dynamic_prefill` forces it on for the prefill alone (a prompt's MatMuls are
    compute-bound, so the time to the first token halves on most hosts). `pipeline` are
    forge-pipeline's other options (`compile_model`'s), for both programs."""
    if dynamic_prefill and precision != "int8":
        raise ForgeError(f"dynamic_prefill needs precision 'int8', got '{precision}'")
    if dynamic_quantized and precision != "int8":
        raise ForgeError(f"dynamic_quantized needs precision 'int8', got '{precision}'")
    capacity = whole_blocks(capacity, max_positions(model))
    programs = capture_programs(model, capacity, prompt_capacity)
    wrapper = programs.wrapper
    # The decode step first: where its weights are converted (fp16 kept fp16, int8) and
    # the prompt's are not (fp16 run as the fp32 weights), the converted copies leave
    # the resident set once its graphs compile (`_spill_copies`), before the prompt's
    # graphs pack the fp32 weights. Llama-3.2-1B at fp16 peaked at 14.2 GB the other
    # way round: the model, the fp16 copy, OpenVINO's fp16 and fp32 packings at once.
    decode = _program(
        wrapper, programs.decode_kwargs, precision, granularity, cache, dynamic_quantized, pipeline
    )
    prefill = _program(
        wrapper,
        programs.prefill_kwargs,
        precision,
        granularity,
        cache,
        True if dynamic_prefill else dynamic_quantized,
        pipeline,
    )
    return CompiledLM(wrapper, prefill, decode, capacity, prompt_capacity, precision)
