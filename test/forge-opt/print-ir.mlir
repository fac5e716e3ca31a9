// MLIR's IR printing controls: before/after named passes or all, only on change, after
// a failure, the module instead of the function, one file per dump.

// RUN: forge-opt %s -p npu-dce,npu-cse --print-ir-before=npu-cse --print-ir-after=npu-dce -o /dev/null 2>&1 | filecheck %s --check-prefix=NAMED
// NAMED:      // -----// IR Dump After npu-dce //----- //
// NAMED-NEXT: builtin.module {
// NAMED:      // -----// IR Dump Before npu-cse //----- //
// NAMED-NOT:  IR Dump

// RUN: forge-opt %s -p npu-dce,npu-cse --print-ir-before-all -o /dev/null 2>&1 | filecheck %s --check-prefix=BEFOREALL
// BEFOREALL:      // -----// IR Dump Before npu-dce //----- //
// BEFOREALL:      // -----// IR Dump Before npu-cse //----- //
// BEFOREALL-NOT:  IR Dump After

// npu-dce changes nothing here, npu-cse merges the two tanh: only npu-cse is printed.
// RUN: forge-opt %s -p npu-dce,npu-cse --print-ir-after-change -o /dev/null 2>&1 | filecheck %s --check-prefix=CHANGE
// CHANGE-NOT:  IR Dump After npu-dce
// CHANGE:      // -----// IR Dump After npu-cse //----- //
// CHANGE:      npu.tanh
// CHANGE-NOT:  npu.tanh

// Nested passes print their function, or the whole module under --print-ir-module-scope.
// RUN: forge-opt %s -p 'func.func(npu-cse)' --print-ir-after-all -o /dev/null 2>&1 | filecheck %s --check-prefix=FUNC
// FUNC:      // -----// IR Dump After npu-cse ('func.func' operation: @f) //----- //
// FUNC-NEXT: func.func @f
// RUN: forge-opt %s -p 'func.func(npu-cse)' --print-ir-after-all --print-ir-module-scope -o /dev/null 2>&1 | filecheck %s --check-prefix=MODULE
// MODULE:      // -----// IR Dump After npu-cse //----- //
// MODULE-NEXT: builtin.module {

// A pass that raises: the IR as it left it, then the one-line error.
// RUN: not forge-opt %s --load-pass-plugin %S/Inputs/broken_pass.py -p npu-dce,test-crash --print-ir-after-failure --crash-reproducer=none 2>&1 | filecheck %s --check-prefix=FAILED
// FAILED:      // -----// IR Dump After test-crash Failed //----- //
// FAILED:      npu.tanh %x {touched = "by test-crash"}
// FAILED:      forge-opt: error: internal error: RuntimeError: broken on purpose at npu.tanh
// A pass that leaves invalid IR: the IR it left.
// RUN: not forge-opt %s --load-pass-plugin %S/Inputs/breaks_types.py -p test-break-device --print-ir-after-failure 2>&1 | filecheck %s --check-prefix=INVALID
// INVALID:      // -----// IR Dump After test-break-device Failed //----- //
// INVALID:      npu.tanh %x {device = "gpu"}
// INVALID:      error: 'npu.tanh' op device must be one of npu, cpu, got 'gpu' (after pass 'test-break-device')

// --print-ir-tree-dir: one file per dump, numbered in order, nothing on stderr.
// RUN: rm -rf %t.tree
// RUN: forge-opt %s -p 'npu-dce,func.func(npu-cse)' --print-ir-before-all --print-ir-after-all --print-ir-tree-dir=%t.tree -o /dev/null 2> %t.tree.err
// RUN: filecheck %s --check-prefix=QUIET --allow-empty < %t.tree.err
// QUIET-NOT: {{.}}
// RUN: ls %t.tree | filecheck %s --check-prefix=TREE
// TREE:      000_npu-dce_before.mlir
// TREE-NEXT: 001_npu-dce_after.mlir
// TREE-NEXT: 002_npu-cse_before_f.mlir
// TREE-NEXT: 003_npu-cse_after_f.mlir
// RUN: filecheck %s --check-prefix=TREEFILE < %t.tree/003_npu-cse_after_f.mlir
// TREEFILE:      // -----// IR Dump After npu-cse ('func.func' operation: @f) //----- //
// TREEFILE-NEXT: func.func @f

// Unknown pass names are one-line errors.
// RUN: not forge-opt %s -p npu-dce --print-ir-after=npu-dce,no-such-pass 2>&1 | filecheck %s --check-prefix=UNKNOWN
// UNKNOWN: forge-opt: error: --print-ir-after: unknown pass 'no-such-pass'

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = npu.tanh %x : tensor<4xf32>
  %1 = npu.tanh %x : tensor<4xf32>
  %2 = npu.add %0, %1 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return %2 : tensor<4xf32>
}
