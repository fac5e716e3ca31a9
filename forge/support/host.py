"""What Forge knows about the machine and its own installation, written once.

The compile cache's key, the host profile's key, the cost model's file, both benches'
report headers and `forge-opt --version` read these facts from here: the CPU (name,
family and model, instruction-set flags, cores), the versions of installed distributions,
the NNFactory build (built here, without package metadata), Forge's cache folders, and
the map from Forge's packages to the checkout's folders. Each key keeps the fields it
needs (a compile depends on the CPU's flags, a measurement on the Forge version), but
every field has one definition.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import os
import platform
from functools import cache
from pathlib import Path

SOURCE_ROOT = Path(__file__).resolve().parents[2]
"""The checkout (or install) root that holds the folders of `PACKAGE_DIRS`."""

PACKAGE_DIRS: dict[str, str] = {
    "forge": "forge",
    "forge.dialects": "dialects",
    "forge.transforms": "transforms",
    "forge.conversion": "conversion",
    "forge.tools": "tools",
}
"""Import name -> folder: pyproject.toml's `package-dir` (a test checks they agree)."""

CACHE_ENV = "FORGE_CACHE_DIR"
"""Forge's cache root; else `$XDG_CACHE_HOME/forge`, else `~/.cache/forge`."""

NNFACTORY_PACKAGE = "intel_npu_acceleration_library"
NNFACTORY_LIBRARY = Path("lib") / "libintel_npu_acceleration_library.so"
"""NNFactory's native library, inside its package folder."""


# ------------------------------------------------------------------------ the CPU


@cache
def cpu_info() -> dict[str, str]:
    """The first processor's fields in /proc/cpuinfo (empty where there is none)."""
    fields: dict[str, str] = {}
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return fields
    for line in text.splitlines():
        if not line.strip():
            break
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    return fields


def cpu_model() -> str:
    """The CPU's model name (the platform's processor name where /proc has none)."""
    return cpu_info().get("model name") or platform.processor() or platform.machine() or "unknown"


@cache
def cpu_flags_digest() -> str:
    """A digest of the CPU's instruction-set flags (OpenVINO's kernels depend on them)."""
    flags = cpu_info().get("flags")
    if flags is None:
        return "unknown"
    return hashlib.sha256(" ".join(sorted(flags.split())).encode()).hexdigest()[:16]


def cores() -> int:
    return os.cpu_count() or 1


def cpu_description(family: bool = False) -> str:
    """The CPU for a report's header: its name (with its family and model when asked)
    and the core count."""
    name = cpu_info().get("model name") or "unknown CPU"
    number, model = cpu_info().get("cpu family"), cpu_info().get("model")
    where = f" (family {number}, model {model})" if family and number and model else ""
    return f"{name}{where}, {os.cpu_count()} core(s)"


# ------------------------------------------------------------------ the libraries


def distribution_version(distribution: str, missing: str = "absent") -> str:
    """An installed distribution's version, else `missing`."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return missing


def nnfactory_package_dir() -> Path | None:
    """Where NNFactory's package is installed, without importing it."""
    spec = importlib.util.find_spec(NNFACTORY_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def nnfactory_build() -> str:
    """NNFactory is built here (scripts/build_nnfactory.sh) and has no package
    metadata: its native library's size and modification time identify the build."""
    package_dir = nnfactory_package_dir()
    if package_dir is None:
        return "absent"
    try:
        stat = (package_dir / NNFACTORY_LIBRARY).stat()
    except OSError:
        return "absent"
    return f"{stat.st_size}-{stat.st_mtime_ns}"


# ----------------------------------------------------------------- cache folders


def cache_root() -> Path:
    """`$FORGE_CACHE_DIR`, else `$XDG_CACHE_HOME/forge`, else `~/.cache/forge`."""
    base = os.environ.get(CACHE_ENV)
    if base:
        return Path(base).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path("~/.cache").expanduser()) / "forge"


CACHE_FOLDERS: dict[str, str] = {"compile": "compile", "host-profile": ".", "cost-model": "."}
"""Kind -> folder under `cache_root()`: the compile cache's entries (and spilled weights)
in `compile/`; host profiles and the calibrated cost model at the root, where earlier
releases wrote them."""


def cache_folder(kind: str) -> Path:
    """Where one kind of cached file lives (`CACHE_FOLDERS`)."""
    return cache_root() / CACHE_FOLDERS[kind]
