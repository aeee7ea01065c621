"""stickypack's plugins for build pods and the room they need: ``BuildLocality`` (history,
rendezvous order, bounded load), ``DelayForLocality``, ``BuildSpread``, ``BuildHeadroom``,
``CacheKeeper``."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from stickypack.core.framework import (
    MAX_NODE_SCORE,
    FilterPlugin,
    SchedulingContext,
    ScorePlugin,
)
from stickypack.core.nodetable import NodeTable
from stickypack.core.plugins.common import PluginArgsError, ScoreMemo, min_max_scores, node_state_keys
from stickypack.core.plugins.kubescheduler import (
    NodeAffinityFilter,
    NodeReady,
    NodeUnschedulable,
    TaintTolerationFilter,
    fits_within,
)
from stickypack.core.plugins.scaledown import quiet_nodes
from stickypack.core.pod import Pod
from stickypack.core.quantity import QuantityError, int_value, milli_value
from stickypack.core.rendezvous import rendezvous_rank
from stickypack.core.resources import CPU, MEMORY, PODS

#: Defaults of the build bounds, for ``BuildBounds`` and the plugins that take them as args.
DEFAULT_LOAD_BOUND = 1.25
DEFAULT_MIN_LOAD_CAP = 2
#: Largest ``load_bound`` / ``spread_bound``: beyond it a bound never binds anyway.
MAX_BOUND_FACTOR = 1e6


@dataclass(frozen=True, slots=True)
class BuildBounds:
    """Bounded loads for builds (Mirrokni, Thorup, Zadimoghaddam 2018), shared by
    ``BuildLocality``, ``DelayForLocality`` and the extender's load-bound filter.

    With the new build counted, a node runs at most ``max(min_load_cap, ceil(load_bound *
    mean running builds))`` builds (the floor lets a small cluster repeat a build). With
    ``spread_bound``, it has also started at most ``max(min_load_cap, ceil(spread_bound *
    mean builds started))`` since it joined, so no node takes much more than its share of
    the day's builds. Means are over all nodes of the table.
    """

    load_bound: float = DEFAULT_LOAD_BOUND
    min_load_cap: int = DEFAULT_MIN_LOAD_CAP
    spread_bound: float | None = None

    def __post_init__(self) -> None:
        factors = [self.load_bound] if self.spread_bound is None else [self.load_bound, self.spread_bound]
        if self.min_load_cap < 1 or not all(1 <= f <= MAX_BOUND_FACTOR for f in factors):  # False for NaN
            raise PluginArgsError(
                f"build bounds need 1 <= load_bound <= {MAX_BOUND_FACTOR:g}, min_load_cap >= 1, "
                f"1 <= spread_bound <= {MAX_BOUND_FACTOR:g}"
            )

    def _cap(self, factor: float, counts: np.ndarray, table: NodeTable) -> int:
        all_idx = table.active_indices()
        total = int(counts[all_idx].sum()) + 1
        return max(self.min_load_cap, math.ceil(factor * total / max(all_idx.size, 1)))

    def load_cap(self, table: NodeTable) -> int:
        """Most builds a node may run with one more build placed."""
        return self._cap(self.load_bound, table.builds, table)

    def over(self, table: NodeTable) -> np.ndarray:
        """Per node row: would one more build break a bound? (bool, indexed by row)"""
        over = table.builds + 1 > self.load_cap(table)
        if self.spread_bound is not None:
            over |= table.build_starts + 1 > self._cap(self.spread_bound, table.build_starts, table)
        return over

    def describe(self) -> dict[str, Any]:
        return {
            "load_bound": self.load_bound,
            "min_load_cap": self.min_load_cap,
            "spread_bound": self.spread_bound,
        }


class BuildLocality(ScorePlugin):
    """Send a build where its repo's image layers are: build history first, then the repo's
    rendezvous order over the builder nodes (BinderHub's order), under a load bound.

    Scores: the node that built the repo most recently 100, older history nodes 95, 90...;
    rendezvous rank ``r`` (0-based, over all builder nodes, so the order is stable while
    nodes come and go) ``top_score - r * step`` for ``r < top_k``; every other node 0. A
    node whose running builds would exceed ``max(min_load_cap, ceil(load_bound * mean))``
    (mean over all nodes, this build included) scores 0, so one hot repo cannot pile its
    builds on one node; so does a node marked for deletion by the autoscaler (its cache is
    about to go). With ``rendezvous_fallback``, the rendezvous scores count only when no
    history node passes (none alive, fitting and under the bounds): a cold node cannot
    outscore the cache with help from the other scorers, at the price of concentrating a
    repo's builds on its cache node.
    """

    name = "BuildLocality"

    def __init__(
        self,
        top_k: int = 3,
        load_bound: float = DEFAULT_LOAD_BOUND,
        min_load_cap: int = DEFAULT_MIN_LOAD_CAP,
        top_score: int = 80,
        step: int = 20,
        spread_bound: float | None = None,
        rendezvous_fallback: bool = False,
    ) -> None:
        if top_k < 0 or not 0 <= top_score <= 100 or step < 0:
            raise PluginArgsError("BuildLocality needs top_k >= 0, 0 <= top_score <= 100, step >= 0")
        self.bounds = BuildBounds(load_bound, min_load_cap, spread_bound)
        self.rendezvous_fallback = rendezvous_fallback
        self.top_k = top_k
        self.top_score = top_score
        self.step = step
        # the ranking depends on these too: another BuildLocality sharing ctx.cache must not
        # read this one's scores
        self._cache_prefix = f"{self.RENDEZVOUS_CACHE_PREFIX}{top_k}:{top_score}:{step}:"

    def skip(self, pod: Pod) -> bool:
        return pod.build_repo is None

    #: Prefix of the ``ctx.cache`` keys holding a repo's rendezvous scores: they depend only
    #: on the builder nodes, so a driver may keep them across decisions while those stay
    #: the same (the extender does: the ranking is ~0.3 ms at 500 nodes).
    RENDEZVOUS_CACHE_PREFIX: ClassVar[str] = "rendezvous:"

    def rendezvous_scores(self, repo: str, table: NodeTable, ctx: SchedulingContext) -> dict[str, int]:
        """Node name -> rendezvous score (cached per repo in ``ctx.cache``)."""
        key = self._cache_prefix + repo
        cached = ctx.cache.get(key)
        if cached is not None:
            return cached
        scores: dict[str, int] = {}
        if self.top_k:
            buckets = ctx.builder_nodes if ctx.builder_nodes is not None else list(table.index)
            for r, node in enumerate(rendezvous_rank(buckets, repo)[: self.top_k]):
                scores[node] = max(self.top_score - r * self.step, 0)
        ctx.cache[key] = scores
        return scores

    def history_scores(self, repo: str, ctx: SchedulingContext) -> dict[str, int]:
        """Node name -> history score: 100 for the latest build, 95, 90... for older ones."""
        if ctx.history is None:
            return {}
        return {node: 100 - 5 * r for r, node in enumerate(ctx.history.nodes_for(repo, ctx.now))}

    def score(self, pod: Pod, table: NodeTable, idx: np.ndarray, ctx: SchedulingContext) -> np.ndarray:
        repo = pod.build_repo
        assert repo is not None
        out = np.zeros(idx.shape[0], dtype=np.int64)
        history = self.history_scores(repo, ctx)
        rendezvous = self.rendezvous_scores(repo, table, ctx)
        if not history and not rendezvous:
            return out
        over = self.bounds.over(table)
        index = table.index

        def place(wanted: dict[str, int]) -> bool:
            placed = False
            for node, s in wanted.items():
                i = index.get(node)
                if i is None or over[i] or table.to_be_deleted[i] or table.deletion_candidate[i]:
                    continue
                # a few wanted nodes: one vectorized search each beats a row -> position map
                at = np.flatnonzero(idx == i)
                if at.size:
                    out[at] = np.maximum(out[at], s)
                    placed = True
            return placed

        if place(history) and self.rendezvous_fallback:
            return out  # a node with the cache can take it: no cold node competes
        place(rendezvous)
        return out

    def describe(self) -> dict[str, Any]:
        return {
            "plugin": self.name,
            "args": {
                "top_k": self.top_k,
                **self.bounds.describe(),
                "top_score": self.top_score,
                "step": self.step,
                "rendezvous_fallback": self.rendezvous_fallback,
            },
        }


class BuildSpread(ScorePlugin):
    """Even out builds over nodes: fewer builds started on a node so far score higher
    (min-max normalized over the candidates, 100 for the least used). Keeps one node from
    taking a large share of a day's builds. With ``skip_quiet`` a quiet node (see
    :func:`quiet_nodes`) scores 0: it is better left to empty.

    ``settle_s``: a node younger than this (seconds since it was created) has its score
    scaled by its age over ``settle_s``, so a node that just joined does not draw every
    build that has no cache node: in a packed cluster the newest nodes are the first to
    empty, and the caches built there go with them. 0 turns this off.
    """

    name = "BuildSpread"

    def __init__(self, skip_quiet: bool = False, settle_s: float = 0.0) -> None:
        if settle_s < 0:
            raise PluginArgsError("BuildSpread needs settle_s >= 0")
        self.skip_quiet = skip_quiet
        self.settle_s = settle_s

    def skip(self, pod: Pod) -> bool:
        return pod.build_repo is None

    def describe(self) -> dict[str, Any]:
        return {"plugin": self.name, "args": {"skip_quiet": self.skip_quiet, "settle_s": self.settle_s}}

    def score(self, pod: Pod, table: NodeTable, idx: np.ndarray, ctx: SchedulingContext) -> np.ndarray:
        out = min_max_scores(table.build_starts[idx], fewest_first=True)
        if self.skip_quiet:  # a quiet node is left to empty, however few builds it has had
            out[quiet_nodes(pod, table, idx, ctx)] = 0
        if self.settle_s > 0:
            age = np.clip(ctx.now - table.created[idx], 0.0, self.settle_s)
            out = (out * age / self.settle_s).astype(np.int64)
        return out


class CacheKeeper(ScorePlugin):
    """Non-build pods: nodes that have started more builds score higher (min-max over the
    candidates, 100 for the most), so the nodes holding the most image caches stay full and
    the ones with few caches are the ones that empty and go. Build pods are skipped.

    ``min_nodes``: in a cluster of fewer nodes (all nodes, not only the candidates) every
    candidate scores 100. In a small cluster the few long-lived nodes hold the caches anyway
    and an extra pull toward them only delays the packing.
    """

    name = "CacheKeeper"

    def __init__(self, min_nodes: int = 1) -> None:
        if min_nodes < 1:
            raise PluginArgsError("CacheKeeper needs min_nodes >= 1")
        self.min_nodes = min_nodes

    def skip(self, pod: Pod) -> bool:
        return pod.build_repo is not None

    def describe(self) -> dict[str, Any]:
        return {"plugin": self.name, "args": {"min_nodes": self.min_nodes}}

    def score(self, pod: Pod, table: NodeTable, idx: np.ndarray, ctx: SchedulingContext) -> np.ndarray:
        if self.min_nodes > 1 and table.active_indices().size < self.min_nodes:
            return np.full(idx.shape[0], MAX_NODE_SCORE, dtype=np.int64)
        return min_max_scores(table.build_starts[idx], fewest_first=False)


class DelayForLocality(FilterPlugin):
    """Delay scheduling for builds: wait a little for a node that holds the repo's cache.

    When a build pod's history nodes are alive and under the build load bound (as in
    ``BuildLocality``) but none passes the other filters (full for now), no node passes for
    up to ``max_wait_s`` seconds after the pod's creation, so
    the pod waits for room there instead of starting a cold build elsewhere (a cached build
    takes a fraction of the time; Zaharia et al., "Delay scheduling", EuroSys 2010). After
    the wait, or when no history node is alive, every node passes. A history node that room
    would not open to the pod (cordoned, not ready, an untolerated NoSchedule/NoExecute
    taint, a required node selector or affinity it does not match, allocatable smaller than
    the pod's requests) is none to wait for. Place it last among the filters. A pod without
    a creation time is never delayed.
    """

    name = "DelayForLocality"
    pod_specific = True  # the repo, its history and the pod's age decide
    #: What kube-scheduler checks of a node besides its free room: a history node failing
    #: one of these would not take the pod however long it waited.
    _NOT_ROOM: ClassVar[tuple[FilterPlugin, ...]] = (
        NodeUnschedulable(),
        NodeReady(),
        TaintTolerationFilter(),
        NodeAffinityFilter(),
    )

    def __init__(
        self,
        max_wait_s: float = 120.0,
        load_bound: float = DEFAULT_LOAD_BOUND,
        min_load_cap: int = DEFAULT_MIN_LOAD_CAP,
        spread_bound: float | None = None,
    ) -> None:
        if max_wait_s < 0:
            raise PluginArgsError("DelayForLocality needs max_wait_s >= 0")
        self.max_wait_s = max_wait_s
        self.bounds = BuildBounds(load_bound, min_load_cap, spread_bound)

    def filter(self, pod: Pod, table: NodeTable, idx: np.ndarray, ctx: SchedulingContext) -> np.ndarray:
        passes = np.ones(idx.shape[0], dtype=bool)
        repo = pod.build_repo
        if repo is None or ctx.history is None or pod.created is None:
            return passes
        if ctx.now - pod.created >= self.max_wait_s:
            return passes
        over = self.bounds.over(table)
        # worth waiting for: a history node BuildLocality would score (not going away, not
        # one the autoscaler has marked a deletion candidate, not at a bound)
        gone = table.to_be_deleted | table.deletion_candidate | over
        worth = [
            i
            for n in ctx.history.nodes_for(repo, ctx.now)
            if (i := table.index.get(n)) is not None and not gone[i]
        ]
        if not worth or np.isin(worth, idx).any():
            return passes
        rows = np.array(worth, dtype=np.int64)
        could = fits_within(table.pod_vector(pod), table.alloc[rows])  # fits once there is room
        for plugin in self._NOT_ROOM:
            could &= plugin.filter(pod, table, rows, ctx)
        return passes if not could.any() else ~passes

    def describe(self) -> dict[str, Any]:
        return {
            "plugin": self.name,
            "args": {
                "max_wait_s": self.max_wait_s,
                **self.bounds.describe(),
            },
        }


class BuildHeadroom(ScorePlugin):
    """Keep room for one build on every node, so a rebuild fits where its cache is.

    For a pod that is not a build: 100 when, with the pod placed, ``builds`` build pods of
    the configured size (``cpu`` and ``memory`` as quantities, one pod slot each) still fit
    on the node, else 0 (``cpu`` as a number means cores, as Kubernetes quantities do; the
    room kept is ``room_cpu_m`` millicores and ``room_memory_bytes`` bytes). A score, not a
    filter: when no node has room to spare, pods
    still take the last slots, and the cluster-autoscaler (which simulates the default
    filters) never sees a pod it thinks fits but the scheduler refuses.
    """

    name = "BuildHeadroom"

    def __init__(
        self, cpu: str | int = "1", memory: str | int = "2G", builds: int = 1, skip_quiet: bool = False
    ) -> None:
        if builds < 1:
            raise PluginArgsError("BuildHeadroom needs builds >= 1")
        try:
            self.room_cpu_m = milli_value(cpu) * builds
            self.room_memory_bytes = int_value(memory) * builds
        except QuantityError as exc:
            raise PluginArgsError(str(exc)) from None
        if self.room_cpu_m < 0 or self.room_memory_bytes < 0:
            raise PluginArgsError(f"BuildHeadroom needs cpu and memory >= 0, got {cpu!r} and {memory!r}")
        self.builds = builds
        self.skip_quiet = skip_quiet
        self._memo = ScoreMemo()

    def skip(self, pod: Pod) -> bool:
        return pod.build_repo is not None

    def _by_room(self, pod: Pod, table: NodeTable, idx: np.ndarray) -> np.ndarray:
        r = table.rindex
        free = table.alloc[idx] - table.requested[idx]
        room = (
            (free[:, r[CPU]] - pod.requests.get(CPU, 0) >= self.room_cpu_m)
            & (free[:, r[MEMORY]] - pod.requests.get(MEMORY, 0) >= self.room_memory_bytes)
            & (free[:, r[PODS]] - 1 >= self.builds)
        )
        return np.where(room, MAX_NODE_SCORE, 0).astype(np.int64)

    def score(self, pod: Pod, table: NodeTable, idx: np.ndarray, ctx: SchedulingContext) -> np.ndarray:
        pod_part = (pod.requests.get(CPU, 0), pod.requests.get(MEMORY, 0))
        score = self._memo.scores(
            idx,
            lambda: node_state_keys(table.requested[idx], table.alloc[idx], pod_part),
            lambda rows: self._by_room(pod, table, rows),
        )
        if self.skip_quiet:  # room on a quiet node does not count: it is better left to empty
            score[quiet_nodes(pod, table, idx, ctx)] = 0
        return score

    def describe(self) -> dict[str, Any]:
        return {
            "plugin": self.name,
            "args": {
                "cpu": f"{self.room_cpu_m // self.builds}m",
                "memory": str(self.room_memory_bytes // self.builds),
                "builds": self.builds,
                "skip_quiet": self.skip_quiet,
            },
        }
