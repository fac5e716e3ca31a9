// npu-optimize runs the six Phase-2 passes to a fixed point; --pass-statistics prints
// one row per pass run (rewrites, ops before/after, ms).

// RUN: forge-opt %samples/gpt2_attention.mlir -p npu-optimize --pass-statistics 2>%t.stats | filecheck %s
// RUN: filecheck %s --check-prefix=STATS < %t.stats

// CHECK:      func.func @gpt2_attention
// CHECK:      npu.addmm
// CHECK:      npu.split
// CHECK:      npu.sdpa
// CHECK-NOT:  npu.softmax
// CHECK-NOT:  npu.dropout
// CHECK:      func.return

// STATS:      pass {{ +}}rewrites  ops before  ops after
// STATS-NEXT: npu-dce
// STATS-NEXT: npu-cse
// STATS-NEXT: npu-fold-constants
// STATS-NEXT: npu-fuse-attention {{ +}}1
// STATS-NEXT: npu-fuse-operators
// STATS-NEXT: npu-optimize-layout
// STATS:      total

// Options reach the sub-passes: alpha=0 disables operator fusion; bad values are one line.
// RUN: forge-opt %samples/gpt2_attention.mlir -p "npu-optimize{alpha=0 iterations=1}" --pass-statistics 2>&1 >/dev/null | filecheck %s --check-prefix=ALPHA0
// ALPHA0: npu-fuse-operators {{ +}}0
// RUN: not forge-opt %samples/gpt2_attention.mlir -p "npu-optimize{iterations=0}" 2>&1 | filecheck %s --check-prefix=ITER
// ITER: forge-opt: error: invalid pass pipeline 'npu-optimize{iterations=0}': iterations must be at least 1, got 0
