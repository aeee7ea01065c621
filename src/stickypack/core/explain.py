"""Why: why a profile sends a pod where it does, and why a node stays up.

:func:`explain_placement` runs a :class:`~stickypack.core.framework.Profile` on a pod as
:meth:`Profile.select` does, but keeps every step: the filter that removed each node, and
each scorer's score (0..100) and weight on every feasible node. :func:`node_report` says
of each node what the cluster-autoscaler sees: its utilization, whether it is under the
scale-down threshold, and the pods that keep it from being removed (bare pods: the
autoscaler does not evict a pod no controller would recreate).

Pure: a node table and pods in, dataclasses out (``stickypack inspect`` prints them).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from stickypack.core.dra import DynamicResourcesFilter, NodeDra
from stickypack.core.framework import FilterPlugin, Profile, SchedulingContext, check_mask, check_scores
from stickypack.core.labels import DELETION_CANDIDATE_TAINT, TO_BE_DELETED_TAINT
from stickypack.core.nodetable import NodeTable
from stickypack.core.plugins.kubescheduler import (
    NodeAffinityFilter,
    NodeReady,
    NodeResourcesFitFilter,
    NodeUnschedulable,
    TaintTolerationFilter,
)
from stickypack.core.plugins.scaledown import exposes_gpus_via_dra, gpu_columns
from stickypack.core.pod import Pod
from stickypack.core.podaffinity import PodsOnNodes
from stickypack.core.resources import CPU, MEMORY
from stickypack.core.routing import LabelSelector
from stickypack.core.volumes import PersistentVolumesFilter

#: The cluster-autoscaler's pod annotation: "true" lets it evict a pod it otherwise would
#: not, "false" keeps any pod from being evicted, "on-completion" (CA 1.36+) makes it wait
#: for the pod to finish before it removes the node.
SAFE_TO_EVICT_ANNOTATION = "cluster-autoscaler.kubernetes.io/safe-to-evict"
#: A pod annotation: local-storage volumes (comma-separated names) the autoscaler may lose.
SAFE_TO_EVICT_LOCAL_VOLUMES_ANNOTATION = "cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes"
#: A node annotation: "true" keeps the cluster-autoscaler from ever removing the node.
SCALE_DOWN_DISABLED_ANNOTATION = "cluster-autoscaler.kubernetes.io/scale-down-disabled"
#: Controllers whose pods the cluster-autoscaler may move (they are recreated elsewhere).
MOVABLE_OWNERS = frozenset({"ReplicaSet", "ReplicationController", "StatefulSet", "Job"})
#: Controllers whose existence the autoscaler checks before it moves their pods (its
#: ``replicacount`` rule, on with the default ``--skip-nodes-with-custom-controller-pods``).
CHECKED_CONTROLLERS = MOVABLE_OWNERS | {"DaemonSet"}


@dataclass(frozen=True, slots=True)
class NodeVerdict:
    """One node's part in a placement: ``filtered_by`` is the first filter that removed it
    (None: feasible), ``with_nominated`` whether it passes them all but with the pods
    nominated to the node added (:func:`explain_placement`); for a feasible node ``scores`` maps each
    scorer to its score 0..100 and ``total`` is ``sum(weight * score)``."""

    node: str
    filtered_by: str | None = None
    scores: Mapping[str, int] = field(default_factory=dict)
    total: int | None = None
    with_nominated: bool = False


@dataclass(frozen=True, slots=True)
class PlacementExplanation:
    """``verdicts``: feasible nodes by total, highest first (ties by name), then the
    filtered ones by name. ``best``: the nodes with the highest total (kube-scheduler picks
    one of them at random); empty when no node fits. ``weights``: each scorer's weight."""

    profile: str
    verdicts: list[NodeVerdict]
    best: list[str]
    weights: Mapping[str, int]


#: The core's filters that stand for kube-scheduler's own (in-tree) filter plugins: those
#: kube-scheduler runs with a node's nominated pods added (:func:`nominated_pods_for`). The
#: others (stickypack's, in the extender) see the node as it is.
KUBE_SCHEDULER_FILTERS: tuple[type[FilterPlugin], ...] = (
    NodeUnschedulable,
    NodeReady,
    NodeResourcesFitFilter,
    TaintTolerationFilter,
    NodeAffinityFilter,
)


#: kube-scheduler's filters in the order every profile runs them (its default plugins,
#: ``apis/config/v1/default_plugins.go``: a profile of a KubeSchedulerConfiguration changes
#: which run, not their order), by the names the core's models of them go by: NodeReady stands
#: where TaintToleration does (kube-scheduler keeps a node that is not Ready off by its
#: ``not-ready`` taint), PersistentVolumes for VolumeBinding and VolumeZone; DynamicResources
#: (DRA, on by default since it is GA) just after InterPodAffinity (``applyDynamicResources``).
#: kube-scheduler names the first that fails a node; the extender's filters run after all of them.
KUBE_FILTER_ORDER = (
    "NodeUnschedulable",
    "NodeReady",
    "TaintToleration",
    "NodeAffinity",
    "NodePorts",
    "NodeResourcesFit",
    "PersistentVolumes",
    "PodTopologySpread",
    "InterPodAffinity",
    "DynamicResources",
)


#: The core's filters that model kube-scheduler's own: :data:`KUBE_SCHEDULER_FILTERS`, its
#: volume filters and DynamicResources (the ones run with a node's nominated pods added, and
#: named at their place in :data:`KUBE_FILTER_ORDER`; DynamicResources reads no other pod, so
#: its verdict is the same in both passes).
_MODELLED_FILTERS: tuple[type[FilterPlugin], ...] = (
    *KUBE_SCHEDULER_FILTERS,
    PersistentVolumesFilter,
    DynamicResourcesFilter,
)


def _rejected_by_prefilter(profile: Profile, pod: Pod) -> str | None:
    """The name of the profile's filter whose PreFilter rejects every node for ``pod``
    (DynamicResources': a claim missing, being deleted, not the pod's or asking for a
    DeviceClass that does not exist), or None.
    kube-scheduler then runs no Filter: every node is named by it."""
    for plugin in profile.filters:
        if isinstance(plugin, DynamicResourcesFilter) and plugin.verdict(pod).rejected is not None:
            return plugin.name
    return None


def _filter_rank(plugin: FilterPlugin, position: int) -> int:
    """Where ``plugin`` (at ``position`` in its profile) runs: a model of one of
    kube-scheduler's filters at its place in :data:`KUBE_FILTER_ORDER`, any other filter
    (stickypack's own, run by the extender) after all of those, in the profile's order."""
    if isinstance(plugin, _MODELLED_FILTERS) and plugin.name in KUBE_FILTER_ORDER:
        return KUBE_FILTER_ORDER.index(plugin.name)
    return len(KUBE_FILTER_ORDER) + position


def nominated_pods_for(pod: Pod, nominated: Iterable[Pod]) -> list[Pod]:
    """The pods of ``nominated`` (pending pods nominated to one node) that kube-scheduler's
    filters count on that node when placing ``pod``: those of a priority at least
    ``pod``'s (a missing ``spec.priority`` is 0), ``pod`` itself left out
    (kube-scheduler's ``addGENominatedPods``)."""
    priority = pod.priority or 0
    return [p for p in nominated if (p.priority or 0) >= priority and p.key != pod.key]


def _first_failing_filter(
    profile: Profile,
    pod: Pod,
    table: NodeTable,
    row: int,
    ctx: SchedulingContext,
    added: Sequence[Pod],
    on_nodes: PodsOnNodes | None,
) -> str | None:
    """The first, in kube-scheduler's order (:data:`KUBE_FILTER_ORDER`), of ``profile``'s
    kube-scheduler filters (:data:`KUBE_SCHEDULER_FILTERS`, the volumes' too) and those
    ``on_nodes`` models that removes row ``row`` once ``added`` are on it, or None.
    ``table`` and ``on_nodes`` are left as they were (the added pods' build starts too).

    As kube-scheduler adds them (``addGENominatedPods``) to a PreFilter state made without
    them: InterPodAffinity checks them only when its PreFilter ran for the pods bound
    (:meth:`~stickypack.core.podaffinity.PodsOnNodes.inter_pod_affinity_runs`: else it
    returned Skip, and neither its ``AddPod`` nor its Filter runs), and PodTopologySpread's
    ``AddPod`` counts one being deleted too (only its PreFilter passes over those) and one
    an empty selector selects (its PreFilter counts none)."""
    starts = int(table.build_starts[row])
    runs = on_nodes.inter_pod_affinity_runs(pod) if on_nodes is not None else True
    for p in added:
        table.add_pod(row, p)
        if on_nodes is not None:
            on_nodes.add(row, p, nominated=True)
    try:
        idx = np.array([row], dtype=np.int64)
        failing = [
            (_filter_rank(plugin, position), plugin.name)
            for position, plugin in enumerate(profile.filters)
            if isinstance(plugin, _MODELLED_FILTERS) and not plugin.filter(pod, table, idx, ctx)[0]
        ]
        named = on_nodes.failing_filter(pod, inter_pod_affinity=runs)(row) if on_nodes is not None else None
        if named is not None:
            failing.append((KUBE_FILTER_ORDER.index(named), named))
        return min(failing)[1] if failing else None
    finally:
        for p in added:
            table.remove_pod(row, p)
            if on_nodes is not None:
                on_nodes.remove(row, p, nominated=True)
        table.build_starts[row] = starts


def explain_placement(
    profile: Profile,
    pod: Pod,
    table: NodeTable,
    ctx: SchedulingContext,
    nominated: Mapping[str, Sequence[Pod]] | None = None,
    on_nodes: PodsOnNodes | None = None,
    nominated_node: str | None = None,
) -> PlacementExplanation:
    """Every node of ``table`` judged for ``pod`` by ``profile``: every filter on every
    node, a node rejected named by the filter kube-scheduler runs first
    (:data:`KUBE_FILTER_ORDER`; the extender's own after, in the profile's order), then each
    scorer on the nodes left (scored even when one node is left, which
    :meth:`Profile.select` skips). A plugin of ``profile.checked`` that breaks its
    contract raises :class:`~stickypack.core.framework.PluginContractError`, as there.

    ``nominated``: node name -> the pending pods nominated to it (``status.nominatedNodeName``)
    that the pod's scheduler knows. As kube-scheduler's ``RunFilterPluginsWithNominatedPods``
    does, a node with some that count for ``pod`` (:func:`nominated_pods_for`) is first
    filtered with them added to it, by the profile's kube-scheduler filters
    (:data:`KUBE_SCHEDULER_FILTERS`), and the first that fails removes it; else it is
    filtered as it is. Scores are of the nodes as they are (kube-scheduler does not add
    nominated pods when it scores).

    ``on_nodes``: the pods bound to the nodes (:class:`~stickypack.core.podaffinity.PodsOnNodes`
    of ``table``'s rows); given, every node is also judged by kube-scheduler's NodePorts,
    PodTopologySpread and InterPodAffinity filters
    (:meth:`~stickypack.core.podaffinity.PodsOnNodes.failing_filter`), as every
    kube-scheduler profile runs them (a policy does not name them); with nominated pods, also
    with those added; and the scorers see them (``ctx.pods_on_nodes``, unless ``ctx`` has
    its own). None: not judged.

    A :class:`~stickypack.core.dra.DynamicResourcesFilter` in ``profile`` (kube-scheduler's
    DynamicResources) is ranked after InterPodAffinity; when its
    PreFilter rejects the pod (a claim missing, being deleted, not the pod's, or asking for a
    DeviceClass that does not exist), every node is named by it, as kube-scheduler runs no
    Filter then.

    ``nominated_node``: ``pod``'s own ``status.nominatedNodeName`` (a preemptor waiting for
    its victims to go). kube-scheduler filters that node first (``evaluateNominatedNode``)
    and, when it passes, binds the pod there without scoring: ``best`` is then that node
    alone; else the nodes are scored as usual."""
    idx = table.active_indices()
    with_nominated: dict[int, str] = {}
    for name, pods in (nominated or {}).items():
        row = table.index.get(name)
        added = nominated_pods_for(pod, pods)
        if row is None or not table.active[row] or not added:
            continue
        failing = _first_failing_filter(profile, pod, table, row, ctx, added, on_nodes)
        if failing is not None:
            with_nominated[row] = failing
    # every filter judges every node, so that a node two reject is named by the one
    # kube-scheduler runs first (it stops at that one)
    failures: dict[int, list[tuple[int, str]]] = {}
    for position, plugin in enumerate(profile.filters):
        if idx.size == 0:
            break
        mask = plugin.filter(pod, table, idx, ctx)
        if plugin in profile.checked:
            mask = check_mask(plugin, mask, idx)
        rank = _filter_rank(plugin, position)
        for row in idx[~mask].tolist():
            failures.setdefault(row, []).append((rank, plugin.name))
    if on_nodes is not None and idx.size:
        judge = on_nodes.failing_filter(pod)
        for row in idx.tolist():
            named = judge(row)
            if named is not None:
                failures.setdefault(row, []).append((KUBE_FILTER_ORDER.index(named), named))
    filtered = {row: min(named)[1] for row, named in failures.items()}
    # kube-scheduler names the failure of its pass with the nominated pods, which runs first
    by_nominated = {row for row in with_nominated if row not in filtered}
    filtered.update(with_nominated)
    prefilter = _rejected_by_prefilter(profile, pod)
    if prefilter is not None:  # before any Filter, in both passes
        filtered, by_nominated = dict.fromkeys(table.active_indices().tolist(), prefilter), set()
    if filtered:
        idx = idx[~np.isin(idx, list(filtered))]
    per_plugin: dict[str, np.ndarray] = {}
    weights: dict[str, int] = {}
    total = np.zeros(idx.shape[0], dtype=np.int64)
    if on_nodes is not None and ctx.pods_on_nodes is None:
        ctx = dataclasses.replace(ctx, pods_on_nodes=on_nodes)
    for ws in profile.scorers:
        if ws.weight == 0 or idx.size == 0 or ws.plugin.skip_in(pod, ctx):
            continue
        scores = ws.plugin.score(pod, table, idx, ctx)
        if ws.plugin in profile.checked:
            scores = check_scores(ws.plugin, scores, idx)
        per_plugin[ws.plugin.name] = scores
        weights[ws.plugin.name] = ws.weight
        total += ws.weight * scores
    names = table.node_names(idx)
    feasible = [
        NodeVerdict(name, None, {p: int(s[k]) for p, s in per_plugin.items()}, int(total[k]))
        for k, name in enumerate(names)
    ]
    feasible.sort(key=lambda v: (-(v.total or 0), v.node))
    rejected = sorted(
        (
            NodeVerdict(name, plugin, with_nominated=row in by_nominated)
            for name, (row, plugin) in zip(table.node_names(filtered), filtered.items(), strict=True)
        ),
        key=lambda v: v.node,
    )
    top = feasible[0].total if feasible else None
    best = [v.node for v in feasible if v.total == top]
    if nominated_node is not None and any(v.node == nominated_node for v in feasible):
        best = [nominated_node]
    return PlacementExplanation(profile.name, feasible + rejected, best, weights)


def is_daemon_pod(pod: Pod) -> bool:
    """A DaemonSet pod (its controller is a DaemonSet, or it is annotated
    ``daemonset-pod: "true"``) or a mirror pod: the autoscaler never moves these, a node
    running nothing else is empty to it, and their requests count in its utilization
    unless ``--ignore-daemonsets-utilization`` / ``--ignore-mirror-pods-utilization``."""
    return pod.is_daemonset_pod or pod.is_mirror_pod


def blocking_local_volumes(pod: Pod) -> tuple[str, ...]:
    """``pod``'s local-storage volumes (:attr:`Pod.local_volumes`) not listed in its
    ``safe-to-evict-local-volumes`` annotation (comma-separated names)."""
    listed = set(pod.annotations.get(SAFE_TO_EVICT_LOCAL_VOLUMES_ANNOTATION, "").split(","))
    return tuple(v for v in pod.local_volumes if v not in listed)


@dataclass(frozen=True, slots=True)
class DisruptionBudget:
    """A PodDisruptionBudget as the autoscaler reads it: the pods of ``namespace`` its
    ``selector`` matches (None: a budget without a selector, which matches no pod), and how
    many of them may be evicted now (``status.disruptionsAllowed``)."""

    namespace: str
    name: str
    selector: LabelSelector | None
    disruptions_allowed: int

    def covers(self, pod: Pod) -> bool:
        return (
            self.selector is not None
            and pod.namespace == self.namespace
            and self.selector.matches(pod.labels)
        )


class BudgetIndex:
    """Which of ``budgets`` cover a pod (:meth:`covering`), without testing each: the
    budgets are filed by namespace, and within a namespace each budget whose selector has
    ``matchLabels`` under one label it requires (the key most of the namespace's budgets
    require, the first by name among equals), so a pod is tested only against the budgets
    its own value of such a key files, and those with no ``matchLabels`` (only expressions,
    or an empty selector); a budget without a selector covers no pod and is never filed.
    The same budgets, in the same order, as testing every budget's
    :meth:`DisruptionBudget.covers`: the candidates found are tested so."""

    __slots__ = ("_namespaces", "budgets")

    def __init__(self, budgets: Sequence[DisruptionBudget]) -> None:
        self.budgets = tuple(budgets)
        by_namespace: dict[str, list[int]] = {}
        for k, budget in enumerate(self.budgets):
            if budget.selector is not None:
                by_namespace.setdefault(budget.namespace, []).append(k)
        #: per namespace: label key -> value -> positions, and the positions tested always
        self._namespaces: dict[str, tuple[dict[str, dict[str, list[int]]], list[int]]] = {}
        for namespace, positions in by_namespace.items():
            required: dict[str, int] = {}
            for k in positions:
                for key in self._selector(k).match_labels:
                    required[key] = required.get(key, 0) + 1
            keyed: dict[str, dict[str, list[int]]] = {}
            always: list[int] = []
            for k in positions:
                labels = self._selector(k).match_labels
                if not labels:
                    always.append(k)
                    continue
                key = min(labels, key=lambda key: (-required[key], key))
                keyed.setdefault(key, {}).setdefault(labels[key], []).append(k)
            self._namespaces[namespace] = (keyed, always)

    def _selector(self, k: int) -> LabelSelector:
        selector = self.budgets[k].selector
        assert selector is not None  # only budgets with one are filed
        return selector

    def covering(self, pod: Pod) -> tuple[int, ...]:
        """The positions in :attr:`budgets` of those that cover ``pod``, in order."""
        filed = self._namespaces.get(pod.namespace)
        if filed is None:
            return ()
        keyed, always = filed
        labels = pod.labels
        found = list(always)
        for key, by_value in keyed.items():
            value = labels.get(key)
            if value is not None:
                found.extend(by_value.get(value, ()))
        if not found:
            return ()
        found.sort()
        budgets = self.budgets
        return tuple(k for k in found if budgets[k].covers(pod))


#: Node labels by which cloud providers' autoscalers know a GPU node whose GPUs are not
#: ready yet (GKE's and EKS's ``GPULabel``; AKS's, ``kubernetes.azure.com/accelerator``
#: since cluster-autoscaler 1.31 and the plain ``accelerator`` before, is not assumed:
#: pass it to ``stickypack inspect --gpu-label``).
DEFAULT_GPU_LABELS = ("cloud.google.com/gke-accelerator", "k8s.amazonaws.com/accelerator")
#: The cluster-autoscaler's default ``--scale-down-gpu-utilization-threshold``.
GPU_UTILIZATION_THRESHOLD = 0.5

#: The cluster-autoscaler's default ``--blocking-system-pod-distruption-timeout`` (seconds).
BLOCKING_SYSTEM_POD_DISRUPTION_TIMEOUT_S = 3600.0

#: The cluster-autoscaler's default ``--expendable-pods-priority-cutoff``.
EXPENDABLE_PODS_PRIORITY_CUTOFF = -10


@dataclass(frozen=True, slots=True)
class ScaleDownRules:
    """The cluster-autoscaler settings :func:`pin_reason` follows: ``local_storage_pins``
    is its ``--skip-nodes-with-local-storage``, ``system_pods_pin`` its
    ``--skip-nodes-with-system-pods`` (both true by default); ``budgets``: the cluster's
    PodDisruptionBudgets, or None when they are not known (then neither budget rule is
    applied)."""

    local_storage_pins: bool = True
    system_pods_pin: bool = True
    #: Its ``--blocking-system-pod-distruption-timeout`` (sic; 1 h by default, since
    #: cluster-autoscaler 1.33): a kube-system pod without a budget pins its node only until
    #: it is this old (seconds since its creation; one without a creation time always
    #: pins, and so does every such pod when ``now`` is unknown). None: no timeout (the
    #: autoscaler before 1.33).
    system_pod_disruption_timeout_s: float | None = BLOCKING_SYSTEM_POD_DISRUPTION_TIMEOUT_S
    budgets: tuple[DisruptionBudget, ...] | None = ()
    #: Its ``--expendable-pods-priority-cutoff``: pods of a lower priority are expendable,
    #: left out of the autoscaler's picture for scale-down (they neither count toward a
    #: node's utilization nor keep it); a pod without a priority never is.
    expendable_priority_cutoff: int = EXPENDABLE_PODS_PRIORITY_CUTOFF
    #: The controllers that exist, as ``(kind, namespace, name)`` of every ReplicaSet,
    #: ReplicationController, StatefulSet, Job and DaemonSet, each mapped to its
    #: ``spec.replicas`` (ReplicaSets and ReplicationControllers; None for the others or
    #: when unset); None when they are not known (then a controller is taken to exist, and
    #: neither controller rule is applied).
    controllers: Mapping[tuple[str, str, str], int | None] | None = None
    #: Kinds of :data:`CHECKED_CONTROLLERS` that could not be listed (no right, or not
    #: served): a controller of such a kind is taken to exist, with enough replicas.
    unlisted_controller_kinds: frozenset[str] = frozenset()
    #: Its ``--min-replica-count``: a pod of a ReplicaSet or ReplicationController that
    #: wants fewer replicas than this pins its node (0, the default, never pins).
    min_replica_count: int = 0
    #: The time to judge at (seconds since the epoch), for pods terminating for too long
    #: (:func:`is_long_terminating`); None: that rule is not applied (``core`` has no clock).
    now: float | None = None
    #: Node labels that mark a GPU node (its cloud provider's ``GPULabel``): a node with one
    #: of them, or with a GPU resource allocatable (:data:`~stickypack.core.resources.GPU_RESOURCES`),
    #: is weighed by its GPU requests only.
    gpu_labels: tuple[str, ...] = DEFAULT_GPU_LABELS
    #: Its ``--ignore-daemonsets-utilization`` and ``--ignore-mirror-pods-utilization``
    #: (false by default): DaemonSet pods' / mirror pods' requests are left out of a node's
    #: utilization, and taken out of its allocatable too.
    ignore_daemonsets_utilization: bool = False
    ignore_mirror_pods_utilization: bool = False
    #: ``budgets`` indexed (:meth:`covering`), built with the rules.
    budget_index: BudgetIndex = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "budget_index", BudgetIndex(self.budgets or ()))

    def covering(self, pod: Pod) -> list[DisruptionBudget]:
        """The budgets of ``budgets`` that cover ``pod`` (:meth:`DisruptionBudget.covers`),
        in their order, found through :attr:`budget_index`."""
        budgets = self.budget_index.budgets
        return [budgets[k] for k in self.budget_index.covering(pod)]

    def unweighed(self, pod: Pod) -> bool:
        """Whether the autoscaler leaves ``pod``'s requests out of its node's utilization
        and allocatable (its ``CalculateUtilizationOfResource`` asks each flag in turn: a
        DaemonSet pod that is a mirror pod too is left out by either)."""
        return pod.unweighed(self.ignore_daemonsets_utilization, self.ignore_mirror_pods_utilization)


#: How long the cluster-autoscaler takes a node tainted ``ToBeDeletedByClusterAutoscaler``
#: as being deleted, from the taint's time (seconds; its ``MaxCloudProviderNodeDeletionTime``,
#: ``IsNodeBeingDeleted`` in ``core/scaledown/actuation/delete_in_batch.go``). A node tainted
#: longer ago is a deletion stuck, or a taint left by an autoscaler that stopped (it removes
#: its taints when it starts).
NODE_DELETION_TIME_S = 300.0

#: Seconds past its grace period after which the autoscaler takes a terminating pod as
#: gone (its ``PodLongTerminatingExtraThreshold``), and the grace period a pod that sets
#: none gets (Kubernetes' default).
LONG_TERMINATING_EXTRA_S = 30.0
DEFAULT_GRACE_PERIOD_S = 30


def is_long_terminating(pod: Pod, rules: ScaleDownRules = ScaleDownRules()) -> bool:
    """The autoscaler's ``IsPodLongTerminating`` at ``rules.now``: the pod was deleted
    longer ago than its grace period plus :data:`LONG_TERMINATING_EXTRA_S`. Such a pod
    neither pins its node nor counts toward its utilization."""
    if rules.now is None or pod.deleted is None:
        return False
    grace = DEFAULT_GRACE_PERIOD_S if pod.grace_period_s is None else pod.grace_period_s
    return pod.deleted + grace + LONG_TERMINATING_EXTRA_S < rules.now


def is_expendable(pod: Pod, rules: ScaleDownRules = ScaleDownRules()) -> bool:
    """The cluster-autoscaler's ``IsExpendablePod``: a priority below the cutoff."""
    return pod.priority is not None and pod.priority < rules.expendable_priority_cutoff


def _checked_controller(pod: Pod) -> bool:
    """Whether the autoscaler's ``replicacount`` rule looks ``pod``'s controller up: a
    ReplicationController always; then a DaemonSet pod (:func:`is_daemon_pod`, annotated
    ones too) only if its controller is an ``apps`` DaemonSet (it has no lister for another
    group's, such as OpenKruise's ``apps.kruise.io`` DaemonSet); else a Job or ReplicaSet of
    whatever group (it reads the kind only), and a StatefulSet only of ``apps`` (since
    cluster-autoscaler 1.33 it skips another group's, such as OpenKruise's Advanced
    StatefulSet)."""
    if pod.owner_kind == "ReplicationController":
        return True
    if pod.is_daemonset_pod:
        return pod.owner_kind == "DaemonSet" and pod.owner_group == "apps"
    if pod.owner_kind == "StatefulSet":
        return pod.owner_group == "apps"
    return pod.owner_kind in CHECKED_CONTROLLERS


#: The controllers whose ``spec.replicas`` the autoscaler compares with its
#: ``--min-replica-count``.
REPLICA_COUNTED_CONTROLLERS = frozenset({"ReplicaSet", "ReplicationController"})


def _controller_reason(pod: Pod, rules: ScaleDownRules) -> str | None:
    """The autoscaler's ``replicacount`` rule (on with the default
    ``--skip-nodes-with-custom-controller-pods``): ``pod``'s controller, when
    :func:`_checked_controller` looks it up and its kind was listed, must exist; a
    ReplicaSet or ReplicationController must want at least ``rules.min_replica_count``
    replicas (one with ``spec.replicas`` unset passes)."""
    if rules.controllers is None or not _checked_controller(pod):
        return None
    kind = pod.owner_kind or ""
    if kind in rules.unlisted_controller_kinds:
        return None
    key = (kind, pod.namespace, pod.owner_name or "")
    if key not in rules.controllers:
        return f"controller {kind} {pod.owner_name} not found"
    replicas = rules.controllers[key]
    if kind in REPLICA_COUNTED_CONTROLLERS and replicas is not None and replicas < rules.min_replica_count:
        return (
            f"controller {kind} {pod.owner_name} wants {replicas} replicas, "
            f"under --min-replica-count {rules.min_replica_count}"
        )
    return None


def pin_reason(pod: Pod, rules: ScaleDownRules = ScaleDownRules()) -> str | None:
    """Why the cluster-autoscaler would refuse to remove ``pod``'s node for it, or None, in
    the order of its drainability rules: mirror pods never pin; a pod whose controller
    (one of :data:`CHECKED_CONTROLLERS`, as :func:`_checked_controller` picks) no longer
    exists pins, whatever its annotations, and so does a pod of a ReplicaSet or
    ReplicationController that wants fewer replicas than ``rules.min_replica_count`` (the
    autoscaler's ``replicacount`` rule, checked before the others, when
    ``rules.controllers`` is known: :func:`_controller_reason`); DaemonSet pods never pin
    (:func:`is_daemon_pod`); ``safe-to-evict: "true"`` lifts every rule but the budget's
    (the autoscaler drains through the Eviction API, which refuses a pod while a budget
    covering it allows no disruption; FAQ.md lists "Pods with restrictive
    PodDisruptionBudget" without the annotation's exception); ``"on-completion"`` (which
    holds the node until the pod finishes) pins; then, in the order of the autoscaler's
    blocking rules, whose first names the reason: a pod whose controller is none of
    :data:`MOVABLE_OWNERS` (a bare pod, or a custom controller's); a kube-system pod no
    budget covers (``system_pods_pin``), until it is ``system_pod_disruption_timeout_s``
    old (then nothing pins it: the autoscaler's system rule drains it before its
    not-safe-to-evict and local storage rules are read); ``safe-to-evict: "false"``; a pod
    with local storage (:func:`blocking_local_volumes`, ``local_storage_pins``); a pod
    covered by a budget that allows no disruption now. An expendable pod
    (:func:`is_expendable`) and one terminating for too long (:func:`is_long_terminating`)
    never pin."""
    return pin_reason_with(pod, rules, rules.covering(pod))


def pin_reason_with(pod: Pod, rules: ScaleDownRules, covering: Sequence[DisruptionBudget]) -> str | None:
    """:func:`pin_reason` given the budgets of ``rules`` that cover ``pod``, in their order
    (:meth:`ScaleDownRules.covering`; with their disruptions as they are to be judged: the
    scale-down plan's, once it spent some, :mod:`stickypack.core.drain`)."""
    if pod.is_mirror_pod or is_expendable(pod, rules) or is_long_terminating(pod, rules):
        return None
    controller_reason = _controller_reason(pod, rules)
    if controller_reason is not None:
        return controller_reason
    if is_daemon_pod(pod):
        return None
    budgets = rules.budgets
    exhausted = [b.name for b in covering if b.disruptions_allowed < 1]
    budget_reason = f"PodDisruptionBudget {exhausted[0]} allows no disruption" if exhausted else None
    safe = pod.annotations.get(SAFE_TO_EVICT_ANNOTATION)
    if safe == "true":
        return budget_reason
    if safe == "on-completion":  # an interrupting check, before the blocking ones
        return f"safe-to-evict: {safe}"
    # the blocking rules in the autoscaler's order: replicated, system, not-safe-to-evict,
    # local storage, budget; the first that blocks names the reason
    if pod.owner_kind not in MOVABLE_OWNERS:
        return "no controller" if pod.owner_kind is None else f"controller {pod.owner_kind}"
    if rules.system_pods_pin and budgets is not None and pod.namespace == "kube-system" and not covering:
        # past the timeout the system rule's "drainable" ends the autoscaler's rules: the
        # later ones (not-safe-to-evict, local storage) never see the pod
        return (
            None if _past_system_pod_timeout(pod, rules) else "kube-system pod without a PodDisruptionBudget"
        )
    if safe == "false":
        return f"safe-to-evict: {safe}"
    if rules.local_storage_pins:
        local = blocking_local_volumes(pod)
        if local:
            return f"local storage: {', '.join(local)}"
    return budget_reason


def _past_system_pod_timeout(pod: Pod, rules: ScaleDownRules) -> bool:
    """The autoscaler's ``isBspPassedDisruptionTimeout``: the kube-system pod was created
    longer ago than ``rules.system_pod_disruption_timeout_s`` (False when any is unknown)."""
    timeout = rules.system_pod_disruption_timeout_s
    if timeout is None or rules.now is None or pod.created is None:
        return False
    return rules.now > pod.created + timeout


def pins_node(pod: Pod, rules: ScaleDownRules = ScaleDownRules()) -> bool:
    """Whether :func:`pin_reason` has a reason."""
    return pin_reason(pod, rules) is not None


@dataclass(frozen=True, slots=True)
class NodeReport:
    """A node as the cluster-autoscaler weighs it. ``cpu`` and ``memory``: requested over
    allocatable (fractions; every bound pod counts, DaemonSet and mirror pods too, as the
    autoscaler counts by default); ``utilization`` their max; ``pods``: pods bound to it;
    ``daemon_pods``: how many of those are DaemonSet or mirror pods; ``pinning``: the keys
    (``namespace/name``) of those that keep it from being removed (:func:`pins_node`);
    ``builds``: build pods running on it; ``autoscaler``: ``deleting``
    (``ToBeDeletedByClusterAutoscaler``), ``candidate``
    (``DeletionCandidateOfClusterAutoscaler``) or empty; ``scale_down_disabled``: the node
    carries ``cluster-autoscaler.kubernetes.io/scale-down-disabled: "true"``."""

    node: str
    cpu: float
    memory: float
    utilization: float
    pods: int
    daemon_pods: int
    pinning: tuple[str, ...]
    builds: int
    autoscaler: str
    ready: bool
    unschedulable: bool
    scale_down_disabled: bool = False
    #: :func:`pin_reason` of each pod of ``pinning``, in the same order.
    pin_reasons: tuple[str, ...] = ()
    #: How many of ``pods`` are expendable (:func:`is_expendable`) and not DaemonSet or
    #: mirror pods. Expendable pods are left out of ``cpu``, ``memory`` and the verdict, as
    #: the autoscaler leaves them out.
    expendable_pods: int = 0
    #: How many of ``pods`` (not DaemonSet or mirror pods, not expendable) have been
    #: terminating for too long (:func:`is_long_terminating`): left out as expendable ones are.
    terminating_pods: int = 0
    #: A GPU node's requested GPUs over allocatable, of the first resource of
    #: :data:`~stickypack.core.resources.GPU_RESOURCES` it has (0 while its GPUs are not
    #: allocatable yet), which is then its ``utilization``, as the autoscaler weighs it;
    #: None for a node without GPUs.
    gpu: float | None = None
    #: With DRA weighed (``stickypack inspect --dra``), a node with node-local
    #: ResourceSlices: its most used device pool's utilization (:mod:`stickypack.core.dra`),
    #: which is then its ``utilization`` (unless a GPU resource weighs it first), and that
    #: pool (``driver/pool``); None otherwise.
    dra: float | None = None
    dra_pool: str | None = None
    #: Why the autoscaler cannot weigh the node (an incomplete DRA pool, or a claim of a pod
    #: there not allocated or not found): it then keeps the node (its ``UnexpectedError``);
    #: None when it can.
    dra_error: str | None = None
    #: When the autoscaler set the taint ``autoscaler`` names (Unix seconds, the taint's value
    #: as it writes it: :func:`autoscaler_taint_time`): for ``candidate``, about when it found
    #: the node unneeded, which it counts its ``--scale-down-unneeded-time`` from (and reads
    #: back after a restart); None without such a taint or a value that is no time.
    autoscaler_since: int | None = None
    #: Why the autoscaler cannot compute the utilization of a node it weighs by cpu and
    #: memory (its ``CalculateUtilizationOfResource`` fails: ``no cpu allocatable``, ``no
    #: memory allocatable`` or ``no cpu or memory allocatable``, none or 0 of it, say a Node
    #: whose kubelet has not written its status); since cluster-autoscaler 1.32 it then keeps
    #: the node (``UnexpectedError``). None when it can.
    utilization_error: str | None = None

    def verdict(self, threshold: float, gpu_threshold: float = GPU_UTILIZATION_THRESHOLD) -> str:
        """In the order of the autoscaler's ``Checker.unremovableReasonAndNodeUtilization``
        (``core/scaledown/eligibility/eligibility.go``), whose first reason is the one it
        logs: ``deleting`` (the node carries its ``ToBeDeletedByClusterAutoscaler``
        taint: a deletion in progress, its ``CurrentlyBeingDeleted``, checked first), else
        ``disabled`` (the node opts out of scale-down: its
        ``ScaleDownDisabledAnnotation``, checked before the utilization is computed, so a
        busy node that opts out is ``disabled`` too), else ``incomplete``
        (:attr:`dra_error` or :attr:`utilization_error`: the autoscaler cannot weigh the
        node and keeps it), else ``busy`` (utilization over ``threshold``, or for a GPU node
        ``gpu_threshold``: a node exactly at it is underutilized to cluster-autoscaler
        1.35+, 1.34.3+, 1.33.4+ and 1.32.6+, which compare "at or below"; earlier versions
        took it as busy), else ``pinned`` (held by pods, :func:`pins_node`), ``empty`` (no
        pods but DaemonSet, mirror and expendable pods) or ``removable`` (nothing pins it)."""
        if self.autoscaler == "deleting":
            return "deleting"
        if self.scale_down_disabled:
            return "disabled"
        if self.dra_error is not None or self.utilization_error is not None:
            return "incomplete"
        if self.utilization > (threshold if self.gpu is None else gpu_threshold):
            return "busy"
        if self.pinning:  # a DaemonSet pod whose DaemonSet is gone pins an otherwise empty node
            return "pinned"
        left_out = self.daemon_pods + self.expendable_pods + self.terminating_pods
        return "empty" if self.pods == left_out else "removable"


#: The range of a Go int64, which the autoscaler parses its taints' values into.
_INT64 = range(-(2**63), 2**63)


def autoscaler_taint_time(table: NodeTable, row: int, key: str) -> int | None:
    """The value of the node's taint ``key`` (one the cluster-autoscaler sets:
    ``ToBeDeletedByClusterAutoscaler``, ``DeletionCandidateOfClusterAutoscaler``) read as it
    reads it (its ``GetTaintTime``: a base-10 int64 of Unix seconds), None when the node has
    no such taint or its value is no such number."""
    info = table.info[row]
    for taint in info.taints if info is not None else ():
        if taint.key == key:
            value = taint.value
            digits = value[1:] if value[:1] in ("+", "-") else value
            if not (digits.isascii() and digits.isdigit()):
                return None
            seconds = int(value)
            return seconds if seconds in _INT64 else None
    return None


def _annotation(table: NodeTable, row: int, key: str) -> str | None:
    info = table.info[row]
    return info.annotations.get(key) if info is not None else None


def _requested_share(
    table: NodeTable, row: int, resource: str, left_out: Iterable[Pod], unweighed: Iterable[Pod] = ()
) -> float:
    """Requested over allocatable of ``resource`` on node ``row``, without the requests of
    the pods ``left_out``, and without those of the pods ``unweighed`` on either side (0
    when nothing of it is allocatable)."""
    col = table.rindex[resource]
    taken = sum(p.requests.get(resource, 0) for p in unweighed)
    requested = int(table.requested[row, col]) - sum(p.requests.get(resource, 0) for p in left_out) - taken
    return max(requested, 0) / max(int(table.alloc[row, col]) - taken, 1)


def node_report(
    table: NodeTable,
    pods_by_node: Mapping[str, Iterable[Pod]],
    rules: ScaleDownRules = ScaleDownRules(),
    dra: Mapping[str, NodeDra] | None = None,
) -> list[NodeReport]:
    """One :class:`NodeReport` per node of ``table``, by name; ``pods_by_node``: the pods
    bound to each node (the ones the table's requests count); ``rules``: the autoscaler's
    settings and budgets (:func:`pin_reason`). A GPU node (:attr:`ScaleDownRules.gpu_labels`)
    is weighed by its GPU requests alone, as the autoscaler's ``utilization.Calculate``;
    any other without cpu or memory allocatable it cannot weigh
    (:attr:`NodeReport.utilization_error`).

    ``dra``: the nodes with node-local ResourceSlices (:func:`~stickypack.core.dra.dra_utilization`)
    when DRA is weighed (the autoscaler's ``--enable-dynamic-resource-allocation``), else
    None. In ``utilization.Calculate``'s order: a GPU node weighed by a GPU resource stays
    so; any other node with slices is weighed by its most used pool, and so is a GPU node
    whose GPUs a DRA driver publishes
    (:func:`~stickypack.core.plugins.scaledown.exposes_gpus_via_dra`; without slices, or
    with ``dra`` None, it is weighed by cpu and memory), against the GPU threshold still."""
    active = table.active_indices()
    gpu_cols = gpu_columns(table, active)
    gpu_labelled = table.labelled(rules.gpu_labels)
    out = []
    for k, row in enumerate(active):
        i = int(row)
        name = table.node_names([i])[0]
        out.append(
            _report_one_node(
                table,
                i,
                list(pods_by_node.get(name, ())),
                rules,
                gpu_col=int(gpu_cols[k]) if gpu_cols is not None else -1,
                gpu_labelled=bool(gpu_labelled[i]),
                node_dra=dra.get(name) if dra is not None else None,
            )
        )
    out.sort(key=lambda r: r.node)
    return out


def _report_one_node(
    table: NodeTable,
    row: int,
    pods: Sequence[Pod],
    rules: ScaleDownRules,
    gpu_col: int,
    gpu_labelled: bool,
    node_dra: NodeDra | None,
) -> NodeReport:
    """The :class:`NodeReport` of node ``row`` (:func:`node_report`), given ``pods``, the
    pods bound to it; ``gpu_col``, the column of the GPU resource it has allocatable
    (:func:`~stickypack.core.plugins.scaledown.gpu_columns`; -1: none); ``gpu_labelled``,
    whether it carries one of ``rules.gpu_labels``; ``node_dra``, its DRA reading (None:
    DRA not weighed, or no node-local slices)."""
    counting = _PodCounting.of(pods, rules)
    cpu, memory = (counting.share(table, row, r) for r in (CPU, MEMORY))
    gpu = _gpu_share(table, row, gpu_col, gpu_labelled, counting)
    utilization, node_dra, missing = _weighing(table, row, cpu, memory, gpu, node_dra)
    pinned = sorted((p.key, reason) for p in pods if (reason := pin_reason(p, rules)) is not None)
    autoscaler, taint = _autoscaler_state(table, row)
    return NodeReport(
        node=table.node_names([row])[0],
        cpu=cpu,
        memory=memory,
        utilization=utilization,
        pods=len(pods),
        daemon_pods=sum(1 for p in pods if is_daemon_pod(p)),
        pinning=tuple(key for key, _ in pinned),
        builds=int(table.builds[row]),
        autoscaler=autoscaler,
        ready=bool(table.ready[row]),
        unschedulable=bool(table.unschedulable[row]),
        scale_down_disabled=_annotation(table, row, SCALE_DOWN_DISABLED_ANNOTATION) == "true",
        pin_reasons=tuple(reason for _, reason in pinned),
        expendable_pods=sum(1 for p in counting.expendable if not is_daemon_pod(p)),
        terminating_pods=sum(1 for p in counting.terminating if not is_daemon_pod(p)),
        gpu=gpu,
        dra=None if node_dra is None or node_dra.error else node_dra.utilization,
        dra_pool=None if node_dra is None else node_dra.pool,
        dra_error=None if node_dra is None else node_dra.error,
        autoscaler_since=None if taint is None else autoscaler_taint_time(table, row, taint),
        utilization_error=f"no {' or '.join(missing)} allocatable" if missing else None,
    )


@dataclass(frozen=True, slots=True)
class _PodCounting:
    """How a node's pods count in its utilization as the autoscaler computes it: the pods
    it leaves out, wholly or in part (each list in the pods' order): ``expendable``
    (:func:`is_expendable`: out of its picture); ``terminating``
    (:func:`is_long_terminating`, not expendable); ``unweighed``
    (:meth:`ScaleDownRules.unweighed`, not expendable: requests out of both the node's
    requests and its allocatable); ``left_out``: the expendable pods, then the terminating
    ones not unweighed (requests out of the node's requests only)."""

    expendable: list[Pod]
    terminating: list[Pod]
    unweighed: list[Pod]
    left_out: tuple[Pod, ...]

    @classmethod
    def of(cls, pods: Sequence[Pod], rules: ScaleDownRules) -> _PodCounting:
        expendable = [p for p in pods if is_expendable(p, rules)]
        terminating = [p for p in pods if is_long_terminating(p, rules) and not is_expendable(p, rules)]
        unweighed = [p for p in pods if rules.unweighed(p) and not is_expendable(p, rules)]
        left_out = (*expendable, *(p for p in terminating if not rules.unweighed(p)))
        return cls(expendable, terminating, unweighed, left_out)

    def share(self, table: NodeTable, row: int, resource: str) -> float:
        """Requested over allocatable of ``resource`` on node ``row`` as the autoscaler
        counts them (a fraction): :func:`_requested_share` without these pods."""
        return _requested_share(table, row, resource, self.left_out, self.unweighed)


def _gpu_share(
    table: NodeTable, row: int, gpu_col: int, gpu_labelled: bool, counting: _PodCounting
) -> float | None:
    """Node ``row``'s requested GPUs over allocatable (a fraction) of the resource of column
    ``gpu_col`` (-1: none allocatable), without the pods ``counting`` leaves out; 0.0 for a
    node ``gpu_labelled`` whose GPUs are not allocatable yet (the autoscaler takes it as
    unused); None for a node without GPUs."""
    if gpu_col >= 0:
        return counting.share(table, row, table.resources[gpu_col])
    return 0.0 if gpu_labelled else None


def _weighing(
    table: NodeTable, row: int, cpu: float, memory: float, gpu: float | None, node_dra: NodeDra | None
) -> tuple[float, NodeDra | None, list[str]]:
    """How the autoscaler's ``utilization.Calculate`` weighs node ``row``: its utilization
    (a fraction); the DRA reading that gave it (``node_dra``, or None when the node is not
    weighed by its pools); and, when it is weighed by cpu and memory, those of the two it
    has none of allocatable (then it cannot be weighed). In that order: a GPU node (``gpu``
    not None) by its GPUs, unless a DRA driver publishes them
    (:func:`~stickypack.core.plugins.scaledown.exposes_gpus_via_dra`, whether or not DRA is
    weighed); else a node with ``node_dra`` by its most used pool; else by the higher of
    ``cpu`` and ``memory`` (fractions)."""
    if gpu is not None and not exposes_gpus_via_dra(table, row):
        return gpu, None, []  # weighed by its GPUs: its pools do not count
    if node_dra is not None:
        return node_dra.utilization, node_dra, []
    missing = [r for r in (CPU, MEMORY) if table.alloc[row, table.rindex[r]] <= 0]
    return max(cpu, memory), None, missing


def _autoscaler_state(table: NodeTable, row: int) -> tuple[str, str | None]:
    """:attr:`NodeReport.autoscaler` of node ``row`` and the taint that says it:
    ``deleting`` (``ToBeDeletedByClusterAutoscaler``), else ``candidate``
    (``DeletionCandidateOfClusterAutoscaler``), else ``""`` and None."""
    if table.to_be_deleted[row]:
        return "deleting", TO_BE_DELETED_TAINT
    if table.deletion_candidate[row]:
        return "candidate", DELETION_CANDIDATE_TAINT
    return "", None
