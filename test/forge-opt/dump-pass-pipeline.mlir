// --dump-pass-pipeline prints the pipeline to stderr with composite passes expanded
// (forge-pipeline) and every option with its value; iterating passes (npu-optimize)
// name the round they repeat. The IR still goes to stdout.

// RUN: forge-opt %s -p 'forge-pipeline{alpha=0.5}' --dump-pass-pipeline 2>&1 >/dev/null | filecheck %s
// CHECK: Pass Manager with 10 passes:
// CHECK-NEXT: builtin.module(npu-optimize{iterations=2 alpha=0.5 layout="auto" skip},npu-bubble-up-row-gather,npu-update-state-in-place,npu-fuse-cached-attention{block=32},npu-attend-before-write{profile},npu-place-devices{profile},npu-schedule-affinity{rule="best-start"},npu-assign-vregs,npu-liveness,npu-linear-scan{policy="exact"})
// CHECK-NEXT: // npu-optimize repeats, up to 2 rounds: npu-dce,npu-cse,npu-fold-constants{max_elements=4096},npu-fuse-attention,npu-fuse-operators{alpha=0.5},npu-optimize-layout{layout="auto"}

// A flat list keeps its order; no pipeline is an empty one.
// RUN: forge-opt %s -p 'npu-dce,cse' --dump-pass-pipeline 2>&1 >/dev/null | filecheck %s --check-prefix=FLAT
// FLAT: Pass Manager with 2 passes:
// FLAT-NEXT: builtin.module(npu-dce,cse)
// RUN: forge-opt %s --dump-pass-pipeline 2>&1 >/dev/null | filecheck %s --check-prefix=EMPTY
// EMPTY: Pass Manager with 0 passes:
// EMPTY-NEXT: builtin.module()

// -t lists only the targets that make sense for npu IR.
// RUN: not forge-opt %s -t riscv-asm 2>&1 | filecheck %s --check-prefix=BADTARGET
// BADTARGET: forge-opt: error: argument -t/--target: invalid choice: 'riscv-asm' (choose from mlir, python)

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = npu.relu %x : tensor<4xf32>
  func.return %0 : tensor<4xf32>
}
