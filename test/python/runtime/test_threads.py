"""The executor's thread policy (forge.runtime.threads): with NNFactory segments, CPU
steps run on one torch thread except the kernels worth the pool (linears placed on the
CPU), and the caller's thread count is back after the call."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest
import torch
from conftest import CPU_PROFILE, load_tiny

from forge.devtools.numerics import compare
from forge.dialects import npu
from forge.runtime import threads
from forge.runtime.executor import CompiledNPUExecutor
from forge.target.cpu_kernels import wants_threads
from forge.transforms.forge_pipeline import plan


@pytest.fixture
def two_threads() -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)
    threads.ENABLED = True


def record_threads(executor: CompiledNPUExecutor) -> list[tuple[bool, list[int]]]:
    """Per CPU step that runs (a table computes the steps it holds): (threaded, torch's
    thread count at each of its calls)."""
    seen: list[tuple[bool, list[int]]] = []
    steps = []
    for step in executor.steps:
        if step.segment or step.tabled:
            steps.append(step)
            continue
        counts: list[int] = []
        seen.append((step.threaded, counts))

        def run(*args, _run=step.run, _counts=counts):
            _counts.append(torch.get_num_threads())
            return _run(*args)

        steps.append(replace(step, run=run))
    executor._steps = steps
    return seen


@pytest.mark.usefixtures("two_threads")
def test_cpu_steps_run_on_one_thread_but_linears() -> None:
    tiny = load_tiny("gpt2")
    module = tiny.fresh_module()
    plan(module, profile=str(CPU_PROFILE))  # linears go to the CPU: threaded steps
    program = tiny.program
    executor = CompiledNPUExecutor(module, program.weights, len(program.input_names))
    assert executor.segments
    seen = record_threads(executor)
    kinds = {threaded for threaded, _ in seen}
    assert kinds == {True, False}  # the linears (the CPU wins them all) and the rest
    result = compare(tiny.model, executor, tiny.args, tiny.kwargs, program.input_names, 3)
    assert result.max_abs <= 1e-4 and result.top1 == 1.0
    for threaded, counts in seen:
        assert counts and set(counts) == ({2} if threaded else {1})
    assert torch.get_num_threads() == 2

    threads.ENABLED = False  # off: every step at the caller's count
    seen = record_threads(executor)
    compare(tiny.model, executor, tiny.args, tiny.kwargs, program.input_names, 3)
    assert all(set(counts) == {2} for _, counts in seen)


def test_which_ops_want_threads() -> None:
    tiny = load_tiny("gpt2")
    module = tiny.fresh_module()
    plan(module)
    ops = list(module.walk())
    assert any(wants_threads(op) for op in ops if isinstance(op, npu.WEIGHTED_LINEAR_OPS))
    assert not any(wants_threads(op) for op in ops if isinstance(op, npu.ViewOp | npu.AddOp))


@pytest.mark.usefixtures("two_threads")
def test_nested_blocks_restore_the_callers_count() -> None:
    with threads.graph_threads() as pool:
        assert pool == 2 and torch.get_num_threads() == 1
        with threads.graph_threads() as inner:
            assert inner == 2
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == 2
    threads.ENABLED = False
    with threads.graph_threads() as pool:
        assert pool == 0 and torch.get_num_threads() == 2
