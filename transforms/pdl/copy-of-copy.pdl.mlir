// The `contiguous(contiguous(x))` case of npu-optimize-layout's DropRedundantContiguous:
// a copy of a dense copy is that copy. The Python pattern drops any copy of a value its
// stride analysis proves dense (block arguments, compute results, dense views); PDL
// cannot compute strides, so only this syntactic case is expressible.
pdl.pattern @copy_of_copy : benefit(1) {
  %type = pdl.type
  %x = pdl.operand
  %inner = pdl.operation "npu.contiguous"(%x : !pdl.value) -> (%type : !pdl.type)
  %copy = pdl.result 0 of %inner
  %outer = pdl.operation "npu.contiguous"(%copy : !pdl.value) -> (%type : !pdl.type)
  pdl.rewrite %outer {
    pdl.replace %outer with (%copy : !pdl.value)
  }
}
