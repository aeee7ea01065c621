"""Test helpers for stickypack users: a real local Kubernetes control plane.

``ControlPlane`` runs etcd, kube-apiserver and kube-scheduler built by ``make k8s``
(``tools/k8s/build.sh``); see :mod:`stickypack.testing.controlplane`. Nothing in
``stickypack.core`` imports this package.
"""

from stickypack.testing.controlplane import (
    BinariesNotFoundError,
    ControlPlane,
    ControlPlaneError,
    SchedulerHandle,
    binaries_dir,
    find_binaries,
    pod_manifest,
)

__all__ = [
    "BinariesNotFoundError",
    "ControlPlane",
    "ControlPlaneError",
    "SchedulerHandle",
    "binaries_dir",
    "find_binaries",
    "pod_manifest",
]
