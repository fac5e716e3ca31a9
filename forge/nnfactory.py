"""Access to Intel's NNFactory (intel-npu-acceleration-library's `backend`).

The library's package root imports transformers and neural-compressor (~7 s, and
neural-compressor is not installed here); only `backend` is needed, so we register
the package as a bare namespace and import `backend` alone (~1 s). With no NPU
present, NNFactory compiles and runs its graphs on OpenVINO's CPU plugin.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import time
import warnings
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import ModuleType

import numpy as np

from forge.diagnostics import ForgeError

PACKAGE = "intel_npu_acceleration_library"


class NNFactoryUnavailable(ForgeError):
    """NNFactory cannot be loaded; the message says how to get it."""


@cache
def load_backend() -> ModuleType:
    """Import `intel_npu_acceleration_library.backend` without the package root."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise NNFactoryUnavailable(
            "NNFactory (intel-npu-acceleration-library 1.4.0) is not installed; "
            "run `bash scripts/setup.sh`"
        )
    package_dir = Path(next(iter(spec.submodule_search_locations)))
    library = package_dir / "lib" / "libintel_npu_acceleration_library.so"
    if not library.exists():
        raise NNFactoryUnavailable(f"NNFactory's native library is missing: {library}")
    if PACKAGE not in sys.modules:
        sys.modules[PACKAGE] = importlib.util.module_from_spec(spec)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="NPU is not available")
        warnings.filterwarnings("ignore", message="OpenVINO library is already loaded")
        try:
            return importlib.import_module(f"{PACKAGE}.backend")
        except (ImportError, OSError) as e:
            raise NNFactoryUnavailable(f"NNFactory failed to load: {e}") from e


def device_name() -> str:
    """Where NNFactory graphs execute on this machine."""
    return "NPU" if load_backend().npu_available() else "CPU (OpenVINO CPU plugin; no NPU found)"


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
