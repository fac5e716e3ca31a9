"""The cost model: every feature of Score(G), the weights, FGR and CEI on hand-made IR."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from forge.dialects.context import entry_function, infer_num_inputs, make_context, parse_module
from forge.support.diagnostics import ForgeError
from forge.transforms import run_pipeline
from forge.transforms.npu_assign_precision import NpuAssignPrecisionPass
from forge.tuning.cost import (
    FEATURES,
    MIB,
    CostModel,
    Features,
    analyze,
    cei,
    cei_from_latency,
    features,
)

LINEAR_RELU = """
func.func @f(%x: tensor<4x8xf32>, %l.weight: tensor<16x8xf32>, %l.bias: tensor<16xf32>,
             %unused.weight: tensor<3x3xf32>) -> tensor<4x16xf32> {
  %0 = npu.linear %x, %l.weight, %l.bias
       : (tensor<4x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  %1 = npu.relu %0 : tensor<4x16xf32>
  func.return %1 : tensor<4x16xf32>
}
"""

FUSED = """
func.func @f(%x: tensor<4x8xf32>, %l.weight: tensor<16x8xf32>, %l.bias: tensor<16xf32>,
             %unused.weight: tensor<3x3xf32>) -> tensor<4x16xf32> {
  %0 = npu.fused_linear %x, %l.weight, %l.bias {activation = "relu"}
       : (tensor<4x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  func.return %0 : tensor<4x16xf32>
}
"""

CONTRACTIONS = """
func.func @f(%a: tensor<2x4x4xf32>, %b: tensor<2x4x4xf32>, %w: tensor<4x4xf32>,
             %bias: tensor<4xf32>, %m: tensor<4x4xf32>) -> tensor<2x4x4xf32> {
  %0 = npu.matmul %a, %b : (tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %1 = npu.linear %0, %w : (tensor<2x4x4xf32>, tensor<4x4xf32>) -> tensor<2x4x4xf32>
  %2 = npu.addmm %bias, %m, %w
       : (tensor<4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %3 = npu.generic "aten.bmm.default"(%1, %b)
       : (tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %4 = npu.sdpa %3, %a, %b
       : (tensor<2x4x4xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %5 = npu.relu %4 : tensor<2x4x4xf32>
  %6 = npu.generic "aten.cumsum.default"(%5, 1 : i64) : (tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  func.return %6 : tensor<2x4x4xf32>
}
"""

DIAMOND = """
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = npu.relu %x : tensor<4xf32>
  %b = npu.neg %a : tensor<4xf32>
  %c = npu.exp %b : tensor<4xf32>
  %d = npu.add %a, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %e = npu.add %c, %d : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %k = npu.constant dense<1.000000e+00> : tensor<4xf32>
  %f = npu.mul %e, %k : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return %f : tensor<4xf32>
}
"""

INT_BUFFER = """
func.func @f(%x: tensor<4xi64>, %pos.ids: tensor<4xi64>) -> tensor<4xi64> {
  %0 = npu.add %x, %pos.ids : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi64>
  func.return %0 : tensor<4xi64>
}
"""


def test_n_ops_counts_body_ops_without_return() -> None:
    assert features(parse_module(LINEAR_RELU), num_inputs=1).n_ops == 2
    assert features(parse_module(DIAMOND), num_inputs=1).n_ops == 7


def test_n_weights_counts_used_weight_arguments_and_constants() -> None:
    # l.weight and l.bias; unused.weight is not read; x is an input
    assert features(parse_module(LINEAR_RELU), num_inputs=1).n_weights == 2
    # no weight arguments, one npu.constant
    assert features(parse_module(DIAMOND), num_inputs=1).n_weights == 1
    # every argument read counts as a weight when there are no inputs
    assert features(parse_module(LINEAR_RELU), num_inputs=0).n_weights == 3


def test_n_linear_counts_contractions_and_sdpa_once() -> None:
    # matmul, linear, addmm, generic bmm, sdpa; not relu or cumsum
    assert features(parse_module(CONTRACTIONS), num_inputs=2).n_linear == 5
    assert features(parse_module(DIAMOND), num_inputs=1).n_linear == 0


def test_d_graph_is_the_longest_dataflow_path() -> None:
    # x -> relu -> neg -> exp -> add(e) -> mul: 5 ops; the add(a, x) branch is shorter
    assert features(parse_module(DIAMOND), num_inputs=1).d_graph == 5
    assert features(parse_module(LINEAR_RELU), num_inputs=1).d_graph == 2
    assert features(parse_module(FUSED), num_inputs=1).d_graph == 1


def test_s_params_prices_parameters_per_precision() -> None:
    """l.weight [16x8] and l.bias [16]; the linear's result is not a function result (a
    relu follows), so mixed quantizes it like int8."""
    structure = analyze(parse_module(LINEAR_RELU), num_inputs=1)
    weight, bias = 16 * 8, 16
    expected = {
        "fp32": (weight + bias) * 4,
        "fp16": (weight + bias) * 2,
        "int8": weight * 1 + 16 * 2 + bias * 2,  # int8 + one fp16 scale per output row
        "mixed": weight * 1 + 16 * 2 + bias * 2,
    }
    for precision, nbytes in expected.items():
        assert structure.param_bytes(precision) == nbytes, precision
        assert structure.at(precision).s_params == pytest.approx(nbytes / MIB)


def test_mixed_keeps_the_lm_head_in_fp16() -> None:
    """The fused linear's result is the function result: the stand-in assignment keeps
    that layer in fp16 when no op carries a precision attribute."""
    structure = analyze(parse_module(FUSED), num_inputs=1)
    assert structure.param_bytes("mixed") == (16 * 8 + 16) * 2
    assert structure.param_bytes("int8") == 16 * 8 + 16 * 2 + 16 * 2


def test_precision_attributes_price_mixed_only() -> None:
    """As in the executor: mixed follows per-op attributes, int8 quantizes every linear."""
    text = FUSED.replace('{activation = "relu"}', '{activation = "relu", precision = "fp16"}')
    structure = analyze(parse_module(text), num_inputs=1)
    assert structure.annotated
    assert structure.param_bytes("mixed") == (16 * 8 + 16) * 2
    assert structure.param_bytes("int8") == 16 * 8 + 16 * 2 + 16 * 2
    assert structure.param_bytes("fp32") == (16 * 8 + 16) * 4
    int8 = analyze(parse_module(text.replace('"fp16"', '"int8"')), num_inputs=1)
    assert int8.param_bytes("mixed") == 16 * 8 + 16 * 2 + 16 * 2  # not the stand-in


def test_an_assignment_prices_mixed_like_attributes() -> None:
    """`Structure.assigned` (autotune's measured assignment) replaces the stand-in."""
    structure = analyze(parse_module(FUSED), num_inputs=1)
    assert structure.param_bytes("mixed") == (16 * 8 + 16) * 2  # stand-in: LM head fp16
    int8 = structure.assigned(())  # measured: no weight kept fp16
    assert int8.param_bytes("mixed") == 16 * 8 + 16 * 2 + 16 * 2
    assert int8.param_bytes("fp16") == structure.param_bytes("fp16")
    assert structure.assigned(("l.weight",)).param_bytes("mixed") == (16 * 8 + 16) * 2


@pytest.mark.parametrize("fp16_weights", [None, (), ("l.weight",)])
def test_pricing_mixed_matches_the_pass(fp16_weights: tuple[str, ...] | None) -> None:
    """Pricing mixed without running npu-assign-precision (the stand-in is its fallback
    rule, `assigned` its fp16-weights) gives the bytes of the IR the pass writes."""
    structure = analyze(parse_module(FUSED), num_inputs=1)
    if fp16_weights is not None:
        structure = structure.assigned(fp16_weights)
    module = parse_module(FUSED)
    NpuAssignPrecisionPass("mixed", fp16_weights).apply(make_context(), module)
    assert analyze(module, num_inputs=1).param_bytes("mixed") == structure.param_bytes("mixed")


def test_integer_parameters_keep_their_width() -> None:
    structure = analyze(parse_module(INT_BUFFER), num_inputs=1)
    assert {structure.param_bytes(p) for p in ("fp32", "fp16", "int8", "mixed")} == {4 * 8}


def test_infer_num_inputs_stops_at_the_first_state_dict_name() -> None:
    assert infer_num_inputs(entry_function(parse_module(LINEAR_RELU))) == 1
    assert infer_num_inputs(entry_function(parse_module(INT_BUFFER))) == 1
    with pytest.raises(ForgeError, match="num_inputs"):
        analyze(parse_module(LINEAR_RELU), num_inputs=9)


@pytest.mark.parametrize("name", FEATURES)
def test_each_weight_scores_its_feature(name: str) -> None:
    f = Features(n_ops=3, n_weights=5, n_linear=7, d_graph=11, s_params=13.0)
    only = CostModel(**{n: float(n == name) for n in FEATURES})
    assert only.score(f) == getattr(f, name)
    assert CostModel.default().score(f) == 3 + 5 + 7 + 11 + 13
    assert sum(CostModel.default().terms(f).values()) == CostModel.default().score(f)


def test_fgr_of_linear_relu_fusion() -> None:
    unfused = features(parse_module(LINEAR_RELU), num_inputs=1)
    fused_by_hand = features(parse_module(FUSED), num_inputs=1)
    module = parse_module(LINEAR_RELU)
    run_pipeline(module, "npu-fuse-operators")
    assert features(module, num_inputs=1) == fused_by_hand
    mib = (16 * 8 + 16) * 2 / MIB
    model = CostModel.default()
    # ops 2 -> 1, weights 2, linear 1, depth 2 -> 1, same bytes
    expected = (2 + 2 + 1 + 2 + mib) / (1 + 2 + 1 + 1 + mib)
    assert model.fgr(unfused, fused_by_hand) == pytest.approx(expected)
    assert model.fgr(unfused, unfused) == 1.0
    with pytest.raises(ForgeError, match="one precision"):
        model.fgr(unfused, features(parse_module(FUSED), "int8", num_inputs=1))


def test_cei_is_speedup_per_compile_second() -> None:
    assert cei(2.0, 0.5) == 4.0
    assert cei_from_latency(eager_ms=10.0, forge_ms=5.0, compile_seconds=2.0) == 1.0
    with pytest.raises(ForgeError, match="compile time"):
        cei(2.0, 0.0)
    with pytest.raises(ForgeError, match="latency"):
        cei_from_latency(10.0, 0.0, 1.0)


def test_weights_round_trip_through_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = CostModel(2.0, 0.5, 3.0, 0.25, 4.0, source="test")
    path = model.save(tmp_path / "w.json")
    assert CostModel.load(path) == model
    monkeypatch.setenv("FORGE_COST_MODEL", str(tmp_path / "calibrated.json"))
    assert CostModel.current() == CostModel.default()  # no file yet
    model.save()
    assert (tmp_path / "calibrated.json").is_file()
    assert CostModel.current() == model


def test_bad_weight_files_are_one_line_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ForgeError, match="not a JSON cost model"):
        CostModel.load(bad)
    bad.write_text(json.dumps({"n_ops": 1.0, "speed": 2}))
    with pytest.raises(ForgeError, match="unknown key"):
        CostModel.load(bad)
    bad.write_text(json.dumps({"n_ops": "fast"}))
    with pytest.raises(ForgeError, match="must be a number"):
        CostModel.load(bad)
    with pytest.raises(ForgeError, match="cannot read"):
        CostModel.load(tmp_path / "missing.json")
