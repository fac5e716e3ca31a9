// -t python prints the plan CompiledNPUExecutor runs as a Python program: NNFactory
// graph-building calls per segment, then run(...) of segment calls and CPU callables.

// RUN: forge-opt %s -p forge-pipeline -t python | filecheck %s
// RUN: forge-opt %s -p forge-pipeline --emit=python | filecheck %s
// RUN: forge-opt %s -p forge-pipeline -t "python{granularity=op}" | filecheck %s --check-prefix=OP
// RUN: forge-opt %s -p forge-pipeline -t "python{precision=fp16}" | filecheck %s --check-prefix=FP16
// RUN: forge-opt %s -p forge-pipeline -t 'python{profile="%S/../transforms/Inputs/host-profile-fp16-narrow.json" precision=fp16}' | filecheck %s --check-prefix=FP16-NARROW
// RUN: forge-opt %s -p forge-pipeline -t 'python{profile="%S/../transforms/Inputs/host-profile-fp16-wide.json" precision=fp16}' | filecheck %s --check-prefix=FP16-WIDE
// RUN: forge-opt %s -p forge-pipeline -t "python{precision=int8}" | filecheck %s --check-prefix=INT8
// RUN: forge-opt %s -p forge-pipeline -t "python{precision=mixed}" | filecheck %s --check-prefix=MIXED
// RUN: forge-opt %s -p forge-pipeline -t "python{weights=parameters}" | filecheck %s --check-prefix=PARAMS
// RUN: forge-opt %s -p forge-pipeline -t 'python{profile="%S/../transforms/Inputs/host-profile-apart.json"}' | filecheck %s --check-prefix=APART
// RUN: forge-opt %s -p forge-pipeline -t 'python{profile="%S/../transforms/Inputs/host-profile-apart.json" precision=int8}' | filecheck %s --check-prefix=APART-INT8
// RUN: forge-opt %s -p forge-pipeline -t 'python{profile="%S/../transforms/Inputs/host-profile-npu.json"}' | filecheck %s --check-prefix=APART-NONE
// RUN: not forge-opt %s -p forge-pipeline -t 'python{profile="%S/no-such-profile.json"}' 2>&1 | filecheck %s --check-prefix=APART-MISSING
// RUN: forge-opt %s -p forge-pipeline -t 'python{profile="%S/../transforms/Inputs/host-profile-onednn.json"}' | filecheck %s --check-prefix=ONEDNN
// RUN: forge-opt %s -p forge-pipeline -t 'python{profile="%S/../transforms/Inputs/host-profile-onednn.json" precision=int8}' | filecheck %s --check-prefix=ONEDNN-INT8

// The GPT-2 attention sample: the split is three StridedSlices, the attention MatMul,
// Softmax, MatMul with the keys read transposed in place (conversion/attention.py),
// and the CPU computes the mask first.
// RUN: forge-opt %samples/gpt2_attention.mlir -p forge-pipeline -t python | filecheck %s --check-prefix=ATTN
// ATTN:      const_0 = torch.tensor(0.0, dtype=torch.float32)
// ATTN:      # %q, %k, %v = npu.split @ line 9
// ATTN:      t9 = strided_slice(f, t5, t6, t7, t8, [0, 0, 0], [0, 0, 0])
// ATTN:      # %ctx = npu.sdpa
// ATTN-NEXT: t24 = f.matmul(t19, t21, False, True)
// ATTN:      t28 = f.softmax(t27, -1)
// ATTN-NEXT: t29 = f.matmul(t28, t23, False, False)
// ATTN:      # %ctx_c = npu.contiguous @ line 25: no node of its own
// ATTN-LABEL: def run(hidden, c_attn_weight, c_attn_bias, mask):
// ATTN-NEXT:   # cpu: %attn_zero = npu.constant
// ATTN-NEXT:   v0 = const_0
// ATTN-NEXT:   # cpu: %attn_mask = npu.where
// ATTN-NEXT:   v1 = torch.ops.aten.where.ScalarOther(mask, v0, -3.4028234663852886e+38)
// ATTN-NEXT:   # npu: seg0: 16 ops, %flat = npu.view @ line 6 .. %sum = npu.view @ line 30
// ATTN-NEXT:   (v19,) = seg0(hidden, c_attn_bias, c_attn_weight, v1)

// The program is Python: executed, build(W) compiles every graph with the weights
// baked in, and run(...) gives each row of the softmax summing to one.
// RUN: forge-opt %s -p forge-pipeline -t python -o %t.py
// RUN: python -c "import runpy, torch; ns = runpy.run_path('%t.py'); w = {'fc.weight': torch.randn(16, 8), 'fc.bias': torch.randn(16), 'proj.weight': torch.randn(8, 16)}; ns['build'](w); print(ns['run'](torch.randn(2, 8), *w.values())[0].sum(-1).tolist())" | filecheck %s --check-prefix=EXEC
// EXEC: [{{1\.0|0\.99999}}{{[0-9]*}}, {{1\.0|0\.99999}}{{[0-9]*}}]

// Two NPU runs around the CPU cumsum: two segments, one CPU callable. Weights are
// baked into the graphs as constants (the executor's default): each build function
// takes the weights W by name and converts each as the executor does. Comments name
// each op and its line in this file (the function at the end: %c, %y, %s), the graph
// parameter each segment input binds, and the arena buffer of each intermediate; ops
// a pass created (npu.fused_linear) have no line.
// CHECK:      """Forge plan of @mlp (precision fp32, granularity segment, weights constants): 3 steps, 2 NNFactory segment(s) of 3 op(s), 1 CPU callable(s), 2 NPU<->CPU transition(s).
// CHECK:      NNFactory = load_backend().NNFactory
// CHECK-LABEL: def build_seg0(W) -> GraphCall:
// CHECK-NEXT:     f = NNFactory()
// CHECK-NEXT:     p0 = f.parameter([2, 8], np.float32)  # x
// CHECK-NEXT:     (w0,) = weight_arrays(W["fc.weight"], np.float32)
// CHECK-NEXT:     t0 = f.constant(w0)
// CHECK-NEXT:     (w1,) = weight_arrays(W["fc.bias"], np.float32)
// CHECK-NEXT:     t1 = f.constant(w1)
// CHECK-NEXT:     # %g = npu.fused_linear
// CHECK-NEXT:     t2 = f.matmul(p0, t0, False, True)
// CHECK-NEXT:     t3 = f.eltwise_add(t2, t1)
// CHECK-NEXT:     t4 = f.gelu(t3)
// CHECK-NEXT:     f.output_nodes = [t4.node]
// CHECK-NEXT:     f.compile()
// CHECK-NEXT:     return GraphCall(f, inputs=[GraphInput(np.float32), GraphInput(np.float32, constant=True), GraphInput(np.float32, constant=True)], results=[(True, 0)], dtypes=[torch.float32])
// CHECK-LABEL: def build_seg1(W) -> GraphCall:
// CHECK:          # %y = npu.linear @ line [[Y:[0-9]+]]
// CHECK-NEXT:     t1 = f.matmul(p0, t0, False, True)
// CHECK-NEXT:     # %s = npu.softmax @ line [[S:[0-9]+]]
// CHECK-NEXT:     t2 = f.softmax(t1, 1)
// CHECK-LABEL: def build(W):
// CHECK:          global seg0, seg1
// CHECK-NEXT:     seg0 = build_seg0(W)
// CHECK-NEXT:     seg1 = build_seg1(W)
// CHECK-LABEL: def run(x, fc_weight, fc_bias, proj_weight):
// CHECK-NEXT:     # npu: seg0: %g = npu.fused_linear @ line {{[0-9]+}} [arena: v0 in buffer 0 @ byte 0]
// CHECK-NEXT:     (v0,) = seg0(x, fc_weight, fc_bias)
// CHECK-NEXT:     # cpu: %c = npu.generic "aten.cumsum.default" @ line {{[0-9]+}} [arena: v1 in buffer 1 @ byte 128]
// CHECK-NEXT:     v1 = torch.ops.aten.cumsum.default(v0, 1)
// CHECK-NEXT:     # npu: seg1: 2 ops, %y = npu.linear @ line [[Y]] .. %s = npu.softmax @ line [[S]]
// CHECK-NEXT:     (v3,) = seg1(v1, proj_weight)
// CHECK-NEXT:     return (v3,)

// With a host profile that measured OpenVINO's MLAS kernel faster without the
// activation fused in (2 rows here), the fp32 linear's result goes through
// max(y, y) (eltwise_max), bit for bit y, which OpenVINO cannot fuse into its
// FullyConnected; it and the GELU fuse into one Eltwise instead. Computed apart, the tanh
// GELU is x * sigmoid(x * (2k + 2ka * x^2)) (0.5 * (1 + tanh(z)) == sigmoid(2z)):
// OpenVINO's Tanh costs about three times its Sigmoid.
// APART:      # %g = npu.fused_linear
// APART-NEXT: t2 = f.matmul(p0, t0, False, True)
// APART-NEXT: t3 = f.eltwise_add(t2, t1)
// APART-NEXT: t4 = eltwise_extreme(f, "eltwise_max", t3, t3)
// APART-NEXT: t5 = f.eltwise_mul(t4, t4)
// APART-NEXT: t6 = f.constant(np.array(0.07135481387376785, dtype=np.float32))
// APART-NEXT: t7 = f.eltwise_mul(t5, t6)
// APART-NEXT: t8 = f.constant(np.array(1.5957691669464111, dtype=np.float32))
// APART-NEXT: t9 = f.eltwise_add(t7, t8)
// APART-NEXT: t10 = f.eltwise_mul(t4, t9)
// APART-NEXT: t11 = f.sigmoid(t10)
// APART-NEXT: t12 = f.eltwise_mul(t4, t11)
// APART-NOT:  f.gelu(
// Not with int8 weights (no MLAS kernel for them), nor with a profile that measured
// no difference (none: OpenVINO's fused form).
// APART-INT8-NOT: eltwise_extreme(
// APART-NONE-NOT: eltwise_extreme(
// APART-MISSING: forge-opt: error: cannot read host profile {{.*}}no-such-profile.json: No such file or directory

// With a profile that measured every linear faster on oneDNN's kernel (2 rows here),
// the activation stays fused (oneDNN's already) and the plain linear's result goes
// through PRelu(y, 1), bit for bit y (NaN and infinities too), which OpenVINO fuses
// into the FullyConnected as a post-op, so that it leaves MLAS.
// ONEDNN:      # %g = npu.fused_linear
// ONEDNN-NEXT: t2 = f.matmul(p0, t0, False, True)
// ONEDNN-NEXT: t3 = f.eltwise_add(t2, t1)
// ONEDNN-NEXT: t4 = f.gelu(t3)
// ONEDNN:      # %y = npu.linear @ line {{[0-9]+}}
// ONEDNN-NEXT: t1 = f.matmul(p0, t0, False, True)
// ONEDNN-NEXT: t2 = f.constant(np.array([1.0], dtype=np.float32))
// ONEDNN-NEXT: t3 = f.prelu(t1, t2)
// ONEDNN-NEXT: # %s = npu.softmax
// ONEDNN-NEXT: t4 = f.softmax(t3, 1)
// Not with int8 weights (oneDNN's is their only kernel).
// ONEDNN-INT8-NOT: prelu

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

// fp16: activations stay fp32; linear weights are kept fp16 (no host profile measured
// otherwise): fp16 constants behind a Convert marked as a decompression, the graph
// marked as a language model's; the bias is no linear weight and stays as it is.
// FP16:       p0 = f.parameter([2, 8], np.float32)  # x
// FP16-NEXT:  (w0,) = weight_arrays(W["fc.weight"], np.float32, "fp16")
// FP16-NEXT:  t0 = f.constant(w0)
// FP16-NEXT:  t1 = f.to(t0, np.float32)
// FP16-NEXT:  mark_decompression(t1)
// FP16-NEXT:  (w1,) = weight_arrays(W["fc.bias"], np.float32)
// FP16:       t3 = f.matmul(p0, t1, False, True)
// FP16:       mark_llm(f)
// FP16-NEXT:  f.compile()
// FP16-NEXT:  return GraphCall(f, inputs=[GraphInput(np.float32), GraphInput(np.float32, "fp16", constant=True), GraphInput(np.float32, constant=True)]

// fp16 with a profile that measured them faster kept fp16: the same form.
// FP16-NARROW:       (w0,) = weight_arrays(W["fc.weight"], np.float32, "fp16")
// FP16-NARROW-NEXT:  t0 = f.constant(w0)
// FP16-NARROW-NEXT:  t1 = f.to(t0, np.float32)
// FP16-NARROW-NEXT:  mark_decompression(t1)
// FP16-NARROW:       t3 = f.matmul(p0, t1, False, True)
// FP16-NARROW:       mark_llm(f)
// FP16-NARROW-NEXT:  f.compile()
// FP16-NARROW-NEXT:  return GraphCall(f, inputs=[GraphInput(np.float32), GraphInput(np.float32, "fp16", constant=True), GraphInput(np.float32, constant=True)]

// fp16 with a profile that measured the fp32 weights faster: those, as they are (no
// copy, no mark), as the fp32 program binds them.
// FP16-WIDE:       (w0,) = weight_arrays(W["fc.weight"], np.float32)
// FP16-WIDE-NEXT:  t0 = f.constant(w0)
// FP16-WIDE-NOT:   mark_
// FP16-WIDE:       return GraphCall(f, inputs=[GraphInput(np.float32), GraphInput(np.float32, constant=True), GraphInput(np.float32, constant=True)], results=[(True, 0)], dtypes=[torch.float32])

// int8: every linear weight is stored int8 with one scale per output channel, two
// constants the graph converts and multiplies back (Convert, Multiply, MatMul);
// activations and the bias stay fp32.
// INT8:       (precision int8, granularity segment, weights constants)
// INT8-LABEL: def build_seg0(W) -> GraphCall:
// INT8-NEXT:    f = NNFactory()
// INT8-NEXT:    p0 = f.parameter([2, 8], np.float32)  # x
// INT8-NEXT:    (w0, w1) = weight_arrays(W["fc.weight"], np.float32, "int8", reduce_dim=1)
// INT8-NEXT:    t0 = f.constant(w0)
// INT8-NEXT:    t1 = f.constant(w1)
// INT8-NEXT:    t2 = f.to(t0, np.float32)
// INT8-NEXT:    t3 = f.eltwise_mul(t2, t1)
// INT8-NEXT:    (w2,) = weight_arrays(W["fc.bias"], np.float32)
// INT8-NEXT:    t4 = f.constant(w2)
// INT8-NEXT:    # %g = npu.fused_linear
// INT8-NEXT:    t5 = f.matmul(p0, t3, False, True)
// INT8:         return GraphCall(f, inputs=[GraphInput(np.float32), GraphInput(np.float32, "int8", reduce_dim=1, constant=True), GraphInput(np.float32, constant=True)], results=[(True, 0)], dtypes=[torch.float32])
// INT8-LABEL: def build_seg1(W) -> GraphCall:
// INT8:         (w0, w1) = weight_arrays(W["proj.weight"], np.float32, "int8", reduce_dim=1)

// mixed: the int8 storage of int8, except where an op's `precision` asks for more
// (%y's weight is kept fp16, as fp16 is without a profile).
// MIXED:       (w0, w1) = weight_arrays(W["fc.weight"], np.float32, "int8", reduce_dim=1)
// MIXED-LABEL: def build_seg1(W) -> GraphCall:
// MIXED:         (w0,) = weight_arrays(W["proj.weight"], np.float32, "fp16")
// MIXED-NEXT:    t0 = f.constant(w0)
// MIXED-NEXT:    t1 = f.to(t0, np.float32)
// MIXED-NEXT:    mark_decompression(t1)
// MIXED-NEXT:    # %y = npu.linear
// MIXED:         return GraphCall(f, inputs=[GraphInput(np.float32), GraphInput(np.float32, "fp16", constant=True)], results=[(True, 0)], dtypes=[torch.float32])

func.func @mlp(%x: tensor<2x8xf32>, %fc.weight: tensor<16x8xf32>, %fc.bias: tensor<16xf32>, %proj.weight: tensor<8x16xf32>) -> tensor<2x8xf32> {
  %h = npu.linear %x, %fc.weight, %fc.bias : (tensor<2x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<2x16xf32>
  %g = npu.gelu %h {approximate = "tanh"} : tensor<2x16xf32>
  %c = npu.generic "aten.cumsum.default"(%g, 1 : i64) : (tensor<2x16xf32>) -> tensor<2x16xf32>
  %y = npu.linear %c, %proj.weight {precision = "fp16"} : (tensor<2x16xf32>, tensor<8x16xf32>) -> tensor<2x8xf32>
  %s = npu.softmax %y {dim = -1 : i64} : tensor<2x8xf32>
  func.return %s : tensor<2x8xf32>
}

// PARAMS: weights parameters
// PARAMS: def build_seg0() -> GraphCall:
// PARAMS: f.parameter([16, 8], np.float32)  # fc_weight
// PARAMS: seg0 = build_seg0()
