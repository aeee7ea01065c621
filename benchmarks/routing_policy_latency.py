"""What the scheduler-routing MutatingAdmissionPolicy adds to each pod creation, on the
real API server.

    python benchmarks/routing_policy_latency.py [--pods 300]

Starts the local control plane (etcd, kube-apiserver) and creates two policies as
``stickypack render scheduler-routing`` writes them, both the one CEL ``JSONPatch``
expression: one without a placement (it sets the scheduler and the route annotation) and
one with a placement (``--placement``: node affinity and a toleration besides). Then it
times ``--pods`` pod creations of each kind one at a time, alternating a pod the first
policy routes, one the second routes (it carries a node affinity of its own, so the CEL
ANDs the terms) and one neither binding matches, so all see the same API server and etcd.
Every pod carries two small annotations of its own, so the policy measures them and adds
its key. Prints the p50 and p99 of each and the placement's ratio to the policy without
one, checks every routed pod got its scheduler and the route annotation (and the placed
one the toleration and both required terms), and ends with ``ratio: X`` (p50 with the
placement / p50 of a pod no policy routes).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from stickypack.core.routing import ROUTE_ANNOTATION, RoutePlacement
from stickypack.render import routing_policy_name, scheduler_routing
from stickypack.testing import ControlPlane, pod_manifest
from webhook_latency import USER_POOL_PLACEMENT, print_creation_times, required_node_affinity

#: The placed pods' own node affinity, which the policy ANDs with the route's.
OWN_AFFINITY = {"nodeAffinity": required_node_affinity("topology.kubernetes.io/zone", ["a"])}
#: Every pod's own annotations, which a routing policy measures before adding its own.
OWN_ANNOTATIONS = {"example.org/owner": "team-a", "example.org/purpose": "benchmark"}


def _pod(kind: str, n: int, labels: dict[str, str]) -> dict[str, Any]:
    pod = pod_manifest(f"{kind}-{n}", labels=labels)
    pod["metadata"]["annotations"] = dict(OWN_ANNOTATIONS)
    if kind == "placed":
        pod["spec"]["affinity"] = OWN_AFFINITY
    return pod


def _check(kind: str, pod: dict[str, Any]) -> None:
    spec = pod["spec"]
    want = {"plain": "default-scheduler", "routed": "stickypack", "placed": "stickypack-placed"}[kind]
    if spec["schedulerName"] != want:
        raise SystemExit(f"{pod['metadata']['name']}: schedulerName {spec['schedulerName']}")
    annotations = pod["metadata"].get("annotations") or {}
    route = None if kind == "plain" else routing_policy_name(want)
    if annotations != ({**OWN_ANNOTATIONS, ROUTE_ANNOTATION: route} if route else OWN_ANNOTATIONS):
        raise SystemExit(f"{pod['metadata']['name']}: annotations {annotations}")
    tolerations = {t.get("key") for t in spec.get("tolerations") or []}
    if (kind == "placed") != ("hub.jupyter.org/dedicated" in tolerations):
        raise SystemExit(f"{pod['metadata']['name']}: tolerations {sorted(map(str, tolerations))}")
    if kind == "placed":
        affinity = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        (term,) = affinity["nodeSelectorTerms"]
        keys = [e["key"] for e in term["matchExpressions"]]
        if keys != ["topology.kubernetes.io/zone", "hub.jupyter.org/node-purpose"]:
            raise SystemExit(f"{pod['metadata']['name']}: required terms {affinity}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=300, help="pods to create of each kind")
    args = parser.parse_args()

    kinds = {
        "routed": {"route": "plain"},
        "placed": {"route": "placed"},
        "plain": {"app": "web"},
    }
    docs = [
        *scheduler_routing("stickypack", kinds["routed"]),
        *scheduler_routing(
            "stickypack-placed", kinds["placed"], placement=RoutePlacement.from_dict(**USER_POOL_PLACEMENT)
        ),
    ]
    times: dict[str, list[float]] = {kind: [] for kind in kinds}
    with ControlPlane() as cp, cp.admission_policies(docs):  # returns once each policy routes a pod
        for n in range(args.pods):
            for kind, labels in kinds.items():
                pod = _pod(kind, n, labels)
                start = time.perf_counter()
                created = cp.create_pod(pod=pod)
                times[kind].append(time.perf_counter() - start)
                _check(kind, created)
    print_creation_times(times)
    placed = statistics.median(times["placed"]) / statistics.median(times["routed"])
    print(f"placement: {placed:.2f} x the p50 of the policy without one")
    print(f"ratio: {statistics.median(times['placed']) / statistics.median(times['plain']):.2f}")


if __name__ == "__main__":
    main()
