// `canonicalize` (xDSL's driver) applies the `npu` dialect's canonicalization patterns
// (forge.dialects.canonicalization): folds that return the input bit for bit.
// RUN: forge-opt %s --split-input-file -p canonicalize | FileCheck %s
// RUN: forge-opt %s --split-input-file -p canonicalize --check-numerics > /dev/null

// Positive: a transpose undone by the same transpose, x * 1 and x + (-0.0).
// CHECK-LABEL: func.func @undone
// CHECK-NEXT: func.return %x
func.func @undone(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = npu.transpose %x {dim0 = 0 : i64, dim1 = 1 : i64} : tensor<2x3xf32> -> tensor<3x2xf32>
  %1 = npu.transpose %0 {dim0 = 1 : i64, dim1 = 0 : i64} : tensor<3x2xf32> -> tensor<2x3xf32>
  %2 = npu.mul %1 {scalar = 1.0 : f64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %3 = npu.add %2 {scalar = -0.0 : f64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %4 = npu.sub %3 {scalar = 0.0 : f64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  func.return %4 : tensor<2x3xf32>
}

// -----

// Positive: a view to its own type, a transpose of a dim with itself, a copy of a copy.
// CHECK-LABEL: func.func @same_type
// CHECK-NEXT: %[[COPY:.*]] = npu.contiguous %x
// CHECK-NEXT: func.return %[[COPY]]
func.func @same_type(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = npu.view %x : tensor<2x3xf32> -> tensor<2x3xf32>
  %1 = npu.transpose %0 {dim0 = 1 : i64, dim1 = 1 : i64} : tensor<2x3xf32> -> tensor<2x3xf32>
  %2 = npu.contiguous %1 : tensor<2x3xf32>
  %3 = npu.contiguous %2 : tensor<2x3xf32>
  func.return %3 : tensor<2x3xf32>
}

// -----

// Negative: x + 0.0 is not x (-0.0 + 0.0 is +0.0), x * 2 is not x, two different
// transposes and a real reshape stay.
// CHECK-LABEL: func.func @kept
// CHECK-NEXT: npu.add %x {scalar = 0.000000e+00 : f64}
// CHECK-NEXT: npu.mul
// CHECK-NEXT: npu.view
// CHECK-NEXT: npu.transpose
// CHECK-NEXT: npu.transpose
// CHECK-NEXT: npu.view
// CHECK-NEXT: npu.add
// CHECK-NEXT: func.return
func.func @kept(%x: tensor<2x3x4xf32>) -> tensor<3x4x2xf32> {
  %0 = npu.add %x {scalar = 0.0 : f64} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %1 = npu.mul %0 {scalar = 2.0 : f64} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %2 = npu.view %1 : tensor<2x3x4xf32> -> tensor<6x4xf32>
  %3 = npu.transpose %1 {dim0 = 0 : i64, dim1 = 1 : i64} : tensor<2x3x4xf32> -> tensor<3x2x4xf32>
  %4 = npu.transpose %3 {dim0 = 1 : i64, dim1 = 2 : i64} : tensor<3x2x4xf32> -> tensor<3x4x2xf32>
  %5 = npu.view %4 : tensor<3x4x2xf32> -> tensor<3x4x2xf32>
  %6 = npu.view %2 : tensor<6x4xf32> -> tensor<3x4x2xf32>
  %7 = npu.add %5, %6 : (tensor<3x4x2xf32>, tensor<3x4x2xf32>) -> tensor<3x4x2xf32>
  func.return %7 : tensor<3x4x2xf32>
}
