// Round trip of the comparison ops (npu.eq, ne, lt, le, gt, ge) and the
// boolean ops (npu.and, npu.or): broadcasting, `i1` results, `scalar` property.

// RUN: forge-opt %s | forge-opt | filecheck %s
// RUN: forge-opt %s --print-op-generic | forge-opt | filecheck %s
// RUN: forge-opt %s --print-op-generic | forge-opt --print-op-generic | filecheck %s --check-prefix=GENERIC

// Comparisons against a tensor: equal shapes, broadcasting, dynamic dims, i64.
// CHECK-LABEL: func.func @compare_tensor(%a: tensor<2x3xf32>, %b: tensor<3xf32>, %i: tensor<?x3xi64>) -> tensor<?x3xi1> {
// CHECK-NEXT:    [[EQ:%.*]] = npu.eq %a, %a : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xi1>
// CHECK-NEXT:    [[NE:%.*]] = npu.ne %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1>
// CHECK-NEXT:    [[LT:%.*]] = npu.lt %b, %a : (tensor<3xf32>, tensor<2x3xf32>) -> tensor<2x3xi1>
// CHECK-NEXT:    [[LE:%.*]] = npu.le %i, %i : (tensor<?x3xi64>, tensor<?x3xi64>) -> tensor<?x3xi1>
// CHECK-NEXT:    [[GT:%.*]] = npu.gt %i, %b : (tensor<?x3xi64>, tensor<3xf32>) -> tensor<?x3xi1>
// CHECK-NEXT:    [[GE:%.*]] = npu.ge %b, %i : (tensor<3xf32>, tensor<?x3xi64>) -> tensor<?x3xi1>
// CHECK-NEXT:    func.return [[GE]] : tensor<?x3xi1>
// CHECK-NEXT:  }
// GENERIC-LABEL: sym_name = "compare_tensor"
// GENERIC:       "npu.eq"(%a, %a) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xi1>
// GENERIC:       "npu.ge"(%b, %i) : (tensor<3xf32>, tensor<?x3xi64>) -> tensor<?x3xi1>
func.func @compare_tensor(%a: tensor<2x3xf32>, %b: tensor<3xf32>, %i: tensor<?x3xi64>) -> tensor<?x3xi1> {
  %0 = npu.eq %a, %a : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xi1>
  %1 = npu.ne %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1>
  %2 = npu.lt %b, %a : (tensor<3xf32>, tensor<2x3xf32>) -> tensor<2x3xi1>
  %3 = npu.le %i, %i : (tensor<?x3xi64>, tensor<?x3xi64>) -> tensor<?x3xi1>
  %4 = npu.gt %i, %b : (tensor<?x3xi64>, tensor<3xf32>) -> tensor<?x3xi1>
  %5 = npu.ge %b, %i : (tensor<3xf32>, tensor<?x3xi64>) -> tensor<?x3xi1>
  func.return %5 : tensor<?x3xi1>
}

// Comparisons against a `scalar` property, on f16 and i64.
// CHECK-LABEL: func.func @compare_scalar(%h: tensor<4xf16>, %i: tensor<4xi64>) -> tensor<4xi1> {
// CHECK-NEXT:    [[EQ:%.*]] = npu.eq %h {scalar = 0.000000e+00 : f32} : (tensor<4xf16>) -> tensor<4xi1>
// CHECK-NEXT:    [[NE:%.*]] = npu.ne %i {scalar = 7 : i64} : (tensor<4xi64>) -> tensor<4xi1>
// CHECK-NEXT:    [[LT:%.*]] = npu.lt %h {scalar = -1.500000e+00 : f64} : (tensor<4xf16>) -> tensor<4xi1>
// CHECK-NEXT:    [[LE:%.*]] = npu.le %i {scalar = 0 : i64} : (tensor<4xi64>) -> tensor<4xi1>
// CHECK-NEXT:    [[GT:%.*]] = npu.gt %i {scalar = -3 : i64} : (tensor<4xi64>) -> tensor<4xi1>
// CHECK-NEXT:    [[GE:%.*]] = npu.ge %h {device = "npu", scalar = 1.000000e+00 : f32} : (tensor<4xf16>) -> tensor<4xi1>
// CHECK-NEXT:    func.return [[GE]] : tensor<4xi1>
// CHECK-NEXT:  }
// GENERIC-LABEL: sym_name = "compare_scalar"
// GENERIC:       "npu.eq"(%h) <{scalar = 0.000000e+00 : f32}> : (tensor<4xf16>) -> tensor<4xi1>
// GENERIC:       "npu.ge"(%h) <{scalar = 1.000000e+00 : f32}> {device = "npu"} : (tensor<4xf16>) -> tensor<4xi1>
func.func @compare_scalar(%h: tensor<4xf16>, %i: tensor<4xi64>) -> tensor<4xi1> {
  %0 = npu.eq %h {scalar = 0.0 : f32} : (tensor<4xf16>) -> tensor<4xi1>
  %1 = npu.ne %i {scalar = 7 : i64} : (tensor<4xi64>) -> tensor<4xi1>
  %2 = npu.lt %h {scalar = -1.5 : f64} : (tensor<4xf16>) -> tensor<4xi1>
  %3 = npu.le %i {scalar = 0 : i64} : (tensor<4xi64>) -> tensor<4xi1>
  %4 = npu.gt %i {scalar = -3 : i64} : (tensor<4xi64>) -> tensor<4xi1>
  %5 = npu.ge %h {device = "npu", scalar = 1.0 : f32} : (tensor<4xf16>) -> tensor<4xi1>
  func.return %5 : tensor<4xi1>
}

// Boolean ops on i1 tensors: tensor operand (broadcast, dynamic) and scalar.
// CHECK-LABEL: func.func @logical(%p: tensor<2x?xi1>, %q: tensor<1xi1>) -> tensor<2x?xi1> {
// CHECK-NEXT:    [[AND:%.*]] = npu.and %p, %q : (tensor<2x?xi1>, tensor<1xi1>) -> tensor<2x?xi1>
// CHECK-NEXT:    [[OR:%.*]] = npu.or [[AND]], %p : (tensor<2x?xi1>, tensor<2x?xi1>) -> tensor<2x?xi1>
// CHECK-NEXT:    [[ANDS:%.*]] = npu.and [[OR]] {scalar = true} : (tensor<2x?xi1>) -> tensor<2x?xi1>
// CHECK-NEXT:    [[ORS:%.*]] = npu.or [[ANDS]] {scalar = 0 : i64} : (tensor<2x?xi1>) -> tensor<2x?xi1>
// CHECK-NEXT:    func.return [[ORS]] : tensor<2x?xi1>
// CHECK-NEXT:  }
// GENERIC-LABEL: sym_name = "logical"
// GENERIC:       "npu.and"(%p, %q) : (tensor<2x?xi1>, tensor<1xi1>) -> tensor<2x?xi1>
// GENERIC-NEXT:  "npu.or"
// GENERIC-NEXT:  "npu.and"({{%.*}}) <{scalar = true}> : (tensor<2x?xi1>) -> tensor<2x?xi1>
func.func @logical(%p: tensor<2x?xi1>, %q: tensor<1xi1>) -> tensor<2x?xi1> {
  %0 = npu.and %p, %q : (tensor<2x?xi1>, tensor<1xi1>) -> tensor<2x?xi1>
  %1 = npu.or %0, %p : (tensor<2x?xi1>, tensor<2x?xi1>) -> tensor<2x?xi1>
  %2 = npu.and %1 {scalar = true} : (tensor<2x?xi1>) -> tensor<2x?xi1>
  %3 = npu.or %2 {scalar = 0 : i64} : (tensor<2x?xi1>) -> tensor<2x?xi1>
  func.return %3 : tensor<2x?xi1>
}
