"""Dask configuration helpers (``stickypack.daskconfig``, ``stickypack render dask-gateway``
and ``render dask-kubernetes``), checked with the real thing: dask-gateway-server's own
traitlets configuration and pod builder, the dask-kubernetes operator's own cluster spec and
Deployment builders, distributed's command line and configuration, a real Dask scheduler
and worker loading the preload, and the real kube-apiserver taking the pods."""

from __future__ import annotations

import copy
import io
import json
from pathlib import Path
from typing import Any

import click
import dask.config
import pytest
import yaml
from dask_gateway_server.backends.kubernetes.backend import KubeClusterConfig
from dask_gateway_server.backends.kubernetes.controller import KubeController
from dask_kubernetes.operator import make_cluster_spec
from dask_kubernetes.operator.controller.controller import (
    build_scheduler_deployment_spec,
    build_worker_deployment_spec,
)
from distributed import Scheduler, Worker
from distributed.cli.dask_scheduler import main as dask_scheduler_cli
from distributed.cli.dask_worker import main as dask_worker_cli
from traitlets.config import Config

from stickypack.cli import main
from stickypack.dask import NodeAwareRetirement
from stickypack.daskconfig import (
    DISTRIBUTED_SCHEDULER_ROUTES,
    HTTP_API_ROUTE,
    NODE_ENV,
    PRELOAD,
    SCHEDULER_PRELOAD_ENV,
    SCHEDULER_ROUTES_ENV,
    WORKER_PRELOAD_ENV,
    DaskConfigError,
    dask_gateway_config,
    dask_gateway_values,
    dask_kubernetes_spec,
)
from stickypack.testing import ControlPlane

NODE_FROM_DOWNWARD_API = {"name": NODE_ENV, "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}

# ---------------------------------------------------------------------------- dask-gateway


def _gateway(values_config: dict[str, Any], scheduler_name: str | None = None) -> KubeController:
    """A dask-gateway controller configured as the chart does it: ``values_config`` set on
    ``c.KubeClusterConfig`` (the chart's values, forwarded with setattr), then our
    ``gateway.extraConfig`` run in the same namespace, as the chart's config file runs it."""
    c = Config()
    c.KubeController.gateway_instance = "gw"
    c.KubeController.api_url = "http://api:8000/api"
    for field, value in values_config.items():
        setattr(c.KubeClusterConfig, field, value)
    code = dask_gateway_values(scheduler_name)["gateway"]["extraConfig"]["stickypack"]
    namespace: dict[str, Any] = {"c": c}
    exec(compile(code, "gateway.extraConfig.stickypack", "exec"), namespace)
    assert set(namespace) == {"c", "__builtins__"}  # nothing left behind in the config file
    return KubeController(config=c)


def _pods(controller: KubeController) -> tuple[dict, dict]:
    cluster = KubeClusterConfig(config=controller.config)
    worker = controller.make_pod("team-a", "abc", cluster, is_worker=True)
    scheduler = controller.make_pod("team-a", "abc", cluster)
    return worker, scheduler


def _scheduler_preloads(args: list[str]) -> list[str]:
    """The preloads distributed's ``dask scheduler`` command line parses out of ``args``."""
    command, *options = args
    assert command in ("dask-scheduler", "dask") or command.endswith("dask-scheduler")
    if command == "dask":
        assert options[0] == "scheduler"
        options = options[1:]
    # parsed without the option callbacks, which import each preload (dask_gateway's is not
    # installed here)
    context = click.Context(
        dask_scheduler_cli, info_name="dask-scheduler", **dask_scheduler_cli.context_settings
    )
    parsed, _, _ = dask_scheduler_cli.make_parser(context).parse_args(list(options))
    return list(parsed.get("preload") or [])


def test_dask_gateway_pods_get_the_preloads_and_the_node_name() -> None:
    """dask-gateway's own pod builder, with the chart's defaults and our extraConfig: the
    scheduler's command line loads both dask-gateway's preload and ours (as distributed's
    CLI parses it), each worker gets its node and the worker preload beside dask-gateway's
    own variables."""
    worker, scheduler = _pods(_gateway({}))
    (sched_container,) = scheduler["spec"]["containers"]
    assert _scheduler_preloads(sched_container["args"]) == [PRELOAD, "dask_gateway.scheduler_preload"]
    (container,) = worker["spec"]["containers"]
    env = container["env"]
    assert NODE_FROM_DOWNWARD_API in env and {"name": WORKER_PRELOAD_ENV, "value": PRELOAD} in env
    assert {e["name"] for e in env} >= {"DASK_GATEWAY_API_URL", "DASK_GATEWAY_WORKER_NAME"}  # theirs kept
    # the worker's command names no --preload, so distributed reads the variable
    assert "--preload" not in container["args"]
    values = {e["name"]: e["value"] for e in env if "value" in e}
    assert dask.config.collect_env(values)["distributed"]["worker"]["preload"] == PRELOAD
    assert worker["metadata"]["labels"]["app.kubernetes.io/component"] == "dask-worker"  # the webhook's route
    assert "schedulerName" not in worker["spec"]


def test_dask_gateway_config_extends_what_the_charts_values_set() -> None:
    """Values the chart forwards (a scheduler command, extra container and pod config) are
    kept and extended, not replaced; running it twice (two releases' values merged) adds
    nothing twice."""
    values = {
        "scheduler_cmd": ["dask", "scheduler", "--idle-timeout", "3600"],
        "worker_extra_container_config": {
            "env": [{"name": "KEEP", "value": "me"}, {"name": WORKER_PRELOAD_ENV, "value": "mine"}],
            "securityContext": {"runAsUser": 1000},
        },
        "worker_extra_pod_config": {"tolerations": [{"key": "k", "operator": "Exists"}]},
    }
    controller = _gateway(values, scheduler_name="stickypack")
    worker, scheduler = _pods(controller)
    args = scheduler["spec"]["containers"][0]["args"]
    assert args[:5] == ["dask", "scheduler", "--idle-timeout", "3600", "--preload"]
    assert _scheduler_preloads(args) == [PRELOAD, "dask_gateway.scheduler_preload"]
    (container,) = worker["spec"]["containers"]
    assert container["securityContext"] == {"runAsUser": 1000}
    ours = [e for e in container["env"] if e["name"] in ("KEEP", NODE_ENV, WORKER_PRELOAD_ENV)]
    assert ours == [
        {"name": "KEEP", "value": "me"},
        NODE_FROM_DOWNWARD_API,
        {"name": WORKER_PRELOAD_ENV, "value": json.dumps([PRELOAD, "mine"])},  # theirs kept
    ]
    assert worker["spec"]["schedulerName"] == "stickypack"
    assert worker["spec"]["tolerations"] == [{"key": "k", "operator": "Exists"}]
    # the same code run again over its own result
    again = copy.deepcopy(controller.config)
    exec(dask_gateway_config("stickypack"), {"c": again})
    assert again.KubeClusterConfig.scheduler_cmd == controller.config.KubeClusterConfig.scheduler_cmd
    assert (
        again.KubeClusterConfig.worker_extra_container_config
        == controller.config.KubeClusterConfig.worker_extra_container_config
    )


def test_dask_gateway_config_takes_the_command_set_for_every_backend() -> None:
    c = Config()
    c.ClusterConfig.scheduler_cmd = ["/opt/conda/bin/dask-scheduler"]
    exec(dask_gateway_config(), {"c": c})
    cluster = KubeClusterConfig(config=c)
    assert cluster.scheduler_cmd == ["/opt/conda/bin/dask-scheduler", "--preload", PRELOAD]
    assert "scheduler_cmd" in c.KubeClusterConfig and "worker_extra_pod_config" not in c.KubeClusterConfig


def _worker_preloads(env: list[dict]) -> object:
    """What dask reads from the worker pod's preload variable (the last entry of a name
    wins in Kubernetes)."""
    values = {e["name"]: e["value"] for e in env if "value" in e}
    return dask.config.collect_env({WORKER_PRELOAD_ENV: values[WORKER_PRELOAD_ENV]})["distributed"]["worker"][
        "preload"
    ]


def test_dask_gateway_config_takes_settings_as_dask_gateway_reads_them() -> None:
    """A command given as one string is one word to dask-gateway (its ``Command`` trait), so
    a path with a space stays whole; placeholders left by ``c.KubeClusterConfig.x.append``
    or ``.update`` (traitlets' LazyConfigValue) are applied, not refused; a worker preload
    set in ``environment`` (the chart's ``gateway.backend.environment``) is kept beside ours,
    not shadowed by our later entry."""
    controller = _gateway(
        {"scheduler_cmd": "/opt/my env/dask-scheduler", "environment": {WORKER_PRELOAD_ENV: "mine"}}
    )
    worker, scheduler = _pods(controller)
    assert scheduler["spec"]["containers"][0]["args"][:3] == [
        "/opt/my env/dask-scheduler",
        "--preload",
        PRELOAD,
    ]
    assert _worker_preloads(worker["spec"]["containers"][0]["env"]) == [PRELOAD, "mine"]
    worker, _ = _pods(_gateway({"environment": {WORKER_PRELOAD_ENV: "null"}}))  # dask reads None
    assert _worker_preloads(worker["spec"]["containers"][0]["env"]) == PRELOAD

    c = Config()
    c.KubeController.gateway_instance = "gw"
    c.KubeController.api_url = "http://api:8000/api"
    c.KubeClusterConfig.scheduler_cmd.append("--idle-timeout=60")  # LazyConfigValue
    c.KubeClusterConfig.worker_extra_container_config.update({"env": [{"name": "KEEP", "value": "me"}]})
    exec(dask_gateway_config("stickypack"), {"c": c})
    worker, scheduler = _pods(KubeController(config=c))
    args = scheduler["spec"]["containers"][0]["args"]
    assert args[:4] == ["dask-scheduler", "--idle-timeout=60", "--preload", PRELOAD]
    assert _scheduler_preloads(args) == [PRELOAD, "dask_gateway.scheduler_preload"]
    env = worker["spec"]["containers"][0]["env"]
    assert {"name": "KEEP", "value": "me"} in env and NODE_FROM_DOWNWARD_API in env
    assert _worker_preloads(env) == PRELOAD and worker["spec"]["schedulerName"] == "stickypack"

    # our preload already on the command line in the --preload=x form: not added twice
    worker, scheduler = _pods(_gateway({"scheduler_cmd": ["dask-scheduler", f"--preload={PRELOAD}"]}))
    assert _scheduler_preloads(scheduler["spec"]["containers"][0]["args"]) == [
        PRELOAD,
        "dask_gateway.scheduler_preload",
    ]


@pytest.mark.parametrize(
    "env",
    [
        {"FOO": "bar"},  # the mapping form z2jh's extraEnv takes, which a container's env does not
        ["FOO=bar"],
        "FOO=bar",
    ],
)
def test_a_dask_gateway_worker_env_that_is_not_a_list_of_entries_is_named(env: object) -> None:
    """The gateway runs our extraConfig at startup (and refuses to start when a config file
    raises): a malformed ``env`` says which setting, not ``'str' object has no attribute
    'get'`` from inside the generated code."""
    with pytest.raises(ValueError, match=r"^stickypack: worker_extra_container_config env must be a list"):
        _gateway({"worker_extra_container_config": {"env": env}})


def _worker_cli_preloads(args: list[str]) -> list[str]:
    """The preloads distributed's ``dask worker`` command line parses out of ``args``."""
    command, *options = args
    assert command == "dask-worker"
    context = click.Context(dask_worker_cli, info_name="dask-worker", **dask_worker_cli.context_settings)
    parsed, _, _ = dask_worker_cli.make_parser(context).parse_args(list(options))
    return list(parsed.get("preload") or [])


@pytest.mark.parametrize(
    "values",
    [
        {"worker_cmd": ["dask-worker", "--preload", "MINE"]},
        {"worker_extra_container_config": {"args": ["--preload=MINE"]}},  # appended by dask-gateway
    ],
    ids=["worker_cmd", "extra-args"],
)
async def test_a_dask_gateway_worker_command_that_names_a_preload_gets_ours_there(
    values: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """distributed reads the worker preload variable only where the worker's command line
    names no ``--preload``; dask-gateway's worker command is ``worker_cmd``, its own
    arguments, then the extra container config's ``args``. Where that names one, ours goes
    on it too, or the worker never reports its node. Checked with a real worker started as
    the command line and the pod's variables say."""
    mine = tmp_path / "mine_preload.py"
    mine.write_text("def dask_setup(worker):\n    worker.mine_loaded = True\n")
    values = json.loads(json.dumps(values).replace("MINE", str(mine)))
    controller = _gateway(values)
    worker_pod, _ = _pods(controller)
    (container,) = worker_pod["spec"]["containers"]
    preloads = _worker_cli_preloads(container["args"])
    assert preloads.count(PRELOAD) == 1 and str(mine) in preloads
    again = copy.deepcopy(controller.config)  # run twice: not added twice
    exec(dask_gateway_config(), {"c": again})
    worker_again, _ = _pods(KubeController(config=again))
    assert _worker_cli_preloads(worker_again["spec"]["containers"][0]["args"]).count(PRELOAD) == 1
    # what the worker loads: its command line's preloads, else distributed's variable
    env = {e["name"]: e["value"] for e in container["env"] if "value" in e}
    monkeypatch.setenv(NODE_ENV, "node-7")  # what the downward API gives the pod
    async with Scheduler(host="127.0.0.1", port=0, dashboard=False, preload=[PRELOAD]) as scheduler:
        with dask.config.set({"distributed.worker.preload": _read(WORKER_PRELOAD_ENV, env)}):
            async with Worker(scheduler.address, dashboard=False, nthreads=1, preload=preloads) as worker:
                assert getattr(worker, "mine_loaded", False)  # theirs still loaded
                (ws,) = scheduler.workers.values()
                assert ws.extra.get("stickypack-node") == "node-7"


def test_render_dask_gateway_writes_helm_values(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["render", "dask-gateway", "--scheduler-name", "stickypack"]) == 0
    out = capsys.readouterr().out
    assert "stickypack: |" in out  # the code as a literal block, readable in a values file
    assert yaml.safe_load(out) == dask_gateway_values("stickypack")
    assert main(["render", "dask-gateway", "-o", str(tmp_path / "v.yaml")]) == 0
    assert yaml.safe_load((tmp_path / "v.yaml").read_text()) == dask_gateway_values()
    assert main(["render", "dask-gateway", "--scheduler-name", "Not_A_Name"]) == 2
    assert "not a valid scheduler name" in capsys.readouterr().err


# ---------------------------------------------------------------------------- dask-kubernetes


def _env(container: dict) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env") or []}


def test_dask_kubernetes_cluster_gets_the_preloads_and_the_node_name() -> None:
    """The operator's own ``make_cluster_spec``, then its own Deployment builders: the
    scheduler's and workers' pods get what node-aware retirement needs, beside what the
    operator adds; the input is not changed and a second pass changes nothing."""
    cluster = make_cluster_spec("abc", n_workers=3, env={"FOO": "bar"})
    before = copy.deepcopy(cluster)
    done = dask_kubernetes_spec(cluster, scheduler_name="stickypack")
    assert cluster == before
    assert dask_kubernetes_spec(done, scheduler_name="stickypack") == done
    worker = build_worker_deployment_spec(
        "abc-default", "team-a", "abc", "x1", done["spec"]["worker"]["spec"], {}, {}
    )
    pod = worker["spec"]["template"]
    (container,) = pod["spec"]["containers"]
    env = _env(container)
    assert env[NODE_ENV] == NODE_FROM_DOWNWARD_API["valueFrom"]
    assert env[WORKER_PRELOAD_ENV] == PRELOAD and env["FOO"] == "bar" and "DASK_SCHEDULER_ADDRESS" in env
    assert pod["spec"]["schedulerName"] == "stickypack"
    assert pod["metadata"]["labels"]["dask.org/component"] == "worker"  # the webhook's route
    scheduler = build_scheduler_deployment_spec("abc", done["spec"]["scheduler"]["spec"], {}, {})
    (sched,) = scheduler["spec"]["template"]["spec"]["containers"]
    assert _env(sched)[SCHEDULER_PRELOAD_ENV] == PRELOAD and NODE_ENV not in _env(sched)
    # without a scheduler name the workers keep the default one (the webhook routes them)
    assert "schedulerName" not in dask_kubernetes_spec(cluster)["spec"]["worker"]["spec"]


@pytest.mark.parametrize(
    ("current", "preloads"),
    [
        ("other.module", [PRELOAD, "other.module"]),
        ('["a", "b"]', [PRELOAD, "a", "b"]),
        (f'["a", "{PRELOAD}"]', ["a", PRELOAD]),
        (PRELOAD, PRELOAD),
        ("", PRELOAD),
        # dask reads these as None or False, no module (distributed itself fails on them)
        ("null", PRELOAD),
        ("None", PRELOAD),
        ("false", PRELOAD),
    ],
)
def test_a_preload_already_set_is_kept_beside_ours(current: str, preloads: object) -> None:
    """What dask itself reads from the variable afterwards (``dask.config.collect_env``)."""
    cluster = make_cluster_spec("abc")
    for part in ("worker", "scheduler"):
        cluster["spec"][part]["spec"]["containers"][0]["env"] = [
            {"name": WORKER_PRELOAD_ENV if part == "worker" else SCHEDULER_PRELOAD_ENV, "value": current}
        ]
    done = dask_kubernetes_spec(cluster)
    worker_env = _env(done["spec"]["worker"]["spec"]["containers"][0])
    scheduler_env = _env(done["spec"]["scheduler"]["spec"]["containers"][0])
    read = dask.config.collect_env({WORKER_PRELOAD_ENV: worker_env[WORKER_PRELOAD_ENV]})
    assert read["distributed"]["worker"]["preload"] == preloads
    read = dask.config.collect_env({SCHEDULER_PRELOAD_ENV: scheduler_env[SCHEDULER_PRELOAD_ENV]})
    assert read["distributed"]["scheduler"]["preload"] == preloads


def test_a_command_line_that_names_a_preload_gets_ours_there() -> None:
    """distributed ignores the preload variable when the command line names one."""
    cluster = make_cluster_spec("abc")
    sched = cluster["spec"]["scheduler"]["spec"]["containers"][0]
    sched["args"] = [*sched["args"], "--preload", "mine"]
    done = dask_kubernetes_spec(cluster)
    args = done["spec"]["scheduler"]["spec"]["containers"][0]["args"]
    assert _scheduler_preloads(args) == ["mine", PRELOAD]
    assert SCHEDULER_PRELOAD_ENV not in _env(done["spec"]["scheduler"]["spec"]["containers"][0])
    assert dask_kubernetes_spec(done) == done


def test_a_shell_command_that_names_a_preload_is_an_error_not_a_variable_distributed_ignores() -> None:
    """A container that runs Dask through a shell (``sh -c "... dask worker --preload x"``):
    distributed ignores the preload variable there, and the shell string cannot be edited
    safely, so the helper says so instead of adding a variable that does nothing. A shell
    string that names no preload gets the variable; one that names ours already is done."""
    cluster = make_cluster_spec("abc")
    worker = cluster["spec"]["worker"]["spec"]["containers"][0]
    worker["command"] = ["/bin/sh", "-c"]
    worker["args"] = ["pip install mine && exec dask worker --preload mine --name $(DASK_WORKER_NAME)"]
    with pytest.raises(DaskConfigError, match=r"containers\[0\]\.args\[0\]: a shell command that"):
        dask_kubernetes_spec(cluster)
    worker["args"] = ["pip install mine && exec dask worker --name $(DASK_WORKER_NAME)"]
    done = dask_kubernetes_spec(cluster)["spec"]["worker"]["spec"]["containers"][0]
    assert _env(done)[WORKER_PRELOAD_ENV] == PRELOAD
    worker["args"] = [f"exec dask worker --preload mine --preload={PRELOAD}"]
    done = dask_kubernetes_spec(cluster)["spec"]["worker"]["spec"]["containers"][0]
    assert done["args"] == worker["args"] and NODE_ENV in _env(done)


def test_a_worker_group_gets_the_worker_half() -> None:
    group = {
        "apiVersion": "kubernetes.dask.org/v1",
        "kind": "DaskWorkerGroup",
        "metadata": {"name": "abc-highmem"},
        "spec": {"cluster": "abc", "worker": make_cluster_spec("abc")["spec"]["worker"]},
    }
    done = dask_kubernetes_spec(group)
    assert _env(done["spec"]["worker"]["spec"]["containers"][0])[WORKER_PRELOAD_ENV] == PRELOAD


@pytest.mark.parametrize(
    ("resource", "message"),
    [
        ({"kind": "Deployment"}, "kind 'Deployment': expected DaskCluster or DaskWorkerGroup"),
        ({"kind": "DaskCluster"}, "DaskCluster.spec: missing"),
        ({"kind": "DaskCluster", "spec": {"worker": {"spec": {}}}}, "spec.worker.spec.containers: expected"),
        (
            {"kind": "DaskWorkerGroup", "spec": {"worker": {"spec": {"containers": [{"env": "x"}]}}}},
            "containers[0]: env must be a list",
        ),
        (  # a list, but of strings: not read as dict("FOO=bar")'s ValueError
            {"kind": "DaskWorkerGroup", "spec": {"worker": {"spec": {"containers": [{"env": ["FOO=bar"]}]}}}},
            "containers[0]: env must be a list",
        ),
        (  # no container at all: the operator's pod would run nothing
            {"kind": "DaskWorkerGroup", "spec": {"worker": {"spec": {"containers": []}}}},
            "spec.worker.spec.containers: expected a non-empty list",
        ),
        (  # a container that is not a mapping
            {"kind": "DaskWorkerGroup", "spec": {"worker": {"spec": {"containers": ["dask-worker"]}}}},
            "spec.worker.spec.containers: expected a non-empty list",
        ),
        (
            {"kind": "DaskWorkerGroup", "spec": {"worker": {"spec": {"containers": [
                {"env": [{"name": WORKER_PRELOAD_ENV, "valueFrom": {"configMapKeyRef": {}}}]}]}}}},
            "comes from valueFrom",
        ),
        (  # a shell string, which the API server refuses: not read as a list of characters
            {"kind": "DaskWorkerGroup", "spec": {"worker": {"spec": {"containers": [
                {"command": "dask worker --preload x"}]}}}},
            "containers[0].command: must be a list of strings",
        ),
        (
            {"kind": "DaskCluster", "spec": {"worker": {"spec": {"containers": [{}]}}}},
            "DaskCluster.spec.scheduler: missing",
        ),
    ],
)  # fmt: skip
def test_what_the_operator_would_not_take_is_named(resource: dict, message: str) -> None:
    with pytest.raises(DaskConfigError) as err:
        dask_kubernetes_spec(resource)
    assert message in str(err.value)


def test_render_dask_kubernetes_reads_a_file_or_stdin(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster = make_cluster_spec("abc", n_workers=2)
    source = tmp_path / "cluster.yaml"
    source.write_text(yaml.safe_dump_all([cluster, cluster]))
    assert main(["render", "dask-kubernetes", str(source), "--scheduler-name", "stickypack"]) == 0
    docs = list(yaml.safe_load_all(capsys.readouterr().out))
    assert docs == [dask_kubernetes_spec(cluster, scheduler_name="stickypack")] * 2
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(cluster)))
    assert main(["render", "dask-kubernetes", "-"]) == 0
    assert yaml.safe_load(capsys.readouterr().out) == dask_kubernetes_spec(cluster)
    for text, message in (
        ("kind: Deployment\n", f"{source}: document 1: kind 'Deployment'"),
        ("a: [\n", f"{source}:2:1: not valid YAML"),
        ("a: " + "[" * 5000 + "]" * 5000 + "\n", f"{source}: not valid YAML: nested too deeply"),
        ("kind: DaskCluster\nkind: DaskWorkerGroup\n", f"{source}:2:1: not valid YAML: found duplicate key"),
        ("", f"{source}: no documents"),
    ):
        source.write_text(text)
        assert main(["render", "dask-kubernetes", str(source)]) == 2
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err, err
    assert main(["render", "dask-kubernetes", str(tmp_path / "missing.yaml")]) == 2
    assert "cannot read" in capsys.readouterr().err


# ---------------------------------------------------------------------------- --http-api


def _routes(container: dict) -> object:
    """What dask reads from the container's routes variable (``distributed.scheduler.http.routes``)."""
    return _read(SCHEDULER_ROUTES_ENV, _env(container))


def test_the_pinned_routes_are_the_installed_distributeds_default() -> None:
    """``DISTRIBUTED_SCHEDULER_ROUTES`` is written down (the scheduler's image may hold
    another distributed than the one rendering); this says when distributed changes its
    default, so the list can follow."""
    assert list(DISTRIBUTED_SCHEDULER_ROUTES) == dask.config.get("distributed.scheduler.http.routes")
    assert HTTP_API_ROUTE not in DISTRIBUTED_SCHEDULER_ROUTES


def test_http_api_gives_every_scheduler_container_distributeds_routes_and_the_api() -> None:
    """With ``http_api`` each container of the scheduler pod (a sidecar too) gets
    distributed's default routes and the API, as dask reads the variable; the operator's
    own Deployment builder carries it into the pod; the workers get nothing of it; a second
    pass changes nothing; without ``http_api`` no routes are set."""
    cluster = make_cluster_spec("abc")
    cluster["spec"]["scheduler"]["spec"]["containers"].append({"name": "sidecar", "image": "busybox"})
    done = dask_kubernetes_spec(cluster, http_api=True)
    assert dask_kubernetes_spec(done, http_api=True) == done
    assert dask_kubernetes_spec(done) == done
    expected = [*DISTRIBUTED_SCHEDULER_ROUTES, HTTP_API_ROUTE]
    assert [_routes(c) for c in done["spec"]["scheduler"]["spec"]["containers"]] == [expected, expected]
    assert SCHEDULER_ROUTES_ENV not in _env(done["spec"]["worker"]["spec"]["containers"][0])
    deployment = build_scheduler_deployment_spec("abc", done["spec"]["scheduler"]["spec"], {}, {})
    (sched, _) = deployment["spec"]["template"]["spec"]["containers"]
    assert _routes(sched) == expected and _env(sched)[SCHEDULER_PRELOAD_ENV] == PRELOAD
    plain = dask_kubernetes_spec(cluster)
    assert all(SCHEDULER_ROUTES_ENV not in _env(c) for c in plain["spec"]["scheduler"]["spec"]["containers"])


@pytest.mark.parametrize(
    ("current", "routes"),
    [
        (
            '["distributed.http.health", "mine.routes"]',
            ["distributed.http.health", "mine.routes", HTTP_API_ROUTE],
        ),
        ("('distributed.http.health',)", ["distributed.http.health", HTTP_API_ROUTE]),  # a tuple literal
        ("[]", [HTTP_API_ROUTE]),  # no routes: only the API
        (f'["{HTTP_API_ROUTE}", "distributed.http.health"]', [HTTP_API_ROUTE, "distributed.http.health"]),
    ],
)
def test_routes_the_container_sets_are_kept_beside_the_api(current: str, routes: list[str]) -> None:
    """A routes variable the container sets already is read as dask reads it; its routes
    are kept, in their order, and the API added unless it is there (then the value is left
    as written)."""
    cluster = make_cluster_spec("abc")
    cluster["spec"]["scheduler"]["spec"]["containers"][0]["env"] = [
        {"name": "FOO", "value": "bar"},
        {"name": SCHEDULER_ROUTES_ENV, "value": current},
    ]
    done = dask_kubernetes_spec(cluster, http_api=True)
    (sched,) = done["spec"]["scheduler"]["spec"]["containers"]
    assert _routes(sched) == routes
    assert [e["name"] for e in sched["env"]] == ["FOO", SCHEDULER_ROUTES_ENV, SCHEDULER_PRELOAD_ENV]
    if HTTP_API_ROUTE in current:
        assert _env(sched)[SCHEDULER_ROUTES_ENV] == current
    assert dask_kubernetes_spec(done, http_api=True) == done


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (  # one module, not a list: distributed would iterate its characters
            {"value": "distributed.http.health"},
            "dask reads the str 'distributed.http.health', not a list of route modules",
        ),
        (  # a YAML flow list is not what dask parses (ast.literal_eval): a string
            {"value": "[distributed.http.health]"},
            "dask reads the str '[distributed.http.health]', not a list",
        ),
        ({"value": "null"}, "dask reads None, not a list"),
        ({"value": ""}, "dask reads the str '', not a list"),
        ({"value": "[1, 2]"}, "dask reads the list [1, 2], not a list of route modules"),
        ({"valueFrom": {"configMapKeyRef": {"name": "x", "key": "y"}}}, "comes from valueFrom"),
    ],
)
def test_a_routes_variable_that_is_not_a_list_is_named(entry: dict, message: str) -> None:
    cluster = make_cluster_spec("abc")
    cluster["spec"]["scheduler"]["spec"]["containers"].insert(0, {"name": "sidecar"})
    cluster["spec"]["scheduler"]["spec"]["containers"][1]["env"] = [{"name": SCHEDULER_ROUTES_ENV, **entry}]
    with pytest.raises(DaskConfigError) as err:
        dask_kubernetes_spec(cluster, http_api=True)
    assert str(err.value).startswith(
        f"DaskCluster.spec.scheduler.spec.containers[1]: {SCHEDULER_ROUTES_ENV}"
    ), err.value
    assert message in str(err.value)
    dask_kubernetes_spec(cluster)  # without http_api the variable is not read


def test_a_shell_command_that_sets_the_routes_is_an_error() -> None:
    """``dask scheduler`` has no option for its routes, but a shell can set the variable
    before running it, over the container's ``env``: that cannot be edited safely."""
    cluster = make_cluster_spec("abc")
    sched = cluster["spec"]["scheduler"]["spec"]["containers"][0]
    sched["command"] = ["sh", "-c"]
    sched["args"] = [f"{SCHEDULER_ROUTES_ENV}='[\"distributed.http.health\"]' exec dask scheduler"]
    with pytest.raises(DaskConfigError, match=r"containers\[0\]\.args\[0\]: a shell command that sets "):
        dask_kubernetes_spec(cluster, http_api=True)
    sched["args"] = ["exec dask scheduler --host 0.0.0.0"]  # a shell that sets no routes: the variable
    (done,) = dask_kubernetes_spec(cluster, http_api=True)["spec"]["scheduler"]["spec"]["containers"]
    assert _routes(done) == [*DISTRIBUTED_SCHEDULER_ROUTES, HTTP_API_ROUTE]


def test_http_api_leaves_a_worker_group_as_it_is_without() -> None:
    """A DaskWorkerGroup has no scheduler: ``http_api`` changes nothing in it (a file of a
    DaskCluster and its extra worker groups renders with the flag)."""
    group = {
        "apiVersion": "kubernetes.dask.org/v1",
        "kind": "DaskWorkerGroup",
        "metadata": {"name": "abc-highmem"},
        "spec": {"cluster": "abc", "worker": make_cluster_spec("abc")["spec"]["worker"]},
    }
    assert dask_kubernetes_spec(group, http_api=True) == dask_kubernetes_spec(group)


def test_render_dask_kubernetes_http_api(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cluster = make_cluster_spec("abc", n_workers=2)
    group = {"kind": "DaskWorkerGroup", "spec": {"cluster": "abc", "worker": cluster["spec"]["worker"]}}
    source = tmp_path / "cluster.yaml"
    source.write_text(yaml.safe_dump_all([cluster, group]))
    assert main(["render", "dask-kubernetes", str(source), "--http-api"]) == 0
    docs = list(yaml.safe_load_all(capsys.readouterr().out))
    assert docs == [dask_kubernetes_spec(cluster, http_api=True), dask_kubernetes_spec(group)]
    cluster["spec"]["scheduler"]["spec"]["containers"][0]["env"] = [
        {"name": SCHEDULER_ROUTES_ENV, "value": "x"}
    ]
    source.write_text(yaml.safe_dump(cluster))
    assert main(["render", "dask-kubernetes", str(source), "--http-api"]) == 2
    err = capsys.readouterr().err
    assert (
        f"{source}: document 1: DaskCluster.spec.scheduler.spec.containers[0]: {SCHEDULER_ROUTES_ENV}" in err
    )
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err


# ---------------------------------------------------------------------------- the real thing


def _read(variable: str, env: dict[str, Any]) -> object:
    """What dask reads from ``variable`` as the pod's environment sets it."""
    value: Any = dask.config.collect_env({variable: env[variable]})
    for key in variable.removeprefix("DASK_").lower().split("__"):
        value = value[key]
    return value


@pytest.mark.asyncio
@pytest.mark.parametrize("before", [None, "null"])
async def test_the_rendered_variables_make_distributed_load_the_preload(
    monkeypatch: pytest.MonkeyPatch, before: str | None
) -> None:
    """A real scheduler and worker configured only by the variables the operator's pods get
    (read by dask from the environment, as in the pod) load stickypack.dask: the scheduler
    runs the node-aware plugin, the worker reports its node. A variable set before to what
    dask reads as no module (``null``) is not kept as a module named ``null``, which no
    scheduler could import."""
    cluster = make_cluster_spec("abc")
    if before is not None:
        for part, variable in (("scheduler", SCHEDULER_PRELOAD_ENV), ("worker", WORKER_PRELOAD_ENV)):
            cluster["spec"][part]["spec"]["containers"][0]["env"] = [{"name": variable, "value": before}]
    done = dask_kubernetes_spec(cluster)
    sched_env = _env(done["spec"]["scheduler"]["spec"]["containers"][0])
    worker_env = _env(done["spec"]["worker"]["spec"]["containers"][0])
    monkeypatch.setenv(NODE_ENV, "node-7")  # what the downward API gives the pod
    with dask.config.set({"distributed.scheduler.preload": _read(SCHEDULER_PRELOAD_ENV, sched_env)}):
        async with Scheduler(host="127.0.0.1", port=0, dashboard_address=":0") as scheduler:
            assert NodeAwareRetirement.name in scheduler.plugins
            with dask.config.set({"distributed.worker.preload": _read(WORKER_PRELOAD_ENV, worker_env)}):
                async with Worker(scheduler.address, host="127.0.0.1", dashboard_address=":0", nthreads=1):
                    (ws,) = scheduler.workers.values()
                    assert ws.extra.get("stickypack-node") == "node-7"


@pytest.mark.controlplane
def test_the_api_server_takes_the_pods(cluster: ControlPlane) -> None:
    """The pods dask-gateway and the operator would create from the helpers' output pass the
    real kube-apiserver's validation (the downward API reference and --http-api's routes included)."""
    worker, scheduler = _pods(_gateway({}, scheduler_name="stickypack"))
    created = cluster.create_pods([worker, scheduler], namespace="default")
    assert created[0]["spec"]["schedulerName"] == "stickypack"
    env = {e["name"]: e for e in created[0]["spec"]["containers"][0]["env"]}
    assert env[NODE_ENV]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"  # (apiVersion defaulted)
    done = dask_kubernetes_spec(make_cluster_spec("abc"), scheduler_name="stickypack", http_api=True)
    for deployment in (
        build_worker_deployment_spec(
            "abc-default", "default", "abc", "x1", done["spec"]["worker"]["spec"], {}, {}
        ),
        build_scheduler_deployment_spec("abc", done["spec"]["scheduler"]["spec"], {}, {}),
    ):
        template = deployment["spec"]["template"]
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": template["metadata"], "spec": template["spec"]}
        pod = json.loads(json.dumps(pod, default=str))
        pod["spec"]["containers"] = [
            {k: v for k, v in c.items() if v is not None} for c in pod["spec"]["containers"]
        ]
        made = cluster.create_pod(pod=pod)
        assert made["metadata"]["name"] == template["metadata"]["name"]
        if made["metadata"]["labels"]["dask.org/component"] == "scheduler":  # --http-api's routes taken
            assert _routes(made["spec"]["containers"][0]) == [*DISTRIBUTED_SCHEDULER_ROUTES, HTTP_API_ROUTE]


# ---------------------------------------------------------------------------- edges (mutation audit)


@pytest.mark.parametrize(
    ("current", "preloads"),
    [
        # dask.config.interpret_value: ast.literal_eval fails, then {"none", "null", "false",
        # "true"} is looked up with value.lower(), so "NULL" is None and "FALSE" is False
        ("NULL", PRELOAD),
        ("FALSE", PRELOAD),
        # a tuple literal is read as a tuple of two modules, as a list literal is
        ('("a", "b")', [PRELOAD, "a", "b"]),
    ],
)
def test_a_preload_value_is_read_as_dask_reads_it(current: str, preloads: object) -> None:
    """Both helpers read a preload variable set before as dask does
    (``dask.config.interpret_value``): the operator's (``dask_kubernetes_spec``) and the
    gateway's generated code (``environment`` of ``KubeClusterConfig``)."""
    group = {
        "kind": "DaskWorkerGroup",
        "spec": {
            "worker": {"spec": {"containers": [{"env": [{"name": WORKER_PRELOAD_ENV, "value": current}]}]}}
        },
    }
    (container,) = dask_kubernetes_spec(group)["spec"]["worker"]["spec"]["containers"]
    assert _worker_preloads(container["env"]) == preloads
    worker, _ = _pods(_gateway({"environment": {WORKER_PRELOAD_ENV: current}}))
    assert _worker_preloads(worker["spec"]["containers"][0]["env"]) == preloads


def test_a_preload_value_too_deep_for_literal_eval_is_kept_as_a_string() -> None:
    """``ast.literal_eval`` of ``1+1+...`` (100 001 terms) raises RecursionError, and of
    100 000 minus signs MemoryError, not ValueError: such a value is kept beside ours as the
    one string it is, with no traceback."""
    for current in ("1" + "+1" * 100_000, "-" * 100_000 + "1"):
        group = {
            "kind": "DaskWorkerGroup",
            "spec": {
                "worker": {
                    "spec": {"containers": [{"env": [{"name": WORKER_PRELOAD_ENV, "value": current}]}]}
                }
            },
        }
        (container,) = dask_kubernetes_spec(group)["spec"]["worker"]["spec"]["containers"]
        (value,) = [e["value"] for e in container["env"] if e["name"] == WORKER_PRELOAD_ENV]
        assert json.loads(value) == [PRELOAD, current]


def test_the_node_variable_goes_after_the_containers_own_variables() -> None:
    """A worker's own variables keep their places; ours, absent before, are appended
    (``_add_env``: "else at the end")."""
    group = {
        "kind": "DaskWorkerGroup",
        "spec": {
            "worker": {
                "spec": {"containers": [{"env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]}]}
            }
        },
    }
    (container,) = dask_kubernetes_spec(group)["spec"]["worker"]["spec"]["containers"]
    # A, B kept at 0 and 1; then the node (index 2); then the preload variable (index 3)
    assert [e["name"] for e in container["env"]] == ["A", "B", NODE_ENV, WORKER_PRELOAD_ENV]


def _command_line(container: dict) -> list[str]:
    return [*(container.get("command") or []), *(container.get("args") or [])]


@pytest.mark.parametrize(
    ("command", "args"),
    [
        (None, ["dask-worker", "--preload=mine"]),  # the --preload=x form names one too
        (["dask-worker", "--preload", "mine"], None),  # the command alone: ours goes there
        (["dask-worker", "--preload", "mine"], ["--nthreads", "1"]),  # named in command, args after
        (["tini", "--"], ["dask-worker", "--preload", "mine"]),  # an init: ours after the args
    ],
)
def test_a_worker_command_line_that_names_a_preload_gets_ours_at_its_end(
    command: list[str] | None, args: list[str] | None
) -> None:
    """distributed ignores the variable when the command line (``command`` then ``args``)
    names ``--preload``: ours is appended to the last part of it, the variable left
    unset."""
    container: dict[str, Any] = {"name": "worker"}
    if command is not None:
        container["command"] = command
    if args is not None:
        container["args"] = args
    group = {"kind": "DaskWorkerGroup", "spec": {"worker": {"spec": {"containers": [container]}}}}
    (done,) = dask_kubernetes_spec(group)["spec"]["worker"]["spec"]["containers"]
    before = _command_line(container)
    assert _command_line(done) == [*before, "--preload", PRELOAD]
    assert WORKER_PRELOAD_ENV not in _env(done) and NODE_ENV in _env(done)
    dask_index = next(i for i, w in enumerate(_command_line(done)) if w.startswith("dask"))
    assert _worker_cli_preloads(_command_line(done)[dask_index:])[-1] == PRELOAD


@pytest.mark.parametrize(
    ("command", "args"),
    [
        (None, ["dask-worker", "--preload-nanny", "mine"]),
        (["sh", "-c"], ["dask-worker --preload-nanny mine"]),  # a shell string: no error either
    ],
)
def test_a_preload_nanny_option_is_not_a_preload(command: list[str] | None, args: list[str]) -> None:
    """``dask worker --preload-nanny x`` loads x in the nanny; the worker still reads its
    preload from the variable (distributed's ``Worker``: ``if not preload: preload =
    dask.config.get("distributed.worker.preload")``). So the variable is set and the
    command line kept."""
    container: dict[str, Any] = {"args": args} if command is None else {"command": command, "args": args}
    group = {"kind": "DaskWorkerGroup", "spec": {"worker": {"spec": {"containers": [container]}}}}
    (done,) = dask_kubernetes_spec(group)["spec"]["worker"]["spec"]["containers"]
    assert _command_line(done) == _command_line(container)
    assert _env(done)[WORKER_PRELOAD_ENV] == PRELOAD


def test_a_two_word_shell_command_that_names_a_preload_is_an_error() -> None:
    """A shell string is any word with a space: ``"dask-worker --preload=mine"`` (two words)
    names a preload distributed takes over the variable."""
    group = {
        "kind": "DaskWorkerGroup",
        "spec": {
            "worker": {
                "spec": {"containers": [{"command": ["sh", "-c"], "args": ["dask-worker --preload=mine"]}]}
            }
        },
    }
    with pytest.raises(
        DaskConfigError, match=r"containers\[0\]\.args\[0\]: a shell command that names --preload"
    ):
        dask_kubernetes_spec(group)


def test_every_container_of_the_pods_gets_its_half() -> None:
    """A worker pod with a sidecar, a scheduler pod with one: every container (as the
    docstring says) gets the variables, so whichever runs Dask loads the preload."""
    cluster = make_cluster_spec("abc")
    for part in ("worker", "scheduler"):
        cluster["spec"][part]["spec"]["containers"].append({"name": "sidecar", "image": "busybox"})
    done = dask_kubernetes_spec(cluster)
    workers = done["spec"]["worker"]["spec"]["containers"]
    schedulers = done["spec"]["scheduler"]["spec"]["containers"]
    assert [_env(c).get(WORKER_PRELOAD_ENV) for c in workers] == [PRELOAD, PRELOAD]
    assert [NODE_ENV in _env(c) for c in workers] == [True, True]
    assert [_env(c).get(SCHEDULER_PRELOAD_ENV) for c in schedulers] == [PRELOAD, PRELOAD]


@pytest.mark.parametrize(
    "values",
    [
        # ours named already in the --preload=x form: not added again
        {"worker_cmd": ["dask-worker", f"--preload={PRELOAD}", "--preload", "mine"]},
        # the extra container config's command (the container's command, before worker_cmd
        # in its args) names the --preload: ours goes on worker_cmd
        {
            "worker_cmd": ["--no-dashboard"],
            "worker_extra_container_config": {"command": ["dask-worker", "--preload", "mine"]},
        },
    ],
    ids=["ours-named", "extra-command"],
)
def test_a_dask_gateway_worker_command_line_loads_ours_once(values: dict[str, Any]) -> None:
    """The worker's whole command line (the container's command, then args: worker_cmd and
    dask-gateway's own) as distributed's ``dask worker`` parses it names ``mine`` and ours,
    ours once."""
    worker, _ = _pods(_gateway(values))
    (container,) = worker["spec"]["containers"]
    line = _command_line(container)
    preloads = _worker_cli_preloads(line)
    assert sorted(preloads) == sorted(["mine", PRELOAD])


def test_render_dask_kubernetes_skips_empty_documents(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Empty YAML documents (``---`` with nothing after it) are left out
    (``load_yaml_all``): two clusters around an empty document render as two documents, and a
    file of only empty documents holds none."""
    cluster = make_cluster_spec("abc", n_workers=1)
    source = tmp_path / "cluster.yaml"
    one = yaml.safe_dump(cluster)
    source.write_text(f"---\n{one}---\n---\n{one}")  # documents: cluster, empty, cluster
    assert main(["render", "dask-kubernetes", str(source)]) == 0
    assert list(yaml.safe_load_all(capsys.readouterr().out)) == [dask_kubernetes_spec(cluster)] * 2
    source.write_text("---\n---\n")  # two empty documents
    assert main(["render", "dask-kubernetes", str(source)]) == 2
    assert f"{source}: no documents" in capsys.readouterr().err


def test_render_dask_scheduler_name_is_a_dns_subdomain_of_at_most_253_characters(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A schedulerName is a DNS subdomain (the API server's rule for it): 253 characters
    taken, 254 refused; a character no DNS name holds anywhere in it is refused."""
    name_253 = ".".join(["a" * 63, "b" * 63, "c" * 63, "d" * 61])  # 63 * 3 + 61 + 3 dots = 253
    assert len(name_253) == 253
    assert main(["render", "dask-gateway", "--scheduler-name", name_253]) == 0
    assert name_253 in capsys.readouterr().out
    for bad in (name_253 + "d", "stickypack_builds"):  # 254 characters; an underscore
        assert main(["render", "dask-gateway", "--scheduler-name", bad]) == 2, bad
        assert f"--scheduler-name {bad!r} is not a valid scheduler name" in capsys.readouterr().err
