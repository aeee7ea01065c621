"""Required inter-pod affinity and anti-affinity, and host ports: what kube-scheduler's
``InterPodAffinity`` and ``NodePorts`` filters check, for the scale-down simulation; and,
through :mod:`stickypack.core.topologyspread`, its ``PodTopologySpread`` filter, which also
reads the pods on the nodes.

- :class:`RequiredPodAffinityTerm`: one ``requiredDuringSchedulingIgnoredDuringExecution``
  term of ``podAffinity`` or ``podAntiAffinity``, read by :func:`required_terms_from_list`.
- :class:`WeightedPodAffinityTerm`: one ``preferredDuringSchedulingIgnoredDuringExecution``
  term (a weight and a term read as a required one is).
- :class:`HostPort`: a container port bound on the node, read by :func:`host_ports_from_spec`.
- :class:`PodsOnNodes`: the pods on each node of a table (rows) and the nodes' labels, kept up
  to date as pods move; :meth:`PodsOnNodes.allows` is kube-scheduler's verdict on putting a
  pod on a node, by those rules alone (and the pod's topology spread constraints);
  :meth:`PodsOnNodes.inter_pod_affinity_sums` its InterPodAffinity score's sums.

Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from stickypack.core.labels import LABEL_KEY, NO_SCHEDULE, TO_BE_DELETED_TAINT, Requirement, Taint
from stickypack.core.routing import LabelSelector, SelectorError
from stickypack.core.topologyspread import SpreadCounts, spread_key

if TYPE_CHECKING:
    from stickypack.core.nodetable import NodeTable
    from stickypack.core.pod import Pod

#: What a host port binds when it names no ``hostIP``: every address of the node.
ALL_HOST_IPS = "0.0.0.0"
#: Protocols of a container port (``TCP`` when none is given).
PORT_PROTOCOLS = ("TCP", "UDP", "SCTP")

#: Namespace name to its labels. ``None``: the labels are not known (the namespaces could not
#: be listed); a term's non-empty ``namespaceSelector`` is then taken to select every namespace.
NamespaceLabels = Mapping[str, Mapping[str, str]] | None


@dataclass(frozen=True, slots=True)
class RequiredPodAffinityTerm:
    """A required pod (anti-)affinity term, as kube-scheduler's ``AffinityTerm`` holds it.

    It selects a pod whose labels match ``selector`` and whose namespace is in ``namespaces``
    or has labels matching ``namespace_selector``. ``selector`` None (the term has no
    ``labelSelector``) selects no pod; an empty one every pod. ``namespaces``: the term's
    list, or the pod's own namespace when the list is empty and there is no
    ``namespaceSelector``; ``namespace_selector`` None: none given, empty: every namespace.
    ``matchLabelKeys`` / ``mismatchLabelKeys`` are already merged into ``selector`` (``key In
    (value)`` / ``key NotIn (value)`` with the pod's own value; a key the pod lacks adds
    nothing), as the API server does when it creates the pod (with the pod's labels then: a
    pod read from the API server keeps its selector as stored).

    ``topology_key``: the node label whose value makes a topology domain: the term looks at
    the pods on every node with the same value (a node without the label is in no domain).
    """

    selector: LabelSelector | None
    topology_key: str
    namespaces: frozenset[str] = frozenset()
    namespace_selector: LabelSelector | None = None

    @property
    def key(self) -> tuple[object, ...]:
        """The term as a hashable value: two equal terms have equal keys, however their
        selectors' labels were ordered."""
        return (
            _selector_key(self.selector),
            self.topology_key,
            self.namespaces,
            _selector_key(self.namespace_selector),
        )

    def selects(self, pod: Pod, namespace_labels: NamespaceLabels = None) -> bool:
        """Whether the term selects ``pod`` (kube-scheduler's ``AffinityTerm.Matches``);
        ``namespace_labels``: see :data:`NamespaceLabels` (a namespace it does not list has
        no labels)."""
        if self.selector is None:
            return False
        if pod.namespace not in self.namespaces:
            if self.namespace_selector is None:
                return False
            selector = self.namespace_selector
            if (
                namespace_labels is not None
                and not selector.empty
                and not selector.matches(namespace_labels.get(pod.namespace, {}))
            ):
                return False
        return self.selector.matches(pod.labels)


@dataclass(frozen=True, slots=True)
class WeightedPodAffinityTerm:
    """A preferred pod (anti-)affinity term (``preferredDuringSchedulingIgnoredDuringExecution``,
    kube-scheduler's ``WeightedAffinityTerm``): ``weight`` 1..100 and its ``podAffinityTerm``,
    read as a required term is (``matchLabelKeys`` / ``mismatchLabelKeys`` merged)."""

    weight: int
    term: RequiredPodAffinityTerm


def _selector_key(selector: LabelSelector | None) -> tuple[object, ...] | None:
    if selector is None:
        return None
    return (tuple(sorted(selector.match_labels.items())), selector.expressions)


@dataclass(frozen=True, slots=True)
class HostPort:
    """A container port bound on its node (``hostPort``): ``protocol`` TCP, UDP or SCTP,
    ``host_ip`` the address (:data:`ALL_HOST_IPS` when none is given)."""

    port: int
    protocol: str = "TCP"
    host_ip: str = ALL_HOST_IPS

    def conflicts(self, other: HostPort) -> bool:
        """kube-scheduler's ``HostPortInfo.CheckConflict``: the same port and protocol, and
        the same address or either being ``0.0.0.0`` (which binds them all)."""
        return (
            self.port == other.port
            and self.protocol == other.protocol
            and (self.host_ip == other.host_ip or ALL_HOST_IPS in (self.host_ip, other.host_ip))
        )


def _string_list(raw: object, where: str) -> list[str]:
    if raw is None:
        return []
    if not isinstance(raw, list | tuple) or not all(isinstance(v, str) for v in raw):
        raise ValueError(f"{where} must be a list of strings, got {raw!r}")
    return list(raw)


def _selector(raw: object, where: str) -> LabelSelector:
    try:
        return LabelSelector.from_dict(raw)
    except SelectorError as exc:
        raise ValueError(f"{where}: {exc}") from None


def _label_keys(
    raw: Mapping[str, object], has_selector: bool, where: str
) -> tuple[tuple[str, list[str]], ...]:
    """A term's ``matchLabelKeys`` and ``mismatchLabelKeys``, each with the operator it merges
    with (``In``, ``NotIn``), checked as the API server checks them
    (``ValidateMatchLabelKeysAndMismatchLabelKeys``): label keys, set only with a
    ``labelSelector``, no key in both; else a ValueError naming the field."""
    match = _string_list(raw.get("matchLabelKeys"), f"{where}.matchLabelKeys")
    mismatch = _string_list(raw.get("mismatchLabelKeys"), f"{where}.mismatchLabelKeys")
    for field_name, keys in (("matchLabelKeys", match), ("mismatchLabelKeys", mismatch)):
        if keys and not has_selector:
            raise ValueError(f"{where}.{field_name}: cannot be set without labelSelector")
        for i, key in enumerate(keys):
            if not LABEL_KEY.fullmatch(key):
                raise ValueError(f"{where}.{field_name}[{i}]: {key!r} is not a label key")
    for i, key in enumerate(match):
        if key in mismatch:
            raise ValueError(f"{where}.matchLabelKeys[{i}]: {key!r} is also in mismatchLabelKeys")
    return (("In", match), ("NotIn", mismatch))


def required_term_from_dict(
    raw: object,
    pod_labels: Mapping[str, str],
    pod_namespace: str,
    where: str,
    label_keys_merged: bool = False,
) -> RequiredPodAffinityTerm:
    """One ``PodAffinityTerm`` dict of a pod in ``pod_namespace`` with ``pod_labels``;
    ValueError naming ``where`` (its path in the pod) and the bad field.

    ``matchLabelKeys`` / ``mismatchLabelKeys`` are merged into the selector with the values of
    ``pod_labels``, as the API server merges them when it creates the pod, unless
    ``label_keys_merged``: the pod was created (read from the API server), its selector holds
    them as merged then, with its labels of then (kube-scheduler never merges them itself: a
    pod relabelled since keeps the old values)."""
    if not isinstance(raw, Mapping):
        raise ValueError(f"{where}: a pod affinity term is a mapping, got {raw!r}")
    topology_key = raw.get("topologyKey")
    if not isinstance(topology_key, str) or not LABEL_KEY.fullmatch(topology_key):
        raise ValueError(f"{where}.topologyKey: {topology_key!r} is not a label key")
    selector = None
    if raw.get("labelSelector") is not None:
        selector = _selector(raw["labelSelector"], f"{where}.labelSelector")
    label_keys = _label_keys(raw, selector is not None, where)
    if selector is not None:
        merged = list(selector.expressions)
        for operator, keys in label_keys:
            for key in keys:
                if key in pod_labels and not label_keys_merged:
                    requirement = Requirement(key, operator, (pod_labels[key],))
                    if requirement not in merged:  # the API server merged it already
                        merged.append(requirement)
        selector = LabelSelector(selector.match_labels, tuple(merged))
    namespaces = _string_list(raw.get("namespaces"), f"{where}.namespaces")
    namespace_selector = None
    if raw.get("namespaceSelector") is not None:
        namespace_selector = _selector(raw["namespaceSelector"], f"{where}.namespaceSelector")
    if not namespaces and namespace_selector is None:
        namespaces = [pod_namespace]
    return RequiredPodAffinityTerm(selector, topology_key, frozenset(namespaces), namespace_selector)


def required_terms_from_list(
    raw: object,
    pod_labels: Mapping[str, str],
    pod_namespace: str,
    where: str,
    label_keys_merged: bool = False,
) -> tuple[RequiredPodAffinityTerm, ...]:
    """The terms of a ``requiredDuringSchedulingIgnoredDuringExecution`` list (None: none);
    ``label_keys_merged``: see :func:`required_term_from_dict`."""
    if raw is None:
        return ()
    if not isinstance(raw, list | tuple):
        raise ValueError(f"{where} must be a list of pod affinity terms, got {raw!r}")
    return tuple(
        required_term_from_dict(term, pod_labels, pod_namespace, f"{where}[{i}]", label_keys_merged)
        for i, term in enumerate(raw)
    )


def host_ports_from_spec(spec: Mapping[str, object]) -> tuple[HostPort, ...]:
    """The host ports of a pod spec, as kube-scheduler's ``GetHostPorts`` lists them: those of
    its containers and of its restartable (sidecar) init containers, ``hostPort`` above 0.
    With ``hostNetwork``, a port without ``hostPort`` binds its ``containerPort`` (the API
    server's defaulting). ValueError naming the bad port."""
    out: list[HostPort] = []
    host_network = spec.get("hostNetwork") is True
    for kind in ("initContainers", "containers"):
        containers = spec.get(kind) or ()
        if not isinstance(containers, list | tuple):
            raise ValueError(f"spec.{kind} must be a list, got {containers!r}")
        for i, container in enumerate(containers):
            if not isinstance(container, Mapping):
                raise ValueError(f"spec.{kind}[{i}] must be a mapping, got {container!r}")
            if kind == "initContainers" and container.get("restartPolicy") != "Always":
                continue  # an init container that ends binds its ports only while it runs
            ports = container.get("ports") or ()
            if not isinstance(ports, list | tuple):
                raise ValueError(f"spec.{kind}[{i}].ports must be a list, got {ports!r}")
            for j, port in enumerate(ports):
                where = f"spec.{kind}[{i}].ports[{j}]"
                if not isinstance(port, Mapping):
                    raise ValueError(f"{where} must be a mapping, got {port!r}")
                number = port.get("hostPort")
                if not number and host_network:  # unset or 0: the API server defaults it
                    number = port.get("containerPort")
                if number is None or number == 0:
                    continue
                if isinstance(number, bool) or not isinstance(number, int) or not 0 < number < 65536:
                    raise ValueError(f"{where}.hostPort: {number!r} is not a port number (1-65535)")
                protocol = port.get("protocol") or "TCP"
                if protocol not in PORT_PROTOCOLS:
                    known = ", ".join(PORT_PROTOCOLS)
                    raise ValueError(f"{where}.protocol: {protocol!r} is not one of {known}")
                host_ip = port.get("hostIP") or ALL_HOST_IPS
                if not isinstance(host_ip, str):
                    raise ValueError(f"{where}.hostIP: {host_ip!r} is not an address")
                out.append(HostPort(number, str(protocol), host_ip))
    return tuple(out)


def has_inter_pod_rules(pod: Pod) -> bool:
    """Whether ``pod`` has required pod (anti-)affinity terms, host ports or ``DoNotSchedule``
    topology spread constraints: a cluster whose pods have none needs no :class:`PodsOnNodes`."""
    return bool(
        pod.required_pod_affinity
        or pod.required_pod_anti_affinity
        or pod.host_ports
        or pod.spread_constraints
    )


def has_preferred_pod_affinity(pod: Pod) -> bool:
    """Whether ``pod`` has preferred pod affinity or anti-affinity terms (read in full:
    :attr:`~stickypack.core.pod.Pod.preferred_pod_affinity`,
    :attr:`~stickypack.core.pod.Pod.preferred_pod_anti_affinity`), which kube-scheduler's
    InterPodAffinity scores against the pods on the nodes."""
    return bool(pod.preferred_pod_affinity or pod.preferred_pod_anti_affinity)


def _remove_object(pods: list[Pod], pod: Pod) -> None:
    """Remove ``pod`` itself from ``pods`` (by identity: comparing pods field by field is slow,
    and two equal pods are two pods)."""
    for i, other in enumerate(pods):
        if other is pod:
            del pods[i]
            return
    raise ValueError(f"{pod.key} is not there")


def pods_on_table_nodes(
    table: NodeTable, pods: Iterable[tuple[str, Pod]], namespace_labels: NamespaceLabels = None
) -> PodsOnNodes:
    """A :class:`PodsOnNodes` of ``table``'s nodes (their labels, names and taints) with
    ``pods`` (node name, pod) added in order; a pod of a node ``table`` does not hold is left
    out (kube-scheduler's and the autoscaler's snapshots have no such node)."""
    labels: dict[int, Mapping[str, str]] = {}
    names: dict[int, str] = {}
    taints: dict[int, tuple[Taint, ...]] = {}
    for row in table.active_indices().tolist():
        info = table.info[row]
        if info is not None:
            labels[row], names[row], taints[row] = info.labels, info.name, info.taints
    on_nodes = PodsOnNodes(labels, namespace_labels, names, taints)
    for name, pod in pods:
        row = table.index.get(name)
        if row is not None:
            on_nodes.add(row, pod)
    return on_nodes


#: kube-scheduler's names of the filters :class:`PodsOnNodes` models.
NODE_PORTS = "NodePorts"
INTER_POD_AFFINITY = "InterPodAffinity"
POD_TOPOLOGY_SPREAD = "PodTopologySpread"


@dataclass
class PodsOnNodes:
    """The pods on each node (by row of a node table) and the nodes' labels: what
    InterPodAffinity, NodePorts and PodTopologySpread read. :meth:`add` and :meth:`remove`
    keep it up to date as a plan moves pods; :meth:`allows` (or :meth:`judge`, for many
    nodes) says whether a pod may go on a node.

    ``node_labels``: row to the node's labels (a row not given is a node without labels, and
    is no topology spread domain); ``namespace_labels``: see :data:`NamespaceLabels`;
    ``node_names`` and ``node_taints`` (by row; a row not given: no name, no taints) serve
    the spread constraints' node inclusion policies (a node name for a ``matchFields`` term).
    The three node mappings are copied: :meth:`drain_node` and :meth:`delete_node` change
    the copies, never the caller's."""

    node_labels: dict[int, Mapping[str, str]]
    namespace_labels: NamespaceLabels = None
    node_names: dict[int, str] = field(default_factory=dict)
    node_taints: dict[int, tuple[Taint, ...]] = field(default_factory=dict)
    pods: dict[int, list[Pod]] = field(default_factory=dict)
    #: The required anti-affinity terms of the pods on the nodes, each distinct term once
    #: (the replicas of a Deployment share theirs), with how many pods hold it in each
    #: (topology key, value) pair: what symmetry reads (kube-scheduler's
    #: ``existingAntiAffinityCounts``, before it asks which terms select the pod).
    _anti_terms: dict[tuple[object, ...], tuple[RequiredPodAffinityTerm, Counter[tuple[str, str]]]] = field(
        default_factory=dict
    )
    #: For each distinct list of terms a judged pod had (its anti-affinity terms one by one,
    #: its affinity terms together), how many pods every one of those terms selects in each
    #: (topology key, value) pair of the terms' keys: built when first asked, then kept as
    #: pods move (kube-scheduler's ``affinityCounts`` and ``antiAffinityCounts``, which it
    #: builds for each pod it schedules; the replicas of a Deployment share theirs here).
    _selected: dict[
        tuple[object, ...], tuple[tuple[RequiredPodAffinityTerm, ...], Counter[tuple[str, str]]]
    ] = field(default_factory=dict)
    #: The keys of :attr:`_selected` by one label a pod must carry to be selected (one of
    #: the first term's ``matchLabels`` that has any), and those of lists with none: a pod
    #: that moves is checked against the lists that may select it only.
    _selected_by_label: dict[tuple[str, str], list[tuple[object, ...]]] = field(default_factory=dict)
    _selected_any: list[tuple[object, ...]] = field(default_factory=list)
    #: The pods on the nodes by each of their labels (``id`` of the pod to its row and the
    #: pod), so a list of terms with a required label counts the pods carrying it alone;
    #: None until such a list is first counted (a cluster whose pods have host ports or
    #: spread constraints but no pod affinity terms never pays for it).
    _by_label: dict[tuple[str, str], dict[int, tuple[int, Pod]]] | None = None
    #: Topology spread counts by :func:`~stickypack.core.topologyspread.spread_key` (each
    #: built when a pod with that key is first judged, then kept up to date).
    _spread: dict[str, SpreadCounts] = field(default_factory=dict)
    #: The ``id`` of each pod :meth:`add` put on a node as nominated there (not bound).
    _nominated: set[int] = field(default_factory=set)

    #: The taints a node had before :meth:`drain_node`, by row, for :meth:`restore_node`.
    _taints_before: dict[int, tuple[Taint, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.node_labels = dict(self.node_labels)
        self.node_names = dict(self.node_names)
        self.node_taints = dict(self.node_taints)

    def add(self, row: int, pod: Pod, *, nominated: bool = False) -> None:
        """Put ``pod`` on ``row``; ``nominated``: a pending pod nominated there, which
        kube-scheduler's filters add with their ``AddPod`` (topology spread counts it as
        that adds it, not as its PreFilter counts the pods bound: :attr:`_nominated`)."""
        if nominated:
            self._nominated.add(id(pod))
        self.pods.setdefault(row, []).append(pod)
        if self._by_label is not None:
            for pair in pod.labels.items():
                self._by_label.setdefault(pair, {})[id(pod)] = (row, pod)
        self._count_anti_terms(row, pod, 1)
        self._count_selected(row, pod, 1)
        for counts in self._spread.values():
            counts.count(row, pod, 1)

    def remove(self, row: int, pod: Pod, *, nominated: bool = False) -> None:
        """Take ``pod`` (the object :meth:`add` was given, with the same ``nominated``) off
        ``row``."""
        _remove_object(self.pods[row], pod)
        if self._by_label is not None:
            for pair in pod.labels.items():
                self._by_label[pair].pop(id(pod), None)
        self._count_anti_terms(row, pod, -1)
        self._count_selected(row, pod, -1)
        for counts in self._spread.values():
            counts.count(row, pod, -1)
        if nominated:
            self._nominated.discard(id(pod))

    def drain_node(self, row: int) -> list[Pod]:
        """The cluster-autoscaler's ghost of a node whose removal it simulates: every pod
        taken off it (DaemonSet pods too) and the node tainted
        ``ToBeDeletedByClusterAutoscaler:NoSchedule`` (a topology spread constraint with
        ``nodeTaintsPolicy: Honor`` then no longer counts its domain, unless the pod
        tolerates the taint); it stays a topology domain otherwise. The pods taken off, for
        :meth:`restore_node`."""
        taken = list(self.pods.get(row, ()))
        for pod in taken:
            self.remove(row, pod)
        taints = self.node_taints.get(row, ())
        self._taints_before[row] = taints
        self.node_taints[row] = (*taints, Taint(TO_BE_DELETED_TAINT, "", NO_SCHEDULE))
        self._refresh_spread(row, taints_only=True)
        return taken

    def restore_node(self, row: int, pods: Iterable[Pod]) -> None:
        """Undo :meth:`drain_node`: the node's taints as they were, and ``pods`` back on it."""
        self.node_taints[row] = self._taints_before.pop(row, ())
        self._refresh_spread(row, taints_only=True)
        for pod in pods:
            self.add(row, pod)

    def delete_node(self, row: int) -> None:
        """The node of ``row`` leaves the cluster, with the pods on it: it is in no topology
        domain any more."""
        for pod in list(self.pods.get(row, ())):
            self.remove(row, pod)
        self.pods.pop(row, None)
        self.node_labels.pop(row, None)
        self.node_names.pop(row, None)
        self.node_taints.pop(row, None)
        self._taints_before.pop(row, None)
        self._refresh_spread(row)

    def _refresh_spread(self, row: int, taints_only: bool = False) -> None:
        """The spread counts after the node of ``row`` changed (``taints_only``: its taints
        alone, which only counts honoring taints read)."""
        for counts in self._spread.values():
            if not taints_only or counts.honors_taints:
                counts.refresh(row)

    def _count_anti_terms(self, row: int, pod: Pod, sign: int) -> None:
        labels = self.node_labels.get(row, {})
        for term in pod.required_pod_anti_affinity:
            if term.topology_key not in labels:
                continue  # a node without the label is in no domain: the term forbids nothing
            held = self._anti_terms.setdefault(term.key, (term, Counter()))[1]
            pair = (term.topology_key, labels[term.topology_key])
            held[pair] += sign
            if not held[pair]:
                del held[pair]

    def _count_selected(self, row: int, pod: Pod, sign: int) -> None:
        if not self._selected:
            return
        labels = self.node_labels.get(row, {})
        keys = [*self._selected_any]
        for pair in pod.labels.items():
            keys.extend(self._selected_by_label.get(pair, ()))
        for key in keys:
            terms, counts = self._selected[key]
            if all(t.selects(pod, self.namespace_labels) for t in terms):
                _count_pairs(counts, terms, labels, sign)

    def _selected_counts(self, terms: tuple[RequiredPodAffinityTerm, ...]) -> Counter[tuple[str, str]]:
        """How many pods all of ``terms`` select in each (topology key, value) pair of their
        keys (pairs without such a pod left out), kept from the first call on."""
        key = tuple(t.key for t in terms)
        entry = self._selected.get(key)
        if entry is None:
            required = next(
                (t.selector.match_labels for t in terms if t.selector and t.selector.match_labels), None
            )
            label = min(required.items()) if required else None
            candidates: Iterable[tuple[int, Pod]] = (
                self._pods_by_label().get(label, {}).values()
                if label is not None
                else ((row, other) for row, pods in self.pods.items() for other in pods)
            )
            counts: Counter[tuple[str, str]] = Counter()
            for row, other in candidates:
                if all(t.selects(other, self.namespace_labels) for t in terms):
                    _count_pairs(counts, terms, self.node_labels.get(row, {}), 1)
            entry = self._selected[key] = (terms, counts)
            if label is not None:
                self._selected_by_label.setdefault(label, []).append(key)
            else:
                self._selected_any.append(key)
        return entry[1]

    def _pods_by_label(self) -> dict[tuple[str, str], dict[int, tuple[int, Pod]]]:
        """:attr:`_by_label`, built from the pods on the nodes when first asked, then kept."""
        if self._by_label is None:
            self._by_label = {}
            for row, pods in self.pods.items():
                for pod in pods:
                    for pair in pod.labels.items():
                        self._by_label.setdefault(pair, {})[id(pod)] = (row, pod)
        return self._by_label

    def allows(self, pod: Pod, row: int) -> bool:
        """Whether kube-scheduler's NodePorts, InterPodAffinity and PodTopologySpread filters
        let ``pod`` onto the node of ``row``, given the pods on the nodes now: :meth:`judge`."""
        return self.judge(pod)(row)

    def judge(self, pod: Pod) -> Callable[[int], bool]:
        """A check of ``pod`` on one row after another, valid while no pod moves: True
        where kube-scheduler's NodePorts, InterPodAffinity and PodTopologySpread filters let
        it onto the node given the pods on the nodes now (:meth:`failing_filter`)."""
        failing = self.failing_filter(pod)
        return lambda row: failing(row) is None

    def inter_pod_affinity_runs(self, pod: Pod) -> bool:
        """Whether kube-scheduler's InterPodAffinity PreFilter, given the pods on the nodes
        now, goes on for ``pod`` rather than return Skip (its Filter and its ``AddPod``
        extension then not run): ``pod`` has required pod affinity or anti-affinity terms, or
        a pod on a node with the term's topology label has a required anti-affinity term
        that selects ``pod`` (``existingAntiAffinityCounts`` not empty)."""
        if pod.required_pod_affinity or pod.required_pod_anti_affinity:
            return True
        ns = self.namespace_labels
        return any(held and term.selects(pod, ns) for term, held in self._anti_terms.values())

    def failing_filter(self, pod: Pod, inter_pod_affinity: bool = True) -> Callable[[int], str | None]:
        """A check of ``pod`` on one row after another, valid while no pod moves: the name
        of the kube-scheduler filter that keeps it off the node given the pods on the nodes
        now (``NodePorts``, ``PodTopologySpread``, ``InterPodAffinity``: the first of those
        that fails, in the order every kube-scheduler profile runs them, each checked as
        kube-scheduler checks it), None where they all let it on:

        - host ports: none of ``pod``'s conflicts with one of a pod on the node
          (:meth:`HostPort.conflicts`);
        - topology spread: each of ``pod``'s ``DoNotSchedule`` constraints holds
          (:meth:`~stickypack.core.topologyspread.SpreadCounts.judge`);
        - symmetry: no pod in the node's domain (for the term's topology key) has a required
          anti-affinity term that selects ``pod``;
        - required anti-affinity: for each of ``pod``'s terms, no pod in the node's domain is
          selected (a node without the topology label passes);
        - required affinity: the node has every term's topology label, and for each term
          some pod in the node's domain is selected by *all* the terms; or, kube-scheduler's
          special case for the first of a group of pods that attract each other, no pod on
          any node with one of the terms' topology labels is selected by all the terms and
          ``pod`` is selected by all its own terms.

        As kube-scheduler's PreFilter, it first finds the (topology key, value) pairs the
        other pods' anti-affinity terms that select ``pod`` forbid, and the spread counts.
        ``inter_pod_affinity`` False: InterPodAffinity's PreFilter returned Skip
        (:meth:`inter_pod_affinity_runs`, asked before pods were added for this check, as
        kube-scheduler adds a node's nominated pods to a PreFilter state already made), so
        the other pods' anti-affinity terms are not checked."""
        ns = self.namespace_labels
        forbidden: set[tuple[str, str]] = set()
        for term, held in self._anti_terms.values() if inter_pod_affinity else ():
            if held and term.selects(pod, ns):
                forbidden.update(held)
        affinity = pod.required_pod_affinity
        spread = self._spread_counts(pod).judge(pod) if pod.spread_constraints else None
        anti = [(t, self._selected_counts((t,))) for t in pod.required_pod_anti_affinity]
        selected = self._selected_counts(affinity) if affinity else None

        def failing(row: int) -> str | None:
            labels = self.node_labels.get(row, {})
            if pod.host_ports:
                for other in self.pods.get(row, ()):
                    for used in other.host_ports:
                        if any(want.conflicts(used) for want in pod.host_ports):
                            return NODE_PORTS
            if spread is not None and not spread(row):
                return POD_TOPOLOGY_SPREAD
            if forbidden and any(pair in forbidden for pair in labels.items()):
                return INTER_POD_AFFINITY
            for term, counts in anti:
                value = labels.get(term.topology_key)
                if value is not None and counts[(term.topology_key, value)] > 0:
                    return INTER_POD_AFFINITY
            if selected is None:
                return None
            if any(term.topology_key not in labels for term in affinity):
                return INTER_POD_AFFINITY
            if all(selected[(t.topology_key, labels[t.topology_key])] > 0 for t in affinity):
                return None
            # kube-scheduler's special case: no pod anywhere selected by all the terms
            if not any(selected.values()) and all(t.selects(pod, ns) for t in affinity):
                return None
            return INTER_POD_AFFINITY

        return failing

    def inter_pod_affinity_sums(
        self, pod: Pod, hard_pod_affinity_weight: int = 1
    ) -> dict[tuple[str, str], int]:
        """kube-scheduler's InterPodAffinity PreScore for ``pod`` (v1.37.2, ``scoring.go``):
        the sum each (topology key, value) pair gets from the pods on the nodes, all of them
        (every node's, not only the nodes being scored), each on a node with that label:

        - each of ``pod``'s preferred affinity terms that selects the pod adds its weight,
          each preferred anti-affinity term subtracts it;
        - each of the pod's required affinity terms that selects ``pod`` adds
          ``hard_pod_affinity_weight`` (the plugin's ``hardPodAffinityWeight``, 1 by
          default; 0: none), each of its preferred affinity terms that does adds its weight,
          each preferred anti-affinity term subtracts it.

        A pair a term counted stays in, even where its sum comes to 0. Empty: the PreScore
        returns Skip (no term counted anywhere). A node's raw score is the sum of its pairs'.
        A term's namespaces and ``namespaceSelector`` as the filters read them
        (:meth:`RequiredPodAffinityTerm.selects`)."""
        ns = self.namespace_labels
        own_affinity = pod.preferred_pod_affinity
        own_anti = pod.preferred_pod_anti_affinity
        sums: dict[tuple[str, str], int] = {}

        def count(term: RequiredPodAffinityTerm, labels: Mapping[str, str], amount: int) -> None:
            value = labels.get(term.topology_key)
            if value is not None:
                pair = (term.topology_key, value)
                sums[pair] = sums.get(pair, 0) + amount

        for row, pods in self.pods.items():
            labels = self.node_labels.get(row)
            if not labels:
                continue  # a node without labels is in no topology domain
            for other in pods:
                for weighted in own_affinity:
                    if weighted.term.selects(other, ns):
                        count(weighted.term, labels, weighted.weight)
                for weighted in own_anti:
                    if weighted.term.selects(other, ns):
                        count(weighted.term, labels, -weighted.weight)
                if hard_pod_affinity_weight > 0:
                    for term in other.required_pod_affinity:
                        if term.selects(pod, ns):
                            count(term, labels, hard_pod_affinity_weight)
                for weighted in other.preferred_pod_affinity:
                    if weighted.term.selects(pod, ns):
                        count(weighted.term, labels, weighted.weight)
                for weighted in other.preferred_pod_anti_affinity:
                    if weighted.term.selects(pod, ns):
                        count(weighted.term, labels, -weighted.weight)
        return sums

    def _spread_counts(self, pod: Pod) -> SpreadCounts:
        key = spread_key(pod)
        counts = self._spread.get(key)
        if counts is None:
            counts = SpreadCounts.build(
                pod, self.node_labels, self.node_names, self.node_taints, self.pods, self._nominated
            )
            self._spread[key] = counts
        return counts


def _count_pairs(
    counts: Counter[tuple[str, str]],
    terms: Sequence[RequiredPodAffinityTerm],
    labels: Mapping[str, str],
    sign: int,
) -> None:
    """Count a selected pod on a node of ``labels`` in each (topology key, value) pair of
    ``terms``' keys the node has (each key once)."""
    for key in {t.topology_key for t in terms}:
        if key in labels:
            pair = (key, labels[key])
            counts[pair] += sign
            if not counts[pair]:
                del counts[pair]
