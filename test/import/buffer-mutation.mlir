// A model that mutates a buffer in forward: torch.export's functionalized graph names
// the mutation, and the importer makes it explicit: the buffer's new value is the
// function's last result, and `npu.writes` names the argument it is written back to.

// RUN: forge import %S/Inputs/stateful.py:counter 2>/dev/null | filecheck %s
// CHECK: func.func @forward(%x: tensor<4x8xf32>, %l.weight: tensor<8x8xf32>, %l.bias: tensor<8xf32>, %count: tensor<f32>) -> (tensor<4x8xf32>, tensor<f32>) attributes {npu.writes = ["count"]}
// CHECK:   %[[NEW:.*]] = npu.add %count {scalar = 1 : i64}
// CHECK:   func.return %{{.*}}, %[[NEW]] : tensor<4x8xf32>, tensor<f32>

// The plan writes the state back in place and returns the model's output only.
// RUN: forge import %S/Inputs/stateful.py:counter 2>/dev/null | forge-opt -p forge-pipeline -t python | filecheck %s --check-prefix=PLAN
// PLAN: def run(x, l_weight, l_bias, count):
// PLAN: count.copy_(v0)  # npu.writes
// PLAN-NEXT: return (v2,)

// BatchNorm in train mode updates its running statistics (three buffers).
// RUN: forge import %S/Inputs/stateful.py:bn_train 2>/dev/null | filecheck %s --check-prefix=BN
// BN: npu.writes = ["bn.running_mean", "bn.running_var", "bn.num_batches_tracked"]

// A name that is no argument is a located error.
// RUN: not forge-opt %S/Inputs/bad-writes.mlir 2>&1 | filecheck %s --check-prefix=BAD
// BAD: bad-writes.mlir:1:1: error: 'func.func' op npu.writes names 'nope', which is no argument
