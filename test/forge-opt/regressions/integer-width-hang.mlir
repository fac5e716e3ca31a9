// Found by `forge fuzz-ir --cases 2000` (seed 0), shrunk to one line: verifying the
// value of an `i9999999999` built 2**9999999999 and forge-opt never finished.
// Fixed in forge/support/xdsl_compat.py (MLIR's 16777215-bit limit); the error points at the op.
// RUN: not timeout 60 forge-opt %s -p forge-pipeline 2>&1 | filecheck %s
// CHECK-NOT: Traceback
// CHECK: integer-width-hang.mlir:9:3: error: integer bitwidth is limited to 16777215 bits (got 9999999999)
// CHECK-NOT: {{^.}}

  %0 = npu.generic "aten.cumsum.default"(%x, 0 : i9999999999) : (tensor<4xf32>) -> tensor<4xf32>
