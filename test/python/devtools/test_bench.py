"""`forge bench` on a tiny model: child processes, the report, the JSON schema, the
optional backends reported as skipped when their extra is missing, and a backend
added with one registration."""

from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import sys

import pytest
import torch

from forge.commands import bench as bench_command
from forge.devtools import bench
from forge.devtools import report as report_plots
from forge.devtools.bench import BackendResult, BenchReport, run_bench
from forge.diagnostics import ForgeError

TEST_BACKEND = "test-inference-mode"


def build_inference_mode(w: bench.Workload) -> bench.Built:
    """The whole of a backend: eager PyTorch under `torch.inference_mode()`."""

    def run() -> torch.Tensor:
        with torch.inference_mode():
            return w.module(w.ids, w.mask)

    return bench.Built(run, detail="torch.inference_mode()")


# At module level: the child process imports this module to find the backend.
bench.register(bench.Backend(TEST_BACKEND, "test: inference mode", build_inference_mode))


@pytest.fixture(scope="module")
def report() -> BenchReport:
    return run_bench("gpt2", ["forge", "eager"], seq=16, runs=2, threads=1, tiny=True)


def test_forge_and_eager_run_and_agree(report: BenchReport) -> None:
    forge = report.ran("forge")
    eager = report.ran("eager")
    assert forge is not None and eager is not None
    assert forge.ready_seconds is not None and forge.ready_seconds > 0
    assert forge.first_output_seconds is not None
    assert forge.first_output_seconds >= forge.ready_seconds
    assert eager.ready_seconds is None  # nothing to compile
    for result in (forge, eager):
        assert set(result.latency_ms) == {"mean", "p50", "p99"}
        assert result.latency_ms["p99"] >= result.latency_ms["p50"] > 0
    assert forge.max_abs <= 1e-4 and forge.kl <= 1e-8 and forge.top1 == 1.0
    assert "segment(s)" in forge.detail


def test_report_prints_ratios_and_json_schema(report: BenchReport) -> None:
    text = report.format()
    assert "Forge (segments)" in text and "torch eager" in text
    assert "x" in text.split("torch eager")[1].splitlines()[0]  # latency vs Forge
    data = json.loads(json.dumps(report.to_json()))
    assert data["model"] == "gpt2" and data["seq"] == 16 and data["threads"] == 1
    assert set(data["latency_ms"]) == {"forge", "eager"}
    assert set(data["compile_seconds"]) == {"forge"}
    assert set(data["compile_seconds"]["forge"]) == {"ready", "first_output"}


def test_missing_extra_is_skipped_not_failed(monkeypatch: pytest.MonkeyPatch) -> None:
    openvino = dataclasses.replace(bench.REGISTRY["openvino"], extra="forge_no_such_module")
    monkeypatch.setitem(bench.REGISTRY, "openvino", openvino)
    result = run_bench("gpt2", ["openvino"], seq=8, runs=1, tiny=True)
    skipped = result.results["openvino"].skipped
    assert "forge_no_such_module" in skipped and "not installed" in skipped
    assert "skipped OpenVINO" in result.format()


def test_failing_backend_is_reported_with_its_error(monkeypatch: pytest.MonkeyPatch) -> None:
    result = run_bench("no-such-model", ["eager"], seq=8, runs=1, tiny=True)
    assert result.results["eager"].skipped.startswith("failed:")
    assert "no-such-model" in result.results["eager"].skipped


def test_unknown_backend_and_bad_runs_are_errors() -> None:
    with pytest.raises(ForgeError, match="unknown backend"):
        run_bench("gpt2", ["tvm"], tiny=True)
    with pytest.raises(ForgeError, match="--runs must be at least 1"):
        run_bench("gpt2", ["eager"], runs=0, tiny=True)


def test_cli_unknown_backend_is_one_line() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "forge.cli", "bench", "--tiny", "--backends", "forge,tvm"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and "unknown backend(s): tvm" in done.stderr


def test_format_without_forge_has_no_ratios() -> None:
    lone = BenchReport(
        "gpt2",
        8,
        1,
        1,
        True,
        {"eager": BackendResult("eager", latency_ms={"mean": 2.0, "p50": 2.0, "p99": 3.0})},
    )
    line = next(x for x in lone.format().splitlines() if "torch eager" in x)
    assert line.rstrip().endswith("1.50")  # P99/P50, and no "vs Forge" column


def test_a_registered_backend_runs_end_to_end() -> None:
    done = run_bench("gpt2", [TEST_BACKEND], seq=8, runs=2, threads=1, tiny=True, compile_repeats=1)
    mine = done.ran(TEST_BACKEND)
    assert mine is not None, done.results[TEST_BACKEND].skipped
    assert mine.ready_seconds is not None and mine.first_output_seconds is not None
    assert mine.first_output_seconds >= mine.ready_seconds
    assert set(mine.latency_ms) == {"mean", "p50", "p99"}
    assert mine.max_abs == 0.0 and mine.top1 == 1.0  # eager, bit for bit
    text = done.format()
    assert "test: inference mode" in text and "torch.inference_mode()" in text
    data = done.to_json()
    assert set(data["latency_ms"]) == {TEST_BACKEND}
    assert set(data["compile_seconds"]) == {TEST_BACKEND}


def test_every_list_derives_from_the_registry() -> None:
    names = bench.backend_names()
    assert names[:6] == ("forge", "forge-op", "eager", "inductor", "openvino", "onnxruntime")
    assert TEST_BACKEND in names
    commands = argparse.ArgumentParser().add_subparsers()
    bench_command.add_parser(commands)
    help_text = "".join(commands.choices["bench"].format_help().split())  # unwrapped
    assert ",".join(names) in help_text
    table = {name: {"mean": 1.0} for name in ("zz-unregistered", TEST_BACKEND, "eager")}
    assert report_plots._backends(table) == ["eager", TEST_BACKEND, "zz-unregistered"]
    with pytest.raises(ForgeError, match="already registered"):
        bench.register(bench.REGISTRY["eager"])
