// Generic ATen ops and eval-mode dropout are pure values: dce/cse may remove or merge
// them. Ops marked `side_effects` and train-mode dropout are never removed.

// RUN: forge-opt %s -p dce | filecheck %s
// CHECK-LABEL: func.func @effects
// CHECK-NOT:     "aten.cumsum.default"
// CHECK-NOT:     npu.dropout %x {p = 1.000000e-01 : f64} :
// CHECK:         npu.generic "aten._assert_tensor_metadata.default"(%x) side_effects : (tensor<4xf32>) -> ()
// CHECK-NEXT:    npu.dropout %x {p = 1.000000e-01 : f64, train} : tensor<4xf32>
// CHECK-NEXT:    func.return %x : tensor<4xf32>

// RUN: forge-opt %s -p cse | filecheck %s --check-prefix=CSE
// CSE-LABEL: func.func @merge
// CSE:         %0 = npu.generic "aten.cumsum.default"(%x, 0 : i64) : (tensor<4xf32>) -> tensor<4xf32>
// CSE-NEXT:    %1 = npu.add %0, %0
// CSE-LABEL: func.func @no_merge
// CSE:         npu.generic "aten.rand_like.default"(%x) side_effects
// CSE-NEXT:    npu.generic "aten.rand_like.default"(%x) side_effects

func.func @effects(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = npu.generic "aten.cumsum.default"(%x, 0 : i64) : (tensor<4xf32>) -> tensor<4xf32>
  %1 = npu.dropout %x {p = 1.000000e-01 : f64} : tensor<4xf32>
  npu.generic "aten._assert_tensor_metadata.default"(%x) side_effects : (tensor<4xf32>) -> ()
  %2 = npu.dropout %x {p = 1.000000e-01 : f64, train} : tensor<4xf32>
  func.return %x : tensor<4xf32>
}

func.func @merge(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = npu.generic "aten.cumsum.default"(%x, 0 : i64) : (tensor<4xf32>) -> tensor<4xf32>
  %1 = npu.generic "aten.cumsum.default"(%x, 0 : i64) : (tensor<4xf32>) -> tensor<4xf32>
  %2 = npu.add %0, %1 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return %2 : tensor<4xf32>
}

func.func @no_merge(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = npu.generic "aten.rand_like.default"(%x) side_effects : (tensor<4xf32>) -> tensor<4xf32>
  %1 = npu.generic "aten.rand_like.default"(%x) side_effects : (tensor<4xf32>) -> tensor<4xf32>
  %2 = npu.add %0, %1 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return %2 : tensor<4xf32>
}
