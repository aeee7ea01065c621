"""Wiring: configuration -> routes -> ASGI app -> uvicorn (with TLS).

:func:`serve` runs the webhook until SIGINT/SIGTERM (``stickypack webhook``);
:class:`WebhookThread` serves it on a free port of 127.0.0.1 in a background thread (tests,
and anyone trying a configuration against a local API server).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from stickypack.extender.server import AppThread, quiet_server, start_certificate_reloader, uvicorn_config
from stickypack.webhook.app import WebhookMetrics, make_app
from stickypack.webhook.config import WebhookConfig

if TYPE_CHECKING:
    from starlette.applications import Starlette

log = logging.getLogger(__name__)


def build_app(config: WebhookConfig, metrics: WebhookMetrics | None = None) -> Starlette:
    return make_app(config.scheduler_routes(), metrics=metrics, max_request_bytes=config.max_request_bytes)


async def serve(config: WebhookConfig) -> None:
    """Serve the webhook until SIGINT or SIGTERM, reloading a renewed certificate every
    ``tls.reload_interval_s`` seconds (:class:`CertificateReloader`)."""
    metrics = WebhookMetrics()
    uv = uvicorn_config(
        build_app(config, metrics),
        config.listen.host,
        config.listen.port,
        config.log_level,
        ssl_certfile=config.tls.cert_file,
        ssl_keyfile=config.tls.key_file,
    )
    routes = ", ".join(f"{r.name} -> {r.scheduler_name}" for r in config.routes)
    log.info("webhook starting on %s:%d (routes: %s)", config.listen.host, config.listen.port, routes)
    tls = config.tls
    reloading = None
    if tls.cert_file and tls.key_file:
        reloading = start_certificate_reloader(
            uv,
            tls.cert_file,
            tls.key_file,
            interval_s=tls.reload_interval_s,
            on_load=metrics.tls_loaded,
            on_check=metrics.tls_checks.inc,
        )
    try:
        await quiet_server(uv).serve()
    finally:
        if reloading is not None:
            reloading.cancel()
    log.info("webhook stopped")


class WebhookThread(AppThread):
    """The webhook of ``config`` served on a free port of 127.0.0.1 in a background thread,
    over TLS when ``config.tls`` names a certificate (``url`` is then ``https://...``);
    ``metrics`` are its Prometheus metrics."""

    def __init__(self, config: WebhookConfig) -> None:
        self.config = config
        self.metrics = WebhookMetrics()
        app = build_app(config, self.metrics)
        super().__init__(
            app,
            ssl_certfile=config.tls.cert_file,
            ssl_keyfile=config.tls.key_file,
            tls_reload_s=config.tls.reload_interval_s or None,
            on_tls_load=self.metrics.tls_loaded,
            on_tls_check=self.metrics.tls_checks.inc,
        )
