"""The kube-scheduler extender: ``filter`` and ``prioritize`` over the live node table.

- :mod:`~stickypack.extender.config`: the YAML configuration (pydantic).
- :mod:`~stickypack.extender.engine`: the decisions (wire format of
  ``k8s.io/kube-scheduler/extender/v1``).
- :mod:`~stickypack.extender.app`: the ASGI app (Starlette): verbs, health, metrics.
- :mod:`~stickypack.extender.metrics`: its Prometheus metrics.
- :mod:`~stickypack.extender.server`: informers + history + app under uvicorn; the RBAC
  rights its calls need (``api_rights``); the uvicorn, TLS and test-thread pieces the
  webhook reuses.
"""

from stickypack.extender.config import ConfigError, ExtenderConfig, load_config
from stickypack.extender.engine import BadRequest, Extender

__all__ = ["BadRequest", "ConfigError", "Extender", "ExtenderConfig", "load_config"]
