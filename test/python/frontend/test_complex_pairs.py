"""Complex rotary embeddings (DeepSeek-V2, Llama 4) are lowered to real pairs at capture
(forge.frontend.complex_pairs): the rewritten graph computes what eager does, Forge
compiles it, and a complex op outside the rotary set is one 'unsupported' line."""

from __future__ import annotations

import pytest
import torch

from forge.devtools.coverage import run_case
from forge.frontend.capture import capture
from forge.frontend.complex_pairs import is_complex, lower_complex
from forge.runtime.api import compile as forge_compile
from forge.support.diagnostics import ForgeError


class ComplexRotary(torch.nn.Module):
    """DeepSeek-V2's `apply_rotary_emb` on [batch, heads, seq, dim]."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(x.shape[2], dtype=torch.float32)
        inverse = 1.0 / (100.0 ** (torch.arange(0, x.shape[-1], 2).float() / x.shape[-1]))
        angles = positions[:, None] * inverse
        rotation = torch.polar(torch.ones_like(angles), angles) * 0.5
        pairs = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
        return torch.view_as_real(pairs * rotation).flatten(3) + x


class ComplexExp(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.view_as_real(torch.exp(torch.view_as_complex(x))).sum(-1)


def _x() -> torch.Tensor:
    return torch.randn(1, 2, 5, 8, generator=torch.Generator().manual_seed(0))


def test_the_lowered_graph_has_no_complex_value_and_computes_the_same() -> None:
    x = _x()
    exported = torch.export.export(ComplexRotary(), (x,))
    assert any(is_complex(n) for n in exported.graph.nodes)
    assert lower_complex(exported) > 0
    assert not any(is_complex(n) for n in exported.graph.nodes)
    names = {str(n.target) for n in exported.graph.nodes}
    assert not any("complex" in name or "polar" in name for name in names)
    torch.testing.assert_close(exported.module()(x), ComplexRotary()(x), atol=1e-6, rtol=0)


def test_a_graph_without_complex_values_is_left_alone() -> None:
    exported = torch.export.export(torch.nn.Linear(8, 8), (torch.randn(2, 8),))
    before = str(exported.graph)
    assert lower_complex(exported) == 0
    assert str(exported.graph) == before


def test_forge_compiles_complex_rotary() -> None:
    x = _x()
    compiled = forge_compile(ComplexRotary(), (x,))
    torch.testing.assert_close(compiled(x), ComplexRotary()(x), atol=1e-5, rtol=0)


def test_other_complex_ops_are_one_unsupported_line() -> None:
    with pytest.raises(ForgeError, match=r"unsupported: complex values through aten\.exp"):
        capture(ComplexExp(), (torch.randn(3, 2),))


def test_deepseek_v2_generates_as_eager() -> None:
    row = run_case("deepseek_v2")
    assert row.status == "pass", row.error
    assert row.agree == row.total == 8
