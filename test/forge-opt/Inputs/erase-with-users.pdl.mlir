// A PDL rewrite that fails at run time: it erases an op whose result is still used.
pdl.pattern @erase_used_tanh : benefit(1) {
  %type = pdl.type
  %x = pdl.operand
  %tanh = pdl.operation "npu.tanh"(%x : !pdl.value) -> (%type : !pdl.type)
  pdl.rewrite %tanh {
    pdl.erase %tanh
  }
}
