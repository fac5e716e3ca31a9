"""`forge ... | head`: a reader that goes away is not an error (exit 0, no traceback and no
'internal error' line), as with forge-opt."""

from __future__ import annotations

import subprocess
import sys


def test_a_closed_pipe_ends_quietly() -> None:
    """`forge models --tiny` prints a table; the reader takes a few bytes and leaves, so
    the rest of the table meets a closed pipe (was 'internal error: BrokenPipeError')."""
    child = subprocess.Popen(
        [sys.executable, "-m", "forge.cli", "models", "--tiny"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        bufsize=0,
    )
    assert child.stdout is not None and child.stderr is not None
    child.stdout.read(4)
    child.stdout.close()
    errors = child.stderr.read()
    assert child.wait(timeout=300) == 0, errors
    assert "internal error" not in errors and "Traceback" not in errors
