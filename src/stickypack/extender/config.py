"""The extender's YAML configuration, validated with pydantic.

Every key has a default, so an empty file (or no file) is a working configuration. Errors
name the file and the field: ``extender.yaml: history.ttl_s: Input should be a valid
number``. See ``docs/operator-guide.md`` for the reference.
"""

from __future__ import annotations

import ipaddress
import os
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from stickypack.configfile import model_from_dict, model_from_file
from stickypack.core.explain import DEFAULT_GPU_LABELS
from stickypack.core.labels import DNS_SUBDOMAIN, LABEL_KEY, is_dns_label
from stickypack.kube.cache import DEFAULT_BUILD_SELECTOR, DEFAULT_BUILDER_SELECTOR, parse_selector


class ConfigError(ValueError):
    """An extender configuration that is not valid; the message names file and field."""


class _Model(BaseModel):
    # infinity passed every ``ge``/``gt`` bound: an infinite flush interval never saved the history
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


def _selector(value: Any) -> dict[str, str]:
    if value is None:
        return {}
    return parse_selector(value)


#: A host name (RFC 1123 labels), for ``listen.host``.
_HOSTNAME = re.compile(
    r"(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?"
)


class ListenConfig(_Model):
    host: str = "0.0.0.0"
    port: int = Field(default=8888, ge=0, le=65535)

    @field_validator("host")
    @classmethod
    def _host(cls, value: str) -> str:
        # "0.0.0.0:8888" or "http://0.0.0.0" passed --check and failed only at start-up
        if value == "" or _HOSTNAME.fullmatch(value):
            return value
        try:
            ipaddress.ip_address(value)
        except ValueError:
            raise ValueError(f"{value!r} is not an IP address or a host name (no port, no scheme)") from None
        return value


class PodsConfig(_Model):
    #: Pods the extender places (others get every node back unchanged and no scores).
    manage: dict[str, str] = Field(default_factory=lambda: dict(DEFAULT_BUILD_SELECTOR))
    #: Build pods (plus the ``binder-repo`` annotation); the end of those the extender also
    #: manages is recorded in the history (:meth:`recorded_builds`).
    build_selector: dict[str, str] = Field(default_factory=lambda: dict(DEFAULT_BUILD_SELECTOR))
    #: Pods of the builder DaemonSet; their nodes are the candidate build nodes. Empty: all nodes.
    builder_selector: dict[str, str] = Field(default_factory=lambda: dict(DEFAULT_BUILDER_SELECTOR))
    #: Record builds that ended in phase Failed too (their base layers are usually cached).
    record_failed: bool = True

    @field_validator("manage", "build_selector", "builder_selector", mode="before")
    @classmethod
    def _selectors(cls, value: Any) -> dict[str, str]:
        return _selector(value)

    def recorded_builds(self) -> dict[str, str] | None:
        """The selector of the build pods whose end this extender records: the build pods
        (``build_selector``) it manages (``manage``), both selectors at once. None when no
        pod can match both (a label key with a different value in each, as a user-pod
        extender's ``component=singleuser-server`` against ``component=binderhub-build``):
        the extender then records no build ends and writes nothing to the history, which it
        still reads. So of several extenders sharing a history, the one that places the
        builds is its one writer."""
        for key, value in self.manage.items():
            if self.build_selector.get(key, value) != value:
                return None
        return {**self.build_selector, **self.manage}


class HistoryConfig(_Model):
    #: configmap (default), node-annotations, or memory (lost on restart; tests only).
    store: Literal["configmap", "node-annotations", "memory"] = "configmap"
    #: Namespace of the ConfigMaps (default: $POD_NAMESPACE, else "default").
    namespace: str | None = None
    name: str = "stickypack-build-history"
    shards: int = Field(default=1, ge=1, le=64)
    ttl_s: float = Field(default=7 * 86400.0, gt=0)
    max_nodes_per_repo: int = Field(default=3, ge=1)
    max_repos: int = Field(default=20000, ge=1)
    max_bytes: int = Field(default=900_000, ge=1024, le=1_000_000)
    max_annotation_bytes: int = Field(default=64 * 1024, ge=1024, le=200 * 1024)
    flush_interval_s: float = Field(default=1.0, ge=0)

    @field_validator("namespace")
    @classmethod
    def _namespace(cls, value: str | None) -> str | None:
        if value is not None and not is_dns_label(value):
            raise ValueError(f"{value!r} is not a valid namespace name (a DNS label)")
        return value

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        # ConfigMaps are named <name>-<shard> (up to 64 shards): a DNS subdomain of <= 253
        if not DNS_SUBDOMAIN.fullmatch(value) or len(value) > 249:
            raise ValueError(f"{value!r} is not a valid ConfigMap name prefix (a DNS subdomain)")
        return value

    def resolved_namespace(self) -> str:
        return self.namespace or os.environ.get("POD_NAMESPACE") or "default"


class ClusterConfig(_Model):
    #: Path of a kubeconfig; default: $KUBECONFIG, else in-cluster.
    kubeconfig: str | None = None
    #: Full relist of nodes and pods every this many seconds (drift repair).
    resync_s: float = Field(default=900.0, gt=0)
    #: Server-side watch timeout; the watch is renewed after it.
    watch_timeout_s: int = Field(default=300, ge=1)
    #: How long a placement the extender told the scheduler about counts before the watch
    #: confirms it.
    assume_ttl_s: float = Field(default=30.0, ge=0)
    #: The cluster-autoscaler's --scale-down-utilization-threshold (0 to 1; at 0 only a node
    #: whose pods request nothing is underutilized, as in cluster-autoscaler 1.35+).
    utilization_threshold: float = Field(default=0.5, ge=0, le=1)
    #: Its --scale-down-gpu-utilization-threshold, for GPU nodes (``nvidia.com/gpu``,
    #: ``amd.com/gpu``... allocatable), which it weighs by their GPU requests alone.
    gpu_utilization_threshold: float = Field(default=0.5, ge=0, le=1)
    #: Node label keys by which the autoscaler's cloud provider knows a GPU node (GKE's and
    #: EKS's by default; add ``kubernetes.azure.com/accelerator`` on AKS): a node carrying
    #: one with no GPU allocatable yet is taken as unused, as the autoscaler does.
    gpu_labels: list[str] = Field(default_factory=lambda: list(DEFAULT_GPU_LABELS))
    #: Its --ignore-daemonsets-utilization and --ignore-mirror-pods-utilization: DaemonSet /
    #: mirror pods' requests left out of a node's utilization (and of its allocatable).
    ignore_daemonsets_utilization: bool = False
    ignore_mirror_pods_utilization: bool = False
    #: Node label keys whose values, joined by "/", name the autoscaler's node group of a
    #: node (empty: the first of GKE's, EKS's and AKS's pool labels the node carries).
    node_group_labels: list[str] = Field(default_factory=list)
    #: Each node group's minimum size (its name as ``node_group_labels`` make it): a node of a
    #: group at or under it is one the autoscaler never removes, so ScaleDownAware takes it
    #: as busy.
    node_group_min_sizes: dict[str, int] = Field(default_factory=dict)
    #: Its --enable-dynamic-resource-allocation: a node with node-local ResourceSlices is
    #: weighed by its most used DRA device pool (the extender then watches ResourceSlices
    #: and ResourceClaims: ``list`` and ``watch`` on them, ``resource.k8s.io``).
    dra: bool = False
    #: With ``dra``, while the DRA objects cannot be listed (``resource.k8s.io/v1`` not
    #: served, or no right to list them), try again every this many seconds: a right granted
    #: later, or an API server upgraded to serve them, is picked up without a restart.
    dra_retry_s: float = Field(default=60.0, gt=0)

    @field_validator("gpu_labels", "node_group_labels")
    @classmethod
    def _label_keys(cls, value: list[str]) -> list[str]:
        for key in value:
            if not LABEL_KEY.fullmatch(key):
                raise ValueError(f"{key!r} is not a label key")
        return list(dict.fromkeys(value))

    @field_validator("node_group_min_sizes")
    @classmethod
    def _min_sizes(cls, value: dict[str, int]) -> dict[str, int]:
        for name, size in value.items():
            if not name:
                raise ValueError("a node group's name must not be empty")
            if size < 0:
                raise ValueError(f"{name!r}: a minimum size must be >= 0, got {size}")
        return value


class ExtenderConfig(_Model):
    listen: ListenConfig = Field(default_factory=ListenConfig)
    #: A built-in policy name or the path of a policy YAML file.
    policy: str = "stickypack"
    #: Python files of plugins of your own that ``policy`` may name (docs/configuration.md).
    plugins: list[str] = Field(default_factory=list)
    #: The profile of that policy to run (null: the policy's first profile).
    profile: str | None = "stickypack-builds"
    #: Filter plugins of the profile the extender runs. kube-scheduler runs the standard
    #: ones itself; the extender adds what it does not know (autoscaler deletion taint).
    filters: list[str] = Field(default_factory=lambda: ["ScaleDownAware"])
    #: Score plugins of the profile the extender runs (kube-scheduler scores resources,
    #: taints and affinity): every other scorer of the ``stickypack-builds`` profile but
    #: BuildSpread, left out by default: its counts are per process (lost on restart,
    #: different in each replica) and, min-max normalized, one build can outweigh history.
    score: list[str] = Field(default_factory=lambda: ["BuildLocality", "NodeAge", "ScaleDownAware"])
    #: absolute: Score = round(10 * total / (100 * sum of weights)), so the extender's
    #: ``weight`` in the scheduler config (default: that sum) keeps the policy's balance;
    #: max: the best candidate gets 10.
    score_scale: Literal["absolute", "max"] = "absolute"

    @field_validator("filters", "score")
    @classmethod
    def _each_once(cls, names: list[str]) -> list[str]:
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:  # a score plugin named twice would count twice, a filter twice is a slip
            raise ValueError(f"{', '.join(twice)} given more than once")
        return names

    #: A request naming nodes the cache does not know: reject (HTTP 400, the scheduler then
    #: ignores the extender for that pod, as it is ignorable) or fail those nodes (filter:
    #: FailedAndUnresolvableNodes; prioritize: score 0).
    unknown_nodes: Literal["reject", "fail"] = "reject"
    #: Requests larger than this get HTTP 400 (bytes).
    max_request_bytes: int = Field(default=4 * 1024 * 1024, ge=1024)
    #: Run the whole profile to predict the node kube-scheduler binds, and count the pod
    #: there until the watch confirms (keeps the load bound exact under bursts).
    assume: bool = True
    #: Filter out, for a build pod, nodes already running as many builds as the bound
    #: ``max(min_load_cap, ceil(load_bound * mean builds))`` of the profile's BuildLocality
    #: allows (never all of them): kube-scheduler's packing cannot pile builds on one node.
    load_bound: bool = True
    pods: PodsConfig = Field(default_factory=PodsConfig)
    history: HistoryConfig = Field(default_factory=HistoryConfig)
    cluster: ClusterConfig = Field(default_factory=ClusterConfig)
    log_level: Literal["debug", "info", "warning", "error"] = "info"


def config_from_dict(raw: Any, source: str = "<config>") -> ExtenderConfig:
    """Validate parsed YAML (``source`` names it in errors); raises :class:`ConfigError`."""
    return model_from_dict(ExtenderConfig, raw, source, "extender", ConfigError)


def load_config(path: str | Path | None) -> ExtenderConfig:
    """Read and validate a configuration file (None: all defaults)."""
    return model_from_file(ExtenderConfig, path, "extender", ConfigError)
