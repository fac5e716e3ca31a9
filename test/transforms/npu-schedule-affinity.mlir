// npu-schedule-affinity reorders a function body into a dependency-respecting order
// with few NPU<->CPU transitions: it stays on the current device while that device has
// ready ops, takes ready ops in original order, and starts on whichever device gives
// fewer transitions. Ops without `device` count as cpu; side effects keep their order.

// RUN: forge-opt %s -p npu-schedule-affinity --split-input-file --pass-statistics | filecheck %s
// RUN: forge-opt %s -p npu-schedule-affinity --split-input-file --pass-statistics 2>&1 >/dev/null | filecheck %s --check-prefix=STATS
// RUN: forge-opt %s -p "npu-schedule-affinity{rule=greedy}" --split-input-file | filecheck %s --check-prefix=GREEDY
// Idempotent: a scheduled body is its own schedule.
// RUN: forge-opt %s -p npu-schedule-affinity,npu-schedule-affinity --split-input-file | filecheck %s

// Positive: two independent chains, npu and cpu, interleaved (3 transitions) -> grouped
// (1 transition); each chain keeps its order. Ops move off a longest kept run: 1 move.
// CHECK-LABEL: func.func @interleaved
// CHECK-NEXT:    %0 = npu.exp %x {device = "npu"}
// CHECK-NEXT:    %1 = npu.tanh %0 {device = "npu"}
// CHECK-NEXT:    %2 = npu.generic "aten.cumsum.default"(%y, 0 : i64) {device = "cpu"}
// CHECK-NEXT:    %3 = npu.generic "aten.cumsum.default"(%2, 0 : i64) {device = "cpu"}
// CHECK-NEXT:    func.return %1, %3
// STATS:       npu-schedule-affinity           1           4          4
func.func @interleaved(%x: tensor<4xf32>, %y: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %0 = npu.exp %x {device = "npu"} : tensor<4xf32>
  %1 = npu.generic "aten.cumsum.default"(%y, 0 : i64) {device = "cpu"} : (tensor<4xf32>) -> tensor<4xf32>
  %2 = npu.tanh %0 {device = "npu"} : tensor<4xf32>
  %3 = npu.generic "aten.cumsum.default"(%1, 0 : i64) {device = "cpu"} : (tensor<4xf32>) -> tensor<4xf32>
  func.return %2, %3 : tensor<4xf32>, tensor<4xf32>
}

// -----

// Positive: a diamond whose cpu arms interleave with an npu arm: cpu top, both cpu
// arms, then the npu arm and the npu join (3 transitions -> 1).
// CHECK-LABEL: func.func @diamond
// CHECK-NEXT:    %0 = npu.generic "aten.cumsum.default"(%x, 0 : i64) {device = "cpu"}
// CHECK-NEXT:    %1 = npu.generic "aten.cumprod.default"(%0, 0 : i64) {device = "cpu"}
// CHECK-NEXT:    %2 = npu.generic "aten.cummin.default"(%0, 0 : i64) {device = "cpu"}
// CHECK-NEXT:    %3 = npu.sigmoid %0 {device = "npu"}
// CHECK-NEXT:    %4 = npu.add %1, %2 {device = "npu"}
// CHECK-NEXT:    %5 = npu.mul %4, %3 {device = "npu"}
// CHECK-NEXT:    func.return %5
// STATS:       npu-schedule-affinity           1           6          6
func.func @diamond(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = npu.generic "aten.cumsum.default"(%x, 0 : i64) {device = "cpu"} : (tensor<4xf32>) -> tensor<4xf32>
  %1 = npu.generic "aten.cumprod.default"(%0, 0 : i64) {device = "cpu"} : (tensor<4xf32>) -> tensor<4xf32>
  %2 = npu.sigmoid %0 {device = "npu"} : tensor<4xf32>
  %3 = npu.generic "aten.cummin.default"(%0, 0 : i64) {device = "cpu"} : (tensor<4xf32>) -> tensor<4xf32>
  %4 = npu.add %1, %3 {device = "npu"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %5 = npu.mul %4, %2 {device = "npu"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return %5 : tensor<4xf32>
}

// -----

// Positive: the greedy rule starts on the first op's device (cpu) and keeps the input
// (2 transitions); starting on npu costs 1, so the default rule does that.
// CHECK-LABEL: func.func @best_start
// CHECK-NEXT:    %0 = npu.exp %y {device = "npu"}
// CHECK-NEXT:    %1 = npu.generic "aten.cumsum.default"(%x, 0 : i64) {device = "cpu"}
// CHECK-NEXT:    %2 = npu.generic "aten.cumsum.default"(%0, 0 : i64) {device = "cpu"}
// CHECK-NEXT:    func.return %1, %2
// STATS:       npu-schedule-affinity           1           3          3
// GREEDY-LABEL: func.func @best_start
// GREEDY-NEXT:    %0 = npu.generic "aten.cumsum.default"(%x, 0 : i64) {device = "cpu"}
// GREEDY-NEXT:    %1 = npu.exp %y {device = "npu"}
// GREEDY-NEXT:    %2 = npu.generic "aten.cumsum.default"(%1, 0 : i64) {device = "cpu"}
// GREEDY-NEXT:    func.return %0, %2
func.func @best_start(%x: tensor<4xf32>, %y: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %0 = npu.generic "aten.cumsum.default"(%x, 0 : i64) {device = "cpu"} : (tensor<4xf32>) -> tensor<4xf32>
  %1 = npu.exp %y {device = "npu"} : tensor<4xf32>
  %2 = npu.generic "aten.cumsum.default"(%1, 0 : i64) {device = "cpu"} : (tensor<4xf32>) -> tensor<4xf32>
  func.return %0, %2 : tensor<4xf32>, tensor<4xf32>
}

// -----

// Positive: values used by func.return are computed before it, wherever they move;
// ops without a device count as cpu and group with the cpu ops.
// CHECK-LABEL: func.func @returned_values
// CHECK-NEXT:    %0 = npu.linear %x, %w {device = "npu"}
// CHECK-NEXT:    %1 = npu.relu %0 {device = "npu"}
// CHECK-NEXT:    %2 = npu.generic "aten.cumsum.default"(%x, 0 : i64) {device = "cpu"}
// CHECK-NEXT:    %3 = npu.neg %2 : tensor<2x4xf32>
// CHECK-NEXT:    func.return %3, %1, %2
// STATS:       npu-schedule-affinity           1           4          4
func.func @returned_values(%x: tensor<2x4xf32>, %w: tensor<4x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>) {
  %0 = npu.linear %x, %w {device = "npu"} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %1 = npu.generic "aten.cumsum.default"(%x, 0 : i64) {device = "cpu"} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %2 = npu.relu %0 {device = "npu"} : tensor<2x4xf32>
  %3 = npu.neg %1 : tensor<2x4xf32>
  func.return %3, %2, %1 : tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>
}

// -----

// Negative: a chain npu -> cpu -> npu -> cpu forces every transition: nothing moves.
// CHECK-LABEL: func.func @forced_transitions
// CHECK-NEXT:    %0 = npu.exp %x {device = "npu"}
// CHECK-NEXT:    %1 = npu.generic "aten.cumsum.default"(%0, 0 : i64) {device = "cpu"}
// CHECK-NEXT:    %2 = npu.tanh %1 {device = "npu"}
// CHECK-NEXT:    %3 = npu.generic "aten.cumsum.default"(%2, 0 : i64) {device = "cpu"}
// CHECK-NEXT:    func.return %3
// STATS:       npu-schedule-affinity           0           4          4
func.func @forced_transitions(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = npu.exp %x {device = "npu"} : tensor<4xf32>
  %1 = npu.generic "aten.cumsum.default"(%0, 0 : i64) {device = "cpu"} : (tensor<4xf32>) -> tensor<4xf32>
  %2 = npu.tanh %1 {device = "npu"} : tensor<4xf32>
  %3 = npu.generic "aten.cumsum.default"(%2, 0 : i64) {device = "cpu"} : (tensor<4xf32>) -> tensor<4xf32>
  func.return %3 : tensor<4xf32>
}

// -----

// Negative: side-effecting ops (random generic ops, training-mode dropout) do not pass
// each other, though no value links them; the pure npu op still joins its group.
// CHECK-LABEL: func.func @side_effects_keep_order
// CHECK-NEXT:    %0 = npu.generic "aten.rand_like.default"(%x) side_effects {device = "cpu"}
// CHECK-NEXT:    %1 = npu.dropout %y {device = "npu", p = 5.000000e-01 : f64, train}
// CHECK-NEXT:    %2 = npu.exp %y {device = "npu"}
// CHECK-NEXT:    %3 = npu.generic "aten.rand_like.default"(%y) side_effects {device = "cpu"}
// CHECK-NEXT:    func.return %0, %1, %2, %3
// STATS:       npu-schedule-affinity           1           4          4
func.func @side_effects_keep_order(%x: tensor<4xf32>, %y: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %0 = npu.generic "aten.rand_like.default"(%x) side_effects {device = "cpu"} : (tensor<4xf32>) -> tensor<4xf32>
  %1 = npu.dropout %y {p = 5.000000e-01 : f64, train, device = "npu"} : tensor<4xf32>
  %2 = npu.generic "aten.rand_like.default"(%y) side_effects {device = "cpu"} : (tensor<4xf32>) -> tensor<4xf32>
  %3 = npu.exp %y {device = "npu"} : tensor<4xf32>
  func.return %0, %1, %3, %2 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// Negative: an already grouped body is left alone (0 moves).
// CHECK-LABEL: func.func @already_grouped
// CHECK-NEXT:    %0 = npu.exp %x {device = "npu"}
// CHECK-NEXT:    %1 = npu.exp %y {device = "npu"}
// CHECK-NEXT:    %2 = npu.generic "aten.cumsum.default"(%0, 0 : i64) {device = "cpu"}
// CHECK-NEXT:    %3 = npu.generic "aten.cumsum.default"(%y, 0 : i64) {device = "cpu"}
// CHECK-NEXT:    func.return %2, %1, %3
// STATS:       npu-schedule-affinity           0           4          4
func.func @already_grouped(%x: tensor<4xf32>, %y: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %0 = npu.exp %x {device = "npu"} : tensor<4xf32>
  %1 = npu.exp %y {device = "npu"} : tensor<4xf32>
  %2 = npu.generic "aten.cumsum.default"(%0, 0 : i64) {device = "cpu"} : (tensor<4xf32>) -> tensor<4xf32>
  %3 = npu.generic "aten.cumsum.default"(%y, 0 : i64) {device = "cpu"} : (tensor<4xf32>) -> tensor<4xf32>
  func.return %2, %1, %3 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// Negative: without placement every op counts as cpu: no transition, nothing moves.
// CHECK-LABEL: func.func @unplaced
// CHECK-NEXT:    %0 = npu.exp %x
// CHECK-NEXT:    %1 = npu.generic "aten.cumsum.default"(%x, 0 : i64)
// CHECK-NEXT:    %2 = npu.tanh %0
// CHECK-NEXT:    func.return %1, %2
// STATS:       npu-schedule-affinity           0           3          3
func.func @unplaced(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %0 = npu.exp %x : tensor<4xf32>
  %1 = npu.generic "aten.cumsum.default"(%x, 0 : i64) : (tensor<4xf32>) -> tensor<4xf32>
  %2 = npu.tanh %0 : tensor<4xf32>
  func.return %1, %2 : tensor<4xf32>, tensor<4xf32>
}

// -----

// A cache's other readers stay ahead of the `npu.cache_update` that writes it in place:
// moving the CPU update up with the other CPU op would save a transition, but the NPU
// exp would then read the written cache.
// CHECK-LABEL: func.func @cache_read_before_write
// CHECK:         npu.exp %c
// CHECK:         npu.cache_update %c
func.func @cache_read_before_write(%x: tensor<8x4xf32>, %pos: tensor<1xi64>, %row: tensor<1x4xf32>, %c: tensor<8x4xf32>) -> (tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>) attributes {npu.writes = ["c"]} {
  %a = npu.neg %x {device = "cpu"} : tensor<8x4xf32>
  %r = npu.exp %c {device = "npu"} : tensor<8x4xf32>
  %u = npu.cache_update %c[%pos] = %row {device = "cpu", dim = 0 : i64} : tensor<8x4xf32>, tensor<1xi64>, tensor<1x4xf32>
  %b = npu.exp %a {device = "npu"} : tensor<8x4xf32>
  func.return %r, %b, %u : tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>
}
