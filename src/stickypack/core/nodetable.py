"""``NodeTable``: the cluster's nodes as columns of integers.

One row per node slot, one column per resource. Scorers read whole columns with numpy, so
scoring a thousand nodes is a handful of vector operations. Adding or removing a pod touches
one row (O(1)); removing a node frees its slot for reuse (O(1)).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from stickypack.core.labels import (
    DELETION_CANDIDATE_TAINT,
    NO_EXECUTE,
    NO_SCHEDULE,
    PREFER_NO_SCHEDULE,
    TO_BE_DELETED_TAINT,
    Taint,
)
from stickypack.core.pod import Pod
from stickypack.core.resources import CPU, MAX_AMOUNT, MEMORY, PODS

_I64 = np.int64

ZONE_LABEL = "topology.kubernetes.io/zone"
REGION_LABEL = "topology.kubernetes.io/region"
#: The deprecated labels, which kube-scheduler's node tree reads first when a node has them.
BETA_ZONE_LABEL = "failure-domain.beta.kubernetes.io/zone"
BETA_REGION_LABEL = "failure-domain.beta.kubernetes.io/region"


def zone_key(labels: Mapping[str, str]) -> str:
    """The zone kube-scheduler's node tree files a node under (``GetZoneKey``): region and
    zone from the beta labels if the node has them, else from the ``topology.kubernetes.io``
    ones; ``""`` when both are empty."""
    zone = labels[BETA_ZONE_LABEL] if BETA_ZONE_LABEL in labels else labels.get(ZONE_LABEL, "")
    region = labels[BETA_REGION_LABEL] if BETA_REGION_LABEL in labels else labels.get(REGION_LABEL, "")
    if not region and not zone:
        return ""
    return f"{region}:\x00:{zone}"


@dataclass(frozen=True, slots=True)
class NodeInfo:
    """A node's static description (what the API's Node object says)."""

    name: str
    allocatable: Mapping[str, int]
    labels: Mapping[str, str]
    taints: tuple[Taint, ...]
    annotations: Mapping[str, str]


class UnknownNode(KeyError):
    """A node name the table does not hold."""


class NodeTable:
    """Allocatable and requested resources per node, plus scheduling flags.

    Units: cpu millicores, memory bytes, ``pods`` a count, extended resources their own unit.
    ``requested`` holds the sum of the real requests of the pods bound to each node (what
    NodeResourcesFit's filter compares), ``nonzero`` the scoring requests (cpu, memory) with
    kube-scheduler's defaults for containers that set none. ``builds`` counts running build
    pods (pods with a ``binder-repo`` annotation) per node, for bounded-load placement;
    ``build_starts`` counts every build pod ever bound to the node since it joined the table.
    ``daemonset_requested`` and ``mirror_requested`` hold the part of ``requested`` that
    DaemonSet pods (:attr:`Pod.is_daemonset_pod`) and the other mirror pods
    (:attr:`Pod.is_mirror_pod`) make up, ``daemonset_mirror_requested`` the part of
    ``daemonset_requested`` of the pods that are both: what the cluster-autoscaler leaves
    out of a node's utilization with ``--ignore-daemonsets-utilization`` /
    ``--ignore-mirror-pods-utilization`` (:meth:`unweighed_requested`).
    ``extra`` holds float columns an adapter may maintain (the simulator keeps ``expiry``,
    the latest end time of a node's pods, for the lifetime-aware oracle).

    ``images``: per row, the images the node lists (``status.images``: each name, tag or
    digest, to the image's size in bytes); ``image_rows``: per image name, the rows that
    list it and its size there, so ImageLocality finds an image's nodes without a scan;
    ``image_size``: per image name, the one size ImageLocality counts on every node, as
    kube-scheduler's cache keeps it: the size given by the first row to list the name, kept
    while any row lists it (nodes that list one name with different sizes all count the
    first's; a node update re-lists its images, so a name only it lists takes its new size).

    Every bound pod that is not a build pod, a DaemonSet's pod or a mirror pod and has a
    creation time (``Pod.created``, seconds) is also listed with its row and that time
    (:meth:`pod_ages`), so a scorer can forecast when a node will empty (``DrainForecast``).
    """

    def __init__(self, resources: Iterable[str] = (CPU, MEMORY, PODS), capacity: int = 64) -> None:
        self.resources: list[str] = list(dict.fromkeys([CPU, MEMORY, PODS, *resources]))
        self.rindex: dict[str, int] = {r: i for i, r in enumerate(self.resources)}
        cap = max(capacity, 1)
        nres = len(self.resources)
        self.alloc = np.zeros((cap, nres), dtype=_I64)
        self.requested = np.zeros((cap, nres), dtype=_I64)
        self.daemonset_requested = np.zeros((cap, nres), dtype=_I64)
        self.mirror_requested = np.zeros((cap, nres), dtype=_I64)
        self.daemonset_mirror_requested = np.zeros((cap, nres), dtype=_I64)
        self.nonzero = np.zeros((cap, 2), dtype=_I64)
        self.builds = np.zeros(cap, dtype=_I64)
        self.build_starts = np.zeros(cap, dtype=_I64)
        self.active = np.zeros(cap, dtype=bool)
        self.ready = np.zeros(cap, dtype=bool)
        self.unschedulable = np.zeros(cap, dtype=bool)
        self.hard_tainted = np.zeros(cap, dtype=bool)
        self.soft_tainted = np.zeros(cap, dtype=bool)
        self.to_be_deleted = np.zeros(cap, dtype=bool)
        self.deletion_candidate = np.zeros(cap, dtype=bool)
        self.created = np.zeros(cap, dtype=np.float64)
        #: Per row, when the node was filed in its zone of kube-scheduler's node tree (a
        #: count of filings): its place in the zone's list (:meth:`scheduler_order`).
        self.filed = np.zeros(cap, dtype=_I64)
        self._filings = 0
        self._zone_of: dict[int, str] = {}  # row -> its zone key in the node tree
        #: Zone key -> (when it joined the tree's list of zones, its node count); a zone
        #: leaves the list when its last node goes, and joins at its end when one comes back.
        self._zones: dict[str, tuple[int, int]] = {}
        #: :meth:`scheduler_order` as last listed, kept until a node is added or removed.
        self._scheduler_order: np.ndarray | None = None
        self.extra: dict[str, np.ndarray] = {}
        self.names: list[str | None] = [None] * cap
        self.info: list[NodeInfo | None] = [None] * cap
        self.images: list[dict[str, int]] = [{} for _ in range(cap)]
        self.image_rows: dict[str, dict[int, int]] = {}
        self.image_size: dict[str, int] = {}
        self.index: dict[str, int] = {}
        self._free: list[int] = list(range(cap - 1, -1, -1))
        self._active_idx: np.ndarray | None = None
        self._labelled: dict[tuple[str, ...], np.ndarray] = {}
        #: Values derived from the nodes alone (their labels, which nodes there are), by a
        #: key of the deriving code's choosing: cleared whenever a node is added, changed or
        #: removed, so a scorer can keep what it reads of the nodes on every decision.
        self.node_memo: dict[str, Any] = {}
        # label_codes: per label keys, each row's code, the values of each code, their codes
        self._label_codes: dict[
            tuple[str, ...],
            tuple[np.ndarray, list[tuple[str | None, ...]], dict[tuple[str | None, ...], int]],
        ] = {}
        # Timed pods, one entry per (row, pod key): row (-1 when free), creation time, and
        # how many times it was added (an adapter may count a pod twice for a moment).
        self._t_row = np.full(64, -1, dtype=_I64)
        self._t_created = np.zeros(64, dtype=np.float64)
        self._t_refs = np.zeros(64, dtype=_I64)
        self._t_keys: list[tuple[int, str] | None] = [None] * 64
        self._t_index: dict[tuple[int, str], int] = {}
        self._t_free: list[int] = list(range(63, -1, -1))

    # ---- nodes -------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.index)

    def __contains__(self, name: object) -> bool:
        return name in self.index

    def slot(self, name: str) -> int:
        """Row of node ``name``; raises :class:`UnknownNode`."""
        try:
            return self.index[name]
        except KeyError:
            raise UnknownNode(name) from None

    def active_indices(self) -> np.ndarray:
        """Rows of all nodes, ascending (cached until a node is added or removed)."""
        if self._active_idx is None:
            self._active_idx = np.flatnonzero(self.active)
        return self._active_idx

    def upsert_node(
        self,
        name: str,
        allocatable: Mapping[str, int],
        *,
        labels: Mapping[str, str] | None = None,
        taints: Iterable[Taint] = (),
        annotations: Mapping[str, str] | None = None,
        ready: bool = True,
        unschedulable: bool = False,
        created: float | None = None,
        images: Mapping[str, int] | None = None,
    ) -> int:
        """Add node ``name`` or replace its description; its pods' requests are kept.

        ``created``: the node's creation time in seconds (``metadata.creationTimestamp``);
        kept from before when ``None``, and 0 (the oldest possible) for a new node.
        ``images``: image name -> size in bytes, as the node lists them; kept from before
        when ``None``, none for a new node.
        """
        for image, size in (images or {}).items():
            if not isinstance(size, int | np.integer) or not 0 <= size <= MAX_AMOUNT:
                raise ValueError(f"node {name}: image {image} size must be an integer in 0..{MAX_AMOUNT}")
        for rname, amount in allocatable.items():  # checked first: no half-registered node
            if not isinstance(amount, int | np.integer) or not 0 <= amount <= MAX_AMOUNT:
                raise ValueError(f"node {name}: allocatable {rname} must be an integer in 0..{MAX_AMOUNT}")
        self.node_memo.clear()
        i = self.index.get(name)
        if i is None:
            if not self._free:
                self._grow()
            i = self._free.pop()
            self.index[name] = i
            self.names[i] = name
            self._scheduler_order = None
            self.active[i] = True
            self._clear_pod_counts(i)
            self.build_starts[i] = 0
            self.created[i] = 0.0  # not a removed node's time, when none is given
            for col in self.extra.values():
                col[i] = 0
            self._active_idx = None
        lab = dict(labels or {})
        zone = zone_key(lab)
        if self._zone_of.get(i) != zone:  # new, or moved to another zone: filed at the end of its list
            self._unfile(i)
            self._file(i, zone)
        for rname in allocatable:
            self.ensure_resource(rname)
        self.alloc[i] = 0
        for rname, amount in allocatable.items():
            self.alloc[i, self.rindex[rname]] = amount
        for keys, mask in self._labelled.items():
            mask[i] = any(key in lab for key in keys)
        for keys, found in self._label_codes.items():
            self._set_label_code(found, keys, i, lab)
        taints = tuple(taints)
        self.info[i] = NodeInfo(name, dict(allocatable), lab, taints, dict(annotations or {}))
        self.ready[i] = ready
        self.unschedulable[i] = unschedulable
        if created is not None:
            self.created[i] = created
        if images is not None:
            self.set_images(i, images)
        self.hard_tainted[i] = any(t.effect in (NO_SCHEDULE, NO_EXECUTE) for t in taints)
        self.soft_tainted[i] = any(t.effect == PREFER_NO_SCHEDULE for t in taints)
        self.to_be_deleted[i] = any(t.key == TO_BE_DELETED_TAINT for t in taints)
        self.deletion_candidate[i] = any(t.key == DELETION_CANDIDATE_TAINT for t in taints)
        return i

    def set_taints(self, name: str, taints: Iterable[Taint]) -> None:
        """Replace the taints of node ``name``."""
        info = self.info[self.slot(name)]
        assert info is not None
        self.upsert_node(
            name,
            info.allocatable,
            labels=info.labels,
            taints=taints,
            annotations=info.annotations,
            ready=bool(self.ready[self.index[name]]),
            unschedulable=bool(self.unschedulable[self.index[name]]),
        )

    def _clear_pod_counts(self, i: int) -> None:
        """Row ``i`` counts no pod: its requests (all, DaemonSet and mirror pods', non-zero)
        and running builds are 0. For a row taken for a new node and a row freed."""
        self.requested[i] = 0
        self.daemonset_requested[i] = 0
        self.mirror_requested[i] = 0
        self.daemonset_mirror_requested[i] = 0
        self.nonzero[i] = 0
        self.builds[i] = 0

    def remove_node(self, name: str) -> None:
        """Forget node ``name`` (its pods go with it)."""
        i = self.slot(name)
        self.node_memo.clear()
        self._scheduler_order = None
        del self.index[name]
        self.names[i] = None
        self.info[i] = None
        self.active[i] = False
        self.ready[i] = False
        self.alloc[i] = 0
        self._clear_pod_counts(i)
        self.set_images(i, {})
        self._unfile(i)
        for e in np.flatnonzero(self._t_row == i).tolist():
            self._t_release(e)
        self._free.append(i)
        self._active_idx = None
        for mask in self._labelled.values():
            mask[i] = False
        for codes, _, _ in self._label_codes.values():
            codes[i] = -1

    def _file(self, i: int, zone: str) -> None:
        """File row ``i`` at the end of ``zone``'s list in kube-scheduler's node tree."""
        self._filings += 1
        joined, count = self._zones.get(zone, (self._filings, 0))
        self._zones[zone] = (joined, count + 1)
        self._zone_of[i] = zone
        self.filed[i] = self._filings

    def _unfile(self, i: int) -> None:
        """Take row ``i`` out of its zone's list; an emptied zone leaves the list of zones."""
        zone = self._zone_of.pop(i, None)
        if zone is None:
            return
        joined, count = self._zones[zone]
        if count == 1:
            del self._zones[zone]
        else:
            self._zones[zone] = (joined, count - 1)

    def scheduler_order(self) -> np.ndarray:
        """The rows of all nodes in the order kube-scheduler's snapshot lists them (its node
        tree's ``list``): the first node of each zone, zones in the order they joined, then
        the second of each, and so on; a zone's nodes in the order they were added to it (a
        node moved to another zone by a label change is added at the end of that zone).

        kube-scheduler lists the tree anew only when its snapshot gains or loses a node
        (``UpdateSnapshot``'s ``updateAllLists``): a node moved to another zone keeps its
        place until then. So the order is kept from the first call after a node is added or
        removed (call it at every scheduling cycle, as the snapshot is taken) until the next
        addition or removal; label changes in between do not reorder it."""
        order = self._scheduler_order
        if order is None:
            rows = self.active_indices()
            joined = np.array([self._zones[self._zone_of[i]][0] for i in rows.tolist()], dtype=_I64)
            by_filing = np.lexsort((self.filed[rows], joined))  # zone by zone, each in filing order
            by_zone, zone_of = rows[by_filing], joined[by_filing]
            starts = np.flatnonzero(np.r_[True, zone_of[1:] != zone_of[:-1]])
            place = np.arange(rows.size) - np.repeat(starts, np.diff(np.r_[starts, rows.size]))
            order = by_zone[np.lexsort((zone_of, place))]
            self._scheduler_order = order
        return order

    def labelled(self, keys: tuple[str, ...]) -> np.ndarray:
        """Per row (all slots), whether the node carries any of the label ``keys`` (any
        value): a mask to read, not to change. Built on the first call for ``keys`` and
        kept up to date from then on as nodes are added, changed and removed (one row each),
        so a scorer that asks on every decision pays for the scan once."""
        mask = self._labelled.get(keys)
        if mask is None:
            mask = np.zeros(self.alloc.shape[0], dtype=bool)
            for i in self.active_indices().tolist():
                info = self.info[i]
                mask[i] = info is not None and any(key in info.labels for key in keys)
            self._labelled[keys] = mask
        return mask

    def label_codes(self, keys: tuple[str, ...]) -> tuple[np.ndarray, list[tuple[str | None, ...]]]:
        """Per row (all slots), a code for the node's values of the label ``keys`` (None for
        a key it lacks), and the values of each code: ``values[codes[row]]``; -1 for a free
        slot. To read, not to change. Built on the first call for ``keys`` and kept up to
        date row by row from then on, as :meth:`labelled` is, so a scorer that asks on
        every decision pays for the scan of the labels once; one code per distinct tuple
        ever seen (codes are not reused)."""
        found = self._label_codes.get(keys)
        if found is None:
            codes = np.full(self.alloc.shape[0], -1, dtype=_I64)
            values: list[tuple[str | None, ...]] = []
            known: dict[tuple[str | None, ...], int] = {}
            found = self._label_codes[keys] = (codes, values, known)
            for i in self.active_indices().tolist():
                info = self.info[i]
                self._set_label_code(found, keys, i, info.labels if info is not None else {})
        return found[0], found[1]

    @staticmethod
    def _set_label_code(
        found: tuple[np.ndarray, list[tuple[str | None, ...]], dict[tuple[str | None, ...], int]],
        keys: tuple[str, ...],
        i: int,
        labels: Mapping[str, str],
    ) -> None:
        codes, values, known = found
        value = tuple(labels.get(key) for key in keys)
        code = known.get(value)
        if code is None:
            code = known[value] = len(values)
            values.append(value)
        codes[i] = code

    def unweighed_requested(self, idx: np.ndarray, daemonsets: bool, mirror_pods: bool) -> np.ndarray:
        """Per row of ``idx`` (over every resource column), the requests of the pods the
        cluster-autoscaler leaves out of the node's utilization with
        ``--ignore-daemonsets-utilization`` (``daemonsets``) and
        ``--ignore-mirror-pods-utilization`` (``mirror_pods``): with the latter alone, a
        DaemonSet pod that is a mirror pod too is left out (its
        ``CalculateUtilizationOfResource`` asks each flag in turn)."""
        out = np.zeros((len(idx), len(self.resources)), dtype=_I64)
        if daemonsets:
            out += self.daemonset_requested[idx]
        if mirror_pods:
            out += self.mirror_requested[idx]
            if not daemonsets:
                out += self.daemonset_mirror_requested[idx]
        return out

    def ensure_resource(self, name: str) -> int:
        """Column of resource ``name``, adding a zero column if it is new."""
        col = self.rindex.get(name)
        if col is None:
            col = len(self.resources)
            self.resources.append(name)
            self.rindex[name] = col
            pad = np.zeros((self.alloc.shape[0], 1), dtype=_I64)
            self.alloc = np.hstack([self.alloc, pad])
            self.requested = np.hstack([self.requested, pad])
            self.daemonset_requested = np.hstack([self.daemonset_requested, pad])
            self.mirror_requested = np.hstack([self.mirror_requested, pad])
            self.daemonset_mirror_requested = np.hstack([self.daemonset_mirror_requested, pad])
        return col

    def ensure_extra(self, name: str) -> np.ndarray:
        """A float column maintained by an adapter, created zeroed."""
        col = self.extra.get(name)
        if col is None:
            col = self.extra[name] = np.zeros(self.alloc.shape[0], dtype=np.float64)
        return col

    def _grow(self) -> None:
        old = self.alloc.shape[0]
        new = old * 2

        def grow(a: np.ndarray) -> np.ndarray:
            out = np.zeros((new, *a.shape[1:]), dtype=a.dtype)
            out[:old] = a
            return out

        for attr in (
            "alloc", "requested", "daemonset_requested", "mirror_requested",
            "daemonset_mirror_requested", "nonzero", "builds", "build_starts", "active", "ready",
            "unschedulable", "hard_tainted", "soft_tainted", "to_be_deleted", "deletion_candidate", "created",
            "filed",
        ):  # fmt: skip
            setattr(self, attr, grow(getattr(self, attr)))
        self.extra = {k: grow(v) for k, v in self.extra.items()}
        self.names.extend([None] * (new - old))
        self.info.extend([None] * (new - old))
        self.images.extend({} for _ in range(new - old))
        self._free.extend(range(new - 1, old - 1, -1))
        self._labelled = {k: grow(v) for k, v in self._labelled.items()}
        for keys, (codes, values, known) in list(self._label_codes.items()):
            grown = np.full(new, -1, dtype=_I64)
            grown[:old] = codes
            self._label_codes[keys] = (grown, values, known)

    # ---- images ------------------------------------------------------------------------

    def set_images(self, i: int, images: Mapping[str, int]) -> None:
        """The node in row ``i`` lists exactly ``images`` (name -> size in bytes).

        As kube-scheduler's cache takes a node update: the row's old names are all dropped,
        then the new ones added, so a name no other row lists takes the size given here."""
        for name in list(self.images[i]):
            self._drop_image(i, name)
        for name, size in images.items():
            self.add_image(i, name, int(size))

    def add_image(self, i: int, name: str, size: int) -> None:
        """The node in row ``i`` now lists image ``name`` of ``size`` bytes (``image_size``
        becomes ``size`` unless another row lists the name already)."""
        if name in self.images[i]:
            self._drop_image(i, name)
        self.images[i][name] = size
        rows = self.image_rows.setdefault(name, {})
        if not rows:
            self.image_size[name] = size
        rows[i] = size

    def remove_image(self, i: int, name: str) -> None:
        """The node in row ``i`` no longer lists image ``name`` (no error if it did not)."""
        if name in self.images[i]:
            self._drop_image(i, name)

    def _drop_image(self, i: int, name: str) -> None:
        del self.images[i][name]
        rows = self.image_rows[name]
        del rows[i]
        if not rows:
            del self.image_rows[name]
            del self.image_size[name]

    # ---- pods --------------------------------------------------------------------------

    def pod_vector(self, pod: Pod) -> np.ndarray:
        """The pod's fit requests as a row over this table's resource columns (pods = 1)."""
        for rname in pod.requests:
            if rname not in self.rindex:
                self.ensure_resource(rname)
        vec = np.zeros(len(self.resources), dtype=_I64)
        vec[self.rindex[PODS]] = 1
        for rname, amount in pod.requests.items():
            vec[self.rindex[rname]] = amount
        return vec

    def add_pod(self, i: int, pod: Pod) -> None:
        """Account ``pod`` as bound to the node in row ``i``."""
        self._account(i, pod, 1)

    def remove_pod(self, i: int, pod: Pod) -> None:
        """Undo :meth:`add_pod`."""
        self._account(i, pod, -1)

    def _account(self, i: int, pod: Pod, sign: int) -> None:
        row = self.requested[i]
        row[self.rindex[PODS]] += sign
        for rname, amount in pod.requests.items():
            col = self.rindex.get(rname)
            if col is None:
                col = self.ensure_resource(rname)
                row = self.requested[i]
            row[col] += sign * amount
        daemonset = mirror = False
        if pod.owner_kind is not None or pod.annotations:  # cheap test first: most pods are neither
            daemonset, mirror = pod.is_daemonset_pod, pod.is_mirror_pod
            if daemonset or mirror:
                vec = sign * self.pod_vector(pod)
                (self.daemonset_requested if daemonset else self.mirror_requested)[i] += vec
                if daemonset and mirror:
                    self.daemonset_mirror_requested[i] += vec
        cpu, memory = pod.bound_nonzero_cpu, pod.bound_nonzero_memory
        self.nonzero[i, 0] += sign * (pod.nonzero_cpu if cpu is None else cpu)
        self.nonzero[i, 1] += sign * (pod.nonzero_memory if memory is None else memory)
        if pod.build_repo is not None:
            self.builds[i] += sign
            if sign > 0:
                self.build_starts[i] += 1
        elif pod.created is not None and not (daemonset or mirror):
            # a DaemonSet's or a static pod lives as long as its node and does not keep it
            # (the autoscaler removes a node with only those): not a session to forecast
            self._time(i, pod, sign)

    def _time(self, i: int, pod: Pod, sign: int) -> None:
        key = (i, pod.key)
        e = self._t_index.get(key)
        if sign < 0:
            if e is not None:
                self._t_refs[e] -= 1
                if self._t_refs[e] <= 0:
                    self._t_release(e)
            return
        if e is None:
            if not self._t_free:
                old = self._t_row.shape[0]
                self._t_row = np.concatenate([self._t_row, np.full(old, -1, dtype=_I64)])
                self._t_created = np.concatenate([self._t_created, np.zeros(old)])
                self._t_refs = np.concatenate([self._t_refs, np.zeros(old, dtype=_I64)])
                self._t_keys.extend([None] * old)
                self._t_free.extend(range(2 * old - 1, old - 1, -1))
            e = self._t_free.pop()
            self._t_index[key] = e
            self._t_keys[e] = key
            self._t_row[e] = i
            self._t_refs[e] = 0
        self._t_created[e] = pod.created
        self._t_refs[e] += 1

    def _t_release(self, e: int) -> None:
        key = self._t_keys[e]
        if key is not None:
            del self._t_index[key]
        self._t_keys[e] = None
        self._t_row[e] = -1
        self._t_refs[e] = 0
        self._t_free.append(e)

    def pod_ages(self, now: float) -> tuple[np.ndarray, np.ndarray]:
        """``(rows, ages)`` of the timed pods (bound, not build, DaemonSet or mirror pods, with
        a creation time):
        each one's node row and its age at ``now`` in seconds (0 for a creation time in the
        future)."""
        live = self._t_row >= 0
        return self._t_row[live], np.maximum(now - self._t_created[live], 0.0)

    # ---- views -------------------------------------------------------------------------

    def node_names(self, idx: Iterable[int]) -> list[str]:
        """Names of rows ``idx``."""
        names = self.names
        return [names[i] for i in idx]  # type: ignore[misc]
