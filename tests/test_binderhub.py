"""BinderHub library mode: affinity over history + rendezvous nodes, builder discovery,
throttled listing, fallback, traitlets config; and the default kube-scheduler honouring it."""

from __future__ import annotations

import json
import logging
import re
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from traitlets import TraitError
from traitlets.config import Config

import stickypack.binderhub as binderhub_module
from stickypack.binderhub import (
    REQUEST_TIMEOUT_S,
    StickyBuilds,
    StickyBuildsMixin,
    Throttle,
    _as_model,
    default_anti_affinity,
)
from stickypack.core.history import BuildHistory
from stickypack.kube.history import DATA_KEY, DEFAULT_NAME, HistoryDoc, Limits, Record, apply_ops
from stickypack.rendezvous import rendezvous_rank

REPO = "https://github.com/org/repo"
NOW = time.time()


def builder(name: str, node: str | None, phase: str = "Running") -> dict:
    spec: dict[str, Any] = {"containers": [{"name": "builder", "image": "docker:dind"}]}
    if node:
        spec["nodeName"] = node
    return {"metadata": {"name": name}, "spec": spec, "status": {"phase": phase}}


def model(data: dict, kind: str) -> Any:
    """``data`` as the sync kubernetes client returns it: a model object (``V1PodList``...)."""
    from kubernetes.client import ApiClient

    return ApiClient()._ApiClient__deserialize(data, kind)  # type: ignore[attr-defined]


class FakeApi:
    """The two calls of the sync kubernetes client StickyBuilds makes, returning the client's
    model objects as the real one does (the end-to-end test below uses the real client)."""

    def __init__(self, pods: list[dict], history: dict | None = None) -> None:
        self.pods = pods
        self.history = history
        self.pod_lists = 0
        self.selectors: list[str] = []

    def list_namespaced_pod(self, namespace: str, label_selector: str = "", **kwargs: Any) -> Any:
        self.pod_lists += 1
        self.selectors.append(label_selector)
        time.sleep(0.01)
        return model({"items": self.pods}, "V1PodList")

    def read_namespaced_config_map(self, name: str, namespace: str, **kwargs: Any) -> Any:
        if self.history is None:
            from kubernetes.client.exceptions import ApiException

            raise ApiException(status=404, reason="Not Found")
        return model({"data": {"history.json": HistoryDoc(self.history).dumps()}}, "V1ConfigMap")


@pytest.fixture(autouse=True)
def _clear() -> None:
    StickyBuilds.clear_cache()
    binderhub_module._logged.clear()  # a configuration error is logged once per process


def enabled(**traits: Any) -> StickyBuilds:
    cfg = Config()
    cfg.StickyBuilds.enabled = True
    for k, v in traits.items():
        setattr(cfg.StickyBuilds, k, v)
    return StickyBuilds(config=cfg)


def preferred(affinity: dict) -> list[tuple[int, str]]:
    terms = affinity["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    return [(t["weight"], t["preference"]["matchExpressions"][0]["values"][0]) for t in terms]


def test_off_by_default_and_validated() -> None:
    assert StickyBuilds().enabled is False
    with pytest.raises(TraitError):
        enabled(weights=[50, 100])
    with pytest.raises(TraitError):
        enabled(weights=[0])
    with pytest.raises(TraitError):
        enabled(top_k=0)
    with pytest.raises(TraitError):
        enabled(builder_selector="nonsense")


def test_affinity_is_rendezvous_top_k_with_decreasing_weights() -> None:
    nodes = [f"node-{i}" for i in range(8)]
    api = FakeApi([builder(f"dind-{i}", n) for i, n in enumerate(nodes)] + [builder("pending", None)])
    aff = enabled().affinity_for(api, "binder", REPO)
    assert preferred(aff) == list(zip([100, 60, 30], rendezvous_rank(nodes, REPO)[:3], strict=True))
    assert api.selectors == ["component=image-builder,app=binder"]


def test_history_nodes_come_first() -> None:
    nodes = [f"node-{i}" for i in range(8)]
    built = rendezvous_rank(nodes, REPO)[-1]
    history = apply_ops(
        HistoryDoc(), [Record(REPO, built, NOW - 60), Record(REPO, "gone-node", NOW)], Limits(), NOW
    )
    api = FakeApi([builder(f"d{i}", n) for i, n in enumerate(nodes)], history.repos)
    ranked = [n for _, n in preferred(enabled(top_k=2).affinity_for(api, "binder", REPO))]
    assert ranked == [built, rendezvous_rank(nodes, REPO)[0]]  # gone-node is no builder: skipped


def test_no_builder_pods_falls_back_to_default_affinity() -> None:
    assert enabled().affinity_for(FakeApi([builder("x", None)]), "binder", REPO) == default_anti_affinity()
    assert enabled().affinity_for(FakeApi([]), "binder", REPO) == default_anti_affinity()

    class Broken(FakeApi):
        def list_namespaced_pod(self, *a: Any, **k: Any) -> dict:
            raise OSError("API down")

    assert enabled().affinity_for(Broken([]), "binder", REPO) == default_anti_affinity()


def test_listing_is_throttled_and_shared_across_threads() -> None:
    api = FakeApi([builder("d", "node-1")])
    sticky = enabled(list_interval=60)
    results: list[Any] = []
    threads = [
        threading.Thread(target=lambda: results.append(sticky.builder_nodes(api, "binder")))
        for _ in range(16)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [["node-1"]] * 16
    assert api.pod_lists == 1
    enabled(list_interval=60).builder_nodes(api, "binder")  # another executor: same cache
    assert api.pod_lists == 1


def test_throttle_expires_and_keeps_errors_briefly() -> None:
    clock = [0.0]
    calls = []

    def fn() -> int:
        calls.append(1)
        if len(calls) == 2:
            raise OSError("flaky")
        return len(calls)

    th = Throttle(fn, 10, clock=lambda: clock[0])
    assert th.error_ttl_s == 5.0
    assert th() == 1 and th() == 1
    clock[0] = 11
    with pytest.raises(OSError):
        th()
    clock[0] = 15.9  # the failure is shared for 5 s: no second call yet
    with pytest.raises(OSError):
        th()
    assert len(calls) == 2
    clock[0] = 16
    assert th() == 3


class _CountedLock:
    """A lock that counts the threads that came to take it (taken, or waiting for it)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.arrived = 0
        self.changed = threading.Condition()

    def __enter__(self) -> _CountedLock:
        with self.changed:
            self.arrived += 1
            self.changed.notify_all()
        self._lock.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self._lock.release()


def test_callers_waiting_on_a_failing_call_share_its_error() -> None:
    # once each waiting caller called the API again in turn, each waiting for its timeout.
    # The call fails only when the 7 others wait for it (not after: those arriving later
    # share the error by its TTL, another path)
    calls = []
    started = threading.Event()
    lock = _CountedLock()

    def fn() -> list[str]:
        calls.append(1)
        started.set()
        with lock.changed:  # the API server is slow to fail
            assert lock.changed.wait_for(lambda: lock.arrived == 8, timeout=30), lock.arrived
        raise TimeoutError("read timeout")

    th = Throttle(fn, 30)
    th._lock = lock  # type: ignore[assignment]
    errors: list[str] = []

    def caller() -> None:
        try:
            th()
        except TimeoutError as exc:
            errors.append(str(exc))

    first = threading.Thread(target=caller)
    first.start()
    started.wait(5)
    others = [threading.Thread(target=caller) for _ in range(7)]
    for t in others:
        t.start()
    for t in [first, *others]:
        t.join()
    assert errors == ["read timeout"] * 8 and len(calls) == 1


def test_mixin_delegates_when_disabled_and_uses_executor_fields() -> None:
    from traitlets.config import Configurable

    class Base(Configurable):  # KubernetesBuildExecutor is a LoggingConfigurable
        def get_affinity(self) -> str:
            return "binderhub's own"

    class Executor(StickyBuildsMixin, Base):
        def __init__(self, config: Config) -> None:
            super().__init__(config=config)
            self.api = FakeApi([builder("d", "node-7")])
            self.namespace = "binder"
            self.repo_url = REPO

    assert Executor(Config()).get_affinity() == "binderhub's own"
    cfg = Config()
    cfg.StickyBuilds.enabled = True
    aff = Executor(cfg).get_affinity()
    from kubernetes.client import ApiClient, V1Affinity

    assert isinstance(aff, V1Affinity)  # the installed client's model (kubernetes 37 changed deserialize)
    assert preferred(ApiClient().sanitize_for_serialization(aff)) == [(100, "node-7")]

    # a configuration error or a failure inside never fails the build: BinderHub's own affinity
    bad = Config()
    bad.StickyBuilds.enabled = True
    bad.StickyBuilds.top_k = 0
    assert Executor(bad).get_affinity() == "binderhub's own"
    broken = Executor(cfg)
    broken.repo_url = ["not", "a", "string"]  # type: ignore[assignment]
    broken.api = FakeApi([builder("d", "node-7")], history={"r": {"node-7": NOW}})
    assert broken.get_affinity() == "binderhub's own"


def test_a_configuration_error_is_logged_when_binderhub_starts(caplog: pytest.LogCaptureFixture) -> None:
    """BinderHub makes one executor of its ``build_class`` when it starts
    (``example_builder = self.build_class(parent=self)`` in ``BinderHub.initialize``, for
    /versions and /health), then one per build: a configuration error is logged at start-up,
    once, and builds still get BinderHub's own affinity."""
    from traitlets.config import Configurable

    class Base(Configurable):
        def get_affinity(self) -> str:
            return "binderhub's own"

    class Executor(StickyBuildsMixin, Base):
        pass

    bad = Config()
    bad.StickyBuilds.enabled = True
    bad.StickyBuilds.weights = [100, 101]
    app = Configurable(config=bad)  # BinderHub passes itself as the parent
    with caplog.at_level(logging.ERROR, logger="stickypack.binderhub"):
        example = Executor(parent=app)  # start-up: no build yet
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and "StickyBuilds.weights must be 1..100, got [100, 101]" in errors[0]
    assert example.get_affinity() == "binderhub's own"
    with caplog.at_level(logging.ERROR, logger="stickypack.binderhub"):
        assert Executor(parent=app).get_affinity() == "binderhub's own"  # a build
    assert len([r for r in caplog.records if r.levelno >= logging.ERROR]) == 1  # not again
    caplog.clear()
    with caplog.at_level(logging.ERROR, logger="stickypack.binderhub"):
        Executor(parent=Configurable(config=Config()))  # a good configuration: nothing logged
    assert not caplog.records


def test_the_affinity_is_a_model_of_the_kubernetes_9_client_binderhubs_image_ships(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """BinderHub's image pins ``kubernetes==9.*`` (``helm-chart/images/binderhub/
    requirements.in``; 9.0.1 frozen), whose ``ApiClient.deserialize(response, response_type)``
    takes a response object with ``.data`` (37 takes the text and a content type). That
    signature put on the installed client: the affinity still comes back a ``V1Affinity``."""
    from kubernetes.client import ApiClient, V1Affinity

    def deserialize_9(self: Any, response: Any, response_type: str) -> Any:  # 9.0.1's form
        return self._ApiClient__deserialize(json.loads(response.data), response_type)

    monkeypatch.setattr(ApiClient, "deserialize", deserialize_9)
    aff = _as_model(enabled().node_affinity(["node-7", "node-2"]))
    assert isinstance(aff, V1Affinity)
    assert preferred(ApiClient().sanitize_for_serialization(aff)) == [(100, "node-7"), (60, "node-2")]


def _doc_blocks(kind: str) -> list[str]:
    text = (Path(__file__).resolve().parents[1] / "docs" / "binderhub.md").read_text()
    return re.findall(rf"```{kind}\n(.*?)```", text, re.S)


def test_the_documented_configuration_works_as_the_binderhub_chart_applies_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """docs/binderhub.md's chart values, applied as the BinderHub chart's
    ``binderhub_config.py`` applies them (each section of ``config`` set on ``c``, then each
    ``extraConfig`` entry run with ``c`` in scope), give BinderHub a ``build_class`` whose
    executors have sticky builds on; its Python block sets every trait to its default."""
    from types import ModuleType

    from traitlets.config import Configurable

    class KubernetesBuildExecutor(Configurable):  # the two names the mixin relies on
        def get_affinity(self) -> str:
            return "binderhub's own"

    build = ModuleType("binderhub.build")
    build.KubernetesBuildExecutor = KubernetesBuildExecutor  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "binderhub", ModuleType("binderhub"))
    monkeypatch.setitem(sys.modules, "binderhub.build", build)

    (values_text,) = _doc_blocks("yaml")
    values = yaml.safe_load(values_text)
    c = Config()
    for section, sub_cfg in values["config"].items():
        c[section].update(sub_cfg)
    for _, snippet in sorted(values["extraConfig"].items()):
        exec(snippet, {"c": c})
    executor_class = c.BinderHub.build_class
    assert issubclass(executor_class, StickyBuildsMixin)
    assert issubclass(executor_class, KubernetesBuildExecutor)
    executor = executor_class(parent=Configurable(config=c))  # BinderHub passes itself
    sticky = executor._sticky_builds()
    assert sticky is not None and sticky.enabled

    (python_text,) = _doc_blocks("python")
    c = Config()
    exec(python_text, {"c": c})
    assert issubclass(c.BinderHub.build_class, StickyBuildsMixin)
    documented, default = StickyBuilds(config=c), StickyBuilds()
    names = set(default.trait_names(config=True)) - {"enabled"}
    assert documented.enabled and not default.enabled
    assert {n: getattr(documented, n) for n in names} == {n: getattr(default, n) for n in names}
    assert set(c.StickyBuilds) == (names | {"enabled"}) - {"hostname_label"}  # that one commented out


@pytest.mark.parametrize(
    ("trait", "value", "message"),
    [
        ("builder_selector", "", "must select something"),  # once: every pod a builder
        ("builder_selector", "a=b c", "a=b c is not a valid label"),  # once: 400 from the API
        ("hostname_label", "a b", "is not a label key"),  # once: 422 when the build pod was created
        ("list_interval", float("nan"), "must be a finite number >= 0"),
        ("history_ttl", -1.0, "must be a finite number >= 0"),
        ("history_shards", 0, "history_shards must be in 1..64"),
        # each shard is one read of up to 5 s, in turn, while a build waits
        ("history_shards", 65, "history_shards must be in 1..64, got 65"),
        ("weights", [True], "weights must be 1..100"),
    ],
)
def test_bad_configuration_is_refused(trait: str, value: Any, message: str) -> None:
    with pytest.raises(TraitError, match=message):
        enabled(**{trait: value})


def test_api_calls_have_a_timeout_and_clients_of_one_cluster_share_a_throttle() -> None:
    class Api(FakeApi):
        def __init__(self) -> None:
            super().__init__([builder("d", "node-1")], history={REPO: {"node-1": NOW}})
            self.api_client = type(
                "C", (), {"configuration": type("Cfg", (), {"host": "https://k8s:443"})()}
            )()
            self.timeouts: list[Any] = []

        def list_namespaced_pod(self, namespace: str, label_selector: str = "", **kwargs: Any) -> dict:
            self.timeouts.append(("pods", kwargs.get("_request_timeout")))
            return super().list_namespaced_pod(namespace, label_selector)

        def read_namespaced_config_map(self, name: str, namespace: str, **kwargs: Any) -> Any:
            self.timeouts.append(("history", kwargs.get("_request_timeout")))
            return super().read_namespaced_config_map(name, namespace)

    first, second = Api(), Api()  # BinderHub may make a client per build
    sticky = enabled()
    sticky.affinity_for(first, "binder", REPO)
    sticky.affinity_for(second, "binder", REPO)
    assert first.pod_lists + second.pod_lists == 1  # one list for the cluster, not one per client
    # each call of the build's wait is bounded: a read of up to 5 s (the documented bound), the
    # builder list and the history read alike (a call without one could hang a build for good)
    assert REQUEST_TIMEOUT_S == 5.0
    assert sorted(first.timeouts) == [("history", 5.0), ("pods", 5.0)]


@pytest.mark.controlplane
@pytest.mark.parametrize("shards", [1, 2])
def test_default_scheduler_follows_the_affinity(cluster, shards: int) -> None:
    """The real kube-scheduler (default profile, no extender) places a build on the node
    the library ranks first: the history node, not the rendezvous top. With two history
    shards the repo's record is in the second ConfigMap (``shard_of``, as the extender
    writes it), and the library finds it there."""
    from stickypack.kube.history import shard_of
    from stickypack.testing import pod_manifest

    repo = next(r for r in (f"{REPO}-{i}" for i in range(100)) if shard_of(r, shards) == shards - 1)

    nodes = [f"node-{i}" for i in range(5)]
    for n in nodes:
        cluster.create_node(n)
    dind = []
    for i, n in enumerate(nodes):
        pod = pod_manifest(f"dind-{i}", labels={"component": "image-builder", "app": "binder"})
        pod["spec"]["nodeName"] = n
        dind.append(pod)
    dind.append(pod_manifest("dind-unbound", labels={"component": "image-builder", "app": "binder"}))
    cluster.create_pods(dind)
    built = rendezvous_rank(nodes, repo)[-1]

    # the sync kubernetes client BinderHub uses, on the real API server
    from kubernetes import client, config

    api = client.CoreV1Api(config.new_client_from_config(config_file=str(cluster.kubeconfig)))
    doc = apply_ops(HistoryDoc(), [Record(repo, built, NOW)], Limits(), NOW)
    name = f"{DEFAULT_NAME}-s{shards}"
    body = {"metadata": {"name": f"{name}-{shards - 1}"}, "data": {DATA_KEY: doc.dumps()}}
    api.create_namespaced_config_map("default", body)

    aff = enabled(history_name=name, history_shards=shards).affinity_for(api, "default", repo)
    assert preferred(aff)[0][1] == built
    cluster.start_scheduler()
    pod = pod_manifest("build-1", labels={"component": "binderhub-build"})
    pod["spec"]["affinity"] = aff
    cluster.create_pod(pod=pod)
    assert cluster.wait_bound(["build-1"])["build-1"] == built


@pytest.mark.controlplane
def test_an_api_server_that_stops_answering_holds_a_build_for_the_bound_not_for_its_retries(
    cluster,
) -> None:
    """The sync kubernetes client BinderHub hands us retries a read that timed out three more
    times (urllib3's default), so a call given 5 s held the build for 20 s, and a history
    read one such call per shard. Through a relay that goes silent (a dead API server
    instance, a partition: no reset), the affinity comes within the documented 5 s: the
    rendezvous order when the builder nodes are known, else BinderHub's default."""
    from urllib.parse import urlsplit

    from kubernetes import client, config

    from stickypack.testing import pod_manifest
    from test_extender_e2e import _FreezingProxy

    cluster.create_node("node-1")
    pod = pod_manifest("dind-0", labels={"component": "image-builder", "app": "binder"})
    pod["spec"]["nodeName"] = "node-1"
    cluster.create_pods([pod])
    target = urlsplit(cluster.server)
    proxy = _FreezingProxy((target.hostname or "127.0.0.1", target.port or 443))
    try:
        api_client = config.new_client_from_config(config_file=str(cluster.kubeconfig))
        api_client.configuration.host = f"https://127.0.0.1:{proxy.port}"
        api = client.CoreV1Api(api_client)
        sticky = enabled(history_shards=2)
        assert sticky.builder_nodes(api, "default") == ["node-1"]  # listed while it answers
        proxy.freeze()
        started = time.monotonic()
        affinity = sticky.affinity_for(api, "default", REPO)  # the history read meets the silence
        held = time.monotonic() - started
        assert preferred(affinity) == [(100, "node-1")]
        assert held < REQUEST_TIMEOUT_S + 2, f"the build waited {held:.1f} s"
        StickyBuilds.clear_cache()  # a new process: the builder nodes not known
        started = time.monotonic()
        assert sticky.affinity_for(api, "default", REPO) == default_anti_affinity()
        held = time.monotonic() - started
        assert held < REQUEST_TIMEOUT_S + 2, f"the build waited {held:.1f} s"
    finally:
        proxy.close()


def test_only_running_bound_pods_name_builder_nodes() -> None:
    from stickypack.kube.discovery import nodes_of_pods

    deleting = builder("e", "node-5")
    deleting["metadata"]["deletionTimestamp"] = "2026-12-04T10:00:00Z"
    pods = [
        builder("a", "node-2"),
        builder("b", "node-1", phase="Pending"),  # bound, its containers starting
        builder("c", "node-3", phase="Succeeded"),
        builder("d", "node-4", phase="Failed"),
        deleting,
        builder("f", None, phase="Pending"),  # not bound yet
        builder("g", "node-2"),
    ]
    assert nodes_of_pods(pods) == ["node-1", "node-2"]


#: A DNS subdomain of 255 characters: valid in form, but past the 253 a label key's prefix may have.
LONG_PREFIX = ".".join(["a" * 63] * 4)


def test_hostname_label_with_a_prefix_over_253_characters_is_refused() -> None:
    # the API server refuses such a key in the build pod's affinity (422): BinderHub's own
    # affinity must be used instead, as for any other configuration error
    with pytest.raises(TraitError, match="is not a label key"):
        enabled(hostname_label=f"{LONG_PREFIX}/hostname")
    with pytest.raises(TraitError, match="not a valid label"):
        enabled(builder_selector=f"{LONG_PREFIX}/component=image-builder")
    assert enabled(hostname_label=f"{LONG_PREFIX[:253]}/hostname").hostname_label.endswith("/hostname")


@pytest.mark.controlplane
def test_label_keys_the_library_takes_are_the_ones_the_api_server_takes(cluster) -> None:
    """A preferred node-affinity key is accepted by the real API server exactly when
    ``StickyBuilds.hostname_label`` accepts it."""
    from kubernetes_asyncio.client.exceptions import ApiException

    from stickypack.testing import pod_manifest

    keys = [
        f"{LONG_PREFIX[:253]}/h",  # prefix of 253: fine
        f"{LONG_PREFIX}/h",  # prefix of 255: refused
        "kubernetes.io/" + "h" * 63,
        "kubernetes.io/" + "h" * 64,
        "Kubernetes.io/hostname",
        "a/b/c",
    ]
    for i, key in enumerate(keys):
        try:
            enabled(hostname_label=key)
            ours = True
        except TraitError:
            ours = False
        pod = pod_manifest(f"key-{i}")
        pod["spec"]["affinity"] = enabled().node_affinity(["node-1"])
        term = pod["spec"]["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]
        term["preference"]["matchExpressions"][0]["key"] = key
        try:
            cluster.create_pod(pod=pod)
            theirs = True
        except ApiException as exc:
            assert exc.status == 422, exc
            theirs = False
        assert ours == theirs, (key, ours, theirs)


# ---------------------------------------------------------------------------- edges (mutation audit)


class ShardedApi(FakeApi):
    """Builder pods, and history ConfigMaps by name: a repos mapping, or the exception the
    read raises (absent names: 404, as the API server answers)."""

    def __init__(self, pods: list[dict], maps: dict[str, dict | Exception]) -> None:
        super().__init__(pods)
        self.maps = maps
        self.reads: list[tuple[str, str]] = []

    def read_namespaced_config_map(self, name: str, namespace: str, **kwargs: Any) -> Any:
        from kubernetes.client.exceptions import ApiException

        self.reads.append((namespace, name))
        found = self.maps.get(name)
        if found is None:
            raise ApiException(status=404, reason="Not Found")
        if isinstance(found, Exception):
            raise found
        return model({"data": {DATA_KEY: HistoryDoc(found).dumps()}}, "V1ConfigMap")


def test_a_throttle_shares_an_error_for_its_interval_when_that_is_shorter_than_5_s() -> None:
    calls: list[float] = []
    clock = [0.0]

    def fn() -> int:
        calls.append(clock[0])
        raise OSError("down")

    th = Throttle(fn, 2, clock=lambda: clock[0])
    assert th.error_ttl_s == 2.0  # min(interval 2, 5)
    with pytest.raises(OSError):
        th()  # the call at 0
    clock[0] = 1.9  # 1.9 < 2: shared
    with pytest.raises(OSError):
        th()
    clock[0] = 2.0  # 2 - 0 = 2, not < 2: the next caller retries
    with pytest.raises(OSError):
        th()
    assert calls == [0.0, 2.0]


def test_a_throttle_calls_again_once_its_interval_has_passed() -> None:
    clock = [0.0]
    calls: list[float] = []

    def fn() -> int:
        calls.append(clock[0])
        return len(calls)

    th = Throttle(fn, 10, clock=lambda: clock[0])
    assert th() == 1
    clock[0] = 9.99  # 9.99 < 10: the cached result
    assert th() == 1
    clock[0] = 10.0  # 10 - 0 = 10, not < 10: stale
    assert th() == 2 and calls == [0.0, 10.0]


def test_configuration_at_the_edges_of_its_ranges_is_taken() -> None:
    """weights "must not increase" (equal is fine), top_k >= 1, history_shards 1..64,
    list_interval and history_ttl >= 0."""
    assert enabled(weights=[50, 50]).weights == [50, 50]
    assert enabled(top_k=1).top_k == 1
    assert enabled(history_shards=64).history_shards == 64
    assert enabled(list_interval=0.0).list_interval == 0.0
    assert enabled(history_ttl=0.0).history_ttl == 0.0


def test_a_changed_list_interval_takes_effect() -> None:
    api = FakeApi([builder("d", "node-1")])
    enabled(list_interval=60).builder_nodes(api, "binder")
    enabled(list_interval=60).builder_nodes(api, "binder")
    assert api.pod_lists == 1  # within 60 s: cached
    enabled(list_interval=0).builder_nodes(api, "binder")  # 0: the throttle is replaced...
    enabled(list_interval=0).builder_nodes(api, "binder")  # ...and lists every time
    assert api.pod_lists == 3


def test_the_throttles_are_bounded_and_the_newest_kept() -> None:
    """MAX_THROTTLES (64) at most: the 65th key drops the oldest 32 first, so 65 namespaces
    leave 64 - 32 + 1 = 33 throttles, the newest among them still cached."""
    assert binderhub_module.MAX_THROTTLES == 64
    api = FakeApi([builder("d", "node-1")])
    sticky = enabled(list_interval=60)
    for i in range(65):
        sticky.builder_nodes(api, f"ns-{i}")
        assert len(StickyBuilds._throttles) <= 64
    assert len(StickyBuilds._throttles) == 33 and api.pod_lists == 65
    sticky.builder_nodes(api, "ns-63")  # kept: no new list
    assert api.pod_lists == 65
    sticky.builder_nodes(api, "ns-0")  # dropped: listed again
    assert api.pod_lists == 66


def test_every_history_shard_is_read_past_one_that_does_not_exist() -> None:
    """history_shards 3: shard 0 missing (404, an answer), shard 1 empty, shard 2 holds the
    repo: its node comes first."""
    nodes = [f"node-{i}" for i in range(5)]
    built = rendezvous_rank(nodes, REPO)[-1]  # last by rendezvous: first only by history
    api = ShardedApi(
        [builder(f"d{i}", n) for i, n in enumerate(nodes)],
        {f"{DEFAULT_NAME}-1": {}, f"{DEFAULT_NAME}-2": {REPO: {built: NOW}}},
    )
    ranked = [n for _, n in preferred(enabled(history_shards=3).affinity_for(api, "binder", REPO))]
    assert ranked[0] == built
    assert api.reads == [("binder", f"{DEFAULT_NAME}-{i}") for i in range(3)]


@pytest.mark.parametrize("error", [TimeoutError("read timed out"), "status 0"])
def test_a_history_read_without_an_answer_stops_the_other_shards(error: Exception | str) -> None:
    """No answer (a timeout; the client's ApiException with status 0, its connection
    failure): the next shards would wait as long, so none is read and the history is
    None: rendezvous only."""
    from kubernetes.client.exceptions import ApiException

    failure = ApiException(status=0, reason="connection refused") if error == "status 0" else error
    assert isinstance(failure, Exception)
    api = ShardedApi(
        [builder("d", "node-1")], {f"{DEFAULT_NAME}-0": failure, f"{DEFAULT_NAME}-1": {REPO: {"node-1": NOW}}}
    )
    assert enabled(history_shards=2).history(api, "binder") is None
    assert api.reads == [("binder", f"{DEFAULT_NAME}-0")]


def test_no_history_configmap_is_no_history() -> None:
    api = ShardedApi([builder("d", "node-1")], {})  # every shard 404
    assert enabled(history_shards=2).history(api, "binder") is None
    assert len(api.reads) == 2


def test_history_settings_name_where_it_is_read_and_are_cached_apart() -> None:
    api = ShardedApi(
        [builder("d", "node-1")], {"a-0": {REPO: {"node-a": NOW}}, "b-0": {REPO: {"node-b": NOW}}}
    )
    a = enabled(history_name="a", history_namespace="hist").history(api, "binder")
    b = enabled(history_name="b", history_namespace="hist").history(api, "binder")
    assert a is not None and a.nodes_for(REPO, NOW) == ["node-a"]
    assert b is not None and b.nodes_for(REPO, NOW) == ["node-b"]
    assert api.reads == [("hist", "a-0"), ("hist", "b-0")]
    assert enabled(use_history=False).history(api, "binder") is None and len(api.reads) == 2


def test_ranked_nodes_names_each_node_once_and_at_most_top_k() -> None:
    nodes = [f"node-{i}" for i in range(6)]
    order = rendezvous_rank(nodes, REPO)
    sticky = enabled(top_k=3)
    # a history node that is also the rendezvous top is named once: the rendezvous top 3
    history = BuildHistory(86400.0)
    history.record(REPO, order[0], NOW)
    assert sticky.ranked_nodes(REPO, nodes, history, NOW) == order[:3]
    # four history nodes (newest first: order[5], [4], [3], [2]), top_k 3: the newest three
    history = BuildHistory(86400.0, max_nodes_per_repo=10)
    for age, node in enumerate(order[5:1:-1]):
        history.record(REPO, node, NOW - age)
    assert sticky.ranked_nodes(REPO, nodes, history, NOW) == [order[5], order[4], order[3]]


def test_the_history_keeps_every_node_a_repo_was_built_on() -> None:
    """The ConfigMap's nodes of a repo all count, most recent first (the extender's
    history.max_nodes_per_repo bounds them when written), not only the newest."""
    nodes = [f"node-{i}" for i in range(6)]
    order = rendezvous_rank(nodes, REPO)
    old, new = order[-1], order[-2]  # last two by rendezvous: first two only by history
    api = FakeApi([builder(f"d{i}", n) for i, n in enumerate(nodes)], {REPO: {old: NOW - 60, new: NOW}})
    ranked = [n for _, n in preferred(enabled(top_k=3).affinity_for(api, "binder", REPO))]
    assert ranked == [new, old, order[0]]


def test_the_last_weight_repeats_past_the_list() -> None:
    # weights [100, 60, 30], top_k 4: the fourth node gets 30 again
    nodes = ["a", "b", "c", "d"]
    assert [w for w, _ in preferred(enabled(top_k=4).node_affinity(nodes))] == [100, 60, 30, 30]


def test_an_api_that_answers_with_dicts_works_as_the_clients_models() -> None:
    """CoreApi: the answers are the client's models or dicts in the API's shape."""

    class DictApi(FakeApi):
        def list_namespaced_pod(self, namespace: str, label_selector: str = "", **kwargs: Any) -> dict:
            self.pod_lists += 1
            return {"items": self.pods}

        def read_namespaced_config_map(self, name: str, namespace: str, **kwargs: Any) -> dict:
            return {"data": {DATA_KEY: HistoryDoc(self.history or {}).dumps()}}

    nodes = [f"node-{i}" for i in range(4)]
    built = rendezvous_rank(nodes, REPO)[-1]
    api = DictApi([builder(f"d{i}", n) for i, n in enumerate(nodes)], {REPO: {built: NOW}})
    ranked = [n for _, n in preferred(enabled(top_k=2).affinity_for(api, "binder", REPO))]
    assert ranked == [built, rendezvous_rank(nodes, REPO)[0]]


def test_a_call_that_does_not_answer_is_given_up_after_its_bound() -> None:
    from stickypack.binderhub import _within

    release = threading.Event()
    started = time.monotonic()
    with pytest.raises(TimeoutError, match=r"listing: no answer within 0.5 s"):
        _within(0.5, lambda: release.wait(10), "listing")
    held = time.monotonic() - started
    release.set()
    assert 0.5 <= held < 1.5, held  # 0.5 s, not 4 x 0.5 (urllib3's retries)
