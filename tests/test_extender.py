"""The extender over HTTP (a real uvicorn server on loopback, a hand-made node cache):
wire format, decisions, errors, metrics, config validation, and hypothesis fuzzing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from conftest import missing, read_answer
from stickypack.core import NodeTable, Pod
from stickypack.core.framework import Profile, SchedulingContext, ScorePlugin, WeightedScorer
from stickypack.extender.app import make_app
from stickypack.extender.config import ConfigError, config_from_dict, load_config
from stickypack.extender.engine import KUBE_SCORERS, Extender, select_profile
from stickypack.extender.metrics import Metrics
from stickypack.extender.server import AppThread
from stickypack.kube.cache import ClusterCache
from stickypack.kube.history import HistoryRecorder
from stickypack.policies import load_builtin
from stickypack.render import EXTENDER_WEIGHT

NOW = 1_800_000_000.0
REPO = "https://github.com/org/hot-repo"
LIMIT = 64 * 1024


def node(name: str, taints: list[dict] | None = None) -> dict:
    return {
        "metadata": {"name": name},
        "spec": {"taints": taints or []},
        "status": {
            "allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def build_pod(name: str = "build-1", repo: str = REPO, node_name: str | None = None) -> dict:
    pod: dict[str, Any] = {
        "metadata": {
            "name": name,
            "namespace": "binder",
            "uid": f"uid-{name}",
            "labels": {"component": "binderhub-build", "name": name},
            "annotations": {"binder-repo": repo},
        },
        "spec": {"containers": [{"name": "b", "resources": {"requests": {"cpu": "1", "memory": "2Gi"}}}]},
    }
    if node_name:
        pod["spec"]["nodeName"] = node_name
    return pod


class World:
    def __init__(self, n: int = 6) -> None:
        self.cache = ClusterCache(clock=lambda: NOW, ttl_clock=lambda: NOW)
        self.recorder = HistoryRecorder(None, clock=lambda: NOW)
        self.names = [f"node-{i}" for i in range(n)]
        for name in self.names:
            self.cache.node_event("ADDED", node(name))
        self.cache.node_event(
            "ADDED", node("doomed", [{"key": "ToBeDeletedByClusterAutoscaler", "effect": "NoSchedule"}])
        )
        profile = select_profile(load_builtin("stickypack"), "stickypack-builds")
        self.extender = Extender(
            self.cache, profile, history=lambda: self.recorder.history, clock=lambda: NOW
        )
        self.metrics = Metrics()
        self.app = make_app(self.extender, metrics=self.metrics, max_request_bytes=LIMIT)


@pytest.fixture(scope="module")
def world() -> Iterator[tuple[World, AppThread, httpx.Client]]:
    w = World()
    with AppThread(w.app) as server, httpx.Client(base_url=server.url, timeout=10) as client:
        yield w, server, client


def post(client: httpx.Client, verb: str, body: Any) -> httpx.Response:
    return client.post(f"/{verb}", content=json.dumps(body), headers={"Content-Type": "application/json"})


def error_of(r: httpx.Response, verb: str) -> str:
    """What a bad request was told: filter's ``ExtenderFilterResult.Error`` (HTTP 200, which
    kube-scheduler reads), prioritize's ``{"error": ...}`` (HTTP 400)."""
    if verb == "filter":
        assert r.status_code == 200 and r.json()["NodeNames"] is None, r.text
        return str(r.json()["Error"])
    assert r.status_code == 400, r.text
    return str(r.json()["error"])


def test_filter_wire_format_and_autoscaler_taint(world) -> None:
    w, _, client = world
    names = [*w.names, "doomed"]
    r = post(client, "filter", {"Pod": build_pod(), "Nodes": None, "NodeNames": names})
    assert r.status_code == 200
    body = r.json()
    assert list(body) == ["Nodes", "NodeNames", "FailedNodes", "FailedAndUnresolvableNodes", "Error"]
    assert body["Nodes"] is None and body["Error"] == ""
    assert body["NodeNames"] == w.names
    assert list(body["FailedAndUnresolvableNodes"]) == ["doomed"]
    assert "ToBeDeletedByClusterAutoscaler" in body["FailedAndUnresolvableNodes"]["doomed"]


def test_unmanaged_pods_pass_through(world) -> None:
    w, _, client = world
    pod = build_pod()
    pod["metadata"]["labels"] = {"app": "jupyterhub", "component": "singleuser-server"}
    r = post(client, "filter", {"Pod": pod, "NodeNames": [*w.names, "doomed"]})
    assert r.json()["NodeNames"] == [*w.names, "doomed"]
    r = post(client, "prioritize", {"Pod": pod, "NodeNames": w.names})
    assert r.status_code == 200 and r.json() == []


def test_prioritize_prefers_history_then_rendezvous(world) -> None:
    w, server, client = world
    r = post(client, "prioritize", {"Pod": build_pod("p1"), "NodeNames": w.names})
    assert r.status_code == 200
    scores = r.json()
    assert [s["Host"] for s in scores] == w.names
    assert all(set(s) == {"Host", "Score"} and 0 <= s["Score"] <= 10 for s in scores)
    from stickypack.rendezvous import rendezvous_rank

    top = rendezvous_rank(w.names, REPO)[0]
    best = max(scores, key=lambda s: s["Score"])
    assert best["Host"] == top
    # History wins over rendezvous order.
    built = rendezvous_rank(w.names, REPO)[-1]
    server.call(lambda: w.recorder.record(REPO, built, NOW - 60))
    scores = post(client, "prioritize", {"Pod": build_pod("p2"), "NodeNames": w.names}).json()
    assert max(scores, key=lambda s: s["Score"])["Host"] == built
    server.call(lambda: w.recorder.forget_node(built))


@pytest.mark.parametrize("with_filter", [True, False], ids=["filter-then-prioritize", "prioritize-only"])
def test_assumption_moves_hot_repo_builds_along(world, with_filter: bool) -> None:
    """Back-to-back builds of one repo, before any binding is seen: the extender's own
    assumptions push later builds off the top node once it reaches the load bound, in
    kube-scheduler's call order (filter, then prioritize over the nodes that passed) and
    with prioritize alone (a node at the bound scores 0 there too)."""
    w, server, client = world
    server.call(lambda: [w.cache._drop_assumption(k) for k in list(w.cache.assumed)])
    cap = w.extender.build_bounds.min_load_cap  # the bound while the mean stays low, as here
    tops = []
    for i in range(8):
        pod = build_pod(f"hot-{i}")
        names = w.names
        if with_filter:
            names = post(client, "filter", {"Pod": pod, "NodeNames": names}).json()["NodeNames"]
        scores = post(client, "prioritize", {"Pod": pod, "NodeNames": names}).json()
        tops.append(max(scores, key=lambda s: (s["Score"], s["Host"]))["Host"])
    assumed = server.call(lambda: w.cache.assumed)
    per_node: dict[str, int] = {}
    for n in assumed.values():
        per_node[n] = per_node.get(n, 0) + 1
    assert len(per_node) > 1, per_node  # a tie predicts nothing, so fewer than 8 may count
    assert max(per_node.values()) <= cap, (per_node, cap)
    assert len(set(tops)) > 1
    server.call(lambda: [w.cache._drop_assumption(k) for k in list(w.cache.assumed)])


@pytest.mark.parametrize(
    ("verb", "body", "message"),
    [
        ("filter", b"{not json", "not valid JSON"),
        ("prioritize", b"[1, 2]", "must be a JSON object"),
        ("filter", b'{"Pod": 5, "NodeNames": []}', "Pod must be a JSON object"),
        ("filter", b'{"Pod": {}}', "NodeNames must be a list"),
        # once "ExtenderArgs.NodeNames must be a list of strings", of a request without NodeNames
        ("filter", b'{"Pod": {}, "Nodes": {"items": [{"metadata": {"name": 5}}]}}',
         "ExtenderArgs.Nodes.items[0].metadata.name must be a string"),
        ("prioritize", b'{"Pod": {}, "NodeNames": null,'
         b' "Nodes": {"items": [{"metadata": {"name": "n"}}, 7]}}',
         "ExtenderArgs.Nodes.items[1].metadata.name missing"),
        ("prioritize", b'{"Pod": {}, "NodeNames": [1]}', "list of strings"),
        ("prioritize", b'{"Pod": {"spec": {"containers": [{"resources": {"requests": {"cpu": "lots"}}}]}},'
         b' "NodeNames": []}', "ExtenderArgs.Pod"),
        ("filter", b'{"Pod": {"spec": {"containers": [{"resources": {"requests": {"cpu": "-100Ei"}}}]}},'
         b' "NodeNames": []}', "negative quantity"),
        ("prioritize", b'{"Pod": {"spec": {"affinity": {"nodeAffinity": {"preferredDuringScheduling'
         b'IgnoredDuringExecution": [{"weight": 1e300, "preference": {}}]}}}}, "NodeNames": []}',
         "affinity weight must be an integer from 1 to 100"),
        ("prioritize", b'{"Pod": {"spec": {"affinity": {"nodeAffinity": {"preferredDuringScheduling'
         b'IgnoredDuringExecution": [{"weight": 1e999, "preference": {}}]}}}}, "NodeNames": []}',
         "not valid JSON: number is infinity"),
        ("filter", b'{"Pod": {"spec": {"affinity": {"podAntiAffinity": {"preferredDuringScheduling'
         b'IgnoredDuringExecution": [{"weight": 1000000000000000000000000000000, "podAffinityTerm": {}}]}}}},'
         b' "NodeNames": []}', "affinity weight"),
    ],
)  # fmt: skip
def test_bad_requests_are_answered_with_a_message(world, verb: str, body: bytes, message: str) -> None:
    _, _, client = world
    assert message in error_of(client.post(f"/{verb}", content=body), verb)


REQUESTS = ("spec", "containers", 0, "resources", "requests")


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        ((*REQUESTS, "cpu"), "12x", "spec.containers[0].resources.requests.cpu: not a quantity: '12x'"),
        ((*REQUESTS, "memory"), "-1Gi", "spec.containers[0].resources.requests.memory: a negative quantity"),
        (("spec", "initContainers"), [{"name": "i"}, {"resources": {"limits": {"cpu": []}}}],
         "spec.initContainers[1].resources.limits.cpu: not a quantity: []"),
        (("spec", "overhead"), {"memory": "lots"}, "spec.overhead.memory: not a quantity"),
        (("spec", "resources"), {"requests": {"cpu": True}}, "spec.resources.requests.cpu: not a quantity"),
        ((*REQUESTS[:-1],), [1], "spec.containers[0].resources must be an object, got [1]"),
        ((*REQUESTS,), "1", "spec.containers[0].resources.requests must be an object, got '1'"),
        (("spec", "containers"), "c", "spec.containers must be a list, got 'c'"),
        (("spec", "containers", 0), 7, "spec.containers[0] must be an object, got 7"),
        (("spec",), [1], "spec must be an object, got [1]"),
        (("metadata",), "m", "metadata must be an object, got 'm'"),
        (("metadata", "labels"), ["component"], "metadata.labels must be an object"),
        (("metadata", "annotations"), 5, "metadata.annotations must be an object, got 5"),
        (("metadata", "ownerReferences"), [3, {"kind": "Job", "controller": True}],
         "metadata.ownerReferences[0] must be an object, got 3"),
        (("metadata", "creationTimestamp"), "yesterday",
         "metadata.creationTimestamp: 'yesterday' is not a time (RFC 3339)"),
        (("spec", "tolerations"), [{"key": "a"}, "b"], "spec.tolerations[1] must be an object, got 'b'"),
        (("spec", "nodeSelector"), ["a=b"], "spec.nodeSelector must be an object"),
        (("spec", "affinity"), {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{}]}},
         "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight: an affinity "
         "weight must be an integer from 1 to 100, not None"),
        (("spec", "affinity"), {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "a", "operator": "Exists"}]},
                                  {"matchExpressions": [{"operator": "Exists"}]}]}}},
         "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[1]: "
         "key missing"),
        (("spec", "affinity"), {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 5, "podAffinityTerm": {"labelSelector": {"matchLabels": ["a"]}}}]}},
         "spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0]"),
        (("spec", "volumes"), [{"name": "v", "image": "x"}],
         "spec.volumes[0].image must be an object, got 'x'"),
        (("metadata", "ownerReferences"), [{"name": "j", "controller": True}],
         "metadata.ownerReferences[0].kind missing"),
        (("spec", "affinity"), {"podAffinity": "x"}, "spec.affinity.podAffinity must be an object, got 'x'"),
    ],
)  # fmt: skip
def test_a_pod_field_that_cannot_be_read_is_named(world, path: tuple, value: Any, message: str) -> None:
    # "cannot read pod: not a quantity: '12x'" named no container nor resource, and a wrong
    # type elsewhere came out as Python's own words ("'list' object has no attribute 'get'",
    # a KeyError's "'key'"), naming no field at all
    _w, _, client = world
    pod = build_pod("odd")
    where: Any = pod
    for step in path[:-1]:
        where = where[step]
    where[path[-1]] = value
    for verb in ("filter", "prioritize"):
        text = error_of(post(client, verb, {"Pod": pod, "NodeNames": ["node-0"]}), verb)
        assert text.startswith("ExtenderArgs.Pod: cannot read pod: ") and message in text, text


def test_filter_errors_reach_kube_scheduler_in_the_results_error_field(world) -> None:
    # kube-scheduler reads no body of an answer other than 200: a 400 or 500 from filter
    # reached its log as "failed filter with extender at URL ..., code 400", the reason
    # (an unknown node, a field it cannot read) lost. It reads ExtenderFilterResult.Error
    # of a 200 and logs it (or, for an extender not ignorable, fails the pod with it).
    w, _, client = world

    def counted(outcome: str) -> float:
        labels = {"outcome": outcome, "verb": "filter"}
        return w.metrics.registry.get_sample_value("stickypack_extender_requests_total", labels) or 0.0

    bad_before, large_before = counted("bad_request"), counted("too_large")
    unknown = json.dumps({"Pod": build_pod("e1"), "NodeNames": ["node-0", "ghost"]}).encode()
    for body, message in [
        (b"{not json", "request body is not valid JSON"),
        (b'{"Pod": 5, "NodeNames": []}', "ExtenderArgs.Pod must be a JSON object"),
        (unknown, "unknown node name(s): 'ghost'"),
        (b" " * (LIMIT + 1), f"exceeds the limit of {LIMIT} bytes"),
    ]:
        r = client.post("/filter", content=body, headers={"Content-Type": "application/json"})
        assert r.status_code == 200, r.text
        out = r.json()
        assert list(out) == ["Nodes", "NodeNames", "FailedNodes", "FailedAndUnresolvableNodes", "Error"]
        assert out["Nodes"] is None and out["NodeNames"] is None and message in out["Error"], out
    assert counted("bad_request") == bad_before + 3 and counted("too_large") == large_before + 1
    # prioritize's answer (a HostPriorityList) has no such field: an HTTP error it stays
    r = client.post("/prioritize", content=unknown, headers={"Content-Type": "application/json"})
    assert r.status_code == 400 and "unknown node name(s): 'ghost'" in r.json()["error"]
    assert post(client, "filter", {"Pod": build_pod("e2"), "NodeNames": w.names}).json()["Error"] == ""


def test_unknown_nodes_and_oversized_payloads(world) -> None:
    _w, _, client = world
    r = post(client, "prioritize", {"Pod": build_pod(), "NodeNames": ["node-0", "ghost"]})
    assert r.status_code == 400 and "unknown node name(s): 'ghost'" in r.json()["error"]
    big = {"Pod": build_pod(), "NodeNames": ["node-0"] * (LIMIT // 8)}
    assert "exceeds the limit" in error_of(post(client, "filter", big), "filter")

    def chunks():  # no Content-Length: the limit still holds while reading
        for _ in range(LIMIT // 1024 + 2):
            yield b" " * 1024

    assert "exceeds the limit" in error_of(client.post("/filter", content=chunks()), "filter")
    assert client.get("/healthz").status_code == 200


def test_unknown_nodes_can_be_failed_instead(world) -> None:
    w, _, _ = world
    w.extender.unknown_nodes = "fail"
    try:
        result, _ = w.extender.filter({"Pod": build_pod(), "NodeNames": ["node-0", "ghost"]})
        assert result["NodeNames"] == ["node-0"] and "ghost" in result["FailedAndUnresolvableNodes"]
        scores, _ = w.extender.prioritize({"Pod": build_pod("u"), "NodeNames": ["ghost", "node-1"]})
        assert {s["Host"] for s in scores} == {"ghost", "node-1"}
        # names sent by a client are answered but not cached: a request of many made-up
        # names once grew the reply cache by one entry each, for good
        many = [f"made-up-{i}" for i in range(500)]
        scores, _ = w.extender.prioritize({"Pod": build_pod("v"), "NodeNames": ["node-2", *many]})
        reply = json.loads(scores.to_json())
        assert reply[0]["Host"] == "node-2" and reply[1:] == [{"Host": n, "Score": 0} for n in many]
        assert reply == list(scores)
        assert not any(n.startswith("made-up-") for n in type(scores)._fragments)
    finally:
        w.extender.unknown_nodes = "reject"
        for key in list(w.cache.assumed):  # the clock is fixed: nothing would expire them
            w.cache._drop_assumption(key)


def test_health_ready_and_metrics(world) -> None:
    w, server, client = world
    assert client.get("/healthz").text == "ok"
    assert client.get("/readyz").status_code == 200
    assert client.get("/filter").status_code == 405

    def sample(name: str, labels: dict[str, str]) -> float:
        return w.metrics.registry.get_sample_value(name, labels) or 0.0

    requests = "stickypack_extender_requests_total"
    bad_before = sample(requests, {"outcome": "bad_request", "verb": "filter"})
    decided_before = sample("stickypack_extender_decisions_total", {"managed": "true", "verb": "prioritize"})
    assert (
        post(client, "prioritize", {"Pod": build_pod("m"), "NodeNames": ["node-0", "node-1"]}).status_code
        == 200
    )
    assert error_of(client.post("/filter", content=b"{not json"), "filter")  # this test's own bad request
    text = client.get("/metrics").text
    assert 'stickypack_extender_request_duration_seconds_bucket{le="0.005",verb="prioritize"}' in text
    assert 'stickypack_extender_decisions_total{managed="true",verb="prioritize"}' in text
    assert 'stickypack_extender_requests_total{outcome="bad_request",verb="filter"}' in text
    # counted once each, whatever the tests before this one sent to the shared service
    assert sample(requests, {"outcome": "bad_request", "verb": "filter"}) == bad_before + 1
    assert sample("stickypack_extender_decisions_total", {"managed": "true", "verb": "prioritize"}) == (
        decided_before + 1
    )
    server.call(lambda: w.cache._drop_assumption("binder/m"))


def test_every_verbs_error_series_is_exported_at_zero_from_the_start() -> None:
    # extender/metrics.py: an alert on increase() of a series that first appears at 1 would
    # never see the first internal error, so both verbs' (filter, prioritize) error series
    # exist at 0 before any request
    metrics = Metrics()
    requests = "stickypack_extender_requests_total"
    for verb in ("filter", "prioritize"):
        assert metrics.registry.get_sample_value(requests, {"verb": verb, "outcome": "error"}) == 0.0
    assert metrics.registry.get_sample_value(requests, {"verb": "filter", "outcome": "ok"}) is None


def test_assumed_total_counts_each_pod_counted_early_once() -> None:
    # it once counted every prioritize that predicted a node, also a pod already assumed,
    # and missed the pod filter counts when it leaves one node
    w = World(3)
    metrics = Metrics()

    def assumed() -> float:
        return metrics.registry.get_sample_value("stickypack_extender_assumed_total") or 0.0

    for _ in range(2):  # kube-scheduler retries the same pod
        metrics.decision(w.extender.prioritize({"Pod": build_pod("p"), "NodeNames": w.names})[1])
    assert assumed() == 1.0 and list(w.cache.assumed) == ["binder/p"]
    metrics.decision(w.extender.filter({"Pod": build_pod("q"), "NodeNames": ["node-0"]})[1])
    assert assumed() == 2.0 and w.cache.assumed["binder/q"] == "node-0"


def test_a_pod_scheduled_again_is_not_counted_against_itself() -> None:
    # kube-scheduler schedules a pod again when its binding or a later step of its cycle
    # failed; the extender's assumption from the first attempt once counted the pod on its
    # predicted node, so the retry saw that node one build fuller: here it was filtered out
    # at the load bound ("runs 3 builds", two of them real) and lost its score
    from stickypack.rendezvous import rendezvous_rank

    w = World(3)
    top = rendezvous_rank(w.names, REPO)[0]
    for i in range(2):  # two builds of other repos run on the repo's rendezvous top
        running = build_pod(f"running-{i}", repo=f"https://github.com/org/other-{i}", node_name=top)
        w.cache.pod_event("ADDED", {**running, "status": {"phase": "Running"}})
    assert w.extender.load_cap() == 3  # room for this build there
    with AppThread(w.app) as server, httpx.Client(base_url=server.url, timeout=10) as client:
        for _attempt in range(2):
            passed = post(client, "filter", {"Pod": build_pod("p"), "NodeNames": w.names}).json()
            assert passed["NodeNames"] == w.names and passed["FailedNodes"] == {}
            scores = post(client, "prioritize", {"Pod": build_pod("p"), "NodeNames": w.names}).json()
            assert max(scores, key=lambda s: s["Score"])["Host"] == top
            assert server.call(lambda: w.cache.assumed) == {"binder/p": top}
        text = client.get("/metrics").text
    assert "stickypack_extender_assumed_total 1.0" in text  # one pod counted early, once


def test_nodes_preemption_cannot_help_are_failed_as_unresolvable() -> None:
    # the load bound and a build's wait for its history node were once "FailedNodes", which
    # lets kube-scheduler's preemption evict pods there, for nothing: neither lowers a node's
    # build count nor ends the wait
    w = World(3)
    for i in range(3):  # node-0 runs three builds: at the bound (min_load_cap 3)
        running = build_pod(f"running-{i}", repo=f"https://github.com/org/other-{i}", node_name="node-0")
        w.cache.pod_event("ADDED", {**running, "status": {"phase": "Running"}})
    body, _ = w.extender.filter({"Pod": build_pod("b"), "NodeNames": w.names})
    assert body["NodeNames"] == ["node-1", "node-2"] and body["FailedNodes"] == {}
    assert body["FailedAndUnresolvableNodes"] == {"node-0": "LoadBound: node runs 3 builds, the bound is 3"}

    profile = select_profile(load_builtin("stickypack"), "stickypack-builds")
    delaying = Extender(
        w.cache,
        profile,
        filter_names=("ScaleDownAware", "DelayForLocality"),
        history=lambda: w.recorder.history,
        clock=lambda: NOW,
    )
    w.recorder.record(REPO, "node-1", NOW - 600)  # node-1 built the repo; it is full (not asked)
    young = build_pod("young")
    young["metadata"]["creationTimestamp"] = datetime.fromtimestamp(NOW, UTC).isoformat()
    body, _ = delaying.filter({"Pod": young, "NodeNames": ["node-2"]})
    assert body["NodeNames"] == [] and body["FailedNodes"] == {}
    assert list(body["FailedAndUnresolvableNodes"]) == ["node-2"]
    assert body["FailedAndUnresolvableNodes"]["node-2"].startswith(
        "DelayForLocality: the build waits for room"
    )


def test_nodes_filtered_counts_what_the_filters_removed_not_unknown_names() -> None:
    w = World(3)
    w.extender.unknown_nodes = "fail"
    metrics = Metrics()
    names = [*w.names, "doomed", "ghost-1", "ghost-2"]  # doomed: the autoscaler's taint
    metrics.decision(w.extender.filter({"Pod": build_pod("f"), "NodeNames": names})[1])
    assert metrics.registry.get_sample_value("stickypack_extender_nodes_filtered_total") == 1.0


def test_nodes_filtered_counts_each_node_one_filter_call_removed() -> None:
    # one filter call removing two known nodes adds 2: node-0 at the load bound (three
    # builds running, min_load_cap 3) and doomed (the autoscaler's taint)
    w = World(3)
    for i in range(3):
        running = build_pod(f"running-{i}", repo=f"https://github.com/org/other-{i}", node_name="node-0")
        w.cache.pod_event("ADDED", {**running, "status": {"phase": "Running"}})
    metrics = Metrics()
    body, decision = w.extender.filter({"Pod": build_pod("f"), "NodeNames": [*w.names, "doomed"]})
    assert body["NodeNames"] == ["node-1", "node-2"]
    metrics.decision(decision)
    assert metrics.registry.get_sample_value("stickypack_extender_nodes_filtered_total") == 2.0


def test_request_durations_are_observed_in_seconds_in_the_documented_buckets() -> None:
    # LATENCY_BUCKETS start at 0.5 ms; 0.4 ms falls in le=0.0005, 4 ms in le=0.005 (not in
    # le=0.003); the histogram is cumulative: le=0.005 counts both; sum 0.0044 s
    metrics = Metrics()
    metrics.observe("filter", "ok", 0.0004)
    metrics.observe("filter", "ok", 0.004)

    def bucket(le: str) -> float | None:
        name = "stickypack_extender_request_duration_seconds_bucket"
        return metrics.registry.get_sample_value(name, {"verb": "filter", "le": le})

    assert [bucket("0.0005"), bucket("0.003"), bucket("0.005"), bucket("+Inf")] == [1.0, 1.0, 2.0, 2.0]
    total = metrics.registry.get_sample_value(
        "stickypack_extender_request_duration_seconds_sum", {"verb": "filter"}
    )
    assert total == pytest.approx(0.0044)
    ok = metrics.registry.get_sample_value(
        "stickypack_extender_requests_total", {"verb": "filter", "outcome": "ok"}
    )
    assert ok == 2.0


def test_not_ready_is_503() -> None:
    w = World(2)
    app = make_app(w.extender, ready=lambda: ["pods cache not synced"])
    with AppThread(app) as server:
        r = httpx.get(server.url + "/readyz")
        assert r.status_code == 503 and "pods cache not synced" in r.text


def test_default_weight_matches_rendered_config() -> None:
    w = World(1)
    assert w.extender.weight == EXTENDER_WEIGHT


def test_default_extender_scores_with_the_build_profiles_own_scorers_but_build_spread() -> None:
    """The default extender runs every score plugin of the stickypack policy's build profile
    that kube-scheduler does not run itself, but BuildSpread (its counts are per process),
    in the configuration file's defaults and the engine's alike, and the rendered weight is
    their weight sum. NodeAge (weight 3: builds on the oldest nodes in a cluster of 10 nodes
    or more) was left out, so live builds ignored node age: with it, 85 of 97 random build
    cases of the live fidelity benchmark (``benchmarks/fidelity.py --policy stickypack``,
    seed 1) go where the simulated policy sends them, without it 72."""
    profile = select_profile(load_builtin("stickypack"), "stickypack-builds")
    weights = {s.plugin.name: s.weight for s in profile.scorers}
    own = set(weights) - KUBE_SCORERS - {"BuildSpread"}
    assert set(config_from_dict({}).score) == own
    assert {s.plugin.name for s in World(1).extender.scorers} == own
    assert sum(weights[name] for name in own) == EXTENDER_WEIGHT


def test_default_extender_sends_builds_without_a_cache_node_to_the_oldest_nodes() -> None:
    """Twelve empty nodes, created a minute apart, none in the rendezvous top 3 of the repo
    that is not excluded: the older the node, the higher its score (NodeAge), as the
    policy's build profile ranks them."""
    cache = ClusterCache(clock=lambda: NOW, ttl_clock=lambda: NOW)
    names = [f"aged-{i}" for i in range(12)]
    for i, name in enumerate(names):
        obj = node(name)
        stamp = datetime.fromtimestamp(NOW - 3600 + 60 * i, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        obj["metadata"]["creationTimestamp"] = stamp
        cache.node_event("ADDED", obj)
    profile = select_profile(load_builtin("stickypack"), "stickypack-builds")
    extender = Extender(cache, profile, clock=lambda: NOW)
    from stickypack.rendezvous import rendezvous_rank

    ranked = rendezvous_rank(names, REPO)[:3]
    scores = {e["Host"]: e["Score"] for e in extender.prioritize({"Pod": build_pod(), "NodeNames": names})[0]}
    by_age = [scores[n] for n in names if n not in ranked]  # oldest first
    assert by_age == sorted(by_age, reverse=True) and by_age[0] > by_age[-1], scores


def test_config_errors_name_file_and_field(tmp_path) -> None:
    path = tmp_path / "extender.yaml"
    path.write_text("history:\n  ttl_s: soon\nlisten: {port: 99999}\n")
    with pytest.raises(ConfigError) as err:
        load_config(path)
    text = str(err.value)
    assert str(path) in text and "history.ttl_s" in text and "listen.port" in text
    path.write_text("pods:\n  manage: component\n")
    with pytest.raises(ConfigError, match=r"pods\.manage"):
        load_config(path)
    path.write_text("polcy: x\n")
    with pytest.raises(ConfigError, match="polcy"):
        load_config(path)
    path.write_text("listen:\n  port: 1\n host: x\n")
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert str(err.value).startswith(f"{path}:3:2: not valid YAML:") and "\n" not in str(err.value)
    path.write_text("pods:\n  manage: 5\n")  # once an AttributeError traceback
    with pytest.raises(ConfigError, match=r"pods\.manage: .*a label selector is 'key=value"):
        load_config(path)
    cfg = config_from_dict({"pods": {"manage": "component=binderhub-build,app=binder"}})
    assert cfg.pods.manage == {"component": "binderhub-build", "app": "binder"}
    assert load_config(None).profile == "stickypack-builds"
    # these once passed --check and failed only against the cluster, or never flushed
    for text, where in [
        ("history: {namespace: NOT VALID}\n", "history.namespace"),
        ("history: {name: Bad_Name!}\n", "history.name"),
        ("history: {flush_interval_s: .inf}\n", "history.flush_interval_s"),
        ("cluster: {resync_s: .inf}\n", "cluster.resync_s"),
        ("cluster: {assume_ttl_s: .nan}\n", "cluster.assume_ttl_s"),
        ("cluster: {gpu_labels: [ok.example/gpu, 'no spaces']}\n", "cluster.gpu_labels"),
        ("cluster: {gpu_labels: a.example/gpu}\n", "cluster.gpu_labels"),
        (
            "cluster: {node_group_labels: ['no spaces']}\n",
            "node_group_labels: 'no spaces' is not a label key",
        ),
        (
            "cluster: {node_group_min_sizes: {pool-a: -1}}\n",
            "min_sizes: 'pool-a': a minimum size must be >= 0",
        ),
        ("cluster: {node_group_min_sizes: {'': 1}}\n", "min_sizes: a node group's name must not be empty"),
        ("cluster: {node_group_min_sizes: {pool-a: two}}\n", "cluster.node_group_min_sizes.pool-a"),
        ("cluster: {dra: maybe}\n", "cluster.dra"),
        ("cluster: {utilization_threshold: -0.1}\n", "cluster.utilization_threshold"),
        ("cluster: {utilization_threshold: 1.01}\n", "cluster.utilization_threshold"),
        ("cluster: {gpu_utilization_threshold: .nan}\n", "cluster.gpu_utilization_threshold"),
        # a score plugin named twice once counted twice (weight doubled) without a word
        ("score: [ScaleDownAware, ScaleDownAware]\n", "score: ScaleDownAware given more"),
        ("filters: [ScaleDownAware, ScaleDownAware]\n", "filters: ScaleDownAware given more"),
    ]:
        path.write_text(text)
        with pytest.raises(ConfigError, match=where.replace(".", r"\.")):
            load_config(path)
    path.write_text("pods:\n  manage: {component: }\n")  # a null value is the empty value
    assert load_config(path).pods.manage == {"component": ""}
    assert load_config(None).cluster.gpu_labels == [
        "cloud.google.com/gke-accelerator",
        "k8s.amazonaws.com/accelerator",
    ]
    path.write_text(
        "cluster: {gpu_labels: [kubernetes.azure.com/accelerator, kubernetes.azure.com/accelerator]}\n"
    )
    assert load_config(path).cluster.gpu_labels == ["kubernetes.azure.com/accelerator"]
    path.write_text(
        "cluster: {node_group_labels: [a.example/pool, a.example/zone], node_group_min_sizes: {p/z: 2}}\n"
    )
    cluster = load_config(path).cluster
    assert (cluster.node_group_labels, cluster.node_group_min_sizes) == (
        ["a.example/pool", "a.example/zone"],
        {"p/z": 2},
    )
    assert (load_config(None).cluster.node_group_labels, load_config(None).cluster.node_group_min_sizes) == (
        [],
        {},
    )
    assert load_config(None).cluster.dra is False  # the autoscaler's default
    path.write_text("cluster: {dra: true}\n")
    assert load_config(path).cluster.dra is True
    # the autoscaler takes a threshold of 0 (its flags check no range): only a node whose pods
    # request nothing is then underutilized
    path.write_text("cluster: {utilization_threshold: 0, gpu_utilization_threshold: 0.0}\n")
    cluster = load_config(path).cluster
    assert (cluster.utilization_threshold, cluster.gpu_utilization_threshold) == (0, 0)


# docs/operator-guide.md's table of the extender's keys gives these ranges; each end it names
# is taken and the value just past it refused, with the key named.
_LONG_HOST = ".".join(["a" * 63, "b" * 63, "c" * 63, "d" * 61])  # 63+1+63+1+63+1+61 = 253 characters
_LONG_PREFIX = ".".join(["a" * 63, "b" * 63, "c" * 63, "d" * 57])  # 63+1+63+1+63+1+57 = 249 characters


@pytest.mark.parametrize(
    ("section", "key", "value"),
    [
        ("listen", "port", 0),  # port 0..65535 (0: any free port)
        ("listen", "port", 65535),
        ("listen", "host", ""),  # empty: every interface, as asyncio's create_server takes it
        ("listen", "host", _LONG_HOST),  # a host name of 253 characters, RFC 1123's limit
        ("history", "shards", 1),  # 1..64
        ("history", "shards", 64),
        ("history", "max_bytes", 1024),  # 1024..1000000
        ("history", "max_bytes", 1_000_000),
        ("history", "max_annotation_bytes", 1024),  # 1024..204800
        ("history", "max_annotation_bytes", 204_800),
        ("history", "flush_interval_s", 0),  # >= 0: every operation written at once
        ("history", "max_nodes_per_repo", 1),  # >= 1
        ("history", "max_repos", 1),  # >= 1
        ("history", "name", _LONG_PREFIX),  # a DNS subdomain of at most 249 characters
        ("cluster", "watch_timeout_s", 1),  # >= 1
        ("cluster", "assume_ttl_s", 0),  # >= 0: an assumption lapses at once
        ("cluster", "utilization_threshold", 1),  # in [0, 1]
        ("cluster", "gpu_utilization_threshold", 1),
        ("cluster", "node_group_min_sizes", {"pool-a": 0}),  # sizes >= 0
        ("", "max_request_bytes", 1024),  # >= 1024
    ],
)
def test_config_takes_the_ends_of_each_documented_range(section: str, key: str, value: object) -> None:
    raw: dict = {key: value} if not section else {section: {key: value}}
    config = config_from_dict(raw)
    got = getattr(getattr(config, section) if section else config, key)
    assert got == value


@pytest.mark.parametrize(
    ("section", "key", "value"),
    [
        ("listen", "port", -1),
        ("listen", "port", 65536),
        ("listen", "host", _LONG_HOST + "d"),  # 254 characters: no host name
        ("history", "shards", 0),
        ("history", "shards", 65),
        ("history", "ttl_s", 0),  # > 0
        ("history", "max_bytes", 1023),
        ("history", "max_bytes", 1_000_001),
        ("history", "max_annotation_bytes", 1023),
        ("history", "max_annotation_bytes", 204_801),
        ("history", "flush_interval_s", -0.1),
        ("history", "max_nodes_per_repo", 0),
        ("history", "max_repos", 0),
        ("history", "name", _LONG_PREFIX + "d"),  # 250: <name>-63 would pass 253
        ("cluster", "resync_s", 0),  # > 0
        ("cluster", "watch_timeout_s", 0),
        ("cluster", "assume_ttl_s", -1),
        ("cluster", "dra_retry_s", 0),  # > 0
        ("cluster", "gpu_utilization_threshold", 1.01),
        ("", "max_request_bytes", 1023),
    ],
)
def test_config_refuses_a_value_past_a_documented_range_naming_it(
    section: str, key: str, value: object
) -> None:
    raw: dict = {key: value} if not section else {section: {key: value}}
    with pytest.raises(ConfigError) as err:
        config_from_dict(raw, "extender.yaml")
    assert f"extender.yaml: {section + '.' if section else ''}{key}" in str(err.value)


def test_a_configured_history_namespace_wins_over_pod_namespace(monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/operator-guide.md: ``history.namespace`` defaults to $POD_NAMESPACE, else
    ``default``; a namespace the file names is used whatever $POD_NAMESPACE says."""
    monkeypatch.setenv("POD_NAMESPACE", "binder")
    assert config_from_dict({"history": {"namespace": "hist"}}).history.resolved_namespace() == "hist"
    assert config_from_dict({}).history.resolved_namespace() == "binder"
    monkeypatch.delenv("POD_NAMESPACE")
    assert config_from_dict({}).history.resolved_namespace() == "default"


def test_a_null_selector_is_the_empty_one() -> None:
    """``pods.builder_selector: null`` selects every pod (every node a candidate build node,
    docs/operator-guide.md), not the default selector."""
    assert config_from_dict({"pods": {"builder_selector": None}}).pods.builder_selector == {}


def test_a_port_flag_out_of_range_is_refused(capsys) -> None:
    from stickypack.cli import main

    assert main(["extender", "--check", "--port", "99999"]) == 2
    assert "--port must be in 0..65535, got 99999" in capsys.readouterr().err


def test_the_port_flag_takes_0_to_65535(capsys) -> None:
    """``--port`` is a TCP port, 0 (any free port) to 65535 = 2**16 - 1, both ends taken and
    one past each refused, for both services (their shared ``_listen_overrides``)."""
    from stickypack.cli import main

    for command in ("extender", "webhook"):
        for port in ("0", "65535"):
            assert main([command, "--check", "--port", port]) == 0, (command, port)
            assert "configuration ok" in capsys.readouterr().out
        for port in ("-1", "65536"):
            assert main([command, "--check", "--port", port]) == 2, (command, port)
            assert f"--port must be in 0..65535, got {port}" in capsys.readouterr().err


def test_unknown_plugin_in_config_is_refused() -> None:
    from stickypack.core.policy import PolicyError

    profile = select_profile(load_builtin("stickypack"), "stickypack-builds")
    with pytest.raises(PolicyError, match="no score plugin"):
        Extender(ClusterCache(), profile, score_names=["NoSuchPlugin"])
    with pytest.raises(PolicyError, match="no profile"):
        select_profile(load_builtin("stickypack"), "nope")


def test_an_unknown_plugin_in_the_config_file_names_the_file(tmp_path, capsys) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("filters: [ScaleDownAware, Foo]\n")
    from stickypack.cli import main

    assert main(["extender", "--config", str(cfg), "--check"]) == 2
    err = capsys.readouterr().err
    assert f"{cfg}: profile 'stickypack-builds' has no filter plugin(s) ['Foo']" in " ".join(err.split())


def test_a_misspelled_policy_lists_the_built_in_ones(tmp_path, capsys, monkeypatch) -> None:
    # the extender's `policy:` and `inspect --policy` take a built-in name or a file; a
    # misspelled name said only that no such file could be read
    from stickypack.cli import main

    monkeypatch.chdir(tmp_path)
    cfg = tmp_path / "c.yaml"
    cfg.write_text("policy: stikypack\n")
    pod = tmp_path / "pod.yaml"
    pod.write_text("kind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, image: x}]}\n")
    hint = "stikypack: not a built-in policy (default, z2jh, binderhub, stickypack, oracle) nor a file"
    for argv in (
        ["extender", "--config", str(cfg), "--check"],
        ["inspect", "--pod", str(pod), "--policy", "stikypack"],
    ):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert hint in err and err.count("\n") == 1, err


# ---- fuzzing ---------------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(verb=st.sampled_from(["filter", "prioritize"]), body=st.binary(max_size=512))
def test_fuzz_random_bytes(world, verb: str, body: bytes) -> None:
    _, _, client = world
    r = client.post(f"/{verb}", content=body)
    assert r.status_code in (200, 400), r.text
    assert isinstance(r.json(), dict | list)
    if r.status_code == 400 or (verb == "filter" and r.json()["Error"]):
        assert error_of(r, verb)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    verb=st.sampled_from(["filter", "prioritize"]),
    pod=st.one_of(json_values, st.builds(lambda: build_pod("f"))),
    names=st.one_of(
        json_values, st.lists(st.sampled_from(["node-0", "node-3", "doomed", "ghost", ""]), max_size=6)
    ),
    extra=st.dictionaries(st.sampled_from(["Nodes", "X", "Pod"]), json_values, max_size=2),
)
def test_fuzz_structured_requests(world, verb: str, pod: Any, names: Any, extra: dict) -> None:
    _w, _, client = world
    body = {"Pod": pod, "NodeNames": names, **extra}
    r = post(client, verb, body)
    assert r.status_code in (200, 400), r.text
    if r.status_code == 400 or (verb == "filter" and r.json()["Error"]):
        assert error_of(r, verb)
    elif verb == "filter":
        out = r.json()
        assert set(out["NodeNames"]) <= set(body["NodeNames"] or [])
        assert "ghost" not in out["NodeNames"]
    else:
        assert all(0 <= s["Score"] <= 10 for s in r.json())


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(size=st.integers(min_value=LIMIT + 1, max_value=4 * LIMIT))
def test_fuzz_oversized(world, size: int) -> None:
    _, _, client = world
    r = client.post("/prioritize", content=b"x" * size)
    assert r.status_code == 400 and "exceeds the limit" in r.json()["error"]


def test_service_still_serves_after_fuzzing(world) -> None:
    w, server, client = world
    server.call(lambda: [w.cache._drop_assumption(k) for k in list(w.cache.assumed)])
    r = post(client, "filter", {"Pod": build_pod("after"), "NodeNames": w.names})
    assert r.status_code == 200 and r.json()["NodeNames"] == w.names
    assert client.get("/healthz").status_code == 200
    errors = [
        sample.value
        for family in text_string_to_metric_families(client.get("/metrics").text)
        for sample in family.samples
        if sample.name == "stickypack_extender_requests_total" and sample.labels.get("outcome") == "error"
    ]
    assert errors and set(errors) == {0.0}  # no request ever hit an internal error


def test_score_scale_max_gives_the_best_node_ten() -> None:
    w = World(5)
    w.extender.score_scale = "max"
    scores, _ = w.extender.prioritize({"Pod": build_pod("s"), "NodeNames": w.names})
    assert max(s["Score"] for s in scores) == 10
    w.extender.score_scale = "absolute"
    scores, _ = w.extender.prioritize({"Pod": build_pod("t"), "NodeNames": w.names})
    assert max(s["Score"] for s in scores) < 10  # rendezvous top only: 60/100 of BuildLocality


def test_headers_past_the_cap_are_refused_and_the_service_serves_on(world) -> None:
    # with httptools, one endless header grew the process by hundreds of MB
    from stickypack.extender.server import MAX_HEADER_BYTES

    _w, _, client = world
    big = {"X-Big": "a" * (16 * MAX_HEADER_BYTES)}  # h11 checks while a request is incomplete
    r = client.post("/prioritize", content=b"{}", headers=big)
    assert r.status_code == 400 and "Invalid HTTP request" in r.text  # h11's refusal, not the app's
    small = {"X-Big": "a" * (MAX_HEADER_BYTES // 2)}
    assert client.post("/prioritize", content=b"{}", headers=small).json()["error"]  # the app's answer
    assert client.get("/healthz").status_code == 200


def test_headers_arriving_in_pieces_are_buffered_up_to_the_cap(world) -> None:
    """h11 bounds only what it buffers of a request not yet complete: 40000 bytes of one
    header sent, then (after a pause, so the server has read them) the rest, stay under
    MAX_HEADER_BYTES (65536) and are served; h11's own default (16384) would refuse them."""
    import socket
    import time

    from stickypack.extender.server import MAX_HEADER_BYTES

    _w, server, _ = world
    assert 16 * 1024 < 40_000 < MAX_HEADER_BYTES == 64 * 1024
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 40_000)
        time.sleep(0.3)
        sock.sendall(b"\r\nConnection: close\r\n\r\n")
        sock.settimeout(10)
        answer = b""
        while chunk := sock.recv(4096):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 200"), answer[:200]


def test_requests_past_the_connection_cap_get_503_and_the_service_serves_on() -> None:
    """uvicorn_config caps what clients can hold at MAX_CONNECTIONS (1024) connections:
    with 1023 idle ones open, a request on one more is the 1024th connection and is
    answered 503 at once; once the idle ones close, requests are served again."""
    import resource
    import socket
    import time

    from stickypack.extender.server import MAX_CONNECTIONS

    assert MAX_CONNECTIONS == 1024
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = 2 * MAX_CONNECTIONS + 256  # both ends of every connection are in this process
    if soft < need:
        if hard != resource.RLIM_INFINITY and hard < need:
            missing(f"the test needs {need} open files, the hard limit is {hard}", "raise `ulimit -Hn`")
        resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))
    w = World(2)
    with AppThread(make_app(w.extender, metrics=w.metrics)) as server:
        idle = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(MAX_CONNECTIONS - 1)]
        try:
            # accepted in order: the server has taken the idle ones when it reads this request
            with httpx.Client(base_url=server.url, timeout=10) as client:
                r = client.get("/healthz")
            assert r.status_code == 503 and "Service Unavailable" in r.text
        finally:
            for sock in idle:
                sock.close()
        deadline = time.monotonic() + 10
        while (
            status := httpx.get(server.url + "/healthz").status_code
        ) != 200 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert status == 200


def test_the_history_settings_reach_the_store_and_the_recorders_limits() -> None:
    """``history_limits`` and ``make_store`` carry each ``history`` key to its place: ttl
    60 s, 2 nodes per repo, 5 repos, 2048 bytes; the node-annotation store's 4096-byte
    annotation."""
    import asyncio

    from kubernetes_asyncio.client import ApiClient

    from stickypack.extender.server import history_limits, make_store
    from stickypack.kube.history import Limits, NodeAnnotationHistoryStore

    config = config_from_dict(
        {
            "history": {
                "store": "node-annotations",
                "ttl_s": 60,
                "max_nodes_per_repo": 2,
                "max_repos": 5,
                "max_bytes": 2048,
                "max_annotation_bytes": 4096,
            }
        }
    )
    assert history_limits(config) == Limits(ttl_s=60.0, max_nodes_per_repo=2, max_repos=5, max_bytes=2048)

    async def store_of() -> object:
        async with ApiClient() as api:  # no call is made
            return make_store(config, api)

    store = asyncio.run(store_of())
    assert isinstance(store, NodeAnnotationHistoryStore) and store.max_annotation_bytes == 4096


def test_dra_stays_active_through_a_server_error_but_not_a_refusal() -> None:
    """``ExtenderService.dra_active`` once both DRA informers have listed: a watch answered
    500 or 429 (the API server busy or failing: retried, the readings kept) leaves nodes
    weighed by their devices; 401, 403 or 404 (the right taken away, the API no longer
    served: the readings would only grow stale) does not. The informers' own handling of
    those answers, on a real API server: tests/test_extender_e2e.py."""
    from stickypack.extender.server import DRA_KINDS, ExtenderService
    from stickypack.kube.informer import Informer

    async def never(**_: Any) -> Any:
        raise AssertionError("not listed here")

    service = ExtenderService(config_from_dict({"cluster": {"dra": True}}))
    service.dra_listed = True
    informers = {kind: Informer(kind, never) for kind in DRA_KINDS}
    service.informers.update(informers)
    assert service.dra_active() is False  # not listed yet
    for inf in informers.values():
        inf.synced.set()
    assert service.dra_active() is True
    for status, active in ((500, True), (429, True), (403, False), (401, False), (404, False), (None, True)):
        informers["resourceclaims"].stats.refused_status = status
        assert service.dra_active() is active, status


def test_a_service_not_started_says_what_its_readiness_waits_for() -> None:
    """``ExtenderService.not_ready`` before ``start()`` (no informer yet): "not started";
    with ``cluster.dra`` also the DRA objects, not yet listed, and only then."""
    from stickypack.extender.server import ExtenderService

    assert ExtenderService(config_from_dict({})).not_ready() == ["not started"]
    with_dra = ExtenderService(config_from_dict({"cluster": {"dra": True}}))
    assert with_dra.not_ready() == ["not started", "DRA objects not listed yet"]
    assert with_dra.dra_active() is False


def test_a_stalled_body_gets_408_while_others_are_served() -> None:
    import socket

    w = World(3)
    app = make_app(w.extender, metrics=w.metrics, body_timeout_s=0.5)
    with AppThread(app) as server, httpx.Client(base_url=server.url, timeout=10) as client:
        stalled = socket.create_connection(("127.0.0.1", server.port))
        try:
            stalled.sendall(b"POST /prioritize HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{")
            meanwhile = {"Pod": build_pod("meanwhile"), "NodeNames": w.names}
            assert post(client, "filter", meanwhile).status_code == 200
            stalled.settimeout(5)  # a missing 408 fails the test by timing out here
            answer = read_answer(stalled, b"not received within")
            assert answer.startswith(b"HTTP/1.1 408") and b"not received within 0.5 s" in answer
        finally:
            stalled.close()
        assert 'outcome="timeout"' in client.get("/metrics").text


def test_the_services_wait_10_s_for_a_body_before_408() -> None:
    """The extender's and the webhook's apps as their services build them (no timeout given):
    a body not received within 10 s (docs/operator-guide.md) gets 408, not sooner. One wait
    of 10 s for both."""
    import socket
    import time

    from stickypack.extender.server import ExtenderService
    from stickypack.webhook.app import WebhookMetrics
    from stickypack.webhook.config import WebhookConfig
    from stickypack.webhook.server import build_app

    extender_app = ExtenderService(config_from_dict({})).app
    webhook_app = build_app(WebhookConfig(), WebhookMetrics())
    with AppThread(extender_app) as extender, AppThread(webhook_app) as webhook:
        stalled: list[socket.socket] = []
        start = time.monotonic()
        try:
            for server, path in ((extender, "/prioritize"), (webhook, "/mutate")):
                conn = socket.create_connection(("127.0.0.1", server.port))
                conn.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{{".encode())
                stalled.append(conn)
            for conn in stalled:
                conn.settimeout(30)  # a missing 408 fails the test by timing out here
                answer = read_answer(conn, b"not received within")
                assert answer.startswith(b"HTTP/1.1 408") and b"not received within 10 s" in answer
                assert time.monotonic() - start >= 9.5
        finally:
            for conn in stalled:
                conn.close()


def test_a_pod_asking_for_too_many_resources_is_a_bad_request(world) -> None:
    # each new resource name was a column added to every node's row: thousands of made-up
    # names in one request once blocked the service for minutes
    w, _, client = world
    pod = build_pod("greedy")
    requests = {f"example.com/r{i}": "1" for i in range(40)}
    pod["spec"]["containers"][0]["resources"]["requests"].update(requests)
    columns = len(w.cache.table.resources)
    r = post(client, "prioritize", {"Pod": pod, "NodeNames": w.names})
    assert r.status_code == 400 and "42 distinct resources requested; at most 32" in r.json()["error"]
    assert len(w.cache.table.resources) == columns
    assert client.get("/healthz").status_code == 200


def test_rendezvous_scores_are_reused_across_decisions(monkeypatch) -> None:
    # once BuildLocality's cache key was renamed and the extender, which keeps keys by
    # prefix, dropped them after every decision: kube-scheduler's throughput fell by 25%
    import stickypack.core.plugins.builds as builds

    w = World(5)
    calls = []
    real = builds.rendezvous_rank

    def counting(buckets, key):
        calls.append(key)
        return real(buckets, key)

    monkeypatch.setattr(builds, "rendezvous_rank", counting)
    for i in range(3):
        w.extender.prioritize({"Pod": build_pod(f"b{i}"), "NodeNames": w.names})
    assert calls == [REPO]  # ranked once, reused by the next two decisions


def test_rendezvous_scores_follow_the_builder_nodes_within_the_minute() -> None:
    # The epoch was once keyed by id() of the builder-node list: a new list often got the
    # freed list's id back, so for up to a minute a node whose builder pod had gone kept
    # its rendezvous score.
    w = World(6)
    dind = {"component": "image-builder", "app": "binder"}

    def builder(i: int) -> dict:
        return {
            "metadata": {"name": f"dind-{i}", "namespace": "binder", "uid": f"d{i}", "labels": dind},
            "spec": {"nodeName": f"node-{i}", "containers": [{"name": "d"}]},
            "status": {"phase": "Running"},
        }

    from stickypack.rendezvous import rendezvous_rank

    for i in range(6):
        w.cache.pod_event("ADDED", builder(i))
    top = rendezvous_rank(w.names, REPO)[0]

    def best(pod: str) -> str:
        scores, _ = w.extender.prioritize({"Pod": build_pod(pod), "NodeNames": w.names})
        return max(scores, key=lambda s: s["Score"])["Host"]

    assert best("b1") == top
    w.cache.pod_event("DELETED", builder(w.names.index(top)))
    rest = [n for n in w.names if n != top]
    assert w.cache.builder_nodes() == rest
    assert best("b2") == rendezvous_rank(rest, REPO)[0] != top


def test_other_context_cache_keys_last_one_decision() -> None:
    from stickypack.core.plugins import BuildLocality

    w = World(5)
    ctx = w.extender._ctx()
    ctx.cache["scratch"] = 1
    ctx.cache.setdefault("scratch2", 2)
    ctx.cache[BuildLocality.RENDEZVOUS_CACHE_PREFIX + "r"] = {"n": 1}
    later = w.extender._ctx()
    assert later.cache is ctx.cache  # the same epoch: the same cache
    assert dict(later.cache) == {BuildLocality.RENDEZVOUS_CACHE_PREFIX + "r": {"n": 1}}


def test_unknown_paths_get_a_json_error_and_are_counted(world) -> None:
    # a scheduler configuration naming another verb (filterVerb: filtr) or a client using
    # GET got its 404 or 405 and left no trace in the metrics: requests_total showed no
    # request at all, as if kube-scheduler never called
    w, _, client = world

    def counted(verb: str, outcome: str) -> float:
        labels = {"outcome": outcome, "verb": verb}
        return w.metrics.registry.get_sample_value("stickypack_extender_requests_total", labels) or 0.0

    cases = [
        ("POST", "/filter/", 404, "", "not_found"),
        ("GET", "/nope", 404, "", "not_found"),
        ("POST", "/stickypack/filtr", 404, "", "not_found"),
        ("POST", "/healthz", 405, "", "method_not_allowed"),
        ("GET", "/filter", 405, "filter", "method_not_allowed"),
        ("PUT", "/stickypack/prioritize", 405, "prioritize", "method_not_allowed"),
    ]
    for method, path, status, verb, outcome in cases:
        before = counted(verb, outcome)
        r = client.request(method, path)
        assert r.status_code == status and path in r.json()["error"]
        assert counted(verb, outcome) == before + 1, (method, path)
    assert client.get("/healthz").status_code == 200


def test_the_verbs_answer_under_the_path_render_accepts(world, tmp_path) -> None:
    # render takes --extender-url http://HOST[:PORT]/PATH and kube-scheduler posts to
    # PATH/filter, which once got 404: the extender, ignorable, was silently never used
    import yaml

    from stickypack.cli import main

    w, server, client = world
    out = tmp_path / "s.yaml"
    url = f"{server.url}/stickypack/"
    args = ["render", "scheduler-config", "--profiles", "stickypack-builds", "--extender-url", url]
    assert main([*args, "-o", str(out)]) == 0
    prefix = yaml.safe_load(out.read_text())["extenders"][0]["urlPrefix"]
    # the trailing / dropped, as kube-scheduler's HTTPExtender.send drops it
    # (strings.TrimRight(extenderURL, "/") + "/" + verb, pkg/scheduler/extender.go)
    assert prefix == f"{server.url}/stickypack"
    pod = build_pod("prefixed")
    pod["metadata"]["labels"] = {"component": "singleuser-server"}  # passed through: no assumption
    for verb in ("filter", "prioritize"):
        body = json.dumps({"Pod": pod, "NodeNames": w.names})
        r = httpx.post(f"{prefix}/{verb}", content=body, headers={"Content-Type": "application/json"})
        assert r.status_code == 200, r.text
        assert r.json() == post(client, verb, json.loads(body)).json()
    assert client.post("/stickypack/filter/").status_code == 404


def test_check_prints_the_weight_render_takes_for_a_custom_score_list(tmp_path, capsys) -> None:
    import yaml

    from stickypack.cli import main

    cfg = tmp_path / "c.yaml"
    cfg.write_text("score: [BuildLocality, ScaleDownAware, BuildSpread]\n")  # weights 10 + 2 + 5
    assert main(["extender", "--config", str(cfg), "--check"]) == 0
    assert "extender weight 17" in capsys.readouterr().out
    out = tmp_path / "s.yaml"
    args = ["render", "scheduler-config", "--profiles", "stickypack-builds", "-o", str(out)]
    assert main([*args, "--extender-url", "http://x:8888", "--extender-weight", "17"]) == 0
    assert yaml.safe_load(out.read_text())["extenders"][0]["weight"] == 17
    assert main([*args, "--extender-url", "http://x:8888", "--extender-weight", "0"]) == 2


def test_a_user_pod_extender_serves_drain_forecast_from_pod_ages() -> None:
    """The ``stickypack`` user-pod profile's DrainForecast, served live: creation times come
    from the watched pods, and the node whose one session is two hours old (likely to run
    on) outranks the node of three one-minute-old sessions (likely all gone within the
    hour), which outranks the empty node."""
    import datetime

    def user_pod(name: str, node_name: str, age_s: float) -> dict:
        created = datetime.datetime.fromtimestamp(NOW - age_s, datetime.UTC)
        return {
            "metadata": {
                "name": name,
                "namespace": "jhub",
                "uid": f"uid-{name}",
                "labels": {"component": "singleuser-server"},
                "creationTimestamp": created.strftime("%Y-%m-%dT%H:%M:%SZ"),
            },
            "spec": {
                "nodeName": node_name,
                "containers": [{"name": "n", "resources": {"requests": {"cpu": "100m", "memory": "1Gi"}}}],
            },
            "status": {"phase": "Running"},
        }

    cache = ClusterCache(clock=lambda: NOW, ttl_clock=lambda: NOW)
    for name in ("young", "old", "empty"):
        cache.node_event("ADDED", node(name))
    for k in range(3):
        cache.pod_event("ADDED", user_pod(f"new-{k}", "young", 60.0))
    cache.pod_event("ADDED", user_pod("long", "old", 7200.0))
    extender = Extender(
        cache,
        select_profile(load_builtin("stickypack"), "stickypack"),
        filter_names=["ScaleDownAware"],
        score_names=["DrainForecast"],
        manage={"component": "singleuser-server"},
        clock=lambda: NOW,
    )
    incoming = user_pod("incoming", "", 0.0)
    del incoming["spec"]["nodeName"]
    with AppThread(make_app(extender, metrics=Metrics())) as server, httpx.Client(base_url=server.url) as c:
        r = post(c, "prioritize", {"Pod": incoming, "NodeNames": ["young", "old", "empty"]})
    assert r.status_code == 200
    scores = {s["Host"]: s["Score"] for s in r.json()}
    assert scores["old"] > scores["young"] > scores["empty"]


def test_the_prediction_counts_kube_schedulers_image_locality() -> None:
    # ImageLocality is one of kube-scheduler's own scorers: the extender's prediction of the
    # node kube-scheduler binds (the pod counted there early) once left it out, and so
    # assumed the build on the rendezvous top while the scheduler went to the image's node
    from stickypack.core.policy import policy_from_dict
    from stickypack.rendezvous import rendezvous_rank

    policy = policy_from_dict(
        {
            "name": "images",
            "profiles": [
                {
                    "name": "builds",
                    "filters": ["NodeResourcesFit"],
                    "score": [{"plugin": "BuildLocality"}, {"plugin": "ImageLocality", "weight": 100}],
                }
            ],
        }
    )
    cache = ClusterCache(clock=lambda: NOW, ttl_clock=lambda: NOW)
    names = ["node-0", "node-1", "node-2"]
    top = rendezvous_rank(names, REPO)[0]
    holder = next(n for n in names if n != top)
    for name in names:
        obj = node(name)
        if name == holder:
            obj["status"]["images"] = [{"names": ["quay.io/r2d:1"], "sizeBytes": 3000 * 1024**2}]
        cache.node_event("ADDED", obj)
    extender = Extender(
        cache, policy.profiles[0], filter_names=[], score_names=["BuildLocality"], clock=lambda: NOW
    )
    pod = build_pod("img")
    pod["spec"]["containers"][0]["image"] = "quay.io/r2d:1"
    scores, _ = extender.prioritize({"Pod": pod, "NodeNames": names})
    assert max(scores, key=lambda s: s["Score"])["Host"] == top  # the extender's own part
    assert cache.assumed == {"binder/img": holder}  # kube-scheduler's total: the image wins


@pytest.mark.parametrize(
    ("pods", "recorded"),
    [
        ({}, {"component": "binderhub-build"}),  # the default: the builds it places
        # the operator guide's user-pod extender: no build pod is one it manages
        ({"manage": "component=singleuser-server"}, None),
        ({"manage": "component=binderhub-build,release=a"}, {"component": "binderhub-build", "release": "a"}),
        ({"manage": "release=a", "build_selector": "component=x"}, {"component": "x", "release": "a"}),
        ({"manage": {}, "build_selector": {}}, {}),
    ],
)
def test_an_extender_records_the_ends_of_the_build_pods_it_manages(
    pods: dict, recorded: dict[str, str] | None
) -> None:
    assert config_from_dict({"pods": pods}).pods.recorded_builds() == recorded


@pytest.mark.parametrize("store", ["configmap", "node-annotations", "memory"])
def test_an_extender_that_records_no_build_ends_needs_no_write_rights(store: str) -> None:
    """The operator guide's user-pod extender only reads the history: it needs no right to
    create, update or patch, in any store; the build extender with the same history does.
    The reader lacks exactly the writer's write calls: the ConfigMap store's create and
    update (it reads its ConfigMaps by get, as the writer does); the node-annotation store's
    patch and the get that follows a write conflict (it reads by listing the Nodes)."""
    from stickypack.extender.server import api_rights
    from stickypack.kube.client import ApiRight

    history = {"store": store, "namespace": "binder"}
    writer = api_rights(config_from_dict({"history": history}))
    reader = api_rights(
        config_from_dict({"history": history, "pods": {"manage": "component=singleuser-server"}})
    )
    writes = {"create", "update", "patch"}
    assert not {r for r in reader if r.verb in writes}
    assert reader <= writer
    only_the_writer = {
        "configmap": {ApiRight("", "configmaps", v, "binder") for v in ("create", "update")},
        "node-annotations": {ApiRight("", "nodes", v) for v in ("get", "patch")},
        "memory": set(),
    }
    assert writer - reader == only_the_writer[store]
    if store == "configmap":
        assert ApiRight("", "configmaps", "get", "binder") in reader


def test_a_pod_of_20000_preferred_terms_is_predicted_as_the_core_scores_it() -> None:
    """A build pod with 20,000 preferred node-affinity terms (within what the API server
    stores in one pod) on 500 nodes: the node the extender predicts kube-scheduler binds is
    the one kube-scheduler's total makes best, its NodeAffinity computed as the core's
    ``NodeSelectorTerm.matches`` decides term by term on every node. (Its speed is
    measured by ``benchmarks/affinity_terms.py``.)"""
    import random

    import numpy as np

    from stickypack.core.plugins.common import default_normalize
    from stickypack.core.pod import Pod
    from stickypack.core.policy import policy_from_dict

    policy = policy_from_dict(
        {
            "name": "terms",
            "profiles": [
                {
                    "name": "builds",
                    "filters": ["NodeResourcesFit"],
                    "score": [{"plugin": "BuildLocality"}, {"plugin": "NodeAffinity", "weight": 5}],
                }
            ],
        }
    )
    cache = ClusterCache(clock=lambda: NOW, ttl_clock=lambda: NOW)
    names = [f"node-{i}" for i in range(500)]
    for i, name in enumerate(names):
        obj = node(name)
        obj["metadata"]["labels"] = {"kubernetes.io/hostname": name, "zone": f"z{i % 5}"}
        cache.node_event("ADDED", obj)
    extender = Extender(
        cache, policy.profiles[0], filter_names=[], score_names=["BuildLocality"], clock=lambda: NOW
    )
    rng = random.Random(3)

    def term() -> dict:
        pick = rng.random()
        if pick < 0.6:
            match = {"key": "kubernetes.io/hostname", "operator": "In", "values": [rng.choice(names)]}
            return {"matchExpressions": [match]}
        if pick < 0.8:
            field = {"key": "metadata.name", "operator": "In", "values": [rng.choice(names)]}
            return {"matchFields": [field]}
        zone = {"key": "zone", "operator": rng.choice(["In", "NotIn"]), "values": [f"z{rng.randrange(5)}"]}
        return {"matchExpressions": [zone, {"key": "kubernetes.io/hostname", "operator": "Exists"}]}

    pod = build_pod("many-terms")
    terms = [{"weight": rng.randint(1, 100), "preference": term()} for _ in range(20_000)]
    pod["spec"]["affinity"] = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": terms}}
    reply, _ = extender.prioritize({"Pod": pod, "NodeNames": names})
    # kube-scheduler's total: the extender's score times its weight (x10), plus its own
    # NodeAffinity, every term tested on every node
    # (equal terms summed first, or this takes 12 s too)
    weights: dict[Any, int] = {}
    for p in Pod.from_dict(pod).preferred_terms:
        weights[p.term] = weights.get(p.term, 0) + p.weight
    labels = {n: {"kubernetes.io/hostname": n, "zone": f"z{i % 5}"} for i, n in enumerate(names)}
    raw = np.array([sum(w for t, w in weights.items() if t.matches(labels[n], n)) for n in names])
    ours = np.array([s["Score"] for s in reply]) * extender.weight * 10
    total = ours + 5 * default_normalize(raw, reverse=False)
    (best,) = np.flatnonzero(total == total.max())  # one best node: the extender predicts it
    assert int(np.argmax(raw)) != int(np.argmax(ours))  # the terms, not the extender's part, decide
    assert cache.assumed == {"binder/many-terms": names[best]}


# ---- held by a mutation audit of extender/engine.py (each test names what it kills) ----


def test_an_extender_running_no_scorer_still_weighs_one() -> None:
    # kube-scheduler refuses an extender with a prioritizeVerb and a weight <= 0
    # (pkg/scheduler/apis/config/validation: "must have a positive weight applied to it"),
    # so an extender with no score plugin (score: []) still reports weight 1, not 0 + 0
    w = World(1)
    profile = select_profile(load_builtin("stickypack"), "stickypack-builds")
    assert Extender(w.cache, profile, score_names=[], clock=lambda: NOW).weight == 1
    assert Extender(w.cache, profile, score_names=["NodeAge"], clock=lambda: NOW).weight == 3  # NodeAge's 3


def test_unknown_names_are_refused_for_pods_the_extender_does_not_manage_too() -> None:
    # a request naming one known node and one unknown is refused (reject, the default),
    # whatever the pod; with "fail" the unmanaged pod passes through, all its nodes kept
    from stickypack.extender.engine import BadRequest

    w = World(2)
    user = build_pod("u")
    user["metadata"]["labels"] = {"component": "singleuser-server"}
    for verb in (w.extender.filter, w.extender.prioritize):
        with pytest.raises(BadRequest, match=r"unknown node name\(s\): 'ghost'"):
            verb({"Pod": user, "NodeNames": ["node-0", "ghost"]})
    w.extender.unknown_nodes = "fail"
    body, _ = w.extender.filter({"Pod": user, "NodeNames": ["node-0", "ghost"]})
    assert body["NodeNames"] == ["node-0", "ghost"]


def test_a_node_removed_between_two_requests_of_the_same_names_is_unknown_in_the_second() -> None:
    # the rows of a name list are kept for the next request naming the same list (filter,
    # then prioritize), but only while no node came or went: node-2 deleted in between is
    # an unknown name the second time, not its old row
    from stickypack.extender.engine import BadRequest

    w = World(3)
    names = ["node-0", "node-1", "node-2"]
    body, _ = w.extender.filter({"Pod": build_pod("a"), "NodeNames": list(names)})
    assert body["NodeNames"] == names
    w.cache.node_event("DELETED", node("node-2"))
    with pytest.raises(BadRequest, match=r"unknown node name\(s\): 'node-2'"):
        w.extender.filter({"Pod": build_pod("b"), "NodeNames": list(names)})


@pytest.mark.parametrize("listed", [False, True])
def test_dra_given_as_a_callable_is_asked_at_each_decision(monkeypatch, listed: bool) -> None:
    # the service passes a callable (are the DRA objects listed and watched now?): while it
    # says False, no DRA refresh and a context without DRA, though a callable is truthy
    w = World(2)
    profile = select_profile(load_builtin("stickypack"), "stickypack-builds")
    refreshed: list[int] = []
    monkeypatch.setattr(w.cache, "refresh_dra", lambda: refreshed.append(1))
    extender = Extender(w.cache, profile, dra=lambda: listed, clock=lambda: NOW)
    assert extender._ctx().dra is listed
    assert len(refreshed) == (1 if listed else 0)


def test_rendezvous_scores_are_ranked_again_in_the_next_minute(monkeypatch) -> None:
    # the kept rendezvous scores last while the minute (now // 60) stays the same:
    # NOW is a whole minute (1_800_000_000 = 60 * 30_000_000), so NOW + 59 reuses them
    # and NOW + 60 ranks again (two calls in all)
    import stickypack.core.plugins.builds as builds

    w = World(4)
    clock = [NOW]
    w.extender.clock = lambda: clock[0]
    calls: list[str] = []
    real = builds.rendezvous_rank
    monkeypatch.setattr(builds, "rendezvous_rank", lambda b, k: calls.append(k) or real(b, k))
    for i, at in enumerate((NOW, NOW + 59, NOW + 60)):
        clock[0] = at
        w.extender.prioritize({"Pod": build_pod(f"m{i}"), "NodeNames": w.names})
    assert calls == [REPO, REPO]


def test_a_not_ready_node_is_unresolvable_and_a_full_one_is_failed() -> None:
    # preemption cannot make a node Ready, so NodeReady's failure is unresolvable (no
    # eviction there, UNRESOLVABLE); a node without room is failed, as kube-scheduler's
    # NodeResourcesFit leaves it to preemption
    from stickypack.core.policy import policy_from_dict

    policy = policy_from_dict(
        {
            "name": "ready",
            "profiles": [{"name": "b", "filters": ["NodeReady", "NodeResourcesFit"], "score": []}],
        }
    )
    cache = ClusterCache(clock=lambda: NOW, ttl_clock=lambda: NOW)
    for name in ("up", "down", "small"):
        obj = node(name)
        if name == "down":
            obj["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
        if name == "small":
            obj["status"]["allocatable"]["cpu"] = "500m"  # the build asks for 1 cpu
        cache.node_event("ADDED", obj)
    extender = Extender(
        cache,
        policy.profiles[0],
        filter_names=["NodeReady", "NodeResourcesFit"],
        score_names=[],
        clock=lambda: NOW,
    )
    body, _ = extender.filter({"Pod": build_pod("r"), "NodeNames": ["up", "down", "small"]})
    assert body["NodeNames"] == ["up"]
    assert body["FailedAndUnresolvableNodes"] == {"down": "NodeReady: node is not Ready"}
    assert body["FailedNodes"] == {"small": "NodeResourcesFit: insufficient resources (stickypack's view)"}


def test_the_extender_runs_its_filters_in_the_configured_order_and_reports_the_first_failure() -> None:
    """As kube-scheduler's framework stops at a node's first failing filter, the extender
    reports a node with the first of its configured ``filters`` (in the order written, not
    the profile's) that it fails: a node both not Ready and too small is unresolvable with
    ``[NodeReady, NodeResourcesFit]`` and failed (left to preemption) with the order
    reversed, though the profile lists NodeReady first."""
    from stickypack.core.policy import policy_from_dict

    policy = policy_from_dict(
        {
            "name": "ready",
            "profiles": [{"name": "b", "filters": ["NodeReady", "NodeResourcesFit"], "score": []}],
        }
    )
    cache = ClusterCache(clock=lambda: NOW, ttl_clock=lambda: NOW)
    obj = node("worn")
    obj["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    obj["status"]["allocatable"]["cpu"] = "500m"  # the build asks for 1 cpu
    cache.node_event("ADDED", obj)
    reports = []
    for order in (["NodeReady", "NodeResourcesFit"], ["NodeResourcesFit", "NodeReady"]):
        extender = Extender(cache, policy.profiles[0], filter_names=order, score_names=[], clock=lambda: NOW)
        body, _ = extender.filter({"Pod": build_pod("r"), "NodeNames": ["worn"]})
        reports.append((body["FailedNodes"], body["FailedAndUnresolvableNodes"]))
    assert reports == [
        ({}, {"worn": "NodeReady: node is not Ready"}),
        ({"worn": "NodeResourcesFit: insufficient resources (stickypack's view)"}, {}),
    ]


def _at_the_load_bound(w: World) -> None:
    """node-0 runs three builds: at the bound while the mean stays low (min_load_cap 3)."""
    for i in range(3):
        running = build_pod(f"running-{i}", repo=f"https://github.com/org/other-{i}", node_name="node-0")
        w.cache.pod_event("ADDED", {**running, "status": {"phase": "Running"}})


def test_the_load_bound_holds_builds_only_and_only_when_on() -> None:
    # node-0 at the bound (3 builds, cap 3) is dropped for a build; a managed pod that is
    # no build (no binder-repo annotation) passes it and is not counted early on the one
    # node it is sent; an extender with load_bound off passes node-0 to a build
    w = World(3)
    _at_the_load_bound(w)
    body, _ = w.extender.filter({"Pod": build_pod("b"), "NodeNames": w.names})
    assert body["NodeNames"] == ["node-1", "node-2"]

    other = build_pod("not-a-build")
    del other["metadata"]["annotations"]
    body, _ = w.extender.filter({"Pod": other, "NodeNames": w.names})
    assert body["NodeNames"] == w.names and body["FailedAndUnresolvableNodes"] == {}
    body, decision = w.extender.filter({"Pod": other, "NodeNames": ["node-0"]})
    assert body["NodeNames"] == ["node-0"] and not decision.assumed and w.cache.assumed == {}

    w.extender.load_bound = False
    body, _ = w.extender.filter({"Pod": build_pod("c"), "NodeNames": w.names})
    assert body["NodeNames"] == w.names


def test_filter_counts_a_build_early_only_when_one_node_passes_and_once() -> None:
    # kube-scheduler skips prioritize with one feasible node, so filter counts the build
    # there; with three feasible nodes it leaves that to prioritize's prediction. A retry
    # of the same pod counted again is not a new pod counted early (Decision.assumed)
    w = World(3)
    _, decision = w.extender.filter({"Pod": build_pod("three"), "NodeNames": w.names})
    assert not decision.assumed and w.cache.assumed == {}
    _, first = w.extender.filter({"Pod": build_pod("one"), "NodeNames": ["node-1"]})
    _, retry = w.extender.filter({"Pod": build_pod("one"), "NodeNames": ["node-1"]})
    assert (first.assumed, retry.assumed) == (True, False)
    assert w.cache.assumed == {"binder/one": "node-1"}


def test_the_load_bound_gives_way_when_no_node_would_be_left_and_keeps_filter_reasons() -> None:
    # cap 3 in both cases: max(min_load_cap 3, ceil(1.25 * mean)), mean <= (6 + 1) / 4 nodes
    w = World(2)  # node-0, node-1 and doomed (the autoscaler's taint: ScaleDownAware fails it)
    w.extender.assume = False  # a build counted early would change the counts below
    _at_the_load_bound(w)
    # node-0 at the bound is the only node the filters keep (doomed, with no build, fails
    # ScaleDownAware): the bound gives way rather than leave no node
    body, _ = w.extender.filter({"Pod": build_pod("a"), "NodeNames": ["node-0", "doomed"]})
    assert body["NodeNames"] == ["node-0"] and list(body["FailedAndUnresolvableNodes"]) == ["doomed"]
    # doomed at the bound too: its reason stays the filter's, only node-0 gets LoadBound
    for i in range(3):
        running = build_pod(f"doomed-{i}", repo=f"https://github.com/org/d-{i}", node_name="doomed")
        w.cache.pod_event("ADDED", {**running, "status": {"phase": "Running"}})
    assert w.extender.load_cap() == 3
    body, _ = w.extender.filter({"Pod": build_pod("b"), "NodeNames": ["node-0", "node-1", "doomed"]})
    assert body["NodeNames"] == ["node-1"]
    reasons = body["FailedAndUnresolvableNodes"]
    assert reasons["node-0"] == "LoadBound: node runs 3 builds, the bound is 3"
    assert reasons["doomed"].startswith("ScaleDownAware: node is being removed"), reasons


class _Fixed(ScorePlugin):
    """A scorer of one's own: a fixed score per node name; skips every pod with ``skips``."""

    def __init__(self, name: str, by_node: dict[str, int], skips: bool = False) -> None:
        self.name, self.by_node, self.skips = name, by_node, skips

    def score(self, pod: Pod, table: NodeTable, idx: np.ndarray, ctx: SchedulingContext) -> np.ndarray:
        return np.array([self.by_node[table.names[i]] for i in idx.tolist()], dtype=np.int64)

    def skip(self, pod: Pod) -> bool:
        return self.skips


def _fixed_extender(*scorers: tuple[_Fixed, int], names: tuple[str, ...] = ("a", "b", "c")) -> Extender:
    cache = ClusterCache(clock=lambda: NOW, ttl_clock=lambda: NOW)
    for name in names:
        cache.node_event("ADDED", node(name))
    profile = Profile("p", [], [WeightedScorer(s, w) for s, w in scorers])
    return Extender(
        cache, profile, filter_names=[], score_names=[s.name for s, _ in scorers], clock=lambda: NOW
    )


@pytest.mark.parametrize("scale", ["absolute", "max"])
def test_extender_scores_are_rounded_to_the_nearest_tenth(scale: str) -> None:
    # one scorer, weight 1: a 100, b 45, c 44. absolute: Score = round(10 * total / 100),
    # max: round(10 * total / top) with top = 100 too: a 10, b round(4.5) = 5 (half up),
    # c round(4.4) = 4
    extender = _fixed_extender((_Fixed("Fixed", {"a": 100, "b": 45, "c": 44}), 1))
    extender.score_scale = scale
    scores, _ = extender.prioritize({"Pod": build_pod("r"), "NodeNames": ["a", "b", "c"]})
    assert [s["Score"] for s in scores] == [10, 5, 4]


def test_max_scale_with_every_total_zero_scores_zero_without_dividing() -> None:
    import warnings

    extender = _fixed_extender((_Fixed("Fixed", {"a": 0, "b": 0, "c": 0}), 1))
    extender.score_scale = "max"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy warns on an integer division by zero
        scores, _ = extender.prioritize({"Pod": build_pod("z"), "NodeNames": ["a", "b", "c"]})
    assert [s["Score"] for s in scores] == [0, 0, 0]


def test_a_scorer_that_skips_the_pod_adds_nothing() -> None:
    # kube-scheduler's PreScore Skip: Skipping (100 everywhere but b) is not called, so
    # only Fixed counts: weights 1 + 1 = 2, max_total 200: a 0, b round(10 * 50 / 200) = 3
    # (2.5 half up), c 0; scored, Skipping would make a 5 and c 5
    extender = _fixed_extender(
        (_Fixed("Fixed", {"a": 0, "b": 50, "c": 0}), 1),
        (_Fixed("Skipping", {"a": 100, "b": 0, "c": 100}, skips=True), 1),
    )
    scores, _ = extender.prioritize({"Pod": build_pod("s"), "NodeNames": ["a", "b", "c"]})
    assert [s["Score"] for s in scores] == [0, 3, 0]


def test_prioritize_keeps_the_scores_when_every_node_is_at_the_load_bound() -> None:
    # node-0 and node-1 run 3 builds each: cap max(3, ceil(1.25 * (6 + 1) / 3 nodes)) = 3,
    # both over it; zeroing both would steer nothing, so they keep the scores they get
    # with the bound off
    w = World(2)
    w.extender.assume = False
    _at_the_load_bound(w)
    for i in range(3):
        running = build_pod(f"one-{i}", repo=f"https://github.com/org/one-{i}", node_name="node-1")
        w.cache.pod_event("ADDED", {**running, "status": {"phase": "Running"}})
    assert w.extender.load_cap() == 3
    bounded, _ = w.extender.prioritize({"Pod": build_pod("x"), "NodeNames": w.names})
    w.extender.load_bound = False
    free, _ = w.extender.prioritize({"Pod": build_pod("x"), "NodeNames": w.names})
    assert list(bounded) == list(free) and max(s["Score"] for s in free) > 0, list(free)


def _soft_tainted_a(names: tuple[str, ...] = ("a", "b")) -> ClusterCache:
    cache = ClusterCache(clock=lambda: NOW, ttl_clock=lambda: NOW)
    for name in names:
        taints = [{"key": "k", "value": "v", "effect": "PreferNoSchedule"}] if name == "a" else None
        cache.node_event("ADDED", node(name, taints))
    return cache


def test_the_prediction_weighs_our_score_by_the_extenders_weight() -> None:
    # kube-scheduler adds Score * weight * 10 for the extender. Ours: Fixed (weight 5): a 100,
    # b 0 -> Score a 10, b 0 -> a 10 * 5 * 10 = 500, b 0. Kube-scheduler's own
    # TaintToleration (weight 2): a (PreferNoSchedule taint) 0, b 100 -> a 0, b 200.
    # a wins 500 to 200 (unweighted, 100 to 200, b would)
    from stickypack.core.plugins import TaintTolerationScore

    cache = _soft_tainted_a()
    profile = Profile("p", [], [WeightedScorer(_Fixed("Fixed", {"a": 100, "b": 0}), 5),
                                WeightedScorer(TaintTolerationScore(), 2)])  # fmt: skip
    extender = Extender(cache, profile, filter_names=[], score_names=["Fixed"], clock=lambda: NOW)
    assert extender.weight == 5
    scores, _ = extender.prioritize({"Pod": build_pod("w"), "NodeNames": ["a", "b"]})
    assert [s["Score"] for s in scores] == [10, 0]
    assert cache.assumed == {"binder/w": "a"}


def test_the_prediction_counts_a_kube_scorer_the_extender_runs_once() -> None:
    # the extender runs TaintToleration (weight 1) itself, beside Fixed (weight 1): a
    # 0 + 100, b 100 + 0 -> both round(10 * 100 / 200) = 5: a tie, so nothing is counted
    # early. TaintToleration is in our Score already: adding its 0/100 again would
    # predict b
    from stickypack.core.plugins import TaintTolerationScore

    cache = _soft_tainted_a()
    profile = Profile("p", [], [WeightedScorer(TaintTolerationScore(), 1),
                                WeightedScorer(_Fixed("Fixed", {"a": 100, "b": 0}), 1)])  # fmt: skip
    extender = Extender(
        cache, profile, filter_names=[], score_names=["TaintToleration", "Fixed"], clock=lambda: NOW
    )
    scores, _ = extender.prioritize({"Pod": build_pod("t"), "NodeNames": ["a", "b"]})
    assert [s["Score"] for s in scores] == [5, 5]
    assert cache.assumed == {}


def test_the_load_bound_is_the_profiles_buildlocality_bound_even_when_the_extender_runs_it_not() -> None:
    # BuildLocality's args in the profile (min_load_cap 5, load_bound 2) set the extender's
    # load bound, whether or not the extender runs BuildLocality itself: 3 empty nodes,
    # cap max(5, ceil(2 * 1 / 3)) = 5 (the defaults, min_load_cap 2 and 1.25, would give 2)
    from stickypack.core.policy import policy_from_dict

    policy = policy_from_dict(
        {
            "name": "bounds",
            "profiles": [
                {
                    "name": "b",
                    "filters": [],
                    "score": [
                        {"plugin": "BuildLocality", "args": {"load_bound": 2.0, "min_load_cap": 5}},
                        "NodeAge",
                    ],
                }
            ],
        }
    )
    cache = World(3).cache
    for score in (["BuildLocality"], ["NodeAge"]):
        extender = Extender(cache, policy.profiles[0], filter_names=[], score_names=score, clock=lambda: NOW)
        assert extender.load_cap() == 5, score


def test_no_profile_named_is_the_policys_first() -> None:
    # the extender's `profile: null` runs the policy's first profile
    policy = load_builtin("stickypack")
    assert [p.name for p in policy.profiles] == ["stickypack-builds", "stickypack"]
    assert select_profile(policy, None).name == "stickypack-builds"
    assert select_profile(policy, "stickypack").name == "stickypack"


def test_a_request_with_node_objects_gets_back_only_the_objects_of_the_nodes_that_passed() -> None:
    # without nodeCacheCapable kube-scheduler sends Nodes and reads only Nodes back:
    # doomed (the autoscaler's taint) is not among them
    w = World(2)
    items = [node("node-0"), node("doomed"), node("node-1")]
    body, _ = w.extender.filter({"Pod": build_pod("o"), "Nodes": {"items": items}, "NodeNames": None})
    assert body["NodeNames"] == ["node-0", "node-1"]
    assert body["Nodes"] == {"items": [items[0], items[2]]}


def test_prioritize_over_unknown_names_only_scores_them_zero_on_either_scale() -> None:
    w = World(2)
    w.extender.unknown_nodes = "fail"
    for scale in ("absolute", "max"):
        w.extender.score_scale = scale
        scores, _ = w.extender.prioritize({"Pod": build_pod("g"), "NodeNames": ["ghost-1", "ghost-2"]})
        assert list(scores) == [{"Host": "ghost-1", "Score": 0}, {"Host": "ghost-2", "Score": 0}]


def test_node_groups_are_read_only_with_minimum_sizes() -> None:
    # group labels without minimum sizes: no group has a minimum, so no NodeGroups at all;
    # minimum sizes without labels: the well-known group labels name the groups
    w = World(2)
    profile = select_profile(load_builtin("stickypack"), "stickypack-builds")
    labels_only = Extender(w.cache, profile, node_group_labels=("pool",), clock=lambda: NOW)
    assert labels_only._ctx().node_groups is None
    scores, _ = labels_only.prioritize({"Pod": build_pod("n"), "NodeNames": w.names})
    assert len(scores) == 2
    sizes_only = Extender(w.cache, profile, node_group_min_sizes={"pool-a": 2}, clock=lambda: NOW)
    groups = sizes_only._ctx().node_groups
    assert groups is not None and dict(groups.min_sizes) == {"pool-a": 2} and tuple(groups.label_keys) == ()
