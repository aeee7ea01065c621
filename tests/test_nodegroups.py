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


def test_the_first_well_known_label_a_node_carries_names_its_group() -> None:
    """The well-known labels are looked for in their order: a node carrying GKE's node pool
    label and AKS's agent pool label is in its GKE pool, on its own and in a table."""
    both = {POOL: "pool-a", "kubernetes.azure.com/agentpool": "user"}
    assert NodeGroups().group_of(both) == "pool-a"
    table = _table({"x": both})
    assert NodeGroups().groups(table, table.active_indices()) == ["pool-a"]


def test_a_groups_size_counts_its_nodes_whatever_other_labels_they_carry() -> None:
    """Two nodes of pool-a, one also labelled with AKS's agent pool key (another set of
    label values, the same group): pool-a has 2 nodes, over its minimum of 1, so neither is
    at its minimum; at_min_size agrees with sizes."""
    table = _table({"a1": {POOL: "pool-a"}, "a2": {POOL: "pool-a", "kubernetes.azure.com/agentpool": "x"}})
    groups = NodeGroups(min_sizes={"pool-a": 1})
    assert groups.sizes(table) == {"pool-a": 2}
    idx = table.active_indices()
    assert groups.at_min_size(table, idx).tolist() == [False, False]
    assert NodeGroups(min_sizes={"pool-a": 2}).at_min_size(table, idx).tolist() == [True, True]


def test_each_node_groups_answers_with_its_own_minimums_on_one_table() -> None:
    """The mask kept in the table's memo is the NodeGroups' that computed it: pool-a's two
    nodes are at a minimum of 2, not at a minimum of 1, asked in turn on the same table."""
    table = _table({"a1": {POOL: "pool-a"}, "a2": {POOL: "pool-a"}})
    idx = table.active_indices()
    at_two, at_one = NodeGroups(min_sizes={"pool-a": 2}), NodeGroups(min_sizes={"pool-a": 1})
    assert at_two.at_min_size(table, idx).tolist() == [True, True]
    assert at_one.at_min_size(table, idx).tolist() == [False, False]
    assert at_two.at_min_size(table, idx).tolist() == [True, True]


def test_a_group_whose_nodes_all_left_and_an_empty_table() -> None:
    """The label codes keep the values of nodes that left (codes are not reused): pool-b's
    only node gone, pool-a's one node is at its minimum of 1, and pool-b has no size. A table
    that never had a node has none at a minimum."""
    table = _table({"a1": {POOL: "pool-a"}, "b1": {POOL: "pool-b"}})
    groups = NodeGroups(min_sizes={"pool-a": 1, "pool-b": 0})
    assert groups.at_min_size(table, table.active_indices()).tolist() == [True, False]
    table.remove_node("b1")
    assert groups.at_min_size(table, table.active_indices()).tolist() == [True]
    assert groups.sizes(table) == {"pool-a": 1}
    empty = NodeTable()
    assert groups.at_min_size(empty, empty.active_indices()).tolist() == []


def test_a_node_the_capacities_do_not_list_counts_no_cores() -> None:
    """Capacities of n0 and n1 (4 cores each) only: the cluster has 8 cores, n2 counting 0.
    At least 5: 3 above the minimum, so n0 (4) and n1 (4) are both kept; n2 (0) goes."""
    table = _table({"n0": {}, "n1": {}, "n2": {}})
    capacity = {"n0": (4, 16 * GI), "n1": (4, 16 * GI)}
    kept = kept_at_limits(table, ["n0", "n1", "n2"], NodeGroups(), capacity, ResourceMinimums(cores=5))
    assert kept == {"n0": RESOURCE_LIMIT, "n1": RESOURCE_LIMIT}


def test_a_cluster_under_its_minimum_keeps_its_nodes_but_not_one_without_that_resource() -> None:
    """As the autoscaler's quota tracker (resourcequotas/factory.go: what may be removed is
    ``max(0, usage - limit)``; tracker.go ``checkQuota`` skips a resource the node has none
    of): 8 cores under a minimum of 20 leave 0 to remove, so n0 (4 cores) is kept, while
    n2, with no cores listed (0), takes nothing of it and goes."""
    table = _table({"n0": {}, "n1": {}, "n2": {}})
    capacity = {"n0": (4, 16 * GI), "n1": (4, 16 * GI), "n2": (0, 16 * GI)}
    kept = kept_at_limits(table, ["n0", "n2"], NodeGroups(), capacity, ResourceMinimums(cores=20))
    assert kept == {"n0": RESOURCE_LIMIT}


def test_a_node_kept_for_the_minimum_resources_takes_nothing_of_its_group_or_the_totals() -> None:
    """As ``unremovableReason`` (core/scaledown/unneeded/nodes.go): a node over the resource
    limit is kept before its group's size is counted down, and the tracker takes its
    resources only when it is let go. Pool p: n0 4, big 8, n2 4 cores (16), minimum size 1
    (2 may go), at least 6 cores (10 above). n0 goes (6 left, p may lose 1 more); big (8 >
    6) is kept; n2 (4 <= 6) goes, the last node p may lose."""
    table = _table({"n0": {POOL: "p"}, "big": {POOL: "p"}, "n2": {POOL: "p"}})
    capacity = {"n0": (4, 16 * GI), "big": (8, 32 * GI), "n2": (4, 16 * GI)}
    groups = NodeGroups(min_sizes={"p": 1})
    kept = kept_at_limits(table, ["n0", "big", "n2"], groups, capacity, ResourceMinimums(cores=6))
    assert kept == {"big": RESOURCE_LIMIT}
    # no group minimum: n2 goes on the cores big did not take
    assert kept_at_limits(table, ["n0", "big", "n2"], NodeGroups(), capacity, ResourceMinimums(cores=6)) == {
        "big": RESOURCE_LIMIT
    }
