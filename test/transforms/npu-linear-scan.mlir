// npu-linear-scan: Poletto-Sarkar over live intervals, typed buffers reused best-fit
// when their element type matches and they are large enough; views share their root's
// buffer; function arguments (inputs, weights) and views of them get none.

// RUN: forge-opt %s -p npu-assign-vregs,npu-liveness,npu-linear-scan --split-input-file | filecheck %s
// Alone, the pass numbers vregs and computes liveness itself, or reads `live` when given:
// RUN: forge-opt %s -p npu-linear-scan --split-input-file --verify-diagnostics | filecheck %s --check-prefix=ALONE

// Positive: interleaved lifetimes. An interval frees its buffer once it ends before the
// next start, so two buffers carry the chain; an op never writes over its own operand.
// CHECK-LABEL: func.func @reuse
// CHECK-NEXT:    %0 = npu.exp %x {vreg = 0 : i64, live = array<i64: 0, 1>, dead_after = array<i64>, buffer = 0 : i64}
// CHECK-NEXT:    %1 = npu.neg %0 {vreg = 1 : i64, live = array<i64: 1, 2>, dead_after = array<i64: 0>, buffer = 1 : i64}
// CHECK-NEXT:    %2 = npu.tanh %1 {vreg = 2 : i64, live = array<i64: 2, 3>, dead_after = array<i64: 1>, buffer = 0 : i64}
// CHECK-NEXT:    %3 = npu.sin %2 {vreg = 3 : i64, live = array<i64: 3, 4>, dead_after = array<i64: 2>, buffer = 1 : i64}
// CHECK-NEXT:    %4 = npu.cos %3 {vreg = 4 : i64, live = array<i64: 4, 5>, dead_after = array<i64: 3>, buffer = 0 : i64}
// ALONE-LABEL: func.func @reuse
// ALONE-NEXT:    %0 = npu.exp %x {vreg = 0 : i64, buffer = 0 : i64}
// ALONE-NEXT:    %1 = npu.neg %0 {vreg = 1 : i64, buffer = 1 : i64}
// ALONE-NEXT:    %2 = npu.tanh %1 {vreg = 2 : i64, buffer = 0 : i64}
// ALONE-NEXT:    %3 = npu.sin %2 {vreg = 3 : i64, buffer = 1 : i64}
// ALONE-NEXT:    %4 = npu.cos %3 {vreg = 4 : i64, buffer = 0 : i64}
func.func @reuse(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = npu.exp %x : tensor<4xf32>
  %1 = npu.neg %0 : tensor<4xf32>
  %2 = npu.tanh %1 : tensor<4xf32>
  %3 = npu.sin %2 : tensor<4xf32>
  %4 = npu.cos %3 : tensor<4xf32>
  func.return %4 : tensor<4xf32>
}

// -----

// Positive: a diamond x -> a, b -> c(a, b): c needs a third buffer, then d reuses a's.
// CHECK-LABEL: func.func @diamond
// CHECK-NEXT:    %a = npu.exp %x {{.*}}buffer = 0 : i64}
// CHECK-NEXT:    %b = npu.neg %x {{.*}}buffer = 1 : i64}
// CHECK-NEXT:    %c = npu.mul %a, %b {{.*}}buffer = 2 : i64}
// CHECK-NEXT:    %d = npu.exp %c {{.*}}buffer = 0 : i64}
func.func @diamond(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = npu.exp %x : tensor<4xf32>
  %b = npu.neg %x : tensor<4xf32>
  %c = npu.mul %a, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %d = npu.exp %c : tensor<4xf32>
  func.return %d : tensor<4xf32>
}

// -----

// Positive: views (transpose, eval-mode dropout) carry their root's buffer, and the root
// stays allocated until the views' last use (position 3), though its own `live` ends
// at 1. Negative: %2 cannot take buffer 0 while the transpose of %0 is live.
// CHECK-LABEL: func.func @view
// CHECK-NEXT:    %0 = npu.exp %x {vreg = 0 : i64, live = array<i64: 0, 1>, dead_after = array<i64>, buffer = 0 : i64}
// CHECK-NEXT:    %1 = npu.transpose %0 {vreg = 1 : i64, live = array<i64: 1, 2>, dead_after = array<i64: 0>, buffer = 0 : i64
// CHECK-NEXT:    %2 = npu.dropout %1 {vreg = 2 : i64, live = array<i64: 2, 4>, dead_after = array<i64: 1>, buffer = 0 : i64
// CHECK-NEXT:    %3 = npu.neg %x {vreg = 3 : i64, live = array<i64: 3, 4>, dead_after = array<i64>, buffer = 1 : i64}
// CHECK-NEXT:    %4 = npu.add %2, %3 {vreg = 4 : i64, live = array<i64: 4, 6>, dead_after = array<i64: 2, 3>, buffer = 2 : i64}
// CHECK-NEXT:    %5 = npu.exp %4 {vreg = 5 : i64, live = array<i64: 5, 6>, dead_after = array<i64>, buffer = 0 : i64}
func.func @view(%x: tensor<2x2xf32>) -> (tensor<2x2xf32>, tensor<2x2xf32>) {
  %0 = npu.exp %x : tensor<2x2xf32>
  %1 = npu.transpose %0 {dim0 = 0 : i64, dim1 = 1 : i64} : tensor<2x2xf32> -> tensor<2x2xf32>
  %2 = npu.dropout %1 {p = 1.000000e-01 : f64} : tensor<2x2xf32>
  %3 = npu.neg %x : tensor<2x2xf32>
  %4 = npu.add %2, %3 : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  %5 = npu.exp %4 : tensor<2x2xf32>
  func.return %4, %5 : tensor<2x2xf32>, tensor<2x2xf32>
}

// -----

// Positive: npu.split's pieces all share the root's buffer (one entry per result); the
// root is held until the last piece (%2) is used at %4; then %5 (8 bytes) takes the
// best fit of the two freed buffers: %3's (8 bytes), not the root's (16 bytes).
// CHECK-LABEL: func.func @split
// CHECK-NEXT:    %0 = npu.exp %x {{.*}}buffer = 0 : i64}
// CHECK-NEXT:    %1, %2 = npu.split %0 {{.*}}buffer = array<i64: 0, 0>
// CHECK-NEXT:    %3 = npu.neg %1 {{.*}}buffer = 1 : i64}
// CHECK-NEXT:    %4 = npu.mul %3, %2 {{.*}}buffer = 2 : i64}
// CHECK-NEXT:    %5 = npu.exp %4 {{.*}}buffer = 1 : i64}
func.func @split(%x: tensor<4xf32>) -> tensor<2xf32> {
  %0 = npu.exp %x : tensor<4xf32>
  %1, %2 = npu.split %0 {dim = 0 : i64, split_sizes = array<i64: 2, 2>} : tensor<4xf32> -> tensor<2xf32>, tensor<2xf32>
  %3 = npu.neg %1 : tensor<2xf32>
  %4 = npu.mul %3, %2 : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %5 = npu.exp %4 : tensor<2xf32>
  func.return %5 : tensor<2xf32>
}

// -----

// Positive: different sizes. %3 (4 bytes) takes the smallest free buffer that holds it
// (best fit: buffer 1, not the 32-byte buffer 0); %4 takes buffer 0; %5 (64 bytes) fits
// no free buffer and opens buffer 3.
// CHECK-LABEL: func.func @sizes
// CHECK-NEXT:    %0 = npu.exp %x {{.*}}buffer = 0 : i64}
// CHECK-NEXT:    %1 = npu.exp %y {{.*}}buffer = 1 : i64}
// CHECK-NEXT:    %2 = npu.add %0, %1 {{.*}}buffer = 2 : i64}
// CHECK-NEXT:    %3 = npu.neg %y {{.*}}buffer = 1 : i64}
// CHECK-NEXT:    %4 = npu.mul %2, %3 {{.*}}buffer = 0 : i64}
// CHECK-NEXT:    %5 = npu.exp %z {{.*}}buffer = 3 : i64}
func.func @sizes(%x: tensor<8xf32>, %y: tensor<1xf32>, %z: tensor<16xf32>) -> (tensor<8xf32>, tensor<16xf32>) {
  %0 = npu.exp %x : tensor<8xf32>
  %1 = npu.exp %y : tensor<1xf32>
  %2 = npu.add %0, %1 : (tensor<8xf32>, tensor<1xf32>) -> tensor<8xf32>
  %3 = npu.neg %y : tensor<1xf32>
  %4 = npu.mul %2, %3 : (tensor<8xf32>, tensor<1xf32>) -> tensor<8xf32>
  %5 = npu.exp %z : tensor<16xf32>
  func.return %4, %5 : tensor<8xf32>, tensor<16xf32>
}

// -----

// Negative: different element types never share a buffer, even at equal byte size: the
// i32 values open buffers 2 and 3 while f32 buffers 0 and 1 are free.
// CHECK-LABEL: func.func @dtypes
// CHECK-NEXT:    %0 = npu.exp %x {{.*}}buffer = 0 : i64}
// CHECK-NEXT:    %1 = npu.neg %0 {{.*}}buffer = 1 : i64}
// CHECK-NEXT:    %2 = npu.cast %1 {{.*}}buffer = 2 : i64}
// CHECK-NEXT:    %3 = npu.add %2, %2 {{.*}}buffer = 3 : i64}
func.func @dtypes(%x: tensor<4xf32>) -> tensor<4xi32> {
  %0 = npu.exp %x : tensor<4xf32>
  %1 = npu.neg %0 : tensor<4xf32>
  %2 = npu.cast %1 : tensor<4xf32> -> tensor<4xi32>
  %3 = npu.add %2, %2 : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
  func.return %3 : tensor<4xi32>
}

// -----

// Negative: a function result is never overwritten after its definition: %0 is only
// used by the return, yet buffer 0 is never reused.
// CHECK-LABEL: func.func @result_kept
// CHECK-NEXT:    %0 = npu.exp %x {vreg = 0 : i64, live = array<i64: 0, 5>, dead_after = array<i64>, buffer = 0 : i64}
// CHECK-NOT:     buffer = 0
// CHECK:         func.return %0, %4
func.func @result_kept(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %0 = npu.exp %x : tensor<4xf32>
  %1 = npu.neg %x : tensor<4xf32>
  %2 = npu.tanh %1 : tensor<4xf32>
  %3 = npu.sin %2 : tensor<4xf32>
  %4 = npu.cos %3 : tensor<4xf32>
  func.return %0, %4 : tensor<4xf32>, tensor<4xf32>
}

// -----

// Negative: weights and inputs are caller-owned: views of them (transpose, split) get no
// buffer, and only the values computed here are allocated.
// CHECK-LABEL: func.func @weights
// CHECK-NEXT:    %0 = npu.transpose %w {vreg = 0 : i64, live = array<i64: 0, 1>, dead_after = array<i64>, dim0 = 0 : i64, dim1 = 1 : i64}
// CHECK-NEXT:    %1 = npu.matmul %x, %0 {{.*}}buffer = 0 : i64}
// CHECK-NEXT:    %2, %3 = npu.split %w {vreg = 2 : i64, live = array<i64: 2, 3, 2, 2>, dead_after = array<i64: 3>, dim = 0 : i64
// CHECK-NEXT:    %4 = npu.linear %x, %2 {{.*}}buffer = 1 : i64}
func.func @weights(%x: tensor<2x3xf32>, %w: tensor<4x3xf32>) -> (tensor<2x4xf32>, tensor<2x2xf32>) {
  %0 = npu.transpose %w {dim0 = 0 : i64, dim1 = 1 : i64} : tensor<4x3xf32> -> tensor<3x4xf32>
  %1 = npu.matmul %x, %0 : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
  %2, %3 = npu.split %w {dim = 0 : i64, split_sizes = array<i64: 2, 2>} : tensor<4x3xf32> -> tensor<2x3xf32>, tensor<2x3xf32>
  %4 = npu.linear %x, %2 : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x2xf32>
  func.return %1, %4 : tensor<2x4xf32>, tensor<2x2xf32>
}

// -----

// Negative: a value of dynamic size gets a buffer of its own that nothing reuses, not
// even another dynamic value of the same element type once it is dead.
// CHECK-LABEL: func.func @dynamic
// CHECK-NEXT:    %0 = npu.exp %x {{.*}}buffer = 0 : i64}
// CHECK-NEXT:    %1 = npu.neg %0 {{.*}}buffer = 1 : i64}
// CHECK-NEXT:    %2 = npu.tanh %1 {{.*}}buffer = 2 : i64}
// CHECK-NEXT:    %3 = npu.exp %y {{.*}}buffer = 3 : i64}
func.func @dynamic(%x: tensor<?xf32>, %y: tensor<4xf32>) -> (tensor<?xf32>, tensor<4xf32>) {
  %0 = npu.exp %x : tensor<?xf32>
  %1 = npu.neg %0 : tensor<?xf32>
  %2 = npu.tanh %1 : tensor<?xf32>
  %3 = npu.exp %y : tensor<4xf32>
  func.return %2, %3 : tensor<?xf32>, tensor<4xf32>
}

// -----

// Given `live`, the pass honours an interval lengthened on purpose (%0 pinned to 3:
// %2 cannot take its buffer) ...
// ALONE-LABEL: func.func @pinned
// ALONE-NEXT:    %0 = npu.exp %x {vreg = 0 : i64, live = array<i64: 0, 3>, buffer = 0 : i64}
// ALONE-NEXT:    %1 = npu.neg %0 {vreg = 1 : i64, live = array<i64: 1, 2>, buffer = 1 : i64}
// ALONE-NEXT:    %2 = npu.tanh %1 {vreg = 2 : i64, live = array<i64: 2, 3>, buffer = 2 : i64}
func.func @pinned(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = npu.exp %x {vreg = 0 : i64, live = array<i64: 0, 3>} : tensor<4xf32>
  %1 = npu.neg %0 {vreg = 1 : i64, live = array<i64: 1, 2>} : tensor<4xf32>
  %2 = npu.tanh %1 {vreg = 2 : i64, live = array<i64: 2, 3>} : tensor<4xf32>
  func.return %2 : tensor<4xf32>
}

// -----

// ... but rejects one that ends before the value's last use (stale after a reordering).
func.func @stale(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = npu.exp %x {vreg = 0 : i64, live = array<i64: 0, 1>} : tensor<4xf32>
  // expected-error@+1 {{'npu.neg' op vreg 1 has live = [1, 1] but is defined at 1 and last used at 2; rerun npu-liveness}}
  %1 = npu.neg %0 {vreg = 1 : i64, live = array<i64: 1, 1>} : tensor<4xf32>
  %2 = npu.tanh %1 {vreg = 2 : i64, live = array<i64: 2, 3>} : tensor<4xf32>
  func.return %2 : tensor<4xf32>
}
