"""Campaigns: many independent cases (fuzz mutants, random models, calibration points),
run one after another in this process or as tasks on a Ray cluster.

Both ways give the same outcomes in the same order for the same cases, because a case
is a picklable function applied to a picklable item, and the item list is drawn on the
driver before anything runs. Ray adds what one process cannot: a worker that crashes,
runs out of memory or outlives its timeout ends as that case's outcome (through the
caller's `crashed` function) and the campaign goes on.

    forge fuzz-models --cases 500 --ray            # a local Ray cluster on this machine
    forge fuzz-ir --cases 2000 --ray ray://head:10001

Timing-sensitive campaigns (calibration, autotune latency) pass `exclusive=True`: one
case per node at a time, on an actor that reserves all of that node's CPUs.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from forge.support import flags
from forge.support.diagnostics import ForgeError, one_line

T = TypeVar("T")
R = TypeVar("R")

ENV_PREFIXES = ("FORGE_", "NNFACTORY_", "OMP_", "HF_", "TRANSFORMERS_")
"""Environment variables a Ray worker inherits from the driver (locally Ray starts
workers with its own environment)."""

MISSING_RAY = "--ray needs Ray: pip install -e '.[distributed]' (or pip install 'ray[default]')"


def add_ray_arguments(parser: argparse.ArgumentParser, exclusive: bool = False) -> None:
    """`--ray [ADDRESS]` and `--ray-workers N`, the same on every campaign command."""
    what = "one case per node at a time (timing)" if exclusive else "cases as Ray tasks"
    parser.add_argument(
        "--ray",
        nargs="?",
        const="",
        default=None,
        metavar="ADDRESS",
        help=f"run {what} on a Ray cluster at ADDRESS, or on a local one started here",
    )
    parser.add_argument(
        "--ray-workers",
        type=flags.count,
        default=None,
        metavar="N",
        help="CPUs of the local Ray cluster (default: all cores)",
    )


@dataclass(frozen=True)
class Campaign:
    """Where the cases run: `ray=None` in this process, `""` on a local Ray cluster
    started for the campaign, otherwise on the cluster at that address."""

    ray: str | None = None
    workers: int | None = None
    timeout: float | None = None
    """Seconds a case may run on Ray before it is cancelled (its outcome: a hang)."""

    @classmethod
    def from_args(cls, ns: argparse.Namespace, timeout: float | None = None) -> Campaign:
        return cls(getattr(ns, "ray", None), getattr(ns, "ray_workers", None), timeout)

    @property
    def distributed(self) -> bool:
        return self.ray is not None

    def describe(self, exclusive: bool = False) -> str:
        if not self.distributed:
            return "serial, in this process"
        where = f"Ray cluster {self.ray}" if self.ray else "a local Ray cluster"
        how = "one case per node at a time" if exclusive else "one Ray task per case"
        return f"{where}, {how}"

    def session(self) -> _RaySession:
        """A Ray connection kept open across several `map` calls (`with c.session():`);
        each map otherwise connects, and starts a local cluster, on its own."""
        return _RaySession(self)

    def map(
        self,
        function: Callable[[T], R],
        items: Sequence[T],
        crashed: Callable[[T, str], R],
        exclusive: bool = False,
    ) -> Iterator[R]:
        """`function(item)` for every item, yielded in item order. `function` must catch
        its own errors (so the serial run and the Ray run agree); `crashed(item, why)`
        is the outcome of a case whose worker died, ran out of memory or timed out."""
        if not self.distributed:
            for item in items:
                yield function(item)
            return
        with _RaySession(self) as session:
            if exclusive:
                yield from session.map_exclusive(function, items, crashed)
            else:
                yield from session.map_tasks(function, items, crashed)


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ForgeError(MISSING_RAY) from None
    return ray


class _RaySession:
    """A connection to a Ray cluster for one `Campaign.map`; starts (and stops) a local
    cluster when the campaign has no address."""

    def __init__(self, campaign: Campaign):
        self.campaign = campaign
        self.ray = _import_ray()
        self.started = False

    def __enter__(self) -> _RaySession:
        ray = self.ray
        env = {k: v for k, v in os.environ.items() if k.startswith(ENV_PREFIXES)}
        options: dict[str, Any] = {"log_to_driver": False, "logging_level": "ERROR"}
        if self.campaign.ray:
            options["address"] = self.campaign.ray
        else:
            # Local workers run this interpreter: give them this process's import path.
            env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
            options["num_cpus"] = self.campaign.workers or os.cpu_count() or 1
            options["include_dashboard"] = False
        options["runtime_env"] = {"env_vars": env}
        if not ray.is_initialized():
            try:
                ray.init(**options)
            except Exception as e:
                where = self.campaign.ray or "a local cluster"
                raise ForgeError(f"cannot start Ray on {where}: {one_line(str(e))}") from e
            self.started = True
        return self

    def __exit__(self, *exc: object) -> None:
        if self.started:
            self.ray.shutdown()

    def _outcome(self, ref: Any, item: Any, crashed: Callable[[Any, str], Any]) -> Any:
        """The value behind `ref`, or `crashed(item, why)` when its worker failed."""
        ray = self.ray
        try:
            return ray.get(ref, timeout=self.campaign.timeout)
        except ray.exceptions.GetTimeoutError:
            ray.cancel(ref, force=True)
            return crashed(item, f"hang: no result within {self.campaign.timeout:g} s")
        except ray.exceptions.OutOfMemoryError as e:
            return crashed(item, f"out of memory: {one_line(str(e))[:200]}")
        except ray.exceptions.RayTaskError as e:
            cause = e.cause if isinstance(e.cause, BaseException) else e
            why = f"{type(cause).__name__}: {one_line(str(cause))[:200]}"
            return crashed(item, f"case raised: {why}")
        except ray.exceptions.RayError as e:
            return crashed(item, f"worker crashed: {type(e).__name__}: {one_line(str(e))[:200]}")

    def map_tasks(
        self, function: Callable[[T], R], items: Sequence[T], crashed: Callable[[T, str], R]
    ) -> Iterator[R]:
        """A task per case; at most a few per CPU in flight so a long campaign's results
        do not pile up in the object store."""
        remote = self.ray.remote(max_retries=0, num_cpus=1)(_call)
        window = 4 * max(1, int(self.ray.cluster_resources().get("CPU", 1)))
        pending: list[Any] = []
        submitted = 0
        for index, item in enumerate(items):
            while submitted < len(items) and submitted < index + window:
                pending.append(remote.remote(function, items[submitted]))
                submitted += 1
            yield self._outcome(pending[index], item, crashed)
            pending[index] = None

    def map_exclusive(
        self, function: Callable[[T], R], items: Sequence[T], crashed: Callable[[T, str], R]
    ) -> Iterator[R]:
        """One actor per alive node holding all its CPUs, one case on it at a time."""
        ray = self.ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        nodes = [n for n in ray.nodes() if n.get("Alive")]
        runners = []
        for node in nodes:
            cpus = node.get("Resources", {}).get("CPU", 1)
            strategy = NodeAffinitySchedulingStrategy(node["NodeID"], soft=False)
            actor = ray.remote(num_cpus=cpus, max_restarts=-1)(_Runner)
            runners.append(actor.options(scheduling_strategy=strategy).remote())
        busy: dict[Any, tuple[int, Any]] = {}
        done: dict[int, R] = {}
        next_item, next_yield = 0, 0
        free = list(runners)
        while next_yield < len(items):
            while free and next_item < len(items):
                runner = free.pop()
                busy[runner.run.remote(function, items[next_item])] = (next_item, runner)
                next_item += 1
            if next_yield in done:
                yield done.pop(next_yield)
                next_yield += 1
                continue
            ready, _ = ray.wait(list(busy), num_returns=1, timeout=self.campaign.timeout)
            if not ready:
                # Every busy case started before this wait: all of them outlived the timeout.
                for index, runner in busy.values():
                    ray.kill(runner, no_restart=False)
                    done[index] = crashed(
                        items[index], f"hang: no result within {self.campaign.timeout:g} s"
                    )
                    free.append(runner)  # max_restarts=-1: Ray restarts the actor
                busy.clear()
                continue
            index, runner = busy.pop(ready[0])
            done[index] = self._outcome(ready[0], items[index], crashed)
            free.append(runner)


def _call(function: Callable[[T], R], item: T) -> R:
    """The task body: `function` travels as an argument, so partials work too."""
    return function(item)


class _Runner:
    """The actor of an exclusive campaign: runs one case at a time on its node."""

    def run(self, function: Callable[[T], R], item: T) -> R:
        return function(item)
