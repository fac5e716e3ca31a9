// --trace-patterns prints, on stderr, one line per successful pattern application:
// [pass] Pattern on <op it matched> at <its location>: created N (ops), erased N (ops).
// --trace-patterns=NAMES keeps the passes or pattern classes named (comma-separated);
// --pass-statistics lists every pattern's hits per pass, after the pass table.

// RUN: forge-opt %s -p npu-dce,npu-fuse-operators --trace-patterns 2>&1 >/dev/null | filecheck %s --check-prefix=ALL
// RUN: forge-opt %s -p npu-dce,npu-fuse-operators --trace-patterns=ForwardEvalDropout 2>&1 >/dev/null | filecheck %s --check-prefix=ONE
// RUN: forge-opt %s -p npu-dce,npu-fuse-operators --trace-patterns=npu-fuse-operators,EraseUnusedPureOp 2>&1 >/dev/null | filecheck %s --check-prefix=TWO
// RUN: forge-opt %s -p npu-dce,npu-fuse-operators --pass-statistics 2>&1 >/dev/null | filecheck %s --check-prefix=STATS

// Tracing changes nothing but stderr.
// RUN: forge-opt %s -p npu-dce,npu-fuse-operators > %t.plain
// RUN: forge-opt %s -p npu-dce,npu-fuse-operators --trace-patterns 2>/dev/null > %t.traced
// RUN: diff %t.plain %t.traced

// The value is optional, so the input file must not follow the bare flag.
// RUN: not forge-opt --trace-patterns %s 2>&1 | filecheck %s --check-prefix=ORDER
// ORDER: forge-opt: error: argument --trace-patterns: '{{.*}}trace-patterns.mlir' is not a pass or pattern name; write --trace-patterns=NAMES or put the input file first

// ALL-NOT: Traceback
// ONE-NOT: EraseUnusedPureOp
// npu-dce walks backwards: the unused exp goes first.
func.func @dce(%x: tensor<4xf32>) -> tensor<4xf32> {
  // ALL: [npu-dce] EraseUnusedPureOp on npu.exp at {{.*}}trace-patterns.mlir:[[# @LINE + 6]]:3: created 0, erased 1 (npu.exp)
  // ALL: [npu-dce] ForwardEvalDropout on npu.dropout at {{.*}}trace-patterns.mlir:[[# @LINE + 2]]:3: created 0, erased 1 (npu.dropout)
  // ONE: [npu-dce] ForwardEvalDropout on npu.dropout at {{.*}}trace-patterns.mlir:[[# @LINE + 1]]:3: created 0, erased 1 (npu.dropout)
  %0 = npu.dropout %x {p = 1.000000e-01 : f64} : tensor<4xf32>
  %1 = npu.tanh %0 : tensor<4xf32>
  // TWO: [npu-dce] EraseUnusedPureOp on npu.exp at {{.*}}trace-patterns.mlir:[[# @LINE + 1]]:3: created 0, erased 1 (npu.exp)
  %2 = npu.exp %x : tensor<4xf32>
  func.return %1 : tensor<4xf32>
}

// ONE-NOT: npu-fuse-operators
// TWO-NOT: ForwardEvalDropout
func.func @fuse(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<16xf32>) -> tensor<4x16xf32> {
  %0 = npu.matmul %x, %w : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  // ALL: [npu-fuse-operators] AbsorbBiasAdd on npu.add at {{.*}}trace-patterns.mlir:[[# @LINE + 3]]:3: created 1 (npu.addmm), erased 2 (npu.add, npu.matmul)
  // A created op has no source location: the trace names none.
  // ALL: [npu-fuse-operators] FuseLinearActivation on npu.relu at {{.*}}trace-patterns.mlir:[[# @LINE + 2]]:3: created 1 (npu.fused_linear), erased 2 (npu.relu, npu.addmm)
  %1 = npu.add %0, %b : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  %2 = npu.relu %1 : tensor<4x16xf32>
  func.return %2 : tensor<4x16xf32>
}
// TWO: [npu-fuse-operators] AbsorbBiasAdd on npu.add
// TWO: [npu-fuse-operators] FuseLinearActivation on npu.relu
// ALL-NOT: {{.}}

// STATS:      pass {{ +}}rewrites
// STATS-NEXT: npu-dce {{ +}}2
// STATS-NEXT: npu-fuse-operators {{ +}}2
// STATS-NEXT: total {{ +}}4
// STATS-NEXT: pass {{ +}}pattern {{ +}}hits
// STATS-NEXT: npu-dce {{ +}}EraseProvenAssert {{ +}}0
// STATS-NEXT: npu-dce {{ +}}ForwardEvalDropout {{ +}}1
// STATS-NEXT: npu-dce {{ +}}EraseUnusedPureOp {{ +}}1
// STATS:      npu-fuse-operators {{ +}}FuseLinearActivation {{ +}}1
// STATS:      npu-fuse-operators {{ +}}AbsorbBiasAdd {{ +}}1
