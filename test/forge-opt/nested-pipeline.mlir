// MLIR's nested pipeline syntax: builtin.module(...) and func.func(...) anchors, with
// per-pass options; passes under func.func(...) run on each function by itself.

// An MLIR test string copied verbatim runs unchanged, as -p or --pass-pipeline.
// RUN: forge-opt %s -p 'builtin.module(func.func(cse,canonicalize))' | filecheck %s
// RUN: forge-opt %s --pass-pipeline='builtin.module(func.func(cse, canonicalize))' | filecheck %s
// A flat list is the same pipeline at module level.
// RUN: forge-opt %s -p cse,canonicalize | filecheck %s
// CHECK-LABEL: func.func @f
// CHECK-NEXT:    %0 = npu.tanh %x : tensor<4xf32>
// CHECK-NEXT:    %1 = npu.add %0, %0
// CHECK-LABEL: func.func @g
// CHECK-NEXT:    %0 = npu.exp %x : tensor<4xf32>
// CHECK-NEXT:    %1 = npu.add %0, %0

// Options inside a nest; --dump-pass-pipeline nests function passes (adjacent nests merge).
// RUN: forge-opt %s -p 'builtin.module(func.func(npu-cse),func.func(npu-fuse-operators{alpha=0.5}),npu-dce)' --dump-pass-pipeline 2>&1 >/dev/null | filecheck %s --check-prefix=DUMP
// DUMP:      Pass Manager with 3 passes:
// DUMP-NEXT: builtin.module(func.func(npu-cse,npu-fuse-operators{alpha=0.5}),npu-dce)

// A function pass sees only its function: one --print-ir-after dump per function, and
// the statistics add the runs up into one row per pass (6 ops before, 2 merged away).
// RUN: forge-opt %s -p 'func.func(npu-cse),npu-dce' --pass-statistics --print-ir-after=npu-cse -o /dev/null 2>&1 | filecheck %s --check-prefix=EACH
// EACH:      // -----// IR Dump After npu-cse ('func.func' operation: @f) //----- //
// EACH-NEXT: func.func @f
// EACH-NOT:  func.func @g
// EACH:      // -----// IR Dump After npu-cse ('func.func' operation: @g) //----- //
// EACH-NEXT: func.func @g
// EACH:      npu-cse                         2           6          4
// EACH-NEXT: npu-dce                         0           4          4

// A pass nested under func.func(...) that breaks the IR is named as at module level.
// RUN: not forge-opt %s --load-pass-plugin %S/Inputs/breaks_types.py -p 'func.func(test-break-device)' 2>&1 | filecheck %s --check-prefix=BREAK
// BREAK: nested-pipeline.mlir:[[# @LINE + 12]]:3: error: 'npu.tanh' op device must be one of npu, cpu, got 'gpu' (after pass 'test-break-device')

// Malformed pipelines: one line, the column of the problem.
// RUN: not forge-opt %s -p 'builtin.module(func.func(cse)' 2>&1 | filecheck %s --check-prefix=OPEN
// OPEN: forge-opt: error: invalid pass pipeline 'builtin.module(func.func(cse)': 'builtin.module(' at column 1 is never closed (column 30)
// OPEN-NOT: Traceback
// RUN: not forge-opt %s -p 'func.func(cse))' 2>&1 | filecheck %s --check-prefix=CLOSE
// CLOSE: forge-opt: error: invalid pass pipeline 'func.func(cse))': unbalanced ')' (column 15)
// RUN: not forge-opt %s -p 'gpu.module(cse)' 2>&1 | filecheck %s --check-prefix=ANCHOR
// ANCHOR: forge-opt: error: invalid pass pipeline 'gpu.module(cse)': unknown anchor 'gpu.module': forge-opt nests passes under builtin.module(...) and func.func(...) (column 1)

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = npu.tanh %x : tensor<4xf32>
  %1 = npu.tanh %x : tensor<4xf32>
  %2 = npu.add %0, %1 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return %2 : tensor<4xf32>
}

func.func @g(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = npu.exp %x : tensor<4xf32>
  %1 = npu.exp %x : tensor<4xf32>
  %2 = npu.add %0, %1 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return %2 : tensor<4xf32>
}

// RUN: not forge-opt %s -p 'func.func(,cse)' 2>&1 | filecheck %s --check-prefix=EMPTY
// EMPTY: forge-opt: error: invalid pass pipeline 'func.func(,cse)': expected a pass name, got ',' (column 11)
// RUN: not forge-opt %s -p 'cse,,dce' 2>&1 | filecheck %s --check-prefix=COMMA
// COMMA: forge-opt: error: invalid pass pipeline 'cse,,dce': expected a pass name after ',' (column 5)
// RUN: not forge-opt %s -p 'cse dce' 2>&1 | filecheck %s --check-prefix=JUNK
// JUNK: forge-opt: error: invalid pass pipeline 'cse dce': expected ',' or the end of the pipeline, got 'd' (column 5)
// RUN: not forge-opt %s -p 'func.func(func.func(cse))' 2>&1 | filecheck %s --check-prefix=TWICE
// TWICE: error: invalid pass pipeline {{.*}}: func.func(...) cannot nest inside func.func(...) (column 11)
// RUN: not forge-opt %s -p 'func.func' 2>&1 | filecheck %s --check-prefix=BARE
// BARE: error: invalid pass pipeline 'func.func': 'func.func' anchors a nested pipeline: write func.func(pass,...) (column 1)
// RUN: not forge-opt %s -p 'cse,func.func(no-such-pass)' 2>&1 | filecheck %s --check-prefix=UNKNOWN
// UNKNOWN: error: invalid pass pipeline {{.*}}: Unrecognized passes: ['no-such-pass'] (column 15)
// RUN: not forge-opt %s -p 'builtin.module(func.func(cse{bogus=1}))' 2>&1 | filecheck %s --check-prefix=OPTION
// OPTION: error: invalid pass pipeline {{.*}}: Provided arguments ["bogus"] not found in expected arguments [] (column 26)
// RUN: not forge-opt %s -p 'func.func(cse{' 2>&1 | filecheck %s --check-prefix=BRACE
// BRACE: error: invalid pass pipeline 'func.func(cse{': Expected argument name here (column 15)
