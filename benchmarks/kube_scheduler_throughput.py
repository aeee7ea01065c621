"""How fast does the real kube-scheduler bind pods, and how fast does the simulator place them?

Usage: python benchmarks/kube_scheduler_throughput.py [--nodes 100,1000] [--pods 1000]

For each cluster size: fake nodes (8 cpu, 32 GiB) on the local control plane, `--pods` bare
pods (250m, 512Mi) created while no scheduler runs, then a kube-scheduler with the default
profile (client qps/burst 5000) is started and timed from its start (its start-up
included) until every pod is bound.
The simulator's `default` policy then places the same pods on a NodeTable of the same nodes.
Prints pods per second of each and the ratio simulator / kube-scheduler; the last line holds
all figures.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from stickypack.core import NodeTable, Pod, SchedulingContext
from stickypack.core.resources import parse_resource_list
from stickypack.policies import load_builtin
from stickypack.render import scheduler_config
from stickypack.testing.controlplane import ControlPlane, pod_manifest

NODE = {"cpu": "8", "memory": "32Gi"}
POD = {"cpu": "250m", "memory": "512Mi"}


def real_rate(cp: ControlPlane, nodes: int, pods: int) -> float:
    cp.reset()
    for i in range(nodes):
        cp.create_node(f"n{i:04d}", **NODE)
    names = [f"p{i:05d}" for i in range(pods)]
    for start in range(0, pods, 200):
        cp.create_pods([pod_manifest(n, **POD) for n in names[start : start + 200]])
    started = time.perf_counter()
    cp.start_scheduler(scheduler_config(["default-scheduler"]))  # returns when healthy
    cp.wait_bound(names, timeout=600)
    return pods / (time.perf_counter() - started)


def sim_rate(nodes: int, pods: int) -> float:
    table = NodeTable()
    alloc = parse_resource_list({**NODE, "pods": "110"})
    for i in range(nodes):
        table.upsert_node(f"n{i:04d}", alloc)
    policy = load_builtin("default")
    rng = np.random.default_rng(0)
    ctx = SchedulingContext()
    template = Pod.from_dict(pod_manifest("p", **POD))
    started = time.perf_counter()
    for i in range(pods):
        pod = Pod(
            f"p{i}",
            requests=dict(template.requests),
            nonzero_cpu=template.nonzero_cpu,
            nonzero_memory=template.nonzero_memory,
        )
        slot = policy.select(pod, table, ctx, rng)
        assert slot is not None
        table.add_pod(slot, pod)
    return pods / (time.perf_counter() - started)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", default="100,1000")
    parser.add_argument("--pods", type=int, default=1000)
    args = parser.parse_args()
    figures = []
    with ControlPlane() as cp:
        for n in (int(x) for x in args.nodes.split(",")):
            real = real_rate(cp, n, args.pods)
            sim = sim_rate(n, args.pods)
            print(
                f"{n} nodes: kube-scheduler {real:.0f} pods/s, simulator {sim:.0f} placements/s, "
                f"ratio {sim / real:.2f}"
            )
            figures.append(f"nodes={n} real={real:.0f}/s sim={sim:.0f}/s ratio={sim / real:.2f}")
    print("; ".join(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
