"""Taints, tolerations and node-selector terms, with Kubernetes' matching rules; the syntax
of object names and label keys and values."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import cast

NO_SCHEDULE = "NoSchedule"
PREFER_NO_SCHEDULE = "PreferNoSchedule"
NO_EXECUTE = "NoExecute"

#: Taint the cluster-autoscaler puts on a node it is deleting (effect NoSchedule).
TO_BE_DELETED_TAINT = "ToBeDeletedByClusterAutoscaler"
#: Soft taint the cluster-autoscaler puts on nodes it considers unneeded (PreferNoSchedule).
DELETION_CANDIDATE_TAINT = "DeletionCandidateOfClusterAutoscaler"
#: Taint kube-scheduler's NodeUnschedulable plugin checks tolerations against.
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
HOSTNAME_LABEL = "kubernetes.io/hostname"

#: A DNS label (RFC 1123; a namespace's name; at most 63 characters, checked apart).
DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")

#: A DNS subdomain (RFC 1123; a node's name; at most 253 characters, checked apart).
DNS_SUBDOMAIN = re.compile(rf"{DNS_LABEL.pattern}(\.{DNS_LABEL.pattern})*")
#: A label key: an optional DNS-subdomain prefix of at most 253 characters and ``/``, then a
#: name of 1-63 characters (the API server refuses a longer prefix with 422).
LABEL_KEY = re.compile(
    rf"((?=[^/]{{1,253}}/){DNS_SUBDOMAIN.pattern}/)?[A-Za-z0-9]([-A-Za-z0-9_.]{{0,61}}[A-Za-z0-9])?"
)
#: A label value: empty, or like a label key's name.
LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?")


def is_label(key: str, value: str) -> bool:
    """``key=value`` is a label the API server takes."""
    return bool(LABEL_KEY.fullmatch(key) and LABEL_VALUE.fullmatch(value))


def is_dns_label(text: str) -> bool:
    """A valid DNS label (RFC 1123): what a namespace's name must be."""
    return len(text) <= 63 and DNS_LABEL.fullmatch(text) is not None


@dataclass(frozen=True, slots=True)
class Taint:
    """A node taint: ``key=value:effect``."""

    key: str
    value: str = ""
    effect: str = NO_SCHEDULE

    @classmethod
    def from_dict(cls, raw: Mapping[str, object]) -> Taint:
        return cls(str(raw["key"]), str(raw.get("value") or ""), str(raw.get("effect") or ""))

    def to_dict(self) -> dict[str, str]:
        out = {"key": self.key, "effect": self.effect}
        if self.value:
            out["value"] = self.value
        return out


@dataclass(frozen=True, slots=True)
class Toleration:
    """A pod toleration; ``operator`` is ``Equal`` or ``Exists``, empty ``effect`` means all."""

    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""

    @classmethod
    def from_dict(cls, raw: Mapping[str, object]) -> Toleration:
        return cls(
            str(raw.get("key") or ""),
            str(raw.get("operator") or "Equal"),
            str(raw.get("value") or ""),
            str(raw.get("effect") or ""),
        )

    def tolerates(self, taint: Taint) -> bool:
        """Kubernetes' ``Toleration.ToleratesTaint``."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        if self.operator in ("Equal", ""):
            return self.value == taint.value
        return False


def tolerated(taint: Taint, tolerations: Sequence[Toleration]) -> bool:
    """Whether any toleration tolerates ``taint``."""
    return any(t.tolerates(taint) for t in tolerations)


@dataclass(frozen=True, slots=True)
class Requirement:
    """One ``matchExpressions`` (or ``matchFields``) entry of a node selector term."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    @classmethod
    def from_dict(cls, raw: Mapping[str, object]) -> Requirement:
        values = raw.get("values") or ()
        if not isinstance(values, list | tuple):
            raise ValueError(f"node selector requirement values must be a list: {raw!r}")
        return cls(str(raw["key"]), str(raw["operator"]), tuple(str(v) for v in values))

    def valid(self) -> bool:
        """Whether kube's ``labels.NewRequirement`` accepts it: a label key; label values;
        at least one value for In and NotIn, none for Exists and DoesNotExist, one integer
        for Gt and Lt. A term holding an invalid requirement matches no node."""
        if not LABEL_KEY.fullmatch(self.key) or not all(LABEL_VALUE.fullmatch(v) for v in self.values):
            return False
        n = len(self.values)
        if self.operator in ("In", "NotIn"):
            return n >= 1
        if self.operator in ("Exists", "DoesNotExist"):
            return n == 0
        if self.operator in ("Gt", "Lt"):
            return n == 1 and _int64(self.values[0]) is not None
        return False

    def valid_field(self) -> bool:
        """A ``matchFields`` entry kube-scheduler can use: ``metadata.name``, In or NotIn,
        exactly one value."""
        return self.key == "metadata.name" and self.operator in ("In", "NotIn") and len(self.values) == 1

    def matches(self, labels: Mapping[str, str]) -> bool:
        op = self.operator
        present = self.key in labels
        if op == "In":
            return present and labels[self.key] in self.values
        if op == "NotIn":
            return not present or labels[self.key] not in self.values
        if op == "Exists":
            return present
        if op == "DoesNotExist":
            return not present
        if op in ("Gt", "Lt"):
            if not present or len(self.values) != 1:
                return False
            have, want = _int64(labels[self.key]), _int64(self.values[0])
            if have is None or want is None:
                return False
            return have > want if op == "Gt" else have < want
        return False


_INT = re.compile(r"[+-]?[0-9]+")


def _int64(text: str) -> int | None:
    """Go's ``strconv.ParseInt(text, 10, 64)``, None where it fails (Python's ``int`` would
    also take ``1_000``, spaces, other scripts' digits and any size)."""
    if not _INT.fullmatch(text):
        return None
    value = int(text)
    return value if -(2**63) <= value < 2**63 else None


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    """Requirements ANDed together. An empty term matches no node, as in Kubernetes."""

    expressions: tuple[Requirement, ...] = ()
    fields: tuple[Requirement, ...] = ()

    #: False when a requirement is one kube-scheduler cannot parse: the term matches nothing.
    usable: bool = True

    @classmethod
    def from_dict(cls, raw: Mapping[str, object]) -> NodeSelectorTerm:
        raw_exprs = cast(Sequence[Mapping[str, object]], raw.get("matchExpressions") or [])
        raw_fields = cast(Sequence[Mapping[str, object]], raw.get("matchFields") or [])
        exprs = tuple(Requirement.from_dict(e) for e in raw_exprs)
        fields_ = tuple(Requirement.from_dict(f) for f in raw_fields)
        usable = all(r.valid() for r in exprs) and all(r.valid_field() for r in fields_)
        return cls(exprs, fields_, usable)

    def matches(self, labels: Mapping[str, str], node_name: str) -> bool:
        if not self.usable or (not self.expressions and not self.fields):
            return False
        node_fields = {"metadata.name": node_name}
        return all(r.matches(labels) for r in self.expressions) and all(
            r.matches(node_fields) for r in self.fields
        )


@dataclass(frozen=True, slots=True)
class PreferredTerm:
    """A ``preferredDuringSchedulingIgnoredDuringExecution`` entry: weight 1..100 and a term."""

    weight: int
    term: NodeSelectorTerm = field(default_factory=NodeSelectorTerm)


class _KeyTerms:
    """What a :class:`PreferredWeights` holds for one label key."""

    __slots__ = ("absent_penalty", "candidates", "exists", "in_values", "key_candidates", "not_in_penalty")

    def __init__(self) -> None:
        #: single-``In`` terms: the node's value -> the weight it adds
        self.in_values: dict[str, int] = {}
        #: single-``NotIn`` terms: the node's value -> the weight it takes off their total
        self.not_in_penalty: dict[str, int] = {}
        #: single-``Exists`` terms: the weight the key adds
        self.exists = 0
        #: single-``DoesNotExist`` terms: the weight the key takes off their total
        self.absent_penalty = 0
        #: terms of several requirements whose ``In`` on this key names the node's value
        self.candidates: dict[str, list[tuple[NodeSelectorTerm, int]]] = {}
        #: terms of several requirements (or one ``Gt``/``Lt``) that need the key present
        self.key_candidates: list[tuple[NodeSelectorTerm, int]] = []


class PreferredWeights:
    """The sum of the weights of ``terms`` that match a node (what kube-scheduler's
    NodeAffinity scores), found by looking the node's labels and name up instead of testing
    every term on every node.

    kube-scheduler tests each term on each node: nodes x terms, which for a pod of tens of
    thousands of terms took the extender seconds a request. Here identical terms are merged
    (their weights summed) and terms that match no node (empty, or not parsable by
    kube-scheduler) dropped; a term of one requirement becomes a weight in a table keyed by
    the label's value, key or node name (``NotIn`` and ``DoesNotExist`` as a total less what
    a node's value or key takes off: at most one value a key, so a term is taken off once);
    a term of several requirements is tested only on nodes its first ``In`` (of a label, else
    of the name) names, else on nodes that have the key of one of its ``Exists``, ``Gt`` or
    ``Lt``. Only terms made of ``NotIn`` and ``DoesNotExist`` alone, of several
    requirements, are tested on every node. The sums are the same as testing every term
    (``tests/test_scorers.py`` checks both on random terms and nodes)."""

    __slots__ = ("_base", "_by_key", "_everywhere", "_name_candidates", "_name_in", "_name_not_in")

    def __init__(self, terms: Sequence[PreferredTerm]) -> None:
        merged: dict[NodeSelectorTerm, int] = {}
        for preferred in terms:
            term = preferred.term
            if term.usable and (term.expressions or term.fields):
                merged[term] = merged.get(term, 0) + preferred.weight
        self._base = 0  # the NotIn and DoesNotExist terms', before what a node takes off
        self._by_key: dict[str, _KeyTerms] = {}
        self._name_in: dict[str, int] = {}
        self._name_not_in: dict[str, int] = {}
        self._name_candidates: dict[str, list[tuple[NodeSelectorTerm, int]]] = {}
        self._everywhere: list[tuple[NodeSelectorTerm, int]] = []
        for term, weight in merged.items():
            if len(term.expressions) + len(term.fields) == 1:
                self._add_single(term, weight)
            else:
                self._add_compound(term, weight)

    def _key(self, key: str) -> _KeyTerms:
        entry = self._by_key.get(key)
        if entry is None:
            entry = self._by_key[key] = _KeyTerms()
        return entry

    def _add_single(self, term: NodeSelectorTerm, weight: int) -> None:
        if term.fields:  # metadata.name, In or NotIn, one value (a usable term's)
            (field_req,) = term.fields
            table = self._name_in if field_req.operator == "In" else self._name_not_in
            if field_req.operator != "In":
                self._base += weight
            table[field_req.values[0]] = table.get(field_req.values[0], 0) + weight
            return
        (req,) = term.expressions
        entry, op = self._key(req.key), req.operator
        if op in ("In", "NotIn"):
            table = entry.in_values if op == "In" else entry.not_in_penalty
            if op == "NotIn":
                self._base += weight
            for value in dict.fromkeys(req.values):  # a value listed twice counts once
                table[value] = table.get(value, 0) + weight
        elif op == "Exists":
            entry.exists += weight
        elif op == "DoesNotExist":
            self._base += weight
            entry.absent_penalty += weight
        else:  # Gt, Lt: the node's value read as a number
            entry.key_candidates.append((term, weight))

    def _add_compound(self, term: NodeSelectorTerm, weight: int) -> None:
        for req in term.expressions:
            if req.operator == "In":
                candidates = self._key(req.key).candidates
                for value in dict.fromkeys(req.values):
                    candidates.setdefault(value, []).append((term, weight))
                return
        for field_req in term.fields:
            if field_req.operator == "In":
                self._name_candidates.setdefault(field_req.values[0], []).append((term, weight))
                return
        for req in term.expressions:
            if req.operator in ("Exists", "Gt", "Lt"):
                self._key(req.key).key_candidates.append((term, weight))
                return
        self._everywhere.append((term, weight))

    def weight(self, labels: Mapping[str, str], node_name: str) -> int:
        """The sum of the weights of the terms that match a node with ``labels`` and
        ``node_name``."""
        total = self._base + self._name_in.get(node_name, 0) - self._name_not_in.get(node_name, 0)
        by_key = self._by_key
        # the keys both have, from the smaller side
        pairs = (
            ((key, labels[key], by_key[key]) for key in by_key if key in labels)
            if len(by_key) <= len(labels)
            else ((key, value, by_key[key]) for key, value in labels.items() if key in by_key)
        )
        for _, value, entry in pairs:
            total += entry.in_values.get(value, 0) - entry.not_in_penalty.get(value, 0)
            total += entry.exists - entry.absent_penalty
            total += _matching(entry.candidates.get(value, ()), labels, node_name)
            total += _matching(entry.key_candidates, labels, node_name)
        total += _matching(self._name_candidates.get(node_name, ()), labels, node_name)
        return total + _matching(self._everywhere, labels, node_name)


def _matching(
    terms: Iterable[tuple[NodeSelectorTerm, int]], labels: Mapping[str, str], node_name: str
) -> int:
    """The sum of the weights of ``terms`` (term, weight) that match the node."""
    return sum(weight for term, weight in terms if term.matches(labels, node_name))
