// --verify-diagnostics checks the diagnostics against the input's annotations, MLIR's
// way: `expected-error` (or -warning, -remark, -note), `-re` for regex blocks, a line
// designator (@+N, @-N, @above, @below, @unknown; none: this line) and `{{text}}`, a
// substring of the message. Each chunk of --split-input-file is checked on its own, with
// the line numbers of the whole file. When everything matches: exit 0, the IR of the
// chunks that had no error on stdout, nothing on stderr.

// RUN: forge-opt %s --split-input-file --verify-diagnostics 2>%t.err | filecheck %s
// RUN: filecheck %s --check-prefix=QUIET --allow-empty < %t.err
// QUIET-NOT: {{.}}

// xDSL's meaning of the flag (print each diagnostic, go on, exit 0) is --print-diagnostics;
// it shows where the diagnostics the annotations expect are.
// RUN: forge-opt %s --split-input-file --print-diagnostics | filecheck %s --check-prefix=PRINT

// A verifier error, expected on the next line.
func.func @next_line(%x: tensor<4xf32>) {
  // expected-error@+2 {{device must be one of npu, cpu, got 'gpu'}}
  // PRINT: verify-diagnostics.mlir:[[# @LINE + 1]]:3: error: 'npu.neg' op device must be one of npu, cpu, got 'gpu'
  %0 = npu.neg %x {device = "gpu"} : tensor<4xf32>
  func.return
}

// -----

// On its own line, and relative to the line before.
func.func @same_line(%a: tensor<2x3xf32>, %b: tensor<3xf32>) {
  %0 = npu.div %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<3x3xf32> // expected-error {{'npu.div' op result has shape 3x3, expected 2x3}}
  func.return
}

// -----

func.func @line_before(%x: tensor<4xf32>) {
  %0 = npu.softmax %x : tensor<4xf32>
  // expected-error@-1 {{property 'dim' expected}}
  func.return
}

// -----

// @above and @below name the nearest line, before or after, that is not an annotation.
func.func @above(%x: tensor<2x3xi64>) {
  %0 = npu.exp %x : tensor<2x3xi64>
  // expected-error@above {{operand must have a float element type, got i64}}
  func.return
}

// -----

func.func @below(%x: tensor<3xi1>, %t: tensor<2x4xf32>) {
  // expected-error-re@below {{shapes {{[0-9x]+}}, {{[0-9x]+}} do not broadcast (dimension 1: 3 vs 4)}}
  %0 = npu.where %x, %t {scalar = 0.0 : f32} : (tensor<3xi1>, tensor<2x4xf32>) -> tensor<2x4xf32>
  func.return
}

// -----

// A parse error is a diagnostic like any other.
func.func @parse_error(%x: tensor<4xf32>) {
  // PRINT: verify-diagnostics.mlir:[[# @LINE + 3]]:3: error: Expected ':'
  %0 = npu.neg %x
  // expected-error@+1 {{Expected ':'}}
  func.return
}

// -----

// A chunk without errors needs no annotation and prints its IR.
// CHECK:      func.func @valid
// CHECK-NEXT:   %0 = npu.neg %x : tensor<4xf32>
func.func @valid(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = npu.neg %x : tensor<4xf32>
  func.return %0 : tensor<4xf32>
}
