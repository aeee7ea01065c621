"""The live cluster as a :class:`~stickypack.core.NodeTable`, fed by node and pod events.

:class:`ClusterCache` turns informer events into node-table updates:

- every Node becomes a row (allocatable, labels, taints, Ready, ``spec.unschedulable``);
- every bound, non-terminated Pod is accounted on its node (requests, build count); a pod
  bound to a node not yet seen waits until the node appears;
- a **build pod** (labels ``build_selector``, annotation ``binder-repo``) that *ends* while
  bound is reported to ``on_build_end(repo, node, when, phase)``. "Ends" means: its phase
  becomes Succeeded or Failed, or it is deleted (BinderHub deletes build pods when they
  finish; on a cluster without kubelets, as in tests, deletion is the only end there is).
  Feed it terminated pods too (no ``status.phase`` field selector: a pod leaving a watch's
  selection comes as a deletion with its state from before, which hides the phase).
  ``when`` is when the pod says it ended (:func:`pod_end_time`; :meth:`ClusterCache.end_time`),
  so an end seen late is not dated late; a pod first seen already terminated whose pod says
  nothing of when is not reported. Without ``on_build_end`` nothing is;
- a **builder pod** (labels ``builder_selector``, BinderHub's DinD/pink DaemonSet) marks its
  node as a candidate builder node (:meth:`builder_nodes`);
- a Node deletion is reported to ``on_node_deleted(name, when)``; a build pod left on it
  that ends afterwards (pod GC deletes it) is not reported: its cache died with the node;
  a Node new to the cache, to ``on_node_added(name, created)`` (its ``creationTimestamp``,
  None when unreadable);
- with ``dra``, the bound pods' DRA claims go to a :class:`~stickypack.kube.dra.NodeDraTracker`
  (:attr:`ClusterCache.dra`), which the ResourceSlice and ResourceClaim informers feed
  too, and which keeps each node's DRA utilization in the table (:meth:`ClusterCache.refresh_dra`).

It also keeps *assumptions*, like kube-scheduler's assume cache: when the extender has told
the scheduler where a build pod should go, it counts the pod there at once (so the next
decision, a few milliseconds later, already sees the load), until the real binding arrives
from the watch or ``assume_ttl_s`` passes.

Everything runs on one event loop; no locks.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from stickypack.core.labels import Taint, is_label
from stickypack.core.nodetable import NodeTable
from stickypack.core.pod import (
    DAEMONSET_POD_ANNOTATION,
    MIRROR_POD_ANNOTATION,
    Pod,
    PodSpecError,
    rfc3339_seconds,
)
from stickypack.core.resources import MAX_AMOUNT, parse_resource_list
from stickypack.kube.dra import NodeDraTracker

log = logging.getLogger(__name__)

TERMINAL_PHASES = ("Succeeded", "Failed")
DEFAULT_BUILD_SELECTOR = {"component": "binderhub-build"}
DEFAULT_BUILDER_SELECTOR = {"component": "image-builder", "app": "binder"}


def parse_selector(text: str | Mapping[str, str] | None) -> dict[str, str]:
    """``"a=b,c=d"`` (equality-based label selector) or a mapping -> dict; every key and
    value must be a valid label key and value (``ValueError`` otherwise)."""
    if text is None:
        return {}
    if isinstance(text, Mapping):
        # YAML ``{component: }`` is a null value: the empty label value, not "None"
        out = {str(k): "" if v is None else str(v) for k, v in text.items()}
    elif isinstance(text, str):
        out = {}
        for part in text.split(","):
            part = part.strip()
            if not part:
                continue
            key, sep, value = part.partition("=")
            if not sep or not key.strip() or value.startswith("="):
                raise ValueError(f"label selector {text!r}: expected key=value[,key=value...]")
            key, value = key.strip(), value.strip()
            if out.get(key, value) != value:  # Kubernetes would require both: no pod matches
                raise ValueError(f"label selector {text!r}: {key} given twice with different values")
            out[key] = value
    else:
        raise ValueError(f"a label selector is 'key=value,...' or a mapping, got {text!r}")
    for key, value in out.items():
        if not is_label(key, value):
            raise ValueError(f"{key}={value} is not a valid label")
    return out


def selector_text(selector: Mapping[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in selector.items())


def matches(labels: Mapping[str, str] | None, selector: Mapping[str, str]) -> bool:
    labels = labels or {}
    return all(labels.get(k) == v for k, v in selector.items())


#: Pod annotations the cache keeps (the rest can be large: last-applied configurations...):
#: the build repo (build pods), and what makes a DaemonSet or mirror pod to the autoscaler
#: (``NodeTable.unweighed_requested``).
KEPT_POD_ANNOTATIONS = ("binder-repo", MIRROR_POD_ANNOTATION, DAEMONSET_POD_ANNOTATION)
_LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def _resources_only(containers: Any, keep: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    out = []
    for c in containers or ():
        item = {"name": c.get("name"), "resources": c.get("resources") or {}}
        for k in keep:
            if k in c:
                item[k] = c[k]
        out.append(item)
    return out


def slim_pod(obj: dict[str, Any]) -> dict[str, Any]:
    """The fields of a Pod the cache reads (requests, node, phase, labels, build repo, the
    controller's owner reference, the DaemonSet and mirror pod annotations, and the DRA
    claims it uses: ``spec.resourceClaims`` and ``status.resourceClaimStatuses``)."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    annotations = meta.get("annotations") or {}
    slim_spec: dict[str, Any] = {
        "containers": _resources_only(spec.get("containers")),
        "initContainers": _resources_only(spec.get("initContainers"), ("restartPolicy",)),
    }
    for key in ("nodeName", "overhead", "schedulerName", "resources", "resourceClaims"):
        if key in spec:  # resources: pod-level
            slim_spec[key] = spec[key]
    slim_meta = {
        "name": meta.get("name"),
        "namespace": meta.get("namespace"),
        "uid": meta.get("uid"),
        "resourceVersion": meta.get("resourceVersion"),
        "creationTimestamp": meta.get("creationTimestamp"),  # DrainForecast's pod ages
        "labels": meta.get("labels") or {},
        "annotations": {k: annotations[k] for k in KEPT_POD_ANNOTATIONS if k in annotations},
        "deletionTimestamp": meta.get("deletionTimestamp"),
    }
    # the controller only (a DaemonSet's pods are left out of utilization by some autoscalers)
    owners = [
        o for o in meta.get("ownerReferences") or () if isinstance(o, dict) and o.get("controller") is True
    ]
    if owners:
        slim_meta["ownerReferences"] = [
            {**{k: owners[0].get(k) for k in ("apiVersion", "kind", "name")}, "controller": True}
        ]
    if "deletionGracePeriodSeconds" in meta:  # when the deletion was asked for: pod_end_time
        slim_meta["deletionGracePeriodSeconds"] = meta["deletionGracePeriodSeconds"]
    status = obj.get("status") or {}
    slim_status: dict[str, Any] = {"phase": status.get("phase")}
    if status.get("resourceClaimStatuses"):  # the names of claims made from templates
        slim_status["resourceClaimStatuses"] = status["resourceClaimStatuses"]
    if "binder-repo" in annotations:  # a build pod: when its containers ended (pod_end_time)
        for key in CONTAINER_STATUS_KEYS:
            states = _container_states(status.get(key))
            if states:
                slim_status[key] = states
    return {"metadata": slim_meta, "spec": slim_spec, "status": slim_status}


#: The pod status lists whose containers' ends date a build's end (init containers too: a
#: pod can fail in one, and a sidecar ends after the main containers).
CONTAINER_STATUS_KEYS = ("containerStatuses", "initContainerStatuses")


def _container_states(statuses: Any) -> list[dict[str, Any]]:
    """Each container's ``state`` reduced to its kind (``running``, ``waiting``,
    ``terminated``) and, when terminated, its ``finishedAt``: what :func:`pod_end_time`
    reads."""
    out: list[dict[str, Any]] = []
    for item in _list(statuses):
        state = item.get("state") if isinstance(item, Mapping) else None
        if not isinstance(state, Mapping):
            continue
        kept: dict[str, Any] = {k: {} for k in ("running", "waiting") if k in state}
        terminated = state.get("terminated")
        if isinstance(terminated, Mapping):
            kept["terminated"] = {"finishedAt": terminated.get("finishedAt")}
        out.append({"state": kept})
    return out


def _stamp(raw: Any) -> float | None:
    """An RFC 3339 time of the API in seconds, None when absent or not a time."""
    if not isinstance(raw, str):
        return None
    try:
        return rfc3339_seconds(raw)
    except ValueError:
        return None


def pod_end_time(obj: Mapping[str, Any]) -> float | None:
    """When a pod ended, as the pod itself tells (seconds since the epoch), or None.

    - the latest ``state.terminated.finishedAt`` of its containers and init containers,
      when none of them is still running (a container that never started adds nothing:
      a pod that failed in an init container ended with it);
    - else, when it is being deleted, when its deletion was asked for:
      ``metadata.deletionTimestamp`` less ``deletionGracePeriodSeconds`` (the API server sets
      the timestamp to the request's time plus the grace period; a later delete that
      shortens the grace, as the kubelet's last, to its own time plus the shorter grace).

    The API writes these times in whole seconds, and with the clocks of the kubelet and of
    the API server; a time that cannot be read is not there."""
    status = obj.get("status") or {}
    ends: list[float] = []
    running = False
    for key in CONTAINER_STATUS_KEYS:
        for item in _list(status.get(key) if isinstance(status, Mapping) else None):
            state = item.get("state") if isinstance(item, Mapping) else None
            if not isinstance(state, Mapping):
                continue
            if state.get("running") is not None:
                running = True
            terminated = state.get("terminated")
            if isinstance(terminated, Mapping):
                finished = _stamp(terminated.get("finishedAt"))
                if finished is not None:
                    ends.append(finished)
    if ends and not running:
        return max(ends)
    meta = obj.get("metadata") or {}
    deleting = _stamp(meta.get("deletionTimestamp"))
    if deleting is None:
        return None
    grace = meta.get("deletionGracePeriodSeconds")
    if isinstance(grace, int) and not isinstance(grace, bool) and 0 <= grace <= 10**9:
        deleting -= grace
    return deleting


def slim_node(obj: dict[str, Any]) -> dict[str, Any]:
    """The fields of a Node the cache reads (no managedFields, conditions but Ready...)."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if k != _LAST_APPLIED}
    return {
        "metadata": {
            "name": meta.get("name"),
            "uid": meta.get("uid"),  # a node recreated under its name is a new node
            "resourceVersion": meta.get("resourceVersion"),
            "creationTimestamp": meta.get("creationTimestamp"),
            "labels": meta.get("labels") or {},
            "annotations": annotations,
        },
        "spec": {"taints": spec.get("taints") or [], "unschedulable": bool(spec.get("unschedulable"))},
        "status": {
            "allocatable": status.get("allocatable"),
            "capacity": status.get("capacity"),
            "conditions": [c for c in status.get("conditions") or () if c.get("type") == "Ready"],
            "images": [
                {"names": _list(i.get("names")), "sizeBytes": i.get("sizeBytes")}
                for i in _list(status.get("images"))
                if isinstance(i, dict)
            ],
        },
    }


def node_row(obj: Mapping[str, Any]) -> dict[str, Any]:
    """Keyword arguments of :meth:`NodeTable.upsert_node` from a Node dict."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or ()
    )
    created = None
    stamp = meta.get("creationTimestamp")
    if stamp:
        try:
            created = rfc3339_seconds(stamp)
        except ValueError:
            created = None
    # The API server defaults a missing (nil) allocatable to capacity (SetDefaults_NodeStatus);
    # an empty one stays empty, and kube-scheduler reads allocatable only.
    allocatable = status.get("allocatable")
    if allocatable is None:
        allocatable = status.get("capacity")
    return {
        "created": created,
        "allocatable": parse_resource_list(allocatable),
        "labels": dict(meta.get("labels") or {}),
        "taints": [Taint.from_dict(t) for t in spec.get("taints") or ()],
        "annotations": dict(meta.get("annotations") or {}),
        "ready": ready,
        "unschedulable": bool(spec.get("unschedulable")),
        "images": node_images(status.get("images")),
    }


def _list(value: Any) -> list[Any]:
    """``value`` if it is a list, else none (a field of the wrong type is not read)."""
    return value if isinstance(value, list) else []


def node_images(listed: Any) -> dict[str, int]:
    """``status.images`` as ImageLocality reads it: every name of every image to its size
    in bytes. A missing or null ``sizeBytes`` is 0 (``omitempty``: kubelet leaves out a 0,
    and kube-scheduler counts such an image, at 0 bytes); entries with another size that is
    not a whole number in 0..MAX_AMOUNT, and anything not shaped like the API's list, are
    left out (kubelet writes this list; the API server does not check it)."""
    images: dict[str, int] = {}
    for image in _list(listed):
        if not isinstance(image, Mapping):
            continue
        size = image.get("sizeBytes")
        if size is None:
            size = 0
        if isinstance(size, bool) or not isinstance(size, int) or not 0 <= size <= MAX_AMOUNT:
            continue
        for name in _list(image.get("names")):
            if isinstance(name, str):
                images.setdefault(name, size)  # a name listed twice: the first, as the cache takes it
    return images


@dataclass(slots=True)
class _Placed:
    node: str
    pod: Pod
    accounted: bool  # counted in the table (its node is known)


@dataclass(slots=True)
class _Assumed:
    node: str
    pod: Pod
    expires: float
    accounted: bool


class ClusterCache:
    """Nodes and bound pods in a :class:`NodeTable`, plus build and builder bookkeeping."""

    def __init__(
        self,
        table: NodeTable | None = None,
        *,
        build_selector: Mapping[str, str] | None = None,
        builder_selector: Mapping[str, str] | None = None,
        on_build_end: Callable[[str, str, float, str], None] | None = None,
        on_node_deleted: Callable[[str, float], None] | None = None,
        on_node_added: Callable[[str, float | None], None] | None = None,
        record_failed: bool = True,
        assume_ttl_s: float = 30.0,
        clock: Callable[[], float] = time.time,
        ttl_clock: Callable[[], float] = time.monotonic,
        dra: bool = False,
    ) -> None:
        self.table = table if table is not None else NodeTable()
        #: The nodes' DRA readings (``dra``; None without), fed the bound pods' claims here
        #: and the ResourceSlices and ResourceClaims by their informers.
        self.dra: NodeDraTracker | None = NodeDraTracker(self.table) if dra else None
        self.build_selector = dict(DEFAULT_BUILD_SELECTOR if build_selector is None else build_selector)
        self.builder_selector = dict(
            DEFAULT_BUILDER_SELECTOR if builder_selector is None else builder_selector
        )
        self.on_build_end = on_build_end
        self.on_node_deleted = on_node_deleted
        self.on_node_added = on_node_added
        self.record_failed = record_failed
        self.assume_ttl_s = assume_ttl_s
        #: Wall time, seconds: when builds ended (the history's timestamps).
        self.clock = clock
        #: Seconds on a clock that does not jump: when assumptions expire.
        self.ttl_clock = ttl_clock
        self._pods: dict[str, _Placed] = {}  # pod key -> placement
        self._waiting: dict[str, set[str]] = {}  # node name -> pod keys bound to it, node unknown
        #: Nodes seen deleted whose pods are still there (waiting): a build on one that ends
        #: now died with its machine and must not put the forgotten node back in the history.
        self._deleted_nodes: set[str] = set()
        self._assumed: dict[str, _Assumed] = {}  # pod key -> assumption
        self._ended: set[str] = set()  # uids of build pods whose end was reported
        self._builders: dict[str, str] = {}  # builder pod key -> node
        self._builder_nodes_cache: list[str] | None = None
        self.builds_recorded = 0
        #: Bumped when a node is added or removed (not on a status update).
        self.nodeset_version = 0
        #: Bumped whenever :meth:`builder_nodes` may answer differently (a builder pod or
        #: a node came or went), so callers can key caches of anything derived from it.
        self.builders_version = 0

    # ---- nodes -----------------------------------------------------------------------------

    def node_event(self, kind: str, obj: Mapping[str, Any], old: Any = None, synthetic: bool = False) -> None:
        name = (obj.get("metadata") or {}).get("name")
        if not name:
            return
        if kind == "DELETED":
            self._remove_node(name)
            if self.on_node_deleted is not None:
                self.on_node_deleted(name, self.clock())
            return
        known = name in self.table
        row = node_row(obj)
        self.table.upsert_node(name, **row)
        if not known:
            self.nodeset_version += 1
            self._builders_changed()
            self._deleted_nodes.discard(name)
            if self.dra is not None:
                self.dra.node_added(name)
            i = self.table.index[name]
            for key in self._waiting.pop(name, ()):
                placed = self._pods.get(key)
                if placed is not None and placed.node == name and not placed.accounted:
                    self.table.add_pod(i, placed.pod)
                    placed.accounted = True
            for a in self._assumed.values():
                if a.node == name and not a.accounted:
                    self.table.add_pod(i, a.pod)
                    a.accounted = True
            if self.on_node_added is not None:
                self.on_node_added(name, row["created"])

    def _builders_changed(self) -> None:
        self._builder_nodes_cache = None
        self.builders_version += 1

    def _remove_node(self, name: str) -> None:
        if name not in self.table:
            return
        self.table.remove_node(name)
        self.nodeset_version += 1
        self._builders_changed()
        for key, placed in self._pods.items():
            if placed.node == name and placed.accounted:
                placed.accounted = False
                self._waiting.setdefault(name, set()).add(key)
        for a in self._assumed.values():
            if a.node == name:
                a.accounted = False
        if name in self._waiting:
            self._deleted_nodes.add(name)

    # ---- pods ------------------------------------------------------------------------------

    def pod_event(self, kind: str, obj: Mapping[str, Any], old: Any = None, synthetic: bool = False) -> None:
        meta = obj.get("metadata") or {}
        key = f"{meta.get('namespace')}/{meta.get('name')}"
        spec = obj.get("spec") or {}
        node = spec.get("nodeName") or None
        phase = (obj.get("status") or {}).get("phase") or "Pending"
        labels = meta.get("labels") or {}
        if self.builder_selector and matches(labels, self.builder_selector):
            before = self._builders.get(key)
            if kind == "DELETED" or node is None or phase in TERMINAL_PHASES:
                self._builders.pop(key, None)
            else:
                self._builders[key] = node
            if before != self._builders.get(key):
                self._builders_changed()
        gone = kind == "DELETED" or phase in TERMINAL_PHASES
        # The pod is no longer assumed once the watch tells us anything about its binding.
        if node is not None or gone:
            self._drop_assumption(key)
        if gone:
            # A build on a node deleted meanwhile is not recorded (its cache went with it).
            report = node not in self._deleted_nodes
            self._unplace(key)
            if node is not None:
                self._maybe_build_end(kind, obj, node, phase, report=report)
            return
        if node is None:
            return
        placed = self._pods.get(key)
        try:
            pod = Pod.from_dict(obj)
        except PodSpecError as exc:
            log.warning("pod %s ignored: %s", key, exc)
            return
        if placed is not None:
            was = placed.pod
            if (  # nothing the table accounts by changed (else the pod is accounted again)
                placed.node == node
                and was.requests == pod.requests
                and was.build_repo == pod.build_repo
                and was.is_daemonset_pod == pod.is_daemonset_pod
                and was.is_mirror_pod == pod.is_mirror_pod
                and was.resource_claims == pod.resource_claims
            ):
                placed.pod = pod
                return
            self._unplace(key)
        self._place(key, node, pod)

    def _place(self, key: str, node: str, pod: Pod) -> None:
        i = self.table.index.get(node)
        placed = _Placed(node, pod, accounted=i is not None)
        if i is not None:
            self.table.add_pod(i, pod)
        else:
            self._waiting.setdefault(node, set()).add(key)
        self._pods[key] = placed
        if self.dra is not None:
            self.dra.pod_added(key, node, pod)

    def _unplace(self, key: str) -> None:
        placed = self._pods.pop(key, None)
        if placed is None:
            return
        if self.dra is not None:
            self.dra.pod_removed(key, placed.node)
        if placed.accounted:
            i = self.table.index.get(placed.node)
            if i is not None:
                self.table.remove_pod(i, placed.pod)
        else:
            waiting = self._waiting.get(placed.node)
            if waiting is not None:
                waiting.discard(key)
                if not waiting:
                    del self._waiting[placed.node]
                    self._deleted_nodes.discard(placed.node)

    def _maybe_build_end(
        self, kind: str, obj: Mapping[str, Any], node: str, phase: str, report: bool = True
    ) -> None:
        meta = obj.get("metadata") or {}
        repo = (meta.get("annotations") or {}).get("binder-repo")
        if self.on_build_end is None or not repo or not matches(meta.get("labels"), self.build_selector):
            return
        uid = str(meta.get("uid") or f"{meta.get('namespace')}/{meta.get('name')}")
        first = uid not in self._ended
        if kind == "DELETED":
            self._ended.discard(uid)  # never seen again
        else:
            self._ended.add(uid)  # terminated but still there: report once
        if not first or not report:
            return
        phase = phase if phase in TERMINAL_PHASES else "Deleted"
        if phase == "Failed" and not self.record_failed:
            return
        when = self.end_time(kind, obj, node)
        if when is None:
            return
        self.builds_recorded += 1
        self.on_build_end(repo, node, when, phase)

    def end_time(self, kind: str, obj: Mapping[str, Any], node: str) -> float | None:
        """When build pod ``obj``, just seen ended on ``node``, ended; None: not recorded.

        The pod's own time (:func:`pod_end_time`), so an end seen late (after a restart, a
        watch outage) is not dated late: that outlived a forget of its node written
        meanwhile, and aged late. Never later than now; a pod time within a second before
        now is now (a live sighting: finer than the API's whole seconds). A pod time before
        the node's creation is an older machine of that name: not recorded. Without a pod
        time: now, but a pod first seen already ended (``ADDED``: a list at start-up or
        after an outage) ended at some unknown time before: not recorded."""
        now = self.clock()
        ended = pod_end_time(obj)
        if ended is None:
            return None if kind == "ADDED" else now
        i = self.table.index.get(node)
        if i is not None and ended < self.table.created[i]:
            return None
        return now if ended > now - 1.0 else ended

    # ---- assumptions -----------------------------------------------------------------------

    def assume(self, key: str, pod: Pod, node: str) -> bool:
        """Count ``pod`` on ``node`` until the watch reports its binding (or TTL). False,
        and nothing done, when the pod is already placed or assumed."""
        if key in self._pods or key in self._assumed:
            return False
        i = self.table.index.get(node)
        if i is not None:
            self.table.add_pod(i, pod)
        self._assumed[key] = _Assumed(node, pod, self.ttl_clock() + self.assume_ttl_s, i is not None)
        return True

    def unassume(self, key: str) -> str | None:
        """Stop counting ``key``'s assumption, if any, and return the node it was on: the
        pod is being scheduled again (its binding or a later step of kube-scheduler's cycle
        failed, as its ForgetPod undoes), so it must not count against itself."""
        a = self._assumed.get(key)
        if a is None:
            return None
        self._drop_assumption(key)
        return a.node

    def _drop_assumption(self, key: str) -> None:
        a = self._assumed.pop(key, None)
        if a is not None and a.accounted:
            i = self.table.index.get(a.node)
            if i is not None:
                self.table.remove_pod(i, a.pod)
                if a.pod.build_repo is not None and self.table.build_starts[i] > 0:
                    # the real binding counts the start; an assumption never does for good
                    self.table.build_starts[i] -= 1

    def expire_assumptions(self) -> int:
        if not self._assumed:
            return 0
        now = self.ttl_clock()
        stale = [k for k, a in self._assumed.items() if a.expires <= now]
        for key in stale:
            self._drop_assumption(key)
        return len(stale)

    @property
    def assumed(self) -> dict[str, str]:
        """Pod key -> assumed node."""
        return {k: a.node for k, a in self._assumed.items()}

    def refresh_dra(self) -> None:
        """Bring the table's DRA readings up to date (the nodes whose slices, claims or pods
        changed since the last call: :meth:`NodeDraTracker.refresh`); nothing without
        ``dra``. Call it before a decision reads the table."""
        if self.dra is not None:
            self.dra.refresh()

    # ---- views -----------------------------------------------------------------------------

    def builder_nodes(self) -> list[str] | None:
        """Nodes running a builder pod (and known to the table), sorted; None when there is
        none, meaning every node can build."""
        if self._builder_nodes_cache is None:
            nodes = sorted({n for n in self._builders.values() if n in self.table})
            self._builder_nodes_cache = nodes
        return self._builder_nodes_cache or None

    def placement(self, key: str) -> str | None:
        placed = self._pods.get(key)
        return placed.node if placed else None
