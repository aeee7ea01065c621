"""Does the simulator schedule like kube-scheduler? Random cases, both answers compared.

A *case* is a few nodes (sizes, zone labels, taints), pods already bound to them, and one
pod to place (requests or none, tolerations, preferred node affinity, node selector). The
real kube-scheduler of a :class:`~stickypack.testing.controlplane.ControlPlane` places the
pod; stickypack's policy scores the same case; they *agree* when the real choice is among
the policy's top-scoring nodes (kube-scheduler breaks ties at random).

Cases run in batches: every case gets its own nodes, labelled ``stickypack.io/case``, and
its pod a node selector for that label, so one scheduler places a whole batch at once and
each pod only ever sees its own case's nodes.

With ``images=True`` (:func:`random_case`, :func:`run_cases`) a case's nodes also list
images in ``status.images`` (written through the status subresource with the rest of the
status, as a kubelet reports them; kube-scheduler's cache reads ``node.Status.Images``) and
the pod runs some of them in its containers, init containers and an image volume, so
ImageLocality scores. Sizes span from under ImageLocality's 23 MiB floor to 8 GiB, its
thresholds drawn now and then. An image has one to three names (tags, a digest, or a bare
name that a pod's tagless reference, read as ``:latest``, never matches). The case's own
images (their names carry the case's label, so no other case lists them) are listed on
one or several of its nodes, a quarter of them with a different size on each node
(kube-scheduler counts on every node the size of the first node to list the name, as
``NodeTable.image_size`` does); a few shared images, the same names in every case, are
listed by any node with probability 0.4. Half the cases give every node a twin (same
size, labels, taints and bound pods), so that images decide for the packing profile too.

ImageLocality reads two cluster-wide counts: the nodes that list an image name, and all
the nodes. The real scheduler counts them over the whole batch (:func:`run_cases` runs on
a cluster with no other nodes, and waits until the scheduler's cache is empty before a
batch, so no earlier node's images linger). So :func:`run_cases` scores every case in a
table of the whole batch's nodes and bound pods (:func:`score_case` with ``batch``): the
other cases' nodes are infeasible for the pod (its node selector) but count, for the
number of nodes and for the shared images' listers. Nodes are created in the order the
table adds them, so the first node to list a name is the same in both. A case scored
alone (no ``batch``) gets its image scores wrong: use that only for cases without images.
"""

from __future__ import annotations

import copy
import math
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from stickypack.core import NodeTable, Pod, SchedulingContext, Taint
from stickypack.core.policy import Policy
from stickypack.core.quantity import int_value, milli_value
from stickypack.core.resources import parse_resource_list
from stickypack.kube.cache import node_images
from stickypack.testing.controlplane import ControlPlane, ControlPlaneError, SchedulerHandle, pod_manifest

CASE_LABEL = "stickypack.io/case"
_CPUS = ("2", "4", "8", "16")
_MEMS = ("4Gi", "8Gi", "16Gi", "32Gi", "64Gi")
_POD_CPU = (None, "100m", "250m", "500m", "1", "1500m", "2")
_POD_MEM = (None, "128Mi", "512Mi", "1Gi", "2Gi", "3Gi", "4Gi")
_MIB = 1024**2
#: Image sizes drawn now and then: ImageLocality's thresholds (23 MiB, 1000 MiB) and around.
_EDGE_SIZES = (0, 1, 23 * _MIB - 1, 23 * _MIB, 23 * _MIB + 1, 1000 * _MIB - 1, 1000 * _MIB, 2000 * _MIB)
#: Images any node of any case may list (names, size): how many nodes list one is counted
#: across the whole batch, as kube-scheduler counts it across the cluster.
_SHARED_IMAGES: tuple[tuple[tuple[str, ...], int], ...] = (
    (("reg.example/shared/notebook:2025.1", f"reg.example/shared/notebook@sha256:{'1' * 64}"), 3400 * _MIB),
    (("reg.example/shared/base:latest", "reg.example/shared/base:v2"), 700 * _MIB),
    (("reg.example/shared/tiny:1",), 9 * _MIB),
)


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
    def lists_images(self) -> bool:
        """Whether a node of the case lists images."""
        return any(n.get("images") for n in self.nodes)

    @property
    def agrees(self) -> bool:
        return self.chosen is not None and self.chosen in self.top

    def describe(self) -> str:
        lines = [f"case {self.index}: real kube-scheduler chose {self.chosen}, policy's best {self.top}"]
        for n in self.nodes:
            on = [p for p in self.bound if p["spec"]["nodeName"] == n["name"]]
            reqs = [
                {
                    **p["spec"]["containers"][0]["resources"].get("requests", {}),
                    **p["metadata"].get("labels", {}),
                }
                for p in on
            ]
            lines.append(
                f"  node {n['name']} cpu={n['cpu']} memory={n['memory']} labels={n['labels']} "
                f"taints={n['taints']} score={self.scores.get(n['name'])} pods={reqs}"
            )
            if n.get("extended") or n.get("ephemeral_storage"):
                lines.append(
                    f"    ephemeral-storage={n.get('ephemeral_storage')} extended={n.get('extended')}"
                )
            if n.get("images"):
                lines.append(f"    images={[(i['names'], i['sizeBytes']) for i in n['images']]}")
        spec = self.pod["spec"]
        lines.append(
            f"  pod requests={spec['containers'][0]['resources'].get('requests', {})} "
            f"tolerations={spec.get('tolerations')} affinity={spec.get('affinity')} "
            f"nodeSelector={spec.get('nodeSelector')} schedulerName={spec.get('schedulerName')}"
        )
        if self.lists_images:
            lines.append(f"  pod images={list(Pod.from_dict(self.pod).images)}")
        if spec.get("initContainers"):
            lines.append(f"  init containers={[c.get('resources', {}) for c in spec['initContainers']]}")
        return "\n".join(lines)


def _node_table(cases: Sequence[Case]) -> NodeTable:
    """The nodes and bound pods of ``cases``, nodes added in the order they are created."""
    table = NodeTable()
    for n in (n for case in cases for n in case.nodes):
        alloc = parse_resource_list(
            {
                "cpu": n["cpu"],
                "memory": n["memory"],
                "pods": "110",
                "ephemeral-storage": n.get("ephemeral_storage", "100Gi"),
                **n.get("extended", {}),
            }
        )
        labels = {
            "kubernetes.io/hostname": n["name"],
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            **n["labels"],
        }
        taints = [Taint.from_dict(taint_dict(t)) for t in n["taints"]]
        table.upsert_node(n["name"], alloc, labels=labels, taints=taints, images=node_images(n.get("images")))
    for raw in (raw for case in cases for raw in case.bound):
        table.add_pod(table.slot(raw["spec"]["nodeName"]), Pod.from_dict(raw))
    return table


def create_case_node(cp: ControlPlane, n: Mapping[str, Any]) -> None:
    """Create a case's node (its dict: name, cpu, memory, labels, taints and optionally
    images, ephemeral storage and extended resources) on the control plane."""
    cp.create_node(
        n["name"],
        cpu=n["cpu"],
        memory=n["memory"],
        labels=n["labels"],
        taints=n["taints"],
        images=n.get("images"),
        ephemeral_storage=n.get("ephemeral_storage", "100Gi"),
        extended=n.get("extended"),
    )


def taint_dict(spec: str) -> dict[str, str]:
    """A taint written ``key[=value]:Effect`` (a case's node) as a Kubernetes taint dict."""
    keyval, effect = spec.rsplit(":", 1)
    key, _, value = keyval.partition("=")
    return {"key": key, "value": value, "effect": effect}


def score_case(case: Case, policy: Policy, batch: Sequence[Case] = ()) -> list[str]:
    """The policy's top-scoring feasible nodes for the case (names); sets ``case.scores``.

    ``batch``: the cases whose nodes and bound pods the cluster held with this one (the case
    itself, by its index, may be among them), all in the table as the real scheduler sees
    them; only the case's own when empty."""
    table = _node_table(batch if any(c.index == case.index for c in batch) else [*batch, case])
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


def random_case(rng: random.Random, index: int, scheduler_name: str, images: bool = False) -> Case:
    """A case whose pod fits at least one node (re-drawn until it does); with ``images``,
    its nodes list images and its pod runs some (see the module's notes; drawn from a
    stream of their own, so ``rng`` draws the same cases with images or without)."""
    while True:
        case = _draw(rng, index, scheduler_name)
        table = _node_table([case])
        pod = Pod.from_dict(case.pod)
        # feasibility by the default filters only; scoring differences are what we test
        from stickypack.policies import load_builtin

        if load_builtin("default").profiles[0].feasible(pod, table, SchedulingContext()).size:
            if images:
                _add_images(case, random.Random(f"c{index}-images"))
            return case


def _image_size(rng: random.Random) -> int:
    """Bytes: log-uniform from 256 KiB to 8 GiB, or now and then a threshold of ImageLocality."""
    if rng.random() < 0.15:
        return rng.choice(_EDGE_SIZES)
    return int(math.exp(rng.uniform(math.log(256 * 1024), math.log(8 * 1024**3))))


def _add_images(case: Case, rng: random.Random) -> None:
    """Give the case's nodes images (``status.images`` entries: names unique to the case,
    and the shared ones) and its pod containers, init containers and an image volume that
    run some of them.

    Image volumes need the ``ImageVolume`` feature (on by default since Kubernetes 1.35)."""
    label = case.nodes[0]["labels"][CASE_LABEL]
    if rng.random() < 0.5:
        # every node gets a twin (size, labels, taints, bound pods): only images tell the
        # two apart, so they decide for the packing profile too, not only between ties
        for node in list(case.nodes):
            twin = {**copy.deepcopy(node), "name": f"{label}-n{len(case.nodes)}"}
            case.nodes.append(twin)
            for raw in [b for b in case.bound if b["spec"]["nodeName"] == node["name"]]:
                raw = copy.deepcopy(raw)
                raw["metadata"]["name"] = f"{label}-t{len(case.bound)}"
                raw["spec"]["nodeName"] = twin["name"]
                case.bound.append(raw)
    listed: dict[str, list[dict[str, Any]]] = {n["name"]: [] for n in case.nodes}
    refs: list[str] = []  # what a pod may run: names nodes list, and names they do not
    for shared_names, shared_size in _SHARED_IMAGES:
        refs += [*shared_names, shared_names[0].rsplit(":", 1)[0]]  # and the name without tag
        for n in case.nodes:
            if rng.random() < 0.4:
                listed[n["name"]].append({"names": list(shared_names), "sizeBytes": shared_size})
    for k in range(rng.randint(1, 4)):
        repo = rng.choice(
            [f"reg.example/{label}/app{k}", f"reg.example:5000/{label}/app{k}", f"{label}-tool{k}"]
        )
        digest = f"{repo}@sha256:{rng.getrandbits(256):064x}"
        names = [digest]
        tag = rng.choice(["v1", "3.11-slim", "latest", None])
        if tag is None:
            names.append(repo)  # a bare name: `repo` in a pod means repo:latest, never this
        else:
            names.append(f"{repo}:{tag}")
            if rng.random() < 0.3:
                names.append(f"{repo}:{'latest' if tag != 'latest' else 'stable'}")
        rng.shuffle(names)
        refs += [*names, repo]
        size = _image_size(rng)
        per_node = rng.random() < 0.25  # each node its own size (the first lister's counts)
        for n in rng.sample(case.nodes, rng.randint(1, len(case.nodes))):
            listed[n["name"]].append({"names": names, "sizeBytes": _image_size(rng) if per_node else size})
    refs.append(f"reg.example/{label}/absent:v1")
    for n in case.nodes:
        rng.shuffle(listed[n["name"]])
        n["images"] = listed[n["name"]]
    spec = case.pod["spec"]
    spec["containers"][0]["image"] = rng.choice(refs)
    spec["containers"] += [{"name": f"side{j}", "image": rng.choice(refs)} for j in range(rng.randint(0, 2))]
    init = [{"name": f"init{j}", "image": rng.choice(refs)} for j in range(rng.choice([0, 0, 1, 2]))]
    if init:
        spec["initContainers"] = init
    if rng.random() < 0.2:
        spec["volumes"] = [
            {"name": "data", "image": {"reference": rng.choice(refs), "pullPolicy": "IfNotPresent"}}
        ]


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
    policy: Policy | Callable[[Case], Policy],
    scheduler_name: str,
    cases: int,
    seed: int,
    batch: int = 25,
    settle_timeout_s: float = 30.0,
    on_case: Callable[[Case], None] | None = None,
    images: bool = False,
    draw: Callable[[random.Random, int], Case] | None = None,
    bind_timeout_s: float = 60.0,
) -> list[Case]:
    """Run ``cases`` random cases against the real scheduler serving ``scheduler_name``
    (already started on ``cp``, a cluster with no nodes or pods); returns them with the real
    choice and the policy's top, scored among the whole batch's nodes. ``images``: nodes
    list images and pods run them (:func:`random_case`). A batch's pods are created once
    the scheduler's cache is seen empty and then holding exactly the batch's nodes and
    bound pods (so a reading from before the batch cannot pass); ``ControlPlaneError``
    after ``settle_timeout_s`` seconds of either wait.

    ``draw(rng, index)``: makes each case instead of :func:`random_case` (a node dict may
    then also give ``ephemeral_storage`` and ``extended`` resources, and the pod its own
    ``schedulerName``, another profile of the same scheduler); ``policy`` may then be a
    function giving the policy that scores a case.

    A batch's pods are waited for ``bind_timeout_s`` seconds; those still unbound then have
    no ``chosen`` node (their cases do not agree), the others keep theirs."""
    rng = random.Random(seed)
    done: list[Case] = []
    handles = [h for h in cp.schedulers if scheduler_name in h.scheduler_names]
    if not handles:
        raise ValueError(f"no running scheduler serves {scheduler_name!r}")
    for start in range(0, cases, batch):
        group = [
            draw(rng, i) if draw is not None else random_case(rng, i, scheduler_name, images)
            for i in range(start, min(start + batch, cases))
        ]
        wait_scheduler_cache(cp, handles, 0, 0, settle_timeout_s)
        try:
            for case in group:
                for n in case.nodes:
                    create_case_node(cp, n)
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
                placed = cp.wait_bound(names, timeout=bind_timeout_s)
            except Exception:
                placed = {k: v for k, v in cp.placements().items() if k in set(names) and v}
            for case in group:
                case.chosen = placed.get(case.pod["metadata"]["name"])
                case.top = score_case(case, policy if isinstance(policy, Policy) else policy(case), group)
                done.append(case)
                if on_case is not None:
                    on_case(case)
        finally:  # a failed batch leaves no nodes or pods behind for the next caller
            cp.delete_all_pods()
            cp.delete_all_nodes()
    return done


def agreement(cases: list[Case]) -> float:
    return float(np.mean([c.agrees for c in cases])) if cases else 0.0


def probe_placements(
    cp: ControlPlane,
    probes: Sequence[tuple[str, dict[str, Any], set[str] | None]],
    allowed_for: Callable[[Pod], set[str]],
    placed: Callable[[str, Pod, str], None],
    timeout: float = 30.0,
) -> None:
    """Check the real kube-scheduler (running on ``cp``) against a rule of ours, probe by
    probe: each ``(name, pod manifest, expected nodes or None)`` is created in turn, and
    the scheduler must bind it to one of the nodes ``allowed_for(pod)`` names (which must
    equal the expected set when one is given), or leave it unschedulable when that names
    none. ``placed(name, pod, node)`` is called for each bound probe before the next is
    judged, so the caller records the placement in its own state. Raises AssertionError on
    a disagreement, naming the probe; returns once every probe is checked."""
    for name, raw, expected in probes:
        probe = Pod.from_dict(raw)
        allowed = allowed_for(probe)
        if expected is not None and allowed != expected:
            raise AssertionError(f"{name}: our rules allow {sorted(allowed)}, expected {sorted(expected)}")
        cp.create_pod(pod=raw)
        if not allowed:
            cp.wait_unschedulable([name], timeout=timeout)
            continue
        bound = cp.wait_bound([name], timeout=timeout)[name]
        if bound not in allowed:
            raise AssertionError(f"{name}: kube-scheduler bound it to {bound}; ours allow {sorted(allowed)}")
        placed(name, probe, bound)
