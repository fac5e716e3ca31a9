"""forge calibrate: Spearman, the NNLS fit, saving the weights, and a tiny end-to-end run."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from forge.cli import main
from forge.support.diagnostics import ForgeError
from forge.tuning.autotune import Config
from forge.tuning.calibrate import (
    FITS,
    Point,
    calibrate,
    fit_points,
    fit_weights,
    nnls,
    rank,
    spearman,
    split,
)
from forge.tuning.cost import FEATURES, CostModel, Features


def test_ranks_average_ties() -> None:
    assert rank([10, 20, 20, 5]).tolist() == [2.0, 3.5, 3.5, 1.0]
    assert rank([3, 3, 3]).tolist() == [2.0, 2.0, 2.0]


def test_spearman_perfect_reversed_ties_and_constant() -> None:
    assert spearman([1, 2, 3, 4], [10, 20, 30, 400]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    # ranks [1, 2.5, 2.5, 4] vs [1, 2, 3, 4]: Pearson of ranks
    a, b = np.array([1, 2.5, 2.5, 4]), np.array([1, 2, 3, 4])
    expected = float(np.corrcoef(a, b)[0, 1])
    assert spearman([1, 2, 2, 3], [5, 6, 7, 8]) == pytest.approx(expected)
    assert math.isnan(spearman([1, 1, 1], [1, 2, 3]))
    assert math.isnan(spearman([1], [2]))
    with pytest.raises(ForgeError, match="equal lengths"):
        spearman([1, 2], [1])


def test_nnls_clips_what_least_squares_would_make_negative() -> None:
    a = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    assert nnls(a, np.array([2.0, 3.0, 5.0])) == pytest.approx([2.0, 3.0])
    x = nnls(a, np.array([2.0, -3.0, -1.0]))  # lstsq: [2.33, -2.67]
    assert (x >= 0).all()
    assert x == pytest.approx([0.5, 0.0])  # x2 = 0, then min (x1 - 2)^2 + (x1 + 1)^2


@pytest.mark.parametrize("how", FITS)
def test_the_fit_recovers_known_weights(how: object) -> None:
    rng = np.random.default_rng(0)
    x = rng.uniform(1, 100, size=(60, len(FEATURES)))
    true = np.array([0.02, 0.0, 0.5, 0.01, 3.0])
    y = x @ true
    assert fit_weights(x, y, how) == pytest.approx(true, rel=1e-6, abs=1e-9)  # type: ignore[arg-type]


def _points(weights: np.ndarray, n: int = 40) -> list[Point]:
    rng = np.random.default_rng(1)
    out = []
    for i in range(n):
        x = rng.uniform(1, 50, size=len(FEATURES))
        config = Config(alpha=(0.2, 0.4, 0.6, 0.8, 1.0)[i % 5], iterations=1 + i % 3)
        f = Features(*map(int, x[:4]), float(x[4]))
        y = float(np.array(f.vector()) @ weights) * (1 + 0.01 * rng.standard_normal())
        out.append(Point(f"m{i % 4}", config, f, samples=[y]))
    return out


def test_fit_points_beats_unit_weights_on_held_out_configurations() -> None:
    """Latency driven by s_params alone: unit weights rank poorly, the fit well."""
    points = _points(np.array([0.0, 0.0, 0.0, 0.0, 1.0]))
    held = split(points, 0.3, seed=0)
    held_configs = {p.config for p, h in zip(points, held, strict=True) if h}
    assert all(p.config in held_configs for p, h in zip(points, held, strict=True) if h)
    assert not any(p.config in held_configs for p, h in zip(points, held, strict=True) if not h)
    report = fit_points(points, held, "test")
    assert report.after > 0.9
    assert report.after > report.before
    assert report.model.s_params > 0
    assert "held-out Spearman" in report.format()


def test_calibrated_weights_round_trip_and_autotune_uses_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "cost_model.json"
    monkeypatch.setenv("FORGE_COST_MODEL", str(path))
    assert not CostModel.current().calibrated
    model = CostModel(0.01, 0.02, 0.0, 0.03, 0.5, source="calibrated by test")
    assert model.save() == path
    assert "path" not in json.loads(path.read_text())
    loaded = CostModel.current()
    assert loaded == model and loaded.calibrated and loaded.path == str(path)
    assert main(["autotune", "gpt2", "--tiny", "--seq", "16", "--top", "1"]) == 0
    out = capsys.readouterr().out
    assert f"cost model: {path}: calibrated by test" in out
    assert "mixed precision: measured int8 sensitivity" in out
    monkeypatch.setenv("FORGE_COST_MODEL", str(tmp_path / "none.json"))
    assert main(["autotune", "gpt2", "--tiny", "--seq", "16", "--top", "1"]) == 0
    assert "cost model: uncalibrated" in capsys.readouterr().out


def test_tiny_end_to_end_calibration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FORGE_COST_MODEL", str(tmp_path / "default.json"))
    report = calibrate(["gpt2"], seqs=[16], depths=[1], points=6, rounds=1, runs=1)
    assert len(report.points) >= 4
    assert all(p.latency_ms > 0 and p.run is None for p in report.points)
    assert len({p.config.precision for p in report.points}) == 3  # fp16, int8, mixed
    out = tmp_path / "fitted.json"
    argv = ["calibrate", "--models", "gpt2", "--seqs", "16", "--depths", "1"]
    argv += ["--points", "6", "--rounds", "1", "--runs", "1", "-o", str(out)]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "uncalibrated" in text and f"saved {out}" in text
    assert CostModel.load(out).source.startswith("calibrated by forge calibrate")
    assert not (tmp_path / "default.json").exists()


def test_bad_options_are_one_line_errors() -> None:
    with pytest.raises(ForgeError, match="built-in"):
        calibrate(["no-such-model"], points=4)
    with pytest.raises(ForgeError, match="holdout"):
        split(_points(np.ones(5)), 1.5, 0)
    assert main(["calibrate", "--seqs", "a,b"]) == 1
    assert main(["calibrate", "--points", "2"]) == 1
