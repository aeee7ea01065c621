"""kube-scheduler's plugins, with the integer arithmetic of
``k8s.io/kubernetes/pkg/scheduler/framework/plugins`` (noderesources, tainttoleration,
nodeaffinity, nodeunschedulable, imagelocality, podtopologyspread's score, and
interpodaffinity: in full given the pods on the nodes, else for the one case BinderHub uses),
so the
simulator's ``default`` and ``z2jh`` policies choose the nodes the real scheduler chooses."""

from __future__ import annotations

import abc
import itertools
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

import numpy as np

from stickypack.core.framework import (
    MAX_NODE_SCORE,
    FilterPlugin,
    SchedulingContext,
    ScorePlugin,
)
from stickypack.core.labels import (
    HOSTNAME_LABEL,
    NO_EXECUTE,
    NO_SCHEDULE,
    PREFER_NO_SCHEDULE,
    UNSCHEDULABLE_TAINT,
    PreferredTerm,
    PreferredWeights,
    Taint,
    tolerated,
)
from stickypack.core.nodetable import NodeTable
from stickypack.core.plugins.common import (
    PluginArgsError,
    ScoreMemo,
    default_normalize,
    go_div,
    node_state_keys,
    resource_weights,
)
from stickypack.core.pod import BUILD_LABELS, Pod
from stickypack.core.podaffinity import pods_on_table_nodes
from stickypack.core.resources import CPU, EPHEMERAL_STORAGE, MEMORY, PODS
from stickypack.core.topologyspread import scores_spread, spread_scores

#: kube-scheduler's score plugins the core models, by their kube-scheduler names (the
#: score plugin names a KubeSchedulerConfiguration profile may enable; stickypack's own
#: plugins it does not know).
KUBE_SCHEDULER_SCORERS = frozenset(
    {
        "NodeResourcesFit",
        "NodeResourcesBalancedAllocation",
        "TaintToleration",
        "NodeAffinity",
        "InterPodAffinity",
        "ImageLocality",
        "PodTopologySpread",
    }
)


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


def fits_within(vec: np.ndarray, room: np.ndarray) -> np.ndarray:
    """Per row of ``room`` (one node's amounts per resource column): does a pod of
    requests ``vec`` fit? A resource the pod does not request is not checked (as in
    kube-scheduler)."""
    return ((room >= vec) | (vec == 0)).all(axis=1)


class NodeResourcesFitFilter(FilterPlugin):
    """The pod's real requests fit into allocatable minus requested, and a pod slot is free.

    A resource the pod does not request is not checked (as in kube-scheduler).
    """

    name = "NodeResourcesFit"

    def filter(self, pod: Pod, table: NodeTable, idx: np.ndarray, ctx: SchedulingContext) -> np.ndarray:
        return fits_within(table.pod_vector(pod), table.alloc[idx] - table.requested[idx])


class DraDelegatingFitFilter(NodeResourcesFitFilter):
    """NodeResourcesFit with DRA-backed extended resources (DRAExtendedResource, GA in
    v1.37): an extended resource of ``dra_resources`` (one a DeviceClass names, its
    ``extendedResourceName`` or ``deviceclass.resource.kubernetes.io/<class>``) is not
    checked on a node that lists none of it allocatable; kube-scheduler leaves it to
    DynamicResources there (``shouldDelegateResourceToDRA``). Elsewhere, as
    :class:`NodeResourcesFitFilter`."""

    def __init__(self, dra_resources: Iterable[str]) -> None:
        self.dra_resources = frozenset(dra_resources)

    def filter(self, pod: Pod, table: NodeTable, idx: np.ndarray, ctx: SchedulingContext) -> np.ndarray:
        vec = table.pod_vector(pod)
        wanted = np.tile(vec, (idx.shape[0], 1))
        for name in self.dra_resources:
            column = table.rindex.get(name)
            if column is not None:
                wanted[table.alloc[idx, column] == 0, column] = 0
        return fits_within(wanted, table.alloc[idx] - table.requested[idx])


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


# ---- scorers ----------------------------------------------------------------------------


class _ResourceScorer(ScorePlugin):
    """Shared by the NodeResourcesFit strategies: per-resource integer scores, weighted mean.

    ``requested`` is the node's non-zero requests plus the pod's (cpu, memory), or the real
    requests for other resources; a resource with zero allocatable is left out.
    """

    name = "NodeResourcesFit"
    strategy: ClassVar[str] = ""
    DEFAULT_RESOURCES: ClassVar[tuple[tuple[str, int], ...]] = ((CPU, 1), (MEMORY, 1))

    def __init__(self, resources: Any = None) -> None:
        self.resources = resource_weights(resources, self.DEFAULT_RESOURCES)
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


def _shape_int(value: object) -> int:
    """An integer shape coordinate: an int, or a float with no fraction (YAML ``50.0``);
    anything else (``2.5``, ``.inf``, ``"50"``, ``true``) is refused, as kube-scheduler's
    int32 fields refuse it."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{value!r} is not a number")
    if isinstance(value, float) and not value.is_integer():
        raise ValueError(f"{value!r} is not an integer")
    return int(value)


class RequestedToCapacityRatio(_ResourceScorer):
    """A piecewise-linear function of integer utilization; shape scores 0..10 scaled x10.

    Resources whose score is 0 do not enter the mean; the mean is rounded (``math.Round``).
    """

    strategy = "RequestedToCapacityRatio"

    def __init__(self, resources: Any = None, shape: Any = None) -> None:
        super().__init__(resources)
        raw = [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}] if shape is None else shape
        if isinstance(raw, list) and not raw:
            raise PluginArgsError("shape needs at least one point")
        try:
            points = [(_shape_int(p["utilization"]), _shape_int(p["score"])) for p in raw]
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
                out[here] = s0 + go_div((s - s0) * (p[here] - u0), u - u0)
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
    request none of the resources. Every resource weighs 1 (``resources`` names them; a
    weight other than 1 is refused, as kube-scheduler refuses it).
    """

    name = "NodeResourcesBalancedAllocation"

    def __init__(self, resources: Any = None) -> None:
        self.resources = resource_weights(resources, ((CPU, 1), (MEMORY, 1)))
        # kube-scheduler weighs no resource here and refuses to start with a weight other
        # than 1 or a resource named twice (ValidateNodeResourcesBalancedAllocationArgs)
        seen: set[str] = set()
        for name, weight in self.resources:
            if weight != 1:
                raise PluginArgsError(f"resource weight of {name!r} is {weight}; kube-scheduler takes 1 only")
            if name in seen:
                raise PluginArgsError(f"resource {name!r} is given twice")
            seen.add(name)
        self._cpu_memory = [name for name, _ in self.resources] == [CPU, MEMORY]
        self._memo = ScoreMemo()

    def skip(self, pod: Pod) -> bool:
        return all(pod.requests.get(name, 0) == 0 for name, _ in self.resources)

    def describe(self) -> dict[str, Any]:
        return {"plugin": self.name, "args": {"resources": dict(self.resources)}}

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
    """Sum of the weights of matching preferred node-affinity terms, normalized to 0..100.

    The sums come from a :class:`~stickypack.core.labels.PreferredWeights` of the pod's
    terms (the last pod's kept while its terms are the same tuple, as for filter and
    prioritize of one pod), so a pod of tens of thousands of terms costs about its terms
    plus its nodes' labels, not their product."""

    name = "NodeAffinity"

    def __init__(self) -> None:
        self._last: tuple[tuple[PreferredTerm, ...], PreferredWeights] | None = None

    def skip(self, pod: Pod) -> bool:
        return not pod.preferred_terms

    def weights(self, pod: Pod) -> PreferredWeights:
        """The pod's terms, grouped for lookups."""
        last = self._last
        if last is not None and last[0] is pod.preferred_terms:
            return last[1]
        weights = PreferredWeights(pod.preferred_terms)
        self._last = (pod.preferred_terms, weights)
        return weights

    def score(self, pod: Pod, table: NodeTable, idx: np.ndarray, ctx: SchedulingContext) -> np.ndarray:
        weight = self.weights(pod).weight
        raw = np.zeros(idx.shape[0], dtype=np.int64)
        info = table.info
        for j, i in enumerate(idx.tolist()):
            node = info[i]
            assert node is not None
            raw[j] = weight(node.labels, node.name)
        return default_normalize(raw, reverse=False)


class BuildAntiAffinity(ScorePlugin):
    """kube-scheduler's InterPodAffinity score (v1.37.2, its default arguments:
    ``hardPodAffinityWeight`` 1, ``ignorePreferredTermsOfExistingPods`` false).

    Given the pods on the nodes (``ctx.pods_on_nodes``, as ``stickypack inspect --pod`` has
    them), in full: each (topology key, value) pair sums the weights of the terms that count
    there (:meth:`~stickypack.core.podaffinity.PodsOnNodes.inter_pod_affinity_sums`: the
    pod's preferred affinity and anti-affinity terms against every pod on every node, and
    those pods' required affinity, preferred affinity and anti-affinity terms that select
    the pod); a node's raw score is the sum of its pairs'; min-max normalized to 0..100 over
    the nodes scored (all 0 when they are equal). Skipped (:meth:`skip_in`) when no term
    counts anywhere, as kube-scheduler's PreScore returns Skip.

    Without them (the simulator, the extender): the one case BinderHub uses, a build pod's
    *preferred* pod anti-affinity against other build pods (``component=binderhub-build``)
    with topology ``kubernetes.io/hostname`` (:attr:`Pod.pod_anti_affinity`), which BinderHub
    sets when sticky builds are off. Each build pod (``NodeTable.builds``) on a node counts
    ``-weight`` for the incoming pod's term, whether or not that pod is a build itself, and
    ``-weight`` again when the incoming pod has the build labels (the build pod's own term,
    assumed the same, selects it); the same min-max normalization. Other terms are not
    counted there, and a pod without that term is skipped."""

    name = "InterPodAffinity"
    #: kube-scheduler's default ``hardPodAffinityWeight``: what an existing pod's required
    #: affinity term that selects the pod adds in its topology pair.
    HARD_POD_AFFINITY_WEIGHT = 1
    #: ``ctx.cache`` key of the last pod's sums (with the pod and the pods on the nodes they
    #: were computed for), so that :meth:`skip_in` and :meth:`score` count them once.
    _CACHE_KEY = "InterPodAffinity:sums"

    @staticmethod
    def _build_weight(pod: Pod) -> int:
        return sum(
            t.weight
            for t in pod.pod_anti_affinity
            if t.topology_key == HOSTNAME_LABEL and set(t.match_labels) <= set(BUILD_LABELS.items())
        )

    def skip(self, pod: Pod) -> bool:
        return self._build_weight(pod) == 0

    def skip_in(self, pod: Pod, ctx: SchedulingContext) -> bool:
        if ctx.pods_on_nodes is None:
            return self.skip(pod)
        return not self._sums(pod, ctx)

    def _sums(self, pod: Pod, ctx: SchedulingContext) -> dict[tuple[str, str], int]:
        on_nodes = ctx.pods_on_nodes
        assert on_nodes is not None
        cached = ctx.cache.get(self._CACHE_KEY)
        if cached is not None and cached[0] is pod and cached[1] is on_nodes:
            return cached[2]
        sums = on_nodes.inter_pod_affinity_sums(pod, self.HARD_POD_AFFINITY_WEIGHT)
        ctx.cache[self._CACHE_KEY] = (pod, on_nodes, sums)
        return sums

    def score(self, pod: Pod, table: NodeTable, idx: np.ndarray, ctx: SchedulingContext) -> np.ndarray:
        if ctx.pods_on_nodes is not None:
            raw = self._raw_from_pods(self._sums(pod, ctx), table, idx)
        else:
            weight = self._build_weight(pod)
            # The term counts each build pod for any pod that carries it; the build pods'
            # own terms (assumed the same, one BinderHub setting) count again for a pod they
            # select. Either way a node's sum is a multiple of its builds, which
            # normalization cancels.
            selected = set(BUILD_LABELS.items()) <= set(pod.labels.items())
            raw = -(2 if selected else 1) * weight * table.builds[idx]
        if raw.size == 0:
            return np.zeros(0, dtype=np.int64)
        lo, hi = int(raw.min()), int(raw.max())
        if hi == lo:
            return np.zeros(idx.shape[0], dtype=np.int64)
        return (MAX_NODE_SCORE * ((raw - lo) / (hi - lo))).astype(np.int64)

    @staticmethod
    def _raw_from_pods(sums: Mapping[tuple[str, str], int], table: NodeTable, idx: np.ndarray) -> np.ndarray:
        """Each node's raw score: the sums of the (topology key, value) pairs of its labels."""
        by_key: dict[str, dict[str, int]] = {}
        for (key, value), amount in sums.items():
            by_key.setdefault(key, {})[value] = amount
        raw = np.zeros(idx.shape[0], dtype=np.int64)
        info = table.info
        for j, i in enumerate(idx.tolist()):
            node = info[i]
            assert node is not None
            raw[j] = sum(
                values.get(node.labels[key], 0) for key, values in by_key.items() if key in node.labels
            )
        return raw


class PodTopologySpreadScore(ScorePlugin):
    """kube-scheduler's PodTopologySpread score (:func:`~stickypack.core.topologyspread.spread_scores`):
    a pod's ``ScheduleAnyway`` topology spread constraints, or, when it has none of either
    kind, the system default ones (hostname ``maxSkew`` 3, zone 5) selecting by its
    :attr:`~stickypack.core.pod.Pod.default_spread_selector`; fewer matching pods in a
    node's domains score higher. It counts the pods of ``ctx.pods_on_nodes``; without them
    (None: the simulator, the extender) every node holds none. Skips a pod with neither
    (every pod of the simulator), as kube-scheduler's PreScore does."""

    name = "PodTopologySpread"

    def skip(self, pod: Pod) -> bool:
        return not scores_spread(pod)

    def score(self, pod: Pod, table: NodeTable, idx: np.ndarray, ctx: SchedulingContext) -> np.ndarray:
        on_nodes = ctx.pods_on_nodes or pods_on_table_nodes(table, ())
        scores = spread_scores(
            pod, idx.tolist(), on_nodes.node_labels, on_nodes.pods, on_nodes.node_names, on_nodes.node_taints
        )
        return np.array(scores, dtype=np.int64)


#: ImageLocality's thresholds (bytes): an image sum under 23 MiB scores 0, one of 1000 MiB
#: per image of the pod or more scores 100.
IMAGE_MIN_THRESHOLD = 23 * 1024 * 1024
IMAGE_MAX_CONTAINER_THRESHOLD = 1000 * 1024 * 1024


class ImageLocality(ScorePlugin):
    """Nodes that already list the pod's images score higher, by their size and how widely
    they are spread (kube-scheduler's ImageLocality).

    Per node, each image of the pod (``Pod.images``) the node lists adds
    ``int(size * (nodes listing it / all nodes))`` bytes (spread over many nodes it counts in
    full, on one of many it counts little, so pods do not pile where a rare image is); the
    sum, clamped to [23 MiB, 1000 MiB x the pod's image count], maps linearly onto 0..100.
    All nodes are the table's, feasible or not, as kube-scheduler counts its snapshot's. The
    size is the image name's one size in the cluster (``NodeTable.image_size``: the first
    node to list it gives it, as in kube-scheduler's cache), not each node's own.
    """

    name = "ImageLocality"

    def skip(self, pod: Pod) -> bool:
        return not pod.images

    def score(self, pod: Pod, table: NodeTable, idx: np.ndarray, ctx: SchedulingContext) -> np.ndarray:
        n = idx.shape[0]
        total = len(table)
        top = IMAGE_MAX_CONTAINER_THRESHOLD * len(pod.images)
        if len(pod.images) == 1:  # the common case, without the per-node sums: every node
            image = pod.images[0]  # that lists it scores alike
            rows = table.image_rows.get(image, {})
            value = _image_priority(self._scaled(table, image, len(rows), total), top) if rows else 0
            if not value:
                return np.zeros(n, dtype=np.int64)
            return np.array([value if i in rows else 0 for i in idx.tolist()], dtype=np.int64)
        sums = np.zeros(n, dtype=np.int64)
        position = np.full(table.alloc.shape[0], -1, dtype=np.int64)
        position[idx] = np.arange(n)
        for name in pod.images:
            listed = table.image_rows.get(name)
            if not listed:
                continue
            at = position[np.fromiter(listed.keys(), dtype=np.int64, count=len(listed))]
            sums[at[at >= 0]] += self._scaled(table, name, len(listed), total)
        return np.array([_image_priority(x, top) for x in sums.tolist()], dtype=np.int64)

    @staticmethod
    def _scaled(table: NodeTable, name: str, listing: int, total: int) -> int:
        """What image ``name`` adds on a node that lists it, in bytes."""
        # Go: int64(float64(size) * (float64(numNodes) / float64(totalNumNodes)))
        return int(float(table.image_size[name]) * (listing / total))


def _image_priority(image_sum: int, top: int) -> int:
    """kube-scheduler's calculatePriority: a node's image sum (bytes) onto 0..100."""
    clamped = min(max(image_sum, IMAGE_MIN_THRESHOLD), top)
    return MAX_NODE_SCORE * (clamped - IMAGE_MIN_THRESHOLD) // (top - IMAGE_MIN_THRESHOLD)
