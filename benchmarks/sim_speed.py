"""Simulator speed: one trace day, the four policies, as `stickypack simulate` runs it.

Usage: python benchmarks/sim_speed.py [--day FILE] [--load-scale X] [--repeat N]

Prints each policy's wall time, then on the last line the total wall seconds (median of
the repeats, reading the trace included) and placements per second. Policies run in
parallel, one process per core, as `stickypack simulate` runs them; `--jobs 1` runs them
one after the other. The baseline in the same run is a pure-Python
loop over the same number of placements doing nothing but a dict update, so the ratio
says how much each placement costs compared with Python's own overhead on this machine.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from stickypack.policies import DEFAULT_COMPARISON, load_builtin
from stickypack.sim.runner import compare
from stickypack.sim.traces import TraceErrors, read_launches
from stickypack.sim.workloads import trace_workload

DEFAULT_DAY = (
    Path(__file__).resolve().parents[1].parent / "shared/data/mybinder-events/events-2019-03-04.jsonl.gz"
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--day", type=Path, default=DEFAULT_DAY)
    parser.add_argument("--load-scale", type=float, default=1.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=None, help="worker processes (default: one per core)")
    args = parser.parse_args()
    walls, placements = [], 0
    for _ in range(args.repeat):
        started = time.perf_counter()
        launches = read_launches([args.day], TraceErrors())
        workload = trace_workload(launches, 0, args.load_scale)
        policies = [load_builtin(n) for n in DEFAULT_COMPARISON]
        cmp = compare(lambda w=workload: w, policies, seed=0, load_scale=args.load_scale, jobs=args.jobs)
        walls.append(time.perf_counter() - started)
        placements = sum(int(r.metrics["pods_scheduled"]) for r in cmp.runs)
        for run in cmp.runs:
            print(
                f"  {run.policy:11s} {run.metrics['wall_s']:.2f} s  {int(run.metrics['pods_scheduled'])} pods"
            )
    wall = statistics.median(walls)
    base_started = time.perf_counter()
    d: dict[int, int] = {}
    for i in range(placements):
        d[i & 1023] = i
    base = time.perf_counter() - base_started
    print(f"baseline python loop: {base:.4f} s for {placements} iterations; cost ratio {wall / base:.0f}x")
    print(
        f"day {args.day.name} x{args.load_scale:g}: wall_s: {wall:.2f} "
        f"placements_per_s: {placements / wall:.0f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
