"""A compile-cache entry read as hostile input: regular files only (no devices, FIFOs
or symlinks, which could point out of the cache), every read capped in size, and the
manifest and metadata checked against their schema before anything uses them. What
fails raises `Rejected`, whose message completes "entry <id> was ..."."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import stat
from pathlib import Path, PurePosixPath
from typing import Any

MANIFEST_LIMIT = 4 << 20
"""A manifest is a few KB (the key's fields and one row per file)."""
META_LIMIT = 16 << 20
PROGRAM_LIMIT = 512 << 20
"""The planned IR holds no weights: GPT-2's is about 100 KB."""
JSON_VALUE = (type(None), bool, int, float, str)


class Rejected(Exception):
    """An entry that fails verification; the message completes "entry <id> was ..."."""


def _open_regular(path: Path) -> tuple[int, int]:
    """(descriptor, size) of `path` if it is a regular file, not followed through a
    symlink; a FIFO opens without blocking and is refused."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise Rejected(f"invalid ({path.name} is a symlink)") from None
        raise Rejected(f"unreadable ({path.name}: {e.strerror or e})") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise Rejected(f"invalid ({path.name} is not a regular file)")
    return fd, info.st_size


def regular_size(path: Path) -> int:
    """The size of `path`, a regular file (a symlink, device or FIFO is `Rejected`)."""
    try:
        info = path.lstat()
    except OSError as e:
        raise Rejected(f"unreadable ({path.name}: {e.strerror or e})") from None
    if stat.S_ISLNK(info.st_mode):
        raise Rejected(f"invalid ({path.name} is a symlink)")
    if not stat.S_ISREG(info.st_mode):
        raise Rejected(f"invalid ({path.name} is not a regular file)")
    return info.st_size


def read_capped(path: Path, limit: int) -> bytes:
    """The bytes of the regular file `path`, `Rejected` past `limit` bytes."""
    fd, size = _open_regular(path)
    with os.fdopen(fd, "rb") as f:
        if size > limit:
            raise Rejected(f"invalid ({path.name} holds {size} bytes, over {limit})")
        data = f.read(size + 1)
    if len(data) > min(size, limit):  # grew since it was measured
        raise Rejected(f"invalid ({path.name} is over {limit} bytes)")
    return data


def sha256_of(path: Path, size: int) -> str:
    """SHA-256 of the first `size` + 1 bytes of the regular file `path` (a file longer
    than its manifest says gets another digest)."""
    fd, _ = _open_regular(path)
    digest = hashlib.sha256()
    left = size + 1
    with os.fdopen(fd, "rb") as f:
        while left > 0 and (chunk := f.read(min(8 << 20, left))):
            digest.update(chunk)  # releases the GIL: threads overlap with parsing
            left -= len(chunk)
    return digest.hexdigest()


def load_json(path: Path, limit: int) -> Any:
    try:
        return json.loads(read_capped(path, limit))
    except (ValueError, RecursionError):
        raise Rejected(f"invalid ({path.name} is not JSON)") from None


# ------------------------------------------------------------------------ schemas

ENTRY_FILE = {"bytes": int, "sha256": str}
MANIFEST_SCHEMA = {
    "format": int,
    "key": str,
    "fields": {str: object},
    "model": str,
    "created": (int, float),
    "last_used": (int, float),
    "files": {str: ENTRY_FILE},
    "bytes": int,
}
SUMMARY_SCHEMA = {
    "phase2": str,
    "placement": {"npu_ops": int, "cpu_ops": int, "measured": {str: object}},
    "transitions": [int],
    "allocation": {
        "vregs": int,
        "allocated_values": int,
        "buffers": int,
        "rho_buf": (int, float),
        "planned_bytes": int,
        "lower_bound_bytes": int,
        "ratio": (int, float),
    },
}
META_SCHEMA = {
    "num_inputs": int,
    "input_names": [str],
    "precision": str,
    "weights": {str: [str]},
    "in_spec": str,
    "out_spec": str,
    "input_constants": {str: JSON_VALUE},
    "output_constants": {str: JSON_VALUE},
    "notes": [str],
    "summary": {str: object},
}


def mismatch(value: Any, schema: Any, where: str) -> str | None:
    """Where `value` departs from `schema`, else None. A schema is a type or tuple of
    types, `[item]` (a list), `{str: value}` (a string-keyed map) or a record
    `{"field": schema, ...}` (every field present)."""
    if isinstance(schema, list):
        if not isinstance(value, list):
            return f"{where} is not a list"
        return next((m for i, v in enumerate(value) if (m := mismatch(v, schema[0], where))), None)
    if isinstance(schema, dict) and str in schema:
        if not isinstance(value, dict):
            return f"{where} is not a map"
        items = value.items()
        return next((m for k, v in items if (m := mismatch(v, schema[str], f"{where}.{k}"))), None)
    if isinstance(schema, dict):
        if not isinstance(value, dict):
            return f"{where} is not a record"
        absent = [name for name in schema if name not in value]
        if absent:
            return f"{where} has no '{absent[0]}'"
        fields = schema.items()
        return next((m for k, s in fields if (m := mismatch(value[k], s, f"{where}.{k}"))), None)
    if schema is object or isinstance(value, schema):
        return None
    return f"{where} is a {type(value).__name__}"


def checked_manifest(manifest: Any, format_: int) -> dict[str, Any]:
    """`manifest` if it has the schema, the format and safe file names."""
    if not isinstance(manifest, dict) or manifest.get("format") != format_:
        raise Rejected("of another format")
    problem = mismatch(manifest, MANIFEST_SCHEMA, "manifest")
    if problem:
        raise Rejected(f"invalid ({problem})")
    for name in manifest["files"]:
        parts = PurePosixPath(name).parts
        if not parts or name.startswith("/") or ".." in parts or "\\" in name:
            raise Rejected(f"invalid (the manifest names the file {name!r})")
    return manifest


def checked_meta(meta: Any) -> dict[str, Any]:
    """`meta` (meta.json) if it has the schema the executor and `forge compile` read."""
    problem = mismatch(meta, META_SCHEMA, "meta.json")
    summary = meta.get("summary", {}) if isinstance(meta, dict) else {}
    for name, schema in SUMMARY_SCHEMA.items():
        if problem is None and name in summary:
            problem = mismatch(summary[name], schema, f"meta.json summary.{name}")
    if problem is None and any(len(w) != 2 for w in meta["weights"].values()):
        problem = "meta.json weights are not (kind, name) pairs"
    if problem is None:
        keys = [*meta["input_constants"], *meta["output_constants"]]
        problem = next((f"meta.json constant index {k!r}" for k in keys if not k.isdigit()), None)
    if problem:
        raise Rejected(f"invalid ({problem})")
    return meta
