// Found by `forge fuzz-ir --cases 200` (seed 0): xDSL's string-literal regex
// backtracked exponentially on an unterminated literal and forge-opt never finished.
// Fixed in forge/support/xdsl_compat.py (possessive quantifiers).
// RUN: not timeout 60 forge-opt %s -p forge-pipeline 2>&1 | filecheck %s

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = npu.generic "aten.rand_like.de(%x) side_effects : (tensor<4xf32>) -> tensor<4xf32>
  func.return %0 : tensor<4xf32>
}

// CHECK: unterminated-string-hang.mlir:7:20: error: End of file reached before closing string literal
// CHECK-NOT: Traceback
