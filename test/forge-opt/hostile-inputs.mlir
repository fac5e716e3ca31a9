// Inputs a hostile user feeds forge-opt end in one located line and exit code 1, or in
// success: never a traceback, an internal error or an abort.

// 10,000 nested parentheses: Python's stack ends before xDSL's parser does.
// RUN: not forge-opt %S/Inputs/deep-nesting.mlir 2>&1 | filecheck %s --check-prefix=DEEP
// DEEP: deep-nesting.mlir:1:{{[0-9]+}}: error: nesting too deep to parse
// DEEP-NOT: internal error
// RUN: not forge-opt %S/Inputs/deep-attribute.mlir 2>&1 | filecheck %s --check-prefix=DEEPATTR
// DEEPATTR: deep-attribute.mlir:1:{{[0-9]+}}: error: nesting too deep to parse

// A file that is no text, whatever its extension; any extension reads as MLIR.
// RUN: not forge-opt %S/Inputs/not-text.bin 2>&1 | filecheck %s --check-prefix=BIN
// BIN: not-text.bin: error: not UTF-8 text ({{.*}}); forge-opt reads MLIR text
// RUN: cp %s %t.bin && forge-opt %t.bin -p npu-dce --split-input-file | filecheck %s --check-prefix=EXT
// EXT: func.func @device_kwarg

// A dimension beyond int64 is rejected by the verifier, not overflowed later.
// RUN: not forge-opt %S/Inputs/huge-dim.mlir -p forge-pipeline -t python 2>&1 | filecheck %s --check-prefix=HUGE
// HUGE: huge-dim.mlir:1:1: error: dimension 100000000000000000000000000 does not fit in a signed 64-bit integer (MLIR's limit)

// A generic op naming a device torch does not know runs on the CPU, and a kernel that
// torch rejects is named by its op and line.
// RUN: forge-opt %s --split-input-file -p npu-dce --check-numerics | filecheck %s --check-prefix=DEVICE
// DEVICE: func.func @device_kwarg
// RUN: not forge-opt %S/Inputs/bad-kernel.mlir -p npu-dce --check-numerics 2>&1 | filecheck %s --check-prefix=KERNEL
// KERNEL: bad-kernel.mlir:3:3: error: 'npu.generic' op failed to run: index_select(): Expected dtype int32 or int64 for index

func.func @device_kwarg(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = npu.generic "aten.arange.default"(4 : i64) kwargs {device = "npu", dtype = 6 : i64} : () -> tensor<4xf32>
  %1 = npu.add %x, %0 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return %1 : tensor<4xf32>
}
