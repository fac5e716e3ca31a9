"""Keeps docs/dialect.md in step with the `npu` dialect.

The reference is checked, not trusted:

- every op the `NPU` dialect registers has a "### `npu.<op>`" section, every such
  section names a registered op, and a named op's section quotes its `ATEN` opcode
  and shows the op in an example;
- every ```mlir block is a complete forge-opt input (the doc wraps each example in
  a `func.func`; nothing is added here), parses and verifies, and round-trips:
  forge-opt's output is a fixed point, and the generic form (--print-op-generic)
  reads back to the same custom form;
- every ```invalid-mlir block is rejected by forge-opt with exit code 1, and
  each of its `// error: <message>` comments appears on stderr as `error: <message>`.

All runs go through `forge.tools.forge_opt.main`, in process, on temporary files.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest

from forge.dialects.npu import NAMED_OPS, NPU
from forge.tools.forge_opt import main as forge_opt

DOC = Path(__file__).resolve().parents[3] / "docs" / "dialect.md"
FENCE = re.compile(r"^[ \t]*```([\w-]*)[ \t]*\n(.*?)^[ \t]*```[ \t]*$", re.MULTILINE | re.DOTALL)
HEADING = re.compile(r"^### `([^`]+)`[ \t]*$", re.MULTILINE)
ERROR_COMMENT = re.compile(r"^[ \t]*// error: (.+?)[ \t]*$", re.MULTILINE)
_COUNTER = itertools.count()


def _doc() -> str:
    return DOC.read_text(encoding="utf-8")


def _blocks(language: str) -> list[tuple[int, str]]:
    """(line number, dedented body) of every fenced block tagged `language`."""
    text = _doc()
    found = []
    for m in FENCE.finditer(text):
        if m.group(1) != language:
            continue
        lines = m.group(2).splitlines()
        indent = min((len(s) - len(s.lstrip()) for s in lines if s.strip()), default=0)
        body = "\n".join(s[indent:] for s in lines) + "\n"
        found.append((text.count("\n", 0, m.start()) + 1, body))
    return found


def _sections() -> dict[str, str]:
    """Heading name -> text of its `###` section (up to the next heading of any level)."""
    text = _doc()
    sections = {}
    for m in HEADING.finditer(text):
        rest = text[m.end() :]
        end = re.search(r"^#{1,3} ", rest, re.MULTILINE)
        sections[m.group(1)] = rest[: end.start()] if end else rest
    return sections


def _op_names() -> list[str]:
    return [op.name for op in NPU.operations]


def _run(tmp_path: Path, source: str, *flags: str) -> tuple[int, str]:
    """Run forge-opt on `source`; return its exit code and its output file's text."""
    src = tmp_path / f"in{next(_COUNTER)}.mlir"
    src.write_text(source, encoding="utf-8")
    out = src.with_suffix(".out")
    code = forge_opt([str(src), "-o", str(out), *flags])
    return code, out.read_text(encoding="utf-8") if out.exists() else ""


def _id(block: tuple[int, str]) -> str:
    return f"line{block[0]}"


# ------------------------------------------------------------------ op coverage


def test_every_op_has_a_section() -> None:
    sections = _sections()
    missing = [name for name in _op_names() if name not in sections]
    assert not missing, f"docs/dialect.md has no '### `name`' section for {missing}"


def test_every_section_names_an_op() -> None:
    stale = sorted(set(_sections()) - set(_op_names()))
    assert not stale, f"docs/dialect.md documents ops the dialect does not have: {stale}"


@pytest.mark.parametrize("op", NAMED_OPS, ids=lambda op: op.name)
def test_named_op_section_quotes_opcode_and_example(op: type) -> None:
    section = _sections().get(op.name)
    assert section is not None, f"docs/dialect.md has no section for {op.name}"
    opcode = op.ATEN or op.name
    assert f"`{opcode}`" in section, f"section of {op.name} does not quote its opcode {opcode}"
    examples = [m.group(2) for m in FENCE.finditer(section) if m.group(1) == "mlir"]
    assert any(re.search(rf"\b{re.escape(op.name)}\b", b) for b in examples), (
        f"section of {op.name} has no ```mlir example using the op's custom syntax"
    )


# ------------------------------------------------------------------ examples


def test_doc_has_examples() -> None:
    assert len(_blocks("mlir")) >= len(_op_names())
    assert _blocks("invalid-mlir")


@pytest.mark.parametrize("block", _blocks("mlir"), ids=_id)
def test_mlir_block_verifies_and_round_trips(block: tuple[int, str], tmp_path: Path) -> None:
    line, source = block
    code, custom = _run(tmp_path, source)
    assert code == 0, f"```mlir block at docs/dialect.md:{line} does not parse and verify"
    code, again = _run(tmp_path, custom)
    assert code == 0 and again == custom, f"block at line {line}: custom form does not round-trip"
    code, generic = _run(tmp_path, source, "--print-op-generic")
    assert code == 0
    code, from_generic = _run(tmp_path, generic)
    assert code == 0 and from_generic == custom, (
        f"block at line {line}: generic form does not read back to the custom form"
    )


@pytest.mark.parametrize("block", _blocks("invalid-mlir"), ids=_id)
def test_invalid_mlir_block_is_rejected(
    block: tuple[int, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line, source = block
    expected = ERROR_COMMENT.findall(source)
    assert expected, f"```invalid-mlir block at line {line} has no '// error:' comment"
    capsys.readouterr()
    code, _ = _run(tmp_path, source)
    stderr = capsys.readouterr().err
    assert code == 1, f"```invalid-mlir block at docs/dialect.md:{line} was accepted"
    for message in expected:
        assert f"error: {message}" in stderr, f"block at line {line}: {stderr!r}"
