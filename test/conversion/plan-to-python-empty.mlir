// Zero-size tensors run on the CPU (torch supports them; NNFactory builds no empty
// tensors): the plan prints and runs, no abort.

// RUN: forge-opt %s -p forge-pipeline -t python 2>&1 | filecheck %s --check-prefix=EMPTY
// EMPTY: # cpu: npu.fused_linear
// EMPTY: torch.ops.aten.linear.default(
func.func @empty(%a: tensor<0x8xf32>, %w: tensor<8x8xf32>) -> tensor<0x8xf32> {
  %0 = npu.linear %a, %w : (tensor<0x8xf32>, tensor<8x8xf32>) -> tensor<0x8xf32>
  %1 = npu.relu %0 : tensor<0x8xf32>
  func.return %1 : tensor<0x8xf32>
}
