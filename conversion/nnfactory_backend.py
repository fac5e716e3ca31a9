"""Access to Intel's NNFactory (intel-npu-acceleration-library's `backend`).

The library's package root imports transformers and neural-compressor (~7 s, and
neural-compressor is not installed here); only `backend` is needed, so we register
the package as a bare namespace and import `backend` alone (~1 s). With no NPU
present, NNFactory compiles and runs its graphs on OpenVINO's CPU plugin.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import warnings
from functools import cache
from types import ModuleType

from forge.support.diagnostics import ForgeError
from forge.support.host import NNFACTORY_LIBRARY, NNFACTORY_PACKAGE, nnfactory_package_dir

PACKAGE = NNFACTORY_PACKAGE


class NNFactoryUnavailable(ForgeError):
    """NNFactory cannot be loaded; the message says how to get it."""


ENVIRONMENT: dict[str, tuple[str, ...] | None] = {
    "NNFACTORY_SNIPPETS_MODE": ("ENABLE", "DISABLE", "IGNORE_CALLBACK"),
    "NNFACTORY_INFERENCE_PRECISION": ("f32", "bf16", "f16"),
    "NNFACTORY_PERFORMANCE_MODE": ("LATENCY", "THROUGHPUT"),
    "NNFACTORY_FIRST_INFERENCE": ("0", "1"),
    "NNFACTORY_DYNAMIC_QUANTIZATION_GROUP_SIZE": None,
}
"""The variables NNFactory's patched C++ reads at every graph compile
(scripts/build_nnfactory.sh) -> their values (None: a count). OpenVINO throws on a value
it does not know, and a C++ exception through ctypes aborts the process."""


def check_environment() -> None:
    """A one-line error for an NNFactory variable OpenVINO would abort on (or that the
    C++ would misread: `strtoull("abc")` is 0, `strtoull("-5")` is 2^64 - 5)."""
    for name, allowed in ENVIRONMENT.items():
        value = os.environ.get(name)
        if value is None:
            continue
        if allowed is None and not (value.isdigit() and int(value) < 1 << 32):
            raise ForgeError(f"{name}={value!r}: expected a group size from 0 to 2^32 - 1")
        if allowed is not None and value not in allowed:
            raise ForgeError(f"{name}={value!r}: expected one of {', '.join(allowed)}")


def load_backend() -> ModuleType:
    """`intel_npu_acceleration_library.backend`, once NNFactory's environment variables
    are checked (every graph build comes here first)."""
    check_environment()
    return _backend()


@cache
def _backend() -> ModuleType:
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
