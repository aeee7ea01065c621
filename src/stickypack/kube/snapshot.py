"""A one-time snapshot of a cluster, for ``stickypack inspect``: nodes and bound pods listed
once (paged, as the extender's informers list them) into a :class:`ClusterCache`, and the
pods each node holds.

Each page is slimmed as it arrives (:func:`snapshot_pod`, :func:`~stickypack.kube.cache.slim_node`),
so a big cluster costs a page of full objects at a time plus what is read of every pod, not
every full object at once (managedFields, status and last-applied annotations are most of a
pod)."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from stickypack.core.explain import (
    REPLICA_COUNTED_CONTROLLERS,
    SAFE_TO_EVICT_ANNOTATION,
    SAFE_TO_EVICT_LOCAL_VOLUMES_ANNOTATION,
    DisruptionBudget,
)
from stickypack.core.pod import DAEMONSET_POD_ANNOTATION, MIRROR_POD_ANNOTATION, Pod, PodSpecError
from stickypack.core.quantity import QuantityError
from stickypack.core.resources import CPU, MEMORY, parse_resource_list
from stickypack.core.routing import LabelSelector, SelectorError
from stickypack.core.topologyspread import default_selector, default_selector_kind
from stickypack.core.volumes import VOLUME_ZONE_LABELS, ClaimVolumes, claim_volumes
from stickypack.kube.cache import TERMINAL_PHASES, ClusterCache, slim_node, slim_pod
from stickypack.kube.dra import (
    allocation_device_taint_rule,
    allocation_resource_claim,
    allocation_resource_slice,
    slim_resource_claim,
    slim_resource_slice,
)
from stickypack.kube.informer import Informer, WatchError

if TYPE_CHECKING:
    from kubernetes_asyncio.client import ApiClient

#: Pod annotations :func:`~stickypack.core.explain.pins_node` reads.
AUTOSCALER_ANNOTATIONS = (
    SAFE_TO_EVICT_ANNOTATION,
    MIRROR_POD_ANNOTATION,
    DAEMONSET_POD_ANNOTATION,
    SAFE_TO_EVICT_LOCAL_VOLUMES_ANNOTATION,
)

#: The volumes :func:`snapshot_pod` keeps: local storage and claims.
KEPT_VOLUME_KINDS = ("hostPath", "emptyDir", "persistentVolumeClaim", "ephemeral")


def snapshot_pod(obj: dict[str, Any]) -> dict[str, Any]:
    """:func:`~stickypack.kube.cache.slim_pod` (what the node table reads) plus what the
    autoscaler's rules read (slim_pod keeps the controller's owner reference): the ``hostPath``,
    ``emptyDir``, ``persistentVolumeClaim`` and ``ephemeral`` volumes, the priority
    (expendable pods), :data:`AUTOSCALER_ANNOTATIONS`, and what kube-scheduler's filters read
    in the scale-down simulation (node selector, tolerations, affinity, host ports, topology
    spread constraints) and the node it is nominated to, if any."""
    slim = slim_pod(obj)
    meta = obj.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    slim["metadata"]["annotations"].update(
        {k: annotations[k] for k in AUTOSCALER_ANNOTATIONS if k in annotations}
    )
    volumes = (obj.get("spec") or {}).get("volumes") or ()
    # local storage (the autoscaler's rule) and the claims (VolumeBinding, VolumeZone); of an
    # ephemeral volume only that it is one (its claim is named after the pod and the volume)
    kept_volumes = [
        {
            "name": v.get("name"),
            **{k: v[k] for k in ("hostPath", "emptyDir", "persistentVolumeClaim") if k in v},
            **({"ephemeral": {}} if v.get("ephemeral") is not None else {}),
        }
        for v in volumes
        if isinstance(v, dict) and any(k in v for k in KEPT_VOLUME_KINDS)
    ]
    if kept_volumes:
        slim["spec"]["volumes"] = kept_volumes
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    if status.get("nominatedNodeName"):  # where it counts
        slim["status"]["nominatedNodeName"] = status["nominatedNodeName"]
    for key in ("priority", "terminationGracePeriodSeconds"):  # expendable, long-terminating pods
        if spec.get(key) is not None:
            slim["spec"][key] = spec[key]
    # where the scale-down simulation may move the pod: kube-scheduler's filters read these
    for key in (
        "nodeSelector",
        "tolerations",
        "affinity",
        "hostNetwork",
        "topologySpreadConstraints",
    ):
        if spec.get(key) is not None:
            slim["spec"][key] = spec[key]
    host_network = spec.get("hostNetwork") is True
    for kind in ("containers", "initContainers"):
        for kept, container in zip(slim["spec"][kind], spec.get(kind) or (), strict=True):
            bound = [
                p
                for p in container.get("ports") or ()
                if isinstance(p, dict) and (p.get("hostPort") or host_network)
            ]
            if bound:  # NodePorts: only the ports bound on the node
                kept["ports"] = bound
    return slim


@dataclass(frozen=True, slots=True)
class DraObjects:
    """The cluster's ResourceSlices and ResourceClaims, as
    :func:`~stickypack.core.dra.dra_utilization` takes them."""

    slices: list[dict[str, Any]]
    claims: list[dict[str, Any]]
    #: The DeviceClasses' names (kube-scheduler's DynamicResources PreFilter rejects a pod
    #: whose claim not allocated yet asks for one that does not exist); None when they could
    #: not be listed (no ``list`` right on ``deviceclasses``: the check is not made).
    classes: frozenset[str] | None = None
    #: The DeviceClasses (name and ``spec.selectors``) by name, for kube-scheduler's
    #: allocator as ``inspect --dra`` runs it (``--pod``, the node report's plan); None when not listed.
    device_classes: dict[str, dict[str, Any]] | None = None
    #: The ResourceClaimTemplates (name, namespace and ``spec.spec.devices``) by
    #: ``(namespace, name)``, for a pod file's template entries; None when they could not be
    #: listed (no ``list`` right on ``resourceclaimtemplates``) or were not asked for.
    templates: dict[tuple[str, str], dict[str, Any]] | None = None
    #: The DeviceTaintRules (name, ``spec.deviceSelector`` and ``spec.taint``), in name
    #: order, for kube-scheduler's allocator; None when they could not be listed (no
    #: ``list`` right on ``devicetaintrules``, or ``resource.k8s.io/v1`` does not serve
    #: them) or were not asked for.
    taint_rules: list[dict[str, Any]] | None = None


@dataclass
class Snapshot:
    """``cache``: the nodes and the pods bound to them, as the extender would hold them;
    ``pods_by_node``: those pods by node name; ``unreadable``: keys of pods skipped because
    their spec could not be read (as the extender skips them); ``budgets``: see below."""

    cache: ClusterCache
    pods_by_node: dict[str, list[Pod]] = field(default_factory=dict)
    unreadable: list[str] = field(default_factory=list)
    #: The cluster's PodDisruptionBudgets; None when they could not be listed (no right).
    budgets: tuple[DisruptionBudget, ...] | None = ()
    #: ``(kind, namespace, name)`` of every controller whose existence the autoscaler
    #: checks (:data:`~stickypack.core.explain.CHECKED_CONTROLLERS`), mapped to its
    #: ``spec.replicas`` (ReplicaSets and ReplicationControllers, else None); None when
    #: they were not asked for.
    controllers: dict[tuple[str, str, str], int | None] | None = None
    #: Kinds of controllers that could not be listed (no right, or not served), with
    #: the API server's status for each (401, 403 or 404).
    unlisted_controllers: dict[str, int] = field(default_factory=dict)
    #: Each namespace's labels (pod affinity terms' ``namespaceSelector``); None when they
    #: could not be listed (no right) or were not asked for.
    namespace_labels: dict[str, dict[str, str]] | None = None
    #: Each PersistentVolumeClaim with the placement of the volume it is bound to
    #: (:data:`~stickypack.core.volumes.ClaimVolumes`); None when claims or volumes could not
    #: be listed (no right) or were not asked for.
    claim_volumes: ClaimVolumes | None = None
    #: The ResourceSlices and ResourceClaims (slimmed to what
    #: :func:`~stickypack.core.dra.dra_utilization` reads, by name); None when they were not
    #: asked for or could not be listed (then :attr:`dra_unlisted` says why).
    dra: DraObjects | None = None
    #: The API server's status (401, 403: no right; 404: ``resource.k8s.io/v1`` not served)
    #: when ResourceSlices or ResourceClaims could not be listed; None otherwise.
    dra_unlisted: int | None = None
    #: Keys of the pods not yet bound that the scheduler has nominated to a node
    #: (``status.nominatedNodeName``: a preemptor, or since Kubernetes 1.35 a pod whose
    #: binding waits): counted on that node, as the autoscaler's snapshot counts them
    #: (:func:`as_placed_on_nominated_node`).
    nominated: list[str] = field(default_factory=list)
    #: With ``nominated_apart``: node name -> the pending pods nominated to it, by key, not
    #: counted in the node table: kube-scheduler's filters count those of a priority at least
    #: the pod's (:func:`~stickypack.core.explain.explain_placement`), its scores do not.
    nominated_pods: dict[str, list[Pod]] = field(default_factory=dict)
    #: The placed pod's :attr:`~stickypack.core.pod.Pod.default_spread_selector`
    #: (:func:`spread_selector`), for ``inspect --pod``; None: it selects nothing, or it was
    #: not read (:attr:`spread_selector_read`).
    default_spread_selector: LabelSelector | None = None
    #: Whether the Services and the pod's controller were read for it: None when not asked
    #: (the node report, a pod with spread constraints of its own, or a policy that does not
    #: score PodTopologySpread), False when listing them was refused (401, 403; 404: not
    #: served).
    spread_selector_read: bool | None = None
    #: Each node's ``status.capacity`` as the cluster-autoscaler counts it toward its
    #: ``--cores-total`` and ``--memory-total``: (cores rounded up, memory in bytes); a
    #: node without it (or with one that cannot be read) is missing.
    capacity: dict[str, tuple[int, int]] = field(default_factory=dict)


def as_placed_on_nominated_node(obj: dict[str, Any]) -> dict[str, Any]:
    """A pending pod nominated to a node (``status.nominatedNodeName``), as if bound there
    (``spec.nodeName`` set to it): the cluster-autoscaler puts such pods on their nominated
    node in its cluster snapshot (utilization and the scale-down simulation; deleted ones
    left out), so a node a preemptor or a pod about to bind is headed for is not empty."""
    return {**obj, "spec": {**obj["spec"], "nodeName": obj["status"]["nominatedNodeName"]}}


def counted_nominated(
    pending: dict[str, dict[str, Any]], pods: dict[str, dict[str, Any]], deleting: bool = False
) -> dict[str, dict[str, Any]]:
    """The pods of ``pending`` (pods nominated to a node, not bound; by key) that count on
    their nominated node, by key. Left out, as the autoscaler's pod lister and
    ``ArrangePodsBySchedulability`` leave them out: a pod bound meanwhile (in ``pods``, the
    bound pods by key), one being deleted (unless ``deleting``: kube-scheduler's nominator
    keeps a pod until it is gone), and one that has ended (Succeeded, Failed; kube-scheduler
    does not watch those); and one whose ``status.nominatedNodeName`` names no node after all
    (the list's field selector asked for a name: never a KeyError)."""
    counted = {}
    for key, obj in pending.items():
        if key in pods or (not deleting and (obj.get("metadata") or {}).get("deletionTimestamp")):
            continue
        status = obj.get("status") or {}
        if status.get("phase") in TERMINAL_PHASES or not isinstance(status.get("nominatedNodeName"), str):
            continue
        counted[key] = obj
    return counted


def place_nominated(pending: dict[str, dict[str, Any]], pods: dict[str, dict[str, Any]]) -> list[str]:
    """Put into ``pods`` (bound pods by key) each pod of ``pending`` (pods nominated to a
    node, not bound) the autoscaler counts on its nominated node (:func:`counted_nominated`),
    placed there (:func:`as_placed_on_nominated_node`), and return their keys, sorted."""
    counted = counted_nominated(pending, pods)
    for key, obj in counted.items():
        pods[key] = as_placed_on_nominated_node(obj)
    return sorted(counted)


async def take_snapshot(
    api_client: ApiClient,
    cache: ClusterCache | None = None,
    *,
    controllers: bool = True,
    dra: bool = False,
    nominated: bool = False,
    nominated_apart: bool = False,
    namespaces_and_volumes: bool | None = None,
    device_classes: bool = False,
    claim_templates: bool | None = None,
) -> Snapshot:
    """List every node and every bound, running pod through ``api_client``
    (``kubernetes_asyncio.client.ApiClient``). Needs ``list`` on nodes and on pods of all
    namespaces. ``nominated``: the pending pods nominated to a node too, counted there
    (:attr:`Snapshot.nominated`; the autoscaler's view, which the node report shows).
    ``nominated_apart``: the same pods listed, kept apart by node instead, those being
    deleted too (:attr:`Snapshot.nominated_pods`; kube-scheduler's view, which a pod's
    placement reads).
    ``controllers``: list them too (:attr:`Snapshot.controllers`, else None); only the node
    report reads them. ``namespaces_and_volumes`` (default: as ``controllers``): list the
    namespaces, and the PersistentVolumeClaims and PersistentVolumes too
    (:attr:`Snapshot.namespace_labels` and :attr:`Snapshot.claim_volumes`, else None): what
    pod affinity terms' namespace selectors and the volume filters read.
    ``dra``: list the ResourceSlices and ResourceClaims too (:attr:`Snapshot.dra`), and with
    ``device_classes`` the DeviceClasses (:attr:`DraObjects.classes`, :attr:`DraObjects.device_classes`)
    and the slices and claims whole, as kube-scheduler's allocator reads them, and with
    ``claim_templates`` (default: as ``device_classes``) the ResourceClaimTemplates."""
    from kubernetes_asyncio import client

    core = client.CoreV1Api(api_client)
    cache = cache if cache is not None else ClusterCache(clock=lambda: 0.0)
    nodes = await Informer("nodes", core.list_node, transform=slim_node).list_once()
    # the pods nominated to a node first: one bound between the two lists is then kept bound
    pending = (
        await Informer(
            "pods",
            core.list_pod_for_all_namespaces,
            field_selector="spec.nodeName=,status.nominatedNodeName!=",
            transform=snapshot_pod,
        ).list_once()
        if nominated or nominated_apart
        else {}
    )
    pods = await Informer(
        "pods", core.list_pod_for_all_namespaces, field_selector="spec.nodeName!=", transform=snapshot_pod
    ).list_once()
    for obj in nodes.values():
        cache.node_event("ADDED", obj)
    snap = Snapshot(cache)
    for obj in nodes.values():
        name = (obj.get("metadata") or {}).get("name")
        capacity = (obj.get("status") or {}).get("capacity")
        if isinstance(name, str) and isinstance(capacity, dict):
            try:
                amounts = parse_resource_list(capacity)
            except (QuantityError, TypeError, ValueError):
                continue  # not counted
            # the autoscaler's Quantity.Value(): whole cores, rounded up
            snap.capacity[name] = (-(-amounts.get(CPU, 0) // 1000), amounts.get(MEMORY, 0))
    if nominated_apart:
        for key, obj in sorted(counted_nominated(pending, pods, deleting=True).items()):
            try:
                pod = Pod.from_dict(obj)
            except PodSpecError:
                snap.unreadable.append(key)
                continue
            snap.nominated_pods.setdefault(obj["status"]["nominatedNodeName"], []).append(pod)
    else:
        snap.nominated = place_nominated(pending, pods)
    for key, obj in sorted(pods.items()):
        if (obj.get("status") or {}).get("phase") in TERMINAL_PHASES:
            continue
        try:
            pod = Pod.from_dict(obj)
        except PodSpecError:
            snap.unreadable.append(key)
            continue
        cache.pod_event("ADDED", obj)
        if pod.node_name:
            snap.pods_by_node.setdefault(pod.node_name, []).append(pod)
    snap.unreadable.sort()
    snap.budgets = await _budgets(api_client)
    if controllers:
        snap.controllers, snap.unlisted_controllers = await _controllers(api_client)
    if controllers if namespaces_and_volumes is None else namespaces_and_volumes:
        snap.namespace_labels = await _namespace_labels(api_client)
        snap.claim_volumes = await _claim_volumes(api_client)
    if dra:
        templates = device_classes if claim_templates is None else claim_templates
        snap.dra, snap.dra_unlisted = await _dra(api_client, device_classes, templates)
    return snap


#: The priority the API server gives a pod of no priority class when no class is the
#: global default (``scheduling.DefaultPriorityWhenNoDefaultClassExists``).
DEFAULT_PRIORITY = 0


def admitted_priority(spec: dict[str, Any], classes: dict[str, tuple[int, bool]]) -> int | None:
    """The ``spec.priority`` the API server's Priority admission plugin gives a pod of
    ``spec`` (as written, e.g. in a manifest) with the PriorityClasses ``classes`` (name ->
    value, whether it is the global default): its ``priorityClassName``'s value, else the
    global default class's (the lowest, should there be several), else
    :data:`DEFAULT_PRIORITY`. A ``spec.priority`` given is kept (the plugin refuses a pod
    whose priority differs from its class's). None: the class named does not exist (the API
    server refuses such a pod)."""
    given = spec.get("priority")
    if isinstance(given, int) and not isinstance(given, bool):
        return given
    name = spec.get("priorityClassName")
    if name:
        found = classes.get(str(name))
        return None if found is None else found[0]
    defaults = [value for value, global_default in classes.values() if global_default]
    return min(defaults) if defaults else DEFAULT_PRIORITY


async def priority_classes(api_client: ApiClient) -> tuple[dict[str, tuple[int, bool]] | None, int | None]:
    """Every PriorityClass (a ``list`` on ``priorityclasses``, ``scheduling.k8s.io``): name
    -> (value, whether it is the global default); or None and the API server's status when
    they could not be listed (401, 403: no right)."""
    from kubernetes_asyncio import client

    def slim(obj: dict[str, Any]) -> dict[str, Any]:
        return {
            "metadata": {"name": (obj.get("metadata") or {}).get("name")},
            "value": obj.get("value"),
            "globalDefault": obj.get("globalDefault") is True,
        }

    scheduling = client.SchedulingV1Api(api_client)
    try:
        listed = await Informer("priorityclasses", scheduling.list_priority_class, transform=slim).list_once()
    except WatchError as exc:
        if exc.status in (401, 403):
            return None, exc.status
        raise
    classes = {}
    for obj in listed.values():
        name, value = obj["metadata"]["name"], obj["value"]
        if isinstance(name, str) and isinstance(value, int):
            classes[name] = (value, obj["globalDefault"])
    return classes, None


async def _dra(
    api_client: ApiClient, device_classes: bool = False, claim_templates: bool = False
) -> tuple[DraObjects | None, int | None]:
    """Every ResourceSlice and ResourceClaim (a ``list`` on ``resourceslices`` and, in every
    namespace, ``resourceclaims``, ``resource.k8s.io``), or None and the API server's status
    when they could not be listed (401, 403: no right; 404: ``resource.k8s.io/v1`` not
    served); with ``device_classes`` (kube-scheduler's allocator: ``--pod``, and the node
    report's plan), the DeviceClasses too where ``deviceclasses`` may be listed, and with
    ``claim_templates`` (``--pod``) the ResourceClaimTemplates where
    ``resourceclaimtemplates`` may and the DeviceTaintRules where ``devicetaintrules`` may
    and are served (each else None)."""
    from kubernetes_asyncio import client

    resource = client.ResourceV1Api(api_client)
    # kube-scheduler's allocator (device_classes: --pod, and the node report's plan) reads these too
    slim_slice = allocation_resource_slice if device_classes else slim_resource_slice
    slim_claim = allocation_resource_claim if device_classes else slim_resource_claim
    try:
        slices = await Informer(
            "resourceslices", resource.list_resource_slice, transform=slim_slice
        ).list_once()
        claims = await Informer(
            "resourceclaims", resource.list_resource_claim_for_all_namespaces, transform=slim_claim
        ).list_once()
    except WatchError as exc:
        if exc.status in (401, 403, 404):
            return None, exc.status
        raise
    classes: frozenset[str] | None = None
    by_name: dict[str, dict[str, Any]] | None = None
    templates: dict[tuple[str, str], dict[str, Any]] | None = None
    taint_rules: list[dict[str, Any]] | None = None
    if claim_templates:
        try:
            list_templates = resource.list_resource_claim_template_for_all_namespaces
            informer = Informer("resourceclaimtemplates", list_templates, transform=_template_devices)
            listed_templates = await informer.list_once()
            templates = {
                (str(t["metadata"].get("namespace")), str(t["metadata"].get("name"))): t
                for t in listed_templates.values()
            }
        except WatchError as exc:
            if exc.status not in (401, 403, 404):
                raise
        try:
            list_rules = partial(_list_device_taint_rules, api_client)
            rules = await Informer(
                "devicetaintrules", list_rules, transform=allocation_device_taint_rule
            ).list_once()
            taint_rules = [obj for _, obj in sorted(rules.items())]
        except WatchError as exc:
            if exc.status not in (401, 403, 404):
                raise
    if device_classes:
        try:
            informer = Informer("deviceclasses", resource.list_device_class, transform=_class_selectors)
            listed = await informer.list_once()
            by_name = {str(obj["metadata"].get("name")): obj for obj in listed.values()}
            classes = frozenset(by_name)
        except WatchError as exc:
            if exc.status not in (401, 403, 404):
                raise
    return DraObjects(
        [obj for _, obj in sorted(slices.items())],
        [obj for _, obj in sorted(claims.items())],
        classes,
        by_name,
        templates,
        taint_rules,
    ), None


#: ``resource.k8s.io/v1`` DeviceTaintRules (cluster-scoped), which kubernetes_asyncio has
#: no v1 client method for (only v1alpha3 and v1beta2).
DEVICE_TAINT_RULES_PATH = "/apis/resource.k8s.io/v1/devicetaintrules"


async def _list_device_taint_rules(api_client: ApiClient, **kw: Any) -> Any:
    """List (or watch) ``resource.k8s.io/v1`` DeviceTaintRules with the generic
    ``ApiClient.call_api``, taking the keyword arguments of a generated list method
    (``limit``, ``_continue``, ``watch``..., ``_preload_content``, ``_request_timeout``)."""
    names = {
        "_continue": "continue",
        "allow_watch_bookmarks": "allowWatchBookmarks",
        "field_selector": "fieldSelector",
        "label_selector": "labelSelector",
        "resource_version": "resourceVersion",
        "timeout_seconds": "timeoutSeconds",
    }
    options = ("_preload_content", "_request_timeout")
    query = [(names.get(k, k), v) for k, v in kw.items() if k not in options and v is not None]
    return await api_client.call_api(
        DEVICE_TAINT_RULES_PATH,
        "GET",
        query_params=query,
        header_params={"Accept": "application/json"},
        auth_settings=["BearerToken"],
        _return_http_data_only=True,
        _preload_content=kw.get("_preload_content", True),
        _request_timeout=kw.get("_request_timeout"),
    )


def _template_devices(obj: dict[str, Any]) -> dict[str, Any]:
    """A ResourceClaimTemplate's name, namespace and the claim's ``spec.devices`` requests
    and constraints (what kube-scheduler's allocator reads of the claim made from it)."""
    meta, spec = obj.get("metadata"), obj.get("spec")
    claim = spec.get("spec") if isinstance(spec, dict) else None
    devices = claim.get("devices") if isinstance(claim, dict) else None
    kept = (
        {k: devices[k] for k in ("requests", "constraints") if k in devices}
        if isinstance(devices, dict)
        else {}
    )
    names = (
        {k: meta.get(k) for k in ("name", "namespace", "uid", "resourceVersion")}
        if isinstance(meta, dict)
        else {}
    )
    return {"metadata": names, "spec": {"spec": {"devices": kept}}}


def _class_selectors(obj: dict[str, Any]) -> dict[str, Any]:
    """A DeviceClass's name, ``creationTimestamp``, ``spec.selectors`` (what kube-scheduler's
    allocator reads) and ``spec.extendedResourceName`` (DRA-backed extended resources)."""
    meta, spec = obj.get("metadata"), obj.get("spec")
    spec = spec if isinstance(spec, dict) else {}
    meta = meta if isinstance(meta, dict) else {}
    return {
        "metadata": {"name": meta.get("name"), "creationTimestamp": meta.get("creationTimestamp")},
        "spec": {
            "selectors": spec.get("selectors"),
            "extendedResourceName": spec.get("extendedResourceName"),
        },
    }


def _slim_claim(obj: dict[str, Any]) -> dict[str, Any]:
    """What :func:`~stickypack.core.volumes.claim_volumes` reads of a claim."""
    meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
    return {
        "metadata": {k: meta.get(k) for k in ("name", "namespace", "deletionTimestamp")},
        "spec": {"volumeName": spec.get("volumeName")},
    }


def _slim_volume(obj: dict[str, Any]) -> dict[str, Any]:
    """What :class:`~stickypack.core.volumes.VolumePlacement` reads of a volume: its name,
    zone and region labels, and node affinity."""
    meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
    labels = meta.get("labels") or {}
    return {
        "metadata": {
            "name": meta.get("name"),
            "labels": {key: labels[key] for key, _ in VOLUME_ZONE_LABELS if key in labels},
        },
        "spec": {"nodeAffinity": spec.get("nodeAffinity")},
    }


async def _claim_volumes(api_client: ApiClient) -> ClaimVolumes | None:
    """Every PersistentVolumeClaim with the placement of its volume, or None when listing
    claims or volumes is forbidden (a cluster-wide ``list`` on ``persistentvolumeclaims``
    and ``persistentvolumes`` reads them)."""
    from kubernetes_asyncio import client

    core = client.CoreV1Api(api_client)
    try:
        list_claims = core.list_persistent_volume_claim_for_all_namespaces
        claims = await Informer("persistentvolumeclaims", list_claims, transform=_slim_claim).list_once()
        volumes = await Informer(
            "persistentvolumes", core.list_persistent_volume, transform=_slim_volume
        ).list_once()
    except WatchError as exc:
        if exc.status in (401, 403):
            return None
        raise
    return claim_volumes(claims.values(), volumes.values())


def _name_and_labels(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata") or {}
    return {"metadata": {"name": meta.get("name"), "labels": meta.get("labels") or {}}}


async def _namespace_labels(api_client: ApiClient) -> dict[str, dict[str, str]] | None:
    """Each namespace's labels, or None when listing namespaces is forbidden (a ``list`` on
    ``namespaces`` reads them)."""
    from kubernetes_asyncio import client

    core = client.CoreV1Api(api_client)
    try:
        listed = await Informer("namespaces", core.list_namespace, transform=_name_and_labels).list_once()
    except WatchError as exc:
        if exc.status in (401, 403):
            return None
        raise
    return {
        str(obj["metadata"]["name"]): {str(k): str(v) for k, v in obj["metadata"]["labels"].items()}
        for obj in listed.values()
    }


def _name_and_selector(obj: dict[str, Any]) -> dict[str, Any]:
    meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
    return {"metadata": {k: meta.get(k) for k in ("name", "namespace")}, "selector": spec.get("selector")}


async def spread_selector(api_client: ApiClient, pod: Pod) -> tuple[LabelSelector | None, bool]:
    """kube-scheduler's ``DefaultSelector`` of ``pod``
    (:func:`~stickypack.core.topologyspread.default_selector`): from the Services of its
    namespace and its ReplicationController, ReplicaSet or StatefulSet (a ``list`` on
    ``services``, and on ``replicationcontrollers`` or ``replicasets`` / ``statefulsets``
    (apps) for a pod such a controller owns, by a controller reference of ``apiVersion``
    ``v1`` or ``apps/v1`` as kube-scheduler reads it, in the pod's namespace); and whether they could
    be read (False: refused, 401, 403, or not served, 404; the selector is then None)."""
    from kubernetes_asyncio import client

    core, apps = client.CoreV1Api(api_client), client.AppsV1Api(api_client)
    calls = {
        "ReplicationController": core.list_namespaced_replication_controller,
        "ReplicaSet": apps.list_namespaced_replica_set,
        "StatefulSet": apps.list_namespaced_stateful_set,
    }
    namespace = pod.namespace
    try:
        services = await Informer(
            "services", partial(core.list_namespaced_service, namespace), transform=_name_and_selector
        ).list_once()
        kind = default_selector_kind(pod.owner_api_version, pod.owner_kind)
        call = calls.get(kind) if kind is not None else None
        controller = None
        if call is not None and pod.owner_name:
            listed = await Informer(
                str(pod.owner_kind),
                partial(call, namespace),
                field_selector=f"metadata.name={pod.owner_name}",
                transform=_name_and_selector,
            ).list_once()
            controller = next(iter(listed.values()), None)
    except WatchError as exc:
        if exc.status in (401, 403, 404):
            return None, False
        raise
    selector = default_selector(
        pod.labels,
        (obj["selector"] for _, obj in sorted(services.items())),
        pod.owner_kind if controller is not None else None,
        controller["selector"] if controller is not None else None,
    )
    return selector, True


def budget_from_dict(obj: dict[str, Any]) -> DisruptionBudget:
    """A ``policy/v1`` PodDisruptionBudget as the autoscaler reads it (a selector it cannot
    parse matches no pod)."""
    meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
    raw = spec.get("selector")
    try:
        selector = LabelSelector.from_dict(raw) if raw is not None else None
    except SelectorError:
        selector = None
    allowed = (obj.get("status") or {}).get("disruptionsAllowed")
    return DisruptionBudget(
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        selector=selector,
        disruptions_allowed=allowed if isinstance(allowed, int) else 0,
    )


async def _budgets(api_client: ApiClient) -> tuple[DisruptionBudget, ...] | None:
    """Every PodDisruptionBudget, or None when listing them is forbidden (the budgets are
    then unknown; a cluster-wide ``list`` on ``poddisruptionbudgets`` reads them)."""
    from kubernetes_asyncio import client

    policy = client.PolicyV1Api(api_client)
    try:
        listed = await Informer("budgets", policy.list_pod_disruption_budget_for_all_namespaces).list_once()
    except WatchError as exc:
        if exc.status in (401, 403):
            return None
        raise
    return tuple(budget_from_dict(obj) for _, obj in sorted(listed.items()))


def _name_and_replicas(obj: dict[str, Any]) -> dict[str, Any]:
    meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
    replicas = spec.get("replicas")
    return {
        "metadata": {k: meta.get(k) for k in ("name", "namespace")},
        "replicas": replicas if isinstance(replicas, int) and not isinstance(replicas, bool) else None,
    }


async def _controllers(
    api_client: ApiClient,
) -> tuple[dict[tuple[str, str, str], int | None], dict[str, int]]:
    """``(kind, namespace, name)`` of every ReplicaSet, ReplicationController, StatefulSet,
    Job and DaemonSet mapped to its ``spec.replicas`` (kept for ReplicaSets and
    ReplicationControllers only; names and replicas only are kept, page by page), and the
    kinds that could not be listed, with the API server's status (401, 403, 404: no right,
    or not served; the other kinds are still read). A cluster-wide ``list`` on
    replicasets, statefulsets, daemonsets (apps), jobs (batch) and replicationcontrollers
    reads them all."""
    from kubernetes_asyncio import client

    apps, batch, core = (
        client.AppsV1Api(api_client),
        client.BatchV1Api(api_client),
        client.CoreV1Api(api_client),
    )
    calls = {
        "ReplicaSet": apps.list_replica_set_for_all_namespaces,
        "StatefulSet": apps.list_stateful_set_for_all_namespaces,
        "DaemonSet": apps.list_daemon_set_for_all_namespaces,
        "Job": batch.list_job_for_all_namespaces,
        "ReplicationController": core.list_replication_controller_for_all_namespaces,
    }
    found: dict[tuple[str, str, str], int | None] = {}
    unlisted: dict[str, int] = {}
    for kind, call in calls.items():
        try:
            listed = await Informer(kind, call, transform=_name_and_replicas).list_once()
        except WatchError as exc:
            if exc.status in (401, 403, 404):
                unlisted[kind] = exc.status
                continue
            raise
        counted = kind in REPLICA_COUNTED_CONTROLLERS
        for obj in listed.values():
            meta = obj["metadata"]
            key = (kind, str(meta.get("namespace") or ""), str(meta.get("name") or ""))
            found[key] = obj["replicas"] if counted else None
    return found, unlisted
