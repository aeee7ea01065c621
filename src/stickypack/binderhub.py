"""BinderHub library mode: sticky-build affinity for clusters that keep the default scheduler.

BinderHub's own sticky builds (``KubernetesBuildExecutor.sticky_builds``) list the builder
pods on every build, take the single top rendezvous node as a weight-100 preferred affinity,
and fail the build when no builder pod exists or one is not bound yet (no ``nodeName``).
:class:`StickyBuilds` instead:

- ranks **history nodes first** (where stickypack's build history says the repo was built,
  most recent first; read from the extender's ConfigMaps when present), **then the repo's
  rendezvous order** (BinderHub's exact hash, so caches warmed by BinderHub stay warm);
- returns a **preferred node affinity over the top ``top_k`` nodes with decreasing
  weights** (default 100, 60, 30): when the best node is full or draining, the next one in
  the same stable order takes the build instead of a random node;
- takes candidate nodes from the **builder DaemonSet's pods** (selector configurable,
  default ``component=image-builder,app=binder``), **skipping pods with no node yet**;
- lists them **at most once per ``list_interval`` seconds** behind a shared-result throttle
  (concurrent builds share one API call and its result), like BinderHub's ``at_most_every``;
- with **no builder pods** (or no API access) falls back to BinderHub's default affinity: a
  preferred pod anti-affinity (weight 100, hostname) against other build pods.

It is **off by default** (``c.StickyBuilds.enabled = False``). Use it from
``binderhub_config.py`` through :class:`StickyBuildsMixin` (see ``docs/binderhub.md``)::

    from binderhub.build import KubernetesBuildExecutor
    from stickypack.binderhub import StickyBuildsMixin

    class StickyKubernetesBuildExecutor(StickyBuildsMixin, KubernetesBuildExecutor):
        pass

    c.BinderHub.build_class = StickyKubernetesBuildExecutor
    c.StickyBuilds.enabled = True

BinderHub calls ``get_affinity()`` from a worker thread with the synchronous ``kubernetes``
client (``self.api``), so everything here is synchronous and thread-safe. Any object with
``list_namespaced_pod`` and ``read_namespaced_config_map`` in that client's style works
(:class:`CoreApi`).
"""

from __future__ import annotations

import itertools
import json
import logging
import math
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypedDict, TypeVar

from traitlets import Bool, Float, HasTraits, Integer, List, TraitError, TraitType, Unicode, validate
from traitlets.config import Configurable

from stickypack.core.history import BuildHistory
from stickypack.core.labels import LABEL_KEY
from stickypack.core.rendezvous import rendezvous_rank
from stickypack.kube.cache import parse_selector, selector_text
from stickypack.kube.discovery import nodes_of_pods
from stickypack.kube.history import DATA_KEY, DEFAULT_NAME, HistoryDoc

if TYPE_CHECKING:
    from kubernetes.client import V1Affinity

log = logging.getLogger(__name__)

T = TypeVar("T")
V = TypeVar("V")

#: Seconds the builder list, and the history read (all its shards), may take: BinderHub
#: waits on get_affinity() before creating the pod.
REQUEST_TIMEOUT_S = 5.0
#: Most throttles kept (one per cluster, namespace and selector in practice).
MAX_THROTTLES = 64

HOSTNAME_LABEL = "kubernetes.io/hostname"
BUILD_POD_LABELS = {"component": "binderhub-build"}


class CoreApi(Protocol):
    """What :class:`StickyBuilds` calls on BinderHub's ``self.api`` (the synchronous
    ``kubernetes`` client's ``CoreV1Api``): the answers are the client's models or dicts in
    the API's shape."""

    def list_namespaced_pod(
        self, namespace: str, *, label_selector: str, _request_timeout: float
    ) -> object: ...

    def read_namespaced_config_map(self, name: str, namespace: str, *, _request_timeout: float) -> object: ...


class _Proposal(TypedDict, Generic[V]):
    """What traitlets hands a ``@validate`` method: the ``value`` proposed for ``trait``
    of ``owner`` (already of the trait's type)."""

    owner: HasTraits
    value: V
    trait: TraitType[Any, Any]


def default_anti_affinity() -> dict[str, Any]:
    """BinderHub's affinity for build pods with sticky builds off: prefer (weight 100) nodes
    without another build pod."""
    return {
        "podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 100,
                    "podAffinityTerm": {
                        "labelSelector": {"matchLabels": dict(BUILD_POD_LABELS)},
                        "topologyKey": HOSTNAME_LABEL,
                    },
                }
            ]
        }
    }


class Throttle(Generic[T]):
    """A shared-result throttle for a blocking function: at most one call per
    ``interval_s``; callers within the interval get the cached result; callers arriving
    during a call wait for it and share its result. A call that raises is shared too, with
    the callers that waited for it and with those that come in the next ``error_ttl_s``
    (default: the interval, at most 5 s): during an API outage each caller falls back at
    once instead of waiting for a timeout of its own, one after another. Then the next
    caller retries."""

    def __init__(
        self,
        fn: Callable[[], T],
        interval_s: float,
        clock: Callable[[], float] = time.monotonic,
        error_ttl_s: float | None = None,
    ):
        self.fn = fn
        self.interval_s = interval_s
        self.error_ttl_s = min(interval_s, 5.0) if error_ttl_s is None else error_ttl_s
        self.clock = clock
        self.calls = 0
        self._lock = threading.Lock()
        #: When the last call returned (None: none has yet), and what.
        self._at: float | None = None
        self._result: T
        self._error: Exception | None = None
        self._error_at = 0.0

    def __call__(self) -> T:
        if self._fresh():
            return self._result
        self._raise_recent_error()
        with self._lock:
            if self._fresh():  # someone refreshed while we waited
                return self._result
            self._raise_recent_error()  # or failed while we waited
            self.calls += 1
            try:
                result = self.fn()
            except Exception as exc:
                self._error, self._error_at = exc, self.clock()
                raise
            self._result, self._at, self._error = result, self.clock(), None
            return result

    def _raise_recent_error(self) -> None:
        error = self._error
        if error is not None and self.clock() - self._error_at < self.error_ttl_s:
            raise error.with_traceback(None)  # not a traceback grown by every caller

    def _fresh(self) -> bool:
        return self._at is not None and self.clock() - self._at < self.interval_s


def _within(seconds: float, fn: Callable[[], T], what: str) -> T:
    """``fn()``, waited for at most ``seconds`` (then ``TimeoutError``; the call goes on in
    its daemon thread, and its result is dropped). The sync client's own ``_request_timeout``
    bounds one attempt only: urllib3 retries a read that timed out three more times, so a
    call given 5 s took 20 s against an API server that stopped answering."""
    results: list[T] = []
    errors: list[BaseException] = []
    done = threading.Event()

    def run() -> None:
        try:
            results.append(fn())
        except BaseException as exc:  # handed to the caller
            errors.append(exc)
        finally:
            done.set()

    threading.Thread(target=run, name="stickypack-sticky-builds", daemon=True).start()
    if not done.wait(seconds):
        raise TimeoutError(f"{what}: no answer within {seconds:g} s")
    if errors:
        raise errors[0]
    return results[0]


def _to_dict(obj: object) -> dict[str, Any]:
    """A kubernetes-client model or a dict -> dict with the API's (camelCase) keys."""
    if isinstance(obj, dict):
        return obj
    to_dict = getattr(obj, "to_dict", None)
    if to_dict is None:
        return {}
    raw = to_dict()
    # model.to_dict() uses snake_case attribute names; we read only these few fields.
    spec = raw.get("spec") or {}
    status = raw.get("status") or {}
    meta = raw.get("metadata") or {}
    return {
        "metadata": {"deletionTimestamp": meta.get("deletion_timestamp"), "name": meta.get("name")},
        "spec": {"nodeName": spec.get("node_name") or spec.get("nodeName")},
        "status": {"phase": status.get("phase")},
        "data": raw.get("data"),
    }


class StickyBuilds(Configurable):
    """Preferred node affinity for BinderHub build pods: history, then rendezvous, top-k."""

    enabled = Bool(False, help="Set the sticky-build affinity on build pods (off by default).").tag(
        config=True
    )
    top_k = Integer(3, help="How many nodes the preferred affinity names.").tag(config=True)
    weights = List(
        Integer(),
        default_value=[100, 60, 30],
        help="Weights of the preferred terms, best node first (1..100, none above the one "
        "before). The last one repeats when top_k is larger.",
    ).tag(config=True)
    builder_selector = Unicode(
        "component=image-builder,app=binder",
        help="Label selector of the builder DaemonSet's pods, whose nodes can build.",
    ).tag(config=True)
    list_interval = Float(
        30.0, help="List the builder pods (and read the history) at most once per this many seconds."
    ).tag(config=True)
    use_history = Bool(
        True, help="Prefer nodes stickypack's build history says built the repo (when it exists)."
    ).tag(config=True)
    history_namespace = Unicode(
        "", help="Namespace of the build history ConfigMaps (default: the build namespace)."
    ).tag(config=True)
    history_name = Unicode(DEFAULT_NAME, help="Name prefix of the build history ConfigMaps.").tag(config=True)
    history_shards = Integer(1, help="Number of build history ConfigMaps (history.shards).").tag(config=True)
    history_ttl = Float(7 * 86400.0, help="Ignore history entries older than this (seconds).").tag(
        config=True
    )
    hostname_label = Unicode(
        HOSTNAME_LABEL, help="Node label holding the node name (BinderHub assumes they are equal)."
    ).tag(config=True)

    @validate("weights")
    def _check_weights(self, proposal: _Proposal[list[int]]) -> list[int]:
        weights = list(proposal["value"])
        if not weights:
            raise TraitError("StickyBuilds.weights needs at least one weight")
        if any(isinstance(w, bool) or not 1 <= w <= 100 for w in weights):
            raise TraitError(f"StickyBuilds.weights must be 1..100, got {weights}")
        if any(b > a for a, b in itertools.pairwise(weights)):
            raise TraitError(f"StickyBuilds.weights must not increase, got {weights}")
        return weights

    @validate("top_k")
    def _check_top_k(self, proposal: _Proposal[int]) -> int:
        if proposal["value"] < 1:
            raise TraitError("StickyBuilds.top_k must be >= 1")
        return int(proposal["value"])

    @validate("history_shards")
    def _check_shards(self, proposal: _Proposal[int]) -> int:
        if not 1 <= proposal["value"] <= 64:  # the extender's range (history.shards)
            raise TraitError(f"StickyBuilds.history_shards must be in 1..64, got {proposal['value']}")
        return int(proposal["value"])

    @validate("list_interval", "history_ttl")
    def _check_seconds(self, proposal: _Proposal[float]) -> float:
        value = proposal["value"]
        if not math.isfinite(value) or value < 0:
            name = proposal["trait"].name
            raise TraitError(f"StickyBuilds.{name} must be a finite number >= 0, got {value}")
        return float(value)

    @validate("builder_selector")
    def _check_selector(self, proposal: _Proposal[str]) -> str:
        try:
            selector = parse_selector(proposal["value"])
        except ValueError as exc:
            raise TraitError(f"StickyBuilds.builder_selector: {exc}") from None
        if not selector:  # would take every pod of the namespace for a builder
            raise TraitError("StickyBuilds.builder_selector must select something (key=value,...)")
        return selector_text(selector)

    @validate("hostname_label")
    def _check_label(self, proposal: _Proposal[str]) -> str:
        if not LABEL_KEY.fullmatch(proposal["value"]):
            raise TraitError(f"StickyBuilds.hostname_label: {proposal['value']!r} is not a label key")
        return str(proposal["value"])

    # Throttles are shared by all instances (BinderHub makes one executor per build).
    _throttles: dict[tuple[str | int, ...], Throttle[Any]] = {}  # noqa: RUF012
    _throttles_lock = threading.Lock()

    def _throttled(self, key: tuple[str | int, ...], fn: Callable[[], T]) -> T:
        with self._throttles_lock:
            throttle = self._throttles.get(key)
            if throttle is None or throttle.interval_s != self.list_interval:
                if len(self._throttles) >= MAX_THROTTLES:  # the oldest go: never an unbounded map
                    for old in list(self._throttles)[: MAX_THROTTLES // 2]:
                        del self._throttles[old]
                throttle = self._throttles[key] = Throttle(fn, self.list_interval)
        return throttle()

    @classmethod
    def clear_cache(cls) -> None:
        with cls._throttles_lock:
            cls._throttles.clear()

    # ---- inputs ----------------------------------------------------------------------------

    def builder_nodes(self, api: CoreApi, namespace: str) -> list[str]:
        """Nodes of the builder pods (sorted; pods without a node skipped), cached."""

        def fetch() -> list[str]:
            pods = api.list_namespaced_pod(
                namespace, label_selector=self.builder_selector, _request_timeout=REQUEST_TIMEOUT_S
            )
            items = pods.get("items") if isinstance(pods, dict) else getattr(pods, "items", None)
            return nodes_of_pods(_to_dict(p) for p in items or ())

        key = ("builders", _cluster_of(api), namespace, self.builder_selector)
        return self._throttled(key, lambda: _within(REQUEST_TIMEOUT_S, fetch, "listing the builder pods"))

    def history(self, api: CoreApi, namespace: str) -> BuildHistory | None:
        """stickypack's stored build history, cached; None when absent or unreadable."""
        if not self.use_history:
            return None
        ns = self.history_namespace or namespace

        def fetch() -> BuildHistory | None:
            hist = BuildHistory(self.history_ttl, max_nodes_per_repo=100, max_repos=10**9)
            found = False
            for shard in range(max(1, self.history_shards)):
                try:
                    cm = api.read_namespaced_config_map(
                        f"{self.history_name}-{shard}", ns, _request_timeout=REQUEST_TIMEOUT_S
                    )
                except Exception as exc:
                    status = getattr(exc, "status", None)  # the client's ApiException: an answer
                    if not isinstance(status, int) or status == 0:
                        # no answer (a timeout, no connection): the other shards would wait too
                        log.warning(
                            "stickypack history %s-%s not readable: %s", self.history_name, shard, exc
                        )
                        break
                    # 404 (no extender) or 403 (no RBAC): no history there
                    log.debug("stickypack history %s-%s not readable: %s", self.history_name, shard, exc)
                    continue
                data = cm.get("data") if isinstance(cm, dict) else getattr(cm, "data", None)
                source = f"build history ConfigMap {ns}/{self.history_name}-{shard}"
                doc = HistoryDoc.parse((data or {}).get(DATA_KEY), source)
                hist.merge(doc.repos)
                found = True
            return hist if found else None

        key = ("history", _cluster_of(api), ns, self.history_name, self.history_shards)
        return self._throttled(key, lambda: _within(REQUEST_TIMEOUT_S, fetch, "reading the build history"))

    # ---- the affinity ----------------------------------------------------------------------

    def ranked_nodes(
        self, repo: str, candidates: list[str], history: BuildHistory | None, now: float | None = None
    ) -> list[str]:
        """The top ``top_k`` candidate nodes for ``repo``: history first, then rendezvous."""
        now = time.time() if now is None else now
        allowed = set(candidates)
        ranked: list[str] = []
        if history is not None:
            ranked.extend(n for n in history.nodes_for(repo, now) if n in allowed)
        for node in rendezvous_rank(candidates, repo):
            if len(ranked) >= self.top_k:
                break
            if node not in ranked:
                ranked.append(node)
        return ranked[: self.top_k]

    def node_affinity(self, nodes: list[str]) -> dict[str, Any]:
        """Preferred node affinity: one term per node, weights decreasing with rank."""
        terms = []
        for rank, node in enumerate(nodes):
            weight = self.weights[min(rank, len(self.weights) - 1)]
            terms.append(
                {
                    "weight": weight,
                    "preference": {
                        "matchExpressions": [{"key": self.hostname_label, "operator": "In", "values": [node]}]
                    },
                }
            )
        return {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": terms}}

    def affinity_for(self, api: CoreApi, namespace: str, repo: str) -> dict[str, Any]:
        """The affinity (a dict in the API's shape) for a build of ``repo``."""
        try:
            candidates = self.builder_nodes(api, namespace)
        except Exception as exc:
            log.warning("sticky builds: cannot list builder pods (%s); default affinity", exc)
            return default_anti_affinity()
        if not candidates:
            log.info("sticky builds: no bound builder pod (%s); default affinity", self.builder_selector)
            return default_anti_affinity()
        history = None
        try:
            history = self.history(api, namespace)
        except Exception as exc:
            log.warning("sticky builds: cannot read the build history (%s); rendezvous only", exc)
        return self.node_affinity(self.ranked_nodes(repo, candidates, history))


if TYPE_CHECKING:

    class _Executor(Configurable):
        """What :class:`StickyBuildsMixin` uses of the executor it is mixed into (BinderHub's
        ``KubernetesBuildExecutor``)."""

        api: CoreApi
        namespace: str
        repo_url: str

        def get_affinity(self) -> V1Affinity | dict[str, Any]: ...

else:
    _Executor = object


class StickyBuildsMixin(_Executor):
    """Mix into BinderHub's ``KubernetesBuildExecutor`` (before it in the bases): its
    ``get_affinity()`` returns :meth:`StickyBuilds.affinity_for` when
    ``c.StickyBuilds.enabled``, else BinderHub's own. Uses the executor's ``api``,
    ``namespace`` and ``repo_url``. The kubernetes client accepts the returned dict in a
    pod spec (``V1PodSpec(affinity=...)``) as it accepts a model.

    BinderHub makes one executor when it starts (``BinderHub.initialize``: its
    ``example_builder``, for /versions and /health) and one per build: a configuration
    error is logged (once) when the first is made, at start-up."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._sticky = self._sticky_builds()

    def _sticky_builds(self) -> StickyBuilds | None:
        """The configured :class:`StickyBuilds`, or None (logged once) when the
        configuration is refused."""
        try:
            return StickyBuilds(parent=self)
        except TraitError as exc:  # a configuration error: say so, and never fail the build
            _log_once(f"sticky builds: configuration error, BinderHub's own affinity used: {exc}")
            return None

    def get_affinity(self) -> V1Affinity | dict[str, Any]:
        sticky = self._sticky  # an executor serves one build: its configuration read once
        if sticky is None or not sticky.enabled:
            return super().get_affinity()
        try:
            affinity = sticky.affinity_for(self.api, self.namespace, self.repo_url)
            return _as_model(affinity)
        except Exception:  # a bug or an input we did not foresee must not fail a user's launch
            log.exception("sticky builds: failed; BinderHub's own affinity used")
            return super().get_affinity()


def _as_model(affinity: dict[str, Any]) -> V1Affinity | dict[str, Any]:
    """A ``kubernetes.client.V1Affinity`` when the sync client is installed, else the dict
    (which the client serializes in a pod spec just as well)."""
    try:
        from kubernetes.client import ApiClient
    except ImportError:
        return affinity
    text = json.dumps(affinity)
    # its signature changed across client versions
    deserialize: Callable[..., V1Affinity] = ApiClient().deserialize
    try:  # kubernetes >= 37: (response_text, response_type, content_type)
        return deserialize(text, "V1Affinity", "application/json")
    except TypeError:  # older clients: (response with .data, response_type)

        class _Resp:
            data = text

        return deserialize(_Resp(), "V1Affinity")


_logged: set[str] = set()


def _log_once(message: str) -> None:
    """Log ``message`` as an error the first time only (it would repeat on every build)."""
    if message not in _logged:
        _logged.add(message)
        log.error(message)


def _cluster_of(api: CoreApi) -> str | int:
    """What identifies the cluster behind a sync-client API object: its server URL (BinderHub
    may make a client per build, and they must share one throttle), else the object's
    ``id()`` (a throttle of its own)."""
    configuration = getattr(getattr(api, "api_client", None), "configuration", None)
    host = getattr(configuration, "host", None)
    return host if isinstance(host, str) else id(api)
