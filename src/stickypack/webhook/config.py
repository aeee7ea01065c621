"""The webhook's YAML configuration, validated with pydantic.

Every key has a default, so an empty file (or no file) is a working configuration: it routes
the worker pods of dask-gateway (``app.kubernetes.io/component=dask-worker``) and of the
dask-kubernetes operator (``dask.org/component=worker``), in every namespace, to the
``stickypack`` packing scheduler. Errors name the file and the field: ``webhook.yaml:
routes.0.pod_selector: matchExpressions[0]: operator 'Gt' is not one of In, NotIn, Exists,
DoesNotExist``. See ``docs/configuration.md`` for the reference.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from stickypack.configfile import model_from_dict, model_from_file
from stickypack.core.labels import DNS_SUBDOMAIN, is_dns_label
from stickypack.core.routing import LabelSelector, RoutePlacement, SchedulerRoute, SelectorError
from stickypack.extender.config import ListenConfig
from stickypack.kube.cache import parse_selector


class ConfigError(ValueError):
    """A webhook configuration that is not valid; the message names file and field."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class RouteConfig(_Model):
    #: Names the route: in the pod's ``stickypack.io/scheduler-route`` annotation, the
    #: metrics, and the rendered webhook entry (a DNS label).
    name: str
    #: The scheduler the matching pods get (a profile of a running kube-scheduler).
    scheduler_name: str = "stickypack"
    #: The pods: ``key=value,...`` or a Kubernetes label selector (``matchLabels``,
    #: ``matchExpressions``). Must not be empty.
    pod_selector: Any
    #: Only pods created in these namespaces (empty: every namespace).
    namespaces: list[str] = Field(default_factory=list)
    #: Node affinity added to routed pods, in the Kubernetes shape
    #: (``requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms``, ANDed into the
    #: pod's own; ``preferredDuringSchedulingIgnoredDuringExecution``, appended). None: none.
    node_affinity: Any = None
    #: Tolerations added to routed pods (those a pod has already are not repeated).
    tolerations: Any = None

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not is_dns_label(value):
            raise ValueError(f"{value!r} is not a DNS label (lower-case letters, digits and '-')")
        return value

    @field_validator("scheduler_name")
    @classmethod
    def _scheduler(cls, value: str) -> str:
        if not DNS_SUBDOMAIN.fullmatch(value) or len(value) > 253:
            raise ValueError(f"{value!r} is not a valid scheduler name (a DNS subdomain)")
        return value

    @field_validator("pod_selector", mode="before")
    @classmethod
    def _selector(cls, value: Any) -> LabelSelector:
        if isinstance(value, LabelSelector):
            return value
        if isinstance(value, str):
            value = {"matchLabels": parse_selector(value)}
        try:
            selector = LabelSelector.from_dict(value)
        except SelectorError as exc:
            hint = " (write 'key=value,...' or {matchLabels: {...}, matchExpressions: [...]})"
            raise ValueError(f"{exc}{hint}") from None
        if selector.empty:
            raise ValueError("an empty selector would route every pod; name the pods' labels")
        return selector

    @field_validator("namespaces")
    @classmethod
    def _namespaces(cls, value: list[str]) -> list[str]:
        bad = [n for n in value if not is_dns_label(n)]
        if bad:
            raise ValueError(f"{', '.join(map(repr, bad))}: not a namespace name (a DNS label)")
        return value

    @field_validator("node_affinity")
    @classmethod
    def _node_affinity(cls, value: Any) -> Any:
        return _placement_part(node_affinity=value).to_dict().get("node_affinity")

    @field_validator("tolerations")
    @classmethod
    def _tolerations(cls, value: Any) -> Any:
        return _placement_part(tolerations=value).to_dict().get("tolerations")

    def route(self) -> SchedulerRoute:
        placement = RoutePlacement.from_dict(self.node_affinity, self.tolerations)
        return SchedulerRoute(
            self.name, self.scheduler_name, self.pod_selector, tuple(self.namespaces), placement
        )


def _placement_part(**part: Any) -> RoutePlacement:
    try:
        return RoutePlacement.from_dict(**part)
    except SelectorError as exc:
        # the error's path starts with the field's own name, which pydantic puts in front
        message = str(exc)
        for name in part:
            message = message.removeprefix(f"{name}: ").removeprefix(f"{name}")
        raise ValueError(message.lstrip(". ")) from None


class WebhookListenConfig(ListenConfig):
    """The extender's ``listen`` with the webhook's port: a ``listen`` that names only the
    host keeps 8443 (it once took the extender's 8888)."""

    port: int = Field(default=8443, ge=0, le=65535)


def _default_routes() -> list[RouteConfig]:
    return [
        RouteConfig(name="dask-gateway-workers", pod_selector="app.kubernetes.io/component=dask-worker"),
        RouteConfig(name="dask-kubernetes-workers", pod_selector="dask.org/component=worker"),
    ]


class TLSConfig(_Model):
    #: PEM certificate chain the webhook serves (the API server only calls webhooks over
    #: HTTPS and checks it against the configuration's ``caBundle``).
    cert_file: str | None = None
    #: Its PEM private key.
    key_file: str | None = None
    #: Seconds between checks of the two files; when they change (a renewed certificate:
    #: cert-manager, a Secret volume's update) the new pair is served without a restart.
    #: 0: never reload.
    reload_interval_s: float = Field(default=60.0, ge=0)

    @model_validator(mode="after")
    def _both(self) -> TLSConfig:
        if (self.cert_file is None) != (self.key_file is None):
            raise ValueError("give both cert_file and key_file, or neither (plain HTTP, for tests)")
        return self


class WebhookConfig(_Model):
    listen: WebhookListenConfig = Field(default_factory=WebhookListenConfig)
    tls: TLSConfig = Field(default_factory=TLSConfig)
    #: In order: a pod goes to the first route that matches it.
    routes: list[RouteConfig] = Field(default_factory=_default_routes, min_length=1)
    #: Requests larger than this get HTTP 400 (bytes; the API server's own limit on a
    #: request is 3 MiB).
    max_request_bytes: int = Field(default=4 * 1024 * 1024, ge=1024)
    log_level: Literal["debug", "info", "warning", "error"] = "info"

    @field_validator("routes")
    @classmethod
    def _unique(cls, routes: list[RouteConfig]) -> list[RouteConfig]:
        names = [r.name for r in routes]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"route name(s) {', '.join(twice)} given more than once")
        return routes

    def scheduler_routes(self) -> list[SchedulerRoute]:
        return [r.route() for r in self.routes]


def config_from_dict(raw: Any, source: str = "<config>") -> WebhookConfig:
    """Validate parsed YAML (``source`` names it in errors); raises :class:`ConfigError`."""
    return model_from_dict(WebhookConfig, raw, source, "webhook", ConfigError)


def load_config(path: str | Path | None) -> WebhookConfig:
    """Read and validate a configuration file (None: all defaults)."""
    return model_from_file(WebhookConfig, path, "webhook", ConfigError)
