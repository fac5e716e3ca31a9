// -t python: IR that is not planned, bad target options and NNFactory fallbacks.
// Every error is one line, exit code 1, no traceback.

// RUN: not forge-opt %s --split-input-file -t python 2>&1 | filecheck %s --check-prefix=UNPLACED
// UNPLACED: plan-to-python-errors.mlir:{{[0-9]+}}:3: error: 'npu.add' op has no 'device': the plan is printed from placed, scheduled IR (run -p forge-pipeline first)
// UNPLACED-NOT: Traceback

// RUN: not forge-opt %s --split-input-file -p forge-pipeline -t "python{precision=int4}" 2>&1 | filecheck %s --check-prefix=PRECISION
// PRECISION: forge-opt: error: invalid target 'python{precision=int4}': precision must be one of fp32, fp16, int8, mixed, got 'int4'

// RUN: not forge-opt %s --split-input-file -p forge-pipeline -t "python{weights=inline}" 2>&1 | filecheck %s --check-prefix=WEIGHTS
// WEIGHTS: forge-opt: error: invalid target 'python{weights=inline}': weights must be one of constants, parameters, got 'inline'

// RUN: not forge-opt %s --split-input-file -p forge-pipeline -t "python{granularity=layer}" 2>&1 | filecheck %s --check-prefix=GRANULARITY
// GRANULARITY: forge-opt: error: invalid target 'python{granularity=layer}': granularity must be one of segment, op, got 'layer'

// RUN: not forge-opt %s --split-input-file -p forge-pipeline -t "python{" 2>&1 | filecheck %s --check-prefix=SPEC
// SPEC: forge-opt: error: invalid target: Expected argument name here (column 8)
// SPEC-NOT: Traceback

// Under --verify-diagnostics the chunk's error is the one expected, and the next chunk runs.
// RUN: forge-opt %s --split-input-file --verify-diagnostics -t python | filecheck %s --check-prefix=DIAG
// DIAG-NOT:  @unplaced
// DIAG:      {{// [-]+}}
// DIAG:      """Forge plan of @fallback

func.func @unplaced(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{'npu.add' op has no 'device': the plan is printed from placed, scheduled IR}}
  %0 = npu.add %x, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return %0 : tensor<4xf32>
}

// -----

// An NPU-placed op NNFactory cannot lower runs on the CPU, as in the executor.
// RUN: forge-opt %s --split-input-file --verify-diagnostics -t python | filecheck %s --check-prefix=FALLBACK
// FALLBACK:      0 NNFactory segment(s) of 0 op(s), 1 CPU callable(s)
// FALLBACK-NOT:  from forge.conversion.nnfactory_backend import load_backend
// FALLBACK:      def run(x):
// FALLBACK-NEXT:   # cpu: npu.generic "aten.cumsum.default" @ line {{[0-9]+}} (placed on the NPU; NNFactory cannot lower it: no NNFactory lowering for 'npu.generic')
// FALLBACK-NEXT:   v0 = torch.ops.aten.cumsum.default(x, 0)
// FALLBACK-NEXT:   return (v0,)

func.func @fallback(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = npu.generic "aten.cumsum.default"(%x, 0 : i64) {device = "npu", vreg = 0 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  func.return %0 : tensor<4xf32>
}
