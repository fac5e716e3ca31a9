"""Forge: a PyTorch -> xDSL -> NNFactory graph compiler (FORGE-UGC)."""
