"""Candidate builder nodes: the nodes running BinderHub's builder DaemonSet pods.

BinderHub lists the builder pods (DinD or "pink", label selector
``component=image-builder,app=binder``) on *every* build, ranks their ``spec.nodeName`` and
fails the build when the list is empty or a pod has no node yet. :func:`nodes_of_pods`
skips pods not bound yet, finished or being deleted, and gives an empty list rather than
failing when there are none; BinderHub's library mode (:mod:`stickypack.binderhub`, which
throttles the listing itself) applies it to what its client lists. The extender knows the
builder pods from its watch (``pods.builder_selector``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def nodes_of_pods(pods: Iterable[Mapping[str, Any]]) -> list[str]:
    """Sorted node names of ``pods`` (pod dicts) that are bound and neither finished nor being
    deleted."""
    out = set()
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        phase = (pod.get("status") or {}).get("phase")
        deleting = (pod.get("metadata") or {}).get("deletionTimestamp")
        if node and phase not in ("Succeeded", "Failed") and not deleting:
            out.add(str(node))
    return sorted(out)
