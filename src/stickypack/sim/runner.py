"""Compare policies on one workload: the simulator's front door.

Policies run in parallel worker processes (one per core by default): each run is
independent and seeded, so the results are the same as a sequential run's. Asked for
progress, the workers send it through a queue as they run, which the parent passes on.
"""

from __future__ import annotations

import copy
import multiprocessing
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, replace
from multiprocessing.queues import SimpleQueue

from stickypack.core.framework import Profile
from stickypack.core.policy import Policy
from stickypack.sim.engine import RunResult, Simulation
from stickypack.sim.model import AutoscalerConfig, CacheConfig
from stickypack.sim.report import Comparison, PolicyRun
from stickypack.sim.workloads import Workload


@dataclass(frozen=True)
class _Job:
    """One comparison's runs: run ``i`` simulates ``policies[i]`` on a fresh ``factory()``
    workload with ``seed`` and the models; a forked worker sends its progress into
    ``reports`` (None: none asked for, or the runs are in this process)."""

    policies: Sequence[Policy]
    factory: Callable[[], Workload]
    seed: int
    autoscaler: AutoscalerConfig | None
    cache: CacheConfig | None
    reports: SimpleQueue[tuple[int, float]] | None = None


# What forked workers read: set just before the pool starts (fork copies it), so closures
# and policies need not be pickled; None outside :func:`compare`.
_JOB: _Job | None = None
#: How often (seconds) the parent looks for the workers' progress while they run.
PROGRESS_POLL_S = 0.1
#: A worker reports its run's progress when it has grown this much (a bar's percent): at
#: most 101 reports of 29 bytes a run, so the queue's pipe (64 KiB on Linux) holds some twenty
#: runs' reports, and a worker does not wait on a parent that stopped reading on an error.
PROGRESS_STEP = 0.01


class _Reporter:
    """A worker's progress callback: ``(index, fraction)`` into the queue, a step at a time.
    ``put`` writes to the pipe before it returns (no feeder thread), so all of a run's reports
    are there before its result is."""

    def __init__(self, index: int, reports: SimpleQueue[tuple[int, float]]) -> None:
        self.index, self.reports, self.last = index, reports, -1.0

    def __call__(self, fraction: float) -> None:
        if fraction >= self.last + PROGRESS_STEP:
            self.last = fraction
            self.reports.put((self.index, fraction))


def _run_one(index: int) -> RunResult:
    """Run ``index`` of :data:`_JOB`, in a worker forked by :func:`compare`."""
    job = _JOB
    assert job is not None, "_run_one runs in a worker forked by compare"
    report = _Reporter(index, job.reports) if job.reports is not None else None
    return _simulate(job, index, job.factory(), report)


def _simulate(
    job: _Job, index: int, workload: Workload, progress: Callable[[float], None] | None
) -> RunResult:
    started = time.perf_counter()
    # a fresh copy of the plugins for each run, as a forked worker has: a plugin that keeps
    # state between decisions (one of --plugins) must not carry it into the next seed's run
    policy = copy.deepcopy(job.policies[index])
    simulation = Simulation(
        policy, workload, seed=job.seed, autoscaler=job.autoscaler, cache=job.cache, progress=progress
    )
    result = simulation.run()
    result.metrics["wall_s"] = time.perf_counter() - started
    return result


def placement_cost(policy: Policy) -> int:
    """A proxy for a policy's cost per placement: the plugins (filters, weighted scorers,
    mutators) of the profile that places most pods, the one matching every pod (user pods
    and workers outnumber build pods many times over), else its largest profile."""

    def plugins(profile: Profile) -> int:
        scorers = sum(1 for s in profile.scorers if s.weight)
        return len(profile.filters) + scorers + len(profile.mutators)

    catch_all = [p for p in policy.profiles if not p.match_labels]
    return max((plugins(p) for p in (catch_all or policy.profiles)), default=0)


def compare(
    workload_factory: Callable[[], Workload],
    policies: Sequence[Policy],
    *,
    seed: int,
    load_scale: float = 1.0,
    autoscaler: AutoscalerConfig | None = None,
    cache: CacheConfig | None = None,
    progress: Callable[[str, float], None] | None = None,
    jobs: int | None = None,
) -> Comparison:
    """Run every policy on a fresh copy of the workload (pods are mutable) with one seed.

    ``jobs``: worker processes (default: one per core, at most one per policy); with 1, or
    where processes cannot be forked, the runs are made one after the other in this
    process. ``progress(policy name, fraction done)`` is called in this process as each run
    goes on, as the simulation reports it (at most every 600 simulated seconds; from a
    worker through a queue, at every percent), and at 1.0 once it is over. Without
    ``progress`` the workers send nothing.
    """
    first = workload_factory()
    cmp = Comparison(first.name, seed, load_scale)
    job = _Job(policies, workload_factory, seed, autoscaler, cache)
    jobs = min(jobs or os.cpu_count() or 1, len(policies))
    if jobs <= 1 or "fork" not in multiprocessing.get_all_start_methods():
        for i, policy in enumerate(policies):
            workload = first if i == 0 else workload_factory()
            report = (lambda f, name=policy.name: progress(name, f)) if progress else None
            result = _simulate(job, i, workload, report)
            if progress is not None:  # the simulation may end between two of its reports
                progress(policy.name, 1.0)
            cmp.runs.append(PolicyRun(policy.name, result.metrics, result.series))
        return cmp
    global _JOB
    fork = multiprocessing.get_context("fork")
    reports: SimpleQueue[tuple[int, float]] | None = fork.SimpleQueue() if progress is not None else None
    _JOB = replace(job, reports=reports)
    try:
        with ProcessPoolExecutor(jobs, mp_context=fork) as pool:
            # Costliest first, as a list scheduler should, so the longest run does not start
            # last; results are still reported in the order asked.
            order = sorted(range(len(policies)), key=lambda i: -placement_cost(policies[i]))
            submitted = {i: pool.submit(_run_one, i) for i in order}
            futures = [submitted[i] for i in range(len(policies))]
            if progress is not None and reports is not None:
                _follow(futures, reports, [p.name for p in policies], progress)
            for policy, future in zip(policies, futures, strict=True):
                result = future.result()
                cmp.runs.append(PolicyRun(policy.name, result.metrics, result.series))
    finally:
        _JOB = None
        if reports is not None:
            reports.close()
    return cmp


def _follow(
    futures: Sequence[Future[RunResult]],
    reports: SimpleQueue[tuple[int, float]],
    names: Sequence[str],
    progress: Callable[[str, float], None],
) -> None:
    """Pass the workers' reports on to ``progress`` as they come, and 1.0 for each run as it
    ends, until every run has ended (or one has failed: its error is the caller's to raise)."""
    pending = set(range(len(futures)))
    while pending:
        wait([futures[i] for i in pending], timeout=PROGRESS_POLL_S, return_when=FIRST_COMPLETED)
        ended = {i for i in pending if futures[i].done()}  # before reading: their reports are in
        while not reports.empty():
            index, fraction = reports.get()
            if index in pending:  # a late report would move a full bar back
                progress(names[index], fraction)
        for i in sorted(ended):
            if futures[i].exception() is not None:
                return
            pending.discard(i)
            progress(names[i], 1.0)
