"""Where a pod's persistent volumes let it run: what kube-scheduler's ``VolumeBinding``
filter (for bound claims: the PersistentVolume's ``spec.nodeAffinity.required``) and its
``VolumeZone`` filter (the PersistentVolume's zone and region labels) check, for the
scale-down simulation.

- :class:`VolumePlacement`: what a bound PersistentVolume asks of a node, read from the PV
  by :meth:`VolumePlacement.from_dict`.
- :func:`claim_volumes`: each PersistentVolumeClaim (by namespace and name) to the
  placement of the volume it is bound to, from listed claims and volumes
  (:data:`ClaimVolumes`).
- :class:`PersistentVolumesFilter`: a filter plugin judging a pod's claims
  (:attr:`~stickypack.core.pod.Pod.claims`) on each node by such a mapping.

Not modelled: binding an unbound claim (a running pod's claims are bound), ReadWriteOncePod
conflicts (``VolumeRestrictions``), CSI attach limits (``NodeVolumeLimits``), and the
in-tree to CSI translation of a PV's topology.

Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from stickypack.core.framework import FilterPlugin, SchedulingContext
from stickypack.core.labels import NodeSelectorTerm
from stickypack.core.nodetable import NodeTable
from stickypack.core.pod import Pod

ZONE_LABEL = "topology.kubernetes.io/zone"
REGION_LABEL = "topology.kubernetes.io/region"
BETA_ZONE_LABEL = "failure-domain.beta.kubernetes.io/zone"
BETA_REGION_LABEL = "failure-domain.beta.kubernetes.io/region"
#: The PV labels VolumeZone reads, in its order, each with the label a node may carry
#: instead (a PV's deprecated beta label matches a node's GA one, not the other way round).
VOLUME_ZONE_LABELS: tuple[tuple[str, str], ...] = (
    (BETA_ZONE_LABEL, ZONE_LABEL),
    (BETA_REGION_LABEL, REGION_LABEL),
    (ZONE_LABEL, ZONE_LABEL),
    (REGION_LABEL, REGION_LABEL),
)
#: How a PV's zone label lists several zones (``z1__z2``).
MULTI_ZONE_DELIMITER = "__"
#: The annotation the PV controller sets on a claim it has bound.
BIND_COMPLETED_ANNOTATION = "pv.kubernetes.io/bind-completed"


@dataclass(frozen=True, slots=True)
class VolumePlacement:
    """What a PersistentVolume (``name``) asks of a node. ``node_terms``: its
    ``spec.nodeAffinity.required.nodeSelectorTerms`` (ORed; None: no required node
    affinity); ``zones``: for each zone or region label it carries, (the label, the node
    label that may stand for it, the values it allows)."""

    name: str
    node_terms: tuple[NodeSelectorTerm, ...] | None = None
    zones: tuple[tuple[str, str, frozenset[str]], ...] = ()

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> VolumePlacement:
        """From a PersistentVolume dict. A zone label kube-scheduler cannot read (an empty
        zone in the list) is left out, as it leaves it out; required node affinity terms
        that do not parse match no node (VolumeBinding then refuses every node)."""
        meta = raw.get("metadata") or {}
        labels = meta.get("labels") or {}
        required = ((raw.get("spec") or {}).get("nodeAffinity") or {}).get("required")
        node_terms = None
        if isinstance(required, Mapping):
            try:
                node_terms = tuple(
                    NodeSelectorTerm.from_dict(t) for t in required.get("nodeSelectorTerms") or ()
                )
            except (KeyError, TypeError, ValueError, AttributeError):
                node_terms = (NodeSelectorTerm(usable=False),)
        zones = []
        for key, node_key in VOLUME_ZONE_LABELS:
            value = labels.get(key)
            if not isinstance(value, str):
                continue
            parts = [part.strip() for part in value.split(MULTI_ZONE_DELIMITER)]
            if all(parts):
                zones.append((key, node_key, frozenset(parts)))
        return cls(str(meta.get("name") or ""), node_terms, tuple(zones))

    def allows(self, node_labels: Mapping[str, str], zones: bool = True) -> bool:
        """Whether a node with ``node_labels`` passes both filters for this volume
        (``zones`` False: VolumeBinding's alone, as for a generic ephemeral volume's, which
        VolumeZone does not read):

        - VolumeBinding: some required term matches the node's labels (kube's
          ``CheckNodeAffinity`` sees the labels alone, so a ``matchFields`` term on the
          node's name matches no node);
        - VolumeZone: a node with none of the zone and region labels passes; else for each
          of the PV's, the node's value of that label (or of its GA successor) is one the
          PV lists.
        """
        if self.node_terms is not None and not any(t.matches(node_labels, "") for t in self.node_terms):
            return False
        if zones and self.zones and any(key in node_labels for key, _ in VOLUME_ZONE_LABELS):
            for key, node_key, values in self.zones:
                value = node_labels.get(key, node_labels.get(node_key))
                if value is None or value not in values:
                    return False
        return True


#: ``(namespace, claim name)`` to the placement of the volume it is bound to; None for a
#: claim no node can take, being deleted or bound to a volume that does not exist. A claim
#: the mapping does not hold does not exist, and no node can take it either (kube-scheduler
#: finds a pod with such a claim unschedulable). A claim not bound yet maps to a placement
#: without constraints (binding it is not modelled).
ClaimVolumes = Mapping[tuple[str, str], VolumePlacement | None]


def claim_volumes(claims: Iterable[Mapping[str, Any]], volumes: Iterable[Mapping[str, Any]]) -> ClaimVolumes:
    """:data:`ClaimVolumes` from PersistentVolumeClaim and PersistentVolume dicts (as the API
    lists them; only the metadata, the claims' ``spec.volumeName`` and the volumes'
    ``spec.nodeAffinity`` are read). A claim is bound once it names its volume, as a running
    pod's claims are (kube-scheduler also wants the PV controller's
    :data:`BIND_COMPLETED_ANNOTATION`, which it sets when it binds)."""
    by_name: dict[str, VolumePlacement] = {}
    for raw in volumes:
        placement = VolumePlacement.from_dict(raw)
        by_name[placement.name] = placement
    out: dict[tuple[str, str], VolumePlacement | None] = {}
    for raw in claims:
        meta = raw.get("metadata") or {}
        key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        volume_name = (raw.get("spec") or {}).get("volumeName")
        if meta.get("deletionTimestamp"):
            out[key] = None
        elif not volume_name:
            out[key] = VolumePlacement("")
        else:
            out[key] = by_name.get(str(volume_name))
    return out


class PersistentVolumesFilter(FilterPlugin):
    """kube-scheduler's VolumeBinding (bound claims) and VolumeZone filters: each claim of
    the pod (:attr:`~stickypack.core.pod.Pod.claims`, in its namespace) must be usable and
    its volume must allow the node (:meth:`VolumePlacement.allows`; a generic ephemeral
    volume's claim, :attr:`~stickypack.core.pod.Pod.ephemeral_claims`, by its node affinity
    alone). ``claims``: see
    :data:`ClaimVolumes`. Not one of a policy's plugins: the scale-down simulation adds it
    when the claims and volumes are known."""

    name = "PersistentVolumes"  # kube-scheduler's VolumeBinding and VolumeZone together

    def __init__(self, claims: ClaimVolumes) -> None:
        self.claims = claims

    def filter(self, pod: Pod, table: NodeTable, idx: np.ndarray, ctx: SchedulingContext) -> np.ndarray:
        if not pod.claims:
            return np.ones(idx.shape[0], dtype=bool)
        ephemeral = pod.ephemeral_claims
        placements = [
            (self.claims.get((pod.namespace, claim)), claim not in ephemeral) for claim in pod.claims
        ]
        if any(p is None for p, _ in placements):
            return np.zeros(idx.shape[0], dtype=bool)
        constrained = [
            (p, zones)
            for p, zones in placements
            if p is not None and (p.node_terms is not None or (zones and p.zones))
        ]
        out = np.ones(idx.shape[0], dtype=bool)
        if not constrained:
            return out
        info = table.info
        for j, row in enumerate(idx.tolist()):
            node = info[row]
            labels = node.labels if node is not None else {}
            out[j] = all(p.allows(labels, zones) for p, zones in constrained)
        return out
