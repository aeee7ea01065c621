"""Measure the build-history stores on the local control plane (the numbers behind the
choice written in ``docs/operator-guide.md``).

    python benchmarks/history_stores.py [--builds 200] [--writers 4] [--repos 5000]

For each store (ConfigMap, node annotations) it reports:

- write latency of one recorded build (p50, p99), one writer;
- concurrent writers: every record stored? how many 409 conflicts were retried;
- watch fan-out: update events a node watcher (kube-scheduler, cluster-autoscaler, every
  node informer in the cluster) receives per recorded build;
- capacity: bytes per stored repo, and how many repos fit in one object under its limit
  (1 MiB for a ConfigMap; 256 KiB for *all* annotations of a node), checked against the
  API server by writing one document just over the limit;
- survival: a new reader after the writers are gone sees every entry.

One JSON line per store, then the last line: node watch events per recorded build, ConfigMap
against node annotations (the cost the annotation store puts on every node watcher).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from stickypack.kube.history import (
    ConfigMapHistoryStore,
    HistoryDoc,
    Limits,
    NodeAnnotationHistoryStore,
    Record,
    commit,
)


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _count_node_events(core: Any, stop: asyncio.Event, counter: list[int]) -> None:
    resp = await core.list_node(_preload_content=False)
    rv = json.loads(await resp.read())["metadata"]["resourceVersion"]
    resp = await core.list_node(watch=True, resource_version=rv, _preload_content=False, timeout_seconds=600)
    try:
        async for line in resp.content:
            if line.strip():
                counter[0] += 1
            if stop.is_set():
                break
    except asyncio.CancelledError:
        pass
    finally:
        resp.close()


async def measure_store(kind: str, api: Any, nodes: list[str], builds: int, writers: int, repos: int) -> dict:
    from kubernetes_asyncio import client

    core = client.CoreV1Api(api)
    limits = Limits(ttl_s=1e9, max_repos=10**6, max_bytes=0)
    if kind == "configmap":
        store: Any = ConfigMapHistoryStore(api, "default", f"measure-{int(time.time())}")
    else:
        store = NodeAnnotationHistoryStore(api, max_annotation_bytes=200 * 1024)
    out: dict[str, Any] = {"store": kind}
    now = time.time()
    # 1. one writer, one build at a time
    stop = asyncio.Event()
    events = [0]
    watcher = asyncio.create_task(_count_node_events(core, stop, events))
    await asyncio.sleep(0.3)
    lat = []
    for i in range(builds):
        t0 = time.perf_counter()
        await commit(store, [Record(f"https://github.com/org/repo-{i}", nodes[i % len(nodes)], now)], limits)
        lat.append((time.perf_counter() - t0) * 1000)
    await asyncio.sleep(0.5)
    stop.set()
    watcher.cancel()
    out["write_ms_p50"] = round(statistics.median(lat), 2)
    out["write_ms_p99"] = round(_pct(lat, 0.99), 2)
    out["node_watch_events_per_build"] = round(events[0] / builds, 2)
    # 2. concurrent writers
    before = store.conflicts

    async def writer(w: int) -> None:
        for i in range(builds // writers):
            rec = Record(f"https://github.com/org/concurrent-{w}-{i}", nodes[(w + i) % len(nodes)], now)
            await commit(store, [rec], limits)

    t0 = time.perf_counter()
    await asyncio.gather(*(writer(w) for w in range(writers)))
    out["concurrent_writes_per_s"] = round(writers * (builds // writers) / (time.perf_counter() - t0), 1)
    out["conflicts_retried"] = store.conflicts - before
    # 3. survival: a fresh reader sees every entry
    docs = await store.read_all()
    stored = {repo for doc, _ in docs.values() for repo in doc.repos}
    expected = {f"https://github.com/org/repo-{i}" for i in range(builds)} | {
        f"https://github.com/org/concurrent-{w}-{i}" for w in range(writers) for i in range(builds // writers)
    }
    out["entries_lost"] = len(expected - stored)
    # 4. capacity
    node_name = "node-pool-abc-xyz-1234"
    sample = HistoryDoc(
        {f"https://github.com/some-org/some-repository-{i:06d}": {node_name: now} for i in range(repos)}
    )
    per_repo = len(sample.dumps()) / repos
    if kind == "configmap":
        out["bytes_per_repo"] = round(per_repo, 1)
        out["repos_per_object"] = int(1_000_000 / per_repo)
        # a full document: every write rewrites it
        full = HistoryDoc(
            {f"https://github.com/some-org/some-repository-{i:06d}": {"node-0": now} for i in range(8000)}
        )
        version = await store.write("full", full, None)
        cache = {"full": (full, version)}
        lat = []
        for i in range(20):
            t0 = time.perf_counter()
            store.parts_for = lambda op: ["full"]  # type: ignore[method-assign]
            await commit(store, [Record(f"https://github.com/x/{i}", "node-1", now)], limits, cache=cache)
            lat.append((time.perf_counter() - t0) * 1000)
        out["full_800KB_write_ms_p50"] = round(statistics.median(lat), 2)
        too_big = HistoryDoc({f"https://github.com/o/r-{i:07d}": {"n": now} for i in range(40_000)})
        try:
            await store.write("toobig", too_big, None)
            out["over_limit_rejected"] = False
        except Exception as exc:  # the API server refuses objects over its request limit
            out["over_limit_rejected"] = getattr(exc, "status", type(exc).__name__)
    else:
        per_repo = len(json.dumps({f"https://github.com/some-org/some-repository-{0:06d}": now})) + 1
        out["bytes_per_repo"] = per_repo
        out["repos_per_object"] = int(256 * 1024 / per_repo)
        text = json.dumps({f"https://github.com/o/r-{i:07d}": now for i in range(9000)})
        try:
            await core.patch_node(nodes[0], {"metadata": {"annotations": {"too-big": text}}})
            out["over_limit_rejected"] = False
        except Exception as exc:
            out["over_limit_rejected"] = getattr(exc, "status", type(exc).__name__)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--builds", type=int, default=200)
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--nodes", type=int, default=10)
    parser.add_argument("--repos", type=int, default=5000)
    args = parser.parse_args(argv)

    from kubernetes_asyncio import client

    from stickypack.testing import ControlPlane

    with ControlPlane() as cp:
        nodes = [f"node-{i}" for i in range(args.nodes)]
        for n in nodes:
            cp.create_node(n)

        async def run(api: Any) -> list[dict]:
            del api
            own = client.ApiClient(configuration=cp.client_configuration())
            try:
                return [
                    await measure_store(kind, own, nodes, args.builds, args.writers, args.repos)
                    for kind in ("configmap", "node-annotations")
                ]
            finally:
                await own.close()

        results = cp.call(run, timeout=900)
    for r in results:
        print(json.dumps(r))
    by_kind = {r["store"]: r for r in results}
    print(
        "node_watch_events_per_build: configmap {} node-annotations {}".format(
            by_kind["configmap"]["node_watch_events_per_build"],
            by_kind["node-annotations"]["node_watch_events_per_build"],
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
