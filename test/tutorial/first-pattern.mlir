// The tutorial in docs/first-pattern.md runs as written: its pass and its FileCheck test.
// RUN: forge-opt %S/../../docs/tutorial/fold-double-neg.mlir --load-pass-plugin %S/../../docs/tutorial/fold_double_neg.py -p npu-fold-double-neg,npu-dce | filecheck %S/../../docs/tutorial/fold-double-neg.mlir
// RUN: forge-opt %S/../../docs/tutorial/fold-double-neg.mlir --load-pass-plugin %S/../../docs/tutorial/fold_double_neg.py -p npu-fold-double-neg --pass-statistics -o %t 2>&1 | filecheck %s
// CHECK: npu-fold-double-neg {{ +}}1
// RUN: not forge-opt %S/../../docs/tutorial/fold-double-neg.mlir --load-pass-plugin %S/no_such_plugin.py 2>&1 | filecheck %s --check-prefix=MISSING
// MISSING: forge-opt: error: cannot load pass plugin '{{.*}}no_such_plugin.py': no such Python file
