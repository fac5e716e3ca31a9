// Declared sizes cost nothing until something runs: a module whose tensors hold 10^8 and
// 10^16 elements parses, verifies, prints and plans in the time and memory its text takes
// (fuzz-ir's large-dimension mutants); what would execute it (the plan printer, the
// numerics checker) says in one line that it cannot fit, before allocating anything.

// RUN: forge-opt %s | forge-opt | filecheck %s --check-prefix=ROUND
// ROUND: func.func @large(%x: tensor<2x3x100000000xf32>, %w: tensor<100000000x100000000xf32>) -> tensor<2x3x100000000xf32> {
// ROUND-NEXT: npu.neg %x : tensor<2x3x100000000xf32>

// RUN: forge-opt %s -p forge-pipeline | filecheck %s --check-prefix=PLAN
// PLAN: npu.fused_linear {{.*}}buffer = 1 : i64, activation = "relu"{{.*}} -> tensor<2x3x100000000xf32>

// RUN: not forge-opt %s -p forge-pipeline -t python 2>&1 | filecheck %s --check-prefix=MEMORY
// RUN: not forge-opt %s -p npu-dce --check-numerics 2>&1 | filecheck %s --check-prefix=MEMORY
// MEMORY: forge-opt: error: @large needs at least {{.*}} GiB (arguments, results and intermediates) but {{.*}} GiB are available
// MEMORY-NOT: {{.}}

// A splat is a few characters that xDSL expands to every element: one line, no expansion.
// RUN: not forge-opt %S/Inputs/large-splat.mlir 2>&1 | filecheck %s --check-prefix=SPLAT
// SPLAT: large-splat.mlir:2:36: error: dense literal of 600000000 elements: more than the 1048576 an inline constant may hold (pass large tensors as function arguments)
// SPLAT-NOT: {{.}}

// The largest dense literal allowed still parses.
// RUN: forge-opt %S/Inputs/large-splat.mlir --split-input-file --print-diagnostics | filecheck %s --check-prefix=LIMIT
// LIMIT: error: dense literal of 600000000 elements
// LIMIT: arith.constant dense<1.000000e+00> : tensor<1048576xf32>

func.func @large(%x: tensor<2x3x100000000xf32>, %w: tensor<100000000x100000000xf32>) -> tensor<2x3x100000000xf32> {
  %0 = npu.neg %x : tensor<2x3x100000000xf32>
  %1 = npu.linear %0, %w : (tensor<2x3x100000000xf32>, tensor<100000000x100000000xf32>) -> tensor<2x3x100000000xf32>
  %2 = npu.relu %1 : tensor<2x3x100000000xf32>
  func.return %2 : tensor<2x3x100000000xf32>
}
