"""``stickypack inspect``: the pure explanations (core.explain) and the command on the real
control plane: nodes as the cluster-autoscaler sees them, and a pod's placement explained
node by node, checked against where the real kube-scheduler binds it."""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import random
import re
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from kubernetes_asyncio import client

from stickypack.cli import main
from stickypack.core import Taint
from stickypack.core.drain import plan_scale_down
from stickypack.core.explain import (
    BudgetIndex,
    DisruptionBudget,
    ScaleDownRules,
    explain_placement,
    node_report,
    pin_reason,
    pin_reason_with,
    pins_node,
)
from stickypack.core.framework import FilterPlugin, Profile, SchedulingContext, ScorePlugin, WeightedScorer
from stickypack.core.nodetable import NodeTable
from stickypack.core.plugins import utilization_and_threshold
from stickypack.core.pod import Pod
from stickypack.policies import load_builtin
from stickypack.render import scheduler_config
from stickypack.testing import ControlPlane, pod_manifest

GI = 1024**3


def _table(nodes: dict[str, tuple[int, int]]) -> NodeTable:
    """Nodes of (millicores, GiB)."""
    table = NodeTable()
    for name, (cpu_m, mem_gi) in nodes.items():
        table.upsert_node(name, {"cpu": cpu_m, "memory": mem_gi * GI, "pods": 110})
    return table


#: The apiVersion of each built-in controller kind (any other: a custom resource's).
API_VERSIONS = {
    "ReplicationController": "v1",
    "ReplicaSet": "apps/v1",
    "StatefulSet": "apps/v1",
    "DaemonSet": "apps/v1",
    "Job": "batch/v1",
}


def _pod(
    name: str,
    cpu: str,
    memory: str,
    owner: str | None = None,
    controller: bool = True,
    api_version: str | None = None,
    **annotations: str,
) -> Pod:
    raw = pod_manifest(name, cpu=cpu, memory=memory)
    raw["metadata"]["annotations"] = annotations
    if owner:
        version = api_version or API_VERSIONS.get(owner, "example.com/v1")
        raw["metadata"]["ownerReferences"] = [
            {"apiVersion": version, "kind": owner, "name": "o", "uid": "u", "controller": controller}
        ]
    return Pod.from_dict(raw)


def _with_priority(pod: Pod, priority: int | None, name: str | None = None) -> Pod:
    return dataclasses.replace(pod, priority=priority, name=name or pod.name)


def test_nominated_pods_of_equal_or_higher_priority_filter_a_node_but_do_not_score() -> None:
    """kube-scheduler's ``RunFilterPluginsWithNominatedPods``: a node with pending pods
    nominated to it of a priority at least the pod's is filtered with them added first
    (``addGENominatedPods``), lower ones and the pod itself are not counted, and scores
    are of the nodes without them. Hand-computed: a 4-core node ``a`` with a 3-core pod
    nominated leaves 1 core, so a 2-core pod does not fit there; ``b`` (4 cores, 1 used)
    fits it; without the nomination LeastAllocated (``default``) prefers the empty ``a``."""
    table = _table({"a": (4000, 16), "b": (4000, 16)})
    table.add_pod(table.index["b"], _pod("used", "1", "1Gi"))
    profile = load_builtin("default").profiles[0]
    new = _with_priority(_pod("new", "2", "1Gi"), 10)
    ctx = SchedulingContext()
    assert explain_placement(profile, new, table, ctx).best == ["a"]
    before = (table.requested.copy(), table.nonzero.copy(), table.build_starts.copy())
    for priority in (10, 11, 1000):
        preemptor = _with_priority(_pod("preemptor", "3", "1Gi"), priority)
        explanation = explain_placement(profile, new, table, ctx, {"a": [preemptor]})
        verdicts = {v.node: v for v in explanation.verdicts}
        assert (explanation.best, verdicts["a"].filtered_by) == (["b"], "NodeResourcesFit"), priority
        assert verdicts["a"].with_nominated and not verdicts["b"].with_nominated
        # b's scores are as without the nomination (only b is left, so compare b's own)
        alone = {v.node: v for v in explain_placement(profile, new, table, ctx).verdicts}
        assert verdicts["b"].scores == alone["b"].scores
    # lower priority, a missing priority under a positive one, the pod itself: not counted
    for nominated in (
        _with_priority(_pod("low", "3", "1Gi"), 9),
        _with_priority(_pod("unset", "3", "1Gi"), None),
        _with_priority(_pod("new", "3", "1Gi"), 10),
    ):
        assert explain_placement(profile, new, table, ctx, {"a": [nominated]}).best == ["a"], nominated.name
    # a missing priority is 0 on both sides: counted against a pod of priority 0 or none
    unset = _with_priority(_pod("unset", "3", "1Gi"), None)
    for priority in (0, None):
        pod = _with_priority(new, priority)
        assert explain_placement(profile, pod, table, ctx, {"a": [unset]}).best == ["b"], priority
    # two nominated pods that fit only together: 1 + 1 cores leave 2, the pod fits; 1.5 + 1 do not
    small = [_with_priority(_pod(f"s{k}", "1", "1Gi"), 10) for k in range(2)]
    assert explain_placement(profile, new, table, ctx, {"a": small}).best == ["a"]
    bigger = [_with_priority(_pod("s0", "1500m", "1Gi"), 10), small[1]]
    assert explain_placement(profile, new, table, ctx, {"a": bigger}).best == ["b"]
    # a node not in the table is no error; the table is left as it was, build starts too
    build = _with_priority(_pod("build", "1", "1Gi", **{"binder-repo": "r"}), 10)
    assert build.build_repo == "r"
    assert explain_placement(profile, new, table, ctx, {"gone": [build], "a": [build]}).best == ["a"]
    after = (table.requested, table.nonzero, table.build_starts)
    assert all(np.array_equal(x, y) for x, y in zip(before, after, strict=True))


def test_nominated_pods_count_for_the_inter_pod_filters_too() -> None:
    """kube-scheduler adds a node's nominated pods to its NodeInfo (their host ports) and to
    InterPodAffinity's and PodTopologySpread's PreFilter state (``AddPod``): a nominated pod
    holding host port 8080 on ``a`` keeps a pod wanting it off ``a`` (NodePorts), one the pod's
    anti-affinity selects keeps it off too (InterPodAffinity); a lower-priority one does
    not; the pods on the nodes are left as they were."""
    from stickypack.core.podaffinity import pods_on_table_nodes

    table = NodeTable()
    for name in ("a", "b"):
        allocatable = {"cpu": 4000, "memory": 16 * GI, "pods": 110}
        table.upsert_node(name, allocatable, labels={"kubernetes.io/hostname": name})
    table.add_pod(table.index["b"], _pod("used", "1", "1Gi"))
    on_nodes = pods_on_table_nodes(table, [("b", _pod("used", "1", "1Gi"))])
    profile = load_builtin("default").profiles[0]

    def with_port(name: str, priority: int, **labels: str) -> Pod:
        raw = pod_manifest(name, cpu="100m", memory="100Mi", labels=labels)
        raw["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 8080}]
        raw["spec"]["priority"] = priority
        return Pod.from_dict(raw)

    new = with_port("new", 5)
    assert explain_placement(profile, new, table, SchedulingContext(), {}, on_nodes).best == ["a"]
    for priority, filtered_by in ((5, "NodePorts"), (4, None)):
        waiting = {"a": [with_port("waiting", priority)]}
        explanation = explain_placement(profile, new, table, SchedulingContext(), waiting, on_nodes)
        assert {v.node: v.filtered_by for v in explanation.verdicts}["a"] == filtered_by, priority
    raw = pod_manifest("picky", cpu="100m", memory="100Mi")
    raw["spec"]["priority"] = 5
    term = {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}
    raw["spec"]["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    picky = Pod.from_dict(raw)
    web = Pod.from_dict(pod_manifest("web", cpu="100m", memory="100Mi", labels={"app": "web"}))
    waiting = {"a": [_with_priority(web, 9)]}
    explanation = explain_placement(profile, picky, table, SchedulingContext(), waiting, on_nodes)
    assert {v.node: v.filtered_by for v in explanation.verdicts} == {"a": "InterPodAffinity", "b": None}
    assert {row: [p.name for p in pods] for row, pods in on_nodes.pods.items() if pods} == {1: ["used"]}
    assert on_nodes.failing_filter(new)(table.index["a"]) is None  # the nominated pods are gone again


def test_nominated_pods_count_for_the_inter_pod_filters_as_their_prefilter_state_takes_them() -> None:
    """kube-scheduler adds a node's nominated pods to a PreFilter state made without them:
    InterPodAffinity's PreFilter returns Skip for a pod without pod (anti-)affinity terms
    when no bound pod's anti-affinity selects it, and then neither its ``AddPod`` nor its
    Filter runs, so a nominated pod whose anti-affinity selects the pod does not keep it
    off ``a`` (once a bound pod's does, on ``b``, it does); PodTopologySpread's ``AddPod``
    counts a nominated pod being deleted (``updateWithPod`` does not ask), which its
    PreFilter would not count bound: two such pods on ``a`` make its skew 2 + 1 - 1."""
    from stickypack.core.podaffinity import pods_on_table_nodes

    hostname = "kubernetes.io/hostname"
    table = NodeTable()
    for name in ("a", "b"):
        table.upsert_node(name, {"cpu": 4000, "memory": 16 * GI, "pods": 110}, labels={hostname: name})
    profile = load_builtin("default").profiles[0]
    ctx = SchedulingContext()

    def pod(name: str, labels: dict[str, str], **spec: object) -> Pod:
        raw = pod_manifest(name, cpu="100m", memory="100Mi", labels=labels)
        raw["spec"].update(spec, priority=5)
        return Pod.from_dict(raw)

    term = {"labelSelector": {"matchLabels": {"role": "new"}}, "topologyKey": hostname}
    guard = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    new = pod("new", {"role": "new"})
    waiting = {"a": [pod("waiting", {}, affinity=guard)]}
    on_nodes = pods_on_table_nodes(table, [])
    explanation = explain_placement(profile, new, table, ctx, waiting, on_nodes)
    assert {v.node: v.filtered_by for v in explanation.verdicts} == {"a": None, "b": None}
    on_nodes = pods_on_table_nodes(table, [("b", pod("guard", {}, affinity=guard))])
    explanation = explain_placement(profile, new, table, ctx, waiting, on_nodes)
    assert {v.node: v.filtered_by for v in explanation.verdicts} == {
        "a": "InterPodAffinity",
        "b": "InterPodAffinity",
    }

    constraint = {"maxSkew": 1, "topologyKey": hostname, "whenUnsatisfiable": "DoNotSchedule",
                  "labelSelector": {"matchLabels": {"app": "s"}}}  # fmt: skip
    spread = pod("spread", {"app": "s"}, topologySpreadConstraints=[constraint])
    on_nodes = pods_on_table_nodes(table, [("b", pod("s-b", {"app": "s"}))])
    going = [dataclasses.replace(pod(f"s-{k}", {"app": "s"}), deleted=1.0) for k in range(2)]
    explanation = explain_placement(profile, spread, table, ctx, {"a": going}, on_nodes)
    assert {v.node: v.filtered_by for v in explanation.verdicts} == {
        "a": "PodTopologySpread",  # with them: a 2, b 1
        "b": "PodTopologySpread",  # without: a 0, b 1 + 1
    }
    assert on_nodes.failing_filter(spread)(table.index["a"]) is None  # the pods are gone again


class _RoomFor(FilterPlugin):
    """Not one of kube-scheduler's filters (stickypack's own run in the extender, which
    kube-scheduler asks without adding nominated pods): passes a node with ``cpu_m``
    millicores unrequested."""

    name = "RoomFor"

    def __init__(self, cpu_m: int) -> None:
        self.cpu_m = cpu_m

    def filter(self, pod: Pod, table: NodeTable, idx: np.ndarray, ctx: SchedulingContext) -> np.ndarray:
        return (table.alloc[idx, 0] - table.requested[idx, 0]) >= self.cpu_m


def test_a_node_two_filters_reject_is_named_by_the_one_kube_scheduler_runs_first() -> None:
    """kube-scheduler's filters in its order (TaintToleration before NodeResourcesFit), the
    extender's own after all of them, whatever the profile's order: ``a`` (4 cores, tainted)
    is too small for a 5-core pod and tainted, ``b`` only too small; ``RoomFor(4500)``, listed
    first, rejects both too."""
    table = NodeTable()
    table.upsert_node(
        "a", {"cpu": 4000, "memory": 16 * GI, "pods": 110}, taints=[Taint("k", "v", "NoSchedule")]
    )
    table.upsert_node("b", {"cpu": 4000, "memory": 16 * GI, "pods": 110})
    fit, _, taints = (load_builtin("default").profiles[0].filters[k] for k in (1, 2, 3))
    assert (fit.name, taints.name) == ("NodeResourcesFit", "TaintToleration")
    profile = Profile("p", [_RoomFor(4500), fit, taints], [])
    explanation = explain_placement(profile, _pod("big", "5", "1Gi"), table, SchedulingContext())
    assert {v.node: v.filtered_by for v in explanation.verdicts} == {
        "a": "TaintToleration",
        "b": "NodeResourcesFit",
    }
    # the extender's filter is named only where no kube-scheduler filter rejects the node
    explanation = explain_placement(profile, _pod("small", "1", "1Gi"), table, SchedulingContext())
    assert {v.node: v.filtered_by for v in explanation.verdicts} == {"a": "TaintToleration", "b": "RoomFor"}


def test_nominated_pods_are_added_for_kube_schedulers_filters_only() -> None:
    """The extender's filters see a node as it is: a nominated 3-core pod on the 4-core
    ``a`` leaves 1 core, but only NodeResourcesFit is run with it; ``RoomFor(2000)`` alone
    still passes ``a``, and with NodeResourcesFit after it ``a`` is filtered by
    NodeResourcesFit (kube-scheduler's filters run before the extender's)."""
    table = _table({"a": (4000, 16)})
    new = _with_priority(_pod("new", "1", "1Gi"), 0)
    waiting = {"a": [_with_priority(_pod("waiting", "3", "1Gi"), 0)]}
    fit = load_builtin("default").profiles[0].filters
    assert [type(f).__name__ for f in fit if f.name == "NodeResourcesFit"] == ["NodeResourcesFitFilter"]
    alone = Profile("p", [_RoomFor(2000)], [])
    assert explain_placement(alone, new, table, SchedulingContext(), waiting).best == ["a"]
    both = Profile("p", [_RoomFor(2000), *fit], [])
    explanation = explain_placement(both, new, table, SchedulingContext(), waiting)
    assert [(v.node, v.filtered_by) for v in explanation.verdicts] == [("a", None)]  # 1 core fits 1
    bigger = _with_priority(_pod("new", "1500m", "1Gi"), 0)
    explanation = explain_placement(both, bigger, table, SchedulingContext(), waiting)
    assert [(v.node, v.filtered_by, v.with_nominated) for v in explanation.verdicts] == [
        ("a", "NodeResourcesFit", True)
    ]
    # a pod that fits without them neither: named by the pass with them (kube-scheduler's
    # first), not counted as kept off by them
    huge = _with_priority(_pod("huge", "5", "1Gi"), 0)
    explanation = explain_placement(both, huge, table, SchedulingContext(), waiting)
    assert [(v.node, v.filtered_by, v.with_nominated) for v in explanation.verdicts] == [
        ("a", "NodeResourcesFit", False)
    ]
    # failing an extender filter without them (4 free cores < 4.5): not kept off by them
    roomy = Profile("p", [*fit, _RoomFor(4500)], [])
    explanation = explain_placement(roomy, bigger, table, SchedulingContext(), waiting)
    assert [(v.node, v.filtered_by, v.with_nominated) for v in explanation.verdicts] == [
        ("a", "NodeResourcesFit", False)
    ]


def test_pins_node_follows_the_autoscalers_rules() -> None:
    assert pins_node(_pod("bare", "1", "1Gi"))
    assert not pins_node(_pod("rs", "1", "1Gi", owner="ReplicaSet"))
    assert not pins_node(_pod("job", "1", "1Gi", owner="Job"))
    assert not pins_node(_pod("ds", "1", "1Gi", owner="DaemonSet"))
    assert pins_node(_pod("custom", "1", "1Gi", owner="DaskWorkerGroup"))  # not a controller CA knows
    safe = "cluster-autoscaler.kubernetes.io/safe-to-evict"
    assert not pins_node(_pod("bare-safe", "1", "1Gi", **{safe: "true"}))
    assert pins_node(_pod("rs-unsafe", "1", "1Gi", owner="ReplicaSet", **{safe: "false"}))
    assert not pins_node(_pod("mirror", "1", "1Gi", **{"kubernetes.io/config.mirror": "x"}))


def test_pins_node_reads_only_the_controller_and_every_annotation_value() -> None:
    """The autoscaler asks the pod's *controller* (an owner reference with controller: true;
    metav1.GetControllerOf), takes ``cluster-autoscaler.kubernetes.io/daemonset-pod: "true"``
    for a DaemonSet pod, and waits for a pod annotated ``safe-to-evict: "on-completion"``
    to finish (CA 1.36+): that pod holds its node, whoever owns it."""
    safe = "cluster-autoscaler.kubernetes.io/safe-to-evict"
    assert pins_node(_pod("owned-not-controlled", "1", "1Gi", owner="ReplicaSet", controller=False))
    assert _pod("owned-not-controlled", "1", "1Gi", owner="ReplicaSet", controller=False).owner_kind is None
    assert not pins_node(
        _pod("ds-like", "1", "1Gi", **{"cluster-autoscaler.kubernetes.io/daemonset-pod": "true"})
    )
    assert pins_node(
        _pod("not-ds", "1", "1Gi", **{"cluster-autoscaler.kubernetes.io/daemonset-pod": "false"})
    )
    assert pins_node(_pod("rs-waits", "1", "1Gi", owner="ReplicaSet", **{safe: "on-completion"}))
    assert pins_node(_pod("bare-waits", "1", "1Gi", **{safe: "on-completion"}))
    assert not pins_node(_pod("ds-waits", "1", "1Gi", owner="DaemonSet", **{safe: "on-completion"}))
    assert not pins_node(_pod("ds-unsafe", "1", "1Gi", owner="DaemonSet", **{safe: "false"}))


def test_explain_placement_agrees_with_profile_select() -> None:
    """The explanation's best nodes are exactly those select() may pick, its totals are
    the profile's, and each removed node names the filter that removed it."""
    rng = np.random.default_rng(7)
    policy = load_builtin("z2jh")
    for case in range(50):
        table = _table(
            {f"n{i}": (int(rng.integers(2, 9)) * 1000, int(rng.integers(4, 33))) for i in range(8)}
        )
        for i in range(8):
            for k in range(int(rng.integers(0, 4))):
                pod = _pod(f"p{i}-{k}", f"{int(rng.integers(1, 20)) * 100}m", f"{int(rng.integers(1, 9))}Gi")
                row = table.index[f"n{i}"]
                if (
                    table.requested[row, :2] + (pod.requests["cpu"], pod.requests["memory"])
                    <= table.alloc[row, :2]
                ).all():
                    table.add_pod(row, pod)
        pod = _pod("new", f"{int(rng.integers(1, 40)) * 100}m", f"{int(rng.integers(1, 12))}Gi")
        profile = policy.profile_for(pod)
        ctx = SchedulingContext()
        explanation = explain_placement(profile, pod, table, ctx)
        feasible = profile.feasible(pod, table, ctx)
        assert {v.node for v in explanation.verdicts if v.filtered_by is None} == set(
            table.node_names(feasible)
        )
        assert all(v.filtered_by == "NodeResourcesFit" for v in explanation.verdicts if v.filtered_by), case
        if feasible.size:
            totals = dict(
                zip(
                    table.node_names(feasible),
                    profile.scores(pod, table, feasible, ctx).tolist(),
                    strict=True,
                )
            )
            assert {v.node: v.total for v in explanation.verdicts if v.filtered_by is None} == totals
            picks = {
                table.node_names([profile.select(pod, table, ctx, np.random.default_rng(s))])[0]
                for s in range(30)
            }
            assert picks <= set(explanation.best), case
            for v in explanation.verdicts:
                if v.total is not None:
                    assert v.total == sum(explanation.weights[p] * s for p, s in v.scores.items())
        else:
            assert explanation.best == []


def test_node_report_verdicts() -> None:
    table = _table({"busy": (4000, 16), "pinned": (4000, 16), "removable": (4000, 16), "empty": (4000, 16)})
    pods = {
        "busy": [_pod("big", "3", "1Gi")],
        "pinned": [_pod("user", "500m", "1Gi"), _pod("ds", "100m", "100Mi", owner="DaemonSet")],
        "removable": [_pod("web", "500m", "1Gi", owner="ReplicaSet")],
    }
    for node, placed in pods.items():
        for pod in placed:
            table.add_pod(table.index[node], pod)
    reports = {r.node: r for r in node_report(table, pods)}
    assert {n: r.verdict(0.5) for n, r in reports.items()} == {
        "busy": "busy",
        "pinned": "pinned",
        "removable": "removable",
        "empty": "empty",
    }
    assert reports["pinned"].pinning == ("default/user",)
    assert reports["busy"].utilization == pytest.approx(0.75)
    assert reports["busy"].verdict(0.8) == "pinned"  # under a higher threshold, held by its bare pod
    table.upsert_node(
        "removable",
        {"cpu": 4000, "memory": 16 * GI, "pods": 110},
        annotations={"cluster-autoscaler.kubernetes.io/scale-down-disabled": "true"},
    )
    (report,) = (r for r in node_report(table, pods) if r.node == "removable")
    assert report.scale_down_disabled and report.verdict(0.5) == "disabled"
    # over the threshold too: the autoscaler reads the annotation before the utilization
    # (eligibility.go, unremovableReasonAndNodeUtilization), so it logs the annotation
    assert report.verdict(0.1) == "disabled"


def test_a_node_without_cpu_or_memory_allocatable_cannot_be_weighed() -> None:
    """The autoscaler's ``CalculateUtilizationOfResource`` fails for a node without cpu or
    memory allocatable (or with 0 of it), and since cluster-autoscaler 1.32 its eligibility
    check then keeps the node (``UnexpectedError``): ``incomplete``, not ``empty``. A GPU
    node is weighed by its GPUs alone (none ready yet: 0), its cpu and memory never read."""
    table = _table({"ok": (4000, 16)})
    table.upsert_node("none", {})
    table.upsert_node("no-cpu", {"cpu": 0, "memory": 16 * GI, "pods": 110})
    table.upsert_node("gpu", {}, labels={"cloud.google.com/gke-accelerator": "nvidia-l4"})
    reports = {r.node: r for r in node_report(table, {})}
    assert {n: r.verdict(0.5) for n, r in reports.items()} == {
        "ok": "empty",
        "none": "incomplete",
        "no-cpu": "incomplete",
        "gpu": "empty",
    }
    assert reports["none"].utilization_error == "no cpu or memory allocatable"
    assert reports["no-cpu"].utilization_error == "no cpu allocatable"
    assert reports["ok"].utilization_error is None and reports["gpu"].utilization_error is None
    disabled = {"cluster-autoscaler.kubernetes.io/scale-down-disabled": "true"}
    table.upsert_node("none", {}, annotations=disabled)  # the autoscaler checks that first
    assert next(r for r in node_report(table, {}) if r.node == "none").verdict(0.5) == "disabled"


def test_a_node_with_only_daemonset_and_mirror_pods_is_empty() -> None:
    """The autoscaler calls a node empty when nothing but DaemonSet and mirror pods runs on
    it (every node of a real cluster runs kube-proxy or a CNI DaemonSet); their requests
    still count in its utilization (--ignore-daemonsets-utilization is off by default)."""
    table = _table({"ds-only": (4000, 16), "ds-heavy": (4000, 16), "with-web": (4000, 16)})
    pods = {
        "ds-only": [
            _pod("proxy", "100m", "100Mi", owner="DaemonSet"),
            _pod("etcd", "100m", "100Mi", **{"kubernetes.io/config.mirror": "x"}),
        ],
        "ds-heavy": [_pod("agent", "3", "1Gi", owner="DaemonSet")],
        "with-web": [
            _pod("proxy2", "100m", "100Mi", owner="DaemonSet"),
            _pod("web", "100m", "100Mi", owner="ReplicaSet"),
        ],
    }
    for node, placed in pods.items():
        for pod in placed:
            table.add_pod(table.index[node], pod)
    reports = {r.node: r for r in node_report(table, pods)}
    assert reports["ds-only"].pods == 2 and reports["ds-only"].cpu == pytest.approx(0.05)
    assert {n: r.verdict(0.5) for n, r in reports.items()} == {
        "ds-only": "empty",
        "ds-heavy": "busy",  # DaemonSet requests count: 75% is not under the threshold
        "with-web": "removable",
    }


# ---------------------------------------------------------------------------- real control plane


def _controller(cp: ControlPlane, kind: str, name: str, namespace: str = "default") -> None:
    """Create a ReplicaSet or DaemonSet (none of its pods appear: there is no controller
    manager), so the autoscaler's controller check finds it; one that exists already is kept."""
    from kubernetes_asyncio.client.exceptions import ApiException

    template = {
        "metadata": {"labels": {"owner": name}},
        "spec": {"containers": [{"name": "c", "image": "x"}]},
    }
    spec: dict = {"selector": {"matchLabels": {"owner": name}}, "template": template}
    if kind == "ReplicaSet":
        spec["replicas"] = 0
    body = {"metadata": {"name": name}, "spec": spec}

    async def create(api: object) -> None:
        apps = client.AppsV1Api(api)
        make = (
            apps.create_namespaced_replica_set if kind == "ReplicaSet" else apps.create_namespaced_daemon_set
        )
        try:
            await make(namespace, body)
        except ApiException as exc:
            if exc.status != 409:
                raise

    cp.call(create)


def _account_that_lists(cp: ControlPlane, account: str, resources: dict[str, list[str]]) -> Path:
    """A kubeconfig for a new ServiceAccount ``account`` of ``default`` that may ``list``
    only ``resources`` (API group to resource names), cluster-wide."""
    rules = [
        {"apiGroups": [group], "resources": names, "verbs": ["list"]} for group, names in resources.items()
    ]
    cp.grant_cluster_rules(account, rules)
    return cp.service_account_kubeconfig(account)


def _bind(
    cp: ControlPlane,
    name: str,
    node: str,
    cpu: str,
    memory: str,
    owner: str | None = None,
    owner_exists: bool = True,
    api_version: str = "apps/v1",
    spec: dict | None = None,
    **labels: str,
) -> None:
    raw = pod_manifest(name, cpu=cpu, memory=memory, labels=labels)
    raw["spec"]["nodeName"] = node
    raw["spec"].update(spec or {})
    if owner:
        if owner_exists:
            _controller(cp, owner, f"{name}-owner")
        uid = "0b5e3f1c-0000-4000-8000-000000000000"  # no garbage collector runs: the uid is not checked
        ref = {
            "apiVersion": api_version,
            "kind": owner,
            "name": f"{name}-owner",
            "uid": uid,
            "controller": True,
        }
        raw["metadata"]["ownerReferences"] = [ref]
    cp.create_pod(pod=raw)


def _documented_json_fields() -> tuple[set[str], set[str]]:
    """The node report's top-level fields and each node's, from the two tables after
    "the node report's fields" in docs/operator-guide.md (first column, backticked names)."""
    import re

    text = (Path(__file__).resolve().parents[1] / "docs/operator-guide.md").read_text()
    section = text[text.index("the node report's fields") :]
    tables: list[set[str]] = []
    for block in re.split(r"\n\n", section):
        rows = [line for line in block.splitlines() if line.startswith("| `")]
        if rows:
            tables.append({name for row in rows for name in re.findall(r"`([a-z_]+)`", row.split("|")[1])})
        if len(tables) == 2:
            break
    return tables[0], tables[1]


@pytest.mark.controlplane
def test_inspect_nodes_on_a_real_cluster(cluster: ControlPlane, capsys: pytest.CaptureFixture[str]) -> None:
    cluster.create_node("busy", cpu="4", memory="16Gi")
    cluster.create_node("pinned", cpu="4", memory="16Gi")
    cluster.create_node("removable", cpu="4", memory="16Gi")
    cluster.create_node("empty", cpu="4", memory="16Gi")
    cluster.create_node(
        "going",
        cpu="4",
        memory="16Gi",
        taints=[f"DeletionCandidateOfClusterAutoscaler={int(time.time()) - 420}:PreferNoSchedule"],
    )
    _bind(cluster, "jupyter-alice", "busy", "3", "2Gi")
    _bind(cluster, "jupyter-bob", "pinned", "500m", "1Gi")
    _bind(cluster, "dask-worker-1", "pinned", "500m", "1Gi")
    _bind(cluster, "web-1", "removable", "500m", "1Gi", owner="ReplicaSet")
    _bind(cluster, "proxy-1", "going", "100m", "100Mi", owner="DaemonSet")
    cluster.create_node("kept", cpu="4", memory="16Gi")
    _bind(cluster, "jupyter-carol", "kept", "500m", "1Gi")
    disabled = {"cluster-autoscaler.kubernetes.io/scale-down-disabled": "true"}
    cluster.call(
        lambda api: client.CoreV1Api(api).patch_node("kept", {"metadata": {"annotations": disabled}})
    )
    assert main(["inspect", "--kubeconfig", str(cluster.kubeconfig), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    documented, documented_node = _documented_json_fields()  # the operator guide's lists
    assert set(report) == documented and all(set(n) == documented_node for n in report["nodes"])
    nodes = {n["node"]: n for n in report["nodes"]}
    assert {n: v["verdict"] for n, v in nodes.items()} == {
        "busy": "busy",
        "pinned": "pinned",
        "removable": "removable",
        "empty": "empty",
        "going": "empty",  # a DaemonSet pod alone: empty to the autoscaler
        "kept": "disabled",  # the autoscaler never removes it, pinned or not
    }
    assert nodes["kept"]["scale_down_disabled"] and nodes["kept"]["pinning"] == ["default/jupyter-carol"]
    assert nodes["pinned"]["pinning"] == ["default/dask-worker-1", "default/jupyter-bob"]
    assert nodes["going"]["autoscaler"] == "candidate"
    assert time.time() - 430 < nodes["going"]["autoscaler_since"] <= time.time() - 420  # the taint's value
    assert nodes["busy"]["autoscaler_since"] is None
    assert (nodes["going"]["pods"], nodes["going"]["daemon_pods"]) == (1, 1)
    assert nodes["going"]["cpu"] == pytest.approx(0.025)  # its requests count all the same
    assert nodes["busy"]["cpu"] == pytest.approx(0.75)
    assert report["summary"] == {
        "busy": 1,
        "deleting": 0,
        "disabled": 1,
        "pinned": 1,
        "no-room": 0,
        "removable": 1,
        "empty": 2,
    }
    assert main(["inspect", "--kubeconfig", str(cluster.kubeconfig), "--threshold", "0.8"]) == 0
    out = capsys.readouterr().out
    assert (
        "6 nodes: 0 busy, 2 at or under the threshold but pinned, 1 removable, 2 empty, 1 with scale-down"
        in out
    )
    assert re.search(r"\bcandidate 7m\b", out)  # the autoscaler found it unneeded 7 minutes ago


@pytest.mark.controlplane
def test_inspect_names_scale_down_disabled_before_busy(
    cluster: ControlPlane, capsys: pytest.CaptureFixture[str]
) -> None:
    """On the real API server: a node over the threshold that carries
    ``scale-down-disabled: "true"`` is reported ``disabled``, not ``busy``: the autoscaler's
    ``Checker.unremovableReasonAndNodeUtilization`` (core/scaledown/eligibility/eligibility.go)
    returns ``ScaleDownDisabledAnnotation`` before it computes the utilization, so that is the
    reason it logs. The same node without the annotation is ``busy``."""
    for node in ("busy", "busy-disabled", "quiet-disabled"):
        cluster.create_node(node, cpu="4", memory="16Gi")
    _bind(cluster, "jupyter-alice", "busy", "3", "2Gi")
    _bind(cluster, "jupyter-bob", "busy-disabled", "3", "2Gi")
    _bind(cluster, "jupyter-carol", "quiet-disabled", "500m", "1Gi")
    disabled = {"cluster-autoscaler.kubernetes.io/scale-down-disabled": "true"}
    for node in ("busy-disabled", "quiet-disabled"):
        cluster.call(
            lambda api, node=node: client.CoreV1Api(api).patch_node(
                node, {"metadata": {"annotations": disabled}}
            )
        )
    argv = ["inspect", "--kubeconfig", str(cluster.kubeconfig)]
    assert main([*argv, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    nodes = {n["node"]: n for n in report["nodes"]}
    assert {n: v["verdict"] for n, v in nodes.items()} == {
        "busy": "busy",
        "busy-disabled": "disabled",
        "quiet-disabled": "disabled",
    }
    assert nodes["busy-disabled"]["cpu"] == pytest.approx(0.75)  # over 0.5 all the same
    assert nodes["busy-disabled"]["scale_down_disabled"]
    assert (report["summary"]["busy"], report["summary"]["disabled"]) == (1, 2)
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "3 nodes: 1 busy," in out and "2 with scale-down disabled" in out


@pytest.mark.controlplane
def test_inspect_names_nodes_being_deleted_first(
    cluster: ControlPlane, capsys: pytest.CaptureFixture[str]
) -> None:
    """On the real API server: a node tainted ``ToBeDeletedByClusterAutoscaler`` is reported
    ``deleting`` whatever else holds it (busy, annotated ``scale-down-disabled``, or with
    nothing on it): the autoscaler's ``Checker.unremovableReasonAndNodeUtilization`` checks
    ``IsNodeBeingDeleted`` first (``CurrentlyBeingDeleted``). It is no candidate, so the
    plan moves nothing onto the others for it. A taint 5 minutes old or more (or with a
    value that is no time) is named as a deletion that looks stuck; a 1-minute-old one is
    not."""
    now = int(time.time())
    to_be_deleted = "ToBeDeletedByClusterAutoscaler={}:NoSchedule"
    cluster.create_node("busy-deleting", taints=[to_be_deleted.format(now - 60)])
    cluster.create_node("disabled-deleting", taints=[to_be_deleted.format(now - 60)])
    cluster.create_node("empty-stuck", taints=[to_be_deleted.format(now - 3600)])
    cluster.create_node("empty-unreadable", taints=[to_be_deleted.format("soon")])
    cluster.create_node("quiet")
    _bind(cluster, "jupyter-alice", "busy-deleting", "3", "2Gi")  # 75% cpu: busy otherwise
    _bind(cluster, "jupyter-bob", "quiet", "500m", "1Gi")
    disabled = {"cluster-autoscaler.kubernetes.io/scale-down-disabled": "true"}
    cluster.call(
        lambda api: client.CoreV1Api(api).patch_node(
            "disabled-deleting", {"metadata": {"annotations": disabled}}
        )
    )
    argv = ["inspect", "--kubeconfig", str(cluster.kubeconfig)]
    assert main([*argv, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    nodes = {n["node"]: n for n in report["nodes"]}
    assert {n: v["verdict"] for n, v in nodes.items()} == {
        "busy-deleting": "deleting",
        "disabled-deleting": "deleting",
        "empty-stuck": "deleting",
        "empty-unreadable": "deleting",
        "quiet": "pinned",  # jupyter-bob has no controller
    }
    assert nodes["busy-deleting"]["cpu"] == pytest.approx(0.75)
    assert nodes["empty-unreadable"]["autoscaler"] == "deleting"
    assert nodes["empty-unreadable"]["autoscaler_since"] is None
    assert report["summary"]["deleting"] == 4 and report["summary"]["empty"] == 0
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "5 nodes: 0 busy, 1 at or under the threshold but pinned" in out
    assert "4 being deleted by the autoscaler" in out
    stuck = re.search(r"tainted ToBeDeletedByClusterAutoscaler 5 or more minutes ago.*?: ([^;]*);", out, re.S)
    assert stuck is not None
    assert stuck.group(1).split(", ") == ["empty-stuck", "empty-unreadable"]


@pytest.mark.controlplane
def test_inspect_threshold_zero_takes_only_nodes_at_zero_utilization(
    cluster: ControlPlane, capsys: pytest.CaptureFixture[str]
) -> None:
    """On the real API server, ``--threshold 0``: the autoscaler's flags take a
    ``--scale-down-utilization-threshold`` of 0 (config/flags/flags.go checks no range), and
    since cluster-autoscaler 1.35.0 (1.34.3, 1.33.4, 1.32.6) its
    ``Checker.isNodeAtOrBelowUtilizationThreshold`` keeps a node only when its utilization is
    over the threshold, so at 0 a node is a candidate only at utilization 0: nothing on it
    requests cpu or memory, DaemonSet pods counted unless ``--ignore-daemonsets-utilization``
    (its test "only daemonsets pods on this nodes"). A node whose replicated pod requests
    nothing is one too, and goes if that pod fits elsewhere."""
    for node in ("busy", "idle", "agents", "web", "sleepy"):
        cluster.create_node(node, cpu="4", memory="16Gi")
    _bind(cluster, "jupyter-alice", "busy", "3", "2Gi")
    _bind(cluster, "log-agent", "agents", "100m", "100Mi", owner="DaemonSet")
    _bind(cluster, "web-1", "web", "500m", "1Gi", owner="ReplicaSet")
    _bind(cluster, "sleepy-1", "sleepy", "0", "0", owner="ReplicaSet")
    argv = ["inspect", "--kubeconfig", str(cluster.kubeconfig), "--json"]

    def verdicts(*extra: str) -> dict[str, str]:
        assert main([*argv, *extra]) == 0
        report = json.loads(capsys.readouterr().out)
        assert report["threshold"] == (float(extra[1]) if extra[:1] == ("--threshold",) else 0.5)
        return {n["node"]: n["verdict"] for n in report["nodes"]}

    assert verdicts() == {
        "busy": "busy",
        "idle": "empty",
        "agents": "empty",
        "web": "removable",
        "sleepy": "removable",
    }
    assert verdicts("--threshold", "0") == {
        "busy": "busy",
        "idle": "empty",
        "agents": "busy",  # its DaemonSet pod's 100m count
        "web": "busy",
        "sleepy": "removable",  # at 0: its pod requests nothing
    }
    assert verdicts("--threshold", "0", "--ignore-daemonsets-utilization")["agents"] == "empty"
    assert main(["inspect", "--kubeconfig", str(cluster.kubeconfig), "--threshold", "0"]) == 0
    out = capsys.readouterr().out
    assert "(threshold 0)" in out and "5 nodes: 3 busy," in out


def test_the_autoscalers_taint_times_are_read_as_it_reads_them() -> None:
    """A taint's value is Unix seconds as the autoscaler writes it; what its ``GetTaintTime``
    (Go's ``strconv.ParseInt(value, 10, 64)``) refuses is no time."""
    from stickypack.core.explain import autoscaler_taint_time

    table = NodeTable()
    for value, expected in (
        ("1765000000", 1765000000),
        ("+12", 12),
        ("-3", -3),
        ("007", 7),
        (str(2**63 - 1), 2**63 - 1),
        (str(2**63), None),  # out of int64's range
        ("", None),
        ("1.5", None),
        ("1e9", None),
        (" 12", None),
        ("\u0663", None),  # an Arabic-Indic digit: Python's int() takes it, Go's does not
        ("+", None),
        ("0x10", None),
    ):
        table.upsert_node("n", {"cpu": 1000}, taints=[Taint("DeletionCandidateOfClusterAutoscaler", value)])
        assert (
            autoscaler_taint_time(table, table.index["n"], "DeletionCandidateOfClusterAutoscaler") == expected
        ), value
    assert autoscaler_taint_time(table, table.index["n"], "ToBeDeletedByClusterAutoscaler") is None


def test_a_deletion_taint_five_minutes_old_looks_stuck() -> None:
    """The autoscaler takes a node tainted ``ToBeDeletedByClusterAutoscaler`` as being
    deleted while the taint's time plus its ``MaxCloudProviderNodeDeletionTime`` (5 min) is
    after now (``IsNodeBeingDeleted``, ``core/scaledown/actuation/delete_in_batch.go``):
    tainted at 1000, it is no longer so from 1000 + 300 = 1300 on."""
    from stickypack.cli.inspect import _stuck_deletions

    nodes = [
        {"node": "tainted", "autoscaler": "deleting", "autoscaler_since": 1000},
        {"node": "unreadable", "autoscaler": "deleting", "autoscaler_since": None},
        {"node": "candidate", "autoscaler": "candidate", "autoscaler_since": 0},
    ]
    assert _stuck_deletions(nodes, 1299.0) == ["unreadable"]
    assert _stuck_deletions(nodes, 1300.0) == ["tainted", "unreadable"]


def _node_row(name: str, **fields: object) -> dict:
    """A node of the node report as ``_node_json`` writes it: an empty, ready node with
    nothing to say, but ``fields``."""
    row = {
        "node": name, "ready": True, "unschedulable": False, "scale_down_disabled": False,
        "autoscaler": "", "autoscaler_since": None, "cpu": 0.0, "memory": 0.0, "gpu": None,
        "dra": None, "dra_pool": None, "dra_error": None, "utilization_error": None,
        "utilization": 0.0, "pods": 0, "daemon_pods": 0, "expendable_pods": 0,
        "terminating_pods": 0, "builds": 0, "pinning": [], "pin_reasons": {}, "node_group": None,
        "verdict": "empty", "no_room_for": None, "moves": {},
    }  # fmt: skip
    return {**row, **fields}


def _printed(print_it: object, *args: object) -> str:
    from rich.console import Console

    console = Console(record=True, width=300)
    print_it(console, *args)  # type: ignore[operator]
    return console.export_text()


def test_the_node_tables_cells_and_ages() -> None:
    """The ``autoscaler`` column: not ready before cordoned; a taint's age at ``now`` from 0
    seconds on (tainted at 1000, now 1000: ``0s``), none for a time in the future. The
    ``pinned by`` column: why the node cannot be weighed first (the utilization error, then
    the DRA one), then its pinning pods, then the pod with no room: the first three, then
    ``(+N)`` for the rest. Ages as kubectl writes them: whole units, rounded down."""
    from stickypack.cli.inspect import _age, _autoscaler_cell, _first, _pinned_by_cell

    assert _autoscaler_cell(_node_row("n", ready=False, unschedulable=True), 0.0) == "not ready"
    assert _autoscaler_cell(_node_row("n", unschedulable=True), 0.0) == "cordoned"
    deleting = _node_row("n", autoscaler="deleting", autoscaler_since=1000.0)
    assert _autoscaler_cell(deleting, 1000.0) == "deleting 0s"
    assert _autoscaler_cell(deleting, 999.0) == "deleting"  # a time in the future: no age
    held = _node_row(
        "n",
        utilization_error="no cpu allocatable",
        dra_error="pool p incomplete",
        pinning=["default/a"],
        pin_reasons={"default/a": "no controller"},
        no_room_for="default/b",
    )
    assert _pinned_by_cell(held) == "no cpu allocatable, pool p incomplete, default/a (no controller) (+1)"
    assert _pinned_by_cell(_node_row("n")) == ""  # nothing holds it
    assert _first(["a", "b", "c"], 3) == "a, b, c"
    assert _first(["a", "b", "c", "d", "e"], 3) == "a, b, c (+2)"
    # 59 s, 60 s = 1 min, 90 s = 1.5 min, 2 days = 172800 s
    assert [_age(s) for s in (59, 60, 90, 7200, 172800)] == ["59s", "1m", "1m", "2h", "2d"]


def test_the_node_tables_columns_and_title() -> None:
    """The ``group`` column shows when some node is in a group, even one named "" (a label's
    value may be empty); the ``dra`` column when some node has a DRA reading or a DRA error;
    the title names the GPU threshold only with GPU nodes and the pods left out only when
    some are."""
    from stickypack.cli.inspect import _node_table

    report = {
        "threshold": 0.5,
        "gpu_threshold": 0.4,
        "ignore_daemonsets_utilization": False,
        "ignore_mirror_pods_utilization": False,
        "nodes": [_node_row("n1", node_group="", dra_error="pool p incomplete")],
    }
    table = _node_table(report)
    assert [c.header for c in table.columns] == [
        "node", "group", "cpu", "memory", "dra", "pods", "builds", "autoscaler", "verdict", "pinned by"
    ]  # fmt: skip
    assert table.title == "nodes as the cluster-autoscaler sees them (threshold 0.5)"


def test_the_summary_line_and_notes_say_only_what_there_is() -> None:
    """The summary line leaves out a rare verdict no node has (``no-room``, ``min-size``
    at 0). The notes: a node group given a minimum size is named only when no node is in
    it (pool-x, size 0; not pool-a, 2 nodes of which none removed); the first 5 DRA
    problems, then how many more (6: one more; 5: no such line); a kind of object not
    listed only when it was not (here none)."""
    from stickypack.cli.inspect import _print_node_report_notes, _summary_line

    summary = {"busy": 1, "deleting": 0, "disabled": 0, "pinned": 0, "no-room": 0, "min-size": 0,
               "resource-limit": 0, "removable": 0, "empty": 1}  # fmt: skip
    report = {"nodes": [_node_row("n1"), _node_row("n2", verdict="busy")], "summary": summary}
    assert (
        _summary_line(report)
        == "2 nodes: 1 busy, 0 at or under the threshold but pinned, 0 removable, 1 empty"
    )
    report = {
        "nodes": [],
        "unreadable_pods": [],
        "node_groups": {
            "pool-a": {"size": 2, "min_size": 2, "removes": 0},
            "pool-x": {"size": 0, "min_size": 2, "removes": 0},
        },
        "nominated_pods": [],
        "budgets_read": True,
        "namespaces_read": True,
        "volumes_read": True,
        "controllers_unlisted": [],
        "dra_read": None,
        "dra_problems": [f"claim c{k} not allocated" for k in range(6)],
    }
    lines = _printed(_print_node_report_notes, report).splitlines()
    assert [line for line in lines if line.startswith("no node is in")] == [
        "no node is in node group 'pool-x' given a minimum size (groups are named by --node-group-label, "
        "or the pool labels)"
    ]
    assert [line for line in lines if line.startswith("DRA")] == [
        *(f"DRA: claim c{k} not allocated" for k in range(5)),
        "DRA: 1 more objects left out (see --json)",
    ]
    assert len(lines) == 7  # nothing else: every kind listed, DRA not asked for
    report["dra_problems"] = report["dra_problems"][:5]
    assert "more objects left out" not in _printed(_print_node_report_notes, report)


def test_the_placement_and_the_unreadable_pods_lines() -> None:
    """``inspect --pod``: a node's score by plugin and its total (weight 2 x score 3 = 6);
    one best node is named without the note that kube-scheduler picks among ties; without
    ``--dra`` (``dra_read`` None) no line says DRA objects were not listed; 4 pods not read
    are all named (up to 5 are)."""
    from stickypack.cli.inspect import _print_placement, _print_unreadable

    report = {
        "pod": "default/p", "policy": "stickypack", "profile": "p", "weights": {"Fit": 2},
        "best": ["a"], "nodes": [{"node": "a", "filtered_by": None, "with_nominated_pods": False,
                                  "scores": {"Fit": 3}, "total": 6}],
        "history": "none (give --config)", "unreadable_pods": [], "dra_read": None,
        "priority": None, "priority_from": "not read", "nominated_pods": {},
        "namespaces_read": True, "volumes_read": True,
    }  # fmt: skip
    text = _printed(_print_placement, report)
    assert "best: a\n" in text and "at random" not in text and "ResourceSlices" not in text
    assert re.search(r"│ a +│ +3 │ +6 │", text)  # the total as explain_placement gave it: 2 x 3
    assert "nominated" not in text and "could not be listed" not in text
    unlisted = _printed(_print_placement, report | {"namespaces_read": False, "volumes_read": False})
    assert "namespaces could not be listed (no `list` right on namespaces)" in unlisted
    assert "persistent volumes could not be listed (no `list` right on persistentvolumeclaims" in unlisted
    report |= {
        "priority": 100,
        "priority_from": "PriorityClass high",
        "nominated_pods": {"a": ["default/x", "default/y"], "b": ["ns/z"]},
    }
    assert (
        "filtered with the pending pods nominated there of priority >= 100 (priority: PriorityClass high), "
        "as kube-scheduler filters: default/x, default/y on a; ns/z on b\n"
    ) in _printed(_print_placement, report)
    # where the priority came from names the pod file's class as written: no markup
    report["priority_from"] = "unknown: no PriorityClass '[/x]' (the API server refuses the pod)"
    assert "(priority: unknown: no PriorityClass '[/x]' (the API server refuses" in _printed(
        _print_placement, report
    )
    keys = [f"default/p{k}" for k in range(4)]
    assert _printed(_print_unreadable, keys) == (
        "4 pods could not be read and are not counted: default/p0, default/p1, default/p2, default/p3\n"
    )


def test_the_node_reports_verdicts_summary_groups_and_notes_from_the_plan(tmp_path: Path) -> None:
    """The node report's parts once the plan is known, on hand-made nodes: a node of a group
    at its minimum size is ``min-size`` when it would be ``removable`` or ``empty`` (not when
    ``pinned`` or ``busy``), one outside as it was; after the plan, ``no-room``, ``pinned``
    (a spent budget, whose pod and reason join the node's pinning) and the reason a node is
    kept at the limits; the summary's keys (``min-size`` and ``resource-limit`` with a total
    given, ``incomplete`` with ``--dra`` or a node so); each group's size (0 for a group
    given a minimum size and no node), minimum and removals; what could not be listed."""
    import argparse as ap

    from stickypack.cli import _parser
    from stickypack.cli.inspect import (
        _dra_read,
        _node_groups_json,
        _node_json,
        _pinned_by_spent_budgets,
        _scale_down_rules,
        _settings,
        _summary_json,
        _unread_json,
        _verdicts_after_plan,
        _verdicts_before_plan,
    )
    from stickypack.core.drain import ScaleDownPlan
    from stickypack.core.explain import NodeReport
    from stickypack.core.nodegroups import NodeGroups
    from stickypack.kube.cache import ClusterCache
    from stickypack.kube.snapshot import Snapshot

    def row(name: str, utilization: float, pods: int = 1, pinning: tuple[str, ...] = ()) -> NodeReport:
        return NodeReport(
            node=name, cpu=utilization, memory=0.0, utilization=utilization, pods=pods, daemon_pods=0,
            pinning=pinning, builds=0, autoscaler="", ready=True, unschedulable=False,
            pin_reasons=("bare pod",) * len(pinning),
        )  # fmt: skip

    nodes = [row("e", 0.0, pods=0), row("r", 0.2), row("p", 0.2, pinning=("default/b",)), row("u", 0.9)]
    nodes.append(row("r2", 0.2))
    at_min = {"e", "r", "p", "u"}  # r2's group is above its minimum
    verdicts = _verdicts_before_plan(nodes, at_min, 0.5, 0.5)
    assert verdicts == ["min-size", "min-size", "pinned", "busy", "removable"]

    blocked = ("default/q", "PodDisruptionBudget q allows no disruption")
    plan = ScaleDownPlan(removable=("k", "r2"), no_room={"x": "default/x1"}, blocked={"y": blocked})
    after = [row("x", 0.2), row("y", 0.2), row("k", 0.2), row("r2", 0.2)]
    kept = {"k": "resource-limit"}
    final = _verdicts_after_plan(after, ["removable"] * 4, plan, kept)
    assert final == ["no-room", "pinned", "resource-limit", "removable"]
    pinned = _pinned_by_spent_budgets(after, plan)[1]
    assert (pinned.pinning, pinned.pin_reasons) == (
        ("default/q",),
        ("PodDisruptionBudget q allows no disruption",),
    )

    def args(**given: object) -> ap.Namespace:
        return ap.Namespace(
            **{"min_size": {}, "cores_total": None, "memory_total": None, "dra": False, **given}
        )

    zeros = {"busy": 0, "deleting": 0, "disabled": 0, "pinned": 0, "no-room": 0, "removable": 0, "empty": 0}
    limits = {"min-size": 0, "resource-limit": 1}
    assert _summary_json(args(memory_total=(1, 2)), ["resource-limit"]) == {**zeros, **limits}
    assert _summary_json(args(dra=True), ["busy"]) == {**zeros, "busy": 1, "incomplete": 0}
    assert _summary_json(args(), ["incomplete"]) == {**zeros, "incomplete": 1}

    table = NodeTable()
    for name in ("a1", "a2"):
        table.upsert_node(name, {"cpu": 1000, "memory": GI}, labels={"example.com/pool": "a"})
    groups = NodeGroups(("example.com/pool",), {"a": 1, "x": 2})
    group_of: dict[str, str | None] = {"a1": "a", "a2": "a"}
    assert _node_groups_json(args(min_size={"a": 1, "x": 2}), table, groups, group_of, {"a1"}) == {
        "a": {"size": 2, "min_size": 1, "removes": 1},
        "x": {"size": 0, "min_size": 2, "removes": 0},
    }

    snap = Snapshot(ClusterCache(clock=lambda: 0.0), controllers={}, unlisted_controllers={"Job": 403})
    unread = _unread_json(args(), snap, None)
    assert (unread["controllers_read"], unread["controllers_unlisted"], unread["dra_read"]) == (
        False,
        ["Job"],
        None,
    )
    assert _dra_read(args(dra=True), snap) is False
    assert _node_json(row("c", 0.123456), "removable", None, None, {})["cpu"] == 0.1235  # 4 places

    parsed = _parser().parse_args(["inspect"])
    _settings(parsed)
    rules = _scale_down_rules(parsed, snap)
    assert (rules.min_replica_count, rules.local_storage_pins) == (0, True)  # the autoscaler's defaults
    parsed = _parser().parse_args(["inspect", "--local-storage-moves", "--min-replica-count", "2"])
    _settings(parsed)
    rules = _scale_down_rules(parsed, snap)
    assert (rules.min_replica_count, rules.local_storage_pins) == (2, False)


@pytest.mark.controlplane
def test_inspect_says_when_pods_would_have_no_room(
    cluster: ControlPlane, capsys: pytest.CaptureFixture[str]
) -> None:
    """On the real API server: two half-used nodes whose replicated pods nothing pins; the
    autoscaler could remove one of them, its pod moving to the other, not both (the busy
    node has no room for either pod): the first is removable, the second ``no-room``."""
    for node in ("a-busy", "b", "c"):
        cluster.create_node(node, cpu="4", memory="16Gi")
    _bind(cluster, "alice", "a-busy", "3", "1Gi")
    _bind(cluster, "web-1", "b", "1500m", "1Gi", owner="ReplicaSet")
    _bind(cluster, "web-2", "c", "1500m", "1Gi", owner="ReplicaSet")
    argv = ["inspect", "--kubeconfig", str(cluster.kubeconfig)]
    assert main([*argv, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    nodes = {n["node"]: n for n in report["nodes"]}
    assert (nodes["b"]["verdict"], nodes["b"]["moves"]) == ("removable", {"default/web-1": "c"})
    assert (nodes["c"]["verdict"], nodes["c"]["no_room_for"]) == ("no-room", "default/web-2")
    assert (nodes["c"]["pinning"], nodes["c"]["moves"]) == ([], {})
    assert report["summary"]["no-room"] == 1
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "default/web-2 (no other node takes it)" in out and "1 whose pods fit on no other node" in out


@pytest.mark.controlplane
@pytest.mark.parametrize("rule", ["anti-affinity", "host-port"])
def test_inspect_weighs_anti_affinity_and_host_ports(
    cluster: ControlPlane, capsys: pytest.CaptureFixture[str], rule: str
) -> None:
    """On the real API server: the two half-used nodes of
    :func:`test_inspect_says_when_pods_would_have_no_room`, whose pods would fill each other,
    but the replicas keep apart (required anti-affinity by hostname) or bind the same host
    port: neither pod may join the other, and both nodes have no room."""
    for node in ("a-busy", "b", "c"):
        cluster.create_node(node, cpu="4", memory="16Gi")
    _bind(cluster, "alice", "a-busy", "3", "1Gi")
    if rule == "anti-affinity":
        term = {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}
        spec: dict = {
            "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
        }
    else:
        port = {"containerPort": 8080, "hostPort": 8080}
        spec = {"containers": [{**pod_manifest("x")["spec"]["containers"][0], "ports": [port]}]}
    for name, node in (("web-1", "b"), ("web-2", "c")):
        raw_spec = dict(spec)
        if "containers" in raw_spec:  # the requests of the replica, with the port
            resources = {"requests": {"cpu": "1500m", "memory": "1Gi"}}
            raw_spec["containers"] = [{**raw_spec["containers"][0], "resources": resources}]
        _bind(cluster, name, node, "1500m", "1Gi", owner="ReplicaSet", spec=raw_spec, app="web")
    assert main(["inspect", "--kubeconfig", str(cluster.kubeconfig), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    nodes = {n["node"]: n for n in report["nodes"]}
    assert (nodes["b"]["verdict"], nodes["b"]["no_room_for"]) == ("no-room", "default/web-1")
    assert (nodes["c"]["verdict"], nodes["c"]["no_room_for"]) == ("no-room", "default/web-2")
    assert report["summary"]["no-room"] == 2 and report["namespaces_read"] is True


@pytest.mark.controlplane
@pytest.mark.parametrize("when", ["DoNotSchedule", "ScheduleAnyway"])
def test_inspect_weighs_topology_spread(
    cluster: ControlPlane, capsys: pytest.CaptureFixture[str], when: str
) -> None:
    """On the real API server: two half-used nodes a (zone z1) and c (z2) each with a
    replica, and b (z1) full. Spread by zone with maxSkew 1 (DoNotSchedule), neither replica
    may join the other's zone (the candidate's own zone still counts, at 0): both
    ``no-room``; ScheduleAnyway filters nothing: a is removable, its replica going to c."""
    for node, zone in (("a", "z1"), ("b", "z1"), ("c", "z2")):
        cluster.create_node(node, cpu="4", memory="16Gi", labels={"topology.kubernetes.io/zone": zone})
    _bind(cluster, "alice", "b", "3500m", "1Gi")
    constraint = {
        "maxSkew": 1,
        "topologyKey": "topology.kubernetes.io/zone",
        "whenUnsatisfiable": when,
        "labelSelector": {"matchLabels": {"app": "web"}},
    }
    for name, node in (("web-1", "a"), ("web-2", "c")):
        spec = {"topologySpreadConstraints": [constraint]}
        _bind(cluster, name, node, "1", "1Gi", owner="ReplicaSet", spec=spec, app="web")
    assert main(["inspect", "--kubeconfig", str(cluster.kubeconfig), "--json"]) == 0
    nodes = {n["node"]: n for n in json.loads(capsys.readouterr().out)["nodes"]}
    if when == "DoNotSchedule":
        assert (nodes["a"]["verdict"], nodes["a"]["no_room_for"]) == ("no-room", "default/web-1")
        assert (nodes["c"]["verdict"], nodes["c"]["no_room_for"]) == ("no-room", "default/web-2")
    else:
        assert (nodes["a"]["verdict"], nodes["a"]["moves"]) == ("removable", {"default/web-1": "c"})
        assert nodes["c"]["verdict"] == "no-room"


@pytest.mark.controlplane
def test_inspect_weighs_the_volumes_zone(cluster: ControlPlane, capsys: pytest.CaptureFixture[str]) -> None:
    """On the real API server: a hub pod (a Deployment's) on a (zone z1) whose claim is
    bound to a volume with node affinity to z1. With room only in z2 (b, pinned by a bare
    pod), a has no room; once a z1 node with room joins (d, pinned too), a is removable, the
    hub going to d."""
    zone = "topology.kubernetes.io/zone"
    for node, z in (("a", "z1"), ("b", "z2"), ("c-busy", "z1")):
        cluster.create_node(node, cpu="4", memory="16Gi", labels={zone: z})
    _bind(cluster, "alice", "c-busy", "3500m", "1Gi")
    _bind(cluster, "bob", "b", "1", "1Gi")  # a bare pod pins b: a destination, not a candidate
    terms = [{"matchExpressions": [{"key": zone, "operator": "In", "values": ["z1"]}]}]
    cluster.create_bound_claim("hub-db", node_selector_terms=terms)
    volumes = {"volumes": [{"name": "db", "persistentVolumeClaim": {"claimName": "hub-db"}}]}
    _bind(cluster, "hub", "a", "1", "1Gi", owner="ReplicaSet", spec=volumes, component="hub")
    argv = ["inspect", "--kubeconfig", str(cluster.kubeconfig), "--json"]
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    nodes = {n["node"]: n for n in report["nodes"]}
    assert report["volumes_read"] is True
    assert (nodes["a"]["verdict"], nodes["a"]["no_room_for"]) == ("no-room", "default/hub")
    cluster.create_node("d", cpu="4", memory="16Gi", labels={zone: "z1"})
    _bind(cluster, "carol", "d", "1", "1Gi")
    assert main(argv) == 0
    nodes = {n["node"]: n for n in json.loads(capsys.readouterr().out)["nodes"]}
    assert (nodes["a"]["verdict"], nodes["a"]["moves"]) == ("removable", {"default/hub": "d"})


@pytest.mark.controlplane
def test_inspect_checks_empty_nodes_first(cluster: ControlPlane, capsys: pytest.CaptureFixture[str]) -> None:
    """On the real API server: the autoscaler sorts its candidates empty nodes first
    (EmptySorting), whatever their utilization. An empty node whose DaemonSet pod uses more
    than a removable node's replicated pod is checked first, found removable, and takes no
    pod: the other node's pod has no room (the busy node is full), not the empty node."""
    cluster.create_node("a-busy", cpu="4", memory="16Gi")
    cluster.create_node("e-empty", cpu="4", memory="16Gi")
    cluster.create_node("r", cpu="4", memory="16Gi")
    _bind(cluster, "alice", "a-busy", "3500m", "1Gi")
    _bind(cluster, "agent", "e-empty", "1500m", "1Gi", owner="DaemonSet")
    _bind(cluster, "web", "r", "1", "1Gi", owner="ReplicaSet")
    assert main(["inspect", "--kubeconfig", str(cluster.kubeconfig), "--json"]) == 0
    nodes = {n["node"]: n for n in json.loads(capsys.readouterr().out)["nodes"]}
    assert nodes["e-empty"]["cpu"] > nodes["r"]["cpu"]  # utilization alone would check r first
    assert (nodes["e-empty"]["verdict"], nodes["e-empty"]["no_room_for"]) == ("empty", None)
    r = nodes["r"]
    assert (r["verdict"], r["no_room_for"], r["moves"]) == ("no-room", "default/web", {})


POOL_LABEL = "cloud.google.com/gke-nodepool"


@pytest.mark.controlplane
def test_inspect_keeps_a_node_group_at_its_minimum_size(
    cluster: ControlPlane, capsys: pytest.CaptureFixture[str]
) -> None:
    """On the real API server: two empty nodes of GKE node pool ``pool-a`` (its label). With
    ``--min-size pool-a=1`` the autoscaler would remove one of them and keep the other
    (``min-size``: its RemovableAt budget, 2 - 1); with ``pool-a=2`` the group is at its
    minimum and neither is a candidate. Without minimum sizes both are ``empty``, and the
    report is as it was (no new summary keys), but for the groups named."""
    for name in ("a-1", "a-2"):
        cluster.create_node(name, cpu="4", memory="16Gi", labels={POOL_LABEL: "pool-a"})
    cluster.create_node("plain", cpu="4", memory="16Gi")
    _bind(cluster, "alice", "plain", "3", "1Gi")
    argv = ["inspect", "--kubeconfig", str(cluster.kubeconfig)]
    assert main([*argv, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert {n["node"]: (n["verdict"], n["node_group"]) for n in report["nodes"]} == {
        "a-1": ("empty", "pool-a"),
        "a-2": ("empty", "pool-a"),
        "plain": ("busy", None),
    }
    assert "min-size" not in report["summary"] and "resource-limit" not in report["summary"]
    assert report["node_groups"] == {"pool-a": {"size": 2, "min_size": None, "removes": 2}}
    assert main([*argv, "--json", "--min-size", "pool-a=1", "--min-size", "pool-b=3"]) == 0
    report = json.loads(capsys.readouterr().out)
    verdicts = {n["node"]: n["verdict"] for n in report["nodes"]}
    assert sorted(verdicts.values()) == ["busy", "empty", "min-size"]
    assert (
        report["summary"]["min-size"],
        report["summary"]["empty"],
        report["summary"]["resource-limit"],
    ) == (
        1,
        1,
        0,
    )
    assert report["node_groups"] == {
        "pool-a": {"size": 2, "min_size": 1, "removes": 1},
        "pool-b": {"size": 0, "min_size": 3, "removes": 0},  # named, but no node of it
    }
    assert main([*argv, "--json", "--min-size", "pool-a=2"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert [n["verdict"] for n in report["nodes"]] == ["min-size", "min-size", "busy"]
    assert report["node_groups"]["pool-a"]["removes"] == 0
    # the group named by explicit label keys: a node lacking one is in no known group
    assert main([*argv, "--json", "--min-size", "pool-a=2", "--node-group-label", "example.com/pool"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert [n["verdict"] for n in report["nodes"]] == ["empty", "empty", "busy"]
    assert all(n["node_group"] is None for n in report["nodes"])
    assert main([*argv, "--min-size", "pool-a=1"]) == 0
    out = capsys.readouterr().out
    assert "1 kept at their node group's minimum size" in out and "pool-a" in out
    assert "no node is in node group" not in out
    assert main([*argv, "--min-size", "pool-a=2", "--node-group-label", "example.com/pool"]) == 0
    assert "no node is in node group 'pool-a' given a minimum size" in capsys.readouterr().out


@pytest.mark.controlplane
def test_inspect_a_node_at_its_groups_minimum_is_no_candidate_but_a_destination(
    cluster: ControlPlane, capsys: pytest.CaptureFixture[str]
) -> None:
    """On the real API server: nodes "a" (alone in pool ``pool-a``) and "b" each hold a
    replicated pod of 1.5 of 4 cpus, node "busy" 3.5. Without minimum sizes the autoscaler
    checks "a" first, its pod moves to "b", and "b"'s pod then fits nowhere ("a" being
    removed): "a" removable, "b" ``no-room``. With ``pool-a`` at its minimum of 1, "a" is no
    candidate, so its pod takes no room on "b", and "a" takes "b"'s pod: "b" removable."""
    cluster.create_node("a", cpu="4", memory="16Gi", labels={POOL_LABEL: "pool-a"})
    cluster.create_node("b", cpu="4", memory="16Gi", labels={POOL_LABEL: "pool-b"})
    cluster.create_node("busy", cpu="4", memory="16Gi")
    _bind(cluster, "alice", "busy", "3500m", "1Gi")
    _bind(cluster, "web-1", "a", "1500m", "1Gi", owner="ReplicaSet")
    _bind(cluster, "web-2", "b", "1500m", "1Gi", owner="ReplicaSet")
    argv = ["inspect", "--kubeconfig", str(cluster.kubeconfig), "--json"]
    assert main(argv) == 0
    nodes = {n["node"]: n for n in json.loads(capsys.readouterr().out)["nodes"]}
    assert (nodes["a"]["verdict"], nodes["a"]["moves"]) == ("removable", {"default/web-1": "b"})
    assert (nodes["b"]["verdict"], nodes["b"]["no_room_for"]) == ("no-room", "default/web-2")
    assert main([*argv, "--min-size", "pool-a=1"]) == 0
    nodes = {n["node"]: n for n in json.loads(capsys.readouterr().out)["nodes"]}
    assert (nodes["a"]["verdict"], nodes["a"]["moves"]) == ("min-size", {})
    assert (nodes["b"]["verdict"], nodes["b"]["moves"]) == ("removable", {"default/web-2": "a"})


@pytest.mark.controlplane
def test_inspect_keeps_the_clusters_minimum_cores_and_memory(
    cluster: ControlPlane, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """On the real API server: three empty nodes of 4 cores and 16 GiB. The autoscaler's
    ``--cores-total 8:100`` lets one go (12 cores, 4 above the minimum) and keeps two
    (``resource-limit``); ``--memory-total 40:1000`` (GiB) keeps one; a busy node counts
    toward the totals too. The minimum sizes come from the extender's configuration."""
    for name in ("e-1", "e-2", "e-3"):
        cluster.create_node(name, cpu="4", memory="16Gi")
    argv = ["inspect", "--kubeconfig", str(cluster.kubeconfig), "--json"]
    assert main([*argv, "--cores-total", "8:100"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert sorted(n["verdict"] for n in report["nodes"]) == ["empty", "resource-limit", "resource-limit"]
    assert report["summary"]["resource-limit"] == 2
    assert main([*argv, "--memory-total", "16:1000"]) == 0
    verdicts = sorted(n["verdict"] for n in json.loads(capsys.readouterr().out)["nodes"])
    assert verdicts == ["empty", "empty", "resource-limit"]
    assert main([*argv, "--cores-total", "0:100", "--memory-total", "0:1000"]) == 0
    assert {n["verdict"] for n in json.loads(capsys.readouterr().out)["nodes"]} == {"empty"}
    config = tmp_path / "extender.yaml"
    config.write_text(
        yaml.safe_dump(
            {"cluster": {"node_group_labels": ["example.com/pool"], "node_group_min_sizes": {"x": 3}}}
        )
    )
    for name in ("x-1", "x-2", "x-3"):
        cluster.create_node(name, cpu="1", memory="1Gi", labels={"example.com/pool": "x"})
    assert main([*argv, "--config", str(config)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert [n["verdict"] for n in report["nodes"]] == ["empty"] * 3 + ["min-size"] * 3
    assert report["node_groups"] == {"x": {"size": 3, "min_size": 3, "removes": 0}}
    # the command line's minimum sizes replace the configuration's
    assert main([*argv, "--config", str(config), "--min-size", "x=2"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["node_groups"]["x"] == {"size": 3, "min_size": 2, "removes": 1}


@pytest.mark.controlplane
def test_inspect_counts_cores_rounded_up_and_memory_in_gib(
    cluster: ControlPlane, capsys: pytest.CaptureFixture[str]
) -> None:
    """On the real API server: three empty nodes of 1500m cpu and 1G (10^9 bytes) memory.
    cluster-autoscaler ``core/scaledown/resource/limits.go`` (``coresMemoryTotal``,
    ``computeAboveMin``, ``CheckDeltaWithinLimits``) counts each node's cores as
    ``core_utils.GetNodeCoresAndMemory`` reads them, ``Quantity.Value()``, rounded up: 2
    each, 6 in all; ``--cores-total 4:100`` leaves 6 - 4 = 2 to remove, one node (2 <= 2),
    and keeps two (rounded down, 3 in all, under 4 already: all three kept). Its
    ``--memory-total`` is in GiB: ``2:10`` leaves 3 * 10^9 - 2 * 2^30 = 852516352 bytes
    to remove, less than a node's 10^9: all three kept (in GB, 10^9 <= 10^9: one removed)."""
    for name in ("f-1", "f-2", "f-3"):
        cluster.create_node(name, cpu="1500m", memory="1G")
    argv = ["inspect", "--kubeconfig", str(cluster.kubeconfig), "--json"]
    assert main([*argv, "--cores-total", "4:100"]) == 0
    verdicts = sorted(n["verdict"] for n in json.loads(capsys.readouterr().out)["nodes"])
    assert verdicts == ["empty", "resource-limit", "resource-limit"]
    assert main([*argv, "--memory-total", "2:10"]) == 0
    verdicts = sorted(n["verdict"] for n in json.loads(capsys.readouterr().out)["nodes"])
    assert verdicts == ["resource-limit"] * 3


@pytest.mark.controlplane
def test_inspect_checks_the_least_utilized_candidate_first(
    cluster: ControlPlane, capsys: pytest.CaptureFixture[str]
) -> None:
    """On the real API server: "a" holds a replicated pod of 2 cpus of 4 (50%), "b" one of 1
    (25%), "busy" a bare pod of 3.5. The plan checks the least utilized first, "b": its pod
    (1) moves to "a" (2 + 1 = 3 <= 4), so "b" is removable; then "a"'s pod (2) fits neither
    on "b" (being removed) nor on "busy" (0.5 free): ``no-room``. Checked by name or most
    utilized first, "a" would be removable and "b" ``no-room``."""
    for name in ("a", "b", "busy"):
        cluster.create_node(name, cpu="4", memory="16Gi")
    _bind(cluster, "alice", "busy", "3500m", "1Gi")
    _bind(cluster, "web-a", "a", "2", "1Gi", owner="ReplicaSet")
    _bind(cluster, "web-b", "b", "1", "1Gi", owner="ReplicaSet")
    assert main(["inspect", "--kubeconfig", str(cluster.kubeconfig), "--json"]) == 0
    nodes = {n["node"]: n for n in json.loads(capsys.readouterr().out)["nodes"]}
    assert (nodes["b"]["verdict"], nodes["b"]["moves"]) == ("removable", {"default/web-b": "a"})
    assert (nodes["a"]["verdict"], nodes["a"]["no_room_for"]) == ("no-room", "default/web-a")


@pytest.mark.controlplane
def test_inspect_a_node_kept_at_its_groups_minimum_moves_no_pod(
    cluster: ControlPlane, capsys: pytest.CaptureFixture[str]
) -> None:
    """On the real API server: a1 and a2 (pool ``pool-a``, 4 cpus) each hold a replicated pod
    of 1 cpu; "big" (8 cpus) is pinned by a bare pod of 1. The plan finds both a1 and a2
    removable (a1's pod to a2, then both to big), but with ``--min-size pool-a=1`` the
    autoscaler removes one of the two (2 - 1) and keeps a2: its pod stays, so no move is
    shown for it, and the group removes 1."""
    for name in ("a1", "a2"):
        cluster.create_node(name, cpu="4", memory="16Gi", labels={POOL_LABEL: "pool-a"})
        _bind(cluster, f"web-{name}", name, "1", "1Gi", owner="ReplicaSet")
    cluster.create_node("big", cpu="8", memory="32Gi")
    _bind(cluster, "alice", "big", "1", "1Gi")
    argv = ["inspect", "--kubeconfig", str(cluster.kubeconfig), "--json"]
    assert main([*argv, "--min-size", "pool-a=1"]) == 0
    report = json.loads(capsys.readouterr().out)
    nodes = {n["node"]: n for n in report["nodes"]}
    assert (nodes["a1"]["verdict"], nodes["a2"]["verdict"]) == ("removable", "min-size")
    assert nodes["a2"]["moves"] == {}
    assert nodes["a1"]["moves"] != {}  # removed: its pod goes elsewhere
    assert report["node_groups"]["pool-a"] == {"size": 2, "min_size": 1, "removes": 1}


@pytest.mark.controlplane
def test_inspect_pod_scores_a_node_at_its_groups_minimum_as_busy(
    cluster: ControlPlane, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``inspect --pod`` with ``--min-size``: ScaleDownAware scores a node whose group is at
    its minimum size 100 (the autoscaler keeps it: no reason to keep pods off it), a quiet
    node of another group ``20 x utilization / threshold``: with the pod's 400m of 4 cpus,
    20 x 0.1 / 0.5 = 4. Both empty, 4 cpus, pools ``pool-a`` (minimum 1, one node) and
    ``pool-b``."""
    for name, pool in (("a", "pool-a"), ("b", "pool-b")):
        cluster.create_node(name, cpu="4", memory="16Gi", labels={POOL_LABEL: pool})
    path = tmp_path / "pod.yaml"
    path.write_text(yaml.safe_dump(pod_manifest("new", cpu="400m", memory="100Mi")))
    argv = ["inspect", "--kubeconfig", str(cluster.kubeconfig), "--pod", str(path), "--json"]
    assert main([*argv, "--min-size", "pool-a=1"]) == 0
    nodes = {n["node"]: n for n in json.loads(capsys.readouterr().out)["nodes"]}
    assert (nodes["a"]["scores"]["ScaleDownAware"], nodes["b"]["scores"]["ScaleDownAware"]) == (100, 4)


@pytest.mark.controlplane
def test_inspect_counts_pods_on_the_node_they_are_nominated_to(
    cluster: ControlPlane, capsys: pytest.CaptureFixture[str]
) -> None:
    """On the real API server: a pending pod the scheduler nominated to a node (its status
    as kube-scheduler writes it for a preemptor, or since 1.35 for a pod whose binding
    waits) counts there, as the autoscaler's snapshot counts it: its requests weigh, and a
    bare one pins the node, which would be empty without it. A replicated one there takes
    room another node's pod would have moved to. A nominated pod being deleted is left out."""
    cluster.create_node("n-nominated", cpu="4", memory="16Gi")
    cluster.create_node("n-full", cpu="4", memory="16Gi")
    cluster.create_node("n-web", cpu="4", memory="16Gi")
    _bind(cluster, "alice", "n-full", "3", "1Gi")
    _bind(cluster, "web", "n-web", "1500m", "1Gi", owner="ReplicaSet")
    for name, cpu in (("preemptor", "1"), ("leaving", "3")):
        pending = pod_manifest(name, cpu=cpu, memory="1Gi", scheduler_name="nobody")
        if name == "leaving":  # held by a finalizer once deleted
            pending["metadata"]["finalizers"] = ["stickypack.io/test"]
        cluster.create_pod(pod=pending)

    async def nominate(api: object) -> None:
        core = client.CoreV1Api(api)
        for name in ("preemptor", "leaving"):
            await core.patch_namespaced_pod_status(
                name, "default", {"status": {"nominatedNodeName": "n-nominated"}}
            )
        await core.delete_namespaced_pod("leaving", "default")

    cluster.call(nominate)
    try:
        assert main(["inspect", "--kubeconfig", str(cluster.kubeconfig), "--json"]) == 0
        report = json.loads(capsys.readouterr().out)
        nodes = {n["node"]: n for n in report["nodes"]}
        assert report["nominated_pods"] == ["default/preemptor"]
        nominated = nodes["n-nominated"]
        assert (nominated["pods"], nominated["cpu"]) == (1, pytest.approx(0.25))
        assert (nominated["verdict"], nominated["pinning"]) == ("pinned", ["default/preemptor"])
        # web's 1.5 cpu would fit beside the preemptor's 1, not beside alice's 3
        assert nodes["n-web"]["moves"] == {"default/web": "n-nominated"}

        async def nominated_elsewhere(api: object) -> None:
            await client.CoreV1Api(api).patch_namespaced_pod_status(
                "preemptor", "default", {"status": {"nominatedNodeName": "n-full"}}
            )

        cluster.call(nominated_elsewhere)  # 3 + 1 on n-full: web has room on n-nominated only
        assert main(["inspect", "--kubeconfig", str(cluster.kubeconfig), "--json"]) == 0
        nodes = {n["node"]: n for n in json.loads(capsys.readouterr().out)["nodes"]}
        assert nodes["n-nominated"]["verdict"] == "empty" and nodes["n-full"]["cpu"] == pytest.approx(1.0)
        assert main(["inspect", "--kubeconfig", str(cluster.kubeconfig)]) == 0
        assert "1 pending pods counted on the node the scheduler nominated them to" in capsys.readouterr().out
    finally:

        async def release(api: object) -> None:
            await client.CoreV1Api(api).patch_namespaced_pod(
                "leaving", "default", {"metadata": {"finalizers": None}}
            )

        cluster.call(release)


@pytest.mark.controlplane
def test_inspect_pod_explains_where_the_real_scheduler_binds_it(
    cluster: ControlPlane, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``inspect --pod`` with the z2jh policy names the node the real kube-scheduler, run
    with the rendered z2jh profile, then binds the same pod to; the nodes it cannot fit are
    shown filtered."""
    for name, used in (("a", "1"), ("b", "2500m"), ("c", "500m")):
        cluster.create_node(name, cpu="4", memory="16Gi")
        _bind(cluster, f"user-{name}", name, used, "1Gi")
    cluster.create_node("small", cpu="1", memory="1Gi")
    pod = pod_manifest("jupyter-new", cpu="1", memory="2Gi", scheduler_name="z2jh")
    path = tmp_path / "pod.yaml"
    path.write_text(yaml.safe_dump(pod))
    argv = ["inspect", "--kubeconfig", str(cluster.kubeconfig), "--pod", str(path), "--policy", "z2jh"]
    assert main([*argv, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    verdicts = {n["node"]: n for n in report["nodes"]}
    assert verdicts["small"]["filtered_by"] == "NodeResourcesFit"
    assert report["best"] == ["b"]  # the fullest node that fits: MostAllocated
    assert [n["node"] for n in report["nodes"]][:3] == ["b", "a", "c"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "filtered by NodeResourcesFit" in out and "best: b" in out
    cluster.start_scheduler(scheduler_config(["z2jh"]))
    cluster.create_pod(pod=pod)
    assert cluster.wait_bound(["jupyter-new"], timeout=30) == {"jupyter-new": "b"}
    # once bound, the pod counts on b: b is full, and the next one goes to a
    assert main([*argv, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["best"] == ["a"]


@pytest.mark.controlplane
def test_inspect_pod_says_kube_scheduler_scores_a_sample_of_a_large_cluster(
    cluster: ControlPlane, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """On 200 nodes kube-scheduler's adaptive ``percentageOfNodesToScore`` scores the first
    100 feasible nodes it finds: inspect says so, and the real kube-scheduler with z2jh's
    profile binds some pods off the fullest node inspect names best; stickypack's rendered
    profile (``percentageOfNodesToScore: 100``) binds every one of them there. A pod naming
    120 nodes in its required node affinity is searched for on those 120 alone."""
    for i in range(200):
        cluster.create_node(f"n{i:03d}", cpu="4", memory="16Gi")
    _bind(cluster, "filler", "n137", "3", "12Gi")
    pod = pod_manifest("probe", cpu="25m", memory="64Mi", scheduler_name="z2jh")
    path = tmp_path / "pod.yaml"
    path.write_text(yaml.safe_dump(pod))
    argv = ["inspect", "--kubeconfig", str(cluster.kubeconfig), "--pod", str(path)]
    assert main([*argv, "--policy", "z2jh", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["best"] == ["n137"]
    search = {"percentage": 0, "nodes": 200, "nodes_to_find": 100, "feasible": 200}
    assert report["kube_scheduler_search"] == search
    assert main([*argv, "--policy", "z2jh"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "kube-scheduler scores only the first 100 of these 200 feasible nodes it finds" in out
    assert "(percentageOfNodesToScore 0, adaptive, of 200 nodes)" in out
    assert main([*argv, "--policy", "stickypack", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["kube_scheduler_search"] == {**search, "percentage": 100, "nodes_to_find": 200}
    assert main([*argv, "--policy", "stickypack"]) == 0
    assert "kube-scheduler scores only" not in capsys.readouterr().out
    # nominated to the best node: kube-scheduler takes it without a search
    path.write_text(yaml.safe_dump({**pod, "status": {"nominatedNodeName": "n137"}}))
    assert main([*argv, "--policy", "z2jh"]) == 0
    assert "kube-scheduler scores only" not in capsys.readouterr().out
    # a profile that scores nothing stops at the first feasible node
    unscored = tmp_path / "unscored.yaml"
    unscored.write_text(
        "name: unscored\nprofiles: [{name: p, filters: [NodeResourcesFit],\n"
        "  score: [{plugin: NodeResourcesFit, weight: 0}]}]\n"
    )
    path.write_text(yaml.safe_dump(pod))
    assert main([*argv, "--policy", str(unscored), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["kube_scheduler_search"] == {**search, "nodes_to_find": 1}
    assert main([*argv, "--policy", str(unscored)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert (
        "kube-scheduler takes the first of these 200 feasible nodes it finds (the profile scores nothing)"
        in out
    )
    assert "scores only" not in out and "picks one at random" not in out
    path.write_text(yaml.safe_dump({**pod, "status": {"nominatedNodeName": "n137"}}))
    assert main([*argv, "--policy", str(unscored)]) == 0
    assert "takes the first" not in capsys.readouterr().out  # it takes the nominated node
    # a pod whose required node affinity names 120 nodes (matchFields metadata.name): NodeAffinity's
    # PreFilter leaves kube-scheduler those alone to search
    names = [f"n{i:03d}" for i in range(80, 200)]
    # one name a term (the API takes one value for a field's In), the terms ORed
    terms = [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [n]}]} for n in [*names, "gone"]
    ]
    affinity = {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}
    }
    path.write_text(yaml.safe_dump({**pod, "spec": {**pod["spec"], "affinity": affinity}}))
    assert main([*argv, "--policy", "z2jh", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["kube_scheduler_search"] == {**search, "nodes": 120, "feasible": 120}
    assert main([*argv, "--policy", "stickypack", "--json"]) == 0
    named = {"percentage": 100, "nodes": 120, "nodes_to_find": 120, "feasible": 120}
    assert json.loads(capsys.readouterr().out)["kube_scheduler_search"] == named
    path.write_text(yaml.safe_dump(pod))

    cluster.start_scheduler(scheduler_config(["z2jh", "stickypack"]))
    bound: dict[str, list[str]] = {}
    for profile in ("z2jh", "stickypack"):
        for i in range(10):  # one at a time: each pod's search starts where the last stopped
            name = f"{profile}-{i}"
            cluster.create_pod(pod=pod_manifest(name, cpu="25m", memory="64Mi", scheduler_name=profile))
            bound.setdefault(profile, []).append(cluster.wait_bound([name], timeout=30)[name])
    assert bound["stickypack"] == ["n137"] * 10
    assert any(node != "n137" for node in bound["z2jh"]), bound["z2jh"]


@pytest.mark.controlplane
def test_inspect_pod_counts_the_nominations_of_the_schedulers_other_profiles_when_told(
    cluster: ControlPlane, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A kube-scheduler running two profiles keeps the nominations of the pods of both: a
    pending pod of profile ``z2jh`` nominated to ``a`` (held by a scheduling gate) takes
    3 of its 4 cores for a pod of ``default-scheduler``, so the real kube-scheduler binds
    that pod to ``b``, though LeastAllocated prefers the empty ``a``. Told the other profile
    (``--scheduler-profile z2jh``), inspect counts it and names ``b``; not told, it counts
    the nominations of the pod's own ``schedulerName`` only and names ``a``."""
    cluster.create_node("a", cpu="4", memory="16Gi")
    cluster.create_node("b", cpu="4", memory="16Gi")
    _bind(cluster, "used", "b", "1", "1Gi")
    waiting = pod_manifest("waiting", cpu="3", memory="1Gi", scheduler_name="z2jh")
    waiting["spec"]["schedulingGates"] = [{"name": "stickypack.io/test"}]
    cluster.create_pod(pod=waiting)
    _nominate(cluster, "waiting", "a")
    probe = pod_manifest("probe", cpu="2", memory="1Gi")
    path = tmp_path / "probe.yaml"
    path.write_text(yaml.safe_dump(probe))
    argv = ["inspect", "--kubeconfig", str(cluster.kubeconfig), "--policy", "default", "--json"]
    argv += ["--pod", str(path)]
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["best"], report["nominated_pods"]) == (["a"], {})
    assert main([*argv, "--scheduler-profile", "z2jh"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["best"], report["nominated_pods"]) == (["b"], {"a": ["default/waiting"]})
    assert {n["node"]: n["filtered_by"] for n in report["nodes"]} == {"a": "NodeResourcesFit", "b": None}
    cluster.start_scheduler(scheduler_config(["default-scheduler", "z2jh"]))
    cluster.create_pod(pod=probe)
    assert cluster.wait_bound(["probe"], timeout=30) == {"probe": "b"}


@pytest.mark.controlplane
def test_inspect_pod_filters_with_nominated_pods_as_the_real_scheduler_does(
    cluster: ControlPlane, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A pending pod nominated to node ``a`` (held by a scheduling gate, so the nomination
    lasts; kube-scheduler records it from the pod's status, ``addNominatedPod``) takes room
    there for pods of its priority or lower: ``inspect --pod`` filters ``a`` out for a
    priority-0 pod, and the real kube-scheduler binds that pod to ``b``; for a pod of a
    higher priority class the nominated pod does not count, and both send it to ``a``.
    Without the nomination LeastAllocated (``default``) prefers the empty ``a``."""

    _priority_class(cluster, "sp-test-high", 1000)
    cluster.create_node("a", cpu="4", memory="16Gi")
    cluster.create_node("b", cpu="4", memory="16Gi")
    _bind(cluster, "used", "b", "1", "1Gi")
    probe = pod_manifest("probe", cpu="2", memory="1Gi", scheduler_name="default-scheduler")
    high = pod_manifest("high", cpu="2", memory="1Gi", scheduler_name="default-scheduler")
    high["spec"]["priorityClassName"] = "sp-test-high"
    pods = {"probe": probe, "high": high}
    paths = {name: tmp_path / f"{name}.yaml" for name in pods}  # as _inspect_pod_json writes them

    def inspect(name: str) -> dict:
        return _inspect_pod_json(cluster, tmp_path, capsys, pods[name])

    report = inspect("probe")  # nothing nominated yet: a, the emptier
    assert (report["best"], report["nominated_pods"], report["priority"]) == (["a"], {}, None)
    waiting = pod_manifest("waiting", cpu="3", memory="1Gi", scheduler_name="default-scheduler")
    waiting["spec"]["schedulingGates"] = [{"name": "stickypack.io/test"}]
    other = pod_manifest("other-scheduler", cpu="3", memory="1Gi", scheduler_name="nobody")
    cluster.create_pod(pod=waiting)
    cluster.create_pod(pod=other)

    _nominate(cluster, "waiting", "a")
    _nominate(cluster, "other-scheduler", "b")
    report = inspect("probe")
    verdicts = {n["node"]: n for n in report["nodes"]}
    assert (report["best"], verdicts["a"]["filtered_by"]) == (["b"], "NodeResourcesFit")
    assert verdicts["a"]["with_nominated_pods"] and not verdicts["b"]["with_nominated_pods"]
    # another scheduler's nominated pod (on b) is not counted: b's 3 free cores fit 2
    assert report["nominated_pods"] == {"a": ["default/waiting"]}
    assert (report["priority"], report["priority_from"]) == (0, "no default PriorityClass")
    report = inspect("high")
    assert (report["best"], report["nominated_pods"]) == (["a"], {})
    assert (report["priority"], report["priority_from"]) == (1000, "PriorityClass sp-test-high")
    assert main(["inspect", "--kubeconfig", str(cluster.kubeconfig), "--policy", "default", "--pod",
                 str(paths["probe"])]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "filtered with the pending pods nominated there of priority >= 0" in out
    assert "default/waiting on a" in out and "best: b" in out
    assert "filtered by NodeResourcesFit (nominated pods)" in out
    # an account that may not list PriorityClasses: the pod's priority taken as 0, said so
    limited = _account_that_lists(cluster, f"inspect-{uuid.uuid4().hex[:6]}", {"": ["nodes", "pods"]})
    assert main(["inspect", "--kubeconfig", str(limited), "--policy", "default", "--json",
                 "--pod", str(paths["high"])]) == 0  # fmt: skip
    report = json.loads(capsys.readouterr().out)
    assert (report["best"], report["priority"]) == (["b"], None)
    assert report["priority_from"] == "unknown: the PriorityClasses could not be listed (403); taken as 0"

    assert _kube_scheduler_binds(cluster, probe) == "b"
    # b now holds 1 + 2 cores: the high pod fits a only, beside the lower nominated pod
    report = inspect("high")
    assert report["best"] == ["a"] and {n["node"]: n for n in report["nodes"]}["b"]["filtered_by"]
    cluster.create_pod(pod=high)
    assert cluster.wait_bound(["high"], timeout=30) == {"high": "a"}


@pytest.mark.controlplane
def test_inspect_pod_applies_kube_schedulers_inter_pod_filters_as_the_real_scheduler_does(
    cluster: ControlPlane, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """kube-scheduler's NodePorts, InterPodAffinity and PodTopologySpread filters, which
    every profile runs (a policy does not name them), in ``inspect --pod``: ``a`` holds a
    pod the probe's required anti-affinity selects, ``b`` one with its host port, ``c`` one
    whose own anti-affinity selects the probe (symmetry); LeastAllocated would pick the
    emptier ``a`` or ``b``, and both inspect and the real kube-scheduler send the probe to
    the fullest node, ``d``. Then a pod spread over zones (``DoNotSchedule``, max skew 1,
    two of its kind in zone 1) is kept out of zone 1 by PodTopologySpread: ``c``."""
    zones = {"a": "z1", "b": "z1", "c": "z2", "d": "z2"}
    for node, zone in zones.items():
        cluster.create_node(node, cpu="4", memory="16Gi", labels={"topology.kubernetes.io/zone": zone})
    hostname = "kubernetes.io/hostname"
    _bind(cluster, "web-1", "a", "100m", "100Mi", app="web")
    _bind(cluster, "port-1", "b", "100m", "100Mi",
          spec={"containers": [{"name": "c", "image": "x", "ports": [{"containerPort": 80, "hostPort": 8080}],
                                "resources": {"requests": {"cpu": "100m", "memory": "100Mi"}}}]})  # fmt: skip
    guard = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"role": "probe"}}, "topologyKey": hostname}]}}  # fmt: skip
    _bind(cluster, "guard", "c", "1", "1Gi", spec={"affinity": guard})
    _bind(cluster, "d-fill", "d", "2", "1Gi")
    for k in range(2):
        _bind(cluster, f"spread-{k}", "a", "100m", "100Mi", app="spread")

    probe = pod_manifest("probe", cpu="500m", memory="100Mi", labels={"role": "probe"})
    probe["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 8080}]
    probe["spec"]["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": hostname}]}}  # fmt: skip
    spread = pod_manifest("spread-2", cpu="500m", memory="100Mi", labels={"app": "spread"})
    spread["spec"]["topologySpreadConstraints"] = [
        {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
         "labelSelector": {"matchLabels": {"app": "spread"}}}]  # fmt: skip

    report = _inspect_pod_json(cluster, tmp_path, capsys, probe)
    verdicts = {n["node"]: n["filtered_by"] for n in report["nodes"]}
    assert verdicts == {"a": "InterPodAffinity", "b": "NodePorts", "c": "InterPodAffinity", "d": None}
    assert (report["best"], report["namespaces_read"], report["volumes_read"]) == (["d"], True, True)
    assert _kube_scheduler_binds(cluster, probe) == "d"

    # zone 1 has 2 of its kind, zone 2 none: skew 3 there, 1 in zone 2
    report = _inspect_pod_json(cluster, tmp_path, capsys, spread)
    verdicts = {n["node"]: n["filtered_by"] for n in report["nodes"]}
    assert verdicts == {"a": "PodTopologySpread", "b": "PodTopologySpread", "c": None, "d": None}
    assert report["best"] == ["c"]  # c holds 1 core, d 2.5
    cluster.create_pod(pod=spread)
    assert cluster.wait_bound(["spread-2"], timeout=30) == {"spread-2": "c"}


def _spread_scores_and_best_without(report: dict) -> tuple[dict[str, int], list[str]]:
    """The PodTopologySpread score of each node of an ``inspect --pod`` report, and the best
    nodes the report's totals give without it (the same profile, that scorer turned off)."""
    weight = report["weights"]["PodTopologySpread"]
    feasible = [n for n in report["nodes"] if n["filtered_by"] is None]
    spread = {n["node"]: n["scores"]["PodTopologySpread"] for n in feasible}
    without = {n["node"]: n["total"] - weight * spread[n["node"]] for n in feasible}
    return spread, sorted(n for n, t in without.items() if t == max(without.values()))


@pytest.mark.controlplane
def test_inspect_pod_scores_schedule_anyway_spreading_as_the_real_scheduler_does(
    cluster: ControlPlane, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """kube-scheduler's PodTopologySpread score (weight 2 in its default profile) of a pod
    with two ``ScheduleAnyway`` constraints, zone (maxSkew 1) then hostname (maxSkew 2),
    selecting ``app=web``: ``a`` (z1) holds two web pods, ``b`` (z1) one, ``c`` (z2) none but
    a 1-core 4Gi pod, ``d`` has no zone label and nothing. By hand: ``d`` lacks a key, so it
    is ignored (0) and the others' weights are log(2 zones + 2) = 1.386 and log(3 nodes + 2) =
    1.609; raw a round(3 * 1.386 + 0 + 2 * 1.609 + 1) = 8, b round(3 * 1.386 + 1.609 + 1) =
    7, c round(0 + 1) = 1; normalized 100 * (8 + 1 - raw) // 8: 12, 25, 100. The fit scores
    prefer the empty ``d``, the spread ``c``: inspect and the real scheduler choose ``c``."""
    zone = "topology.kubernetes.io/zone"
    for node, labels in {"a": {zone: "z1"}, "b": {zone: "z1"}, "c": {zone: "z2"}, "d": {}}.items():
        cluster.create_node(node, cpu="4", memory="16Gi", labels=labels)
    for name, node in (("web-1", "a"), ("web-2", "a"), ("web-3", "b")):
        _bind(cluster, name, node, "100m", "100Mi", app="web")
    _bind(cluster, "fill", "c", "1", "4Gi")
    probe = pod_manifest("probe", cpu="100m", memory="100Mi", labels={"app": "web"})
    probe["spec"]["topologySpreadConstraints"] = [
        {"maxSkew": skew, "topologyKey": key, "whenUnsatisfiable": "ScheduleAnyway",
         "labelSelector": {"matchLabels": {"app": "web"}}}
        for key, skew in ((zone, 1), ("kubernetes.io/hostname", 2))
    ]  # fmt: skip

    report = _inspect_pod_json(cluster, tmp_path, capsys, probe)
    spread, best_without = _spread_scores_and_best_without(report)
    assert spread == {"a": 12, "b": 25, "c": 100, "d": 0}
    assert report["best"] == ["c"] and "c" not in best_without  # the score decides it
    assert report["spread_selector_read"] is None  # constraints of its own: no default selector
    assert _kube_scheduler_binds(cluster, probe) == "c"


@pytest.mark.controlplane
def test_inspect_pod_scores_system_default_spreading_of_a_services_pods_as_the_real_scheduler_does(
    cluster: ControlPlane, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A pod without spread constraints that a Service selects is spread by kube-scheduler's
    system defaults: hostname (maxSkew 3) and zone (maxSkew 5), selecting what the Service
    selects. Bare pods with the Service's labels (no controller manager runs): ``a`` (z1)
    one, ``b`` (z1) none but a 500m 2Gi pod of no Service, ``c`` (z2) two. By hand: weights
    log(3 nodes + 2) = 1.609 and log(2 zones + 2) = 1.386; raw a round(1.609 + 2 + 1 * 1.386 +
    4) = 9, b round(2 + 1.386 + 4) = 7, c round(2 * 1.609 + 2 + 2 * 1.386 + 4) = 12;
    normalized 100 * (12 + 7 - raw) // 12: 83, 100, 58. The fit scores prefer ``a``, the
    spread ``b``: inspect and the real scheduler choose ``b``. Without the Service the pod
    is not spread (PodTopologySpread skips it), unless a ReplicaSet selecting the same owns
    it; an account that may not list Services is said not to have read them."""
    zone = "topology.kubernetes.io/zone"
    for node, z in {"a": "z1", "b": "z1", "c": "z2"}.items():
        cluster.create_node(node, cpu="4", memory="16Gi", labels={zone: z})
    for name, node in (("svc-1", "a"), ("svc-2", "c"), ("svc-3", "c")):
        _bind(cluster, name, node, "100m", "100Mi", app="pts-svc")
    _bind(cluster, "fill", "b", "500m", "2Gi")
    probe = pod_manifest("probe", cpu="100m", memory="100Mi", labels={"app": "pts-svc", "extra": "x"})

    unserved = _inspect_pod_json(cluster, tmp_path, capsys, probe)
    assert "PodTopologySpread" not in unserved["weights"] and unserved["spread_selector_read"] is True
    assert unserved["best"] != ["b"]

    selector = {"app": "pts-svc"}
    service = {"metadata": {"name": "pts-svc"}, "spec": {"selector": selector, "ports": [{"port": 80}]}}
    template = {"metadata": {"labels": selector}, "spec": {"containers": [{"name": "c", "image": "x"}]}}
    replicas = {
        "metadata": {"name": "pts-rs"},
        "spec": {"replicas": 0, "selector": {"matchLabels": selector}, "template": template},
    }
    owned = copy.deepcopy(probe)
    owned["metadata"]["name"] = "owned"
    uid = "0b5e3f1c-0000-4000-8000-000000000001"  # no garbage collector runs: the uid is not checked
    owned["metadata"]["ownerReferences"] = [
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "pts-rs", "uid": uid, "controller": True}
    ]
    cluster.call(lambda api: client.AppsV1Api(api).create_namespaced_replica_set("default", replicas))
    try:
        # its ReplicaSet's selector alone (the Service's labels) spreads it the same
        by_owner = _inspect_pod_json(cluster, tmp_path, capsys, owned)
        assert _spread_scores_and_best_without(by_owner)[0] == {"a": 83, "b": 100, "c": 58}
    finally:
        cluster.call(lambda api: client.AppsV1Api(api).delete_namespaced_replica_set("pts-rs", "default"))

    cluster.call(lambda api: client.CoreV1Api(api).create_namespaced_service("default", service))
    try:
        report = _inspect_pod_json(cluster, tmp_path, capsys, probe)
        spread, best_without = _spread_scores_and_best_without(report)
        assert spread == {"a": 83, "b": 100, "c": 58}
        assert report["best"] == ["b"] and "b" not in best_without
        assert report["spread_selector_read"] is True

        # an account that may not list Services: said, and no default spreading scored
        limited = _account_that_lists(
            cluster, f"inspect-{uuid.uuid4().hex[:6]}", {"": ["nodes", "pods", "namespaces"]}
        )
        path = tmp_path / "probe.yaml"
        argv = ["inspect", "--kubeconfig", str(limited), "--policy", "default", "--pod", str(path)]
        assert main([*argv, "--json"]) == 0
        unlisted = json.loads(capsys.readouterr().out)
        assert unlisted["spread_selector_read"] is False and "PodTopologySpread" not in unlisted["weights"]
        assert main(argv) == 0
        assert "PodTopologySpread's system default spreading is not scored" in capsys.readouterr().out
        # a policy that does not score it does not read them, nor says so
        packing = [*argv[:3], "--policy", "stickypack", *argv[5:]]
        assert main(packing) == 0
        assert "system default spreading" not in capsys.readouterr().out
        assert main([*packing, "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["spread_selector_read"] is None

        assert _kube_scheduler_binds(cluster, probe) == "b"
    finally:
        cluster.call(lambda api: client.CoreV1Api(api).delete_namespaced_service("pts-svc", "default"))


@pytest.mark.controlplane
def test_inspect_pod_spreads_random_pods_where_the_real_scheduler_binds_them(
    cluster: ControlPlane, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Random probes, one after the other on one cluster (each bound probe counts for the
    next): pods of three apps with random ``ScheduleAnyway`` constraints (zone and/or
    hostname, maxSkew 1-3, selecting their app or ``web``, some with ``matchLabelKeys``,
    some honoring taints), or none, then spread by the system defaults when a Service
    selects them (app ``svc``), on nodes of random sizes in two zones, one without a zone
    label and one tainted NoSchedule (no probe goes there; its pods count in its zone unless
    a constraint honors taints). kube-scheduler's default profile binds each to a node
    ``inspect --pod --policy default`` names best; PodTopologySpread decides several."""
    rng = random.Random(39)
    zone, hostname = "topology.kubernetes.io/zone", "kubernetes.io/hostname"
    nodes = {"n1": "z1", "n2": "z1", "n3": "z2", "n4": "z2", "n5": None}
    for node, z in nodes.items():
        cpu = rng.choice(["4", "8"])
        cluster.create_node(
            node,
            cpu=cpu,
            memory=f"{4 * int(cpu)}Gi",
            labels={zone: z} if z else {},
            taints=["dedicated=system:NoSchedule"] if node == "n4" else None,
        )
    for k in range(10):
        app = rng.choice(["web", "api", "svc"])
        _bind(cluster, f"pre-{k}", rng.choice(list(nodes)), "100m", "200Mi", app=app, rev=rng.choice("ab"))
    service = {
        "metadata": {"name": "pts-rand"},
        "spec": {"selector": {"app": "svc"}, "ports": [{"port": 80}]},
    }
    cluster.call(lambda api: client.CoreV1Api(api).create_namespaced_service("default", service))
    try:
        cluster.start_scheduler(scheduler_config(["default-scheduler"]))
        decided = 0
        for k in range(16):
            app = rng.choice(["web", "api", "svc"])
            probe = pod_manifest(
                f"probe-{k}", cpu=f"{rng.choice([100, 300, 600])}m", memory="256Mi",
                labels={"app": app, "rev": rng.choice("ab")},
            )  # fmt: skip
            if app != "svc" or rng.random() < 0.3:
                probe["spec"]["topologySpreadConstraints"] = [
                    {
                        "maxSkew": rng.randint(1, 3),
                        "topologyKey": key,
                        "whenUnsatisfiable": "ScheduleAnyway",
                        "labelSelector": {"matchLabels": {"app": rng.choice([app, app, "web"])}},
                        **({"matchLabelKeys": ["rev"]} if rng.random() < 0.3 else {}),
                        **({"nodeTaintsPolicy": "Honor"} if rng.random() < 0.3 else {}),
                    }
                    for key in rng.sample([zone, hostname], rng.randint(1, 2))
                ]
            report = _inspect_pod_json(cluster, tmp_path, capsys, probe)
            cluster.create_pod(pod=probe)
            bound = cluster.wait_bound([f"probe-{k}"], timeout=30)[f"probe-{k}"]
            assert bound in report["best"], (k, probe["spec"].get("topologySpreadConstraints"), report)
            if "PodTopologySpread" in report["weights"]:
                decided += set(_spread_scores_and_best_without(report)[1]) != set(report["best"])
        assert decided >= 3
    finally:
        cluster.call(lambda api: client.CoreV1Api(api).delete_namespaced_service("pts-rand", "default"))


@pytest.mark.controlplane
def test_inspect_pod_spreads_z2jh_user_pods_as_the_real_user_scheduler_does(
    cluster: ControlPlane, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """z2jh's user-scheduler re-weights NodeAffinity, InterPodAffinity, NodeResourcesFit and
    ImageLocality and leaves PodTopologySpread at its default weight 2. ``a`` and ``b`` are
    alike, each with a 500m pod: ``a``'s of app ``web``, ``b``'s of app ``db``, so
    MostAllocated and the others tie. A web pod spread over hostnames (``ScheduleAnyway``)
    scores ``b`` 100 and ``a`` 0 there: the real user-scheduler binds it to ``b``, and
    ``inspect --policy z2jh`` names ``b`` alone."""
    for node in ("a", "b"):
        cluster.create_node(node, cpu="4", memory="16Gi")
    _bind(cluster, "web-1", "a", "500m", "1Gi", app="web")
    _bind(cluster, "db-1", "b", "500m", "1Gi", app="db")
    probe = pod_manifest("probe", cpu="100m", memory="100Mi", scheduler_name="z2jh", labels={"app": "web"})
    probe["spec"]["topologySpreadConstraints"] = [
        {"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "ScheduleAnyway",
         "labelSelector": {"matchLabels": {"app": "web"}}}
    ]  # fmt: skip
    path = tmp_path / "probe.yaml"
    path.write_text(yaml.safe_dump(probe))
    argv = ["inspect", "--kubeconfig", str(cluster.kubeconfig), "--policy", "z2jh", "--pod", str(path)]
    assert main([*argv, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["profile"] == "user-scheduler"
    assert report["weights"].get("PodTopologySpread") == 2
    spread, best_without = _spread_scores_and_best_without(report)
    assert spread == {"a": 0, "b": 100} and best_without == ["a", "b"]
    assert report["best"] == ["b"]
    cluster.start_scheduler(scheduler_config(["z2jh"]))
    cluster.create_pod(pod=probe)
    assert cluster.wait_bound(["probe"], timeout=30) == {"probe": "b"}


@pytest.mark.controlplane
def test_inspect_pod_takes_a_topology_key_no_label_can_have_as_the_api_server_does(
    cluster: ControlPlane, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The API server requires a spread constraint's ``topologyKey`` to be non-empty, not a
    label key: ``rack name`` is stored as written, and no node has such a label. Its
    ``ScheduleAnyway`` constraint makes kube-scheduler ignore every node in the score (0
    everywhere), which leaves the fit scores to place the pod: on ``b``, the emptier, where
    the real scheduler binds it. A ``DoNotSchedule`` one keeps the pod off every node
    (PodTopologySpread: the required label missing), and the pod stays unschedulable."""
    for node in ("a", "b"):
        cluster.create_node(node, cpu="4", memory="16Gi")
    _bind(cluster, "fill", "a", "1", "4Gi")
    cluster.start_scheduler(scheduler_config(["default-scheduler"]))
    for when in ("ScheduleAnyway", "DoNotSchedule"):
        probe = pod_manifest(f"odd-{when.lower()}", cpu="100m", memory="100Mi", labels={"app": "web"})
        probe["spec"]["topologySpreadConstraints"] = [
            {"maxSkew": 1, "topologyKey": "rack name", "whenUnsatisfiable": when,
             "labelSelector": {"matchLabels": {"app": "web"}}}
        ]  # fmt: skip
        report = _inspect_pod_json(cluster, tmp_path, capsys, probe)
        verdicts = {n["node"]: n for n in report["nodes"]}
        cluster.create_pod(pod=probe)
        name = probe["metadata"]["name"]
        if when == "ScheduleAnyway":
            assert {n: v["scores"]["PodTopologySpread"] for n, v in verdicts.items()} == {"a": 0, "b": 0}
            assert report["best"] == ["b"]
            assert cluster.wait_bound([name], timeout=30) == {name: "b"}
        else:
            assert {n: v["filtered_by"] for n, v in verdicts.items()} == {
                "a": "PodTopologySpread",
                "b": "PodTopologySpread",
            }
            assert report["best"] == []
            assert "missing required label" in cluster.wait_unschedulable([name], timeout=30)[name]


@pytest.mark.controlplane
def test_inspect_pod_reads_a_default_selector_only_from_a_controller_of_apps_v1(
    cluster: ControlPlane, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """kube-scheduler's ``DefaultSelector`` takes a pod's ReplicaSet's selector only when the
    controller reference's ``apiVersion`` is ``apps/v1`` (its group and version, parsed;
    ``v1`` for a ReplicationController): one of ``apps/v1beta2`` names no controller it
    reads. ``a`` holds a pod the ReplicaSet's selector selects, ``b`` a bigger one it does
    not, so the fit scores prefer ``a`` and the system default spreading ``b``. The pod owned
    through ``apps/v1`` is spread (``b``); through ``apps/v1beta2`` it is not
    (PodTopologySpread skipped): ``a``, where the real kube-scheduler binds it. Another
    ReplicaSet of the namespace, listed first (``pts-other``, selecting no pod), is not
    the pod's controller: its selector is not read. Owned by a StatefulSet of that selector
    through ``apps/v1``, it is spread the same."""
    for node in ("a", "b"):
        cluster.create_node(node, cpu="4", memory="16Gi")
    selector = {"app": "pts-owned"}
    _bind(cluster, "owned-1", "a", "100m", "100Mi", **selector)
    _bind(cluster, "fill", "b", "300m", "300Mi")
    template = {"metadata": {"labels": selector}, "spec": {"containers": [{"name": "c", "image": "x"}]}}
    replicas = {
        "metadata": {"name": "pts-rs"},
        "spec": {"replicas": 0, "selector": {"matchLabels": selector}, "template": template},
    }
    uid = "0b5e3f1c-0000-4000-8000-000000000002"  # no garbage collector runs: the uid is not checked

    def probe(name: str, api_version: str) -> dict:
        raw = pod_manifest(name, cpu="100m", memory="100Mi", labels=selector)
        ref = {"apiVersion": api_version, "kind": "ReplicaSet", "name": "pts-rs", "uid": uid}
        raw["metadata"]["ownerReferences"] = [{**ref, "controller": True}]
        return raw

    nobody = {"app": "pts-nobody"}
    other_template = {**template, "metadata": {"labels": nobody}}
    other = {
        "metadata": {"name": "pts-other"},
        "spec": {"replicas": 0, "selector": {"matchLabels": nobody}, "template": other_template},
    }
    cluster.call(lambda api: client.AppsV1Api(api).create_namespaced_replica_set("default", other))
    cluster.call(lambda api: client.AppsV1Api(api).create_namespaced_replica_set("default", replicas))
    try:
        current = _inspect_pod_json(cluster, tmp_path, capsys, probe("current", "apps/v1"))
        assert current["best"] == ["b"]
        assert _spread_scores_and_best_without(current)[1] == ["a"]  # the spreading decides
        # a StatefulSet's selector, read from the StatefulSets, spreads it the same
        stateful = probe("stateful", "apps/v1")
        stateful["metadata"]["ownerReferences"][0].update(kind="StatefulSet", name="pts-ss")
        spec = {
            "replicas": 0,
            "selector": {"matchLabels": selector},
            "serviceName": "pts",
            "template": template,
        }
        sets = {"metadata": {"name": "pts-ss"}, "spec": spec}
        cluster.call(lambda api: client.AppsV1Api(api).create_namespaced_stateful_set("default", sets))
        try:
            assert _inspect_pod_json(cluster, tmp_path, capsys, stateful)["best"] == ["b"]
        finally:
            cluster.call(
                lambda api: client.AppsV1Api(api).delete_namespaced_stateful_set("pts-ss", "default")
            )
        older = probe("older", "apps/v1beta2")
        report = _inspect_pod_json(cluster, tmp_path, capsys, older)
        assert "PodTopologySpread" not in report["weights"] and report["spread_selector_read"] is True
        assert report["best"] == ["a"]
        assert _kube_scheduler_binds(cluster, older) == "a"
    finally:
        cluster.call(lambda api: client.AppsV1Api(api).delete_namespaced_replica_set("pts-rs", "default"))
        cluster.call(lambda api: client.AppsV1Api(api).delete_namespaced_replica_set("pts-other", "default"))


@pytest.mark.controlplane
def test_inspect_pod_says_the_default_selector_unread_where_its_controllers_kind_is_not_served(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An API server that does not serve ``apps/v1`` (turned off with ``--runtime-config``)
    answers the list of the pod's ReplicaSet 404: ``inspect --pod`` says the default
    selector was not read (``spread_selector_read`` false), scores no system default
    spreading, and reports the node, status 0, as for a refusal (401, 403)."""
    from conftest import needs_binaries

    needs_binaries()
    cp = ControlPlane(apiserver_args=["--runtime-config=apps/v1=false"])
    cp.start()
    try:
        cp.create_node("a", cpu="4", memory="16Gi")
        probe = pod_manifest("owned", cpu="100m", memory="100Mi", labels={"app": "pts-owned"})
        ref = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "pts-rs", "uid": "u"}
        probe["metadata"]["ownerReferences"] = [{**ref, "controller": True}]
        report = _inspect_pod_json(cp, tmp_path, capsys, probe)
        assert report["spread_selector_read"] is False and "PodTopologySpread" not in report["weights"]
        assert report["best"] == ["a"]
    finally:
        cp.stop(failed=cp.failed)


#: kube-scheduler's ``-v=10`` line for each plugin's weighted score of each node
#: (``prioritizeNodes`` in ``schedule_one.go``), its PodTopologySpread ones.
_SPREAD_SCORED = re.compile(
    r'"Plugin scored node for pod" pod="(?P<pod>[^"]+)" plugin="PodTopologySpread" '
    r'node="(?P<node>[^"]+)" score=(?P<score>\d+)'
)


def _logged_spread_scores(log: Path, pod_key: str, weight: int) -> dict[str, int]:
    """The PodTopologySpread scores (unweighted) kube-scheduler logged for ``pod_key``; none
    when it skipped the plugin or did not score (one feasible node)."""
    return {
        m["node"]: int(m["score"]) // weight
        for m in _SPREAD_SCORED.finditer(log.read_text(errors="replace"))
        if m["pod"] == pod_key
    }


#: The labels of the ReplicaSet ``pts-diff`` (and the Service ``pts-diff`` selects ``app``).
_OWNED = {"app": "svc", "rev": "a"}


def _random_soft_constraint(rng: random.Random, key: str, app: str) -> dict:
    """A ``ScheduleAnyway`` constraint on ``key``: matchLabels, matchExpressions, an empty
    selector or none; maybe ``matchLabelKeys`` and either inclusion policy."""
    constraint: dict = {"maxSkew": rng.randint(1, 3), "topologyKey": key}
    constraint["whenUnsatisfiable"] = "ScheduleAnyway"
    selector = rng.choice(
        [
            {"matchLabels": {"app": rng.choice([app, app, "web"])}},
            {"matchExpressions": [{"key": "app", "operator": "In", "values": ["web", "api"]}]},
            {},
            None,
        ]
    )
    if selector is not None:
        constraint["labelSelector"] = selector
        if rng.random() < 0.3:
            constraint["matchLabelKeys"] = ["rev"]
    for policy, value in (("nodeTaintsPolicy", "Honor"), ("nodeAffinityPolicy", "Ignore")):
        if rng.random() < 0.3:
            constraint[policy] = value
    return constraint


def _random_spread_probe(rng: random.Random, name: str, nodes: list[str], default: bool, z2jh: bool) -> dict:
    """A probe for :func:`test_inspect_pod_spread_scores_are_the_real_schedulers_node_by_node`:
    with ``default``, a pod of the Service without constraints (maybe owned by its
    ReplicaSet through ``apps/v1`` or ``apps/v1beta2``), else one with random
    ``ScheduleAnyway`` constraints (zone, hostname, pool) and maybe a ``DoNotSchedule`` one;
    maybe tolerating the taint, with a node selector or a ``matchFields`` affinity."""
    app = "svc" if default else rng.choice(["web", "api", "svc"])
    probe = pod_manifest(
        name, cpu="100m", memory="100Mi", labels={"app": app, "rev": rng.choice("ab")},
        scheduler_name="z2jh" if z2jh else "default-scheduler",
        tolerations=[{"key": "dedicated", "operator": "Exists"}] if rng.random() < 0.3 else None,
        node_selector={"pool": "x"} if rng.random() < 0.2 else None,
        namespace="default" if default else rng.choice(["default", "default", "pts-other"]),
    )  # fmt: skip
    if rng.random() < 0.2:
        term = {"key": "metadata.name", "operator": "NotIn", "values": [rng.choice(nodes)]}
        required = {"nodeSelectorTerms": [{"matchFields": [term]}]}
        node_affinity = {"requiredDuringSchedulingIgnoredDuringExecution": required}
        probe["spec"]["affinity"] = {"nodeAffinity": node_affinity}
    if default:
        if rng.random() < 0.6:
            probe["metadata"]["labels"] = dict(_OWNED)
            ref = {"kind": "ReplicaSet", "name": "pts-diff", "uid": "0b5e3f1c-0000-4000-8000-000000000003"}
            version = rng.choice(["apps/v1", "apps/v1beta2"])
            probe["metadata"]["ownerReferences"] = [{**ref, "apiVersion": version, "controller": True}]
        return probe
    zone, hostname = "topology.kubernetes.io/zone", "kubernetes.io/hostname"
    keys = rng.sample([zone, hostname, "pool"], rng.randint(1, 2))
    constraints = [_random_soft_constraint(rng, key, app) for key in keys]
    if rng.random() < 0.2:
        hard = {"maxSkew": 5, "topologyKey": "kubernetes.io/os", "whenUnsatisfiable": "DoNotSchedule"}
        constraints.append({**hard, "labelSelector": {"matchLabels": {"app": app}}})
    probe["spec"]["topologySpreadConstraints"] = constraints
    return probe


@pytest.mark.controlplane
@pytest.mark.parametrize("seed", [37, 41])
def test_inspect_pod_spread_scores_are_the_real_schedulers_node_by_node(
    cluster: ControlPlane, tmp_path: Path, capsys: pytest.CaptureFixture[str], seed: int
) -> None:
    """Random probes (:func:`_random_spread_probe`: one in four spread by the system
    defaults, the others by their own constraints; two in five placed by z2jh's
    user-scheduler, the others by the default profile) on random nodes (three zones and
    none, a pool label on some, a hostname label shared, a NoSchedule taint, one node
    cordoned), among pods of two namespaces, some of them terminating (held by a
    finalizer). Each node's PodTopologySpread score that ``inspect --pod`` reports is the
    one the real kube-scheduler logs (``-v=10``) when it schedules the probe, which then
    stays for the next."""
    rng = random.Random(seed)
    _namespace(cluster, "pts-other")
    nodes = [f"n{k}" for k in range(7)]
    for node in nodes:
        labels = {"topology.kubernetes.io/zone": z} if (z := rng.choice(["z1", "z2", "z3", None])) else {}
        labels.update({"pool": "x"} if rng.random() < 0.3 else {})
        labels.update({"kubernetes.io/hostname": "shared"} if rng.random() < 0.2 else {})
        taints = ["dedicated=system:NoSchedule"] if rng.random() < 0.2 else None
        cluster.create_node(node, cpu="8", memory="32Gi", labels=labels, taints=taints)
    cordoned = rng.choice(nodes)
    cluster.call(lambda api: client.CoreV1Api(api).patch_node(cordoned, {"spec": {"unschedulable": True}}))
    held = []
    for k in range(25):
        labels = {"app": rng.choice(["web", "api", "svc"]), "rev": rng.choice("ab")}
        namespace = rng.choice(["default", "default", "default", "pts-other"])
        raw = pod_manifest(f"pre-{k}", cpu="100m", memory="100Mi", labels=labels, namespace=namespace)
        raw["spec"]["nodeName"] = rng.choice(nodes)
        if rng.random() < 0.15:
            raw["metadata"]["finalizers"] = ["example.com/hold"]
            held.append((raw["metadata"]["name"], namespace))
        cluster.create_pod(pod=raw)
    for name, namespace in held:  # terminating, kept by the finalizer
        cluster.call(lambda api, n=name, ns=namespace: client.CoreV1Api(api).delete_namespaced_pod(n, ns))
    service = {"metadata": {"name": "pts-diff"}, "spec": {"selector": {"app": "svc"}, "ports": [{"port": 8}]}}
    template = {"metadata": {"labels": _OWNED}, "spec": {"containers": [{"name": "c", "image": "x"}]}}
    replicas = {
        "metadata": {"name": "pts-diff"},
        "spec": {"replicas": 0, "selector": {"matchLabels": _OWNED}, "template": template},
    }
    cluster.call(lambda api: client.CoreV1Api(api).create_namespaced_service("default", service))
    cluster.call(lambda api: client.AppsV1Api(api).create_namespaced_replica_set("default", replicas))
    compared: list[str] = []
    try:
        scheduler = cluster.start_scheduler(scheduler_config(["default-scheduler", "z2jh"]), args=["-v=10"])
        for k in range(16):
            default, z2jh = k % 4 == 0, rng.random() < 0.4
            probe = _random_spread_probe(rng, f"probe-{k}", nodes, default, z2jh)
            namespace = probe["metadata"]["namespace"]
            path = tmp_path / f"probe-{k}.yaml"
            path.write_text(yaml.safe_dump(probe))
            argv = ["inspect", "--kubeconfig", str(cluster.kubeconfig), "--json", "--pod", str(path)]
            assert main([*argv, "--policy", "z2jh" if z2jh else "default"]) == 0
            report = json.loads(capsys.readouterr().out)
            feasible = [n for n in report["nodes"] if n["filtered_by"] is None]
            if not feasible:
                continue
            ours = {n["node"]: n["scores"].get("PodTopologySpread", 0) for n in feasible}  # skipped: 0
            cluster.create_pod(pod=probe)
            cluster.wait_bound([f"probe-{k}"], timeout=30, namespace=namespace)
            if len(feasible) == 1:
                continue  # kube-scheduler does not score a lone node
            key = f"{namespace}/probe-{k}"
            deadline = time.monotonic() + 5
            while (logged := _logged_spread_scores(scheduler.log_path, key, 2)).keys() != ours.keys():
                if not logged and "PodTopologySpread" not in report["weights"]:
                    break  # skipped by both
                assert time.monotonic() < deadline, (key, ours, logged)
                time.sleep(0.1)
            theirs = {node: logged.get(node, 0) for node in ours}
            assert ours == theirs, (key, probe["spec"].get("topologySpreadConstraints"), probe["metadata"])
            compared.append("z2jh" if z2jh else "defaults" if default else "own")
        assert len(compared) >= 10 and {"z2jh", "defaults", "own"} <= set(compared), compared
    finally:
        cluster.call(lambda api: client.CoreV1Api(api).delete_namespaced_service("pts-diff", "default"))
        cluster.call(lambda api: client.AppsV1Api(api).delete_namespaced_replica_set("pts-diff", "default"))
        for name, namespace in held:
            cluster.call(
                lambda api, n=name, ns=namespace: client.CoreV1Api(api).patch_namespaced_pod(
                    n, ns, {"metadata": {"finalizers": None}}
                )
            )


def _kube_scheduler_binds(cluster: ControlPlane, pod: dict) -> str:
    """Start the real kube-scheduler (its default profile), create ``pod`` and return the
    node it binds the pod to (within 30 s)."""
    cluster.start_scheduler(scheduler_config(["default-scheduler"]))
    cluster.create_pod(pod=pod)
    name = pod["metadata"]["name"]
    return cluster.wait_bound([name], timeout=30)[name]


def _inspect_pod_json(
    cluster: ControlPlane, tmp_path: Path, capsys: pytest.CaptureFixture[str], pod: dict
) -> dict:
    path = tmp_path / f"{pod['metadata']['name']}.yaml"
    path.write_text(yaml.safe_dump(pod))
    argv = ["inspect", "--kubeconfig", str(cluster.kubeconfig), "--policy", "default", "--json"]
    assert main([*argv, "--pod", str(path)]) == 0
    return json.loads(capsys.readouterr().out)


def _priority_class(cluster: ControlPlane, name: str, value: int) -> None:
    """A PriorityClass ``name`` of ``value`` (kept if an earlier test made it: classes
    outlive the cluster fixture's reset)."""

    async def make(api: object) -> None:
        try:
            body = {"metadata": {"name": name}, "value": value}
            await client.SchedulingV1Api(api).create_priority_class(body)
        except client.exceptions.ApiException as exc:
            if exc.status != 409:
                raise

    cluster.call(make)


def _nominate(cluster: ControlPlane, name: str, node: str) -> None:
    async def nominate(api: object) -> None:
        await client.CoreV1Api(api).patch_namespaced_pod_status(
            name, "default", {"status": {"nominatedNodeName": node}}
        )

    cluster.call(nominate)


def test_inspect_pod_keeps_the_pods_on_the_nodes_for_what_the_scores_read() -> None:
    """``_pods_on_nodes``: the pods on the nodes are kept (not None) whenever a score reads
    them even though no filter does: the pod's ScheduleAnyway spread constraint or default
    spread selector (PodTopologySpread), its preferred pod affinity or anti-affinity, or a
    bound pod's preferred terms alone (InterPodAffinity scores those that select the pod);
    with none of these, and no filter's rules, None."""
    from stickypack.cli.inspect import _pods_on_nodes
    from stickypack.core.routing import LabelSelector
    from stickypack.kube.cache import ClusterCache
    from stickypack.kube.snapshot import Snapshot

    term = {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}
    preferred = "preferredDuringSchedulingIgnoredDuringExecution"

    def pod(name: str, **spec: object) -> Pod:
        raw = pod_manifest(name, cpu="100m", memory="100Mi", labels={"app": "web"})
        raw["spec"].update(spec)
        return Pod.from_dict(raw)

    def snapshot(*bound: Pod) -> Snapshot:
        table = _table({"n0": (4000, 16)})
        for p in bound:
            table.add_pod(table.index["n0"], p)
        cache = ClusterCache(table, clock=lambda: 0.0)
        return Snapshot(cache, pods_by_node={"n0": list(bound)}, namespace_labels={"default": {"team": "a"}})

    def weighted(kind: str) -> dict[str, object]:
        return {kind: {preferred: [{"weight": 10, "podAffinityTerm": term}]}}

    plain = pod("plain")
    assert _pods_on_nodes(snapshot(pod("other")), plain) is None
    soft = {"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": {"app": "web"}}}  # fmt: skip
    defaulted = dataclasses.replace(plain, default_spread_selector=LabelSelector({"app": "web"}))
    for newcomer in (
        pod("spread", topologySpreadConstraints=[soft]),
        defaulted,
        pod("near", affinity=weighted("podAffinity")),
        pod("apart", affinity=weighted("podAntiAffinity")),
    ):
        kept = _pods_on_nodes(snapshot(pod("other")), newcomer)
        assert kept is not None and [p.name for p in kept.pods[0]] == ["other"], newcomer.name
        assert kept.namespace_labels == {"default": {"team": "a"}}  # the terms' namespaceSelector
    for kind in ("podAffinity", "podAntiAffinity"):
        kept = _pods_on_nodes(snapshot(pod("bound", affinity=weighted(kind))), plain)
        assert kept is not None and [p.name for p in kept.pods[0]] == ["bound"], kind


@pytest.mark.controlplane
def test_inspect_pod_scores_the_pods_preferred_pod_affinity_as_the_real_scheduler_does(
    cluster: ControlPlane, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """kube-scheduler's InterPodAffinity score (default profile, weight 2) of the pod's own
    preferred terms: the probe prefers the zone of ``app=web`` pods (weight 100, by
    ``matchExpressions``) and, less, not their node (weight 50). ``web`` runs on ``a`` (zone
    z1, 2 cores used), a filler on ``b`` (z1, 1 core), ``c`` (z2) is empty: raw sums a
    100 - 50 = 50, b 100, c 0, normalized 50, 100, 0. LeastAllocated alone would take the
    empty ``c``; both inspect and the real kube-scheduler send the probe to ``b``."""
    zones = {"a": "z1", "b": "z1", "c": "z2"}
    for node, zone in zones.items():
        cluster.create_node(node, cpu="4", memory="16Gi", labels={"topology.kubernetes.io/zone": zone})
    _bind(cluster, "web", "a", "2", "100Mi", app="web")
    _bind(cluster, "filler", "b", "1", "100Mi")
    near = {"labelSelector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]}]},
            "topologyKey": "topology.kubernetes.io/zone"}  # fmt: skip
    apart = {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}
    preferred = "preferredDuringSchedulingIgnoredDuringExecution"
    probe = pod_manifest("probe", cpu="500m", memory="100Mi")
    probe["spec"]["affinity"] = {
        "podAffinity": {preferred: [{"weight": 100, "podAffinityTerm": near}]},
        "podAntiAffinity": {preferred: [{"weight": 50, "podAffinityTerm": apart}]},
    }
    report = _inspect_pod_json(cluster, tmp_path, capsys, probe)
    scores = {n["node"]: n["scores"].get("InterPodAffinity") for n in report["nodes"]}
    assert scores == {"a": 50, "b": 100, "c": 0}
    assert report["best"] == ["b"]
    assert _kube_scheduler_binds(cluster, probe) == "b"


@pytest.mark.controlplane
def test_inspect_pod_scores_the_bound_pods_terms_that_select_it_as_the_real_scheduler_does(
    cluster: ControlPlane, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """kube-scheduler's InterPodAffinity score of a pod without terms of its own, by the
    terms of the pods on the nodes that select it (``processExistingPod``): ``guard`` on
    ``a`` (zone z1, nearly empty) prefers the probe off its node (anti-affinity, weight 80),
    ``magnet`` on ``c`` (z2, 2 cores used) requires pods like the probe in its zone
    (hardPodAffinityWeight 1); ``b`` (z1) holds 1 core. Raw sums a -80, b 0, c 1, normalized
    0, 98 (100 * 80 / 81 = 98.8, truncated), 100. LeastAllocated alone would take ``a``,
    the magnet alone ``c``; both inspect and the real kube-scheduler send the probe to ``b``."""
    zones = {"a": "z1", "b": "z1", "c": "z2"}
    for node, zone in zones.items():
        cluster.create_node(node, cpu="4", memory="16Gi", labels={"topology.kubernetes.io/zone": zone})
    preferred = "preferredDuringSchedulingIgnoredDuringExecution"
    selects_probe = {"matchLabels": {"role": "probe"}}
    guard = {"podAntiAffinity": {preferred: [{"weight": 80, "podAffinityTerm": {
        "labelSelector": selects_probe, "topologyKey": "kubernetes.io/hostname"}}]}}  # fmt: skip
    magnet = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": selects_probe, "topologyKey": "topology.kubernetes.io/zone"}]}}  # fmt: skip
    _bind(cluster, "guard", "a", "100m", "100Mi", spec={"affinity": guard})
    _bind(cluster, "filler", "b", "1", "100Mi")
    _bind(cluster, "magnet", "c", "2", "100Mi", spec={"affinity": magnet})
    probe = pod_manifest("probe", cpu="500m", memory="100Mi", labels={"role": "probe"})
    report = _inspect_pod_json(cluster, tmp_path, capsys, probe)
    scores = {n["node"]: n["scores"].get("InterPodAffinity") for n in report["nodes"]}
    assert scores == {"a": 0, "b": 98, "c": 100}
    assert report["best"] == ["b"]
    assert _kube_scheduler_binds(cluster, probe) == "b"


@pytest.mark.controlplane
def test_inspect_pod_scores_preferred_terms_of_other_namespaces_as_the_real_scheduler_does(
    cluster: ControlPlane, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The InterPodAffinity score's namespaces: the probe (namespace ``default``) prefers the
    node of an ``app=web`` pod of a namespace labelled ``env=prod`` (``namespaceSelector``,
    weight 100) and, less, not the node of one in namespace ``sp-ipa-dev`` (listed, weight
    30). ``a`` holds 2 cores of filler, ``b`` a web pod of ``sp-ipa-prod`` (1 core), ``c``
    one of ``sp-ipa-dev`` (500m): raw a 0, b 100, c -30, normalized 23 (100 * 30 / 130),
    100, 0 (a term read as selecting every namespace, or the probe's alone, would score
    otherwise). LeastAllocated alone would take ``c``; both inspect and the real
    kube-scheduler send the probe to ``b``."""
    for namespace, env in (("sp-ipa-prod", "prod"), ("sp-ipa-dev", "dev")):
        _namespace(cluster, namespace, env=env)
    for node in ("a", "b", "c"):
        cluster.create_node(node, cpu="4", memory="16Gi")
    _bind(cluster, "filler", "a", "2", "100Mi")
    for name, node, namespace, cpu in (("web", "b", "sp-ipa-prod", "1"), ("web", "c", "sp-ipa-dev", "500m")):
        raw = pod_manifest(name, cpu=cpu, memory="100Mi", labels={"app": "web"}, namespace=namespace)
        raw["spec"]["nodeName"] = node
        cluster.create_pod(pod=raw)
    web = {"matchLabels": {"app": "web"}}
    hostname = "kubernetes.io/hostname"
    prod_namespaces = {"matchLabels": {"env": "prod"}}
    prod = {"labelSelector": web, "namespaceSelector": prod_namespaces, "topologyKey": hostname}
    dev = {"labelSelector": web, "namespaces": ["sp-ipa-dev"], "topologyKey": hostname}
    preferred = "preferredDuringSchedulingIgnoredDuringExecution"
    probe = pod_manifest("probe", cpu="500m", memory="100Mi")
    probe["spec"]["affinity"] = {
        "podAffinity": {preferred: [{"weight": 100, "podAffinityTerm": prod}]},
        "podAntiAffinity": {preferred: [{"weight": 30, "podAffinityTerm": dev}]},
    }
    report = _inspect_pod_json(cluster, tmp_path, capsys, probe)
    scores = {n["node"]: n["scores"].get("InterPodAffinity") for n in report["nodes"]}
    assert scores == {"a": 23, "b": 100, "c": 0}
    assert (report["best"], report["namespaces_read"]) == (["b"], True)
    assert _kube_scheduler_binds(cluster, probe) == "b"


@pytest.mark.controlplane
def test_inspect_pod_reads_a_bound_pods_label_keys_as_the_api_server_merged_them(
    cluster: ControlPlane, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``matchLabelKeys`` are merged into a term's selector by the API server when it creates
    the pod, with the pod's labels then (kube-scheduler never merges them): ``guard`` on
    ``a`` (nearly empty) prefers pods ``role=probe`` of its own track off its node (weight
    80, ``matchLabelKeys: [track]``), created with ``track=v1`` and relabelled ``track=v2``
    since; its selector still says ``track in (v1)``, and selects the probe (``track=v1``).
    ``b`` holds 1 core, ``c`` 2: raw a -80, b 0, c 0, normalized 0, 100, 100. A selector
    merged again with the guard's labels of now would select no pod (``track in (v1)`` and
    ``in (v2)``), and LeastAllocated alone takes ``a``; both inspect and the real
    kube-scheduler send the probe to ``b``."""
    for node in ("a", "b", "c"):
        cluster.create_node(node, cpu="4", memory="16Gi")
    preferred = "preferredDuringSchedulingIgnoredDuringExecution"
    term = {"labelSelector": {"matchLabels": {"role": "probe"}}, "matchLabelKeys": ["track"],
            "topologyKey": "kubernetes.io/hostname"}  # fmt: skip
    guard = {"podAntiAffinity": {preferred: [{"weight": 80, "podAffinityTerm": term}]}}
    _bind(cluster, "guard", "a", "100m", "100Mi", spec={"affinity": guard}, track="v1")
    _bind(cluster, "filler-b", "b", "1", "100Mi")
    _bind(cluster, "filler-c", "c", "2", "100Mi")

    async def relabel(api: object) -> None:
        await client.CoreV1Api(api).patch_namespaced_pod(
            "guard", "default", {"metadata": {"labels": {"track": "v2"}}}
        )

    cluster.call(relabel)
    probe = pod_manifest("probe", cpu="500m", memory="100Mi", labels={"role": "probe", "track": "v1"})
    report = _inspect_pod_json(cluster, tmp_path, capsys, probe)
    scores = {n["node"]: n["scores"].get("InterPodAffinity") for n in report["nodes"]}
    assert scores == {"a": 0, "b": 100, "c": 100}
    assert report["best"] == ["b"]
    assert _kube_scheduler_binds(cluster, probe) == "b"


@pytest.mark.controlplane
def test_inspect_pod_scores_terms_of_terminating_pods_and_cordoned_nodes_as_the_real_scheduler_does(
    cluster: ControlPlane, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Which pods InterPodAffinity's score counts: a pod being deleted (held by a
    finalizer) is in kube-scheduler's cache until it is gone, and a cordoned node's pods
    count for their zone though the node takes no pod. ``leaving`` on ``a`` (zone z1, nearly
    empty), being deleted, prefers pods ``role=probe`` off its node (weight 80); ``web``
    runs on the cordoned ``c`` (zone z2); ``b`` (z2) holds 1 core. The first probe
    (``role=probe``): raw a -80, b 0, normalized 0, 100, to ``b``. The second (not selected
    by ``leaving``) prefers web's zone (weight 100): raw a 0, b 100, to ``b``. LeastAllocated
    alone takes ``a`` both times; so do both inspect and the real kube-scheduler, were
    either pod left out."""
    cluster.create_node("a", cpu="4", memory="16Gi", labels={"topology.kubernetes.io/zone": "z1"})
    cluster.create_node("b", cpu="4", memory="16Gi", labels={"topology.kubernetes.io/zone": "z2"})
    cluster.create_node("c", cpu="4", memory="16Gi", labels={"topology.kubernetes.io/zone": "z2"})
    preferred = "preferredDuringSchedulingIgnoredDuringExecution"
    apart = {"labelSelector": {"matchLabels": {"role": "probe"}}, "topologyKey": "kubernetes.io/hostname"}
    leaving = pod_manifest("leaving", cpu="100m", memory="100Mi")
    leaving["spec"].update(nodeName="a", affinity={"podAntiAffinity": {preferred: [
        {"weight": 80, "podAffinityTerm": apart}]}})  # fmt: skip
    leaving["metadata"]["finalizers"] = ["stickypack.io/test"]
    cluster.create_pod(pod=leaving)
    _bind(cluster, "web", "c", "100m", "100Mi", app="web")
    _bind(cluster, "filler", "b", "1", "100Mi")

    async def cordon_and_delete(api: object) -> None:
        core = client.CoreV1Api(api)
        await core.patch_node("c", {"spec": {"unschedulable": True}})
        await core.delete_namespaced_pod("leaving", "default")

    async def release(api: object) -> None:
        await client.CoreV1Api(api).patch_namespaced_pod(
            "leaving", "default", {"metadata": {"finalizers": None}}
        )

    cluster.call(cordon_and_delete)
    try:
        web = {"matchLabels": {"app": "web"}}
        near = {"labelSelector": web, "topologyKey": "topology.kubernetes.io/zone"}
        first = pod_manifest("probe-1", cpu="500m", memory="100Mi", labels={"role": "probe"})
        second = pod_manifest("probe-2", cpu="500m", memory="100Mi")
        second["spec"]["affinity"] = {"podAffinity": {preferred: [{"weight": 100, "podAffinityTerm": near}]}}
        reports = [_inspect_pod_json(cluster, tmp_path, capsys, pod) for pod in (first, second)]
        for report in reports:
            scores = {n["node"]: n["scores"].get("InterPodAffinity") for n in report["nodes"]}
            assert scores == {"a": 0, "b": 100, "c": None}
            assert report["best"] == ["b"]
            assert {n["node"]: n["filtered_by"] for n in report["nodes"]}["c"] == "NodeUnschedulable"
        cluster.start_scheduler(scheduler_config(["default-scheduler"]))
        for pod in (first, second):
            cluster.create_pod(pod=pod)
            name = pod["metadata"]["name"]
            assert cluster.wait_bound([name], timeout=30) == {name: "b"}  # the first adds 500m to b
    finally:
        cluster.call(release)


def _namespace(cluster: ControlPlane, name: str, **labels: str) -> None:
    """A namespace ``name`` with ``labels`` (kept if an earlier test made it: namespaces
    outlive the cluster fixture's reset, which deletes the pods of every namespace)."""

    async def make(api: object) -> None:
        try:
            await client.CoreV1Api(api).create_namespace({"metadata": {"name": name, "labels": labels}})
        except client.exceptions.ApiException as exc:
            if exc.status != 409:
                raise

    cluster.call(make)


@pytest.mark.controlplane
def test_inspect_pod_a_nominated_pods_anti_affinity_counts_only_when_inter_pod_affinity_runs(
    cluster: ControlPlane, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """InterPodAffinity's PreFilter returns Skip when the pod has no pod (anti-)affinity
    terms and no pod bound to a node has an anti-affinity term selecting it
    (interpodaffinity/filtering.go: ``len(s.existingClusterWideAntiAffinityCounts) == 0 &&
    incomingPodHasNoTerms``); a skipped plugin's Filter and ``AddPod`` are not run, so a
    pod nominated to ``a`` whose anti-affinity selects the probe does not keep it off ``a``.
    Once a bound pod's anti-affinity selects the probe (on ``c``), the plugin runs, the
    nominated pod is added to its state, and ``a`` is filtered."""
    hostname = "kubernetes.io/hostname"
    guard = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"role": "probe"}}, "topologyKey": hostname}]}}  # fmt: skip
    cluster.create_node("a", cpu="4", memory="16Gi")
    cluster.create_node("b", cpu="4", memory="16Gi")
    _bind(cluster, "used", "b", "1", "1Gi")
    waiting = pod_manifest("waiting", cpu="100m", memory="100Mi", scheduler_name="default-scheduler")
    waiting["spec"]["schedulingGates"] = [{"name": "stickypack.io/test"}]
    waiting["spec"]["affinity"] = guard
    cluster.create_pod(pod=waiting)
    _nominate(cluster, "waiting", "a")
    probe = pod_manifest("probe", cpu="500m", memory="100Mi", labels={"role": "probe"})
    report = _inspect_pod_json(cluster, tmp_path, capsys, probe)
    assert _kube_scheduler_binds(cluster, probe) == "a"
    verdicts = {n["node"]: n["filtered_by"] for n in report["nodes"]}
    assert (verdicts, report["best"]) == ({"a": None, "b": None}, ["a"])

    cluster.create_node("c", cpu="4", memory="16Gi")
    _bind(cluster, "guard", "c", "100m", "100Mi", spec={"affinity": guard})
    second = pod_manifest("probe-2", cpu="500m", memory="100Mi", labels={"role": "probe"})
    report = _inspect_pod_json(cluster, tmp_path, capsys, second)
    cluster.create_pod(pod=second)
    assert cluster.wait_bound(["probe-2"], timeout=30) == {"probe-2": "b"}
    verdicts = {n["node"]: n["filtered_by"] for n in report["nodes"]}
    assert verdicts == {"a": "InterPodAffinity", "b": None, "c": "InterPodAffinity"}


@pytest.mark.controlplane
def test_inspect_pod_counts_a_nominated_pod_being_deleted_as_the_real_scheduler_does(
    cluster: ControlPlane, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A pending pod being deleted (a finalizer holds it) stays in kube-scheduler's
    nominator until it is gone (nothing in backend/queue or eventhandlers drops a pod for
    its ``deletionTimestamp``; ``addNominatedPodUnlocked`` asks only that it exists and is
    unbound): its room on its nominated node is kept from pods of its priority or lower, so
    ``a`` is filtered and the real kube-scheduler binds the probe to ``b``."""
    cluster.create_node("a", cpu="4", memory="16Gi")
    cluster.create_node("b", cpu="4", memory="16Gi")
    _bind(cluster, "used", "b", "1", "1Gi")
    waiting = pod_manifest("waiting", cpu="3", memory="1Gi", scheduler_name="default-scheduler")
    waiting["spec"]["schedulingGates"] = [{"name": "stickypack.io/test"}]
    waiting["metadata"]["finalizers"] = ["stickypack.io/test"]
    cluster.create_pod(pod=waiting)
    _nominate(cluster, "waiting", "a")

    async def delete(api: object) -> None:
        await client.CoreV1Api(api).delete_namespaced_pod("waiting", "default")

    async def release(api: object) -> None:
        await client.CoreV1Api(api).patch_namespaced_pod(
            "waiting", "default", {"metadata": {"finalizers": None}}
        )

    cluster.call(delete)
    try:
        probe = pod_manifest("probe", cpu="2", memory="1Gi")
        report = _inspect_pod_json(cluster, tmp_path, capsys, probe)
        assert _kube_scheduler_binds(cluster, probe) == "b"
        verdicts = {n["node"]: n["filtered_by"] for n in report["nodes"]}
        assert (verdicts["a"], report["best"]) == ("NodeResourcesFit", ["b"])
        assert report["nominated_pods"] == {"a": ["default/waiting"]}
    finally:
        cluster.call(release)


@pytest.mark.controlplane
def test_inspect_pod_reports_no_nominated_pod_counted_on_a_node_that_is_gone(
    cluster: ControlPlane, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A pending pod nominated to a node deleted since (``status.nominatedNodeName`` is not
    cleared when the node goes) is counted on no node: ``nominated_pods`` does not name it,
    nor does the text report's line about nominated pods."""
    cluster.create_node("a", cpu="4", memory="16Gi")
    waiting = pod_manifest("waiting", cpu="3", memory="1Gi", scheduler_name="default-scheduler")
    waiting["spec"]["schedulingGates"] = [{"name": "stickypack.io/test"}]
    cluster.create_pod(pod=waiting)
    _nominate(cluster, "waiting", "gone")
    probe = pod_manifest("probe", cpu="2", memory="1Gi")
    report = _inspect_pod_json(cluster, tmp_path, capsys, probe)
    assert (report["best"], report["nominated_pods"]) == (["a"], {})
    path = tmp_path / "probe.yaml"
    assert (
        main(["inspect", "--kubeconfig", str(cluster.kubeconfig), "--policy", "default", "--pod", str(path)])
        == 0
    )
    assert "nominated" not in capsys.readouterr().out


@pytest.mark.controlplane
def test_inspect_pod_of_a_nominated_pod_names_its_nominated_node_as_the_real_scheduler_does(
    cluster: ControlPlane, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A pod file that is a pending pod nominated to a node (``kubectl get pod -o yaml`` of a
    preemptor): kube-scheduler filters its ``status.nominatedNodeName`` first and, when it
    passes, binds the pod there without scoring (schedule_one.go ``evaluateNominatedNode``),
    so ``b`` is best although LeastAllocated prefers the empty ``a``; the pod's own
    nomination is not counted against it."""
    cluster.create_node("a", cpu="4", memory="16Gi")
    cluster.create_node("b", cpu="4", memory="16Gi")
    _bind(cluster, "used", "b", "1", "1Gi")
    pending = pod_manifest("pending", cpu="2", memory="1Gi", scheduler_name="default-scheduler")
    pending["spec"]["schedulingGates"] = [{"name": "stickypack.io/test"}]
    cluster.create_pod(pod=pending)
    _nominate(cluster, "pending", "b")
    exported = next(p for p in cluster.pods() if p["metadata"]["name"] == "pending")
    assert exported["status"]["nominatedNodeName"] == "b"
    del exported["spec"]["schedulingGates"]
    report = _inspect_pod_json(cluster, tmp_path, capsys, exported)
    path = tmp_path / "pending.yaml"
    assert (
        main(["inspect", "--kubeconfig", str(cluster.kubeconfig), "--policy", "default", "--pod", str(path)])
        == 0
    )
    out = capsys.readouterr().out

    async def ungate(api: object) -> None:
        await client.CoreV1Api(api).patch_namespaced_pod(
            "pending", "default", {"spec": {"schedulingGates": None}}
        )

    cluster.start_scheduler(scheduler_config(["default-scheduler"]))
    cluster.call(ungate)
    assert cluster.wait_bound(["pending"], timeout=30) == {"pending": "b"}
    verdicts = {n["node"]: n for n in report["nodes"]}
    assert verdicts["a"]["total"] > verdicts["b"]["total"]  # a scores higher, b is taken
    assert (report["best"], report["nominated_node"], report["nominated_pods"]) == (["b"], "b", {})
    assert "best: b (the pod's nominated node" in out


@pytest.mark.controlplane
def test_inspect_pod_names_the_filter_kube_scheduler_runs_first(
    cluster: ControlPlane, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A node two filters reject is named by the one kube-scheduler runs first
    (TaintToleration, NodeAffinity, NodePorts, then NodeResourcesFit: default_plugins.go),
    whatever the policy's order: ``ports`` (1 core, its host port taken) and ``tainted`` (1
    core, an untolerated taint) are both too small for the 2-core pod, and both inspect and
    the real kube-scheduler name NodePorts and TaintToleration, not NodeResourcesFit."""
    cluster.create_node("ports", cpu="1", memory="16Gi")
    cluster.create_node("tainted", cpu="1", memory="16Gi", taints=["keep-off:NoSchedule"])
    port = [{"containerPort": 80, "hostPort": 8080}]
    _bind(cluster, "web", "ports", "100m", "100Mi",
          spec={"containers": [{"name": "c", "image": "x", "ports": port,
                                "resources": {"requests": {"cpu": "100m", "memory": "100Mi"}}}]})  # fmt: skip
    pod = pod_manifest("big", cpu="2", memory="100Mi")
    pod["spec"]["containers"][0]["ports"] = port
    report = _inspect_pod_json(cluster, tmp_path, capsys, pod)
    verdicts = {n["node"]: n["filtered_by"] for n in report["nodes"]}
    assert verdicts == {"ports": "NodePorts", "tainted": "TaintToleration"}
    cluster.start_scheduler(scheduler_config(["default-scheduler"]))
    cluster.create_pod(pod=pod)
    message = cluster.wait_unschedulable(["big"], timeout=30)["big"]
    assert "1 node(s) didn't have free ports for the requested pod ports" in message, message
    assert "1 node(s) had untolerated taint" in message, message
    assert "Insufficient cpu" not in message, message


@pytest.mark.controlplane
def test_inspect_pod_names_pod_topology_spread_before_inter_pod_affinity(
    cluster: ControlPlane, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """kube-scheduler runs PodTopologySpread before InterPodAffinity (every profile's
    order, apis/config/v1/default_plugins.go) and a node is counted under the first filter
    that rejects it: on ``x`` (zone z1) both reject the pod (two of its kind there, none in
    zone z2; a pod there whose anti-affinity selects it), and both inspect and the real
    kube-scheduler name PodTopologySpread."""
    zone = "topology.kubernetes.io/zone"
    cluster.create_node("x", cpu="4", memory="16Gi", labels={zone: "z1"})
    cluster.create_node("y", cpu="4", memory="16Gi", labels={zone: "z2"}, taints=["keep-off:NoSchedule"])
    guard = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "spread"}}, "topologyKey": zone}]}}  # fmt: skip
    _bind(cluster, "guard", "x", "100m", "100Mi", spec={"affinity": guard})
    for k in range(2):
        _bind(cluster, f"spread-{k}", "x", "100m", "100Mi", app="spread")
    spread = pod_manifest("spread-2", cpu="500m", memory="100Mi", labels={"app": "spread"})
    spread["spec"]["topologySpreadConstraints"] = [
        {"maxSkew": 1, "topologyKey": zone, "whenUnsatisfiable": "DoNotSchedule",
         "labelSelector": {"matchLabels": {"app": "spread"}}}]  # fmt: skip
    report = _inspect_pod_json(cluster, tmp_path, capsys, spread)
    cluster.start_scheduler(scheduler_config(["default-scheduler"]))
    cluster.create_pod(pod=spread)
    message = cluster.wait_unschedulable(["spread-2"], timeout=30)["spread-2"]
    assert "1 node(s) didn't match pod topology spread constraints" in message, message
    assert "anti-affinity" not in message, message
    verdicts = {n["node"]: n["filtered_by"] for n in report["nodes"]}
    assert verdicts == {"x": "PodTopologySpread", "y": "TaintToleration"}


@pytest.mark.controlplane
def test_inspect_pod_counts_no_pod_for_an_empty_spread_selector_as_the_real_scheduler_does(
    cluster: ControlPlane, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A ``DoNotSchedule`` constraint whose ``labelSelector`` is ``{}`` selects every pod,
    yet kube-scheduler's PreFilter counts none of the pods on the nodes with it
    (``countPodsMatchSelector`` returns 0 for an empty selector) while the pod still counts
    itself: ``a`` with three pods of the namespace and the tainted, empty ``b`` (a domain
    still: the taints are ignored by default) give skew
    0 + 1 - 0 = 1 on ``a``, within maxSkew 1. Counting the three would make it 4 and filter
    ``a``; the real scheduler binds the pod there, and inspect names ``a``."""
    cluster.create_node("a", cpu="4", memory="16Gi")
    cluster.create_node("b", cpu="4", memory="16Gi", taints=["keep-off:NoSchedule"])
    for k in range(3):
        _bind(cluster, f"any-{k}", "a", "100m", "100Mi", app=f"x{k}")
    probe = pod_manifest("probe", cpu="100m", memory="100Mi", labels={"app": "probe"})
    probe["spec"]["topologySpreadConstraints"] = [
        {"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule",
         "labelSelector": {}}]  # fmt: skip
    report = _inspect_pod_json(cluster, tmp_path, capsys, probe)
    verdicts = {n["node"]: n["filtered_by"] for n in report["nodes"]}
    assert verdicts == {"a": None, "b": "TaintToleration"}
    assert report["best"] == ["a"]
    assert _kube_scheduler_binds(cluster, probe) == "a"


def test_inspect_bad_input_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    not_pod = tmp_path / "svc.yaml"
    not_pod.write_text("kind: Service\nspec: {}\n")
    broken = tmp_path / "broken.yaml"
    broken.write_text("spec: [\n")
    good_pod = tmp_path / "pod.yaml"
    good_pod.write_text(yaml.safe_dump(pod_manifest("p")))
    missing_kubeconfig = ["--kubeconfig", str(tmp_path / "nope")]
    odd_priority = []  # fields the API server refuses a pod for: not read as something else
    for field, value in (("priorityClassName", 5), ("priorityClassName", ["high"]), ("priority", "7"),
                         ("priority", 2**31), ("priority", True)):  # fmt: skip
        raw = pod_manifest("p")
        raw["spec"][field] = value
        odd_priority.append(odd := tmp_path / f"odd-{len(odd_priority)}.yaml")
        odd.write_text(yaml.safe_dump(raw))
    odd_gates = []  # scheduling gates the API server refuses: not read as none
    for gates in ("hold", [{"name": ""}], ["hold"]):
        raw = pod_manifest("p")
        raw["spec"]["schedulingGates"] = gates
        odd_gates.append(odd := tmp_path / f"odd-gates-{len(odd_gates)}.yaml")
        odd.write_text(yaml.safe_dump(raw))
    preferred = "preferredDuringSchedulingIgnoredDuringExecution"
    bad_terms = []  # preferred pod (anti-)affinity terms the API server refuses
    keys_alone = {"topologyKey": "zone", "matchLabelKeys": ["a"]}  # no labelSelector
    for kind, term in (
        ("podAffinity", {"weight": 101, "podAffinityTerm": {"topologyKey": "zone"}}),
        ("podAntiAffinity", {"weight": 5, "podAffinityTerm": keys_alone}),
    ):
        raw = pod_manifest("p")
        raw["spec"]["affinity"] = {kind: {preferred: [term]}}
        bad_terms.append(bad := tmp_path / f"bad-term-{len(bad_terms)}.yaml")
        bad.write_text(yaml.safe_dump(raw))
    for argv, message, status in [
        (
            ["--pod", str(bad_terms[0]), *missing_kubeconfig],
            f"spec.affinity.podAffinity.{preferred}[0].weight: an affinity weight must be an integer from 1",
            2,
        ),
        (
            ["--pod", str(bad_terms[1]), *missing_kubeconfig],
            f"podAntiAffinity.{preferred}[0].podAffinityTerm.matchLabelKeys: cannot be set without",
            2,
        ),
        (
            ["--pod", str(odd_priority[0]), *missing_kubeconfig],
            "spec.priorityClassName: 5 is not a string",
            2,
        ),
        (["--pod", str(odd_priority[1]), *missing_kubeconfig], "spec.priorityClassName: ['high'] is not", 2),
        (["--pod", str(odd_priority[2]), *missing_kubeconfig], "spec.priority: '7' is not an int32", 2),
        (
            ["--pod", str(odd_priority[3]), *missing_kubeconfig],
            "spec.priority: 2147483648 is not an int32",
            2,
        ),
        (["--pod", str(odd_priority[4]), *missing_kubeconfig], "spec.priority: True is not an int32", 2),
        (["--pod", str(odd_gates[0]), *missing_kubeconfig], "spec.schedulingGates: 'hold' is not a list", 2),
        (["--pod", str(odd_gates[1]), *missing_kubeconfig], "spec.schedulingGates[0]: {'name': ''} is", 2),
        (["--pod", str(odd_gates[2]), *missing_kubeconfig], "spec.schedulingGates[0]: 'hold' is not an", 2),
        (["--pod", str(not_pod)], "not a Pod", 2),
        (["--pod", str(broken)], str(broken), 2),
        (["--threshold", "-0.1"], "--threshold must be in [0, 1], got -0.1", 2),
        (["--threshold", "1.01"], "--threshold must be in [0, 1], got 1.01", 2),
        (["--threshold", "nan"], "--threshold must be in [0, 1], got nan", 2),
        (["--gpu-threshold", "-1"], "--gpu-threshold must be in [0, 1], got -1", 2),
        ([*missing_kubeconfig], f"kubeconfig {tmp_path / 'nope'}: not found", 2),
        (
            ["--pod", str(not_pod), "--system-pods-move", "--expendable-pods-priority-cutoff", "0"],
            "--system-pods-move, --expendable-pods-priority-cutoff: for the node report, not with --pod",
            2,
        ),
        (["--pod", str(not_pod), "--min-replica-count", "2"], "--min-replica-count: for the node report", 2),
        (["--scheduler-profile", "z2jh"], "--scheduler-profile: for --pod, not for the node report", 2),
        # the node report places no pod: a policy or profile named there would be ignored
        (["--policy", "nope"], "--policy: for --pod, not for the node report", 2),
        (["--policy", "z2jh", "--profile", "user-scheduler"], "--policy, --profile: for --pod, not", 2),
        (["--gpu-label", "not a key"], "--gpu-label: 'not a key' is not a label key", 2),
        (["--gpu-threshold", "1.5"], "--gpu-threshold must be in [0, 1], got 1.5", 2),
        (["--node-group-label", "a b"], "--node-group-label: 'a b' is not a label key", 2),
        (["--pod", str(not_pod), "--cores-total", "1:2"], "--cores-total: for the node report", 2),
        (
            [
                "--pod",
                str(not_pod),
                "--local-storage-moves",
                "--blocking-system-pod-distruption-timeout",
                "1h",
                "--memory-total",
                "1:2",
            ],
            "--local-storage-moves, --blocking-system-pod-distruption-timeout, --memory-total: for the node "
            "report, not with --pod",
            2,
        ),
        # the node report's flags without --pod: taken, the cluster is then read
        (
            [
                "--local-storage-moves",
                "--min-replica-count",
                "1",
                "--memory-total",
                "1:2",
                *missing_kubeconfig,
            ],
            f"kubeconfig {tmp_path / 'nope'}: not found",
            2,
        ),
        # 1, the top of [0, 1]: taken
        (
            ["--threshold", "1", "--gpu-threshold", "1", *missing_kubeconfig],
            f"kubeconfig {tmp_path / 'nope'}: not found",
            2,
        ),
        # the thresholds serve --pod too (ScaleDownAware's): taken, the cluster is then read
        (
            ["--pod", str(good_pod), "--threshold", "0.3", "--gpu-threshold", "0.3", *missing_kubeconfig],
            f"kubeconfig {tmp_path / 'nope'}: not found",
            2,
        ),
        # 0, as the autoscaler takes it (a node is a candidate only at utilization 0)
        (
            ["--threshold", "0", "--gpu-threshold", "0", *missing_kubeconfig],
            f"kubeconfig {tmp_path / 'nope'}: not found",
            2,
        ),
    ]:
        assert main(["inspect", *argv]) == status, argv
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err, (argv, err)
    timeout = "--blocking-system-pod-distruption-timeout"
    for flag, value, message in [
        ("--min-replica-count", "-1", "-1 is negative"),
        ("--min-replica-count", "two", "'two' is not an integer"),
        (timeout, "1x", "'1x' is not a duration"),
        (timeout, "h1", "'h1' is not a duration"),
        (timeout, "-5", "'-5' is not a duration >= 0"),
        (timeout, "inf", "'inf' is not a duration >= 0"),
        ("--min-size", "pool-a", "'pool-a' is not GROUP=N"),
        ("--min-size", "=2", "'=2' is not GROUP=N"),
        ("--min-size", "pool-a=two", "'pool-a=two': 'two' is not an integer"),
        ("--min-size", "pool-a=-1", "'pool-a=-1': the minimum size is negative"),
        ("--cores-total", "8", "'8' is not MIN:MAX (two integers)"),
        ("--cores-total", "9:8", "'9:8' is not MIN:MAX with 0 <= MIN <= MAX"),
        ("--memory-total", "a:b", "'a:b' is not MIN:MAX (two integers)"),
    ]:
        with pytest.raises(SystemExit) as exited:  # argparse's own exit
            main(["inspect", flag, value])
        assert exited.value.code == 2
        assert f"argument {flag}" in (err := capsys.readouterr().err) and message in err, err


def test_inspect_settings_given_as_zero_or_off_are_not_the_configs(tmp_path: Path) -> None:
    """A setting given on the command line wins over the configuration's, even when it is
    0 or off: ``--threshold 0`` and ``--no-dra`` stay 0 and False with a configuration whose
    ``cluster`` says 0.7 and ``dra: true``; the settings not given take the configuration's."""
    from stickypack.cli import _parser
    from stickypack.cli.inspect import _settings

    config = tmp_path / "extender.yaml"
    config.write_text(yaml.safe_dump({"cluster": {"utilization_threshold": 0.7, "dra": True}}))
    args = _parser().parse_args(["inspect", "--config", str(config), "--threshold", "0", "--no-dra"])
    _settings(args)
    assert (args.threshold, args.dra) == (0.0, False)
    args = _parser().parse_args(["inspect", "--config", str(config)])
    _settings(args)
    assert (args.threshold, args.dra) == (0.7, True)


def test_durations_are_read_as_go_writes_them() -> None:
    """The autoscaler's duration flags take Go's ``time.Duration`` syntax; plain seconds too."""
    from stickypack.cli.common import _duration_s

    for text, seconds in [
        ("1h", 3600),
        ("1h30m", 5400),
        ("90s", 90),
        ("0s", 0),
        ("1.5h", 5400),
        ("500ms", 0.5),
        ("120", 120),
        ("+1h", 3600),  # Go takes a sign
        ("1\u03bcs", 1e-6),  # and both micro signs
        ("1\u00b5s", 1e-6),
        ("0", 0),
    ]:
        assert _duration_s(text) == seconds, text
    for junk, message in [
        ("1h-30m", "is not a duration ("),
        ("1h 30m", "is not a duration ("),
        ("h", "is not a duration ("),
        ("1x", "is not a duration ("),
        ("", "is not a duration ("),
        ("-1h", "is not a duration >= 0"),  # valid Go, but the autoscaler's timeouts are not negative
        ("nan", "is not a duration >= 0"),
    ]:
        with pytest.raises(argparse.ArgumentTypeError, match=re.escape(message)):
            _duration_s(junk)


def test_durations_without_a_digit_before_the_dot_and_counts_of_zero_are_taken() -> None:
    """Go's ``time.ParseDuration`` reads ``.5h`` (a number may start at its dot): 0.5 * 3600
    = 1800 s, ``.25s`` 0.25 s; a non-negative integer flag takes 0."""
    from stickypack.cli.common import _duration_s, _non_negative_int

    assert _duration_s(".5h") == 1800
    assert _duration_s("1h.25s") == 3600.25
    assert _non_negative_int("0") == 0 and _non_negative_int("12") == 12


@pytest.mark.controlplane
def test_inspect_build_pod_reads_the_extenders_history(
    cluster: ControlPlane, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With ``--config``, a build pod is explained with the extender's policy, profile and
    stored build history: the node that built the repo ranks first on BuildLocality."""
    import time

    from stickypack.kube.history import ConfigMapHistoryStore, HistoryRecorder

    name = f"inspect-history-{uuid.uuid4().hex[:6]}"
    repo = "https://github.com/org/repo"
    for node in ("n1", "n2", "n3"):
        cluster.create_node(node, cpu="8", memory="32Gi")

    async def record(api: object) -> None:
        recorder = HistoryRecorder(ConfigMapHistoryStore(api, "default", name), flush_interval_s=0)
        recorder.record(repo, "n2", time.time())
        await recorder.flush()

    cluster.call(record)
    config = tmp_path / "extender.yaml"
    config.write_text(yaml.safe_dump({"history": {"namespace": "default", "name": name}}))
    build = pod_manifest("build-1", cpu="1", memory="1Gi", labels={"component": "binderhub-build"})
    build["metadata"]["annotations"] = {"binder-repo": repo}
    path = tmp_path / "build.yaml"
    path.write_text(yaml.safe_dump(build))
    argv = ["inspect", "--kubeconfig", str(cluster.kubeconfig), "--pod", str(path), "--config", str(config)]
    assert main([*argv, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["profile"] == "stickypack-builds"
    assert report["history"] == "from the extender's store"
    scores = {n["node"]: n["scores"]["BuildLocality"] for n in report["nodes"]}
    assert scores["n2"] == max(scores.values()) and list(scores.values()).count(scores["n2"]) == 1
    assert report["best"] == ["n2"]
    # without the history the repo's first build goes by rendezvous rank alone
    assert main(["inspect", "--kubeconfig", str(cluster.kubeconfig), "--pod", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["history"] == "none (give --config)"


@pytest.mark.controlplane
def test_inspect_leaves_out_history_older_than_its_node(
    cluster: ControlPlane, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An entry dated before its node was created is an earlier machine's of that name
    (deleted and created again while no extender watched): ``inspect`` leaves it out, as
    the extender forgets it, and says so, writing nothing to the store."""
    import time

    from stickypack.kube.history import ConfigMapHistoryStore, HistoryRecorder

    name = f"inspect-older-{uuid.uuid4().hex[:6]}"
    repo = "https://github.com/org/older"
    for node in ("n1", "n2", "n3"):
        cluster.create_node(node, cpu="8", memory="32Gi")
    stored: list[list[tuple[str, dict[str, float]]]] = []

    async def record(api: object) -> None:
        recorder = HistoryRecorder(ConfigMapHistoryStore(api, "default", name), flush_interval_s=0)
        recorder.record(repo, "n2", time.time() - 3600)  # an hour before n2 was created
        await recorder.flush()

    async def read(api: object) -> None:
        recorder = HistoryRecorder(ConfigMapHistoryStore(api, "default", name))
        await recorder.load()
        stored.append(list(recorder.history.items()))

    cluster.call(record)
    config = tmp_path / "extender.yaml"
    config.write_text(yaml.safe_dump({"history": {"namespace": "default", "name": name}}))
    build = pod_manifest("build-1", cpu="1", memory="1Gi", labels={"component": "binderhub-build"})
    build["metadata"]["annotations"] = {"binder-repo": repo}
    path = tmp_path / "build.yaml"
    path.write_text(yaml.safe_dump(build))
    argv = ["inspect", "--kubeconfig", str(cluster.kubeconfig), "--pod", str(path), "--json"]
    assert main([*argv, "--config", str(config)]) == 0
    with_config = json.loads(capsys.readouterr().out)
    assert (
        with_config["history"] == "from the extender's store (left out: entries older than their node on n2)"
    )
    assert main(argv) == 0  # no history at all: the same scores
    without = json.loads(capsys.readouterr().out)
    assert [n["scores"] for n in with_config["nodes"]] == [n["scores"] for n in without["nodes"]]
    cluster.call(read)
    assert [(r, dict(nodes)) for r, nodes in stored[0]] == [
        (repo, {"n2": pytest.approx(time.time() - 3600, abs=60)})
    ]


@pytest.mark.controlplane
def test_inspect_given_profile_runs_its_own_mutators(
    cluster: ControlPlane, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--profile`` names the profile that places the pod, and only that profile's mutators
    apply: a build-labelled pod sent to z2jh's user-scheduler gets no BinderHub
    anti-affinity (the default-scheduler profile's mutator), so it packs onto the fuller
    node, where the real kube-scheduler binds it."""
    repo = "https://github.com/org/repo"
    for name in ("a", "b"):
        cluster.create_node(name, cpu="4", memory="16Gi")
    _bind(cluster, "user-a", "a", "1", "1Gi")
    old_build = pod_manifest("build-old", cpu="2", memory="1Gi", labels={"component": "binderhub-build"})
    old_build["metadata"]["annotations"] = {"binder-repo": repo}
    old_build["spec"]["nodeName"] = "b"
    cluster.create_pod(pod=old_build)
    pod = pod_manifest(
        "build-new", cpu="500m", memory="1Gi", scheduler_name="z2jh", labels={"component": "binderhub-build"}
    )
    pod["metadata"]["annotations"] = {"binder-repo": repo}
    path = tmp_path / "pod.yaml"
    path.write_text(yaml.safe_dump(pod))
    argv = ["inspect", "--kubeconfig", str(cluster.kubeconfig), "--pod", str(path), "--policy", "z2jh"]
    assert main([*argv, "--profile", "user-scheduler", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["profile"] == "user-scheduler"
    assert "InterPodAffinity" not in report["weights"]  # skipped: the pod has no anti-affinity
    assert report["best"] == ["b"]
    # without --profile the labels choose z2jh's default-scheduler profile and its mutator
    assert main([*argv, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["profile"] == "default-scheduler" and "InterPodAffinity" in report["weights"]
    cluster.start_scheduler(scheduler_config(["z2jh"]))
    cluster.create_pod(pod=pod)
    assert cluster.wait_bound(["build-new"], timeout=30) == {"build-new": "b"}


@pytest.mark.controlplane
def test_inspect_with_config_explains_unmanaged_pods_with_their_own_profile(
    cluster: ControlPlane, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The extender's profile (``profile`` of ``--config``) places only the pods it manages
    (``pods.manage``); any other pod is explained with the policy's profile for it."""
    cluster.create_node("n1", cpu="4", memory="16Gi")
    config = tmp_path / "extender.yaml"
    config.write_text(yaml.safe_dump({"history": {"store": "memory"}}))
    user = tmp_path / "user.yaml"
    user.write_text(yaml.safe_dump(pod_manifest("jupyter-x", cpu="1", memory="1Gi")))
    argv = ["inspect", "--kubeconfig", str(cluster.kubeconfig), "--config", str(config), "--json"]
    assert main([*argv, "--pod", str(user)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["policy"] == "stickypack" and report["profile"] == "stickypack"
    assert "BuildLocality" not in report["weights"]
    build = pod_manifest("build-x", cpu="1", memory="1Gi", labels={"component": "binderhub-build"})
    (tmp_path / "build.yaml").write_text(yaml.safe_dump(build))
    assert main([*argv, "--pod", str(tmp_path / "build.yaml")]) == 0
    assert json.loads(capsys.readouterr().out)["profile"] == "stickypack-builds"


@pytest.mark.controlplane
def test_inspect_table_terminated_cordoned_not_ready_and_unreadable(
    cluster: ControlPlane, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The table as the operator guide describes it, on the real API server: a terminated
    pod neither counts nor pins; a cordoned and a not-ready node say so; a pod that cannot
    be read (34 distinct resources; the API server takes it) is counted and named, not
    fatal, in the table and in a placement's explanation."""
    from kubernetes_asyncio import client

    cluster.create_node("work", cpu="4", memory="16Gi")
    cluster.create_node("cordoned", cpu="4", memory="16Gi")
    cluster.create_node("down", cpu="4", memory="16Gi", ready=False)
    _bind(cluster, "jupyter-live", "work", "1", "1Gi")
    _bind(cluster, "jupyter-done", "work", "3", "1Gi")
    _bind(cluster, "web-1", "cordoned", "500m", "1Gi", owner="ReplicaSet")
    weird = pod_manifest("weird", cpu="1", memory="1Gi")
    extended = {f"example.com/r{i}": "1" for i in range(33)}
    weird["spec"]["containers"][0]["resources"] = {"requests": {**extended, "cpu": "1"}, "limits": extended}
    weird["spec"]["nodeName"] = "work"
    cluster.create_pod(pod=weird)

    async def finish_and_cordon(api: object) -> None:
        core = client.CoreV1Api(api)
        await core.patch_namespaced_pod_status("jupyter-done", "default", {"status": {"phase": "Succeeded"}})
        await core.patch_node("cordoned", {"spec": {"unschedulable": True}})

    cluster.call(finish_and_cordon)
    kubeconfig = ["--kubeconfig", str(cluster.kubeconfig)]
    assert main(["inspect", *kubeconfig, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    nodes = {n["node"]: n for n in report["nodes"]}
    assert nodes["work"]["cpu"] == pytest.approx(0.25)  # the Succeeded pod's 3 cpu do not count
    assert nodes["work"]["pods"] == 1 and nodes["work"]["pinning"] == ["default/jupyter-live"]
    assert nodes["cordoned"]["unschedulable"] and not nodes["down"]["ready"]
    assert report["unreadable_pods"] == ["default/weird"]
    assert main(["inspect", *kubeconfig]) == 0
    out = capsys.readouterr().out
    rows = {line.split("│")[1].strip(): line for line in out.splitlines() if line.startswith("│")}
    assert [c.strip() for c in rows["work"].split("│")[2:9]] == [
        "25%", "6%", "1", "0", "", "pinned", "default/jupyter-live (no controller)"
    ]  # fmt: skip
    assert "cordoned" in rows["cordoned"].split("│")[6] and "removable" in rows["cordoned"]
    assert "not ready" in rows["down"].split("│")[6] and "empty" in rows["down"]
    assert "3 nodes: 0 busy, 1 at or under the threshold but pinned, 1 removable, 1 empty" in out
    assert "1 pod could not be read and is not counted: default/weird" in out
    pod = tmp_path / "pod.yaml"
    pod.write_text(yaml.safe_dump(pod_manifest("new", cpu="1", memory="1Gi")))
    assert main(["inspect", *kubeconfig, "--pod", str(pod), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["unreadable_pods"] == ["default/weird"]
    verdicts = {n["node"]: n["filtered_by"] for n in report["nodes"]}
    assert verdicts == {"work": None, "cordoned": "NodeUnschedulable", "down": "TaintToleration"}
    assert main(["inspect", *kubeconfig, "--pod", str(pod)]) == 0
    assert "1 pod could not be read and is not counted: default/weird" in capsys.readouterr().out


@pytest.mark.controlplane
def test_inspect_prints_names_from_the_pod_file_literally(
    cluster: ControlPlane, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The pod file is not checked by an API server: a name that reads as console markup
    is printed as written (it once raised rich's MarkupError, a traceback)."""
    cluster.create_node("n1", cpu="4", memory="16Gi")
    path = tmp_path / "pod.yaml"
    path.write_text(yaml.safe_dump(pod_manifest("x[/bold]", cpu="1", memory="1Gi")))
    assert main(["inspect", "--kubeconfig", str(cluster.kubeconfig), "--pod", str(path)]) == 0
    assert "default/x[/bold]: policy stickypack" in capsys.readouterr().out


def test_explain_placement_checks_outside_plugins_as_select_does() -> None:
    """A plugin from outside the package (``Profile.checked``) that breaks its contract is
    a :class:`PluginContractError` naming it, in the explanation as in ``select``, not a
    score of 150 shown as if kube-scheduler could give it."""
    from stickypack.core.framework import (
        FilterPlugin,
        PluginContractError,
        Profile,
        ScorePlugin,
        WeightedScorer,
    )

    class Loud(ScorePlugin):
        name = "Loud"

        def score(self, pod: Pod, table: NodeTable, idx: np.ndarray, ctx: SchedulingContext) -> np.ndarray:
            return np.full(idx.shape[0], 150, dtype=np.int64)

    class Sloppy(FilterPlugin):
        name = "Sloppy"

        def filter(self, pod: Pod, table: NodeTable, idx: np.ndarray, ctx: SchedulingContext) -> np.ndarray:
            return np.ones(idx.shape[0], dtype=np.int64)  # not a bool mask

    table = _table({"a": (4000, 16), "b": (4000, 16)})
    pod, ctx = _pod("p", "1", "1Gi"), SchedulingContext()
    loud = Loud()
    profile = Profile("p", [], [WeightedScorer(loud, 1)], checked=(loud,))
    with pytest.raises(PluginContractError, match="Loud"):
        profile.select(pod, table, ctx, np.random.default_rng(0))
    with pytest.raises(PluginContractError, match="Loud"):
        explain_placement(profile, pod, table, ctx)
    sloppy = Sloppy()
    profile = Profile("p", [sloppy], [], checked=(sloppy,))
    with pytest.raises(PluginContractError, match="Sloppy"):
        explain_placement(profile, pod, table, ctx)


class _DropNamed(FilterPlugin):
    """Removes the nodes whose names are in ``names``."""

    def __init__(self, name: str, names: set[str]) -> None:
        self.name = name  # type: ignore[misc]
        self.names = names

    def filter(self, pod: Pod, table: NodeTable, idx: np.ndarray, ctx: SchedulingContext) -> np.ndarray:
        return np.array([n not in self.names for n in table.node_names(idx)], dtype=bool)


class _Fixed(ScorePlugin):
    """Scores each node by ``scores[name]``; skips the pods named in ``skipped``."""

    def __init__(self, name: str, scores: dict[str, int], skipped: frozenset[str] = frozenset()) -> None:
        self.name = name  # type: ignore[misc]
        self.fixed = scores
        self.skipped = skipped

    def score(self, pod: Pod, table: NodeTable, idx: np.ndarray, ctx: SchedulingContext) -> np.ndarray:
        return np.array([self.fixed[n] for n in table.node_names(idx)], dtype=np.int64)

    def skip(self, pod: Pod) -> bool:
        return pod.name in self.skipped


def test_explain_placement_runs_every_filter_on_the_last_node_left() -> None:
    """A node left alone by the first filter still meets the next one (Profile.feasible
    stops only when no node is left): "b" is removed by "DropB", so no node fits."""
    table = _table({"a": (4000, 16), "b": (4000, 16)})
    profile = Profile("p", [_DropNamed("DropA", {"a"}), _DropNamed("DropB", {"b"})], [])
    explanation = explain_placement(profile, _pod("p", "1", "1Gi"), table, SchedulingContext())
    assert [(v.node, v.filtered_by) for v in explanation.verdicts] == [("a", "DropA"), ("b", "DropB")]
    assert explanation.best == []


def test_explain_placement_leaves_out_scorers_of_weight_zero_or_skipping_the_pod() -> None:
    """As Profile.scores: a scorer of weight 0, or whose skip() is true for the pod (kube's
    PreScore Skip), has no part in the totals, the weights or any node's scores. Here only
    "Kept" (weight 2) counts: a = 2*10 = 20, b = 2*30 = 60."""
    table = _table({"a": (4000, 16), "b": (4000, 16)})
    kept = _Fixed("Kept", {"a": 10, "b": 30})
    unweighted = _Fixed("Unweighted", {"a": 100, "b": 0})
    skipping = _Fixed("Skipping", {"a": 100, "b": 0}, skipped=frozenset({"p"}))
    scorers = [WeightedScorer(kept, 2), WeightedScorer(unweighted, 0), WeightedScorer(skipping, 5)]
    explanation = explain_placement(
        Profile("p", [], scorers), _pod("p", "1", "1Gi"), table, SchedulingContext()
    )
    assert explanation.weights == {"Kept": 2}
    assert [(v.node, v.total, dict(v.scores)) for v in explanation.verdicts] == [
        ("b", 60, {"Kept": 30}),
        ("a", 20, {"Kept": 10}),
    ]
    assert explanation.best == ["b"]


def test_explain_placement_lists_ties_by_name_and_keeps_every_best_node() -> None:
    """Feasible nodes by total, highest first, ties by name (not by table order: "c" and
    "a" were added first); every node of the top total is best (kube-scheduler picks one of
    them at random); the filtered ones follow, by name, not by the filter that removed
    them nor in the filters' order. Totals (weight 1): c = a = 50, b = 20; "z" removed by
    "Early" (the first filter), "y" by "Late"."""
    table = _table({"c": (4000, 16), "z": (4000, 16), "y": (4000, 16), "a": (4000, 16), "b": (4000, 16)})
    profile = Profile(
        "p",
        [_DropNamed("Early", {"z"}), _DropNamed("Late", {"y"})],
        [WeightedScorer(_Fixed("Fixed", {"a": 50, "b": 20, "c": 50}), 1)],
    )
    explanation = explain_placement(profile, _pod("p", "1", "1Gi"), table, SchedulingContext())
    assert [(v.node, v.total, v.filtered_by) for v in explanation.verdicts] == [
        ("a", 50, None),
        ("c", 50, None),
        ("b", 20, None),
        ("y", None, "Late"),
        ("z", None, "Early"),
    ]
    assert explanation.best == ["a", "c"]


async def test_snapshot_keeps_only_what_it_reads_of_each_pod(monkeypatch: pytest.MonkeyPatch) -> None:
    """A big cluster's pods are listed page by page and slimmed as each page arrives (as
    the extender's informers do): what the snapshot holds across pages is what it reads of
    each pod, not the full objects (managedFields, status, last-applied annotations...).
    What pins_node and the node table read survives the slimming."""
    import orjson
    from kubernetes_asyncio import client

    from stickypack.kube.informer import Informer
    from stickypack.kube.snapshot import take_snapshot

    n_pods, bulk = 2000, "x" * 4000  # 24 MB of fields nobody reads

    def pod(i: int) -> dict:
        raw = pod_manifest(f"p{i}", cpu="10m", memory="10Mi")
        raw["metadata"].update(
            uid=f"u{i}",
            managedFields=[{"manager": "kubelet", "fieldsV1": bulk}],
            annotations={"cluster-autoscaler.kubernetes.io/safe-to-evict": "false", "other": bulk},
            ownerReferences=[{"kind": "ReplicaSet", "name": "rs", "uid": "r", "controller": True}],
        )
        raw["spec"]["nodeName"] = "n1"
        raw["status"] = {"phase": "Running", "message": bulk}
        return raw

    class Response:
        def __init__(self, body: bytes) -> None:
            self.status, self.body = 200, body

        async def read(self) -> bytes:
            return self.body

        def release(self) -> None:
            self.body = b""

    def page_of(*items: dict) -> Response:
        return Response(orjson.dumps({"metadata": {}, "items": list(items)}))

    async def nothing(self: object, **kw: object) -> Response:
        return page_of()

    pages: list[int] = []

    class Scripted:
        """An API group of the generated client, answering its list calls from a script."""

        def __init__(self, api: object) -> None:
            self.api = api

    class Core(Scripted):
        async def list_node(self, **kw: object) -> Response:
            return page_of(
                {"metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "1000", "memory": "1Ti"}}}
            )

        async def list_pod_for_all_namespaces(
            self, *, limit: int, _continue: str = "0", **kw: object
        ) -> Response:
            start = int(_continue)
            end = min(start + limit, n_pods)
            pages.append(end - start)
            page = {
                "metadata": {"continue": str(end) if end < n_pods else ""},
                "items": [pod(i) for i in range(start, end)],
            }
            return Response(orjson.dumps(page))

        list_replication_controller_for_all_namespaces = nothing

        async def list_persistent_volume_claim_for_all_namespaces(self, **kw: object) -> Response:
            claim = {"metadata": {"name": "data", "namespace": "default", "managedFields": [bulk]}}
            return page_of(
                {**claim, "spec": {"volumeName": "pv", "resources": {"requests": {"storage": "1Gi"}}}}
            )

        async def list_persistent_volume(self, **kw: object) -> Response:
            labels = {"topology.kubernetes.io/zone": "z1", "other": bulk}
            return page_of({"metadata": {"name": "pv", "labels": labels}, "spec": {"csi": {"driver": bulk}}})

        async def list_namespace(self, **kw: object) -> Response:
            meta = {"name": "default", "labels": {"team": "a"}, "managedFields": [bulk]}
            return page_of({"metadata": meta})

    class Policy(Scripted):
        list_pod_disruption_budget_for_all_namespaces = nothing

    class Apps(Scripted):
        async def list_replica_set_for_all_namespaces(self, **kw: object) -> Response:
            return page_of(
                {
                    "metadata": {"name": "rs", "namespace": "default", "uid": "r", "managedFields": [bulk]},
                    "spec": {"replicas": 3, "template": {"metadata": {"annotations": {"a": "x" * 4000}}}},
                }
            )

        list_stateful_set_for_all_namespaces = nothing
        list_daemon_set_for_all_namespaces = nothing

    class Batch(Scripted):
        list_job_for_all_namespaces = nothing

    held: list[int] = []
    list_once = Informer.list_once

    async def measured(self: Informer) -> dict:
        items = await list_once(self)
        held.append(len(orjson.dumps(items)))
        return items

    monkeypatch.setattr(client, "CoreV1Api", Core)
    monkeypatch.setattr(client, "PolicyV1Api", Policy)
    monkeypatch.setattr(client, "AppsV1Api", Apps)
    monkeypatch.setattr(client, "BatchV1Api", Batch)
    monkeypatch.setattr(Informer, "list_once", measured)
    snap = await take_snapshot(object())
    assert pages == [500] * 4
    assert held[1] < n_pods * 1000, held  # under 1 kB a pod; listed in full, 12 kB
    assert snap.budgets == ()
    assert snap.controllers == {("ReplicaSet", "default", "rs"): 3}
    assert snap.unlisted_controllers == {}
    assert snap.namespace_labels == {"default": {"team": "a"}}
    assert snap.claim_volumes is not None
    data = snap.claim_volumes[("default", "data")]
    assert data is not None and data.zones == (("topology.kubernetes.io/zone",) * 2 + (frozenset({"z1"}),),)
    assert held[9] < 200 and held[10] < 200, held  # claims and volumes: what the rules read
    assert held[3] < 200, held  # the ReplicaSets: names and replicas only (listed in full, 4 kB)
    pods = snap.pods_by_node["n1"]
    assert len(pods) == n_pods and not snap.unreadable
    assert pods[0].owner_kind == "ReplicaSet" and pins_node(pods[0])  # safe-to-evict "false" kept
    assert "other" not in pods[0].annotations
    assert snap.cache.table.requested[snap.cache.table.index["n1"], 0] == 10 * n_pods

    async def not_served(self: object, **kw: object) -> Response:
        response = Response(b'{"kind": "Status", "message": "the server could not find it"}')
        response.status = 404
        return response

    monkeypatch.setattr(Apps, "list_daemon_set_for_all_namespaces", not_served)
    snap = await take_snapshot(object())  # said so, not a failed inspect; the other kinds are read
    assert snap.unlisted_controllers == {"DaemonSet": 404}
    assert snap.controllers == {("ReplicaSet", "default", "rs"): 3}

    def unread(api: object) -> None:
        raise AssertionError("controllers listed")

    monkeypatch.setattr(client, "AppsV1Api", unread)  # --pod does not read them
    assert (await take_snapshot(object(), controllers=False)).controllers is None


def test_the_inspect_snapshot_keeps_what_the_autoscalers_rules_read() -> None:
    """``snapshot_pod`` slims a pod to what the node report reads, and the slim pod reads as
    the full one does: the safe-to-evict-local-volumes annotation and the hostPath volume it
    names (local storage), a priority and a grace period of 0 (set, not absent), and the
    ports bound on the node: with ``hostNetwork`` every container port (here 8080, no
    ``hostPort``), a sidecar init container's ``hostPort`` (9000) too."""
    from stickypack.core.explain import SAFE_TO_EVICT_LOCAL_VOLUMES_ANNOTATION
    from stickypack.kube.snapshot import snapshot_pod

    raw = pod_manifest("web", cpu="100m", memory="100Mi")
    raw["metadata"]["annotations"] = {SAFE_TO_EVICT_LOCAL_VOLUMES_ANNOTATION: "host", "other": "x"}
    raw["metadata"]["ownerReferences"] = [
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "o", "uid": "u", "controller": True}
    ]
    raw["spec"].update(
        nodeName="n1",
        priority=0,
        terminationGracePeriodSeconds=0,
        hostNetwork=True,
        volumes=[
            {"name": "host", "hostPath": {"path": "/var/x"}},
            {"name": "cfg", "configMap": {"name": "c"}},
        ],
    )
    raw["spec"]["containers"][0]["ports"] = [{"containerPort": 8080}]
    raw["spec"]["initContainers"] = [
        {
            "name": "proxy",
            "image": "envoy",
            "restartPolicy": "Always",
            "ports": [{"containerPort": 9000, "hostPort": 9000}],
        }
    ]
    slim = snapshot_pod(raw)
    full, kept = Pod.from_dict(raw), Pod.from_dict(slim)
    assert [v["name"] for v in slim["spec"]["volumes"]] == ["host"]
    assert kept.annotations == {SAFE_TO_EVICT_LOCAL_VOLUMES_ANNOTATION: "host"}
    assert kept.local_volumes == full.local_volumes == ("host",)
    assert not pins_node(full) and not pins_node(kept)  # the annotation lets its hostPath go
    assert (kept.priority, kept.grace_period_s) == (full.priority, full.grace_period_s) == (0, 0)
    assert sorted(p.port for p in kept.host_ports) == sorted(p.port for p in full.host_ports) == [8080, 9000]


def test_admitted_priority_is_what_the_priority_admission_plugin_sets() -> None:
    """kube-apiserver's Priority admission (plugin/pkg/admission/priority): the named
    class's value; without a name the global default class's, the lowest of several
    (``getDefaultPriorityClass``), else 0; a ``spec.priority`` given is kept; a class that
    does not exist gives None (the pod would be refused)."""
    from stickypack.kube.snapshot import admitted_priority

    classes = {"high": (1000, False), "low": (-5, False)}
    assert admitted_priority({"priorityClassName": "high"}, classes) == 1000
    assert admitted_priority({"priorityClassName": "low"}, classes) == -5
    assert admitted_priority({}, classes) == 0
    assert admitted_priority({"priorityClassName": ""}, classes) == 0
    assert admitted_priority({"priorityClassName": "gone"}, classes) is None
    defaults = {**classes, "d1": (7, True), "d2": (3, True)}
    assert admitted_priority({}, defaults) == 3
    assert admitted_priority({"priorityClassName": "high"}, defaults) == 1000
    assert admitted_priority({"priority": 42, "priorityClassName": "high"}, defaults) == 42
    assert admitted_priority({"priority": True}, {}) == 0  # not an int32: as if absent


def test_place_nominated_puts_a_pending_pod_on_its_nominated_node_and_lists_keys_sorted() -> None:
    """A pending pod listed by ``spec.nodeName=`` may carry ``nodeName: ""``; placed, it is on
    the node it is nominated to (``n1``), not on "". The keys come back sorted, whatever the
    order the pods were listed in (here "zeta" before "alpha")."""
    from stickypack.kube.snapshot import place_nominated, snapshot_pod

    pending = {}
    for name in ("zeta", "alpha"):
        raw = pod_manifest(name, cpu="100m", memory="100Mi")
        raw["spec"]["nodeName"] = ""
        raw["status"] = {"phase": "Pending", "nominatedNodeName": "n1"}
        pending[f"default/{name}"] = snapshot_pod(raw)
    bound: dict[str, dict] = {}
    assert place_nominated(pending, bound) == ["default/alpha", "default/zeta"]
    assert [Pod.from_dict(bound[key]).node_name for key in sorted(bound)] == ["n1", "n1"]


def test_budgets_are_read_as_the_autoscaler_reads_them() -> None:
    """cluster-autoscaler ``core/scaledown/pdb/basic.go`` (``SetPdbs``, ``CanRemovePods``):
    ``metav1.LabelSelectorAsSelector`` makes an empty selector (``{}``) select every pod of
    the budget's namespace and a missing one none; an unset ``status.disruptionsAllowed``
    is Go's zero, 0 (no disruption allowed); a set one is kept (2)."""
    from stickypack.kube.snapshot import budget_from_dict

    pod = Pod.from_dict(pod_manifest("web-1", namespace="shop", labels={"app": "web"}))
    meta = {"namespace": "shop", "name": "all"}
    everything = budget_from_dict({"metadata": meta, "spec": {"selector": {}}})
    nothing = budget_from_dict({"metadata": meta, "spec": {}})
    assert everything.covers(pod) and not nothing.covers(pod)
    assert (everything.disruptions_allowed, nothing.disruptions_allowed) == (0, 0)
    counted = budget_from_dict(
        {"metadata": meta, "spec": {"selector": {}}, "status": {"disruptionsAllowed": 2}}
    )
    assert counted.disruptions_allowed == 2


def test_slimmed_claims_and_volumes_place_as_the_full_ones() -> None:
    """The snapshot slims each PersistentVolumeClaim and PersistentVolume as it lists them;
    :func:`~stickypack.core.volumes.claim_volumes` reads the slim ones as the full ones: a
    claim being deleted is usable nowhere (None), and a volume's required node affinity
    (node ``n1`` only) survives."""
    from stickypack.core.volumes import claim_volumes
    from stickypack.kube.snapshot import _slim_claim, _slim_volume

    affinity = {
        "required": {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["n1"]}]}
            ]
        }
    }
    claims = [
        {"metadata": {"name": "kept", "namespace": "default"}, "spec": {"volumeName": "local"}},
        {
            "metadata": {"name": "gone", "namespace": "default", "deletionTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"volumeName": "local"},
        },
    ]
    volumes = [{"metadata": {"name": "local"}, "spec": {"nodeAffinity": affinity, "local": {"path": "/d"}}}]
    full = claim_volumes(claims, volumes)
    slim = claim_volumes([_slim_claim(c) for c in claims], [_slim_volume(v) for v in volumes])
    assert slim == full
    assert slim[("default", "gone")] is None
    kept = slim[("default", "kept")]
    assert kept is not None
    assert kept.allows({"kubernetes.io/hostname": "n1"}) and not kept.allows({"kubernetes.io/hostname": "n2"})


def test_min_sizes_and_totals_take_their_bounds() -> None:
    """``--min-size GROUP=0`` is a minimum size (0 is allowed: >= 0); ``--cores-total`` and
    ``--memory-total`` take 0 <= MIN <= MAX: ``0:8`` and ``8:8`` are taken, ``-1:8`` is not."""
    from stickypack.cli.inspect import _min_max, _min_size

    assert _min_size("pool-a=0") == ("pool-a", 0)
    assert _min_max("0:8") == (0, 8)
    assert _min_max("8:8") == (8, 8)
    with pytest.raises(
        argparse.ArgumentTypeError, match=re.escape("'-1:8' is not MIN:MAX with 0 <= MIN <= MAX")
    ):
        _min_max("-1:8")


def _with_volumes(pod: Pod, volumes: list[dict], **annotations: str) -> Pod:
    raw = pod_manifest(pod.name, cpu="100m", memory="100Mi")
    raw["spec"]["volumes"] = volumes
    raw["metadata"]["annotations"] = {**pod.annotations, **annotations}
    raw["metadata"]["ownerReferences"] = [
        {"apiVersion": "apps/v1", "kind": pod.owner_kind, "name": "o", "uid": "u", "controller": True}
    ]
    return Pod.from_dict(raw)


def test_local_storage_pins_a_replicated_pod_unless_allowed() -> None:
    """The autoscaler's local storage: hostPath and disk-backed emptyDir pin a pod it could
    otherwise move (``--skip-nodes-with-local-storage``, true by default), unless the pod
    lists those volumes in ``safe-to-evict-local-volumes`` or is ``safe-to-evict``; an
    in-memory emptyDir, a ConfigMap or a PVC is not local storage."""
    rs = _pod("web", "100m", "100Mi", owner="ReplicaSet")
    scratch = {"name": "scratch", "emptyDir": {}}
    host = {"name": "host", "hostPath": {"path": "/var/x"}}
    shm = {"name": "shm", "emptyDir": {"medium": "Memory"}}
    others = [
        {"name": "cfg", "configMap": {"name": "c"}},
        {"name": "data", "persistentVolumeClaim": {"claimName": "d"}},
    ]
    assert _with_volumes(rs, [scratch, host, shm, *others]).local_volumes == ("scratch", "host")
    assert pins_node(_with_volumes(rs, [scratch]))
    assert pins_node(_with_volumes(rs, [host]))
    assert not pins_node(_with_volumes(rs, [shm, *others]))
    assert not pins_node(_with_volumes(rs, [scratch]), ScaleDownRules(local_storage_pins=False))
    local = "cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes"
    assert not pins_node(_with_volumes(rs, [scratch, host], **{local: "scratch,host"}))
    assert pins_node(_with_volumes(rs, [scratch, host], **{local: "scratch"}))
    assert not pins_node(
        _with_volumes(rs, [scratch], **{"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"})
    )


def test_an_empty_dir_on_hugepages_is_local_storage() -> None:
    """cluster-autoscaler ``utils/drain`` ``isLocalVolume``: ``HostPath != nil ||
    (EmptyDir != nil && EmptyDir.Medium != StorageMediumMemory)``: only the ``Memory``
    medium is left out, so an emptyDir on ``HugePages`` pins the pod."""
    rs = _pod("web", "100m", "100Mi", owner="ReplicaSet")
    huge = {"name": "huge", "emptyDir": {"medium": "HugePages"}}
    shm = {"name": "shm", "emptyDir": {"medium": "Memory"}}
    assert _with_volumes(rs, [huge, shm]).local_volumes == ("huge",)
    assert pins_node(_with_volumes(rs, [huge]))
    assert not pins_node(_with_volumes(rs, [shm]))


@pytest.mark.controlplane
def test_inspect_sees_local_storage(cluster: ControlPlane, capsys: pytest.CaptureFixture[str]) -> None:
    """A replicated pod with a disk-backed emptyDir pins its node on the real cluster's
    listing; ``--local-storage-moves`` (an autoscaler run with
    ``--skip-nodes-with-local-storage=false``) and the pod's own annotation free it."""
    for node in ("scratchy", "listed"):
        cluster.create_node(node, cpu="4", memory="16Gi")
    uid = "0b5e3f1c-0000-4000-8000-000000000001"
    _controller(cluster, "ReplicaSet", "rs")
    for name, node, notes in (
        ("cache-1", "scratchy", {}),
        ("cache-2", "listed", {"cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes": "scratch"}),
    ):
        raw = pod_manifest(name, cpu="100m", memory="100Mi")
        raw["spec"]["nodeName"] = node
        raw["spec"]["volumes"] = [{"name": "scratch", "emptyDir": {}}]
        raw["metadata"]["annotations"] = notes
        raw["metadata"]["ownerReferences"] = [
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": uid, "controller": True}
        ]
        cluster.create_pod(pod=raw)
    argv = ["inspect", "--kubeconfig", str(cluster.kubeconfig), "--json"]
    assert main(argv) == 0
    nodes = {n["node"]: n for n in json.loads(capsys.readouterr().out)["nodes"]}
    assert (nodes["scratchy"]["verdict"], nodes["scratchy"]["pinning"]) == ("pinned", ["default/cache-1"])
    assert nodes["listed"]["verdict"] == "removable"
    assert main([*argv, "--local-storage-moves"]) == 0
    nodes = {n["node"]: n for n in json.loads(capsys.readouterr().out)["nodes"]}
    # nothing pins scratchy now; but with listed gone (checked first, its pod moved to
    # scratchy) its pods would have no other node
    assert (nodes["scratchy"]["pinning"], nodes["listed"]["verdict"]) == ([], "removable")
    assert nodes["listed"]["moves"] == {"default/cache-2": "scratchy"}
    assert (nodes["scratchy"]["verdict"], nodes["scratchy"]["no_room_for"]) == ("no-room", "default/cache-1")


def test_budgets_and_kube_system_pods() -> None:
    """A replicated kube-system pod pins its node unless a budget covers it (the autoscaler's
    ``--skip-nodes-with-system-pods``); a budget that allows no disruption pins the pods it
    covers; unknown budgets (None) apply neither rule; each reason is named."""
    from stickypack.core.routing import LabelSelector

    def pod(namespace: str, app: str) -> Pod:
        raw = pod_manifest(f"{app}-1", namespace=namespace, labels={"app": app})
        raw["metadata"]["ownerReferences"] = [
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "o", "uid": "u", "controller": True}
        ]
        return Pod.from_dict(raw)

    def budget(namespace: str, app: str, allowed: int) -> DisruptionBudget:
        return DisruptionBudget(namespace, f"{app}-pdb", LabelSelector({"app": app}), allowed)

    dns, web, bare = pod("kube-system", "dns"), pod("web", "shop"), _pod("user", "1", "1Gi")
    assert pin_reason(dns) == "kube-system pod without a PodDisruptionBudget"
    assert pin_reason(dns, ScaleDownRules(system_pods_pin=False)) is None
    # cluster-autoscaler 1.33+: only until it is --blocking-system-pod-distruption-timeout old
    born = dataclasses.replace(dns, created=1000.0)
    assert pin_reason(born, ScaleDownRules(now=1000.0 + 3600)) is not None  # exactly 1 h: still
    assert pin_reason(born, ScaleDownRules(now=1000.0 + 3601)) is None
    assert pin_reason(born, ScaleDownRules(now=1000.0 + 61, system_pod_disruption_timeout_s=60)) is None
    assert pin_reason(born, ScaleDownRules(now=1e9, system_pod_disruption_timeout_s=None)) is not None
    assert pin_reason(dns, ScaleDownRules(now=1e9)) is not None  # no creation time: pins
    assert pin_reason(dns, ScaleDownRules(budgets=None)) is None  # budgets unknown
    assert pin_reason(dns, ScaleDownRules(budgets=(budget("kube-system", "dns", 1),))) is None
    assert (
        pin_reason(dns, ScaleDownRules(budgets=(budget("default", "dns", 1),))) is not None
    )  # other namespace
    assert pin_reason(web, ScaleDownRules(budgets=(budget("web", "shop", 0),))) == (
        "PodDisruptionBudget shop-pdb allows no disruption"
    )
    assert pin_reason(web, ScaleDownRules(budgets=(budget("web", "shop", 2),))) is None
    # two exhausted budgets cover it: the first in the budgets' order is named (the order
    # the autoscaler's pdb rule walks them), "shop-pdb" before "a-shop"
    other = DisruptionBudget("web", "a-shop", LabelSelector({"app": "shop"}), 0)
    assert pin_reason(web, ScaleDownRules(budgets=(budget("web", "shop", 0), other))) == (
        "PodDisruptionBudget shop-pdb allows no disruption"
    )
    # safe-to-evict "true" frees a pod from every rule but its budget: the autoscaler drains
    # through the Eviction API, which refuses while the budget allows no disruption (FAQ.md:
    # "Pods with restrictive PodDisruptionBudget" have no safe-to-evict exception)
    safe = {"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"}
    evictable = dataclasses.replace(web, annotations=safe)
    assert pin_reason(evictable, ScaleDownRules(budgets=(budget("web", "shop", 0),))) == (
        "PodDisruptionBudget shop-pdb allows no disruption"
    )
    assert pin_reason(evictable, ScaleDownRules(budgets=(budget("web", "shop", 1),))) is None
    assert pin_reason(evictable, ScaleDownRules(budgets=None)) is None
    assert pin_reason(web, ScaleDownRules(budgets=(DisruptionBudget("web", "none", None, 0),))) is None
    assert pin_reason(bare) == "no controller"
    assert pin_reason(_pod("w", "1", "1Gi", owner="DaskWorkerGroup")) == "controller DaskWorkerGroup"


@pytest.mark.controlplane
def test_inspect_reads_budgets_and_says_when_it_cannot(
    cluster: ControlPlane, capsys: pytest.CaptureFixture[str]
) -> None:
    """On the real API server: PodDisruptionBudgets are listed (their status written as the
    absent disruption controller would), a kube-system pod no budget covers and a pod whose
    budget allows no disruption pin their nodes, with the reason shown; run as an account
    that may not list budgets, inspect says so and judges without them."""

    from kubernetes_asyncio import client as k8s

    for node in ("sys", "covered", "exhausted", "evictable"):
        cluster.create_node(node, cpu="4", memory="16Gi")
    uid = "0b5e3f1c-0000-4000-8000-000000000002"
    for namespace in ("default", "kube-system"):
        _controller(cluster, "ReplicaSet", "rs", namespace)
    for name, namespace, node, app in (
        ("dns-1", "kube-system", "sys", "dns"),
        ("metrics-1", "kube-system", "covered", "metrics"),
        ("shop-1", "default", "exhausted", "shop"),
        ("shop-2", "default", "evictable", "shop"),
    ):
        raw = pod_manifest(name, namespace=namespace, cpu="100m", memory="100Mi", labels={"app": app})
        raw["spec"]["nodeName"] = node
        if name == "shop-2":  # the Eviction API refuses it all the same
            raw["metadata"]["annotations"] = {"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"}
        raw["metadata"]["ownerReferences"] = [
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": uid, "controller": True}
        ]
        cluster.create_pod(pod=raw, namespace=namespace)
    suffix = uuid.uuid4().hex[:6]
    budgets = [("kube-system", f"metrics-{suffix}", "metrics", 1), ("default", f"shop-{suffix}", "shop", 0)]

    async def make_budgets(api: object) -> None:
        policy = k8s.PolicyV1Api(api)
        for namespace, name, app, allowed in budgets:
            body = {
                "metadata": {"name": name},
                "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": app}}},
            }
            await policy.create_namespaced_pod_disruption_budget(namespace, body)
            status = {"status": {"disruptionsAllowed": allowed, "currentHealthy": 1, "desiredHealthy": 1,
                                 "expectedPods": 1, "observedGeneration": 1}}  # fmt: skip
            await policy.patch_namespaced_pod_disruption_budget_status(name, namespace, status)

    async def drop_budgets(api: object) -> None:
        for namespace, name, _, _ in budgets:
            await k8s.PolicyV1Api(api).delete_namespaced_pod_disruption_budget(name, namespace)

    cluster.call(make_budgets)
    try:
        argv = ["inspect", "--kubeconfig", str(cluster.kubeconfig), "--json"]
        assert main(argv) == 0
        report = json.loads(capsys.readouterr().out)
        assert report["budgets_read"] is True and report["namespaces_read"] is True
        assert report["volumes_read"] is True
        nodes = {n["node"]: n for n in report["nodes"]}
        assert nodes["sys"]["pin_reasons"] == {
            "kube-system/dns-1": "kube-system pod without a PodDisruptionBudget"
        }
        # an autoscaler whose timeout the pod has outlived (1.33+) lets it go
        assert main([*argv, "--blocking-system-pod-distruption-timeout", "0s"]) == 0
        quick = {n["node"]: n for n in json.loads(capsys.readouterr().out)["nodes"]}
        assert "kube-system/dns-1" not in quick["sys"]["pin_reasons"]
        assert nodes["covered"]["verdict"] == "removable"
        assert nodes["exhausted"]["pin_reasons"] == {
            "default/shop-1": f"PodDisruptionBudget shop-{suffix} allows no disruption"
        }
        assert nodes["evictable"]["pin_reasons"] == {
            "default/shop-2": f"PodDisruptionBudget shop-{suffix} allows no disruption"
        }
        assert main([*argv, "--system-pods-move"]) == 0
        nodes = {n["node"]: n for n in json.loads(capsys.readouterr().out)["nodes"]}
        assert nodes["sys"]["verdict"] == "removable"

        # an account that may list nodes and pods, not budgets
        account = f"inspect-{suffix}"

        limited = _account_that_lists(cluster, account, {"": ["nodes", "pods"]})
        assert main(["inspect", "--kubeconfig", str(limited)]) == 0
        out = capsys.readouterr().out
        assert "PodDisruptionBudgets could not be listed" in out
        assert "controllers could not be listed" in out and "namespaces could not be listed" in out
        assert "persistent volumes could not be listed" in out
        assert main(["inspect", "--kubeconfig", str(limited), "--json"]) == 0
        report = json.loads(capsys.readouterr().out)
        assert report["budgets_read"] is False and report["controllers_read"] is False
        assert report["namespaces_read"] is False and report["volumes_read"] is False
        nodes = {n["node"]: n for n in report["nodes"]}
        assert nodes["sys"]["pinning"] == [] and nodes["exhausted"]["pinning"] == []
        # nothing pins any of the four now: three go, their pods moving from one to the
        # next, and the last one checked keeps them all
        assert [nodes[n]["verdict"] for n in ("covered", "evictable", "exhausted", "sys")] == [
            "removable", "removable", "removable", "no-room"
        ]  # fmt: skip
    finally:
        cluster.call(drop_budgets)


@pytest.mark.controlplane
def test_inspect_spends_a_budget_on_the_nodes_it_removes_first(
    cluster: ControlPlane, capsys: pytest.CaptureFixture[str]
) -> None:
    """On the real API server: two half-idle nodes each run a replica covered by one
    budget that allows one disruption. The autoscaler's loop lets the first go and keeps the
    second (the budget spent); with two disruptions allowed both go."""
    from kubernetes_asyncio import client as k8s

    for node in ("a", "b"):
        cluster.create_node(node, cpu="4", memory="16Gi")
    cluster.create_node("big", cpu="16", memory="64Gi")
    _bind(cluster, "web-a", "a", "500m", "1Gi", owner="ReplicaSet", app="web")
    _bind(cluster, "web-b", "b", "500m", "1Gi", owner="ReplicaSet", app="web")
    _bind(cluster, "hog", "big", "12", "1Gi")  # busy: no candidate, room for both
    name = f"web-{uuid.uuid4().hex[:6]}"

    async def budget(api: object, allowed: int) -> None:
        policy = k8s.PolicyV1Api(api)
        if allowed == 1:
            selector = {"matchLabels": {"app": "web"}}
            body = {"metadata": {"name": name}, "spec": {"maxUnavailable": 1, "selector": selector}}
            await policy.create_namespaced_pod_disruption_budget("default", body)
        status = {"status": {"disruptionsAllowed": allowed, "currentHealthy": 2, "desiredHealthy": 1,
                             "expectedPods": 2, "observedGeneration": 1}}  # fmt: skip
        await policy.patch_namespaced_pod_disruption_budget_status(name, "default", status)

    async def drop(api: object) -> None:
        await k8s.PolicyV1Api(api).delete_namespaced_pod_disruption_budget(name, "default")

    argv = ["inspect", "--kubeconfig", str(cluster.kubeconfig), "--json"]
    cluster.call(lambda api: budget(api, 1))
    try:
        assert main(argv) == 0
        report = json.loads(capsys.readouterr().out)
        nodes = {n["node"]: n for n in report["nodes"]}
        assert (nodes["a"]["verdict"], nodes["b"]["verdict"]) == ("removable", "pinned")
        assert nodes["b"]["pin_reasons"] == {
            "default/web-b": f"PodDisruptionBudget {name}: its disruptions (1) go to nodes removed before"
        }
        assert (report["summary"]["removable"], report["summary"]["pinned"]) == (1, 1)
        assert main(argv[:-1]) == 0  # the table names the pod and the budget
        assert f"default/web-b (PodDisruptionBudget {name}" in capsys.readouterr().out
        cluster.call(lambda api: budget(api, 2))
        assert main(argv) == 0
        nodes = {n["node"]: n for n in json.loads(capsys.readouterr().out)["nodes"]}
        assert (nodes["a"]["verdict"], nodes["b"]["verdict"]) == ("removable", "removable")
    finally:
        cluster.call(drop)


@pytest.mark.controlplane
def test_inspect_keeps_a_node_that_reports_no_allocatable(
    cluster: ControlPlane, capsys: pytest.CaptureFixture[str]
) -> None:
    """On the real API server: a Node whose status was never written (no allocatable) is
    one the autoscaler cannot weigh and keeps: ``incomplete`` with the reason, in the JSON
    and the table, and counted in the summary even without ``--dra``."""
    cluster.create_node("ok", cpu="4", memory="16Gi")
    cluster.call(lambda api: client.CoreV1Api(api).create_node({"metadata": {"name": "blank"}}))
    assert main(["inspect", "--kubeconfig", str(cluster.kubeconfig), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    nodes = {n["node"]: n for n in report["nodes"]}
    assert (nodes["blank"]["verdict"], nodes["ok"]["verdict"]) == ("incomplete", "empty")
    assert nodes["blank"]["utilization_error"] == "no cpu or memory allocatable"
    assert nodes["ok"]["utilization_error"] is None
    assert report["summary"]["incomplete"] == 1 and report["summary"]["empty"] == 1
    assert main(["inspect", "--kubeconfig", str(cluster.kubeconfig)]) == 0
    out = capsys.readouterr().out
    assert "no cpu or memory allocatable" in out and "1 the autoscaler cannot weigh (kept)" in out


KUBE_FILTERS = load_builtin("default").profiles[0].filters


def test_scale_down_plan_moves_pods_as_the_autoscaler_would() -> None:
    """Candidates are checked in order; a removable one's pods stay where they were placed
    and it takes no more; a candidate whose pods do not all fit keeps them (none of its
    placements stay). Nodes being deleted, and nodes whose taints a pod does not tolerate,
    take nothing; DaemonSet pods are not moved; expendable pods take no room. The table
    given is not changed."""
    table = _table({"a-busy": (4000, 16), "b": (4000, 16), "c": (4000, 16), "d-going": (4000, 16)})
    tainted = [Taint("gpu", "x", "NoSchedule")]
    table.upsert_node("e-tainted", {"cpu": 4000, "memory": 16 * GI, "pods": 110}, taints=tainted)
    table.to_be_deleted[table.index["d-going"]] = True
    web_1, web_2 = (
        _pod("web-1", "1500m", "1Gi", owner="ReplicaSet"),
        _pod("web-2", "800m", "1Gi", owner="ReplicaSet"),
    )
    pods = {
        "a-busy": [_pod("alice", "3", "1Gi"), _with_priority(_pod("filler", "1", "1Gi"), -20)],
        "b": [web_1, _pod("proxy", "100m", "100Mi", owner="DaemonSet")],
        "c": [web_2],
    }
    for node, bound in pods.items():
        for pod in bound:
            table.add_pod(table.index[node], pod)
    before = table.requested.copy()
    # a-busy has 1 cpu free, the expendable filler left out: web-1 (1.5) goes to c; then of
    # c's pods web-2 fits on a-busy, web-1 nowhere (b is gone, d being deleted, e tainted)
    plan = plan_scale_down(table, pods, ["b", "c"], KUBE_FILTERS)
    assert (plan.removable, plan.moves, plan.no_room) == (
        ("b",),
        {"default/web-1": "c"},
        {"c": "default/web-1"},
    )
    assert (table.requested == before).all()
    # the other order: web-2 to a-busy, and web-1 has no room
    plan = plan_scale_down(table, pods, ["c", "b"], KUBE_FILTERS)
    assert (plan.removable, plan.moves, plan.no_room) == (
        ("c",),
        {"default/web-2": "a-busy"},
        {"b": "default/web-1"},
    )
    # the filler counted (not expendable under a lower cutoff): a-busy is full, web-2 goes to b
    low = ScaleDownRules(expendable_priority_cutoff=-30)
    assert plan_scale_down(table, pods, ["c", "b"], KUBE_FILTERS, low).moves == {"default/web-2": "b"}


def test_scale_down_plan_spends_disruption_budgets_node_by_node() -> None:
    """Within one loop the autoscaler takes, for every pod a removable node moves, one
    disruption of each budget covering it (its RemainingPdbTracker); a later candidate
    whose pod that budget then holds is kept (NotEnoughPdb) before its pods are placed.
    Two pods of one node may take a budget below zero (the autoscaler drains them one by
    one); a budget of another namespace, or one with disruptions left, holds nothing."""
    from stickypack.core.routing import LabelSelector

    table = _table({"a": (4000, 16), "b": (4000, 16), "c": (4000, 16), "big": (16000, 64)})

    def web(name: str, namespace: str = "default") -> Pod:
        pod = _pod(name, "500m", "1Gi", owner="ReplicaSet")
        return dataclasses.replace(pod, labels={"app": "web"}, namespace=namespace)

    pods = {"a": [web("web-a1"), web("web-a2")], "b": [web("web-b")], "c": [web("web-c", "other")]}
    for node, bound in pods.items():
        for pod in bound:
            table.add_pod(table.index[node], pod)

    def plan(allowed: int) -> tuple[tuple[str, ...], dict[str, tuple[str, str]]]:
        budget = DisruptionBudget("default", "web", LabelSelector({"app": "web"}), allowed)
        rules = ScaleDownRules(budgets=(budget,))
        assert not any(pins_node(p, rules) for bound in pods.values() for p in bound)
        result = plan_scale_down(table, pods, ["a", "b", "c"], KUBE_FILTERS, rules)
        return result.removable, dict(result.blocked)

    def held(pod: str, allowed: int) -> tuple[str, str]:
        why = f"PodDisruptionBudget web: its disruptions ({allowed}) go to nodes removed before"
        return f"default/{pod}", why

    # a's two pods go to b, taking the budget's one disruption (and one more): b is held, c
    # (another namespace's pod) is not
    assert plan(1) == (("a", "c"), {"b": held("web-b", 1)})
    assert plan(2) == (("a", "c"), {"b": held("web-b", 2)})
    # with 3, b goes too and moves a's two pods on to c with its own: 5 taken, and c holds
    # them now
    assert plan(3) == (("a", "b"), {"c": held("web-b", 3)})
    assert plan(6) == (("a", "b", "c"), {})
    no_budgets = plan_scale_down(table, pods, ["a", "b", "c"], KUBE_FILTERS, ScaleDownRules(budgets=None))
    assert no_budgets.removable == ("a", "b", "c") and not no_budgets.blocked


class _EveryBudget(BudgetIndex):
    """The straightforward check the index stands for: every budget tested on the pod."""

    def covering(self, pod: Pod) -> tuple[int, ...]:
        return tuple(k for k, b in enumerate(self.budgets) if b.covers(pod))


def _random_budgets_and_pods(rng: random.Random) -> tuple[tuple[DisruptionBudget, ...], list[Pod]]:
    """Budgets of a few namespaces with selectors of every kind (none, empty, matchLabels
    of one to three keys, expressions alone or with them), and pods of those namespaces
    (kube-system too) with random labels, owners and annotations."""
    from stickypack.core.labels import Requirement
    from stickypack.core.routing import LabelSelector

    namespaces = ["default", "jhub", "kube-system"]
    keys = ["app", "tier", "app.kubernetes.io/name", "release"]
    values = ["x", "y", "z", ""]

    def labels(most: int) -> dict[str, str]:
        return {k: rng.choice(values) for k in rng.sample(keys, rng.randint(0, most))}

    def expressions() -> tuple[Requirement, ...]:
        out = []
        for _ in range(rng.randint(1, 2)):
            op = rng.choice(["In", "NotIn", "Exists", "DoesNotExist"])
            vals = tuple(rng.sample(values, rng.randint(1, 2))) if op in ("In", "NotIn") else ()
            out.append(Requirement(rng.choice(keys), op, vals))
        return tuple(out)

    budgets = []
    for b in range(rng.randint(0, 12)):
        kind = rng.random()
        selector = (
            None
            if kind < 0.1
            else LabelSelector()
            if kind < 0.2
            else LabelSelector({}, expressions())
            if kind < 0.3
            else LabelSelector(labels(3) or {"app": "x"}, expressions() if kind < 0.45 else ())
        )
        budgets.append(DisruptionBudget(rng.choice(namespaces), f"pdb-{b}", selector, rng.randint(0, 3)))
    pods = []
    for i in range(rng.randint(1, 30)):
        owner = rng.choice(["ReplicaSet", "ReplicaSet", "StatefulSet", None])
        annotations = {"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"} if rng.random() < 0.1 else {}
        pod = _pod(f"p{i}", rng.choice(["100m", "500m", "1"]), "256Mi", owner=owner, **annotations)
        pods.append(dataclasses.replace(pod, namespace=rng.choice(namespaces), labels=labels(4)))
    return tuple(budgets), pods


def test_budget_index_finds_what_testing_every_budget_finds() -> None:
    """Random budgets and pods: :class:`BudgetIndex` (by namespace, then by a label each
    selector requires) finds the same budgets in the same order as testing every budget's
    ``covers``, and so :func:`pin_reason` says the same."""
    rng = random.Random(7)
    for _ in range(400):
        budgets, pods = _random_budgets_and_pods(rng)
        index = BudgetIndex(budgets)
        every = _EveryBudget(budgets)
        rules = ScaleDownRules(budgets=budgets)
        for pod in pods:
            assert index.covering(pod) == every.covering(pod), (budgets, pod.namespace, pod.labels)
            covering = [b for b in budgets if b.covers(pod)]
            assert rules.covering(pod) == covering
            assert pin_reason(pod, rules) == pin_reason_with(pod, rules, covering)


def test_the_plans_budgets_spend_and_hold_as_testing_every_budget_does() -> None:
    """Random budgets and pods, disruptions taken by random groups of pods: the plan's
    budget keeping (``drain._Budgets``, each pod's budgets looked up once) takes and holds
    as the straightforward way does: every budget tested on every pod, and a pod held when
    :func:`pin_reason` with the disruptions left names a reason it did not name before, by
    the first spent budget covering it."""
    from stickypack.core.drain import _Budgets

    def reference(rules: ScaleDownRules, taken: list[int], pods: list[Pod]) -> tuple[str, str] | None:
        budgets = rules.budgets or ()
        spent = [b for b, n in zip(budgets, taken, strict=True) if n and b.disruptions_allowed - n < 1]
        left = tuple(
            dataclasses.replace(b, disruptions_allowed=b.disruptions_allowed - n)
            for b, n in zip(budgets, taken, strict=True)
        )
        now = dataclasses.replace(rules, budgets=left)
        for pod in pods:
            budget = next((b for b in spent if b.covers(pod)), None)
            if budget is not None and pin_reason(pod, now) is not None and pin_reason(pod, rules) is None:
                why = f"its disruptions ({budget.disruptions_allowed}) go to nodes removed before"
                return pod.key, f"PodDisruptionBudget {budget.name}: {why}"
        return None

    rng = random.Random(5)
    holds = 0
    for _ in range(300):
        budgets, pods = _random_budgets_and_pods(rng)
        rules = ScaleDownRules(budgets=budgets)
        kept = _Budgets(rules)
        taken = [0] * len(budgets)
        for _ in range(4):
            group = rng.sample(pods, rng.randint(0, len(pods)))
            held = kept.holding(group)
            assert held == reference(rules, taken, group)
            holds += held is not None
            moved = rng.sample(pods, rng.randint(0, min(len(pods), 3)))
            kept.take(moved)
            for pod in moved:
                for k, budget in enumerate(budgets):
                    taken[k] += budget.covers(pod)
            assert kept.taken == taken
    assert holds > 20


def test_node_report_and_plan_with_the_budget_index_as_with_every_budget_tested() -> None:
    """Random clusters, budgets and pods: the node report and the scale-down plan (which
    spends the budgets node by node and holds later candidates) are the same with the
    rules' :class:`BudgetIndex` as with every budget tested on every pod."""
    rng = random.Random(11)
    held = 0
    for _ in range(150):
        budgets, pods = _random_budgets_and_pods(rng)
        table = _table({f"n{i}": (4000, 16) for i in range(rng.randint(2, 8))})
        names = list(table.index)
        pods_by_node: dict[str, list[Pod]] = {}
        for pod in pods:
            node = rng.choice(names)
            table.add_pod(table.index[node], pod)
            pods_by_node.setdefault(node, []).append(pod)
        indexed = ScaleDownRules(budgets=budgets)
        straight = ScaleDownRules(budgets=budgets)
        object.__setattr__(straight, "budget_index", _EveryBudget(budgets))
        order = rng.random()  # the candidates in one random order, the same both ways
        answers = []
        for rules in (indexed, straight):
            reports = node_report(table, pods_by_node, rules)
            candidates = [r.node for r in reports if r.verdict(1.0) in ("removable", "empty")]
            random.Random(order).shuffle(candidates)
            answers.append((reports, plan_scale_down(table, pods_by_node, candidates, KUBE_FILTERS, rules)))
        assert answers[0] == answers[1]
        held += len(answers[0][1].blocked)
    assert held > 0  # some plans held a candidate for a budget spent before it


def test_scale_down_plan_gives_a_pod_moved_twice_its_last_node() -> None:
    """b's pod goes to c (a is full); c, checked next, goes too, moving its own pod and
    b's on to d: the plan gives each pod the node it ends on, d, as ``inspect`` shows it
    under the node it runs on now."""
    table = _table({"a": (4000, 16), "b": (4000, 16), "c": (4000, 16), "d": (4000, 16)})
    pods = {
        "a": [_pod("alice", "4", "1Gi")],
        "b": [_pod("web-1", "1", "1Gi", owner="ReplicaSet")],
        "c": [_pod("web-2", "1", "1Gi", owner="ReplicaSet")],
        "d": [_pod("big", "2", "1Gi", owner="ReplicaSet")],
    }
    for node, bound in pods.items():
        for pod in bound:
            table.add_pod(table.index[node], pod)
    assert plan_scale_down(table, pods, ["b"], KUBE_FILTERS).moves == {"default/web-1": "c"}
    plan = plan_scale_down(table, pods, ["b", "c"], KUBE_FILTERS)
    assert (plan.removable, plan.moves) == (("b", "c"), {"default/web-1": "d", "default/web-2": "d"})
    # d, checked last, has nowhere for its pods (a full, b and c gone): it keeps them all
    plan = plan_scale_down(table, pods, ["b", "c", "d"], KUBE_FILTERS)
    assert (plan.removable, plan.no_room) == (("b", "c"), {"d": "default/big"})


def test_scale_down_plan_keeps_the_room_of_long_terminating_pods() -> None:
    """The autoscaler's snapshot holds every bound pod not Succeeded or Failed, so a pod
    terminating for too long still takes its room on its node (only the drainability rules
    skip it: it is not moved, and does not count in the utilization): a candidate's pod
    does not fit where it holds the room, and fits once it is gone."""
    table = _table({"a-stuck": (4000, 16), "b": (4000, 16)})
    stuck = dataclasses.replace(_pod("stuck", "3", "1Gi", owner="ReplicaSet"), deleted=0.0, grace_period_s=30)
    pods = {"a-stuck": [stuck], "b": [_pod("web", "2", "1Gi", owner="ReplicaSet")]}
    for node, bound in pods.items():
        for pod in bound:
            table.add_pod(table.index[node], pod)
    rules = ScaleDownRules(now=1000.0)  # stuck: deleted 1000 s ago, past its 30 + 30 s
    reports = {r.node: r for r in node_report(table, pods, rules)}
    assert (reports["a-stuck"].terminating_pods, reports["a-stuck"].verdict(0.5)) == (1, "empty")
    plan = plan_scale_down(table, pods, ["b"], KUBE_FILTERS, rules)
    assert (plan.removable, plan.moves, plan.no_room) == ((), {}, {"b": "default/web"})
    # a-stuck's own candidacy moves nothing (stuck is skipped): it goes, and web has no room
    plan = plan_scale_down(table, pods, ["a-stuck", "b"], KUBE_FILTERS, rules)
    assert (plan.removable, plan.moves, plan.no_room) == (("a-stuck",), {}, {"b": "default/web"})
    table.remove_pod(table.index["a-stuck"], stuck)  # once stuck is gone, web fits there
    plan = plan_scale_down(table, {"b": pods["b"]}, ["b"], KUBE_FILTERS, rules)
    assert (plan.removable, plan.moves) == (("b",), {"default/web": "a-stuck"})


def test_scale_down_plan_places_the_pods_of_nodes_being_deleted_first() -> None:
    """As the autoscaler treats its deletions in progress: the pods of a node tainted
    ToBeDeletedByClusterAutoscaler take their room elsewhere before any candidate is
    judged, and that node is never judged itself."""
    table = _table({"a": (4000, 16), "b": (4000, 16), "d": (4000, 16)})
    table.to_be_deleted[table.index["d"]] = True
    leaving = _pod("leaving", "3", "1Gi", owner="ReplicaSet")
    web = _pod("web", "1500m", "1Gi", owner="ReplicaSet")
    table.add_pod(table.index["d"], leaving)
    table.add_pod(table.index["b"], web)
    pods = {"d": [leaving], "b": [web]}
    # leaving takes 3 of a's 4 cpus first: web has no room left
    plan = plan_scale_down(table, pods, ["d", "b"], KUBE_FILTERS)
    assert (plan.removable, plan.no_room) == ((), {"b": "default/web"})
    # without the deletion, b's pod would fit on a (or d)
    table.to_be_deleted[table.index["d"]] = False
    assert plan_scale_down(table, pods, ["b"], KUBE_FILTERS).moves == {"default/web": "a"}


def test_scale_down_plan_first_fit_looks_past_the_first_slice() -> None:
    """The first fit filters the nodes a slice at a time (``FIRST_FIT_SLICE``) and gives
    the first node that passes, by row, wherever it is: here the 100th of 130, past the
    first slice, not the later one; and none when no node passes."""
    from stickypack.core.drain import FIRST_FIT_SLICE

    assert FIRST_FIT_SLICE < 99
    table = NodeTable()
    taint = [Taint("dedicated", "gpu", "NoSchedule")]
    for i in range(130):
        open_ = i in (99, 120)
        table.upsert_node(
            f"n{i:03d}", {"cpu": 4000, "memory": 16 * GI, "pods": 110}, taints=[] if open_ else taint
        )
    table.upsert_node("quiet", {"cpu": 4000, "memory": 16 * GI, "pods": 110})
    web = _pod("web", "100m", "100Mi", owner="ReplicaSet")
    table.add_pod(table.index["quiet"], web)
    plan = plan_scale_down(table, {"quiet": [web]}, ["quiet"], KUBE_FILTERS)
    assert plan.moves == {"default/web": "n099"}
    plan = plan_scale_down(table, {"quiet": [web]}, ["n099", "n120", "quiet"], KUBE_FILTERS)
    assert plan.removable == ("n099", "n120") and plan.no_room == {"quiet": "default/web"}


def test_scale_down_plan_first_fit_sees_the_last_node_of_a_slice() -> None:
    """The first fit's slices cover every row: with only the ``FIRST_FIT_SLICE``-th node
    (the last of the first slice, n063 for 64) untainted among 70, the pod goes there; a
    slice that left out its last row would find no node."""
    from stickypack.core.drain import FIRST_FIT_SLICE

    last = FIRST_FIT_SLICE - 1
    table = NodeTable()
    taint = [Taint("dedicated", "gpu", "NoSchedule")]
    for i in range(FIRST_FIT_SLICE + 6):
        table.upsert_node(
            f"n{i:03d}", {"cpu": 4000, "memory": 16 * GI, "pods": 110}, taints=[] if i == last else taint
        )
    table.upsert_node("quiet", {"cpu": 4000, "memory": 16 * GI, "pods": 110})
    web = _pod("web", "100m", "100Mi", owner="ReplicaSet")
    table.add_pod(table.index["quiet"], web)
    plan = plan_scale_down(table, {"quiet": [web]}, ["quiet"], KUBE_FILTERS)
    assert (plan.removable, plan.moves) == (("quiet",), {"default/web": f"n{last:03d}"})


def test_scale_down_plan_leaves_a_candidate_without_room_as_it_was() -> None:
    """A candidate whose pods do not all fit keeps them and their room, and none of its
    placements stay (the autoscaler simulates each removal on a fork of its snapshot and
    reverts it: ``RemovalSimulator.withForkedSnapshot``, simulator/cluster.go). Nodes of
    millicores, by row: a 4000 (alice 3000: 1000 free), c 4000 (web-1 1000 + web-2 1500:
    1500 free), d 1000 (web-3 1000: full), e 2000 (web-4 1500: 500 free), f 4000 (web-5
    3000: 1000 free).

    - c: web-1 (1000) fits on a (a full then); web-2 (1500) fits nowhere (d 0, e 500, f
      1000 free): c is kept and web-1 leaves a again;
    - d: web-3 (1000) fits on a, its 1000 free once more: d goes (a full);
    - f: web-5 (3000) fits nowhere: c has only its 1500 free, its pods back on it;
    - e: web-4 (1500) fits on c's 1500 free: e goes."""
    table = _table({"a": (4000, 16), "c": (4000, 16), "d": (1000, 16), "e": (2000, 16), "f": (4000, 16)})
    pods = {
        "a": [_pod("alice", "3", "1Gi")],
        "c": [
            _pod("web-1", "1", "1Gi", owner="ReplicaSet"),
            _pod("web-2", "1500m", "1Gi", owner="ReplicaSet"),
        ],
        "d": [_pod("web-3", "1", "1Gi", owner="ReplicaSet")],
        "e": [_pod("web-4", "1500m", "1Gi", owner="ReplicaSet")],
        "f": [_pod("web-5", "3", "1Gi", owner="ReplicaSet")],
    }
    for node, bound in pods.items():
        for pod in bound:
            table.add_pod(table.index[node], pod)
    plan = plan_scale_down(table, pods, ["c", "d", "f", "e"], KUBE_FILTERS)
    assert (plan.removable, plan.moves, plan.no_room) == (
        ("d", "e"),
        {"default/web-3": "a", "default/web-4": "c"},
        {"c": "default/web-2", "f": "default/web-5"},
    )


def test_scale_down_plan_moves_again_the_pods_placed_from_a_node_being_deleted() -> None:
    """A pod of a node being deleted placed on a candidate is one of that candidate's pods
    to move: the autoscaler places the pods of its deletions in progress in its snapshot
    (``currentlyDrainedNodesPodListProcessor`` then ``filterOutSchedulablePodListProcessor``,
    core/podlistprocessor/) and its removal simulation moves every pod of a candidate's
    node. Millicores, by row: b 4000 (web 1000), c 4000 (alice 2500: 1500 free), d 4000 being
    deleted (leaving 2000). leaving goes to b (3000 free); b's pods then are web (1000, to
    c: 500 left) and leaving (2000: no room). Without the deletion, b's web alone goes to c."""
    table = _table({"b": (4000, 16), "c": (4000, 16), "d": (4000, 16)})
    pods = {
        "b": [_pod("web", "1", "1Gi", owner="ReplicaSet")],
        "c": [_pod("alice", "2500m", "1Gi")],
        "d": [_pod("leaving", "2", "1Gi", owner="ReplicaSet")],
    }
    for node, bound in pods.items():
        for pod in bound:
            table.add_pod(table.index[node], pod)
    table.to_be_deleted[table.index["d"]] = True
    plan = plan_scale_down(table, pods, ["b"], KUBE_FILTERS)
    assert (plan.removable, plan.no_room) == ((), {"b": "default/leaving"})
    table.to_be_deleted[table.index["d"]] = False
    plan = plan_scale_down(table, pods, ["b"], KUBE_FILTERS)
    assert (plan.removable, plan.moves) == (("b",), {"default/web": "c"})


def _with_gpus(pod: Pod, gpus: int) -> Pod:
    return dataclasses.replace(pod, requests={**pod.requests, "nvidia.com/gpu": gpus})


def test_gpu_nodes_are_weighed_by_their_gpus() -> None:
    """As the autoscaler's ``utilization.Calculate``: a node with GPUs allocatable, or with
    its provider's GPU label, is weighed by its GPU requests alone (at the GPU threshold);
    a labelled node whose GPUs are not allocatable yet is unused; expendable pods' GPUs do
    not count."""
    table = NodeTable()
    for name, gpus, labels in [
        ("cpu-only", 0, {}),
        ("gpu", 4, {}),
        ("warming", 0, {"cloud.google.com/gke-accelerator": "nvidia-l4"}),
        ("aks", 0, {"accelerator": "nvidia"}),
    ]:
        alloc = {"cpu": 4000, "memory": 16 * GI, "pods": 110, **({"nvidia.com/gpu": gpus} if gpus else {})}
        table.upsert_node(name, alloc, labels=labels)
    notebook = _with_gpus(_pod("notebook", "3", "1Gi"), 1)  # 75% of the cpu, 25% of the GPUs
    filler = _with_priority(_with_gpus(_pod("filler", "100m", "1Gi"), 2), -20)  # expendable
    pods = {
        "gpu": [notebook, filler],
        "warming": [_pod("early", "3", "1Gi")],
        "cpu-only": [_pod("c", "3", "1Gi")],
    }
    for node, bound in pods.items():
        for pod in bound:
            table.add_pod(table.index[node], pod)
    reports = {r.node: r for r in node_report(table, pods)}
    assert reports["cpu-only"].gpu is None and reports["cpu-only"].utilization == 0.75
    assert (reports["gpu"].cpu, reports["gpu"].gpu, reports["gpu"].utilization) == (0.75, 0.25, 0.25)
    assert reports["gpu"].verdict(0.5) == "pinned" and reports["gpu"].verdict(0.5, 0.2) == "busy"
    assert reports["cpu-only"].verdict(0.5, 0.9) == "busy"  # the GPU threshold is for GPU nodes only
    assert (reports["warming"].gpu, reports["warming"].verdict(0.5)) == (0.0, "pinned")
    assert reports["aks"].gpu is None  # "accelerator" is not a default label...
    aks = {r.node: r for r in node_report(table, pods, ScaleDownRules(gpu_labels=("accelerator",)))}
    assert aks["aks"].gpu == 0.0 and aks["warming"].gpu is None  # ...but can be named
    assert aks["gpu"].gpu == 0.25  # GPUs allocatable: a GPU node whatever its labels


def test_the_gpu_threshold_and_the_eks_label_by_default() -> None:
    """By default a node labelled ``k8s.amazonaws.com/accelerator`` (EKS's GPULabel) is a
    GPU node too, and a GPU node is judged at the autoscaler's default
    ``--scale-down-gpu-utilization-threshold`` 0.5, whatever the cpu threshold: 3 of 5
    GPUs requested (0.6) is busy, 1 of 2 (0.5, at the threshold) is not."""
    table = NodeTable()
    for name, gpus, labels in [
        ("eks", 0, {"k8s.amazonaws.com/accelerator": "nvidia-tesla-t4"}),
        ("three-of-five", 5, {}),
        ("one-of-two", 2, {}),
    ]:
        alloc = {"cpu": 4000, "memory": 16 * GI, "pods": 110, **({"nvidia.com/gpu": gpus} if gpus else {})}
        table.upsert_node(name, alloc, labels=labels)
    pods = {
        "eks": [_pod("early", "3", "1Gi", owner="ReplicaSet")],  # 75% of the cpu, not read
        "three-of-five": [_with_gpus(_pod("a", "100m", "1Gi", owner="ReplicaSet"), 3)],
        "one-of-two": [_with_gpus(_pod("b", "100m", "1Gi", owner="ReplicaSet"), 1)],
    }
    for node, bound in pods.items():
        for pod in bound:
            table.add_pod(table.index[node], pod)
    reports = {r.node: r for r in node_report(table, pods)}
    assert (reports["eks"].gpu, reports["eks"].utilization, reports["eks"].verdict(0.5)) == (
        0.0,
        0.0,
        "removable",
    )
    assert (reports["three-of-five"].utilization, reports["three-of-five"].verdict(0.9)) == (0.6, "busy")
    assert (reports["one-of-two"].utilization, reports["one-of-two"].verdict(0.9)) == (0.5, "removable")


def test_node_report_reads_each_nodes_own_row_after_a_node_is_removed() -> None:
    """With a removed node's row left free (row 0 here), each node is still weighed by its
    own GPU column and its own GPU label: "gpu" 1 of 4 GPUs (0.25), "labelled" (GKE's label,
    no GPUs allocatable yet) 0.0, "plain" no GPU node (None, weighed by cpu: 3 of 4 = 0.75)."""
    table = NodeTable()
    table.upsert_node("gone", {"cpu": 4000, "memory": 16 * GI, "pods": 110})
    table.upsert_node("gpu", {"cpu": 4000, "memory": 16 * GI, "pods": 110, "nvidia.com/gpu": 4})
    table.upsert_node(
        "labelled",
        {"cpu": 4000, "memory": 16 * GI, "pods": 110},
        labels={"cloud.google.com/gke-accelerator": "l4"},
    )
    table.upsert_node("plain", {"cpu": 4000, "memory": 16 * GI, "pods": 110})
    table.remove_node("gone")
    pods = {"gpu": [_with_gpus(_pod("nb", "100m", "1Gi"), 1)], "plain": [_pod("c", "3", "1Gi")]}
    for node, bound in pods.items():
        for pod in bound:
            table.add_pod(table.index[node], pod)
    reports = {r.node: r for r in node_report(table, pods)}
    assert {n: (r.gpu, r.utilization) for n, r in reports.items()} == {
        "gpu": (0.25, 0.25),
        "labelled": (0.0, 0.0),
        "plain": (None, 0.75),
    }


def test_a_node_being_deleted_is_deleting_whatever_else_holds_it() -> None:
    """The autoscaler's ``unremovableReasonAndNodeUtilization`` (eligibility.go) checks
    ``IsNodeBeingDeleted`` first: a node tainted ``ToBeDeletedByClusterAutoscaler`` that is
    also annotated scale-down-disabled and busy (3 of 4 cores, 0.75 > 0.5) is ``deleting``."""
    table = _table({"n": (4000, 16)})
    table.upsert_node(
        "n",
        {"cpu": 4000, "memory": 16 * GI, "pods": 110},
        annotations={"cluster-autoscaler.kubernetes.io/scale-down-disabled": "true"},
        taints=[Taint("ToBeDeletedByClusterAutoscaler", "1000", "NoSchedule")],
    )
    pods = {"n": [_pod("big", "3", "1Gi")]}
    table.add_pod(table.index["n"], pods["n"][0])
    (report,) = node_report(table, pods)
    assert (report.autoscaler, report.autoscaler_since, report.scale_down_disabled) == (
        "deleting",
        1000,
        True,
    )
    assert report.verdict(0.5) == "deleting"


def test_node_report_lists_nodes_by_name() -> None:
    """By name, not in the table's row order ("b" was added first)."""
    assert [r.node for r in node_report(_table({"b": (4000, 16), "c": (4000, 16), "a": (4000, 16)}), {})] == [
        "a",
        "b",
        "c",
    ]


def test_node_report_names_pinning_pods_by_key_and_reads_only_a_true_opt_out() -> None:
    """The pods that pin a node are listed by key (``default/alpha`` before ``default/zeta``,
    though "zeta" was bound first), each reason in the same order; the node's
    ``scale-down-disabled`` annotation opts out only when "true" (the autoscaler's
    ``HasNoScaleDownAnnotation`` compares with "true")."""
    table = NodeTable()
    table.upsert_node(
        "n",
        {"cpu": 4000, "memory": 16 * GI, "pods": 110},
        annotations={"cluster-autoscaler.kubernetes.io/scale-down-disabled": "false"},
    )
    pods = {"n": [_pod("zeta", "100m", "1Gi"), _pod("alpha", "100m", "1Gi", owner="DaskWorkerGroup")]}
    for pod in pods["n"]:
        table.add_pod(table.index["n"], pod)
    (r,) = node_report(table, pods)
    assert r.pinning == ("default/alpha", "default/zeta")
    assert r.pin_reasons == ("controller DaskWorkerGroup", "no controller")
    assert (r.scale_down_disabled, r.verdict(0.5)) == (False, "pinned")


def test_a_node_is_as_utilized_as_its_busiest_resource() -> None:
    """The utilization is the higher of cpu and memory (the autoscaler's
    ``utilization.Calculate``): 500m of 4 cores (0.125) and 12 of 16 GiB (0.75) is 0.75,
    busy at 0.5."""
    table = _table({"n": (4000, 16)})
    pods = {"n": [_pod("mem", "500m", "12Gi", owner="ReplicaSet")]}
    table.add_pod(table.index["n"], pods["n"][0])
    (r,) = node_report(table, pods)
    assert (r.cpu, r.memory, r.utilization, r.verdict(0.5)) == (0.125, 0.75, 0.75, "busy")


def test_daemonset_and_mirror_pods_left_out_as_the_autoscaler_is_told_to() -> None:
    """``--ignore-daemonsets-utilization`` / ``--ignore-mirror-pods-utilization``, as the
    autoscaler's ``CalculateUtilizationOfResource``: those pods' requests come out of both
    the node's requests and its allocatable (GPUs too); a pod that is both a DaemonSet and
    a mirror pod is left out by either flag (the autoscaler asks each in turn); an
    expendable DaemonSet pod stays out altogether. ``ScaleDownAware`` weighs the
    same nodes the same way from the table's own columns."""
    table = NodeTable()
    for name in ("agents", "static", "gpu"):
        extra = {"nvidia.com/gpu": 4} if name == "gpu" else {}
        table.upsert_node(name, {"cpu": 4000, "memory": 16 * GI, "pods": 110, **extra})
    mirror = _pod("etcd", "1", "1Gi", **{"kubernetes.io/config.mirror": "x"})
    both = _pod("odd", "500m", "1Gi", owner="DaemonSet", **{"kubernetes.io/config.mirror": "y"})
    pods = {
        "agents": [_pod("agent", "1", "1Gi", owner="DaemonSet"), _pod("user", "1500m", "1Gi")],
        "static": [mirror, both, _pod("user2", "1", "1Gi")],
        "gpu": [
            _with_gpus(_pod("gpu-agent", "100m", "1Gi", owner="DaemonSet"), 1),
            _with_gpus(_pod("nb", "1", "1Gi"), 1),
        ],
    }
    for node, bound in pods.items():
        for pod in bound:
            table.add_pod(table.index[node], pod)

    def utilization(**flags: bool) -> dict[str, float]:
        return {r.node: r.utilization for r in node_report(table, pods, ScaleDownRules(**flags))}

    assert utilization() == {"agents": 2500 / 4000, "static": 2500 / 4000, "gpu": 2 / 4}
    assert utilization(ignore_daemonsets_utilization=True) == {
        "agents": 1500 / 3000,
        "static": 2000 / 3500,  # the pod that is both counts as a DaemonSet pod
        "gpu": 1 / 3,
    }
    # both: a mirror pod too, left out with the mirror flag alone as well
    assert utilization(ignore_mirror_pods_utilization=True)["static"] == 1000 / 2500
    assert (
        utilization(ignore_daemonsets_utilization=True, ignore_mirror_pods_utilization=True)["static"]
        == 1000 / 2500
    )
    # the same from the table's columns, as ScaleDownAware reads them (a pod of nothing placed)
    idx = table.active_indices()
    nothing = Pod("p", requests={"cpu": 0, "memory": 0})
    for flags in ({}, {"ignore_daemonsets_utilization": True}, {"ignore_mirror_pods_utilization": True}):
        util, _ = utilization_and_threshold(nothing, table, idx, SchedulingContext(**flags))
        report = utilization(**flags)
        assert util.tolist() == [report[n] for n in table.node_names(idx)], flags
    # removing the pods takes them out of the columns again
    for node, bound in pods.items():
        for pod in bound:
            table.remove_pod(table.index[node], pod)
    assert not table.daemonset_requested.any() and not table.mirror_requested.any()
    assert not table.daemonset_mirror_requested.any()


def _with_priority(pod: Pod, priority: int | None) -> Pod:
    return dataclasses.replace(pod, priority=priority)


def test_expendable_pods_neither_pin_nor_count() -> None:
    """The autoscaler builds its scale-down picture from the pods at or above its
    ``--expendable-pods-priority-cutoff`` (default -10) only: a lower-priority bare pod pins
    nothing and its requests count toward no node's utilization; a pod without a priority
    is never expendable."""
    table = _table({"low": (4000, 16), "none": (4000, 16), "cut": (4000, 16)})
    pods = {
        "low": [_with_priority(_pod("filler", "3", "1Gi"), -20)],
        "none": [_with_priority(_pod("user", "500m", "1Gi"), None)],
        "cut": [_with_priority(_pod("placeholder", "500m", "1Gi"), -10)],  # z2jh's: not below -10
    }
    for node, placed in pods.items():
        for pod in placed:
            table.add_pod(table.index[node], pod)
    reports = {r.node: r for r in node_report(table, pods)}
    assert (reports["low"].utilization, reports["low"].expendable_pods) == (0.0, 1)
    assert reports["low"].verdict(0.5) == "empty" and reports["low"].pinning == ()
    assert reports["none"].verdict(0.5) == "pinned"
    assert reports["cut"].verdict(0.5) == "pinned"
    stricter = {r.node: r for r in node_report(table, pods, ScaleDownRules(expendable_priority_cutoff=-30))}
    assert stricter["low"].utilization == pytest.approx(0.75) and stricter["low"].verdict(0.5) == "busy"
    looser = {r.node: r for r in node_report(table, pods, ScaleDownRules(expendable_priority_cutoff=0))}
    assert looser["cut"].verdict(0.5) == "empty"


def test_a_priority_that_is_not_an_int32_fails_no_pod() -> None:
    """``spec.priority`` is read for ``inspect`` only: a value the API server would refuse
    is no priority, not a pod the extender (or the cache) rejects."""
    for bad in ("high", 1.5, True, 2**31, -(2**31) - 1, [1], {"value": 1}):
        raw = pod_manifest("odd", cpu="1", memory="1Gi")
        raw["spec"]["priority"] = bad
        assert Pod.from_dict(raw).priority is None, bad
    raw["spec"]["priority"] = -(2**31)
    assert Pod.from_dict(raw).priority == -(2**31)


def test_a_deletion_time_that_is_no_time_fails_no_pod() -> None:
    """``metadata.deletionTimestamp`` is read for ``inspect`` only: one that is no time is
    no deletion, not a pod the extender (or the cache) rejects (unlike a malformed creation
    time, which the extender's plugins read)."""
    for bad in ("not-a-time", 12345, {"at": 1}, "2026-13-01T00:00:00Z"):
        raw = pod_manifest("odd", cpu="1", memory="1Gi")
        raw["metadata"]["deletionTimestamp"] = bad
        assert Pod.from_dict(raw).deleted is None, bad
    raw["metadata"]["deletionTimestamp"] = "2026-12-02T10:00:00Z"
    assert Pod.from_dict(raw).deleted == 1796205600.0


def test_expendable_daemon_and_requestless_pods() -> None:
    """An expendable DaemonSet pod is left out of the utilization too (the autoscaler drops
    every expendable pod) and counted once, as a DaemonSet pod; an expendable pod without
    requests takes nothing off."""
    table = _table({"n": (4000, 16)})
    daemon = _with_priority(_pod("agent", "2", "8Gi", owner="DaemonSet"), -20)
    empty = _with_priority(_pod("idle", "0", "0"), -20)
    kept = _pod("web", "1", "2Gi", owner="ReplicaSet")
    pods = {"n": [daemon, empty, kept]}
    for pod in pods["n"]:
        table.add_pod(table.index["n"], pod)
    (r,) = node_report(table, pods)
    assert (r.cpu, r.memory) == (pytest.approx(0.25), pytest.approx(2 / 16))
    assert (r.pods, r.daemon_pods, r.expendable_pods) == (3, 1, 1)
    assert r.verdict(0.5) == "removable"
    # with --ignore-daemonsets-utilization the expendable DaemonSet pod is not taken off
    # the allocatable too: it is out of the picture already (1 of 4 cores, not 0 of 2)
    (r,) = node_report(table, pods, ScaleDownRules(ignore_daemonsets_utilization=True))
    assert (r.cpu, r.memory) == (pytest.approx(1000 / 4000), pytest.approx(2 / 16))


@pytest.mark.controlplane
def test_inspect_reads_priorities_from_the_api_server(
    cluster: ControlPlane, capsys: pytest.CaptureFixture[str]
) -> None:
    """A pod of a priority class below the cutoff: the API server fills in its
    ``spec.priority`` from the class, and ``inspect`` counts it for nothing; with a lower
    ``--expendable-pods-priority-cutoff`` it pins its node."""

    _priority_class(cluster, "sp-test-expendable", -20)
    cluster.create_node("spare", cpu="4", memory="16Gi")
    raw = pod_manifest("filler", cpu="3", memory="1Gi")
    raw["spec"]["nodeName"] = "spare"
    raw["spec"]["priorityClassName"] = "sp-test-expendable"
    assert cluster.create_pod(pod=raw)["spec"]["priority"] == -20
    argv = ["inspect", "--kubeconfig", str(cluster.kubeconfig), "--json"]
    assert main(argv) == 0
    (node,) = json.loads(capsys.readouterr().out)["nodes"]
    assert (node["verdict"], node["utilization"], node["expendable_pods"]) == ("empty", 0.0, 1)
    assert main([*argv, "--expendable-pods-priority-cutoff", "-30"]) == 0
    (node,) = json.loads(capsys.readouterr().out)["nodes"]
    assert (node["verdict"], node["pinning"]) == ("busy", ["default/filler"])


def test_a_pod_whose_controller_is_gone_pins_its_node() -> None:
    """The autoscaler's ``replicacount`` rule comes before the others: a pod whose
    ReplicaSet (or DaemonSet, Job...) no longer exists blocks the drain, even annotated
    safe-to-evict "true"; when the controllers are unknown, they are taken to exist."""
    safe = "cluster-autoscaler.kubernetes.io/safe-to-evict"
    web = _pod("web", "100m", "100Mi", owner="ReplicaSet")  # its owner is named "o"
    proxy = _pod("proxy", "100m", "100Mi", owner="DaemonSet")
    evictable = _pod("batch", "100m", "100Mi", owner="Job", **{safe: "true"})
    known = ScaleDownRules(
        controllers={("ReplicaSet", "default", "o"): 1, ("DaemonSet", "default", "o"): None}
    )
    assert pin_reason(web, known) is None and pin_reason(proxy, known) is None
    assert pin_reason(evictable, known) == "controller Job o not found"
    gone = ScaleDownRules(controllers={})
    assert pin_reason(web, gone) == "controller ReplicaSet o not found"
    assert pin_reason(proxy, gone) == "controller DaemonSet o not found"
    assert pin_reason(_pod("x", "1", "1Gi", owner="DaskWorkerGroup"), gone) == "controller DaskWorkerGroup"
    assert pin_reason(web) is None and pin_reason(proxy) is None  # unknown: taken to exist
    table = _table({"ds-only": (4000, 16)})
    table.add_pod(table.index["ds-only"], proxy)
    (report,) = node_report(table, {"ds-only": [proxy]}, gone)
    assert report.verdict(0.5) == "pinned"  # not "empty": the drain would fail on it
    (report,) = node_report(table, {"ds-only": [proxy]}, known)
    assert report.verdict(0.5) == "empty"


def test_the_controller_check_reads_the_kind_and_for_daemonsets_the_group() -> None:
    """As the autoscaler's rule: a DaemonSet pod (by its owner's kind or the daemonset-pod
    annotation) is looked up only when its controller is an ``apps`` DaemonSet (it has no
    lister for OpenKruise's ``apps.kruise.io`` one), a ReplicationController always, a
    ReplicaSet or Job by its kind whatever its group, a StatefulSet only when it is an
    ``apps`` one (cluster-autoscaler 1.33+: OpenKruise's Advanced StatefulSet is not looked
    up, and moves as a StatefulSet's pod)."""
    gone = ScaleDownRules(controllers={})
    kruise = _pod("kruise-ds", "100m", "100Mi", owner="DaemonSet", api_version="apps.kruise.io/v1alpha1")
    assert kruise.owner_group == "apps.kruise.io" and pin_reason(kruise, gone) is None
    table = _table({"kruise-only": (4000, 16)})
    table.add_pod(table.index["kruise-only"], kruise)
    (report,) = node_report(table, {"kruise-only": [kruise]}, gone)
    assert report.verdict(0.5) == "empty"
    ds_annotation = {"cluster-autoscaler.kubernetes.io/daemonset-pod": "true"}
    assert pin_reason(_pod("ds-like-rs", "1", "1Gi", owner="ReplicaSet", **ds_annotation), gone) is None
    assert pin_reason(_pod("ds-like-job", "1", "1Gi", owner="Job", **ds_annotation), gone) is None
    ds_like_rc = _pod("ds-like-rc", "1", "1Gi", owner="ReplicationController", **ds_annotation)
    assert pin_reason(ds_like_rc, gone) == "controller ReplicationController o not found"
    other_rs = _pod("other-rs", "1", "1Gi", owner="ReplicaSet", api_version="example.com/v1")
    assert pin_reason(other_rs, gone) == "controller ReplicaSet o not found"
    kruise_sts = _pod("kruise-sts", "1", "1Gi", owner="StatefulSet", api_version="apps.kruise.io/v1beta1")
    assert pin_reason(kruise_sts, gone) is None
    apps_sts = _pod("apps-sts", "1", "1Gi", owner="StatefulSet")
    assert apps_sts.owner_group == "apps"
    assert pin_reason(apps_sts, gone) == "controller StatefulSet o not found"


def test_min_replica_count_and_kinds_not_listed() -> None:
    """The autoscaler's ``--min-replica-count``: a pod of a ReplicaSet or
    ReplicationController that wants fewer replicas pins (before safe-to-evict "true" is
    read), one with ``spec.replicas`` unset or at the count does not, and no other kind is
    counted. A kind that could not be listed is taken to exist; the others are still checked."""
    safe = {"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"}
    web = _pod("web", "100m", "100Mi", owner="ReplicaSet", **safe)
    legacy = _pod("legacy", "100m", "100Mi", owner="ReplicationController")
    db = _pod("db", "100m", "100Mi", owner="StatefulSet")
    controllers = {
        ("ReplicaSet", "default", "o"): 1,
        ("ReplicationController", "default", "o"): None,
        ("StatefulSet", "default", "o"): None,
    }
    two = ScaleDownRules(controllers=controllers, min_replica_count=2)
    assert pin_reason(web, two) == "controller ReplicaSet o wants 1 replicas, under --min-replica-count 2"
    assert pin_reason(legacy, two) is None and pin_reason(db, two) is None  # unset; not counted
    assert pin_reason(web, dataclasses.replace(two, min_replica_count=1)) is None
    assert pin_reason(web, ScaleDownRules(controllers=controllers)) is None  # the default, 0
    assert pin_reason(web, ScaleDownRules(min_replica_count=5)) is None  # controllers unknown
    no_sets = ScaleDownRules(
        controllers={}, unlisted_controller_kinds=frozenset({"ReplicaSet", "StatefulSet"})
    )
    assert pin_reason(web, no_sets) is None and pin_reason(db, no_sets) is None
    assert pin_reason(legacy, no_sets) == "controller ReplicationController o not found"


def test_min_replica_count_reads_replica_sets_and_replication_controllers_only() -> None:
    """The autoscaler's ``replicacount`` rule compares ``spec.replicas`` with
    ``--min-replica-count`` for a ReplicationController and a ReplicaSet only: an RC wanting
    1 < 2 pins; a StatefulSet or Job given a count of 1 (the core takes whatever mapping it
    is given) is only checked to exist."""
    legacy = _pod("legacy", "100m", "100Mi", owner="ReplicationController")
    db = _pod("db", "100m", "100Mi", owner="StatefulSet")
    batch = _pod("batch", "100m", "100Mi", owner="Job")
    controllers = {
        ("ReplicationController", "default", "o"): 1,
        ("StatefulSet", "default", "o"): 1,
        ("Job", "default", "o"): 1,
    }
    two = ScaleDownRules(controllers=controllers, min_replica_count=2)
    assert (
        pin_reason(legacy, two)
        == "controller ReplicationController o wants 1 replicas, under --min-replica-count 2"
    )
    assert pin_reason(db, two) is None and pin_reason(batch, two) is None


def test_a_mirror_pod_never_pins_whatever_its_controller() -> None:
    """The autoscaler's mirror rule comes first (``simulator/drainability/rules``): a mirror
    pod is skipped before the ``replicacount`` rule looks up a controller, so one naming a
    ReplicaSet that does not exist pins nothing, where the same pod without the mirror
    annotation does."""
    mirror = _pod("static", "100m", "100Mi", owner="ReplicaSet", **{"kubernetes.io/config.mirror": "x"})
    plain = _pod("plain", "100m", "100Mi", owner="ReplicaSet")
    rules = ScaleDownRules(controllers={})
    assert pin_reason(plain, rules) == "controller ReplicaSet o not found"
    assert pin_reason(mirror, rules) is None


@pytest.mark.controlplane
def test_inspect_weighs_gpu_nodes_by_their_gpus(
    cluster: ControlPlane, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """On the real API server: a GPU node (``nvidia.com/gpu`` allocatable) with one GPU of
    four requested and most of its cpu is under the autoscaler's GPU threshold, so its bare
    pod pins it; a node labelled as a GPU node whose GPUs are not allocatable is weighed as
    unused; ``--gpu-threshold`` and ``--gpu-label`` change both, and the labels (the flag's,
    else the extender configuration's ``cluster.gpu_labels``) serve ``--pod``'s
    ``ScaleDownAware`` as well."""
    cluster.create_node("gpu-a", cpu="4", memory="16Gi", extended={"nvidia.com/gpu": "4"})
    cluster.create_node(
        "gpu-b", cpu="4", memory="16Gi", labels={"k8s.amazonaws.com/accelerator": "nvidia-t4"}
    )
    raw = pod_manifest("jupyter-gpu", cpu="3", memory="1Gi")
    resources = raw["spec"]["containers"][0]["resources"]
    resources["requests"]["nvidia.com/gpu"] = "1"
    resources["limits"] = {"nvidia.com/gpu": "1"}  # extended resources need a limit equal to the request
    raw["spec"]["nodeName"] = "gpu-a"
    cluster.create_pod(pod=raw)
    _bind(cluster, "jupyter-cpu", "gpu-b", "3", "1Gi")
    # an AMD node: weighed by its amd.com/gpu, one of two requested
    cluster.create_node("gpu-amd", cpu="4", memory="16Gi", extended={"amd.com/gpu": "2"})
    raw = pod_manifest("jupyter-amd", cpu="100m", memory="1Gi")
    raw["spec"]["containers"][0]["resources"] = {
        "requests": {"cpu": "100m", "amd.com/gpu": "1"},
        "limits": {"amd.com/gpu": "1"},
    }
    raw["spec"]["nodeName"] = "gpu-amd"
    cluster.create_pod(pod=raw)
    argv = ["inspect", "--kubeconfig", str(cluster.kubeconfig)]
    assert main([*argv, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    nodes = {n["node"]: n for n in report["nodes"]}
    # 0.5 is at the threshold: underutilized to cluster-autoscaler 1.35+, so its bare pod pins it
    assert (nodes["gpu-amd"]["gpu"], nodes["gpu-amd"]["verdict"]) == (0.5, "pinned")
    assert (nodes["gpu-a"]["cpu"], nodes["gpu-a"]["gpu"], nodes["gpu-a"]["verdict"]) == (0.75, 0.25, "pinned")
    assert (nodes["gpu-b"]["gpu"], nodes["gpu-b"]["utilization"], nodes["gpu-b"]["verdict"]) == (
        0.0,
        0.0,
        "pinned",
    )
    assert report["gpu_threshold"] == 0.5
    assert main([*argv, "--json", "--gpu-threshold", "0.2", "--gpu-label", "example.com/gpu"]) == 0
    nodes = {n["node"]: n for n in json.loads(capsys.readouterr().out)["nodes"]}
    assert nodes["gpu-a"]["verdict"] == "busy"
    assert (nodes["gpu-b"]["gpu"], nodes["gpu-b"]["verdict"]) == (None, "busy")  # a cpu node now: 75%
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "GPU nodes 0.5" in out and "25%" in out
    # --pod: ScaleDownAware takes the labelled node without GPUs as unused (0) by default;
    # with other labels, or the configuration's, it is a cpu node at 75% + the pod's 5% (100)
    pod_file = tmp_path / "pod.yaml"
    pod_file.write_text(yaml.safe_dump(pod_manifest("notebook", cpu="200m", memory="1Gi")))
    config = tmp_path / "extender.yaml"
    config.write_text(yaml.safe_dump({"cluster": {"gpu_labels": ["example.com/gpu"]}}))

    def scale_down_aware(*extra: str) -> int:
        assert main([*argv, "--json", "--pod", str(pod_file), *extra]) == 0
        nodes = {n["node"]: n for n in json.loads(capsys.readouterr().out)["nodes"]}
        return nodes["gpu-b"]["scores"]["ScaleDownAware"]

    assert scale_down_aware() == 0
    assert scale_down_aware("--gpu-label", "example.com/gpu") == 100
    assert scale_down_aware("--config", str(config)) == 100
    assert scale_down_aware("--config", str(config), "--gpu-label", "k8s.amazonaws.com/accelerator") == 0


@pytest.mark.controlplane
def test_inspect_leaves_daemonset_pods_out_when_told(
    cluster: ControlPlane, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """On the real API server: a node with a DaemonSet pod of 3 cpus and a bare pod of 1.5
    (8 cpus) is busy (4.5 / 8) to an autoscaler that counts DaemonSet pods, and pinned by
    the bare pod (1.5 / 5) to one run with ``--ignore-daemonsets-utilization``: the flag,
    or the extender configuration's ``cluster.ignore_daemonsets_utilization``."""
    cluster.create_node("agents", cpu="8", memory="32Gi")
    _bind(cluster, "log-agent", "agents", "3", "1Gi", owner="DaemonSet")
    _bind(cluster, "notebook", "agents", "1500m", "1Gi")
    argv = ["inspect", "--kubeconfig", str(cluster.kubeconfig)]
    config = tmp_path / "extender.yaml"
    config.write_text(yaml.safe_dump({"cluster": {"ignore_daemonsets_utilization": True}}))
    for extra, utilization, verdict in [
        ((), 4.5 / 8, "busy"),
        (("--ignore-daemonsets-utilization",), 1.5 / 5, "pinned"),
        (("--config", str(config)), 1.5 / 5, "pinned"),
        (("--config", str(config), "--no-ignore-daemonsets-utilization"), 4.5 / 8, "busy"),
    ]:
        assert main([*argv, "--json", *extra]) == 0
        report = json.loads(capsys.readouterr().out)
        node = next(n for n in report["nodes"] if n["node"] == "agents")
        assert (node["utilization"], node["verdict"]) == (utilization, verdict), extra
        assert report["ignore_daemonsets_utilization"] is (verdict == "pinned")
    assert main([*argv, "--ignore-daemonsets-utilization"]) == 0
    assert "DaemonSet pods not counted" in capsys.readouterr().out


@pytest.mark.controlplane
def test_inspect_checks_the_controllers_exist(
    cluster: ControlPlane, capsys: pytest.CaptureFixture[str]
) -> None:
    """On the real API server: a pod owned by a ReplicaSet that exists is movable, one whose
    ReplicaSet is gone (deleted with its pods orphaned) pins its node."""
    for node in ("kept", "orphaned", "kruise", "daemon-gone", "kruise-sts", "sts-gone"):
        cluster.create_node(node, cpu="4", memory="16Gi")
    _bind(cluster, "web-1", "kept", "100m", "100Mi", owner="ReplicaSet")
    _bind(cluster, "old-1", "orphaned", "100m", "100Mi", owner="ReplicaSet", owner_exists=False)
    # another group's DaemonSet: the autoscaler does not look it up (nor does inspect)
    kruise = "apps.kruise.io/v1alpha1"
    _bind(cluster, "agent-1", "kruise", "100m", "100Mi", "DaemonSet", False, api_version=kruise)
    _bind(cluster, "agent-2", "daemon-gone", "100m", "100Mi", "DaemonSet", False)
    # another group's StatefulSet is not looked up either (cluster-autoscaler 1.33+), an apps one is
    kruise_sts = "apps.kruise.io/v1beta1"
    _bind(cluster, "db-1", "kruise-sts", "100m", "100Mi", "StatefulSet", False, api_version=kruise_sts)
    _bind(cluster, "db-2", "sts-gone", "100m", "100Mi", "StatefulSet", False)
    assert main(["inspect", "--kubeconfig", str(cluster.kubeconfig), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["controllers_read"] is True
    nodes = {n["node"]: n for n in report["nodes"]}
    assert nodes["kept"]["verdict"] == "removable"
    assert nodes["kruise"]["verdict"] == "empty"
    assert nodes["daemon-gone"]["verdict"] == "pinned"  # an apps DaemonSet is looked up
    assert nodes["kruise-sts"]["verdict"] == "removable"
    assert nodes["sts-gone"]["pin_reasons"] == {"default/db-2": "controller StatefulSet db-2-owner not found"}
    assert nodes["orphaned"]["pin_reasons"] == {
        "default/old-1": "controller ReplicaSet old-1-owner not found"
    }
    # the autoscaler's --min-replica-count: web-1's ReplicaSet wants 0 replicas
    argv = ["inspect", "--kubeconfig", str(cluster.kubeconfig), "--json"]
    assert main([*argv, "--min-replica-count", "1"]) == 0
    nodes = {n["node"]: n for n in json.loads(capsys.readouterr().out)["nodes"]}
    reason = "controller ReplicaSet web-1-owner wants 0 replicas, under --min-replica-count 1"
    assert nodes["kept"]["pin_reasons"] == {"default/web-1": reason}
    # an account that may list ReplicaSets but no other controller: those are still checked
    account = f"inspect-rs-{uuid.uuid4().hex[:6]}"
    limited = _account_that_lists(cluster, account, {"": ["nodes", "pods"], "apps": ["replicasets"]})
    assert main(["inspect", "--kubeconfig", str(limited), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["controllers_read"] is False
    assert report["controllers_unlisted"] == ["DaemonSet", "Job", "ReplicationController", "StatefulSet"]
    nodes = {n["node"]: n for n in report["nodes"]}
    assert nodes["orphaned"]["verdict"] == "pinned" and nodes["kept"]["verdict"] == "removable"
    assert nodes["daemon-gone"]["verdict"] == "empty"  # its kind not listed: taken to exist
    assert main(["inspect", "--kubeconfig", str(limited)]) == 0
    assert (
        "could not be listed: DaemonSet, Job, ReplicationController, StatefulSet" in capsys.readouterr().out
    )


def test_pods_terminating_too_long_neither_pin_nor_count() -> None:
    """The autoscaler's ``IsPodLongTerminating``: a pod deleted longer ago than its grace
    period (30 s when it sets none) plus 30 s is taken as gone: it pins nothing and its
    requests count toward no node's utilization. Without a time to judge at, the rule is off."""
    deleted = 1_000_000.0
    stuck = dataclasses.replace(_pod("stuck", "3", "1Gi"), deleted=deleted, grace_period_s=120)
    # pod_manifest sets a grace period of 0: none here, so the default 30 s applies
    fresh = dataclasses.replace(_pod("fresh", "3", "1Gi"), deleted=deleted, grace_period_s=None)
    table = _table({"a": (4000, 16), "b": (4000, 16)})
    table.add_pod(table.index["a"], stuck)
    table.add_pod(table.index["b"], fresh)
    pods = {"a": [stuck], "b": [fresh]}
    at = ScaleDownRules(now=deleted + 100)  # past fresh's 30 + 30 s, within stuck's 120 + 30 s
    reports = {r.node: r for r in node_report(table, pods, at)}
    assert (reports["a"].verdict(0.5), pin_reason(stuck, at)) == ("busy", "no controller")
    assert (reports["b"].utilization, reports["b"].terminating_pods, reports["b"].verdict(0.5)) == (
        0.0,
        1,
        "empty",
    )
    assert pin_reason(fresh, ScaleDownRules(now=deleted + 59)) == "no controller"  # 30 + 30 s not past
    # exactly 30 + 30 s: not past yet (IsPodLongTerminating, utils/drain/drain.go: the
    # deletion time plus grace plus extra must be Before(now), strictly)
    assert pin_reason(fresh, ScaleDownRules(now=deleted + 60)) == "no controller"
    assert pin_reason(fresh, ScaleDownRules(now=deleted + 61)) is None
    later = ScaleDownRules(now=deleted + 151)
    assert pin_reason(stuck, later) is None
    assert pin_reason(fresh, ScaleDownRules()) == "no controller"  # no clock: not applied


def test_long_terminating_expendable_and_daemon_pods_are_left_out_once() -> None:
    """A pod both expendable and terminating for too long is taken off the utilization once
    and counted once, as expendable; a long-terminating DaemonSet pod is taken off too (the
    autoscaler skips it whatever its kind, by default) and counted as a DaemonSet pod."""
    deleted = 1_000_000.0
    both = dataclasses.replace(_pod("both", "2", "1Gi"), deleted=deleted, priority=-20)
    agent = dataclasses.replace(_pod("agent", "1", "4Gi", owner="DaemonSet"), deleted=deleted)
    kept = _pod("web", "500m", "1Gi", owner="ReplicaSet")
    table = _table({"n": (4000, 16)})
    pods = {"n": [both, agent, kept]}
    for pod in pods["n"]:
        table.add_pod(table.index["n"], pod)
    (r,) = node_report(table, pods, ScaleDownRules(now=deleted + 1000))
    assert (r.cpu, r.memory) == (pytest.approx(0.125), pytest.approx(1 / 16))
    assert (r.pods, r.daemon_pods, r.expendable_pods, r.terminating_pods) == (3, 1, 1, 0)
    assert r.verdict(0.5) == "removable"
    # with --ignore-daemonsets-utilization the long-terminating DaemonSet pod comes out of
    # the allocatable and, once, out of the requests (CalculateUtilizationOfResource skips it
    # as a DaemonSet pod first): cpu (2 + 1 + 0.5 - 2 - 1) / (4 - 1) = 0.5 / 3, memory
    # (1 + 4 + 1 - 1 - 4) / (16 - 4) = 1 / 12
    (r,) = node_report(table, pods, ScaleDownRules(now=deleted + 1000, ignore_daemonsets_utilization=True))
    assert (r.cpu, r.memory) == (pytest.approx(500 / 3000), pytest.approx(1 / 12))


@pytest.mark.controlplane
def test_snapshot_reads_when_a_pod_was_deleted(
    cluster: ControlPlane, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bound pod deleted on the real API server stays, terminating (no kubelet confirms):
    the snapshot keeps its deletion time and grace period, so ``inspect`` (at its own now)
    takes it as gone once they have passed."""
    import asyncio
    import time

    from stickypack.kube.snapshot import take_snapshot

    cluster.create_node("draining", cpu="4", memory="16Gi")
    raw = pod_manifest("leaving", cpu="3", memory="1Gi")
    raw["spec"]["nodeName"] = "draining"
    raw["spec"]["terminationGracePeriodSeconds"] = 5
    cluster.create_pod(pod=raw)

    async def delete(api: object) -> None:
        await client.CoreV1Api(api).delete_namespaced_pod("leaving", "default")

    before = time.time()
    cluster.call(delete)

    async def snapshot() -> object:
        async with client.ApiClient(configuration=cluster.client_configuration()) as api:
            return await take_snapshot(api)

    snap = asyncio.run(snapshot())
    (pod,) = snap.pods_by_node["draining"]
    assert pod.grace_period_s == 5 and pod.deleted is not None
    assert before - 2 < pod.deleted - 5 < time.time() + 2  # the API server sets now + grace
    (report,) = node_report(snap.cache.table, snap.pods_by_node, ScaleDownRules(now=pod.deleted + 5 + 31))
    assert (report.verdict(0.5), report.terminating_pods) == ("empty", 1)
    (report,) = node_report(snap.cache.table, snap.pods_by_node, ScaleDownRules(now=pod.deleted))
    assert report.verdict(0.5) == "busy"
    argv = ["inspect", "--kubeconfig", str(cluster.kubeconfig), "--json"]
    assert main(argv) == 0  # the CLI judges at its own clock: not yet
    (node,) = json.loads(capsys.readouterr().out)["nodes"]
    assert (node["verdict"], node["terminating_pods"]) == ("busy", 0)
    real_time = time.time
    monkeypatch.setattr(time, "time", lambda: real_time() + 3600)  # an hour on: long gone
    assert main(argv) == 0
    monkeypatch.undo()
    (node,) = json.loads(capsys.readouterr().out)["nodes"]
    assert (node["verdict"], node["utilization"], node["terminating_pods"]) == ("empty", 0.0, 1)


@pytest.mark.controlplane
def test_inspect_dra_weighs_a_node_by_its_device_pool(
    cluster: ControlPlane, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """On the real API server (``resource.k8s.io/v1``): a node publishing 4 devices in a
    ResourceSlice, one of them allocated to a ResourceClaim (its status written as the absent
    DRA scheduler plugin would) and used by a bare pod of 3 cpus of 4: with ``--dra`` the
    autoscaler weighs it by its pool (25%; a second claim allocated there that no pod on
    the node uses does not count), under the threshold, so the bare pod pins it; without,
    by its cpu (75%): busy. An account that may not list ResourceSlices is told so."""
    from kubernetes_asyncio import client as k8s

    suffix = uuid.uuid4().hex[:6]
    node, driver, device_class, claim = f"dra-{suffix}", "gpu.example.com", f"gpu-{suffix}", f"gpu-{suffix}"
    cluster.create_node(node, cpu="4", memory="16Gi")

    async def make(api: object) -> None:
        resource = k8s.ResourceV1Api(api)
        await resource.create_device_class({"metadata": {"name": device_class}, "spec": {}})
        devices = [{"name": f"gpu-{k}"} for k in range(4)]
        pool = {"name": node, "generation": 1, "resourceSliceCount": 1}
        spec = {"driver": driver, "nodeName": node, "pool": pool, "devices": devices}
        await resource.create_resource_slice({"metadata": {"name": node}, "spec": spec})
        request = {"name": "gpu", "exactly": {"deviceClassName": device_class}}
        for name, device in ((claim, "gpu-1"), (f"{claim}-orphan", "gpu-2")):
            body = {"metadata": {"name": name}, "spec": {"devices": {"requests": [request]}}}
            await resource.create_namespaced_resource_claim("default", body)
            result = {"request": "gpu", "driver": driver, "pool": node, "device": device}
            status = {"status": {"allocation": {"devices": {"results": [result]}}}}
            await resource.patch_namespaced_resource_claim_status(name, "default", status)

    async def drop(api: object) -> None:
        resource = k8s.ResourceV1Api(api)
        for name in (claim, f"{claim}-orphan"):
            await resource.delete_namespaced_resource_claim(name, "default")
        await resource.delete_resource_slice(node)
        await resource.delete_device_class(device_class)

    cluster.call(make)
    uses_claim = {"resourceClaims": [{"name": "gpu", "resourceClaimName": claim}]}
    _bind(cluster, f"notebook-{suffix}", node, "3", "1Gi", spec=uses_claim)
    try:
        argv = ["inspect", "--kubeconfig", str(cluster.kubeconfig)]
        assert main([*argv, "--json", "--dra"]) == 0
        report = json.loads(capsys.readouterr().out)
        documented, documented_node = _documented_json_fields()
        assert set(report) == documented and all(set(n) == documented_node for n in report["nodes"])
        assert report["dra_read"] is True and report["dra_problems"] == []
        weighed = {n["node"]: n for n in report["nodes"]}[node]
        assert (weighed["cpu"], weighed["dra"], weighed["utilization"]) == (0.75, 0.25, 0.25)
        assert (weighed["dra_pool"], weighed["dra_error"]) == (f"{driver}/{node}", None)
        assert weighed["verdict"] == "pinned"
        assert main([*argv, "--json"]) == 0
        report = json.loads(capsys.readouterr().out)
        plain = {n["node"]: n for n in report["nodes"]}[node]
        assert (plain["dra"], plain["utilization"], plain["verdict"]) == (None, 0.75, "busy")
        assert report["dra_read"] is None and "incomplete" not in report["summary"]
        assert main([*argv, "--dra"]) == 0
        out = capsys.readouterr().out
        assert "dra" in out and "25%" in out
        limited = _account_that_lists(cluster, f"inspect-dra-{suffix}", {"": ["nodes", "pods"]})
        assert main(["inspect", "--kubeconfig", str(limited), "--dra", "--json"]) == 0
        report = json.loads(capsys.readouterr().out)
        assert report["dra_read"] is False
        assert {n["node"]: n for n in report["nodes"]}[node]["utilization"] == 0.75
        assert main(["inspect", "--kubeconfig", str(limited), "--dra"]) == 0
        assert "ResourceSlices and ResourceClaims could not be listed" in capsys.readouterr().out
        # --pod: ScaleDownAware weighs the node as the extender with cluster.dra does: by its
        # pool (25%: quiet, 20 x 0.25 / 0.5 = 10) with --dra or the config's cluster.dra; by its cpu
        # (75% and more with the pod: busy, 100) without
        pod_file = tmp_path / "pod.yaml"
        pod_file.write_text(yaml.safe_dump(pod_manifest(f"new-{suffix}", cpu="100m", memory="100Mi")))
        config = tmp_path / "extender.yaml"
        config.write_text(yaml.safe_dump({"cluster": {"dra": True}}))
        scores = {}
        for extra in ([], ["--dra"], ["--config", str(config)], ["--config", str(config), "--no-dra"]):
            assert main([*argv, "--json", "--pod", str(pod_file), *extra]) == 0
            report = json.loads(capsys.readouterr().out)
            verdict = {n["node"]: n for n in report["nodes"]}[node]
            scores[" ".join(extra[:1] + extra[2:])] = (
                verdict["scores"]["ScaleDownAware"],
                report["dra_read"],
            )
        assert scores == {
            "": (100, None),
            "--dra": (10, True),
            "--config": (10, True),
            "--config --no-dra": (100, None),
        }
        assert main(["inspect", "--kubeconfig", str(limited), "--dra", "--pod", str(pod_file)]) == 0
        assert "ResourceSlices and ResourceClaims could not be listed" in capsys.readouterr().out
    finally:
        cluster.call(drop)


@pytest.mark.controlplane
def test_inspect_dra_moves_a_pod_holding_a_node_local_device_only_where_a_free_device_is(
    cluster: ControlPlane, capsys: pytest.CaptureFixture[str]
) -> None:
    """On the real API server: gpu-a publishes 4 devices, one allocated to the claim of a
    ReplicaSet's pod (25%: a scale-down candidate with ``--dra``); cpu-b, pinned by a bare
    pod, has room for its cpu but no devices. With ``--dra`` the autoscaler's removal
    simulation must allocate the pod's claim again on the node it goes to: none has a free
    device of the driver, so gpu-a is kept (no room for the pod), where without ``--dra``
    the pod moves to cpu-b. Once gpu-c (pinned too) publishes a free device of the driver,
    gpu-a is removable, its pod moving to gpu-c."""
    suffix = uuid.uuid4().hex[:6]
    driver = f"gpu-{suffix}.example.com"
    gpu_a, cpu_b, gpu_c = f"gpu-a-{suffix}", f"cpu-b-{suffix}", f"gpu-c-{suffix}"
    trainer, claim = f"trainer-{suffix}", f"train-{suffix}"
    for node in (gpu_a, cpu_b, gpu_c):
        cluster.create_node(node, cpu="4", memory="16Gi")
    cluster.create_device_pool(gpu_a, 4, driver=driver)
    cluster.create_claim(claim, 1, driver=driver)
    cluster.allocate_claim(claim, gpu_a, ["dev-0"], driver=driver)
    uses_claim = {"resourceClaims": [{"name": "gpu", "resourceClaimName": claim}]}
    _bind(cluster, trainer, gpu_a, "1", "1Gi", owner="ReplicaSet", spec=uses_claim)
    for node in (cpu_b, gpu_c):
        _bind(cluster, f"anchor-{node}", node, "100m", "100Mi")  # bare: pins its node

    def report(*extra: str) -> dict[str, dict]:
        assert main(["inspect", "--kubeconfig", str(cluster.kubeconfig), "--json", *extra]) == 0
        out = json.loads(capsys.readouterr().out)
        assert out["dra_problems"] == []
        return {n["node"]: n for n in out["nodes"]}

    try:
        nodes = report("--dra")
        assert (nodes[gpu_a]["dra"], nodes[cpu_b]["verdict"], nodes[gpu_c]["verdict"]) == (
            0.25,
            "pinned",
            "pinned",
        )
        assert (nodes[gpu_a]["verdict"], nodes[gpu_a]["no_room_for"]) == ("no-room", f"default/{trainer}")
        assert nodes[gpu_a]["moves"] == {}
        plain = report()[gpu_a]  # weighed by cpu (25%); its claim moves as if free
        assert (plain["verdict"], plain["moves"]) == ("removable", {f"default/{trainer}": cpu_b})
        cluster.create_device_pool(gpu_c, 1, driver=driver)
        nodes = report("--dra")
        assert (nodes[gpu_a]["verdict"], nodes[gpu_a]["no_room_for"]) == ("removable", None)
        assert nodes[gpu_a]["moves"] == {f"default/{trainer}": gpu_c}
    finally:
        cluster.delete_all_dra()


@pytest.mark.controlplane
def test_inspect_dra_moves_a_claim_only_to_a_device_its_selector_selects_as_the_real_scheduler_allocates(
    cluster: ControlPlane, capsys: pytest.CaptureFixture[str]
) -> None:
    """On the real API server: gpu-a's trainer (a ReplicaSet's) holds gpu-a's a100 (of its
    four GPUs) with a claim selecting ``model == "a100"``; gpu-b (pinned) publishes a free
    t4 only. inspect's
    plan allocates the released claim again with the allocator: no room (gpu-a kept). The
    real kube-scheduler agrees: a pod with a new claim of the same request stays pending,
    none of the nodes able to allocate it. Once gpu-c (pinned) publishes two a100s, the
    scheduler binds that pod there (taking one), and the plan moves the trainer to gpu-c,
    onto the other."""
    suffix = uuid.uuid4().hex[:6]
    driver = f"sel-{suffix}.example.com"
    gpu_a, gpu_b, gpu_c = f"gpu-a-{suffix}", f"gpu-b-{suffix}", f"gpu-c-{suffix}"
    trainer, claim, probe = f"trainer-{suffix}", f"train-{suffix}", f"probe-{suffix}"
    for node in (gpu_a, gpu_b, gpu_c):
        cluster.create_node(node, cpu="4", memory="16Gi")

    def gpus(*models: str) -> list[dict]:
        return [{"name": f"dev-{k}", "attributes": {"model": {"string": m}}} for k, m in enumerate(models)]

    selector = {"cel": {"expression": f'device.attributes["{driver}"].model == "a100"'}}
    wants = {
        "requests": [{"name": "devices", "exactly": {"deviceClassName": driver, "selectors": [selector]}}]
    }

    def report() -> dict[str, dict]:
        argv = ["inspect", "--kubeconfig", str(cluster.kubeconfig), "--json", "--dra"]
        assert main(argv) == 0
        out = json.loads(capsys.readouterr().out)
        assert out["dra_problems"] == []
        return {n["node"]: n for n in out["nodes"]}

    try:
        _publish_devices(cluster, gpu_a, driver, gpus("a100", "t4", "t4", "t4"))  # 25% used: a candidate
        _publish_devices(cluster, gpu_b, driver, gpus("t4"))
        _create_claim(cluster, claim, wants)
        cluster.allocate_claim(claim, gpu_a, ["dev-0"], driver=driver)
        uses_claim = {"resourceClaims": [{"name": "gpu", "resourceClaimName": claim}]}
        _bind(cluster, trainer, gpu_a, "1", "1Gi", owner="ReplicaSet", spec=uses_claim)
        for node in (gpu_b, gpu_c):
            _bind(cluster, f"anchor-{node}", node, "100m", "100Mi")  # bare: pins its node
        nodes = report()
        assert (nodes[gpu_a]["verdict"], nodes[gpu_a]["no_room_for"]) == ("no-room", f"default/{trainer}")
        assert nodes[gpu_a]["moves"] == {}
        cluster.start_scheduler(scheduler_config(["default-scheduler"]))
        _create_claim(cluster, f"{probe}-gpu", wants)
        pod = pod_manifest(probe, cpu="100m", memory="100Mi")
        pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": f"{probe}-gpu"}]
        cluster.create_pod(pod=pod)
        message = cluster.wait_unschedulable([probe], timeout=30)[probe]
        assert "cannot allocate all claims" in message, message
        _publish_devices(cluster, gpu_c, driver, gpus("a100", "a100"))
        assert cluster.wait_bound([probe], timeout=30) == {probe: gpu_c}
        nodes = report()
        assert (nodes[gpu_a]["verdict"], nodes[gpu_a]["no_room_for"]) == ("removable", None)
        assert nodes[gpu_a]["moves"] == {f"default/{trainer}": gpu_c}
    finally:
        cluster.delete_all_dra()


@pytest.mark.controlplane
def test_inspect_pod_dra_keeps_a_pod_where_its_allocated_claim_is_as_the_real_scheduler_does(
    cluster: ControlPlane, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """kube-scheduler's DynamicResources (on by default, ``resource.k8s.io/v1`` served): the
    probe's claim is allocated (status written through the status subresource) with a node
    selector naming ``b``, the busiest node, which LeastAllocated (``--policy default``)
    would pick last: with ``--dra`` inspect names ``b`` best and the others
    DynamicResources, and the real kube-scheduler binds the probe to ``b``; without, it
    names ``a``. A pod whose claim does not exist yet is rejected on every node by the
    plugin's PreFilter; the real kube-scheduler leaves it pending until the claim is made
    (allocated on ``c``), then binds it there."""
    suffix = uuid.uuid4().hex[:6]
    driver, held, late = f"gpu-{suffix}.example.com", f"held-{suffix}", f"late-{suffix}"
    for node in ("a", "b", "c"):
        cluster.create_node(node, cpu="4", memory="16Gi")
    _bind(cluster, "b-fill", "b", "2", "4Gi")
    _bind(cluster, "c-fill", "c", "1", "2Gi")

    def allocate_on(claim: str, node: str) -> None:
        cluster.create_claim(claim, 1, driver=driver)
        _allocate_on_node(cluster, claim, node, driver)

    def inspect(pod: dict, *extra: str) -> dict:
        path = tmp_path / f"{pod['metadata']['name']}.yaml"
        path.write_text(yaml.safe_dump(pod))
        argv = ["inspect", "--kubeconfig", str(cluster.kubeconfig), "--policy", "default", "--json"]
        assert main([*argv, "--pod", str(path), *extra]) == 0
        return json.loads(capsys.readouterr().out)

    def verdicts(report: dict) -> dict[str, str | None]:
        return {n["node"]: n["filtered_by"] for n in report["nodes"]}

    probe = pod_manifest("probe", cpu="500m", memory="100Mi")
    probe["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": held}]
    orphan = pod_manifest("orphan", cpu="500m", memory="100Mi")
    orphan["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": late}]
    try:
        allocate_on(held, "b")
        report = inspect(probe, "--dra")
        assert verdicts(report) == {"a": "DynamicResources", "b": None, "c": "DynamicResources"}
        assert report["best"] == ["b"]
        assert report["dynamic_resources"] == {
            "device_classes_read": True,
            "templates_read": True,
            "taint_rules_read": True,
            "rejected": None,
            "allocated": [held],
            "not_judged": [],
            "deallocates": [],
            "unbindable": [],
            "allocates": [],
            "cannot_allocate": {},
            "scheduler_error": None,
            "problems": [],
            "extended_resources": {},
        }
        plain = inspect(probe)
        assert (plain["best"], plain["dynamic_resources"], set(verdicts(plain).values())) == (
            ["a"],
            None,
            {None},
        )
        report = inspect(orphan, "--dra")
        assert verdicts(report) == dict.fromkeys("abc", "DynamicResources") and report["best"] == []
        assert report["dynamic_resources"]["rejected"] == f'could not find ResourceClaim "default/{late}"'
        path = tmp_path / "orphan.yaml"  # the table's note says so too
        argv = ["inspect", "--kubeconfig", str(cluster.kubeconfig), "--policy", "default", "--dra"]
        assert main([*argv, "--pod", str(path)]) == 0
        out = capsys.readouterr().out
        assert f'DynamicResources rejects every node: could not find ResourceClaim "default/{late}"' in out
        assert "filtered by DynamicResources" in out and "best: none" in out
        cluster.start_scheduler(scheduler_config(["default-scheduler"]))
        cluster.create_pod(pod=probe)
        cluster.create_pod(pod=orphan)
        assert cluster.wait_bound(["probe"], timeout=30) == {"probe": "b"}
        time.sleep(3)  # the probe is bound: the scheduler has seen the orphan too
        held_back = {p["metadata"]["name"]: p for p in cluster.pods()}["orphan"]
        assert not held_back["spec"].get("nodeName")
        # held by the plugin's PreEnqueue: never tried, so no PodScheduled condition either
        conditions = held_back.get("status", {}).get("conditions") or []
        assert not [c for c in conditions if c.get("type") == "PodScheduled"]
        allocate_on(late, "c")
        assert verdicts(inspect(orphan, "--dra")) == {
            "a": "DynamicResources",
            "b": "DynamicResources",
            "c": None,
        }
        assert cluster.wait_bound(["orphan"], timeout=30) == {"orphan": "c"}
    finally:
        cluster.delete_all_dra()


@pytest.mark.controlplane
def test_inspect_pod_dra_takes_a_template_claim_only_once_it_is_the_pods_own(
    cluster: ControlPlane, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A pod whose claim comes from a template (no controller runs here to make it): as the
    API server stores it (``kubectl get pod -o yaml``, with its uid), its status names no
    claim yet, so kube-scheduler's DynamicResources rejects every node and the real
    kube-scheduler holds it; once its status names a claim another pod controls, still
    (not the pod's own); once the claim is the pod's (its controller owner reference has
    the pod's uid), inspect and the real kube-scheduler put it on ``b``, where the claim is
    allocated, though LeastAllocated would prefer the empty ``a``. (A claim's owner changed in
    place would not do for the real one: its queueing hint skips a claim whose status did not
    change, so the claim is made again.)"""
    suffix = uuid.uuid4().hex[:6]
    driver, claim = f"gpu-{suffix}.example.com", f"owned-gpu-{suffix}"
    cluster.create_node("a", cpu="4", memory="16Gi")
    cluster.create_node("b", cpu="4", memory="16Gi")
    _bind(cluster, "b-fill", "b", "2", "4Gi")

    def make_claim(owner_uid: str) -> None:
        """The claim, controlled by the pod of ``owner_uid`` (as the resourceclaim controller
        makes it), allocated on ``b``."""
        ref = {"apiVersion": "v1", "kind": "Pod", "name": "owned", "uid": owner_uid, "controller": True}
        request = {"name": "devices", "exactly": {"deviceClassName": driver, "count": 1}}
        body = {
            "metadata": {"name": claim, "ownerReferences": [ref]},
            "spec": {"devices": {"requests": [request]}},
        }
        cluster.call(lambda api: client.ResourceV1Api(api).create_namespaced_resource_claim("default", body))
        _allocate_on_node(cluster, claim, "b", driver)

    def inspect() -> dict:
        (pod,) = [p for p in cluster.pods() if p["metadata"]["name"] == "owned"]
        return _inspect_pod_dra_json(cluster, tmp_path, capsys, pod)

    owned = pod_manifest("owned", cpu="500m", memory="100Mi")
    owned["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "gpu-template"}]
    cluster.start_scheduler(scheduler_config(["default-scheduler"]))
    cluster.create_pod(pod=owned)
    try:
        report = inspect()
        rejected = {n["node"]: n["filtered_by"] for n in report["nodes"]}
        assert rejected == dict.fromkeys("ab", "DynamicResources")
        assert report["dynamic_resources"]["rejected"] == 'pod "default/owned": ResourceClaim not created yet'
        # a claim controlled by another pod, allocated on b, named in the pod's status
        make_claim("0b5e3f1c-0000-4000-8000-00000000000f")
        statuses = {"status": {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": claim}]}}
        core = client.CoreV1Api
        cluster.call(lambda api: core(api).patch_namespaced_pod_status("owned", "default", statuses))
        report = inspect()
        assert report["dynamic_resources"]["rejected"] == (
            f"ResourceClaim default/{claim} was not created for Pod default/owned (Pod is not owner)"
        )
        assert report["best"] == []
        time.sleep(3)
        assert cluster.placements()["owned"] is None
        # made again, the pod's own (kube-scheduler requeues the pod on a claim created, not
        # on a claim whose metadata alone changed)
        cluster.call(lambda api: client.ResourceV1Api(api).delete_namespaced_resource_claim(claim, "default"))
        (pod,) = [p for p in cluster.pods() if p["metadata"]["name"] == "owned"]
        make_claim(pod["metadata"]["uid"])
        report = inspect()
        assert {n["node"]: n["filtered_by"] for n in report["nodes"]} == {"a": "DynamicResources", "b": None}
        assert (report["best"], report["dynamic_resources"]["allocated"]) == (["b"], [claim])
        assert cluster.wait_bound(["owned"], timeout=30) == {"owned": "b"}
    finally:
        cluster.delete_all_dra()


@pytest.mark.controlplane
def test_inspect_pod_dra_rejects_a_claim_for_a_device_class_that_does_not_exist(
    cluster: ControlPlane, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A claim not allocated whose request asks for a DeviceClass that does not exist:
    kube-scheduler's DynamicResources PreFilter rejects every node, in the words inspect
    gives (the real kube-scheduler's PodScheduled condition carries them). Once the class
    exists and ``b`` publishes a device, inspect allocates the claim as kube-scheduler's
    allocator does: ``a`` (the emptier node, LeastAllocated's pick) has no device and is
    named DynamicResources, ``b`` is best, where the real kube-scheduler binds the pod. An
    account that may not list DeviceClasses is told the class is not checked (and the claim
    is not judged)."""
    suffix = uuid.uuid4().hex[:6]
    driver, claim = f"gpu-{suffix}.example.com", f"wants-{suffix}"
    cluster.create_node("a", cpu="4", memory="16Gi")
    cluster.create_node("b", cpu="4", memory="16Gi")
    _bind(cluster, "b-fill", "b", "2", "4Gi")
    cluster.create_claim(claim, 1, driver=driver)  # DeviceClass `driver`, not made yet
    pod = pod_manifest("wants", cpu="500m", memory="100Mi")
    pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": claim}]
    try:
        report = _inspect_pod_dra_json(cluster, tmp_path, capsys, pod)
        why = f"request devices: device class {driver} does not exist"
        assert report["dynamic_resources"] == {
            "device_classes_read": True,
            "templates_read": True,
            "taint_rules_read": True,
            "rejected": why,
            "allocated": [],
            "not_judged": [],
            "deallocates": [],
            "unbindable": [],
            "allocates": [],
            "cannot_allocate": {},
            "scheduler_error": None,
            "problems": [],
            "extended_resources": {},
        }
        assert {n["filtered_by"] for n in report["nodes"]} == {"DynamicResources"}
        # an account that may list the claims but not the classes: not checked, and said
        limited = _account_that_lists(
            cluster,
            f"inspect-classes-{suffix}",
            {"": ["nodes", "pods"], "resource.k8s.io": ["resourceslices", "resourceclaims"]},
        )
        path = tmp_path / "wants.yaml"
        path.write_text(yaml.safe_dump(pod))
        argv = ["inspect", "--kubeconfig", str(limited), "--policy", "default", "--dra", "--pod", str(path)]
        assert main([*argv, "--json"]) == 0
        judged = json.loads(capsys.readouterr().out)["dynamic_resources"]
        assert (judged["device_classes_read"], judged["rejected"], judged["not_judged"]) == (
            False,
            None,
            [f"claim default/{claim}: its DeviceClass could not be listed (on a, b: passes there)"],
        )
        assert main(argv) == 0
        assert "DeviceClasses could not be listed" in capsys.readouterr().out
        cluster.start_scheduler(scheduler_config(["default-scheduler"]))
        cluster.create_pod(pod=pod)
        message = cluster.wait_unschedulable(["wants"], timeout=30)["wants"]
        assert why in message, message
        cluster.stop_schedulers()  # else it allocates the claim before inspect reads it
        cluster.create_device_pool("b", 1, driver=driver)  # the class, and one device on b
        report = _inspect_pod_dra_json(cluster, tmp_path, capsys, pod)
        assert report["dynamic_resources"]["allocates"] == [claim]
        assert report["dynamic_resources"]["cannot_allocate"] == {"a": "cannot allocate all claims"}
        verdicts = {n["node"]: n["filtered_by"] for n in report["nodes"]}
        assert (report["best"], verdicts) == (["b"], {"a": "DynamicResources", "b": None})
        cluster.start_scheduler(scheduler_config(["default-scheduler"]))
        assert cluster.wait_bound(["wants"], timeout=30) == {"wants": "b"}
    finally:
        cluster.delete_all_dra()


@pytest.mark.controlplane
def test_inspect_pod_dra_names_a_node_two_filters_reject_as_kube_scheduler_does(
    cluster: ControlPlane, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """DynamicResources runs after NodeResourcesFit and TaintToleration: the probe's claim is
    allocated on ``tainted``, which an untolerated taint keeps it off; ``full`` lacks cpu
    for it as well as the claim; ``other`` lacks only the claim. Both inspect and the real
    kube-scheduler (its PodScheduled condition counts each node under its first failing
    filter) name TaintToleration, NodeResourcesFit and DynamicResources once each, while
    another pod uses the claim. Once none does, no node passing, inspect says the
    DynamicResources PostFilter deallocates it, and the real kube-scheduler does."""
    suffix = uuid.uuid4().hex[:6]
    driver, claim = f"gpu-{suffix}.example.com", f"held-{suffix}"
    cluster.create_node("tainted", cpu="4", memory="16Gi", taints=["keep-off:NoSchedule"])
    cluster.create_node("full", cpu="1", memory="16Gi")
    cluster.create_node("other", cpu="4", memory="16Gi")
    cluster.create_claim(claim, 1, driver=driver)
    _allocate_on_node(cluster, claim, "tainted", driver)
    probe = pod_manifest("probe", cpu="2", memory="100Mi")
    probe["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": claim}]
    resource = client.ResourceV1Api

    def reserve(users: list[dict] | None) -> None:
        status = {"status": {"reservedFor": users}}
        cluster.call(
            lambda api: resource(api).patch_namespaced_resource_claim_status(claim, "default", status)
        )

    def allocated() -> bool:
        got = cluster.call(lambda api: resource(api).read_namespaced_resource_claim(claim, "default"))
        return got.status is not None and got.status.allocation is not None

    # another pod uses the claim: kube-scheduler may not deallocate it (its PostFilter)
    reserve([{"resource": "pods", "name": "keeper", "uid": "0b5e3f1c-0000-4000-8000-0000000000aa"}])
    try:
        report = _inspect_pod_dra_json(cluster, tmp_path, capsys, probe)
        verdicts = {n["node"]: n["filtered_by"] for n in report["nodes"]}
        assert verdicts == {
            "tainted": "TaintToleration",
            "full": "NodeResourcesFit",
            "other": "DynamicResources",
        }
        assert (report["best"], report["dynamic_resources"]["deallocates"]) == ([], [])
        cluster.start_scheduler(scheduler_config(["default-scheduler"]))
        cluster.create_pod(pod=probe)
        message = cluster.wait_unschedulable(["probe"], timeout=30)["probe"]
        assert "0/3 nodes are available" in message, message
        for reason in (
            "1 node(s) had untolerated taint",
            "1 Insufficient cpu",
            "1 resourceclaim not available",
        ):
            assert reason in message, message
        assert allocated()
        # used by no other pod: inspect says kube-scheduler deallocates it, and it does
        cluster.stop_schedulers()
        reserve(None)
        report = _inspect_pod_dra_json(cluster, tmp_path, capsys, probe)
        assert report["dynamic_resources"]["deallocates"] == [claim]
        cluster.start_scheduler(scheduler_config(["default-scheduler"]))
        deadline = time.monotonic() + 30
        while allocated() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not allocated()
    finally:
        cluster.delete_all_dra()


@pytest.mark.controlplane
def test_inspect_pod_dra_a_claim_whose_device_binding_failed_is_unavailable_on_every_node(
    cluster: ControlPlane, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Device binding conditions (beta, on by default): the probe's claim is allocated on
    ``b`` with a device that waits for condition ``Attached`` and whose failure condition
    ``Failed`` is true (as a driver reports a fabric attachment that failed). kube-scheduler's
    DynamicResources Filter finds the claim unavailable on every node, ``b`` too: inspect
    names both nodes DynamicResources and says why, and the real kube-scheduler's
    PodScheduled condition counts both so (another pod uses the claim, so it stays)."""
    suffix = uuid.uuid4().hex[:6]
    driver, claim = f"gpu-{suffix}.example.com", f"fabric-{suffix}"
    cluster.create_node("a", cpu="4", memory="16Gi")
    cluster.create_node("b", cpu="4", memory="16Gi")
    cluster.create_claim(claim, 1, driver=driver)
    device = {"driver": driver, "pool": "b", "device": "dev-0"}
    result = {
        "request": "devices",
        **device,
        "bindingConditions": ["Attached"],
        "bindingFailureConditions": ["Failed"],
    }
    selector = {"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": ["b"]}]}]}  # fmt: skip
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    allocation = {"devices": {"results": [result]}, "nodeSelector": selector, "allocationTimestamp": stamp}
    failed = {"type": "Failed", "status": "True", "reason": "NoFabric", "message": "switch down",
              "lastTransitionTime": stamp}  # fmt: skip
    keeper = {"resource": "pods", "name": "keeper", "uid": "0b5e3f1c-0000-4000-8000-0000000000bb"}
    status = {"status": {"allocation": allocation, "reservedFor": [keeper],
                         "devices": [{**device, "conditions": [failed]}]}}  # fmt: skip
    cluster.call(
        lambda api: client.ResourceV1Api(api).patch_namespaced_resource_claim_status(claim, "default", status)
    )
    probe = pod_manifest("probe", cpu="500m", memory="100Mi")
    probe["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": claim}]
    try:
        report = _inspect_pod_dra_json(cluster, tmp_path, capsys, probe)
        assert {n["node"]: n["filtered_by"] for n in report["nodes"]} == dict.fromkeys(
            "ab", "DynamicResources"
        )
        why = f'device binding failed: claim={claim}, reason=NoFabric, message="switch down"'
        assert report["dynamic_resources"]["unbindable"] == [why]
        assert report["dynamic_resources"]["deallocates"] == []  # another pod uses it
        cluster.start_scheduler(scheduler_config(["default-scheduler"]))
        cluster.create_pod(pod=probe)
        message = cluster.wait_unschedulable(["probe"], timeout=30)["probe"]
        assert "0/2 nodes are available: 2 resourceclaim not available on the node" in message, message
    finally:
        cluster.delete_all_dra()


@pytest.mark.controlplane
def test_inspect_pod_refuses_resource_claims_entries_the_api_server_refuses(
    cluster: ControlPlane, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A pod file whose ``spec.resourceClaims`` the real API server refuses (not a list, an
    entry that is not an object, without a name, naming neither a claim nor a template or
    both, a name that is not a string) is no pod kube-scheduler ever sees: inspect says
    what and where in one line (exit 2), with ``--dra`` or without, instead of placing it
    as if it claimed nothing, reading a claim of both fields as the named one, or blaming
    DynamicResources."""
    cluster.create_node("a", cpu="4", memory="16Gi")
    cases: list[tuple[object, str]] = [
        ("gpu", "spec.resourceClaims: 'gpu' is not a list"),
        (["gpu"], "spec.resourceClaims[0]: 'gpu' is not an object"),
        ([{"resourceClaimName": "c"}], "spec.resourceClaims[0].name: None is not a name"),
        ([{"name": "gpu"}], "spec.resourceClaims[0]: one of resourceClaimName, resourceClaimTemplateName"),
        (
            [{"name": "gpu", "resourceClaimName": "c", "resourceClaimTemplateName": "t"}],
            "spec.resourceClaims[0]: resourceClaimName and resourceClaimTemplateName both set",
        ),
        ([{"name": "gpu", "resourceClaimName": 5}], "spec.resourceClaims[0].resourceClaimName: 5 is not a"),
        ([{"name": "gpu", "resourceClaimTemplateName": ""}], "resourceClaimTemplateName: '' is not a"),
    ]
    for k, (claims, why) in enumerate(cases):
        raw = pod_manifest(f"odd-claims-{k}", cpu="100m", memory="100Mi")
        raw["spec"]["resourceClaims"] = claims
        with pytest.raises(client.exceptions.ApiException) as refused:
            cluster.call(lambda api, raw=raw: client.CoreV1Api(api).create_namespaced_pod("default", raw))
        assert refused.value.status in (400, 422), claims
        path = tmp_path / f"odd-claims-{k}.yaml"
        path.write_text(yaml.safe_dump(raw))
        for extra in ([], ["--dra"]):
            argv = ["inspect", "--kubeconfig", str(cluster.kubeconfig), "--pod", str(path), *extra]
            assert main(argv) == 2, claims
            captured = capsys.readouterr()
            assert why in captured.err and str(path) in captured.err, (claims, captured.err)
            assert len(captured.err.strip().splitlines()) == 1 and "Traceback" not in captured.err
    assert cluster.placements() == {}


@pytest.mark.controlplane
def test_inspect_pod_dra_says_a_gated_pod_is_held_as_the_real_scheduler_holds_it(
    cluster: ControlPlane, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """kube-scheduler's PreEnqueue runs SchedulingGates before DynamicResources: a pod with
    ``spec.schedulingGates`` is not tried at all (its PodScheduled condition stays
    ``SchedulingGated``) whatever its claims, until the gates are removed. inspect reports
    the gates (``scheduling_gates``) and says the pod is held, in kube-scheduler's words,
    while judging the nodes as they are once the gates go: its claim allocated on ``b``
    (the busier node) makes ``b`` best, where the real kube-scheduler binds it once
    ungated."""
    suffix = uuid.uuid4().hex[:6]
    driver, claim, gate = f"gpu-{suffix}.example.com", f"held-{suffix}", "example.com/hold"
    cluster.create_node("a", cpu="4", memory="16Gi")
    cluster.create_node("b", cpu="4", memory="16Gi")
    _bind(cluster, "b-fill", "b", "2", "4Gi")
    cluster.create_claim(claim, 1, driver=driver)
    _allocate_on_node(cluster, claim, "b", driver)
    gated = pod_manifest("gated", cpu="500m", memory="100Mi")
    gated["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": claim}]
    gated["spec"]["schedulingGates"] = [{"name": gate}]
    try:
        cluster.start_scheduler(scheduler_config(["default-scheduler"]))
        cluster.create_pod(pod=gated)
        report = _inspect_pod_dra_json(cluster, tmp_path, capsys, gated)
        assert report["scheduling_gates"] == [gate]
        assert (report["best"], report["dynamic_resources"]["allocated"]) == (["b"], [claim])
        path = tmp_path / "gated-dra.yaml"
        argv = ["inspect", "--kubeconfig", str(cluster.kubeconfig), "--policy", "default", "--dra"]
        assert main([*argv, "--pod", str(path)]) == 0
        out = capsys.readouterr().out
        assert f"waiting for scheduling gates: [{gate}]" in out, out
        time.sleep(3)
        (pod,) = [p for p in cluster.pods() if p["metadata"]["name"] == "gated"]
        conditions = {c["type"]: c for c in pod["status"].get("conditions") or ()}
        assert pod["spec"].get("nodeName") is None
        assert conditions["PodScheduled"]["reason"] == "SchedulingGated"
        ungated = copy.deepcopy(gated)
        del ungated["spec"]["schedulingGates"]
        plain = _inspect_pod_dra_json(cluster, tmp_path, capsys, ungated)
        assert (plain["scheduling_gates"], plain["best"]) == ([], ["b"])
        cluster.call(
            lambda api: client.CoreV1Api(api).patch_namespaced_pod(
                "gated", "default", {"spec": {"schedulingGates": None}}
            )
        )
        assert cluster.wait_bound(["gated"], timeout=30) == {"gated": "b"}
    finally:
        cluster.delete_all_dra()


@pytest.mark.controlplane
def test_inspect_pod_dra_a_shared_claim_by_zone_or_anywhere_as_the_real_scheduler_places_it(
    cluster: ControlPlane, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two claims another pod already uses (``status.reservedFor``: no rejection, kube-scheduler
    v1.37.2's ``CanBeReserved`` being always true): one allocated with a node selector on a
    label (``zone In [z1]``, as a network-attached device of a zone), one without a node
    selector (available everywhere). inspect filters the z2 node and names the emptier z1
    node best, and the real kube-scheduler binds the pod there; the claim without a node
    selector alone leaves every node to the scores (the empty z2 node), where it binds it."""
    suffix = uuid.uuid4().hex[:6]
    driver, zonal, anywhere = f"net-{suffix}.example.com", f"zonal-{suffix}", f"anywhere-{suffix}"
    zone = "topology.kubernetes.io/zone"
    cluster.create_node("z1-busy", cpu="4", memory="16Gi", labels={zone: "z1"})
    cluster.create_node("z1-quiet", cpu="4", memory="16Gi", labels={zone: "z1"})
    cluster.create_node("z2-empty", cpu="4", memory="16Gi", labels={zone: "z2"})
    _bind(cluster, "z1-busy-fill", "z1-busy", "3", "4Gi")
    _bind(cluster, "z1-quiet-fill", "z1-quiet", "1", "1Gi")
    keeper = {"resource": "pods", "name": "keeper", "uid": "0b5e3f1c-0000-4000-8000-0000000000cc"}
    result = {"request": "devices", "driver": driver, "pool": "fabric", "device": "dev-0"}
    by_zone = {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": zone, "operator": "In", "values": ["z1"]}]}]}  # fmt: skip
    for claim, selector in ((zonal, by_zone), (anywhere, None)):
        cluster.create_claim(claim, 1, driver=driver)
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        allocation: dict = {"devices": {"results": [result]}, "allocationTimestamp": stamp}
        if selector is not None:
            allocation["nodeSelector"] = selector
        status = {"status": {"allocation": allocation, "reservedFor": [keeper]}}
        cluster.call(lambda api, c=claim, s=status: _write_claim_status(api, c, s))
    pods = {}
    for name, claim in (("zonal", zonal), ("anywhere", anywhere)):
        pods[name] = pod_manifest(name, cpu="500m", memory="100Mi")
        pods[name]["spec"]["resourceClaims"] = [{"name": "net", "resourceClaimName": claim}]
    try:
        report = _inspect_pod_dra_json(cluster, tmp_path, capsys, pods["zonal"])
        verdicts = {n["node"]: n["filtered_by"] for n in report["nodes"]}
        assert verdicts == {"z1-busy": None, "z1-quiet": None, "z2-empty": "DynamicResources"}
        assert report["best"] == ["z1-quiet"]
        assert report["dynamic_resources"]["rejected"] is None
        assert report["dynamic_resources"]["allocated"] == [zonal]
        free = _inspect_pod_dra_json(cluster, tmp_path, capsys, pods["anywhere"])
        assert {n["filtered_by"] for n in free["nodes"]} == {None}
        assert free["best"] == ["z2-empty"]
        cluster.start_scheduler(scheduler_config(["default-scheduler"]))
        cluster.create_pod(pod=pods["zonal"])
        assert cluster.wait_bound(["zonal"], timeout=30) == {"zonal": "z1-quiet"}
        cluster.create_pod(pod=pods["anywhere"])
        assert cluster.wait_bound(["anywhere"], timeout=30) == {"anywhere": "z2-empty"}
    finally:
        cluster.delete_all_dra()


@pytest.mark.controlplane
def test_inspect_pod_dra_a_claim_whose_binding_timed_out_is_deallocated_as_the_real_scheduler_does(
    cluster: ControlPlane, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Binding conditions not all true 600 s (the default ``bindingTimeout``) after the
    allocation: kube-scheduler's DynamicResources Filter finds the claim unavailable on every
    node (``isClaimTimeout``) and, no other pod using it, its PostFilter deallocates it.
    inspect names both nodes DynamicResources, says the binding timed out and that the claim
    is deallocated; the real kube-scheduler clears the claim's allocation. Allocated a
    minute ago, the same claim is no rejection (the timeout not reached)."""
    suffix = uuid.uuid4().hex[:6]
    driver, claim = f"gpu-{suffix}.example.com", f"slow-{suffix}"
    cluster.create_node("a", cpu="4", memory="16Gi")
    cluster.create_node("b", cpu="4", memory="16Gi")
    cluster.create_claim(claim, 1, driver=driver)
    device = {"driver": driver, "pool": "b", "device": "dev-0"}
    conditions = {"bindingConditions": ["Attached"], "bindingFailureConditions": ["Failed"]}
    result = {"request": "devices", **device, **conditions}
    selector = {"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": ["b"]}]}]}  # fmt: skip
    probe = pod_manifest("probe", cpu="500m", memory="100Mi")
    probe["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": claim}]

    def allocate(seconds_ago: int) -> None:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - seconds_ago))
        allocation = {
            "devices": {"results": [result]},
            "nodeSelector": selector,
            "allocationTimestamp": stamp,
        }
        cluster.call(lambda api: _write_claim_status(api, claim, {"status": {"allocation": allocation}}))

    def allocated() -> bool:
        got = cluster.call(
            lambda api: client.ResourceV1Api(api).read_namespaced_resource_claim(claim, "default")
        )
        return got.status is not None and got.status.allocation is not None

    try:
        allocate(60)
        recent = _inspect_pod_dra_json(cluster, tmp_path, capsys, probe)
        assert (recent["best"], recent["dynamic_resources"]["unbindable"]) == (["b"], [])
        cluster.call(lambda api: _write_claim_status(api, claim, {"status": {"allocation": None}}))
        allocate(700)
        report = _inspect_pod_dra_json(cluster, tmp_path, capsys, probe)
        assert {n["node"]: n["filtered_by"] for n in report["nodes"]} == dict.fromkeys(
            "ab", "DynamicResources"
        )
        (why,) = report["dynamic_resources"]["unbindable"]
        assert why.startswith(f"binding timed out: claim={claim}, allocated ")
        assert report["dynamic_resources"]["deallocates"] == [claim]
        cluster.start_scheduler(scheduler_config(["default-scheduler"]))
        cluster.create_pod(pod=probe)
        deadline = time.monotonic() + 30
        while allocated() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not allocated()
    finally:
        cluster.delete_all_dra()


def _write_claim_status(api: object, claim: str, status: dict) -> object:
    """Patch claim ``claim``'s status (``default`` namespace) with ``status``."""
    return client.ResourceV1Api(api).patch_namespaced_resource_claim_status(claim, "default", status)


def _allocate_on_node(cluster: ControlPlane, claim: str, node: str, driver: str) -> None:
    """Write claim ``claim``'s allocation (one device of pool ``node``) with a node selector
    naming ``node``, as a node-local DRA driver's allocation has it, through the status
    subresource; with an ``allocationTimestamp``, as kube-scheduler writes it (its PreBind,
    binding conditions being on by default, sets one where missing, which the API server
    refuses: an allocation is immutable)."""
    result = {"request": "devices", "driver": driver, "pool": node, "device": "dev-0"}
    selector = {"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": [node]}]}]}  # fmt: skip
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    devices = {"results": [result]}
    status = {
        "status": {"allocation": {"devices": devices, "nodeSelector": selector, "allocationTimestamp": stamp}}
    }
    cluster.call(
        lambda api: client.ResourceV1Api(api).patch_namespaced_resource_claim_status(claim, "default", status)
    )


def _publish_devices(cluster: ControlPlane, node: str, driver: str, devices: list[dict]) -> None:
    """A DeviceClass ``driver`` selecting the driver's devices by CEL (unless there is one)
    and a node-local ResourceSlice of ``devices`` in pool ``node``."""
    from kubernetes_asyncio.client.exceptions import ApiException

    selector = {"cel": {"expression": f'device.driver == "{driver}"'}}

    async def create(api: Any) -> None:
        resource: Any = client.ResourceV1Api(api)  # bodies as dicts
        try:
            await resource.create_device_class(
                {"metadata": {"name": driver}, "spec": {"selectors": [selector]}}
            )
        except ApiException as exc:
            if exc.status != 409:
                raise
        pool = {"name": node, "generation": 1, "resourceSliceCount": 1}
        spec = {"driver": driver, "nodeName": node, "pool": pool, "devices": devices}
        await resource.create_resource_slice({"metadata": {"name": f"{driver}-{node}"}, "spec": spec})

    cluster.call(create)


def _publish_partitioned(cluster: ControlPlane, node: str, driver: str) -> None:
    """A partitionable pool ``node`` of ``driver`` (DeviceClass ``driver``): a slice sharing
    a counter set of 40Gi memory and a slice of devices consuming it, ``whole`` (40Gi),
    ``half0`` and ``half1`` (20Gi each)."""
    _publish_devices(cluster, node, driver, [])  # the class (and an empty slice of another pool)

    def part(name: str, memory: str) -> dict:
        return {
            "name": name,
            "consumesCounters": [{"counterSet": "gpu0", "counters": {"memory": {"value": memory}}}],
        }

    pool = {"name": f"{node}-parts", "generation": 1, "resourceSliceCount": 2}
    counters = [{"name": "gpu0", "counters": {"memory": {"value": "40Gi"}}}]
    bodies = [
        {"driver": driver, "nodeName": node, "pool": pool, "sharedCounters": counters},
        {"driver": driver, "nodeName": node, "pool": pool,
         "devices": [part("whole", "40Gi"), part("half0", "20Gi"), part("half1", "20Gi")]},
    ]  # fmt: skip

    async def create(api: Any) -> None:
        for k, spec in enumerate(bodies):
            await client.ResourceV1Api(api).create_resource_slice(
                {"metadata": {"name": f"{driver}-{node}-{k}"}, "spec": spec}
            )

    cluster.call(create)


def _create_claim(cluster: ControlPlane, name: str, devices: dict) -> None:
    """A ResourceClaim ``name`` of ``spec.devices`` ``devices``, not allocated."""
    body = {"metadata": {"name": name}, "spec": {"devices": devices}}
    cluster.call(lambda api: client.ResourceV1Api(api).create_namespaced_resource_claim("default", body))


@pytest.mark.controlplane
def test_inspect_pod_dra_allocates_unallocated_claims_as_the_real_scheduler_does(
    cluster: ControlPlane, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """kube-scheduler's allocator on claims not allocated yet, one driver (and DeviceClass,
    selecting it by CEL) per case, on nodes ``a`` (empty: LeastAllocated's pick without
    DRA) and ``b`` (busy): inspect names the node the real kube-scheduler binds each pod
    to, and DynamicResources on the other, in its words:

    * ``model``: ``a`` publishes a t4, ``b`` an a100; the claim's selector asks for an a100;
    * ``taken``: ``a``'s one device is allocated to another claim;
    * ``pair``: ``count: 2``, ``a`` has one device, ``b`` two; ``three``: ``count: 3``,
      nowhere (the real kube-scheduler's PodScheduled condition says why, as inspect does);
    * ``fallback``: ``firstAvailable`` an a100 (none anywhere), then a t4 (``a``'s only);
    * ``numa``: ``count: 2`` with ``matchAttribute`` numa: ``a``'s two devices differ;
    * ``taint``: ``a``'s device is tainted NoSchedule, the request tolerates nothing;
    * ``part``: ``count: 2`` of partitionable devices sharing 40Gi: on ``a`` another claim
      holds a 20Gi half, so only one more fits; ``b`` has both halves;
    * ``missing``: the selector reads an attribute ``a``'s device lacks: a CEL runtime error
      that fails the whole scheduling attempt (``SchedulerError``, no node), in the real
      kube-scheduler's words."""
    suffix = uuid.uuid4().hex[:6]
    cluster.create_node("a", cpu="4", memory="16Gi")
    cluster.create_node("b", cpu="4", memory="16Gi")
    _bind(cluster, "b-fill", "b", "2", "4Gi")

    def driver(case: str) -> str:
        return f"{case}-{suffix}.example.com"

    def dev(name: str, **attrs: Any) -> dict:
        kinds = {bool: "bool", int: "int", str: "string"}
        return {"name": name, "attributes": {k: {kinds[type(v)]: v} for k, v in attrs.items()}}

    def exactly(case: str, count: int = 1, *selectors: str, **extra: Any) -> dict:
        body = {"deviceClassName": driver(case), "count": count, **extra}
        body["selectors"] = [{"cel": {"expression": e}} for e in selectors]
        return {"requests": [{"name": "gpu", "exactly": body}]}

    model = f'device.attributes["{driver("model")}"].model == "a100"'
    tainted = {**dev("dev-0"), "taints": [{"key": "broken", "value": "yes", "effect": "NoSchedule"}]}
    published = {
        "model": ([dev("dev-0", model="t4")], [dev("dev-0", model="a100")]),
        "taken": ([dev("dev-0")], [dev("dev-0")]),
        "pair": ([dev("dev-0")], [dev("dev-0"), dev("dev-1")]),
        "three": ([dev("dev-0")], [dev("dev-0"), dev("dev-1")]),
        "fallback": ([dev("dev-0", model="t4")], []),
        "numa": ([dev("dev-0", numa=0), dev("dev-1", numa=1)], [dev("dev-0", numa=1), dev("dev-1", numa=1)]),
        "taint": ([tainted], [dev("dev-0")]),
        "missing": ([dev("dev-0")], [dev("dev-0", model="a100")]),
    }
    sub = {"deviceClassName": driver("fallback"), "count": 1}
    a100 = {"cel": {"expression": f'device.attributes["{driver("fallback")}"].model == "a100"'}}
    claims = {
        "model": exactly("model", 1, model),
        "taken": exactly("taken"),
        "pair": exactly("pair", 2),
        "three": exactly("three", 3),
        "fallback": {
            "requests": [
                {
                    "name": "gpu",
                    "firstAvailable": [{**sub, "name": "big", "selectors": [a100]}, {**sub, "name": "small"}],
                }
            ]
        },
        "numa": {
            **exactly("numa", 2),
            "constraints": [{"matchAttribute": f"{driver('numa')}/numa", "requests": ["gpu"]}],
        },
        "taint": exactly("taint"),
        "missing": exactly("missing", 1, f'device.attributes["{driver("missing")}"].model == "a100"'),
    }
    expected = {
        "model": "b",
        "taken": "b",
        "pair": "b",
        "fallback": "a",
        "numa": "b",
        "taint": "b",
        "part": "b",
    }
    pods = {}
    try:
        for case, (on_a, on_b) in published.items():
            for node, devices in (("a", on_a), ("b", on_b)):
                if devices:
                    _publish_devices(cluster, node, driver(case), devices)
            _create_claim(cluster, f"{case}-{suffix}", claims[case])
            pod = pod_manifest(case, cpu="100m", memory="100Mi")
            pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": f"{case}-{suffix}"}]
            pods[case] = pod
        cluster.create_claim(f"holder-{suffix}", 1, driver=driver("taken"))
        cluster.allocate_claim(f"holder-{suffix}", "a", ["dev-0"], driver=driver("taken"))
        # partitionable devices: a's half0 is taken, so a's counters have 20Gi left: one half
        for node in ("a", "b"):
            _publish_partitioned(cluster, node, driver("part"))
        _create_claim(cluster, f"part-{suffix}", exactly("part", 2))
        pods["part"] = pod_manifest("part", cpu="100m", memory="100Mi")
        pods["part"]["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": f"part-{suffix}"}]
        cluster.create_claim(f"part-holder-{suffix}", 1, driver=driver("part"))
        results = [{"request": "devices", "driver": driver("part"), "pool": "a-parts", "device": "half0"}]
        status = {"status": {"allocation": {"devices": {"results": results}}}}
        cluster.call(
            lambda api: client.ResourceV1Api(api).patch_namespaced_resource_claim_status(
                f"part-holder-{suffix}", "default", status
            )
        )
        reports = {case: _inspect_pod_dra_json(cluster, tmp_path, capsys, pod) for case, pod in pods.items()}
        for case, node in expected.items():
            other = "a" if node == "b" else "b"
            report = reports[case]
            verdicts = {n["node"]: n["filtered_by"] for n in report["nodes"]}
            assert (report["best"], verdicts) == ([node], {node: None, other: "DynamicResources"}), case
            judged = report["dynamic_resources"]
            assert judged["allocates"] == [f"{case}-{suffix}"], case
            assert judged["cannot_allocate"] == {other: "cannot allocate all claims"}, case
            assert (judged["scheduler_error"], judged["not_judged"]) == (None, []), case
        three = reports["three"]
        assert three["best"] == [] and three["dynamic_resources"]["cannot_allocate"] == {
            "a": "cannot allocate all claims",
            "b": "cannot allocate all claims",
        }
        why = (
            f'running "DynamicResources" filter plugin: claim default/missing-{suffix}: selector #0 on '
            f"device {driver('missing')}/a/dev-0: CEL runtime error: no such key: model. consider using CEL "
            "optional chaining (.? followed by orValue()) or guarding the check with has() for optional "
            "fields"
        )
        missing = reports["missing"]
        assert (missing["best"], missing["dynamic_resources"]["scheduler_error"]) == ([], why)
        assert {n["node"]: n["filtered_by"] for n in missing["nodes"]} == {"a": "DynamicResources", "b": None}
        cluster.start_scheduler(scheduler_config(["default-scheduler"]))
        for pod in pods.values():
            cluster.create_pod(pod=pod)
        assert cluster.wait_bound(list(expected), timeout=60) == expected
        message = cluster.wait_unschedulable(["three"], timeout=30)["three"]
        assert "2 cannot allocate all claims" in message, message
        deadline = time.monotonic() + 30
        condition: dict = {}
        while time.monotonic() < deadline and condition.get("reason") != "SchedulerError":
            held = {p["metadata"]["name"]: p for p in cluster.pods()}["missing"]
            assert not held["spec"].get("nodeName")
            found = [
                c for c in held.get("status", {}).get("conditions") or [] if c.get("type") == "PodScheduled"
            ]
            condition = found[0] if found else {}
            time.sleep(0.2)
        assert (condition.get("reason"), condition.get("message")) == ("SchedulerError", why)
    finally:
        cluster.delete_all_dra()


@pytest.mark.controlplane
def test_inspect_pod_dra_applies_device_taint_rules_as_the_real_scheduler_does(
    cluster: ControlPlane, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A DeviceTaintRule (``resource.k8s.io/v1``) tainting ``a``'s only device of the
    driver ``NoSchedule`` (``a`` empty, LeastAllocated's pick without it; ``b`` busy): a
    claim tolerating nothing can only be allocated on ``b``, one whose request tolerates the
    taint on ``a`` too; inspect names the node the real kube-scheduler binds each pod to.
    An account that may not list ``devicetaintrules`` is told so, and the node where the
    plain claim fits (``a``, without the rule's taint) is not judged."""
    suffix = uuid.uuid4().hex[:6]
    driver = f"ruled-{suffix}.example.com"
    from stickypack.core.draalloc import UNKNOWN_TAINT_RULES

    cluster.create_node("a", cpu="4", memory="16Gi")
    cluster.create_node("b", cpu="4", memory="16Gi")
    _bind(cluster, "b-fill", "b", "2", "4Gi")
    for node in ("a", "b"):
        _publish_devices(cluster, node, driver, [{"name": "dev-0"}])
    taint = {"key": "broken", "value": "yes", "effect": "NoSchedule"}
    cluster.create_device_taint_rule(f"broken-{suffix}", taint, driver=driver, pool="a", device="dev-0")
    tolerates = [{"key": "broken", "operator": "Exists", "effect": "NoSchedule"}]
    requests = {
        "plain": {"deviceClassName": driver},
        "tolerant": {"deviceClassName": driver, "tolerations": tolerates},
    }
    expected = {"plain": "b", "tolerant": "a"}
    pods = {}
    try:
        for case, request in requests.items():
            _create_claim(cluster, f"{case}-{suffix}", {"requests": [{"name": "gpu", "exactly": request}]})
            pods[case] = pod_manifest(case, cpu="100m", memory="100Mi")
            pods[case]["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": f"{case}-{suffix}"}]
        reports = {case: _inspect_pod_dra_json(cluster, tmp_path, capsys, pod) for case, pod in pods.items()}
        plain, tolerant = reports["plain"], reports["tolerant"]
        assert plain["best"] == ["b"]
        assert {n["node"]: n["filtered_by"] for n in plain["nodes"]} == {"a": "DynamicResources", "b": None}
        judged = plain["dynamic_resources"]
        assert (judged["taint_rules_read"], judged["cannot_allocate"], judged["not_judged"]) == (
            True,
            {"a": "cannot allocate all claims"},
            [],
        )
        assert tolerant["best"] == ["a"]
        assert {n["node"]: n["filtered_by"] for n in tolerant["nodes"]} == {"a": None, "b": None}
        # without the right to list the rules: a and b pass, not judged, and it is said
        resources = {
            "": ["nodes", "pods"],
            "resource.k8s.io": [
                "resourceslices",
                "resourceclaims",
                "deviceclasses",
                "resourceclaimtemplates",
            ],
        }
        limited = _account_that_lists(cluster, f"inspect-rules-{suffix}", resources)
        path = tmp_path / "plain-limited.yaml"
        path.write_text(yaml.safe_dump(pods["plain"]))
        argv = ["inspect", "--kubeconfig", str(limited), "--policy", "default", "--dra", "--pod", str(path)]
        assert main([*argv, "--json"]) == 0
        judged = json.loads(capsys.readouterr().out)["dynamic_resources"]
        assert (judged["taint_rules_read"], judged["cannot_allocate"], judged["not_judged"]) == (
            False,
            {},
            [f"{UNKNOWN_TAINT_RULES} (on a, b: passes there)"],
        )
        assert main(argv) == 0
        assert (
            "DeviceTaintRules could not be listed (no `list` right on devicetaintrules"
            in capsys.readouterr().out
        )
        cluster.start_scheduler(scheduler_config(["default-scheduler"]))
        for pod in pods.values():
            cluster.create_pod(pod=pod)
        assert cluster.wait_bound(list(expected), timeout=60) == expected
    finally:
        cluster.delete_all_dra()


@pytest.mark.controlplane
def test_inspect_pod_dra_judges_a_pod_files_template_claim_as_the_claim_made_from_it(
    cluster: ControlPlane, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A pod file (not created yet) whose claim comes from a ResourceClaimTemplate: while
    the template does not exist, the claim would never be made: every node is rejected;
    once it does, its claim is allocated as kube-scheduler's allocator would: only ``b``'s
    device matches its selector, so inspect names ``b`` (LeastAllocated alone would take
    the empty ``a``), and the real kube-scheduler binds the pod there once the claim is
    made from the template (as the resourceclaim controller, which does not run here,
    makes it). An account that may not list the templates is told, and the claim is not
    judged."""
    suffix = uuid.uuid4().hex[:6]
    driver, template = f"tpl-{suffix}.example.com", f"gpu-{suffix}"
    cluster.create_node("a", cpu="4", memory="16Gi")
    cluster.create_node("b", cpu="4", memory="16Gi")
    _bind(cluster, "b-fill", "b", "2", "4Gi")
    _publish_devices(cluster, "a", driver, [{"name": "dev-0", "attributes": {"model": {"string": "t4"}}}])
    _publish_devices(cluster, "b", driver, [{"name": "dev-0", "attributes": {"model": {"string": "a100"}}}])
    selector = {"cel": {"expression": f'device.attributes["{driver}"].model == "a100"'}}
    devices = {"requests": [{"name": "gpu", "exactly": {"deviceClassName": driver, "selectors": [selector]}}]}
    pod = pod_manifest("templated", cpu="100m", memory="100Mi")
    pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": template}]
    entry = f"gpu (from ResourceClaimTemplate {template})"
    try:
        report = _inspect_pod_dra_json(cluster, tmp_path, capsys, pod)
        assert report["dynamic_resources"]["rejected"] == (
            f'pod "default/templated": ResourceClaim not created yet '
            f"(ResourceClaimTemplate default/{template} does not exist)"
        )
        body = {"metadata": {"name": template}, "spec": {"spec": {"devices": devices}}}
        resource: Any = client.ResourceV1Api
        cluster.call(lambda api: resource(api).create_namespaced_resource_claim_template("default", body))
        report = _inspect_pod_dra_json(cluster, tmp_path, capsys, pod)
        judged = report["dynamic_resources"]
        assert (judged["templates_read"], judged["allocates"], judged["not_judged"]) == (True, [entry], [])
        assert judged["cannot_allocate"] == {"a": "cannot allocate all claims"}
        assert (report["best"], {n["node"]: n["filtered_by"] for n in report["nodes"]}) == (
            ["b"],
            {"a": "DynamicResources", "b": None},
        )
        limited = _account_that_lists(
            cluster,
            f"inspect-templates-{suffix}",
            {"": ["nodes", "pods"], "resource.k8s.io": ["resourceslices", "resourceclaims", "deviceclasses"]},
        )
        path = tmp_path / "templated.yaml"
        path.write_text(yaml.safe_dump(pod))
        argv = ["inspect", "--kubeconfig", str(limited), "--policy", "default", "--dra", "--pod", str(path)]
        assert main([*argv, "--json"]) == 0
        judged = json.loads(capsys.readouterr().out)["dynamic_resources"]
        assert (judged["templates_read"], judged["allocates"]) == (False, [])
        assert judged["not_judged"] == ["gpu (from its template, made when the pod is created)"]
        assert main(argv) == 0
        assert "ResourceClaimTemplates could not be listed" in capsys.readouterr().out
        # the real kube-scheduler, once the claim is made from the template for the pod
        cluster.start_scheduler(scheduler_config(["default-scheduler"]))
        cluster.create_pod(pod=pod)
        (created,) = [p for p in cluster.pods() if p["metadata"]["name"] == "templated"]
        owner = {"apiVersion": "v1", "kind": "Pod", "name": "templated", "uid": created["metadata"]["uid"]}
        claim = {
            "metadata": {
                "name": f"templated-gpu-{suffix}",
                "ownerReferences": [{**owner, "controller": True}],
            },
            "spec": {"devices": devices},
        }
        cluster.call(lambda api: client.ResourceV1Api(api).create_namespaced_resource_claim("default", claim))
        made = {
            "status": {
                "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": f"templated-gpu-{suffix}"}]
            }
        }
        cluster.call(
            lambda api: client.CoreV1Api(api).patch_namespaced_pod_status("templated", "default", made)
        )
        assert cluster.wait_bound(["templated"], timeout=30) == {"templated": "b"}
    finally:
        cluster.delete_all_dra()


@pytest.mark.controlplane
def test_inspect_pod_dra_allocates_a_dra_backed_extended_resource_as_the_real_scheduler_does(
    cluster: ControlPlane, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A DeviceClass naming an extended resource (``extendedResourceName``): a pod requesting
    it fits no node by NodeResourcesFit alone (none lists it allocatable), but kube-scheduler
    leaves it to DynamicResources there, which allocates it from the class's devices: only
    ``b`` publishes one, so inspect with ``--dra`` names ``b`` (``a``, the emptier,
    DynamicResources), where the real kube-scheduler binds the pod; without ``--dra``,
    NodeResourcesFit rejects both."""
    suffix = uuid.uuid4().hex[:6]
    driver, resource = f"ext-{suffix}.example.com", f"example.com/gpu-{suffix}"
    cluster.create_node("a", cpu="4", memory="16Gi")
    cluster.create_node("b", cpu="4", memory="16Gi")
    _bind(cluster, "b-fill", "b", "2", "4Gi")
    _publish_devices(cluster, "b", driver, [{"name": "dev-0"}])
    patch = {"spec": {"extendedResourceName": resource}}
    cluster.call(lambda api: client.ResourceV1Api(api).patch_device_class(driver, patch))
    pod = pod_manifest("extended", cpu="100m", memory="100Mi")
    pod["spec"]["containers"][0]["resources"]["requests"][resource] = "1"
    pod["spec"]["containers"][0]["resources"].setdefault("limits", {})[resource] = "1"
    try:
        report = _inspect_pod_dra_json(cluster, tmp_path, capsys, pod)
        judged = report["dynamic_resources"]
        assert (judged["extended_resources"], judged["cannot_allocate"]) == (
            {resource: driver},
            {"a": "cannot allocate all claims"},
        )
        assert (report["best"], {n["node"]: n["filtered_by"] for n in report["nodes"]}) == (
            ["b"],
            {"a": "DynamicResources", "b": None},
        )
        path = tmp_path / "extended.yaml"
        path.write_text(yaml.safe_dump(pod))
        argv = ["inspect", "--kubeconfig", str(cluster.kubeconfig), "--policy", "default", "--json"]
        assert main([*argv, "--pod", str(path)]) == 0
        plain = json.loads(capsys.readouterr().out)
        assert {n["node"]: n["filtered_by"] for n in plain["nodes"]} == dict.fromkeys(
            "ab", "NodeResourcesFit"
        )
        cluster.start_scheduler(scheduler_config(["default-scheduler"]))
        cluster.create_pod(pod=pod)
        assert cluster.wait_bound(["extended"], timeout=30) == {"extended": "b"}
    finally:
        cluster.delete_all_dra()


def _inspect_pod_dra_json(
    cluster: ControlPlane, tmp_path: Path, capsys: pytest.CaptureFixture[str], pod: dict
) -> dict:
    """``inspect --pod --dra --policy default --json`` of ``pod``."""
    path = tmp_path / f"{pod['metadata']['name']}-dra.yaml"
    path.write_text(yaml.safe_dump(pod))
    argv = ["inspect", "--kubeconfig", str(cluster.kubeconfig), "--policy", "default", "--json", "--dra"]
    assert main([*argv, "--pod", str(path)]) == 0
    return json.loads(capsys.readouterr().out)


def test_a_kube_system_pod_past_the_timeout_is_drainable_whatever_the_later_rules_say() -> None:
    """The autoscaler's system rule returns *drainable* for a kube-system pod without a budget
    once it is --blocking-system-pod-distruption-timeout old, and its rules stop at the first
    outcome: the later ones (not-safe-to-evict, local storage) never see that pod. Before the
    timeout, or with the rule off, they still pin it."""
    raw = pod_manifest("dns-1", namespace="kube-system", labels={"app": "dns"})
    raw["metadata"]["ownerReferences"] = [
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "o", "uid": "u", "controller": True}
    ]
    raw["spec"]["volumes"] = [{"name": "scratch", "emptyDir": {}}]
    scratch = dataclasses.replace(Pod.from_dict(raw), created=1000.0)
    raw["spec"]["volumes"] = []
    raw["metadata"]["annotations"] = {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}
    held = dataclasses.replace(Pod.from_dict(raw), created=1000.0)
    raw["metadata"]["annotations"] = {"cluster-autoscaler.kubernetes.io/safe-to-evict": "on-completion"}
    waiting = dataclasses.replace(Pod.from_dict(raw), created=1000.0)
    past, young = ScaleDownRules(now=1000.0 + 3601), ScaleDownRules(now=1000.0 + 60)
    assert scratch.local_volumes
    assert pin_reason(scratch, young) == "kube-system pod without a PodDisruptionBudget"
    assert pin_reason(scratch, past) is None
    assert pin_reason(held, past) is None
    assert pin_reason(held, young) is not None
    # without the system rule, the later rules apply
    assert pin_reason(scratch, dataclasses.replace(past, system_pods_pin=False)) == "local storage: scratch"
    assert pin_reason(held, dataclasses.replace(past, system_pods_pin=False)) == "safe-to-evict: false"
    # on-completion is an interrupting check, before the system rule: it still holds the node
    assert pin_reason(waiting, past) == "safe-to-evict: on-completion"


def test_a_pod_not_safe_to_evict_is_named_by_the_first_rule_that_blocks_it() -> None:
    """The autoscaler's blocking rules run in order (replicated, system, not-safe-to-evict,
    local storage, budget) and the first that blocks is its reason: a bare pod annotated
    ``safe-to-evict: "false"`` (z2jh's user pods) is blocked as not replicated, a young
    kube-system pod without a budget as a system pod; only a replicated pod outside
    kube-system is blocked by the annotation. ``"on-completion"`` is an interrupting check,
    before them all."""
    safe = "cluster-autoscaler.kubernetes.io/safe-to-evict"
    assert pin_reason(_pod("user", "1", "1Gi", **{safe: "false"})) == "no controller"
    assert pin_reason(_pod("w", "1", "1Gi", owner="DaskWorkerGroup", **{safe: "false"})) == (
        "controller DaskWorkerGroup"
    )
    system = dataclasses.replace(
        _pod("dns", "1", "1Gi", owner="ReplicaSet", **{safe: "false"}), namespace="kube-system"
    )
    assert pin_reason(system) == "kube-system pod without a PodDisruptionBudget"
    assert pin_reason(system, ScaleDownRules(system_pods_pin=False)) == "safe-to-evict: false"
    local = _with_volumes(
        _pod("rs", "1", "1Gi", owner="ReplicaSet"), [{"name": "s", "emptyDir": {}}], **{safe: "false"}
    )
    assert pin_reason(local) == "safe-to-evict: false"  # before local storage
    assert pin_reason(_pod("user", "1", "1Gi", **{safe: "on-completion"})) == "safe-to-evict: on-completion"


def test_a_nominated_pod_that_ended_is_neither_counted_nor_listed() -> None:
    """The autoscaler's pod lister drops Succeeded and Failed pods before it sorts the rest
    by schedulability, so a pod that ended while nominated (its activeDeadlineSeconds passed
    while pending) is no nominated pod: it is not placed, nor named in ``nominated_pods``
    (which once named it while the node's count left it out). A pod bound meanwhile and one
    being deleted are left out too."""
    from stickypack.kube.snapshot import place_nominated, snapshot_pod

    def nominated(name: str, **status: str) -> dict:
        raw = pod_manifest(name, cpu="100m", memory="100Mi")
        raw["status"] = {"phase": "Pending", "nominatedNodeName": "n1", **status}
        return snapshot_pod(raw)

    pending = {
        "default/waits": nominated("waits"),
        "default/ended": nominated("ended", phase="Failed"),
        "default/done": nominated("done", phase="Succeeded"),
        "default/bound": nominated("bound"),
        "default/leaving": nominated("leaving"),
    }
    pending["default/leaving"]["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    pending["default/odd"] = {**nominated("odd"), "status": {"phase": "Pending"}}  # no name after all
    bound = {"default/bound": {"spec": {"nodeName": "n2"}}}
    assert place_nominated(pending, bound) == ["default/waits"]
    assert sorted(bound) == ["default/bound", "default/waits"]
    assert bound["default/waits"]["spec"]["nodeName"] == "n1"
    assert bound["default/bound"] == {"spec": {"nodeName": "n2"}}
