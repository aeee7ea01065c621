"""Pod topology spread constraints (core.topologyspread): how a pod dict's constraints are
read, kube-scheduler's PodTopologySpread filter rule by rule (through PodsOnNodes, which
keeps the counts as pods move), the scale-down simulation weighing them (core.drain), and
the real kube-scheduler agreeing."""

from __future__ import annotations

import dataclasses
import math
import re
import struct
from typing import Any

import numpy as np
import pytest

from stickypack.core.drain import plan_scale_down
from stickypack.core.labels import HOSTNAME_LABEL, Taint
from stickypack.core.nodetable import NodeTable
from stickypack.core.plugins import PodTopologySpreadScore
from stickypack.core.pod import Pod, PodSpecError
from stickypack.core.podaffinity import PodsOnNodes
from stickypack.core.routing import LabelSelector
from stickypack.core.topologyspread import (
    SpreadCounts,
    default_selector,
    default_selector_kind,
    go_log,
    go_round,
    score_constraints,
    spread_scores,
)
from stickypack.policies import load_builtin
from stickypack.testing import ControlPlane, pod_manifest
from stickypack.testing.fidelity import probe_placements

GI = 1024**3
ZONE = "topology.kubernetes.io/zone"


def _constraint(
    topology_key: str = ZONE, max_skew: int = 1, when: str = "DoNotSchedule", **extra: Any
) -> dict[str, Any]:
    out = {
        "maxSkew": max_skew,
        "topologyKey": topology_key,
        "whenUnsatisfiable": when,
        "labelSelector": {"matchLabels": {"app": "web"}},
    }
    out.update(extra)
    return out


def _manifest(
    name: str,
    *,
    labels: dict[str, str] | None = None,
    spread: list[dict[str, Any]] | None = None,
    namespace: str = "default",
    cpu: str = "100m",
    owner: bool = False,
    **spec: Any,
) -> dict[str, Any]:
    raw = pod_manifest(name, cpu=cpu, memory="128Mi", labels=labels, namespace=namespace)
    if spread is not None:
        raw["spec"]["topologySpreadConstraints"] = spread
    raw["spec"].update(spec)
    if owner:
        raw["metadata"]["ownerReferences"] = [
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u", "controller": True}
        ]
    return raw


def _pod(name: str, app: str | None = "web", **kw: Any) -> Pod:
    labels = kw.pop("labels", None) or ({"app": app} if app else {})
    return Pod.from_dict(_manifest(name, labels=labels, **kw))


def _nodes(**zones: str | None) -> dict[int, dict[str, str]]:
    """Row i: node ``n<i>`` (hostname label) in the zone given (None: no zone label)."""
    return {
        i: {HOSTNAME_LABEL: name, **({ZONE: zone} if zone is not None else {})}
        for i, (name, zone) in enumerate(zones.items())
    }


def _on(labels: dict[int, dict[str, str]], *placed: tuple[int, Pod], **kw: Any) -> PodsOnNodes:
    state = PodsOnNodes(labels, **kw)
    for row, pod in placed:
        state.add(row, pod)
    return state


def _allowed(state: PodsOnNodes, pod: Pod) -> list[bool]:
    return [state.allows(pod, row) for row in sorted(state.node_labels)]


# ---- reading the pod ---------------------------------------------------------------------


def test_constraints_are_read_with_kube_schedulers_defaults() -> None:
    pod = _pod(
        "p",
        labels={"app": "web", "pod-template-hash": "abc"},
        spread=[
            _constraint(),
            _constraint(HOSTNAME_LABEL, when="ScheduleAnyway"),  # scores only: dropped
            _constraint(
                HOSTNAME_LABEL,
                max_skew=2,
                minDomains=3,
                nodeAffinityPolicy="Ignore",
                nodeTaintsPolicy="Honor",
                matchLabelKeys=["pod-template-hash", "missing"],
            ),
        ],
    )
    zone, host = pod.spread_constraints
    assert (zone.max_skew, zone.topology_key, zone.min_domains) == (1, ZONE, 1)
    assert (zone.honor_node_affinity, zone.honor_node_taints) == (True, False)
    assert (host.max_skew, host.min_domains, host.honor_node_affinity, host.honor_node_taints) == (
        2,
        3,
        False,
        True,
    )
    assert host.selector is not None
    # a key the pod lacks adds nothing
    assert [(r.key, r.operator, r.values) for r in host.selector.expressions] == [
        ("pod-template-hash", "In", ("abc",))
    ]
    assert _pod("q").spread_constraints == ()
    # the API server merges matchLabelKeys itself: merging again adds no second requirement
    merged = _constraint(
        matchLabelKeys=["h"],
        labelSelector={
            "matchLabels": {"app": "web"},
            "matchExpressions": [{"key": "h", "operator": "In", "values": ["1"]}],
        },
    )
    again = _pod("p", labels={"app": "web", "h": "1"}, spread=[merged]).spread_constraints[0]
    assert again.selector is not None and len(again.selector.expressions) == 1
    # an empty matchLabelKeys needs no labelSelector (validateLabelKeys checks a non-empty one)
    empty_keys = {k: v for k, v in _constraint(matchLabelKeys=[]).items() if k != "labelSelector"}
    assert _pod("p", spread=[empty_keys]).spread_constraints[0].selector is None
    # no labelSelector: the constraint selects no pod, not even the pod itself
    bare = {k: v for k, v in _constraint().items() if k != "labelSelector"}
    assert not _pod("p", spread=[bare]).spread_constraints[0].selects(_pod("q"))


@pytest.mark.parametrize(
    ("constraint", "where"),
    [
        ({"maxSkew": 0}, "[0].maxSkew: 0 is not a positive integer"),
        ({"maxSkew": True}, "[0].maxSkew: True"),
        ({"topologyKey": ""}, "[0].topologyKey: ''"),
        ({"topologyKey": 7}, "[0].topologyKey: 7 is not a non-empty string"),
        ({"whenUnsatisfiable": "Never"}, "[0].whenUnsatisfiable: 'Never'"),
        ({"minDomains": 0}, "[0].minDomains: 0"),
        ({"minDomains": 2, "whenUnsatisfiable": "ScheduleAnyway"}, "[0].minDomains: only with"),
        ({"nodeAffinityPolicy": "Maybe"}, "[0].nodeAffinityPolicy: 'Maybe'"),
        ({"nodeTaintsPolicy": "honor"}, "[0].nodeTaintsPolicy: 'honor'"),
        ({"matchLabelKeys": "app"}, "[0].matchLabelKeys must be a list"),
        ({"labelSelector": None, "matchLabelKeys": ["app"]}, "[0].matchLabelKeys: cannot be set without"),
        ({"labelSelector": {"matchLabels": "web"}}, "[0].labelSelector: matchLabels must be a mapping"),
    ],
)
def test_malformed_constraints_say_where(constraint: dict[str, Any], where: str) -> None:
    raw = _manifest("p", spread=[{**_constraint(), **constraint}])
    with pytest.raises(PodSpecError, match=re.escape("spec.topologySpreadConstraints" + where)):
        Pod.from_dict(raw)
    with pytest.raises(PodSpecError, match="must be a list of topology spread constraints"):
        Pod.from_dict(_manifest("p", spread=_constraint()))  # type: ignore[arg-type]


# ---- the rule, node by node ----------------------------------------------------------------


def test_skew_over_several_domains() -> None:
    """Zones z1 (two nodes), z2, z3; web pods: two in z1, one in z2, none in z3. The fewest
    is 0 (z3): with maxSkew 1 only z3 takes another; with maxSkew 2, z2 too."""
    labels = _nodes(a="z1", b="z1", c="z2", d="z3")
    state = _on(labels, (0, _pod("w1")), (1, _pod("w2")), (2, _pod("w3")), (0, _pod("other", app="db")))
    assert _allowed(state, _pod("new", spread=[_constraint()])) == [False, False, False, True]
    assert _allowed(state, _pod("new", spread=[_constraint(max_skew=2)])) == [False, False, True, True]
    # a pod its own selector does not select adds nothing to the skew: z2 (1 - 0) is fine
    outsider = _pod("new", app="api", spread=[_constraint()])
    assert _allowed(state, outsider) == [False, False, True, True]
    # by hostname: a and b hold one each, c one, d none
    assert _allowed(state, _pod("new", spread=[_constraint(HOSTNAME_LABEL)])) == [False, False, False, True]


def test_only_pods_of_the_namespace_not_terminating_count() -> None:
    labels = _nodes(a="z1", b="z2")
    deleted = _manifest("gone", labels={"app": "web"})
    deleted["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    state = _on(
        labels,
        (0, _pod("w1", namespace="team")),
        (0, Pod.from_dict(deleted)),
        (1, _pod("w2")),
    )
    # default namespace: z1 0, z2 1
    assert _allowed(state, _pod("new", spread=[_constraint()])) == [True, False]
    assert _allowed(state, _pod("new", namespace="team", spread=[_constraint()])) == [False, True]


def test_min_domains_takes_the_fewest_as_zero_while_domains_are_short() -> None:
    labels = _nodes(a="z1", b="z2")
    state = _on(labels, (0, _pod("w1")), (1, _pod("w2")))
    assert _allowed(state, _pod("new", spread=[_constraint()])) == [True, True]  # 1 + 1 - 1
    assert _allowed(state, _pod("new", spread=[_constraint(minDomains=2)])) == [True, True]
    # three domains wanted, two eligible: the fewest counts as 0, so 1 + 1 - 0 > 1 everywhere
    assert _allowed(state, _pod("new", spread=[_constraint(minDomains=3)])) == [False, False]
    assert _allowed(state, _pod("new", spread=[_constraint(max_skew=2, minDomains=3)])) == [True, True]


def test_node_affinity_policy_decides_which_domains_count() -> None:
    """z3's node is not a user node: with Honor (the default) its empty domain does not
    count for a pod selecting user nodes, with Ignore it makes the fewest 0."""
    labels = {
        0: {ZONE: "z1", "pool": "user"},
        1: {ZONE: "z2", "pool": "user"},
        2: {ZONE: "z3", "pool": "system"},
    }
    state = _on(labels, (0, _pod("w1")), (1, _pod("w2")))
    honor = _pod("new", spread=[_constraint()], nodeSelector={"pool": "user"})
    assert _allowed(state, honor)[:2] == [True, True]
    ignore = _pod("new", spread=[_constraint(nodeAffinityPolicy="Ignore")], nodeSelector={"pool": "user"})
    assert _allowed(state, ignore)[:2] == [False, False]
    # required node affinity is honored the same way (here by the node's name: matchFields)
    names = {0: "a", 1: "b", 2: "c"}
    by_name = _pod(
        "new",
        spread=[_constraint()],
        affinity={
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a", "b"]}]}
                    ]
                }
            }
        },
    )
    named = _on(labels, (0, _pod("w1")), (1, _pod("w2")), node_names=names)
    assert _allowed(named, by_name)[:2] == [True, True]


def test_node_taints_policy_decides_which_domains_count() -> None:
    """z3's node is tainted: with Ignore (the default) its empty domain counts, with Honor
    it does not, unless the pod tolerates the taint."""
    labels = _nodes(a="z1", b="z2", c="z3")
    taints = {2: (Taint("dedicated", "gpu", "NoSchedule"),)}
    state = _on(labels, (0, _pod("w1")), (1, _pod("w2")), node_taints=taints)
    assert _allowed(state, _pod("new", spread=[_constraint()]))[:2] == [False, False]
    honor = _pod("new", spread=[_constraint(nodeTaintsPolicy="Honor")])
    assert _allowed(state, honor)[:2] == [True, True]
    tolerant = _pod(
        "new",
        spread=[_constraint(nodeTaintsPolicy="Honor")],
        tolerations=[{"key": "dedicated", "operator": "Exists"}],
    )
    assert _allowed(state, tolerant)[:2] == [False, False]
    evicting = {2: (Taint("dedicated", "gpu", "NoExecute"),)}  # NoExecute counts as NoSchedule does
    evicted = _on(labels, (0, _pod("w1")), (1, _pod("w2")), node_taints=evicting)
    assert _allowed(evicted, honor)[:2] == [True, True]
    soft = {2: (Taint("dedicated", "gpu", "PreferNoSchedule"),)}  # only NoSchedule and NoExecute count
    assert _allowed(_on(labels, (0, _pod("w1")), (1, _pod("w2")), node_taints=soft), honor)[:2] == [
        False,
        False,
    ]


def test_a_node_without_the_topology_label() -> None:
    """It fails the pod, and its pods count for no domain: here a node without a zone
    label holding web pods leaves z1 and z2 even."""
    labels = _nodes(a="z1", b="z2", c=None)
    state = _on(labels, (0, _pod("w1")), (2, _pod("w2")), (2, _pod("w3")))
    assert _allowed(state, _pod("new", spread=[_constraint()])) == [False, True, False]
    # a node lacking the key of another of the pod's constraints counts for none of them
    labels = {0: {ZONE: "z1", "rack": "r1"}, 1: {ZONE: "z2", "rack": "r2"}, 2: {ZONE: "z3"}}
    both = _pod("new", spread=[_constraint(), _constraint("rack", max_skew=5)])
    state = _on(labels, (0, _pod("w1")), (1, _pod("w2")))
    assert _allowed(state, both) == [True, True, False]  # z3 is no domain: the fewest is 1


def test_match_label_keys_count_only_the_same_revision() -> None:
    labels = _nodes(a="z1", b="z2")
    old = {"app": "web", "pod-template-hash": "old"}
    new = {"app": "web", "pod-template-hash": "new"}
    state = _on(
        labels, (0, _pod("old-1", labels=old)), (0, _pod("old-2", labels=old)), (1, _pod("new-1", labels=new))
    )
    plain = _pod("new-2", labels=new, spread=[_constraint()])
    assert _allowed(state, plain) == [False, True]  # z1: 2 + 1 - 1
    keyed = _pod("new-2", labels=new, spread=[_constraint(matchLabelKeys=["pod-template-hash"])])
    assert _allowed(state, keyed) == [True, False]  # new revision: z1 0, z2 1


def test_counts_follow_the_pods_and_the_nodes() -> None:
    """The counts are built once per set of constraints and then kept as pods move; a
    drained node (the autoscaler's ghost: no pods, tainted ToBeDeleted) stays a domain,
    a deleted one does not."""
    labels = _nodes(a="z1", b="z2", c="z3")
    w1, w2, w3 = _pod("w1"), _pod("w2"), _pod("w3")
    state = _on(labels, (0, w1), (1, w2), (2, w3))
    new = _pod("new", spread=[_constraint()])
    assert _allowed(state, new) == [True, True, True]
    state.remove(2, w3)
    assert _allowed(state, new) == [False, False, True]
    held = state.drain_node(2)
    assert held == [] and state.node_taints[2][-1].key == "ToBeDeletedByClusterAutoscaler"
    assert _allowed(state, new) == [False, False, True]  # z3 still counts, at 0
    honor = _pod("new", spread=[_constraint(nodeTaintsPolicy="Honor")])
    assert _allowed(state, honor)[:2] == [True, True]  # unless the taint is honored
    state.restore_node(2, [w3])
    assert state.node_taints[2] == () and _allowed(state, new) == [True, True, True]
    state.delete_node(2)
    assert [state.allows(new, r) for r in range(3)] == [True, True, False]  # z3 is gone


def test_a_pod_the_selector_does_not_select_counts_nowhere_as_it_moves() -> None:
    """Counts kept after they were built count an arriving pod only if the constraint selects
    it (countPodsMatchSelector): a db pod joining b (z2) leaves z2 at 0, so only b takes
    another web pod (a: 1 + 1 - 0 = 2 > 1)."""
    labels = _nodes(a="z1", b="z2")
    state = _on(labels, (0, _pod("w1")))
    new = _pod("new", spread=[_constraint()])
    assert _allowed(state, new) == [False, True]
    state.add(1, _pod("db", app="db"))
    assert _allowed(state, new) == [False, True]


def test_a_constraint_without_a_label_selector_counts_no_pod() -> None:
    """No labelSelector selects nothing (a nil selector is labels.Nothing()): z1's two web
    pods do not count, every domain is at 0 and every node takes the pod."""
    labels = _nodes(a="z1", b="z2")
    state = _on(labels, (0, _pod("w1")), (0, _pod("w2")))
    bare = {k: v for k, v in _constraint().items() if k != "labelSelector"}
    assert _allowed(state, _pod("new", spread=[bare])) == [True, True]


def test_an_empty_label_selector_counts_no_pod_on_the_nodes_but_one_nominated_there() -> None:
    """``labelSelector: {}`` selects every pod, yet kube-scheduler's PreFilter counts none of
    the pods on the nodes with it (``countPodsMatchSelector`` returns 0 for an empty
    selector): a's three pods leave every domain at 0 and both nodes take the pod (it
    counts itself: 0 + 1 - 0 = 1). A pod nominated to a, which its ``AddPod`` adds, does
    count (``Selector.Matches``): a is then at 1 + 1 - 0 = 2 > 1; taken off, a is at 0."""
    labels = _nodes(a="z1", b="z2")
    state = _on(labels, (0, _pod("w1")), (0, _pod("w2")), (0, _pod("db", app="db")))
    pod = _pod("new", spread=[_constraint(labelSelector={})])
    assert _allowed(state, pod) == [True, True]
    waiting = _pod("waiting", app="other")
    state.add(0, waiting, nominated=True)
    assert _allowed(state, pod) == [False, True]
    state.remove(0, waiting, nominated=True)
    assert _allowed(state, pod) == [True, True]
    # a pod bound there (not nominated) still counts nowhere
    state.add(0, waiting)
    assert _allowed(state, pod) == [True, True]


def test_a_nominated_pod_of_another_namespace_counts_nowhere() -> None:
    """kube-scheduler's ``AddPod`` (``updateWithPod``) passes over a nominated pod of
    another namespace than the pod's, selected or not: with a web pod of ``team`` nominated
    to a, both zones stay at 0 (0 + 1 - 0 = 1); one of the pod's namespace puts a at 1 + 1."""
    labels = _nodes(a="z1", b="z2")
    state = _on(labels)
    pod = _pod("new", spread=[_constraint()])
    state.add(0, _pod("elsewhere", namespace="team"), nominated=True)
    assert _allowed(state, pod) == [True, True]
    state.add(0, _pod("here"), nominated=True)
    assert _allowed(state, pod) == [False, True]


def test_a_nominated_pod_counts_while_being_deleted_unlike_a_bound_one() -> None:
    """kube-scheduler's PreFilter passes over a terminating pod on a node; its ``AddPod``
    counts one nominated there all the same."""
    labels = _nodes(a="z1", b="z2")
    gone = _manifest("gone", labels={"app": "web"})
    gone["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    state = _on(labels, (0, Pod.from_dict(gone)))
    pod = _pod("new", spread=[_constraint()])
    assert _allowed(state, pod) == [True, True]
    state.add(0, Pod.from_dict(gone), nominated=True)
    assert _allowed(state, pod) == [False, True]


def test_counts_built_before_a_drain_follow_the_taint_and_its_removal() -> None:
    """A pod whose zone constraint honors taints (with a hostname one that does not), judged
    before the autoscaler's ghost of c is made: z3 (c) counts at 0, so a and b (one web pod
    each) are refused. Once c is drained (tainted ToBeDeleted) z3 is no eligible domain, the
    fewest is 1 and a and b take it (1 + 1 - 1 = 1); restored, z3 counts again."""
    labels = _nodes(a="z1", b="z2", c="z3")
    state = _on(labels, (0, _pod("w1")), (1, _pod("w2")))
    pod = _pod("new", spread=[_constraint(nodeTaintsPolicy="Honor"), _constraint(HOSTNAME_LABEL, max_skew=5)])
    assert _allowed(state, pod) == [False, False, True]
    held = state.drain_node(2)
    assert _allowed(state, pod) == [True, True, True]
    state.restore_node(2, held)
    assert _allowed(state, pod) == [False, False, True]


def test_refresh_moves_a_relabelled_nodes_pods_to_its_new_domain() -> None:
    """SpreadCounts.refresh reads the node's labels again and moves the pods on it: a (z1,
    one web pod) relabelled z2 leaves z1 (b) at 0 and z2 (a, c) at 1; a new web pod (maxSkew
    1) may go to b only."""
    labels = _nodes(a="z1", b="z1", c="z2")
    pods = {0: [_pod("w1")]}
    new = _pod("new", spread=[_constraint()])
    counts = SpreadCounts.build(new, labels, {}, {}, pods)
    labels[0] = {**labels[0], ZONE: "z2"}
    counts.refresh(0)
    assert [counts.judge(new)(r) for r in range(3)] == [False, True, False]


# ---- the scale-down simulation -------------------------------------------------------------


def _table(nodes: dict[str, str], cpu: int = 4000) -> NodeTable:
    table = NodeTable()
    for name, zone in nodes.items():
        table.upsert_node(
            name, {"cpu": cpu, "memory": 16 * GI, "pods": 110}, labels={HOSTNAME_LABEL: name, ZONE: zone}
        )
    return table


def _plan(table: NodeTable, pods_by_node: dict[str, list[Pod]], candidates: list[str]) -> Any:
    for name, pods in pods_by_node.items():
        for pod in pods:
            table.add_pod(table.index[name], pod)
    return plan_scale_down(table, pods_by_node, candidates, load_builtin("default").profiles[0].filters)


def test_a_zone_spread_keeps_both_half_used_nodes() -> None:
    """a (z1) and c (z2) each hold a replica, b (z1) is full. Without the constraint a's
    replica goes to c and a is removable; with it (maxSkew 1 by zone) a's replica may not
    join c's zone (z1, the candidate's, still counts, at 0), nor c's a's: both no-room."""
    for spread, removable in ((None, ("a",)), ([_constraint()], ())):
        pods = {
            "a": [_pod("web-1", spread=spread, cpu="1", owner=True)],
            "b": [_pod("alice", app="alice", cpu="4")],
            "c": [_pod("web-2", spread=spread, cpu="1", owner=True)],
        }
        plan = _plan(_table({"a": "z1", "b": "z1", "c": "z2"}), pods, ["a", "c"])
        assert plan.removable == removable
        if spread:
            assert plan.no_room == {"a": "default/web-1", "c": "default/web-2"}


def test_the_candidate_stays_a_domain_at_zero() -> None:
    """Replicas spread by hostname (maxSkew 1) on a, b and c, and an empty d. While a's
    replica moves, a (the autoscaler's tainted ghost of it) counts at 0: only d, at 0 too,
    takes it. Then b's has nowhere: b counts at 0 while c and d hold one each; so has c's."""
    spread = [_constraint(HOSTNAME_LABEL)]
    pods: dict[str, list[Pod]] = {n: [_pod(f"web-{n}", spread=spread, owner=True)] for n in ("a", "b", "c")}
    pods["d"] = []
    plan = _plan(_table({"a": "z1", "b": "z1", "c": "z1", "d": "z1"}), pods, ["a", "b", "c"])
    assert (plan.removable, plan.moves) == (("a",), {"default/web-a": "d"})
    assert plan.no_room == {"b": "default/web-b", "c": "default/web-c"}


def test_a_removed_node_leaves_the_domains() -> None:
    """a (z1) holds a database pod, b and c (z2) a replica each, spread by zone. a goes
    first (its pod moves to b); once removable it is no domain any more, so b's replica may
    join c: z2 would hold 2 with no other domain. Were a still a domain at 0, b would have no
    room (the autoscaler's simulation before kubernetes/autoscaler#8164)."""
    spread = [_constraint()]
    pods = {
        "a": [_pod("db-1", app="db", owner=True)],
        "b": [_pod("web-1", spread=spread, owner=True)],
        "c": [_pod("web-2", spread=spread, owner=True)],
    }
    plan = _plan(_table({"a": "z1", "b": "z2", "c": "z2"}), pods, ["a", "b"])
    assert plan.removable == ("a", "b") and not plan.no_room
    assert plan.moves == {"default/db-1": "c", "default/web-1": "c"}


# ---- against the real kube-scheduler --------------------------------------------------------


@pytest.mark.controlplane
def test_the_real_kube_scheduler_agrees(cluster: ControlPlane) -> None:
    """Nodes n1, n2 (zone z1, user pool), n3 (z2, user pool), n4 (z3, system pool,
    tainted) and n5 (no zone label), each roomy, with web pods bound: two on n1, one on
    n3. Each probe goes, one after the other, to kube-scheduler (its default profile): it
    binds to a node :meth:`PodsOnNodes.allows` allows among those its other filters pass
    (node selector, taints), and stays Pending where none is; a probe bound counts for the
    next ones."""
    nodes = {
        "n1": ({ZONE: "z1", "pool": "user"}, None),
        "n2": ({ZONE: "z1", "pool": "user"}, None),
        "n3": ({ZONE: "z2", "pool": "user"}, None),
        "n4": ({ZONE: "z3", "pool": "system"}, ["dedicated=system:NoSchedule"]),
        "n5": ({"pool": "user"}, None),
    }
    rows: dict[str, int] = {}
    labels: dict[int, dict[str, str]] = {}
    taints: dict[int, tuple[Taint, ...]] = {}
    for row, (name, (node_labels, node_taints)) in enumerate(nodes.items()):
        node = cluster.create_node(name, cpu="8", memory="32Gi", labels=node_labels, taints=node_taints)
        rows[name], labels[row] = row, dict(node["metadata"]["labels"])
        taints[row] = tuple(Taint.from_dict(t) for t in node["spec"].get("taints") or ())
    state = PodsOnNodes(labels, node_names={r: n for n, r in rows.items()}, node_taints=taints)
    for i, node in enumerate(("n1", "n1", "n3")):
        raw = _manifest(f"web-{i}", labels={"app": "web"})
        raw["spec"]["nodeName"] = node
        cluster.create_pod(pod=raw)
        state.add(rows[node], Pod.from_dict(raw))

    def other_filters(pod: Pod) -> set[str]:
        """The nodes the probe's node selector lets it onto, but n4, whose taint no probe
        tolerates."""
        return {
            node
            for node, (node_labels, node_taints) in nodes.items()
            if not node_taints and all(node_labels.get(k) == v for k, v in pod.node_selector.items())
        }

    user = {"pool": "user"}
    web, user = {"app": "web"}, {"pool": "user"}
    probes = [
        # z1 2, z2 1, z3 0 (n4: tainted, counted by default): the fewest is 0, and z3's only
        # node takes no probe: nowhere (n5 lacks the zone label)
        ("even", _manifest("even", labels=web, spread=[_constraint()]), set()),
        # taints honored: z3 is out, the fewest is 1: z2
        (
            "honor-taints",
            _manifest("honor-taints", labels=web, spread=[_constraint(nodeTaintsPolicy="Honor")]),
            {"n3"},
        ),
        # user pods (node affinity honored): z3 is not theirs, z1 2 and z2 2 now
        (
            "user",
            _manifest("user", labels=web, spread=[_constraint()], nodeSelector=user),
            {"n1", "n2", "n3"},
        ),
        # node affinity ignored: z3 counts again, at 0
        (
            "ignore-affinity",
            _manifest(
                "ignore-affinity",
                labels=web,
                spread=[_constraint(nodeAffinityPolicy="Ignore")],
                nodeSelector=user,
            ),
            set(),
        ),
        # three domains wanted, two user zones: the fewest is taken as 0
        (
            "min-domains",
            _manifest("min-domains", labels=web, spread=[_constraint(minDomains=3)], nodeSelector=user),
            set(),
        ),
        # a new revision counts its own pods only (matchLabelKeys): none anywhere yet
        (
            "new-revision",
            _manifest(
                "new-revision",
                labels={**web, "rev": "b"},
                spread=[_constraint(matchLabelKeys=["rev"])],
                nodeSelector=user,
            ),
            {"n1", "n2", "n3"},
        ),
        # by hostname (n5 counts: it has one), maxSkew 2
        (
            "by-host",
            _manifest(
                "by-host", labels=web, spread=[_constraint(HOSTNAME_LABEL, max_skew=2)], nodeSelector=user
            ),
            None,
        ),
        # ScheduleAnyway filters nothing
        (
            "anyway",
            _manifest("anyway", labels=web, spread=[_constraint(when="ScheduleAnyway")], nodeSelector=user),
            {"n1", "n2", "n3", "n5"},
        ),
    ]
    cluster.start_scheduler(None)

    def allowed(probe: Pod) -> set[str]:
        return {n for n in other_filters(probe) if state.allows(probe, rows[n])}

    probe_placements(cluster, probes, allowed, lambda _, probe, node: state.add(rows[node], probe))


def test_the_inspect_snapshot_keeps_constraints_and_claims() -> None:
    """``inspect`` slims each pod as it lists them: the spread constraints and the claims
    (of an ephemeral volume, that it is one) survive."""
    from stickypack.kube.snapshot import snapshot_pod

    raw = _manifest("hub", labels={"app": "web", "h": "1"}, spread=[_constraint(matchLabelKeys=["h"])])
    template = {"volumeClaimTemplate": {"spec": {"resources": {"requests": {"storage": "1Gi"}}}}}
    raw["spec"]["volumes"] = [
        {"name": "db", "persistentVolumeClaim": {"claimName": "hub-db", "readOnly": False}},
        {"name": "scratch", "ephemeral": template},
        {"name": "config", "configMap": {"name": "hub"}},
    ]
    raw["spec"]["nodeName"] = "n1"
    slim = snapshot_pod(raw)
    assert [v["name"] for v in slim["spec"]["volumes"]] == ["db", "scratch"]
    full, kept = Pod.from_dict(raw), Pod.from_dict(slim)
    assert kept.spread_constraints == full.spread_constraints and kept.claims == full.claims
    assert kept.claims == ("hub-db", "hub-scratch")
    assert kept.ephemeral_claims == full.ephemeral_claims == ("hub-scratch",)  # VolumeZone skips it


# ---- the score (kube-scheduler's scoring.go) -----------------------------------------------


def _scores(
    pod: Pod,
    labels: dict[int, dict[str, str]],
    *placed: tuple[int, Pod],
    rows: list[int] | None = None,
    taints: dict[int, tuple[Taint, ...]] | None = None,
) -> list[int]:
    pods: dict[int, list[Pod]] = {}
    for row, other in placed:
        pods.setdefault(row, []).append(other)
    names = {row: node[HOSTNAME_LABEL] for row, node in labels.items() if HOSTNAME_LABEL in node}
    feasible = sorted(labels) if rows is None else rows
    return spread_scores(pod, feasible, labels, pods, names, taints or {})


def test_go_log_and_round_are_gos() -> None:
    # math.Log(3) in Go 1.26 on amd64 is 0x3ff193ea7aad030a, one bit under the C library's
    assert struct.pack(">d", go_log(3.0)).hex() == "3ff193ea7aad030a"
    assert go_log(3.0) != math.log(3.0)
    # within an ulp of the exact value everywhere PodTopologySpread takes it (sizes + 2)
    assert all(abs(go_log(float(n)) - math.log(n)) <= math.ulp(math.log(n)) for n in range(2, 5002))
    # half away from zero, not half to even
    assert [go_round(x) for x in (0.5, 1.5, 2.5, 2.4999999999999996, 3.0)] == [1, 2, 3, 2, 3]


def test_schedule_anyway_constraints_are_read_apart_from_do_not_schedule() -> None:
    pod = _pod(
        "p",
        spread=[
            _constraint(),
            _constraint(HOSTNAME_LABEL, max_skew=2, when="ScheduleAnyway", nodeTaintsPolicy="Honor"),
        ],
    )
    (zone,) = pod.spread_constraints
    (host,) = pod.soft_spread_constraints
    assert (zone.topology_key, host.topology_key, host.max_skew, host.honor_node_taints) == (
        ZONE,
        HOSTNAME_LABEL,
        2,
        True,
    )
    # a DoNotSchedule constraint alone: the pod has constraints, none to score, no default
    only_hard = _pod("q", spread=[_constraint()])
    assert only_hard.soft_spread_constraints == () and score_constraints(only_hard) == ((), True)


def test_zone_score_counts_the_domains_pods() -> None:
    """Zone a (n0, n1) holds two web pods, zone b (n2) none: weight log(2 domains + 2) =
    1.386; raw scores round(2 * 1.386 + 0) = 3, 3 and 0; normalized 100 * (3 + 0 - s) // 3."""
    pod = _pod("p", spread=[_constraint(when="ScheduleAnyway")])
    labels = _nodes(n0="a", n1="a", n2="b")
    web = _pod("w")
    assert _scores(pod, labels, (0, web), (1, web)) == [0, 0, 100]
    # no pod selected anywhere: every raw score is maxSkew - 1 = 0, so every node 100
    assert _scores(pod, labels, (0, _pod("x", app="db"))) == [100, 100, 100]


def test_hostname_score_counts_each_nodes_own_pods() -> None:
    """maxSkew 2 on the hostname: weight log(3 scored nodes + 2) = 1.609; raw
    round(2 * 1.609 + 1) = 4, round(1.609 + 1) = 3, 1; normalized 100 * (4 + 1 - s) // 4."""
    pod = _pod("p", spread=[_constraint(HOSTNAME_LABEL, max_skew=2, when="ScheduleAnyway")])
    labels = _nodes(n0="a", n1="a", n2="b")
    web = _pod("w")
    assert _scores(pod, labels, (0, web), (0, web), (1, web)) == [25, 50, 100]


def test_a_node_lacking_a_key_is_ignored_and_its_pods_uncounted() -> None:
    """The pod's own constraints need every key: n3 (no zone) scores 0, and its web pods
    count nowhere; zones a (1 pod) and b (0): raw 1 and 0, so 0 and 100."""
    pod = _pod("p", spread=[_constraint(when="ScheduleAnyway")])
    labels = _nodes(n0="a", n1="b", n3=None)
    web = _pod("w")
    assert _scores(pod, labels, (0, web), (2, web), (2, web)) == [0, 100, 0]
    # a key no label can have (the API server takes any non-empty string): every node ignored
    odd = _pod("p", spread=[_constraint("rack name", when="ScheduleAnyway")])
    assert _scores(odd, labels, (0, web), (2, web)) == [0, 0, 0]


def test_system_defaults_spread_by_the_default_selector() -> None:
    """No constraints of its own: hostname (maxSkew 3) and zone (maxSkew 5) with the default
    selector, and no key required. n2 has no zone: it is scored (hostname only) and makes
    a domain "" of the zone (2 domains: weight log 4 = 1.386; hostname log 5 = 1.609).
    Web pods: n0 1, n1 0, n2 2. Raw: n0 round(1.609 + 2 + 1.386 + 4) = 9, n1 round(2 +
    1.386 + 4) = 7, n2 round(2 * 1.609 + 2) = 5; normalized 100 * (9 + 5 - s) // 9."""
    labels = _nodes(n0="a", n1="a", n2=None)
    web = _pod("w")
    bare = _pod("p")
    assert score_constraints(bare) == ((), False)  # no default selector: skipped
    assert PodTopologySpreadScore().skip(bare)
    pod = dataclasses.replace(bare, default_spread_selector=LabelSelector({"app": "web"}))
    host, zone = score_constraints(pod)[0]
    assert (host.topology_key, host.max_skew, zone.topology_key, zone.max_skew) == (
        HOSTNAME_LABEL,
        3,
        ZONE,
        5,
    )
    assert not PodTopologySpreadScore().skip(pod)
    assert _scores(pod, labels, (0, web), (2, web), (2, web)) == [55, 77, 100]
    # an empty default selector selects nothing: skipped, as kube-scheduler's selector.Empty()
    assert score_constraints(dataclasses.replace(bare, default_spread_selector=LabelSelector())) == (
        (),
        False,
    )


def test_the_hostname_weight_counts_the_feasible_nodes_not_ignored() -> None:
    """The hostname constraint's weight is log(feasible nodes not ignored + 2): n2 (no zone)
    is ignored, so log(2 + 2) = 1.386, not log(5); the zone's log(1 domain + 2) = 1.099.
    Web pods: three on n0. Raw n0 round(3 * 1.386 + 3 * 1.099) = round(7.455) = 7 (with
    log 5 it would be round(8.124) = 8), n1 round(3 * 1.099) = 3; normalized
    100 * (7 + 3 - s) // 7: 42, 100; n2 0."""
    soft = [_constraint(HOSTNAME_LABEL, when="ScheduleAnyway"), _constraint(when="ScheduleAnyway")]
    pod = _pod("p", spread=soft)
    web = _pod("w")
    assert _scores(pod, _nodes(n0="a", n1="a", n2=None), (0, web), (0, web), (0, web)) == [42, 100, 0]


def test_a_node_lacking_one_key_counts_for_no_constraint() -> None:
    """Constraints on the zone and on ``rack``: n2 (zone b, no rack) lacks a key, so it is
    ignored and its three web pods count in no domain, the zone's either (kube-scheduler's
    PreScore passes over every node without all the keys). Zone a 1, b 0 (weight log 4 =
    1.386), rack r1 1 (log 3 = 1.099): raw n0 round(1.386 + 1.099) = 2, n1 round(1.099) = 1;
    normalized 100 * (2 + 1 - s) // 2: 50, 100; n2 0."""
    soft = [_constraint(when="ScheduleAnyway"), _constraint("rack", when="ScheduleAnyway")]
    labels = {
        0: {HOSTNAME_LABEL: "n0", ZONE: "a", "rack": "r1"},
        1: {HOSTNAME_LABEL: "n1", ZONE: "b", "rack": "r1"},
        2: {HOSTNAME_LABEL: "n2", ZONE: "b"},
    }
    web = _pod("w")
    assert _scores(_pod("p", spread=soft), labels, (0, web), (2, web), (2, web), (2, web)) == [50, 100, 0]


def test_inclusion_policies_decide_which_nodes_pods_count() -> None:
    """n2 (zone b, pool y, three web pods) is not feasible for a pod of pool x. Honoring its
    node affinity (the default) n2's pods count nowhere: a 1 (raw 1), b 0 (raw 0): 0 and
    100. Ignoring it: b 3, raw round(3 * 1.386) = 4: n0 100 * (4 + 1 - 1) // 4 = 100, n1 25.
    A NoSchedule taint on n2 does the same with nodeTaintsPolicy Honor."""
    labels = {
        0: {HOSTNAME_LABEL: "n0", ZONE: "a", "pool": "x"},
        1: {HOSTNAME_LABEL: "n1", ZONE: "b", "pool": "x"},
        2: {HOSTNAME_LABEL: "n2", ZONE: "b", "pool": "y"},
    }
    web = _pod("w")
    placed = ((0, web), (2, web), (2, web), (2, web))
    honor = _pod("p", spread=[_constraint(when="ScheduleAnyway")], nodeSelector={"pool": "x"})
    ignore = _pod(
        "p",
        spread=[_constraint(when="ScheduleAnyway", nodeAffinityPolicy="Ignore")],
        nodeSelector={"pool": "x"},
    )
    assert _scores(honor, labels, *placed, rows=[0, 1]) == [0, 100]
    assert _scores(ignore, labels, *placed, rows=[0, 1]) == [100, 25]
    tainted = {2: (Taint("dedicated", "system", "NoSchedule"),)}
    anywhere = [_constraint(when="ScheduleAnyway", nodeTaintsPolicy="Honor")]
    assert _scores(_pod("p", spread=anywhere), labels, *placed, rows=[0, 1], taints=tainted) == [0, 100]
    assert _scores(
        _pod("p", spread=[_constraint(when="ScheduleAnyway")]), labels, *placed, rows=[0, 1], taints=tainted
    ) == [100, 25]


def test_only_selected_pods_of_the_namespace_not_terminating_count() -> None:
    pod = _pod("p", spread=[_constraint(HOSTNAME_LABEL, when="ScheduleAnyway")])
    labels = _nodes(n0="a", n1="a")
    others = _pod("o", namespace="other")
    leaving = dataclasses.replace(_pod("l"), deleted=1.0)
    assert _scores(pod, labels, (0, others), (0, leaving), (0, _pod("d", app="db"))) == [100, 100]
    assert _scores(pod, labels, (0, _pod("w"))) == [0, 100]
    # an empty labelSelector counts no pod (countPodsMatchSelector: selector.Empty())
    empty = _pod("p", spread=[_constraint(HOSTNAME_LABEL, when="ScheduleAnyway", labelSelector={})])
    assert _scores(empty, labels, (0, _pod("w"))) == [100, 100]


def test_the_node_affinity_policy_reads_a_nodes_name_for_match_fields() -> None:
    """nodeAffinityPolicy Honor with a required ``matchFields`` term on ``metadata.name``
    (NotIn n2): n2 (zone b, three web pods) does not match by its name, so its pods count
    nowhere: a 1, b 0, raw 1 and 0 -> 0, 100 (counted, b 3: 100, 25)."""
    labels = {
        0: {HOSTNAME_LABEL: "n0", ZONE: "a"},
        1: {HOSTNAME_LABEL: "n1", ZONE: "b"},
        2: {HOSTNAME_LABEL: "n2", ZONE: "b"},
    }
    not_n2 = {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n2"]}]}
    required = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [not_n2]}}
    pod = _pod("p", spread=[_constraint(when="ScheduleAnyway")], affinity={"nodeAffinity": required})
    web = _pod("w")
    assert _scores(pod, labels, (0, web), (2, web), (2, web), (2, web), rows=[0, 1]) == [0, 100]


def test_a_zone_label_of_the_empty_string_shares_its_domain_with_nodes_without_one() -> None:
    """The system defaults (no key required): a node without the zone label is in the zone
    domain "" (Go's ``node.Labels[key]``), with its pods, and a node whose zone label is the
    empty string is scored in that domain. n2 (no zone) holds two web pods; zone "" (n0,
    n2) 2, a (n1) 0, weight log(2 + 2) = 1.386; hostname log(3 + 2) = 1.609. Raw n0 round(2
    + 2 * 1.386 + 4) = 9, n1 round(2 + 4) = 6, n2 round(2 * 1.609 + 2) = 5 (no zone label:
    hostname only); normalized 100 * (9 + 5 - s) // 9: 55, 88, 100."""
    labels = {
        0: {HOSTNAME_LABEL: "n0", ZONE: ""},
        1: {HOSTNAME_LABEL: "n1", ZONE: "a"},
        2: {HOSTNAME_LABEL: "n2"},
    }
    pod = dataclasses.replace(_pod("p"), default_spread_selector=LabelSelector({"app": "web"}))
    web = _pod("w")
    assert _scores(pod, labels, (2, web), (2, web)) == [55, 88, 100]


def test_the_scorer_passes_the_nodes_taints_of_the_pods_on_the_nodes() -> None:
    """``PodTopologySpreadScore`` given the pods on the nodes honors their nodes' taints as
    :func:`spread_scores` does (see the inclusion policies' test): n2's NoSchedule taint
    keeps its three web pods out of zone b with ``nodeTaintsPolicy: Honor``, so n0 (zone a,
    one) and n1 score 0 and 100, not 100 and 25."""
    from stickypack.core.framework import SchedulingContext

    labels = {
        0: {HOSTNAME_LABEL: "n0", ZONE: "a"},
        1: {HOSTNAME_LABEL: "n1", ZONE: "b"},
        2: {HOSTNAME_LABEL: "n2", ZONE: "b"},
    }
    tainted = {2: (Taint("dedicated", "system", "NoSchedule"),)}
    table = NodeTable()
    for row, node in labels.items():
        allocatable = {"cpu": 4000, "memory": 16 * GI, "pods": 110}
        taints = tainted.get(row, ())
        assert table.upsert_node(node[HOSTNAME_LABEL], allocatable, labels=node, taints=taints) == row
    names = {row: node[HOSTNAME_LABEL] for row, node in labels.items()}
    state = PodsOnNodes(labels, None, names, tainted)
    web = _pod("w")
    for row in (0, 2, 2, 2):
        state.add(row, web)
    pod = _pod("p", spread=[_constraint(when="ScheduleAnyway", nodeTaintsPolicy="Honor")])
    ctx = SchedulingContext(pods_on_nodes=state)
    assert PodTopologySpreadScore().score(pod, table, np.array([0, 1]), ctx).tolist() == [0, 100]


def test_the_default_policy_scores_it_and_the_simulators_pods_skip_it() -> None:
    for name in ("default", "binderhub", "z2jh"):
        for profile in load_builtin(name).profiles:  # z2jh's user-scheduler keeps it at 2 too
            weights = {s.plugin.name: s.weight for s in profile.scorers}
            assert weights["PodTopologySpread"] == 2, (name, profile.name)
    scorer = PodTopologySpreadScore()
    assert scorer.skip(_pod("plain"))
    assert scorer.skip(_pod("hard", spread=[_constraint()]))
    assert not scorer.skip(_pod("soft", spread=[_constraint(when="ScheduleAnyway")]))


def test_the_default_selector_merges_services_and_the_controllers() -> None:
    """``DefaultSelector``: the Services selecting the pod (not those that do not, nor one
    with no selector) merged; a ReplicaSet's selector ANDed; a ReplicationController's map
    merged; nothing selected: None."""
    labels = {"app": "web", "tier": "front", "h": "1"}
    services = [{"app": "web"}, {"tier": "front"}, {"app": "db"}, None]
    selector = default_selector(labels, services)
    assert selector is not None and dict(selector.match_labels) == {"app": "web", "tier": "front"}
    assert not selector.expressions
    with_rs = default_selector(labels, services, "ReplicaSet", {"matchLabels": {"h": "1"}})
    assert with_rs is not None and with_rs.matches(labels) and not with_rs.matches({**labels, "h": "2"})
    assert [(r.key, r.operator, r.values) for r in with_rs.expressions] == [("h", "In", ("1",))]
    rc = default_selector(labels, [], "ReplicationController", {"h": "1"})
    assert rc is not None and dict(rc.match_labels) == {"h": "1"}
    assert default_selector(labels, [{"app": "db"}]) is None
    assert default_selector(labels, [], "Job", {"matchLabels": {"h": "1"}}) is None  # not a kind it reads
    assert default_selector(labels, [], "StatefulSet", {"matchLabels": "bad"}) is None  # unparsable: nothing


def test_the_default_selector_takes_whole_service_selectors_and_keeps_them_with_the_controllers() -> None:
    """A Service selects the pod only when all of its selector matches (``GetPodServices``):
    one matching ``app`` but not ``tier`` adds nothing. A ReplicationController's map is
    merged into the Services' (both kept); a ReplicaSet's ``matchExpressions`` are ANDed as
    its ``matchLabels`` are."""
    labels = {"app": "web", "tier": "front", "h": "1"}
    assert default_selector(labels, [{"app": "web", "tier": "back"}]) is None
    rc = default_selector(labels, [{"app": "web"}], "ReplicationController", {"h": "1"})
    assert rc is not None and dict(rc.match_labels) == {"app": "web", "h": "1"}
    not_back = {"key": "tier", "operator": "NotIn", "values": ["back"]}
    rs_selector = {"matchLabels": {"h": "1"}, "matchExpressions": [not_back]}
    rs = default_selector(labels, [{"app": "web"}], "ReplicaSet", rs_selector)
    assert rs is not None and rs.matches(labels)
    assert not rs.matches({**labels, "tier": "back"}) and not rs.matches({**labels, "app": "db"})
    # a StatefulSet's selector is ANDed as a ReplicaSet's; one it cannot parse adds nothing,
    # the Services' selector stays
    ss = default_selector(labels, [{"app": "web"}], "StatefulSet", rs_selector)
    assert ss is not None and ss.matches(labels) and not ss.matches({**labels, "h": "2"})
    bad = default_selector(labels, [{"app": "web"}], "StatefulSet", {"matchLabels": "bad"})
    assert bad is not None and dict(bad.match_labels) == {"app": "web"} and not bad.expressions


def test_the_default_selector_reads_only_controllers_of_v1_and_apps_v1() -> None:
    """``DefaultSelector`` compares the controller reference's parsed group, version and kind
    with ``v1`` ReplicationController, ``apps/v1`` ReplicaSet and StatefulSet: another
    version, group or kind, or an ``apiVersion`` Go cannot parse, names none."""
    read = {
        ("v1", "ReplicationController"): "ReplicationController",
        ("/v1", "ReplicationController"): "ReplicationController",  # ParseGroupVersion: group ""
        ("apps/v1", "ReplicaSet"): "ReplicaSet",
        ("apps/v1", "StatefulSet"): "StatefulSet",
        ("apps/v1beta2", "ReplicaSet"): None,
        ("extensions/v1beta1", "ReplicaSet"): None,
        ("core/v1", "ReplicationController"): None,
        ("apps/v1", "ReplicationController"): None,
        ("apps/v1", "DaemonSet"): None,
        ("batch/v1", "Job"): None,
        ("a/apps/v1", "ReplicaSet"): None,
        ("", "ReplicaSet"): None,
        (None, "ReplicaSet"): None,
        ("apps/v1", None): None,
    }
    assert {case: default_selector_kind(*case) for case in read} == read
    # the pod keeps its controller reference's apiVersion as written
    raw = _manifest("p", labels={"app": "web"})
    ref = {"apiVersion": "apps/v1beta2", "kind": "ReplicaSet", "name": "rs", "uid": "u", "controller": True}
    raw["metadata"]["ownerReferences"] = [ref]
    owned = Pod.from_dict(raw)
    assert (owned.owner_group, owned.owner_api_version) == ("apps", "apps/v1beta2")
    assert default_selector_kind(owned.owner_api_version, owned.owner_kind) is None
