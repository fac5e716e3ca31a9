func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = npu.generic "aten.arange.default"(4 : i64) kwargs {dtype = 6 : i64} : () -> tensor<5xf32>
  %1 = npu.generic "aten.index_select.default"(%x, 0 : i64, %0) : (tensor<4xf32>, tensor<5xf32>) -> tensor<4xf32>
  func.return %1 : tensor<4xf32>
}
