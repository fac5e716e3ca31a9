"""The compile notes about kernels, printed from what the graph builder recorded.

Each NNFactory graph keeps the choices its builder made (`forge.conversion.kernel_choice.
Decision`: op, kernel, reason); these notes group them by kind and add the host
profile's times behind the rule, so a note says what was built, not what the rule
would have chosen."""

from __future__ import annotations

from collections.abc import Sequence

from forge.conversion.kernel_choice import INT8_APART, OWN_KERNEL, Decision
from forge.transforms.host_profile import HostProfile, KernelTiming

QUANTIZED_NOTES = ("activations of the int8 MatMuls quantized", "int8 linears at")
"""How the notes of a program whose int8 activations are quantized at run time begin
(forced, then chosen by the host profile)."""

SegmentDecisions = Sequence[Sequence[Decision]]
"""Per segment of a program, the decisions its graph's builder recorded."""


def kernel_notes(
    decisions: SegmentDecisions,
    profile: HostProfile,
    precision: str,
    dynamic_quantized: bool | None,
) -> list[str]:
    """The notes on the kernels the graphs of a program were built with."""
    notes = (
        _kernel_note(decisions, profile, precision),
        _snippets_note(profile, precision),
        _int8_dynamic_note(decisions, profile, precision, dynamic_quantized),
    )
    return [note for note in notes if note]


def _rows(decisions: SegmentDecisions, kind: str, kernel: str | None = None) -> list[int]:
    """The rows of every linear whose `kind` decision chose `kernel` (any: None), in op
    order."""
    return [
        d.rows
        for segment in decisions
        for d in segment
        if d.kind == kind and kernel in (None, d.kernel)
    ]


def _measured(profile: HostProfile, *times: str) -> list[KernelTiming]:
    """The profile's row counts at which every one of `times` was measured."""
    return [k for k in profile.kernels if all(getattr(k, t) is not None for t in times)]


def _row_list(rows: Sequence[int]) -> str:
    return ", ".join(map(str, sorted(set(rows))))


def _kernel_note(decisions: SegmentDecisions, profile: HostProfile, precision: str) -> str:
    """A note naming the linears built off OpenVINO's own kernel (fp32, int8) or whose
    fp16 weights stayed fp16 (fp16, mixed), with the times behind the rule."""
    if precision == "int8":
        return _int8_kernel_note(decisions, profile)
    if precision != "fp32":
        return _fp16_kernel_note(decisions, profile)
    moved: dict[str, list[int]] = {}
    reasons: dict[str, str] = {}
    for segment in decisions:
        for d in segment:
            if d.kind == "kernel" and d.reason != OWN_KERNEL:
                moved.setdefault(d.kernel, []).append(d.rows)
                reasons[d.kernel] = d.reason
    if not moved:
        return ""
    what = "; ".join(
        f"{len(rows)} linear(s) at {_row_list(rows)} row(s) {reasons[kernel]}"
        for kernel, rows in moved.items()
    )
    measured = ", ".join(
        f"{k.rows} row(s) OpenVINO's own {k.fused_ms:.3g} ms, all MLAS {k.apart_ms:.3g} ms"
        + (f", all oneDNN {k.onednn_ms:.3g} ms" if k.onednn_ms is not None else "")
        for k in profile.kernels
    )
    return f"{what} (host profile: {measured})"


def _int8_kernel_note(decisions: SegmentDecisions, profile: HostProfile) -> str:
    """The int8-weight linears built with their activation out of OpenVINO's
    FullyConnected, with the times behind it (nothing when none)."""
    rows = [
        d.rows
        for segment in decisions
        for d in segment
        if d.kind == "int8 kernel" and d.reason == INT8_APART
    ]
    if not rows:
        return ""
    measured = ", ".join(
        f"{k.rows} row(s) fused {k.int8_fused_ms:.3g} ms, apart {k.int8_apart_ms:.3g} ms"
        for k in _measured(profile, "int8_fused_ms", "int8_apart_ms")
    )
    return (
        f"{len(rows)} int8 linear(s) at {_row_list(rows)} row(s) with {INT8_APART} "
        f"(host profile: {measured})"
    )


def _fp16_kernel_note(decisions: SegmentDecisions, profile: HostProfile) -> str:
    """The row counts whose fp16 weights stayed fp16 in OpenVINO's kernel and those
    built on their fp32 weights instead (where fp16 measured slower), with the times
    behind it (nothing without fp16 measurements: every one stays fp16, as asked)."""
    measured = ", ".join(
        f"{k.rows} row(s) fp32 weights {k.fp16_wide_ms:.3g} ms, kept fp16 {k.fp16_narrow_ms:.3g} ms"
        for k in _measured(profile, "fp16_wide_ms", "fp16_narrow_ms")
    )
    if not measured:
        return ""
    narrow = _rows(decisions, "fp16 weights", "narrow")
    wide = _rows(decisions, "fp16 weights", "wide")
    parts = []
    if narrow:
        parts.append(f"kept fp16 in OpenVINO's kernel for linears of {_row_list(narrow)} row(s)")
    if wide:
        parts.append(
            "run as their fp32 weights, with the fp32 kernels, for linears of "
            f"{_row_list(wide)} row(s), where fp16 measured slower"
        )
    if not parts:
        return ""
    return f"fp16 weights {'; '.join(parts)} (host profile: {measured})"


def _int8_dynamic_note(
    decisions: SegmentDecisions, profile: HostProfile, precision: str, forced: bool | None
) -> str:
    """For an int8 program left to the profile: the row counts of the linears whose
    graphs were built to quantize their activations at run time, with the times behind
    it (nothing when none were)."""
    if precision != "int8" or forced is not None:
        return ""
    quantized = [
        d.rows
        for segment in decisions
        if any(g.kind == "quantization group" and g.kernel != "0" for g in segment)
        for d in segment
        if d.kind == "int8 kernel"
    ]
    if not quantized:
        return ""
    measured = ", ".join(
        f"{k.rows} row(s) weight-only {k.int8_fused_ms:.3g} ms, "
        f"quantized {k.int8_dynamic_ms:.3g} ms"
        for k in _measured(profile, "int8_dynamic_ms", "int8_fused_ms")
    )
    return (
        f"{QUANTIZED_NOTES[1]} {_row_list(quantized)} row(s) quantize their activations "
        f"at run time (OpenVINO's dynamic quantization, groups of 32; host profile: "
        f"{measured}; --weight-only or dynamic_quantized=False keeps them fp32)"
    )


def _snippets_note(profile: HostProfile, precision: str) -> str:
    """For an fp32 program: the row counts whose graphs compile with OpenVINO's snippets
    on, with the times behind it (nothing when none do)."""
    on = [k for k in profile.kernels if k.snippets]
    if precision != "fp32" or not on:
        return ""
    measured = ", ".join(
        f"{k.rows} row(s) off {k.snippets_baseline_ms:.3g} ms, on {k.snippets_ms:.3g} ms"
        for k in _measured(profile, "snippets_ms")
    )
    rows = ", ".join(str(k.rows) for k in on)
    return (
        f"graphs whose linears have about {rows} row(s) compile with OpenVINO's snippets "
        f"on (host profile: {measured})"
    )
