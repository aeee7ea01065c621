"""Where a pod's persistent volumes let it run (core.volumes): kube-scheduler's VolumeBinding
(a bound PersistentVolume's required node affinity) and VolumeZone (its zone and region
labels) rules, the claims read from listed objects, the scale-down simulation weighing them
(core.drain), and the real kube-scheduler agreeing."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from stickypack.core.drain import plan_scale_down
from stickypack.core.framework import SchedulingContext
from stickypack.core.labels import HOSTNAME_LABEL
from stickypack.core.nodetable import NodeTable
from stickypack.core.pod import Pod, PodSpecError
from stickypack.core.volumes import (
    PersistentVolumesFilter,
    VolumePlacement,
    claim_volumes,
)
from stickypack.policies import load_builtin
from stickypack.testing import ControlPlane, pod_manifest

GI = 1024**3
ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
BETA_REGION = "failure-domain.beta.kubernetes.io/region"


def _terms(key: str, *values: str, operator: str = "In") -> list[dict[str, Any]]:
    return [{"matchExpressions": [{"key": key, "operator": operator, "values": list(values)}]}]


def _volume(name: str, terms: list[dict[str, Any]] | None = None, **labels: str) -> dict[str, Any]:
    spec: dict[str, Any] = {"hostPath": {"path": "/x"}}
    if terms is not None:
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": terms}}
    return {"metadata": {"name": name, "labels": labels}, "spec": spec}


def _claim(
    name: str, volume: str | None, namespace: str = "default", deleted: bool = False
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if deleted:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta, "spec": {"volumeName": volume}}


def _manifest(name: str, *claims: str, cpu: str = "100m", owner: bool = False) -> dict[str, Any]:
    raw = pod_manifest(name, cpu=cpu, memory="128Mi")
    raw["spec"]["volumes"] = [
        {"name": f"v{i}", "persistentVolumeClaim": {"claimName": claim}} for i, claim in enumerate(claims)
    ]
    if owner:
        raw["metadata"]["ownerReferences"] = [
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u", "controller": True}
        ]
    return raw


def _pod(name: str, *claims: str, **kw: Any) -> Pod:
    return Pod.from_dict(_manifest(name, *claims, **kw))


# ---- reading ------------------------------------------------------------------------------


def test_a_pod_names_its_claims() -> None:
    raw = _manifest("hub", "hub-db")
    raw["spec"]["volumes"] += [
        {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}},  # claim hub-scratch
        {"name": "cache", "emptyDir": {}},
    ]
    assert Pod.from_dict(raw).claims == ("hub-db", "hub-scratch")
    bad = _manifest("p")
    bad["spec"]["volumes"] = [{"name": "v", "persistentVolumeClaim": {}}]
    with pytest.raises(PodSpecError, match=r"spec\.volumes\[0\]\.persistentVolumeClaim\.claimName: None"):
        Pod.from_dict(bad)


def test_an_empty_claim_name_is_refused_naming_the_field() -> None:
    """``persistentVolumeClaim.claimName: ""`` names no claim (the API server requires one):
    an error naming the field, as for a missing one."""
    bad = _manifest("p")
    bad["spec"]["volumes"] = [{"name": "v", "persistentVolumeClaim": {"claimName": ""}}]
    with pytest.raises(PodSpecError, match=r"spec\.volumes\[0\]\.persistentVolumeClaim\.claimName: ''"):
        Pod.from_dict(bad)


def test_claims_map_to_their_volumes_placement() -> None:
    volumes = [_volume("pv-a", _terms(ZONE, "z1")), _volume("pv-b", None, **{ZONE: "z2"})]
    claims = [
        _claim("a", "pv-a"),
        _claim("b", "pv-b", namespace="team"),
        _claim("lost", "pv-gone"),  # bound to a volume that does not exist
        _claim("going", "pv-a", deleted=True),  # being deleted: kube-scheduler refuses it
        _claim("waiting", None),  # not bound yet: binding is not modelled, no constraint
    ]
    found = claim_volumes(claims, volumes)
    a, b = found[("default", "a")], found[("team", "b")]
    assert a is not None and a.name == "pv-a" and a.node_terms is not None and a.zones == ()
    assert b is not None and b.node_terms is None and b.zones == ((ZONE, ZONE, frozenset({"z2"})),)
    assert found[("default", "lost")] is None and found[("default", "going")] is None
    waiting = found[("default", "waiting")]
    assert waiting is not None and waiting.allows({}) and waiting.allows({ZONE: "z9"})


# ---- the rules, node by node ---------------------------------------------------------------


def test_volume_node_affinity() -> None:
    pv = VolumePlacement.from_dict(_volume("pv", _terms(ZONE, "z1") + _terms("disk", operator="Exists")))
    assert pv.allows({ZONE: "z1"}) and pv.allows({"disk": "ssd"})  # terms ORed
    assert not pv.allows({ZONE: "z2"}) and not pv.allows({})
    # kube's CheckNodeAffinity sees the node's labels alone: a term on its name matches none
    by_name = [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]
    assert not VolumePlacement.from_dict(_volume("pv", by_name)).allows({HOSTNAME_LABEL: "n1"})
    unusable = VolumePlacement.from_dict(_volume("pv", _terms(ZONE, operator="In")))  # In without values
    assert not unusable.allows({ZONE: "z1"})
    assert VolumePlacement.from_dict(_volume("pv")).allows({})  # no node affinity: anywhere


def test_volume_zone_labels() -> None:
    multi = VolumePlacement.from_dict(_volume("pv", None, **{ZONE: "z1__z2", REGION: "r1"}))
    assert multi.allows({ZONE: "z2", REGION: "r1"})
    assert not multi.allows({ZONE: "z3", REGION: "r1"}) and not multi.allows({ZONE: "z1", REGION: "r2"})
    assert not multi.allows({ZONE: "z1"})  # the node lacks the region label the volume names
    assert multi.allows({"pool": "user"})  # a node without zone or region labels: any volume
    # a volume's deprecated beta label matches a node's GA label, and its own
    beta = VolumePlacement.from_dict(_volume("pv", None, **{BETA_ZONE: "z1"}))
    assert beta.allows({ZONE: "z1"}) and beta.allows({BETA_ZONE: "z1"}) and not beta.allows({ZONE: "z2"})
    # a GA label on the volume does not match a node's beta label
    assert not multi.allows({BETA_ZONE: "z1", REGION: "r1"})
    # a zone list with an empty entry is left out, as kube-scheduler leaves it out
    assert VolumePlacement.from_dict(_volume("pv", None, **{ZONE: "z1__"})).zones == ()


def test_the_filter_reads_the_pods_claims() -> None:
    table = NodeTable()
    for name, zone in (("a", "z1"), ("b", "z2")):
        table.upsert_node(name, {"cpu": 4000, "memory": 16 * GI, "pods": 110}, labels={ZONE: zone})
    found = claim_volumes(
        [_claim("data", "pv"), _claim("lost", "gone"), _claim("free", None)],
        [_volume("pv", _terms(ZONE, "z1"))],
    )
    plugin = PersistentVolumesFilter(found)
    rows = np.array([0, 1])

    def passes(pod: Pod) -> list[bool]:
        return plugin.filter(pod, table, rows, SchedulingContext()).tolist()

    assert passes(_pod("p")) == [True, True]
    assert passes(_pod("p", "data")) == [True, False]
    assert passes(_pod("p", "free")) == [True, True]
    assert passes(_pod("p", "lost")) == [False, False]  # bound to a volume that does not exist
    assert passes(_pod("p", "unknown")) == [False, False]  # no such claim: unschedulable
    other = Pod.from_dict({**_manifest("p", "data"), "metadata": {"name": "p", "namespace": "team"}})
    assert passes(other) == [False, False]  # claims are looked up in the pod's namespace


def test_volume_zone_reads_persistent_volume_claim_volumes_only() -> None:
    """kube-scheduler's VolumeZone looks up the claims of ``persistentVolumeClaim`` volumes
    alone: a generic ephemeral volume's bound volume is held to its node affinity
    (VolumeBinding) but not to its zone labels."""
    table = NodeTable()
    for name, zone in (("a", "z1"), ("b", "z2")):
        table.upsert_node(name, {"cpu": 4000, "memory": 16 * GI, "pods": 110}, labels={ZONE: zone})
    found = claim_volumes(
        [_claim("p-scratch", "pv-zone"), _claim("p-pinned", "pv-affinity"), _claim("data", "pv-zone")],
        [_volume("pv-zone", None, **{ZONE: "z1"}), _volume("pv-affinity", _terms(ZONE, "z1"))],
    )
    plugin = PersistentVolumesFilter(found)
    rows = np.array([0, 1])
    raw = _manifest("p")
    raw["spec"]["volumes"] = [{"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}]
    ephemeral = Pod.from_dict(raw)
    assert ephemeral.claims == ("p-scratch",)
    assert plugin.filter(ephemeral, table, rows, SchedulingContext()).tolist() == [True, True]
    raw["spec"]["volumes"] = [{"name": "pinned", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}]
    assert plugin.filter(Pod.from_dict(raw), table, rows, SchedulingContext()).tolist() == [True, False]
    claimed = _pod("p", "data")  # the same kind of volume through a persistentVolumeClaim volume
    assert plugin.filter(claimed, table, rows, SchedulingContext()).tolist() == [True, False]


def test_volume_node_affinity_that_cannot_be_read_or_has_no_terms_matches_no_node() -> None:
    """Terms that do not parse (a ``matchExpressions`` that is not a list) match no node,
    and so does a required node affinity without terms: kube's ``CheckNodeAffinity``
    (component-helpers/storage/volume) matches a node against the required terms only
    when ``required`` is set, and no term matches it."""
    unreadable = VolumePlacement.from_dict(_volume("pv", [{"matchExpressions": 5}]))
    assert not unreadable.allows({ZONE: "z1"}) and not unreadable.allows({})
    no_terms = _volume("pv")
    no_terms["spec"]["nodeAffinity"] = {"required": {}}
    assert not VolumePlacement.from_dict(no_terms).allows({ZONE: "z1"})


def test_volume_zone_reads_the_nodes_own_label_before_its_ga_successor() -> None:
    """As kube-scheduler's VolumeZone (plugins/volumezone/volume_zone.go, Filter): the node's
    value of the PV's label itself, and only when the node lacks it the GA label
    (``translateToGALabel``), for zones and regions alike. A PV of beta zone z1: a node
    labelled beta z1 and GA z2 passes, beta z2 and GA z1 does not; a PV of beta region r1
    passes a node of GA region r1 and fails one of GA region r2."""
    beta = VolumePlacement.from_dict(_volume("pv", None, **{BETA_ZONE: "z1"}))
    assert beta.allows({BETA_ZONE: "z1", ZONE: "z2"})
    assert not beta.allows({BETA_ZONE: "z2", ZONE: "z1"})
    region = VolumePlacement.from_dict(_volume("pv", None, **{BETA_REGION: "r1"}))
    assert region.allows({REGION: "r1"}) and not region.allows({REGION: "r2"})


def test_every_claim_of_the_pod_must_allow_the_node() -> None:
    """Nodes a (z1) and b (z2). A pod whose claims are bound to a z1 volume and a z2 volume
    fits neither node; one whose second claim does not exist fits none, whatever its
    first allows; a generic ephemeral volume's PV with node affinity (both nodes) and a
    zone label (z1) is held to its node affinity alone: both nodes."""
    table = NodeTable()
    for name, zone in (("a", "z1"), ("b", "z2")):
        table.upsert_node(name, {"cpu": 4000, "memory": 16 * GI, "pods": 110}, labels={ZONE: zone})
    both_zones = _terms(ZONE, "z1", "z2")
    found = claim_volumes(
        [_claim("one", "pv-1"), _claim("two", "pv-2"), _claim("free", None), _claim("p-scratch", "pv-both")],
        [
            _volume("pv-1", None, **{ZONE: "z1"}),
            _volume("pv-2", None, **{ZONE: "z2"}),
            _volume("pv-both", both_zones, **{ZONE: "z1"}),
        ],
    )
    plugin = PersistentVolumesFilter(found)
    rows = np.array([0, 1])

    def passes(pod: Pod) -> list[bool]:
        return plugin.filter(pod, table, rows, SchedulingContext()).tolist()

    assert passes(_pod("p", "one")) == [True, False] and passes(_pod("p", "two")) == [False, True]
    assert passes(_pod("p", "one", "two")) == [False, False]
    assert passes(_pod("p", "free", "unknown")) == [False, False]
    raw = _manifest("p")
    raw["spec"]["volumes"] = [{"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}]
    assert passes(Pod.from_dict(raw)) == [True, True]
    placement = found[("default", "p-scratch")]
    assert placement is not None and placement.allows({ZONE: "z2"}, zones=False)
    assert not placement.allows({ZONE: "z2"})


# ---- the scale-down simulation -------------------------------------------------------------


def _plan(nodes: dict[str, tuple[str, int]], pods_by_node: dict[str, list[Pod]], found: Any) -> Any:
    table = NodeTable()
    for name, (zone, cpu) in nodes.items():
        table.upsert_node(
            name, {"cpu": cpu, "memory": 16 * GI, "pods": 110}, labels={HOSTNAME_LABEL: name, ZONE: zone}
        )
    for name, pods in pods_by_node.items():
        for pod in pods:
            table.add_pod(table.index[name], pod)
    filters = load_builtin("default").profiles[0].filters
    return plan_scale_down(table, pods_by_node, ["a"], filters, claim_volumes=found)


def test_a_pod_moves_only_where_its_volume_lets_it() -> None:
    """A hub pod on a (z1) with its database on a z1 disk: with room only in z2 its node has
    no room; with a z1 node with room it goes there. Volumes unknown: not weighed."""
    found = claim_volumes([_claim("hub-db", "pv")], [_volume("pv", _terms(ZONE, "z1"))])
    pods = {"a": [_pod("hub", "hub-db", cpu="1", owner=True)], "b": [], "c": []}
    nodes = {"a": ("z1", 4000), "b": ("z2", 4000), "c": ("z1", 500)}  # c is too small
    plan = _plan(nodes, pods, found)
    assert plan.no_room == {"a": "default/hub"}
    assert _plan(nodes, pods, None).moves == {"default/hub": "b"}
    plan = _plan({**nodes, "d": ("z1", 4000)}, {**pods, "d": []}, found)
    assert (plan.removable, plan.moves) == (("a",), {"default/hub": "d"})
    # a claim bound to a volume that is gone: the pod fits nowhere, as kube-scheduler finds
    gone = claim_volumes([_claim("hub-db", "pv")], [])
    assert _plan({**nodes, "d": ("z1", 4000)}, {**pods, "d": []}, gone).no_room == {"a": "default/hub"}


# ---- against the real kube-scheduler --------------------------------------------------------


@pytest.mark.controlplane
def test_the_real_kube_scheduler_agrees(cluster: ControlPlane) -> None:
    """Nodes n1 (zone z1), n2 (z2), n3 (z1, beta zone label only) and n4 (no zone label);
    claims bound to volumes with node affinity or zone labels. Each probe pod binds to a
    node the filter passes, and stays Pending where it passes none."""
    nodes = {
        "n1": {ZONE: "z1", REGION: "r1"},
        "n2": {ZONE: "z2", REGION: "r1"},
        "n3": {BETA_ZONE: "z1"},
        "n4": {},
    }
    table = NodeTable()
    for name, labels in nodes.items():
        node = cluster.create_node(name, cpu="8", memory="32Gi", labels=labels)
        table.upsert_node(
            name, {"cpu": 8000, "memory": 32 * GI, "pods": 110}, labels=node["metadata"]["labels"]
        )
    volumes = {
        "in-z1": (_terms(ZONE, "z1"), {}),
        "on-n2": (_terms(HOSTNAME_LABEL, "n2"), {}),
        "zone-z1": (None, {ZONE: "z1"}),
        "beta-z1": (None, {BETA_ZONE: "z1"}),
        "zones-z1-z2": (None, {ZONE: "z1__z2"}),
        "no-zone": (_terms(ZONE, operator="DoesNotExist"), {}),
    }
    for name, (terms, labels) in volumes.items():
        cluster.create_bound_claim(name, node_selector_terms=terms, labels=labels)
    listed = cluster.call(lambda api: _list_claims_and_volumes(api))
    plugin = PersistentVolumesFilter(claim_volumes(*listed))
    probes = [
        ("near-disk", ("in-z1",), {"n1"}),
        ("pinned", ("on-n2",), {"n2"}),
        ("zone-label", ("zone-z1",), {"n1", "n4"}),  # n3: a GA label on the volume, a beta one on the node
        ("beta-label", ("beta-z1",), {"n1", "n3", "n4"}),
        ("two-zones", ("zones-z1-z2",), {"n1", "n2", "n4"}),
        ("torn", ("in-z1", "on-n2"), set()),
        ("unzoned", ("no-zone",), {"n3", "n4"}),
        ("missing", ("nowhere",), set()),  # a claim that does not exist
    ]
    cluster.start_scheduler(None)
    rows = np.arange(len(nodes))
    for name, claims, expected in probes:
        raw = _manifest(name, *claims)
        mask = plugin.filter(Pod.from_dict(raw), table, rows, SchedulingContext())
        allowed = {node for node, ok in zip(nodes, mask.tolist(), strict=True) if ok}
        assert allowed == expected, name
        cluster.create_pod(pod=raw)
        if not allowed:
            cluster.wait_unschedulable([name], timeout=30)
            continue
        assert cluster.wait_bound([name], timeout=30)[name] in allowed, name


async def _list_claims_and_volumes(api: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    from kubernetes_asyncio import client

    core = client.CoreV1Api(api)
    claims = await core.list_persistent_volume_claim_for_all_namespaces()
    volumes = await core.list_persistent_volume()
    return api.sanitize_for_serialization(claims)["items"], api.sanitize_for_serialization(volumes)["items"]
