// A pass that raises leaves a crash reproducer (the input before the pipeline, the
// pipeline, the plugins it loaded), named on the one-line error; --run-reproducer
// replays it to the same error.

// RUN: rm -rf %t.repro.mlir %t.dir && mkdir -p %t.dir
// RUN: not forge-opt %s --load-pass-plugin %S/Inputs/broken_pass.py -p 'npu-dce,func.func(npu-cse,test-crash)' --crash-reproducer=%t.repro.mlir 2>&1 | filecheck %s --check-prefix=CRASH
// CRASH: forge-opt: error: internal error: RuntimeError: broken on purpose at npu.tanh (FORGE_TRACEBACK=1 shows the trace) (reproducer: {{.*}}.repro.mlir)

// The reproducer holds the pipeline, the plugin by absolute path and the input as read.
// RUN: filecheck %s --check-prefix=FILE < %t.repro.mlir
// FILE:      // forge-opt crash reproducer (replay: forge-opt --run-reproducer FILE)
// FILE-NEXT: // failure: pass 'test-crash' raised RuntimeError: broken on purpose at npu.tanh
// FILE-NEXT: // source: "{{.*}}crash-reproducer.mlir", line offset 0
// FILE-NEXT: // configuration: -p 'npu-dce,func.func(npu-cse,test-crash)' --load-pass-plugin {{/.*}}Inputs/broken_pass.py
// FILE:      func.func @f
// FILE:      %1 = npu.tanh %x : tensor<4xf32>

// Replay: same input, same pipeline, same error (no new reproducer); from any directory.
// RUN: cd %t.dir && not forge-opt --run-reproducer %t.repro.mlir 2>&1 | filecheck %s --check-prefix=REPLAY
// REPLAY:     forge-opt: error: internal error: RuntimeError: broken on purpose at npu.tanh (FORGE_TRACEBACK=1 shows the trace){{$}}
// REPLAY-NOT: reproducer:

// By default the reproducer goes under build/forge-opt-reproducers/.
// RUN: cd %t.dir && not forge-opt %s --load-pass-plugin %S/Inputs/broken_pass.py -p test-crash 2>&1 | filecheck %s --check-prefix=DEFAULT
// DEFAULT: (reproducer: build/forge-opt-reproducers/crash-reproducer-{{[0-9a-f]+}}.mlir)
// RUN: ls %t.dir/build/forge-opt-reproducers | filecheck %s --check-prefix=DEFAULTFILE
// DEFAULTFILE: crash-reproducer-{{[0-9a-f]+}}.mlir

// A pass failure located in the input replays with its original file name and line,
// under --split-input-file too (the chunk's line offset is recorded).
// RUN: not forge-opt %s --split-input-file --load-pass-plugin %S/Inputs/broken_pass.py -p test-fail --crash-reproducer=%t.located.mlir 2>&1 | filecheck %s --check-prefix=LOCATED
// RUN: not forge-opt --run-reproducer %t.located.mlir 2>&1 | filecheck %s --check-prefix=LOCATED
// LOCATED: crash-reproducer.mlir:[[# @LINE + 19]]:3: error: 'npu.exp' op test-fail refuses this op

// A diagnosed user error writes no reproducer unless --crash-reproducer asks for one.
// RUN: cd %t.dir && not forge-opt %s -p 'npu-apply-pdl' 2>&1 | filecheck %s --check-prefix=USER
// USER-NOT: reproducer:

// Replaying what is no reproducer is one line.
// RUN: not forge-opt --run-reproducer %s 2>&1 | filecheck %s --check-prefix=NOTREPRO
// NOTREPRO: crash-reproducer.mlir: error: not a forge-opt crash reproducer (no reproducer header)

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = npu.tanh %x : tensor<4xf32>
  %1 = npu.tanh %x : tensor<4xf32>
  func.return %1 : tensor<4xf32>
}

// -----

func.func @g(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = npu.exp %x : tensor<4xf32>
  func.return %0 : tensor<4xf32>
}
