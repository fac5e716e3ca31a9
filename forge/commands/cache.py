"""`forge cache ls|clear`: the compile cache's entries, and removing them."""

from __future__ import annotations

import argparse
import re
import time
from typing import Any

from forge.support.diagnostics import ForgeError

UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def add_parser(sub: Any) -> None:
    parser = sub.add_parser("cache", help="list or clear the compile cache")
    action = parser.add_subparsers(dest="action", metavar="{ls,clear}")
    action.required = True
    action.add_parser("ls", help="entries (model, key, size, created, last used) and the total")
    clear = action.add_parser("clear", help="remove entries (all, or those unused for a while)")
    clear.add_argument(
        "--older-than",
        metavar="AGE",
        help="only entries last used more than AGE ago (30d, 12h, 45m, 90s)",
    )


def parse_age(text: str) -> float:
    """`30d`, `12h`, `45m`, `90s` or `2w` in seconds."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*", text)
    if match is None:
        raise ForgeError(f"--older-than: expected an age such as 30d, 12h or 45m, got '{text}'")
    return float(match.group(1)) * UNITS[match.group(2) or "s"]


def _size(nbytes: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.1f} {unit}"
    return f"{nbytes} B"


def _when(seconds: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(seconds)) if seconds else "?"


def run(ns: argparse.Namespace) -> int:
    # Imported when the command runs, not at `forge` start-up (torch and xDSL take seconds).
    from forge.runtime.compile_cache import CompileCache

    store = CompileCache()
    if ns.action == "clear":
        older = parse_age(ns.older_than) if ns.older_than is not None else None
        count, nbytes = store.clear(older)
        print(
            f"removed {count} entr{'y' if count == 1 else 'ies'} ({_size(nbytes)}) "
            f"from {store.root}"
        )
        return 0
    entries = store.entries()
    print(f"compile cache: {store.root}")
    if entries:
        print(f"  {'model':<44}{'key':<14}{'size':>10}  {'created':<17} {'last used':<17}")
    for e in sorted(entries, key=lambda e: e.last_used, reverse=True):
        model = e.model if len(e.model) <= 42 else e.model[:39] + "..."
        print(
            f"  {model:<44}{e.key[:12]:<14}{_size(e.bytes):>10}  "
            f"{_when(e.created):<17} {_when(e.last_used):<17}"
        )
    total = sum(e.bytes for e in entries)
    print(
        f"{len(entries)} entr{'y' if len(entries) == 1 else 'ies'}, {_size(total)} of "
        f"{_size(store.max_bytes)} (FORGE_CACHE_MAX_BYTES)"
    )
    return 0
