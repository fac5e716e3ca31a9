"""The host profile: what this machine measured, and the placement decision made from it.

`forge.runtime.host_profile` measures, on the machine Forge runs on, how long an
NNFactory graph and a CPU kernel take for linears of several shape buckets (and
attention, norms, an elementwise run), and what one NPU<->CPU transition costs. It
saves the figures as JSON; this module reads that file and decides, so that placement
(`npu-place-devices{profile=...}`) depends on measurements, never on which CPU or
library is present. Pure functions over plain data: no torch, no NNFactory.

The decision is the cost model's (docs/cost-model.md, "Host profile"): an op goes to
the CPU when

    cpu_ms(op) + hops(op) * transition_ms  <  (1 - margin) * npu_ms(op)

where `npu_ms` is the op's marginal time inside an NNFactory graph (the single-op
graph's time minus one dispatch), `cpu_ms` the CPU kernel's, both taken from the
nearest measured bucket and scaled by FLOP, and `hops` the device transitions moving
it adds (one per side where an NPU op meets it: an LM head, read only by
`func.return`, adds one; a linear inside the program adds two). The margin is `MARGIN`,
or `HEAD_MARGIN` for an LM head, which is estimated from the vocabulary-head buckets.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from forge.support.diagnostics import ForgeError

MARGIN = 0.15
"""How much faster the CPU must measure before an op leaves the NPU (its default): on a
loaded 2-core machine single measurements spread by 10-20%, and a near-tie flipping
from build to build would make placement, and every IR printed after it, unstable."""

HEAD_MARGIN = 0.05
"""The margin for an LM head (a linear only `func.return` reads), estimated from the
vocabulary-head buckets: those are timed as what a head is, a graph's last op behind
one transition, and the estimate is a FLOP scaling of that same shape family, so what
the margin guards against is the measurement's spread, 2-3% between quiet profile
builds (the 128-row head bucket 4.24-4.33 against 3.73-3.81 ms in four builds on an
Intel Xeon with AMX, 2 cores). There GPT-2's head measured 11% faster on the CPU and
moved there: 93.9 against 97.4 ms per forward (3.5 ms; the estimate said 3.0), and
Llama-3.2-1B's 930 against 956 ms (the estimate said 22 ms). Inner linears keep
`MARGIN`: their two transitions stand for a graph split, which the suite does not time
in place."""

FORMAT = "forge-host-profile/1"
"""The `format` field every profile file carries; another value is not read."""


class ProfileError(ForgeError):
    """A profile file that is missing, unreadable or not a host profile."""


@dataclass(frozen=True)
class LinearTiming:
    """One measured linear bucket: `rows x in_features -> out_features`, fp32."""

    rows: int
    in_features: int
    out_features: int
    npu_ms: float
    """Marginal time in an NNFactory graph (single-op graph minus one dispatch)."""
    cpu_ms: float
    """The executor's CPU kernel for it (weights packed once where torch can)."""
    label: str = ""

    @property
    def gflop(self) -> float:
        return 2 * self.rows * self.in_features * self.out_features / 1e9

    @property
    def shape(self) -> str:
        return f"{self.rows}x{self.in_features}x{self.out_features}"


@dataclass(frozen=True)
class OpTiming:
    """A measured op that is not a linear (attention, a norm, an elementwise run)."""

    kind: str
    shape: str
    npu_ms: float
    cpu_ms: float


@dataclass(frozen=True)
class KernelTiming:
    """A linear + activation MLP in one NNFactory graph in each form of
    `forge.conversion.kernel_choice.LINEAR_KERNELS`, at one row count: "fused"
    (OpenVINO's own), "apart" (every linear on MLAS), "onednn" (every linear on
    oneDNN); None where a profile did not measure it."""

    rows: int
    fused_ms: float
    apart_ms: float
    onednn_ms: float | None = None
    snippets_ms: float | None = None
    """The graph in the form `kernel` chose, compiled with OpenVINO's snippets on; None
    where a profile did not measure it (snippets stay off)."""
    snippets_off_ms: float | None = None
    """The same graph with snippets off, timed in the same rounds as `snippets_ms`."""
    int8_fused_ms: float | None = None
    """The MLPs with int8 weights, the activation fused into the FullyConnected."""
    int8_apart_ms: float | None = None
    """The same with the activation computed after it (`apart`'s form)."""
    fp16_wide_ms: float | None = None
    """The MLPs with their fp32 weights, in the fp32 kernel form measured fastest: what
    fp16 weights run as where they stay "wide" (`FP16_KERNELS`)."""
    fp16_narrow_ms: float | None = None
    """The same weights kept fp16, widened in OpenVINO's kernel (`FP16_KERNELS`)."""
    int8_dynamic_ms: float | None = None
    """The int8 MLPs in OpenVINO's form with the activations quantized at run time
    (OpenVINO's dynamic quantization, groups of 32: int8 x int8 products)."""

    @property
    def kernel(self) -> str:
        """The fastest form where it beats OpenVINO's own by `KERNEL_MARGIN`, else
        "fused"."""
        timed = [(self.apart_ms, "apart")]
        if self.onednn_ms is not None:
            timed.append((self.onednn_ms, "onednn"))
        ms, name = min(timed)
        return name if ms < self.fused_ms * (1 - KERNEL_MARGIN) else "fused"

    @property
    def kernel_ms(self) -> float:
        """The time of the form `kernel` chose, snippets off."""
        forms = {"fused": self.fused_ms, "apart": self.apart_ms, "onednn": self.onednn_ms}
        return forms[self.kernel] or self.fused_ms

    @property
    def int8_dynamic(self) -> bool:
        """Whether quantizing the int8 MLPs' activations at run time measured
        `INT8_DYNAMIC_MARGIN` faster than the weight-only forms (the faster of the two)."""
        if self.int8_dynamic_ms is None or self.int8_fused_ms is None:
            return False
        weight_only = min(self.int8_fused_ms, self.int8_apart_ms or self.int8_fused_ms)
        return self.int8_dynamic_ms < weight_only * (1 - INT8_DYNAMIC_MARGIN)

    @property
    def int8_kernel(self) -> str:
        """For int8 weights (one kernel, oneDNN's): "apart" where computing the
        activation after the FullyConnected measured `INT8_KERNEL_MARGIN` faster, else
        "fused"; always "fused" where the activations are quantized (`int8_dynamic`), the
        form that was timed so."""
        if self.int8_fused_ms is None or self.int8_apart_ms is None or self.int8_dynamic:
            return "fused"
        faster = self.int8_apart_ms < self.int8_fused_ms * (1 - INT8_KERNEL_MARGIN)
        return "apart" if faster else "fused"

    @property
    def fp16_kernel(self) -> str:
        """For fp16 weights: "wide" (fp32 weights and kernels) where keeping them fp16
        did not measure `FP16_KERNEL_MARGIN` faster, else (or unmeasured) "narrow"."""
        if self.fp16_wide_ms is None or self.fp16_narrow_ms is None:
            return "narrow"
        faster = self.fp16_narrow_ms < self.fp16_wide_ms * (1 - FP16_KERNEL_MARGIN)
        return "narrow" if faster else "wide"

    @property
    def snippets_baseline_ms(self) -> float:
        """What snippets on are compared with: off in their own rounds, else the form's
        time."""
        return self.snippets_off_ms if self.snippets_off_ms is not None else self.kernel_ms

    @property
    def snippets(self) -> bool:
        """Whether snippets on beat them off by `SNIPPETS_MARGIN` in that form."""
        if self.snippets_ms is None:
            return False
        return self.snippets_ms < self.snippets_baseline_ms * (1 - SNIPPETS_MARGIN)


KERNEL_MARGIN = 0.03
"""How much faster another kernel must measure than OpenVINO's own choice: the graphs
differ in kernels only, so noise matters less than for a device move (`MARGIN`), but a
tie keeps the form OpenVINO chose. The suite's MLPs show less of a form's gain than a
whole model does: on an AMD EPYC Zen 3 the 128-row suite measured `apart` 3.9% faster
(15.06 against 15.67 ms), under the 5% this margin was, and GPT-2's forward with
`apart` then ran 1.16x faster than OpenVINO's own form in every one of 15 rounds
(`forge bench gpt2`, docs/cost-model.md); with `fused` it was level with it (1.01x)."""


INT8_KERNEL_MARGIN = 0.015
"""How much faster the activation computed apart must make the int8 MLPs: the kernel is
the same, only where the activation runs differs, so the difference is small (on an AMD
EPYC Zen 3, 2% at 128 rows, GPT-2's int8 TTFT 2.5%), and a tie keeps OpenVINO's form."""

FP16_KERNEL_MARGIN = 0.05
"""How much faster fp16 weights kept fp16 must make the MLPs than fp32 weights in the
fp32 kernels: the kernels differ (OpenVINO's brgemm widening fp16 in the kernel against
MLAS), so a near tie keeps the fp32 kernels. On an AMD EPYC Zen 3 (2 cores, AVX2) kept fp16 was
1.75x faster at 1 row (12 GPT-2 linears 3.05 against 5.33 ms) and 1.5x slower at 100
rows (62.5 against 41.4 ms): the decode step reads, the prompt computes."""

INT8_DYNAMIC_MARGIN = 0.10
"""How much faster the int8 MLPs must run with their activations quantized at run time:
the kernels differ (int8 x int8 against widening the weights), and the activations'
rounding moves the logits further from fp32, so only a clear gain takes it. On an Intel
Xeon with AMX (2 cores, AVX-512 VNNI) GPT-2's decode ran 167 against 110 tokens/s and its
prefill 39 against 66 ms; on an AMD EPYC Zen 4 the decode step was slower with it
(9.1-10.7 against 7.7 ms)."""

SNIPPETS_MARGIN = 0.03
"""How much faster snippets must make the kernel suite's graph: the same kernels with
elementwise runs fused, so the difference is small, and a tie keeps them off (they cost
compile time: GPT-2's graph 0.04-0.1 s). The suite's two layers overstate what a whole
model gains: 3.9% at 128 rows against 2.6% for GPT-2's forward on an AMD EPYC Zen 3;
1.7% at 128 rows and 2.2% at 1 row against a tie for GPT-2's forward (paired calls
0.9992x) on an Intel Xeon with AMX."""


@dataclass(frozen=True)
class Estimate:
    """An op's modelled cost on each device and the device that wins."""

    npu_ms: float
    cpu_ms: float
    hops: int
    transition_ms: float
    bucket: LinearTiming | None = None
    scale: float = 1.0
    """The op's FLOP over the bucket's (its times are the bucket's times scaled by it)."""
    margin: float = MARGIN
    """How much faster the CPU must be: `MARGIN`, or `HEAD_MARGIN` for an LM head."""

    @property
    def cpu_total_ms(self) -> float:
        return self.cpu_ms + self.hops * self.transition_ms

    @property
    def device(self) -> str:
        return "cpu" if self.cpu_total_ms < self.npu_ms * (1 - self.margin) else "npu"

    def reason(self, what: str) -> str:
        """One line: the measured times behind the decision."""
        basis = ""
        if self.bucket is not None:
            basis = f"; measured {self.bucket.shape}"
            if self.scale != 1.0:
                basis += f", scaled x{self.scale:.3g} by FLOP"
        return (
            f"{what}: CPU {_ms(self.cpu_ms)} + {self.hops} hop(s) x {_ms(self.transition_ms)}"
            f" vs NNFactory {_ms(self.npu_ms)} (CPU needs < {_ms(self.npu_ms * (1 - self.margin))},"
            f" {self.margin:.0%} margin){basis} -> {self.device.upper()}"
        )


def _ms(value: float) -> str:
    return f"{value:.3g} ms"


@dataclass(frozen=True)
class HostProfile:
    key: Mapping[str, str]
    """What the measurements depend on: CPU model, cores, library versions."""
    transition_ms: float
    """One NPU<->CPU transition (half of what splitting a graph in two costs)."""
    dispatch_ms: float
    """One NNFactory graph call of a trivial graph."""
    linears: tuple[LinearTiming, ...]
    ops: tuple[OpTiming, ...] = ()
    settings: Mapping[str, Any] | None = None
    """Measured OpenVINO/torch settings (threads, hint), for `forge doctor`."""
    build_seconds: float = 0.0
    kernels: tuple[KernelTiming, ...] = ()
    """Linear kernels timed by row count (none measured: OpenVINO's own, "fused")."""
    split_ms: float | None = None
    """What splitting one graph in two cost (`transition_measured`: two segments' time
    minus one's), without the device switch; None in profiles that do not say."""

    def graph_split_ms(self) -> float:
        """One more graph boundary: measured, else two transitions."""
        return self.split_ms if self.split_ms is not None else 2 * self.transition_ms

    def graph_gflops(self) -> float:
        """GFLOP/s of the largest linear bucket in an NNFactory graph."""
        bucket = max(self.linears, key=lambda b: b.gflop)
        return bucket.gflop / max(bucket.npu_ms, 1e-6) * 1e3

    def kernel_rule(self) -> tuple[tuple[int, str], ...]:
        """(rows, kernel) per measured row count, as conversion reads it
        (`forge.conversion.kernel_choice.BuildOptions.linear_kernels`)."""
        return tuple((k.rows, k.kernel) for k in self.kernels)

    def int8_kernel_rule(self) -> tuple[tuple[int, str], ...]:
        """(rows, kernel) per measured row count for int8-weight linears
        (`forge.conversion.kernel_choice.BuildOptions.int8_kernels`)."""
        return tuple((k.rows, k.int8_kernel) for k in self.kernels)

    def int8_dynamic_rule(self) -> tuple[tuple[int, bool], ...]:
        """(rows, activations quantized) per measured row count for int8-weight graphs
        (`forge.conversion.kernel_choice.BuildOptions.int8_dynamic`)."""
        return tuple((k.rows, k.int8_dynamic) for k in self.kernels)

    def fp16_kernel_rule(self) -> tuple[tuple[int, str], ...]:
        """(rows, form) per measured row count for fp16 weights
        (`forge.conversion.kernel_choice.BuildOptions.fp16_kernels`)."""
        return tuple((k.rows, k.fp16_kernel) for k in self.kernels)

    def snippets_rule(self) -> tuple[tuple[int, bool], ...]:
        """(rows, snippets on) per measured row count, as conversion reads it
        (`forge.conversion.kernel_choice.BuildOptions.snippets`)."""
        return tuple((k.rows, k.snippets) for k in self.kernels)

    def linear_estimate(
        self, rows: int, in_features: int, out_features: int, hops: int, head: bool = False
    ) -> Estimate:
        """Both devices' cost for a linear of this shape, from the nearest bucket (in
        log-space over the three sizes), scaled by FLOP. An LM head (`head`) whose
        nearest bucket is a vocabulary head's gets `HEAD_MARGIN`."""
        if not self.linears:
            raise ProfileError("the host profile has no linear measurements")
        sizes = (rows, in_features, out_features)

        def distance(b: LinearTiming) -> float:
            theirs = (b.rows, b.in_features, b.out_features)
            pairs = zip(sizes, theirs, strict=True)
            return sum(abs(math.log(max(a, 1) / max(t, 1))) for a, t in pairs)

        bucket = min(self.linears, key=distance)
        as_measured = head and "head" in bucket.label
        scale = 2 * rows * in_features * out_features / 1e9 / bucket.gflop
        return Estimate(
            bucket.npu_ms * scale,
            bucket.cpu_ms * scale,
            hops,
            self.transition_ms,
            bucket,
            scale,
            HEAD_MARGIN if as_measured else MARGIN,
        )

    def decisions(self) -> list[tuple[str, Estimate]]:
        """Each measured bucket and op as placement would decide it: linears whose
        output is a vocabulary (a label saying `head`) with one hop, others with two."""
        rows: list[tuple[str, Estimate]] = []
        for b in self.linears:
            head = "head" in b.label
            what = f"linear {b.shape}" + (f" ({b.label})" if b.label else "")
            margin = HEAD_MARGIN if head else MARGIN
            hops = 1 if head else 2
            estimate = Estimate(b.npu_ms, b.cpu_ms, hops, self.transition_ms, b, margin=margin)
            rows.append((what, estimate))
        for o in self.ops:
            rows.append(
                (f"{o.kind} {o.shape}", Estimate(o.npu_ms, o.cpu_ms, 2, self.transition_ms))
            )
        return rows


def _number(data: Mapping[str, Any], name: str, where: str) -> float:
    value = data.get(name)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ProfileError(f"{where}: '{name}' must be a finite number")
    if value < 0:
        raise ProfileError(f"{where}: '{name}' must be >= 0")
    return float(value)


def _count(data: Mapping[str, Any], name: str, where: str) -> int:
    value = data.get(name)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ProfileError(f"{where}: '{name}' must be an integer >= 1")
    return value


def _list(data: Mapping[str, Any], name: str, where: str) -> Sequence[Mapping[str, Any]]:
    value = data.get(name, [])
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise ProfileError(f"{where}: '{name}' must be a list of objects")
    return value


def profile_from_json(data: Any, where: str = "host profile") -> HostProfile:
    """The profile in `data` (a parsed JSON document); ProfileError if it is not one."""
    if not isinstance(data, dict):
        raise ProfileError(f"{where}: not a JSON object")
    if data.get("format") != FORMAT:
        raise ProfileError(f"{where}: format is not '{FORMAT}'")
    key = data.get("key", {})
    if not isinstance(key, dict) or not all(isinstance(v, str) for v in key.values()):
        raise ProfileError(f"{where}: 'key' must map names to strings")
    linears = tuple(
        LinearTiming(
            _count(b, "rows", where),
            _count(b, "in", where),
            _count(b, "out", where),
            _number(b, "npu_ms", where),
            _number(b, "cpu_ms", where),
            str(b.get("label", "")),
        )
        for b in _list(data, "linears", where)
    )
    if not linears:
        raise ProfileError(f"{where}: 'linears' is empty")
    ops = tuple(
        OpTiming(
            str(o.get("kind", "?")),
            str(o.get("shape", "")),
            _number(o, "npu_ms", where),
            _number(o, "cpu_ms", where),
        )
        for o in _list(data, "ops", where)
    )
    settings = data.get("settings")
    # "activations": profiles of suite 4, which timed the fused and apart forms only.
    kernels = tuple(
        KernelTiming(
            _count(k, "rows", where),
            _number(k, "fused_ms", where),
            _number(k, "apart_ms", where),
            _number(k, "onednn_ms", where) if "onednn_ms" in k else None,
            _number(k, "snippets_ms", where) if "snippets_ms" in k else None,
            _number(k, "snippets_off_ms", where) if "snippets_off_ms" in k else None,
            _number(k, "int8_fused_ms", where) if "int8_fused_ms" in k else None,
            _number(k, "int8_apart_ms", where) if "int8_apart_ms" in k else None,
            _number(k, "fp16_wide_ms", where) if "fp16_wide_ms" in k else None,
            _number(k, "fp16_narrow_ms", where) if "fp16_narrow_ms" in k else None,
            _number(k, "int8_dynamic_ms", where) if "int8_dynamic_ms" in k else None,
        )
        for k in _list(data, "kernels" if "kernels" in data else "activations", where)
    )
    measured = data.get("transition_measured")
    split_ms = None
    if isinstance(measured, dict) and "two_segments_ms" in measured:
        two = _number(measured, "two_segments_ms", where)
        split_ms = max(two - _number(measured, "one_segment_ms", where), 0.0)
    return HostProfile(
        dict(key),
        _number(data, "transition_ms", where),
        _number(data, "dispatch_ms", where),
        linears,
        ops,
        settings if isinstance(settings, dict) else None,
        float(data.get("build_seconds", 0.0) or 0.0),
        kernels,
        split_ms,
    )


def read_profile(path: str | Path) -> HostProfile:
    """The profile saved at `path`; ProfileError (one line) if it cannot be read."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise ProfileError(f"cannot read host profile {path}: {e.strerror or e}") from e
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ProfileError(f"{path}: not JSON ({e.msg} at line {e.lineno})") from e
    return profile_from_json(data, str(path))


@cache
def _cached(path: str, mtime_ns: int, size: int) -> HostProfile:
    return read_profile(path)


def check_profile_option(path: str | None) -> None:
    """A pass's `profile` option: a bad path or file fails when the pipeline is parsed,
    as a ValueError (forge-opt's one-line pipeline error)."""
    if path is None:
        return
    try:
        load_profile(path)
    except ProfileError as e:
        raise ValueError(e.args[0]) from e


def load_profile(path: str | Path) -> HostProfile:
    """`read_profile`, once per file version (passes run once per function)."""
    try:
        stat = Path(path).stat()
    except OSError as e:
        raise ProfileError(f"cannot read host profile {path}: {e.strerror or e}") from e
    return _cached(str(path), stat.st_mtime_ns, stat.st_size)
