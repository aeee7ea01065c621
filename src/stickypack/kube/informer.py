"""An informer: list + watch one kind of object into a local dict, with handlers.

The same contract as client-go's reflector, written on :mod:`kubernetes_asyncio`:

- **list, then watch from the list's ``resourceVersion``**, with watch bookmarks on, so a
  reconnect resumes where the stream stopped and no event is lost or seen twice;
- **410 Gone** (the resourceVersion fell out of the API server's window, or a paginated
  list's continue token expired) -> **relist**, and the relist is *diffed* against the local
  copy, so objects deleted while we were away are delivered as deletions (``synthetic``);
- **watch errors** (connection refused, reset, timeouts, HTTP 5xx) -> **reconnect with
  exponential backoff and jitter** (``min_backoff_s`` .. ``max_backoff_s``);
- **resync**: every ``resync_s`` a full relist, diffed the same way, so a local copy that
  drifted for any reason converges.

Objects are plain JSON dicts (``_preload_content=False``; the generated model classes cost
tens of microseconds per object and nothing here needs them). Handlers are synchronous and
run on the event loop: they must be quick (they update a node table).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson

from stickypack.kube.client import describe_error

log = logging.getLogger(__name__)

Obj = dict[str, Any]


class Handler(Protocol):
    """``handler(kind, obj, old)``: kind is ``"ADDED"``, ``"MODIFIED"`` or ``"DELETED"``;
    ``old`` is the previous copy (None for ADDED). Deletions found by a relist carry
    ``synthetic=True``."""

    def __call__(self, kind: str, obj: Obj, old: Obj | None, /, *, synthetic: bool = ...) -> None: ...


#: A watch that ends, or a 410 that comes, this many seconds or less after it started with
#: nothing learned is not progress: retry after the backoff, not at once (client-go's
#: reflector does the same for watches shorter than a second).
QUICK_S = 1.0


class WatchError(Exception):
    """The API server answered a list or watch with an error status."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status


def object_key(obj: Obj) -> str:
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    return f"{ns}/{meta.get('name')}" if ns else str(meta.get("name"))


@dataclass
class InformerStats:
    """Counters the extender exports as metrics."""

    lists: int = 0
    relists_gone: int = 0
    watch_errors: int = 0
    events: int = 0
    #: Events and listed objects skipped because they could not be read (logged).
    bad_events: int = 0
    connected: bool = False
    #: The HTTP status of the last list or watch the API server refused (401, 403, 404, 5xx...;
    #: 410 aside, which only means relist), None once one is answered again: a 403 here
    #: that stays means the informer's rights were taken away.
    refused_status: int | None = None
    #: time.monotonic() of the last contact with the API server (event, bookmark, list)
    last_contact: float = field(default_factory=time.monotonic)


class Informer:
    """Keep :attr:`objects` equal to the API server's view of one kind.

    ``list_call`` is a kubernetes_asyncio list method (``CoreV1Api.list_node``,
    ``list_pod_for_all_namespaces``, or a ``functools.partial`` of a namespaced one);
    ``handler`` is called for every change. :attr:`synced` is set after the first list.
    """

    def __init__(
        self,
        name: str,
        list_call: Callable[..., Awaitable[Any]],
        handler: Handler | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        watch_timeout_s: int = 300,
        resync_s: float = 900.0,
        min_backoff_s: float = 0.2,
        max_backoff_s: float = 30.0,
        page_size: int = 500,
        request_timeout_s: float = 60.0,
        transform: Callable[[Obj], Obj] | None = None,
    ) -> None:
        self.name = name
        self.list_call = list_call
        self.handlers: list[Handler] = [handler] if handler else []
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.watch_timeout_s = watch_timeout_s
        self.resync_s = resync_s
        self.min_backoff_s = min_backoff_s
        self.max_backoff_s = max_backoff_s
        self.page_size = page_size
        self.request_timeout_s = request_timeout_s
        #: Applied to every object before it is stored and handed to the handlers (keep
        #: only the fields they read: a pod cache of a big cluster is then megabytes, not
        #: hundreds of them).
        self.transform = transform
        self.objects: dict[str, Obj] = {}
        self.resource_version: str | None = None
        self.synced = asyncio.Event()
        self.stats = InformerStats()
        self._stop = False
        self._task: asyncio.Task[None] | None = None
        self._resp: Any = None
        #: the current watch has brought an event or a bookmark (progress: the backoff resets
        #: even when the watch then breaks)
        self._progress = False

    # ---- public --------------------------------------------------------------------------

    async def list_once(self) -> dict[str, Obj]:
        """One paged list of the kind (selectors and transform applied), without watching
        or touching :attr:`objects`: ``{namespace/name: object}``. Raises
        :class:`WatchError` on an HTTP error."""
        items, _ = await self._list()
        return items

    def add_handler(self, handler: Handler) -> None:
        self.handlers.append(handler)

    def start(self) -> asyncio.Task[None]:
        self._task = asyncio.create_task(self.run(), name=f"informer-{self.name}")
        return self._task

    async def stop(self) -> None:
        self._stop = True
        if self._resp is not None:
            with contextlib.suppress(Exception):
                self._resp.close()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task

    def staleness_s(self) -> float:
        """Seconds since the API server last told us something (0 before the first list
        is not meaningful: check :attr:`synced`)."""
        return time.monotonic() - self.stats.last_contact

    async def run(self) -> None:
        """List, then watch forever (until :meth:`stop`)."""
        backoff = self.min_backoff_s
        need_list = True
        last_list = 0.0
        list_tried = -math.inf
        while not self._stop:
            self._progress = False
            try:
                if need_list or time.monotonic() - last_list >= self.resync_s:
                    list_tried = time.monotonic()
                    await self._relist()
                    last_list = time.monotonic()
                    need_list = False
                watch_started = time.monotonic()
                lines = await self._watch_once(deadline=last_list + self.resync_s)
                if lines == 0 and time.monotonic() - watch_started < QUICK_S and not self._stop:
                    # closed at once with nothing said (a proxy, a server going down): not
                    # progress, so back off instead of reconnecting in a tight loop
                    raise WatchError(0, "the watch closed at once with no events")
                backoff = self.min_backoff_s
            except asyncio.CancelledError:
                raise
            except WatchError as exc:
                self.stats.connected = False
                if self._progress:
                    backoff = self.min_backoff_s
                if exc.status == 410:
                    self.stats.relists_gone += 1
                    need_list = True
                    if time.monotonic() - list_tried >= QUICK_S:
                        log.info("%s: %s; relisting", self.name, exc)
                        continue
                    # gone again right after a list (e.g. an expiring continue token)
                    log.warning("%s: %s again; relisting in %.1f s", self.name, exc, backoff)
                    await self._sleep(backoff)
                    backoff = min(backoff * 2, self.max_backoff_s)
                    continue
                self.stats.watch_errors += 1
                self.stats.refused_status = exc.status or None
                log.warning("%s: watch error %s; retrying in %.1f s", self.name, exc, backoff)
                await self._sleep(backoff)
                backoff = min(backoff * 2, self.max_backoff_s)
            except Exception as exc:  # connection refused/reset, timeouts, bad JSON...
                self.stats.connected = False
                if self._progress:
                    backoff = self.min_backoff_s
                self.stats.watch_errors += 1
                log.warning(
                    "%s: watch failed (%s); retrying in %.1f s", self.name, describe_error(exc), backoff
                )
                await self._sleep(backoff)
                backoff = min(backoff * 2, self.max_backoff_s)
            finally:
                self.stats.connected = False

    # ---- internals -------------------------------------------------------------------------

    async def _sleep(self, base: float) -> None:
        # jittered down to half, never above the cap
        await asyncio.sleep(base * (0.5 + 0.5 * random.random()))

    def _selectors(self) -> dict[str, Any]:
        kw: dict[str, Any] = {}
        if self.label_selector:
            kw["label_selector"] = self.label_selector
        if self.field_selector:
            kw["field_selector"] = self.field_selector
        return kw

    async def _list(self) -> tuple[dict[str, Obj], str]:
        items: dict[str, Obj] = {}
        cont: str | None = None
        while True:
            kw = self._selectors()
            kw["limit"] = self.page_size
            if cont:
                kw["_continue"] = cont
            resp = await self.list_call(_preload_content=False, _request_timeout=self.request_timeout_s, **kw)
            try:
                body = await resp.read()
                if resp.status != 200:
                    raise WatchError(resp.status, _message(body))
            finally:
                resp.release()
            page = orjson.loads(body)
            for obj in page.get("items") or ():
                try:
                    items[object_key(obj)] = self.transform(obj) if self.transform else obj
                except Exception:  # one unreadable object must not fail every list
                    self._bad("a listed object", obj)
            meta = page.get("metadata") or {}
            cont = meta.get("continue")
            if not cont:
                return items, str(meta.get("resourceVersion") or "")

    async def _relist(self) -> None:
        items, rv = await self._list()
        self.stats.lists += 1
        self.stats.refused_status = None
        self.stats.last_contact = time.monotonic()
        old = self.objects
        self.objects = items
        self.resource_version = rv
        for key, obj in items.items():
            prev = old.get(key)
            if prev is not None and _uid(prev) != _uid(obj):
                # deleted and created again under the same name while we were not watching
                # (BinderHub names build pods by repo): the old one's end must be seen
                self._dispatch("DELETED", prev, prev, synthetic=True)
                prev = None
            if prev is None:
                self._dispatch("ADDED", obj, None)
            elif _rv(prev) != _rv(obj):
                self._dispatch("MODIFIED", obj, prev)
        for key, prev in old.items():
            if key not in items:
                self._dispatch("DELETED", prev, prev, synthetic=True)
        self.synced.set()

    async def _watch_once(self, deadline: float) -> int:
        """One watch request until it ends; the number of lines (events) it brought."""
        lines = 0
        timeout = max(1, min(self.watch_timeout_s, int(deadline - time.monotonic()) + 1))
        kw = self._selectors()
        resp = await self.list_call(
            watch=True,
            resource_version=self.resource_version or "",
            allow_watch_bookmarks=True,
            timeout_seconds=timeout,
            _preload_content=False,
            _request_timeout=(10, timeout + 30),
            **kw,
        )
        self._resp = resp
        try:
            if resp.status != 200:
                raise WatchError(resp.status, _message(await resp.read()))
            self.stats.connected = True
            self.stats.refused_status = None
            self.stats.last_contact = time.monotonic()
            buf = bytearray()
            async for chunk in resp.content.iter_any():
                if self._stop:
                    return lines
                buf += chunk
                start = 0
                while True:
                    nl = buf.find(b"\n", start)
                    if nl < 0:
                        break
                    line = bytes(buf[start:nl])
                    start = nl + 1
                    if line.strip():
                        lines += 1
                        self._on_line(line)
                if start:
                    del buf[:start]
            if buf.strip():
                lines += 1
                self._on_line(bytes(buf))
            return lines
        finally:
            self._resp = None
            resp.release()

    def _on_line(self, line: bytes) -> None:
        self.stats.last_contact = time.monotonic()
        try:
            event = orjson.loads(line)
            kind = event.get("type")
            obj = event.get("object") or {}
            rv = (obj.get("metadata") or {}).get("resourceVersion")
        except (orjson.JSONDecodeError, AttributeError):
            # skipped, not retried: re-watching from the same version would bring it back
            self._bad("an event", line[:200])
            return
        if kind == "ERROR":
            raise WatchError(int(obj.get("code") or 500), str(obj.get("message") or obj))
        self._progress = True
        if kind == "BOOKMARK":
            if rv:
                self.resource_version = rv
            return
        self.stats.events += 1
        try:
            if self.transform is not None:
                obj = self.transform(obj)
            key = object_key(obj)
        except Exception:
            self._bad(f"a {kind} event", obj)
        else:
            if kind in ("ADDED", "MODIFIED"):
                prev = self.objects.get(key)
                self.objects[key] = obj
                self._dispatch("MODIFIED" if prev is not None else "ADDED", obj, prev)
            elif kind == "DELETED":
                prev = self.objects.pop(key, None)
                self._dispatch("DELETED", obj, prev)
        if rv:
            self.resource_version = rv

    def _bad(self, what: str, raw: Any) -> None:
        self.stats.bad_events += 1
        log.exception("%s: skipped %s that could not be read: %.200r", self.name, what, raw)

    def _dispatch(self, kind: str, obj: Obj, old: Obj | None, synthetic: bool = False) -> None:
        for handler in self.handlers:
            try:
                if synthetic:
                    handler(kind, obj, old, synthetic=True)
                else:
                    handler(kind, obj, old)
            except Exception:  # a handler bug must not stop the informer
                log.exception("%s: handler failed on %s %s", self.name, kind, object_key(obj))


def _uid(obj: Obj) -> str | None:
    return (obj.get("metadata") or {}).get("uid")


def _rv(obj: Obj) -> str | None:
    return (obj.get("metadata") or {}).get("resourceVersion")


def _message(body: bytes) -> str:
    try:
        status = orjson.loads(body)
        return str(status.get("message") or status.get("reason") or body[:200])
    except (ValueError, AttributeError):
        return body[:200].decode(errors="replace")
