"""Each scorer against kube-scheduler's formula, on hand-computed cases."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from stickypack.core import NodeTable, Pod, SchedulingContext, Taint, Toleration
from stickypack.core.history import BuildHistory
from stickypack.core.labels import (
    DELETION_CANDIDATE_TAINT,
    NO_SCHEDULE,
    PREFER_NO_SCHEDULE,
    TO_BE_DELETED_TAINT,
    NodeSelectorTerm,
    PreferredTerm,
    Requirement,
)
from stickypack.core.nodegroups import NodeGroups
from stickypack.core.plugins import (
    BalancedAllocation,
    BuildAntiAffinity,
    BuildBounds,
    BuildHeadroom,
    BuildLocality,
    BuildSpread,
    CacheKeeper,
    DrainForecast,
    ImageLocality,
    LeastAllocated,
    MostAllocated,
    NodeAffinityFilter,
    NodeAffinityScore,
    NodeAge,
    NodeResourcesFitFilter,
    NodeUnschedulable,
    RequestedToCapacityRatio,
    ScaleDownAware,
    ScoreMemo,
    TaintTolerationFilter,
    TaintTolerationScore,
    gpu_columns,
    quiet_nodes,
    utilization_and_threshold,
    utilization_with,
)
from stickypack.core.pod import BUILD_LABELS, BUILD_REPO_ANNOTATION, PodAffinityTerm
from stickypack.rendezvous import rendezvous_rank

Gi = 1024**3
CTX = SchedulingContext()


def pod(cpu=500, mem=1 * Gi, name="p", **kw) -> Pod:
    return Pod(name, requests={"cpu": cpu, "memory": mem}, nonzero_cpu=cpu, nonzero_memory=mem, **kw)


def two_nodes(n1_cpu=1000, n1_mem=2 * Gi) -> NodeTable:
    t = NodeTable()
    t.upsert_node("n1", {"cpu": 4000, "memory": 8 * Gi, "pods": 110})
    t.upsert_node("n2", {"cpu": 2000, "memory": 4 * Gi, "pods": 110})
    t.add_pod(t.slot("n1"), pod(n1_cpu, n1_mem))
    return t


def scores(plugin, p, t):
    return plugin.score(p, t, t.active_indices(), CTX).tolist()


def test_least_allocated():
    # n1: cpu (4000-1500)*100/4000 = 62 (62.5 truncated), memory (8-3)*100/8 = 62 -> 62
    # n2: cpu (2000-500)*100/2000 = 75, memory (4-1)*100/4 = 75 -> 75
    assert scores(LeastAllocated(), pod(), two_nodes()) == [62, 75]


def test_most_allocated():
    # n1: 1500*100/4000 = 37, 3*100/8 = 37 -> 37; n2: 25, 25 -> 25
    assert scores(MostAllocated(), pod(), two_nodes()) == [37, 25]


def test_resource_weights_enter_the_mean():
    # n1 cpu 37, memory (1+2+... ) with memory requested 6Gi: (6+1)*100/8 = 87 -> (37*1 + 87*3) / 4 = 74
    t = two_nodes(n1_mem=6 * Gi)
    assert scores(MostAllocated({"cpu": 1, "memory": 3}), pod(), t)[0] == (37 + 87 * 3) // 4


@pytest.mark.parametrize("empty", [{}, []])
def test_empty_resources_are_cpu_and_memory_as_kube_scheduler_defaults_them(empty):
    """kube-scheduler's v1 defaulting fills an empty ``resources`` list with cpu and memory,
    weight 1 (tests/test_plugin_fidelity.py checks it on the real scheduler)."""
    t = two_nodes(n1_mem=6 * Gi)
    for make in (LeastAllocated, MostAllocated, RequestedToCapacityRatio, BalancedAllocation):
        assert make(empty).resources == [("cpu", 1), ("memory", 1)], make
        assert scores(make(empty), pod(), t) == scores(make(), pod(), t), make


def test_over_requested_node():
    t = NodeTable()
    t.upsert_node("n", {"cpu": 1000, "memory": 1 * Gi, "pods": 110})
    big = pod(2000, 2 * Gi)
    assert scores(LeastAllocated(), big, t) == [0]
    assert scores(MostAllocated(), big, t) == [100]


def test_nonzero_defaults_for_scoring():
    t = NodeTable()
    t.upsert_node("n", {"cpu": 1000, "memory": 1000 * 1024**2, "pods": 110})
    best_effort = Pod.from_dict({"metadata": {"name": "x"}, "spec": {"containers": [{"name": "c"}]}})
    assert best_effort.requests == {}
    assert (best_effort.nonzero_cpu, best_effort.nonzero_memory) == (100, 200 * 1024**2)
    # cpu 100*100/1000 = 10, memory 200*100/1000 = 20 -> 15
    assert scores(MostAllocated(), best_effort, t) == [15]


def test_nonzero_defaults_for_scoring_with_resources_beyond_cpu_and_memory():
    """The general path (a resource other than cpu and memory named) scores cpu and memory
    by the non-zero requests too (resource_allocation.go: GetNonZeroRequested unless
    useRequested, which only BalancedAllocation sets). Node cpu 1000 holding a best-effort
    pod (counted 100m), incoming pod 200m: cpu (100 + 200) * 100 / 1000 = 30 (real
    requests would give 200 -> 20); ephemeral-storage 0 -> 0; mean (30 + 0) / 2 = 15."""
    t = NodeTable()
    t.upsert_node("n", {"cpu": 1000, "memory": Gi, "ephemeral-storage": 10 * Gi, "pods": 110})
    t.add_pod(0, Pod("be", nonzero_cpu=100, nonzero_memory=200 * 1024**2))
    plugin = MostAllocated({"cpu": 1, "ephemeral-storage": 1})
    assert scores(plugin, pod(200, 0), t) == [15]


def test_ephemeral_storage_is_scored_even_when_the_pod_requests_none():
    """kube-scheduler leaves out only a *scalar* (extended, hugepages...) resource the pod
    does not request (resource_allocation.go: IsScalarResourceName); ephemeral-storage is
    native and scored. Node cpu 1000, ephemeral-storage 10Gi, holding a pod of 500m and 5Gi;
    incoming pod 100m and no storage: cpu (500 + 100) * 100 / 1000 = 60, storage
    5Gi * 100 / 10Gi = 50; mean (60 + 50) / 2 = 55 (60 were storage left out)."""
    t = NodeTable()
    t.upsert_node("n", {"cpu": 1000, "memory": Gi, "ephemeral-storage": 10 * Gi, "pods": 110})
    storage = Pod("w", requests={"cpu": 500, "ephemeral-storage": 5 * Gi}, nonzero_cpu=500, nonzero_memory=0)
    t.add_pod(0, storage)
    assert scores(MostAllocated({"cpu": 1, "ephemeral-storage": 1}), pod(100, 0), t) == [55]


def test_balanced_allocation():
    # kube 1.37: 50 + (50 + balance(with pod) - balance(without)) / 2, real requests.
    # n1 with pod: cpu 1500/4000 = .375, memory 5Gi/8Gi = .625 -> std .125 -> 87;
    #    without: cpu .25, memory .5 -> std .125 -> 87; score 50 + 50/2 = 75
    # n2 with pod: .25, .25 -> 100; without: 0, 0 -> 100; score 75
    t = two_nodes(n1_mem=4 * Gi)
    assert scores(BalancedAllocation(), pod(), t) == [75, 75]
    # a pod that evens n1 out: memory-only pod of 2Gi: with pod cpu .25, memory .75 -> std .25 -> 75;
    # 50 + (50 + 75 - 87) / 2 = 50 + 38 / 2 = 69
    mem_only = Pod("m", requests={"memory": 2 * Gi}, nonzero_cpu=100, nonzero_memory=2 * Gi)
    assert scores(BalancedAllocation(), mem_only, t)[0] == 69
    # cpu-heavy pod on n1: 2000 cpu -> cpu .75, memory .5 -> std .125 -> 87... equal balance -> 75;
    # 1000 cpu -> cpu .5, memory .5 -> 100: 50 + (50 + 100 - 87) / 2 = 81
    assert scores(BalancedAllocation(), pod(1000, 0), t)[0] == 81


def test_balanced_allocation_three_resources_population_std():
    # kube's balancedResourceScore: more than two fractions -> sqrt(sum((f - mean)^2) / n).
    # With the pod: cpu 2000/4000 = .5, memory 2Gi/8Gi = .25, ephemeral-storage 0 -> mean .25,
    # std sqrt(.125 / 3) = .2041 -> int(79.59) = 79 (a sample std, / 2, would give .25 -> 75);
    # without: all 0 -> 100. Score 50 + (50 + 79 - 100) / 2 = 50 + 14 = 64.
    t = NodeTable()
    t.upsert_node("n", {"cpu": 4000, "memory": 8 * Gi, "ephemeral-storage": 100 * Gi, "pods": 110})
    plugin = BalancedAllocation({"cpu": 1, "memory": 1, "ephemeral-storage": 1})
    assert scores(plugin, pod(2000, 2 * Gi), t) == [64]


def test_balanced_allocation_skips_best_effort():
    assert BalancedAllocation().skip(Pod("be"))
    assert not BalancedAllocation().skip(pod())
    # only a pod requesting none of the resources is skipped (isBestEffortPod: every
    # request 0); one requesting memory alone is scored
    assert not BalancedAllocation().skip(Pod("m", requests={"memory": Gi}))


def test_balanced_allocation_two_fractions_take_kubes_half_difference():
    """With exactly two fractions kube computes ``std = |f1 - f2| / 2``, not the square root
    of the variance (balancedResourceScore), and the two differ in the last bit: on an empty
    node of cpu 1000 and ephemeral-storage 1000, a pod of 40 and 720 gives fractions .04 and
    .72, |.04 - .72| / 2 = 0.33999999999999997 -> int((1 - std) * 100) = int(66.00000000000001)
    = 66, where the square root gives 0.34000000000000002 -> 65. Without the pod both are 0
    -> 100. Score 50 + (50 + 66 - 100) / 2 = 58 (57 with the square root)."""
    t = NodeTable()
    t.upsert_node("n", {"cpu": 1000, "memory": Gi, "ephemeral-storage": 1000, "pods": 110})
    p = Pod("p", requests={"cpu": 40, "ephemeral-storage": 720}, nonzero_cpu=40, nonzero_memory=0)
    assert scores(BalancedAllocation({"cpu": 1, "ephemeral-storage": 1}), p, t) == [58]


def test_requested_to_capacity_ratio_truncates_like_go():
    # shape (0,10) (30,4) (100,0) -> scores 100, 40, 0. Utilization 45%:
    # 40 + (0-40)*(45-30)/(100-30) = 40 + (-600/70 -> -8 in Go) = 32 (floor division would give 31)
    t = NodeTable()
    t.upsert_node("n", {"cpu": 4000, "memory": 8 * Gi, "pods": 110})
    t.add_pod(0, pod(1300, 0))
    shape = [
        {"utilization": 0, "score": 10},
        {"utilization": 30, "score": 4},
        {"utilization": 100, "score": 0},
    ]
    plugin = RequestedToCapacityRatio(resources={"cpu": 1}, shape=shape)
    assert scores(plugin, pod(500, 1 * Gi), t) == [32]


def test_requested_to_capacity_ratio_before_the_first_and_after_the_last_point():
    """kube's BuildBrokenLinearFunction (helper/shape_score.go): a utilization at or below
    the first point scores the first point's score, one above the last the last's. Shape
    (50, 5) (80, 8), scores x10: 50 and 80. Node cpu 4000: a pod of 1000m is 25% -> 50;
    2400m is 60% -> 50 + (80 - 50) * (60 - 50) / (80 - 50) = 60; 3600m is 90% -> 80."""
    t = NodeTable()
    t.upsert_node("n", {"cpu": 4000, "memory": 8 * Gi, "pods": 110})
    shape = [{"utilization": 50, "score": 5}, {"utilization": 80, "score": 8}]
    plugin = RequestedToCapacityRatio(resources={"cpu": 1}, shape=shape)
    assert [scores(plugin, pod(cpu, Gi), t)[0] for cpu in (1000, 2400, 3600)] == [50, 60, 80]


def test_requested_to_capacity_ratio_mean_rounds_and_skips_zero():
    # cpu util 37 -> 37, memory util 0 -> score 0 is left out of the mean: 37
    t = NodeTable()
    t.upsert_node("n", {"cpu": 4000, "memory": 8 * Gi, "pods": 110})
    t.add_pod(0, pod(1000, 0))
    p = Pod("p", requests={"cpu": 500}, nonzero_cpu=500, nonzero_memory=0)
    assert scores(RequestedToCapacityRatio(), p, t) == [37]


def test_requested_to_capacity_ratio_mean_of_two_resources_rounds_half_up():
    # cpu (1000 + 500) * 100 / 4000 = 37 -> 37; memory (3 + 1) * 100 / 8 = 50 -> 50;
    # math.Round((37 + 50) / 2 = 43.5) = 44 (truncating would give 43)
    t = NodeTable()
    t.upsert_node("n", {"cpu": 4000, "memory": 8 * Gi, "pods": 110})
    t.add_pod(0, pod(1000, 3 * Gi))
    assert scores(RequestedToCapacityRatio(), pod(500, 1 * Gi), t) == [44]


def test_resource_scores_take_the_weighted_mean_truncated():
    """kube-scheduler's resource scorers take the weighted mean of the per-resource scores
    with Go's integer division (``resource_allocation.go``: ``nodeScore / weightSum``)."""
    t = NodeTable()
    t.upsert_node("n", {"cpu": 4000, "memory": 100 * Gi, "pods": 110})
    # cpu (4000 - 1500) * 100 / 4000 = 62 (62.5 truncated), memory (100 - 23) * 100 / 100 = 77;
    # mean (62 + 77) / 2 = 69.5 -> 69 (rounding would give 70)
    assert scores(LeastAllocated(), pod(1500, 23 * Gi), t) == [69]


def test_fit_takes_an_exact_fit():
    """NodeResourcesFit refuses a pod only when it asks more than is free
    (``fitsRequest``: ``podRequest > allocatable - requested``): all of it fits."""
    t = NodeTable()
    t.upsert_node("n", {"cpu": 1000, "memory": Gi, "pods": 110})
    t.add_pod(0, pod(250, Gi // 4))
    idx = t.active_indices()
    # free: 750 millicores and 3/4 GiB
    assert NodeResourcesFitFilter().filter(pod(750, 3 * Gi // 4), t, idx, CTX).tolist() == [True]
    assert NodeResourcesFitFilter().filter(pod(751, 3 * Gi // 4), t, idx, CTX).tolist() == [False]
    assert NodeResourcesFitFilter().filter(pod(750, 3 * Gi // 4 + 1), t, idx, CTX).tolist() == [False]


def test_taint_toleration_scores_every_node_100_when_none_has_a_soft_taint():
    """Without PreferNoSchedule taints every count is 0, and kube-scheduler's reverse
    normalization (``DefaultNormalizeScore(..., reverse=true)`` with a max count of 0)
    gives every node the maximum, 100."""
    t = NodeTable()
    t.upsert_node("plain", {"cpu": 1000, "memory": Gi, "pods": 110})
    t.upsert_node("hard", {"cpu": 1000, "memory": Gi, "pods": 110}, taints=[Taint("k", "v", "NoSchedule")])
    assert scores(TaintTolerationScore(), pod(), t) == [100, 100]


def test_taint_toleration_score():
    t = NodeTable()
    soft = "PreferNoSchedule"
    t.upsert_node("clean", {"cpu": 1000, "memory": Gi})
    t.upsert_node("one", {"cpu": 1000, "memory": Gi}, taints=[Taint("a", "", soft)])
    t.upsert_node("two", {"cpu": 1000, "memory": Gi}, taints=[Taint("a", "", soft), Taint("b", "x", soft)])
    assert scores(TaintTolerationScore(), pod(), t) == [100, 50, 0]
    tolerant = pod(tolerations=(Toleration("b", "Equal", "x", soft),))
    assert scores(TaintTolerationScore(), tolerant, t) == [100, 0, 0]
    everything = pod(tolerations=(Toleration(operator="Exists"),))
    assert scores(TaintTolerationScore(), everything, t) == [100, 100, 100]


def test_taint_toleration_score_counts_prefer_no_schedule_taints_only():
    """countIntolerableTaintsPreferNoSchedule (tainttoleration) skips every taint of another
    effect: a node with one PreferNoSchedule and one (tolerated-by-filter) NoSchedule taint
    counts 1, as does a node with the PreferNoSchedule taint alone. Counts 0, 1, 1 -> reverse
    normalized 100, 0, 0 (counting the NoSchedule taint: 0, 1, 2 -> 100, 50, 0)."""
    t = NodeTable()
    soft = "PreferNoSchedule"
    t.upsert_node("clean", {"cpu": 1000, "memory": Gi})
    t.upsert_node("one", {"cpu": 1000, "memory": Gi}, taints=[Taint("a", "", soft)])
    mixed = [Taint("a", "", soft), Taint("gpu", "", NO_SCHEDULE)]
    t.upsert_node("mixed", {"cpu": 1000, "memory": Gi}, taints=mixed)
    tolerant = pod(tolerations=(Toleration("gpu", "Exists", "", NO_SCHEDULE),))
    assert scores(TaintTolerationScore(), tolerant, t) == [100, 0, 0]


def _build_pod(name: str, topology_key: str = "kubernetes.io/hostname") -> Pod:
    term = PodAffinityTerm(100, tuple(sorted(BUILD_LABELS.items())), topology_key)
    return pod(
        name=name,
        labels=dict(BUILD_LABELS),
        annotations={BUILD_REPO_ANNOTATION: "https://example.org/repo"},
        pod_anti_affinity=(term,),
    )


def _nodes_with_builds(*builds: int) -> NodeTable:
    t = NodeTable()
    for i, count in enumerate(builds):
        t.upsert_node(f"n{i}", {"cpu": 64000, "memory": 64 * Gi, "pods": 110})
        for k in range(count):
            t.add_pod(i, _build_pod(f"b{i}-{k}"))
    return t


def test_a_toleration_without_operator_compares_values_and_an_unknown_one_tolerates_nothing() -> None:
    """k8s.io/api core/v1 toleration.go ``ToleratesTaint``: an operator left out (read as
    ``Equal``) or empty compares the values; any operator but ``Equal``, ``""`` and ``Exists``
    tolerates nothing."""
    taint, other_value = Taint("k", "v", NO_SCHEDULE), Taint("k", "w", NO_SCHEDULE)
    read = Toleration.from_dict({"key": "k", "value": "v"})
    assert read.operator == "Equal" and read.tolerates(taint) and not read.tolerates(other_value)
    empty = Toleration("k", "", "v")
    assert empty.tolerates(taint) and not empty.tolerates(other_value)
    assert not Toleration("k", "Near", "v").tolerates(taint)
    assert not Toleration("k", "Near", "v").tolerates(other_value)


def test_build_anti_affinity_normalizes_like_inter_pod_affinity():
    """interpodaffinity/scoring.go NormalizeScore: ``int(100 * ((s - min) / (max - min)))``
    over the nodes' sums, 0 everywhere when they are all equal. Each build pod counts -100 for
    the incoming pod's term and -100 for its own: builds 0, 1, 2 -> -0, -200, -400 -> 100, 50,
    0; one build on each of two nodes -> 0, 0."""
    assert scores(BuildAntiAffinity(), _build_pod("new"), _nodes_with_builds(0, 1, 2)) == [100, 50, 0]
    assert scores(BuildAntiAffinity(), _build_pod("new"), _nodes_with_builds(1, 1)) == [0, 0]


def test_build_anti_affinity_truncates_the_float_product():
    """The float product is truncated, as Go's int64(fScore): builds 0, 21, 50 -> sums 0,
    -4200, -10000; the middle node (-4200 + 10000) / 10000 = 0.58, 100 * 0.58 =
    57.99999999999999 -> 57 (integer arithmetic, 100 * 5800 // 10000, would give 58)."""
    assert scores(BuildAntiAffinity(), _build_pod("new"), _nodes_with_builds(0, 21, 50)) == [100, 57, 0]


def test_build_anti_affinity_counts_build_pods_for_any_pod_with_the_term():
    """kube-scheduler's InterPodAffinity weighs the incoming pod's preferred anti-affinity
    term against the build pods on each node whatever that pod is: one with BinderHub's term
    but no ``binder-repo`` annotation and no build labels scores builds 0, 1, 2 as -0, -100,
    -200 -> 100, 50, 0 (the existing pods' own terms do not select it)."""
    term = PodAffinityTerm(100, tuple(sorted(BUILD_LABELS.items())), "kubernetes.io/hostname")
    plain = pod(name="plain", pod_anti_affinity=(term,))
    assert plain.build_repo is None
    assert scores(BuildAntiAffinity(), plain, _nodes_with_builds(0, 1, 2)) == [100, 50, 0]


def test_build_anti_affinity_weighs_the_hostname_term_only():
    """The model covers BinderHub's term (topology kubernetes.io/hostname); a build pod whose
    term is by zone is not modelled and skipped."""
    assert not BuildAntiAffinity().skip(_build_pod("new"))
    assert BuildAntiAffinity().skip(_build_pod("new", topology_key="topology.kubernetes.io/zone"))


def test_node_affinity_score():
    t = NodeTable()
    t.upsert_node("a", {"cpu": 1000}, labels={"zone": "a"})
    t.upsert_node("b", {"cpu": 1000}, labels={"zone": "a", "disk": "ssd"})
    t.upsert_node("c", {"cpu": 1000})
    p = pod(
        preferred_terms=(
            PreferredTerm(10, NodeSelectorTerm((Requirement("zone", "In", ("a",)),))),
            PreferredTerm(30, NodeSelectorTerm((Requirement("disk", "Exists"),))),
        )
    )
    # raw 10, 40, 0 -> 100*10/40 = 25, 100, 0
    assert scores(NodeAffinityScore(), p, t) == [25, 100, 0]


def test_a_node_has_only_the_labels_it_carries():
    # the node table once gave every node a kubernetes.io/hostname label of its name, so a
    # live node without one matched hostname affinity here and not in kube-scheduler
    t = NodeTable()
    t.upsert_node("labelled", {"cpu": 1000}, labels={"kubernetes.io/hostname": "labelled"})
    t.upsert_node("bare", {"cpu": 1000})
    host_in = (Requirement("kubernetes.io/hostname", "In", ("labelled", "bare")),)
    p = pod(preferred_terms=(PreferredTerm(10, NodeSelectorTerm(host_in)),))
    assert scores(NodeAffinityScore(), p, t) == [100, 0]


def test_filters():
    t = NodeTable()
    t.upsert_node("small", {"cpu": 400, "memory": 8 * Gi, "pods": 110})
    t.upsert_node(
        "tainted", {"cpu": 4000, "memory": 8 * Gi, "pods": 110}, taints=[Taint("gpu", "yes", "NoSchedule")]
    )
    t.upsert_node("cordoned", {"cpu": 4000, "memory": 8 * Gi, "pods": 110}, unschedulable=True)
    t.upsert_node("full", {"cpu": 4000, "memory": 8 * Gi, "pods": 1})
    t.upsert_node("ok", {"cpu": 4000, "memory": 8 * Gi, "pods": 110}, labels={"pool": "user"})
    t.add_pod(t.slot("full"), pod(1, 1))
    idx = t.active_indices()
    p = pod()
    assert NodeResourcesFitFilter().filter(p, t, idx, CTX).tolist() == [False, True, True, False, True]
    assert TaintTolerationFilter().filter(p, t, idx, CTX).tolist() == [True, False, True, True, True]
    tol = pod(tolerations=(Toleration("gpu", "Exists", "", "NoSchedule"),))
    assert TaintTolerationFilter().filter(tol, t, idx, CTX).tolist() == [True] * 5
    assert NodeUnschedulable().filter(p, t, idx, CTX).tolist() == [True, True, False, True, True]
    sel = pod(node_selector={"pool": "user"})
    assert NodeAffinityFilter().filter(sel, t, idx, CTX).tolist() == [False, False, False, False, True]
    req = pod(required_terms=(NodeSelectorTerm(fields=(Requirement("metadata.name", "In", ("small",)),)),))
    assert NodeAffinityFilter().filter(req, t, idx, CTX).tolist() == [True, False, False, False, False]


def test_an_untolerated_no_execute_taint_filters_a_node_out_as_no_schedule_does():
    """kube-scheduler's TaintToleration filter takes NoSchedule and NoExecute taints alike
    (k8s.io/kubernetes@v1.37.2 pkg/scheduler/framework/plugins/helper/taint.go,
    DoNotScheduleTaintsFilterFunc); a PreferNoSchedule one only scores."""
    t = NodeTable()
    for name, effect in (("evicting", "NoExecute"), ("soft", PREFER_NO_SCHEDULE), ("clean", None)):
        taints = [Taint("dedicated", "x", effect)] if effect else []
        t.upsert_node(name, {"cpu": 4000, "memory": 8 * Gi, "pods": 110}, taints=taints)
    idx = t.active_indices()
    assert TaintTolerationFilter().filter(pod(), t, idx, CTX).tolist() == [False, True, True]
    tolerant = pod(tolerations=(Toleration("dedicated", "Equal", "x", "NoExecute"),))
    assert TaintTolerationFilter().filter(tolerant, t, idx, CTX).tolist() == [True, True, True]


def test_node_unschedulable_lets_through_only_a_pod_tolerating_its_taint():
    """kube-scheduler's NodeUnschedulable (nodeunschedulable/node_unschedulable.go): a
    cordoned node takes a pod whose tolerations tolerate
    ``node.kubernetes.io/unschedulable:NoSchedule``, not one tolerating something else."""
    t = NodeTable()
    t.upsert_node("cordoned", {"cpu": 4000, "memory": 8 * Gi, "pods": 110}, unschedulable=True)
    idx = t.active_indices()
    other = pod(tolerations=(Toleration("gpu", "Exists", "", "NoSchedule"),))
    assert NodeUnschedulable().filter(other, t, idx, CTX).tolist() == [False]
    cordon = pod(tolerations=(Toleration("node.kubernetes.io/unschedulable", "Exists", "", "NoSchedule"),))
    assert NodeUnschedulable().filter(cordon, t, idx, CTX).tolist() == [True]


def test_fit_takes_an_exact_fit_and_the_last_pod_slot():
    """kube-scheduler's NodeResourcesFit refuses a request only when it exceeds allocatable
    minus requested (fitsRequest: ``podRequest > allocatable - requested``): a node with
    cpu 1000, 600 requested and 1 of 2 pod slots used takes a pod of 400m (1000 - 600 = 400,
    the second slot) but not one of 401m."""
    t = NodeTable()
    t.upsert_node("n", {"cpu": 1000, "memory": 8 * Gi, "pods": 2})
    t.add_pod(0, pod(600, Gi))
    idx = t.active_indices()
    assert NodeResourcesFitFilter().filter(pod(400, Gi), t, idx, CTX).tolist() == [True]
    assert NodeResourcesFitFilter().filter(pod(401, Gi), t, idx, CTX).tolist() == [False]


def test_required_node_affinity_ors_its_terms_and_an_empty_list_matches_nothing():
    """kube's NodeSelector.Match (component-helpers nodeaffinity): the terms are ORed, and
    a selector without terms matches no node (no term matches)."""
    t = NodeTable()
    t.upsert_node("a", {"cpu": 1000}, labels={"pool": "a"})
    t.upsert_node("b", {"cpu": 1000}, labels={"pool": "b"})
    t.upsert_node("c", {"cpu": 1000}, labels={"pool": "c"})
    idx = t.active_indices()
    either = pod(
        required_terms=(
            NodeSelectorTerm((Requirement("pool", "In", ("a",)),)),
            NodeSelectorTerm((Requirement("pool", "In", ("b",)),)),
        )
    )
    assert NodeAffinityFilter().filter(either, t, idx, CTX).tolist() == [True, True, False]
    assert NodeAffinityFilter().filter(pod(required_terms=()), t, idx, CTX).tolist() == [False] * 3


def test_fit_ignores_resources_the_pod_does_not_request():
    t = NodeTable()
    t.upsert_node("n", {"cpu": 1000, "memory": Gi, "pods": 110})
    t.add_pod(0, pod(1500, 0))  # over-committed cpu
    assert NodeResourcesFitFilter().filter(
        Pod("m", requests={"memory": 1}), t, t.active_indices(), CTX
    ).tolist() == [True]


def test_scale_down_aware():
    t = NodeTable()
    t.upsert_node("busy", {"cpu": 1000, "memory": 10 * Gi, "pods": 110})
    t.upsert_node("idle", {"cpu": 1000, "memory": 10 * Gi, "pods": 110})
    t.upsert_node(
        "candidate",
        {"cpu": 1000, "memory": 10 * Gi, "pods": 110},
        taints=[Taint("DeletionCandidateOfClusterAutoscaler", "1", "PreferNoSchedule")],
    )
    t.add_pod(0, pod(700, Gi))
    s = scores(ScaleDownAware(), pod(100, Gi), t)
    # busy: util .8 >= .5 -> 100; idle (quiet): util .1 -> 20 * .1 / .5 = 4; candidate: 0
    assert s == [100, 4, 0]


def test_scale_down_aware_at_a_threshold_of_zero_takes_only_nodes_requesting_nothing_as_quiet():
    """The autoscaler's threshold may be 0 (its flags check no range; 1.35+ compares "at or
    below"): a node is then underutilized only at utilization 0."""
    t = NodeTable()
    t.upsert_node("small", {"cpu": 1000, "memory": 10 * Gi, "pods": 110})
    t.upsert_node("idle", {"cpu": 1000, "memory": 10 * Gi, "pods": 110})
    t.add_pod(0, pod(10, 0))  # small: 10 of 1000 millicores
    zero = SchedulingContext(utilization_threshold=0.0)
    # small: util .01 > 0 -> 100; idle with a pod requesting nothing: util 0 <= 0 -> 20 * 0 = 0
    idx = t.active_indices()
    assert ScaleDownAware().score(pod(0, 0), t, idx, zero).tolist() == [100, 0]
    # the same pod requesting 1 millicore makes idle busy too: util .001 > 0 -> 100
    assert ScaleDownAware().score(pod(1, 0), t, idx, zero).tolist() == [100, 100]
    assert quiet_nodes(pod(0, 0), t, idx, zero).tolist() == [False, True]


def test_scale_down_aware_takes_a_node_of_a_group_at_its_min_size_as_busy():
    """A node of a node group at or under its minimum size is one the autoscaler never
    removes: ScaleDownAware scores it as a busy node and quiet_nodes does not count it
    (BuildSpread, BuildHeadroom); a group above its minimum keeps its quiet nodes quiet; a
    node in no known group, or a group with no minimum, is weighed as before."""
    pool = "cloud.google.com/gke-nodepool"
    t = NodeTable()
    spec = {"cpu": 1000, "memory": 10 * Gi, "pods": 110}
    t.upsert_node("core-0", spec, labels={pool: "core"})
    t.upsert_node("user-0", spec, labels={pool: "user"})
    t.upsert_node("user-1", spec, labels={pool: "user"})
    t.upsert_node("loose", spec)
    t.upsert_node(
        "core-candidate",
        spec,
        labels={pool: "core"},
        taints=[Taint("DeletionCandidateOfClusterAutoscaler", "1", "PreferNoSchedule")],
    )
    idx = t.active_indices()
    p = pod(100, Gi)
    plain = ScaleDownAware().score(p, t, idx, CTX).tolist()
    assert plain == [4, 4, 4, 4, 0]  # all quiet: util .1 -> 20 * .1 / .5 = 4; the candidate 0
    groups = NodeGroups(min_sizes={"core": 2, "user": 1})
    ctx = SchedulingContext(node_groups=groups)
    # core: 2 nodes, min 2 -> busy (100; the candidate's taint still wins); user: 2 > 1 -> quiet
    plugin = ScaleDownAware()
    assert plugin.score(p, t, idx, ctx).tolist() == [100, 4, 4, 4, 0]
    assert plugin.score(p, t, idx, CTX).tolist() == plain  # the memo holds no group
    assert quiet_nodes(p, t, idx, ctx).tolist() == [False, True, True, True, False]
    # a user node goes: the other is at the minimum now
    t.remove_node("user-1")
    idx = t.active_indices()
    assert plugin.score(p, t, idx, ctx).tolist() == [100, 100, 4, 0]
    # groups without minimum sizes: nothing changes (and nothing is read)
    assert ScaleDownAware().score(p, t, idx, SchedulingContext(node_groups=NodeGroups())).tolist() == [
        4,
        4,
        4,
        0,
    ]


def test_utilization_counts_the_pods_memory_as_well_as_its_cpu():
    """The pod's memory enters the node's utilization: a memory-heavy pod makes a node of
    little cpu busy."""
    t = NodeTable()
    t.upsert_node("half-full", {"cpu": 4000, "memory": 8 * Gi, "pods": 110})
    t.upsert_node("empty", {"cpu": 4000, "memory": 8 * Gi, "pods": 110})
    t.add_pod(0, pod(400, 3 * Gi))
    idx = t.active_indices()
    big = pod(100, 2 * Gi)
    # half-full: cpu (400 + 100) / 4000 = .125, memory (3 + 2) / 8 = .625 -> .625
    # empty: cpu 100 / 4000 = .025, memory 2 / 8 = .25 -> .25
    util, threshold = utilization_and_threshold(big, t, idx, CTX)
    assert util.tolist() == [0.625, 0.25] and threshold == 0.5
    assert quiet_nodes(big, t, idx, CTX).tolist() == [False, True]
    # half-full: .625 > .5 -> 100; empty: 20 * .25 / .5 = 10
    assert scores(ScaleDownAware(), big, t) == [100, 10]


def test_a_node_exactly_at_the_threshold_is_quiet():
    """As cluster-autoscaler 1.32.6+, 1.33.4+, 1.34.3+ and 1.35.0+: a node whose utilization
    with the pod equals the threshold is a scale-down candidate, at the cpu/memory threshold
    and at the GPU threshold alike; one a millicore over it is not."""
    t = NodeTable()
    t.upsert_node("at", {"cpu": 4000, "memory": 8 * Gi, "pods": 110})
    t.upsert_node("over", {"cpu": 4000, "memory": 8 * Gi, "pods": 110})
    t.upsert_node("gpus-at", {"cpu": 8000, "memory": 32 * Gi, "pods": 110, "nvidia.com/gpu": 4})
    t.add_pod(0, pod(1500, Gi))
    t.add_pod(1, pod(1501, Gi))
    t.add_pod(2, Pod("g", requests={"cpu": 7000, "memory": Gi, "nvidia.com/gpu": 2}))
    idx = t.active_indices()
    notebook = Pod("nb", requests={"cpu": 500, "memory": Gi, "nvidia.com/gpu": 1})
    ctx = SchedulingContext(utilization_threshold=0.5, gpu_utilization_threshold=0.75)
    # at: cpu (1500 + 500) / 4000 = .5, memory 2 / 8 = .25 -> .5, threshold .5
    # over: cpu 2001 / 4000 = .50025 -> over .5
    # gpus-at: GPUs (2 + 1) / 4 = .75, threshold .75 (its cpu, 7500 of 8000, not weighed)
    util, threshold = utilization_and_threshold(notebook, t, idx, ctx)
    assert util.tolist() == [0.5, 2001 / 4000, 0.75]
    assert np.asarray(threshold).tolist() == [0.5, 0.5, 0.75]
    assert quiet_nodes(notebook, t, idx, ctx).tolist() == [True, False, True]
    # at: 20 * .5 / .5 = 20; over: 100; gpus-at: 20 * .75 / .75 = 20
    assert ScaleDownAware().score(notebook, t, idx, ctx).tolist() == [20, 100, 20]


def test_scale_down_aware_weighs_gpu_nodes_by_their_gpus():
    """As the autoscaler: a node with ``nvidia.com/gpu`` allocatable is weighed by its GPU
    requests alone, at the GPU threshold, so a GPU notebook goes to the GPU node whose GPUs
    are busiest, whatever their cpu; and ``quiet_nodes`` (BuildSpread, BuildHeadroom) agrees."""
    t = NodeTable()
    gpu_node = {"cpu": 8000, "memory": 32 * Gi, "pods": 110, "nvidia.com/gpu": 4}
    t.upsert_node("cpu-full", gpu_node)  # 7 of 8 cpus, no GPU in use
    t.upsert_node("gpus-busy", gpu_node)  # 1 cpu, 2 of 4 GPUs
    t.upsert_node("plain", {"cpu": 8000, "memory": 32 * Gi, "pods": 110})
    t.add_pod(0, pod(7000, Gi))
    t.add_pod(1, Pod("g", requests={"cpu": 1000, "memory": Gi, "nvidia.com/gpu": 2}))
    notebook = Pod("nb", requests={"cpu": 500, "memory": Gi, "nvidia.com/gpu": 1})
    # cpu-full: GPU util 1/4 < .5 -> 20 * .25 / .5 = 10; gpus-busy: 3/4 -> 100;
    # plain (no GPUs): cpu (0 + 500) / 8000 -> 20 * .0625 / .5 = 2
    assert scores(ScaleDownAware(), notebook, t) == [10, 100, 2]
    idx = t.active_indices()
    stricter = SchedulingContext(gpu_utilization_threshold=0.8)  # 3/4 is under it: 20 * .75 / .8
    assert ScaleDownAware().score(notebook, t, idx, stricter).tolist() == [6, 18, 2]
    assert utilization_with(notebook, t, idx).tolist() == [0.25, 0.75, 0.0625]
    assert quiet_nodes(
        notebook, t, idx, SchedulingContext(utilization_threshold=0.5, gpu_utilization_threshold=0.5)
    ).tolist() == [True, False, True]
    assert quiet_nodes(
        notebook, t, idx, SchedulingContext(utilization_threshold=0.05, gpu_utilization_threshold=0.8)
    ).tolist() == [True, True, False]


def test_gpu_nodes_of_every_vendor_the_autoscaler_knows():
    """The autoscaler weighs a node by the first GPU resource of its list it has
    allocatable (NVIDIA, Intel Gaudi, Intel Xe, AMD, DirectX): an AMD node by its AMD GPUs,
    a node with Gaudi and AMD allocatable by its Gaudis; any other extended resource does
    not make a GPU node."""
    t = NodeTable()
    base = {"cpu": 8000, "memory": 32 * Gi, "pods": 110}
    t.upsert_node("amd", {**base, "amd.com/gpu": 2})
    t.upsert_node("gaudi-and-amd", {**base, "habana.ai/gaudi": 8, "amd.com/gpu": 2})
    t.upsert_node("dongle", {**base, "example.com/dongle": 4})
    t.add_pod(0, Pod("a", requests={"cpu": 100, "memory": Gi, "amd.com/gpu": 1}))
    t.add_pod(1, Pod("g", requests={"cpu": 100, "memory": Gi, "habana.ai/gaudi": 6, "amd.com/gpu": 2}))
    t.add_pod(2, Pod("d", requests={"cpu": 7000, "memory": Gi, "example.com/dongle": 1}))
    idx = t.active_indices()
    nothing = Pod("p", requests={"cpu": 0, "memory": 0})
    # amd: 1 of 2; gaudi-and-amd: 6 of 8 Gaudis (its AMD GPUs, all used, do not count);
    # dongle: cpu 7000 of 8000
    assert utilization_with(nothing, t, idx).tolist() == [0.5, 0.75, 0.875]
    assert gpu_columns(t, idx).tolist() == [t.rindex["amd.com/gpu"], t.rindex["habana.ai/gaudi"], -1]
    amd_pod = Pod("q", requests={"cpu": 0, "memory": 0, "amd.com/gpu": 1})
    assert utilization_with(amd_pod, t, idx).tolist() == [1.0, 0.75, 0.875]


def test_a_gpu_labelled_node_without_gpus_yet_is_quiet():
    """As the autoscaler: a node carrying its cloud provider's GPU label whose GPUs are not
    allocatable yet (the device plugin not up) is taken as unused, whatever its cpu; only
    with ``ctx.gpu_labels`` naming the label. The mask follows node changes, and the memo
    tells a labelled node from an unlabelled one of the same resources."""
    t = NodeTable()
    base = {"cpu": 8000, "memory": 32 * Gi, "pods": 110}
    t.upsert_node("booting", base, labels={"cloud.google.com/gke-accelerator": "nvidia-l4"})
    t.upsert_node("plain", base)
    t.add_pod(0, pod(6000, Gi))
    t.add_pod(1, pod(6000, Gi))
    idx = t.active_indices()
    user = pod(500, Gi)
    labels = ("cloud.google.com/gke-accelerator", "k8s.amazonaws.com/accelerator")
    by_label = SchedulingContext(gpu_labels=labels)
    kept = ScaleDownAware()
    assert kept.score(user, t, idx, CTX).tolist() == [100, 100]  # cpu 6500 / 8000
    assert kept.score(user, t, idx, by_label).tolist() == [0, 100]
    assert quiet_nodes(user, t, idx, by_label).tolist() == [True, False]
    ctx = SchedulingContext(utilization_threshold=0.6, gpu_utilization_threshold=0.3, gpu_labels=labels)
    util, threshold = utilization_and_threshold(user, t, idx, ctx)
    assert util.tolist() == [0.0, 6500 / 8000] and np.asarray(threshold).tolist() == [0.3, 0.6]
    # its GPUs come up: weighed by them (none used yet: 0 of 4, still quiet)
    t.upsert_node("booting", {**base, "nvidia.com/gpu": 4}, labels={"cloud.google.com/gke-accelerator": "x"})
    t.add_pod(0, Pod("g", requests={"cpu": 0, "memory": 0, "nvidia.com/gpu": 3}))
    assert kept.score(user, t, idx, by_label).tolist() == [100, 100]  # 3 of 4 GPUs
    # the label goes (a new node in the slot of a removed one is not labelled either)
    t.remove_node("booting")
    t.upsert_node("fresh", base)
    t.add_pod(t.slot("fresh"), pod(6000, Gi))
    assert not t.labelled(labels)[t.active_indices()].any()
    assert kept.score(user, t, t.active_indices(), by_label).tolist() == [100, 100]
    # an EKS-labelled node added after the mask was built, beyond the table's first rows
    for k in range(70):
        t.upsert_node(f"n{k}", base, labels={"k8s.amazonaws.com/accelerator": "a10g"} if k == 69 else None)
    assert t.labelled(labels)[t.active_indices()].sum() == 1
    assert bool(t.labelled(labels)[t.slot("n69")])


def test_scale_down_aware_leaves_daemonset_pods_out_when_told():
    """With ``ctx.ignore_daemonsets_utilization`` (the autoscaler's flag) a node's DaemonSet
    pods' requests leave both its requests and its allocatable, the pod placed too when it
    is one; one instance (its memo) tells the settings apart."""
    t = NodeTable()
    t.upsert_node("n", {"cpu": 4000, "memory": 64 * Gi, "pods": 110})
    agent = Pod("agent", requests={"cpu": 1000, "memory": Gi}, owner_kind="DaemonSet")
    t.add_pod(0, agent)
    t.add_pod(0, pod(1000, Gi))
    idx = t.active_indices()
    user, other_agent = pod(200, Gi), Pod("a2", requests={"cpu": 200, "memory": Gi}, owner_kind="DaemonSet")
    ignoring = SchedulingContext(ignore_daemonsets_utilization=True)
    kept = ScaleDownAware()
    for _ in range(2):  # the second round from the memo
        assert kept.score(user, t, idx, CTX).tolist() == [100]  # 2200 / 4000
        assert kept.score(user, t, idx, ignoring).tolist() == [16]  # 1200 / 3000 -> 20 * .4 / .5
        assert kept.score(other_agent, t, idx, ignoring).tolist() == [14]  # 1000 / 2800
        assert kept.score(other_agent, t, idx, CTX).tolist() == [100]
    assert t.daemonset_requested[0, t.rindex["cpu"]] == 1000
    t.remove_pod(0, agent)
    assert kept.score(user, t, idx, ignoring).tolist() == [12]  # nothing left out: 1200 / 4000


def test_a_static_daemonset_pod_is_left_out_by_the_mirror_flag_alone():
    """The autoscaler's ``CalculateUtilizationOfResource`` asks each flag in turn: a mirror
    pod annotated as a DaemonSet pod is left out with ``--ignore-mirror-pods-utilization``
    alone too, on the node and as the pod placed."""
    t = NodeTable()
    t.upsert_node("n", {"cpu": 4000, "memory": 64 * Gi, "pods": 110})
    static = {"kubernetes.io/config.mirror": "x", "cluster-autoscaler.kubernetes.io/daemonset-pod": "true"}
    big_static = Pod("s", requests={"cpu": 2000, "memory": Gi}, annotations=static)
    t.add_pod(0, pod(500, Gi))
    idx = t.active_indices()
    mirror_only = SchedulingContext(ignore_mirror_pods_utilization=True)
    kept = ScaleDownAware()
    assert kept.score(big_static, t, idx, mirror_only).tolist() == [10]  # 500 / 2000
    t.add_pod(0, big_static)
    assert t.daemonset_mirror_requested[0, t.rindex["cpu"]] == 2000
    assert kept.score(pod(200, Gi), t, idx, mirror_only).tolist() == [14]  # 700 / 2000
    assert kept.score(pod(200, Gi), t, idx, CTX).tolist() == [100]  # 2700 / 4000
    both = SchedulingContext(ignore_daemonsets_utilization=True, ignore_mirror_pods_utilization=True)
    assert kept.score(pod(200, Gi), t, idx, both).tolist() == [14]  # left out once
    t.remove_pod(0, big_static)
    assert not t.daemonset_mirror_requested.any() and not t.daemonset_requested.any()


def test_scale_down_aware_memo_keys_carry_the_ignore_flags():
    """A memo key is the node's state (longer with an ignore flag set: the unweighed
    columns too) and what the score reads of the pod and the settings: the flags
    themselves are in it, so a key with them cannot equal one without them from a table
    that gained columns in between (contrived numbers that once lined up: 4 columns and
    the flag, 12 integers; 6 columns without it, 12 integers)."""
    t = NodeTable(resources=("cpu", "memory", "pods", "x"))
    t.upsert_node("a", {"cpu": 4000, "memory": 4000, "pods": 10, "x": 10})
    t.add_pod(0, Pod("ds", requests={"cpu": 1000, "memory": 1000}, owner_kind="DaemonSet"))
    t.add_pod(0, Pod("bare", requests={"cpu": 1000, "memory": 1000}))
    nothing = Pod("p", requests={"cpu": 0, "memory": 0})
    kept = ScaleDownAware()
    ignoring = SchedulingContext(ignore_daemonsets_utilization=True)
    assert kept.score(nothing, t, t.active_indices(), ignoring).tolist() == [13]  # 1000 / 3000
    b = t.upsert_node("b", {"cpu": 10, "memory": 10, "pods": 1000, "x": 1000, "y": 1, "z": 0})
    for k in range(2):
        t.add_pod(b, Pod(f"b{k}", requests={"cpu": 1000, "memory": 1000, "y": 2000, "z": 2000}))
    assert len(t.resources) == 6
    rows = np.array([b])
    fresh = ScaleDownAware().score(nothing, t, rows, CTX)
    assert kept.score(nothing, t, rows, CTX).tolist() == fresh.tolist() == [100]  # 2000 / 10


def test_a_gpu_node_whose_gpus_dra_publishes_is_weighed_by_cpu_and_memory():
    """GKE labels a GPU node whose GPUs a DRA driver publishes ``gke-gpu-dra-driver: "true"``:
    the autoscaler skips its GPU branch for it (``ExposedViaDra``) and weighs cpu and memory,
    still against the GPU threshold; not as a labelled node whose GPUs are not ready (0)."""
    t = NodeTable()
    labels = {"cloud.google.com/gke-accelerator": "nvidia-l4", "cloud.google.com/gke-gpu-dra-driver": "true"}
    t.upsert_node("dra", {"cpu": 8000, "memory": 32 * Gi, "pods": 110}, labels=labels)
    t.add_pod(0, pod(6000, Gi))
    idx = t.active_indices()
    gke = ("cloud.google.com/gke-accelerator",)
    kept = ScaleDownAware()
    assert kept.score(pod(500, Gi), t, idx, SchedulingContext(gpu_labels=gke)).tolist() == [
        100
    ]  # 6500 / 8000
    looser = SchedulingContext(gpu_labels=gke, gpu_utilization_threshold=0.9)
    assert kept.score(pod(500, Gi), t, idx, looser).tolist() == [18]  # 20 * 0.8125 / 0.9
    t.upsert_node(
        "dra",
        {"cpu": 8000, "memory": 32 * Gi, "pods": 110},
        labels={**labels, "cloud.google.com/gke-gpu-dra-driver": "false"},
    )
    assert kept.score(pod(500, Gi), t, idx, SchedulingContext(gpu_labels=gke)).tolist() == [0]  # not ready


def test_scale_down_aware_memo_tells_gpu_requests_and_thresholds_apart():
    """The same node states, asked for pods that differ only in GPUs or under another GPU
    threshold: one instance (its memo filling up) scores each as a fresh one does."""
    t = NodeTable()
    t.upsert_node("gpu", {"cpu": 8000, "memory": 32 * Gi, "pods": 110, "nvidia.com/gpu": 4})
    t.add_pod(0, Pod("g", requests={"cpu": 7000, "memory": Gi, "nvidia.com/gpu": 1}))
    idx = t.active_indices()
    kept = ScaleDownAware()
    seen = []
    for gpus, threshold in [(0, 0.5), (1, 0.5), (0, 0.3), (1, 0.3), (2, 0.9), (0, 0.5), (1, 0.3)]:
        notebook = Pod("nb", requests={"cpu": 100, "memory": Gi, "nvidia.com/gpu": gpus})
        ctx = SchedulingContext(gpu_utilization_threshold=threshold)
        got = kept.score(notebook, t, idx, ctx).tolist()
        assert got == ScaleDownAware().score(notebook, t, idx, ctx).tolist(), (gpus, threshold)
        seen.append(got[0])
    # 2 of 4 GPUs at 0.5 is at the threshold: underutilized to cluster-autoscaler 1.35+ (20)
    assert seen == [10, 20, 16, 100, 16, 10, 100]


def test_node_age_oldest_first_and_flat_below_min_nodes():
    t = NodeTable()
    for name, created in (("young", 300.0), ("old", 100.0), ("middle", 200.0)):
        t.upsert_node(name, {"cpu": 1000, "memory": 10 * Gi, "pods": 110}, created=created)
    # rank by age: old 100, middle 50, young 0 (slot order: young, old, middle)
    assert scores(NodeAge(), pod(), t) == [0, 100, 50]
    # fewer nodes than min_nodes: no preference at all
    assert scores(NodeAge(min_nodes=4), pod(), t) == [100, 100, 100]
    assert scores(NodeAge(min_nodes=3), pod(), t) == [0, 100, 50]


def test_drain_forecast_survival_matches_the_session_model():
    import math

    df = DrainForecast(horizon_s=3600)
    # a new session outlives the hour when its active time exceeds 3000 s:
    # P(Z > ln(3000/600)) for the standard normal Z
    p_new = 0.5 * math.erfc(math.log(5) / math.sqrt(2))
    # one of age 2 h (active > 6600 s so far) still runs an hour later when active > 10200 s
    p_old = 0.5 * math.erfc(math.log(17) / math.sqrt(2)) / (0.5 * math.erfc(math.log(11) / math.sqrt(2)))
    got = df.still_running(np.array([0.0, 7200.0, 5.5 * 3600, 6 * 3600]))
    assert got[0] == pytest.approx(p_new, rel=1e-3)
    assert got[1] == pytest.approx(p_old, rel=1e-2)
    assert got[2] == 0.0  # the culler's maxAge (6 h) comes first
    assert got[3] == 0.0


def test_drain_forecast_prefers_the_node_that_stays_busy():
    t = NodeTable()
    for name, created in (("old", 0.0), ("young", 100.0), ("empty", 200.0)):
        t.upsert_node(name, {"cpu": 4000, "memory": 10 * Gi, "pods": 110}, created=created)
    now = 10_000.0
    # "old" (the oldest node) holds three sessions a minute old: each outlives the hour with
    # p 0.054, so the node is busy then with p 0.15; "young" holds one session 2 hours old,
    # busy with p 0.28 (the longer a session has run, the longer it is likely to run on)
    for k in range(3):
        t.add_pod(t.slot("old"), pod(created=now - 60, name=f"new{k}"))
    t.add_pod(t.slot("young"), pod(created=now - 7200, name="long"))
    ctx = SchedulingContext(now=now)
    assert DrainForecast().score(pod(), t, t.active_indices(), ctx).tolist() == [50, 100, 0]
    # sessions that ended leave free slots behind, which count for no node
    gone = [pod(created=now - 60, name=f"gone{k}") for k in range(3)]
    for p in gone:
        t.add_pod(t.slot("empty"), p)
    for p in gone:
        t.remove_pod(t.slot("empty"), p)
    df = DrainForecast()
    assert df.score(pod(), t, t.active_indices(), ctx).tolist() == [50, 100, 0]
    rows, ages = t.pod_ages(now)
    direct = [float(np.log1p(-df.still_running(ages[rows == i])).sum()) for i in t.active_indices()]
    assert df.log_p_emptied(t, t.active_indices(), now) == pytest.approx(direct)
    # build pods and pods without a creation time do not count; ties go to the oldest node
    t2 = NodeTable()
    for name, created in (("old", 0.0), ("young", 100.0)):
        t2.upsert_node(name, {"cpu": 4000, "memory": 10 * Gi, "pods": 110}, created=created)
    t2.add_pod(1, pod(created=now - 7200, name="b", annotations={"binder-repo": "r"}))
    t2.add_pod(1, pod(name="untimed"))
    assert DrainForecast().score(pod(), t2, t2.active_indices(), ctx).tolist() == [100, 0]
    assert NodeAge().score(pod(), t2, t2.active_indices(), ctx).tolist() == [100, 0]


def test_cache_keeper_favours_nodes_that_built_most_for_user_pods_only():
    t = NodeTable()
    for name in ("none", "many", "some"):
        t.upsert_node(name, {"cpu": 8000, "memory": 32 * Gi, "pods": 110})
    for name, n in (("many", 4), ("some", 1)):
        for k in range(n):
            t.add_pod(t.slot(name), Pod(f"b{k}", annotations={"binder-repo": f"r{k}"}))
    # builds started 0, 4, 1: min-max -> 0, 100, 100 * 1 // 4 = 25
    assert scores(CacheKeeper(), pod(), t) == [0, 100, 25]
    # a finished build still counts: its layers are on the node
    t.remove_pod(t.slot("many"), Pod("b0", annotations={"binder-repo": "r0"}))
    assert scores(CacheKeeper(), pod(), t) == [0, 100, 25]
    # fewer nodes than min_nodes: no preference; build pods are not its business
    assert scores(CacheKeeper(min_nodes=4), pod(), t) == [100, 100, 100]
    assert scores(CacheKeeper(min_nodes=3), pod(), t) == [0, 100, 25]
    assert CacheKeeper().skip(Pod("b", annotations={"binder-repo": "r"}))
    assert not CacheKeeper().skip(pod())


def four_builders() -> tuple[NodeTable, str, Pod, list[str]]:
    """Nodes a-d of 8 cores, a build pod of 1 core, its repo and the repo's rendezvous order."""
    t = NodeTable()
    for n in ("a", "b", "c", "d"):
        t.upsert_node(n, {"cpu": 8000, "memory": 32 * Gi, "pods": 110})
    repo = "https://github.com/org/repo"
    build = Pod("b", requests={"cpu": 1000}, annotations={"binder-repo": repo})
    return t, repo, build, rendezvous_rank(["a", "b", "c", "d"], repo)


def test_build_locality_history_rendezvous_and_load_bound():
    t, repo, build, ranked = four_builders()
    history = BuildHistory()
    ctx = SchedulingContext(now=100.0, history=history)
    plugin = BuildLocality(top_k=2, load_bound=1.25, min_load_cap=1, top_score=80, step=20)
    s = dict(zip("abcd", plugin.score(build, t, t.active_indices(), ctx).tolist(), strict=True))
    assert s[ranked[0]] == 80 and s[ranked[1]] == 60 and s[ranked[2]] == 0
    history.record(repo, ranked[3], 50.0)
    ctx.cache.clear()
    s = dict(zip("abcd", plugin.score(build, t, t.active_indices(), ctx).tolist(), strict=True))
    assert s[ranked[3]] == 100
    # two builds running on the history node: cap ceil(1.25 * 3 / 4) = 1 is exceeded
    for _ in range(2):
        t.add_pod(t.slot(ranked[3]), Pod("x", annotations={"binder-repo": "other"}))
    ctx.cache.clear()
    s = dict(zip("abcd", plugin.score(build, t, t.active_indices(), ctx).tolist(), strict=True))
    assert s[ranked[3]] == 0 and s[ranked[0]] == 80
    assert plugin.skip(pod())


def run_build(t: NodeTable, node: str, finish: bool = False) -> None:
    """A build pod (no requests) bound to ``node``; with ``finish`` it ends at once (it counts
    in ``build_starts`` only)."""
    p = Pod("x", annotations={"binder-repo": "other"})
    t.add_pod(t.slot(node), p)
    if finish:
        t.remove_pod(t.slot(node), p)


def test_bounded_load_cap_counts_the_new_build_and_rounds_up():
    """cap = max(min_load_cap, ceil(bound * (builds of all nodes + the new one) / nodes)),
    for running builds (load_bound) and builds started (spread_bound)."""
    t = NodeTable()
    for n in ("a", "b"):
        t.upsert_node(n, {"cpu": 8000, "memory": 32 * Gi, "pods": 110})
    bounds = BuildBounds(load_bound=1.0, min_load_cap=1)
    history = BuildHistory()
    history.record("r", "a", 1.0)
    ctx = SchedulingContext(now=2.0, history=history)
    build = Pod("b", requests={"cpu": 1000}, annotations={"binder-repo": "r"})
    plugin = BuildLocality(top_k=0, load_bound=1.0, min_load_cap=1)
    run_build(t, "a")
    run_build(t, "b")
    # one build on each: 1.0 * (2 + 1) / 2 = 1.5 -> ceil 2 (2 / 2 = 1 without the new
    # build; 1 floored); a and b would run 1 + 1 = 2 <= 2
    assert bounds.load_cap(t) == 2
    assert bounds.over(t)[t.active_indices()].tolist() == [False, False]
    assert plugin.score(build, t, t.active_indices(), ctx).tolist() == [100, 0]  # a: history
    run_build(t, "a")
    # a 2, b 1: 1.0 * (3 + 1) / 2 = 2 -> cap 2; a would run 3 > 2, b 2 <= 2
    assert bounds.load_cap(t) == 2
    assert bounds.over(t)[t.active_indices()].tolist() == [True, False]
    assert plugin.score(build, t, t.active_indices(), ctx).tolist() == [0, 0]
    # builds started, none running: a and b started 1 each, spread cap ceil(1.0 * (2 + 1) / 2)
    # = 2, so neither is over it; the load bound (1e6) never binds here
    t2 = NodeTable()
    for n in ("a", "b"):
        t2.upsert_node(n, {"cpu": 8000, "memory": 32 * Gi, "pods": 110})
        run_build(t2, n, finish=True)
    spread = BuildBounds(load_bound=1e6, min_load_cap=1, spread_bound=1.0)
    assert spread.over(t2)[t2.active_indices()].tolist() == [False, False]
    run_build(t2, "a", finish=True)  # a 2, b 1: ceil(1.0 * (3 + 1) / 2) = 2; a would start its 3rd
    assert spread.over(t2)[t2.active_indices()].tolist() == [True, False]


def test_build_locality_scores_history_nodes_100_95_90_newest_first():
    t = NodeTable()
    for n in ("a", "b", "c", "d"):
        t.upsert_node(n, {"cpu": 8000, "memory": 32 * Gi, "pods": 110})
    history = BuildHistory()  # keeps 3 nodes per repo
    for node, when in (("c", 10.0), ("a", 20.0), ("b", 30.0)):
        history.record("r", node, when)
    ctx = SchedulingContext(now=40.0, history=history)
    build = Pod("b", requests={"cpu": 1000}, annotations={"binder-repo": "r"})
    # newest first: b (30 s) 100, a (20 s) 100 - 5 = 95, c (10 s) 100 - 2 * 5 = 90; d none
    assert BuildLocality(top_k=0).score(build, t, t.active_indices(), ctx).tolist() == [95, 100, 90, 0]


def test_build_locality_gives_nothing_to_a_node_the_autoscaler_is_removing():
    """A node marked a deletion candidate or to be deleted: its cache is about to go, so
    neither its history nor its rendezvous rank scores, and with rendezvous_fallback a
    history node marked so does not hold the rendezvous scores back."""
    t, repo, build, ranked = four_builders()
    history = BuildHistory()
    history.record(repo, ranked[3], 50.0)
    ctx = SchedulingContext(now=100.0, history=history)
    plugin = BuildLocality(top_k=2, min_load_cap=1, top_score=80, step=20)
    fallback = BuildLocality(top_k=2, min_load_cap=1, top_score=80, step=20, rendezvous_fallback=True)

    def by_rank(p: BuildLocality) -> list[int]:
        ctx.cache.clear()
        s = dict(zip("abcd", p.score(build, t, t.active_indices(), ctx).tolist(), strict=True))
        return [s[n] for n in ranked]

    # rendezvous ranks 0, 1: 80, 80 - 20 = 60; the history node 100
    assert by_rank(plugin) == [80, 60, 0, 100]
    assert by_rank(fallback) == [0, 0, 0, 100]
    candidate = [Taint(DELETION_CANDIDATE_TAINT, "1", PREFER_NO_SCHEDULE)]
    going = [Taint(TO_BE_DELETED_TAINT, "1", NO_SCHEDULE)]
    for taints in (candidate, going):
        t.set_taints(ranked[3], taints)
        assert by_rank(plugin) == [80, 60, 0, 0]
        assert by_rank(fallback) == [80, 60, 0, 0]
        t.set_taints(ranked[3], [])
        t.set_taints(ranked[0], taints)  # rendezvous rank 0 marked: rank 1 keeps its 60
        assert by_rank(plugin) == [0, 60, 0, 100]
        t.set_taints(ranked[0], [])
    assert by_rank(plugin) == [80, 60, 0, 100]


def test_build_locality_instances_with_other_rank_args_share_a_cache_without_mixing_scores():
    """Rendezvous scores are kept in ctx.cache: two BuildLocality instances that differ only
    in top_k, top_score or step, scoring in one decision, each get their own."""
    t, _repo, build, ranked = four_builders()
    ctx = SchedulingContext(now=100.0)  # no history: rendezvous scores alone
    # each differs from the one before in one argument; scores top_score - r * step, r < top_k
    cases = [
        ((1, 80, 20), [80, 0, 0, 0]),
        ((2, 80, 20), [80, 60, 0, 0]),  # top_k 2: rank 1 scores 80 - 20
        ((2, 50, 20), [50, 30, 0, 0]),  # top_score 50: 50, 50 - 20
        ((2, 50, 10), [50, 40, 0, 0]),  # step 10: 50, 50 - 10
    ]
    for _ in range(2):  # a second round reads every one's scores from the cache
        for (top_k, top_score, step), expected in cases:
            plugin = BuildLocality(top_k=top_k, top_score=top_score, step=step)
            s = dict(zip("abcd", plugin.score(build, t, t.active_indices(), ctx).tolist(), strict=True))
            assert [s[n] for n in ranked] == expected, (top_k, top_score, step)
    assert len(ctx.cache) == 4
    assert all(key.startswith(BuildLocality.RENDEZVOUS_CACHE_PREFIX) for key in ctx.cache)


def test_select_breaks_ties_at_random_among_best():
    t = NodeTable()
    for n in range(4):
        t.upsert_node(f"n{n}", {"cpu": 1000, "memory": Gi, "pods": 110})
    from stickypack.policies import load_builtin

    policy = load_builtin("default")
    picks = {policy.select(pod(100, 1), t, CTX, np.random.default_rng(i)) for i in range(60)}
    assert picks == {0, 1, 2, 3}


@pytest.mark.parametrize(
    ("name", "node"),
    [("default", "n2"), ("z2jh", "n1"), ("binderhub", "n2"), ("stickypack", "n1"), ("oracle", "n1")],
)
def test_builtin_policies_place_a_pod(name, node):
    """n1 (4 cores, a quarter used) and an empty n2 (2 cores): the spreading policies take the
    emptier n2 (LeastAllocated 75 against 62), the packing ones n1 (MostAllocated 37 against 25)."""
    from stickypack.policies import load_builtin

    t = two_nodes()
    assert t.node_names([load_builtin(name).select(pod(), t, CTX, np.random.default_rng(0))]) == [node]


def test_delay_for_locality_waits_for_the_history_node():
    from stickypack.core.plugins import DelayForLocality

    t = NodeTable()
    t.upsert_node("full", {"cpu": 1000, "memory": Gi, "pods": 110})
    t.upsert_node("free", {"cpu": 1000, "memory": Gi, "pods": 110})
    history = BuildHistory()
    history.record("r", "full", 0.0)
    build = Pod("b", requests={"cpu": 500}, annotations={"binder-repo": "r"}, created=100.0)
    delay = DelayForLocality(max_wait_s=60)
    ctx = SchedulingContext(now=110.0, history=history)
    only_free = np.array([t.slot("free")])  # "full" failed the earlier filters
    assert delay.filter(build, t, only_free, ctx).tolist() == [False]  # wait
    both = t.active_indices()
    assert delay.filter(build, t, both, ctx).tolist() == [True, True]  # history node fits
    ctx.now = 161.0
    assert delay.filter(build, t, only_free, ctx).tolist() == [True]  # waited long enough
    ctx.now = 110.0
    # a node the autoscaler marked a deletion candidate: BuildLocality would not score it,
    # so it is no node to wait for (it once was)
    t.set_taints("full", [Taint(DELETION_CANDIDATE_TAINT, "", PREFER_NO_SCHEDULE)])
    assert delay.filter(build, t, only_free, ctx).tolist() == [True]
    t.set_taints("full", [])
    assert delay.filter(build, t, only_free, ctx).tolist() == [False]
    t.remove_node("full")
    assert delay.filter(build, t, only_free, ctx).tolist() == [True]  # cache gone: no point
    user = Pod("u", created=100.0)
    assert delay.filter(user, t, only_free, ctx).tolist() == [True]


@pytest.mark.parametrize(
    ("case", "node", "waits"),
    [
        ("cordoned", {"unschedulable": True}, False),
        ("not ready", {"ready": False}, False),
        ("NoSchedule taint", {"taints": [Taint("k", "v", "NoSchedule")]}, False),
        ("tolerated taint", {"taints": [Taint("k", "v", "NoSchedule")]}, True),
        ("too small", {"allocatable": {"cpu": 400, "memory": Gi, "pods": 110}}, False),
        ("other pool", {"labels": {"pool": "b"}}, False),
        ("full for now", {}, True),
    ],
)
def test_delay_for_locality_does_not_wait_for_a_node_that_cannot_take_the_pod(case, node, waits):
    """The build waits only for room: a history node it could not use with room to spare
    (cordoned, not ready, an untolerated NoSchedule taint, allocatable smaller than the
    pod, a required selector it does not match) is no node to wait for."""
    from stickypack.core.plugins import DelayForLocality

    t = NodeTable()
    args = {"allocatable": {"cpu": 1000, "memory": Gi, "pods": 110}, "labels": {"pool": "a"}, **node}
    t.upsert_node("hist", args.pop("allocatable"), **args)
    t.upsert_node("free", {"cpu": 4000, "memory": 4 * Gi, "pods": 110}, labels={"pool": "a"})
    history = BuildHistory()
    history.record("r", "hist", 0.0)
    tolerations = (Toleration("k", "Equal", "v", "NoSchedule"),) if case == "tolerated taint" else ()
    build = Pod(
        "b",
        requests={"cpu": 500},
        annotations={"binder-repo": "r"},
        created=100.0,
        node_selector={"pool": "a"},
        tolerations=tolerations,
    )
    ctx = SchedulingContext(now=110.0, history=history)
    only_free = np.array([t.slot("free")])  # "hist" failed the earlier filters
    assert DelayForLocality(max_wait_s=60).filter(build, t, only_free, ctx).tolist() == [not waits]


def test_delay_for_locality_does_not_wait_for_a_node_going_away_or_at_the_load_bound():
    """A history node the autoscaler is deleting or has marked a deletion candidate, or one
    a build more would put past the load bound, is no node to wait for: BuildLocality would
    not score it. The build tolerates every taint, so the taint filter is not what rules
    the node out."""
    from stickypack.core.plugins import DelayForLocality

    t = NodeTable()
    t.upsert_node("hist", {"cpu": 1000, "memory": Gi, "pods": 110})
    t.upsert_node("free", {"cpu": 4000, "memory": 4 * Gi, "pods": 110})
    history = BuildHistory()
    history.record("r", "hist", 0.0)
    build = Pod(
        "b",
        requests={"cpu": 500},
        annotations={"binder-repo": "r"},
        created=100.0,
        tolerations=(Toleration(operator="Exists"),),
    )
    delay = DelayForLocality(max_wait_s=60)  # load_bound 1.25, min_load_cap 2
    ctx = SchedulingContext(now=110.0, history=history)
    only_free = np.array([t.slot("free")])  # "hist" failed the earlier filters

    def waits() -> bool:
        passes = delay.filter(build, t, only_free, ctx).tolist()
        assert passes in ([True], [False])
        return passes == [False]

    assert waits()
    for taint in (
        Taint(TO_BE_DELETED_TAINT, "1", NO_SCHEDULE),
        Taint(DELETION_CANDIDATE_TAINT, "1", PREFER_NO_SCHEDULE),
    ):
        t.set_taints("hist", [taint])
        assert not waits(), taint.key
    t.set_taints("hist", [])
    run_build(t, "hist")
    # hist runs 1 build: cap max(2, ceil(1.25 * (1 + 1) / 2)) = max(2, 2) = 2; 1 + 1 <= 2
    assert waits()
    run_build(t, "hist")
    # hist runs 2: ceil(1.25 * (2 + 1) / 2) = ceil(1.875) = 2; 2 + 1 > 2: at the bound
    assert not waits()


def test_delay_for_locality_does_not_wait_while_one_history_node_is_a_candidate():
    """Two history nodes: while either passed the earlier filters, nothing waits; only when
    both failed them does the build wait (for whichever opens first)."""
    from stickypack.core.plugins import DelayForLocality

    t = NodeTable()
    for name in ("h1", "h2"):
        t.upsert_node(name, {"cpu": 1000, "memory": Gi, "pods": 110})
    t.upsert_node("cold", {"cpu": 4000, "memory": 4 * Gi, "pods": 110})
    history = BuildHistory()
    history.record("r", "h1", 0.0)
    history.record("r", "h2", 1.0)
    build = Pod("b", requests={"cpu": 500}, annotations={"binder-repo": "r"}, created=100.0)
    ctx = SchedulingContext(now=110.0, history=history)
    delay = DelayForLocality(max_wait_s=60)
    h1_and_cold = np.array([t.slot("h1"), t.slot("cold")])  # h2 failed the earlier filters
    assert delay.filter(build, t, h1_and_cold, ctx).tolist() == [True, True]
    h2_and_cold = np.array([t.slot("h2"), t.slot("cold")])
    assert delay.filter(build, t, h2_and_cold, ctx).tolist() == [True, True]
    only_cold = np.array([t.slot("cold")])
    assert delay.filter(build, t, only_cold, ctx).tolist() == [False]


def test_balanced_allocation_fast_path_equals_general_path():
    import random

    rng = random.Random(1)
    fast, general = BalancedAllocation(), BalancedAllocation({"memory": 1, "cpu": 1})
    for _ in range(500):
        t = NodeTable()
        for i in range(rng.randint(1, 6)):
            t.upsert_node(
                f"n{i}", {"cpu": rng.choice([0, 1000, 4000]), "memory": rng.choice([0, Gi, 8 * Gi])}
            )
            t.add_pod(i, Pod("x", requests={"cpu": rng.randint(0, 5000), "memory": rng.randint(0, 16 * Gi)}))
        p = Pod("p", requests={"cpu": rng.randint(0, 3000), "memory": rng.randint(0, 8 * Gi)})
        idx = t.active_indices()
        assert fast.score(p, t, idx, CTX).tolist() == general.score(p, t, idx, CTX).tolist()


@pytest.mark.parametrize(
    "make",
    [
        LeastAllocated,
        MostAllocated,
        lambda r=None: RequestedToCapacityRatio(
            r,
            shape=[
                {"utilization": 0, "score": 10},
                {"utilization": 60, "score": 3},
                {"utilization": 100, "score": 0},
            ],
        ),
    ],
    ids=["LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"],
)
def test_resource_scorers_cpu_memory_path_equals_general_path(make):
    import random

    rng = random.Random(2)
    for resources in (None, {"memory": 3, "cpu": 1}, {"cpu": 2}):
        fast, general = make(resources), make(resources)
        general._cpu_memory = False  # the per-resource loop every other resource set takes
        assert fast._cpu_memory
        for _ in range(300):
            t = NodeTable()
            for i in range(rng.randint(1, 6)):
                t.upsert_node(
                    f"n{i}", {"cpu": rng.choice([0, 1000, 4000]), "memory": rng.choice([0, Gi, 8 * Gi])}
                )
                cpu, mem = rng.randint(0, 5000), rng.randint(0, 16 * Gi)
                x = Pod("x", requests={"cpu": cpu, "memory": mem}, nonzero_cpu=cpu, nonzero_memory=mem)
                t.add_pod(i, x)
            cpu, mem = rng.randint(0, 3000), rng.randint(0, 8 * Gi)
            p = Pod("p", requests={"cpu": cpu, "memory": mem}, nonzero_cpu=cpu or 100, nonzero_memory=mem)
            idx = t.active_indices()
            assert fast.score(p, t, idx, CTX).tolist() == general.score(p, t, idx, CTX).tolist()


def test_build_locality_spread_bound_caps_builds_started():
    t = NodeTable()
    for n in ("a", "b", "c"):
        t.upsert_node(n, {"cpu": 8000, "memory": 32 * Gi, "pods": 110})
    repo = "r"
    history = BuildHistory()
    history.record(repo, "a", 1.0)
    build = Pod("b", requests={"cpu": 1000}, annotations={"binder-repo": repo})
    ctx = SchedulingContext(now=2.0, history=history)
    bounded = BuildLocality(top_k=0, min_load_cap=1, spread_bound=2.0)
    free = BuildLocality(top_k=0, min_load_cap=1)
    for _ in range(3):  # "a" has had 3 builds; mean with the new one (3 + 1) / 3: cap ceil(2.67) = 3
        p = Pod("x", annotations={"binder-repo": "other"})
        t.add_pod(t.slot("a"), p)
        t.remove_pod(t.slot("a"), p)
    assert free.score(build, t, t.active_indices(), ctx).tolist()[0] == 100
    assert bounded.score(build, t, t.active_indices(), ctx).tolist()[0] == 0


def test_build_spread_fewest_builds_first_and_newborn_nodes_settle():
    t = NodeTable()
    for name, created in (("a", 0.0), ("b", 0.0), ("new", 3000.0)):
        t.upsert_node(name, {"cpu": 8000, "memory": 32 * Gi, "pods": 110}, created=created)
    for name, builds in (("a", 4), ("b", 2)):
        for _ in range(builds):
            p = Pod("x", annotations={"binder-repo": "other"})
            t.add_pod(t.slot(name), p)
            t.remove_pod(t.slot(name), p)
    build = Pod("b", requests={"cpu": 1000}, annotations={"binder-repo": "r"})
    ctx = SchedulingContext(now=3600.0)
    idx = t.active_indices()
    # min-max over builds started (4, 2, 0): 0, 50, 100
    assert BuildSpread().score(build, t, idx, ctx).tolist() == [0, 50, 100]
    # "new" joined 600 s ago: with settle_s 2400 it gets a quarter of its score
    assert BuildSpread(settle_s=2400).score(build, t, idx, ctx).tolist() == [0, 50, 25]
    # a pod that is not a build is not scored by it
    assert BuildSpread().skip(pod())
    with pytest.raises(ValueError):
        BuildSpread(settle_s=-1)


def test_build_headroom_counts_an_exact_fit_and_the_pods_own_slot():
    """100 when, with the pod placed, the builds still fit: room equal to what they need is
    enough, and the pod takes one pod slot itself."""
    t = NodeTable()
    # every node 4 cores, 8 GiB, 3 pod slots; bound there: 2 cores, 4 GiB (one slot), or
    # one unit more of cpu or memory, or a second pod of no requests (a second slot)
    bound = {
        "exact": [pod(2000, 4 * Gi)],
        "cpu-short": [pod(2001, 4 * Gi)],
        "memory-short": [pod(2000, 4 * Gi + 1)],
        "one-slot": [pod(2000, 4 * Gi), Pod("idle")],
    }
    for name, pods in bound.items():
        t.upsert_node(name, {"cpu": 4000, "memory": 8 * Gi, "pods": 3})
        for p in pods:
            t.add_pod(t.slot(name), p)
    user = pod(1000, 2 * Gi)
    # left with the pod placed: exact 1000m, 2 GiB, 3 - 1 - 1 = 1 slot: one 1-core 2 GiB
    # build fits exactly; cpu-short 999m; memory-short 2 GiB - 1; one-slot 0 slots
    assert scores(BuildHeadroom(cpu="1", memory="2Gi"), user, t) == [100, 0, 0, 0]
    # room for 2 builds of 500m and 1 GiB: 1000m and 2 GiB, but 2 slots, which only a node
    # of 4 slots has left
    assert scores(BuildHeadroom(cpu="500m", memory="1Gi", builds=2), user, t) == [0, 0, 0, 0]
    t.upsert_node("exact", {"cpu": 4000, "memory": 8 * Gi, "pods": 4})  # 4 - 1 - 1 = 2 slots left
    assert scores(BuildHeadroom(cpu="500m", memory="1Gi", builds=2), user, t) == [100, 0, 0, 0]


def test_build_locality_rendezvous_fallback_only_without_a_usable_history_node():
    t, repo, build, ranked = four_builders()
    history = BuildHistory()
    history.record(repo, ranked[3], 50.0)
    ctx = SchedulingContext(now=100.0, history=history)
    both = BuildLocality(top_k=2, min_load_cap=1, top_score=80, step=20)
    fallback = BuildLocality(top_k=2, min_load_cap=1, top_score=80, step=20, rendezvous_fallback=True)

    def by_node(plugin: BuildLocality) -> dict[str, int]:
        ctx.cache.clear()
        return dict(zip("abcd", plugin.score(build, t, t.active_indices(), ctx).tolist(), strict=True))

    assert [by_node(both)[n] for n in ranked] == [80, 60, 0, 100]
    assert [by_node(fallback)[n] for n in ranked] == [0, 0, 0, 100]  # the cache node alone
    # the history node is past the load bound: rendezvous takes over again
    for _ in range(2):
        t.add_pod(t.slot(ranked[3]), Pod("x", annotations={"binder-repo": "other"}))
    assert [by_node(fallback)[n] for n in ranked] == [80, 60, 0, 0]


@pytest.mark.parametrize(
    "make",
    [
        LeastAllocated,
        MostAllocated,
        BalancedAllocation,
        lambda: ScaleDownAware(low_score=20),
        lambda: BuildHeadroom(cpu="1", memory="1Gi", builds=2),
    ],
    ids=["LeastAllocated", "MostAllocated", "BalancedAllocation", "ScaleDownAware", "BuildHeadroom"],
)
def test_memoized_scores_equal_fresh_scores(make):
    """One plugin instance, whose ScoreMemo fills up over many decisions on recurring node
    states, scores every decision as a fresh instance (an empty memo) does. Few distinct
    values, so states recur and most scores come from the memo."""
    import random

    rng = random.Random(3)
    kept = make()
    asked = 0
    for n in range(400):
        t = NodeTable()
        for i in range(rng.randint(1, 5)):
            t.upsert_node(
                f"n{i}", {"cpu": rng.choice([2000, 4000]), "memory": rng.choice([4 * Gi, 8 * Gi]), "pods": 8}
            )
            for _ in range(rng.randint(0, 6)):
                cpu, mem = rng.choice([(10, Gi // 2), (1000, 2 * Gi)])
                t.add_pod(
                    i, Pod("x", requests={"cpu": cpu, "memory": mem}, nonzero_cpu=cpu, nonzero_memory=mem)
                )
            if rng.random() < 0.2:
                t.deletion_candidate[i] = True
        cpu, mem = rng.choice([10, 1000]), rng.choice([Gi // 2, 2 * Gi])  # apart: both in the key
        p = Pod("p", requests={"cpu": cpu, "memory": mem}, nonzero_cpu=cpu, nonzero_memory=mem)
        ctx = SchedulingContext(utilization_threshold=rng.choice([0.5, 0.6]))
        idx = t.active_indices()
        asked += idx.size
        assert kept.score(p, t, idx, ctx).tolist() == make().score(p, t, idx, ctx).tolist(), n
    assert 0 < len(kept._memo) < asked / 2  # states recurred: most scores came from the memo


def test_score_memo_is_bounded_and_steps_aside_for_many_nodes():
    memo = ScoreMemo(limit=4, max_nodes=3)
    rows = np.array([5, 6])
    for k in range(10):
        got = memo.scores(rows, lambda k=k: [(k,), (k + 100,)], lambda r: np.full(len(r), 7))
        assert got.tolist() == [7, 7]
        assert len(memo) <= 4
    computed = []
    memo.scores(rows, lambda: [(9,), (109,)], lambda r: computed.append(r.tolist()) or np.ones(len(r)))
    assert computed == []  # the last pair is still there: looked up, not recomputed
    memo.scores(rows, lambda: [(9,), (1,)], lambda r: computed.append(r.tolist()) or np.ones(len(r)))
    assert computed == [[6]]  # only the miss, by its row

    def no_keys() -> list:
        raise AssertionError("keys built for a table above max_nodes")

    many = np.arange(4)
    assert memo.scores(many, no_keys, lambda r: r * 2).tolist() == [0, 2, 4, 6]


@pytest.mark.parametrize(
    ("expression", "label", "matches"),
    [
        ({"key": "count", "operator": "Gt", "values": ["3"]}, "5", True),
        # what kube's labels.NewRequirement refuses: the term matches no node (it once matched)
        ({"key": "count", "operator": "Gt", "values": ["-1"]}, "5", False),  # not a label value
        ({"key": "count", "operator": "Gt", "values": ["1", "2"]}, "5", False),
        ({"key": "count", "operator": "In", "values": []}, "5", False),
        ({"key": "count", "operator": "NotIn", "values": []}, "5", False),
        ({"key": "count", "operator": "NotIn", "values": ["node one"]}, "5", False),
        ({"key": "count", "operator": "Exists", "values": ["5"]}, "5", False),
        ({"key": "bad key!", "operator": "Exists"}, "5", False),
        ({"key": "count", "operator": "Near", "values": ["5"]}, "5", False),
        # node label values are read as Go's ParseInt does
        ({"key": "count", "operator": "Gt", "values": ["999"]}, "1_000", False),
        ({"key": "count", "operator": "Gt", "values": ["1"]}, "99999999999999999999", False),
        ({"key": "count", "operator": "Lt", "values": ["10"]}, "9", True),
    ],
)
def test_node_affinity_terms_kube_cannot_parse_match_nothing(expression, label, matches) -> None:
    term = NodeSelectorTerm.from_dict({"matchExpressions": [expression]})
    assert term.matches({"count": label}, "n1") is matches


def test_match_fields_need_metadata_name_in_or_not_in_and_one_value() -> None:
    def term(field: dict) -> NodeSelectorTerm:
        return NodeSelectorTerm.from_dict({"matchFields": [field]})

    assert term({"key": "metadata.name", "operator": "In", "values": ["n1"]}).matches({}, "n1")
    assert term({"key": "metadata.name", "operator": "NotIn", "values": ["n2"]}).matches({}, "n1")
    assert not term({"key": "metadata.name", "operator": "In", "values": ["n1", "n2"]}).matches({}, "n1")
    assert not term({"key": "metadata.name", "operator": "Exists"}).matches({}, "n1")
    assert not term({"key": "metadata.uid", "operator": "NotIn", "values": ["x"]}).matches({}, "n1")


@pytest.mark.parametrize(
    ("operator", "value", "label", "matches"),
    [
        ("Gt", "5", "6", True),
        ("Gt", "5", "5", False),  # strictly greater
        ("Lt", "5", "4", True),
        ("Lt", "5", "5", False),  # strictly less
        ("Gt", "1", "9223372036854775807", True),  # 2**63 - 1: the largest int64
        ("Gt", "1", "9223372036854775808", False),  # 2**63: ParseInt fails, no match
    ],
)
def test_gt_and_lt_compare_strictly_as_int64(operator: str, value: str, label: str, matches: bool) -> None:
    """k8s.io/apimachinery labels/selector.go ``Requirement.Matches``: the node's value read by
    ``strconv.ParseInt(v, 10, 64)`` (a value past int64 matches nothing), then ``>`` for Gt,
    ``<`` for Lt."""
    expression = {"key": "count", "operator": operator, "values": [value]}
    term = NodeSelectorTerm.from_dict({"matchExpressions": [expression]})
    assert term.matches({"count": label}, "n1") is matches


@pytest.mark.parametrize(
    ("end", "expected"),
    [
        ("100.0", [0, 44, 100]),  # extensions 90, 50, 0 (now 10): 100 - 100 * ext / 90
        ("5.0", [100, 100, 100]),  # ends before every node's expiry and now
        ("inf", [100, 100, 100]),  # outlives every node alike: no preference
        ("nan", [100, 100, 100]),
    ],
)
def test_lifetime_aware_scores_by_extension_and_stay_in_range(end, expected):
    from stickypack.core.plugins import EXPECTED_END_ANNOTATION, LifetimeAware

    t = NodeTable()
    for name in ("a", "b", "c"):
        t.upsert_node(name, {"cpu": 1000, "memory": Gi, "pods": 110})
    t.ensure_extra("expiry")[t.active_indices()] = [0.0, 50.0, 200.0]
    p = Pod("u", annotations={EXPECTED_END_ANNOTATION: end})
    got = LifetimeAware().score(p, t, t.active_indices(), SchedulingContext(now=10.0))
    assert got.dtype == np.int64
    assert got.tolist() == expected


# ---- ImageLocality: kube-scheduler's thresholds are 23 MiB and 1000 MiB per image of the pod;
# a node's sum maps to 100 * (sum - 23 MiB) // (1000 MiB * images - 23 MiB), the sum clamped.

MiB = 1024**2


def image_pod(containers=(), init=(), volumes=()) -> Pod:
    spec = {
        "containers": [{"name": f"c{i}", "image": image} for i, image in enumerate(containers)],
        "initContainers": [{"name": f"i{i}", "image": image} for i, image in enumerate(init)],
        "volumes": [{"name": f"v{i}", "image": {"reference": ref}} for i, ref in enumerate(volumes)]
        + [{"name": "scratch", "emptyDir": {}}],
    }
    return Pod.from_dict({"metadata": {"name": "p"}, "spec": spec})


def image_nodes(*listed: dict[str, int]) -> NodeTable:
    """Nodes n0, n1, ... listing ``listed[i]`` (name -> bytes), added in that order."""
    t = NodeTable()
    for i, images in enumerate(listed):
        t.upsert_node(f"n{i}", {"cpu": 1000, "memory": Gi, "pods": 110}, images=images)
    return t


def test_image_locality_reads_a_name_without_tag_as_latest():
    p = image_pod(["reg.example/app", "reg.example:5000/team/tool"])
    # a colon before the last slash is a registry port, not a tag
    assert p.images == ("reg.example/app:latest", "reg.example:5000/team/tool:latest")
    # n0 lists reg.example/app:latest, n1 only the bare name, which nothing normalized matches:
    # n0: 400 MiB * 1/2 = 200 MiB of 2000 -> 100 * (200 - 23) // (2000 - 23) = 8
    t = image_nodes({"reg.example/app:latest": 400 * MiB}, {"reg.example/app": 400 * MiB})
    assert scores(ImageLocality(), p, t) == [8, 0]


def test_image_locality_keeps_a_digest_reference():
    digest = "reg.example/app@sha256:" + "ab" * 32
    p = image_pod([digest])
    assert p.images == (digest,)
    # n0 lists it, n1 a name with :latest after the digest: 500 MiB * 1/2 -> 100 * 227 // 977 = 23
    t = image_nodes({digest: 500 * MiB}, {f"{digest}:latest": 500 * MiB})
    assert scores(ImageLocality(), p, t) == [23, 0]


def test_image_locality_scales_by_the_share_of_nodes_listing_the_image():
    t = image_nodes({"a:1": 800 * MiB}, {"a:1": 800 * MiB}, {"b:1": 800 * MiB}, {})
    # a:1 on 2 of 4 nodes: 400 MiB -> 100 * 377 // 977 = 38; b:1 on 1 of 4: 200 MiB -> 18
    assert scores(ImageLocality(), image_pod(["a:1"]), t) == [38, 38, 0, 0]
    assert scores(ImageLocality(), image_pod(["b:1"]), t) == [0, 0, 18, 0]
    # all nodes count, not only those scored: n2 alone still sees a:1 spread over 2 of 4
    assert ImageLocality().score(image_pod(["a:1"]), t, np.array([1]), CTX).tolist() == [38]
    # Go truncates int64(float64(size) * (2.0 / 3.0)): 1 GiB on 2 of 3 nodes is 715827882 bytes
    t3 = image_nodes({"c:1": Gi}, {"c:1": Gi}, {})
    assert int(float(Gi) * (2 / 3)) == 715827882
    assert scores(ImageLocality(), image_pod(["c:1"]), t3) == [
        100 * (715827882 - 23 * MiB) // (977 * MiB)
    ] * 2 + [0]
    # the float product, not integer arithmetic: 983302144 bytes on 6 of 11 nodes is
    # 983302144 * 6 / 11 = 536346624 exactly, which would score 100 * 512229376 // (977 MiB)
    # = 50; Go's float64 product is 536346623.99999994 -> 536346623 -> 49
    t11 = image_nodes(*[{"d:1": 983302144}] * 6, *[{}] * 5)
    assert int(float(983302144) * (6 / 11)) == 536346623
    assert scores(ImageLocality(), image_pod(["d:1"]), t11) == [49] * 6 + [0] * 5


def test_image_locality_clamps_at_23_mib_and_at_1000_mib_per_image():
    # one node listing a:1 (spread 1): at or below 23 MiB -> 0; 10 MiB more -> 100 * 10 // 977 = 1
    for size, expected in ((5 * MiB, 0), (23 * MiB, 0), (23 * MiB + 1, 0), (33 * MiB - 1, 1), (33 * MiB, 1)):
        assert scores(ImageLocality(), image_pod(["a:1"]), image_nodes({"a:1": size})) == [expected], size
    big = image_nodes({"a:1": 1500 * MiB, "b:1": 1500 * MiB})
    assert scores(ImageLocality(), image_pod(["a:1"]), big) == [100]  # 1500 clamped to 1000
    # two images, one listed: 1500 of 2000 MiB -> 100 * 1477 // 1977 = 74; both: 3000 -> 2000
    assert scores(ImageLocality(), image_pod(["a:1", "x:1"]), big) == [74]
    assert scores(ImageLocality(), image_pod(["a:1", "b:1"]), big) == [100]
    # exactly 1000 MiB per image scores 100, a byte less 99
    assert scores(ImageLocality(), image_pod(["a:1"]), image_nodes({"a:1": 1000 * MiB})) == [100]
    assert scores(ImageLocality(), image_pod(["a:1"]), image_nodes({"a:1": 1000 * MiB - 1})) == [99]


def test_image_locality_counts_init_containers_and_image_volumes():
    p = image_pod(["app:1"], init=["init:1"], volumes=["data:1"])
    assert p.images == ("init:1", "app:1", "data:1")  # three images: up to 3000 MiB
    t = image_nodes({"init:1": 2000 * MiB, "data:1": 2000 * MiB}, {"app:1": 2000 * MiB})
    # each on 1 of 2 nodes: 1000 MiB each; n0 2000 -> 100 * 1977 // 2977 = 66; n1 1000 -> 32
    assert scores(ImageLocality(), p, t) == [66, 32]
    # one image in two containers counts twice, and twice the threshold: 2000 of 2000
    assert scores(ImageLocality(), image_pod(["app:1", "app:1"]), t) == [0, 100]


def test_image_locality_a_node_may_list_one_image_under_two_names():
    from stickypack.kube.cache import node_images

    n0 = node_images([{"names": ["app:1", "app:latest"], "sizeBytes": 500 * MiB}])
    n1 = node_images([{"names": ["app:1"], "sizeBytes": 500 * MiB}, {"names": ["app:1"], "sizeBytes": 9}])
    assert n0 == {"app:1": 500 * MiB, "app:latest": 500 * MiB}
    assert n1 == {"app:1": 500 * MiB}  # a name listed twice: the first entry's size
    t = image_nodes(n0, n1)
    p = image_pod(["app:1"], init=["app"])  # app:1 and app:latest, two images: up to 2000 MiB
    # n0: app:1 on 2 of 2 (500) + app:latest on 1 of 2 (250) = 750 -> 100 * 727 // 1977 = 36
    # n1: app:1 only, 500 -> 100 * 477 // 1977 = 24
    assert scores(ImageLocality(), p, t) == [36, 24]


def test_image_locality_counts_the_size_of_the_first_node_to_list_a_name():
    """kube-scheduler's cache keeps one size per image name: the first node's to list it,
    while any node lists it; a node update re-lists the node's images."""
    t = image_nodes({"x:1": 100 * MiB}, {"x:1": 3000 * MiB})
    # both count 100 MiB (spread 1): 100 * 77 // 977 = 7; by its own size n1 would score 100
    assert t.image_size == {"x:1": 100 * MiB}
    assert scores(ImageLocality(), image_pod(["x:1"]), t) == [7, 7]
    t.remove_node("n0")  # n1 still lists it: the size stays n0's
    assert scores(ImageLocality(), image_pod(["x:1"]), t) == [7]
    t.upsert_node("n1", {"cpu": 1000, "memory": Gi, "pods": 110}, images={"x:1": 3000 * MiB})
    assert t.image_size == {"x:1": 3000 * MiB}  # re-listed by its only node: its own size
    assert scores(ImageLocality(), image_pod(["x:1"]), t) == [100]
    t.upsert_node("n2", {"cpu": 1000, "memory": Gi, "pods": 110}, images={"x:1": 10 * MiB})
    assert t.image_size == {"x:1": 3000 * MiB}
    t.set_images(t.slot("n1"), {})
    t.set_images(t.slot("n2"), {"x:1": 10 * MiB})
    assert t.image_size == {"x:1": 10 * MiB} and t.image_rows == {"x:1": {t.slot("n2"): 10 * MiB}}
    t.remove_image(t.slot("n2"), "x:1")
    assert t.image_size == {} and t.image_rows == {}


def test_image_locality_scores_nothing_for_images_no_node_lists():
    t = image_nodes({"a:1": 5000 * MiB}, {})
    assert scores(ImageLocality(), image_pod(["b:1"], init=["a"]), t) == [0, 0]


def test_image_locality_the_simulator_docs_example():
    # docs/simulator.md ("Images"): the median repo image, 2.5 GB, listed by one node of five:
    # 500 MB of 1000 MiB -> 100 * (500000000 - 23 MiB) // (977 MiB) = 46 (the docs said 49)
    t = image_nodes({"r:1": 2_500_000_000}, {}, {}, {}, {})
    assert scores(ImageLocality(), image_pod(["r:1"]), t) == [46, 0, 0, 0, 0]
    doc = (Path(__file__).parents[1] / "docs" / "simulator.md").read_text()
    assert "a 2.5 GB image on one node of five scores 46" in " ".join(doc.split())


# --------------------------------------------------------------------------- many preferred terms

_KEYS = ("zone", "pool", "kubernetes.io/hostname", "gpu")
_VALUES = ("a", "b", "7", "-2")  # "-2": not a label value, so a term naming it matches nothing
_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Bad")


def _requirement_dicts(draw_values):
    from hypothesis import strategies as st

    return st.fixed_dictionaries(
        {
            "key": st.sampled_from(_KEYS),
            "operator": st.sampled_from(_OPERATORS),
            "values": st.lists(st.sampled_from(draw_values), max_size=3),
        }
    )


def _naive_weight(terms: tuple[PreferredTerm, ...], labels: dict[str, str], name: str) -> int:
    """What kube-scheduler computes: every term tested on the node."""
    return sum(p.weight for p in terms if p.term.matches(labels, name))


def test_preferred_weights_equal_testing_every_term_on_every_node() -> None:
    """:class:`PreferredWeights` (tables of the pod's terms, looked up by a node's labels and
    name) gives each node the sum kube-scheduler's NodeAffinity gives, testing every term:
    random terms of one or several requirements of every operator (invalid ones too, which
    match nothing; values repeated; matchFields on the name), on random nodes."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from stickypack.core.labels import PreferredWeights

    names = ("n0", "n1", "n2")
    field = st.fixed_dictionaries(
        {
            "key": st.sampled_from(("metadata.name", "zone")),
            "operator": st.sampled_from(("In", "NotIn", "Exists")),
            "values": st.lists(st.sampled_from(names), max_size=2),
        }
    )
    term = st.builds(
        lambda exprs, fields: NodeSelectorTerm.from_dict({"matchExpressions": exprs, "matchFields": fields}),
        st.lists(_requirement_dicts(_VALUES), max_size=3),
        st.lists(field, max_size=2),
    )
    terms = st.lists(st.builds(PreferredTerm, st.integers(1, 100), term), max_size=12)
    node_labels = st.dictionaries(st.sampled_from(_KEYS), st.sampled_from(("a", "b", "7", "12")), max_size=4)
    node = st.tuples(node_labels, st.sampled_from(names))

    @settings(max_examples=400, deadline=None)
    @given(terms=terms, nodes=st.lists(node, min_size=1, max_size=6))
    def check(terms: list[PreferredTerm], nodes: list[tuple[dict[str, str], str]]) -> None:
        weights = PreferredWeights(terms)
        for labels, name in nodes:
            assert weights.weight(labels, name) == _naive_weight(tuple(terms), labels, name), (labels, name)

    check()
    # the edge cases spelled out: a value listed twice, a term given twice, an empty term,
    # one kube-scheduler cannot parse (In without values), NotIn of the name
    zone_a = Requirement("zone", "In", ("a", "a"))
    edge = [
        PreferredTerm(3, NodeSelectorTerm((zone_a,))),
        PreferredTerm(5, NodeSelectorTerm((zone_a, Requirement("pool", "Exists")))),
        PreferredTerm(7, NodeSelectorTerm((Requirement("zone", "NotIn", ("b", "b")),))),
        PreferredTerm(7, NodeSelectorTerm((Requirement("zone", "NotIn", ("b", "b")),))),
        PreferredTerm(11, NodeSelectorTerm()),
        PreferredTerm(
            13,
            NodeSelectorTerm.from_dict({"matchExpressions": [{"key": "zone", "operator": "In"}]}),
        ),
        PreferredTerm(17, NodeSelectorTerm(fields=(Requirement("metadata.name", "NotIn", ("n1",)),))),
    ]
    weights = PreferredWeights(edge)
    for labels, name, want in (
        ({"zone": "a", "pool": "x"}, "n0", 3 + 5 + 14 + 17),
        ({"zone": "a"}, "n1", 3 + 14),
        ({"zone": "b"}, "n0", 17),
        ({}, "n2", 14 + 17),
    ):
        assert weights.weight(labels, name) == _naive_weight(tuple(edge), labels, name) == want


def test_node_affinity_score_of_many_terms_equals_every_term_tested() -> None:
    """A pod of 5,000 terms on 300 nodes: the plugin's scores are kube-scheduler's
    normalized sums of every matching term (hostname, zone, name, Exists, NotIn, compound)."""
    import random

    from stickypack.core.plugins.common import default_normalize

    rng = random.Random(7)
    t = NodeTable()
    for i in range(300):
        labels = {"kubernetes.io/hostname": f"n{i}", "zone": f"z{i % 4}"}
        if i % 3 == 0:
            labels["ssd"] = "true"
        t.upsert_node(f"n{i}", {"cpu": 1000}, labels=labels)
    shapes = [
        lambda: (Requirement("kubernetes.io/hostname", "In", (f"n{rng.randrange(300)}",)),),
        lambda: (Requirement("zone", rng.choice(("In", "NotIn")), (f"z{rng.randrange(5)}",)),),
        lambda: (Requirement("ssd", rng.choice(("Exists", "DoesNotExist"))),),
        lambda: (Requirement("zone", "In", ("z1", "z2")), Requirement("ssd", "Exists")),
        lambda: (Requirement("zone", "NotIn", ("z0",)), Requirement("ssd", "DoesNotExist")),
    ]
    terms = []
    for _ in range(5000):
        if rng.random() < 0.2:
            fields = (Requirement("metadata.name", rng.choice(("In", "NotIn")), (f"n{rng.randrange(300)}",)),)
            terms.append(PreferredTerm(rng.randint(1, 100), NodeSelectorTerm(fields=fields)))
        else:
            shape = shapes[0] if rng.random() < 0.7 else rng.choice(shapes[1:])
            terms.append(PreferredTerm(rng.randint(1, 100), NodeSelectorTerm(shape())))
    p = pod(preferred_terms=tuple(terms))
    idx = t.active_indices()
    raw = np.array([_naive_weight(p.preferred_terms, t.info[i].labels, t.info[i].name) for i in idx])
    want = default_normalize(raw, reverse=False).tolist()
    assert len(set(want)) > 10  # the terms do tell the nodes apart
    plugin = NodeAffinityScore()
    assert scores(plugin, p, t) == want
    assert scores(plugin, p, t) == want  # the pod's grouped terms, kept


def test_the_shared_integer_helpers_follow_go_and_kube() -> None:
    """``go_div`` truncates toward zero as Go's ``/`` on int64 does (7 / -2 = -3, -7 / -2 =
    3; floor division would give -4 and 3); ``default_normalize`` is kube's
    DefaultNormalizeScore, ``100 * s / max`` truncated (1, 2, 3 -> 33, 66, 100; reversed
    67, 34, 0); ``min_max_scores`` gives every node 100 when all counts are equal."""
    from stickypack.core.plugins.common import default_normalize, go_div, min_max_scores

    num = np.array([7, -7, 7, -7])
    assert go_div(num, np.array([2, 2, -2, -2])).tolist() == [3, -3, -3, 3]
    assert go_div(num, -2).tolist() == [-3, 3, -3, 3]
    assert default_normalize(np.array([1, 2, 3]), reverse=False).tolist() == [33, 66, 100]
    assert default_normalize(np.array([1, 2, 3]), reverse=True).tolist() == [67, 34, 0]
    assert min_max_scores(np.array([2, 2, 2]), fewest_first=True).tolist() == [100, 100, 100]
    assert min_max_scores(np.array([2, 2]), fewest_first=False).tolist() == [100, 100]


def test_a_resource_weight_is_an_integer_from_1_to_100() -> None:
    """kube-scheduler refuses a resource weight outside (0, 100] ("resource weight of X
    not in valid range"); a boolean is no integer weight."""
    from stickypack.core.plugins.common import PluginArgsError, resource_weights

    assert resource_weights({"cpu": 1, "memory": 100}, [("cpu", 1)]) == [("cpu", 1), ("memory", 100)]
    for bad in (0, 101, True, 1.5):
        with pytest.raises(PluginArgsError, match=r"1\.\.100"):
            resource_weights({"cpu": bad}, [("cpu", 1)])


# ---------------------------------------------------------------------------- BinderHub's mutators
# What BinderHub does to a build pod (binderhub/build.py, KubernetesBuildExecutor.get_affinity;
# /work/shared/REFERENCE.md): sticky builds add a preferred node affinity, weight 100,
# kubernetes.io/hostname In [rendezvous_rank(builder nodes, repo URL)[0]]; sticky builds off
# add a preferred pod anti-affinity, weight 100, topology hostname, against build pods.

REPO = "https://github.com/binder-examples/requirements"


def _builders_table() -> NodeTable:
    t = NodeTable()
    for name in ("n1", "n2", "n3"):
        t.upsert_node(name, {"cpu": 1000, "memory": Gi, "pods": 110})
    return t


def _hostname_in(node: str) -> NodeSelectorTerm:
    from stickypack.core.labels import HOSTNAME_LABEL

    return NodeSelectorTerm((Requirement(HOSTNAME_LABEL, "In", (node,)),))


def test_sticky_builds_prefer_the_top_rendezvous_node_after_the_pods_own_terms() -> None:
    from stickypack.core.plugins import BinderHubStickyBuilds

    t = _builders_table()
    own = PreferredTerm(5, NodeSelectorTerm((Requirement("zone", "In", ("a",)),)))
    build = pod(annotations={BUILD_REPO_ANNOTATION: REPO}, preferred_terms=(own,))
    ranked = rendezvous_rank(["n1", "n2", "n3"], REPO)  # three distinct nodes: first != last
    out = BinderHubStickyBuilds().mutate(build, t, CTX)  # no builder list: every node
    assert out.preferred_terms == (own, PreferredTerm(100, _hostname_in(ranked[0])))
    # with builder nodes given, only those are ranked: one builder, n3, is the best
    only_n3 = SchedulingContext(builder_nodes=["n3"])
    out = BinderHubStickyBuilds().mutate(pod(annotations={BUILD_REPO_ANNOTATION: REPO}), t, only_n3)
    assert out.preferred_terms == (PreferredTerm(100, _hostname_in("n3")),)


def test_sticky_builds_leave_a_pod_alone_with_no_builder_node_or_no_repo() -> None:
    """An empty builder list is no node to prefer (BinderHub's ``ranked[0]`` would raise): not
    every node of the table; a pod that builds nothing is not touched."""
    from stickypack.core.plugins import BinderHubStickyBuilds

    t = _builders_table()
    no_builders = SchedulingContext(builder_nodes=[])
    build = pod(annotations={BUILD_REPO_ANNOTATION: REPO})
    assert BinderHubStickyBuilds().mutate(build, t, no_builders).preferred_terms == ()
    assert BinderHubStickyBuilds().mutate(build, NodeTable(), CTX).preferred_terms == ()  # no node
    assert BinderHubStickyBuilds().mutate(pod(), t, CTX).preferred_terms == ()


def test_binderhub_anti_affinity_avoids_other_builds_after_the_pods_own_terms() -> None:
    from stickypack.core.labels import HOSTNAME_LABEL
    from stickypack.core.plugins import BinderHubAntiAffinity

    t = _builders_table()
    own = PodAffinityTerm(7, (("app", "x"),), "topology.kubernetes.io/zone")
    build = pod(annotations={BUILD_REPO_ANNOTATION: REPO}, pod_anti_affinity=(own,))
    out = BinderHubAntiAffinity().mutate(build, t, CTX)
    assert out.pod_anti_affinity == (
        own,
        PodAffinityTerm(100, (("component", "binderhub-build"),), HOSTNAME_LABEL),
    )
    assert BinderHubAntiAffinity().mutate(pod(pod_anti_affinity=(own,)), t, CTX).pod_anti_affinity == (own,)


def test_binderhub_anti_affinity_is_not_added_twice_to_a_build_pod_that_has_it() -> None:
    """A build pod read from the cluster (``inspect --pod``) already carries the term BinderHub
    gave it; the mutator, which stands for BinderHub, must not count it twice."""
    from stickypack.core.plugins import BinderHubAntiAffinity

    term = {
        "weight": 100,
        "podAffinityTerm": {
            "topologyKey": "kubernetes.io/hostname",
            "labelSelector": {"matchLabels": {"component": "binderhub-build"}},
        },
    }
    build = Pod.from_dict(
        {
            "metadata": {
                "name": "build-x",
                "namespace": "binder",
                "labels": {"component": "binderhub-build"},
                "annotations": {BUILD_REPO_ANNOTATION: REPO},
            },
            "spec": {
                "containers": [{"name": "c"}],
                "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [term]}},
            },
        }
    )
    assert len(build.pod_anti_affinity) == 1 and len(build.preferred_pod_anti_affinity) == 1
    out = BinderHubAntiAffinity().mutate(build, _builders_table(), CTX)
    assert out.pod_anti_affinity == build.pod_anti_affinity
    assert len(out.preferred_pod_anti_affinity) == 1
