"""Latency of the extender's prioritize verb over real HTTP on loopback.

    python benchmarks/extender_latency.py --nodes 1000 [--requests 2000] [--repos 5000] [--dra]

A uvicorn server, in its own process as in production, runs the extender app (the same app
``stickypack extender`` serves) over a node table of ``--nodes`` nodes with pods on them and
a build history of ``--repos`` repos;
a client on one keep-alive connection sends prioritize requests as kube-scheduler does with
``nodeCacheCapable: true`` (a build pod and every node name), one at a time, and times each
round trip. The last line is ``p99_ms: X``. With ``--dra`` the extender runs as with
``cluster.dra``, every node publishing 4 ResourceSlices and holding a pod whose claim
takes 2 of their devices (``benchmarks/dra_refresh.py``'s world; the readings computed
before the first request, as nothing changes while it runs).
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from stickypack.core.history import BuildHistory
from stickypack.extender.app import make_app
from stickypack.extender.engine import Extender, select_profile
from stickypack.kube.cache import ClusterCache
from stickypack.policies import load_builtin


def build_world(
    n_nodes: int, n_repos: int, seed: int, dra: bool = False
) -> tuple[Extender, list[str], list[str]]:
    rng = random.Random(seed)
    cache = ClusterCache(dra=dra)
    names = [f"gke-pool-{i // 100}-node-{i:05d}" for i in range(n_nodes)]
    for name in names:
        taints = []
        if rng.random() < 0.02:
            taints.append(
                {"key": "DeletionCandidateOfClusterAutoscaler", "value": "1", "effect": "PreferNoSchedule"}
            )
        cache.node_event(
            "ADDED",
            {
                "metadata": {"name": name, "labels": {"pool": f"p{rng.randrange(3)}"}},
                "spec": {"taints": taints},
                "status": {
                    "allocatable": {"cpu": "16", "memory": "64Gi", "pods": "110"},
                    "conditions": [{"type": "Ready", "status": "True"}],
                },
            },
        )
    for i in range(n_nodes * 8):  # ~8 pods a node, some of them builds
        pod = {
            "metadata": {"name": f"p{i}", "namespace": "ns", "uid": f"u{i}", "labels": {}},
            "spec": {
                "nodeName": names[rng.randrange(n_nodes)],
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}],
            },
        }
        if rng.random() < 0.05:
            pod["metadata"]["labels"] = {"component": "binderhub-build"}
            pod["metadata"]["annotations"] = {
                "binder-repo": f"https://github.com/org/repo-{rng.randrange(n_repos)}"
            }
        cache.pod_event("ADDED", pod)
    history = BuildHistory(max_repos=n_repos * 2)
    now = time.time()
    repos = [f"https://github.com/org/repo-{i}" for i in range(n_repos)]
    for repo in repos:
        for _ in range(rng.randrange(1, 3)):
            history.record(repo, names[rng.randrange(n_nodes)], now - rng.random() * 86400)
    if dra:
        from dra_refresh import add_dra_world

        add_dra_world(cache, names, slices=4)
    profile = select_profile(load_builtin("stickypack"), "stickypack-builds")
    ext = Extender(cache, profile, history=lambda: history, assume=False, dra=dra)
    return ext, names, repos


def serve(args: argparse.Namespace) -> int:
    """The server process: build the world, serve it, print the port, run until killed."""
    import gc

    from stickypack.extender.server import loopback_socket, uvicorn_config

    ext, _, _ = build_world(args.nodes, args.repos, args.seed, args.dra)
    ext.cache.refresh_dra()  # the first list's readings, before the caches are frozen
    gc.collect()
    gc.freeze()  # what `stickypack extender` does once its caches are synced
    import asyncio

    import uvicorn

    sock = loopback_socket()
    sock.listen(128)  # connections wait in the backlog until uvicorn accepts them
    print(sock.getsockname()[1], flush=True)
    config = uvicorn_config(make_app(ext), "127.0.0.1", 0)  # the service's own settings
    asyncio.run(uvicorn.Server(config).serve(sockets=[sock]))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--repos", type=int, default=5000)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dra", action="store_true", help="as with cluster.dra, nodes publishing devices")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        return serve(args)

    names = [f"gke-pool-{i // 100}-node-{i:05d}" for i in range(args.nodes)]
    repos = [f"https://github.com/org/repo-{i}" for i in range(args.repos)]
    rng = random.Random(args.seed + 1)
    bodies = []
    for i in range(args.requests + args.warmup):
        pod = {
            "metadata": {
                "name": f"build-{i}",
                "namespace": "binder",
                "uid": f"uid-{i}",
                "labels": {"component": "binderhub-build", "name": f"build-{i}"},
                "annotations": {"binder-repo": repos[rng.randrange(len(repos))]},
            },
            "spec": {
                "containers": [
                    {
                        "name": "builder",
                        "image": "quay.io/jupyterhub/repo2docker:2025.1.0",
                        "args": ["jupyter-repo2docker", "--ref", "main", "--no-run", "--json-logs"],
                        "resources": {"requests": {"cpu": "1", "memory": "2Gi"}, "limits": {"memory": "4Gi"}},
                    }
                ],
                "schedulerName": "stickypack-builds",
            },
        }
        bodies.append(json.dumps({"Pod": pod, "Nodes": None, "NodeNames": names}).encode())

    cmd = [sys.executable, __file__, "--serve", *(f"--{k}={v}" for k, v in
           (("nodes", args.nodes), ("repos", args.repos), ("seed", args.seed))),
           *(["--dra"] if args.dra else [])]  # fmt: skip
    server = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    try:
        port = int(server.stdout.readline())  # type: ignore[union-attr]
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.connect()
        # Go's net/http (kube-scheduler) sets TCP_NODELAY; without it http.client's separate
        # header and body writes meet delayed ACKs and every request waits ~40 ms.
        conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        headers = {"Content-Type": "application/json"}
        times = []
        for i, body in enumerate(bodies):
            t0 = time.perf_counter()
            conn.request("POST", "/prioritize", body, headers)
            resp = conn.getresponse()
            data = resp.read()
            dt = time.perf_counter() - t0
            if resp.status != 200:
                raise SystemExit(f"HTTP {resp.status}: {data[:300]!r}")
            if i >= args.warmup:
                times.append(dt * 1000)
        conn.close()
        scores = json.loads(data)
        assert len(scores) == args.nodes and all(0 <= s["Score"] <= 10 for s in scores)
    finally:
        server.terminate()
        server.wait(10)

    times.sort()
    p50 = statistics.median(times)
    p99 = times[min(len(times) - 1, int(0.99 * len(times)))]
    print(f"nodes: {args.nodes}  requests: {len(times)}  request bytes: {len(bodies[0])}")
    print(f"mean_ms: {statistics.fmean(times):.3f}")
    print(f"p50_ms: {p50:.3f}")
    print(f"max_ms: {times[-1]:.3f}")
    print(f"p99_ms: {p99:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
