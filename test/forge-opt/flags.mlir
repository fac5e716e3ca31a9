// The flags mlir-opt/xdsl-opt users expect.

// Pipelines run in order; --time-passes reports each pass on stderr.
// RUN: forge-opt %s -p cse,dce --time-passes 2>&1 | filecheck %s --check-prefix=TIME
// TIME:      func.func @dup
// TIME-NEXT:   %0 = npu.tanh %x : tensor<4xf32>
// TIME-NEXT:   %1 = npu.add %0, %0 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
// TIME-NEXT:   func.return %1 : tensor<4xf32>
// TIME:      Pass execution timing report
// TIME:      ms  cse
// TIME-NEXT: ms  dce

// --print-ir-after-all dumps the IR after every pass to stderr.
// RUN: forge-opt %s -p dce,cse --print-ir-after-all 2>&1 >/dev/null | filecheck %s --check-prefix=AFTER
// AFTER:      IR Dump After dce
// AFTER:      npu.tanh
// AFTER-NEXT: npu.tanh
// AFTER-NEXT: npu.add
// AFTER:      IR Dump After cse
// AFTER:      npu.tanh
// AFTER-NEXT: npu.add

// -o writes the output to a file.
// RUN: forge-opt %s -p dce -o %t.mlir && filecheck %s --check-prefix=OUT < %t.mlir
// OUT: func.func @dup
// OUT-NOT: npu.exp

// --print-op-generic prints the generic form; it parses back to the same custom form.
// RUN: forge-opt %s --print-op-generic | filecheck %s --check-prefix=GENERIC
// GENERIC: "npu.tanh"(%x) : (tensor<4xf32>) -> tensor<4xf32>
// RUN: forge-opt %s --print-op-generic | forge-opt | filecheck %s --check-prefix=ROUND
// ROUND: %1 = npu.tanh %x : tensor<4xf32>

// --list-passes names the registered passes.
// RUN: forge-opt --list-passes | filecheck %s --check-prefix=LIST
// LIST-DAG: cse
// LIST-DAG: dce
// LIST-DAG: canonicalize

func.func @dup(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = npu.tanh %x : tensor<4xf32>
  %1 = npu.tanh %x : tensor<4xf32>
  %2 = npu.exp %0 : tensor<4xf32>
  %3 = npu.add %0, %1 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return %3 : tensor<4xf32>
}
