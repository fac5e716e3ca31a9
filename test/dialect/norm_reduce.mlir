// Round trip of softmax, the normalizations (npu.layer_norm, npu.rms_norm), the
// reductions (npu.mean, npu.sum) and npu.embedding.

// RUN: forge-opt %s | forge-opt | filecheck %s
// RUN: forge-opt %s --print-op-generic | forge-opt | filecheck %s
// RUN: forge-opt %s --print-op-generic | forge-opt --print-op-generic | filecheck %s --check-prefix=GENERIC

// softmax: positive and negative `dim`, dynamic dims, f16.
// CHECK-LABEL: func.func @softmax(%x: tensor<2x?x8xf32>, %h: tensor<4x4xf16>) -> tensor<4x4xf16> {
// CHECK-NEXT:    [[LAST:%.*]] = npu.softmax %x {dim = -1 : i64} : tensor<2x?x8xf32>
// CHECK-NEXT:    [[MID:%.*]] = npu.softmax [[LAST]] {device = "npu", dim = 1 : i64} : tensor<2x?x8xf32>
// CHECK-NEXT:    [[H:%.*]] = npu.softmax %h {dim = 0 : i64} : tensor<4x4xf16>
// CHECK-NEXT:    func.return [[H]] : tensor<4x4xf16>
// CHECK-NEXT:  }
// GENERIC-LABEL: sym_name = "softmax"
// GENERIC:       "npu.softmax"(%x) <{dim = -1 : i64}> : (tensor<2x?x8xf32>) -> tensor<2x?x8xf32>
// GENERIC-NEXT:  "npu.softmax"({{%.*}}) <{dim = 1 : i64}> {device = "npu"} : (tensor<2x?x8xf32>) -> tensor<2x?x8xf32>
func.func @softmax(%x: tensor<2x?x8xf32>, %h: tensor<4x4xf16>) -> tensor<4x4xf16> {
  %0 = npu.softmax %x {dim = -1 : i64} : tensor<2x?x8xf32>
  %1 = npu.softmax %0 {dim = 1 : i64, device = "npu"} : tensor<2x?x8xf32>
  %2 = npu.softmax %h {dim = 0 : i64} : tensor<4x4xf16>
  func.return %2 : tensor<4x4xf16>
}

// layer_norm: weight and bias, neither, weight only, bias only; two-dim
// normalized_shape and a dynamic batch dim. operandSegmentSizes shows in generic form.
// CHECK-LABEL: func.func @layer_norm(%x: tensor<?x8x16xf32>, %w: tensor<16xf32>, %b: tensor<16xf32>, %w2: tensor<8x16xf32>) -> tensor<?x8x16xf32> {
// CHECK-NEXT:    [[BOTH:%.*]] = npu.layer_norm %x weight %w : tensor<16xf32> bias %b : tensor<16xf32> {normalized_shape = array<i64: 16>, eps = 1.000000e-05 : f64} : tensor<?x8x16xf32> -> tensor<?x8x16xf32>
// CHECK-NEXT:    [[NONE:%.*]] = npu.layer_norm [[BOTH]] {normalized_shape = array<i64: 16>, eps = 1.000000e-05 : f64} : tensor<?x8x16xf32> -> tensor<?x8x16xf32>
// CHECK-NEXT:    [[W:%.*]] = npu.layer_norm [[NONE]] weight %w2 : tensor<8x16xf32> {normalized_shape = array<i64: 8, 16>, eps = 1.000000e-12 : f64} : tensor<?x8x16xf32> -> tensor<?x8x16xf32>
// CHECK-NEXT:    [[B:%.*]] = npu.layer_norm [[W]] bias %b : tensor<16xf32> {device = "npu", vreg = 3 : i64, buffer = 1 : i64, normalized_shape = array<i64: 16>, eps = 1.000000e-05 : f32} : tensor<?x8x16xf32> -> tensor<?x8x16xf32>
// CHECK-NEXT:    func.return [[B]] : tensor<?x8x16xf32>
// CHECK-NEXT:  }
// GENERIC-LABEL: sym_name = "layer_norm"
// GENERIC:       "npu.layer_norm"(%x, %w, %b) <{normalized_shape = array<i64: 16>, eps = 1.000000e-05 : f64, operandSegmentSizes = array<i32: 1, 1, 1>}> : (tensor<?x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<?x8x16xf32>
// GENERIC-NEXT:  "npu.layer_norm"({{%.*}}) <{normalized_shape = array<i64: 16>, eps = 1.000000e-05 : f64, operandSegmentSizes = array<i32: 1, 0, 0>}> : (tensor<?x8x16xf32>) -> tensor<?x8x16xf32>
// GENERIC-NEXT:  "npu.layer_norm"({{%.*}}, %w2) <{normalized_shape = array<i64: 8, 16>, {{.*}}, operandSegmentSizes = array<i32: 1, 1, 0>}>
// GENERIC-NEXT:  "npu.layer_norm"({{%.*}}, %b) <{{{.*}}operandSegmentSizes = array<i32: 1, 0, 1>}> {device = "npu", vreg = 3 : i64, buffer = 1 : i64}
func.func @layer_norm(%x: tensor<?x8x16xf32>, %w: tensor<16xf32>, %b: tensor<16xf32>, %w2: tensor<8x16xf32>) -> tensor<?x8x16xf32> {
  %0 = npu.layer_norm %x weight %w : tensor<16xf32> bias %b : tensor<16xf32> {normalized_shape = array<i64: 16>, eps = 1.0e-05 : f64} : tensor<?x8x16xf32> -> tensor<?x8x16xf32>
  %1 = npu.layer_norm %0 {normalized_shape = array<i64: 16>, eps = 1.0e-05 : f64} : tensor<?x8x16xf32> -> tensor<?x8x16xf32>
  %2 = npu.layer_norm %1 weight %w2 : tensor<8x16xf32> {normalized_shape = array<i64: 8, 16>, eps = 1.0e-12 : f64} : tensor<?x8x16xf32> -> tensor<?x8x16xf32>
  %3 = npu.layer_norm %2 bias %b : tensor<16xf32> {normalized_shape = array<i64: 16>, eps = 1.0e-05 : f32, device = "npu", vreg = 3 : i64, buffer = 1 : i64} : tensor<?x8x16xf32> -> tensor<?x8x16xf32>
  func.return %3 : tensor<?x8x16xf32>
}

// rms_norm: with and without weight, bf16, empty normalized_shape.
// CHECK-LABEL: func.func @rms_norm(%x: tensor<2x8x16xbf16>, %w: tensor<16xbf16>) -> tensor<2x8x16xbf16> {
// CHECK-NEXT:    [[W:%.*]] = npu.rms_norm %x weight %w : tensor<16xbf16> {normalized_shape = array<i64: 16>, eps = 1.000000e-06 : f64} : tensor<2x8x16xbf16> -> tensor<2x8x16xbf16>
// CHECK-NEXT:    [[NOW:%.*]] = npu.rms_norm [[W]] {normalized_shape = array<i64: 8, 16>, eps = 1.000000e-05 : f64} : tensor<2x8x16xbf16> -> tensor<2x8x16xbf16>
// CHECK-NEXT:    [[EMPTY:%.*]] = npu.rms_norm [[NOW]] {normalized_shape = array<i64>, eps = 1.000000e-05 : f64} : tensor<2x8x16xbf16> -> tensor<2x8x16xbf16>
// CHECK-NEXT:    func.return [[EMPTY]] : tensor<2x8x16xbf16>
// CHECK-NEXT:  }
// GENERIC-LABEL: sym_name = "rms_norm"
// GENERIC:       "npu.rms_norm"(%x, %w) <{normalized_shape = array<i64: 16>, eps = 1.000000e-06 : f64}> : (tensor<2x8x16xbf16>, tensor<16xbf16>) -> tensor<2x8x16xbf16>
// GENERIC-NEXT:  "npu.rms_norm"({{%.*}}) <{normalized_shape = array<i64: 8, 16>, eps = 1.000000e-05 : f64}> : (tensor<2x8x16xbf16>) -> tensor<2x8x16xbf16>
func.func @rms_norm(%x: tensor<2x8x16xbf16>, %w: tensor<16xbf16>) -> tensor<2x8x16xbf16> {
  %0 = npu.rms_norm %x weight %w : tensor<16xbf16> {normalized_shape = array<i64: 16>, eps = 1.0e-06 : f64} : tensor<2x8x16xbf16> -> tensor<2x8x16xbf16>
  %1 = npu.rms_norm %0 {normalized_shape = array<i64: 8, 16>, eps = 1.0e-05 : f64} : tensor<2x8x16xbf16> -> tensor<2x8x16xbf16>
  %2 = npu.rms_norm %1 {normalized_shape = array<i64>, eps = 1.0e-05 : f64} : tensor<2x8x16xbf16> -> tensor<2x8x16xbf16>
  func.return %2 : tensor<2x8x16xbf16>
}

// mean / sum: one and several dims, negative dims, keepdim present and absent,
// sum on integers, reduction to a rank-0 tensor.
// CHECK-LABEL: func.func @reduce(%x: tensor<2x?x8xf32>, %i: tensor<4x6xi64>) -> tensor<i64> {
// CHECK-NEXT:    [[M:%.*]] = npu.mean %x {dims = array<i64: -1>} : tensor<2x?x8xf32> -> tensor<2x?xf32>
// CHECK-NEXT:    [[MK:%.*]] = npu.mean %x {dims = array<i64: 1, 2>, keepdim} : tensor<2x?x8xf32> -> tensor<2x1x1xf32>
// CHECK-NEXT:    [[S:%.*]] = npu.sum %x {device = "cpu", dims = array<i64: 0>} : tensor<2x?x8xf32> -> tensor<?x8xf32>
// CHECK-NEXT:    [[SK:%.*]] = npu.sum %i {dims = array<i64: -2>, keepdim} : tensor<4x6xi64> -> tensor<1x6xi64>
// CHECK-NEXT:    [[ALL:%.*]] = npu.sum %i {dims = array<i64: 0, 1>} : tensor<4x6xi64> -> tensor<i64>
// CHECK-NEXT:    func.return [[ALL]] : tensor<i64>
// CHECK-NEXT:  }
// GENERIC-LABEL: sym_name = "reduce"
// GENERIC:       "npu.mean"(%x) <{dims = array<i64: -1>}> : (tensor<2x?x8xf32>) -> tensor<2x?xf32>
// GENERIC-NEXT:  "npu.mean"(%x) <{dims = array<i64: 1, 2>, keepdim}> : (tensor<2x?x8xf32>) -> tensor<2x1x1xf32>
// GENERIC-NEXT:  "npu.sum"(%x) <{dims = array<i64: 0>}> {device = "cpu"} : (tensor<2x?x8xf32>) -> tensor<?x8xf32>
func.func @reduce(%x: tensor<2x?x8xf32>, %i: tensor<4x6xi64>) -> tensor<i64> {
  %0 = npu.mean %x {dims = array<i64: -1>} : tensor<2x?x8xf32> -> tensor<2x?xf32>
  %1 = npu.mean %x {dims = array<i64: 1, 2>, keepdim} : tensor<2x?x8xf32> -> tensor<2x1x1xf32>
  %2 = npu.sum %x {dims = array<i64: 0>, device = "cpu"} : tensor<2x?x8xf32> -> tensor<?x8xf32>
  %3 = npu.sum %i {dims = array<i64: -2>, keepdim} : tensor<4x6xi64> -> tensor<1x6xi64>
  %4 = npu.sum %i {dims = array<i64: 0, 1>} : tensor<4x6xi64> -> tensor<i64>
  func.return %4 : tensor<i64>
}

// embedding: i64 and i32 indices of any rank (including rank 0 and dynamic).
// CHECK-LABEL: func.func @embedding(%w: tensor<1000x64xf16>, %ids: tensor<2x?xi64>, %one: tensor<i32>) -> tensor<64xf16> {
// CHECK-NEXT:    [[E:%.*]] = npu.embedding %w, %ids : (tensor<1000x64xf16>, tensor<2x?xi64>) -> tensor<2x?x64xf16>
// CHECK-NEXT:    [[ONE:%.*]] = npu.embedding %w, %one {device = "cpu", buffer = 2 : i64} : (tensor<1000x64xf16>, tensor<i32>) -> tensor<64xf16>
// CHECK-NEXT:    func.return [[ONE]] : tensor<64xf16>
// CHECK-NEXT:  }
// GENERIC-LABEL: sym_name = "embedding"
// GENERIC:       "npu.embedding"(%w, %ids) : (tensor<1000x64xf16>, tensor<2x?xi64>) -> tensor<2x?x64xf16>
func.func @embedding(%w: tensor<1000x64xf16>, %ids: tensor<2x?xi64>, %one: tensor<i32>) -> tensor<64xf16> {
  %0 = npu.embedding %w, %ids : (tensor<1000x64xf16>, tensor<2x?xi64>) -> tensor<2x?x64xf16>
  %1 = npu.embedding %w, %one {device = "cpu", buffer = 2 : i64} : (tensor<1000x64xf16>, tensor<i32>) -> tensor<64xf16>
  func.return %1 : tensor<64xf16>
}

// An empty `dims` reduces every dimension, as ATen's dim=[] does.
// CHECK-LABEL: func.func @reduce_all(%x: tensor<2x?xf32>) -> tensor<1x1xf32> {
// CHECK-NEXT:    [[S:%.*]] = npu.sum %x {dims = array<i64>} : tensor<2x?xf32> -> tensor<f32>
// CHECK-NEXT:    [[M:%.*]] = npu.mean %x {dims = array<i64>, keepdim} : tensor<2x?xf32> -> tensor<1x1xf32>
// CHECK-NEXT:    func.return [[M]] : tensor<1x1xf32>
// CHECK-NEXT:  }
// GENERIC-LABEL: sym_name = "reduce_all"
// GENERIC:       "npu.sum"(%x) <{dims = array<i64>}> : (tensor<2x?xf32>) -> tensor<f32>
func.func @reduce_all(%x: tensor<2x?xf32>) -> tensor<1x1xf32> {
  %0 = npu.sum %x {dims = array<i64>} : tensor<2x?xf32> -> tensor<f32>
  %1 = npu.mean %x {dims = array<i64>, keepdim} : tensor<2x?xf32> -> tensor<1x1xf32>
  func.return %1 : tensor<1x1xf32>
}

// A rank-0 input takes softmax dims 0 and -1, as in ATen.
// CHECK-LABEL: func.func @softmax_scalar(%s: tensor<f32>) -> tensor<f32> {
// CHECK-NEXT:    [[A:%.*]] = npu.softmax %s {dim = -1 : i64} : tensor<f32>
// CHECK-NEXT:    [[B:%.*]] = npu.softmax [[A]] {dim = 0 : i64} : tensor<f32>
// CHECK-NEXT:    func.return [[B]] : tensor<f32>
// CHECK-NEXT:  }
func.func @softmax_scalar(%s: tensor<f32>) -> tensor<f32> {
  %0 = npu.softmax %s {dim = -1 : i64} : tensor<f32>
  %1 = npu.softmax %0 {dim = 0 : i64} : tensor<f32>
  func.return %1 : tensor<f32>
}
