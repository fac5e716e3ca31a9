// npu-attend-before-write: a decode step's attention reads the key/value caches as they
// were before the step's write, with the new row selected in (cache * off + row * at,
// where at/off are 1.0/0.0 at row %pos), so nothing in the graph waits for the CPU's
// cache write. The `npu.cache_update`s stay: they are what the step writes back, and
// the new readers of each cache go before its update (the in-place contract).

// RUN: forge-opt %s -p npu-attend-before-write --split-input-file | filecheck %s
// RUN: forge-opt %s -p npu-attend-before-write --split-input-file --check-numerics
// After placement and scheduling only the position's cast runs before the NPU work and
// the writes after it: one graph.
// RUN: forge-opt %s -p 'npu-attend-before-write,npu-place-devices,npu-schedule-affinity' --split-input-file | filecheck %s --check-prefix=SCHED

// Positive: one layer of a decode step (1 query row, 1 new row, a cache of 8 rows).
// CHECK-LABEL: func.func @decode_step
// CHECK:         %[[ROWS:.*]] = npu.constant dense<{{\[}}[0.000000e+00], [1.000000e+00], [2.000000e+00], [3.000000e+00], [4.000000e+00], [5.000000e+00], [6.000000e+00], [7.000000e+00]]> : tensor<8x1xf32>
// CHECK-NEXT:    %[[POS:.*]] = npu.cast %pos : tensor<1xi64> -> tensor<1xf32>
// CHECK-NEXT:    %[[D:.*]] = npu.sub %[[ROWS]], %[[POS]] : (tensor<8x1xf32>, tensor<1xf32>) -> tensor<8x1xf32>
// CHECK-NEXT:    %[[ABS:.*]] = npu.abs %[[D]]
// CHECK-NEXT:    %[[NEG:.*]] = npu.neg %[[ABS]]
// CHECK-NEXT:    %[[NEAR:.*]] = npu.add %[[NEG]] {scalar = 1.000000e+00 : f32}
// CHECK-NEXT:    %[[AT:.*]] = npu.relu %[[NEAR]]
// CHECK-NEXT:    %[[NOT:.*]] = npu.neg %[[AT]]
// CHECK-NEXT:    %[[OFF:.*]] = npu.add %[[NOT]] {scalar = 1.000000e+00 : f32}
// CHECK-NEXT:    %[[KEPT:.*]] = npu.mul %k_cache, %[[OFF]] : (tensor<1x2x8x4xf32>, tensor<8x1xf32>) -> tensor<1x2x8x4xf32>
// CHECK-NEXT:    %[[PLACED:.*]] = npu.mul %k_row, %[[AT]] : (tensor<1x2x1x4xf32>, tensor<8x1xf32>) -> tensor<1x2x8x4xf32>
// CHECK-NEXT:    %[[KEYS:.*]] = npu.add %[[KEPT]], %[[PLACED]]
// CHECK:         %[[VALUES:.*]] = npu.add
// CHECK-NEXT:    %k = npu.cache_update %k_cache[%pos] = %k_row
// CHECK-NEXT:    %v = npu.cache_update %v_cache[%pos] = %v_row
// CHECK-NEXT:    %a = npu.sdpa %q, %[[KEYS]], %[[VALUES]], %mask {scale = 5.000000e-01 : f64}
// CHECK:         func.return %a, %k, %v
// SCHED-LABEL: func.func @decode_step
// SCHED-NEXT:    npu.cast %pos {device = "cpu"}
// SCHED-NOT:     device = "cpu"
// SCHED:         npu.sdpa
// SCHED-NEXT:    npu.cache_update %k_cache
// SCHED-NEXT:    npu.cache_update %v_cache
// SCHED-NEXT:    func.return
func.func @decode_step(%q: tensor<1x2x1x4xf32>, %pos: tensor<1xi64>, %k_row: tensor<1x2x1x4xf32>, %v_row: tensor<1x2x1x4xf32>, %mask: tensor<1x1x1x8xf32>, %k_cache: tensor<1x2x8x4xf32>, %v_cache: tensor<1x2x8x4xf32>) -> (tensor<1x2x1x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>) attributes {npu.writes = ["k_cache", "v_cache"]} {
  %k = npu.cache_update %k_cache[%pos] = %k_row {dim = 2 : i64} : tensor<1x2x8x4xf32>, tensor<1xi64>, tensor<1x2x1x4xf32>
  %v = npu.cache_update %v_cache[%pos] = %v_row {dim = 2 : i64} : tensor<1x2x8x4xf32>, tensor<1xi64>, tensor<1x2x1x4xf32>
  %a = npu.sdpa %q, %k, %v, %mask {scale = 5.000000e-01 : f64} : (tensor<1x2x1x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x1x1x8xf32>) -> tensor<1x2x1x4xf32>
  func.return %a, %k, %v : tensor<1x2x1x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>
}

// -----

// Positive: grouped-query attention (4 query heads over 2 key/value heads), no mask.
// CHECK-LABEL: func.func @grouped
// CHECK:         npu.sdpa %q, %{{.*}}, %{{.*}} : (tensor<1x4x1x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>)
// CHECK-NOT:     npu.sdpa %q, %k, %v
func.func @grouped(%q: tensor<1x4x1x4xf32>, %pos: tensor<1xi64>, %k_row: tensor<1x2x1x4xf32>, %v_row: tensor<1x2x1x4xf32>, %k_cache: tensor<1x2x8x4xf32>, %v_cache: tensor<1x2x8x4xf32>) -> (tensor<1x4x1x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>) attributes {npu.writes = ["k_cache", "v_cache"]} {
  %k = npu.cache_update %k_cache[%pos] = %k_row {dim = 2 : i64} : tensor<1x2x8x4xf32>, tensor<1xi64>, tensor<1x2x1x4xf32>
  %v = npu.cache_update %v_cache[%pos] = %v_row {dim = 2 : i64} : tensor<1x2x8x4xf32>, tensor<1xi64>, tensor<1x2x1x4xf32>
  %a = npu.sdpa %q, %k, %v : (tensor<1x4x1x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>) -> tensor<1x4x1x4xf32>
  func.return %a, %k, %v : tensor<1x4x1x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>
}

// -----

// Positive: two layers writing at the same position share one pair of selectors.
// CHECK-LABEL: func.func @two_layers
// CHECK-COUNT-1: npu.relu
// CHECK-NOT:     npu.relu
// CHECK-COUNT-2: npu.sdpa %q
func.func @two_layers(%q: tensor<1x2x1x4xf32>, %pos: tensor<1xi64>, %r: tensor<1x2x1x4xf32>, %k0: tensor<1x2x8x4xf32>, %v0: tensor<1x2x8x4xf32>, %k1: tensor<1x2x8x4xf32>, %v1: tensor<1x2x8x4xf32>) -> (tensor<1x2x1x4xf32>, tensor<1x2x1x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>) attributes {npu.writes = ["k0", "v0", "k1", "v1"]} {
  %a0k = npu.cache_update %k0[%pos] = %r {dim = 2 : i64} : tensor<1x2x8x4xf32>, tensor<1xi64>, tensor<1x2x1x4xf32>
  %a0v = npu.cache_update %v0[%pos] = %r {dim = 2 : i64} : tensor<1x2x8x4xf32>, tensor<1xi64>, tensor<1x2x1x4xf32>
  %a0 = npu.sdpa %q, %a0k, %a0v : (tensor<1x2x1x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x1x4xf32>
  %a1k = npu.cache_update %k1[%pos] = %a0 {dim = 2 : i64} : tensor<1x2x8x4xf32>, tensor<1xi64>, tensor<1x2x1x4xf32>
  %a1v = npu.cache_update %v1[%pos] = %a0 {dim = 2 : i64} : tensor<1x2x8x4xf32>, tensor<1xi64>, tensor<1x2x1x4xf32>
  %a1 = npu.sdpa %q, %a1k, %a1v : (tensor<1x2x1x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x1x4xf32>
  func.return %a0, %a1, %a0k, %a0v, %a1k, %a1v : tensor<1x2x1x4xf32>, tensor<1x2x1x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>
}

// -----

// Negative: a prefill chunk writes two rows; selecting them in is not one row's select.
// CHECK-LABEL: func.func @two_rows
// CHECK:         npu.sdpa %q, %k, %v
func.func @two_rows(%q: tensor<1x2x2x4xf32>, %pos: tensor<2xi64>, %k_row: tensor<1x2x2x4xf32>, %v_row: tensor<1x2x2x4xf32>, %k_cache: tensor<1x2x8x4xf32>, %v_cache: tensor<1x2x8x4xf32>) -> (tensor<1x2x2x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>) attributes {npu.writes = ["k_cache", "v_cache"]} {
  %k = npu.cache_update %k_cache[%pos] = %k_row {dim = 2 : i64} : tensor<1x2x8x4xf32>, tensor<2xi64>, tensor<1x2x2x4xf32>
  %v = npu.cache_update %v_cache[%pos] = %v_row {dim = 2 : i64} : tensor<1x2x8x4xf32>, tensor<2xi64>, tensor<1x2x2x4xf32>
  %a = npu.sdpa %q, %k, %v : (tensor<1x2x2x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x2x4xf32>
  func.return %a, %k, %v : tensor<1x2x2x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>
}

// -----

// Negative: keys and values written at different positions.
// CHECK-LABEL: func.func @different_positions
// CHECK:         npu.sdpa %q, %k, %v
func.func @different_positions(%q: tensor<1x2x1x4xf32>, %pk: tensor<1xi64>, %pv: tensor<1xi64>, %k_row: tensor<1x2x1x4xf32>, %v_row: tensor<1x2x1x4xf32>, %k_cache: tensor<1x2x8x4xf32>, %v_cache: tensor<1x2x8x4xf32>) -> (tensor<1x2x1x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>) attributes {npu.writes = ["k_cache", "v_cache"]} {
  %k = npu.cache_update %k_cache[%pk] = %k_row {dim = 2 : i64} : tensor<1x2x8x4xf32>, tensor<1xi64>, tensor<1x2x1x4xf32>
  %v = npu.cache_update %v_cache[%pv] = %v_row {dim = 2 : i64} : tensor<1x2x8x4xf32>, tensor<1xi64>, tensor<1x2x1x4xf32>
  %a = npu.sdpa %q, %k, %v : (tensor<1x2x1x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x1x4xf32>
  func.return %a, %k, %v : tensor<1x2x1x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>
}

// -----

// Negative: the rows are written along the head dim, not the sequence dim.
// CHECK-LABEL: func.func @other_dim
// CHECK:         npu.sdpa %q, %k, %v
func.func @other_dim(%q: tensor<1x8x1x4xf32>, %pos: tensor<1xi64>, %k_row: tensor<1x1x8x4xf32>, %v_row: tensor<1x1x8x4xf32>, %k_cache: tensor<1x8x8x4xf32>, %v_cache: tensor<1x8x8x4xf32>) -> (tensor<1x8x1x4xf32>, tensor<1x8x8x4xf32>, tensor<1x8x8x4xf32>) attributes {npu.writes = ["k_cache", "v_cache"]} {
  %k = npu.cache_update %k_cache[%pos] = %k_row {dim = 1 : i64} : tensor<1x8x8x4xf32>, tensor<1xi64>, tensor<1x1x8x4xf32>
  %v = npu.cache_update %v_cache[%pos] = %v_row {dim = 1 : i64} : tensor<1x8x8x4xf32>, tensor<1xi64>, tensor<1x1x8x4xf32>
  %a = npu.sdpa %q, %k, %v : (tensor<1x8x1x4xf32>, tensor<1x8x8x4xf32>, tensor<1x8x8x4xf32>) -> tensor<1x8x1x4xf32>
  func.return %a, %k, %v : tensor<1x8x1x4xf32>, tensor<1x8x8x4xf32>, tensor<1x8x8x4xf32>
}

// -----

// Negative: the keys are not a cache update (an attention over plain arguments).
// CHECK-LABEL: func.func @no_cache
// CHECK:         npu.sdpa %q, %k, %v
// CHECK-NOT:     npu.relu
func.func @no_cache(%q: tensor<1x2x1x4xf32>, %k: tensor<1x2x8x4xf32>, %v: tensor<1x2x8x4xf32>) -> tensor<1x2x1x4xf32> {
  %a = npu.sdpa %q, %k, %v : (tensor<1x2x1x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x1x4xf32>
  func.return %a : tensor<1x2x1x4xf32>
}
