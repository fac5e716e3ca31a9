// npu-assign-precision: the whole-program precision on the function (npu.precision)
// and a `precision` attribute on every linear op whose weight is a 2-D float function
// argument; under mixed, fp16 for the weights named in fp16-weights (else the fallback
// rule: embedding table and LM head fp16) and int8 for the others. fp32 writes nothing.

// RUN: forge-opt %s -p 'npu-assign-precision{precision=fp16}' --split-input-file | filecheck %s --check-prefix=FP16
// RUN: forge-opt %s -p 'npu-assign-precision{precision=int8}' --split-input-file | filecheck %s --check-prefix=INT8
// RUN: forge-opt %s -p 'npu-assign-precision{precision=mixed fp16-weights=w1,"lm.weight"}' --split-input-file | filecheck %s --check-prefix=MEASURED
// RUN: forge-opt %s -p 'npu-assign-precision{precision=mixed}' --split-input-file | filecheck %s --check-prefix=FALLBACK
// RUN: forge-opt %s --split-input-file > %t.in
// RUN: forge-opt %s -p 'npu-assign-precision{precision=fp32}' --split-input-file > %t.fp32
// RUN: diff %t.in %t.fp32
// RUN: forge-opt %s -p npu-assign-precision --split-input-file > %t.default
// RUN: diff %t.in %t.default
// RUN: not forge-opt %s -p 'npu-assign-precision{precision=int4}' 2>&1 | filecheck %s --check-prefix=ERR
// RUN: not forge-opt %s -p 'npu-assign-precision{precision=int8 fp16-weights=w1}' 2>&1 | filecheck %s --check-prefix=ERR-WEIGHTS
// ERR: forge-opt: error: invalid pass pipeline {{.*}}: precision must be one of fp32, fp16, int8, mixed, got 'int4'
// ERR-NOT: Traceback
// ERR-WEIGHTS: forge-opt: error: invalid pass pipeline {{.*}}: fp16-weights applies to precision mixed, not int8

// Positive: a tied embedding table (read by npu.embedding and as the LM head's weight),
// two hidden linears (one an addmm) and the LM head, whose result is returned.
// FP16-LABEL:   func.func @decoder
// FP16-SAME:      attributes {npu.precision = "fp16"}
// FP16-NEXT:      npu.embedding %lm.weight, %ids : (
// FP16-NEXT:      npu.linear {{.*}}{precision = "fp16"}
// FP16-NEXT:      npu.gelu %h : tensor
// FP16-NEXT:      npu.view %g : tensor
// FP16-NEXT:      npu.addmm {{.*}}{precision = "fp16"}
// FP16:           npu.linear %r, %lm.weight {precision = "fp16"}

// INT8-LABEL:   func.func @decoder
// INT8-SAME:      attributes {npu.precision = "int8"}
// INT8:           npu.linear {{.*}}{precision = "int8"}
// INT8:           npu.addmm {{.*}}{precision = "int8"}
// INT8:           npu.linear %r, %lm.weight {precision = "int8"}

// Measured: w1 and the head's weight are named in fp16-weights; w2 is not.
// MEASURED-LABEL: func.func @decoder
// MEASURED-SAME:    attributes {npu.precision = "mixed"}
// MEASURED:         npu.linear %{{.*}}, %w1{{.*}} {precision = "fp16"}
// MEASURED:         npu.addmm %{{.*}}, %w2 {{.*}}{precision = "int8"}
// MEASURED:         npu.linear %{{.*}}, %lm.weight {precision = "fp16"}

// Fallback: only the tied table (the LM head's weight) stays fp16.
// FALLBACK-LABEL: func.func @decoder
// FALLBACK-SAME:    attributes {npu.precision = "mixed"}
// FALLBACK:         npu.linear %{{.*}}, %w1{{.*}} {precision = "int8"}
// FALLBACK:         npu.addmm %{{.*}}, %w2 {{.*}}{precision = "int8"}
// FALLBACK:         npu.linear %{{.*}}, %lm.weight {precision = "fp16"}
func.func @decoder(%ids: tensor<1x4xi64>, %lm.weight: tensor<32x8xf32>, %w1: tensor<16x8xf32>, %b1: tensor<16xf32>, %w2: tensor<16x8xf32>, %b2: tensor<8xf32>) -> tensor<1x4x32xf32> {
  %e = npu.embedding %lm.weight, %ids : (tensor<32x8xf32>, tensor<1x4xi64>) -> tensor<1x4x8xf32>
  %h = npu.linear %e, %w1, %b1 : (tensor<1x4x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<1x4x16xf32>
  %g = npu.gelu %h : tensor<1x4x16xf32>
  %f = npu.view %g : tensor<1x4x16xf32> -> tensor<4x16xf32>
  %o = npu.addmm %b2, %f, %w2 : (tensor<8xf32>, tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  %r = npu.view %o : tensor<4x8xf32> -> tensor<1x4x8xf32>
  %l = npu.linear %r, %lm.weight : (tensor<1x4x8xf32>, tensor<32x8xf32>) -> tensor<1x4x32xf32>
  func.return %l : tensor<1x4x32xf32>
}

// -----

// Negative: a linear whose weight is not a function argument (a constant, or computed)
// gets no attribute; the function still records the program's precision.
// FP16-LABEL:   func.func @no_weight_argument
// FP16-SAME:      attributes {npu.precision = "fp16"}
// FP16-NOT:       {{[{ ]}}precision =
// INT8-LABEL:   func.func @no_weight_argument
// INT8-SAME:      attributes {npu.precision = "int8"}
// INT8-NOT:       {{[{ ]}}precision =
// FALLBACK-LABEL: func.func @no_weight_argument
// FALLBACK-NOT:     {{[{ ]}}precision =
func.func @no_weight_argument(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %c = npu.constant dense<1.000000e+00> : tensor<8x8xf32>
  %0 = npu.linear %x, %c : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %t = npu.transpose %w {dim0 = 0 : i64, dim1 = 1 : i64} : tensor<8x8xf32> -> tensor<8x8xf32>
  %1 = npu.linear %x, %t : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  func.return %0, %1 : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// Negative: non-linear ops (a matmul of two arguments, a norm) are left alone.
// INT8-LABEL:   func.func @not_linear
// INT8-NOT:       {{[{ ]}}precision =
// FALLBACK-LABEL: func.func @not_linear
// FALLBACK-NOT:     {{[{ ]}}precision =
func.func @not_linear(%x: tensor<4x8xf32>, %y: tensor<8x4xf32>, %g: tensor<4xf32>) -> tensor<4x4xf32> {
  %0 = npu.matmul %x, %y : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
  %1 = npu.layer_norm %0 weight %g : tensor<4xf32> {normalized_shape = array<i64: 4>, eps = 1.000000e-05 : f64} : tensor<4x4xf32> -> tensor<4x4xf32>
  func.return %1 : tensor<4x4xf32>
}
