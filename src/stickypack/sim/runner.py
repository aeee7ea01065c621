"""Compare policies on one workload: the simulator's front door."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from stickypack.core.policy import Policy
from stickypack.sim.engine import Simulation
from stickypack.sim.model import AutoscalerConfig, CacheConfig
from stickypack.sim.report import Comparison, PolicyRun
from stickypack.sim.workloads import Workload


def compare(
    workload_factory: Callable[[], Workload],
    policies: Sequence[Policy],
    *,
    seed: int,
    load_scale: float = 1.0,
    autoscaler: AutoscalerConfig | None = None,
    cache: CacheConfig | None = None,
    progress: Callable[[str, float], None] | None = None,
) -> Comparison:
    """Run every policy on a fresh copy of the workload (pods are mutable) with one seed."""
    first = workload_factory()
    cmp = Comparison(first.name, seed, load_scale)
    for i, policy in enumerate(policies):
        workload = first if i == 0 else workload_factory()
        report = (lambda f, name=policy.name: progress(name, f)) if progress else None
        started = time.perf_counter()
        result = Simulation(
            policy, workload, seed=seed, autoscaler=autoscaler, cache=cache, progress=report
        ).run()
        result.metrics["wall_s"] = time.perf_counter() - started
        cmp.runs.append(PolicyRun(policy.name, result.metrics, result.series))
    return cmp
