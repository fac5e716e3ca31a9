"""Campaigns on Ray give the serial run's outcomes, in order, for the same seeds: a
fuzz-ir campaign and a random-module campaign on a local 2-worker cluster. A worker
that dies or hangs is that case's outcome and the campaign goes on; exclusive
(timing) campaigns run one case per node; `--ray` without Ray is a one-line error."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from forge.devtools.fuzz_models import fuzz_models
from forge.support.campaign import Campaign
from forge.tools.fuzz_ir import fuzz, fuzz_pipelines

ray = pytest.importorskip("ray", reason="the distributed extra is not installed")
ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def cluster() -> Iterator[Campaign]:
    """One local 2-CPU Ray cluster for the module (a campaign reuses a running one)."""
    campaign = Campaign(ray="", workers=2, timeout=20)
    with campaign.session():
        yield campaign


def test_fuzz_ir_on_ray_equals_serial(cluster: Campaign, tmp_path: Path) -> None:
    serial = fuzz(ROOT, 16, 7, "forge-pipeline", tmp_path / "serial", shrink=False)
    on_ray = fuzz(ROOT, 16, 7, "forge-pipeline", tmp_path / "ray", shrink=False, campaign=cluster)
    assert sum(serial.counts.values()) == 16
    assert on_ray.counts == serial.counts
    assert [o for o, _ in on_ray.failures] == [o for o, _ in serial.failures]


def test_fuzz_pipelines_on_ray_equals_serial(cluster: Campaign, tmp_path: Path) -> None:
    serial = fuzz_pipelines(20, 1, tmp_path / "serial")
    on_ray = fuzz_pipelines(20, 1, tmp_path / "ray", campaign=cluster)
    assert on_ray.counts == serial.counts
    assert on_ray.failures == serial.failures


def test_fuzz_models_on_ray_equals_serial(cluster: Campaign) -> None:
    serial = fuzz_models(3, seed=11, shrink_failures=False)
    on_ray = fuzz_models(3, seed=11, shrink_failures=False, campaign=cluster)
    assert sum(serial.counts.values()) == 3
    assert on_ray.counts == serial.counts
    assert on_ray.worst == serial.worst  # the same cases, the same numbers


def flaky(x: int) -> int:
    """Dies on 3, hangs on 5, else squares."""
    if x == 3:
        os._exit(1)
    if x == 5:
        time.sleep(120)
    return x * x


def test_crash_and_hang_are_outcomes(cluster: Campaign) -> None:
    campaign = Campaign(ray="", timeout=10)
    outcomes = list(campaign.map(flaky, list(range(7)), lambda x, why: why.split(":")[0]))
    assert outcomes == [0, 1, 4, "worker crashed", 16, "hang", 36]


def node_of(x: int) -> tuple[int, str]:
    return x, ray.get_runtime_context().get_node_id()


def test_exclusive_runs_one_case_per_node(cluster: Campaign) -> None:
    outcomes = list(cluster.map(node_of, [4, 2, 9], lambda x, why: (x, why), exclusive=True))
    assert [x for x, _ in outcomes] == [4, 2, 9]
    assert len({node for _, node in outcomes}) == 1  # one node here


def test_ray_flag_without_ray_is_one_line() -> None:
    code = (
        "import sys; sys.modules['ray'] = None\n"
        "from forge.cli import main\n"
        "sys.exit(main(['fuzz-ir', '--cases', '1', '--ray']))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "pip install -e '.[distributed]'" in lines[0]


def test_autotune_latency_on_ray(cluster: Campaign) -> None:
    """`forge autotune --latency --ray`: the configurations are measured on the cluster,
    one per node at a time, and come back in the order asked."""
    from forge.tuning.autotune import DEFAULT, measure_on

    configs = [DEFAULT, replace(DEFAULT, precision="fp32")]
    patient = Campaign(ray="", timeout=600)  # compiles; the cluster is the fixture's
    results = measure_on(patient)("gpt2", True, 8, configs, 2)
    assert [r.config for r in results] == configs
    assert all(len(r.times) == 2 and r.compile_seconds > 0 for r in results)


def test_a_failing_latency_case_is_one_line(cluster: Campaign) -> None:
    from forge.support.diagnostics import ForgeError
    from forge.tuning.autotune import DEFAULT, measure_on

    with pytest.raises(ForgeError, match=r"1 configuration\(s\) failed; .*no-such-model"):
        measure_on(Campaign(ray="", timeout=600))("no-such-model", True, 8, [DEFAULT], 1)
