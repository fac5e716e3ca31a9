// npu-assign-vregs numbers op results densely in op order; several results take
// consecutive numbers; arguments and ops without results get none.

// RUN: forge-opt %s -p npu-assign-vregs --split-input-file | filecheck %s

// Positive: dense numbering, multi-result ops take consecutive numbers.
// CHECK-LABEL: func.func @numbering
// CHECK:         %0 = npu.exp %x {vreg = 0 : i64}
// CHECK-NEXT:    %1, %2 = npu.split %0 {vreg = 1 : i64,
// CHECK-NEXT:    %3 = npu.add %1, %2 {vreg = 3 : i64}
func.func @numbering(%x: tensor<4xf32>) -> tensor<2xf32> {
  %0 = npu.exp %x : tensor<4xf32>
  %1, %2 = npu.split %0 {dim = 0 : i64, split_sizes = array<i64: 2, 2>} : tensor<4xf32> -> tensor<2xf32>, tensor<2xf32>
  %3 = npu.add %1, %2 : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  func.return %3 : tensor<2xf32>
}

// -----

// Positive: stale numbers are replaced, unused values still get one.
// CHECK-LABEL: func.func @renumber
// CHECK:         npu.exp %x {vreg = 0 : i64}
// CHECK-NEXT:    npu.tanh %x {vreg = 1 : i64}
func.func @renumber(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = npu.exp %x {vreg = 7 : i64} : tensor<4xf32>
  %1 = npu.tanh %x {vreg = 3 : i64} : tensor<4xf32>
  func.return %0 : tensor<4xf32>
}

// -----

// Negative: an op without results (an assert) gets no vreg, and numbering skips it.
// CHECK-LABEL: func.func @no_results
// CHECK:         npu.generic "aten._assert_tensor_metadata.default"(%x) side_effects : (tensor<4xf32>) -> ()
// CHECK-NEXT:    npu.exp %x {vreg = 0 : i64}
func.func @no_results(%x: tensor<4xf32>) -> tensor<4xf32> {
  npu.generic "aten._assert_tensor_metadata.default"(%x) side_effects : (tensor<4xf32>) -> ()
  %0 = npu.exp %x : tensor<4xf32>
  func.return %0 : tensor<4xf32>
}

// -----

// Negative: function arguments are not virtual registers.
// CHECK-LABEL: func.func @arguments_only(%x: tensor<4xf32>) -> tensor<4xf32> {
// CHECK-NEXT:    func.return %x
func.func @arguments_only(%x: tensor<4xf32>) -> tensor<4xf32> {
  func.return %x : tensor<4xf32>
}
