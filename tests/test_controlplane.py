"""The local control plane: real etcd, kube-apiserver and kube-scheduler, fake nodes."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from stickypack.testing import ControlPlane, binaries_dir
from stickypack.testing.controlplane import pinned_versions

REPO = Path(__file__).resolve().parents[1]
DEFAULT_CONFIG = {
    "apiVersion": "kubescheduler.config.k8s.io/v1",
    "kind": "KubeSchedulerConfiguration",
    "profiles": [{"schedulerName": "default-scheduler"}],
}


def test_binaries_dir_matches_build_script(monkeypatch: pytest.MonkeyPatch) -> None:
    """Python and tools/k8s/build.sh agree on where the binaries are."""
    monkeypatch.delenv("STICKYPACK_K8S_BIN", raising=False)
    # "~/..." too: a CI file's env value is not expanded by a shell, and Python expands it.
    for cache in (None, "/tmp/stickypack-cache-check", "~/stickypack-cache-check"):
        env = dict(os.environ)
        env.pop("STICKYPACK_K8S_BIN", None)
        if cache:
            env["STICKYPACK_K8S_CACHE"] = cache
            monkeypatch.setenv("STICKYPACK_K8S_CACHE", cache)
        else:
            env.pop("STICKYPACK_K8S_CACHE", None)
            monkeypatch.delenv("STICKYPACK_K8S_CACHE", raising=False)
        out = subprocess.run(
            [REPO / "tools/k8s/build.sh", "--print-bin-dir"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        assert Path(out) == binaries_dir()


@pytest.mark.controlplane
def test_apiserver_serves(cluster: ControlPlane) -> None:
    from kubernetes_asyncio import client

    version = cluster.call(lambda api: client.VersionApi(api).get_code())
    assert version.git_version == pinned_versions()["K8S_VERSION"]
    namespaces = cluster.call(lambda api: client.CoreV1Api(api).list_namespace())
    assert {"default", "kube-system"} <= {ns.metadata.name for ns in namespaces.items}
    assert cluster.kubeconfig is not None and cluster.kubeconfig.is_file()
    # RBAC is on: the bootstrap roles exist.
    roles = cluster.call(lambda api: client.RbacAuthorizationV1Api(api).list_cluster_role())
    assert "system:kube-scheduler" in {r.metadata.name for r in roles.items}
    assert cluster.kubeconfig.stat().st_mode & 0o077 == 0  # admin credentials: owner only
    # privileged containers are allowed (as a chart's DaemonSet may ask), and a dry run
    # (admission and defaults applied) stores nothing
    from stickypack.testing import pod_manifest

    privileged = pod_manifest("privileged")
    privileged["spec"]["containers"][0]["securityContext"] = {"privileged": True}
    admitted = cluster.dry_run_pod(privileged)
    assert admitted["spec"]["containers"][0]["securityContext"] == {"privileged": True}
    assert cluster.pods() == []


@pytest.mark.controlplane
def test_fake_node_is_ready_and_schedulable(cluster: ControlPlane) -> None:
    node = cluster.create_node("n1", cpu="8", memory="32Gi", pods=50, labels={"pool": "user"})
    assert node["status"]["allocatable"] == {
        "cpu": "8",
        "memory": "32Gi",
        "pods": "50",
        "ephemeral-storage": "100Gi",
    }
    (listed,) = cluster.nodes()
    assert listed["metadata"]["labels"]["pool"] == "user"
    assert listed["metadata"]["labels"]["kubernetes.io/hostname"] == "n1"
    ready = [c for c in listed["status"]["conditions"] if c["type"] == "Ready"]
    assert [c["status"] for c in ready] == ["True"]
    assert not listed["spec"].get("unschedulable")
    assert not listed["spec"].get("taints")


@pytest.mark.controlplane
def test_fake_node_status_is_what_was_asked(cluster: ControlPlane) -> None:
    """Capacity and allocatable both carry every resource asked (ephemeral storage and
    extended resources too), images are listed, a label given overrides a default, and a
    not-ready node has Ready=False and the not-ready taint (and nothing else)."""
    image = {"names": ["registry.example/big:1"], "sizeBytes": 1_000_000_000}
    cluster.create_node(
        "gpu",
        cpu="16",
        memory="64Gi",
        pods=20,
        labels={"kubernetes.io/arch": "arm64"},
        ephemeral_storage="50Gi",
        extended={"nvidia.com/gpu": "4"},
        images=[image],
    )
    cluster.create_node("down", ready=False)
    nodes = {n["metadata"]["name"]: n for n in cluster.nodes()}
    asked = {"cpu": "16", "memory": "64Gi", "pods": "20", "ephemeral-storage": "50Gi", "nvidia.com/gpu": "4"}
    assert nodes["gpu"]["status"]["capacity"] == asked
    assert nodes["gpu"]["status"]["allocatable"] == asked
    assert nodes["gpu"]["status"]["images"] == [image]
    assert nodes["gpu"]["metadata"]["labels"]["kubernetes.io/arch"] == "arm64"
    assert nodes["gpu"]["metadata"]["labels"]["kubernetes.io/hostname"] == "gpu"
    down = nodes["down"]
    assert [c["status"] for c in down["status"]["conditions"] if c["type"] == "Ready"] == ["False"]
    assert down["spec"]["taints"] == [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]
    assert "images" not in down["status"]


@pytest.mark.controlplane
def test_wait_unschedulable_wants_every_named_pod_unschedulable(cluster: ControlPlane) -> None:
    """A gated pod (PodScheduled=False, reason SchedulingGated) is not unschedulable: a wait
    naming it beside a pod that fits nowhere times out naming it; the other alone is
    returned with kube-scheduler's message."""
    from stickypack.testing import ControlPlaneError, pod_manifest

    cluster.start_scheduler(DEFAULT_CONFIG)
    cluster.create_node("n1", cpu="1")
    cluster.create_pod("huge", cpu="8")
    gated = pod_manifest("gated", cpu="100m")
    gated["spec"]["schedulingGates"] = [{"name": "example.com/hold"}]
    cluster.create_pod(pod=gated)
    with pytest.raises(ControlPlaneError, match=r"\['gated'\]"):
        cluster.wait_unschedulable(["huge", "gated"], timeout=5)
    messages = cluster.wait_unschedulable(["huge"], timeout=5)
    assert list(messages) == ["huge"] and "Insufficient cpu" in messages["huge"]
    assert cluster.placements() == {"huge": None, "gated": None}


@pytest.mark.controlplane
def test_wait_bound_wants_every_named_pod_bound(cluster: ControlPlane) -> None:
    """No scheduler runs: "pa" is bound at creation (spec.nodeName), "pb" never is. A wait
    naming both times out naming "pb" (one bound pod of two is not enough); a wait for the
    single name "pa" (a str, not a list of letters) returns it."""
    from stickypack.testing import ControlPlaneError, pod_manifest

    cluster.create_node("n1")
    bound = pod_manifest("pa")
    bound["spec"]["nodeName"] = "n1"
    cluster.create_pod(pod=bound)
    cluster.create_pod("pb", scheduler_name="nobody")
    with pytest.raises(ControlPlaneError, match=r"1 of 2 pods not bound .*'pb'"):
        cluster.wait_bound(["pa", "pb"], timeout=2)
    assert cluster.wait_bound("pa", timeout=2) == {"pa": "n1"}


@pytest.mark.controlplane
def test_default_scheduler_binds_what_fits(cluster: ControlPlane) -> None:
    sched = cluster.start_scheduler(DEFAULT_CONFIG)
    assert sched.alive and sched.scheduler_names == ["default-scheduler"]
    cluster.create_node("small", cpu="1", memory="2Gi")
    cluster.create_node("big", cpu="4", memory="16Gi")
    cluster.create_pod("fits-big-only", cpu="3", memory="4Gi")
    cluster.create_pod("fits-nowhere", cpu="16", memory="1Gi")
    assert cluster.wait_bound(["fits-big-only"], timeout=30) == {"fits-big-only": "big"}
    messages = cluster.wait_unschedulable(["fits-nowhere"], timeout=30)
    assert "Insufficient cpu" in messages["fits-nowhere"]
    assert cluster.placements()["fits-nowhere"] is None


@pytest.mark.controlplane
def test_taint_without_toleration_keeps_pod_off(cluster: ControlPlane) -> None:
    cluster.start_scheduler(DEFAULT_CONFIG)
    cluster.create_node("tainted", cpu="8", memory="32Gi", taints=["dedicated=gpu:NoSchedule"])
    cluster.create_node("plain", cpu="1", memory="4Gi")
    cluster.create_node("not-ready", cpu="8", memory="32Gi", ready=False)
    cluster.create_pod("small", cpu="500m", memory="1Gi")
    cluster.create_pod("big", cpu="2", memory="1Gi")
    cluster.create_pod(
        "big-tolerating",
        cpu="2",
        memory="1Gi",
        tolerations=[{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}],
    )
    bound = cluster.wait_bound(["small", "big-tolerating"], timeout=30)
    assert bound == {"small": "plain", "big-tolerating": "tainted"}
    message = cluster.wait_unschedulable(["big"], timeout=30)["big"]
    assert "untolerated taint" in message


@pytest.mark.controlplane
def test_several_schedulers_and_reset(cluster: ControlPlane) -> None:
    a = cluster.start_scheduler(DEFAULT_CONFIG)
    b = cluster.start_scheduler(
        "apiVersion: kubescheduler.config.k8s.io/v1\n"
        "kind: KubeSchedulerConfiguration\n"
        "leaderElection: {resourceName: second-lock}\n"
        "clientConnection: {qps: 50}\n"
        "profiles: [{schedulerName: second}]\n",
        name="second",
    )
    assert a.port != b.port and a.pid != b.pid
    # what the harness renders: its kubeconfig, qps/burst raised unless given, leader
    # election off with the lock name given kept; the file is what the handle says
    assert a.config["clientConnection"] == {"kubeconfig": str(cluster.kubeconfig), "qps": 5000, "burst": 5000}
    assert a.config["leaderElection"] == {"leaderElect": False}
    assert b.config["clientConnection"] == {"qps": 50, "kubeconfig": str(cluster.kubeconfig), "burst": 5000}
    assert b.config["leaderElection"] == {"resourceName": "second-lock", "leaderElect": False}
    for handle in (a, b):
        assert yaml.safe_load(handle.config_path.read_text()) == handle.config
    cluster.create_node("n1")
    cluster.create_pod("p-default", cpu="100m")
    cluster.create_pod("p-second", cpu="100m", scheduler_name="second")
    assert cluster.wait_bound(["p-default", "p-second"], timeout=30) == {
        "p-default": "n1",
        "p-second": "n1",
    }
    # a second "second" (no config: kube-scheduler's defaults) gets its own log and config
    c = cluster.start_scheduler(None, name="second")
    assert c.name != b.name and c.log_path != b.log_path and c.config_path != b.config_path
    assert c.scheduler_names == ["default-scheduler"]
    assert cluster.schedulers == [a, b, c]
    cluster.stop_scheduler(c)
    cluster.stop_scheduler(b)
    assert not b.alive and not c.alive and cluster.schedulers == [a]
    cluster.reset()
    assert cluster.pods() == [] and cluster.nodes() == [] and cluster.schedulers == []
    assert not a.alive


def _alive(pid: int) -> bool:
    """True if ``pid`` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.mark.controlplane
def test_stop_leaves_no_process(controlplane: ControlPlane, tmp_path: Path) -> None:
    # A second, independent control plane (the session one stays up), its API server given
    # extra flags: an audit log of every request.
    policy = tmp_path / "audit-policy.yaml"
    policy.write_text(
        yaml.safe_dump({"apiVersion": "audit.k8s.io/v1", "kind": "Policy", "rules": [{"level": "Metadata"}]})
    )
    audit = tmp_path / "audit.log"
    cp = ControlPlane(apiserver_args=[f"--audit-policy-file={policy}", f"--audit-log-path={audit}"])
    with cp:
        cp.start_scheduler(DEFAULT_CONFIG)
        pids = cp.pids
        work_dir = cp.work_dir
        assert {"etcd", "kube-apiserver", "scheduler-default-scheduler"} <= set(pids)
        assert all(_alive(pid) for pid in pids.values())
    assert not any(_alive(pid) for pid in pids.values()), pids
    for pid in pids.values():  # nothing left in their process groups either
        with pytest.raises(ProcessLookupError):
            os.killpg(pid, 0)
    assert work_dir is not None and not work_dir.exists()  # clean run: work dir removed
    # the extra flags reached kube-apiserver: it audited the harness's wait for "default"
    uris = {json.loads(line)["requestURI"] for line in audit.read_text().splitlines() if line}
    assert "/api/v1/namespaces/default" in uris


def test_missing_binaries_error_names_them(tmp_path: Path) -> None:
    from stickypack.testing import BinariesNotFoundError, find_binaries

    with pytest.raises(BinariesNotFoundError) as info:
        find_binaries(tmp_path)
    message = str(info.value)
    assert "etcd" in message and "kube-apiserver" in message and "make k8s" in message


def test_ci_fails_when_binaries_missing(tmp_path: Path) -> None:
    """With CI=true, missing binaries fail control-plane tests instead of skipping them."""
    env = dict(os.environ, CI="true", STICKYPACK_K8S_BIN=str(tmp_path))
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            f"{REPO / 'tests/test_controlplane.py'}::test_apiserver_serves",
        ],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode != 0, run.stdout
    assert "CI=true" in run.stdout and "make k8s" in run.stdout, run.stdout
    assert "skipped" not in run.stdout.splitlines()[-1], run.stdout


def test_go_modules_pin_the_versions_of_versions_env() -> None:
    """tools/k8s/*/go.mod build the versions that versions.env names (and the cache is keyed by)."""
    versions = pinned_versions()
    k8s = REPO / "tools/k8s"
    expected = {
        k8s / "kubernetes/go.mod": ("k8s.io/kubernetes", versions["K8S_VERSION"]),
        k8s / "etcd/go.mod": ("go.etcd.io/etcd/server/v3", versions["ETCD_VERSION"]),
        k8s / "helm/go.mod": (
            f"helm.sh/helm/{versions['HELM_VERSION'].split('.')[0]}",
            versions["HELM_VERSION"],
        ),
        k8s / "prometheus/go.mod": ("github.com/prometheus/prometheus", versions["PROMETHEUS_VERSION"]),
    }
    for gomod, (module, version) in expected.items():
        required = {
            parts[0]: parts[1]
            for line in gomod.read_text().splitlines()
            if len(parts := line.split()) >= 2 and parts[0] == module
        }
        assert required == {module: version}, gomod


FAKE_GO = r"""#!/usr/bin/env bash
# Stands in for go: `go build -o OUT pkgs...` writes stand-in binaries that print "fake" and
# exit with $FAKE_BINARIES_EXIT (default 0); `go mod download -json` of the prometheus-operator
# module makes a stand-in of it (its CRD files) in $FAKE_MODULES and prints its "Dir"; the
# other commands do nothing.
if [[ $1 == mod && $2 == download && ${*: -1} == github.com/prometheus-operator/* ]]; then
  d=$FAKE_MODULES/prometheus-operator; mkdir -p "$d/example/prometheus-operator-crd"
  for f in servicemonitors prometheusrules; do
    echo "kind: CustomResourceDefinition" >"$d/example/prometheus-operator-crd/monitoring.coreos.com_$f.yaml"
  done
  printf '{\n\t"Dir": "%s",\n}\n' "$d"
  exit 0
fi
[[ $1 == build ]] || exit 0
out=""; pkgs=()
while (($#)); do
  case $1 in -o) out=$2; shift ;; -*) ;; */*) pkgs+=("$1") ;; esac
  shift
done
for p in "${pkgs[@]}"; do
  b=${p##*/}; [[ $p == go.etcd.io/* ]] && b=etcd
  f=$out; [[ $out == */ ]] && f=$out$b
  printf '#!/bin/sh\necho fake\nexit %s\n' "${FAKE_BINARIES_EXIT:-0}" >"$f"; chmod +x "$f"
done
"""


def _fake_go_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """Environment for tools/k8s/build.sh with FAKE_GO first on PATH and a cache in tmp_path."""
    fake = tmp_path / "fake-go"
    fake.mkdir()
    (fake / "go").write_text(FAKE_GO)
    (fake / "go").chmod(0o755)
    env = dict(
        os.environ,
        STICKYPACK_K8S_CACHE=str(tmp_path / "cache"),
        FAKE_MODULES=str(tmp_path / "modules"),
        **extra,
    )
    env["PATH"] = f"{fake}:{env['PATH']}"
    env.pop("STICKYPACK_K8S_BIN", None)
    return env


def test_build_script_removes_what_a_killed_build_left(tmp_path: Path) -> None:
    """A build killed with SIGKILL leaves its temporary directory (up to 200 MB of half-linked
    binaries) in the cache, a fetch of the CRDs killed so its own; the next build removes them."""
    env = _fake_go_env(tmp_path)
    cache = tmp_path / "cache"
    stale = cache / f"kubernetes-{pinned_versions()['K8S_VERSION']}" / ".build.killed"
    stale.mkdir(parents=True)
    (stale / "kube-apiserver").write_bytes(b"\0" * 1000)
    stale_fetch = (
        cache / f"prometheus-operator-{pinned_versions()['PROMETHEUS_OPERATOR_VERSION']}" / ".fetch.x"
    )
    stale_fetch.mkdir(parents=True)
    (stale_fetch / "monitoring.coreos.com_servicemonitors.yaml").write_text("half")
    out = subprocess.run([REPO / "tools/k8s/build.sh"], env=env, capture_output=True, text=True, check=True)
    assert not stale.exists() and not stale_fetch.exists()
    assert sorted(p.name for p in cache.glob("*/.build.*")) == []
    assert sorted(p.name for p in cache.glob("*/.fetch.*")) == []
    # and the rest of a build: every binary, and the CRDs copied out of their module
    bin_dir = Path(out.stdout.strip())
    assert sorted(p.name for p in bin_dir.iterdir()) == [
        "crds", "etcd", "helm", "kube-apiserver", "kube-scheduler", "promtool"
    ]  # fmt: skip
    assert sorted(p.name for p in (bin_dir / "crds").glob("*.yaml")) == [
        "monitoring.coreos.com_prometheusrules.yaml", "monitoring.coreos.com_servicemonitors.yaml"
    ]  # fmt: skip


def test_build_script_fails_every_time_on_binaries_that_do_not_run(tmp_path: Path) -> None:
    """A built binary that does not run fails the build, and is not taken as built next time
    (the stamp was once written before the check, so the second run passed)."""
    env = _fake_go_env(tmp_path, FAKE_BINARIES_EXIT="3")
    for _ in range(2):
        run = subprocess.run([REPO / "tools/k8s/build.sh"], env=env, capture_output=True, text=True)
        assert run.returncode != 0 and "does not run" in run.stderr, run.stderr


@pytest.mark.controlplane
def test_service_account_kubeconfig_authenticates_as_the_account(cluster: ControlPlane) -> None:
    """A kubeconfig with a token minted for a ServiceAccount: the API server sees that
    account (not the admin), and it has no right the account was not given."""
    import asyncio
    import uuid

    from kubernetes_asyncio import client
    from kubernetes_asyncio.client.exceptions import ApiException

    from stickypack.kube.client import make_api_client

    name = f"probe-{uuid.uuid4().hex[:8]}"
    cluster.call(
        lambda api: client.CoreV1Api(api).create_namespaced_service_account(
            "default", {"metadata": {"name": name}}
        )
    )
    path = cluster.service_account_kubeconfig(name, expiration_seconds=4000)
    assert path.stat().st_mode & 0o077 == 0
    # the account's token alone (no admin credentials), valid for the time asked
    config = yaml.safe_load(path.read_text())
    assert [u["name"] for u in config["users"]] == [f"system:serviceaccount:default:{name}"]
    claims = config["users"][0]["user"]["token"].split(".")[1]
    payload = json.loads(base64.urlsafe_b64decode(claims + "=" * (-len(claims) % 4)))
    assert payload["exp"] - payload["iat"] == 4000

    async def probe() -> tuple[str, int]:
        api = await make_api_client(str(path))
        try:
            review = await client.AuthenticationV1Api(api).create_self_subject_review({})
            try:
                await client.CoreV1Api(api).list_node()
                status = 200
            except ApiException as exc:
                status = exc.status
            return review.status.user_info.username, status
        finally:
            await api.close()

    username, status = asyncio.run(probe())
    assert username == f"system:serviceaccount:default:{name}"
    assert status == 403


# ---------------------------------------------------------------- the harness's own decisions
# Fast tests of controlplane.py's helpers with hand-made inputs (no control plane): each
# pins a decision whose one-line mutation the tests above did not notice (mutation audit of
# stickypack.testing, /tmp/mut-cp).


def test_versions_env_is_read_as_the_shell_reads_it(tmp_path: Path) -> None:
    """Comments are skipped (even with a "=" in them), spaces and quotes around a value go."""
    from stickypack.testing.controlplane import _read_versions

    path = tmp_path / "versions.env"
    path.write_text(
        "# K8S_VERSION=v0.0.0 in a comment is not a pin\n"
        "\n"
        'K8S_VERSION = "v1.2.3"\n'
        "ETCD_VERSION='v3.4.5'\n"
        "HELM_VERSION=v4.0.0\n"
    )
    assert _read_versions(path) == {
        "K8S_VERSION": "v1.2.3",
        "ETCD_VERSION": "v3.4.5",
        "HELM_VERSION": "v4.0.0",
    }


def test_the_checkouts_versions_env_wins_over_the_working_directorys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run from another directory holding its own tools/k8s/versions.env, the harness still
    reads the versions of the checkout it was imported from."""
    from stickypack.testing.controlplane import versions_file

    other = tmp_path / "tools" / "k8s"
    other.mkdir(parents=True)
    (other / "versions.env").write_text("K8S_VERSION=v0.0.1\n")
    monkeypatch.chdir(tmp_path)
    assert versions_file() == REPO / "tools" / "k8s" / "versions.env"
    assert pinned_versions()["K8S_VERSION"] != "v0.0.1"


def test_binaries_dir_expands_a_home_relative_bin_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STICKYPACK_K8S_BIN", "~/k8s-bin")
    assert binaries_dir() == Path.home() / "k8s-bin"


def test_no_versions_env_and_no_bin_env_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Outside a checkout (no versions.env here nor in the working directory) and without
    $STICKYPACK_K8S_BIN: BinariesNotFoundError naming the variable, not a KeyError."""
    from stickypack.testing import BinariesNotFoundError, controlplane

    monkeypatch.delenv("STICKYPACK_K8S_BIN", raising=False)
    monkeypatch.setattr(controlplane, "_REPO_ROOT", tmp_path)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(BinariesNotFoundError, match="STICKYPACK_K8S_BIN"):
        binaries_dir()


def _executable(path: Path) -> Path:
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(0o755)
    return path


def test_find_binaries_wants_each_one_an_executable_file(tmp_path: Path) -> None:
    """etcd not executable, kube-apiserver a directory, kube-scheduler absent: all three
    missing; with only kube-scheduler absent, exactly that one is named."""
    from stickypack.testing import BinariesNotFoundError, find_binaries

    (tmp_path / "etcd").write_text("#!/bin/sh\n")  # mode 0644
    (tmp_path / "kube-apiserver").mkdir()  # a directory is "executable" (searchable)
    with pytest.raises(BinariesNotFoundError) as info:
        find_binaries(tmp_path)
    assert "missing in" in str(info.value)
    assert str(info.value).split(": ", 1)[1].split(";")[0] == "etcd, kube-apiserver, kube-scheduler"

    (tmp_path / "etcd").chmod(0o755)
    (tmp_path / "kube-apiserver").rmdir()
    _executable(tmp_path / "kube-apiserver")
    with pytest.raises(BinariesNotFoundError) as info:
        find_binaries(tmp_path)
    assert str(info.value).split(": ", 1)[1].split(";")[0] == "kube-scheduler"

    _executable(tmp_path / "kube-scheduler")
    assert find_binaries(tmp_path) == {n: tmp_path / n for n in ("etcd", "kube-apiserver", "kube-scheduler")}


class _Answers:
    """A loopback HTTP server answering GET with the next (status, body) of ``answers``,
    the last one forever; ``seen`` counts the requests."""

    def __init__(self, answers: list[tuple[int, str]]) -> None:
        import http.server
        import threading

        self.seen = 0
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                status, body = answers[min(outer.seen, len(answers) - 1)]
                outer.seen += 1
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/readyz"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@contextlib.contextmanager
def _process(tmp_path: Path, *args: str) -> Iterator[Any]:
    """A controlplane._Process running ``args`` (killed on leaving)."""
    from stickypack.testing.controlplane import _Process

    popen = subprocess.Popen(list(args))
    try:
        yield _Process("probe", popen, tmp_path / "probe.log")
    finally:
        popen.kill()
        popen.wait()


def test_readiness_waits_for_a_200(tmp_path: Path) -> None:
    """/readyz answering 500 twice, then 200: the wait returns only after the third request
    (a wait satisfied by any answer would make every "started" meaningless)."""
    from stickypack.testing.controlplane import _wait_healthy

    server = _Answers([(500, "[-]etcd failed"), (500, "[-]etcd failed"), (200, "ok")])
    try:
        with _process(tmp_path, "sleep", "60") as proc:
            _wait_healthy(proc, server.url, None, timeout=30)
        assert server.seen == 3
    finally:
        server.close()


def test_readiness_wait_times_out_with_an_error(tmp_path: Path) -> None:
    """Nothing listening (connection refused) until the deadline: ControlPlaneError naming
    the URL, after about ``timeout`` seconds, not before and not a silent return."""
    import socket
    import time

    from stickypack.testing import ControlPlaneError
    from stickypack.testing.controlplane import _wait_healthy

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}/readyz"
    with _process(tmp_path, "sleep", "60") as proc:
        start = time.monotonic()
        with pytest.raises(ControlPlaneError, match="not healthy at"):
            _wait_healthy(proc, url, None, timeout=1.0)
        assert time.monotonic() - start >= 1.0


def test_readiness_wait_stops_when_the_process_dies(tmp_path: Path) -> None:
    """A process that exited is reported at once with its exit code and log, not waited
    for until the timeout."""
    import time

    from stickypack.testing import ControlPlaneError
    from stickypack.testing.controlplane import _wait_healthy

    server = _Answers([(503, "starting")])
    (tmp_path / "probe.log").write_text("boom: flag provided but not defined\n")
    try:
        with _process(tmp_path, "sh", "-c", "exit 3") as proc:
            proc.popen.wait()
            start = time.monotonic()
            with pytest.raises(ControlPlaneError, match="exited with code 3") as info:
                _wait_healthy(proc, server.url, None, timeout=60)
            assert time.monotonic() - start < 10
            assert "flag provided but not defined" in str(info.value)
    finally:
        server.close()


def test_free_ports_are_never_handed_out_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    """The kernel may offer a port again once its socket is closed; the harness skips a port
    it already gave (two processes told to bind the same port would fight over it)."""
    import socket
    import types

    from stickypack.testing import controlplane

    offered = iter([40001, 40001, 40002])

    class Socket:
        def __init__(self, *args: object) -> None:
            self.port = next(offered)

        def __enter__(self) -> Socket:
            return self

        def __exit__(self, *args: object) -> None:
            pass

        def bind(self, address: tuple[str, int]) -> None:
            pass

        def getsockname(self) -> tuple[str, int]:
            return ("127.0.0.1", self.port)

    monkeypatch.setattr(controlplane, "_PORTS_GIVEN", set())
    # only the harness's name for the module: other threads keep the real sockets
    fake = types.SimpleNamespace(socket=Socket, AF_INET=socket.AF_INET, SOCK_STREAM=socket.SOCK_STREAM)
    monkeypatch.setattr(controlplane, "socket", fake)
    assert [controlplane._free_port(), controlplane._free_port()] == [40001, 40002]


def _fake_binaries(directory: Path, etcd: str) -> Path:
    """A bin dir whose etcd runs the shell code ``etcd`` and whose kube-apiserver and
    kube-scheduler exit 1 at once."""
    directory.mkdir()
    for name, body in (("etcd", etcd), ("kube-apiserver", "exit 1"), ("kube-scheduler", "exit 1")):
        (directory / name).write_text(f"#!/bin/sh\n{body}\n")
        (directory / name).chmod(0o755)
    return directory


def _attempts(log: Path) -> int:
    """How many times the harness started the process logging to ``log`` (it writes each
    command line, "# ...", before starting it)."""
    return sum(line.startswith("# ") for line in log.read_text().splitlines())


def test_a_port_clash_is_retried_three_times_then_reported(tmp_path: Path) -> None:
    """etcd failing with "address already in use" every time: three attempts on new ports,
    then ControlPlaneError; the work dir with etcd.log is kept and named."""
    from stickypack.testing import ControlPlaneError

    bin_dir = _fake_binaries(
        tmp_path / "bin", "echo 'listen tcp 127.0.0.1:1: bind: address already in use'; exit 1"
    )
    cp = ControlPlane(bin_dir, startup_timeout=10)
    with pytest.raises(ControlPlaneError) as info:
        cp.start()
    assert cp.work_dir is not None and f"work dir kept: {cp.work_dir}" in str(info.value)
    assert _attempts(cp.work_dir / "etcd.log") == 3
    assert "address already in use" in str(info.value)
    assert not (cp.work_dir / "kube-apiserver.log").exists()
    assert not cp.running and cp.failed
    shutil.rmtree(cp.work_dir)


def test_another_start_failure_is_not_retried(tmp_path: Path) -> None:
    """etcd failing for another reason: one attempt, reported with its log's tail, work dir
    kept."""
    from stickypack.testing import ControlPlaneError

    bin_dir = _fake_binaries(tmp_path / "bin", "echo 'etcd: bad flag --frobnicate'; exit 2")
    cp = ControlPlane(bin_dir, startup_timeout=10)
    with pytest.raises(ControlPlaneError, match="exited with code 2") as info:
        cp.start()
    assert "bad flag --frobnicate" in str(info.value)
    assert cp.work_dir is not None and cp.work_dir.is_dir()
    assert _attempts(cp.work_dir / "etcd.log") == 1
    shutil.rmtree(cp.work_dir)


def test_taint_specs() -> None:
    """ "key=value:Effect", "key:Effect" and dicts; a spec without key or effect is refused."""
    from stickypack.testing.controlplane import _taint

    assert _taint("dedicated=gpu:NoSchedule") == {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
    assert _taint("example.com/spot:PreferNoSchedule") == {
        "key": "example.com/spot",
        "effect": "PreferNoSchedule",
    }
    assert _taint({"key": "k", "effect": "NoExecute"}) == {"key": "k", "effect": "NoExecute"}
    for bad in ("dedicated=gpu", ":NoSchedule", "NoSchedule"):
        with pytest.raises(ValueError, match=repr(bad)):
            _taint(bad)


def test_pod_manifest_carries_every_option() -> None:
    from stickypack.testing import pod_manifest

    pod = pod_manifest(
        "p",
        cpu="250m",
        memory="1Gi",
        scheduler_name="stickypack",
        labels={"app": "x"},
        tolerations=[{"key": "k", "operator": "Exists"}],
        node_selector={"pool": "user"},
        namespace="ns",
    )
    assert pod["metadata"] == {"name": "p", "namespace": "ns", "labels": {"app": "x"}}
    assert pod["spec"]["schedulerName"] == "stickypack"
    assert pod["spec"]["tolerations"] == [{"key": "k", "operator": "Exists"}]
    assert pod["spec"]["nodeSelector"] == {"pool": "user"}
    # no kubelet: a grace period would leave a deleted bound pod Terminating forever
    assert pod["spec"]["terminationGracePeriodSeconds"] == 0
    (container,) = pod["spec"]["containers"]
    assert container["resources"] == {"requests": {"cpu": "250m", "memory": "1Gi"}}
    assert pod_manifest("q", cpu=None)["spec"]["containers"][0]["resources"] == {
        "requests": {"memory": "128Mi"}
    }
    bare = pod_manifest("r")["spec"]
    assert "tolerations" not in bare and "nodeSelector" not in bare


def test_scheduler_config_loading(tmp_path: Path) -> None:
    """A dict is copied deep (the harness's additions never reach the caller's dict), YAML
    text and files are read, empty YAML is the defaults, apiVersion/kind given are kept,
    and a non-mapping is refused with ValueError."""
    from stickypack.testing.controlplane import _load_scheduler_config

    given = {"profiles": [{"schedulerName": "a"}], "clientConnection": {"qps": 7}}
    cfg = _load_scheduler_config(given)
    cfg["clientConnection"]["kubeconfig"] = "/x"
    cfg["profiles"][0]["schedulerName"] = "b"
    assert given == {"profiles": [{"schedulerName": "a"}], "clientConnection": {"qps": 7}}
    assert cfg["apiVersion"] == "kubescheduler.config.k8s.io/v1"
    assert cfg["kind"] == "KubeSchedulerConfiguration"
    assert _load_scheduler_config("") == {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
    }
    assert _load_scheduler_config({"apiVersion": "kubescheduler.config.k8s.io/v2"})["apiVersion"] == (
        "kubescheduler.config.k8s.io/v2"
    )
    path = tmp_path / "config.yaml"
    path.write_text("profiles: [{schedulerName: from-file}]\n")
    assert _load_scheduler_config(path)["profiles"] == [{"schedulerName": "from-file"}]
    with pytest.raises(ValueError, match="must be a mapping"):
        _load_scheduler_config("- a\n- b\n")


def test_create_pod_refuses_ambiguous_arguments() -> None:
    """Checked before any request (so no control plane is needed): name and pod together,
    neither, or pod_manifest options beside pod=."""
    cp = ControlPlane()
    pod = {"metadata": {"name": "p"}, "spec": {"containers": []}}
    with pytest.raises(TypeError, match="either name"):
        cp.create_pod("p", pod=pod)
    with pytest.raises(TypeError, match="either name"):
        cp.create_pod()
    with pytest.raises(TypeError, match=r"\['cpu'\] cannot be combined"):
        cp.create_pod(pod=pod, cpu="1")


def test_test_keys_are_private(tmp_path: Path) -> None:
    """The serving, admin and service-account signing keys are readable by their owner only."""
    from stickypack.testing.controlplane import _make_certs

    certs = _make_certs(tmp_path / "pki")
    for key in (certs.serving_key, certs.admin_key, certs.sa_private):
        assert key.stat().st_mode & 0o077 == 0, key


def test_a_profile_without_a_scheduler_name_is_default_scheduler(tmp_path: Path) -> None:
    """As kube-scheduler defaults it: a profile without schedulerName serves default-scheduler."""
    from stickypack.testing import SchedulerHandle
    from stickypack.testing.controlplane import _Process

    config = {"profiles": [{"plugins": {}}, {"schedulerName": "packing"}]}
    with _process(tmp_path, "true") as proc:
        handle = SchedulerHandle("s", config, tmp_path / "c.yaml", tmp_path / "s.log", 1, proc)
        assert isinstance(handle._process, _Process)
        assert handle.scheduler_names == ["default-scheduler", "packing"]


@pytest.mark.parametrize("ci", ["", "true", "TRUE"])
def test_needs_binaries_skips_outside_ci_and_fails_on_ci(
    ci: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """conftest.needs_binaries with one of two named binaries missing: a skip outside CI,
    a failure with CI=true (any case), naming the missing one; the present one alone is found."""
    import conftest

    _executable(tmp_path / "etcd")
    monkeypatch.setenv("STICKYPACK_K8S_BIN", str(tmp_path))
    monkeypatch.setenv("CI", ci)
    outcome = pytest.fail.Exception if ci else pytest.skip.Exception
    with pytest.raises(outcome, match="helm"):
        conftest.needs_binaries("etcd", "helm")
    assert conftest.needs_binaries("etcd") == {"etcd": tmp_path / "etcd"}


@pytest.mark.controlplane
def test_work_dir_is_kept_when_asked_or_after_a_failure(tmp_path: Path) -> None:
    """A clean stop removes a temporary work dir; it stays with keep=True, when the caller
    gave it, when the with-block raised, or when a failure was recorded before (``failed``,
    as conftest sets it). ``pids`` still lists the stopped processes; a second start of a
    running plane is refused."""
    from conftest import needs_binaries
    from stickypack.testing import ControlPlaneError

    needs_binaries()
    requested = tmp_path / "requested"
    with ControlPlane(work_dir=requested) as cp, pytest.raises(ControlPlaneError, match="already started"):
        cp.start()
    assert (requested / "etcd.log").is_file() and (requested / "kube-apiserver.log").is_file()
    assert {"etcd", "kube-apiserver"} <= set(cp.pids)
    kept: list[Path] = []
    with ControlPlane(keep=True) as cp:
        kept.append(Path(str(cp.work_dir)))
    with pytest.raises(RuntimeError, match="the test failed"), ControlPlane() as cp:
        kept.append(Path(str(cp.work_dir)))
        raise RuntimeError("the test failed")
    with ControlPlane() as cp:
        kept.append(Path(str(cp.work_dir)))
        cp.failed = True
    try:
        assert [path.is_dir() for path in kept] == [True, True, True]
    finally:
        for path in kept:
            shutil.rmtree(path, ignore_errors=True)


def test_until_polls_until_done_and_raises_at_the_deadline() -> None:
    """_until (the harness's wait for deletions) calls ``get`` until ``done`` holds: here the
    third answer; never done: ControlPlaneError naming what is still present."""
    import asyncio

    from stickypack.testing import ControlPlaneError
    from stickypack.testing.controlplane import _until

    answers: list[int] = []

    async def get() -> int:
        answers.append(len(answers))
        return answers[-1]

    asyncio.run(_until(get, lambda n: n == 2, 10.0, "pods"))
    assert answers == [0, 1, 2]
    with pytest.raises(ControlPlaneError, match=r"nodes still present after 0\.2 s"):
        asyncio.run(_until(get, lambda n: False, 0.2, "nodes"))


def test_a_pods_condition_is_found_by_type() -> None:
    from stickypack.testing.controlplane import _condition, _scheduled_message

    scheduled = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/1 nodes"}
    pod = {"status": {"conditions": [{"type": "Initialized", "status": "True"}, scheduled]}}
    assert _condition(pod, "PodScheduled") == scheduled
    assert _condition(pod, "Ready") is None and _condition(None, "PodScheduled") is None
    assert _scheduled_message(pod) == "Unschedulable: 0/1 nodes"
    assert "not yet seen by a scheduler" in _scheduled_message({"status": {}})


def test_terminate_kills_what_is_left_of_the_process_group(tmp_path: Path) -> None:
    """A started process is registered for the atexit cleanup; its leader gone, a child it
    left in its group (its own session) is still killed by _terminate, which unregisters it."""
    import time

    from stickypack.testing.controlplane import _LIVE, _spawn, _terminate

    log = tmp_path / "group.log"
    proc = _spawn("group", ["sh", "-c", "sleep 60 & echo child=$!"], log, cwd=tmp_path)
    assert _LIVE[proc.pid] is proc
    proc.popen.wait(10)  # the leader exits at once, its child sleeps on
    (line,) = [x for x in log.read_text().splitlines() if x.startswith("child=")]
    child = int(line.removeprefix("child="))
    assert _alive(child) and os.getpgid(child) == proc.pid
    _terminate(proc, timeout=5)
    deadline = time.monotonic() + 5
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child)
    assert proc.pid not in _LIVE


def test_spawned_processes_bypass_proxies_for_loopback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The API server, etcd and schedulers talk over 127.0.0.1: both spellings of NO_PROXY
    name it, after what the environment had."""
    from stickypack.testing.controlplane import _spawn, _terminate

    monkeypatch.setenv("NO_PROXY", "example.com")
    monkeypatch.delenv("no_proxy", raising=False)
    log = tmp_path / "env.log"
    proc = _spawn("env", ["sh", "-c", 'echo "NO_PROXY=$NO_PROXY no_proxy=$no_proxy"'], log, cwd=tmp_path)
    proc.popen.wait(10)
    _terminate(proc)
    loopback = "127.0.0.1,localhost,example.com"
    assert f"NO_PROXY={loopback} no_proxy={loopback}" in log.read_text().splitlines()


def test_the_cluster_fixture_resets_before_and_after_the_test() -> None:
    """``cluster`` resets the session's control plane before handing it to the test (a
    ``controlplane``-fixture test before may have left objects) and again after it (for a
    later ``controlplane``-fixture test). Driven by hand, with a plane that records calls."""
    import conftest

    calls: list[str] = []
    plane = type("Plane", (), {"reset": lambda self: calls.append("reset")})()
    fixture = conftest.cluster._get_wrapped_function()
    steps = fixture(plane)
    assert next(steps) is plane
    assert calls == ["reset"]
    with pytest.raises(StopIteration):
        next(steps)
    assert calls == ["reset", "reset"]


def test_create_pod_puts_the_pod_in_the_namespace_given() -> None:
    """By name: the manifest's own namespace is the one given (the API server refuses a
    body whose namespace differs from the request's), "default" without one."""
    cp = ControlPlane()
    sent: list[tuple[list[dict[str, Any]], str | None]] = []

    def create_pods(pods: Any, *, namespace: str | None = None) -> list[dict[str, Any]]:
        bodies = [dict(p) for p in pods]
        sent.append((bodies, namespace))
        return bodies

    cp.create_pods = create_pods  # type: ignore[method-assign]
    cp.create_pod("a", namespace="team-b")
    cp.create_pod("b")
    assert [(b[0]["metadata"]["namespace"], ns) for b, ns in sent] == [
        ("team-b", "team-b"),
        ("default", None),
    ]


def test_a_scheduler_is_waited_for_its_own_timeout(tmp_path: Path) -> None:
    """start_scheduler(timeout=1) on a plane whose startup_timeout is 6: a kube-scheduler that
    never answers is given up after 1 s (not 6), named in the error, the plane marked failed."""
    from stickypack.testing import ControlPlaneError
    from stickypack.testing.controlplane import _terminate

    bin_dir = _fake_binaries(tmp_path / "bin", "exit 1")
    (bin_dir / "kube-scheduler").write_text("#!/bin/sh\nexec sleep 30\n")
    cp = ControlPlane(bin_dir, work_dir=tmp_path / "work", startup_timeout=6)
    cp.work_dir = tmp_path / "work"
    cp.work_dir.mkdir()
    cp.kubeconfig = tmp_path / "admin.kubeconfig"
    cp._binaries = {"kube-scheduler": bin_dir / "kube-scheduler"}
    with _process(tmp_path, "sleep", "30") as apiserver:  # stands for a running kube-apiserver
        cp._apiserver = apiserver
        start = time.monotonic()
        with pytest.raises(ControlPlaneError, match=r"not healthy at .* after 1 s"):
            cp.start_scheduler(None, timeout=1)
        elapsed = time.monotonic() - start
        cp._apiserver = None
    for proc in cp._all_processes:
        _terminate(proc)
    assert 1 <= elapsed < 4
    assert cp.failed and cp.schedulers == []


@pytest.mark.controlplane
def test_deleting_all_pods_and_nodes_waits_until_they_are_gone(cluster: ControlPlane) -> None:
    """A pod bound to a node with the default grace period (30 s) is gone at once (grace
    period 0: no kubelet would ever confirm it); a pod or a node held by a finalizer makes
    the wait time out naming its kind, and is gone once the finalizer is off."""
    from stickypack.testing import ControlPlaneError, pod_manifest

    cluster.create_node("n1")
    bound = pod_manifest("bound")
    bound["spec"]["nodeName"] = "n1"
    del bound["spec"]["terminationGracePeriodSeconds"]
    cluster.create_pod(pod=bound)
    cluster.delete_all_pods(timeout=5)
    assert cluster.pods() == []

    held = pod_manifest("held")
    held["metadata"]["finalizers"] = ["example.com/hold"]
    cluster.create_pod(pod=held)
    cluster._core(lambda core: core.patch_node("n1", {"metadata": {"finalizers": ["example.com/hold"]}}))
    release = {"metadata": {"finalizers": None}}
    try:
        with pytest.raises(ControlPlaneError, match="pods still present after 1"):
            cluster.delete_all_pods(timeout=1)
        with pytest.raises(ControlPlaneError, match="nodes still present after 1"):
            cluster.delete_all_nodes(timeout=1)
    finally:
        with contextlib.suppress(Exception):
            cluster._core(lambda core: core.patch_namespaced_pod("held", "default", release))
        with contextlib.suppress(Exception):
            cluster._core(lambda core: core.patch_node("n1", release))
    cluster.delete_all_pods(timeout=5)
    cluster.delete_all_nodes(timeout=5)
    assert cluster.pods() == [] and cluster.nodes() == []


@pytest.mark.controlplane
def test_bound_claims_and_device_pools_are_stored_as_asked(cluster: ControlPlane) -> None:
    """create_bound_claim: the volume and the claim both Bound, the volume's node affinity
    the terms given, the claim bind-completed; reset deletes them. create_device_pool: a
    slice per node with exactly the devices asked, one DeviceClass for both pools;
    allocate_claim: every device named; delete_all_dra leaves none of them."""
    import uuid

    from kubernetes_asyncio import client

    terms = [{"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["n1"]}]}]
    cluster.create_bound_claim("data", node_selector_terms=terms, storage="2Gi")

    async def volumes(api: Any) -> tuple[Any, Any]:
        core = client.CoreV1Api(api)
        return (
            await core.list_persistent_volume(),
            await core.list_persistent_volume_claim_for_all_namespaces(),
        )

    async def dra(api: Any) -> tuple[Any, Any, Any]:
        resource = client.ResourceV1Api(api)
        return (
            await resource.list_resource_slice(),
            await resource.list_namespaced_resource_claim("default"),
            await resource.list_device_class(),
        )

    pvs, pvcs = cluster._to_dict(cluster.call(volumes))
    (pv,) = pvs["items"]
    (pvc,) = pvcs["items"]
    assert (pv["status"]["phase"], pvc["status"]["phase"]) == ("Bound", "Bound")
    assert pv["spec"]["nodeAffinity"] == {"required": {"nodeSelectorTerms": terms}}
    assert (pvc["metadata"].get("annotations") or {}).get("pv.kubernetes.io/bind-completed") == "yes"
    # DRA objects of their own (reset leaves DRA objects to the tests that made them)
    suffix = uuid.uuid4().hex[:6]
    driver, n1, n2, gpus = f"gpu-{suffix}.example.com", f"n1-{suffix}", f"n2-{suffix}", f"gpus-{suffix}"
    try:
        cluster.create_device_pool(n1, 3, driver=driver)
        cluster.create_device_pool(n2, 1, driver=driver)  # the DeviceClass is there already
        cluster.create_claim(gpus, 2, driver=driver)
        cluster.allocate_claim(gpus, n1, ["dev-0", "dev-2"], driver=driver)
        slices, claims, classes = cluster._to_dict(cluster.call(dra))
        published = {
            s["spec"]["nodeName"]: [d["name"] for d in s["spec"].get("devices") or []]
            for s in slices["items"]
            if s["spec"]["driver"] == driver
        }
        assert published == {n1: ["dev-0", "dev-1", "dev-2"], n2: ["dev-0"]}
        (claim,) = (c for c in claims["items"] if c["metadata"]["name"] == gpus)
        results = claim["status"]["allocation"]["devices"]["results"]
        assert [(r["pool"], r["device"]) for r in results] == [(n1, "dev-0"), (n1, "dev-2")]
        assert driver in {c["metadata"]["name"] for c in classes["items"]}
    finally:
        cluster.delete_all_dra()
    slices, claims, classes = cluster._to_dict(cluster.call(dra))
    assert (slices["items"], claims["items"], classes["items"]) == ([], [], [])
    cluster.reset()
    pvs, pvcs = cluster._to_dict(cluster.call(volumes))
    assert (pvs["items"], pvcs["items"]) == ([], [])


@pytest.mark.controlplane
def test_a_scheduler_connects_and_delegates_as_the_kubeconfig_given(cluster: ControlPlane) -> None:
    """A ServiceAccount without any right: kube-scheduler started with its kubeconfig is
    refused the nodes it lists (so never ready: given up after the timeout given) and,
    delegating authentication with that kubeconfig too, the authentication ConfigMap."""
    import re
    import uuid

    from kubernetes_asyncio import client

    from stickypack.testing import ControlPlaneError

    name = f"nobody-{uuid.uuid4().hex[:8]}"
    cluster.call(
        lambda api: client.CoreV1Api(api).create_namespaced_service_account(
            "default", {"metadata": {"name": name}}
        )
    )
    kubeconfig = cluster.service_account_kubeconfig(name)
    was_failed = cluster.failed
    start = time.monotonic()
    with pytest.raises(ControlPlaneError, match="not healthy") as failed:
        cluster.start_scheduler(None, kubeconfig=kubeconfig, timeout=5)
    assert time.monotonic() - start < 30
    cluster.failed = was_failed  # an expected failure: no reason to keep the logs
    found = re.search(r"log (/\S+\.log):", str(failed.value))
    assert found is not None
    log = Path(found.group(1)).read_text()
    assert f'nodes is forbidden: User \\"system:serviceaccount:default:{name}\\"' in log
    assert "Unable to get configmap/extension-apiserver-authentication" in log
