"""Benchmark children: processes that answer the parent in marked lines on their stdout.

Both benches keep a backend in a process of its own (no shared thread pool, OpenVINO
core or allocator) and alive between requests, so the parent can time several of them
in interleaved rounds. A child prints `MARKER {json}` once ready and once per request
(one line on its stdin); anything else it prints is ignored. Its stderr goes to a file,
never to a pipe nobody reads while it runs (a chatty child would block on a full pipe),
and its last line is the one-line reason when the child dies.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import threading
from collections.abc import Sequence
from typing import Any

from forge.support.diagnostics import one_line


def pinned_cores(cores: int | None) -> list[int] | None:
    """The first `cores` CPUs this process may use, or None for all of them."""
    allowed = sorted(os.sched_getaffinity(0))
    return allowed[:cores] if cores is not None and cores < len(allowed) else None


class Child:
    """A child process and its protocol: `answer()` reads the next marked payload,
    `ask(line)` sends a request and reads the answer; both return None (and set `error`
    to one line) when the child died or took longer than `timeout` seconds.

    `cores`: the child may run on that many CPUs only. Thread-count settings do not
    reach every pool: NNFactory's OpenVINO takes one thread per core it may run on,
    whatever torch's count."""

    def __init__(
        self,
        command: Sequence[str],
        env: dict[str, str],
        marker: str,
        timeout: float,
        cores: int | None = None,
    ):
        self.marker = marker
        self.timeout = timeout
        self.error = ""
        self.stderr = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 (closed by close())
        pinned = pinned_cores(cores)
        self.process = subprocess.Popen(
            list(command),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            text=True,
            env=env,
            preexec_fn=(lambda: os.sched_setaffinity(0, pinned)) if pinned else None,
        )

    def answer(self) -> Any:
        """The next marked line's payload, or None."""
        assert self.process.stdout is not None
        timer = threading.Timer(self.timeout, self.process.kill)
        timer.start()
        try:
            for line in self.process.stdout:
                if line.startswith(self.marker):
                    return json.loads(line[len(self.marker) :])
        finally:
            timer.cancel()
        self.process.wait()
        if self.process.returncode and self.process.returncode < 0:
            self.error = f"killed after {self.timeout:.0f} s"
            return None
        self.stderr.seek(0)
        tail = [line for line in self.stderr.read().splitlines() if line.strip()]
        why = tail[-1] if tail else f"exit code {self.process.returncode}"
        self.error = one_line(why)[:300]
        return None

    def ask(self, request: str) -> Any:
        """Send one request line; its answer's payload, or None."""
        assert self.process.stdin is not None
        try:
            self.process.stdin.write(request + "\n")
            self.process.stdin.flush()
        except BrokenPipeError:
            self.error = "the process ended"
            return None
        return self.answer()

    def close(self) -> None:
        """Stop the child (if it still runs) and drop its stderr file."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                stream.close()
        self.stderr.close()
