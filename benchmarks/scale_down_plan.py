"""What the scale-down simulation adds to ``stickypack inspect`` on a large cluster.

    python benchmarks/scale_down_plan.py [--nodes 1000] [--pods-per-node 20] [--seed 0] [--node-selector]
        [--anti-affinity] [--zone-affinity] [--spread] [--volumes] [--host-port] [--dra [--allocator]]
        [--budgets] [--digest]

Builds a node table of ``--nodes`` nodes (8 cpus, 32 GiB) with ``--pods-per-node`` pods on
each on average, half the nodes busy (bare user pods, pinned) and half quiet (a few
replicated pods each, nothing pinning them), then times the node report
(:func:`~stickypack.core.explain.node_report`, what ``inspect`` printed before the
simulation) and :func:`~stickypack.core.drain.plan_scale_down` over the quiet nodes with
kube-scheduler's filters. ``--node-selector``: every node labelled and every pod selecting
the label (as z2jh's user pods select user nodes), so NodeAffinity's filter, a loop over
the nodes in Python, runs for every pod placed. ``--anti-affinity``: every node has its
hostname label and each replicated pod is one of 50 Deployments whose replicas keep apart
(required anti-affinity by hostname), so the inter-pod check
(:class:`~stickypack.core.podaffinity.PodsOnNodes`) runs for every pod placed.
``--zone-affinity``: every node has a zone label (one of 3) and every replicated pod
requires affinity by zone to the one pod labelled ``role=db`` (on the first node), so each
placement reads the pods of a whole zone.
``--spread``: every node has a zone label (one of 3) and each replicated pod is one of 50
Deployments spread over the zones (a ``DoNotSchedule`` constraint, ``maxSkew`` 1000, so it
filters little while its counts are kept and checked for every pod placed). ``--volumes``:
every node has a zone label and each replicated pod a claim bound to a volume with node
affinity to its node's zone (the plan given the claims, as ``inspect`` gives them), so
VolumeBinding's filter, a loop over the nodes in Python, runs for those pods.
``--host-port``: every pod carries four labels (as a Deployment's do) and the first one binds
a host port (as a node exporter's DaemonSet pod does), so the plan keeps the pods on the
nodes (:class:`~stickypack.core.podaffinity.PodsOnNodes`) though no pod has affinity terms:
what that costs pods without them. ``--dra``: every node publishes a node-local ResourceSlice
of 8 devices, and every replicated pod and every fifth bare pod holds one of its node's
devices through a ResourceClaim, so the plan (given
:class:`~stickypack.core.dra.DraDevices`, as ``inspect --dra`` gives it) releases and
allocates again a device for every pod it moves: counted, as without DeviceClasses; with
``--allocator`` by kube-scheduler's allocator (each claim requests one device of a
DeviceClass selecting the driver by CEL), as ``inspect --dra`` does. ``--budgets``: each replicated pod is one
of 50 Deployments (an ``app`` label), each with a PodDisruptionBudget allowing 20
disruptions, so the plan spends them node by node and, once they are spent, holds the
later candidates whose pods they cover. Prints both
times, how many quiet nodes the plan finds removable and how many have no room, and ends
with ``ratio: X`` (plan / node report). ``--digest``: then a ``digest:`` line, a SHA-256 of
the node report and the plan (every field), to tell that two versions of the code give the
same answers on a cluster shape (run this file from each checkout).
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from stickypack.core.dra import DraDevices
from stickypack.core.draalloc import DraAllocator
from stickypack.core.drain import plan_scale_down
from stickypack.core.explain import DisruptionBudget, ScaleDownRules, node_report
from stickypack.core.labels import HOSTNAME_LABEL
from stickypack.core.nodetable import NodeTable
from stickypack.core.pod import Pod
from stickypack.core.routing import LabelSelector
from stickypack.core.volumes import claim_volumes
from stickypack.dracel import compile_selector
from stickypack.policies import load_builtin

GI = 1024**3
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
ZONE = "topology.kubernetes.io/zone"
DRIVER = "gpu.example.com"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods-per-node", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--node-selector", action="store_true")
    parser.add_argument("--anti-affinity", action="store_true")
    parser.add_argument("--zone-affinity", action="store_true")
    parser.add_argument("--spread", action="store_true")
    parser.add_argument("--volumes", action="store_true")
    parser.add_argument("--host-port", action="store_true")
    parser.add_argument("--dra", action="store_true")
    parser.add_argument("--allocator", action="store_true")
    parser.add_argument("--budgets", action="store_true")
    parser.add_argument("--digest", action="store_true")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    table = NodeTable()
    pods_by_node: dict[str, list[Pod]] = {}
    owner = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u", "controller": True}]
    claims: list[dict] = []
    pvs: list[dict] = []
    slices: list[dict] = []
    resource_claims: list[dict] = []
    n = 0
    for i in range(args.nodes):
        name = f"node-{i:05d}"
        labels = {"purpose": "user"} if args.node_selector else {}
        if args.anti_affinity:
            labels[HOSTNAME_LABEL] = name
        if args.spread or args.volumes or args.zone_affinity:
            labels[ZONE] = f"z{i % 3}"
        row = table.upsert_node(name, {"cpu": 8000, "memory": 32 * GI, "pods": 110}, labels=labels)
        busy = i % 2 == 0
        count = args.pods_per_node if busy else rng.randint(1, 4)
        if args.dra:
            slices.append(
                {
                    "metadata": {"name": f"{name}-gpus"},
                    "spec": {
                        "nodeName": name,
                        "driver": DRIVER,
                        "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
                        "devices": [{"name": f"gpu-{d}"} for d in range(8)],
                    },
                }
            )
        held = 0  # devices of this node its pods' claims hold
        for k in range(count):
            cpu = rng.choice([100, 200, 300]) if busy else rng.choice([200, 500, 1000])
            meta: dict = {"name": f"p{n}", "namespace": "default"}
            if not busy:
                meta["ownerReferences"] = owner
            requests = {"cpu": f"{cpu}m", "memory": "512Mi"}
            spec: dict = {"containers": [{"name": "c", "resources": {"requests": requests}}]}
            if args.node_selector:
                spec["nodeSelector"] = {"purpose": "user"}
            if args.anti_affinity and not busy:
                app = f"app-{rng.randrange(50)}"
                meta["labels"] = {"app": app}
                term = {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": HOSTNAME_LABEL}
                spec["affinity"] = {"podAntiAffinity": {REQUIRED: [term]}}
            if args.zone_affinity and n == 0:
                meta["labels"] = {"role": "db"}
            if args.zone_affinity and not busy:
                term = {"labelSelector": {"matchLabels": {"role": "db"}}, "topologyKey": ZONE}
                spec["affinity"] = {"podAffinity": {REQUIRED: [term]}}
            if args.spread and not busy:
                app = f"app-{rng.randrange(50)}"
                meta["labels"] = {"app": app}
                spec["topologySpreadConstraints"] = [
                    {
                        "maxSkew": 1000,
                        "topologyKey": ZONE,
                        "whenUnsatisfiable": "DoNotSchedule",
                        "labelSelector": {"matchLabels": {"app": app}},
                    }
                ]
            if args.volumes and not busy:
                spec["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": f"data-{n}"}}]
                claims.append(
                    {
                        "metadata": {"name": f"data-{n}", "namespace": "default"},
                        "spec": {"volumeName": f"pv-{n}"},
                    }
                )
                terms = [{"matchExpressions": [{"key": ZONE, "operator": "In", "values": [labels[ZONE]]}]}]
                pvs.append(
                    {
                        "metadata": {"name": f"pv-{n}"},
                        "spec": {"nodeAffinity": {"required": {"nodeSelectorTerms": terms}}},
                    }
                )
            if args.host_port:
                meta.setdefault("labels", {}).update(
                    {"app.kubernetes.io/name": f"a{n % 40}", "pod-template-hash": f"h{n % 97}", "tier": "t"}
                )
                meta["labels"].setdefault("release", "r")
                if n == 0:
                    spec["containers"][0]["ports"] = [{"containerPort": 9100, "hostPort": 9100}]
            if args.dra and (not busy or k % 5 == 0) and held < 8:
                spec["resourceClaims"] = [{"name": "gpu", "resourceClaimName": f"gpu-{n}"}]
                result = {"request": "gpu", "driver": DRIVER, "pool": name, "device": f"gpu-{held}"}
                request = {"name": "gpu", "exactly": {"deviceClassName": "gpu", "count": 1}}
                resource_claims.append(
                    {
                        "metadata": {"name": f"gpu-{n}", "namespace": "default"},
                        "spec": {"devices": {"requests": [request]}},
                        "status": {"allocation": {"devices": {"results": [result]}}},
                    }
                )
                held += 1
            if args.budgets and not busy:
                meta.setdefault("labels", {}).setdefault("app", f"app-{n % 50}")  # the same workload
            pod = Pod.from_dict({"metadata": meta, "spec": spec})
            n += 1
            table.add_pod(row, pod)
            pods_by_node.setdefault(name, []).append(pod)
    budgets = tuple(
        DisruptionBudget("default", f"app-{b}", LabelSelector({"app": f"app-{b}"}), 20)
        for b in range(50 if args.budgets else 0)
    )
    rules = ScaleDownRules(budgets=budgets)
    started = time.perf_counter()
    reports = node_report(table, pods_by_node, rules)
    report_s = time.perf_counter() - started
    candidates = [r.node for r in sorted(reports, key=lambda r: (r.utilization, r.node)) if not r.pinning]
    filters = load_builtin("default").profiles[0].filters
    started = time.perf_counter()
    known = claim_volumes(claims, pvs) if args.volumes else None
    allocator = None
    if args.allocator:
        selector = {"cel": {"expression": f'device.driver == "{DRIVER}"'}}
        classes = {"gpu": {"metadata": {"name": "gpu"}, "spec": {"selectors": [selector]}}}
        allocator = DraAllocator(slices, resource_claims, classes, compile_selector)
    devices = DraDevices.read(slices, resource_claims, pods_by_node, allocator) if args.dra else None
    plan = plan_scale_down(table, pods_by_node, candidates, filters, rules, claim_volumes=known, dra=devices)
    plan_s = time.perf_counter() - started
    print(f"{args.nodes} nodes, {n} pods, {len(candidates)} candidates")
    print(f"node report: {report_s:.3f} s")
    held = f", {len(plan.blocked)} held by budgets" if args.budgets else ""
    found = f"{len(plan.removable)} removable, {len(plan.no_room)} no room{held}"
    print(f"scale-down plan: {plan_s:.3f} s ({found})")
    print(f"ratio: {plan_s / report_s:.2f}")
    if args.digest:
        answers = ([dataclasses.asdict(r) for r in reports], dataclasses.asdict(plan))
        text = json.dumps(answers, sort_keys=True, default=repr)
        print(f"digest: {hashlib.sha256(text.encode()).hexdigest()}")


if __name__ == "__main__":
    main()
