"""The Dask story on a real kube-scheduler: spreading (default) versus packing (stickypack).

Twenty 8-CPU / 32 GiB nodes, then twenty Dask worker pods of two users (1 CPU / 4 GiB
each). The default scheduler spreads them over many nodes, so none of those nodes can be
scaled down; the ``stickypack`` profile packs them onto the fewest nodes that fit.
"""

from __future__ import annotations

import math

import pytest
import yaml

from stickypack.core.policy import policy_from_yaml
from stickypack.render import PROFILE_BUILDERS, scheduler_config, scheduler_config_yaml
from stickypack.testing import ControlPlane, pod_manifest

NODES = 20
NODE_CPU, NODE_MEMORY_GIB = 8, 32
WORKERS_PER_USER = 10
USERS = ("alice", "bob")
WORKER_CPU, WORKER_MEMORY_GIB = 1, 4


def _min_nodes() -> int:
    """Fewest nodes that can hold all workers: the tightest resource decides."""
    workers = WORKERS_PER_USER * len(USERS)
    return max(
        math.ceil(workers * WORKER_CPU / NODE_CPU),
        math.ceil(workers * WORKER_MEMORY_GIB / NODE_MEMORY_GIB),
    )


def _dask_workers(scheduler_name: str) -> list[dict]:
    pods = []
    for user in USERS:
        for i in range(WORKERS_PER_USER):
            name = f"dask-{user}-worker-{i}"
            pods.append(
                pod_manifest(
                    name,
                    cpu=str(WORKER_CPU),
                    memory=f"{WORKER_MEMORY_GIB}Gi",
                    scheduler_name=scheduler_name,
                    labels={
                        "app.kubernetes.io/name": "dask",
                        "dask.org/cluster-name": f"dask-{user}",
                        "dask.org/component": "worker",
                        "hub.jupyter.org/username": user,
                    },
                )
            )
    return pods


def _place_workers(cp: ControlPlane, config: dict, scheduler_name: str) -> dict[str, str]:
    cp.start_scheduler(config)
    for i in range(NODES):
        cp.create_node(f"node-{i:02d}", cpu=str(NODE_CPU), memory=f"{NODE_MEMORY_GIB}Gi")
    pods = _dask_workers(scheduler_name)
    cp.create_pods(pods)
    return cp.wait_bound([p["metadata"]["name"] for p in pods], timeout=60)


@pytest.mark.controlplane
def test_default_scheduler_spreads_dask_workers(cluster: ControlPlane) -> None:
    placement = _place_workers(cluster, scheduler_config(["default-scheduler"]), "default-scheduler")
    assert len(placement) == WORKERS_PER_USER * len(USERS)
    assert len(set(placement.values())) >= 10, placement


@pytest.mark.controlplane
def test_stickypack_profile_packs_dask_workers(cluster: ControlPlane) -> None:
    placement = _place_workers(cluster, scheduler_config(["stickypack"]), "stickypack")
    used = set(placement.values())
    assert _min_nodes() == 3
    assert len(used) == _min_nodes(), placement


@pytest.mark.controlplane
def test_both_profiles_in_one_scheduler(cluster: ControlPlane) -> None:
    """kube-scheduler accepts the rendered config with both profiles, and serves both."""
    handle = cluster.start_scheduler(scheduler_config(["stickypack", "default-scheduler"]))
    assert handle.scheduler_names == ["stickypack", "default-scheduler"]
    cluster.create_node("n1")
    cluster.create_pod("packed", scheduler_name="stickypack")
    cluster.create_pod("spread", scheduler_name="default-scheduler")
    assert cluster.wait_bound(["packed", "spread"], timeout=30) == {"packed": "n1", "spread": "n1"}


def test_rendered_stickypack_profile_packs_with_z2jh_weights_without_image_locality() -> None:
    config = scheduler_config(["stickypack"], kubeconfig="/k/config")
    assert config["apiVersion"] == "kubescheduler.config.k8s.io/v1"
    assert config["kind"] == "KubeSchedulerConfiguration"
    assert config["leaderElection"] == {
        "leaderElect": False,
        "resourceName": "stickypack-scheduler",
        "resourceNamespace": "kube-system",
    }
    assert config["clientConnection"] == {"kubeconfig": "/k/config"}
    (profile,) = config["profiles"]
    assert profile["schedulerName"] == "stickypack"
    score = profile["plugins"]["score"]
    assert {"name": "NodeResourcesBalancedAllocation"} in score["disabled"]
    assert {"name": "ImageLocality"} in score["disabled"]  # as the simulated stickypack policy
    assert {p["name"]: p["weight"] for p in score["enabled"]} == {
        "NodeAffinity": 14631,
        "InterPodAffinity": 1331,
        "NodeResourcesFit": 121,
    }
    (fit,) = profile["pluginConfig"]
    assert fit["name"] == "NodeResourcesFit"
    assert fit["args"]["scoringStrategy"] == {
        "type": "MostAllocated",
        "resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}],
    }


def test_render_options_and_errors() -> None:
    assert scheduler_config(["default-scheduler"])["profiles"] == [{"schedulerName": "default-scheduler"}]
    assert "clientConnection" not in scheduler_config(["stickypack"])
    extender = {"urlPrefix": "http://127.0.0.1:1/", "filterVerb": "filter", "weight": 1}
    config = scheduler_config(["stickypack"], extender=extender)
    assert config["extenders"] == [extender] and config["extenders"][0] is not extender
    assert yaml.safe_load(scheduler_config_yaml(["stickypack"])) == scheduler_config(["stickypack"])
    # Builders return fresh dicts: editing one rendering does not leak into the next.
    scheduler_config(["stickypack"])["profiles"][0]["plugins"]["score"]["enabled"].clear()
    assert PROFILE_BUILDERS["stickypack"]()["plugins"]["score"]["enabled"]
    with pytest.raises(ValueError, match="unknown"):
        scheduler_config(["nope"])
    with pytest.raises(ValueError):
        scheduler_config([])
    with pytest.raises(ValueError, match="twice"):
        scheduler_config(["stickypack", "stickypack"])
    with pytest.raises(TypeError):
        scheduler_config("stickypack")


def test_render_client_connection_lease_and_policy_profiles() -> None:
    """``clientConnection`` holds each option given (``qps`` as the float it is, ``burst``
    alone too, next to ``kubeconfig``); the Lease is named for the profiles in the order
    given (``<profiles>-scheduler``); every profile of a policy is rendered."""
    connection = scheduler_config(["stickypack"], kubeconfig="/k", qps=2.5, burst=7)["clientConnection"]
    assert connection == {"kubeconfig": "/k", "qps": 2.5, "burst": 7}
    assert scheduler_config(["stickypack"], burst=7)["clientConnection"] == {"burst": 7}
    assert scheduler_config(["stickypack"], qps=0.5)["clientConnection"] == {"qps": 0.5}
    # "z2jh" + "-" + "default-scheduler" + "-scheduler", not sorted
    lease = scheduler_config(["z2jh", "default-scheduler"])["leaderElection"]["resourceName"]
    assert lease == "z2jh-default-scheduler-scheduler"
    two = policy_from_yaml(
        "name: two\nprofiles:\n"
        "  - {name: one, filters: [NodeResourcesFit], score: [MostAllocated]}\n"
        "  - {name: other, filters: [NodeResourcesFit], score: [LeastAllocated]}\n"
    )
    config = scheduler_config(["default-scheduler"], policies=[two])
    assert [p["schedulerName"] for p in config["profiles"]] == ["default-scheduler", "one", "other"]


@pytest.mark.controlplane
def test_rendered_scheduler_with_leader_election_keeps_off_the_default_lock(cluster: ControlPlane) -> None:
    """Leader election on in both: the default scheduler holds kube-system/kube-scheduler and
    the rendered one its own Lease, so both schedule (sharing a lock, one would wait)."""
    cluster.create_node("n1")
    cluster.start_scheduler(None, leader_elect=True)
    cluster.start_scheduler(scheduler_config(["stickypack"]), leader_elect=True)
    cluster.create_pod("by-default", scheduler_name="default-scheduler")
    cluster.create_pod("by-stickypack", scheduler_name="stickypack")
    assert cluster.wait_bound(["by-default", "by-stickypack"], timeout=30) == {
        "by-default": "n1",
        "by-stickypack": "n1",
    }


@pytest.mark.controlplane
def test_rendered_scheduler_routing_sends_labelled_pods_to_the_scheduler(
    cluster: ControlPlane, capsys: pytest.CaptureFixture[str]
) -> None:
    """``stickypack render scheduler-routing`` applied to the real API server: a labelled pod
    created without a scheduler name gets ``stickypack-builds`` (and that scheduler binds it);
    unlabelled pods, pods that name a scheduler, and pods of other namespaces keep theirs."""
    import uuid

    from stickypack.cli import main

    mark = uuid.uuid4().hex[:8]
    assert main(["render", "scheduler-routing", "--selector", f"route={mark}", "--namespace", "default"]) == 0
    docs = list(yaml.safe_load_all(capsys.readouterr().out))
    cluster.create_node("n1")
    labels = {"route": mark}
    try:
        with cluster.admission_policies(docs):  # returns once a dry-run pod is routed
            probe = cluster.create_pod(pod=pod_manifest("probe", labels=labels))
            assert probe["spec"]["schedulerName"] == "stickypack-builds"
            named = cluster.create_pod(pod=pod_manifest("named", labels=labels, scheduler_name="mine"))
            plain = cluster.create_pod(pod=pod_manifest("plain"))
            other = pod_manifest("elsewhere", labels=labels)
            other["metadata"]["namespace"] = "kube-system"
            elsewhere = cluster.create_pod(pod=other, namespace="kube-system")
            assert named["spec"]["schedulerName"] == "mine"
            assert plain["spec"]["schedulerName"] == "default-scheduler"
            assert elsewhere["spec"]["schedulerName"] == "default-scheduler"
            cluster.start_scheduler(scheduler_config(["stickypack-builds"]))
            assert cluster.wait_bound(["probe"], timeout=30) == {"probe": "n1"}
    finally:
        cluster.delete_all_pods()


def test_rendered_z2jh_profile_is_the_user_schedulers_scoring_with_image_locality() -> None:
    (profile,) = scheduler_config(["z2jh"])["profiles"]
    assert profile["schedulerName"] == "z2jh"
    score = profile["plugins"]["score"]
    assert {"name": "ImageLocality"} in score["disabled"]  # disabled to be re-weighted
    assert {p["name"]: p["weight"] for p in score["enabled"]} == {
        "NodeAffinity": 14631,
        "InterPodAffinity": 1331,
        "NodeResourcesFit": 121,
        "ImageLocality": 11,
    }
