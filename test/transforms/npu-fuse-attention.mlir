// npu-fuse-attention turns `softmax(q @ k^T * scale + mask) @ v` into one npu.sdpa:
// the scale (mul/div, either side of the mask, or on q before the matmul) becomes the
// explicit `scale`, additive and `where` masks become sdpa's float mask, eval dropout and
// identity casts are looked through, and repeat_kv is unwrapped so sdpa does the GQA.

// RUN: forge-opt %s -p npu-fuse-attention --split-input-file | filecheck %s

// Positive: GPT-2 style, `where(keep, scores * c, min)` with eval dropout and an identity
// cast. The boolean mask becomes the additive `where(keep, 0, min)`.
// CHECK-LABEL: func.func @gpt2_where_mul
// CHECK-NEXT:    [[ZERO:%.*]] = npu.constant dense<0.000000e+00> : tensor<f32>
// CHECK-NEXT:    [[MASK:%.*]] = npu.where %keep, [[ZERO]] {scalar = -3.4028234663852886e+38 : f64} : (tensor<1x1x8x8xi1>, tensor<f32>) -> tensor<1x1x8x8xf32>
// CHECK-NEXT:    [[OUT:%.*]] = npu.sdpa %q, %k, %v, [[MASK]] {scale = 2.500000e-01 : f64} : (tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x1x8x8xf32>) -> tensor<1x2x8x16xf32>
// CHECK-NEXT:    func.return [[OUT]] : tensor<1x2x8x16xf32>
// CHECK-NOT:     npu.transpose
// CHECK-NOT:     npu.matmul
// CHECK-NOT:     npu.softmax
// CHECK-NOT:     npu.dropout
// CHECK-NOT:     npu.cast
func.func @gpt2_where_mul(%q: tensor<1x2x8x16xf32>, %k: tensor<1x2x8x16xf32>, %v: tensor<1x2x8x16xf32>, %keep: tensor<1x1x8x8xi1>) -> tensor<1x2x8x16xf32> {
  %kt = npu.transpose %k {dim0 = -1 : i64, dim1 = -2 : i64} : tensor<1x2x8x16xf32> -> tensor<1x2x16x8xf32>
  %s = npu.matmul %q, %kt : (tensor<1x2x8x16xf32>, tensor<1x2x16x8xf32>) -> tensor<1x2x8x8xf32>
  %scaled = npu.mul %s {scalar = 2.500000e-01 : f64} : (tensor<1x2x8x8xf32>) -> tensor<1x2x8x8xf32>
  %masked = npu.where %keep, %scaled {scalar = -3.4028234663852886e+38 : f64} : (tensor<1x1x8x8xi1>, tensor<1x2x8x8xf32>) -> tensor<1x2x8x8xf32>
  %p = npu.softmax %masked {dim = -1 : i64} : tensor<1x2x8x8xf32>
  %d = npu.dropout %p {p = 1.000000e-01 : f64} : tensor<1x2x8x8xf32>
  %c = npu.cast %d : tensor<1x2x8x8xf32> -> tensor<1x2x8x8xf32>
  %o = npu.matmul %c, %v : (tensor<1x2x8x8xf32>, tensor<1x2x8x16xf32>) -> tensor<1x2x8x16xf32>
  func.return %o : tensor<1x2x8x16xf32>
}

// -----

// Positive: Llama/Qwen2 style GQA. repeat_kv (unsqueeze, expand, reshape) is unwrapped on
// k and v, so sdpa gets 2 kv heads for 4 query heads; the additive 1x1xSxS mask comes
// through a slice and is passed as it is. The whole chain and the expansions go.
// CHECK-LABEL: func.func @llama_gqa
// CHECK-NEXT:    %mask = npu.slice %full {dim = 3 : i64, start = 0 : i64, end = 8 : i64, step = 1 : i64} : tensor<1x1x8x16xf32> -> tensor<1x1x8x8xf32>
// CHECK-NEXT:    [[OUT:%.*]] = npu.sdpa %q, %k, %v, %mask {scale = 2.500000e-01 : f64} : (tensor<1x4x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x1x8x8xf32>) -> tensor<1x4x8x16xf32>
// CHECK-NEXT:    func.return [[OUT]] : tensor<1x4x8x16xf32>
// CHECK-NOT:     npu.unsqueeze
// CHECK-NOT:     npu.expand
// CHECK-NOT:     npu.reshape
func.func @llama_gqa(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x8x16xf32>, %v: tensor<1x2x8x16xf32>, %full: tensor<1x1x8x16xf32>) -> tensor<1x4x8x16xf32> {
  %mask = npu.slice %full {dim = 3 : i64, start = 0 : i64, end = 8 : i64, step = 1 : i64} : tensor<1x1x8x16xf32> -> tensor<1x1x8x8xf32>
  %k5 = npu.unsqueeze %k {dim = 2 : i64} : tensor<1x2x8x16xf32> -> tensor<1x2x1x8x16xf32>
  %ke = npu.expand %k5 : tensor<1x2x1x8x16xf32> -> tensor<1x2x2x8x16xf32>
  %kr = npu.reshape %ke : tensor<1x2x2x8x16xf32> -> tensor<1x4x8x16xf32>
  %v5 = npu.unsqueeze %v {dim = 2 : i64} : tensor<1x2x8x16xf32> -> tensor<1x2x1x8x16xf32>
  %ve = npu.expand %v5 : tensor<1x2x1x8x16xf32> -> tensor<1x2x2x8x16xf32>
  %vr = npu.reshape %ve : tensor<1x2x2x8x16xf32> -> tensor<1x4x8x16xf32>
  %kt = npu.transpose %kr {dim0 = 2 : i64, dim1 = 3 : i64} : tensor<1x4x8x16xf32> -> tensor<1x4x16x8xf32>
  %s = npu.matmul %q, %kt : (tensor<1x4x8x16xf32>, tensor<1x4x16x8xf32>) -> tensor<1x4x8x8xf32>
  %scaled = npu.mul %s {scalar = 2.500000e-01 : f64} : (tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  %masked = npu.add %scaled, %mask : (tensor<1x4x8x8xf32>, tensor<1x1x8x8xf32>) -> tensor<1x4x8x8xf32>
  %p = npu.softmax %masked {dim = -1 : i64} : tensor<1x4x8x8xf32>
  %c = npu.cast %p : tensor<1x4x8x8xf32> -> tensor<1x4x8x8xf32>
  %d = npu.dropout %c {p = 0.000000e+00 : f64} : tensor<1x4x8x8xf32>
  %o = npu.matmul %d, %vr : (tensor<1x4x8x8xf32>, tensor<1x4x8x16xf32>) -> tensor<1x4x8x16xf32>
  func.return %o : tensor<1x4x8x16xf32>
}

// -----

// Positive: division by sqrt(head_dim) is a scale of 1/4; the mask is added on the left.
// CHECK-LABEL: func.func @div_scale
// CHECK-NEXT:    [[OUT:%.*]] = npu.sdpa %q, %k, %v, %mask {scale = 2.500000e-01 : f64}
// CHECK-NEXT:    func.return [[OUT]]
func.func @div_scale(%q: tensor<2x8x16xf32>, %k: tensor<2x8x16xf32>, %v: tensor<2x8x16xf32>, %mask: tensor<8x8xf32>) -> tensor<2x8x16xf32> {
  %kt = npu.transpose %k {dim0 = 1 : i64, dim1 = 2 : i64} : tensor<2x8x16xf32> -> tensor<2x16x8xf32>
  %s = npu.matmul %q, %kt : (tensor<2x8x16xf32>, tensor<2x16x8xf32>) -> tensor<2x8x8xf32>
  %scaled = npu.div %s {scalar = 4.000000e+00 : f64} : (tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %masked = npu.add %mask, %scaled : (tensor<8x8xf32>, tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %p = npu.softmax %masked {dim = 2 : i64} : tensor<2x8x8xf32>
  %o = npu.matmul %p, %v : (tensor<2x8x8xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  func.return %o : tensor<2x8x16xf32>
}

// -----

// Positive: Granite's attention_multiplier is the scale (not 1/sqrt(head_dim)).
// CHECK-LABEL: func.func @granite_multiplier
// CHECK-NEXT:    [[OUT:%.*]] = npu.sdpa %q, %k, %v, %mask {scale = 1.562500e-02 : f64}
// CHECK-NEXT:    func.return [[OUT]]
func.func @granite_multiplier(%q: tensor<1x4x8x16xf32>, %k: tensor<1x4x8x16xf32>, %v: tensor<1x4x8x16xf32>, %mask: tensor<1x1x8x8xf32>) -> tensor<1x4x8x16xf32> {
  %kt = npu.transpose %k {dim0 = 2 : i64, dim1 = 3 : i64} : tensor<1x4x8x16xf32> -> tensor<1x4x16x8xf32>
  %s = npu.matmul %q, %kt : (tensor<1x4x8x16xf32>, tensor<1x4x16x8xf32>) -> tensor<1x4x8x8xf32>
  %scaled = npu.mul %s {scalar = 1.562500e-02 : f64} : (tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  %masked = npu.add %scaled, %mask : (tensor<1x4x8x8xf32>, tensor<1x1x8x8xf32>) -> tensor<1x4x8x8xf32>
  %p = npu.softmax %masked {dim = -1 : i64} : tensor<1x4x8x8xf32>
  %o = npu.matmul %p, %v : (tensor<1x4x8x8xf32>, tensor<1x4x8x16xf32>) -> tensor<1x4x8x16xf32>
  func.return %o : tensor<1x4x8x16xf32>
}

// -----

// Positive: no mask, and K transposed by a permute of the last two dims.
// CHECK-LABEL: func.func @no_mask
// CHECK-NEXT:    [[OUT:%.*]] = npu.sdpa %q, %k, %v {scale = 1.250000e-01 : f64} : (tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x32xf32>) -> tensor<1x2x8x32xf32>
// CHECK-NEXT:    func.return [[OUT]]
func.func @no_mask(%q: tensor<1x2x8x16xf32>, %k: tensor<1x2x8x16xf32>, %v: tensor<1x2x8x32xf32>) -> tensor<1x2x8x32xf32> {
  %kt = npu.permute %k {dims = array<i64: 0, 1, 3, 2>} : tensor<1x2x8x16xf32> -> tensor<1x2x16x8xf32>
  %s = npu.matmul %q, %kt : (tensor<1x2x8x16xf32>, tensor<1x2x16x8xf32>) -> tensor<1x2x8x8xf32>
  %scaled = npu.mul %s {scalar = 1.250000e-01 : f64} : (tensor<1x2x8x8xf32>) -> tensor<1x2x8x8xf32>
  %p = npu.softmax %scaled {dim = -1 : i64} : tensor<1x2x8x8xf32>
  %o = npu.matmul %p, %v : (tensor<1x2x8x8xf32>, tensor<1x2x8x32xf32>) -> tensor<1x2x8x32xf32>
  func.return %o : tensor<1x2x8x32xf32>
}

// -----

// Positive: no scale anywhere still records scale = 1 (sdpa's default would be 1/4 here).
// CHECK-LABEL: func.func @no_scale
// CHECK-NEXT:    [[OUT:%.*]] = npu.sdpa %q, %k, %v {scale = 1.000000e+00 : f64}
// CHECK-NEXT:    func.return [[OUT]]
func.func @no_scale(%q: tensor<1x2x8x16xf32>, %k: tensor<1x2x8x16xf32>, %v: tensor<1x2x8x16xf32>) -> tensor<1x2x8x16xf32> {
  %kt = npu.transpose %k {dim0 = 3 : i64, dim1 = 2 : i64} : tensor<1x2x8x16xf32> -> tensor<1x2x16x8xf32>
  %s = npu.matmul %q, %kt : (tensor<1x2x8x16xf32>, tensor<1x2x16x8xf32>) -> tensor<1x2x8x8xf32>
  %p = npu.softmax %s {dim = 3 : i64} : tensor<1x2x8x8xf32>
  %o = npu.matmul %p, %v : (tensor<1x2x8x8xf32>, tensor<1x2x8x16xf32>) -> tensor<1x2x8x16xf32>
  func.return %o : tensor<1x2x8x16xf32>
}

// -----

// Positive: the scale applied after the mask also scales the mask, (s + m) * c == s * c + m * c.
// CHECK-LABEL: func.func @scale_after_mask
// CHECK-NEXT:    [[M:%.*]] = npu.mul %mask {scalar = 1.250000e-01 : f64} : (tensor<1x1x8x8xf32>) -> tensor<1x1x8x8xf32>
// CHECK-NEXT:    [[OUT:%.*]] = npu.sdpa %q, %k, %v, [[M]] {scale = 1.250000e-01 : f64}
// CHECK-NEXT:    func.return [[OUT]]
func.func @scale_after_mask(%q: tensor<1x2x8x16xf32>, %k: tensor<1x2x8x16xf32>, %v: tensor<1x2x8x16xf32>, %mask: tensor<1x1x8x8xf32>) -> tensor<1x2x8x16xf32> {
  %kt = npu.transpose %k {dim0 = 2 : i64, dim1 = 3 : i64} : tensor<1x2x8x16xf32> -> tensor<1x2x16x8xf32>
  %s = npu.matmul %q, %kt : (tensor<1x2x8x16xf32>, tensor<1x2x16x8xf32>) -> tensor<1x2x8x8xf32>
  %masked = npu.add %s, %mask : (tensor<1x2x8x8xf32>, tensor<1x1x8x8xf32>) -> tensor<1x2x8x8xf32>
  %scaled = npu.mul %masked {scalar = 1.250000e-01 : f64} : (tensor<1x2x8x8xf32>) -> tensor<1x2x8x8xf32>
  %p = npu.softmax %scaled {dim = -1 : i64} : tensor<1x2x8x8xf32>
  %o = npu.matmul %p, %v : (tensor<1x2x8x8xf32>, tensor<1x2x8x16xf32>) -> tensor<1x2x8x16xf32>
  func.return %o : tensor<1x2x8x16xf32>
}

// -----

// Positive: a scale applied to q before the matmul is folded in (and the mul goes).
// CHECK-LABEL: func.func @scaled_query
// CHECK-NEXT:    [[OUT:%.*]] = npu.sdpa %q, %k, %v, %mask {scale = 2.500000e-01 : f64}
// CHECK-NEXT:    func.return [[OUT]]
func.func @scaled_query(%q: tensor<1x2x8x16xf32>, %k: tensor<1x2x8x16xf32>, %v: tensor<1x2x8x16xf32>, %mask: tensor<8x8xf32>) -> tensor<1x2x8x16xf32> {
  %qs = npu.mul %q {scalar = 2.500000e-01 : f64} : (tensor<1x2x8x16xf32>) -> tensor<1x2x8x16xf32>
  %kt = npu.transpose %k {dim0 = 2 : i64, dim1 = 3 : i64} : tensor<1x2x8x16xf32> -> tensor<1x2x16x8xf32>
  %s = npu.matmul %qs, %kt : (tensor<1x2x8x16xf32>, tensor<1x2x16x8xf32>) -> tensor<1x2x8x8xf32>
  %masked = npu.add %s, %mask : (tensor<1x2x8x8xf32>, tensor<8x8xf32>) -> tensor<1x2x8x8xf32>
  %p = npu.softmax %masked {dim = -1 : i64} : tensor<1x2x8x8xf32>
  %o = npu.matmul %p, %v : (tensor<1x2x8x8xf32>, tensor<1x2x8x16xf32>) -> tensor<1x2x8x16xf32>
  func.return %o : tensor<1x2x8x16xf32>
}

// -----

// Negative: the scaled scores have another user (returned), so they must stay.
// CHECK-LABEL: func.func @extra_user
// CHECK-NOT:     npu.sdpa
// CHECK:         npu.softmax
// CHECK-NOT:     npu.sdpa
// CHECK:         func.return
func.func @extra_user(%q: tensor<1x2x8x16xf32>, %k: tensor<1x2x8x16xf32>, %v: tensor<1x2x8x16xf32>) -> (tensor<1x2x8x16xf32>, tensor<1x2x8x8xf32>) {
  %kt = npu.transpose %k {dim0 = 2 : i64, dim1 = 3 : i64} : tensor<1x2x8x16xf32> -> tensor<1x2x16x8xf32>
  %s = npu.matmul %q, %kt : (tensor<1x2x8x16xf32>, tensor<1x2x16x8xf32>) -> tensor<1x2x8x8xf32>
  %scaled = npu.mul %s {scalar = 2.500000e-01 : f64} : (tensor<1x2x8x8xf32>) -> tensor<1x2x8x8xf32>
  %p = npu.softmax %scaled {dim = -1 : i64} : tensor<1x2x8x8xf32>
  %o = npu.matmul %p, %v : (tensor<1x2x8x8xf32>, tensor<1x2x8x16xf32>) -> tensor<1x2x8x16xf32>
  func.return %o, %scaled : tensor<1x2x8x16xf32>, tensor<1x2x8x8xf32>
}

// -----

// Negative: softmax over the query dim, not the key dim.
// CHECK-LABEL: func.func @softmax_other_dim
// CHECK-NOT:     npu.sdpa
// CHECK:         npu.softmax %{{.*}} {dim = 2 : i64}
// CHECK-NOT:     npu.sdpa
// CHECK:         func.return
func.func @softmax_other_dim(%q: tensor<1x2x8x16xf32>, %k: tensor<1x2x8x16xf32>, %v: tensor<1x2x8x16xf32>) -> tensor<1x2x8x16xf32> {
  %kt = npu.transpose %k {dim0 = 2 : i64, dim1 = 3 : i64} : tensor<1x2x8x16xf32> -> tensor<1x2x16x8xf32>
  %s = npu.matmul %q, %kt : (tensor<1x2x8x16xf32>, tensor<1x2x16x8xf32>) -> tensor<1x2x8x8xf32>
  %p = npu.softmax %s {dim = 2 : i64} : tensor<1x2x8x8xf32>
  %o = npu.matmul %p, %v : (tensor<1x2x8x8xf32>, tensor<1x2x8x16xf32>) -> tensor<1x2x8x16xf32>
  func.return %o : tensor<1x2x8x16xf32>
}

// -----

// Negative: the mask grows the scores (a batch of 2 masks over a batch of 1): the add
// broadcasts the scores, which sdpa's mask cannot express.
// CHECK-LABEL: func.func @mask_grows_scores
// CHECK-NOT:     npu.sdpa
// CHECK:         npu.softmax
// CHECK-NOT:     npu.sdpa
// CHECK:         func.return
func.func @mask_grows_scores(%q: tensor<1x2x8x16xf32>, %k: tensor<1x2x8x16xf32>, %v: tensor<2x2x8x16xf32>, %mask: tensor<2x1x8x8xf32>) -> tensor<2x2x8x16xf32> {
  %kt = npu.transpose %k {dim0 = 2 : i64, dim1 = 3 : i64} : tensor<1x2x8x16xf32> -> tensor<1x2x16x8xf32>
  %s = npu.matmul %q, %kt : (tensor<1x2x8x16xf32>, tensor<1x2x16x8xf32>) -> tensor<1x2x8x8xf32>
  %masked = npu.add %s, %mask : (tensor<1x2x8x8xf32>, tensor<2x1x8x8xf32>) -> tensor<2x2x8x8xf32>
  %p = npu.softmax %masked {dim = -1 : i64} : tensor<2x2x8x8xf32>
  %o = npu.matmul %p, %v : (tensor<2x2x8x8xf32>, tensor<2x2x8x16xf32>) -> tensor<2x2x8x16xf32>
  func.return %o : tensor<2x2x8x16xf32>
}

// -----

// Negative: K is transposed on dims 1 and 2, not on its last two dims.
// CHECK-LABEL: func.func @k_not_transposed_last_dims
// CHECK-NOT:     npu.sdpa
// CHECK:         npu.softmax
// CHECK-NOT:     npu.sdpa
// CHECK:         func.return
func.func @k_not_transposed_last_dims(%q: tensor<1x2x8x16xf32>, %k: tensor<1x16x2x8xf32>, %v: tensor<1x2x8x16xf32>) -> tensor<1x2x8x16xf32> {
  %kt = npu.transpose %k {dim0 = 1 : i64, dim1 = 2 : i64} : tensor<1x16x2x8xf32> -> tensor<1x2x16x8xf32>
  %s = npu.matmul %q, %kt : (tensor<1x2x8x16xf32>, tensor<1x2x16x8xf32>) -> tensor<1x2x8x8xf32>
  %p = npu.softmax %s {dim = -1 : i64} : tensor<1x2x8x8xf32>
  %o = npu.matmul %p, %v : (tensor<1x2x8x8xf32>, tensor<1x2x8x16xf32>) -> tensor<1x2x8x16xf32>
  func.return %o : tensor<1x2x8x16xf32>
}

// -----

// Negative: K has no batch dims of its own (rank 3 against rank-4 q, broadcast by the
// matmul); sdpa needs q, k and v of one rank.
// CHECK-LABEL: func.func @rank_mismatch
// CHECK-NOT:     npu.sdpa
// CHECK:         npu.softmax
// CHECK-NOT:     npu.sdpa
// CHECK:         func.return
func.func @rank_mismatch(%q: tensor<1x2x8x16xf32>, %k: tensor<2x8x16xf32>, %v: tensor<1x2x8x16xf32>) -> tensor<1x2x8x16xf32> {
  %kt = npu.transpose %k {dim0 = 1 : i64, dim1 = 2 : i64} : tensor<2x8x16xf32> -> tensor<2x16x8xf32>
  %s = npu.matmul %q, %kt : (tensor<1x2x8x16xf32>, tensor<2x16x8xf32>) -> tensor<1x2x8x8xf32>
  %p = npu.softmax %s {dim = -1 : i64} : tensor<1x2x8x8xf32>
  %o = npu.matmul %p, %v : (tensor<1x2x8x8xf32>, tensor<1x2x8x16xf32>) -> tensor<1x2x8x16xf32>
  func.return %o : tensor<1x2x8x16xf32>
}

// -----

// Negative: a where fill of -1e4 doesn't absorb the scores (fully masked rows would differ).
// CHECK-LABEL: func.func @where_small_fill
// CHECK-NOT:     npu.sdpa
// CHECK:         npu.softmax
// CHECK-NOT:     npu.sdpa
// CHECK:         func.return
func.func @where_small_fill(%q: tensor<1x2x8x16xf32>, %k: tensor<1x2x8x16xf32>, %v: tensor<1x2x8x16xf32>, %keep: tensor<8x8xi1>) -> tensor<1x2x8x16xf32> {
  %kt = npu.transpose %k {dim0 = 2 : i64, dim1 = 3 : i64} : tensor<1x2x8x16xf32> -> tensor<1x2x16x8xf32>
  %s = npu.matmul %q, %kt : (tensor<1x2x8x16xf32>, tensor<1x2x16x8xf32>) -> tensor<1x2x8x8xf32>
  %masked = npu.where %keep, %s {scalar = -1.000000e+04 : f64} : (tensor<8x8xi1>, tensor<1x2x8x8xf32>) -> tensor<1x2x8x8xf32>
  %p = npu.softmax %masked {dim = -1 : i64} : tensor<1x2x8x8xf32>
  %o = npu.matmul %p, %v : (tensor<1x2x8x8xf32>, tensor<1x2x8x16xf32>) -> tensor<1x2x8x16xf32>
  func.return %o : tensor<1x2x8x16xf32>
}

// -----

// Negative: training-mode dropout between softmax and P@V is not the identity.
// CHECK-LABEL: func.func @train_dropout
// CHECK-NOT:     npu.sdpa
// CHECK:         npu.dropout
// CHECK-NOT:     npu.sdpa
// CHECK:         func.return
func.func @train_dropout(%q: tensor<1x2x8x16xf32>, %k: tensor<1x2x8x16xf32>, %v: tensor<1x2x8x16xf32>) -> tensor<1x2x8x16xf32> {
  %kt = npu.transpose %k {dim0 = 2 : i64, dim1 = 3 : i64} : tensor<1x2x8x16xf32> -> tensor<1x2x16x8xf32>
  %s = npu.matmul %q, %kt : (tensor<1x2x8x16xf32>, tensor<1x2x16x8xf32>) -> tensor<1x2x8x8xf32>
  %p = npu.softmax %s {dim = -1 : i64} : tensor<1x2x8x8xf32>
  %d = npu.dropout %p {p = 1.000000e-01 : f64, train} : tensor<1x2x8x8xf32>
  %o = npu.matmul %d, %v : (tensor<1x2x8x8xf32>, tensor<1x2x8x16xf32>) -> tensor<1x2x8x16xf32>
  func.return %o : tensor<1x2x8x16xf32>
}

// -----

// Negative: a cast that changes the element type is not the identity.
// CHECK-LABEL: func.func @narrowing_cast
// CHECK-NOT:     npu.sdpa
// CHECK:         npu.cast
// CHECK-NOT:     npu.sdpa
// CHECK:         func.return
func.func @narrowing_cast(%q: tensor<1x2x8x16xf32>, %k: tensor<1x2x8x16xf32>, %v: tensor<1x2x8x16xf16>) -> tensor<1x2x8x16xf16> {
  %kt = npu.transpose %k {dim0 = 2 : i64, dim1 = 3 : i64} : tensor<1x2x8x16xf32> -> tensor<1x2x16x8xf32>
  %s = npu.matmul %q, %kt : (tensor<1x2x8x16xf32>, tensor<1x2x16x8xf32>) -> tensor<1x2x8x8xf32>
  %p = npu.softmax %s {dim = -1 : i64} : tensor<1x2x8x8xf32>
  %c = npu.cast %p : tensor<1x2x8x8xf32> -> tensor<1x2x8x8xf16>
  %o = npu.matmul %c, %v : (tensor<1x2x8x8xf16>, tensor<1x2x8x16xf16>) -> tensor<1x2x8x16xf16>
  func.return %o : tensor<1x2x8x16xf16>
}

// -----

// Positive: PyTorch's attention over repeat_kv'd keys and values (unsqueeze, expand,
// contiguous, view, as HF's sdpa path exports Llama) reads the unrepeated ones: sdpa
// groups 4 query heads over 2 key/value heads itself, and the copies are gone.
// CHECK-LABEL: func.func @sdpa_repeat_kv
// CHECK-NEXT:    %a = npu.sdpa %q, %k, %v, %mask {scale = 5.000000e-01 : f64} : (tensor<1x4x1x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x1x1x8xf32>) -> tensor<1x4x1x4xf32>
// CHECK-NEXT:    func.return %a
func.func @sdpa_repeat_kv(%q: tensor<1x4x1x4xf32>, %k: tensor<1x2x8x4xf32>, %v: tensor<1x2x8x4xf32>, %mask: tensor<1x1x1x8xf32>) -> tensor<1x4x1x4xf32> {
  %ku = npu.unsqueeze %k {dim = 2 : i64} : tensor<1x2x8x4xf32> -> tensor<1x2x1x8x4xf32>
  %ke = npu.expand %ku : tensor<1x2x1x8x4xf32> -> tensor<1x2x2x8x4xf32>
  %kc = npu.contiguous %ke : tensor<1x2x2x8x4xf32>
  %kr = npu.view %kc : tensor<1x2x2x8x4xf32> -> tensor<1x4x8x4xf32>
  %vu = npu.unsqueeze %v {dim = 2 : i64} : tensor<1x2x8x4xf32> -> tensor<1x2x1x8x4xf32>
  %ve = npu.expand %vu : tensor<1x2x1x8x4xf32> -> tensor<1x2x2x8x4xf32>
  %vc = npu.contiguous %ve : tensor<1x2x2x8x4xf32>
  %vr = npu.view %vc : tensor<1x2x2x8x4xf32> -> tensor<1x4x8x4xf32>
  %a = npu.sdpa %q, %kr, %vr, %mask {scale = 5.000000e-01 : f64} : (tensor<1x4x1x4xf32>, tensor<1x4x8x4xf32>, tensor<1x4x8x4xf32>, tensor<1x1x1x8xf32>) -> tensor<1x4x1x4xf32>
  func.return %a : tensor<1x4x1x4xf32>
}

// -----

// Positive: a repeated key that something else reads too stays for that reader; the
// attention still reads the unrepeated one.
// CHECK-LABEL: func.func @sdpa_repeat_kv_shared
// CHECK:         %kr = npu.view
// CHECK:         %a = npu.sdpa %q, %k, %v : (tensor<1x4x1x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>)
// CHECK-NEXT:    func.return %a, %kr
func.func @sdpa_repeat_kv_shared(%q: tensor<1x4x1x4xf32>, %k: tensor<1x2x8x4xf32>, %v: tensor<1x2x8x4xf32>) -> (tensor<1x4x1x4xf32>, tensor<1x4x8x4xf32>) {
  %ku = npu.unsqueeze %k {dim = 2 : i64} : tensor<1x2x8x4xf32> -> tensor<1x2x1x8x4xf32>
  %ke = npu.expand %ku : tensor<1x2x1x8x4xf32> -> tensor<1x2x2x8x4xf32>
  %kr = npu.view %ke : tensor<1x2x2x8x4xf32> -> tensor<1x4x8x4xf32>
  %vu = npu.unsqueeze %v {dim = 2 : i64} : tensor<1x2x8x4xf32> -> tensor<1x2x1x8x4xf32>
  %ve = npu.expand %vu : tensor<1x2x1x8x4xf32> -> tensor<1x2x2x8x4xf32>
  %vr = npu.view %ve : tensor<1x2x2x8x4xf32> -> tensor<1x4x8x4xf32>
  %a = npu.sdpa %q, %kr, %vr : (tensor<1x4x1x4xf32>, tensor<1x4x8x4xf32>, tensor<1x4x8x4xf32>) -> tensor<1x4x1x4xf32>
  func.return %a, %kr : tensor<1x4x1x4xf32>, tensor<1x4x8x4xf32>
}

// -----

// Negative: only the keys are repeated; sdpa needs as many key as value heads.
// CHECK-LABEL: func.func @sdpa_repeat_keys_only
// CHECK:         npu.expand
// CHECK:         npu.sdpa %q, %kr, %v
func.func @sdpa_repeat_keys_only(%q: tensor<1x4x1x4xf32>, %k: tensor<1x2x8x4xf32>, %v: tensor<1x4x8x4xf32>) -> tensor<1x4x1x4xf32> {
  %ku = npu.unsqueeze %k {dim = 2 : i64} : tensor<1x2x8x4xf32> -> tensor<1x2x1x8x4xf32>
  %ke = npu.expand %ku : tensor<1x2x1x8x4xf32> -> tensor<1x2x2x8x4xf32>
  %kr = npu.view %ke : tensor<1x2x2x8x4xf32> -> tensor<1x4x8x4xf32>
  %a = npu.sdpa %q, %kr, %v : (tensor<1x4x1x4xf32>, tensor<1x4x8x4xf32>, tensor<1x4x8x4xf32>) -> tensor<1x4x1x4xf32>
  func.return %a : tensor<1x4x1x4xf32>
}

// -----

// Negative: a copy along the sequence (expand after the rows) is not repeat_kv.
// CHECK-LABEL: func.func @sdpa_repeat_rows
// CHECK:         npu.sdpa %q, %kr, %vr
func.func @sdpa_repeat_rows(%q: tensor<1x2x1x4xf32>, %k: tensor<1x2x4x4xf32>, %v: tensor<1x2x4x4xf32>) -> tensor<1x2x1x4xf32> {
  %ku = npu.unsqueeze %k {dim = 3 : i64} : tensor<1x2x4x4xf32> -> tensor<1x2x4x1x4xf32>
  %ke = npu.expand %ku : tensor<1x2x4x1x4xf32> -> tensor<1x2x4x2x4xf32>
  %kr = npu.view %ke : tensor<1x2x4x2x4xf32> -> tensor<1x2x8x4xf32>
  %vu = npu.unsqueeze %v {dim = 3 : i64} : tensor<1x2x4x4xf32> -> tensor<1x2x4x1x4xf32>
  %ve = npu.expand %vu : tensor<1x2x4x1x4xf32> -> tensor<1x2x4x2x4xf32>
  %vr = npu.view %ve : tensor<1x2x4x2x4xf32> -> tensor<1x2x8x4xf32>
  %a = npu.sdpa %q, %kr, %vr : (tensor<1x2x1x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x1x4xf32>
  func.return %a : tensor<1x2x1x4xf32>
}
