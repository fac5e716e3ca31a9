"""docs/forge-opt.md's "From mlir-opt" table against what forge-opt does: every `--mlir-`
alias is listed with the flag it becomes, and every mlir-opt flag the table says is
accepted (`the same`, an alias) parses, with one dash or two."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from forge.support.diagnostics import ForgeError
from forge.tools.forge_opt import ForgeOptMain
from forge.tools.opt_arguments import (
    MLIR_ALIASES,
    mixed_checkouts,
    mlir_spelling,
    normalized_argv,
    package_origins,
)

PAGE = Path(__file__).resolve().parents[3] / "docs" / "forge-opt.md"


def table_rows() -> list[tuple[str, str]]:
    text = PAGE.read_text().split("## From mlir-opt", 1)[1].split("\n## ", 1)[0]
    rows = [line.split(" | ") for line in text.splitlines() if line.startswith("| `")]
    return [(cells[0], cells[1]) for cells in rows]


def flags_in(cell: str) -> list[str]:
    return [m.rstrip("=") for m in re.findall(r"`(--?[a-z][a-z0-9-]*=?)", cell)]


def parser() -> argparse.ArgumentParser:
    return ForgeOptMain(args=[]).arg_parser


def test_every_alias_is_in_the_table_with_its_flag() -> None:
    rows = table_rows()
    for alias, flag in MLIR_ALIASES.items():
        matching = [forge for mlir, forge in rows if alias in flags_in(mlir)]
        assert matching, f"{alias} is not in docs/forge-opt.md's mlir-opt table"
        assert any(flag in flags_in(forge) for forge in matching), (alias, flag)


def test_every_flag_the_table_accepts_parses_with_one_dash_or_two() -> None:
    arg_parser = parser()
    options = arg_parser._option_string_actions
    accepted = [
        flag
        for mlir, forge in table_rows()
        if "none" not in forge
        for flag in flags_in(mlir)
        if flag in MLIR_ALIASES or flag in options
    ]
    assert len(accepted) >= 20
    for flag in accepted:
        for spelling in (flag, flag[1:]) if flag.startswith("--") else (flag,):
            assert mlir_spelling(spelling, options).split("=")[0] in options, spelling


def test_a_pipeline_given_twice_is_an_error() -> None:
    arg_parser = parser()
    with pytest.raises(ForgeError, match="given 2 times"):
        normalized_argv(["-p", "npu-dce", "--passes=npu-cse"], arg_parser)
    assert normalized_argv(["-pass-pipeline=npu-dce"], arg_parser) == ["--pass-pipeline=npu-dce"]
    assert normalized_argv(["-pnpu-dce"], arg_parser) == ["-pnpu-dce"]


def test_mixed_checkouts_are_named() -> None:
    assert mixed_checkouts(package_origins()) is None
    warning = mixed_checkouts({"forge": "/a", "forge.transforms": "/b"})
    assert warning is not None
    assert "2 checkouts" in warning and "forge.transforms from /b" in warning
