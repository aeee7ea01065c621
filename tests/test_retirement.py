"""Node-aware retirement: which workers a shrinking cluster retires so whole nodes empty."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from stickypack.core.retirement import choose_retirements, retirement_order


def test_the_node_with_fewest_workers_goes_first_whole():
    workers = {"a1": "a", "b1": "b", "a2": "a", "c1": "c", "b2": "b", "a3": "a"}
    assert retirement_order(workers) == ["c1", "b1", "b2", "a1", "a2", "a3"]
    assert choose_retirements(workers, 3) == ["c1", "b1", "b2"]  # two nodes empty
    assert choose_retirements(workers, 0) == [] and choose_retirements(workers, -1) == []
    assert choose_retirements(workers, 99) == retirement_order(workers)


def test_ties_go_by_node_name_and_unplaced_workers_go_first_in_the_order_given():
    pairs = [("w1", "n2"), ("w2", None), ("w3", "n1"), ("w4", None)]
    assert retirement_order(pairs) == ["w2", "w4", "w3", "w1"]
    # no node known for any: the order given (so a plugin that learns nothing changes nothing)
    assert retirement_order([("x", None), ("y", None), ("z", None)]) == ["x", "y", "z"]


def _occupied(worker_nodes: dict[str, str], retired: list[str]) -> int:
    return len({node for w, node in worker_nodes.items() if w not in retired})


@given(
    st.dictionaries(
        st.text("abcdefgh", min_size=1, max_size=3),
        st.sampled_from(["n0", "n1", "n2", "n3", "n4"]),
        max_size=9,
    ),
    st.integers(0, 10),
)
def test_no_choice_of_as_many_workers_leaves_fewer_nodes_occupied(worker_nodes, count):
    chosen = choose_retirements(worker_nodes, count)
    assert len(chosen) == min(count, len(worker_nodes)) and len(set(chosen)) == len(chosen)
    best = min(
        _occupied(worker_nodes, list(combo))
        for combo in itertools.combinations(worker_nodes, min(count, len(worker_nodes)))
    )
    assert _occupied(worker_nodes, chosen) == best


def test_a_node_holding_a_worker_the_caller_keeps_longer_goes_after_those_that_can_empty():
    # x1 costs more (distributed: busy, or holding data) than every other worker
    workers = {"x1": "x", "x2": "x", "x3": "x", "y1": "y", "y2": "y", "y3": "y"}
    cost = {"x1": 1}.get
    order = retirement_order(workers, cost=lambda w: cost(w, 0))
    assert order == ["y1", "y2", "y3", "x1", "x2", "x3"]  # (the retirer takes x1 last)
    # node x also holds a worker the caller may not retire at all (a long-running task): it
    # cannot empty, so it goes last even though it lists fewest
    listed = {"x2": "x", "y1": "y", "y2": "y"}
    assert retirement_order(listed, node_workers={"x": 2, "y": 2}) == ["y1", "y2", "x2"]
    assert retirement_order(listed) == ["x2", "y1", "y2"]  # blind to x's other worker


def test_with_costs_a_node_goes_by_how_many_of_its_workers_share_its_top_cost() -> None:
    """With ``cost``, the nodes whose costliest workers cost alike go by how many workers
    are at that cost (not how many they hold), then by name; a node's workers keep the
    order given. Node a holds w4, w3, w2 at cost 0 and w1 at 1: top 1, one worker there;
    node b holds two at cost 1: top 1, two there; node c holds one at cost 1: it ties with
    a and goes after it by name."""
    workers = {"w4": "a", "w3": "a", "w2": "a", "w1": "a", "v1": "b", "v2": "b", "u1": "c"}
    cost = {"w4": 0, "w3": 0, "w2": 0, "w1": 1, "v1": 1, "v2": 1, "u1": 1}
    # ranks (pinned, top cost, workers at it, name): a (F, 1, 1, a), c (F, 1, 1, c), b (F, 1, 2, b);
    # counting all a node's workers instead would put a (4) after b (2) and c (1)
    assert retirement_order(workers, cost=cost.__getitem__) == ["w4", "w3", "w2", "w1", "u1", "v1", "v2"]
    # the same given in another order: the nodes' order stands, each node's workers as given
    reordered = dict(reversed(list(workers.items())))
    assert retirement_order(reordered, cost=cost.__getitem__) == ["w1", "w2", "w3", "w4", "u1", "v2", "v1"]


def _retired_by(order: list[str], cost: dict[str, int], count: int) -> list[str]:
    """What a retirer that sorts by cost first (stable: ``order`` among equal costs), as
    distributed does, retires."""
    return sorted(order, key=lambda w: cost[w])[:count]


@given(
    st.dictionaries(
        st.text("abcdefgh", min_size=1, max_size=2),
        st.tuples(st.sampled_from(["n0", "n1", "n2", "n3"]), st.integers(0, 2)),
        max_size=8,
    ),
    st.integers(0, 9),
)
def test_with_costs_no_choice_the_retirer_could_make_leaves_fewer_nodes_occupied(workers, count):
    nodes = {w: node for w, (node, _) in workers.items()}
    cost = {w: c for w, (_, c) in workers.items()}
    count = min(count, len(workers))
    chosen = _retired_by(retirement_order(nodes, cost=cost.__getitem__), cost, count)
    # whatever order it is given, the retirer takes the cheaper workers first: the choice is
    # only which of the workers at the last cost it reaches
    by_cost = sorted(workers, key=lambda w: cost[w])
    if count:
        last = cost[by_cost[count - 1]]
        cheaper = [w for w in by_cost if cost[w] < last]
        alike = [w for w in by_cost if cost[w] == last]
        options = [cheaper + list(c) for c in itertools.combinations(alike, count - len(cheaper))]
    else:
        options = [[]]
    assert _occupied(nodes, chosen) == min(_occupied(nodes, option) for option in options)
