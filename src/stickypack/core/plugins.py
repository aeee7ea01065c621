"""Filter and score plugins.

The kube-scheduler plugins reproduce the integer arithmetic of
``k8s.io/kubernetes/pkg/scheduler/framework/plugins`` (noderesources, tainttoleration,
nodeaffinity, nodeunschedulable, interpodaffinity for the subset our workloads use), so the
simulator's ``default`` and ``z2jh`` policies choose the nodes the real scheduler chooses.
``BuildLocality``, ``ScaleDownAware`` and ``LifetimeAware`` are stickypack's own.
"""

from __future__ import annotations

import abc
import itertools
import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from stickypack.core.framework import (
    MAX_NODE_SCORE,
    FilterPlugin,
    PodMutator,
    SchedulingContext,
    ScorePlugin,
)
from stickypack.core.labels import (
    HOSTNAME_LABEL,
    NO_EXECUTE,
    NO_SCHEDULE,
    PREFER_NO_SCHEDULE,
    UNSCHEDULABLE_TAINT,
    NodeSelectorTerm,
    PreferredTerm,
    Requirement,
    Taint,
    tolerated,
)
from stickypack.core.nodetable import NodeTable
from stickypack.core.pod import BUILD_LABELS, Pod, PodAffinityTerm
from stickypack.core.rendezvous import rendezvous_rank
from stickypack.core.resources import CPU, EPHEMERAL_STORAGE, MEMORY, PODS

#: Annotation carrying a pod's expected end time (seconds), read by the ``LifetimeAware``
#: oracle. Only the simulator knows it.
EXPECTED_END_ANNOTATION = "stickypack.io/expected-end"


class PluginArgsError(ValueError):
    """Arguments a plugin does not accept."""


def _go_div(num: np.ndarray, den: int | np.ndarray) -> np.ndarray:
    """Integer division truncating toward zero, as Go's ``/`` on int64."""
    q = np.abs(num) // np.abs(den)
    return np.where((num < 0) ^ (np.asarray(den) < 0), -q, q)


def _resource_weights(raw: Any, default: Sequence[tuple[str, int]]) -> list[tuple[str, int]]:
    if raw is None:
        return list(default)
    if isinstance(raw, Mapping):
        items = list(raw.items())
    elif isinstance(raw, list):
        items = [(r["name"], r.get("weight", 1)) for r in raw]
    else:
        raise PluginArgsError(f"resources must be a mapping or a list, got {raw!r}")
    out = []
    for name, weight in items:
        if not isinstance(weight, int) or weight < 1:
            raise PluginArgsError(f"resource weight of {name!r} must be a positive integer")
        out.append((str(name), weight))
    return out


# ---- filters ---------------------------------------------------------------------------


class NodeUnschedulable(FilterPlugin):
    """Nodes with ``spec.unschedulable`` unless the pod tolerates the unschedulable taint."""

    name = "NodeUnschedulable"
    _TAINT = Taint(UNSCHEDULABLE_TAINT, "", NO_SCHEDULE)

    def filter(self, pod: Pod, table: NodeTable, idx: np.ndarray, ctx: SchedulingContext) -> np.ndarray:
        if pod.tolerations and tolerated(self._TAINT, pod.tolerations):
            return np.ones(idx.shape[0], dtype=bool)
        return ~table.unschedulable[idx]


class NodeReady(FilterPlugin):
    """Nodes that are Ready (in a real cluster the not-ready taint does this)."""

    name = "NodeReady"

    def filter(self, pod: Pod, table: NodeTable, idx: np.ndarray, ctx: SchedulingContext) -> np.ndarray:
        return table.ready[idx]


class NodeResourcesFitFilter(FilterPlugin):
    """The pod's real requests fit into allocatable minus requested, and a pod slot is free.

    A resource the pod does not request is not checked (as in kube-scheduler).
    """

    name = "NodeResourcesFit"

    def filter(self, pod: Pod, table: NodeTable, idx: np.ndarray, ctx: SchedulingContext) -> np.ndarray:
        vec = table.pod_vector(pod)
        free = table.alloc[idx] - table.requested[idx]
        return ((free >= vec) | (vec == 0)).all(axis=1)


class TaintTolerationFilter(FilterPlugin):
    """No untolerated NoSchedule or NoExecute taint."""

    name = "TaintToleration"

    def filter(self, pod: Pod, table: NodeTable, idx: np.ndarray, ctx: SchedulingContext) -> np.ndarray:
        ok = ~table.hard_tainted[idx]
        if ok.all():
            return ok
        info = table.info
        for j in np.flatnonzero(~ok):
            node = info[idx[j]]
            assert node is not None
            ok[j] = all(
                t.effect not in (NO_SCHEDULE, NO_EXECUTE) or tolerated(t, pod.tolerations)
                for t in node.taints
            )
        return ok


class NodeAffinityFilter(FilterPlugin):
    """``spec.nodeSelector`` and required node affinity (terms ORed, expressions ANDed)."""

    name = "NodeAffinity"

    def filter(self, pod: Pod, table: NodeTable, idx: np.ndarray, ctx: SchedulingContext) -> np.ndarray:
        if not pod.node_selector and pod.required_terms is None:
            return np.ones(idx.shape[0], dtype=bool)
        info = table.info
        out = np.empty(idx.shape[0], dtype=bool)
        for j, i in enumerate(idx):
            node = info[i]
            assert node is not None
            out[j] = node_matches_required(pod, node.labels, node.name)
        return out


def node_matches_required(pod: Pod, labels: Mapping[str, str], node_name: str) -> bool:
    """kube's ``RequiredNodeAffinity.Match``: node selector and required terms."""
    for k, v in pod.node_selector.items():
        if labels.get(k) != v:
            return False
    if pod.required_terms is None:
        return True
    return any(term.matches(labels, node_name) for term in pod.required_terms)


# ---- kube-scheduler scorers -------------------------------------------------------------


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


class _ResourceScorer(ScorePlugin):
    """Shared by the NodeResourcesFit strategies: per-resource integer scores, weighted mean.

    ``requested`` is the node's non-zero requests plus the pod's (cpu, memory), or the real
    requests for other resources; a resource with zero allocatable is left out.
    """

    name = "NodeResourcesFit"
    strategy: ClassVar[str] = ""
    DEFAULT_RESOURCES: ClassVar[tuple[tuple[str, int], ...]] = ((CPU, 1), (MEMORY, 1))

    def __init__(self, resources: Any = None) -> None:
        self.resources = _resource_weights(resources, self.DEFAULT_RESOURCES)
        self._names = [name for name, _ in self.resources]
        # cpu and memory only (the common case): scored in one pass over both columns
        self._cpu_memory = set(self._names) <= {CPU, MEMORY} and len(set(self._names)) == len(self._names)
        self._nonzero_cols = [0 if name == CPU else 1 for name in self._names]  # NodeTable.nonzero
        self._weights = np.array([w for _, w in self.resources], dtype=np.int64)
        self._memo = ScoreMemo()

    def _requested_alloc(
        self, pod: Pod, table: NodeTable, idx: np.ndarray, name: str
    ) -> tuple[np.ndarray, np.ndarray] | None:
        if name == CPU:
            return table.nonzero[idx, 0] + pod.nonzero_cpu, table.alloc[idx, table.rindex[CPU]]
        if name == MEMORY:
            return table.nonzero[idx, 1] + pod.nonzero_memory, table.alloc[idx, table.rindex[MEMORY]]
        if name == PODS:
            return None  # kube reads "pods" as a scalar resource nodes never list: not scored
        pod_req = pod.requests.get(name, 0)
        if pod_req == 0 and name != EPHEMERAL_STORAGE:
            return None  # extended resource the pod does not request: not scored
        col = table.rindex.get(name)
        if col is None:
            return None
        return table.requested[idx, col] + pod_req, table.alloc[idx, col]

    @abc.abstractmethod
    def per_resource(self, requested: np.ndarray, alloc: np.ndarray) -> np.ndarray:
        """The score 0..100 of one resource per node (``alloc`` > 0)."""

    def _score_cpu_memory(self, pod: Pod, table: NodeTable, idx: np.ndarray) -> np.ndarray:
        """:meth:`score` for resources among cpu and memory: both columns at once."""
        names = self._names
        pod_nonzero = np.array([pod.nonzero_cpu if name == CPU else pod.nonzero_memory for name in names])
        requested = table.nonzero[idx][:, self._nonzero_cols] + pod_nonzero
        alloc = table.alloc[idx][:, [table.rindex[name] for name in names]]
        has = alloc > 0
        s = self.per_resource(requested, np.where(has, alloc, 1))
        counted = self.counted(has, s)
        node_score = np.where(counted, s * self._weights, 0).sum(axis=1)
        weight_sum = np.where(counted, self._weights, 0).sum(axis=1)
        return self.combine(node_score, weight_sum)

    def score(self, pod: Pod, table: NodeTable, idx: np.ndarray, ctx: SchedulingContext) -> np.ndarray:
        if self._cpu_memory:
            pod_part = (pod.nonzero_cpu, pod.nonzero_memory)
            return self._memo.scores(
                idx,
                lambda: node_state_keys(table.nonzero[idx], table.alloc[idx], pod_part),
                lambda rows: self._score_cpu_memory(pod, table, rows),
            )
        node_score = np.zeros(idx.shape[0], dtype=np.int64)
        weight_sum = np.zeros(idx.shape[0], dtype=np.int64)
        for name, weight in self.resources:
            ra = self._requested_alloc(pod, table, idx, name)
            if ra is None:
                continue
            requested, alloc = ra
            has = alloc > 0
            s = self.per_resource(requested, np.where(has, alloc, 1))
            counted = self.counted(has, s)
            node_score += np.where(counted, s * weight, 0)
            weight_sum += np.where(counted, weight, 0)
        return self.combine(node_score, weight_sum)

    def counted(self, has_alloc: np.ndarray, scores: np.ndarray) -> np.ndarray:
        """Which nodes' resource score enters the weighted mean: those with allocatable."""
        return has_alloc

    def combine(self, node_score: np.ndarray, weight_sum: np.ndarray) -> np.ndarray:
        """The weighted mean, truncated (Go integer division)."""
        return np.where(weight_sum > 0, node_score // np.maximum(weight_sum, 1), 0)

    def describe(self) -> dict[str, Any]:
        return {
            "plugin": self.name,
            "args": {"strategy": self.strategy, "resources": dict(self.resources)},
        }


class LeastAllocated(_ResourceScorer):
    """``(alloc - req) * 100 / alloc`` per resource (0 when over-requested): spreads pods."""

    strategy = "LeastAllocated"

    def per_resource(self, requested: np.ndarray, alloc: np.ndarray) -> np.ndarray:
        return np.where(requested > alloc, 0, (alloc - requested) * MAX_NODE_SCORE // alloc)


class MostAllocated(_ResourceScorer):
    """``min(req, alloc) * 100 / alloc`` per resource: packs pods."""

    strategy = "MostAllocated"

    def per_resource(self, requested: np.ndarray, alloc: np.ndarray) -> np.ndarray:
        return np.minimum(requested, alloc) * MAX_NODE_SCORE // alloc


class RequestedToCapacityRatio(_ResourceScorer):
    """A piecewise-linear function of integer utilization; shape scores 0..10 scaled x10.

    Resources whose score is 0 do not enter the mean; the mean is rounded (``math.Round``).
    """

    strategy = "RequestedToCapacityRatio"

    def __init__(self, resources: Any = None, shape: Any = None) -> None:
        super().__init__(resources)
        raw = shape or [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]
        try:
            points = [(int(p["utilization"]), int(p["score"])) for p in raw]
        except (KeyError, TypeError, ValueError) as exc:
            raise PluginArgsError(f"shape points need integer utilization and score: {exc}") from exc
        if any(b[0] <= a[0] for a, b in itertools.pairwise(points)):
            raise PluginArgsError("shape utilizations must increase strictly")
        if any(not 0 <= u <= 100 or not 0 <= s <= 10 for u, s in points):
            raise PluginArgsError("shape utilization must be 0..100 and score 0..10")
        self.shape = [(u, s * (MAX_NODE_SCORE // 10)) for u, s in points]

    def _broken_linear(self, p: np.ndarray) -> np.ndarray:
        shape = self.shape
        out = np.full(p.shape, shape[-1][1], dtype=np.int64)
        done = np.zeros(p.shape, dtype=bool)
        for i, (u, s) in enumerate(shape):
            here = (p <= u) & ~done
            if i == 0:
                out[here] = s
            else:
                u0, s0 = shape[i - 1]
                out[here] = s0 + _go_div((s - s0) * (p[here] - u0), u - u0)
            done |= here
        return out

    def per_resource(self, requested: np.ndarray, alloc: np.ndarray) -> np.ndarray:
        util = np.where(requested > alloc, 100, requested * 100 // alloc)
        return self._broken_linear(util)

    def counted(self, has_alloc: np.ndarray, scores: np.ndarray) -> np.ndarray:
        return has_alloc & (scores > 0)  # a resource scoring 0 does not enter the mean

    def combine(self, node_score: np.ndarray, weight_sum: np.ndarray) -> np.ndarray:
        mean = node_score / np.maximum(weight_sum, 1)
        # Go's math.Round rounds halves away from zero; scores are >= 0 here.
        return np.where(weight_sum > 0, np.floor(mean + 0.5), 0).astype(np.int64)

    def describe(self) -> dict[str, Any]:
        out = super().describe()
        out["args"]["shape"] = [{"utilization": u, "score": s // 10} for u, s in self.shape]
        return out


class BalancedAllocation(ScorePlugin):
    """How much the pod improves the node's balance (kube-scheduler 1.37 and later).

    ``balance(f) = int((1 - std(f)) * 100)`` over the requested fractions ``f`` per resource
    (real requests, capped at 1; for two resources ``std = |f1 - f2| / 2``); the score is
    ``50 + (50 + balance(with pod) - balance(without pod)) / 2``. Skipped for pods that
    request none of the resources.
    """

    name = "NodeResourcesBalancedAllocation"

    def __init__(self, resources: Any = None) -> None:
        self.resources = _resource_weights(resources, ((CPU, 1), (MEMORY, 1)))
        self._cpu_memory = [name for name, _ in self.resources] == [CPU, MEMORY]
        self._memo = ScoreMemo()

    def skip(self, pod: Pod) -> bool:
        return all(pod.requests.get(name, 0) == 0 for name, _ in self.resources)

    @staticmethod
    def _balance(fractions: list[np.ndarray], valid: list[np.ndarray], n_nodes: int) -> np.ndarray:
        if not fractions:
            return np.full(n_nodes, MAX_NODE_SCORE, dtype=np.int64)
        f = np.vstack(fractions)
        ok = np.vstack(valid)
        n = ok.sum(axis=0)
        fz = np.where(ok, f, 0.0)
        std = np.zeros(n_nodes)
        two = n == 2
        if two.any():
            # with exactly two fractions kube computes |f1 - f2| / 2
            hi = np.where(ok, f, -np.inf).max(axis=0)
            lo = np.where(ok, f, np.inf).min(axis=0)
            std[two] = np.abs((hi[two] - lo[two]) / 2)
        many = n > 2
        if many.any():
            mean = fz.sum(axis=0) / np.maximum(n, 1)
            var = np.where(ok, (f - mean) ** 2, 0.0).sum(axis=0) / np.maximum(n, 1)
            std[many] = np.sqrt(var[many])
        return ((1 - std) * MAX_NODE_SCORE).astype(np.int64)

    def _score_cpu_memory(self, pod: Pod, table: NodeTable, idx: np.ndarray) -> np.ndarray:
        """The common case (resources cpu and memory), without the general machinery."""
        cols = [table.rindex[CPU], table.rindex[MEMORY]]
        alloc = table.alloc[idx][:, cols]
        req = table.requested[idx][:, cols]
        pod_req = (pod.requests.get(CPU, 0), pod.requests.get(MEMORY, 0))
        # fractions without and with the pod, shape (2, nodes, resources)
        f = np.minimum(np.stack((req, req + pod_req)) / np.maximum(alloc, 1), 1.0)
        std = np.abs(f[:, :, 0] - f[:, :, 1]) / 2
        std[:, (alloc <= 0).any(axis=1)] = 0.0  # a resource without allocatable: no balance term
        balance = ((1 - std) * MAX_NODE_SCORE).astype(np.int64)
        return MAX_NODE_SCORE // 2 + (MAX_NODE_SCORE // 2 + balance[1] - balance[0]) // 2

    def score(self, pod: Pod, table: NodeTable, idx: np.ndarray, ctx: SchedulingContext) -> np.ndarray:
        if self._cpu_memory:
            pod_part = (pod.requests.get(CPU, 0), pod.requests.get(MEMORY, 0))
            return self._memo.scores(
                idx,
                lambda: node_state_keys(table.requested[idx], table.alloc[idx], pod_part),
                lambda rows: self._score_cpu_memory(pod, table, rows),
            )
        with_pod: list[np.ndarray] = []
        without: list[np.ndarray] = []
        valid: list[np.ndarray] = []
        for name, _ in self.resources:
            pod_req = pod.requests.get(name, 0)
            if name not in (CPU, MEMORY, EPHEMERAL_STORAGE) and pod_req == 0:
                continue  # an extended resource the pod does not request
            col = table.rindex.get(name)
            if col is None:
                continue
            alloc = table.alloc[idx, col]
            has = alloc > 0
            safe = np.maximum(alloc, 1)
            allocated = table.requested[idx, col]
            with_pod.append(np.minimum((allocated + pod_req) / safe, 1.0))
            without.append(np.minimum(allocated / safe, 1.0))
            valid.append(has)
        n = idx.shape[0]
        after = self._balance(with_pod, valid, n)
        before = self._balance(without, valid, n)
        return MAX_NODE_SCORE // 2 + (MAX_NODE_SCORE // 2 + after - before) // 2


def default_normalize(raw: np.ndarray, reverse: bool) -> np.ndarray:
    """kube's ``helper.DefaultNormalizeScore(100, reverse, scores)``."""
    top = int(raw.max()) if raw.size else 0
    if top == 0:
        return np.full(raw.shape, MAX_NODE_SCORE if reverse else 0, dtype=np.int64)
    out = MAX_NODE_SCORE * raw // top
    return MAX_NODE_SCORE - out if reverse else out


class TaintTolerationScore(ScorePlugin):
    """Fewer untolerated PreferNoSchedule taints score higher (reverse-normalized count)."""

    name = "TaintToleration"

    def score(self, pod: Pod, table: NodeTable, idx: np.ndarray, ctx: SchedulingContext) -> np.ndarray:
        soft = table.soft_tainted[idx]
        if not soft.any():  # no node has a PreferNoSchedule taint: all score the maximum
            return np.full(idx.shape[0], MAX_NODE_SCORE, dtype=np.int64)
        counts = np.zeros(idx.shape[0], dtype=np.int64)
        tols = [t for t in pod.tolerations if t.effect in ("", PREFER_NO_SCHEDULE)]
        info = table.info
        for j in np.flatnonzero(soft):
            node = info[idx[j]]
            assert node is not None
            counts[j] = sum(
                1 for t in node.taints if t.effect == PREFER_NO_SCHEDULE and not tolerated(t, tols)
            )
        return default_normalize(counts, reverse=True)


class NodeAffinityScore(ScorePlugin):
    """Sum of the weights of matching preferred node-affinity terms, normalized to 0..100."""

    name = "NodeAffinity"

    def skip(self, pod: Pod) -> bool:
        return not pod.preferred_terms

    def score(self, pod: Pod, table: NodeTable, idx: np.ndarray, ctx: SchedulingContext) -> np.ndarray:
        raw = np.zeros(idx.shape[0], dtype=np.int64)
        info = table.info
        for j, i in enumerate(idx):
            node = info[i]
            assert node is not None
            raw[j] = sum(p.weight for p in pod.preferred_terms if p.term.matches(node.labels, node.name))
        return default_normalize(raw, reverse=False)


class BuildAntiAffinity(ScorePlugin):
    """InterPodAffinity, for the one case BinderHub uses: a build pod's *preferred* pod
    anti-affinity against other build pods (``component=binderhub-build``) with topology
    ``kubernetes.io/hostname``, which BinderHub sets when sticky builds are off. Each build
    pod on a node counts ``-weight`` for the incoming pod's term and ``-weight`` again when
    it carries the same term itself; kube's min-max normalization gives 0..100. Other pod
    (anti-)affinity terms are not modelled and score nothing."""

    name = "InterPodAffinity"

    @staticmethod
    def _build_weight(pod: Pod) -> int:
        return sum(
            t.weight
            for t in pod.pod_anti_affinity
            if t.topology_key == HOSTNAME_LABEL and set(t.match_labels) <= set(BUILD_LABELS.items())
        )

    def skip(self, pod: Pod) -> bool:
        return self._build_weight(pod) == 0

    def score(self, pod: Pod, table: NodeTable, idx: np.ndarray, ctx: SchedulingContext) -> np.ndarray:
        weight = self._build_weight(pod)
        # Existing build pods are assumed to carry the same term (one BinderHub setting).
        counted = table.builds[idx] if pod.build_repo is not None else np.zeros(idx.shape[0], dtype=np.int64)
        raw = -2 * weight * counted
        lo, hi = int(raw.min()), int(raw.max())
        if hi == lo:
            return np.zeros(idx.shape[0], dtype=np.int64)
        return (MAX_NODE_SCORE * ((raw - lo) / (hi - lo))).astype(np.int64)


# ---- stickypack's plugins ----------------------------------------------------------------


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


def over_build_bounds(
    table: NodeTable, load_bound: float, min_load_cap: int, spread_bound: float | None = None
) -> np.ndarray:
    """Per node row: would one more build break a bound? (bool, indexed by row)

    Bounded loads (Mirrokni, Thorup, Zadimoghaddam 2018): with the new build counted, at
    most ``max(min_load_cap, ceil(load_bound * mean running builds))`` per node (the floor
    lets a small cluster repeat a build). With ``spread_bound``, also at most
    ``max(min_load_cap, ceil(spread_bound * mean builds started))`` builds started on a node
    since it joined, so no node takes much more than its share of the day's builds.
    """
    all_idx = table.active_indices()
    n = max(all_idx.size, 1)
    cap = max(min_load_cap, math.ceil(load_bound * (int(table.builds[all_idx].sum()) + 1) / n))
    over = table.builds + 1 > cap
    if spread_bound is not None:
        cap_started = max(
            min_load_cap, math.ceil(spread_bound * (int(table.build_starts[all_idx].sum()) + 1) / n)
        )
        over |= table.build_starts + 1 > cap_started
    return over


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
        load_bound: float = 1.25,
        min_load_cap: int = 2,
        top_score: int = 80,
        step: int = 20,
        spread_bound: float | None = None,
        rendezvous_fallback: bool = False,
    ) -> None:
        if (
            top_k < 0
            or load_bound < 1
            or min_load_cap < 1
            or not 0 <= top_score <= 100
            or step < 0
            or (spread_bound is not None and spread_bound < 1)
        ):
            raise PluginArgsError(
                "BuildLocality needs top_k >= 0, load_bound >= 1, min_load_cap >= 1, "
                "0 <= top_score <= 100, step >= 0, spread_bound >= 1"
            )
        self.spread_bound = spread_bound
        self.rendezvous_fallback = rendezvous_fallback
        self.top_k = top_k
        self.load_bound = load_bound
        self.min_load_cap = min_load_cap
        self.top_score = top_score
        self.step = step

    def skip(self, pod: Pod) -> bool:
        return pod.build_repo is None

    def rendezvous_scores(self, repo: str, table: NodeTable, ctx: SchedulingContext) -> dict[str, int]:
        """Node name -> rendezvous score (cached per repo and decision)."""
        key = f"rendezvous:{repo}"
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
        over = over_build_bounds(table, self.load_bound, self.min_load_cap, self.spread_bound)
        index = table.index
        pos = {int(i): j for j, i in enumerate(idx)}

        def place(wanted: dict[str, int]) -> bool:
            placed = False
            for node, s in wanted.items():
                i = index.get(node)
                if i is None or i not in pos:
                    continue
                if over[i] or table.to_be_deleted[i] or table.deletion_candidate[i]:
                    continue
                out[pos[i]] = max(out[pos[i]], s)
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
                "load_bound": self.load_bound,
                "min_load_cap": self.min_load_cap,
                "top_score": self.top_score,
                "step": self.step,
                "spread_bound": self.spread_bound,
                "rendezvous_fallback": self.rendezvous_fallback,
            },
        }


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


def min_max_scores(counts: np.ndarray, fewest_first: bool) -> np.ndarray:
    """Integer scores 0..100 over ``counts``, min-max normalized: 100 for the fewest (or, with
    ``fewest_first`` False, the most), 0 for the other end; all 100 when every count is equal."""
    lo, hi = int(counts.min()), int(counts.max())
    if hi == lo:
        return np.full(counts.shape[0], MAX_NODE_SCORE, dtype=np.int64)
    return MAX_NODE_SCORE * ((hi - counts) if fewest_first else (counts - lo)) // (hi - lo)


class BuildSpread(ScorePlugin):
    """Even out builds over nodes: fewer builds started on a node so far score higher
    (min-max normalized over the candidates, 100 for the least used). Keeps one node from
    taking a large share of a day's builds. A quiet node (see :func:`quiet_nodes`) scores
    0: it is better left to empty.

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
            out[quiet_nodes(pod, table, idx, ctx.utilization_threshold)] = 0
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
    the wait, or when no history node is alive, every node passes. Place it last among the
    filters. A pod without a creation time is never delayed.
    """

    name = "DelayForLocality"

    def __init__(
        self,
        max_wait_s: float = 120.0,
        load_bound: float = 1.25,
        min_load_cap: int = 2,
        spread_bound: float | None = None,
    ) -> None:
        if (
            max_wait_s < 0
            or load_bound < 1
            or min_load_cap < 1
            or (spread_bound is not None and spread_bound < 1)
        ):
            raise PluginArgsError(
                "DelayForLocality needs max_wait_s >= 0, load_bound >= 1, min_load_cap >= 1, "
                "spread_bound >= 1"
            )
        self.max_wait_s = max_wait_s
        self.load_bound = load_bound
        self.min_load_cap = min_load_cap
        self.spread_bound = spread_bound

    def filter(self, pod: Pod, table: NodeTable, idx: np.ndarray, ctx: SchedulingContext) -> np.ndarray:
        passes = np.ones(idx.shape[0], dtype=bool)
        repo = pod.build_repo
        if repo is None or ctx.history is None or pod.created is None:
            return passes
        if ctx.now - pod.created >= self.max_wait_s:
            return passes
        over = over_build_bounds(table, self.load_bound, self.min_load_cap, self.spread_bound)
        # worth waiting for: a history node that is not going away and not at a bound
        worth = [
            table.index[n]
            for n in ctx.history.nodes_for(repo, ctx.now)
            if n in table.index and not table.to_be_deleted[table.index[n]] and not over[table.index[n]]
        ]
        if not worth or np.isin(worth, idx).any():
            return passes
        return ~passes

    def describe(self) -> dict[str, Any]:
        return {
            "plugin": self.name,
            "args": {
                "max_wait_s": self.max_wait_s,
                "load_bound": self.load_bound,
                "min_load_cap": self.min_load_cap,
                "spread_bound": self.spread_bound,
            },
        }


class BuildHeadroom(ScorePlugin):
    """Keep room for one build on every node, so a rebuild fits where its cache is.

    For a pod that is not a build: 100 when, with the pod placed, ``builds`` build pods of
    the configured size (``cpu`` and ``memory`` as quantities, one pod slot each) still fit
    on the node, else 0. A score, not a filter: when no node has room to spare, pods
    still take the last slots, and the cluster-autoscaler (which simulates the default
    filters) never sees a pod it thinks fits but the scheduler refuses.
    """

    name = "BuildHeadroom"

    def __init__(
        self, cpu: str | int = "1", memory: str | int = "2G", builds: int = 1, skip_quiet: bool = False
    ) -> None:
        from stickypack.core.quantity import QuantityError, int_value, milli_value

        if builds < 1:
            raise PluginArgsError("BuildHeadroom needs builds >= 1")
        try:
            self.cpu_m = milli_value(cpu) * builds
            self.memory = int_value(memory) * builds
        except QuantityError as exc:
            raise PluginArgsError(str(exc)) from None
        self.slots = builds
        self.skip_quiet = skip_quiet
        self._memo = ScoreMemo()

    def skip(self, pod: Pod) -> bool:
        return pod.build_repo is not None

    def _by_room(self, pod: Pod, table: NodeTable, idx: np.ndarray) -> np.ndarray:
        r = table.rindex
        free = table.alloc[idx] - table.requested[idx]
        room = (
            (free[:, r[CPU]] - pod.requests.get(CPU, 0) >= self.cpu_m)
            & (free[:, r[MEMORY]] - pod.requests.get(MEMORY, 0) >= self.memory)
            & (free[:, r[PODS]] - 1 >= self.slots)
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
            score[quiet_nodes(pod, table, idx, ctx.utilization_threshold)] = 0
        return score

    def describe(self) -> dict[str, Any]:
        return {
            "plugin": self.name,
            "args": {
                "cpu": f"{self.cpu_m // self.slots}m",
                "memory": str(self.memory // self.slots),
                "builds": self.slots,
                "skip_quiet": self.skip_quiet,
            },
        }


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


class BinderHubStickyBuilds(PodMutator):
    """What BinderHub does to a build pod with ``sticky_builds = True``: a preferred node
    affinity, weight 100, ``kubernetes.io/hostname In [top rendezvous node]`` over the
    builder nodes, keyed by the repo URL."""

    name = "BinderHubStickyBuilds"

    def mutate(self, pod: Pod, table: NodeTable, ctx: SchedulingContext) -> Pod:
        repo = pod.build_repo
        if repo is None:
            return pod
        buckets = ctx.builder_nodes if ctx.builder_nodes is not None else list(table.index)
        ranked = rendezvous_rank(buckets, repo)
        if not ranked:
            return pod
        term = NodeSelectorTerm((Requirement(HOSTNAME_LABEL, "In", (ranked[0],)),))
        pod.preferred_terms = (*pod.preferred_terms, PreferredTerm(100, term))
        return pod


class BinderHubAntiAffinity(PodMutator):
    """What BinderHub does to a build pod with sticky builds off (its default): a preferred
    pod anti-affinity, weight 100, topology hostname, against other build pods."""

    name = "BinderHubAntiAffinity"

    def mutate(self, pod: Pod, table: NodeTable, ctx: SchedulingContext) -> Pod:
        if pod.build_repo is None:
            return pod
        term = PodAffinityTerm(100, tuple(sorted(BUILD_LABELS.items())), HOSTNAME_LABEL)
        pod.pod_anti_affinity = (*pod.pod_anti_affinity, term)
        return pod
