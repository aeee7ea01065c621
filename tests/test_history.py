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

    for name in ["", " ", "a\nb", "../../etc", "*", "x" * 300]:
        assert main(["forget-node", name]) == 2
        err = capsys.readouterr().err
        assert "is not a node name" in err and len(err) < 200


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
