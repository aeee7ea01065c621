"""``stickypack render ...``: configuration for a real cluster (kube-scheduler, the routing
policy or webhook registration, Dask): the arguments checked here, the YAML made by
:mod:`stickypack.render` and :mod:`stickypack.daskconfig`."""

from __future__ import annotations

import argparse
import reprlib
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from stickypack.cli.common import UsageError, _add_output, _write_output

if TYPE_CHECKING:
    from stickypack.core.policy import Policy
    from stickypack.core.routing import RoutePlacement


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``render`` and its subcommands."""
    render = sub.add_parser("render", help="write configuration for a real cluster")
    render_sub = render.add_subparsers(dest="what", required=True)
    _add_scheduler_config(render_sub)
    _add_scheduler_routing(render_sub)
    _add_webhook_config(render_sub)
    _add_dask(render_sub)
    render.set_defaults(handler=_render)


def _add_scheduler_config(render_sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``render scheduler-config``: the profiles, policy files, kubeconfig and extender."""
    sched = render_sub.add_parser(
        "scheduler-config", help="a KubeSchedulerConfiguration with stickypack's profiles"
    )
    sched.add_argument(
        "--profiles",
        default=None,
        help="comma-separated profiles to include: stickypack (the default without --policy-file), "
        "stickypack-builds, z2jh, default-scheduler",
    )
    sched.add_argument(
        "--policy-file",
        action="append",
        default=[],
        metavar="FILE",
        help="a policy of your own made of kube-scheduler's plugins: each of its profiles becomes a "
        "profile named as it (docs/configuration.md); repeatable",
    )
    sched.add_argument("--kubeconfig", default=None, help="clientConnection.kubeconfig to set")
    _add_output(sched)
    sched.add_argument(
        "--extender-url",
        default=None,
        metavar="URL",
        help="add the stickypack extender at URL (e.g. http://stickypack-extender:8888) and raise qps/burst",
    )
    sched.add_argument(
        "--extender-weight",
        type=int,
        default=None,
        metavar="N",
        help="the extender entry's weight (default: that of the default extender configuration; "
        "`stickypack extender --check` prints the one for yours)",
    )


def _add_scheduler_routing(render_sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``render scheduler-routing``: which pods go to which scheduler, and their placement."""
    routing = render_sub.add_parser(
        "scheduler-routing",
        help="a MutatingAdmissionPolicy that gives labelled pods a schedulerName and the webhook's route "
        "annotation (Kubernetes 1.36+)",
    )
    routing.add_argument(
        "--scheduler-name",
        default="stickypack-builds",
        help="the schedulerName to set (a rendered profile; default stickypack-builds)",
    )
    routing.add_argument(
        "--selector",
        default="component=binderhub-build",
        help="labels of the pods to route, key=value[,key=value...] (default: BinderHub build pods)",
    )
    routing.add_argument("--namespace", default=None, help="only pods of this namespace (default: all)")
    routing.add_argument(
        "--placement",
        default=None,
        metavar="FILE",
        help="YAML with node_affinity and/or tolerations to add to routed pods (as a webhook route's)",
    )
    _add_output(routing)


def _add_webhook_config(render_sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``render webhook-config``: the webhook's routes, where it is served, its CA."""
    hook_cfg = render_sub.add_parser(
        "webhook-config",
        help="the MutatingWebhookConfiguration that registers `stickypack webhook` (any Kubernetes)",
    )
    hook_cfg.add_argument(
        "--config", type=Path, default=None, metavar="FILE", help="webhook YAML configuration (its routes)"
    )
    where = hook_cfg.add_mutually_exclusive_group(required=True)
    where.add_argument("--url", default=None, help="the webhook's https://HOST[:PORT]/mutate")
    where.add_argument(
        "--service", default=None, metavar="NAMESPACE/NAME[:PORT]", help="the webhook's Service (port 443)"
    )
    hook_cfg.add_argument(
        "--ca-bundle", type=Path, default=None, metavar="FILE", help="PEM of the CA that signed its cert"
    )
    hook_cfg.add_argument(
        "--inject-ca-from",
        default=None,
        metavar="NAMESPACE/CERTIFICATE",
        help="let cert-manager fill in the CA bundle from this Certificate",
    )
    _add_output(hook_cfg)


def _add_dask(render_sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``render dask-gateway`` and ``render dask-kubernetes``, which share ``--scheduler-name``."""
    gateway = render_sub.add_parser(
        "dask-gateway",
        help="Helm values for the dask-gateway chart: node-aware retirement for every Dask cluster",
    )
    operator = render_sub.add_parser(
        "dask-kubernetes",
        help="a dask-kubernetes DaskCluster or DaskWorkerGroup set up for node-aware retirement",
    )
    operator.add_argument(
        "file", metavar="FILE", help="YAML of DaskCluster/DaskWorkerGroup documents, - for stdin"
    )
    operator.add_argument(
        "--http-api",
        action="store_true",
        help="also make each DaskCluster's scheduler serve distributed's HTTP API (adds "
        "distributed.http.scheduler.api to DASK_DISTRIBUTED__SCHEDULER__HTTP__ROUTES), which the "
        "operator retires workers through; anyone who reaches the dashboard port can then retire "
        "workers. A DaskWorkerGroup (no scheduler) is left as without it",
    )
    for dask_parser in (gateway, operator):
        dask_parser.add_argument(
            "--scheduler-name",
            default=None,
            help="also give worker pods this schedulerName (not needed with the routing webhook)",
        )
        _add_output(dask_parser)


def _render(args: argparse.Namespace, console: Console) -> int:  # console: unused (YAML is written as is)
    from stickypack.render import (
        EXTENDER_CLIENT_BURST,
        EXTENDER_CLIENT_QPS,
        EXTENDER_WEIGHT,
        extender_entry,
        scheduler_config_yaml,
    )

    if args.what == "scheduler-routing":
        return _write_output(args.output, _routing_yaml(args))
    if args.what == "webhook-config":
        return _write_output(args.output, _webhook_config_yaml(args))
    if args.what in ("dask-gateway", "dask-kubernetes"):
        return _write_output(args.output, _dask_yaml(args))
    if args.profiles is None:
        profiles = [] if args.policy_file else ["stickypack"]
    else:
        profiles = [p.strip() for p in args.profiles.split(",") if p.strip()]
    policies = _policy_files(args.policy_file)
    extra: dict[str, Any] = {}
    if args.extender_weight is not None and not args.extender_url:
        raise UsageError("--extender-weight needs --extender-url (the extender it weighs)")
    if args.extender_url:
        _check_url(args.extender_url)
        weight = EXTENDER_WEIGHT if args.extender_weight is None else args.extender_weight
        if not 1 <= weight <= 2**31 - 1:
            raise UsageError(f"--extender-weight must be a positive int32, got {weight}")
        extra = {
            "extender": extender_entry(args.extender_url, weight=weight),
            "qps": EXTENDER_CLIENT_QPS,
            "burst": EXTENDER_CLIENT_BURST,
        }
    try:
        text = scheduler_config_yaml(profiles, policies=policies, kubeconfig=args.kubeconfig, **extra)
    except (KeyError, ValueError) as exc:
        raise UsageError(str(exc).strip("'\"")) from None
    return _write_output(args.output, text)


def _policy_files(paths: list[str]) -> list[Policy]:
    """``--policy-file``: the policies, or a usage error naming the file and field."""
    from stickypack.core.policy import PolicyError
    from stickypack.policies import load_policy_file

    try:
        return [load_policy_file(path) for path in paths]
    except PolicyError as exc:
        raise UsageError(str(exc)) from None


def _check_url(url: str) -> None:
    """``--extender-url``: http://host[:port][/path], or a usage error saying what is wrong.

    kube-scheduler appends ``/filter`` and ``/prioritize`` to it and ignores a failing
    extender (``ignorable``), so a URL it cannot use would silently turn the extender off."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 -- raises ValueError for a port out of range or not a number
    except ValueError as exc:
        raise UsageError(f"--extender-url {url!r}: {exc}") from None
    if parts.scheme == "https":
        raise UsageError(
            f"--extender-url {url!r}: the extender serves plain HTTP (no TLS); use http://HOST[:PORT]"
        )
    if parts.scheme != "http" or not parts.hostname:
        raise UsageError(f"--extender-url must be http://HOST[:PORT], got {url!r}")
    if parts.query or parts.fragment or parts.username is not None or any(c.isspace() for c in url):
        raise UsageError(
            f"--extender-url {url!r}: no query, fragment, user or spaces (kube-scheduler appends /filter)"
        )


def _dask_yaml(args: argparse.Namespace) -> str:

    from stickypack.core.labels import DNS_SUBDOMAIN
    from stickypack.core.yamltext import YAMLTextError, dump_yaml_all, load_yaml_all
    from stickypack.daskconfig import DaskConfigError, dask_gateway_values_yaml, dask_kubernetes_spec
    from stickypack.textfile import TextFileError, read_text_file

    name = args.scheduler_name
    if name is not None and (not DNS_SUBDOMAIN.fullmatch(name) or len(name) > 253):
        raise UsageError(f"--scheduler-name {name!r} is not a valid scheduler name (a DNS subdomain)")
    if args.what == "dask-gateway":
        return dask_gateway_values_yaml(name)
    source = "<stdin>" if args.file == "-" else args.file
    try:
        text = sys.stdin.read() if args.file == "-" else read_text_file(Path(args.file))
        docs = load_yaml_all(text, source)
    except (TextFileError, YAMLTextError) as exc:
        raise UsageError(str(exc)) from None
    if not docs:
        raise UsageError(f"{source}: no documents (expected a DaskCluster or DaskWorkerGroup)")
    out = []
    for i, doc in enumerate(docs):
        try:
            out.append(dask_kubernetes_spec(doc, scheduler_name=name, http_api=args.http_api))
        except DaskConfigError as exc:
            raise UsageError(f"{source}: document {i + 1}: {exc}") from None
    return dump_yaml_all(out)


def _routing_yaml(args: argparse.Namespace) -> str:
    from stickypack.core.labels import DNS_SUBDOMAIN, is_dns_label
    from stickypack.kube.cache import parse_selector
    from stickypack.render import scheduler_routing_yaml

    if not DNS_SUBDOMAIN.fullmatch(args.scheduler_name) or len(args.scheduler_name) > 200:
        raise UsageError(f"--scheduler-name {args.scheduler_name!r} is not a valid scheduler name")
    if args.namespace is not None and not is_dns_label(args.namespace):
        raise UsageError(f"--namespace {args.namespace!r} is not a valid namespace name")
    try:
        selector = parse_selector(args.selector)
        if not selector:
            raise ValueError("a routing needs a label selector (it would catch every pod)")
    except ValueError as exc:
        raise UsageError(f"--selector: {exc}") from None
    placement = None if args.placement is None else _read_placement(args.placement)
    try:
        return scheduler_routing_yaml(args.scheduler_name, selector, args.namespace, placement)
    except ValueError as exc:  # a placement the policy cannot carry
        raise UsageError(f"{args.placement}: {exc}") from None


def _read_placement(path: str) -> RoutePlacement:
    """The placement in the YAML file ``path`` (``node_affinity`` and/or ``tolerations``, as
    a webhook route writes them), validated as a route's; :class:`UsageError` naming the
    file and what is wrong."""
    from stickypack.core.routing import RoutePlacement, SelectorError
    from stickypack.core.yamltext import YAMLTextError, load_yaml
    from stickypack.textfile import TextFileError, read_text_file

    try:
        raw = load_yaml(read_text_file(Path(path)), path)
    except (TextFileError, YAMLTextError) as exc:
        raise UsageError(str(exc)) from None
    keys = ("node_affinity", "tolerations")
    if not isinstance(raw, dict):
        raise UsageError(
            f"{path}: expected a mapping with node_affinity and/or tolerations, got {reprlib.repr(raw)}"
        )
    unknown = sorted(map(str, set(raw) - set(keys)))
    if unknown:
        raise UsageError(
            f"{path}: unknown key(s) {', '.join(unknown)} (a placement has {' and '.join(keys)})"
        )
    try:
        return RoutePlacement.from_dict(raw.get("node_affinity"), raw.get("tolerations"))
    except SelectorError as exc:
        raise UsageError(f"{path}: {exc}") from None


def _webhook_config_yaml(args: argparse.Namespace) -> str:
    """``render webhook-config``: the routes of ``--config``, then where the API server
    calls the webhook (``--url`` or ``--service``), then its CA (``--ca-bundle`` or
    ``--inject-ca-from``), each checked in that order (a :class:`UsageError` for the first
    that is wrong); with ``--service`` and no CA, a warning on standard error."""
    from stickypack.render import webhook_configuration_yaml
    from stickypack.webhook.config import ConfigError, load_config

    try:
        config = load_config(args.config)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    service = None
    if args.url is not None:
        _check_webhook_url(args.url)
    else:
        service = _webhook_service(args.service)
    ca = None if args.ca_bundle is None else _read_ca_bundle(args.ca_bundle)
    if args.inject_ca_from is not None:
        if args.ca_bundle is not None:
            raise UsageError(
                "give --ca-bundle or --inject-ca-from, not both (cert-manager would overwrite the bundle)"
            )
        _check_inject_ca_from(args.inject_ca_from)
    if service is not None and ca is None and args.inject_ca_from is None:
        Console(stderr=True).print(
            "stickypack render: warning: no --ca-bundle or --inject-ca-from: the API server will "
            "check the webhook's certificate against its system trust roots, which a Service's "
            "certificate rarely passes (then every pod is created unrouted)",
            highlight=False,
            soft_wrap=True,
        )
    return webhook_configuration_yaml(
        config.scheduler_routes(),
        url=args.url,
        service=service,
        ca_bundle=ca,
        inject_ca_from=args.inject_ca_from,
    )


def _check_webhook_url(url: str) -> None:
    """``--url``: https://HOST[:PORT]/PATH, with a path, no query, fragment or user; else a
    :class:`UsageError` saying what is wrong."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 -- raises ValueError for a port out of range or not a number
    except ValueError as exc:
        raise UsageError(f"--url {url!r}: {exc}") from None
    if parts.scheme != "https" or not parts.hostname or parts.query or parts.fragment or parts.username:
        raise UsageError(
            f"--url must be https://HOST[:PORT]/PATH (the API server calls webhooks over HTTPS "
            f"only; no query, fragment or user), got {url!r}"
        )
    if parts.path in ("", "/"):
        raise UsageError(
            f"--url needs the webhook's path, e.g. https://{parts.netloc}/mutate (the API server "
            f"would POST to /, which `stickypack webhook` answers 404), got {url!r}"
        )


def _webhook_service(spec: str) -> tuple[str, str, int]:
    """``--service NAMESPACE/NAME[:PORT]`` as (namespace, name, port), port 443 by default;
    a :class:`UsageError` for text not of that form (names that are DNS labels, a port of
    digits) or a port outside 1..65535."""
    from stickypack.core.labels import is_dns_label

    text, colon, port_text = spec.partition(":")
    namespace, slash, name = text.partition("/")
    if (
        not slash
        or not is_dns_label(namespace)
        or not is_dns_label(name)
        or (colon and not (port_text.isascii() and port_text.isdigit()))
    ):
        raise UsageError(f"--service must be NAMESPACE/NAME[:PORT], got {spec!r}")
    port = int(port_text) if colon else 443
    if not 1 <= port <= 65535:
        raise UsageError(f"--service {spec!r}: the port must be in 1..65535")
    return (namespace, name, port)


def _read_ca_bundle(path: Path) -> bytes:
    """``--ca-bundle``: the file's text as ASCII bytes (any other character a ``?``), which
    holds PEM certificates and no other PEM block; a :class:`UsageError` when it cannot be
    read, holds no PEM certificate, or holds another PEM block (such as a key, which must
    not be copied into a cluster-wide object)."""
    import re

    from stickypack.textfile import TextFileError, read_text_file

    try:
        ca = read_text_file(path).encode("ascii", "replace")
    except TextFileError as exc:
        raise UsageError(str(exc)) from None
    from cryptography import x509

    try:
        x509.load_pem_x509_certificates(ca)
    except ValueError as exc:
        raise UsageError(f"--ca-bundle {path}: not PEM certificates ({exc})") from None
    other = sorted({m for m in re.findall(rb"-----BEGIN ([^-]+)-----", ca) if m != b"CERTIFICATE"})
    if other:  # e.g. a combined cert-and-key file: the key must not reach the cluster object
        raise UsageError(
            f"--ca-bundle {path}: found a '{other[0].decode()}' PEM block; give the CA's "
            "certificate(s) alone (the bundle is copied into a cluster-wide object)"
        )
    return ca


def _check_inject_ca_from(spec: str) -> None:
    """``--inject-ca-from NAMESPACE/CERTIFICATE``: a namespace and a Certificate's name, else
    a :class:`UsageError`."""
    from stickypack.core.labels import DNS_SUBDOMAIN, is_dns_label

    namespace, slash, name = spec.partition("/")
    if not slash or not is_dns_label(namespace) or not DNS_SUBDOMAIN.fullmatch(name):
        raise UsageError(f"--inject-ca-from must be NAMESPACE/CERTIFICATE, got {spec!r}")
