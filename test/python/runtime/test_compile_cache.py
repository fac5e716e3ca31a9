"""The persistent compile cache: hits skip torch.export and give the same outputs; any
change misses; a bad entry is rejected, noted and rebuilt; the folder stays private."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from forge.cli import main
from forge.conversion import nnfactory_graph
from forge.runtime import cache_key, cache_trust
from forge.runtime.compile import compile_model
from forge.runtime.compile_cache import MANIFEST, PROGRAM, CompileCache, cache_root
from forge.support.diagnostics import ForgeError


class Tiny(torch.nn.Module):
    """Two linears and a plain tensor attribute (torch.export lifts it as a constant)."""

    def __init__(self, seed: int = 0):
        super().__init__()
        torch.manual_seed(seed)
        self.up = torch.nn.Linear(8, 16)
        self.down = torch.nn.Linear(16, 4)
        self.offset = torch.linspace(-1.0, 1.0, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(torch.relu(self.up(x))) + self.offset


X = torch.randn(2, 8, generator=torch.Generator().manual_seed(3))


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh cache folder; NNFactory's in-process graph cache emptied, so that every
    cold compile asks OpenVINO (and writes its blob into the entry)."""
    monkeypatch.setenv("FORGE_CACHE_DIR", str(tmp_path / "forge"))
    monkeypatch.delenv("FORGE_CACHE_MAX_BYTES", raising=False)
    monkeypatch.setenv("FORGE_CACHE_BLOBS", "1")  # keep OpenVINO's blobs (CPU: off)
    nnfactory_graph.clear_cache()
    yield tmp_path / "forge" / "compile"
    nnfactory_graph.clear_cache()


def compiled(model: torch.nn.Module, **options: Any) -> tuple[Any, Any, torch.Tensor]:
    nnfactory_graph.clear_cache()  # as a new process would: no graph compiled yet
    run, report = compile_model(model, (X,), cache=True, **options)
    return run, report, run(X)[0]


def entries(root: Path) -> list[Path]:
    return sorted(p for p in root.iterdir() if not p.name.startswith("."))


def test_a_hit_skips_export_and_gives_identical_outputs(root: Path, captures: list) -> None:
    model = Tiny()
    _, cold, first = compiled(model)
    _, warm, second = compiled(model)
    assert (cold.cache, warm.cache) == ("miss", "hit")
    assert len(captures) == 1  # the hit ran no torch.export
    assert (
        warm.plan is None
        and warm.plan_summary
        == json.loads((root / cold.cache_entry / "meta.json").read_text())["summary"]
    )
    assert torch.equal(first, second)
    assert torch.allclose(second, model(X), atol=1e-5)
    assert warm.in_spec == cold.in_spec and warm.out_spec == cold.out_spec
    assert warm.cache_entry == cold.cache_entry
    files = {p.relative_to(root / cold.cache_entry).as_posix() for p in root.rglob("*")}
    assert {MANIFEST, PROGRAM, "meta.json", "constants.safetensors"} <= files
    assert any(f.startswith("ov/") and f.endswith(".blob") for f in files)


def test_a_changed_weight_misses(root: Path, captures: list) -> None:
    model = Tiny()
    _, first, _ = compiled(model)
    with torch.no_grad():
        model.up.weight[3, 5] += 1e-3
    _, second, out = compiled(model)
    assert second.cache == "miss" and second.cache_entry != first.cache_entry
    assert len(captures) == 2
    assert torch.allclose(out, model(X), atol=1e-5)


def test_a_changed_option_misses(root: Path, captures: list) -> None:
    model = Tiny()
    _, first, _ = compiled(model)
    _, second, _ = compiled(model, granularity="op")
    assert second.cache == "miss" and second.cache_entry != first.cache_entry


def test_a_changed_library_version_misses(
    root: Path, captures: list, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = Tiny()
    _, first, _ = compiled(model)
    versions = cache_key.library_versions()
    monkeypatch.setattr(cache_key, "library_versions", lambda: {**versions, "openvino": "2099.1"})
    _, second, _ = compiled(model)
    assert second.cache == "miss" and second.cache_entry != first.cache_entry


def test_the_key_covers_code_and_inputs(root: Path) -> None:
    model = Tiny()

    def key(args: tuple) -> dict:
        return cache_key.program_fields(model, args, None, {}, cache_trust.model_fields(model))

    fields = key((X,))
    assert fields["key_from"] == "model object"
    assert cache_key.key_of(fields) != cache_key.key_of(key((torch.randn(3, 8),)))
    # input values are not part of the program
    assert cache_key.key_of(fields) == cache_key.key_of(key((torch.zeros(2, 8),)))
    model.offset = model.offset + 1  # a plain tensor attribute
    assert key((X,))["weights"] != fields["weights"]
    assert set(cache_key.host_key()) >= {"cpu", "cores"}


def _rebuilt(root: Path, capsys: pytest.CaptureFixture, damage: Any, reason: str) -> None:
    """Damage the entry a compile stored; the next compile notes why and rebuilds."""
    model = Tiny()
    _, first, expected = compiled(model)
    capsys.readouterr()
    damage(root / first.cache_entry)
    _, second, out = compiled(model)
    err = capsys.readouterr().err
    assert second.cache == "miss"
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines == [
        f"forge: note: compile cache entry {first.cache_entry[:12]} was {reason}; rebuilt"
    ]
    assert "Traceback" not in err
    assert torch.equal(out, expected)
    _, third, _ = compiled(model)  # the rebuilt entry is good
    assert third.cache == "hit"


def test_tampered_ir_is_rebuilt(root: Path, capsys: pytest.CaptureFixture) -> None:
    def damage(entry: Path) -> None:
        text = (entry / PROGRAM).read_text()
        assert "f32" in text
        (entry / PROGRAM).write_text(text.replace("f32", "i32", 1))  # same size

    _rebuilt(root, capsys, damage, "tampered with (program.mlir does not match its checksum)")


def test_tampered_manifest_is_rebuilt(root: Path, capsys: pytest.CaptureFixture) -> None:
    def damage(entry: Path) -> None:
        manifest = json.loads((entry / MANIFEST).read_text())
        manifest["fields"]["options"]["granularity"] = "op"
        (entry / MANIFEST).write_text(json.dumps(manifest))

    _rebuilt(root, capsys, damage, "stored under another key")


def test_unreadable_manifest_is_rebuilt(root: Path, capsys: pytest.CaptureFixture) -> None:
    def damage(entry: Path) -> None:
        (entry / MANIFEST).write_text("{not json")

    _rebuilt(root, capsys, damage, "invalid (manifest.json is not JSON)")


def test_truncated_blob_is_rebuilt(root: Path, capsys: pytest.CaptureFixture) -> None:
    def damage(entry: Path) -> None:
        blob = next((entry / "ov").glob("*.blob"))
        size = blob.stat().st_size
        with open(blob, "r+b") as f:
            f.truncate(size // 2)

    model = Tiny()
    _, first, _ = compiled(model)
    blob = next((root / first.cache_entry / "ov").glob("*.blob"))
    size = blob.stat().st_size
    shutil.rmtree(root)
    _rebuilt(
        root,
        capsys,
        damage,
        f"truncated or changed (ov/{blob.name}: {size // 2} bytes, expected {size})",
    )


def test_extra_file_is_rebuilt(root: Path, capsys: pytest.CaptureFixture) -> None:
    def damage(entry: Path) -> None:
        (entry / "ov" / "123.blob").write_bytes(b"not a blob")

    _rebuilt(root, capsys, damage, "holding an unexpected file ov/123.blob")


def test_foreign_entry_is_rebuilt(root: Path, capsys: pytest.CaptureFixture) -> None:
    """An entry copied under another key (another model's entry moved over this one)."""
    _, other, _ = compiled(Tiny(seed=1))

    def damage(entry: Path) -> None:
        shutil.rmtree(entry)
        shutil.copytree(root / other.cache_entry, entry)

    _rebuilt(root, capsys, damage, "stored under another key")


def test_consistently_forged_ir_is_rejected_by_the_parser(
    root: Path, capsys: pytest.CaptureFixture
) -> None:
    """File and manifest rewritten together: the IR still has to parse and verify."""

    def damage(entry: Path) -> None:
        forge_file(entry, PROGRAM, '"builtin.module"() ({ %0 = "npu.bogus"() : () -> i32 })')

    _rebuilt(root, capsys, damage, "unreadable (ParseError in its IR)")


def forge_file(entry: Path, name: str, text: str) -> None:
    """Rewrite `name` and its manifest row together (a consistently forged entry)."""
    (entry / name).write_text(text)
    manifest = json.loads((entry / MANIFEST).read_text())
    manifest["files"][name] = {
        "bytes": (entry / name).stat().st_size,
        "sha256": hashlib.sha256((entry / name).read_bytes()).hexdigest(),
    }
    (entry / MANIFEST).write_text(json.dumps(manifest))


def test_folders_are_private(root: Path) -> None:
    _, report, _ = compiled(Tiny())
    for folder in (root.parent, root, root / report.cache_entry, root / report.cache_entry / "ov"):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder
    assert cache_root() == root


def test_a_group_writable_folder_is_not_used(
    root: Path, capsys: pytest.CaptureFixture, captures: list
) -> None:
    root.mkdir(parents=True)
    os.chmod(root, 0o770)
    _, first, _ = compiled(Tiny())
    _, second, _ = compiled(Tiny())
    assert (first.cache, second.cache) == ("off", "off")
    assert len(captures) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert (
        err
        == [f"forge: warning: compile cache {root} is writable by others (mode 0770); not using it"]
        * 2
    )
    assert list(root.iterdir()) == []


def test_eviction_keeps_the_total_under_the_limit(root: Path) -> None:
    _, first, _ = compiled(Tiny(seed=0))
    size = CompileCache().total_bytes()
    limit = size + size // 2  # room for one entry, not two
    os.environ["FORGE_CACHE_MAX_BYTES"] = str(limit)
    try:
        _, second, _ = compiled(Tiny(seed=1))
        _, third, _ = compiled(Tiny(seed=2))
    finally:
        del os.environ["FORGE_CACHE_MAX_BYTES"]
    store = CompileCache()
    assert store.total_bytes() <= limit
    assert [e.key for e in store.entries()] == [third.cache_entry]
    assert first.cache_entry != second.cache_entry != third.cache_entry


def test_an_entry_over_the_limit_is_not_kept(
    root: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FORGE_CACHE_MAX_BYTES", "1K")
    _, report, _ = compiled(Tiny())
    assert report.cache == "miss" and entries(root) == []
    assert "exceeds the cache limit of 0 MiB (FORGE_CACHE_MAX_BYTES); not kept" in (
        capsys.readouterr().err
    )


def test_an_uncached_compile_writes_nothing_into_an_entry(root: Path) -> None:
    """OpenVINO's cache folder is a core-wide setting: it must not stay on an entry."""
    _, report, _ = compiled(Tiny())
    before = sorted((root / report.cache_entry).rglob("*"))
    nnfactory_graph.clear_cache()
    compile_model(Tiny(seed=5), (X,))  # cache off
    assert sorted((root / report.cache_entry).rglob("*")) == before
    assert os.environ.get("NNFACTORY_CACHE_DIR") in (None, "")


def test_forge_cache_ls_and_clear(root: Path, capsys: pytest.CaptureFixture) -> None:
    _, first, _ = compiled(Tiny(seed=0))
    _, second, _ = compiled(Tiny(seed=1))
    capsys.readouterr()
    assert main(["cache", "ls"]) == 0
    out = capsys.readouterr().out
    assert f"compile cache: {root}" in out
    assert out.count("Tiny (2x8)") == 2
    assert first.cache_entry[:12] in out and second.cache_entry[:12] in out
    assert "2 entries" in out and "of 8.0 GiB (FORGE_CACHE_MAX_BYTES)" in out
    assert main(["cache", "clear", "--older-than", "1d"]) == 0
    assert "removed 0 entries" in capsys.readouterr().out
    assert main(["cache", "clear"]) == 0
    assert "removed 2 entries" in capsys.readouterr().out
    assert entries(root) == []
    assert main(["cache", "clear", "--older-than", "soon"]) == 1
    assert "expected an age such as 30d" in capsys.readouterr().err


def test_blobs_are_off_on_the_cpu_plugin_by_default(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("FORGE_CACHE_BLOBS")
    from forge.conversion.nnfactory_backend import load_backend

    if load_backend().npu_available():
        pytest.skip("an NPU keeps its blobs")
    _, first, expected = compiled(Tiny())
    assert list((root / first.cache_entry / "ov").iterdir()) == []
    _, second, out = compiled(Tiny())
    assert second.cache == "hit" and torch.equal(out, expected)


# ----------------------------------------------------- a hostile or unusable cache


def forge_meta(entry: Path, change: Any) -> None:
    meta = json.loads((entry / "meta.json").read_text())
    change(meta)
    forge_file(entry, "meta.json", json.dumps(meta))


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda m: m.pop("weights"), "invalid (meta.json has no 'weights')"),
        (lambda m: m.update(num_inputs="1"), "invalid (meta.json.num_inputs is a str)"),
        (lambda m: m.update(in_spec="[1, {garbage"), "invalid (meta.json: JSONDecodeError in"),
        (lambda m: m["summary"].update(transitions=None), "summary.transitions is not a list"),
    ],
)
def test_forged_metadata_is_rebuilt(
    root: Path, capsys: pytest.CaptureFixture, change: Any, reason: str
) -> None:
    model = Tiny()
    _, first, expected = compiled(model)
    capsys.readouterr()
    forge_meta(root / first.cache_entry, change)
    _, second, out = compiled(model)
    err = capsys.readouterr().err.strip()
    assert second.cache == "miss" and torch.equal(out, expected)
    assert err.startswith(f"forge: note: compile cache entry {first.cache_entry[:12]} was ")
    assert reason in err and err.endswith("; rebuilt") and "\n" not in err


@pytest.mark.parametrize(
    ("files", "reason"),
    [
        (["program.mlir"], "invalid (manifest.files is not a map)"),
        ({"program.mlir": 5}, "invalid (manifest.files.program.mlir is not a record)"),
        ({"../x": {"bytes": 1, "sha256": ""}}, "invalid (the manifest names the file '../x')"),
    ],
)
def test_a_manifest_of_the_wrong_shape_is_rebuilt(
    root: Path, capsys: pytest.CaptureFixture, files: Any, reason: str
) -> None:
    def damage(entry: Path) -> None:
        manifest = json.loads((entry / MANIFEST).read_text())
        (entry / MANIFEST).write_text(json.dumps({**manifest, "files": files}))

    _rebuilt(root, capsys, damage, reason)


def _dev_zero(entry: Path, name: str) -> None:
    (entry / name).unlink()
    (entry / name).symlink_to("/dev/zero")


def _zero_device(entry: Path) -> None:
    """The manifest replaced by a device node that reads as /dev/zero (root only)."""
    (entry / MANIFEST).unlink()
    try:
        os.mknod(entry / MANIFEST, stat.S_IFCHR | 0o600, os.makedev(1, 5))
    except PermissionError:
        pytest.skip("making a device node needs root")


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (lambda e: _dev_zero(e, MANIFEST), "invalid (manifest.json is a symlink)"),
        (lambda e: _dev_zero(e, PROGRAM), "invalid (program.mlir is a symlink)"),
        (_zero_device, "invalid (manifest.json is not a regular file)"),
        (
            lambda e: ((e / MANIFEST).unlink(), os.mkfifo(e / MANIFEST)),
            "invalid (manifest.json is not a regular file)",
        ),
        (
            lambda e: ((e / "meta.json").unlink(), os.mkfifo(e / "meta.json")),
            "invalid (meta.json is not a regular file)",
        ),
    ],
    ids=["manifest-dev-zero", "program-dev-zero", "manifest-device", "manifest-fifo", "meta-fifo"],
)
def test_devices_fifos_and_symlinks_are_refused_unread(
    root: Path, capsys: pytest.CaptureFixture, damage: Any, reason: str
) -> None:
    _rebuilt(root, capsys, damage, reason)


def test_an_entry_that_is_a_symlink_out_of_the_cache_is_replaced(
    root: Path, capsys: pytest.CaptureFixture, tmp_path: Path
) -> None:
    model = Tiny()
    _, first, _ = compiled(model)
    entry = root / first.cache_entry
    outside = tmp_path / "outside"
    shutil.move(entry, outside)
    entry.symlink_to(outside)
    capsys.readouterr()
    _, second, _ = compiled(model)
    assert second.cache == "miss" and second.cache_stored
    assert "was invalid (not a folder); rebuilt" in capsys.readouterr().err
    assert entry.is_dir() and not entry.is_symlink() and (outside / MANIFEST).exists()


@pytest.fixture
def unwritable(root: Path) -> Iterator[Path]:
    """The cache folder, made unwritable: mode 0500, and immutable as root (root
    writes through any mode; `chattr +i` stops it)."""
    root.mkdir(parents=True)
    os.chmod(root, 0o500)
    immutable = os.getuid() == 0
    if immutable and os.system(f"chattr +i {root} 2>/dev/null") != 0:
        pytest.skip("root writes through mode 0500 and chattr +i is not available here")
    yield root
    if immutable:
        os.system(f"chattr -i {root}")
    os.chmod(root, 0o700)


def test_an_unwritable_folder_compiles_uncached_with_a_note(
    unwritable: Path, capsys: pytest.CaptureFixture
) -> None:
    _, report, out = compiled(Tiny())
    err = capsys.readouterr().err.strip()
    assert report.cache == "miss" and not report.cache_stored
    assert (
        err
        == (
            f"forge: note: compile cache {unwritable} cannot be written (Operation not permitted); "
            "compiling without it, nothing stored"
        )
        or "Permission denied" in err
    )
    assert torch.allclose(out, Tiny()(X), atol=1e-5)
    assert list(unwritable.iterdir()) == []


def test_a_hit_in_a_folder_that_became_unwritable(root: Path) -> None:
    _, first, expected = compiled(Tiny())
    entry = root / first.cache_entry
    if os.system(f"chattr +i {entry} {entry / MANIFEST} 2>/dev/null") != 0:
        pytest.skip("chattr +i is not available here")
    try:
        _, second, out = compiled(Tiny())
    finally:
        os.system(f"chattr -i {entry} {entry / MANIFEST}")
    assert second.cache == "hit" and torch.equal(out, expected)


def test_a_cache_dir_that_is_a_file(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("FORGE_CACHE_DIR", str(tmp_path / "file"))
    _, report, _ = compiled(Tiny())
    assert report.cache == "off"
    assert capsys.readouterr().err.strip() == (
        f"forge: warning: compile cache {tmp_path / 'file' / 'compile'} cannot be created: "
        "Not a directory; not using it"
    )


@pytest.mark.parametrize("value", ["inf", "1e400", "nan", "-1", "lots", "9e30G"])
def test_a_bad_size_limit_is_one_line_naming_the_variable(
    root: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture, value: str
) -> None:
    monkeypatch.setenv("FORGE_CACHE_MAX_BYTES", value)
    with pytest.raises(ForgeError, match=f"FORGE_CACHE_MAX_BYTES='{value}': "):
        compile_model(Tiny(), (X,), cache=True)
    assert main(["cache", "ls"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("forge: error: FORGE_CACHE_MAX_BYTES=") and "\n" not in err


def test_listing_reads_no_fifo_nor_device(root: Path, capsys: pytest.CaptureFixture) -> None:
    """`forge cache ls` and the eviction after every store list entries: a FIFO or
    /dev/zero manifest is listed as unreadable, never read."""
    _, first, _ = compiled(Tiny(seed=0))
    _, second, _ = compiled(Tiny(seed=1))
    (root / first.cache_entry / MANIFEST).unlink()
    os.mkfifo(root / first.cache_entry / MANIFEST)
    _dev_zero(root / second.cache_entry, MANIFEST)
    capsys.readouterr()
    assert main(["cache", "ls"]) == 0
    assert capsys.readouterr().out.count("(unreadable)") == 2
    _, third, _ = compiled(Tiny(seed=2))  # stores, then evicts over the listing
    assert third.cache_stored
