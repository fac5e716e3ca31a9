// npu.maximum/npu.minimum lower to OpenVINO's Maximum/Minimum with torch's NaN
// semantics (scripts/build_nnfactory.sh, eltwise_max/eltwise_min), not to
// x + relu(y - x), which cancels when the operands differ in magnitude (issue 50).
// --check-numerics ends by running the placed module's compiled executable (NNFactory
// segments and CPU steps) against the reference executor.

// RUN: forge-opt %s -p forge-pipeline --check-numerics | filecheck %s
// CHECK: npu.maximum {{.*}}device = "npu"
// CHECK: npu.minimum {{.*}}device = "npu"

// The old lowering, put back by a test plugin, is named by the executable check.
// RUN: not forge-opt %s --load-pass-plugin %S/Inputs/relu_extremes.py -p forge-pipeline,test-relu-extremes --check-numerics 2>&1 | filecheck %s --check-prefix=RELU
// RELU: forge-opt: error: the compiled executable (NNFactory segments and CPU steps) differs from the reference: max-abs difference {{.*}} on 2 random inputs of @clamp_below

// maximum(x - 1e9, y): a floor far below the values, as masking and clamp_min write it.
func.func @clamp_below(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = npu.add %x {scalar = -1.000000e+09 : f64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %1 = npu.maximum %0, %y : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %1 : tensor<4x8xf32>
}

// minimum(x + 1e9, y) and a NaN second operand (sqrt of the negative half of x).
func.func @clamp_above_nan(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = npu.add %x {scalar = 1.000000e+09 : f64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %1 = npu.minimum %0, %y : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %2 = npu.sqrt %x : tensor<4x8xf32>
  %3 = npu.maximum %y, %2 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %4 = npu.add %1, %3 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %4 : tensor<4x8xf32>
}
