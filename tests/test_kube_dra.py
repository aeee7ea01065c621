"""NodeDraTracker (kube.dra): each node's DRA reading kept in the node table from the events
of ResourceSlices, ResourceClaims, Nodes and Pods, recomputing only the nodes an event
touched. Without an API server: the events are handed to it as its informers would."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from stickypack.core.dra import DRA_SLICES_COLUMN, DRA_UTILIZATION_COLUMN
from stickypack.kube.cache import ClusterCache

DRIVER = "gpu.example.com"


def node(name: str) -> dict[str, Any]:
    allocatable = {"cpu": "8", "memory": "32Gi", "pods": "110"}
    return {"metadata": {"name": name}, "status": {"allocatable": allocatable}}


def device_slice(
    name: str, node: str | None, devices: int, pool: str = "p", count: int = 1
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "driver": DRIVER,
        "pool": {"name": pool, "generation": 1, "resourceSliceCount": count},
        "devices": [{"name": f"g{k}"} for k in range(devices)],
    }
    if node is not None:
        spec["nodeName"] = node
    return {"metadata": {"name": name}, "spec": spec}


def claim(name: str, *devices: str, pool: str = "p") -> dict[str, Any]:
    results = [{"request": "r", "driver": DRIVER, "pool": pool, "device": d} for d in devices]
    return {
        "metadata": {"name": name, "namespace": "ns"},
        "status": {"allocation": {"devices": {"results": results}}},
    }


def pod(name: str, node: str, *claims: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": name},
        "spec": {
            "nodeName": node,
            "containers": [],
            "resourceClaims": [{"name": c, "resourceClaimName": c} for c in claims],
        },
        "status": {"phase": "Running"},
    }


def column(cache: ClusterCache, name: str) -> tuple[float, float]:
    """Node ``name``'s two DRA columns, after a refresh."""
    cache.refresh_dra()
    row = cache.table.index[name]
    return float(cache.table.extra[DRA_SLICES_COLUMN][row]), float(
        cache.table.extra[DRA_UTILIZATION_COLUMN][row]
    )


def test_a_node_whose_reading_fails_is_kept_busy_and_the_other_nodes_still_refresh(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """An exception computing one node's reading (a case dra_utilization does not foresee)
    once escaped refresh(), and so every decision of the extender (refreshed first) and
    the metrics scrape; and the nodes not yet recomputed, taken out of the dirty set, were
    never recomputed. Now the node is taken as one the autoscaler cannot weigh (busy, +inf)
    and logged, the others are written, and the next change recomputes it again."""
    import stickypack.kube.dra as kube_dra

    cache = ClusterCache(dra=True)
    tracker = cache.dra
    assert tracker is not None
    names = [f"n{k}" for k in range(6)]
    for name in names:
        cache.node_event("ADDED", node(name))
        tracker.slice_event("ADDED", device_slice(name, name, 4, pool=name))
    tracker.claim_event("ADDED", claim("c", "g0", pool="n3"))
    cache.pod_event("ADDED", pod("user", "n3", "c"))
    real = kube_dra.dra_utilization

    def failing(slices: Any, claims: Any, pods_by_node: Any) -> Any:
        if "n3" in pods_by_node:
            raise ArithmeticError("unforeseen")
        return real(slices, claims, pods_by_node)

    monkeypatch.setattr(kube_dra, "dra_utilization", failing)
    with caplog.at_level(logging.WARNING):
        assert tracker.refresh() == len(names)
    assert [column(cache, n) for n in names] == [(1.0, 0.0)] * 3 + [(1.0, float("inf"))] + [(1.0, 0.0)] * 2
    error = tracker.readings["n3"].error
    assert error is not None and "unforeseen" in error
    assert any("n3" in r.getMessage() and "unforeseen" in r.getMessage() for r in caplog.records)
    monkeypatch.setattr(kube_dra, "dra_utilization", real)
    tracker.claim_event("MODIFIED", claim("c", "g0", "g1", pool="n3"))
    assert column(cache, "n3") == (1.0, 0.5)


def test_a_nodes_reading_does_not_depend_on_the_order_its_slices_came_in() -> None:
    """Two slices of one pool and generation that disagree on the pool's slice count (a
    driver republishing it): dra_utilization takes the first's count, so the tracker once
    answered by the order of the events (a slice republished went last), and differently
    from ``stickypack inspect --dra``, whose list comes sorted by name. Now by name too."""
    readings = []
    for order in (("a", "b"), ("b", "a"), ("a", "b", "a")):
        cache = ClusterCache(dra=True)
        tracker = cache.dra
        assert tracker is not None
        cache.node_event("ADDED", node("n1"))
        slices = {"a": device_slice("a", "n1", 2, count=2), "b": device_slice("b", "n1", 2, count=1)}
        for k, name in enumerate(order):
            tracker.slice_event("MODIFIED" if k >= 2 else "ADDED", slices[name])
        readings.append(column(cache, "n1"))
    # "a" first: 2 slices wanted, 2 there (complete: 0 of 4 devices used)
    assert readings == [(1.0, 0.0)] * 3


@pytest.mark.parametrize("seed", range(40))
def test_the_tables_readings_match_a_reading_from_scratch_after_any_events(seed: int) -> None:
    """Random events (nodes added, deleted and added again; slices published, moved between
    nodes and pools, republished with a new generation, deleted; claims allocated,
    deallocated, deleted; pods bound with claims, moved, their claims changed, ended,
    deleted; a claim used by pods on several nodes), refreshed now and then: each node's
    columns are always those of dra_utilization over everything as it is then, so no event
    leaves a node it changed unmarked, and nothing is kept of what went."""
    import random

    from stickypack.core.dra import dra_utilization
    from stickypack.core.pod import Pod

    rnd = random.Random(seed)
    cache = ClusterCache(dra=True)
    tracker = cache.dra
    assert tracker is not None
    nodes, claims_names, pod_names = ["n0", "n1", "n2"], ["c0", "c1", "c2"], ["a", "b", "c", "d"]
    slices: dict[str, dict[str, Any]] = {}
    claims: dict[str, dict[str, Any]] = {}
    pods: dict[str, dict[str, Any]] = {}

    def check() -> None:
        cache.refresh_dra()
        by_node: dict[str, list[Pod]] = {}
        for obj in pods.values():
            by_node.setdefault(obj["spec"]["nodeName"], []).append(Pod.from_dict(obj))
        ordered = [slices[k] for k in sorted(slices)]
        want = dra_utilization(ordered, list(claims.values()), by_node).nodes
        assert set(tracker.readings) == set(want)
        for name in list(cache.table.index):
            reading = want.get(name)
            expected = (0.0, 0.0) if reading is None else (1.0, reading.utilization)
            if reading is not None and reading.error is not None:
                expected = (1.0, float("inf"))
            assert column(cache, name) == expected, (name, reading)
        used = {(p.namespace, c) for ps in by_node.values() for p in ps for c in p.resource_claims if c}
        assert set(tracker._claim_nodes) == used  # nothing kept of pods gone
        assert set(tracker._node_slices) == {
            s["spec"]["nodeName"] for s in slices.values() if "nodeName" in s["spec"]
        }

    for _ in range(150):
        op = rnd.randrange(10)
        if op == 0:
            cache.node_event("ADDED", node(rnd.choice(nodes)))
        elif op == 1:
            cache.node_event("DELETED", node(rnd.choice(nodes)))
        elif op == 2:
            name, pool, generation = rnd.choice("stuv"), rnd.choice(["p0", "p1"]), rnd.choice([1, 2])
            obj = device_slice(name, rnd.choice([*nodes, None]), rnd.randint(1, 4), pool=pool)
            obj["spec"]["pool"]["generation"] = generation
            obj["spec"]["pool"]["resourceSliceCount"] = 2 if (pool, generation) == ("p1", 2) else 1
            tracker.slice_event("MODIFIED" if name in slices else "ADDED", obj)
            slices[name] = obj
        elif op == 3 and slices:
            tracker.slice_event("DELETED", slices.pop(rnd.choice(sorted(slices))))
        elif op == 4:
            name = rnd.choice(claims_names)
            devices = [f"g{rnd.randrange(4)}" for _ in range(rnd.randint(0, 3))]
            obj = claim(name, *devices, pool=rnd.choice(["p0", "p1"]))
            if rnd.random() < 0.2:
                obj["status"]["allocation"] = None
            tracker.claim_event("MODIFIED" if name in claims else "ADDED", obj)
            claims[name] = obj
        elif op == 5 and claims:
            tracker.claim_event("DELETED", claims.pop(rnd.choice(sorted(claims))))
        elif op in (6, 7):
            name = rnd.choice(pod_names)
            obj = pod(name, rnd.choice(nodes), *rnd.sample(claims_names, rnd.randint(0, 2)))
            cache.pod_event("MODIFIED" if name in pods else "ADDED", obj)
            pods[name] = obj
        elif op == 8 and pods:
            name = rnd.choice(sorted(pods))
            obj = pods.pop(name)
            if rnd.random() < 0.5:
                cache.pod_event("DELETED", obj)
            else:
                cache.pod_event("MODIFIED", {**obj, "status": {"phase": "Succeeded"}})
        else:
            check()
    check()


def test_a_slimmed_partitionable_pool_reads_as_the_whole_one() -> None:
    """What the extender's informers keep of a partitionable pool (``slim_resource_slice``:
    its ``sharedCounters`` and each device's ``consumesCounters``) weighs the node as the
    objects as served do. Counter sets gpu-0 and gpu-1 of memory 4; partitions p0 (4 of
    gpu-0), p1 and p2 (2 each of gpu-1); the pod's claim holds p0: gpu-0 at 4/4 = 1, gpu-1
    at 0/4 = 0, so (1 + 0) / 2 = 0.5 (as an atomic pool it would be 1 of 3 devices, 0.33;
    with no counters consumed, 0)."""
    from stickypack.core.dra import dra_utilization
    from stickypack.core.pod import Pod
    from stickypack.kube.dra import slim_resource_claim, slim_resource_slice

    def partition(name: str, counter_set: str, memory: str) -> dict[str, Any]:
        consumed = {"memory": {"value": memory}}
        return {
            "name": name,
            "attributes": {"x": {"int": 1}},
            "consumesCounters": [{"counterSet": counter_set, "counters": consumed}],
        }

    raw = device_slice("s", "n1", 0)
    raw["spec"]["devices"] = [
        partition("p0", "gpu-0", "4"),
        partition("p1", "gpu-1", "2"),
        partition("p2", "gpu-1", "2"),
    ]
    raw["spec"]["sharedCounters"] = [
        {"name": f"gpu-{k}", "counters": {"memory": {"value": "4"}}} for k in range(2)
    ]
    raw_claim = claim("c", "p0")
    raw_pod = pod("user", "n1", "c")
    cache = ClusterCache(dra=True)
    tracker = cache.dra
    assert tracker is not None
    cache.node_event("ADDED", node("n1"))
    tracker.slice_event("ADDED", slim_resource_slice(raw))
    tracker.claim_event("ADDED", slim_resource_claim(raw_claim))
    cache.pod_event("ADDED", raw_pod)
    assert column(cache, "n1") == (1.0, 0.5)
    whole = dra_utilization([raw], [raw_claim], {"n1": [Pod.from_dict(raw_pod)]})
    assert whole.nodes["n1"].utilization == 0.5


def test_a_pod_whose_claim_name_is_not_known_yet_leaves_nothing_behind() -> None:
    """A pod's claim made from a template has no name until the claim is created
    (``status.resourceClaimStatuses``): "" is no claim of the cluster, so nothing is kept for
    it, and nothing stays once the pod is gone (node n1 cannot be weighed meanwhile: +inf)."""
    cache = ClusterCache(dra=True)
    tracker = cache.dra
    assert tracker is not None
    cache.node_event("ADDED", node("n1"))
    tracker.slice_event("ADDED", device_slice("s", "n1", 2))
    unnamed = pod("user", "n1")
    unnamed["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "t"}]
    cache.pod_event("ADDED", unnamed)
    assert column(cache, "n1") == (1.0, float("inf"))
    assert tracker._claim_nodes == {}
    cache.pod_event("DELETED", unnamed)
    assert column(cache, "n1") == (1.0, 0.0)
    assert tracker._claim_nodes == {} and tracker._node_pods == {}


def test_computed_counts_every_node_reading_computed() -> None:
    """The ``stickypack_extender_dra_node_readings`` counter: two nodes' slices published,
    refreshed (2 readings), then one claim event on a pod's node (1 more): 3."""
    cache = ClusterCache(dra=True)
    tracker = cache.dra
    assert tracker is not None
    for name in ("n1", "n2"):
        cache.node_event("ADDED", node(name))
        tracker.slice_event("ADDED", device_slice(name, name, 2, pool=name))
    cache.pod_event("ADDED", pod("user", "n1", "c"))
    assert tracker.refresh() == 2 and tracker.computed == 2
    tracker.claim_event("ADDED", claim("c", "g0", pool="n1"))
    assert tracker.refresh() == 1 and tracker.computed == 3
    assert column(cache, "n1") == (1.0, 0.5)


def test_the_problems_remembered_as_logged_are_bounded(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Each unreadable slice is logged once; past ``_MAX_LOGGED`` (2 here) problems the memory
    of them is cleared, so it never holds more, and a problem forgotten is logged again."""
    import stickypack.kube.dra as kube_dra

    monkeypatch.setattr(kube_dra, "_MAX_LOGGED", 2)
    cache = ClusterCache(dra=True)
    tracker = cache.dra
    assert tracker is not None

    def bad(name: str) -> dict[str, Any]:
        obj = device_slice(name, name, 1, pool=name)
        obj["spec"]["devices"] = "not a list"
        return obj

    with caplog.at_level(logging.WARNING):
        for name in ("n1", "n2", "n3", "n1", "n3"):
            tracker.slice_event("MODIFIED", bad(name))
            tracker.refresh()
            assert len(tracker._logged) <= 2
    logged = [r.getMessage() for r in caplog.records if r.getMessage().startswith("DRA: ")]
    # n1, n2 logged; n3 clears the memory (2 remembered) and is logged; n1 again is new
    # (forgotten), n3 again is not (remembered with n1)
    assert [m.split()[2].rstrip(":") for m in logged] == ["n1", "n2", "n3", "n1"], logged
