// --check-numerics checks every function of the module, and holds each result to its
// dtype's tolerance (bf16: 3e-2 relative, f32: 1e-5).

// RUN: forge-opt %s -p forge-pipeline --check-numerics | filecheck %s
// CHECK-DAG: func.func @f32_block
// CHECK-DAG: func.func @bf16_block

// A broken pass is caught in whichever function it breaks.
// RUN: not forge-opt %s --load-pass-plugin %S/Inputs/broken_scale.py -p test-broken-scale --check-numerics 2>&1 | filecheck %s --check-prefix=BROKEN
// BROKEN: forge-opt: error: pass 'test-broken-scale' changed the results: max-abs difference {{.*}} on 2 random inputs of @{{f32_block|bf16_block}}

func.func @f32_block(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>) -> tensor<4x16xf32> {
  %0 = npu.mul %x {scalar = 2.000000e+00 : f64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %1 = npu.linear %0, %w : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  %2 = npu.gelu %1 : tensor<4x16xf32>
  func.return %2 : tensor<4x16xf32>
}

func.func @bf16_block(%x: tensor<4x8xbf16>, %w: tensor<16x8xbf16>, %b: tensor<16xbf16>) -> tensor<4x16xbf16> {
  %0 = npu.linear %x, %w : (tensor<4x8xbf16>, tensor<16x8xbf16>) -> tensor<4x16xbf16>
  %1 = npu.add %0, %b : (tensor<4x16xbf16>, tensor<16xbf16>) -> tensor<4x16xbf16>
  %2 = npu.gelu %1 : tensor<4x16xbf16>
  %3 = npu.mul %2 {scalar = 5.000000e-01 : f64} : (tensor<4x16xbf16>) -> tensor<4x16xbf16>
  func.return %3 : tensor<4x16xbf16>
}
