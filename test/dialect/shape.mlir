// Round trip of the data-movement ops (npu.view, reshape, transpose, permute,
// expand, slice, unsqueeze, squeeze, cat, split), npu.cast, npu.constant,
// npu.contiguous, npu.dropout and npu.where.

// RUN: forge-opt %s | forge-opt | filecheck %s
// RUN: forge-opt %s --print-op-generic | forge-opt | filecheck %s
// RUN: forge-opt %s --print-op-generic | forge-opt --print-op-generic | filecheck %s --check-prefix=GENERIC

// view / reshape: same element count, dynamic dims, rank 0, i64.
// CHECK-LABEL: func.func @view_reshape(%x: tensor<2x3x4xf32>, %d: tensor<?x4xi64>, %s: tensor<1xf32>) -> tensor<f32> {
// CHECK-NEXT:    [[V:%.*]] = npu.view %x : tensor<2x3x4xf32> -> tensor<6x4xf32>
// CHECK-NEXT:    [[R:%.*]] = npu.reshape [[V]] {device = "npu", vreg = 3 : i64, buffer = 1 : i64} : tensor<6x4xf32> -> tensor<24xf32>
// CHECK-NEXT:    [[VD:%.*]] = npu.view %d : tensor<?x4xi64> -> tensor<?x2x2xi64>
// CHECK-NEXT:    [[S:%.*]] = npu.reshape %s : tensor<1xf32> -> tensor<f32>
// CHECK-NEXT:    func.return [[S]] : tensor<f32>
// CHECK-NEXT:  }
// GENERIC-LABEL: sym_name = "view_reshape"
// GENERIC:       "npu.view"(%x) : (tensor<2x3x4xf32>) -> tensor<6x4xf32>
// GENERIC-NEXT:  "npu.reshape"({{%.*}}) {device = "npu", vreg = 3 : i64, buffer = 1 : i64} : (tensor<6x4xf32>) -> tensor<24xf32>
func.func @view_reshape(%x: tensor<2x3x4xf32>, %d: tensor<?x4xi64>, %s: tensor<1xf32>) -> tensor<f32> {
  %0 = npu.view %x : tensor<2x3x4xf32> -> tensor<6x4xf32>
  %1 = npu.reshape %0 {device = "npu", vreg = 3 : i64, buffer = 1 : i64} : tensor<6x4xf32> -> tensor<24xf32>
  %2 = npu.view %d : tensor<?x4xi64> -> tensor<?x2x2xi64>
  %3 = npu.reshape %s : tensor<1xf32> -> tensor<f32>
  func.return %3 : tensor<f32>
}

// transpose / permute: positive and negative dims, dynamic dims, f16.
// CHECK-LABEL: func.func @transpose_permute(%x: tensor<2x?x8x16xf16>) -> tensor<16x2x8x?xf16> {
// CHECK-NEXT:    [[T:%.*]] = npu.transpose %x {dim0 = 1 : i64, dim1 = 2 : i64} : tensor<2x?x8x16xf16> -> tensor<2x8x?x16xf16>
// CHECK-NEXT:    [[TN:%.*]] = npu.transpose [[T]] {dim0 = -1 : i64, dim1 = -2 : i64} : tensor<2x8x?x16xf16> -> tensor<2x8x16x?xf16>
// CHECK-NEXT:    [[P:%.*]] = npu.permute %x {dims = array<i64: 3, 0, 2, 1>} : tensor<2x?x8x16xf16> -> tensor<16x2x8x?xf16>
// CHECK-NEXT:    [[PN:%.*]] = npu.permute [[P]] {device = "cpu", dims = array<i64: 0, 1, -2, -1>} : tensor<16x2x8x?xf16> -> tensor<16x2x8x?xf16>
// CHECK-NEXT:    func.return [[PN]] : tensor<16x2x8x?xf16>
// CHECK-NEXT:  }
// GENERIC-LABEL: sym_name = "transpose_permute"
// GENERIC:       "npu.transpose"(%x) <{dim0 = 1 : i64, dim1 = 2 : i64}> : (tensor<2x?x8x16xf16>) -> tensor<2x8x?x16xf16>
// GENERIC:       "npu.permute"(%x) <{dims = array<i64: 3, 0, 2, 1>}> : (tensor<2x?x8x16xf16>) -> tensor<16x2x8x?xf16>
func.func @transpose_permute(%x: tensor<2x?x8x16xf16>) -> tensor<16x2x8x?xf16> {
  %0 = npu.transpose %x {dim0 = 1 : i64, dim1 = 2 : i64} : tensor<2x?x8x16xf16> -> tensor<2x8x?x16xf16>
  %1 = npu.transpose %0 {dim0 = -1 : i64, dim1 = -2 : i64} : tensor<2x8x?x16xf16> -> tensor<2x8x16x?xf16>
  %2 = npu.permute %x {dims = array<i64: 3, 0, 2, 1>} : tensor<2x?x8x16xf16> -> tensor<16x2x8x?xf16>
  %3 = npu.permute %2 {dims = array<i64: 0, 1, -2, -1>, device = "cpu"} : tensor<16x2x8x?xf16> -> tensor<16x2x8x?xf16>
  func.return %3 : tensor<16x2x8x?xf16>
}

// expand: size-1 dims grow, new leading dims, dynamic dims.
// CHECK-LABEL: func.func @expand(%x: tensor<1x4xf32>, %d: tensor<?x1xi1>) -> tensor<3x?x5xi1> {
// CHECK-NEXT:    [[E:%.*]] = npu.expand %x : tensor<1x4xf32> -> tensor<2x3x4xf32>
// CHECK-NEXT:    [[ED:%.*]] = npu.expand %d {vreg = 7 : i64} : tensor<?x1xi1> -> tensor<3x?x5xi1>
// CHECK-NEXT:    func.return [[ED]] : tensor<3x?x5xi1>
// CHECK-NEXT:  }
// GENERIC-LABEL: sym_name = "expand"
// GENERIC:       "npu.expand"(%x) : (tensor<1x4xf32>) -> tensor<2x3x4xf32>
func.func @expand(%x: tensor<1x4xf32>, %d: tensor<?x1xi1>) -> tensor<3x?x5xi1> {
  %0 = npu.expand %x : tensor<1x4xf32> -> tensor<2x3x4xf32>
  %1 = npu.expand %d {vreg = 7 : i64} : tensor<?x1xi1> -> tensor<3x?x5xi1>
  func.return %1 : tensor<3x?x5xi1>
}

// slice: step 1 and 2, negative start, end clamped (INT64_MAX), dynamic dim.
// CHECK-LABEL: func.func @slice(%x: tensor<8x10xf32>, %d: tensor<?x4xbf16>) -> tensor<?x4xbf16> {
// CHECK-NEXT:    [[A:%.*]] = npu.slice %x {dim = 1 : i64, start = 2 : i64, end = 6 : i64, step = 1 : i64} : tensor<8x10xf32> -> tensor<8x4xf32>
// CHECK-NEXT:    [[B:%.*]] = npu.slice %x {dim = 0 : i64, start = 1 : i64, end = 9223372036854775807 : i64, step = 2 : i64} : tensor<8x10xf32> -> tensor<4x10xf32>
// CHECK-NEXT:    [[C:%.*]] = npu.slice %x {dim = -1 : i64, start = -3 : i64, end = 10 : i64, step = 1 : i64} : tensor<8x10xf32> -> tensor<8x3xf32>
// CHECK-NEXT:    [[D:%.*]] = npu.slice %d {device = "npu", dim = 0 : i64, start = 0 : i64, end = 2 : i64, step = 1 : i64} : tensor<?x4xbf16> -> tensor<?x4xbf16>
// CHECK-NEXT:    func.return [[D]] : tensor<?x4xbf16>
// CHECK-NEXT:  }
// GENERIC-LABEL: sym_name = "slice"
// GENERIC:       "npu.slice"(%x) <{dim = 1 : i64, start = 2 : i64, end = 6 : i64, step = 1 : i64}> : (tensor<8x10xf32>) -> tensor<8x4xf32>
func.func @slice(%x: tensor<8x10xf32>, %d: tensor<?x4xbf16>) -> tensor<?x4xbf16> {
  %0 = npu.slice %x {dim = 1 : i64, start = 2 : i64, end = 6 : i64, step = 1 : i64} : tensor<8x10xf32> -> tensor<8x4xf32>
  %1 = npu.slice %x {dim = 0 : i64, start = 1 : i64, end = 9223372036854775807 : i64, step = 2 : i64} : tensor<8x10xf32> -> tensor<4x10xf32>
  %2 = npu.slice %x {dim = -1 : i64, start = -3 : i64, end = 10 : i64, step = 1 : i64} : tensor<8x10xf32> -> tensor<8x3xf32>
  %3 = npu.slice %d {dim = 0 : i64, start = 0 : i64, end = 2 : i64, step = 1 : i64, device = "npu"} : tensor<?x4xbf16> -> tensor<?x4xbf16>
  func.return %3 : tensor<?x4xbf16>
}

// transpose of a rank-0 tensor is a no-op; like ATen it accepts dims 0 and -1.
// CHECK-LABEL: func.func @transpose_scalar(%s: tensor<f32>) -> tensor<f32> {
// CHECK-NEXT:    [[T:%.*]] = npu.transpose %s {dim0 = 0 : i64, dim1 = -1 : i64} : tensor<f32> -> tensor<f32>
// CHECK-NEXT:    func.return [[T]] : tensor<f32>
// CHECK-NEXT:  }
func.func @transpose_scalar(%s: tensor<f32>) -> tensor<f32> {
  %0 = npu.transpose %s {dim0 = 0 : i64, dim1 = -1 : i64} : tensor<f32> -> tensor<f32>
  func.return %0 : tensor<f32>
}

// unsqueeze / squeeze: front, back (-1), squeeze of a non-1 dim is the identity.
// CHECK-LABEL: func.func @unsqueeze_squeeze(%x: tensor<4x?xf32>) -> tensor<4x?xf32> {
// CHECK-NEXT:    [[U0:%.*]] = npu.unsqueeze %x {dim = 0 : i64} : tensor<4x?xf32> -> tensor<1x4x?xf32>
// CHECK-NEXT:    [[U1:%.*]] = npu.unsqueeze [[U0]] {dim = -1 : i64} : tensor<1x4x?xf32> -> tensor<1x4x?x1xf32>
// CHECK-NEXT:    [[S1:%.*]] = npu.squeeze [[U1]] {dim = -1 : i64} : tensor<1x4x?x1xf32> -> tensor<1x4x?xf32>
// CHECK-NEXT:    [[S0:%.*]] = npu.squeeze [[S1]] {buffer = 4 : i64, dim = 0 : i64} : tensor<1x4x?xf32> -> tensor<4x?xf32>
// CHECK-NEXT:    [[ID:%.*]] = npu.squeeze [[S0]] {dim = 0 : i64} : tensor<4x?xf32> -> tensor<4x?xf32>
// CHECK-NEXT:    func.return [[ID]] : tensor<4x?xf32>
// CHECK-NEXT:  }
// GENERIC-LABEL: sym_name = "unsqueeze_squeeze"
// GENERIC:       "npu.unsqueeze"(%x) <{dim = 0 : i64}> : (tensor<4x?xf32>) -> tensor<1x4x?xf32>
// GENERIC:       "npu.squeeze"({{%.*}}) <{dim = -1 : i64}> : (tensor<1x4x?x1xf32>) -> tensor<1x4x?xf32>
func.func @unsqueeze_squeeze(%x: tensor<4x?xf32>) -> tensor<4x?xf32> {
  %0 = npu.unsqueeze %x {dim = 0 : i64} : tensor<4x?xf32> -> tensor<1x4x?xf32>
  %1 = npu.unsqueeze %0 {dim = -1 : i64} : tensor<1x4x?xf32> -> tensor<1x4x?x1xf32>
  %2 = npu.squeeze %1 {dim = -1 : i64} : tensor<1x4x?x1xf32> -> tensor<1x4x?xf32>
  %3 = npu.squeeze %2 {dim = 0 : i64, buffer = 4 : i64} : tensor<1x4x?xf32> -> tensor<4x?xf32>
  %4 = npu.squeeze %3 {dim = 0 : i64} : tensor<4x?xf32> -> tensor<4x?xf32>
  func.return %4 : tensor<4x?xf32>
}

// squeeze of a dynamic dim may either drop it (it was 1) or keep it.
// CHECK-LABEL: func.func @squeeze_dynamic(%x: tensor<?x4xf32>) -> tensor<4xf32> {
// CHECK-NEXT:    [[KEEP:%.*]] = npu.squeeze %x {dim = 0 : i64} : tensor<?x4xf32> -> tensor<?x4xf32>
// CHECK-NEXT:    [[DROP:%.*]] = npu.squeeze [[KEEP]] {dim = 0 : i64} : tensor<?x4xf32> -> tensor<4xf32>
// CHECK-NEXT:    func.return [[DROP]] : tensor<4xf32>
// CHECK-NEXT:  }
func.func @squeeze_dynamic(%x: tensor<?x4xf32>) -> tensor<4xf32> {
  %0 = npu.squeeze %x {dim = 0 : i64} : tensor<?x4xf32> -> tensor<?x4xf32>
  %1 = npu.squeeze %0 {dim = 0 : i64} : tensor<?x4xf32> -> tensor<4xf32>
  func.return %1 : tensor<4xf32>
}

// cat: one input, several inputs, negative dim, a dynamic size along dim.
// CHECK-LABEL: func.func @cat(%a: tensor<2x3xf32>, %b: tensor<2x5xf32>, %d: tensor<2x?xf32>) -> tensor<2x?xf32> {
// CHECK-NEXT:    [[ONE:%.*]] = npu.cat %a {dim = 0 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT:    [[TWO:%.*]] = npu.cat %a, %b {dim = -1 : i64} : (tensor<2x3xf32>, tensor<2x5xf32>) -> tensor<2x8xf32>
// CHECK-NEXT:    [[ROWS:%.*]] = npu.cat %a, %a, [[ONE]] {dim = 0 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<6x3xf32>
// CHECK-NEXT:    [[DYN:%.*]] = npu.cat %a, %d, %b {device = "npu", dim = 1 : i64} : (tensor<2x3xf32>, tensor<2x?xf32>, tensor<2x5xf32>) -> tensor<2x?xf32>
// CHECK-NEXT:    func.return [[DYN]] : tensor<2x?xf32>
// CHECK-NEXT:  }
// GENERIC-LABEL: sym_name = "cat"
// GENERIC:       "npu.cat"(%a) <{dim = 0 : i64}> : (tensor<2x3xf32>) -> tensor<2x3xf32>
// GENERIC-NEXT:  "npu.cat"(%a, %b) <{dim = -1 : i64}> : (tensor<2x3xf32>, tensor<2x5xf32>) -> tensor<2x8xf32>
func.func @cat(%a: tensor<2x3xf32>, %b: tensor<2x5xf32>, %d: tensor<2x?xf32>) -> tensor<2x?xf32> {
  %0 = npu.cat %a {dim = 0 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %1 = npu.cat %a, %b {dim = -1 : i64} : (tensor<2x3xf32>, tensor<2x5xf32>) -> tensor<2x8xf32>
  %2 = npu.cat %a, %a, %0 {dim = 0 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<6x3xf32>
  %3 = npu.cat %a, %d, %b {dim = 1 : i64, device = "npu"} : (tensor<2x3xf32>, tensor<2x?xf32>, tensor<2x5xf32>) -> tensor<2x?xf32>
  func.return %3 : tensor<2x?xf32>
}

// split: several results (uneven sizes), one result, a dynamic split dimension.
// CHECK-LABEL: func.func @split(%x: tensor<4x10xf32>, %d: tensor<?x3xi64>) -> tensor<4x7xf32> {
// CHECK-NEXT:    [[A:%.*]], [[B:%.*]], [[C:%.*]] = npu.split %x {dim = 1 : i64, split_sizes = array<i64: 3, 0, 7>} : tensor<4x10xf32> -> tensor<4x3xf32>, tensor<4x0xf32>, tensor<4x7xf32>
// CHECK-NEXT:    [[ONE:%.*]] = npu.split %x {dim = -2 : i64, split_sizes = array<i64: 4>} : tensor<4x10xf32> -> tensor<4x10xf32>
// CHECK-NEXT:    [[D0:%.*]], [[D1:%.*]] = npu.split %d {device = "cpu", dim = 0 : i64, split_sizes = array<i64: 1, 2>} : tensor<?x3xi64> -> tensor<1x3xi64>, tensor<2x3xi64>
// CHECK-NEXT:    func.return [[C]] : tensor<4x7xf32>
// CHECK-NEXT:  }
// GENERIC-LABEL: sym_name = "split"
// GENERIC:       {{%.*}}, {{%.*}}, {{%.*}} = "npu.split"(%x) <{dim = 1 : i64, split_sizes = array<i64: 3, 0, 7>}> : (tensor<4x10xf32>) -> (tensor<4x3xf32>, tensor<4x0xf32>, tensor<4x7xf32>)
func.func @split(%x: tensor<4x10xf32>, %d: tensor<?x3xi64>) -> tensor<4x7xf32> {
  %0, %1, %2 = npu.split %x {dim = 1 : i64, split_sizes = array<i64: 3, 0, 7>} : tensor<4x10xf32> -> tensor<4x3xf32>, tensor<4x0xf32>, tensor<4x7xf32>
  %3 = npu.split %x {dim = -2 : i64, split_sizes = array<i64: 4>} : tensor<4x10xf32> -> tensor<4x10xf32>
  %4:2 = npu.split %d {dim = 0 : i64, split_sizes = array<i64: 1, 2>, device = "cpu"} : tensor<?x3xi64> -> tensor<1x3xi64>, tensor<2x3xi64>
  func.return %2 : tensor<4x7xf32>
}

// cast between float widths, to/from integers and i1, with dynamic dims.
// CHECK-LABEL: func.func @cast(%x: tensor<2x?xf32>) -> tensor<2x?xi1> {
// CHECK-NEXT:    [[H:%.*]] = npu.cast %x : tensor<2x?xf32> -> tensor<2x?xf16>
// CHECK-NEXT:    [[B:%.*]] = npu.cast [[H]] : tensor<2x?xf16> -> tensor<2x?xbf16>
// CHECK-NEXT:    [[I:%.*]] = npu.cast [[B]] {device = "cpu"} : tensor<2x?xbf16> -> tensor<2x?xi64>
// CHECK-NEXT:    [[P:%.*]] = npu.cast [[I]] : tensor<2x?xi64> -> tensor<2x?xi1>
// CHECK-NEXT:    func.return [[P]] : tensor<2x?xi1>
// CHECK-NEXT:  }
// GENERIC-LABEL: sym_name = "cast"
// GENERIC:       "npu.cast"(%x) : (tensor<2x?xf32>) -> tensor<2x?xf16>
func.func @cast(%x: tensor<2x?xf32>) -> tensor<2x?xi1> {
  %0 = npu.cast %x : tensor<2x?xf32> -> tensor<2x?xf16>
  %1 = npu.cast %0 : tensor<2x?xf16> -> tensor<2x?xbf16>
  %2 = npu.cast %1 {device = "cpu"} : tensor<2x?xbf16> -> tensor<2x?xi64>
  %3 = npu.cast %2 : tensor<2x?xi64> -> tensor<2x?xi1>
  func.return %3 : tensor<2x?xi1>
}

// constant: splat and non-splat, float, integer and boolean, rank 0.
// CHECK-LABEL: func.func @constant() -> tensor<2x2xf32> {
// CHECK-NEXT:    [[F:%.*]] = npu.constant dense<[[1.000000e+00, 2.000000e+00], [3.000000e+00, 4.000000e+00]]> : tensor<2x2xf32>
// CHECK-NEXT:    [[S:%.*]] = npu.constant dense<5> : tensor<i64>
// CHECK-NEXT:    [[Z:%.*]] = npu.constant {device = "cpu", buffer = 0 : i64} dense<0.000000e+00> : tensor<4x8xf16>
// CHECK-NEXT:    [[B:%.*]] = npu.constant dense<[true, false]> : tensor<2xi1>
// CHECK-NEXT:    func.return [[F]] : tensor<2x2xf32>
// CHECK-NEXT:  }
// GENERIC-LABEL: sym_name = "constant"
// GENERIC:       "npu.constant"() <{value = dense<{{\[\[}}1.000000e+00, 2.000000e+00], [3.000000e+00, 4.000000e+00]]> : tensor<2x2xf32>}> : () -> tensor<2x2xf32>
// GENERIC-NEXT:  "npu.constant"() <{value = dense<5> : tensor<i64>}> : () -> tensor<i64>
// GENERIC-NEXT:  "npu.constant"() <{value = dense<0.000000e+00> : tensor<4x8xf16>}> {device = "cpu", buffer = 0 : i64} : () -> tensor<4x8xf16>
func.func @constant() -> tensor<2x2xf32> {
  %0 = npu.constant dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>
  %1 = npu.constant dense<5> : tensor<i64>
  %2 = npu.constant {device = "cpu", buffer = 0 : i64} dense<0.0> : tensor<4x8xf16>
  %3 = npu.constant dense<[true, false]> : tensor<2xi1>
  func.return %0 : tensor<2x2xf32>
}

// contiguous (any element type) and dropout: eval mode, `train`, p at 0 and 1.
// CHECK-LABEL: func.func @contiguous_dropout(%x: tensor<2x?xf32>, %i: tensor<3xi64>) -> tensor<2x?xf32> {
// CHECK-NEXT:    [[C:%.*]] = npu.contiguous %x : tensor<2x?xf32>
// CHECK-NEXT:    [[CI:%.*]] = npu.contiguous %i {device = "npu", vreg = 3 : i64, buffer = 1 : i64} : tensor<3xi64>
// CHECK-NEXT:    [[EVAL:%.*]] = npu.dropout [[C]] {p = 1.000000e-01 : f64} : tensor<2x?xf32>
// CHECK-NEXT:    [[TRAIN:%.*]] = npu.dropout [[EVAL]] {p = 5.000000e-01 : f32, train} : tensor<2x?xf32>
// CHECK-NEXT:    [[ZERO:%.*]] = npu.dropout [[TRAIN]] {p = 0.000000e+00 : f64} : tensor<2x?xf32>
// CHECK-NEXT:    [[ONE:%.*]] = npu.dropout [[ZERO]] {p = 1.000000e+00 : f64, train} : tensor<2x?xf32>
// CHECK-NEXT:    func.return [[ONE]] : tensor<2x?xf32>
// CHECK-NEXT:  }
// GENERIC-LABEL: sym_name = "contiguous_dropout"
// GENERIC:       "npu.contiguous"(%x) : (tensor<2x?xf32>) -> tensor<2x?xf32>
// GENERIC:       "npu.dropout"({{%.*}}) <{p = 5.000000e-01 : f32, train}> : (tensor<2x?xf32>) -> tensor<2x?xf32>
func.func @contiguous_dropout(%x: tensor<2x?xf32>, %i: tensor<3xi64>) -> tensor<2x?xf32> {
  %0 = npu.contiguous %x : tensor<2x?xf32>
  %1 = npu.contiguous %i {device = "npu", vreg = 3 : i64, buffer = 1 : i64} : tensor<3xi64>
  %2 = npu.dropout %0 {p = 0.1 : f64} : tensor<2x?xf32>
  %3 = npu.dropout %2 {p = 0.5 : f32, train} : tensor<2x?xf32>
  %4 = npu.dropout %3 {p = 0.0 : f64} : tensor<2x?xf32>
  %5 = npu.dropout %4 {p = 1.0 : f64, train} : tensor<2x?xf32>
  func.return %5 : tensor<2x?xf32>
}

// where: tensor on_false (broadcast, dynamic) and a `scalar` on_false.
// CHECK-LABEL: func.func @where(%c: tensor<2x1xi1>, %t: tensor<2x4xf32>, %f: tensor<4xf32>, %d: tensor<?x4xi64>) -> tensor<?x4xi64> {
// CHECK-NEXT:    [[W:%.*]] = npu.where %c, %t, %f : (tensor<2x1xi1>, tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT:    [[WS:%.*]] = npu.where %c, %t {scalar = -1.000000e+09 : f32} : (tensor<2x1xi1>, tensor<2x4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT:    [[WI:%.*]] = npu.where %c, %d {device = "npu", scalar = 0 : i64} : (tensor<2x1xi1>, tensor<?x4xi64>) -> tensor<?x4xi64>
// CHECK-NEXT:    func.return [[WI]] : tensor<?x4xi64>
// CHECK-NEXT:  }
// GENERIC-LABEL: sym_name = "where"
// GENERIC:       "npu.where"(%c, %t, %f) : (tensor<2x1xi1>, tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
// GENERIC-NEXT:  "npu.where"(%c, %t) <{scalar = -1.000000e+09 : f32}> : (tensor<2x1xi1>, tensor<2x4xf32>) -> tensor<2x4xf32>
func.func @where(%c: tensor<2x1xi1>, %t: tensor<2x4xf32>, %f: tensor<4xf32>, %d: tensor<?x4xi64>) -> tensor<?x4xi64> {
  %0 = npu.where %c, %t, %f : (tensor<2x1xi1>, tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %1 = npu.where %c, %t {scalar = -1.0e+09 : f32} : (tensor<2x1xi1>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %2 = npu.where %c, %d {scalar = 0 : i64, device = "npu"} : (tensor<2x1xi1>, tensor<?x4xi64>) -> tensor<?x4xi64>
  func.return %2 : tensor<?x4xi64>
}
