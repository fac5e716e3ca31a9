// npu-fuse-cached-attention: a static-cache step's two cache writes and its causal
// attention over the written caches become one `npu.cached_attention`, which writes the
// new rows in place and attends (OpenVINO's PagedAttentionExtension on the NPU side),
// after an `npu.run_start` that checks the step's positions are a run in the cache.

// RUN: forge-opt %s -p npu-fuse-cached-attention --split-input-file | filecheck %s
// RUN: forge-opt %s -p npu-fuse-cached-attention --split-input-file --check-numerics
// RUN: forge-opt %s -p 'npu-fuse-cached-attention,npu-place-devices' --split-input-file | filecheck %s --check-prefix=PLACE
// RUN: not forge-opt %s -p 'npu-fuse-cached-attention{block=0}' 2>&1 | filecheck %s --check-prefix=BAD
// BAD: forge-opt: error: invalid pass pipeline 'npu-fuse-cached-attention{block=0}': block must be at least 1, got 0

// Positive: a decode step of one layer (transformers' causal mask over a static cache,
// as captured). The mask, the updates and the attention go; the caches are written back
// as they are.
// CHECK-LABEL: func.func @decode_step
// CHECK-NEXT:    %0 = npu.run_start %pos {capacity = 32 : i64} : tensor<1xi64> -> tensor<1xi64>
// CHECK-NOT:     npu.cache_update
// CHECK-NOT:     npu.where
// CHECK:         %a = npu.cached_attention %q, %k, %v into %kc, %vc at %0 {scale = 5.000000e-01 : f64}
// CHECK-NEXT:    func.return %a, %kc, %vc
// The attention runs in the graph; the check of the positions on the CPU.
// PLACE-LABEL: func.func @decode_step
// PLACE:         npu.run_start %pos {device = "cpu"
// PLACE:         npu.cached_attention %q, %k, %v into %kc, %vc at %0 {device = "npu"
func.func @decode_step(%q: tensor<1x2x1x4xf32>, %k: tensor<1x2x1x4xf32>, %v: tensor<1x2x1x4xf32>, %pos: tensor<1xi64>, %kc: tensor<1x2x32x4xf32>, %vc: tensor<1x2x32x4xf32>) -> (tensor<1x2x1x4xf32>, tensor<1x2x32x4xf32>, tensor<1x2x32x4xf32>) attributes {npu.writes = ["kc", "vc"]} {
  %first = npu.generic "aten.select.int"(%pos, 0 : i64, 0 : i64) : (tensor<1xi64>) -> tensor<i64>
  %offsets = npu.constant dense<[0]> : tensor<1xi64>
  %rows = npu.add %offsets, %first : (tensor<1xi64>, tensor<i64>) -> tensor<1xi64>
  %r2 = npu.unsqueeze %rows {dim = 0 : i64} : tensor<1xi64> -> tensor<1x1xi64>
  %r3 = npu.unsqueeze %r2 {dim = 1 : i64} : tensor<1x1xi64> -> tensor<1x1x1xi64>
  %r4 = npu.unsqueeze %r3 {dim = 3 : i64} : tensor<1x1x1xi64> -> tensor<1x1x1x1xi64>
  %cols = npu.constant dense<[[[[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31]]]]> : tensor<1x1x1x32xi64>
  %seen = npu.le %cols, %r4 : (tensor<1x1x1x32xi64>, tensor<1x1x1x1xi64>) -> tensor<1x1x1x32xi1>
  %zero = npu.constant dense<0.000000e+00> : tensor<f32>
  %mask = npu.where %seen, %zero {scalar = -3.4028234663852886e+38 : f64} : (tensor<1x1x1x32xi1>, tensor<f32>) -> tensor<1x1x1x32xf32>
  %k2 = npu.cache_update %kc[%pos] = %k {dim = 2 : i64} : tensor<1x2x32x4xf32>, tensor<1xi64>, tensor<1x2x1x4xf32>
  %v2 = npu.cache_update %vc[%pos] = %v {dim = 2 : i64} : tensor<1x2x32x4xf32>, tensor<1xi64>, tensor<1x2x1x4xf32>
  %a = npu.sdpa %q, %k2, %v2, %mask {scale = 5.000000e-01 : f64} : (tensor<1x2x1x4xf32>, tensor<1x2x32x4xf32>, tensor<1x2x32x4xf32>, tensor<1x1x1x32xf32>) -> tensor<1x2x1x4xf32>
  func.return %a, %k2, %v2 : tensor<1x2x1x4xf32>, tensor<1x2x32x4xf32>, tensor<1x2x32x4xf32>
}

// -----

// Positive: a prefill chunk of 4 rows at a start position, grouped-query attention
// (4 query heads over 2 key/value heads), two layers sharing one `npu.run_start`.
// CHECK-LABEL: func.func @prefill_two_layers
// CHECK-COUNT-1: npu.run_start
// CHECK-NOT:     npu.run_start
// CHECK:         %a0 = npu.cached_attention %q0, %k0, %v0 into %kc0, %vc0 at %[[START:.*]] {scale = 5.000000e-01 : f64}
// CHECK:         %a1 = npu.cached_attention %q1, %k1, %v1 into %kc1, %vc1 at %[[START]] {scale = 5.000000e-01 : f64}
// CHECK-NOT:     npu.cache_update
// CHECK:         func.return %a0, %a1, %kc0, %vc0, %kc1, %vc1
func.func @prefill_two_layers(%q0: tensor<1x4x4x4xf32>, %k0: tensor<1x2x4x4xf32>, %v0: tensor<1x2x4x4xf32>, %q1: tensor<1x4x4x4xf32>, %k1: tensor<1x2x4x4xf32>, %v1: tensor<1x2x4x4xf32>, %at: tensor<1xi64>, %kc0: tensor<1x2x32x4xf32>, %vc0: tensor<1x2x32x4xf32>, %kc1: tensor<1x2x32x4xf32>, %vc1: tensor<1x2x32x4xf32>) -> (tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>, tensor<1x2x32x4xf32>, tensor<1x2x32x4xf32>, tensor<1x2x32x4xf32>, tensor<1x2x32x4xf32>) attributes {npu.writes = ["kc0", "vc0", "kc1", "vc1"]} {
  %base = npu.generic "aten.select.int"(%at, 0 : i64, 0 : i64) : (tensor<1xi64>) -> tensor<i64>
  %arange = npu.constant dense<[0, 1, 2, 3]> : tensor<4xi64>
  %pos = npu.add %arange, %base : (tensor<4xi64>, tensor<i64>) -> tensor<4xi64>
  %first = npu.generic "aten.select.int"(%pos, 0 : i64, 0 : i64) : (tensor<4xi64>) -> tensor<i64>
  %first1 = npu.contiguous %first : tensor<i64>
  %rows = npu.add %arange, %first1 : (tensor<4xi64>, tensor<i64>) -> tensor<4xi64>
  %r2 = npu.unsqueeze %rows {dim = 0 : i64} : tensor<4xi64> -> tensor<1x4xi64>
  %r3 = npu.unsqueeze %r2 {dim = 1 : i64} : tensor<1x4xi64> -> tensor<1x1x4xi64>
  %r4 = npu.unsqueeze %r3 {dim = 3 : i64} : tensor<1x1x4xi64> -> tensor<1x1x4x1xi64>
  %cols = npu.constant dense<[[[[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31]]]]> : tensor<1x1x1x32xi64>
  %seen = npu.le %cols, %r4 : (tensor<1x1x1x32xi64>, tensor<1x1x4x1xi64>) -> tensor<1x1x4x32xi1>
  %zero = npu.constant dense<0.000000e+00> : tensor<f32>
  %mask = npu.where %seen, %zero {scalar = -3.4028234663852886e+38 : f64} : (tensor<1x1x4x32xi1>, tensor<f32>) -> tensor<1x1x4x32xf32>
  %k0w = npu.cache_update %kc0[%pos] = %k0 {dim = 2 : i64} : tensor<1x2x32x4xf32>, tensor<4xi64>, tensor<1x2x4x4xf32>
  %v0w = npu.cache_update %vc0[%pos] = %v0 {dim = 2 : i64} : tensor<1x2x32x4xf32>, tensor<4xi64>, tensor<1x2x4x4xf32>
  %a0 = npu.sdpa %q0, %k0w, %v0w, %mask {scale = 5.000000e-01 : f64} : (tensor<1x4x4x4xf32>, tensor<1x2x32x4xf32>, tensor<1x2x32x4xf32>, tensor<1x1x4x32xf32>) -> tensor<1x4x4x4xf32>
  %k1w = npu.cache_update %kc1[%pos] = %k1 {dim = 2 : i64} : tensor<1x2x32x4xf32>, tensor<4xi64>, tensor<1x2x4x4xf32>
  %v1w = npu.cache_update %vc1[%pos] = %v1 {dim = 2 : i64} : tensor<1x2x32x4xf32>, tensor<4xi64>, tensor<1x2x4x4xf32>
  %a1 = npu.sdpa %q1, %k1w, %v1w, %mask {scale = 5.000000e-01 : f64} : (tensor<1x4x4x4xf32>, tensor<1x2x32x4xf32>, tensor<1x2x32x4xf32>, tensor<1x1x4x32xf32>) -> tensor<1x4x4x4xf32>
  func.return %a0, %a1, %k0w, %v0w, %k1w, %v1w : tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>, tensor<1x2x32x4xf32>, tensor<1x2x32x4xf32>, tensor<1x2x32x4xf32>, tensor<1x2x32x4xf32>
}

// -----

// Negative: a cache of 24 positions is not whole blocks of 32.
// CHECK-LABEL: func.func @capacity_not_whole_blocks
// CHECK-NOT:     npu.cached_attention
// CHECK:         npu.sdpa
func.func @capacity_not_whole_blocks(%q: tensor<1x2x1x4xf32>, %k: tensor<1x2x1x4xf32>, %v: tensor<1x2x1x4xf32>, %pos: tensor<1xi64>, %kc: tensor<1x2x24x4xf32>, %vc: tensor<1x2x24x4xf32>) -> (tensor<1x2x1x4xf32>, tensor<1x2x24x4xf32>, tensor<1x2x24x4xf32>) attributes {npu.writes = ["kc", "vc"]} {
  %first = npu.generic "aten.select.int"(%pos, 0 : i64, 0 : i64) : (tensor<1xi64>) -> tensor<i64>
  %offsets = npu.constant dense<[0]> : tensor<1xi64>
  %rows = npu.add %offsets, %first : (tensor<1xi64>, tensor<i64>) -> tensor<1xi64>
  %r2 = npu.unsqueeze %rows {dim = 0 : i64} : tensor<1xi64> -> tensor<1x1xi64>
  %r3 = npu.unsqueeze %r2 {dim = 1 : i64} : tensor<1x1xi64> -> tensor<1x1x1xi64>
  %r4 = npu.unsqueeze %r3 {dim = 3 : i64} : tensor<1x1x1xi64> -> tensor<1x1x1x1xi64>
  %cols = npu.constant dense<[[[[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23]]]]> : tensor<1x1x1x24xi64>
  %seen = npu.le %cols, %r4 : (tensor<1x1x1x24xi64>, tensor<1x1x1x1xi64>) -> tensor<1x1x1x24xi1>
  %zero = npu.constant dense<0.000000e+00> : tensor<f32>
  %mask = npu.where %seen, %zero {scalar = -3.4028234663852886e+38 : f64} : (tensor<1x1x1x24xi1>, tensor<f32>) -> tensor<1x1x1x24xf32>
  %k2 = npu.cache_update %kc[%pos] = %k {dim = 2 : i64} : tensor<1x2x24x4xf32>, tensor<1xi64>, tensor<1x2x1x4xf32>
  %v2 = npu.cache_update %vc[%pos] = %v {dim = 2 : i64} : tensor<1x2x24x4xf32>, tensor<1xi64>, tensor<1x2x1x4xf32>
  %a = npu.sdpa %q, %k2, %v2, %mask {scale = 5.000000e-01 : f64} : (tensor<1x2x1x4xf32>, tensor<1x2x24x4xf32>, tensor<1x2x24x4xf32>, tensor<1x1x1x24xf32>) -> tensor<1x2x1x4xf32>
  func.return %a, %k2, %v2 : tensor<1x2x1x4xf32>, tensor<1x2x24x4xf32>, tensor<1x2x24x4xf32>
}

// -----

// Negative: `lt` hides the query's own row: not the causal mask of the step.
// CHECK-LABEL: func.func @not_causal
// CHECK-NOT:     npu.cached_attention
// CHECK:         npu.sdpa
func.func @not_causal(%q: tensor<1x2x1x4xf32>, %k: tensor<1x2x1x4xf32>, %v: tensor<1x2x1x4xf32>, %pos: tensor<1xi64>, %kc: tensor<1x2x32x4xf32>, %vc: tensor<1x2x32x4xf32>) -> (tensor<1x2x1x4xf32>, tensor<1x2x32x4xf32>, tensor<1x2x32x4xf32>) attributes {npu.writes = ["kc", "vc"]} {
  %first = npu.generic "aten.select.int"(%pos, 0 : i64, 0 : i64) : (tensor<1xi64>) -> tensor<i64>
  %offsets = npu.constant dense<[0]> : tensor<1xi64>
  %rows = npu.add %offsets, %first : (tensor<1xi64>, tensor<i64>) -> tensor<1xi64>
  %r2 = npu.unsqueeze %rows {dim = 0 : i64} : tensor<1xi64> -> tensor<1x1xi64>
  %r3 = npu.unsqueeze %r2 {dim = 1 : i64} : tensor<1x1xi64> -> tensor<1x1x1xi64>
  %r4 = npu.unsqueeze %r3 {dim = 3 : i64} : tensor<1x1x1xi64> -> tensor<1x1x1x1xi64>
  %cols = npu.constant dense<[[[[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31]]]]> : tensor<1x1x1x32xi64>
  %seen = npu.lt %cols, %r4 : (tensor<1x1x1x32xi64>, tensor<1x1x1x1xi64>) -> tensor<1x1x1x32xi1>
  %zero = npu.constant dense<0.000000e+00> : tensor<f32>
  %mask = npu.where %seen, %zero {scalar = -3.4028234663852886e+38 : f64} : (tensor<1x1x1x32xi1>, tensor<f32>) -> tensor<1x1x1x32xf32>
  %k2 = npu.cache_update %kc[%pos] = %k {dim = 2 : i64} : tensor<1x2x32x4xf32>, tensor<1xi64>, tensor<1x2x1x4xf32>
  %v2 = npu.cache_update %vc[%pos] = %v {dim = 2 : i64} : tensor<1x2x32x4xf32>, tensor<1xi64>, tensor<1x2x1x4xf32>
  %a = npu.sdpa %q, %k2, %v2, %mask {scale = 5.000000e-01 : f64} : (tensor<1x2x1x4xf32>, tensor<1x2x32x4xf32>, tensor<1x2x32x4xf32>, tensor<1x1x1x32xf32>) -> tensor<1x2x1x4xf32>
  func.return %a, %k2, %v2 : tensor<1x2x1x4xf32>, tensor<1x2x32x4xf32>, tensor<1x2x32x4xf32>
}

// -----

// Positive: a sliding window of 2 (Mistral's decode mask as captured: the causal `le`
// and-ed with `and(true, gt(cols, pos - 2))`) is the paged node's sliding window: the
// op carries `window = 2` and the whole mask goes.
// CHECK-LABEL: func.func @sliding_window
// CHECK-NEXT:    %0 = npu.run_start %pos {capacity = 32 : i64} : tensor<1xi64> -> tensor<1xi64>
// CHECK-NOT:     npu.gt
// CHECK-NOT:     npu.and
// CHECK-NOT:     npu.where
// CHECK:         %a = npu.cached_attention %q, %k, %v into %kc, %vc at %0 {scale = 5.000000e-01 : f64, window = 2 : i64}
// CHECK-NEXT:    func.return %a, %kc, %vc
// PLACE-LABEL: func.func @sliding_window
// PLACE:         npu.cached_attention {{.*}}device = "npu"
func.func @sliding_window(%q: tensor<1x2x1x4xf32>, %k: tensor<1x2x1x4xf32>, %v: tensor<1x2x1x4xf32>, %pos: tensor<1xi64>, %kc: tensor<1x2x32x4xf32>, %vc: tensor<1x2x32x4xf32>) -> (tensor<1x2x1x4xf32>, tensor<1x2x32x4xf32>, tensor<1x2x32x4xf32>) attributes {npu.writes = ["kc", "vc"]} {
  %first = npu.generic "aten.select.int"(%pos, 0 : i64, 0 : i64) : (tensor<1xi64>) -> tensor<i64>
  %offsets = npu.constant dense<[0]> : tensor<1xi64>
  %rows = npu.add %offsets, %first : (tensor<1xi64>, tensor<i64>) -> tensor<1xi64>
  %r2 = npu.unsqueeze %rows {dim = 0 : i64} : tensor<1xi64> -> tensor<1x1xi64>
  %r3 = npu.unsqueeze %r2 {dim = 1 : i64} : tensor<1x1xi64> -> tensor<1x1x1xi64>
  %r4 = npu.unsqueeze %r3 {dim = 3 : i64} : tensor<1x1x1xi64> -> tensor<1x1x1x1xi64>
  %cols = npu.constant dense<[[[[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31]]]]> : tensor<1x1x1x32xi64>
  %true = npu.constant dense<true> : tensor<i1>
  %start = npu.sub %r4 {scalar = 2 : i64} : (tensor<1x1x1x1xi64>) -> tensor<1x1x1x1xi64>
  %after = npu.gt %cols, %start : (tensor<1x1x1x32xi64>, tensor<1x1x1x1xi64>) -> tensor<1x1x1x32xi1>
  %inside = npu.and %true, %after : (tensor<i1>, tensor<1x1x1x32xi1>) -> tensor<1x1x1x32xi1>
  %causal = npu.le %cols, %r4 : (tensor<1x1x1x32xi64>, tensor<1x1x1x1xi64>) -> tensor<1x1x1x32xi1>
  %seen = npu.and %inside, %causal : (tensor<1x1x1x32xi1>, tensor<1x1x1x32xi1>) -> tensor<1x1x1x32xi1>
  %zero = npu.constant dense<0.000000e+00> : tensor<f32>
  %mask = npu.where %seen, %zero {scalar = -3.4028234663852886e+38 : f64} : (tensor<1x1x1x32xi1>, tensor<f32>) -> tensor<1x1x1x32xf32>
  %k2 = npu.cache_update %kc[%pos] = %k {dim = 2 : i64} : tensor<1x2x32x4xf32>, tensor<1xi64>, tensor<1x2x1x4xf32>
  %v2 = npu.cache_update %vc[%pos] = %v {dim = 2 : i64} : tensor<1x2x32x4xf32>, tensor<1xi64>, tensor<1x2x1x4xf32>
  %a = npu.sdpa %q, %k2, %v2, %mask {scale = 5.000000e-01 : f64} : (tensor<1x2x1x4xf32>, tensor<1x2x32x4xf32>, tensor<1x2x32x4xf32>, tensor<1x1x1x32xf32>) -> tensor<1x2x1x4xf32>
  func.return %a, %k2, %v2 : tensor<1x2x1x4xf32>, tensor<1x2x32x4xf32>, tensor<1x2x32x4xf32>
}

// -----

// Positive: the same window as sdpa attention captures it, the boolean mask itself
// (true: attended) instead of a where of 0.0 and the float minimum.
// CHECK-LABEL: func.func @sliding_window_boolean
// CHECK-NEXT:    %0 = npu.run_start %pos {capacity = 32 : i64} : tensor<1xi64> -> tensor<1xi64>
// CHECK-NOT:     npu.and
// CHECK:         %a = npu.cached_attention %q, %k, %v into %kc, %vc at %0 {scale = 5.000000e-01 : f64, window = 2 : i64}
// CHECK-NEXT:    func.return %a, %kc, %vc
func.func @sliding_window_boolean(%q: tensor<1x2x1x4xf32>, %k: tensor<1x2x1x4xf32>, %v: tensor<1x2x1x4xf32>, %pos: tensor<1xi64>, %kc: tensor<1x2x32x4xf32>, %vc: tensor<1x2x32x4xf32>) -> (tensor<1x2x1x4xf32>, tensor<1x2x32x4xf32>, tensor<1x2x32x4xf32>) attributes {npu.writes = ["kc", "vc"]} {
  %first = npu.generic "aten.select.int"(%pos, 0 : i64, 0 : i64) : (tensor<1xi64>) -> tensor<i64>
  %offsets = npu.constant dense<[0]> : tensor<1xi64>
  %rows = npu.add %offsets, %first : (tensor<1xi64>, tensor<i64>) -> tensor<1xi64>
  %r2 = npu.unsqueeze %rows {dim = 0 : i64} : tensor<1xi64> -> tensor<1x1xi64>
  %r3 = npu.unsqueeze %r2 {dim = 1 : i64} : tensor<1x1xi64> -> tensor<1x1x1xi64>
  %r4 = npu.unsqueeze %r3 {dim = 3 : i64} : tensor<1x1x1xi64> -> tensor<1x1x1x1xi64>
  %cols = npu.constant dense<[[[[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31]]]]> : tensor<1x1x1x32xi64>
  %true = npu.constant dense<true> : tensor<i1>
  %start = npu.sub %r4 {scalar = 2 : i64} : (tensor<1x1x1x1xi64>) -> tensor<1x1x1x1xi64>
  %after = npu.gt %cols, %start : (tensor<1x1x1x32xi64>, tensor<1x1x1x1xi64>) -> tensor<1x1x1x32xi1>
  %inside = npu.and %true, %after : (tensor<i1>, tensor<1x1x1x32xi1>) -> tensor<1x1x1x32xi1>
  %causal = npu.le %cols, %r4 : (tensor<1x1x1x32xi64>, tensor<1x1x1x1xi64>) -> tensor<1x1x1x32xi1>
  %seen = npu.and %inside, %causal : (tensor<1x1x1x32xi1>, tensor<1x1x1x32xi1>) -> tensor<1x1x1x32xi1>
  %k2 = npu.cache_update %kc[%pos] = %k {dim = 2 : i64} : tensor<1x2x32x4xf32>, tensor<1xi64>, tensor<1x2x1x4xf32>
  %v2 = npu.cache_update %vc[%pos] = %v {dim = 2 : i64} : tensor<1x2x32x4xf32>, tensor<1xi64>, tensor<1x2x1x4xf32>
  %a = npu.sdpa %q, %k2, %v2, %seen {scale = 5.000000e-01 : f64} : (tensor<1x2x1x4xf32>, tensor<1x2x32x4xf32>, tensor<1x2x32x4xf32>, tensor<1x1x1x32xi1>) -> tensor<1x2x1x4xf32>
  func.return %a, %k2, %v2 : tensor<1x2x1x4xf32>, tensor<1x2x32x4xf32>, tensor<1x2x32x4xf32>
}

// -----

// Negative: the window's bound is not the query rows' (pos + 1 - 2): not a window of
// the step's positions.
// CHECK-LABEL: func.func @window_on_other_rows
// CHECK-NOT:     npu.cached_attention
// CHECK:         npu.sdpa
func.func @window_on_other_rows(%q: tensor<1x2x1x4xf32>, %k: tensor<1x2x1x4xf32>, %v: tensor<1x2x1x4xf32>, %pos: tensor<1xi64>, %kc: tensor<1x2x32x4xf32>, %vc: tensor<1x2x32x4xf32>) -> (tensor<1x2x1x4xf32>, tensor<1x2x32x4xf32>, tensor<1x2x32x4xf32>) attributes {npu.writes = ["kc", "vc"]} {
  %first = npu.generic "aten.select.int"(%pos, 0 : i64, 0 : i64) : (tensor<1xi64>) -> tensor<i64>
  %offsets = npu.constant dense<[0]> : tensor<1xi64>
  %rows = npu.add %offsets, %first : (tensor<1xi64>, tensor<i64>) -> tensor<1xi64>
  %r2 = npu.unsqueeze %rows {dim = 0 : i64} : tensor<1xi64> -> tensor<1x1xi64>
  %r3 = npu.unsqueeze %r2 {dim = 1 : i64} : tensor<1x1xi64> -> tensor<1x1x1xi64>
  %r4 = npu.unsqueeze %r3 {dim = 3 : i64} : tensor<1x1x1xi64> -> tensor<1x1x1x1xi64>
  %cols = npu.constant dense<[[[[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31]]]]> : tensor<1x1x1x32xi64>
  %later = npu.add %r4 {scalar = 1 : i64} : (tensor<1x1x1x1xi64>) -> tensor<1x1x1x1xi64>
  %start = npu.sub %later {scalar = 2 : i64} : (tensor<1x1x1x1xi64>) -> tensor<1x1x1x1xi64>
  %inside = npu.gt %cols, %start : (tensor<1x1x1x32xi64>, tensor<1x1x1x1xi64>) -> tensor<1x1x1x32xi1>
  %causal = npu.le %cols, %r4 : (tensor<1x1x1x32xi64>, tensor<1x1x1x1xi64>) -> tensor<1x1x1x32xi1>
  %seen = npu.and %inside, %causal : (tensor<1x1x1x32xi1>, tensor<1x1x1x32xi1>) -> tensor<1x1x1x32xi1>
  %zero = npu.constant dense<0.000000e+00> : tensor<f32>
  %mask = npu.where %seen, %zero {scalar = -3.4028234663852886e+38 : f64} : (tensor<1x1x1x32xi1>, tensor<f32>) -> tensor<1x1x1x32xf32>
  %k2 = npu.cache_update %kc[%pos] = %k {dim = 2 : i64} : tensor<1x2x32x4xf32>, tensor<1xi64>, tensor<1x2x1x4xf32>
  %v2 = npu.cache_update %vc[%pos] = %v {dim = 2 : i64} : tensor<1x2x32x4xf32>, tensor<1xi64>, tensor<1x2x1x4xf32>
  %a = npu.sdpa %q, %k2, %v2, %mask {scale = 5.000000e-01 : f64} : (tensor<1x2x1x4xf32>, tensor<1x2x32x4xf32>, tensor<1x2x32x4xf32>, tensor<1x1x1x32xf32>) -> tensor<1x2x1x4xf32>
  func.return %a, %k2, %v2 : tensor<1x2x1x4xf32>, tensor<1x2x32x4xf32>, tensor<1x2x32x4xf32>
}

// -----

// Negative: `or` instead of `and`: every row up to the step and every one after the
// window's start, which is no window at all.
// CHECK-LABEL: func.func @window_or_causal
// CHECK-NOT:     npu.cached_attention
// CHECK:         npu.sdpa
func.func @window_or_causal(%q: tensor<1x2x1x4xf32>, %k: tensor<1x2x1x4xf32>, %v: tensor<1x2x1x4xf32>, %pos: tensor<1xi64>, %kc: tensor<1x2x32x4xf32>, %vc: tensor<1x2x32x4xf32>) -> (tensor<1x2x1x4xf32>, tensor<1x2x32x4xf32>, tensor<1x2x32x4xf32>) attributes {npu.writes = ["kc", "vc"]} {
  %first = npu.generic "aten.select.int"(%pos, 0 : i64, 0 : i64) : (tensor<1xi64>) -> tensor<i64>
  %offsets = npu.constant dense<[0]> : tensor<1xi64>
  %rows = npu.add %offsets, %first : (tensor<1xi64>, tensor<i64>) -> tensor<1xi64>
  %r2 = npu.unsqueeze %rows {dim = 0 : i64} : tensor<1xi64> -> tensor<1x1xi64>
  %r3 = npu.unsqueeze %r2 {dim = 1 : i64} : tensor<1x1xi64> -> tensor<1x1x1xi64>
  %r4 = npu.unsqueeze %r3 {dim = 3 : i64} : tensor<1x1x1xi64> -> tensor<1x1x1x1xi64>
  %cols = npu.constant dense<[[[[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31]]]]> : tensor<1x1x1x32xi64>
  %start = npu.sub %r4 {scalar = 2 : i64} : (tensor<1x1x1x1xi64>) -> tensor<1x1x1x1xi64>
  %inside = npu.gt %cols, %start : (tensor<1x1x1x32xi64>, tensor<1x1x1x1xi64>) -> tensor<1x1x1x32xi1>
  %causal = npu.le %cols, %r4 : (tensor<1x1x1x32xi64>, tensor<1x1x1x1xi64>) -> tensor<1x1x1x32xi1>
  %seen = npu.or %inside, %causal : (tensor<1x1x1x32xi1>, tensor<1x1x1x32xi1>) -> tensor<1x1x1x32xi1>
  %zero = npu.constant dense<0.000000e+00> : tensor<f32>
  %mask = npu.where %seen, %zero {scalar = -3.4028234663852886e+38 : f64} : (tensor<1x1x1x32xi1>, tensor<f32>) -> tensor<1x1x1x32xf32>
  %k2 = npu.cache_update %kc[%pos] = %k {dim = 2 : i64} : tensor<1x2x32x4xf32>, tensor<1xi64>, tensor<1x2x1x4xf32>
  %v2 = npu.cache_update %vc[%pos] = %v {dim = 2 : i64} : tensor<1x2x32x4xf32>, tensor<1xi64>, tensor<1x2x1x4xf32>
  %a = npu.sdpa %q, %k2, %v2, %mask {scale = 5.000000e-01 : f64} : (tensor<1x2x1x4xf32>, tensor<1x2x32x4xf32>, tensor<1x2x32x4xf32>, tensor<1x1x1x32xf32>) -> tensor<1x2x1x4xf32>
  func.return %a, %k2, %v2 : tensor<1x2x1x4xf32>, tensor<1x2x32x4xf32>, tensor<1x2x32x4xf32>
}

// -----

// Negative: the mask's rows are not positions[0] + arange (offset 1).
// CHECK-LABEL: func.func @shifted_rows
// CHECK-NOT:     npu.cached_attention
// CHECK:         npu.sdpa
func.func @shifted_rows(%q: tensor<1x2x1x4xf32>, %k: tensor<1x2x1x4xf32>, %v: tensor<1x2x1x4xf32>, %pos: tensor<1xi64>, %kc: tensor<1x2x32x4xf32>, %vc: tensor<1x2x32x4xf32>) -> (tensor<1x2x1x4xf32>, tensor<1x2x32x4xf32>, tensor<1x2x32x4xf32>) attributes {npu.writes = ["kc", "vc"]} {
  %first = npu.generic "aten.select.int"(%pos, 0 : i64, 0 : i64) : (tensor<1xi64>) -> tensor<i64>
  %offsets = npu.constant dense<[1]> : tensor<1xi64>
  %rows = npu.add %offsets, %first : (tensor<1xi64>, tensor<i64>) -> tensor<1xi64>
  %r2 = npu.unsqueeze %rows {dim = 0 : i64} : tensor<1xi64> -> tensor<1x1xi64>
  %r3 = npu.unsqueeze %r2 {dim = 1 : i64} : tensor<1x1xi64> -> tensor<1x1x1xi64>
  %r4 = npu.unsqueeze %r3 {dim = 3 : i64} : tensor<1x1x1xi64> -> tensor<1x1x1x1xi64>
  %cols = npu.constant dense<[[[[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31]]]]> : tensor<1x1x1x32xi64>
  %seen = npu.le %cols, %r4 : (tensor<1x1x1x32xi64>, tensor<1x1x1x1xi64>) -> tensor<1x1x1x32xi1>
  %zero = npu.constant dense<0.000000e+00> : tensor<f32>
  %mask = npu.where %seen, %zero {scalar = -3.4028234663852886e+38 : f64} : (tensor<1x1x1x32xi1>, tensor<f32>) -> tensor<1x1x1x32xf32>
  %k2 = npu.cache_update %kc[%pos] = %k {dim = 2 : i64} : tensor<1x2x32x4xf32>, tensor<1xi64>, tensor<1x2x1x4xf32>
  %v2 = npu.cache_update %vc[%pos] = %v {dim = 2 : i64} : tensor<1x2x32x4xf32>, tensor<1xi64>, tensor<1x2x1x4xf32>
  %a = npu.sdpa %q, %k2, %v2, %mask {scale = 5.000000e-01 : f64} : (tensor<1x2x1x4xf32>, tensor<1x2x32x4xf32>, tensor<1x2x32x4xf32>, tensor<1x1x1x32xf32>) -> tensor<1x2x1x4xf32>
  func.return %a, %k2, %v2 : tensor<1x2x1x4xf32>, tensor<1x2x32x4xf32>, tensor<1x2x32x4xf32>
}

// -----

// Negative: the written keys are read by another op too (the fused op would not
// hand them out).
// CHECK-LABEL: func.func @written_cache_read
// CHECK-NOT:     npu.cached_attention
// CHECK:         npu.sdpa
func.func @written_cache_read(%q: tensor<1x2x1x4xf32>, %k: tensor<1x2x1x4xf32>, %v: tensor<1x2x1x4xf32>, %pos: tensor<1xi64>, %kc: tensor<1x2x32x4xf32>, %vc: tensor<1x2x32x4xf32>) -> (tensor<1x2x1x4xf32>, tensor<1x2x32x4xf32>, tensor<1x2x32x4xf32>, tensor<1x2x32x4xf32>) attributes {npu.writes = ["kc", "vc"]} {
  %first = npu.generic "aten.select.int"(%pos, 0 : i64, 0 : i64) : (tensor<1xi64>) -> tensor<i64>
  %offsets = npu.constant dense<[0]> : tensor<1xi64>
  %rows = npu.add %offsets, %first : (tensor<1xi64>, tensor<i64>) -> tensor<1xi64>
  %r2 = npu.unsqueeze %rows {dim = 0 : i64} : tensor<1xi64> -> tensor<1x1xi64>
  %r3 = npu.unsqueeze %r2 {dim = 1 : i64} : tensor<1x1xi64> -> tensor<1x1x1xi64>
  %r4 = npu.unsqueeze %r3 {dim = 3 : i64} : tensor<1x1x1xi64> -> tensor<1x1x1x1xi64>
  %cols = npu.constant dense<[[[[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31]]]]> : tensor<1x1x1x32xi64>
  %seen = npu.le %cols, %r4 : (tensor<1x1x1x32xi64>, tensor<1x1x1x1xi64>) -> tensor<1x1x1x32xi1>
  %zero = npu.constant dense<0.000000e+00> : tensor<f32>
  %mask = npu.where %seen, %zero {scalar = -3.4028234663852886e+38 : f64} : (tensor<1x1x1x32xi1>, tensor<f32>) -> tensor<1x1x1x32xf32>
  %k2 = npu.cache_update %kc[%pos] = %k {dim = 2 : i64} : tensor<1x2x32x4xf32>, tensor<1xi64>, tensor<1x2x1x4xf32>
  %v2 = npu.cache_update %vc[%pos] = %v {dim = 2 : i64} : tensor<1x2x32x4xf32>, tensor<1xi64>, tensor<1x2x1x4xf32>
  %seen_keys = npu.exp %k2 : tensor<1x2x32x4xf32>
  %a = npu.sdpa %q, %k2, %v2, %mask {scale = 5.000000e-01 : f64} : (tensor<1x2x1x4xf32>, tensor<1x2x32x4xf32>, tensor<1x2x32x4xf32>, tensor<1x1x1x32xf32>) -> tensor<1x2x1x4xf32>
  func.return %a, %seen_keys, %k2, %v2 : tensor<1x2x1x4xf32>, tensor<1x2x32x4xf32>, tensor<1x2x32x4xf32>, tensor<1x2x32x4xf32>
}

// -----

// Negative: the caches are written at other positions than the mask's.
// CHECK-LABEL: func.func @other_positions
// CHECK-NOT:     npu.cached_attention
// CHECK:         npu.sdpa
func.func @other_positions(%q: tensor<1x2x1x4xf32>, %k: tensor<1x2x1x4xf32>, %v: tensor<1x2x1x4xf32>, %pos: tensor<1xi64>, %pos2: tensor<1xi64>, %kc: tensor<1x2x32x4xf32>, %vc: tensor<1x2x32x4xf32>) -> (tensor<1x2x1x4xf32>, tensor<1x2x32x4xf32>, tensor<1x2x32x4xf32>) attributes {npu.writes = ["kc", "vc"]} {
  %first = npu.generic "aten.select.int"(%pos, 0 : i64, 0 : i64) : (tensor<1xi64>) -> tensor<i64>
  %offsets = npu.constant dense<[0]> : tensor<1xi64>
  %rows = npu.add %offsets, %first : (tensor<1xi64>, tensor<i64>) -> tensor<1xi64>
  %r2 = npu.unsqueeze %rows {dim = 0 : i64} : tensor<1xi64> -> tensor<1x1xi64>
  %r3 = npu.unsqueeze %r2 {dim = 1 : i64} : tensor<1x1xi64> -> tensor<1x1x1xi64>
  %r4 = npu.unsqueeze %r3 {dim = 3 : i64} : tensor<1x1x1xi64> -> tensor<1x1x1x1xi64>
  %cols = npu.constant dense<[[[[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31]]]]> : tensor<1x1x1x32xi64>
  %seen = npu.le %cols, %r4 : (tensor<1x1x1x32xi64>, tensor<1x1x1x1xi64>) -> tensor<1x1x1x32xi1>
  %zero = npu.constant dense<0.000000e+00> : tensor<f32>
  %mask = npu.where %seen, %zero {scalar = -3.4028234663852886e+38 : f64} : (tensor<1x1x1x32xi1>, tensor<f32>) -> tensor<1x1x1x32xf32>
  %k2 = npu.cache_update %kc[%pos2] = %k {dim = 2 : i64} : tensor<1x2x32x4xf32>, tensor<1xi64>, tensor<1x2x1x4xf32>
  %v2 = npu.cache_update %vc[%pos2] = %v {dim = 2 : i64} : tensor<1x2x32x4xf32>, tensor<1xi64>, tensor<1x2x1x4xf32>
  %a = npu.sdpa %q, %k2, %v2, %mask {scale = 5.000000e-01 : f64} : (tensor<1x2x1x4xf32>, tensor<1x2x32x4xf32>, tensor<1x2x32x4xf32>, tensor<1x1x1x32xf32>) -> tensor<1x2x1x4xf32>
  func.return %a, %k2, %v2 : tensor<1x2x1x4xf32>, tensor<1x2x32x4xf32>, tensor<1x2x32x4xf32>
}

// -----

// Negative: an f16 cache (the paged node's caches are f32 here).
// CHECK-LABEL: func.func @f16_cache
// CHECK-NOT:     npu.cached_attention
// CHECK:         npu.sdpa
func.func @f16_cache(%q: tensor<1x2x1x4xf16>, %k: tensor<1x2x1x4xf16>, %v: tensor<1x2x1x4xf16>, %pos: tensor<1xi64>, %kc: tensor<1x2x32x4xf16>, %vc: tensor<1x2x32x4xf16>) -> (tensor<1x2x1x4xf16>, tensor<1x2x32x4xf16>, tensor<1x2x32x4xf16>) attributes {npu.writes = ["kc", "vc"]} {
  %first = npu.generic "aten.select.int"(%pos, 0 : i64, 0 : i64) : (tensor<1xi64>) -> tensor<i64>
  %offsets = npu.constant dense<[0]> : tensor<1xi64>
  %rows = npu.add %offsets, %first : (tensor<1xi64>, tensor<i64>) -> tensor<1xi64>
  %r2 = npu.unsqueeze %rows {dim = 0 : i64} : tensor<1xi64> -> tensor<1x1xi64>
  %r3 = npu.unsqueeze %r2 {dim = 1 : i64} : tensor<1x1xi64> -> tensor<1x1x1xi64>
  %r4 = npu.unsqueeze %r3 {dim = 3 : i64} : tensor<1x1x1xi64> -> tensor<1x1x1x1xi64>
  %cols = npu.constant dense<[[[[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31]]]]> : tensor<1x1x1x32xi64>
  %seen = npu.le %cols, %r4 : (tensor<1x1x1x32xi64>, tensor<1x1x1x1xi64>) -> tensor<1x1x1x32xi1>
  %zero = npu.constant dense<0.000000e+00> : tensor<f16>
  %mask = npu.where %seen, %zero {scalar = -3.4028234663852886e+38 : f64} : (tensor<1x1x1x32xi1>, tensor<f16>) -> tensor<1x1x1x32xf16>
  %k2 = npu.cache_update %kc[%pos] = %k {dim = 2 : i64} : tensor<1x2x32x4xf16>, tensor<1xi64>, tensor<1x2x1x4xf16>
  %v2 = npu.cache_update %vc[%pos] = %v {dim = 2 : i64} : tensor<1x2x32x4xf16>, tensor<1xi64>, tensor<1x2x1x4xf16>
  %a = npu.sdpa %q, %k2, %v2, %mask {scale = 5.000000e-01 : f64} : (tensor<1x2x1x4xf16>, tensor<1x2x32x4xf16>, tensor<1x2x32x4xf16>, tensor<1x1x1x32xf16>) -> tensor<1x2x1x4xf16>
  func.return %a, %k2, %v2 : tensor<1x2x1x4xf16>, tensor<1x2x32x4xf16>, tensor<1x2x32x4xf16>
}
