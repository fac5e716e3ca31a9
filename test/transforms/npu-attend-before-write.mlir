// npu-attend-before-write: whatever reads a cache update (a decode step's attention,
// GQA's repeat_kv views, a prefill chunk's attention) reads the cache as it was before
// the write, with the new rows selected in (one row: cache * off + row * at, where
// at/off are 1.0/0.0 at row %pos; P rows: cache * off + at @ rows), so nothing in the
// graph waits for the CPU's cache write. The `npu.cache_update`s stay:
// they are what the step writes back, and the new readers of each cache go before its
// update (the in-place contract).

// RUN: forge-opt %s -p npu-attend-before-write --split-input-file | filecheck %s
// RUN: forge-opt %s -p npu-attend-before-write --split-input-file --check-numerics
// After placement and scheduling only the position's cast runs before the NPU work and
// the writes after it: one graph.
// RUN: forge-opt %s -p 'npu-attend-before-write,npu-place-devices,npu-schedule-affinity' --split-input-file | filecheck %s --check-prefix=SCHED
// With a host profile, several rows are selected in only where the selector MatMul
// costs less than the graph boundary it removes: where a boundary measured free, never
// (one row still is, its select costs no MatMul).
// RUN: forge-opt %s -p 'npu-attend-before-write{profile="%S/Inputs/host-profile-free-split.json"}' --split-input-file | filecheck %s --check-prefix=FREE
// RUN: forge-opt %s -p 'npu-attend-before-write{profile="%S/Inputs/host-profile-npu.json"}' --split-input-file | filecheck %s --check-prefix=PRICED
// RUN: not forge-opt %s -p 'npu-attend-before-write{profile="%S/Inputs/no-such.json"}' 2>&1 | filecheck %s --check-prefix=NOFILE
// NOFILE: error: {{.*}}cannot read host profile {{.*}}no-such.json

// Positive: one layer of a decode step (1 query row, 1 new row, a cache of 8 rows).
// FREE-LABEL: func.func @decode_step
// FREE:         npu.relu
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
// CHECK-NEXT:    %k = npu.cache_update %k_cache[%pos] = %k_row
// CHECK-NEXT:    npu.mul %v_cache, %[[OFF]]
// CHECK-NEXT:    npu.mul %v_row, %[[AT]]
// CHECK-NEXT:    %[[VALUES:.*]] = npu.add
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

// Positive: a prefill chunk writes two rows. The selector is [C, P] (1.0 where
// position p is row c), zeroed for a position a later one repeats (index_copy keeps
// the last write); the rows are placed by a MatMul and the rest of the cache kept by
// 1 - (rows written). --check-numerics draws the positions from {0, 1}, repeats
// included.
// FREE-LABEL: func.func @two_rows
// FREE-NOT:     npu.matmul
// FREE:         npu.sdpa %q, %k, %v
// PRICED-LABEL: func.func @two_rows
// PRICED:       npu.matmul
// PRICED:       npu.sdpa %q, %{{[0-9]+}}, %{{[0-9]+}}
// CHECK-LABEL: func.func @two_rows
// CHECK:         %[[POS:.*]] = npu.cast %pos : tensor<2xi64> -> tensor<2xf32>
// CHECK-NEXT:    %[[D:.*]] = npu.sub %{{.*}}, %[[POS]] : (tensor<8x1xf32>, tensor<2xf32>) -> tensor<8x2xf32>
// CHECK:         %[[NEAR:.*]] = npu.relu %{{.*}} : tensor<8x2xf32>
// CHECK-NEXT:    %[[COL:.*]] = npu.view %[[POS]] : tensor<2xf32> -> tensor<2x1xf32>
// CHECK-NEXT:    npu.sub %[[COL]], %[[POS]] : (tensor<2x1xf32>, tensor<2xf32>) -> tensor<2x2xf32>
// CHECK:         %[[LATER:.*]] = npu.constant dense<{{\[}}[0.000000e+00, 1.000000e+00], [0.000000e+00, 0.000000e+00]]> : tensor<2x2xf32>
// CHECK:         %[[LAST:.*]] = npu.relu %{{.*}} : tensor<2xf32>
// CHECK-NEXT:    %[[AT:.*]] = npu.mul %[[NEAR]], %[[LAST]] : (tensor<8x2xf32>, tensor<2xf32>) -> tensor<8x2xf32>
// CHECK-NEXT:    %[[WRITTEN:.*]] = npu.sum %[[AT]] {dims = array<i64: -1>, keepdim} : tensor<8x2xf32> -> tensor<8x1xf32>
// CHECK-NEXT:    %[[NOT:.*]] = npu.neg %[[WRITTEN]]
// CHECK-NEXT:    %[[OFF:.*]] = npu.add %[[NOT]] {scalar = 1.000000e+00 : f32}
// CHECK-NEXT:    %[[KEPT:.*]] = npu.mul %k_cache, %[[OFF]] : (tensor<1x2x8x4xf32>, tensor<8x1xf32>) -> tensor<1x2x8x4xf32>
// CHECK-NEXT:    %[[PLACED:.*]] = npu.matmul %[[AT]], %k_row : (tensor<8x2xf32>, tensor<1x2x2x4xf32>) -> tensor<1x2x8x4xf32>
// CHECK-NEXT:    %[[KEYS:.*]] = npu.add %[[KEPT]], %[[PLACED]]
// CHECK-NEXT:    %k = npu.cache_update %k_cache[%pos] = %k_row
// CHECK:         %a = npu.sdpa %q, %[[KEYS]], %{{[0-9]+}}
// SCHED-LABEL: func.func @two_rows
// SCHED-NEXT:    npu.cast %pos {device = "cpu"}
// SCHED-NEXT:    npu.view {{.*}}device = "cpu"
// SCHED-NOT:     device = "cpu"
// SCHED:         npu.sdpa
// SCHED-NEXT:    npu.cache_update %k_cache
// SCHED-NEXT:    npu.cache_update %v_cache
// SCHED-NEXT:    func.return
func.func @two_rows(%q: tensor<1x2x2x4xf32>, %pos: tensor<2xi64>, %k_row: tensor<1x2x2x4xf32>, %v_row: tensor<1x2x2x4xf32>, %k_cache: tensor<1x2x8x4xf32>, %v_cache: tensor<1x2x8x4xf32>) -> (tensor<1x2x2x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>) attributes {npu.writes = ["k_cache", "v_cache"]} {
  %k = npu.cache_update %k_cache[%pos] = %k_row {dim = 2 : i64} : tensor<1x2x8x4xf32>, tensor<2xi64>, tensor<1x2x2x4xf32>
  %v = npu.cache_update %v_cache[%pos] = %v_row {dim = 2 : i64} : tensor<1x2x8x4xf32>, tensor<2xi64>, tensor<1x2x2x4xf32>
  %a = npu.sdpa %q, %k, %v : (tensor<1x2x2x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x2x4xf32>
  func.return %a, %k, %v : tensor<1x2x2x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>
}

// -----

// Negative: several rows along a dim that is not the second to last (dim 1 of 4): a
// MatMul cannot place them there.
// CHECK-LABEL: func.func @rows_along_dim_1
// CHECK-NOT:     npu.matmul
// CHECK:         npu.sdpa %q, %k, %v
func.func @rows_along_dim_1(%q: tensor<1x8x2x4xf32>, %pos: tensor<2xi64>, %k_row: tensor<1x2x8x4xf32>, %v_row: tensor<1x2x8x4xf32>, %k_cache: tensor<1x8x8x4xf32>, %v_cache: tensor<1x8x8x4xf32>) -> (tensor<1x8x2x4xf32>, tensor<1x8x8x4xf32>, tensor<1x8x8x4xf32>) attributes {npu.writes = ["k_cache", "v_cache"]} {
  %k = npu.cache_update %k_cache[%pos] = %k_row {dim = 1 : i64} : tensor<1x8x8x4xf32>, tensor<2xi64>, tensor<1x2x8x4xf32>
  %v = npu.cache_update %v_cache[%pos] = %v_row {dim = 1 : i64} : tensor<1x8x8x4xf32>, tensor<2xi64>, tensor<1x2x8x4xf32>
  %a = npu.sdpa %q, %k, %v : (tensor<1x8x2x4xf32>, tensor<1x8x8x4xf32>, tensor<1x8x8x4xf32>) -> tensor<1x8x2x4xf32>
  func.return %a, %k, %v : tensor<1x8x2x4xf32>, tensor<1x8x8x4xf32>, tensor<1x8x8x4xf32>
}

// -----

// Positive: keys and values written at different positions get a selector pair each.
// CHECK-LABEL: func.func @different_positions
// CHECK-COUNT-2: npu.relu
// CHECK:         npu.sdpa %q, %{{[0-9]+}}, %{{[0-9]+}}
func.func @different_positions(%q: tensor<1x2x1x4xf32>, %pk: tensor<1xi64>, %pv: tensor<1xi64>, %k_row: tensor<1x2x1x4xf32>, %v_row: tensor<1x2x1x4xf32>, %k_cache: tensor<1x2x8x4xf32>, %v_cache: tensor<1x2x8x4xf32>) -> (tensor<1x2x1x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>) attributes {npu.writes = ["k_cache", "v_cache"]} {
  %k = npu.cache_update %k_cache[%pk] = %k_row {dim = 2 : i64} : tensor<1x2x8x4xf32>, tensor<1xi64>, tensor<1x2x1x4xf32>
  %v = npu.cache_update %v_cache[%pv] = %v_row {dim = 2 : i64} : tensor<1x2x8x4xf32>, tensor<1xi64>, tensor<1x2x1x4xf32>
  %a = npu.sdpa %q, %k, %v : (tensor<1x2x1x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x1x4xf32>
  func.return %a, %k, %v : tensor<1x2x1x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>
}

// -----

// Positive: rows written along another dim (dim 1 of 4): the selectors broadcast
// over the dims after it.
// CHECK-LABEL: func.func @other_dim
// CHECK:         npu.relu %{{.*}} : tensor<8x1x1xf32>
// CHECK:         npu.sdpa %q, %{{[0-9]+}}, %{{[0-9]+}}
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

// -----

// Positive: GQA's repeat_kv between the update and the attention (unsqueeze, expand,
// contiguous, view, as Llama exports it): the chain reads the selected cache.
// CHECK-LABEL: func.func @repeat_kv
// CHECK:         %[[KEYS:.*]] = npu.add %{{.*}}, %{{.*}} : (tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x8x4xf32>
// CHECK:         npu.cache_update %k_cache
// CHECK-NEXT:    npu.unsqueeze %[[KEYS]]
func.func @repeat_kv(%q: tensor<1x4x1x4xf32>, %pos: tensor<1xi64>, %k_row: tensor<1x2x1x4xf32>, %k_cache: tensor<1x2x8x4xf32>) -> (tensor<1x4x1x8xf32>, tensor<1x2x8x4xf32>) attributes {npu.writes = ["k_cache"]} {
  %k = npu.cache_update %k_cache[%pos] = %k_row {dim = 2 : i64} : tensor<1x2x8x4xf32>, tensor<1xi64>, tensor<1x2x1x4xf32>
  %u = npu.unsqueeze %k {dim = 2 : i64} : tensor<1x2x8x4xf32> -> tensor<1x2x1x8x4xf32>
  %e = npu.expand %u : tensor<1x2x1x8x4xf32> -> tensor<1x2x2x8x4xf32>
  %c = npu.contiguous %e : tensor<1x2x2x8x4xf32>
  %r = npu.view %c : tensor<1x2x2x8x4xf32> -> tensor<1x4x8x4xf32>
  %t = npu.transpose %r {dim0 = 2 : i64, dim1 = 3 : i64} : tensor<1x4x8x4xf32> -> tensor<1x4x4x8xf32>
  %s = npu.matmul %q, %t : (tensor<1x4x1x4xf32>, tensor<1x4x4x8xf32>) -> tensor<1x4x1x8xf32>
  func.return %s, %k : tensor<1x4x1x8xf32>, tensor<1x2x8x4xf32>
}

// -----

// Negative: an update nothing reads but the write-back has no reader to redirect.
// CHECK-LABEL: func.func @write_only
// CHECK-NEXT:    %k = npu.cache_update
// CHECK-NEXT:    func.return %k
func.func @write_only(%pos: tensor<1xi64>, %k_row: tensor<1x2x1x4xf32>, %k_cache: tensor<1x2x8x4xf32>) -> tensor<1x2x8x4xf32> attributes {npu.writes = ["k_cache"]} {
  %k = npu.cache_update %k_cache[%pos] = %k_row {dim = 2 : i64} : tensor<1x2x8x4xf32>, tensor<1xi64>, tensor<1x2x1x4xf32>
  func.return %k : tensor<1x2x8x4xf32>
}

// -----

// Negative: an integer cache (a counter) is not selected with float arithmetic.
// CHECK-LABEL: func.func @integer_cache
// CHECK-NOT:     npu.relu
// CHECK:         npu.add %n
func.func @integer_cache(%pos: tensor<1xi64>, %row: tensor<1xi64>, %counts: tensor<8xi64>) -> (tensor<8xi64>, tensor<8xi64>) attributes {npu.writes = ["counts"]} {
  %n = npu.cache_update %counts[%pos] = %row {dim = 0 : i64} : tensor<8xi64>, tensor<1xi64>, tensor<1xi64>
  %m = npu.add %n {scalar = 1 : i64} : (tensor<8xi64>) -> tensor<8xi64>
  func.return %m, %n : tensor<8xi64>, tensor<8xi64>
}
