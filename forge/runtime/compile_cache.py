"""A persistent compile cache: the second start of the same model skips the import and
the pipeline (and torch.export, when the key comes from the model object), and
OpenVINO may load its compiled graph instead of compiling it.

Key: `cache_key.program_fields`, from the model object where `cache_trust` proves it
determines the program, else from the program torch.export captured (the miss's compile
reuses that capture).

An entry is a folder named by the key, holding no pickles:

* `program.mlir`: the planned IR, as text (re-parsed and verified by xDSL on a hit);
* `meta.json`: what the executor needs besides the IR (input names, torch.export's
  pytree specs as JSON, non-tensor inputs and outputs, which model tensor each weight
  argument is, notes, the plan's figures for `forge compile`);
* `constants.safetensors`: tensors torch.export lifted out of the code (safetensors, no
  code runs when it loads), when there are any;
* `ov/`: OpenVINO's own cache folder (`NNFACTORY_CACHE_DIR` while each graph compiles):
  the compiled blobs, read by OpenVINO only; empty unless `blobs_enabled()` (by default
  only on an NPU: on OpenVINO's CPU plugin importing GPT-2's blob cost as much as
  compiling it);
* `manifest.json`: the key and its fields, the model, created and last-used times, and
  the size and SHA-256 of every other file.

On a hit every file is checked against the manifest before anything reads it (the big
OpenVINO blobs in a background thread while xDSL parses the IR), as hostile input
(`cache_files`: regular files only, size-capped reads, schemas); a manifest stored under
another key, a missing, extra, truncated, changed or malformed file, or IR that does not
parse or does not fit the model's weights gets the entry removed and rebuilt, with a
one-line note on stderr. A folder that cannot be written degrades to an uncached
compile with a note. A manifest forged consistently with tampered files still only reaches
xDSL's parser (no code execution) and OpenVINO's blob reader, so the folder must be
private: it is created 0700, and one writable by others or owned by another user is
not used (a one-line warning).

Entries are written into a temporary folder renamed into place, so concurrent compiles
never see half an entry; the total is kept under `FORGE_CACHE_MAX_BYTES` (default
`DEFAULT_MAX_BYTES`) by removing the least recently used entries.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import stat
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch.utils._pytree import treespec_loads
from xdsl.dialects.builtin import ModuleOp
from xdsl.printer import Printer

from forge.dialects.context import entry_function, parse_module
from forge.frontend.capture import capture, resolve_tied_weights
from forge.runtime.cache_files import (
    MANIFEST,
    MANIFEST_LIMIT,
    META_LIMIT,
    PROGRAM_LIMIT,
    NotCacheable,
    Rejected,
    checked_manifest,
    checked_meta,
    describe,
    file_row,
    files_of,
    fits,
    load_json,
    read_capped,
    regular_bytes,
    regular_size,
    sha256_of,
    write_json,
)
from forge.runtime.cache_key import FORMAT, captured_fields, key_of, program_fields
from forge.runtime.cache_trust import model_fields
from forge.support.collector import collector_paused
from forge.support.diagnostics import ForgeError
from forge.support.host import cache_folder

MAX_ENV = "FORGE_CACHE_MAX_BYTES"
DEFAULT_MAX_BYTES = 8 << 30
"""8 GiB: GPT-2's compile and generate entries take about 1.5 GB (each program's
OpenVINO blob holds its own copy of the weights)."""
BLOBS_ENV = "FORGE_CACHE_BLOBS"
"""1: keep OpenVINO's compiled blobs in entries; 0: never; unset: only when NNFactory
runs on an NPU. On the CPU plugin a blob saved nothing measurable for GPT-2 (OpenVINO's
import hashes, reads and repacks the 500 MB of baked weights as a compile does) while
costing 500 MB of disk per program, a second of writing on a miss and a checksum on
every hit (docs/compile-cache.md)."""
PROGRAM = "program.mlir"
META = "meta.json"
CONSTANTS = "constants.safetensors"
OV_DIR = "ov"
BACKGROUND_BYTES = 16 << 20
"""Files at least this big are checksummed in a thread while the IR parses."""
STAGING_PREFIX = ".tmp-"


def note(message: str) -> None:
    print(f"forge: note: {message}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------- location


def cache_root() -> Path:
    """The compile cache's folder: `compile/` in Forge's cache root
    (`forge.support.host.cache_root`: `$FORGE_CACHE_DIR`, else `$XDG_CACHE_HOME/forge`,
    else `~/.cache/forge`)."""
    return cache_folder("compile")


def max_bytes_setting() -> int:
    text = os.environ.get(MAX_ENV)
    if not text:
        return DEFAULT_MAX_BYTES
    try:
        value = parse_size(text)
    except ValueError as e:
        raise ForgeError(f"{MAX_ENV}={text!r}: {e}") from e
    return value


def parse_size(text: str) -> int:
    """`4G`, `512M`, `100K` or a byte count."""
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    text = text.strip().upper().removesuffix("IB").removesuffix("B")
    scale = units.get(text[-1:], 1)
    number = text[:-1] if text[-1:] in units else text
    try:
        value = float(number)
    except ValueError:
        raise ValueError("expected a size such as 4G, 512M or a byte count") from None
    if not math.isfinite(value * scale) or value * scale >= 2**63:
        raise ValueError("expected a finite size below 8 EiB, such as 4G or 512M")
    if value < 0:
        raise ValueError("the size must not be negative")
    return int(value * scale)


def private_dir(path: Path) -> str | None:
    """Create `path` (and missing parents) as 0700; None when it is private to this
    user, else why it must not be used."""
    try:
        missing = [p for p in (path, *path.parents) if not p.exists()]
        for folder in reversed(missing):  # parents Forge creates are private too
            folder.mkdir(mode=0o700, exist_ok=True)
        info = path.stat()
    except OSError as e:
        return f"cannot be created: {e.strerror or e}"
    if not stat.S_ISDIR(info.st_mode):
        return "is not a directory"
    if hasattr(os, "getuid") and info.st_uid != os.getuid():
        return f"is owned by another user (uid {info.st_uid})"
    if info.st_mode & 0o022:
        return f"is writable by others (mode {stat.S_IMODE(info.st_mode):04o})"
    return None


# ------------------------------------------------------------------ OpenVINO blobs


def blobs_enabled() -> bool:
    """Whether entries keep OpenVINO's blobs (`BLOBS_ENV`)."""
    setting = os.environ.get(BLOBS_ENV, "").strip()
    if setting in ("0", "1"):
        return setting == "1"
    if setting:
        raise ForgeError(f"{BLOBS_ENV} must be 0 or 1, got '{setting}'")
    from forge.conversion.nnfactory_backend import load_backend

    return bool(load_backend().npu_available())


# ------------------------------------------------------------------------ entries


@dataclass
class CachedProgram:
    """A verified entry: the parsed IR and what the executor needs with it."""

    key: str
    path: Path
    module: ModuleOp
    meta: dict[str, Any]
    weights: dict[str, torch.Tensor]
    """Function argument name -> tensor: the model's own, or a stored constant."""
    load_seconds: float = 0.0
    specs: tuple[Any, Any] = (None, None)
    """torch.export's pytree specs of the inputs and outputs, decoded from `meta`."""

    @property
    def num_inputs(self) -> int:
        return int(self.meta["num_inputs"])

    @property
    def in_spec(self) -> Any:
        return self.specs[0]

    @property
    def out_spec(self) -> Any:
        return self.specs[1]

    @property
    def input_constants(self) -> dict[int, Any]:
        return {int(k): v for k, v in self.meta["input_constants"].items()}

    @property
    def output_constants(self) -> dict[int, Any]:
        return {int(k): v for k, v in self.meta["output_constants"].items()}


@dataclass
class EntryInfo:
    key: str
    path: Path
    model: str
    bytes: int
    created: float
    last_used: float
    manifest: dict[str, Any] = field(default_factory=dict)


def _is_folder(path: Path) -> bool:
    """A folder itself, not a symlink to one (which could lead out of the cache)."""
    try:
        return stat.S_ISDIR(path.lstat().st_mode)
    except OSError:
        return False


def _checksums(path: Path, files: dict[str, Any], names: list[str], out: dict[str, str]) -> None:
    """SHA-256 of `names` into `out` (a thread, while the IR parses); a file that
    cannot be read is left out, so it fails its check."""
    for name in names:
        with contextlib.suppress(Rejected):
            out[name] = sha256_of(path / name, files[name]["bytes"])


def _parsed(path: Path) -> ModuleOp:
    text = read_capped(path, PROGRAM_LIMIT)
    try:
        return parse_module(text.decode(), str(path))
    except Exception as e:  # xDSL raises many kinds
        raise Rejected(f"unreadable ({type(e).__name__} in its IR)") from e


class CompileCache:
    """Entries under `root` (default `cache_root()`), at most `max_bytes` in total."""

    def __init__(self, root: Path | str | None = None, max_bytes: int | None = None):
        self.root = Path(root).expanduser() if root is not None else cache_root()
        self.max_bytes = max_bytes_setting() if max_bytes is None else max_bytes
        self._problem: str | None = None
        self._checked = False

    # -- the folder

    def usable(self) -> bool:
        """Whether the folder is private to this user (created 0700 if missing); warns
        once when it is not."""
        if not self._checked:
            self._checked = True
            self._problem = private_dir(self.root)
            if self._problem is not None:
                print(
                    f"forge: warning: compile cache {self.root} {self._problem}; not using it",
                    file=sys.stderr,
                    flush=True,
                )
        return self._problem is None

    def entry_path(self, key: str) -> Path:
        return self.root / key

    # -- lookup

    def lookup(self, key: str, model: torch.nn.Module) -> CachedProgram | None:
        """The verified entry for `key`, or None (a bad entry is removed, with a note)."""
        path = self.entry_path(key)
        start = time.perf_counter()
        try:
            if not _is_folder(path):
                if not path.is_symlink() and not path.exists():
                    return None
                raise Rejected("invalid (not a folder)")
            hit = self._verified(key, path, model)
        except Rejected as e:
            self.remove(path)
            note(f"compile cache entry {key[:12]} was {e}; rebuilt")
            return None
        hit.load_seconds = time.perf_counter() - start
        return hit

    def _verified(self, key: str, path: Path, model: torch.nn.Module) -> CachedProgram:
        manifest = self._manifest(path)
        if manifest["key"] != key or key_of(manifest["fields"]) != key:
            raise Rejected("stored under another key")
        files: dict[str, Any] = manifest["files"]
        present = files_of(path)
        missing = sorted(set(files) - set(present))
        if missing:
            raise Rejected(f"missing {missing[0]}")
        extra = sorted(set(present) - set(files))
        if extra:
            raise Rejected(f"holding an unexpected file {extra[0]}")
        for name, expected in files.items():
            size = regular_size(path / name)
            if size != expected["bytes"]:
                raise Rejected(
                    f"truncated or changed ({name}: {size} bytes, expected {expected['bytes']})"
                )
        big = [n for n in files if files[n]["bytes"] >= BACKGROUND_BYTES]
        checks: dict[str, str] = {}
        worker = threading.Thread(target=_checksums, args=(path, files, big, checks), daemon=True)
        worker.start()
        try:
            for name in [n for n in files if n not in big]:
                if sha256_of(path / name, files[name]["bytes"]) != files[name]["sha256"]:
                    raise Rejected(f"tampered with ({name} does not match its checksum)")
            meta = checked_meta(load_json(path / META, META_LIMIT))
            module = _parsed(path / PROGRAM)
            weights = self._weights(path, meta, module, model)
            hit = CachedProgram(key, path, module, meta, weights)
            try:  # decoded here: a forged spec is a bad entry, not a failed compile
                hit.specs = (treespec_loads(meta["in_spec"]), treespec_loads(meta["out_spec"]))
            except Exception as e:  # torch raises many kinds for a malformed spec
                raise Rejected(f"invalid (meta.json: {type(e).__name__} in a pytree spec)") from e
        finally:
            worker.join()
        for name in big:
            if checks.get(name) != files[name]["sha256"]:
                raise Rejected(f"tampered with ({name} does not match its checksum)")
        return hit

    def _manifest(self, path: Path) -> dict[str, Any]:
        if not (path / MANIFEST).exists() and not (path / MANIFEST).is_symlink():
            raise Rejected("missing its manifest")
        return checked_manifest(load_json(path / MANIFEST, MANIFEST_LIMIT), FORMAT)

    def _weights(
        self, path: Path, meta: dict[str, Any], module: ModuleOp, model: torch.nn.Module
    ) -> dict[str, torch.Tensor]:
        """Argument name -> tensor, checked against the IR's argument types."""
        tied = resolve_tied_weights(model)
        state = dict(model.named_parameters(remove_duplicate=False))
        state.update(dict(model.named_buffers(remove_duplicate=False)))
        stored: dict[str, torch.Tensor] = {}
        if (path / CONSTANTS).exists():
            from safetensors.torch import load

            try:
                stored = load(read_capped(path / CONSTANTS, 1 << 40))
            except (ValueError, RuntimeError, OSError) as e:  # safetensors' errors
                raise Rejected(f"invalid ({CONSTANTS}: {e})") from e
        function = entry_function(module)
        args = function.body.block.args
        num_inputs = int(meta["num_inputs"])
        weights: dict[str, torch.Tensor] = {}
        sources: dict[str, list[str]] = meta["weights"]
        for arg in args[num_inputs:]:
            name = arg.name_hint or ""
            kind, ref = sources.get(name, ("?", ""))
            if kind == "state" and ref in state and tied.get(ref) == ref:
                tensor = state[ref].detach()
            elif kind == "constant" and name in stored:
                tensor = stored[name]
            else:
                raise Rejected(f"not matching the model (no tensor for argument %{name})")
            if not fits(arg.type, tensor):
                raise Rejected(f"not matching the model (%{name} is not {arg.type})")
            weights[name] = tensor
        return weights

    # -- store

    def stage(self, key: str) -> tuple[Path | None, str | None]:
        """A fresh private folder to build the entry in (renamed into place by
        `store`), or None and why not (a folder that cannot be written)."""
        path = self.root / f"{STAGING_PREFIX}{key[:16]}-{os.getpid()}-{time.time_ns()}"
        try:
            path.mkdir(mode=0o700)
            (path / OV_DIR).mkdir(mode=0o700)
        except OSError as e:
            self.remove(path)
            return None, (
                f"compile cache {self.root} cannot be written ({e.strerror or e}); "
                "compiling without it, nothing stored"
            )
        return path, None

    def store(
        self,
        staging: Path,
        key: str,
        fields: dict[str, Any],
        executor: Any,
        report: Any,
        model: torch.nn.Module,
    ) -> str | None:
        """Write the entry for a compile just done in `staging`'s OpenVINO folder and
        rename it into place; None when stored, else why not (a note's text). Nothing
        that goes wrong here fails the compile."""
        try:
            return self._store(staging, key, fields, describe(executor, report, model), executor)
        except NotCacheable as e:
            self.remove(staging)
            return f"not cached: {str(e).removeprefix('error: ')}"
        except OSError as e:
            self.remove(staging)
            return f"compile cache entry {key[:12]} not stored ({e.strerror or e})"
        except BaseException:
            self.remove(staging)
            raise

    def _store(
        self,
        staging: Path,
        key: str,
        fields: dict[str, Any],
        described: tuple[dict[str, Any], dict[str, torch.Tensor], str],
        executor: Any,
    ) -> str | None:
        meta, constants, model_label = described
        module = executor.function.parent_op()
        with open(os.open(staging / PROGRAM, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
            Printer(stream=f).print_op(module)
            f.write("\n")
        write_json(staging / META, meta)
        if constants:
            from safetensors.torch import save_file

            save_file({k: v.contiguous() for k, v in constants.items()}, staging / CONSTANTS)
            os.chmod(staging / CONSTANTS, 0o600)
        files = {name: file_row(staging / name) for name in files_of(staging)}
        total = sum(f["bytes"] for f in files.values())
        if total > self.max_bytes:
            self.remove(staging)
            return (
                f"compile cache entry {key[:12]} ({total / 2**20:.0f} MiB) exceeds the cache "
                f"limit of {self.max_bytes / 2**20:.0f} MiB ({MAX_ENV}); not kept"
            )
        now = time.time()
        manifest = {
            "format": FORMAT,
            "key": key,
            "fields": fields,
            "model": model_label,
            "created": now,
            "last_used": now,
            "files": files,
            "bytes": total,
        }
        write_json(staging / MANIFEST, manifest)
        target = self.entry_path(key)
        try:
            os.rename(staging, target)
        except OSError:  # another process stored the same key meanwhile: keep theirs
            self.remove(staging)
            return None
        self.evict(keep=key)
        return None

    def touch(self, hit: CachedProgram) -> None:
        """Record the use; adopt the blobs OpenVINO wrote when it did not find its own
        (those it did not read are then stale and go). A folder that cannot be written
        keeps the entry as it was."""
        manifest_path = hit.path / MANIFEST
        try:
            manifest = checked_manifest(load_json(manifest_path, MANIFEST_LIMIT), FORMAT)
            files: dict[str, Any] = manifest["files"]
            new = [n for n in files_of(hit.path) if n not in files]
            if new:
                for name in [n for n in files if n.startswith(f"{OV_DIR}/")]:
                    with contextlib.suppress(OSError):
                        (hit.path / name).unlink()
                    del files[name]
                files.update({name: file_row(hit.path / name) for name in new})
                manifest["bytes"] = sum(f["bytes"] for f in files.values())
            manifest["last_used"] = time.time()
            write_json(manifest_path, manifest)
        except (OSError, Rejected):
            return

    # -- listing, eviction

    def entries(self) -> list[EntryInfo]:
        """Entries with a readable manifest, least recently used first."""
        found = []
        if not _is_folder(self.root):
            return found
        for path in self.root.iterdir():
            if not _is_folder(path) or path.name.startswith(STAGING_PREFIX):
                continue
            try:
                manifest = checked_manifest(load_json(path / MANIFEST, MANIFEST_LIMIT), FORMAT)
                found.append(
                    EntryInfo(
                        path.name,
                        path,
                        str(manifest.get("model", "?")),
                        int(manifest.get("bytes", 0)),
                        float(manifest.get("created", 0.0)),
                        float(manifest.get("last_used", 0.0)),
                        manifest,
                    )
                )
            except (OSError, Rejected):
                found.append(
                    EntryInfo(path.name, path, "(unreadable)", regular_bytes(path), 0.0, 0.0)
                )
        return sorted(found, key=lambda e: e.last_used)

    def total_bytes(self) -> int:
        return sum(e.bytes for e in self.entries())

    def evict(self, keep: str | None = None) -> list[EntryInfo]:
        """Remove least recently used entries until the total fits `max_bytes`."""
        entries = self.entries()
        total = sum(e.bytes for e in entries)
        removed = []
        for entry in entries:
            if total <= self.max_bytes:
                break
            if entry.key == keep:
                continue
            self.remove(entry.path)
            total -= entry.bytes
            removed.append(entry)
        return removed

    def clear(self, older_than: float | None = None) -> tuple[int, int]:
        """Remove every entry (or those last used more than `older_than` seconds ago)
        and abandoned staging folders; (entries, bytes) removed."""
        now = time.time()
        count = nbytes = 0
        for entry in self.entries():
            if older_than is not None and now - entry.last_used < older_than:
                continue
            self.remove(entry.path)
            count += 1
            nbytes += entry.bytes
        if self.root.is_dir():
            for path in self.root.glob(f"{STAGING_PREFIX}*"):
                if older_than is None or now - path.stat().st_mtime >= max(older_than, 3600):
                    self.remove(path)
        return count, nbytes

    @staticmethod
    def remove(path: Path) -> None:
        """Remove an entry: a folder with what it holds, or whatever else is there (a
        symlink is removed, not followed)."""
        if _is_folder(path):
            shutil.rmtree(path, ignore_errors=True)
            return
        with contextlib.suppress(OSError):
            path.unlink()


# ------------------------------------------------------------------------ compile


def open_cache(cache: bool | CompileCache | str | os.PathLike[str] | None) -> CompileCache | None:
    """The cache a compile uses: None/False off, True the default one, a path or a
    `CompileCache` that one; None as well when the folder is not private."""
    if cache is None or cache is False:
        return None
    store = (
        cache
        if isinstance(cache, CompileCache)
        else CompileCache(None if cache is True else Path(cache))
    )
    return store if store.usable() else None


@dataclass
class EntryKey:
    """A compile's cache key, with what it was computed from."""

    key: str
    fields: dict[str, Any]
    """What `key` is the digest of (stored in the entry's manifest)."""
    key_from: str
    """"the model object", or "the captured program (why the object did not prove it)"."""
    captured: Any
    """torch.export's `Captured` when the key needed it (the miss reuses it), else None."""
    seconds: float
    """Computing the key, torch.export excluded."""


def entry_key(
    model: torch.nn.Module,
    args: Sequence[Any],
    kwargs: Mapping[str, Any] | None,
    options: Mapping[str, Any],
) -> EntryKey:
    """The key of compiling `model` on `args`/`kwargs` with `options`: from the model
    object where `cache_trust.model_fields` proves it determines the program, else from
    the program torch.export captures (`EntryKey.captured`)."""
    start = time.perf_counter()
    program = model_fields(model)
    captured, key_from = None, "the model object"
    if isinstance(program, str):
        key_from = f"the captured program ({program})"
        captured = capture(model, tuple(args), example_kwargs=dict(kwargs or {}))
        program = captured_fields(captured.exported)
    with collector_paused():
        fields = program_fields(model, args, kwargs, options, program)
        key = key_of(fields)
    export = captured.export_seconds if captured is not None else 0.0
    return EntryKey(key, fields, key_from, captured, time.perf_counter() - start - export)


def blob_folder(entry: Path | None) -> str:
    """OpenVINO's blob folder for a build of the entry at `entry` (`BuildOptions.
    blob_folder`): its `ov/` when entries keep blobs (`blobs_enabled`), else none."""
    return str(entry / OV_DIR) if entry is not None and blobs_enabled() else ""
