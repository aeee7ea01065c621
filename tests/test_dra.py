"""DRA utilization (core.dra): the cluster-autoscaler's ``HighestDynamicResourceUtilization``
computed from ResourceSlice and ResourceClaim dicts as the API serves them."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from stickypack.core.dra import NodeDra, dra_utilization
from stickypack.core.explain import node_report
from stickypack.core.nodetable import NodeTable
from stickypack.core.plugins.scaledown import DRA_GPU_LABEL
from stickypack.core.pod import Pod
from stickypack.testing import pod_manifest

DRIVER = "gpu.example.com"


def _slice(
    name: str,
    node: str | None,
    devices: list[dict[str, Any]],
    pool: str | None = None,
    driver: str = DRIVER,
    generation: int = 1,
    count: int = 1,
    shared: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "driver": driver,
        "pool": {"name": pool or node or "shared", "generation": generation, "resourceSliceCount": count},
        "devices": devices,
    }
    if node is not None:
        spec["nodeName"] = node
    else:
        spec["allNodes"] = True
    if shared is not None:
        spec["sharedCounters"] = shared
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": spec,
    }


def _devices(*names: str) -> list[dict[str, Any]]:
    return [{"name": n} for n in names]


def _claim(name: str, *devices: tuple[str, str], driver: str = DRIVER, **extra: Any) -> dict[str, Any]:
    """A claim allocated the ``(pool, device)`` pairs."""
    results = [{"request": "r", "driver": driver, "pool": pool, "device": d, **extra} for pool, d in devices]
    return {
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"devices": {"requests": []}},
        "status": {"allocation": {"devices": {"results": results}}},
    }


def test_atomic_pool_allocated_over_all_devices() -> None:
    slices = [_slice("a", "n1", _devices("g0", "g1", "g2", "g3"))]
    reading = dra_utilization(slices, [_claim("c", ("n1", "g1"))])
    assert reading.problems == []
    node = reading.nodes["n1"]
    assert (node.utilization, node.pool, node.error) == (0.25, f"{DRIVER}/n1", None)


def test_highest_of_two_pools_wins() -> None:
    slices = [
        _slice("a", "n1", _devices("g0", "g1", "g2", "g3"), pool="p-a"),
        _slice("b", "n1", _devices("x0", "x1"), pool="p-b", driver="nic.example.com"),
    ]
    claims = [_claim("c", ("p-a", "g0")), _claim("d", ("p-b", "x1"), driver="nic.example.com")]
    node = dra_utilization(slices, claims).nodes["n1"]
    assert (node.utilization, node.pool) == (0.5, "nic.example.com/p-b")
    assert node.pools == {f"{DRIVER}/p-a": 0.25, "nic.example.com/p-b": 0.5}


def test_admin_access_and_unallocated_claims_reserve_nothing() -> None:
    slices = [_slice("a", "n1", _devices("g0", "g1"))]
    unallocated = {"metadata": {"name": "u", "namespace": "default"}, "status": {}}
    claims = [_claim("admin", ("n1", "g0"), adminAccess=True), unallocated]
    reading = dra_utilization(slices, claims)
    assert reading.nodes["n1"].utilization == 0 and reading.problems == []


def test_partitionable_pool_averages_counter_sets_most_consumed_counter() -> None:
    """Two GPUs as counter sets (memory 40Gi, 100 compute units each), partitions consuming
    them: on gpu-0 a partition of 30Gi and 20 units (memory 75%), on gpu-1 one of 10Gi and 50
    units (compute 50%): the pool is (75% + 50%) / 2."""

    def gpu(name: str) -> dict[str, Any]:
        return {"name": name, "counters": {"memory": {"value": "40Gi"}, "compute": {"value": "100"}}}

    def part(name: str, gpu_name: str, memory: str, compute: str) -> dict[str, Any]:
        consumed = {"memory": {"value": memory}, "compute": {"value": compute}}
        return {"name": name, "consumesCounters": [{"counterSet": gpu_name, "counters": consumed}]}

    counters = _slice("counters", "n1", [], count=2, shared=[gpu("gpu-0"), gpu("gpu-1")])
    parts = _slice(
        "parts",
        "n1",
        [
            part("gpu-0-big", "gpu-0", "30Gi", "20"),
            part("gpu-0-small", "gpu-0", "10Gi", "10"),
            part("gpu-1-big", "gpu-1", "10Gi", "50"),
        ],
        count=2,
    )
    claims = [_claim("c", ("n1", "gpu-0-big"), ("n1", "gpu-1-big"))]
    node = dra_utilization([counters, parts], claims).nodes["n1"]
    assert node.utilization == pytest.approx((0.75 + 0.5) / 2) and node.error is None


def test_a_counter_consumed_past_a_floats_range_weighs_its_node_as_full_not_an_exception() -> None:
    """A partition consuming a counter written with 400 digits (the API server takes any
    length) over a set of 4: the autoscaler's AsApproximateFloat64 makes it +Inf, so the
    node is busy. Its float once raised OverflowError out of dra_utilization, and so out of
    each of the extender's decisions (``cluster.dra``). parse_quantity now saturates such a
    number at 1e40, as it does a huge exponent: the node's reading is that over the set's 4,
    shared by its two sets (busy), and with both partitions claimed twice that. A ratio past
    a float's range (a 100-digit number with an exponent over a tiny fraction) reads as the
    largest float (busy, and a number a JSON report can hold)."""
    huge = "1" + "0" * 400
    sets = [{"name": f"gpu-{k}", "counters": {"memory": {"value": "4"}}} for k in range(2)]
    parts = [
        {
            "name": f"p{k}",
            "consumesCounters": [{"counterSet": f"gpu-{k}", "counters": {"memory": {"value": huge}}}],
        }
        for k in range(2)
    ]
    slices = [_slice("s", "n1", parts, shared=sets)]
    for claimed in (("p0",), ("p0", "p1")):
        reading = dra_utilization(slices, [_claim("c", *(("n1", p) for p in claimed))])
        node = reading.nodes["n1"]
        assert (node.error, reading.problems) == (None, [])
        assert node.utilization == pytest.approx(1e40 / 4 / 2 * len(claimed))
    # A ratio past a float's range still: 1e240 consumed of a set of 1e-238.
    sets[0]["counters"]["memory"]["value"] = "0." + "0" * 97 + "1e-140"
    parts[0]["consumesCounters"][0]["counters"]["memory"]["value"] = "9" * 100 + "e140"
    reading = dra_utilization([_slice("s", "n1", parts, shared=sets)], [_claim("c", ("n1", "p0"))])
    assert (reading.nodes["n1"].utilization, reading.nodes["n1"].error) == (
        float(np.finfo(np.float64).max),
        None,
    )


def test_incomplete_pool_is_an_error_for_its_node_and_old_generations_are_dropped() -> None:
    slices = [
        _slice("new-1", "n1", _devices("g0", "g1"), generation=2, count=2),
        _slice("old-1", "n1", _devices("g0"), generation=1, count=1),
        _slice("n2-a", "n2", _devices("g0", "g1"), generation=3, count=1),
        _slice("n2-old", "n2", _devices("g0", "g1", "g2", "g3"), generation=2, count=1),
    ]
    reading = dra_utilization(slices, [_claim("c", ("n2", "g0"))])
    n1 = reading.nodes["n1"]
    assert n1.error == f"pool {DRIVER}/n1 incomplete: generation 2 has 1 of 2 slices" and n1.pool is None
    assert (reading.nodes["n2"].utilization, reading.nodes["n2"].error) == (0.5, None)


def test_a_claim_on_another_nodes_pool_and_slices_of_no_node_are_ignored() -> None:
    slices = [
        _slice("a", "n1", _devices("g0", "g1")),
        _slice("b", "n2", _devices("g0", "g1")),
        _slice("net", None, _devices("g0")),
    ]
    reading = dra_utilization(slices, [_claim("c", ("n2", "g0"), ("n2", "g1"))])
    assert reading.nodes["n1"].utilization == 0 and reading.nodes["n2"].utilization == 1
    assert set(reading.nodes) == {"n1", "n2"}


def test_malformed_objects_are_left_out_with_a_problem_each() -> None:
    good = _slice("good", "n1", _devices("g0", "g1"))
    no_pool = _slice("no-pool", "n2", _devices("g0"))
    del no_pool["spec"]["pool"]
    bad_generation = _slice("bad-gen", "n3", _devices("g0"), generation=-1)
    bad_counter = _slice("bad-counter", "n4", [], shared=[{"name": "s", "counters": {"m": {"value": "x"}}}])
    bad_claim = _claim("bad", ("n1", "g0"))
    bad_claim["status"]["allocation"]["devices"]["results"][0]["device"] = 7
    reading = dra_utilization(
        [good, no_pool, bad_generation, bad_counter, "not an object"],  # type: ignore[list-item]
        [bad_claim, _claim("ok", ("n1", "g1")), {"status": {"allocation": []}}],
    )
    assert set(reading.nodes) == {"n1"} and reading.nodes["n1"].utilization == 0.5
    assert reading.problems == [
        "ResourceClaim default/bad: status.allocation.devices.results[0].device is not a name; left out",
        "ResourceClaim (unnamed): status.allocation is not an object; left out",
        "ResourceSlice no-pool: spec.pool is not an object; left out",
        "ResourceSlice bad-gen: spec.pool.generation is not an integer >= 0; left out",
        "ResourceSlice bad-counter: spec.sharedCounters.m.value 'x' is not a quantity; left out",
        "ResourceSlice (unnamed): the object is not an object; left out",
    ]


def test_node_report_weighs_nodes_with_slices_by_their_pools_in_the_autoscalers_order() -> None:
    """A cpu node with slices is weighed by its pool (its cpu does not count); a node with a
    GPU resource by that resource still; a GPU node labelled as exposed via DRA by its pool,
    at the GPU threshold; an incomplete pool keeps its node (``incomplete``); without DRA
    nothing changes."""
    gi = 1024**3
    table = NodeTable()
    for name, extra, labels in [
        ("dra", {}, {}),
        ("plain", {}, {}),
        ("gpu", {"nvidia.com/gpu": 4}, {}),
        ("gke-dra", {}, {"cloud.google.com/gke-accelerator": "nvidia-l4", DRA_GPU_LABEL: "true"}),
        ("broken", {}, {}),
    ]:
        table.upsert_node(name, {"cpu": 4000, "memory": 16 * gi, "pods": 110, **extra}, labels=labels)
    pods: dict[str, list[Pod]] = {}
    for node in ("dra", "plain", "gpu", "gke-dra", "broken"):
        raw = pod_manifest(f"p-{node}", cpu="3", memory="1Gi")
        pod = Pod.from_dict(raw)
        table.add_pod(table.index[node], pod)
        pods[node] = [pod]
    slices = [
        _slice("dra", "dra", _devices("g0", "g1", "g2", "g3")),
        _slice("gpu", "gpu", _devices("g0", "g1")),
        _slice("gke-dra", "gke-dra", _devices("g0", "g1")),
        _slice("broken", "broken", _devices("g0"), count=2),
    ]
    claims = [_claim("c1", ("dra", "g0")), _claim("c2", ("gpu", "g0")), _claim("c3", ("gke-dra", "g0"))]
    dra = dra_utilization(slices, claims).nodes
    reports = {r.node: r for r in node_report(table, pods, dra=dra)}
    assert (reports["dra"].cpu, reports["dra"].dra, reports["dra"].utilization) == (0.75, 0.25, 0.25)
    assert reports["dra"].dra_pool == f"{DRIVER}/dra" and reports["dra"].verdict(0.5) == "pinned"
    assert (reports["plain"].dra, reports["plain"].utilization, reports["plain"].verdict(0.5)) == (
        None,
        0.75,
        "busy",
    )
    assert (reports["gpu"].dra, reports["gpu"].utilization) == (None, 0.0)  # its GPU resource first
    gke = reports["gke-dra"]
    assert (gke.gpu, gke.dra, gke.utilization) == (0.0, 0.5, 0.5)
    assert gke.verdict(0.6, 0.4) == "busy" and gke.verdict(0.4, 0.6) == "pinned"  # the GPU threshold
    broken = reports["broken"]
    assert broken.dra is None and broken.dra_error is not None and "1 of 2 slices" in broken.dra_error
    assert broken.verdict(0.5) == "incomplete"
    without = {r.node: r for r in node_report(table, pods)}
    assert without["dra"].utilization == 0.75 and without["broken"].verdict(0.5) == "busy"
    assert all(r.dra is None for r in without.values())
    # DRA off, the autoscaler still skips the GPU branch for a GPU exposed via DRA
    # (GpuConfig.ExposedViaDra): cpu and memory weigh it, against the GPU threshold
    assert (without["gke-dra"].gpu, without["gke-dra"].utilization) == (0.0, 0.75)
    assert without["gke-dra"].verdict(0.5, 0.8) == "pinned" and without["gke-dra"].verdict(0.8, 0.5) == "busy"


def _pod_with_claims(name: str, *refs: dict[str, Any], statuses: list[dict[str, Any]] | None = None) -> Pod:
    raw = pod_manifest(name, cpu="100m", memory="100Mi")
    raw["spec"]["resourceClaims"] = list(refs)
    if statuses is not None:
        raw["status"] = {"resourceClaimStatuses": statuses}
    return Pod.from_dict(raw)


def test_pods_claims_are_named_as_the_autoscaler_names_them() -> None:
    """``resourceClaimName``, else the name the pod's status gives its template's claim; ""
    while the status has none (the autoscaler's ``claimRefToName``)."""
    pod = _pod_with_claims(
        "p",
        {"name": "a", "resourceClaimName": "shared"},
        {"name": "b", "resourceClaimTemplateName": "t"},
        {"name": "c", "resourceClaimTemplateName": "t"},
        statuses=[{"name": "b", "resourceClaimName": "p-b-x7k2q"}, {"name": "c"}],
    )
    assert pod.resource_claims == ("shared", "p-b-x7k2q", "")
    assert _pod_with_claims("q").resource_claims == ()
    raw = pod_manifest("odd", cpu="100m", memory="100Mi")
    raw["spec"]["resourceClaims"] = ["not a mapping", {"name": "x", "resourceClaimName": 7}]
    raw["status"] = ["not a mapping"]
    assert Pod.from_dict(raw).resource_claims == ("",)  # read, never a failed pod
    # names of other types (unhashable ones too), lists that are not lists
    raw["spec"]["resourceClaims"] = [{"name": ["x"], "resourceClaimTemplateName": "t"}, {"name": "y"}]
    raw["status"] = {"resourceClaimStatuses": [{"name": {"y": 1}, "resourceClaimName": "z"}]}
    assert Pod.from_dict(raw).resource_claims == ("", "")
    raw["spec"]["resourceClaims"], raw["status"] = 5, {"resourceClaimStatuses": 5}
    assert Pod.from_dict(raw).resource_claims == ()


def test_with_the_pods_given_only_their_claims_count_on_their_node() -> None:
    """As the autoscaler's ``NodeInfo.ResourceClaims``: a claim allocated on a node's pool
    that no pod on the node uses (its pod gone, or allocated ahead) does not count; the
    claims of the node's pods do, once each however many pods share one; a claim of theirs
    that is not allocated, cannot be found or has no name yet keeps the node unweighed."""
    slices = [
        _slice("n1", "n1", _devices("g0", "g1", "g2", "g3")),
        _slice("n2", "n2", _devices("g0", "g1")),
        _slice("n3", "n3", _devices("g0", "g1")),
    ]
    unallocated = {"metadata": {"name": "pending", "namespace": "default"}, "status": {}}
    claims = [
        _claim("used", ("n1", "g0"), ("n1", "g1")),
        _claim("orphan", ("n1", "g2")),
        _claim("other-ns", ("n2", "g0")) | {"metadata": {"name": "used", "namespace": "team"}},
        unallocated,
    ]
    on_n1 = [
        _pod_with_claims("a", {"name": "gpu", "resourceClaimName": "used"}),
        _pod_with_claims("b", {"name": "gpu", "resourceClaimName": "used"}),
    ]
    everything = dra_utilization(slices, claims).nodes
    assert everything["n1"].utilization == 0.75 and everything["n2"].utilization == 0.5
    reading = dra_utilization(
        slices,
        claims,
        {
            "n1": on_n1,
            "n2": [_pod_with_claims("c", {"name": "gpu", "resourceClaimName": "pending"})],
            "n3": [
                _pod_with_claims("d", {"name": "gpu", "resourceClaimName": "gone"}),
                _pod_with_claims("e", {"name": "gpu", "resourceClaimTemplateName": "t"}, statuses=[]),
            ],
        },
    )
    n1, n2, n3 = (reading.nodes[n] for n in ("n1", "n2", "n3"))
    assert (n1.utilization, n1.error) == (0.5, None)  # "used" once, not "orphan"
    assert n2.error == "ResourceClaim default/pending not allocated"  # team/used is not default's
    assert n3.error == (
        "pod default/d: ResourceClaim gone not found; "
        "pod default/e: ResourceClaim (name not known yet) not found"
    )
    no_pods = dra_utilization(slices, claims, {}).nodes
    assert [no_pods[n].utilization for n in ("n1", "n2", "n3")] == [0.0, 0.0, 0.0]


def test_scale_down_aware_weighs_nodes_with_slices_by_their_pools_when_dra_is_on() -> None:
    """The table's DRA columns (``set_node_dra``, as the extender keeps them) read in the
    autoscaler's order with ``ctx.dra``: a cpu node with slices by its most used pool (3 of
    4 devices: busy, whatever its low cpu; 1 of 4: quiet, whatever its high cpu), a node
    with a GPU resource by that resource still, a GKE node whose GPUs DRA publishes by its
    pool at the GPU threshold, a node that cannot be weighed (an incomplete pool) as busy;
    the pod placed adds nothing to a pool. Without ``ctx.dra`` (and in a table without the
    columns) every node is weighed as before; one ScaleDownAware instance, its memo
    filling, scores each DRA state as a fresh one does."""
    from stickypack.core.dra import node_dra_columns, set_node_dra
    from stickypack.core.framework import SchedulingContext
    from stickypack.core.plugins import ScaleDownAware, quiet_nodes, utilization_and_threshold

    gi = 1024**3
    table = NodeTable()
    gke = {"cloud.google.com/gke-accelerator": "nvidia-l4", DRA_GPU_LABEL: "true"}
    cpu_load = {"devices-busy": 500, "devices-idle": 3000, "gpu": 500, "gke-dra": 3000, "broken": 500}
    for name, extra, labels in [
        ("devices-busy", {}, {}),
        ("devices-idle", {}, {}),
        ("gpu", {"nvidia.com/gpu": 4}, {}),
        ("gke-dra", {}, gke),
        ("broken", {}, {}),
        ("plain", {}, {}),
    ]:
        row = table.upsert_node(name, {"cpu": 4000, "memory": 16 * gi, "pods": 110, **extra}, labels=labels)
        table.add_pod(row, Pod(f"p-{name}", requests={"cpu": cpu_load.get(name, 500), "memory": gi}))
    idx = table.active_indices()
    notebook = Pod("nb", requests={"cpu": 500, "memory": gi})
    off = SchedulingContext(gpu_labels=("cloud.google.com/gke-accelerator",), gpu_utilization_threshold=0.6)
    on = SchedulingContext(
        gpu_labels=off.gpu_labels, gpu_utilization_threshold=off.gpu_utilization_threshold, dra=True
    )
    before = utilization_and_threshold(notebook, table, idx, off)[0].tolist()
    assert before == [0.25, 0.875, 0.0, 0.875, 0.25, 0.25]
    assert node_dra_columns(table, idx) is None
    assert utilization_and_threshold(notebook, table, idx, on)[0].tolist() == before  # no columns yet
    slices = [
        _slice("devices-busy", "devices-busy", _devices("g0", "g1", "g2", "g3")),
        _slice("devices-idle", "devices-idle", _devices("g0", "g1", "g2", "g3")),
        _slice("gpu", "gpu", _devices("g0", "g1")),
        _slice("gke-dra", "gke-dra", _devices("g0", "g1")),
        _slice("broken", "broken", _devices("g0"), count=2),
    ]
    claims = [
        _claim("busy", ("devices-busy", "g0"), ("devices-busy", "g1"), ("devices-busy", "g2")),
        _claim("idle", ("devices-idle", "g0")),
        _claim("gpu", ("gpu", "g0"), ("gpu", "g1")),
        _claim("gke", ("gke-dra", "g0")),
    ]
    readings = dra_utilization(slices, claims).nodes
    for name in table.index:
        set_node_dra(table, table.index[name], readings.get(name))
    util, threshold = utilization_and_threshold(notebook, table, idx, on)
    assert util.tolist() == [0.75, 0.25, 0.0, 0.5, float("inf"), 0.25]
    assert np.asarray(threshold).tolist() == [0.5, 0.5, 0.6, 0.6, 0.5, 0.5]
    assert utilization_and_threshold(notebook, table, idx, off)[0].tolist() == before
    assert quiet_nodes(notebook, table, idx, on).tolist() == [False, True, True, True, False, True]
    assert quiet_nodes(notebook, table, idx, off).tolist() == [True, False, True, False, True, True]
    kept = ScaleDownAware()
    # devices-busy 100; devices-idle 20 * .25 / .5 = 10; gpu 0; gke-dra 20 * .5 / .6 = 16;
    # broken 100; plain 20 * .25 / .5 = 10
    assert kept.score(notebook, table, idx, on).tolist() == [100, 10, 0, 16, 100, 10]
    assert kept.score(notebook, table, idx, off).tolist() == [10, 100, 0, 100, 10, 10]
    # another claim allocated on devices-idle: 3 of 4 now, and the memo does not answer from before
    set_node_dra(table, table.index["devices-idle"], NodeDra(0.75, f"{DRIVER}/devices-idle"))
    assert kept.score(notebook, table, idx, on).tolist() == [100, 100, 0, 16, 100, 10]
    assert (
        kept.score(notebook, table, idx, on).tolist()
        == ScaleDownAware().score(notebook, table, idx, on).tolist()
    )
    # devices-busy's slices go: weighed by its cpu again, (500 + 500) / 4000
    set_node_dra(table, table.index["devices-busy"], None)
    assert kept.score(notebook, table, idx, on).tolist() == [10, 100, 0, 16, 100, 10]


@pytest.mark.filterwarnings("error")
def test_scale_down_aware_with_low_score_0_takes_an_unweighable_node_as_busy_without_a_warning() -> None:
    """A node the autoscaler cannot weigh is kept at +inf in the table: ``low_score * util``
    with ``low_score`` 0 once made it 0 * inf (numpy's "invalid value" RuntimeWarning on
    the extender's log, each process); it still scores 100."""
    from stickypack.core.dra import set_node_dra
    from stickypack.core.framework import SchedulingContext
    from stickypack.core.plugins import ScaleDownAware

    table = NodeTable()
    for name in ("unweighable", "quiet"):
        table.upsert_node(name, {"cpu": 4000, "memory": 1024**3, "pods": 110})
    set_node_dra(table, table.index["unweighable"], NodeDra(0.0, None, error="pool incomplete"))
    idx = table.active_indices()
    scores = ScaleDownAware(low_score=0).score(
        Pod("p", requests={"cpu": 100}), table, idx, SchedulingContext(dra=True)
    )
    assert scores.tolist() == [100, 0]


def test_a_slice_the_api_would_not_serve_is_a_problem_not_a_reading() -> None:
    """A boolean generation (Python's True is an int), an empty driver name, an empty
    ``nodeName`` (not "no node": a name that is not one) and a ``resourceSliceCount`` of 0
    (the API's minimum is 1) are each a problem line; the node is then not weighed by them."""
    boolean = _slice("boolean", "n1", _devices("g0"))
    boolean["spec"]["pool"]["generation"] = True
    no_driver = _slice("no-driver", "n2", _devices("g0"), driver="")
    no_node = _slice("no-node", "n3", _devices("g0"))
    no_node["spec"]["nodeName"] = ""
    none_counted = _slice("none-counted", "n4", _devices("g0"), count=0)
    reading = dra_utilization([boolean, no_driver, no_node, none_counted], [])
    assert reading.nodes == {}
    assert reading.problems == [
        "ResourceSlice boolean: spec.pool.generation is not an integer >= 0; left out",
        "ResourceSlice no-driver: spec.driver is not a name; left out",
        "ResourceSlice no-node: spec.nodeName is not a name; left out",
        "ResourceSlice none-counted: spec.pool.resourceSliceCount is not an integer >= 1; left out",
    ]


def test_a_pools_current_generation_must_have_exactly_its_slice_count() -> None:
    """As the autoscaler's ``allCurrentGenSlices`` (cluster-autoscaler
    simulator/dynamicresources/utils/utilization.go): the count wanted is the current
    generation's (its first slice's), and a generation with more slices than it says is
    an error as well as one with fewer. n1: an old generation of 2 slices listed first,
    the current one (2) of 1 slice, complete: 1 of 2 devices allocated, 0.5. n2:
    generation 1 has 2 slices each saying 1: "2 of 1"."""
    slices = [
        _slice("n1-old", "n1", _devices("g0"), generation=1, count=2),
        _slice("n1-new", "n1", _devices("g0", "g1"), generation=2, count=1),
        _slice("n2-a", "n2", _devices("g0"), count=1),
        _slice("n2-b", "n2", _devices("g1"), count=1),
    ]
    reading = dra_utilization(slices, [_claim("c", ("n1", "g1"))])
    assert (reading.nodes["n1"].utilization, reading.nodes["n1"].error) == (0.5, None)
    assert reading.nodes["n2"].error == f"pool {DRIVER}/n2 incomplete: generation 1 has 2 of 1 slices"


def test_an_atomic_pool_counts_only_the_devices_it_publishes() -> None:
    """n1 publishes g0-g3; a claim holds g0 and g9 (a device of an older generation, say):
    1 of 4 is allocated, 0.25 (the autoscaler's ``splitDevicesByAllocation`` splits the
    pool's devices). n2's slice publishes no device: 0, not a division by zero and not
    full."""
    slices = [_slice("a", "n1", _devices("g0", "g1", "g2", "g3")), _slice("b", "n2", [])]
    reading = dra_utilization(slices, [_claim("c", ("n1", "g0"), ("n1", "g9"))])
    assert reading.nodes["n1"].utilization == 0.25
    assert (reading.nodes["n2"].utilization, reading.nodes["n2"].pool, reading.nodes["n2"].error) == (
        0.0,
        f"{DRIVER}/n2",
        None,
    )


def _counter_set(name: str, **values: Any) -> dict[str, Any]:
    return {"name": name, "counters": {k: {"value": v} for k, v in values.items()}}


def _partition(name: str, counter_set: str, **values: Any) -> dict[str, Any]:
    consumed = {k: {"value": v} for k, v in values.items()}
    return {"name": name, "consumesCounters": [{"counterSet": counter_set, "counters": consumed}]}


def test_a_partitionable_pool_divides_by_the_counter_sets_its_devices_consume() -> None:
    """Three counter sets of memory 4; the devices consume gpu-0 (p0: 4) and gpu-1 (p1: 2),
    none gpu-2: 2 partitions. p0 allocated: gpu-0 at 4/4 = 1, gpu-1 and gpu-2 untouched at
    0, so (1 + 0 + 0) / 2 = 0.5 (not / 3 sets, and an untouched set is not full). A pool
    sharing counters whose devices consume none: 0."""
    sets = [_counter_set(f"gpu-{k}", memory="4") for k in range(3)]
    parts = [_partition("p0", "gpu-0", memory="4"), _partition("p1", "gpu-1", memory="2")]
    plain = _slice("plain", "n2", _devices("d0", "d1"), shared=[_counter_set("gpu-0", memory="4")])
    reading = dra_utilization([_slice("s", "n1", parts, shared=sets), plain], [_claim("c", ("n1", "p0"))])
    assert reading.problems == []
    assert reading.nodes["n1"].utilization == 0.5
    assert (reading.nodes["n2"].utilization, reading.nodes["n2"].error) == (0.0, None)


def test_a_counter_of_value_0_is_skipped_and_negative_consumption_counts_as_0() -> None:
    """As the autoscaler's ``calculatePartitionableDevicesPoolUtilization``: a counter whose
    total is 0 is skipped (written "0", or 0 as YAML reads it: a value all the same), so
    a partition of memory 1 (of 0) and compute 1 (of 4) is at 1/4; a set's most used
    counter starts at 0, so a negative consumption (-2 of 4, or one past a float's range)
    leaves its set at 0, not below."""
    zero = [_counter_set("gpu-0", memory=0, compute="4"), _counter_set("gpu-1", memory="0", compute="4")]
    parts = [_partition("p0", "gpu-0", memory="1", compute="1"), _partition("p1", "gpu-1", memory="1")]
    reading = dra_utilization(
        [_slice("s", "n1", parts, shared=zero)], [_claim("c", ("n1", "p0"), ("n1", "p1"))]
    )
    assert reading.problems == []
    assert reading.nodes["n1"].utilization == pytest.approx((0.25 + 0) / 2)  # p1 uses memory only
    negative = _slice(
        "s", "n1", [_partition("p0", "gpu-0", memory="-2")], shared=[_counter_set("gpu-0", memory="4")]
    )
    assert dra_utilization([negative], [_claim("c", ("n1", "p0"))]).nodes["n1"].utilization == 0.0
    # -(100 nines)e140 over 1e-238: a ratio past a float's range, -inf, still 0
    huge = _slice(
        "s",
        "n1",
        [_partition("p0", "gpu-0", memory="-" + "9" * 100 + "e140")],
        shared=[_counter_set("gpu-0", memory="0." + "0" * 97 + "1e-140")],
    )
    assert dra_utilization([huge], [_claim("c", ("n1", "p0"))]).nodes["n1"].utilization == 0.0


def test_an_unweighable_node_still_reports_its_complete_pools() -> None:
    """n1's pool p-a is complete (1 of 2 allocated, 0.5), p-b is missing a slice: the node
    is not weighed (error), and ``pools`` holds p-a alone (p-b has no utilization)."""
    slices = [
        _slice("a", "n1", _devices("g0", "g1"), pool="p-a"),
        _slice("b", "n1", _devices("x0"), pool="p-b", count=2),
    ]
    node = dra_utilization(slices, [_claim("c", ("p-a", "g0"))]).nodes["n1"]
    assert (node.utilization, node.pool) == (0.0, None) and node.error is not None
    assert node.pools == {f"{DRIVER}/p-a": 0.5}


def test_of_pools_tied_at_the_highest_the_first_by_name_is_the_nodes() -> None:
    """p-b and p-a both at 1 of 2: the node's pool is p-a (the first by name; the autoscaler
    takes one of them at random), whatever order the slices come in."""
    slices = [
        _slice("b", "n1", _devices("g0", "g1"), pool="p-b"),
        _slice("a", "n1", _devices("g0", "g1"), pool="p-a"),
    ]
    node = dra_utilization(slices, [_claim("c", ("p-b", "g0"), ("p-a", "g1"))]).nodes["n1"]
    assert (node.utilization, node.pool) == (0.5, f"{DRIVER}/p-a")


def test_with_the_pods_given_a_claim_counts_only_on_the_node_of_its_pod() -> None:
    """n1's pod uses a claim allocated on n2's pool (g0 of g0-g1); n2's pod uses none. As
    the autoscaler's ``NodeInfo.ResourceClaims`` (the claims of the node's own pods), n2's
    pool is at 0, not 1/2: what n1's pods reserve is not carried to the next node."""
    slices = [_slice("n1", "n1", _devices("g0", "g1")), _slice("n2", "n2", _devices("g0", "g1"))]
    pods = {
        "n1": [_pod_with_claims("a", {"name": "gpu", "resourceClaimName": "remote"})],
        "n2": [_pod_with_claims("b")],
    }
    reading = dra_utilization(slices, [_claim("remote", ("n2", "g0"))], pods)
    assert [reading.nodes[n].utilization for n in ("n1", "n2")] == [0.0, 0.0]
    assert dra_utilization(slices, [_claim("remote", ("n2", "g0"))]).nodes["n2"].utilization == 0.5
