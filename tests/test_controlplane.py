"""The local control plane: real etcd, kube-apiserver and kube-scheduler, fake nodes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

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
        "profiles: [{schedulerName: second}]\n",
        name="second",
    )
    assert a.port != b.port and a.pid != b.pid
    cluster.create_node("n1")
    cluster.create_pod("p-default", cpu="100m")
    cluster.create_pod("p-second", cpu="100m", scheduler_name="second")
    assert cluster.wait_bound(["p-default", "p-second"], timeout=30) == {
        "p-default": "n1",
        "p-second": "n1",
    }
    cluster.stop_scheduler(b)
    assert not b.alive and cluster.schedulers == [a]
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
def test_stop_leaves_no_process(controlplane: ControlPlane) -> None:
    # A second, independent control plane (the session one stays up).
    cp = ControlPlane()
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
    path = cluster.service_account_kubeconfig(name)
    assert path.stat().st_mode & 0o077 == 0

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
