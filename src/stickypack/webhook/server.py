"""Wiring: configuration -> routes -> ASGI app -> uvicorn (with TLS).

:func:`serve` runs the webhook until SIGINT/SIGTERM (``stickypack webhook``);
:class:`WebhookThread` serves it on a free port of 127.0.0.1 in a background thread (tests,
and anyone trying a configuration against a local API server).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from typing import Any

from stickypack.extender.server import loopback_socket, quiet_server, uvicorn_config
from stickypack.webhook.app import WebhookMetrics, make_app
from stickypack.webhook.config import WebhookConfig

log = logging.getLogger(__name__)


def build_app(config: WebhookConfig, metrics: WebhookMetrics | None = None) -> Any:
    return make_app(config.scheduler_routes(), metrics=metrics, max_request_bytes=config.max_request_bytes)


async def serve(config: WebhookConfig) -> None:
    """Serve the webhook until SIGINT or SIGTERM."""
    uv = uvicorn_config(
        build_app(config),
        config.listen.host,
        config.listen.port,
        config.log_level,
        ssl_certfile=config.tls.cert_file,
        ssl_keyfile=config.tls.key_file,
    )
    routes = ", ".join(f"{r.name} -> {r.scheduler_name}" for r in config.routes)
    log.info("webhook serving on %s:%d (routes: %s)", config.listen.host, config.listen.port, routes)
    await quiet_server(uv).serve()
    log.info("webhook stopped")


class WebhookThread:
    """The webhook of ``config`` served on a free port of 127.0.0.1 in a background thread,
    over TLS when ``config.tls`` names a certificate (``url`` is then ``https://...``)."""

    def __init__(self, config: WebhookConfig) -> None:
        self.config = config
        self.metrics = WebhookMetrics()
        self.port: int | None = None
        self.server: Any = None
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="stickypack-webhook", daemon=True)
        self._started = threading.Event()

    @property
    def url(self) -> str:
        scheme = "https" if self.config.tls.cert_file else "http"
        return f"{scheme}://127.0.0.1:{self.port}"

    def _run(self) -> None:
        import uvicorn

        asyncio.set_event_loop(self.loop)
        sock = loopback_socket()
        self.port = sock.getsockname()[1]
        uv = uvicorn_config(
            build_app(self.config, self.metrics),
            "127.0.0.1",
            self.port,
            ssl_certfile=self.config.tls.cert_file,
            ssl_keyfile=self.config.tls.key_file,
        )
        self.server = uvicorn.Server(uv)
        self.server.install_signal_handlers = lambda: None  # not the main thread

        async def main() -> None:
            serving = asyncio.ensure_future(self.server.serve(sockets=[sock]))
            while not self.server.started and not serving.done():
                await asyncio.sleep(0.01)
            self._started.set()
            await serving

        try:
            with contextlib.suppress(BaseException):
                self.loop.run_until_complete(main())
        finally:
            self._started.set()
            sock.close()

    def start(self) -> WebhookThread:
        self._thread.start()
        self._started.wait(30)
        if not self.server or not self.server.started:
            raise RuntimeError("the webhook's uvicorn did not start")
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.should_exit = True
        self._thread.join(30)

    def __enter__(self) -> WebhookThread:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
