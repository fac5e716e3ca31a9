"""A model's own code failing on Forge's static cache, as one located line.

Static generation runs the model's forward eagerly once on the static cache (to
allocate every layer's state) before torch.export captures it. A model whose code
expects another cache (its own cache class, a layer kind transformers' `StaticCache`
cannot build, attributes of the dynamic cache) raises a Python exception there, deep in
its modeling file. `model_code` turns that exception into
`<modeling file>:<line>: error: unsupported: <model type>: <construct>`: the user sees
which model, which construct and where, never a traceback nor "internal error".
"""

from __future__ import annotations

import contextlib
import inspect
import os
import re
import traceback
from collections.abc import Iterator
from typing import Any

from forge.support.diagnostics import ForgeError, one_line

FORGE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def model_type(model: Any) -> str:
    """The model's transformers type (`config.model_type`), else its class name."""
    config = getattr(model, "config", None)
    kind = getattr(config, "model_type", None)
    return kind if isinstance(kind, str) and kind else type(model).__name__


@contextlib.contextmanager
def model_code(model: Any, doing: str) -> Iterator[None]:
    """Run model code (`doing` says what, for the message): an exception that is not a
    `ForgeError` becomes a located "unsupported" one."""
    try:
        yield
    except ForgeError:
        raise
    except Exception as e:
        raise unsupported(model, e, doing) from e


def unsupported(model: Any, error: BaseException, doing: str) -> ForgeError:
    """`error`, raised by `model`'s code while `doing`, as a located ForgeError."""
    message = f"unsupported: {model_type(model)}: {construct(error)} ({doing})"
    return ForgeError(message, location_in_model_code(error))


def unsupported_construct(model: Any, what: str) -> ForgeError:
    """`model` does `what`, which static generation cannot follow, located at its
    modeling file."""
    return ForgeError(f"unsupported: {model_type(model)}: {what}", model_file(model))


def model_file(model: Any) -> str | None:
    """The file that defines the model's class, from its package folder on."""
    try:
        path = inspect.getsourcefile(type(model))
    except TypeError:
        return None
    return _from_package(path) if path else None


def _from_package(path: str) -> str:
    marker = f"{os.sep}site-packages{os.sep}"
    return path.split(marker, 1)[1] if marker in path else path


def construct(error: BaseException) -> str:
    """What the model did that the static cache does not offer, from the exception."""
    text = one_line(str(error))
    frames = traceback.extract_tb(error.__traceback__) if error.__traceback__ else []
    in_cache_code = any(os.path.basename(f.filename) == "cache_utils.py" for f in frames)
    if isinstance(error, KeyError) and in_cache_code:
        return f"cache layer kind {text} (transformers' StaticCache has no static layer for it)"
    if isinstance(error, AttributeError) and (match := re.search(r"attribute '(\w+)'", text)):
        owner = re.match(r"'(\w+)' object", text)
        whose = owner.group(1) if owner else "an object"
        return f"reads `{match.group(1)}`, which {whose} does not have"
    if "index_copy_" in text and "Number of indices" in text:
        return (
            "a cache of its own (it hands the cache layer its past and new keys together, "
            f"not the new ones at the cache positions): {text}"
        )
    return f"{type(error).__name__}: {text[:200]}"


def location_in_model_code(error: BaseException) -> str | None:
    """`file:line` of the innermost frame in a modeling file (the model's code), else
    outside Forge (transformers'), the path from its package folder on."""
    frames = traceback.extract_tb(error.__traceback__) if error.__traceback__ else []
    outside = [f for f in frames if not os.path.abspath(f.filename).startswith(FORGE_ROOT)]
    modeling = [f for f in outside if os.path.basename(f.filename).startswith("modeling_")]
    if not outside:
        return None
    frame = (modeling or outside)[-1]
    return f"{_from_package(frame.filename)}:{frame.lineno}"
