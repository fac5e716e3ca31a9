"""`forge coverage`: every decoder-only type of the installed transformers, generated at a
tiny config in a fresh process each, checked against eager; a table of what passes."""

from __future__ import annotations

import argparse
from typing import Any

from forge.support import flags
from forge.support.campaign import Campaign, add_ray_arguments


def add_parser(sub: Any) -> None:
    parser = sub.add_parser(
        "coverage",
        help="every causal-LM type of the installed transformers at a tiny config: "
        "generate vs eager, segments, paged attention, failure causes",
    )
    parser.add_argument(
        "--types", help="comma-separated model types to run (default: every kept type)"
    )
    parser.add_argument(
        "--cases", type=flags.size, default=None, help="run the first N kept types only"
    )
    parser.add_argument(
        "--timeout", type=flags.seconds, default=None, help="seconds per case (default 300)"
    )
    parser.add_argument("--json", metavar="FILE", help="write the sweep's record as JSON")
    parser.add_argument(
        "--markdown", metavar="FILE", help="write the docs page (docs/coverage.md) from the record"
    )
    parser.add_argument(
        "--from",
        dest="source",
        metavar="FILE",
        help="run nothing: read a record written by --json (for --markdown and the table)",
    )
    parser.add_argument(
        "--rerun",
        metavar="FILE",
        help="run again the failed rows of the record FILE (or --types) and write FILE "
        "back with their new rows (its sweep time stays the full sweep's)",
    )
    parser.add_argument(
        "--list", action="store_true", help="list the kept and left-out types and exit"
    )
    add_ray_arguments(parser)


def run(ns: argparse.Namespace) -> int:
    # Imported when the command runs, not at `forge` start-up (torch and xDSL take seconds).
    import json
    import time
    from pathlib import Path

    from forge.devtools import coverage, coverage_report
    from forge.devtools.tiny_configs import causal_lm_types, excluded

    if ns.source is not None:
        data = coverage_report.load(Path(ns.source))
        return _finish(ns, data, coverage_report)

    left_out = {t: why for t in causal_lm_types() if (why := excluded(t)) is not None}
    kept = sorted(t for t in causal_lm_types() if t not in left_out)
    if ns.list:
        print(f"{len(kept)} kept: {', '.join(kept)}")
        for name, why in sorted(left_out.items()):
            print(f"left out: {name}: {why}")
        return 0
    previous = coverage_report.load(Path(ns.rerun)) if ns.rerun else None
    if previous is not None and not ns.types:
        types = [r.model_type for r in coverage_report.rows_of(previous) if r.status != "pass"]
    else:
        types = _selected(ns, kept, left_out)
    timeout = float(ns.timeout or coverage.CASE_TIMEOUT)
    campaign = Campaign.from_args(ns, timeout=timeout * 1.5)
    print(f"running {len(types)} model type(s), {campaign.describe()}", flush=True)
    start = time.perf_counter()

    def case(model_type: str) -> coverage.CaseResult:
        return coverage.child_case(model_type, timeout)

    rows = coverage.sweep(
        types,
        lambda _, items: campaign.map(case, items, coverage.crashed),
        on_case=_progress,
    )
    data = coverage_report.record(
        rows, left_out, coverage.cpu_model(), time.perf_counter() - start, _versions()
    )
    if previous is not None:
        data = coverage_report.merged(previous, data)
        ns.json = ns.json or ns.rerun
    if ns.json:
        path = Path(ns.json)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data, indent=1) + "\n")
        print(f"wrote {path}")
    return _finish(ns, data, coverage_report)


def _selected(ns: argparse.Namespace, kept: list[str], left_out: dict[str, str]) -> list[str]:
    from forge.support.diagnostics import ForgeError

    types = kept
    if ns.types:
        types = [t.strip() for t in ns.types.split(",") if t.strip()]
        for name in types:
            if name in left_out:
                raise ForgeError(f"--types: {name} is left out of the sweep: {left_out[name]}")
            if name not in kept:
                raise ForgeError(f"--types: {name} is no causal-LM type of this transformers")
    return types if ns.cases is None else types[: ns.cases]


def _progress(row: Any) -> None:
    why = f": {row.cause}: {row.error[:160]}" if row.status != "pass" else ""
    print(f"{row.model_type}: {row.status} ({row.seconds:.0f} s){why}", flush=True)


def _versions() -> dict[str, str]:
    import torch
    import transformers

    return {"torch": torch.__version__, "transformers": transformers.__version__}


def _finish(ns: argparse.Namespace, data: dict[str, Any], coverage_report: Any) -> int:
    from pathlib import Path

    rows = coverage_report.rows_of(data)
    print(coverage_report.text_table(rows))
    if ns.markdown:
        path = Path(ns.markdown)
        path.write_text(coverage_report.markdown(data))
        print(f"wrote {path}")
    internal = [r.model_type for r in rows if r.cause == "internal error"]
    return 1 if internal else 0
