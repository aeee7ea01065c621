"""The cluster-autoscaler's node groups, their minimum sizes, and its cluster-wide minimum
resources: the limits that keep a node it would otherwise remove.

The autoscaler knows a node's group from its cloud provider (a GKE managed instance group,
an EKS Auto Scaling group, an AKS VM scale set); stickypack reads it from the node's labels
(:class:`NodeGroups`). Two of its steps read the groups:

- before its scale-down simulation, it drops the nodes of a group whose size is at or
  under its minimum (``PreFilteringScaleDownNodeProcessor``): they are never candidates
  (their pods are not moved) but stay destinations for the others' pods
  (:meth:`NodeGroups.at_min_size`);
- after it, going through the nodes it found unneeded, empty ones first
  (``RemovableAt``), it keeps a node whose group's size less its deletions in progress is
  at or under the group's minimum (``NodeGroupMinSizeReached``), else one whose removal
  would take the cluster's cores or memory under ``--cores-total`` / ``--memory-total``'s
  minimum (``MinimalResourceLimitExceeded``); each node it lets go counts against its
  group and those totals for the next (:func:`kept_at_limits`).

Sizes here are the nodes of a group in the :class:`~stickypack.core.nodetable.NodeTable`;
the autoscaler reads its cloud provider's target size, which differs while a group scales
up (instances asked for, not registered yet) or nodes register or leave.

Pure: a node table and settings in, masks and names out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from stickypack.core.nodetable import NodeTable

#: Node labels by which the managed Kubernetes services name a node's pool, looked for in
#: this order when no label keys are given: GKE's node pool, an EKS managed node group, an
#: AKS agent pool. GKE's autoscaler works per zone (a node pool is one managed instance group
#: per zone, each a node group with its own minimum: the pool's per-zone minimum); name
#: such groups by the pool and ``topology.kubernetes.io/zone`` (:attr:`NodeGroups.label_keys`).
WELL_KNOWN_NODE_GROUP_LABELS = (
    "cloud.google.com/gke-nodepool",
    "eks.amazonaws.com/nodegroup",
    "kubernetes.azure.com/agentpool",
)

#: The label (value ``virtual-kubelet``) of a virtual-kubelet node, whose resources the
#: autoscaler leaves out of the cluster's totals (its ``VirtualKubeletNodeFilter``).
VIRTUAL_KUBELET_LABEL = "type"

#: Why :func:`kept_at_limits` keeps a node: its group is at its minimum size, or its removal
#: would cross the cluster-wide minimum cores or memory.
MIN_SIZE = "min-size"
RESOURCE_LIMIT = "resource-limit"


@dataclass(frozen=True, slots=True)
class NodeGroups:
    """How to tell a node's group, and each group's minimum size.

    ``label_keys``: node label keys whose values, joined by ``/``, name a node's group (a
    node lacking one of them is in no known group); empty: the first of
    :data:`WELL_KNOWN_NODE_GROUP_LABELS` the node carries names it. ``min_sizes``: group
    name to its minimum size (nodes, >= 0); a group not listed has none (0).

    A node in no known group is taken as before node groups were read: autoscaled, with no
    minimum size (the autoscaler never removes a node outside its node groups,
    ``NotAutoscaled``, but the labels cannot tell such a node from one of a provider whose
    labels are not known here)."""

    label_keys: tuple[str, ...] = ()
    min_sizes: Mapping[str, int] = field(default_factory=dict)

    @property
    def keys(self) -> tuple[str, ...]:
        """The label keys read: ``label_keys``, else :data:`WELL_KNOWN_NODE_GROUP_LABELS`."""
        return self.label_keys or WELL_KNOWN_NODE_GROUP_LABELS

    def name(self, values: Sequence[str | None]) -> str | None:
        """The group named by a node's values of :attr:`keys` (None for a key it lacks)."""
        if self.label_keys:
            return None if None in values else "/".join(v for v in values if v is not None)
        return next((v for v in values if v is not None), None)

    def group_of(self, labels: Mapping[str, str]) -> str | None:
        """The group of a node with ``labels``, or None (no known group)."""
        return self.name([labels.get(key) for key in self.keys])

    def groups(self, table: NodeTable, idx: np.ndarray) -> list[str | None]:
        """The group of each row of ``idx``."""
        codes, values = table.label_codes(self.keys)
        names = [self.name(v) for v in values]
        return [names[c] for c in codes[idx].tolist()]

    def sizes(self, table: NodeTable) -> dict[str, int]:
        """Each known group's number of nodes in ``table``, nodes being deleted included."""
        return _count(self, table, table.active_indices())

    def deleting(self, table: NodeTable) -> dict[str, int]:
        """Each known group's nodes being deleted (tainted ``ToBeDeletedByClusterAutoscaler``:
        the autoscaler's deletions in progress)."""
        idx = table.active_indices()
        return _count(self, table, idx[table.to_be_deleted[idx]])

    def at_min_size(self, table: NodeTable, idx: np.ndarray) -> np.ndarray:
        """Per row of ``idx``: the node is in a group with a minimum size and the group's
        size (:meth:`sizes`) is at or under it, so the autoscaler never takes it as a
        scale-down candidate. All False when no minimum size is given (no scan). The mask
        over all rows is kept in ``table.node_memo`` until a node changes (scorers ask on
        every decision)."""
        if not self.min_sizes:
            return np.zeros(idx.shape[0], dtype=bool)
        kept = table.node_memo.get(_AT_MIN_SIZE)
        if kept is None or kept[0] is not self:
            kept = table.node_memo[_AT_MIN_SIZE] = (self, self._at_min_size_rows(table))
        return kept[1][idx]

    def _at_min_size_rows(self, table: NodeTable) -> np.ndarray:
        """:meth:`at_min_size` over every row of ``table`` (False for a free slot)."""
        codes, values = table.label_codes(self.keys)
        active = table.active_indices()
        per_code = np.bincount(codes[active], minlength=len(values)).tolist()
        names = [self.name(v) for v in values]
        size: dict[str, int] = {}
        for name, n in zip(names, per_code, strict=True):
            if name is not None and n:
                size[name] = size.get(name, 0) + n
        kept = np.zeros(len(names) + 1, dtype=bool)  # the last: code -1, a free slot
        for code, name in enumerate(names):
            if name is not None and name in self.min_sizes:
                kept[code] = size.get(name, 0) <= self.min_sizes[name]
        return kept[codes]


#: :meth:`NodeGroups.at_min_size`'s key in ``NodeTable.node_memo``.
_AT_MIN_SIZE = "nodegroups:at-min-size"


def _count(groups: NodeGroups, table: NodeTable, idx: np.ndarray) -> dict[str, int]:
    out: dict[str, int] = {}
    for name in groups.groups(table, idx):
        if name is not None:
            out[name] = out.get(name, 0) + 1
    return out


@dataclass(frozen=True, slots=True)
class ResourceMinimums:
    """The cluster-autoscaler's cluster-wide minimums: ``--cores-total``'s minimum
    (``cores``, whole cores) and ``--memory-total``'s (given in GiB, held here in bytes:
    ``memory_bytes``). 0: no minimum (its default)."""

    cores: int = 0
    memory_bytes: int = 0


def kept_at_limits(
    table: NodeTable,
    order: Sequence[str],
    groups: NodeGroups,
    capacity: Mapping[str, tuple[int, int]] | None = None,
    minimums: ResourceMinimums = ResourceMinimums(),
) -> dict[str, str]:
    """Which of the nodes ``order`` (names of nodes found removable, in the order the
    autoscaler goes through them: empty ones first) it keeps, and why: :data:`MIN_SIZE`
    or :data:`RESOURCE_LIMIT`; the others it removes.

    As its ``RemovableAt``: a node of a group with a minimum size is kept when the group's
    size (:meth:`NodeGroups.sizes`) less its deletions in progress
    (:meth:`NodeGroups.deleting`) less the nodes let go so far is at or under that minimum.
    Else, with ``minimums``, it is kept when its cores or memory are more than what the
    cluster has above the minimum, less what the nodes let go so far had; ``capacity``:
    each node's ``status.capacity`` as the autoscaler reads it, (cores rounded up, memory
    bytes), over every node of ``table`` but virtual-kubelet ones (a node it does not list
    counts 0). The autoscaler reads the capacity of one node per group for all of its
    nodes: the same for a group of like nodes. A node in no known group is let go as
    before (no minimum size), and counts against the cluster's totals."""
    sizes = groups.sizes(table)
    deleting = groups.deleting(table)
    # how many more nodes each group with a minimum size may lose
    budget = {g: sizes[g] - deleting.get(g, 0) - m for g, m in groups.min_sizes.items() if g in sizes}
    capacity = capacity or {}
    mins = (minimums.cores, minimums.memory_bytes)
    left = [0, 0]  # cores, memory bytes above the minimums
    if any(mins):
        for row in table.active_indices().tolist():
            info = table.info[row]
            if info is None or info.labels.get(VIRTUAL_KUBELET_LABEL) == "virtual-kubelet":
                continue
            cores, memory = capacity.get(info.name, (0, 0))
            left[0] += cores
            left[1] += memory
        left = [max(0, total - low) for total, low in zip(left, mins, strict=True)]
    kept: dict[str, str] = {}
    for name in order:
        info = table.info[table.index[name]]
        group = groups.group_of(info.labels) if info is not None else None
        if group in budget and budget[group] <= 0:
            kept[name] = MIN_SIZE
            continue
        need = capacity.get(name, (0, 0)) if any(mins) else (0, 0)
        if any(low > 0 and n > have for low, n, have in zip(mins, need, left, strict=True)):
            kept[name] = RESOURCE_LIMIT
            continue
        left = [have - n if low > 0 else have for low, n, have in zip(mins, need, left, strict=True)]
        if group in budget:
            budget[group] -= 1
    return kept
