// Driver diagnostics: one line naming the problem, with a location when there is one, exit 1.

// RUN: echo garbage | not forge-opt 2>&1 | filecheck %s --check-prefix=GARBAGE
// GARBAGE: stdin:{{[0-9]+}}:{{[0-9]+}}: error: Operation garbage is not registered
// GARBAGE-NOT: Traceback

// RUN: not forge-opt %s -p no-such-pass 2>&1 | filecheck %s --check-prefix=PASS
// PASS: forge-opt: error: invalid pass pipeline 'no-such-pass': Unrecognized passes: ['no-such-pass']
// PASS-NOT: Traceback

// RUN: not forge-opt %s -p "cse{bogus=1}" 2>&1 | filecheck %s --check-prefix=OPTION
// OPTION: forge-opt: error: invalid pass pipeline 'cse{bogus=1}': Provided arguments ["bogus"] not found
// OPTION-NOT: Traceback

// RUN: not forge-opt %s -p "apply-individual-rewrite{matched_operation_index=abc}" 2>&1 | filecheck %s --check-prefix=VALUE
// VALUE: forge-opt: error: invalid pass pipeline '{{.*}}': Incompatible types: given ('abc',), expected <class 'int'>

// RUN: not forge-opt %s -p "cse{" 2>&1 | filecheck %s --check-prefix=SPEC
// SPEC: forge-opt: error: invalid pass pipeline 'cse{': Expected argument name here (column 5)
// SPEC-NOT: Traceback

// RUN: not forge-opt %s --no-such-flag 2>&1 | filecheck %s --check-prefix=FLAG
// FLAG: forge-opt: error: unrecognized arguments: --no-such-flag

// RUN: not forge-opt %S/does-not-exist.mlir 2>&1 | filecheck %s --check-prefix=MISSING
// MISSING: forge-opt: error: [Errno 2] No such file or directory

func.func @ok(%x: tensor<2xf32>) -> tensor<2xf32> {
  func.return %x : tensor<2xf32>
}
