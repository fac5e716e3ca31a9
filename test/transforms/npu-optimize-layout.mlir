// npu-optimize-layout: npu.contiguous goes where a strided view feeds an op that wants a
// dense input, and copies that buy nothing are merged or dropped.
// Prefixes: CHECK all modes; NATIVE auto and channels-last (transposed-B matmul is native);
// CONTIG layout=contiguous; NOCL / CL conv2d without / with channels-last.

// RUN: forge-opt %s -p npu-optimize-layout | filecheck %s --check-prefixes=CHECK,NATIVE,NOCL
// RUN: forge-opt %s -p "npu-optimize-layout{layout=auto}" | filecheck %s --check-prefixes=CHECK,NATIVE,NOCL
// RUN: forge-opt %s -p "npu-optimize-layout{layout=contiguous}" | filecheck %s --check-prefixes=CHECK,CONTIG,NOCL
// RUN: forge-opt %s -p "npu-optimize-layout{layout=channels-last}" | filecheck %s --check-prefixes=CHECK,NATIVE,CL

// The result is a fixed point: a second run rewrites nothing.
// RUN: forge-opt %s -p "npu-optimize-layout,npu-optimize-layout" --pass-statistics -o %t 2>&1 | filecheck %s --check-prefix=STATS
// RUN: forge-opt %s -p "npu-optimize-layout{layout=contiguous},npu-optimize-layout{layout=contiguous}" --pass-statistics -o %t 2>&1 | filecheck %s --check-prefix=STATS
// RUN: forge-opt %s -p "npu-optimize-layout{layout=channels-last},npu-optimize-layout{layout=channels-last}" --pass-statistics -o %t 2>&1 | filecheck %s --check-prefix=STATS
// STATS:      npu-optimize-layout {{ +[1-9][0-9]* }}
// STATS-NEXT: npu-optimize-layout {{ +0 }}

// Other layouts are rejected with one line.
// RUN: not forge-opt %s -p "npu-optimize-layout{layout=bogus}" 2>&1 | filecheck %s --check-prefix=BOGUS
// BOGUS:      forge-opt: error: invalid pass pipeline 'npu-optimize-layout{layout=bogus}': layout must be one of auto, contiguous, channels-last, got 'bogus'
// BOGUS-NOT:  Traceback

// A strided view feeding an op that wants dense input gets a copy.
// CHECK-LABEL: func.func @transpose_softmax
// CHECK:         %t = npu.transpose %x
// CHECK-NEXT:    %[[C:.*]] = npu.contiguous %t : tensor<2x4x3xf32>
// CHECK-NEXT:    npu.softmax %[[C]] {dim = -1 : i64}
func.func @transpose_softmax(%x: tensor<2x3x4xf32>) -> tensor<2x4x3xf32> {
  %t = npu.transpose %x {dim0 = 1 : i64, dim1 = 2 : i64} : tensor<2x3x4xf32> -> tensor<2x4x3xf32>
  %s = npu.softmax %t {dim = -1 : i64} : tensor<2x4x3xf32>
  func.return %s : tensor<2x4x3xf32>
}

// CHECK-LABEL: func.func @transpose_matmul_lhs
// CHECK:         %q = npu.transpose %x
// CHECK-NEXT:    %[[C:.*]] = npu.contiguous %q : tensor<1x2x8x4xf32>
// CHECK-NEXT:    npu.matmul %[[C]], %w :
func.func @transpose_matmul_lhs(%x: tensor<1x8x2x4xf32>, %w: tensor<1x2x4x8xf32>) -> tensor<1x2x8x8xf32> {
  %q = npu.transpose %x {dim0 = 1 : i64, dim1 = 2 : i64} : tensor<1x8x2x4xf32> -> tensor<1x2x8x4xf32>
  %m = npu.matmul %q, %w : (tensor<1x2x8x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x8x8xf32>
  func.return %m : tensor<1x2x8x8xf32>
}

// CHECK-LABEL: func.func @permute_layer_norm
// CHECK:         %p = npu.permute %x
// CHECK-NEXT:    %[[C:.*]] = npu.contiguous %p : tensor<3x4x2xf32>
// CHECK-NEXT:    npu.layer_norm %[[C]] weight %g
func.func @permute_layer_norm(%x: tensor<2x4x3xf32>, %g: tensor<2xf32>) -> tensor<3x4x2xf32> {
  %p = npu.permute %x {dims = array<i64: 2, 1, 0>} : tensor<2x4x3xf32> -> tensor<3x4x2xf32>
  %n = npu.layer_norm %p weight %g : tensor<2xf32> {normalized_shape = array<i64: 2>, eps = 1.000000e-05 : f64} : tensor<3x4x2xf32> -> tensor<3x4x2xf32>
  func.return %n : tensor<3x4x2xf32>
}

// One copy per value, placed after the definition and shared by every consumer.
// CHECK-LABEL: func.func @shared_copy
// CHECK:         %t = npu.transpose %x
// CHECK-NEXT:    %[[C:.*]] = npu.contiguous %t
// CHECK-NEXT:    npu.exp %[[C]]
// CHECK-NEXT:    npu.softmax %[[C]]
// CHECK-NEXT:    func.return
func.func @shared_copy(%x: tensor<2x3x4xf32>) -> (tensor<2x4x3xf32>, tensor<2x4x3xf32>) {
  %t = npu.transpose %x {dim0 = 1 : i64, dim1 = 2 : i64} : tensor<2x3x4xf32> -> tensor<2x4x3xf32>
  %e = npu.exp %t : tensor<2x4x3xf32>
  %s = npu.softmax %t {dim = -1 : i64} : tensor<2x4x3xf32>
  func.return %e, %s : tensor<2x4x3xf32>, tensor<2x4x3xf32>
}

// Slices: a step or a non-leading dim makes a strided view; the leading dim does not.
// CHECK-LABEL: func.func @slices
// CHECK:         %last = npu.slice %x {dim = 1 : i64
// CHECK-NEXT:    %[[A:.*]] = npu.contiguous %last
// CHECK-NEXT:    npu.neg %[[A]]
// CHECK-NEXT:    %lead = npu.slice %x {dim = 0 : i64
// CHECK-NEXT:    npu.neg %lead
// CHECK-NEXT:    %strided = npu.slice %x {dim = 0 : i64, start = 0 : i64, end = 4 : i64, step = 2 : i64}
// CHECK-NEXT:    %[[B:.*]] = npu.contiguous %strided
// CHECK-NEXT:    npu.neg %[[B]]
func.func @slices(%x: tensor<4x6xf32>) -> (tensor<4x3xf32>, tensor<2x6xf32>, tensor<2x6xf32>) {
  %last = npu.slice %x {dim = 1 : i64, start = 0 : i64, end = 3 : i64, step = 1 : i64} : tensor<4x6xf32> -> tensor<4x3xf32>
  %a = npu.neg %last : tensor<4x3xf32>
  %lead = npu.slice %x {dim = 0 : i64, start = 1 : i64, end = 3 : i64, step = 1 : i64} : tensor<4x6xf32> -> tensor<2x6xf32>
  %b = npu.neg %lead : tensor<2x6xf32>
  %strided = npu.slice %x {dim = 0 : i64, start = 0 : i64, end = 4 : i64, step = 2 : i64} : tensor<4x6xf32> -> tensor<2x6xf32>
  %c = npu.neg %strided : tensor<2x6xf32>
  func.return %a, %b, %c : tensor<4x3xf32>, tensor<2x6xf32>, tensor<2x6xf32>
}

// An expand that broadcasts is strided (stride 0); one that keeps the shape is not.
// CHECK-LABEL: func.func @expands
// CHECK:         %b = npu.expand %x : tensor<1x4xf32> -> tensor<3x4xf32>
// CHECK-NEXT:    %[[C:.*]] = npu.contiguous %b
// CHECK-NEXT:    npu.add %[[C]], %y
// CHECK-NEXT:    %same = npu.expand %x : tensor<1x4xf32> -> tensor<1x4xf32>
// CHECK-NEXT:    npu.exp %same
func.func @expands(%x: tensor<1x4xf32>, %y: tensor<3x4xf32>) -> (tensor<3x4xf32>, tensor<1x4xf32>) {
  %b = npu.expand %x : tensor<1x4xf32> -> tensor<3x4xf32>
  %s = npu.add %b, %y : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  %same = npu.expand %x : tensor<1x4xf32> -> tensor<1x4xf32>
  %t = npu.exp %same : tensor<1x4xf32>
  func.return %s, %t : tensor<3x4xf32>, tensor<1x4xf32>
}

// contiguous(contiguous(x)) is contiguous(x).
// CHECK-LABEL: func.func @double_contiguous
// CHECK:         %t = npu.transpose %x
// CHECK-NEXT:    %c0 = npu.contiguous %t
// CHECK-NEXT:    npu.view %c0 : tensor<3x2x4xf32> -> tensor<2x12xf32>
func.func @double_contiguous(%x: tensor<2x3x4xf32>) -> tensor<2x12xf32> {
  %t = npu.transpose %x {dim0 = 0 : i64, dim1 = 1 : i64} : tensor<2x3x4xf32> -> tensor<3x2x4xf32>
  %c0 = npu.contiguous %t : tensor<3x2x4xf32>
  %c1 = npu.contiguous %c0 : tensor<3x2x4xf32>
  %v = npu.view %c1 : tensor<3x2x4xf32> -> tensor<2x12xf32>
  func.return %v : tensor<2x12xf32>
}

// A linear writes a dense result: copying it is a no-op.
// CHECK-LABEL: func.func @contiguous_of_linear
// CHECK:         %y = npu.linear %x, %w
// CHECK-NEXT:    npu.view %y : tensor<2x8xf32> -> tensor<16xf32>
func.func @contiguous_of_linear(%x: tensor<2x4xf32>, %w: tensor<8x4xf32>) -> tensor<16xf32> {
  %y = npu.linear %x, %w : (tensor<2x4xf32>, tensor<8x4xf32>) -> tensor<2x8xf32>
  %c = npu.contiguous %y : tensor<2x8xf32>
  %v = npu.view %c : tensor<2x8xf32> -> tensor<16xf32>
  func.return %v : tensor<16xf32>
}

// Two copies of one value are one.
// CHECK-LABEL: func.func @duplicate_contiguous
// CHECK:         %c0 = npu.contiguous %t
// CHECK-NEXT:    npu.view %c0
// CHECK-NEXT:    npu.exp %c0
// CHECK-NEXT:    func.return
func.func @duplicate_contiguous(%x: tensor<2x3xf32>) -> (tensor<6xf32>, tensor<3x2xf32>) {
  %t = npu.transpose %x {dim0 = 0 : i64, dim1 = 1 : i64} : tensor<2x3xf32> -> tensor<3x2xf32>
  %c0 = npu.contiguous %t : tensor<3x2xf32>
  %v = npu.view %c0 : tensor<3x2xf32> -> tensor<6xf32>
  %c1 = npu.contiguous %t : tensor<3x2xf32>
  %e = npu.exp %c1 : tensor<3x2xf32>
  func.return %v, %e : tensor<6xf32>, tensor<3x2xf32>
}

// A copy a view needs (its input is strided) stays.
// CHECK-LABEL: func.func @needed_contiguous
// CHECK:         %c = npu.contiguous %t
// CHECK-NEXT:    npu.view %c
func.func @needed_contiguous(%x: tensor<1x4x2x8xf32>) -> tensor<1x2x32xf32> {
  %t = npu.transpose %x {dim0 = 1 : i64, dim1 = 2 : i64} : tensor<1x4x2x8xf32> -> tensor<1x2x4x8xf32>
  %c = npu.contiguous %t : tensor<1x2x4x8xf32>
  %v = npu.view %c : tensor<1x2x4x8xf32> -> tensor<1x2x32xf32>
  func.return %v : tensor<1x2x32xf32>
}

// Negative: a strided value feeding view ops only, or views that end up dense again.
// CHECK-LABEL: func.func @views_only
// CHECK-NOT:     npu.contiguous
// CHECK:         func.return
func.func @views_only(%x: tensor<2x3x4xf32>) -> (tensor<2x4x1x3xf32>, tensor<2x3x4xf32>) {
  %t = npu.transpose %x {dim0 = 1 : i64, dim1 = 2 : i64} : tensor<2x3x4xf32> -> tensor<2x4x3xf32>
  %u = npu.unsqueeze %t {dim = 2 : i64} : tensor<2x4x3xf32> -> tensor<2x4x1x3xf32>
  %back = npu.transpose %t {dim0 = 1 : i64, dim1 = 2 : i64} : tensor<2x4x3xf32> -> tensor<2x3x4xf32>
  %s = npu.softmax %back {dim = -1 : i64} : tensor<2x3x4xf32>
  func.return %u, %s : tensor<2x4x1x3xf32>, tensor<2x3x4xf32>
}

// Negative: dense inputs (block arguments, compute results, reshapes that copy,
// transposes of a size-1 dim) need nothing.
// CHECK-LABEL: func.func @already_dense
// CHECK-NOT:     npu.contiguous
// CHECK:         func.return
func.func @already_dense(%x: tensor<2x3xf32>, %w: tensor<4x3xf32>, %y: tensor<1x4x3xf32>) -> (tensor<2x4xf32>, tensor<4x1x3xf32>, tensor<6xf32>) {
  %l = npu.linear %x, %w : (tensor<2x3xf32>, tensor<4x3xf32>) -> tensor<2x4xf32>
  %s = npu.softmax %l {dim = -1 : i64} : tensor<2x4xf32>
  %t = npu.transpose %y {dim0 = 0 : i64, dim1 = 1 : i64} : tensor<1x4x3xf32> -> tensor<4x1x3xf32>
  %e = npu.exp %t : tensor<4x1x3xf32>
  %xt = npu.transpose %x {dim0 = 0 : i64, dim1 = 1 : i64} : tensor<2x3xf32> -> tensor<3x2xf32>
  %r = npu.reshape %xt : tensor<3x2xf32> -> tensor<6xf32>
  %o = npu.neg %r : tensor<6xf32>
  func.return %s, %e, %o : tensor<2x4xf32>, tensor<4x1x3xf32>, tensor<6xf32>
}

// Transposed-B matmul: NNFactory runs matmul(a, b, False, True) natively, so auto
// copies nothing; layout=contiguous materializes b^T.
// CHECK-LABEL:  func.func @transposed_b(
// CHECK:          %bt = npu.transpose %b
// NATIVE-NEXT:    npu.matmul %a, %bt :
// CONTIG-NEXT:    %[[C:.*]] = npu.contiguous %bt
// CONTIG-NEXT:    npu.matmul %a, %[[C]] :
func.func @transposed_b(%a: tensor<1x2x8x4xf32>, %b: tensor<1x2x8x4xf32>) -> tensor<1x2x8x8xf32> {
  %bt = npu.transpose %b {dim0 = -1 : i64, dim1 = -2 : i64} : tensor<1x2x8x4xf32> -> tensor<1x2x4x8xf32>
  %m = npu.matmul %a, %bt : (tensor<1x2x8x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x8x8xf32>
  func.return %m : tensor<1x2x8x8xf32>
}

// GPT-2's q @ k^T before attention fusion: k's heads are strided. auto copies the heads
// (the transpose still feeds a transposed-B matmul); contiguous copies k^T.
// CHECK-LABEL:  func.func @transposed_b_of_strided
// CHECK:          %kh = npu.transpose %k4
// NATIVE-NEXT:    %[[C:.*]] = npu.contiguous %kh
// NATIVE-NEXT:    %kt = npu.transpose %[[C]] {dim0 = -1 : i64, dim1 = -2 : i64}
// NATIVE-NEXT:    npu.matmul %q, %kt :
// CONTIG-NEXT:    %kt = npu.transpose %kh {dim0 = -1 : i64, dim1 = -2 : i64}
// CONTIG-NEXT:    %[[C:.*]] = npu.contiguous %kt
// CONTIG-NEXT:    npu.matmul %q, %[[C]] :
func.func @transposed_b_of_strided(%q: tensor<1x2x8x4xf32>, %k: tensor<1x8x8xf32>) -> tensor<1x2x8x8xf32> {
  %k4 = npu.view %k : tensor<1x8x8xf32> -> tensor<1x8x2x4xf32>
  %kh = npu.transpose %k4 {dim0 = 1 : i64, dim1 = 2 : i64} : tensor<1x8x2x4xf32> -> tensor<1x2x8x4xf32>
  %kt = npu.transpose %kh {dim0 = -1 : i64, dim1 = -2 : i64} : tensor<1x2x8x4xf32> -> tensor<1x2x4x8xf32>
  %m = npu.matmul %q, %kt : (tensor<1x2x8x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x8x8xf32>
  func.return %m : tensor<1x2x8x8xf32>
}

// channels-last: a conv2d input gets NHWC memory (same NCHW value); other modes leave it.
// CHECK-LABEL: func.func @conv2d
// NOCL-NEXT:     npu.generic "aten.conv2d.default"(%x, %w)
// CL-NEXT:       %[[NHWC:.*]] = npu.permute %x {dims = array<i64: 0, 2, 3, 1>} : tensor<1x3x8x8xf32> -> tensor<1x8x8x3xf32>
// CL-NEXT:       %[[DENSE:.*]] = npu.contiguous %[[NHWC]] : tensor<1x8x8x3xf32>
// CL-NEXT:       %[[NCHW:.*]] = npu.permute %[[DENSE]] {dims = array<i64: 0, 3, 1, 2>} : tensor<1x8x8x3xf32> -> tensor<1x3x8x8xf32>
// CL-NEXT:       npu.generic "aten.conv2d.default"(%[[NCHW]], %w)
func.func @conv2d(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32> {
  %y = npu.generic "aten.conv2d.default"(%x, %w) : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  func.return %y : tensor<1x4x6x6xf32>
}

// Auto: a strided view of a value an NPU op computes stays a view (the NNFactory graph
// absorbs it); layout=contiguous copies it.
// CHECK-LABEL:   func.func @view_of_computed
// NATIVE:          %t = npu.transpose %y
// NATIVE-NEXT:     npu.softmax %t
// CONTIG:          %[[C:.*]] = npu.contiguous %t
// CONTIG-NEXT:     npu.softmax %[[C]]
func.func @view_of_computed(%x: tensor<2x3x4xf32>) -> tensor<2x4x3xf32> {
  %y = npu.exp %x : tensor<2x3x4xf32>
  %t = npu.transpose %y {dim0 = 1 : i64, dim1 = 2 : i64} : tensor<2x3x4xf32> -> tensor<2x4x3xf32>
  %s = npu.softmax %t {dim = -1 : i64} : tensor<2x4x3xf32>
  func.return %s : tensor<2x4x3xf32>
}

// A copy that only reshapes read is dropped: reshape copies by itself when it must.
// CHECK-LABEL:   func.func @copy_before_reshape
// CHECK:           %t = npu.transpose %x
// CHECK-NEXT:      npu.reshape %t : tensor<2x4x3xf32> -> tensor<2x12xf32>
func.func @copy_before_reshape(%x: tensor<2x3x4xf32>) -> tensor<2x12xf32> {
  %t = npu.transpose %x {dim0 = 1 : i64, dim1 = 2 : i64} : tensor<2x3x4xf32> -> tensor<2x4x3xf32>
  %c = npu.contiguous %t : tensor<2x4x3xf32>
  %r = npu.reshape %c : tensor<2x4x3xf32> -> tensor<2x12xf32>
  func.return %r : tensor<2x12xf32>
}
