"""`--dump-pass-pipeline` prints what `-p` reads back: every registered pass, with its
options at their defaults, round-trips through the pipeline syntax."""

from __future__ import annotations

import pytest

from forge.tools.forge_opt import dump_pipeline, main
from forge.tools.pipeline_syntax import parse_nested_pipeline, pass_text
from forge.transforms import get_all_passes

PASSES = get_all_passes()
REQUIRED_OPTIONS = {
    "apply-individual-rewrite": (
        'matched_operation_index=1 operation_name="npu.tanh" pattern_name="Erase"'
    ),
}
"""Passes with options that have no default, and values for them."""


@pytest.mark.parametrize("name", sorted(PASSES))
def test_every_registered_pass_round_trips(name: str) -> None:
    pass_class = PASSES[name]()
    if name in REQUIRED_OPTIONS:
        (given,) = parse_nested_pipeline(f"{name}{{{REQUIRED_OPTIONS[name]}}}")
        original = pass_class.from_pass_spec(given.spec)
    else:
        original = pass_class()
    text = pass_text(original)
    (spec,) = parse_nested_pipeline(text)
    again = pass_class.from_pass_spec(spec.spec)
    assert pass_text(again) == text
    assert again == original


def test_the_dumped_default_pipeline_runs_again(tmp_path, capsys) -> None:
    source = tmp_path / "f.mlir"
    source.write_text(
        "func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {\n"
        "  %0 = npu.tanh %x : tensor<4xf32>\n"
        "  func.return %0 : tensor<4xf32>\n}\n"
    )
    assert main([str(source), "-p", "forge-pipeline", "--dump-pass-pipeline"]) == 0
    first = capsys.readouterr()
    dumped = first.err.splitlines()[1]
    assert dumped.startswith("builtin.module(npu-optimize{")
    assert main([str(source), "-p", dumped]) == 0
    assert capsys.readouterr().out == first.out


def test_an_empty_tuple_option_is_its_default() -> None:
    (spec,) = parse_nested_pipeline("npu-optimize{skip}")
    optimize = PASSES["npu-optimize"]().from_pass_spec(spec.spec)
    assert optimize.skip == ()  # type: ignore[attr-defined]
    assert "skip" in dump_pipeline([optimize])
