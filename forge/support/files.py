"""Writing files the way mlir-opt does: into a temporary file beside the target, renamed
over it only when everything succeeded, so a failing run never empties or truncates an
existing file (not even its own input, as in `forge-opt x.mlir -o x.mlir`)."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from forge.support.diagnostics import ForgeError


class AtomicFile:
    """A text file written under a temporary name in the target's folder."""

    def __init__(self, path: str | os.PathLike[str], mode: str = "w"):
        self.path = Path(path)
        self.temporary: Path | None = None
        if self.path.exists() and not self.path.is_file():
            # /dev/null, a FIFO, a terminal: nothing to protect, and no rename possible
            self.stream: IO = open(self.path, mode)  # noqa: SIM115 (closed by commit/discard)
            return
        folder = self.path.parent
        try:
            fd, temporary = tempfile.mkstemp(
                prefix=f".{self.path.name}.", suffix=".tmp", dir=folder
            )
        except OSError as e:
            raise ForgeError(f"cannot write {self.path}: {e.strerror or e}") from e
        self.temporary = Path(temporary)
        self.stream = os.fdopen(fd, mode)

    def commit(self) -> None:
        """Flush and rename over the target, keeping its permissions when it exists."""
        if self.temporary is None:
            self.stream.close()
            return
        self.stream.flush()
        os.fsync(self.stream.fileno())
        self.stream.close()
        with contextlib.suppress(FileNotFoundError):
            os.chmod(self.temporary, self.path.stat().st_mode & 0o7777)
        os.replace(self.temporary, self.path)

    def discard(self) -> None:
        self.stream.close()
        if self.temporary is not None:
            with contextlib.suppress(FileNotFoundError):
                self.temporary.unlink()


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike[str], mode: str = "w") -> Iterator[IO]:
    """`with atomic_write(p) as f:` writes `p` only if the block completes."""
    target = AtomicFile(path, mode)
    try:
        yield target.stream
    except BaseException:
        target.discard()
        raise
    target.commit()
