"""Where a node's pods would go: the cluster-autoscaler's scale-down simulation.

A node at or under the autoscaler's utilization threshold that no pod pins is removed only if
its pods fit on the other nodes (its ``NoPlaceToMovePods`` reason otherwise). The
autoscaler checks its candidates one after the other (empty nodes first): for each it
places the node's pods, in order, on another node that passes the scheduler's filters,
keeps those placements for the candidates that follow, and no longer places pods on a node
it has found removable (its ``RemovalSimulator.SimulateNodeRemoval`` and the planner's
loop). :func:`plan_scale_down` does the same on a
:class:`~stickypack.core.nodetable.NodeTable`, with the filters it is given (``stickypack
inspect`` passes kube-scheduler's, the ``default`` policy's), taking the first node that
passes by row where the autoscaler tries the node a like pod went to before (its
``HintingSimulator``), then searches on from the last node it chose. Given the cluster's
DRA devices (:class:`~stickypack.core.dra.DraDevices`, ``inspect --dra``), it also frees
the claims of the pods it moves and allocates them again (with kube-scheduler's allocator
when given one), as the autoscaler's DRA snapshot does.

Pure: a copy of the table is changed, never the caller's, and the DRA devices given are
put back as they were.
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from stickypack.core.dra import DraDevices
from stickypack.core.explain import (
    DisruptionBudget,
    ScaleDownRules,
    is_daemon_pod,
    is_expendable,
    is_long_terminating,
    pin_reason_with,
)
from stickypack.core.framework import FilterPlugin, SchedulingContext
from stickypack.core.nodetable import NodeTable
from stickypack.core.pod import Pod
from stickypack.core.podaffinity import NamespaceLabels, PodsOnNodes, has_inter_pod_rules, pods_on_table_nodes
from stickypack.core.volumes import ClaimVolumes, PersistentVolumesFilter


@dataclass(frozen=True, slots=True)
class ScaleDownPlan:
    """The outcome of :func:`plan_scale_down`. ``removable``: the candidates whose pods
    all found room, in the order they were checked; ``moves``: for each pod of those
    (``namespace/name``), the node it would end on (a pod placed on a candidate found
    removable later moves on: its last node); ``no_room``: for each candidate whose
    pods did not all fit, the first pod that fit nowhere; ``blocked``: for each candidate
    a PodDisruptionBudget keeps once the candidates found removable before it have taken
    the budget's disruptions, the first pod it keeps (``namespace/name``) and why."""

    removable: tuple[str, ...] = ()
    moves: Mapping[str, str] = field(default_factory=dict)
    no_room: Mapping[str, str] = field(default_factory=dict)
    blocked: Mapping[str, tuple[str, str]] = field(default_factory=dict)


#: Rows a first fit filters at a time: most pods fit on one of the first few nodes, and a
#: filter that loops over nodes in Python (NodeAffinity, for a pod with a node selector)
#: then sees a slice, not the whole cluster.
FIRST_FIT_SLICE = 64


def _first_fit(
    pod: Pod,
    table: NodeTable,
    rows: np.ndarray,
    filters: Sequence[FilterPlugin],
    ctx: SchedulingContext,
    on_nodes: PodsOnNodes | None = None,
) -> int | None:
    """The first of ``rows`` that passes every filter and, given ``on_nodes``, its
    inter-pod rules (:meth:`PodsOnNodes.judge`), or None; ``rows`` are filtered
    :data:`FIRST_FIT_SLICE` at a time, which gives the same node as filtering them all at
    once for filters that judge each node by itself (kube-scheduler's do)."""
    allows: Callable[[int], bool] | None = None
    for start in range(0, rows.size, FIRST_FIT_SLICE):
        part = rows[start : start + FIRST_FIT_SLICE]
        for plugin in filters:
            if part.size == 0:
                break
            part = part[plugin.filter(pod, table, part, ctx)]
        if on_nodes is None:
            if part.size:
                return int(part[0])
            continue
        for row in part.tolist():
            if allows is None:
                allows = on_nodes.judge(pod)
            if allows(row):
                return int(row)
    return None


def plan_scale_down(
    table: NodeTable,
    pods_by_node: Mapping[str, Iterable[Pod]],
    candidates: Sequence[str],
    filters: Sequence[FilterPlugin],
    rules: ScaleDownRules | None = None,
    ctx: SchedulingContext | None = None,
    namespace_labels: NamespaceLabels = None,
    claim_volumes: ClaimVolumes | None = None,
    dra: DraDevices | None = None,
) -> ScaleDownPlan:
    """Check ``candidates`` (node names, in the order given; nodes no pod pins) as the
    autoscaler does. ``pods_by_node``: the pods bound to each node, as
    :func:`~stickypack.core.explain.node_report` takes them; ``table`` is not changed (the
    plan moves pods on a copy). In three steps (:func:`_plan`):

    1. The autoscaler's snapshot (:func:`_snapshot_pods`): expendable pods (by ``rules``,
       default :class:`ScaleDownRules`) are left out of the picture, as the autoscaler
       leaves them out of its snapshot; long-terminating pods keep their room (its snapshot
       holds every bound pod not Succeeded or Failed) but are not moved (its drainability
       rules skip them); DaemonSet and mirror pods stay where they are; every other pod of
       a node is one it moves.
    2. Its deletions in progress (:meth:`_Simulation.place_deletions_in_progress`): before
       any candidate, the pods of the nodes being deleted (``ToBeDeletedByClusterAutoscaler``)
       are placed as a candidate's are (3), those that fit nowhere left out, and such a
       node is never judged.
    3. The candidates, one after the other (:func:`_check_candidates`): every pod a
       candidate moves is placed, one by one, on the first node (by row) that is neither
       the candidate, nor a candidate found removable, nor being deleted, and that passes
       every filter of ``filters`` with the placements so far (each filter must judge each
       node by itself, as kube-scheduler's do: the nodes are filtered a slice at a time,
       :func:`_first_fit`). If all fit, the candidate is removable and its placements stay
       for the next candidates; else nothing of it is kept
       (:meth:`_Simulation.try_remove_node`).

    ``rules.budgets``: each candidate found removable takes one disruption of every budget
    for each of its pods the budget covers (the pods it moves), as the autoscaler's
    ``RemainingPdbTracker`` does within one loop; a later candidate with a pod that
    :func:`~stickypack.core.explain.pin_reason` then finds held by a budget left without
    disruptions is kept (``blocked``, the autoscaler's ``NotEnoughPdb``) before its pods
    are placed.

    When some pod has required pod (anti-)affinity terms, host ports or ``DoNotSchedule``
    topology spread constraints, each placement also passes kube-scheduler's
    InterPodAffinity, NodePorts and PodTopologySpread filters against the pods on the nodes
    at that point of the plan (:class:`~stickypack.core.podaffinity.PodsOnNodes`: every pod
    but expendable ones, DaemonSet and long-terminating pods included, the pods moved so
    far where they went; while a candidate's pods are placed, the candidate is a copy of it
    tainted ``ToBeDeletedByClusterAutoscaler`` without pods, still a topology domain, and
    once found removable it leaves the picture with its DaemonSet pods, as the autoscaler's
    simulation does since kubernetes/autoscaler#9288, :meth:`PodsOnNodes.drain_node`);
    ``namespace_labels`` (namespace to its labels) serve the terms' ``namespaceSelector``
    (None: unknown, such a selector then selects every namespace).

    ``claim_volumes`` (the cluster's claims and the placement of the volumes they are bound
    to, :data:`~stickypack.core.volumes.ClaimVolumes`): each placement also passes
    kube-scheduler's VolumeBinding and VolumeZone filters for the pod's claims
    (:class:`~stickypack.core.volumes.PersistentVolumesFilter`, after ``filters``); None:
    unknown, not checked.

    ``dra`` (the cluster's DRA devices and claims, :class:`~stickypack.core.dra.DraDevices`,
    as the autoscaler's removal simulation sees them with
    ``--enable-dynamic-resource-allocation``): moving a candidate's pods first releases
    their ResourceClaims (a claim no pod uses any more frees its node-local devices), and
    each placement also passes kube-scheduler's DynamicResources filter as modelled there
    (:class:`DevicesFilter`, after the others): a pod whose claim still holds node-local
    devices (another pod that stays uses it) goes only to that claim's node, one whose
    released claims held node-local devices only to a node where they can be allocated
    again (by kube-scheduler's allocator when ``dra`` has one, else as many free devices of
    each driver), whose devices it then holds (later placements see them taken; a
    reverted candidate gives them back). None: DRA off, a pod's claims constrain
    nothing (as before, and as with claims on devices that are not node-local). ``dra`` is
    left as it was given."""
    rules = rules if rules is not None else ScaleDownRules()
    if claim_volumes is not None:
        filters = [*filters, PersistentVolumesFilter(claim_volumes)]
    if dra is not None:
        filters = [*filters, DevicesFilter(dra)]
        start = dra.mark()
        try:
            return _plan(table, pods_by_node, candidates, filters, rules, ctx, namespace_labels, dra)
        finally:
            dra.rollback(start)  # the caller's devices as they were
    return _plan(table, pods_by_node, candidates, filters, rules, ctx, namespace_labels, None)


def _plan(
    table: NodeTable,
    pods_by_node: Mapping[str, Iterable[Pod]],
    candidates: Sequence[str],
    filters: Sequence[FilterPlugin],
    rules: ScaleDownRules,
    ctx: SchedulingContext | None,
    namespace_labels: NamespaceLabels,
    dra: DraDevices | None,
) -> ScaleDownPlan:
    """:func:`plan_scale_down` with its filters complete, step by step."""
    sim = _Simulation(copy.deepcopy(table), filters, ctx if ctx is not None else SchedulingContext(), dra)
    planned, staying, inter_pod_rules = _snapshot_pods(sim.table, pods_by_node, rules)
    # where no pod has inter-pod terms, host ports or spread constraints those filters pass
    # every node: skip them
    if inter_pod_rules:
        sim.on_nodes = _pods_on_nodes(sim.table, planned, staying, namespace_labels)
    sim.place_deletions_in_progress(planned)
    return _check_candidates(sim, planned, candidates, rules)


def _snapshot_pods(
    table: NodeTable, pods_by_node: Mapping[str, Iterable[Pod]], rules: ScaleDownRules
) -> tuple[dict[str, list[Pod]], list[tuple[str, Pod]], bool]:
    """The pods of ``pods_by_node`` as the autoscaler's snapshot holds them: its expendable
    pods (:func:`~stickypack.core.explain.is_expendable`) are taken off ``table`` (changed)
    and left out; of the others, the pods each node would move (``planned``, by node name;
    the plan adds the pods placed there) and the pods that stay (``staying``, with their
    node's name: DaemonSet, mirror and long-terminating pods); and whether any of those
    has inter-pod rules (:func:`~stickypack.core.podaffinity.has_inter_pod_rules`)."""
    planned: dict[str, list[Pod]] = {}
    staying: list[tuple[str, Pod]] = []
    inter_pod_rules = False
    for name, pods in pods_by_node.items():
        for pod in pods:
            if is_expendable(pod, rules):
                if name in table.index:
                    table.remove_pod(table.index[name], pod)
                continue
            inter_pod_rules = inter_pod_rules or has_inter_pod_rules(pod)
            if not is_daemon_pod(pod) and not is_long_terminating(pod, rules):
                planned.setdefault(name, []).append(pod)
            else:
                staying.append((name, pod))
    return planned, staying, inter_pod_rules


def _check_candidates(
    sim: _Simulation, planned: dict[str, list[Pod]], candidates: Sequence[str], rules: ScaleDownRules
) -> ScaleDownPlan:
    """The autoscaler's loop over ``candidates`` (node names, in order) on ``sim``: a node
    being deleted is skipped; a candidate a disruption budget now holds is kept
    (``blocked``, :class:`_Budgets`); else it is removable if every pod it moves
    (``planned``) finds a node (:meth:`_Simulation.try_remove_node`): it then spends the
    budgets of those pods, and each pod is one the node it went to would move
    (``planned``, changed); else it is kept with the first pod that found none
    (``no_room``)."""
    removable: list[str] = []
    moves: dict[str, str] = {}
    no_room: dict[str, str] = {}
    held_by_budget: dict[str, tuple[str, str]] = {}
    budgets = _Budgets(rules)
    for name in candidates:
        row = sim.table.index[name]
        if sim.table.to_be_deleted[row]:
            continue
        pods = planned.get(name, [])
        held = budgets.holding(pods)
        if held is not None:  # the autoscaler's drainability rules, before any placement
            held_by_budget[name] = held
            continue
        placed, unplaced = sim.try_remove_node(row, pods)
        if unplaced is not None:
            no_room[name] = unplaced
            continue
        removable.append(name)
        budgets.take(pods)
        planned[name] = []
        for pod, dest in placed:
            dest_name = sim.node_name(dest)
            planned.setdefault(dest_name, []).append(pod)
            moves[pod.key] = dest_name
    return ScaleDownPlan(tuple(removable), moves, no_room, held_by_budget)


class _Simulation:
    """The cluster as a scale-down plan changes it: ``table``, a copy of the caller's that
    the plan's placements change; ``gone``, per row, the candidates found removable (no pod
    goes there); ``on_nodes``, the pods on each node for the inter-pod rules (None: no pod
    has any, :func:`_pods_on_nodes`); ``dra``, the DRA devices (None: DRA off). Each
    placement is the first fit (:func:`_first_fit`) by ``filters`` with ``ctx``."""

    def __init__(
        self,
        table: NodeTable,
        filters: Sequence[FilterPlugin],
        ctx: SchedulingContext,
        dra: DraDevices | None,
    ) -> None:
        self.table = table
        self.filters = filters
        self.ctx = ctx
        self.dra = dra
        self.gone = np.zeros(table.alloc.shape[0], dtype=bool)
        self.on_nodes: PodsOnNodes | None = None

    def node_name(self, row: int) -> str:
        return self.table.node_names([row])[0]

    def first_fit(self, pod: Pod, rows: np.ndarray) -> int | None:
        """The first of ``rows`` where ``pod`` fits now (:func:`_first_fit`), or None."""
        return _first_fit(pod, self.table, rows, self.filters, self.ctx, self.on_nodes)

    def bind(self, row: int, pod: Pod) -> None:
        """Put ``pod`` on node ``row`` in the plan (its resources, its pod rules and, with
        ``dra``, the devices its claims take there)."""
        self.table.add_pod(row, pod)
        if self.on_nodes is not None:
            self.on_nodes.add(row, pod)
        if self.dra is not None and self.dra.follows(pod):
            info = self.table.info[row]
            self.dra.place(pod, self.node_name(row), info.labels if info is not None else {})

    def unbind(self, row: int, pod: Pod) -> None:
        """Undo :meth:`bind` but for its devices (:meth:`DraDevices.rollback` gives them
        back; the deletions in progress :meth:`DraDevices.release` them)."""
        self.table.remove_pod(row, pod)
        if self.on_nodes is not None:
            self.on_nodes.remove(row, pod)

    def place_deletions_in_progress(self, planned: dict[str, list[Pod]]) -> None:
        """The autoscaler's deletions in progress: the pods each node being deleted would
        move (``planned``, by node name) are taken off it and placed, one by one, on the
        first node not being deleted where they fit (one that fits nowhere is left out);
        ``planned`` then has none for those nodes, and each pod placed among those of its
        new node."""
        table = self.table
        for row in [int(r) for r in table.active_indices() if table.to_be_deleted[r]]:
            leaving = planned.pop(self.node_name(row), [])
            for pod in leaving:
                self.unbind(row, pod)
            if self.dra is not None:
                self.dra.release(leaving)
            for pod in leaving:
                idx = table.active_indices()
                dest = self.first_fit(pod, idx[~table.to_be_deleted[idx]])
                if dest is not None:
                    self.bind(dest, pod)
                    planned.setdefault(self.node_name(dest), []).append(pod)

    def try_remove_node(self, row: int, pods: Sequence[Pod]) -> tuple[list[tuple[Pod, int]], str | None]:
        """The autoscaler's removal of candidate ``row`` simulated: ``pods`` (those it
        moves) are taken off it and placed, in order, each on the first node that is not
        the candidate, not ``gone`` and not being deleted where it fits. When all fit, the
        node is ``gone`` and the placements stay: each pod with its new row, and None.
        Else every change is undone: no placement, and the key of the first pod that fit
        nowhere."""
        table, on_nodes, dra = self.table, self.on_nodes, self.dra
        for pod in pods:
            table.remove_pod(row, pod)
        # the autoscaler simulates a candidate's removal on a tainted copy of it without pods
        drained = on_nodes.drain_node(row) if on_nodes is not None else []
        devices = dra.mark() if dra is not None else 0
        if dra is not None:
            dra.release(pods)  # its pods unscheduled first: their claims' devices freed
        placed: list[tuple[Pod, int]] = []
        for pod in pods:
            idx = table.active_indices()
            dest = self.first_fit(pod, idx[(idx != row) & ~self.gone[idx] & ~table.to_be_deleted[idx]])
            if dest is None:  # revert: the candidate keeps its pods
                for moved, at in placed:
                    self.unbind(at, moved)
                for kept in pods:
                    table.add_pod(row, kept)
                if on_nodes is not None:
                    on_nodes.restore_node(row, drained)
                if dra is not None:
                    dra.rollback(devices)
                return [], pod.key
            self.bind(dest, pod)
            placed.append((pod, dest))
        if on_nodes is not None:
            on_nodes.delete_node(row)  # and then drops it from its snapshot
        self.gone[row] = True
        return placed, None


class _Budgets:
    """The PodDisruptionBudgets of ``rules`` as a scale-down loop spends them: each pod a
    removable candidate moves takes one disruption of every budget covering it. Which
    budgets cover a pod is looked up once per pod (:class:`~stickypack.core.explain.BudgetIndex`)
    and kept for the plan, whose pods do not change."""

    def __init__(self, rules: ScaleDownRules) -> None:
        self.rules = rules
        self.index = rules.budget_index
        self.budgets: tuple[DisruptionBudget, ...] = self.index.budgets
        self.taken = [0] * len(self.budgets)
        #: per pod (by identity; the pod kept so its id stays its own): its budgets' positions
        self._covering: dict[int, tuple[Pod, tuple[int, ...]]] = {}

    def covering(self, pod: Pod) -> tuple[int, ...]:
        known = self._covering.get(id(pod))
        if known is not None and known[0] is pod:
            return known[1]
        positions = self.index.covering(pod)
        self._covering[id(pod)] = (pod, positions)
        return positions

    def take(self, pods: Iterable[Pod]) -> None:
        if not self.budgets:
            return
        for pod in pods:
            for k in self.covering(pod):
                self.taken[k] += 1

    def holding(self, pods: Iterable[Pod]) -> tuple[str, str] | None:
        """The first of ``pods`` a budget holds now that disruptions were taken (and did
        not before), and why; None when none is held (or none was taken)."""
        budgets, taken = self.budgets, self.taken
        spent = {k for k, n in enumerate(taken) if n and budgets[k].disruptions_allowed - n < 1}
        if not spent:
            return None
        for pod in pods:
            positions = self.covering(pod)
            first = next((k for k in positions if k in spent), None)
            if first is None:
                continue
            before = [budgets[k] for k in positions]
            now = [
                dataclasses.replace(budgets[k], disruptions_allowed=budgets[k].disruptions_allowed - taken[k])
                if taken[k]
                else budgets[k]
                for k in positions
            ]
            # held now (the budget rule reaches the pod), and not before
            if (
                pin_reason_with(pod, self.rules, now) is not None
                and pin_reason_with(pod, self.rules, before) is None
            ):
                budget = budgets[first]
                why = f"its disruptions ({budget.disruptions_allowed}) go to nodes removed before"
                return pod.key, f"PodDisruptionBudget {budget.name}: {why}"
        return None


def _pods_on_nodes(
    table: NodeTable,
    planned: Mapping[str, Sequence[Pod]],
    staying: Sequence[tuple[str, Pod]],
    namespace_labels: NamespaceLabels,
) -> PodsOnNodes:
    """The pods on each node of ``table`` (those of nodes it does not hold left out, as the
    autoscaler's snapshot has no such node), with the nodes' labels, names and taints:
    ``planned`` then ``staying`` (:func:`~stickypack.core.podaffinity.pods_on_table_nodes`)."""
    moved = ((name, pod) for name, pods in planned.items() for pod in pods)
    return pods_on_table_nodes(table, itertools.chain(moved, staying), namespace_labels)


class DevicesFilter(FilterPlugin):
    """kube-scheduler's DynamicResources filter, as :class:`~stickypack.core.dra.DraDevices`
    models it for the scale-down plan: a pod whose claims it follows
    (:meth:`~stickypack.core.dra.DraDevices.follows`) passes the nodes it
    :meth:`~stickypack.core.dra.DraDevices.allows`; any other pod passes every node. Not one
    of a policy's plugins: :func:`plan_scale_down` adds it when given ``dra``.

    With the allocator (:attr:`~stickypack.core.dra.DraDevices.allocates`), a pod whose
    released claims are allocated again asks ``allows`` node by node, but for the nodes
    without a free device when that rules them out
    (:meth:`~stickypack.core.dra.DraDevices.needs_a_free_device`; each row's
    :meth:`~stickypack.core.dra.DraDevices.free_on` kept in a column as below). Without, the same
    answers as asking ``allows`` node by node, in numpy: per driver, each row's
    free devices (:meth:`~stickypack.core.dra.DraDevices.free_count`) are kept in a column
    of the table's rows, brought up to date from the devices' changes at each call; only
    rows whose pools share counters are asked one by one. One filter serves one table."""

    name = "DynamicResources"

    def __init__(self, devices: DraDevices) -> None:
        self.devices = devices
        self._table: NodeTable | None = None
        #: per driver: free devices per row, and the rows only ``allows`` can judge
        self._columns: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        #: free devices of every driver per row (:meth:`~stickypack.core.dra.DraDevices.free_on`)
        self._free: np.ndarray | None = None

    def filter(self, pod: Pod, table: NodeTable, idx: np.ndarray, ctx: SchedulingContext) -> np.ndarray:
        devices = self.devices
        if not devices.follows(pod):
            return np.ones(idx.shape[0], dtype=bool)
        req = devices.requirement(pod)
        if req is None:
            return np.zeros(idx.shape[0], dtype=bool)
        mask = np.ones(idx.shape[0], dtype=bool)
        if req.pinned is not None:
            mask &= idx == table.index.get(req.pinned, -1)
        if not req.need:
            return mask
        if devices.allocates:  # the allocator judges each node by its devices and selectors
            if devices.needs_a_free_device(pod):  # not on a node without one: skipped sooner
                self._update(table)
                mask &= self._free_column(table)[idx] > 0
            for i in np.flatnonzero(mask).tolist():
                info = table.info[int(idx[i])]
                if info is None:
                    mask[i] = False
                    continue
                mask[i] = devices.allows(pod, info.name, info.labels)
            return mask
        self._update(table)
        ask = np.zeros(idx.shape[0], dtype=bool)
        for driver, count in req.need.items():
            free, counted = self._column(table, driver)
            ask |= counted[idx]
            mask &= (free[idx] >= count) | counted[idx]
        for i in np.flatnonzero(mask & ask).tolist():
            mask[i] = devices.allows(pod, table.node_names([int(idx[i])])[0])
        return mask

    def _update(self, table: NodeTable) -> None:
        """Start over for a new table; read again the rows whose devices changed."""
        if table is not self._table:
            self._table, self._columns, self._free = table, {}, None
            self.devices.take_changes()
            return
        for node, driver in self.devices.take_changes():
            row = table.index.get(node)
            if self._free is not None and row is not None:
                self._free[row] = self.devices.free_on(node)
            column = self._columns.get(driver)
            if column is not None and row is not None:
                self._set(column, row, self.devices.free_count(node, driver))

    def _free_column(self, table: NodeTable) -> np.ndarray:
        if self._free is None:
            self._free = np.zeros(table.alloc.shape[0], dtype=np.int64)
            for node, row in table.index.items():
                self._free[row] = self.devices.free_on(node)
        return self._free

    def _column(self, table: NodeTable, driver: str) -> tuple[np.ndarray, np.ndarray]:
        column = self._columns.get(driver)
        if column is None:
            rows = table.alloc.shape[0]
            column = self._columns[driver] = (np.zeros(rows, dtype=np.int64), np.zeros(rows, dtype=bool))
            for node in self.devices.nodes_with(driver):
                row = table.index.get(node)
                if row is not None:
                    self._set(column, row, self.devices.free_count(node, driver))
        return column

    @staticmethod
    def _set(column: tuple[np.ndarray, np.ndarray], row: int, free: int | None) -> None:
        column[0][row] = 0 if free is None else free
        column[1][row] = free is None
