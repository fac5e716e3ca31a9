"""forge-opt's command-line flags beside xDSL's: Forge's own, mlir-opt's pipeline,
printing and reproducer flags, and the diagnostic ones."""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path

from forge.support.diagnostics import ForgeError
from forge.support.host import PACKAGE_DIRS, distribution_version
from forge.tools import reproducer


def _count(text: str) -> int:
    """An argparse type: a non-negative integer."""
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got '{text}'")
    return int(text)


def add_forge_arguments(arg_parser: argparse.ArgumentParser) -> None:
    """Forge's flags, beside the xDSL ones `xDSLOptMain` registers."""
    arg_parser.add_argument(
        "--print-ir-after-all",
        action="store_true",
        help="Print the IR to stderr after every pass (MLIR's --mlir-print-ir-after-all)",
    )
    arg_parser.add_argument(
        "--max-iterations",
        type=_count,
        metavar="N",
        help="Sweeps over the IR a pattern pass may make that each rewrite, before it fails "
        "as not converging (default 10; a pass's max-iterations option wins)",
    )
    arg_parser.add_argument(
        "--max-rewrites",
        type=_count,
        metavar="N",
        help="Rewrites one run of a pattern pass may make (default 16 per op + 1024; a "
        "pass's max-rewrites option wins)",
    )
    arg_parser.add_argument(
        "--list-passes", action="store_true", help="List the registered passes and exit"
    )
    arg_parser.add_argument(
        "--dump-pass-pipeline",
        action="store_true",
        help="Print the pipeline to stderr, composite passes expanded and every option "
        "with its value (MLIR's --dump-pass-pipeline)",
    )
    arg_parser.add_argument(
        "--load-pass-plugin",
        action="append",
        metavar="FILE.py",
        help="Register the passes (ModulePass subclasses with a `name`) defined in FILE.py",
    )
    arg_parser.add_argument(
        "--load-pdl",
        metavar="FILE.mlir",
        help="PDL patterns for every npu-apply-pdl in -p without a file "
        "(the same as -p 'npu-apply-pdl{file=FILE}')",
    )
    arg_parser.add_argument(
        "--verify-each",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="Verify the IR after every pass (default; --no-verify-each verifies only "
        "after parsing and at the end), naming the pass that broke it",
    )
    arg_parser.add_argument(
        "--emit",
        choices=("mlir", "dot", "python"),
        default="mlir",
        help="Output format: the IR (default), a Graphviz graph of each function, or "
        "the executor's plan as a Python program (as -t python)",
    )
    arg_parser.add_argument(
        "--check-numerics",
        action="store_true",
        help="Execute the IR before and after every pass on random inputs; name the "
        "first pass that changes the results; at the end, run a placed module's "
        "compiled executable (NNFactory segments, CPU steps) against the reference",
    )
    arg_parser.add_argument(
        "--pass-statistics",
        action="store_true",
        help="Print, per Forge pass, rewrites, ops before/after and milliseconds, and, per "
        "pattern, its hits (stderr)",
    )
    add_mlir_arguments(arg_parser)
    add_diagnostic_arguments(arg_parser)


def add_diagnostic_arguments(arg_parser: argparse.ArgumentParser) -> None:
    """--verify-diagnostics with MLIR's meaning, xDSL's old one as --print-diagnostics,
    and --trace-patterns."""
    verify_flag = arg_parser._option_string_actions["--verify-diagnostics"]  # xDSL's
    verify_flag.help = (
        "Check the diagnostics against the input's `// expected-error {{...}}` "
        "annotations (MLIR's rules: @+N, @-N, @above, @below, @unknown, -re); report "
        "every mismatch and exit 1 if any"
    )
    arg_parser.add_argument(
        "--print-diagnostics",
        action="store_true",
        help="Print each chunk's diagnostic (verifier, pass or parse error) to stdout "
        "and go on, exit 0 (what xDSL calls --verify-diagnostics)",
    )

    def trace_names(text: str) -> frozenset[str]:
        names = frozenset(n.strip() for n in text.split(",") if n.strip())
        bad = [n for n in names if not n.replace("-", "").replace("_", "").isalnum()]
        if bad:  # most likely the input file, taken as the optional value
            raise argparse.ArgumentTypeError(
                f"'{bad[0]}' is not a pass or pattern name; write --trace-patterns=NAMES "
                "or put the input file first"
            )
        return names

    arg_parser.add_argument(
        "--trace-patterns",
        nargs="?",
        const=frozenset(),
        type=trace_names,
        metavar="NAMES",
        help="Print each successful pattern application to stderr: pass, pattern, the "
        "op it matched and where, ops created and erased; =NAMES (comma-separated "
        "pass or pattern class names) keeps only those",
    )


def add_mlir_arguments(arg_parser: argparse.ArgumentParser) -> None:
    """mlir-opt's pipeline, IR printing and crash reproducer flags."""
    arg_parser.add_argument(
        "--pass-pipeline",
        dest="passes",
        default=argparse.SUPPRESS,
        help="The same as -p: MLIR's nested syntax, builtin.module(func.func(cse),...)",
    )
    names = "PASS[,PASS]"
    arg_parser.add_argument(
        "--print-ir-before", metavar=names, help="Print the IR before these passes"
    )
    arg_parser.add_argument(
        "--print-ir-after", metavar=names, help="Print the IR after these passes"
    )
    arg_parser.add_argument(
        "--print-ir-before-all", action="store_true", help="Print the IR before every pass"
    )
    arg_parser.add_argument(
        "--print-ir-after-change",
        action="store_true",
        help="Print the IR after a pass only if the pass changed it",
    )
    arg_parser.add_argument(
        "--print-ir-after-failure",
        action="store_true",
        help="Print the IR after a pass that raised or left invalid IR",
    )
    arg_parser.add_argument(
        "--print-ir-module-scope",
        action="store_true",
        help="For passes nested under func.func(...), print the whole module",
    )
    arg_parser.add_argument(
        "--print-ir-tree-dir",
        metavar="DIR",
        help="Write each IR dump to its own file in DIR instead of stderr",
    )
    arg_parser.add_argument(
        "--elide-elementsattrs-if-larger",
        metavar="N",
        type=_count,
        help="Print dense constants of more than N elements as "
        "dense_resource<__elided__> (output and dumps; cannot be read back)",
    )
    arg_parser.add_argument(
        "--crash-reproducer",
        metavar="FILE",
        help="Where to write the reproducer when a pass fails (default: a file under "
        f"{reproducer.DEFAULT_DIR}/; 'none': write none)",
    )
    arg_parser.add_argument(
        "--run-reproducer",
        metavar="FILE",
        help="Replay a crash reproducer: its input, its pipeline and plugins",
    )


MLIR_ALIASES: dict[str, str] = {
    "--mlir-print-ir-after-all": "--print-ir-after-all",
    "--mlir-print-ir-before-all": "--print-ir-before-all",
    "--mlir-print-ir-after": "--print-ir-after",
    "--mlir-print-ir-before": "--print-ir-before",
    "--mlir-print-ir-after-change": "--print-ir-after-change",
    "--mlir-print-ir-after-failure": "--print-ir-after-failure",
    "--mlir-print-ir-module-scope": "--print-ir-module-scope",
    "--mlir-print-ir-tree-dir": "--print-ir-tree-dir",
    "--mlir-pass-statistics": "--pass-statistics",
    "--mlir-timing": "--time-passes",
    "--mlir-print-debuginfo": "--print-debuginfo",
    "--mlir-print-op-generic": "--print-op-generic",
    "--mlir-elide-elementsattrs-if-larger": "--elide-elementsattrs-if-larger",
}
"""mlir-opt's `--mlir-` printing, statistics and timing flags -> forge-opt's."""

PIPELINE_DEST = "passes"
"""Where `-p`, `--passes` and `--pass-pipeline` store the pipeline."""


def mlir_spelling(token: str, long_options: Collection[str]) -> str:
    """`token` as forge-opt spells it: mlir-opt's single-dash long options
    (`-pass-pipeline=...`, `-split-input-file`) take two dashes, `--mlir-` aliases
    their forge-opt names, and `--verify-each=false|true` a boolean flag."""
    name, equals, value = token.partition("=")
    single_dash = name.startswith("-") and not name.startswith("--")
    if single_dash and ("-" + name in long_options or "-" + name in MLIR_ALIASES):
        name = "-" + name
    name = MLIR_ALIASES.get(name, name)
    if name == "--verify-each" and equals:
        if value not in ("true", "false", "1", "0"):
            raise ForgeError(f"--verify-each={value}: expected true or false")
        return "--verify-each" if value in ("true", "1") else "--no-verify-each"
    return name + equals + value


def normalized_argv(argv: Sequence[str], parser: argparse.ArgumentParser) -> list[str]:
    """`argv` in forge-opt's spellings (`mlir_spelling`); a pipeline given twice
    (`-p a -p b`, `--pass-pipeline` and `-p`) is an error, not the last one silently."""
    actions = parser._option_string_actions  # argparse's option table
    tokens: list[str] = []
    pipelines: list[str] = []
    for i, token in enumerate(argv):
        if token == "--":
            tokens += argv[i:]
            break
        token = mlir_spelling(token, actions)
        name = token.partition("=")[0]
        action = actions.get(name)
        attached = name.startswith("-p") and not name.startswith("--") and action is None
        if attached or (action is not None and action.dest == PIPELINE_DEST):
            pipelines.append(name[:2] if attached else name)
        tokens.append(token)
    if len(pipelines) > 1:
        raise ForgeError(
            f"the pass pipeline is given {len(pipelines)} times ({', '.join(pipelines)}): "
            "give one -p or --pass-pipeline"
        )
    return tokens


def package_origins() -> dict[str, str]:
    """Each `forge.*` package -> the checkout folder it was loaded from (an editable
    install maps top-level folders into `forge`, so two checkouts can mix)."""
    origins: dict[str, str] = {}
    for name in PACKAGE_DIRS:
        module = importlib.import_module(name)
        path = Path(module.__file__ or ".").resolve().parent
        origins[name] = str(path.parent)
    return origins


def mixed_checkouts(origins: Mapping[str, str]) -> str | None:
    """A one-line warning when the packages come from more than one checkout."""
    roots = sorted(set(origins.values()))
    if len(roots) < 2:
        return None
    where = "; ".join(f"{name} from {root}" for name, root in origins.items())
    return f"warning: forge's packages come from {len(roots)} checkouts ({where})"


def version_text() -> str:
    """`forge-opt --version`: the versions and where each package was loaded from."""
    origins = package_origins()
    forge, xdsl = (distribution_version(d, missing="not installed") for d in ("forge-ugc", "xdsl"))
    lines = [f"forge-opt (forge {forge}, xdsl {xdsl})"]
    lines += [f"  {name}: {root}" for name, root in origins.items()]
    warning = mixed_checkouts(origins)
    return "\n".join(lines + ([warning] if warning else []))
