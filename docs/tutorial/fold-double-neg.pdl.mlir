// npu-fold-double-neg in PDL: `neg(neg(x))` is `x`.
// Run it with: forge-opt IN.mlir -p 'npu-apply-pdl{file=docs/tutorial/fold-double-neg.pdl.mlir}'
pdl.pattern @fold_double_neg : benefit(1) {
  %type = pdl.type
  %x = pdl.operand
  %inner = pdl.operation "npu.neg"(%x : !pdl.value) -> (%type : !pdl.type)
  %negated = pdl.result 0 of %inner
  %outer = pdl.operation "npu.neg"(%negated : !pdl.value) -> (%type : !pdl.type)
  pdl.rewrite %outer {
    pdl.replace %outer with (%x : !pdl.value)
  }
}
