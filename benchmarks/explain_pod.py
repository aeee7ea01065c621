"""What kube-scheduler's InterPodAffinity and PodTopologySpread scores cost ``stickypack
inspect --pod`` on a large cluster.

    python benchmarks/explain_pod.py [--nodes 1000] [--pods-per-node 20] [--with-terms 0.1]
        [--repeat 5] [--seed 0]

Builds a node table of ``--nodes`` nodes (8 cpus, 32 GiB, a hostname label and one of 3
zones) with ``--pods-per-node`` pods on each, each pod one of 50 Deployments (an ``app``
label); a ``--with-terms`` share of them carry a preferred pod anti-affinity term by
hostname against their own app (the terms the InterPodAffinity score reads on the bound
pods). Then times :func:`~stickypack.core.explain.explain_placement` with the ``default``
policy's profile and the pods on the nodes (``PodsOnNodes``, as ``inspect --pod`` gives
them) for four pods: a bare pod no term selects and no Service selects (the baseline: both
scores are skipped), a pod with a preferred pod affinity term by zone, a pod with a
``ScheduleAnyway`` zone and hostname constraint, and a pod with a default spread selector
(the system default constraints, as for a Service's pod). Each time is the best of
``--repeat`` runs, on a fresh ``PodsOnNodes`` each (its counts are built per pod kind, as
one ``inspect --pod`` builds them). Prints each time and its ratio to the baseline, and ends
with ``ratio: X`` (the slowest of the three against the baseline).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from stickypack.core.explain import explain_placement
from stickypack.core.framework import SchedulingContext
from stickypack.core.labels import HOSTNAME_LABEL
from stickypack.core.nodetable import NodeTable
from stickypack.core.pod import Pod
from stickypack.core.podaffinity import pods_on_table_nodes
from stickypack.core.routing import LabelSelector
from stickypack.policies import load_builtin

GI = 1024**3
ZONE = "topology.kubernetes.io/zone"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


def _pod(name: str, labels: dict[str, str], **spec: object) -> Pod:
    requests = {"cpu": "100m", "memory": "256Mi"}
    raw = {
        "metadata": {"name": name, "namespace": "default", "labels": labels},
        "spec": {"containers": [{"name": "c", "resources": {"requests": requests}}], **spec},
    }
    return Pod.from_dict(raw)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods-per-node", type=int, default=20)
    parser.add_argument("--with-terms", type=float, default=0.1)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    table = NodeTable()
    bound: list[tuple[str, Pod]] = []
    n = 0
    for i in range(args.nodes):
        name = f"node-{i:05d}"
        labels = {HOSTNAME_LABEL: name, ZONE: f"z{i % 3}"}
        row = table.upsert_node(name, {"cpu": 8000, "memory": 32 * GI, "pods": 110}, labels=labels)
        for _ in range(args.pods_per_node):
            app = f"app-{rng.randrange(50)}"
            spec: dict = {}
            if rng.random() < args.with_terms:
                term = {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": HOSTNAME_LABEL}
                spec["affinity"] = {"podAntiAffinity": {PREFERRED: [{"weight": 10, "podAffinityTerm": term}]}}
            pod = _pod(f"p{n}", {"app": app}, **spec)
            n += 1
            table.add_pod(row, pod)
            bound.append((name, pod))
    profile = load_builtin("default").profiles[0]
    near = {"labelSelector": {"matchLabels": {"app": "app-7"}}, "topologyKey": ZONE}
    spread = [
        {"maxSkew": skew, "topologyKey": key, "whenUnsatisfiable": "ScheduleAnyway",
         "labelSelector": {"matchLabels": {"app": "app-3"}}}
        for key, skew in ((ZONE, 1), (HOSTNAME_LABEL, 2))
    ]  # fmt: skip
    service_pod = _pod("svc", {"app": "app-5"})
    service_pod.default_spread_selector = LabelSelector({"app": "app-5"}, ())
    affinity = {"podAffinity": {PREFERRED: [{"weight": 50, "podAffinityTerm": near}]}}
    probes = {
        "bare pod (baseline)": _pod("bare", {"app": "new"}),
        "preferred pod affinity": _pod("near", {"app": "new"}, affinity=affinity),
        "ScheduleAnyway constraints": _pod("spread", {"app": "app-3"}, topologySpreadConstraints=spread),
        "system default spreading": service_pod,
    }
    with_terms = sum(bool(p.preferred_pod_anti_affinity) for _, p in bound)
    print(f"{args.nodes} nodes, {n} pods, {with_terms} with a preferred term")
    times: dict[str, float] = {}
    for label, pod in probes.items():
        best = float("inf")
        for _ in range(args.repeat):
            on_nodes = pods_on_table_nodes(table, bound)
            started = time.perf_counter()
            explanation = explain_placement(profile, pod, table, SchedulingContext(), on_nodes=on_nodes)
            best = min(best, time.perf_counter() - started)
        times[label] = best
        scored = sorted(explanation.weights)
        print(f"{label}: {best * 1000:.1f} ms (scorers: {', '.join(scored)})")
    base = times["bare pod (baseline)"]
    ratios = {label: t / base for label, t in times.items() if label != "bare pod (baseline)"}
    for label, r in ratios.items():
        print(f"{label}: {r:.2f} x the baseline")
    print(f"ratio: {max(ratios.values()):.2f}")


if __name__ == "__main__":
    main()
