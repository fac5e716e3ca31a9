"""forge autotune: the grid, the shared-work search against npu-optimize run per config."""

from __future__ import annotations

import pickle

import pytest
import torch
from conftest import load_tiny

from forge.cli import main
from forge.dialects.context import make_context
from forge.frontend.capture import capture
from forge.frontend.importer import import_program
from forge.frontend.loading import ordered_inputs
from forge.support.diagnostics import ForgeError
from forge.transforms.forge_pipeline import plan
from forge.transforms.npu_assign_precision import NpuAssignPrecisionPass
from forge.transforms.npu_fuse_operators import AlphaUsed, NpuFuseOperatorsPass
from forge.transforms.npu_optimize import optimize
from forge.transforms.pattern_pass import collect_reports
from forge.tuning.autotune import (
    ALPHAS,
    DEFAULT,
    LAYOUTS,
    TUNED_PRECISIONS,
    Config,
    ConfigLatency,
    grid,
    measure_config,
    sweep,
)
from forge.tuning.cost import CostModel, analyze


def test_default_grid_is_alpha_layout_precision_at_two_rounds() -> None:
    default = grid()
    assert len(default) == 45 == len(set(default))
    assert {c.iterations for c in default} == {2}
    full = grid(full=True)
    assert len(full) == 135 == len(set(full))
    assert {c.alpha for c in full} == set(ALPHAS)
    assert {c.layout for c in full} == set(LAYOUTS)
    assert {c.precision for c in full} == set(TUNED_PRECISIONS)
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


@pytest.mark.parametrize("name", ["gpt2", "llama-3.2-1b"])
def test_fuse_operators_reports_the_lowest_alpha_with_the_same_rewrites(name: str) -> None:
    """`AlphaUsed.needed` is what lets the sweep skip alphas: at `needed` the pass makes
    the very same graph as at 1.0, and (when it is above the lowest threshold) one step
    below it a different one."""
    tiny = load_tiny(name)
    optimize(module := tiny.fresh_module(), 1, 0.0)

    def fused(alpha: float) -> tuple[object, float]:
        copy = module.clone()
        with collect_reports() as reports:
            NpuFuseOperatorsPass(alpha=alpha).apply(make_context(), copy)
        (report,) = [r.report for r in reports if isinstance(r.report, AlphaUsed)]
        return copy, report.needed

    top, needed = fused(1.0)
    assert needed in ALPHAS
    same, _ = fused(needed)
    assert same.is_structurally_equivalent(top)
    lower = [a for a in ALPHAS if a < needed]
    if lower:
        below, _ = fused(lower[-1])
        assert not below.is_structurally_equivalent(top)


class _ConvNet(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3)
        self.fc = torch.nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.conv(x.transpose(2, 3)))
        return self.fc(y.mean((2, 3)))


def test_channels_last_is_its_own_graph_where_a_convolution_asks_for_it() -> None:
    """With a convolution, layout=channels-last builds another graph than auto, and the
    shared search still gives each configuration npu-optimize's own graph."""
    example = (torch.randn(1, 3, 10, 12),)
    program = import_program(capture(_ConvNet().eval(), example))
    n = len(program.input_names)
    configs = [Config(1.0, layout, "fp16", 2) for layout in LAYOUTS]
    report = sweep(program.module, configs, num_inputs=n)
    graphs = []
    for trial in report.trials:
        module = program.module.clone()
        optimize(module, 2, 1.0, trial.config.layout)
        assert trial.features == analyze(module, n).at("fp16"), trial.config
        graphs.append(module)
    auto, channels_last, _ = graphs
    assert not auto.is_structurally_equivalent(channels_last)


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


def test_pipeline_options_reach_plan_through_compile_model() -> None:
    """`forge autotune --latency` compiles through compile_model: a configuration's
    alpha, layout and iterations travel as its `pipeline` record, build what the same
    keywords to plan() build, and are checked before anything is captured."""
    from forge.runtime.compile import compile_model

    tiny = load_tiny("gpt2")
    options = {"alpha": 0.2, "layout": "contiguous", "iterations": 1}
    by_keywords = tiny.fresh_module()
    want = plan(by_keywords, **options)

    def runs(records: list) -> list[tuple[str, int, int]]:
        return [(r.name, r.rewrites, r.ops_after) for r in records]

    _, report = compile_model(tiny.model, tiny.args, tiny.kwargs, pipeline=options)
    assert runs(report.plan.records) == runs(want.records)
    _, default = compile_model(tiny.model, tiny.args, tiny.kwargs)
    assert runs(default.plan.records) != runs(want.records)
    with pytest.raises(ValueError, match="layout"):
        compile_model(tiny.model, tiny.args, tiny.kwargs, pipeline={"layout": "diagonal"})


def test_measure_config_is_picklable_in_and_out() -> None:
    """One case per worker (e.g. on Ray): plain data in, plain data out."""
    config = Config(alpha=0.2, layout="contiguous", precision="fp16", iterations=1)
    args = pickle.loads(pickle.dumps(("gpt2", True, 16, config, 2)))
    result = measure_config(*args)
    result = pickle.loads(pickle.dumps(result))
    assert isinstance(result, ConfigLatency)
    assert result.config == config
    assert len(result.times) == 2 and all(t > 0 for t in result.times)
    assert result.fastest <= result.median and result.compile_seconds > 0
    with pytest.raises(ForgeError, match="runs"):
        measure_config("gpt2", True, 16, config, 0)


def test_cli_latency_measures_the_top_k_and_the_default(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["autotune", "gpt2", "--tiny", "--seq", "16", "--latency", "2", "--runs", "2"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.split()[:2] == ["pred", "meas"])
    rows = [line.split() for line in lines[header + 1 : header + 4]]
    predicted = [row[0] for row in rows]
    assert predicted[:2] == ["1", "2"]
    assert sorted(row[1] for row in rows) == ["1", "2", "3"]  # measured ranks
    assert "(default)" in out
    assert "cost model's pick" in lines[header + 4]
    assert main(["autotune", "gpt2", "--tiny", "--latency", "-1"]) == 1
