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
