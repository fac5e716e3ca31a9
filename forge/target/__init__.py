"""What the target runs, one level below the passes: the capability table (which `npu`
ops NNFactory lowers, and when) and the dialect's executable semantics (each op as a CPU
kernel), read by placement, constant folding, the reference executor and conversion."""
