// The lowerings that rewrite an op algebraically (conversion/nnfactory_graph.py's
// docstring: subtraction, rsqrt, reciprocal, negation, expand, layer/RMS norm) at large
// magnitudes, mixed signs and against tiny operands: --check-numerics runs each placed
// function's compiled executable against the reference executor and must find nothing.
// Elementwise checks at up to fp32's range, with infinities and NaN, are in
// test/python/conversion/test_lowering_extremes.py.

// RUN: forge-opt %s -p forge-pipeline --check-numerics | filecheck %s
// CHECK-COUNT-7: device = "npu"

// x * 1e30 - y: the small operand vanishes in both.
func.func @sub(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = npu.mul %x {scalar = 1.000000e+30 : f64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %1 = npu.sub %0, %y : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %1 : tensor<4x8xf32>
}

// rsqrt(x * x * 1e-30 + 1e-38): results near 1e34.
func.func @rsqrt(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = npu.mul %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %1 = npu.mul %0 {scalar = 1.000000e-30 : f64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %2 = npu.add %1 {scalar = 1.000000e-38 : f64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %3 = npu.rsqrt %2 : tensor<4x8xf32>
  func.return %3 : tensor<4x8xf32>
}

// 1 / (x * 1e-36) and its negation.
func.func @reciprocal_neg(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = npu.mul %x {scalar = 1.000000e-36 : f64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %1 = npu.reciprocal %0 : tensor<4x8xf32>
  %2 = npu.neg %1 : tensor<4x8xf32>
  func.return %2 : tensor<4x8xf32>
}

// expand is x * ones: exact at 1e36.
func.func @expand(%x: tensor<4x1x8xf32>) -> tensor<4x3x8xf32> {
  %0 = npu.mul %x {scalar = 1.000000e+36 : f64} : (tensor<4x1x8xf32>) -> tensor<4x1x8xf32>
  %1 = npu.expand %0 : tensor<4x1x8xf32> -> tensor<4x3x8xf32>
  func.return %1 : tensor<4x3x8xf32>
}

// layer and RMS norm of values near 1e18 (their squares near 1e36, below fp32's max).
func.func @norms(%x: tensor<4x8xf32>, %w: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %0 = npu.mul %x {scalar = 1.000000e+18 : f64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %1 = npu.layer_norm %0 weight %w : tensor<8xf32> bias %b : tensor<8xf32> {normalized_shape = array<i64: 8>, eps = 1.0e-05 : f64} : tensor<4x8xf32> -> tensor<4x8xf32>
  %2 = npu.rms_norm %0 weight %w : tensor<8xf32> {normalized_shape = array<i64: 8>, eps = 1.0e-06 : f64} : tensor<4x8xf32> -> tensor<4x8xf32>
  %3 = npu.add %1, %2 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %3 : tensor<4x8xf32>
}
