"""The simulator's metrics (docs/simulator.md, "Metrics") on runs small enough to work out
on paper: every expected value is derived in the comments from the model's rules (scans
every 10 s, nodes Ready 210 s after the scan that asks for them, deleted at the first scan
600 s after the first scan that saw them empty), not read from the code's output."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from stickypack.core.pod import Pod
from stickypack.core.policy import policy_from_dict
from stickypack.core.resources import CPU, MEMORY, PODS
from stickypack.policies import load_builtin
from stickypack.sim.engine import RunResult, Simulation
from stickypack.sim.model import AutoscalerConfig, NodePool
from stickypack.sim.workloads import Job, LaunchJob, PodJob, TrimJob, Workload

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


class _Placements(Simulation):
    """A simulation that records each binding: (time, pod name, node name)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.placed: list[tuple[float, str, str]] = []

    def _bind(self, sp: Any, slot: int) -> None:
        self.placed.append((self.now, sp.pod.name, self.by_slot[slot].name))
        super()._bind(sp, slot)


def _placements(
    jobs: list[Job], pools: list[NodePool], policy: str = "default"
) -> tuple[_Placements, RunResult]:
    """The run of :func:`_run` (under the built-in ``policy``) and its bindings."""
    sim = _Placements(load_builtin(policy), Workload("by-hand", jobs, pools), seed=0)
    return sim, sim.run()


def test_a_pod_created_as_another_ends_is_placed_before_that_room_is_freed() -> None:
    # At one instant the workload's jobs come before the events (ends, nodes ready, scans):
    # b, created at 105 s as a ends there, sees a's node with a still on it (docs/simulator.md,
    # "Engine"). Two 4000m nodes for good: a 3000m on p-00001 (0-105 s), c 1000m on p-00002.
    jobs = [
        _pod("a", 0.0, 3000, 105.0, node="p-00001"),
        _pod("c", 0.0, 1000, 1000.0, node="p-00002"),
        _pod("b", 105.0, 2000, 50.0),  # 2000m: p-00001 has 1000m free until a's end
    ]
    sim, _ = _placements(jobs, [_pool(min_size=2, max_size=2)])
    # b fits only p-00002 (3000m free); after a's end the default profile's LeastAllocated
    # would have chosen the empty p-00001 (4000m free against 3000m; no scan between to
    # taint it as unneeded)
    assert sim.placed[-1] == (105.0, "b", "p-00002")


def test_a_trim_frees_its_room_for_waiting_pods_at_once() -> None:
    # One 4000m node (min_size = max_size = 1): w, a 3000m worker of group g, runs; x (3000m)
    # waits, and the autoscaler may add no node. The trim at 15 s keeps 0 of g's workers: w
    # goes and x is bound at 15 s, not at the next scan (20 s).
    jobs: list[Job] = [
        dataclasses.replace(_pod("w", 0.0, 3000, 1000.0), group="g"),
        _pod("x", 0.0, 3000, 100.0),
        TrimJob(15.0, "g", 0),
    ]
    sim, result = _placements(jobs, [_pool(min_size=1, max_size=1)])
    assert sim.placed == [(0.0, "w", "p-00001"), (15.0, "x", "p-00001")]
    # waits 0 and 15 s: numpy's p95 of 2 values sits 0.95 ranks in: 0.95 * 15; x runs 15-115 s
    m = result.metrics
    assert m["pending_p95_s"] == pytest.approx(0.95 * 15)
    assert m["node_hours"] * 3600 == pytest.approx(115.0)


def test_a_waiting_pod_is_not_held_up_by_one_that_selects_another_node() -> None:
    # Waiting pods of one shape fail alike, so after one fails the others of its shape are
    # skipped until the next event, and the retry goes on to the other shapes; the shape
    # includes the node selector. Two 4000m nodes for good, each full (3500m fillers); x1 and
    # x2 wait for p-00001, then y, of their requests, for p-00002.
    jobs = [
        _pod("f1", 0.0, 3500, 1000.0, node="p-00001"),
        _pod("f2", 0.0, 3500, 45.0, node="p-00002"),
        _pod("x1", 10.0, 1000, 100.0, node="p-00001"),
        _pod("x2", 12.0, 1000, 100.0, node="p-00001"),
        _pod("y", 20.0, 1000, 100.0, node="p-00002"),
    ]
    sim, _ = _placements(jobs, [_pool(min_size=2, max_size=2)])
    # f2's end at 45 s frees p-00002: the retry tries x1 (p-00001 still full), skips x2 and
    # binds y at once; x1 and x2 wait for f1's end at 1000 s
    assert sim.placed[2:] == [(45.0, "y", "p-00002"), (1000.0, "x1", "p-00001"), (1000.0, "x2", "p-00001")]


def test_a_waiting_pod_is_not_held_up_by_one_of_another_profile() -> None:
    # The shape that fails alike includes the profile: x's profile keeps off cordoned nodes
    # (NodeUnschedulable), y's does not. Two 4000m nodes for good, p-00002 cordoned; each
    # full (3500m fillers, y's profile) until f2 ends at 45 s. x waits, then y, of x's requests.
    policy = policy_from_dict(
        {
            "name": "two-profiles",
            "profiles": [
                {
                    "name": "strict",
                    "match": {"labels": {"tier": "strict"}},
                    "filters": ["NodeUnschedulable", "NodeResourcesFit"],
                    "score": [],
                },
                {"name": "loose", "filters": ["NodeResourcesFit"], "score": []},
            ],
        }
    )

    class Cordoned(_Placements):
        def _join(self, node: Any) -> None:
            super()._join(node)
            if node.name == "p-00002":
                self.table.unschedulable[node.slot] = True

    x = _pod("x", 10.0, 1000, 100.0)
    x.pod.labels = {"tier": "strict"}
    jobs = [
        _pod("f1", 0.0, 3500, 1000.0, node="p-00001"),
        _pod("f2", 0.0, 3500, 45.0, node="p-00002"),
        x,
        _pod("y", 20.0, 1000, 100.0),
    ]
    sim = Cordoned(policy, Workload("by-hand", jobs, [_pool(min_size=2, max_size=2)]), seed=0)
    sim.run()
    # f2's end at 45 s frees p-00002: the retry tries x first (p-00001 full, p-00002
    # cordoned for it), then y, which goes there at once; x waits for f1's end at 1000 s
    assert sim.placed[2:] == [(45.0, "y", "p-00002"), (1000.0, "x", "p-00001")]


def test_a_nodes_pod_slots_count_in_the_scale_up_and_the_bound() -> None:
    # Nodes of 4000m, 16 GiB and 2 pods; three 100m pods at 0 s, 100 s each. By cpu one node
    # would do, by pods it takes two: the 10 s scan asks for 2 (Ready at 220), the first takes
    # two pods and the second the third, 220-320 s; the run ends with the last pod, at 320 s.
    pool = NodePool(name="p", allocatable={CPU: 4000, MEMORY: 16 * GiB, PODS: 2}, min_size=0)
    result = _run([_pod(f"p{i}", 0.0, 100, 100.0) for i in range(3)], [pool])
    m = result.metrics
    assert _lives(result) == [(220.0, None), (220.0, None)]
    assert m["pending_p95_s"] == pytest.approx(220.0)
    # the bound: ceil(3 pods / 2) = 2 nodes over 220-320 s; node-hours to the last end, 320 s
    assert m["lower_bound_node_hours"] * 3600 == pytest.approx(2 * 100)
    assert m["node_hours"] * 3600 == pytest.approx(2 * (320 - 10))


def test_a_lost_cache_is_put_down_to_the_node_that_built_the_repo_last() -> None:
    # A's builds (1000m, cold 100 s, sessions 50 s) on a pool that starts empty:
    jobs: list[Job] = [
        LaunchJob(0.0, "A", 50.0, True, 100.0),  # p-00001 asked at 10, Ready 220: 220-320, first
        _pod("fill", 330.0, 3500, 370.0, node="p-00001"),  # 330-700: no room for a build
        # waits: p-00002 asked at the 350 s scan, Ready 560: 560-660, built elsewhere
        LaunchJob(340.0, "A", 50.0, True, 100.0),
        # both nodes empty by 710 s and gone 600 s later: p-00003, Ready 3220: lost
        LaunchJob(3000.0, "A", 50.0, True, 100.0),
    ]
    sim, result = _placements(jobs, [_pool(min_size=0)])
    m = result.metrics
    assert m["builds"] == 3
    assert (
        m["build_first_share"]
        == m["build_elsewhere_share"]
        == m["build_cache_lost_share"]
        == pytest.approx(1 / 3)
    )
    # the lost build's repo was last built on p-00002, not on p-00001 where it was first built
    by_age = sorted(result.nodes, key=lambda n: n.ready_at)
    assert [(n.name, n.ready_at, n.builds, n.caches_lost) for n in by_age] == [
        ("p-00001", 220.0, 1, 0),
        ("p-00002", 560.0, 1, 1),
        ("p-00003", 3220.0, 1, 0),
    ]
    # the build history forgot the deleted nodes; its last entry is dated at the build's end,
    # 3320 s, and lasts the history's TTL (7 days)
    ttl = 7 * 86400.0
    assert sim.history.nodes_for("A", 3320.0) == ["p-00003"]
    assert sim.history.nodes_for("A", 3320.0 + ttl) == ["p-00003"]
    assert sim.history.nodes_for("A", 3320.0 + ttl + 1) == []


def test_the_oracle_places_a_pod_where_it_extends_its_nodes_life_least() -> None:
    # The simulator writes each pod's expected end (creation or binding + duration) into an
    # annotation and keeps each node's expiry, the latest end of its pods; the oracle's
    # LifetimeAware (weight 20) scores 100 where the pod ends before its node's expiry, less
    # the more it would extend it; MostAllocated (weight 1) packs.
    jobs = [
        _pod("a", 0.0, 1000, 1000.0, node="p-00001"),  # p-00001 lives to 1000 s
        _pod("d", 0.0, 100, 50.0, node="p-00001"),  # a shorter pod leaves the expiry at 1000
        _pod("b", 0.0, 2000, 100.0, node="p-00002"),  # p-00002 lives to 100 s
        _pod("c", 10.0, 1000, 500.0),  # ends at 510 s
    ]
    sim, _ = _placements(jobs, [_pool(min_size=2, max_size=2)], "oracle")
    # c extends p-00001 by 0 s (score 100) and p-00002 by 410 s (0): 20 * 100 + 35 = 2035 on
    # p-00001 (MostAllocated: cpu 2100 / 4000 = 52.5%, memory 3 / 16 GiB = 18.75%, mean 35)
    # against 0 + 43 on p-00002 (cpu 75%, memory 12.5%). Had c's end been read as its
    # creation, or p-00001's expiry as d's 50 s, p-00002 would have won.
    assert sim.placed[-1] == (10.0, "c", "p-00001")


def test_the_oracle_forgets_the_end_of_a_retired_worker() -> None:
    # w, a worker of group g on p-00001 until 1000 s, is retired by the trim at 15 s: its end
    # no longer keeps p-00001 alive (its expiry drops to 0, no pod left), so c (17 s, ending at
    # 517 s) extends p-00001 by 500 s (score 0) and p-00002 (b to 100 s) by 417 s (16):
    # p-00002 wins, 20 * 16 + 43 against 0 + 15.
    jobs: list[Job] = [
        dataclasses.replace(
            _pod("w", 0.0, 1000, 0.0, node="p-00001"), duration=None, end_at=1000.0, group="g"
        ),
        _pod("b", 0.0, 2000, 100.0, node="p-00002"),
        TrimJob(15.0, "g", 0),
        _pod("c", 17.0, 1000, 500.0),
    ]
    sim, _ = _placements(jobs, [_pool(min_size=2, max_size=2)], "oracle")
    assert sim.placed[-1] == (17.0, "c", "p-00002")


def test_each_decision_starts_with_an_empty_scratch_cache() -> None:
    # ctx.cache is scratch space for one decision (core.framework.ScorePlugin.score): cleared
    # before a pod's creation (its mutators) and before each attempt to bind it, so a retry
    # that binds several waiting pods in a row clears it before each. Two 4000m nodes for
    # good, each 3500m taken by a worker of group g; p and q (1000m) wait; the trim at 15 s
    # retires both workers, and the retry scores p, then q, on both nodes; r comes at 20 s.
    import numpy as np

    from stickypack.core.framework import PodMutator, ScorePlugin
    from stickypack.core.policy import BUILTIN_PLUGINS

    seen: list[tuple[str, str, bool]] = []

    class ProbeScore(ScorePlugin):
        name = "ProbeScore"

        def score(self, pod: Pod, table: Any, idx: np.ndarray, ctx: Any) -> np.ndarray:
            seen.append(("score", pod.name, "probe" in ctx.cache))
            ctx.cache["probe"] = pod.name
            return np.zeros(idx.shape[0], dtype=np.int64)

    class ProbeMutate(PodMutator):
        name = "ProbeMutate"

        def mutate(self, pod: Pod, table: Any, ctx: Any) -> Pod:
            seen.append(("mutate", pod.name, "probe" in ctx.cache))
            ctx.cache["probe"] = pod.name
            return pod

    registry = BUILTIN_PLUGINS.with_plugins(
        scorers={"ProbeScore": ProbeScore}, mutators={"ProbeMutate": ProbeMutate}
    )
    profile = {
        "name": "p",
        "mutate": ["ProbeMutate"],
        "filters": ["NodeResourcesFit", "NodeAffinity"],
        "score": ["ProbeScore"],
    }
    policy = policy_from_dict({"name": "probed", "profiles": [profile]}, plugins=registry)
    jobs: list[Job] = [
        dataclasses.replace(_pod("w1", 0.0, 3500, 1000.0, node="p-00001"), group="g"),
        dataclasses.replace(_pod("w2", 0.0, 3500, 1000.0, node="p-00002"), group="g"),
        _pod("p", 1.0, 1000, 100.0),
        _pod("q", 2.0, 1000, 100.0),
        TrimJob(15.0, "g", 0),
        _pod("r", 20.0, 100, 100.0),
    ]
    sim = _Placements(policy, Workload("by-hand", jobs, [_pool(min_size=2, max_size=2)]), seed=0)
    sim.run()
    assert [name for _, name, _ in sim.placed] == ["w1", "w2", "p", "q", "r"]
    # w1 and w2 fit one node each: not scored (only one node is feasible)
    mutated = [("mutate", name, False) for name in ("w1", "w2", "p", "q")]
    assert seen == [
        *mutated,
        ("score", "p", False),
        ("score", "q", False),
        ("mutate", "r", False),
        ("score", "r", False),
    ]


def test_a_pod_that_fills_a_node_exactly_fits_it_in_the_scale_up() -> None:
    # p1 takes a whole 4000m node: the 10 s scan asks for one (Ready 220). At the 20 s scan
    # p1 fills that node's room exactly, and p2 and p3 (2000m) fill one new node exactly
    # (Ready 230). Each runs 100 s once bound: the run ends at 330 s.
    jobs = [_pod("p1", 0.0, 4000, 100.0), _pod("p2", 15.0, 2000, 100.0), _pod("p3", 15.0, 2000, 100.0)]
    result = _run(jobs, [_pool(min_size=0)])
    assert _lives(result) == [(220.0, None), (230.0, None)]
    assert result.metrics["node_hours"] * 3600 == pytest.approx((330 - 10) + (330 - 20))


def test_a_pool_at_its_max_size_counts_its_nodes_on_the_way() -> None:
    # max_size 1: the 10 s scan asks for a node for p1 (Ready 220); at the 20 s scan p2 needs
    # another, but the pool's one node is on its way: p2 waits for p1's end (320 s), 320-420.
    jobs = [_pod("p1", 0.0, 3000, 100.0), _pod("p2", 15.0, 3000, 100.0)]
    result = _run(jobs, [_pool(min_size=0, max_size=1)])
    assert _lives(result) == [(220.0, None)]
    assert result.metrics["node_hours"] * 3600 == pytest.approx(420 - 10)


def test_scale_down_waits_exactly_the_delay_after_add() -> None:
    # x holds p-00001 (min_size 1) to 2000 s; y (no room there) gets p-00002, asked at the
    # 10 s scan, Ready 220, y 220-320. Unneeded from the 320 s scan, p-00002 could go at 920,
    # but scale-down waits 1000 s after the scale-up at 10 s: it goes at the 1010 s scan.
    ca = AutoscalerConfig(scale_down_delay_after_add_s=1000.0)
    jobs = [_pod("x", 0.0, 3500, 2000.0, node="p-00001"), _pod("y", 0.0, 1000, 100.0)]
    result = _run(jobs, [_pool(min_size=1)], ca)
    assert _lives(result) == [(0.0, None), (220.0, 1010.0)]


def test_scale_down_deletes_at_most_max_empty_bulk_delete_nodes_a_scan() -> None:
    # x holds p-00001 (min_size 1) to 2000 s; y1 and y2 get p-00002 and p-00003 (asked at
    # 10 s, Ready 220), 220-320 s; both unneeded from the 320 s scan, removable at 920: one
    # node a scan, so p-00002 goes at 920 and p-00003 at 930.
    ca = AutoscalerConfig(max_empty_bulk_delete=1)
    jobs = [
        _pod("x", 0.0, 3500, 2000.0, node="p-00001"),
        _pod("y1", 0.0, 3000, 100.0),
        _pod("y2", 0.0, 3000, 100.0),
    ]
    result = _run(jobs, [_pool(min_size=1)], ca)
    assert _lives(result) == [(0.0, None), (220.0, 920.0), (220.0, 930.0)]


def test_a_node_asked_for_at_the_instant_the_last_pod_ends_counts_in_peak_and_final() -> None:
    # As test_nodes_asked_for_pods_that_never_fit_after_the_last_pod_ends_cost_nothing, but
    # a ends at 220 s, a scan's instant: that scan (after a's end) asks for a third node for
    # x. A node asked after the end is left out; one asked at the end itself counts in the
    # peak and the final nodes, and is charged 0 s.
    jobs = [_pod("a", 0.0, 1000, 220.0), _pod("x", 0.0, 1000, 100.0, node="nowhere")]
    m = _run(jobs, [_pool(min_size=1, max_size=3)]).metrics
    assert (m["peak_nodes"], m["final_nodes"]) == (3, 3)
    # node 1 over 0-220 s, node 2 from its scale-up at 10 s, node 3 nothing
    assert m["node_hours"] * 3600 == pytest.approx(220 + 210)


def test_a_node_reused_restarts_its_unneeded_clock() -> None:
    # x holds p-00001 (min_size 1) to 2000 s; y1 gets p-00002 (asked at 10 s, Ready 220),
    # 220-320 s: unneeded from the 320 s scan. y2 takes it again at 500 s (no room on
    # p-00001), to 600 s: unneeded anew from the 600 s scan, so it goes at 1200, not at 920.
    jobs = [
        _pod("x", 0.0, 3500, 2000.0, node="p-00001"),
        _pod("y1", 0.0, 1000, 100.0),
        _pod("y2", 500.0, 1000, 100.0),
    ]
    result = _run(jobs, [_pool(min_size=1)])
    assert _lives(result) == [(0.0, None), (220.0, 1200.0)]


def test_pods_waiting_for_a_node_on_its_way_do_not_delay_scale_down() -> None:
    # Only a scan that asks for nodes starts scale-down-delay-after-add (600 s). y gets
    # p-00001 (asked at 10 s, Ready 220), 220-320 s: unneeded from the 320 s scan. z (at
    # 295 s) selects p-00002, which the 300 s scan asks for (Ready 510); the scans from 310
    # to 500 s find z waiting for that node and ask for none. p-00001 goes at 920 (620 s
    # after the last scale-up), not 600 s after the 500 s scan.
    jobs = [_pod("y", 0.0, 1000, 100.0), _pod("z", 295.0, 1000, 2000.0, node="p-00002")]
    result = _run(jobs, [_pool(min_size=0)])
    assert _lives(result) == [(220.0, 920.0), (510.0, None)]


def test_the_peak_is_not_raised_by_a_node_asked_for_as_another_is_deleted() -> None:
    # With no delay after a scale-up, one scan may ask for a node and delete another: the
    # count at that instant is the one after both. x holds p-00001 (min_size 1); y gets
    # p-00002 (asked at 10 s), 220-320 s, unneeded from then, removable at 920; z (915 s)
    # selects p-00003, which the 920 s scan asks for as it deletes p-00002 (Ready 1130, z
    # 1130-1230 s, deleted at 1830).
    ca = AutoscalerConfig(scale_down_delay_after_add_s=0.0)
    jobs = [
        _pod("x", 0.0, 3500, 2000.0, node="p-00001"),
        _pod("y", 0.0, 1000, 100.0),
        _pod("z", 915.0, 1000, 100.0, node="p-00003"),
    ]
    result = _run(jobs, [_pool(min_size=1)], ca)
    assert _lives(result) == [(0.0, None), (220.0, 920.0), (1130.0, 1830.0)]
    assert result.metrics["peak_nodes"] == 2


def test_the_minimum_nodes_are_there_for_the_first_pods() -> None:
    # The pool's min_size nodes are up from 0 s: a and b, created at 0 s, are placed among
    # both (the default profile's LeastAllocated puts b on the node a left empty).
    jobs = [_pod("a", 0.0, 1000, 100.0), _pod("b", 0.0, 1000, 100.0)]
    sim, _ = _placements(jobs, [_pool(min_size=2, max_size=2)])
    assert [(t, name) for t, name, _ in sim.placed] == [(0.0, "a"), (0.0, "b")]
    assert {node for _, _, node in sim.placed} == {"p-00001", "p-00002"}


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


def test_an_unneeded_node_is_soft_tainted_until_it_is_needed_again() -> None:
    # The autoscaler puts DeletionCandidateOfClusterAutoscaler:PreferNoSchedule on a node it
    # finds unneeded and takes it off when the node is needed again; the default profile's
    # TaintToleration (weight 3: 300 points between a node with it and one without) outweighs
    # LeastAllocated and BalancedAllocation (weight 1 each). Two 4000m nodes for good.
    jobs = [
        _pod("a", 0.0, 1000, 50.0, node="p-00001"),  # p-00001 empty at the 50 s scan: tainted
        _pod("c", 0.0, 1000, 2000.0, node="p-00002"),
        _pod("b1", 55.0, 1000, 2000.0),  # p-00002 (1000m taken), not the empty, tainted p-00001
        _pod("x", 57.0, 100, 2000.0, node="p-00001"),  # p-00001 needed: untainted at 60 s
        _pod("b2", 65.0, 1000, 2000.0),  # p-00001 (100m taken) against p-00002 (2000m)
    ]
    sim, _ = _placements(jobs, [_pool(min_size=2, max_size=2)])
    placed = {name: (t, node) for t, name, node in sim.placed}
    assert placed["b1"] == (55.0, "p-00002")
    assert placed["b2"] == (65.0, "p-00001")


def test_a_node_deleted_after_the_last_pod_ends_is_charged_up_to_that_end() -> None:
    # Nodes Ready 350 s after the scan that asks for them; no delay after a scale-up; at most 3.
    # a (the last pod to end) runs on p-00001 (asked at 10 s, Ready 360) 360-460 s. x selects
    # a node that never exists, so the autoscaler model (pool labels unmatched) asks for a
    # node whenever none is on its way: p-00002 at 360 s (Ready 710), p-00003 at 710 s (Ready
    # 1060), and the run goes on to that last scan. p-00001, unneeded from the 460 s scan, goes
    # at 1060 s: it is charged 10-460 s, up to the run's end, not to its deletion.
    ca = AutoscalerConfig(scale_down_delay_after_add_s=0.0)
    pool = dataclasses.replace(_pool(min_size=0, max_size=3), provision_delay_s=350.0)
    jobs = [_pod("a", 0.0, 1000, 100.0), _pod("x", 0.0, 1000, 100.0, node="nowhere")]
    result = _run(jobs, [pool], ca)
    assert _lives(result) == [(360.0, 1060.0), (710.0, None), (1060.0, None)]
    # p-00001 450 s, p-00002 from its scale-up at 360 s to 460 s, p-00003 nothing
    assert result.metrics["node_hours"] * 3600 == pytest.approx(450 + 100)


def test_the_floor_is_defined_up_to_the_horizon_and_keeps_one_value_an_instant() -> None:
    from stickypack.sim.metrics import window_max_step

    # g = 1 on [0, 10), 2 from 10; window 5, horizon 10: f = 1 on [0, 10), 2 at 10 (the
    # horizon is in the domain, [times[0], horizon])
    assert window_max_step([0.0, 10.0], [1, 2], 5.0, 10.0) == ([0.0, 10.0], [1, 2])
    # two values at t = 0 (the later one holds): g = 2 on [0, 10), 0 from 10; f = max over
    # [t - 5, t] = 2 until 15, then 0: one step at 0, of the value that holds there
    assert window_max_step([0.0, 0.0, 10.0], [1, 2, 0], 5.0, 30.0) == ([0.0, 15.0], [2, 0])


def test_metrics_keep_six_significant_digits() -> None:
    from stickypack.sim.metrics import round_metric

    assert round_metric(1234567.0) == 1234570.0  # 7 digits -> 6
    assert round_metric(0.1234564) == 0.123456 and round_metric(12.34567) == 12.3457
    assert round_metric(0.0) == 0.0
