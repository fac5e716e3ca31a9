// Round trip of npu.generic, the catch-all for ATen ops without a named npu op:
// positional args mixing SSA operands and attributes, lists, `unit` (None),
// kwargs, side_effects, zero / several results, discardable attributes.

// RUN: forge-opt %s | forge-opt | filecheck %s
// RUN: forge-opt %s --print-op-generic | forge-opt | filecheck %s
// RUN: forge-opt %s --print-op-generic | forge-opt --print-op-generic | filecheck %s --check-prefix=GENERIC

// One operand plus an integer argument; operands become #npu.operand<i> refs.
// CHECK-LABEL: func.func @simple(%x: tensor<2x?xf32>) -> tensor<2x?xf32> {
// CHECK-NEXT:    [[R:%.*]] = npu.generic "aten.cumsum.default"(%x, 1 : i64) : (tensor<2x?xf32>) -> tensor<2x?xf32>
// CHECK-NEXT:    func.return [[R]] : tensor<2x?xf32>
// CHECK-NEXT:  }
// GENERIC-LABEL: sym_name = "simple"
// GENERIC:       "npu.generic"(%x) <{opcode = "aten.cumsum.default", args = [#npu.operand<0>, 1 : i64]}> : (tensor<2x?xf32>) -> tensor<2x?xf32>
func.func @simple(%x: tensor<2x?xf32>) -> tensor<2x?xf32> {
  %0 = npu.generic "aten.cumsum.default"(%x, 1 : i64) : (tensor<2x?xf32>) -> tensor<2x?xf32>
  func.return %0 : tensor<2x?xf32>
}

// A list of operands, `unit` (None), negative ints, strings and kwargs.
// CHECK-LABEL: func.func @list_unit_kwargs(%a: tensor<2x4xf16>, %b: tensor<2x4xf16>) -> tensor<2x2x4xf16> {
// CHECK-NEXT:    [[R:%.*]] = npu.generic "aten.stack.default"([%a, %b], unit, -1 : i64, "mode") kwargs {dim = 0 : i64, dtype = f16} : (tensor<2x4xf16>, tensor<2x4xf16>) -> tensor<2x2x4xf16>
// CHECK-NEXT:    func.return [[R]] : tensor<2x2x4xf16>
// CHECK-NEXT:  }
// GENERIC-LABEL: sym_name = "list_unit_kwargs"
// GENERIC:       "npu.generic"(%a, %b) <{opcode = "aten.stack.default", args = {{\[\[}}#npu.operand<0>, #npu.operand<1>], unit, -1 : i64, "mode"], kwargs = {dim = 0 : i64, dtype = f16}}> : (tensor<2x4xf16>, tensor<2x4xf16>) -> tensor<2x2x4xf16>
func.func @list_unit_kwargs(%a: tensor<2x4xf16>, %b: tensor<2x4xf16>) -> tensor<2x2x4xf16> {
  %0 = npu.generic "aten.stack.default"([%a, %b], unit, -1 : i64, "mode") kwargs {dim = 0 : i64, dtype = f16} : (tensor<2x4xf16>, tensor<2x4xf16>) -> tensor<2x2x4xf16>
  func.return %0 : tensor<2x2x4xf16>
}

// Nested lists mixing operands and attributes, an empty list, float, dictionary
// and type arguments; the same value passed twice becomes two operands.
// CHECK-LABEL: func.func @nested(%x: tensor<4xi64>, %y: tensor<4xi64>) -> tensor<4xi64> {
// CHECK-NEXT:    [[R:%.*]] = npu.generic "aten.index.Tensor"(%x, [[%y, unit], [1 : i64, 2.500000e+00 : f64, "a"]], [], {k = 1 : i64}, i64, %x) : (tensor<4xi64>, tensor<4xi64>, tensor<4xi64>) -> tensor<4xi64>
// CHECK-NEXT:    func.return [[R]] : tensor<4xi64>
// CHECK-NEXT:  }
// GENERIC-LABEL: sym_name = "nested"
// GENERIC:       "npu.generic"(%x, %y, %x) <{opcode = "aten.index.Tensor", args = [#npu.operand<0>, {{\[\[}}#npu.operand<1>, unit], [1 : i64, 2.500000e+00 : f64, "a"]], [], {k = 1 : i64}, i64, #npu.operand<2>]}> : (tensor<4xi64>, tensor<4xi64>, tensor<4xi64>) -> tensor<4xi64>
func.func @nested(%x: tensor<4xi64>, %y: tensor<4xi64>) -> tensor<4xi64> {
  %0 = npu.generic "aten.index.Tensor"(%x, [[%y, unit], [1, 2.5, "a"]], [], {k = 1}, i64, %x) : (tensor<4xi64>, tensor<4xi64>, tensor<4xi64>) -> tensor<4xi64>
  func.return %0 : tensor<4xi64>
}

// Zero results with side_effects; several results; no operands and no arguments.
// CHECK-LABEL: func.func @results(%x: tensor<2x8xf32>) -> tensor<2x3xi64> {
// CHECK-NEXT:    npu.generic "aten.copy_.default"(%x, %x) side_effects : (tensor<2x8xf32>, tensor<2x8xf32>) -> ()
// CHECK-NEXT:    [[V:%.*]], [[I:%.*]] = npu.generic "aten.topk.default"(%x, 3 : i64) : (tensor<2x8xf32>) -> (tensor<2x3xf32>, tensor<2x3xi64>)
// CHECK-NEXT:    [[Z:%.*]] = npu.generic "aten.zeros.default"([2 : i64, 3 : i64]) kwargs {dtype = i64} : () -> tensor<2x3xi64>
// CHECK-NEXT:    [[E:%.*]] = npu.generic "aten.empty_like"() side_effects : () -> tensor<i1>
// CHECK-NEXT:    func.return [[I]] : tensor<2x3xi64>
// CHECK-NEXT:  }
// GENERIC-LABEL: sym_name = "results"
// GENERIC:       "npu.generic"(%x, %x) <{opcode = "aten.copy_.default", args = [#npu.operand<0>, #npu.operand<1>], has_side_effects}> : (tensor<2x8xf32>, tensor<2x8xf32>) -> ()
// GENERIC-NEXT:  {{%.*}}, {{%.*}} = "npu.generic"(%x) <{opcode = "aten.topk.default", args = [#npu.operand<0>, 3 : i64]}> : (tensor<2x8xf32>) -> (tensor<2x3xf32>, tensor<2x3xi64>)
// GENERIC-NEXT:  "npu.generic"() <{opcode = "aten.zeros.default", args = {{\[\[}}2 : i64, 3 : i64]], kwargs = {dtype = i64}}> : () -> tensor<2x3xi64>
// GENERIC-NEXT:  "npu.generic"() <{opcode = "aten.empty_like", args = [], has_side_effects}> : () -> tensor<i1>
func.func @results(%x: tensor<2x8xf32>) -> tensor<2x3xi64> {
  npu.generic "aten.copy_.default"(%x, %x) side_effects : (tensor<2x8xf32>, tensor<2x8xf32>) -> ()
  %0:2 = npu.generic "aten.topk.default"(%x, 3 : i64) : (tensor<2x8xf32>) -> (tensor<2x3xf32>, tensor<2x3xi64>)
  %1 = npu.generic "aten.zeros.default"([2, 3]) kwargs {dtype = i64} : () -> tensor<2x3xi64>
  %2 = npu.generic "aten.empty_like"() side_effects : () -> tensor<i1>
  func.return %0#1 : tensor<2x3xi64>
}

// Discardable attributes after args / kwargs / side_effects, and an empty
// `kwargs {}` with and without discardable attributes after it.
// CHECK-LABEL: func.func @attributes(%x: tensor<3xbf16>) -> tensor<3xbf16> {
// CHECK-NEXT:    [[A:%.*]] = npu.generic "aten.clamp.default"(%x, unit, 6.000000e+00 : f64) {device = "cpu", vreg = 3 : i64, buffer = 1 : i64} : (tensor<3xbf16>) -> tensor<3xbf16>
// CHECK-NEXT:    [[B:%.*]] = npu.generic "aten.clamp.default"([[A]]) kwargs {min = 0.000000e+00 : f64} side_effects {device = "npu"} : (tensor<3xbf16>) -> tensor<3xbf16>
// CHECK-NEXT:    [[C:%.*]] = npu.generic "aten.alias.default"([[B]]) kwargs {} : (tensor<3xbf16>) -> tensor<3xbf16>
// CHECK-NEXT:    [[D:%.*]] = npu.generic "aten.alias.default"([[C]]) kwargs {} {device = "cpu", buffer = 2 : i64} : (tensor<3xbf16>) -> tensor<3xbf16>
// CHECK-NEXT:    [[E:%.*]] = npu.generic "aten.alias.default"([[D]]) kwargs {} side_effects {vreg = 1 : i64} : (tensor<3xbf16>) -> tensor<3xbf16>
// CHECK-NEXT:    func.return [[E]] : tensor<3xbf16>
// CHECK-NEXT:  }
// GENERIC-LABEL: sym_name = "attributes"
// GENERIC:       "npu.generic"(%x) <{opcode = "aten.clamp.default", args = [#npu.operand<0>, unit, 6.000000e+00 : f64]}> {device = "cpu", vreg = 3 : i64, buffer = 1 : i64} : (tensor<3xbf16>) -> tensor<3xbf16>
// GENERIC-NEXT:  "npu.generic"({{%.*}}) <{opcode = "aten.clamp.default", args = [#npu.operand<0>], kwargs = {min = 0.000000e+00 : f64}, has_side_effects}> {device = "npu"} : (tensor<3xbf16>) -> tensor<3xbf16>
// GENERIC-NEXT:  "npu.generic"({{%.*}}) <{opcode = "aten.alias.default", args = [#npu.operand<0>], kwargs = {}}> : (tensor<3xbf16>) -> tensor<3xbf16>
// GENERIC-NEXT:  "npu.generic"({{%.*}}) <{opcode = "aten.alias.default", args = [#npu.operand<0>], kwargs = {}}> {device = "cpu", buffer = 2 : i64} : (tensor<3xbf16>) -> tensor<3xbf16>
// GENERIC-NEXT:  "npu.generic"({{%.*}}) <{opcode = "aten.alias.default", args = [#npu.operand<0>], kwargs = {}, has_side_effects}> {vreg = 1 : i64} : (tensor<3xbf16>) -> tensor<3xbf16>
func.func @attributes(%x: tensor<3xbf16>) -> tensor<3xbf16> {
  %0 = npu.generic "aten.clamp.default"(%x, unit, 6.0) {device = "cpu", vreg = 3 : i64, buffer = 1 : i64} : (tensor<3xbf16>) -> tensor<3xbf16>
  %1 = npu.generic "aten.clamp.default"(%0) kwargs {min = 0.0} side_effects {device = "npu"} : (tensor<3xbf16>) -> tensor<3xbf16>
  %2 = npu.generic "aten.alias.default"(%1) kwargs {} : (tensor<3xbf16>) -> tensor<3xbf16>
  %3 = npu.generic "aten.alias.default"(%2) kwargs {} {device = "cpu", buffer = 2 : i64} : (tensor<3xbf16>) -> tensor<3xbf16>
  %4 = npu.generic "aten.alias.default"(%3) kwargs {} side_effects {vreg = 1 : i64} : (tensor<3xbf16>) -> tensor<3xbf16>
  func.return %4 : tensor<3xbf16>
}

// The generic form with #npu.operand refs written out parses to the same op.
// CHECK-LABEL: func.func @from_generic(%x: tensor<5xf32>) -> tensor<5xf32> {
// CHECK-NEXT:    [[R:%.*]] = npu.generic "aten.flip.default"(%x, [0 : i64]) : (tensor<5xf32>) -> tensor<5xf32>
// CHECK-NEXT:    func.return [[R]] : tensor<5xf32>
// CHECK-NEXT:  }
func.func @from_generic(%x: tensor<5xf32>) -> tensor<5xf32> {
  %0 = "npu.generic"(%x) <{opcode = "aten.flip.default", args = [#npu.operand<0>, [0 : i64]]}> : (tensor<5xf32>) -> tensor<5xf32>
  func.return %0 : tensor<5xf32>
}
