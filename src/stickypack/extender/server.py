"""Wiring: API client -> informers -> ClusterCache + HistoryRecorder -> Extender -> uvicorn.

:class:`ExtenderService` owns everything that runs on the event loop; :func:`serve` runs it
with a uvicorn server until stopped (``stickypack extender``); :class:`ServiceThread` runs
one in a background thread on a free loopback port (tests and benchmarks).
:func:`api_rights` lists the RBAC rights its API calls need with a configuration.

The webhook (:mod:`stickypack.webhook.server`) serves through the same pieces:
:func:`uvicorn_config`, :func:`quiet_server`, :func:`start_certificate_reloader`
(:class:`CertificateReloader`: a renewed certificate loaded without a restart) and
:class:`AppThread`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import logging
import reprlib
import socket
import ssl
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Generator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self, TypeVar

from stickypack.core.policy import Policy
from stickypack.extender.app import make_app
from stickypack.extender.config import ExtenderConfig
from stickypack.extender.engine import Extender, select_profile
from stickypack.extender.metrics import Metrics
from stickypack.kube.cache import ClusterCache, selector_text, slim_node, slim_pod
from stickypack.kube.client import ApiRight, describe_error, rule_rights
from stickypack.kube.dra import slim_resource_claim, slim_resource_slice
from stickypack.kube.history import (
    STORE_LABEL,
    ConfigMapHistoryStore,
    HistoryRecorder,
    HistoryStore,
    Limits,
    MemoryHistoryStore,
    NodeAnnotationHistoryStore,
)
from stickypack.kube.informer import Handler, Informer, Obj, WatchError

if TYPE_CHECKING:
    import uvicorn
    from kubernetes_asyncio.client import ApiClient, Configuration
    from prometheus_client.metrics_core import Metric
    from starlette.types import ASGIApp

log = logging.getLogger(__name__)

T = TypeVar("T")
#: ``on_load(outcome, not_after)``: a certificate pair loaded (``outcome`` ``"loaded"``) or
#: not (``"failed"``), or the first pair served (None, :func:`start_certificate_reloader`
#: only); ``not_after``: its certificate's expiry, seconds since the epoch, None where it
#: could not be read. A :class:`CertificateReloader` itself never passes None.
TlsLoadHook = Callable[[str | None, float | None], None]
#: ``on_check()``: a :class:`CertificateReloader` made a check (files changed or not).
TlsCheckHook = Callable[[], None]


async def _list_status(list_call: Callable[..., Awaitable[Any]]) -> int:
    """The HTTP status of a one-item list (``list_call``: a kubernetes_asyncio list method)."""
    resp = await list_call(limit=1, _preload_content=False, _request_timeout=30)
    try:
        await resp.read()
        return int(resp.status)
    finally:
        resp.release()


#: Pods the cache needs: bound ones. Terminated pods are kept in the selection (kube-scheduler
#: leaves them out): a pod leaving a watch's field selection is reported as a deletion that
#: carries its state from *before* the change, so a build pod ending Failed or Succeeded
#: would be seen as merely deleted (``record_failed`` ignored). The cache stops counting a
#: pod once its phase is terminal.
POD_FIELD_SELECTOR = "spec.nodeName!="
#: The kinds the extender watches with ``cluster.dra`` (its informers' names).
DRA_KINDS = ("resourceslices", "resourceclaims")
#: The answers to a list or watch of them that mean "not here" (not "not now"), and why.
REFUSED = {401: "not authenticated", 403: "no right to list them", 404: "not served"}


def load_policy(name_or_path: str, plugin_files: Sequence[str] = ()) -> Policy:
    """A built-in policy by name, or a policy file that may name the plugins of
    ``plugin_files``; ``PolicyError`` in one line otherwise."""
    from stickypack.plugin_files import load_plugin_files
    from stickypack.policies import load_policy as load_named_policy

    return load_named_policy(name_or_path, load_plugin_files(plugin_files))


def make_store(config: ExtenderConfig, api_client: ApiClient) -> HistoryStore:
    h = config.history
    if h.store == "memory":
        return MemoryHistoryStore()
    if h.store == "node-annotations":
        return NodeAnnotationHistoryStore(api_client, max_annotation_bytes=h.max_annotation_bytes)
    return ConfigMapHistoryStore(api_client, h.resolved_namespace(), h.name, h.shards)


#: What an informer asks of the API server: a list, then watches.
LIST_WATCH = ("list", "watch")


def api_rights(config: ExtenderConfig) -> frozenset[ApiRight]:
    """Every RBAC right the extender's API calls need with ``config``, and no other: its
    informers (:meth:`ExtenderService.start`) list and watch nodes and pods (all namespaces;
    with ``cluster.dra`` also ResourceSlices and ResourceClaims, :meth:`~ExtenderService._start_dra`;
    with the ConfigMap store its ConfigMaps, in their namespace), and its history store
    (:func:`make_store`) makes its own calls (``api_rights`` of each store class; an
    extender that records no build ends, :meth:`PodsConfig.recorded_builds`, only reads
    it). The Helm
    chart's roles grant exactly these, the operator guide's RBAC table lists them, and
    tests/test_helm_chart.py checks both against this and this against the API server's
    audit log of a running extender."""
    h = config.history
    writes = config.pods.recorded_builds() is not None
    rights = rule_rights("", ["nodes", "pods"], LIST_WATCH)
    if config.cluster.dra:
        rights |= rule_rights("resource.k8s.io", DRA_KINDS, LIST_WATCH)
    if h.store == "configmap":
        namespace = h.resolved_namespace()
        rights |= rule_rights("", ["configmaps"], LIST_WATCH, namespace)
        rights |= ConfigMapHistoryStore.api_rights(namespace, writes)
    elif h.store == "node-annotations":
        rights |= NodeAnnotationHistoryStore.api_rights(writes)
    return rights


def history_limits(config: ExtenderConfig) -> Limits:
    h = config.history
    return Limits(h.ttl_s, h.max_nodes_per_repo, h.max_repos, h.max_bytes)


#: How a repo is shown in a log line: quoted, escaped (no newline or NUL gets through) and
#: cut at 200 characters.
_REPO_IN_LOG = reprlib.Repr()
_REPO_IN_LOG.maxstring = 200


class ExtenderService:
    """The extender and what feeds it. ``await start()``, serve :attr:`app`, ``await stop()``."""

    def __init__(self, config: ExtenderConfig, api_client: ApiClient | None = None) -> None:
        self.config = config
        self.api_client = api_client
        self._own_client = api_client is None
        policy = load_policy(config.policy, config.plugins)
        self.profile = select_profile(policy, config.profile)
        self.metrics = Metrics()
        self.recorder: HistoryRecorder | None = None
        #: The build pods whose ends this extender records: those it manages; None: none
        #: (it only reads the history, which another extender writes).
        self.recorded_builds = config.pods.recorded_builds()
        self.cache = ClusterCache(
            build_selector=self.recorded_builds or {},
            builder_selector=config.pods.builder_selector,
            on_build_end=self._on_build_end if self.recorded_builds is not None else None,
            on_node_deleted=self._on_node_deleted,
            on_node_added=self._on_node_added,
            record_failed=config.pods.record_failed,
            assume_ttl_s=config.cluster.assume_ttl_s,
            dra=config.cluster.dra,
        )
        self.extender = Extender(
            self.cache,
            self.profile,
            filter_names=config.filters,
            score_names=config.score,
            manage=config.pods.manage,
            history=lambda: self.recorder.history if self.recorder is not None else None,
            score_scale=config.score_scale,
            unknown_nodes=config.unknown_nodes,
            assume=config.assume,
            load_bound=config.load_bound,
            utilization_threshold=config.cluster.utilization_threshold,
            gpu_utilization_threshold=config.cluster.gpu_utilization_threshold,
            gpu_labels=config.cluster.gpu_labels,
            ignore_daemonsets_utilization=config.cluster.ignore_daemonsets_utilization,
            ignore_mirror_pods_utilization=config.cluster.ignore_mirror_pods_utilization,
            node_group_labels=config.cluster.node_group_labels,
            node_group_min_sizes=config.cluster.node_group_min_sizes,
            dra=self.dra_active if config.cluster.dra else False,
        )
        self.informers: dict[str, Informer] = {}
        #: With ``cluster.dra``: None until the DRA objects were first tried, then whether
        #: they could be listed (False: not served, or no right; the extender runs without
        #: DRA and tries again every ``cluster.dra_retry_s``, True once they could be).
        self.dra_listed: bool | None = None
        #: With ``cluster.dra``: the lists of the DRA objects refused (401, 403, 404) by kind,
        #: at start and at each retry every ``cluster.dra_retry_s`` (said in the log once;
        #: ``stickypack_extender_dra_list_refusals_total``).
        self.dra_refusals: dict[str, int] = dict.fromkeys(DRA_KINDS, 0)
        #: The DRA informers started after a refusal: not waited for by ``/readyz`` (the
        #: service was ready already, and is not taken out of its Service for them).
        self._dra_late = False
        self.app = make_app(
            self.extender,
            metrics=self.metrics,
            ready=self.not_ready,
            max_request_bytes=config.max_request_bytes,
        )
        self._started = False

    def history_role(self) -> str:
        """What this extender does with the build history, in words (the log, ``--check``)."""
        if self.recorded_builds is None:
            return (
                f"read only (pods.manage {selector_text(self.config.pods.manage)} matches no build "
                f"pod of pods.build_selector {selector_text(self.config.pods.build_selector)}: "
                "another extender records the build ends)"
            )
        labels = selector_text(self.recorded_builds) or "any labels"
        return f"records the ends of the build pods it manages ({labels}, annotation binder-repo)"

    # ---- callbacks from the cache --------------------------------------------------------

    def _on_build_end(self, repo: str, node: str, when: float, phase: str) -> None:
        if self.recorder is not None:
            self.recorder.record(repo, node, when)
            log.info("build of %s ended (%s) on %s: recorded", _REPO_IN_LOG.repr(repo), phase, node)

    def _on_node_deleted(self, node: str, when: float) -> None:
        if self.recorder is not None:
            self.recorder.node_gone(node)
            self.recorder.forget_node(node, when)

    def _on_node_added(self, node: str, created: float | None) -> None:
        # a node deleted and created again under its name while no extender watched: the
        # history of the older one is forgotten
        if self.recorder is not None:
            self.recorder.node_seen(node, created)

    def _on_history_configmap(
        self, kind: str, obj: dict[str, Any], old: Any = None, synthetic: bool = False
    ) -> None:
        assert self.recorder is not None and isinstance(self.recorder.store, ConfigMapHistoryStore)
        part = self.recorder.store.part_of(str((obj.get("metadata") or {}).get("name")))
        if part is None:  # another history's, or left from more shards
            return
        if kind == "DELETED":
            self.recorder.on_deleted(part)
            return
        doc, version = ConfigMapHistoryStore.parse_configmap(obj)
        self.recorder.on_stored(part, doc, version)

    def _on_node_annotation(
        self, kind: str, obj: dict[str, Any], old: Any = None, synthetic: bool = False
    ) -> None:
        assert self.recorder is not None and isinstance(self.recorder.store, NodeAnnotationHistoryStore)
        store = self.recorder.store
        meta = obj.get("metadata") or {}
        if kind == "DELETED":
            self.recorder.on_part_gone(str(meta.get("name")))
            return
        keys = (store.annotation, store.forgotten_annotation)
        now = meta.get("annotations") or {}
        before = ((old or {}).get("metadata") or {}).get("annotations") or {}
        if old is not None and all(before.get(k) == now.get(k) for k in keys):
            return
        doc, version = store.parse_node(obj)
        self.recorder.on_stored(str(meta.get("name")), doc, version)

    # ---- lifecycle -------------------------------------------------------------------------

    def not_ready(self) -> list[str]:
        missing = [
            f"{k} cache not synced"
            for k, inf in self.informers.items()
            if not inf.synced.is_set() and not (self._dra_late and k in DRA_KINDS)
        ]
        if not self._started:
            missing.append("not started")
        if self.recorder is not None and not self.recorder.loaded.is_set():
            missing.append("build history not loaded")
        if self.config.cluster.dra and self.dra_listed is None:
            missing.append("DRA objects not listed yet")
        return missing

    async def start(self) -> None:
        from kubernetes_asyncio import client

        from stickypack.kube.client import make_api_client

        cfg = self.config
        if self.api_client is None:
            self.api_client = await make_api_client(cfg.cluster.kubeconfig)
        core = client.CoreV1Api(self.api_client)
        common: dict[str, Any] = {
            "resync_s": cfg.cluster.resync_s,
            "watch_timeout_s": cfg.cluster.watch_timeout_s,
        }
        store = make_store(cfg, self.api_client)
        self.recorder = HistoryRecorder(
            store,
            history_limits(cfg),
            flush_interval_s=cfg.history.flush_interval_s,
            read_only=self.recorded_builds is None,
        )
        log.info("build history: %s", self.history_role())
        nodes = Informer("nodes", core.list_node, self.cache.node_event, transform=slim_node, **common)
        pods = Informer(
            "pods",
            core.list_pod_for_all_namespaces,
            self.cache.pod_event,
            field_selector=POD_FIELD_SELECTOR,
            transform=slim_pod,
            **common,
        )
        self.informers = {"nodes": nodes, "pods": pods}
        if isinstance(store, ConfigMapHistoryStore):
            self.informers["history"] = Informer(
                "history",
                functools.partial(core.list_namespaced_config_map, store.namespace),
                self._on_history_configmap,
                label_selector=selector_text({STORE_LABEL[0]: STORE_LABEL[1]}),
                **common,
            )
        elif isinstance(store, NodeAnnotationHistoryStore):
            nodes.add_handler(self._on_node_annotation)
        self.metrics.watch_informers(self.informers)
        self.metrics.add_source(self._gauges)
        self._load_task = asyncio.create_task(self._load_history())
        for inf in self.informers.values():
            inf.start()
        if cfg.cluster.dra:
            self._dra_task: asyncio.Task[None] = asyncio.create_task(self._start_dra(common))
        self.recorder.start()
        self._started = True
        self._freeze_task = asyncio.create_task(self._freeze_after_sync())

    async def _start_dra(self, common: dict[str, Any]) -> None:
        """Watch ResourceSlices and ResourceClaims into the cache's DRA tracker, once one
        list of each shows they can be listed (retried with backoff while the API server
        cannot be reached). Where they cannot (``resource.k8s.io/v1`` not served: 404; no
        right: 401, 403), say so once and run without DRA, as without ``cluster.dra``,
        trying again every ``cluster.dra_retry_s`` (a right granted later is picked up
        without a restart, and said once)."""
        from kubernetes_asyncio import client

        tracker = self.cache.dra
        assert tracker is not None
        resource = client.ResourceV1Api(self.api_client)
        calls: dict[str, tuple[Callable[..., Awaitable[Any]], Handler, Callable[[Obj], Obj]]] = {
            "resourceslices": (resource.list_resource_slice, tracker.slice_event, slim_resource_slice),
            "resourceclaims": (
                resource.list_resource_claim_for_all_namespaces,
                tracker.claim_event,
                slim_resource_claim,
            ),
        }
        delay = 0.2
        refused: tuple[str, int] | None = None  # the last refusal said, not said again
        while True:
            try:
                for kind, (list_call, _, _) in calls.items():
                    status = await _list_status(list_call)
                    if status in REFUSED:
                        if refused != (kind, status):
                            log.warning(
                                "cluster.dra: %s cannot be listed (HTTP %d: %s); running without DRA "
                                "(nodes weighed by cpu and memory), trying again every %g s",
                                kind, status, REFUSED[status], self.config.cluster.dra_retry_s,
                            )  # fmt: skip
                        refused = (kind, status)
                        self.dra_refusals[kind] += 1  # counted once said, or not said again
                        self.dra_listed = False
                        delay = 0.2  # the next unreachable spell backs off from the start
                        break
                    if status != 200:
                        raise WatchError(status, f"listing {kind}")
                else:
                    break
                await asyncio.sleep(self.config.cluster.dra_retry_s)
                continue
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("cluster.dra: cannot list the DRA objects (%s); retrying in %.1f s",
                            describe_error(exc), delay)  # fmt: skip
                await asyncio.sleep(delay)
                delay = min(delay * 2, 30.0)
        if refused is not None:
            self._dra_late = True
            log.warning("cluster.dra: the DRA objects can be listed now; nodes are weighed by their "
                        "DRA devices once their watches have read them")  # fmt: skip
        try:
            for kind, (list_call, handler, transform) in calls.items():
                informer = Informer(kind, list_call, handler, transform=transform, **common)
                self.informers[kind] = informer
                informer.start()
        except Exception:  # unforeseen: run without DRA rather than never become ready
            log.exception("cluster.dra: the DRA watches could not start; running without DRA")
            self.dra_listed = False
            return
        self.dra_listed = True

    def dra_active(self) -> bool:
        """Whether nodes are weighed by their DRA devices now: ``cluster.dra``, the extender
        may list the objects, its ResourceSlice and ResourceClaim informers have filled the
        readings once (before that, a node's devices are not known yet), and neither is
        being refused since (a right taken away, ``resource.k8s.io/v1`` no longer served:
        the readings would only grow stale; weighed by their devices again once a list
        answers). Asked by the extender at each decision."""
        if not (self.config.cluster.dra and self.dra_listed):
            return False
        informers = [self.informers.get(kind) for kind in DRA_KINDS]
        return all(
            inf is not None and inf.synced.is_set() and inf.stats.refused_status not in REFUSED
            for inf in informers
        )

    async def _load_history(self) -> None:
        """Read the stored history, retrying with backoff (the service serves, not ready,
        meanwhile; build ends seen before are applied on top)."""
        assert self.recorder is not None
        delay = 0.2
        while True:
            try:
                await self.recorder.load()
                return
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("build history: cannot read the store (%s); retrying in %.1f s", exc, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 30.0)

    async def _freeze_after_sync(self) -> None:
        """Once the caches are filled, move everything allocated so far out of the garbage
        collector's view (``gc.freeze``): full collections then no longer walk the whole
        node table and pod cache, which keeps them out of the request latency tail."""
        import gc

        while self.config.cluster.dra and self.dra_listed is None:  # its informers not there yet
            await asyncio.sleep(0.1)
        await asyncio.gather(*(inf.synced.wait() for inf in self.informers.values()))
        if self.recorder is not None:
            await self.recorder.loaded.wait()
        gc.collect()
        gc.freeze()

    def _gauges(self) -> Generator[Metric, None, None]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        yield GaugeMetricFamily(
            "stickypack_extender_cache_nodes", "Nodes in the table.", value=len(self.cache.table)
        )
        rec = self.recorder
        if rec is not None:
            yield GaugeMetricFamily(
                "stickypack_extender_history_repos", "Repos in the build history.", value=len(rec.history)
            )
            yield GaugeMetricFamily(
                "stickypack_extender_history_pending_ops",
                "History operations not yet stored.",
                value=rec.unstored,
            )
            yield CounterMetricFamily(
                "stickypack_extender_history_write_errors",
                "Failed history writes (retried).",
                value=rec.flush_errors,
            )
        yield CounterMetricFamily(
            "stickypack_extender_builds_recorded", "Build ends recorded.", value=self.cache.builds_recorded
        )
        if self.config.cluster.dra:
            yield GaugeMetricFamily(
                "stickypack_extender_dra_active",
                "1 while nodes are weighed by their DRA devices (cluster.dra, the objects listed).",
                value=1.0 if self.dra_active() else 0.0,
            )
            refusals = CounterMetricFamily(
                "stickypack_extender_dra_list_refusals",
                "Lists of the DRA objects refused (not served, no right) at start and at each "
                "retry every cluster.dra_retry_s, by kind.",
                labels=["kind"],
            )
            for kind, count in self.dra_refusals.items():
                refusals.add_metric([kind], count)
            yield refusals
            tracker = self.cache.dra
            if tracker is not None:
                tracker.refresh()  # on the event loop, as the handlers
                readings = tracker.readings.values()
                yield GaugeMetricFamily(
                    "stickypack_extender_dra_nodes",
                    "Nodes with node-local ResourceSlices (weighed by their DRA pools).",
                    value=len(tracker.readings),
                )
                yield GaugeMetricFamily(
                    "stickypack_extender_dra_unweighable_nodes",
                    "Of those, nodes the autoscaler cannot weigh (an incomplete pool, a claim of a "
                    "pod there not allocated or not found): taken as busy.",
                    value=sum(1 for r in readings if r.error is not None),
                )
                yield CounterMetricFamily(
                    "stickypack_extender_dra_node_readings",
                    "Node DRA readings computed (each for a node whose slices, claims or pods changed).",
                    value=tracker.computed,
                )

    async def wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while self.not_ready():
            if time.monotonic() > deadline:
                raise TimeoutError(f"extender not ready after {timeout} s: {self.not_ready()}")
            await asyncio.sleep(0.02)

    async def stop(self) -> None:
        tasks = ("_load_task", "_freeze_task", "_dra_task")
        for task in (getattr(self, name, None) for name in tasks):
            if task is not None:
                task.cancel()
        for inf in self.informers.values():
            await inf.stop()
        if self.recorder is not None:
            await self.recorder.stop(flush=True)
        if self._own_client and self.api_client is not None:
            with contextlib.suppress(Exception):
                await self.api_client.close()


def loopback_socket() -> socket.socket:
    """A TCP socket bound to a free port of 127.0.0.1, with TCP_NODELAY (inherited by the
    accepted connections: without it uvicorn's separate header and body writes meet the
    client's delayed ACKs and each response waits ~40 ms)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


#: Most bytes of a request's line and headers the server buffers (h11 answers 431 above it):
#: kube-scheduler's requests carry a few hundred bytes of headers.
MAX_HEADER_BYTES = 64 * 1024
#: Connections served at once; above it new requests get 503 at once (kube-scheduler keeps
#: a few; this bounds what misbehaving clients can hold).
MAX_CONNECTIONS = 1024
#: Seconds a shutdown waits for open requests before closing them (a client that never
#: finishes its body must not keep a SIGTERMed extender alive).
GRACEFUL_SHUTDOWN_S = 5


def uvicorn_config(
    app: ASGIApp,
    host: str,
    port: int,
    log_level: str = "warning",
    *,
    ssl_certfile: str | None = None,
    ssl_keyfile: str | None = None,
) -> uvicorn.Config:
    """The services' uvicorn settings (``stickypack extender`` and ``webhook``, the tests'
    threads, ``benchmarks/extender_latency.py``): h11, which bounds a request's headers,
    rather than httptools, which buffers any amount; TLS when given a certificate and key."""
    import uvicorn

    return uvicorn.Config(
        app,
        host=host,
        port=port,
        ssl_certfile=ssl_certfile,
        ssl_keyfile=ssl_keyfile,
        log_level=log_level,
        access_log=False,
        lifespan="off",
        http="h11",
        h11_max_incomplete_event_size=MAX_HEADER_BYTES,
        limit_concurrency=MAX_CONNECTIONS,
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
        timeout_keep_alive=120,  # longer than Go's idle keep-alive (90 s): the client closes first
    )


def _certificate_expiry(cert_pem: bytes | OSError) -> float | None:
    """The expiry (notAfter, seconds since the epoch) of a PEM's first certificate, None if
    it cannot be read."""
    from cryptography import x509

    if isinstance(cert_pem, OSError):
        return None
    try:
        return x509.load_pem_x509_certificate(cert_pem).not_valid_after_utc.timestamp()
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class ServerTLS:
    """How a TLS server's context is set up, to build a new one for a renewed pair: the
    settings uvicorn's ``create_ssl_context`` applies (:meth:`from_uvicorn`). The default is
    a plain server context (no client certificates)."""

    protocol: int = ssl.PROTOCOL_TLS_SERVER
    verify_mode: int = ssl.CERT_NONE
    ca_certs: str | None = None
    ciphers: str | None = None
    alpn_protocols: tuple[str, ...] = ()

    @classmethod
    def from_uvicorn(cls, uv_config: uvicorn.Config) -> ServerTLS:
        """The settings of a loaded uvicorn config's context."""
        alpn = getattr(uv_config.http_protocol_class, "alpn_protocols", None) or ()
        return cls(
            protocol=uv_config.ssl_version,
            verify_mode=uv_config.ssl_cert_reqs,
            ca_certs=str(uv_config.ssl_ca_certs) if uv_config.ssl_ca_certs else None,
            ciphers=uv_config.ssl_ciphers or None,
            alpn_protocols=tuple(alpn),
        )

    def context(self, certfile: Path, keyfile: Path) -> ssl.SSLContext:
        """A new ``ssl.SSLContext`` with these settings serving the pair; raises
        ``ssl.SSLError``, ``OSError`` or ``ValueError`` (an encrypted key: never a prompt)
        when it does not load."""

        def no_password() -> bytes:
            raise ValueError("the key is encrypted: give it unencrypted")

        ctx = ssl.SSLContext(self.protocol)
        ctx.load_cert_chain(certfile, keyfile, password=no_password)
        ctx.verify_mode = ssl.VerifyMode(self.verify_mode)
        if self.ca_certs:
            ctx.load_verify_locations(self.ca_certs)
        if self.ciphers:
            ctx.set_ciphers(self.ciphers)
        if self.alpn_protocols:
            ctx.set_alpn_protocols(list(self.alpn_protocols))
        return ctx


class CertificateReloader:
    """Serves a renewed certificate without a restart: checks a TLS server's certificate
    and key files every ``interval_s`` seconds and, when either's content changed (a
    Kubernetes Secret volume swaps a symlink, cert-manager renews into it; the content, as a
    rewrite in place can keep the size, inode and a coarse mtime), builds a new context
    serving them (``tls``: the server's settings, :class:`ServerTLS`) and hands it to each
    new connection of the server's live ``ssl.SSLContext`` (its ``sni_callback``, which
    OpenSSL calls in every handshake, SNI or not, swaps the connection's context); open
    connections keep theirs. A whole new context, not the pair loaded into the live one:
    OpenSSL keeps one certificate per kind of key in a context, so an RSA pair loaded over
    an ECDSA one would be served beside it, not instead. A pair that does not load (a key
    that does not match, a file half written, an encrypted key) is logged and the old
    certificate kept; it is tried again at the next change. ``on_load(outcome, not_after)``
    reports each attempt (``"loaded"`` or ``"failed"``; ``not_after``: the certificate's
    expiry, seconds since the epoch, None where it could not be read); ``on_check()``, each
    check :meth:`run` has made, once it is done (whether the files changed or not)."""

    def __init__(
        self,
        context: ssl.SSLContext,
        certfile: str,
        keyfile: str,
        *,
        interval_s: float,
        on_load: TlsLoadHook | None = None,
        on_check: TlsCheckHook | None = None,
        tls: ServerTLS,
    ) -> None:
        self.context = context
        self.certfile = certfile
        self.keyfile = keyfile
        self.interval_s = interval_s
        self.on_load = on_load
        self.on_check = on_check
        self.tls = tls
        pair = self._read()
        self._seen = self._stamp(pair)
        self._not_after = _certificate_expiry(pair[0])
        #: The context of the last pair reloaded; None: the live context's own pair (and no
        #: ``sni_callback`` set on it: with reloading off, or until a pair is reloaded, no
        #: handshake calls into Python).
        self._serving: ssl.SSLContext | None = None

    def _hand_over(self, connection: ssl.SSLObject, server_name: str | None, context: ssl.SSLContext) -> None:
        if self._serving is not None:
            connection.context = self._serving

    def _read(self) -> tuple[bytes | OSError, bytes | OSError]:
        """The two files' content (the error where one cannot be read)."""
        out: list[bytes | OSError] = []
        for path in (self.certfile, self.keyfile):
            try:
                out.append(Path(path).read_bytes())
            except OSError as exc:
                out.append(exc)
        return out[0], out[1]

    @staticmethod
    def _stamp(pair: tuple[bytes | OSError, bytes | OSError]) -> tuple[str | None, ...]:
        return tuple(hashlib.sha256(c).hexdigest() if isinstance(c, bytes) else None for c in pair)

    def not_after(self) -> float | None:
        """The served certificate's expiry (its first certificate's notAfter, as read at the
        start or the last reload), if readable."""
        return self._not_after

    def check(self) -> bool | None:
        """Reload if the files changed: True when loaded, False when they failed to load
        (the old certificate stays), None when nothing changed."""
        pair = self._read()
        stamp = self._stamp(pair)
        if stamp == self._seen:
            return None
        self._seen = stamp
        cert_pem, key_pem = pair
        expiry = _certificate_expiry(cert_pem)
        try:
            if isinstance(cert_pem, OSError):
                raise cert_pem
            if isinstance(key_pem, OSError):
                raise key_pem
            # the content compared is the content loaded: copied aside, read from there
            with tempfile.TemporaryDirectory(prefix="stickypack-tls-") as tmp:
                cert, key = Path(tmp) / "tls.crt", Path(tmp) / "tls.key"
                cert.write_bytes(cert_pem)
                key.touch(mode=0o600)
                key.write_bytes(key_pem)
                self._serving = self.tls.context(cert, key)
            self.context.sni_callback = self._hand_over
            self._not_after = expiry
        except (OSError, ssl.SSLError, ValueError) as exc:
            log.warning("TLS certificate %s / key %s not reloaded, keeping the old one: %s",
                        self.certfile, self.keyfile, exc)  # fmt: skip
            if self.on_load is not None:
                self.on_load("failed", expiry)
            return False
        log.info("TLS certificate %s reloaded (valid until %s)", self.certfile,
                 time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(expiry)) if expiry else "?")  # fmt: skip
        if self.on_load is not None:
            self.on_load("loaded", expiry)
        return True

    async def run(self) -> None:
        """Check every ``interval_s`` seconds until cancelled, each check reported to
        ``on_check`` once done; an unexpected error is logged and the next check made (the
        task would otherwise end, unseen, and reloading with it)."""
        while True:
            await asyncio.sleep(self.interval_s)
            try:
                self.check()
            except Exception:
                log.exception("TLS certificate %s: reload check failed", self.certfile)
            if self.on_check is not None:
                self.on_check()


def start_certificate_reloader(
    uv_config: uvicorn.Config,
    certfile: str,
    keyfile: str,
    *,
    interval_s: float,
    on_load: TlsLoadHook | None = None,
    on_check: TlsCheckHook | None = None,
) -> asyncio.Task[None] | None:
    """Load ``uv_config`` (uvicorn's config, to reach its SSL context), report the served
    certificate's expiry to ``on_load`` (outcome None: the first load) and, unless
    ``interval_s`` is 0, start a :class:`CertificateReloader` task (its checks reported to
    ``on_check``); cancel it when the server stops. None: reloading off. Raises ValueError
    for a configuration that serves no TLS (nothing to reload)."""
    uv_config.load()
    if uv_config.ssl is None:
        raise ValueError("start_certificate_reloader: the uvicorn config serves no TLS (no ssl_certfile)")
    reloader = CertificateReloader(
        uv_config.ssl,
        certfile,
        keyfile,
        interval_s=interval_s,
        on_load=on_load,
        on_check=on_check,
        tls=ServerTLS.from_uvicorn(uv_config),
    )
    if on_load is not None:
        on_load(None, reloader.not_after())
    return asyncio.ensure_future(reloader.run()) if interval_s else None


def quiet_server(config: uvicorn.Config) -> uvicorn.Server:
    """A uvicorn server that, after a SIGINT or SIGTERM, returns from ``serve()`` instead of
    raising the signal again on the way out (what uvicorn >= 0.29 does, so the default
    SIGTERM handler killed the process before the service could flush its build history,
    and SIGINT ended in a traceback)."""
    import uvicorn

    class Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Generator[None, None, None]:
            with super().capture_signals():
                try:
                    yield
                finally:
                    captured = getattr(self, "_captured_signals", None)
                    if isinstance(captured, list):
                        captured.clear()  # we stop the service ourselves, then return

    return Server(config)


async def serve(config: ExtenderConfig) -> None:
    """Run the extender until SIGINT/SIGTERM, then stop it: pending build history is
    written, watches and the API client closed."""
    service = ExtenderService(config)
    await service.start()
    listen = config.listen
    server = quiet_server(uvicorn_config(service.app, listen.host, listen.port, config.log_level))
    try:
        await server.serve()
    finally:
        await service.stop()
        left = len(service.recorder.pending) if service.recorder is not None else 0
        if left:
            log.warning("extender stopped; %d build history operations could not be written", left)
        else:
            log.info("extender stopped; build history written")


class ServiceThread:
    """An :class:`ExtenderService` and its uvicorn server in a background thread, on a free
    port of 127.0.0.1. ``api_configuration``: a ``kubernetes_asyncio`` client Configuration
    to connect with (default: the service's own client, from ``config.cluster.kubeconfig``)."""

    def __init__(
        self,
        config: ExtenderConfig,
        api_configuration: Configuration | None = None,
        *,
        ready_timeout: float = 60.0,
    ) -> None:
        self.config = config
        self.api_configuration = api_configuration
        self.ready_timeout = ready_timeout
        self.loop = asyncio.new_event_loop()
        self.service: ExtenderService | None = None
        self.server: uvicorn.Server | None = None
        self.port: int | None = None
        self._thread = threading.Thread(target=self._run, name="stickypack-extender", daemon=True)
        self._started = threading.Event()
        self._error: BaseException | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> ServiceThread:
        self._thread.start()
        if not self._started.wait(self.ready_timeout + 10):
            raise TimeoutError("extender thread did not start")
        if self._error is not None:
            raise self._error
        return self

    def _run(self) -> None:
        import uvicorn

        asyncio.set_event_loop(self.loop)
        sock = loopback_socket()
        self.port = sock.getsockname()[1]

        async def main() -> None:
            try:
                api = None
                if self.api_configuration is not None:
                    from kubernetes_asyncio import client

                    api = client.ApiClient(configuration=self.api_configuration)
                self.service = ExtenderService(self.config, api)
                self.service._own_client = True
                await self.service.start()
                await self.service.wait_ready(self.ready_timeout)
                self.server = uvicorn.Server(uvicorn_config(self.service.app, "127.0.0.1", self.port or 0))
                serving = asyncio.ensure_future(self.server.serve(sockets=[sock]))
                while not self.server.started and not serving.done():
                    await asyncio.sleep(0.01)
                if serving.done():
                    serving.result()
            except BaseException as exc:
                self._error = exc
                self._started.set()
                raise
            self._started.set()
            try:
                await serving
            finally:
                await self.service.stop()

        with contextlib.suppress(BaseException):
            self.loop.run_until_complete(main())

    def call(self, fn: Callable[[], T], timeout: float = 30.0) -> T:
        """Run ``fn()`` (sync) on the service's loop and return its result."""

        async def wrap() -> T:
            return fn()

        return asyncio.run_coroutine_threadsafe(wrap(), self.loop).result(timeout)

    def stop(self) -> None:
        if self.server is not None:
            self.server.should_exit = True
        self._thread.join(30)

    def __enter__(self) -> ServiceThread:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class AppThread:
    """Serve an ASGI ``app`` with uvicorn on a free 127.0.0.1 port in a background thread
    (an extender over a hand-made cache: fuzzing and latency benchmarks without a cluster;
    the webhook's tests), over TLS when given a certificate and key (``url`` is then
    ``https://...``)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        ssl_certfile: str | None = None,
        ssl_keyfile: str | None = None,
        tls_reload_s: float | None = None,
        on_tls_load: TlsLoadHook | None = None,
        on_tls_check: TlsCheckHook | None = None,
    ) -> None:
        self.app = app
        self.ssl_certfile = ssl_certfile
        self.ssl_keyfile = ssl_keyfile
        #: With TLS: check the certificate files this often and reload them
        #: (:class:`CertificateReloader`, reporting to ``on_tls_load`` and ``on_tls_check``);
        #: None: never.
        self.tls_reload_s = tls_reload_s
        self.on_tls_load = on_tls_load
        self.on_tls_check = on_tls_check
        #: Once started: the task checking the certificate files, None when none runs.
        self.tls_reloading: asyncio.Task[None] | None = None
        self.port: int | None = None
        self.server: uvicorn.Server | None = None
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="stickypack-app", daemon=True)
        self._started = threading.Event()

    @property
    def url(self) -> str:
        scheme = "https" if self.ssl_certfile else "http"
        return f"{scheme}://127.0.0.1:{self.port}"

    def _run(self) -> None:
        import uvicorn

        asyncio.set_event_loop(self.loop)
        sock = loopback_socket()
        self.port = sock.getsockname()[1]
        config = uvicorn_config(
            self.app, "127.0.0.1", self.port, ssl_certfile=self.ssl_certfile, ssl_keyfile=self.ssl_keyfile
        )
        server = self.server = uvicorn.Server(config)

        async def main() -> None:
            reloading = None
            if self.ssl_certfile and self.ssl_keyfile and self.tls_reload_s:
                reloading = start_certificate_reloader(
                    config, self.ssl_certfile, self.ssl_keyfile,
                    interval_s=self.tls_reload_s, on_load=self.on_tls_load, on_check=self.on_tls_check,
                )  # fmt: skip
            self.tls_reloading = reloading
            serving = asyncio.ensure_future(server.serve(sockets=[sock]))
            while not server.started and not serving.done():
                await asyncio.sleep(0.01)
            self._started.set()
            try:
                await serving
            finally:
                if reloading is not None:
                    reloading.cancel()

        try:
            self.loop.run_until_complete(main())
        finally:
            self._started.set()
            sock.close()

    def call(self, fn: Callable[[], T], timeout: float = 30.0) -> T:
        async def wrap() -> T:
            return fn()

        return asyncio.run_coroutine_threadsafe(wrap(), self.loop).result(timeout)

    def start(self) -> Self:
        self._thread.start()
        self._started.wait(30)
        if not self.server or not self.server.started:
            raise RuntimeError("uvicorn did not start")
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.should_exit = True
        self._thread.join(30)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
