"""DRA in the scale-down plan (core.dra.DraDevices, core.drain.plan_scale_down's ``dra``):
a pod whose ResourceClaims hold node-local devices moves as the cluster-autoscaler's removal
simulation moves it with ``--enable-dynamic-resource-allocation``: its claims released (their
devices freed, unless a pod that stays uses them) and allocated again on the target: by
kube-scheduler's allocator (its CEL selectors) when DraDevices has one, else from the
target's free node-local devices of the same driver."""

from __future__ import annotations

from typing import Any

from stickypack.core.dra import DeviceNeed, DraDevices
from stickypack.core.draalloc import DraAllocator
from stickypack.core.drain import ScaleDownPlan, plan_scale_down
from stickypack.core.nodetable import NodeTable
from stickypack.core.pod import Pod
from stickypack.dracel import compile_selector
from stickypack.policies import load_builtin
from stickypack.testing import pod_manifest

GI = 1024**3
GPU = "gpu.example.com"
NIC = "nic.example.com"
FILTERS = load_builtin("default").profiles[0].filters


def _slice(
    node: str | None, *names: str, driver: str = GPU, pool: str | None = None, **spec: Any
) -> dict[str, Any]:
    """A ResourceSlice publishing ``names``: node-local on ``node``, else on all nodes."""
    body: dict[str, Any] = {
        "driver": driver,
        "pool": {"name": pool or node or "fabric", "generation": 1, "resourceSliceCount": 1},
        "devices": [{"name": n} for n in names],
        **spec,
    }
    if node is not None:
        body["nodeName"] = node
    else:
        body["allNodes"] = True
    return {"metadata": {"name": f"{pool or node}-{driver}"}, "spec": body}


def _claim(name: str, *devices: tuple[str, str], driver: str = GPU, **extra: Any) -> dict[str, Any]:
    """A claim of ``default`` allocated the ``(pool, device)`` pairs."""
    results = [{"request": "r", "driver": driver, "pool": pool, "device": d, **extra} for pool, d in devices]
    return {
        "metadata": {"name": name, "namespace": "default"},
        "status": {"allocation": {"devices": {"results": results}}},
    }


def _pod(name: str, *claims: str, cpu: str = "1", owner: str = "ReplicaSet") -> Pod:
    raw = pod_manifest(name, cpu=cpu, memory="1Gi")
    raw["metadata"]["ownerReferences"] = [
        {"apiVersion": "apps/v1", "kind": owner, "name": "o", "uid": "u", "controller": True}
    ]
    raw["spec"]["resourceClaims"] = [{"name": f"c{k}", "resourceClaimName": c} for k, c in enumerate(claims)]
    return Pod.from_dict(raw)


def _table(nodes: tuple[str, ...], pods: dict[str, list[Pod]]) -> NodeTable:
    """4-cpu nodes ``nodes`` holding ``pods``."""
    table = NodeTable()
    for name in nodes:
        table.upsert_node(name, {"cpu": 4000, "memory": 16 * GI, "pods": 110})
    for node, bound in pods.items():
        for pod in bound:
            table.add_pod(table.index[node], pod)
    return table


def _plan(
    pods: dict[str, list[Pod]],
    candidates: list[str],
    slices: list[dict[str, Any]] | None,
    claims: list[dict[str, Any]] | None = None,
    nodes: tuple[str, ...] = ("gpu-a", "cpu-b", "gpu-c"),
) -> ScaleDownPlan:
    """The plan over 4-cpu nodes ``nodes`` holding ``pods``, with DRA (``slices`` and
    ``claims``) or without (``slices`` None)."""
    table = _table(nodes, pods)
    dra = None if slices is None else DraDevices.read(slices, claims or [], pods)
    plan = plan_scale_down(table, pods, candidates, FILTERS, dra=dra)
    if dra is not None:  # the caller's devices are as they were
        again = DraDevices.read(slices or [], claims or [], pods)
        assert all(dra.free_devices(n) == again.free_devices(n) for n in nodes)
    return plan


def test_a_pod_holding_a_node_local_device_needs_a_free_device_of_its_driver_elsewhere() -> None:
    """gpu-a's trainer holds gpu-a's g0: cpu-b has room for its cpu but no devices, so with
    DRA gpu-a keeps it (no room), where the plan without DRA moved it to cpu-b; once gpu-c
    publishes a free device of the driver, the trainer moves there (cpu-b fails the DRA
    filter, first by row though it is)."""
    trainer = _pod("trainer", "train-gpu")
    pods = {"gpu-a": [trainer], "cpu-b": [], "gpu-c": [_pod("pinned", owner="DaemonSet", cpu="100m")]}
    claims = [_claim("train-gpu", ("gpu-a", "g0"))]
    without = _plan(pods, ["gpu-a"], None, claims)
    assert (without.removable, without.moves) == (("gpu-a",), {"default/trainer": "cpu-b"})
    gpu_a_only = [_slice("gpu-a", "g0", "g1")]
    plan = _plan(pods, ["gpu-a"], gpu_a_only, claims)
    assert (plan.removable, plan.moves, plan.no_room) == ((), {}, {"gpu-a": "default/trainer"})
    # gpu-a's own free g1 is no room: gpu-a is the node being removed
    other_driver = [*gpu_a_only, _slice("gpu-c", "n0", driver=NIC)]
    assert _plan(pods, ["gpu-a"], other_driver, claims).no_room == {"gpu-a": "default/trainer"}
    with_gpu_c = [*gpu_a_only, _slice("gpu-c", "g0")]
    plan = _plan(pods, ["gpu-a"], with_gpu_c, claims)
    assert (plan.removable, plan.moves, plan.no_room) == (("gpu-a",), {"default/trainer": "gpu-c"}, {})
    # a device that a claim holds on gpu-c is no room either
    taken = [*claims, _claim("other", ("gpu-c", "g0"))]
    assert _plan(pods, ["gpu-a"], with_gpu_c, taken).no_room == {"gpu-a": "default/trainer"}


def test_the_devices_a_moved_pod_takes_are_taken_for_the_next_pods_of_the_plan() -> None:
    """gpu-a and cpu-b each run a trainer holding one GPU; gpu-c has one free GPU: gpu-a's
    trainer takes it, so cpu-b's finds no room (cpu-b is kept). A pod holding two GPUs needs
    two free ones; a candidate that is kept gives back what its pods took."""
    slices = [_slice("gpu-a", "g0"), _slice("cpu-b", "g0", pool="b"), _slice("gpu-c", "g0", "g1", pool="c")]
    claims = [_claim("a", ("gpu-a", "g0")), _claim("b", ("b", "g0")), _claim("c", ("c", "g1"))]
    pods = {
        "gpu-a": [_pod("trainer-a", "a")],
        "cpu-b": [_pod("trainer-b", "b")],
        "gpu-c": [_pod("holder", "c", owner="DaemonSet")],
    }
    plan = _plan(pods, ["gpu-a", "cpu-b"], slices, claims)
    assert (plan.removable, plan.moves, plan.no_room) == (
        ("gpu-a",),
        {"default/trainer-a": "gpu-c"},
        {"cpu-b": "default/trainer-b"},
    )
    # the other order: cpu-b's trainer takes gpu-c's free GPU, gpu-a's has none
    plan = _plan(pods, ["cpu-b", "gpu-a"], slices, claims)
    assert (plan.removable, plan.no_room) == (("cpu-b",), {"gpu-a": "default/trainer-a"})
    # gpu-a's two pods need two GPUs of gpu-c, which has one: gpu-a is kept, and the device
    # its first pod took there is free again for cpu-b's trainer
    pods["gpu-a"] = [_pod("small", "a"), _pod("big", "a2")]
    slices[0] = _slice("gpu-a", "g0", "g1")
    claims.append(_claim("a2", ("gpu-a", "g1")))
    plan = _plan(pods, ["gpu-a", "cpu-b"], slices, claims)
    assert (plan.removable, plan.moves, plan.no_room) == (
        ("cpu-b",),
        {"default/trainer-b": "gpu-c"},
        {"gpu-a": "default/big"},
    )
    two = [_claim("both", ("gpu-a", "g0"), ("gpu-a", "g1")), *claims[1:3]]
    pods["gpu-a"] = [_pod("pair", "both")]
    assert _plan(pods, ["gpu-a"], slices, two).no_room == {"gpu-a": "default/pair"}
    slices[2] = _slice("gpu-c", "g0", "g1", "g2", pool="c")
    assert _plan(pods, ["gpu-a"], slices, two).moves == {"default/pair": "gpu-c"}


def test_a_claim_shared_with_a_pod_that_stays_keeps_its_device_and_its_pods_on_their_node() -> None:
    """As the autoscaler's ``UnreservePodClaims``: a claim stays allocated while a pod that
    stays on the node (a DaemonSet's) uses it, and the DRA plugin keeps a pod on the node of
    its allocated claim: no room, whatever gpu-c has. A claim shared by two pods both
    moved is released, allocated again once on gpu-c (one device), and its second pod
    follows it there."""
    slices = [_slice("gpu-a", "g0"), _slice("gpu-c", "g0")]
    claims = [_claim("shared", ("gpu-a", "g0"))]
    monitor = _pod("monitor", "shared", owner="DaemonSet", cpu="100m")
    pods = {"gpu-a": [_pod("worker", "shared"), monitor], "cpu-b": [], "gpu-c": []}
    assert _plan(pods, ["gpu-a"], slices, claims).no_room == {"gpu-a": "default/worker"}
    pods["gpu-a"] = [_pod("worker-1", "shared"), _pod("worker-2", "shared")]
    plan = _plan(pods, ["gpu-a"], slices, claims)
    assert plan.moves == {"default/worker-1": "gpu-c", "default/worker-2": "gpu-c"}
    # gpu-c's cpu fits one worker only: the second cannot follow the claim elsewhere
    pods["gpu-c"] = [_pod("filler", cpu="2500m", owner="DaemonSet")]
    assert _plan(pods, ["gpu-a"], slices, claims).no_room == {"gpu-a": "default/worker-2"}


def test_a_pod_whose_claims_are_held_on_two_nodes_fits_nowhere() -> None:
    """kube-scheduler's DynamicResources filter passes a node only if each allocated claim
    of the pod is allocated there (its node selector): a pod with claims allocated on two
    different nodes passes none. gpu-a (candidate) runs first (claim a), both (claims a
    and keep) and a DaemonSet's monitor (keep, so keep stays allocated on gpu-a's g1):
    first's release frees a, which it takes again on gpu-c (cpu-b has no GPU); both then
    needs a on gpu-c and keep on gpu-a: no room. Without the monitor, keep is released as
    well and both follows a to gpu-c, where keep takes gpu-c's other GPU."""
    slices = [_slice("gpu-a", "g0", "g1"), _slice("gpu-c", "g0", "g1")]
    claims = [_claim("a", ("gpu-a", "g0")), _claim("keep", ("gpu-a", "g1"))]
    first, both = _pod("first", "a"), _pod("both", "a", "keep")
    monitor = _pod("monitor", "keep", owner="DaemonSet", cpu="100m")
    plan = _plan({"gpu-a": [first, both, monitor]}, ["gpu-a"], slices, claims)
    assert (plan.removable, plan.no_room) == ((), {"gpu-a": "default/both"})
    plan = _plan({"gpu-a": [first, both]}, ["gpu-a"], slices, claims)
    assert (plan.removable, plan.moves) == (("gpu-a",), {"default/first": "gpu-c", "default/both": "gpu-c"})


def test_claims_on_devices_that_are_not_node_local_move_freely() -> None:
    """A claim allocated a device of a slice for all nodes (network-attached) constrains
    nothing, as before: its pod goes to cpu-b, which has no slices; admin access reserves
    nothing, and a claim not allocated or not found constrains nothing either. In the same
    plan, gpu-c's pod, whose claim holds a node-local device, finds no room on cpu-b."""
    slices = [_slice(None, "f0"), _slice("gpu-a", "g0"), _slice("gpu-c", "g0")]
    claims = [
        _claim("fabric", ("fabric", "f0")),
        _claim("watch", ("gpu-a", "g0"), adminAccess=True),
        {"metadata": {"name": "pending", "namespace": "default"}, "status": {}},
        _claim("local", ("gpu-c", "g0")),
    ]
    pods = {
        "gpu-a": [_pod("net", "fabric"), _pod("admin", "watch"), _pod("wait", "pending", "gone")],
        "gpu-c": [_pod("local", "local")],
    }
    plan = _plan(pods, ["gpu-a", "gpu-c"], slices, claims)
    assert plan.moves == {"default/net": "cpu-b", "default/admin": "cpu-b", "default/wait": "cpu-b"}
    assert (plan.removable, plan.no_room) == (("gpu-a",), {"gpu-c": "default/local"})


def test_partitionable_pools_and_incomplete_pools() -> None:
    """In a partitionable pool a free device counts only if its counters fit what the pool
    has left (gpu-c's whole GPU is taken by a partition, its other partition is free); an
    incomplete pool has no free device."""
    memory = [{"name": "mem", "counters": {"memory": {"value": "40Gi"}}}]

    def uses(gi: int) -> list[dict[str, Any]]:
        return [{"counterSet": "mem", "counters": {"memory": {"value": f"{gi}Gi"}}}]

    gpu_c = _slice("gpu-c", sharedCounters=memory)
    gpu_c["spec"]["devices"] = [
        {"name": "whole", "consumesCounters": uses(40)},
        {"name": "half-1", "consumesCounters": uses(20)},
        {"name": "half-2", "consumesCounters": uses(20)},
    ]
    slices = [_slice("gpu-a", "g0"), gpu_c]
    claims = [_claim("a", ("gpu-a", "g0")), _claim("c", ("gpu-c", "half-1"))]
    pods = {"gpu-a": [_pod("a-1", "a")], "gpu-c": [_pod("c", "c", owner="DaemonSet")]}
    dra = DraDevices.read(slices, claims, pods)
    assert dra.free_devices("gpu-c") == {GPU: 2}  # by name; "whole" does not fit
    assert _plan(pods, ["gpu-a"], slices, claims).moves == {"default/a-1": "gpu-c"}
    claims.append(_claim("c2", ("gpu-c", "half-2")))
    pods["gpu-c"].append(_pod("c2", "c2", owner="DaemonSet"))
    assert _plan(pods, ["gpu-a"], slices, claims).no_room == {"gpu-a": "default/a-1"}
    incomplete = [_slice("gpu-a", "g0"), _slice("gpu-c", "g0")]
    incomplete[1]["spec"]["pool"]["resourceSliceCount"] = 2
    assert _plan(pods, ["gpu-a"], incomplete, claims[:1]).no_room == {"gpu-a": "default/a-1"}


def test_malformed_objects_are_left_out_with_a_problem_each() -> None:
    """A slice or claim that is not what the API serves is a problem line, never an
    exception; the rest is read."""
    slices = [{"metadata": {"name": "bad"}, "spec": {"nodeName": "gpu-c", "pool": 5}}, _slice("gpu-a", "g0")]
    claims = [{"metadata": {"name": "odd", "namespace": "default"}, "status": {"allocation": 7}}]
    dra = DraDevices.read(slices, claims, {})
    assert dra.problems == [
        "ResourceSlice bad: spec.pool is not an object; left out",
        "ResourceClaim default/odd: status.allocation is not an object; left out",
    ]
    assert dra.free_devices("gpu-a") == {GPU: 1} and dra.free_devices("gpu-c") == {}
    # the objects read still move devices: gpu-a's trainer has no room on gpu-c
    claims.append(_claim("train", ("gpu-a", "g0")))
    pods = {"gpu-a": [_pod("trainer", "train")], "gpu-c": []}
    assert _plan(pods, ["gpu-a"], slices, claims).no_room == {"gpu-a": "default/trainer"}


def test_deletions_in_progress_and_pods_moved_twice_carry_their_devices() -> None:
    """A node being deleted places its pods first: its pod takes gpu-c's one free GPU, so
    gpu-a's trainer finds none. A pod placed on a candidate that is checked next is released
    from there again: gpu-a's trainer takes going's free GPU, then going's two pods need two
    GPUs elsewhere (gpu-c has one: going is kept; with two, both move there)."""
    nodes = ("going", "gpu-a", "cpu-b", "gpu-c")
    slices = [_slice("going", "g0", "g1"), _slice("gpu-a", "g0"), _slice("gpu-c", "g0")]
    claims = [_claim("a", ("gpu-a", "g0")), _claim("going", ("going", "g0"))]
    pods = {"going": [_pod("leaving", "going")], "gpu-a": [_pod("trainer", "a")]}

    def plan(candidates: list[str], deleting: bool = False) -> ScaleDownPlan:
        table = _table(nodes, pods)
        table.to_be_deleted[table.index["going"]] = deleting
        return plan_scale_down(table, pods, candidates, FILTERS, dra=DraDevices.read(slices, claims, pods))

    assert plan(["gpu-a"]).moves == {"default/trainer": "going"}
    deleted = plan(["gpu-a"], deleting=True)  # going's GPUs are no room; leaving took gpu-c's
    assert (deleted.removable, deleted.no_room) == ((), {"gpu-a": "default/trainer"})
    slices[2] = _slice("gpu-c", "g0", "g1")
    assert plan(["gpu-a"], deleting=True).moves == {"default/trainer": "gpu-c"}
    slices[2] = _slice("gpu-c", "g0")
    twice = plan(["gpu-a", "going"])
    assert (twice.removable, twice.moves, twice.no_room) == (
        ("gpu-a",),
        {"default/trainer": "going"},
        {"going": "default/trainer"},
    )
    slices[2] = _slice("gpu-c", "g0", "g1")
    twice = plan(["gpu-a", "going"])
    assert twice.removable == ("gpu-a", "going")
    assert twice.moves == {"default/trainer": "gpu-c", "default/leaving": "gpu-c"}


def test_the_devices_filter_answers_as_picking_the_devices_node_by_node() -> None:
    """DevicesFilter counts free devices per row in numpy (and asks ``allows`` only where a
    pool shares counters): over random pools (atomic, partitionable, incomplete), claims and
    pods, and random releases and placements in between (its columns then follow the
    devices' changes), it passes exactly the nodes where ``DraDevices._pick`` finds the
    devices."""
    import random

    import numpy as np

    from stickypack.core.drain import DevicesFilter
    from stickypack.core.framework import SchedulingContext

    memory = [{"name": "mem", "counters": {"memory": {"value": "40Gi"}}}]
    for seed in range(30):
        rng = random.Random(seed)
        nodes = [f"n{i}" for i in range(rng.randint(3, 12))]
        slices: list[dict[str, Any]] = []
        for node in nodes:
            for driver in (GPU, NIC):
                if rng.random() < 0.3:
                    continue
                names = [f"{driver[:3]}{k}" for k in range(rng.randint(1, 4))]
                if rng.random() < 0.3:  # partitionable: each device takes 10-30 Gi of 40
                    body = _slice(node, driver=driver, sharedCounters=memory)
                    body["spec"]["devices"] = [
                        {
                            "name": n,
                            "consumesCounters": [
                                {
                                    "counterSet": "mem",
                                    "counters": {"memory": {"value": f"{rng.choice((10, 20, 30))}Gi"}},
                                }
                            ],
                        }
                        for n in names
                    ]
                else:
                    body = _slice(node, *names, driver=driver)
                if rng.random() < 0.1:
                    body["spec"]["pool"]["resourceSliceCount"] = 2
                slices.append(body)
        published = [
            (s["spec"]["driver"], s["spec"]["nodeName"], d["name"])
            for s in slices
            for d in s["spec"]["devices"]
        ]
        rng.shuffle(published)
        claims, pods = [], {node: [] for node in nodes}
        used: set[tuple[str, str, str]] = set()
        for k in range(rng.randint(1, 10)):
            free = [d for d in published if d not in used]
            if not free:
                break
            driver, node, device = free[0]
            held = [(node, device)]
            used.add(free[0])
            extra = [d for d in free[1:] if d[1] == node and d[0] == driver][:1]
            if extra and rng.random() < 0.3:
                held.append((node, extra[0][2]))
                used.add(extra[0])
            claims.append(_claim(f"c{k}", *held, driver=driver))
            pods[node].append(_pod(f"p{k}", f"c{k}"))
        table = NodeTable()
        for name in nodes:
            table.upsert_node(name, {"cpu": 4000, "memory": 16 * GI, "pods": 110})
        dra = DraDevices.read(slices, claims, pods)
        devices_filter = DevicesFilter(dra)
        everyone = [pod for bound in pods.values() for pod in bound]
        idx = np.arange(len(nodes), dtype=np.int64)
        for _ in range(8):
            for pod in everyone:
                got = devices_filter.filter(pod, table, idx, SchedulingContext()).tolist()
                want = [dra._pick(pod, node) is not None for node in nodes]
                assert got == want, (seed, pod.key)
                assert got == [dra.allows(pod, node) for node in nodes]
            moved = rng.sample(everyone, rng.randint(0, len(everyone)))
            dra.release(moved)
            for pod in moved:
                fits = [node for node in nodes if dra.allows(pod, node)]
                if fits:
                    dra.place(pod, rng.choice(fits))


def _memory_pool(node: str, *devices: tuple[str, str, int], memory: int = 40) -> dict[str, Any]:
    """A partitionable pool of ``node``: one counter set ``mem`` of ``memory`` Gi, and
    ``devices`` as (name, counter set, Gi of its ``memory`` counter)."""
    body = _slice(node, sharedCounters=[{"name": "mem", "counters": {"memory": {"value": f"{memory}Gi"}}}])
    body["spec"]["devices"] = [
        {"name": n, "consumesCounters": [{"counterSet": s, "counters": {"memory": {"value": f"{gi}Gi"}}}]}
        for n, s, gi in devices
    ]
    return body


def test_a_claim_is_held_at_its_first_node_local_device_and_a_shared_pool_name_at_the_first_node() -> None:
    """A claim holding node-local devices on n-b and then n-a is followed at n-b (its first
    such device's node), wherever its pod may go: only n-b. A pool name that n-b and n-a
    both publish (listed in that order) is n-a's, the first by name: a claim on it is held
    there, n-a's device taken and n-b's free."""
    slices = [_slice("n-b", "g0"), _slice("n-a", "g0")]
    both = DraDevices.read(slices, [_claim("both", ("n-b", "g0"), ("n-a", "g0"))], {})
    pod = _pod("w", "both")
    assert both.requirement(pod) == DeviceNeed("n-b", {})
    assert [both.allows(pod, n) for n in ("n-a", "n-b")] == [False, True]
    same_name = [_slice("n-b", "g0", pool="p"), _slice("n-a", "g0", pool="p")]
    dra = DraDevices.read(same_name, [_claim("c", ("p", "g0"))], {})
    assert dra.requirement(_pod("v", "c")) == DeviceNeed("n-a", {})
    assert (dra.free_devices("n-a"), dra.free_devices("n-b")) == ({GPU: 0}, {GPU: 1})


def test_a_device_two_claims_hold_counts_its_counters_once() -> None:
    """gpu-c's pool shares 40Gi; claims c1 and c2 both hold its half-1 (20Gi; a device
    allocated to several claims): 40 - 20 = 20Gi are left, so half-2 (20Gi) is room for
    the trainer released from gpu-a, and whole (40Gi) is not."""
    slices = [
        _slice("gpu-a", "g0"),
        _memory_pool("gpu-c", ("whole", "mem", 40), ("half-1", "mem", 20), ("half-2", "mem", 20)),
    ]
    claims = [
        _claim("a", ("gpu-a", "g0")),
        _claim("c1", ("gpu-c", "half-1")),
        _claim("c2", ("gpu-c", "half-1")),
    ]
    trainer = _pod("trainer", "a")
    users = [_pod("u1", "c1", owner="DaemonSet"), _pod("u2", "c2", owner="DaemonSet")]
    dra = DraDevices.read(slices, claims, {"gpu-a": [trainer], "gpu-c": users})
    dra.release([trainer])
    assert dra.allows(trainer, "gpu-c")
    dra.place(trainer, "gpu-c")
    assert dra.free_devices("gpu-c") == {GPU: 1}  # whole: free by name, with 0Gi left for it


def test_a_device_consuming_a_counter_its_pool_does_not_share_is_no_room() -> None:
    """gpu-c's pool shares set ``mem`` (memory 40Gi); its one free device consumes a set
    the pool does not share, or (second case) a counter ``mem`` does not have: neither is
    known to fit, so the trainer released from gpu-a has no room there; a device
    consuming 40Gi of ``mem`` is."""
    bandwidth = _memory_pool("gpu-c", ("odd", "mem", 1))
    bandwidth["spec"]["devices"][0]["consumesCounters"][0]["counters"] = {"bandwidth": {"value": "1"}}
    for gpu_c, fits in [
        (_memory_pool("gpu-c", ("odd", "other", 1)), False),
        (bandwidth, False),
        (_memory_pool("gpu-c", ("full", "mem", 40)), True),
    ]:
        trainer = _pod("trainer", "a")
        dra = DraDevices.read(
            [_slice("gpu-a", "g0"), gpu_c], [_claim("a", ("gpu-a", "g0"))], {"gpu-a": [trainer]}
        )
        dra.release([trainer])
        assert dra.allows(trainer, "gpu-c") is fits, gpu_c["spec"]["devices"]


def test_a_node_with_atomic_and_partitionable_pools_of_a_driver_is_judged_by_picking() -> None:
    """gpu-c has an atomic pool (its one GPU held) and a partitionable one (half held: 20 of
    40Gi left, whole needs 40): ``whole`` is free by name but does not fit, so
    ``free_count`` cannot tell (None) and the released trainer has no room there."""
    slices = [
        _slice("gpu-a", "g0"),
        _slice("gpu-c", "a0", pool="c-atomic"),
        _memory_pool("gpu-c", ("whole", "mem", 40), ("half", "mem", 20)),
    ]
    claims = [
        _claim("a", ("gpu-a", "g0")),
        _claim("held", ("c-atomic", "a0")),
        _claim("part", ("gpu-c", "half")),
    ]
    trainer = _pod("trainer", "a")
    users = [_pod("u1", "held", owner="DaemonSet"), _pod("u2", "part", owner="DaemonSet")]
    dra = DraDevices.read(slices, claims, {"gpu-a": [trainer], "gpu-c": users})
    dra.release([trainer])
    assert dra.free_count("gpu-c", GPU) is None and dra.free_devices("gpu-c") == {GPU: 1}
    assert not dra.allows(trainer, "gpu-c")


def test_a_pods_released_claims_of_one_driver_add_up() -> None:
    """The pair's two claims each hold one of gpu-a's GPUs: released, they need 2 free GPUs
    of the driver on one node; gpu-c with one has no room, with two it has."""
    claims = [_claim("x", ("gpu-a", "g0")), _claim("y", ("gpu-a", "g1"))]
    for free, fits in [(("g0",), False), (("g0", "g1"), True)]:
        pair = _pod("pair", "x", "y")
        dra = DraDevices.read(
            [_slice("gpu-a", "g0", "g1"), _slice("gpu-c", *free)], claims, {"gpu-a": [pair]}
        )
        dra.release([pair])
        assert dra.requirement(pair) == DeviceNeed(None, {GPU: 2})
        assert dra.allows(pair, "gpu-c") is fits


def test_the_claims_followed_are_those_read_whenever_a_pod_is_first_seen() -> None:
    """ "late" names the trainer's claim but was not among the pods read (so not a user).
    Released with the trainer's release, the claim still needs a GPU wherever "late"
    goes: cpu-b (no devices) has no room for it. Releasing "late" alone and rolling back
    leaves the trainer the claim's only user: released, it frees gpu-a's GPU."""
    slices = [_slice("gpu-a", "g0")]
    claims = [_claim("a", ("gpu-a", "g0"))]
    trainer, late = _pod("trainer", "a"), _pod("late", "a")
    dra = DraDevices.read(slices, claims, {"gpu-a": [trainer]})
    dra.release([trainer])
    assert dra.follows(late) and not dra.allows(late, "cpu-b")
    dra = DraDevices.read(slices, claims, {"gpu-a": [trainer]})
    mark = dra.mark()
    dra.release([late])
    assert dra.free_devices("gpu-a") == {GPU: 0}  # the trainer still uses it
    dra.rollback(mark)
    dra.release([trainer])
    assert dra.free_devices("gpu-a") == {GPU: 1}


def test_rollback_undoes_exactly_what_release_and_place_changed() -> None:
    """w1 and w2 share a claim held on gpu-a. Releasing both frees its GPU; rolled back (the
    last change, freeing the GPU, too) the GPU is taken again. Placing w1 there while it is
    still a user changes nothing, so rolling it back leaves w1 a user: releasing w2 then
    keeps the claim's GPU taken (w1 still uses it)."""
    w1, w2 = _pod("w1", "shared"), _pod("w2", "shared")
    dra = DraDevices.read([_slice("gpu-a", "g0")], [_claim("shared", ("gpu-a", "g0"))], {"gpu-a": [w1, w2]})
    mark = dra.mark()
    dra.release([w1, w2])
    assert dra.free_devices("gpu-a") == {GPU: 1}
    dra.rollback(mark)
    assert dra.free_devices("gpu-a") == {GPU: 0} and dra.mark() == mark
    assert dra.allows(w1, "gpu-a")
    dra.place(w1, "gpu-a")
    dra.rollback(mark)
    dra.release([w2])
    assert dra.free_devices("gpu-a") == {GPU: 0}
    dra.release([w1])
    assert dra.free_devices("gpu-a") == {GPU: 1}


def test_inspect_reads_expendable_pods_out_of_dra_utilization_but_among_claim_users() -> None:
    """``inspect --dra`` (its ``_read_dra``), as the autoscaler 1.36.1: a node's DRA
    utilization counts the claims of the pods in its snapshot, which leaves out expendable
    pods (priority under ``--expendable-pods-priority-cutoff``, -10 by default); its removal
    simulation still counts them among a claim's users (the claim's ``reservedFor``), so a
    claim a moving pod shares with an expendable one stays allocated where it is.

    gpu-a publishes g0..g3; the expendable ``filler`` (priority -20) holds ``low`` (g0, g1,
    g2) and shares ``shared`` (g3) with ``web``; gpu-c publishes 4 free devices. Utilization
    of gpu-a: ``shared`` only, 1 of 4 = 0.25 (with the filler counted, 4 of 4 = 1.0). The
    plan: ``web`` cannot take ``shared`` along (the filler still uses it) and gpu-a has no
    room elsewhere for it; with the filler left out of the users it would move to gpu-c."""
    import dataclasses

    from stickypack.cli.inspect import _read_dra
    from stickypack.core.explain import ScaleDownRules
    from stickypack.kube.cache import ClusterCache
    from stickypack.kube.snapshot import DraObjects, Snapshot

    web = _pod("web", "shared")
    filler = dataclasses.replace(_pod("filler", "low", "shared", cpu="100m"), priority=-20)
    pods = {"gpu-a": [web, filler], "cpu-b": [], "gpu-c": [_pod("pinned", owner="DaemonSet", cpu="100m")]}
    slices = [_slice("gpu-a", "g0", "g1", "g2", "g3"), _slice("gpu-c", "g0", "g1", "g2", "g3")]
    claims = [
        _claim("low", ("gpu-a", "g0"), ("gpu-a", "g1"), ("gpu-a", "g2")),
        _claim("shared", ("gpu-a", "g3")),
    ]
    snap = Snapshot(ClusterCache(), pods_by_node=pods, dra=DraObjects(slices, claims))
    reading, devices = _read_dra(snap, ScaleDownRules())
    assert reading is not None and devices is not None
    assert reading.nodes["gpu-a"].utilization == 0.25
    table = _table(("gpu-a", "cpu-b", "gpu-c"), pods)
    plan = plan_scale_down(table, pods, ["gpu-a"], FILTERS, dra=devices)
    assert (plan.removable, plan.no_room) == ((), {"gpu-a": "default/web"})


# ---- released claims allocated again by kube-scheduler's allocator (its CEL selectors) ------

#: The DeviceClass every claim below asks for: the GPU driver's devices.
GPU_CLASS = {
    "gpu": {
        "metadata": {"name": "gpu"},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{GPU}"'}}]},
    }
}


def _gpus(node: str, *models: tuple[str, str], pool: str | None = None) -> dict[str, Any]:
    """A node-local slice of GPUs, each ``(name, model)`` with a ``model`` attribute."""
    devices = [{"name": name, "attributes": {"model": {"string": model}}} for name, model in models]
    body = {"driver": GPU, "pool": {"name": pool or node, "generation": 1, "resourceSliceCount": 1}}
    return {
        "metadata": {"name": f"{pool or node}-{GPU}"},
        "spec": {**body, "nodeName": node, "devices": devices},
    }


def _selecting(name: str, held: tuple[str, str], *expressions: str) -> dict[str, Any]:
    """A claim of ``default`` for one GPU of class ``gpu`` matching ``expressions``,
    allocated ``held`` (pool, device)."""
    claim = _claim(name, held)
    exactly: dict[str, Any] = {"deviceClassName": "gpu", "count": 1}
    if expressions:
        exactly["selectors"] = [{"cel": {"expression": e}} for e in expressions]
    claim["spec"] = {"devices": {"requests": [{"name": "r", "exactly": exactly}]}}
    return claim


def _plan_allocating(
    pods: dict[str, list[Pod]],
    candidates: list[str],
    slices: list[dict[str, Any]],
    claims: list[dict[str, Any]],
    nodes: tuple[str, ...] = ("gpu-a", "gpu-b", "gpu-c"),
    classes: dict[str, Any] | None = GPU_CLASS,
) -> ScaleDownPlan:
    """:func:`_plan` with the released claims allocated again by kube-scheduler's allocator
    (``classes``: the DeviceClasses, None: not listed); the allocator's devices are as they
    were afterwards."""
    allocator = DraAllocator(slices, claims, classes, compile_selector)
    before = set(allocator.allocated)
    dra = DraDevices.read(slices, claims, pods, allocator)
    assert dra.allocates
    plan = plan_scale_down(_table(nodes, pods), pods, candidates, FILTERS, dra=dra)
    assert allocator.allocated == before
    return plan


A100 = 'device.attributes["gpu.example.com"].model == "a100"'


def test_a_moved_claim_needs_a_free_device_its_selectors_select() -> None:
    """gpu-a's trainer holds gpu-a's a100 with a claim selecting ``model == "a100"``;
    gpu-b's only free GPU is a t4: the allocator finds no room there (counting devices of
    the driver, any GPU did: the trainer went to gpu-b); once gpu-c has a free a100, the
    trainer goes there."""
    trainer = _pod("trainer", "train-gpu")
    pods: dict[str, list[Pod]] = {"gpu-a": [trainer], "gpu-b": [], "gpu-c": []}
    claims = [_selecting("train-gpu", ("gpu-a", "g0"), A100)]
    slices = [_gpus("gpu-a", ("g0", "a100")), _gpus("gpu-b", ("g0", "t4"))]
    counted = _plan(pods, ["gpu-a"], slices, claims, nodes=("gpu-a", "gpu-b", "gpu-c"))
    assert counted.moves == {"default/trainer": "gpu-b"}
    plan = _plan_allocating(pods, ["gpu-a"], slices, claims)
    assert (plan.removable, plan.moves, plan.no_room) == ((), {}, {"gpu-a": "default/trainer"})
    # what the allocator does not judge (the DeviceClasses not listed; a claim whose requests
    # cannot be read, named among the problems) is counted as before
    assert _plan_allocating(pods, ["gpu-a"], slices, claims, classes=None).moves == counted.moves
    unreadable = [{**claims[0], "spec": {"devices": {"requests": "r"}}}]
    assert _plan_allocating(pods, ["gpu-a"], slices, unreadable).moves == counted.moves
    allocator = DraAllocator(slices, unreadable, GPU_CLASS, compile_selector)
    problems = DraDevices.read(slices, unreadable, pods, allocator).problems
    assert problems == [
        "ResourceClaim default/train-gpu: spec.devices.requests is not a list; counted, not allocated, "
        "when its pods move"
    ]
    slices.append(_gpus("gpu-c", ("g0", "t4"), ("g1", "a100")))
    plan = _plan_allocating(pods, ["gpu-a"], slices, claims)
    assert (plan.removable, plan.moves) == (("gpu-a",), {"default/trainer": "gpu-c"})
    # gpu-c's a100 held by a claim of a pod that stays: no room again
    held = [*claims, _selecting("other", ("gpu-c", "g1"))]
    pods["gpu-c"] = [_pod("holder", "other", owner="DaemonSet", cpu="100m")]
    assert _plan_allocating(pods, ["gpu-a"], slices, held).no_room == {"gpu-a": "default/trainer"}


def test_the_devices_the_allocator_picks_are_taken_for_the_next_pods() -> None:
    """gpu-a's two pods move to gpu-c, whose GPUs are an a100 then an h100: ``any`` (a100 or
    h100) takes the a100, the first it selects, and ``h100`` the h100, so both fit there
    together. When both want an a100, the second finds gpu-c's a100 taken by the first: no
    room (counting, gpu-c's two GPUs took both). A candidate kept gives back what its pods
    took: gpu-b's pod then has gpu-c's a100."""
    slices = [
        _gpus("gpu-a", ("g0", "a100"), ("g1", "h100")),
        _gpus("gpu-b", ("g0", "a100")),
        _gpus("gpu-c", ("g0", "a100"), ("g1", "h100")),
    ]
    model = 'device.attributes["gpu.example.com"].model'
    claims = [
        _selecting("any", ("gpu-a", "g0"), f'{model} in ["a100", "h100"]'),
        _selecting("h100", ("gpu-a", "g1"), f'{model} == "h100"'),
        _selecting("b", ("gpu-b", "g0"), A100),
    ]
    pods = {"gpu-a": [_pod("p1", "any"), _pod("p2", "h100")], "gpu-b": [], "gpu-c": []}
    plan = _plan_allocating(pods, ["gpu-a"], slices, claims)
    assert (plan.removable, plan.moves) == (("gpu-a",), {"default/p1": "gpu-c", "default/p2": "gpu-c"})
    # both want an a100 (gpu-b has one, held by its own pod)
    claims[1] = _selecting("h100", ("gpu-a", "g1"), A100)
    pods["gpu-b"] = [_pod("b", "b")]
    counted = _plan(pods, ["gpu-a"], slices, claims, nodes=("gpu-a", "gpu-b", "gpu-c"))
    assert counted.moves == {"default/p1": "gpu-c", "default/p2": "gpu-c"}
    plan = _plan_allocating(pods, ["gpu-a", "gpu-b"], slices, claims)
    assert (plan.removable, plan.moves, plan.no_room) == (
        ("gpu-b",),
        {"default/b": "gpu-c"},
        {"gpu-a": "default/p2"},
    )


def test_a_claim_shared_by_pods_that_move_together_is_allocated_once_where_its_selectors_allow() -> None:
    """gpu-a's two workers share a claim selecting an a100: released with both, it is
    allocated again on gpu-c (gpu-b's free GPU is a t4; counting, both went to gpu-b), and
    the second worker follows it there. It takes one a100: with gpu-c's two, gpu-b's own
    a100 pod then fits on gpu-c too; with one, it has no room."""
    slices = [
        _gpus("gpu-a", ("g0", "a100")),
        _gpus("gpu-b", ("g0", "t4"), ("g1", "a100")),
        _gpus("gpu-c", ("g0", "a100"), ("g1", "a100")),
    ]
    claims = [_selecting("shared", ("gpu-a", "g0"), A100), _selecting("b", ("gpu-b", "g1"), A100)]
    pods = {"gpu-a": [_pod("worker-1", "shared"), _pod("worker-2", "shared")], "gpu-b": [], "gpu-c": []}
    counted = _plan(pods, ["gpu-a"], slices, claims, nodes=("gpu-a", "gpu-b", "gpu-c"))
    assert counted.moves == {"default/worker-1": "gpu-b", "default/worker-2": "gpu-b"}
    pods["gpu-b"] = [_pod("b", "b")]
    plan = _plan_allocating(pods, ["gpu-a", "gpu-b"], slices, claims)
    assert plan.moves == {"default/worker-1": "gpu-c", "default/worker-2": "gpu-c", "default/b": "gpu-c"}
    slices[2] = _gpus("gpu-c", ("g0", "a100"))
    plan = _plan_allocating(pods, ["gpu-a", "gpu-b"], slices, claims)
    assert (plan.removable, plan.no_room) == (("gpu-a",), {"gpu-b": "default/b"})


def test_an_allocation_that_errs_on_a_node_is_no_room_there() -> None:
    """A selector reading an attribute gpu-b's GPU lacks errs there (a CEL runtime error,
    which fails kube-scheduler's scheduling attempt): the plan takes the node as not
    passing and tries the next; gpu-c's GPU has the attribute."""
    slices = [_gpus("gpu-a", ("g0", "a100")), _gpus("gpu-b", ("g0", "t4"))]
    claims = [_selecting("c", ("gpu-a", "g0"), 'device.attributes["gpu.example.com"].cores > 4')]
    pods: dict[str, list[Pod]] = {"gpu-a": [_pod("p", "c")], "gpu-b": [], "gpu-c": []}
    assert _plan_allocating(pods, ["gpu-a"], slices, claims).no_room == {"gpu-a": "default/p"}
    cores = _gpus("gpu-c", ("g0", "a100"))
    cores["spec"]["devices"][0]["attributes"]["cores"] = {"int": 8}
    plan = _plan_allocating(pods, ["gpu-a"], [*slices, cores], claims)
    assert plan.moves == {"default/p": "gpu-c"}


def test_a_moved_claim_may_be_allocated_a_free_device_of_a_slice_for_all_nodes() -> None:
    """The allocator allocates from every device a node reaches: gpu-a's trainer's released
    claim takes the a100 of a slice for all nodes (network-attached) on gpu-b, the first
    node by row (counting, such devices never counted: no room). That a100 is then taken:
    gpu-c's pod, whose claim wants one too, has no room."""
    fabric = _gpus("unused", ("f0", "a100"), pool="fabric")
    del fabric["spec"]["nodeName"]
    fabric["spec"]["allNodes"] = True
    slices = [_gpus("gpu-a", ("g0", "a100")), _gpus("gpu-c", ("g0", "a100")), fabric]
    claims = [_selecting("a", ("gpu-a", "g0"), A100), _selecting("c", ("gpu-c", "g0"), A100)]
    pods: dict[str, list[Pod]] = {"gpu-a": [_pod("trainer", "a")], "gpu-b": [], "gpu-c": [_pod("other", "c")]}
    counted = _plan(pods, ["gpu-a"], slices, claims, nodes=("gpu-a", "gpu-b", "gpu-c"))
    assert counted.no_room == {"gpu-a": "default/trainer"}
    plan = _plan_allocating(pods, ["gpu-a", "gpu-c"], slices, claims)
    assert (plan.removable, plan.moves, plan.no_room) == (
        ("gpu-a",),
        {"default/trainer": "gpu-b"},
        {"gpu-c": "default/other"},
    )


def test_inspect_allocates_moved_claims_with_the_allocator_and_reports_those_it_counts() -> None:
    """``inspect --dra`` (its ``_read_dra``) gives the plan kube-scheduler's allocator with
    the DeviceClasses listed: gpu-a's trainer, whose claim selects an a100, has no room on
    gpu-b's t4. A claim whose requests cannot be read is counted, and named in the
    reading's problems (the report's ``dra_problems``)."""
    from stickypack.cli.inspect import _read_dra
    from stickypack.core.explain import ScaleDownRules
    from stickypack.kube.cache import ClusterCache
    from stickypack.kube.snapshot import DraObjects, Snapshot

    pods: dict[str, list[Pod]] = {"gpu-a": [_pod("trainer", "a")], "gpu-b": []}
    slices = [_gpus("gpu-a", ("g0", "a100"), ("g1", "t4")), _gpus("gpu-b", ("g0", "t4"))]
    claims = [_selecting("a", ("gpu-a", "g0"), A100)]

    def plan(objects: DraObjects) -> tuple[ScaleDownPlan, list[str]]:
        snap = Snapshot(ClusterCache(), pods_by_node=pods, dra=objects)
        reading, devices = _read_dra(snap, ScaleDownRules())
        assert reading is not None and devices is not None
        table = _table(("gpu-a", "gpu-b"), pods)
        return plan_scale_down(table, pods, ["gpu-a"], FILTERS, dra=devices), reading.problems

    found, problems = plan(DraObjects(slices, claims, frozenset(GPU_CLASS), GPU_CLASS))
    assert (found.no_room, problems) == ({"gpu-a": "default/trainer"}, [])
    unreadable = [{**claims[0], "spec": {"devices": {"requests": "r"}}}]
    found, problems = plan(DraObjects(slices, unreadable, frozenset(GPU_CLASS), GPU_CLASS))
    assert found.moves == {"default/trainer": "gpu-b"}
    assert problems == [
        "ResourceClaim default/a: spec.devices.requests is not a list; counted, not allocated, "
        "when its pods move"
    ]


def test_the_devices_filter_with_the_allocator_skips_only_nodes_the_allocator_would_reject() -> None:
    """With the allocator and no slices for other nodes, DevicesFilter (and ``allows``)
    skip a node without a free device before asking the allocator: over random nodes,
    GPUs, claims selecting a model or any GPU, and random releases and placements in
    between, it passes exactly the nodes the allocator, asked on every node, passes."""
    import random

    import numpy as np

    from stickypack.core.drain import DevicesFilter
    from stickypack.core.framework import SchedulingContext

    for seed in range(30):
        rng = random.Random(seed)
        nodes = [f"n{i}" for i in range(rng.randint(3, 10))]
        slices = [
            _gpus(node, *((f"g{k}", rng.choice(("a100", "t4"))) for k in range(rng.randint(1, 3))))
            for node in nodes
            if rng.random() < 0.8
        ]
        published = [(s["spec"]["nodeName"], d["name"]) for s in slices for d in s["spec"]["devices"]]
        rng.shuffle(published)
        claims, pods = [], {node: [] for node in nodes}
        for k, (node, device) in enumerate(published[: rng.randint(1, len(published))]):
            wants = rng.choice(((), (A100,), ('device.attributes["gpu.example.com"].model == "t4"',)))
            claims.append(_selecting(f"c{k}", (node, device), *wants))
            pods[node].append(_pod(f"p{k}", f"c{k}"))
        table = NodeTable()
        for name in nodes:
            table.upsert_node(name, {"cpu": 4000, "memory": 16 * GI, "pods": 110})
        dra = DraDevices.read(slices, claims, pods, DraAllocator(slices, claims, GPU_CLASS, compile_selector))
        devices_filter = DevicesFilter(dra)
        everyone = [pod for bound in pods.values() for pod in bound]
        idx = np.arange(len(nodes), dtype=np.int64)
        checked = 0
        for _ in range(6):
            moved = rng.sample(everyone, rng.randint(0, len(everyone)))
            dra.release(moved)
            for pod in everyone:
                got = devices_filter.filter(pod, table, idx, SchedulingContext()).tolist()
                dra._shared_slices = True  # as if some slice were for other nodes: no skipping
                want = [dra.allows(pod, node, {}) for node in nodes]
                dra._shared_slices = False
                assert got == want, (seed, pod.key)
                assert got == [dra.allows(pod, node, {}) for node in nodes]
                checked += any(got) and not all(got)
            for pod in moved:
                fits = [node for node in nodes if dra.allows(pod, node, {})]
                if fits:
                    dra.place(pod, rng.choice(fits), {})
        assert checked, seed  # some pod passes some nodes and not others
