"""Tables of CPU results keyed by small inputs (`forge.runtime.tables`): which steps join
one, that a table computes each distinct key once and hands out values nobody can change
under it, and that a decode program's mask steps run from one as eager does."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import pytest
import torch
from xdsl.dialects.builtin import IntegerType, TensorType, f32, i1, i64

from forge.dialects.shapes import DYNAMIC
from forge.frontend import models
from forge.runtime import tables
from forge.runtime.generate import compile_lm
from forge.runtime.tables import Chain, Table, find_chain, key_slots


@dataclass(frozen=True)
class FakeStep:
    run: Callable[..., Any]
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    segment: bool = False
    threaded: bool = False
    pure: bool = True


def _add_one(x: torch.Tensor) -> torch.Tensor:
    return x + 1


def test_chain_takes_the_pure_steps_computable_from_keys() -> None:
    """Slot 0 keys; 9 is a large input. Step 3 reads 9, step 4 is impure, step 5 a
    segment, step 6 threaded, and step 7 reads step 4's result: none of them joins, and
    what the others read of the chain is handed out."""
    steps = [
        FakeStep(_add_one, (0,), (10,)),
        FakeStep(lambda: torch.ones(1), (), (11,)),  # a constant
        FakeStep(torch.add, (10, 11), (12,)),
        FakeStep(torch.add, (12, 9), (13,)),
        FakeStep(_add_one, (10,), (14,), pure=False),
        FakeStep(_add_one, (12,), (15,), segment=True),
        FakeStep(_add_one, (10,), (16,), threaded=True),
        FakeStep(_add_one, (14,), (17,)),
        FakeStep(_add_one, (12,), (18,)),
    ]
    chain = find_chain(steps, {0}, protected=set())
    assert chain == Chain(members=(0, 1, 2, 8), keys=(0,), outputs=(10, 12))
    # A protected result (the caller's) is never a table's, nor what is computed from it.
    chain = find_chain(steps, {0}, protected={12})
    assert chain == Chain(members=(0, 1), keys=(0,), outputs=(10, 11))
    # State written back after the steps is handed out too.
    chain = find_chain(steps, {0}, protected=set(), read_after={18})
    assert chain is not None and chain.outputs == (10, 12, 18)
    assert find_chain(steps[:1], {0}, protected=set()) is None  # fewer than MIN_STEPS


def test_key_slots_are_small_static_integer_inputs_never_written() -> None:
    types = [
        TensorType(i64, [1]),
        TensorType(i64, [2, tables.KEY_ELEMENTS]),  # too large
        TensorType(f32, [1]),  # not an integer
        TensorType(i64, [DYNAMIC]),
        TensorType(i1, [4]),
        TensorType(IntegerType(32), [3]),
        TensorType(i64, [1]),  # written by the function
    ]
    assert key_slots(types, written={6}) == {0, 4, 5}


def _chain_table(calls: list[int]) -> Table:
    def counted(x: torch.Tensor) -> torch.Tensor:
        calls.append(int(x.reshape(-1)[0]))
        return x * 2

    steps = [
        FakeStep(counted, (0,), (1,)),
        FakeStep(lambda x: x.float() + 0.5, (1,), (2,)),
        FakeStep(lambda x: x.view(-1), (0,), (3,)),  # a view of the key
    ]
    chain = find_chain(steps, {0}, protected=set(), read_after={1, 2, 3})
    assert chain is not None and chain.outputs == (1, 2, 3)
    return Table(steps, chain)


def test_each_distinct_key_is_computed_once() -> None:
    calls: list[int] = []
    table = _chain_table(calls)
    for position in [3, 4, 3, 3, 5, 4]:
        doubled, shifted, viewed = table(torch.tensor([position]))
        assert torch.equal(doubled, torch.tensor([2 * position]))
        assert torch.equal(shifted, torch.tensor([2 * position + 0.5]))
        assert torch.equal(viewed, torch.tensor([position]))
    assert calls == [3, 4, 5]
    assert (table.hits, table.misses) == (3, 3)
    # The same values in another dtype or shape are another key.
    table(torch.tensor([3], dtype=torch.int32))
    table(torch.tensor([[3]]))
    assert calls == [3, 4, 5, 3, 3]


def test_values_never_share_memory_with_the_callers_key() -> None:
    """A result that views the key is copied into the table: writing the caller's tensor
    later changes nothing the table hands out."""
    table = _chain_table([])
    key = torch.tensor([7])
    _, _, viewed = table(key)
    assert viewed.untyped_storage().data_ptr() != key.untyped_storage().data_ptr()
    key.fill_(1)
    assert torch.equal(table(torch.tensor([7]))[2], torch.tensor([7]))


def test_a_full_table_computes_new_keys_every_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tables, "MAX_ENTRIES", 2)
    calls: list[int] = []
    table = _chain_table(calls)
    for position in [1, 2, 3, 3, 1]:
        assert torch.equal(table(torch.tensor([position]))[0], torch.tensor([2 * position]))
    assert calls == [1, 2, 3, 3]


def test_decode_mask_steps_run_from_a_table_as_eager() -> None:
    """The decode program's CPU steps on `cache_position` (its attention mask) are one
    table, computed once per position, and the tokens and logits are those of the same
    program with the steps run one by one."""
    model = models.build_model("gpt2", tiny=True)
    lm = compile_lm(model, capacity=24, prompt_capacity=6)
    executor = lm.decode.executor
    table = executor.table
    assert table is not None and table.chain.keys == (1,)  # cache_position
    assert len(table.chain.members) >= 4
    prompt = [5, 9, 2, 7]
    tokens = lm.generate(prompt, 10, keep_logits=True)
    logits = list(lm.step_logits)
    assert table.misses == 9 and table.hits == 0
    again = lm.generate(prompt, 10)
    assert again == tokens and table.hits == 9

    executor._steps = [  # the steps one by one
        replace(step, tabled=False) for step in executor._steps if not isinstance(step.run, Table)
    ]
    assert lm.generate(prompt, 10, keep_logits=True) == tokens
    for a, b in zip(lm.step_logits, logits, strict=True):
        assert torch.equal(a, b)
