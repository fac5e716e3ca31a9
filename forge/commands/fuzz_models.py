"""`forge fuzz-models`: random PyTorch modules (or whole tiny transformers) vs eager, compiled."""

from __future__ import annotations

import argparse
from typing import Any

from forge.support import flags
from forge.support.campaign import Campaign, add_ray_arguments

FAMILIES = ("blocks", "transformers")
CASE_TIMEOUT = 600.0
"""Seconds a case may take on Ray before it counts as a hang (a tiny transformer's
forward and generation take 5-15 s; a loaded machine several times that)."""


def add_parser(sub: Any) -> None:
    parser = sub.add_parser(
        "fuzz-models", help="random PyTorch modules or tiny transformers vs eager, compiled"
    )
    parser.add_argument(
        "--family",
        choices=FAMILIES,
        default="blocks",
        help="blocks: small hand-written blocks from a grammar; transformers: random tiny "
        "decoder-only models from transformers' config classes, forward and generation",
    )
    parser.add_argument("--cases", type=flags.size, default=100)
    parser.add_argument("--seed", type=flags.seed, default=0)
    parser.add_argument(
        "--save-dir",
        default=None,
        help="where shrunk failures go as JSON specs (default test/python/regressions/models, "
        "or test/python/regressions/transformers with --family transformers)",
    )
    parser.add_argument("--no-shrink", action="store_true", help="report failures unshrunk")
    add_ray_arguments(parser)


def run(ns: argparse.Namespace) -> int:
    # Imported when the command runs, not at `forge` start-up (torch and xDSL take seconds).
    from pathlib import Path

    from forge.support.diagnostics import ForgeError

    if ns.cases < 0:
        raise ForgeError(f"--cases must be at least 0, got {ns.cases}")
    root = Path(__file__).resolve().parents[2]  # the repository
    campaign = Campaign.from_args(ns, timeout=CASE_TIMEOUT)
    if campaign.distributed:
        print(f"running {ns.cases} cases on {campaign.describe()}", flush=True)
    if ns.family == "transformers":
        from forge.devtools.fuzz_models import crashed
        from forge.devtools.fuzz_transformers import REGRESSIONS, fuzz_transformers

        save_dir = Path(ns.save_dir) if ns.save_dir else root / REGRESSIONS
        result = fuzz_transformers(
            ns.cases,
            ns.seed,
            save_dir=save_dir,
            shrink_failures=not ns.no_shrink,
            run_cases=lambda check, specs: campaign.map(check, specs, crashed),
            on_case=_report_failure,
        )
    else:
        from forge.devtools.fuzz_models import REGRESSIONS, fuzz_models

        save_dir = Path(ns.save_dir) if ns.save_dir else root / REGRESSIONS
        result = fuzz_models(
            ns.cases,
            ns.seed,
            save_dir=save_dir,
            shrink_failures=not ns.no_shrink,
            campaign=campaign,
        )
    print(result.summary())
    for failure in result.failures:
        print(f"  {failure.format()}")
    return 1 if result.failures else 0


def _report_failure(spec: Any, outcome: Any) -> None:
    """A long campaign names its failures as they arrive (on stderr; the summary follows)."""
    import sys

    if outcome.kind != "match":
        print(
            f"case seed {spec.seed} ({spec.family}): {outcome.kind}: {outcome.detail}",
            file=sys.stderr,
        )
