"""Pod topology spread constraints: what kube-scheduler's ``PodTopologySpread`` filter
checks, for the scale-down simulation.

- :class:`SpreadConstraint`: one ``whenUnsatisfiable: DoNotSchedule`` entry of a pod's
  ``spec.topologySpreadConstraints``, read by :func:`spread_constraints_from_list` (the
  ``ScheduleAnyway`` ones only score, so they are checked and dropped).
- :class:`SpreadCounts`: for one pod's constraints, the pods each constraint selects in each
  eligible topology domain (kube-scheduler's PreFilter state), kept up to date as pods
  move (:class:`~stickypack.core.podaffinity.PodsOnNodes` holds one per distinct set of
  constraints), and :meth:`SpreadCounts.judge`, the Filter's skew check.

kube-scheduler's cluster-wide default constraints (its ``PodTopologySpreadArgs`` system
defaults: zone ``maxSkew`` 5, hostname 3) are ``ScheduleAnyway``: they filter nothing, and
are not modelled.

Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from stickypack.core.labels import LABEL_KEY, NO_EXECUTE, NO_SCHEDULE, Requirement, Taint, tolerated
from stickypack.core.routing import LabelSelector, SelectorError

if TYPE_CHECKING:
    from stickypack.core.pod import Pod

DO_NOT_SCHEDULE = "DoNotSchedule"
SCHEDULE_ANYWAY = "ScheduleAnyway"
#: ``nodeAffinityPolicy`` / ``nodeTaintsPolicy`` values.
HONOR = "Honor"
IGNORE = "Ignore"


@dataclass(frozen=True, slots=True)
class SpreadConstraint:
    """A ``DoNotSchedule`` topology spread constraint, as kube-scheduler holds it.

    A pod may go to a node only if, in the node's domain (the nodes sharing its value of
    ``topology_key``), the pods ``selector`` selects (in the pod's namespace, terminating
    ones left out), plus the pod itself if selected, exceed the fewest in any eligible domain
    by at most ``max_skew``; that fewest is 0 while fewer than ``min_domains`` domains are
    eligible. ``selector`` None (no ``labelSelector``) selects no pod; ``matchLabelKeys`` are
    already merged into it (``key In (value)`` with the pod's own value; a key the pod lacks
    adds nothing), as the API server does when it creates the pod.

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
    if not isinstance(topology_key, str) or not LABEL_KEY.fullmatch(topology_key):
        raise ValueError(f"{where}.topologyKey: {topology_key!r} is not a label key")
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
    raw: object, pod_labels: Mapping[str, str], where: str
) -> tuple[SpreadConstraint, ...]:
    """The ``DoNotSchedule`` constraints of a ``topologySpreadConstraints`` list (None: none);
    every entry is read, so a malformed ``ScheduleAnyway`` one fails too."""
    if raw is None:
        return ()
    if not isinstance(raw, list | tuple):
        raise ValueError(f"{where} must be a list of topology spread constraints, got {raw!r}")
    read = [spread_constraint_from_dict(c, pod_labels, f"{where}[{i}]") for i, c in enumerate(raw)]
    return tuple(constraint for when, constraint in read if when == DO_NOT_SCHEDULE)


def _untolerated(taints: Iterable[Taint], pod: Pod) -> bool:
    """A NoSchedule or NoExecute taint ``pod`` does not tolerate (TaintToleration's rule)."""
    return any(t.effect in (NO_SCHEDULE, NO_EXECUTE) and not tolerated(t, pod.tolerations) for t in taints)


def _counter(constraint: SpreadConstraint, namespace: str) -> Callable[[Pod], bool]:
    """kube-scheduler's ``countPodsMatchSelector`` for one constraint: whether a pod counts
    (of ``namespace``, not terminating, selected). A plain loop: it runs for every pod of
    the cluster when the counts are built, and for every pod moved."""
    selector = constraint.selector
    if selector is None:
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

    @classmethod
    def build(
        cls,
        pod: Pod,
        node_labels: Mapping[int, Mapping[str, str]],
        node_names: Mapping[int, str],
        node_taints: Mapping[int, Sequence[Taint]],
        pods: Mapping[int, Iterable[Pod]],
    ) -> SpreadCounts:
        """The counts for ``pod``'s constraints over the nodes of ``node_labels`` (row to
        labels; a row it lacks is no node) holding ``pods``; ``node_names`` and
        ``node_taints`` (by row; missing: none) are read for the inclusion policies."""
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
            selected = sum(map(self.counted[i], self.pods.get(row, ())))
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

    def count(self, row: int, pod: Pod, sign: int) -> None:
        """``pod`` arrives on (``sign`` 1) or leaves (-1) the node of ``row``."""
        for eligible, counted, counts in zip(self.eligible, self.counted, self.counts, strict=True):
            value = eligible.get(row)
            if value is not None and counted(pod):
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
