"""Pods per second the real kube-scheduler schedules with the stickypack extender and without,
in the same run, on the local control plane.

    python benchmarks/extender_throughput.py [--nodes 500] [--pods 1000] [--rounds 2]

Both schedulers run the ``stickypack-builds`` profile rendered by ``stickypack render``
(the same client qps/burst); one has the extender (``stickypack extender`` in its own
process, ``nodeCacheCapable: true``, ``ignorable: true``), the other none. Each round
creates ``--pods`` BinderHub-style build pods (over 50 repos) while no scheduler serves
them, starts the scheduler, and times the binds from 10% to 100% of the pods bound (so
start-up is not counted), counted on a watch. Rounds alternate without/with. The last line
is ``ratio: X`` (median pods/s with the extender over median pods/s without).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from stickypack.render import (
    EXTENDER_CLIENT_BURST,
    EXTENDER_CLIENT_QPS,
    extender_entry,
    scheduler_config,
)
from stickypack.testing import ControlPlane, pod_manifest

PROFILE = "stickypack-builds"


def build_pods(n: int, round_no: int) -> list[dict]:
    pods = []
    for i in range(n):
        name = f"build-{round_no}-{i}"
        pod = pod_manifest(
            name, cpu="100m", memory="128Mi", scheduler_name=PROFILE,
            labels={"component": "binderhub-build", "name": name},
        )  # fmt: skip
        pod["metadata"]["annotations"] = {"binder-repo": f"https://github.com/org/repo-{i % 50}"}
        pods.append(pod)
    return pods


def timed_round(cp: ControlPlane, config: dict, pods: int, round_no: int) -> float:
    """Create the pods, start the scheduler, and return pods bound per second from the
    first sight of 10% bound to 100%, counted on a watch (stickypack's own informer), so the
    measuring adds one watch to the API server's load, not a list call every few ms."""
    from kubernetes_asyncio import client

    from stickypack.kube.informer import Informer

    cp.create_pods(build_pods(pods, round_no))
    handle = cp.start_scheduler(config, name=f"round-{round_no}")

    async def watch(api: Any) -> float:
        core = client.CoreV1Api(api)
        bound: set[str] = set()
        marks: dict[str, tuple[float, int]] = {}
        done = asyncio.Event()

        def on_event(kind: str, obj: dict, old: Any = None, synthetic: bool = False) -> None:
            name = obj["metadata"]["name"]
            if kind == "DELETED" or not (obj.get("spec") or {}).get("nodeName") or name in bound:
                return
            bound.add(name)
            now = time.perf_counter()
            if "from" not in marks and len(bound) >= pods * 0.1:
                marks["from"] = (now, len(bound))
            if len(bound) >= pods:
                marks["to"] = (now, len(bound))
                done.set()

        informer = Informer("bench-pods", functools.partial(core.list_namespaced_pod, "default"), on_event)
        informer.start()
        try:
            await asyncio.wait_for(done.wait(), 600)
        except TimeoutError:
            raise TimeoutError(f"round {round_no}: {pods - len(bound)} pods unbound after 600 s") from None
        finally:
            await informer.stop()
        (t0, n0), (t1, n1) = marks["from"], marks["to"]
        return (n1 - n0) / max(t1 - t0, 1e-6)

    try:
        rate = cp.call(watch, timeout=700)
    finally:
        cp.stop_scheduler(handle)
        cp.delete_all_pods(timeout=300)
    return rate


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()

    with ControlPlane() as cp, tempfile.TemporaryDirectory() as tmp:
        for i in range(args.nodes):
            cp.create_node(f"node-{i:04d}", cpu="64", memory="256Gi", pods=250)
        port = free_port()
        cfg_path = Path(tmp) / "extender.yaml"
        cfg_path.write_text(
            yaml.safe_dump({"listen": {"host": "127.0.0.1", "port": port}, "log_level": "warning",
                            "history": {"name": "bench-history"}})
        )  # fmt: skip
        log = open(Path(tmp) / "extender.log", "wb")  # noqa: SIM115
        ext = subprocess.Popen(
            [sys.executable, "-m", "stickypack.cli", "extender", "--config", str(cfg_path),
             "--kubeconfig", str(cp.kubeconfig)],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            env={**os.environ, "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"},
        )  # fmt: skip
        try:
            import httpx

            url = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 120
            while True:
                try:
                    if httpx.get(url + "/readyz", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline or ext.poll() is not None:
                    raise SystemExit(f"extender did not become ready; log {log.name}")
                time.sleep(0.2)
            common = {"qps": EXTENDER_CLIENT_QPS, "burst": EXTENDER_CLIENT_BURST}
            without = scheduler_config([PROFILE], **common)
            with_ext = scheduler_config([PROFILE], extender=extender_entry(url), **common)
            rates: dict[str, list[float]] = {"without": [], "with": []}
            for r in range(args.rounds):
                for label, config in (("without", without), ("with", with_ext)):
                    rate = timed_round(cp, config, args.pods, len(rates["with"]) * 2 + len(rates["without"]))
                    rates[label].append(rate)
                    print(f"round {r + 1} {label:>7} extender: {rate:8.1f} pods/s", flush=True)
            metrics = httpx.get(url + "/metrics").text
            managed = [
                line for line in metrics.splitlines()
                if line.startswith("stickypack_extender_decisions_total") and 'managed="true"' in line
            ]  # fmt: skip
            print("extender decisions:", "; ".join(managed))
            sums = {}
            for line in metrics.splitlines():
                for part in ("_sum", "_count"):
                    prefix = f"stickypack_extender_request_duration_seconds{part}"
                    if line.startswith(prefix):
                        verb = line.split('verb="')[1].split('"')[0]
                        sums.setdefault(verb, {})[part] = float(line.rsplit(" ", 1)[1])
            for verb, v in sorted(sums.items()):
                mean_ms = 1000 * v["_sum"] / max(v["_count"], 1)
                print(f"extender {verb}: {int(v['_count'])} calls, mean {mean_ms:.3f} ms in the handler")
        finally:
            os.killpg(ext.pid, signal.SIGTERM)
            ext.wait(10)
            log.close()
    w, wo = statistics.median(rates["with"]), statistics.median(rates["without"])
    print(f"nodes: {args.nodes}  pods: {args.pods}  rounds: {args.rounds}")
    print(f"without_pods_per_s: {wo:.1f}")
    print(f"with_pods_per_s: {w:.1f}")
    print(f"ratio: {w / wo:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
