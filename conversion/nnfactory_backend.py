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
import warnings
from functools import cache
from types import ModuleType

from forge.support.diagnostics import ForgeError
from forge.support.host import NNFACTORY_LIBRARY, NNFACTORY_PACKAGE, nnfactory_package_dir

PACKAGE = NNFACTORY_PACKAGE


class NNFactoryUnavailable(ForgeError):
    """NNFactory cannot be loaded; the message says how to get it."""


@cache
def load_backend() -> ModuleType:
    """Import `intel_npu_acceleration_library.backend` without the package root."""
    spec = importlib.util.find_spec(PACKAGE)
    package_dir = nnfactory_package_dir()
    if spec is None or package_dir is None:
        raise NNFactoryUnavailable(
            "NNFactory (intel-npu-acceleration-library 1.4.0) is not installed; "
            "run `bash scripts/setup.sh`"
        )
    library = package_dir / NNFACTORY_LIBRARY
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


@cache
def bindings() -> ModuleType:
    """The backend's ctypes bindings (`lib`: the native library's functions)."""
    load_backend()
    return importlib.import_module(f"{PACKAGE}.backend.bindings")


def device_name() -> str:
    """Where NNFactory graphs execute on this machine."""
    return "NPU" if load_backend().npu_available() else "CPU (OpenVINO CPU plugin; no NPU found)"
