"""`forge bench --generate` on a tiny model: the Forge and HF eager rows in their child
processes, the table, token agreement, and OpenVINO GenAI rows that cannot run (no venv,
a venv without GenAI) reported in one line each. No timing is asserted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from forge.devtools.bench_generate import (
    MARKER,
    GenerateReport,
    GenerateSpec,
    RowChild,
    RowResult,
    finish_row,
    genai_program,
    plan_rows,
    run_child,
    run_generate_bench,
    run_group,
    timing,
)
from forge.support.diagnostics import ForgeError

SPEC = GenerateSpec("gpt2", tiny=True, prompt_len=12, max_new_tokens=6, rounds=1, threads=1)
MISSING = Path("/nonexistent/venv-genai/bin/python")


@pytest.fixture(scope="module")
def report() -> GenerateReport:
    return run_generate_bench(SPEC, ["forge", "eager"])


def test_forge_and_eager_generate_the_same_tokens(report: GenerateReport) -> None:
    forge, eager = report.ran("forge"), report.ran("eager")
    assert forge is not None and eager is not None, report.format()
    assert len(forge.tokens) == len(eager.tokens) == SPEC.max_new_tokens
    assert forge.tokens == eager.tokens
    assert forge.prompt == eager.prompt and len(forge.prompt) == SPEC.prompt_len
    assert report.agreement("forge") == (6, 6)
    assert forge.ready_seconds is not None and eager.ready_seconds is None
    for row in (forge, eager):
        assert len(row.ttft_ms) == len(row.decode_tps) == SPEC.rounds
    assert "compile prefill (12 tokens)" in forge.detail


def test_table_has_a_row_per_backend_with_ratios_and_agreement(report: GenerateReport) -> None:
    text = report.format()
    assert "gpt2 (tiny)" in text and "6 new tokens" in text and "CPU: " in text
    rows = {line.split("  ")[1]: line for line in text.splitlines() if line.startswith("  ")}
    forge = rows["Forge (compile_lm)"]
    eager = rows["HF eager (dynamic cache)"]
    assert "forge-ugc" in forge and forge.rstrip().endswith("6/6")
    assert "transformers" in eager and eager.rstrip().endswith("6/6")
    assert forge.count("1.00x") == 3  # Forge against itself: ready, TTFT, tokens/s
    assert eager.count("x ") >= 2  # TTFT and tokens/s against Forge; nothing compiled
    data = json.loads(json.dumps(report.to_json()))
    assert set(data["rows"]) == {"forge", "eager"}
    assert data["rows"]["forge"]["agreement"] == [6, 6]


def test_the_host_profile_is_loaded_before_forges_rows_compile(report: GenerateReport) -> None:
    notes = [n for n in report.notes if n.startswith("host profile:")]
    assert len(notes) == 1 and "cached" in notes[0]  # conftest's fixed profile
    assert notes[0] in report.format()


def test_missing_genai_venv_is_a_one_line_row_not_a_traceback() -> None:
    rows = ["genai-fp32", "genai-int8"]
    report = run_generate_bench(SPEC, rows, genai_python=MISSING)
    for row in rows:
        result = report.results[row]
        assert result.skipped.startswith(f"no GenAI venv at {MISSING}")
        assert "\n" not in result.skipped
    lines = report.format().splitlines()
    assert any(
        line.startswith("  OpenVINO GenAI fp32") and "skipped: no GenAI venv" in line
        for line in lines
    )
    assert sum("skipped:" in line for line in lines) == 2


def test_command_prints_the_reason_and_exits_0_without_the_genai_venv() -> None:
    command = [sys.executable, "-m", "forge.cli", "bench", "gpt2", "--tiny", "--generate"]
    command += ["--backends", "genai-int8", "--genai-python", str(MISSING)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    assert "skipped: no GenAI venv" in done.stdout


def test_a_venv_without_genai_fails_its_rows_in_one_line() -> None:
    """Forge's own python has neither optimum nor openvino_genai: the export fails."""
    report = run_generate_bench(SPEC, ["genai-fp32"], genai_python=Path(sys.executable))
    why = report.results["genai-fp32"].skipped
    assert why.startswith("export failed:") and "optimum" in why and "\n" not in why


def test_timing_from_token_time_stamps() -> None:
    timed = timing(10.0, [10.5, 10.75, 11.0], [1, 2, 3], 11.25)
    assert timed.ttft_ms == pytest.approx(500.0)
    assert timed.decode_tps == pytest.approx(4.0)  # two tokens in half a second
    assert timed.seconds == pytest.approx(1.25)


def test_genai_program_is_valid_python_without_forge_imports() -> None:
    source = genai_program()
    compile(source, "<genai>", "exec")
    assert "import forge" not in source and "from forge" not in source


def test_bad_arguments_are_user_errors() -> None:
    with pytest.raises(ForgeError, match="unknown --generate backend"):
        run_generate_bench(SPEC, ["inductor"])
    with pytest.raises(ForgeError, match="--max-new-tokens must be at least 2"):
        run_generate_bench(GenerateSpec("gpt2", tiny=True, max_new_tokens=1), ["eager"])


def test_a_failing_row_says_why_in_one_line() -> None:
    spec = GenerateSpec("no-such-model", prompt_len=4, max_new_tokens=2, rounds=1, threads=1)
    report = run_generate_bench(spec, ["eager"])
    why = report.results["eager"].skipped
    assert why.startswith("failed: error: ") and "'no-such-model'" in why, why
    assert "\n" not in why and f"skipped: {why}" in report.format()


@pytest.mark.parametrize(
    ("row_name", "detail", "label"),
    [
        # The tests' fixed host profile measured no quantized activations: weight-only.
        ("forge-int8", "activations: prefill fp32, decode fp32", "Forge int8 weights"),
        (
            "forge-int8-dq",
            "activations: prefill quantized at run time (groups of 32), decode fp32",
            "Forge int8, dynamic prefill",
        ),
        ("forge-fp16", "fp16 weights", "Forge fp16 weights"),
    ],
)
def test_forge_precision_rows_generate_with_their_weights(
    row_name: str, detail: str, label: str
) -> None:
    report = run_generate_bench(SPEC, [row_name])
    row = report.ran(row_name)
    assert row is not None, report.format()
    assert len(row.tokens) == SPEC.max_new_tokens
    assert detail in row.detail and label in report.format()


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs")
def test_children_run_on_as_many_cores_as_threads() -> None:
    """NNFactory's OpenVINO takes a thread per core: `--threads 1` pins the child."""
    probe = f"import os; print({MARKER!r} + str(len(os.sched_getaffinity(0))))"
    for cores, seen in ((1, 1), (None, len(os.sched_getaffinity(0)))):
        answer = run_child([sys.executable, "-c", probe], dict(os.environ), 60, cores)
        assert answer.payload == seen


def test_rows_report_their_peak_rss(report: GenerateReport) -> None:
    for name in ("forge", "eager"):
        row = report.ran(name)
        assert row is not None and row.peak_rss >= row.rss_ready > 0
    assert "peak RSS" in report.format()


# A row's child in miniature: ready at once, then one answer per `round` with the time
# it answered; `fail_at` makes it die at that round. Real processes, the real protocol.
FAKE_ROW = """
import json, sys, time
marker, fail_at = sys.argv[1], int(sys.argv[2])
print(marker + json.dumps({"backend": sys.argv[3]}), flush=True)
for k, line in enumerate(sys.stdin):
    if k == fail_at:
        sys.exit("generation broke")
    at = time.monotonic()
    print(marker + json.dumps({"tokens": [1, 2], "seconds": 0.1, "ttft_ms": 5.0 + k,
                               "decode_tps": 100.0, "at": at}), flush=True)
"""


def _fake_start(fail: dict[str, int]) -> Callable[[str], tuple[RowChild, RowResult]]:
    def start(row: str) -> tuple[RowChild, RowResult]:
        command = [sys.executable, "-c", FAKE_ROW, MARKER, str(fail.get(row, -1)), row]
        child = RowChild(command, dict(os.environ), SPEC, 60)
        return child, RowResult(**child.ready)

    return start


def test_rows_generate_in_interleaved_rounds() -> None:
    spec = GenerateSpec("gpt2", tiny=True, rounds=3, threads=1)
    calls: dict[str, list[float]] = {}
    start = _fake_start({})

    def recording(row: str) -> tuple[RowChild, RowResult]:
        child, result = start(row)
        calls[row] = child.calls  # the list run_group appends each answer to
        return child, result

    results = run_group(["forge", "eager", "genai-fp32"], spec, recording, lambda _: None)
    assert all(len(c) == 1 + spec.rounds for c in calls.values())
    order = sorted((c["at"], row) for row, answers in calls.items() for c in answers)
    rounds = [[row for _, row in order[k : k + 3]] for k in range(0, len(order), 3)]
    # every row once per round, who goes first rotating
    assert rounds == [
        ["forge", "eager", "genai-fp32"],
        ["eager", "genai-fp32", "forge"],
        ["genai-fp32", "forge", "eager"],
        ["forge", "eager", "genai-fp32"],
    ]
    for row in calls:
        assert results[row].ttft_ms == [6.0, 7.0, 8.0]  # the warm-up (5.0) is not timed
        assert results[row].tokens == [1, 2]


def test_several_processes_per_row_run_one_after_another_and_merge() -> None:
    spec = GenerateSpec("gpt2", tiny=True, rounds=2, threads=1, processes=3)
    started: list[str] = []
    start = _fake_start({})

    def counting(row: str) -> tuple[RowChild, RowResult]:
        started.append(row)
        return start(row)

    results = run_group(["forge", "genai-fp32"], spec, counting, lambda _: None)
    # a fresh child per row and process, the rows of a process started together
    assert started == ["forge", "genai-fp32"] * 3
    for row in ("forge", "genai-fp32"):
        assert results[row].ttft_ms == [6.0, 7.0] * 3  # every process's rounds, in order
        assert [p["ttft_ms"] for p in results[row].per_process] == [6.5] * 3
    report = GenerateReport(spec, "cpu", results)
    text = report.format()
    assert "6 round(s): 3 fresh processes per row" in text
    assert "TTFT 6.5 / 6.5 / 6.5; decode 100.0 / 100.0 / 100.0" in text
    assert "decode 1.000x (1.000-1.000), Forge ahead in 0/6" in text


def test_a_row_failing_in_a_later_process_is_reported_failed() -> None:
    spec = GenerateSpec("gpt2", tiny=True, rounds=1, threads=1, processes=2)
    starts = {"n": 0}
    start_ok, start_failing = _fake_start({}), _fake_start({"eager": 1})

    def second_fails(row: str) -> tuple[RowChild, RowResult]:
        starts["n"] += 1
        return (start_failing if starts["n"] > 2 else start_ok)(row)

    results = run_group(["forge", "eager"], spec, second_fails, lambda _: None)
    assert results["eager"].skipped == "failed while generating: generation broke"
    assert results["forge"].ttft_ms == [6.0, 6.0] and not results["forge"].skipped


def test_a_row_failing_in_the_first_process_is_not_started_again() -> None:
    spec = GenerateSpec("gpt2", tiny=True, rounds=1, threads=1, processes=3)
    started: list[str] = []
    start = _fake_start({"eager": 1})

    def counting(row: str) -> tuple[RowChild, RowResult]:
        started.append(row)
        return start(row)

    results = run_group(["forge", "eager"], spec, counting, lambda _: None)
    assert started == ["forge", "eager", "forge", "forge"]
    assert results["eager"].skipped == "failed while generating: generation broke"
    assert results["forge"].ttft_ms == [6.0] * 3 and len(results["forge"].per_process) == 3


def test_processes_must_be_at_least_one() -> None:
    with pytest.raises(ForgeError, match="--processes must be at least 1"):
        run_generate_bench(GenerateSpec("gpt2", tiny=True, processes=0), ["forge"])


def test_a_row_that_dies_while_generating_says_why_and_the_others_go_on() -> None:
    spec = GenerateSpec("gpt2", tiny=True, rounds=2, threads=1)
    results = run_group(["forge", "eager"], spec, _fake_start({"eager": 1}), lambda _: None)
    assert results["eager"].skipped == "failed while generating: generation broke"
    assert results["forge"].ttft_ms == [6.0, 7.0] and not results["forge"].skipped


def test_hf_static_ready_is_the_first_calls_extra_time() -> None:
    calls = [
        {"tokens": [3], "seconds": 9.0, "ttft_ms": 1.0, "decode_tps": 1.0},
        {"tokens": [3], "seconds": 2.0, "ttft_ms": 1.0, "decode_tps": 1.0},
        {"tokens": [4], "seconds": 4.0, "ttft_ms": 1.0, "decode_tps": 1.0},
    ]
    result = finish_row(RowResult("hf-static"), calls)
    assert result.ready_seconds == pytest.approx(6.0)  # 9 s against the later median 3 s
    assert "first generate 9.00 s, later ones 3.00 s" in result.detail
    assert "1 round(s) gave other tokens" in result.detail


def test_rows_that_do_not_fit_together_run_in_groups_with_a_note() -> None:
    spec = GenerateSpec("gpt2", tiny=False)
    rows = ["forge", "genai-fp32", "genai-int8"]
    groups, note = plan_rows(spec, rows, available=64 * 1024**3)
    assert groups == [rows] and note == ""
    groups, note = plan_rows(spec, rows, available=int(2.5 * 1024**3))
    assert len(groups) > 1 and sorted(r for g in groups for r in g) == sorted(rows)
    assert note.startswith("memory: all together would take about") and "groups" in note
    assert plan_rows(GenerateSpec("no-such-model"), rows, available=1) == ([rows], "")
    # fp32 rows grouped before int8 ones, whatever the table's order
    rows = ["forge", "forge-int8-dq", "genai-fp32", "genai-int8"]
    groups, _ = plan_rows(spec, rows, available=int(3.5 * 1024**3))
    assert groups == [["forge"], ["genai-fp32"], ["forge-int8-dq", "genai-int8"]]
    # fp16 rows between them (in the order given)
    rows = ["genai-int8", "genai-fp16", "forge", "forge-fp16"]
    groups, _ = plan_rows(spec, rows, available=64 * 1024**3)
    assert groups == [["forge", "genai-fp16", "forge-fp16", "genai-int8"]]


def _row(name: str, ttft: list[float], tps: list[float], group: int = 0) -> RowResult:
    return RowResult(name, version="v", ttft_ms=ttft, decode_tps=tps, group=group)


def test_peer_rows_are_compared_with_their_forge_row_round_by_round() -> None:
    results = {
        "forge": _row("forge", [100.0, 120.0, 110.0], [60.0, 50.0, 55.0]),
        "genai-fp32": _row("genai-fp32", [110.0, 108.0, 121.0], [57.0, 52.0, 55.0]),
        "genai-int8": _row("genai-int8", [130.0], [140.0]),  # no Forge int8 row
    }
    report = GenerateReport(SPEC, "cpu", results)
    [line] = report.paired_lines()
    assert line.split()[:3] == ["OpenVINO", "GenAI", "fp32"]
    # TTFT ratios 1.1, 0.9, 1.1; decode 0.95, 1.04, 1.0
    assert "TTFT 1.100x (0.900-1.100), Forge ahead in 2/3" in line
    assert "decode 1.000x (0.950-1.040), Forge ahead in 1/3" in line
    assert "per round, the calls side by side" in report.format()


def test_each_peer_row_is_paired_with_the_forge_row_of_its_weights() -> None:
    results = {
        name: _row(name, [100.0], [50.0])
        for name in ("forge", "forge-fp16", "forge-int8", "genai-fp32", "genai-fp16", "genai-int8")
    }
    report = GenerateReport(SPEC, "cpu", results)
    pairs = {row: report.counterpart(row) for row in ("genai-fp32", "genai-fp16", "genai-int8")}
    assert {row: forge.backend for row, forge in pairs.items() if forge} == {
        "genai-fp32": "forge",
        "genai-fp16": "forge-fp16",
        "genai-int8": "forge-int8",
    }


def test_rows_of_different_groups_are_not_paired() -> None:
    results = {
        "forge": _row("forge", [100.0], [60.0], group=0),
        "genai-fp32": _row("genai-fp32", [110.0], [57.0], group=1),
    }
    report = GenerateReport(SPEC, "cpu", results)
    assert report.paired_lines() == []
    assert "per round" not in report.format()
