"""The informer and cache against the real API server, through a TCP proxy we can cut:
changes made while the connection is down (a deletion included) are seen after the
reconnect; when etcd has been compacted past the informer's resourceVersion meanwhile, the
API server answers 410 Gone and the informer relists, delivering what it missed; a list is
paged with the API server's continue tokens."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import functools
import time
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlparse

import httpx
import pytest

from stickypack.extender.server import POD_FIELD_SELECTOR
from stickypack.kube.cache import ClusterCache, slim_node, slim_pod
from stickypack.kube.informer import Informer
from stickypack.testing import ControlPlane

pytestmark = pytest.mark.controlplane


class Proxy:
    """A loopback TCP proxy to ``target``; ``cut()`` drops every connection and drops new
    ones at once until ``resume()`` (the port stays bound, so nothing else can take it);
    ``stop()`` closes it."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.server: asyncio.AbstractServer | None = None
        self.writers: list[asyncio.StreamWriter] = []
        self.port = 0
        self.is_cut = False

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.is_cut:
            writer.transport.abort()
            return
        up_reader, up_writer = await asyncio.open_connection(*self.target)
        if self.is_cut:  # cut while connecting upstream
            for w in (writer, up_writer):
                w.transport.abort()
            return
        self.writers += [writer, up_writer]

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(Exception):
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            with contextlib.suppress(Exception):
                dst.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    async def cut(self) -> None:
        self.is_cut = True
        for w in self.writers:
            w.transport.abort()
        self.writers.clear()

    async def resume(self) -> None:
        self.is_cut = False

    async def stop(self) -> None:
        await self.cut()
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()


async def proxied_client(cluster: ControlPlane) -> tuple[Proxy, Any]:
    """A started :class:`Proxy` to the cluster's API server and a kubernetes_asyncio
    ApiClient that goes through it."""
    from kubernetes_asyncio import client

    assert cluster.server is not None
    url = urlparse(cluster.server)
    proxy = Proxy(url.hostname or "127.0.0.1", url.port or 443)
    await proxy.start()
    cfg = cluster.client_configuration()
    cfg.host = f"https://127.0.0.1:{proxy.port}"
    return proxy, client.ApiClient(configuration=cfg)


def test_informer_reconnects_and_catches_up(cluster: ControlPlane) -> None:
    from kubernetes_asyncio import client

    cluster.create_node("before")

    async def scenario(_: Any) -> dict:
        proxy, api = await proxied_client(cluster)
        deleted: list[str] = []
        cache = ClusterCache(on_node_deleted=lambda n, when: deleted.append(n))
        inf = Informer(
            "nodes", client.CoreV1Api(api).list_node, cache.node_event,
            min_backoff_s=0.05, max_backoff_s=0.2, transform=slim_node,
        )  # fmt: skip
        inf.start()
        direct = client.ApiClient(configuration=cluster.client_configuration())
        core = client.CoreV1Api(direct)
        try:
            await asyncio.wait_for(inf.synced.wait(), 30)
            assert set(cache.table.index) == {"before"}
            await proxy.cut()
            # while the informer cannot reach the API server
            await core.delete_node("before")
            await core.create_node({"metadata": {"name": "during"}})
            # the informer has lost its watch (and fails to reconnect) before the way is open
            await _until(lambda: inf.stats.watch_errors >= 1, "the informer to see the cut")
            await proxy.resume()
            deadline = time.monotonic() + 30
            while set(cache.table.index) != {"during"} and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            return {
                "nodes": set(cache.table.index),
                "deleted": deleted,
                "errors": inf.stats.watch_errors,
                "relists": inf.stats.lists,
            }
        finally:
            await inf.stop()
            await api.close()
            await direct.close()
            await proxy.stop()

    result = cluster.call(scenario, timeout=90)
    assert result["nodes"] == {"during"}
    assert result["deleted"] == ["before"]  # the deletion missed while away is delivered
    assert result["errors"] >= 1
    assert result["relists"] == 1  # the watch resumed from its resourceVersion: no relist


def test_informer_relists_after_a_real_410_gone(cluster: ControlPlane) -> None:
    """etcd compacted past the informer's resourceVersion while it was cut off: the API server
    (pod templates are served from etcd, not the watch cache: ``ControlPlane``) answers the
    resumed watch with 410 Gone; the informer relists and delivers the deletion it missed as
    a synthetic one (a resumed watch would have delivered it as a real event)."""
    from kubernetes_asyncio import client

    assert cluster.etcd_url is not None
    etcd = cluster.etcd_url

    def compact_etcd() -> int:
        key = base64.b64encode(b"/").decode()
        revision = int(httpx.post(f"{etcd}/v3/kv/range", json={"key": key}).json()["header"]["revision"])
        httpx.post(
            f"{etcd}/v3/kv/compaction", json={"revision": revision, "physical": True}
        ).raise_for_status()
        return revision

    def template(name: str) -> dict:
        return {
            "metadata": {"name": name},
            "template": {"spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}},
        }

    async def scenario(_: Any) -> dict:
        proxy, api = await proxied_client(cluster)
        direct = client.ApiClient(configuration=cluster.client_configuration())
        core = client.CoreV1Api(direct)
        events: list[tuple[str, str, bool]] = []

        def handler(kind: str, obj: dict, old: Any, synthetic: bool = False) -> None:
            events.append((kind, obj["metadata"]["name"], synthetic))

        await core.create_namespaced_pod_template("default", template("before"))
        inf = Informer(
            "podtemplates", functools.partial(client.CoreV1Api(api).list_namespaced_pod_template, "default"),
            handler, min_backoff_s=0.05, max_backoff_s=0.2,
        )  # fmt: skip
        inf.start()
        try:
            await asyncio.wait_for(inf.synced.wait(), 30)
            await proxy.cut()
            await core.delete_namespaced_pod_template("before", "default")
            await core.create_namespaced_pod_template("default", template("during"))
            compacted = await asyncio.to_thread(compact_etcd)
            await proxy.resume()
            deadline = time.monotonic() + 30
            while set(inf.objects) != {"default/during"} and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            return {
                "objects": set(inf.objects),
                "events": events,
                "gone": inf.stats.relists_gone,
                "lists": inf.stats.lists,
                "listed_rv": int(inf.resource_version),
                "compacted": compacted,
            }
        finally:
            await inf.stop()
            await api.close()
            with contextlib.suppress(Exception):
                await core.delete_namespaced_pod_template("during", "default")
            await direct.close()
            await proxy.stop()

    result = cluster.call(scenario, timeout=90)
    assert result["objects"] == {"default/during"}
    assert result["gone"] >= 1 and result["lists"] >= 2
    assert result["listed_rv"] >= result["compacted"]  # the relist's view is after the compaction
    assert ("DELETED", "before", True) in result["events"]  # missed while away: from the relist
    assert ("ADDED", "during", False) in result["events"]


def test_builder_nodes_of_a_real_pod_list_skip_unbound_and_other_pods(cluster: ControlPlane) -> None:
    """BinderHub's library mode lists the builder pods with its client and ranks
    ``nodes_of_pods`` of the list: a pod not bound yet, and a pod the selector leaves out,
    give no node."""
    from kubernetes_asyncio import client

    from stickypack.kube.cache import DEFAULT_BUILDER_SELECTOR, selector_text
    from stickypack.kube.client import read_json
    from stickypack.kube.discovery import nodes_of_pods
    from stickypack.testing import pod_manifest

    for n in ("n1", "n2", "n3"):
        cluster.create_node(n)
    pods = []
    for name, node in (("dind-a", "n2"), ("dind-b", None), ("dind-c", "n1"), ("other", "n3")):
        labels = dict(DEFAULT_BUILDER_SELECTOR) if name.startswith("dind") else {}
        pod = pod_manifest(name, labels=labels)
        if node:
            pod["spec"]["nodeName"] = node
        pods.append(pod)
    cluster.create_pods(pods)

    async def scenario(_: Any) -> tuple[int, list[str]]:
        api = client.ApiClient(configuration=cluster.client_configuration())
        try:
            resp = await client.CoreV1Api(api).list_namespaced_pod(
                "default", label_selector=selector_text(DEFAULT_BUILDER_SELECTOR), _preload_content=False
            )
            items = (await read_json(resp))["items"]
            return len(items), nodes_of_pods(items)
        finally:
            await api.close()

    listed, nodes = cluster.call(scenario)
    assert listed == 3 and nodes == ["n1", "n2"]


def test_informer_pages_through_a_real_list_and_watches_from_its_version(cluster: ControlPlane) -> None:
    """page_size 2 over 5 nodes: the API server hands out continue tokens, the informer
    follows them, and the list's resourceVersion starts a watch that sees the next node."""
    import uuid

    from kubernetes_asyncio import client

    mark = uuid.uuid4().hex[:8]
    names = [f"page-{mark}-{i}" for i in range(5)]
    for n in names:
        cluster.create_node(n, labels={"pagetest": mark})

    async def scenario(_: Any) -> dict:
        api = client.ApiClient(configuration=cluster.client_configuration())
        core = client.CoreV1Api(api)
        calls: list[dict] = []

        async def list_node(**kw: Any) -> Any:
            calls.append(kw)
            return await core.list_node(**kw)

        inf = Informer("nodes", list_node, label_selector=f"pagetest={mark}", page_size=2)
        inf.start()
        try:
            await asyncio.wait_for(inf.synced.wait(), 30)
            listed = set(inf.objects)
            await core.create_node({"metadata": {"name": f"page-{mark}-late", "labels": {"pagetest": mark}}})
            deadline = time.monotonic() + 30
            while f"page-{mark}-late" not in inf.objects and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            return {
                "listed": listed,
                "after": set(inf.objects),
                "continued": sum(1 for kw in calls if kw.get("_continue")),
                "lists": inf.stats.lists,
            }
        finally:
            await inf.stop()
            await api.close()

    result = cluster.call(scenario, timeout=90)
    assert result["listed"] == set(names)
    assert result["continued"] == 2  # pages of 2, 2 and 1
    assert result["after"] == {*names, f"page-{mark}-late"} and result["lists"] == 1


def _build_pod(name: str, node: str, repo: str) -> dict:
    from stickypack.testing import pod_manifest

    pod = pod_manifest(name, labels={"component": "binderhub-build"})
    pod["metadata"]["annotations"] = {"binder-repo": repo}
    pod["spec"]["nodeName"] = node
    return pod


async def _until(cond: Any, what: str, timeout: float = 30.0) -> None:
    """Wait for ``cond()``; fail, naming ``what``, if it does not come within ``timeout``."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        await asyncio.sleep(0.05)


@contextlib.asynccontextmanager
async def _watched_cache(core: Any, cache: ClusterCache) -> AsyncIterator[Informer]:
    """``cache`` fed by the node and pod watches the extender runs (its pod field selector),
    both listed; yields the pod informer."""
    nodes = Informer("nodes", core.list_node, cache.node_event, transform=slim_node)
    pods = Informer(
        "pods", core.list_pod_for_all_namespaces, cache.pod_event,
        field_selector=POD_FIELD_SELECTOR, transform=slim_pod,
    )  # fmt: skip
    nodes.start()
    pods.start()
    try:
        await asyncio.wait_for(nodes.synced.wait(), 30)
        await asyncio.wait_for(pods.synced.wait(), 30)
        yield pods
    finally:
        await pods.stop()
        await nodes.stop()


def test_build_pod_ends_are_seen_with_their_phase_through_the_extender_pod_watch(
    cluster: ControlPlane,
) -> None:
    """The extender's pod informer (its field selector, its transform) feeds the cache: a build
    pod that ends Failed is not recorded with ``record_failed=False``, and one that ends
    Succeeded is recorded as Succeeded; both stop counting on their node at once. (With a
    ``status.phase`` field selector the API server reported both as deletions carrying
    their last running state: the Failed one was recorded, as "Deleted".) One that had
    ended before the cache started is not recorded, even when it changes later."""
    from kubernetes_asyncio import client

    from stickypack.testing import pod_manifest

    cluster.create_node("b1")

    async def finished_before(api: Any) -> None:
        core = client.CoreV1Api(api)
        await core.create_namespaced_pod("default", _build_pod("old", "b1", "repo-old"))
        pod = await core.read_namespaced_pod("old", "default")
        pod.status.phase = "Succeeded"
        await core.replace_namespaced_pod_status("old", "default", pod)

    cluster.call(finished_before)

    async def scenario(_: Any) -> dict:
        api = client.ApiClient(configuration=cluster.client_configuration())
        core = client.CoreV1Api(api)
        ended: list[tuple[str, str, str]] = []
        cache = ClusterCache(
            on_build_end=lambda repo, node, when, phase: ended.append((repo, node, phase)),
            record_failed=False,
        )
        try:
            async with _watched_cache(core, cache) as pods:
                # ended before the cache started: recorded then, if at all, not again now
                assert "default/old" in pods.objects
                old = await core.read_namespaced_pod("old", "default")
                old.metadata.labels["touched"] = "yes"
                await core.replace_namespaced_pod("old", "default", old)
                for name, repo in (("fails", "repo-f"), ("succeeds", "repo-s")):
                    await core.create_namespaced_pod("default", _build_pod(name, "b1", repo))
                i = cache.table.index["b1"]
                await _until(lambda: cache.table.builds[i] == 2, "both builds counted on b1")
                for name, phase in (("fails", "Failed"), ("succeeds", "Succeeded")):
                    pod = await core.read_namespaced_pod(name, "default")
                    pod.status.phase = phase
                    await core.replace_namespaced_pod_status(name, "default", pod)
                await _until(lambda: cache.table.builds[i] == 0 and len(ended) >= 1, "both builds ended")
                # a later pod: once the watch has delivered it, it has delivered every change
                # before it (events come in resourceVersion order), so nothing is still on its way
                marker = pod_manifest("marker")
                marker["spec"]["nodeName"] = "b1"
                await core.create_namespaced_pod("default", marker)
                await _until(lambda: "default/marker" in pods.objects, "the marker pod")
                return {"ended": list(ended), "builds": int(cache.table.builds[i])}
        finally:
            await api.close()

    result = cluster.call(scenario, timeout=90)
    assert result["builds"] == 0
    assert result["ended"] == [("repo-s", "b1", "Succeeded")]


def test_a_build_pod_outliving_its_deleted_node_does_not_bring_the_node_back(cluster: ControlPlane) -> None:
    """A node dies (deleted, e.g. a preempted VM) with a build pod on it; the pod is deleted
    later (pod GC). The node was forgotten when it went, and the build that died with it must
    not put it back in the history: its image cache went with the machine."""
    from kubernetes_asyncio import client

    from stickypack.kube.history import HistoryRecorder

    cluster.create_node("doomed")
    cluster.create_node("alive")

    async def scenario(_: Any) -> dict:
        api = client.ApiClient(configuration=cluster.client_configuration())
        core = client.CoreV1Api(api)
        recorder = HistoryRecorder(None)
        cache = ClusterCache(
            on_build_end=lambda repo, node, when, phase: recorder.record(repo, node, when),
            on_node_deleted=recorder.forget_node,
        )
        try:
            async with _watched_cache(core, cache):
                await core.create_namespaced_pod("default", _build_pod("on-doomed", "doomed", "repo-d"))
                await core.create_namespaced_pod("default", _build_pod("on-alive", "alive", "repo-a"))
                await _until(
                    lambda: cache.placement("default/on-doomed") and cache.placement("default/on-alive"),
                    "both build pods placed in the cache",
                )
                await core.delete_node("doomed")
                await _until(lambda: "doomed" not in cache.table, "the node deletion")
                # on-doomed first: its deletion reaches the cache before on-alive's (one watch, in
                # resourceVersion order), so once repo-a is recorded, repo-d's end has been handled
                for name in ("on-doomed", "on-alive"):
                    await core.delete_namespaced_pod(name, "default", grace_period_seconds=0)
                await _until(
                    lambda: bool(recorder.history.nodes_for("repo-a", time.time())), "repo-a recorded"
                )
                assert cache.placement("default/on-doomed") is None
                now = time.time()
                return {
                    "d": recorder.history.nodes_for("repo-d", now),
                    "a": recorder.history.nodes_for("repo-a", now),
                }
        finally:
            await api.close()

    result = cluster.call(scenario, timeout=90)
    assert result["a"] == ["alive"]
    assert result["d"] == []


def test_a_watch_cut_after_it_brought_events_reconnects_after_the_shortest_backoff(
    cluster: ControlPlane,
) -> None:
    """Connections refused while the API server is away grow the backoff; the watch that
    then works and brings events has made progress, so when it is cut the informer
    reconnects after the shortest backoff, not the grown one (once it waited the latter)."""
    from kubernetes_asyncio import client

    async def scenario(_: Any) -> dict:
        proxy, api = await proxied_client(cluster)
        direct = client.ApiClient(configuration=cluster.client_configuration())
        core = client.CoreV1Api(direct)
        inf = Informer("nodes", client.CoreV1Api(api).list_node, min_backoff_s=0.05, max_backoff_s=30.0)
        sleeps: list[float] = []

        async def sleep(base: float) -> None:  # record the backoff, wait only a little
            sleeps.append(base)
            await asyncio.sleep(0.02)

        inf._sleep = sleep  # type: ignore[method-assign]
        inf.start()
        try:
            await asyncio.wait_for(inf.synced.wait(), 30)
            await proxy.cut()
            await _until(lambda: len(sleeps) >= 6, "six refused reconnects")
            await proxy.resume()
            await _until(lambda: inf.stats.connected, "the watch to reconnect")
            await core.create_node({"metadata": {"name": "progress"}})
            await _until(lambda: "progress" in inf.objects, "the new node through the watch")
            before = len(sleeps)
            grown = sleeps[-1]
            await proxy.cut()
            await _until(lambda: len(sleeps) > before, "the cut to be seen")
            return {"grown": grown, "after_progress": sleeps[before]}
        finally:
            await inf.stop()
            await api.close()
            await direct.close()
            await proxy.stop()

    result = cluster.call(scenario, timeout=90)
    assert result["grown"] >= 1.6
    assert result["after_progress"] == 0.05


def test_a_claims_allocation_changing_updates_its_nodes_dra_reading(cluster: ControlPlane) -> None:
    """``ClusterCache(dra=True)`` fed by the extender's watches (nodes, pods, and with
    ``cluster.dra`` ResourceSlices and ResourceClaims, slimmed as it slims them): a node
    publishing 4 devices holds a bound pod using a claim. Not allocated yet: the autoscaler
    cannot weigh the node (kept: +inf in the table); its allocation written through the
    status subresource (3 devices): 0.75; taken away again: unweighable again; the pod
    gone: 0 of 4 (its claim counts no more). Each change reaches the table through the
    claim's or the pod's watch alone."""
    from kubernetes_asyncio import client

    from stickypack.core.dra import DRA_SLICES_COLUMN, DRA_UTILIZATION_COLUMN
    from stickypack.kube.dra import NodeDraTracker, slim_resource_claim, slim_resource_slice
    from stickypack.testing import pod_manifest

    cluster.create_node("devices", cpu="8", memory="32Gi")
    cluster.create_node("plain", cpu="8", memory="32Gi")
    cluster.create_device_pool("devices", 4)
    cluster.create_claim("gpus", 3)
    user = pod_manifest("user", cpu="1", memory="1Gi")
    user["spec"]["nodeName"] = "devices"
    user["spec"]["resourceClaims"] = [{"name": "gpus", "resourceClaimName": "gpus"}]
    cluster.create_pod(pod=user)

    async def scenario(_: Any) -> list[tuple[float, float]]:
        api = client.ApiClient(configuration=cluster.client_configuration())
        resource = client.ResourceV1Api(api)
        cache = ClusterCache(dra=True)
        tracker = cache.dra
        assert isinstance(tracker, NodeDraTracker)
        informers = [
            Informer(
                "slices", resource.list_resource_slice, tracker.slice_event, transform=slim_resource_slice
            ),
            Informer(
                "claims", resource.list_resource_claim_for_all_namespaces, tracker.claim_event,
                transform=slim_resource_claim,
            ),
        ]  # fmt: skip
        seen: list[tuple[float, float]] = []

        def state() -> tuple[float, float]:
            cache.refresh_dra()
            row = cache.table.index["devices"]
            return (
                float(cache.table.extra[DRA_SLICES_COLUMN][row]),
                float(cache.table.extra[DRA_UTILIZATION_COLUMN][row]),
            )

        async def becomes(expected: tuple[float, float], what: str) -> None:
            await _until(lambda: state() == expected, what)
            seen.append(state())

        try:
            for informer in informers:
                informer.start()
                await asyncio.wait_for(informer.synced.wait(), 30)
            async with _watched_cache(client.CoreV1Api(api), cache):
                await becomes((1.0, float("inf")), "the claim not allocated keeps the node")
                assert cache.table.extra[DRA_SLICES_COLUMN][cache.table.index["plain"]] == 0.0
                await asyncio.to_thread(
                    cluster.allocate_claim, "gpus", "devices", ["dev-0", "dev-1", "dev-2"]
                )
                await becomes((1.0, 0.75), "3 of 4 devices allocated")
                await asyncio.to_thread(cluster.allocate_claim, "gpus", None)
                await becomes((1.0, float("inf")), "the allocation taken away")
                await asyncio.to_thread(cluster.allocate_claim, "gpus", "devices", ["dev-3"])
                await becomes((1.0, 0.25), "1 of 4 devices allocated")
                await client.CoreV1Api(api).delete_namespaced_pod("user", "default", grace_period_seconds=0)
                await becomes((1.0, 0.0), "the pod gone, its claim counts no more")
                return seen
        finally:
            for informer in informers:
                await informer.stop()
            await api.close()

    try:
        assert len(cluster.call(scenario, timeout=120)) == 5
    finally:
        cluster.delete_all_dra()
