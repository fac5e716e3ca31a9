"""`clone_module` against xDSL's `Operation.clone`: the same IR, name hints, locations and
use order, a copy that shares no op, value or use with the original, and xDSL's copy
where one pass cannot make it."""

from __future__ import annotations

import pytest
from conftest import load_tiny
from xdsl.context import Context
from xdsl.dialects.builtin import Builtin
from xdsl.ir import Operation
from xdsl.parser import Parser

from forge.dialects.cloning import _clone_op, _NotInOnePass, clone_module
from forge.transforms import run_pipeline

MODELS = ("gpt2", "granite-350m", "qwen2-0.5b", "llama-3.2-1b", "lfm2-2.6b", "llama-3.1-8b")


def _uses(module: Operation) -> list[list[tuple[str, int]]]:
    """Each value's users (op name, operand index) in use-list order, in walk order."""
    values = [arg for op in module.walk() for r in op.regions for b in r.blocks for arg in b.args]
    values += [r for op in module.walk() for r in op.results]
    return [[(u.operation.name, u.index) for u in v.uses] for v in values]


def _hints_and_locations(module: Operation) -> list[object]:
    found: list[object] = []
    for op in module.walk():
        found.append(op.location)
        found += [r.name_hint for r in op.results]
        found += [(a.name_hint, a.location) for r in op.regions for b in r.blocks for a in b.args]
    return found


@pytest.mark.parametrize("optimized", [False, True])
@pytest.mark.parametrize("name", MODELS)
def test_the_copy_is_xdsls_copy(name: str, optimized: bool) -> None:
    module = load_tiny(name).fresh_module()
    if optimized:  # fused ops, constants, copies: what the autotuner copies
        run_pipeline(module, "npu-optimize{layout=contiguous}")
    ours, xdsls = clone_module(module), module.clone()
    ours.verify()
    assert str(ours) == str(xdsls) == str(module)
    assert ours.is_structurally_equivalent(module)
    assert _uses(ours) == _uses(xdsls)
    assert _hints_and_locations(ours) == _hints_and_locations(module)


def _objects(module: Operation) -> set[int]:
    """Ids of the module's ops, results and block arguments."""
    found: set[int] = set()
    for op in module.walk():
        found.add(id(op))
        found.update(id(r) for r in op.results)
        found.update(id(a) for r in op.regions for b in r.blocks for a in b.args)
    return found


def test_the_copy_shares_nothing_with_the_original() -> None:
    module = load_tiny("gpt2").fresh_module()
    before, text = _uses(module), str(module)
    copy = clone_module(module)
    ours = _objects(copy)
    assert not ours & _objects(module)
    assert all(id(v) in ours for op in copy.walk() for v in op.operands)
    run_pipeline(copy, "npu-optimize")  # rewriting the copy leaves the original as it was
    assert _uses(module) == before and str(module) == text != str(copy)


def test_a_forward_reference_is_copied_by_xdsl() -> None:
    """A graph region may use a value before the op defining it: one pass cannot map
    it, so xDSL copies the module."""
    text = """
    builtin.module {
      "test.graph"() ({
        %0 = "test.op"(%1) : (i32) -> i32
        %1 = "test.op"() : () -> i32
      }) : () -> ()
    }
    """
    ctx = Context(allow_unregistered=True)
    ctx.load_dialect(Builtin)
    module = Parser(ctx, text).parse_module()
    with pytest.raises(_NotInOnePass):
        _clone_op(module, {})
    copy = clone_module(module)
    assert str(copy) == str(module)
    assert copy is not module
