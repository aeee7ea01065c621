"""Pod topology spread constraints: what kube-scheduler's ``PodTopologySpread`` filter
checks, for the scale-down simulation.

- :class:`SpreadConstraint`: one entry of a pod's ``spec.topologySpreadConstraints``, read by
  :func:`spread_constraints_from_list` (the ``DoNotSchedule`` ones, or with ``when`` the
  ``ScheduleAnyway`` ones, which only score).
- :class:`SpreadCounts`: for one pod's constraints, the pods each constraint selects in each
  eligible topology domain (kube-scheduler's PreFilter state), kept up to date as pods
  move (:class:`~stickypack.core.podaffinity.PodsOnNodes` holds one per distinct set of
  constraints), and :meth:`SpreadCounts.judge`, the Filter's skew check.

- :func:`spread_scores`: kube-scheduler's PodTopologySpread *score* (PreScore, Score and
  NormalizeScore of ``scoring.go``) for a pod's ``ScheduleAnyway`` constraints or, when it
  has no constraints at all, the system default ones (:data:`SYSTEM_DEFAULT_CONSTRAINTS`,
  with the pod's :attr:`~stickypack.core.pod.Pod.default_spread_selector`); those default
  constraints are ``ScheduleAnyway``: they filter nothing.

Pure: no I/O, no clock.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import TYPE_CHECKING

from stickypack.core.labels import (
    HOSTNAME_LABEL,
    NO_EXECUTE,
    NO_SCHEDULE,
    Requirement,
    Taint,
    tolerated,
)
from stickypack.core.routing import LabelSelector, SelectorError

if TYPE_CHECKING:
    from stickypack.core.pod import Pod

DO_NOT_SCHEDULE = "DoNotSchedule"
SCHEDULE_ANYWAY = "ScheduleAnyway"
#: ``nodeAffinityPolicy`` / ``nodeTaintsPolicy`` values.
HONOR = "Honor"
IGNORE = "Ignore"
#: The zone label (``v1.LabelTopologyZone``).
ZONE_LABEL = "topology.kubernetes.io/zone"
#: kube-scheduler's system default constraints (``PodTopologySpreadArgs`` with
#: ``defaultingType: System``, its default), in its order: (topology key, ``maxSkew``), each
#: ``ScheduleAnyway``.
SYSTEM_DEFAULT_CONSTRAINTS = ((HOSTNAME_LABEL, 3), (ZONE_LABEL, 5))


@dataclass(frozen=True, slots=True)
class SpreadConstraint:
    """A topology spread constraint, as kube-scheduler holds it.

    For a ``DoNotSchedule`` one (the filter), a pod may go to a node only if, in the node's
    domain (the nodes sharing its value of ``topology_key``), the pods ``selector`` selects
    (in the pod's namespace, terminating ones left out), plus the pod itself if selected,
    exceed the fewest in any eligible domain by at most ``max_skew``; that fewest is 0 while
    fewer than ``min_domains`` domains are eligible. ``selector`` None (no
    ``labelSelector``) selects no pod; ``matchLabelKeys`` are already merged into it (``key
    In (value)`` with the pod's own value; a key the pod lacks adds nothing), as the API
    server does when it creates the pod.

    Eligible domains are those of the nodes that carry every one of the pod's constraints'
    topology keys and, with ``honor_node_affinity`` (``nodeAffinityPolicy: Honor``, the
    default), match the pod's node selector and required node affinity and, with
    ``honor_node_taints`` (``nodeTaintsPolicy: Honor``; default ``Ignore``), have no
    NoSchedule or NoExecute taint the pod does not tolerate.
    """

    max_skew: int
    topology_key: str
    selector: LabelSelector | None
    min_domains: int = 1
    honor_node_affinity: bool = True
    honor_node_taints: bool = False

    def selects(self, pod: Pod) -> bool:
        """Whether the constraint's selector selects ``pod``'s labels (namespace not read)."""
        return self.selector is not None and self.selector.matches(pod.labels)


def _positive_int(raw: object, where: str) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int) or not 0 < raw < 2**31:
        raise ValueError(f"{where}: {raw!r} is not a positive integer")
    return raw


def _policy(raw: object, where: str, default: str) -> bool:
    """True for ``Honor``, False for ``Ignore``; ``default`` when absent."""
    value = default if raw is None else raw
    if value not in (HONOR, IGNORE):
        raise ValueError(f"{where}: {raw!r} is not {HONOR} or {IGNORE}")
    return value == HONOR


def spread_constraint_from_dict(
    raw: object, pod_labels: Mapping[str, str], where: str
) -> tuple[str, SpreadConstraint]:
    """One ``TopologySpreadConstraint`` dict of a pod with ``pod_labels``: its
    ``whenUnsatisfiable`` and the constraint. ValueError naming ``where`` (its path in the
    pod) and the bad field, for what the API server refuses."""
    if not isinstance(raw, Mapping):
        raise ValueError(f"{where}: a topology spread constraint is a mapping, got {raw!r}")
    max_skew = _positive_int(raw.get("maxSkew"), f"{where}.maxSkew")
    topology_key = raw.get("topologyKey")
    # the API server requires only a non-empty string (ValidateTopologyKey): a key no label
    # can have is a domain no node is in
    if not isinstance(topology_key, str) or not topology_key:
        raise ValueError(f"{where}.topologyKey: {topology_key!r} is not a non-empty string")
    when = raw.get("whenUnsatisfiable")
    if when not in (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY):
        raise ValueError(f"{where}.whenUnsatisfiable: {when!r} is not {DO_NOT_SCHEDULE} or {SCHEDULE_ANYWAY}")
    min_domains = 1
    if raw.get("minDomains") is not None:
        min_domains = _positive_int(raw["minDomains"], f"{where}.minDomains")
        if when != DO_NOT_SCHEDULE:
            raise ValueError(f"{where}.minDomains: only with whenUnsatisfiable {DO_NOT_SCHEDULE}")
    selector = None
    if raw.get("labelSelector") is not None:
        try:
            selector = LabelSelector.from_dict(raw["labelSelector"])
        except SelectorError as exc:
            raise ValueError(f"{where}.labelSelector: {exc}") from None
    keys = raw.get("matchLabelKeys")
    if keys is not None:
        if not isinstance(keys, list | tuple) or not all(isinstance(k, str) for k in keys):
            raise ValueError(f"{where}.matchLabelKeys must be a list of strings, got {keys!r}")
        if keys and selector is None:
            raise ValueError(f"{where}.matchLabelKeys: cannot be set without labelSelector")
        if selector is not None:
            merged = list(selector.expressions)
            for key in keys:
                if key in pod_labels:
                    requirement = Requirement(key, "In", (pod_labels[key],))
                    if requirement not in merged:  # the API server merged it already
                        merged.append(requirement)
            selector = LabelSelector(selector.match_labels, tuple(merged))
    constraint = SpreadConstraint(
        max_skew=max_skew,
        topology_key=topology_key,
        selector=selector,
        min_domains=min_domains,
        honor_node_affinity=_policy(raw.get("nodeAffinityPolicy"), f"{where}.nodeAffinityPolicy", HONOR),
        honor_node_taints=_policy(raw.get("nodeTaintsPolicy"), f"{where}.nodeTaintsPolicy", IGNORE),
    )
    return str(when), constraint


def spread_constraints_from_list(
    raw: object, pod_labels: Mapping[str, str], where: str, when: str = DO_NOT_SCHEDULE
) -> tuple[SpreadConstraint, ...]:
    """The ``DoNotSchedule`` constraints (or those of ``when``) of a
    ``topologySpreadConstraints`` list (None: none); every entry is read, so a malformed one
    of the other kind fails too."""
    if raw is None:
        return ()
    if not isinstance(raw, list | tuple):
        raise ValueError(f"{where} must be a list of topology spread constraints, got {raw!r}")
    read = [spread_constraint_from_dict(c, pod_labels, f"{where}[{i}]") for i, c in enumerate(raw)]
    return tuple(constraint for kind, constraint in read if kind == when)


def _untolerated(taints: Iterable[Taint], pod: Pod) -> bool:
    """A NoSchedule or NoExecute taint ``pod`` does not tolerate (TaintToleration's rule)."""
    return any(t.effect in (NO_SCHEDULE, NO_EXECUTE) and not tolerated(t, pod.tolerations) for t in taints)


def _counter(constraint: SpreadConstraint, namespace: str) -> Callable[[Pod], bool]:
    """kube-scheduler's ``countPodsMatchSelector`` for one constraint: whether a pod counts
    (of ``namespace``, not terminating, selected; an empty selector, which selects every
    pod, counts none there). A plain loop: it runs for every pod of the cluster when the
    counts are built, and for every pod moved."""
    selector = constraint.selector
    if selector is None or selector.empty:
        return lambda pod: False
    pairs = tuple(selector.match_labels.items())
    expressions = selector.expressions

    def counts(pod: Pod) -> bool:
        if pod.namespace != namespace or pod.deleted is not None:
            return False
        labels = pod.labels
        for key, value in pairs:
            if labels.get(key) != value:
                return False
        return all(requirement.matches(labels) for requirement in expressions)

    return counts


def _added_counter(constraint: SpreadConstraint, namespace: str) -> Callable[[Pod], bool]:
    """kube-scheduler's PodTopologySpread ``AddPod`` (``updateWithPod``) for one constraint:
    a pod nominated to a node counts when it is of ``namespace`` and the selector selects
    it, an empty selector too, and a pod being deleted too (unlike :func:`_counter`)."""
    return lambda pod: pod.namespace == namespace and constraint.selects(pod)


def spread_key(pod: Pod) -> str:
    """What :class:`SpreadCounts` for ``pod`` depends on: its namespace and constraints, and
    its node affinity and tolerations where a constraint honors them. Pods with one key
    (the replicas of a Deployment) share their counts."""
    constraints = pod.spread_constraints
    affinity = (
        (sorted(pod.node_selector.items()), pod.required_terms)
        if any(c.honor_node_affinity for c in constraints)
        else None
    )
    tolerations = pod.tolerations if any(c.honor_node_taints for c in constraints) else None
    return repr((pod.namespace, constraints, affinity, tolerations))


@dataclass
class SpreadCounts:
    """kube-scheduler's PreFilter state for the spread constraints of ``pod`` (and of every
    pod with its :func:`spread_key`): per constraint, the eligible rows with their domain
    (topology value), how many eligible rows each domain has, and the count of selected pods
    in each eligible domain (domains with none included, at 0). :meth:`count` keeps it up
    to date as pods move, :meth:`refresh` as a node's labels or taints change or it leaves;
    build it with :meth:`build`.

    ``node_labels``, ``node_names``, ``node_taints`` and ``pods`` (by row) are the caller's
    live mappings (:class:`~stickypack.core.podaffinity.PodsOnNodes`'), read again by
    :meth:`refresh`."""

    pod: Pod
    node_labels: Mapping[int, Mapping[str, str]]
    node_names: Mapping[int, str]
    node_taints: Mapping[int, Sequence[Taint]]
    pods: Mapping[int, Iterable[Pod]]
    #: Per constraint: eligible row to its domain.
    eligible: tuple[dict[int, str], ...] = ()
    #: Per constraint: domain to its number of eligible rows.
    domain_rows: tuple[dict[str, int], ...] = ()
    #: Per constraint: domain to the selected pods in it.
    counts: tuple[dict[str, int], ...] = ()
    #: Per constraint: whether a pod counts (:func:`_counter`).
    counted: tuple[Callable[[Pod], bool], ...] = ()
    #: Per constraint: whether a pod nominated to a node counts, as kube-scheduler's
    #: ``AddPod`` adds it (:func:`_added_counter`).
    added_counted: tuple[Callable[[Pod], bool], ...] = ()
    #: The ``id`` of each pod of ``pods`` that is a pending pod nominated to its node, not
    #: bound (the caller's live set).
    nominated: AbstractSet[int] = frozenset()

    @classmethod
    def build(
        cls,
        pod: Pod,
        node_labels: Mapping[int, Mapping[str, str]],
        node_names: Mapping[int, str],
        node_taints: Mapping[int, Sequence[Taint]],
        pods: Mapping[int, Iterable[Pod]],
        nominated: AbstractSet[int] = frozenset(),
    ) -> SpreadCounts:
        """The counts for ``pod``'s constraints over the nodes of ``node_labels`` (row to
        labels; a row it lacks is no node) holding ``pods``; ``node_names`` and
        ``node_taints`` (by row; missing: none) are read for the inclusion policies;
        ``nominated``: see the field."""
        n = len(pod.spread_constraints)
        state = cls(
            pod,
            node_labels,
            node_names,
            node_taints,
            pods,
            tuple({} for _ in range(n)),
            tuple({} for _ in range(n)),
            tuple({} for _ in range(n)),
            tuple(_counter(c, pod.namespace) for c in pod.spread_constraints),
            tuple(_added_counter(c, pod.namespace) for c in pod.spread_constraints),
            nominated,
        )
        for row in node_labels:
            state.refresh(row)
        return state

    @property
    def honors_taints(self) -> bool:
        """Whether a node's taints decide if it is eligible (a constraint honors them)."""
        return any(c.honor_node_taints for c in self.pod.spread_constraints)

    def _eligible_for(self, row: int) -> list[str | None]:
        """Per constraint, ``row``'s domain if it is eligible now, else None."""
        constraints = self.pod.spread_constraints
        labels = self.node_labels.get(row)
        if labels is None or not all(c.topology_key in labels for c in constraints):
            return [None] * len(constraints)  # a node lacking any of the keys counts for none
        out: list[str | None] = []
        affinity_ok: bool | None = None
        for c in constraints:
            if c.honor_node_affinity:
                if affinity_ok is None:
                    from stickypack.core.plugins.kubescheduler import node_matches_required

                    affinity_ok = node_matches_required(self.pod, labels, self.node_names.get(row, ""))
                if not affinity_ok:
                    out.append(None)
                    continue
            if c.honor_node_taints and _untolerated(self.node_taints.get(row, ()), self.pod):
                out.append(None)
                continue
            out.append(labels[c.topology_key])
        return out

    def refresh(self, row: int) -> None:
        """Take ``row``'s node in or out of the domains it is eligible for now (its labels,
        name and taints as the mappings hold them; a row they no longer hold is out), with
        the pods on it."""
        for i, now in enumerate(self._eligible_for(row)):
            before = self.eligible[i].get(row)
            if before == now:
                continue
            selected = sum(self._counts(i, p) for p in self.pods.get(row, ()))
            if before is not None:
                del self.eligible[i][row]
                self.counts[i][before] -= selected
                self.domain_rows[i][before] -= 1
                if not self.domain_rows[i][before]:
                    del self.domain_rows[i][before], self.counts[i][before]
            if now is not None:
                self.eligible[i][row] = now
                self.counts[i][now] = self.counts[i].get(now, 0) + selected
                self.domain_rows[i][now] = self.domain_rows[i].get(now, 0) + 1

    def _counts(self, i: int, pod: Pod) -> bool:
        """Whether ``pod`` counts for constraint ``i``: as kube-scheduler's PreFilter counts
        the pods on the nodes, or, one of :attr:`nominated`, as its ``AddPod`` adds it."""
        return (self.added_counted if id(pod) in self.nominated else self.counted)[i](pod)

    def count(self, row: int, pod: Pod, sign: int) -> None:
        """``pod`` arrives on (``sign`` 1) or leaves (-1) the node of ``row`` (a nominated
        one is in :attr:`nominated` while it is counted)."""
        for i, (eligible, counts) in enumerate(zip(self.eligible, self.counts, strict=True)):
            value = eligible.get(row)
            if value is not None and self._counts(i, pod):
                counts[value] += sign

    def judge(self, pod: Pod) -> Callable[[int], bool]:
        """kube-scheduler's Filter for ``pod`` (whose constraints these are) on one row after
        another, valid while no pod moves: the node has every constraint's topology key, and
        for each constraint the selected pods in its domain, plus one if ``pod`` is selected,
        minus the fewest in an eligible domain (0 while fewer than ``min_domains`` domains
        are eligible) is at most ``max_skew``. A node need not be eligible itself."""
        constraints = pod.spread_constraints
        minimums = [
            min(counts.values()) if len(counts) >= c.min_domains else 0
            for c, counts in zip(constraints, self.counts, strict=True)
        ]
        selves = [1 if c.selects(pod) else 0 for c in constraints]
        checks = list(zip(constraints, self.counts, minimums, selves, strict=True))

        def allows(row: int) -> bool:
            labels = self.node_labels.get(row, {})
            for c, counts, minimum, itself in checks:
                value = labels.get(c.topology_key)
                if value is None:
                    return False
                if counts.get(value, 0) + itself - minimum > c.max_skew:
                    return False
            return True

        return allows


# ---- the score ---------------------------------------------------------------------------

#: Go's ``math.Log`` (the fdlibm algorithm, which Go's amd64 assembly follows step by
#: step): its published constants.
_LN2_HI = 6.93147180369123816490e-01
_LN2_LO = 1.90821492927058770002e-10
_LG = (
    6.666666666666735130e-01,
    3.999999999940941908e-01,
    2.857142874366239149e-01,
    2.222219843214978396e-01,
    1.818357216161805012e-01,
    1.531383769920937332e-01,
    1.479819860511658591e-01,
)


def go_log(x: float) -> float:
    """``math.Log(x)`` as Go computes it, for ``x`` > 0 finite: the fdlibm reduction
    ``x = 2**k * (1 + f)`` and its polynomial, one double rounding at each step. The C
    library's ``log`` (Python's :func:`math.log`) is closer to exact and differs from it in
    the last bit for about 1 in 100 integers, which can move PodTopologySpread's rounding."""
    f1, k = math.frexp(x)
    if f1 < math.sqrt(2) / 2:
        f1 *= 2
        k -= 1
    f = f1 - 1
    s = f / (2 + f)
    s2 = s * s
    s4 = s2 * s2
    t1 = s2 * (_LG[0] + s4 * (_LG[2] + s4 * (_LG[4] + s4 * _LG[6])))
    t2 = s4 * (_LG[1] + s4 * (_LG[3] + s4 * _LG[5]))
    r = t1 + t2
    hfsq = 0.5 * f * f
    return k * _LN2_HI - ((hfsq - (s * (hfsq + r) + k * _LN2_LO)) - f)


def go_round(x: float) -> int:
    """Go's ``math.Round`` of ``x`` >= 0: half away from zero (Python's :func:`round` takes
    half to even)."""
    whole = math.floor(x)
    return int(whole) + (1 if x - whole >= 0.5 else 0)


def score_constraints(pod: Pod) -> tuple[tuple[SpreadConstraint, ...], bool]:
    """kube-scheduler's PodTopologySpread PreScore constraints for ``pod``, and whether a
    node must carry every one of their topology keys to be scored
    (``requireAllTopologies``): its ``ScheduleAnyway`` constraints when it has any
    constraint (of either kind), and True; else the system default ones
    (:data:`SYSTEM_DEFAULT_CONSTRAINTS`) with its :attr:`~stickypack.core.pod.Pod.default_spread_selector`
    when that selects anything, and False. No constraints: the plugin skips the pod."""
    if pod.spread_constraints or pod.soft_spread_constraints:
        return pod.soft_spread_constraints, True
    selector = pod.default_spread_selector
    if selector is None or selector.empty:
        return (), False
    return tuple(SpreadConstraint(skew, key, selector) for key, skew in SYSTEM_DEFAULT_CONSTRAINTS), False


#: The controllers whose selector kube-scheduler's ``DefaultSelector`` adds, by (API group,
#: version, kind) of a pod's controller reference: exactly these (``rcKind``, ``rsKind``,
#: ``ssKind``; an ``apps/v1beta2`` ReplicaSet is none of them).
DEFAULT_SELECTOR_CONTROLLERS = (
    ("", "v1", "ReplicationController"),
    ("apps", "v1", "ReplicaSet"),
    ("apps", "v1", "StatefulSet"),
)


def default_selector_kind(api_version: str | None, kind: str | None) -> str | None:
    """``kind`` when a pod's controller reference of ``api_version`` and ``kind`` names a
    controller whose selector ``DefaultSelector`` reads (:data:`DEFAULT_SELECTOR_CONTROLLERS`,
    the ``apiVersion`` parsed as Go's ``schema.ParseGroupVersion``: ``version`` or
    ``group/version``, more than one ``/`` none), else None."""
    if api_version is None or kind is None:
        return None
    group, slash, version = api_version.partition("/")
    if not slash:
        group, version = "", api_version
    elif "/" in version:
        return None  # ParseGroupVersion's error: DefaultSelector keeps the Services' selector
    return kind if (group, version, kind) in DEFAULT_SELECTOR_CONTROLLERS else None


def default_selector(
    pod_labels: Mapping[str, str],
    service_selectors: Iterable[object],
    controller_kind: str | None = None,
    controller_selector: object = None,
) -> LabelSelector | None:
    """kube-scheduler's ``DefaultSelector`` (``helper/spread.go``) for a pod with
    ``pod_labels``: the ``spec.selector`` maps of the Services of its namespace that select
    it (``service_selectors``: every Service's; a null one selects nothing, a malformed one
    is skipped) merged, then its controller's selector (``controller_kind`` and its
    ``spec.selector``): a ReplicationController's map merged in, a ReplicaSet's or
    StatefulSet's label selector ANDed (one it cannot parse adds nothing). None when that
    selects nothing (empty)."""
    merged: dict[str, str] = {}
    for raw in service_selectors:
        if not isinstance(raw, Mapping) or not all(isinstance(v, str) for v in raw.values()):
            continue
        if all(pod_labels.get(k) == v for k, v in raw.items()):
            merged.update(raw)
    expressions: tuple[Requirement, ...] = ()
    if controller_kind == "ReplicationController" and isinstance(controller_selector, Mapping):
        merged.update({str(k): str(v) for k, v in controller_selector.items()})
    elif controller_kind in ("ReplicaSet", "StatefulSet") and controller_selector is not None:
        try:
            other = LabelSelector.from_dict(controller_selector)
        except SelectorError:
            other = LabelSelector()
        expressions = (
            *(Requirement(k, "In", (v,)) for k, v in other.match_labels.items()),
            *other.expressions,
        )
    selector = LabelSelector(merged, expressions)
    return None if selector.empty else selector


def scores_spread(pod: Pod) -> bool:
    """Whether PodTopologySpread scores ``pod`` (does not skip it)."""
    return bool(score_constraints(pod)[0])


def spread_scores(
    pod: Pod,
    rows: Sequence[int],
    node_labels: Mapping[int, Mapping[str, str]],
    pods: Mapping[int, Iterable[Pod]],
    node_names: Mapping[int, str],
    node_taints: Mapping[int, Sequence[Taint]],
) -> list[int]:
    """kube-scheduler's PodTopologySpread scores (0..100, normalized) of ``pod`` on the
    feasible nodes ``rows``, with every node of the cluster in ``node_labels`` (row to
    labels; ``node_names`` and ``node_taints`` by row for the inclusion policies) holding
    ``pods`` (by row). kube-scheduler v1.37's ``scoring.go``:

    - the constraints of :func:`score_constraints`; none: every node 0 (the plugin skips);
    - a feasible node lacking one of their topology keys is *ignored* when every key is
      required (the pod's own constraints); the domains of each constraint are the values
      the other feasible nodes have ("" for a node lacking the key, with the system
      defaults), and its weight ``log(domains + 2)`` (for ``kubernetes.io/hostname``,
      ``log(feasible nodes not ignored + 2)``);
    - a domain's count: the pods the constraint selects (of the pod's namespace, not
      terminating; an empty selector selects none) on every node of the cluster in it that
      carries every key (when required) and passes the constraint's inclusion policies
      (``nodeAffinityPolicy``, ``nodeTaintsPolicy``); for the hostname key, the node's own
      pods, with no policy;
    - a node's raw score: ``round(sum(count * weight + maxSkew - 1))`` over the constraints
      whose key it carries; then ignored nodes 0, and the others
      ``100 * (max + min - raw) // max`` (all 100 when max is 0).
    """
    constraints, require_all = score_constraints(pod)
    if not constraints:
        return [0] * len(rows)
    keys = [c.topology_key for c in constraints]
    counted = [_counter(c, pod.namespace) for c in constraints]
    ignored: set[int] = set()
    counts: list[dict[str, int]] = [{} for _ in constraints]
    for row in rows:
        labels = node_labels.get(row, {})
        if require_all and not all(k in labels for k in keys):
            ignored.add(row)
            continue
        for key, domains in zip(keys, counts, strict=True):
            if key != HOSTNAME_LABEL:
                domains.setdefault(labels.get(key, ""), 0)
    scored = len(rows) - len(ignored)
    weights = [
        go_log(float((scored if key == HOSTNAME_LABEL else len(domains)) + 2))
        for key, domains in zip(keys, counts, strict=True)
    ]
    if any(counts):
        affinity: dict[int, bool] = {}
        for row, labels in node_labels.items():
            if require_all and not all(k in labels for k in keys):
                continue
            for c, count_of, domains in zip(constraints, counted, counts, strict=True):
                value = labels.get(c.topology_key, "")
                if value not in domains:
                    continue  # no feasible node there (or the hostname key)
                if c.honor_node_affinity:
                    if row not in affinity:
                        from stickypack.core.plugins.kubescheduler import node_matches_required

                        affinity[row] = node_matches_required(pod, labels, node_names.get(row, ""))
                    if not affinity[row]:
                        continue
                if c.honor_node_taints and _untolerated(node_taints.get(row, ()), pod):
                    continue
                domains[value] += sum(map(count_of, pods.get(row, ())))
    raw: list[int | None] = []
    for row in rows:
        if row in ignored:
            raw.append(None)
            continue
        labels = node_labels.get(row, {})
        score = 0.0
        for c, count_of, domains, weight in zip(constraints, counted, counts, weights, strict=True):
            if c.topology_key not in labels:
                continue
            if c.topology_key == HOSTNAME_LABEL:
                count = sum(map(count_of, pods.get(row, ())))
            else:
                count = domains[labels[c.topology_key]]
            score += count * weight + (c.max_skew - 1)
        raw.append(go_round(score))
    valid = [s for s in raw if s is not None]
    if not valid:
        return [0] * len(rows)
    low, high = min(valid), max(valid)
    return [0 if s is None else (100 if high == 0 else 100 * (high + low - s) // high) for s in raw]
