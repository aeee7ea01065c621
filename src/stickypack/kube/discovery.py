"""Candidate builder nodes: the nodes running BinderHub's builder DaemonSet pods.

BinderHub lists the builder pods (DinD or "pink", label selector
``component=image-builder,app=binder``) on *every* build, ranks their ``spec.nodeName`` and
fails the build when the list is empty or a pod has no node yet. :class:`BuilderNodes`
lists them at most once per ``interval_s`` (concurrent callers share one request and its
result, like BinderHub's ``at_most_every`` health-check cache), skips pods not bound yet,
and returns an empty list rather than failing when there are none. :func:`nodes_of_pods`
is that rule alone, which BinderHub's library mode (:mod:`stickypack.binderhub`, with its
own synchronous throttle) applies to what its client lists.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from stickypack.kube.cache import DEFAULT_BUILDER_SELECTOR, parse_selector, selector_text
from stickypack.kube.client import read_json

log = logging.getLogger(__name__)

T = TypeVar("T")


def at_most_every(
    interval_s: float, clock: Callable[[], float] = time.monotonic
) -> Callable[[Callable[..., Awaitable[T]]], Callable[..., Awaitable[T]]]:
    """Decorate an async function (called without arguments, or with the same ones) so it
    runs at most once per ``interval_s``: callers within the interval get the cached
    result, callers during a run await the same run. A run that raises is not cached."""

    def deco(fn: Callable[..., Awaitable[T]]) -> Callable[..., Awaitable[T]]:
        state: dict[str, Any] = {"at": None, "result": None, "future": None}

        @functools.wraps(fn)
        async def wrapper(*args: Any, **kwargs: Any) -> T:
            now = clock()
            if state["at"] is not None and now - state["at"] < interval_s:
                return state["result"]
            fut: asyncio.Future[T] | None = state["future"]
            if fut is None:
                fut = asyncio.ensure_future(fn(*args, **kwargs))
                state["future"] = fut

                def done(f: asyncio.Future[T]) -> None:
                    state["future"] = None
                    if not f.cancelled() and f.exception() is None:
                        state["result"] = f.result()
                        state["at"] = clock()

                fut.add_done_callback(done)
            return await asyncio.shield(fut)

        return wrapper

    return deco


class BuilderNodes:
    """Node names of the builder pods in ``namespace`` matching ``selector``, cached.

    ``api_client``: a ``kubernetes_asyncio`` ApiClient. ``nodes()`` returns a sorted list,
    possibly empty (no builder pod, or none bound yet).
    """

    def __init__(
        self,
        api_client: Any,
        namespace: str,
        selector: str | dict[str, str] = DEFAULT_BUILDER_SELECTOR,
        interval_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        from kubernetes_asyncio import client

        self.core = client.CoreV1Api(api_client)
        self.namespace = namespace
        self.selector = selector_text(parse_selector(selector))
        self.calls = 0
        self.nodes = at_most_every(interval_s, clock)(self._list)

    async def _list(self) -> list[str]:
        self.calls += 1
        resp = await self.core.list_namespaced_pod(
            self.namespace, label_selector=self.selector, _preload_content=False
        )
        body = await read_json(resp)
        return nodes_of_pods(body.get("items") or ())


def nodes_of_pods(pods: Any) -> list[str]:
    """Sorted node names of running, bound pods (pods not yet bound are skipped)."""
    out = set()
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        phase = (pod.get("status") or {}).get("phase")
        deleting = (pod.get("metadata") or {}).get("deletionTimestamp")
        if node and phase not in ("Succeeded", "Failed") and not deleting:
            out.add(str(node))
    return sorted(out)
