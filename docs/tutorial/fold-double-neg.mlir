// RUN: forge-opt %s --load-pass-plugin %S/fold_double_neg.py -p npu-fold-double-neg,npu-dce | filecheck %s

// Positive: the pair disappears.
// CHECK-LABEL: func.func @double
// CHECK-NEXT:    func.return %x : tensor<4xf32>
func.func @double(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = npu.neg %x : tensor<4xf32>
  %1 = npu.neg %0 : tensor<4xf32>
  func.return %1 : tensor<4xf32>
}

// Negative: a single neg stays.
// CHECK-LABEL: func.func @single
// CHECK-NEXT:    %0 = npu.neg %x : tensor<4xf32>
// CHECK-NEXT:    func.return %0 : tensor<4xf32>
func.func @single(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = npu.neg %x : tensor<4xf32>
  func.return %0 : tensor<4xf32>
}
