"""A one-time snapshot of a cluster, for ``stickypack inspect``: nodes and bound pods listed
once (paged, as the extender's informers list them) into a :class:`ClusterCache`, and the
pods each node holds."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from stickypack.core.pod import Pod, PodSpecError
from stickypack.kube.cache import TERMINAL_PHASES, ClusterCache
from stickypack.kube.informer import Informer


@dataclass
class Snapshot:
    """``cache``: the nodes and the pods bound to them, as the extender would hold them;
    ``pods_by_node``: those pods by node name; ``unreadable``: keys of pods skipped because
    their spec could not be read (as the extender skips them)."""

    cache: ClusterCache
    pods_by_node: dict[str, list[Pod]] = field(default_factory=dict)
    unreadable: list[str] = field(default_factory=list)


async def take_snapshot(api_client: Any, cache: ClusterCache | None = None) -> Snapshot:
    """List every node and every bound, running pod through ``api_client``
    (``kubernetes_asyncio.client.ApiClient``). Needs ``list`` on nodes and on pods of all
    namespaces."""
    from kubernetes_asyncio import client

    core = client.CoreV1Api(api_client)
    cache = cache if cache is not None else ClusterCache(clock=lambda: 0.0)
    nodes = await Informer("nodes", core.list_node).list_once()
    pods = await Informer(
        "pods", core.list_pod_for_all_namespaces, field_selector="spec.nodeName!="
    ).list_once()
    for obj in nodes.values():
        cache.node_event("ADDED", obj)
    snap = Snapshot(cache)
    for key, obj in sorted(pods.items()):
        if (obj.get("status") or {}).get("phase") in TERMINAL_PHASES:
            continue
        try:
            pod = Pod.from_dict(obj)
        except PodSpecError:
            snap.unreadable.append(key)
            continue
        cache.pod_event("ADDED", obj)
        if pod.node_name:
            snap.pods_by_node.setdefault(pod.node_name, []).append(pod)
    return snap
