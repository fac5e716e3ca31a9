// --split-input-file processes each chunk on its own; --print-diagnostics prints
// each chunk's diagnostic (with its true line number) and carries on.

// RUN: forge-opt %s --split-input-file | filecheck %s
// RUN: forge-opt %s --split-input-file --print-op-generic | forge-opt --split-input-file | filecheck %s
// CHECK: func.func @first
// CHECK: // {{-+}}
// CHECK: func.func @second

// RUN: not forge-opt %s 2>&1 | filecheck %s --check-prefix=NOSPLIT
// NOSPLIT: error: 'builtin.module' op Redefinition of symbol "first"

func.func @first(%x: tensor<2xf32>) -> tensor<2xf32> {
  func.return %x : tensor<2xf32>
}

// -----

func.func @first(%x: tensor<2xf32>) -> tensor<2xf32> {
  func.return %x : tensor<2xf32>
}

// -----

func.func @second(%x: tensor<2xf32>) -> tensor<2xf32> {
  %0 = npu.neg %x : tensor<2xf32>
  func.return %0 : tensor<2xf32>
}
