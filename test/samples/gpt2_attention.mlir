// One GPT-2 attention block at the ATen level, as the importer will produce it
// (batch 1, seq 8, 2 heads of 16). It holds a duplicated view and a dead transpose,
// so `-p cse,dce` has work to do.
func.func @gpt2_attention(%hidden: tensor<1x8x32xf32>, %c_attn.weight: tensor<32x96xf32>,
                          %c_attn.bias: tensor<96xf32>, %mask: tensor<1x1x8x8xi1>) -> tensor<1x8x32xf32> {
  %flat = npu.view %hidden : tensor<1x8x32xf32> -> tensor<8x32xf32>
  %qkv2d = npu.addmm %c_attn.bias, %flat, %c_attn.weight : (tensor<96xf32>, tensor<8x32xf32>, tensor<32x96xf32>) -> tensor<8x96xf32>
  %qkv = npu.view %qkv2d : tensor<8x96xf32> -> tensor<1x8x96xf32>
  %q, %k, %v = npu.split %qkv {dim = 2 : i64, split_sizes = array<i64: 32, 32, 32>} : tensor<1x8x96xf32> -> tensor<1x8x32xf32>, tensor<1x8x32xf32>, tensor<1x8x32xf32>
  %q4 = npu.view %q : tensor<1x8x32xf32> -> tensor<1x8x2x16xf32>
  %qh = npu.transpose %q4 {dim0 = 1 : i64, dim1 = 2 : i64} : tensor<1x8x2x16xf32> -> tensor<1x2x8x16xf32>
  %k4 = npu.view %k : tensor<1x8x32xf32> -> tensor<1x8x2x16xf32>
  %kh = npu.transpose %k4 {dim0 = 1 : i64, dim1 = 2 : i64} : tensor<1x8x2x16xf32> -> tensor<1x2x8x16xf32>
  %v4 = npu.view %v : tensor<1x8x32xf32> -> tensor<1x8x2x16xf32>
  %vh = npu.transpose %v4 {dim0 = 1 : i64, dim1 = 2 : i64} : tensor<1x8x2x16xf32> -> tensor<1x2x8x16xf32>
  %kt = npu.transpose %kh {dim0 = -1 : i64, dim1 = -2 : i64} : tensor<1x2x8x16xf32> -> tensor<1x2x16x8xf32>
  %scores = npu.matmul %qh, %kt : (tensor<1x2x8x16xf32>, tensor<1x2x16x8xf32>) -> tensor<1x2x8x8xf32>
  %scaled = npu.div %scores {scalar = 4.000000e+00 : f64} : (tensor<1x2x8x8xf32>) -> tensor<1x2x8x8xf32>
  %masked = npu.where %mask, %scaled {scalar = -3.4028234663852886e+38 : f64} : (tensor<1x1x8x8xi1>, tensor<1x2x8x8xf32>) -> tensor<1x2x8x8xf32>
  %probs = npu.softmax %masked {dim = -1 : i64} : tensor<1x2x8x8xf32>
  %dropped = npu.dropout %probs {p = 1.000000e-01 : f64} : tensor<1x2x8x8xf32>
  %ctx = npu.matmul %dropped, %vh : (tensor<1x2x8x8xf32>, tensor<1x2x8x16xf32>) -> tensor<1x2x8x16xf32>
  %ctx_t = npu.transpose %ctx {dim0 = 1 : i64, dim1 = 2 : i64} : tensor<1x2x8x16xf32> -> tensor<1x8x2x16xf32>
  %unused = npu.transpose %ctx {dim0 = 2 : i64, dim1 = 3 : i64} : tensor<1x2x8x16xf32> -> tensor<1x2x16x8xf32>
  %ctx_c = npu.contiguous %ctx_t : tensor<1x8x2x16xf32>
  %out = npu.view %ctx_c : tensor<1x8x2x16xf32> -> tensor<1x8x32xf32>
  %flat_again = npu.view %hidden : tensor<1x8x32xf32> -> tensor<8x32xf32>
  %res2d = npu.view %out : tensor<1x8x32xf32> -> tensor<8x32xf32>
  %sum2d = npu.add %res2d, %flat_again : (tensor<8x32xf32>, tensor<8x32xf32>) -> tensor<8x32xf32>
  %sum = npu.view %sum2d : tensor<8x32xf32> -> tensor<1x8x32xf32>
  func.return %sum : tensor<1x8x32xf32>
}
