"""ClusterCache: node and pod events -> NodeTable, build ends, builder nodes, assumptions."""

from __future__ import annotations

from typing import Any

import pytest

from stickypack.core import Pod
from stickypack.kube.cache import ClusterCache, parse_selector


def node(
    name: str, cpu: str = "4", memory: str = "16Gi", taints: list[dict] | None = None, **meta: Any
) -> dict:
    return {
        "metadata": {
            "name": name,
            "resourceVersion": "1",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            **meta,
        },
        "spec": {"taints": taints or []},
        "status": {
            "allocatable": {"cpu": cpu, "memory": memory, "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def pod(
    name: str, node_name: str | None = None, *, repo: str | None = None, labels: dict | None = None,
    phase: str = "Pending", cpu: str = "1", uid: str | None = None,
) -> dict:  # fmt: skip
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "ns",
        "uid": uid or f"uid-{name}",
        "labels": labels or {},
    }
    if repo:
        meta["annotations"] = {"binder-repo": repo}
        meta["labels"] = {"component": "binderhub-build", **(labels or {})}
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]
    }
    if node_name:
        spec["nodeName"] = node_name
    return {"metadata": meta, "spec": spec, "status": {"phase": phase}}


@pytest.fixture
def recorded() -> list[tuple]:
    return []


@pytest.fixture
def cache(recorded: list[tuple]) -> ClusterCache:
    clock = iter(range(1000, 100000))
    return ClusterCache(
        on_build_end=lambda repo, n, when, phase: recorded.append((repo, n, phase)),
        on_node_deleted=lambda n, when: recorded.append(("deleted", n)),
        clock=lambda: float(next(clock)),
    )


def cpu_requested(cache: ClusterCache, name: str) -> int:
    return int(cache.table.requested[cache.table.slot(name), cache.table.rindex["cpu"]])


def test_nodes_and_pods_feed_the_table(cache: ClusterCache) -> None:
    cache.node_event(
        "ADDED", node("n1", taints=[{"key": "ToBeDeletedByClusterAutoscaler", "effect": "NoSchedule"}])
    )
    cache.node_event("ADDED", node("n2"))
    t = cache.table
    assert t.alloc[t.slot("n1"), t.rindex["cpu"]] == 4000
    assert t.to_be_deleted[t.slot("n1")] and not t.to_be_deleted[t.slot("n2")]
    assert t.created[t.slot("n1")] == 1767225600.0  # 2026-01-01T00:00:00Z
    cache.pod_event("ADDED", pod("p1", "n2", cpu="500m"))
    cache.pod_event("MODIFIED", pod("p1", "n2", cpu="500m"))  # status change: counted once
    assert cpu_requested(cache, "n2") == 500
    cache.pod_event("DELETED", pod("p1", "n2", cpu="500m"))
    assert cpu_requested(cache, "n2") == 0


def test_pod_before_its_node_is_counted_when_the_node_appears(cache: ClusterCache) -> None:
    cache.pod_event("ADDED", pod("p1", "late", cpu="2"))
    cache.node_event("ADDED", node("late"))
    assert cpu_requested(cache, "late") == 2000
    # node deleted and re-created (same name): its pods are counted again
    cache.node_event("DELETED", node("late"))
    cache.node_event("ADDED", node("late"))
    assert cpu_requested(cache, "late") == 2000


def test_build_end_on_deletion_or_terminal_phase_once(cache: ClusterCache, recorded: list) -> None:
    cache.node_event("ADDED", node("n1"))
    cache.pod_event("ADDED", pod("b1", "n1", repo="R"))
    assert cache.table.builds[cache.table.slot("n1")] == 1
    cache.pod_event("MODIFIED", pod("b1", "n1", repo="R", phase="Succeeded"))
    cache.pod_event("DELETED", pod("b1", "n1", repo="R", phase="Succeeded"))
    assert recorded == [("R", "n1", "Succeeded")]
    assert cache.table.builds[cache.table.slot("n1")] == 0
    cache.pod_event("ADDED", pod("b2", "n1", repo="R2"))
    cache.pod_event("DELETED", pod("b2", "n1", repo="R2"))  # no kubelet: deletion ends it
    assert recorded[-1] == ("R2", "n1", "Deleted")
    cache.pod_event("ADDED", pod("u1", None, repo="R3"))  # never bound: nothing recorded
    cache.pod_event("DELETED", pod("u1", None, repo="R3"))
    cache.pod_event("ADDED", pod("x", "n1", labels={"component": "other"}))
    cache.pod_event("DELETED", pod("x", "n1", labels={"component": "other"}))
    assert len(recorded) == 2
    cache.node_event("DELETED", node("n1"))
    assert recorded[-1] == ("deleted", "n1")


def test_failed_builds_can_be_left_out() -> None:
    seen: list = []
    cache = ClusterCache(on_build_end=lambda *a: seen.append(a), record_failed=False)
    cache.node_event("ADDED", node("n1"))
    cache.pod_event("MODIFIED", pod("b", "n1", repo="R", phase="Failed"))
    assert seen == []


def test_builder_nodes_skip_unbound_pods(cache: ClusterCache) -> None:
    for n in ("n1", "n2", "n3"):
        cache.node_event("ADDED", node(n))
    assert cache.builder_nodes() is None  # no builder pods: every node can build
    builder = {"component": "image-builder", "app": "binder"}
    cache.pod_event("ADDED", pod("d1", "n3", labels=builder))
    cache.pod_event("ADDED", pod("d2", None, labels=builder))
    cache.pod_event("ADDED", pod("d3", "n1", labels=builder))
    assert cache.builder_nodes() == ["n1", "n3"]
    cache.pod_event("DELETED", pod("d3", "n1", labels=builder))
    assert cache.builder_nodes() == ["n3"]


def test_assumptions_count_until_the_watch_confirms(cache: ClusterCache) -> None:
    cache.node_event("ADDED", node("n1"))
    cache.node_event("ADDED", node("n2"))
    raw = pod("b1", None, repo="R")
    cache.assume("ns/b1", Pod.from_dict(raw), "n1")
    t = cache.table
    assert t.builds[t.slot("n1")] == 1
    # the scheduler chose n2 after all: the real binding replaces the assumption
    cache.pod_event("ADDED", pod("b1", "n2", repo="R"))
    assert t.builds[t.slot("n1")] == 0 and t.builds[t.slot("n2")] == 1
    assert t.build_starts[t.slot("n1")] == 0 and t.build_starts[t.slot("n2")] == 1
    assert cache.assumed == {}
    # an assumption that is never confirmed expires
    cache.assume_ttl_s = 5
    cache.assume("ns/b9", Pod.from_dict(pod("b9", None, repo="R")), "n1")
    assert t.builds[t.slot("n1")] == 1
    cache.clock = lambda: 1e12  # the wall clock jumping does not expire it
    assert cache.expire_assumptions() == 0
    cache.ttl_clock = lambda: 1e12
    assert cache.expire_assumptions() == 1
    assert t.builds[t.slot("n1")] == 0


def test_parse_selector() -> None:
    assert parse_selector("a=b, c=d") == {"a": "b", "c": "d"}
    assert parse_selector({"x": 1}) == {"x": "1"}
    assert parse_selector("a=b,a=b") == {"a": "b"}
    # once {"a": "c"}, where Kubernetes requires both and so matches no pod
    with pytest.raises(ValueError, match="a given twice with different values"):
        parse_selector("a=b,a=c")
    with pytest.raises(ValueError, match="key=value"):
        parse_selector("a")


def test_slim_objects_keep_what_the_cache_reads() -> None:
    from stickypack.kube.cache import node_row, slim_node, slim_pod

    full = pod("b", "n1", repo="R", cpu="1500m")
    full["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"] = "x" * 10000
    full["metadata"]["managedFields"] = [{"manager": "kubectl"}] * 50
    full["spec"]["containers"][0]["env"] = [{"name": "A", "value": "1"}] * 100
    full["spec"]["initContainers"] = [
        {"name": "side", "restartPolicy": "Always", "resources": {"requests": {"cpu": "250m"}}}
    ]
    full["spec"]["overhead"] = {"cpu": "50m"}
    full["spec"]["resources"] = {"requests": {"memory": "3Gi"}}  # pod-level
    full["status"]["conditions"] = [{"type": "PodScheduled"}] * 10
    full["metadata"]["creationTimestamp"] = "2026-12-05T18:00:00Z"
    slim = slim_pod(full)
    a, b = Pod.from_dict(full), Pod.from_dict(slim)
    assert (a.requests, a.nonzero_cpu, a.nonzero_memory, a.build_repo, a.labels, a.node_name, a.created) == (
        b.requests, b.nonzero_cpu, b.nonzero_memory, b.build_repo, b.labels, b.node_name, b.created,
    )  # fmt: skip
    assert b.created is not None  # DrainForecast reads pod ages from the watch
    # what makes a DaemonSet or mirror pod to the autoscaler (NodeTable's own columns)
    ds = {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "d"}
    for meta, daemonset, mirror in (
        ({"ownerReferences": [{**ds, "controller": True}]}, True, False),
        ({"ownerReferences": [ds]}, False, False),  # not its controller
        ({"annotations": {"cluster-autoscaler.kubernetes.io/daemonset-pod": "true"}}, True, False),
        ({"annotations": {"kubernetes.io/config.mirror": "h"}}, False, True),
    ):  # fmt: skip
        owned = pod("o", "n1")
        owned["metadata"].update(meta)
        kept = Pod.from_dict(slim_pod(owned))
        assert (kept.is_daemonset_pod, kept.is_mirror_pod, kept.owner_group) == (
            daemonset,
            mirror,
            Pod.from_dict(owned).owner_group,
        ), meta
    assert b.requests["cpu"] == 1500 + 250 + 50 and b.requests["memory"] == 3 * 1024**3
    assert len(str(slim)) < len(str(full)) / 10
    n = node("n1", taints=[{"key": "k", "effect": "NoSchedule"}])
    n["status"]["images"] = [{"names": ["img"], "sizeBytes": 1}] * 50
    n["status"]["conditions"].append({"type": "MemoryPressure", "status": "False"})
    assert node_row(slim_node(n)) == node_row(n)
    # ImageLocality reads status.images: each entry slimmed to its names and size
    assert slim_node(n)["status"]["images"][0] == {"names": ["img"], "sizeBytes": 1}
    assert node_row(n)["images"] == {"img": 1}


@pytest.mark.parametrize(
    "images",
    [
        5,
        True,
        {"names": ["a:1"], "sizeBytes": 1},
        [{"names": 7, "sizeBytes": 1}],
        [{"names": [None, 3, "a:1"], "sizeBytes": 1}, "junk", None, [1, 2]],
        [{"names": True, "sizeBytes": 1}],
    ],
)
def test_a_malformed_status_images_never_loses_the_node(cache: ClusterCache, images: Any) -> None:
    # a `names` or `status.images` that is not a list once raised TypeError in slim_node or
    # node_row: the informer skipped the whole Node (never added, or never updated again)
    from stickypack.kube.cache import node_row, slim_node

    n = node("n1")
    n["status"]["images"] = images
    for obj in (n, slim_node(n)):
        assert node_row(obj)["images"] in ({}, {"a:1": 1})
    cache.node_event("ADDED", slim_node(n))
    assert "n1" in cache.table
    cache.node_event("MODIFIED", n)
    assert cache.table.images[cache.table.slot("n1")] in ({}, {"a:1": 1})


def test_an_image_without_sizebytes_is_listed_with_size_zero() -> None:
    # ContainerImage.SizeBytes is `json:"sizeBytes,omitempty"`: an image of 0 bytes comes
    # without the key (and a null decodes to 0 in Go). kube-scheduler still counts it: the
    # node is among the image's listers, and the first lister's 0 is the size every node
    # counts. Once such entries were dropped.
    from stickypack.core import NodeTable, SchedulingContext
    from stickypack.core.plugins import ImageLocality
    from stickypack.kube.cache import node_images, node_row, slim_node

    assert node_images([{"names": ["a:1"]}, {"names": ["b:1"], "sizeBytes": None}]) == {"a:1": 0, "b:1": 0}
    n = node("n1")
    n["status"]["images"] = [{"names": ["a:1"]}]
    assert node_row(slim_node(n))["images"] == {"a:1": 0}
    table = NodeTable()
    first = node("first")
    first["status"]["images"] = [{"names": ["big:1"]}]  # 0 bytes, listed first
    second = node("second")
    second["status"]["images"] = [{"names": ["big:1"], "sizeBytes": 4000 * 1024**2}]
    for obj in (first, second, node("third")):
        table.upsert_node(obj["metadata"]["name"], **{**node_row(obj), "created": None})
    assert table.image_size["big:1"] == 0 and len(table.image_rows["big:1"]) == 2
    p = Pod(name="p", namespace="ns", requests={}, images=("big:1",))
    idx = table.active_indices()
    assert ImageLocality().score(p, table, idx, SchedulingContext()).tolist() == [0, 0, 0]


def test_a_pod_that_stops_being_a_daemonset_pod_moves_out_of_its_column(cache: ClusterCache) -> None:
    """The table keeps DaemonSet and mirror pods' requests apart (what the autoscaler may
    leave out of utilization): a bound pod whose controller goes (a DaemonSet deleted with
    ``--cascade=orphan``) or that gains the daemonset-pod annotation, its requests the
    same, is accounted again, so the columns neither keep it nor go negative once it is
    deleted."""
    cache.node_event("ADDED", node("n1"))
    t = cache.table
    i, cpu = t.slot("n1"), t.rindex["cpu"]
    agent = pod("agent", "n1", phase="Running")
    agent["metadata"]["ownerReferences"] = [
        {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds", "uid": "u", "controller": True}
    ]
    cache.pod_event("ADDED", agent)
    assert t.daemonset_requested[i, cpu] == 1000
    orphan = pod("agent", "n1", phase="Running")
    cache.pod_event("MODIFIED", orphan, old=agent)
    assert t.daemonset_requested[i, cpu] == 0 and cpu_requested(cache, "n1") == 1000
    marked = pod("agent", "n1", phase="Running")
    marked["metadata"]["annotations"] = {"cluster-autoscaler.kubernetes.io/daemonset-pod": "true"}
    cache.pod_event("MODIFIED", marked, old=orphan)
    assert t.daemonset_requested[i, cpu] == 1000
    cache.pod_event("DELETED", marked)
    assert not t.daemonset_requested.any() and cpu_requested(cache, "n1") == 0


def _ended(p: dict, *finished: str | None, running: bool = False, key: str = "containerStatuses") -> dict:
    """``p`` with container statuses: one terminated container per ``finished`` time (None:
    one that never started), and a running one with ``running``."""
    states: list[dict] = [
        {"state": {"terminated": {"exitCode": 0, "finishedAt": f}} if f else {"waiting": {}}}
        for f in finished
    ]
    if running:
        states.append({"state": {"running": {"startedAt": "2026-03-01T09:00:00Z"}}})
    p["status"][key] = [{"name": f"c{i}", **s} for i, s in enumerate(states)]
    return p


#: 2026-03-01T10:00:00Z, and what the cache's clock says in the next test: an hour later
T0 = 1772359200.0


def test_a_build_end_is_dated_from_the_pod_not_from_when_it_was_seen() -> None:
    """An end seen an hour late is dated when the pod ended: its containers' latest
    finishedAt (init containers too), else when its deletion was asked for; a pod time
    within a second of now is now (finer); never later than now. A pod first seen already
    ended (a list) is recorded only when the pod dates its end, and not when it ended
    before its node was created (an older machine of that name)."""
    now = [T0 + 3600.0]
    seen: list[tuple[str, float]] = []
    cache = ClusterCache(
        on_build_end=lambda repo, n, when, phase: seen.append((repo, when)), clock=lambda: now[0]
    )
    cache.node_event("ADDED", node("n1", creationTimestamp="2026-03-01T08:00:00Z"))

    def end(name: str, p: dict, kind: str = "MODIFIED") -> float | None:
        before = len(seen)
        cache.pod_event(kind, p)
        return seen[-1][1] if len(seen) > before else None

    ok = "2026-03-01T10:00:00Z"
    assert end("a", _ended(pod("a", "n1", repo="A", phase="Succeeded"), "2026-03-01T09:59:00Z", ok)) == T0
    # a pod that failed in an init container; a sidecar that ended after the main container
    failed = _ended(pod("b", "n1", repo="B", phase="Failed"), None)
    _ended(failed, ok, key="initContainerStatuses")
    assert end("b", failed) == T0
    side = _ended(pod("c", "n1", repo="C", phase="Succeeded"), ok)
    _ended(side, "2026-03-01T10:00:07Z", key="initContainerStatuses")
    assert end("c", side) == T0 + 7
    # deleted while a container ran: when the deletion was asked for (timestamp less grace)
    deleting = _ended(pod("d", "n1", repo="D", phase="Running"), running=True)
    deleting["metadata"] |= {"deletionTimestamp": "2026-03-01T10:00:30Z", "deletionGracePeriodSeconds": 30}
    assert end("d", deleting, "DELETED") == T0
    # nothing in the pod: when seen
    assert end("e", pod("e", "n1", repo="E", phase="Succeeded")) == now[0]
    # a time in the future of the clock (another machine's clock ahead), or within a second
    # of now: now
    assert end("f", _ended(pod("f", "n1", repo="F", phase="Succeeded"), "2026-03-01T11:00:05Z")) == now[0]
    now[0] = T0 + 0.6
    assert end("g", _ended(pod("g", "n1", repo="G", phase="Succeeded"), ok)) == T0 + 0.6
    # first seen already ended: recorded when the pod dates it, else not
    now[0] = T0 + 3600.0
    assert end("h", _ended(pod("h", "n1", repo="H", phase="Succeeded"), ok), "ADDED") == T0
    assert end("i", pod("i", "n1", repo="I", phase="Succeeded"), "ADDED") is None
    # ended before its node was created: not this machine's build
    assert end("j", _ended(pod("j", "n1", repo="J", phase="Succeeded"), "2026-03-01T07:00:00Z")) is None
    assert [r for r, _ in seen] == ["A", "B", "C", "D", "E", "F", "G", "H"]


def test_the_slim_pod_keeps_a_build_pods_container_ends_and_the_deletion_grace() -> None:
    from stickypack.kube.cache import pod_end_time, slim_pod

    build = _ended(
        pod("b", "n1", repo="R", phase="Succeeded"), "2026-03-01T09:00:00Z", "2026-03-01T10:00:00Z"
    )
    build["status"]["containerStatuses"][0] |= {"image": "x" * 1000, "imageID": "y", "ready": False}
    assert pod_end_time(slim_pod(build)) == pod_end_time(build) == T0
    running = _ended(pod("r", "n1", repo="R"), "2026-03-01T09:00:00Z", running=True)
    running["metadata"] |= {"deletionTimestamp": "2026-03-01T10:00:30Z", "deletionGracePeriodSeconds": 30}
    assert pod_end_time(slim_pod(running)) == pod_end_time(running) == T0
    other = _ended(pod("u", "n1", phase="Succeeded"), "2026-03-01T10:00:00Z")  # not a build pod
    assert "containerStatuses" not in slim_pod(other)["status"]
    for junk in (5, ["x", {"state": 3}], [{"state": {"terminated": {"finishedAt": "yesterday"}}}]):
        odd = pod("o", "n1", repo="R", phase="Succeeded")
        odd["status"]["containerStatuses"] = junk
        assert pod_end_time(odd) is None and pod_end_time(slim_pod(odd)) is None, junk


def test_a_builder_pod_matches_every_label_of_the_builder_selector(cache: ClusterCache) -> None:
    """A selector of several labels selects a pod carrying all of them (a Kubernetes
    equality-based selector is an AND): a pod with only one of the default builder
    selector's two labels does not make its node a builder node."""
    cache.node_event("ADDED", node("n1"))
    cache.node_event("ADDED", node("n2"))
    # default builder selector: component=image-builder AND app=binder
    cache.pod_event("ADDED", pod("half", "n1", labels={"app": "binder"}))
    cache.pod_event("ADDED", pod("other", "n1", labels={"component": "image-builder"}))
    assert cache.builder_nodes() is None
    cache.pod_event("ADDED", pod("d", "n2", labels={"component": "image-builder", "app": "binder"}))
    assert cache.builder_nodes() == ["n2"]


def test_the_slim_pod_keeps_the_names_of_claims_made_from_templates() -> None:
    """A DRA claim made from a ResourceClaimTemplate is named in
    ``status.resourceClaimStatuses`` only: the slim pod keeps it, so the claim's name is the
    same read from the slim pod as from the full one."""
    from stickypack.kube.cache import slim_pod

    full = pod("g", "n1", phase="Running")
    full["spec"]["resourceClaims"] = [
        {"name": "gpu", "resourceClaimTemplateName": "one-gpu"},
        {"name": "net", "resourceClaimName": "shared-net"},
    ]
    full["status"]["resourceClaimStatuses"] = [{"name": "gpu", "resourceClaimName": "g-gpu-x7k2p"}]
    assert Pod.from_dict(full).resource_claims == ("g-gpu-x7k2p", "shared-net")
    assert Pod.from_dict(slim_pod(full)).resource_claims == ("g-gpu-x7k2p", "shared-net")


def test_a_deletion_grace_that_is_not_a_whole_number_of_seconds_in_range_is_not_subtracted() -> None:
    """``pod_end_time`` subtracts ``deletionGracePeriodSeconds`` only when it is an int in
    0..10**9: a boolean (JSON ``true``, which Python counts as 1) or a negative number is not
    a grace period, and the end is the deletion timestamp itself."""
    from stickypack.kube.cache import pod_end_time

    stamp = "2026-03-01T10:00:30Z"  # T0 + 30
    for grace, expected in ((30, T0), (0, T0 + 30), (True, T0 + 30), (-5, T0 + 30), (10**9 + 1, T0 + 30)):
        p = pod("d", "n1", repo="R", phase="Running")
        p["metadata"] |= {"deletionTimestamp": stamp, "deletionGracePeriodSeconds": grace}
        assert pod_end_time(p) == expected, grace


def test_a_missing_allocatable_is_the_capacity_but_an_empty_one_stays_empty() -> None:
    """The API server defaults a nil ``status.allocatable`` to ``status.capacity``
    (SetDefaults_NodeStatus, kubernetes pkg/apis/core/v1/defaults.go: ``if obj.Allocatable
    == nil && obj.Capacity != nil``); an empty map is not nil and stays empty, and
    kube-scheduler reads allocatable only."""
    from stickypack.kube.cache import node_row

    n = node("n1")
    del n["status"]["allocatable"]
    n["status"]["capacity"] = {"cpu": "2", "memory": "1Gi"}
    assert node_row(n)["allocatable"] == {"cpu": 2000, "memory": 1024**3}  # 2 cores = 2000m
    n["status"]["allocatable"] = {}
    assert node_row(n)["allocatable"] == {}


def test_a_cordoned_node_is_unschedulable_in_the_table(cache: ClusterCache) -> None:
    """``spec.unschedulable`` (``kubectl cordon``) reaches the table's column, from the full
    Node and from the slim one, and uncordoning clears it."""
    from stickypack.kube.cache import slim_node

    cordoned = node("n1")
    cordoned["spec"]["unschedulable"] = True
    cache.node_event("ADDED", slim_node(cordoned))
    cache.node_event("ADDED", node("n2"))
    t = cache.table
    assert t.unschedulable[t.slot("n1")] and not t.unschedulable[t.slot("n2")]
    cache.node_event("MODIFIED", node("n1"))  # uncordoned: the field is gone
    assert not t.unschedulable[t.slot("n1")]
    cache.node_event("MODIFIED", cordoned)
    assert t.unschedulable[t.slot("n1")]


def test_an_image_whose_sizebytes_is_a_boolean_is_left_out() -> None:
    """``sizeBytes`` is an int64: JSON ``true`` (which Python counts as 1) is not a size, so
    the entry is left out, as one of any other wrong type; 0 and a missing size count as 0."""
    from stickypack.kube.cache import node_images

    listed = [
        {"names": ["t:1"], "sizeBytes": True},
        {"names": ["f:1"], "sizeBytes": False},
        {"names": ["s:1"], "sizeBytes": "5"},
        {"names": ["z:1"], "sizeBytes": 0},
        {"names": ["n:1"]},
    ]
    assert node_images(listed) == {"z:1": 0, "n:1": 0}


def test_the_nodeset_version_moves_when_a_node_comes_or_goes_not_on_an_update(cache: ClusterCache) -> None:
    """The extender keys what it derives from the set of nodes on ``nodeset_version``: it
    must move on every node added or deleted, and only then."""
    v0 = cache.nodeset_version
    cache.node_event("ADDED", node("n1"))
    assert cache.nodeset_version == v0 + 1
    cache.node_event("MODIFIED", node("n1", cpu="8"))  # a status update: same set
    assert cache.nodeset_version == v0 + 1
    cache.node_event("ADDED", node("n2"))
    assert cache.nodeset_version == v0 + 2
    cache.node_event("DELETED", node("n1"))
    assert cache.nodeset_version == v0 + 3
    cache.node_event("DELETED", node("n1"))  # already gone: no change
    assert cache.nodeset_version == v0 + 3


def test_a_node_recreated_under_its_name_records_its_new_builds(cache: ClusterCache, recorded: list) -> None:
    """A build left on a deleted node is not recorded (its cache died with the machine), but
    once a node of that name is back, builds on it are recorded again."""
    cache.node_event("ADDED", node("n1"))
    cache.pod_event("ADDED", pod("old", "n1", repo="OLD"))
    cache.node_event("DELETED", node("n1"))  # "old" is still bound to n1: n1 is a deleted node
    cache.node_event("ADDED", node("n1"))
    cache.pod_event("ADDED", pod("new", "n1", repo="NEW"))
    cache.pod_event("DELETED", pod("new", "n1", repo="NEW"))
    assert recorded == [("deleted", "n1"), ("NEW", "n1", "Deleted")]


def test_an_assumption_on_an_unknown_node_counts_on_that_node_only_once_it_appears(
    cache: ClusterCache,
) -> None:
    """An assumption on a node the cache has not seen yet waits for that node: another
    node appearing meanwhile does not take it."""
    cache.assume("ns/b", Pod.from_dict(pod("b", None, repo="R")), "later")
    cache.node_event("ADDED", node("n1"))
    t = cache.table
    assert t.builds[t.slot("n1")] == 0 and cpu_requested(cache, "n1") == 0
    cache.node_event("ADDED", node("later"))
    assert t.builds[t.slot("later")] == 1 and cpu_requested(cache, "later") == 1000  # the pod's 1 cpu
    assert t.builds[t.slot("n1")] == 0


def test_an_assumption_on_a_node_deleted_and_recreated_counts_again(cache: ClusterCache) -> None:
    """A node deleted and back under its name (a kubelet re-registering) counts the
    assumptions on it again, and an assumption expiring leaves its counts at zero, never
    below."""
    cache.assume_ttl_s = 5
    now = [100.0]
    cache.ttl_clock = lambda: now[0]
    cache.node_event("ADDED", node("n1"))
    cache.assume("ns/b", Pod.from_dict(pod("b", None, repo="R", cpu="2")), "n1")
    cache.node_event("DELETED", node("n1"))
    cache.node_event("ADDED", node("n1"))
    t = cache.table
    assert t.builds[t.slot("n1")] == 1 and cpu_requested(cache, "n1") == 2000
    now[0] = 105.0  # expires at 100 + 5
    assert cache.expire_assumptions() == 1
    assert t.builds[t.slot("n1")] == 0 and cpu_requested(cache, "n1") == 0


def test_a_build_bound_after_its_nodes_deletion_is_recorded(cache: ClusterCache, recorded: list) -> None:
    """Only a build *left* on a deleted node goes unrecorded. A node deleted with no pod on
    it, then a build pod bound to a node of that name whose Node the watch has not brought
    yet (a new machine under the old name): its end is recorded."""
    cache.node_event("ADDED", node("n1"))
    cache.node_event("DELETED", node("n1"))  # nothing was bound to it
    cache.pod_event("ADDED", pod("b", "n1", repo="R"))  # the new n1's Node not seen yet
    cache.pod_event("DELETED", pod("b", "n1", repo="R"))
    assert recorded == [("deleted", "n1"), ("R", "n1", "Deleted")]


def test_an_empty_builder_selector_selects_no_builder_pod() -> None:
    """With no builder selector, no pod is a builder pod: every node can build (None), not
    every node running any pod."""
    cache = ClusterCache(builder_selector={})
    cache.node_event("ADDED", node("n1"))
    cache.node_event("ADDED", node("n2"))
    cache.pod_event("ADDED", pod("p", "n1", labels={"app": "x"}))
    cache.pod_event("ADDED", pod("d", "n2", labels={"component": "image-builder", "app": "binder"}))
    assert cache.builder_nodes() is None


def test_a_builder_pod_that_terminated_no_longer_marks_its_node(cache: ClusterCache) -> None:
    """A builder pod Succeeded or Failed (still there, not deleted) builds nothing more: its
    node stops being a builder node."""
    builder = {"component": "image-builder", "app": "binder"}
    for n in ("n1", "n2"):
        cache.node_event("ADDED", node(n))
    cache.pod_event("ADDED", pod("d1", "n1", labels=builder, phase="Running"))
    cache.pod_event("ADDED", pod("d2", "n2", labels=builder, phase="Running"))
    assert cache.builder_nodes() == ["n1", "n2"]
    cache.pod_event("MODIFIED", pod("d1", "n1", labels=builder, phase="Failed"))
    assert cache.builder_nodes() == ["n2"]
    cache.pod_event("MODIFIED", pod("d2", "n2", labels=builder, phase="Succeeded"))
    assert cache.builder_nodes() is None


def test_an_assumed_pod_deleted_before_its_binding_is_no_longer_counted(cache: ClusterCache) -> None:
    """A pod deleted while still unbound (a build cancelled between the extender's answer
    and the binding) ends its assumption at once, not at the TTL."""
    cache.node_event("ADDED", node("n1"))
    cache.assume("ns/b", Pod.from_dict(pod("b", None, repo="R")), "n1")
    t = cache.table
    assert t.builds[t.slot("n1")] == 1
    cache.pod_event("DELETED", pod("b", None, repo="R"))
    assert cache.assumed == {}
    assert t.builds[t.slot("n1")] == 0 and cpu_requested(cache, "n1") == 0


def test_a_build_left_on_a_deleted_node_is_not_recorded(cache: ClusterCache, recorded: list) -> None:
    """A build pod still bound to a node deleted meanwhile, that ends afterwards (pod GC
    deletes it), is not recorded: its build cache died with the machine."""
    cache.node_event("ADDED", node("n1"))
    cache.pod_event("ADDED", pod("b", "n1", repo="R"))
    cache.node_event("DELETED", node("n1"))
    cache.pod_event("DELETED", pod("b", "n1", repo="R"))
    assert recorded == [("deleted", "n1")]


def test_a_pod_resized_in_place_is_accounted_with_its_new_requests(cache: ClusterCache) -> None:
    """A bound pod whose requests change (in-place resize) is accounted again with the new
    requests, not left at the old ones."""
    cache.node_event("ADDED", node("n1"))
    cache.pod_event("ADDED", pod("p", "n1", phase="Running", cpu="1"))
    assert cpu_requested(cache, "n1") == 1000
    cache.pod_event("MODIFIED", pod("p", "n1", phase="Running", cpu="2500m"))
    assert cpu_requested(cache, "n1") == 2500
    cache.pod_event("DELETED", pod("p", "n1", phase="Running", cpu="2500m"))
    assert cpu_requested(cache, "n1") == 0


def test_a_bound_pod_that_gains_or_loses_the_build_annotation_is_counted_again(
    cache: ClusterCache,
) -> None:
    """The table's build count follows the ``binder-repo`` annotation of a bound pod, which
    can be added or removed after binding (annotations are mutable): the count neither
    misses it nor goes negative when the pod goes."""
    cache.node_event("ADDED", node("n1"))
    t = cache.table
    i = t.slot("n1")
    plain = pod("p", "n1", phase="Running")
    cache.pod_event("ADDED", plain)
    assert t.builds[i] == 0
    annotated = pod("p", "n1", phase="Running")
    annotated["metadata"]["annotations"] = {"binder-repo": "R"}
    cache.pod_event("MODIFIED", annotated, old=plain)
    assert t.builds[i] == 1
    cache.pod_event("MODIFIED", plain, old=annotated)
    assert t.builds[i] == 0
    cache.pod_event("MODIFIED", annotated, old=plain)
    cache.pod_event("DELETED", annotated)
    assert t.builds[i] == 0 and cpu_requested(cache, "n1") == 0


def test_builds_on_a_deleted_nodes_name_are_recorded_once_its_left_pods_are_gone(
    cache: ClusterCache, recorded: list
) -> None:
    """A deleted node stops being one once the last pod left on it is gone: a build bound
    to that name afterwards (a new machine, its Node not seen yet) is recorded."""
    cache.node_event("ADDED", node("n1"))
    cache.pod_event("ADDED", pod("old", "n1", repo="OLD"))
    cache.node_event("DELETED", node("n1"))
    cache.pod_event("DELETED", pod("old", "n1", repo="OLD"))  # left on it: not recorded
    cache.pod_event("ADDED", pod("new", "n1", repo="NEW"))
    cache.pod_event("DELETED", pod("new", "n1", repo="NEW"))
    assert recorded == [("deleted", "n1"), ("NEW", "n1", "Deleted")]


def test_only_a_pod_with_the_build_labels_and_a_repo_is_a_build(cache: ClusterCache, recorded: list) -> None:
    """A build pod is one the build selector selects *and* annotated ``binder-repo``: a pod
    with the labels and no repo, or with a repo and not the labels, ends unrecorded."""
    cache.node_event("ADDED", node("n1"))
    unannotated = pod("l", "n1", labels={"component": "binderhub-build"}, phase="Succeeded")
    cache.pod_event("MODIFIED", unannotated)
    unlabelled = pod("a", "n1", phase="Succeeded")
    unlabelled["metadata"]["annotations"] = {"binder-repo": "R"}
    cache.pod_event("MODIFIED", unlabelled)
    cache.pod_event("MODIFIED", pod("b", "n1", repo="B", phase="Succeeded"))
    assert recorded == [("B", "n1", "Succeeded")]


def test_a_build_pod_without_uid_is_told_from_a_later_one_of_its_name(
    cache: ClusterCache, recorded: list
) -> None:
    """Build ends are remembered by uid, or by namespace/name for a pod without one; a
    deletion forgets it, so a later build pod of that name is recorded in its turn."""
    cache.node_event("ADDED", node("n1"))

    def build(phase: str) -> dict:
        p = pod("b", "n1", repo="R", phase=phase)
        del p["metadata"]["uid"]
        return p

    cache.pod_event("MODIFIED", build("Succeeded"))
    cache.pod_event("MODIFIED", build("Succeeded"))  # seen again: recorded once
    cache.pod_event("DELETED", build("Succeeded"))
    cache.pod_event("ADDED", build("Running"))
    cache.pod_event("MODIFIED", build("Failed"))
    assert recorded == [("R", "n1", "Succeeded"), ("R", "n1", "Failed")]


def test_a_build_end_time_at_the_boundaries() -> None:
    """``end_time``'s two boundaries, in whole seconds as the API writes them: a pod time
    exactly one second before now is the pod's (only a time *within* a second is now), and
    an end at the very second the node was created is this node's (only one *before* it is
    an older machine's)."""
    now = [T0 + 1.0]
    seen: list[tuple[str, float]] = []
    cache = ClusterCache(
        on_build_end=lambda repo, n, when, phase: seen.append((repo, when)), clock=lambda: now[0]
    )
    cache.node_event("ADDED", node("n1", creationTimestamp="2026-03-01T08:00:00Z"))  # T0 - 7200
    cache.pod_event("MODIFIED", _ended(pod("a", "n1", repo="A", phase="Succeeded"), "2026-03-01T10:00:00Z"))
    cache.pod_event("MODIFIED", _ended(pod("b", "n1", repo="B", phase="Succeeded"), "2026-03-01T08:00:00Z"))
    cache.pod_event("MODIFIED", _ended(pod("c", "n1", repo="C", phase="Succeeded"), "2026-03-01T07:59:59Z"))
    assert seen == [("A", T0), ("B", T0 - 7200)]


def test_a_pod_already_bound_or_assumed_is_not_assumed_again(cache: ClusterCache) -> None:
    """``assume`` refuses (False, nothing counted) a pod the watch has already placed, or
    one already assumed: a pod is counted once."""
    cache.node_event("ADDED", node("n1"))
    cache.node_event("ADDED", node("n2"))
    cache.pod_event("ADDED", pod("bound", "n1", repo="R"))
    assert cache.assume("ns/bound", Pod.from_dict(pod("bound", None, repo="R")), "n2") is False
    assert cache.assume("ns/a", Pod.from_dict(pod("a", None, repo="R")), "n2") is True
    assert cache.assume("ns/a", Pod.from_dict(pod("a", None, repo="R")), "n2") is False
    t = cache.table
    # n1: the bound pod (1 cpu); n2: "a" once (1 cpu)
    assert (cpu_requested(cache, "n1"), cpu_requested(cache, "n2")) == (1000, 1000)
    assert (t.builds[t.slot("n1")], t.builds[t.slot("n2")]) == (1, 1)
    assert cache.assumed == {"ns/a": "n2"}


def test_dropping_a_plain_pods_assumption_leaves_the_build_starts(cache: ClusterCache) -> None:
    """Dropping an assumption takes back the build start it counted, and only a build
    pod's assumption counted one: a plain pod's leaves the node's starts alone."""
    cache.node_event("ADDED", node("n1"))
    t = cache.table
    i = t.slot("n1")
    cache.pod_event("ADDED", pod("b", "n1", repo="R"))  # a real build start
    assert t.build_starts[i] == 1
    cache.assume("ns/user", Pod.from_dict(pod("user", None)), "n1")
    assert cache.unassume("ns/user") == "n1"
    assert t.build_starts[i] == 1
    cache.assume("ns/b2", Pod.from_dict(pod("b2", None, repo="R")), "n1")
    assert t.build_starts[i] == 2
    assert cache.unassume("ns/b2") == "n1"
    assert t.build_starts[i] == 1


def test_an_assumption_expires_at_its_ttl_exactly(cache: ClusterCache) -> None:
    """An assumption made at ttl-clock 100 with ``assume_ttl_s`` 5 still counts at 104.9
    and is gone at 105."""
    now = [100.0]
    cache.ttl_clock = lambda: now[0]
    cache.assume_ttl_s = 5
    cache.node_event("ADDED", node("n1"))
    cache.assume("ns/b", Pod.from_dict(pod("b", None, repo="R")), "n1")
    now[0] = 104.9
    assert cache.expire_assumptions() == 0 and cache.assumed == {"ns/b": "n1"}
    now[0] = 105.0
    assert cache.expire_assumptions() == 1 and cache.assumed == {}


def test_a_builder_pod_on_a_node_not_in_the_table_is_not_a_builder_node(cache: ClusterCache) -> None:
    """``builder_nodes`` lists only nodes the table knows: a builder pod bound to a node not
    seen yet (or deleted) names none, until that node is there."""
    builder = {"component": "image-builder", "app": "binder"}
    cache.node_event("ADDED", node("n1"))
    cache.pod_event("ADDED", pod("d", "x", labels=builder, phase="Running"))
    assert cache.builder_nodes() is None
    cache.node_event("ADDED", node("x"))
    assert cache.builder_nodes() == ["x"]
    cache.node_event("DELETED", node("x"))
    assert cache.builder_nodes() is None
