// The IR is verified after every pass (--verify-each, the default): a pass that leaves
// invalid IR is named, with the location of the first invalid op.

// RUN: not forge-opt %s --load-pass-plugin %S/Inputs/breaks_types.py -p test-break-device,npu-dce 2>&1 | filecheck %s
// CHECK: verify-each.mlir:12:3: error: 'npu.exp' op device must be one of npu, cpu, got 'gpu' (after pass 'test-break-device')

// --no-verify-each verifies only at the end: the last pass is named, as not verified before it.
// RUN: not forge-opt %s --load-pass-plugin %S/Inputs/breaks_types.py -p test-break-device,npu-dce --no-verify-each 2>&1 | filecheck %s --check-prefix=END
// END: error: 'npu.exp' op device must be one of npu, cpu, got 'gpu' (verified only after the last pass, 'npu-dce')

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = npu.exp %x : tensor<4xf32>
  func.return %0 : tensor<4xf32>
}
