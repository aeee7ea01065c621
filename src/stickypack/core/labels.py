"""Taints, tolerations and node-selector terms, with Kubernetes' matching rules; the syntax
of object names and label keys and values."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
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
