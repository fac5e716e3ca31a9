// mlir-opt's spellings work in forge-opt: single-dash long options, the --mlir- printing,
// statistics and timing flags, --verify-each=false; a pipeline given twice and an unknown
// --trace-patterns name are one-line errors; `FileCheck` is this suite's checker too.

// RUN: forge-opt %s -pass-pipeline='builtin.module(npu-dce)' | FileCheck %s
// RUN: forge-opt %s -pass-pipeline 'builtin.module(npu-dce)' -split-input-file | FileCheck %s
// RUN: forge-opt %s --pass-pipeline=npu-dce -verify-each=false | FileCheck %s
// CHECK: func.func @f
// CHECK-NEXT: npu.tanh
// CHECK-NOT: npu.exp

// RUN: forge-opt %s -p npu-dce -print-ir-after-all 2>&1 >/dev/null | FileCheck %s --check-prefix=AFTER
// RUN: forge-opt %s -p npu-dce --mlir-print-ir-after-all 2>&1 >/dev/null | FileCheck %s --check-prefix=AFTER
// RUN: forge-opt %s -p npu-dce -mlir-print-ir-after=npu-dce 2>&1 >/dev/null | FileCheck %s --check-prefix=AFTER
// AFTER: IR Dump After npu-dce
// RUN: forge-opt %s -p npu-dce --mlir-pass-statistics 2>&1 >/dev/null | FileCheck %s --check-prefix=STATS
// RUN: forge-opt %s -p npu-dce -mlir-pass-statistics 2>&1 >/dev/null | FileCheck %s --check-prefix=STATS
// STATS: npu-dce {{ +}}1 {{ +}}2 {{ +}}1
// RUN: forge-opt %s -p npu-dce --mlir-timing 2>&1 >/dev/null | FileCheck %s --check-prefix=TIMING
// TIMING: Pass execution timing report
// RUN: forge-opt %s -p npu-dce -mlir-print-op-generic | FileCheck %s --check-prefix=GENERIC
// GENERIC: "npu.tanh"

// RUN: not forge-opt %s -p npu-dce -p npu-cse 2>&1 | FileCheck %s --check-prefix=TWICE
// TWICE: forge-opt: error: the pass pipeline is given 2 times (-p, -p): give one -p or --pass-pipeline
// RUN: not forge-opt %s --pass-pipeline=npu-dce -p npu-cse 2>&1 | FileCheck %s --check-prefix=BOTH
// RUN: not forge-opt %s -pass-pipeline=npu-dce -p npu-cse 2>&1 | FileCheck %s --check-prefix=BOTH
// BOTH: forge-opt: error: the pass pipeline is given 2 times (--pass-pipeline, -p): give one -p or --pass-pipeline
// RUN: not forge-opt %s -p npu-dce -verify-each=maybe 2>&1 | FileCheck %s --check-prefix=BOOL
// BOOL: forge-opt: error: --verify-each=maybe: expected true or false
// RUN: not forge-opt %s -p npu-dce --trace-patterns=EraseUnusedPureOpp 2>&1 | FileCheck %s --check-prefix=TRACE
// TRACE: forge-opt: error: --trace-patterns: 'EraseUnusedPureOpp' is no pass or pattern of the pipeline

// --version names where each package was loaded from.
// RUN: forge-opt --version | FileCheck %s --check-prefix=VERSION
// VERSION: forge-opt (forge {{.*}}, xdsl {{.*}})
// VERSION-NEXT: forge: {{.+}}
// VERSION: forge.transforms: {{.+}}
// VERSION-NOT: warning

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = npu.tanh %x : tensor<4xf32>
  %1 = npu.exp %x : tensor<4xf32>
  func.return %0 : tensor<4xf32>
}
