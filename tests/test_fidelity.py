"""The simulator's `default` and `z2jh` policies pick the nodes the real kube-scheduler picks.

Random cases (node sizes, bound pods, taints, tolerations, preferred affinity) placed by the
real kube-scheduler of the local control plane; the node it binds must be among the policy's
top-scoring nodes. `benchmarks/fidelity.py --cases 300` runs the long version.
"""

from __future__ import annotations

import pytest

from stickypack.policies import load_builtin
from stickypack.render import scheduler_config
from stickypack.testing.fidelity import agreement, run_cases, wait_scheduler_cache

pytestmark = pytest.mark.controlplane

CASES = 40


@pytest.mark.parametrize(
    ("policy", "profile"),
    [("default", "default-scheduler"), ("z2jh", "stickypack")],
)
def test_policy_agrees_with_kube_scheduler(cluster, policy, profile):
    cluster.start_scheduler(scheduler_config([profile]))
    cases = run_cases(cluster, load_builtin(policy), profile, CASES, seed=7)
    bad = [c.describe() for c in cases if not c.agrees]
    assert len(cases) == CASES
    assert all(c.chosen is not None for c in cases), "\n".join(bad)
    assert agreement(cases) >= 0.975, "\n".join(bad)


def test_a_spreading_policy_disagrees_with_the_packing_scheduler(cluster):
    """The check has teeth: `default` (spreading) against the packing profile disagrees."""
    cluster.start_scheduler(scheduler_config(["stickypack"]))
    cases = run_cases(cluster, load_builtin("default"), "stickypack", 25, seed=11)
    assert agreement(cases) < 0.8


def test_pod_level_resources_decide_as_in_kube_scheduler(cluster):
    """A pod whose pod-level cpu (4) does not fit the fuller node, though its container's (1)
    would: kube-scheduler (PodLevelResources on) and the z2jh policy both take the emptier
    node; reading the containers alone, MostAllocated would take the fuller one."""
    import numpy as np

    from stickypack.core import NodeTable, Pod, SchedulingContext
    from stickypack.core.resources import parse_resource_list
    from stickypack.testing.controlplane import pod_manifest

    cluster.start_scheduler(scheduler_config(["stickypack"]))
    table = NodeTable()
    for name in ("full", "empty"):
        cluster.create_node(name, cpu="8", memory="32Gi")
        table.upsert_node(name, parse_resource_list({"cpu": "8", "memory": "32Gi", "pods": "110"}))
    filler = pod_manifest("filler", cpu="5", memory="1Gi")
    filler["spec"]["nodeName"] = "full"
    cluster.create_pod(pod=filler)
    table.add_pod(table.slot("full"), Pod.from_dict(filler))
    pod = pod_manifest("pod-level", cpu="1", memory="1Gi", scheduler_name="stickypack")
    pod["spec"]["resources"] = {"requests": {"cpu": "4", "memory": "1Gi"}}
    created = cluster.create_pod(pod=pod)
    assert created["spec"].get("resources", {}).get("requests", {}).get("cpu") == "4"  # the gate is on
    assert cluster.wait_bound(["pod-level"])["pod-level"] == "empty"
    z2jh = load_builtin("z2jh")

    def chosen() -> int | None:
        return z2jh.select(Pod.from_dict(pod), table, SchedulingContext(), np.random.default_rng(0))

    assert chosen() == table.slot("empty")
    del pod["spec"]["resources"]  # the containers alone: the fuller node
    assert chosen() == table.slot("full")


def test_fractional_requests_add_up_as_in_kube_scheduler(cluster):
    """The API server stores every quantity rounded up to thousandths of its unit, and
    kube-scheduler adds a pod's quantities and rounds the total once: two containers of 0.5
    bytes of memory need 1 byte (the pod binds to a node of 1 byte); 0.9995 and 0.0005 bytes
    need 2 (1.000 + 0.001); two of 0.5 millicores need 2 millicores (the pod does not fit a
    node of 1). The model agrees on each, read from the pods as written and as the API
    server returns them."""
    import numpy as np

    from stickypack.core import NodeTable, Pod, SchedulingContext
    from stickypack.core.resources import parse_resource_list
    from stickypack.testing.controlplane import pod_manifest

    cases = {  # pod: (its containers' requests, its node's cpu and memory, fits)
        "memory-halves": ([{"memory": "0.5"}] * 2, ("1", "1"), True),
        "memory-rounded": ([{"memory": "0.9995"}, {"memory": "0.0005"}], ("1", "1"), False),
        "cpu-halves": ([{"cpu": "0.5m"}] * 2, ("1m", "1Gi"), False),
    }
    scheduler = cluster.start_scheduler(None)
    table = NodeTable()
    pods = {}
    for name, (_, (cpu, memory), _) in cases.items():
        cluster.create_node(f"for-{name}", cpu=cpu, memory=memory, labels={"for": name})
        allocatable = parse_resource_list({"cpu": cpu, "memory": memory, "pods": "110"})
        table.upsert_node(f"for-{name}", allocatable, labels={"for": name})
    wait_scheduler_cache(cluster, [scheduler], len(cases), 0, 30)  # its first verdict is on resources
    for name, (requests, _, _) in cases.items():
        pod = pod_manifest(name)
        pod["spec"]["nodeSelector"] = {"for": name}
        pod["spec"]["containers"] = [
            {"name": f"c{i}", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": r}}
            for i, r in enumerate(requests)
        ]
        pods[name] = (pod, cluster.create_pod(pod=pod))
    assert cluster.wait_bound(["memory-halves"])["memory-halves"] == "for-memory-halves"
    for name, reason in (("memory-rounded", "Insufficient memory"), ("cpu-halves", "Insufficient cpu")):
        with pytest.raises(Exception, match=reason):  # tried at creation, refused at once
            cluster.wait_bound([name], timeout=4)
    policy, ctx = load_builtin("default"), SchedulingContext()
    for name, (_, _, fits) in cases.items():
        for manifest in pods[name]:  # as written, and as the API server returned it
            chosen = policy.select(Pod.from_dict(manifest), table, ctx, np.random.default_rng(0))
            assert chosen == (table.slot(f"for-{name}") if fits else None), (
                name,
                manifest["spec"]["containers"],
            )
