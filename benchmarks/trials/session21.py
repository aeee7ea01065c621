"""Prototype scorers tried in session 21 and not kept (docs/simulator.md, "Tried in session 21").

Load with ``benchmarks/policy_trials.py --plugins benchmarks/trials/session21.py``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from stickypack.core.framework import MAX_NODE_SCORE, ScorePlugin
from stickypack.core.nodetable import NodeTable
from stickypack.core.plugins.common import min_max_scores
from stickypack.core.plugins.scaledown import DrainForecast, _age_rank_scores
from stickypack.core.pod import Pod


class ExpectedExtension(DrainForecast):
    """Nodes ranked by how much node time a new session is expected to add, least first.

    A session of length X on a node whose pods have all ended by D adds (X - D)+ seconds;
    E[(X - D)+] = integral over t of P(D <= t) * P(X > t)^weight_power, on a grid of
    ``h_step_s`` seconds up to ``max_h_s``. D comes from the ages of the node's sessions and
    the session model, as in :class:`DrainForecast` (whose arguments it takes); with
    ``weight_power`` 0 every t weighs alike, so it ranks by E[min(D, max_h_s)].
    """

    name = "ExpectedExtension"

    def __init__(
        self, h_step_s: float = 300.0, max_h_s: float = 21600.0, weight_power: float = 1.0, **kw: Any
    ):
        super().__init__(**kw)
        step = self._STEP_S
        self._h = (np.arange(0.0, max_h_s + 1, h_step_s) / step).astype(np.int64)
        last = self._surv.shape[0] - 1
        ages = np.arange(self._surv.shape[0])
        later = self._surv[np.minimum(ages[:, None] + self._h[None, :], last)]
        now = self._surv[ages][:, None]
        ratio = np.divide(later, now, out=np.zeros_like(later), where=now > 0)
        with np.errstate(divide="ignore"):
            # log P(a session of age index k has ended t_j later), per k and j
            self._log_ended_by = np.maximum(np.log1p(-np.minimum(ratio, 1.0)), -1e6)
        self._weights = self._surv[np.minimum(self._h, last)] ** weight_power * h_step_s

    def score(self, pod: Pod, table: NodeTable, idx: np.ndarray, ctx: Any) -> np.ndarray:
        if idx.shape[0] == 1:
            return np.full(1, MAX_NODE_SCORE, dtype=np.int64)
        rows, ages = table.pod_ages(ctx.now)
        log_empty = np.zeros((table.alloc.shape[0], self._h.shape[0]))
        if rows.size:
            np.add.at(log_empty, rows, self._log_ended_by[self._age_index(ages)])
        extension = np.round((np.exp(log_empty[idx]) * self._weights).sum(axis=1), 6)
        return _age_rank_scores(np.lexsort((idx, table.created[idx], extension)))


class BuildShedder(ScorePlugin):
    """Non-build pods, in clusters under ``max_nodes`` nodes: the nodes that have started
    the fewest builds score highest (the opposite of ``CacheKeeper``), so the build-heavy
    node drains and newer nodes take the later builds."""

    name = "BuildShedder"

    def __init__(self, max_nodes: int = 10) -> None:
        self.max_nodes = max_nodes

    def skip(self, pod: Pod) -> bool:
        return pod.build_repo is not None

    def score(self, pod: Pod, table: NodeTable, idx: np.ndarray, ctx: Any) -> np.ndarray:
        if table.active_indices().size >= self.max_nodes:
            return np.full(idx.shape[0], MAX_NODE_SCORE, dtype=np.int64)
        return min_max_scores(table.build_starts[idx], fewest_first=True)


SCORERS = {"ExpectedExtension": ExpectedExtension, "BuildShedder": BuildShedder}
