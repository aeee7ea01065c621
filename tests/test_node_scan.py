"""kube-scheduler's search for feasible nodes (``percentageOfNodesToScore``): how many it
finds before it scores, in which order it checks the nodes, and where the next search starts
(kube-scheduler v1.37.2's ``schedule_one.go`` and ``backend/cache/node_tree.go``); the
simulator's scheduler and the rendered configurations. The real kube-scheduler's sampling is
checked in ``tests/test_controlplane.py``."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest

from stickypack.core import NodeTable, Pod
from stickypack.core.framework import (
    NodeScan,
    SchedulingContext,
    feasible_nodes_to_find,
    prefilter_node_names,
)
from stickypack.core.labels import NodeSelectorTerm, Requirement
from stickypack.core.nodetable import zone_key
from stickypack.core.policy import PolicyError, policy_from_yaml
from stickypack.core.resources import CPU, MEMORY, PODS
from stickypack.policies import load_builtin
from stickypack.render import PROFILE_BUILDERS, scheduler_config

ALLOC = {CPU: 4000, MEMORY: 16 * 2**30, PODS: 110}


def _table(n: int, zones: list[str] | None = None) -> NodeTable:
    table = NodeTable()
    for i in range(n):
        labels = {"topology.kubernetes.io/zone": zones[i]} if zones else {}
        table.upsert_node(f"n{i:03d}", ALLOC, labels=labels)
    return table


def _names(table: NodeTable, rows: np.ndarray) -> list[str]:
    return table.node_names(rows.tolist())


@pytest.mark.parametrize(
    ("nodes", "percentage", "expected"),
    [
        (0, 0, 0),
        (99, 0, 99),  # under 100 nodes: every one
        (99, 10, 99),
        (100, 0, 100),  # 50 - 0 = 50% of 100 is 50, at least 100
        (150, 0, 100),  # 49% of 150 is 73
        (249, 0, 122),  # 50 - 1 = 49%
        (250, 0, 120),  # 50 - 2 = 48%
        (300, 0, 144),  # 50 - 2 = 48%
        (1240, 0, 508),  # 50 - 9 = 41%
        (1000, 0, 420),  # 50 - 8 = 42%
        (5000, 0, 500),  # 50 - 40 = 10%
        (6000, 0, 300),  # 50 - 48 = 2%, at least 5%
        (20000, 0, 1000),  # 50 - 160 < 5: 5%
        (1000, 30, 300),
        (1000, 1, 100),  # 1%: 10, at least 100 (not adaptive)
        (200, 30, 100),  # 60, at least 100
        (1001, 33, 330),  # rounded down
        (150, 100, 150),
    ],
)
def test_feasible_nodes_to_find_is_kube_schedulers_num_feasible_nodes_to_find(
    nodes: int, percentage: int, expected: int
) -> None:
    assert feasible_nodes_to_find(nodes, percentage) == expected


def test_zone_key_reads_the_beta_labels_first_as_the_node_tree_does() -> None:
    assert zone_key({}) == ""
    assert zone_key({"topology.kubernetes.io/zone": "a"}) == ":\x00:a"
    assert zone_key({"topology.kubernetes.io/region": "r", "topology.kubernetes.io/zone": "a"}) == "r:\x00:a"
    both = {"failure-domain.beta.kubernetes.io/zone": "old", "topology.kubernetes.io/zone": "new"}
    assert zone_key(both) == ":\x00:old"
    assert zone_key({"failure-domain.beta.kubernetes.io/zone": ""}) == ""  # present but empty
    # present but empty still wins over the GA label
    assert zone_key({"failure-domain.beta.kubernetes.io/zone": "", "topology.kubernetes.io/zone": "a"}) == ""
    regions = {"failure-domain.beta.kubernetes.io/region": "old", "topology.kubernetes.io/region": "new"}
    assert zone_key({**regions, "topology.kubernetes.io/zone": "a"}) == "old:\x00:a"
    assert zone_key({"topology.kubernetes.io/region": "r"}) == "r:\x00:"  # a region alone is a zone


def test_scheduler_order_interleaves_the_zones_as_the_node_tree_lists_them() -> None:
    table = _table(5, ["a", "a", "b", "a", "c"])  # n000 a, n001 a, n002 b, n003 a, n004 c
    assert _names(table, table.scheduler_order()) == ["n000", "n002", "n004", "n001", "n003"]
    table.remove_node("n002")  # zone b empties and leaves the list of zones
    table.upsert_node("n005", ALLOC, labels={"topology.kubernetes.io/zone": "b"})  # b joins at the end
    assert _names(table, table.scheduler_order()) == ["n000", "n004", "n005", "n001", "n003"]
    # a node relabelled into another zone is added at the end of that zone's list, once the
    # snapshot lists the tree anew: when a node is added or removed, not at the update
    table.upsert_node("n000", ALLOC, labels={"topology.kubernetes.io/zone": "c"})
    assert _names(table, table.scheduler_order()) == ["n000", "n004", "n005", "n001", "n003"]
    table.upsert_node("n007", ALLOC, labels={"topology.kubernetes.io/zone": "c"})
    assert _names(table, table.scheduler_order()) == ["n001", "n004", "n005", "n003", "n000", "n007"]
    table.remove_node("n007")
    assert _names(table, table.scheduler_order()) == ["n001", "n004", "n005", "n003", "n000"]
    # an update that keeps the zone keeps the place; a freed row reused keeps no old place
    table.upsert_node("n001", ALLOC, labels={"topology.kubernetes.io/zone": "a", "x": "y"})
    table.remove_node("n004")
    table.upsert_node("n006", ALLOC, labels={"topology.kubernetes.io/zone": "a"})
    assert _names(table, table.scheduler_order()) == ["n001", "n000", "n005", "n003", "n006"]


def test_the_search_keeps_the_order_of_the_snapshot_it_took_until_a_node_comes_or_goes() -> None:
    table = _table(150, ["a"] * 75 + ["b"] * 75)  # n000, n075, n001, n076, ...
    scan = NodeScan()
    rows = table.active_indices()
    scan.sample(rows[:10], table)  # a cycle that checks every node takes the snapshot too
    assert scan.next_start == 0
    table.upsert_node("n075", ALLOC, labels={"topology.kubernetes.io/zone": "a"})  # moved: b to a
    taken = _names(table, scan.sample(rows, table))
    assert taken[:4] == ["n000", "n075", "n001", "n076"] and scan.next_start == 100
    # a node added: listed anew, n075 last of zone a (a: n000..n074, n075; b: n076..n150)
    table.upsert_node("n150", ALLOC, labels={"topology.kubernetes.io/zone": "b"})
    assert _names(table, scan.sample(table.active_indices(), table))[:3] == ["n050", "n126", "n051"]


def test_a_pod_that_names_its_nodes_is_searched_for_on_those_alone() -> None:
    def name_in(*names: str) -> Requirement:
        return Requirement("metadata.name", "In", names)

    # terms ORed, requirements ANDed: (n001 or n002) and n002; or x
    terms = (
        NodeSelectorTerm(fields=(name_in("n001", "n002"), name_in("n002"))),
        NodeSelectorTerm(fields=(name_in("x"),)),
    )
    assert prefilter_node_names(Pod(name="p", required_terms=terms)) == {"n002", "x"}
    label_term = NodeSelectorTerm(expressions=(Requirement("zone", "In", ("a",)),))
    assert prefilter_node_names(Pod(name="p", required_terms=(*terms, label_term))) is None  # ORed
    not_in = NodeSelectorTerm(fields=(Requirement("metadata.name", "NotIn", ("n001",)),))
    assert prefilter_node_names(Pod(name="p", required_terms=(not_in,))) is None
    assert prefilter_node_names(Pod(name="p", required_terms=())) is None
    assert prefilter_node_names(Pod(name="p")) is None

    table = _table(300)
    rows = table.active_indices()
    scan = NodeScan(next_start=7)
    # one node named: it alone is checked, and the start moves on by one
    assert _names(table, scan.sample(rows[[5]], table, node_names=frozenset({"n005", "gone"}))) == ["n005"]
    assert scan.next_start == 8
    # 120 nodes named: 100 of them to find (of 120 nodes, not 144 of 300), the start taken
    # modulo 120, the move modulo all 300
    names = frozenset(f"n{i:03d}" for i in range(100, 220))
    scan.next_start = 250  # 250 % 120 = 10: n110 first
    taken = _names(table, scan.sample(rows, table, node_names=names))
    assert taken == [f"n{i:03d}" for i in range(110, 210)]
    assert scan.next_start == (250 + 100) % 300
    # nodes the profile's filters pass but PreFilter left out are not searched
    scan.next_start = 0
    assert _names(table, scan.sample(rows, table, node_names=frozenset({"n005"}))) == ["n005"]
    assert scan.next_start == 1
    others = rows[rows != table.index["n007"]]  # n007 named but infeasible: checked too, after n006
    scan.next_start = 0
    assert _names(table, scan.sample(others, table, node_names=frozenset({"n006", "n007"}))) == ["n006"]
    assert scan.next_start == 2

    # the profile narrows the search by the pod's terms
    profile, ctx = _packing_profile(), SchedulingContext()
    pod = Pod(name="p", requests={CPU: 500}, nonzero_cpu=500, required_terms=terms)
    scan.next_start = 0
    assert profile.select(pod, table, ctx, np.random.default_rng(0), scan) == table.index["n002"]
    assert scan.next_start == 1  # n002 checked; x is no node


def test_the_search_takes_the_first_feasible_nodes_from_where_the_last_stopped() -> None:
    table = _table(150)
    scan = NodeScan()
    rows = table.active_indices()
    first = scan.sample(rows, table)
    assert _names(table, first) == [f"n{i:03d}" for i in range(100)]
    assert scan.next_start == 100
    second = scan.sample(rows, table)
    assert _names(table, second) == [f"n{i:03d}" for i in [*range(100, 150), *range(50)]]
    assert scan.next_start == 50  # (100 + 100) % 150
    # nodes that fail the filters are checked too, and counted in the move
    feasible = rows[[table.index[f"n{i:03d}"] for i in range(150) if i % 3]]  # 100 feasible
    scan.next_start = 0
    assert scan.sample(feasible, table).size == 100 and scan.next_start == 0  # all checked
    # exactly as many feasible as it looks for: it goes on to the end, checking every node
    assert scan.sample(rows[:100], table).size == 100 and scan.next_start == 0
    feasible = rows[[table.index[f"n{i:03d}"] for i in range(150) if i % 10]]  # 135 feasible
    scan.next_start = 140
    taken = _names(table, scan.sample(feasible, table))
    assert taken[:9] == ["n141", "n142", "n143", "n144", "n145", "n146", "n147", "n148", "n149"]
    assert len(taken) == 100 and taken[-1] == "n101"  # the 100th found, the 112th checked
    assert scan.next_start == (140 + 112) % 150


def test_the_search_stops_at_one_node_when_nothing_is_scored_and_a_start_past_the_end_wraps() -> None:
    table = _table(20)
    rows = table.active_indices()
    scan = NodeScan(next_start=45)  # nodes were removed since: taken modulo the count
    assert _names(table, scan.sample(rows, table, scoring=False)) == ["n005"]
    assert scan.next_start == (45 + 1) % 20
    scan.next_start = 45  # scored: every node of a small cluster, the start only reduced
    assert scan.sample(rows, table).size == 20 and scan.next_start == 5


def _packing_profile():
    return load_builtin("z2jh").profiles[-1]  # MostAllocated for user pods


def test_a_profile_scores_only_the_nodes_its_search_found() -> None:
    table = _table(150)
    full = table.index["n000"]
    table.add_pod(full, Pod(name="filler", requests={CPU: 3000, MEMORY: 2**30}, nonzero_cpu=3000))
    pod = Pod(name="p", requests={CPU: 500, MEMORY: 2**20}, nonzero_cpu=500, nonzero_memory=2**20)
    profile, ctx = _packing_profile(), SchedulingContext()
    rng = np.random.default_rng(0)
    assert profile.select(pod, table, ctx, rng) == full  # every node scored: the fullest
    scan = NodeScan(next_start=10)  # n010..n109 found: n000 not among them
    assert profile.select(pod, table, ctx, rng, scan) != full
    assert scan.next_start == 110
    scan = NodeScan(percentage=100, next_start=10)
    assert profile.select(pod, table, ctx, rng, scan) == full


def test_a_profile_that_scores_nothing_takes_the_first_feasible_node_its_search_finds() -> None:
    text = (
        "name: mine\nprofiles: [{name: p, filters: [NodeResourcesFit],\n"
        "  score: [{plugin: NodeResourcesFit, weight: 0}]}]\n"
    )
    (profile,) = policy_from_yaml(text).profiles
    assert not profile.scores_nodes
    table = _table(150)
    pod = Pod(name="p", requests={CPU: 500}, nonzero_cpu=500)
    scan = NodeScan(next_start=30)
    assert (
        profile.select(pod, table, SchedulingContext(), np.random.default_rng(0), scan) == table.index["n030"]
    )
    assert scan.next_start == 31


def test_policies_carry_their_percentage_of_nodes_to_score() -> None:
    assert load_builtin("default").percentage_of_nodes_to_score == 0  # kube-scheduler's default
    assert load_builtin("z2jh").percentage_of_nodes_to_score == 0  # the chart sets none
    assert load_builtin("binderhub").percentage_of_nodes_to_score == 0
    assert load_builtin("stickypack").percentage_of_nodes_to_score == 100
    assert load_builtin("oracle").percentage_of_nodes_to_score == 100
    text = "name: mine\nprofiles: [{name: p, filters: [NodeResourcesFit], score: [NodeResourcesFit]}]\n"
    policy = policy_from_yaml(text + "percentage_of_nodes_to_score: 30\n")
    assert policy.percentage_of_nodes_to_score == 30
    assert policy.describe()["percentage_of_nodes_to_score"] == 30  # policies --show: loads back the same
    assert policy_from_yaml(text).percentage_of_nodes_to_score == 0
    for bad in ("101", "-1", "true", "'50'", "12.5"):
        with pytest.raises(PolicyError, match=r"mine.yaml: invalid policy: percentage_of_nodes_to_score"):
            policy_from_yaml(text + f"percentage_of_nodes_to_score: {bad}\n", "mine.yaml")
    with pytest.raises(PolicyError, match=r"percentage_of_nodes_to_score 101; an integer 0\.\.100"):
        dataclasses.replace(policy, percentage_of_nodes_to_score=101)
    with pytest.raises(PolicyError, match="percentage_of_nodes_to_score True; an integer"):
        dataclasses.replace(policy, percentage_of_nodes_to_score=True)


def test_render_writes_the_percentage_into_the_profiles() -> None:
    for name in ("stickypack", "stickypack-builds"):
        assert PROFILE_BUILDERS[name]()["percentageOfNodesToScore"] == 100
    for name in ("z2jh", "default-scheduler"):  # as their own deployments have it: adaptive
        assert "percentageOfNodesToScore" not in PROFILE_BUILDERS[name]()
    text = "name: mine\nprofiles: [{name: p, filters: [NodeResourcesFit], score: [NodeResourcesFit]}]\n"
    sampled = scheduler_config([], policies=[policy_from_yaml(text)])
    assert "percentageOfNodesToScore" not in sampled["profiles"][0]
    every = scheduler_config([], policies=[policy_from_yaml(text + "percentage_of_nodes_to_score: 40\n")])
    assert every["profiles"][0]["percentageOfNodesToScore"] == 40
    assert "percentageOfNodesToScore" not in every  # per profile: policies may differ


def _packing_runs(percentage: int) -> int:
    """Into how many runs of pods bound one after another to the same node 30 one-core
    pods (arriving 10 s apart, staying) fall on 120 nodes of four cores, packed by z2jh's
    profile with ``percentage``."""
    from stickypack.sim.engine import Simulation
    from stickypack.sim.model import NodePool
    from stickypack.sim.workloads import PodJob, Workload

    pool = NodePool(name="p", allocatable=ALLOC, min_size=120, max_size=120)
    jobs = [
        PodJob(
            10.0 * (i + 1),
            Pod(name=f"u{i}", requests={CPU: 1000, MEMORY: 2**30}, nonzero_cpu=1000, nonzero_memory=2**30),
            duration=10_000.0,
        )
        for i in range(30)
    ]
    policy = dataclasses.replace(load_builtin("z2jh"), percentage_of_nodes_to_score=percentage)
    sim = Simulation(policy, Workload("wide", jobs, [pool]), seed=0)
    nodes: list[str] = []
    bind = sim._bind

    def record(sp, slot) -> None:  # type: ignore[no-untyped-def]
        bind(sp, slot)
        nodes.append(sim.by_slot[slot].name)

    sim._bind = record  # type: ignore[method-assign]
    sim.run()
    assert len(nodes) == 30
    return 1 + sum(a != b for a, b in itertools.pairwise(nodes))


def test_the_simulator_samples_as_the_policys_kube_scheduler_would() -> None:
    # every node scored: four pods on a node, then the next; kube-scheduler's adaptive
    # sample of 100 of the 120 nodes leaves the fullest node out of some searches, so pods
    # go to another node while it still has room
    assert _packing_runs(100) == 8
    assert _packing_runs(0) > 8


def test_each_profile_of_a_simulated_policy_searches_as_a_scheduler_of_its_own() -> None:
    """z2jh's user pods are placed by its user-scheduler, its build pods by the default
    scheduler: two kube-schedulers, each moving its own search's start."""
    from stickypack.core.labels import HOSTNAME_LABEL
    from stickypack.sim.engine import Simulation
    from stickypack.sim.model import NodePool
    from stickypack.sim.workloads import PodJob, Workload

    def user(name: str, cpu: int, **kwargs: object) -> Pod:
        return Pod(
            name=name, requests={CPU: cpu, MEMORY: 2**20}, nonzero_cpu=cpu, nonzero_memory=2**20, **kwargs
        )  # type: ignore[arg-type]

    pool = NodePool(name="p", allocatable=ALLOC, min_size=120, max_size=120)
    jobs = [
        # on p-00071 (the 71st node) by its node selector: every node checked, the start kept at 0
        PodJob(1.0, user("filler", 3000, node_selector={HOSTNAME_LABEL: "p-00071"}), duration=1e4),
        PodJob(2.0, user("first", 100), duration=1e4),  # nodes 1..100 searched: the filler's node; start 100
        PodJob(3.0, user("build", 100, labels={"component": "binderhub-build"}), duration=1e4),
        # the user-scheduler's search from node 101 round to node 80: the filler's node again (a
        # search moved on by the build's too would start at node 81 and end at node 60)
        PodJob(4.0, user("second", 100), duration=1e4),
    ]
    sim = Simulation(load_builtin("z2jh"), Workload("two", jobs, [pool]), seed=0)
    bound: dict[str, str] = {}
    bind = sim._bind

    def record(sp, slot) -> None:  # type: ignore[no-untyped-def]
        bind(sp, slot)
        bound[sp.pod.name] = sim.by_slot[slot].name

    sim._bind = record  # type: ignore[method-assign]
    sim.run()
    assert bound["first"] == bound["second"] == "p-00071"
    assert bound["build"] != "p-00071"
