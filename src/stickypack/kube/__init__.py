"""Live adapters: the API client, watch-based caches of nodes and pods feeding a NodeTable,
the nodes' DRA state, the build-history recorder and its store, a one-time snapshot for
``stickypack inspect``, and candidate builder-node discovery.

- :mod:`stickypack.kube.client`: the API client from a kubeconfig or in-cluster, with
  one-line errors; :class:`~stickypack.kube.client.ApiRight`, an RBAC right a call needs.

- :mod:`stickypack.kube.informer`: list + watch with resourceVersion, resync, reconnect,
  410 Gone -> relist.
- :mod:`stickypack.kube.cache`: :class:`ClusterCache`, informer events -> ``NodeTable``,
  build-pod ends, builder nodes, assumptions.
- :mod:`stickypack.kube.dra`: :class:`~stickypack.kube.dra.NodeDraTracker`, each node's
  DRA utilization kept in the table from ResourceSlice, ResourceClaim and pod events
  (the extender's ``cluster.dra``).
- :mod:`stickypack.kube.history`: the build history in the cluster (ConfigMaps by default),
  optimistic concurrency, tombstones, the recorder.
- :mod:`stickypack.kube.snapshot`: nodes and pods listed once into a ``ClusterCache``, with
  what ``stickypack inspect`` reports besides.
- :mod:`stickypack.kube.discovery`: builder nodes from the builder DaemonSet's pods
  (:func:`~stickypack.kube.discovery.nodes_of_pods`, which BinderHub's library mode applies
  to what its own client lists).
"""

from stickypack.kube.cache import ClusterCache, parse_selector
from stickypack.kube.history import (
    ConfigMapHistoryStore,
    HistoryRecorder,
    Limits,
    MemoryHistoryStore,
    NodeAnnotationHistoryStore,
)
from stickypack.kube.informer import Informer

__all__ = [
    "ClusterCache",
    "ConfigMapHistoryStore",
    "HistoryRecorder",
    "Informer",
    "Limits",
    "MemoryHistoryStore",
    "NodeAnnotationHistoryStore",
    "parse_selector",
]
