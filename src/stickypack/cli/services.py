"""The long-running services: ``stickypack extender`` and ``stickypack webhook`` (and its
``--route``, a pod's route without a cluster)."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape

from stickypack.cli.common import UsageError, _load_extender_config, _read_pod_file

if TYPE_CHECKING:  # the extender's and the webhook's modules load only for their subcommands
    from stickypack.extender.config import ListenConfig
    from stickypack.webhook.config import WebhookConfig


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``extender`` and ``webhook``."""
    ext = sub.add_parser("extender", help="run the kube-scheduler extender")
    ext.add_argument("--config", type=Path, default=None, metavar="FILE", help="extender YAML configuration")
    ext.add_argument(
        "--kubeconfig",
        default=None,
        help="kubeconfig (default: $KUBECONFIG, else in-cluster, else ~/.kube/config)",
    )
    ext.add_argument("--host", default=None, help="listen address (overrides listen.host)")
    ext.add_argument("--port", type=int, default=None, help="listen port (overrides listen.port)")
    ext.add_argument("--check", action="store_true", help="validate the configuration and exit")
    ext.set_defaults(handler=_extender)

    hook = sub.add_parser("webhook", help="run the admission webhook giving labelled pods a schedulerName")
    hook.add_argument("--config", type=Path, default=None, metavar="FILE", help="webhook YAML configuration")
    hook.add_argument("--host", default=None, help="listen address (overrides listen.host)")
    hook.add_argument("--port", type=int, default=None, help="listen port (overrides listen.port)")
    hook.add_argument("--tls-cert", default=None, metavar="FILE", help="PEM certificate (tls.cert_file)")
    hook.add_argument("--tls-key", default=None, metavar="FILE", help="PEM private key (tls.key_file)")
    hook.add_argument("--check", action="store_true", help="validate the configuration and exit")
    hook.add_argument(
        "--route",
        type=Path,
        default=None,
        metavar="POD",
        help="print the route a Pod (YAML or JSON file) would take and the patch, then exit",
    )
    hook.add_argument(
        "--namespace", default=None, help="with --route: the pod's namespace (default: its own, else default)"
    )
    hook.set_defaults(handler=_webhook)


def _extender(args: argparse.Namespace, console: Console) -> int:
    from stickypack.core.policy import PolicyError
    from stickypack.extender.server import ExtenderService, serve

    config = _load_extender_config(args)
    _listen_overrides(args, config.listen)
    try:
        service = ExtenderService(config)  # loads the policy and checks the plugin names
    except PolicyError as exc:
        where = f"{args.config}: " if args.config and not str(exc).startswith(str(args.config)) else ""
        raise UsageError(f"{where}{exc}") from None
    if args.check:
        weight = service.extender.weight
        console.print(
            f"configuration ok; extender weight {weight} (the sum of its score plugins' weights: "
            f"render scheduler-config --extender-weight {weight}); build history: {service.history_role()}"
        )
        return 0
    return _run_service("extender", serve(config), config.listen.host, config.listen.port, config.log_level)


def _listen_overrides(args: argparse.Namespace, listen: ListenConfig) -> None:
    """``--host`` and ``--port`` into a service's ``listen`` section, checked."""
    if args.host is not None:
        from pydantic import ValidationError

        from stickypack.extender.config import ListenConfig

        try:
            ListenConfig(host=args.host)
        except ValidationError as exc:
            raise UsageError(f"--host: {exc.errors()[0]['msg']}") from None
        listen.host = args.host
    if args.port is not None:
        if not 0 <= args.port <= 65535:
            raise UsageError(f"--port must be in 0..65535, got {args.port}")
        listen.port = args.port


def _run_service(name: str, main: Coroutine[Any, Any, None], host: str, port: int, log_level: str) -> int:
    """Run a service's coroutine until it stops; a failure to start is one line, status 1
    (2 for a kubeconfig that cannot be used). An API server that cannot be reached is not
    a failure to start: the extender serves, not ready, and its watches retry."""
    import asyncio
    import logging

    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        import uvloop  # a faster event loop when installed (it is a dependency on Linux)

        run: Callable[[Coroutine[Any, Any, None]], None] = uvloop.run
    except ImportError:
        run = asyncio.run
    from stickypack.kube.client import KubeconfigError

    try:
        run(main)
    except KubeconfigError as exc:  # a kubeconfig that cannot be used: bad input, status 2
        raise UsageError(str(exc)) from None
    except SystemExit as exc:  # uvicorn exits with status 3 when it cannot listen
        if exc.code in (0, None):
            return 0
        Console(stderr=True).print(
            f"[red]stickypack {name}: error:[/] cannot serve on {escape(host)}:{port} "
            "(the log line above says why)",
            highlight=False,
            soft_wrap=True,
        )
        return 1
    except Exception as exc:  # a start-up failure (kubeconfig, bad address, certificate): one line
        Console(stderr=True).print(
            f"[red]stickypack {name}: error:[/] {type(exc).__name__}: {escape(str(exc))}",
            highlight=False,
            soft_wrap=True,
        )
        return 1
    return 0


def _route_one(config: WebhookConfig, path: Path, namespace: str | None, console: Console) -> int:
    """``webhook --route``: the route a pod would take and the patch, without a cluster."""
    import yaml

    from stickypack.core.routing import route_pod

    pod = _read_pod_file(path)
    metadata = pod.get("metadata")
    if namespace is None:
        namespace = metadata.get("namespace") if isinstance(metadata, dict) else None
        namespace = namespace if isinstance(namespace, str) and namespace else "default"
    try:
        decision = route_pod(config.scheduler_routes(), pod, namespace)
    except ValueError as exc:
        raise UsageError(f"{path}: {exc}") from None
    report = {
        "namespace": namespace,
        "route": decision.route,
        "reason": decision.reason,
        "patch": decision.patch,
    }
    console.print(
        yaml.safe_dump(report, sort_keys=False), end="", highlight=False, markup=False, soft_wrap=True
    )
    return 0


def _webhook(args: argparse.Namespace, console: Console) -> int:
    import ssl

    from stickypack.webhook.config import ConfigError, load_config
    from stickypack.webhook.server import serve

    try:
        config = load_config(args.config)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    if args.namespace is not None and args.route is None:
        raise UsageError("--namespace is for --route")
    if args.route is not None:
        return _route_one(config, args.route, args.namespace, console)
    _listen_overrides(args, config.listen)
    if (args.tls_cert is None) != (args.tls_key is None):
        raise UsageError("give both --tls-cert and --tls-key, or neither")
    if args.tls_cert is not None:
        config.tls.cert_file, config.tls.key_file = args.tls_cert, args.tls_key
    if config.tls.cert_file is not None and config.tls.key_file is not None:
        try:  # a bad certificate (or an empty path) is found now, not when the service starts
            # an encrypted key would make OpenSSL prompt for its password on the terminal
            ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(
                config.tls.cert_file, config.tls.key_file, password=lambda: b""
            )
        except (OSError, ssl.SSLError) as exc:
            try:
                encrypted = b"ENCRYPTED" in Path(config.tls.key_file).read_bytes()
            except OSError:
                encrypted = False
            hint = " (the key is encrypted: give it unencrypted)" if encrypted else ""
            raise UsageError(
                f"TLS certificate {config.tls.cert_file} / key {config.tls.key_file}: {exc}{hint}"
            ) from None
    routes = ", ".join(f"{r.name} -> {r.scheduler_name}" for r in config.routes)
    if args.check:
        console.print(f"configuration ok; routes: {escape(routes)}", highlight=False)
        return 0
    if not config.tls.cert_file:
        Console(stderr=True).print(
            "stickypack webhook: warning: no TLS certificate; the API server calls webhooks over "
            "HTTPS only (serve plain HTTP behind a TLS-terminating proxy, or for tests)",
            highlight=False,
            soft_wrap=True,
        )
    return _run_service("webhook", serve(config), config.listen.host, config.listen.port, config.log_level)
