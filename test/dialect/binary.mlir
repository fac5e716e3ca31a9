// Round trip of the broadcasting arithmetic ops (npu.add, sub, mul, div, pow,
// maximum, minimum): right-hand side as an operand or as a `scalar` property.

// RUN: forge-opt %s | forge-opt | filecheck %s
// RUN: forge-opt %s --print-op-generic | forge-opt | filecheck %s
// RUN: forge-opt %s --print-op-generic | forge-opt --print-op-generic | filecheck %s --check-prefix=GENERIC

// Tensor right-hand side: equal shapes, broadcasting and dynamic dims.
// CHECK-LABEL: func.func @tensor_rhs(%a: tensor<2x3xf32>, %b: tensor<3xf32>, %d: tensor<?x1xf32>) -> tensor<?x3xf32> {
// CHECK-NEXT:    [[ADD:%.*]] = npu.add %a, %a : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT:    [[SUB:%.*]] = npu.sub [[ADD]], %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT:    [[MUL:%.*]] = npu.mul %b, [[SUB]] : (tensor<3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT:    [[DIV:%.*]] = npu.div %d, %b : (tensor<?x1xf32>, tensor<3xf32>) -> tensor<?x3xf32>
// CHECK-NEXT:    [[POW:%.*]] = npu.pow [[DIV]], [[MUL]] : (tensor<?x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT:    [[MAX:%.*]] = npu.maximum [[POW]], %d : (tensor<2x3xf32>, tensor<?x1xf32>) -> tensor<2x3xf32>
// CHECK-NEXT:    [[MIN:%.*]] = npu.minimum %d, [[DIV]] : (tensor<?x1xf32>, tensor<?x3xf32>) -> tensor<?x3xf32>
// CHECK-NEXT:    func.return [[MIN]] : tensor<?x3xf32>
// CHECK-NEXT:  }
// GENERIC-LABEL: sym_name = "tensor_rhs"
// GENERIC:       [[ADD:%.*]] = "npu.add"(%a, %a) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
// GENERIC-NEXT:  "npu.sub"([[ADD]], %b) : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
// GENERIC:       "npu.minimum"(%d, {{%.*}}) : (tensor<?x1xf32>, tensor<?x3xf32>) -> tensor<?x3xf32>
func.func @tensor_rhs(%a: tensor<2x3xf32>, %b: tensor<3xf32>, %d: tensor<?x1xf32>) -> tensor<?x3xf32> {
  %0 = npu.add %a, %a : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %1 = npu.sub %0, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %2 = npu.mul %b, %1 : (tensor<3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %3 = npu.div %d, %b : (tensor<?x1xf32>, tensor<3xf32>) -> tensor<?x3xf32>
  %4 = npu.pow %3, %2 : (tensor<?x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %5 = npu.maximum %4, %d : (tensor<2x3xf32>, tensor<?x1xf32>) -> tensor<2x3xf32>
  %6 = npu.minimum %d, %3 : (tensor<?x1xf32>, tensor<?x3xf32>) -> tensor<?x3xf32>
  func.return %6 : tensor<?x3xf32>
}

// `scalar` property instead of a right-hand operand: float and integer scalars.
// CHECK-LABEL: func.func @scalar_rhs(%x: tensor<4x?xf16>, %i: tensor<4xi64>) -> tensor<4xi64> {
// CHECK-NEXT:    [[ADD:%.*]] = npu.add %x {scalar = 1.000000e+00 : f32} : (tensor<4x?xf16>) -> tensor<4x?xf16>
// CHECK-NEXT:    [[SUB:%.*]] = npu.sub [[ADD]] {scalar = -2.500000e-01 : f64} : (tensor<4x?xf16>) -> tensor<4x?xf16>
// CHECK-NEXT:    [[MUL:%.*]] = npu.mul [[SUB]] {scalar = 2 : i64} : (tensor<4x?xf16>) -> tensor<4x?xf16>
// CHECK-NEXT:    [[DIV:%.*]] = npu.div [[MUL]] {scalar = 8.000000e+00 : f32} : (tensor<4x?xf16>) -> tensor<4x?xf16>
// CHECK-NEXT:    [[POW:%.*]] = npu.pow %i {scalar = 2 : i64} : (tensor<4xi64>) -> tensor<4xi64>
// CHECK-NEXT:    [[MAX:%.*]] = npu.maximum [[POW]] {scalar = 0 : i64} : (tensor<4xi64>) -> tensor<4xi64>
// CHECK-NEXT:    [[MIN:%.*]] = npu.minimum [[MAX]] {scalar = -1 : i64} : (tensor<4xi64>) -> tensor<4xi64>
// CHECK-NEXT:    func.return [[MIN]] : tensor<4xi64>
// CHECK-NEXT:  }
// GENERIC-LABEL: sym_name = "scalar_rhs"
// GENERIC:       "npu.add"(%x) <{scalar = 1.000000e+00 : f32}> : (tensor<4x?xf16>) -> tensor<4x?xf16>
// GENERIC:       "npu.pow"(%i) <{scalar = 2 : i64}> : (tensor<4xi64>) -> tensor<4xi64>
func.func @scalar_rhs(%x: tensor<4x?xf16>, %i: tensor<4xi64>) -> tensor<4xi64> {
  %0 = npu.add %x {scalar = 1.0 : f32} : (tensor<4x?xf16>) -> tensor<4x?xf16>
  %1 = npu.sub %0 {scalar = -0.25 : f64} : (tensor<4x?xf16>) -> tensor<4x?xf16>
  %2 = npu.mul %1 {scalar = 2 : i64} : (tensor<4x?xf16>) -> tensor<4x?xf16>
  %3 = npu.div %2 {scalar = 8.0 : f32} : (tensor<4x?xf16>) -> tensor<4x?xf16>
  %4 = npu.pow %i {scalar = 2 : i64} : (tensor<4xi64>) -> tensor<4xi64>
  %5 = npu.maximum %4 {scalar = 0 : i64} : (tensor<4xi64>) -> tensor<4xi64>
  %6 = npu.minimum %5 {scalar = -1 : i64} : (tensor<4xi64>) -> tensor<4xi64>
  func.return %6 : tensor<4xi64>
}

// Mixed operand element types (the result type is then free), integers
// promoting to float (true division, int tensor times float scalar), bf16,
// rank-0 operands, and discardable attributes next to `scalar`.
// CHECK-LABEL: func.func @mixed(%x: tensor<2x2xbf16>, %i: tensor<i64>, %n: tensor<4xi64>) -> tensor<2x2xf32> {
// CHECK-NEXT:    [[MUL:%.*]] = npu.mul %x, %i : (tensor<2x2xbf16>, tensor<i64>) -> tensor<2x2xf32>
// CHECK-NEXT:    [[DIV:%.*]] = npu.div %n, %n : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xf32>
// CHECK-NEXT:    [[MULS:%.*]] = npu.mul %n {scalar = 5.000000e-01 : f64} : (tensor<4xi64>) -> tensor<4xf16>
// CHECK-NEXT:    [[ADD:%.*]] = npu.add [[MUL]] {device = "npu", vreg = 3 : i64, buffer = 1 : i64, scalar = 5.000000e-01 : f32} : (tensor<2x2xf32>) -> tensor<2x2xf32>
// CHECK-NEXT:    func.return [[ADD]] : tensor<2x2xf32>
// CHECK-NEXT:  }
// GENERIC-LABEL: sym_name = "mixed"
// GENERIC:       "npu.mul"(%x, %i) : (tensor<2x2xbf16>, tensor<i64>) -> tensor<2x2xf32>
// GENERIC-NEXT:  "npu.div"(%n, %n) : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xf32>
// GENERIC-NEXT:  "npu.mul"(%n) <{scalar = 5.000000e-01 : f64}> : (tensor<4xi64>) -> tensor<4xf16>
// GENERIC-NEXT:  "npu.add"({{%.*}}) <{scalar = 5.000000e-01 : f32}> {device = "npu", vreg = 3 : i64, buffer = 1 : i64} : (tensor<2x2xf32>) -> tensor<2x2xf32>
func.func @mixed(%x: tensor<2x2xbf16>, %i: tensor<i64>, %n: tensor<4xi64>) -> tensor<2x2xf32> {
  %0 = npu.mul %x, %i : (tensor<2x2xbf16>, tensor<i64>) -> tensor<2x2xf32>
  %1 = npu.div %n, %n : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xf32>
  %2 = npu.mul %n {scalar = 0.5 : f64} : (tensor<4xi64>) -> tensor<4xf16>
  %3 = npu.add %0 {scalar = 0.5 : f32, device = "npu", vreg = 3 : i64, buffer = 1 : i64} : (tensor<2x2xf32>) -> tensor<2x2xf32>
  func.return %3 : tensor<2x2xf32>
}
