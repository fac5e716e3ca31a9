// The greedy rewrite driver under every pattern pass: rewrite bounds (MLIR's
// GreedyRewriteConfig), located failures of Python and PDL patterns, and ops created by
// a rewrite located at the op the pattern matched.
// Line 6 is the tanh every pattern below matches.
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = npu.tanh %x : tensor<4xf32>
  %1 = npu.sin %0 : tensor<4xf32>
  func.return %1 : tensor<4xf32>
}

// Two patterns that undo each other stop at the rewrite bound, located at the last
// rewritten op and naming the patterns of the last sweep.
// RUN: not forge-opt %s --load-pass-plugin %S/Inputs/ping_pong.py -p test-ping-pong 2>&1 | FileCheck %s --check-prefix=PINGPONG
// PINGPONG: rewrite-driver.mlir:6:3: error: pass 'test-ping-pong' did not converge: over 1040 rewrites (max-rewrites=1040); the last sweep's rewrites: TanhToExp (521), ExpToTanh (520)
// The bound is a pass option and a driver flag; the pass's option wins.
// RUN: not forge-opt %s --load-pass-plugin %S/Inputs/ping_pong.py -p 'test-ping-pong{max-rewrites=10}' 2>&1 | FileCheck %s --check-prefix=OPTION
// RUN: not forge-opt %s --load-pass-plugin %S/Inputs/ping_pong.py -p test-ping-pong --max-rewrites 10 2>&1 | FileCheck %s --check-prefix=OPTION
// RUN: not forge-opt %s --load-pass-plugin %S/Inputs/ping_pong.py -p 'test-ping-pong{max-rewrites=10}' --max-rewrites 500 2>&1 | FileCheck %s --check-prefix=OPTION
// OPTION: error: pass 'test-ping-pong' did not converge: over 10 rewrites (max-rewrites=10); the last sweep's rewrites: TanhToExp (6), ExpToTanh (5)
// --trace-patterns prints the tail of the cycle.
// RUN: not forge-opt %s --load-pass-plugin %S/Inputs/ping_pong.py -p 'test-ping-pong{max-rewrites=10}' --trace-patterns 2>&1 | FileCheck %s --check-prefix=TAIL
// TAIL: [test-ping-pong] did not converge; the last rewrites: {{.*}}TanhToExp on npu.tanh at {{.*}}rewrite-driver.mlir:6:3 -> ExpToTanh on npu.exp at

// The same pair in PDL.
// RUN: not forge-opt %s -p 'npu-apply-pdl{file="%S/Inputs/ping-pong.pdl.mlir" max-rewrites=100}' 2>&1 | FileCheck %s --check-prefix=PDL
// PDL: rewrite-driver.mlir:6:3: error: pass 'npu-apply-pdl' did not converge: over 100 rewrites (max-rewrites=100); the last sweep's rewrites: tanh_to_exp (51), exp_to_tanh (50)

// Sweeps that each rewrite stop at max-iterations (default 10).
// RUN: not forge-opt %s --load-pass-plugin %S/Inputs/ping_pong.py -p test-every-sweep 2>&1 | FileCheck %s --check-prefix=SWEEPS
// RUN: not forge-opt %s --load-pass-plugin %S/Inputs/ping_pong.py -p test-every-sweep --max-iterations 3 2>&1 | FileCheck %s --check-prefix=SWEEPS3
// SWEEPS: error: pass 'test-every-sweep' did not converge: 10 sweeps rewrote (max-iterations=10); the last sweep's rewrites: ClaimsAChange (1)
// SWEEPS3: error: pass 'test-every-sweep' did not converge: 3 sweeps rewrote (max-iterations=3)

// A PDL rewrite that fails at run time points into the .pdl.mlir file and names the pattern.
// RUN: not forge-opt %s -p 'npu-apply-pdl{file="%S/Inputs/erase-with-users.pdl.mlir"}' 2>&1 | FileCheck %s --check-prefix=PDLFAIL
// PDLFAIL: erase-with-users.pdl.mlir:2:1: error: pattern erase_used_tanh (pass 'npu-apply-pdl') failed on 'npu.tanh' at {{.*}}rewrite-driver.mlir:6:3: ValueError: Attempting to delete SSA value that still has uses
// PDLFAIL-NOT: internal error
// A Python pattern that raises: located at its match_and_rewrite.
// RUN: not forge-opt %s --load-pass-plugin %S/Inputs/ping_pong.py -p test-raising-pattern 2>&1 | FileCheck %s --check-prefix=RAISES
// RAISES: ping_pong.py:{{[0-9]+}}: error: pattern RaisesOnTanh (pass 'test-raising-pattern') failed on 'npu.tanh' at {{.*}}rewrite-driver.mlir:6:3: ValueError: this pattern has a bug
// An op a pattern creates carries the matched op's location: a verifier error after the
// pass points into the input and names the pattern.
// RUN: not forge-opt %s --load-pass-plugin %S/Inputs/ping_pong.py -p test-wrong-shape 2>&1 | FileCheck %s --check-prefix=CREATED
// CREATED: rewrite-driver.mlir:6:3: error: 'npu.exp' op result 'result' at position 0 does not verify: {{.*}} (created by pattern ExpOfWrongShape of pass 'test-wrong-shape')
