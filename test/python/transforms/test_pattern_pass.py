"""The pattern driver: the autotuner's probe (`NpuPatternPass.would_rewrite`) answers as
`apply` does and leaves the module exactly as it was, uses included; statistics with
and without pattern hits; the driver's worklist."""

from __future__ import annotations

import pytest
from conftest import load_tiny
from xdsl.dialects.builtin import ModuleOp

from forge.dialects.context import make_context
from forge.transforms.forge_pipeline import ForgePipelinePass, phase2_of
from forge.transforms.pattern_pass import NpuPatternPass, OpWorklist, collect_statistics


def _uses(module: ModuleOp) -> list[int]:
    """Every value's use count, in walk order (what `single_use` and friends read)."""
    counts = [a.uses.get_length() for a in module.body.block.ops.first.body.block.args]  # type: ignore[union-attr]
    return counts + [r.uses.get_length() for op in module.walk() for r in op.results]


@pytest.mark.parametrize("layout", ["auto", "contiguous"])
@pytest.mark.parametrize("name", ["gpt2", "llama-3.2-1b"])
def test_probe_answers_as_apply_does_and_changes_nothing(name: str, layout: str) -> None:
    module = load_tiny(name).fresh_module()
    ctx = make_context()
    passes = phase2_of(ForgePipelinePass(layout=layout))
    probed = set()
    for _ in range(2):  # round 2 sees states that are fixed points of most passes
        for p in passes:
            assert isinstance(p, NpuPatternPass)
            before, uses = module.clone(), _uses(module)
            found = p.would_rewrite(module)
            assert module.is_structurally_equivalent(before), p.name
            assert _uses(module) == uses, f"{p.name}: the probe left uses behind"
            p.apply(ctx, module)
            assert found == (not module.is_structurally_equivalent(before)), p.name
            probed.add(found)
    assert probed == {True, False}


def test_statistics_without_hits_count_rewrites_and_an_outer_scope_still_gets_hits() -> None:
    """`collect_statistics(pattern_hits=False)` (the autotuner's, the plan report's) skips
    observing the patterns unless an enclosing scope wants the hits."""
    dce = phase2_of(ForgePipelinePass())[0]
    ctx = make_context()
    module = load_tiny("gpt2").fresh_module()
    with collect_statistics(pattern_hits=False) as bare:
        dce.apply(ctx, module.clone())
    with collect_statistics() as outer, collect_statistics(pattern_hits=False) as inner:
        dce.apply(ctx, module)
    assert bare[0].rewrites == inner[0].rewrites == outer[0].rewrites > 0
    assert bare[0].pattern_hits == {}
    assert sum(outer[0].pattern_hits.values()) == outer[0].rewrites


def test_op_worklist_pops_last_pushed_first_and_skips_removed_ops() -> None:
    ops = list(load_tiny("gpt2").fresh_module().walk())[:5]
    worklist = OpWorklist()
    worklist.fill(ops[:3])
    worklist.push(ops[1])  # already queued: stays where it is
    worklist.push(ops[3])
    worklist.remove(ops[2])
    worklist.remove(ops[4])  # never queued: nothing happens
    assert [worklist.take() for _ in range(4)] == [ops[3], ops[1], ops[0], None]
    assert not worklist


def test_match_rewriter_resets_the_fields_xdsl_uses() -> None:
    """`MatchRewriter.offer` writes xDSL's private rewriter fields directly (their
    setters validate, a cost on every offered op): this fails when xDSL renames them."""
    from xdsl.dialects.builtin import ModuleOp
    from xdsl.dialects.test import TestOp
    from xdsl.pattern_rewriter import PatternRewriter

    from forge.transforms.rewrite_driver import MatchRewriter

    first, second = TestOp(), TestOp()
    ModuleOp([first, second])
    fields = set(vars(PatternRewriter(first)))
    assert {"_current_operation", "_name_hint"} <= fields
    rewriter = MatchRewriter(first)
    rewriter.offer(second)
    assert rewriter.insertion_point.insert_before is second
    assert rewriter.name_hint is None and not rewriter.has_done_action
