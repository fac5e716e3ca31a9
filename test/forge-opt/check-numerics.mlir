// --check-numerics executes the IR before and after each pass on random inputs and
// names the first pass that changes the results.

// Correct passes pass the check.
// RUN: forge-opt %s -p npu-dce,npu-cse,npu-fold-constants,npu-fuse-operators --check-numerics | filecheck %s
// CHECK: func.func @f

// The whole pipeline on a real model changes nothing (no false alarm).
// RUN: forge import llama-3.2-1b --tiny --seq 8 -o %t.llama.mlir 2>/dev/null
// RUN: forge-opt %t.llama.mlir -p forge-pipeline --check-numerics -o /dev/null

// A deliberately broken pattern is named; the passes before it are not.
// RUN: not forge-opt %s --load-pass-plugin %S/Inputs/broken_scale.py -p npu-dce,test-broken-scale,npu-cse --check-numerics 2>&1 | filecheck %s --check-prefix=BROKEN
// BROKEN: forge-opt: error: pass 'test-broken-scale' changed the results: max-abs difference {{.*}} on 2 random inputs
// BROKEN-NOT: npu-dce

func.func @f(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>) -> tensor<4x16xf32> {
  %0 = npu.mul %x {scalar = 2.000000e+00 : f64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %1 = npu.mul %0 {scalar = 1.000000e+00 : f64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %2 = npu.linear %1, %w : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  %3 = npu.relu %2 : tensor<4x16xf32>
  %4 = npu.dropout %3 {p = 1.000000e-01 : f64} : tensor<4x16xf32>
  func.return %4 : tensor<4x16xf32>
}
