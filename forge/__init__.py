"""Forge: a PyTorch -> xDSL -> NNFactory graph compiler (FORGE-UGC)."""

from forge import xdsl_compat

xdsl_compat.apply()
