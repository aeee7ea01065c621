"""Prometheus metrics of the extender (one registry per service, so tests can run several).

=====================================================  =====================================
``stickypack_extender_request_duration_seconds``       histogram by ``verb`` (filter,
                                                       prioritize): time in the handler
``stickypack_extender_requests_total``                 by ``verb`` and ``outcome`` (ok,
                                                       bad_request, too_large, error, ...;
                                                       not_found and method_not_allowed
                                                       with ``verb`` "" where the path
                                                       names no verb)
``stickypack_extender_decisions_total``                by ``verb`` and ``managed`` (true: a
                                                       build pod the extender placed)
``stickypack_extender_nodes_filtered_total``           nodes removed by the extender's filter
``stickypack_extender_assumed_total``                  placements counted before the watch
``stickypack_extender_cache_staleness_seconds``        by ``kind`` (nodes, pods, history;
                                                       with ``cluster.dra`` resourceslices,
                                                       resourceclaims): seconds since the API
                                                       server was last heard from on that watch
``stickypack_extender_watch_connected``                by ``kind``: 1 while the watch is open
``stickypack_extender_watch_errors_total``             by ``kind``
``stickypack_extender_watch_relists_total``            by ``kind`` (410 Gone -> relist)
``stickypack_extender_watch_bad_events_total``         by ``kind``: events or listed objects
                                                       that could not be read (skipped)
``stickypack_extender_cache_nodes``                    nodes in the table
``stickypack_extender_history_repos``                  repos in the build history
``stickypack_extender_builds_recorded_total``          build ends recorded
``stickypack_extender_history_write_errors_total``     failed history writes (retried)
``stickypack_extender_history_pending_ops``            history operations not yet stored
``stickypack_extender_dra_active``                     with ``cluster.dra`` only (these five):
                                                       1 while nodes are weighed by their
                                                       DRA devices, 0 when the objects
                                                       cannot be listed, a watch of them
                                                       is refused, or they are still
                                                       being read
``stickypack_extender_dra_nodes``                      nodes with node-local ResourceSlices
``stickypack_extender_dra_unweighable_nodes``          of those, the ones taken as busy (the
                                                       autoscaler cannot weigh them)
``stickypack_extender_dra_node_readings_total``        node DRA readings computed
``stickypack_extender_dra_list_refusals_total``        by ``kind``: lists of the DRA objects
                                                       refused (401, 403, 404) at start and
                                                       at each ``cluster.dra_retry_s`` retry
=====================================================  =====================================
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.metrics_core import Metric

if TYPE_CHECKING:
    from stickypack.extender.engine import Decision
    from stickypack.kube.informer import Informer

#: The extender's verbs (``POST /filter``, ``POST /prioritize``).
VERBS = ("filter", "prioritize")
LATENCY_BUCKETS = (0.0005, 0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)


class _Callbacks:
    """A collector reading live values at scrape time."""

    def __init__(self) -> None:
        self.sources: list[Callable[[], Iterable[Metric]]] = []

    def collect(self) -> Iterable[Metric]:
        for source in self.sources:
            yield from source()


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.latency = Histogram(
            "stickypack_extender_request_duration_seconds",
            "Time to answer a kube-scheduler extender request.",
            ["verb"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.requests = Counter(
            "stickypack_extender_requests",
            "Extender requests by verb and outcome.",
            ["verb", "outcome"],
            registry=self.registry,
        )
        # exported at 0 from the start: an alert on increase() of a series that first
        # appears at 1 (the first internal error) would never see that error
        for verb in VERBS:
            self.requests.labels(verb, "error")
        self.decisions = Counter(
            "stickypack_extender_decisions",
            "Filter/prioritize decisions; managed=true for pods the extender placed.",
            ["verb", "managed"],
            registry=self.registry,
        )
        self.filtered = Counter(
            "stickypack_extender_nodes_filtered",
            "Nodes removed by the extender's filter.",
            registry=self.registry,
        )
        self.assumed = Counter(
            "stickypack_extender_assumed",
            "Placements counted before the watch confirmed them.",
            registry=self.registry,
        )
        self._callbacks = _Callbacks()
        self.registry.register(self._callbacks)

    def observe(self, verb: str, outcome: str, seconds: float) -> None:
        self.latency.labels(verb).observe(seconds)
        self.requests.labels(verb, outcome).inc()

    def count(self, verb: str, outcome: str) -> None:
        """Count a request no verb's handler answered (``not_found``, ``method_not_allowed``;
        ``verb`` "" where the path names none): counted, not timed."""
        self.requests.labels(verb, outcome).inc()

    def decision(self, decision: Decision) -> None:
        self.decisions.labels(decision.verb, "true" if decision.managed else "false").inc()
        if decision.filtered:
            self.filtered.inc(decision.filtered)
        if decision.assumed:
            self.assumed.inc()

    def add_source(self, source: Callable[[], Iterable[Metric]]) -> None:
        self._callbacks.sources.append(source)

    def watch_informers(self, informers: dict[str, Informer]) -> None:
        """Export staleness, connection and error counters of ``{kind: Informer}``."""

        def source() -> Iterable[Metric]:
            stale = GaugeMetricFamily(
                "stickypack_extender_cache_staleness_seconds",
                "Seconds since the API server was last heard from on this watch.",
                labels=["kind"],
            )
            connected = GaugeMetricFamily(
                "stickypack_extender_watch_connected", "1 while the watch is open.", labels=["kind"]
            )
            errors = CounterMetricFamily(
                "stickypack_extender_watch_errors",
                "Watch errors (reconnected with backoff).",
                labels=["kind"],
            )
            relists = CounterMetricFamily(
                "stickypack_extender_watch_relists", "Relists after 410 Gone.", labels=["kind"]
            )
            bad = CounterMetricFamily(
                "stickypack_extender_watch_bad_events",
                "Events or listed objects that could not be read (skipped, logged).",
                labels=["kind"],
            )
            for kind, inf in informers.items():
                stale.add_metric([kind], inf.staleness_s() if inf.synced.is_set() else float("inf"))
                connected.add_metric([kind], 1.0 if inf.stats.connected else 0.0)
                errors.add_metric([kind], inf.stats.watch_errors)
                relists.add_metric([kind], inf.stats.relists_gone)
                bad.add_metric([kind], inf.stats.bad_events)
            yield from (stale, connected, errors, relists, bad)

        self.add_source(source)

    def render(self) -> tuple[bytes, str]:
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
