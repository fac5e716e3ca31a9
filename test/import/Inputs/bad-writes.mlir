func.func @f(%x: tensor<2xf32>, %s: tensor<2xf32>) -> (tensor<2xf32>, tensor<2xf32>) attributes {npu.writes = ["nope"]} {
  %0 = npu.relu %x : tensor<2xf32>
  func.return %0, %0 : tensor<2xf32>, tensor<2xf32>
}
