"""Does the simulator schedule like kube-scheduler? Random cases, both answers compared.

A *case* is a few nodes (sizes, zone labels, taints), pods already bound to them, and one
pod to place (requests or none, tolerations, preferred node affinity, node selector). The
real kube-scheduler of a :class:`~stickypack.testing.controlplane.ControlPlane` places the
pod; stickypack's policy scores the same case; they *agree* when the real choice is among
the policy's top-scoring nodes (kube-scheduler breaks ties at random).

Cases run in batches: every case gets its own nodes, labelled ``stickypack.io/case``, and
its pod a node selector for that label, so one scheduler places a whole batch at once and
each pod only ever sees its own case's nodes.
"""

from __future__ import annotations

import copy
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from stickypack.core import NodeTable, Pod, SchedulingContext, Taint
from stickypack.core.policy import Policy
from stickypack.core.quantity import int_value, milli_value
from stickypack.core.resources import parse_resource_list
from stickypack.testing.controlplane import ControlPlane, ControlPlaneError, SchedulerHandle, pod_manifest

CASE_LABEL = "stickypack.io/case"
_CPUS = ("2", "4", "8", "16")
_MEMS = ("4Gi", "8Gi", "16Gi", "32Gi", "64Gi")
_POD_CPU = (None, "100m", "250m", "500m", "1", "1500m", "2")
_POD_MEM = (None, "128Mi", "512Mi", "1Gi", "2Gi", "3Gi", "4Gi")


@dataclass
class Case:
    """One random placement problem; ``nodes`` are create_node kwargs."""

    index: int
    nodes: list[dict[str, Any]]
    bound: list[dict[str, Any]]
    pod: dict[str, Any]
    chosen: str | None = None
    top: list[str] = field(default_factory=list)
    scores: dict[str, int] = field(default_factory=dict)

    @property
    def agrees(self) -> bool:
        return self.chosen is not None and self.chosen in self.top

    def describe(self) -> str:
        lines = [f"case {self.index}: real kube-scheduler chose {self.chosen}, policy's best {self.top}"]
        for n in self.nodes:
            on = [p for p in self.bound if p["spec"]["nodeName"] == n["name"]]
            reqs = [p["spec"]["containers"][0]["resources"].get("requests", {}) for p in on]
            lines.append(
                f"  node {n['name']} cpu={n['cpu']} memory={n['memory']} labels={n['labels']} "
                f"taints={n['taints']} score={self.scores.get(n['name'])} pods={reqs}"
            )
        spec = self.pod["spec"]
        lines.append(
            f"  pod requests={spec['containers'][0]['resources'].get('requests', {})} "
            f"tolerations={spec.get('tolerations')} affinity={spec.get('affinity')} "
            f"nodeSelector={spec.get('nodeSelector')}"
        )
        return "\n".join(lines)


def _node_table(case: Case) -> NodeTable:
    table = NodeTable()
    for n in case.nodes:
        alloc = parse_resource_list(
            {"cpu": n["cpu"], "memory": n["memory"], "pods": "110", "ephemeral-storage": "100Gi"}
        )
        labels = {
            "kubernetes.io/hostname": n["name"],
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            **n["labels"],
        }
        taints = [Taint.from_dict(_taint_dict(t)) for t in n["taints"]]
        table.upsert_node(n["name"], alloc, labels=labels, taints=taints)
    for raw in case.bound:
        table.add_pod(table.slot(raw["spec"]["nodeName"]), Pod.from_dict(raw))
    return table


def _taint_dict(spec: str) -> dict[str, str]:
    keyval, effect = spec.rsplit(":", 1)
    key, _, value = keyval.partition("=")
    return {"key": key, "value": value, "effect": effect}


def score_case(case: Case, policy: Policy) -> list[str]:
    """The policy's top-scoring feasible nodes for the case (names); sets ``case.scores``."""
    table = _node_table(case)
    pod = Pod.from_dict(case.pod)
    ctx = SchedulingContext()
    profile = policy.profile_for(pod)
    idx = profile.feasible(pod, table, ctx)
    if idx.size == 0:
        return []
    totals = profile.scores(pod, table, idx, ctx)
    case.scores = dict(zip(table.node_names(idx), (int(t) for t in totals), strict=True))
    if idx.size == 1:
        return table.node_names(idx)
    return table.node_names(idx[totals == totals.max()])


def random_case(rng: random.Random, index: int, scheduler_name: str) -> Case:
    """A case whose pod fits at least one node (re-drawn until it does)."""
    while True:
        case = _draw(rng, index, scheduler_name)
        table = _node_table(case)
        pod = Pod.from_dict(case.pod)
        # feasibility by the default filters only; scoring differences are what we test
        from stickypack.policies import load_builtin

        if load_builtin("default").profiles[0].feasible(pod, table, SchedulingContext()).size:
            return case


def _draw(rng: random.Random, index: int, scheduler_name: str) -> Case:
    label = f"c{index}"
    nodes: list[dict[str, Any]] = []
    for j in range(rng.randint(2, 7)):
        taints = []
        if rng.random() < 0.25:
            taints.append(rng.choice(["soft1=x:PreferNoSchedule", "soft2:PreferNoSchedule"]))
        if rng.random() < 0.1:
            taints.append(
                "soft2:PreferNoSchedule"
                if taints and taints[0].startswith("soft1")
                else "soft1=x:PreferNoSchedule"
            )
        if rng.random() < 0.12:
            taints.append("dedicated=gpu:NoSchedule")
        nodes.append(
            {
                "name": f"{label}-n{j}",
                "cpu": rng.choice(_CPUS),
                "memory": rng.choice(_MEMS),
                "labels": {CASE_LABEL: label, "zone": rng.choice("abc")},
                "taints": taints,
            }
        )
    table = NodeTable()
    for n in nodes:
        table.upsert_node(
            n["name"], parse_resource_list({"cpu": n["cpu"], "memory": n["memory"], "pods": "110"})
        )
    bound = []
    # its own stream, so the cases drawn before bound pods had pod-level resources stay
    side = random.Random(f"{label}-pod-level")
    for k in range(rng.randint(0, 4 * len(nodes))):
        n = rng.choice(nodes)
        cpu, mem = rng.choice(_POD_CPU), rng.choice(_POD_MEM)
        raw = pod_manifest(f"{label}-b{k}", cpu=cpu, memory=mem)
        raw["spec"]["nodeName"] = n["name"]
        if side.random() < 0.25:
            # pod-level requests on a bound pod: its node counts them (cpu, memory or both)
            level = {}
            if side.random() < 0.7:
                level["cpu"] = f"{milli_value(cpu or '0') + side.choice([100, 250, 1000])}m"
            if side.random() < 0.7:
                level["memory"] = str(int_value(mem or "0") + side.choice([64, 256, 1024]) * 1024**2)
            if level:
                raw["spec"]["resources"] = {"requests": level}
        p = Pod.from_dict(raw)
        i = table.slot(n["name"])
        if (table.requested[i, :2] + table.pod_vector(p)[:2] > table.alloc[i, :2]).any():
            continue  # keep bound pods within allocatable, as a kubelet would
        table.add_pod(i, p)
        bound.append(raw)
    raw = pod_manifest(
        f"{label}-pod", cpu=rng.choice(_POD_CPU), memory=rng.choice(_POD_MEM), scheduler_name=scheduler_name
    )
    spec = raw["spec"]
    spec["nodeSelector"] = {CASE_LABEL: label}
    if rng.random() < 0.1:
        spec["nodeSelector"]["zone"] = rng.choice("abc")
    tolerations = []
    if rng.random() < 0.3:
        tolerations.append(
            {"key": "soft1", "operator": "Exists", "effect": rng.choice(["PreferNoSchedule", ""])}
        )
    if rng.random() < 0.2:
        tolerations.append({"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"})
    if tolerations:
        spec["tolerations"] = tolerations
    if rng.random() < 0.35:
        terms = [
            {
                "weight": rng.randint(1, 100),
                "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": [z]}]},
            }
            for z in rng.sample("abc", rng.randint(1, 2))
        ]
        spec["affinity"] = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": terms}}
    if rng.random() < 0.25:
        # pod-level resources (PodLevelResources, on by default since 1.34): at least the
        # containers' requests, as the API server checks; they replace those for scheduling
        container = spec["containers"][0].get("resources", {}).get("requests", {})
        pod_cpu_m = milli_value(container.get("cpu", "0")) + rng.choice([0, 250, 1000])
        pod_memory = int_value(container.get("memory", "0")) + rng.choice([0, 256, 1024]) * 1024**2
        if pod_cpu_m and pod_memory:
            spec["resources"] = {"requests": {"cpu": f"{pod_cpu_m}m", "memory": str(pod_memory)}}
    return Case(index, nodes, bound, raw)


def wait_scheduler_cache(
    cp: ControlPlane, handles: list[SchedulerHandle], nodes: int, pods: int, timeout_s: float
) -> None:
    """Wait until the cache of every scheduler in ``handles`` holds ``nodes`` nodes and
    ``pods`` pods (``scheduler_cache_size``, which kube-scheduler refreshes about once a
    second); ``ControlPlaneError`` with the last sizes seen after ``timeout_s`` seconds."""
    deadline = time.monotonic() + timeout_s
    want = {"nodes": nodes, "pods": pods}
    while True:
        sizes = [cp.scheduler_cache_sizes(h) for h in handles]
        if all(all(size.get(k) == v for k, v in want.items()) for size in sizes):
            return
        if time.monotonic() > deadline:
            raise ControlPlaneError(
                f"kube-scheduler's cache did not reach {want} in {timeout_s:.0f} s (last: {sizes})"
            )
        time.sleep(0.1)


def run_cases(
    cp: ControlPlane,
    policy: Policy,
    scheduler_name: str,
    cases: int,
    seed: int,
    batch: int = 25,
    settle_timeout_s: float = 30.0,
    on_case: Callable[[Case], None] | None = None,
) -> list[Case]:
    """Run ``cases`` random cases against the real scheduler serving ``scheduler_name``
    (already started on ``cp``, a cluster with no nodes or pods); returns them with the real
    choice and the policy's top. A batch's pods are created once the scheduler's cache is
    seen empty and then holding exactly the batch's nodes and bound pods (so a reading from
    before the batch cannot pass); ``ControlPlaneError`` after ``settle_timeout_s`` seconds
    of either wait."""
    rng = random.Random(seed)
    done: list[Case] = []
    handles = [h for h in cp.schedulers if scheduler_name in h.scheduler_names]
    if not handles:
        raise ValueError(f"no running scheduler serves {scheduler_name!r}")
    for start in range(0, cases, batch):
        group = [random_case(rng, i, scheduler_name) for i in range(start, min(start + batch, cases))]
        wait_scheduler_cache(cp, handles, 0, 0, settle_timeout_s)
        try:
            for case in group:
                for n in case.nodes:
                    cp.create_node(
                        n["name"], cpu=n["cpu"], memory=n["memory"], labels=n["labels"], taints=n["taints"]
                    )
            nodes = sum(len(case.nodes) for case in group)
            # the nodes first: a bound pod seen before its node makes a placeholder entry
            # that the cache's node count includes
            wait_scheduler_cache(cp, handles, nodes, 0, settle_timeout_s)
            bound = [b for case in group for b in case.bound]
            cp.create_pods(bound)
            wait_scheduler_cache(cp, handles, nodes, len(bound), settle_timeout_s)
            cp.create_pods([copy.deepcopy(case.pod) for case in group])
            names = [case.pod["metadata"]["name"] for case in group]
            try:
                placed = cp.wait_bound(names, timeout=60.0)
            except Exception:
                placed = {k: v for k, v in cp.placements().items() if k in set(names) and v}
            for case in group:
                case.chosen = placed.get(case.pod["metadata"]["name"])
                case.top = score_case(case, policy)
                done.append(case)
                if on_case is not None:
                    on_case(case)
        finally:  # a failed batch leaves no nodes or pods behind for the next caller
            cp.delete_all_pods()
            cp.delete_all_nodes()
    return done


def agreement(cases: list[Case]) -> float:
    return float(np.mean([c.agrees for c in cases])) if cases else 0.0
