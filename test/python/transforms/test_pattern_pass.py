"""`NpuPatternPass.would_rewrite`: the autotuner's probe answers as `apply` does and
leaves the module exactly as it was, uses included."""

from __future__ import annotations

import pytest
from conftest import load_tiny
from xdsl.dialects.builtin import ModuleOp

from forge.dialects.context import make_context
from forge.transforms.forge_pipeline import ForgePipelinePass, phase2_of
from forge.transforms.pattern_pass import NpuPatternPass


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
