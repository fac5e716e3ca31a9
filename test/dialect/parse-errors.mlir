// Malformed npu syntax. Every error is one `file:line:col: error: ...` line and
// never a Python traceback.

// 1. Standalone inputs: forge-opt exits 1 with the error on stderr.
//
// Unknown op. (The column is that of the token after the op name.)
// RUN: echo 'func.func @f(%x: tensor<4xf32>) { %0 = npu.frobnicate %x : tensor<4xf32> func.return }' | not forge-opt 2>&1 | filecheck %s --check-prefix=UNKNOWN
// UNKNOWN-NOT: Traceback
// UNKNOWN:     stdin:1:55: error: Operation npu.frobnicate is not registered
// UNKNOWN-NOT: {{.}}
//
// Missing type: the parser stops at the next token.
// RUN: echo 'func.func @f(%x: tensor<4xf32>) { %0 = npu.neg %x func.return }' | not forge-opt 2>&1 | filecheck %s --check-prefix=NOTYPE
// NOTYPE-NOT: Traceback
// NOTYPE:     stdin:1:51: error: Expected ':'
// NOTYPE-NOT: {{.}}
//
// A stray token where an operation should start, and text after the module: xDSL's
// bare "in block definition" and "Could not parse entire input!" say what they mean.
// RUN: echo 'func.func @f(%x: tensor<4xf32>) { 123 func.return }' | not forge-opt 2>&1 | filecheck %s --check-prefix=STRAY
// STRAY:     stdin:1:35: error: expected an operation, a block label (^bb...) or '}' here
// RUN: echo 'func.func @f(%x: tensor<4xf32>) { func.return } }' | not forge-opt 2>&1 | filecheck %s --check-prefix=TRAILING
// TRAILING:  error: unexpected text after the top-level operation (an extra '}'?)
//
// Undefined value, reported at the end of the input.
// RUN: echo 'func.func @f(%x: tensor<4xf32>) { %0 = npu.neg %y : tensor<4xf32> func.return }' | not forge-opt 2>&1 | filecheck %s --check-prefix=UNDEF
// UNDEF-NOT: Traceback
// UNDEF:     stdin:2:1: error: values used but not defined: [%y]
// UNDEF-NOT: {{.}}
//
// Integers wider than 64 bits in a dense literal or array (fuzz-ir: `array<i65: 2>`).
// RUN: echo 'func.func @f() { %0 = arith.constant dense<1> : tensor<4xi65> func.return }' | not forge-opt 2>&1 | filecheck %s --check-prefix=WIDE
// RUN: echo 'func.func @f(%x: tensor<f32>) { %0 = npu.tanh %x {buffer = array<i65: 2>} : tensor<f32> func.return }' | not forge-opt 2>&1 | filecheck %s --check-prefix=WIDE
// WIDE-NOT: Traceback
// WIDE:     stdin:1:{{[0-9]+}}: error: i65 elements: dense literals and arrays hold integers of at most 64 bits
// WIDE-NOT: {{.}}
//
// Without --verify-diagnostics a verifier error also exits 1 with one line.
// RUN: echo 'func.func @f(%x: tensor<2x3xf32>, %y: tensor<4x5xf32>) { %0 = npu.matmul %x, %y : (tensor<2x3xf32>, tensor<4x5xf32>) -> tensor<2x5xf32> func.return }' | not forge-opt 2>&1 | filecheck %s --check-prefix=VERIFY
// VERIFY-NOT: Traceback
// VERIFY:     stdin:1:58: error: 'npu.matmul' op contraction dimensions differ: lhs 2x3 has K=3, rhs 4x5 has K=4
// VERIFY-NOT: {{.}}
//
// --verify-diagnostics checks parse errors too: one that no annotation expects fails.
// RUN: echo 'func.func @f(%x: tensor<4xf32>) { %0 = npu.neg %x func.return }' | not forge-opt --verify-diagnostics 2>&1 | filecheck %s --check-prefix=UNEXPECTED
// UNEXPECTED-NOT: Traceback
// UNEXPECTED:     stdin:1:51: error: unexpected error: Expected ':'
//
// --split-input-file without --parsing-diagnostics stops at the first bad chunk.
// RUN: not forge-opt %s --split-input-file 2>&1 | filecheck %s --check-prefix=FIRST
// FIRST-NOT: Traceback
// FIRST:     parse-errors.mlir:{{[0-9]+}}:3: error: Expected ':'
// FIRST-NOT: {{.}}

// 2. One chunk per error with --parsing-diagnostics: each chunk prints its error
//    and the run goes on (exit 0). Chunk separators are matched as `// {{-----}}`.
// RUN: forge-opt %s --split-input-file --parsing-diagnostics | filecheck %s
// CHECK-NOT: Traceback

// Missing result type (reported at the next token).
func.func @missing_type(%x: tensor<4xf32>) {
  // CHECK: parse-errors.mlir:[[# @LINE + 2]]:3: error: Expected ':'
  %0 = npu.neg %x
  func.return
}

// -----

// Unknown npu op.
func.func @unknown_op(%x: tensor<4xf32>) {
  // CHECK:      // {{-----}}
  // CHECK-NEXT: parse-errors.mlir:[[# @LINE + 1]]:23: error: Operation npu.frobnicate is not registered
  %0 = npu.frobnicate %x : tensor<4xf32>
  func.return
}

// -----

// Use of an undefined value (reported where the chunk ends, at the split marker).
func.func @undefined_value(%x: tensor<4xf32>) {
  // CHECK:      // {{-----}}
  // CHECK-NEXT: parse-errors.mlir:[[# @LINE + 5]]:1: error: values used but not defined: [%y]
  %0 = npu.neg %y : tensor<4xf32>
  func.return
}

// -----

// Redefinition of an SSA name.
func.func @redefined(%x: tensor<4xf32>) {
  %0 = npu.neg %x : tensor<4xf32>
  // CHECK:      // {{-----}}
  // CHECK-NEXT: parse-errors.mlir:[[# @LINE + 1]]:3: error: SSA value %0 is already defined
  %0 = npu.abs %x : tensor<4xf32>
  func.return
}

// -----

// Operand type in the functional type disagrees with the value's type.
func.func @operand_type_mismatch(%x: tensor<4xf32>) {
  // CHECK:      // {{-----}}
  // CHECK-NEXT: parse-errors.mlir:[[# @LINE + 1]]:16: error: operand is used with type tensor<4xf16>, but has been previously used or defined with type tensor<4xf32>
  %0 = npu.add %x, %x : (tensor<4xf16>, tensor<4xf32>) -> tensor<4xf32>
  func.return
}

// -----

// Binary ops print a functional type, not a single type.
func.func @binary_single_type(%x: tensor<4xf32>) {
  // CHECK:      // {{-----}}
  // CHECK-NEXT: parse-errors.mlir:[[# @LINE + 1]]:25: error: Expected '('
  %0 = npu.add %x, %x : tensor<4xf32>
  func.return
}

// -----

// Missing comma between operands.
func.func @missing_comma(%x: tensor<4x4xf32>) {
  // CHECK:      // {{-----}}
  // CHECK-NEXT: parse-errors.mlir:[[# @LINE + 1]]:22: error: Expected ','
  %0 = npu.matmul %x %x : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  func.return
}

// -----

// Unterminated tensor type (reported at the next token).
func.func @bad_tensor_type(%x: tensor<4xf32>) {
  // CHECK:      // {{-----}}
  // CHECK-NEXT: parse-errors.mlir:[[# @LINE + 2]]:3: error: Expected '>' after builtin parameter list
  %0 = npu.neg %x : tensor<4xf32
  func.return
}

// -----

// layer_norm's optional operands are introduced by `weight` / `bias` only.
func.func @layer_norm_keyword(%x: tensor<2x4xf32>, %w: tensor<4xf32>) {
  // CHECK:      // {{-----}}
  // CHECK-NEXT: parse-errors.mlir:[[# @LINE + 1]]:26: error: Expected ':'
  %0 = npu.layer_norm %x gamma %w : tensor<4xf32> {normalized_shape = array<i64: 4>, eps = 1.0e-05 : f64} : tensor<2x4xf32> -> tensor<2x4xf32>
  func.return
}

// -----

// split binds as many results as it has result types.
func.func @split_result_count(%x: tensor<4xf32>) {
  // CHECK:      // {{-----}}
  // CHECK-NEXT: parse-errors.mlir:[[# @LINE + 1]]:3: error: Operation has 2 results, but was given 3 to bind.
  %0:3 = npu.split %x {dim = 0 : i64, split_sizes = array<i64: 2, 2>} : tensor<4xf32> -> tensor<2xf32>, tensor<2xf32>
  func.return
}

// -----

// constant needs its dense value.
func.func @constant_without_value() {
  // CHECK:      // {{-----}}
  // CHECK-NEXT: parse-errors.mlir:[[# @LINE + 1]]:21: error: attribute expected
  %0 = npu.constant : tensor<4xf32>
  func.return
}

// -----

// Unknown npu attribute.
func.func @unknown_attribute(%x: tensor<4xf32>) {
  // CHECK:      // {{-----}}
  // CHECK-NEXT: parse-errors.mlir:[[# @LINE + 1]]:40: error: 'npu.device' is not registered
  %0 = npu.neg %x {device = #npu.device<npu>} : tensor<4xf32>
  func.return
}

// -----

// generic: the opcode is a string literal. (The message lacks a space:
// npu.py passes "ATen opcode" as xDSL's context suffix; only the prefix is checked.)
func.func @generic_opcode(%x: tensor<4xf32>) {
  // CHECK:      // {{-----}}
  // CHECK-NEXT: parse-errors.mlir:[[# @LINE + 1]]:20: error: string literal expected
  %0 = npu.generic aten.foo(%x) : (tensor<4xf32>) -> tensor<4xf32>
  func.return
}

// -----

// generic: one operand type per SSA operand among the arguments.
func.func @generic_operand_count(%x: tensor<4xf32>) {
  // CHECK:      // {{-----}}
  // CHECK-NEXT: parse-errors.mlir:[[# @LINE + 1]]:37: error: 1 operands but 2 operand types
  %0 = npu.generic "aten.foo"(%x) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return
}

// -----

// generic: kwargs must be a dictionary.
func.func @generic_kwargs(%x: tensor<4xf32>) {
  // CHECK:      // {{-----}}
  // CHECK-NEXT: parse-errors.mlir:[[# @LINE + 1]]:46: error: expected a dictionary of keyword arguments after 'kwargs'
  %0 = npu.generic "aten.foo"(%x) kwargs [1] : (tensor<4xf32>) -> tensor<4xf32>
  func.return
}

// -----

// #npu.operand takes a non-negative index.
func.func @operand_ref_negative(%x: tensor<4xf32>) {
  // CHECK:      // {{-----}}
  // CHECK-NEXT: parse-errors.mlir:[[# @LINE + 1]]:70: error: Expected integer literal
  %0 = "npu.generic"(%x) <{opcode = "aten.foo", args = [#npu.operand<-1>]}> : (tensor<4xf32>) -> tensor<4xf32>
  func.return
}
