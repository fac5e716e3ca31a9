// --emit=dot draws the function: ops coloured by device, each run of NPU ops (one
// NNFactory graph) as a cluster, SSA uses as edges.

// RUN: forge-opt %samples/gpt2_attention.mlir -p forge-pipeline --emit=dot | filecheck %s
// CHECK:      digraph "gpt2_attention" {
// CHECK:      op0 [label="constant\nf32", fillcolor="#fdae6b"];
// CHECK-NEXT: op1 [label="where\n1x1x8x8xf32", fillcolor="#fdae6b"];
// CHECK:      [label="sdpa\n1x2x8x16xf32", fillcolor="#9ecae1"];
// CHECK:      subgraph cluster_0 { label="NNFactory graph 0";
// CHECK-NOT:  subgraph cluster_1
// CHECK:      op0 -> op1;
// CHECK:      -> return;
// CHECK-NEXT: }

// Unplaced IR: grey nodes, no clusters; generic ops show their ATen opcode.
// RUN: forge-opt %s --emit=dot | filecheck %s --check-prefix=RAW
// RAW:      op0 [label="generic\naten.cumsum.default\n4xf32", fillcolor="#d9d9d9"];
// RAW-NOT:  subgraph
func.func @raw(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = npu.generic "aten.cumsum.default"(%x, 0 : i64) : (tensor<4xf32>) -> tensor<4xf32>
  func.return %0 : tensor<4xf32>
}
