"""The host module: one definition of each host fact, read by every key and folder."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from forge.runtime import cache_key, compile_cache, host_profile
from forge.support import host
from forge.tools import opt_arguments
from forge.tuning import cost


def test_package_dirs_are_pyprojects() -> None:
    """The map the layer checker, the cache key and forge-opt --version read is
    pyproject.toml's package-dir."""
    pyproject = tomllib.loads((host.SOURCE_ROOT / "pyproject.toml").read_text())
    assert pyproject["tool"]["setuptools"]["package-dir"] == host.PACKAGE_DIRS
    assert tuple(host.PACKAGE_DIRS.values()) == cache_key.SOURCE_DIRS
    assert set(opt_arguments.package_origins()) == set(host.PACKAGE_DIRS)


@pytest.mark.parametrize(
    ("forge_dir", "xdg", "expected"),
    [
        ("forge-dir", "xdg", "forge-dir"),
        ("", "xdg", "xdg/forge"),
        ("", "", "home/.cache/forge"),
    ],
)
def test_every_cache_kind_follows_one_rule(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, forge_dir: str, xdg: str, expected: str
) -> None:
    """FORGE_CACHE_DIR, then XDG_CACHE_HOME, then ~/.cache: for the compile cache, host
    profiles and the calibrated cost model alike."""
    monkeypatch.setenv(host.CACHE_ENV, str(tmp_path / forge_dir) if forge_dir else "")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / xdg) if xdg else "")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv(cost.COST_MODEL_ENV, raising=False)
    root = tmp_path / expected
    assert host.cache_root() == root
    assert compile_cache.cache_root() == root / "compile"
    assert host_profile.cache_path({"k": "v"}).parent == root
    assert cost.default_path() == root / "cost_model.json"


def test_unknown_cache_kind() -> None:
    with pytest.raises(KeyError):
        host.cache_folder("nonsense")


def test_both_host_keys_read_one_cpu() -> None:
    """The compile cache's key adds what compiled code depends on (machine, ISA flags)
    to the CPU fields the host profile keys on; both read them from the host module."""
    compile_key, profile_key = cache_key.host_key(), host_profile.host_key()
    for field in ("cpu", "cores"):
        assert compile_key[field] == profile_key[field]
    assert compile_key["cpu"] == host.cpu_model()
    assert compile_key["cores"] == str(host.cores())
    assert compile_key["cpu_flags"] == host.cpu_flags_digest()
    assert profile_key["nnfactory"] == cache_key.library_versions()["nnfactory"]


def test_cpu_facts() -> None:
    info = host.cpu_info()
    digest = host.cpu_flags_digest()
    assert digest == "unknown" or (len(digest) == 16 and int(digest, 16) >= 0)
    assert host.cpu_description().endswith(f", {host.cores()} core(s)")
    name = info.get("model name", "unknown CPU")
    assert host.cpu_description().startswith(name)
    if "cpu family" in info and "model" in info:
        assert f"(family {info['cpu family']}, model {info['model']})" in host.cpu_description(
            family=True
        )


def test_versions_and_nnfactory_build() -> None:
    """NNFactory has no package metadata: its build is its library's size and time."""
    assert host.distribution_version("no-such-distribution-here") == "absent"
    assert host.distribution_version("no-such-distribution-here", missing="?") == "?"
    assert host.distribution_version("xdsl") == "0.75.0"
    package_dir = host.nnfactory_package_dir()
    assert package_dir is not None
    library = (package_dir / host.NNFACTORY_LIBRARY).stat()
    assert host.nnfactory_build() == f"{library.st_size}-{library.st_mtime_ns}"
