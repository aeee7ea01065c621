"""Prototype filter tried in session 32 (docs/simulator.md, "Tried in session 32").

Load with ``benchmarks/policy_trials.py --plugins benchmarks/trials/session32.py``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from stickypack.core.framework import FilterPlugin
from stickypack.core.nodetable import NodeTable
from stickypack.core.plugins.builds import BuildBounds
from stickypack.core.pod import Pod


class BuildLoadBound(FilterPlugin):
    """The live extender's load-bound filter in the core: a build pod is kept off the nodes
    where one more build would exceed the load cap (``BuildBounds.load_cap``), unless that
    leaves no node. The shipped policy only withholds ``BuildLocality``'s points there."""

    name = "BuildLoadBound"

    def __init__(self, load_bound: float = 1.25, min_load_cap: int = 3) -> None:
        self.bounds = BuildBounds(load_bound, min_load_cap)

    def filter(self, pod: Pod, table: NodeTable, idx: np.ndarray, ctx: Any) -> np.ndarray:
        passes = np.ones(idx.shape[0], dtype=bool)
        if pod.build_repo is None or idx.size == 0:
            return passes
        over = table.builds[idx] + 1 > self.bounds.load_cap(table)
        return passes if over.all() else ~over


FILTERS = {"BuildLoadBound": BuildLoadBound}
