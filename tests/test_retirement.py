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
