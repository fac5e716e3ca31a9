// npu-apply-pdl runs declarative PDL patterns. The PDL versions of two Python rewrites
// (transforms/pdl/) give byte-identical output to the Python pattern's pass on this file:
// every case below is one the Python pass rewrites with that pattern alone, or not at all.

// RUN: forge-opt %s --split-input-file -p npu-dce -o %t.dce.py.mlir
// RUN: forge-opt %s --split-input-file -p 'npu-apply-pdl{file="%S/../../transforms/pdl/eval-dropout.pdl.mlir"}' -o %t.dce.pdl.mlir
// RUN: diff %t.dce.py.mlir %t.dce.pdl.mlir
// A path needs no quotes: an unquoted option value with a '/' is read as one string.
// RUN: forge-opt %s --split-input-file -p npu-apply-pdl{file=%S/../../transforms/pdl/eval-dropout.pdl.mlir} -o %t.dce.bare.mlir
// RUN: diff %t.dce.py.mlir %t.dce.bare.mlir
// RUN: filecheck %s --check-prefix=DROPOUT < %t.dce.pdl.mlir
// --load-pdl FILE names the file for every npu-apply-pdl without one: the same output.
// RUN: forge-opt %s --split-input-file --load-pdl %S/../../transforms/pdl/eval-dropout.pdl.mlir -p npu-apply-pdl -o %t.dce.load.mlir
// RUN: diff %t.dce.py.mlir %t.dce.load.mlir
// RUN: not forge-opt %s --load-pdl %S/../../transforms/pdl/eval-dropout.pdl.mlir -p npu-dce 2>&1 | filecheck %s --check-prefix=LOAD-ALONE
// LOAD-ALONE: forge-opt: error: --load-pdl '{{.*}}eval-dropout.pdl.mlir' needs 'npu-apply-pdl' in the pass pipeline

// RUN: forge-opt %s --split-input-file -p npu-optimize-layout -o %t.layout.py.mlir
// RUN: forge-opt %s --split-input-file -p 'npu-apply-pdl{file="%S/../../transforms/pdl/copy-of-copy.pdl.mlir"}' -o %t.layout.pdl.mlir
// RUN: diff %t.layout.py.mlir %t.layout.pdl.mlir
// RUN: filecheck %s --check-prefix=COPY < %t.layout.pdl.mlir

// Composable with built-in passes in one -p list, and counted by --pass-statistics.
// RUN: forge-opt %s --split-input-file -p npu-optimize-layout,npu-dce -o %t.both.py.mlir
// RUN: forge-opt %s --split-input-file -p 'npu-apply-pdl{file="%S/../../transforms/pdl/copy-of-copy.pdl.mlir"},npu-apply-pdl{file="%S/../../transforms/pdl/eval-dropout.pdl.mlir"},npu-dce' -o %t.both.pdl.mlir
// RUN: diff %t.both.py.mlir %t.both.pdl.mlir
// RUN: forge-opt %s -p 'npu-apply-pdl{file="%S/../../transforms/pdl/copy-of-copy.pdl.mlir"},npu-apply-pdl{file="%S/../../transforms/pdl/eval-dropout.pdl.mlir"},npu-dce' --pass-statistics 2>&1 >/dev/null | filecheck %s --check-prefix=STATS
// STATS: npu-apply-pdl {{ +}}1
// STATS: npu-apply-pdl {{ +}}3
// STATS: npu-dce {{ +}}0

// Positive: eval-mode dropout forwards its input.
// DROPOUT-LABEL: func.func @eval_dropout
// DROPOUT-NEXT:    %0 = npu.tanh %x : tensor<4xf32>
// DROPOUT-NEXT:    func.return %0 : tensor<4xf32>
func.func @eval_dropout(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = npu.dropout %x {p = 1.000000e-01 : f64} : tensor<4xf32>
  %1 = npu.tanh %0 : tensor<4xf32>
  func.return %1 : tensor<4xf32>
}

// -----

// Positive: p = 0 (and -0) is the identity even in training mode.
// DROPOUT-LABEL: func.func @p_zero_dropout
// DROPOUT-NEXT:    %0 = npu.add %x, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
// DROPOUT-NEXT:    func.return %0 : tensor<4xf32>
func.func @p_zero_dropout(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = npu.dropout %x {p = 0.000000e+00 : f64, train} : tensor<4xf32>
  %1 = npu.dropout %x {p = -0.000000e+00 : f64, train} : tensor<4xf32>
  %2 = npu.add %0, %1 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return %2 : tensor<4xf32>
}

// -----

// Negative: training-mode dropout with p > 0 is random: it stays.
// DROPOUT-LABEL: func.func @train_dropout
// DROPOUT-NEXT:    %0 = npu.dropout %x {p = 1.000000e-01 : f64, train} : tensor<4xf32>
// DROPOUT-NEXT:    func.return %0 : tensor<4xf32>
func.func @train_dropout(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = npu.dropout %x {p = 1.000000e-01 : f64, train} : tensor<4xf32>
  func.return %0 : tensor<4xf32>
}

// -----

// Positive: a copy of a copy is the first copy.
// COPY-LABEL: func.func @copy_of_copy
// COPY-NEXT:    %0 = npu.transpose %x {dim0 = 0 : i64, dim1 = 1 : i64} : tensor<2x3xf32> -> tensor<3x2xf32>
// COPY-NEXT:    %1 = npu.contiguous %0 : tensor<3x2xf32>
// COPY-NEXT:    func.return %1 : tensor<3x2xf32>
func.func @copy_of_copy(%x: tensor<2x3xf32>) -> tensor<3x2xf32> {
  %0 = npu.transpose %x {dim0 = 0 : i64, dim1 = 1 : i64} : tensor<2x3xf32> -> tensor<3x2xf32>
  %1 = npu.contiguous %0 : tensor<3x2xf32>
  %2 = npu.contiguous %1 : tensor<3x2xf32>
  func.return %2 : tensor<3x2xf32>
}

// -----

// Negative: one copy of a strided view is needed: it stays.
// COPY-LABEL: func.func @needed_copy
// COPY-NEXT:    %0 = npu.transpose %x {dim0 = 0 : i64, dim1 = 1 : i64} : tensor<2x3xf32> -> tensor<3x2xf32>
// COPY-NEXT:    %1 = npu.contiguous %0 : tensor<3x2xf32>
// COPY-NEXT:    func.return %1 : tensor<3x2xf32>
func.func @needed_copy(%x: tensor<2x3xf32>) -> tensor<3x2xf32> {
  %0 = npu.transpose %x {dim0 = 0 : i64, dim1 = 1 : i64} : tensor<2x3xf32> -> tensor<3x2xf32>
  %1 = npu.contiguous %0 : tensor<3x2xf32>
  func.return %1 : tensor<3x2xf32>
}

// Errors are one line with a location.
// RUN: not forge-opt %s --split-input-file -p 'npu-apply-pdl{file="%S/no-such.pdl.mlir"}' 2>&1 | filecheck %s --check-prefix=MISSING
// MISSING: {{.*}}no-such.pdl.mlir: error: no such PDL file (for npu-apply-pdl)
// RUN: not forge-opt %s --split-input-file -p npu-apply-pdl 2>&1 | filecheck %s --check-prefix=NOFILE
// NOFILE: forge-opt: error: npu-apply-pdl needs a PDL file: -p 'npu-apply-pdl{file=PATH}'
// RUN: not forge-opt %s --split-input-file -p 'npu-apply-pdl{file="%s"}' 2>&1 | filecheck %s --check-prefix=NOTPDL
// NOTPDL: npu-apply-pdl.mlir:{{[0-9]+}}:1: error: 'func.func' op a PDL file holds only 'pdl.pattern' ops
// RUN: echo 'pdl.pattern : benefit(1) { %x = pdl.operation "npu.nope" pdl.rewrite %x { pdl.erase %x } }' > %t.unknown.mlir
// RUN: not forge-opt %s --split-input-file -p 'npu-apply-pdl{file="%t.unknown.mlir"}' 2>&1 | filecheck %s --check-prefix=UNKNOWN
// UNKNOWN: unknown.mlir:1:28: error: 'pdl.operation' op unknown operation 'npu.nope' (no loaded dialect defines it)
// RUN: echo 'pdl.pattern : benefit(1) { %x = pdl.operation "npu.neg" pdl.rewrite %x' > %t.malformed.mlir
// RUN: not forge-opt %s --split-input-file -p 'npu-apply-pdl{file="%t.malformed.mlir"}' 2>&1 | filecheck %s --check-prefix=MALFORMED
// MALFORMED: malformed.mlir:{{[0-9]+}}:{{[0-9]+}}: error: {{.+}}
// MALFORMED-NOT: Traceback
