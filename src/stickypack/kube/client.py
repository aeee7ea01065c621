"""An async API client (kubernetes_asyncio) from a kubeconfig file or the in-cluster config."""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kubernetes_asyncio.client import ApiClient


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


class KubeconfigError(ValueError):
    """A kubeconfig (or the in-cluster configuration) that cannot be used: missing,
    unreadable, not YAML, or no cluster to connect to. The message is one line naming the
    file and what is wrong with it."""


class ApiUnreachableError(ConnectionError):
    """The API server could not be connected to (refused, timed out, TLS failed); the
    message is one line naming the server and the kubeconfig it came from."""


#: Where a kubeconfig path came from, as :func:`kubeconfig_path` resolves it.
_FROM_ENV = " (from $KUBECONFIG)"
_DEFAULT = " (the default: none given, no $KUBECONFIG, not in a cluster)"


def kubeconfig_path(kubeconfig: str | None = None) -> tuple[str | None, str]:
    """The kubeconfig :func:`make_api_client` reads, and how to name it in a message:
    ``kubeconfig``, else ``$KUBECONFIG`` (files separated by ``:`` merged, as
    kubernetes_asyncio and kubectl do), else ``None`` in a pod (the in-cluster service
    account), else ``~/.kube/config`` (read now: the library fixes its default at import)."""
    if kubeconfig:
        return kubeconfig, f"kubeconfig {kubeconfig}"
    path = os.environ.get("KUBECONFIG")
    if path:
        return path, f"kubeconfig {path}{_FROM_ENV}"
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        return None, "the in-cluster configuration (the pod's service account)"
    path = os.path.expanduser("~/.kube/config")
    return path, f"kubeconfig {path}{_DEFAULT}"


def _named(items: Any, what: str, source: str) -> dict[str, Any]:
    """A kubeconfig's ``clusters`` or ``contexts`` list by name (the first of a name wins, as
    in kubernetes_asyncio's merge), each entry's own mapping (its ``cluster`` or
    ``context``)."""
    if items is None:
        return {}
    if not isinstance(items, list) or not all(isinstance(i, dict) and "name" in i for i in items):
        raise KubeconfigError(f"{source}: {what}s is not a list of entries with a name")
    out: dict[str, Any] = {}
    for item in items:
        out.setdefault(str(item["name"]), item.get(what))
    return out


def check_kubeconfig(paths: str, source: str) -> None:
    """Raise :class:`KubeconfigError` (``source``: how to name the file) unless every file of
    ``paths`` (``:``-separated) is a readable YAML mapping and, merged as kubernetes_asyncio
    merges them (the last ``current-context`` given, the first cluster or context of a name),
    the current context names a cluster they define, with a server."""
    import yaml

    from stickypack.core.yamltext import describe_yaml_error
    from stickypack.textfile import TextFileError, read_text_file

    docs = []
    for part in (p for p in paths.split(os.pathsep) if p):
        path = os.path.expanduser(part)
        where = source if part == paths else f"kubeconfig {path} (of {paths})"
        if part != paths and not os.path.exists(path):
            # a file of a list that is not there (or a link to one not there) is skipped, as
            # kubectl and kubernetes_asyncio skip it
            continue
        if not os.path.lexists(path):
            raise KubeconfigError(f"{where}: not found")
        try:
            text = read_text_file(Path(path))
        except TextFileError as exc:  # a directory, no permission, not UTF-8
            raise KubeconfigError(f"{where}: {str(exc).removeprefix(f'{path}: ')}") from None
        try:
            doc = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise KubeconfigError(describe_yaml_error(exc, where)) from None
        except RecursionError:
            raise KubeconfigError(f"{where}: not valid YAML: nested too deeply") from None
        if not isinstance(doc, dict):
            what = "empty" if doc is None else f"a YAML {type(doc).__name__}"
            raise KubeconfigError(
                f"{where}: not a kubeconfig ({what}, not a mapping with clusters, contexts and users)"
            )
        docs.append((where, doc))
    if not docs:
        raise KubeconfigError(f"{source}: none of its files is there")
    clusters: dict[str, Any] = {}
    contexts: dict[str, Any] = {}
    current = None
    for where, doc in docs:
        for name, entry in _named(doc.get("clusters"), "cluster", where).items():
            clusters.setdefault(name, entry)
        for name, entry in _named(doc.get("contexts"), "context", where).items():
            contexts.setdefault(name, entry)
        current = doc.get("current-context", current)
    if not current:
        raise KubeconfigError(f"{source}: no current-context (kubectl config use-context NAME sets one)")
    if current not in contexts:
        known = ", ".join(sorted(contexts)) or "none"
        raise KubeconfigError(
            f"{source}: its current-context {current!r} is not one of its contexts ({known})"
        )
    context = contexts[current]
    cluster = context.get("cluster") if isinstance(context, dict) else None
    if not cluster:
        raise KubeconfigError(f"{source}: context {current!r} names no cluster")
    if cluster not in clusters:
        known = ", ".join(sorted(clusters)) or "none"
        raise KubeconfigError(
            f"{source}: context {current!r} names cluster {cluster!r}, which it does not define "
            f"(its clusters: {known})"
        )
    entry = clusters[cluster]
    if not isinstance(entry, dict) or not isinstance(entry.get("server"), str) or not entry["server"]:
        raise KubeconfigError(f"{source}: cluster {cluster!r} (context {current!r}) has no server")


async def make_api_client(kubeconfig: str | None = None) -> ApiClient:
    """``kubernetes_asyncio.client.ApiClient`` for ``kubeconfig`` (else ``$KUBECONFIG``, else
    the in-cluster service account, else ``~/.kube/config``: :func:`kubeconfig_path`).
    Close it with ``await api.close()``. A configuration that cannot be used raises
    :class:`KubeconfigError`, in one line naming the file and what is wrong."""
    from kubernetes_asyncio import client, config

    cfg = client.Configuration()
    path, source = kubeconfig_path(kubeconfig)
    if path is None:
        try:
            config.load_incluster_config(client_configuration=cfg)
        except Exception as exc:  # no token or CA mounted, no KUBERNETES_SERVICE_PORT...
            raise KubeconfigError(f"{source}: cannot be used: {describe_error(exc)}") from exc
        return client.ApiClient(configuration=cfg)
    check_kubeconfig(path, source)
    try:
        await config.load_kube_config(config_file=path, client_configuration=cfg)
    except Exception as exc:  # a certificate file it names missing, an exec plugin failing...
        raise KubeconfigError(f"{source}: cannot be used: {describe_error(exc)}") from exc
    return client.ApiClient(configuration=cfg)


def connection_failed(exc: BaseException) -> bool:
    """Whether ``exc`` says the API server could not be connected to (or stopped answering):
    refused, reset, unresolvable, timed out, TLS refused. Not an HTTP error status."""
    import aiohttp

    return isinstance(exc, aiohttp.ClientConnectionError | TimeoutError)


@contextlib.asynccontextmanager
async def api_client(kubeconfig: str | None = None) -> AsyncIterator[ApiClient]:
    """:func:`make_api_client`'s client for a one-shot command, closed on leaving; an API
    server that cannot be connected to raises :class:`ApiUnreachableError`, in one line
    naming it and the kubeconfig."""
    api = await make_api_client(kubeconfig)
    try:
        yield api
    except Exception as exc:
        if not connection_failed(exc):
            raise
        _, source = kubeconfig_path(kubeconfig)
        server = api.configuration.host
        raise ApiUnreachableError(
            f"cannot connect to the API server {server} (from {source}): {describe_error(exc)}"
        ) from exc
    finally:
        await api.close()


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
