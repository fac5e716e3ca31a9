// forge-pipeline: Phase 2, then placement, scheduling, vregs, liveness and linear-scan
// allocation, in that order (allocation sees the final op order).

// RUN: forge-opt %samples/gpt2_attention.mlir -p forge-pipeline --pass-statistics 2>%t.stats | filecheck %s
// RUN: filecheck %s --check-prefix=STATS < %t.stats

// The CPU-only mask computation is scheduled first: one NPU<->CPU transition in all.
// CHECK:      npu.constant {device = "cpu"
// CHECK-NEXT: npu.where {{.*}}device = "cpu"
// CHECK:      npu.addmm {{.*}}{device = "npu", vreg = {{[0-9]+}} : i64, live = array<i64: {{[0-9]+}}, {{[0-9]+}}>, dead_after = array<i64{{.*}}>, buffer = {{[0-9]+}} : i64}
// CHECK-NOT:  device = "cpu"
// CHECK:      npu.sdpa {{.*}}device = "npu"
// CHECK:      func.return

// STATS:      npu-optimize-layout
// STATS:      npu-place-devices
// STATS-NEXT: npu-schedule-affinity
// STATS-NEXT: npu-assign-vregs
// STATS-NEXT: npu-liveness
// STATS-NEXT: npu-linear-scan
// STATS-NEXT: total

// RUN: not forge-opt %samples/gpt2_attention.mlir -p "forge-pipeline{layout=nhwc}" 2>&1 | filecheck %s --check-prefix=BAD
// BAD: forge-opt: error: invalid pass pipeline 'forge-pipeline{layout=nhwc}': layout must be one of auto, contiguous, channels-last, got 'nhwc'

// `skip` takes a list of pass names (Phase 2 or later): without attention fusion the
// attention stays unfused matmul/softmax.
// RUN: forge-opt %samples/gpt2_attention.mlir -p 'forge-pipeline{skip=npu-fuse-attention,npu-cse}' --pass-statistics 2>%t.skip | filecheck %s --check-prefix=SKIP
// RUN: filecheck %s --check-prefix=SKIP-STATS < %t.skip
// SKIP-NOT:  npu.sdpa
// SKIP:      npu.softmax
// SKIP-NOT:  npu.sdpa
// SKIP-STATS-NOT: npu-fuse-attention
// SKIP-STATS-NOT: npu-cse
// SKIP-STATS: npu-fuse-operators
