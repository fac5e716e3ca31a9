// npu-liveness: `live = [s, e]` per result (positions among the block's ops: definition,
// last use; the return's position for function results; e = s when never used) and
// `dead_after` (vregs whose last use is this op; function results are never dead).
// Without vregs the pass numbers the values itself: both RUN lines give the same text.

// RUN: forge-opt %s -p npu-assign-vregs,npu-liveness --split-input-file | filecheck %s
// RUN: forge-opt %s -p npu-liveness --split-input-file | filecheck %s

// Positive: a chain; a value used twice lives until its later use; an unused value dies
// where it is defined; the result lives until the return (position 4).
// CHECK-LABEL: func.func @chain
// CHECK-NEXT:    %0 = npu.exp %x {vreg = 0 : i64, live = array<i64: 0, 3>, dead_after = array<i64>}
// CHECK-NEXT:    %1 = npu.neg %0 {vreg = 1 : i64, live = array<i64: 1, 3>, dead_after = array<i64>}
// CHECK-NEXT:    %2 = npu.tanh %x {vreg = 2 : i64, live = array<i64: 2, 2>, dead_after = array<i64: 2>}
// CHECK-NEXT:    %3 = npu.add %1, %0 {vreg = 3 : i64, live = array<i64: 3, 4>, dead_after = array<i64: 0, 1>}
// CHECK-NEXT:    func.return %3
func.func @chain(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = npu.exp %x : tensor<4xf32>
  %1 = npu.neg %0 : tensor<4xf32>
  %2 = npu.tanh %x : tensor<4xf32>
  %3 = npu.add %1, %0 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return %3 : tensor<4xf32>
}

// -----

// Positive: a diamond x -> a, b -> c(a, b): a and b both die at c.
// CHECK-LABEL: func.func @diamond
// CHECK-NEXT:    %a = npu.exp %x {vreg = 0 : i64, live = array<i64: 0, 2>, dead_after = array<i64>}
// CHECK-NEXT:    %b = npu.neg %x {vreg = 1 : i64, live = array<i64: 1, 2>, dead_after = array<i64>}
// CHECK-NEXT:    %c = npu.mul %a, %b {vreg = 2 : i64, live = array<i64: 2, 3>, dead_after = array<i64: 0, 1>}
func.func @diamond(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = npu.exp %x : tensor<4xf32>
  %b = npu.neg %x : tensor<4xf32>
  %c = npu.mul %a, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return %c : tensor<4xf32>
}

// -----

// Positive: npu.split has one [s, e] pair per result and consecutive vregs; an unused
// piece dies at the split, a returned piece lives until the return.
// CHECK-LABEL: func.func @split
// CHECK-NEXT:    %0 = npu.exp %x {vreg = 0 : i64, live = array<i64: 0, 1>, dead_after = array<i64>}
// CHECK-NEXT:    %1, %2, %3 = npu.split %0 {vreg = 1 : i64, live = array<i64: 1, 2, 1, 1, 1, 3>, dead_after = array<i64: 0, 2>
// CHECK-NEXT:    %4 = npu.neg %1 {vreg = 4 : i64, live = array<i64: 2, 3>, dead_after = array<i64: 1>}
// CHECK-NEXT:    func.return %4, %3
func.func @split(%x: tensor<6xf32>) -> (tensor<2xf32>, tensor<2xf32>) {
  %0 = npu.exp %x : tensor<6xf32>
  %1, %2, %3 = npu.split %0 {dim = 0 : i64, split_sizes = array<i64: 2, 2, 2>} : tensor<6xf32> -> tensor<2xf32>, tensor<2xf32>, tensor<2xf32>
  %4 = npu.neg %1 : tensor<2xf32>
  func.return %4, %3 : tensor<2xf32>, tensor<2xf32>
}

// -----

// Positive: `live` is honest per value: the root of a view dies at the view, though the
// view keeps its storage alive (npu-linear-scan merges the two for allocation).
// CHECK-LABEL: func.func @view
// CHECK-NEXT:    %0 = npu.exp %x {vreg = 0 : i64, live = array<i64: 0, 1>, dead_after = array<i64>}
// CHECK-NEXT:    %1 = npu.view %0 {vreg = 1 : i64, live = array<i64: 1, 3>, dead_after = array<i64: 0>}
// CHECK-NEXT:    %2 = npu.neg %1 {vreg = 2 : i64, live = array<i64: 2, 3>, dead_after = array<i64>}
// CHECK-NEXT:    %3 = npu.add %1, %2 {vreg = 3 : i64, live = array<i64: 3, 4>, dead_after = array<i64: 1, 2>}
func.func @view(%x: tensor<2x2xf32>) -> tensor<4xf32> {
  %0 = npu.exp %x : tensor<2x2xf32>
  %1 = npu.view %0 : tensor<2x2xf32> -> tensor<4xf32>
  %2 = npu.neg %1 : tensor<4xf32>
  %3 = npu.add %1, %2 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return %3 : tensor<4xf32>
}

// -----

// Negative: function arguments (inputs, weights) are not vregs: no op lists them in
// `dead_after`. A value used by an op and by the return is a function result: it is
// never dead, even though `dead_after` of its last npu use could name it.
// CHECK-LABEL: func.func @arguments_and_results
// CHECK-NEXT:    %0 = npu.linear %x, %w {vreg = 0 : i64, live = array<i64: 0, 2>, dead_after = array<i64>}
// CHECK-NEXT:    %1 = npu.relu %0 {vreg = 1 : i64, live = array<i64: 1, 2>, dead_after = array<i64>}
// CHECK-NEXT:    func.return %0, %1
func.func @arguments_and_results(%x: tensor<2x3xf32>, %w: tensor<4x3xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>) {
  %0 = npu.linear %x, %w : (tensor<2x3xf32>, tensor<4x3xf32>) -> tensor<2x4xf32>
  %1 = npu.relu %0 : tensor<2x4xf32>
  func.return %0, %1 : tensor<2x4xf32>, tensor<2x4xf32>
}

// -----

// Negative: an op without results gets no `live` and no vreg, but is a last use; stale
// `live`/`dead_after` from an earlier order are replaced.
// CHECK-LABEL: func.func @no_results
// CHECK-NEXT:    %0 = npu.exp %x {vreg = 0 : i64, live = array<i64: 0, 1>, dead_after = array<i64>}
// CHECK-NEXT:    npu.generic "aten._assert_async.msg"(%0, "check") side_effects {dead_after = array<i64: 0>}
// CHECK-NEXT:    %1 = npu.neg %x {vreg = 1 : i64, live = array<i64: 2, 3>, dead_after = array<i64>}
func.func @no_results(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = npu.exp %x {vreg = 0 : i64, live = array<i64: 0, 7>, dead_after = array<i64: 3>} : tensor<4xf32>
  npu.generic "aten._assert_async.msg"(%0, "check") side_effects : (tensor<4xf32>) -> ()
  %1 = npu.neg %x {vreg = 1 : i64} : tensor<4xf32>
  func.return %1 : tensor<4xf32>
}
