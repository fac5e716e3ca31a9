// npu-dce removes what cannot affect the results: eval-mode dropout (the identity),
// asserts the types already prove, and unused ops without side effects.

// RUN: forge-opt %s -p npu-dce --split-input-file | filecheck %s

// Positive: eval-mode dropout forwards its input.
// CHECK-LABEL: func.func @eval_dropout
// CHECK-NEXT:    %0 = npu.tanh %x : tensor<4xf32>
// CHECK-NEXT:    func.return %0 : tensor<4xf32>
func.func @eval_dropout(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = npu.dropout %x {p = 1.000000e-01 : f64} : tensor<4xf32>
  %1 = npu.tanh %0 : tensor<4xf32>
  func.return %1 : tensor<4xf32>
}

// -----

// Positive: a dead chain of pure ops disappears in one run, views and generic ops too.
// CHECK-LABEL: func.func @dead_chain
// CHECK-NEXT:    func.return %x : tensor<2x3xf32>
func.func @dead_chain(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = npu.transpose %x {dim0 = 0 : i64, dim1 = 1 : i64} : tensor<2x3xf32> -> tensor<3x2xf32>
  %1 = npu.view %0 : tensor<3x2xf32> -> tensor<6xf32>
  %2 = npu.generic "aten.cumsum.default"(%1, 0 : i64) : (tensor<6xf32>) -> tensor<6xf32>
  func.return %x : tensor<2x3xf32>
}

// -----

// Positive: an assert whose dtype the tensor type proves is a no-op.
// CHECK-LABEL: func.func @proven_assert
// CHECK-NOT:     _assert_tensor_metadata
// CHECK:         func.return
func.func @proven_assert(%x: tensor<4xf32>) -> tensor<4xf32> {
  npu.generic "aten._assert_tensor_metadata.default"(%x) kwargs {dtype = f32, device = "cpu", layout = "strided"} side_effects : (tensor<4xf32>) -> ()
  func.return %x : tensor<4xf32>
}

// -----

// Positive: dropout with p = 0 is the identity even in training mode.
// CHECK-LABEL: func.func @p_zero_dropout
// CHECK-NEXT:    func.return %x : tensor<4xf32>
func.func @p_zero_dropout(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = npu.dropout %x {p = 0.000000e+00 : f64, train} : tensor<4xf32>
  func.return %0 : tensor<4xf32>
}

// -----

// Negative: training-mode dropout is random: it stays, even unused.
// CHECK-LABEL: func.func @train_dropout
// CHECK-NEXT:    npu.dropout %x {p = 1.000000e-01 : f64, train}
// CHECK-NEXT:    func.return %x
func.func @train_dropout(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = npu.dropout %x {p = 1.000000e-01 : f64, train} : tensor<4xf32>
  func.return %x : tensor<4xf32>
}

// -----

// Negative: an assert that the types contradict would fail at run time: it stays.
// CHECK-LABEL: func.func @failing_assert
// CHECK-NEXT:    npu.generic "aten._assert_tensor_metadata.default"(%x) kwargs {dtype = f16}
func.func @failing_assert(%x: tensor<4xf32>) -> tensor<4xf32> {
  npu.generic "aten._assert_tensor_metadata.default"(%x) kwargs {dtype = f16} side_effects : (tensor<4xf32>) -> ()
  func.return %x : tensor<4xf32>
}

// -----

// Negative: other side-effecting generic ops stay, and so do used values.
// CHECK-LABEL: func.func @side_effects
// CHECK-NEXT:    %0 = npu.generic "aten.rand_like.default"(%x) side_effects
// CHECK-NEXT:    %1 = npu.exp %x
// CHECK-NEXT:    func.return %1
func.func @side_effects(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = npu.generic "aten.rand_like.default"(%x) side_effects : (tensor<4xf32>) -> tensor<4xf32>
  %1 = npu.exp %x : tensor<4xf32>
  func.return %1 : tensor<4xf32>
}
