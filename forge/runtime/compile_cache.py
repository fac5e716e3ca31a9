"""A persistent compile cache: the second start of the same model skips torch.export,
import and the pipeline, and OpenVINO loads its compiled graph instead of compiling it.

Key: a SHA-256 over what defines the compiled program without exporting it
(`program_fields`): the model's classes and the digest of their source files, its
configuration and structure (`repr`), its plain attributes and mode, the names, shapes
and dtypes of its parameters and buffers (ties included), a fingerprint of their values
(`weights_fingerprint`), the example inputs' structure, shapes, dtypes and non-tensor
values, every compile option (and the NNFactory environment variables that change an
OpenVINO compile), the library versions with a digest of Forge's own source files, and
the host (`host_key`).

An entry is a folder named by the key, holding no pickles:

* `program.mlir`: the planned IR, as text (re-parsed and verified by xDSL on a hit);
* `meta.json`: what the executor needs besides the IR (input names, torch.export's
  pytree specs as JSON, non-tensor inputs and outputs, which model tensor each weight
  argument is, notes, the plan's figures for `forge compile`);
* `constants.safetensors`: tensors torch.export lifted out of the code (safetensors, no
  code runs when it loads), when there are any;
* `ov/`: OpenVINO's own cache folder (`NNFACTORY_CACHE_DIR` while the executor builds):
  the compiled blobs, read by OpenVINO only; empty unless `blobs_enabled()` (by default
  only on an NPU: on OpenVINO's CPU plugin importing GPT-2's blob cost as much as
  compiling it);
* `manifest.json`: the key and its fields, the model, created and last-used times, and
  the size and SHA-256 of every other file.

On a hit every file is checked against the manifest before anything reads it (the big
OpenVINO blobs in a background thread while xDSL parses the IR); a manifest stored under
another key, a missing, extra, truncated or changed file, or IR that does not parse or
does not fit the model's weights gets the entry removed and rebuilt, with a one-line
note on stderr. A manifest forged consistently with tampered files still only reaches
xDSL's parser (no code execution) and OpenVINO's blob reader, so the folder must be
private: it is created 0700, and one writable by others or owned by another user is
not used (a one-line warning).

Entries are written into a temporary folder renamed into place, so concurrent compiles
never see half an entry; the total is kept under `FORGE_CACHE_MAX_BYTES` (default
`DEFAULT_MAX_BYTES`) by removing the least recently used entries.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import importlib.util
import inspect
import json
import os
import platform
import shutil
import stat
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils._pytree import tree_flatten, treespec_dumps, treespec_loads
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.printer import Printer

from forge.collector import collector_paused
from forge.conversion.nnfactory_backend import PACKAGE
from forge.diagnostics import ForgeError
from forge.dialects import dtypes
from forge.dialects.context import entry_function, parse_module
from forge.frontend.capture import resolve_tied_weights
from forge.frontend.importer import valid_name
from forge.runtime.host_profile import cpu_model

FORMAT = 1
"""Bump when what an entry holds changes: every older entry misses."""
DIR_ENV = "FORGE_CACHE_DIR"
"""Forge's cache root (the compile cache is its `compile/` folder)."""
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
OV_ENV = "NNFACTORY_CACHE_DIR"
"""Read by NNFactory's C++ at every graph compile (scripts/build_nnfactory.sh)."""
NNFACTORY_ENV = (
    "NNFACTORY_SNIPPETS_MODE",
    "NNFACTORY_PERFORMANCE_MODE",
    "NNFACTORY_DYNAMIC_QUANTIZATION_GROUP_SIZE",
)
"""Environment variables that change what OpenVINO compiles: part of the key."""
MANIFEST = "manifest.json"
PROGRAM = "program.mlir"
META = "meta.json"
CONSTANTS = "constants.safetensors"
OV_DIR = "ov"
BACKGROUND_BYTES = 16 << 20
"""Files at least this big are checksummed in a thread while the IR parses."""
STAGING_PREFIX = ".tmp-"
FINGERPRINT_COLUMNS = 1021
"""Column count of the weights fingerprint's sums (a prime: see `tensor_fingerprint`)."""


class NotCacheable(ForgeError):
    """The compile cannot be stored (a pytree spec or constant JSON cannot hold)."""


class Rejected(Exception):
    """An entry that fails verification; the message completes "entry <id> was ..."."""


def note(message: str) -> None:
    print(f"forge: note: {message}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------- location


def cache_root() -> Path:
    """`$FORGE_CACHE_DIR/compile`, else `$XDG_CACHE_HOME/forge/compile`, else
    `~/.cache/forge/compile`."""
    base = os.environ.get(DIR_ENV)
    if base:
        return Path(base).expanduser() / "compile"
    xdg = os.environ.get("XDG_CACHE_HOME")
    root = Path(xdg).expanduser() if xdg else Path("~/.cache").expanduser()
    return root / "forge" / "compile"


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


# --------------------------------------------------------------------------- key


@cache
def _cpu_flags() -> str:
    """A digest of the CPU's instruction-set flags (OpenVINO's kernels depend on them)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = " ".join(sorted(line.split(":", 1)[1].split()))
                    return hashlib.sha256(flags.encode()).hexdigest()[:16]
    except OSError:
        pass
    return "unknown"


def host_key() -> dict[str, str]:
    """What compiled code depends on in the machine (OpenVINO picks kernels by ISA and
    threads by cores)."""
    return {
        "cpu": cpu_model(),
        "cores": str(os.cpu_count() or 1),
        "machine": platform.machine(),
        "cpu_flags": _cpu_flags(),
    }


def _version(distribution: str) -> str:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "absent"


def _nnfactory_build() -> str:
    """NNFactory is built here without package metadata: the native library's size
    and modification time identify the build (its patches included)."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return "absent"
    library = Path(next(iter(spec.submodule_search_locations))) / "lib"
    try:
        info = (library / "libintel_npu_acceleration_library.so").stat()
    except OSError:
        return "absent"
    return f"{info.st_size}-{info.st_mtime_ns}"


SOURCE_ROOT = Path(__file__).resolve().parents[2]
SOURCE_DIRS = ("forge", "dialects", "transforms", "conversion", "tools")
"""Forge's packages (pyproject's package-dir): a change to any file misses."""


@cache
def source_digest() -> str:
    """SHA-256 over Forge's source files (paths and contents; .py and PDL)."""
    digest = hashlib.sha256()
    for folder in SOURCE_DIRS:
        for path in sorted((SOURCE_ROOT / folder).rglob("*")):
            if path.suffix not in (".py", ".pdl", ".mlir") or "__pycache__" in path.parts:
                continue
            digest.update(str(path.relative_to(SOURCE_ROOT)).encode() + b"\0")
            digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def library_versions() -> dict[str, str]:
    """Versions of everything between the model and the compiled graph."""
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "numpy": np.__version__,
        "xdsl": _version("xdsl"),
        "openvino": _version("openvino"),
        "transformers": _version("transformers"),
        "nnfactory": _nnfactory_build(),
        "forge": _version("forge-ugc"),
        "forge_sources": source_digest(),
    }


@cache
def _file_digest(path: str, size: int, mtime_ns: int) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def _class_source(cls: type) -> str:
    """Where `cls` is defined and the digest of that file ("builtin" when none)."""
    try:
        path = inspect.getsourcefile(cls)
    except TypeError:
        path = None
    if not path or not os.path.exists(path):
        return "builtin"
    info = os.stat(path)
    return _file_digest(path, info.st_size, info.st_mtime_ns)


def _plain(value: Any, depth: int = 0) -> Any:
    """`value` as JSON if it is plain data (numbers, strings, dtypes, lists of them),
    else None."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, torch.dtype | torch.device):
        return str(value)
    if depth < 3 and isinstance(value, list | tuple):
        items = [_plain(v, depth + 1) for v in value]
        return (
            None
            if any(i is None and v is not None for i, v in zip(items, value, strict=True))
            else items
        )
    if depth < 3 and isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {k: _plain(v, depth + 1) for k, v in sorted(value.items())}
    return None


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


def tensor_fingerprint(tensor: torch.Tensor) -> str:
    """A fast digest of a tensor's bytes: its 8-byte words summed (mod 2^64) into
    `FINGERPRINT_COLUMNS` columns, plus the bytes past the last full row.

    About 5 GB/s on one core (numpy), against 0.5-1 GB/s for blake2b or SHA-256: GPT-2's
    500 MB take ~0.1 s. Any change of one word, and any swap of two different words
    whose positions differ modulo the prime column count, changes a sum. It misses
    changes that cancel within a column (+d and -d in two words of one column), so it
    is no defence against a deliberate collision: a stale key can only reuse the IR
    (which depends on weight values only through `mixed` precision's sensitivity
    measure), never stale weights, since the executor binds the model's own tensors and
    OpenVINO keys its blobs by a hash of every constant's bytes."""
    t = tensor.detach()
    if t.is_meta or t.device.type != "cpu" or t.layout != torch.strided:
        return f"{t.device.type}:{t.layout}"
    data = t.contiguous().reshape(-1).view(torch.uint8).numpy()
    row = 8 * FINGERPRINT_COLUMNS
    full = data.size - data.size % row
    digest = hashlib.blake2b(digest_size=16)
    if full:
        words = data[:full].view(np.uint64).reshape(-1, FINGERPRINT_COLUMNS)
        digest.update(np.add.reduce(words, axis=0, dtype=np.uint64).tobytes())
    digest.update(data[full:].tobytes())
    return digest.hexdigest()


def _named_tensors(model: torch.nn.Module) -> list[tuple[str, torch.Tensor]]:
    """Parameters, buffers and plain tensor attributes (torch.export lifts those as
    constants), each physical tensor once, by its first name."""
    seen: set[int] = set()
    found: list[tuple[str, torch.Tensor]] = []
    named = [
        *model.named_parameters(remove_duplicate=False),
        *model.named_buffers(remove_duplicate=False),
    ]
    for prefix, module in model.named_modules(remove_duplicate=False):
        for name, value in vars(module).items():
            if isinstance(value, torch.Tensor) and not isinstance(value, torch.nn.Parameter):
                named.append((f"{prefix}.{name}" if prefix else name, value))
    for name, tensor in named:
        if id(tensor) not in seen:
            seen.add(id(tensor))
            found.append((name, tensor))
    return found


def weights_fingerprint(model: torch.nn.Module) -> str:
    digest = hashlib.sha256()
    for name, tensor in _named_tensors(model):
        digest.update(f"{name}:{tensor_fingerprint(tensor)};".encode())
    return digest.hexdigest()


def _module_fields(model: torch.nn.Module) -> dict[str, Any]:
    classes: dict[str, str] = {}
    attributes: list[Any] = []
    configs: dict[int, str] = {}
    for name, module in model.named_modules(remove_duplicate=False):
        cls = type(module)
        classes.setdefault(f"{cls.__module__}.{cls.__qualname__}", _class_source(cls))
        plain = {}
        for key, value in sorted(vars(module).items()):
            if key.startswith("_"):
                continue
            if key == "config" and id(value) not in configs:
                configs[id(value)] = repr(value)
            converted = _plain(value)
            if converted is not None or value is None:
                plain[key] = converted
        attributes.append([name, plain])
        if isinstance(module, torch.fx.GraphModule):
            attributes.append([name, {"graph_code": module.code}])
    state = [
        [name, list(t.shape), str(t.dtype)]
        for name, t in [
            *model.named_parameters(remove_duplicate=False),
            *model.named_buffers(remove_duplicate=False),
        ]
    ]
    return {
        "model": f"{type(model).__module__}.{type(model).__qualname__}",
        "classes": _digest(classes),
        "structure": _digest(repr(model)),
        "attributes": _digest(attributes),
        "config": _digest(sorted(configs.values())),
        "state": _digest([state, sorted(resolve_tied_weights(model).items())]),
    }


def _inputs_fields(args: Sequence[Any], kwargs: Mapping[str, Any]) -> list[Any]:
    leaves, spec = tree_flatten((tuple(args), dict(kwargs)))
    described: list[Any] = [str(spec)]
    for leaf in leaves:
        if isinstance(leaf, torch.Tensor):
            described.append(["tensor", list(leaf.shape), str(leaf.dtype), str(leaf.layout)])
        else:
            described.append(["value", type(leaf).__qualname__, repr(leaf)])
    return described


def program_fields(
    model: torch.nn.Module,
    args: Sequence[Any],
    kwargs: Mapping[str, Any] | None,
    options: Mapping[str, Any],
) -> dict[str, Any]:
    """Everything the key covers, as JSON (the manifest keeps it, for `forge cache ls`
    and for telling why two compiles missed)."""
    return {
        "format": FORMAT,
        **_module_fields(model),
        "training": [m.training for m in model.modules()].count(True),
        "weights": weights_fingerprint(model),
        "inputs": _digest(_inputs_fields(args, dict(kwargs or {}))),
        "options": {k: _plain(v) for k, v in sorted(options.items())},
        "environment": {name: os.environ.get(name) for name in NNFACTORY_ENV},
        "versions": library_versions(),
        "host": host_key(),
    }


def key_of(fields: Mapping[str, Any]) -> str:
    return _digest(fields)


# ------------------------------------------------------------------ OpenVINO blobs


@contextlib.contextmanager
def ov_cache_dir(path: Path | None) -> Iterator[None]:
    """OpenVINO's model cache at `path` while NNFactory compiles (None: off).

    NNFactory's C++ sets `ov::cache_dir` from NNFACTORY_CACHE_DIR at every graph compile,
    on a core that keeps the last setting: afterwards the variable is put back to the
    user's value, or to "" (off), so a later uncached compile writes no blob here."""
    before = os.environ.get(OV_ENV)
    os.environ[OV_ENV] = "" if path is None else str(path)
    try:
        yield
    finally:
        os.environ[OV_ENV] = before if before is not None else ""


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

    @property
    def num_inputs(self) -> int:
        return int(self.meta["num_inputs"])

    @property
    def in_spec(self) -> Any:
        return treespec_loads(self.meta["in_spec"])

    @property
    def out_spec(self) -> Any:
        return treespec_loads(self.meta["out_spec"])

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


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(8 << 20):
            digest.update(chunk)  # releases the GIL: threads overlap with parsing
    return digest.hexdigest()


def _write_json(path: Path, value: Any) -> None:
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
        json.dump(value, f, indent=1, sort_keys=True)
    os.replace(temporary, path)


def _files_of(folder: Path) -> list[str]:
    """Every file under `folder` but the manifest, as relative POSIX paths."""
    return sorted(
        p.relative_to(folder).as_posix()
        for p in folder.rglob("*")
        if p.is_file() or p.is_symlink()
        if p.name != MANIFEST
    )


def _json_constant(value: Any) -> bool:
    return value is None or isinstance(value, bool | int | float | str)


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
        if not path.is_dir():
            return None
        start = time.perf_counter()
        try:
            hit = self._verified(key, path, model)
        except Rejected as e:
            self.remove(path)
            note(f"compile cache entry {key[:12]} was {e}; rebuilt")
            return None
        hit.load_seconds = time.perf_counter() - start
        return hit

    def _verified(self, key: str, path: Path, model: torch.nn.Module) -> CachedProgram:
        manifest = self._manifest(path)
        if manifest.get("key") != key or key_of(manifest.get("fields", {})) != key:
            raise Rejected("stored under another key")
        files: dict[str, Any] = manifest.get("files", {})
        present = _files_of(path)
        missing = sorted(set(files) - set(present))
        if missing:
            raise Rejected(f"missing {missing[0]}")
        extra = sorted(set(present) - set(files))
        if extra:
            raise Rejected(f"holding an unexpected file {extra[0]}")
        for name, expected in files.items():
            size = (path / name).stat().st_size
            if size != expected.get("bytes"):
                raise Rejected(
                    f"truncated or changed ({name}: {size} bytes, expected {expected.get('bytes')})"
                )
        big = [n for n in files if files[n]["bytes"] >= BACKGROUND_BYTES]
        checks: dict[str, str] = {}
        worker = threading.Thread(
            target=lambda: checks.update({n: _sha256_file(path / n) for n in big}),
            daemon=True,
        )
        worker.start()
        try:
            for name in files:
                if name not in big and _sha256_file(path / name) != files[name].get("sha256"):
                    raise Rejected(f"tampered with ({name} does not match its checksum)")
            try:
                meta = json.loads((path / META).read_text())
                module = parse_module((path / PROGRAM).read_text(), str(path / PROGRAM))
            except Exception as e:  # xDSL and json raise many kinds
                raise Rejected(f"unreadable ({type(e).__name__} in its IR or metadata)") from e
            weights = self._weights(path, meta, module, model)
        finally:
            worker.join()
        for name in big:
            if checks.get(name) != files[name].get("sha256"):
                raise Rejected(f"tampered with ({name} does not match its checksum)")
        return CachedProgram(key, path, module, meta, weights)

    def _manifest(self, path: Path) -> dict[str, Any]:
        try:
            manifest = json.loads((path / MANIFEST).read_text())
        except FileNotFoundError:
            raise Rejected("missing its manifest") from None
        except (OSError, ValueError):
            raise Rejected("unreadable (its manifest is not JSON)") from None
        if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
            raise Rejected("of another format")
        return manifest

    def _weights(
        self, path: Path, meta: dict[str, Any], module: ModuleOp, model: torch.nn.Module
    ) -> dict[str, torch.Tensor]:
        """Argument name -> tensor, checked against the IR's argument types."""
        tied = resolve_tied_weights(model)
        state = dict(model.named_parameters(remove_duplicate=False))
        state.update(dict(model.named_buffers(remove_duplicate=False)))
        stored: dict[str, torch.Tensor] = {}
        if (path / CONSTANTS).exists():
            from safetensors.torch import load_file

            stored = load_file(path / CONSTANTS)
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
            if not _fits(arg.type, tensor):
                raise Rejected(f"not matching the model (%{name} is not {arg.type})")
            weights[name] = tensor
        return weights

    # -- store

    def stage(self, key: str) -> Path:
        """A fresh private folder to build the entry in (renamed into place by
        `store`)."""
        path = self.root / f"{STAGING_PREFIX}{key[:16]}-{os.getpid()}-{time.time_ns()}"
        path.mkdir(mode=0o700)
        (path / OV_DIR).mkdir(mode=0o700)
        return path

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
        rename it into place; None when stored, else why not (a note's text)."""
        meta, constants = describe(executor, report, model)
        module = executor.function.parent_op()
        with open(os.open(staging / PROGRAM, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
            Printer(stream=f).print_op(module)
            f.write("\n")
        _write_json(staging / META, meta)
        if constants:
            from safetensors.torch import save_file

            save_file({k: v.contiguous() for k, v in constants.items()}, staging / CONSTANTS)
            os.chmod(staging / CONSTANTS, 0o600)
        files = {
            name: {"bytes": (staging / name).stat().st_size, "sha256": _sha256_file(staging / name)}
            for name in _files_of(staging)
        }
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
            "model": label(model, executor),
            "created": now,
            "last_used": now,
            "files": files,
            "bytes": total,
        }
        _write_json(staging / MANIFEST, manifest)
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
        (those it did not read are then stale and go)."""
        manifest_path = hit.path / MANIFEST
        try:
            manifest = json.loads(manifest_path.read_text())
        except (OSError, ValueError):
            return
        files: dict[str, Any] = manifest.get("files", {})
        new = [n for n in _files_of(hit.path) if n not in files]
        if new:
            for name in [n for n in files if n.startswith(f"{OV_DIR}/")]:
                with contextlib.suppress(OSError):
                    (hit.path / name).unlink()
                del files[name]
            for name in new:
                files[name] = {
                    "bytes": (hit.path / name).stat().st_size,
                    "sha256": _sha256_file(hit.path / name),
                }
            manifest["bytes"] = sum(f["bytes"] for f in files.values())
        manifest["last_used"] = time.time()
        _write_json(manifest_path, manifest)

    # -- listing, eviction

    def entries(self) -> list[EntryInfo]:
        """Entries with a readable manifest, least recently used first."""
        found = []
        if not self.root.is_dir():
            return found
        for path in self.root.iterdir():
            if not path.is_dir() or path.name.startswith(STAGING_PREFIX):
                continue
            try:
                manifest = json.loads((path / MANIFEST).read_text())
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
            except (OSError, ValueError, TypeError):
                found.append(EntryInfo(path.name, path, "(unreadable)", _du(path), 0.0, 0.0))
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
        shutil.rmtree(path, ignore_errors=True)


def _du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _fits(type_: Any, tensor: torch.Tensor) -> bool:
    if not isinstance(type_, TensorType):
        return False
    element = dtypes.DTYPES.get(tensor.dtype)
    return element == type_.element_type and list(type_.get_shape()) == list(tensor.shape)


def describe(
    executor: Any, report: Any, model: torch.nn.Module
) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    """`meta.json` for a compiled executor, and the lifted constants to store beside it.

    Each weight argument is either a model tensor, found by its canonical name (as the
    importer named it), or a constant torch.export lifted out of the code."""
    canonical = {valid_name(c): c for c in set(resolve_tied_weights(model).values())}
    args = executor.function.body.block.args
    weights: dict[str, list[str]] = {}
    constants: dict[str, torch.Tensor] = {}
    for index in range(executor.num_inputs, len(args)):
        name = args[index].name_hint or ""
        if name in canonical:
            weights[name] = ["state", canonical[name]]
        else:
            weights[name] = ["constant", name]
            constants[name] = executor._template[index].detach()
    for side, values in (("input", report.input_constants), ("output", report.output_constants)):
        bad = [v for v in values.values() if not _json_constant(v)]
        if bad:
            raise NotCacheable(f"the {side} constant {bad[0]!r} has no JSON form")
    try:
        in_spec, out_spec = treespec_dumps(report.in_spec), treespec_dumps(report.out_spec)
    except Exception as e:  # torch raises several kinds for unregistered types
        raise NotCacheable(f"torch.export's pytree spec has no JSON form: {e}") from e
    own = set(executor.notes)
    meta = {
        "num_inputs": executor.num_inputs,
        "input_names": list(report.input_names),
        "precision": executor.precision,
        "weights": weights,
        "in_spec": in_spec,
        "out_spec": out_spec,
        "input_constants": {str(k): v for k, v in report.input_constants.items()},
        "output_constants": {str(k): v for k, v in report.output_constants.items()},
        "notes": [n for n in report.notes if n not in own],
        "summary": report.plan_summary or plan_summary(report.plan),
    }
    return meta, constants


def label(model: torch.nn.Module, executor: Any) -> str:
    """What `forge cache ls` calls an entry: the model's class (and the wrapped model's,
    for a wrapper such as generation's StaticCacheLM) and the input shapes."""
    name = type(model).__name__
    inner = getattr(model, "model", None)
    if isinstance(inner, torch.nn.Module):
        name += f"[{type(inner).__name__}]"
    args = executor.function.body.block.args[: executor.num_inputs]
    shapes = [
        "x".join(map(str, a.type.get_shape())) or "scalar"
        for a in args
        if isinstance(a.type, TensorType)
    ]
    return f"{name} ({', '.join(shapes)})"


def plan_summary(plan: Any) -> dict[str, Any]:
    """The plan's figures `forge compile` prints, as JSON (a hit has no PlanReport)."""
    if plan is None:
        return {}
    summary: dict[str, Any] = {"phase2": plan.optimize.format()}
    if plan.placement is not None:
        measured = getattr(plan.placement, "measured", None) or {}
        summary["placement"] = {
            "npu_ops": plan.placement.npu_ops,
            "cpu_ops": plan.placement.cpu_ops,
            "measured": {str(k): _plain(v) for k, v in dict(measured).items()},
        }
    if plan.schedule is not None:
        summary["transitions"] = [plan.schedule.transitions_before, plan.schedule.transitions_after]
    a = plan.allocation
    if a is not None:
        summary["allocation"] = {
            "vregs": a.vregs,
            "allocated_values": a.allocated_values,
            "buffers": a.buffers,
            "rho_buf": a.rho_buf,
            "planned_bytes": a.planned_bytes,
            "lower_bound_bytes": a.lower_bound_bytes,
            "ratio": a.ratio,
        }
    return summary


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


def compile_with_cache(
    store: CompileCache,
    model: torch.nn.Module,
    args: Sequence[Any],
    kwargs: Mapping[str, Any] | None,
    options: Mapping[str, Any],
    cold: Callable[[], tuple[Any, Any]],
    warm: Callable[[CachedProgram], tuple[Any, Any]],
) -> tuple[Any, Any]:
    """`warm(entry)` on a hit, else `cold()` with OpenVINO writing its blobs into a new
    entry, stored afterwards. The report gets `cache` ("hit" or "miss") and the seconds
    spent on the key, on loading the entry (hit) or on storing it (miss)."""
    with collector_paused():
        start = time.perf_counter()
        fields = program_fields(model, args, kwargs, options)
        key = key_of(fields)
        key_seconds = time.perf_counter() - start
        hit = store.lookup(key, model)
        blobs = blobs_enabled()
        if hit is not None:
            with ov_cache_dir(hit.path / OV_DIR if blobs else None):
                executor, report = warm(hit)
            store.touch(hit)
    if hit is not None:
        report.cache, report.cache_entry, report.cache_key_seconds = "hit", key, key_seconds
        report.cache_load_seconds = hit.load_seconds
        return executor, report
    staging = store.stage(key)
    try:
        with ov_cache_dir(staging / OV_DIR if blobs else None):
            executor, report = cold()
    except BaseException:
        store.remove(staging)
        raise
    start = time.perf_counter()
    try:
        why = store.store(staging, key, fields, executor, report, model)
    except NotCacheable as e:
        store.remove(staging)
        why = f"not cached: {str(e).removeprefix('error: ')}"
    except BaseException:
        store.remove(staging)
        raise
    if why is not None:
        note(why)
    report.cache, report.cache_entry, report.cache_key_seconds = "miss", key, key_seconds
    report.cache_store_seconds = time.perf_counter() - start
    return executor, report
