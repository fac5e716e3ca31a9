// Negative: definitions above their uses, across functions, verify fine.
// RUN: forge-opt %s | filecheck %s
// CHECK: func.func @g
func.func @f(%a: tensor<2xf32>) -> tensor<2xf32> {
  %0 = npu.relu %a : tensor<2xf32>
  %1 = npu.relu %0 : tensor<2xf32>
  func.return %1 : tensor<2xf32>
}
func.func @g(%a: tensor<2xf32>) -> tensor<2xf32> {
  %0 = npu.tanh %a : tensor<2xf32>
  func.return %0 : tensor<2xf32>
}
