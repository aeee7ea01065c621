"""An async API client (kubernetes_asyncio) from a kubeconfig file or the in-cluster config."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, order=True)
class ApiRight:
    """One RBAC right a component's API calls need: ``verb`` on ``resource`` of the API group
    ``group`` (``""``: the core group), in ``namespace`` (``None``: cluster-wide, which a
    list or watch across all namespaces needs too)."""

    group: str
    resource: str
    verb: str
    namespace: str | None = None


def rule_rights(
    group: str, resources: Iterable[str], verbs: Iterable[str], namespace: str | None = None
) -> frozenset[ApiRight]:
    """Every ``verb`` on every one of ``resources`` (an RBAC rule, expanded)."""
    return frozenset(ApiRight(group, r, v, namespace) for r in resources for v in verbs)


class KubeconfigError(RuntimeError):
    """A kubeconfig file that exists but cannot be loaded; the message names the file."""


async def make_api_client(kubeconfig: str | None = None) -> Any:
    """``kubernetes_asyncio.client.ApiClient`` for ``kubeconfig`` (else ``$KUBECONFIG``, else
    the in-cluster service account, else ``~/.kube/config``). Close it with ``await
    api.close()``."""
    from kubernetes_asyncio import client, config

    cfg = client.Configuration()
    path = kubeconfig or os.environ.get("KUBECONFIG")
    if not path and os.environ.get("KUBERNETES_SERVICE_HOST"):
        config.load_incluster_config(client_configuration=cfg)
        return client.ApiClient(configuration=cfg)
    # ~/.kube/config read now (the library fixes its default path at import)
    path = path or os.path.expanduser("~/.kube/config")
    if not os.path.isfile(path):  # the library would print and then complain of a missing context
        raise FileNotFoundError(f"kubeconfig not found: {path}")
    try:
        await config.load_kube_config(config_file=path, client_configuration=cfg)
    except Exception as exc:  # the library's own errors say little of which file is wrong
        raise KubeconfigError(f"kubeconfig {path} cannot be used: {type(exc).__name__}: {exc}") from exc
    return client.ApiClient(configuration=cfg)


async def read_json(resp: Any) -> Any:
    """The JSON body of a ``_preload_content=False`` response; raises
    ``kubernetes_asyncio.client.exceptions.ApiException`` for a non-2xx status (the raw
    response path does not)."""
    import json

    from kubernetes_asyncio.client.exceptions import ApiException

    try:
        body = await resp.read()
    finally:
        resp.release()
    if not 200 <= resp.status <= 299:
        exc = ApiException(status=resp.status, reason=resp.reason)
        exc.body = body.decode(errors="replace")
        raise exc
    return json.loads(body)


def describe_error(exc: BaseException) -> str:
    """One log line for an error from the API server or the network.

    An ``ApiException`` prints as several lines (reason, headers, the whole body); this gives
    ``HTTP 403 Forbidden: <the Status message>`` instead. Anything else: its type and text,
    newlines folded.
    """
    status = getattr(exc, "status", None)
    if isinstance(status, int) and hasattr(exc, "body"):
        import json

        message = ""
        body = getattr(exc, "body", None)
        if isinstance(body, bytes):
            body = body.decode(errors="replace")
        if isinstance(body, str) and body:
            try:
                parsed = json.loads(body)
                message = str(parsed.get("message") or "") if isinstance(parsed, dict) else ""
            except ValueError:
                message = body[:200]
        text = f"HTTP {status} {getattr(exc, 'reason', '') or ''}".rstrip()
        return f"{text}: {message}" if message else text
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
