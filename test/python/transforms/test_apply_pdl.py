"""npu-apply-pdl: PDL patterns rewrite npu IR like their Python twins, and every problem
in a pattern file is one ForgeError line that points into the file."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import load_tiny

from forge.dialects import npu
from forge.dialects.context import parse_module
from forge.support.diagnostics import ForgeError
from forge.transforms import build_pipeline, run_pipeline
from forge.transforms.npu_apply_pdl import NpuApplyPDLPass, bind_pdl_file

ROOT = Path(__file__).resolve().parents[3]
EVAL_DROPOUT = ROOT / "transforms" / "pdl" / "eval-dropout.pdl.mlir"
DOUBLE_NEG = ROOT / "docs" / "tutorial" / "fold-double-neg.pdl.mlir"

IR = """
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = npu.neg %x : tensor<4xf32>
  %1 = npu.neg %0 : tensor<4xf32>
  %2 = npu.abs %1 : tensor<4xf32>
  func.return %2 : tensor<4xf32>
}
"""

NEG_ABS = """
pdl.pattern @{name} : benefit({benefit}) {{
  %type = pdl.type
  %x = pdl.operand
  %neg = pdl.operation "npu.neg"(%x : !pdl.value) -> (%type : !pdl.type)
  %y = pdl.result 0 of %neg
  %abs = pdl.operation "npu.abs"(%y : !pdl.value) -> (%type : !pdl.type)
  pdl.rewrite %abs {{
    %new = pdl.operation "npu.{replacement}"(%x : !pdl.value) -> (%type : !pdl.type)
    pdl.replace %abs with %new
  }}
}}
"""


def apply(pdl_text: str, tmp_path: Path, ir: str = IR) -> str:
    path = tmp_path / "patterns.pdl.mlir"
    path.write_text(pdl_text)
    module = parse_module(ir)
    run_pipeline(module, f'npu-apply-pdl{{file="{path}"}}')
    return str(module)


def error_of(pdl_text: str, tmp_path: Path) -> str:
    with pytest.raises(ForgeError) as info:
        apply(pdl_text, tmp_path)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_double_neg_in_pdl_counts_its_rewrite() -> None:
    module = parse_module(IR)
    records = run_pipeline(module, f'npu-apply-pdl{{file="{DOUBLE_NEG}"}},npu-dce')
    assert [(r.name, r.rewrites) for r in records] == [("npu-apply-pdl", 1), ("npu-dce", 1)]
    assert [op.name for op in module.walk()][-2:] == ["npu.abs", "func.return"]
    assert records[0].pattern_hits == {"fold_double_neg": 1}


def test_rewrite_creates_ops_and_higher_benefit_wins(tmp_path: Path) -> None:
    # abs(neg(x)) is abs(x); a competing pattern written first but with lower benefit
    # (and a wrong result) must lose.
    low = NEG_ABS.format(name="wrong", benefit=1, replacement="neg")
    high = NEG_ABS.format(name="abs_of_neg", benefit=2, replacement="abs")
    printed = apply(low + high, tmp_path)
    assert "%2 = npu.abs %x : tensor<4xf32>" in printed
    assert "func.return %2" in printed


def test_eval_dropout_in_pdl_matches_npu_dce_on_gpt2() -> None:
    tiny = load_tiny("gpt2")
    python, declarative = tiny.fresh_module(), tiny.fresh_module()
    dropouts = sum(isinstance(op, npu.DropoutOp) for op in python.walk())
    assert dropouts > 0
    run_pipeline(python, "npu-dce")
    records = run_pipeline(declarative, f'npu-apply-pdl{{file="{EVAL_DROPOUT}"}},npu-dce')
    assert records[0].rewrites == dropouts
    assert str(declarative) == str(python)


def test_missing_file(tmp_path: Path) -> None:
    module = parse_module(IR)
    missing = tmp_path / "nope.mlir"
    with pytest.raises(ForgeError, match="no such PDL file") as info:
        run_pipeline(module, f'npu-apply-pdl{{file="{missing}"}}')
    assert info.value.location == str(missing)


def test_no_file_option() -> None:
    with pytest.raises(ForgeError, match="needs a PDL file"):
        run_pipeline(parse_module(IR), "npu-apply-pdl")


def test_malformed_pdl_points_at_the_token(tmp_path: Path) -> None:
    message = error_of("pdl.pattern : benefit(1) {\n  %x = pdl.operand(\n}\n", tmp_path)
    assert message.startswith(f"{tmp_path / 'patterns.pdl.mlir'}:2:")


def test_unknown_op(tmp_path: Path) -> None:
    message = error_of(NEG_ABS.format(name="p", benefit=1, replacement="absolutely"), tmp_path)
    assert message.endswith(
        "patterns.pdl.mlir:9:5: error: 'pdl.operation' op unknown operation "
        "'npu.absolutely' (no loaded dialect defines it)"
    )


def test_no_patterns(tmp_path: Path) -> None:
    assert error_of("builtin.module {}", tmp_path).endswith(
        "error: no 'pdl.pattern' in the PDL file"
    )


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            '%r = pdl.operation "npu.neg"\n pdl.rewrite %r { pdl.erase %r }',
            "never matches: 'npu.neg' has 1 result(s), the pattern lists 0 type(s)",
        ),
        (
            '%a = pdl.attribute\n %r = pdl.operation "npu.neg" {"alpha" = %a}\n'
            " pdl.rewrite %r { pdl.erase %r }",
            "'npu.neg' has no attribute or property 'alpha'",
        ),
        (
            '%v = pdl.operands\n %r = pdl.operation "npu.cat"(%v : !pdl.range<value>)\n'
            " pdl.rewrite %r { pdl.erase %r }",
            "variadic operands are not supported by xDSL's interpreter",
        ),
        (
            '%t = pdl.type\n %r = pdl.operation "npu.neg" -> (%t : !pdl.type)\n'
            ' pdl.apply_native_constraint "forge.is_cheap"(%r : !pdl.operation)\n'
            " pdl.rewrite %r { pdl.erase %r }",
            "unknown native constraint 'forge.is_cheap' (known: forge.lacks_attr)",
        ),
        (
            '%n = pdl.attribute = "train"\n %t = pdl.type\n'
            ' %r = pdl.operation "npu.dropout" -> (%t : !pdl.type)\n'
            ' pdl.apply_native_constraint "forge.lacks_attr"(%r, %n : !pdl.operation,'
            " !pdl.attribute) {isNegated = true}\n pdl.rewrite %r { pdl.erase %r }",
            "xDSL's interpreter ignores isNegated",
        ),
        (
            '%t = pdl.type\n %r = pdl.operation "npu.neg" -> (%t : !pdl.type)\n'
            ' %o = pdl.operation "npu.abs" -> (%t : !pdl.type)\n'
            " pdl.rewrite %r { pdl.erase %o }",
            "not reached from the rewrite root through operands",
        ),
        (
            '%t = pdl.type\n %r = pdl.operation "npu.neg" -> (%t : !pdl.type)\n'
            ' pdl.rewrite %r with "external"',
            "needs a root op and a rewrite body",
        ),
    ],
)
def test_unsupported_or_impossible_patterns(body: str, expected: str, tmp_path: Path) -> None:
    message = error_of(f"pdl.pattern : benefit(1) {{\n {body}\n}}\n", tmp_path)
    assert "patterns.pdl.mlir:" in message and expected in message


def test_bind_pdl_file() -> None:
    passes = build_pipeline("npu-dce,npu-apply-pdl").passes
    bound = bind_pdl_file(passes, "a.mlir")
    assert [getattr(p, "file", None) for p in bound] == [None, "a.mlir"]
    assert isinstance(bound[1], NpuApplyPDLPass)
    with pytest.raises(ForgeError, match="needs 'npu-apply-pdl' in the pass pipeline"):
        bind_pdl_file(build_pipeline("npu-dce").passes, "a.mlir")
    with pytest.raises(ForgeError, match="conflicts with"):
        bind_pdl_file(build_pipeline('npu-apply-pdl{file="b.mlir"}').passes, "a.mlir")


def test_tutorial_page_shows_the_pdl_file_that_runs() -> None:
    page = (ROOT / "docs" / "first-pattern.md").read_text()
    assert f"```mlir\n{DOUBLE_NEG.read_text()}```" in page, "docs/first-pattern.md is stale"
