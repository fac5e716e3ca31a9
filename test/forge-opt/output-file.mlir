// -o writes a temporary file and renames it over the target only on success: no run,
// failing or not, ever empties or truncates an existing file.

// Onto its own input: the input is read before anything is written.
// RUN: cp %s %t.self.mlir
// RUN: forge-opt %t.self.mlir -p npu-cse -o %t.self.mlir
// RUN: filecheck %s --check-prefix=SELF < %t.self.mlir
// SELF: %0 = npu.tanh %x
// SELF-NOT: npu.tanh

// A failing parse leaves an existing output file as it was.
// RUN: echo KEEP > %t.out
// RUN: echo "garbage" > %t.bad.mlir
// RUN: not forge-opt %t.bad.mlir -o %t.out
// RUN: filecheck %s --check-prefix=KEEP < %t.out
// KEEP: KEEP

// So does a failing pass (an option error and a pass that breaks the IR).
// RUN: not forge-opt %s -p 'npu-fuse-operators{alpha=2}' -o %t.out
// RUN: filecheck %s --check-prefix=KEEP < %t.out
// RUN: not forge-opt %s --load-pass-plugin %S/Inputs/breaks_types.py -p npu-dce,test-break-device -o %t.out
// RUN: filecheck %s --check-prefix=KEEP < %t.out

// No temporary file is left behind, and an unwritable target is one line.
// RUN: rm -rf %t.dir && mkdir %t.dir && echo KEEP > %t.dir/out.mlir
// RUN: not forge-opt %t.bad.mlir -o %t.dir/out.mlir
// RUN: forge-opt %s -o %t.dir/new.mlir
// RUN: ls -a %t.dir | filecheck %s --check-prefix=CLEAN
// CLEAN-NOT: .tmp
// CLEAN: new.mlir
// CLEAN-NEXT: out.mlir
// CLEAN-NOT: .tmp
// RUN: not forge-opt %s -o %t.dir/no-such-dir/x.mlir 2>&1 | filecheck %s --check-prefix=DIR
// DIR: forge-opt: error: cannot write {{.*}}no-such-dir/x.mlir: No such file or directory

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = npu.tanh %x : tensor<4xf32>
  %1 = npu.tanh %x : tensor<4xf32>
  %2 = npu.add %0, %1 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return %2 : tensor<4xf32>
}
