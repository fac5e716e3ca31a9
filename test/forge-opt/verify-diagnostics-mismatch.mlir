// Every mismatch between diagnostics and annotations is reported, MLIR-worded, for every
// chunk; then forge-opt exits 1. The unexpected diagnostic is reported where it is, the
// missing one where its annotation is.

// RUN: not forge-opt %s --split-input-file --verify-diagnostics 2>&1 >/dev/null | filecheck %s
// CHECK-NOT: Traceback

// A diagnostic nobody expected.
func.func @unexpected(%x: tensor<4xf32>) {
  // CHECK: verify-diagnostics-mismatch.mlir:[[# @LINE + 1]]:3: error: unexpected error: 'npu.neg' op device must be one of npu, cpu, got 'gpu'
  %0 = npu.neg %x {device = "gpu"} : tensor<4xf32>
  func.return
}

// -----

// An annotation nothing matched: the chunk is valid.
func.func @not_produced(%x: tensor<4xf32>) {
  // CHECK-NEXT: verify-diagnostics-mismatch.mlir:[[# @LINE + 1]]:6: error: expected error "never happens" was not produced
  // expected-error@+1 {{never happens}}
  %0 = npu.neg %x : tensor<4xf32>
  func.return
}

// -----

// The right message on the wrong line is both unexpected and not produced.
func.func @wrong_line(%x: tensor<4xf32>) {
  // expected-error@+3 {{device must be one of npu, cpu}}
  // CHECK-NEXT: verify-diagnostics-mismatch.mlir:[[# @LINE + 1]]:3: error: unexpected error: 'npu.neg' op device
  %0 = npu.neg %x {device = "gpu"} : tensor<4xf32>
  // CHECK-NEXT: verify-diagnostics-mismatch.mlir:[[# @LINE - 3]]:6: error: expected error "device must be one of npu, cpu" was not produced
  func.return
}

// -----

// A substring is not a regex without -re.
func.func @substring(%x: tensor<4xf32>) {
  // CHECK-NEXT: verify-diagnostics-mismatch.mlir:[[# @LINE + 2]]:3: error: unexpected error: 'npu.neg' op device
  // expected-error@+1 {{device must be one of .*}}
  %0 = npu.neg %x {device = "gpu"} : tensor<4xf32>
  // CHECK-NEXT: verify-diagnostics-mismatch.mlir:[[# @LINE - 2]]:6: error: expected error "device must be one of .*" was not produced
  func.return
}

// -----

// The right message with the wrong severity is a near miss, reported at the annotation.
func.func @near_miss(%x: tensor<4xf32>) {
  // CHECK-NEXT: verify-diagnostics-mismatch.mlir:[[# @LINE + 1]]:6: error: 'error' diagnostic emitted when expecting a 'warning'
  // expected-warning@+1 {{device must be one of npu, cpu}}
  %0 = npu.neg %x {device = "gpu"} : tensor<4xf32>
  // CHECK-NEXT: verify-diagnostics-mismatch.mlir:[[# @LINE - 2]]:6: error: expected warning "device must be one of npu, cpu" was not produced
  func.return
}

// -----

// A broken regex block is an error of its own.
func.func @bad_regex(%x: tensor<4xf32>) {
  // CHECK-NEXT: verify-diagnostics-mismatch.mlir:[[# @LINE + 1]]:6: error: invalid regex: {{.*}}
  // expected-error-re@+1 {{device {{[}}}}
  %0 = npu.neg %x {device = "gpu"} : tensor<4xf32>
  // CHECK-NEXT: verify-diagnostics-mismatch.mlir:[[# @LINE - 1]]:3: error: unexpected error: 'npu.neg' op device
  func.return
}

// -----

// A chunk whose diagnostics match adds nothing to the report.
func.func @matched(%x: tensor<4xf32>) {
  // expected-error@+1 {{device must be one of npu, cpu}}
  %0 = npu.neg %x {device = "gpu"} : tensor<4xf32>
  func.return
}

// CHECK-NEXT: forge-opt: error: --verify-diagnostics: 10 mismatch(es) between the diagnostics and the expected-* annotations
// CHECK-NOT:  {{.}}
