"""Scheduler routing: which pods a mutating admission webhook sends to which scheduler.

A :class:`SchedulerRoute` names a ``schedulerName`` and the pods it is for: a Kubernetes
label selector over the pod's labels (``metav1.LabelSelector``: ``matchLabels`` and
``matchExpressions`` with In, NotIn, Exists, DoesNotExist) and, optionally, the namespaces
they are created in. :func:`route_pod` decides for one pod: the first route that matches
and the JSON Patch (RFC 6902) that sets its scheduler name. It only routes pods left on
the default scheduler, so a pod that names a scheduler keeps it; the API server fills in
``default-scheduler`` before admission, so "none" and "default-scheduler" cannot be told
apart and both are routed. A route may also carry a :class:`RoutePlacement`: node affinity
ANDed into the pod's own and tolerations added to its own, so routed pods land on a node
pool (say z2jh's tainted user nodes) without anyone editing their spec.

Pure: dictionaries in, dictionaries out. The webhook service (:mod:`stickypack.webhook`)
reads AdmissionReviews; :func:`stickypack.render.webhook_configuration` writes the
``MutatingWebhookConfiguration`` whose selectors make the API server call it only for
pods a route may match.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from stickypack.core.labels import (
    DNS_SUBDOMAIN,
    LABEL_KEY,
    LABEL_VALUE,
    NO_EXECUTE,
    NO_SCHEDULE,
    PREFER_NO_SCHEDULE,
    Requirement,
    Toleration,
    is_dns_label,
)

#: The scheduler a pod gets when it names none (kube-apiserver's defaulting).
DEFAULT_SCHEDULER = "default-scheduler"
#: Annotation the webhook sets on a pod it routed: the route's name (why the pod went there).
ROUTE_ANNOTATION = "stickypack.io/scheduler-route"
#: The API server's limit on an object's annotations, keys and values together (bytes):
#: a patch that crossed it would make the pod's creation fail.
MAX_ANNOTATION_BYTES = 256 * 1024
#: Operators of a pod label selector (``Gt`` and ``Lt`` are for node selectors only).
SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
#: Operators of a node selector requirement (``matchExpressions`` of node affinity).
NODE_SELECTOR_OPERATORS = (*SELECTOR_OPERATORS, "Gt", "Lt")
#: A toleration's effects ("" tolerates every effect).
TOLERATION_EFFECTS = ("", NO_SCHEDULE, PREFER_NO_SCHEDULE, NO_EXECUTE)
#: The node affinity fields a route may add to (the only ones kube-scheduler reads).
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


class SelectorError(ValueError):
    """A label selector the API server would refuse; the message says which part."""


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A ``metav1.LabelSelector``: every ``match_labels`` pair and every expression must
    hold. An empty selector matches every pod, as in Kubernetes."""

    match_labels: Mapping[str, str] = field(default_factory=dict)
    expressions: tuple[Requirement, ...] = ()

    @classmethod
    def from_dict(cls, raw: object) -> LabelSelector:
        """From ``{"matchLabels": {...}, "matchExpressions": [...]}``; raises
        :class:`SelectorError` naming the bad part."""
        if raw is None:
            return cls()
        if not isinstance(raw, Mapping):
            raise SelectorError(f"a label selector is a mapping (matchLabels, matchExpressions), got {raw!r}")
        unknown = sorted(set(raw) - {"matchLabels", "matchExpressions"}, key=str)
        if unknown:
            raise SelectorError(f"unknown label selector field(s) {', '.join(map(str, unknown))}")
        labels_raw = raw.get("matchLabels")
        if labels_raw is None:  # null, as the API reads it: no labels
            labels_raw = {}
        if not isinstance(labels_raw, Mapping):
            raise SelectorError(f"matchLabels must be a mapping of label to value, got {labels_raw!r}")
        labels: dict[str, str] = {}
        for key, value in labels_raw.items():
            # YAML ``{component: }`` is a null value: the empty label value
            text = "" if value is None else value
            if not isinstance(key, str) or not isinstance(text, str):
                raise SelectorError(f"matchLabels: {key!r}: {value!r}: label keys and values are strings")
            if not LABEL_KEY.fullmatch(key) or not LABEL_VALUE.fullmatch(text):
                raise SelectorError(f"matchLabels: {key}={text} is not a valid label")
            labels[key] = text
        exprs_raw = raw.get("matchExpressions")
        if exprs_raw is None:
            exprs_raw = []
        if not isinstance(exprs_raw, Sequence) or isinstance(exprs_raw, str):
            raise SelectorError(f"matchExpressions must be a list, got {exprs_raw!r}")
        expressions = tuple(_requirement(i, e) for i, e in enumerate(exprs_raw))
        return cls(labels, expressions)

    def to_dict(self) -> dict[str, Any]:
        """The selector as the API writes it (empty parts left out)."""
        out: dict[str, Any] = {}
        if self.match_labels:
            out["matchLabels"] = dict(self.match_labels)
        if self.expressions:
            out["matchExpressions"] = [
                {"key": r.key, "operator": r.operator, **({"values": list(r.values)} if r.values else {})}
                for r in self.expressions
            ]
        return out

    @property
    def empty(self) -> bool:
        return not self.match_labels and not self.expressions

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(labels.get(k) == v for k, v in self.match_labels.items()) and all(
            r.matches(labels) for r in self.expressions
        )


def _requirement_parts(where: str, raw: object) -> tuple[object, object, object]:
    """The key, operator and values (null read as none) of a selector requirement, a
    mapping of those three only."""
    if not isinstance(raw, Mapping):
        raise SelectorError(f"{where}: expected a mapping with key, operator and values, got {raw!r}")
    unknown = sorted(set(raw) - {"key", "operator", "values"}, key=str)
    if unknown:
        raise SelectorError(f"{where}: unknown field(s) {', '.join(map(str, unknown))}")
    values = raw.get("values")
    return raw.get("key"), raw.get("operator"), [] if values is None else values


def _requirement(index: int, raw: object) -> Requirement:
    where = f"matchExpressions[{index}]"
    key, operator, values = _requirement_parts(where, raw)
    if not isinstance(key, str) or not LABEL_KEY.fullmatch(key):
        raise SelectorError(f"{where}: key {key!r} is not a valid label key")
    if operator not in SELECTOR_OPERATORS:
        raise SelectorError(f"{where}: operator {operator!r} is not one of {', '.join(SELECTOR_OPERATORS)}")
    if not isinstance(values, Sequence) or isinstance(values, str):
        raise SelectorError(f"{where}: values must be a list, got {values!r}")
    if not all(isinstance(v, str) and LABEL_VALUE.fullmatch(v) for v in values):
        raise SelectorError(f"{where}: values {list(values)!r} are not all valid label values")
    if operator in ("In", "NotIn") and not values:
        raise SelectorError(f"{where}: {operator} needs at least one value")
    if operator in ("Exists", "DoesNotExist") and values:
        raise SelectorError(f"{where}: {operator} takes no values")
    return Requirement(key, str(operator), tuple(str(v) for v in values))


@dataclass(frozen=True, slots=True)
class RoutePlacement:
    """Node affinity and tolerations a route adds to the pods it routes, as the API writes
    them (``NodeSelectorTerm``, ``PreferredSchedulingTerm`` and ``Toleration`` dicts).

    - ``required_terms`` (ORed, like ``nodeSelectorTerms``) are ANDed into the pod's own
      required node affinity: a pod that requires ``zone=a`` and a route that requires
      ``pool=user`` give a pod that requires both. With several terms on each side the
      result is every pairing (AND distributes over OR).
    - ``preferred`` terms are appended to the pod's preferred node affinity.
    - ``tolerations`` are appended to the pod's, except those it already has.

    Build with :meth:`from_dict`, which validates as the API server would (a placement
    the API server refused would fail the pod's creation); an empty placement changes
    nothing."""

    required_terms: tuple[dict[str, Any], ...] = ()
    preferred: tuple[dict[str, Any], ...] = ()
    tolerations: tuple[dict[str, Any], ...] = ()

    @classmethod
    def from_dict(cls, node_affinity: object = None, tolerations: object = None) -> RoutePlacement:
        """From a ``nodeAffinity`` mapping (``requiredDuringSchedulingIgnoredDuringExecution``,
        ``preferredDuringSchedulingIgnoredDuringExecution``) and a list of tolerations;
        raises :class:`SelectorError` naming the bad part."""
        required: tuple[dict[str, Any], ...] = ()
        preferred: tuple[dict[str, Any], ...] = ()
        if node_affinity is not None:
            if not isinstance(node_affinity, Mapping):
                raise SelectorError(f"node_affinity is a mapping (a nodeAffinity), got {node_affinity!r}")
            unknown = sorted(set(node_affinity) - {REQUIRED, PREFERRED}, key=str)
            if unknown:
                raise SelectorError(
                    f"node_affinity: unknown field(s) {', '.join(map(str, unknown))} "
                    f"(it takes {REQUIRED} and {PREFERRED})"
                )
            raw_required = node_affinity.get(REQUIRED)
            if raw_required is not None:
                if not isinstance(raw_required, Mapping) or set(raw_required) != {"nodeSelectorTerms"}:
                    raise SelectorError(f"node_affinity.{REQUIRED}: a mapping with nodeSelectorTerms only")
                terms = _list(
                    raw_required["nodeSelectorTerms"], f"node_affinity.{REQUIRED}.nodeSelectorTerms"
                )
                if not terms:
                    raise SelectorError(f"node_affinity.{REQUIRED}.nodeSelectorTerms: give at least one term")
                required = tuple(
                    _node_selector_term(f"node_affinity.{REQUIRED}.nodeSelectorTerms[{i}]", t)
                    for i, t in enumerate(terms)
                )
            raw_preferred = node_affinity.get(PREFERRED)
            if raw_preferred is not None:
                preferred = tuple(
                    _preferred_term(f"node_affinity.{PREFERRED}[{i}]", p)
                    for i, p in enumerate(_list(raw_preferred, f"node_affinity.{PREFERRED}"))
                )
        tols: tuple[dict[str, Any], ...] = ()
        if tolerations is not None:
            tols = tuple(
                _toleration(f"tolerations[{i}]", t) for i, t in enumerate(_list(tolerations, "tolerations"))
            )
        return cls(required, preferred, tols)

    @property
    def empty(self) -> bool:
        return not self.required_terms and not self.preferred and not self.tolerations

    def to_dict(self) -> dict[str, Any]:
        """The placement as a route's configuration writes it (empty parts left out)."""
        out: dict[str, Any] = {}
        affinity: dict[str, Any] = {}
        if self.required_terms:
            affinity[REQUIRED] = {"nodeSelectorTerms": [dict(t) for t in self.required_terms]}
        if self.preferred:
            affinity[PREFERRED] = [dict(p) for p in self.preferred]
        if affinity:
            out["node_affinity"] = affinity
        if self.tolerations:
            out["tolerations"] = [dict(t) for t in self.tolerations]
        return out

    def patch(self, spec: Mapping[str, Any]) -> list[dict[str, Any]]:
        """JSON Patch operations that add this placement to a pod's ``spec``: the whole
        ``/spec/affinity`` (the pod's pod affinity and anti-affinity kept) when the placement
        has node affinity, and the whole ``/spec/tolerations`` when the pod lacks one of its
        tolerations. Raises ``ValueError`` when the
        pod's own affinity or tolerations are not shaped as the API writes them."""
        ops: list[dict[str, Any]] = []
        if self.required_terms or self.preferred:
            affinity = spec.get("affinity")
            if affinity is None:
                affinity = {}
            if not isinstance(affinity, Mapping):
                raise ValueError("spec.affinity must be a mapping")
            node_affinity = affinity.get("nodeAffinity")
            if node_affinity is None:
                node_affinity = {}
            if not isinstance(node_affinity, Mapping):
                raise ValueError("spec.affinity.nodeAffinity must be a mapping")
            merged = dict(node_affinity)
            if self.required_terms:
                merged[REQUIRED] = {"nodeSelectorTerms": self._and_terms(node_affinity.get(REQUIRED))}
            if self.preferred:
                own = node_affinity.get(PREFERRED)
                if own is None:
                    own = []
                if not isinstance(own, list):
                    raise ValueError(f"spec.affinity.nodeAffinity.{PREFERRED} must be a list")
                merged[PREFERRED] = [*own, *(dict(p) for p in self.preferred)]
            ops.append({"op": "add", "path": "/spec/affinity", "value": {**affinity, "nodeAffinity": merged}})
        if self.tolerations:
            own_tols = spec.get("tolerations")
            if own_tols is None:
                own_tols = []
            if not isinstance(own_tols, list) or not all(isinstance(t, Mapping) for t in own_tols):
                raise ValueError("spec.tolerations must be a list of mappings")
            have = [_toleration_key(t) for t in own_tols]
            extra = [dict(t) for t in self.tolerations if _toleration_key(t) not in have]
            if extra:
                ops.append({"op": "add", "path": "/spec/tolerations", "value": [*own_tols, *extra]})
        return ops

    def _and_terms(self, own: object) -> list[dict[str, Any]]:
        """The pod's required terms (``own``: its ``requiredDuringScheduling...`` or None)
        ANDed with the route's: each of the pod's terms paired with each of the route's.
        A pod term with no requirements matches no node in Kubernetes, and still none
        after the AND, so it is kept as it is."""
        if own is None:
            return [dict(t) for t in self.required_terms]
        if not isinstance(own, Mapping):
            raise ValueError(f"spec.affinity.nodeAffinity.{REQUIRED} must be a mapping")
        terms = own.get("nodeSelectorTerms")
        if terms is None or terms == []:
            return [dict(t) for t in self.required_terms]
        if not isinstance(terms, list) or not all(isinstance(t, Mapping) for t in terms):
            raise ValueError(
                f"spec.affinity.nodeAffinity.{REQUIRED}.nodeSelectorTerms must be a list of mappings"
            )
        out: list[dict[str, Any]] = []
        for term in terms:
            expressions = term.get("matchExpressions") or []
            fields_ = term.get("matchFields") or []
            if not isinstance(expressions, list) or not isinstance(fields_, list):
                raise ValueError("a node selector term's matchExpressions and matchFields must be lists")
            if not expressions and not fields_:
                out.append(dict(term))
                continue
            for ours in self.required_terms:
                joined = {**term}
                both_expressions = [*expressions, *ours.get("matchExpressions", [])]
                both_fields = [*fields_, *ours.get("matchFields", [])]
                if both_expressions:
                    joined["matchExpressions"] = both_expressions
                if both_fields:
                    joined["matchFields"] = both_fields
                out.append(joined)
        return out


def _list(raw: object, where: str) -> list[Any]:
    if not isinstance(raw, list | tuple):
        raise SelectorError(f"{where}: expected a list, got {raw!r}")
    return list(raw)


def _node_selector_term(where: str, raw: object) -> dict[str, Any]:
    """A ``NodeSelectorTerm`` the API server takes, normalised; an empty one is refused
    (Kubernetes would match no node with it)."""
    if not isinstance(raw, Mapping):
        raise SelectorError(f"{where}: expected a mapping with matchExpressions or matchFields, got {raw!r}")
    unknown = sorted(set(raw) - {"matchExpressions", "matchFields"}, key=str)
    if unknown:
        raise SelectorError(f"{where}: unknown field(s) {', '.join(map(str, unknown))}")
    out: dict[str, Any] = {}
    for part in ("matchExpressions", "matchFields"):
        items = raw.get(part)
        if items is None:
            continue
        reqs = [
            _node_requirement(f"{where}.{part}[{i}]", r, part)
            for i, r in enumerate(_list(items, f"{where}.{part}"))
        ]
        if reqs:
            out[part] = reqs
    if not out:
        raise SelectorError(f"{where}: an empty term matches no node; give matchExpressions or matchFields")
    return out


def _node_requirement(where: str, raw: object, part: str) -> dict[str, Any]:
    key, operator, values = _requirement_parts(where, raw)
    if not isinstance(key, str) or not isinstance(operator, str):
        raise SelectorError(f"{where}: key and operator must be strings")
    if not isinstance(values, list | tuple) or not all(isinstance(v, str) for v in values):
        raise SelectorError(f"{where}: values must be a list of strings, got {values!r}")
    req = Requirement(key, operator, tuple(values))
    if part == "matchFields":
        if not req.valid_field():
            raise SelectorError(
                f"{where}: a field requirement is key metadata.name, operator In or NotIn, one value"
            )
        if len(values[0]) > 253 or not DNS_SUBDOMAIN.fullmatch(values[0]):
            # the API server validates the value as a node name (ValidateNodeName)
            raise SelectorError(f"{where}: {values[0]!r} is not a node name (a DNS subdomain)")
    elif operator not in NODE_SELECTOR_OPERATORS:
        raise SelectorError(
            f"{where}: operator {operator!r} is not one of {', '.join(NODE_SELECTOR_OPERATORS)}"
        )
    elif not req.valid():
        raise SelectorError(
            f"{where}: {key} {operator} {list(values)!r} is not a valid requirement (a label key; "
            "label values; In and NotIn take at least one value, Exists and DoesNotExist none, "
            "Gt and Lt one integer)"
        )
    return {"key": key, "operator": operator, **({"values": list(values)} if values else {})}


def _preferred_term(where: str, raw: object) -> dict[str, Any]:
    if not isinstance(raw, Mapping) or set(raw) != {"weight", "preference"}:
        raise SelectorError(f"{where}: expected a mapping with weight and preference only, got {raw!r}")
    weight = raw["weight"]
    if isinstance(weight, bool) or not isinstance(weight, int) or not 1 <= weight <= 100:
        raise SelectorError(f"{where}.weight: an integer from 1 to 100, got {weight!r}")
    return {"weight": weight, "preference": _node_selector_term(f"{where}.preference", raw["preference"])}


def _toleration(where: str, raw: object) -> dict[str, Any]:
    """A ``Toleration`` the API server takes (``ValidateTolerations``), normalised."""
    if not isinstance(raw, Mapping):
        raise SelectorError(f"{where}: expected a mapping (key, operator, value, effect), got {raw!r}")
    unknown = sorted(set(raw) - {"key", "operator", "value", "effect", "tolerationSeconds"}, key=str)
    if unknown:
        raise SelectorError(f"{where}: unknown field(s) {', '.join(map(str, unknown))}")
    # only null means "left out": YAML's ``value: 0`` or ``false`` is refused, not read as ""
    key, value, effect = (_absent_is(raw.get(name), "") for name in ("key", "value", "effect"))
    operator = _absent_is(raw.get("operator"), "") or "Equal"
    seconds = raw.get("tolerationSeconds")
    if not all(isinstance(x, str) for x in (key, value, effect, operator)):
        raise SelectorError(f"{where}: key, operator, value and effect are strings")
    if key and not LABEL_KEY.fullmatch(key):
        raise SelectorError(f"{where}: key {key!r} is not a valid taint key")
    if operator not in ("Equal", "Exists"):
        raise SelectorError(f"{where}: operator {operator!r} is not Equal or Exists")
    if not key and operator != "Exists":
        raise SelectorError(f"{where}: a toleration without a key must have operator Exists")
    if operator == "Exists" and value:
        raise SelectorError(f"{where}: operator Exists takes no value")
    if not LABEL_VALUE.fullmatch(value):
        raise SelectorError(f"{where}: value {value!r} is not a valid taint value")
    if effect not in TOLERATION_EFFECTS:
        raise SelectorError(
            f"{where}: effect {effect!r} is not one of NoSchedule, PreferNoSchedule, NoExecute"
        )
    out: dict[str, Any] = {"operator": operator}
    if key:
        out["key"] = key
    if value:
        out["value"] = value
    if effect:
        out["effect"] = effect
    if seconds is not None:
        if isinstance(seconds, bool) or not isinstance(seconds, int) or not -(2**63) <= seconds < 2**63:
            raise SelectorError(f"{where}: tolerationSeconds must be a 64-bit integer, got {seconds!r}")
        if effect != NO_EXECUTE:
            raise SelectorError(f"{where}: tolerationSeconds needs effect NoExecute")
        out["tolerationSeconds"] = seconds
    return out


def _absent_is(value: Any, default: str) -> Any:
    return default if value is None else value


def _toleration_key(raw: Mapping[str, Any]) -> tuple[Toleration, object]:
    """What makes two tolerations the same: the :class:`Toleration` (the API's defaults
    filled in) and its ``tolerationSeconds``."""
    return Toleration.from_dict(raw), raw.get("tolerationSeconds")


@dataclass(frozen=True, slots=True)
class SchedulerRoute:
    """Pods matching ``pods`` (created in one of ``namespaces``, or anywhere when it is
    empty) go to the scheduler ``scheduler_name``, with ``placement``'s node affinity and
    tolerations added to their own. ``name`` identifies the route in the pod's annotation,
    the metrics and the rendered webhook entry. Raises :class:`SelectorError` for a name or
    namespace that is not a DNS label, a scheduler name that is not a DNS subdomain, or an
    empty pod selector."""

    name: str
    scheduler_name: str
    pods: LabelSelector
    namespaces: tuple[str, ...] = ()
    placement: RoutePlacement = field(default_factory=RoutePlacement)

    def __post_init__(self) -> None:
        if not is_dns_label(self.name):
            raise SelectorError(f"route name {self.name!r} is not a DNS label (lower case, digits, '-')")
        if len(self.scheduler_name) > 253 or not DNS_SUBDOMAIN.fullmatch(self.scheduler_name):
            # the API server validates the patched pod: its creation would fail
            raise SelectorError(
                f"route {self.name}: {self.scheduler_name!r} is not a valid scheduler name (a DNS subdomain)"
            )
        if self.pods.empty:
            raise SelectorError(f"route {self.name}: an empty pod selector would route every pod")
        bad = [n for n in self.namespaces if not is_dns_label(n)]
        if bad:
            raise SelectorError(f"route {self.name}: {', '.join(map(repr, bad))} is not a namespace name")

    def matches(self, labels: Mapping[str, str], namespace: str) -> bool:
        return (not self.namespaces or namespace in self.namespaces) and self.pods.matches(labels)


@dataclass(frozen=True, slots=True)
class RouteDecision:
    """What to do with one pod: ``route`` is the matching route's name (None: no route
    matched, or the pod names its own scheduler); ``patch`` the JSON Patch operations to
    return (empty: leave the pod as it is)."""

    route: str | None
    patch: list[dict[str, Any]]
    reason: str


def _pointer(token: str) -> str:
    """One JSON Pointer reference token (RFC 6901: ``~`` -> ``~0``, ``/`` -> ``~1``)."""
    return token.replace("~", "~0").replace("/", "~1")


#: The JSON Pointer of :data:`ROUTE_ANNOTATION` in a pod, for a JSON Patch.
ROUTE_ANNOTATION_PATH = f"/metadata/annotations/{_pointer(ROUTE_ANNOTATION)}"


def _string_map(value: object) -> bool:
    """Absent (None) or a mapping of strings to strings, as ``labels`` and ``annotations``."""
    if value is None:
        return True
    if not isinstance(value, Mapping):
        return False
    return all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())


def route_pod(routes: Sequence[SchedulerRoute], pod: Mapping[str, Any], namespace: str) -> RouteDecision:
    """The first of ``routes`` that matches ``pod`` (a Pod as a dict, as an AdmissionReview
    carries it) created in ``namespace``, and the patch that sends the pod there. The patch
    applies to ``pod`` as given (RFC 6902): its annotations absent, null, empty or not.

    Raises ``ValueError`` when ``pod`` is not shaped like a Pod: ``metadata`` and ``spec``
    mappings; ``metadata.labels`` and ``metadata.annotations`` absent (or null) or mappings
    of strings to strings; ``spec.schedulerName`` absent (or null) or a string; and, for a
    route with a placement, ``spec.affinity`` and ``spec.tolerations`` as the API writes them.
    A pod the route does not re-route (it names a scheduler) gets no placement either."""
    metadata = pod.get("metadata")
    spec = pod.get("spec")
    if not isinstance(metadata, Mapping) or not isinstance(spec, Mapping):
        raise ValueError("the object is not a Pod: metadata and spec must be mappings")
    labels = metadata.get("labels")
    if not _string_map(labels):
        raise ValueError("metadata.labels must map strings to strings")
    annotations = metadata.get("annotations")
    if not _string_map(annotations):
        raise ValueError("metadata.annotations must map strings to strings")
    current = spec.get("schedulerName")
    if current is not None and not isinstance(current, str):
        raise ValueError("spec.schedulerName must be a string")
    current = current or DEFAULT_SCHEDULER
    route = next((r for r in routes if r.matches(labels or {}, namespace)), None)
    if route is None:
        return RouteDecision(None, [], "no route matches")
    if current == route.scheduler_name:
        return RouteDecision(route.name, [], "already names the route's scheduler")
    if current != DEFAULT_SCHEDULER:
        return RouteDecision(None, [], f"names its own scheduler {current!r}")
    # "add" of an object member replaces it when present (RFC 6902 4.1)
    patch: list[dict[str, Any]] = [
        {"op": "add", "path": "/spec/schedulerName", "value": route.scheduler_name},
        *route.placement.patch(spec),
    ]
    if not annotations:  # absent, null or empty: "add" creates the member or replaces its value
        patch.append({"op": "add", "path": "/metadata/annotations", "value": {ROUTE_ANNOTATION: route.name}})
    elif _annotation_bytes({**annotations, ROUTE_ANNOTATION: route.name}) <= MAX_ANNOTATION_BYTES:
        patch.append({"op": "add", "path": ROUTE_ANNOTATION_PATH, "value": route.name})
    else:  # the API server would refuse the pod for its annotations' size: route it unannotated
        return RouteDecision(route.name, patch, f"routed to {route.scheduler_name} (annotations full)")
    return RouteDecision(route.name, patch, f"routed to {route.scheduler_name}")


def _annotation_bytes(annotations: Mapping[str, str]) -> int:
    """What the API server counts against :data:`MAX_ANNOTATION_BYTES`: every key's and
    value's length in bytes."""
    return sum(len(k.encode()) + len(v.encode()) for k, v in annotations.items())
