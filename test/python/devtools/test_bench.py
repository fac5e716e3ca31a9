"""`forge bench` on a tiny model: child processes, the report, the JSON schema, the
optional backends reported as skipped when their extra or venv is missing, a backend
added with one registration, and the memory plan (which backends are timed together)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from forge.commands import bench as bench_command
from forge.devtools import bench
from forge.devtools import report as report_plots
from forge.devtools.bench import GIB, BackendResult, BenchReport, Footprint, run_bench
from forge.support.diagnostics import ForgeError

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
    name = "openvino"
    openvino = dataclasses.replace(bench.REGISTRY[name], extra="forge_no_such_module", venv="")
    monkeypatch.setitem(bench.REGISTRY, name, openvino)
    result = run_bench("gpt2", [name], seq=8, runs=1, tiny=True)
    skipped = result.results[name].skipped
    assert "forge_no_such_module" in skipped and "not installed" in skipped
    assert "skipped OpenVINO CPU" in result.format()  # no child, so no version


def test_missing_bench_venv_is_skipped_not_failed(tmp_path: Path) -> None:
    nowhere = tmp_path / "venv-bench" / "bin" / "python"
    result = run_bench("gpt2", ["openvino", "onnxruntime"], tiny=True, bench_python=nowhere)
    for name in ("openvino", "onnxruntime"):
        assert result.results[name].skipped.startswith(f"no bench venv at {nowhere}")
    assert "skipped ONNX Runtime CPU: no bench venv" in result.format()


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


def test_labels_name_the_version_the_child_reported() -> None:
    assert bench.label("openvino", "OpenVINO 2026.4.1") == "OpenVINO 2026.4.1 CPU"
    assert bench.label("onnxruntime", "ONNX Runtime 1.32.0") == "ONNX Runtime 1.32.0 CPU"
    assert bench.label("onnxruntime") == "ONNX Runtime CPU"
    assert bench.label("eager", "torch 2.13.0") == "torch eager"  # no {version} in it


# ------------------------------------------------------------------------ memory plan

MEMINFO = """MemTotal:       24576000 kB
MemFree:         1000000 kB
MemAvailable:   20971520 kB
Buffers:           1000 kB
"""


def test_mem_available_reads_meminfo() -> None:
    assert bench.mem_available(MEMINFO) == 20 * GIB
    assert bench.mem_available("MemTotal: 1 kB\n") is None
    assert bench.mem_available() is None or bench.mem_available() > 0  # this machine


def test_footprint_estimate_is_base_plus_factors() -> None:
    resident, peak = Footprint(GIB, 1.5, 2.5).estimate(2 * GIB)
    assert (resident, peak) == (4 * GIB, 6 * GIB)
    # A peak factor below the resident one still never estimates less than resident.
    assert Footprint(GIB, 2.0, 1.0).estimate(GIB) == (3 * GIB, 3 * GIB)


def test_all_fit_one_group() -> None:
    estimates = {b: (1 * GIB, 2 * GIB) for b in ("a", "b", "c")}
    assert bench.plan_groups(["a", "b", "c"], estimates, 20 * GIB) == [["a", "b", "c"]]


def test_none_fit_together_every_backend_alone() -> None:
    estimates = {b: (6 * GIB, 11 * GIB) for b in ("forge", "openvino", "onnxruntime")}
    groups = bench.plan_groups(["forge", "openvino", "onnxruntime"], estimates, 16 * GIB)
    assert groups == [["forge"], ["openvino"], ["onnxruntime"]]


def test_groups_keep_the_order_and_pack_what_fits() -> None:
    estimates = {"a": (2 * GIB, 4 * GIB), "b": (2 * GIB, 4 * GIB), "c": (8 * GIB, 10 * GIB)}
    estimates["d"] = (1 * GIB, 1 * GIB)
    groups = bench.plan_groups(["a", "b", "c", "d"], estimates, 10 * GIB)
    # a+b: 2 + 4 at worst; c does not fit beside them (2 + 2 + 10 > 10, a's compile
    # beside b and c is 4 + 2 + 8); d fits beside c while c sits at its resident size
    # (8 + 1) but not while c compiles (10 + 1 > 10).
    assert groups == [["a", "b"], ["c"], ["d"]]
    assert bench.plan_groups(["a", "b", "c", "d"], estimates, 11 * GIB) == [
        ["a", "b"],
        ["c", "d"],
    ]


def test_the_compile_peak_decides_not_just_the_resident_sizes() -> None:
    estimates = {"x": (2 * GIB, 9 * GIB), "y": (2 * GIB, 9 * GIB)}
    # Resident together 4 GiB, but one compiling beside the other: 9 + 2.
    assert bench.plan_groups(["x", "y"], estimates, 10 * GIB) == [["x"], ["y"]]
    assert bench.plan_groups(["x", "y"], estimates, 11 * GIB) == [["x", "y"]]


def test_a_backend_too_large_alone_still_gets_a_group() -> None:
    estimates = {"small": (1 * GIB, 1 * GIB), "huge": (30 * GIB, 40 * GIB)}
    groups = bench.plan_groups(
        ["small", "huge", "small2"], {**estimates, "small2": (GIB, GIB)}, 8 * GIB
    )
    assert groups == [["small"], ["huge"], ["small2"]]


def test_weight_bytes_without_allocating() -> None:
    expected = sum(
        p.numel() * 4
        for p in dict.fromkeys(bench.models.build_model("gpt2", tiny=True).parameters())
    )
    assert bench.weight_bytes("gpt2", tiny=True) == expected
    full = bench.weight_bytes("llama-3.2-1b", tiny=False)
    assert full is not None and 4.9e9 < full < 5.0e9  # 1,235,814,400 fp32 parameters
    assert bench.weight_bytes("file.py:factory", tiny=True) is None


def test_when_they_do_not_fit_groups_run_one_after_another() -> None:
    # MemAvailable as if the machine had almost nothing free: every backend alone.
    done = run_bench(
        "gpt2",
        ["eager", TEST_BACKEND],
        seq=8,
        runs=2,
        threads=1,
        tiny=True,
        compile_repeats=1,
        available=GIB // 4,
    )
    assert len(done.notes) == 1 and "timed in 2 groups one after another" in done.notes[0]
    assert "[eager] then [test-inference-mode]" in done.notes[0]
    text = done.format()
    assert done.notes[0] in text
    for name in ("eager", TEST_BACKEND):
        result = done.ran(name)
        assert result is not None, done.results[name].skipped
        assert set(result.latency_ms) == {"mean", "p50", "p99"}
        assert 0 < result.rss_ready <= result.peak_rss_compile <= result.peak_rss
        assert result.estimate[0] > 0
    memory = done.to_json()["memory_bytes"]
    assert set(memory) == {"eager", TEST_BACKEND}
    assert "peak RSS" in text


def test_when_they_fit_they_interleave() -> None:
    done = run_bench(
        "gpt2",
        ["eager", TEST_BACKEND],
        seq=8,
        runs=2,
        threads=1,
        tiny=True,
        compile_repeats=1,
        available=64 * GIB,
    )
    assert done.notes == []
    assert all(done.ran(name) is not None for name in ("eager", TEST_BACKEND))


def test_a_batch_waits_for_the_previous_child_only_when_there_is_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pauses: list[float] = []
    monkeypatch.setattr(bench.time, "sleep", pauses.append)
    bench.settle(1)
    assert pauses == []
    bench.settle(3)
    assert pauses == [bench.SETTLE_SECONDS]


def test_rounds_are_set_side_by_side_with_forges(report: BenchReport) -> None:
    forge, eager = report.ran("forge"), report.ran("eager")
    assert forge is not None and eager is not None
    assert len(forge.round_ms) == len(eager.round_ms) == 2  # 2 runs: 2 rounds of one
    [line] = report.paired_lines()
    assert line.split()[:2] == ["torch", "eager"] and "Forge faster in " in line
    assert "per round (mean of each round's batch" in report.format()
    assert json.loads(json.dumps(report.to_json()))["latency_round_ms"]["eager"] == eager.round_ms


def test_latency_is_timed_in_every_fresh_process(report: BenchReport) -> None:
    # 3 compile repeats, 2 rounds: the first two processes of each backend time one round
    # each, the third only compiles.
    forge = report.ran("forge")
    assert forge is not None and len(forge.compile_samples) == 3
    assert len(forge.process_ms) == 2 and forge.process_ms == forge.round_ms
    text = report.format()
    assert "per process (mean of the rounds each fresh process was timed in, ms):" in text
    saved = json.loads(json.dumps(report.to_json()))
    assert saved["latency_process_ms"]["forge"] == forge.process_ms


def _timed(name: str, rounds: list[float], group: int = 0) -> BackendResult:
    latency = {"mean": 1.0, "p50": 1.0, "p99": 1.0}
    return BackendResult(name, latency_ms=latency, round_ms=rounds, group=group)


def test_round_ratios_count_the_rounds_forge_was_faster() -> None:
    results = {
        "forge": _timed("forge", [100.0, 110.0, 100.0, 120.0]),
        "onnxruntime": _timed("onnxruntime", [105.0, 99.0, 102.0, 120.0]),
        "openvino": _timed("openvino", [130.0], group=1),  # timed after Forge's group
    }
    report = BenchReport("gpt2", 8, 4, 1, True, results)
    [line] = report.paired_lines()
    # ratios 1.05, 0.9, 1.02, 1.0: median 1.01, faster in 2 of 4 (a tie is not faster)
    assert "1.010x (0.900-1.050), Forge faster in 2/4" in line


def test_the_host_profile_is_loaded_before_the_compiles(report: BenchReport) -> None:
    """A profile measured inside a Forge child's clock would count a per-host cost as
    that compile's ready time (9.5 s against 0.8-1.8 s, once the bench had installed
    openvino's Python package, which is part of the profile's key)."""
    notes = [n for n in report.notes if n.startswith("host profile:")]
    assert len(notes) == 1 and "cached" in notes[0]  # conftest's fixed profile
    assert notes[0] in report.format()


def test_a_profile_measured_for_the_bench_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = []

    def fake_run(argv: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
        calls.append(argv)
        out = json.dumps([True, 7.83, str(tmp_path / "host-profile-x.json")])
        return subprocess.CompletedProcess(argv, 0, stdout=out + "\n", stderr="")

    monkeypatch.setattr(bench.subprocess, "run", fake_run)
    note = bench.host_profile_note()
    assert calls and calls[0][0] == sys.executable
    assert note.startswith("host profile: measured in 7.83 s before the compiles")
    assert "no ready time below includes it" in note


def test_a_profile_that_cannot_load_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    def fake_run(argv: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(argv, 1, stdout="", stderr="Traceback\nForgeError: x")

    monkeypatch.setattr(bench.subprocess, "run", fake_run)
    note = bench.host_profile_note()
    assert note == "host profile: could not be loaded before the compiles (ForgeError: x)"
