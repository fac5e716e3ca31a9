// npu-update-state-in-place: a functional `aten.index_copy` of state the function
// writes back (a KV cache) becomes `npu.cache_update`, which writes the new rows into
// the caller's buffer in place; liveness then gives its result no buffer of its own.

// RUN: forge-opt %s -p npu-update-state-in-place --split-input-file | filecheck %s
// RUN: forge-opt %s -p npu-update-state-in-place --split-input-file --check-numerics
// RUN: forge-opt %s -p 'npu-update-state-in-place,npu-assign-vregs,npu-liveness,npu-linear-scan' --split-input-file | filecheck %s --check-prefix=PLAN

// Positive: one decode step of one layer, the cache read by the attention after it.
// CHECK-LABEL: func.func @decode_step
// CHECK:         %new = npu.cache_update %cache[%pos] = %rows {dim = 2 : i64} : tensor<1x2x8x4xf32>, tensor<1xi64>, tensor<1x2x1x4xf32>
// CHECK-NEXT:    %scores = npu.matmul %q, %new
// CHECK-NOT:     aten.index_copy
// PLAN-LABEL: func.func @decode_step
// The update's result is the caller's cache: linear scan gives it no buffer.
// PLAN:         %new = npu.cache_update %cache[%pos] = %rows {vreg = 0 : i64, live = array<i64: 0, 2>, dead_after = array<i64>, dim = 2 : i64} : tensor<1x2x8x4xf32>
// PLAN-NEXT:    %scores = npu.matmul %q, %new {{{.*}}buffer = 0 : i64}
func.func @decode_step(%q: tensor<1x2x1x8xf32>, %pos: tensor<1xi64>, %rows: tensor<1x2x1x4xf32>, %cache: tensor<1x2x8x4xf32>) -> (tensor<1x2x1x4xf32>, tensor<1x2x8x4xf32>) attributes {npu.writes = ["cache"]} {
  %new = npu.generic "aten.index_copy.default"(%cache, 2 : i64, %pos, %rows) : (tensor<1x2x8x4xf32>, tensor<1xi64>, tensor<1x2x1x4xf32>) -> tensor<1x2x8x4xf32>
  %scores = npu.matmul %q, %new : (tensor<1x2x1x8xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x1x4xf32>
  func.return %scores, %new : tensor<1x2x1x4xf32>, tensor<1x2x8x4xf32>
}

// -----

// Positive: two caches (keys and values) of one program, written back in order.
// CHECK-LABEL: func.func @keys_and_values
// CHECK:         %k1 = npu.cache_update %k[%pos] = %kr {dim = 1 : i64}
// CHECK-NEXT:    %v1 = npu.cache_update %v[%pos] = %vr {dim = 1 : i64}
func.func @keys_and_values(%pos: tensor<2xi64>, %kr: tensor<2x2xf32>, %vr: tensor<2x2xf32>, %k: tensor<2x6xf32>, %v: tensor<2x6xf32>) -> (tensor<2x6xf32>, tensor<2x6xf32>) attributes {npu.writes = ["k", "v"]} {
  %k1 = npu.generic "aten.index_copy.default"(%k, 1 : i64, %pos, %kr) : (tensor<2x6xf32>, tensor<2xi64>, tensor<2x2xf32>) -> tensor<2x6xf32>
  %v1 = npu.generic "aten.index_copy.default"(%v, 1 : i64, %pos, %vr) : (tensor<2x6xf32>, tensor<2xi64>, tensor<2x2xf32>) -> tensor<2x6xf32>
  func.return %k1, %v1 : tensor<2x6xf32>, tensor<2x6xf32>
}

// -----

// Negative: another op reads the old cache; writing in place would change what it sees.
// CHECK-LABEL: func.func @old_cache_read
// CHECK:         npu.generic "aten.index_copy.default"
// CHECK-NOT:     npu.cache_update
func.func @old_cache_read(%pos: tensor<1xi64>, %rows: tensor<1x4xf32>, %cache: tensor<8x4xf32>) -> (tensor<8x4xf32>, tensor<8x4xf32>) attributes {npu.writes = ["cache"]} {
  %new = npu.generic "aten.index_copy.default"(%cache, 0 : i64, %pos, %rows) : (tensor<8x4xf32>, tensor<1xi64>, tensor<1x4xf32>) -> tensor<8x4xf32>
  %old = npu.exp %cache : tensor<8x4xf32>
  func.return %old, %new : tensor<8x4xf32>, tensor<8x4xf32>
}

// -----

// Negative: the cache is an input the function does not write back (no npu.writes).
// CHECK-LABEL: func.func @not_state
// CHECK:         npu.generic "aten.index_copy.default"
// CHECK-NOT:     npu.cache_update
func.func @not_state(%pos: tensor<1xi64>, %rows: tensor<1x4xf32>, %cache: tensor<8x4xf32>) -> tensor<8x4xf32> {
  %new = npu.generic "aten.index_copy.default"(%cache, 0 : i64, %pos, %rows) : (tensor<8x4xf32>, tensor<1xi64>, tensor<1x4xf32>) -> tensor<8x4xf32>
  func.return %new : tensor<8x4xf32>
}

// -----

// Negative: the result is written back into another argument, not into its cache.
// CHECK-LABEL: func.func @written_elsewhere
// CHECK:         npu.generic "aten.index_copy.default"
// CHECK-NOT:     npu.cache_update
func.func @written_elsewhere(%pos: tensor<1xi64>, %rows: tensor<1x4xf32>, %cache: tensor<8x4xf32>, %other: tensor<8x4xf32>) -> tensor<8x4xf32> attributes {npu.writes = ["other"]} {
  %new = npu.generic "aten.index_copy.default"(%cache, 0 : i64, %pos, %rows) : (tensor<8x4xf32>, tensor<1xi64>, tensor<1x4xf32>) -> tensor<8x4xf32>
  func.return %new : tensor<8x4xf32>
}

// -----

// Negative: the updated tensor is computed, not an argument (no caller-owned storage).
// CHECK-LABEL: func.func @computed_cache
// CHECK:         npu.generic "aten.index_copy.default"
// CHECK-NOT:     npu.cache_update
func.func @computed_cache(%pos: tensor<1xi64>, %rows: tensor<1x4xf32>, %x: tensor<8x4xf32>) -> tensor<8x4xf32> {
  %cache = npu.exp %x : tensor<8x4xf32>
  %new = npu.generic "aten.index_copy.default"(%cache, 0 : i64, %pos, %rows) : (tensor<8x4xf32>, tensor<1xi64>, tensor<1x4xf32>) -> tensor<8x4xf32>
  func.return %new : tensor<8x4xf32>
}
