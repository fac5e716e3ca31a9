// The two programs `forge generate` compiles, as `forge import --program` captures them
// (tiny GPT-2: 2 layers, a cache of 16 positions, prefills of 4 tokens). The KV cache is
// state: function arguments that `npu.writes` names. forge-pipeline writes each step
// into them in place (`npu.cache_update`, no buffer of its own: it is the caller's
// cache) and fuses the attention that reads the updated cache into one `npu.sdpa` per
// layer, in the decode step (1 query row against the 16-row cache) and in the prefill.
// In both the attention reads the caches before their writes (npu-attend-before-write),
// so each program is one graph followed by the writes.

// RUN: forge import gpt2 --tiny --program decode --capacity 16 --prompt-capacity 4 -o %t.decode.mlir 2>/dev/null
// RUN: forge-opt %t.decode.mlir -p forge-pipeline | filecheck %s --check-prefix=DECODE
// RUN: forge import gpt2 --tiny --program prefill --capacity 16 --prompt-capacity 4 -o %t.prefill.mlir 2>/dev/null
// RUN: forge-opt %t.prefill.mlir -p forge-pipeline | filecheck %s --check-prefix=PREFILL
// The imported IR still says it functionally: an index_copy whose result is written back.
// RUN: filecheck %s --check-prefix=IMPORTED < %t.decode.mlir

// IMPORTED: func.func @forward(%input_ids: tensor<1x1xi64>, %cache_position: tensor<1xi64>,
// IMPORTED-SAME: npu.writes = ["key_cache.0", "value_cache.0", "key_cache.1", "value_cache.1", "cache_length"]
// IMPORTED: npu.generic "aten.index_copy.default"(%key_cache.0, 2 : i64,

// DECODE: func.func @forward(%input_ids: tensor<1x1xi64>, %cache_position: tensor<1xi64>,
// The attention reads each cache before its write, the new row selected in
// (npu-attend-before-write), so the two writes per layer come after all the NPU work.
// DECODE: npu.cast %{{.*}} {device = "cpu"{{.*}}} : tensor<1xi64> -> tensor<1xf32>
// DECODE: npu.mul %key_cache.0, %{{.*}} {device = "npu"
// DECODE: npu.sdpa %{{.*}} {device = "npu"{{.*}}} : (tensor<1x4x1x16xf32>, tensor<1x4x16x16xf32>, tensor<1x4x16x16xf32>, tensor<1x1x1x16xf32>) -> tensor<1x4x1x16xf32>
// DECODE: npu.sdpa
// DECODE-NOT: npu.sdpa
// DECODE-NOT: aten.index_copy
// DECODE: npu.linear
// DECODE-NEXT: npu.cache_update %key_cache.0[%{{.*}}] = %{{.*}} {device = "cpu", vreg = {{[0-9]+}} : i64, live = array<i64: {{.*}}>, dead_after = array<i64: {{.*}}>, dim = 2 : i64} : tensor<1x4x16x16xf32>, tensor<1xi64>, tensor<1x4x1x16xf32>
// DECODE-NEXT: npu.cache_update %value_cache.0
// DECODE-NEXT: npu.cache_update %key_cache.1
// DECODE-NEXT: npu.cache_update %value_cache.1
// DECODE: func.return

// PREFILL: func.func @forward(%input_ids: tensor<1x4xi64>, %cache_position: tensor<4xi64>,
// The four new rows are placed by a [16, 4] selector MatMul; the row the logits are
// kept for is gathered in the graph too (npu.embedding over the chunk's hidden states).
// PREFILL: npu.matmul %{{.*}}, %{{.*}} {device = "npu"{{.*}}} : (tensor<16x4xf32>, tensor<1x4x4x16xf32>) -> tensor<1x4x16x16xf32>
// PREFILL: npu.sdpa %{{.*}} {device = "npu"{{.*}}} : (tensor<1x4x4x16xf32>, tensor<1x4x16x16xf32>, tensor<1x4x16x16xf32>, tensor<1x1x4x16xf32>) -> tensor<1x4x4x16xf32>
// PREFILL: npu.sdpa
// PREFILL-NOT: npu.sdpa
// PREFILL-NOT: aten.index_copy
// PREFILL: npu.embedding %{{.*}}, %logits_at {device = "npu"
// PREFILL: npu.cache_update %key_cache.0[%{{.*}}] = %{{.*}} {device = "cpu"{{.*}}} : tensor<1x4x16x16xf32>, tensor<4xi64>, tensor<1x4x4x16xf32>
// PREFILL-NEXT: npu.cache_update %value_cache.0
// PREFILL-NEXT: npu.cache_update %key_cache.1
// PREFILL-NEXT: npu.cache_update %value_cache.1
// PREFILL: func.return

// The plan forge-opt prints for the decode step (-t python) writes each cache in place
// after the graph, at the step's positions, on the aten overload the executor runs, then
// the one state write-back (the cache length every layer reads as its position).
// RUN: forge-opt %t.decode.mlir -p forge-pipeline -t python | filecheck %s --check-prefix=DECODE-PY
// DECODE-PY-LABEL: def run(input_ids, cache_position,
// DECODE-PY:      = seg0(
// DECODE-PY-NEXT: # cpu: npu.cache_update
// DECODE-PY-NEXT: v{{[0-9]+}} = torch.ops.aten.index_copy_.default(key_cache_0, 2, cache_position, v{{[0-9]+}})
// DECODE-PY-NEXT: # cpu: npu.cache_update
// DECODE-PY-NEXT: v{{[0-9]+}} = torch.ops.aten.index_copy_.default(value_cache_0, 2,
// DECODE-PY:      torch.ops.aten.index_copy_.default(value_cache_1, 2, cache_position,
// DECODE-PY-NEXT: cache_length.copy_(v{{[0-9]+}})  # npu.writes
// DECODE-PY-NEXT: return (v{{[0-9]+}},)

// An in-place update whose cache something reads after it breaks its contract: a located error.
// RUN: not forge-opt %S/Inputs/bad-cache-update.mlir 2>&1 | filecheck %s --check-prefix=BAD
// BAD: bad-cache-update.mlir:1:1: error: 'func.func' op npu.cache_update writes %c in place, but %c has readers after it
