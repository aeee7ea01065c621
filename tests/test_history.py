"""Build history: operations, tombstones, bounds, concurrent writers (in memory)."""

from __future__ import annotations

import asyncio
import json

import pytest

from stickypack.kube.history import (
    Conflict,
    Forget,
    HistoryDoc,
    HistoryRecorder,
    Limits,
    MemoryHistoryStore,
    Record,
    apply_ops,
    commit,
    forget_node,
    shard_of,
)

NOW = 1_800_000_000.0


def test_record_and_forget_with_tombstone() -> None:
    doc = apply_ops(HistoryDoc(), [Record("r1", "n1", NOW - 10), Record("r1", "n2", NOW - 5)], Limits(), NOW)
    assert doc.repos == {"r1": {"n1": NOW - 10, "n2": NOW - 5}}
    doc = apply_ops(doc, [Forget("n1", NOW - 1)], Limits(), NOW)
    assert doc.repos == {"r1": {"n2": NOW - 5}}
    assert doc.forgotten == {"n1": NOW - 1}
    # A late record of a build that ended before the forget is dropped...
    late = apply_ops(doc, [Record("r2", "n1", NOW - 3)], Limits(), NOW)
    assert "r2" not in late.repos
    # ...a build after the forget counts again.
    fresh = apply_ops(doc, [Record("r2", "n1", NOW)], Limits(), NOW)
    assert fresh.repos["r2"] == {"n1": NOW}


def test_ttl_expires_entries_and_tombstones() -> None:
    limits = Limits(ttl_s=100)
    ops = [Record("old", "n1", NOW - 200), Record("new", "n1", NOW - 50), Forget("n9", NOW - 150)]
    doc = apply_ops(HistoryDoc(), ops, limits, NOW)
    assert set(doc.repos) == {"new"}
    assert doc.forgotten == {}


def test_bounds_nodes_per_repo_repos_and_bytes() -> None:
    ops = [Record("r", f"n{i}", NOW - 100 + i) for i in range(10)]
    doc = apply_ops(HistoryDoc(), ops, Limits(max_nodes_per_repo=3), NOW)
    assert doc.repos["r"] == {"n9": NOW - 91, "n8": NOW - 92, "n7": NOW - 93}
    ops = [Record(f"repo{i}", "n1", NOW - 1000 + i) for i in range(50)]
    doc = apply_ops(HistoryDoc(), ops, Limits(max_repos=10), NOW)
    assert set(doc.repos) == {f"repo{i}" for i in range(40, 50)}  # the most recently built kept
    long = [
        Record(f"https://github.com/org/repository-{i:05d}", "node-abc", NOW - 1000 + i) for i in range(3000)
    ]
    doc = apply_ops(HistoryDoc(), long, Limits(max_bytes=20_000), NOW)
    assert len(doc.dumps()) <= 20_000
    assert "https://github.com/org/repository-02999" in doc.repos  # newest survive
    assert "https://github.com/org/repository-00000" not in doc.repos


def test_document_round_trip_and_garbage() -> None:
    doc = apply_ops(HistoryDoc(), [Record("r", "n", NOW)], Limits(), NOW)
    again = HistoryDoc.parse(doc.dumps())
    assert again.repos == doc.repos
    assert json.loads(doc.dumps())["version"] == 1
    assert HistoryDoc.parse("not json").repos == {}
    assert HistoryDoc.parse('{"repos": {"r": {"n": "x", "m": 5}}}').repos == {"r": {"m": 5.0}}


@pytest.mark.parametrize(
    "stored",
    [
        # each of these once raised from the parser: the extender never became ready and
        # every later write failed
        '{"repos": [1, 2]}',
        '{"repos": "abc"}',
        '{"repos": {"r": {"n": 5}}, "forgotten": [["n", 1]]}',
        '{"repos": {"r": {"n": ' + "9" * 400 + "}}}",
        "[" * 200_000 + "]" * 200_000,
        '{"repos": {"r": {"n": 1e999}}}',  # infinity: never expired, written back as Infinity
    ],
)
def test_a_damaged_document_is_read_as_far_as_it_is_valid(stored: str, caplog) -> None:
    doc = HistoryDoc.parse(stored, source="build history ConfigMap ns/hist")
    assert all(isinstance(t, float) and t < float("inf") for n in doc.repos.values() for t in n.values())
    assert "build history ConfigMap ns/hist" in caplog.text
    written = apply_ops(doc, [Record("new", "n1", NOW)], Limits(), NOW)  # the next write works
    assert written.repos["new"] == {"n1": NOW} and "Infinity" not in written.dumps()


def test_valid_entries_beside_damaged_ones_are_kept(caplog) -> None:
    doc = HistoryDoc.parse('{"repos": {"a": {"n": 5, "m": "yesterday"}, "b": 7}, "forgotten": {"x": 1}}')
    assert doc.repos == {"a": {"n": 5.0}} and doc.forgotten == {"x": 1.0}
    assert "skipped 2 malformed entries" in caplog.text and "'yesterday' is not a number" in caplog.text


def test_tombstones_cannot_crowd_out_the_repos() -> None:
    # once, many forgotten nodes grew the document past its byte bound, and the bound then
    # dropped every repo, including the one just recorded
    from stickypack.kube.history import MAX_TOMBSTONES

    forgets = [Forget(f"node-{i:05d}", NOW - 10_000 + i) for i in range(3 * MAX_TOMBSTONES)]
    doc = apply_ops(HistoryDoc(), [*forgets, Record("kept", "n1", NOW)], Limits(max_bytes=60_000), NOW)
    assert len(doc.forgotten) == MAX_TOMBSTONES and f"node-{3 * MAX_TOMBSTONES - 1:05d}" in doc.forgotten
    assert doc.repos == {"kept": {"n1": NOW}}


def test_forget_node_refuses_what_is_not_a_node_name(capsys) -> None:
    from stickypack.cli import main

    # 254 characters (DNS labels of 63, 63, 63 and 62, and 3 dots): one over 253
    for name in ["", " ", "a\nb", "../../etc", "*", "x" * 300, ".".join(["x" * 63] * 3 + ["x" * 62])]:
        assert main(["forget-node", name]) == 2
        err = capsys.readouterr().err
        assert "is not a node name" in err and len(err) < 200


def test_forget_node_refuses_a_bad_namespace_and_a_memory_store(tmp_path, capsys) -> None:
    """``forget-node --namespace`` takes a namespace name (a DNS label) only, and a
    configuration whose history is kept in memory has nothing stored to forget: both are
    said in one line (status 2) before any cluster is read (the kubeconfig does not exist)."""
    from stickypack.cli import main

    nowhere = ["--kubeconfig", str(tmp_path / "nope")]
    assert main(["forget-node", "n1", "--namespace", "Bad_NS", *nowhere]) == 2
    assert "--namespace 'Bad_NS' is not a namespace name (a DNS label)" in capsys.readouterr().err
    config = tmp_path / "extender.yaml"
    config.write_text("history:\n  store: memory\n")
    assert main(["forget-node", "n1", "--config", str(config), *nowhere]) == 2
    assert "history.store is memory: there is no stored history to forget" in capsys.readouterr().err


async def test_memory_store_conflict_detection() -> None:
    store = MemoryHistoryStore()
    doc, version = await store.read("0")
    v1 = await store.write("0", doc, version)
    with pytest.raises(Conflict):
        await store.write("0", doc, version)  # stale (None) version
    v2 = await store.write("0", doc, v1)  # the current version: accepted, a new version
    assert (await store.read("0"))[1] == v2 != v1
    with pytest.raises(Conflict):
        await store.write("0", doc, v1)  # v1 is stale now
    assert store.writes == 2 and store.conflicts == 2


async def test_concurrent_writers_lose_no_entry() -> None:
    """20 writers, 10 records each, racing on 2 shards: every record is stored."""
    store = MemoryHistoryStore(shards=2)

    async def writer(w: int) -> None:
        for i in range(10):
            await commit(
                store, [Record(f"repo-{w}-{i}", f"node-{w % 3}", NOW - i)], Limits(), now=lambda: NOW
            )
            await asyncio.sleep(0)

    # Interleave reads and writes: yield inside read so writers race.
    original_read = store.read

    async def racy_read(part: str):
        result = await original_read(part)
        await asyncio.sleep(0)
        return result

    store.read = racy_read  # type: ignore[method-assign]
    await asyncio.gather(*(writer(w) for w in range(20)))
    docs = await store.read_all()
    stored = {repo for doc, _ in docs.values() for repo in doc.repos}
    assert stored == {f"repo-{w}-{i}" for w in range(20) for i in range(10)}
    assert store.conflicts > 0  # the race really happened
    for part, (doc, _) in docs.items():
        assert all(str(shard_of(repo, 2)) == part for repo in doc.repos)


async def test_recorder_coalesces_and_survives_restart() -> None:
    store = MemoryHistoryStore()
    clock = [NOW]
    rec = HistoryRecorder(store, flush_interval_s=0, clock=lambda: clock[0])
    await rec.load()
    rec.record("r1", "n1")
    rec.record("r2", "n2")
    assert rec.history.nodes_for("r1", NOW) == ["n1"]
    assert await rec.flush() == 2
    assert store.writes == 1  # two records, one write
    # A new recorder (an extender restart) reads the same history.
    rec2 = HistoryRecorder(store, clock=lambda: clock[0])
    await rec2.load()
    assert rec2.history.nodes_for("r2", NOW) == ["n2"]
    # forget-node from outside (the CLI), then the recorder sees the stored change.
    dropped = await forget_node(store, "n1", when=NOW + 1)
    assert dropped == 1
    doc, version = await store.read("0")
    rec2.on_stored("0", doc, version)
    assert rec2.history.nodes_for("r1", NOW + 2) == []
    assert rec2.history.nodes_for("r2", NOW + 2) == ["n2"]


async def test_recorder_keeps_pending_ops_over_a_rebuild() -> None:
    store = MemoryHistoryStore()
    rec = HistoryRecorder(store, clock=lambda: NOW)
    await rec.load()
    rec.record("mine", "n1")
    # Another writer stores something; our pending record must survive the rebuild.
    await commit(store, [Record("theirs", "n2", NOW)], Limits(), now=lambda: NOW)
    doc, version = await store.read("0")
    rec.on_stored("0", doc, version)
    assert rec.history.nodes_for("mine", NOW) == ["n1"]
    assert rec.history.nodes_for("theirs", NOW) == ["n2"]
    await rec.flush()
    doc, _ = await store.read("0")
    assert set(doc.repos) == {"mine", "theirs"}


async def test_recorder_retries_after_a_failed_write() -> None:
    class Flaky(MemoryHistoryStore):
        fail = 1

        async def write(self, part, doc, version):
            if self.fail:
                self.fail -= 1
                raise OSError("connection reset")
            return await super().write(part, doc, version)

    store = Flaky()
    rec = HistoryRecorder(store, clock=lambda: NOW)
    await rec.load()
    rec.record("r", "n")
    with pytest.raises(OSError):
        await rec.flush()
    assert len(rec.pending) == 1 and rec.flush_errors == 1
    assert await rec.flush() == 1
    doc, _ = await store.read("0")
    assert doc.repos == {"r": {"n": NOW}}


async def test_failed_writes_back_off_even_with_no_flush_interval(monkeypatch) -> None:
    class RefusingStore(MemoryHistoryStore):
        async def write(self, part: str, doc: HistoryDoc, version: str | None) -> str:
            self.writes += 1
            raise ConnectionError("the API server refused")

    real_sleep = asyncio.sleep
    waits: list[float] = []

    async def record_wait(delay: float) -> None:
        waits.append(delay)
        await real_sleep(0)

    store = RefusingStore()
    rec = HistoryRecorder(store, flush_interval_s=0, clock=lambda: NOW)
    await rec.load()
    monkeypatch.setattr(asyncio, "sleep", record_wait)
    rec.start()
    rec.record("r1", "n1")
    for _ in range(1000):
        if len(waits) >= 5:
            break
        await real_sleep(0)
    await rec.stop(flush=False)
    # doubling from 0.5 s, not a tight loop at flush_interval_s = 0
    assert waits[:5] == [0.5, 1.0, 2.0, 4.0, 8.0]
    assert store.writes <= len(waits) + 1 and rec.pending  # nothing lost: the record waits


async def test_operations_waiting_for_a_refusing_store_are_bounded(monkeypatch) -> None:
    monkeypatch.setattr("stickypack.kube.history.MAX_PENDING_OPS", 5)
    rec = HistoryRecorder(MemoryHistoryStore(), clock=lambda: NOW)
    await rec.load()
    for i in range(8):
        rec.record(f"r{i}", "n")
    assert [op.repo for op in rec.pending] == ["r3", "r4", "r5", "r6", "r7"]  # type: ignore[union-attr]
    assert rec.dropped_ops == 3
    assert rec.history.nodes_for("r0", NOW) == ["n"]  # memory keeps them


def test_api_errors_are_one_log_line() -> None:
    from kubernetes_asyncio.client.exceptions import ApiException

    from stickypack.kube.client import describe_error

    exc = ApiException(status=403, reason="Forbidden")
    exc.body = json.dumps({"kind": "Status", "message": 'configmaps "h-0" is forbidden: no'})
    assert describe_error(exc) == 'HTTP 403 Forbidden: configmaps "h-0" is forbidden: no'
    assert "\n" in str(exc)  # what the log used to get
    assert describe_error(ConnectionError("refused\n  twice")) == "ConnectionError: refused twice"


@pytest.mark.parametrize(
    ("status", "reason", "body", "says"),
    [
        # the Status's message, from a str body or the bytes of a raw response
        (403, "Forbidden", '{"message": "no"}', "HTTP 403 Forbidden: no"),
        (403, "Forbidden", b'{"message": "no"}', "HTTP 403 Forbidden: no"),
        # not JSON (a proxy's page): its first 200 characters
        (
            502,
            "Bad Gateway",
            "upstream connect error " + "x" * 300,
            "HTTP 502 Bad Gateway: upstream connect error " + "x" * 177,
        ),
        # no reason, no message
        (500, None, '{"kind": "Status"}', "HTTP 500"),
        (500, None, '{"message": "etcd timeout"}', "HTTP 500: etcd timeout"),
    ],
)
def test_an_api_error_is_its_status_reason_and_message(
    status: int, reason: str | None, body: str | bytes, says: str
) -> None:
    from kubernetes_asyncio.client.exceptions import ApiException

    from stickypack.kube.client import describe_error

    exc = ApiException(status=status, reason=reason)
    exc.body = body
    assert describe_error(exc) == says


def test_other_errors_are_their_type_and_text() -> None:
    """An exception with an HTTP status but no response body (the informer's and the DRA
    lister's ``WatchError``) says its own text; one with no text, its type alone."""
    from stickypack.kube.client import describe_error
    from stickypack.kube.informer import WatchError

    assert (
        describe_error(WatchError(500, "listing resourceslices"))
        == "WatchError: HTTP 500: listing resourceslices"
    )
    assert describe_error(TimeoutError()) == "TimeoutError"


class _RawResponse:
    """What a ``_preload_content=False`` call returns, as read_json reads it."""

    def __init__(self, status: int, reason: str, body: bytes) -> None:
        self.status, self.reason, self.body, self.released = status, reason, body, False

    async def read(self) -> bytes:
        return self.body

    def release(self) -> None:
        self.released = True


@pytest.mark.parametrize("status", [200, 201])
async def test_read_json_reads_a_2xx_body(status: int) -> None:
    # 201: what the API server answers a create (a new history ConfigMap)
    from stickypack.kube.client import read_json

    resp = _RawResponse(status, "Created", b'{"kind": "ConfigMap", "metadata": {"name": "h-0"}}')
    assert await read_json(resp) == {"kind": "ConfigMap", "metadata": {"name": "h-0"}}
    assert resp.released


async def test_read_json_raises_an_api_error_saying_the_status_message() -> None:
    from kubernetes_asyncio.client.exceptions import ApiException

    from stickypack.kube.client import describe_error, read_json

    resp = _RawResponse(404, "Not Found", b'{"kind": "Status", "message": "configmaps \\"h-0\\" not found"}')
    with pytest.raises(ApiException) as raised:
        await read_json(resp)
    assert resp.released and raised.value.status == 404
    assert describe_error(raised.value) == 'HTTP 404 Not Found: configmaps "h-0" not found'


async def test_a_later_version_seen_during_our_write_is_not_overwritten_in_memory() -> None:
    # Once commit() put the document it had written into the recorder's memory after the
    # write returned, over a later version another replica had written (which the watch
    # had delivered meanwhile): the next rebuild lost the other replica's entries.
    class Slow(MemoryHistoryStore):
        hook = None

        async def write(self, part: str, doc: HistoryDoc, version: str | None) -> str:
            stored = await super().write(part, doc, version)
            if self.hook is not None:
                hook, self.hook = self.hook, None
                await hook()
            return stored

    store = Slow()
    rec = HistoryRecorder(store, flush_interval_s=0, clock=lambda: NOW)
    await rec.load()
    rec.record("mine", "n1")

    async def other_replica_writes_and_the_watch_delivers() -> None:
        await commit(store, [Record("theirs", "n2", NOW)], Limits(), now=lambda: NOW)
        doc, version = await store.read("0")
        rec.on_stored("0", doc, version)

    store.hook = other_replica_writes_and_the_watch_delivers
    await rec.flush()
    assert rec._docs["0"][1] == "2"  # the other replica's version, not ours ("1")
    rec._rebuild()  # as any later change of another part would
    assert rec.history.nodes_for("theirs", NOW) == ["n2"]
    assert rec.history.nodes_for("mine", NOW) == ["n1"]


async def test_a_part_whose_write_finds_it_gone_leaves_the_cache() -> None:
    class NodeGone(MemoryHistoryStore):
        async def write(self, part: str, doc: HistoryDoc, version: str | None) -> str | None:
            return None if part == "0" else await super().write(part, doc, version)

    store = NodeGone()
    cache = {"0": (HistoryDoc({"r": {"n": NOW}}), "7")}
    written = await commit(store, [Forget("n", NOW + 1)], Limits(), now=lambda: NOW + 1, cache=cache)
    assert written == {} and cache == {}
    rec = HistoryRecorder(store, clock=lambda: NOW)
    rec._docs = {"0": (HistoryDoc({"r": {"n": NOW}}), "7")}
    rec._rebuild()
    assert rec.history.nodes_for("r", NOW) == ["n"]
    rec.on_part_gone("0")
    assert rec._docs == {} and rec.history.nodes_for("r", NOW) == []


@pytest.mark.parametrize("nodes_first", [True, False])
async def test_entries_older_than_their_node_are_forgotten_once_both_are_known(nodes_first: bool) -> None:
    # A node deleted and created again under its name while no extender watched: the stored
    # history of the older machine once survived and drew builds to an empty cache. Whether
    # the node list or the stored history arrives first, the check runs once both are there.
    store = MemoryHistoryStore()
    created = NOW - 3600
    doc = HistoryDoc(
        {
            "old-machine": {"n1": created - 60, "n2": created - 60},
            "new-machine": {"n1": created + 60},
            "expired": {"n3": NOW - 30 * 86400},
        }
    )
    await store.write("0", doc, None)
    rec = HistoryRecorder(store, flush_interval_s=0, clock=lambda: NOW)

    def see_nodes() -> None:
        rec.node_seen("n1", created)
        rec.node_seen("n2", created - 7200)  # older than its entries: the same machine
        rec.node_seen("n3", created)  # its entry is past the TTL: left to expire, no write

    if nodes_first:
        see_nodes()
        await rec.load()
    else:
        await rec.load()
        see_nodes()
        await asyncio.sleep(0)  # the check runs after the rest of the node list
    assert rec.history.nodes_for("old-machine", NOW) == ["n2"]
    assert rec.history.nodes_for("new-machine", NOW) == ["n1"]
    assert rec.pending == [Forget("n1", created)]
    await rec.flush()
    stored, _ = await store.read("0")
    assert stored.repos == {"old-machine": {"n2": created - 60}, "new-machine": {"n1": created + 60}}
    assert stored.forgotten == {"n1": created}
    # a late record of the older machine (a replica that saw its build end) stays out
    await commit(store, [Record("late", "n1", created - 1)], Limits(), now=lambda: NOW)
    assert "late" not in (await store.read("0"))[0].repos
    rec.node_seen("n1", created)  # seen again (a resync): nothing older left, nothing written
    assert rec.check_nodes() == 0 and rec.pending == []


async def test_a_record_dated_before_a_known_tombstone_stays_out_of_memory() -> None:
    """A build end dated from its pod can be older than a forget of its node the recorder
    already knows (read from the store, or its own): the store drops it, and so must the
    memory, which is not rebuilt after a write of its own. One dated at the forget itself is
    dropped too (the store keeps only a record after its node's tombstone). A later one
    counts."""
    store = MemoryHistoryStore()
    await forget_node(store, "n1", when=NOW - 10)
    rec = HistoryRecorder(store, flush_interval_s=0, clock=lambda: NOW)
    await rec.load()
    rec.record("old", "n1", NOW - 20)
    rec.record("at", "n1", NOW - 10)  # the stored forget's own second
    rec.forget_node("n2", NOW - 10)
    rec.record("old", "n2", NOW - 15)
    rec.record("at", "n2", NOW - 10)  # our own forget's
    assert rec.history.nodes_for("old", NOW) == [] and rec.history.nodes_for("at", NOW) == []
    await rec.flush()
    stored = (await store.read("0"))[0].repos
    assert "old" not in stored and "at" not in stored
    rec.record("new", "n1", NOW - 5)
    assert rec.history.nodes_for("new", NOW) == ["n1"]


# ---- mutation audit of kube/history.py (session: mut-history) ---------------------------------


def test_the_default_limits_are_the_extenders_documented_defaults() -> None:
    """``Limits()`` (a ``HistoryRecorder`` or ``forget_node`` given none) is what the extender
    uses with no ``history`` settings, docs/configuration.md: ``ttl_s`` 604800 (7 days),
    ``max_nodes_per_repo`` 3, ``max_repos`` 20000, ``max_bytes`` 900000."""
    from stickypack.extender.config import config_from_dict
    from stickypack.extender.server import history_limits

    assert Limits() == history_limits(config_from_dict({}))
    assert Limits() == Limits(ttl_s=7 * 24 * 3600, max_nodes_per_repo=3, max_repos=20_000, max_bytes=900_000)


def test_forget_nodes_no_limits_drop_nothing_but_the_forgotten_node() -> None:
    """``stickypack forget-node`` writes with ``NO_LIMITS``: what an extender with larger
    limits stored (5 nodes a repo, entries 30 days old, a document over the default
    900,000 bytes) stays, only the forgotten node's entries go."""
    from stickypack.kube.history import NO_LIMITS

    old = NOW - 30 * 86400
    nodes = {f"a-node-with-a-rather-long-name-{k}": old + k for k in range(5)}
    repos = {f"https://github.com/some-organisation/repository-{i:05d}": dict(nodes) for i in range(4000)}
    repos["gone-only"] = {"gone": old}
    doc = HistoryDoc(repos)
    assert len(doc.dumps()) > 900_000
    out = apply_ops(doc, [Forget("gone", NOW)], NO_LIMITS, NOW)
    del repos["gone-only"]
    assert out.repos == repos and out.forgotten == {"gone": NOW}


def test_an_empty_or_non_object_document_is_damaged_not_an_empty_history() -> None:
    """No text (None: nothing stored) is an empty history; an empty text, or a ``repos``
    that is not an object, is damaged (the recorder then keeps its last good copy)."""
    assert not HistoryDoc.parse(None).damaged
    assert HistoryDoc.parse("").damaged
    assert HistoryDoc.parse('{"repos": [1, 2]}').damaged
    assert HistoryDoc.parse('{"repos": "abc"}').damaged
    assert not HistoryDoc.parse('{"forgotten": {"n": 1}}').damaged  # no repos key: none stored


def test_a_document_with_some_malformed_entries_is_not_damaged() -> None:
    """Only a document that cannot be read at all is damaged; one with a malformed entry
    is read as far as it is valid, and that is what the recorder keeps."""
    doc = HistoryDoc.parse('{"repos": {"a": {"n": 5, "m": "yesterday"}}}')
    assert doc.repos == {"a": {"n": 5.0}} and not doc.damaged


def test_a_boolean_is_not_a_time(caplog: pytest.LogCaptureFixture) -> None:
    # JSON true is a bool, which Python's int includes: skipped, not read as 1.0
    doc = HistoryDoc.parse('{"repos": {"r": {"n": true, "m": 5}}, "forgotten": {"x": false}}')
    assert doc.repos == {"r": {"m": 5.0}} and doc.forgotten == {}
    assert "skipped 2 malformed entries" in caplog.text


def test_an_empty_array_where_an_object_belongs_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    """An empty array is not an empty object: skipped and said so, as any other non-object."""
    doc = HistoryDoc.parse('{"repos": {"r": [], "s": {"n": 5}}}', source="build history ConfigMap ns/h")
    assert doc.repos == {"s": {"n": 5.0}}
    assert "repos['r']: not an object" in caplog.text


def test_a_configmap_without_the_history_key_is_damaged(caplog: pytest.LogCaptureFixture) -> None:
    """A ConfigMap with no ``history.json`` (edited by hand) cannot be read: damaged, so the
    recorder keeps its last good copy; its resourceVersion is still returned (the next
    write replaces it)."""
    from stickypack.kube.history import ConfigMapHistoryStore

    meta = {"name": "h-0", "namespace": "ns", "resourceVersion": "42"}
    doc, version = ConfigMapHistoryStore.parse_configmap({"metadata": meta, "data": {"other": "{}"}})
    assert doc.damaged and version == "42"
    assert "ns/h-0" in caplog.text and "history.json" in caplog.text
    doc, version = ConfigMapHistoryStore.parse_configmap({"metadata": meta, "data": {"history.json": "{}"}})
    assert not doc.damaged and doc.repos == {} and version == "42"


def test_an_earlier_forget_does_not_lower_a_tombstone() -> None:
    # stored tombstone n at NOW-10; a forget at NOW-100 arrives late: the tombstone stays at
    # NOW-10, so a record at NOW-50 (before it) is dropped
    doc = HistoryDoc(forgotten={"n": NOW - 10})
    out = apply_ops(doc, [Forget("n", NOW - 100), Record("r", "n", NOW - 50)], Limits(), NOW)
    assert out.forgotten == {"n": NOW - 10} and out.repos == {}


def test_a_tombstone_at_the_ttl_horizon_is_kept() -> None:
    # ttl 100 s: the horizon is NOW-100; entries there still count (BuildHistory.expire keeps
    # t >= horizon), so does their tombstone; one at NOW-101 has expired
    out = apply_ops(HistoryDoc(), [Forget("a", NOW - 100), Forget("b", NOW - 101)], Limits(ttl_s=100), NOW)
    assert out.forgotten == {"a": NOW - 100}


def test_tombstones_over_the_cap_of_one_time_are_kept_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    # cap 2, three tombstones at the same time written c, b, a: the newest first, ties by
    # name, so a and b stay whatever order the forgets came in
    monkeypatch.setattr("stickypack.kube.history.MAX_TOMBSTONES", 2)
    ops = [Forget("c", NOW - 5), Forget("b", NOW - 5), Forget("a", NOW - 5)]
    assert set(apply_ops(HistoryDoc(), ops, Limits(), NOW).forgotten) == {"a", "b"}


def test_max_repos_keeps_the_repo_built_last_on_any_node() -> None:
    """A stored repo is as recent as its newest node: with room for one repo, A (built on
    n2 at NOW-10, on n1 at NOW-90) is kept over B (NOW-50), whatever the document's order."""
    doc = HistoryDoc({"A": {"n1": NOW - 90, "n2": NOW - 10}, "B": {"n3": NOW - 50}})
    assert apply_ops(doc, [], Limits(max_repos=1), NOW).repos == {"A": {"n1": NOW - 90, "n2": NOW - 10}}


def test_max_repos_keeps_the_newest_record_whatever_the_order_of_the_ops() -> None:
    # A ended at NOW-10, B at NOW-50, queued A first: with room for one repo, A stays
    ops = [Record("A", "n", NOW - 10), Record("B", "n", NOW - 50)]
    assert apply_ops(HistoryDoc(), ops, Limits(max_repos=1), NOW).repos == {"A": {"n": NOW - 10}}


def test_an_entry_dated_at_its_nodes_tombstone_is_dropped() -> None:
    """A forget at t drops the builds of the node at or before t (as BuildHistory.forget_node
    with ``up_to``): a stored entry at t and a record at t are both dropped; one at t+1
    stays."""
    doc = HistoryDoc({"stored": {"n": NOW - 10}, "later": {"n": NOW - 9}})
    out = apply_ops(doc, [Forget("n", NOW - 10), Record("recorded", "n", NOW - 10)], Limits(), NOW)
    assert out.repos == {"later": {"n": NOW - 9}}
    out = apply_ops(HistoryDoc(forgotten={"n": NOW - 10}), [Record("recorded", "n", NOW - 10)], Limits(), NOW)
    assert out.repos == {}


def test_the_byte_bound_drops_exactly_the_repos_it_must(caplog: pytest.LogCaptureFixture) -> None:
    """{"version":1,"repos":{"a":{"n":1799999990.0},"b":{"n":1799999995.0}},"forgotten":{}}
    is 84 bytes: 13 for {"version":1, 9 for "repos":{, 22 for each repo's "a":{"n":...}
    (3 + 1 + 18), 1 for the comma between, 1 for }, 15 for ,"forgotten":{} and 1 for }.
    Dropping a (the older) takes 23 bytes with its comma: 61. A bound of 84 drops nothing
    (and says nothing), 61 drops a alone, 60 both."""
    doc = HistoryDoc({"a": {"n": NOW - 10}, "b": {"n": NOW - 5}})
    assert len(doc.dumps()) == 84
    assert apply_ops(doc, [], Limits(max_bytes=84), NOW).repos == doc.repos
    assert "dropped" not in caplog.text
    kept = apply_ops(doc, [], Limits(max_bytes=61), NOW)
    assert kept.repos == {"b": {"n": NOW - 5}} and len(kept.dumps()) == 61
    assert apply_ops(doc, [], Limits(max_bytes=60), NOW).repos == {}


async def test_a_forget_reaches_every_shard_of_the_memory_store() -> None:
    # repos "r0" .. in both shards of 2, all built on n: a forget drops every one
    store = MemoryHistoryStore(shards=2)
    repos = [f"r{i}" for i in range(8)]
    assert {shard_of(r, 2) for r in repos} == {0, 1}
    await commit(store, [Record(r, "n", NOW - 10) for r in repos], Limits(), now=lambda: NOW)
    assert await forget_node(store, "n", when=NOW) == 8
    for doc, _ in (await store.read_all()).values():
        assert doc.repos == {} and doc.forgotten == {"n": NOW}


async def test_the_memory_store_refuses_a_version_of_a_part_that_does_not_exist() -> None:
    # as the API server answers a replace of a deleted ConfigMap (404, a Conflict to commit)
    store = MemoryHistoryStore()
    with pytest.raises(Conflict):
        await store.write("0", HistoryDoc(), "3")
    assert store.writes == 0 and store.conflicts == 1


class _Refusing(MemoryHistoryStore):
    """Answers the first ``refuse`` writes with a Conflict, as a store raced by other writers."""

    def __init__(self, refuse: int) -> None:
        super().__init__()
        self.refuse = refuse

    async def write(self, part: str, doc: HistoryDoc, version: str | None) -> str:
        if self.refuse:
            self.refuse -= 1
            self.conflicts += 1
            raise Conflict(part)
        return await super().write(part, doc, version)


async def test_commit_makes_max_attempts_attempts_before_it_gives_up() -> None:
    # max_attempts 3: two conflicts and the third attempt writes; three conflicts raise
    store = _Refusing(refuse=2)
    written = await commit(store, [Record("r", "n", NOW)], Limits(), now=lambda: NOW, max_attempts=3)
    assert written["0"][0].repos == {"r": {"n": NOW}} and store.conflicts == 2
    store = _Refusing(refuse=3)
    with pytest.raises(Conflict, match="after 3 attempts"):
        await commit(store, [Record("r", "n", NOW)], Limits(), now=lambda: NOW, max_attempts=3)
    assert store.writes == 0


async def test_conflicts_back_off_doubling_from_5_ms_up_to_half_a_second(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each conflict waits ``min(0.5, 0.005 * 2**attempt)`` times a random jitter (here 1):
    5, 10, 20, 40, 80, 160, 320 ms, then 500 (640 capped)."""
    import random

    waits: list[float] = []

    async def record_wait(delay: float) -> None:
        waits.append(delay)

    monkeypatch.setattr(random, "random", lambda: 1.0)
    monkeypatch.setattr(asyncio, "sleep", record_wait)
    store = _Refusing(refuse=8)
    await commit(store, [Record("r", "n", NOW)], Limits(), now=lambda: NOW, max_attempts=9)
    assert waits == [0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.5]


async def test_after_a_conflict_the_fresh_document_is_written_not_the_cached_one() -> None:
    """The cache (our last write, version 1) is stale once another writer stored "theirs"
    (version 2): the write conflicts, and the re-read document, with "theirs", is the one
    the operations are applied to."""
    store = MemoryHistoryStore()
    await commit(store, [Record("mine", "n1", NOW)], Limits(), now=lambda: NOW)
    cache = {"0": await store.read("0")}
    await commit(store, [Record("theirs", "n2", NOW)], Limits(), now=lambda: NOW)
    await commit(store, [Record("new", "n3", NOW)], Limits(), now=lambda: NOW, cache=cache)
    assert set((await store.read("0"))[0].repos) == {"mine", "theirs", "new"}
    assert store.conflicts == 1 and cache["0"][1] == "3"


async def test_a_damaged_stored_document_is_replaced_by_the_last_good_copy() -> None:
    """Version 2 of the part was edited into something unreadable after we wrote version 1:
    our write conflicts, the re-read finds the damage, and the last good copy (ours) plus the
    new operation is written over it, with version 2."""
    store = MemoryHistoryStore()
    await commit(store, [Record("mine", "n1", NOW)], Limits(), now=lambda: NOW)
    cache = {"0": await store.read("0")}
    store.data["0"] = ("not json", 2)
    await commit(store, [Record("new", "n2", NOW)], Limits(), now=lambda: NOW, cache=cache)
    doc, version = await store.read("0")
    assert doc.repos == {"mine": {"n1": NOW}, "new": {"n2": NOW}} and version == "3"


class _CountingReads(MemoryHistoryStore):
    reads = 0

    async def read(self, part: str) -> tuple[HistoryDoc, str | None]:
        self.reads += 1
        return await super().read(part)


async def test_the_recorders_writes_start_from_its_copy_of_the_store() -> None:
    """The recorder keeps what it loaded and what it wrote: the later flushes read nothing
    and never conflict with its own writes (one read, at load; two writes)."""
    store = _CountingReads()
    rec = HistoryRecorder(store, flush_interval_s=0, clock=lambda: NOW)
    await rec.load()
    rec.record("a", "n1")
    await rec.flush()
    rec.record("b", "n2")
    await rec.flush()
    assert (store.reads, store.writes, store.conflicts) == (1, 2, 0)
    assert rec._docs["0"][1] == "2"


async def test_an_earlier_forget_does_not_lower_the_recorders_tombstone() -> None:
    # forgotten at NOW-10, then (a late event) at NOW-100: a build ended at NOW-50 is still
    # before the tombstone, and stays out of memory
    rec = HistoryRecorder(MemoryHistoryStore(), clock=lambda: NOW)
    await rec.load()
    rec.forget_node("n", NOW - 10)
    rec.forget_node("n", NOW - 100)
    rec.record("r", "n", NOW - 50)
    assert rec.history.nodes_for("r", NOW) == []


async def test_every_change_in_memory_bumps_the_history_version() -> None:
    """The extender keeps its locality scores while ``stickypack_version`` stays: a record,
    a forget and a check that forgets a node's older entries each change it."""
    rec = HistoryRecorder(MemoryHistoryStore(), clock=lambda: NOW)
    await rec.load()
    v0 = rec.history.stickypack_version
    rec.record("r", "n", NOW - 100)
    assert rec.history.stickypack_version == v0 + 1
    rec.forget_node("m", NOW - 50)
    assert rec.history.stickypack_version == v0 + 2
    rec.node_seen("n", NOW - 10)  # created after its entry at NOW-100: forgotten
    await asyncio.sleep(0)  # the check runs after the rest of a node list's events
    assert rec.history.nodes_for("r", NOW) == [] and rec.history.stickypack_version == v0 + 3


async def test_a_node_gone_before_the_history_loads_is_not_checked() -> None:
    """A node seen, then deleted, before the history is loaded: nothing to check there (its
    deletion's forget covers it), so no forget at its creation time is queued."""
    store = MemoryHistoryStore()
    await store.write("0", HistoryDoc({"r": {"n": NOW - 100}}), None)
    rec = HistoryRecorder(store, clock=lambda: NOW)
    rec.node_seen("n", NOW - 10)
    rec.node_gone("n")
    await rec.load()
    assert rec.pending == [] and rec.history.nodes_for("r", NOW) == ["n"]


@pytest.mark.parametrize(("entry", "forgotten"), [(NOW - 100, True), (NOW - 50, False)])
async def test_the_node_check_covers_entries_from_the_ttl_horizon_to_before_the_node(
    entry: float, forgotten: bool
) -> None:
    """ttl 100 s at NOW: an entry at NOW-100 is at the horizon, still scored, so n created
    at NOW-50 forgets it; one at NOW-50, the node's own creation second, is the node's."""
    store = MemoryHistoryStore()
    await store.write("0", HistoryDoc({"r": {"n": entry}}), None)
    rec = HistoryRecorder(store, Limits(ttl_s=100), clock=lambda: NOW)
    await rec.load()
    assert rec.history.nodes_for("r", NOW) == ["n"]
    rec.node_seen("n", NOW - 50)
    await asyncio.sleep(0)  # the check runs after the rest of a node list's events
    assert rec.history.nodes_for("r", NOW) == ([] if forgotten else ["n"])
    assert rec.pending == ([Forget("n", NOW - 50)] if forgotten else [])


async def test_no_overflow_is_logged_while_the_pending_operations_fit(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # MAX_PENDING_OPS 5: five operations fit (nothing dropped, nothing said), a sixth drops one
    monkeypatch.setattr("stickypack.kube.history.MAX_PENDING_OPS", 5)
    rec = HistoryRecorder(MemoryHistoryStore(), clock=lambda: NOW)
    await rec.load()
    for i in range(5):
        rec.record(f"r{i}", "n")
    assert "dropping the oldest" not in caplog.text and rec.dropped_ops == 0
    rec.record("r5", "n")
    assert "dropping the oldest" in caplog.text and rec.dropped_ops == 1


async def test_a_read_only_recorder_writes_nothing() -> None:
    """docs/operator-guide.md, "One writer": an extender that records no build ends writes
    nothing, node deletions' tombstones included; its memory changes all the same."""
    store = MemoryHistoryStore()
    rec = HistoryRecorder(store, clock=lambda: NOW, read_only=True)
    await rec.load()
    rec.record("r", "n1")
    rec.forget_node("n2")
    assert rec.unstored == 0 and await rec.flush() == 0 and store.writes == 0
    assert rec.history.nodes_for("r", NOW) == ["n1"]


async def test_a_damaged_document_seen_by_the_watch_keeps_the_memory() -> None:
    store = MemoryHistoryStore()
    await store.write("0", HistoryDoc({"r": {"n": NOW}}), None)
    rec = HistoryRecorder(store, clock=lambda: NOW)
    await rec.load()
    rec.on_stored("0", HistoryDoc.parse("not json"), "2")
    assert rec.history.nodes_for("r", NOW) == ["n"]
    assert rec._docs["0"] == (HistoryDoc({"r": {"n": NOW}}), "2")  # the next write puts it back


async def test_a_deleted_part_leaves_the_memory() -> None:
    # an operator deletes the ConfigMap to reset the history: its entries go at once
    store = MemoryHistoryStore()
    await store.write("0", HistoryDoc({"r": {"n": NOW}}), None)
    rec = HistoryRecorder(store, clock=lambda: NOW)
    await rec.load()
    rec.on_deleted("0")
    assert rec.history.nodes_for("r", NOW) == [] and rec._docs["0"] == (HistoryDoc(), None)


def test_parts_merge_newest_time_and_newest_tombstone() -> None:
    """One (repo, node) or one tombstone in two parts (node-annotation parts, or ConfigMap
    shards before a change of ``shards``): the newest time wins, whichever part comes
    first. r on n at NOW-10 (part a) and NOW-60 (part b); tombstone m at NOW-20 (a) and
    NOW-70 (b): a record of m at NOW-30 is still before the tombstone."""
    rec = HistoryRecorder(MemoryHistoryStore(), clock=lambda: NOW)
    rec._docs = {
        "a": (HistoryDoc({"r": {"n": NOW - 10}}, {"m": NOW - 20}), "1"),
        "b": (HistoryDoc({"r": {"n": NOW - 60}}, {"m": NOW - 70}), "1"),
    }
    rec._rebuild()
    assert dict(rec.history.items()) == {"r": {"n": NOW - 10}}
    assert rec._tombstones == {"m": NOW - 20}


def test_the_merged_memory_is_not_bound_by_one_documents_bytes() -> None:
    # max_bytes bounds each stored document, not their sum: two parts of 84 bytes each fit a
    # bound of 100, and the memory keeps both repos
    limits = Limits(max_bytes=100)
    rec = HistoryRecorder(MemoryHistoryStore(), limits, clock=lambda: NOW)
    rec._docs = {
        "a": (HistoryDoc({"a1": {"n": NOW - 10}, "a2": {"n": NOW - 9}}), "1"),
        "b": (HistoryDoc({"b1": {"n": NOW - 8}, "b2": {"n": NOW - 7}}), "1"),
    }
    rec._rebuild()
    assert {repo for repo, _ in rec.history.items()} == {"a1", "a2", "b1", "b2"}


def test_the_memory_orders_repos_by_their_newest_build_for_max_repos() -> None:
    """A (stored, built at NOW-10) and B (a pending record of NOW-50): B is the least
    recently built, and with max_repos 2 a record of C drops B, not A."""
    rec = HistoryRecorder(MemoryHistoryStore(), Limits(max_repos=2), clock=lambda: NOW)
    rec._docs = {"0": (HistoryDoc({"A": {"n": NOW - 10}}), "1")}
    rec.pending = [Record("B", "n", NOW - 50)]
    rec._rebuild()
    rec.record("C", "n", NOW)
    assert [repo for repo, _ in rec.history.items()] == ["A", "C"]


async def test_the_node_check_leaves_entries_past_the_ttl_to_expire() -> None:
    """ttl 100 s: n built r at NOW-10; 200 s later n is seen created at NOW. The entry is
    older than the node, but past the TTL (not scored, gone at the next rebuild): no forget
    is written for it."""
    clock = [NOW]
    rec = HistoryRecorder(MemoryHistoryStore(), Limits(ttl_s=100), clock=lambda: clock[0])
    await rec.load()
    rec.record("r", "n", NOW - 10)
    clock[0] = NOW + 200
    rec.node_seen("n", NOW)
    await asyncio.sleep(0)  # the check runs after the rest of a node list's events
    assert rec.pending == [Record("r", "n", NOW - 10)]


_REAL_SLEEP = asyncio.sleep


async def _spin(rounds: int = 50) -> None:
    """Let the recorder's task run (asyncio.sleep itself may be replaced)."""
    for _ in range(rounds):
        await _REAL_SLEEP(0)


def _sleeps(monkeypatch, gate_delay: float | None = None) -> tuple[list[float], asyncio.Event]:
    """Replace asyncio.sleep: each delay is recorded and returns at once, except a sleep of
    ``gate_delay``, which waits until the returned event is set."""
    waits: list[float] = []
    gate = asyncio.Event()

    async def fake_sleep(delay: float) -> None:
        waits.append(delay)
        if delay == gate_delay:
            await gate.wait()
            gate.clear()
        await _REAL_SLEEP(0)

    monkeypatch.setattr(asyncio, "sleep", fake_sleep)
    return waits, gate


class _Scripted(MemoryHistoryStore):
    """Fails the writes whose number (from 0) is in ``fail``."""

    def __init__(self, fail: set[int]) -> None:
        super().__init__()
        self.fail = fail
        self.attempts = 0

    async def write(self, part: str, doc: HistoryDoc, version: str | None) -> str:
        self.attempts += 1
        if self.attempts - 1 in self.fail:
            raise ConnectionError("the API server refused")
        return await super().write(part, doc, version)


async def test_a_successful_write_resets_the_retry_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    # writes 0 and 1 fail (waits 0.5, 1.0), 2 succeeds (then the flush interval, 0), a later
    # record's write 3 fails: its wait is 0.5 again, not 2.0
    store = _Scripted(fail={0, 1, 3})
    rec = HistoryRecorder(store, flush_interval_s=0, clock=lambda: NOW)
    await rec.load()
    waits, _ = _sleeps(monkeypatch)
    rec.start()
    rec.record("r1", "n")
    await _spin()
    assert waits == [0.5, 1.0, 0] and store.writes == 1
    rec.record("r2", "n")
    await _spin()
    await rec.stop(flush=False)
    assert waits[3] == 0.5


async def test_the_retry_backoff_stops_doubling_at_a_minute(monkeypatch: pytest.MonkeyPatch) -> None:
    store = _Scripted(fail=set(range(100)))
    rec = HistoryRecorder(store, flush_interval_s=0, clock=lambda: NOW)
    await rec.load()
    waits, _ = _sleeps(monkeypatch)
    rec.start()
    rec.record("r", "n")
    for _ in range(100):
        if len(waits) >= 10:
            break
        await _spin()
    await rec.stop(flush=False)
    assert waits[:10] == [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 60.0, 60.0, 60.0]


async def test_operations_arriving_during_the_flush_interval_are_one_write(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """flush_interval_s 7: r1 is written at once; r2 and r3, recorded apart while the
    recorder waits out its interval, are written together when it ends: 2 writes."""
    store = MemoryHistoryStore()
    rec = HistoryRecorder(store, flush_interval_s=7, clock=lambda: NOW)
    await rec.load()
    _, interval_over = _sleeps(monkeypatch, gate_delay=7)
    rec.start()
    rec.record("r1", "n")
    await _spin()
    rec.record("r2", "n")
    await _spin()
    rec.record("r3", "n")
    await _spin()
    assert store.writes == 1
    interval_over.set()
    await _spin()
    await rec.stop(flush=False)
    assert store.writes == 2 and set((await store.read("0"))[0].repos) == {"r1", "r2", "r3"}


async def test_stopping_the_recorder_writes_what_is_pending() -> None:
    store = MemoryHistoryStore()
    rec = HistoryRecorder(store, flush_interval_s=3600, clock=lambda: NOW)
    await rec.load()
    rec.record("r", "n")
    await rec.stop()
    assert (await store.read("0"))[0].repos == {"r": {"n": NOW}} and rec.pending == []


def test_a_recorder_without_a_store_is_loaded_and_checks_nodes_at_once() -> None:
    # nothing to load: ready at once, and a node created after its entry (NOW-100 < NOW-10)
    # has it forgotten when seen (no event loop: checked there and then)
    rec = HistoryRecorder(None, clock=lambda: NOW)
    assert rec.loaded.is_set()
    rec.record("r", "n", NOW - 100)
    rec.node_seen("n", NOW - 10)
    assert rec.history.nodes_for("r", NOW) == []


async def test_when_the_pending_operations_overflow_after_a_failed_write_the_oldest_go(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """MAX_PENDING_OPS 3: r0 and r1 are being written when r2 and r3 are recorded; the write
    fails, so r0, r1 wait again ahead of r2, r3; a record of r4 then drops the two oldest,
    r0 and r1."""
    monkeypatch.setattr("stickypack.kube.history.MAX_PENDING_OPS", 3)

    class RecordsDuringAFailedWrite(MemoryHistoryStore):
        async def write(self, part: str, doc: HistoryDoc, version: str | None) -> str:
            rec.record("r2", "n", NOW - 2)
            rec.record("r3", "n", NOW - 1)
            raise ConnectionError("the API server refused")

    rec = HistoryRecorder(RecordsDuringAFailedWrite(), clock=lambda: NOW)
    await rec.load()
    rec.record("r0", "n", NOW - 4)
    rec.record("r1", "n", NOW - 3)
    with pytest.raises(ConnectionError):
        await rec.flush()
    rec.record("r4", "n", NOW)
    assert [op.repo for op in rec.pending] == ["r2", "r3", "r4"]  # type: ignore[union-attr]


async def test_a_part_a_flush_finds_gone_leaves_the_recorders_memory() -> None:
    """A write that finds its part gone (the node-annotation store's deleted node) takes the
    part's entries out of memory at once, the one just recorded there too."""

    class Gone(MemoryHistoryStore):
        async def write(self, part: str, doc: HistoryDoc, version: str | None) -> str | None:  # type: ignore[override]
            return None

    store = Gone()
    await MemoryHistoryStore.write(store, "0", HistoryDoc({"r": {"n": NOW}}), None)
    rec = HistoryRecorder(store, clock=lambda: NOW)
    await rec.load()
    assert rec.history.nodes_for("r", NOW) == ["n"]
    rec.record("s", "n", NOW)
    assert await rec.flush() == 1
    assert rec._docs == {} and list(rec.history.items()) == []


async def test_forget_node_dated_ahead_of_the_clock_ages_the_history_from_that_date() -> None:
    """``forget_node``'s now is the later of the clock and its time: ttl 100 s, a forget
    dated 1000 s ahead expires an entry 150 s before that date (the horizon is 100 s
    before it), and keeps one 50 s before it."""
    import time

    when = time.time() + 1000
    store = MemoryHistoryStore()
    await commit(
        store, [Record("old", "m", when - 150), Record("new", "m", when - 50)], Limits(), now=lambda: when
    )
    await forget_node(store, "n", Limits(ttl_s=100), when=when)
    assert (await store.read("0"))[0].repos == {"new": {"m": when - 50}}


@pytest.mark.parametrize("tombstone", ["inf", "-inf", "nan", "yesterday"])
async def test_a_node_tombstone_that_is_not_a_finite_time_is_ignored(
    tombstone: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A node's ``stickypack.io/build-history-forgotten`` of "inf" (edited by hand) would
    forget the node's builds for ever: like any annotation that is not a time, it is
    ignored, with a log line; the node's history is read all the same."""
    from kubernetes_asyncio import client

    from stickypack.kube.history import NodeAnnotationHistoryStore

    api = client.ApiClient()
    try:
        store = NodeAnnotationHistoryStore(api)
        node = {
            "metadata": {
                "name": "n1",
                "resourceVersion": "5",
                "annotations": {
                    "stickypack.io/build-history": json.dumps({"r": NOW}),
                    "stickypack.io/build-history-forgotten": tombstone,
                },
            }
        }
        doc, version = store.parse_node(node)
    finally:
        await api.close()
    assert doc.repos == {"r": {"n1": NOW}} and doc.forgotten == {} and version == "5"
    assert "is not a time" in caplog.text and repr(tombstone) in caplog.text


def test_a_repo_lives_in_the_shard_the_operator_guide_gives() -> None:
    """``int(blake2b(repo, digest_size=8), big-endian) mod shards`` (docs/operator-guide.md),
    computed here from hashlib with the other byte order and digest sizes told apart."""
    from hashlib import blake2b

    repos = [f"https://github.com/o/r{i}" for i in range(200)]
    for shards in (1, 2, 3, 7, 64):
        for repo in repos:
            digest = blake2b(repo.encode("utf-8"), digest_size=8).digest()
            assert shard_of(repo, shards) == int.from_bytes(digest, "big") % shards
    # the byte order and the digest size matter: they would move most repos to other shards
    little = sum(
        shard_of(r, 7) != int.from_bytes(blake2b(r.encode(), digest_size=8).digest(), "little") % 7
        for r in repos
    )
    longer = sum(
        shard_of(r, 7) != int.from_bytes(blake2b(r.encode(), digest_size=16).digest(), "big") % 7
        for r in repos
    )
    assert little > 100 and longer > 100
