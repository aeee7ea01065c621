"""Cost of keeping the nodes' DRA readings in the extender's table (``cluster.dra``).

    python benchmarks/dra_refresh.py --nodes 1000 [--slices 4] [--repeat 5]

A :class:`~stickypack.kube.cache.ClusterCache` with DRA on holds ``--nodes`` nodes of
``--slices`` node-local ResourceSlices each (one pool per slice, 8 devices a slice), ~8
pods a node, one of which uses a ResourceClaim allocated 2 devices of the node's first
pool. Timed, best of ``--repeat``: a full refresh (every node touched, as after the first
list or a relist), then the refresh after one claim's allocation changes, after one pod
with a claim is bound, and after one slice is republished (each touches one node).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from stickypack.kube.cache import ClusterCache

DRIVER = "gpu.example.com"


def device_slice(node: str, k: int, generation: int = 1) -> dict[str, Any]:
    """Node ``node``'s ``k``-th slice: pool ``<node>-<k>`` of 8 devices."""
    devices = [{"name": f"dev-{d}"} for d in range(8)]
    pool = {"name": f"{node}-{k}", "generation": generation, "resourceSliceCount": 1}
    return {
        "metadata": {"name": f"{node}-{k}"},
        "spec": {"driver": DRIVER, "nodeName": node, "pool": pool, "devices": devices},
    }


def claim(name: str, pool: str, devices: list[str]) -> dict[str, Any]:
    results = [{"request": "r", "driver": DRIVER, "pool": pool, "device": d} for d in devices]
    return {
        "metadata": {"name": name, "namespace": "ns"},
        "status": {"allocation": {"devices": {"results": results}}},
    }


def claim_pod(name: str, node: str, claim_name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": f"u-{name}", "labels": {}},
        "spec": {
            "nodeName": node,
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}],
            "resourceClaims": [{"name": "gpus", "resourceClaimName": claim_name}],
        },
    }


def add_dra_world(cache: ClusterCache, names: list[str], slices: int) -> None:
    """Slices and claims for every node of ``names``, and one pod using a claim on each."""
    assert cache.dra is not None
    for node in names:
        for k in range(slices):
            cache.dra.slice_event("ADDED", device_slice(node, k))
        cache.dra.claim_event("ADDED", claim(f"c-{node}", f"{node}-0", ["dev-0", "dev-1"]))
        cache.pod_event("ADDED", claim_pod(f"claimer-{node}", node, f"c-{node}"))


def build(n_nodes: int, slices: int, seed: int) -> tuple[ClusterCache, list[str]]:
    rng = random.Random(seed)
    cache = ClusterCache(dra=True)
    names = [f"node-{i:05d}" for i in range(n_nodes)]
    for name in names:
        cache.node_event(
            "ADDED",
            {
                "metadata": {"name": name},
                "status": {
                    "allocatable": {"cpu": "16", "memory": "64Gi", "pods": "110"},
                    "conditions": [{"type": "Ready", "status": "True"}],
                },
            },
        )
    for i in range(n_nodes * 7):
        pod = {
            "metadata": {"name": f"p{i}", "namespace": "ns", "uid": f"u{i}", "labels": {}},
            "spec": {
                "nodeName": names[rng.randrange(n_nodes)],
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}],
            },
        }
        cache.pod_event("ADDED", pod)
    add_dra_world(cache, names, slices)
    return cache, names


def best(fn: Any, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--slices", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    cache, names = build(args.nodes, args.slices, args.seed)
    tracker = cache.dra
    assert tracker is not None

    def full() -> None:
        for node in names:
            tracker.node_added(node)  # touches the node, as a relist does
        assert tracker.refresh() == len(names)

    full_s = best(full, args.repeat)
    assert len(tracker.readings) == len(names)
    node = names[len(names) // 2]
    flip = [["dev-0", "dev-1", "dev-2"], ["dev-0"]]

    def one_claim() -> None:
        tracker.claim_event("MODIFIED", claim(f"c-{node}", f"{node}-0", flip[0]))
        flip.reverse()
        assert tracker.refresh() == 1

    serial = [0]

    def one_pod() -> None:
        serial[0] += 1
        cache.pod_event("ADDED", claim_pod(f"extra-{serial[0]}", node, f"c-{node}"))
        assert tracker.refresh() == 1

    generation = [1]

    def one_slice() -> None:
        generation[0] += 1
        tracker.slice_event("MODIFIED", device_slice(node, 1, generation[0]))
        assert tracker.refresh() == 1

    claim_s, pod_s, slice_s = (best(fn, args.repeat * 20) for fn in (one_claim, one_pod, one_slice))
    print(f"nodes: {len(names)}, slices a node: {args.slices}")
    print(f"full refresh: {full_s * 1e3:.1f} ms ({full_s / len(names) * 1e6:.0f} us a node)")
    print(f"one claim changed: {claim_s * 1e6:.0f} us")
    print(f"one pod bound: {pod_s * 1e6:.0f} us")
    print(f"one slice republished: {slice_s * 1e6:.0f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
