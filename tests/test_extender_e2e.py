"""End to end on the local control plane: the real kube-scheduler with the
``stickypack-builds`` profile and our extender, configured by ``stickypack render``.

No kubelet runs: a build "ends" when its pod is deleted, which the extender's recorder
treats as the end of the build (as a Succeeded/Failed phase would be)."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from conftest import needs_binaries
from stickypack.cli import main as cli_main
from stickypack.extender.config import config_from_dict
from stickypack.extender.server import DRA_KINDS, GRACEFUL_SHUTDOWN_S, ExtenderService, ServiceThread
from stickypack.rendezvous import rendezvous_rank
from stickypack.testing import ControlPlane, pod_manifest

pytestmark = pytest.mark.controlplane

BUILDER = "stickypack-builds"


def build_pod(name: str, repo: str, **kw: Any) -> dict:
    pod = pod_manifest(
        name, cpu=kw.pop("cpu", "500m"), memory="1Gi", scheduler_name=BUILDER,
        labels={"component": "binderhub-build", "name": name}, **kw,
    )  # fmt: skip
    pod["metadata"]["annotations"] = {"binder-repo": repo}
    return pod


def render_config(tmp_path: Path, url: str, node_cache_capable: bool = True) -> Path:
    """The rendered scheduler configuration; ``node_cache_capable=False`` edits it so that
    kube-scheduler sends whole Node objects and reads the reply's ``Nodes``."""
    out = tmp_path / "scheduler.yaml"
    rc = cli_main(
        ["render", "scheduler-config", "--profiles", BUILDER, "--extender-url", url, "-o", str(out)]
    )
    assert rc == 0
    cfg = yaml.safe_load(out.read_text())
    (ext,) = cfg["extenders"]
    assert ext["nodeCacheCapable"] is True and ext["ignorable"] is True
    if not node_cache_capable:
        ext["nodeCacheCapable"] = False
        out.write_text(yaml.safe_dump(cfg))
    return out


#: The control plane is shared by the session and reset() keeps ConfigMaps: one history each.
HISTORY = {"name": ""}


@pytest.fixture(autouse=True)
def _own_history(request: pytest.FixtureRequest) -> None:
    # a parametrized test's cases share a name prefix: the digest of the whole id tells them apart
    digest = hashlib.sha256(request.node.nodeid.encode()).hexdigest()[:8]
    HISTORY["name"] = "hist-" + request.node.name.replace("_", "-")[5:40].strip("-") + "-" + digest


def extender(cp: ControlPlane, **overrides: Any) -> ServiceThread:
    cfg = config_from_dict({"history": {"flush_interval_s": 0.05, "name": HISTORY["name"]}, **overrides})
    return ServiceThread(cfg, cp.client_configuration()).start()


def delete_pods(cp: ControlPlane, names: list[str], namespace: str = "default") -> None:
    from kubernetes_asyncio import client

    async def go(api: Any) -> None:
        core = client.CoreV1Api(api)
        for n in names:
            await core.delete_namespaced_pod(n, namespace, grace_period_seconds=0)

    cp.call(go)


def wait_for(predicate, timeout: float = 30.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def stalled_request(port: int, path: str) -> socket.socket:
    """A connection to 127.0.0.1:``port`` whose POST to ``path`` the server is in the middle
    of: its headers sent with ``Expect: 100-continue``, the server's ``100 Continue`` read
    (uvicorn sends it when the app first awaits the body: the request is under way), then
    the first of the 1000 bytes announced. The answer that follows, if any, is left to read."""
    conn = socket.create_connection(("127.0.0.1", port), timeout=30)
    conn.sendall(
        f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\nExpect: 100-continue\r\n\r\n".encode()
    )
    interim = b""
    while not interim.endswith(b"\r\n\r\n"):
        byte = conn.recv(1)  # one at a time: nothing after the interim answer is taken
        assert byte, f"closed before answering 100 Continue: {interim!r}"
        interim += byte
    assert interim.startswith(b"HTTP/1.1 100 "), interim
    conn.sendall(b"{")
    return conn


def stored_history(cp: ControlPlane) -> dict:
    import json

    from kubernetes_asyncio import client
    from kubernetes_asyncio.client.exceptions import ApiException

    try:
        cm = cp.call(
            lambda api: client.CoreV1Api(api).read_namespaced_config_map(f"{HISTORY['name']}-0", "default")
        )
    except ApiException as exc:
        if exc.status == 404:
            return {}
        raise
    try:
        return json.loads((cm.data or {})["history.json"])["repos"]
    except (KeyError, TypeError, ValueError):  # damaged by a test, until the next write
        return {}


def test_rebuild_lands_where_the_repo_was_built_even_after_a_restart(cluster: ControlPlane, tmp_path) -> None:
    nodes = [f"node-{i}" for i in range(6)]
    for n in nodes:
        cluster.create_node(n, cpu="8", memory="32Gi")
    repo = "https://github.com/org/sticky"
    # The first build is pinned to a node far down the repo's rendezvous order.
    far = rendezvous_rank(nodes, repo)[-1]
    ext = extender(cluster)
    try:
        cluster.start_scheduler(render_config(tmp_path, ext.url))
        cluster.create_pod(pod=build_pod("build-1", repo, node_selector={"kubernetes.io/hostname": far}))
        assert cluster.wait_bound(["build-1"]) == {"build-1": far}
        delete_pods(cluster, ["build-1"])  # the build ends
        wait_for(lambda: far in stored_history(cluster).get(repo, {}), what="history stored")
        cluster.create_pod(pod=build_pod("build-2", repo))
        assert cluster.wait_bound(["build-2"]) == {"build-2": far}
        delete_pods(cluster, ["build-2"])
        # Another repo, never built, goes to its rendezvous top node.
        other = "https://github.com/org/fresh"
        cluster.create_pod(pod=build_pod("build-3", other))
        assert cluster.wait_bound(["build-3"])["build-3"] == rendezvous_rank(nodes, other)[0]
        delete_pods(cluster, ["build-3"])
    finally:
        ext.stop()
    # A new extender process reads the history back from the ConfigMap.
    ext2 = extender(cluster)
    try:
        assert ext2.call(lambda: ext2.service.recorder.history.nodes_for(repo, time.time())) == [far]
        cluster.stop_schedulers()
        cluster.start_scheduler(render_config(tmp_path, ext2.url))
        cluster.create_pod(pod=build_pod("build-4", repo))
        assert cluster.wait_bound(["build-4"]) == {"build-4": far}
        metrics = httpx.get(ext2.url + "/metrics").text
        assert 'stickypack_extender_decisions_total{managed="true",verb="prioritize"}' in metrics
    finally:
        ext2.stop()


def test_a_build_with_binderhubs_anti_affinity_goes_where_the_policy_sends_it(
    cluster: ControlPlane, tmp_path
) -> None:
    """BinderHub gives every build pod a preferred anti-affinity against other build pods
    (sticky builds off: its default, as the operator guide leaves it). Node "first" tops the
    repo's rendezvous order and runs another build, node "second" is next: the simulated
    policy (no InterPodAffinity in its build profile) and the extender send the build to
    "first" (locality 60 against 40). The rendered profile kept kube-scheduler's
    InterPodAffinity at weight 2, which added 200 to "second" for having no build: the
    build went there, against the policy, and the extender, which predicts kube-scheduler's
    pick with the profile's scorers, counted it on "first" until the watch said otherwise."""
    from stickypack.testing.live_fidelity import BINDERHUB_ANTI_AFFINITY

    repo = "https://github.com/org/anti"
    first, second = rendezvous_rank(["node-a", "node-b"], repo)
    for n in (first, second):
        cluster.create_node(n, cpu="8", memory="32Gi")

    def binderhub_build(name: str, repo: str, node: str | None = None) -> dict:
        pod = build_pod(name, repo)
        pod["spec"]["affinity"] = {"podAntiAffinity": BINDERHUB_ANTI_AFFINITY}
        if node is not None:
            pod["spec"]["nodeName"] = node
        return pod

    cluster.create_pod(pod=binderhub_build("running", "https://github.com/org/other", first))
    ext = extender(cluster)
    try:
        cluster.start_scheduler(render_config(tmp_path, ext.url))
        cluster.create_pod(pod=binderhub_build("new", repo))
        assert cluster.wait_bound(["new"]) == {"new": first}
    finally:
        ext.stop()


def test_hot_repo_stays_within_the_load_bound(cluster: ControlPlane, tmp_path) -> None:
    nodes = [f"node-{i}" for i in range(4)]
    for n in nodes:
        cluster.create_node(n, cpu="16", memory="64Gi")
    repo = "https://github.com/org/hot"
    ext = extender(cluster)
    try:
        cluster.start_scheduler(render_config(tmp_path, ext.url))
        names = [f"hot-{i}" for i in range(16)]
        cluster.create_pods([build_pod(n, repo) for n in names])
        placed = cluster.wait_bound(names)
    finally:
        ext.stop()
    per_node = Counter(placed.values())
    cap = max(2, -(-125 * len(names) // (100 * len(nodes))))  # ceil(1.25 * mean) = 5
    assert max(per_node.values()) <= cap, per_node
    # Locality still counts: the repo's top rendezvous node is among the busiest.
    top = rendezvous_rank(nodes, repo)[0]
    assert per_node[top] == max(per_node.values()), per_node


def test_kube_scheduler_logs_why_the_extender_could_not_filter(cluster: ControlPlane, tmp_path) -> None:
    # kube-scheduler reads no body of an answer other than 200: the extender's 400 reached
    # its log as "failed filter with extender at URL ..., code 400", the reason lost
    cluster.create_node("node-0", cpu="8", memory="32Gi")
    ext = extender(cluster, max_request_bytes=1024)
    try:
        scheduler = cluster.start_scheduler(render_config(tmp_path, ext.url))
        pod = build_pod("long-note", "https://github.com/org/r")
        pod["metadata"]["annotations"]["note"] = "x" * 2048  # the filter request is over 1024 bytes
        cluster.create_pod(pod=pod)
        assert cluster.wait_bound(["long-note"]) == {"long-note": "node-0"}  # ignorable: placed without it
        wait_for(
            lambda: "exceeds the limit of 1024 bytes" in scheduler.log_path.read_text(),
            what="the extender's reason in kube-scheduler's log",
        )
        text = httpx.get(ext.url + "/metrics").text
        assert 'stickypack_extender_requests_total{outcome="too_large",verb="filter"} 1.0' in text
    finally:
        ext.stop()


def test_a_pods_quantity_of_thousands_of_digits_is_counted_clamped(cluster: ControlPlane) -> None:
    # the API server keeps a limit of 5,000 digits as written; Python's int() refuses more
    # than 4,300, so the extender's pod watch skipped the pod as unreadable and its node
    # looked empty (and a build pod like it got an error instead of scores)
    from stickypack.core.resources import MAX_AMOUNT

    cluster.create_node("node-0", cpu="8", memory="32Gi")
    ext = extender(cluster)
    try:
        pod = pod_manifest("hog", cpu="1", memory="1Gi")
        pod["spec"]["containers"][0]["resources"] = {"limits": {"memory": "1" * 5000}}
        pod["spec"]["nodeName"] = "node-0"
        created = cluster.create_pod(pod=pod)
        assert created["spec"]["containers"][0]["resources"]["requests"]["memory"] == "1" * 5000

        def memory_requested() -> int:
            table = ext.service.cache.table
            return int(table.requested[table.index["node-0"], table.rindex["memory"]])

        wait_for(lambda: ext.call(memory_requested) == MAX_AMOUNT, what="the pod counted on node-0")
        text = httpx.get(ext.url + "/metrics").text
        assert 'stickypack_extender_watch_bad_events_total{kind="pods"} 0.0' in text
    finally:
        ext.stop()


@pytest.mark.parametrize("node_cache_capable", [True, False], ids=["node-names", "node-objects"])
def test_no_build_on_a_node_the_autoscaler_deletes(
    cluster: ControlPlane, tmp_path, node_cache_capable: bool
) -> None:
    nodes = [f"node-{i}" for i in range(4)]
    repo = "https://github.com/org/doomed"
    doomed = rendezvous_rank(nodes, repo)[0]
    for n in nodes:
        taints = ["ToBeDeletedByClusterAutoscaler=1700000000:NoSchedule"] if n == doomed else None
        cluster.create_node(n, cpu="8", memory="32Gi", taints=taints)
    ext = extender(cluster)
    try:
        # history says the doomed node built the repo, and the pods tolerate every taint, so
        # only the extender's filter keeps them off it
        ext.call(lambda: ext.service.recorder.record(repo, doomed))
        cluster.start_scheduler(render_config(tmp_path, ext.url, node_cache_capable))
        names = [f"b-{i}" for i in range(6)]
        cluster.create_pods([build_pod(n, repo, tolerations=[{"operator": "Exists"}]) for n in names])
        placed = cluster.wait_bound(names)
        assert doomed not in placed.values(), placed
        text = httpx.get(ext.url + "/metrics").text
        samples = {s.name: s.value for f in text_string_to_metric_families(text) for s in f.samples}
        assert samples["stickypack_extender_nodes_filtered_total"] >= 1  # the doomed node, at least once
    finally:
        ext.stop()


def extender_process(cp: ControlPlane, tmp_path: Path, history: dict) -> tuple[subprocess.Popen, str, Any]:
    """``stickypack extender`` as its own process (its own session, so a signal reaches only
    it) on a free loopback port, once it answers /readyz: the process, its URL and its open
    log file (extender.log). The port is found free here and bound by the child; should
    another process take it in between, the child exits and a new port is tried."""
    import socket

    assert cp.kubeconfig is not None
    for _ in range(3):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        cfg = tmp_path / "extender.yaml"
        cfg.write_text(yaml.safe_dump({"listen": {"host": "127.0.0.1", "port": port}, "history": history}))
        log = open(tmp_path / "extender.log", "wb")  # noqa: SIM115
        proc = subprocess.Popen(
            [sys.executable, "-m", "stickypack.cli", "extender", "--config", str(cfg),
             "--kubeconfig", str(cp.kubeconfig)],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            env={**os.environ, "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"},
        )  # fmt: skip
        url = f"http://127.0.0.1:{port}"
        try:
            wait_for(
                lambda p=proc, u=url: p.poll() is not None or _ready(u), timeout=60, what="extender /readyz"
            )
        except BaseException:  # never ready: do not leave it running in its own session
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
            log.close()
            raise
        if proc.poll() is None:
            return proc, url, log
        log.close()
        if "in use" not in (tmp_path / "extender.log").read_text():
            break
    raise AssertionError("the extender exited: " + (tmp_path / "extender.log").read_text())


def test_builds_are_scheduled_when_the_extender_is_killed(cluster: ControlPlane, tmp_path) -> None:
    for i in range(4):
        cluster.create_node(f"node-{i}", cpu="16", memory="64Gi")
    proc, url, log = extender_process(cluster, tmp_path, {"name": HISTORY["name"]})
    try:
        cluster.start_scheduler(render_config(tmp_path, url))
        first = [f"a-{i}" for i in range(10)]
        cluster.create_pods([build_pod(n, "https://github.com/org/r") for n in first])
        cluster.wait_bound(first)
        os.killpg(proc.pid, signal.SIGKILL)  # the extender dies mid-run
        proc.wait(10)
        second = [f"b-{i}" for i in range(20)]
        cluster.create_pods([build_pod(n, f"https://github.com/org/r{i % 3}") for i, n in enumerate(second)])
        placed = cluster.wait_bound(second, timeout=90)
        assert len(placed) == len(second)
        assert all(v for v in cluster.placements().values())  # none lost, none pending
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()


def test_a_hung_extender_costs_each_pod_two_timeouts_in_turn(cluster: ControlPlane, tmp_path) -> None:
    """An extender that accepts connections and never answers (the operator guide's
    "Extender down, slow or erring"): kube-scheduler waits out ``httpTimeout`` on filter
    and again on prioritize for every pod, and places one pod at a time."""
    import socket
    import threading

    for i in range(2):
        cluster.create_node(f"node-{i}", cpu="16", memory="64Gi")
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:  # accept and hold every connection, never reply
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        config = render_config(tmp_path, f"http://127.0.0.1:{server.getsockname()[1]}")
        (entry,) = yaml.safe_load(config.read_text())["extenders"]
        timeout = float(entry["httpTimeout"].removesuffix("s"))
        cluster.start_scheduler(config)
        names = ["hung-0", "hung-1"]
        start = time.monotonic()
        cluster.create_pods([build_pod(n, "https://github.com/org/r") for n in names])
        cluster.wait_bound(names, timeout=60)
        elapsed = time.monotonic() - start
    finally:
        stop.set()
        thread.join(5)
        for conn in held:
            conn.close()
        server.close()
    # filter and prioritize each wait out the timeout (two feasible nodes: scoring runs), and
    # the second pod waits for the first: the operator guide's "2 x httpTimeout, in turn"
    per_pod = 2 * timeout
    assert len(names) * per_pod - 0.5 <= elapsed < len(names) * per_pod + 10, elapsed


def test_sigterm_writes_pending_history_and_exits_cleanly(cluster: ControlPlane, tmp_path) -> None:
    # uvicorn raised the caught SIGTERM again on its way out, so the process died before the
    # service could write the build history it had not flushed yet (and SIGINT gave a traceback)
    cluster.create_node("node-0")
    history = {"name": HISTORY["name"], "flush_interval_s": 3600}  # nothing written before the stop
    proc, url, log = extender_process(cluster, tmp_path, history)
    first, repo = "https://github.com/org/written-at-once", "https://github.com/org/written-at-sigterm"
    try:

        def pending() -> str:
            text = httpx.get(url + "/metrics", timeout=5).text
            return next(
                line for line in text.splitlines() if line.startswith("stickypack_extender_history_pending")
            )

        # the first build end is written at once, the next waits out the flush interval
        for name, built in (("term-1", first), ("term-2", repo)):
            pod = build_pod(name, built)
            pod["spec"]["nodeName"] = "node-0"  # bound: its deletion is a build's end
            cluster.create_pod(pod=pod)
            delete_pods(cluster, [name])
            if built == first:
                wait_for(lambda: first in stored_history(cluster), what="the first build end written")
        wait_for(lambda: pending().endswith(" 1.0"), what="the second build end recorded, not yet written")
        assert repo not in stored_history(cluster)
        # a filter request whose body is still arriving when the graceful shutdown runs out:
        # its cancellation once escaped to uvicorn (a traceback, a bare 500)
        port = int(url.rsplit(":", 1)[1])
        with stalled_request(port, "/filter") as stalled:
            os.killpg(proc.pid, signal.SIGTERM)
            stalled.settimeout(GRACEFUL_SHUTDOWN_S + 10)
            answer = b""
            while chunk := stalled.recv(4096):
                answer += chunk
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()
    assert "node-0" in stored_history(cluster)[repo]
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200") and "stopping" in json.loads(body)["Error"], answer
    text = (tmp_path / "extender.log").read_text()
    assert "extender stopped; build history written" in text and "Traceback" not in text
    assert "Exception in ASGI application" not in text


def test_a_port_in_use_is_one_line_and_status_1(cluster: ControlPlane, tmp_path, capsys) -> None:
    # uvicorn's own exit (status 3) once went past the one-line error and its status 1
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        cfg = tmp_path / "extender.yaml"
        listen = {"host": "127.0.0.1", "port": port}
        cfg.write_text(yaml.safe_dump({"listen": listen, "history": {"name": HISTORY["name"]}}))
        rc = cli_main(["extender", "--config", str(cfg), "--kubeconfig", str(cluster.kubeconfig)])
    assert rc == 1
    err = capsys.readouterr().err
    assert f"cannot serve on 127.0.0.1:{port}" in err and "Traceback" not in err


def _ready(url: str) -> bool:
    try:
        return httpx.get(url + "/readyz", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def test_forget_node_forgets_one_node_and_prunes_nothing_else(
    cluster: ControlPlane, tmp_path, capsys
) -> None:
    """An image cleaner runs ``forget-node`` with a configuration of its own (often none):
    the entries the extender keeps under its own limits (here a TTL of 30 days and 5 nodes a
    repo, where the defaults are 7 days and 3) survive; only the node's entries go."""
    import json

    from kubernetes_asyncio import client

    from stickypack.kube.history import HistoryDoc

    now = time.time()
    old, wide = "https://github.com/x/old", "https://github.com/x/wide"
    doc = HistoryDoc(
        {old: {"node-a": now - 10 * 86400}, wide: {f"node-{c}": now - i for i, c in enumerate("bcdef")}}
    )
    cm = {"metadata": {"name": f"{HISTORY['name']}-0"}, "data": {"history.json": doc.dumps()}}
    cluster.call(lambda api: client.CoreV1Api(api).create_namespaced_config_map("default", cm))
    cfg = tmp_path / "cleaner.yaml"
    cfg.write_text(yaml.safe_dump({"history": {"name": HISTORY["name"]}}))  # no ttl_s, no limits
    argv = ["forget-node", "node-f", "--config", str(cfg), "--kubeconfig", str(cluster.kubeconfig)]
    assert cli_main(argv) == 0
    assert "1 build history entries dropped" in capsys.readouterr().out
    stored = cluster.call(
        lambda api: client.CoreV1Api(api).read_namespaced_config_map(f"{HISTORY['name']}-0", "default")
    )
    repos = json.loads(stored.data["history.json"])["repos"]
    assert set(repos) == {old, wide}, repos
    assert set(repos[wide]) == {"node-b", "node-c", "node-d", "node-e"}


def test_forget_node_cli_reaches_the_running_extender(cluster: ControlPlane, tmp_path, capsys) -> None:
    for n in ("node-a", "node-b"):
        cluster.create_node(n)
    ext = extender(cluster)
    try:
        ext.call(lambda: ext.service.recorder.record("https://github.com/x/y", "node-a"))
        ext.call(lambda: ext.service.recorder.record("https://github.com/x/z", "node-b"))
        wait_for(lambda: len(stored_history(cluster)) == 2, what="history stored")
        cfg = tmp_path / "extender.yaml"
        cfg.write_text(yaml.safe_dump({"history": {"name": HISTORY["name"]}}))
        rc = cli_main(
            ["forget-node", "node-a", "--config", str(cfg), "--kubeconfig", str(cluster.kubeconfig)]
        )
        assert rc == 0
        assert "1 build history entries dropped" in capsys.readouterr().out
        left = stored_history(cluster)
        assert set(left) == {"https://github.com/x/z"} and "node-b" in left["https://github.com/x/z"]
        wait_for(
            lambda: (
                ext.call(
                    lambda: ext.service.recorder.history.nodes_for("https://github.com/x/y", time.time())
                )
                == []
            ),
            what="the extender to see the forget",
        )
        # Node deletion forgets too.
        from kubernetes_asyncio import client

        cluster.call(lambda api: client.CoreV1Api(api).delete_node("node-b"))
        wait_for(lambda: stored_history(cluster) == {}, what="node deletion forgotten")
    finally:
        ext.stop()


def test_a_node_created_again_under_its_name_while_no_extender_ran_has_no_history(
    cluster: ControlPlane,
) -> None:
    """A node deleted and created again under the same name (an address reused by the cloud,
    a machine reinstalled) while no extender watched (a restart, a rollout) is a new machine
    with an empty image cache. Its predecessor's history once survived in the ConfigMap, and
    builds were sent to the new node for a cache it never had. The new node's
    ``creationTimestamp`` says which entries are older than it: they are forgotten, in
    memory and in the store; the other nodes' entries are kept."""
    from kubernetes_asyncio import client

    for n in ("node-a", "node-b"):
        cluster.create_node(n)
    repo, other = "https://github.com/x/old-machine", "https://github.com/x/kept"
    ext = extender(cluster)
    try:
        ext.call(lambda: ext.service.recorder.record(repo, "node-a"))
        ext.call(lambda: ext.service.recorder.record(other, "node-b"))
        wait_for(lambda: {repo, other} <= set(stored_history(cluster)), what="history stored")
    finally:
        ext.stop()
    time.sleep(1.1)  # creationTimestamp is in whole seconds: the new node's is after the build
    cluster.call(lambda api: client.CoreV1Api(api).delete_node("node-a", grace_period_seconds=0))
    cluster.create_node("node-a")
    ext2 = extender(cluster)
    try:
        history = lambda r: ext2.call(lambda: ext2.service.recorder.history.nodes_for(r, time.time()))  # noqa: E731
        wait_for(lambda: history(repo) == [], timeout=10, what="the old machine's history forgotten")
        wait_for(lambda: repo not in stored_history(cluster), timeout=10, what="forgotten in the store")
        assert history(other) == ["node-b"]
        assert stored_history(cluster)[other].keys() == {"node-b"}
        # a build on the new node counts as any other
        ext2.call(lambda: ext2.service.recorder.record(repo, "node-a"))
        wait_for(lambda: "node-a" in stored_history(cluster).get(repo, {}), what="a new build stored")
        assert history(repo) == ["node-a"]
    finally:
        ext2.stop()


def _bound_build(cp: ControlPlane, name: str, repo: str, node: str) -> None:
    pod = build_pod(name, repo)
    pod["spec"]["nodeName"] = node
    cp.create_pod(pod=pod)


def _finish(cp: ControlPlane, name: str) -> float:
    """Write the status a kubelet writes when build pod ``name``'s container ends now:
    phase Succeeded, the container terminated at this second. Returns that time."""
    from datetime import UTC, datetime

    from kubernetes_asyncio import client

    finished = float(int(time.time()))  # the API's times are whole seconds
    stamp = datetime.fromtimestamp(finished, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    async def go(api: Any) -> None:
        core = client.CoreV1Api(api)
        resp = await core.read_namespaced_pod(name, "default", _preload_content=False)
        body = json.loads(await resp.read())
        body["status"]["phase"] = "Succeeded"
        body["status"]["containerStatuses"] = [
            {
                "name": "main",
                "image": body["spec"]["containers"][0]["image"],
                "imageID": "",
                "ready": False,
                "restartCount": 0,
                "state": {"terminated": {"exitCode": 0, "startedAt": stamp, "finishedAt": stamp}},
            }
        ]
        await core.replace_namespaced_pod_status(name, "default", body)

    cp.call(go)
    return finished


def _stored_tombstones(cp: ControlPlane) -> dict[str, float]:
    from kubernetes_asyncio import client

    cm = cp.call(
        lambda api: client.CoreV1Api(api).read_namespaced_config_map(f"{HISTORY['name']}-0", "default")
    )
    return json.loads(cm.data["history.json"])["forgotten"]


@pytest.mark.parametrize("outage", ["watch", "restart"])
def test_a_build_end_seen_after_an_outage_is_dated_when_the_build_ended(
    cluster: ControlPlane, tmp_path, outage: str
) -> None:
    """While the extender does not watch (its API server connections cut, or the extender
    stopped), a build on node b1 ends, the image cleaner prunes b1 (``forget-node``: a
    tombstone at T), and another build on b1 ends. Seen after the outage, the first end is
    dated when it ended, before T, and is not recorded; the second, after T, is, at the
    time its container finished. (Dated when seen, the first outlived the tombstone: a
    cache the cleaner had removed; a pod first seen ended, after a restart, was not
    recorded at all.) A build pod deleted before T is dated by its deletion, and not
    recorded either."""
    cluster.create_node("b1")
    early, late, gone = (f"https://github.com/o/{n}" for n in ("early", "late", "gone"))
    for name, repo in (("early", early), ("late", late), ("gone", gone)):
        _bound_build(cluster, name, repo, "b1")
    if outage == "watch":
        ext, proxy = _extender_behind_freezing_proxy(cluster)
    else:
        ext, proxy = extender(cluster), None
    cfg = tmp_path / "cleaner.yaml"
    cfg.write_text(yaml.safe_dump({"history": {"name": HISTORY["name"]}}))

    def builds() -> int:
        return ext.call(lambda: int(ext.service.cache.table.builds[ext.service.cache.table.slot("b1")]))

    def nodes_for(repo: str) -> list[str]:
        return ext.call(lambda: ext.service.recorder.history.nodes_for(repo, time.time()))

    try:
        wait_for(lambda: builds() == 3, what="the three builds running on b1")
        if proxy is not None:
            proxy.cut()
        else:
            ext.stop()
        ended_early = _finish(cluster, "early")
        delete_pods(cluster, ["gone"])
        time.sleep(max(0.0, ended_early + 1.2 - time.time()))  # the next second has begun
        argv = ["forget-node", "b1", "--config", str(cfg), "--kubeconfig", str(cluster.kubeconfig)]
        assert cli_main(argv) == 0
        forgotten = _stored_tombstones(cluster)["b1"]
        assert ended_early < forgotten
        time.sleep(1.2)
        ended_late = _finish(cluster, "late")
        assert ended_late > forgotten
        time.sleep(1.5)  # seen well after it ended
        if proxy is not None:
            proxy.thaw()
        else:
            ext = extender(cluster)
        wait_for(lambda: late in stored_history(cluster), timeout=30, what="the later build recorded")
        wait_for(lambda: ext.call(lambda: ext.service.recorder.unstored) == 0, what="every end written")
        assert stored_history(cluster) == {late: {"b1": ended_late}}
        wait_for(
            lambda: nodes_for(early) == [] and nodes_for(gone) == [], what="the extender to see the forget"
        )
        assert nodes_for(late) == ["b1"]
    finally:
        ext.stop()
        if proxy is not None:
            proxy.close()


def test_of_two_extenders_sharing_the_history_only_the_one_placing_builds_writes_it(
    cluster: ControlPlane,
) -> None:
    """The operator guide's two extenders, for builds and for user pods, share the build
    history ConfigMap. A build end is written once, by the build extender; the user-pod
    extender (``pods.manage: component=singleuser-server``) records nothing and writes
    nothing, node deletions included, and reads what the other writes."""
    from kubernetes_asyncio import client

    from stickypack.testing.live_fidelity import USER_EXTENDER_SCORE

    for n in ("b1", "b2"):
        cluster.create_node(n)
    builds = extender(cluster)
    users = extender(
        cluster,
        profile="stickypack",
        score=list(USER_EXTENDER_SCORE),
        pods={"manage": "component=singleuser-server"},
    )
    repo = "https://github.com/o/once"
    name = f"{HISTORY['name']}-0"
    try:
        since = cluster.call(lambda api: client.CoreV1Api(api).list_namespaced_config_map("default"))
        _bound_build(cluster, "b", repo, "b1")
        for ext in (builds, users):
            wait_for(
                lambda ext=ext: ext.call(lambda: ext.service.cache.placement("default/b")) is not None,
                what="the build pod in both caches",
            )
        delete_pods(cluster, ["b"])
        wait_for(lambda: repo in stored_history(cluster), what="the build end stored")
        wait_for(
            lambda: users.call(lambda: users.service.recorder.history.nodes_for(repo, time.time())) == ["b1"],
            what="the user-pod extender to read it",
        )
        cluster.call(lambda api: client.CoreV1Api(api).delete_node("b1"))
        wait_for(lambda: repo not in stored_history(cluster), what="b1 forgotten: its only entry")
        stores = {ext: ext.call(lambda ext=ext: ext.service.recorder.store) for ext in (builds, users)}
        wait_for(
            lambda: builds.call(lambda: builds.service.recorder.unstored == 0 and stores[builds].writes == 2),
            what="the build extender's second write counted",
        )
        # the user-pod extender has seen b1 deleted (its handler forgets the node as it drops
        # it from the table): a write of its own would now be counted, under way or queued
        wait_for(
            lambda: users.call(lambda: "b1" not in users.service.cache.table),
            what="the user-pod extender to see b1 deleted",
        )
        assert (stores[builds].writes, stores[users].writes, stores[users].conflicts) == (2, 0, 0)
        assert users.call(lambda: users.service.recorder.unstored) == 0

        async def writes(api: Any) -> list[str]:
            w = watch.Watch()
            kinds = []
            async for event in w.stream(
                client.CoreV1Api(api).list_namespaced_config_map, "default",
                field_selector=f"metadata.name={name}", resource_version=since.metadata.resource_version,
                timeout_seconds=1,
            ):  # fmt: skip
                kinds.append(event["type"])
            return kinds

        from kubernetes_asyncio import watch

        assert cluster.call(writes) == ["ADDED", "MODIFIED"]  # the build end, then b1 forgotten
    finally:
        builds.stop()
        users.stop()


def test_an_extender_reads_only_its_own_history_configmaps(cluster: ControlPlane) -> None:
    """Histories may share a namespace (``history.name`` ``binder`` and ``binder-staging``),
    and a ConfigMap may be left from a configuration with more ``shards``: the extender reads
    only its own parts, ``<name>-0`` .. ``<name>-<shards - 1>``, at start and as they change,
    as its first read of the store does. (It read ``<name>-staging-0`` as a part ``staging-0``
    of its own, and ``<name>-1`` with one shard (part 1, one past its last), merging their
    builds into its history.)"""
    from stickypack.kube.history import ConfigMapHistoryStore, Limits, Record, apply_ops

    own_name = HISTORY["name"]

    def write(name: str, part: str, repo: str) -> None:
        async def go(api: Any) -> None:
            store = ConfigMapHistoryStore(api, "default", name=name, shards=8)
            doc, version = await store.read(part)
            now = time.time()
            await store.write(part, apply_ops(doc, [Record(repo, "n1", now)], Limits(), now), version)

        cluster.call(go)

    staging, old_shard = "https://github.com/o/staging", "https://github.com/o/old-shard"
    write(f"{own_name}-staging", "0", staging)
    write(own_name, "1", old_shard)
    ext = extender(cluster)  # one shard: its only part is <name>-0
    try:
        history = lambda repo: ext.call(  # noqa: E731
            lambda: ext.service.recorder.history.nodes_for(repo, time.time())
        )
        assert history(staging) == [] and history(old_shard) == []
        # written again while it watches, then its own part: read in the order written
        write(f"{own_name}-staging", "0", staging + "-2")
        write(own_name, "1", old_shard + "-2")
        write(own_name, "0", "https://github.com/o/own")
        wait_for(lambda: history("https://github.com/o/own") == ["n1"], what="its own part read")
        for repo in (staging, old_shard, staging + "-2", old_shard + "-2"):
            assert history(repo) == [], repo
    finally:
        ext.stop()


def test_node_annotation_store_round_trip(cluster: ControlPlane) -> None:
    for n in ("node-a", "node-b"):
        cluster.create_node(n)
    repo = "https://github.com/x/annotated"
    ext = extender(cluster, history={"store": "node-annotations", "flush_interval_s": 0.05})
    try:
        ext.call(lambda: ext.service.recorder.record(repo, "node-b"))

        def annotated() -> bool:
            nodes = {n["metadata"]["name"]: n for n in cluster.nodes()}
            return repo in (nodes["node-b"]["metadata"].get("annotations") or {}).get(
                "stickypack.io/build-history", ""
            )

        wait_for(annotated, what="the node annotation")
    finally:
        ext.stop()
    ext2 = extender(cluster, history={"store": "node-annotations"})
    try:
        assert ext2.call(lambda: ext2.service.recorder.history.nodes_for(repo, time.time())) == ["node-b"]
    finally:
        ext2.stop()


def test_a_node_history_annotation_damaged_by_hand_keeps_the_last_good_copy(cluster: ControlPlane) -> None:
    """As with the ConfigMap: an annotation edited into something unreadable once read as
    an empty history, wiping the node's entries from memory and, with the next build there,
    from the store."""
    from kubernetes_asyncio import client

    cluster.create_node("node-a")
    first, second = "https://github.com/x/first", "https://github.com/x/second"
    ext = extender(cluster, history={"store": "node-annotations", "flush_interval_s": 0.05})
    history = lambda r: ext.call(lambda: ext.service.recorder.history.nodes_for(r, time.time()))  # noqa: E731

    def stored() -> str:
        (node,) = [n for n in cluster.nodes() if n["metadata"]["name"] == "node-a"]
        return (node["metadata"].get("annotations") or {}).get("stickypack.io/build-history", "")

    try:
        ext.call(lambda: ext.service.recorder.record(first, "node-a"))
        wait_for(lambda: first in stored(), what="the first write")
        for garbage in ("{not json", "[1, 2]", ""):
            patch = {"metadata": {"annotations": {"stickypack.io/build-history": garbage}}}
            node = cluster.call(lambda api, p=patch: client.CoreV1Api(api).patch_node("node-a", p))
            version = node.metadata.resource_version
            wait_for(  # the watch has delivered the damaged annotation...
                lambda v=version: ext.call(lambda: ext.service.recorder._docs["node-a"][1]) == v,
                what="the damaged annotation to arrive",
            )
            assert history(first) == ["node-a"], garbage  # ...and the memory kept the entry
        ext.call(lambda: ext.service.recorder.record(second, "node-a"))
        wait_for(lambda: first in stored() and second in stored(), what="the store repaired")
    finally:
        ext.stop()


def _configmap_call(cluster: ControlPlane, verb: str, body: Any = None) -> Any:
    from kubernetes_asyncio import client

    name = f"{HISTORY['name']}-0"

    async def go(api: Any) -> Any:
        core = client.CoreV1Api(api)
        if verb == "delete":
            return await core.delete_namespaced_config_map(name, "default")
        cm = await core.read_namespaced_config_map(name, "default")
        cm.data = body
        return await core.replace_namespaced_config_map(name, "default", cm)

    return cluster.call(go)


def test_history_configmap_damaged_or_deleted_by_hand(cluster: ControlPlane) -> None:
    """Edited into garbage: the extender keeps its copy and the next write repairs the
    store. Deleted: that is a reset; the next build creates the ConfigMap anew."""
    ext = extender(cluster)
    memory = lambda: ext.call(lambda: {repo for repo, _ in ext.service.recorder.history.items()})  # noqa: E731
    try:
        ext.call(lambda: ext.service.recorder.record("https://github.com/o/a", "node-1"))
        wait_for(lambda: "https://github.com/o/a" in stored_history(cluster), what="first write")
        for garbage in (
            {"history.json": "{not json"},
            {"history.json": "[1, 2]"},
            {"other": "x"},
            {"history.json": ""},
            {"history.json": '{"version": 1, "repos": ["https://github.com/o/a"]}'},
        ):
            replaced = _configmap_call(cluster, "replace", garbage)
            version = replaced.metadata.resource_version
            wait_for(  # the watch has delivered the damaged document...
                lambda v=version: ext.call(lambda: ext.service.recorder._docs["0"][1]) == v,
                what="the damaged document to arrive",
            )
            assert "https://github.com/o/a" in memory(), garbage  # ...and the memory kept the entry
        ext.call(lambda: ext.service.recorder.record("https://github.com/o/b", "node-2"))
        wait_for(
            lambda: {"https://github.com/o/a", "https://github.com/o/b"} <= set(stored_history(cluster)),
            what="the store repaired with the kept copy",
        )
        _configmap_call(cluster, "delete")
        wait_for(lambda: not memory(), what="the deletion seen as a reset")
        ext.call(lambda: ext.service.recorder.record("https://github.com/o/c", "node-3"))
        wait_for(lambda: set(stored_history(cluster)) == {"https://github.com/o/c"}, what="a new ConfigMap")
        assert ext.call(lambda: ext.service.recorder.flush_errors) == 0
    finally:
        ext.stop()


def _user_session(name: str, cpu: str, node: str | None = None, gpus: int = 0) -> dict:
    """A z2jh user pod for the ``stickypack`` scheduler: ``cpu`` and 1Gi requested,
    ``gpus`` NVIDIA GPUs (request and limit), bound to ``node`` when given."""
    pod = pod_manifest(
        name, cpu=cpu, memory="1Gi", scheduler_name="stickypack", labels={"component": "singleuser-server"}
    )
    if gpus:
        resources = pod["spec"]["containers"][0]["resources"]
        resources["requests"]["nvidia.com/gpu"] = str(gpus)
        resources["limits"] = {"nvidia.com/gpu": str(gpus)}  # extended resources: limit = request
    if node:
        pod["spec"]["nodeName"] = node
    return pod


def _bound_alone_and_with_user_pod_extender(
    cluster: ControlPlane,
    tmp_path: Path,
    make_pod: Callable[[str], dict],
    score: list[str],
    config: dict[str, Any] | None = None,
) -> tuple[str, str]:
    """Where kube-scheduler, run with the rendered ``stickypack`` profile, binds a pod of
    ``make_pod(name)``: alone ("control", deleted afterwards), then with an extender running
    ``score`` for user pods (``component=singleuser-server``) at weight 61, as the operator
    guide's user-pod deployment ("new"); ``config``: more of the extender's configuration."""
    plain = tmp_path / "plain.yaml"
    assert cli_main(["render", "scheduler-config", "--profiles", "stickypack", "-o", str(plain)]) == 0
    cluster.start_scheduler(plain)
    cluster.create_pod(pod=make_pod("control"))
    alone = cluster.wait_bound(["control"])["control"]
    cluster.stop_schedulers()
    delete_pods(cluster, ["control"])
    ext = extender(
        cluster,
        profile="stickypack",
        score=score,
        pods={"manage": "component=singleuser-server"},
        **(config or {}),
    )
    try:
        out = tmp_path / "user.yaml"
        args = ["render", "scheduler-config", "--profiles", "stickypack", "-o", str(out)]
        assert cli_main([*args, "--extender-url", ext.url, "--extender-weight", "61"]) == 0
        cluster.start_scheduler(out)
        cluster.create_pod(pod=make_pod("new"))
        return alone, cluster.wait_bound(["new"])["new"]
    finally:
        ext.stop()


def test_user_pod_extender_drain_forecast_outweighs_packing(cluster: ControlPlane, tmp_path) -> None:
    """The operator guide's user-pod deployment: the rendered ``stickypack`` profile with a
    second extender running ``DrainForecast`` at the policy's balance (weight 121 x 4 / 8).
    Node "full" holds one big session, node "many" three small ones, all just started: the
    packing score prefers "full" (more allocated), the forecast "many" (three sessions are
    less likely all to end within the hour than one). Without the extender the new session
    goes to "full"; with it, to "many", so the forecast reached kube-scheduler from the
    pods' creation times in the watch."""
    for n in ("full", "many"):
        cluster.create_node(n, cpu="8", memory="32Gi")
    cluster.create_pods(
        [_user_session("big", "6", "full"), *(_user_session(f"small-{i}", "500m", "many") for i in range(3))]
    )
    placed = _bound_alone_and_with_user_pod_extender(
        cluster, tmp_path, lambda name: _user_session(name, "500m"), ["DrainForecast"]
    )
    assert placed == ("full", "many")


def test_user_pod_extender_weighs_gpu_nodes_by_their_gpus(cluster: ControlPlane, tmp_path) -> None:
    """GPU nodes through the live extender: node "cpu-full" has most of its cpu taken by a
    pod using none of its four GPUs, node "gpus-busy" two GPUs in use and little cpu. The
    rendered packing profile alone sends a new one-GPU notebook to "cpu-full" (more cpu
    allocated); the extender's ScaleDownAware, which weighs a GPU node by its GPUs as the
    autoscaler does, sees "cpu-full" as a node the autoscaler would remove once it empties
    (1 of 4 GPUs with the notebook) and "gpus-busy" as busy (3 of 4), so the notebook goes
    there: the GPUs reached the extender's table from the watch, nodes and pods."""
    for n in ("cpu-full", "gpus-busy"):
        cluster.create_node(n, cpu="8", memory="32Gi", extended={"nvidia.com/gpu": "4"})
    cluster.create_pods(
        [
            _user_session("cpu-heavy", "6", "cpu-full"),
            _user_session("gpu-pair", "1", "gpus-busy", gpus=2),
        ]
    )
    placed = _bound_alone_and_with_user_pod_extender(
        cluster, tmp_path, lambda name: _user_session(name, "500m", gpus=1), ["ScaleDownAware"]
    )
    assert placed == ("cpu-full", "gpus-busy")


def test_user_pod_extender_takes_a_gpu_labelled_node_without_gpus_as_unused(
    cluster: ControlPlane, tmp_path
) -> None:
    """A node GKE labels as a GPU node whose GPUs are not allocatable yet (its device plugin
    not up) is one the autoscaler takes as unused, whatever its cpu. Node "booting" carries
    ``cloud.google.com/gke-accelerator`` and 6 of 8 cpus taken, node "plain" 5 of 8: the
    rendered packing profile alone sends a new notebook to "booting" (more allocated); the
    extender's ScaleDownAware, with its default ``cluster.gpu_labels``, scores "booting" 0,
    so the notebook goes to "plain": the label reached its table from the watch."""
    cluster.create_node(
        "booting", cpu="8", memory="32Gi", labels={"cloud.google.com/gke-accelerator": "nvidia-l4"}
    )
    cluster.create_node("plain", cpu="8", memory="32Gi")
    cluster.create_pods([_user_session("six", "6", "booting"), _user_session("five", "5", "plain")])
    placed = _bound_alone_and_with_user_pod_extender(
        cluster, tmp_path, lambda name: _user_session(name, "500m"), ["ScaleDownAware"]
    )
    assert placed == ("booting", "plain")


def test_user_pod_extender_leaves_daemonset_pods_out_as_the_autoscaler_is_told_to(
    cluster: ControlPlane, tmp_path
) -> None:
    """``cluster.ignore_daemonsets_utilization``, as the autoscaler's flag: node "agents"
    holds a DaemonSet pod of 3 cpus and a session of 1.5, node "plain" a session of 4 (8
    cpus each). The packing profile alone sends a new 500m session to "agents" (4.5 cpus
    allocated against 4); the extender's ScaleDownAware, told the autoscaler leaves
    DaemonSet pods out, sees "agents" at (1.5 + 0.5) / (8 - 3) = 0.4, under the threshold
    (a node the autoscaler would remove once its bare pods end) and "plain" at 4.5 / 8, so
    the session goes to "plain": the pod's owner reference reached the extender's table."""
    cluster.create_node("agents", cpu="8", memory="32Gi")
    cluster.create_node("plain", cpu="8", memory="32Gi")
    agent = pod_manifest("log-agent", cpu="3", memory="1Gi")
    agent["metadata"]["ownerReferences"] = [
        {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "log-agent", "uid": "0", "controller": True}
    ]
    agent["spec"]["nodeName"] = "agents"
    cluster.create_pods([agent, _user_session("one", "1500m", "agents"), _user_session("four", "4", "plain")])
    placed = _bound_alone_and_with_user_pod_extender(
        cluster,
        tmp_path,
        lambda name: _user_session(name, "500m"),
        ["ScaleDownAware"],
        {"cluster": {"ignore_daemonsets_utilization": True}},
    )
    assert placed == ("agents", "plain")


def test_user_pod_extender_packs_onto_a_node_its_group_keeps(cluster: ControlPlane, tmp_path) -> None:
    """``cluster.node_group_min_sizes``: node "core", alone in its GKE node pool ``core``,
    holds a session of 3 cpus and 14Gi (under the threshold: 0.47 with a new one), node
    "other", of pool ``user``, one of 17Gi (busy: 0.56). The packing profile alone sends a
    new session to "core" (more allocated); the extender's ScaleDownAware keeps it off
    "core" as a node the autoscaler would remove; told that pool ``core`` has a minimum size
    of 1, so the autoscaler never removes "core", it scores "core" as busy and the session
    packs onto it: the node's pool label reached the extender's table from the watch."""
    pool = "cloud.google.com/gke-nodepool"
    cluster.create_node("core", cpu="8", memory="32Gi", labels={pool: "core"})
    cluster.create_node("other", cpu="8", memory="32Gi", labels={pool: "user"})
    held = []
    for name, node, cpu, memory in (("heavy", "core", "3", "14Gi"), ("wide", "other", "500m", "17Gi")):
        manifest = pod_manifest(name, cpu=cpu, memory=memory)
        manifest["spec"]["nodeName"] = node
        held.append(manifest)
    cluster.create_pods(held)
    placed = _bound_alone_and_with_user_pod_extender(
        cluster, tmp_path, lambda name: _user_session(name, "500m"), ["ScaleDownAware"]
    )
    assert placed == ("core", "other")
    cluster.stop_schedulers()
    delete_pods(cluster, ["new"])
    placed = _bound_alone_and_with_user_pod_extender(
        cluster,
        tmp_path,
        lambda name: _user_session(name, "500m"),
        ["ScaleDownAware"],
        {"cluster": {"node_group_min_sizes": {"core": 1}}},
    )
    assert placed == ("core", "core")


def test_user_pod_extender_packs_onto_a_node_whose_dra_devices_are_busy(
    cluster: ControlPlane, tmp_path
) -> None:
    """``cluster.dra``, as the autoscaler's ``--enable-dynamic-resource-allocation``: node
    "devices" publishes 4 devices in a ResourceSlice, 3 of them allocated to the claim of a
    bare pod of 1 cpu (8 cpus: quiet by cpu, busy by its pool, 0.75), node "plain" holds a
    session of 3 cpus (quiet: 0.44 with a new one). The packing profile alone sends a new
    session to "plain" (more allocated), and so does the extender's ScaleDownAware without
    ``cluster.dra``, which takes "devices" for a node the autoscaler would remove; with it,
    "devices" is busy to the autoscaler, as to the extender, and the session packs onto it:
    the slice, the claim's allocation and the pod's claim reached the extender's table
    through its watches."""
    cluster.create_node("devices", cpu="8", memory="32Gi")
    cluster.create_node("plain", cpu="8", memory="32Gi")
    cluster.create_device_pool("devices", 4)
    try:
        cluster.create_claim("gpus", 3)
        cluster.allocate_claim("gpus", "devices", ["dev-0", "dev-1", "dev-2"])
        bare = pod_manifest("trainer", cpu="1", memory="1Gi")
        bare["spec"]["nodeName"] = "devices"
        bare["spec"]["resourceClaims"] = [{"name": "gpus", "resourceClaimName": "gpus"}]
        cluster.create_pods([bare, _user_session("three", "3", "plain")])
        user = lambda name: _user_session(name, "500m")  # noqa: E731
        assert _bound_alone_and_with_user_pod_extender(cluster, tmp_path, user, ["ScaleDownAware"]) == (
            "plain",
            "plain",
        )
        cluster.stop_schedulers()
        delete_pods(cluster, ["new"])
        placed = _bound_alone_and_with_user_pod_extender(
            cluster, tmp_path, user, ["ScaleDownAware"], {"cluster": {"dra": True}}
        )
        assert placed == ("plain", "devices")
    finally:
        cluster.delete_all_dra()


#: The RBAC rule that lets an extender with ``cluster.dra`` list and watch the DRA objects.
DRA_LIST_WATCH = {
    "apiGroups": ["resource.k8s.io"],
    "resources": ["resourceslices", "resourceclaims"],
    "verbs": ["list", "watch"],
}


def _dra_active(url: str) -> float:
    families = {f.name: f for f in text_string_to_metric_families(httpx.get(f"{url}/metrics").text)}
    return families["stickypack_extender_dra_active"].samples[0].value


def _dra_refusals(url: str) -> dict[str, float]:
    families = {f.name: f for f in text_string_to_metric_families(httpx.get(f"{url}/metrics").text)}
    samples = families["stickypack_extender_dra_list_refusals"].samples
    return {s.labels["kind"]: s.value for s in samples if s.name.endswith("_total")}


def _wait_dra_active(ext: ServiceThread, value: float, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while _dra_active(ext.url) != value:
        assert time.monotonic() < deadline, f"stickypack_extender_dra_active never {value}"
        time.sleep(0.1)


def test_an_extender_that_may_not_list_dra_objects_runs_without_dra_until_it_may(
    cluster: ControlPlane, caplog: pytest.LogCaptureFixture
) -> None:
    """``cluster.dra`` with an account that may list and watch nodes and pods but not
    ResourceSlices: the extender becomes ready, says so once in its log and in
    ``stickypack_extender_dra_active`` (0), and its decisions weigh nodes without DRA. Given
    the right while running, it finds out within ``cluster.dra_retry_s``, says so once, and
    weighs nodes by their devices (1) without leaving ``/readyz``; the right taken away
    again, its next watch is refused and it goes back to cpu and memory (0); given back,
    to DRA (1): no restart."""
    account = "extender-no-dra"
    cluster.create_node("n1", cpu="8", memory="32Gi")
    base = [{"apiGroups": [""], "resources": ["nodes", "pods"], "verbs": ["list", "watch"]}]
    with_dra = [*base, DRA_LIST_WATCH]
    cluster.grant_cluster_rules(account, base)
    try:
        kubeconfig = cluster.service_account_kubeconfig(account)
        cfg = config_from_dict(
            {
                "history": {"store": "memory"},
                "cluster": {
                    "kubeconfig": str(kubeconfig),
                    "dra": True,
                    "dra_retry_s": 0.3,
                    "watch_timeout_s": 1,
                },
            }
        )
        with ServiceThread(cfg) as ext:
            assert ext.service is not None and ext.service.dra_listed is False
            decides_with_dra = lambda: ext.call(lambda: ext.service.extender._ctx().dra)  # noqa: E731
            assert _dra_active(ext.url) == 0.0 and decides_with_dra() is False
            assert httpx.get(f"{ext.url}/readyz").status_code == 200
            assert _dra_refusals(ext.url)["resourceslices"] >= 1
            assert _dra_refusals(ext.url)["resourceclaims"] == 0  # not tried past the first refusal
            # refused again at two more retries (each counted once its log line is written or
            # skipped): said once
            wait_for(lambda: _dra_refusals(ext.url)["resourceslices"] >= 3, what="two more refusals")
            said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("cluster.dra:")]
            assert len(said) == 1 and "resourceslices cannot be listed (HTTP 403" in said[0], said

            cluster.set_cluster_rules(account, with_dra)
            deadline = time.monotonic() + 30
            while _dra_active(ext.url) != 1.0:
                assert httpx.get(f"{ext.url}/readyz").status_code == 200  # never out of its Service
                assert time.monotonic() < deadline, "DRA never active"
                time.sleep(0.05)
            assert decides_with_dra() is True
            said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("cluster.dra:")]
            assert len(said) == 2 and "can be listed now" in said[1], said

            cluster.set_cluster_rules(account, base)
            _wait_dra_active(ext, 0.0)  # the watches renew every second: refused
            assert decides_with_dra() is False
            assert httpx.get(f"{ext.url}/readyz").status_code == 200
            cluster.set_cluster_rules(account, with_dra)
            _wait_dra_active(ext, 1.0)
            assert decides_with_dra() is True
    finally:
        cluster.revoke_cluster_rules(account)
    # an account that may: active once its DRA informers have filled the readings
    cfg = config_from_dict(
        {"history": {"store": "memory"}, "cluster": {"kubeconfig": str(cluster.kubeconfig), "dra": True}}
    )
    with ServiceThread(cfg) as ext:
        _wait_dra_active(ext, 1.0, 20.0)
        assert ext.call(lambda: all(ext.service.informers[k].synced.is_set() for k in DRA_KINDS))


async def test_ready_once_every_watch_has_listed_and_dra_active_once_its_watches_have(
    cluster: ControlPlane,
) -> None:
    """Checked turn by turn of the service's own event loop, so that nothing runs between an
    answer and its check: ``cluster.dra`` is active only once the ResourceSlice and
    ResourceClaim informers have listed (before that a node's devices are not known), and the
    service is ready only once every informer, the DRA ones included, has. A client passed in
    is the caller's: still open after ``stop()``. Its gauges count the nodes with DRA pools
    (n1, n2, n3) and, of those, the ones the autoscaler cannot weigh (n1: a pod there has a
    claim that does not exist)."""
    from kubernetes_asyncio import client

    for node in ("n1", "n2", "n3"):
        cluster.create_node(node)
        cluster.create_device_pool(node, 2)
    unweighable = pod_manifest("trainer", cpu="1", memory="1Gi")
    unweighable["spec"]["nodeName"] = "n1"
    unweighable["spec"]["resourceClaims"] = [{"name": "gpus", "resourceClaimName": "missing"}]
    cluster.create_pods([unweighable])
    cfg = config_from_dict({"history": {"store": "memory"}, "cluster": {"dra": True}})
    api = client.ApiClient(configuration=cluster.client_configuration())
    service = ExtenderService(cfg, api)
    await service.start()
    try:
        deadline = time.monotonic() + 30
        while service.not_ready():
            dra = [service.informers.get(kind) for kind in DRA_KINDS]
            assert service.dra_active() is all(inf is not None and inf.synced.is_set() for inf in dra)
            assert time.monotonic() < deadline, service.not_ready()
            await asyncio.sleep(0)
        assert set(DRA_KINDS) <= set(service.informers)
        assert all(inf.synced.is_set() for inf in service.informers.values())
        assert service.dra_active() is True
        gauge = lambda name: service.metrics.registry.get_sample_value(f"stickypack_extender_{name}")  # noqa: E731
        assert (gauge("dra_nodes"), gauge("dra_unweighable_nodes")) == (3.0, 1.0)
    finally:
        await service.stop()
        cluster.delete_all_dra()
    nodes = await client.CoreV1Api(api).list_node()
    assert sorted(n.metadata.name for n in nodes.items) == ["n1", "n2", "n3"]
    await api.close()


async def test_an_extender_that_may_not_read_its_history_is_not_ready_until_it_may(
    cluster: ControlPlane, caplog: pytest.LogCaptureFixture
) -> None:
    """An account that may watch the history ConfigMaps but not read one (``get``): the
    extender retries the read (0.2 s, doubling, at most 30 s) and is not ready meanwhile,
    whatever its watches have listed; given the right, ready at its next retry. Then, with
    ``cluster.dra`` refused at start and given later, it stays ready turn by turn while its
    DRA watches list (it was ready already: not taken out of its Service for them)."""
    account = "extender-no-history-get"
    watch_rules = [
        {"apiGroups": [""], "resources": ["nodes", "pods", "configmaps"], "verbs": ["list", "watch"]}
    ]
    with_get = [*watch_rules, {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]
    with_dra = [*with_get, DRA_LIST_WATCH]
    cluster.grant_cluster_rules(account, watch_rules)
    try:
        kubeconfig = cluster.service_account_kubeconfig(account)
        cfg = config_from_dict(
            {
                "history": {"name": HISTORY["name"]},
                "cluster": {"kubeconfig": str(kubeconfig), "dra": True, "dra_retry_s": 0.3},
            }
        )
        service = ExtenderService(cfg)
        await service.start()
        try:
            deadline = time.monotonic() + 30

            def refused_reads() -> int:
                said = "build history: cannot read the store"
                return sum(1 for r in caplog.records if r.getMessage().startswith(said))

            while refused_reads() < 2 or not all(i.synced.is_set() for i in service.informers.values()):
                assert time.monotonic() < deadline, (refused_reads(), service.not_ready())
                await asyncio.sleep(0.05)
            assert service.not_ready() == ["build history not loaded"]
            cluster.set_cluster_rules(account, with_get)
            # retried 0.4 s after the second refusal, or 0.8 s after a third
            given = time.monotonic()
            while service.not_ready():
                assert time.monotonic() - given < 10, service.not_ready()
                await asyncio.sleep(0.05)
            assert service.dra_listed is False and service.dra_active() is False
            cluster.set_cluster_rules(account, with_dra)
            given = time.monotonic()
            while not service.dra_active():
                assert service.not_ready() == []
                assert time.monotonic() - given < 30, "DRA never active"
                await asyncio.sleep(0)
        finally:
            await service.stop()
    finally:
        cluster.revoke_cluster_rules(account)


def test_dra_watches_that_cannot_start_leave_the_extender_ready_without_dra(
    cluster: ControlPlane, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """An unforeseen failure starting the DRA informers (here: their constructor raises)
    must not keep ``/readyz`` at 503 for good: the extender logs it and runs without DRA."""
    import stickypack.extender.server as server

    real = server.Informer

    def informer(name: str, *args: Any, **kwargs: Any) -> Any:
        if name in DRA_KINDS:
            raise RuntimeError("no informer for you")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(server, "Informer", informer)
    cfg = config_from_dict(
        {"history": {"store": "memory"}, "cluster": {"kubeconfig": str(cluster.kubeconfig), "dra": True}}
    )
    with ServiceThread(cfg) as ext:
        assert httpx.get(f"{ext.url}/readyz").status_code == 200
        assert ext.service is not None and ext.service.dra_listed is False
        assert _dra_active(ext.url) == 0.0
    assert any("the DRA watches could not start" in r.getMessage() for r in caplog.records)


class _FreezingProxy:
    """A TCP relay to ``target`` on a free loopback port. :meth:`freeze` makes every open
    connection go silent for good (a dead API server instance or a partition: no RST, no
    FIN) and holds new ones unanswered; :meth:`cut` closes them all and every new one at
    once (an outage the client sees); :meth:`thaw` relays new connections again."""

    def __init__(self, target: tuple[str, int]) -> None:
        import socket
        import threading

        self.target = target
        self.swallowed = 0  # bytes clients sent into dead connections (read, never relayed)
        self.server = socket.socket()
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(64)
        self.port = self.server.getsockname()[1]
        self.frozen = False
        self.refusing = False
        self.dead: set[int] = set()  # ids of connection pairs that never relay again
        self.socks: list[socket.socket] = []
        self.closed = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        import socket
        import threading

        self.server.settimeout(0.1)
        while not self.closed.is_set():
            try:
                conn = self.server.accept()[0]
            except OSError:
                continue
            if self.refusing:
                conn.close()
                continue
            self.socks.append(conn)
            if self.frozen:
                self.dead.add(id(conn))
                threading.Thread(target=self._relay, args=(conn, None, id(conn), True), daemon=True).start()
                continue
            up = socket.create_connection(self.target)
            self.socks.append(up)
            for a, b, from_client in ((conn, up, True), (up, conn, False)):
                threading.Thread(target=self._relay, args=(a, b, id(conn), from_client), daemon=True).start()

    def _relay(self, src: Any, dst: Any, key: int, from_client: bool) -> None:
        """Relay ``src`` to ``dst`` while the connection lives; once it is dead, read what
        ``src`` sends and drop it (a client's bytes counted in :attr:`swallowed`). ``dst``
        None: born dead. A socket closed before this thread starts (:meth:`close`) ends it."""
        try:
            src.settimeout(0.1)
        except OSError:
            return
        while not self.closed.is_set():
            try:
                data = src.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                return
            if not data:
                return
            if key in self.dead or dst is None:
                if from_client:
                    self.swallowed += len(data)  # no answer, no reset: lost
                continue
            with contextlib.suppress(OSError):
                dst.sendall(data)

    def freeze(self) -> None:
        self.frozen = True
        self.dead.update(id(s) for s in self.socks)

    def cut(self) -> None:
        self.refusing = True
        for sock in self.socks:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        self.socks.clear()

    def thaw(self) -> None:
        self.frozen = False
        self.refusing = False

    def close(self) -> None:
        self.closed.set()
        for s in [self.server, *self.socks]:
            with contextlib.suppress(OSError):
                s.close()


def _extender_behind_freezing_proxy(cluster: ControlPlane) -> tuple[ServiceThread, _FreezingProxy]:
    """An extender (history flushed every 50 ms) whose API server connections go through a
    :class:`_FreezingProxy`, started."""
    from urllib.parse import urlsplit

    assert cluster.server is not None
    target = urlsplit(cluster.server)
    proxy = _FreezingProxy((target.hostname or "127.0.0.1", target.port or 443))
    api = cluster.client_configuration()
    api.host = f"https://127.0.0.1:{proxy.port}"
    cfg = config_from_dict({"history": {"flush_interval_s": 0.05, "name": HISTORY["name"]}})
    return ServiceThread(cfg, api).start(), proxy


async def test_dra_objects_are_listed_soon_after_an_api_server_outage_at_start(
    cluster: ControlPlane, caplog: pytest.LogCaptureFixture
) -> None:
    """``cluster.dra`` while the API server cannot be reached at start (every connection
    closed at once): the extender retries the DRA lists 0.2 s, 0.4 s, 0.8 s... apart (at most
    30 s), so with the server back after the first two failures it lists them and watches
    them within a second or so, not after a long wait."""
    from urllib.parse import urlsplit

    from kubernetes_asyncio import client

    assert cluster.server is not None
    target = urlsplit(cluster.server)
    proxy = _FreezingProxy((target.hostname or "127.0.0.1", target.port or 443))
    proxy.cut()
    api_configuration = cluster.client_configuration()
    api_configuration.host = f"https://127.0.0.1:{proxy.port}"
    api = client.ApiClient(configuration=api_configuration)
    cfg = config_from_dict({"history": {"store": "memory"}, "cluster": {"dra": True}})
    service = ExtenderService(cfg, api)
    await service.start()
    try:

        def failed_lists() -> int:
            said = "cluster.dra: cannot list the DRA objects"
            return sum(1 for r in caplog.records if r.getMessage().startswith(said))

        deadline = time.monotonic() + 30
        while failed_lists() < 2:
            assert time.monotonic() < deadline, "the DRA lists never failed twice"
            await asyncio.sleep(0.02)
        assert service.dra_listed is None
        proxy.thaw()
        back = time.monotonic()
        while service.dra_listed is None:
            assert time.monotonic() - back < 10, failed_lists()
            await asyncio.sleep(0.05)
        assert service.dra_listed is True
    finally:
        await service.stop()
        await api.close()
        proxy.close()


def test_a_history_write_into_a_dead_connection_times_out_and_is_retried(
    cluster: ControlPlane, monkeypatch
) -> None:
    """The API server stops answering mid-write and never resets the connection (its
    instance died, a partition): the write must time out and be retried on a new
    connection, not wait forever while every later build end piles up unwritten."""
    from stickypack.kube import history

    monkeypatch.setattr(history, "STORE_REQUEST_TIMEOUT_S", 2.0)
    ext, proxy = _extender_behind_freezing_proxy(cluster)
    first, later = "https://github.com/o/before-freeze", "https://github.com/o/during-freeze"
    try:
        ext.call(lambda: ext.service.recorder.record(first, "node-a"))
        wait_for(lambda: first in stored_history(cluster), what="the first write")
        proxy.freeze()
        ext.call(lambda: ext.service.recorder.record(later, "node-a"))
        # the write sent into a connection that will never answer (a watch sends nothing
        # more until its own timeout, minutes away), and only then the API server back
        wait_for(lambda: proxy.swallowed > 0, what="the write sent into the dead connection")
        proxy.thaw()
        wait_for(lambda: later in stored_history(cluster), timeout=20, what="the write retried")
    finally:
        ext.stop()
        proxy.close()


def test_pending_history_ops_count_the_write_under_way(cluster: ControlPlane) -> None:
    """``history_pending_ops`` is "operations not yet stored": a build end whose write is
    waiting for an API server that does not answer is one of them."""
    ext, proxy = _extender_behind_freezing_proxy(cluster)
    repo = "https://github.com/o/unanswered"

    def pending() -> float:
        text = httpx.get(ext.url + "/metrics", timeout=5).text
        samples = {s.name: s.value for f in text_string_to_metric_families(text) for s in f.samples}
        return samples["stickypack_extender_history_pending_ops"]

    try:
        proxy.freeze()
        ext.call(lambda: ext.service.recorder.record(repo, "node-a"))
        wait_for(lambda: ext.call(lambda: bool(ext.service.recorder._inflight)), what="the write under way")
        assert pending() == 1.0
        assert repo not in stored_history(cluster)
    finally:
        proxy.thaw()
        ext.stop()
        proxy.close()


@pytest.mark.parametrize("host", ["0.0.0.0:8888", "http://0.0.0.0", "not a host"])
def test_check_refuses_a_listen_host_the_service_cannot_serve_on(
    cluster: ControlPlane, tmp_path, capsys, host: str
) -> None:
    """``--check`` must not pass a configuration the service then refuses at start-up."""
    cfg = tmp_path / "extender.yaml"
    cfg.write_text(
        yaml.safe_dump({"listen": {"host": host, "port": 0}, "history": {"name": HISTORY["name"]}})
    )
    argv = ["extender", "--config", str(cfg), "--kubeconfig", str(cluster.kubeconfig)]
    checked = cli_main([*argv, "--check"])
    err = capsys.readouterr().err
    assert checked == 2, "--check passed it"
    assert f"{cfg}: listen.host" in err and "Traceback" not in err


def test_check_refuses_a_host_option_the_service_cannot_serve_on(cluster: ControlPlane, capsys) -> None:
    argv = ["extender", "--host", "0.0.0.0:8888", "--kubeconfig", str(cluster.kubeconfig), "--check"]
    assert cli_main(argv) == 2
    assert "--host: Value error, '0.0.0.0:8888' is not an IP address" in capsys.readouterr().err


@pytest.fixture(scope="module")
def without_dra(request: pytest.FixtureRequest) -> Iterator[ControlPlane]:
    """A control plane of its own whose API server does not serve ``resource.k8s.io/v1``
    (turned off with ``--runtime-config``), as a cluster older than DRA's GA or one that
    turned it off: every list of ResourceSlices or ResourceClaims answers 404."""
    needs_binaries()
    cp = ControlPlane(apiserver_args=["--runtime-config=resource.k8s.io/v1=false"])
    cp.start()
    try:
        yield cp
    finally:
        cp.stop(failed=cp.failed or request.session.testsfailed > 0)


def test_without_dra_served_the_extender_and_inspect_weigh_nodes_without_it(
    without_dra: ControlPlane, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    """``cluster.dra`` (and ``inspect --dra``) on an API server that does not serve
    ``resource.k8s.io/v1``: the extender becomes ready, says once that the objects are not
    served (HTTP 404), counts the refusal and weighs nodes without DRA; ``inspect --dra``
    reports the nodes, weighed without DRA, and says why, status 0."""
    cp = without_dra
    cp.create_node("n1", cpu="8", memory="32Gi")
    cfg = config_from_dict(
        {"history": {"store": "memory"}, "cluster": {"kubeconfig": str(cp.kubeconfig), "dra": True}}
    )
    with ServiceThread(cfg) as ext:
        assert httpx.get(f"{ext.url}/readyz").status_code == 200
        assert ext.service is not None and ext.service.dra_listed is False
        assert _dra_active(ext.url) == 0.0 and _dra_refusals(ext.url)["resourceslices"] >= 1
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("cluster.dra:")]
    assert len(said) == 1 and "resourceslices cannot be listed (HTTP 404: not served)" in said[0], said
    assert cli_main(["inspect", "--kubeconfig", str(cp.kubeconfig), "--dra", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["dra_read"] is False and [n["node"] for n in report["nodes"]] == ["n1"]
    assert report["nodes"][0]["dra"] is None
    assert cli_main(["inspect", "--kubeconfig", str(cp.kubeconfig), "--dra"]) == 0
    assert "resource.k8s.io/v1 not served" in capsys.readouterr().out
