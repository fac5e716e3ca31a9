"""The compile cache's key: a SHA-256 over JSON fields (`program_fields`) that change
whenever the compiled program or its weights would.

Two ways to the fields that describe the program:

* from the model object, without capturing it (`model_fields`), only when
  `cache_trust.fast_path_problem` proves the object determines what torch.export would
  capture (docs/compile-cache.md states the rule and what it trusts);
* otherwise from the captured program (`captured_fields`): torch.export runs first and
  the key covers every graph's code, the node types, the signature and the lifted
  constants' values, as torch.compile's FX graph cache keys on the traced graph. The
  miss's compile reuses that capture.

Both add the state's names, shapes and dtypes, a fingerprint of every tensor's values
(`weights_fingerprint`), the example inputs' structure, shapes, dtypes and non-tensor
values, every compile option (and the NNFactory environment variables that change an
OpenVINO compile), the library versions with a digest of Forge's own source files, and
the host (`host_key`).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
from collections.abc import Mapping, Sequence
from functools import cache
from typing import Any

import numpy as np
import torch
from torch.utils._pytree import tree_flatten

from forge.frontend.capture import resolve_tied_weights
from forge.support.host import (
    PACKAGE_DIRS,
    SOURCE_ROOT,
    cores,
    cpu_flags_digest,
    cpu_model,
    distribution_version,
    nnfactory_build,
)

FORMAT = 2
"""Bump when what an entry holds or how it is keyed changes: every older entry misses."""
NNFACTORY_ENV = (
    "NNFACTORY_SNIPPETS_MODE",
    "NNFACTORY_PERFORMANCE_MODE",
    "NNFACTORY_DYNAMIC_QUANTIZATION_GROUP_SIZE",
)
"""Environment variables that change what OpenVINO compiles: part of the key."""
FINGERPRINT_COLUMNS = 1021
"""Column count of the weights fingerprint's sums (a prime: see `tensor_fingerprint`)."""


def host_key() -> dict[str, str]:
    """What compiled code depends on in the machine (OpenVINO picks kernels by ISA and
    threads by cores)."""
    return {
        "cpu": cpu_model(),
        "cores": str(cores()),
        "machine": platform.machine(),
        "cpu_flags": cpu_flags_digest(),
    }


SOURCE_DIRS = tuple(PACKAGE_DIRS.values())
"""Forge's packages' folders: a change to any file misses."""


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
        "xdsl": distribution_version("xdsl"),
        "openvino": distribution_version("openvino"),
        "transformers": distribution_version("transformers"),
        "nnfactory": nnfactory_build(),
        "forge": distribution_version("forge-ugc"),
        "forge_sources": source_digest(),
    }


class NotPlain(Exception):
    """A value that is not plain data (`as_json`)."""


def as_json(value: Any, depth: int = 0) -> Any:
    """`value` as JSON if it is plain data: None, numbers, strings, dtypes, devices, and
    lists, tuples, sets and string-keyed dicts of them (four levels deep); else
    `NotPlain`."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, torch.dtype | torch.device):
        return str(value)
    if depth >= 4:
        raise NotPlain(type(value).__qualname__)
    if isinstance(value, list | tuple):
        return [as_json(v, depth + 1) for v in value]
    if isinstance(value, set | frozenset):
        return sorted((as_json(v, depth + 1) for v in value), key=repr)
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {k: as_json(v, depth + 1) for k, v in sorted(value.items())}
    raise NotPlain(type(value).__qualname__)


def plain(value: Any) -> Any:
    """`value` as JSON (`as_json`), or None when it is not plain data."""
    try:
        return as_json(value)
    except NotPlain:
        return None


def digest(value: Any) -> str:
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
    if type(t) is not torch.Tensor:  # a subclass (a fake tensor an export left behind)
        return type(t).__qualname__
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


def _inputs_fields(args: Sequence[Any], kwargs: Mapping[str, Any]) -> list[Any]:
    leaves, spec = tree_flatten((tuple(args), dict(kwargs)))
    described: list[Any] = [str(spec)]
    for leaf in leaves:
        if isinstance(leaf, torch.Tensor):
            described.append(["tensor", list(leaf.shape), str(leaf.dtype), str(leaf.layout)])
        else:
            described.append(["value", type(leaf).__qualname__, repr(leaf)])
    return described


def _state_fields(model: torch.nn.Module) -> dict[str, Any]:
    """Names, shapes and dtypes of parameters and buffers, the tied-weight map, the
    structure (`repr`), and how many modules are in training mode."""
    state = [
        [name, list(t.shape), str(t.dtype)]
        for name, t in [
            *model.named_parameters(remove_duplicate=False),
            *model.named_buffers(remove_duplicate=False),
        ]
    ]
    return {
        "model": f"{type(model).__module__}.{type(model).__qualname__}",
        "structure": digest(repr(model)),
        "state": digest([state, sorted(resolve_tied_weights(model).items())]),
        "training": [m.training for m in model.modules()].count(True),
    }


def captured_fields(exported: torch.export.ExportedProgram) -> dict[str, Any]:
    """The captured program: the code of every graph (nested ones included), each
    node's type (shape, dtype), the signature, the pytree specs, and the values of the
    constants torch.export lifted out of the code (a `torch.tensor([...])` in forward)."""
    graphs = [
        [name, module.code]
        for name, module in exported.graph_module.named_modules()
        if isinstance(module, torch.fx.GraphModule)
    ]
    types = [[node.name, _value_type(node.meta.get("val"))] for node in exported.graph.nodes]
    constants = sorted(
        [name, tensor_fingerprint(value) if isinstance(value, torch.Tensor) else repr(value)]
        for name, value in exported.constants.items()
    )
    specs = [str(exported.call_spec.in_spec), str(exported.call_spec.out_spec)]
    return {
        "key_from": "captured program",
        "program": digest([graphs, types, str(exported.graph_signature), specs]),
        "constants": digest(constants),
    }


def _value_type(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return [list(map(str, value.shape)), str(value.dtype)]
    if isinstance(value, list | tuple):
        return [_value_type(v) for v in value]
    return type(value).__qualname__


def program_fields(
    model: torch.nn.Module,
    args: Sequence[Any],
    kwargs: Mapping[str, Any] | None,
    options: Mapping[str, Any],
    program: Mapping[str, Any],
) -> dict[str, Any]:
    """Everything the key covers, as JSON (the manifest keeps it, for `forge cache ls`
    and for telling why two compiles missed). `program` describes the code: the fast
    path's `cache_trust.model_fields` or `captured_fields`."""
    return {
        "format": FORMAT,
        **program,
        **_state_fields(model),
        "weights": weights_fingerprint(model),
        "inputs": digest(_inputs_fields(args, dict(kwargs or {}))),
        "options": {k: plain(v) for k, v in sorted(options.items())},
        "environment": {name: os.environ.get(name) for name in NNFACTORY_ENV},
        "torch_defaults": [str(torch.get_default_dtype()), torch.is_grad_enabled()],
        "versions": library_versions(),
        "host": host_key(),
    }


def key_of(fields: Mapping[str, Any]) -> str:
    return digest(fields)
