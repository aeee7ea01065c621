"""stickypack's plugins for not blocking scale-down: stay off nodes the autoscaler wants to
remove (``ScaleDownAware``), fill the oldest nodes first (``NodeAge``), and the oracle's
``LifetimeAware``."""

from __future__ import annotations

from typing import Any

import numpy as np

from stickypack.core.framework import (
    MAX_NODE_SCORE,
    FilterPlugin,
    SchedulingContext,
    ScorePlugin,
)
from stickypack.core.nodetable import NodeTable
from stickypack.core.plugins.common import PluginArgsError, ScoreMemo, node_state_keys
from stickypack.core.pod import Pod
from stickypack.core.resources import CPU, MEMORY

#: Annotation carrying a pod's expected end time (seconds), read by the ``LifetimeAware``
#: oracle. Only the simulator knows it.
EXPECTED_END_ANNOTATION = "stickypack.io/expected-end"


class ScaleDownAwareFilter(FilterPlugin):
    """Never place on a node the cluster-autoscaler is deleting."""

    name = "ScaleDownAware"

    def filter(self, pod: Pod, table: NodeTable, idx: np.ndarray, ctx: SchedulingContext) -> np.ndarray:
        return ~table.to_be_deleted[idx]


def utilization_with(pod: Pod, table: NodeTable, idx: np.ndarray) -> np.ndarray:
    """The cluster-autoscaler's utilization of rows ``idx`` with ``pod`` placed: max of cpu
    and memory requests over allocatable (a float, may exceed 1)."""
    req = table.requested[idx, :2] + (pod.requests.get(CPU, 0), pod.requests.get(MEMORY, 0))
    return (req / np.maximum(table.alloc[idx, :2], 1)).max(axis=1)


def quiet_nodes(pod: Pod, table: NodeTable, idx: np.ndarray, threshold: float) -> np.ndarray:
    """Rows of ``idx`` that would stay under the autoscaler's utilization ``threshold`` even
    with ``pod`` placed: the nodes the autoscaler would remove once their bare pods end."""
    return utilization_with(pod, table, idx) < threshold


class ScaleDownAware(ScorePlugin):
    """Keep pods off nodes the autoscaler wants to remove, so they can empty.

    A node that would stay under the autoscaler's utilization threshold even with the pod
    (max of cpu and memory requests over allocatable) is one the autoscaler would remove
    once its bare pods end: it scores ``low_score * utilization / threshold`` (0..20 by
    default); a node marked ``DeletionCandidateOfClusterAutoscaler`` scores 0; every other
    node scores 100. Weighted above the packing scorers, this sends pods to busy nodes
    whenever one has room, and lets the quiet ones drain.
    """

    name = "ScaleDownAware"

    def __init__(self, low_score: int = 20) -> None:
        if not 0 <= low_score <= 100:
            raise PluginArgsError("ScaleDownAware low_score must be 0..100")
        self.low_score = low_score
        self._memo = ScoreMemo()

    def _by_utilization(self, pod: Pod, table: NodeTable, idx: np.ndarray, threshold: float) -> np.ndarray:
        util = utilization_with(pod, table, idx)
        thr = max(threshold, 1e-9)
        return np.where(util < thr, self.low_score * util / thr, MAX_NODE_SCORE).astype(np.int64)

    def score(self, pod: Pod, table: NodeTable, idx: np.ndarray, ctx: SchedulingContext) -> np.ndarray:
        threshold = ctx.utilization_threshold
        pod_part = (pod.requests.get(CPU, 0), pod.requests.get(MEMORY, 0), threshold)
        score = self._memo.scores(
            idx,
            lambda: node_state_keys(table.requested[idx], table.alloc[idx], pod_part),
            lambda rows: self._by_utilization(pod, table, rows, threshold),
        )
        score[table.deletion_candidate[idx]] = 0
        return score

    def describe(self) -> dict[str, Any]:
        return {"plugin": self.name, "args": {"low_score": self.low_score}}


class NodeAge(ScorePlugin):
    """Older nodes first: the oldest candidate scores 100, the newest 0, linear in rank.

    With a packing scorer this is First-Fit by node age: the oldest nodes stay full and the
    newest take only the overflow, so when load falls the newest nodes empty first and the
    autoscaler can remove them (First Fit keeps within a constant of optimal for online
    packing with departures; Best Fit alone does not).

    ``min_nodes``: in a cluster of fewer nodes (all nodes, not only the candidates) every
    candidate scores 100, so age plays no part there.
    """

    name = "NodeAge"

    def __init__(self, min_nodes: int = 1) -> None:
        if min_nodes < 1:
            raise PluginArgsError("NodeAge needs min_nodes >= 1")
        self.min_nodes = min_nodes

    def describe(self) -> dict[str, Any]:
        return {"plugin": self.name, "args": {"min_nodes": self.min_nodes}}

    def score(self, pod: Pod, table: NodeTable, idx: np.ndarray, ctx: SchedulingContext) -> np.ndarray:
        n = idx.shape[0]
        if n == 1 or (self.min_nodes > 1 and table.active_indices().size < self.min_nodes):
            return np.full(n, MAX_NODE_SCORE, dtype=np.int64)
        order = np.lexsort((idx, table.created[idx]))  # oldest first, slot breaks ties
        rank = np.empty(n, dtype=np.int64)
        rank[order] = np.arange(n)
        return MAX_NODE_SCORE - MAX_NODE_SCORE * rank // (n - 1)


class LifetimeAware(ScorePlugin):
    """The oracle: knows each pod's end time (annotation ``stickypack.io/expected-end``,
    seconds) and each node's ``expiry`` (latest end of its pods, kept by the simulator).
    A node the pod would not outlive scores 100; otherwise the less the pod would extend
    the node's life, the higher. Not deployable: real pods do not know when they end."""

    name = "LifetimeAware"

    def skip(self, pod: Pod) -> bool:
        return EXPECTED_END_ANNOTATION not in pod.annotations

    def score(self, pod: Pod, table: NodeTable, idx: np.ndarray, ctx: SchedulingContext) -> np.ndarray:
        end = float(pod.annotations[EXPECTED_END_ANNOTATION])
        expiry = table.ensure_extra("expiry")[idx]
        extension = np.maximum(end - np.maximum(expiry, ctx.now), 0.0)
        top = extension.max()
        if top <= 0:
            return np.full(idx.shape[0], MAX_NODE_SCORE, dtype=np.int64)
        return (MAX_NODE_SCORE - MAX_NODE_SCORE * extension / top).astype(np.int64)
