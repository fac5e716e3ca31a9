"""`forge report`: PNG figures for a tiny model and a synthetic bench file; a bad bench
file is one error line and exit code 1, before any model is compiled."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from forge.cli import main

PNG = b"\x89PNG\r\n\x1a\n"
BENCH = {
    "model": "gpt2",
    "seq": 128,
    "threads": 2,
    "runs": 20,
    "compile_seconds": {
        "forge": {"ready": 3.1, "first_output": 3.4},
        "openvino": {"ready": 5.2, "first_output": 5.5},
    },
    "latency_ms": {
        "forge": {"mean": 41.2, "p50": 40.8, "p99": 47.1},
        "forge-op": {"mean": 60.3, "p50": 59.9, "p99": 66.0},
        "eager": {"mean": 55.0, "p50": 54.1, "p99": 61.7},
        "onnxruntime": {"mean": 39.0, "p50": 38.5},
    },
}


def png_size(path: Path) -> tuple[int, int]:
    """Width and height from the IHDR chunk, after checking the signature."""
    data = path.read_bytes()
    assert data[:8] == PNG and data[12:16] == b"IHDR", path
    return struct.unpack(">II", data[16:24])


def written(out: str) -> list[Path]:
    return [Path(line) for line in out.splitlines()]


def test_report_for_a_tiny_model_and_a_bench_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("matplotlib")
    bench = tmp_path / "bench.json"
    bench.write_text(json.dumps(BENCH))
    out = tmp_path / "report"
    args = ["report", "--model", "gpt2", "--tiny", "--seq", "8", "--bench", str(bench)]
    assert main([*args, "-o", str(out)]) == 0
    paths = written(capsys.readouterr().out)
    names = ["passes-gpt2.png", "buffers.png", "transitions.png", "bench.png"]
    assert paths == [out / name for name in names]
    for path in paths:
        width, height = png_size(path)
        assert width >= 500 and height >= 300


def test_partial_bench_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Backends and whole sections may be missing; what is there is plotted."""
    pytest.importorskip("matplotlib")
    bench = tmp_path / "bench.json"
    partial = {
        "model": "gpt2",
        "tiny": True,
        "compile_seconds": {"forge": {"ready": 1.5, "first_output": None}},
        "latency_ms": {"eager": {"mean": 5.0}, "openvino": {}},
        "skipped": {"inductor": "not installed"},
    }
    bench.write_text(json.dumps(partial))
    assert main(["report", "--bench-only", "--bench", str(bench), "-o", str(tmp_path)]) == 0
    (path,) = written(capsys.readouterr().out)
    assert path == tmp_path / "bench.png" and png_size(path)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "cannot read bench results"),
        ("[1, 2]", "bench results must be a JSON object"),
        ('{"latency_ms": {"forge": {"mean": "fast"}}}', "latency_ms.forge.mean must be a number"),
        ('{"compile_seconds": {"forge": 3.1}}', "compile_seconds.forge must be an object"),
        ('{"model": "gpt2"}', "no compile_seconds or latency_ms figures"),
    ],
)
def test_malformed_bench_is_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, message: str
) -> None:
    bench = tmp_path / "bench.json"
    bench.write_text(content)
    out = tmp_path / "report"
    assert main(["report", "--tiny", "--bench", str(bench), "-o", str(out)]) == 1
    captured = capsys.readouterr()
    assert captured.out == "" and not out.exists()
    (line,) = captured.err.splitlines()
    assert line.startswith("forge: error: ") and message in line


def test_bench_only_needs_a_bench_file(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", "--bench-only"]) == 1
    assert capsys.readouterr().err == "forge: error: --bench-only needs --bench FILE.json\n"
