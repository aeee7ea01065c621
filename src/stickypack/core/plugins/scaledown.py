"""stickypack's plugins for not blocking scale-down: stay off nodes the autoscaler wants to
remove (``ScaleDownAware``), fill the oldest nodes first (``NodeAge``) or the nodes that will
stay busy longest (``DrainForecast``), and the oracle's ``LifetimeAware``."""

from __future__ import annotations

import math
from collections.abc import Hashable
from typing import Any, ClassVar

import numpy as np

from stickypack.core.dra import node_dra_columns
from stickypack.core.framework import (
    MAX_NODE_SCORE,
    FilterPlugin,
    SchedulingContext,
    ScorePlugin,
)
from stickypack.core.nodetable import NodeTable
from stickypack.core.plugins.common import PluginArgsError, ScoreMemo, node_state_keys
from stickypack.core.pod import Pod
from stickypack.core.resources import CPU, GPU_RESOURCES, MEMORY

#: Annotation carrying a pod's expected end time (seconds), read by the ``LifetimeAware``
#: oracle. Only the simulator knows it.
EXPECTED_END_ANNOTATION = "stickypack.io/expected-end"


class ScaleDownAwareFilter(FilterPlugin):
    """Never place on a node the cluster-autoscaler is deleting."""

    name = "ScaleDownAware"

    def filter(self, pod: Pod, table: NodeTable, idx: np.ndarray, ctx: SchedulingContext) -> np.ndarray:
        return ~table.to_be_deleted[idx]


def gpu_columns(table: NodeTable, idx: np.ndarray) -> np.ndarray | None:
    """Per row of ``idx``, the table column of the GPU resource the autoscaler weighs the
    node by: the first of :data:`~stickypack.core.resources.GPU_RESOURCES` it has
    allocatable, -1 for a node with none; None when the table has no GPU column at all (the
    simulator's). Labels are not read here (:func:`utilization_and_threshold` does)."""
    cols = [table.rindex[r] for r in GPU_RESOURCES if r in table.rindex]
    if not cols:
        return None
    out = np.full(len(idx), -1, dtype=np.int64)
    for col in reversed(cols):  # the first resource in the autoscaler's order wins
        out = np.where(table.alloc[idx, col] > 0, col, out)
    return out


def unweighed_requests(
    pod: Pod, table: NodeTable, idx: np.ndarray, ctx: SchedulingContext
) -> np.ndarray | None:
    """Per row of ``idx`` (over every resource column), the requests the autoscaler leaves
    out of the node's utilization, with ``pod`` placed: its DaemonSet pods' with
    ``ctx.ignore_daemonsets_utilization``, its mirror pods' with
    ``ctx.ignore_mirror_pods_utilization`` (a pod that is both by either; ``pod`` among
    them if it is one: :meth:`NodeTable.unweighed_requested`). None when neither flag is
    set."""
    if not (ctx.ignore_daemonsets_utilization or ctx.ignore_mirror_pods_utilization):
        return None
    own = (  # first: pod_vector adds a column for a resource new to the table
        table.pod_vector(pod)
        if pod.unweighed(ctx.ignore_daemonsets_utilization, ctx.ignore_mirror_pods_utilization)
        else 0
    )
    return (
        table.unweighed_requested(idx, ctx.ignore_daemonsets_utilization, ctx.ignore_mirror_pods_utilization)
        + own
    )


def utilization_and_threshold(
    pod: Pod, table: NodeTable, idx: np.ndarray, ctx: SchedulingContext
) -> tuple[np.ndarray, np.ndarray | float]:
    """The cluster-autoscaler's utilization of rows ``idx`` with ``pod`` placed (a float,
    may exceed 1), and the threshold it is compared with: max of cpu and memory requests
    over allocatable against ``ctx.utilization_threshold``, and for a GPU node
    (:func:`gpu_columns`) its requests of that GPU resource over allocatable alone against
    ``ctx.gpu_utilization_threshold``, as its ``utilization.Calculate``. A node carrying
    one of ``ctx.gpu_labels`` (its cloud provider's GPU labels) with no GPU allocatable yet
    is a GPU node whose GPUs are not ready: the autoscaler takes it as unused (0, whatever
    the pod). The requests :func:`unweighed_requests` gives are taken out of both requests
    and allocatable, as its ``--ignore-daemonsets-utilization`` does. The threshold is the
    scalar ``ctx.utilization_threshold`` when no row is a GPU node (the simulator's
    tables).

    With ``ctx.dra`` (the autoscaler's ``--enable-dynamic-resource-allocation``), a node
    with node-local ResourceSlices that no GPU resource weighs is weighed by its most used
    DRA device pool instead of cpu and memory, as the table keeps it
    (:func:`~stickypack.core.dra.node_dra_columns`; +inf for a node the autoscaler cannot
    weigh and so keeps), and so is a GPU node whose GPUs a DRA driver publishes
    (:data:`DRA_GPU_LABEL`; still at the GPU threshold). ``pod`` adds nothing to a node's
    DRA utilization: its claims are allocated only when kube-scheduler binds it, so no
    device of theirs is known before; a pod whose claims would take a node's devices is
    seen there once bound."""
    req = table.requested[idx, :2] + (pod.requests.get(CPU, 0), pod.requests.get(MEMORY, 0))
    alloc = table.alloc[idx, :2]
    unweighed = unweighed_requests(pod, table, idx, ctx)
    if unweighed is not None:
        req = req - unweighed[:, :2]
        alloc = alloc - unweighed[:, :2]
    util = (req / np.maximum(alloc, 1)).max(axis=1)
    cols = gpu_columns(table, idx)
    if ctx.gpu_labels:
        unready = table.labelled(ctx.gpu_labels)[idx]
        if cols is not None:
            unready &= cols < 0
        via_dra = gpus_via_dra(table, idx)
        if unready.any() or via_dra.any():
            cols = np.full(len(idx), -1, dtype=np.int64) if cols is None else cols.copy()
            cols[unready] = _GPUS_NOT_READY
            # the autoscaler skips the GPU branch for these: their DRA pools with ctx.dra and
            # node-local slices (_weigh_by_dra_pools), else cpu and memory, at the GPU threshold
            cols[via_dra] = _GPUS_VIA_DRA
    if cols is None:
        _weigh_by_dra_pools(util, table, idx, ctx, None)
        return util, ctx.utilization_threshold
    gpus = np.flatnonzero(cols >= 0)
    if gpus.size:
        rows, col = idx[gpus], cols[gpus]
        pod_req = np.array([pod.requests.get(table.resources[c], 0) for c in col.tolist()])
        gpu_req = table.requested[rows, col] + pod_req
        gpu_alloc = table.alloc[rows, col]
        if unweighed is not None:
            gpu_req = gpu_req - unweighed[gpus, col]
            gpu_alloc = gpu_alloc - unweighed[gpus, col]
        util[gpus] = gpu_req / np.maximum(gpu_alloc, 1)
    util[cols == _GPUS_NOT_READY] = 0.0
    _weigh_by_dra_pools(util, table, idx, ctx, cols)
    return util, np.where(cols != -1, ctx.gpu_utilization_threshold, ctx.utilization_threshold)


def _weigh_by_dra_pools(
    util: np.ndarray, table: NodeTable, idx: np.ndarray, ctx: SchedulingContext, cols: np.ndarray | None
) -> None:
    """With ``ctx.dra``, set ``util`` (per row of ``idx``) of the nodes with node-local
    slices that no GPU resource weighs (``cols``: :func:`utilization_and_threshold`'s marks)
    to their DRA utilization, as the autoscaler's ``utilization.Calculate`` orders it."""
    if not ctx.dra:
        return
    columns = node_dra_columns(table, idx)
    if columns is None:
        return
    has_slices, dra = columns
    if cols is not None:
        has_slices &= (cols == -1) | (cols == _GPUS_VIA_DRA)
    util[has_slices] = dra[has_slices]


#: :func:`utilization_and_threshold`'s column marks: a labelled GPU node without GPUs yet, and
#: a GPU node whose GPUs a DRA driver publishes (:data:`DRA_GPU_LABEL`).
_GPUS_NOT_READY = -2
_GPUS_VIA_DRA = -3

#: A node label by which a cloud provider's autoscaler knows a GPU node whose GPUs a DRA
#: driver publishes (GKE's ``DraGPULabel``, value ``"true"``: its ``GpuConfig.ExposedViaDra``):
#: with DRA on, the autoscaler weighs such a node by its DRA pools (else its cpu and memory),
#: not by a GPU resource, still against the GPU threshold.
DRA_GPU_LABEL = "cloud.google.com/gke-gpu-dra-driver"


def exposes_gpus_via_dra(table: NodeTable, row: int) -> bool:
    """Whether the node of ``row`` is labelled :data:`DRA_GPU_LABEL` ``"true"``."""
    info = table.info[row]
    return info is not None and info.labels.get(DRA_GPU_LABEL) == "true"


def gpus_via_dra(table: NodeTable, idx: np.ndarray) -> np.ndarray:
    """:func:`exposes_gpus_via_dra` per row of ``idx`` (the label's key looked up first)."""
    out = table.labelled((DRA_GPU_LABEL,))[idx].copy()
    for k in np.flatnonzero(out).tolist():
        out[k] = exposes_gpus_via_dra(table, int(idx[k]))
    return out


def utilization_with(pod: Pod, table: NodeTable, idx: np.ndarray) -> np.ndarray:
    """The utilization of :func:`utilization_and_threshold` alone, with the autoscaler's
    defaults (no labels read, DaemonSet and mirror pods counted)."""
    return utilization_and_threshold(pod, table, idx, SchedulingContext())[0]


def kept_at_min_size(table: NodeTable, idx: np.ndarray, ctx: SchedulingContext) -> np.ndarray | None:
    """Per row of ``idx``: the node is in a node group at or under its minimum size
    (``ctx.node_groups``, :meth:`~stickypack.core.nodegroups.NodeGroups.at_min_size`), so
    the autoscaler never takes it as a scale-down candidate; None when no group has a
    minimum size (nothing read)."""
    groups = ctx.node_groups
    if groups is None or not groups.min_sizes:
        return None
    return groups.at_min_size(table, idx)


def quiet_nodes(pod: Pod, table: NodeTable, idx: np.ndarray, ctx: SchedulingContext) -> np.ndarray:
    """Rows of ``idx`` that would stay at or under the autoscaler's utilization threshold even
    with ``pod`` placed (:func:`utilization_and_threshold`, with ``ctx``'s thresholds and
    GPU labels): the nodes the autoscaler would remove once their bare pods end. A node of a
    group at or under its minimum size (:func:`kept_at_min_size`) is not quiet: the
    autoscaler keeps it whatever runs there. A group above its minimum may lose any of its
    nodes, so its quiet nodes stay quiet, even where the group could lose only some of them."""
    util, thr = utilization_and_threshold(pod, table, idx, ctx)
    quiet = util <= thr
    kept = kept_at_min_size(table, idx, ctx)
    return quiet if kept is None else quiet & ~kept


class ScaleDownAware(ScorePlugin):
    """Keep pods off nodes the autoscaler wants to remove, so they can empty.

    A node that would stay at or under the autoscaler's utilization threshold (cluster-autoscaler
    1.35.0+, 1.34.3+, 1.33.4+ and 1.32.6+ compare "at or below"; earlier versions "below") even
    with the pod
    (max of cpu and memory requests over allocatable; for a GPU node its GPU requests over
    allocatable, at the GPU threshold; a node with a GPU label of ``ctx.gpu_labels`` but no
    GPU allocatable yet, 0; with ``ctx.dra``, a node with node-local ResourceSlices by its
    most used DRA pool, the pod adding nothing there: :func:`utilization_and_threshold`) is
    one the autoscaler would remove
    once its bare pods end: it scores ``low_score * utilization / threshold`` (0..20 by
    default), unless its node group is at or under its minimum size (``ctx.node_groups``:
    :func:`kept_at_min_size`; the autoscaler keeps such a node, so there is no reason to keep
    pods off it); a node marked ``DeletionCandidateOfClusterAutoscaler`` scores 0; every
    other node scores 100. Weighted above the packing scorers, this sends pods to busy nodes
    whenever one has room, and lets the quiet ones drain.
    """

    name = "ScaleDownAware"

    def __init__(self, low_score: int = 20) -> None:
        if not 0 <= low_score <= 100:
            raise PluginArgsError("ScaleDownAware low_score must be 0..100")
        self.low_score = low_score
        self._memo = ScoreMemo()

    def _by_utilization(
        self, pod: Pod, table: NodeTable, idx: np.ndarray, ctx: SchedulingContext
    ) -> np.ndarray:
        util, thr = utilization_and_threshold(pod, table, idx, ctx)
        thr = np.maximum(thr, 1e-9)
        # util at most thr where the low score is taken: a node kept at +inf (DRA: one the
        # autoscaler cannot weigh) makes no 0 * inf with low_score 0
        low = self.low_score * np.minimum(util, thr) / thr
        return np.where(util <= thr, low, MAX_NODE_SCORE).astype(np.int64)

    def score(self, pod: Pod, table: NodeTable, idx: np.ndarray, ctx: SchedulingContext) -> np.ndarray:
        pod_part = (
            pod.requests.get(CPU, 0),
            pod.requests.get(MEMORY, 0),
            *(pod.requests.get(r, 0) for r in GPU_RESOURCES),
            ctx.utilization_threshold,
            ctx.gpu_utilization_threshold,
            ctx.gpu_labels,
            # the flags themselves, not only whether they leave this pod out: a key's node
            # state is longer with them (the unweighed columns), and the lengths of two keys
            # of a table that gained columns between them could otherwise line up
            (
                ctx.ignore_daemonsets_utilization,
                ctx.ignore_mirror_pods_utilization,
                pod.is_daemonset_pod,
                pod.is_mirror_pod,
            )
            if ctx.ignore_daemonsets_utilization or ctx.ignore_mirror_pods_utilization
            else None,
            ctx.dra,  # as the flags above: whether the key's node state holds DRA columns
        )

        def keys() -> list[Hashable]:
            state = [table.alloc[idx]]
            if ctx.gpu_labels:  # whether a node carries a GPU label is part of its state
                state.append(table.labelled(ctx.gpu_labels)[idx, None])
                state.append(gpus_via_dra(table, idx)[:, None])
            unweighed = unweighed_requests(pod, table, idx, ctx)
            if unweighed is not None:
                state.append(unweighed)
            dra = node_dra_columns(table, idx) if ctx.dra else None
            if dra is not None:  # a node's DRA reading is part of its state
                has_slices, utilization = dra
                # the float's bits: the key stays integers (a float column would make every
                # column float, and big integers lose digits there)
                state.extend((has_slices[:, None], utilization.view(np.int64)[:, None]))
            alloc = state[0] if len(state) == 1 else np.column_stack(state)
            return node_state_keys(table.requested[idx], alloc, pod_part)

        score = self._memo.scores(idx, keys, lambda rows: self._by_utilization(pod, table, rows, ctx))
        # after the memo: its keys need not hold the groups (a node's group size is no part
        # of its score by utilization)
        kept = kept_at_min_size(table, idx, ctx)
        if kept is not None:
            score[kept] = MAX_NODE_SCORE
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
        return _age_rank_scores(np.lexsort((idx, table.created[idx])))  # oldest first, slot breaks ties


def _age_rank_scores(order: np.ndarray) -> np.ndarray:
    """Scores 100 (first in ``order``) down to 0 (last), linear in rank."""
    n = order.shape[0]
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n)
    return MAX_NODE_SCORE - MAX_NODE_SCORE * rank // (n - 1)


class DrainForecast(ScorePlugin):
    """The nodes most likely to be busy ``horizon_s`` from now score highest, so new pods go
    where they cost no extra node time and the nodes about to empty are left to drain.

    A node is busy at ``now + horizon_s`` unless every pod on it has ended by then. Each
    pod's chance to still run is read from a session-length model, given how long it has
    run (its age from creation: ``NodeTable.pod_ages``): a session is active for a lognormal
    time (median ``session_median_s``, ``session_sigma``), then idle for ``idle_cull_s``
    until the idle culler stops it, and is stopped at ``session_max_s`` in any case (z2jh's
    culler ``timeout`` and ``maxAge``). The defaults are mybinder.org's culler settings and
    the simulator's session model. Under this model a session that has run long is likely to
    run on for long, so a node holding one old session may stay for hours while a node of
    many new ones may empty within the hour: what the node's age alone does not tell.

    Candidates are ranked by that probability (highest 100, lowest 0, linear in rank, as
    :class:`NodeAge`), ties by age, oldest first: with no timed pods on any node this is
    ``NodeAge``. Build pods are not counted (``NodeTable`` lists only the others), nor pods
    without a creation time.
    """

    name = "DrainForecast"
    #: Resolution of the survival table, seconds.
    _STEP_S: ClassVar[float] = 10.0

    def __init__(
        self,
        horizon_s: float = 3600.0,
        session_median_s: float = 600.0,
        session_sigma: float = 1.0,
        idle_cull_s: float = 600.0,
        session_max_s: float = 21600.0,
    ) -> None:
        if not self._STEP_S <= horizon_s <= 7 * 86400:  # read on the survival table's grid
            raise PluginArgsError(f"DrainForecast horizon_s must be in [{self._STEP_S:g}, 604800]")
        if session_median_s <= 0 or session_sigma <= 0:
            raise PluginArgsError("DrainForecast session_median_s and session_sigma must be > 0")
        if idle_cull_s < 0 or not idle_cull_s < session_max_s <= 7 * 86400:
            raise PluginArgsError("DrainForecast needs 0 <= idle_cull_s < session_max_s <= 604800")
        self.horizon_s = horizon_s
        self.session_median_s = session_median_s
        self.session_sigma = session_sigma
        self.idle_cull_s = idle_cull_s
        self.session_max_s = session_max_s
        # Survival S(t) = P(session longer than t) on a grid of _STEP_S seconds up to the
        # maximum; scoring looks it up instead of calling erfc per pod and decision.
        t = np.arange(int(session_max_s // self._STEP_S) + 2) * self._STEP_S
        active = np.maximum(t - idle_cull_s, 1e-9)
        z = (np.log(active) - math.log(session_median_s)) / (session_sigma * math.sqrt(2.0))
        surv = 0.5 * np.array([math.erfc(v) for v in z.tolist()])
        surv[t <= idle_cull_s] = 1.0
        surv[t >= session_max_s] = 0.0
        self._surv = surv
        # log P(a session of age index k has ended horizon_s later), per index k: what
        # log_p_emptied sums per node, looked up instead of computed per pod and decision.
        with np.errstate(divide="ignore"):
            ended = np.log1p(-np.minimum(self.still_running(t), 1.0))
        self._log_ended = np.maximum(ended, -1e6)

    def describe(self) -> dict[str, Any]:
        return {
            "plugin": self.name,
            "args": {
                "horizon_s": self.horizon_s,
                "session_median_s": self.session_median_s,
                "session_sigma": self.session_sigma,
                "idle_cull_s": self.idle_cull_s,
                "session_max_s": self.session_max_s,
            },
        }

    def _age_index(self, ages: np.ndarray) -> np.ndarray:
        """Grid index of each age (seconds), capped at the last (the maximum session)."""
        return np.minimum((ages / self._STEP_S).astype(np.int64), self._surv.shape[0] - 1)

    def still_running(self, ages: np.ndarray) -> np.ndarray:
        """P(a session of age ``ages`` (seconds) still runs ``horizon_s`` later)."""
        last = self._surv.shape[0] - 1
        a = self._age_index(ages)
        later = self._surv[np.minimum(a + int(self.horizon_s / self._STEP_S), last)]
        now = self._surv[a]
        return np.divide(later, now, out=np.zeros_like(later), where=now > 0)

    def log_p_emptied(self, table: NodeTable, idx: np.ndarray, now: float) -> np.ndarray:
        """Per row of ``idx``: log P(the node has emptied by ``now + horizon_s``), from the
        pods on it now (0 for a node without timed pods; lower is busier)."""
        rows, ages = table.pod_ages(now)
        if rows.size == 0:
            return np.zeros(idx.shape[0])
        ended = self._log_ended[self._age_index(ages)]
        return np.bincount(rows, weights=ended, minlength=table.alloc.shape[0])[idx]

    def score(self, pod: Pod, table: NodeTable, idx: np.ndarray, ctx: SchedulingContext) -> np.ndarray:
        if idx.shape[0] == 1:
            return np.full(1, MAX_NODE_SCORE, dtype=np.int64)
        emptied = self.log_p_emptied(table, idx, ctx.now)
        # busiest first, then oldest, then slot
        return _age_rank_scores(np.lexsort((idx, table.created[idx], emptied)))


class LifetimeAware(ScorePlugin):
    """The oracle: knows each pod's end time (annotation ``stickypack.io/expected-end``,
    seconds) and each node's ``expiry`` (latest end of its pods, kept by the simulator).
    A node the pod would not outlive scores 100; otherwise the less the pod would extend
    the node's life, the higher. Not deployable: real pods do not know when they end."""

    name = "LifetimeAware"

    def skip(self, pod: Pod) -> bool:
        return EXPECTED_END_ANNOTATION not in pod.annotations

    def score(self, pod: Pod, table: NodeTable, idx: np.ndarray, ctx: SchedulingContext) -> np.ndarray:
        column = table.extra.get("expiry")
        if column is None:  # no driver keeps the nodes' expiry (only the simulator does)
            return np.full(idx.shape[0], MAX_NODE_SCORE, dtype=np.int64)
        end = float(pod.annotations[EXPECTED_END_ANNOTATION])
        if not math.isfinite(end):  # no end, or none known: no node is better than another
            return np.full(idx.shape[0], MAX_NODE_SCORE, dtype=np.int64)
        expiry = column[idx]
        extension = np.maximum(end - np.maximum(expiry, ctx.now), 0.0)
        top = extension.max()
        if top <= 0:
            return np.full(idx.shape[0], MAX_NODE_SCORE, dtype=np.int64)
        return (MAX_NODE_SCORE - MAX_NODE_SCORE * extension / top).astype(np.int64)
