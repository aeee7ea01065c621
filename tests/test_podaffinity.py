"""Required inter-pod affinity and anti-affinity and host ports (core.podaffinity): how a pod
dict's terms and ports are read, kube-scheduler's InterPodAffinity and NodePorts rules one by
one, and the scale-down simulation weighing them (core.drain)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from stickypack.core.drain import plan_scale_down
from stickypack.core.labels import HOSTNAME_LABEL
from stickypack.core.nodetable import NodeTable
from stickypack.core.pod import Pod, PodSpecError
from stickypack.core.podaffinity import HostPort, PodsOnNodes, has_preferred_pod_affinity
from stickypack.policies import load_builtin
from stickypack.testing import ControlPlane, pod_manifest
from stickypack.testing.fidelity import probe_placements

GI = 1024**3
ZONE = "topology.kubernetes.io/zone"
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


def _term(topology_key: str = HOSTNAME_LABEL, **selector_labels: str) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": selector_labels}, "topologyKey": topology_key}


def _pod(
    name: str,
    *,
    labels: dict[str, str] | None = None,
    namespace: str = "default",
    affinity: list[dict[str, Any]] | None = None,
    anti: list[dict[str, Any]] | None = None,
    host_ports: list[dict[str, Any]] | None = None,
    cpu: str = "100m",
    owner: bool = False,
) -> Pod:
    raw = pod_manifest(name, cpu=cpu, memory="128Mi", labels=labels, namespace=namespace)
    spec = raw["spec"]
    if affinity is not None:
        spec.setdefault("affinity", {})["podAffinity"] = {REQUIRED: affinity}
    if anti is not None:
        spec.setdefault("affinity", {})["podAntiAffinity"] = {REQUIRED: anti}
    if host_ports is not None:
        spec["containers"][0]["ports"] = host_ports
    if owner:
        raw["metadata"]["ownerReferences"] = [
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u", "controller": True}
        ]
    return Pod.from_dict(raw)


def _nodes(**zones: str | None) -> dict[int, dict[str, str]]:
    """Row i: node ``n<i>`` (hostname label) in the zone given (None: no zone label)."""
    out = {}
    for i, (name, zone) in enumerate(zones.items()):
        out[i] = {HOSTNAME_LABEL: name, **({ZONE: zone} if zone is not None else {})}
    return out


def _on(labels: dict[int, dict[str, str]], *placed: tuple[int, Pod], **kw: Any) -> PodsOnNodes:
    state = PodsOnNodes(labels, **kw)
    for row, pod in placed:
        state.add(row, pod)
    return state


# ---- reading the pod ---------------------------------------------------------------------


def test_required_terms_are_read_with_kube_schedulers_namespaces_and_merged_label_keys() -> None:
    pod = _pod(
        "p",
        labels={"app": "web", "pod-template-hash": "abc", "track": "canary"},
        namespace="team",
        anti=[
            {
                **_term(app="web"),
                "matchLabelKeys": ["pod-template-hash", "missing"],
                "mismatchLabelKeys": ["track"],
            },
            {**_term(ZONE, app="db"), "namespaces": ["data"]},
            {**_term(app="x"), "namespaceSelector": {}},
            {**_term(app="y"), "namespaceSelector": {"matchLabels": {"env": "prod"}}},
            {"topologyKey": HOSTNAME_LABEL},  # no labelSelector: selects no pod
        ],
    )
    same, listed, everywhere, selected, nothing = pod.required_pod_anti_affinity
    assert same.namespaces == {"team"} and same.namespace_selector is None  # the pod's own
    assert same.selector is not None
    assert [(r.key, r.operator, r.values) for r in same.selector.expressions] == [
        ("pod-template-hash", "In", ("abc",)),  # a key the pod lacks adds nothing
        ("track", "NotIn", ("canary",)),
    ]
    assert same.selects(_pod("q", labels={"app": "web", "pod-template-hash": "abc"}, namespace="team"))
    assert not same.selects(_pod("q", labels={"app": "web", "pod-template-hash": "old"}, namespace="team"))
    assert not same.selects(_pod("q", labels={"app": "web", "pod-template-hash": "abc"}))  # namespace
    assert (listed.topology_key, listed.namespaces) == (ZONE, {"data"})
    assert everywhere.namespaces == frozenset() and everywhere.namespace_selector is not None
    assert everywhere.selects(_pod("q", labels={"app": "x"}, namespace="elsewhere"), {})
    prod = {"shop": {"env": "prod"}, "lab": {"env": "dev"}}
    assert selected.selects(_pod("q", labels={"app": "y"}, namespace="shop"), prod)
    assert not selected.selects(_pod("q", labels={"app": "y"}, namespace="lab"), prod)
    assert not selected.selects(_pod("q", labels={"app": "y"}, namespace="unlisted"), prod)
    # namespace labels unknown: the selector is taken to select every namespace
    assert selected.selects(_pod("q", labels={"app": "y"}, namespace="lab"), None)
    assert not nothing.selects(_pod("q"))
    # the API server merges matchLabelKeys itself: merging again adds no second requirement
    merged = {
        "labelSelector": {
            "matchLabels": {"app": "web"},
            "matchExpressions": [{"key": "pod-template-hash", "operator": "In", "values": ["abc"]}],
        },
        "matchLabelKeys": ["pod-template-hash"],
        "topologyKey": HOSTNAME_LABEL,
    }
    again = _pod("p", labels={"app": "web", "pod-template-hash": "abc"}, affinity=[merged])
    assert again.required_pod_affinity[0].selector is not None
    assert len(again.required_pod_affinity[0].selector.expressions) == 1
    assert _pod("plain").required_pod_affinity == () and _pod("plain").host_ports == ()


def test_a_created_pods_label_keys_are_not_merged_again_with_its_labels_of_now() -> None:
    """The API server merges ``matchLabelKeys`` / ``mismatchLabelKeys`` once, when it creates
    the pod (kube-scheduler never does): a pod read from it (``creationTimestamp`` set) keeps
    its selectors as stored, even relabelled since; a pod not yet created (a manifest, a
    ``creationTimestamp`` of null) has them merged with its labels, required and preferred
    terms alike."""
    stored = {  # created with track=v1, relabelled track=v2 since
        "labelSelector": {
            "matchLabels": {"role": "probe"},
            "matchExpressions": [{"key": "track", "operator": "In", "values": ["v1"]}],
        },
        "matchLabelKeys": ["track"],
        "mismatchLabelKeys": ["team"],
        "topologyKey": HOSTNAME_LABEL,
    }
    raw = pod_manifest("guard", cpu="100m", memory="128Mi", labels={"track": "v2", "team": "a"})
    raw["spec"]["affinity"] = {
        "podAffinity": {REQUIRED: [stored]},
        "podAntiAffinity": {PREFERRED: [{"weight": 80, "podAffinityTerm": stored}]},
    }
    v1 = Pod("p", labels={"role": "probe", "track": "v1", "team": "a"})
    v2 = Pod("p", labels={"role": "probe", "track": "v2", "team": "b"})
    for created, selected in (("2026-12-07T19:00:00Z", v1), (None, None)):
        raw["metadata"]["creationTimestamp"] = created
        pod = Pod.from_dict(raw)
        (required,) = pod.required_pod_affinity
        (preferred,) = pod.preferred_pod_anti_affinity
        for term in (required, preferred.term):
            assert [p for p in (v1, v2) if term.selects(p)] == ([selected] if selected else [])


def test_required_pod_affinity_terms_default_to_the_pods_own_namespace() -> None:
    """kube-scheduler's ``AffinityTerm``: a term without ``namespaces`` and without
    ``namespaceSelector`` selects pods of the incoming pod's own namespace, for podAffinity
    as for podAntiAffinity."""
    pod = _pod("p", namespace="team", affinity=[_term(app="db")], anti=[_term(app="web")])
    (affinity,) = pod.required_pod_affinity
    (anti,) = pod.required_pod_anti_affinity
    assert affinity.namespaces == anti.namespaces == {"team"}
    assert affinity.selects(_pod("q", labels={"app": "db"}, namespace="team"))
    assert not affinity.selects(_pod("q", labels={"app": "db"}))  # namespace default


def test_host_ports_are_read_with_their_defaults() -> None:
    raw = pod_manifest("p")
    raw["spec"]["containers"][0]["ports"] = [
        {"containerPort": 80},  # no hostPort: binds nothing on the node
        {"containerPort": 80, "hostPort": 8080},
        {"containerPort": 53, "hostPort": 53, "protocol": "UDP", "hostIP": "10.0.0.1"},
        # an empty hostIP binds every address (kube-scheduler's HostPortInfo.sanitize)
        {"containerPort": 81, "hostPort": 8081, "hostIP": ""},
    ]
    raw["spec"]["initContainers"] = [
        {"name": "sidecar", "restartPolicy": "Always", "ports": [{"containerPort": 9, "hostPort": 9090}]},
        {"name": "init", "ports": [{"containerPort": 9, "hostPort": 9091}]},  # ends before the pod runs
    ]
    assert Pod.from_dict(raw).host_ports == (
        HostPort(9090),
        HostPort(8080, "TCP", "0.0.0.0"),
        HostPort(53, "UDP", "10.0.0.1"),
        HostPort(8081, "TCP", "0.0.0.0"),
    )
    host_network = pod_manifest("h")
    host_network["spec"]["hostNetwork"] = True
    host_network["spec"]["containers"][0]["ports"] = [
        {"containerPort": 9100},
        {"containerPort": 9101, "hostPort": 0},
    ]
    assert Pod.from_dict(host_network).host_ports == (HostPort(9100), HostPort(9101))  # 0: defaulted


@pytest.mark.parametrize(
    ("spec", "where"),
    [
        (
            {"affinity": {"podAntiAffinity": {REQUIRED: [{"labelSelector": {}, "topologyKey": ""}]}}},
            "spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey",
        ),
        (
            {
                "affinity": {
                    "podAffinity": {
                        REQUIRED: [
                            _term(),
                            {"labelSelector": {"matchExpressions": [{"key": "a", "operator": "Gt"}]}},
                        ]
                    }
                }
            },
            "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[1].topologyKey",
        ),
        (
            {
                "affinity": {
                    "podAffinity": {
                        REQUIRED: [
                            {
                                "labelSelector": {"matchExpressions": [{"key": "a", "operator": "Gt"}]},
                                "topologyKey": ZONE,
                            }
                        ]
                    }
                }
            },
            "[0].labelSelector: matchExpressions[0]: operator 'Gt'",
        ),
        (
            {"affinity": {"podAffinity": {REQUIRED: [{**_term(), "namespaceSelector": "prod"}]}}},
            "[0].namespaceSelector: a label selector is a mapping",
        ),
        (
            {"affinity": {"podAffinity": {REQUIRED: [{**_term(), "namespaces": "prod"}]}}},
            "[0].namespaces must be a list of strings",
        ),
        ({"affinity": {"podAntiAffinity": {REQUIRED: {"topologyKey": ZONE}}}}, "must be a list"),
        (
            {"containers": [{"name": "c", "ports": [{"hostPort": 70000}]}]},
            "spec.containers[0].ports[0].hostPort",
        ),
        (  # the largest port is 65535
            {"containers": [{"name": "c", "ports": [{"hostPort": 65536}]}]},
            "spec.containers[0].ports[0].hostPort: 65536 is not a port number",
        ),
        (
            {"containers": [{"name": "c", "ports": [{"hostPort": 80, "protocol": "HTTP"}]}]},
            "spec.containers[0].ports[0].protocol: 'HTTP'",
        ),
        (
            {"containers": [{"name": "c", "ports": {"hostPort": 80}}]},
            "spec.containers[0].ports must be a list",
        ),
    ],
)
def test_malformed_terms_and_ports_say_where(spec: dict[str, Any], where: str) -> None:
    with pytest.raises(PodSpecError, match="cannot read pod: .*" + re.escape(where)):
        Pod.from_dict({"metadata": {"name": "p"}, "spec": spec})


def test_host_ports_conflict_as_node_ports_says() -> None:
    assert HostPort(80).conflicts(HostPort(80, "TCP", "10.0.0.1"))  # 0.0.0.0 binds every address
    assert HostPort(80, "TCP", "10.0.0.1").conflicts(HostPort(80))
    assert HostPort(80, "TCP", "10.0.0.1").conflicts(HostPort(80, "TCP", "10.0.0.1"))
    assert not HostPort(80, "TCP", "10.0.0.1").conflicts(HostPort(80, "TCP", "10.0.0.2"))
    assert not HostPort(80).conflicts(HostPort(80, "UDP"))
    assert not HostPort(80).conflicts(HostPort(81))


# ---- the rules, node by node -------------------------------------------------------------


def test_host_ports_block_only_their_own_node() -> None:
    labels = _nodes(a="z1", b="z1")
    web = _pod("web", host_ports=[{"containerPort": 80, "hostPort": 80}])
    state = _on(labels, (0, _pod("proxy", host_ports=[{"containerPort": 80, "hostPort": 80}])))
    assert not state.allows(web, 0) and state.allows(web, 1)
    other_ip = _pod("web", host_ports=[{"containerPort": 80, "hostPort": 80, "hostIP": "10.0.0.1"}])
    assert not state.allows(other_ip, 0)
    udp = _pod("dns", host_ports=[{"containerPort": 80, "hostPort": 80, "protocol": "UDP"}])
    assert state.allows(udp, 0)


def test_anti_affinity_by_hostname_and_by_zone() -> None:
    labels = _nodes(a="z1", b="z1", c="z2", d=None)
    replica = _pod("web-1", labels={"app": "web"})
    state = _on(labels, (0, replica))
    by_host = _pod("web-2", labels={"app": "web"}, anti=[_term(app="web")])
    assert [state.allows(by_host, r) for r in range(4)] == [False, True, True, True]
    by_zone = _pod("web-2", labels={"app": "web"}, anti=[_term(ZONE, app="web")])
    # b shares a's zone; d has no zone label: the term cannot match there, so it passes
    assert [state.allows(by_zone, r) for r in range(4)] == [False, False, True, True]
    other_namespace = _on(labels, (0, _pod("web-1", labels={"app": "web"}, namespace="team")))
    assert other_namespace.allows(by_host, 0)  # the term looks in the pod's own namespace
    listed = _pod("web-2", labels={"app": "web"}, anti=[{**_term(app="web"), "namespaces": ["team"]}])
    assert not other_namespace.allows(listed, 0)


def test_existing_pods_anti_affinity_applies_to_the_incoming_pod() -> None:
    """Symmetry: a pod without terms may not join the domain of a pod whose required
    anti-affinity selects it."""
    labels = _nodes(a="z1", b="z1", c="z2")
    loner = _pod("loner", anti=[_term(ZONE, app="noisy")])
    state = _on(labels, (0, loner))
    noisy = _pod("noisy", labels={"app": "noisy"})
    assert [state.allows(noisy, r) for r in range(3)] == [False, False, True]
    assert all(state.allows(_pod("quiet", labels={"app": "quiet"}), r) for r in range(3))
    state.remove(0, loner)  # once it moves away, nothing forbids the zone
    assert all(state.allows(noisy, r) for r in range(3))


def test_affinity_needs_a_pod_selected_by_every_term_in_the_domain() -> None:
    labels = _nodes(a="z1", b="z1", c="z2", d=None)
    cache = _pod("cache", labels={"app": "cache", "tier": "fast"})
    state = _on(labels, (0, cache))
    near = _pod("web", affinity=[_term(ZONE, app="cache")])
    # the zone of the cache pod; d lacks the zone label: affinity cannot hold there
    assert [state.allows(near, r) for r in range(4)] == [True, True, False, False]
    same_host = _pod("web", affinity=[_term(app="cache")])
    assert [state.allows(same_host, r) for r in range(4)] == [True, False, False, False]
    # two terms: a pod counts only if selected by both (kube-scheduler's podMatchesAllAffinityTerms)
    both = _pod("web", affinity=[_term(ZONE, app="cache"), _term(ZONE, tier="slow")])
    split = _on(labels, (0, cache), (1, _pod("db", labels={"tier": "slow"})))
    assert not any(split.allows(both, r) for r in range(4))


def test_affinity_needs_every_terms_topology_label_and_a_selected_pod_in_every_domain() -> None:
    """kube-scheduler's satisfyPodAffinity (interpodaffinity/filtering.go): a node lacking
    any of the terms' topology keys fails, and each term's domain must hold a pod selected
    by all the terms. Terms: app=cache by zone and by hostname; the cache pod on a (z1).
    a: both pairs count 1 -> True; b (z1): zone 1 but hostname b 0 -> False; d (no zone
    label) -> False; c (z2): neither -> False (not the special case: a pod is selected)."""
    labels = _nodes(a="z1", b="z1", c="z2", d=None)
    state = _on(labels, (0, _pod("cache", labels={"app": "cache"})))
    web = _pod("web", affinity=[_term(ZONE, app="cache"), _term(app="cache")])
    assert [state.allows(web, r) for r in range(4)] == [True, False, False, False]


def test_affinity_counts_kept_as_pods_move_need_every_term_to_select() -> None:
    """The kept counts of two terms (app=cache, tier=fast, by hostname) count a pod that
    arrives only when both select it (updateWithAffinityTerms: podMatchesAllAffinityTerms):
    a cache pod of another tier joining b leaves b without a selected pod."""
    labels = _nodes(a="z1", b="z1")
    state = _on(labels, (0, _pod("cache-1", labels={"app": "cache", "tier": "fast"})))
    web = _pod("web", affinity=[_term(app="cache"), _term(tier="fast")])
    assert [state.allows(web, r) for r in range(2)] == [True, False]
    state.add(1, _pod("cache-2", labels={"app": "cache", "tier": "slow"}))
    assert [state.allows(web, r) for r in range(2)] == [True, False]


def test_affinity_special_case_for_the_first_of_a_group() -> None:
    """No pod anywhere is selected by the terms and the pod selects itself: any node with the
    topology labels will do (else a group of pods attracted to each other never starts)."""
    labels = _nodes(a="z1", b="z2", c=None)
    first = _pod("web-1", labels={"app": "web"}, affinity=[_term(ZONE, app="web")])
    empty = _on(labels, (0, _pod("other", labels={"app": "other"})))
    assert [empty.allows(first, r) for r in range(3)] == [True, True, False]
    not_itself = _pod("web-1", labels={"app": "api"}, affinity=[_term(ZONE, app="web")])
    assert not any(empty.allows(not_itself, r) for r in range(3))
    # once a selected pod runs somewhere, only its domain will do
    started = _on(labels, (1, _pod("web-0", labels={"app": "web"})))
    assert [started.allows(first, r) for r in range(3)] == [False, True, False]
    # a selected pod on a node without the topology label does not count (nor block)
    unlabelled = _on(labels, (2, _pod("web-0", labels={"app": "web"})))
    assert [unlabelled.allows(first, r) for r in range(3)] == [True, True, False]


def test_the_counts_a_judged_pod_built_follow_pods_that_move() -> None:
    """Once a pod's terms have been judged, their counts are kept as pods come and go (and as
    a node leaves): a later judge of the same terms sees the moves, for pods that carry the
    terms' required label and for terms without one."""
    labels = _nodes(a="z1", b="z1", c="z2", d="z3")
    cache = _pod("cache", labels={"app": "cache"})
    state = _on(labels, (0, cache))
    near = _pod("web", affinity=[_term(ZONE, app="cache")])
    apart = _pod("web", anti=[_term(ZONE, app="cache")])
    anywhere = _pod(
        "web",
        anti=[
            {
                "labelSelector": {"matchExpressions": [{"key": "app", "operator": "Exists"}]},
                "topologyKey": ZONE,
            }
        ],
    )
    assert [state.allows(near, r) for r in range(4)] == [True, True, False, False]
    assert [state.allows(apart, r) for r in range(4)] == [False, False, True, True]
    assert [state.allows(anywhere, r) for r in range(4)] == [False, False, True, True]
    state.remove(0, cache)
    state.add(2, cache)
    state.add(3, _pod("other", labels={"app": "other", "x": "y"}))
    assert [state.allows(near, r) for r in range(4)] == [False, False, True, False]
    assert [state.allows(apart, r) for r in range(4)] == [True, True, False, True]
    assert [state.allows(anywhere, r) for r in range(4)] == [True, True, False, False]
    state.delete_node(2)  # the cache's node leaves with it: nobody is selected, the first of a group
    assert [state.allows(apart, r) for r in (0, 1, 3)] == [True, True, True]
    assert not any(state.allows(near, r) for r in (0, 1, 3))  # web is not a cache pod itself


def test_a_list_of_terms_first_judged_after_pods_moved_counts_where_they_are_now() -> None:
    """The pods by label, indexed when a first list of terms with a required label is
    counted, follow later moves: a second list (the same label, another topology key)
    counted after web-1 left a and web-2 came to b sees web-2 on b (z2) alone. Nodes a (z1),
    b (z2), c (z3): the zone anti-affinity term then forbids b only."""
    labels = _nodes(a="z1", b="z2", c="z3")
    web_1, web_2 = _pod("web-1", labels={"app": "web"}), _pod("web-2", labels={"app": "web"})
    state = _on(labels, (0, web_1))
    by_host = _pod("api", anti=[_term(app="web")])
    assert [state.allows(by_host, r) for r in range(3)] == [False, True, True]
    state.add(1, web_2)
    state.remove(0, web_1)
    by_zone = _pod("api", anti=[_term(ZONE, app="web")])
    assert [state.allows(by_zone, r) for r in range(3)] == [True, False, True]


def test_an_empty_namespace_selector_selects_every_namespace() -> None:
    labels = _nodes(a="z1", b="z2")
    state = _on(labels, (0, _pod("agent", labels={"app": "agent"}, namespace="monitoring")))
    anywhere = _pod("web", anti=[{**_term(app="agent"), "namespaceSelector": {}}])
    assert [state.allows(anywhere, r) for r in range(2)] == [False, True]
    by_label = _pod(
        "web", affinity=[{**_term(app="agent"), "namespaceSelector": {"matchLabels": {"ops": "1"}}}]
    )
    known = _on(
        labels, (0, _pod("agent", labels={"app": "agent"}, namespace="monitoring")), namespace_labels={}
    )
    # the namespace lacks the label: no pod is selected, and the web pod does not select itself
    assert not any(known.allows(by_label, r) for r in range(2))
    labelled = _on(
        labels,
        (0, _pod("agent", labels={"app": "agent"}, namespace="monitoring")),
        namespace_labels={"monitoring": {"ops": "1"}},
    )
    assert [labelled.allows(by_label, r) for r in range(2)] == [True, False]


# ---- the scale-down simulation -------------------------------------------------------------


def _table(nodes: dict[str, str]) -> NodeTable:
    """4-cpu nodes by name, in the zone given."""
    table = NodeTable()
    for name, zone in nodes.items():
        table.upsert_node(
            name, {"cpu": 4000, "memory": 16 * GI, "pods": 110}, labels={HOSTNAME_LABEL: name, ZONE: zone}
        )
    return table


def _plan(table: NodeTable, pods_by_node: dict[str, list[Pod]], candidates: list[str], **kw: Any) -> Any:
    for name, pods in pods_by_node.items():
        for pod in pods:
            table.add_pod(table.index[name], pod)
    filters = load_builtin("default").profiles[0].filters
    return plan_scale_down(table, pods_by_node, candidates, filters, **kw)


def test_replicas_with_hostname_anti_affinity_keep_both_half_empty_nodes() -> None:
    """Two half-empty nodes, each with a replica: one could take the other's pod, unless the
    replicas' required anti-affinity keeps them apart."""

    def replica(name: str, anti: bool) -> Pod:
        terms = [_term(app="web")] if anti else None
        return _pod(name, labels={"app": "web"}, anti=terms, cpu="1500m", owner=True)

    for anti, removable in ((False, ("a",)), (True, ())):
        pods = {"a": [replica("web-1", anti)], "b": [replica("web-2", anti)]}
        plan = _plan(_table({"a": "z1", "b": "z1"}), pods, ["a", "b"])
        assert plan.removable == removable
        if anti:
            assert plan.no_room == {"a": "default/web-1", "b": "default/web-2"}
        else:
            # a's replica went to b, and a takes no pod once removable
            assert (plan.moves, plan.no_room) == ({"default/web-1": "b"}, {"b": "default/web-2"})


def test_scale_down_plan_weighs_host_ports_and_moved_pods() -> None:
    """Candidates a and b each hold a pod binding port 80; c is free: a's pod goes to c, then
    b's has nowhere to go (c took port 80, a is removed). A pod moved earlier counts where it
    went, and a candidate found removable takes nothing."""
    port = [{"containerPort": 80, "hostPort": 80}]
    pods = {
        "a": [_pod("web-1", host_ports=port, owner=True)],
        "b": [_pod("web-2", host_ports=port, owner=True)],
        "c": [_pod("proxy", cpu="3", host_ports=[{"containerPort": 81, "hostPort": 81}])],
    }
    plan = _plan(_table({"a": "z1", "b": "z1", "c": "z1"}), pods, ["a", "b"])
    assert (plan.removable, plan.moves, plan.no_room) == (
        ("a",),
        {"default/web-1": "c"},
        {"b": "default/web-2"},
    )


def test_scale_down_plan_keeps_daemon_pods_in_the_picture() -> None:
    """A DaemonSet pod stays on its node and still counts: a pod that wants to be near one
    can move only to a node running it."""
    raw = pod_manifest("agent", labels={"app": "agent"})
    raw["metadata"]["ownerReferences"] = [
        {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds", "uid": "u", "controller": True}
    ]
    agent = Pod.from_dict(raw)
    near = _pod("web", affinity=[_term(app="agent")], owner=True)
    pods = {"a": [near], "b": [], "c": [agent]}
    plan = _plan(_table({"a": "z1", "b": "z1", "c": "z2"}), pods, ["a"])
    assert (plan.removable, plan.moves) == (("a",), {"default/web": "c"})
    plan = _plan(_table({"a": "z1", "b": "z1", "c": "z2"}), {"a": [near], "b": [], "c": []}, ["a"])
    assert plan.no_room == {"a": "default/web"}  # no agent anywhere, and web does not select itself


# ---- against the real kube-scheduler --------------------------------------------------------


def _manifest(
    name: str,
    labels: dict[str, str] | None = None,
    affinity: list[dict[str, Any]] | None = None,
    anti: list[dict[str, Any]] | None = None,
    port: int | None = None,
) -> dict[str, Any]:
    raw = pod_manifest(name, cpu="100m", memory="128Mi", labels=labels)
    if affinity is not None:
        raw["spec"].setdefault("affinity", {})["podAffinity"] = {REQUIRED: affinity}
    if anti is not None:
        raw["spec"].setdefault("affinity", {})["podAntiAffinity"] = {REQUIRED: anti}
    if port is not None:
        raw["spec"]["containers"][0]["ports"] = [{"containerPort": port, "hostPort": port}]
    return raw


@pytest.mark.controlplane
def test_the_real_kube_scheduler_agrees(cluster: ControlPlane) -> None:
    """Nodes n1, n2 (zone z1), n3 (z2) and n4 (no zone label), each roomy, with pods bound:
    a database on n1, a pod on n3 that keeps ``app=noisy`` pods out of its zone, a proxy
    binding port 80 on n2. Each probe pod goes, one after the other, to kube-scheduler
    (its default profile): it binds to a node :meth:`PodsOnNodes.allows` allows, and stays
    Pending where it allows none; a probe bound counts for the next ones."""
    zones = {"n1": "z1", "n2": "z1", "n3": "z2", "n4": None}
    node_labels: dict[int, dict[str, str]] = {}
    for row, (name, zone) in enumerate(zones.items()):
        node = cluster.create_node(name, cpu="8", memory="32Gi", labels={ZONE: zone} if zone else None)
        node_labels[row] = dict(node["metadata"]["labels"])
    rows = {name: row for row, name in enumerate(zones)}
    state = PodsOnNodes(node_labels, namespace_labels=None)
    existing = {
        "n1": _manifest("db-1", labels={"app": "db"}),
        "n3": _manifest("guard", anti=[_term(ZONE, app="noisy")]),
        "n2": _manifest("proxy", port=80),
    }
    for node, raw in existing.items():
        raw["spec"]["nodeName"] = node
        cluster.create_pod(pod=raw)
        state.add(rows[node], Pod.from_dict(raw))
    probes = [
        ("near-db", _manifest("near-db", affinity=[_term(app="db")]), {"n1"}),
        ("db-zone", _manifest("db-zone", affinity=[_term(ZONE, app="db")]), {"n1", "n2"}),
        ("apart-from-db", _manifest("apart-from-db", anti=[_term(ZONE, app="db")]), {"n3", "n4"}),
        ("noisy", _manifest("noisy", labels={"app": "noisy"}), {"n1", "n2", "n4"}),  # symmetry
        ("web-80", _manifest("web-80", port=80), {"n1", "n3", "n4"}),
        # the first of a group drawn to its own zone: any node with a zone label
        (
            "web-1",
            _manifest("web-1", labels={"app": "web"}, affinity=[_term(ZONE, app="web")]),
            {"n1", "n2", "n3"},
        ),
        ("web-2", _manifest("web-2", labels={"app": "web"}, affinity=[_term(ZONE, app="web")]), None),
        # drawn to pods that do not exist, and not to itself: nowhere
        ("lost", _manifest("lost", labels={"app": "lost"}, affinity=[_term(app="ghost")]), set()),
        # near the database and away from it in the same zone: nowhere
        (
            "torn",
            _manifest("torn", affinity=[_term(ZONE, app="db")], anti=[_term(ZONE, app="db")]),
            set(),
        ),
    ]
    cluster.start_scheduler(None)

    def allowed(probe: Pod) -> set[str]:
        return {node for node, row in rows.items() if state.allows(probe, row)}

    bound_to: dict[str, str] = {}

    def placed(name: str, probe: Pod, node: str) -> None:
        state.add(rows[node], probe)
        bound_to[name] = node

    probe_placements(cluster, probes, allowed, placed)
    # web-2 followed web-1 into its zone
    assert zones[bound_to["web-2"]] == zones[bound_to["web-1"]]


def test_the_inspect_snapshot_keeps_what_these_rules_read() -> None:
    """``inspect`` slims each pod as it lists them: the terms and host ports survive (and the
    node selector and tolerations the other filters read), container ports without a host
    port do not."""
    from stickypack.kube.snapshot import snapshot_pod

    raw = _manifest("p", labels={"app": "web"}, affinity=[_term(ZONE, app="db")], anti=[_term(app="web")])
    raw["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 80}, {"containerPort": 9}]
    raw["spec"].update(nodeSelector={"pool": "user"}, tolerations=[{"key": "k", "operator": "Exists"}])
    raw["spec"]["nodeName"] = "n1"
    for kind in ("podAffinity", "podAntiAffinity"):
        raw["spec"]["affinity"][kind][PREFERRED] = [{"weight": 3, "podAffinityTerm": _term(app="x")}]
    slim = snapshot_pod(raw)
    assert slim["spec"]["containers"][0]["ports"] == [{"containerPort": 80, "hostPort": 80}]
    full, kept = Pod.from_dict(raw), Pod.from_dict(slim)
    for name in (
        "required_pod_affinity",
        "required_pod_anti_affinity",
        "preferred_pod_affinity",
        "preferred_pod_anti_affinity",
        "host_ports",
        "node_selector",
        "tolerations",
    ):
        assert getattr(kept, name) == getattr(full, name), name


def test_failing_filter_names_the_kube_scheduler_filter_that_keeps_a_pod_off() -> None:
    """``PodsOnNodes.failing_filter``: the filter's name as kube-scheduler names it, None
    where all pass. n0 (zone a) holds a ``db`` pod with port 5432; n1 (zone a) nothing; n2
    has no zone label."""
    labels = _nodes(n0="a", n1="a", n2=None)
    db = _pod("db", labels={"app": "db"}, host_ports=[{"containerPort": 5432, "hostPort": 5432}])
    state = _on(labels, (0, db))
    port = _pod("port", host_ports=[{"containerPort": 5432, "hostPort": 5432}])
    assert [state.failing_filter(port)(r) for r in range(3)] == ["NodePorts", None, None]
    anti = _pod("anti", anti=[_term(ZONE, app="db")])  # zone a has a db pod; n2 has no zone
    assert [state.failing_filter(anti)(r) for r in range(3)] == ["InterPodAffinity"] * 2 + [None]
    near = _pod("near", affinity=[_term(ZONE, app="db")])  # must share db's zone: n2 has none
    assert [state.failing_filter(near)(r) for r in range(3)] == [None, None, "InterPodAffinity"]
    far = _pod("far", affinity=[_term(ZONE, app="cache")])  # no cache pod anywhere, far is none
    assert [state.failing_filter(far)(r) for r in range(3)] == ["InterPodAffinity"] * 2 + ["InterPodAffinity"]
    # symmetry: a pod on n0 whose anti-affinity selects the newcomer keeps it off n0's zone
    guarded = _on(labels, (0, _pod("guard", anti=[_term(ZONE, role="new")])))
    newcomer = _pod("newcomer", labels={"role": "new"})
    assert [guarded.failing_filter(newcomer)(r) for r in range(3)] == ["InterPodAffinity"] * 2 + [None]
    assert [guarded.judge(newcomer)(r) for r in range(3)] == [False, False, True]
    # a node both PodTopologySpread and InterPodAffinity reject is PodTopologySpread's: every
    # kube-scheduler profile runs it first (apis/config/v1/default_plugins.go)
    raw = pod_manifest("spread", cpu="100m", memory="128Mi", labels={"role": "new", "app": "s"})
    raw["spec"]["topologySpreadConstraints"] = [
        {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
         "labelSelector": {"matchLabels": {"app": "s"}}}]  # fmt: skip
    both = _on(_nodes(n0="a", n1="b"), (0, _pod("guard", anti=[_term(ZONE, role="new")])),
               *((0, _pod(f"s{k}", labels={"app": "s"})) for k in range(2)))  # fmt: skip
    assert [both.failing_filter(Pod.from_dict(raw))(r) for r in range(2)] == ["PodTopologySpread", None]


# ---- preferred terms and kube-scheduler's InterPodAffinity score ------------------------


def _preferred_pod(
    name: str,
    *,
    labels: dict[str, str] | None = None,
    namespace: str = "default",
    affinity: Sequence[tuple[int, dict[str, Any]]] = (),
    anti: Sequence[tuple[int, dict[str, Any]]] = (),
    required_affinity: list[dict[str, Any]] | None = None,
) -> Pod:
    """A pod with preferred pod affinity / anti-affinity terms (weight, term) and required
    affinity terms, read from its dict."""
    raw = pod_manifest(name, cpu="100m", memory="128Mi", labels=labels, namespace=namespace)
    spec_affinity = raw["spec"].setdefault("affinity", {})
    for kind, terms in (("podAffinity", affinity), ("podAntiAffinity", anti)):
        if terms:
            entries = [{"weight": w, "podAffinityTerm": t} for w, t in terms]
            spec_affinity.setdefault(kind, {})[PREFERRED] = entries
    if required_affinity:
        spec_affinity.setdefault("podAffinity", {})[REQUIRED] = required_affinity
    return Pod.from_dict(raw)


def test_preferred_terms_are_read_in_full_as_the_required_ones_are() -> None:
    """Preferred pod affinity and anti-affinity terms: the weight, then the
    ``podAffinityTerm`` as a required term is read (selector with ``matchExpressions``,
    ``matchLabelKeys`` / ``mismatchLabelKeys`` merged as the API server merges them, the
    pod's own namespace when no namespaces nor ``namespaceSelector`` are given); BinderHub's
    simple form of the anti-affinity terms is still read for the scorer's build model."""
    term = {
        "labelSelector": {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["db", "cache"]}]},
        "matchLabelKeys": ["track"],
        "mismatchLabelKeys": ["team"],
        "topologyKey": ZONE,
    }
    other = {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": HOSTNAME_LABEL,
             "namespaceSelector": {"matchLabels": {"env": "prod"}}, "namespaces": ["ops"]}  # fmt: skip
    labels = {"track": "canary", "team": "a"}
    pod = _preferred_pod("p", labels=labels, namespace="team", affinity=[(7, term)], anti=[(40, other)])
    ((weight, near),) = ((w.weight, w.term) for w in pod.preferred_pod_affinity)
    assert weight == 7 and near.topology_key == ZONE and near.namespaces == frozenset({"team"})
    assert near.namespace_selector is None
    selects = {"tier": "db", "track": "canary", "team": "b"}
    assert near.selects(Pod("x", namespace="team", labels=selects))
    assert not near.selects(Pod("x", namespace="team", labels={**selects, "track": "stable"}))
    assert not near.selects(Pod("x", namespace="team", labels={**selects, "team": "a"}))
    assert not near.selects(Pod("x", namespace="default", labels=selects))
    ((weight, far),) = ((w.weight, w.term) for w in pod.preferred_pod_anti_affinity)
    assert weight == 40 and far.namespaces == frozenset({"ops"}) and far.namespace_selector is not None
    labelled = {"prod-ns": {"env": "prod"}}
    assert far.selects(Pod("x", namespace="prod-ns", labels={"app": "web"}), labelled)
    assert far.selects(Pod("x", namespace="ops", labels={"app": "web"}), labelled)
    assert not far.selects(Pod("x", namespace="dev", labels={"app": "web"}), labelled)
    ((simple),) = pod.pod_anti_affinity
    assert (simple.weight, simple.match_labels) == (40, (("app", "web"),))
    assert simple.topology_key == HOSTNAME_LABEL


@pytest.mark.parametrize(
    ("entry", "field"),
    [
        ({"weight": 0, "podAffinityTerm": _term()}, f"spec.affinity.podAffinity.{PREFERRED}[0].weight"),
        ({"weight": 5}, f"spec.affinity.podAffinity.{PREFERRED}[0].podAffinityTerm"),
        (
            {"weight": 5, "podAffinityTerm": {"topologyKey": "bad key!"}},
            f"spec.affinity.podAffinity.{PREFERRED}[0].podAffinityTerm.topologyKey",
        ),
        (
            {"weight": 5, "podAffinityTerm": {**_term(), "labelSelector": {"matchLabels": "x"}}},
            f"spec.affinity.podAffinity.{PREFERRED}[0].podAffinityTerm.labelSelector",
        ),
    ],
)
def test_a_preferred_term_that_cannot_be_read_is_named(entry: dict[str, Any], field: str) -> None:
    raw = pod_manifest("p", cpu="100m", memory="128Mi")
    raw["spec"]["affinity"] = {"podAffinity": {PREFERRED: [entry]}}
    with pytest.raises(PodSpecError, match=re.escape(field)):
        Pod.from_dict(raw)


@pytest.mark.parametrize("kind", ["required", "preferred"])
@pytest.mark.parametrize(
    ("term", "field", "reason"),
    [
        ({"topologyKey": ZONE, "matchLabelKeys": ["track"]}, "matchLabelKeys", "without labelSelector"),
        ({"topologyKey": ZONE, "mismatchLabelKeys": "track"}, "mismatchLabelKeys", "must be a list"),
        (
            {**_term(), "matchLabelKeys": ["track"], "mismatchLabelKeys": ["track"]},
            "matchLabelKeys[0]",
            "'track' is also in mismatchLabelKeys",
        ),
        ({**_term(), "mismatchLabelKeys": ["ok", "not a key"]}, "mismatchLabelKeys[1]", "not a label key"),
    ],
)
def test_label_keys_the_api_server_refuses_are_named(
    kind: str, term: dict[str, Any], field: str, reason: str
) -> None:
    """``matchLabelKeys`` / ``mismatchLabelKeys`` as the API server refuses them (its
    ``ValidateMatchLabelKeysAndMismatchLabelKeys``): set without a ``labelSelector`` (which
    is then not merged into, and was not checked at all), a key in both lists (which would
    select no pod), a key that is not a label key: an error naming the field, for required
    and preferred terms alike, never a term read otherwise."""
    raw = pod_manifest("p", cpu="100m", memory="128Mi", labels={"track": "v1", "ok": "1"})
    entry = term if kind == "required" else {"weight": 5, "podAffinityTerm": term}
    raw["spec"]["affinity"] = {"podAntiAffinity": {REQUIRED if kind == "required" else PREFERRED: [entry]}}
    where = f"spec.affinity.podAntiAffinity.{REQUIRED if kind == 'required' else PREFERRED}[0]"
    where += "" if kind == "required" else ".podAffinityTerm"
    with pytest.raises(PodSpecError, match=re.escape(f"{where}.{field}") + ".*" + re.escape(reason)):
        Pod.from_dict(raw)


def _scoring_cluster() -> tuple[PodsOnNodes, Pod]:
    """n0, n1 in zone a, n2 in zone b, n3 without labels. web pods on n0 and n2 (and one in
    namespace ``other`` on n1, which the newcomer's terms, of its own namespace, do not
    select); on n1 ``db``, whose preferred anti-affinity (weight 30, hostname) selects the
    newcomer; on n2 ``cache``, whose required affinity (zone) selects it; on n3 a web pod,
    on a node in no topology domain. The newcomer (``role=new``) prefers web's zone (weight
    10) and, less, not web's node (weight 4)."""
    labels = _nodes(n0="a", n1="a", n2="b")
    labels[3] = {}
    web = {"app": "web"}
    state = _on(
        labels,
        (0, _preferred_pod("web-0", labels=web)),
        (1, _preferred_pod("web-other", labels=web, namespace="other")),
        (1, _preferred_pod("db", anti=[(30, _term(role="new"))])),
        (2, _preferred_pod("web-2", labels=web)),
        (2, _preferred_pod("cache", required_affinity=[_term(ZONE, role="new")])),
        (3, _preferred_pod("web-3", labels=web)),
    )
    newcomer = _preferred_pod(
        "new", labels={"role": "new"}, affinity=[(10, _term(ZONE, app="web"))], anti=[(4, _term(app="web"))]
    )
    return state, newcomer


def test_inter_pod_affinity_sums_count_both_ways_per_topology_pair() -> None:
    """kube-scheduler's InterPodAffinity PreScore (scoring.go ``processExistingPod``), by
    hand: the newcomer's affinity adds 10 in zone a (web-0) and zone b (web-2), its
    anti-affinity takes 4 from n0 and n2; db's preferred anti-affinity takes 30 from n1;
    cache's required affinity adds hardPodAffinityWeight 1 to zone b (0 with a weight of 0).
    web-3's node has no labels: nothing counts there."""
    state, newcomer = _scoring_cluster()
    expected = {(ZONE, "a"): 10, (ZONE, "b"): 11, (HOSTNAME_LABEL, "n0"): -4, (HOSTNAME_LABEL, "n2"): -4,
                (HOSTNAME_LABEL, "n1"): -30}  # fmt: skip
    assert state.inter_pod_affinity_sums(newcomer) == expected
    assert state.inter_pod_affinity_sums(newcomer, hard_pod_affinity_weight=0)[(ZONE, "b")] == 10
    # a pod without terms: the other pods' terms that select it alone
    plain = _preferred_pod("plain", labels={"role": "new"})
    assert state.inter_pod_affinity_sums(plain) == {(HOSTNAME_LABEL, "n1"): -30, (ZONE, "b"): 1}
    # none selects it, and it has no terms: nothing (kube-scheduler's PreScore Skip)
    assert state.inter_pod_affinity_sums(_preferred_pod("other", labels={"role": "old"})) == {}


def test_inter_pod_affinity_namespace_selectors_read_the_namespaces_labels() -> None:
    """A term's ``namespaceSelector`` selects the pods of the namespaces whose labels match
    (the newcomer's, merged into its namespaces by the PreScore; an existing pod's, matched
    against the newcomer's namespace's labels); unknown labels (None): every namespace."""
    labels = _nodes(n0="a", n1="b")
    prod = {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": ZONE,
            "namespaceSelector": {"matchLabels": {"env": "prod"}}}  # fmt: skip
    pods = ((0, _preferred_pod("w0", labels={"app": "web"}, namespace="shop")),
            (1, _preferred_pod("w1", labels={"app": "web"}, namespace="test")))  # fmt: skip
    newcomer = _preferred_pod("new", affinity=[(5, prod)])
    known = {"shop": {"env": "prod"}, "test": {"env": "dev"}}
    assert _on(labels, *pods, namespace_labels=known).inter_pod_affinity_sums(newcomer) == {(ZONE, "a"): 5}
    assert _on(labels, *pods).inter_pod_affinity_sums(newcomer) == {(ZONE, "a"): 5, (ZONE, "b"): 5}
    guard = _preferred_pod("guard", namespace="ops", anti=[(9, {**prod, "labelSelector": {}})])
    shop_pod, test_pod = (_preferred_pod("p", namespace=ns) for ns in ("shop", "test"))
    state = _on(labels, (0, guard), namespace_labels=known)
    assert state.inter_pod_affinity_sums(shop_pod) == {(ZONE, "a"): -9}
    assert state.inter_pod_affinity_sums(test_pod) == {}


def test_inter_pod_affinity_sums_count_a_bound_pods_preferred_affinity_and_the_hard_weight_given() -> None:
    """The bound pods' side of ``processExistingPod``, by hand: friend (n0, zone a) prefers
    pods ``role=new`` in its zone, weight 7: +7 in zone a for the newcomer its term selects
    (not for friend itself, which it does not select). anchor (n1, whose zone label is the
    empty string, a value like any other: ``node.Labels[key]`` exists) requires them in its
    zone: + hardPodAffinityWeight there, 3 when that is 3; with 0 no pair at all, not a
    pair at 0 (kube-scheduler skips the term, ``HardPodAffinityWeight > 0``)."""
    labels = {0: {HOSTNAME_LABEL: "n0", ZONE: "a"}, 1: {HOSTNAME_LABEL: "n1", ZONE: ""}}
    friend = _preferred_pod("friend", labels={"app": "web"}, affinity=[(7, _term(ZONE, role="new"))])
    anchor = _preferred_pod("anchor", required_affinity=[_term(ZONE, role="new")])
    state = _on(labels, (0, friend), (1, anchor))
    newcomer = _preferred_pod("new", labels={"role": "new"})
    expected = {(ZONE, "a"): 7, (ZONE, ""): 3}
    assert state.inter_pod_affinity_sums(newcomer, hard_pod_affinity_weight=3) == expected
    assert state.inter_pod_affinity_sums(newcomer, hard_pod_affinity_weight=0) == {(ZONE, "a"): 7}
    assert state.inter_pod_affinity_sums(_preferred_pod("other", labels={"role": "old"})) == {}


def test_has_preferred_pod_affinity_with_either_kind_of_preferred_term() -> None:
    assert has_preferred_pod_affinity(_preferred_pod("a", affinity=[(1, _term(app="web"))]))
    assert has_preferred_pod_affinity(_preferred_pod("b", anti=[(1, _term(app="web"))]))
    assert not has_preferred_pod_affinity(_preferred_pod("c", required_affinity=[_term(app="web")]))


def _scoring_table(state: PodsOnNodes) -> NodeTable:
    table = NodeTable()
    for row in sorted(state.node_labels):
        name = state.node_labels[row].get(HOSTNAME_LABEL, f"n{row}")
        allocatable = {"cpu": 4000, "memory": 16 * GI, "pods": 110}
        assert table.upsert_node(name, allocatable, labels=state.node_labels[row]) == row
    return table


def test_the_inter_pod_affinity_scorer_scores_as_kube_scheduler_given_the_pods_on_the_nodes() -> None:
    """The scorer given ``ctx.pods_on_nodes``: a node's raw score is the sum of its pairs'
    (n0 10 - 4 = 6, n1 10 - 30 = -20, n2 11 - 4 = 7, n3 0), min-max normalized over the
    nodes scored, truncated: all four -> 96, 0, 100, 74 (100 * 26 / 27 = 96.3, 100 * 20 /
    27 = 74.07); n1 and n3 alone -> 0, 100 (n1's 10 from web-0 on n0, not scored, counts).
    Without the pods on the nodes the newcomer, no build pod, is skipped as before."""
    from stickypack.core.framework import SchedulingContext
    from stickypack.core.plugins import BuildAntiAffinity

    state, newcomer = _scoring_cluster()
    table = _scoring_table(state)
    scorer, ctx = BuildAntiAffinity(), SchedulingContext(pods_on_nodes=state)
    assert not scorer.skip_in(newcomer, ctx)
    assert scorer.score(newcomer, table, table.active_indices(), ctx).tolist() == [96, 0, 100, 74]
    some = np.array([1, 3])
    assert scorer.score(newcomer, table, some, SchedulingContext(pods_on_nodes=state)).tolist() == [0, 100]
    assert scorer.skip_in(newcomer, SchedulingContext()) and scorer.skip(newcomer)
    # no term counts anywhere: skipped, as kube-scheduler's PreScore returns Skip
    assert scorer.skip_in(_preferred_pod("other"), SchedulingContext(pods_on_nodes=state))
    # a pod without terms is scored by the others' terms that select it (symmetry)
    plain = _preferred_pod("plain", labels={"role": "new"})
    assert not scorer.skip_in(plain, SchedulingContext(pods_on_nodes=state))
    # raw n0 0, n1 -30, n2 1, n3 0 -> 100 * 30 / 31 = 96.77, 0, 100, 96
    assert scorer.score(plain, table, table.active_indices(), ctx).tolist() == [96, 0, 100, 96]


def test_the_inter_pod_affinity_scorer_scores_a_pair_whose_terms_cancel_out() -> None:
    """A pair a term counted stays in though its sum is 0: kube-scheduler's PreScore skips
    only when no term counted anywhere. The newcomer prefers web pods in its zone (weight
    5) and avoids them there (5): zone a sums to 0, the plugin is not skipped, and both
    nodes score 0 (their raw scores are equal)."""
    from stickypack.core.framework import SchedulingContext
    from stickypack.core.plugins import BuildAntiAffinity

    state = _on(_nodes(n0="a", n1="b"), (0, _preferred_pod("web", labels={"app": "web"})))
    web_in_zone = _term(ZONE, app="web")
    newcomer = _preferred_pod("new", affinity=[(5, web_in_zone)], anti=[(5, web_in_zone)])
    assert state.inter_pod_affinity_sums(newcomer) == {(ZONE, "a"): 0}
    scorer, ctx = BuildAntiAffinity(), SchedulingContext(pods_on_nodes=state)
    assert not scorer.skip_in(newcomer, ctx)
    table = _scoring_table(state)
    assert scorer.score(newcomer, table, table.active_indices(), ctx).tolist() == [0, 0]


def test_the_inter_pod_affinity_scorer_counts_again_for_other_pods_on_the_nodes() -> None:
    """The sums kept in ``ctx.cache`` are those of the pod and the pods on the nodes they
    were counted for: a context copied with other pods on the nodes (as
    ``explain_placement`` copies it, sharing the cache) scores those. The newcomer prefers
    web pods in its zone: the web pod on n0 (zone a) -> 100, 0; on n1 (zone b) -> 0, 100."""
    import dataclasses

    from stickypack.core.framework import SchedulingContext
    from stickypack.core.plugins import BuildAntiAffinity

    labels = _nodes(n0="a", n1="b")
    web = _preferred_pod("web", labels={"app": "web"})
    on_a, on_b = _on(labels, (0, web)), _on(labels, (1, web))
    newcomer = _preferred_pod("new", affinity=[(5, _term(ZONE, app="web"))])
    table = _scoring_table(on_a)
    scorer, ctx = BuildAntiAffinity(), SchedulingContext(pods_on_nodes=on_a)
    assert scorer.score(newcomer, table, table.active_indices(), ctx).tolist() == [100, 0]
    moved = dataclasses.replace(ctx, pods_on_nodes=on_b)
    assert moved.cache is ctx.cache and not scorer.skip_in(newcomer, moved)
    assert scorer.score(newcomer, table, table.active_indices(), moved).tolist() == [0, 100]


def test_explain_placement_shows_the_inter_pod_affinity_score_and_leaves_it_out_when_skipped() -> None:
    """``explain_placement`` with the pods on the nodes: the default policy's InterPodAffinity
    scores are the scorer's (weight 2 in the total); for a pod no term counts for, it is
    skipped and shown nowhere, as kube-scheduler shows no score of a skipped plugin."""
    from stickypack.core.explain import explain_placement
    from stickypack.core.framework import SchedulingContext

    state, newcomer = _scoring_cluster()
    table = _scoring_table(state)
    profile = load_builtin("default").profiles[0]
    shown = explain_placement(profile, newcomer, table, SchedulingContext(), on_nodes=state)
    by_node = {v.node: v.scores.get("InterPodAffinity") for v in shown.verdicts}
    assert by_node == {"n0": 96, "n1": 0, "n2": 100, "n3": 74}
    assert shown.best == ["n2"]
    other = explain_placement(profile, _preferred_pod("other"), table, SchedulingContext(), on_nodes=state)
    assert all("InterPodAffinity" not in v.scores for v in other.verdicts)


def test_binderhubs_build_anti_affinity_scores_the_same_with_and_without_the_pods_on_the_nodes() -> None:
    """BinderHub's build pods (its preferred anti-affinity, weight 100, hostname, against
    ``component=binderhub-build``): the build-count model (no pods on the nodes: the
    simulator, the extender) and kube-scheduler's score from the pods give the same scores,
    builds 0, 1, 2, 3 -> 100, 66, 33, 0, for a build pod (the others' terms select it too) and
    for a pod with the term and no build labels; and the same for a build pod whose term the
    ``default`` policy's BinderHubAntiAffinity mutator adds."""
    from stickypack.core.framework import SchedulingContext
    from stickypack.core.plugins import BuildAntiAffinity
    from stickypack.core.pod import BUILD_LABELS, BUILD_REPO_ANNOTATION

    binder_term = {"labelSelector": {"matchLabels": dict(BUILD_LABELS)}, "topologyKey": HOSTNAME_LABEL}

    def build(name: str, term: bool = True, labels: dict[str, str] = dict(BUILD_LABELS)) -> Pod:  # noqa: B006
        raw = pod_manifest(name, cpu="100m", memory="128Mi", labels=labels)
        raw["metadata"]["annotations"] = {BUILD_REPO_ANNOTATION: "https://example.org/repo"}
        if term:
            entry = {"weight": 100, "podAffinityTerm": binder_term}
            raw["spec"]["affinity"] = {"podAntiAffinity": {PREFERRED: [entry]}}
        return Pod.from_dict(raw)

    labels = _nodes(n0="a", n1="a", n2="b", n3="b")
    table, state = NodeTable(), PodsOnNodes(labels)
    for row, count in enumerate((0, 1, 2, 3)):
        table.upsert_node(f"n{row}", {"cpu": 64000, "memory": 64 * GI, "pods": 110}, labels=labels[row])
        for k in range(count):
            existing = build(f"b{row}-{k}")
            table.add_pod(row, existing)
            state.add(row, existing)
    profile = load_builtin("default").profiles[0]
    mutated = profile.mutators[0].mutate(build("mutated", term=False), table, SchedulingContext())
    plain = _preferred_pod("plain", anti=[(100, binder_term)])
    scorer, idx = BuildAntiAffinity(), table.active_indices()
    for pod in (build("new"), plain, mutated):
        without = scorer.score(pod, table, idx, SchedulingContext()).tolist()
        with_pods = scorer.score(pod, table, idx, SchedulingContext(pods_on_nodes=state)).tolist()
        assert without == with_pods == [100, 66, 33, 0], pod.name
