"""Build history that survives restarts: where each repo was built, stored in the cluster.

The in-memory :class:`~stickypack.core.BuildHistory` is what the scorers read. This module
keeps it in sync with a store in the API server and with the other writers (extender
replicas, ``stickypack forget-node``):

- writers never rewrite the whole history from memory: they queue *operations* (``record
  repo node time``, ``forget node up-to-time``) and apply them to the freshly read stored
  document, written back with its ``resourceVersion`` (optimistic concurrency); a
  ``409 Conflict`` re-reads and re-applies, so concurrent writers lose no entry;
- ``forget`` leaves a *tombstone* (node -> time): a record of that node at or before that
  time is dropped even if it reaches the store later (a writer that saw the build before the
  image cleaner pruned it), while a later build on the node counts again. Tombstones expire
  with the TTL, as the entries they guard do;
- operations are coalesced: one write per ``flush_interval_s`` at most, whatever the build
  rate;
- a ``read_only`` recorder (an extender that manages no build pod) writes nothing: of the
  extenders sharing a history, the one that records the build ends writes it.

Stores (see ``docs/operator-guide.md`` for the measured comparison):

:class:`ConfigMapHistoryStore` (the default)
    ``shards`` ConfigMaps ``<name>-<i>`` in one namespace, key ``history.json``; a repo
    lives in shard ``blake2b(repo) % shards``. RBAC: get, create, update (and list, watch to
    follow other writers, which the extender's informer does) on ConfigMaps in that namespace.
:class:`NodeAnnotationHistoryStore`
    each node's annotation ``stickypack.io/build-history``: ``{repo: time}``, bounded to
    ``max_annotation_bytes``, and its tombstone ``stickypack.io/build-history-forgotten``:
    a time. RBAC: get, list and patch on Nodes, cluster-wide.
:class:`MemoryHistoryStore`
    in-process, for tests and ``history.store: memory``; same semantics (resource versions,
    conflicts).

Each store's ``api_rights`` lists the RBAC rights its calls need (the extender's:
``stickypack.extender.server.api_rights``).

Document format (both stores)::

    {"version": 1, "repos": {"<repo>": {"<node>": <unix time>, ...}, ...},
     "forgotten": {"<node>": <unix time>, ...}}
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import random
import reprlib
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from hashlib import blake2b
from typing import TYPE_CHECKING, Any, Protocol

from stickypack.core.history import BuildHistory
from stickypack.kube.client import ApiRight, describe_error, read_json, rule_rights

if TYPE_CHECKING:
    from kubernetes_asyncio.client import ApiClient

log = logging.getLogger(__name__)

DATA_KEY = "history.json"
DEFAULT_NAME = "stickypack-build-history"
NODE_ANNOTATION = "stickypack.io/build-history"
#: The node-annotation store's tombstone: the time (seconds, as text) up to which the node's
#: builds are forgotten (a late record of an older build is dropped).
NODE_FORGOTTEN_ANNOTATION = "stickypack.io/build-history-forgotten"
STORE_LABEL = ("app.kubernetes.io/component", "build-history")
#: Leave room under the 1 MiB object limit (etcd's request limit is ~1.5 MiB).
DEFAULT_MAX_BYTES = 900_000
#: Node annotations share 256 KiB per object with everyone else's annotations.
DEFAULT_MAX_ANNOTATION_BYTES = 64 * 1024
#: The first wait (seconds) before retrying a failed write, doubling up to 60 s: never a
#: tight loop against an API server that refuses, even with ``flush_interval_s: 0``.
MIN_RETRY_S = 0.5
#: Most operations kept while writes fail (the oldest go first, counted in
#: ``HistoryRecorder.dropped_ops``): memory stays bounded when the store refuses for days.
MAX_PENDING_OPS = 10_000
#: Most forgotten-node tombstones a document keeps (the newest): a node name is at most 253
#: bytes, so they can never crowd the repos out of a document.
MAX_TOMBSTONES = 1000
#: Seconds a store request (read, write) may wait to connect, and then for each piece of
#: the answer (an inactivity bound: a big document still arrives). Without them, a request
#: sent into a connection the API server never answers again (its instance died, a
#: partition: no reset) waited forever: no write again, or no history loaded, until a restart.
STORE_CONNECT_TIMEOUT_S = 10.0
STORE_REQUEST_TIMEOUT_S = 30.0


def _timeout() -> tuple[float, float]:
    """``_request_timeout`` of a store request: (connect, read)."""
    return (STORE_CONNECT_TIMEOUT_S, STORE_REQUEST_TIMEOUT_S)


# ---- operations and documents ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Record:
    repo: str
    node: str
    when: float


@dataclass(frozen=True, slots=True)
class Forget:
    node: str
    when: float


Op = Record | Forget


@dataclass(slots=True)
class Limits:
    ttl_s: float = 7 * 86400.0
    max_nodes_per_repo: int = 3
    max_repos: int = 20000
    max_bytes: int = DEFAULT_MAX_BYTES


#: No expiry and no bound (``max_bytes`` 0 is none): for a writer that only forgets, so it
#: drops nothing the extender, with its own limits, keeps (``stickypack forget-node``).
NO_LIMITS = Limits(ttl_s=math.inf, max_nodes_per_repo=2**31, max_repos=2**31, max_bytes=0)


@dataclass
class HistoryDoc:
    """One stored document. ``damaged``: what was stored could not be read at all (not JSON,
    not an object, its ``repos`` not an object, the key missing); the recorder then keeps
    its last good copy."""

    repos: dict[str, dict[str, float]] = field(default_factory=dict)
    forgotten: dict[str, float] = field(default_factory=dict)
    damaged: bool = field(default=False, compare=False)

    @classmethod
    def parse(cls, text: str | bytes | None, source: str = "build history") -> HistoryDoc:
        """The document stored as ``text``; what is not a valid entry is skipped with one log
        line naming ``source`` (a ConfigMap, a node), so a damaged store never stops the
        extender: the next write stores only the valid entries. No text (None) is an empty
        history; an empty text, like any other that is not JSON, is unreadable."""
        if text is None:
            return cls()
        try:
            raw = json.loads(text)
        except ValueError:
            return cls._unreadable(source, "is not JSON")
        except RecursionError:
            return cls._unreadable(source, "is nested too deeply")
        if not isinstance(raw, dict):
            return cls._unreadable(source, "is not a JSON object")
        if raw.get("repos") is not None and not isinstance(raw["repos"], Mapping):
            return cls._unreadable(source, "has no object of repos")
        skipped: list[str] = []
        repos: dict[str, dict[str, float]] = {}
        for repo, nodes in _mapping(raw.get("repos"), "repos", skipped).items():
            entries = _times(nodes, f"repos[{_brief(repo)}]", skipped)
            if entries:
                repos[str(repo)] = entries
        forgotten = _times(raw.get("forgotten"), "forgotten", skipped)
        if skipped:
            log.warning(
                "%s: skipped %d malformed entr%s (first: %s)",
                source,
                len(skipped),
                "y" if len(skipped) == 1 else "ies",
                skipped[0],
            )
        return cls(repos, forgotten)

    @classmethod
    def _unreadable(cls, source: str, what: str) -> HistoryDoc:
        log.error("%s: the document %s; ignored (a last good copy in memory is kept)", source, what)
        return cls(damaged=True)

    def dumps(self) -> str:
        return json.dumps(
            {"version": 1, "repos": self.repos, "forgotten": self.forgotten},
            separators=(",", ":"),
            sort_keys=False,
        )


def _num(x: Any) -> bool:
    """A stored time: a finite number of seconds within float range (not a bool)."""
    if not isinstance(x, int | float) or isinstance(x, bool):
        return False
    try:
        return math.isfinite(float(x))
    except OverflowError:  # an integer of hundreds of digits
        return False


_BRIEF = reprlib.Repr()
_BRIEF.maxstring = _BRIEF.maxother = 60
#: ``repr(value)``, cut to a length a log line can carry.
_brief = _BRIEF.repr


def _mapping(value: Any, where: str, skipped: list[str]) -> Mapping[Any, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        skipped.append(f"{where}: not an object")
        return {}
    return value


def _times(value: Any, where: str, skipped: list[str]) -> dict[str, float]:
    """``{node: time}`` from a stored object; entries that are not finite numbers are
    recorded in ``skipped``."""
    out: dict[str, float] = {}
    for name, when in _mapping(value, where, skipped).items():
        if _num(when):
            out[str(name)] = float(when)
        else:
            skipped.append(f"{where}[{_brief(name)}]: time {_brief(when)} is not a number")
    return out


def apply_ops(doc: HistoryDoc, ops: Iterable[Op], limits: Limits, now: float) -> HistoryDoc:
    """``doc`` with ``ops`` applied, expired, bounded. Pure; ``doc`` is not changed."""
    forgotten = dict(doc.forgotten)
    records: list[Record] = []
    for op in ops:
        if isinstance(op, Forget):
            forgotten[op.node] = max(forgotten.get(op.node, float("-inf")), op.when)
        else:
            records.append(op)
    horizon = now - limits.ttl_s
    forgotten = {n: t for n, t in forgotten.items() if t >= horizon}
    if len(forgotten) > MAX_TOMBSTONES:  # the newest are the ones a lagging writer could undo
        newest = sorted(forgotten.items(), key=lambda nt: (-nt[1], nt[0]))[:MAX_TOMBSTONES]
        forgotten = dict(newest)
    hist = BuildHistory(limits.ttl_s, limits.max_nodes_per_repo, limits.max_repos)
    # Oldest repo first, so BuildHistory's LRU order is "least recently built first".
    stored = sorted(doc.repos.items(), key=lambda kv: max(kv[1].values(), default=0.0))
    for repo, nodes in stored:
        for node, when in sorted(nodes.items(), key=lambda nt: nt[1]):
            if when > forgotten.get(node, float("-inf")):
                hist.record(repo, node, when)
    for rec in sorted(records, key=lambda r: r.when):
        if rec.when > forgotten.get(rec.node, float("-inf")):
            hist.record(rec.repo, rec.node, rec.when)
    hist.expire(now)
    out = HistoryDoc(hist.to_dict(), forgotten)
    # Byte bound: drop the least recently built repos until the document fits.
    if limits.max_bytes and len(out.dumps()) > limits.max_bytes:
        compact = (",", ":")
        sizes = [
            (repo, len(json.dumps(repo)) + 2 + len(json.dumps(nodes, separators=compact)))
            for repo, nodes in out.repos.items()
        ]
        total = len(out.dumps())
        dropped = 0
        for repo, size in sizes:
            if total <= limits.max_bytes:
                break
            del out.repos[repo]
            total -= size
            dropped += 1
        log.warning(
            "build history: dropped the %d least recently built repos to stay under %d bytes",
            dropped,
            limits.max_bytes,
        )
    return out


def shard_of(repo: str, shards: int) -> int:
    if shards <= 1:
        return 0
    return int.from_bytes(blake2b(repo.encode(), digest_size=8).digest(), "big") % shards


# ---- stores ---------------------------------------------------------------------------------


class Conflict(Exception):
    """The stored document changed since it was read (HTTP 409)."""


class HistoryStore(Protocol):
    """Where history documents live. Each *part* (a ConfigMap shard, a node) is one document
    with a version string; ``write`` fails with :class:`Conflict` on a stale version and
    returns the new version, or None when the part no longer exists (a deleted node)."""

    async def read_all(self) -> dict[str, tuple[HistoryDoc, str | None]]: ...

    async def read(self, part: str) -> tuple[HistoryDoc, str | None]: ...

    async def write(self, part: str, doc: HistoryDoc, version: str | None) -> str | None: ...

    def parts_for(self, op: Op) -> list[str]: ...


class MemoryHistoryStore:
    """In-process store with resource versions and conflicts, ``shards`` parts."""

    def __init__(self, shards: int = 1) -> None:
        self.shards = shards
        self.data: dict[str, tuple[str, int]] = {}
        self.writes = 0
        self.conflicts = 0

    def parts_for(self, op: Op) -> list[str]:
        if isinstance(op, Forget):
            return [str(i) for i in range(self.shards)]
        return [str(shard_of(op.repo, self.shards))]

    async def read(self, part: str) -> tuple[HistoryDoc, str | None]:
        if part not in self.data:
            return HistoryDoc(), None
        text, version = self.data[part]
        return HistoryDoc.parse(text), str(version)

    async def read_all(self) -> dict[str, tuple[HistoryDoc, str | None]]:
        return {str(i): await self.read(str(i)) for i in range(self.shards)}

    async def write(self, part: str, doc: HistoryDoc, version: str | None) -> str:
        current = self.data.get(part)
        if (current is None) != (version is None) or (current is not None and str(current[1]) != version):
            self.conflicts += 1
            raise Conflict(part)
        new = (current[1] if current else 0) + 1
        self.data[part] = (doc.dumps(), new)
        self.writes += 1
        return str(new)


class ConfigMapHistoryStore:
    """History in ``shards`` ConfigMaps ``<name>-<i>`` of ``namespace`` (key history.json)."""

    @staticmethod
    def api_rights(namespace: str, writes: bool = True) -> frozenset[ApiRight]:
        """The rights its calls need: :meth:`read` gets a ConfigMap of ``namespace``,
        :meth:`write` (unless the store is only read: ``writes`` false) creates or updates
        (replaces) one."""
        verbs = ["get", "create", "update"] if writes else ["get"]
        return rule_rights("", ["configmaps"], verbs, namespace)

    def __init__(
        self, api_client: ApiClient, namespace: str, name: str = DEFAULT_NAME, shards: int = 1
    ) -> None:
        from kubernetes_asyncio import client

        self.core = client.CoreV1Api(api_client)
        self.namespace = namespace
        self.name = name
        self.shards = max(1, shards)
        self.writes = 0
        self.conflicts = 0

    def configmap_name(self, part: str) -> str:
        return f"{self.name}-{part}"

    def part_of(self, configmap_name: str) -> str | None:
        """The part stored in ConfigMap ``configmap_name`` if it is one of this store's
        (``<name>-0`` .. ``<name>-<shards - 1>``), else None: another history's ConfigMap in
        the namespace (``<name>-staging-0``) or one left from more shards."""
        prefix = f"{self.name}-"
        if not configmap_name.startswith(prefix):
            return None
        part = configmap_name[len(prefix) :]
        return part if part in {str(i) for i in range(self.shards)} else None

    def parts_for(self, op: Op) -> list[str]:
        if isinstance(op, Forget):
            return [str(i) for i in range(self.shards)]
        return [str(shard_of(op.repo, self.shards))]

    async def read(self, part: str) -> tuple[HistoryDoc, str | None]:
        from kubernetes_asyncio.client.exceptions import ApiException

        try:
            resp = await self.core.read_namespaced_config_map(
                self.configmap_name(part), self.namespace, _preload_content=False, _request_timeout=_timeout()
            )
            body = await read_json(resp)
        except ApiException as exc:
            if exc.status == 404:
                return HistoryDoc(), None
            raise
        return self.parse_configmap(body)

    @staticmethod
    def parse_configmap(body: Mapping[str, Any]) -> tuple[HistoryDoc, str | None]:
        data = body.get("data") or {}
        meta = body.get("metadata") or {}
        source = f"build history ConfigMap {meta.get('namespace')}/{meta.get('name')}"
        if not isinstance(data, Mapping) or DATA_KEY not in data:
            return HistoryDoc._unreadable(source, f"is missing (no data key {DATA_KEY})"), meta.get(
                "resourceVersion"
            )
        return HistoryDoc.parse(data.get(DATA_KEY), source), meta.get("resourceVersion")

    async def read_all(self) -> dict[str, tuple[HistoryDoc, str | None]]:
        parts = [str(i) for i in range(self.shards)]
        docs = await asyncio.gather(*(self.read(p) for p in parts))
        return dict(zip(parts, docs, strict=True))

    async def write(self, part: str, doc: HistoryDoc, version: str | None) -> str:
        from kubernetes_asyncio.client.exceptions import ApiException

        name = self.configmap_name(part)
        # The client serializes a dict body as it is; its stubs ask for a V1ConfigMap.
        body: Any = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": name,
                "namespace": self.namespace,
                "labels": {STORE_LABEL[0]: STORE_LABEL[1], "app.kubernetes.io/name": "stickypack"},
            },
            "data": {DATA_KEY: doc.dumps()},
        }
        try:
            if version is None:
                resp = await self.core.create_namespaced_config_map(
                    self.namespace, body, _preload_content=False, _request_timeout=_timeout()
                )
            else:
                body["metadata"]["resourceVersion"] = version
                resp = await self.core.replace_namespaced_config_map(
                    name, self.namespace, body, _preload_content=False, _request_timeout=_timeout()
                )
            out = await read_json(resp)
        except ApiException as exc:
            # 409: Conflict, or AlreadyExists on create; 404 on replace: the ConfigMap was
            # deleted since it was read. Either way re-read (a deleted one is created anew).
            if exc.status == 409 or (exc.status == 404 and version is not None):
                self.conflicts += 1
                raise Conflict(name) from None
            raise
        self.writes += 1
        return str((out.get("metadata") or {}).get("resourceVersion"))


class NodeAnnotationHistoryStore:
    """History split by node: annotation ``stickypack.io/build-history`` = ``{repo: time}``.

    A part is a node name; a forget of node N touches only N, and leaves its tombstone in
    the annotation ``stickypack.io/build-history-forgotten`` (the time, as text), as the
    ConfigMap store keeps it in its document. The history annotation is bounded to
    ``max_annotation_bytes`` (oldest repos dropped), because all annotations of an object
    share a 256 KiB limit; when the node's other annotations leave less room than that (the
    API server refuses the write, 422), the newest repos that fit are kept. Writes are JSON
    merge patches carrying ``resourceVersion`` (a precondition: 409 on a stale one).
    """

    @staticmethod
    def api_rights(writes: bool = True) -> frozenset[ApiRight]:
        """The rights its calls need: :meth:`read_all` lists the Nodes; unless the store is
        only read (``writes`` false), :meth:`write` patches one and :meth:`read` gets one
        (again, after a write conflict)."""
        return rule_rights("", ["nodes"], ["get", "list", "patch"] if writes else ["list"])

    def __init__(
        self,
        api_client: ApiClient,
        annotation: str = NODE_ANNOTATION,
        max_annotation_bytes: int = DEFAULT_MAX_ANNOTATION_BYTES,
    ) -> None:
        from kubernetes_asyncio import client

        self.core = client.CoreV1Api(api_client)
        self.annotation = annotation
        self.forgotten_annotation = NODE_FORGOTTEN_ANNOTATION
        self.max_annotation_bytes = max_annotation_bytes
        self.writes = 0
        self.conflicts = 0

    def parts_for(self, op: Op) -> list[str]:
        return [op.node]

    def parse_node(self, body: Mapping[str, Any]) -> tuple[HistoryDoc, str | None]:
        meta = body.get("metadata") or {}
        node = str(meta.get("name"))
        annotations = meta.get("annotations") or {}
        raw = annotations.get(self.annotation)
        repos: dict[str, dict[str, float]] = {}
        damaged = False
        if raw is not None:
            try:
                stored = json.loads(raw)
            except (ValueError, RecursionError, TypeError):
                stored = None
            if not isinstance(stored, dict):
                log.error(
                    "node %s: annotation %s is not a JSON object; ignored (a last good copy in "
                    "memory is kept)",
                    node, self.annotation,
                )  # fmt: skip
                stored, damaged = {}, True
            skipped: list[str] = []
            for repo, when in _times(stored, "", skipped).items():
                repos[repo] = {node: when}
            if skipped:
                log.warning(
                    "node %s: annotation %s: skipped %d malformed entries (first: %s)",
                    node,
                    self.annotation,
                    len(skipped),
                    skipped[0],
                )
        forgotten: dict[str, float] = {}
        tombstone = annotations.get(self.forgotten_annotation)
        if tombstone is not None:
            try:
                when = float(tombstone)
            except (TypeError, ValueError):
                when = math.nan
            if math.isfinite(when):
                forgotten[node] = when
            else:
                log.warning(
                    "node %s: annotation %s: %s is not a time; ignored",
                    node, self.forgotten_annotation, _brief(tombstone),
                )  # fmt: skip
        return HistoryDoc(repos, forgotten, damaged=damaged), meta.get("resourceVersion")

    async def read(self, part: str) -> tuple[HistoryDoc, str | None]:
        from kubernetes_asyncio.client.exceptions import ApiException

        try:
            resp = await self.core.read_node(part, _preload_content=False, _request_timeout=_timeout())
            body = await read_json(resp)
        except ApiException as exc:
            if exc.status == 404:  # node gone: its history went with it (write says the same)
                return HistoryDoc(), None
            raise
        return self.parse_node(body)

    async def read_all(self) -> dict[str, tuple[HistoryDoc, str | None]]:
        resp = await self.core.list_node(_preload_content=False, _request_timeout=_timeout())
        body = await read_json(resp)
        out = {}
        for item in body.get("items") or ():
            out[str(item["metadata"]["name"])] = self.parse_node(item)
        return out

    async def write(self, part: str, doc: HistoryDoc, version: str | None) -> str | None:
        from kubernetes_asyncio.client.exceptions import ApiException

        mine = {repo: nodes[part] for repo, nodes in doc.repos.items() if part in nodes}
        ordered = sorted(mine.items(), key=lambda kv: kv[1])
        text = json.dumps(dict(ordered), separators=(",", ":"))
        while ordered and len(text) > self.max_annotation_bytes:
            ordered = ordered[max(1, len(ordered) // 20) :]
            text = json.dumps(dict(ordered), separators=(",", ":"))
        tombstone = doc.forgotten.get(part)
        while True:
            value = text if ordered else None
            patch: dict[str, Any] = {
                "metadata": {
                    "annotations": {
                        self.annotation: value,
                        self.forgotten_annotation: None if tombstone is None else repr(tombstone),
                    }
                }
            }
            if version is not None:
                patch["metadata"]["resourceVersion"] = version
            try:
                resp = await self.core.patch_node(
                    part,
                    patch,
                    _preload_content=False,
                    _request_timeout=_timeout(),
                    _content_type="application/merge-patch+json",  # type: ignore[call-arg]  # a client kwarg its stubs leave out
                )
                out = await read_json(resp)
            except ApiException as exc:
                if exc.status == 409:
                    self.conflicts += 1
                    raise Conflict(part) from None
                if exc.status == 404:  # node gone: its history went with it
                    return None
                if exc.status == 422 and ordered:
                    # all of a node's annotations share 256 KiB, and others took the room:
                    # keep the newest half, down to none, rather than fail every write
                    log.warning(
                        "node %s: build history refused (%s); keeping the newest %d of %d repos",
                        part, describe_error(exc), len(ordered) // 2, len(ordered),
                    )  # fmt: skip
                    ordered = ordered[len(ordered) - len(ordered) // 2 :]
                    text = json.dumps(dict(ordered), separators=(",", ":"))
                    continue
                raise
            self.writes += 1
            return str((out.get("metadata") or {}).get("resourceVersion"))


async def commit(
    store: HistoryStore,
    ops: list[Op],
    limits: Limits,
    *,
    now: Callable[[], float] = time.time,
    max_attempts: int = 20,
    cache: dict[str, tuple[HistoryDoc, str | None]] | None = None,
) -> dict[str, tuple[HistoryDoc, str | None]]:
    """Apply ``ops`` to the store, part by part, retrying conflicts (re-read, re-apply).

    ``cache`` (part -> last known document and version) saves the first read of each part;
    it is updated with what was written, unless it changed while the write was under way (a
    watch brought another writer's later version: that one is kept), and a part found gone
    leaves it. Returns the written parts. Raises :class:`Conflict` after ``max_attempts``
    conflicts on one part.
    """
    by_part: dict[str, list[Op]] = {}
    for op in ops:
        for part in store.parts_for(op):
            by_part.setdefault(part, []).append(op)
    written: dict[str, tuple[HistoryDoc, str | None]] = {}
    for part, part_ops in by_part.items():
        known = cache.get(part) if cache is not None else None
        for attempt in range(max_attempts):
            if known is None:
                known = await store.read(part)
                last = cache.get(part) if cache is not None else None
                if known[0].damaged and last is not None:
                    known = (last[0], known[1])  # write the last good copy back over the damage
            doc, version = known
            new = apply_ops(doc, part_ops, limits, now())
            before = cache.get(part) if cache is not None else None
            try:
                stored = await store.write(part, new, version)
            except Conflict:
                known = None
                await asyncio.sleep(min(0.5, 0.005 * 2**attempt) * random.random())
                continue
            if stored is None:  # the part is gone, and its entries with it
                if cache is not None:
                    cache.pop(part, None)
                break
            written[part] = (new, stored)
            if cache is not None:
                now_cached = cache.get(part)
                if now_cached is before or (now_cached is not None and now_cached[1] == stored):
                    cache[part] = (new, stored)
            break
        else:
            raise Conflict(f"{part}: still conflicting after {max_attempts} attempts")
    return written


# ---- the recorder ---------------------------------------------------------------------------


class VersionedBuildHistory(BuildHistory):
    """The recorder's :class:`BuildHistory`: :attr:`stickypack_version` counts the changes
    the recorder makes in place, so the extender keeps its cached locality scores while the
    object and its version stay the same (a rebuilt history is a new object)."""

    stickypack_version: int = 0


class HistoryRecorder:
    """The live :class:`BuildHistory` plus its store: records and forgets go to memory at
    once and to the store in coalesced, conflict-retried writes.

    ``history`` is what the extender reads; it is rebuilt whenever the stored documents
    change (:meth:`on_stored`, fed by a ConfigMap watch or :meth:`reload`), with the
    operations not yet written applied on top.
    """

    def __init__(
        self,
        store: HistoryStore | None,
        limits: Limits | None = None,
        *,
        flush_interval_s: float = 1.0,
        clock: Callable[[], float] = time.time,
        read_only: bool = False,
    ) -> None:
        self.store = store
        #: Reads the store, never writes it: records and forgets change the memory only (an
        #: extender that records no build ends; the writer's tombstones reach it by the
        #: watch, and a change of the store read later undoes a forget of its own).
        self.read_only = read_only
        self.limits = limits or Limits()
        self.flush_interval_s = flush_interval_s
        self.clock = clock
        self.history = VersionedBuildHistory(
            self.limits.ttl_s, self.limits.max_nodes_per_repo, self.limits.max_repos
        )
        self.loaded = asyncio.Event() if store is not None else _set_event()
        self.pending: list[Op] = []
        self._inflight: list[Op] = []
        #: The forgets known (stored, and our own): node -> time up to which a record of it
        #: is dropped, in memory as the store drops it.
        self._tombstones: dict[str, float] = {}
        self._docs: dict[str, tuple[HistoryDoc, str | None]] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stop = False
        self.flush_errors = 0
        self.dropped_ops = 0
        #: Nodes seen in the cluster (name -> creationTimestamp) whose history is not yet
        #: checked for entries older than the node (:meth:`node_seen`).
        self._unchecked: dict[str, float] = {}
        self._check_scheduled = False

    @property
    def unstored(self) -> int:
        """Operations not yet in the store: queued, and in a write under way."""
        return len(self._inflight) + len(self.pending)

    # ---- inputs ----------------------------------------------------------------------------

    def _touch(self) -> None:
        # a version the extender uses to know its cached locality scores are still valid
        self.history.stickypack_version += 1

    def record(self, repo: str, node: str, when: float | None = None) -> None:
        when = self.clock() if when is None else when
        if when <= self._tombstones.get(node, -math.inf):
            return  # a build before a known forget of its node (dated from its pod, seen late)
        self.history.record(repo, node, when)
        self._touch()
        self._queue(Record(repo, node, when))

    def forget_node(self, node: str, when: float | None = None) -> int:
        when = self.clock() if when is None else when
        dropped = self.history.forget_node(node)
        self._tombstones[node] = max(self._tombstones.get(node, -math.inf), when)
        self._touch()
        self._queue(Forget(node, when))
        return dropped

    def node_seen(self, node: str, created: float | None) -> None:
        """``node`` is in the cluster, created at ``created`` (its ``creationTimestamp``).

        Entries of ``node`` dated before that belong to an older machine of the same name,
        deleted and created again while no writer watched (a writer that sees the deletion
        forgets the node then): its image cache went with it, so they are forgotten (a
        tombstone at ``created``; later builds count). Checked once per node seen, after
        the history is loaded, in one pass for all the nodes seen meanwhile."""
        if created is None:
            return
        self._unchecked[node] = created
        if not self.loaded.is_set() or self._check_scheduled:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop (a test, a script): check now
            self.check_nodes()
            return
        self._check_scheduled = True
        loop.call_soon(self.check_nodes)  # the rest of a node list's events come first

    def node_gone(self, node: str) -> None:
        """``node`` was deleted: nothing to check (:meth:`forget_node` forgets it)."""
        self._unchecked.pop(node, None)

    def check_nodes(self) -> int:
        """Forget the entries older than their node of the nodes :meth:`node_seen` since
        the last check; returns how many nodes had such entries. Entries past the TTL are
        left to expire (they are not scored)."""
        self._check_scheduled = False
        if not self.loaded.is_set() or not self._unchecked:
            return 0
        unchecked, self._unchecked = self._unchecked, {}
        horizon = self.clock() - self.limits.ttl_s
        oldest: dict[str, float] = {}
        for _, nodes in self.history.items():
            for node, when in nodes.items():
                if node in unchecked and horizon <= when < oldest.get(node, math.inf):
                    oldest[node] = when
        stale = sorted(node for node, when in oldest.items() if when < unchecked[node])
        for node in stale:
            created = unchecked[node]
            dropped = self.history.forget_node(node, up_to=created)
            self._tombstones[node] = max(self._tombstones.get(node, -math.inf), created)
            self._queue(Forget(node, created))
            log.warning(
                "build history: node %s was created after %d of its entries; forgetting them "
                "(an older node of that name, deleted while no extender watched)",
                node, dropped,
            )  # fmt: skip
        if stale:
            self._touch()
        return len(stale)

    def _queue(self, op: Op) -> None:
        if self.store is None or self.read_only:
            return
        self.pending.append(op)
        if len(self.pending) > MAX_PENDING_OPS:
            if not self.dropped_ops:
                log.error(
                    "build history: %d operations wait for the store; dropping the oldest "
                    "(they stay in memory until the extender restarts)",
                    MAX_PENDING_OPS,
                )
            drop = len(self.pending) - MAX_PENDING_OPS
            del self.pending[:drop]
            self.dropped_ops += drop
        self._wake.set()

    # ---- store sync ------------------------------------------------------------------------

    async def load(self) -> None:
        """Read every stored part and rebuild the in-memory history."""
        if self.store is None:
            return
        self._docs = dict(await self.store.read_all())
        self._rebuild()
        self.loaded.set()
        self.check_nodes()

    def on_stored(self, part: str, doc: HistoryDoc, version: str | None) -> None:
        """A stored part changed (seen by a watch): rebuild unless it is our own write.

        A damaged document (edited into something unreadable) does not wipe the memory: the
        last good copy is kept under the new version, so the next write puts it back.
        """
        known = self._docs.get(part)
        if known is not None and known[1] == version:
            return
        if doc.damaged and known is not None:
            doc = known[0]
        self._docs[part] = (doc, version)
        self._rebuild()

    def on_deleted(self, part: str) -> None:
        """A stored part was deleted (by hand: that is how an operator resets the history):
        its entries leave the memory too; the next write creates it anew."""
        if part in self._docs:
            self._docs[part] = (HistoryDoc(), None)
            self._rebuild()

    def on_part_gone(self, part: str) -> None:
        """A part will never be written again (its node was deleted): forget it entirely,
        so the documents kept do not grow with every node the cluster ever had."""
        if self._docs.pop(part, None) is not None:
            self._rebuild()

    def _rebuild(self) -> None:
        now = self.clock()
        merged = HistoryDoc()
        for doc, _ in self._docs.values():
            for repo, nodes in doc.repos.items():
                into = merged.repos.setdefault(repo, {})
                for node, t in nodes.items():
                    into[node] = max(into.get(node, t), t)
            for node, t in doc.forgotten.items():
                merged.forgotten[node] = max(merged.forgotten.get(node, t), t)
        view = apply_ops(
            merged,
            [*self._inflight, *self.pending],
            Limits(self.limits.ttl_s, self.limits.max_nodes_per_repo, self.limits.max_repos, 0),
            now,
        )
        hist = VersionedBuildHistory(self.limits.ttl_s, self.limits.max_nodes_per_repo, self.limits.max_repos)
        hist.merge(dict(sorted(view.repos.items(), key=lambda kv: max(kv[1].values(), default=0.0))))
        self.history = hist
        self._tombstones = view.forgotten

    async def flush(self) -> int:
        """Write pending operations now. Returns how many were written."""
        if self.store is None or not self.pending:
            return 0
        ops, self.pending = self.pending, []
        self._inflight = ops
        try:
            written = await commit(self.store, ops, self.limits, now=self.clock, cache=self._docs)
        except BaseException:
            self.pending = ops + self.pending
            self.flush_errors += 1
            raise
        finally:
            self._inflight = []
        # commit() has updated self._docs (its cache) with what it wrote, where no later
        # version came in meanwhile, and dropped parts found gone
        if set(written) != {p for op in ops for p in self.store.parts_for(op)}:
            self._rebuild()
        return len(ops)

    async def run(self) -> None:
        """Flush pending operations, at most once per ``flush_interval_s``, until stopped."""
        first_retry_s = max(self.flush_interval_s, MIN_RETRY_S)  # flush_interval_s may be 0
        backoff = first_retry_s
        while not self._stop:
            await self._wake.wait()
            self._wake.clear()
            try:
                await self.flush()
                backoff = first_retry_s
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning(
                    "build history: write failed (%s); retrying in %.1f s", describe_error(exc), backoff
                )
                self._wake.set()
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 60.0)
                continue
            await asyncio.sleep(self.flush_interval_s)

    def start(self) -> asyncio.Task[None]:
        self._task = asyncio.create_task(self.run(), name="history-recorder")
        return self._task

    async def stop(self, flush: bool = True) -> None:
        self._stop = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        if flush:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.flush(), 10)


def _set_event() -> asyncio.Event:
    ev = asyncio.Event()
    ev.set()
    return ev


async def forget_node(
    store: HistoryStore, node: str, limits: Limits | None = None, when: float | None = None
) -> int:
    """Forget ``node`` in the store (for ``stickypack forget-node``). Returns how many
    (repo, node) entries were dropped."""
    limits = limits or Limits()
    when = time.time() if when is None else when
    before = await store.read_all()
    count = sum(1 for doc, _ in before.values() for nodes in doc.repos.values() if node in nodes)
    await commit(store, [Forget(node, when)], limits, now=lambda: max(time.time(), when))
    return count
