"""Test helpers for stickypack users: a real local Kubernetes control plane, and the
fidelity harnesses that run random cases on it.

``ControlPlane`` runs etcd, kube-apiserver and kube-scheduler built by ``make k8s``
(``tools/k8s/build.sh``); see :mod:`stickypack.testing.controlplane`. The harnesses compare
the core with the real scheduler: :mod:`~stickypack.testing.fidelity` (the built-in
policies), :mod:`~stickypack.testing.plugin_fidelity` (each kube-scheduler plugin with its
own arguments), :mod:`~stickypack.testing.live_fidelity` (the live ``stickypack``
deployment, extenders included). Nothing in ``stickypack.core`` imports this package.
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
