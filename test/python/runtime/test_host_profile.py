"""The host profile: decisions on synthetic measurements, the cache, `forge doctor`, and
one real measurement of this machine (the only test that builds one)."""

from __future__ import annotations

import importlib.util
import json
import os
import stat
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from conftest import CPU_PROFILE, NPU_PROFILE

from forge.cli import main
from forge.conversion.kernel_choice import BuildOptions
from forge.dialects.context import entry_function, parse_module
from forge.runtime import host_profile
from forge.runtime.doctor import profile_summary
from forge.runtime.host_profile import PROFILE_ENV, build_profile, load_host_profile
from forge.support.host import CACHE_ENV
from forge.transforms.host_profile import (
    FORMAT,
    HEAD_MARGIN,
    INT8_DYNAMIC_MARGIN,
    MARGIN,
    HostProfile,
    KernelTiming,
    LinearTiming,
    ProfileError,
    profile_from_json,
    read_profile,
)
from forge.transforms.npu_place_devices import place


def synthetic(cpu_ms: float, npu_ms: float, transition_ms: float) -> HostProfile:
    """A profile with one vocabulary-head bucket and one layer bucket."""
    return HostProfile(
        {"cpu": "synthetic"},
        transition_ms,
        0.01,
        (
            LinearTiming(128, 768, 8192, npu_ms, cpu_ms, "head, scaled vocabulary"),
            LinearTiming(128, 768, 768, npu_ms / 10, cpu_ms / 10),
        ),
    )


# -------------------------------------------------------------- decision logic


def test_head_goes_where_it_was_measured_faster() -> None:
    """GPT-2's head (128x768x50257) scaled from the 8192-wide bucket, one transition."""
    cpu_wins = synthetic(cpu_ms=10.0, npu_ms=14.0, transition_ms=0.1)
    estimate = cpu_wins.linear_estimate(128, 768, 50257, hops=1)
    assert estimate.bucket is not None and estimate.bucket.out_features == 8192
    assert estimate.scale == pytest.approx(50257 / 8192)
    assert estimate.cpu_ms == pytest.approx(10.0 * 50257 / 8192)
    assert estimate.device == "cpu"
    assert "-> CPU" in estimate.reason("linear 128x768x50257 (head)")

    npu_wins = synthetic(cpu_ms=14.0, npu_ms=10.0, transition_ms=0.1)
    assert npu_wins.linear_estimate(128, 768, 50257, hops=1).device == "npu"


def test_a_head_needs_only_the_head_margin() -> None:
    """The CPU 7.5% faster at the head's bucket: an LM head moves (HEAD_MARGIN, the
    head buckets are timed as heads), the same shape inside the program does not
    (MARGIN), nor does a head whose nearest bucket is a layer's."""
    profile = synthetic(cpu_ms=7.4, npu_ms=8.0, transition_ms=0.0)
    head = profile.linear_estimate(128, 768, 50257, hops=1, head=True)
    assert head.margin == HEAD_MARGIN and head.device == "cpu"
    assert "5% margin" in head.reason("linear 128x768x50257 (head)")
    inner = profile.linear_estimate(128, 768, 50257, hops=1)
    assert inner.margin == MARGIN and inner.device == "npu"
    small = profile.linear_estimate(128, 768, 768, hops=1, head=True)
    assert small.bucket is not None and "head" not in small.bucket.label
    assert small.margin == MARGIN and small.device == "npu"


def test_transition_cost_flips_a_placement() -> None:
    """CPU 1.0 ms against NNFactory 1.6 ms (the CPU must come in under 85% of it, 1.36 ms):
    the CPU wins with cheap transitions, loses once two transitions eat the 0.36 ms it
    saves; a head (one hop) keeps it until one transition does."""
    for transition, inner, head in ((0.1, "cpu", "cpu"), (0.2, "npu", "cpu"), (0.4, "npu", "npu")):
        profile = synthetic(cpu_ms=10.0, npu_ms=16.0, transition_ms=transition)
        assert profile.linear_estimate(128, 768, 768, hops=2).device == inner, transition
        assert profile.linear_estimate(128, 768, 768, hops=1).device == head, transition


def test_kernel_rule_reads_every_outcome() -> None:
    """The fastest form where it measured at least 5% faster than OpenVINO's own; a
    tie, or slower, keeps OpenVINO's fused form; no measurement (an older profile, or
    oneDNN not timed): fused everywhere, or the forms that were timed."""
    decode = KernelTiming(1, fused_ms=3.4, apart_ms=3.0, onednn_ms=3.6)
    prompt = KernelTiming(128, fused_ms=7.0, apart_ms=7.2, onednn_ms=6.2)
    tie = KernelTiming(128, fused_ms=7.0, apart_ms=6.8, onednn_ms=6.9)
    slower = KernelTiming(128, fused_ms=7.0, apart_ms=7.5)
    suite4 = KernelTiming(1, fused_ms=3.4, apart_ms=3.0)
    assert [t.kernel for t in (decode, prompt, tie, slower, suite4)] == [
        "apart",
        "onednn",
        "fused",
        "fused",
        "apart",
    ]
    profile = synthetic(10.0, 13.0, 0.1)
    assert profile.kernel_rule() == ()
    both = HostProfile(profile.key, 0.1, 0.01, profile.linears, kernels=(decode, prompt))
    assert both.kernel_rule() == ((1, "apart"), (128, "onednn"))


def test_snippets_go_on_only_where_they_measured_faster() -> None:
    """Snippets on where they beat off by `SNIPPETS_MARGIN` in the form the row count
    chose (timed in the same rounds); a tie, slower, or no measurement: off."""
    faster = KernelTiming(128, 7.0, 6.5, 7.1, snippets_ms=6.2, snippets_off_ms=6.5)
    tie = KernelTiming(128, 7.0, 6.5, 7.1, snippets_ms=6.45, snippets_off_ms=6.5)
    slower = KernelTiming(1, 3.0, 3.0, 3.1, snippets_ms=3.2, snippets_off_ms=3.0)
    unmeasured = KernelTiming(1, 3.0, 3.0, 3.1)
    # Without the off time of its own rounds, the chosen form's time (fused: 3.0 ms).
    against_form = KernelTiming(1, 3.0, 3.0, 3.1, snippets_ms=2.5)
    assert [t.snippets for t in (faster, tie, slower, unmeasured, against_form)] == [
        True,
        False,
        False,
        False,
        True,
    ]
    profile = synthetic(10.0, 13.0, 0.1)
    assert profile.snippets_rule() == ()
    both = HostProfile(profile.key, 0.1, 0.01, profile.linears, kernels=(slower, faster))
    assert both.snippets_rule() == ((1, False), (128, True))


def test_int8_activation_goes_apart_only_where_it_measured_faster() -> None:
    faster = KernelTiming(128, 7.0, 6.5, 7.1, int8_fused_ms=8.0, int8_apart_ms=7.8)
    tie = KernelTiming(128, 7.0, 6.5, 7.1, int8_fused_ms=8.0, int8_apart_ms=7.95)
    slower = KernelTiming(1, 3.0, 3.0, 3.1, int8_fused_ms=0.62, int8_apart_ms=0.65)
    unmeasured = KernelTiming(1, 3.0, 3.0, 3.1)
    assert [t.int8_kernel for t in (faster, tie, slower, unmeasured)] == [
        "apart",
        "fused",
        "fused",
        "fused",
    ]
    profile = synthetic(10.0, 13.0, 0.1)
    both = HostProfile(profile.key, 0.1, 0.01, profile.linears, kernels=(slower, faster))
    assert both.int8_kernel_rule() == ((1, "fused"), (128, "apart"))
    assert both.kernel_rule() == ((1, "fused"), (128, "apart"))  # the fp32 rule apart


def test_fp16_weights_stay_fp16_only_where_it_measured_faster() -> None:
    """Kept fp16 against the fp32 weights: "narrow" needs `FP16_KERNEL_MARGIN` (5%); a
    tie or a loss runs the fp32 weights ("wide"); no measurement keeps them fp16, as
    asked."""
    decode = KernelTiming(1, 3.0, 3.0, 3.1, fp16_wide_ms=3.15, fp16_narrow_ms=1.73)
    tie = KernelTiming(8, 3.0, 3.0, 3.1, fp16_wide_ms=3.0, fp16_narrow_ms=2.9)
    prompt = KernelTiming(128, 7.0, 6.5, 7.1, fp16_wide_ms=16.0, fp16_narrow_ms=16.6)
    unmeasured = KernelTiming(1, 3.0, 3.0, 3.1)
    assert [t.fp16_kernel for t in (decode, tie, prompt, unmeasured)] == [
        "narrow",
        "wide",
        "wide",
        "narrow",
    ]
    profile = synthetic(10.0, 13.0, 0.1)
    both = HostProfile(profile.key, 0.1, 0.01, profile.linears, kernels=(decode, prompt))
    assert both.fp16_kernel_rule() == ((1, "narrow"), (128, "wide"))
    options = BuildOptions.for_host(both)
    assert [options.fp16_form(rows) for rows in (1, 4, 100, 4096)] == [
        "narrow",
        "narrow",
        "wide",
        "wide",
    ]
    plain = BuildOptions()
    assert plain.fp16_form(1) == plain.fp16_form(4096) == "narrow"  # no rule


def test_snippets_times_are_read_from_the_file(tmp_path: Path) -> None:
    data = json.loads(NPU_PROFILE.read_text())
    data["kernels"] = [
        {"rows": 1, "fused_ms": 2.0, "apart_ms": 2.0, "onednn_ms": 2.0},
        {
            "rows": 128,
            "fused_ms": 9.0,
            "apart_ms": 8.0,
            "onednn_ms": 9.0,
            "snippets_off_ms": 8.1,
            "snippets_ms": 7.6,
            "int8_fused_ms": 9.0,
            "int8_apart_ms": 8.5,
            "fp16_wide_ms": 6.0,
            "fp16_narrow_ms": 8.0,
        },
    ]
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(data))
    assert read_profile(path).snippets_rule() == ((1, False), (128, True))
    assert read_profile(path).int8_kernel_rule() == ((1, "fused"), (128, "apart"))
    # 1 row has no fp16 times: kept fp16, as asked
    assert read_profile(path).fp16_kernel_rule() == ((1, "narrow"), (128, "wide"))


def test_kernels_are_read_from_the_file(tmp_path: Path) -> None:
    """Suite 5's "kernels" (three forms), and suite 4's "activations" (two)."""
    data = json.loads(NPU_PROFILE.read_text())
    assert read_profile(NPU_PROFILE).kernels == ()
    data["activations"] = [{"rows": 1, "fused_ms": 2.0, "apart_ms": 1.5}]
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(data))
    assert read_profile(path).kernel_rule() == ((1, "apart"),)
    data["kernels"] = [{"rows": 100, "fused_ms": 2.0, "apart_ms": 2.0, "onednn_ms": 1.5}]
    path.write_text(json.dumps(data))
    assert read_profile(path).kernel_rule() == ((100, "onednn"),)
    data["kernels"] = [{"rows": 0, "fused_ms": 2.0, "apart_ms": 1.5}]
    path.write_text(json.dumps(data))
    with pytest.raises(ProfileError, match="'rows' must be an integer >= 1"):
        read_profile(path)


def test_graph_split_and_throughput() -> None:
    """A profile's measured split (two segments minus one), else two transitions; the
    graph GFLOP/s of its largest linear bucket."""
    data = json.loads(NPU_PROFILE.read_text())
    profile = profile_from_json(data)
    assert profile.split_ms is None and profile.graph_split_ms() == pytest.approx(0.2)
    assert profile.graph_gflops() == pytest.approx(2 * 128 * 768 * 8192 / 8.0 / 1e6)
    data["transition_measured"] = {"one_segment_ms": 1.5, "two_segments_ms": 2.9}
    assert profile_from_json(data).graph_split_ms() == pytest.approx(1.4)
    data["transition_measured"] = {"one_segment_ms": 1.5, "two_segments_ms": "x"}
    with pytest.raises(ProfileError, match="'two_segments_ms' must be a finite number"):
        profile_from_json(data)


IR = """
func.func @lm(%x: tensor<128x768xf32>, %w: tensor<768x768xf32>,
              %h: tensor<50257x768xf32>) -> tensor<128x50257xf32> {
  %0 = npu.linear %x, %w : (tensor<128x768xf32>, tensor<768x768xf32>) -> tensor<128x768xf32>
  %1 = npu.gelu %0 : tensor<128x768xf32>
  %2 = npu.linear %1, %h : (tensor<128x768xf32>, tensor<50257x768xf32>) -> tensor<128x50257xf32>
  func.return %2 : tensor<128x50257xf32>
}
"""


def _devices(profile: HostProfile | None) -> list[str]:
    function = entry_function(parse_module(IR))
    place(function, profile)
    return [op.attributes["device"].data for op in function.body.block.ops if op.attributes]


def test_placement_reads_the_profile() -> None:
    """The first linear reads an argument (0 hops before) and feeds gelu (1 hop); the
    head follows gelu (1 hop). Without a profile nothing moves."""
    assert _devices(None) == ["npu", "npu", "npu"]
    assert _devices(synthetic(10.0, 13.0, 0.1)) == ["cpu", "npu", "cpu"]
    assert _devices(synthetic(13.0, 10.0, 0.1)) == ["npu", "npu", "npu"]
    # 0.35 ms per transition: 1.0 + 0.35 > 1.3 for the first linear; the head saves
    # 30 x 6.1 = 18 ms, far more than one transition.
    assert _devices(synthetic(10.0, 13.0, 0.35)) == ["npu", "npu", "cpu"]


def test_profile_files_are_checked() -> None:
    assert read_profile(CPU_PROFILE).transition_ms == 0.1
    assert read_profile(NPU_PROFILE).linears[0].cpu_ms == 2.0
    with pytest.raises(ProfileError, match="format is not"):
        profile_from_json({"format": "x"})
    with pytest.raises(ProfileError, match="'npu_ms' must be a finite number"):
        profile_from_json(
            {
                "format": FORMAT,
                "transition_ms": 0.1,
                "dispatch_ms": 0.0,
                "linears": [{"rows": 1, "in": 2, "out": 3, "npu_ms": "fast", "cpu_ms": 1}],
            }
        )
    with pytest.raises(ProfileError, match="'linears' is empty"):
        profile_from_json({"format": FORMAT, "transition_ms": 0.1, "dispatch_ms": 0.0})


# ----------------------------------------------------------------------- cache


@pytest.fixture
def fake_build(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[int]:
    """The cache logic with the measurement replaced by a synthetic profile (the real
    suite is exercised once, in `real`): counts the builds."""
    builds: list[int] = []

    def build() -> dict[str, Any]:
        builds.append(1)
        data = json.loads(CPU_PROFILE.read_text())
        data["key"] = host_profile.host_key()
        return data

    monkeypatch.setattr(host_profile, "build_profile", build)
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.delenv(PROFILE_ENV)
    return builds


def test_cache_builds_once_and_loads_after(fake_build: list[int], tmp_path: Path) -> None:
    first = load_host_profile()
    assert first.built and fake_build == [1]
    assert first.path.parent == tmp_path / "cache"
    assert stat.S_IMODE(os.stat(tmp_path / "cache").st_mode) == 0o700
    start = time.perf_counter()
    again = load_host_profile()
    print(f"cached profile loaded in {(time.perf_counter() - start) * 1e3:.2f} ms")
    assert not again.built and again.path == first.path and fake_build == [1]
    first.path.unlink()  # deleting the cache measures again
    assert load_host_profile().built and fake_build == [1, 1]


def test_cache_is_per_key(fake_build: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    before = load_host_profile()
    key = {**host_profile.host_key(), "openvino": "2099.1"}
    monkeypatch.setattr(host_profile, "host_key", lambda: key)
    after = load_host_profile()
    assert after.built and after.path != before.path and fake_build == [1, 1]
    assert dict(after.profile.key) == key


def test_stale_key_in_the_file_is_measured_again(
    fake_build: list[int], capsys: pytest.CaptureFixture[str]
) -> None:
    path = load_host_profile().path
    data = json.loads(path.read_text())
    data["key"]["cpu"] = "another CPU"
    path.write_text(json.dumps(data))
    assert load_host_profile().built and fake_build == [1, 1]
    assert "measured for another host key" in capsys.readouterr().err


@pytest.mark.parametrize("garbage", ["{not json", "[]", '{"format": "forge-host-profile/1"}'])
def test_corrupted_cache_is_rebuilt_with_a_note(
    fake_build: list[int], capsys: pytest.CaptureFixture[str], garbage: str
) -> None:
    path = load_host_profile().path
    path.write_text(garbage)
    capsys.readouterr()
    loaded = load_host_profile()
    assert loaded.built and fake_build == [1, 1]
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"note: host profile {path} is unreadable")
    assert read_profile(path).transition_ms == 0.1  # rewritten whole


def test_a_cache_dir_that_cannot_be_written_is_noted_not_fatal(
    fake_build: list[int],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """FORGE_CACHE_DIR naming a file: the profile is measured, used from a temporary
    file and not saved; the compile that needed it goes on."""
    (tmp_path / "file").write_text("")
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "file"))
    loaded = load_host_profile()
    assert loaded.built and loaded.path.is_file() and tmp_path not in loaded.path.parents
    assert read_profile(loaded.path).transition_ms == 0.1
    err = capsys.readouterr().err
    assert err == (
        f"note: host profile not saved (cannot write {tmp_path / 'file'}/"
        f"{host_profile.cache_path().name}: Not a directory); measured again next time\n"
    )


def test_fixed_profile_is_used_as_is(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(PROFILE_ENV, str(CPU_PROFILE))
    loaded = load_host_profile()
    assert loaded.path == CPU_PROFILE and not loaded.built
    monkeypatch.setenv(PROFILE_ENV, str(tmp_path / "none.json"))
    with pytest.raises(ProfileError, match="cannot read host profile"):
        load_host_profile()


def test_doctor_prints_the_profile(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setenv(PROFILE_ENV, str(CPU_PROFILE))
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert f"host profile {CPU_PROFILE}" in out
    assert "transition 0.100 ms per NPU<->CPU hop" in out
    assert "linear 4x8x16" in out and "CPU (CPU total 1.200 ms)" in out
    monkeypatch.delenv(PROFILE_ENV)
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    assert "none cached" in profile_summary(measure=False)


# ------------------------------------------------------------ the real profile


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """This machine's profile, measured once for the module."""
    start = time.perf_counter()
    data = build_profile()
    print(f"host profile built in {time.perf_counter() - start:.2f} s")
    path = tmp_path_factory.mktemp("profile") / "host-profile.json"
    path.write_text(json.dumps(data))
    return data | {"path": str(path)}


def test_real_profile_measures_this_host(real: dict[str, Any]) -> None:
    profile = read_profile(real["path"])
    assert dict(profile.key) == host_profile.host_key()
    assert {(b.rows, b.in_features, b.out_features) for b in profile.linears} == {
        (r, i, o) for r, i, o, _ in host_profile.LINEAR_BUCKETS
    }
    assert all(b.cpu_ms > 0 and b.npu_ms >= 0 for b in profile.linears)
    assert {o.kind for o in profile.ops} == {"sdpa", "layer_norm", "elementwise"}
    assert profile.transition_ms >= 0 and profile.dispatch_ms > 0
    assert len(real["decisions"]) == len(profile.linears) + len(profile.ops)
    assert [k.rows for k in profile.kernels] == [rows for rows, _ in host_profile.KERNEL_BUCKETS]
    assert all(
        k.fused_ms > 0 and k.apart_ms > 0 and k.onednn_ms is not None and k.onednn_ms > 0
        for k in profile.kernels
    )
    assert all((k.snippets_ms or 0) > 0 and (k.snippets_off_ms or 0) > 0 for k in profile.kernels)
    assert all((k.int8_fused_ms or 0) > 0 and (k.int8_apart_ms or 0) > 0 for k in profile.kernels)
    # The thread comparison needs OpenVINO's Python API (the bench extra), not NNFactory.
    if importlib.util.find_spec("openvino") is not None:
        assert real["settings"]["openvino_threads_decision"] in ("all", "1")
    else:
        assert "openvino_threads_decision" not in real["settings"]


def test_budget_shortens_rounds_that_start_late() -> None:
    now = time.perf_counter()
    assert host_profile._Budget(now + 100.0).seconds(2.0, 0.4) == 2.0  # early: nominal
    assert 0.9 < host_profile._Budget(now + 10.0).seconds(2.0, 0.1) <= 1.0  # a share
    assert host_profile._Budget(now - 1.0).seconds(2.0, 0.4) == 0.0  # late: MIN_ROUNDS only


def test_rounds_run_at_least_min_rounds_when_out_of_time() -> None:
    calls: list[str] = []
    pairs = {"a": (lambda: calls.append("npu"), lambda: calls.append("cpu"))}
    times = host_profile._rounds(pairs, 0.0)
    # One warm-up per side, then per round one untimed opener and one timed call per side.
    assert calls.count("npu") == 1 + 2 * host_profile.MIN_ROUNDS
    assert all(ms >= 0 for ms in times["a"])


def test_int8_activations_quantized_where_measured_clearly_faster() -> None:
    """Quantizing the int8 MLPs' activations at run time needs INT8_DYNAMIC_MARGIN over
    the faster weight-only form; where taken, the int8 form is OpenVINO's (the form it
    was timed in). Unmeasured: weight-only."""
    decode = KernelTiming(1, 3.0, 3.0, int8_fused_ms=1.0, int8_apart_ms=0.95)
    assert not decode.int8_dynamic and decode.int8_kernel == "apart"
    fast = replace(decode, int8_dynamic_ms=0.6)
    assert fast.int8_dynamic and fast.int8_kernel == "fused"
    near = replace(decode, int8_dynamic_ms=0.95 * (1 - INT8_DYNAMIC_MARGIN) + 0.01)
    assert not near.int8_dynamic
    profile = HostProfile({"cpu": "synthetic"}, 0.1, 0.01, (), kernels=(fast, decode))
    assert profile.int8_dynamic_rule() == ((1, True), (1, False))


def test_int8_dynamic_round_trips_through_the_file() -> None:
    data = {
        "format": FORMAT,
        "key": {"cpu": "synthetic"},
        "transition_ms": 0.1,
        "dispatch_ms": 0.01,
        "linears": [{"rows": 1, "in": 8, "out": 16, "npu_ms": 1.0, "cpu_ms": 2.0}],
        "kernels": [
            {
                "rows": 1,
                "fused_ms": 3.0,
                "apart_ms": 3.0,
                "int8_fused_ms": 1.0,
                "int8_apart_ms": 1.1,
                "int8_dynamic_ms": 0.5,
            },
            {"rows": 128, "fused_ms": 9.0, "apart_ms": 9.0},
        ],
    }
    profile = profile_from_json(data)
    assert profile.int8_dynamic_rule() == ((1, True), (128, False))
    data["kernels"][0]["int8_dynamic_ms"] = -1
    with pytest.raises(ProfileError, match="int8_dynamic_ms"):
        profile_from_json(data)
