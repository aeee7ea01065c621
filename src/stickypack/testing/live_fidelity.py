"""Does the live ``stickypack`` policy place pods where the core ``stickypack`` policy says?

Live, the ``stickypack`` policy is two deployments, each a real kube-scheduler with a
rendered profile (:mod:`stickypack.render`) and a real extender (:class:`ServiceThread`:
its watches of the API server, its build history, HTTP on loopback):

- **builds**: profile ``stickypack-builds`` with the extender of the default configuration
  (filters ``[ScaleDownAware]`` and the load bound, scores ``[BuildLocality, NodeAge,
  ScaleDownAware]``) at the rendered weight, :data:`~stickypack.render.EXTENDER_WEIGHT`;
- **users**: profile ``stickypack`` with the operator guide's user-pod extender (scores
  ``[DrainForecast, BuildHeadroom, CacheKeeper, ScaleDownAware]``, ``pods.manage:
  component=singleuser-server``) at the guide's weight, ``121 x 13 / 8 ~ 197``
  (:func:`user_extender_weight`).

A *case* is :func:`stickypack.testing.fidelity.random_case`'s (nodes of several sizes with
taints, bound pods, one pod with tolerations, preferred node affinity, pod-level requests)
made a build or a user case (:func:`random_live_case`): a node the cluster-autoscaler is
removing or has marked a deletion candidate, bound build pods (a hot repo at the load
bound), bound sessions created in waves (so nodes and pods differ in age), and, for a
build, a repo with a history naming some of the case's nodes (stored in the build-history
ConfigMap the extender watches) and often a rendezvous order that ranks some of them.

The reference is the core policy as the simulator runs it (``Profile.feasible`` and
``Profile.scores``) on a table of the same cluster state, with the
:class:`~stickypack.core.SchedulingContext` the extender builds (its configuration's
thresholds, the same history, every node a builder node). The case *agrees* when the real
pick is among the policy's top-scoring nodes (or neither places the pod).

Three things the harness pins so both sides read the same inputs (see
:func:`run_live_cases`): the extenders' decision clock (``Extender.clock``) is frozen for a
batch at ``now`` (creation time of the batch plus ``age_offset_s``: the cluster as it
would be that much later, nodes and pods that much older, so ``BuildSpread``'s settling
and ``DrainForecast``'s session model see ages of minutes or hours); the reference table
adds the nodes in the order of the extender's table rows (``NodeAge`` and
``DrainForecast`` break ties between nodes created in the same second by row, and the
extender's rows are its watch's order, freed rows reused last-freed first); node and pod
creation times are the API server's.

Every disagreement is attributed (:attr:`LiveCase.cause`) by walking from the policy to a
model of the live deployment one difference at a time; the first model whose best nodes
hold the real pick names the cause (:data:`CAUSES`):

1. ``filters``: the live filters (the extender's filters of its configuration, not
   ``DelayForLocality`` unless configured; the extender's load-bound filter, where the
   policy only scores a node over the bound 0 for locality);
2. ``plugins``: only the scorers that run live (kube-scheduler's own and the extender's
   ``score`` list; the default build extender leaves out ``BuildSpread``);
3. ``weights``: the rendered profile's weights for kube-scheduler's plugins and the
   extender's ``weight`` (exact, unrounded extender scores);
4. ``integer``: the extender's 0-10 integer score (``round(10 x total / (100 x sum of
   weights))``), times its weight times 10: the live model;
5. ``stale``: a later pod of a burst, and the live model with the extender blind to the
   burst's earlier pods holds the pick (kube-scheduler counts a pod it binds at once; the
   extender when its watch reports it, or at once where it predicted kube-scheduler's pick:
   builds, unless kube-scheduler's best nodes tie);
6. ``unexplained``: not even that: a bug somewhere between the API server and the
   extender's answer.

:attr:`LiveCase.explained` says whether the live model (or, for ``stale``, its blind
variant) holds the real pick, agreeing cases included.

The live model's best nodes tie when :attr:`LiveCase.live_top` has several: kube-scheduler
then picks one at random.
"""

from __future__ import annotations

import copy
import dataclasses
import random
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from stickypack.core import NodeTable, Pod, SchedulingContext, Taint
from stickypack.core.framework import FilterPlugin, Profile, ScorePlugin
from stickypack.core.history import BuildHistory
from stickypack.core.labels import DELETION_CANDIDATE_TAINT, TO_BE_DELETED_TAINT
from stickypack.core.plugins import BuildBounds, BuildLocality
from stickypack.core.pod import rfc3339_seconds
from stickypack.core.policy import Policy
from stickypack.core.rendezvous import rendezvous_rank
from stickypack.core.resources import PODS, parse_resource_list
from stickypack.testing.controlplane import ControlPlane, ControlPlaneError, SchedulerHandle, pod_manifest
from stickypack.testing.fidelity import (
    CASE_LABEL,
    create_case_node,
    random_case,
    taint_dict,
    wait_scheduler_cache,
)

if TYPE_CHECKING:
    from kubernetes_asyncio.client import ApiClient

    from stickypack.extender.config import ExtenderConfig
    from stickypack.extender.server import ExtenderService, ServiceThread

BUILD_SCHEDULER = "stickypack-builds"
USER_SCHEDULER = "stickypack"
BUILD_LABELS = {"component": "binderhub-build"}
USER_LABELS = {"component": "singleuser-server"}
#: BinderHub's builder DaemonSet pods (the extender's default ``pods.builder_selector``).
BUILDER_LABELS = {"component": "image-builder", "app": "binder"}
#: The operator guide's user-pod extender (``user-extender.yaml``).
USER_EXTENDER_SCORE = ("DrainForecast", "BuildHeadroom", "CacheKeeper", "ScaleDownAware")
#: kube-scheduler v1.37's default score plugins and weights (``getDefaultPlugins``;
#: DynamicResources, weight 2, scores only pods with claims). The live model reads a rendered
#: profile's weights against these.
KUBE_DEFAULT_SCORE_WEIGHTS = {
    "TaintToleration": 3,
    "NodeAffinity": 2,
    "NodeResourcesFit": 1,
    "PodTopologySpread": 2,
    "InterPodAffinity": 2,
    "NodeResourcesBalancedAllocation": 1,
    "ImageLocality": 1,
    "VolumeBinding": 1,
}
#: The kube-scheduler plugins the core models and these cases' pods are scored by (the others
#: skip a bare pod without pod affinity, spread constraints, volumes or claims).
MODELLED_KUBE_SCORERS = ("NodeResourcesFit", "TaintToleration", "NodeAffinity", "InterPodAffinity")
#: What BinderHub gives every build pod with sticky builds off (its default, and what the
#: operator guide leaves it at): a preferred anti-affinity against other build pods.
BINDERHUB_ANTI_AFFINITY = {
    "preferredDuringSchedulingIgnoredDuringExecution": [
        {
            "weight": 100,
            "podAffinityTerm": {
                "labelSelector": {"matchLabels": {"component": "binderhub-build"}},
                "topologyKey": "kubernetes.io/hostname",
            },
        }
    ]
}
KUBE_FILTERS = ("NodeUnschedulable", "NodeResourcesFit", "NodeAffinity", "TaintToleration")
#: Attribution of a disagreement, in the order they are tried (module docstring).
CAUSES = ("filters", "plugins", "weights", "integer", "stale", "unexplained")
MAX_EXTENDER_PRIORITY = 10
#: A node taint's value the autoscaler writes (a Unix time).
_CA_TIME = "1700000000"


def user_extender_weight(policy: Policy, score: Sequence[str] = USER_EXTENDER_SCORE) -> int:
    """The operator guide's weight for the user-pod extender: its scorers' weight sum, put on
    the rendered ``stickypack`` profile's scale (NodeResourcesFit 121 there, the policy's
    weight of it in the user profile here): ``round(121 x 13 / 8) = 197``."""
    from stickypack.render import PACKING_SCORE_WEIGHTS

    profile = policy.profile_for(Pod.from_dict(pod_manifest("probe", labels=USER_LABELS)))
    weights = {s.plugin.name: s.weight for s in profile.scorers}
    total = sum(weights[name] for name in score)
    return round(PACKING_SCORE_WEIGHTS["NodeResourcesFit"] * total / weights["NodeResourcesFit"])


def rendered_score_weights(profile: dict[str, Any]) -> dict[str, int]:
    """Score plugin -> weight of one rendered ``profiles[]`` entry, as kube-scheduler merges
    it with its defaults (:data:`KUBE_DEFAULT_SCORE_WEIGHTS`)."""
    score = (profile.get("plugins") or {}).get("score") or {}
    disabled = {p["name"] for p in score.get("disabled") or ()}
    weights = (
        {} if "*" in disabled else {k: w for k, w in KUBE_DEFAULT_SCORE_WEIGHTS.items() if k not in disabled}
    )
    for p in score.get("enabled") or ():
        weights[p["name"]] = int(p.get("weight") or KUBE_DEFAULT_SCORE_WEIGHTS.get(p["name"], 1))
    return weights


def rendered_fit_strategy(profile: dict[str, Any]) -> dict[str, Any]:
    """The ``scoringStrategy`` of NodeResourcesFit in a rendered profile (LeastAllocated,
    cpu 1 and memory 1, when it sets none, as kube-scheduler's default)."""
    for entry in profile.get("pluginConfig") or ():
        if entry.get("name") == "NodeResourcesFit":
            return dict(entry["args"]["scoringStrategy"])
    return {
        "type": "LeastAllocated",
        "resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}],
    }


# ---- cases -------------------------------------------------------------------------------


@dataclass
class LiveCase:
    """One random case (see the module's notes) and what both sides made of it."""

    index: int
    kind: str  # "build" or "user"
    nodes: list[dict[str, Any]]
    bound: list[dict[str, Any]]
    pod: dict[str, Any]
    #: node name -> creation wave; bound pod name -> wave
    node_waves: dict[str, int] = field(default_factory=dict)
    pod_waves: dict[str, int] = field(default_factory=dict)
    #: builds: whether the repo should rank some of the case's nodes among its top 3
    #: rendezvous nodes, the history's nodes (most recent first), the hot node (if any)
    want_rendezvous: bool = False
    history: list[str] = field(default_factory=list)
    hot: str | None = None
    repo: str | None = None
    #: pods of the case's shape created one after the other (a hot repo's builds, a class's
    #: sessions); this record judges the one at ``position``, the earlier ones placed where
    #: kube-scheduler put them (``after``: their manifests as created, and nodes)
    burst: int = 1
    position: int = 0
    after: list[tuple[dict[str, Any], str]] = field(default_factory=list)
    #: a later pod of a burst: the live model's best were the extender blind to the earlier
    #: pods (kube-scheduler never is: it assumes each pod it binds)
    stale_top: list[str] | None = None
    #: when the history was written (its entries: this, then 0.01 s earlier per rank)
    written: float = 0.0
    #: the extenders' frozen decision clock and the models' ``now`` for this case: its
    #: batch's creation plus the run's age offset (:func:`run_live_cases`)
    decided_at: float = 0.0
    # results
    chosen: str | None = None
    top: list[str] = field(default_factory=list)
    scores: dict[str, int] = field(default_factory=dict)
    live_top: list[str] = field(default_factory=list)
    live_scores: dict[str, float] = field(default_factory=dict)
    exact_top: list[str] = field(default_factory=list)
    #: where the integer scores change the best nodes: what that costs, in the policy's
    #: points (the exact model's best total minus that of the integer model's pick, over
    #: the rendered scale of the policy's weights)
    integer_loss: float = 0.0
    cause: str | None = None
    #: the policy holds the pod back (DelayForLocality: its history node has no room yet)
    waits: bool = False
    #: the policy's score of its best node minus that of the real pick (policy points)
    deficit: int = 0
    #: where no model explains the pick: the extender's answer as kube-scheduler got it
    note: str = ""

    @property
    def agrees(self) -> bool:
        if self.chosen is None:
            return not self.top
        return self.chosen in self.top

    @property
    def explained(self) -> bool:
        """The live model's best nodes (those of its variant blind to a burst's earlier
        pods, if they hold it) hold the real pick: the deployment did what it documents."""
        return _holds(self.live_top, self.chosen) or (
            self.stale_top is not None and _holds(self.stale_top, self.chosen)
        )

    @property
    def live_tie(self) -> bool:
        """The live model's best nodes tie: kube-scheduler picks one of them at random."""
        return len(self.live_top) > 1

    @property
    def integer_changes_pick(self) -> bool:
        """The extender's integer scores change the live deployment's best nodes (the
        exact, unrounded scores would choose others), whatever the real pick."""
        return set(self.exact_top) != set(self.live_top)

    def describe(self) -> str:
        lines = [
            f"case {self.index}{f'.{self.position}' if self.burst > 1 else ''} "
            f"({self.kind}{', repo ' + self.repo if self.repo else ''}): real pick "
            f"{self.chosen}, policy's best {self.top}, live model's best {self.live_top}, cause {self.cause}"
            f"{', deficit ' + str(self.deficit) if self.deficit else ''}"
            f"{' (the policy holds it back: DelayForLocality)' if self.waits else ''}"
        ]
        if self.kind == "build":
            lines.append(f"  history {self.history} hot {self.hot}")
        for n in self.nodes:
            on = [p for p in self.bound if p["spec"]["nodeName"] == n["name"]]
            reqs = [
                ("B " if "binder-repo" in (p["metadata"].get("annotations") or {}) else "")
                + str(p["spec"]["containers"][0]["resources"].get("requests", {}))
                for p in on
            ]
            lines.append(
                f"  node {n['name']} wave {self.node_waves.get(n['name'])} cpu={n['cpu']} "
                f"memory={n['memory']} labels={n['labels']} taints={n['taints']} "
                f"policy={self.scores.get(n['name'])} live={self.live_scores.get(n['name'])} pods={reqs}"
            )
        spec = self.pod["spec"]
        lines.append(
            f"  pod requests={spec['containers'][0]['resources'].get('requests', {})} "
            f"pod-level={spec.get('resources')} tolerations={spec.get('tolerations')} "
            f"affinity={spec.get('affinity')} nodeSelector={spec.get('nodeSelector')}"
        )
        if self.note:
            lines.append(f"  {self.note}")
        return "\n".join(lines)


def _as_build(raw: dict[str, Any], repo: str) -> None:
    """Make ``raw`` a build pod of ``repo``, as BinderHub creates it."""
    raw["metadata"]["labels"] = {**raw["metadata"].get("labels", {}), **BUILD_LABELS}
    raw["metadata"]["annotations"] = {**raw["metadata"].get("annotations", {}), "binder-repo": repo}
    spec = raw["spec"]
    spec["affinity"] = {**spec.get("affinity", {}), "podAntiAffinity": copy.deepcopy(BINDERHUB_ANTI_AFFINITY)}


def random_live_case(rng: random.Random, index: int, kind: str) -> LiveCase:
    """A case of :func:`~stickypack.testing.fidelity.random_case` (drawn from ``rng``) made a
    ``kind`` ("build" or "user") case, the additions drawn from a stream of its own."""
    base = random_case(rng, index, BUILD_SCHEDULER if kind == "build" else USER_SCHEDULER)
    side = random.Random(f"c{index}-live-{kind}")
    case = LiveCase(index, kind, base.nodes, base.bound, base.pod)
    names = [n["name"] for n in case.nodes]
    if side.random() < 0.3:  # the autoscaler: a node it is removing, or a deletion candidate
        node = side.choice(case.nodes)
        if side.random() < 0.5:
            node["taints"].append(f"{TO_BE_DELETED_TAINT}={_CA_TIME}:NoSchedule")
        else:
            node["taints"].append(f"{DELETION_CANDIDATE_TAINT}={_CA_TIME}:PreferNoSchedule")
    spec = case.pod["spec"]
    if side.random() < 0.15:  # tolerates everything: only the extender keeps it off a node going away
        spec["tolerations"] = [*spec.get("tolerations", []), {"operator": "Exists"}]
    for raw in case.bound:
        if side.random() < 0.25:
            _as_build(raw, f"https://github.com/other/r{side.randrange(5)}")
        elif side.random() < 0.5:
            raw["metadata"]["labels"] = {**raw["metadata"].get("labels", {}), **USER_LABELS}
    if side.random() < 0.25:
        case.burst = side.randint(2, 4)
    waves = 3
    case.node_waves = {n: side.randrange(waves) for n in names}
    case.pod_waves = {
        b["metadata"]["name"]: side.randint(case.node_waves[b["spec"]["nodeName"]], waves - 1)
        for b in case.bound
    }
    if kind == "build":
        _as_build(case.pod, "")  # the repo is chosen with the batch
        case.want_rendezvous = side.random() < 0.6
        if side.random() < 0.75:
            k = side.choice([1, 1, 2, 2, 3, 4])
            case.history = side.sample(names, min(k, len(names)))
            if side.random() < 0.3:  # the history nodes are full: no room for the build there
                for full in case.history:
                    _fill_cpu(case, full, side.randint(case.node_waves[full], waves - 1))
        if side.random() < 0.35:  # a hot repo: its builds fill a node to the load bound
            case.hot = case.history[0] if case.history and side.random() < 0.7 else side.choice(names)
            for j in range(side.randint(2, 4)):
                raw = pod_manifest(f"c{index}-h{j}", cpu=None, memory=None)
                raw["spec"]["nodeName"] = case.hot
                _as_build(raw, "")  # the repo is the case's, chosen with the batch
                case.bound.append(raw)
                case.pod_waves[raw["metadata"]["name"]] = side.randint(case.node_waves[case.hot], waves - 1)
    else:
        case.pod["metadata"]["labels"] = {**case.pod["metadata"].get("labels", {}), **USER_LABELS}
    return case


def _fill_cpu(case: LiveCase, node: str, wave: int) -> None:
    """Bind a pod to ``node`` that requests the rest of its cpu (none if none is left)."""
    spec = next(n for n in case.nodes if n["name"] == node)
    used = sum(Pod.from_dict(b).requests.get("cpu", 0) for b in case.bound if b["spec"]["nodeName"] == node)
    free = parse_resource_list({"cpu": spec["cpu"]})["cpu"] - used
    if free <= 0:
        return
    raw = pod_manifest(f"{node}-full", cpu=f"{free}m", memory=None)
    raw["spec"]["nodeName"] = node
    case.bound.append(raw)
    case.pod_waves[raw["metadata"]["name"]] = wave


def add_builders(group: Sequence[LiveCase], rng: random.Random, share: float = 0.75) -> list[str]:
    """Run BinderHub's builder pods (no requests) on about ``share`` of the batch's nodes, at
    least one per case; returns those nodes (the rendezvous candidates)."""
    out = []
    for case in group:
        names = [n["name"] for n in case.nodes]
        chosen = [n for n in names if rng.random() < share] or [rng.choice(names)]
        for node in chosen:
            raw = pod_manifest(f"builder-{node}", cpu=None, memory=None, labels=BUILDER_LABELS)
            raw["spec"]["nodeName"] = node
            case.bound.append(raw)
            case.pod_waves[raw["metadata"]["name"]] = case.node_waves[node]
        out += chosen
    return sorted(out)


def choose_repos(group: Sequence[LiveCase], builders: Sequence[str] | None = None) -> None:
    """Give each build case of a batch its repo: one whose rendezvous top 3 over the batch's
    builder nodes (``builders``; None: every node) holds one of the case's nodes, if it wants
    that, else any; the case's hot builds build it too."""
    everyone = list(builders) if builders else [n["name"] for c in group for n in c.nodes]
    for case in group:
        if case.kind != "build":
            continue
        own = {n["name"] for n in case.nodes}
        for t in range(2000):
            repo = f"https://github.com/fidelity/c{case.index}-r{t}"
            if not case.want_rendezvous or own & set(rendezvous_rank(everyone, repo)[:3]):
                break
        case.repo = repo
        case.pod["metadata"]["annotations"] = {
            **case.pod["metadata"].get("annotations", {}),
            "binder-repo": repo,
        }
        for raw in case.bound:
            if (raw["metadata"].get("annotations") or {}).get("binder-repo") == "":
                raw["metadata"]["annotations"]["binder-repo"] = repo


# ---- the live deployment -----------------------------------------------------------------


@dataclass
class LiveDeployment:
    """Both extenders (threads serving HTTP, watching the API server) and both
    kube-schedulers, as :func:`start_live` starts them."""

    policy: Policy
    builds: ServiceThread
    users: ServiceThread
    build_config: dict[str, Any]
    user_config: dict[str, Any]
    handles: list[SchedulerHandle]
    history_name: str

    def extender(self, kind: str) -> ServiceThread:
        return self.builds if kind == "build" else self.users

    def scheduler_config(self, kind: str) -> dict[str, Any]:
        return self.build_config if kind == "build" else self.user_config

    def stop(self, cp: ControlPlane) -> None:
        for handle in self.handles:
            cp.stop_scheduler(handle)
        for ext in (self.builds, self.users):
            ext.stop()


def start_live(
    cp: ControlPlane,
    history_name: str,
    *,
    build_extender: dict[str, Any] | None = None,
    user_extender: dict[str, Any] | None = None,
    build_weight: int | None = None,
    user_weight: int | None = None,
    user_kube_weights: dict[str, int] | None = None,
    build_kube_weights: dict[str, int] | None = None,
) -> LiveDeployment:
    """Start the two extenders (configurations as documented, updated by ``build_extender``
    and ``user_extender``; the build history in ConfigMap ``<history_name>-0`` of
    ``default``) and the two kube-schedulers with the rendered profiles and extender entries
    (``build_weight``: :data:`~stickypack.render.EXTENDER_WEIGHT`, as rendered by default;
    ``user_weight``: :func:`user_extender_weight`). ``user_kube_weights``: score plugin ->
    weight to render into the ``stickypack`` profile instead (a what-if: the rendered profile
    keeps z2jh's weights, :func:`policy_balanced_weights` gives the policy's balance);
    ``build_kube_weights`` likewise for the ``stickypack-builds`` profile."""
    from stickypack.extender.config import config_from_dict
    from stickypack.extender.server import ServiceThread
    from stickypack.render import EXTENDER_WEIGHT, extender_entry, scheduler_config

    policy = _policy()
    builds_cfg = config_from_dict(
        {
            "history": {"name": history_name, "namespace": "default", "flush_interval_s": 0.05},
            **(build_extender or {}),
        }
    )
    users_cfg = config_from_dict(
        {
            "profile": USER_SCHEDULER,
            "score": list(USER_EXTENDER_SCORE),
            "pods": {"manage": USER_LABELS},
            "history": {"store": "memory"},  # the user profile's plugins read no history
            **(user_extender or {}),
        }
    )
    builds = ServiceThread(builds_cfg, cp.client_configuration()).start()
    try:
        users = ServiceThread(users_cfg, cp.client_configuration()).start()
    except BaseException:
        builds.stop()
        raise
    b_weight = EXTENDER_WEIGHT if build_weight is None else build_weight
    u_weight = user_extender_weight(policy, users_cfg.score) if user_weight is None else user_weight
    build_config = scheduler_config([BUILD_SCHEDULER], extender=extender_entry(builds.url, weight=b_weight))
    user_config = scheduler_config([USER_SCHEDULER], extender=extender_entry(users.url, weight=u_weight))
    if user_kube_weights:
        _reweigh(user_config["profiles"][0], user_kube_weights)
    if build_kube_weights:
        _reweigh(build_config["profiles"][0], build_kube_weights)
    handles = []
    try:
        handles.append(cp.start_scheduler(build_config))
        handles.append(cp.start_scheduler(user_config))
    except BaseException:
        for h in handles:
            cp.stop_scheduler(h)
        builds.stop()
        users.stop()
        raise
    return LiveDeployment(policy, builds, users, build_config, user_config, handles, history_name)


def policy_balanced_weights(policy: Policy) -> dict[str, int]:
    """Weights for kube-scheduler's plugins of the user profile in the policy's proportions,
    on the rendered scale (NodeResourcesFit 121): TaintToleration 91, NodeAffinity 60 (60.5 rounded
    half to even)."""
    from stickypack.render import PACKING_SCORE_WEIGHTS

    profile = policy.profile_for(Pod.from_dict(pod_manifest("probe", labels=USER_LABELS)))
    weights = {s.plugin.name: s.weight for s in profile.scorers}
    scale = PACKING_SCORE_WEIGHTS["NodeResourcesFit"] / weights["NodeResourcesFit"]
    return {n: round(weights[n] * scale) for n in MODELLED_KUBE_SCORERS if n in weights}


def _reweigh(profile: dict[str, Any], weights: dict[str, int]) -> None:
    """Give the score plugins of a rendered profile entry these weights."""
    score = profile.setdefault("plugins", {}).setdefault("score", {})
    disabled = score.setdefault("disabled", [])
    enabled = [p for p in score.get("enabled", []) if p["name"] not in weights]
    for name, weight in weights.items():
        if all(p["name"] != name for p in disabled):
            disabled.append({"name": name})
        enabled.append({"name": name, "weight": weight})
    score["enabled"] = enabled


def _policy() -> Policy:
    from stickypack.policies import load_builtin

    return load_builtin("stickypack")


def _service(ext: ServiceThread) -> ExtenderService:
    """The extender service of a started extender thread."""
    assert ext.service is not None, "the extender thread has started"
    return ext.service


def _set_clock(ext: ServiceThread, clock: Callable[[], float]) -> None:
    """Give a started extender thread's extender ``clock``, on the thread's loop."""
    extender = _service(ext).extender

    def set_clock() -> None:
        extender.clock = clock

    ext.call(set_clock)


def _table_state(ext: ServiceThread) -> tuple[int, int]:
    service = _service(ext)

    def read() -> tuple[int, int]:
        table = service.cache.table
        if not len(table.index):
            return 0, 0
        return len(table.index), int(table.requested[:, table.rindex[PODS]].sum())

    return ext.call(read)


def _rows(ext: ServiceThread) -> dict[str, int]:
    """Node name -> row of the extender's table."""
    service = _service(ext)
    return dict(ext.call(lambda: dict(service.cache.table.index)))


def _wait(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise ControlPlaneError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.05)


def _write_history(cp: ControlPlane, live: LiveDeployment, repos: dict[str, dict[str, float]]) -> None:
    """Add ``repos`` to the stored build history, as another writer would (the extender's
    own store class, conflicts retried)."""
    from stickypack.kube.history import ConfigMapHistoryStore, Conflict, HistoryDoc

    async def write(api: ApiClient) -> None:
        store = ConfigMapHistoryStore(api, "default", live.history_name)
        for _ in range(20):
            doc, version = await store.read("0")
            try:
                await store.write("0", HistoryDoc({**doc.repos, **repos}, dict(doc.forgotten)), version)
                return
            except Conflict:
                continue
        raise ControlPlaneError("could not write the build history (conflicts)")

    cp.call(write)


def _settle(cp: ControlPlane, names: Sequence[str], timeout: float) -> dict[str, str | None]:
    """Wait until each named pod is bound or marked Unschedulable; ``{pod: node or None}``."""
    deadline = time.monotonic() + timeout
    while True:
        pods = {p["metadata"]["name"]: p for p in cp.pods("default")}
        out: dict[str, str | None] = {}
        for n in names:
            pod = pods.get(n) or {}
            node = (pod.get("spec") or {}).get("nodeName")
            conds = {c.get("type"): c for c in (pod.get("status") or {}).get("conditions") or ()}
            sched = conds.get("PodScheduled") or {}
            if node:
                out[n] = node
            elif sched.get("status") == "False" and sched.get("reason") == "Unschedulable":
                out[n] = None
        if len(out) == len(names) or time.monotonic() > deadline:
            return out
        time.sleep(0.1)


def run_live_cases(
    cp: ControlPlane,
    live: LiveDeployment,
    cases: int,
    seed: int,
    *,
    batch: int = 24,
    build_share: float = 0.5,
    age_offset_s: float | Sequence[float] = 1800.0,
    wave_gap_s: float = 1.1,
    settle_timeout_s: float = 30.0,
    on_case: Callable[[LiveCase], None] | None = None,
) -> list[LiveCase]:
    """Run ``cases`` random cases (a share ``build_share`` of them build cases) against
    ``live`` on ``cp`` (a cluster with no nodes or pods), ``batch`` at a time, and judge
    each (:attr:`LiveCase.agrees`, :attr:`LiveCase.cause`). Every other batch, the first
    included, runs builder pods on most nodes (:func:`add_builders`; the others none).

    Per batch: the nodes and bound pods are created in three waves ``wave_gap_s`` apart;
    the build history is written; once both kube-schedulers' caches and both extenders'
    tables hold exactly the batch, the extenders' decision clock is frozen at ``now``,
    creation plus ``age_offset_s`` (a sequence: one per batch, in turn), and the pods are
    created. ``ControlPlaneError`` when a cache does not settle in ``settle_timeout_s``."""
    offsets = [age_offset_s] if isinstance(age_offset_s, int | float) else list(age_offset_s)
    done: list[LiveCase] = []
    for b, (group, builders) in enumerate(live_batches(cases, seed, batch, build_share)):
        offset = float(offsets[b % len(offsets)])
        done.extend(_run_batch(cp, live, group, builders, offset, wave_gap_s, settle_timeout_s, on_case))
    return done


def live_batches(
    cases: int, seed: int, batch: int = 24, build_share: float = 0.5
) -> Iterator[tuple[list[LiveCase], list[str] | None]]:
    """The batches :func:`run_live_cases` runs: each batch's cases (:func:`random_live_case`,
    a share ``build_share`` of them build cases, their repos chosen by
    :func:`choose_repos`) and its builder nodes (:func:`add_builders` on every other batch,
    the first included; None on the others)."""
    rng = random.Random(seed)
    kinds = random.Random(f"{seed}-kinds")
    for b, start in enumerate(range(0, cases, batch)):
        group = [
            random_live_case(rng, i, "build" if kinds.random() < build_share else "user")
            for i in range(start, min(start + batch, cases))
        ]
        builders = add_builders(group, random.Random(f"{seed}-{b}-builders")) if b % 2 == 0 else None
        choose_repos(group, builders)
        yield group, builders


def _run_batch(
    cp: ControlPlane,
    live: LiveDeployment,
    group: list[LiveCase],
    builders: list[str] | None,
    offset_s: float,
    wave_gap_s: float,
    settle_timeout_s: float,
    on_case: Callable[[LiveCase], None] | None,
) -> list[LiveCase]:
    exts = (live.builds, live.users)
    wait_scheduler_cache(cp, live.handles, 0, 0, settle_timeout_s)
    _wait(lambda: all(_table_state(e) == (0, 0) for e in exts), settle_timeout_s, "empty extender tables")
    try:
        waves = 1 + max(w for c in group for w in c.node_waves.values())
        for wave in range(waves):
            for case in group:
                for n in case.nodes:
                    if case.node_waves[n["name"]] == wave:
                        create_case_node(cp, n)
            pods = [b for c in group for b in c.bound if c.pod_waves[b["metadata"]["name"]] == wave]
            if pods:
                cp.create_pods(pods)
            if wave < waves - 1:
                time.sleep(wave_gap_s)
        written = time.time()
        for c in group:
            c.written = written
        history = {c.repo: _entries(c) for c in group if c.repo and c.history}
        if history:
            _write_history(cp, live, history)
        nodes = sum(len(c.nodes) for c in group)
        bound = sum(len(c.bound) for c in group)
        wait_scheduler_cache(cp, live.handles, nodes, bound, settle_timeout_s)
        _wait(
            lambda: all(_table_state(e) == (nodes, bound) for e in exts), settle_timeout_s, "extender tables"
        )

        def history_seen() -> bool:
            recorder = _service(live.builds).recorder
            assert recorder is not None

            def read() -> bool:
                h = recorder.history
                keep = live.builds.config.history.max_nodes_per_repo
                return all(h.nodes_for(r, written) == list(n)[:keep] for r, n in history.items())

            return bool(live.builds.call(read))

        _wait(history_seen, settle_timeout_s, "the build history in the extender")
        now = time.time() + offset_s
        for ext in exts:
            _set_clock(ext, lambda: now)
        stored_nodes = {n["metadata"]["name"]: n for n in cp.nodes()}
        stored_pods = {p["metadata"]["name"]: p for p in cp.pods("default")}
        rows = {kind: _rows(live.extender(kind)) for kind in ("build", "user")}
        created: dict[str, dict[str, Any]] = {}
        for position in range(max(c.burst for c in group)):  # a burst's pods in turn
            pods = [_burst_pod(c, position) for c in group if position < c.burst]
            created.update((p["metadata"]["name"], p) for p in cp.create_pods(pods))
        placed = _settle(cp, list(created), settle_timeout_s * 2)
        tables = {
            kind: _reference_table(group, stored_nodes, stored_pods, rows[kind]) for kind in ("build", "user")
        }
        return _judge_batch(group, created, placed, tables, live, now, builders, on_case)
    finally:
        for ext in exts:
            _set_clock(ext, time.time)
        cp.delete_all_pods()
        cp.delete_all_nodes()


def _judge_batch(
    group: Sequence[LiveCase],
    created: dict[str, dict[str, Any]],
    placed: dict[str, str | None],
    tables: dict[str, NodeTable],
    live: LiveDeployment,
    now: float,
    builders: list[str] | None,
    on_case: Callable[[LiveCase], None] | None = None,
) -> list[LiveCase]:
    """One record per pod of each case's burst (``created``: pod name -> as created;
    ``placed``: pod name -> node, None or missing when unplaced; ``tables``: kind -> the
    reference table), each judged on its kind's table with the burst's earlier placed pods
    added, and the table without them as the extender's blind view."""
    out = []
    for case in group:
        after: list[tuple[dict[str, Any], str]] = []
        for position in range(case.burst):
            name = _burst_pod(case, position)["metadata"]["name"]
            one = dataclasses.replace(case, position=position, after=list(after), decided_at=now)
            one.chosen = placed.get(name)
            table = tables[case.kind]
            if after:
                table = copy.deepcopy(table)
                for raw, node in after:
                    table.add_pod(table.slot(node), Pod.from_dict(raw))
            judge(one, created[name], table, live, now, builders, tables[case.kind] if after else None)
            out.append(one)
            if on_case is not None:
                on_case(one)
            if one.chosen is not None:
                after.append((created[name], one.chosen))
    return out


def _burst_pod(case: LiveCase, position: int) -> dict[str, Any]:
    """The case's pod at ``position`` of its burst (the first keeps the case's pod's name)."""
    raw = copy.deepcopy(case.pod)
    if position:
        raw["metadata"]["name"] = f"{raw['metadata']['name']}{position}"
    return raw


def _reference_table(
    group: Sequence[LiveCase],
    stored_nodes: dict[str, dict[str, Any]],
    stored_pods: dict[str, dict[str, Any]],
    rows: dict[str, int],
) -> NodeTable:
    """The batch's nodes (from the cases: sizes, labels, taints; creation times from the API
    server) added in the order of the extender's rows, and their bound pods as the API
    server stored them (creation times)."""
    table = NodeTable()
    spec = {n["name"]: n for c in group for n in c.nodes}
    for name in sorted(spec, key=lambda n: rows[n]):
        n = spec[name]
        alloc = parse_resource_list(
            {"cpu": n["cpu"], "memory": n["memory"], "pods": "110", "ephemeral-storage": "100Gi"}
        )
        labels = {
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            **n["labels"],
        }
        taints = [Taint.from_dict(taint_dict(t)) for t in n["taints"]]
        created = rfc3339_seconds(stored_nodes[name]["metadata"]["creationTimestamp"])
        table.upsert_node(name, alloc, labels=labels, taints=taints, created=created)
    for raw in (b for c in group for b in c.bound):
        stored = stored_pods[raw["metadata"]["name"]]
        table.add_pod(table.slot(raw["spec"]["nodeName"]), Pod.from_dict(stored))
    return table


# ---- judging -------------------------------------------------------------------------------


def context_for(
    config: ExtenderConfig, now: float, history: BuildHistory | None, builders: list[str] | None = None
) -> SchedulingContext:
    """The :class:`SchedulingContext` an extender of ``config`` builds at ``now``
    (``builders``: the nodes running a builder pod, sorted; None: no builder pod runs, every
    node may build)."""
    c = config.cluster
    return SchedulingContext(
        now=now,
        history=history,
        builder_nodes=builders,
        utilization_threshold=c.utilization_threshold,
        gpu_utilization_threshold=c.gpu_utilization_threshold,
        gpu_labels=tuple(c.gpu_labels),
        ignore_daemonsets_utilization=c.ignore_daemonsets_utilization,
        ignore_mirror_pods_utilization=c.ignore_mirror_pods_utilization,
        node_groups=None,
        dra=False,
    )


def _entries(case: LiveCase) -> dict[str, float]:
    """The case's history entries as written: node -> time, most recent first."""
    return {node: case.written - 0.01 * r for r, node in enumerate(case.history)}


def _history(config: ExtenderConfig, case: LiveCase) -> BuildHistory:
    """The build history an extender of ``config`` reads for the case's repo."""
    h = config.history
    hist = BuildHistory(h.ttl_s, h.max_nodes_per_repo, h.max_repos)
    if case.repo and case.history:
        hist.merge({case.repo: _entries(case)})
    return hist


@dataclass
class _Model:
    """One step from the policy to the live deployment: filters, scorers and their weights."""

    filters: list[FilterPlugin]
    load_bound: BuildBounds | None
    kube: list[tuple[ScorePlugin, float]]  # added as weight * score
    ext: list[tuple[ScorePlugin, int]]  # the extender's plugins, at their policy weights
    ext_weight: float = 0.0
    integer: bool = False

    def run(
        self, pod: Pod, table: NodeTable, ctx: SchedulingContext, ext_table: NodeTable | None = None
    ) -> tuple[list[str], dict[str, float]]:
        """The best nodes (names) and every candidate's total. ``ext_table``: what the
        extender sees, when it is not ``table`` (same rows)."""
        ctx = dataclasses.replace(ctx, cache={})
        seen = table if ext_table is None else ext_table
        idx = table.active_indices()
        for f in self.filters:
            if idx.size == 0:
                break
            idx = idx[f.filter(pod, table if f.name in KUBE_FILTERS else seen, idx, ctx)]
        if self.load_bound is not None and idx.size:
            over = seen.builds[idx] + 1 > self.load_bound.load_cap(seen)
            if over.any() and not over.all():
                idx = idx[~over]
        names = table.node_names(idx)
        if idx.size <= 1:
            return names, dict.fromkeys(names, 0.0)
        total = np.zeros(idx.size, dtype=np.float64)
        for plugin, w in self.kube:
            if w and not plugin.skip(pod):
                total += w * plugin.score(pod, table, idx, ctx)
        if self.ext:
            raw = np.zeros(idx.size, dtype=np.int64)
            for plugin, w in self.ext:
                if w and not plugin.skip(pod):
                    raw += w * plugin.score(pod, seen, idx, ctx)
            denom = max(100 * sum(w for _, w in self.ext), 1)
            ext: np.ndarray = (
                np.clip((raw * MAX_EXTENDER_PRIORITY + denom // 2) // denom, 0, MAX_EXTENDER_PRIORITY)
                if self.integer
                else raw * MAX_EXTENDER_PRIORITY / denom
            )
            total += ext * self.ext_weight * (100 // MAX_EXTENDER_PRIORITY)
        best = total.max()
        scores = dict(zip(names, total.tolist(), strict=True))
        return [n for n, t in scores.items() if t == best], scores


def _models(
    profile: Profile, config: ExtenderConfig, rendered: dict[str, Any], ext_weight: int, pod: Pod
) -> list[_Model]:
    """The models 1-4 of the module's notes, from the policy's ``profile`` toward the live
    deployment (extender ``config``, rendered kube-scheduler profile ``rendered``)."""
    filters = {f.name: f for f in profile.filters}
    scorers = {s.plugin.name: s for s in profile.scorers}
    locality = next((s.plugin for s in profile.scorers if isinstance(s.plugin, BuildLocality)), None)
    bounds = locality.bounds if locality is not None else BuildBounds()
    live_filters = [filters[n] for n in KUBE_FILTERS if n in filters] + [filters[n] for n in config.filters]
    bound = (
        BuildBounds(bounds.load_bound, bounds.min_load_cap)
        if config.load_bound and pod.build_repo is not None
        else None
    )
    everything = [(s.plugin, float(s.weight)) for s in profile.scorers]
    weights = rendered_score_weights(rendered)
    kube_names = [n for n in MODELLED_KUBE_SCORERS if weights.get(n)]
    # kube-scheduler's own plugins the policy's profile does not have, as the core models them
    kube_only = {n: _kube_plugin(n) for n in kube_names if n not in scorers}
    plugin = {**{n: s.plugin for n, s in scorers.items()}, **kube_only}
    ext = [(scorers[n].plugin, scorers[n].weight) for n in config.score]
    run_live = set(kube_names) | set(config.score)
    live_scorers = [(p, w) for p, w in everything if p.name in run_live]
    live_scorers += [(p, float(weights[n])) for n, p in kube_only.items()]
    kube_live = [(plugin[n], float(weights[n])) for n in kube_names]
    return [
        _Model(live_filters, bound, everything, []),
        _Model(live_filters, bound, live_scorers, []),
        _Model(live_filters, bound, kube_live, ext, float(ext_weight)),
        _Model(live_filters, bound, kube_live, ext, float(ext_weight), integer=True),
    ]


def weights_scale(profile: Profile, rendered: dict[str, Any]) -> float:
    """How much larger the rendered profile's weights are than the policy's (by
    NodeResourcesFit: 1 for builds, 121 / 8 for user pods)."""
    policy = next((s.weight for s in profile.scorers if s.plugin.name == "NodeResourcesFit"), 0)
    return rendered_score_weights(rendered).get("NodeResourcesFit", 1) / policy if policy else 1.0


def _kube_plugin(name: str) -> ScorePlugin:
    """kube-scheduler's score plugin ``name`` as the core models it (its default args)."""
    from stickypack.core.policy import BUILTIN_PLUGINS

    return BUILTIN_PLUGINS.scorers[name]()


def judge(
    case: LiveCase,
    created: dict[str, Any],
    table: NodeTable,
    live: LiveDeployment,
    now: float,
    builders: list[str] | None = None,
    stale: NodeTable | None = None,
) -> None:
    """Score ``case`` by the policy (``case.top``, ``case.scores``) and by the models toward
    the live deployment (``case.live_top``, ``case.exact_top``), and attribute a
    disagreement (``case.cause``, ``case.deficit``)."""
    ext = live.extender(case.kind)
    config = ext.config
    pod = Pod.from_dict(created)
    profile = live.policy.profile_for(pod)
    ctx = context_for(config, now, _history(config, case), builders)
    idx = profile.feasible(pod, table, dataclasses.replace(ctx, cache={}))
    if idx.size == 0:
        case.top, case.scores = [], {}
        others = dataclasses.replace(
            profile, filters=[f for f in profile.filters if f.name != "DelayForLocality"]
        )
        case.waits = others.feasible(pod, table, dataclasses.replace(ctx, cache={})).size > 0
    elif idx.size == 1:
        case.top = table.node_names(idx)
        case.scores = dict.fromkeys(case.top, 0)
    else:
        totals = profile.scores(pod, table, idx, dataclasses.replace(ctx, cache={}))
        case.scores = dict(zip(table.node_names(idx), (int(t) for t in totals), strict=True))
        case.top = table.node_names(idx[totals == totals.max()])
    rendered = live.scheduler_config(case.kind)["profiles"][0]
    _check_fit_strategy(profile, rendered)
    weight = int(live.scheduler_config(case.kind)["extenders"][0]["weight"])
    models = _models(profile, config, rendered, weight, pod)
    results = [m.run(pod, table, ctx) for m in models]
    case.exact_top, exact = results[2]
    if set(case.exact_top) != set(results[3][0]):
        scale = weights_scale(profile, rendered)
        case.integer_loss = (max(exact.values()) - max(exact[n] for n in results[3][0])) / scale
    case.live_top, case.live_scores = results[3]
    if stale is not None:
        case.stale_top = models[3].run(pod, table, ctx, ext_table=stale)[0]
    if case.agrees:
        return
    if case.chosen is not None and case.top and case.chosen in case.scores:
        case.deficit = max(case.scores.values()) - case.scores[case.chosen]
    tops = [top for top, _ in results] + [case.stale_top or []]
    case.cause = next(
        (c for c, top in zip(CAUSES, tops, strict=False) if _holds(top, case.chosen)), "unexplained"
    )


def _holds(top: list[str], chosen: str | None) -> bool:
    """Whether best nodes ``top`` hold the pick ``chosen`` (None: no node, so none)."""
    return chosen in top if chosen is not None else not top


def _check_fit_strategy(profile: Profile, rendered: dict[str, Any]) -> None:
    """The rendered NodeResourcesFit scoring strategy is the policy profile's (a rendering
    mistake the models could not see otherwise)."""
    fit = next((s.plugin for s in profile.scorers if s.plugin.name == "NodeResourcesFit"), None)
    if fit is None:
        return
    strategy = rendered_fit_strategy(rendered)
    described = fit.describe().get("args", {})
    resources = {r["name"]: int(r["weight"]) for r in strategy.get("resources") or ()}
    if strategy.get("type") != described.get("strategy") or resources != dict(
        described.get("resources") or {}
    ):
        raise AssertionError(f"rendered NodeResourcesFit {strategy} is not the policy's {described}")


# ---- summaries ---------------------------------------------------------------------------


def agreement(cases: Sequence[LiveCase]) -> float:
    return float(np.mean([c.agrees for c in cases])) if cases else 0.0


def summary(cases: Sequence[LiveCase]) -> dict[str, Any]:
    """Agreement per kind, disagreements per cause, ties, and how often and by how much the
    extender's integer scores change the live deployment's best nodes."""
    out: dict[str, Any] = {}
    for kind in ("build", "user"):
        of = [c for c in cases if c.kind == kind]
        bad = [c for c in of if not c.agrees]
        changed = [c for c in of if c.integer_changes_pick]
        out[kind] = {
            "cases": len(of),
            "agree": len(of) - len(bad),
            "causes": {
                cause: sum(c.cause == cause for c in bad)
                for cause in CAUSES
                if any(c.cause == cause for c in bad)
            },
            "unexplained": sum(not c.explained for c in of),
            "live_ties": sum(c.live_tie for c in of),
            "policy_waits": sum(c.waits for c in of),
            "integer_changes_pick": len(changed),
            "integer_losses": sorted(round(c.integer_loss, 1) for c in changed),
            "burst_later": sum(c.position > 0 for c in of),
            "stale_view_changes_pick": sum(
                c.stale_top is not None and set(c.stale_top) != set(c.live_top) for c in of
            ),
            "deficits": sorted(c.deficit for c in bad),
        }
    return out


__all__ = [
    "BUILD_SCHEDULER",
    "CASE_LABEL",
    "CAUSES",
    "USER_SCHEDULER",
    "LiveCase",
    "LiveDeployment",
    "agreement",
    "judge",
    "random_live_case",
    "run_live_cases",
    "start_live",
    "summary",
    "user_extender_weight",
]
