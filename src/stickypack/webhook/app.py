"""The webhook's HTTP service (ASGI, Starlette): a mutating admission webhook.

Routes:

``POST /mutate``
    An ``AdmissionReview`` (``admission.k8s.io/v1`` or ``v1beta1``) of a Pod being
    created. The answer is always ``allowed: true`` (the webhook never refuses a pod); when a
    route of the configuration matches, it carries a JSON Patch that sets the pod's
    ``schedulerName`` and the annotation ``stickypack.io/scheduler-route``
    (:func:`stickypack.core.routing.route_pod`); a dry run (``request.dryRun``) gets the
    same answer, counted as ``dry_run``. A review of anything else (another kind,
    another operation, a subresource) is allowed unchanged. A body that is not JSON, not an
    ``AdmissionReview`` with a ``request.uid``, not a Pod where one should be, or larger than
    ``max_request_bytes`` gets HTTP 400 with ``{"error": "<what is wrong, where>"}``; an
    unexpected failure gets HTTP 500 with the same shape. The API server then applies the
    webhook's ``failurePolicy`` (``Ignore`` as rendered: the pod is created unchanged).
    Nothing a client sends stops the service.
``GET /healthz``, ``GET /readyz``
    200 while the process serves (the webhook needs nothing from the cluster to be ready).
``GET /metrics``
    Prometheus text format:

    ================================================  ==========================================
    ``stickypack_webhook_request_duration_seconds``   histogram: time to answer a review
    ``stickypack_webhook_reviews_total``              by ``outcome`` (routed, unchanged,
                                                      dry_run: a pod create with
                                                      ``request.dryRun``, answered as any
                                                      other but creating no pod; ignored,
                                                      bad_request, too_large, error,
                                                      ...; not_found, method_not_allowed: a
                                                      request to another path or with another
                                                      method) and ``route`` (the matching
                                                      route's name, else empty)
    ``stickypack_webhook_certificate_reloads_total``  by ``outcome`` (loaded, failed): renewed
                                                      certificates reloaded
                                                      (:class:`~stickypack.extender.server.CertificateReloader`)
    ``stickypack_webhook_certificate_checks_total``   checks of the certificate and key files
                                                      for a change, one every
                                                      ``tls.reload_interval_s`` (none with
                                                      reloading off)
    ``stickypack_webhook_certificate_expiry_``        gauge: when the served certificate
    ``timestamp_seconds``                             expires (seconds since the epoch)
    ================================================  ==========================================
"""

from __future__ import annotations

import base64
import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

import orjson
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from stickypack.core.routing import SchedulerRoute, route_pod
from stickypack.extender.app import answer_json
from stickypack.extender.engine import BadRequest
from stickypack.extender.metrics import LATENCY_BUCKETS

log = logging.getLogger(__name__)

JSON = "application/json"
REVIEW_VERSIONS = ("admission.k8s.io/v1", "admission.k8s.io/v1beta1")


class WebhookMetrics:
    """The webhook's Prometheus metrics (one registry per app, so tests can run several)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.latency = Histogram(
            "stickypack_webhook_request_duration_seconds",
            "Time to answer an AdmissionReview.",
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.reviews = Counter(
            "stickypack_webhook_reviews",
            "AdmissionReviews by outcome and matching route.",
            ["outcome", "route"],
            registry=self.registry,
        )

        self.tls_loads = Counter(
            "stickypack_webhook_certificate_reloads",
            "Reloads of a changed TLS certificate and key, by outcome (loaded, failed).",
            ["outcome"],
            registry=self.registry,
        )
        # exported at 0 from the start: a failed reload is counted once (the same files
        # are not tried again), and increase() does not see a series that first appears at 1
        for outcome in ("loaded", "failed"):
            self.tls_loads.labels(outcome)
        self.tls_checks = Counter(
            "stickypack_webhook_certificate_checks",
            "Checks of the TLS certificate and key files for a change (every tls.reload_interval_s).",
            registry=self.registry,
        )
        self.tls_expiry = Gauge(
            "stickypack_webhook_certificate_expiry_timestamp_seconds",
            "When the served TLS certificate expires (seconds since the epoch).",
            registry=self.registry,
        )

    def tls_loaded(self, outcome: str | None, not_after: float | None) -> None:
        """Count a certificate reload (``outcome`` None: the first load, not counted) and
        set the expiry of the certificate now served."""
        if outcome is not None:
            self.tls_loads.labels(outcome).inc()
        if not_after is not None and outcome != "failed":
            self.tls_expiry.set(not_after)

    def observe(self, outcome: str, route: str, seconds: float) -> None:
        self.latency.observe(seconds)
        self.reviews.labels(outcome, route).inc()

    def render(self) -> tuple[bytes, str]:
        return generate_latest(self.registry), CONTENT_TYPE_LATEST


def _json(body: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(body), status_code=status, media_type=JSON)


def _error(message: str, status: int = 400) -> Response:
    return _json({"error": message}, status)


def _brief(value: object, limit: int = 80) -> str:
    """``repr(value)``, cut to ``limit`` characters: an error echoes what it got, not
    megabytes of it."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 3]}..."


def review(routes: Sequence[SchedulerRoute], body: Any) -> tuple[dict[str, Any], str, str]:
    """The ``AdmissionReview`` answering ``body`` (parsed JSON), the outcome for the
    metrics and the matching route's name (or ""). Raises :class:`BadRequest` naming what is
    wrong with ``body``."""
    if not isinstance(body, Mapping):
        raise BadRequest("the body is not a JSON object (an AdmissionReview)")
    version, kind = body.get("apiVersion"), body.get("kind")
    if kind != "AdmissionReview" or version not in REVIEW_VERSIONS:
        raise BadRequest(
            f"expected kind AdmissionReview, apiVersion {' or '.join(REVIEW_VERSIONS)}; "
            f"got kind {_brief(kind)}, apiVersion {_brief(version)}"
        )
    request = body.get("request")
    if not isinstance(request, Mapping):
        raise BadRequest("request: missing or not an object")
    uid = request.get("uid")
    if not isinstance(uid, str) or not uid:
        raise BadRequest("request.uid: missing or not a string")
    response: dict[str, Any] = {"uid": uid, "allowed": True}
    answer = {"apiVersion": version, "kind": "AdmissionReview", "response": response}
    target = request.get("kind")
    group_kind = (target.get("group"), target.get("kind")) if isinstance(target, Mapping) else None
    if group_kind != ("", "Pod") or request.get("operation") != "CREATE" or request.get("subResource"):
        return answer, "ignored", ""
    dry_run = request.get("dryRun")
    if dry_run is not None and not isinstance(dry_run, bool):
        raise BadRequest(f"request.dryRun: not a boolean ({_brief(dry_run)})")
    pod = request.get("object")
    if not isinstance(pod, Mapping):
        raise BadRequest("request.object: missing or not an object (a Pod)")
    namespace = request.get("namespace")
    if namespace is None:
        metadata = pod.get("metadata")
        namespace = metadata.get("namespace") if isinstance(metadata, Mapping) else None
    if not isinstance(namespace, str):
        raise BadRequest("request.namespace: missing or not a string")
    try:
        decision = route_pod(routes, pod, namespace)
    except ValueError as exc:
        raise BadRequest(f"request.object: {exc}") from None
    # a dry run (``dryRun=All``, ``kubectl apply --dry-run=server``) gets the same answer,
    # so the client sees what a create would do, but creates no pod: counted apart
    if decision.patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(orjson.dumps(decision.patch)).decode("ascii")
        log.debug(
            "%s/%s: %s (route %s)%s",
            namespace,
            _pod_name(pod),
            decision.reason,
            decision.route,
            " (dry run)" if dry_run else "",
        )
    if dry_run:
        return answer, "dry_run", decision.route or ""
    return answer, "routed" if decision.patch else "unchanged", decision.route or ""


def _pod_name(pod: Mapping[str, Any]) -> str:
    metadata = pod.get("metadata")
    if not isinstance(metadata, Mapping):
        return "?"
    return str(metadata.get("name") or metadata.get("generateName") or "?")


def make_app(
    routes: Sequence[SchedulerRoute],
    *,
    metrics: WebhookMetrics | None = None,
    max_request_bytes: int = 4 * 1024 * 1024,
    body_timeout_s: float = 10.0,
) -> Starlette:
    """The ASGI app serving ``routes`` (first match wins). A body not received within
    ``body_timeout_s`` seconds gets 408."""
    metrics = metrics or WebhookMetrics()
    routes = tuple(routes)

    async def mutate(request: Request) -> Response:
        start = time.perf_counter()
        reviewed: list[tuple[str, str]] = []  # (outcome, route) of a review answered

        def handle(body: Any) -> Response:
            answer, outcome, route = review(routes, body)
            reviewed.append((outcome, route))
            return _json(answer)

        response, outcome = await answer_json(
            request, handle, limit=max_request_bytes, timeout_s=body_timeout_s, what="mutate"
        )
        outcome, route = reviewed[0] if reviewed else (outcome, "")
        metrics.observe(outcome, route, time.perf_counter() - start)
        return response

    async def ok(request: Request) -> Response:
        return Response("ok", media_type="text/plain")

    async def metrics_endpoint(request: Request) -> Response:
        body, content_type = metrics.render()
        return Response(body, media_type=content_type)

    # counted (not timed): a webhook configuration with another path shows up here
    async def not_found(request: Request, exc: Exception) -> Response:
        metrics.reviews.labels("not_found", "").inc()
        return _error(f"{request.method} {request.url.path}: no such endpoint; use POST /mutate", 404)

    async def method_not_allowed(request: Request, exc: Exception) -> Response:
        metrics.reviews.labels("method_not_allowed", "").inc()
        return _error(f"{request.method} {request.url.path}: method not allowed", 405)

    app = Starlette(
        routes=[
            Route("/mutate", mutate, methods=["POST"]),
            Route("/healthz", ok, methods=["GET"]),
            Route("/readyz", ok, methods=["GET"]),
            Route("/metrics", metrics_endpoint, methods=["GET"]),
        ],
        exception_handlers={404: not_found, 405: method_not_allowed},
    )
    app.router.redirect_slashes = False
    return app
