"""`forge generate`: compile a causal LM's prefill and decode, generate and time it."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from forge.commands.compile import weight_only_option
from forge.dialects.precisions import PROGRAM_PRECISIONS
from forge.frontend.checkpoint import add_loading_flags, loading_options
from forge.support import flags
from forge.support.diagnostics import ForgeError


def add_parser(sub: Any) -> None:
    parser = sub.add_parser(
        "generate", help="compile prefill + decode with a static KV cache, generate, time it"
    )
    parser.add_argument(
        "model",
        help="built-in name, Hugging Face checkpoint directory or path/to/file.py:factory "
        "(a causal LM)",
    )
    parser.add_argument("--tiny", action="store_true", help="the tiny variant of a built-in")
    add_loading_flags(parser)
    prompt = parser.add_mutually_exclusive_group()
    prompt.add_argument("--prompt", help="prompt text (needs a checkpoint with a tokenizer)")
    prompt.add_argument("--prompt-ids", help="comma-separated prompt token ids, e.g. 1,2,3")
    prompt.add_argument(
        "--prompt-len", type=flags.size, help="random prompt of N ids, seeded by --seed (default 8)"
    )
    parser.add_argument("--max-new-tokens", type=flags.count, default=16)
    parser.add_argument("--capacity", type=flags.count, default=128, help="cache positions")
    parser.add_argument(
        "--prompt-capacity", type=flags.count, default=32, help="tokens per prefill (chunk)"
    )
    parser.add_argument("--precision", default="fp32", choices=PROGRAM_PRECISIONS)
    parser.add_argument(
        "--dynamic-prefill",
        action="store_true",
        help="with --precision int8: quantize the prefill's activations at run time too "
        "(faster first token; the decode stays weight-only)",
    )
    parser.add_argument(
        "--weight-only",
        action="store_true",
        help="with --precision int8: keep the activations fp32 everywhere (default: "
        "quantized at run time where the host profile measured that faster)",
    )
    parser.add_argument("--greedy", action="store_true", help="argmax decoding (the default)")
    parser.add_argument(
        "--temperature", type=flags.positive_real, help="sample at this temperature"
    )
    parser.add_argument("--top-k", type=flags.count, help="sample among the K largest logits")
    parser.add_argument(
        "--seed", type=flags.seed, default=0, help="random prompt and sampling seed"
    )
    parser.add_argument(
        "--no-cache",
        action="store_true",
        help="compile both programs from scratch and store nothing (default: the compile cache)",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="compare with eager model.generate(do_sample=False); exit 1 if greedy differs",
    )


class TextStream:
    """Writes the text of generated tokens as they come: the new suffix of decoding all of
    them, so tokens that only read right together (a character split over byte tokens, a
    word piece that changes the spacing) are written right."""

    def __init__(self, tokenizer: Any, write: Callable[[str], None]):
        self.tokenizer = tokenizer
        self.write = write
        self.tokens: list[int] = []
        self.written = ""

    def add(self, token: int) -> None:
        self.tokens.append(token)
        text = self.text()
        if text.endswith("\ufffd"):
            return  # an incomplete UTF-8 character: its remaining bytes are still to come
        self._write(text)

    def finish(self) -> None:
        """Write what was held back (an incomplete character at the end)."""
        self._write(self.text())

    def text(self) -> str:
        return self.tokenizer.decode(self.tokens, skip_special_tokens=True)

    def _write(self, text: str) -> None:
        if len(text) > len(self.written):
            self.write(text[len(self.written) :])
        self.written = text


def _prompt_ids(ns: argparse.Namespace, vocab: int, tokenizer: Any | None) -> list[int]:
    import torch

    from forge.runtime.generate import check_prompt_length

    if ns.prompt is not None:
        return list(tokenizer(ns.prompt)["input_ids"])
    if ns.prompt_ids is not None:
        try:
            return [int(t) for t in ns.prompt_ids.split(",") if t.strip()]
        except ValueError as e:
            raise ForgeError(f"--prompt-ids must be comma-separated integers: {e}") from e
    length = 8 if ns.prompt_len is None else ns.prompt_len
    check_prompt_length(length, ns.capacity)  # before drawing that many ids
    generator = torch.Generator().manual_seed(ns.seed)
    return torch.randint(0, vocab, (length,), generator=generator).tolist()


def _mib(nbytes: int) -> str:
    return f"{nbytes / 2**20:.1f} MiB" if nbytes >= 2**20 else f"{nbytes / 2**10:.1f} KiB"


def _eos_token_id(model: Any, tokenizer: Any | None) -> int | list[int] | None:
    """The generation config's EOS id or ids (what eager `generate` stops at), else the
    tokenizer's."""
    eos = model.generation_config.eos_token_id
    if isinstance(eos, int) or (isinstance(eos, list) and eos):
        return eos
    if eos is None and tokenizer is not None and isinstance(tokenizer.eos_token_id, int):
        return tokenizer.eos_token_id
    return None


def run(ns: argparse.Namespace) -> int:
    # Imported when the command runs, not at `forge` start-up (torch and xDSL take seconds).
    import resource
    import warnings

    import torch

    from forge.devtools.bench import summarize
    from forge.frontend.loading import load_model, tokenizer_of
    from forge.frontend.static_cache import check_causal_lm
    from forge.runtime.generate import check_prompt_length, compile_lm, sampler
    from forge.runtime.input_contract import check_token_ids

    if ns.greedy and ns.temperature is not None:
        raise ForgeError("--greedy and --temperature exclude each other")
    if ns.max_new_tokens < 1:
        raise ForgeError(f"--max-new-tokens must be at least 1, got {ns.max_new_tokens}")
    sampler(ns.temperature, ns.top_k, ns.seed)  # checks the sampling options
    greedy = ns.temperature is None

    print(f"loading {ns.model}{' (tiny)' if ns.tiny else ''} ...", flush=True)
    tokenizer = tokenizer_of(ns.model, ns.trust_remote_code)
    if ns.prompt is not None and tokenizer is None:
        raise ForgeError(
            f"--prompt needs a tokenizer and {ns.model} has none (only a checkpoint directory "
            "with tokenizer files has one); use --prompt-ids or --prompt-len"
        )
    model = load_model(ns.model, ns.tiny, 1, **loading_options(ns)).model
    check_causal_lm(model)
    if any(p.is_meta for p in model.parameters()):
        raise ForgeError(f"{ns.model}: built on the meta device (too large here); no generation")
    vocab = int(model.config.vocab_size)
    prompt = _prompt_ids(ns, vocab, tokenizer)
    check_prompt_length(len(prompt), ns.capacity)
    check_token_ids(prompt, vocab, "prompt id")

    print(
        f"compiling prefill ({ns.prompt_capacity} tokens) and decode (1 token), cache of "
        f"{ns.capacity} positions, {ns.precision} ...",
        flush=True,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lm = compile_lm(
            model,
            capacity=ns.capacity,
            prompt_capacity=ns.prompt_capacity,
            precision=ns.precision,
            cache=not ns.no_cache,
            dynamic_prefill=ns.dynamic_prefill,
            dynamic_quantized=weight_only_option(ns),
        )
    for name, program in (("prefill", lm.prefill), ("decode", lm.decode)):
        rep = program.report
        cached = "" if rep.cache == "off" else f", compile cache {rep.cache} {rep.cache_entry[:12]}"
        cached += " (nothing stored)" if rep.cache == "miss" and not rep.cache_stored else ""
        print(
            f"compile {name}: {rep.total_seconds:.2f} s ({rep.segments} NNFactory segment(s), "
            f"{rep.fallback_ops} fallback op(s){cached})"
        )
    paged = lm.prefill.count_ops("npu.cached_attention")
    rounded = f" ({ns.capacity} rounded up to whole blocks)" if lm.capacity != ns.capacity else ""
    print(
        f"cache: {lm.capacity} positions{rounded}; {paged} of {lm.attention_layers} attention "
        "layer(s) write and attend in one paged-attention node"
    )
    mode = "greedy" if greedy else f"temperature {ns.temperature}, top-k {ns.top_k}, seed {ns.seed}"
    print(f"prompt: {len(prompt)} tokens; {mode}")

    def write(text: str) -> None:
        print(text, end="", flush=True)

    stream = None if tokenizer is None else TextStream(tokenizer, write)

    def show(token: int) -> None:
        if stream is None:
            write(f" {token}")
        else:
            stream.add(token)

    write("tokens:" if stream is None else "text: ")
    eos = _eos_token_id(model, tokenizer)
    tokens = lm.generate(
        prompt,
        ns.max_new_tokens,
        eos_token_id=eos,
        temperature=ns.temperature,
        top_k=ns.top_k,
        seed=ns.seed,
        on_token=show,
    )
    if stream is not None:
        stream.finish()
        print(f"\ntokens: {' '.join(map(str, tokens))}", end="")
    print(flush=True)
    stats = lm.stats
    print(f"stopped: {stats.stop_reason}; prefill chunk(s): {stats.prefill_chunks}")
    for note in lm.notes:
        print(f"note: {note}")
    print(f"time to first token: {stats.prefill_seconds * 1e3:.2f} ms")
    if stats.decode_seconds:
        figures = summarize([s * 1e3 for s in stats.decode_seconds])
        per_step = sum(stats.decode_bytes_moved) / len(stats.decode_bytes_moved)
        print(
            f"decode latency per token: mean {figures['mean']:.2f} ms, "
            f"P50 {figures['p50']:.2f} ms, P99 {figures['p99']:.2f} ms "
            f"({len(stats.decode_seconds)} steps)"
        )
        print(f"decode: {stats.tokens_per_second:.1f} tokens/s")
        last = lm.decode.executor.stats  # the last decode step
        print(
            f"bytes in/out of NNFactory per decode step: {per_step / 1024:.1f} KiB (the cache "
            f"read by attention: {last.state_bytes_in / 1024:.1f} KiB); written back after "
            f"the step: {last.bytes_written_back} B"
        )
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    weights = sum(t.nbytes for t in model.parameters())
    cache = sum(t.nbytes for t in lm.wrapper.cache_buffers())
    print(f"peak RSS: {peak:.1f} MiB (weights {_mib(weights)}, cache {_mib(cache)})", flush=True)

    if not ns.check:
        return 0
    ids = torch.tensor([prompt])
    with torch.no_grad():
        out = model.generate(
            ids,
            attention_mask=torch.ones_like(ids),
            do_sample=False,
            max_new_tokens=len(tokens),
            pad_token_id=0,
            eos_token_id=eos,
        )
    eager = out[0, len(prompt) :].tolist()
    agree = sum(1 for a, b in zip(tokens, eager, strict=False) if a == b)
    total = max(len(tokens), len(eager))
    # The fuzzers' generation rule: greedy decoding gives eager's tokens exactly.
    word = "MISMATCH" if greedy and tokens != eager else "ok"
    print(f"check: {word}: {agree} of {total} tokens agree with eager model.generate (greedy)")
    if word == "MISMATCH":
        print(f"eager tokens: {eager}", flush=True)
        return 1
    return 0
