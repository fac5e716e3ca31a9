"""The layer rules of docs/architecture.md, checked on the import graph of the source."""

from __future__ import annotations

from pathlib import Path

from forge.devtools import layers


def test_no_import_cycles() -> None:
    assert layers.cycles(layers.build()) == []


def test_no_import_points_up_the_stack() -> None:
    assert layers.violations(layers.build()) == []


def test_every_module_is_in_a_layer() -> None:
    for module in layers.discover():
        layers.package_of(module)


def test_a_deliberate_cycle_is_found(tmp_path: Path) -> None:
    modules = layers.discover()
    # shapes imports npu (the fake one below), npu imports shapes: a cycle
    shapes = tmp_path / "shapes.py"
    shapes.write_text(
        modules["forge.dialects.shapes"].read_text() + "\nimport forge.dialects.npu\n"
    )
    npu = tmp_path / "npu.py"
    npu.write_text("from forge.dialects.shapes import numel\n")
    modules = {**modules, "forge.dialects.shapes": shapes, "forge.dialects.npu": npu}
    found = layers.cycles(layers.build(modules))
    assert ["forge.dialects.npu", "forge.dialects.shapes"] in found


def test_an_upward_import_is_found(tmp_path: Path) -> None:
    modules = layers.discover()
    bad = tmp_path / "npu_dce.py"
    bad.write_text(
        modules["forge.transforms.npu_dce"].read_text()
        + "\nfrom forge.runtime.executor import CompiledNPUExecutor\n"
    )
    found = layers.violations(layers.build({**modules, "forge.transforms.npu_dce": bad}))
    assert found == [
        "forge.transforms.npu_dce -> forge.runtime.executor "
        "(forge.transforms is level 4, forge.runtime level 6)"
    ]


def test_importing_the_cli_from_below_is_found(tmp_path: Path) -> None:
    modules = layers.discover()
    bad = tmp_path / "bench.py"
    bad.write_text(modules["forge.devtools.bench"].read_text() + "\nfrom forge.cli import main\n")
    found = layers.violations(layers.build({**modules, "forge.devtools.bench": bad}))
    assert found == ["forge.devtools.bench -> forge.cli (nothing imports the CLI)"]
