"""The history stores against the real API server: concurrent writers (409 Conflict retried)
lose no entry, sharding, restart survival, node annotations."""

from __future__ import annotations

import asyncio
import functools
import time
import uuid
from typing import Any

import pytest

from stickypack.kube.history import (
    ConfigMapHistoryStore,
    HistoryRecorder,
    Limits,
    NodeAnnotationHistoryStore,
    Record,
    commit,
    forget_node,
)
from stickypack.testing import ControlPlane

pytestmark = pytest.mark.controlplane
NOW = time.time()


def run(cp: ControlPlane, fn) -> Any:
    from kubernetes_asyncio import client

    async def go(_: Any) -> Any:
        api = client.ApiClient(configuration=cp.client_configuration())
        try:
            return await fn(api)
        finally:
            await api.close()

    return cp.call(go, timeout=120)


def _store(api: Any, kind: str, name: str) -> Any:
    """The history store ``kind`` (``configmap``: ConfigMaps ``name-*`` of ``default``;
    ``node-annotations``) on client ``api``."""
    if kind == "configmap":
        return ConfigMapHistoryStore(api, "default", name)
    return NodeAnnotationHistoryStore(api)


@pytest.mark.parametrize("shards", [1, 3])
def test_concurrent_recorders_lose_no_entry(cluster: ControlPlane, shards: int) -> None:
    name = f"h-{uuid.uuid4().hex[:8]}"

    async def scenario(api: Any) -> tuple[set[str], int, dict]:
        recorders = [
            HistoryRecorder(ConfigMapHistoryStore(api, "default", name, shards), flush_interval_s=0)
            for _ in range(5)
        ]
        for rec in recorders:
            await rec.load()

        async def work(w: int, rec: HistoryRecorder) -> None:
            for i in range(12):
                rec.record(f"https://github.com/o/{w}-{i}", f"node-{i % 4}", NOW)
                await rec.flush()

        await asyncio.gather(*(work(w, r) for w, r in enumerate(recorders)))
        conflicts = sum(r.store.conflicts for r in recorders)  # type: ignore[union-attr]
        fresh = HistoryRecorder(ConfigMapHistoryStore(api, "default", name, shards))
        await fresh.load()  # "a restart": a new process reads the store
        docs = await fresh.store.read_all()  # type: ignore[union-attr]
        return {repo for repo, _ in fresh.history.items()}, conflicts, docs

    repos, conflicts, docs = run(cluster, scenario)
    assert repos == {f"https://github.com/o/{w}-{i}" for w in range(5) for i in range(12)}
    assert conflicts > 0  # the writers really raced
    assert len(docs) == shards and all(v is not None for _, v in docs.values())


def test_forget_node_and_ttl_on_configmaps(cluster: ControlPlane) -> None:
    name = f"h-{uuid.uuid4().hex[:8]}"

    async def scenario(api: Any) -> Any:
        store = ConfigMapHistoryStore(api, "default", name, shards=2)
        limits = Limits(ttl_s=3600)
        await commit(
            store,
            [
                Record("a", "n1", NOW),
                Record("b", "n1", NOW),
                Record("c", "n2", NOW),
                Record("old", "n2", NOW - 7200),
            ],
            limits,
        )
        dropped = await forget_node(store, "n1", limits)
        docs = await store.read_all()
        return dropped, {repo: nodes for doc, _ in docs.values() for repo, nodes in doc.repos.items()}

    dropped, repos = run(cluster, scenario)
    assert dropped == 2
    assert repos == {"c": {"n2": NOW}}


def test_node_annotation_store(cluster: ControlPlane) -> None:
    for n in ("n1", "n2"):
        cluster.create_node(n)

    async def scenario(api: Any) -> Any:
        store = NodeAnnotationHistoryStore(api, max_annotation_bytes=2048)
        await commit(
            store, [Record(f"https://github.com/o/r{i:03d}", "n1", NOW + i) for i in range(60)], Limits()
        )
        await commit(store, [Record("https://github.com/o/x", "n2", NOW)], Limits())
        docs = await store.read_all()
        return docs

    docs = run(cluster, scenario)
    n1 = docs["n1"][0].repos
    assert 0 < len(n1) < 60  # bounded to 2 KiB, newest kept
    assert "https://github.com/o/r059" in n1
    assert docs["n2"][0].repos == {"https://github.com/o/x": {"n2": NOW}}
    annotations = {n["metadata"]["name"]: n["metadata"].get("annotations", {}) for n in cluster.nodes()}
    assert len(annotations["n1"]["stickypack.io/build-history"]) <= 2048


def test_forgetting_a_node_that_is_gone_drops_nothing_on_either_store(cluster: ControlPlane) -> None:
    # with node annotations, forget-node of a deleted node once failed on the 404 of its read
    # (exit 1), where the ConfigMap store answered 0 entries dropped
    cluster.create_node("n-here")

    async def scenario(api: Any) -> Any:
        annotations = NodeAnnotationHistoryStore(api)
        await commit(annotations, [Record("https://github.com/o/a", "n-here", NOW)], Limits())
        configmaps = ConfigMapHistoryStore(api, "default", "gone-test")
        return (
            await forget_node(annotations, "n-never-was", when=NOW + 1),
            await forget_node(configmaps, "n-never-was", when=NOW + 1),
            (await annotations.read_all())["n-here"][0].repos,
        )

    dropped_a, dropped_c, kept = run(cluster, scenario)
    assert (dropped_a, dropped_c) == (0, 0)
    assert kept == {"https://github.com/o/a": {"n-here": NOW}}


def test_a_deleted_nodes_history_part_is_dropped_not_kept_forever(cluster: ControlPlane) -> None:
    # a write to a deleted node once kept its document (with a tombstone) in the recorder's
    # memory, one more for every node the cluster ever had
    cluster.create_node("n-gone")
    cluster.create_node("n-kept")

    async def scenario(api: Any) -> Any:
        from kubernetes_asyncio import client

        store = NodeAnnotationHistoryStore(api)
        rec = HistoryRecorder(store, flush_interval_s=0, clock=lambda: NOW)
        await rec.load()
        rec.record("https://github.com/o/a", "n-gone", NOW)
        rec.record("https://github.com/o/b", "n-kept", NOW)
        await rec.flush()
        assert {"n-gone", "n-kept"} <= set(rec._docs)
        await client.CoreV1Api(api).delete_node("n-gone")
        rec.forget_node("n-gone", NOW + 1)  # what the node watch does when a node goes
        await rec.flush()  # the write finds no node: 404
        return set(rec._docs), rec.history.nodes_for("https://github.com/o/b", NOW + 2)

    parts, kept = run(cluster, scenario)
    assert "n-gone" not in parts and "n-kept" in parts
    assert kept == ["n-kept"]


def test_a_node_whose_annotations_are_nearly_full_neither_blocks_nor_loses_the_others(
    cluster: ControlPlane,
) -> None:
    """All annotations of a node share 256 KiB; another tool took almost all of it on one node.
    The write there is refused (HTTP 422) at the full ``max_annotation_bytes``: the store keeps
    the newest repos that fit instead, and the other nodes' history is written too (a refused
    part once failed every flush, for every node, for ever)."""
    from kubernetes_asyncio import client

    cluster.create_node("crowded")
    cluster.create_node("roomy")
    blob = "x" * (256 * 1024 - 3000)

    async def scenario(api: Any) -> Any:
        core = client.CoreV1Api(api)
        await core.patch_node("crowded", {"metadata": {"annotations": {"other.tool/blob": blob}}})
        rec = HistoryRecorder(NodeAnnotationHistoryStore(api), flush_interval_s=0, clock=lambda: NOW + 100)
        await rec.load()
        for i in range(100):
            rec.record(f"https://github.com/o/r{i:03d}", "crowded", NOW + i)
        rec.record("https://github.com/o/x", "roomy", NOW)
        error = None
        try:
            await rec.flush()
        except Exception as exc:
            error = exc
        docs = await rec.store.read_all()  # type: ignore[union-attr]
        return error, docs, rec.pending

    error, docs, pending = run(cluster, scenario)
    assert error is None and pending == []
    assert docs["roomy"][0].repos == {"https://github.com/o/x": {"roomy": NOW}}
    crowded = docs["crowded"][0].repos
    assert 0 < len(crowded) < 100 and "https://github.com/o/r099" in crowded
    annotations = {n["metadata"]["name"]: n["metadata"].get("annotations", {}) for n in cluster.nodes()}
    assert annotations["crowded"]["other.tool/blob"] == blob


@pytest.mark.parametrize("kind", ["configmap", "node-annotations"])
def test_a_forget_is_not_undone_by_a_late_record_of_an_older_build(cluster: ControlPlane, kind: str) -> None:
    """An image cleaner prunes a node and runs ``forget-node`` while an extender still holds
    the record of a build that ended there before the prune (its store was slow, or it is a
    second replica): the record written afterwards must not bring the pruned cache back,
    while a build after the prune counts. With node annotations the tombstone was not
    stored, and the late record undid the forget."""
    cluster.create_node("n1")
    name = f"h-{uuid.uuid4().hex[:8]}"

    make_store = functools.partial(_store, kind=kind, name=name)

    async def scenario(api: Any) -> Any:
        await commit(make_store(api), [Record("https://github.com/o/a", "n1", NOW - 100)], Limits())
        rec = HistoryRecorder(make_store(api), flush_interval_s=0, clock=lambda: NOW)
        await rec.load()
        rec.record("https://github.com/o/b", "n1", NOW - 50)  # ended before the prune, not written yet
        dropped = await forget_node(make_store(api), "n1", when=NOW - 10)  # the image cleaner
        await rec.flush()
        after_late = {r for doc, _ in (await make_store(api).read_all()).values() for r in doc.repos}
        rec.record("https://github.com/o/c", "n1", NOW)  # built after the prune
        await rec.flush()
        after_new = {r for doc, _ in (await make_store(api).read_all()).values() for r in doc.repos}
        return dropped, after_late, after_new

    dropped, after_late, after_new = run(cluster, scenario)
    assert dropped == 1
    assert after_late == set()
    assert after_new == {"https://github.com/o/c"}


# ---- mutation audit of kube/history.py (session: mut-history) ---------------------------------


@pytest.mark.parametrize("kind", ["configmap", "node-annotations"])
def test_a_writer_with_a_stale_copy_loses_no_other_writers_entry(cluster: ControlPlane, kind: str) -> None:
    """Two recorders load the same history; A writes a, B (its copy from before a) writes b,
    then A (its copy from before b) writes c. Each write carries the resourceVersion its
    copy was read at (a ConfigMap replace's, a node merge patch's precondition): the stale
    ones are refused (409), read again and re-applied, so all three stay. Written without
    it, a stale copy replaced the other writer's entry."""
    cluster.create_node("n1")
    name = f"h-{uuid.uuid4().hex[:8]}"

    make_store = functools.partial(_store, kind=kind, name=name)

    async def scenario(api: Any) -> Any:
        a = HistoryRecorder(make_store(api), flush_interval_s=0, clock=lambda: NOW)
        b = HistoryRecorder(make_store(api), flush_interval_s=0, clock=lambda: NOW)
        await a.load()
        await b.load()
        for rec, repo in ((a, "a"), (b, "b"), (a, "c")):
            rec.record(f"https://github.com/o/{repo}", "n1", NOW)
            await rec.flush()
        stored = {r for doc, _ in (await make_store(api).read_all()).values() for r in doc.repos}
        return stored, a.store.conflicts + b.store.conflicts  # type: ignore[union-attr]

    stored, conflicts = run(cluster, scenario)
    assert stored == {f"https://github.com/o/{r}" for r in "abc"}
    assert conflicts == 2  # b's write, then a's second


def test_a_configmap_deleted_since_it_was_read_is_created_anew(cluster: ControlPlane) -> None:
    """The recorder's copy of its ConfigMap has a resourceVersion, but the ConfigMap was
    deleted (an operator resetting the history): the replace answers 404, which is taken as
    a conflict: read again (nothing), and created with the new entry."""
    name = f"h-{uuid.uuid4().hex[:8]}"

    async def scenario(api: Any) -> Any:
        from kubernetes_asyncio import client

        store = ConfigMapHistoryStore(api, "default", name)
        rec = HistoryRecorder(store, flush_interval_s=0, clock=lambda: NOW)
        await rec.load()
        rec.record("https://github.com/o/a", "n1", NOW)
        await rec.flush()
        await client.CoreV1Api(api).delete_namespaced_config_map(f"{name}-0", "default")
        rec.record("https://github.com/o/b", "n1", NOW)
        await rec.flush()
        return (await store.read("0"))[0].repos, store.conflicts, rec.pending

    repos, conflicts, pending = run(cluster, scenario)
    assert repos == {"https://github.com/o/b": {"n1": NOW}}
    assert conflicts == 1 and pending == []


def test_a_node_history_is_bounded_to_exactly_max_annotation_bytes(cluster: ControlPlane) -> None:
    """{"a":1800000000.0,"b":1800000001.0} is 35 bytes (1 + 16 for "a":1800000000.0, 1 for
    the comma, 16 for b's entry, 1): a bound of 35 keeps both repos; 34 drops the older, a,
    leaving {"b":1800000001.0}, 18 bytes (of 2 repos, at least one goes a round: a 20th
    rounds down to none)."""
    t = 1_800_000_000.0
    cluster.create_node("n35")
    cluster.create_node("n34")

    async def scenario(api: Any) -> Any:
        out = {}
        for node, bound in (("n35", 35), ("n34", 34)):
            store = NodeAnnotationHistoryStore(api, max_annotation_bytes=bound)
            await commit(store, [Record("a", node, t), Record("b", node, t + 1)], Limits(), now=lambda: t)
            out[node] = (await store.read(node))[0].repos
        return out

    out = run(cluster, scenario)
    assert out["n35"] == {"a": {"n35": t}, "b": {"n35": t + 1}}
    assert out["n34"] == {"b": {"n34": t + 1}}
    annotations = {n["metadata"]["name"]: n["metadata"].get("annotations", {}) for n in cluster.nodes()}
    assert len(annotations["n35"]["stickypack.io/build-history"]) == 35
    assert len(annotations["n34"]["stickypack.io/build-history"]) == 18


def test_a_node_without_room_for_one_entry_is_written_without_history(cluster: ControlPlane) -> None:
    """The API server takes at most 256 KiB (262,144 bytes) of a node's annotation keys and
    values together. Another tool's blob leaves 20 bytes: not even the key
    stickypack.io/build-history (27 bytes) fits. The write of one repo is refused (422),
    halved to none (1 - 1 // 2 = 1 dropped), and written without the annotation, not
    retried for ever."""
    from kubernetes_asyncio import client

    cluster.create_node("full")
    blob = "x" * (256 * 1024 - len("other.tool/blob") - 20)

    async def scenario(api: Any) -> Any:
        await client.CoreV1Api(api).patch_node(
            "full", {"metadata": {"annotations": {"other.tool/blob": blob}}}
        )
        store = NodeAnnotationHistoryStore(api)
        written = await commit(store, [Record("https://github.com/o/a", "full", NOW)], Limits())
        return written, (await store.read_all())["full"][0].repos

    written, repos = run(cluster, scenario)
    assert set(written) == {"full"} and repos == {}
    annotations = {n["metadata"]["name"]: n["metadata"].get("annotations", {}) for n in cluster.nodes()}
    assert annotations["full"]["other.tool/blob"] == blob
    assert "stickypack.io/build-history" not in annotations["full"]
