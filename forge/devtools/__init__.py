"""Developer tools: numerics, fuzzing, benchmarks, reports, the layer checker."""
