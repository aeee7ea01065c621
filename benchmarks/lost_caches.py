"""Where lost build caches come from: per trace day, the nodes whose deletion lost them.

Usage: python benchmarks/lost_caches.py [--scale 1] [--seed 0] [--policy stickypack] [--short-h 4]

For each trace day, simulate one policy and attribute every build counted in
``build_cache_lost_share`` to the node its repo had last been built on (gone by then). Prints
per day the nodes the run used, how many were deleted after living under ``--short-h``
hours, the lost builds and how many of them short-lived nodes lost. Under packing the
newest nodes are the first to empty: a node added for an hour's peak takes builds and goes
within hours, and its caches with it. Last line: the share of all lost builds that nodes
living under ``--short-h`` hours lost.
"""

from __future__ import annotations

import argparse
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from trace_days import DATA


def run_day(args: tuple[str, float, int, str, float]) -> tuple[str, float, int, int, int, int]:
    """One day: (day, cache-hit rate, nodes, short-lived nodes, lost builds, lost by short-lived)."""
    from stickypack.policies import load_builtin
    from stickypack.sim.engine import Simulation
    from stickypack.sim.traces import TraceErrors, read_launches
    from stickypack.sim.workloads import trace_workload

    path, scale, seed, policy, short_h = args
    workload = trace_workload(read_launches([path], TraceErrors()), seed, scale)
    result = Simulation(load_builtin(policy), workload, seed=seed).run()
    short = [
        n for n in result.nodes if n.deleted_at is not None and n.deleted_at - n.ready_at < short_h * 3600
    ]
    lost = sum(n.caches_lost for n in result.nodes)
    return (
        Path(path).name.removeprefix("events-").removesuffix(".jsonl.gz"),
        result.metrics["build_cache_hit_rate"],
        len(result.nodes),
        len(short),
        lost,
        sum(n.caches_lost for n in short),
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--policy", default="stickypack")
    parser.add_argument("--short-h", type=float, default=4.0)
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    days = sorted(str(p) for p in DATA.glob("events-*.jsonl.gz"))
    jobs = [(d, args.scale, args.seed, args.policy, args.short_h) for d in days]
    with ProcessPoolExecutor(args.jobs) as pool:
        rows = list(pool.map(run_day, jobs))
    hours = f"{args.short_h:g} h"
    print(f"{args.policy}, load {args.scale:g}, seed {args.seed}; short-lived: deleted within {hours}")
    print(f"{'day':10s} {'hits':>6s} {'nodes':>5s} {'short':>5s} {'lost':>5s} {'by short':>8s}")
    for day, hits, nodes, short, lost, by_short in rows:
        print(f"{day:10s} {hits:6.3f} {nodes:5d} {short:5d} {lost:5d} {by_short:8d}")
    lost = sum(r[4] for r in rows)
    by_short = sum(r[5] for r in rows)
    share = by_short / max(lost, 1)
    print(f"lost builds: {lost}; lost by nodes living under {hours}: {by_short} ({share:.0%})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
