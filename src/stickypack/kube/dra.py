"""The cluster's DRA state as the extender keeps it (``cluster.dra``, the autoscaler's
``--enable-dynamic-resource-allocation``): per node, its DRA utilization
(:func:`~stickypack.core.dra.dra_utilization`) in the node table
(:func:`~stickypack.core.dra.set_node_dra`), from the ResourceSlices and ResourceClaims
its informers bring and the claims of the pods bound to each node (the pod cache's,
:class:`~stickypack.kube.cache.ClusterCache`).

Events only mark the nodes they touch: a slice's node, the nodes whose pods use a claim, a
pod's node (pods without claims touch nothing). :meth:`NodeDraTracker.refresh` recomputes
those nodes alone, before a decision reads the table, so a burst of events (a relist) costs
one computation per node touched. Everything runs on one event loop; no locks.

Also what the informers keep of the objects (:func:`slim_resource_slice`,
:func:`slim_resource_claim`: what ``dra_utilization`` reads), shared with
``stickypack inspect --dra``.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping
from typing import Any

from stickypack.core.dra import NodeDra, claim_key, dra_utilization, set_node_dra
from stickypack.core.nodetable import NodeTable
from stickypack.core.pod import Pod

log = logging.getLogger(__name__)

#: What :func:`~stickypack.core.dra.dra_utilization` reads of a device (its attributes and
#: capacity, most of a slice, are dropped).
_DEVICE_KEYS = ("name", "consumesCounters")
#: Problem lines remembered as logged (then forgotten, so a flood cannot grow the set).
_MAX_LOGGED = 10_000


def slim_resource_slice(obj: dict[str, Any]) -> dict[str, Any]:
    """A ResourceSlice without what :func:`~stickypack.core.dra.dra_utilization` does not
    read; anything not shaped as served is kept as is, for it to report."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return obj
    devices = spec.get("devices")
    if isinstance(devices, list):
        devices = [{k: d[k] for k in _DEVICE_KEYS if k in d} if isinstance(d, dict) else d for d in devices]
    kept = {k: spec[k] for k in ("nodeName", "driver", "pool", "sharedCounters") if k in spec}
    return {"metadata": _name_meta(obj), "spec": {**kept, "devices": devices}}


def slim_resource_claim(obj: dict[str, Any]) -> dict[str, Any]:
    """A ResourceClaim's metadata (:data:`_META_KEYS`; and, for kube-scheduler's
    DynamicResources PreFilter as ``inspect --pod`` judges it, ``deletionTimestamp`` and the
    controller's owner reference; its requests' DeviceClasses), ``status.allocation`` (what
    is allocated of it, and on which nodes: its ``nodeSelector``), the uids of
    ``status.reservedFor`` and the devices' conditions (``status.devices``)."""
    status = obj.get("status")
    kept = {"allocation": status.get("allocation")} if isinstance(status, dict) else status
    if isinstance(kept, dict) and isinstance(status, dict) and isinstance(status.get("reservedFor"), list):
        # who uses it (the uids), for the DynamicResources PostFilter inspect --pod tells of
        kept["reservedFor"] = [
            {"uid": r.get("uid")} if isinstance(r, dict) else r for r in status["reservedFor"]
        ]
    if isinstance(kept, dict) and isinstance(status, dict) and isinstance(status.get("devices"), list):
        # the devices' conditions, for their binding conditions (DRADeviceBindingConditions)
        kept["devices"] = [
            {k: d.get(k) for k in ("driver", "pool", "device", "conditions")} if isinstance(d, dict) else d
            for d in status["devices"]
        ]
    meta = _name_meta(obj)
    raw = obj.get("metadata")
    if isinstance(raw, dict):
        if raw.get("deletionTimestamp"):
            meta["deletionTimestamp"] = raw["deletionTimestamp"]
        owners = raw.get("ownerReferences")
        owners = owners if isinstance(owners, list) else []
        controllers = [r for r in owners if isinstance(r, dict) and r.get("controller") is True]
        if controllers:
            meta["ownerReferences"] = [{"uid": controllers[0].get("uid"), "controller": True}]
    slim: dict[str, Any] = {"metadata": meta, "status": kept}
    requests = _device_requests(obj)
    if requests is not None:
        slim["spec"] = {"devices": {"requests": requests}}
    return slim


def allocation_resource_slice(obj: dict[str, Any]) -> dict[str, Any]:
    """A ResourceSlice as kube-scheduler's allocator reads it (``inspect --dra``): its
    whole ``spec`` (devices with their attributes, capacity, taints and node selection)."""
    spec = obj.get("spec")
    return {"metadata": _name_meta(obj), "spec": spec} if isinstance(spec, dict) else obj


def allocation_resource_claim(obj: dict[str, Any]) -> dict[str, Any]:
    """:func:`slim_resource_claim` with the claim's ``spec.devices`` requests and constraints
    whole, as kube-scheduler's allocator reads them (``inspect --dra``)."""
    slim = slim_resource_claim(obj)
    spec = obj.get("spec")
    devices = spec.get("devices") if isinstance(spec, dict) else None
    if isinstance(devices, dict):
        slim["spec"] = {"devices": {k: devices[k] for k in ("requests", "constraints") if k in devices}}
    return slim


def allocation_device_taint_rule(obj: dict[str, Any]) -> dict[str, Any]:
    """A DeviceTaintRule as kube-scheduler's ResourceSlice tracker reads it for the allocator
    (``inspect --pod --dra``): its name, ``spec.deviceSelector`` and ``spec.taint`` (not its
    status, which scheduling does not read)."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return obj
    return {
        "metadata": _name_meta(obj),
        "spec": {k: spec[k] for k in ("deviceSelector", "taint") if k in spec},
    }


def _device_requests(obj: dict[str, Any]) -> list[Any] | None:
    """A claim's ``spec.devices.requests`` with only what names their DeviceClasses (each
    request's ``name``, ``exactly.deviceClassName``, ``firstAvailable[].name`` and
    ``deviceClassName``); None when it has none readable (a request not shaped as served is
    kept as is)."""
    spec = obj.get("spec")
    devices = spec.get("devices") if isinstance(spec, dict) else None
    requests = devices.get("requests") if isinstance(devices, dict) else None
    if not isinstance(requests, list):
        return None
    out: list[Any] = []
    for request in requests:
        if not isinstance(request, dict):
            out.append(request)
            continue
        kept: dict[str, Any] = {"name": request.get("name")}
        exactly = request.get("exactly")
        if isinstance(exactly, dict):
            kept["exactly"] = {"deviceClassName": exactly.get("deviceClassName")}
        elif exactly is not None:
            kept["exactly"] = exactly
        subs = request.get("firstAvailable")
        if isinstance(subs, list):
            kept["firstAvailable"] = [
                {"name": sub.get("name"), "deviceClassName": sub.get("deviceClassName")}
                if isinstance(sub, dict)
                else sub
                for sub in subs
            ]
        out.append(kept)
    return out


#: What the slimmers keep of ``metadata``: the object's name, and what an informer's relist
#: compares to find the objects that changed (``resourceVersion``) or were created again
#: under their name (``uid``) while its watch was away.
_META_KEYS = ("name", "namespace", "uid", "resourceVersion")


def _name_meta(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata")
    return {k: meta.get(k) for k in _META_KEYS} if isinstance(meta, dict) else {}


def _slice_node(obj: Mapping[str, Any]) -> str | None:
    """The node of a node-local slice (``spec.nodeName``), None for any other (or one that
    names none readably: ``dra_utilization`` would leave it out)."""
    spec = obj.get("spec")
    node = spec.get("nodeName") if isinstance(spec, Mapping) else None
    return node if isinstance(node, str) and node else None


class NodeDraTracker:
    """Each node's DRA reading, kept in ``table`` as of the last :meth:`refresh`.

    Feed it :meth:`slice_event` and :meth:`claim_event` (informer handlers, the objects
    slimmed or not), :meth:`pod_added` / :meth:`pod_removed` for each bound pod the node
    table counts (only pods with DRA claims are kept), and :meth:`node_added` when the
    table gives a node a new row. A node whose reading is an error (an incomplete pool, a
    claim of a pod there not allocated or not found) is kept as +inf: the autoscaler keeps
    it, so it is busy. Objects that cannot be read are left out and logged once each."""

    def __init__(self, table: NodeTable) -> None:
        self.table = table
        self._slice_nodes: dict[str, str] = {}  # slice name -> its node
        self._node_slices: dict[str, dict[str, Mapping[str, Any]]] = {}  # node -> slice name -> slice
        self._claims: dict[tuple[str, str], Mapping[str, Any]] = {}
        self._claim_nodes: dict[tuple[str, str], Counter[str]] = {}  # claim -> nodes of pods using it
        self._node_pods: dict[str, dict[str, Pod]] = {}  # node -> pod key -> pod (with claims)
        self._dirty: set[str] = set()
        #: The last reading of every node with node-local slices (readable ones).
        self.readings: dict[str, NodeDra] = {}
        #: Node readings computed so far (each refresh adds the nodes it recomputed).
        self.computed = 0
        self._logged: set[str] = set()

    # ---- events ----------------------------------------------------------------------------

    def slice_event(
        self, kind: str, obj: Mapping[str, Any], old: Any = None, synthetic: bool = False
    ) -> None:
        """An informer handler for ResourceSlices."""
        meta = obj.get("metadata")
        name = meta.get("name") if isinstance(meta, Mapping) else None
        if not isinstance(name, str):
            return
        before = self._slice_nodes.pop(name, None)
        if before is not None:
            self._node_slices[before].pop(name, None)
            if not self._node_slices[before]:
                del self._node_slices[before]
            self._dirty.add(before)
        node = _slice_node(obj)
        if kind == "DELETED" or node is None:
            return
        self._slice_nodes[name] = node
        self._node_slices.setdefault(node, {})[name] = obj
        self._dirty.add(node)

    def claim_event(
        self, kind: str, obj: Mapping[str, Any], old: Any = None, synthetic: bool = False
    ) -> None:
        """An informer handler for ResourceClaims."""
        key = claim_key(obj)
        if kind == "DELETED":
            self._claims.pop(key, None)
        else:
            self._claims[key] = obj
        self._dirty.update(self._claim_nodes.get(key, ()))

    def pod_added(self, key: str, node: str, pod: Pod) -> None:
        """Pod ``key`` is bound to ``node`` (nothing kept for a pod without DRA claims)."""
        if not pod.resource_claims:
            return
        self._node_pods.setdefault(node, {})[key] = pod
        for name in set(pod.resource_claims) - {""}:
            self._claim_nodes.setdefault((pod.namespace, name), Counter())[node] += 1
        self._dirty.add(node)

    def pod_removed(self, key: str, node: str) -> None:
        """Pod ``key`` no longer counts on ``node``."""
        pods = self._node_pods.get(node)
        pod = pods.pop(key, None) if pods is not None else None
        if pod is None:
            return
        if not pods:
            del self._node_pods[node]
        for name in set(pod.resource_claims) - {""}:
            users = self._claim_nodes[(pod.namespace, name)]
            users[node] -= 1
            if users[node] <= 0:
                del users[node]
                if not users:
                    del self._claim_nodes[(pod.namespace, name)]
        self._dirty.add(node)

    def node_added(self, name: str) -> None:
        """The table gave node ``name`` a new row (zeroed): write its reading there again."""
        self._dirty.add(name)

    # ---- readings --------------------------------------------------------------------------

    def refresh(self) -> int:
        """Recompute the nodes touched since the last call and write them into the table;
        how many were recomputed. A node whose reading raises is logged and kept as one the
        autoscaler cannot weigh (busy) until its next change; the others are written."""
        dirty, self._dirty = self._dirty, set()
        for node in dirty:
            try:
                reading = self._compute(node)
            except Exception as exc:  # unforeseen: must not fail every decision
                log.exception("DRA: node %s cannot be weighed (%r); taken as busy", node, exc)
                reading = NodeDra(0.0, None, error=f"its reading failed: {type(exc).__name__}: {exc}")
            if reading is None:
                self.readings.pop(node, None)
            else:
                self.readings[node] = reading
            row = self.table.index.get(node)
            if row is not None:
                set_node_dra(self.table, row, reading)
        self.computed += len(dirty)
        return len(dirty)

    def _compute(self, node: str) -> NodeDra | None:
        slices = self._node_slices.get(node)
        if not slices:
            return None
        pods = list(self._node_pods.get(node, {}).values())
        used = {(p.namespace, name) for p in pods for name in p.resource_claims}
        claims = [self._claims[k] for k in sorted(used) if k in self._claims]
        # by name, as a list brings them (``inspect --dra``), not as the events came
        result = dra_utilization([slices[name] for name in sorted(slices)], claims, {node: pods})
        for problem in result.problems:
            if problem not in self._logged:
                if len(self._logged) >= _MAX_LOGGED:
                    self._logged.clear()
                self._logged.add(problem)
                log.warning("DRA: %s", problem)
        return result.nodes.get(node)
