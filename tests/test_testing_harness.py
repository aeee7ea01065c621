"""The fidelity harness's own decisions, on hand-made inputs (no control plane).

``stickypack.testing.live_fidelity`` judges what the live ``stickypack`` deployment did
against the simulated policy and a model of the deployment. A mistake in its judging (an
"agree" that always holds, a live model that is not the documented one, a summary that
counts the wrong cases) would leave the control-plane fidelity test green while it checks
nothing, so these tests pin each decision with expectations computed by hand.
"""

from __future__ import annotations

import copy
import random
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from stickypack.core import NodeTable, Pod, SchedulingContext
from stickypack.core.framework import FilterPlugin, ScorePlugin
from stickypack.core.labels import TO_BE_DELETED_TAINT
from stickypack.core.plugins import BuildBounds
from stickypack.core.rendezvous import rendezvous_rank
from stickypack.core.resources import parse_resource_list
from stickypack.extender.config import config_from_dict
from stickypack.policies import load_builtin
from stickypack.render import extender_entry, scheduler_config
from stickypack.testing import live_fidelity as lf
from stickypack.testing.controlplane import pod_manifest
from stickypack.testing.live_fidelity import LiveCase

T0 = 1_700_000_000.0  # nodes' creation time in these cases
REPO = "https://github.com/org/repo"


# ---- LiveCase's verdicts ------------------------------------------------------------------


def case(**kw: Any) -> LiveCase:
    return LiveCase(0, kw.pop("kind", "build"), [], [], kw.pop("pod", {}), **kw)


def test_a_pick_outside_the_policys_best_nodes_disagrees() -> None:
    assert case(chosen="a", top=["a", "b"]).agrees
    # "b" is feasible (it has a score) but not among the best: a disagreement
    assert not case(chosen="b", top=["a"], scores={"a": 30, "b": 20}).agrees


def test_no_pick_agrees_only_when_the_policy_places_nothing() -> None:
    assert case(chosen=None, top=[]).agrees
    assert not case(chosen=None, top=["a"], scores={"a": 5}).agrees


def test_explained_needs_the_live_model_or_its_blind_variant_to_hold_the_pick() -> None:
    assert case(chosen="a", live_top=["a"]).explained
    assert not case(chosen="b", live_top=["a"]).explained  # no blind variant
    assert not case(chosen="b", live_top=["a"], stale_top=["a"]).explained
    assert case(chosen="b", live_top=["a"], stale_top=["b"]).explained
    # no pick: explained only when the model places nothing either
    assert case(chosen=None, live_top=[]).explained
    assert not case(chosen=None, live_top=["a"]).explained
    assert not case(chosen=None, live_top=["a"], stale_top=["b"]).explained


def test_a_tie_is_two_best_nodes_or_more() -> None:
    assert not case(live_top=["a"]).live_tie
    assert not case(live_top=[]).live_tie
    assert case(live_top=["a", "b"]).live_tie


def test_the_integer_scores_change_the_pick_when_exact_and_live_best_differ() -> None:
    # the policy agrees with the exact model; the integer (live) model picks another node
    assert case(top=["a"], exact_top=["a"], live_top=["b"]).integer_changes_pick
    assert not case(top=["b"], exact_top=["a", "b"], live_top=["b", "a"]).integer_changes_pick


def test_holds() -> None:
    assert lf._holds(["a", "b"], "b")
    assert not lf._holds(["a"], "b")
    assert lf._holds([], None)
    assert not lf._holds(["a"], None)


# ---- summaries ---------------------------------------------------------------------------


def four_cases() -> list[LiveCase]:
    return [
        # build, agrees, explained
        case(chosen="a", top=["a"], live_top=["a"], exact_top=["a"]),
        # build, a later burst pod: disagrees (integer), explained; the integer score changes
        # the pick (exact a, live b); the blind view's best is the live one's
        case(
            chosen="b",
            top=["a"],
            live_top=["b"],
            exact_top=["a"],
            cause="integer",
            deficit=5,
            integer_loss=1.26,
            position=1,
            burst=2,
            stale_top=["b"],
        ),
        # user, disagrees, unexplained, a live tie; the blind view's best differs
        case(
            kind="user",
            chosen="c",
            top=["a"],
            live_top=["a", "b"],
            exact_top=["b", "a"],
            cause="unexplained",
            deficit=3,
            position=2,
            burst=3,
            stale_top=["a"],
        ),
        # user, agrees, a live tie
        case(kind="user", chosen="a", top=["a"], live_top=["a", "b"], exact_top=["a", "b"]),
    ]


def test_summary_counts_each_kind_by_hand() -> None:
    out = lf.summary(four_cases())
    assert out["build"] == {
        "cases": 2,
        "agree": 1,
        "causes": {"integer": 1},
        "unexplained": 0,
        "live_ties": 0,
        "policy_waits": 0,
        "integer_changes_pick": 1,
        "integer_losses": [1.3],
        "burst_later": 1,
        "stale_view_changes_pick": 0,
        "deficits": [5],
    }
    assert out["user"] == {
        "cases": 2,
        "agree": 1,
        "causes": {"unexplained": 1},
        "unexplained": 1,
        "live_ties": 2,
        "policy_waits": 0,
        "integer_changes_pick": 0,
        "integer_losses": [],
        "burst_later": 1,
        "stale_view_changes_pick": 1,
        "deficits": [3],
    }


def test_agreement_is_the_share_of_agreeing_cases_and_nothing_for_no_cases() -> None:
    assert lf.agreement(four_cases()) == 0.5  # 2 of 4
    assert lf.agreement([]) == 0.0  # no case is no evidence of agreement


# ---- rendered profiles -------------------------------------------------------------------


def rendered(scheduler: str, weight: int = 15) -> dict[str, Any]:
    return scheduler_config([scheduler], extender=extender_entry("http://127.0.0.1:9", weight=weight))


def test_rendered_score_weights_merge_kube_schedulers_defaults() -> None:
    # stickypack-builds disables BalancedAllocation, ImageLocality and InterPodAffinity and
    # keeps the other defaults (TaintToleration 3, NodeAffinity 2, NodeResourcesFit 1,
    # PodTopologySpread 2, VolumeBinding 1)
    builds = rendered(lf.BUILD_SCHEDULER)["profiles"][0]
    assert lf.rendered_score_weights(builds) == {
        "TaintToleration": 3,
        "NodeAffinity": 2,
        "NodeResourcesFit": 1,
        "PodTopologySpread": 2,
        "VolumeBinding": 1,
    }
    # stickypack re-enables NodeAffinity 14631, InterPodAffinity 1331, NodeResourcesFit 121
    users = rendered(lf.USER_SCHEDULER)["profiles"][0]
    assert lf.rendered_score_weights(users) == {
        "TaintToleration": 3,
        "NodeAffinity": 14631,
        "NodeResourcesFit": 121,
        "PodTopologySpread": 2,
        "InterPodAffinity": 1331,
        "VolumeBinding": 1,
    }


def test_rendered_score_weights_with_every_default_disabled() -> None:
    profile = {
        "plugins": {
            "score": {
                "disabled": [{"name": "*"}],
                "enabled": [{"name": "NodeResourcesFit", "weight": 5}, {"name": "TaintToleration"}],
            }
        }
    }
    # an enabled plugin without a weight has kube-scheduler's default weight (3)
    assert lf.rendered_score_weights(profile) == {"NodeResourcesFit": 5, "TaintToleration": 3}


def test_a_profile_without_a_fit_strategy_scores_least_allocated() -> None:
    assert lf.rendered_fit_strategy({})["type"] == "LeastAllocated"


def test_a_rendered_fit_strategy_other_than_the_policys_is_refused() -> None:
    policy = load_builtin("stickypack")
    profile = policy.profile_for(Pod.from_dict(pod_manifest("p", labels=lf.USER_LABELS)))
    good = rendered(lf.USER_SCHEDULER)["profiles"][0]
    lf._check_fit_strategy(profile, good)  # MostAllocated, cpu 1, memory 1: the policy's
    bad = copy.deepcopy(good)
    bad["pluginConfig"][0]["args"]["scoringStrategy"]["type"] = "LeastAllocated"
    with pytest.raises(AssertionError, match="LeastAllocated"):
        lf._check_fit_strategy(profile, bad)


def test_weights_scale_and_the_guides_user_extender_weight() -> None:
    policy = load_builtin("stickypack")
    users = policy.profile_for(Pod.from_dict(pod_manifest("p", labels=lf.USER_LABELS)))
    builds = policy.profile_for(Pod.from_dict(build_manifest("b")))
    # NodeResourcesFit: 121 rendered against the policy's 8 for users, 1 against 1 for builds
    assert lf.weights_scale(users, rendered(lf.USER_SCHEDULER)["profiles"][0]) == 121 / 8
    assert lf.weights_scale(builds, rendered(lf.BUILD_SCHEDULER)["profiles"][0]) == 1.0
    # the extender's scorers weigh 4 + 6 + 1 + 2 = 13: 121 x 13 / 8 = 196.6 -> 197
    assert lf.user_extender_weight(policy) == 197
    # TaintToleration 6 x 15.125 = 90.75 -> 91, NodeAffinity 4 x 15.125 = 60.5 -> 60 (half
    # to even, as RESULTS.md reports it), NodeResourcesFit 8 x 15.125 = 121
    assert lf.policy_balanced_weights(policy) == {
        "NodeResourcesFit": 121,
        "TaintToleration": 91,
        "NodeAffinity": 60,
    }


def test_reweigh_gives_each_plugin_one_entry_with_its_new_weight() -> None:
    profile = rendered(lf.USER_SCHEDULER)["profiles"][0]
    lf._reweigh(profile, {"NodeAffinity": 60, "TaintToleration": 91})
    enabled = [p["name"] for p in profile["plugins"]["score"]["enabled"]]
    assert sorted(enabled) == ["InterPodAffinity", "NodeAffinity", "NodeResourcesFit", "TaintToleration"]
    weights = lf.rendered_score_weights(profile)
    assert (weights["NodeAffinity"], weights["TaintToleration"], weights["NodeResourcesFit"]) == (60, 91, 121)


# ---- the models ---------------------------------------------------------------------------


class Fixed(ScorePlugin):
    """Scores given per node name."""

    name = "Fixed"

    def __init__(self, by_node: dict[str, int], skips: bool = False) -> None:
        self.by_node = by_node
        self.skips = skips

    def score(self, pod: Pod, table: NodeTable, idx: np.ndarray, ctx: SchedulingContext) -> np.ndarray:
        return np.array([self.by_node[n] for n in table.node_names(idx)], dtype=np.int64)

    def skip(self, pod: Pod) -> bool:
        return self.skips


class PodsSeen(ScorePlugin):
    """10 points per pod on the node, in the table it is given."""

    name = "PodsSeen"

    def score(self, pod: Pod, table: NodeTable, idx: np.ndarray, ctx: SchedulingContext) -> np.ndarray:
        return (table.requested[idx, table.rindex["pods"]] * 10).astype(np.int64)


class EmptyNodes(FilterPlugin):
    """Passes the nodes without pods in the table it is given."""

    def __init__(self, name: str) -> None:
        self.name = name  # type: ignore[misc]

    def filter(self, pod: Pod, table: NodeTable, idx: np.ndarray, ctx: SchedulingContext) -> np.ndarray:
        return np.asarray(table.requested[idx, table.rindex["pods"]] == 0)


class Without(FilterPlugin):
    name = "NodeUnschedulable"

    def __init__(self, node: str) -> None:
        self.node = node

    def filter(self, pod: Pod, table: NodeTable, idx: np.ndarray, ctx: SchedulingContext) -> np.ndarray:
        return np.array([n != self.node for n in table.node_names(idx)], dtype=bool)


def table_of(
    *names: str, builds: dict[str, int] | None = None, pods: dict[str, int] | None = None
) -> NodeTable:
    t = NodeTable()
    for n in names:
        t.upsert_node(n, parse_resource_list({"cpu": "4", "memory": "16Gi", "pods": "110"}), created=T0)
    for n, k in (builds or {}).items():
        for j in range(k):
            t.add_pod(t.slot(n), Pod(f"{n}-b{j}", annotations={"binder-repo": "r"}))
    for n, k in (pods or {}).items():
        for j in range(k):
            t.add_pod(t.slot(n), Pod(f"{n}-p{j}"))
    return t


CTX = SchedulingContext(now=T0 + 3600)
POD = Pod("p")


def test_the_integer_model_rounds_the_extenders_score_to_0_10_times_its_weight_times_10() -> None:
    table = table_of("a", "b")
    # extender: weights 2 and 1; raw a = 2 x 100 + 0 = 200, b = 2 x 40 + 100 = 180, over
    # 100 x 3 = 300: exact 6.67 and 6.0, integer round(6.67) = 7 and 6 (a floor would tie at 6)
    ext = [(Fixed({"a": 100, "b": 40}), 2), (Fixed({"a": 0, "b": 100}), 1)]
    kube = [(Fixed({"a": 10, "b": 20}), 3.0)]  # 30 and 60
    integer = lf._Model([], None, kube, ext, 5.0, integer=True)
    top, scores = integer.run(POD, table, CTX)
    # a: 30 + 7 x 5 x 10 = 380, b: 60 + 6 x 5 x 10 = 360
    assert (top, scores) == (["a"], {"a": 380.0, "b": 360.0})
    exact = lf._Model([], None, kube, ext, 5.0)
    top, scores = exact.run(POD, table, CTX)
    assert top == ["a"]
    assert scores["a"] == pytest.approx(30 + 200 / 300 * 10 * 50) and scores["b"] == 360.0


def test_the_best_nodes_are_the_exact_maximum_only() -> None:
    table = table_of("a", "b")
    # exact: a 200 / 100 x 10 x 10 = 200, b 199 -> 199: one point apart, b is not best
    ext = [(Fixed({"a": 100, "b": 99}), 2)]
    top, scores = lf._Model([], None, [], ext, 1.0).run(POD, table, CTX)
    assert scores == {"a": 100.0, "b": 99.0} and top == ["a"]
    # 0.5 apart
    ext = [(Fixed({"a": 100, "b": 99}), 1), (Fixed({"a": 50, "b": 50}), 1)]
    top, scores = lf._Model([], None, [], ext, 1.0).run(POD, table, CTX)
    assert scores == {"a": 75.0, "b": 74.5} and top == ["a"]


def test_a_scorer_that_skips_the_pod_adds_nothing() -> None:
    table = table_of("a", "b")
    kube = [(Fixed({"a": 100, "b": 0}), 1.0), (Fixed({"a": 0, "b": 100}, skips=True), 5.0)]
    top, scores = lf._Model([], None, kube, []).run(POD, table, CTX)
    assert (top, scores) == (["a"], {"a": 100.0, "b": 0.0})


def test_only_the_extender_reads_the_blind_table() -> None:
    """``ext_table``: the extender's view (blind to a burst's earlier pods); kube-scheduler's
    filters and scorers read the real table."""
    real = table_of("a", "b", "c", pods={"a": 1, "b": 2})
    blind = table_of("a", "b", "c", pods={"b": 2})
    # kube-scheduler's filter (NodeResourcesFit here) reads the real table: drops a and b
    model = lf._Model([lf_filter("NodeResourcesFit")], None, [], [(PodsSeen(), 1)], 1.0)
    assert model.run(POD, real, CTX, ext_table=blind) == (["c"], {"c": 0.0})
    # the extender's filter (ScaleDownAware here) reads its view: drops b only
    model = lf._Model([lf_filter("ScaleDownAware")], None, [], [(PodsSeen(), 1)], 1.0)
    assert set(model.run(POD, real, CTX, ext_table=blind)[1]) == {"a", "c"}
    # the extender scores its view: a 0 pods, b 2 (20 points), c 0; over 100 x 1, times 10,
    # times weight 1, times 10: 0, 20, 0 (the real table would give a 10)
    model = lf._Model([], None, [], [(PodsSeen(), 1)], 1.0)
    assert model.run(POD, real, CTX, ext_table=blind) == (["b"], {"a": 0.0, "b": 20.0, "c": 0.0})


def lf_filter(name: str) -> FilterPlugin:
    return EmptyNodes(name)


def test_the_load_bound_drops_nodes_over_it_unless_every_candidate_is() -> None:
    bound = BuildBounds(1.0, 1)
    # builds a 2, b 0: cap max(1, ceil(1.0 x 3 / 2)) = 2; a would run 3 > 2, b 1
    table = table_of("a", "b", builds={"a": 2})
    top, _ = lf._Model([], bound, [(Fixed({"a": 100, "b": 0}), 1.0)], []).run(POD, table, CTX)
    assert top == ["b"]
    # builds a 1, b 0: cap max(1, ceil(2 / 2)) = 1; a would run 2 > 1: dropped, at the bound
    table = table_of("a", "b", builds={"a": 1})
    names, _ = lf._Model([], bound, [(Fixed({"a": 100, "b": 0}), 1.0)], []).run(POD, table, CTX)
    assert names == ["b"]
    # builds a 2, b 2, c 0, c filtered out: cap ceil(5 / 3) = 2, a and b both over: kept
    table = table_of("a", "b", "c", builds={"a": 2, "b": 2})
    top, scores = lf._Model([Without("c")], bound, [(Fixed({"a": 100, "b": 0, "c": 0}), 1.0)], []).run(
        POD, table, CTX
    )
    assert top == ["a"] and set(scores) == {"a", "b"}


def build_manifest(
    name: str, repo: str = REPO, cpu: str = "100m", created: float | None = None
) -> dict[str, Any]:
    raw = pod_manifest(name, cpu=cpu, scheduler_name=lf.BUILD_SCHEDULER)
    lf._as_build(raw, repo)
    if created is not None:
        raw["metadata"]["creationTimestamp"] = stamp(created)
    return raw


def stamp(t: float) -> str:
    import datetime

    return datetime.datetime.fromtimestamp(t, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def user_config() -> Any:
    return config_from_dict(
        {
            "profile": lf.USER_SCHEDULER,
            "score": list(lf.USER_EXTENDER_SCORE),
            "pods": {"manage": lf.USER_LABELS},
            "history": {"store": "memory"},
        }
    )


def named(pairs: list[tuple[Any, float]]) -> list[tuple[str, float]]:
    return [(p.name, w) for p, w in pairs]


def test_the_models_step_from_the_build_policy_to_the_live_deployment() -> None:
    policy = load_builtin("stickypack")
    pod = Pod.from_dict(build_manifest("b"))
    profile = policy.profile_for(pod)
    models = lf._models(profile, config_from_dict({}), rendered(lf.BUILD_SCHEDULER)["profiles"][0], 15, pod)
    # live filters: kube-scheduler's and the extender's ScaleDownAware, not DelayForLocality
    for m in models:
        assert [f.name for f in m.filters] == [
            "NodeUnschedulable",
            "NodeResourcesFit",
            "NodeAffinity",
            "TaintToleration",
            "ScaleDownAware",
        ]
        assert m.load_bound is not None and (m.load_bound.load_bound, m.load_bound.min_load_cap) == (1.25, 3)
    # 1. the policy's scorers at its weights
    assert named(models[0].kube) == [
        ("BuildLocality", 10),
        ("BuildSpread", 5),
        ("NodeAge", 3),
        ("NodeResourcesFit", 1),
        ("ScaleDownAware", 2),
        ("TaintToleration", 3),
        ("NodeAffinity", 2),
    ]
    assert models[0].ext == [] and models[1].ext == []
    # 2. those that run live (no BuildSpread), still at the policy's weights
    assert named(models[1].kube) == [
        ("BuildLocality", 10),
        ("NodeAge", 3),
        ("NodeResourcesFit", 1),
        ("ScaleDownAware", 2),
        ("TaintToleration", 3),
        ("NodeAffinity", 2),
    ]
    # 3. and 4.: the rendered weights, the extender's scorers at its weight 15
    for m in models[2:]:
        assert named(m.kube) == [("NodeResourcesFit", 1), ("TaintToleration", 3), ("NodeAffinity", 2)]
        assert named(m.ext) == [("BuildLocality", 10), ("NodeAge", 3), ("ScaleDownAware", 2)]
        assert m.ext_weight == 15.0
    assert [m.integer for m in models] == [False, False, False, True]


def test_the_models_step_from_the_user_policy_to_the_live_deployment() -> None:
    policy = load_builtin("stickypack")
    pod = Pod.from_dict(pod_manifest("u", labels=lf.USER_LABELS))
    profile = policy.profile_for(pod)
    models = lf._models(profile, user_config(), rendered(lf.USER_SCHEDULER)["profiles"][0], 197, pod)
    assert all(m.load_bound is None for m in models)  # a user pod: no build load bound
    assert [f.name for f in models[0].filters] == [
        "NodeUnschedulable",
        "NodeResourcesFit",
        "NodeAffinity",
        "TaintToleration",
        "ScaleDownAware",
    ]
    policy_weights = [
        ("BuildHeadroom", 6),
        ("NodeResourcesFit", 8),
        ("DrainForecast", 4),
        ("CacheKeeper", 1),
        ("ScaleDownAware", 2),
        ("TaintToleration", 6),
        ("NodeAffinity", 4),
    ]
    assert named(models[0].kube) == policy_weights
    # every policy scorer runs live, and kube-scheduler's InterPodAffinity (1331) besides
    assert named(models[1].kube) == [*policy_weights, ("InterPodAffinity", 1331)]
    for m in models[2:]:
        assert named(m.kube) == [
            ("NodeResourcesFit", 121),
            ("TaintToleration", 3),
            ("NodeAffinity", 14631),
            ("InterPodAffinity", 1331),
        ]
        assert named(m.ext) == [
            ("DrainForecast", 4),
            ("BuildHeadroom", 6),
            ("CacheKeeper", 1),
            ("ScaleDownAware", 2),
        ]
        assert m.ext_weight == 197.0
    assert [m.integer for m in models] == [False, False, False, True]


# ---- judging -------------------------------------------------------------------------------


def deployment(build_weight: int = 15, user_weight: int = 197) -> lf.LiveDeployment:
    """The two deployments' configurations as ``start_live`` makes them, without threads."""
    return lf.LiveDeployment(
        load_builtin("stickypack"),
        SimpleNamespace(config=config_from_dict({})),  # type: ignore[arg-type]
        SimpleNamespace(config=user_config()),  # type: ignore[arg-type]
        rendered(lf.BUILD_SCHEDULER, build_weight),
        rendered(lf.USER_SCHEDULER, user_weight),
        [],
        "hist",
    )


def node_table(
    names: list[str], labels: dict[str, dict[str, str]] | None = None, cpu: str = "4"
) -> NodeTable:
    t = NodeTable()
    for n in names:
        t.upsert_node(
            n,
            parse_resource_list({"cpu": cpu, "memory": "16Gi", "pods": "110", "ephemeral-storage": "100Gi"}),
            labels={"kubernetes.io/hostname": n, **(labels or {}).get(n, {})},
            created=T0,
        )
    return t


NOW = T0 + 7200


def test_judge_a_build_sent_away_from_its_history_node() -> None:
    """Nodes a and b alike; the repo's history names a, so BuildLocality puts a first for
    the policy and for every model (the extender scores it): a pick of b disagrees, by a
    positive deficit, and nothing explains it."""
    live = deployment()
    table = node_table(["a", "b"])
    raw = build_manifest("b0", created=NOW - 10)
    agreeing = case(pod=raw, history=["a"], repo=REPO, written=NOW - 60, chosen="a")
    lf.judge(agreeing, raw, table, live, NOW)
    assert agreeing.top == ["a"] and agreeing.live_top == ["a"] and agreeing.agrees
    assert agreeing.cause is None and agreeing.deficit == 0
    away = case(pod=raw, history=["a"], repo=REPO, written=NOW - 60, chosen="b")
    lf.judge(away, raw, table, live, NOW)
    assert away.top == ["a"] and not away.agrees
    assert away.deficit == away.scores["a"] - away.scores["b"] > 0
    assert away.cause == "unexplained" and not away.explained


def test_judge_reads_the_builder_nodes() -> None:
    """No history: BuildLocality ranks the builder nodes by the repo's rendezvous order."""
    repo = next(r for r in (f"{REPO}-{i}" for i in range(100)) if rendezvous_rank(["a", "b"], r)[0] == "a")
    raw = build_manifest("b0", repo=repo, created=NOW - 10)
    table = node_table(["a", "b"])
    everyone = case(pod=raw, repo=repo, chosen="a")
    lf.judge(everyone, raw, table, deployment(), NOW)
    assert everyone.top == ["a"]  # a tops the rendezvous order of a and b
    only_b = case(pod=raw, repo=repo, chosen="a")
    lf.judge(only_b, raw, table, deployment(), NOW, builders=["b"])
    assert only_b.top == ["b"]  # b is the only builder node


def test_judge_says_when_the_policy_holds_a_build_back() -> None:
    """History node a is full; a build created 10 s ago may wait for room there
    (DelayForLocality, 600 s): the policy places nothing and ``waits``. A pod that fits
    nowhere does not wait."""
    live = deployment()
    table = node_table(["a", "b"])
    table.add_pod(table.slot("a"), Pod("full", requests={"cpu": 4000}))
    raw = build_manifest("b0", created=NOW - 10)
    held = case(pod=raw, history=["a"], repo=REPO, written=NOW - 60, chosen="b")
    lf.judge(held, raw, table, live, NOW)
    assert held.top == [] and held.waits and not held.agrees
    huge = build_manifest("b1", cpu="64", created=NOW - 10)
    nowhere = case(pod=huge, history=["a"], repo=REPO, written=NOW - 60, chosen=None)
    lf.judge(nowhere, huge, table, live, NOW)
    assert nowhere.top == [] and not nowhere.waits and nowhere.agrees


def test_judge_blames_a_burst_pod_on_the_extenders_blind_view() -> None:
    """History node a holds 3 builds of the repo (earlier pods of the burst): the load bound
    (cap max(3, ceil(1.25 x 4 / 2)) = 3) keeps the next build off it, so every model on the
    real table picks b; the extender blind to those builds would still take a."""
    live = deployment()
    blind = node_table(["a", "b"])
    table = copy.deepcopy(blind)
    for j in range(3):
        table.add_pod(table.slot("a"), Pod.from_dict(build_manifest(f"e{j}")))
    raw = build_manifest("b0", created=NOW - 10)
    later = case(pod=raw, history=["a"], repo=REPO, written=NOW - 60, chosen="a", position=1, burst=2)
    lf.judge(later, raw, table, live, NOW, stale=blind)
    assert later.live_top == ["b"] and later.stale_top == ["a"]
    assert later.cause == "stale" and later.explained


def test_judge_weighs_a_user_pod_by_the_user_profile_and_extender() -> None:
    """A user pod preferring label zone=x, which only node a has: kube-scheduler's NodeAffinity
    scores a 100 and b 0, at the rendered user profile's weight 14631. The extender's
    integer score s (0..10) adds s x weight x 10: with the weights 197 and 1, a node's totals
    differ by s x 1960, and the rest (kube-scheduler's part) differs between a and b by
    NodeAffinity's 1,463,100 alone (the nodes are otherwise alike)."""
    raw = pod_manifest("u0", labels=lf.USER_LABELS, scheduler_name=lf.USER_SCHEDULER)
    raw["spec"]["affinity"] = {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 10,
                    "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["x"]}]},
                }
            ]
        }
    }
    table = node_table(["a", "b"], labels={"a": {"zone": "x"}})
    heavy, light = (case(kind="user", pod=raw, chosen="a") for _ in range(2))
    lf.judge(heavy, raw, table, deployment(user_weight=197), NOW)
    lf.judge(light, raw, table, deployment(user_weight=1), NOW)
    assert heavy.live_top == ["a"] and heavy.agrees
    ext = {n: (heavy.live_scores[n] - light.live_scores[n]) / 1960 for n in "ab"}
    assert all(s in range(11) for s in ext.values()) and sum(ext.values()) > 0
    kube = {n: light.live_scores[n] - 10 * ext[n] for n in "ab"}
    assert kube["a"] - kube["b"] == 14631 * 100


def test_judge_puts_a_disagreement_down_to_the_integer_score() -> None:
    """A one-scorer extender (``Ext``: a 54, b 46, weight 1, extender weight 1) and
    NodeResourcesFit (a 0, b 3: policy weight 1, rendered 2, so the policy's points are the
    rendered ones / 2). Policy: a 54, b 49. Exact live model: a 54 x 10 / 100 x 1 x 10 = 54,
    b 46 + 2 x 3 = 52: a. Integer: round(5.4) = round(4.6) = 5, a 50 and b 56: b, so the
    integer score changes the pick, at a loss of (54 - 52) / 2 = 1 policy point, and a real
    pick of b is put down to it."""
    from stickypack.core.framework import Profile, WeightedScorer

    ext = Fixed({"a": 54, "b": 46})
    ext.name = "Ext"  # type: ignore[misc]
    fit = Fixed({"a": 0, "b": 3})
    fit.name = "NodeResourcesFit"  # type: ignore[misc]
    fit.given_args = {"strategy": "LeastAllocated", "resources": {"cpu": 1, "memory": 1}}
    profile = Profile("p", filters=[], scorers=[WeightedScorer(ext, 1), WeightedScorer(fit, 1)])
    config = config_from_dict({}).model_copy(update={"score": ["Ext"], "filters": [], "load_bound": False})
    kube = {
        "profiles": [
            {
                "plugins": {
                    "score": {
                        "disabled": [{"name": "*"}],
                        "enabled": [{"name": "NodeResourcesFit", "weight": 2}],
                    }
                }
            }
        ],
        "extenders": [{"weight": 1}],
    }
    live = lf.LiveDeployment(
        SimpleNamespace(profile_for=lambda pod: profile),  # type: ignore[arg-type]
        SimpleNamespace(config=config),  # type: ignore[arg-type]
        SimpleNamespace(config=config),  # type: ignore[arg-type]
        kube,
        kube,
        [],
        "hist",
    )
    table = node_table(["a", "b"])
    raw = pod_manifest("p0")
    c = case(pod=raw, chosen="b")
    lf.judge(c, raw, table, live, NOW, stale=table)
    assert c.top == ["a"] and c.scores == {"a": 54, "b": 49}
    assert c.exact_top == ["a"] and c.live_top == ["b"] and c.integer_changes_pick
    assert c.live_scores == {"a": 50.0, "b": 56.0}
    assert c.integer_loss == 1.0
    assert c.stale_top == ["b"]  # the integer model too, on the extender's (here the same) view
    assert c.cause == "integer" and c.deficit == 5 and c.explained


# ---- what the harness writes and reads ----------------------------------------------------


def test_history_entries_are_most_recent_first_and_kept_as_configured() -> None:
    c = case(history=["a", "b", "c"], repo=REPO, written=100.0)
    assert lf._entries(c) == {"a": 100.0, "b": pytest.approx(99.99), "c": pytest.approx(99.98)}
    # max_nodes_per_repo 2 (max_repos 5): the two most recent
    config = config_from_dict({"history": {"max_nodes_per_repo": 2, "max_repos": 5}})
    assert lf._history(config, c).nodes_for(REPO, 100.0) == ["a", "b"]


def test_context_for_carries_the_extenders_thresholds_and_builders() -> None:
    config = config_from_dict({"cluster": {"utilization_threshold": 0.4, "gpu_utilization_threshold": 0.7}})
    ctx = lf.context_for(config, 5.0, None, ["b"])
    assert (ctx.now, ctx.utilization_threshold, ctx.gpu_utilization_threshold) == (5.0, 0.4, 0.7)
    assert ctx.builder_nodes == ["b"]


def test_the_reference_table_follows_the_extenders_rows_and_stored_times() -> None:
    nodes = [{"name": n, "cpu": "4", "memory": "16Gi", "labels": {}, "taints": []} for n in ("a", "b")]
    bound = pod_manifest("s0", cpu="1")
    bound["spec"]["nodeName"] = "a"
    group = [LiveCase(0, "user", nodes, [bound], {})]
    stored_nodes = {n: {"metadata": {"creationTimestamp": stamp(T0)}} for n in ("a", "b")}
    stored = copy.deepcopy(bound)
    stored["metadata"]["creationTimestamp"] = stamp(T0 + 60)
    table = lf._reference_table(group, stored_nodes, {"s0": stored}, {"a": 1, "b": 0})
    assert table.node_names([0, 1]) == ["b", "a"]  # the extender's rows, not by name
    rows, ages = table.pod_ages(T0 + 600)
    # the session on a, 540 s old by the API server's creation time
    assert rows.tolist() == [1] and ages.tolist() == [540.0]


def test_fill_cpu_requests_what_is_left() -> None:
    nodes = [{"name": "a", "cpu": "4", "memory": "16Gi", "labels": {}, "taints": []}]
    bound = pod_manifest("s0", cpu="1500m")
    bound["spec"]["nodeName"] = "a"
    c = LiveCase(0, "build", nodes, [bound], {}, node_waves={"a": 0}, pod_waves={"s0": 0})
    lf._fill_cpu(c, "a", 2)
    assert c.bound[-1]["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "2500m"}
    assert c.pod_waves["a-full"] == 2


def test_builders_run_on_the_given_share_of_nodes() -> None:
    def group() -> list[LiveCase]:
        nodes = [{"name": n, "cpu": "4", "memory": "16Gi", "labels": {}, "taints": []} for n in "abc"]
        return [LiveCase(0, "build", nodes, [], {}, node_waves=dict.fromkeys("abc", 0))]

    assert lf.add_builders(group(), random.Random(1), share=1.0) == ["a", "b", "c"]
    one = group()
    assert len(lf.add_builders(one, random.Random(1), share=0.0)) == 1  # at least one per case
    assert [b["metadata"]["labels"] for b in one[0].bound] == [lf.BUILDER_LABELS]


def test_choose_repos_ranks_a_cases_node_first_when_it_wants_rendezvous() -> None:
    everyone = [f"n{i}" for i in range(12)]

    def build_case(index: int, own: list[str], want: bool) -> LiveCase:
        hot = build_manifest(f"h{index}", repo="")
        other = build_manifest(f"o{index}", repo="https://github.com/other/r1")
        pod = build_manifest(f"p{index}", repo="")
        nodes = [{"name": n} for n in own]
        return LiveCase(index, "build", nodes, [hot, other], pod, want_rendezvous=want)

    cases = [build_case(0, ["n3"], True), build_case(1, ["n5", "n7"], True), build_case(2, ["n1"], False)]
    lf.choose_repos(cases, everyone)
    for c in cases[:2]:
        own = {n["name"] for n in c.nodes}
        # the first repo name (c<i>-r<t>) whose rendezvous top 3 holds one of the case's nodes
        first = next(
            t
            for t in range(2000)
            if own & set(rendezvous_rank(everyone, f"https://github.com/fidelity/c{c.index}-r{t}")[:3])
        )
        assert c.repo == f"https://github.com/fidelity/c{c.index}-r{first}"
    assert cases[2].repo == "https://github.com/fidelity/c2-r0"  # any repo: the first
    for c in cases:
        assert c.pod["metadata"]["annotations"]["binder-repo"] == c.repo
        hot, other = c.bound
        assert hot["metadata"]["annotations"]["binder-repo"] == c.repo  # the case's hot builds
        assert other["metadata"]["annotations"]["binder-repo"] == "https://github.com/other/r1"


def test_random_cases_mark_nodes_as_the_autoscaler_does() -> None:
    """ToBeDeletedByClusterAutoscaler is a NoSchedule taint (REFERENCE.md); BinderHub's
    build pods carry a preferred anti-affinity of weight 100 against other build pods."""
    taints = [
        t
        for i in range(60)
        for n in lf.random_live_case(random.Random(i), i, "build").nodes
        for t in n["taints"]
        if t.startswith(TO_BE_DELETED_TAINT)
    ]
    assert taints and all(t.endswith(":NoSchedule") for t in taints)
    raw = build_manifest("b")
    (term,) = raw["spec"]["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert term["weight"] == 100
    assert term["podAffinityTerm"]["labelSelector"] == {"matchLabels": {"component": "binderhub-build"}}


def test_the_deployment_hands_each_kind_its_own_scheduler_configuration() -> None:
    live = deployment(build_weight=15, user_weight=197)
    assert live.scheduler_config("build")["profiles"][0]["schedulerName"] == lf.BUILD_SCHEDULER
    assert live.scheduler_config("user")["profiles"][0]["schedulerName"] == lf.USER_SCHEDULER
    assert live.extender("build").config.profile == lf.BUILD_SCHEDULER
    assert live.extender("user").config.profile == lf.USER_SCHEDULER


def test_a_bursts_later_pod_is_judged_after_the_earlier_ones_and_by_the_blind_view() -> None:
    """A burst of two builds: the first (b0) went to a, the second (b01) to b. The second is
    judged with b0 on a (``after``) and against the extender's view without it
    (``stale_top`` set); the first has neither, and the batch's tables stay as they were."""
    live = deployment()
    table = node_table(["a", "b"])
    raw = build_manifest("b0", created=NOW - 10)
    burst = case(pod=raw, history=["a"], repo=REPO, written=NOW - 60, burst=2)
    created = {"b0": raw, "b01": {**copy.deepcopy(raw), "metadata": {**raw["metadata"], "name": "b01"}}}
    seen: list[LiveCase] = []
    first, second = lf._judge_batch(
        [burst], created, {"b0": "a", "b01": "b"}, {"build": table}, live, NOW, None, seen.append
    )
    assert seen == [first, second]
    assert (first.position, first.chosen, first.after, first.stale_top) == (0, "a", [], None)
    assert (second.position, second.chosen) == (1, "b")
    assert second.after == [(created["b0"], "a")] and second.stale_top is not None
    assert table.requested[:, table.rindex["pods"]].sum() == 0  # b0 added to a copy only


def test_live_batches_run_builders_on_every_other_batch_the_first_included() -> None:
    batches = list(lf.live_batches(5, seed=7, batch=2, build_share=1.0))
    assert [[c.index for c in group] for group, _ in batches] == [[0, 1], [2, 3], [4]]
    assert [builders is None for _, builders in batches] == [False, True, False]
    for group, builders in batches:
        on = sorted(
            b["spec"]["nodeName"]
            for c in group
            for b in c.bound
            if b["metadata"]["labels"] == lf.BUILDER_LABELS
        )
        assert on == (builders or [])  # the builder pods' nodes are the batch's builders
        if builders is not None:  # at least one on each case's nodes
            assert all({n["name"] for n in c.nodes} & set(builders) for c in group)
        assert all(c.kind == "build" and c.repo for c in group)  # build_share 1
    assert all(
        c.kind == "user" for group, _ in lf.live_batches(3, seed=7, batch=3, build_share=0.0) for c in group
    )
