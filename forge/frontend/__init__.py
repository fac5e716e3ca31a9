"""Phase 1: capture (torch.export), import into the `npu` dialect, built-in models, loading."""
