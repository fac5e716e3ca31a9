// npu-fuse-operators folds activations (relu, silu, sigmoid, gelu in its erf, tanh and
// decomposed tanh forms) and bias adds into the linear layer they follow, also through a
// view; intermediates with other users block it. alpha thresholds: 0.2 relu/silu/sigmoid,
// 0.4 gelu, 0.6 decomposed tanh-GELU, 0.8 through view/reshape, 1.0 bias absorption.

// RUN: forge-opt %s -p npu-fuse-operators --split-input-file | filecheck %s

// alpha=0 disables the pass: the output is the input, printed.
// RUN: forge-opt %s -p 'npu-fuse-operators{alpha=0}' --split-input-file > %t.alpha0
// RUN: forge-opt %s --split-input-file > %t.roundtrip
// RUN: diff %t.alpha0 %t.roundtrip
// RUN: filecheck %s --check-prefix=ALPHA0 --input-file=%t.alpha0
// ALPHA0-NOT: npu.fused_linear

// Intermediate alphas: 0.4 fuses the named activations only; 0.6 also recognizes the
// decomposed GELU but does not fuse through the view; 0.8 does, still without bias adds.
// RUN: forge-opt %s -p 'npu-fuse-operators{alpha=0.4}' --split-input-file | filecheck %s --check-prefix=ALPHA04
// RUN: forge-opt %s -p 'npu-fuse-operators{alpha=0.6}' --split-input-file | filecheck %s --check-prefix=ALPHA06
// RUN: forge-opt %s -p 'npu-fuse-operators{alpha=0.8}' --split-input-file | filecheck %s --check-prefix=ALPHA08

// alpha outside [0, 1] is one error line, exit 1.
// RUN: not forge-opt %s -p 'npu-fuse-operators{alpha=2}' 2>&1 | filecheck %s --check-prefix=RANGE
// RANGE: forge-opt: error: invalid pass pipeline 'npu-fuse-operators{alpha=2}': alpha must lie in [0, 1], got 2.0
// RANGE-NOT: Traceback
// RUN: not forge-opt %s -p 'npu-fuse-operators{alpha=-0.5}' 2>&1 | filecheck %s --check-prefix=NEGATIVE
// NEGATIVE: error: invalid pass pipeline {{.*}}: alpha must lie in [0, 1], got -0.5

// Positive: linear + relu -> one fused_linear; the bias stays an operand.
// CHECK-LABEL: func.func @linear_relu
// CHECK-NEXT:    %0 = npu.fused_linear %x, %w, %b {activation = "relu"} : (tensor<4x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<4x16xf32>
// CHECK-NEXT:    func.return %0 : tensor<4x16xf32>
// ALPHA04-LABEL: func.func @linear_relu
// ALPHA04-NEXT:    npu.fused_linear %x, %w, %b {activation = "relu"}
func.func @linear_relu(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>, %b: tensor<16xf32>) -> tensor<4x16xf32> {
  %0 = npu.linear %x, %w, %b : (tensor<4x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  %1 = npu.relu %0 : tensor<4x16xf32>
  func.return %1 : tensor<4x16xf32>
}

// -----

// Positive: GPT-2's MLP. addmm -> view -> 0.5*x*(1+tanh(sqrt(2/pi)*(x+0.044715*x^3)))
// becomes fused_linear{gelu_tanh, weight_in_out} -> view: the formula is recognized as
// npu.gelu{tanh}, which moves ahead of the view into the addmm.
// CHECK-LABEL: func.func @gpt2_mlp
// CHECK-NEXT:    %0 = npu.fused_linear %x, %w, %b {activation = "gelu_tanh", weight_in_out} : (tensor<8x64xf32>, tensor<64x256xf32>, tensor<256xf32>) -> tensor<8x256xf32>
// CHECK-NEXT:    %1 = npu.view %0 : tensor<8x256xf32> -> tensor<1x8x256xf32>
// CHECK-NEXT:    func.return %1 : tensor<1x8x256xf32>
// ALPHA04-LABEL: func.func @gpt2_mlp
// ALPHA04-NOT:     npu.fused_linear
// ALPHA04:         npu.tanh
// ALPHA06-LABEL: func.func @gpt2_mlp
// ALPHA06-NEXT:    %0 = npu.addmm %b, %x, %w
// ALPHA06-NEXT:    %1 = npu.view %0
// ALPHA06-NEXT:    %2 = npu.gelu %1 {approximate = "tanh"} : tensor<1x8x256xf32>
// ALPHA06-NEXT:    func.return %2
// ALPHA08-LABEL: func.func @gpt2_mlp
// ALPHA08-NEXT:    npu.fused_linear %x, %w, %b {activation = "gelu_tanh", weight_in_out}
func.func @gpt2_mlp(%x: tensor<8x64xf32>, %w: tensor<64x256xf32>, %b: tensor<256xf32>) -> tensor<1x8x256xf32> {
  %0 = npu.addmm %b, %x, %w : (tensor<256xf32>, tensor<8x64xf32>, tensor<64x256xf32>) -> tensor<8x256xf32>
  %1 = npu.view %0 : tensor<8x256xf32> -> tensor<1x8x256xf32>
  %2 = npu.mul %1 {scalar = 5.000000e-01 : f64} : (tensor<1x8x256xf32>) -> tensor<1x8x256xf32>
  %3 = npu.pow %1 {scalar = 3.000000e+00 : f64} : (tensor<1x8x256xf32>) -> tensor<1x8x256xf32>
  %4 = npu.mul %3 {scalar = 4.471500e-02 : f64} : (tensor<1x8x256xf32>) -> tensor<1x8x256xf32>
  %5 = npu.add %1, %4 : (tensor<1x8x256xf32>, tensor<1x8x256xf32>) -> tensor<1x8x256xf32>
  %6 = npu.mul %5 {scalar = 0.79788456080286541 : f64} : (tensor<1x8x256xf32>) -> tensor<1x8x256xf32>
  %7 = npu.tanh %6 : tensor<1x8x256xf32>
  %8 = npu.add %7 {scalar = 1.000000e+00 : f64} : (tensor<1x8x256xf32>) -> tensor<1x8x256xf32>
  %9 = npu.mul %2, %8 : (tensor<1x8x256xf32>, tensor<1x8x256xf32>) -> tensor<1x8x256xf32>
  func.return %9 : tensor<1x8x256xf32>
}

// -----

// Positive: the decomposed formula in another association and operand order, x*x*x for
// the cube and sqrt(2/pi) rounded to fp32 (within the 1e-6 tolerance), on a plain value.
// CHECK-LABEL: func.func @decomposed_gelu_reassociated
// CHECK-NEXT:    %0 = npu.gelu %x {approximate = "tanh"} : tensor<2x4xf32>
// CHECK-NEXT:    func.return %0 : tensor<2x4xf32>
func.func @decomposed_gelu_reassociated(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %0 = npu.mul %x, %x : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %1 = npu.mul %0, %x : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %2 = npu.mul %1 {scalar = 4.471500e-02 : f64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %3 = npu.add %2, %x : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %4 = npu.mul %3 {scalar = 0.797884583 : f64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %5 = npu.tanh %4 : tensor<2x4xf32>
  %6 = npu.add %5 {scalar = 1.000000e+00 : f64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %7 = npu.mul %x, %6 : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %8 = npu.mul %7 {scalar = 5.000000e-01 : f64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  func.return %8 : tensor<2x4xf32>
}

// -----

// Positive: the SwiGLU gate of Llama/Qwen2/Granite: silu(gate_proj(x)) * up_proj(x).
// The gate projection takes the silu; up_proj and the product stay.
// CHECK-LABEL: func.func @swiglu_gate
// CHECK-NEXT:    %0 = npu.fused_linear %x, %gate {activation = "silu"} : (tensor<1x8x64xf32>, tensor<128x64xf32>) -> tensor<1x8x128xf32>
// CHECK-NEXT:    %1 = npu.linear %x, %up : (tensor<1x8x64xf32>, tensor<128x64xf32>) -> tensor<1x8x128xf32>
// CHECK-NEXT:    %2 = npu.mul %0, %1 : (tensor<1x8x128xf32>, tensor<1x8x128xf32>) -> tensor<1x8x128xf32>
// CHECK-NEXT:    func.return %2 : tensor<1x8x128xf32>
// ALPHA04-LABEL: func.func @swiglu_gate
// ALPHA04-NEXT:    npu.fused_linear %x, %gate {activation = "silu"}
func.func @swiglu_gate(%x: tensor<1x8x64xf32>, %gate: tensor<128x64xf32>, %up: tensor<128x64xf32>) -> tensor<1x8x128xf32> {
  %0 = npu.linear %x, %gate : (tensor<1x8x64xf32>, tensor<128x64xf32>) -> tensor<1x8x128xf32>
  %1 = npu.silu %0 : tensor<1x8x128xf32>
  %2 = npu.linear %x, %up : (tensor<1x8x64xf32>, tensor<128x64xf32>) -> tensor<1x8x128xf32>
  %3 = npu.mul %1, %2 : (tensor<1x8x128xf32>, tensor<1x8x128xf32>) -> tensor<1x8x128xf32>
  func.return %3 : tensor<1x8x128xf32>
}

// -----

// Positive: gelu in its erf form, and in its tanh form from aten.gelu, and sigmoid.
// CHECK-LABEL: func.func @gelu_forms
// CHECK-NEXT:    %0 = npu.fused_linear %x, %w {activation = "gelu"}
// CHECK-NEXT:    %1 = npu.fused_linear %x, %w {activation = "gelu_tanh"}
// CHECK-NEXT:    %2 = npu.fused_linear %x, %w {activation = "sigmoid"}
// ALPHA04-LABEL: func.func @gelu_forms
// ALPHA04-NEXT:    {activation = "gelu"}
// ALPHA04-NEXT:    {activation = "gelu_tanh"}
// ALPHA04-NEXT:    {activation = "sigmoid"}
func.func @gelu_forms(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>) {
  %0 = npu.linear %x, %w : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  %1 = npu.gelu %0 : tensor<4x16xf32>
  %2 = npu.linear %x, %w : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  %3 = npu.gelu %2 {approximate = "tanh"} : tensor<4x16xf32>
  %4 = npu.linear %x, %w : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  %5 = npu.sigmoid %4 : tensor<4x16xf32>
  func.return %1, %3, %5 : tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>
}

// -----

// Positive: mm + bias add -> addmm (rank-2 input), and on to fused_linear when an
// activation follows; rank-3 matmul with a weight -> fused_linear{none}; linear + bias
// add -> linear with bias. alpha=0.8 leaves all of them alone.
// CHECK-LABEL: func.func @bias_absorption
// CHECK-NEXT:    %0 = npu.addmm %b, %x, %w : (tensor<16xf32>, tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
// CHECK-NEXT:    %1 = npu.fused_linear %x, %w, %b {activation = "relu", weight_in_out} : (tensor<4x8xf32>, tensor<8x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
// CHECK-NEXT:    %2 = npu.fused_linear %x3, %w, %b {activation = "none", weight_in_out} : (tensor<2x4x8xf32>, tensor<8x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
// CHECK-NEXT:    %3 = npu.linear %x, %wt, %b : (tensor<4x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<4x16xf32>
// ALPHA08-LABEL: func.func @bias_absorption
// ALPHA08-NEXT:    npu.matmul
// ALPHA08-NEXT:    npu.add
// ALPHA08-NEXT:    npu.matmul
// ALPHA08-NEXT:    npu.add
// ALPHA08-NEXT:    npu.relu
func.func @bias_absorption(%x: tensor<4x8xf32>, %x3: tensor<2x4x8xf32>, %w: tensor<8x16xf32>, %wt: tensor<16x8xf32>, %b: tensor<16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>, tensor<2x4x16xf32>, tensor<4x16xf32>) {
  %0 = npu.matmul %x, %w : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %1 = npu.add %0, %b : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  %2 = npu.matmul %x, %w : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %3 = npu.add %b, %2 : (tensor<16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %4 = npu.relu %3 : tensor<4x16xf32>
  %5 = npu.matmul %x3, %w : (tensor<2x4x8xf32>, tensor<8x16xf32>) -> tensor<2x4x16xf32>
  %6 = npu.add %5, %b : (tensor<2x4x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
  %7 = npu.linear %x, %wt : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  %8 = npu.add %7, %b : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  func.return %1, %4, %6, %8 : tensor<4x16xf32>, tensor<4x16xf32>, tensor<2x4x16xf32>, tensor<4x16xf32>
}

// -----

// Negative: the linear result is also returned; fusing would compute the matmul twice.
// CHECK-LABEL: func.func @linear_used_twice
// CHECK-NEXT:    %0 = npu.linear %x, %w
// CHECK-NEXT:    %1 = npu.relu %0
// CHECK-NEXT:    func.return %0, %1
func.func @linear_used_twice(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>) {
  %0 = npu.linear %x, %w : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  %1 = npu.relu %0 : tensor<4x16xf32>
  func.return %0, %1 : tensor<4x16xf32>, tensor<4x16xf32>
}

// -----

// Negative: the view between linear and activation has another user.
// CHECK-LABEL: func.func @view_used_twice
// CHECK-NEXT:    npu.linear
// CHECK-NEXT:    npu.view
// CHECK-NEXT:    npu.silu
func.func @view_used_twice(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>) -> (tensor<64xf32>, tensor<64xf32>) {
  %0 = npu.linear %x, %w : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  %1 = npu.view %0 : tensor<4x16xf32> -> tensor<64xf32>
  %2 = npu.silu %1 : tensor<64xf32>
  func.return %1, %2 : tensor<64xf32>, tensor<64xf32>
}

// -----

// Negative: activations of non-linear producers (an add; attention's activation-by-
// activation matmul, whose right side is no weight argument) and a matmul + add whose
// "bias" is no per-feature vector stay as they are.
// CHECK-LABEL: func.func @not_a_linear
// CHECK-NEXT:    npu.add
// CHECK-NEXT:    npu.relu
// CHECK-NEXT:    npu.transpose
// CHECK-NEXT:    npu.matmul
// CHECK-NEXT:    npu.add
// CHECK-NEXT:    npu.gelu
// CHECK-NEXT:    npu.matmul
// CHECK-NEXT:    npu.add
// CHECK-NOT:     npu.fused_linear
// CHECK-NOT:     npu.addmm
func.func @not_a_linear(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>, %w: tensor<8x4xf32>, %rows: tensor<4x1xf32>, %b: tensor<4xf32>) -> (tensor<4x8xf32>, tensor<4x4xf32>, tensor<4x4xf32>) {
  %0 = npu.add %x, %y : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %1 = npu.relu %0 : tensor<4x8xf32>
  %2 = npu.transpose %y {dim0 = 0 : i64, dim1 = 1 : i64} : tensor<4x8xf32> -> tensor<8x4xf32>
  %3 = npu.matmul %1, %2 : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
  %4 = npu.add %3, %b : (tensor<4x4xf32>, tensor<4xf32>) -> tensor<4x4xf32>
  %5 = npu.gelu %4 : tensor<4x4xf32>
  %6 = npu.matmul %x, %w : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
  %7 = npu.add %6, %rows : (tensor<4x4xf32>, tensor<4x1xf32>) -> tensor<4x4xf32>
  func.return %1, %5, %7 : tensor<4x8xf32>, tensor<4x4xf32>, tensor<4x4xf32>
}

// -----

// Negative: a formula that is almost GELU (0.04 instead of 0.044715) is left alone.
// CHECK-LABEL: func.func @not_quite_gelu
// CHECK-NOT:     npu.gelu
// CHECK:         npu.tanh
func.func @not_quite_gelu(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = npu.mul %x {scalar = 5.000000e-01 : f64} : (tensor<4xf32>) -> tensor<4xf32>
  %1 = npu.pow %x {scalar = 3.000000e+00 : f64} : (tensor<4xf32>) -> tensor<4xf32>
  %2 = npu.mul %1 {scalar = 4.000000e-02 : f64} : (tensor<4xf32>) -> tensor<4xf32>
  %3 = npu.add %x, %2 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %4 = npu.mul %3 {scalar = 0.79788456080286541 : f64} : (tensor<4xf32>) -> tensor<4xf32>
  %5 = npu.tanh %4 : tensor<4xf32>
  %6 = npu.add %5 {scalar = 1.000000e+00 : f64} : (tensor<4xf32>) -> tensor<4xf32>
  %7 = npu.mul %0, %6 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return %7 : tensor<4xf32>
}
