// -t python prints the plan CompiledNPUExecutor runs as a Python program: NNFactory
// graph-building calls per segment, then run(...) of segment calls and CPU callables.

// RUN: forge-opt %s -p forge-pipeline -t python | filecheck %s
// RUN: forge-opt %s -p forge-pipeline --emit=python | filecheck %s
// RUN: forge-opt %s -p forge-pipeline -t "python{granularity=op}" | filecheck %s --check-prefix=OP
// RUN: forge-opt %s -p forge-pipeline -t "python{precision=fp16}" | filecheck %s --check-prefix=FP16

// The GPT-2 attention sample: the split is three StridedSlices, the attention one SDPA
// node, and the CPU computes the mask first.
// RUN: forge-opt %samples/gpt2_attention.mlir -p forge-pipeline -t python | filecheck %s --check-prefix=ATTN
// ATTN:      const_0 = torch.tensor(0.0, dtype=torch.float32)
// ATTN:      # %q, %k, %v = npu.split @ line 9
// ATTN:      t7 = strided_slice(f, t3, t4, t5, t6, [0, 0, 0], [0, 0, 0])
// ATTN:      t22 = f.scaled_dot_product_attention(t17, t19, t21, p3, False)
// ATTN:      # %ctx_c = npu.contiguous @ line 25: no node of its own
// ATTN-LABEL: def run(hidden, c_attn_weight, c_attn_bias, mask):
// ATTN-NEXT:   # cpu: %attn_zero = npu.constant
// ATTN-NEXT:   v0 = const_0
// ATTN-NEXT:   # cpu: %attn_mask = npu.where
// ATTN-NEXT:   v1 = torch.ops.aten.where.ScalarOther(mask, v0, -3.4028234663852886e+38)
// ATTN-NEXT:   # npu: seg0: 16 ops, %flat = npu.view @ line 6 .. %sum = npu.view @ line 30
// ATTN-NEXT:   (v19,) = seg0(hidden, c_attn_bias, c_attn_weight, v1)

// The program is Python that builds and compiles every graph when run.
// RUN: forge-opt %s -p forge-pipeline -t python -o %t.py
// RUN: python %t.py

// Two NPU runs around the CPU cumsum: two segments, one CPU callable. Comments name
// each op and its line in this file (the function below: %c, %y, %s on lines 79-81);
// ops a pass created (npu.fused_linear) have no line.
// CHECK:      """Forge plan of @mlp (precision fp32, granularity segment): 3 steps, 2 NNFactory segment(s) of 3 op(s), 1 CPU callable(s), 2 NPU<->CPU transition(s).
// CHECK:      NNFactory = load_backend().NNFactory
// CHECK-LABEL: def build_seg0() -> GraphCall:
// CHECK-NEXT:     f = NNFactory()
// CHECK-NEXT:     p0 = f.parameter([2, 8], np.float32)  # x
// CHECK-NEXT:     p1 = f.parameter([16, 8], np.float32)  # fc_weight
// CHECK-NEXT:     p2 = f.parameter([16], np.float32)  # fc_bias
// CHECK-NEXT:     # %g = npu.fused_linear
// CHECK-NEXT:     t0 = f.matmul(p0, p1, False, True)
// CHECK-NEXT:     t1 = f.eltwise_add(t0, p2)
// CHECK-NEXT:     t2 = f.gelu(t1)
// CHECK-NEXT:     f.output_nodes = [t2.node]
// CHECK-NEXT:     f.compile()
// CHECK-NEXT:     return GraphCall(f, inputs=[torch.float32, torch.float32, torch.float32], results=[(True, 0)], dtypes=[torch.float32])
// CHECK:      seg0 = build_seg0()
// CHECK-LABEL: def build_seg1() -> GraphCall:
// CHECK:          # %y = npu.linear @ line 80
// CHECK-NEXT:     t0 = f.matmul(p0, p1, False, True)
// CHECK-NEXT:     # %s = npu.softmax @ line 81
// CHECK-NEXT:     t1 = f.softmax(t0, 1)
// CHECK-LABEL: def run(x, fc_weight, fc_bias, proj_weight):
// CHECK-NEXT:     # npu: seg0: %g = npu.fused_linear
// CHECK-NEXT:     (v0,) = seg0(x, fc_weight, fc_bias)
// CHECK-NEXT:     # cpu: %c = npu.generic "aten.cumsum.default" @ line 79
// CHECK-NEXT:     v1 = torch.ops.aten.cumsum.default(v0, 1)
// CHECK-NEXT:     # npu: seg1: 2 ops, %y = npu.linear @ line {{[0-9]+}} .. %s = npu.softmax @ line {{[0-9]+}}
// CHECK-NEXT:     (v3,) = seg1(v1, proj_weight)
// CHECK-NEXT:     return (v3,)

// Granularity op: one segment (one dispatch) per NPU op.
// OP:         4 steps, 3 NNFactory segment(s) of 3 op(s), 1 CPU callable(s)
// OP-LABEL:   def run(
// OP-NEXT:      # npu: seg0: %g = npu.fused_linear
// OP-NEXT:      (v0,) = seg0(x, fc_weight, fc_bias)
// OP:           v1 = torch.ops.aten.cumsum.default(v0, 1)
// OP-NEXT:      # npu: seg1: %y = npu.linear
// OP-NEXT:      (v2,) = seg1(v1, proj_weight)
// OP-NEXT:      # npu: seg2: %s = npu.softmax
// OP-NEXT:      (v3,) = seg2(v2)

// fp16: the graph's parameters are fp16; the boundary converts back to the IR's f32.
// FP16:       p0 = f.parameter([2, 8], np.float16)  # x
// FP16:       return GraphCall(f, inputs=[torch.float16, torch.float16, torch.float16], results=[(True, 0)], dtypes=[torch.float32])

func.func @mlp(%x: tensor<2x8xf32>, %fc.weight: tensor<16x8xf32>, %fc.bias: tensor<16xf32>, %proj.weight: tensor<8x16xf32>) -> tensor<2x8xf32> {
  %h = npu.linear %x, %fc.weight, %fc.bias : (tensor<2x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<2x16xf32>
  %g = npu.gelu %h {approximate = "tanh"} : tensor<2x16xf32>
  %c = npu.generic "aten.cumsum.default"(%g, 1 : i64) : (tensor<2x16xf32>) -> tensor<2x16xf32>
  %y = npu.linear %c, %proj.weight : (tensor<2x16xf32>, tensor<8x16xf32>) -> tensor<2x8xf32>
  %s = npu.softmax %y {dim = -1 : i64} : tensor<2x8xf32>
  func.return %s : tensor<2x8xf32>
}
