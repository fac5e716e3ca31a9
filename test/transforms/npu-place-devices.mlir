// npu-place-devices: the capability table decides; unsupported ops go to the CPU, and
// data movement of CPU values stays on the CPU; with cpu-head-gflops=G, heads of at
// least G GFLOP go to the CPU (packed GEMM).

// RUN: forge-opt %s -p npu-place-devices --split-input-file | filecheck %s
// RUN: forge-opt %s -p 'npu-place-devices{cpu-head-gflops=0.000001}' --split-input-file | filecheck %s --check-prefix=HEAD
// RUN: not forge-opt %s -p 'npu-place-devices{cpu-head-gflops=-1}' 2>&1 | filecheck %s --check-prefix=BAD
// RUN: not forge-opt %s -p 'npu-place-devices{cpu-head-gflops=nan}' 2>&1 | filecheck %s --check-prefix=BAD
// BAD: forge-opt: error: invalid pass pipeline {{.*}}: cpu-head-gflops must be a finite number >= 0, got

// Positive: float contractions, attention, norms and activations run on the NPU.
// CHECK-LABEL: func.func @npu_ops
// CHECK:         npu.linear {{.*}}device = "npu"
// CHECK-NEXT:    npu.gelu {{.*}}device = "npu"
// CHECK-NEXT:    npu.layer_norm {{.*}}device = "npu"
// CHECK-NEXT:    npu.softmax {{.*}}device = "npu"
func.func @npu_ops(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>, %g: tensor<8xf32>) -> tensor<4x8xf32> {
  %0 = npu.linear %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %1 = npu.gelu %0 : tensor<4x8xf32>
  %2 = npu.layer_norm %1 weight %g : tensor<8xf32> {normalized_shape = array<i64: 8>, eps = 1.000000e-05 : f64} : tensor<4x8xf32> -> tensor<4x8xf32>
  %3 = npu.softmax %2 {dim = -1 : i64} : tensor<4x8xf32>
  func.return %3 : tensor<4x8xf32>
}

// -----

// Positive: sdpa with a float mask, embedding with integer indices.
// CHECK-LABEL: func.func @attention
// CHECK:         npu.embedding {{.*}}device = "npu"
// CHECK:         npu.sdpa {{.*}}device = "npu"
func.func @attention(%ids: tensor<1x4xi64>, %table: tensor<16x8xf32>, %q: tensor<1x2x4x8xf32>, %m: tensor<1x1x4x4xf32>) -> (tensor<1x4x8xf32>, tensor<1x2x4x8xf32>) {
  %e = npu.embedding %table, %ids : (tensor<16x8xf32>, tensor<1x4xi64>) -> tensor<1x4x8xf32>
  %a = npu.sdpa %q, %q, %q, %m {scale = 1.250000e-01 : f64} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x1x4x4xf32>) -> tensor<1x2x4x8xf32>
  func.return %e, %a : tensor<1x4x8xf32>, tensor<1x2x4x8xf32>
}

// -----

// Positive: a view of an NPU value is NPU; views of CPU values stay on the CPU.
// CHECK-LABEL: func.func @neutral
// CHECK:         %0 = npu.exp %x {device = "npu"}
// CHECK-NEXT:    %1 = npu.view %0 {device = "npu"}
// CHECK-NEXT:    %2 = npu.generic "aten.cumsum.default"{{.*}}device = "cpu"
// CHECK-NEXT:    %3 = npu.view %2 {device = "cpu"}
func.func @neutral(%x: tensor<2x4xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %0 = npu.exp %x : tensor<2x4xf32>
  %1 = npu.view %0 : tensor<2x4xf32> -> tensor<8xf32>
  %2 = npu.generic "aten.cumsum.default"(%x, 1 : i64) : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %3 = npu.view %2 : tensor<2x4xf32> -> tensor<8xf32>
  func.return %1, %3 : tensor<8xf32>, tensor<8xf32>
}

// -----

// Negative: integer tensors, comparisons, where and unknown ATen ops run on the CPU.
// CHECK-LABEL: func.func @cpu_ops
// CHECK:         npu.add %i {{.*}}device = "cpu"
// CHECK-NEXT:    npu.le {{.*}}device = "cpu"
// CHECK-NEXT:    npu.where {{.*}}device = "cpu"
// CHECK-NEXT:    npu.generic "aten.flip.default"{{.*}}device = "cpu"
func.func @cpu_ops(%i: tensor<4xi64>, %x: tensor<4xf32>) -> (tensor<4xi64>, tensor<4xf32>, tensor<4xf32>) {
  %0 = npu.add %i {scalar = 1 : i64} : (tensor<4xi64>) -> tensor<4xi64>
  %1 = npu.le %x {scalar = 0.000000e+00 : f64} : (tensor<4xf32>) -> tensor<4xi1>
  %2 = npu.where %1, %x {scalar = 0.000000e+00 : f64} : (tensor<4xi1>, tensor<4xf32>) -> tensor<4xf32>
  %3 = npu.generic "aten.flip.default"(%x, [0 : i64]) : (tensor<4xf32>) -> tensor<4xf32>
  func.return %0, %2, %3 : tensor<4xi64>, tensor<4xf32>, tensor<4xf32>
}

// -----

// Negative: dynamic shapes, f64, and sdpa with a boolean mask stay on the CPU.
// CHECK-LABEL: func.func @unsupported_shapes
// CHECK:         npu.exp %d {device = "cpu"}
// CHECK-NEXT:    npu.exp %f {device = "cpu"}
// CHECK-NEXT:    npu.sdpa {{.*}}device = "cpu"
func.func @unsupported_shapes(%d: tensor<?x4xf32>, %f: tensor<4xf64>, %q: tensor<1x2x4x8xf32>, %m: tensor<1x1x4x4xi1>) -> (tensor<?x4xf32>, tensor<4xf64>, tensor<1x2x4x8xf32>) {
  %0 = npu.exp %d : tensor<?x4xf32>
  %1 = npu.exp %f : tensor<4xf64>
  %2 = npu.sdpa %q, %q, %q, %m : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x1x4x4xi1>) -> tensor<1x2x4x8xf32>
  func.return %0, %1, %2 : tensor<?x4xf32>, tensor<4xf64>, tensor<1x2x4x8xf32>
}

// -----

// Positive: a float constant only CPU ops read stays on the CPU; one the NPU reads
// goes to the NPU.
// CHECK-LABEL: func.func @constants
// CHECK:         %zero = npu.constant {device = "cpu"}
// CHECK-NEXT:    %one = npu.constant {device = "npu"}
// CHECK-NEXT:    npu.where {{.*}}device = "cpu"
// CHECK-NEXT:    npu.add {{.*}}device = "npu"
func.func @constants(%m: tensor<4xi1>, %x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %zero = npu.constant dense<0.000000e+00> : tensor<f32>
  %one = npu.constant dense<1.000000e+00> : tensor<f32>
  %0 = npu.where %m, %zero {scalar = -1.000000e+00 : f64} : (tensor<4xi1>, tensor<f32>) -> tensor<4xf32>
  %1 = npu.add %x, %one : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  func.return %0, %1 : tensor<4xf32>, tensor<4xf32>
}

// -----

// Heads (cpu-head-gflops): a weighted fp32 linear that only func.return reads, with a
// weight argument, moves to the CPU at or above the threshold (1e-6 GFLOP on the second
// RUN line; these do 2*4*16*8 = 1024 FLOP). Negative by default: the option is off.
// CHECK-LABEL: func.func @heads
// CHECK:         npu.linear {{.*}}device = "npu"
// CHECK-NEXT:    npu.addmm {{.*}}device = "npu"
// HEAD-LABEL:  func.func @heads
// HEAD:          npu.linear {{.*}}device = "cpu"
// HEAD-NEXT:     npu.addmm {{.*}}device = "cpu"
func.func @heads(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>, %b: tensor<16xf32>, %wt: tensor<8x16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>) {
  %0 = npu.linear %x, %w : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  %1 = npu.addmm %b, %x, %wt : (tensor<16xf32>, tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  func.return %0, %1 : tensor<4x16xf32>, tensor<4x16xf32>
}

// -----

// Negative (heads): a linear another op reads, one whose weight is computed, one with
// an fp16 weight, and one below the threshold (2*1*2*8 = 32 FLOP) stay on the NPU.
// HEAD-LABEL:  func.func @not_heads
// HEAD:          %0 = npu.linear {{.*}}device = "npu"
// HEAD-NEXT:     npu.gelu {{.*}}device = "npu"
// HEAD-NEXT:     %2 = npu.exp %w {device = "npu"}
// HEAD-NEXT:     %3 = npu.linear {{.*}}device = "npu"
// HEAD-NEXT:     %4 = npu.linear {{.*}}device = "npu"
// HEAD-NEXT:     %5 = npu.linear {{.*}}device = "npu"
func.func @not_heads(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>, %s: tensor<1x8xf32>, %v: tensor<2x8xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<1x2xf32>) {
  %0 = npu.linear %x, %w : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  %1 = npu.gelu %0 : tensor<4x16xf32>
  %2 = npu.exp %w : tensor<16x8xf32>
  %3 = npu.linear %x, %2 : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  %4 = npu.linear %x, %w {precision = "fp16"} : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  %5 = npu.linear %s, %v : (tensor<1x8xf32>, tensor<2x8xf32>) -> tensor<1x2xf32>
  func.return %0, %1, %3, %4, %5 : tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<1x2xf32>
}

// -----

// Negative: zero-size tensors and dimensions beyond NNFactory's uint32 shapes stay on
// the CPU (torch runs them; NNFactory builds no empty tensors).
// CHECK-LABEL: func.func @zero_size
// CHECK:         npu.linear {{.*}}device = "cpu"
// CHECK:         npu.relu {{.*}}device = "cpu"
// CHECK:         npu.relu {{.*}}device = "cpu"
func.func @zero_size(%a: tensor<0x8xf32>, %w: tensor<8x8xf32>, %big: tensor<4294967296xf32>) -> (tensor<0x8xf32>, tensor<4294967296xf32>) {
  %0 = npu.linear %a, %w : (tensor<0x8xf32>, tensor<8x8xf32>) -> tensor<0x8xf32>
  %1 = npu.relu %0 : tensor<0x8xf32>
  %2 = npu.relu %big : tensor<4294967296xf32>
  func.return %1, %2 : tensor<0x8xf32>, tensor<4294967296xf32>
}
