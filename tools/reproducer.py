"""Crash reproducers for forge-opt, as MLIR's `--mlir-pass-pipeline-crash-reproducer`.

A reproducer is a `.mlir` file: a comment header (the failure, the source name and line
offset of the input, the flags to replay with, plugins by absolute path) and then the
input exactly as forge-opt read it. `forge-opt --run-reproducer FILE` parses the input
under its original name and line numbers, so the replay's error is the same line.
Being comments, the header also lets `forge-opt FILE -p ...` read the file as plain IR.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from forge.support.diagnostics import ForgeError
from forge.support.files import atomic_write

DEFAULT_DIR = os.path.join("build", "forge-opt-reproducers")
TITLE = "// forge-opt crash reproducer (replay: forge-opt --run-reproducer FILE)"
ATTRIBUTE = "forge_reproducer"
"""Set on the exception a reproducer was written for: the file, for the error line."""


@dataclass(frozen=True)
class Reproducer:
    source: str
    """The input's name (a path or `stdin`) as its diagnostics name it."""
    line_offset: int
    """Lines above the input in its file (the chunk's place under --split-input-file)."""
    arguments: tuple[str, ...]
    """The forge-opt flags that replay the run: the pipeline, plugins, verification."""
    text: str
    """The input IR, as read."""
    failure: str = ""

    def render(self) -> str:
        header = [
            TITLE,
            f"// failure: {' '.join(self.failure.split())}",
            f"// source: {json.dumps(self.source)}, line offset {self.line_offset}",
            f"// configuration: {shlex.join(self.arguments)}",
        ]
        return "\n".join(header) + "\n" + self.text

    def default_path(self, directory: str = DEFAULT_DIR) -> str:
        stem = os.path.splitext(os.path.basename(self.source))[0] or "input"
        digest = hashlib.sha256(
            (shlex.join(self.arguments) + "\0" + self.text).encode()
        ).hexdigest()[:10]
        return os.path.join(directory, f"{stem}-{digest}.mlir")

    def write(self, path: str | None) -> str:
        """Write the reproducer to `path` (default: under build/forge-opt-reproducers/)."""
        path = path or self.default_path()
        directory = os.path.dirname(path)
        if directory:
            os.makedirs(directory, exist_ok=True)
        with atomic_write(path) as f:
            f.write(self.render())
        return path


def read_reproducer(path: str) -> Reproducer:
    """Parse a reproducer file; anything else is a one-line error."""
    try:
        with open(path, encoding="utf-8") as f:
            content = f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise ForgeError(f"cannot read reproducer: {e}", path) from e
    lines = content.split("\n", 4)
    if len(lines) < 4 or lines[0] != TITLE:
        raise ForgeError("not a forge-opt crash reproducer (no reproducer header)", path)
    failure = _field(lines[1], "failure", path)
    source_field = _field(lines[2], "source", path)
    source, sep, offset = source_field.rpartition(", line offset ")
    try:
        name = json.loads(source)
        arguments = tuple(shlex.split(_field(lines[3], "configuration", path)))
    except ValueError as e:
        raise ForgeError(f"malformed reproducer header: {e}", path) from e
    if not sep or not offset.isdigit() or not isinstance(name, str):
        raise ForgeError("malformed reproducer header: bad 'source' line", path)
    text = lines[4] if len(lines) > 4 else ""
    return Reproducer(name, int(offset), arguments, text, failure)


def _field(line: str, key: str, path: str) -> str:
    prefix = f"// {key}: "
    if not line.startswith(prefix):
        raise ForgeError(f"malformed reproducer header: expected '{prefix.strip()}'", path)
    return line[len(prefix) :]


def replay_arguments(
    pipeline: str,
    plugins: Sequence[str],
    verify_each: bool,
    disable_verify: bool,
    unregistered: bool,
    no_implicit_module: bool,
) -> tuple[str, ...]:
    """The flags that make a replay run the same pipeline the same way."""
    args = ["-p", pipeline]
    for plugin in plugins:
        args += ["--load-pass-plugin", os.path.abspath(plugin)]
    flags = {
        "--no-verify-each": not verify_each,
        "--disable-verify": disable_verify,
        "--allow-unregistered-dialect": unregistered,
        "--no-implicit-module": no_implicit_module,
    }
    return tuple(args + [flag for flag, on in flags.items() if on])


def reproducer_argv(argv: Sequence[str]) -> tuple[Reproducer | None, list[str]]:
    """The reproducer `--run-reproducer` names in argv, and argv with its recorded flags
    put first (so flags given on the command line win)."""
    path = None
    for i, arg in enumerate(argv):
        if arg == "--run-reproducer" and i + 1 < len(argv):
            path = argv[i + 1]
        elif arg.startswith("--run-reproducer="):
            path = arg.split("=", 1)[1]
    if path is None:
        return None, list(argv)
    replay = read_reproducer(path)
    return replay, [*replay.arguments, *argv]
