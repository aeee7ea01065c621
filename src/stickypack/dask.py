"""Dask: a shrinking cluster retires its workers node by node, so whole nodes empty.

Dask workers on Kubernetes are bare pods (dask-gateway), which the cluster autoscaler does
not evict, so one worker left on a node keeps that node; the dask-kubernetes operator's are
one-replica Deployments, whose pod the autoscaler may evict instead, killing that worker
(restarted elsewhere without what it held). When a cluster scales down, distributed's
``Scheduler.workers_to_close`` picks idle workers holding the least data, blind to nodes;
dask-gateway and the dask-kubernetes operator both ask it which workers to close. This
module makes that choice node-aware, with two halves loaded as a Dask preload module
(``--preload stickypack.dask``, or the config keys ``distributed.scheduler.preload`` and
``distributed.worker.preload``, e.g. the environment variables
``DASK_DISTRIBUTED__SCHEDULER__PRELOAD=stickypack.dask`` and
``DASK_DISTRIBUTED__WORKER__PRELOAD=stickypack.dask``; distributed reads those only where
the command line names no ``--preload``, and dask-gateway's scheduler command names its own,
so there ``--preload stickypack.dask`` goes on its ``scheduler_cmd``; ``stickypack render
dask-gateway`` and ``render dask-kubernetes`` write all of it, :mod:`stickypack.daskconfig`):

- **On each worker** it reports the name of the node the worker runs on, read from the
  environment variable ``STICKYPACK_NODE_NAME`` (give it ``spec.nodeName`` through the
  downward API), as the worker's startup information ``stickypack-node``. The scheduler
  cannot learn the node otherwise: it sees a worker's pod IP.
- **On the scheduler** it registers :class:`NodeAwareRetirement`, a ``SchedulerPlugin``
  whose ``valid_workers_downscaling`` hook hands distributed the candidates in
  :func:`stickypack.core.retirement.retirement_order`: the node with the fewest of the
  cluster's workers first, its workers together.

The hook can order the candidates but not override distributed's own rules, which come
first: busy workers go last, then workers holding more data. Among idle workers holding
alike (in particular none, as when a cluster shrinks after its work is done and its results
gathered), the node order decides; so a node goes by the worker of it distributed closes
last (a node with a busy worker, or one holding data, after the nodes that can empty
before it), and a node holding a worker distributed never closes (one running a
long-running task) goes last. Workers that report no node go first, in distributed's
order; if none reports one, nothing changes.

Needs ``distributed >= 2024.4.2`` (the hook) wherever the scheduler and the workers run:
install ``stickypack[dask]`` into their image.
"""

from __future__ import annotations

import logging
import os
from collections import Counter

from distributed import Scheduler, SchedulerPlugin, Worker
from distributed.scheduler import WorkerState

from stickypack.core.retirement import retirement_order
from stickypack.daskconfig import NODE_ENV

#: The key of a worker's startup information (``WorkerState.extra``) that names its node.
NODE_KEY = "stickypack-node"

logger = logging.getLogger(__name__)


def worker_node(ws: WorkerState) -> str | None:
    """The node a worker reported (``None`` if it reported none, or not a name)."""
    node = ws.extra.get(NODE_KEY)
    return node if isinstance(node, str) and node else None


class NodeAwareRetirement(SchedulerPlugin):
    """Orders the workers distributed may close so whole nodes empty first.

    distributed sorts the candidates by its own rules (idle first, least data first), a
    stable sort, and closes from the end of that list; so the candidates are handed back
    last-to-retire first, and among workers its rules cannot tell apart the node order
    decides. No worker is added or removed.
    """

    name = "stickypack-node-aware-retirement"

    def __init__(self) -> None:
        self._warned_unplaced = False

    def valid_workers_downscaling(
        self, scheduler: Scheduler, workers: list[WorkerState]
    ) -> list[WorkerState]:
        nodes = [(ws, worker_node(ws)) for ws in workers]
        placed = [(ws, node) for ws, node in nodes if node is not None]
        unplaced = [ws for ws, node in nodes if node is None]
        # every worker of a node counts, also those distributed may not close (a long-running
        # task): a node holding one cannot empty
        node_workers = Counter(node for ws in scheduler.workers.values() if (node := worker_node(ws)))
        if unplaced and not self._warned_unplaced:
            self._warned_unplaced = True
            logger.warning(
                "%d of %d workers report no node: start workers with the preload "
                "stickypack.dask and %s set (downward API spec.nodeName); they keep "
                "distributed's order and go first",
                len(unplaced),
                len(workers),
                NODE_ENV,
            )
        # distributed closes from the end: the unplaced ones first, in its own order, then
        # the rest in ours
        order = retirement_order(placed, cost=_distributed_cost, node_workers=node_workers)
        return order[::-1] + unplaced


def _distributed_cost(ws: WorkerState) -> tuple[bool, int]:
    """The order in which distributed's ``workers_to_close`` takes workers, whatever the
    plugin says: idle before busy, then least data first."""
    return bool(ws.processing), ws.nbytes


def _report_node(worker: Worker) -> None:
    node = os.environ.get(NODE_ENV, "").strip()
    if not node:
        logger.warning(
            "%s is not set: this worker reports no node, so the scheduler cannot retire it "
            "node by node (set it from the downward API: fieldRef spec.nodeName)",
            NODE_ENV,
        )
        return
    worker.startup_information[NODE_KEY] = lambda _worker: node


def dask_setup(server: object) -> None:
    """Preload entry point (``--preload stickypack.dask``): on a scheduler, register
    :class:`NodeAwareRetirement`; on a worker, report its node; anything else (a nanny, a
    client) is left alone."""
    if isinstance(server, Scheduler):
        server.add_plugin(NodeAwareRetirement())
    elif isinstance(server, Worker):
        _report_node(server)
