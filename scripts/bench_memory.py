"""Resident memory of a compiled model once the eager model is released.

Compiles MODEL (fp32, `forge.compile`), runs it once, drops the eager model (which lets
the executor move the memory its graphs shared with the model out of the resident set,
`forge.conversion.weight_spill`), then runs CALLS more calls and prints the resident set
at each step and the peak after compile (VmHWM, reset through /proc/self/clear_refs once
the model is gone) against the weights' bytes. Exit 1 when the outputs after the release
differ from the ones before it.

    python scripts/bench_memory.py llama-3.2-1b     # about 10 GB at its compile peak
    python scripts/bench_memory.py gpt2 --calls 20
"""

from __future__ import annotations

import argparse
import gc
import time

import torch

import forge
from forge.frontend.models import build_model, example_inputs

MIB = 2**20


def memory() -> dict[str, float]:
    """VmRSS, VmHWM, RssAnon and RssFile of this process, in MiB."""
    figures = {}
    with open("/proc/self/status") as status:
        for line in status:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile"):
                figures[key] = int(value.split()[0]) / 1024
    return figures


def show(stage: str) -> dict[str, float]:
    figures = memory()
    text = ", ".join(f"{k} {v:,.0f}" for k, v in figures.items())
    print(f"{stage:<26}{text} (MiB)", flush=True)
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?", default="llama-3.2-1b")
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--calls", type=int, default=10)
    options = parser.parse_args()

    model = build_model(options.model)
    unique = {id(t): t for t in [*model.parameters(), *model.buffers()]}
    weights = sum(t.numel() * t.element_size() for t in unique.values()) / MIB
    print(f"{options.model}: weights {weights:,.0f} MiB, seq {options.seq}, fp32")
    show("model built")
    args, kwargs = example_inputs(model, seq=options.seq)
    start = time.perf_counter()
    compiled = forge.compile(model, args, kwargs)
    print(f"compiled in {time.perf_counter() - start:.1f} s")
    show("compiled")
    before = compiled(*args, **kwargs).logits.clone()
    start = time.perf_counter()
    del model
    gc.collect()
    executor = compiled.executor
    released = executor.released_bytes / MIB
    print(f"model released in {time.perf_counter() - start:.2f} s: {released:,.0f} MiB moved")
    for note in executor.notes:
        print(f"note: {note}")
    show("model released")
    with open("/proc/self/clear_refs", "w") as clear:
        clear.write("5")  # VmHWM := VmRSS
    same = True
    for _ in range(options.calls):
        same &= torch.equal(compiled(*args, **kwargs).logits, before)
    after = show(f"{options.calls} calls")
    peak = after["VmHWM"]
    print(f"peak RSS after compile: {peak:,.0f} MiB = {peak / weights:.2f}x the weights")
    print(f"outputs after the release {'equal' if same else 'DIFFER from'} the ones before")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
