"""The autoscaler's node groups and minimum sizes (core.nodegroups), on hand-built tables."""

from __future__ import annotations

import numpy as np

from stickypack.core import Taint
from stickypack.core.labels import TO_BE_DELETED_TAINT
from stickypack.core.nodegroups import (
    MIN_SIZE,
    RESOURCE_LIMIT,
    NodeGroups,
    ResourceMinimums,
    kept_at_limits,
)
from stickypack.core.nodetable import NodeTable

GI = 1024**3
POOL = "cloud.google.com/gke-nodepool"
ZONE = "topology.kubernetes.io/zone"


def _table(nodes: dict[str, dict[str, str]], deleting: tuple[str, ...] = ()) -> NodeTable:
    table = NodeTable(capacity=2)  # small: the label codes must survive the table growing
    for name, labels in nodes.items():
        taints = [Taint(TO_BE_DELETED_TAINT, "1", "NoSchedule")] if name in deleting else []
        table.upsert_node(name, {"cpu": 4000, "memory": 16 * GI, "pods": 110}, labels=labels, taints=taints)
    return table


def test_a_nodes_group_comes_from_the_well_known_labels_or_the_keys_given() -> None:
    well_known = NodeGroups()
    assert well_known.group_of({POOL: "pool-a", ZONE: "z1"}) == "pool-a"
    assert well_known.group_of({"eks.amazonaws.com/nodegroup": "ng-1"}) == "ng-1"
    assert well_known.group_of({"kubernetes.azure.com/agentpool": "user"}) == "user"
    assert well_known.group_of({"node.kubernetes.io/instance-type": "n2"}) is None
    # GKE's node groups are per-zone instance groups: pool and zone, joined by "/"
    per_zone = NodeGroups((POOL, ZONE))
    assert per_zone.group_of({POOL: "pool-a", ZONE: "z1"}) == "pool-a/z1"
    assert per_zone.group_of({POOL: "pool-a"}) is None  # a key missing: no known group
    assert NodeGroups(("stickypack.io/pool",)).group_of({POOL: "pool-a"}) is None


def test_sizes_and_nodes_at_their_groups_min_size() -> None:
    table = _table(
        {
            "a1": {POOL: "pool-a"},
            "a2": {POOL: "pool-a"},
            "b1": {POOL: "pool-b"},
            "other": {},
        }
    )
    groups = NodeGroups(min_sizes={"pool-a": 2, "pool-b": 0})
    idx = table.active_indices()
    assert groups.sizes(table) == {"pool-a": 2, "pool-b": 1}
    assert groups.groups(table, idx) == ["pool-a", "pool-a", "pool-b", None]
    assert groups.at_min_size(table, idx).tolist() == [True, True, False, False]
    # a third node of pool-a joins: the group may lose one; its labels are read row by row
    table.upsert_node("a3", {"cpu": 4000}, labels={POOL: "pool-a"})
    idx = table.active_indices()
    assert not groups.at_min_size(table, idx).any()
    table.remove_node("a1")
    idx = table.active_indices()
    at_min = dict(zip(table.node_names(idx), groups.at_min_size(table, idx).tolist(), strict=True))
    assert at_min == {"a2": True, "b1": False, "other": False, "a3": True}
    # a node relabelled changes groups
    table.upsert_node("other", {"cpu": 4000}, labels={POOL: "pool-b"})
    assert groups.sizes(table) == {"pool-a": 2, "pool-b": 2}
    # without minimum sizes nothing is read
    assert not NodeGroups().at_min_size(table, table.active_indices()).any()


def test_a_group_keeps_its_minimum_as_nodes_go_one_by_one() -> None:
    """RemovableAt's budget: size - deletions in progress - min, less one per node let go."""
    table = _table({f"a{i}": {POOL: "pool-a"} for i in range(4)} | {"b0": {POOL: "pool-b"}})
    groups = NodeGroups(min_sizes={"pool-a": 2})
    order = ["a0", "a1", "a2", "a3", "b0"]
    assert kept_at_limits(table, order, groups) == {"a2": MIN_SIZE, "a3": MIN_SIZE}
    # min 0 and a group with no minimum: all go
    assert kept_at_limits(table, order, NodeGroups(min_sizes={"pool-a": 0})) == {}
    # a node being deleted counts against its group
    deleting = _table({f"a{i}": {POOL: "pool-a"} for i in range(4)}, deleting=("a3",))
    assert kept_at_limits(deleting, ["a0", "a1", "a2"], groups) == {"a1": MIN_SIZE, "a2": MIN_SIZE}


def test_two_groups_and_per_zone_groups_have_their_own_budgets() -> None:
    nodes = {
        "a-z1-0": {POOL: "pool-a", ZONE: "z1"},
        "a-z1-1": {POOL: "pool-a", ZONE: "z1"},
        "a-z2-0": {POOL: "pool-a", ZONE: "z2"},
        "a-z2-1": {POOL: "pool-a", ZONE: "z2"},
    }
    table = _table(nodes)
    order = list(nodes)
    # per pool: pool-a has 4, min 1: three may go
    assert kept_at_limits(table, order, NodeGroups(min_sizes={"pool-a": 1})) == {"a-z2-1": MIN_SIZE}
    # per zone (GKE's instance groups): min 1 in each zone keeps one node of each
    per_zone = NodeGroups((POOL, ZONE), {"pool-a/z1": 1, "pool-a/z2": 1})
    assert kept_at_limits(table, order, per_zone) == {"a-z1-1": MIN_SIZE, "a-z2-1": MIN_SIZE}
    assert per_zone.at_min_size(table, table.active_indices()).tolist() == [False] * 4


def test_cluster_wide_minimum_cores_and_memory() -> None:
    table = _table({"n0": {}, "n1": {}, "n2": {}, "vk": {"type": "virtual-kubelet"}})
    capacity = {"n0": (4, 16 * GI), "n1": (4, 16 * GI), "n2": (4, 16 * GI), "vk": (100, 1000 * GI)}
    order = ["n0", "n1", "n2"]
    groups = NodeGroups()
    # 12 cores (the virtual-kubelet node's not counted), at least 5: one node may go
    assert kept_at_limits(table, order, groups, capacity, ResourceMinimums(cores=5)) == {
        "n1": RESOURCE_LIMIT,
        "n2": RESOURCE_LIMIT,
    }
    assert kept_at_limits(table, order, groups, capacity, ResourceMinimums(cores=4)) == {"n2": RESOURCE_LIMIT}
    assert kept_at_limits(table, order, groups, capacity, ResourceMinimums(memory_bytes=32 * GI)) == {
        "n1": RESOURCE_LIMIT,
        "n2": RESOURCE_LIMIT,
    }
    assert kept_at_limits(table, order, groups, capacity) == {}
    # the group's minimum is checked first, and a node it keeps takes nothing of the totals
    pooled = _table({n: {POOL: "p"} for n in order})
    both = kept_at_limits(pooled, order, NodeGroups(min_sizes={"p": 2}), capacity, ResourceMinimums(cores=4))
    assert both == {"n1": MIN_SIZE, "n2": MIN_SIZE}


def test_label_codes_follow_the_nodes_row_by_row() -> None:
    table = _table({"x": {POOL: "a"}})
    codes, values = table.label_codes((POOL, ZONE))
    assert values[codes[table.index["x"]]] == ("a", None)
    for i in range(5):  # the table grows
        table.upsert_node(f"y{i}", {"cpu": 1}, labels={POOL: "b", ZONE: "z"})
    codes, values = table.label_codes((POOL, ZONE))
    assert values[codes[table.index["y4"]]] == ("b", "z")
    table.remove_node("x")
    codes, _ = table.label_codes((POOL, ZONE))
    assert int(codes[np.flatnonzero(~table.active)].max()) == -1
