"""The executor's precisions, by name; re-exported by `forge.dialects.dtypes`.

A module of their own, free of torch and xDSL, so that the `forge` CLI can offer them
as `--precision` choices without importing torch at start-up."""

from __future__ import annotations

PROGRAM_PRECISIONS = ("fp32", "fp16", "int8", "mixed")
"""Whole-program precisions, by how linear weights are stored: fp32, fp16, int8, or mixed
(each linear's weight fp16 or int8 by measured sensitivity). On this CPU's OpenVINO
plugin the activations are fp32 under every one (docs/executor.md, Precisions)."""

QUANTIZED_PRECISIONS = ("int8", "mixed")
"""Precisions under which linear weights may be stored as int8."""

WEIGHT_PRECISIONS = ("fp32", "fp16", "int8")
"""Values of a linear op's `precision` attribute."""
