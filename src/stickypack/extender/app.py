"""The extender's HTTP service (ASGI, Starlette).

Routes:

``POST /filter``, ``POST /prioritize``
    kube-scheduler's extender verbs (JSON, see :mod:`stickypack.extender.engine`), also
    under a path (``/PATH/filter``: a ``urlPrefix`` with a path). A body
    that is not JSON, not an ``ExtenderArgs``, names unknown nodes, or is larger than
    ``max_request_bytes`` gets, from prioritize, HTTP 400 with ``{"error": "<what is
    wrong>"}`` (an unexpected failure: HTTP 500, the same shape); from filter, HTTP 200 with
    an ``ExtenderFilterResult`` whose ``Error`` says it, which kube-scheduler logs (it reads
    no body of another status, so a 400 reached its log as "code 400" alone). Nothing a
    client sends stops the service.
``GET /healthz``
    200 while the process serves.
``GET /readyz``
    200 once the node and pod caches have synced and the history is loaded (with
    ``cluster.dra``, the ResourceSlices and ResourceClaims too, unless they cannot be
    listed), else 503 with what is missing.
``GET /metrics``
    Prometheus text format (see :mod:`stickypack.extender.metrics`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route

from stickypack.extender.engine import BadRequest, Decision, Extender
from stickypack.extender.metrics import Metrics

log = logging.getLogger(__name__)

JSON = "application/json"


def _json(body: Any, status: int = 200) -> Response:
    to_json = getattr(body, "to_json", None)
    text = to_json() if to_json is not None else orjson.dumps(body)
    return Response(text, status_code=status, media_type=JSON)


def _error(message: str, status: int = 400) -> Response:
    return _json({"error": message}, status)


def _filter_error(message: str, status: int = 400) -> Response:
    """A filter request that cannot be answered: an ``ExtenderFilterResult`` with ``Error``,
    HTTP 200 whatever went wrong (``status``), since kube-scheduler reads ``Error`` (and
    logs it, or fails the pod with it when the extender is not ignorable) but reads no
    body of another status."""
    result: dict[str, Any] = {
        "Nodes": None,
        "NodeNames": None,
        "FailedNodes": {},
        "FailedAndUnresolvableNodes": {},
    }
    return _json({**result, "Error": message})


class TooLarge(BadRequest):
    pass


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, refusing more than ``limit`` bytes (checked on Content-Length and
    while reading, so a lying or chunked client cannot make us buffer more)."""
    length = request.headers.get("content-length")
    if length is not None:
        try:
            declared = int(length)
        except ValueError:
            raise BadRequest("Content-Length is not a number") from None
        if declared > limit:
            raise TooLarge(f"request body of {declared} bytes exceeds the limit of {limit} bytes")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise TooLarge(f"request body exceeds the limit of {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


class BodyTimeout(BadRequest):
    """The request body did not arrive in time (HTTP 408)."""


async def read_json(request: Request, limit: int, timeout_s: float) -> Any:
    """The request's body parsed as JSON. Raises :class:`TooLarge` above ``limit`` bytes,
    :class:`BodyTimeout` when the body is not received within ``timeout_s`` seconds (a
    stalled client holds no request open), :class:`BadRequest` when it is not JSON."""
    try:
        async with asyncio.timeout(timeout_s):
            body = await read_body(request, limit)
    except TimeoutError:
        raise BodyTimeout(f"request body not received within {timeout_s:g} s") from None
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise BadRequest(f"request body is not valid JSON: {str(exc)[:200]}") from None


async def answer_json(
    request: Request,
    handle: Callable[[Any], Response],
    *,
    limit: int,
    timeout_s: float,
    what: str,
    error: Callable[[str, int], Response] = _error,
) -> tuple[Response, str]:
    """``handle(body)`` for the request's JSON body (:func:`read_json`), and the outcome for
    the metrics: ``ok``, or what went wrong, answered with ``error(message, status)``
    (default ``{"error": message}`` with that status): ``timeout`` (408), ``too_large``,
    ``bad_request``, ``disconnected`` (400), ``shutdown`` (503: the service stopped while
    the body was still arriving) or ``error`` (500, logged as ``what`` failing). Nothing a
    client sends escapes as an exception."""
    try:
        return handle(await read_json(request, limit, timeout_s)), "ok"
    except asyncio.CancelledError:
        # uvicorn cancels the requests still open when its graceful shutdown runs out (a body
        # not received within it): raised on, the cancellation reached uvicorn, which logged
        # it as an exception of the app, with a traceback, and answered a bare 500. Only the
        # body is awaited here (handle() does not wait), so the request is answered instead.
        task = asyncio.current_task()
        if task is not None:
            task.uncancel()
        stopping = "the service is stopping: the request body was not received before it stopped"
        return error(stopping, 503), "shutdown"
    except BodyTimeout as exc:
        return error(str(exc), 408), "timeout"
    except TooLarge as exc:
        return error(str(exc), 400), "too_large"
    except BadRequest as exc:
        return error(str(exc), 400), "bad_request"
    except ClientDisconnect:
        return error("client disconnected", 400), "disconnected"
    except Exception as exc:  # never let a request take the service down
        log.exception("%s failed", what)
        return error(f"internal error: {type(exc).__name__}: {exc}", 500), "error"


def make_app(
    extender: Extender,
    *,
    metrics: Metrics | None = None,
    ready: Callable[[], list[str]] = lambda: [],
    max_request_bytes: int = 4 * 1024 * 1024,
    body_timeout_s: float = 10.0,
) -> Starlette:
    """The ASGI app. ``ready()`` returns what is not ready yet (empty: ready). A body not
    received within ``body_timeout_s`` seconds gets 408, so a stalled client holds no
    request open (kube-scheduler sends its 25 KB in well under a millisecond)."""
    metrics = metrics or Metrics()
    verbs = {
        "filter": _verb_endpoint(
            "filter", extender.filter, _filter_error, metrics, max_request_bytes, body_timeout_s
        ),
        "prioritize": _verb_endpoint(
            "prioritize", extender.prioritize, _error, metrics, max_request_bytes, body_timeout_s
        ),
    }

    def refused(request: Request, outcome: str) -> None:
        """Count a request no verb answered (its path's verb, else ""): a scheduler
        configured with another verb or method shows up in the metrics."""
        last = request.url.path.rpartition("/")[2]
        metrics.count(last if last in verbs else "", outcome)

    async def not_allowed(request: Request) -> Response:
        refused(request, "method_not_allowed")
        return _error(f"{request.method} {request.url.path}: use POST with a JSON ExtenderArgs body", 405)

    routes = [
        # kube-scheduler posts to <urlPrefix>/<verb>, and a urlPrefix may have a path
        # (``render --extender-url http://HOST:PORT/PATH``): the verbs answer under any path
        route
        for path in ("", "/{prefix:path}")
        for name, endpoint in verbs.items()
        for route in (
            Route(f"{path}/{name}", endpoint, methods=["POST"]),
            Route(f"{path}/{name}", not_allowed, methods=["GET", "PUT", "DELETE", "PATCH"]),
        )
    ]
    routes += _probe_routes(metrics, ready)

    async def not_found(request: Request, exc: Exception) -> Response:
        refused(request, "not_found")
        where = f"{request.method} {request.url.path}"
        return _error(f"{where}: no such endpoint; use /filter or /prioritize", 404)

    async def method_not_allowed(request: Request, exc: Exception) -> Response:
        refused(request, "method_not_allowed")
        return _error(f"{request.method} {request.url.path}: method not allowed", 405)

    app = Starlette(routes=routes, exception_handlers={404: not_found, 405: method_not_allowed})
    app.router.redirect_slashes = False  # "/filter/" is a 404 with a message, not a 307 to follow
    return app


def _verb_endpoint(
    name: str,
    fn: Callable[[Any], tuple[object, Decision]],
    error: Callable[[str, int], Response],
    metrics: Metrics,
    limit: int,
    timeout_s: float,
) -> Callable[[Request], Awaitable[Response]]:
    """The endpoint of the extender verb ``name``: ``fn(args)`` on the request's JSON body
    (:func:`answer_json`: at most ``limit`` bytes, received within ``timeout_s`` seconds;
    a failure answered with ``error``), its answer as JSON; the decision, the outcome and
    the time taken counted in ``metrics``."""

    def handle(args: Any) -> Response:
        result, decision = fn(args)
        metrics.decision(decision)
        return _json(result)

    async def endpoint(request: Request) -> Response:
        start = time.perf_counter()
        response, outcome = await answer_json(
            request, handle, limit=limit, timeout_s=timeout_s, what=name, error=error
        )
        metrics.observe(name, outcome, time.perf_counter() - start)
        return response

    return endpoint


def _probe_routes(metrics: Metrics, ready: Callable[[], list[str]]) -> list[Route]:
    """``GET /healthz`` (200 while serving), ``/readyz`` (200 once ``ready()`` lists
    nothing, else 503 with what it lists) and ``/metrics``."""

    async def healthz(request: Request) -> Response:
        return Response("ok", media_type="text/plain")

    async def readyz(request: Request) -> Response:
        missing = ready()
        if missing:
            return Response("not ready: " + ", ".join(missing), status_code=503, media_type="text/plain")
        return Response("ok", media_type="text/plain")

    async def metrics_endpoint(request: Request) -> Response:
        body, content_type = metrics.render()
        return Response(body, media_type=content_type)

    return [
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
        Route("/metrics", metrics_endpoint, methods=["GET"]),
    ]
