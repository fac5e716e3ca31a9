// SSA dominance is verified after parsing and after every pass: a use above its
// definition is a located one-line error, not accepted IR.

// RUN: not forge-opt %s --split-input-file 2>&1 | filecheck %s
// RUN: not forge-opt %s --split-input-file --check-numerics 2>&1 | filecheck %s

// CHECK: dominance.mlir:[[# @LINE + 2]]:3: error: 'npu.relu' op operand #0 does not dominate this use
func.func @use_before_def(%a: tensor<2xf32>) -> tensor<2xf32> {
  %1 = npu.relu %0 : tensor<2xf32>
  %0 = npu.relu %a : tensor<2xf32>
  func.return %1 : tensor<2xf32>
}
