"""Live adapters: watch-based caches of nodes and pods feeding a NodeTable, the
build-history recorder and its store, and candidate builder-node discovery.

- :mod:`stickypack.kube.informer`: list + watch with resourceVersion, resync, reconnect,
  410 Gone -> relist.
- :mod:`stickypack.kube.cache`: :class:`ClusterCache`, informer events -> ``NodeTable``,
  build-pod ends, builder nodes, assumptions.
- :mod:`stickypack.kube.history`: the build history in the cluster (ConfigMaps by default),
  optimistic concurrency, tombstones, the recorder.
- :mod:`stickypack.kube.discovery`: builder nodes from the builder DaemonSet's pods, listed
  behind a shared-result throttle (used by BinderHub's library mode).
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
