// npu-cse merges ops with the same name, operands, properties, attributes and
// result types; it never merges ops with side effects or different attributes.

// RUN: forge-opt %s -p npu-cse --split-input-file | filecheck %s

// Positive: identical elementwise ops merge.
// CHECK-LABEL: func.func @same_op
// CHECK-NEXT:    %0 = npu.tanh %x : tensor<4xf32>
// CHECK-NEXT:    %1 = npu.add %0, %0
// CHECK-NEXT:    func.return %1
func.func @same_op(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = npu.tanh %x : tensor<4xf32>
  %1 = npu.tanh %x : tensor<4xf32>
  %2 = npu.add %0, %1 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return %2 : tensor<4xf32>
}

// -----

// Positive: merging cascades: once the views merge, the ops using them merge too.
// CHECK-LABEL: func.func @cascade
// CHECK-NEXT:    %0 = npu.view %x : tensor<2x3xf32> -> tensor<6xf32>
// CHECK-NEXT:    %1 = npu.mul %0 {scalar = 2.000000e+00 : f64}
// CHECK-NEXT:    %2 = npu.add %1, %1
// CHECK-NEXT:    func.return %2
func.func @cascade(%x: tensor<2x3xf32>) -> tensor<6xf32> {
  %0 = npu.view %x : tensor<2x3xf32> -> tensor<6xf32>
  %1 = npu.view %x : tensor<2x3xf32> -> tensor<6xf32>
  %2 = npu.mul %0 {scalar = 2.000000e+00 : f64} : (tensor<6xf32>) -> tensor<6xf32>
  %3 = npu.mul %1 {scalar = 2.000000e+00 : f64} : (tensor<6xf32>) -> tensor<6xf32>
  %4 = npu.add %2, %3 : (tensor<6xf32>, tensor<6xf32>) -> tensor<6xf32>
  func.return %4 : tensor<6xf32>
}

// -----

// Positive: pure generic ops with the same opcode and arguments merge.
// CHECK-LABEL: func.func @generic
// CHECK-NEXT:    %0 = npu.generic "aten.arange.default"(4 : i64)
// CHECK-NEXT:    %1 = npu.add %0, %0
func.func @generic() -> tensor<4xi64> {
  %0 = npu.generic "aten.arange.default"(4 : i64) : () -> tensor<4xi64>
  %1 = npu.generic "aten.arange.default"(4 : i64) : () -> tensor<4xi64>
  %2 = npu.add %0, %1 : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi64>
  func.return %2 : tensor<4xi64>
}

// -----

// Negative: different properties (the scalar) or operand order do not merge.
// CHECK-LABEL: func.func @different
// CHECK-NEXT:    npu.mul %x {scalar = 2.000000e+00 : f64}
// CHECK-NEXT:    npu.mul %x {scalar = 3.000000e+00 : f64}
// CHECK-NEXT:    npu.sub %x, %y
// CHECK-NEXT:    npu.sub %y, %x
func.func @different(%x: tensor<4xf32>, %y: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %0 = npu.mul %x {scalar = 2.000000e+00 : f64} : (tensor<4xf32>) -> tensor<4xf32>
  %1 = npu.mul %x {scalar = 3.000000e+00 : f64} : (tensor<4xf32>) -> tensor<4xf32>
  %2 = npu.sub %x, %y : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %3 = npu.sub %y, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return %0, %1, %2, %3 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// Negative: different discardable attributes (placement) do not merge.
// CHECK-LABEL: func.func @placed
// CHECK-NEXT:    npu.exp %x {device = "npu"}
// CHECK-NEXT:    npu.exp %x {device = "cpu"}
func.func @placed(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %0 = npu.exp %x {device = "npu"} : tensor<4xf32>
  %1 = npu.exp %x {device = "cpu"} : tensor<4xf32>
  func.return %0, %1 : tensor<4xf32>, tensor<4xf32>
}

// -----

// Negative: ops with side effects never merge.
// CHECK-LABEL: func.func @random
// CHECK-NEXT:    npu.generic "aten.rand_like.default"(%x) side_effects
// CHECK-NEXT:    npu.generic "aten.rand_like.default"(%x) side_effects
// CHECK-NEXT:    npu.dropout %x {p = 5.000000e-01 : f64, train}
// CHECK-NEXT:    npu.dropout %x {p = 5.000000e-01 : f64, train}
func.func @random(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %0 = npu.generic "aten.rand_like.default"(%x) side_effects : (tensor<4xf32>) -> tensor<4xf32>
  %1 = npu.generic "aten.rand_like.default"(%x) side_effects : (tensor<4xf32>) -> tensor<4xf32>
  %2 = npu.dropout %x {p = 5.000000e-01 : f64, train} : tensor<4xf32>
  %3 = npu.dropout %x {p = 5.000000e-01 : f64, train} : tensor<4xf32>
  func.return %0, %1, %2, %3 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}
