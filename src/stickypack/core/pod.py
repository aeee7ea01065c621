"""The pod model: the fields of a Kubernetes pod that scheduling reads."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from stickypack.core.labels import NodeSelectorTerm, PreferredTerm, Toleration
from stickypack.core.podaffinity import (
    HostPort,
    RequiredPodAffinityTerm,
    WeightedPodAffinityTerm,
    host_ports_from_spec,
    required_term_from_dict,
    required_terms_from_list,
)
from stickypack.core.resources import (
    CPU,
    DEFAULT_MEMORY_REQUEST,
    DEFAULT_MILLI_CPU_REQUEST,
    MEMORY,
    ResourceList,
    add_into,
    brief_repr,
    max_into,
    parse_milli_resource_list,
    round_up_amounts,
)
from stickypack.core.routing import LabelSelector
from stickypack.core.topologyspread import SCHEDULE_ANYWAY, SpreadConstraint, spread_constraints_from_list

#: Most distinct resources (cpu, memory, extended) a pod may request: real pods ask for a
#: handful; each name the node table has not seen adds a column to it.
MAX_POD_RESOURCES = 32
#: Annotation BinderHub puts on build pods: the repository URL being built.
BUILD_REPO_ANNOTATION = "binder-repo"
#: Set by the kubelet on the mirror pods of static pods.
MIRROR_POD_ANNOTATION = "kubernetes.io/config.mirror"
#: ``"true"``: the cluster-autoscaler treats the pod as a DaemonSet pod, whatever owns it.
DAEMONSET_POD_ANNOTATION = "cluster-autoscaler.kubernetes.io/daemonset-pod"
#: Labels of BinderHub build pods.
BUILD_LABELS: Mapping[str, str] = MappingProxyType({"component": "binderhub-build"})
#: The fields of node affinity (and of pod affinity) that scheduling reads.
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"
#: Where a pod's node affinity and its preferred pod anti-affinity terms are (in errors).
_NODE_AFFINITY = "spec.affinity.nodeAffinity"
_ANTI_AFFINITY_PREFERRED = f"spec.affinity.podAntiAffinity.{PREFERRED}"


@dataclass(frozen=True, slots=True)
class PodAffinityTerm:
    """A *preferred* pod anti-affinity term as BinderHub's build pods carry it: weight,
    ``matchLabels`` and topology key (:attr:`Pod.pod_anti_affinity`; the term in full is in
    :attr:`Pod.preferred_pod_anti_affinity`)."""

    weight: int
    match_labels: tuple[tuple[str, str], ...]
    topology_key: str


@dataclass(frozen=True, slots=True)
class PodClaimRef:
    """One entry of a pod's ``spec.resourceClaims`` as kube-scheduler finds its
    ResourceClaim (``resourceclaim.Name``). ``claim``: the claim's name, in the pod's
    namespace: the entry's ``resourceClaimName``, or for an entry made from a template
    (``template``; the claim must then be the pod's own, controlled by it) the name the
    pod's ``status.resourceClaimStatuses`` gives it. None: for a template entry, that status
    has no entry of its name (``listed`` False: the claim is not created yet) or one without
    a name (``listed`` True: intentionally not created, nothing to check); for any other,
    neither field is set (the API server refuses such a pod). ``template_name``: a template
    entry's ``resourceClaimTemplateName`` (None for any other)."""

    name: str
    claim: str | None
    template: bool = False
    listed: bool = True
    template_name: str | None = None


class PodSpecError(ValueError):
    """A pod dict that cannot be read; the message says which field."""


@dataclass(slots=True)
class Pod:
    """What kube-scheduler reads of a pod.

    ``requests`` are the pod's effective requests as used for *fitting* (cpu in millicores,
    memory in bytes, extended resources in their unit; ``pods`` is not included, a pod counts
    as one). ``nonzero_cpu``/``nonzero_memory`` are the requests used for *scoring* it, with
    100 millicores / 200 MiB for a container that sets none. ``bound_nonzero_cpu`` /
    ``bound_nonzero_memory``: what it adds to its node's non-zero requests once bound, where
    that differs (kube-scheduler's ``NodeInfo`` counts pod-level requests there, while it
    scores a pod being placed by its containers); ``None``: the same as ``nonzero_*``.
    """

    name: str
    namespace: str = "default"
    requests: ResourceList = field(default_factory=dict)
    nonzero_cpu: int = DEFAULT_MILLI_CPU_REQUEST
    nonzero_memory: int = DEFAULT_MEMORY_REQUEST
    bound_nonzero_cpu: int | None = None
    bound_nonzero_memory: int | None = None
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    tolerations: tuple[Toleration, ...] = ()
    node_selector: dict[str, str] = field(default_factory=dict)
    required_terms: tuple[NodeSelectorTerm, ...] | None = None
    preferred_terms: tuple[PreferredTerm, ...] = ()
    #: ``podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution`` as weight,
    #: ``matchLabels`` and topology key alone: what the InterPodAffinity scorer reads without
    #: the pods on the nodes (BinderHub's build pods' term, counted from the node table's builds).
    pod_anti_affinity: tuple[PodAffinityTerm, ...] = ()
    #: ``podAffinity.preferredDuringSchedulingIgnoredDuringExecution`` and
    #: ``podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution`` in full (selector,
    #: namespaces, ``namespaceSelector``, ``matchLabelKeys`` merged): what the InterPodAffinity
    #: scorer reads given the pods on the nodes
    #: (:meth:`~stickypack.core.podaffinity.PodsOnNodes.inter_pod_affinity_sums`).
    preferred_pod_affinity: tuple[WeightedPodAffinityTerm, ...] = ()
    preferred_pod_anti_affinity: tuple[WeightedPodAffinityTerm, ...] = ()
    #: ``podAffinity.requiredDuringSchedulingIgnoredDuringExecution``: the pod goes only to a
    #: node in whose topology domain, for each term, a pod selected by every term runs
    #: (:meth:`~stickypack.core.podaffinity.PodsOnNodes.judge`).
    required_pod_affinity: tuple[RequiredPodAffinityTerm, ...] = ()
    #: ``podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution``: the pod goes to no
    #: node in whose topology domain a pod the term selects runs, and no pod it selects goes
    #: to its node's domain (kube-scheduler checks both ways).
    required_pod_anti_affinity: tuple[RequiredPodAffinityTerm, ...] = ()
    #: The ports its containers and sidecar init containers bind on the node (``hostPort``).
    host_ports: tuple[HostPort, ...] = ()
    #: ``spec.topologySpreadConstraints`` with ``whenUnsatisfiable: DoNotSchedule`` (the
    #: ``ScheduleAnyway`` ones only score): the pod goes only where its domain's matching
    #: pods stay within ``maxSkew`` of the fewest
    #: (:meth:`~stickypack.core.podaffinity.PodsOnNodes.judge`).
    spread_constraints: tuple[SpreadConstraint, ...] = ()
    #: Its ``ScheduleAnyway`` topology spread constraints: PodTopologySpread scores them
    #: (:func:`~stickypack.core.topologyspread.spread_scores`), filters nothing.
    soft_spread_constraints: tuple[SpreadConstraint, ...] = ()
    #: kube-scheduler's ``DefaultSelector`` of the pod, which its system default spread
    #: constraints select with when the pod has none of its own: the selectors of the
    #: Services of its namespace that select it, with its ReplicationController's,
    #: ReplicaSet's or StatefulSet's. Not in the pod: a driver that lists those objects sets
    #: it (``stickypack inspect --pod``); None: not known, or it selects nothing.
    default_spread_selector: LabelSelector | None = None
    #: Names of the PersistentVolumeClaims its volumes use, in its namespace:
    #: ``persistentVolumeClaim.claimName``, and ``<pod name>-<volume name>`` for a generic
    #: ephemeral volume (the claim Kubernetes creates for it).
    claims: tuple[str, ...] = ()
    #: Those of :attr:`claims` made for its generic ephemeral volumes: kube-scheduler's
    #: VolumeBinding reads them, its VolumeZone does not (it reads ``persistentVolumeClaim``
    #: volumes only).
    ephemeral_claims: tuple[str, ...] = ()
    #: Names of the DRA ResourceClaims of its ``spec.resourceClaims``, in order (in its
    #: namespace): ``resourceClaimName``, or for a claim made from a template the name
    #: ``status.resourceClaimStatuses`` gives it; "" while that is not known (no status yet),
    #: as the cluster-autoscaler's ``claimRefToName`` finds none.
    resource_claims: tuple[str, ...] = ()
    #: Its ``spec.resourceClaims`` entries as kube-scheduler's DynamicResources plugin reads
    #: them (:class:`PodClaimRef`), in order.
    claim_refs: tuple[PodClaimRef, ...] = ()
    #: Kind of the pod's controller (the owner reference with ``controller: true``), if any.
    owner_kind: str | None = None
    #: Name of that controller (in the pod's namespace), if any.
    owner_name: str | None = None
    #: API group of that controller (its ``apiVersion`` before the ``/``; "" for ``v1``), if any.
    owner_group: str | None = None
    #: That controller's ``apiVersion`` as its owner reference gives it ("v1", "apps/v1"), if
    #: any: kube-scheduler's ``DefaultSelector`` reads only the controllers of ``v1`` and
    #: ``apps/v1`` (:func:`~stickypack.core.topologyspread.default_selector_kind`).
    owner_api_version: str | None = None
    scheduler_name: str = "default-scheduler"
    node_name: str | None = None
    uid: str = ""
    #: Creation time, seconds since the epoch (``metadata.creationTimestamp``), if known.
    created: float | None = None
    #: Image of each init container, container and image volume, normalized as
    #: kube-scheduler's ImageLocality looks them up (``:latest`` added where no tag is given).
    images: tuple[str, ...] = ()
    #: Names of the volumes on the node's own disk: ``hostPath``, and ``emptyDir`` not in
    #: memory (what the cluster-autoscaler calls local storage).
    local_volumes: tuple[str, ...] = ()
    #: When the pod was marked for deletion (``metadata.deletionTimestamp``, seconds since
    #: the epoch), if it is terminating.
    deleted: float | None = None
    #: ``spec.terminationGracePeriodSeconds``, if set.
    grace_period_s: int | None = None
    #: ``spec.priority`` (the API server fills it in from the priority class), if set.
    priority: int | None = None

    @property
    def key(self) -> str:
        """``namespace/name``, unique in a cluster."""
        return f"{self.namespace}/{self.name}"

    @property
    def is_daemonset_pod(self) -> bool:
        """A DaemonSet's pod to the cluster-autoscaler: its controller is a DaemonSet, or it
        is annotated :data:`DAEMONSET_POD_ANNOTATION` ``"true"``."""
        return self.owner_kind == "DaemonSet" or self.annotations.get(DAEMONSET_POD_ANNOTATION) == "true"

    @property
    def is_mirror_pod(self) -> bool:
        """The kubelet's mirror of a static pod (annotated :data:`MIRROR_POD_ANNOTATION`)."""
        return MIRROR_POD_ANNOTATION in self.annotations

    def unweighed(self, daemonsets: bool, mirror_pods: bool) -> bool:
        """Whether the cluster-autoscaler leaves this pod's requests out of its node's
        utilization and allocatable when run with ``--ignore-daemonsets-utilization``
        (``daemonsets``) / ``--ignore-mirror-pods-utilization`` (``mirror_pods``): its
        ``CalculateUtilizationOfResource`` asks each flag in turn, so a DaemonSet pod that is
        a mirror pod too is left out by either."""
        return (daemonsets and self.is_daemonset_pod) or (mirror_pods and self.is_mirror_pod)

    @property
    def build_repo(self) -> str | None:
        """The repository this pod builds (BinderHub build pods), else ``None``."""
        return self.annotations.get(BUILD_REPO_ANNOTATION)

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> Pod:
        """Build from a Kubernetes pod (as JSON/YAML gives it, camelCase keys).

        Effective requests follow ``k8s.io/component-helpers/resource.PodRequests``: the sum
        over containers, at least the largest init container (restartable sidecar init
        containers add to both), replaced by the pod-level ``spec.resources`` where it sets
        cpu, memory or hugepages (for fitting; scoring reads the containers', as
        kube-scheduler v1.37.2 does), plus ``spec.overhead``. A container with limits but no
        requests gets requests equal to its limits, as the API server defaults them.

        A pod that cannot be read (a field of the wrong shape or value, more than
        :data:`MAX_POD_RESOURCES` distinct resources) raises :class:`PodSpecError` naming
        the field.
        """
        # The fields are read in the order below (the helpers' too): of two that cannot be
        # read, the error names the first, so moving a read changes which one it names.
        try:
            meta = _mapping(raw.get("metadata"), "metadata")
            spec = _mapping(raw.get("spec"), "spec")
            requests, nonzero, bound_nonzero = _pod_requests(spec)
            affinity = _AffinityFields.read(spec)
            labels = _string_map(meta.get("labels"), "metadata.labels")
            namespace = str(meta.get("namespace") or "default")
            # a pod the API server created (it set the creation time) has its terms'
            # matchLabelKeys merged already, with its labels of then
            of = (labels, namespace, meta.get("creationTimestamp") is not None)
            required_pod_affinity = affinity.required_pod_terms("podAffinity", *of)
            required_pod_anti_affinity = affinity.required_pod_terms("podAntiAffinity", *of)
            preferred_pod_affinity = affinity.preferred_pod_terms("podAffinity", *of)
            preferred_pod_anti_affinity = affinity.preferred_pod_terms("podAntiAffinity", *of)
            owner_kind, owner_name, owner_group, owner_api_version = _owner(meta.get("ownerReferences"))
            created = _creation_time(meta.get("creationTimestamp"))
            claim_refs = _claim_refs(spec, raw.get("status"))
            return cls(
                name=str(meta.get("name") or meta.get("generateName") or ""),
                namespace=namespace,
                uid=str(meta.get("uid") or ""),
                created=created,
                deleted=_deletion_time(meta.get("deletionTimestamp")),
                grace_period_s=_grace_period(spec.get("terminationGracePeriodSeconds")),
                requests=requests,
                nonzero_cpu=nonzero[CPU],
                nonzero_memory=nonzero[MEMORY],
                bound_nonzero_cpu=bound_nonzero[CPU] if bound_nonzero else None,
                bound_nonzero_memory=bound_nonzero[MEMORY] if bound_nonzero else None,
                labels=labels,
                annotations=_string_map(meta.get("annotations"), "metadata.annotations"),
                tolerations=tuple(
                    Toleration.from_dict(t) for t in _objects(spec.get("tolerations"), "spec.tolerations")
                ),
                node_selector=_string_map(spec.get("nodeSelector"), "spec.nodeSelector"),
                required_terms=affinity.required_node_terms(),
                preferred_terms=affinity.preferred_node_terms(),
                pod_anti_affinity=affinity.preferred_pod_anti_affinity(),
                required_pod_affinity=required_pod_affinity,
                required_pod_anti_affinity=required_pod_anti_affinity,
                preferred_pod_affinity=preferred_pod_affinity,
                preferred_pod_anti_affinity=preferred_pod_anti_affinity,
                host_ports=host_ports_from_spec(spec),
                spread_constraints=spread_constraints_from_list(
                    spec.get("topologySpreadConstraints"), labels, "spec.topologySpreadConstraints"
                ),
                soft_spread_constraints=spread_constraints_from_list(
                    spec.get("topologySpreadConstraints"),
                    labels,
                    "spec.topologySpreadConstraints",
                    SCHEDULE_ANYWAY,
                ),
                claims=_claim_names(spec, str(meta.get("name") or "")),
                ephemeral_claims=_claim_names(spec, str(meta.get("name") or ""), ephemeral_only=True),
                resource_claims=tuple(ref.claim or "" for ref in claim_refs),
                claim_refs=claim_refs,
                owner_kind=owner_kind,
                owner_name=owner_name,
                owner_group=owner_group,
                owner_api_version=owner_api_version,
                scheduler_name=str(spec.get("schedulerName") or "default-scheduler"),
                node_name=spec.get("nodeName") or None,
                images=_pod_images(spec),
                local_volumes=_local_volumes(spec),
                priority=_priority(spec.get("priority")),
            )
        except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as exc:
            raise PodSpecError(f"cannot read pod: {_reason(exc)}") from exc


def _string_map(raw: object, where: str) -> dict[str, str]:
    """A field that maps strings to strings (labels, annotations, a node selector), keys and
    values made strings; not an object: a ValueError naming ``where``."""
    return {str(k): str(v) for k, v in _mapping(raw, where).items()}


def _owner(raw: object) -> tuple[str | None, str | None, str | None, str | None]:
    """The kind, name, API group (``apiVersion`` before the ``/``; "" for ``v1``) and
    ``apiVersion`` of the pod's controller, from ``metadata.ownerReferences``
    (:func:`_controller`: only the controller, as ``metav1.GetControllerOf``: another owner
    recreates nothing); all None without one, the name None where it has none."""
    controller = _controller(raw)
    if not controller:
        return None, None, None, None
    api_version = str(controller.get("apiVersion") or "")
    return (
        str(controller["kind"]),
        str(controller.get("name") or "") or None,
        api_version.rpartition("/")[0],
        api_version,
    )


def _creation_time(raw: object) -> float | None:
    """``metadata.creationTimestamp`` in seconds since the epoch (None when absent); not an
    RFC 3339 time: a ValueError naming the field."""
    try:
        return rfc3339_seconds(raw)
    except (ValueError, OverflowError):
        raise ValueError(f"metadata.creationTimestamp: {brief_repr(raw)} is not a time (RFC 3339)") from None


@dataclass(frozen=True, slots=True)
class _AffinityFields:
    """The parts of ``spec.affinity`` scheduling reads. :meth:`read` checks their shapes
    (objects and lists where the API has them); the other methods read their terms, each
    error naming the field."""

    #: ``spec.affinity`` (``{}`` when absent).
    affinity: Mapping[str, Any]
    #: ``nodeAffinity``'s required part, None when absent.
    node_required: Mapping[str, Any] | None
    #: ``nodeAffinity``'s preferred terms.
    node_preferred: list[Any]
    #: ``podAntiAffinity``'s preferred terms.
    anti_preferred: list[Any]

    @classmethod
    def read(cls, spec: Mapping[str, Any]) -> _AffinityFields:
        affinity = _mapping(spec.get("affinity"), "spec.affinity")
        node = _mapping(affinity.get("nodeAffinity"), _NODE_AFFINITY)
        required = node.get(REQUIRED)
        if required is not None and not isinstance(required, Mapping):
            raise ValueError(f"{_NODE_AFFINITY}.{REQUIRED} must be an object, got {brief_repr(required)}")
        preferred = _list(node.get(PREFERRED), f"{_NODE_AFFINITY}.{PREFERRED}")
        anti = _mapping(affinity.get("podAntiAffinity"), "spec.affinity.podAntiAffinity")
        return cls(affinity, required, preferred, _list(anti.get(PREFERRED), _ANTI_AFFINITY_PREFERRED))

    def required_pod_terms(
        self, kind: str, labels: Mapping[str, str], namespace: str, label_keys_merged: bool = False
    ) -> tuple[RequiredPodAffinityTerm, ...]:
        """The required terms of ``kind`` (``podAffinity`` or ``podAntiAffinity``) of a pod
        with these labels in this namespace; ``label_keys_merged``: the pod was created, its
        ``matchLabelKeys`` are in its selectors already
        (:func:`~stickypack.core.podaffinity.required_term_from_dict`)."""
        return required_terms_from_list(
            _mapping(self.affinity.get(kind), f"spec.affinity.{kind}").get(REQUIRED),
            labels,
            namespace,
            f"spec.affinity.{kind}.{REQUIRED}",
            label_keys_merged,
        )

    def preferred_pod_terms(
        self, kind: str, labels: Mapping[str, str], namespace: str, label_keys_merged: bool = False
    ) -> tuple[WeightedPodAffinityTerm, ...]:
        """The preferred terms of ``kind`` (``podAffinity`` or ``podAntiAffinity``) of a pod
        with these labels in this namespace, in full (``label_keys_merged``: as
        :meth:`required_pod_terms`)."""
        where = f"spec.affinity.{kind}.{PREFERRED}"
        entries = _list(_mapping(self.affinity.get(kind), f"spec.affinity.{kind}").get(PREFERRED), where)
        out = []
        for i, entry in enumerate(entries):
            raw, weight = _weighted(entry, f"{where}[{i}]")
            term = required_term_from_dict(
                raw.get("podAffinityTerm"),
                labels,
                namespace,
                f"{where}[{i}].podAffinityTerm",
                label_keys_merged,
            )
            out.append(WeightedPodAffinityTerm(weight, term))
        return tuple(out)

    def required_node_terms(self) -> tuple[NodeSelectorTerm, ...] | None:
        """The required node affinity's terms (any one must match), None without it."""
        if self.node_required is None:
            return None
        return _node_selector_terms(self.node_required, f"{_NODE_AFFINITY}.{REQUIRED}")

    def preferred_node_terms(self) -> tuple[PreferredTerm, ...]:
        return tuple(
            _preferred_term(p, f"{_NODE_AFFINITY}.{PREFERRED}[{i}]")
            for i, p in enumerate(self.node_preferred)
        )

    def preferred_pod_anti_affinity(self) -> tuple[PodAffinityTerm, ...]:
        return tuple(
            _pod_affinity_term(t, f"{_ANTI_AFFINITY_PREFERRED}[{i}]")
            for i, t in enumerate(self.anti_preferred)
        )


def _reason(exc: BaseException) -> str:
    """An exception's message; a ``KeyError``'s (only the key) says the key is missing."""
    if isinstance(exc, KeyError) and len(exc.args) == 1:
        return f"{exc.args[0]} missing"
    return str(exc)


def _mapping(raw: object, where: str) -> Mapping[str, Any]:
    """A field that is an object: absent or empty is ``{}``; anything else but a mapping is a
    ValueError naming ``where`` (the API server refuses such a pod)."""
    if not raw:
        return {}
    if not isinstance(raw, Mapping):
        raise ValueError(f"{where} must be an object, got {brief_repr(raw)}")
    return raw


def _list(raw: object, where: str) -> list[Any]:
    """A field that is a list: absent or empty is ``[]``; anything else but a list is a
    ValueError naming ``where``."""
    if not raw:
        return []
    if not isinstance(raw, list):
        raise ValueError(f"{where} must be a list, got {brief_repr(raw)}")
    return raw


def _objects(raw: object, where: str) -> list[Mapping[str, Any]]:
    """A field that is a list of objects (:func:`_list`), each checked (``where[i]``)."""
    items = _list(raw, where)
    for i, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise ValueError(f"{where}[{i}] must be an object, got {brief_repr(item)}")
    return items


def _node_selector_term(raw: object, where: str) -> NodeSelectorTerm:
    """A node selector term, the field ``where`` (named in an error)."""
    if not isinstance(raw, Mapping):
        raise ValueError(f"{where} must be an object, got {brief_repr(raw)}")
    try:
        return NodeSelectorTerm.from_dict(raw)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ValueError(f"{where}: {_reason(exc)}") from None


def _node_selector_terms(raw: Mapping[str, Any], where: str) -> tuple[NodeSelectorTerm, ...]:
    """The ``nodeSelectorTerms`` of required node affinity (``where``)."""
    terms = _list(raw.get("nodeSelectorTerms"), f"{where}.nodeSelectorTerms")
    return tuple(_node_selector_term(t, f"{where}.nodeSelectorTerms[{i}]") for i, t in enumerate(terms))


def _weighted(raw: object, where: str) -> tuple[Mapping[str, Any], int]:
    """A weighted preferred-term entry (the field ``where``) and its ``weight``; errors name
    the field."""
    if not isinstance(raw, Mapping):
        raise ValueError(f"{where} must be an object, got {brief_repr(raw)}")
    try:
        return raw, _weight(raw.get("weight"))
    except ValueError as exc:
        raise ValueError(f"{where}.weight: {exc}") from None


def _preferred_term(raw: object, where: str) -> PreferredTerm:
    """A ``preferredDuringSchedulingIgnoredDuringExecution`` entry of node affinity, the
    field ``where``."""
    raw, weight = _weighted(raw, where)
    return PreferredTerm(weight, _node_selector_term(raw.get("preference") or {}, f"{where}.preference"))


def _pod_affinity_term(raw: object, where: str) -> PodAffinityTerm:
    """A preferred pod anti-affinity entry (the field ``where``): its weight, ``matchLabels``
    and topology key."""
    raw, weight = _weighted(raw, where)
    term = _mapping(raw.get("podAffinityTerm"), f"{where}.podAffinityTerm")
    selector = _mapping(term.get("labelSelector"), f"{where}.podAffinityTerm.labelSelector")
    match_labels = _mapping(selector.get("matchLabels"), f"{where}.podAffinityTerm.labelSelector.matchLabels")
    return PodAffinityTerm(weight, tuple(sorted(match_labels.items())), str(term.get("topologyKey") or ""))


def _controller(raw: object) -> Mapping[str, Any] | None:
    """The owner reference with ``controller: true`` (``metadata.ownerReferences``), if any;
    the references before it must be objects."""
    for i, owner in enumerate(_list(raw, "metadata.ownerReferences")):
        if not isinstance(owner, Mapping):
            raise ValueError(f"metadata.ownerReferences[{i}] must be an object, got {brief_repr(owner)}")
        if owner.get("controller") is True:
            if "kind" not in owner:
                raise ValueError(f"metadata.ownerReferences[{i}].kind missing")
            return owner
    return None


def _priority(raw: object) -> int | None:
    """``spec.priority``: an int32, or None when absent or not an int32 (the API server
    refuses those; only ``inspect`` reads it: never fail a pod the extender places on it)."""
    if isinstance(raw, bool) or not isinstance(raw, int) or not -(2**31) <= raw < 2**31:
        return None
    return raw


def _deletion_time(raw: object) -> float | None:
    """``metadata.deletionTimestamp`` (:func:`rfc3339_seconds`), None when absent or no time:
    unlike the creation time, which the extender's plugins read, only ``inspect`` reads it,
    and a malformed one must not make the extender (or its cache) refuse the pod."""
    try:
        return rfc3339_seconds(raw)
    except (ValueError, OverflowError):
        return None


def _grace_period(raw: object) -> int | None:
    """``spec.terminationGracePeriodSeconds``, None when absent or not an integer (only
    ``inspect`` reads it: a malformed one must not make the extender refuse the pod)."""
    return raw if isinstance(raw, int) and not isinstance(raw, bool) and raw >= 0 else None


def _local_volumes(spec: Mapping[str, Any]) -> tuple[str, ...]:
    """Names of the volumes that live on the node: ``hostPath``, and ``emptyDir`` unless its
    medium is ``Memory`` (the cluster-autoscaler's ``isLocalVolume``)."""
    out = []
    for volume in _list(spec.get("volumes"), "spec.volumes"):
        if not isinstance(volume, Mapping):  # the API server refuses these; never fail a pod on them
            continue
        empty_dir = volume.get("emptyDir")
        in_memory = isinstance(empty_dir, Mapping) and empty_dir.get("medium") == "Memory"
        if volume.get("hostPath") is not None or (empty_dir is not None and not in_memory):
            out.append(str(volume.get("name") or ""))
    return tuple(out)


def _claim_names(spec: Mapping[str, Any], pod_name: str, ephemeral_only: bool = False) -> tuple[str, ...]:
    """The claims of the pod's ``persistentVolumeClaim`` and ``ephemeral`` volumes (a volume
    that is not a mapping is skipped, as :func:`_local_volumes` skips it; ``ephemeral_only``:
    those of its ``ephemeral`` volumes alone); ValueError naming a claim name that is not a
    non-empty string."""
    out = []
    for i, volume in enumerate(_list(spec.get("volumes"), "spec.volumes")):
        if not isinstance(volume, Mapping):
            continue
        claim = volume.get("persistentVolumeClaim")
        if claim is not None:
            name = claim.get("claimName") if isinstance(claim, Mapping) else None
            if not isinstance(name, str) or not name:
                where = f"spec.volumes[{i}].persistentVolumeClaim.claimName"
                raise ValueError(f"{where}: {name!r} is not a claim name")
            if not ephemeral_only:
                out.append(name)
        elif volume.get("ephemeral") is not None:
            out.append(f"{pod_name}-{volume.get('name') or ''}")
    return tuple(out)


def _claim_refs(spec: Mapping[str, Any], status: Any) -> tuple[PodClaimRef, ...]:
    """:attr:`Pod.claim_refs` (an entry that is not a mapping is skipped, a name that is not
    a non-empty string read as not set; :attr:`Pod.resource_claims` are their claims' names,
    "" where not known)."""
    status = status if isinstance(status, Mapping) else {}
    statuses = status.get("resourceClaimStatuses")
    generated: dict[str, str | None] = {}
    for s in statuses if isinstance(statuses, list) else ():
        if isinstance(s, Mapping) and isinstance(s.get("name"), str):
            name = s.get("resourceClaimName")
            generated.setdefault(s["name"], name if isinstance(name, str) and name else None)
    refs = spec.get("resourceClaims")
    out = []
    for ref in refs if isinstance(refs, list) else ():
        if not isinstance(ref, Mapping):
            continue
        key = ref.get("name")
        key = key if isinstance(key, str) else ""
        named = ref.get("resourceClaimName")
        if isinstance(named, str) and named:
            out.append(PodClaimRef(key, named))
        elif ref.get("resourceClaimTemplateName"):
            template = ref["resourceClaimTemplateName"]
            out.append(
                PodClaimRef(
                    key,
                    generated.get(key),
                    template=True,
                    listed=key in generated,
                    template_name=template if isinstance(template, str) else None,
                )
            )
        else:
            out.append(PodClaimRef(key, None, listed=False))
    return tuple(out)


def normalized_image_name(name: str) -> str:
    """``name`` with ``:latest`` appended when it names no tag, as kube-scheduler's
    ImageLocality does before looking it up on a node (a digest's ``@sha256:`` has a colon
    after the last slash, so it is kept as is)."""
    return name + ":latest" if name.rfind(":") <= name.rfind("/") else name


def _pod_images(spec: Mapping[str, Any]) -> tuple[str, ...]:
    """The images ImageLocality scores: init containers, containers, then image volumes."""
    images = [
        normalized_image_name(str(c.get("image") or ""))
        for key in ("initContainers", "containers")
        for c in _objects(spec.get(key), f"spec.{key}")
    ]
    for i, volume in enumerate(_objects(spec.get("volumes"), "spec.volumes")):
        source = volume.get("image")
        if source is not None:
            reference = _mapping(source, f"spec.volumes[{i}].image").get("reference")
            images.append(normalized_image_name(str(reference or "")))
    return tuple(images)


def _weight(raw: object) -> int:
    """A preferred (anti-)affinity term's weight: an integer 1..100, as the API server checks."""
    if isinstance(raw, bool) or not isinstance(raw, int | float) or not 1 <= raw <= 100 or raw != int(raw):
        raise ValueError(f"an affinity weight must be an integer from 1 to 100, not {raw!r}")
    return int(raw)


def _container_requests(container: Mapping[str, Any], where: str) -> tuple[ResourceList, ResourceList]:
    """(requests, non-zero requests) of one container (``where``: the field it is, for an
    error) in thousandths of each unit (cpu in millicores): kube-scheduler rounds the pod's
    sums, not each container's."""
    res = _mapping(container.get("resources"), f"{where}.resources")
    requests = parse_milli_resource_list(res.get("limits"), f"{where}.resources.limits")
    requests.update(parse_milli_resource_list(res.get("requests"), f"{where}.resources.requests"))
    nonzero = dict(requests)
    nonzero.setdefault(CPU, DEFAULT_MILLI_CPU_REQUEST)
    nonzero.setdefault(MEMORY, DEFAULT_MEMORY_REQUEST * 1000)  # thousandths of a byte
    return requests, nonzero


def _pod_requests(spec: Mapping[str, Any]) -> tuple[ResourceList, ResourceList, ResourceList | None]:
    """(requests for fitting, non-zero requests for scoring the pod, non-zero requests it
    adds to its node once bound when pod-level requests make them differ, else None). More
    than :data:`MAX_POD_RESOURCES` distinct resources requested: a ValueError."""
    totals: tuple[ResourceList, ResourceList] = ({}, {})
    for i, container in enumerate(_objects(spec.get("containers"), "spec.containers")):
        for total, part in zip(totals, _container_requests(container, f"spec.containers[{i}]"), strict=True):
            add_into(total, part)
    sidecars: tuple[ResourceList, ResourceList] = ({}, {})
    init_max: tuple[ResourceList, ResourceList] = ({}, {})
    for i, container in enumerate(_objects(spec.get("initContainers"), "spec.initContainers")):
        parts = _container_requests(container, f"spec.initContainers[{i}]")
        if container.get("restartPolicy") == "Always":
            for total, part in zip(sidecars, parts, strict=True):
                add_into(total, part)
        else:
            for peak, side, part in zip(init_max, sidecars, parts, strict=True):
                running = dict(part)
                add_into(running, side)
                max_into(peak, running)
    for total, side, peak in zip(totals, sidecars, init_max, strict=True):
        add_into(total, side)
        max_into(total, peak)
    # Pod-level resources (PodLevelResources, on by default since 1.34): where the pod sets
    # cpu, memory or hugepages for itself, that replaces its containers' sum for fitting.
    # The API server defaults the pod-level requests as kube-scheduler then reads them:
    # those given, then cpu and memory from the containers' sum, then the pod-level limits.
    # Scoring the pod keeps the containers' non-zero requests: kube-scheduler v1.37.2 scores
    # so (tests/test_fidelity.py, against the real one)
    level = _mapping(spec.get("resources"), "spec.resources")
    level_requests = parse_milli_resource_list(level.get("requests"), "spec.resources.requests")
    level_limits = parse_milli_resource_list(level.get("limits"), "spec.resources.limits")
    pod_level: ResourceList = {}
    if level_requests or level_limits:
        pod_level = dict(level_requests)
        for name in (CPU, MEMORY):
            if name not in pod_level and name in totals[0]:
                pod_level[name] = totals[0][name]
        for name, amount in level_limits.items():
            pod_level.setdefault(name, amount)
    pod_level_set = False
    for name, amount in pod_level.items():
        if name in (CPU, MEMORY) or name.startswith("hugepages-"):
            totals[0][name] = amount
            pod_level_set = True
    overhead = parse_milli_resource_list(spec.get("overhead"), "spec.overhead")
    for total in totals:
        add_into(total, overhead)
    requests, nonzero = (round_up_amounts(total) for total in totals)
    nonzero.setdefault(CPU, DEFAULT_MILLI_CPU_REQUEST)
    nonzero.setdefault(MEMORY, DEFAULT_MEMORY_REQUEST)
    bound_nonzero = None
    if pod_level_set:
        # NodeInfo (CalculateResource): with pod-level requests, cpu and memory are what the
        # requests say (pod level, else the containers' sum); the 100m / 200Mi defaults only
        # where neither level names the resource
        bound_nonzero = {r: requests[r] if r in requests else nonzero[r] for r in (CPU, MEMORY)}
    requested = {k: v for k, v in requests.items() if v}
    if len(requested) > MAX_POD_RESOURCES:
        # each new name is a column of every node's row: thousands of made-up names
        # in one request once stalled the extender for minutes
        raise ValueError(f"{len(requested)} distinct resources requested; at most {MAX_POD_RESOURCES}")
    return requested, nonzero, bound_nonzero


def rfc3339_seconds(raw: object) -> float | None:
    """An RFC 3339 timestamp (``2026-12-02T10:00:00Z``) in seconds since the epoch, None
    when absent. Without a zone it is read as UTC, as the API server writes it, so the
    result does not depend on the machine's local time. ValueError when it is no time."""
    if not raw:
        return None
    from datetime import UTC, datetime

    when = datetime.fromisoformat(str(raw).replace("Z", "+00:00"))
    return (when if when.tzinfo is not None else when.replace(tzinfo=UTC)).timestamp()
