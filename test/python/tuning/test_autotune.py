"""forge autotune: the grid, the shared-work search against npu-optimize run per config."""

from __future__ import annotations

import pytest
from conftest import load_tiny

from forge.cli import main
from forge.diagnostics import ForgeError
from forge.dialects.context import make_context
from forge.frontend.loading import ordered_inputs
from forge.transforms.npu_assign_precision import NpuAssignPrecisionPass
from forge.transforms.npu_optimize import optimize
from forge.tuning.autotune import ALPHAS, DEFAULT, LAYOUTS, PRECISIONS, Config, grid, sweep
from forge.tuning.cost import CostModel, analyze


def test_default_grid_is_alpha_layout_precision_at_two_rounds() -> None:
    default = grid()
    assert len(default) == 45 == len(set(default))
    assert {c.iterations for c in default} == {2}
    full = grid(full=True)
    assert len(full) == 135 == len(set(full))
    assert {c.alpha for c in full} == set(ALPHAS)
    assert {c.layout for c in full} == set(LAYOUTS)
    assert {c.precision for c in full} == set(PRECISIONS)
    assert {c.iterations for c in full} == {1, 2, 3}
    assert DEFAULT in default


@pytest.mark.parametrize("name", ["gpt2", "llama-3.2-1b", "lfm2-2.6b"])
def test_every_configuration_scores_the_graph_npu_optimize_builds(name: str) -> None:
    """The shared search must give, for each configuration, exactly the graph that
    running npu-optimize with that configuration alone gives."""
    tiny = load_tiny(name)
    n = len(tiny.program.input_names)
    configs = [*grid(full=True), Config(0.0, "auto", "fp16", 2)]
    report = sweep(tiny.program.module, configs, num_inputs=n)
    assert [t.config for t in report.trials] == configs
    built = {}
    for trial in report.trials:
        c = trial.config
        if c.structure not in built:
            module = tiny.fresh_module()
            optimize(module, c.iterations, c.alpha, c.layout)
            built[c.structure] = analyze(module, n)
        assert trial.features == built[c.structure].at(c.precision), c
        assert trial.score == report.model.score(trial.features)
    naive = 6 * sum(s[2] for s in built)
    assert report.stats.pass_runs < naive / 2


def test_best_is_the_lowest_score_and_the_gain_is_measured_against_the_default() -> None:
    tiny = load_tiny("gpt2")
    report = sweep(tiny.program.module, num_inputs=len(tiny.program.input_names))
    assert report.default.config == DEFAULT
    assert report.best.score == min(t.score for t in report.trials)
    assert report.gain == pytest.approx(1 - report.best.score / report.default.score)
    assert 0.0 <= report.gain < 1.0
    # unit weights: int8 stores fewer bytes than fp16 for the same graph
    assert report.best.config.precision == "int8"
    assert report.fgr > 1.0
    assert report.ranked()[0] == report.best
    assert "vs default" in report.format()


def test_weights_steer_the_choice() -> None:
    """With only n_ops weighted, precision cannot matter: ties go to the default's."""
    tiny = load_tiny("gpt2")
    ops_only = CostModel(1.0, 0.0, 0.0, 0.0, 0.0)
    report = sweep(tiny.program.module, model=ops_only, num_inputs=2)
    assert report.best.config.precision == DEFAULT.precision
    assert report.best.features.n_ops == min(t.features.n_ops for t in report.trials)


def test_the_input_module_is_left_alone() -> None:
    tiny = load_tiny("qwen2-0.5b")
    before = str(tiny.program.module)
    sweep(tiny.program.module, [DEFAULT], num_inputs=2)
    assert str(tiny.program.module) == before


def test_invalid_configurations_are_one_line_errors() -> None:
    module = load_tiny("gpt2").program.module
    with pytest.raises(ForgeError, match="alpha"):
        sweep(module, [Config(alpha=1.5)], num_inputs=2)
    with pytest.raises(ForgeError, match="layout"):
        sweep(module, [Config(layout="nhwc")], num_inputs=2)
    with pytest.raises(ForgeError, match="precision"):
        sweep(module, [Config(precision="int4")], num_inputs=2)
    with pytest.raises(ForgeError, match="at least one"):
        sweep(module, [], num_inputs=2)


def test_cli_prints_sweep_time_best_and_gain(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["autotune", "gpt2", "--tiny", "--seq", "16", "--top", "3"]) == 0
    out = capsys.readouterr().out
    assert "45 configurations" in out
    assert "gain over default" in out
    assert main(["autotune", "gpt2", "--tiny", "--seq", "16", "--full", "--top", "1"]) == 0
    assert "135 configurations" in capsys.readouterr().out


def test_mixed_is_priced_from_the_measured_assignment() -> None:
    """pi = mixed uses the per-layer sensitivity assignment, measured once per model; it
    prices like the IR npu-assign-precision writes with that assignment."""
    from forge.runtime.precision import measure_mixed_precision

    tiny = load_tiny("gpt2")
    program = tiny.program
    n = len(program.input_names)
    inputs = ordered_inputs(tiny.model, tiny.args, tiny.kwargs, program.input_names)
    report = measure_mixed_precision(program.module, program.weights, inputs)
    kept = report.fp16_weights
    assert 0 < len(kept) < len({layer.weight for layer in report.layers})
    configs = [Config(precision=p) for p in ("fp16", "int8", "mixed")]
    measured = sweep(program.module, configs, num_inputs=n, mixed=kept)
    fp16, int8, mixed = (t.features.s_params for t in measured.trials)
    assert int8 < mixed < fp16
    module = tiny.fresh_module()
    optimize(module)
    NpuAssignPrecisionPass("mixed", kept).apply(make_context(), module)
    assert analyze(module, n).at("mixed") == measured.trials[2].features
    every = tuple(layer.weight for layer in report.layers)
    all_fp16 = sweep(program.module, configs, num_inputs=n, mixed=every)
    assert all_fp16.trials[2].features.s_params == fp16
