"""stickypack: pod placement for interactive-computing clusters on Kubernetes.

Layout: ``stickypack.core`` is the pure placement engine (no I/O, no clock, no globals);
``sim``, ``kube``, ``extender`` and ``testing`` are adapters that depend on it.
"""

__version__ = "0.1.0"
