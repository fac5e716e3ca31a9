"""Weights moved out of the resident set keep their values, their address and their
writability, leave the resident set, and come back as anonymous memory on release; a
compiled model releases them when the eager model is collected, with the same outputs."""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from forge.conversion import nnfactory_graph, weight_spill
from forge.frontend import models

MIB = 1 << 20


def mapping_of(address: int) -> str:
    """The /proc/self/maps line of the mapping holding `address`."""
    with open("/proc/self/maps") as maps:
        for line in maps:
            low, high = (int(x, 16) for x in line.split()[0].split("-"))
            if low <= address < high:
                return line.strip()
    raise AssertionError(f"{address:#x} is not mapped")


def resident_pages(array: np.ndarray) -> int:
    """Pages of `array` in the resident set (mincore on its whole pages)."""
    import ctypes

    start, length = weight_spill.region_of(array)
    pages = length // weight_spill.PAGE
    vector = (ctypes.c_ubyte * pages)()
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    assert libc.mincore(start, length, vector) == 0
    return sum(v & 1 for v in vector)


def test_spill_keeps_values_and_address_and_release_restores_anonymous_memory(
    tmp_path: Path,
) -> None:
    array = np.random.default_rng(0).standard_normal(4 * MIB // 4).astype(np.float32)
    expected = array.copy()
    spilled = weight_spill.spilled_bytes()
    address = array.ctypes.data
    key = weight_spill.spill(array, tmp_path)
    assert key is not None
    start, length = key
    assert length >= 4 * MIB - 2 * weight_spill.PAGE
    assert "forge-weights" in mapping_of(start) or "(deleted)" in mapping_of(start)
    assert resident_pages(array) == 0  # nothing read yet: out of the resident set
    assert array.ctypes.data == address
    np.testing.assert_array_equal(array, expected)
    array[12345] = 7.0  # still writable, and the write stays
    expected[12345] = 7.0
    weight_spill.release(key)
    assert "forge-weights" not in mapping_of(start) and "(deleted)" not in mapping_of(start)
    np.testing.assert_array_equal(array, expected)
    assert weight_spill.spilled_bytes() == spilled


def test_a_region_shared_by_two_users_is_restored_by_the_last(tmp_path: Path) -> None:
    array = np.ones(2 * MIB // 4, dtype=np.float32)
    spilled = weight_spill.spilled_bytes()
    first = weight_spill.spill(array, tmp_path)
    second = weight_spill.spill(array, tmp_path)
    assert first == second
    weight_spill.release(first)
    assert weight_spill.spilled_bytes() == spilled + second[1]
    weight_spill.release(second)
    assert weight_spill.spilled_bytes() == spilled
    assert float(array.sum()) == array.size


def test_small_arrays_stay(tmp_path: Path) -> None:
    assert weight_spill.spill(np.ones(1000, dtype=np.float32), tmp_path) is None


def test_a_folder_in_memory_is_refused_with_a_reason() -> None:
    shm = Path("/dev/shm")
    if not shm.is_dir() or weight_spill.filesystem_of(shm) not in weight_spill.RAM_FILESYSTEMS:
        pytest.skip("no tmpfs at /dev/shm")
    with pytest.raises(weight_spill.SpillUnavailable, match="tmpfs"):
        weight_spill.spill(np.ones(2 * MIB // 4, dtype=np.float32), shm / "forge-spill-test")


def compiled_tiny(
    monkeypatch: pytest.MonkeyPatch, seed: int
) -> tuple[torch.nn.Module, Any, tuple[Any, ...], dict[str, Any]]:
    """A tiny GPT-2 compiled (weights of a few pages each; its own seed, so no other
    test's compiled graphs, which share another model's memory, are reused)."""
    import forge

    # Tiny weights are far below a page's worth of MiB: spill every whole page.
    monkeypatch.setattr(weight_spill, "MIN_BYTES", weight_spill.PAGE)
    model = models.build_model("gpt2", tiny=True, seed=seed)
    args, kwargs = models.example_inputs(model, seq=8)
    return model, forge.compile(model, args, kwargs), args, kwargs


def test_collecting_the_model_releases_its_memory_with_the_same_outputs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    model, compiled, args, kwargs = compiled_tiny(monkeypatch, seed=9101)
    spilled = weight_spill.spilled_bytes()
    before = compiled(*args, **kwargs).logits
    assert compiled.executor.released_bytes == 0
    del model
    gc.collect()
    assert compiled.executor.released_bytes > 0, compiled.executor.notes
    assert weight_spill.spilled_bytes() == spilled + compiled.executor.released_bytes
    torch.testing.assert_close(compiled(*args, **kwargs).logits, before, rtol=0, atol=0)
    del compiled
    nnfactory_graph.clear_cache()
    gc.collect()
    assert weight_spill.spilled_bytes() == spilled  # the graphs' release restored all


def test_weights_converted_for_the_graphs_leave_memory_at_compile(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """int8 matrices (and fp16 values) are the graphs' own copies, not the model's
    memory: they are spilled once compiled, with the model alive, and the outputs stay
    bit for bit; fp32 graphs share the model's memory and spill nothing then."""
    import forge

    monkeypatch.setattr(weight_spill, "MIN_BYTES", weight_spill.PAGE)
    model = models.build_model("gpt2", tiny=True, seed=9103)
    args, kwargs = models.example_inputs(model, seq=8)
    fp32 = forge.compile(model, args, kwargs)
    assert fp32.executor.spilled_copy_bytes == 0
    spilled = weight_spill.spilled_bytes()
    int8 = forge.compile(model, args, kwargs, precision="int8")
    assert int8.executor.spilled_copy_bytes > 0, int8.executor.notes
    assert weight_spill.spilled_bytes() == spilled + int8.executor.spilled_copy_bytes
    monkeypatch.setenv("FORGE_RELEASE_WEIGHTS", "0")
    nnfactory_graph.clear_cache()  # a graph of its own, its copies kept resident
    kept = forge.compile(model, args, kwargs, precision="int8")
    assert kept.executor.spilled_copy_bytes == 0
    torch.testing.assert_close(
        int8(*args, **kwargs).logits, kept(*args, **kwargs).logits, rtol=0, atol=0
    )


def test_release_can_be_switched_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORGE_RELEASE_WEIGHTS", "0")
    model, compiled, _, _ = compiled_tiny(monkeypatch, seed=9102)
    del model
    gc.collect()
    assert compiled.executor.released_bytes == 0
