"""When the compile cache may key a model without capturing it: `model_fields`.

The fast key (`model_fields`) reads the model object. That determines the program
torch.export would capture only if nothing the forward reads can change unseen, so
the rule below is checked on every compile (a patch between two compiles is seen) and
any model that fails it is captured first and keyed on its captured program
(`cache_key.captured_fields`):

1. every class in the MRO of every module's class has a keyed origin (`origin`): the
   Python standard library (Python's version is keyed), Forge's sources (their digest
   is keyed), an installed, non-editable distribution (its version is keyed), or a
   source file (its SHA-256 is keyed);
2. no method was replaced: every function in those classes (unwrapped through
   decorators) comes from the class's own module, defined in the class's body or at
   the module's top level, in a file of a keyed origin; other class attributes are
   keyed by value (plain data) or by name;
3. every attribute of every module beyond torch's own bookkeeping is None, plain data
   (keyed by value), a tensor (fingerprinted) or a configuration object (keyed by its
   `repr`): a function, a dataclass or any other object sends the model to capture;
4. no forward hook or pre-hook, on a module or global;
5. for a class from a plain source file, whatever its methods read from the module's
   globals is a module, function or class of a keyed distribution, the standard
   library or Forge, a function or class of the same file (followed), or plain data
   (keyed by value); closures and defaults are plain data (keyed).

What it trusts: that an installed distribution's files are not edited without a
version change, and that a library's globals are not rebound between two compiles
(`torch.nn.functional.gelu = ...`, transformers' `ACT2FN[...]`); a model that depends
on either must be compiled with the cache off or its entry cleared (`forge cache
clear`).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import sys
import sysconfig
import types
from collections.abc import Iterator
from functools import cache
from typing import Any

import torch

from forge.runtime.cache_key import (
    NotPlain,
    as_json,
    digest,
    tensor_fingerprint,
)
from forge.support.host import PACKAGE_DIRS, SOURCE_ROOT

CONFIG_CLASSES = ("PretrainedConfig", "PreTrainedConfig", "GenerationConfig")
"""transformers' configuration classes (by name: transformers need not be imported):
plain data behind a `repr` that lists every field."""
HOOKS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks")
GLOBAL_HOOKS = (
    "_global_forward_hooks",
    "_global_forward_pre_hooks",
    "_global_backward_hooks",
    "_global_backward_pre_hooks",
)


REBOUND = "cache_key_rebound"
"""A Forge class's declaration: names of attributes whose tensors its forward rebinds
before reading any (StaticCacheLM's cache object: the program reads the wrapper's
buffers), so the key holds their shapes and dtypes, not their values."""


class Unproven(Exception):
    """Why the model object does not determine its program (the message)."""


# ------------------------------------------------------------------------ origins


@cache
def _stdlib_roots() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    return tuple({os.path.realpath(paths["stdlib"]), os.path.realpath(paths["platstdlib"])})


@cache
def _forge_roots() -> tuple[str, ...]:
    return tuple(os.path.realpath(SOURCE_ROOT / folder) for folder in PACKAGE_DIRS.values())


@cache
def _distribution(top: str, installed: str) -> str | None:
    """'name==version' of the non-editable distribution that installed the top-level
    package or module `top` at `installed`, else None."""
    try:
        dist = importlib.metadata.distribution(top)
    except importlib.metadata.PackageNotFoundError:
        names = importlib.metadata.packages_distributions().get(top, [])
        if len(names) != 1:
            return None
        dist = importlib.metadata.distribution(names[0])
    direct = json.loads(dist.read_text("direct_url.json") or "{}")
    if direct.get("dir_info", {}).get("editable", False):
        return None
    located = os.path.realpath(str(dist.locate_file(os.path.basename(installed))))
    return f"{dist.metadata['Name']}=={dist.version}" if located == installed else None


@cache
def _file_sha256(path: str, size: int, mtime_ns: int) -> str:
    with open(path, "rb") as f:
        return "sha256:" + hashlib.sha256(f.read()).hexdigest()


def origin(path: str | None) -> str:
    """How the key covers the code of the source file `path`: "python", "forge",
    "name==version" (an installed distribution) or "sha256:<digest>" (a plain file,
    re-read when its size or modification time changes); `Unproven` when there is no
    file."""
    keyed = _keyed_origin(path)
    if keyed is not None:
        return keyed
    try:
        info = os.stat(path or "")
    except OSError:
        raise Unproven(f"{path or 'some code'} is not a source file") from None
    return _file_sha256(os.path.realpath(path or ""), info.st_size, info.st_mtime_ns)


@cache
def _keyed_origin(path: str | None) -> str | None:
    """ "forge", "python" or "name==version" for a file whose version the key holds
    (looked up once per file: a library is keyed by version, not by its files), else
    None."""
    if not path or not os.path.isfile(path):
        return None
    real = os.path.realpath(path)
    if real.startswith(_forge_roots()):
        return "forge"
    for marker in ("/site-packages/", "/dist-packages/"):
        if marker not in real:
            continue
        root, inside = real.split(marker, 1)
        top = inside.split("/", 1)[0]
        found = _distribution(top.removesuffix(".py"), f"{root}{marker}{top}")
        if found is not None:
            return found
    if real.startswith(_stdlib_roots()):
        return "python"
    return None


def _module_origin(name: str) -> str:
    return origin(getattr(sys.modules.get(name), "__file__", None))


def _code_origin(function: types.FunctionType) -> str:
    return origin(function.__code__.co_filename)


def _layer_origin(cls: type, function: types.FunctionType) -> str:
    """`_code_origin`, or "generated" for a method made from the class's definition
    (a dataclass's `__init__`, whose code has no file)."""
    try:
        return _code_origin(function)
    except Unproven:
        if function.__qualname__.startswith(f"{cls.__qualname__}."):
            return "generated"
        raise Unproven(f"{cls.__qualname__}.{function.__name__} has no source file") from None


# ------------------------------------------------------------------------ the rule


class _Rule:
    """One walk over a model: what the fast key holds, or `Unproven`."""

    def __init__(self) -> None:
        self.classes: dict[str, str] = {}
        self.values: dict[str, Any] = {}
        """Class attributes, globals, closures and defaults read by value."""
        self.configs: set[str] = set()
        self.attributes: list[Any] = []
        self._followed: set[int] = set()
        self._walked: set[type] = set()
        self._held: set[int] = set()
        self._state: set[int] = set()
        """The model's parameters and buffers (fingerprinted with the weights), by id."""

    def walk(self, model: torch.nn.Module) -> None:
        self._state = {id(t) for t in model.state_dict(keep_vars=True).values()}
        hooks = torch.nn.modules.module
        if any(getattr(hooks, name, None) for name in GLOBAL_HOOKS):
            raise Unproven("a global module hook is registered")
        self._modules(model, type(model).__name__, "")

    def _modules(self, root: torch.nn.Module, label: str, prefix: str) -> None:
        """`root` and its submodules: hooks, classes and attributes."""
        internal = _torch_internal()
        for path, module in root.named_modules(remove_duplicate=False, prefix=prefix):
            where = path or label
            if any(getattr(module, name, None) for name in HOOKS):
                raise Unproven(f"{where} has a hook")
            for cls in type(module).__mro__[:-1]:
                self._class(cls)
            rebound = _rebound(type(module))
            own = {}
            for name, value in sorted(vars(module).items()):
                if name not in internal:
                    own[name] = self._attribute(f"{where}.{name}", value, 0, name not in rebound)
            self.attributes.append([where, own])

    def _attribute(self, where: str, value: Any, depth: int = 0, values: bool = True) -> Any:
        """How the key holds one attribute's value, or `Unproven`. `values`: False for
        an attribute whose tensors forward rebinds before reading (`REBOUND`)."""
        if isinstance(value, torch.Tensor):
            if id(value) in self._state:
                return "tensor"  # fingerprinted with the weights
            described = ["tensor", list(value.shape), str(value.dtype)]
            return [*described, tensor_fingerprint(value)] if values else described
        if type(value).__name__ in CONFIG_CLASSES or _is_config(value):
            self._class(type(value))
            text = repr(value) + repr(getattr(value, "_attn_implementation", None))
            self.configs.add(text)
            return "config"
        if isinstance(value, torch.nn.Module):  # held, not registered (a table of kernels)
            if next(iter(value.state_dict(keep_vars=True).values()), None) is not None:
                raise Unproven(f"{where} holds tensors outside the model's state")
            if id(value) not in self._held:
                self._held.add(id(value))
                self._modules(value, where, where)
            return "module"
        try:
            return as_json(value)
        except NotPlain:
            pass
        if depth >= 6:
            raise Unproven(f"{where} nests too deep")
        if isinstance(value, list | tuple):
            items = list(enumerate(value))
            return [self._attribute(f"{where}[{i}]", v, depth + 1, values) for i, v in items]
        if isinstance(value, dict) and all(isinstance(k, str | int) for k in value):
            items = sorted((repr(k), v) for k, v in value.items())
            return {k: self._attribute(f"{where}[{k}]", v, depth + 1, values) for k, v in items}
        if _library_state(value):  # a library's object of plain state (a KV cache)
            self._class(type(value))
            items = sorted(vars(value).items())
            return {k: self._attribute(f"{where}.{k}", v, depth + 1, values) for k, v in items}
        kind = "function" if callable(value) else type(value).__qualname__
        raise Unproven(f"{where} is a {kind}")

    def _class(self, cls: type) -> None:
        name = f"{cls.__module__}.{cls.__qualname__}"
        if cls in self._walked:
            return
        self._walked.add(cls)
        home = _module_origin(cls.__module__)
        if self.classes.setdefault(name, home) != home:
            raise Unproven(f"two classes {name} come from different files")
        plain_file = home.startswith("sha256:")
        for attribute, value in vars(cls).items():
            functions = list(_functions(value))
            for function in functions:
                self._method(cls, attribute, function, plain_file)
            if functions or (attribute.startswith("__") and attribute.endswith("__")):
                continue
            self.values[f"{name}.{attribute}"] = self._class_value(name, attribute, value)

    def _class_value(self, name: str, attribute: str, value: Any) -> Any:
        if isinstance(value, type):
            return f"{value.__module__}.{value.__qualname__}"
        try:
            return as_json(value)
        except NotPlain:
            if not self.classes[name].startswith("sha256:"):
                # a library's class attribute (a TypeVar, a table): its version keys it
                return f"{type(value).__qualname__}:{getattr(value, '__qualname__', '')}"
            raise Unproven(f"{name}.{attribute} is a {type(value).__qualname__}") from None

    def _method(
        self, cls: type, attribute: str, function: types.FunctionType, follow: bool
    ) -> None:
        """A function of a library's class must come from a library (the versions key
        it); one of a plain file's class from that file, in the class's body or at the
        module's top level (decorators around it from any library)."""
        where = f"{cls.__qualname__}.{attribute}"
        home = self.classes[f"{cls.__module__}.{cls.__qualname__}"]
        layers = [(layer, _layer_origin(cls, layer)) for layer in _layers(function)]
        self.values[f"{cls.__module__}.{where}"] = [
            f"{layer.__module__}.{layer.__qualname__}:{layer.__code__.co_firstlineno}"
            for layer, _ in layers
        ]  # which function: a plain file's own functions may be swapped for each other
        plain_files = [(layer, found) for layer, found in layers if found.startswith("sha256:")]
        if not follow and plain_files:
            replaced = plain_files[0][0]
            raise Unproven(f"{where} was replaced by {replaced.__module__}.{replaced.__qualname__}")
        if not follow:
            return
        own = next((layer for layer, found in plain_files if found == home), None)
        qualname = getattr(own, "__qualname__", "")
        if (
            own is None
            or own.__module__ != cls.__module__
            or not (qualname.startswith(f"{cls.__qualname__}.") or "." not in qualname)
            or any(found != home for _, found in plain_files)
        ):
            raise Unproven(f"{where} was replaced by {function.__module__}.{function.__qualname__}")
        self._follow(own)

    def _follow(self, function: types.FunctionType) -> None:
        """Key what a plain file's function reads: globals, closure cells, defaults."""
        if id(function) in self._followed:
            return
        self._followed.add(id(function))
        name = f"{function.__module__}.{function.__qualname__}"
        cells = zip(function.__code__.co_freevars, function.__closure__ or (), strict=True)
        for free, cell in cells:
            if free != "__class__":
                self._read(f"{name} closure {free}", cell.cell_contents, function)
        for index, default in enumerate(function.__defaults__ or ()):
            self._read(f"{name} default {index}", default, function)
        for key, default in (function.__kwdefaults__ or {}).items():
            self._read(f"{name} default {key}", default, function)
        scope = function.__globals__
        for global_name in sorted(_names(function.__code__)):
            if global_name in scope:
                self._read(f"{name} global {global_name}", scope[global_name], function)

    def _read(self, where: str, value: Any, reader: types.FunctionType) -> None:
        home = _code_origin(reader)
        if isinstance(value, types.ModuleType):
            found = _module_origin(value.__name__)
            if found.startswith("sha256:"):
                raise Unproven(f"{where} is the module {value.__name__} of a plain file")
            return
        if isinstance(value, types.FunctionType):
            found = _code_origin(value)
            if found == home:
                self._follow(value)
            elif found.startswith("sha256:"):
                raise Unproven(f"{where} is {value.__qualname__} of another file")
            self.values[where] = f"{value.__module__}.{value.__qualname__}"
            return
        if isinstance(value, type):
            self._class(value)
            self.values[where] = f"{value.__module__}.{value.__qualname__}"
            return
        if isinstance(value, types.BuiltinFunctionType):
            self.values[where] = f"{value.__module__}.{value.__qualname__}"
            return
        try:
            self.values[where] = as_json(value)
        except NotPlain:
            raise Unproven(f"{where} is a {type(value).__qualname__}") from None


@cache
def _torch_internal() -> frozenset[str]:
    """torch.nn.Module's own bookkeeping (parameters, buffers, submodules, hooks,
    `training`): keyed elsewhere or checked for hooks."""
    return frozenset(vars(torch.nn.Module()))


def _rebound(cls: type) -> tuple[str, ...]:
    """The attributes a Forge class declares its forward rebinds every tensor of before
    reading any (`REBOUND`): only Forge's own classes, whose sources the key digests,
    may declare it."""
    try:
        forge = _module_origin(cls.__module__) == "forge"
    except Unproven:
        return ()
    return tuple(getattr(cls, REBOUND, ())) if forge else ()


def _library_state(value: Any) -> bool:
    """Whether `value` is an object of a library's class (its code keyed by version)
    whose behaviour is its attributes: no callable among them."""
    state = getattr(value, "__dict__", None)
    if not isinstance(state, dict) or isinstance(value, type | types.ModuleType):
        return False
    if callable(value) or any(  # behaviour or state beyond `__dict__` (a partial, slots)
        set(getattr(c, "__slots__", ())) - {"__dict__", "__weakref__"} for c in type(value).__mro__
    ):
        return False
    try:
        if _module_origin(type(value).__module__).startswith("sha256:"):
            return False
    except Unproven:
        return False
    return not any(callable(v) and not isinstance(v, torch.Tensor) for v in state.values())


def _is_config(value: Any) -> bool:
    return any(c.__name__ in CONFIG_CLASSES for c in type(value).__mro__)


def _functions(value: Any) -> Iterator[types.FunctionType]:
    """The Python functions a class attribute holds (methods, static and class methods,
    properties, cached properties)."""
    if isinstance(value, staticmethod | classmethod):
        value = value.__func__
    if isinstance(value, property):
        yield from (f for f in (value.fget, value.fset, value.fdel) if f is not None)
        return
    value = getattr(value, "func", value)  # functools.cached_property
    if isinstance(value, types.FunctionType):
        yield value


def _layers(function: Any) -> Iterator[types.FunctionType]:
    """`function` and every function its decorators wrap."""
    while isinstance(function, types.FunctionType):
        yield function
        function = getattr(function, "__wrapped__", None)


def _names(code: types.CodeType) -> set[str]:
    """Global and attribute names `code` and the code nested in it read."""
    names = set(code.co_names)
    for constant in code.co_consts:
        if isinstance(constant, types.CodeType):
            names |= _names(constant)
    return names


# ------------------------------------------------------------------------ entry


def model_fields(model: torch.nn.Module) -> dict[str, Any] | str:
    """The fast key's fields, or why the model object does not determine its program."""
    rule = _Rule()
    try:
        rule.walk(model)
    except Unproven as e:
        return str(e)
    except Exception as e:  # an exotic object the walk cannot read: capture it instead
        return f"its objects could not be walked ({type(e).__name__})"
    return {
        "key_from": "model object",
        "classes": digest(rule.classes),
        "attributes": digest(rule.attributes),
        "values": digest(rule.values),
        "config": digest(sorted(rule.configs)),
    }
