"""What node-aware retirement saves when an adaptive Dask cluster shrinks.

Usage: python benchmarks/dask_retirement.py [--seeds 0-4] [--keep 10,30,50] [--policy z2jh]

The ``dask-adapt`` scenario (100 workers, a trim to ``keep``, three rounds), simulated with
one placement policy (``--policy``) twice: with distributed's own retirement (blind to
nodes: a random choice) and with ``node-aware`` retirement (``core.retirement``, what the
``stickypack.dask`` plugin does). Both runs of a seed draw the same arrivals and the same
tie-breaks, so the difference is the retirement alone. Prints, per ``keep``, the mean
node-hours and final node count of each over the seeds and their ratio. Last line: the
node-hours ratio (node-aware / distributed) for each ``keep``.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys


def main() -> int:
    from stickypack.cli import UsageError, parse_seeds
    from stickypack.policies import load_builtin
    from stickypack.sim.engine import Simulation
    from stickypack.sim.workloads import dask_adapt

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0-4", help="as simulate --seeds: 0-4, 0,3,7")
    parser.add_argument("--keep", default="10,30,50")
    parser.add_argument("--policy", default="z2jh")
    args = parser.parse_args()
    try:
        seeds = parse_seeds(args.seeds)
    except UsageError as exc:
        parser.error(str(exc))
    keeps = [int(k) for k in args.keep.split(",")]
    base = load_builtin(args.policy)
    variants = {
        "distributed": dataclasses.replace(base, dask_retirement="distributed"),
        "node-aware": dataclasses.replace(base, dask_retirement="node-aware"),
    }
    ratios = []
    print(f"dask-adapt, policy {args.policy}, seeds {args.seeds}: mean over seeds")
    print("| keep | distributed node-h | node-aware node-h | ratio | final nodes distributed | node-aware |")
    print("|---|---|---|---|---|---|")
    for keep in keeps:
        hours: dict[str, list[float]] = {name: [] for name in variants}
        final: dict[str, list[int]] = {name: [] for name in variants}
        for seed in seeds:
            for name, policy in variants.items():
                result = Simulation(policy, dask_adapt(seed, keep=keep), seed=seed).run()
                hours[name].append(result.metrics["node_hours"])
                final[name].append(result.metrics["final_nodes"])
        mean = {name: statistics.fmean(values) for name, values in hours.items()}
        ratio = mean["node-aware"] / mean["distributed"]
        ratios.append(ratio)
        print(
            f"| {keep} | {mean['distributed']:.1f} | {mean['node-aware']:.1f} | {ratio:.3f} "
            f"| {statistics.fmean(final['distributed']):.1f} | {statistics.fmean(final['node-aware']):.1f} |"
        )
    pairs = ", ".join(f"keep {k}: {r:.3f}" for k, r in zip(keeps, ratios, strict=True))
    print(f"node-aware / distributed node-hours: {pairs}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
