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

import torch
from torch.utils._pytree import treespec_dumps
from xdsl.dialects.builtin import TensorType

from forge.dialects import dtypes
from forge.frontend.capture import resolve_tied_weights
from forge.frontend.importer import valid_name
from forge.runtime.cache_key import plain
from forge.support.diagnostics import ForgeError

MANIFEST = "manifest.json"

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


# ------------------------------------------------------------------------ writing


class NotCacheable(ForgeError):
    """The compile cannot be stored (a pytree spec or constant JSON cannot hold)."""


def file_row(path: Path) -> dict[str, Any]:
    size = regular_size(path)
    return {"bytes": size, "sha256": sha256_of(path, size)}


def write_json(path: Path, value: Any) -> None:
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
        json.dump(value, f, indent=1, sort_keys=True)
    os.replace(temporary, path)


def files_of(folder: Path) -> list[str]:
    """Every file under `folder` but the manifest, as relative POSIX paths."""
    return sorted(
        p.relative_to(folder).as_posix()
        for p in folder.rglob("*")
        if not p.is_dir() or p.is_symlink()
        if p.name != MANIFEST
    )


def json_constant(value: Any) -> bool:
    return value is None or isinstance(value, bool | int | float | str)


def regular_bytes(path: Path) -> int:
    sizes = (p.lstat() for p in path.rglob("*"))
    return sum(s.st_size for s in sizes if stat.S_ISREG(s.st_mode))


def fits(type_: Any, tensor: torch.Tensor) -> bool:
    if not isinstance(type_, TensorType):
        return False
    element = dtypes.DTYPES.get(tensor.dtype)
    return element == type_.element_type and list(type_.get_shape()) == list(tensor.shape)


def describe(
    executor: Any, report: Any, model: torch.nn.Module
) -> tuple[dict[str, Any], dict[str, torch.Tensor], str]:
    """`meta.json` for a compiled executor, the lifted constants to store beside it,
    and the entry's `label`.

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
        bad = [v for v in values.values() if not json_constant(v)]
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
    return meta, constants, label(model, executor)


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
            "measured": {str(k): plain(v) for k, v in dict(measured).items()},
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
