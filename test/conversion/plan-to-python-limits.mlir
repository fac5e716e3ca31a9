// -t python and the executor estimate the memory a function needs before building
// anything: what cannot fit is a one-line error, not an abort.

// RUN: not forge-opt %s --split-input-file -p forge-pipeline -t python 2>&1 | filecheck %s --check-prefix=BIG
// BIG: forge-opt: error: @huge needs at least {{.*}} GiB (arguments, results and intermediates) but {{.*}} GiB are available
// BIG-NOT: Traceback

func.func @huge(%a: tensor<1099511627776x1099511627776xf32>) -> tensor<1099511627776x1099511627776xf32> {
  %0 = npu.relu %a : tensor<1099511627776x1099511627776xf32>
  func.return %0 : tensor<1099511627776x1099511627776xf32>
}
