"""The lowest busiest-node build share any build placement could reach on a run's nodes.

Usage: python benchmarks/share_bound.py [--scale 1] [--seed 0] [--policies z2jh,binderhub,stickypack]

For each trace day and policy, run the simulation, then take its node timeline (each
node from Ready to deletion) and its build start times, and compute the smallest ``C`` such
that every build could have been given to a node alive at its start with no node getting
more than ``C`` builds: a greedy that gives each build, in time order, to the alive node
with room that is deleted first is optimal for points-to-intervals assignment, and a
bisection finds ``C``. ``C / builds`` is a lower bound on ``max_node_build_share`` for any
placement of the builds on those nodes (builds also keep nodes alive, so this is a bound
for the nodes as they were). Note what reaches it: builds on the nodes that go away first,
the opposite of what keeps caches warm. Last line: days where stickypack's own nodes could
not reach binderhub's share whatever the build placement.
"""

from __future__ import annotations

import argparse
import heapq
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from trace_days import DATA


def feasible(intervals: list[tuple[float, float]], times: list[float], cap: int) -> bool:
    """Can every build time go to an interval containing it, at most ``cap`` per interval?"""
    ivs = sorted(intervals)
    k = 0
    alive: list[tuple[float, int]] = []  # (end, interval) of intervals started so far
    left: dict[int, int] = {}
    for t in times:
        while k < len(ivs) and ivs[k][0] <= t:
            heapq.heappush(alive, (ivs[k][1], k))
            left[k] = cap
            k += 1
        while alive and (alive[0][0] <= t or left[alive[0][1]] == 0):
            heapq.heappop(alive)
        if not alive:
            return False
        left[alive[0][1]] -= 1
    return True


def min_share(intervals: list[tuple[float, float]], times: list[float]) -> float:
    times = sorted(times)
    if not times:
        return 0.0
    lo, hi = 1, len(times)
    while lo < hi:
        mid = (lo + hi) // 2
        if feasible(intervals, times, mid):
            hi = mid
        else:
            lo = mid + 1
    return lo / len(times)


def run(args: tuple[str, float, int, str]) -> tuple[str, str, float, float]:
    from stickypack.policies import load_builtin
    from stickypack.sim.engine import Simulation
    from stickypack.sim.traces import TraceErrors, read_launches
    from stickypack.sim.workloads import trace_workload

    path, scale, seed, policy = args
    sim = Simulation(
        load_builtin(policy), trace_workload(read_launches([path], TraceErrors()), seed, scale), seed=seed
    )
    starts: list[float] = []
    bind = sim._bind

    def recording_bind(sp, slot):  # type: ignore[no-untyped-def]
        if sp.pod.build_repo is not None and sp.launch is not None:
            starts.append(sim.now)
        bind(sp, slot)

    sim._bind = recording_bind  # type: ignore[method-assign]
    result = sim.run()
    intervals = [
        (n.ready_at, n.deleted_at if n.deleted_at is not None else float("inf")) for n in result.nodes
    ]
    day = Path(path).name.removeprefix("events-").removesuffix(".jsonl.gz")
    return day, policy, result.metrics["max_node_build_share"], min_share(intervals, starts)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--policies", default="z2jh,binderhub,stickypack")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    policies = args.policies.split(",")
    days = sorted(str(p) for p in DATA.glob("events-*.jsonl.gz"))
    jobs = [(d, args.scale, args.seed, p) for d in days for p in policies]
    with ProcessPoolExecutor(args.jobs) as pool:
        rows = list(pool.map(run, jobs))
    got = {(day, pol): (share, bound) for day, pol, share, bound in rows}
    print("| day | " + " | ".join(f"{p} share (bound)" for p in policies) + " |")
    print("|---|" + "---|" * len(policies))
    infeasible = []
    for day in sorted({d for d, _ in got}):
        print(
            f"| {day} | "
            + " | ".join(f"{got[day, p][0]:.3f} ({got[day, p][1]:.3f})" for p in policies)
            + " |"
        )
        both = "stickypack" in policies and "binderhub" in policies
        if both and got[day, "stickypack"][1] > got[day, "binderhub"][0]:
            infeasible.append(day)
    print(
        "days where no build placement on stickypack's nodes reaches binderhub's share:",
        len(infeasible),
        infeasible,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
