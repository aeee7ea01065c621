"""What the scheduler-routing webhook adds to each pod creation, on the real API server.

    python benchmarks/webhook_latency.py [--pods 300]

Starts the local control plane (etcd, kube-apiserver) and the webhook over TLS on loopback
(``stickypack webhook``'s app, in a background thread), registers the configuration
``stickypack render webhook-config`` writes, and times ``--pods`` pod creations one at a
time, alternating a pod a route matches (the API server calls the webhook and applies its
patch), one a route with a placement matches (node affinity and a toleration added too),
and one no route names (its selectors keep the API server from calling), so all see the
same API server and etcd. Prints the p50 and p99 of each and the placement's ratio to a
plain route, checks every routed pod got the route's scheduler (and the placement its
toleration), and ends with ``ratio: X`` (p50 routed / p50 without the webhook).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import trustme

from stickypack.render import webhook_configuration
from stickypack.testing import ControlPlane
from stickypack.webhook.config import config_from_dict
from stickypack.webhook.server import WebhookThread


def required_node_affinity(key: str, values: list[str]) -> dict[str, Any]:
    """A ``nodeAffinity`` requiring label ``key`` to be one of ``values``."""
    term = {"matchExpressions": [{"key": key, "operator": "In", "values": values}]}
    return {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}


#: A route's placement on z2jh's user nodes (``node_affinity`` and ``tolerations``, as
#: webhook.yaml and ``render scheduler-routing --placement`` take them).
USER_POOL_PLACEMENT: dict[str, Any] = {
    "node_affinity": required_node_affinity("hub.jupyter.org/node-purpose", ["user"]),
    "tolerations": [{"key": "hub.jupyter.org/dedicated", "value": "user", "effect": "NoSchedule"}],
}


def _quantile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[int(q * 100) - 1]


def print_creation_times(times: dict[str, list[float]]) -> None:
    """One line per kind of pod: the p50 and p99 of its creation times (seconds, printed
    in milliseconds) and how many were timed."""
    for kind, values in times.items():
        print(
            f"{kind:7s} pod creation: p50 {1000 * statistics.median(values):.2f} ms, "
            f"p99 {1000 * _quantile(values, 0.99):.2f} ms ({len(values)} pods)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=300, help="pods to create of each kind")
    args = parser.parse_args()

    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    with tempfile.TemporaryDirectory() as tmp, ControlPlane() as cp:
        crt, key = Path(tmp) / "tls.crt", Path(tmp) / "tls.key"
        cert.cert_chain_pems[0].write_to_path(str(crt))
        cert.private_key_pem.write_to_path(str(key))
        placed_route = {
            "name": "placed",
            "pod_selector": "app.kubernetes.io/component=dask-worker",
            **USER_POOL_PLACEMENT,
        }
        routes = [{"name": "routed", "pod_selector": "dask.org/component=worker"}, placed_route]
        config = config_from_dict({"tls": {"cert_file": str(crt), "key_file": str(key)}, "routes": routes})
        with WebhookThread(config) as hook:
            doc = webhook_configuration(
                config.scheduler_routes(), url=f"{hook.url}/mutate", ca_bundle=ca.cert_pem.bytes()
            )

            async def register(api: Any) -> None:
                from kubernetes_asyncio import client

                await client.AdmissionregistrationV1Api(api).create_mutating_webhook_configuration(doc)

            cp.call(register)
            routed_labels = {"dask.org/component": "worker"}
            deadline = time.monotonic() + 30
            i = 0
            while cp.create_pod(f"probe-{i}", labels=routed_labels)["spec"]["schedulerName"] != "stickypack":
                if time.monotonic() > deadline:
                    raise SystemExit("the API server never called the webhook")
                i += 1
                time.sleep(0.2)
            cp.delete_all_pods()
            times: dict[str, list[float]] = {"routed": [], "placed": [], "plain": []}
            kinds = (
                ("routed", routed_labels),
                ("placed", {"app.kubernetes.io/component": "dask-worker"}),
                ("plain", {"app": "web"}),
            )
            for n in range(args.pods):
                for kind, labels in kinds:
                    start = time.perf_counter()
                    pod = cp.create_pod(f"{kind}-{n}", labels=labels)
                    times[kind].append(time.perf_counter() - start)
                    want = "default-scheduler" if kind == "plain" else "stickypack"
                    if pod["spec"]["schedulerName"] != want:
                        raise SystemExit(f"{kind}-{n}: schedulerName {pod['spec']['schedulerName']}")
                    tolerations = {t.get("key") for t in pod["spec"].get("tolerations") or []}
                    if (kind == "placed") != ("hub.jupyter.org/dedicated" in tolerations):
                        raise SystemExit(f"{kind}-{n}: tolerations {sorted(map(str, tolerations))}")
    print_creation_times(times)
    placed = statistics.median(times["placed"]) / statistics.median(times["routed"])
    print(f"placement: {placed:.2f} x a plain route's p50")
    print(f"ratio: {statistics.median(times['routed']) / statistics.median(times['plain']):.2f}")


if __name__ == "__main__":
    main()
