"""The simulator's metrics (docs/simulator.md, "Metrics") on runs small enough to work out
on paper: every expected value is derived in the comments from the model's rules (scans
every 10 s, nodes Ready 210 s after the scan that asks for them, deleted at the first scan
600 s after the first scan that saw them empty), not read from the code's output."""

from __future__ import annotations

import dataclasses

import pytest

from stickypack.core.pod import Pod
from stickypack.core.resources import CPU, MEMORY, PODS
from stickypack.policies import load_builtin
from stickypack.sim.engine import RunResult, Simulation
from stickypack.sim.model import AutoscalerConfig, NodePool
from stickypack.sim.workloads import Job, LaunchJob, PodJob, Workload

GiB = 1024**3


def _pool(
    min_size: int, max_size: int = 10, name: str = "p", cpu_m: int = 4000, price: float = 0.47
) -> NodePool:
    """Nodes of ``cpu_m`` millicores, 16 GiB, 110 pods, Ready 210 s after the scale-up."""
    allocatable = {CPU: cpu_m, MEMORY: 16 * GiB, PODS: 110}
    return NodePool(
        name=name, allocatable=allocatable, price_per_hour=price, min_size=min_size, max_size=max_size
    )


def _pod(name: str, t: float, cpu_m: int, duration: float, node: str | None = None) -> PodJob:
    """A bare pod of ``cpu_m`` millicores and 1 GiB created at ``t``, running ``duration`` s
    once bound (on the node named ``node`` only, if given)."""
    selector = {"kubernetes.io/hostname": node} if node else {}
    pod = Pod(
        name=name,
        requests={CPU: cpu_m, MEMORY: GiB},
        nonzero_cpu=cpu_m,
        nonzero_memory=GiB,
        node_selector=selector,
    )
    return PodJob(t, pod, duration=duration)


def _run(jobs: list[Job], pools: list[NodePool], autoscaler: AutoscalerConfig | None = None) -> RunResult:
    workload = Workload("by-hand", jobs, pools)
    return Simulation(load_builtin("default"), workload, seed=0, autoscaler=autoscaler).run()


def _lives(result: RunResult) -> list[tuple[float, float | None]]:
    """Each node's (ready, deleted) times, in that order (None: up at the end)."""
    lives = ((n.ready_at, n.deleted_at) for n in result.nodes)
    return sorted(lives, key=lambda life: (life[0], life[1] if life[1] is not None else float("inf")))


def test_node_hours_bound_floor_and_pending_of_a_scale_up_and_a_scale_down() -> None:
    # delay-after-add (300 s) unlike unneeded-time (600 s): the floor's window is the latter
    ca = AutoscalerConfig(scale_down_delay_after_add_s=300.0)
    jobs = [
        _pod("a", 0.0, 3000, 1000.0),  # node 1 (min_size 1, up from 0): 0-1000
        _pod("b", 5.0, 3000, 500.0),  # no room: node 2 asked at the 10 s scan, Ready 220: 220-720
        _pod("c", 30.0, 1000, 50.0),  # fills node 1 exactly: 30-80
        _pod("d", 2000.0, 1000, 100.0),  # node 1: 2000-2100, the last pod's end
    ]
    result = _run(jobs, [_pool(min_size=1)], ca)
    m = result.metrics
    # node 2, empty at the 720 s scan, goes at 720 + 600 = 1320; node 1 stays (min_size)
    assert _lives(result) == [(0.0, None), (220.0, 1320.0)]
    # node 1 0-2100, node 2 from its scale-up (10 s, not Ready at 220) to 1320
    node_s = 2100 + (1320 - 10)
    assert m["node_hours"] * 3600 == pytest.approx(node_s)  # 3410 s
    assert m["cost"] == pytest.approx(node_s / 3600 * 0.47)
    # the bound (4000m nodes): 1 over 0-220 (a; c fits beside it), 2 over 220-720 (a and b:
    # 6000m, and both above half a node), 1 over 720-1000, 0 over 1000-2000, 1 over 2000-2100
    bound_s = 220 * 1 + 500 * 2 + 280 * 1 + 100 * 1
    assert m["lower_bound_node_hours"] * 3600 == pytest.approx(bound_s)  # 1600 s
    # the floor: the bound's max over the last 600 s: 1 to 220, 2 to 720 + 600 = 1320, 1 to
    # 1000 + 600 = 1600, 0 to 2000, 1 to 2100
    floor_s = 220 * 1 + 1100 * 2 + 280 * 1 + 100 * 1
    assert m["floor_node_hours"] * 3600 == pytest.approx(floor_s)  # 2800 s
    assert m["ratio_to_bound"] == pytest.approx(node_s / bound_s)
    assert m["ratio_to_floor"] == pytest.approx(node_s / floor_s)
    assert (m["peak_nodes"], m["final_nodes"], m["lower_bound_final_nodes"]) == (2, 1, 1)
    assert (m["pods_scheduled"], m["pods_unscheduled"]) == (4, 0)
    # waits over every bound pod, those that did not wait too: 0, 0, 0 and b's 220 - 5 = 215;
    # numpy's p95 of 4 values sits 0.95 * 3 = 2.85 ranks in: 0 + 0.85 * 215
    assert m["pending_p95_s"] == pytest.approx(0.85 * 215)
    assert m["builds"] == 0 and m["build_cache_hit_rate"] == m["max_node_build_share"] == 0.0


def test_peak_counts_nodes_being_provisioned_and_a_deletion_ends_the_charge() -> None:
    ca = AutoscalerConfig(scale_down_delay_after_add_s=0.0)  # a deletion may follow a scale-up
    jobs = [
        _pod("x", 0.0, 3000, 5000.0),  # x and y need a node each: two asked at 10, Ready 220
        _pod("y", 0.0, 3000, 100.0),  # 220-320; its node, empty at the 320 s scan, goes at 920
        _pod("z", 905.0, 3000, 100.0, node="p-00003"),  # a third node, asked at 910: 1120-1220
    ]
    result = _run(jobs, [_pool(min_size=0)], ca)
    m = result.metrics
    # the third node, empty at the 1220 s scan, goes at 1820; x's stays to its end, 5220
    assert _lives(result) == [(220.0, 920.0), (220.0, None), (1120.0, 1820.0)]
    assert m["node_hours"] * 3600 == pytest.approx((5220 - 10) + (920 - 10) + (1820 - 910))
    # over 910-920 y's node is still up and the third one is being provisioned: 3 nodes
    assert (m["peak_nodes"], m["final_nodes"], m["lower_bound_final_nodes"]) == (3, 1, 1)
    # bound: 2 over 220-320 (x, y), 1 to 1120, 2 to 1220 (x, z), 1 to 5220
    assert m["lower_bound_node_hours"] * 3600 == pytest.approx(100 * 2 + 800 + 100 * 2 + 4000)
    # floor: 2 to 320 + 600 = 920, 1 to 1120, 2 to 1220 + 600 = 1820, 1 to 5220
    assert m["floor_node_hours"] * 3600 == pytest.approx(700 * 2 + 200 + 700 * 2 + 3400)


def test_build_metrics_of_a_first_build_a_hit_a_lost_cache_and_one_built_elsewhere() -> None:
    # A's builds on a pool that starts empty: 1000m builds, cold times given, a hit 30% of it
    jobs: list[Job] = [
        LaunchJob(0.0, "A", 50.0, True, 100.0),  # node 1 asked at 10, Ready 220: 220-320, first
        LaunchJob(330.0, "A", 50.0, True, 100.0),  # node 1 built A at 320: a hit, 330-360
        LaunchJob(2000.0, "A", 50.0, True, 200.0),  # node 1 gone (at 1010): node 2, 2220-2420
    ]
    result = _run(jobs, [_pool(min_size=0)])
    m = result.metrics
    # node 1 empty once the second session ends (360 + 50 = 410), deleted at 1010; node 2,
    # asked at the 2010 s scan (a pod created at a scan's instant waits for the next)
    assert _lives(result) == [(220.0, 1010.0), (2220.0, None)]
    assert m["node_hours"] * 3600 == pytest.approx((1010 - 10) + (2470 - 2010))  # to the last session's end
    assert m["builds"] == 3
    assert m["build_cache_hit_rate"] == pytest.approx(1 / 3)  # over every build, first ones too
    assert m["build_first_share"] == m["build_cache_lost_share"] == pytest.approx(1 / 3)
    assert m["build_elsewhere_share"] == 0.0
    # node 1 built twice and was where A's lost build had last been built
    by_age = sorted(result.nodes, key=lambda n: n.ready_at)
    assert [(n.builds, n.caches_lost) for n in by_age] == [(2, 1), (1, 0)]
    # the busiest node, deleted since, built 2 of the 3
    assert m["max_node_build_share"] == pytest.approx(2 / 3)
    # creation to completion, waiting included: 320 - 0, 360 - 330, 2420 - 2000
    assert result.series.build_durations == [320.0, 30.0, 420.0]
    assert m["build_p50_s"] == 320.0
    assert m["build_p95_s"] == pytest.approx(320 + 0.9 * 100)  # 0.95 * 2 = 1.9 ranks in
    # waits: the first and third builds 220 s each, the rest 0 (six pods): p95 4.75 ranks in
    assert m["pending_p95_s"] == pytest.approx(220.0)

    # two nodes for good; fillers leave room for a build on node 1 only, then on node 2 only
    jobs = [
        _pod("fill-2", 0.0, 3500, 5000.0, node="p-00002"),
        LaunchJob(10.0, "A", 50.0, True, 100.0),  # node 1: 10-110, first
        _pod("fill-1", 500.0, 3500, 5000.0, node="p-00001"),
        LaunchJob(600.0, "A", 50.0, True, 100.0),  # waits for room: node 2 at 5000, elsewhere
    ]
    m = _run(jobs, [_pool(min_size=2, max_size=2)]).metrics
    assert m["builds"] == 2 and m["build_cache_hit_rate"] == 0.0
    assert m["build_first_share"] == m["build_elsewhere_share"] == 0.5
    assert m["build_cache_lost_share"] == 0.0 and m["max_node_build_share"] == 0.5
    # build times 100 and 5100 - 600 = 4500: p50 halfway, p95 0.95 of the way
    assert (m["build_p50_s"], m["build_p95_s"]) == (pytest.approx(2300.0), pytest.approx(100 + 0.95 * 4400))


def test_nodes_asked_for_pods_that_never_fit_after_the_last_pod_ends_cost_nothing() -> None:
    # x selects a node that never exists; the autoscaler model (pool labels unmatched
    # against selectors) asks for a node for it at every scan that finds none on the way,
    # up to max_size: at 10 s and at 220 s. The run's figures stop at a's end, 100 s, and
    # the node asked at 220 s once counted -120 s, with 3 nodes at the peak.
    jobs = [_pod("a", 0.0, 1000, 100.0), _pod("x", 0.0, 1000, 100.0, node="nowhere")]
    m = _run(jobs, [_pool(min_size=1, max_size=3)]).metrics
    assert (m["pods_scheduled"], m["pods_unscheduled"]) == (1, 1)
    # node 1 over 0-100 and node 2 from its scale-up at 10 s to 100 s
    assert m["node_hours"] * 3600 == pytest.approx(100 + 90)
    assert m["cost"] == pytest.approx(190 / 3600 * 0.47)
    assert m["lower_bound_node_hours"] * 3600 == pytest.approx(100)  # a on one node
    assert m["ratio_to_bound"] == pytest.approx(1.9)
    assert (m["peak_nodes"], m["final_nodes"]) == (2, 2)  # node 2 was on its way at 100 s


def test_the_bound_with_pools_of_different_sizes_uses_the_largest_node() -> None:
    # a 6000m pod fits only the 8000m pool's nodes: one node, asked at 10 s, runs it 220-320.
    # Sized by the first pool's 2000m nodes the bound read 3 nodes, over the 1 the run used.
    small = _pool(min_size=0, name="small", cpu_m=2000, price=1.0)
    large = _pool(min_size=0, name="large", cpu_m=8000, price=3.0)
    for pools in ([small, large], [large, small]):
        result = _run([_pod("big", 0.0, 6000, 100.0)], pools)
        m = result.metrics
        assert [n.name for n in result.nodes] == ["large-00001"]
        assert m["node_hours"] * 3600 == pytest.approx(320 - 10)
        assert m["cost"] == pytest.approx((320 - 10) / 3600 * 3.0)  # at the large pool's price
        assert m["lower_bound_node_hours"] * 3600 == pytest.approx(100)
        assert m["ratio_to_bound"] == pytest.approx(3.1)


def test_the_bound_counts_pods_too_big_to_share_a_node() -> None:
    # three 2100m pods on 4000m nodes: 6300m fits two nodes' cpu, but no two of the pods fit
    # one node (over half each), so every placement needs three nodes for their 100 s; the
    # pool's three nodes (min_size, up from 0) run one each
    jobs = [_pod(f"p{i}", 0.0, 2100, 100.0) for i in range(3)]
    m = _run(jobs, [_pool(min_size=3, max_size=3)]).metrics
    assert m["node_hours"] * 3600 == pytest.approx(3 * 100)
    assert m["lower_bound_node_hours"] * 3600 == pytest.approx(3 * 100)
    assert m["ratio_to_bound"] == pytest.approx(1.0)
    assert m["lower_bound_final_nodes"] == 3


def test_least_waste_weighs_only_the_pods_its_new_nodes_would_take() -> None:
    # cluster-autoscaler's least-waste expander (expander/waste/waste.go) scores an option by
    # the unused cpu and memory fractions of the nodes it adds, over the pods placed on them;
    # pods that fit a node already on its way are not the option's (the autoscaler filters
    # them out before scale-up). Pool a: 4000m, 16 GiB; pool b: 2000m, 2 GiB.
    big = {CPU: 3000, MEMORY: GiB}  # fits only a
    wide = {CPU: 500, MEMORY: 3 * GiB}  # fits only a
    small = {CPU: 1000, MEMORY: GiB}  # fits either
    jobs = [
        PodJob(0.0, Pod(name="p1", requests=big, nonzero_cpu=3000, nonzero_memory=GiB), duration=1000.0),
        PodJob(15.0, Pod(name="p2", requests=wide, nonzero_cpu=500, nonzero_memory=3 * GiB), duration=1000.0),
        # deleted at 25 s, before the next scan: only the 20 s scan weighs it
        PodJob(15.0, Pod(name="p3", requests=small, nonzero_cpu=1000, nonzero_memory=GiB), end_at=25.0),
    ]
    a = NodePool(name="a", allocatable={CPU: 4000, MEMORY: 16 * GiB, PODS: 110}, min_size=0)
    b = NodePool(name="b", allocatable={CPU: 2000, MEMORY: 2 * GiB, PODS: 110}, min_size=0)
    result = _run(jobs, [a, b])
    # 10 s scan: p1 fits only a: a-00001, Ready at 220. 20 s scan: p1 and p2 fit a-00001's
    # room (4000m, 16 GiB: 3500m and 4 GiB taken), p3 needs a new node in either pool:
    #   a: 1 node for p3: (4000 - 1000) / 4000 + (16 - 1) / 16 = 0.75 + 0.9375 = 1.6875
    #   b: 1 node for p3: (2000 - 1000) / 2000 + (2 - 1) / 2 = 0.5 + 0.5 = 1.0
    # so b's node. (Counting p1 and p2 in a's option too, 4500m and 5 GiB on a 4000m node,
    # read a's waste as 0 + 11 / 16 = 0.6875 and chose a.)
    assert [n.name for n in result.nodes] == ["a-00001", "b-00002"]


def test_least_waste_weighs_a_capped_pool_by_the_nodes_it_may_add_and_ties_go_first() -> None:
    # p1 and p2 (3000m, 1 GiB) wait at the 10 s scan. Pool a (4000m, 16 GiB, max_size 1) can add one node,
    # for p1 only: (4000 - 3000) / 4000 + (16 - 1) / 16 = 0.25 + 0.9375 = 1.1875. Pool b
    # (8000m, 16 GiB) takes both on one node: (8000 - 6000) / 8000 + (16 - 2) / 16 = 1.125,
    # less: b's node. (Weighing a by both pods, 6000m on its one node, read 0.375.)
    a = NodePool(name="a", allocatable={CPU: 4000, MEMORY: 16 * GiB, PODS: 110}, min_size=0, max_size=1)
    b = NodePool(name="b", allocatable={CPU: 8000, MEMORY: 16 * GiB, PODS: 110}, min_size=0)
    # deleted at 15 s, before the next scan: only the 10 s scan weighs them
    jobs = [
        dataclasses.replace(_pod(name, 0.0, 3000, 0.0), duration=None, end_at=15.0) for name in ("p1", "p2")
    ]
    assert [n.name for n in _run(jobs, [a, b]).nodes] == ["b-00001"]
    # two pools alike tie: the one listed first gets the node (the autoscaler draws one)
    twin = NodePool(name="twin", allocatable=b.allocatable, min_size=0)
    for pools, first in (([b, twin], "b-00001"), ([twin, b], "twin-00001")):
        assert [n.name for n in _run(jobs, pools).nodes] == [first]
