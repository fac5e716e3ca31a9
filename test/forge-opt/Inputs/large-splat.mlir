func.func @splat(%x: tensor<2x3x100000000xf32>) -> tensor<2x3x100000000xf32> {
  %0 = arith.constant dense<1.0> : tensor<2x3x100000000xf32>
  %1 = npu.add %x, %0 : (tensor<2x3x100000000xf32>, tensor<2x3x100000000xf32>) -> tensor<2x3x100000000xf32>
  func.return %1 : tensor<2x3x100000000xf32>
}

// -----

func.func @limit() -> tensor<1048576xf32> {
  %0 = arith.constant dense<1.0> : tensor<1048576xf32>
  func.return %0 : tensor<1048576xf32>
}
