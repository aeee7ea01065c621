"""Node-aware retirement on a real Dask scheduler with real workers, over loopback TCP.

Workers load ``stickypack.dask`` as a preload and report the node named by
``STICKYPACK_NODE_NAME``; the scheduler loads it too and orders the workers it may close.
The scheduler is then asked what dask-kubernetes (``n=``) and dask-gateway (``target=``)
ask it when a cluster shrinks, and shrunk by distributed's own ``Adaptive`` and by the
operator's HTTP request.
"""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import AsyncExitStack, contextmanager
from pathlib import Path

import httpx
import pytest
import yaml
from dask_kubernetes.operator import make_cluster_spec
from distributed import Client, Event, Scheduler, SpecCluster, Worker, secede

from stickypack.cli import main
from stickypack.dask import NODE_ENV, NodeAwareRetirement, worker_node
from stickypack.daskconfig import SCHEDULER_ROUTES_ENV, WORKER_PRELOAD_ENV

#: Three nodes holding 3, 1 and 2 workers.
LAYOUT = [
    ("a1", "node-a"),
    ("b1", "node-b"),
    ("a2", "node-a"),
    ("c1", "node-c"),
    ("a3", "node-a"),
    ("c2", "node-c"),
]


async def _cluster(
    stack: AsyncExitStack, monkeypatch, preload: list[str], layout=LAYOUT, http: dict | None = None
) -> Scheduler:
    """A scheduler and a worker for each (name, node) of ``layout``; ``http``: the
    scheduler's dashboard options (default: none)."""
    scheduler = await stack.enter_async_context(
        Scheduler(host="127.0.0.1", preload=preload, **(http or {"dashboard": False}))
    )
    for name, node in layout:
        if node is None:
            monkeypatch.delenv(NODE_ENV, raising=False)
        else:
            monkeypatch.setenv(NODE_ENV, node)  # read by the preload as the worker starts
        await stack.enter_async_context(
            Worker(scheduler.address, name=name, nthreads=1, dashboard=False, preload=preload)
        )
    assert len(scheduler.workers) == len(layout)
    return scheduler


def _nodes_left(scheduler: Scheduler, closed: list[str]) -> set[str | None]:
    return {worker_node(ws) for ws in scheduler.workers.values() if ws.name not in closed}


async def test_workers_report_their_node_and_the_scheduler_closes_whole_nodes(monkeypatch):
    async with AsyncExitStack() as stack:
        s = await _cluster(stack, monkeypatch, ["stickypack.dask"])
        assert any(isinstance(p, NodeAwareRetirement) for p in s.plugins.values())
        assert {ws.name: worker_node(ws) for ws in s.workers.values()} == dict(LAYOUT)
        # dask-kubernetes asks for n workers, dask-gateway for a target count
        by_n = s.workers_to_close(n=3, attribute="name")
        by_target = s.workers_to_close(target=3, attribute="name")
        assert sorted(by_n) == sorted(by_target) == ["b1", "c1", "c2"]
        assert _nodes_left(s, by_n) == {"node-a"}
        # retiring them really ends those workers
        await s.retire_workers(names=by_n, close_workers=True)
        assert sorted(ws.name for ws in s.workers.values()) == ["a1", "a2", "a3"]


def _by_address(scheduler: Scheduler) -> list[str]:
    """Worker names in address order: distributed's own order among alike workers (it closes
    from the end of it)."""
    return [scheduler.workers[address].name for address in sorted(scheduler.workers)]


async def test_without_the_plugin_distributed_is_blind_to_nodes(monkeypatch):
    # the same workers, with a scheduler that does not load the plugin: it closes the last
    # in address order (the ports, so it may split every node)
    async with AsyncExitStack() as stack:
        s = await _cluster(stack, monkeypatch, [])
        assert s.workers_to_close(n=3, attribute="name") == _by_address(s)[:-4:-1]


async def test_data_held_still_comes_first(monkeypatch):
    # the hook orders candidates; distributed keeps workers holding data longest, so node-c
    # (c1 holds data) cannot empty before the others: its idle c2 is not spent on it
    async with AsyncExitStack() as stack:
        s = await _cluster(stack, monkeypatch, ["stickypack.dask"])
        async with Client(s.address, asynchronous=True) as client:
            held = client.submit(lambda: b"x" * 1_000_000, workers=["c1"], pure=False)
            await held
            closed = s.workers_to_close(n=4, attribute="name")
            assert sorted(closed) == ["a1", "a2", "a3", "b1"]
            assert _nodes_left(s, closed) == {"node-c"}


async def test_distributeds_adaptive_retires_whole_nodes(monkeypatch):
    # distributed's own Adaptive (cluster.adapt) asks the scheduler's workers_to_close over
    # its RPC (target=, attribute="name"), then retires what it names and closes them
    options = {"host": "127.0.0.1", "dashboard": False, "preload": ["stickypack.dask"]}
    scheduler = {"cls": Scheduler, "options": options}
    async with SpecCluster(workers={}, scheduler=scheduler, asynchronous=True) as cluster:
        for name, node in LAYOUT:  # one at a time: each reads the variable as it starts
            monkeypatch.setenv(NODE_ENV, node)
            options = {"nthreads": 1, "dashboard": False, "preload": ["stickypack.dask"]}
            cluster.worker_spec[name] = {"cls": Worker, "options": options}
            await cluster._correct_state()
        s = cluster.scheduler
        assert {ws.name: worker_node(ws) for ws in s.workers.values()} == dict(LAYOUT)
        adaptive = cluster.adapt(minimum=3, maximum=len(LAYOUT), interval="50ms")
        deadline = time.monotonic() + 30
        # Adaptive retires the workers at the scheduler, then takes them out of the
        # cluster's spec: wait for both
        while len(s.workers) > 3 or len(cluster.worker_spec) > 3:
            assert time.monotonic() < deadline, "Adaptive never scaled down"
            await asyncio.sleep(0.05)
        downs = [sorted(r["workers"]) for _, r in adaptive.log if r["status"] == "down"]
        assert downs == [["b1", "c1", "c2"]]
        assert sorted(cluster.worker_spec) == ["a1", "a2", "a3"]
        assert _nodes_left(s, []) == {"node-a"}


#: Two nodes of three workers each.
TWO_NODES = [
    ("x1", "node-x"),
    ("x2", "node-x"),
    ("x3", "node-x"),
    ("y1", "node-y"),
    ("y2", "node-y"),
    ("y3", "node-y"),
]


def _wait_for_event(name: str) -> int:
    Event(name).wait()
    return 1


def _long_running(name: str) -> int:
    secede()  # a long-running task: distributed never closes its worker
    Event(name).wait()
    return 1


@pytest.mark.parametrize("task", ["busy", "long-running", "data"])
async def test_a_node_holding_a_worker_distributed_keeps_goes_last(monkeypatch, task):
    # node-x holds a worker distributed closes last (busy, or holding data) or never (a
    # long-running task): closing node-x's other two first would empty no node, closing
    # node-y's three empties one
    async with AsyncExitStack() as stack:
        s = await _cluster(stack, monkeypatch, ["stickypack.dask"], TWO_NODES)
        async with Client(s.address, asynchronous=True) as client:
            event = Event(f"release-{task}", client=client)
            if task == "data":
                future = client.submit(lambda: b"x" * 1_000_000, workers=["x1"], pure=False)
                await future  # held while ``future`` is
            else:
                func = _wait_for_event if task == "busy" else _long_running
                future = client.submit(func, f"release-{task}", workers=["x1"], pure=False)
                started = (lambda ws: ws.processing) if task == "busy" else (lambda ws: ws.long_running)
                deadline = time.monotonic() + 30
                while not any(started(ws) for ws in s.workers.values()):
                    assert time.monotonic() < deadline, f"the {task} task never started"
                    await asyncio.sleep(0.01)
            try:
                for closed in (
                    s.workers_to_close(n=3, attribute="name"),
                    s.workers_to_close(target=3, attribute="name"),
                    s.workers_to_close(target=3, key=lambda ws: ws.name, attribute="name"),
                ):
                    assert sorted(closed) == ["y1", "y2", "y3"]
            finally:
                await event.set()
            await future


async def test_workers_that_report_no_node_keep_distributeds_order_and_are_warned_about(monkeypatch, caplog):
    layout = [("x1", None), ("x2", None), ("x3", None)]
    with caplog.at_level(logging.WARNING, logger="stickypack.dask"):
        async with AsyncExitStack() as stack:
            s = await _cluster(stack, monkeypatch, ["stickypack.dask"], layout)
            assert [worker_node(ws) for ws in s.workers.values()] == [None, None, None]
            assert s.workers_to_close(n=2, attribute="name") == _by_address(s)[:-3:-1]  # distributed's own
    messages = [r.getMessage() for r in caplog.records]
    assert any("STICKYPACK_NODE_NAME is not set" in m for m in messages)
    assert any("3 of 3 workers report no node" in m for m in messages)


async def test_the_scheduler_warns_once_about_workers_that_report_no_node(monkeypatch, caplog):
    # NodeAwareRetirement logs the missing STICKYPACK_NODE_NAME once per scheduler, not at
    # every downscaling question (Adaptive asks every interval): one unplaced worker of three,
    # asked three times -> exactly one "1 of 3 workers report no node" warning
    layout = [("x1", "node-x"), ("x2", "node-x"), ("u1", None)]
    async with AsyncExitStack() as stack:
        s = await _cluster(stack, monkeypatch, ["stickypack.dask"], layout)
        with caplog.at_level(logging.WARNING, logger="stickypack.dask"):
            for _ in range(3):
                assert s.workers_to_close(n=1, attribute="name") == ["u1"]
    warned = [r.getMessage() for r in caplog.records if "report no node" in r.getMessage()]
    assert len(warned) == 1 and warned[0].startswith("1 of 3 workers report no node"), warned


async def test_workers_that_report_no_node_go_first_among_placed_ones(monkeypatch):
    # stickypack.dask's docstring: workers that report no node go first, in distributed's
    # order; the placed ones follow node by node (the node with the fewest workers first)
    layout = [*LAYOUT, ("u1", None), ("u2", None)]
    async with AsyncExitStack() as stack:
        s = await _cluster(stack, monkeypatch, ["stickypack.dask"], layout)
        assert sorted(s.workers_to_close(n=2, attribute="name")) == ["u1", "u2"]
        assert sorted(s.workers_to_close(n=3, attribute="name")) == ["b1", "u1", "u2"]
        assert sorted(s.workers_to_close(target=3, attribute="name")) == ["b1", "c1", "c2", "u1", "u2"]


async def test_a_node_name_is_reported_without_surrounding_whitespace(monkeypatch):
    # a STICKYPACK_NODE_NAME of " node-a\n" (a value pasted with a newline) names node-a:
    # the two workers below are on one node, not on "node-a" and " node-a\n"
    layout = [("a1", " node-a\n"), ("a2", "node-a")]
    async with AsyncExitStack() as stack:
        s = await _cluster(stack, monkeypatch, ["stickypack.dask"], layout)
        assert {ws.name: worker_node(ws) for ws in s.workers.values()} == {"a1": "node-a", "a2": "node-a"}


@pytest.mark.parametrize("reported", [None, "", 5])
def test_a_node_that_is_not_a_name_is_no_node(reported):
    class FakeState:  # only ``extra`` is read
        extra = {} if reported is None else {"stickypack-node": reported}

    assert worker_node(FakeState()) is None  # type: ignore[arg-type]


#: distributed's own commands, on loopback, without their dashboards.
DASK_SCHEDULER = [
    *(sys.executable, "-m", "distributed.cli.dask_scheduler"),
    *("--host", "127.0.0.1", "--port", "0", "--no-dashboard"),
]
DASK_WORKER = [sys.executable, "-m", "distributed.cli.dask_worker", "--no-dashboard"]


@contextmanager
def _processes() -> Iterator[Callable[[list[str], dict[str, str]], None]]:
    """A function that starts a command with extra environment variables; every process it
    started is ended when the block ends, the last started first (workers before their
    scheduler, which a worker ending on SIGTERM may still be talking to)."""
    procs: list[subprocess.Popen] = []

    def start(command: list[str], env: dict[str, str]) -> None:
        procs.append(
            subprocess.Popen(
                command, env={**os.environ, **env}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
        )

    try:
        yield start
    finally:
        for proc in reversed(procs):
            proc.terminate()
        for proc in reversed(procs):
            proc.wait(timeout=30)


def _client(scheduler_file: Path) -> Client:
    """A client of the scheduler that writes ``scheduler_file`` (once it has)."""
    deadline = time.monotonic() + 60
    while not scheduler_file.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    return Client(scheduler_file=str(scheduler_file), timeout=60)


def test_the_documented_environment_configures_the_dask_commands(tmp_path):
    # docs/operator-guide.md: the preload through DASK_DISTRIBUTED__* variables and the node
    # from STICKYPACK_NODE_NAME, with distributed's own commands (workers under a nanny)
    scheduler_file = tmp_path / "scheduler.json"
    with _processes() as start:
        start(
            [*DASK_SCHEDULER, "--scheduler-file", str(scheduler_file)],
            {"DASK_DISTRIBUTED__SCHEDULER__PRELOAD": "stickypack.dask"},
        )
        for name, node in (("w1", "node-b"), ("w2", "node-a"), ("w3", "node-a")):
            start(
                [*DASK_WORKER, "--name", name, "--nthreads", "1", "--scheduler-file", str(scheduler_file)],
                {"DASK_DISTRIBUTED__WORKER__PRELOAD": "stickypack.dask", "STICKYPACK_NODE_NAME": node},
            )
        with _client(scheduler_file) as client:
            client.wait_for_workers(3, timeout=60)

            def ask(dask_scheduler: Scheduler) -> tuple[dict, list[str], list[str]]:
                nodes = {ws.name: worker_node(ws) for ws in dask_scheduler.workers.values()}
                return (
                    nodes,
                    list(dask_scheduler.plugins),
                    dask_scheduler.workers_to_close(n=1, attribute="name"),
                )

            nodes, plugins, closed = client.run_on_scheduler(ask)
    assert nodes == {"w1": "node-b", "w2": "node-a", "w3": "node-a"}
    assert NodeAwareRetirement.name in plugins
    assert closed == ["w1"]  # the node of one worker empties


def _rendered_env(tmp_path: Path, *flags: str) -> tuple[dict[str, str], dict[str, str]]:
    """The scheduler's and the worker's container variables (those with a value) of the
    dask-kubernetes operator's own ``make_cluster_spec`` after ``stickypack render
    dask-kubernetes`` with ``flags``."""
    source, rendered = tmp_path / "cluster.yaml", tmp_path / f"rendered{len(flags)}.yaml"
    source.write_text(yaml.safe_dump(make_cluster_spec("abc")))
    assert main(["render", "dask-kubernetes", str(source), *flags, "-o", str(rendered)]) == 0
    spec = yaml.safe_load(rendered.read_text())["spec"]

    def values(part: str) -> dict[str, str]:
        (container,) = spec[part]["spec"]["containers"]
        return {e["name"]: e["value"] for e in container.get("env") or [] if "value" in e}

    return values("scheduler"), values("worker")


def _dashboard(client: Client) -> str:
    """The scheduler's HTTP server (its dashboard port, where the operator sends requests)."""
    port = client.run_on_scheduler(lambda dask_scheduler: dask_scheduler.http_server.port)
    return f"http://127.0.0.1:{port}"


@pytest.mark.parametrize("http_api", [True, False], ids=["http-api", "without"])
def test_the_operators_http_request_to_a_rendered_scheduler_retires_whole_nodes(
    tmp_path: Path, http_api: bool
) -> None:
    # `render dask-kubernetes --http-api`: distributed's own scheduler command, started with
    # only the variables the rendered scheduler container carries, serves the HTTP API on its
    # dashboard port, and the request the dask-kubernetes operator sends (POST
    # /api/v1/retire_workers {"n": 3}) retires the node-aware choice; its readiness probe's
    # /health is still served. Without the flag distributed's default routes do not serve
    # the API (404: the operator then goes over its RPC)
    scheduler_env, worker_env = _rendered_env(tmp_path, *(["--http-api"] if http_api else []))
    assert (SCHEDULER_ROUTES_ENV in scheduler_env) is http_api
    assert (
        worker_env[WORKER_PRELOAD_ENV] == "stickypack.dask" and NODE_ENV not in worker_env
    )  # from valueFrom
    scheduler_file = tmp_path / "scheduler.json"
    command = [
        *(sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", "0"),
        *("--dashboard-address", "127.0.0.1:0", "--scheduler-file", str(scheduler_file)),
    ]
    with _processes() as start:
        start(command, scheduler_env)
        for name, node in LAYOUT:  # the downward API's node name, as the pod would have it
            start(
                [*DASK_WORKER, "--name", name, "--nthreads", "1", "--scheduler-file", str(scheduler_file)],
                {**worker_env, NODE_ENV: node},
            )
        with _client(scheduler_file) as client:
            client.wait_for_workers(len(LAYOUT), timeout=60)
            url = _dashboard(client)
            assert httpx.get(f"{url}/health", timeout=30).status_code == 200
            answer = httpx.post(f"{url}/api/v1/retire_workers", json={"n": 3}, timeout=60)
            if not http_api:
                assert answer.status_code == 404
                assert len(client.scheduler_info()["workers"]) == len(LAYOUT)
                return
            assert answer.status_code == 200, answer.text
            assert sorted(info["name"] for info in answer.json().values()) == ["b1", "c1", "c2"]
            left = client.run_on_scheduler(
                lambda dask_scheduler: sorted(ws.name for ws in dask_scheduler.workers.values())
            )
            assert left == ["a1", "a2", "a3"]


#: A scheduler preload that takes options, as dask-gateway's ``dask_gateway.scheduler_preload``
#: (its scheduler command: ``<scheduler_cmd> ... --preload dask_gateway.scheduler_preload
#: --dg-api-address ... --dg-heartbeat-period ...``).
GATEWAY_LIKE_PRELOAD = """
import click

@click.command()
@click.option("--dg-api-address", default=":0")
@click.option("--dg-heartbeat-period", default=15.0, type=float)
def dask_setup(scheduler, dg_api_address, dg_heartbeat_period):
    scheduler.gateway_like = [dg_api_address, dg_heartbeat_period]
"""


def _scheduler_plugins(
    tmp_path, name: str, command: list[str], env: dict[str, str]
) -> tuple[list[str], object]:
    """Start ``dask scheduler`` with ``command`` (its arguments) and ``env``: its plugins' names
    and what the gateway-like preload received."""
    scheduler_file = tmp_path / f"{name}.json"
    with _processes() as start:
        start([*DASK_SCHEDULER, "--scheduler-file", str(scheduler_file), *command], env)
        with _client(scheduler_file) as client:
            return client.run_on_scheduler(
                lambda dask_scheduler: (
                    list(dask_scheduler.plugins),
                    getattr(dask_scheduler, "gateway_like", None),
                )
            )


def test_a_scheduler_command_that_names_a_preload_needs_ours_on_it_too(tmp_path):
    # docs/operator-guide.md, dask-gateway: distributed reads distributed.scheduler.preload
    # only when the command line names none, and dask-gateway's scheduler command names its
    # own; so the environment variable is ignored there, and the scheduler_cmd the guide
    # gives (``--preload stickypack.dask`` in front of dask-gateway's arguments) works
    gateway_like = tmp_path / "gateway_like.py"
    gateway_like.write_text(GATEWAY_LIKE_PRELOAD)
    gateway_args = ["--preload", str(gateway_like), "--dg-api-address", ":8788", "--dg-heartbeat-period", "0"]
    env_only = {"DASK_DISTRIBUTED__SCHEDULER__PRELOAD": "stickypack.dask"}
    plugins, received = _scheduler_plugins(tmp_path, "env", gateway_args, env_only)
    assert NodeAwareRetirement.name not in plugins and received == [":8788", 0.0]
    plugins, received = _scheduler_plugins(
        tmp_path, "cmd", ["--preload", "stickypack.dask", *gateway_args], {}
    )
    assert NodeAwareRetirement.name in plugins and received == [":8788", 0.0]


async def test_a_busy_worker_outranks_any_data_an_idle_one_holds(monkeypatch):
    # distributed's workers_to_close takes idle workers before busy ones, and only then
    # the ones holding less data (its _key: is_idle, then -bytes), so a node goes by
    # (busy, bytes) compared in that order. node-r: r1 busy holding nothing, r2 idle
    # holding 1 MB; node-u: u1 busy holding nothing, u2 busy holding 100 kB. node-r's
    # costliest worker is r1 (busy, 0 B), node-u's is u2 (busy, 100 kB): node-r empties
    # first. distributed closes r2 (idle) first, then one of r1/u1 (busy, 0 B: the plugin
    # breaks the tie): r1, which empties node-r (bytes compared first would put node-u,
    # 100 kB, before node-r, 1 MB, and close u1 instead).
    layout = [("r1", "node-r"), ("r2", "node-r"), ("u1", "node-u"), ("u2", "node-u")]
    async with AsyncExitStack() as stack:
        s = await _cluster(stack, monkeypatch, ["stickypack.dask"], layout)
        async with Client(s.address, asynchronous=True) as client:
            event = Event("release-mixed", client=client)
            held = [
                client.submit(lambda size: b"x" * size, size, workers=[name], pure=False)
                for name, size in (("r2", 1_000_000), ("u2", 100_000))
            ]
            await client.gather(held)
            busy = [
                client.submit(_wait_for_event, "release-mixed", workers=[name], pure=False)
                for name in ("r1", "u1", "u2")
            ]
            deadline = time.monotonic() + 30
            while sorted(ws.name for ws in s.workers.values() if ws.processing) != ["r1", "u1", "u2"]:
                assert time.monotonic() < deadline, "the busy tasks never started"
                await asyncio.sleep(0.01)
            try:
                assert sorted(s.workers_to_close(n=2, attribute="name")) == ["r1", "r2"]
            finally:
                await event.set()
            await client.gather(busy)
