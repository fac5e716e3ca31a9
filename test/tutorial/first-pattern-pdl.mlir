// The PDL path of docs/first-pattern.md runs as written: the same FileCheck test passes
// with the PDL pattern, whose output is byte-identical to the Python pattern's.
// RUN: forge-opt %S/../../docs/tutorial/fold-double-neg.mlir -p 'npu-apply-pdl{file="%S/../../docs/tutorial/fold-double-neg.pdl.mlir"},npu-dce' | filecheck %S/../../docs/tutorial/fold-double-neg.mlir
// RUN: forge-opt %S/../../docs/tutorial/fold-double-neg.mlir -p 'npu-apply-pdl{file="%S/../../docs/tutorial/fold-double-neg.pdl.mlir"}' -o %t.pdl.mlir
// RUN: forge-opt %S/../../docs/tutorial/fold-double-neg.mlir --load-pass-plugin %S/../../docs/tutorial/fold_double_neg.py -p npu-fold-double-neg -o %t.py.mlir
// RUN: diff %t.py.mlir %t.pdl.mlir
// RUN: forge-opt %S/../../docs/tutorial/fold-double-neg.mlir -p 'npu-apply-pdl{file="%S/../../docs/tutorial/fold-double-neg.pdl.mlir"}' --pass-statistics -o %t 2>&1 | filecheck %s
// CHECK: npu-apply-pdl {{ +}}1
