"""`forge doctor`'s checks: a real NNFactory graph built, compiled and run on this
machine, and the host profile placement reads (`forge.runtime.host_profile`)."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from forge.conversion.nnfactory_backend import device_name, load_backend
from forge.runtime.host_profile import (
    PROFILE_ENV,
    LoadedProfile,
    cache_path,
    format_profile,
    load_host_profile,
)
from forge.transforms.host_profile import ProfileError, read_profile


@dataclass(frozen=True)
class SmokeResult:
    max_abs_error: float
    tolerance: float
    compile_seconds: float
    run_seconds: float
    device: str

    @property
    def ok(self) -> bool:
        return self.max_abs_error <= self.tolerance

    def summary(self) -> str:
        verdict = "ok" if self.ok else "MISMATCH"
        return (
            f"NNFactory linear->gelu->softmax on {self.device}: {verdict} "
            f"(max-abs error {self.max_abs_error:.2e} vs torch, tolerance {self.tolerance:.0e}; "
            f"compile {self.compile_seconds * 1e3:.1f} ms, run {self.run_seconds * 1e3:.2f} ms)"
        )


def smoke_test(batch: int = 8, in_features: int = 64, out_features: int = 32) -> SmokeResult:
    """Build, compile and run linear -> gelu -> softmax with NNFactory; compare with torch."""
    import torch

    backend = load_backend()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((batch, in_features)).astype(np.float16)
    w = (rng.standard_normal((out_features, in_features)) / in_features**0.5).astype(np.float16)
    b = rng.standard_normal((1, out_features)).astype(np.float16)

    factory = backend.NNFactory()
    node = factory.parameter((batch, in_features), np.float16)
    node = factory.linear(node, out_features, in_features, bias=True)
    node = factory.gelu_erf(node)
    factory.softmax(node, -1)
    start = time.perf_counter()
    factory.compile()
    compiled = time.perf_counter()
    out = factory.run(x, (w, b))
    ran = time.perf_counter()

    xt, wt, bt = (torch.from_numpy(a).float() for a in (x, w, b))
    expected = torch.softmax(torch.nn.functional.gelu(xt @ wt.T + bt), dim=-1)
    error = float(np.abs(out.astype(np.float32) - expected.numpy()).max())
    return SmokeResult(error, 1e-3, compiled - start, ran - compiled, device_name())


def profile_summary(measure: bool, rebuild: bool = False) -> str:
    """The host profile as a table of decisions: loaded, or measured when absent, stale
    or `rebuild`, with `measure`; else the cached one if there is one (`forge doctor`
    alone never measures)."""
    if measure:
        return format_profile(load_host_profile(rebuild=rebuild))
    fixed = os.environ.get(PROFILE_ENV)
    path = Path(fixed) if fixed else cache_path()
    if not path.exists():
        return f"host profile: none cached ({path}); `forge doctor --profile` measures it"
    start = time.perf_counter()
    try:
        profile = read_profile(path)
    except ProfileError as e:
        return f"host profile: {e.args[0]}; `forge doctor --profile` measures it again"
    return format_profile(LoadedProfile(path, profile, False, time.perf_counter() - start))
