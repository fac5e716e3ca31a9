"""Baked-in weights moved out of resident memory once the graph holds its own copy.

A graph's constants share the model's memory (`GraphBuilder.weight`), and OpenVINO's
CPU plugin packs every FullyConnected weight into its own layout when it compiles: a
compiled model holds the model's tensors and the packed copy, about twice the weights.
The packed copy is what runs; the shared one is read again only by ops that use a
constant as it is (a Gather's embedding table), and only where they index.

`spill` rewrites an array's whole pages as a shared mapping of an unlinked file holding
the same bytes, at the same address: every reader (OpenVINO, the eager model, a CPU
kernel) sees the same values, but the pages leave the process's resident set; the kernel
keeps them in its page cache, reclaimable, and faults back in only what is read.
`Region.restore` puts anonymous memory with the same bytes back under the array before
the array may be freed, so the allocator that owns the memory never sees the mapping.

Linux only (mmap, mremap); elsewhere, on a RAM-backed folder (tmpfs) where the file's
pages would stay in memory, or when the disk has no room, nothing moves and the caller
gets a one-line reason.
"""

from __future__ import annotations

import contextlib
import ctypes
import mmap
import os
import shutil
import sys
import tempfile
import threading
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np

PAGE = mmap.PAGESIZE
MIN_BYTES = 1 << 20
"""Arrays smaller than this stay: their pages are few and partly shared with others."""
RAM_FILESYSTEMS = frozenset({"tmpfs", "ramfs", "hugetlbfs"})

_MREMAP_MAYMOVE, _MREMAP_FIXED = 1, 2
_MAP_FIXED = 0x10  # Linux; the mmap module does not export it before Python 3.13
_MAP_FAILED = ctypes.c_void_p(-1).value


class SpillUnavailable(Exception):
    """Spilling cannot help here; the message says why in one line."""


@cache
def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [
        ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
        ctypes.c_long,
    ]  # fmt: skip
    libc.mremap.restype = ctypes.c_void_p
    libc.mremap.argtypes = [
        ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p,
    ]  # fmt: skip
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    return libc


def _check(address: int | None, what: str) -> int:
    if address is None or address == _MAP_FAILED:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")
    return address


def filesystem_of(path: Path) -> str:
    """The type of the filesystem `path` lives on (the longest mount point above it)."""
    best, kind = "", "unknown"
    target = str(path.resolve())
    with open("/proc/self/mounts") as mounts:
        for line in mounts:
            fields = line.split()
            point = fields[1].replace("\\040", " ")
            inside = target == point or target.startswith(point.rstrip("/") + "/")
            if inside and len(point) > len(best):
                best, kind = point, fields[2]
    return kind


@dataclass
class Region:
    """Whole pages of one array, mapped from the spill file instead of anonymous memory."""

    array: np.ndarray
    """Held so the memory cannot be freed while the file is mapped under it."""
    start: int
    length: int
    users: int = 1

    def restore(self) -> None:
        """Anonymous memory with the same bytes again, at the same address: copied
        into a fresh mapping, which `mremap` then moves over the region in one step."""
        libc = _libc()
        flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS
        prot = mmap.PROT_READ | mmap.PROT_WRITE
        fresh = _check(libc.mmap(None, self.length, prot, flags, -1, 0), "mmap")
        ctypes.memmove(fresh, self.start, self.length)
        moved = libc.mremap(
            fresh, self.length, self.length, _MREMAP_MAYMOVE | _MREMAP_FIXED, self.start
        )
        if moved is None or moved == _MAP_FAILED:
            libc.munmap(fresh, self.length)
            _check(moved, "mremap")


class SpillFile:
    """One unlinked file per process that spilled regions are mapped from."""

    def __init__(self, folder: Path):
        if not sys.platform.startswith("linux"):
            raise SpillUnavailable("moving weights out of memory needs Linux's mmap")
        folder.mkdir(parents=True, exist_ok=True)
        kind = filesystem_of(folder)
        if kind in RAM_FILESYSTEMS:
            raise SpillUnavailable(f"{folder} is on {kind}: its pages would stay in memory")
        self.folder = folder
        self.fd = _unlinked_file(folder)
        """Open as long as the process: the regions stay mapped from it."""
        self.size = 0

    def append(self, start: int, length: int) -> int:
        """Write `length` bytes at `start` to the end of the file; their offset."""
        free = shutil.disk_usage(self.folder).free
        if free < length + (256 << 20):
            raise SpillUnavailable(f"{self.folder} has {free >> 20} MiB free")
        offset = self.size
        view = (ctypes.c_char * length).from_address(start)
        written = 0
        while written < length:
            written += os.pwrite(self.fd, memoryview(view)[written:], offset + written)
        self.size += length
        return offset

    def map_over(self, start: int, length: int, offset: int) -> None:
        flags = mmap.MAP_SHARED | _MAP_FIXED
        prot = mmap.PROT_READ | mmap.PROT_WRITE
        _check(_libc().mmap(start, length, prot, flags, self.fd, offset), "mmap")


def _unlinked_file(folder: Path) -> int:
    """A file without a name in `folder`, written around the page cache (O_DIRECT)
    where the filesystem allows: cached, gigabytes of weights would be dirty pages the
    kernel throttles the writer on (13 s for Llama-3.2-1B's 4.6 GiB, against about 2 s
    direct), and the cache is what the spill is meant to leave alone."""
    flags = os.O_RDWR | getattr(os, "O_TMPFILE", 0)
    for extra in (getattr(os, "O_DIRECT", 0), 0):
        with contextlib.suppress(OSError):
            return os.open(folder, flags | extra, 0o600)
    file = tempfile.NamedTemporaryFile(dir=folder, prefix="forge-weights-", delete=False)  # noqa: SIM115
    os.unlink(file.name)
    return os.dup(file.fileno())


_LOCK = threading.Lock()
_FILES: dict[Path, SpillFile] = {}
_REGIONS: dict[tuple[int, int], Region] = {}
"""(start, length) -> the spilled region (arrays shared by several graphs spill once)."""


def region_of(array: np.ndarray) -> tuple[int, int]:
    """(start, length) of `array`'s whole pages: the key `spill` files its region under."""
    start = array.ctypes.data
    first = -(-start // PAGE) * PAGE
    last = (start + array.nbytes) // PAGE * PAGE
    return first, max(0, last - first)


def spill(array: np.ndarray, folder: Path) -> tuple[int, int] | None:
    """Move `array`'s whole pages out of resident memory; its region's key, or None
    when it is too small. Raises `SpillUnavailable` or OSError when nothing moved."""
    start, length = region_of(array)
    if length < MIN_BYTES:
        return None
    key = (start, length)
    with _LOCK:
        region = _REGIONS.get(key)
        if region is not None:
            region.users += 1
            return key
        spill_file = _FILES.get(folder)
        if spill_file is None:
            spill_file = _FILES[folder] = SpillFile(folder)
        offset = spill_file.append(start, length)
        spill_file.map_over(start, length, offset)
        _REGIONS[key] = Region(array, start, length)
    return key


def release(key: tuple[int, int]) -> None:
    """One user fewer; the last restores anonymous memory under the array."""
    with _LOCK:
        region = _REGIONS.get(key)
        if region is None:
            return
        region.users -= 1
        if region.users > 0:
            return
        del _REGIONS[key]
        region.restore()


def spilled_bytes() -> int:
    with _LOCK:
        return sum(region.length for region in _REGIONS.values())
