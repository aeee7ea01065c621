"""DRA utilization: how the cluster-autoscaler weighs a node that publishes DRA devices.

With ``--enable-dynamic-resource-allocation``, the autoscaler's ``utilization.Calculate``
weighs a node with node-local ResourceSlices (``spec.nodeName``) by its most used device
pool (``drautils.HighestDynamicResourceUtilization``), not by its cpu and memory. Per driver
and pool, of the slices of the pool's current generation (the highest
``spec.pool.generation`` among them):

* an atomic pool (no slice has ``sharedCounters``): devices allocated over all its devices;
* a partitionable pool: for each shared counter set, its most consumed counter (consumed by
  the allocated devices' ``consumesCounters`` over the set's value; counters of value 0
  skipped), summed over the sets and divided by how many distinct counter sets the pool's
  devices consume (0 when they consume none).

This is cluster-autoscaler 1.36.1's ``simulator/dynamicresources/utils/utilization.go``
(a pool is atomic or partitionable as a whole; quotients of ``AsApproximateFloat64``).
A later version of the file (kubernetes/autoscaler commit 0046c5d) weighs a pool that
mixes atomic and partitionable devices by their counts instead, and divides counters'
integer ``Value()``; not followed until a release the project targets ships it.

Allocated devices are the ``status.allocation.devices.results`` of the ResourceClaims of the
pods on the node (``driver``, ``pool``, ``device``), except admin-access ones, which reserve
nothing; one of those claims that is not allocated, or cannot be found, is an error for the
node. A pool whose current
generation does not have all its ``resourceSliceCount`` slices is an error for the node (the
autoscaler cannot weigh it and keeps it: ``UnexpectedError``).

Pure: ResourceSlice and ResourceClaim dicts (``resource.k8s.io/v1``, as the API serves them)
in, per-node results out. A malformed object is skipped with a one-line problem, never an
exception.

A driver that weighs nodes this way for the scorers (the extender with ``cluster.dra``)
keeps each node's result in two :attr:`~stickypack.core.nodetable.NodeTable.extra` columns
(:func:`set_node_dra`), which :func:`node_dra_columns` reads back: a row the driver never
wrote (a new node, the simulator's tables) is a node without node-local slices.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from stickypack.core.apiread import Malformed, listed, mapping, named
from stickypack.core.draalloc import ClaimRequests, DeviceId, DraAllocator, NodeAllocation, read_claim
from stickypack.core.framework import FilterPlugin, SchedulingContext
from stickypack.core.labels import NodeSelectorTerm
from stickypack.core.nodetable import NodeTable
from stickypack.core.pod import Pod, rfc3339_seconds
from stickypack.core.quantity import QuantityError, parse_quantity

#: Counter values by counter name.
Counters = dict[str, Fraction]


@dataclass(frozen=True, slots=True)
class NodeDra:
    """One node's DRA utilization. ``utilization``: its most used pool's (a fraction, 0..1
    for sane pools; 0 when ``error``); ``pool``: that pool as ``driver/pool`` (of pools tied
    at the highest, the first by name: the autoscaler takes one of them at random); ``pools``:
    every pool's utilization; ``error``: why the node cannot be weighed (an incomplete pool;
    with :func:`dra_utilization`'s ``pods_by_node``, a claim of a pod there not allocated
    or not found), else None."""

    utilization: float
    pool: str | None
    pools: Mapping[str, float] = field(default_factory=dict)
    error: str | None = None


@dataclass(frozen=True, slots=True)
class DraReading:
    """``nodes``: each node with node-local slices; ``problems``: one line per object that
    could not be read (and was left out)."""

    nodes: dict[str, NodeDra]
    problems: list[str]


@dataclass(frozen=True, slots=True)
class _Device:
    name: str
    consumes: tuple[tuple[str, Counters], ...]  # (counter set, counters consumed)


@dataclass(frozen=True, slots=True)
class _Slice:
    node: str
    driver: str
    pool: str
    generation: int
    slice_count: int
    devices: tuple[_Device, ...]
    shared_counters: tuple[tuple[str, Counters], ...]  # (counter set name, counters)


def _int(value: Any, what: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise Malformed(f"{what} is not an integer >= {minimum}")
    return value


def _counters(value: Any, what: str) -> Counters:
    counters: Counters = {}
    for name, counter in mapping(value if value is not None else {}, what).items():
        raw = mapping(counter, f"{what}.{name}").get("value")
        if raw is None:
            raise Malformed(f"{what}.{name} has no value")
        try:
            counters[str(name)] = parse_quantity(raw)
        except QuantityError:
            raise Malformed(f"{what}.{name}.value {raw!r} is not a quantity") from None
    return counters


def _counter_sets(value: Any, what: str, name_key: str) -> tuple[tuple[str, Counters], ...]:
    sets = []
    for k, item in enumerate(listed(value, what)):
        item = mapping(item, f"{what}[{k}]")
        sets.append(
            (named(item.get(name_key), f"{what}[{k}].{name_key}"), _counters(item.get("counters"), what))
        )
    return tuple(sets)


def _read_slice(obj: Any) -> _Slice | None:
    """A node-local slice, or None for one that is not (no ``spec.nodeName``)."""
    spec = mapping(mapping(obj, "the object").get("spec"), "spec")
    node = spec.get("nodeName")
    if node is None:
        return None
    pool = mapping(spec.get("pool"), "spec.pool")
    devices = []
    for k, raw in enumerate(listed(spec.get("devices"), "spec.devices")):
        raw = mapping(raw, f"spec.devices[{k}]")
        what = f"spec.devices[{k}].consumesCounters"
        devices.append(
            _Device(
                named(raw.get("name"), f"spec.devices[{k}].name"),
                _counter_sets(raw.get("consumesCounters"), what, "counterSet"),
            )
        )
    return _Slice(
        node=named(node, "spec.nodeName"),
        driver=named(spec.get("driver"), "spec.driver"),
        pool=named(pool.get("name"), "spec.pool.name"),
        generation=_int(pool.get("generation"), "spec.pool.generation", 0),
        slice_count=_int(pool.get("resourceSliceCount"), "spec.pool.resourceSliceCount", 1),
        devices=tuple(devices),
        shared_counters=_counter_sets(spec.get("sharedCounters"), "spec.sharedCounters", "name"),
    )


def _allocated_devices(obj: Any) -> list[tuple[str, str, str]] | None:
    """``(driver, pool, device)`` of each device a claim reserves; None when it is not
    allocated."""
    status = mapping(mapping(obj, "the object").get("status") or {}, "status")
    allocation = status.get("allocation")
    if allocation is None:
        return None
    devices = mapping(mapping(allocation, "status.allocation").get("devices") or {}, "devices")
    reserved = []
    for k, result in enumerate(listed(devices.get("results"), "status.allocation.devices.results")):
        what = f"status.allocation.devices.results[{k}]"
        result = mapping(result, what)
        if result.get("adminAccess") is True:  # admin access reserves nothing
            continue
        reserved.append(
            (
                named(result.get("driver"), f"{what}.driver"),
                named(result.get("pool"), f"{what}.pool"),
                named(result.get("device"), f"{what}.device"),
            )
        )
    return reserved


def _object_name(kind: str, obj: Any) -> str:
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    meta = meta if isinstance(meta, Mapping) else {}
    name, namespace = meta.get("name") or "(unnamed)", meta.get("namespace")
    return f"{kind} {namespace}/{name}" if namespace else f"{kind} {name}"


def _read_slices(
    slices: Iterable[Any], problems: list[str]
) -> dict[str, dict[tuple[str, str], list[_Slice]]]:
    """The node-local slices, by node and then by (driver, pool); one line in ``problems``
    for each slice that cannot be read (left out)."""
    by_node: dict[str, dict[tuple[str, str], list[_Slice]]] = {}
    for obj in slices:
        try:
            read = _read_slice(obj)
        except Malformed as exc:
            problems.append(f"{_object_name('ResourceSlice', obj)}: {exc}; left out")
            continue
        if read is not None:
            by_node.setdefault(read.node, {}).setdefault((read.driver, read.pool), []).append(read)
    return by_node


def _read_claims(
    claims: Iterable[Any], problems: list[str]
) -> list[tuple[Mapping[str, Any], list[tuple[str, str, str]] | None]]:
    """Each readable claim with the devices it reserves (:func:`_allocated_devices`; None:
    not allocated); one line in ``problems`` for each claim that cannot be read."""
    read: list[tuple[Mapping[str, Any], list[tuple[str, str, str]] | None]] = []
    for obj in claims:
        try:
            read.append((obj, _allocated_devices(obj)))
        except Malformed as exc:
            problems.append(f"{_object_name('ResourceClaim', obj)}: {exc}; left out")
    return read


def _current_generation(pool_slices: list[_Slice]) -> tuple[int, list[_Slice], bool]:
    """A pool's highest generation, its slices, and whether they are all there (its
    ``resourceSliceCount``)."""
    generation = max(s.generation for s in pool_slices)
    current = [s for s in pool_slices if s.generation == generation]
    return generation, current, len(current) == current[0].slice_count


def _pool_utilization(slices: list[_Slice], allocated: set[str]) -> float:
    """One complete pool's utilization (its current generation's ``slices``; ``allocated``:
    the names of its devices claims reserve)."""
    devices = [d for s in slices for d in s.devices]
    taken = [d for d in devices if d.name in allocated]
    shared = [counter_set for s in slices for counter_set in s.shared_counters]
    if not shared:  # atomic
        return len(taken) / len(devices) if devices else 0.0
    partitions = len({counter_set for d in devices for counter_set, _ in d.consumes})
    if partitions == 0:
        return 0.0
    consumed: dict[str, Counters] = {}
    for d in taken:
        _add_counters(consumed, d.consumes)
    total = 0.0
    for counter_set, counters in shared:
        used = consumed.get(counter_set, {})
        highest = max(
            (_float(used[name] / value) for name, value in counters.items() if value != 0 and name in used),
            default=0.0,
        )
        total += max(highest, 0.0) / partitions
    return min(total, _LARGEST)


#: What a pool's utilization past a float's range is read as (the autoscaler's float is
#: +Inf: a node over any threshold, as this is; a finite number keeps a JSON report valid).
_LARGEST = float(np.finfo(np.float64).max)


def _float(ratio: Fraction) -> float:
    """``ratio`` as a float, +-inf past a float's range, as the autoscaler's
    ``AsApproximateFloat64`` quotients (a quantity of 100 digits and an exponent over one
    written as a tiny fraction can exceed it)."""
    try:
        return float(ratio)
    except OverflowError:
        return math.inf if ratio > 0 else -math.inf


def claim_key(obj: Mapping[str, Any]) -> tuple[str, str]:
    """A ResourceClaim's ``(namespace, name)``, as a pod's claims name it (``""`` for a
    field it lacks)."""
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


def dra_utilization(
    slices: Iterable[Mapping[str, Any]],
    claims: Iterable[Mapping[str, Any]],
    pods_by_node: Mapping[str, Iterable[Pod]] | None = None,
) -> DraReading:
    """Each node's DRA utilization (:class:`NodeDra`) from every ResourceSlice and the
    ResourceClaims of the cluster. Slices without ``spec.nodeName`` are not node-local and
    left out; a claim's devices count only in the pool (driver and pool name) they name.

    ``pods_by_node``: the pods on each node as the autoscaler's snapshot holds them (bound
    and nominated ones, expendable ones left out); only the claims those pods use count on
    a node (its ``NodeInfo.ResourceClaims``), and a claim of theirs that is not allocated,
    does not exist or whose name is not known yet keeps the node from being weighed (an
    error, as for the autoscaler, whose snapshot fails on the last two). None: every
    allocated claim of the cluster counts on the node whose pool it names."""
    problems: list[str] = []
    # devices each claim reserves, by (namespace, name); None: not allocated
    allocated = {claim_key(obj): devices for obj, devices in _read_claims(claims, problems)}
    reserved: dict[tuple[str, str], set[str]] = {}
    if pods_by_node is None:
        for devices in allocated.values():
            for driver, pool, device in devices or ():
                reserved.setdefault((driver, pool), set()).add(device)
    by_node = _read_slices(slices, problems)
    nodes: dict[str, NodeDra] = {}
    for node, pools in sorted(by_node.items()):
        utilizations: dict[str, float] = {}
        errors: list[str] = []
        if pods_by_node is not None:
            reserved = {}
            for pod in pods_by_node.get(node, ()):
                for name in pod.resource_claims:
                    key = (pod.namespace, name)
                    if key not in allocated:  # "" (name not known yet) is never a key
                        errors.append(
                            f"pod {pod.key}: ResourceClaim {name or '(name not known yet)'} not found"
                        )
                        continue
                    devices = allocated[key]
                    if devices is None:
                        errors.append(f"ResourceClaim {pod.namespace}/{name} not allocated")
                    for driver, pool, device in devices or ():
                        reserved.setdefault((driver, pool), set()).add(device)
        for (driver, pool), pool_slices in sorted(pools.items()):
            generation, current, complete = _current_generation(pool_slices)
            if not complete:
                errors.append(
                    f"pool {driver}/{pool} incomplete: generation {generation} has "
                    f"{len(current)} of {current[0].slice_count} slices"
                )
                continue
            utilizations[f"{driver}/{pool}"] = _pool_utilization(current, reserved.get((driver, pool), set()))
        if errors:
            nodes[node] = NodeDra(0.0, None, utilizations, "; ".join(dict.fromkeys(errors)))
            continue
        highest = max(utilizations, key=lambda name: utilizations[name])  # first of the ties
        nodes[node] = NodeDra(utilizations[highest], highest, utilizations)
    return DraReading(nodes, problems)


#: :attr:`NodeTable.extra` column: 1.0 for a node with node-local ResourceSlices (weighed by
#: its pools when DRA is on), 0.0 otherwise (the value of a row nobody wrote).
DRA_SLICES_COLUMN = "dra_slices"
#: :attr:`NodeTable.extra` column: such a node's :attr:`NodeDra.utilization` (a fraction), or
#: +inf when it cannot be weighed (:attr:`NodeDra.error`: the autoscaler keeps the node, so
#: it is over any threshold); 0.0 for a node without slices.
DRA_UTILIZATION_COLUMN = "dra_utilization"


def set_node_dra(table: NodeTable, row: int, reading: NodeDra | None) -> None:
    """Keep node ``row``'s DRA reading in ``table`` (None: the node has no node-local
    slices), creating the two columns on first use."""
    slices = table.ensure_extra(DRA_SLICES_COLUMN)
    utilization = table.ensure_extra(DRA_UTILIZATION_COLUMN)
    if reading is None:
        slices[row], utilization[row] = 0.0, 0.0
        return
    slices[row] = 1.0
    utilization[row] = np.inf if reading.error is not None else reading.utilization


def node_dra_columns(table: NodeTable, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Per row of ``idx``: whether the node has node-local slices (bool) and its DRA
    utilization (float, +inf when it cannot be weighed), as :func:`set_node_dra` kept them;
    None when no driver keeps them in ``table``."""
    slices = table.extra.get(DRA_SLICES_COLUMN)
    utilization = table.extra.get(DRA_UTILIZATION_COLUMN)
    if slices is None or utilization is None:
        return None
    return slices[idx] > 0, utilization[idx]


#: A ResourceClaim's ``(namespace, name)`` (:func:`claim_key`).
ClaimKey = tuple[str, str]


@dataclass(slots=True)
class _FreePool:
    """One node-local pool's current generation, as the scale-down plan uses it: ``name``;
    ``devices`` in slice order; ``taken`` the names of those allocated; ``left`` the
    counters its shared counter sets have left (None: an atomic pool, no sharedCounters);
    ``complete``: whether the generation has all its slices (else none of it is free);
    ``node``: the node whose slices publish it."""

    name: str
    devices: tuple[_Device, ...]
    names: frozenset[str]
    taken: set[str]
    left: dict[str, Counters] | None
    complete: bool
    node: str


def _add_counters(
    into: dict[str, Counters], consumes: tuple[tuple[str, Counters], ...], sign: int = 1
) -> None:
    """Add (``sign`` -1: take away) a device's ``consumesCounters`` to counters by set."""
    for counter_set, counters in consumes:
        values = into.setdefault(counter_set, {})
        for name, value in counters.items():
            values[name] = values.get(name, Fraction(0)) + sign * value


def _fits(left: dict[str, Counters], consumes: tuple[tuple[str, Counters], ...]) -> bool:
    """Whether a device consuming ``consumes`` fits in the counters ``left`` (a counter set or
    counter the pool does not share: not known to fit)."""
    for counter_set, counters in consumes:
        have = left.get(counter_set)
        if have is None:
            return False
        for name, value in counters.items():
            if name not in have or have[name] < value:
                return False
    return True


class DraDevices:
    """The DRA devices of the cluster as the cluster-autoscaler's removal simulation moves
    them with ``--enable-dynamic-resource-allocation`` (its DRA snapshot and kube-scheduler's
    DynamicResources plugin), for :func:`~stickypack.core.drain.plan_scale_down`. Built by
    :meth:`read`; changed by the plan (:meth:`release`, :meth:`place`) and put back with
    :meth:`mark` and :meth:`rollback`.

    What the autoscaler does: unscheduling a pod (all the pods of a node it checks, before
    any is placed) removes the pod's reservation from each of its claims and deallocates a
    claim that no pod reserves any more (or that the pod owns), freeing its devices;
    scheduling it elsewhere runs the DRA plugin, which allocates a deallocated claim from
    the devices the target node reaches and keeps a pod whose claim is still allocated to
    the nodes the allocation's node selector allows (a node-local device's: its node).

    The approximation modelled here:

    * Only claims allocated (at least in part) to devices of *node-local* slices
      (``spec.nodeName``; of their pool's current generation) are followed, at the node of
      the first such device. A claim's results on other devices (slices with
      ``nodeSelector``, ``allNodes`` or ``perDeviceNodeSelection``, or devices no current
      slice publishes) constrain nothing, as before: such devices are taken to be free
      wherever the pod goes; nor does a claim not allocated or not found (a node whose pods
      have one is not weighed by :func:`dra_utilization` and stays anyway). Admin-access
      results reserve nothing (as :func:`dra_utilization`).
    * A claim's users are the pods that name it (:attr:`~stickypack.core.pod.Pod.resource_claims`)
      among all the pods given, expendable ones included (the autoscaler reads the claim's
      ``status.reservedFor``, which the scheduler fills with the pods it binds there and
      which its snapshot of pods, without expendable ones, does not change). A claim stays
      allocated while one of them has not been released: a pod moved away whose claim
      another pod that stays still uses (a DaemonSet pod, a long-terminating or expendable
      pod on the node) can go only to that claim's node, the node being removed: no room.
      Pod ownership of a claim (a claim made from a template) is not read: such a claim
      has its pod as only user.
    * A released claim is allocated again on the target, given an allocator
      (:meth:`read`), by kube-scheduler's: the pod's released claims together, their
      DeviceClasses' and requests' CEL selectors, counts, constraints, taints and counters,
      from the devices the target reaches that no claim holds now (the cluster's allocated
      claims less those released, plus what the plan allocated), taking the devices of its
      first solution. A node where the allocation errs (a CEL error; kube-scheduler fails
      its whole attempt) does not pass: assumed to be what the autoscaler's simulation
      makes of it (its source was not at hand). What the allocator does not judge (a
      DeviceClass not listed, consumable capacity, CEL the binding lacks) and a claim whose
      requests cannot be read are counted instead, as without an allocator: from the
      unallocated devices of the target's node-local slices, as many devices of each
      driver as the claim held on node-local devices before, any device of the driver
      counting; devices of slices that are not node-local never count as room. In a
      partitionable pool (``sharedCounters``), a device counts when its
      ``consumesCounters`` fit what the pool's counter sets have left after the allocated
      devices (the devices are taken first-fit, in slice order, pools by name). Devices of
      an incomplete pool (not all the current generation's ``resourceSliceCount`` slices)
      are never room.
    * Once allocated again on a node's node-local devices, a claim pins its other users to
      that node, as the plugin pins a pod to an allocated claim's node; allocated again on
      other devices only, it pins none.

    Pure: built from the API's dicts, a malformed object skipped with a problem line
    (:attr:`problems`), never an exception."""

    def __init__(self) -> None:
        #: One line per object that could not be read (and was left out).
        self.problems: list[str] = []
        self._pools: dict[str, dict[str, list[_FreePool]]] = {}  # by node, by driver
        #: (driver, pool name) to its pool (a name two nodes publish: the first node's)
        self._pool_of: dict[tuple[str, str], tuple[str, _FreePool]] = {}
        #: a claim allocated (at least in part) on node-local devices: their node ("" when it
        #: holds none any more), those devices and its other devices (followed only with an
        #: allocator)
        self._held: dict[ClaimKey, _Holding] = {}
        self._allocator: DraAllocator | None = None
        self._requests: dict[ClaimKey, ClaimRequests] = {}  # with an allocator: what it allocates
        #: with an allocator: whether it reaches devices of slices that are not node-local
        self._shared_slices = False
        self._need: dict[ClaimKey, dict[str, int]] = {}  # how many devices of each driver
        self._users: dict[ClaimKey, set[str]] = {}  # pod keys
        self._journal: list[tuple[str, ClaimKey, Any]] = []
        self._claims_of: dict[str, list[ClaimKey]] = {}  # pod key -> _claims(pod)
        self._changed: set[tuple[str, str]] = set()  # (node, driver) since take_changes()

    @classmethod
    def read(
        cls,
        slices: Iterable[Mapping[str, Any]],
        claims: Iterable[Mapping[str, Any]],
        pods_by_node: Mapping[str, Iterable[Pod]],
        allocator: DraAllocator | None = None,
    ) -> DraDevices:
        """From every ResourceSlice and ResourceClaim of the cluster (as
        :func:`dra_utilization` takes them) and every pod bound to each node (expendable ones
        included: their claims' users too).

        ``allocator``: kube-scheduler's allocator built from the same slices and claims
        (:class:`~stickypack.core.draalloc.DraAllocator`, with the DeviceClasses and the CEL
        binding): a released claim is then allocated again by it (its requests' and
        DeviceClasses' selectors) instead of by counting devices of its drivers; the plan
        keeps its ``allocated`` devices up to date (and puts them back). None: counted."""
        out = cls()
        out._allocator = allocator
        out._shared_slices = allocator is not None and any(not s.node_name for s in allocator.slices)
        by_pool = {
            (node, driver, pool): pool_slices
            for node, pools in _read_slices(slices, out.problems).items()
            for (driver, pool), pool_slices in pools.items()
        }
        for (node, driver, pool), pool_slices in sorted(by_pool.items()):
            _, current, complete = _current_generation(pool_slices)
            devices = tuple(d for s in current for d in s.devices)
            shared = [counter_set for s in current for counter_set in s.shared_counters]
            free = _FreePool(
                pool,
                devices,
                frozenset(d.name for d in devices),
                set(),
                {name: dict(counters) for name, counters in shared} if shared else None,
                complete,
                node,
            )
            out._pool_of.setdefault((driver, pool), (node, free))
            out._pools.setdefault(node, {}).setdefault(driver, []).append(free)
        for obj, allocated in _read_claims(claims, out.problems):
            local: list[_Held] = []
            others: list[DeviceId] = []
            where: str | None = None  # the node of its node-local devices (the first's)
            for driver, pool, name in allocated or ():
                found = out._pool_of.get((driver, pool))
                if found is None or name not in found[1].names:
                    others.append((driver, pool, name))  # not node-local: constrains nothing
                    continue
                where = where if where is not None else found[0]
                device = next(d for d in found[1].devices if d.name == name)
                if name not in found[1].taken:
                    out._take(((driver, found[1], device),))
                local.append((driver, found[1], device))
            if where is not None:
                key = claim_key(obj)
                need: dict[str, int] = {}
                for driver, _, _ in local:
                    need[driver] = need.get(driver, 0) + 1
                out._held[key], out._need[key] = (where, tuple(local), tuple(others)), need
                if allocator is not None:
                    try:
                        out._requests[key] = read_claim(f"{key[0]}/{key[1]}", obj)
                    except ValueError as exc:
                        out.problems.append(f"{exc}; counted, not allocated, when its pods move")
        for pods in pods_by_node.values():
            for pod in pods:
                for name in pod.resource_claims:
                    if (pod.namespace, name) in out._need:
                        out._users.setdefault((pod.namespace, name), set()).add(pod.key)
        return out

    def _claims(self, pod: Pod) -> list[ClaimKey]:
        """The pod's claims this model follows (each once; the claims followed are fixed by
        :meth:`read`, so this is kept per pod)."""
        claims = self._claims_of.get(pod.key)
        if claims is None:
            keys = dict.fromkeys((pod.namespace, name) for name in pod.resource_claims)
            claims = self._claims_of[pod.key] = [key for key in keys if key in self._need]
        return claims

    def follows(self, pod: Pod) -> bool:
        """Whether one of ``pod``'s claims holds (or held) node-local devices: only then is
        it judged by :meth:`allows` (any other pod is allowed everywhere)."""
        return bool(self._claims(pod))

    def mark(self) -> int:
        """A point :meth:`rollback` goes back to."""
        return len(self._journal)

    def rollback(self, mark: int) -> None:
        """Undo every :meth:`release` and :meth:`place` since ``mark``, latest first."""
        while len(self._journal) > mark:
            what, key, arg = self._journal.pop()
            if what == "use":  # a pod became a user: it is not any more
                self._users[key].discard(arg)
            elif what == "unuse":
                self._users.setdefault(key, set()).add(arg)
            elif what == "hold":  # the claim took devices: free them
                _, local, others = self._held.pop(key)
                self._free(local, others)
            else:  # "unhold": the claim freed its devices: take them back
                self._take(arg[1], arg[2])
                self._held[key] = arg

    def release(self, pods: Iterable[Pod]) -> None:
        """The autoscaler's unscheduling of ``pods`` (all those it moves off a node, before
        it places any): each is no longer a user of its claims, and a claim left without
        users frees its node-local devices (deallocated)."""
        touched: dict[ClaimKey, None] = {}
        for pod in pods:
            for key in self._claims(pod):
                users = self._users.get(key, set())
                if pod.key in users:
                    users.discard(pod.key)
                    self._journal.append(("unuse", key, pod.key))
                touched[key] = None
        for key in touched:
            if not self._users.get(key) and key in self._held:
                held = self._held.pop(key)
                self._free(held[1], held[2])
                self._journal.append(("unhold", key, held))

    def _pick(self, pod: Pod, node: str, labels: Mapping[str, str] | None = None) -> list[_Pick] | None:
        """The devices each of the pod's claims would hold on ``node`` (of ``labels``; the
        allocator's picks, :meth:`_allocate`, else, and where it does not judge them, first
        fit of as many devices of its drivers for the released ones), or None when the pod
        cannot run there (a claim allocated on another node's devices, or no devices for the
        released ones)."""
        if self._allocator is not None:
            judged, picks = self._allocate(self._allocator, pod, node, labels or {})
            if judged:
                return picks
        return self._count(pod, node)

    def _count(self, pod: Pod, node: str) -> list[_Pick] | None:
        """:meth:`_pick` by counting devices of the released claims' drivers (first fit)."""
        picks: list[_Pick] = []
        trial: dict[int, tuple[set[str], dict[str, Counters] | None]] = {}  # by id(pool)
        pools = self._pools.get(node, {})
        for key in self._claims(pod):
            held = self._held.get(key)
            if held is not None:  # still allocated: the DRA plugin keeps the pod on its node
                if held[0] and held[0] != node:
                    return None
                picks.append((key, held[1], held[2]))
                continue
            taken: list[_Held] = []
            for driver, count in sorted(self._need[key].items()):
                for free in pools.get(driver, ()):
                    if not free.complete:
                        continue
                    if id(free) not in trial:
                        left = None if free.left is None else {k: dict(v) for k, v in free.left.items()}
                        trial[id(free)] = (set(free.taken), left)
                    used, left = trial[id(free)]
                    for device in free.devices:
                        if count == 0:
                            break
                        if device.name in used or (left is not None and not _fits(left, device.consumes)):
                            continue
                        used.add(device.name)
                        if left is not None:
                            _add_counters(left, device.consumes, -1)
                        taken.append((driver, free, device))
                        count -= 1
                    if count == 0:
                        break
                if count:
                    return None
            picks.append((key, tuple(taken), ()))
        return picks

    def _allocate(
        self, allocator: DraAllocator, pod: Pod, node: str, labels: Mapping[str, str]
    ) -> tuple[bool, list[_Pick] | None]:
        """:meth:`_pick` with kube-scheduler's allocator, and whether it judged the pod: its
        released claims are allocated together on ``node`` with the devices held now
        counted as allocated (its ``allocated``, which :meth:`_take` and :meth:`_free` keep
        current). A node where they cannot be, or where the allocation errs (a CEL error),
        is None. Not judged (left to :meth:`_count`): a released claim whose requests could
        not be read, or an outcome the allocator does not model
        (:attr:`NodeAllocation.not_modelled`: a DeviceClass not listed, consumable
        capacity, CEL the binding lacks)."""
        picks: list[_Pick] = []
        released: list[ClaimKey] = []
        for key in self._claims(pod):
            held = self._held.get(key)
            if held is not None:
                if held[0] and held[0] != node:
                    return True, None
                picks.append((key, held[1], held[2]))
            elif key in self._requests:
                released.append(key)
            else:
                return False, None
        if not released:
            return True, picks
        claims = [self._requests[key] for key in released]
        if not self._shared_slices and any(c.takes_a_free_device for c in claims) and not self.free_on(node):
            # no device free on the node, none elsewhere it reaches: what the allocator, and
            # counting where it does not judge, would say (only sooner)
            return True, None
        outcome = allocator.allocate(node, labels, claims)
        if outcome.not_modelled is not None:
            return False, None
        if not outcome.fits:
            return True, None
        for key, devices in zip(released, outcome.devices, strict=True):
            local: list[_Held] = []
            others: list[DeviceId] = []
            for device_id in devices:
                driver, pool, name = device_id
                found = self._pool_of.get((driver, pool))
                device = next((d for d in found[1].devices if d.name == name), None) if found else None
                if found is not None and device is not None and found[0] == node:
                    local.append((driver, found[1], device))
                else:
                    others.append(device_id)
            picks.append((key, tuple(local), tuple(others)))
        return True, picks

    def requirement(self, pod: Pod) -> DeviceNeed | None:
        """What ``pod``'s claims ask of a node now (:class:`DeviceNeed`), or None when no
        node can take it (two of its claims still allocated on different nodes)."""
        need: dict[str, int] = {}
        pinned: str | None = None
        for key in self._claims(pod):
            held = self._held.get(key)
            if held is not None:
                if not held[0]:  # holds no node-local device: constrains nothing
                    continue
                if pinned is not None and held[0] != pinned:
                    return None
                pinned = held[0]
                continue
            for driver, count in self._need[key].items():
                need[driver] = need.get(driver, 0) + count
        return DeviceNeed(pinned, need)

    def free_count(self, node: str, driver: str) -> int | None:
        """The unallocated devices of ``driver`` in ``node``'s complete node-local pools,
        or None when one of its pools of that driver shares counters (then only
        :meth:`allows`, which picks the devices, can tell)."""
        pools = self._pools.get(node, {}).get(driver, ())
        if any(free.left is not None for free in pools):
            return None
        return _unallocated(pools)

    def nodes_with(self, driver: str) -> list[str]:
        """The nodes with node-local pools of ``driver``."""
        return [node for node, drivers in self._pools.items() if driver in drivers]

    def take_changes(self) -> set[tuple[str, str]]:
        """The ``(node, driver)`` pairs whose devices were taken or freed since the last
        call (what a caller keeping :meth:`free_count` per node must read again)."""
        changed, self._changed = self._changed, set()
        return changed

    def free_on(self, node: str) -> int:
        """The unallocated devices of ``node``'s complete node-local pools, of every driver
        (counters not checked: at most what can be allocated there)."""
        return sum(_unallocated(pools) for pools in self._pools.get(node, {}).values())

    def needs_a_free_device(self, pod: Pod) -> bool:
        """With an allocator that reaches node-local slices only: whether allocating
        ``pod``'s released claims takes at least one device no claim holds
        (:attr:`~stickypack.core.draalloc.ClaimRequests.takes_a_free_device`), so that a
        node without one (:meth:`free_on`) cannot take the pod. False otherwise."""
        if self._allocator is None or self._shared_slices:
            return False
        return any(
            key not in self._held and key in self._requests and self._requests[key].takes_a_free_device
            for key in self._claims(pod)
        )

    @property
    def allocates(self) -> bool:
        """Whether released claims are allocated again by kube-scheduler's allocator (given
        to :meth:`read`), not counted."""
        return self._allocator is not None

    def allows(self, pod: Pod, node: str, labels: Mapping[str, str] | None = None) -> bool:
        """Whether the DRA plugin, as modelled, lets ``pod`` run on ``node`` (of ``labels``,
        which the allocator's node selections read) now: each of its claims still allocated
        on node-local devices is allocated on ``node``'s, and its released claims can be
        allocated there: by the allocator (:meth:`_allocate`), else when ``node``'s
        node-local slices have as many free devices of each driver (counted where the node's
        pools of a driver are atomic, any free device doing; else picked, :meth:`_pick`)."""
        req = self.requirement(pod)
        if req is None or (req.pinned is not None and req.pinned != node):
            return False
        if self._allocator is not None:
            return not req.need or self._pick(pod, node, labels) is not None
        for driver, count in req.need.items():
            free = self.free_count(node, driver)
            if free is None:
                return self._pick(pod, node) is not None
            if free < count:
                return False
        return True

    def place(self, pod: Pod, node: str, labels: Mapping[str, str] | None = None) -> None:
        """Put ``pod`` on ``node`` (of ``labels``; one that :meth:`allows` it): its released
        claims take their devices there, and it uses its claims again."""
        for key, devices, others in self._pick(pod, node, labels) or ():
            if key not in self._held:
                self._take(devices, others)
                self._held[key] = (node if devices else "", devices, others)
                self._journal.append(("hold", key, None))
            users = self._users.setdefault(key, set())
            if pod.key not in users:
                users.add(pod.key)
                self._journal.append(("use", key, pod.key))

    def _take(self, devices: Iterable[_Held], others: Iterable[DeviceId] = ()) -> None:
        """Mark ``devices`` (node-local) and, for the allocator, ``others`` allocated."""
        allocated = self._allocator.allocated if self._allocator is not None else None
        for driver, free, device in devices:
            if free.left is not None:
                _add_counters(free.left, device.consumes, -1)
            free.taken.add(device.name)
            self._changed.add((free.node, driver))
            if allocated is not None:
                allocated.add((driver, free.name, device.name))
        if allocated is not None:
            allocated.update(others)

    def _free(self, devices: Iterable[_Held], others: Iterable[DeviceId] = ()) -> None:
        """Undo :meth:`_take`."""
        allocated = self._allocator.allocated if self._allocator is not None else None
        for driver, free, device in devices:
            if free.left is not None:
                _add_counters(free.left, device.consumes)
            free.taken.discard(device.name)
            self._changed.add((free.node, driver))
            if allocated is not None:
                allocated.discard((driver, free.name, device.name))
        if allocated is not None:
            allocated.difference_update(others)

    def free_devices(self, node: str) -> dict[str, int]:
        """Each driver's unallocated devices in ``node``'s complete node-local pools, now
        (counters not checked)."""
        return {driver: _unallocated(pools) for driver, pools in sorted(self._pools.get(node, {}).items())}


def _unallocated(pools: Iterable[_FreePool]) -> int:
    """The devices of the complete ``pools`` no claim holds (counters not checked)."""
    return sum(len(free.names - free.taken) for free in pools if free.complete)


#: A device a claim holds: its driver, its pool and the device.
_Held = tuple[str, _FreePool, _Device]
#: A claim's holding: the node of its node-local devices ("" for none), those, and its other devices.
_Holding = tuple[str, tuple[_Held, ...], tuple[DeviceId, ...]]
#: A claim with the devices it would hold on a node: node-local ones and others.
_Pick = tuple["ClaimKey", tuple[_Held, ...], tuple[DeviceId, ...]]


@dataclass(frozen=True, slots=True)
class DeviceNeed:
    """What a pod's claims ask of the node it goes to in the scale-down plan: ``pinned``,
    the node of a claim of it still allocated (None: any node); ``need``, how many free
    node-local devices of each driver its released claims take there."""

    pinned: str | None
    need: Mapping[str, int]


# ---- kube-scheduler's DynamicResources filter: what needs no device selector (CEL) ----------

#: ResourceClaim dicts (as listed) by ``(namespace, name)`` (:func:`claim_key`).
ClaimsByKey = Mapping[tuple[str, str], Mapping[str, Any]]


@dataclass(frozen=True, slots=True)
class ClaimsVerdict:
    """What kube-scheduler's DynamicResources plugin (v1.37.2) makes of a pod's claims.

    ``rejected``: why its PreFilter (and PreEnqueue) rejects every node
    (UnschedulableAndUnresolvable), in its words; None: it does not. ``allocated``: each
    allocated claim (``status.allocation``) with its allocation's ``nodeSelector`` terms
    (None: no node selector, any node), which its Filter matches against each node.
    ``not_judged``: claims that are not judged (every node passes for them): a pod file's
    template entry before the pod is created, with the reason."""

    rejected: str | None = None
    allocated: tuple[tuple[str, tuple[NodeSelectorTerm, ...] | None], ...] = ()
    not_judged: tuple[str, ...] = ()
    #: Those of :attr:`allocated` no other pod uses (``status.reservedFor`` empty, or the pod
    #: alone): when no node passes, kube-scheduler's PostFilter deallocates one of those a
    #: node's Filter found unavailable, and the next attempt allocates it afresh (its CEL).
    unshared: tuple[str, ...] = ()
    #: Those of :attr:`allocated` whose devices' binding failed (a binding failure condition
    #: true) or timed out (binding conditions not all true ``binding_timeout_s`` after the
    #: allocation), each with why: its Filter finds them unavailable on every node.
    unbindable: tuple[tuple[str, str], ...] = ()
    #: The claims not allocated yet (name and object), in the pod's order, which its Filter
    #: allocates on each node (:class:`~stickypack.core.draalloc.DraAllocator`).
    unallocated: tuple[tuple[str, Mapping[str, Any]], ...] = ()

    def unavailable_on(self, labels: Mapping[str, str], node: str) -> list[str]:
        """The allocated claims its Filter finds unavailable on the node ``node`` (of
        ``labels``): their node selector does not match it, or they are :attr:`unbindable`."""
        stuck = {name for name, _ in self.unbindable}
        return [
            name
            for name, terms in self.allocated
            if name in stuck or (terms is not None and not any(t.matches(labels, node) for t in terms))
        ]


def _claim_from_template(pod: Pod, entry: str, template: Mapping[str, Any]) -> Mapping[str, Any]:
    """The ResourceClaim the resourceclaim controller makes from ``template`` for ``pod``'s
    entry ``entry`` once the pod is created (its ``spec.spec``; named ``<pod>-<entry>``, the
    controller adds a random suffix), not allocated."""
    spec = template.get("spec")
    claim_spec = spec.get("spec") if isinstance(spec, Mapping) else None
    return {"metadata": {"name": f"{pod.name}-{entry}", "namespace": pod.namespace}, "spec": claim_spec or {}}


def _controller_uid(meta: Mapping[str, Any]) -> str | None:
    """The uid of the owner reference with ``controller: true`` (``metav1.GetControllerOf``)."""
    refs = meta.get("ownerReferences")
    for ref in refs if isinstance(refs, list) else ():  # not a list: no controller read
        if isinstance(ref, Mapping) and ref.get("controller") is True:
            uid = ref.get("uid")
            return uid if isinstance(uid, str) else None
    return None


def _allocation_terms(obj: Mapping[str, Any]) -> tuple[NodeSelectorTerm, ...] | None:
    """An allocated claim's ``status.allocation.nodeSelector`` terms (None: none, any node);
    :class:`Malformed` for one kube-scheduler could not parse (its ``NewNodeSelector``
    error fails the pod's scheduling attempt)."""
    status = mapping(obj.get("status") or {}, "status")
    allocation = mapping(status.get("allocation"), "status.allocation")
    selector = allocation.get("nodeSelector")
    if selector is None:
        return None
    where = "status.allocation.nodeSelector"
    raw_terms = listed(mapping(selector, where).get("nodeSelectorTerms"), f"{where}.nodeSelectorTerms")
    terms = []
    for k, raw in enumerate(raw_terms):
        at = f"{where}.nodeSelectorTerms[{k}]"
        raw = mapping(raw, at)
        for part in ("matchExpressions", "matchFields"):  # lists of objects, as served
            for j, requirement in enumerate(listed(raw.get(part), f"{at}.{part}")):
                mapping(requirement, f"{at}.{part}[{j}]")
        try:
            term = NodeSelectorTerm.from_dict(raw)
        except KeyError as exc:
            raise Malformed(f"{where}.nodeSelectorTerms[{k}]: a requirement has no {exc}") from None
        except (TypeError, ValueError) as exc:
            raise Malformed(f"{where}.nodeSelectorTerms[{k}]: {exc}") from None
        if not term.usable:
            raise Malformed(f"{where}.nodeSelectorTerms[{k}] cannot be parsed")
        terms.append(term)
    return tuple(terms)


def _request_class_problem(
    namespace: str, claim: str, obj: Mapping[str, Any], classes: Collection[str]
) -> str | None:
    """Why kube-scheduler's DynamicResources PreFilter rejects a claim not allocated yet by its
    requests' DeviceClasses (``classes``: those that exist), in its words, or None: a
    request for a class that does not exist, a request or subrequest naming no class
    (``unsupported request type``), a request of neither ``exactly`` nor
    ``firstAvailable``; a class name that is not a string, named with its field (no lookup:
    it may be unhashable). Other requests not shaped as served are left to the API server."""
    spec = obj.get("spec")
    devices = spec.get("devices") if isinstance(spec, Mapping) else None
    requests = devices.get("requests") if isinstance(devices, Mapping) else None

    def check(device_class: Any, request: str, where: str) -> str | None:
        if not device_class:
            return f"request {request}: unsupported request type"
        if not isinstance(device_class, str):  # unhashable, or no name: not as served
            field = f"{where}.deviceClassName"
            return f"ResourceClaim {namespace}/{claim}: {field} {device_class!r} is not a string"
        if device_class not in classes:
            return f"request {request}: device class {device_class} does not exist"
        return None

    for k, request in enumerate(requests if isinstance(requests, list) else ()):
        if not isinstance(request, Mapping):
            continue
        name, where = request.get("name"), f"spec.devices.requests[{k}]"
        exactly, subs = request.get("exactly"), request.get("firstAvailable")
        if isinstance(exactly, Mapping):
            problem = check(exactly.get("deviceClassName"), f"{name}", f"{where}.exactly")
        elif isinstance(subs, list) and subs:
            problems = (
                check(sub.get("deviceClassName"), f"{name}/{sub.get('name')}", f"{where}.firstAvailable[{j}]")
                for j, sub in enumerate(subs)
                if isinstance(sub, Mapping)
            )
            problem = next((p for p in problems if p is not None), None)
        else:
            problem = f"resource claim {namespace}/{claim}, request {name}: unknown request type"
        if problem is not None:
            return problem
    return None


#: kube-scheduler's default ``DynamicResourcesArgs.bindingTimeout`` (seconds): how long after
#: its allocation a claim's devices may wait for their binding conditions.
BINDING_TIMEOUT_S = 600.0


def _binding_problem(name: str, obj: Mapping[str, Any], now: float | None, timeout_s: float) -> str | None:
    """Why an allocated claim's devices cannot be bound (kube-scheduler's
    ``isClaimReadyForBinding`` and ``isClaimTimeout``, with DRADeviceBindingConditions on by
    default): a result with ``bindingConditions`` whose device's status (``status.devices``,
    by driver, pool and device) has one of its ``bindingFailureConditions`` true; else, its
    binding conditions not all true (or no status) once ``timeout_s`` have passed since the
    allocation's ``allocationTimestamp`` (not judged when ``now`` is None); None otherwise."""
    status = mapping(obj.get("status") or {}, "status")
    allocation = mapping(status.get("allocation"), "status.allocation")
    devices = mapping(allocation.get("devices") or {}, "status.allocation.devices")
    where = "status.allocation.devices.results"
    results = [mapping(r, f"{where}[{k}]") for k, r in enumerate(listed(devices.get("results"), where))]
    statuses = [
        (i, d)
        for i, d in enumerate(listed(status.get("devices"), "status.devices"))
        if isinstance(d, Mapping)
    ]
    for k, result in enumerate(results):  # lists of names, as served (a string is no list of names)
        for part in ("bindingConditions", "bindingFailureConditions"):
            for j, wanted in enumerate(listed(result.get(part), f"{where}[{k}].{part}")):
                if not isinstance(wanted, str):
                    raise Malformed(f"{where}[{k}].{part}[{j}] {wanted!r} is not a string")
    ready = True
    for result in results:
        wanted = result.get("bindingConditions") or []
        if not wanted:
            continue
        key = (result.get("driver"), result.get("pool"), result.get("device"))
        found = next(
            ((i, d) for i, d in statuses if (d.get("driver"), d.get("pool"), d.get("device")) == key), None
        )
        if found is None:
            ready = False
            break
        at = f"status.devices[{found[0]}].conditions"
        conditions: dict[str, Mapping[str, Any]] = {}
        for j, c in enumerate(listed(found[1].get("conditions"), at)):
            if not isinstance(c, Mapping):
                continue
            kind = c.get("type")
            if not isinstance(kind, str):
                raise Malformed(f"{at}[{j}].type {kind!r} is not a string")
            conditions.setdefault(kind, c)  # apimeta.FindStatusCondition: the first of its type
        for failure in result.get("bindingFailureConditions") or []:
            cond = conditions.get(failure)
            if cond is not None and cond.get("status") == "True":
                reason, message = cond.get("reason") or "", cond.get("message") or ""
                return f'device binding failed: claim={name}, reason={reason}, message="{message}"'
        if not all((conditions.get(c) or {}).get("status") == "True" for c in wanted):
            ready = False
            break
    if ready or now is None:
        return None
    try:
        allocated_at = rfc3339_seconds(allocation.get("allocationTimestamp"))
    except ValueError:
        return None
    waiting = any(r.get("bindingConditions") is not None for r in results)
    if allocated_at is not None and waiting and allocated_at + timeout_s < now:
        return f"binding timed out: claim={name}, allocated {now - allocated_at:.0f} s ago"
    return None


def claims_verdict(
    pod: Pod,
    claims: ClaimsByKey,
    classes: Collection[str] | None = None,
    now: float | None = None,
    binding_timeout_s: float = BINDING_TIMEOUT_S,
    templates: ClaimsByKey | None = None,
) -> ClaimsVerdict:
    """kube-scheduler's DynamicResources PreFilter on ``pod``'s claims
    (:attr:`~stickypack.core.pod.Pod.claim_refs`, in its namespace, looked up in ``claims``):
    as its ``foreachPodResourceClaim``, the first entry whose claim is not known (a template's
    claim not created yet; a claim that does not exist), is being deleted, or, made from a
    template, is not controlled by the pod (its uid) rejects every node; a template entry
    whose status names no claim is skipped. Then, claim by claim, each allocated one is
    judged by its allocation's node selector; one not allocated yet whose requests ask for a
    DeviceClass not in ``classes`` (the DeviceClasses' names; None: not known, not checked)
    rejects every node; the others are :attr:`ClaimsVerdict.unallocated`, which the Filter
    allocates node by node (:class:`DynamicResourcesFilter`). An allocated claim
    whose devices' binding failed or timed out (:func:`_binding_problem`; ``now``: the time,
    seconds since the epoch, None: timeouts not judged) is unavailable on every node.

    ``templates``: the ResourceClaimTemplates by ``(namespace, name)`` (None: not listed).
    A pod file without a uid (not created yet) whose template entry has no status is one
    whose claim the resourceclaim controller makes from the template when it is created:
    with ``templates``, that claim (:func:`_claim_from_template`) is one not allocated yet
    (checked for its DeviceClasses, then allocated by the Filter), and a template that does
    not exist rejects every node (the claim is never made); without, it is not judged.

    ``ResourceClaimReservedForMaxSize`` (256 consumers in ``status.reservedFor``) is not a
    rejection: kube-scheduler v1.37.2's ``resourceclaim.CanBeReserved`` is always true (the
    API server refuses a 257th reservation when the pod is bound)."""
    not_judged: list[str] = []
    # each claim with whether it is one a template will make (not allocated), in the pod's order
    found: list[tuple[str, Mapping[str, Any], bool]] = []
    for ref in pod.claim_refs:
        if ref.claim is None:
            if ref.template and ref.listed:
                continue  # intentionally not created: nothing to check
            if ref.template and not pod.uid and templates is None:
                not_judged.append(f"{ref.name} (from its template, made when the pod is created)")
                continue
            if ref.template and not pod.uid:
                template = templates.get((pod.namespace, ref.template_name or "")) if templates else None
                if template is None:
                    why = f"ResourceClaimTemplate {pod.namespace}/{ref.template_name} does not exist"
                    return ClaimsVerdict(f'pod "{pod.key}": ResourceClaim not created yet ({why})')
                made = f"{ref.name} (from ResourceClaimTemplate {ref.template_name})"
                found.append((made, _claim_from_template(pod, ref.name, template), True))
                continue
            if ref.template:
                return ClaimsVerdict(f'pod "{pod.key}": ResourceClaim not created yet')
            why = "none of the supported fields are set"
            return ClaimsVerdict(f'pod "{pod.key}", spec.resourceClaim "{ref.name}": {why}')
        obj = claims.get((pod.namespace, ref.claim))
        if obj is None:
            return ClaimsVerdict(f'could not find ResourceClaim "{pod.namespace}/{ref.claim}"')
        meta = obj.get("metadata")
        meta = meta if isinstance(meta, Mapping) else {}
        if meta.get("deletionTimestamp"):
            return ClaimsVerdict(f'resourceclaim "{ref.claim}" is being deleted')
        if ref.template and (not pod.uid or _controller_uid(meta) != pod.uid):
            claim = f"ResourceClaim {pod.namespace}/{ref.claim}"
            return ClaimsVerdict(f"{claim} was not created for Pod {pod.key} (Pod is not owner)")
        found.append((ref.claim, obj, False))
    allocated: list[tuple[str, tuple[NodeSelectorTerm, ...] | None]] = []
    unallocated: list[tuple[str, Mapping[str, Any]]] = []
    unshared: list[str] = []
    unbindable: list[tuple[str, str]] = []
    for name, obj, from_template in found:
        status = obj.get("status")
        if from_template or not isinstance(status, Mapping) or status.get("allocation") is None:
            problem = (
                _request_class_problem(pod.namespace, name, obj, classes) if classes is not None else None
            )
            if problem is not None:
                return ClaimsVerdict(problem)
            unallocated.append((name, obj))
            continue
        try:
            allocated.append((name, _allocation_terms(obj)))
            problem = _binding_problem(name, obj, now, binding_timeout_s)
        except Malformed as exc:
            return ClaimsVerdict(f"ResourceClaim {pod.namespace}/{name}: {exc}")
        if problem is not None:
            unbindable.append((name, problem))
        users = status.get("reservedFor")
        users = users if isinstance(users, list) else []
        uids = [r.get("uid") if isinstance(r, Mapping) else None for r in users]
        if not uids or (len(uids) == 1 and pod.uid and uids[0] == pod.uid):
            unshared.append(name)
    return ClaimsVerdict(
        None, tuple(allocated), tuple(not_judged), tuple(unshared), tuple(unbindable), tuple(unallocated)
    )


#: The implicit extended resource of every DeviceClass (``deviceclass.resource.kubernetes.io/<class>``).
DEVICE_CLASS_RESOURCE_PREFIX = "deviceclass.resource.kubernetes.io/"
#: The name kube-scheduler gives the claim it allocates a pod's DRA-backed extended
#: resources in (``specialClaimInMemName``), as its messages name it.
EXTENDED_RESOURCES_CLAIM = "<extended-resources>"


def extended_resource_classes(classes: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    """Extended resource name to DeviceClass name, as kube-scheduler's
    ``ExtendedResourceCache`` maps them (DRAExtendedResource): every class's
    ``deviceclass.resource.kubernetes.io/<class>``, and its ``spec.extendedResourceName``
    (of classes naming the same one, the newest by ``creationTimestamp``, the first by name
    on a tie). ``classes``: the DeviceClass objects by name."""
    out = {f"{DEVICE_CLASS_RESOURCE_PREFIX}{name}": name for name in classes}
    chosen: dict[str, tuple[str, str]] = {}
    for name, obj in sorted(classes.items()):
        spec = obj.get("spec") if isinstance(obj, Mapping) else None
        resource = spec.get("extendedResourceName") if isinstance(spec, Mapping) else None
        if not isinstance(resource, str) or not resource:
            continue
        meta = obj.get("metadata")
        stamp = meta.get("creationTimestamp") if isinstance(meta, Mapping) else None
        stamp = stamp if isinstance(stamp, str) else ""
        best = chosen.get(resource)
        if best is None or stamp > best[0]:
            chosen[resource] = (stamp, name)
    out.update({resource: name for resource, (_, name) in chosen.items()})
    return out


def _extended_resources_claim(namespace: str, wanted: Mapping[str, tuple[str, int]]) -> ClaimRequests:
    """The claim kube-scheduler allocates a pod's DRA-backed extended resources in on a
    node (``wanted``: resource to its DeviceClass and the pod's request of it): one
    ``ExactCount`` request of the class per resource (upstream splits a resource's count
    by container; devices of one class are interchangeable, so the verdict is the same)."""
    requests = [
        {"name": f"request-{k}", "exactly": {"deviceClassName": device_class, "count": count}}
        for k, (device_class, count) in enumerate(wanted[r] for r in sorted(wanted))
    ]
    claim = {"spec": {"devices": {"requests": requests}}}
    return read_claim(f"{namespace}/{EXTENDED_RESOURCES_CLAIM}", claim)


class DynamicResourcesFilter(FilterPlugin):
    """kube-scheduler's DynamicResources filter (:func:`claims_verdict` on ``claims`` and
    ``classes``): a pod its PreFilter rejects passes no node; else, on each node, its
    unallocated claims are allocated together by ``allocator`` (kube-scheduler's structured
    allocator, :class:`~stickypack.core.draalloc.DraAllocator`; None: not judged, they pass
    everywhere) and the node passes when they can be (:meth:`outcome`), each of the pod's
    allocated claims' node selectors matches it (labels, and ``matchFields`` on
    ``metadata.name``) and none of their devices' binding failed or timed out (``now``, the
    time in seconds since the epoch; None: timeouts not judged). An allocation that errs
    (a CEL error) fails the node here; kube-scheduler then fails the whole scheduling
    attempt, which the caller tells (:meth:`outcomes`). Not one of a policy's plugins:
    ``stickypack inspect --pod --dra`` adds it when the claims are listed.

    ``extended``: the pod's extended resources a DeviceClass backs (resource to class,
    :func:`extended_resource_classes`): on a node listing none of one allocatable,
    kube-scheduler's NodeResourcesFit leaves it to this plugin (see
    :class:`~stickypack.core.plugins.kubescheduler.DraDelegatingFitFilter`), which allocates
    the pod's request of it from the class's devices, with its other claims
    (:data:`EXTENDED_RESOURCES_CLAIM`, last)."""

    name = "DynamicResources"
    pod_specific = True  # its claims, by name

    def __init__(
        self,
        claims: ClaimsByKey,
        classes: Collection[str] | None = None,
        now: float | None = None,
        binding_timeout_s: float = BINDING_TIMEOUT_S,
        allocator: DraAllocator | None = None,
        templates: ClaimsByKey | None = None,
        extended: Mapping[str, str] | None = None,
    ) -> None:
        self.claims = claims
        self.templates = templates
        self.extended = dict(extended or {})
        self.classes = classes
        self.now = now
        self.binding_timeout_s = binding_timeout_s
        self.allocator = allocator
        self._last: tuple[Pod, ClaimsVerdict] | None = None
        self._outcomes: dict[str, NodeAllocation] = {}
        self._read: tuple[Pod, list[ClaimRequests] | str] | None = None

    def verdict(self, pod: Pod) -> ClaimsVerdict:
        """:func:`claims_verdict` of ``pod``, kept for the last pod asked (one decision asks
        for it in each pass over the nodes and again for its report)."""
        if self._last is None or self._last[0] is not pod:
            found = claims_verdict(
                pod, self.claims, self.classes, self.now, self.binding_timeout_s, self.templates
            )
            self._last = (pod, found)
            self._outcomes = {}
        return self._last[1]

    def _to_allocate(self, pod: Pod) -> list[ClaimRequests] | str:
        """The pod's unallocated claims as the allocator reads them, or why one cannot be
        read (a claim not shaped as served)."""
        if self._read is None or self._read[0] is not pod:
            try:
                read: list[ClaimRequests] | str = [
                    read_claim(f"{pod.namespace}/{claim_key(obj)[1] or name}", obj)
                    for name, obj in self.verdict(pod).unallocated
                ]
            except ValueError as exc:
                read = str(exc)
            self._read = (pod, read)
        return self._read[1]

    def outcome(
        self, pod: Pod, node: str, labels: Mapping[str, str], delegated: Mapping[str, int] | None = None
    ) -> NodeAllocation | None:
        """Whether ``pod``'s unallocated claims, and the extended resources of
        :attr:`extended` that ``node`` leaves to DRA (``delegated``: resource to the pod's
        request), can be allocated on ``node`` (of ``labels``; kept per node for the last
        pod); None without an allocator or anything to allocate."""
        verdict = self.verdict(pod)
        if self.allocator is None or not (verdict.unallocated or delegated):
            return None
        found = self._outcomes.get(node)
        if found is None:
            claims = self._to_allocate(pod)
            if isinstance(claims, str):  # not as the API server serves it: not judged
                found = NodeAllocation(True, not_modelled=claims)
            else:
                if delegated:
                    wanted = {r: (self.extended[r], count) for r, count in delegated.items()}
                    claims = [*claims, _extended_resources_claim(pod.namespace, wanted)]
                found = self.allocator.allocate(node, labels, claims)
            self._outcomes[node] = found
        return found

    def _delegated(self, pod: Pod, table: NodeTable, row: int) -> dict[str, int]:
        """The pod's extended resources of :attr:`extended` that node ``row`` lists none of
        allocatable, with the pod's request of each."""
        out = {}
        for resource in self.extended:
            count = pod.requests.get(resource, 0)
            column = table.rindex.get(resource)
            if count > 0 and (column is None or table.alloc[row, column] == 0):
                out[resource] = int(count)
        return out

    def outcomes(self) -> Mapping[str, NodeAllocation]:
        """The nodes' allocation outcomes worked out for the last pod, by node name."""
        return dict(self._outcomes)

    def filter(self, pod: Pod, table: NodeTable, idx: np.ndarray, ctx: SchedulingContext) -> np.ndarray:
        if not pod.claim_refs and not self.extended:
            return np.ones(idx.shape[0], dtype=bool)
        verdict = self.verdict(pod)
        if verdict.rejected is not None or verdict.unbindable:
            return np.zeros(idx.shape[0], dtype=bool)
        out = np.ones(idx.shape[0], dtype=bool)
        if all(terms is None for _, terms in verdict.allocated) and (
            self.allocator is None or not (verdict.unallocated or self.extended)
        ):
            return out
        info = table.info
        for j, row in enumerate(idx.tolist()):
            node = info[row]
            labels, name = (node.labels, node.name) if node is not None else ({}, "")
            allocation = self.outcome(pod, name, labels, self._delegated(pod, table, row))
            if allocation is not None and not allocation.fits:
                out[j] = False
                continue
            out[j] = not verdict.unavailable_on(labels, name)
        return out
