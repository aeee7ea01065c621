"""The fidelity harness's own judging, without a control plane.

``stickypack.testing.fidelity`` decides whether the simulator agrees with the real
kube-scheduler: a case *agrees* when the real choice is among the policy's best
(:func:`score_case`), scored on a table of the batch's nodes (:func:`_node_table`) that
must hold what the API server holds for them. A bug in any of these would make the
fidelity tests (``tests/test_fidelity.py``, ``tests/test_plugin_fidelity.py``) pass
without comparing anything; here each is checked on small hand-made cases whose answers
are worked out in the comments, and the random cases on the properties the comparisons
rely on (each pod sees only its own case's nodes and fits one, bound pods fit theirs).
"""

from __future__ import annotations

import inspect
import random
from typing import Any

from stickypack.core import Pod, SchedulingContext, Taint
from stickypack.core.policy import policy_from_yaml
from stickypack.core.resources import parse_resource_list
from stickypack.kube.cache import node_images
from stickypack.policies import load_builtin
from stickypack.testing.controlplane import ControlPlane, _taint, pod_manifest
from stickypack.testing.fidelity import (
    CASE_LABEL,
    Case,
    _node_table,
    agreement,
    random_case,
    score_case,
    taint_dict,
)

MiB = 1024**2

SPREAD = """
name: spread
profiles:
  - name: spread
    filters: [NodeUnschedulable, NodeResourcesFit, NodeAffinity, TaintToleration]
    score:
      - plugin: LeastAllocated
        args: {resources: {cpu: 1, memory: 1}}
"""

IMAGES_ONLY = """
name: images
profiles:
  - name: images
    filters: [NodeUnschedulable, NodeResourcesFit, NodeAffinity, TaintToleration]
    score: [ImageLocality]
"""


def _node(name: str, label: str, **more: Any) -> dict[str, Any]:
    return {"name": name, "cpu": "4", "memory": "16Gi", "labels": {CASE_LABEL: label}, "taints": [], **more}


def _pod(name: str, label: str, cpu: str = "1", memory: str = "4Gi") -> dict[str, Any]:
    raw = pod_manifest(name, cpu=cpu, memory=memory)
    raw["spec"]["nodeSelector"] = {CASE_LABEL: label}
    return raw


def _resource_case(index: int = 0) -> Case:
    """Three nodes of 4 cores and 16Gi; ``full`` holds a pod of 2 cores and 4Gi; the pod
    asks for 1 core and 4Gi."""
    label = f"c{index}"
    filler = pod_manifest(f"{label}-filler", cpu="2", memory="4Gi")
    filler["spec"]["nodeName"] = f"{label}-full"
    nodes = [_node(f"{label}-{n}", label) for n in ("a", "b", "full")]
    return Case(index, nodes, [filler], _pod(f"{label}-pod", label))


# ---- agreement -----------------------------------------------------------------------------


def test_a_case_agrees_only_when_the_real_choice_is_among_the_policys_best() -> None:
    best = ["n1", "n2"]
    assert Case(0, [], [], {}, chosen="n2", top=best).agrees
    assert not Case(0, [], [], {}, chosen="n3", top=best).agrees  # kube-scheduler chose another
    assert not Case(0, [], [], {}, chosen=None, top=best).agrees  # the pod stayed unbound
    assert not Case(0, [], [], {}, chosen="n1", top=[]).agrees  # the policy found no node


def test_agreement_is_the_share_of_agreeing_cases_and_none_of_no_cases() -> None:
    def case(chosen: str) -> Case:
        return Case(0, [], [], {}, chosen=chosen, top=["yes"])

    assert agreement([case("yes"), case("no"), case("no"), case("yes")]) == 0.5
    assert agreement([case("no"), case("yes"), case("no")]) == 1 / 3
    assert agreement([case("no")]) == 0.0
    assert agreement([]) == 0.0  # no cases agree with nothing, not perfectly


# ---- scoring a case ------------------------------------------------------------------------


def test_the_policys_best_are_the_top_scoring_feasible_nodes() -> None:
    """LeastAllocated, cpu and memory weight 1: ``a`` and ``b`` (3 of 4 cores and 12 of
    16Gi free after the pod) score (75 + 75) / 2 = 75; ``full`` (1 core, 8Gi free) scores
    (25 + 50) // 2 = 37. The best are ``a`` and ``b``, not ``full`` and not all three."""
    case = _resource_case()
    assert score_case(case, policy_from_yaml(SPREAD)) == ["c0-a", "c0-b"]
    assert case.scores == {"c0-a": 75, "c0-b": 75, "c0-full": 37}


def test_a_case_scored_in_its_batch_counts_its_bound_pods_once() -> None:
    """The batch holds the case itself and another: the scores are the case's alone
    (counting the filler twice, 4 cores on ``full`` + the pod's 1 would not fit)."""
    case, other = _resource_case(0), _resource_case(1)
    assert score_case(case, policy_from_yaml(SPREAD), [case, other]) == ["c0-a", "c0-b"]
    assert case.scores == {"c0-a": 75, "c0-b": 75, "c0-full": 37}


def test_a_case_is_scored_by_the_profile_its_pod_goes_to() -> None:
    """z2jh's user pods go to its last profile (MostAllocated, 121): ``full`` scores
    (75 + 50) // 2 = 62 there, ``a`` and ``b`` (25 + 25) // 2 = 25; z2jh's first profile
    (kube-scheduler's default, spreading) would take ``a`` and ``b``."""
    z2jh = load_builtin("z2jh")
    case = _resource_case()
    assert z2jh.profile_for(Pod.from_dict(case.pod)) is not z2jh.profiles[0]
    assert score_case(case, z2jh) == ["c0-full"]


def test_image_locality_counts_every_node_of_the_batch() -> None:
    """``c0-a`` lists a 500 MiB image the pod runs. Alone (2 nodes, one lists it) it counts
    250 MiB: 100 x (250 - 23) // (1000 - 23) = 23. In a batch with another case's two
    nodes (4 nodes) it counts 125 MiB: 100 x 102 // 977 = 10."""
    image = "reg.example/c0/app:v1"
    nodes = [_node("c0-a", "c0", images=[{"names": [image], "sizeBytes": 500 * MiB}]), _node("c0-b", "c0")]
    pod = _pod("c0-pod", "c0")
    pod["spec"]["containers"][0]["image"] = image
    other = Case(1, [_node("c1-a", "c1"), _node("c1-b", "c1")], [], _pod("c1-pod", "c1"))
    policy = policy_from_yaml(IMAGES_ONLY)
    alone, batched = Case(0, nodes, [], pod), Case(0, nodes, [], pod)
    assert score_case(alone, policy) == ["c0-a"]
    assert alone.scores == {"c0-a": 23, "c0-b": 0}
    assert score_case(batched, policy, [batched, other]) == ["c0-a"]
    assert batched.scores == {"c0-a": 10, "c0-b": 0}


# ---- the model's nodes are the API server's ------------------------------------------------


def test_a_case_node_in_the_model_is_the_node_the_control_plane_writes() -> None:
    """Labels with the defaults ``ControlPlane.create_node`` adds (hostname = the node's
    name), every taint, the images, and the pods and ephemeral storage ``create_node``
    gives a node that names none (``tests/test_fidelity.py`` compares with the API server's
    copy)."""
    images = [{"names": ["reg.example/c0/app:v1", "reg.example/c0/app:latest"], "sizeBytes": 5 * MiB}]
    taints = ["soft1=x:PreferNoSchedule", "soft2:PreferNoSchedule", "dedicated=gpu:NoSchedule"]
    node = {**_node("c0-n0", "c0", images=images), "taints": taints}
    node["labels"]["zone"] = "a"
    table = _node_table([Case(0, [node], [], {})])
    i = table.slot("c0-n0")
    info = table.info[i]
    assert info is not None
    assert dict(info.labels) == {
        "kubernetes.io/hostname": "c0-n0",
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        CASE_LABEL: "c0",
        "zone": "a",
    }
    assert info.taints == (
        Taint("soft1", "x", "PreferNoSchedule"),
        Taint("soft2", "", "PreferNoSchedule"),
        Taint("dedicated", "gpu", "NoSchedule"),
    )
    assert table.images[i] == node_images(images)
    assert "reg.example/c0/app:latest" in table.images[i]
    defaults = inspect.signature(ControlPlane.create_node).parameters
    assert info.allocatable["pods"] == defaults["pods"].default
    storage = parse_resource_list({"ephemeral-storage": defaults["ephemeral_storage"].default})
    assert info.allocatable["ephemeral-storage"] == storage["ephemeral-storage"]


def test_a_case_taint_reads_as_the_control_plane_writes_it() -> None:
    """Every form of taint the draws write: ``key=value:Effect`` and ``key:Effect``."""
    specs = ["soft1=x:PreferNoSchedule", "soft2:PreferNoSchedule", "dedicated=gpu:NoSchedule"]
    specs.append("pb=x:NoExecute")
    for spec in specs:
        assert Taint.from_dict(taint_dict(spec)) == Taint.from_dict(_taint(spec)), spec


# ---- random cases --------------------------------------------------------------------------

DRAWN = 60


def _drawn(images: bool) -> list[Case]:
    rng = random.Random(5)
    return [random_case(rng, i, "sched", images=images) for i in range(DRAWN)]


def test_random_cases_see_their_own_nodes_and_fit_one_and_bound_pods_fit_theirs() -> None:
    default = load_builtin("default").profiles[0]
    cases = _drawn(images=False)
    for case in cases:
        label = f"c{case.index}"
        assert len(case.nodes) >= 2, case.index  # one node would never tell policies apart
        assert all(n["labels"][CASE_LABEL] == label for n in case.nodes)
        assert case.pod["spec"]["nodeSelector"][CASE_LABEL] == label  # only its own nodes
        assert case.pod["spec"]["schedulerName"] == "sched"
        table = _node_table([case])
        pod = Pod.from_dict(case.pod)
        assert default.feasible(pod, table, SchedulingContext()).size > 0, case.index
        # as a kubelet keeps them: no node's bound cpu or memory beyond its allocatable
        rows = table.active_indices()
        assert (table.requested[rows, :2] <= table.alloc[rows, :2]).all(), case.describe()
    # what the policies score on: bound pods, soft taints, tolerations, preferred
    # affinity to zones that differ within a case
    assert sum(len(c.bound) for c in cases) > len(cases)
    soft = [[t for t in n["taints"] if t.endswith(":PreferNoSchedule")] for c in cases for n in c.nodes]
    assert {"soft1=x:PreferNoSchedule", "soft2:PreferNoSchedule"} <= {t for ts in soft for t in ts}
    assert max(map(len, soft)) == 2  # two soft taints on a node now and then
    assert any(c.pod["spec"].get("tolerations") for c in cases)
    assert any(c.pod["spec"].get("affinity") for c in cases)
    assert any(len({n["labels"]["zone"] for n in c.nodes}) > 1 for c in cases)
    # pod-level requests are drawn on bound pods and on pods to place (millicores, so they fit)
    assert any("resources" in b["spec"] for c in cases for b in c.bound)
    assert any("cpu" in b["spec"].get("resources", {}).get("requests", {}) for c in cases for b in c.bound)
    assert any("resources" in c.pod["spec"] for c in cases)


def _requests_on(case: Case, node: str) -> list[str]:
    """The requests of the case's pods bound to ``node``, sorted."""
    on = [p for p in case.bound if p["spec"]["nodeName"] == node]
    return sorted(repr(p["spec"]["containers"][0]["resources"]) for p in on)


def test_random_cases_with_images_are_the_cases_without_plus_images_and_twins() -> None:
    """Images come from a stream of their own: the cases drawn with images are those drawn
    without, whose nodes (and bound pods) may have been doubled by twins."""
    plain, imaged = _drawn(images=False), _drawn(images=True)
    twinned = 0
    for without, with_images in zip(plain, imaged, strict=True):
        n = len(without.nodes)
        assert len(with_images.nodes) in (n, 2 * n)
        for a, b in zip(without.nodes, with_images.nodes, strict=False):
            assert (a["name"], a["cpu"], a["memory"], a["labels"], a["taints"]) == (
                b["name"],
                b["cpu"],
                b["memory"],
                b["labels"],
                b["taints"],
            )
        if len(with_images.nodes) == 2 * n:
            twinned += 1

            for node, twin in zip(with_images.nodes[:n], with_images.nodes[n:], strict=True):
                assert _requests_on(with_images, node["name"]) == _requests_on(with_images, twin["name"])
    assert 0 < twinned < DRAWN


def test_random_case_images_span_image_localitys_thresholds() -> None:
    """The cases' own images (their names carry the case's label) are drawn from under
    ImageLocality's 23 MiB floor to above 2000 MiB (only the log-uniform draw goes past its
    largest threshold); of those listed by several nodes, most have one size everywhere and
    some a size per node (kube-scheduler counts the first lister's). Pods run them in init
    containers and image volumes too."""
    sizes: list[int] = []
    same = differ = 0
    cases = _drawn(images=True)
    # pods run images in init containers and image volumes too
    assert any(c.pod["spec"].get("initContainers") for c in cases)
    assert any(c.pod["spec"].get("volumes") for c in cases)
    for case in cases:
        own: dict[str, set[int]] = {}
        listers: dict[str, int] = {}
        for node in case.nodes:
            for image in node["images"]:
                name = image["names"][0]
                if f"c{case.index}" in name:
                    own.setdefault(name, set()).add(image["sizeBytes"])
                    listers[name] = listers.get(name, 0) + 1
                    sizes.append(image["sizeBytes"])
        for name, found in own.items():
            if listers[name] > 1:
                same += len(found) == 1
                differ += len(found) > 1
    assert min(sizes) < 23 * MiB
    assert max(sizes) > 2000 * MiB
    assert 0 < differ < same
