"""The Python examples in the docs run as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[3] / "docs"
BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)
EXAMPLES = [
    pytest.param(code, id=f"{path.name}:{i}")
    for path in sorted(DOCS.glob("*.md"))
    for i, code in enumerate(BLOCK.findall(path.read_text()))
]


@pytest.mark.parametrize("code", EXAMPLES)
def test_python_example_runs(code: str) -> None:
    exec(compile(code, "<docs>", "exec"), {"__name__": "docs_example"})
