// npu-place-devices: the capability table decides; unsupported ops go to the CPU, and
// data movement of CPU values stays on the CPU; with a host profile (profile=PATH),
// fp32 linears go where that host measured them cheaper, transitions included.
// The profiles are fixed files (Inputs/host-profile-*.json), so the output does not
// depend on the machine: all three measured a 4x8->16 linear (1024 FLOP, as every
// linear of the profile tests here, so no scaling). The CPU must come in under 85% of
// NNFactory's time (MARGIN), here 0.85 x 1.6 = 1.36 ms.
//   cpu:      CPU 1.0 ms, NNFactory 1.6 ms, 0.1 ms per transition
//   npu:      CPU 2.0 ms, NNFactory 1.0 ms, 0.1 ms per transition
//   slow-hop: as cpu, with 0.2 ms per transition
//   head-close: the vocabulary head's bucket (128x768->8192) CPU 7.4 ms, NNFactory
//             8.0 ms: 7.5% faster, inside MARGIN (15%), outside HEAD_MARGIN (5%)

// RUN: forge-opt %s -p npu-place-devices --split-input-file | filecheck %s
// RUN: forge-opt %s -p 'npu-place-devices{profile="%S/Inputs/host-profile-cpu.json"}' --split-input-file | filecheck %s --check-prefix=CPU
// RUN: forge-opt %s -p 'npu-place-devices{profile="%S/Inputs/host-profile-npu.json"}' --split-input-file | filecheck %s --check-prefix=NPU
// RUN: forge-opt %s -p 'npu-place-devices{profile="%S/Inputs/host-profile-slow-hop.json"}' --split-input-file | filecheck %s --check-prefix=HOP
// RUN: forge-opt %s -p 'npu-place-devices{profile="%S/Inputs/host-profile-head-close.json"}' --split-input-file | filecheck %s --check-prefix=CLOSE
// RUN: not forge-opt %s -p 'npu-place-devices{profile="%S/Inputs/missing.json"}' 2>&1 | filecheck %s --check-prefix=MISSING
// RUN: not forge-opt %s -p 'npu-place-devices{profile="%s"}' 2>&1 | filecheck %s --check-prefix=NOTJSON
// MISSING: forge-opt: error: invalid pass pipeline {{.*}}: cannot read host profile {{.*}}missing.json: No such file or directory
// NOTJSON: forge-opt: error: invalid pass pipeline {{.*}}: {{.*}}npu-place-devices.mlir: not JSON

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

// Linears read only by func.return (heads) whose input is an argument: no transition
// either way, so the faster device takes them. Off without a profile.
// CHECK-LABEL: func.func @heads
// CHECK:         npu.linear {{.*}}device = "npu"
// CHECK-NEXT:    npu.addmm {{.*}}device = "npu"
// CPU-LABEL:   func.func @heads
// CPU:           npu.linear {{.*}}device = "cpu"
// CPU-NEXT:      npu.addmm {{.*}}device = "cpu"
// NPU-LABEL:   func.func @heads
// NPU:           npu.linear {{.*}}device = "npu"
// NPU-NEXT:      npu.addmm {{.*}}device = "npu"
func.func @heads(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>, %b: tensor<16xf32>, %wt: tensor<8x16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>) {
  %0 = npu.linear %x, %w : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  %1 = npu.addmm %b, %x, %wt : (tensor<16xf32>, tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  func.return %0, %1 : tensor<4x16xf32>, tensor<4x16xf32>
}

// -----

// An LM head after an NPU op: one transition (1.0 + 0.1 or + 0.2 < 1.36: the CPU on
// both profiles where the CPU wins). A linear between NPU ops: two transitions, and
// the dearer transition flips it back (1.0 + 2 x 0.1 = 1.2 < 1.36: CPU; 1.0 + 2 x 0.2
// = 1.4 > 1.36: NPU).
// CPU-LABEL:   func.func @transitions
// CPU:           npu.gelu {{.*}}device = "npu"
// CPU-NEXT:      npu.linear {{.*}}device = "cpu"
// CPU-NEXT:      npu.gelu {{.*}}device = "npu"
// CPU-NEXT:      npu.linear {{.*}}device = "cpu"
// HOP-LABEL:   func.func @transitions
// HOP:           npu.gelu {{.*}}device = "npu"
// HOP-NEXT:      npu.linear {{.*}}device = "npu"
// HOP-NEXT:      npu.gelu {{.*}}device = "npu"
// HOP-NEXT:      npu.linear {{.*}}device = "cpu"
// NPU-LABEL:   func.func @transitions
// NPU-COUNT-4:   device = "npu"
func.func @transitions(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>, %h: tensor<8x16xf32>) -> tensor<4x8xf32> {
  %0 = npu.gelu %x : tensor<4x8xf32>
  %1 = npu.linear %0, %w : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  %2 = npu.gelu %1 : tensor<4x16xf32>
  %3 = npu.linear %2, %h : (tensor<4x16xf32>, tensor<8x16xf32>) -> tensor<4x8xf32>
  func.return %3 : tensor<4x8xf32>
}

// -----

// Negative (profile): a linear whose weight is computed, and one with an fp16 weight
// (the profile measured fp32 graphs), stay on the NPU even where the CPU wins.
// CPU-LABEL:   func.func @not_moved
// CPU:           %0 = npu.exp %w {device = "npu"}
// CPU-NEXT:      %1 = npu.linear {{.*}}device = "npu"
// CPU-NEXT:      %2 = npu.linear {{.*}}device = "npu"
func.func @not_moved(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>) {
  %0 = npu.exp %w : tensor<16x8xf32>
  %1 = npu.linear %x, %0 : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  %2 = npu.linear %x, %w {precision = "fp16"} : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  func.return %1, %2 : tensor<4x16xf32>, tensor<4x16xf32>
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

// -----

// An LM head estimated from the vocabulary head's bucket needs only HEAD_MARGIN: the
// CPU's 7.5% wins it (7.4 < 0.95 x 8.0 = 7.6 ms). Negative: the same linear read by an
// NPU op is no head; with MARGIN and its one transition (7.4 + 0.1 > 0.85 x 8.0) it
// stays in the graph.
// CLOSE-LABEL: func.func @vocabulary
// CLOSE:         npu.linear {{.*}}device = "npu"
// CLOSE-NEXT:    npu.gelu {{.*}}device = "npu"
// CLOSE-NEXT:    npu.linear {{.*}}device = "cpu"
// NPU-LABEL:   func.func @vocabulary
// NPU-COUNT-3:   device = "npu"
func.func @vocabulary(%x: tensor<1x128x768xf32>, %w: tensor<8192x768xf32>) -> (tensor<1x128x8192xf32>, tensor<1x128x8192xf32>) {
  %0 = npu.linear %x, %w : (tensor<1x128x768xf32>, tensor<8192x768xf32>) -> tensor<1x128x8192xf32>
  %1 = npu.gelu %0 : tensor<1x128x8192xf32>
  %2 = npu.linear %x, %w : (tensor<1x128x768xf32>, tensor<8192x768xf32>) -> tensor<1x128x8192xf32>
  func.return %1, %2 : tensor<1x128x8192xf32>, tensor<1x128x8192xf32>
}
