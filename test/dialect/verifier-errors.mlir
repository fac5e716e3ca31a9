// Verifier diagnostics of the npu dialect, one chunk per verifier rule. Each chunk
// expects exactly one `'npu.<op>' op <message>` error, on the line of the offending op
// (`expected-error@+1`); --verify-diagnostics fails on any other or missing diagnostic.

// RUN: forge-opt %s --split-input-file --verify-diagnostics

// Every error points at its op's first column, where each op below starts (column 3).
// RUN: forge-opt %s --split-input-file --print-diagnostics | filecheck %s --check-prefix=AT-OP
// AT-OP:     verifier-errors.mlir:{{[0-9]+}}:3: error: 'npu.
// AT-OP-NOT: :{{[0-9]+}}:{{([0-24-9]|[0-9][0-9]+)}}: error:

// ==== Attributes and properties (IRDL constraints).

// Device must be npu or cpu.
func.func @bad_device(%x: tensor<4xf32>) {
  // expected-error@+1 {{'npu.neg' op device must be one of npu, cpu, got 'gpu'}}
  %0 = npu.neg %x {device = "gpu"} : tensor<4xf32>
  func.return
}

// -----

// Vreg must be an integer attribute.
func.func @bad_vreg(%x: tensor<4xf32>) {
  // expected-error@+1 {{'npu.neg' op "r3" should be of base attribute integer}}
  %0 = npu.neg %x {vreg = "r3"} : tensor<4xf32>
  func.return
}

// -----

// A required property is missing.
func.func @missing_property(%x: tensor<4xf32>) {
  // expected-error@+1 {{'npu.softmax' op property 'dim' expected in operation 'npu.softmax'}}
  %0 = npu.softmax %x : tensor<4xf32>
  func.return
}

// -----

// ==== Unary elementwise ops.

// Float-only op on an integer tensor.
func.func @exp_int(%x: tensor<2x3xi64>) {
  // expected-error@+1 {{'npu.exp' op operand must have a float element type, got i64}}
  %0 = npu.exp %x : tensor<2x3xi64>
  func.return
}

// -----

// Result type must equal the operand type (generic form).
func.func @sqrt_result(%x: tensor<4xf32>) {
  // expected-error@+1 {{'npu.sqrt' op result 'result' at position 0 does not verify: attribute tensor<4xf32> expected from variable 'T', but got tensor<4xf16>}}
  %0 = "npu.sqrt"(%x) : (tensor<4xf32>) -> tensor<4xf16>
  func.return
}

// -----

// Gelu approximate is 'none' or 'tanh'.
func.func @gelu_approximate(%x: tensor<4xf32>) {
  // expected-error@+1 {{'npu.gelu' op approximate must be 'none' or 'tanh', got 'fast'}}
  %0 = npu.gelu %x {approximate = "fast"} : tensor<4xf32>
  func.return
}

// -----

// Dropout p above 1.
func.func @dropout_high(%x: tensor<4xf32>) {
  // expected-error@+1 {{'npu.dropout' op dropout probability must lie in [0, 1], got 1.5}}
  %0 = npu.dropout %x {p = 1.5 : f64} : tensor<4xf32>
  func.return
}

// -----

// Dropout p below 0.
func.func @dropout_low(%x: tensor<4xf32>) {
  // expected-error@+1 {{'npu.dropout' op dropout probability must lie in [0, 1], got -0.1}}
  %0 = npu.dropout %x {p = -0.1 : f64, train} : tensor<4xf32>
  func.return
}

// -----

// ==== Binary, comparison and boolean ops.

// Both a right-hand operand and a scalar.
func.func @binary_both(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>) {
  // expected-error@+1 {{'npu.add' op expected exactly one of a right-hand operand or a 'scalar' property}}
  %0 = npu.add %a, %b {scalar = 1.0 : f32} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  func.return
}

// -----

// Neither a right-hand operand nor a scalar.
func.func @binary_neither(%a: tensor<2x3xf32>) {
  // expected-error@+1 {{'npu.mul' op expected exactly one of a right-hand operand or a 'scalar' property}}
  %0 = npu.mul %a : (tensor<2x3xf32>) -> tensor<2x3xf32>
  func.return
}

// -----

// Operand shapes that do not broadcast.
func.func @binary_broadcast(%a: tensor<2x3xf32>, %b: tensor<4xf32>) {
  // expected-error@+1 {{'npu.add' op shapes 2x3, 4 do not broadcast (dimension 1: 3 vs 4)}}
  %0 = npu.add %a, %b : (tensor<2x3xf32>, tensor<4xf32>) -> tensor<2x3xf32>
  func.return
}

// -----

// Result shape differs from the broadcast shape.
func.func @binary_result_shape(%a: tensor<2x3xf32>, %b: tensor<3xf32>) {
  // expected-error@+1 {{'npu.div' op result has shape 3x3, expected 2x3}}
  %0 = npu.div %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<3x3xf32>
  func.return
}

// -----

// Result element type differs from equal operand element types.
func.func @binary_result_type(%a: tensor<2x3xf32>) {
  // expected-error@+1 {{'npu.sub' op result has element type f16, expected f32}}
  %0 = npu.sub %a, %a : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf16>
  func.return
}

// -----

// With a scalar the result keeps the operand element type.
func.func @binary_scalar_type(%a: tensor<4xi64>) {
  // expected-error@+1 {{'npu.maximum' op result has element type i32, expected i64}}
  %0 = npu.maximum %a {scalar = 0 : i64} : (tensor<4xi64>) -> tensor<4xi32>
  func.return
}

// -----

// A float never narrows to an integer result.
func.func @binary_float_to_int(%a: tensor<4xf32>) {
  // expected-error@+1 {{'npu.add' op result has element type i64, expected f32}}
  %0 = npu.add %a {scalar = 1 : i64} : (tensor<4xf32>) -> tensor<4xi64>
  func.return
}

// -----

// Comparison result must be i1.
func.func @compare_result(%a: tensor<4xf32>) {
  // expected-error@+1 {{'npu.eq' op result must have element type i1, got f32}}
  %0 = npu.eq %a, %a : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return
}

// -----

// Comparison operands must broadcast.
func.func @compare_broadcast(%a: tensor<2x3xf32>, %b: tensor<2xf32>) {
  // expected-error@+1 {{'npu.lt' op shapes 2x3, 2 do not broadcast (dimension 1: 3 vs 2)}}
  %0 = npu.lt %a, %b : (tensor<2x3xf32>, tensor<2xf32>) -> tensor<2x3xi1>
  func.return
}

// -----

// Comparison with neither operand nor scalar.
func.func @compare_neither(%a: tensor<4xf32>) {
  // expected-error@+1 {{'npu.ge' op expected exactly one of a right-hand operand or a 'scalar' property}}
  %0 = npu.ge %a : (tensor<4xf32>) -> tensor<4xi1>
  func.return
}

// -----

// Boolean op on a float lhs.
func.func @logical_lhs(%a: tensor<4xf32>, %p: tensor<4xi1>) {
  // expected-error@+1 {{'npu.and' op operand 0 must have element type i1, got f32}}
  %0 = npu.and %a, %p : (tensor<4xf32>, tensor<4xi1>) -> tensor<4xi1>
  func.return
}

// -----

// Boolean op on an integer rhs.
func.func @logical_rhs(%p: tensor<4xi1>, %i: tensor<4xi64>) {
  // expected-error@+1 {{'npu.or' op operand 1 must have element type i1, got i64}}
  %0 = npu.or %p, %i : (tensor<4xi1>, tensor<4xi64>) -> tensor<4xi1>
  func.return
}

// -----

// Boolean op result must be i1.
func.func @logical_result(%p: tensor<4xi1>) {
  // expected-error@+1 {{'npu.or' op result must have element type i1, got i64}}
  %0 = npu.or %p, %p : (tensor<4xi1>, tensor<4xi1>) -> tensor<4xi64>
  func.return
}

// -----

// ==== npu.where, npu.cast, npu.constant.

// Where with both on_false and scalar.
func.func @where_both(%c: tensor<4xi1>, %t: tensor<4xf32>) {
  // expected-error@+1 {{'npu.where' op expected exactly one of an 'on_false' operand or a 'scalar' property}}
  %0 = npu.where %c, %t, %t {scalar = 0.0 : f32} : (tensor<4xi1>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return
}

// -----

// Where with neither on_false nor scalar.
func.func @where_neither(%c: tensor<4xi1>, %t: tensor<4xf32>) {
  // expected-error@+1 {{'npu.where' op expected exactly one of an 'on_false' operand or a 'scalar' property}}
  %0 = npu.where %c, %t : (tensor<4xi1>, tensor<4xf32>) -> tensor<4xf32>
  func.return
}

// -----

// Where condition must be i1.
func.func @where_cond(%c: tensor<4xf32>, %t: tensor<4xf32>) {
  // expected-error@+1 {{'npu.where' op condition must have element type i1, got f32}}
  %0 = npu.where %c, %t, %t : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return
}

// -----

// Where branches must share an element type.
func.func @where_on_false(%c: tensor<4xi1>, %t: tensor<4xf32>, %f: tensor<4xf16>) {
  // expected-error@+1 {{'npu.where' op on_false has element type f16, expected f32}}
  %0 = npu.where %c, %t, %f : (tensor<4xi1>, tensor<4xf32>, tensor<4xf16>) -> tensor<4xf32>
  func.return
}

// -----

// Where operands must broadcast.
func.func @where_broadcast(%c: tensor<3xi1>, %t: tensor<2x4xf32>) {
  // expected-error@+1 {{'npu.where' op shapes 3, 2x4 do not broadcast (dimension 1: 3 vs 4)}}
  %0 = npu.where %c, %t {scalar = 0.0 : f32} : (tensor<3xi1>, tensor<2x4xf32>) -> tensor<2x4xf32>
  func.return
}

// -----

// Where result element type follows on_true.
func.func @where_result(%c: tensor<4xi1>, %t: tensor<4xf32>) {
  // expected-error@+1 {{'npu.where' op result has element type i64, expected f32}}
  %0 = npu.where %c, %t {scalar = 0 : i64} : (tensor<4xi1>, tensor<4xf32>) -> tensor<4xi64>
  func.return
}

// -----

// Cast keeps the shape.
func.func @cast_shape(%x: tensor<2x3xf32>) {
  // expected-error@+1 {{'npu.cast' op result has shape 3x2, expected 2x3}}
  %0 = npu.cast %x : tensor<2x3xf32> -> tensor<3x2xf16>
  func.return
}

// -----

// Constant result type is the value's type (generic form).
func.func @constant_type() {
  // expected-error@+1 {{'npu.constant' op attribute tensor<3xf32> expected from variable 'T', but got tensor<2xf32>}}
  %0 = "npu.constant"() <{value = dense<1.0> : tensor<2xf32>}> : () -> tensor<3xf32>
  func.return
}

// -----

// ==== Contractions.

// Matmul lhs of rank 1.
func.func @matmul_rank_lhs(%a: tensor<3xf32>, %b: tensor<3x4xf32>) {
  // expected-error@+1 {{'npu.matmul' op lhs must have rank at least 2, got rank 1}}
  %0 = npu.matmul %a, %b : (tensor<3xf32>, tensor<3x4xf32>) -> tensor<4xf32>
  func.return
}

// -----

// Matmul rhs of rank 1.
func.func @matmul_rank_rhs(%a: tensor<2x3xf32>, %b: tensor<3xf32>) {
  // expected-error@+1 {{'npu.matmul' op rhs must have rank at least 2, got rank 1}}
  %0 = npu.matmul %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2xf32>
  func.return
}

// -----

// Matmul K mismatch.
func.func @matmul_k(%a: tensor<2x3xf32>, %b: tensor<4x5xf32>) {
  // expected-error@+1 {{'npu.matmul' op contraction dimensions differ: lhs 2x3 has K=3, rhs 4x5 has K=4}}
  %0 = npu.matmul %a, %b : (tensor<2x3xf32>, tensor<4x5xf32>) -> tensor<2x5xf32>
  func.return
}

// -----

// Matmul batch dims that do not broadcast.
func.func @matmul_batch(%a: tensor<2x4x8xf32>, %b: tensor<3x8x5xf32>) {
  // expected-error@+1 {{'npu.matmul' op shapes 2, 3 do not broadcast (dimension 0: 2 vs 3)}}
  %0 = npu.matmul %a, %b : (tensor<2x4x8xf32>, tensor<3x8x5xf32>) -> tensor<2x4x5xf32>
  func.return
}

// -----

// Matmul result shape.
func.func @matmul_result(%a: tensor<4x8xf32>, %b: tensor<8x5xf32>) {
  // expected-error@+1 {{'npu.matmul' op result has shape 4x4, expected 4x5}}
  %0 = npu.matmul %a, %b : (tensor<4x8xf32>, tensor<8x5xf32>) -> tensor<4x4xf32>
  func.return
}

// -----

// Matmul rhs element type.
func.func @matmul_rhs_type(%a: tensor<4x8xf32>, %b: tensor<8x5xf16>) {
  // expected-error@+1 {{'npu.matmul' op rhs has element type f16, expected f32}}
  %0 = npu.matmul %a, %b : (tensor<4x8xf32>, tensor<8x5xf16>) -> tensor<4x5xf32>
  func.return
}

// -----

// Matmul result element type.
func.func @matmul_result_type(%a: tensor<4x8xf32>, %b: tensor<8x5xf32>) {
  // expected-error@+1 {{'npu.matmul' op result has element type bf16, expected f32}}
  %0 = npu.matmul %a, %b : (tensor<4x8xf32>, tensor<8x5xf32>) -> tensor<4x5xbf16>
  func.return
}

// -----

// Linear input of rank 0.
func.func @linear_rank_input(%x: tensor<f32>, %w: tensor<4x1xf32>) {
  // expected-error@+1 {{'npu.linear' op input must have rank at least 1, got rank 0}}
  %0 = npu.linear %x, %w : (tensor<f32>, tensor<4x1xf32>) -> tensor<4xf32>
  func.return
}

// -----

// Linear weight must be 2-D.
func.func @linear_rank_weight(%x: tensor<8x16xf32>, %w: tensor<2x32x16xf32>) {
  // expected-error@+1 {{'npu.linear' op weight must have rank 2, got rank 3}}
  %0 = npu.linear %x, %w : (tensor<8x16xf32>, tensor<2x32x16xf32>) -> tensor<8x32xf32>
  func.return
}

// -----

// Linear in-features mismatch ([out, in] weight).
func.func @linear_features(%x: tensor<8x16xf32>, %w: tensor<32x8xf32>) {
  // expected-error@+1 {{'npu.linear' op input features 16 do not match weight 32x8 (layout [out, in])}}
  %0 = npu.linear %x, %w : (tensor<8x16xf32>, tensor<32x8xf32>) -> tensor<8x32xf32>
  func.return
}

// -----

// Linear bias that does not broadcast to the output.
func.func @linear_bias(%x: tensor<8x16xf32>, %w: tensor<32x16xf32>, %b: tensor<16xf32>) {
  // expected-error@+1 {{'npu.linear' op shapes 16, 8x32 do not broadcast (dimension 1: 16 vs 32)}}
  %0 = npu.linear %x, %w, %b : (tensor<8x16xf32>, tensor<32x16xf32>, tensor<16xf32>) -> tensor<8x32xf32>
  func.return
}

// -----

// Linear bias may not grow the output.
func.func @linear_bias_grow(%x: tensor<8x16xf32>, %w: tensor<32x16xf32>, %b: tensor<2x8x32xf32>) {
  // expected-error@+1 {{'npu.linear' op bias of shape 2x8x32 does not broadcast to 8x32}}
  %0 = npu.linear %x, %w, %b : (tensor<8x16xf32>, tensor<32x16xf32>, tensor<2x8x32xf32>) -> tensor<8x32xf32>
  func.return
}

// -----

// Linear bias element type.
func.func @linear_bias_type(%x: tensor<8x16xf32>, %w: tensor<32x16xf32>, %b: tensor<32xf16>) {
  // expected-error@+1 {{'npu.linear' op bias has element type f16, expected f32}}
  %0 = npu.linear %x, %w, %b : (tensor<8x16xf32>, tensor<32x16xf32>, tensor<32xf16>) -> tensor<8x32xf32>
  func.return
}

// -----

// Linear result shape.
func.func @linear_result(%x: tensor<8x16xf32>, %w: tensor<32x16xf32>) {
  // expected-error@+1 {{'npu.linear' op result has shape 8x16, expected 8x32}}
  %0 = npu.linear %x, %w : (tensor<8x16xf32>, tensor<32x16xf32>) -> tensor<8x16xf32>
  func.return
}

// -----

// Linear weight element type.
func.func @linear_weight_type(%x: tensor<8x16xf32>, %w: tensor<32x16xf16>) {
  // expected-error@+1 {{'npu.linear' op weight has element type f16, expected f32}}
  %0 = npu.linear %x, %w : (tensor<8x16xf32>, tensor<32x16xf16>) -> tensor<8x32xf32>
  func.return
}

// -----

// Addmm input must be 2-D.
func.func @addmm_rank(%b: tensor<32xf32>, %x: tensor<2x8x16xf32>, %w: tensor<16x32xf32>) {
  // expected-error@+1 {{'npu.addmm' op input must have rank 2, got rank 3}}
  %0 = npu.addmm %b, %x, %w : (tensor<32xf32>, tensor<2x8x16xf32>, tensor<16x32xf32>) -> tensor<2x8x32xf32>
  func.return
}

// -----

// Addmm weight is [in, out].
func.func @addmm_features(%b: tensor<32xf32>, %x: tensor<8x16xf32>, %w: tensor<32x16xf32>) {
  // expected-error@+1 {{'npu.addmm' op input features 16 do not match weight 32x16 (layout [in, out])}}
  %0 = npu.addmm %b, %x, %w : (tensor<32xf32>, tensor<8x16xf32>, tensor<32x16xf32>) -> tensor<8x32xf32>
  func.return
}

// -----

// Fused_linear unknown activation.
func.func @fused_activation(%x: tensor<8x16xf32>, %w: tensor<32x16xf32>) {
  // expected-error@+1 {{'npu.fused_linear' op activation must be one of none, relu, gelu, gelu_tanh, silu, sigmoid, got 'swish'}}
  %0 = npu.fused_linear %x, %w {activation = "swish"} : (tensor<8x16xf32>, tensor<32x16xf32>) -> tensor<8x32xf32>
  func.return
}

// -----

// Fused_linear weight_in_out with an [out, in] weight.
func.func @fused_in_out(%x: tensor<8x16xf32>, %w: tensor<32x16xf32>) {
  // expected-error@+1 {{'npu.fused_linear' op input features 16 do not match weight 32x16 (layout [in, out])}}
  %0 = npu.fused_linear %x, %w {activation = "relu", weight_in_out} : (tensor<8x16xf32>, tensor<32x16xf32>) -> tensor<8x32xf32>
  func.return
}

// -----

// Fused_linear without weight_in_out and an [in, out] weight.
func.func @fused_out_in(%x: tensor<8x16xf32>, %w: tensor<16x32xf32>) {
  // expected-error@+1 {{'npu.fused_linear' op input features 16 do not match weight 16x32 (layout [out, in])}}
  %0 = npu.fused_linear %x, %w {activation = "relu"} : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  func.return
}

// -----

// Sdpa query of rank 1.
func.func @sdpa_rank(%q: tensor<64xf32>, %k: tensor<16x64xf32>) {
  // expected-error@+1 {{'npu.sdpa' op query must have rank at least 2, got rank 1}}
  %0 = npu.sdpa %q, %k, %k : (tensor<64xf32>, tensor<16x64xf32>, tensor<16x64xf32>) -> tensor<64xf32>
  func.return
}

// -----

// Sdpa ranks differ.
func.func @sdpa_ranks(%q: tensor<8x16x64xf32>, %k: tensor<1x8x16x64xf32>) {
  // expected-error@+1 {{'npu.sdpa' op query, key and value ranks differ: 3, 4, 4}}
  %0 = npu.sdpa %q, %k, %k : (tensor<8x16x64xf32>, tensor<1x8x16x64xf32>, tensor<1x8x16x64xf32>) -> tensor<8x16x64xf32>
  func.return
}

// -----

// Sdpa query/key head size mismatch.
func.func @sdpa_head_size(%q: tensor<8x16x64xf32>, %k: tensor<8x16x32xf32>) {
  // expected-error@+1 {{'npu.sdpa' op query head size 64 differs from key head size 32}}
  %0 = npu.sdpa %q, %k, %k : (tensor<8x16x64xf32>, tensor<8x16x32xf32>, tensor<8x16x32xf32>) -> tensor<8x16x32xf32>
  func.return
}

// -----

// Sdpa key/value length mismatch.
func.func @sdpa_kv_length(%q: tensor<8x16x64xf32>, %k: tensor<8x16x64xf32>, %v: tensor<8x12x64xf32>) {
  // expected-error@+1 {{'npu.sdpa' op key length 16 differs from value length 12}}
  %0 = npu.sdpa %q, %k, %v : (tensor<8x16x64xf32>, tensor<8x16x64xf32>, tensor<8x12x64xf32>) -> tensor<8x16x64xf32>
  func.return
}

// -----

// Sdpa GQA: query heads not a multiple of key heads.
func.func @sdpa_gqa(%q: tensor<1x8x16x64xf32>, %k: tensor<1x3x16x64xf32>) {
  // expected-error@+1 {{'npu.sdpa' op query heads 8 are not a multiple of key/value heads 3}}
  %0 = npu.sdpa %q, %k, %k : (tensor<1x8x16x64xf32>, tensor<1x3x16x64xf32>, tensor<1x3x16x64xf32>) -> tensor<1x8x16x64xf32>
  func.return
}

// -----

// Sdpa GQA: key and value head counts differ.
func.func @sdpa_kv_heads(%q: tensor<1x8x16x64xf32>, %k: tensor<1x2x16x64xf32>, %v: tensor<1x4x16x64xf32>) {
  // expected-error@+1 {{'npu.sdpa' op key heads 2 differ from value heads 4}}
  %0 = npu.sdpa %q, %k, %v : (tensor<1x8x16x64xf32>, tensor<1x2x16x64xf32>, tensor<1x4x16x64xf32>) -> tensor<1x8x16x64xf32>
  func.return
}

// -----

// Sdpa mask that does not broadcast to the scores.
func.func @sdpa_mask(%q: tensor<1x8x16x64xf32>, %m: tensor<8x8xi1>) {
  // expected-error@+1 {{'npu.sdpa' op shapes 8x8, 1x8x16x16 do not broadcast (dimension 2: 8 vs 16)}}
  %0 = npu.sdpa %q, %q, %q, %m : (tensor<1x8x16x64xf32>, tensor<1x8x16x64xf32>, tensor<1x8x16x64xf32>, tensor<8x8xi1>) -> tensor<1x8x16x64xf32>
  func.return
}

// -----

// Sdpa mask may not grow the scores.
func.func @sdpa_mask_grow(%q: tensor<1x8x16x64xf32>, %m: tensor<2x1x16x16xi1>) {
  // expected-error@+1 {{'npu.sdpa' op mask of shape 2x1x16x16 does not broadcast to 1x8x16x16}}
  %0 = npu.sdpa %q, %q, %q, %m : (tensor<1x8x16x64xf32>, tensor<1x8x16x64xf32>, tensor<1x8x16x64xf32>, tensor<2x1x16x16xi1>) -> tensor<1x8x16x64xf32>
  func.return
}

// -----

// Sdpa mask is i1 or the query element type.
func.func @sdpa_mask_type(%q: tensor<8x16x64xf32>, %m: tensor<16x16xi64>) {
  // expected-error@+1 {{'npu.sdpa' op mask must have element type i1 or the query's, got i64}}
  %0 = npu.sdpa %q, %q, %q, %m : (tensor<8x16x64xf32>, tensor<8x16x64xf32>, tensor<8x16x64xf32>, tensor<16x16xi64>) -> tensor<8x16x64xf32>
  func.return
}

// -----

// Sdpa result takes the value head size.
func.func @sdpa_result(%q: tensor<8x16x64xf32>, %v: tensor<8x16x32xf32>) {
  // expected-error@+1 {{'npu.sdpa' op result has shape 8x16x64, expected 8x16x32}}
  %0 = npu.sdpa %q, %q, %v : (tensor<8x16x64xf32>, tensor<8x16x64xf32>, tensor<8x16x32xf32>) -> tensor<8x16x64xf32>
  func.return
}

// -----

// Sdpa key element type.
func.func @sdpa_type(%q: tensor<8x16x64xf16>, %k: tensor<8x16x64xf32>) {
  // expected-error@+1 {{'npu.sdpa' op key has element type f32, expected f16}}
  %0 = npu.sdpa %q, %k, %q : (tensor<8x16x64xf16>, tensor<8x16x64xf32>, tensor<8x16x64xf16>) -> tensor<8x16x64xf16>
  func.return
}

// -----

// ==== Softmax, normalizations, reductions, embedding.

// Softmax on integers.
func.func @softmax_int(%x: tensor<2x4xi64>) {
  // expected-error@+1 {{'npu.softmax' op operand must have a float element type, got i64}}
  %0 = npu.softmax %x {dim = 1 : i64} : tensor<2x4xi64>
  func.return
}

// -----

// Softmax dim out of range (positive).
func.func @softmax_dim(%x: tensor<2x4xf32>) {
  // expected-error@+1 {{'npu.softmax' op dimension 2 is out of range for rank 2}}
  %0 = npu.softmax %x {dim = 2 : i64} : tensor<2x4xf32>
  func.return
}

// -----

// Softmax dim out of range (negative).
func.func @softmax_dim_neg(%x: tensor<2x4xf32>) {
  // expected-error@+1 {{'npu.softmax' op dimension -3 is out of range for rank 2}}
  %0 = npu.softmax %x {dim = -3 : i64} : tensor<2x4xf32>
  func.return
}

// -----

// A rank-0 tensor only takes dims 0 and -1.
func.func @softmax_scalar_dim(%x: tensor<f32>) {
  // expected-error@+1 {{'npu.softmax' op dimension 1 is out of range for rank 0}}
  %0 = npu.softmax %x {dim = 1 : i64} : tensor<f32>
  func.return
}

// -----

// Layer_norm on integers.
func.func @layer_norm_int(%x: tensor<2x16xi64>) {
  // expected-error@+1 {{'npu.layer_norm' op operand must have a float element type, got i64}}
  %0 = npu.layer_norm %x {normalized_shape = array<i64: 16>, eps = 1.0e-05 : f64} : tensor<2x16xi64> -> tensor<2x16xi64>
  func.return
}

// -----

// Layer_norm normalized_shape is not a suffix.
func.func @layer_norm_suffix(%x: tensor<2x16xf32>) {
  // expected-error@+1 {{'npu.layer_norm' op normalized_shape 8 is not a suffix of input shape 2x16}}
  %0 = npu.layer_norm %x {normalized_shape = array<i64: 8>, eps = 1.0e-05 : f64} : tensor<2x16xf32> -> tensor<2x16xf32>
  func.return
}

// -----

// Layer_norm normalized_shape longer than the input rank.
func.func @layer_norm_long(%x: tensor<2x16xf32>) {
  // expected-error@+1 {{'npu.layer_norm' op normalized_shape 1x2x16 is not a suffix of input shape 2x16}}
  %0 = npu.layer_norm %x {normalized_shape = array<i64: 1, 2, 16>, eps = 1.0e-05 : f64} : tensor<2x16xf32> -> tensor<2x16xf32>
  func.return
}

// -----

// Layer_norm weight shape.
func.func @layer_norm_weight(%x: tensor<2x16xf32>, %w: tensor<8xf32>) {
  // expected-error@+1 {{'npu.layer_norm' op weight has shape 8, expected 16}}
  %0 = npu.layer_norm %x weight %w : tensor<8xf32> {normalized_shape = array<i64: 16>, eps = 1.0e-05 : f64} : tensor<2x16xf32> -> tensor<2x16xf32>
  func.return
}

// -----

// Layer_norm bias shape.
func.func @layer_norm_bias(%x: tensor<2x16xf32>, %w: tensor<16xf32>, %b: tensor<2x16xf32>) {
  // expected-error@+1 {{'npu.layer_norm' op bias has shape 2x16, expected 16}}
  %0 = npu.layer_norm %x weight %w : tensor<16xf32> bias %b : tensor<2x16xf32> {normalized_shape = array<i64: 16>, eps = 1.0e-05 : f64} : tensor<2x16xf32> -> tensor<2x16xf32>
  func.return
}

// -----

// Layer_norm result shape.
func.func @layer_norm_result(%x: tensor<2x16xf32>) {
  // expected-error@+1 {{'npu.layer_norm' op result has shape 4x16, expected 2x16}}
  %0 = npu.layer_norm %x {normalized_shape = array<i64: 16>, eps = 1.0e-05 : f64} : tensor<2x16xf32> -> tensor<4x16xf32>
  func.return
}

// -----

// Layer_norm result element type.
func.func @layer_norm_result_type(%x: tensor<2x16xf32>) {
  // expected-error@+1 {{'npu.layer_norm' op result has element type f16, expected f32}}
  %0 = npu.layer_norm %x {normalized_shape = array<i64: 16>, eps = 1.0e-05 : f64} : tensor<2x16xf32> -> tensor<2x16xf16>
  func.return
}

// -----

// Layer_norm weight element type.
func.func @layer_norm_weight_type(%x: tensor<2x16xf32>, %w: tensor<16xbf16>) {
  // expected-error@+1 {{'npu.layer_norm' op weight has element type bf16, expected f32}}
  %0 = npu.layer_norm %x weight %w : tensor<16xbf16> {normalized_shape = array<i64: 16>, eps = 1.0e-05 : f64} : tensor<2x16xf32> -> tensor<2x16xf32>
  func.return
}

// -----

// Rms_norm weight shape.
func.func @rms_norm_weight(%x: tensor<2x8x16xbf16>, %w: tensor<8x16xbf16>) {
  // expected-error@+1 {{'npu.rms_norm' op weight has shape 8x16, expected 16}}
  %0 = npu.rms_norm %x weight %w : tensor<8x16xbf16> {normalized_shape = array<i64: 16>, eps = 1.0e-06 : f64} : tensor<2x8x16xbf16> -> tensor<2x8x16xbf16>
  func.return
}

// -----

// Rms_norm on integers.
func.func @rms_norm_int(%x: tensor<4xi32>) {
  // expected-error@+1 {{'npu.rms_norm' op operand must have a float element type, got i32}}
  %0 = npu.rms_norm %x {normalized_shape = array<i64: 4>, eps = 1.0e-06 : f64} : tensor<4xi32> -> tensor<4xi32>
  func.return
}

// -----

// Mean on integers.
func.func @mean_int(%x: tensor<2x4xi64>) {
  // expected-error@+1 {{'npu.mean' op operand must have a float element type, got i64}}
  %0 = npu.mean %x {dims = array<i64: 1>} : tensor<2x4xi64> -> tensor<2xi64>
  func.return
}

// -----

// Reduction dim out of range.
func.func @sum_dim(%x: tensor<2x4xf32>) {
  // expected-error@+1 {{'npu.sum' op dimension 2 is out of range for rank 2}}
  %0 = npu.sum %x {dims = array<i64: 0, 2>} : tensor<2x4xf32> -> tensor<f32>
  func.return
}

// -----

// Reduction result shape without keepdim.
func.func @mean_result(%x: tensor<2x4xf32>) {
  // expected-error@+1 {{'npu.mean' op result has shape 2x1, expected 2}}
  %0 = npu.mean %x {dims = array<i64: 1>} : tensor<2x4xf32> -> tensor<2x1xf32>
  func.return
}

// -----

// Reduction result shape with keepdim.
func.func @sum_keepdim(%x: tensor<2x4xi64>) {
  // expected-error@+1 {{'npu.sum' op result has shape 2, expected 2x1}}
  %0 = npu.sum %x {dims = array<i64: -1>, keepdim} : tensor<2x4xi64> -> tensor<2xi64>
  func.return
}

// -----

// Embedding weight must be 2-D.
func.func @embedding_rank(%w: tensor<10x4x2xf32>, %i: tensor<3xi64>) {
  // expected-error@+1 {{'npu.embedding' op weight must have rank 2, got rank 3}}
  %0 = npu.embedding %w, %i : (tensor<10x4x2xf32>, tensor<3xi64>) -> tensor<3x4xf32>
  func.return
}

// -----

// Embedding indices must be integers.
func.func @embedding_float_indices(%w: tensor<10x4xf32>, %i: tensor<3xf32>) {
  // expected-error@+1 {{'npu.embedding' op indices must have an integer element type, got f32}}
  %0 = npu.embedding %w, %i : (tensor<10x4xf32>, tensor<3xf32>) -> tensor<3x4xf32>
  func.return
}

// -----

// Embedding indices must not be i1.
func.func @embedding_bool_indices(%w: tensor<10x4xf32>, %i: tensor<3xi1>) {
  // expected-error@+1 {{'npu.embedding' op indices must have an integer element type, got i1}}
  %0 = npu.embedding %w, %i : (tensor<10x4xf32>, tensor<3xi1>) -> tensor<3x4xf32>
  func.return
}

// -----

// Embedding result shape.
func.func @embedding_result(%w: tensor<10x4xf32>, %i: tensor<3xi64>) {
  // expected-error@+1 {{'npu.embedding' op result has shape 3x10, expected 3x4}}
  %0 = npu.embedding %w, %i : (tensor<10x4xf32>, tensor<3xi64>) -> tensor<3x10xf32>
  func.return
}

// -----

// Embedding result element type.
func.func @embedding_type(%w: tensor<10x4xf32>, %i: tensor<3xi64>) {
  // expected-error@+1 {{'npu.embedding' op result has element type i64, expected f32}}
  %0 = npu.embedding %w, %i : (tensor<10x4xf32>, tensor<3xi64>) -> tensor<3x4xi64>
  func.return
}

// -----

// ==== Data movement.

// Shape ops keep the element type.
func.func @view_type(%x: tensor<2x3xf32>) {
  // expected-error@+1 {{'npu.view' op result has element type f16, expected f32}}
  %0 = npu.view %x : tensor<2x3xf32> -> tensor<6xf16>
  func.return
}

// -----

// View element count.
func.func @view_count(%x: tensor<2x3xf32>) {
  // expected-error@+1 {{'npu.view' op cannot reshape 2x3 (6 elements) to 4x2 (8 elements)}}
  %0 = npu.view %x : tensor<2x3xf32> -> tensor<4x2xf32>
  func.return
}

// -----

// Reshape element count.
func.func @reshape_count(%x: tensor<2x3xf32>) {
  // expected-error@+1 {{'npu.reshape' op cannot reshape 2x3 (6 elements) to scalar (1 elements)}}
  %0 = npu.reshape %x : tensor<2x3xf32> -> tensor<f32>
  func.return
}

// -----

// Transpose dim out of range.
func.func @transpose_dim(%x: tensor<2x3x4xf32>) {
  // expected-error@+1 {{'npu.transpose' op dimension 3 is out of range for rank 3}}
  %0 = npu.transpose %x {dim0 = 0 : i64, dim1 = 3 : i64} : tensor<2x3x4xf32> -> tensor<2x3x4xf32>
  func.return
}

// -----

// Transpose result shape.
func.func @transpose_result(%x: tensor<2x3x4xf32>) {
  // expected-error@+1 {{'npu.transpose' op result has shape 2x4x3, expected 4x3x2}}
  %0 = npu.transpose %x {dim0 = 0 : i64, dim1 = -1 : i64} : tensor<2x3x4xf32> -> tensor<2x4x3xf32>
  func.return
}

// -----

// Permute dims with a repeat.
func.func @permute_repeat(%x: tensor<2x3x4xf32>) {
  // expected-error@+1 {{'npu.permute' op dims [0, 0, 1] are not a permutation of rank 3}}
  %0 = npu.permute %x {dims = array<i64: 0, 0, 1>} : tensor<2x3x4xf32> -> tensor<2x2x3xf32>
  func.return
}

// -----

// Permute dims of the wrong length.
func.func @permute_length(%x: tensor<2x3x4xf32>) {
  // expected-error@+1 {{'npu.permute' op dims [1, 0] are not a permutation of rank 3}}
  %0 = npu.permute %x {dims = array<i64: 1, 0>} : tensor<2x3x4xf32> -> tensor<3x2x4xf32>
  func.return
}

// -----

// Permute result shape.
func.func @permute_result(%x: tensor<2x3x4xf32>) {
  // expected-error@+1 {{'npu.permute' op result has shape 4x3x2, expected 4x2x3}}
  %0 = npu.permute %x {dims = array<i64: 2, 0, 1>} : tensor<2x3x4xf32> -> tensor<4x3x2xf32>
  func.return
}

// -----

// Expand to a smaller rank.
func.func @expand_rank(%x: tensor<1x4xf32>) {
  // expected-error@+1 {{'npu.expand' op cannot expand rank 2 to smaller rank 1}}
  %0 = npu.expand %x : tensor<1x4xf32> -> tensor<4xf32>
  func.return
}

// -----

// Expand a non-1 dim.
func.func @expand_dim(%x: tensor<2x4xf32>) {
  // expected-error@+1 {{'npu.expand' op cannot expand 2x4 to 2x8}}
  %0 = npu.expand %x : tensor<2x4xf32> -> tensor<2x8xf32>
  func.return
}

// -----

// Slice step must be positive.
func.func @slice_step(%x: tensor<8x10xf32>) {
  // expected-error@+1 {{'npu.slice' op step must be positive, got 0}}
  %0 = npu.slice %x {dim = 1 : i64, start = 0 : i64, end = 4 : i64, step = 0 : i64} : tensor<8x10xf32> -> tensor<8x4xf32>
  func.return
}

// -----

// Slice result shape.
func.func @slice_result(%x: tensor<8x10xf32>) {
  // expected-error@+1 {{'npu.slice' op result has shape 8x5, expected 8x4}}
  %0 = npu.slice %x {dim = 1 : i64, start = 2 : i64, end = 6 : i64, step = 1 : i64} : tensor<8x10xf32> -> tensor<8x5xf32>
  func.return
}

// -----

// Slice dim out of range.
func.func @slice_dim(%x: tensor<8x10xf32>) {
  // expected-error@+1 {{'npu.slice' op dimension -3 is out of range for rank 2}}
  %0 = npu.slice %x {dim = -3 : i64, start = 0 : i64, end = 4 : i64, step = 1 : i64} : tensor<8x10xf32> -> tensor<4x10xf32>
  func.return
}

// -----

// Unsqueeze result shape.
func.func @unsqueeze_result(%x: tensor<2x3xf32>) {
  // expected-error@+1 {{'npu.unsqueeze' op result has shape 1x2x3, expected 2x1x3}}
  %0 = npu.unsqueeze %x {dim = 1 : i64} : tensor<2x3xf32> -> tensor<1x2x3xf32>
  func.return
}

// -----

// Unsqueeze dim may be at most the input rank.
func.func @unsqueeze_dim(%x: tensor<2x3xf32>) {
  // expected-error@+1 {{'npu.unsqueeze' op dimension 3 is out of range for rank 3}}
  %0 = npu.unsqueeze %x {dim = 3 : i64} : tensor<2x3xf32> -> tensor<2x3x1xf32>
  func.return
}

// -----

// Squeeze of a size-1 dim drops it.
func.func @squeeze_result(%x: tensor<1x4xf32>) {
  // expected-error@+1 {{'npu.squeeze' op result has shape 1x4, expected 4}}
  %0 = npu.squeeze %x {dim = 0 : i64} : tensor<1x4xf32> -> tensor<1x4xf32>
  func.return
}

// -----

// Squeeze of a non-1 dim keeps the shape.
func.func @squeeze_identity(%x: tensor<2x4xf32>) {
  // expected-error@+1 {{'npu.squeeze' op result has shape 4, expected 2x4}}
  %0 = npu.squeeze %x {dim = 0 : i64} : tensor<2x4xf32> -> tensor<4xf32>
  func.return
}

// -----

// Cat with no inputs (generic form).
func.func @cat_empty() {
  // expected-error@+1 {{'npu.cat' op expected at least one input}}
  %0 = "npu.cat"() <{dim = 0 : i64}> : () -> tensor<0xf32>
  func.return
}

// -----

// Cat of rank-0 tensors.
func.func @cat_scalar(%s: tensor<f32>) {
  // expected-error@+1 {{'npu.cat' op zero-dimensional tensors cannot be concatenated}}
  %0 = npu.cat %s, %s {dim = 0 : i64} : (tensor<f32>, tensor<f32>) -> tensor<2xf32>
  func.return
}

// -----

// Cat inputs that differ outside the cat dim.
func.func @cat_shape(%a: tensor<2x3xf32>, %b: tensor<3x3xf32>) {
  // expected-error@+1 {{'npu.cat' op input 1 has shape 3x3, incompatible with 2x3 outside dimension 1}}
  %0 = npu.cat %a, %b {dim = 1 : i64} : (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<2x6xf32>
  func.return
}

// -----

// Cat inputs of different ranks.
func.func @cat_rank(%a: tensor<2x3xf32>, %b: tensor<3xf32>) {
  // expected-error@+1 {{'npu.cat' op input 1 has shape 3, incompatible with 2x3 outside dimension 0}}
  %0 = npu.cat %a, %b {dim = 0 : i64} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<5x3xf32>
  func.return
}

// -----

// Cat input element type.
func.func @cat_type(%a: tensor<2x3xf32>, %b: tensor<2x3xf16>) {
  // expected-error@+1 {{'npu.cat' op input 1 has element type f16, expected f32}}
  %0 = npu.cat %a, %b {dim = 0 : i64} : (tensor<2x3xf32>, tensor<2x3xf16>) -> tensor<4x3xf32>
  func.return
}

// -----

// Cat result shape.
func.func @cat_result(%a: tensor<2x3xf32>, %b: tensor<2x5xf32>) {
  // expected-error@+1 {{'npu.cat' op result has shape 2x7, expected 2x8}}
  %0 = npu.cat %a, %b {dim = -1 : i64} : (tensor<2x3xf32>, tensor<2x5xf32>) -> tensor<2x7xf32>
  func.return
}

// -----

// Cat dim out of range.
func.func @cat_dim(%a: tensor<2x3xf32>) {
  // expected-error@+1 {{'npu.cat' op dimension 2 is out of range for rank 2}}
  %0 = npu.cat %a, %a {dim = 2 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x6xf32>
  func.return
}

// -----

// Split: one size per result.
func.func @split_count(%x: tensor<4x10xf32>) {
  // expected-error@+1 {{'npu.split' op 2 split sizes for 3 results}}
  %0:3 = npu.split %x {dim = 1 : i64, split_sizes = array<i64: 3, 7>} : tensor<4x10xf32> -> tensor<4x3xf32>, tensor<4x7xf32>, tensor<4x0xf32>
  func.return
}

// -----

// Split sizes must add up to the dim size.
func.func @split_sum(%x: tensor<4x10xf32>) {
  // expected-error@+1 {{'npu.split' op split sizes [3, 3] do not add up to dimension 1 size 10}}
  %0:2 = npu.split %x {dim = 1 : i64, split_sizes = array<i64: 3, 3>} : tensor<4x10xf32> -> tensor<4x3xf32>, tensor<4x3xf32>
  func.return
}

// -----

// Split result shape.
func.func @split_result(%x: tensor<4x10xf32>) {
  // expected-error@+1 {{'npu.split' op result 1 has shape 4x6, expected 4x7}}
  %0:2 = npu.split %x {dim = -1 : i64, split_sizes = array<i64: 3, 7>} : tensor<4x10xf32> -> tensor<4x3xf32>, tensor<4x6xf32>
  func.return
}

// -----

// ==== npu.generic: the #npu.operand refs in args must name each operand once.

// An operand that no argument refers to (generic form).
func.func @generic_unreferenced(%x: tensor<4xf32>) {
  // expected-error@+1 {{'npu.generic' op arguments must reference operands 0..0 once each, in order; they reference []}}
  %0 = "npu.generic"(%x) <{opcode = "aten.foo", args = []}> : (tensor<4xf32>) -> tensor<4xf32>
  func.return
}

// -----

// An operand referred to twice (generic form).
func.func @generic_twice(%x: tensor<4xf32>) {
  // expected-error@+1 {{'npu.generic' op arguments must reference operands 0..0 once each, in order; they reference [0, 0]}}
  %0 = "npu.generic"(%x) <{opcode = "aten.foo", args = [#npu.operand<0>, [#npu.operand<0>]]}> : (tensor<4xf32>) -> tensor<4xf32>
  func.return
}

// -----

// Refs out of operand order (generic form).
func.func @generic_order(%x: tensor<4xf32>, %y: tensor<4xi64>) {
  // expected-error@+1 {{'npu.generic' op arguments must reference operands 0..1 once each, in order; they reference [1, 0]}}
  %0 = "npu.generic"(%x, %y) <{opcode = "aten.foo", args = [#npu.operand<1>, #npu.operand<0>]}> : (tensor<4xf32>, tensor<4xi64>) -> tensor<4xf32>
  func.return
}

// -----

// A ref past the last operand (custom form with a literal ref).
func.func @generic_dangling(%x: tensor<4xf32>) {
  // expected-error@+1 {{'npu.generic' op arguments must reference operands 0..0 once each, in order; they reference [0, 1]}}
  npu.generic "aten.foo"(%x, #npu.operand<1>) side_effects : (tensor<4xf32>) -> ()
  func.return
}

// -----

// ==== Rules added after review.

// sdpa: key/value batch dims must match the query's.
func.func @sdpa_batch(%q: tensor<2x8x16x64xf32>, %kv: tensor<3x8x16x64xf32>) {
  // expected-error@+1 {{'npu.sdpa' op key batch dims 3 differ from query's 2}}
  %0 = npu.sdpa %q, %kv, %kv : (tensor<2x8x16x64xf32>, tensor<3x8x16x64xf32>, tensor<3x8x16x64xf32>) -> tensor<2x8x16x64xf32>
  func.return
}

// -----

// Reductions name each dimension at most once.
func.func @reduce_duplicate_dims(%x: tensor<2x3xf32>) {
  // expected-error@+1 {{'npu.sum' op dims [1, -1] name a dimension more than once}}
  %0 = npu.sum %x {dims = array<i64: 1, -1>} : tensor<2x3xf32> -> tensor<2xf32>
  func.return
}

// -----

// A float reduction keeps its element type.
func.func @reduce_element(%x: tensor<2x3xf32>) {
  // expected-error@+1 {{'npu.mean' op result has element type i64, expected f32}}
  %0 = npu.mean %x {dims = array<i64: 1>} : tensor<2x3xf32> -> tensor<2xi64>
  func.return
}

// -----

// Integer and boolean sums accumulate in i64.
func.func @sum_bool_element(%x: tensor<2x3xi1>) {
  // expected-error@+1 {{'npu.sum' op result has element type i1, expected i64}}
  %0 = npu.sum %x {dims = array<i64: 1>} : tensor<2x3xi1> -> tensor<2xi1>
  func.return
}

// -----

// cat keeps the element type.
func.func @cat_element(%a: tensor<2xf32>) {
  // expected-error@+1 {{'npu.cat' op result has element type i64, expected f32}}
  %0 = npu.cat %a, %a {dim = 0 : i64} : (tensor<2xf32>, tensor<2xf32>) -> tensor<4xi64>
  func.return
}

// -----

// split keeps the element type.
func.func @split_element(%a: tensor<4xf32>) {
  // expected-error@+1 {{'npu.split' op result 1 has element type f16, expected f32}}
  %0, %1 = npu.split %a {dim = 0 : i64, split_sizes = array<i64: 2, 2>} : tensor<4xf32> -> tensor<2xf32>, tensor<2xf16>
  func.return
}

// -----

// slice and split need rank >= 1.
func.func @slice_scalar(%a: tensor<f32>) {
  // expected-error@+1 {{'npu.slice' op input must have rank at least 1, got rank 0}}
  %0 = npu.slice %a {dim = 0 : i64, start = 0 : i64, end = 1 : i64, step = 1 : i64} : tensor<f32> -> tensor<f32>
  func.return
}

// -----

// where: an integer tensor with a float scalar promotes to float; other changes are errors.
func.func @where_element(%c: tensor<4xi1>, %t: tensor<4xi64>, %u: tensor<4xi64>) {
  %ok = npu.where %c, %t {scalar = 5.000000e-01 : f64} : (tensor<4xi1>, tensor<4xi64>) -> tensor<4xf32>
  // expected-error@+1 {{'npu.where' op result has element type f32, expected i64}}
  %0 = npu.where %c, %t, %u : (tensor<4xi1>, tensor<4xi64>, tensor<4xi64>) -> tensor<4xf32>
  func.return
}

// -----

// Planning attributes: `live` holds one ordered [start, end] pair per result.
func.func @bad_live(%x: tensor<4xf32>) {
  // expected-error@+1 {{'npu.exp' op live must hold one [start, end] pair with start <= end per result (1 results), got [3, 1]}}
  %0 = npu.exp %x {live = array<i64: 3, 1>} : tensor<4xf32>
  func.return
}

// -----

// Planning attributes: a `buffer` array names one buffer per result.
func.func @bad_buffer(%x: tensor<4xf32>) {
  // expected-error@+1 {{'npu.split' op buffer must name one buffer per result (2), got [0]}}
  %0, %1 = npu.split %x {dim = 0 : i64, split_sizes = array<i64: 2, 2>, buffer = array<i64: 0>} : tensor<4xf32> -> tensor<2xf32>, tensor<2xf32>
  func.return
}

// -----

// cache_update: the cache is state the caller owns, so it must be a function argument.
func.func @cache_not_argument(%x: tensor<8x4xf32>, %p: tensor<1xi64>, %u: tensor<1x4xf32>) {
  %c = npu.exp %x : tensor<8x4xf32>
  // expected-error@+1 {{'npu.cache_update' op cache must be a function argument (state the caller owns)}}
  %0 = npu.cache_update %c[%p] = %u {dim = 0 : i64} : tensor<8x4xf32>, tensor<1xi64>, tensor<1x4xf32>
  func.return
}

// -----

// cache_update: the rows have the cache's shape outside `dim`, one row per position.
func.func @cache_rows(%c: tensor<8x4xf32>, %p: tensor<2xi64>, %u: tensor<1x4xf32>) {
  // expected-error@+1 {{'npu.cache_update' op update has shape 1x4, expected 2x4}}
  %0 = npu.cache_update %c[%p] = %u {dim = 0 : i64} : tensor<8x4xf32>, tensor<2xi64>, tensor<1x4xf32>
  func.return
}

// -----

// cached_attention: a window holds at least the query's own position.
func.func @cached_attention_window(%q: tensor<1x2x1x4xf32>, %k: tensor<1x2x1x4xf32>, %v: tensor<1x2x1x4xf32>, %kc: tensor<1x2x32x4xf32>, %vc: tensor<1x2x32x4xf32>, %s: tensor<1xi64>) {
  // expected-error@+1 {{'npu.cached_attention' op window must be at least 1, got 0}}
  %0 = npu.cached_attention %q, %k, %v into %kc, %vc at %s {scale = 5.000000e-01 : f64, window = 0 : i64} : (tensor<1x2x1x4xf32>, tensor<1x2x1x4xf32>, tensor<1x2x1x4xf32>, tensor<1x2x32x4xf32>, tensor<1x2x32x4xf32>, tensor<1xi64>) -> tensor<1x2x1x4xf32>
  func.return
}
