"""What the plugins share: argument errors, kube's integer helpers, score normalization
and the per-node score memo."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

import numpy as np

from stickypack.core.framework import MAX_NODE_SCORE


class PluginArgsError(ValueError):
    """Arguments a plugin does not accept."""


#: Largest weight of one resource in a scorer's ``resources``, as kube-scheduler validates
#: them ("resource weight of X not in valid range (0, 100]").
MAX_RESOURCE_WEIGHT = 100


def go_div(num: np.ndarray, den: int | np.ndarray) -> np.ndarray:
    """Integer division truncating toward zero, as Go's ``/`` on int64."""
    q = np.abs(num) // np.abs(den)
    return np.where((num < 0) ^ (np.asarray(den) < 0), -q, q)


def resource_weights(raw: Any, default: Sequence[tuple[str, int]]) -> list[tuple[str, int]]:
    """A plugin's ``resources`` argument (a mapping or kube's list of ``{name, weight}``) as
    ``(resource, weight)`` pairs; ``default`` when absent or empty (kube-scheduler's v1
    defaulting gives an empty list cpu and memory, weight 1, for NodeResourcesFit and
    NodeResourcesBalancedAllocation alike)."""
    if raw is None or (isinstance(raw, Mapping | list) and not raw):
        return list(default)
    if isinstance(raw, Mapping):
        items = list(raw.items())
    elif isinstance(raw, list):
        if not all(isinstance(r, Mapping) and isinstance(r.get("name"), str) for r in raw):
            raise PluginArgsError(f"resources as a list is of {{name, weight}} entries, got {raw!r}")
        items = [(r["name"], r.get("weight", 1)) for r in raw]
    else:
        raise PluginArgsError(f"resources must be a mapping or a list, got {raw!r}")
    out = []
    for name, weight in items:
        if not isinstance(weight, int) or isinstance(weight, bool) or not 1 <= weight <= MAX_RESOURCE_WEIGHT:
            raise PluginArgsError(
                f"resource weight of {name!r} must be an integer in 1..{MAX_RESOURCE_WEIGHT}"
            )
        out.append((str(name), weight))
    return out


class ScoreMemo:
    """Scores of a node-local scorer, looked up by the integers they depend on.

    Some scorers give a node a score that depends only on a few integers: the node's
    requests and allocatable and the pod's requests (no normalization across nodes). In a
    cluster of like nodes and like pods the same tuples recur, and looking a score up costs
    a fraction of one numpy pass over a handful of nodes (per-call overhead dominates
    there). A miss is computed by the plugin's own numpy code, so the scores are the same by
    construction. Above ``max_nodes`` candidates one numpy pass is cheaper than a Python
    loop over the keys, and the memo steps aside. Per plugin instance (no global state);
    cleared when it holds ``limit`` entries, so a live cluster of varied pods cannot grow it
    without bound.
    """

    __slots__ = ("_scores", "limit", "max_nodes")

    def __init__(self, limit: int = 4096, max_nodes: int = 40) -> None:
        self._scores: dict[Hashable, int] = {}
        self.limit = limit
        self.max_nodes = max_nodes

    def __len__(self) -> int:
        return len(self._scores)

    def scores(
        self,
        idx: np.ndarray,
        keys: Callable[[], list[Hashable]],
        compute: Callable[[np.ndarray], np.ndarray],
    ) -> np.ndarray:
        """Scores of the node rows ``idx``: ``keys()`` gives one key per row, ``compute(rows)``
        scores rows with the plugin's numpy code (the misses, or all of ``idx`` when it is
        longer than ``max_nodes``)."""
        if idx.shape[0] > self.max_nodes:
            return compute(idx)
        wanted = keys()
        known = self._scores
        out = [known.get(k) for k in wanted]
        if None in out:
            missing = [j for j, v in enumerate(out) if v is None]
            if len(known) + len(missing) > self.limit:
                known.clear()
            for j, v in zip(missing, compute(idx[missing]).tolist(), strict=True):
                out[j] = known[wanted[j]] = v
        return np.array(out, dtype=np.int64)


def node_state_keys(used: np.ndarray, alloc: np.ndarray, pod_part: tuple[Hashable, ...]) -> list[Hashable]:
    """:class:`ScoreMemo` keys: per node row, its ``used`` and ``alloc`` rows (whole rows of
    the table, so every resource a score could read is in the key) and ``pod_part`` (what
    the score reads of the pod, and any setting it depends on)."""
    return [(*u, *a, *pod_part) for u, a in zip(used.tolist(), alloc.tolist(), strict=True)]


def default_normalize(raw: np.ndarray, reverse: bool) -> np.ndarray:
    """kube's ``helper.DefaultNormalizeScore(100, reverse, scores)``."""
    top = int(raw.max()) if raw.size else 0
    if top == 0:
        return np.full(raw.shape, MAX_NODE_SCORE if reverse else 0, dtype=np.int64)
    out = MAX_NODE_SCORE * raw // top
    return MAX_NODE_SCORE - out if reverse else out


def min_max_scores(counts: np.ndarray, fewest_first: bool) -> np.ndarray:
    """Integer scores 0..100 over ``counts``, min-max normalized: 100 for the fewest (or, with
    ``fewest_first`` False, the most), 0 for the other end; all 100 when every count is equal."""
    lo, hi = int(counts.min()), int(counts.max())
    if hi == lo:
        return np.full(counts.shape[0], MAX_NODE_SCORE, dtype=np.int64)
    return MAX_NODE_SCORE * ((hi - counts) if fewest_first else (counts - lo)) // (hi - lo)
