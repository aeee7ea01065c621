"""The informer's protocol handling against a scripted API, for what a real API server will
not do on demand: an event split over chunks, a bookmark at a given point, a 410 right after
a list, a 500, unreadable lines, a watch that closes at once. The same behaviours with the
real kube-apiserver (reconnect and resume, a real 410 Gone after an etcd compaction, paged
lists) are in tests/test_kube_live.py."""

from __future__ import annotations

import asyncio
import json
import logging
from types import SimpleNamespace
from typing import Any

import pytest

import stickypack.kube.informer as informer_module
from stickypack.kube.informer import Informer


class FakeContent:
    """A watch stream: bytes are sent, an exception raised, a float is a pause (seconds)."""

    def __init__(self, chunks: list[bytes | Exception | float]) -> None:
        self.chunks = chunks

    async def iter_any(self):
        for chunk in self.chunks:
            if isinstance(chunk, float):
                await asyncio.sleep(chunk)
                continue
            await asyncio.sleep(0)
            if isinstance(chunk, Exception):
                raise chunk
            yield chunk


class FakeResponse:
    def __init__(self, status: int = 200, body: Any = None, chunks: list | None = None) -> None:
        self.status = status
        self.reason = "x"
        self._body = json.dumps(body).encode() if body is not None else b""
        self.content = FakeContent(chunks or [])

    async def read(self) -> bytes:
        return self._body

    def release(self) -> None:
        pass

    def close(self) -> None:
        pass


def obj(name: str, rv: str) -> dict:
    return {"metadata": {"name": name, "resourceVersion": rv}}


def ev(kind: str, o: dict) -> bytes:
    return json.dumps({"type": kind, "object": o}).encode() + b"\n"


class Script:
    """list_call replaying scripted list pages and watch streams; records the calls. A float
    in a queue: the next answer of that queue comes after that many seconds."""

    def __init__(self, lists: list, watches: list) -> None:
        self.lists = lists
        self.watches = watches
        self.calls: list[dict] = []
        self.done = asyncio.Event()

    async def __call__(self, **kw: Any) -> Any:
        self.calls.append(kw)
        queue = self.watches if kw.get("watch") else self.lists
        if not queue:
            self.done.set()
            await asyncio.sleep(3600)
        item = queue.pop(0)
        if isinstance(item, float):
            await asyncio.sleep(item)
            item = queue.pop(0)
        if isinstance(item, Exception):
            raise item
        return item


async def run_until_done(inf: Informer, script: Script) -> None:
    task = inf.start()
    await asyncio.wait_for(script.done.wait(), 10)
    await inf.stop()
    assert task.done()


async def test_list_watch_gone_relist_and_reconnect() -> None:
    events: list[tuple] = []

    def handler(kind: str, o: dict, old: Any, synthetic: bool = False) -> None:
        events.append((kind, o["metadata"]["name"], synthetic))

    first_event = ev("ADDED", obj("c", "12"))
    script = Script(
        lists=[
            # a paginated first list
            FakeResponse(body={"metadata": {"continue": "tok"}, "items": [obj("a", "1")]}),
            FakeResponse(body={"metadata": {"resourceVersion": "10"}, "items": [obj("b", "2")]}),
            # the relist after 410: "a" is gone, "b" changed, "d" is new
            FakeResponse(
                body={"metadata": {"resourceVersion": "50"}, "items": [obj("b", "40"), obj("d", "41")]}
            ),
        ],
        watches=[
            # an event split over two chunks, a bookmark, then the 410
            FakeResponse(
                chunks=[
                    first_event[:7],
                    first_event[7:]
                    + json.dumps({"type": "BOOKMARK", "object": obj("", "20")}).encode()
                    + b"\n",
                    ev("ERROR", {"code": 410, "message": "too old resource version"}),
                ]
            ),
            # after the relist: the connection breaks mid-stream
            FakeResponse(chunks=[ev("MODIFIED", obj("d", "51")), ConnectionResetError("reset")]),
            # reconnection refused once, then a 500, then a working watch
            ConnectionRefusedError("refused"),
            FakeResponse(status=500, body={"message": "etcd timeout"}),
            FakeResponse(chunks=[ev("DELETED", obj("d", "60"))]),
        ],
    )
    inf = Informer("test", script, handler, min_backoff_s=0.001, max_backoff_s=0.01, page_size=1)
    await run_until_done(inf, script)

    assert events == [
        ("ADDED", "a", False),
        ("ADDED", "b", False),
        ("ADDED", "c", False),
        ("MODIFIED", "b", False),  # relist diff
        ("ADDED", "d", False),
        ("DELETED", "a", True),  # gone while we were away: synthetic deletion
        ("DELETED", "c", True),
        ("MODIFIED", "d", False),
        ("DELETED", "d", False),
    ]
    assert set(inf.objects) == {"b"}
    lists = [c for c in script.calls if not c.get("watch")]
    watches = [c for c in script.calls if c.get("watch")]
    assert lists[1]["_continue"] == "tok"
    assert [w["resource_version"] for w in watches] == ["10", "50", "51", "51", "51", "60"]
    assert all(w["allow_watch_bookmarks"] for w in watches)
    assert inf.stats.relists_gone == 1
    assert inf.stats.watch_errors == 3
    assert inf.synced.is_set()


async def test_list_errors_are_retried() -> None:
    script = Script(
        lists=[
            FakeResponse(status=403, body={"message": "forbidden"}),
            FakeResponse(body={"metadata": {"resourceVersion": "5"}, "items": []}),
        ],
        watches=[],
    )
    inf = Informer("test", script, min_backoff_s=0.001)
    await run_until_done(inf, script)
    assert inf.synced.is_set() and inf.stats.watch_errors == 1


async def test_a_handler_error_does_not_stop_the_informer() -> None:
    seen: list[str] = []

    def handler(kind: str, o: dict, old: Any, synthetic: bool = False) -> None:
        seen.append(o["metadata"]["name"])
        if o["metadata"]["name"] == "bad":
            raise RuntimeError("boom")

    script = Script(
        lists=[
            FakeResponse(
                body={"metadata": {"resourceVersion": "1"}, "items": [obj("bad", "1"), obj("ok", "1")]}
            )
        ],
        watches=[],
    )
    inf = Informer("test", script, handler)
    await run_until_done(inf, script)
    assert seen == ["bad", "ok"]


def recorder() -> tuple[list[tuple], Any]:
    events: list[tuple] = []

    def handler(kind: str, o: dict, old: Any, synthetic: bool = False) -> None:
        events.append((kind, o["metadata"]["name"], o["metadata"].get("uid"), synthetic))

    return events, handler


def record_sleeps(inf: Informer) -> list[float]:
    """Replace the informer's backoff sleep by a recorder (no waiting, no clock)."""
    sleeps: list[float] = []

    async def sleep(base: float) -> None:
        sleeps.append(base)
        await asyncio.sleep(0)

    inf._sleep = sleep  # type: ignore[method-assign]
    return sleeps


async def test_a_relist_sees_an_object_deleted_and_created_again_under_its_name() -> None:
    # BinderHub names build pods by repo: when a rebuild's pod replaced the old one during a
    # watch gap, the relist once reported MODIFIED, and the old build's end was never seen
    events, handler = recorder()
    old, new = obj("build-r", "1"), obj("build-r", "7")
    old["metadata"]["uid"], new["metadata"]["uid"] = "u1", "u2"
    script = Script(
        lists=[
            FakeResponse(body={"metadata": {"resourceVersion": "1"}, "items": [old]}),
            FakeResponse(body={"metadata": {"resourceVersion": "9"}, "items": [new]}),
        ],
        watches=[FakeResponse(chunks=[ev("ERROR", {"code": 410, "message": "too old"})])],
    )
    inf = Informer("test", script, handler, min_backoff_s=0.001)
    record_sleeps(inf)
    await run_until_done(inf, script)
    assert events == [
        ("ADDED", "build-r", "u1", False),
        ("DELETED", "build-r", "u1", True),
        ("ADDED", "build-r", "u2", False),
    ]


async def test_gone_again_after_a_list_and_watches_that_close_at_once_back_off() -> None:
    # both once looped without a pause: a LIST per iteration, or a watch request per one
    listing = {"metadata": {"resourceVersion": "5"}, "items": []}
    gone = FakeResponse(chunks=[ev("ERROR", {"code": 410, "message": "too old"})])
    script = Script(
        lists=[FakeResponse(body=listing) for _ in range(4)],
        watches=[
            gone,
            FakeResponse(chunks=[ev("ERROR", {"code": 410, "message": "too old"})]),
            FakeResponse(chunks=[]),  # 200, then closed with nothing said
            FakeResponse(chunks=[]),
            FakeResponse(chunks=[ev("ADDED", obj("a", "6"))]),  # progress: backoff resets
            FakeResponse(chunks=[]),
        ],
    )
    inf = Informer("test", script, min_backoff_s=0.5, max_backoff_s=4.0)
    sleeps = record_sleeps(inf)
    await run_until_done(inf, script)
    assert sleeps == [0.5, 1.0, 2.0, 4.0, 0.5]
    assert inf.stats.relists_gone == 2 and set(inf.objects) == {"a"}


async def test_an_unreadable_event_is_skipped_and_the_watch_goes_on() -> None:
    # one bad event once failed every watch from the same resourceVersion, forever
    events, handler = recorder()

    def transform(o: dict) -> dict:
        if o["metadata"]["name"] == "poison":
            raise ValueError("cannot slim this")
        return o

    script = Script(
        lists=[
            FakeResponse(
                body={"metadata": {"resourceVersion": "1"}, "items": [obj("poison", "1"), obj("a", "1")]}
            )
        ],
        watches=[
            FakeResponse(
                chunks=[
                    b"not json\n",
                    b"[1, 2]\n",
                    ev("ADDED", obj("poison", "2")),
                    ev("ADDED", obj("b", "3")),
                ]
            ),
            FakeResponse(chunks=[ev("ADDED", obj("c", "4"))]),
        ],
    )
    inf = Informer("test", script, handler, transform=transform, min_backoff_s=0.001)
    record_sleeps(inf)
    await run_until_done(inf, script)
    assert [e[1] for e in events] == ["a", "b", "c"]
    assert inf.stats.bad_events == 4 and inf.stats.watch_errors == 0
    watches = [c for c in script.calls if c.get("watch")]
    assert [w["resource_version"] for w in watches] == ["1", "3", "4"]
    from stickypack.extender.metrics import Metrics

    metrics = Metrics()
    metrics.watch_informers({"pods": inf})
    bad = metrics.registry.get_sample_value("stickypack_extender_watch_bad_events_total", {"kind": "pods"})
    assert bad == 4


async def test_a_watch_that_made_progress_and_then_broke_reconnects_after_the_shortest_backoff() -> None:
    # the backoff grown by refused connections (an API server restarting) once outlived the
    # healthy watch that followed: when that watch was cut, the reconnect waited the old,
    # long backoff while the cache fell behind
    listing = {"metadata": {"resourceVersion": "5"}, "items": []}
    script = Script(
        lists=[FakeResponse(body=listing)],
        watches=[
            ConnectionRefusedError("refused"),
            ConnectionRefusedError("refused"),
            ConnectionRefusedError("refused"),
            FakeResponse(
                chunks=[ev("ADDED", obj("a", "6")), ev("ADDED", obj("b", "7")), ConnectionResetError()]
            ),
        ],
    )
    inf = Informer("test", script, min_backoff_s=0.5, max_backoff_s=30.0)
    sleeps = record_sleeps(inf)
    await run_until_done(inf, script)
    assert set(inf.objects) == {"a", "b"}
    assert sleeps == [0.5, 1.0, 2.0, 0.5]


async def test_a_relist_brings_a_dra_objects_change_to_the_nodes_reading() -> None:
    """The extender's ResourceClaim informer (``slim_resource_claim``, as ``cluster.dra``
    runs it) relisting after a 410: the claim, not allocated at first (the node it is used
    on cannot be weighed: +inf), was allocated while the watch was away. The slimmed
    copies once kept no resourceVersion, so the relist's diff saw no change and the node
    stayed unweighable until the claim's next event; a claim deleted and created again
    under its name likewise went unseen."""
    from stickypack.core.dra import DRA_UTILIZATION_COLUMN
    from stickypack.kube.cache import ClusterCache
    from stickypack.kube.dra import slim_resource_claim, slim_resource_slice

    cache = ClusterCache(dra=True)
    tracker = cache.dra
    assert tracker is not None
    allocatable = {"cpu": "8", "memory": "32Gi", "pods": "110"}
    cache.node_event("ADDED", {"metadata": {"name": "n1"}, "status": {"allocatable": allocatable}})
    devices = [{"name": f"g{k}"} for k in range(4)]
    pool = {"name": "n1", "generation": 1, "resourceSliceCount": 1}
    spec = {"driver": "d", "nodeName": "n1", "pool": pool, "devices": devices}
    tracker.slice_event("ADDED", slim_resource_slice({"metadata": {"name": "s"}, "spec": spec}))
    cache.pod_event(
        "ADDED",
        {
            "metadata": {"name": "p", "namespace": "ns", "uid": "p"},
            "spec": {
                "nodeName": "n1",
                "containers": [],
                "resourceClaims": [{"name": "c", "resourceClaimName": "c"}],
            },
            "status": {"phase": "Running"},
        },
    )

    def claim(rv: str, uid: str, devices: list[str] | None) -> dict:
        results = [{"request": "r", "driver": "d", "pool": "n1", "device": d} for d in devices or ()]
        allocation = {"devices": {"results": results}} if devices is not None else None
        meta = {"name": "c", "namespace": "ns", "resourceVersion": rv, "uid": uid}
        return {"metadata": meta, "spec": {}, "status": {"allocation": allocation}}

    def utilization() -> float:
        cache.refresh_dra()
        return float(cache.table.extra[DRA_UTILIZATION_COLUMN][cache.table.index["n1"]])

    gone = ev("ERROR", {"code": 410, "message": "too old"})
    script = Script(
        lists=[
            FakeResponse(body={"metadata": {"resourceVersion": "1"}, "items": [claim("1", "u1", None)]}),
            # allocated while the watch was away
            FakeResponse(body={"metadata": {"resourceVersion": "5"}, "items": [claim("4", "u1", ["g0"])]}),
            # deleted and created again, allocated 2 devices, while away again
            FakeResponse(
                body={"metadata": {"resourceVersion": "9"}, "items": [claim("8", "u2", ["g0", "g1"])]}
            ),
        ],
        watches=[FakeResponse(chunks=[gone]), FakeResponse(chunks=[gone])],
    )
    seen: list[float] = []
    inf = Informer("resourceclaims", script, tracker.claim_event, transform=slim_resource_claim)
    inf.add_handler(lambda *a, **k: seen.append(utilization()))
    record_sleeps(inf)
    await run_until_done(inf, script)
    # listed; the relist's MODIFIED; the next one's DELETED (synthetic: not found) and ADDED
    assert seen == [float("inf"), 0.25, float("inf"), 0.5]
    assert utilization() == 0.5


def listing(rv: str, *items: dict) -> FakeResponse:
    return FakeResponse(body={"metadata": {"resourceVersion": rv}, "items": list(items)})


async def test_every_list_and_watch_asks_for_the_selected_objects_and_lists_by_pages() -> None:
    script = Script(lists=[listing("5")], watches=[FakeResponse(chunks=[ev("ADDED", obj("a", "6"))])])
    inf = Informer(
        "test", script, label_selector="app=binder", field_selector="spec.nodeName=n1", page_size=7
    )
    await run_until_done(inf, script)
    assert len(script.calls) == 3  # the list, the watch, the next watch (left waiting)
    for call in script.calls:
        assert (call["label_selector"], call["field_selector"]) == ("app=binder", "spec.nodeName=n1")
    assert script.calls[0]["limit"] == 7


@pytest.mark.parametrize(
    ("watch_timeout_s", "resync_s", "timeout_seconds"),
    [
        (300, 900.0, 300),  # the watch's own limit comes first
        (300, 100.0, 100),  # the resync comes first: int(100 - a few ms) + 1 = 100 s
    ],
)
async def test_a_watch_ends_by_its_timeout_or_the_next_resync_and_the_client_waits_longer(
    watch_timeout_s: int, resync_s: float, timeout_seconds: int
) -> None:
    script = Script(lists=[listing("5")], watches=[])
    inf = Informer("test", script, watch_timeout_s=watch_timeout_s, resync_s=resync_s)
    await run_until_done(inf, script)
    watch = script.calls[1]
    assert watch["watch"] and watch["timeout_seconds"] == timeout_seconds
    # the API server ends a quiet watch at timeout_seconds: the client's read timeout must
    # not cut it first (that would be counted as a watch error)
    _connect, read = watch["_request_timeout"]
    assert read > timeout_seconds


async def test_backoff_stops_growing_at_max_backoff_s() -> None:
    # 0.5, then doubled to 1.0, then held at the cap 1.0: both for 410s right after a list
    # and for watch errors
    gone = [FakeResponse(chunks=[ev("ERROR", {"code": 410, "message": "too old"})]) for _ in range(3)]
    script = Script(lists=[listing("5") for _ in range(4)], watches=gone)
    inf = Informer("test", script, min_backoff_s=0.5, max_backoff_s=1.0)
    sleeps = record_sleeps(inf)
    await run_until_done(inf, script)
    assert sleeps == [0.5, 1.0, 1.0] and inf.stats.relists_gone == 3

    failing = [FakeResponse(status=500, body={"message": "etcd timeout"}) for _ in range(3)]
    script = Script(lists=[listing("5")], watches=failing)
    inf = Informer("test", script, min_backoff_s=0.5, max_backoff_s=1.0)
    sleeps = record_sleeps(inf)
    await run_until_done(inf, script)
    assert sleeps == [0.5, 1.0, 1.0] and inf.stats.watch_errors == 3


async def test_the_backoff_sleep_is_jittered_between_half_the_backoff_and_the_backoff(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    inf = Informer("test", Script([], []))
    monkeypatch.setattr(informer_module, "asyncio", SimpleNamespace(sleep=sleep))
    for draw in (0.0, 0.5, 0.999):
        monkeypatch.setattr(informer_module, "random", SimpleNamespace(random=lambda draw=draw: draw))
        await inf._sleep(4.0)
    # 4 * (0.5 + 0.5 * draw): 2.0, 3.0, 3.998; never above the backoff (its cap)
    assert slept == pytest.approx([2.0, 3.0, 3.998])


async def test_a_410_long_after_the_list_relists_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # only a 410 right after a list (an expiring continue token) waits before relisting
    monkeypatch.setattr(informer_module, "QUICK_S", 0.05)
    gone = ev("ERROR", {"code": 410, "message": "too old"})
    script = Script(lists=[listing("5"), listing("9")], watches=[FakeResponse(chunks=[0.2, gone])])
    inf = Informer("test", script, min_backoff_s=0.5)
    sleeps = record_sleeps(inf)
    await run_until_done(inf, script)
    assert sleeps == [] and inf.stats.relists_gone == 1 and inf.stats.lists == 2


async def test_a_quiet_watch_that_ends_in_its_time_is_not_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    # the API server ends a watch with nothing to say at timeout_seconds: reconnect at once
    monkeypatch.setattr(informer_module, "QUICK_S", 0.05)
    script = Script(lists=[listing("5")], watches=[FakeResponse(chunks=[0.2])])
    inf = Informer("test", script, min_backoff_s=0.5)
    sleeps = record_sleeps(inf)
    await run_until_done(inf, script)
    assert sleeps == [] and inf.stats.watch_errors == 0
    assert [c["resource_version"] for c in script.calls if c.get("watch")] == ["5", "5"]


async def test_refused_status_is_the_last_refusal_until_the_api_server_answers_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # the extender is not ready while it is 401/403 (its rights taken away): it must clear
    # as soon as a list or a watch is answered, and a watch closed at once is no refusal
    forbidden = {"message": 'pods is forbidden: User "x" cannot list', "reason": "Forbidden"}
    script = Script(
        lists=[FakeResponse(status=403, body=forbidden), listing("5", obj("x", "5"))],
        watches=[
            FakeResponse(chunks=[]),  # 200, closed at once with nothing said
            FakeResponse(status=403, body=forbidden),
            FakeResponse(chunks=[ev("ADDED", obj("a", "6"))]),
        ],
    )
    inf = Informer("test", script, min_backoff_s=0.001)
    at_sleeps: list[int | None] = []

    async def sleep(base: float) -> None:
        at_sleeps.append(inf.stats.refused_status)

    inf._sleep = sleep  # type: ignore[method-assign]
    at_events: list[tuple[str, int | None]] = []
    inf.add_handler(
        lambda kind, o, old, **_: at_events.append((o["metadata"]["name"], inf.stats.refused_status))
    )
    with caplog.at_level(logging.WARNING):
        await run_until_done(inf, script)
    assert at_sleeps == [403, None, 403]
    assert at_events == [("x", None), ("a", None)]
    assert inf.stats.refused_status is None
    # the Status's message (not its reason) is what the warning says
    assert sum('pods is forbidden: User "x" cannot list' in r.getMessage() for r in caplog.records) == 2


async def test_a_relist_hands_on_only_the_objects_that_changed() -> None:
    events, handler = recorder()
    gone = ev("ERROR", {"code": 410, "message": "too old"})
    script = Script(
        lists=[listing("2", obj("a", "1"), obj("b", "2")), listing("3", obj("a", "1"), obj("b", "3"))],
        watches=[FakeResponse(chunks=[gone])],
    )
    inf = Informer("test", script, handler)
    record_sleeps(inf)
    await run_until_done(inf, script)
    # "a" is the same (resourceVersion 1) in both lists: nothing to say of it
    assert events == [
        ("ADDED", "a", None, False),
        ("ADDED", "b", None, False),
        ("MODIFIED", "b", None, False),
    ]


async def test_a_list_without_a_resource_version_is_watched_from_now() -> None:
    script = Script(lists=[FakeResponse(body={"metadata": {}, "items": [obj("a", "1")]})], watches=[])
    inf = Informer("test", script)
    await run_until_done(inf, script)
    assert script.calls[1]["resource_version"] == ""


async def test_blank_lines_are_skipped_and_a_last_event_without_a_newline_is_read() -> None:
    events, handler = recorder()
    last = ev("ADDED", obj("b", "7")).rstrip(b"\n")
    script = Script(
        lists=[listing("5")],
        watches=[
            FakeResponse(chunks=[b" \r\n", ev("ADDED", obj("a", "6")), b"\n"]),
            FakeResponse(chunks=[last]),  # its only event, cut before the newline
        ],
    )
    inf = Informer("test", script, handler)
    sleeps = record_sleeps(inf)
    await run_until_done(inf, script)
    assert [e[:2] for e in events] == [("ADDED", "a"), ("ADDED", "b")]
    assert inf.stats.bad_events == 0 and inf.stats.watch_errors == 0 and sleeps == []
    assert [c["resource_version"] for c in script.calls if c.get("watch")] == ["5", "6", "7"]


async def test_an_error_event_without_a_code_is_a_watch_error_not_a_410() -> None:
    script = Script(
        lists=[listing("5")],
        watches=[FakeResponse(chunks=[ev("ERROR", {"message": "internal error"})])],
    )
    inf = Informer("test", script, min_backoff_s=0.001)
    sleeps = record_sleeps(inf)
    await run_until_done(inf, script)
    assert (inf.stats.watch_errors, inf.stats.relists_gone, inf.stats.lists) == (1, 0, 1)
    assert sleeps == [0.001]
    assert inf.stats.refused_status == 500


async def test_a_bookmark_moves_the_resource_version_and_is_not_an_event() -> None:
    events, handler = recorder()
    bookmark = json.dumps({"type": "BOOKMARK", "object": {"metadata": {}}}).encode() + b"\n"
    script = Script(
        lists=[listing("5")],
        watches=[
            # a bookmark without a resourceVersion leaves the watch's where it was
            FakeResponse(chunks=[bookmark]),
            FakeResponse(chunks=[ev("ADDED", obj("a", "6")), ev("BOOKMARK", obj("", "8"))]),
        ],
    )
    inf = Informer("test", script, handler)
    await run_until_done(inf, script)
    assert [c["resource_version"] for c in script.calls if c.get("watch")] == ["5", "5", "8"]
    assert [e[1] for e in events] == ["a"] and inf.stats.events == 1


async def test_a_watch_event_is_handed_on_as_what_it_does_to_the_local_copy() -> None:
    # an ADDED of an object already known replaces it (MODIFIED, with the copy it replaces);
    # a MODIFIED of one not known adds it
    seen: list[tuple[str, str, str | None]] = []

    def handler(kind: str, o: dict, old: Any, synthetic: bool = False) -> None:
        seen.append((kind, o["metadata"]["name"], old and old["metadata"]["resourceVersion"]))

    script = Script(
        lists=[listing("5", obj("a", "1"))],
        watches=[FakeResponse(chunks=[ev("ADDED", obj("a", "6")), ev("MODIFIED", obj("b", "7"))])],
    )
    inf = Informer("test", script, handler)
    await run_until_done(inf, script)
    assert seen == [("ADDED", "a", None), ("MODIFIED", "a", "1"), ("ADDED", "b", None)]


async def test_staleness_counts_from_the_last_word_of_the_api_server() -> None:
    # the watch is answered 1 s after the list, and its first event comes 1 s later:
    # staleness restarts at each (the metric would otherwise say a quiet, healthy watch is
    # as old as the last list: 1 s or more; half of that leaves room for a loaded machine)
    staleness: list[float] = []
    script = Script(
        lists=[listing("5")],
        watches=[1.0, FakeResponse(chunks=[1.0, ev("ADDED", obj("a", "6"))])],
    )
    inf = Informer("test", script, lambda *a, **k: staleness.append(inf.staleness_s()))
    task = inf.start()
    await asyncio.wait_for(inf.synced.wait(), 10)
    while not inf.stats.connected:
        await asyncio.sleep(0.005)
    staleness.append(inf.staleness_s())
    await asyncio.wait_for(script.done.wait(), 10)
    await inf.stop()
    assert task.done()
    assert len(staleness) == 2 and all(s < 0.5 for s in staleness), staleness


async def test_a_watch_answered_with_another_status_than_200_is_refused() -> None:
    # 202 Accepted is no watch stream: refused (its status said), not read as one that closed
    script = Script(
        lists=[listing("5")],
        watches=[FakeResponse(status=202, body={"message": "accepted"})],
    )
    inf = Informer("test", script, min_backoff_s=0.001)
    record_sleeps(inf)
    await run_until_done(inf, script)
    assert (inf.stats.watch_errors, inf.stats.refused_status) == (1, 202)


async def test_the_watch_metrics_export_each_informers_own_counters() -> None:
    # extender/metrics.py watch_informers: one series per kind, each read from that
    # informer's stats at scrape time; an informer not yet synced is infinitely stale.
    # No list_call is ever made: neither informer is started, their stats are set by hand.
    from stickypack.extender.metrics import Metrics

    async def never_called(**kw: Any) -> Any:
        raise AssertionError("the metrics read stats only")

    pods = Informer("pods", never_called)
    pods.stats.relists_gone, pods.stats.watch_errors, pods.stats.bad_events = 1, 2, 3
    pods.stats.connected = True
    pods.synced.set()
    nodes = Informer("nodes", never_called)  # never synced, never connected, counters 0
    metrics = Metrics()
    metrics.watch_informers({"pods": pods, "nodes": nodes})

    def sample(name: str, kind: str) -> float | None:
        return metrics.registry.get_sample_value(f"stickypack_extender_{name}", {"kind": kind})

    assert sample("watch_relists_total", "pods") == 1.0
    assert sample("watch_errors_total", "pods") == 2.0
    assert sample("watch_bad_events_total", "pods") == 3.0
    assert sample("watch_connected", "pods") == 1.0
    assert sample("watch_connected", "nodes") == 0.0
    assert [sample(n, "nodes") for n in ("watch_relists_total", "watch_errors_total")] == [0.0, 0.0]
    assert sample("cache_staleness_seconds", "nodes") == float("inf")
    stale = sample("cache_staleness_seconds", "pods")
    assert stale is not None and 0.0 <= stale < 60.0  # contacted when its stats were made
    pods.stats.watch_errors = 5  # read at scrape time, not when registered
    assert sample("watch_errors_total", "pods") == 5.0
