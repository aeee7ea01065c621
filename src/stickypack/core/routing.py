"""Scheduler routing: which pods a mutating admission webhook sends to which scheduler.

A :class:`SchedulerRoute` names a ``schedulerName`` and the pods it is for: a Kubernetes
label selector over the pod's labels (``metav1.LabelSelector``: ``matchLabels`` and
``matchExpressions`` with In, NotIn, Exists, DoesNotExist) and, optionally, the namespaces
they are created in. :func:`route_pod` decides for one pod: the first route that matches
and the JSON Patch (RFC 6902) that sets its scheduler name. It only routes pods left on
the default scheduler, so a pod that names a scheduler keeps it; the API server fills in
``default-scheduler`` before admission, so "none" and "default-scheduler" cannot be told
apart and both are routed.

Pure: dictionaries in, dictionaries out. The webhook service (:mod:`stickypack.webhook`)
reads AdmissionReviews; :func:`stickypack.render.webhook_configuration` writes the
``MutatingWebhookConfiguration`` whose selectors make the API server call it only for
pods a route may match.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from stickypack.core.labels import DNS_SUBDOMAIN, LABEL_KEY, LABEL_VALUE, Requirement, is_dns_label

#: The scheduler a pod gets when it names none (kube-apiserver's defaulting).
DEFAULT_SCHEDULER = "default-scheduler"
#: Annotation the webhook sets on a pod it routed: the route's name (why the pod went there).
ROUTE_ANNOTATION = "stickypack.io/scheduler-route"
#: The API server's limit on an object's annotations, keys and values together (bytes):
#: a patch that crossed it would make the pod's creation fail.
MAX_ANNOTATION_BYTES = 256 * 1024
#: Operators of a pod label selector (``Gt`` and ``Lt`` are for node selectors only).
SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


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
        unknown = sorted(set(raw) - {"matchLabels", "matchExpressions"})
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


def _requirement(index: int, raw: object) -> Requirement:
    where = f"matchExpressions[{index}]"
    if not isinstance(raw, Mapping):
        raise SelectorError(f"{where}: expected a mapping with key, operator and values, got {raw!r}")
    unknown = sorted(set(raw) - {"key", "operator", "values"})
    if unknown:
        raise SelectorError(f"{where}: unknown field(s) {', '.join(map(str, unknown))}")
    key, operator, values = raw.get("key"), raw.get("operator"), raw.get("values")
    if values is None:
        values = []
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
class SchedulerRoute:
    """Pods matching ``pods`` (created in one of ``namespaces``, or anywhere when it is
    empty) go to the scheduler ``scheduler_name``. ``name`` identifies the route in the
    pod's annotation, the metrics and the rendered webhook entry. Raises
    :class:`SelectorError` for a name or namespace that is not a DNS label, a scheduler
    name that is not a DNS subdomain, or an empty pod selector."""

    name: str
    scheduler_name: str
    pods: LabelSelector
    namespaces: tuple[str, ...] = ()

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
    of strings to strings; ``spec.schedulerName`` absent (or null) or a string."""
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
        {"op": "add", "path": "/spec/schedulerName", "value": route.scheduler_name}
    ]
    if not annotations:  # absent, null or empty: "add" creates the member or replaces its value
        patch.append({"op": "add", "path": "/metadata/annotations", "value": {ROUTE_ANNOTATION: route.name}})
    elif _annotation_bytes({**annotations, ROUTE_ANNOTATION: route.name}) <= MAX_ANNOTATION_BYTES:
        path = f"/metadata/annotations/{_pointer(ROUTE_ANNOTATION)}"
        patch.append({"op": "add", "path": path, "value": route.name})
    else:  # the API server would refuse the pod for its annotations' size: route it unannotated
        return RouteDecision(route.name, patch, f"routed to {route.scheduler_name} (annotations full)")
    return RouteDecision(route.name, patch, f"routed to {route.scheduler_name}")


def _annotation_bytes(annotations: Mapping[str, str]) -> int:
    """What the API server counts against :data:`MAX_ANNOTATION_BYTES`: every key's and
    value's length in bytes."""
    return sum(len(k.encode()) + len(v.encode()) for k, v in annotations.items())
