"""Which workers a shrinking cluster retires, so that whole nodes empty.

A Dask cluster that scales down from 100 workers to 10 frees nodes only where it retires
*every* worker on a node: the workers are bare pods, so a node with one left stays (the
cluster autoscaler does not evict them). distributed picks by data held, blind to nodes;
:func:`retirement_order` picks nodes: the node with the fewest of the cluster's workers
goes first, all of its workers together, then the next. Retiring ``n`` workers in this
order vacates as many of the cluster's nodes as any choice of ``n`` can (the smallest groups
first is what fits most whole groups into ``n``).

Pure: the caller says which node each worker is on (the simulator from its node table, the
Dask scheduler plugin in :mod:`stickypack.dask` from what workers report).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Any, TypeVar

W = TypeVar("W", bound=Hashable)


def retirement_order(
    worker_nodes: Mapping[W, str | None] | Iterable[tuple[W, str | None]],
    *,
    cost: Callable[[W], Any] | None = None,
    node_workers: Mapping[str, int] | None = None,
) -> list[W]:
    """Every worker, first to retire first.

    ``worker_nodes`` maps each worker to the name of its node, or ``None`` where that is
    not known (a pod not yet placed, a worker that reports no node). Those go first, in
    the order given: retiring one frees no node, but keeps none pinned. Then the nodes,
    fewest of these workers first (ties by node name), each node's workers together, in
    the order given. Deterministic for a given input order.

    Two things a caller may know that change which nodes can empty:

    - ``cost``: the order in which whoever retires takes workers, whatever this order says
      (distributed: idle before busy, then least data first; this order only breaks its
      ties). A node goes by its costliest worker, cheapest first, then by how many of its
      workers are at that cost: the workers at one cost are retired in this order, and
      the nodes that empty at that cost are those with none costlier.
    - ``node_workers``: how many workers each node holds in all, where ``worker_nodes``
      lists only those that may be retired: a node holding others cannot empty, so it goes
      last.
    """
    pairs = list(worker_nodes.items()) if isinstance(worker_nodes, Mapping) else list(worker_nodes)
    unplaced: list[W] = []
    by_node: dict[str, list[W]] = {}
    for worker, node in pairs:
        if node is None:
            unplaced.append(worker)
        else:
            by_node.setdefault(node, []).append(worker)

    def rank(node: str) -> tuple[bool, Any, int, str]:
        workers = by_node[node]
        pinned = node_workers is not None and node_workers.get(node, 0) > len(workers)
        if cost is None:
            return pinned, 0, len(workers), node
        costs = [cost(w) for w in workers]
        top = max(costs)
        return pinned, top, costs.count(top), node

    order = unplaced
    for node in sorted(by_node, key=rank):
        order.extend(by_node[node])
    return order


def choose_retirements(
    worker_nodes: Mapping[W, str | None] | Iterable[tuple[W, str | None]], count: int
) -> list[W]:
    """The first ``count`` workers of :func:`retirement_order` (all of them if fewer;
    none for ``count <= 0``)."""
    if count <= 0:
        return []
    return retirement_order(worker_nodes)[:count]
