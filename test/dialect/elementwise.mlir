// Round trip of the unary elementwise ops (npu.neg ... npu.gelu): custom form,
// custom form re-parsed from the generic form, and generic form re-parsed.

// RUN: forge-opt %s | forge-opt | filecheck %s
// RUN: forge-opt %s --print-op-generic | forge-opt | filecheck %s
// RUN: forge-opt %s --print-op-generic | forge-opt --print-op-generic | filecheck %s --check-prefix=GENERIC

// Ops allowed on any element type (neg, abs, relu): float, i64 and dynamic dims.
// CHECK-LABEL: func.func @neg_abs_relu(%x: tensor<2x3xf32>, %i: tensor<?x4xi64>) -> tensor<?x4xi64> {
// CHECK-NEXT:    [[NEG:%.*]] = npu.neg %x : tensor<2x3xf32>
// CHECK-NEXT:    [[ABS:%.*]] = npu.abs [[NEG]] : tensor<2x3xf32>
// CHECK-NEXT:    [[RELU:%.*]] = npu.relu [[ABS]] : tensor<2x3xf32>
// CHECK-NEXT:    [[INEG:%.*]] = npu.neg %i : tensor<?x4xi64>
// CHECK-NEXT:    [[IABS:%.*]] = npu.abs [[INEG]] : tensor<?x4xi64>
// CHECK-NEXT:    [[IRELU:%.*]] = npu.relu [[IABS]] : tensor<?x4xi64>
// CHECK-NEXT:    func.return [[IRELU]] : tensor<?x4xi64>
// CHECK-NEXT:  }
// GENERIC-LABEL: sym_name = "neg_abs_relu"
// GENERIC:       [[NEG:%.*]] = "npu.neg"(%x) : (tensor<2x3xf32>) -> tensor<2x3xf32>
// GENERIC-NEXT:  "npu.abs"([[NEG]]) : (tensor<2x3xf32>) -> tensor<2x3xf32>
// GENERIC-NEXT:  "npu.relu"
// GENERIC-NEXT:  "npu.neg"(%i) : (tensor<?x4xi64>) -> tensor<?x4xi64>
func.func @neg_abs_relu(%x: tensor<2x3xf32>, %i: tensor<?x4xi64>) -> tensor<?x4xi64> {
  %0 = npu.neg %x : tensor<2x3xf32>
  %1 = npu.abs %0 : tensor<2x3xf32>
  %2 = npu.relu %1 : tensor<2x3xf32>
  %3 = npu.neg %i : tensor<?x4xi64>
  %4 = npu.abs %3 : tensor<?x4xi64>
  %5 = npu.relu %4 : tensor<?x4xi64>
  func.return %5 : tensor<?x4xi64>
}

// Float-only transcendental ops on f32 with a dynamic leading dimension.
// CHECK-LABEL: func.func @transcendental(%x: tensor<?x4xf32>) -> tensor<?x4xf32> {
// CHECK-NEXT:    [[EXP:%.*]] = npu.exp %x : tensor<?x4xf32>
// CHECK-NEXT:    [[LOG:%.*]] = npu.log [[EXP]] : tensor<?x4xf32>
// CHECK-NEXT:    [[SQRT:%.*]] = npu.sqrt [[LOG]] : tensor<?x4xf32>
// CHECK-NEXT:    [[RSQRT:%.*]] = npu.rsqrt [[SQRT]] : tensor<?x4xf32>
// CHECK-NEXT:    [[RECIP:%.*]] = npu.reciprocal [[RSQRT]] : tensor<?x4xf32>
// CHECK-NEXT:    [[TANH:%.*]] = npu.tanh [[RECIP]] : tensor<?x4xf32>
// CHECK-NEXT:    [[SIN:%.*]] = npu.sin [[TANH]] : tensor<?x4xf32>
// CHECK-NEXT:    [[COS:%.*]] = npu.cos [[SIN]] : tensor<?x4xf32>
// CHECK-NEXT:    [[ERF:%.*]] = npu.erf [[COS]] : tensor<?x4xf32>
// CHECK-NEXT:    func.return [[ERF]] : tensor<?x4xf32>
// CHECK-NEXT:  }
// GENERIC-LABEL: sym_name = "transcendental"
// GENERIC:       "npu.exp"(%x) : (tensor<?x4xf32>) -> tensor<?x4xf32>
// GENERIC:       "npu.erf"({{%.*}}) : (tensor<?x4xf32>) -> tensor<?x4xf32>
func.func @transcendental(%x: tensor<?x4xf32>) -> tensor<?x4xf32> {
  %0 = npu.exp %x : tensor<?x4xf32>
  %1 = npu.log %0 : tensor<?x4xf32>
  %2 = npu.sqrt %1 : tensor<?x4xf32>
  %3 = npu.rsqrt %2 : tensor<?x4xf32>
  %4 = npu.reciprocal %3 : tensor<?x4xf32>
  %5 = npu.tanh %4 : tensor<?x4xf32>
  %6 = npu.sin %5 : tensor<?x4xf32>
  %7 = npu.cos %6 : tensor<?x4xf32>
  %8 = npu.erf %7 : tensor<?x4xf32>
  func.return %8 : tensor<?x4xf32>
}

// Activations on f16 / bf16; gelu with `approximate` absent, "none" and "tanh".
// CHECK-LABEL: func.func @activations(%h: tensor<8xf16>, %b: tensor<2x?xbf16>) -> tensor<2x?xbf16> {
// CHECK-NEXT:    [[SIG:%.*]] = npu.sigmoid %h : tensor<8xf16>
// CHECK-NEXT:    [[SILU:%.*]] = npu.silu [[SIG]] : tensor<8xf16>
// CHECK-NEXT:    [[GELU:%.*]] = npu.gelu [[SILU]] : tensor<8xf16>
// CHECK-NEXT:    [[GNONE:%.*]] = npu.gelu %b {approximate = "none"} : tensor<2x?xbf16>
// CHECK-NEXT:    [[GTANH:%.*]] = npu.gelu [[GNONE]] {approximate = "tanh"} : tensor<2x?xbf16>
// CHECK-NEXT:    func.return [[GTANH]] : tensor<2x?xbf16>
// CHECK-NEXT:  }
// GENERIC-LABEL: sym_name = "activations"
// GENERIC:       "npu.gelu"({{%.*}}) : (tensor<8xf16>) -> tensor<8xf16>
// GENERIC-NEXT:  "npu.gelu"(%b) <{approximate = "none"}> : (tensor<2x?xbf16>) -> tensor<2x?xbf16>
// GENERIC-NEXT:  "npu.gelu"({{%.*}}) <{approximate = "tanh"}> : (tensor<2x?xbf16>) -> tensor<2x?xbf16>
func.func @activations(%h: tensor<8xf16>, %b: tensor<2x?xbf16>) -> tensor<2x?xbf16> {
  %0 = npu.sigmoid %h : tensor<8xf16>
  %1 = npu.silu %0 : tensor<8xf16>
  %2 = npu.gelu %1 : tensor<8xf16>
  %3 = npu.gelu %b {approximate = "none"} : tensor<2x?xbf16>
  %4 = npu.gelu %3 {approximate = "tanh"} : tensor<2x?xbf16>
  func.return %4 : tensor<2x?xbf16>
}

// Rank-0 tensors and the discardable device/vreg/buffer attributes (attributes
// print before properties; `buffer` may also be a dense array, one entry per result).
// CHECK-LABEL: func.func @discardable(%s: tensor<f32>) -> tensor<f32> {
// CHECK-NEXT:    [[A:%.*]] = npu.exp %s {device = "npu", vreg = 3 : i64, buffer = 1 : i64} : tensor<f32>
// CHECK-NEXT:    [[B:%.*]] = npu.tanh [[A]] {device = "cpu", buffer = array<i64: 2>} : tensor<f32>
// CHECK-NEXT:    [[C:%.*]] = npu.gelu [[B]] {device = "npu", vreg = 0 : i64, approximate = "tanh"} : tensor<f32>
// CHECK-NEXT:    func.return [[C]] : tensor<f32>
// CHECK-NEXT:  }
// GENERIC-LABEL: sym_name = "discardable"
// GENERIC:       "npu.exp"(%s) {device = "npu", vreg = 3 : i64, buffer = 1 : i64} : (tensor<f32>) -> tensor<f32>
// GENERIC-NEXT:  "npu.tanh"({{%.*}}) {device = "cpu", buffer = array<i64: 2>} : (tensor<f32>) -> tensor<f32>
// GENERIC-NEXT:  "npu.gelu"({{%.*}}) <{approximate = "tanh"}> {device = "npu", vreg = 0 : i64} : (tensor<f32>) -> tensor<f32>
func.func @discardable(%s: tensor<f32>) -> tensor<f32> {
  %0 = npu.exp %s {device = "npu", vreg = 3 : i64, buffer = 1 : i64} : tensor<f32>
  %1 = npu.tanh %0 {device = "cpu", buffer = array<i64: 2>} : tensor<f32>
  %2 = npu.gelu %1 {approximate = "tanh", device = "npu", vreg = 0 : i64} : tensor<f32>
  func.return %2 : tensor<f32>
}
