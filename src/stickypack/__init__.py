"""stickypack: pod placement for interactive-computing clusters on Kubernetes.

Layout: ``stickypack.core`` is the pure placement engine (no I/O, no clock, no globals);
the drivers around it depend on it, never the reverse: ``sim`` (the simulator), ``kube``
(live cluster state), ``extender`` (the kube-scheduler extender), ``webhook`` (the
scheduler-routing admission webhook), ``binderhub`` (BinderHub's library mode), ``dask``
(the Dask preload), ``render`` (configuration for a real cluster), ``cli`` (the
``stickypack`` command) and ``testing`` (a real local control plane). docs/architecture.md
says what each module holds and which may import which.
"""

__version__ = "0.1.0"
