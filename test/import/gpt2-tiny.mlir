// `forge import` on the tiny GPT-2: ATen ops become named npu ops, tied weights are one
// argument, unknown ops stay npu.generic with a note, and the text parses back.

// RUN: forge import gpt2 --tiny --seq 8 -o %t.mlir 2> %t.notes
// RUN: filecheck %s < %t.mlir
// RUN: filecheck %s --check-prefix=NOTES < %t.notes
// RUN: forge-opt %t.mlir | filecheck %s

// CHECK:      func.func @forward(%input_ids: tensor<1x8xi64>, %attention_mask: tensor<1x8xi64>, %transformer.wte.weight: tensor<256x64xf32>, %transformer.wpe.weight: tensor<256x64xf32>,
// CHECK-NOT:  %lm_head.weight
// CHECK-SAME: -> tensor<1x8x256xf32>
// CHECK:      npu.embedding %transformer.wte.weight, %{{.*}} : (tensor<256x64xf32>, tensor<1x8xi64>) -> tensor<1x8x64xf32>
// CHECK:      npu.generic "aten._assert_tensor_metadata.default"({{.*}}) kwargs {{{.*}}} side_effects
// CHECK:      npu.layer_norm %{{.*}} weight %transformer.h.0.ln_1.weight : tensor<64xf32> bias %transformer.h.0.ln_1.bias : tensor<64xf32> {normalized_shape = array<i64: 64>, eps = 1.000000e-05 : f64}
// CHECK:      npu.addmm %transformer.h.0.attn.c_attn.bias, %{{.*}}, %transformer.h.0.attn.c_attn.weight : (tensor<192xf32>, tensor<8x64xf32>, tensor<64x192xf32>) -> tensor<8x192xf32>
// CHECK:      %{{.*}}, %{{.*}}, %{{.*}} = npu.split %{{.*}} {dim = 2 : i64, split_sizes = array<i64: 64, 64, 64>}
// CHECK:      npu.transpose %{{.*}} {dim0 = -1 : i64, dim1 = -2 : i64}
// CHECK:      npu.matmul
// CHECK:      npu.softmax %{{.*}} {dim = -1 : i64} : tensor<1x4x8x8xf32>
// CHECK:      npu.dropout %{{.*}} {p = 0.000000e+00 : f64} : tensor<1x4x8x8xf32>
// CHECK:      npu.pow %{{.*}} {scalar = 3.000000e+00 : f64}
// CHECK:      npu.tanh
// CHECK:      npu.linear %{{.*}}, %transformer.wte.weight : (tensor<1x8x64xf32>, tensor<256x64xf32>) -> tensor<1x8x256xf32>
// CHECK-NEXT: func.return

// NOTES: note: tied weights share one argument: transformer.wte.weight
// NOTES: note: aten.arange.default: no named npu op, kept as npu.generic on the CPU
// NOTES: gpt2: {{[0-9]+}} ops, 28 weight arguments; torch.export {{[0-9.]+}} s, import {{[0-9.]+}} s
