// npu-dce's ForwardEvalDropout in PDL: `npu.dropout` without `train`, or with p = 0,
// is the identity. Three patterns: the Python guard is a disjunction, and PDL has no
// float comparison.

// Eval mode: PDL matches only attributes that are present, so "no `train`" is the
// native constraint forge.lacks_attr (registered by npu-apply-pdl).
pdl.pattern @eval_dropout : benefit(1) {
  %type = pdl.type
  %x = pdl.operand
  %dropout = pdl.operation "npu.dropout"(%x : !pdl.value) -> (%type : !pdl.type)
  %train = pdl.attribute = "train"
  pdl.apply_native_constraint "forge.lacks_attr"(%dropout, %train : !pdl.operation, !pdl.attribute)
  pdl.rewrite %dropout {
    pdl.replace %dropout with (%x : !pdl.value)
  }
}

// p = 0 drops nothing, even in training mode. PDL compares attributes exactly (value
// and type) where Python compares numbers: -0.0, which the verifier accepts and
// `p == 0.0` forwards, needs its own pattern, and a `p` stored as f32 matches neither.
pdl.pattern @p_zero_dropout : benefit(1) {
  %type = pdl.type
  %x = pdl.operand
  %zero = pdl.attribute = 0.000000e+00 : f64
  %dropout = pdl.operation "npu.dropout"(%x : !pdl.value) {"p" = %zero} -> (%type : !pdl.type)
  pdl.rewrite %dropout {
    pdl.replace %dropout with (%x : !pdl.value)
  }
}

pdl.pattern @p_negative_zero_dropout : benefit(1) {
  %type = pdl.type
  %x = pdl.operand
  %zero = pdl.attribute = -0.000000e+00 : f64
  %dropout = pdl.operation "npu.dropout"(%x : !pdl.value) {"p" = %zero} -> (%type : !pdl.type)
  pdl.rewrite %dropout {
    pdl.replace %dropout with (%x : !pdl.value)
  }
}
