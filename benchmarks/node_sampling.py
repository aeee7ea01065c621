"""What kube-scheduler's sampling of large clusters (``percentageOfNodesToScore``) costs.

Usage: python benchmarks/node_sampling.py [--day 2019-03-05] [--scale 30] [--seed 0]
                                          [--policies z2jh,binderhub] [--jobs 2]

Replays one trace day at ``--scale`` times its rate (enough for the cluster to pass 100
nodes, where kube-scheduler starts sampling) with each policy twice: as it is (its
``percentage_of_nodes_to_score``: 0, kube-scheduler's adaptive default, for the built-in
baselines) and with every feasible node scored (100, as stickypack's rendered profiles set
it). Prints node-hours, peak nodes, build-cache hit rate and busiest-node build share of
each; last line: each policy's node-hours sampled over scored-all (a ratio in one run).
"""

from __future__ import annotations

import argparse
import dataclasses
from concurrent.futures import ProcessPoolExecutor

from trace_days import DATA

METRICS = ("node_hours", "peak_nodes", "build_cache_hit_rate", "max_node_build_share")


def run(args: tuple[str, float, int, str, int | None]) -> dict[str, float]:
    from stickypack.policies import load_builtin
    from stickypack.sim.engine import Simulation
    from stickypack.sim.traces import TraceErrors, read_launches
    from stickypack.sim.workloads import trace_workload

    path, scale, seed, name, percentage = args
    policy = load_builtin(name)
    if percentage is not None:
        policy = dataclasses.replace(policy, percentage_of_nodes_to_score=percentage)
    workload = trace_workload(read_launches([path], TraceErrors()), seed, scale)
    metrics = Simulation(policy, workload, seed=seed).run().metrics
    return {key: float(metrics[key]) for key in METRICS}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--day", default="2019-03-05")
    parser.add_argument("--scale", type=float, default=30.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--policies", default="z2jh,binderhub")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    path = str(DATA / f"events-{args.day}.jsonl.gz")
    policies = args.policies.split(",")
    runs = [(path, args.scale, args.seed, name, pct) for name in policies for pct in (None, 100)]
    with ProcessPoolExecutor(args.jobs) as pool:
        results = list(pool.map(run, runs))
    print(f"{args.day} at load {args.scale:g}, seed {args.seed}")
    print("| policy | nodes scored | node-hours | peak nodes | hit rate | busiest-node share |")
    print("|---|---|---|---|---|---|")
    ratios = []
    for i, name in enumerate(policies):
        sampled, every = results[2 * i], results[2 * i + 1]
        for label, r in (("kube-scheduler's sample (policy as is)", sampled), ("all (100)", every)):
            print(
                f"| {name} | {label} | {r['node_hours']:.1f} | {r['peak_nodes']:.0f} | "
                f"{r['build_cache_hit_rate']:.3f} | {r['max_node_build_share']:.3f} |"
            )
        ratios.append(f"{name} {sampled['node_hours'] / every['node_hours']:.3f}")
    print("node-hours sampled / all scored: " + ", ".join(ratios))


if __name__ == "__main__":
    main()
