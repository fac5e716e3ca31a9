// --elide-elementsattrs-if-larger=N prints dense constants of more than N elements as
// MLIR's dense_resource<__elided__>, in the output and in IR dumps; such text is
// refused when read back, with its location, never misread.

// RUN: forge-opt %s --elide-elementsattrs-if-larger=4 | filecheck %s
// CHECK:      %0 = npu.constant dense<[1.000000e+00, 2.000000e+00, 3.000000e+00, 4.000000e+00]> : tensor<4xf32>
// CHECK-NEXT: %1 = npu.constant dense_resource<__elided__> : tensor<2x3xf32>
// RUN: forge-opt %s -p npu-dce --elide-elementsattrs-if-larger=0 --print-ir-after-all -o /dev/null 2>&1 | filecheck %s --check-prefix=DUMP
// DUMP:      IR Dump After npu-dce
// DUMP:      npu.constant dense_resource<__elided__> : tensor<4xf32>
// DUMP-NEXT: npu.constant dense_resource<__elided__> : tensor<2x3xf32>
// Without the flag nothing is elided.
// RUN: forge-opt %s | filecheck %s --check-prefix=FULL
// FULL-NOT: __elided__

// RUN: forge-opt %s --elide-elementsattrs-if-larger=4 -o %t.elided.mlir
// RUN: not forge-opt %t.elided.mlir 2>&1 | filecheck %s --check-prefix=READBACK
// READBACK: elided.mlir:4:23: error: elided constant: the IR was printed with --elide-elementsattrs-if-larger and cannot be read back
// RUN: not forge-opt %s --elide-elementsattrs-if-larger=-1 2>&1 | filecheck %s --check-prefix=BADN
// BADN: forge-opt: error: argument --elide-elementsattrs-if-larger: expected a non-negative integer, got '-1'

// GPT-2 with folded constants: no printed line over 2,000 characters once elided
// (without eliding, the folded position constants alone exceed it).
// RUN: forge import gpt2 --tiny -o %t.gpt2.mlir 2>/dev/null
// RUN: forge-opt %t.gpt2.mlir -p npu-fold-constants -o %t.folded.mlir
// RUN: not awk 'length($0) > 2000 { exit 1 }' %t.folded.mlir
// RUN: forge-opt %t.gpt2.mlir -p npu-fold-constants --elide-elementsattrs-if-larger=16 -o %t.short.mlir
// RUN: awk 'length($0) > 2000 { print FILENAME ":" FNR ": " length($0) " characters"; exit 1 }' %t.short.mlir
// RUN: filecheck %s --check-prefix=GPT2 < %t.short.mlir
// GPT2: npu.constant dense_resource<__elided__> : tensor<1x{{[0-9]+}}xi64>

func.func @f() -> (tensor<4xf32>, tensor<2x3xf32>) {
  %0 = npu.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
  %1 = npu.constant dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>
  func.return %0, %1 : tensor<4xf32>, tensor<2x3xf32>
}
