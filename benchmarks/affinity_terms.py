"""The extender's time for a build pod of many preferred node-affinity terms, over real HTTP.

    python benchmarks/affinity_terms.py [--nodes 1000] [--terms 20000] [--pods 5]
    python benchmarks/affinity_terms.py --find-bound

A uvicorn server, in its own process as in production, runs the extender app over the node
table of ``benchmarks/extender_latency.py`` (``--nodes`` nodes with pods, a build history),
with the service's defaults (the ``stickypack-builds`` profile, pods assumed on the node
kube-scheduler is predicted to bind: the prediction runs kube-scheduler's NodeAffinity
score). A client on one keep-alive connection sends, per build pod, filter then prioritize
as kube-scheduler does with ``nodeCacheCapable: true``, and times the pair: ``--pods`` pods
of 10 terms (the baseline), then ``--pods`` pods of ``--terms`` terms, alternating, each pod
new (so its terms are parsed). Terms name a node (``kubernetes.io/hostname In [node]``, as
a list of preferred nodes would), a pool, or a node by ``matchFields``. Prints the median
time a pod for each and ends with ``ratio: X`` (median with ``--terms`` / median with 10).

``--find-bound`` starts the local control plane and finds, by bisection, the most such terms
a pod the real kube-apiserver stores may have (its request and etcd size limits; to within
0.5%), and the size of the extender request that pod makes; it ends with ``max_terms: N``.
"""

from __future__ import annotations

import argparse
import http.client
import json
import random
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))
sys.path.insert(0, str(HERE))

NODE_NAME = "gke-pool-{}-node-{:05d}"  # extender_latency.build_world's names


def node_names(n: int) -> list[str]:
    return [NODE_NAME.format(i // 100, i) for i in range(n)]


def terms(count: int, names: list[str], rng: random.Random) -> list[dict[str, Any]]:
    """``count`` preferred terms: most name one node by its hostname, some a pool, some a
    node by ``matchFields``."""
    out = []
    for _ in range(count):
        pick = rng.random()
        if pick < 0.7:
            expr = {"key": "kubernetes.io/hostname", "operator": "In", "values": [rng.choice(names)]}
            preference: dict[str, Any] = {"matchExpressions": [expr]}
        elif pick < 0.8:
            preference = {
                "matchExpressions": [{"key": "pool", "operator": "In", "values": [f"p{rng.randrange(3)}"]}]
            }
        else:
            field = {"key": "metadata.name", "operator": "In", "values": [rng.choice(names)]}
            preference = {"matchFields": [field]}
        out.append({"weight": rng.randint(1, 100), "preference": preference})
    return out


def build_pod(name: str, repo: str, affinity_terms: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": "binder",
            "uid": f"uid-{name}",
            "resourceVersion": "1",
            "labels": {"component": "binderhub-build", "name": name},
            "annotations": {"binder-repo": repo},
        },
        "spec": {
            "containers": [
                {
                    "name": "builder",
                    "image": "quay.io/jupyterhub/repo2docker:2025.1.0",
                    "resources": {"requests": {"cpu": "1", "memory": "2Gi"}, "limits": {"memory": "4Gi"}},
                }
            ],
            "schedulerName": "stickypack-builds",
            "affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": affinity_terms}},
        },
    }


def serve(args: argparse.Namespace) -> int:
    """The server process: the world of extender_latency.py, the service's defaults
    (assume on), nodes labelled with their hostname; print the port, serve until killed."""
    import asyncio
    import gc

    import uvicorn

    from extender_latency import build_world
    from stickypack.extender.app import make_app
    from stickypack.extender.server import loopback_socket, uvicorn_config

    ext, names, _ = build_world(args.nodes, args.repos, args.seed)
    for i, name in enumerate(names):  # as the kubelet labels a node
        node = {
            "metadata": {"name": name, "labels": {"pool": f"p{i % 3}", "kubernetes.io/hostname": name}},
            "spec": {},
            "status": {
                "allocatable": {"cpu": "16", "memory": "64Gi", "pods": "110"},
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        }
        ext.cache.node_event("MODIFIED", node)
    ext.assume = True  # the service's default: the prediction runs
    gc.collect()
    gc.freeze()
    sock = loopback_socket()
    sock.listen(128)
    print(sock.getsockname()[1], flush=True)
    config = uvicorn_config(make_app(ext), "127.0.0.1", 0)
    asyncio.run(uvicorn.Server(config).serve(sockets=[sock]))
    return 0


def measure(args: argparse.Namespace) -> int:
    names = node_names(args.nodes)
    rng = random.Random(args.seed + 1)
    repos = [f"https://github.com/org/repo-{i}" for i in range(args.repos)]
    counts = [10, args.terms]
    bodies: dict[int, list[bytes]] = {n: [] for n in counts}
    for i in range(args.pods + 1):  # the first of each: warm-up
        for n in counts:
            pod = build_pod(f"build-{n}-{i}", rng.choice(repos), terms(n, names, rng))
            args_ = {"Pod": pod, "Nodes": None, "NodeNames": names}
            bodies[n].append(json.dumps(args_, separators=(",", ":")).encode())  # as Go writes it
    cmd = [sys.executable, __file__, "--serve", f"--nodes={args.nodes}", f"--repos={args.repos}",
           f"--seed={args.seed}"]  # fmt: skip
    server = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    times: dict[int, list[float]] = {n: [] for n in counts}
    try:
        port = int(server.stdout.readline())  # type: ignore[union-attr]
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        conn.connect()
        conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as Go's net/http
        headers = {"Content-Type": "application/json"}
        for i in range(args.pods + 1):
            for n in counts:
                t0 = time.perf_counter()
                for verb in ("filter", "prioritize"):
                    conn.request("POST", f"/{verb}", bodies[n][i], headers)
                    resp = conn.getresponse()
                    data = resp.read()
                    if resp.status != 200:
                        raise SystemExit(f"{verb}, {n} terms: HTTP {resp.status}: {data[:300]!r}")
                if i:
                    times[n].append(time.perf_counter() - t0)
                scores = json.loads(data)
                assert len(scores) == args.nodes and all(0 <= s["Score"] <= 10 for s in scores)
        conn.close()
    finally:
        server.terminate()
        server.wait(10)
    for n in counts:
        print(
            f"{n} terms ({len(bodies[n][0]):,} request bytes): filter + prioritize "
            f"median {1000 * statistics.median(times[n]):.1f} ms, max {1000 * max(times[n]):.1f} ms "
            f"({len(times[n])} pods, {args.nodes} nodes)"
        )
    print(f"ratio: {statistics.median(times[args.terms]) / statistics.median(times[10]):.1f}")
    return 0


def find_bound(args: argparse.Namespace) -> int:
    """The most terms of :func:`terms`' shapes a pod the real API server stores may have."""
    from stickypack.testing import ControlPlane

    names = node_names(args.nodes)

    def pod(n: int) -> dict[str, Any]:
        body = build_pod(f"bound-{n}", "https://github.com/org/repo", terms(n, names, random.Random(n)))
        del body["metadata"]["uid"], body["metadata"]["resourceVersion"]
        return body

    with ControlPlane() as cp:
        cp._core(lambda core: core.create_namespace({"metadata": {"name": "binder"}}))
        cp._wait_for_namespace("binder")

        def stored(n: int) -> bool:
            # compact JSON, as kubectl and Go clients send it (kubernetes_asyncio's has
            # spaces); sent as YAML, which JSON is, so the client passes the bytes as they are
            body = json.dumps(pod(n), separators=(",", ":")).encode()

            async def create(api: Any) -> tuple[int, bytes]:
                resp = await api.call_api(
                    "/api/v1/namespaces/binder/pods",
                    "POST",
                    header_params={"Accept": "application/json", "Content-Type": "application/yaml"},
                    body=body,
                    _preload_content=False,
                )
                try:
                    return resp.status, await resp.read()
                finally:
                    resp.release()

            status, answer = cp.call(create, timeout=120)
            if status != 201:
                print(f"{n} terms ({len(body):,} bytes): HTTP {status} {answer[:120]!r}")
                return False
            cp._core(lambda core: core.delete_namespaced_pod(f"bound-{n}", "binder", grace_period_seconds=0))
            return True

        lo, hi = 1_000, 200_000  # lo stored, hi not
        assert stored(lo) and not stored(hi)
        while hi - lo > max(50, lo // 200):
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if stored(mid) else (lo, mid)
    body = json.dumps({"Pod": pod(lo), "Nodes": None, "NodeNames": names}, separators=(",", ":")).encode()
    size = len(json.dumps(pod(lo), separators=(",", ":")))
    print(f"pod JSON {size:,} bytes; its extender request ({args.nodes} nodes) {len(body):,} bytes")
    print(f"max_terms: {lo}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--terms", type=int, default=20_000)
    parser.add_argument("--pods", type=int, default=5)
    parser.add_argument("--repos", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--find-bound", action="store_true")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        return serve(args)
    if args.find_bound:
        return find_bound(args)
    return measure(args)


if __name__ == "__main__":
    raise SystemExit(main())
