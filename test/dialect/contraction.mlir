// Round trip of the contractions: npu.matmul, npu.linear, npu.addmm,
// npu.fused_linear and npu.sdpa, with their optional operands and properties.

// RUN: forge-opt %s | forge-opt | filecheck %s
// RUN: forge-opt %s --print-op-generic | forge-opt | filecheck %s
// RUN: forge-opt %s --print-op-generic | forge-opt --print-op-generic | filecheck %s --check-prefix=GENERIC

// matmul: plain 2-D, broadcast batch dims, dynamic batch/N dims, bf16.
// CHECK-LABEL: func.func @matmul(%s: tensor<16x16xf32>, %a: tensor<2x8x16xf32>, %b: tensor<16x4xf32>, %c: tensor<?x3x16xbf16>, %d: tensor<1x16x?xbf16>) -> tensor<?x3x?xbf16> {
// CHECK-NEXT:    [[MM:%.*]] = npu.matmul %s, %b : (tensor<16x16xf32>, tensor<16x4xf32>) -> tensor<16x4xf32>
// CHECK-NEXT:    [[BMM:%.*]] = npu.matmul %a, [[MM]] : (tensor<2x8x16xf32>, tensor<16x4xf32>) -> tensor<2x8x4xf32>
// CHECK-NEXT:    [[DYN:%.*]] = npu.matmul %c, %d {device = "npu", vreg = 3 : i64, buffer = 1 : i64} : (tensor<?x3x16xbf16>, tensor<1x16x?xbf16>) -> tensor<?x3x?xbf16>
// CHECK-NEXT:    func.return [[DYN]] : tensor<?x3x?xbf16>
// CHECK-NEXT:  }
// GENERIC-LABEL: sym_name = "matmul"
// GENERIC:       "npu.matmul"(%s, %b) : (tensor<16x16xf32>, tensor<16x4xf32>) -> tensor<16x4xf32>
// GENERIC:       "npu.matmul"(%c, %d) {device = "npu", vreg = 3 : i64, buffer = 1 : i64} : (tensor<?x3x16xbf16>, tensor<1x16x?xbf16>) -> tensor<?x3x?xbf16>
func.func @matmul(%s: tensor<16x16xf32>, %a: tensor<2x8x16xf32>, %b: tensor<16x4xf32>, %c: tensor<?x3x16xbf16>, %d: tensor<1x16x?xbf16>) -> tensor<?x3x?xbf16> {
  %0 = npu.matmul %s, %b : (tensor<16x16xf32>, tensor<16x4xf32>) -> tensor<16x4xf32>
  %1 = npu.matmul %a, %0 : (tensor<2x8x16xf32>, tensor<16x4xf32>) -> tensor<2x8x4xf32>
  %2 = npu.matmul %c, %d {device = "npu", vreg = 3 : i64, buffer = 1 : i64} : (tensor<?x3x16xbf16>, tensor<1x16x?xbf16>) -> tensor<?x3x?xbf16>
  func.return %2 : tensor<?x3x?xbf16>
}

// linear ([out, in] weight): with and without bias, 1-D and dynamic inputs.
// CHECK-LABEL: func.func @linear(%x: tensor<?x8x16xf32>, %v: tensor<16xf32>, %w: tensor<32x16xf32>, %b: tensor<32xf32>) -> tensor<?x8x32xf32> {
// CHECK-NEXT:    [[NOBIAS:%.*]] = npu.linear %x, %w : (tensor<?x8x16xf32>, tensor<32x16xf32>) -> tensor<?x8x32xf32>
// CHECK-NEXT:    [[BIAS:%.*]] = npu.linear %x, %w, %b : (tensor<?x8x16xf32>, tensor<32x16xf32>, tensor<32xf32>) -> tensor<?x8x32xf32>
// CHECK-NEXT:    [[VEC:%.*]] = npu.linear %v, %w, %b : (tensor<16xf32>, tensor<32x16xf32>, tensor<32xf32>) -> tensor<32xf32>
// CHECK-NEXT:    func.return [[BIAS]] : tensor<?x8x32xf32>
// CHECK-NEXT:  }
// GENERIC-LABEL: sym_name = "linear"
// GENERIC:       "npu.linear"(%x, %w) : (tensor<?x8x16xf32>, tensor<32x16xf32>) -> tensor<?x8x32xf32>
// GENERIC-NEXT:  "npu.linear"(%x, %w, %b) : (tensor<?x8x16xf32>, tensor<32x16xf32>, tensor<32xf32>) -> tensor<?x8x32xf32>
func.func @linear(%x: tensor<?x8x16xf32>, %v: tensor<16xf32>, %w: tensor<32x16xf32>, %b: tensor<32xf32>) -> tensor<?x8x32xf32> {
  %0 = npu.linear %x, %w : (tensor<?x8x16xf32>, tensor<32x16xf32>) -> tensor<?x8x32xf32>
  %1 = npu.linear %x, %w, %b : (tensor<?x8x16xf32>, tensor<32x16xf32>, tensor<32xf32>) -> tensor<?x8x32xf32>
  %2 = npu.linear %v, %w, %b : (tensor<16xf32>, tensor<32x16xf32>, tensor<32xf32>) -> tensor<32xf32>
  func.return %1 : tensor<?x8x32xf32>
}

// addmm ([in, out] weight, GPT-2 Conv1D): 1-D bias and a full 2-D bias.
// CHECK-LABEL: func.func @addmm(%b: tensor<32xf16>, %b2: tensor<8x32xf16>, %x: tensor<8x16xf16>, %w: tensor<16x32xf16>) -> tensor<8x32xf16> {
// CHECK-NEXT:    [[A:%.*]] = npu.addmm %b, %x, %w : (tensor<32xf16>, tensor<8x16xf16>, tensor<16x32xf16>) -> tensor<8x32xf16>
// CHECK-NEXT:    [[B:%.*]] = npu.addmm %b2, %x, %w {device = "cpu"} : (tensor<8x32xf16>, tensor<8x16xf16>, tensor<16x32xf16>) -> tensor<8x32xf16>
// CHECK-NEXT:    func.return [[B]] : tensor<8x32xf16>
// CHECK-NEXT:  }
// GENERIC-LABEL: sym_name = "addmm"
// GENERIC:       "npu.addmm"(%b, %x, %w) : (tensor<32xf16>, tensor<8x16xf16>, tensor<16x32xf16>) -> tensor<8x32xf16>
func.func @addmm(%b: tensor<32xf16>, %b2: tensor<8x32xf16>, %x: tensor<8x16xf16>, %w: tensor<16x32xf16>) -> tensor<8x32xf16> {
  %0 = npu.addmm %b, %x, %w : (tensor<32xf16>, tensor<8x16xf16>, tensor<16x32xf16>) -> tensor<8x32xf16>
  %1 = npu.addmm %b2, %x, %w {device = "cpu"} : (tensor<8x32xf16>, tensor<8x16xf16>, tensor<16x32xf16>) -> tensor<8x32xf16>
  func.return %1 : tensor<8x32xf16>
}

// fused_linear: every activation, with/without bias, with `weight_in_out`.
// CHECK-LABEL: func.func @fused_linear(%x: tensor<2x8x16xf32>, %w: tensor<32x16xf32>, %b: tensor<32xf32>, %wio: tensor<16x32xf32>) -> tensor<2x8x32xf32> {
// CHECK-NEXT:    [[NONE:%.*]] = npu.fused_linear %x, %w {activation = "none"} : (tensor<2x8x16xf32>, tensor<32x16xf32>) -> tensor<2x8x32xf32>
// CHECK-NEXT:    [[RELU:%.*]] = npu.fused_linear %x, %w, %b {activation = "relu"} : (tensor<2x8x16xf32>, tensor<32x16xf32>, tensor<32xf32>) -> tensor<2x8x32xf32>
// CHECK-NEXT:    [[GELU:%.*]] = npu.fused_linear %x, %w, %b {activation = "gelu"} : (tensor<2x8x16xf32>, tensor<32x16xf32>, tensor<32xf32>) -> tensor<2x8x32xf32>
// CHECK-NEXT:    [[GTANH:%.*]] = npu.fused_linear %x, %w, %b {activation = "gelu_tanh"} : (tensor<2x8x16xf32>, tensor<32x16xf32>, tensor<32xf32>) -> tensor<2x8x32xf32>
// CHECK-NEXT:    [[SILU:%.*]] = npu.fused_linear %x, %w {activation = "silu"} : (tensor<2x8x16xf32>, tensor<32x16xf32>) -> tensor<2x8x32xf32>
// CHECK-NEXT:    [[SIG:%.*]] = npu.fused_linear %x, %wio, %b {activation = "sigmoid", weight_in_out} : (tensor<2x8x16xf32>, tensor<16x32xf32>, tensor<32xf32>) -> tensor<2x8x32xf32>
// CHECK-NEXT:    [[WIO:%.*]] = npu.fused_linear %x, %wio {device = "npu", vreg = 3 : i64, buffer = 1 : i64, activation = "gelu", weight_in_out} : (tensor<2x8x16xf32>, tensor<16x32xf32>) -> tensor<2x8x32xf32>
// CHECK-NEXT:    func.return [[WIO]] : tensor<2x8x32xf32>
// CHECK-NEXT:  }
// GENERIC-LABEL: sym_name = "fused_linear"
// GENERIC:       "npu.fused_linear"(%x, %w) <{activation = "none"}> : (tensor<2x8x16xf32>, tensor<32x16xf32>) -> tensor<2x8x32xf32>
// GENERIC:       "npu.fused_linear"(%x, %wio, %b) <{activation = "sigmoid", weight_in_out}> : (tensor<2x8x16xf32>, tensor<16x32xf32>, tensor<32xf32>) -> tensor<2x8x32xf32>
// GENERIC-NEXT:  "npu.fused_linear"(%x, %wio) <{activation = "gelu", weight_in_out}> {device = "npu", vreg = 3 : i64, buffer = 1 : i64} : (tensor<2x8x16xf32>, tensor<16x32xf32>) -> tensor<2x8x32xf32>
func.func @fused_linear(%x: tensor<2x8x16xf32>, %w: tensor<32x16xf32>, %b: tensor<32xf32>, %wio: tensor<16x32xf32>) -> tensor<2x8x32xf32> {
  %0 = npu.fused_linear %x, %w {activation = "none"} : (tensor<2x8x16xf32>, tensor<32x16xf32>) -> tensor<2x8x32xf32>
  %1 = npu.fused_linear %x, %w, %b {activation = "relu"} : (tensor<2x8x16xf32>, tensor<32x16xf32>, tensor<32xf32>) -> tensor<2x8x32xf32>
  %2 = npu.fused_linear %x, %w, %b {activation = "gelu"} : (tensor<2x8x16xf32>, tensor<32x16xf32>, tensor<32xf32>) -> tensor<2x8x32xf32>
  %3 = npu.fused_linear %x, %w, %b {activation = "gelu_tanh"} : (tensor<2x8x16xf32>, tensor<32x16xf32>, tensor<32xf32>) -> tensor<2x8x32xf32>
  %4 = npu.fused_linear %x, %w {activation = "silu"} : (tensor<2x8x16xf32>, tensor<32x16xf32>) -> tensor<2x8x32xf32>
  %5 = npu.fused_linear %x, %wio, %b {activation = "sigmoid", weight_in_out} : (tensor<2x8x16xf32>, tensor<16x32xf32>, tensor<32xf32>) -> tensor<2x8x32xf32>
  %6 = npu.fused_linear %x, %wio {activation = "gelu", weight_in_out, device = "npu", vreg = 3 : i64, buffer = 1 : i64} : (tensor<2x8x16xf32>, tensor<16x32xf32>) -> tensor<2x8x32xf32>
  func.return %6 : tensor<2x8x32xf32>
}

// sdpa: grouped-query heads (8 vs 2), value head size differing from query's,
// with/without mask, `scale` and `is_causal` each alone and together.
// CHECK-LABEL: func.func @sdpa(%q: tensor<1x8x16x64xf16>, %k: tensor<1x2x16x64xf16>, %v: tensor<1x2x16x32xf16>, %m: tensor<16x16xi1>) -> tensor<1x8x16x32xf16> {
// CHECK-NEXT:    [[PLAIN:%.*]] = npu.sdpa %q, %k, %v : (tensor<1x8x16x64xf16>, tensor<1x2x16x64xf16>, tensor<1x2x16x32xf16>) -> tensor<1x8x16x32xf16>
// CHECK-NEXT:    [[MASK:%.*]] = npu.sdpa %q, %k, %v, %m : (tensor<1x8x16x64xf16>, tensor<1x2x16x64xf16>, tensor<1x2x16x32xf16>, tensor<16x16xi1>) -> tensor<1x8x16x32xf16>
// CHECK-NEXT:    [[SCALE:%.*]] = npu.sdpa %q, %k, %v {scale = 1.250000e-01 : f32} : (tensor<1x8x16x64xf16>, tensor<1x2x16x64xf16>, tensor<1x2x16x32xf16>) -> tensor<1x8x16x32xf16>
// CHECK-NEXT:    [[CAUSAL:%.*]] = npu.sdpa %q, %k, %v {is_causal} : (tensor<1x8x16x64xf16>, tensor<1x2x16x64xf16>, tensor<1x2x16x32xf16>) -> tensor<1x8x16x32xf16>
// CHECK-NEXT:    [[ALL:%.*]] = npu.sdpa %q, %k, %v, %m {device = "npu", scale = 1.250000e-01 : f32, is_causal} : (tensor<1x8x16x64xf16>, tensor<1x2x16x64xf16>, tensor<1x2x16x32xf16>, tensor<16x16xi1>) -> tensor<1x8x16x32xf16>
// CHECK-NEXT:    func.return [[ALL]] : tensor<1x8x16x32xf16>
// CHECK-NEXT:  }
// GENERIC-LABEL: sym_name = "sdpa"
// GENERIC:       "npu.sdpa"(%q, %k, %v) : (tensor<1x8x16x64xf16>, tensor<1x2x16x64xf16>, tensor<1x2x16x32xf16>) -> tensor<1x8x16x32xf16>
// GENERIC:       "npu.sdpa"(%q, %k, %v, %m) <{scale = 1.250000e-01 : f32, is_causal}> {device = "npu"} : (tensor<1x8x16x64xf16>, tensor<1x2x16x64xf16>, tensor<1x2x16x32xf16>, tensor<16x16xi1>) -> tensor<1x8x16x32xf16>
func.func @sdpa(%q: tensor<1x8x16x64xf16>, %k: tensor<1x2x16x64xf16>, %v: tensor<1x2x16x32xf16>, %m: tensor<16x16xi1>) -> tensor<1x8x16x32xf16> {
  %0 = npu.sdpa %q, %k, %v : (tensor<1x8x16x64xf16>, tensor<1x2x16x64xf16>, tensor<1x2x16x32xf16>) -> tensor<1x8x16x32xf16>
  %1 = npu.sdpa %q, %k, %v, %m : (tensor<1x8x16x64xf16>, tensor<1x2x16x64xf16>, tensor<1x2x16x32xf16>, tensor<16x16xi1>) -> tensor<1x8x16x32xf16>
  %2 = npu.sdpa %q, %k, %v {scale = 0.125 : f32} : (tensor<1x8x16x64xf16>, tensor<1x2x16x64xf16>, tensor<1x2x16x32xf16>) -> tensor<1x8x16x32xf16>
  %3 = npu.sdpa %q, %k, %v {is_causal} : (tensor<1x8x16x64xf16>, tensor<1x2x16x64xf16>, tensor<1x2x16x32xf16>) -> tensor<1x8x16x32xf16>
  %4 = npu.sdpa %q, %k, %v, %m {scale = 0.125 : f32, is_causal, device = "npu"} : (tensor<1x8x16x64xf16>, tensor<1x2x16x64xf16>, tensor<1x2x16x32xf16>, tensor<16x16xi1>) -> tensor<1x8x16x32xf16>
  func.return %4 : tensor<1x8x16x32xf16>
}

// sdpa without a head dim (rank 2) and with dynamic sequence lengths and a float mask.
// CHECK-LABEL: func.func @sdpa_dynamic(%q: tensor<?x64xf32>, %k: tensor<?x64xf32>, %v: tensor<?x64xf32>, %m: tensor<?x?xf32>) -> tensor<?x64xf32> {
// CHECK-NEXT:    [[R:%.*]] = npu.sdpa %q, %k, %v, %m : (tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x?xf32>) -> tensor<?x64xf32>
// CHECK-NEXT:    func.return [[R]] : tensor<?x64xf32>
// CHECK-NEXT:  }
func.func @sdpa_dynamic(%q: tensor<?x64xf32>, %k: tensor<?x64xf32>, %v: tensor<?x64xf32>, %m: tensor<?x?xf32>) -> tensor<?x64xf32> {
  %0 = npu.sdpa %q, %k, %v, %m : (tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x?xf32>) -> tensor<?x64xf32>
  func.return %0 : tensor<?x64xf32>
}
