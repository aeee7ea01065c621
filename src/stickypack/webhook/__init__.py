"""A mutating admission webhook that gives pods a ``schedulerName`` by label and namespace.

For clusters where ``MutatingAdmissionPolicy`` (``stickypack render scheduler-routing``,
Kubernetes 1.36+) is not available: Dask worker pods of any namespace, or BinderHub build
pods, reach the packing or the build scheduler without anyone editing their spec.

- :mod:`stickypack.webhook.config`: the YAML configuration (routes, TLS, listen address).
- :mod:`stickypack.webhook.app`: the ASGI app (``/mutate``, health, metrics).
- :mod:`stickypack.webhook.server`: uvicorn wiring, and a background-thread server for tests.

The decision itself is :func:`stickypack.core.routing.route_pod`; the
``MutatingWebhookConfiguration`` that registers the service is
:func:`stickypack.render.webhook_configuration` (``stickypack render webhook-config``).
"""
