// Two PDL patterns that undo each other: npu-apply-pdl must stop at its rewrite bound.
pdl.pattern @tanh_to_exp : benefit(1) {
  %type = pdl.type
  %x = pdl.operand
  %tanh = pdl.operation "npu.tanh"(%x : !pdl.value) -> (%type : !pdl.type)
  pdl.rewrite %tanh {
    %exp = pdl.operation "npu.exp"(%x : !pdl.value) -> (%type : !pdl.type)
    pdl.replace %tanh with %exp
  }
}
pdl.pattern @exp_to_tanh : benefit(1) {
  %type = pdl.type
  %x = pdl.operand
  %exp = pdl.operation "npu.exp"(%x : !pdl.value) -> (%type : !pdl.type)
  pdl.rewrite %exp {
    %tanh = pdl.operation "npu.tanh"(%x : !pdl.value) -> (%type : !pdl.type)
    pdl.replace %exp with %tanh
  }
}
