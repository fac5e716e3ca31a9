// A pass's diagnostics are checked like the verifier's: an invalid op it leaves behind
// (found by --verify-each, naming the pass), and an error with no location, which only
// an `@unknown` annotation matches.

// RUN: forge-opt %s --split-input-file --load-pass-plugin %S/Inputs/breaks_types.py -p test-break-device,npu-apply-pdl --verify-diagnostics | filecheck %s --allow-empty
// CHECK-NOT: func.func

func.func @broken_by_a_pass(%x: tensor<4xf32>) {
  // expected-error@+1 {{'npu.neg' op device must be one of npu, cpu, got 'gpu' (after pass 'test-break-device')}}
  %0 = npu.neg %x : tensor<4xf32>
  func.return
}

// -----

// No npu op to break: npu-apply-pdl runs, and fails without a location.
// expected-error@unknown {{npu-apply-pdl needs a PDL file}}
func.func @no_location(%x: tensor<4xf32>) -> tensor<4xf32> {
  func.return %x : tensor<4xf32>
}
