"""The extender's decisions: ``filter`` and ``prioritize`` over the live node table.

Wire format (``k8s.io/kube-scheduler/extender/v1``, JSON keys are the Go field names):

- request ``ExtenderArgs``: ``{"Pod": <v1.Pod>, "Nodes": <v1.NodeList>|null, "NodeNames":
  [...]|null}``; with ``nodeCacheCapable: true`` only ``NodeNames`` is set, else only
  ``Nodes``;
- filter reply ``ExtenderFilterResult``: ``{"Nodes": null, "NodeNames": [...],
  "FailedNodes": {...}, "FailedAndUnresolvableNodes": {...}, "Error": ""}``. ``NodeNames``
  is always a list: kube-scheduler reads ``null`` as "no node passed". A request that came
  with ``Nodes`` gets the passing nodes in ``Nodes`` too, as the objects it sent: without
  ``nodeCacheCapable`` kube-scheduler reads only that field;
- prioritize reply ``HostPriorityList``: ``[{"Host": "n1", "Score": 7}, ...]``, Score 0..10
  (``MaxExtenderPriority``); kube-scheduler adds ``Score * weight * 10``.

A request the extender cannot read raises :class:`BadRequest` (HTTP 400). Everything here
is synchronous and pure apart from the cache it reads; the HTTP layer is in
:mod:`stickypack.extender.app`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import compress
from operator import getitem
from typing import Any, Self, overload

import numpy as np

from stickypack.core.explain import DEFAULT_GPU_LABELS
from stickypack.core.framework import (
    FilterPlugin,
    Profile,
    SchedulingContext,
    WeightedScorer,
    check_mask,
    check_scores,
)
from stickypack.core.history import BuildHistory
from stickypack.core.nodegroups import NodeGroups
from stickypack.core.plugins import BuildBounds, BuildLocality
from stickypack.core.plugins.kubescheduler import KUBE_SCHEDULER_SCORERS
from stickypack.core.pod import Pod, PodSpecError
from stickypack.core.policy import Policy, PolicyError
from stickypack.kube.cache import DEFAULT_BUILD_SELECTOR, ClusterCache, matches

MAX_EXTENDER_PRIORITY = 10
#: Failure messages, by filter plugin name.
FILTER_REASONS = {
    "ScaleDownAware": "node is being removed by the cluster-autoscaler (ToBeDeletedByClusterAutoscaler)",
    "NodeUnschedulable": "node is unschedulable",
    "NodeResourcesFit": "insufficient resources (stickypack's view)",
    "TaintToleration": "node has a taint the pod does not tolerate",
    "NodeAffinity": "node does not match the pod's node selector or required affinity",
    "NodeReady": "node is not Ready",
    "DelayForLocality": "the build waits for room on a node that built its repo (delay scheduling)",
}
#: Score plugins kube-scheduler runs itself (stickypack's own ones it does not know).
KUBE_SCORERS = KUBE_SCHEDULER_SCORERS
#: Filters whose failure preemption cannot resolve (kube-scheduler's preemption would evict
#: pods there for nothing). ``DelayForLocality`` fails only nodes other than the repo's full
#: history nodes (those never reach the extender), and evictions there end no wait; the load
#: bound counts builds, which evicting lower-priority pods does not lower either.
UNRESOLVABLE = {
    "ScaleDownAware",
    "NodeUnschedulable",
    "TaintToleration",
    "NodeAffinity",
    "NodeReady",
    "DelayForLocality",
}


class BadRequest(ValueError):
    """A request the extender cannot answer; the message says why (HTTP 400)."""


@dataclass(slots=True)
class Decision:
    """What one request did, for metrics."""

    verb: str
    managed: bool
    #: The pod was counted on a node before the watch reported its binding.
    assumed: bool = False
    #: Known nodes the filter removed (its plugins, the load bound).
    filtered: int = 0


def select_profile(policy: Policy, name: str | None) -> Profile:
    if name is None:
        return policy.profiles[0]
    for profile in policy.profiles:
        if profile.name == name:
            return profile
    names = ", ".join(p.name for p in policy.profiles)
    raise PolicyError(f"policy {policy.name!r} has no profile {name!r}; profiles: {names}")


class Extender:
    """Filter and prioritize with ``profile`` over ``cache.table``.

    ``filter_names``/``score_names`` pick the profile's plugins the extender runs (by plugin
    name; the rest is what kube-scheduler runs itself). ``history`` is a callable returning
    the current :class:`BuildHistory` (it is replaced when the store changes).
    ``utilization_threshold``, ``gpu_utilization_threshold``, ``gpu_labels``,
    ``ignore_daemonsets_utilization``, ``ignore_mirror_pods_utilization``,
    ``node_group_labels``, ``node_group_min_sizes``, ``dra``: the autoscaler's settings the
    scale-down scorers read (:class:`SchedulingContext`; ``node_group_*`` its
    :class:`~stickypack.core.nodegroups.NodeGroups`, none without minimum sizes; with
    ``dra`` the nodes' DRA readings the cache keeps, ``ClusterCache(dra=True)``, brought up
    to date before each decision). ``dra`` may be a callable, asked at each decision: the
    service's says whether the DRA objects are listed and watched now (the nodes are weighed
    by cpu and memory while they cannot be).
    """

    def __init__(
        self,
        cache: ClusterCache,
        profile: Profile,
        *,
        filter_names: Sequence[str] = ("ScaleDownAware",),
        score_names: Sequence[str] = ("BuildLocality", "NodeAge", "ScaleDownAware"),
        manage: Mapping[str, str] | None = None,
        history: Callable[[], BuildHistory | None] = lambda: None,
        score_scale: str = "absolute",
        unknown_nodes: str = "reject",
        assume: bool = True,
        load_bound: bool = True,
        utilization_threshold: float = 0.5,
        gpu_utilization_threshold: float = 0.5,
        gpu_labels: Sequence[str] = DEFAULT_GPU_LABELS,
        ignore_daemonsets_utilization: bool = False,
        ignore_mirror_pods_utilization: bool = False,
        node_group_labels: Sequence[str] = (),
        node_group_min_sizes: Mapping[str, int] | None = None,
        dra: bool | Callable[[], bool] = False,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.cache = cache
        self.profile = profile
        self.filters: list[FilterPlugin] = _pick(profile.filters, filter_names, "filter", profile.name)
        self.scorers: list[WeightedScorer] = _pick(
            profile.scorers, score_names, "score", profile.name, key=lambda s: s.plugin.name
        )
        self.max_total = 100 * sum(s.weight for s in self.scorers)
        self.manage = dict(DEFAULT_BUILD_SELECTOR if manage is None else manage)
        self.history = history
        self.score_scale = score_scale
        self.unknown_nodes = unknown_nodes
        self.assume = assume
        self.load_bound = load_bound
        locality = next((s.plugin for s in profile.scorers if isinstance(s.plugin, BuildLocality)), None)
        bounds = locality.bounds if locality is not None else BuildBounds()
        # the running-builds part: what the extender filters on
        self.build_bounds = BuildBounds(bounds.load_bound, bounds.min_load_cap)
        self.utilization_threshold = utilization_threshold
        self.gpu_utilization_threshold = gpu_utilization_threshold
        self.gpu_labels = tuple(gpu_labels)
        self.ignore_daemonsets_utilization = ignore_daemonsets_utilization
        self.ignore_mirror_pods_utilization = ignore_mirror_pods_utilization
        self.node_groups = (
            NodeGroups(tuple(node_group_labels), dict(node_group_min_sizes)) if node_group_min_sizes else None
        )
        self.dra = dra
        self.clock = clock
        #: What the cached scores were computed for (:meth:`_ctx`): the history's id and
        #: version, the builder nodes' version, the minute.
        self._epoch: tuple[int, int | None, int, int] | None = None
        self._shared = _EpochCache()
        self._pods: dict[tuple[str, str], Pod] = {}  # (uid, resourceVersion) -> parsed pod
        self._rows_memo: tuple[tuple[int, int], list[str], np.ndarray] | None = None

    @property
    def weight(self) -> int:
        """The ``weight`` to give this extender in the scheduler configuration: the sum of
        the weights of the scorers it runs, so ``Score * weight * 10`` is on the same scale as
        kube-scheduler's own ``weight * score`` sums."""
        return max(1, sum(s.weight for s in self.scorers))

    # ---- parsing ---------------------------------------------------------------------------

    def _parse(self, args: Any) -> tuple[Pod, str, list[str], list[Any] | None]:
        """The pod, its ``namespace/name``, the candidate node names, and the node objects
        when the request sent them (``Nodes``, kube-scheduler without ``nodeCacheCapable``)."""
        if not isinstance(args, dict):
            raise BadRequest("request body must be a JSON object (ExtenderArgs)")
        raw_pod = args.get("Pod")
        if not isinstance(raw_pod, dict):
            raise BadRequest("ExtenderArgs.Pod must be a JSON object (a v1.Pod)")
        names = args.get("NodeNames")
        items: list[Any] | None = None
        if names is None:
            nodes = args.get("Nodes")
            if isinstance(nodes, dict) and isinstance(nodes.get("items"), list):
                items = nodes["items"]
                names = [_node_name(n, i) for i, n in enumerate(items)]
            else:
                raise BadRequest("ExtenderArgs.NodeNames must be a list of node names (nodeCacheCapable)")
        if not isinstance(names, list) or not set(map(type, names)) <= {str}:
            raise BadRequest("ExtenderArgs.NodeNames must be a list of strings")
        meta = raw_pod.get("metadata")
        ident = None
        if isinstance(meta, dict) and meta.get("uid") and meta.get("resourceVersion"):
            ident = (str(meta["uid"]), str(meta["resourceVersion"]))
        pod = self._pods.get(ident) if ident is not None else None  # filter, then prioritize
        if pod is None:
            try:
                pod = Pod.from_dict(raw_pod)
            except PodSpecError as exc:
                raise BadRequest(f"ExtenderArgs.Pod: {exc}") from None
            if ident is not None:
                if len(self._pods) >= 256:
                    self._pods.clear()
                self._pods[ident] = pod
        return pod, f"{pod.namespace}/{pod.name}", names, items

    def _check_known(self, names: list[str]) -> None:
        """For pods the extender does not manage: unknown names are still an error (reject)."""
        if self.unknown_nodes == "reject":
            index = self.cache.table.index
            if not all(n in index for n in names):
                self._rows(names)  # raises with the message

    def _rows(self, names: list[str]) -> tuple[np.ndarray, list[str], list[str]]:
        """(rows of known names, known names, unknown names)."""
        table = self.cache.table
        # prioritize usually sends the names filter just sent: comparing the lists is much
        # cheaper than hashing hundreds of freshly decoded strings again
        version = (id(table), self.cache.nodeset_version)
        memo = self._rows_memo
        if memo is not None and memo[0] == version and memo[1] == names:
            return memo[2], memo[1], []  # the memo's strings have their hashes computed
        index = table.index
        rows = list(map(index.get, names))
        if None not in rows:
            idx = np.fromiter(rows, dtype=np.int64, count=len(rows))
            self._rows_memo = (version, names, idx)
            return idx, names, []
        unknown = [n for n, r in zip(names, rows, strict=True) if r is None]
        if self.unknown_nodes == "reject":
            shown = ", ".join(repr(n) for n in unknown[:5])
            more = f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
            raise BadRequest(f"unknown node name(s): {shown}{more} (not in the extender's node cache)")
        known = [n for n, r in zip(names, rows, strict=True) if r is not None]
        return np.array([r for r in rows if r is not None], dtype=np.int64), known, unknown

    def _ctx(self) -> SchedulingContext:
        """A context whose ``cache`` keeps BuildLocality's per-repo rendezvous scores (the
        ranking, ~0.3 ms at 500 nodes) across decisions while the builder nodes,
        the history and the minute stay the same; everything else is per decision. With
        :attr:`dra`, the table's DRA readings are brought up to date first."""
        dra = self.dra() if callable(self.dra) else self.dra
        if dra:
            self.cache.refresh_dra()
        now = self.clock()
        history = self.history()
        builders = self.cache.builder_nodes()
        epoch = (
            id(history),
            getattr(history, "stickypack_version", None),  # kube.history.VersionedBuildHistory's
            # not id(builders): a new list may get a freed list's id
            self.cache.builders_version,
            int(now // 60),
        )
        if epoch != self._epoch:
            self._epoch = epoch
            self._shared = _EpochCache()
        else:
            self._shared.new_decision()
        return SchedulingContext(
            now=now,
            history=history,
            builder_nodes=builders,
            utilization_threshold=self.utilization_threshold,
            gpu_utilization_threshold=self.gpu_utilization_threshold,
            gpu_labels=self.gpu_labels,
            ignore_daemonsets_utilization=self.ignore_daemonsets_utilization,
            ignore_mirror_pods_utilization=self.ignore_mirror_pods_utilization,
            node_groups=self.node_groups,
            dra=dra,
            cache=self._shared,
        )

    def manages(self, pod: Pod) -> bool:
        return matches(pod.labels, self.manage)

    # ---- verbs -----------------------------------------------------------------------------

    def filter(self, args: Any) -> tuple[dict[str, Any], Decision]:
        pod, key, names, items = self._parse(args)
        if not self.manages(pod):
            self._check_known(names)
            decision = Decision("filter", False)
            return _filter_result(list(names), {}, {}, items), decision
        idx, known, unknown = self._rows(names)
        prior = self.cache.unassume(key)  # a pod scheduled again is not counted against itself
        failed: dict[str, str] = {}
        unresolvable: dict[str, str] = {f"{n}": "unknown node (not in the extender's cache)" for n in unknown}
        keep = np.ones(idx.shape[0], dtype=bool)
        self.cache.expire_assumptions()
        if idx.size and self.filters:
            ctx = self._ctx()
            table = self.cache.table
            for plugin in self.filters:
                live = np.flatnonzero(keep)
                if live.size == 0:
                    break
                ok = plugin.filter(pod, table, idx[live], ctx)
                if plugin in self.profile.checked:  # a plugin from outside the package
                    ok = check_mask(plugin, ok, idx[live])
                for j in live[~ok]:
                    target = unresolvable if plugin.name in UNRESOLVABLE else failed
                    target[known[j]] = f"{plugin.name}: {FILTER_REASONS.get(plugin.name, 'filtered')}"
                keep[live[~ok]] = False
        if self.load_bound and pod.build_repo is not None and keep.any():
            self._bound_loads(idx, known, keep, unresolvable)
        passed = list(compress(known, keep.tolist()))
        assumed = False
        if len(passed) == 1 and self.assume and pod.build_repo is not None:
            # kube-scheduler skips prioritize with one feasible node: count the pod now.
            assumed = self.cache.assume(key, pod, passed[0])
        elif prior is not None:
            self.cache.assume(key, pod, prior)  # until prioritize, next, predicts again
        result = _filter_result(passed, failed, unresolvable, items)
        filtered = len(known) - len(passed)  # by the filters and the load bound, not unknown names
        # assumed_total counts each pod once, not each retry of it
        return result, Decision("filter", True, assumed=assumed and prior is None, filtered=filtered)

    def load_cap(self) -> int:
        """Most builds a node may run with one more build placed: ``max(min_load_cap,
        ceil(load_bound * mean))`` over all nodes, the new build counted (bounded loads)."""
        return self.build_bounds.load_cap(self.cache.table)

    def over_load_cap(self, idx: np.ndarray) -> tuple[np.ndarray, int]:
        """Per row of ``idx``: would one more build exceed :meth:`load_cap`? And the cap."""
        cap = self.load_cap()
        return self.cache.table.builds[idx] + 1 > cap, cap

    def _bound_loads(
        self, idx: np.ndarray, known: list[str], keep: np.ndarray, unresolvable: dict[str, str]
    ) -> None:
        """Drop nodes whose builds would exceed the load cap, unless none would be left;
        each goes into ``unresolvable`` with its reason (preemption lowers no build count)."""
        over, cap = self.over_load_cap(idx)
        over &= keep
        if not over.any() or not (keep & ~over).any():
            return
        builds = self.cache.table.builds[idx]
        for j in np.flatnonzero(over):
            unresolvable[known[j]] = f"LoadBound: node runs {int(builds[j])} builds, the bound is {cap}"
        keep &= ~over

    def prioritize(self, args: Any) -> tuple[Sequence[dict[str, Any]], Decision]:
        pod, key, names, _ = self._parse(args)
        if not self.manages(pod):
            self._check_known(names)
            return [], Decision("prioritize", False)
        idx, known, unknown = self._rows(names)
        prior = self.cache.unassume(key)  # a pod scheduled again is not counted against itself
        if idx.size == 0:
            return [{"Host": n, "Score": 0} for n in unknown], Decision("prioritize", True)
        self.cache.expire_assumptions()
        ctx = self._ctx()
        table = self.cache.table
        total = np.zeros(idx.shape[0], dtype=np.int64)
        for ws in self.scorers:
            if ws.weight == 0 or ws.plugin.skip(pod):
                continue
            part = ws.plugin.score(pod, table, idx, ctx)
            if ws.plugin in self.profile.checked:  # a plugin from outside the package
                part = check_scores(ws.plugin, part, idx)
            total += ws.weight * part
        if self.score_scale == "max":
            top = int(total.max())
            scores = (total * MAX_EXTENDER_PRIORITY + top // 2) // top if top > 0 else np.zeros_like(total)
        else:
            denom = max(self.max_total, 1)
            scores = (total * MAX_EXTENDER_PRIORITY + denom // 2) // denom
        scores = np.clip(scores, 0, MAX_EXTENDER_PRIORITY)
        if self.load_bound and pod.build_repo is not None:
            # What the filter drops scores 0 here too, so a scheduler that calls prioritize
            # alone (or a node that filled up between the two calls) is steered the same way.
            over, _ = self.over_load_cap(idx)
            if over.any() and not over.all():
                scores[over] = 0
        out = _PriorityList(known, scores.tolist(), unknown)
        top_node = None
        assumed = False
        if self.assume and pod.build_repo is not None and idx.size > 1:
            top_node = self._predict(pod, idx, known, scores, ctx)
            if top_node is not None:
                assumed = self.cache.assume(key, pod, top_node)
        return out, Decision("prioritize", True, assumed=assumed and prior is None)

    def _predict(
        self, pod: Pod, idx: np.ndarray, known: list[str], ext_scores: np.ndarray, ctx: SchedulingContext
    ) -> str | None:
        """The node kube-scheduler will most likely bind: its own plugins (the profile's
        scorers we do not return, on the same formulas) plus our score as it adds it."""
        weight = self.weight
        total = ext_scores.astype(np.int64) * weight * (100 // MAX_EXTENDER_PRIORITY)
        ours = {id(s) for s in self.scorers}
        for ws in self.profile.scorers:
            if id(ws) in ours or ws.weight == 0 or ws.plugin.name not in KUBE_SCORERS or ws.plugin.skip(pod):
                continue
            total += ws.weight * ws.plugin.score(pod, self.cache.table, idx, ctx)
        best = np.flatnonzero(total == total.max())
        if best.size != 1:
            return None  # a tie: kube-scheduler picks at random, do not guess
        return known[int(best[0])]


class _EpochCache(dict[str, Any]):
    """``SchedulingContext.cache`` across decisions: the keys of BuildLocality's rendezvous
    scores stay for the epoch (see ``Extender._ctx``), any other key a plugin sets lasts
    one decision. Forgetting those costs one pass over the keys set, not over the cache."""

    KEEP = BuildLocality.RENDEZVOUS_CACHE_PREFIX

    def __init__(self) -> None:
        super().__init__()
        self._scratch: list[str] = []

    def __setitem__(self, key: str, value: Any) -> None:
        # a renamed key once made every decision re-rank (extender throughput -25%)
        if not key.startswith(self.KEEP):
            self._scratch.append(key)
        super().__setitem__(key, value)

    def setdefault(self, key: str, default: Any = None) -> Any:
        if key not in self:
            self[key] = default
        return self[key]

    def update(self, *args: Any, **kwargs: Any) -> None:
        # dict.update and |= do not call __setitem__: their keys would outlive the decision
        for key, value in dict(*args, **kwargs).items():
            self[key] = value

    def __ior__(self, other: Any) -> Self:  # type: ignore[override,misc]
        self.update(other)
        return self

    def new_decision(self) -> None:
        for key in self._scratch:
            self.pop(key, None)
        self._scratch.clear()


class _PriorityList(Sequence[dict[str, Any]]):
    """A HostPriorityList (``[{"Host": ..., "Score": ...}]``, built only when read) that
    serializes itself fast (the app calls :meth:`to_json`): each node's JSON entry for each
    score 0-10 is cached, and a reply joins the entries instead of building a dict per node."""

    #: Shared cache: node name -> its entry for each score, ``'{"Host":"n","Score":7}'`` at [7].
    _fragments: dict[str, tuple[str, ...]] = {}  # noqa: RUF012

    def __init__(self, names: list[str], scores: list[int], unknown: list[str]) -> None:
        self._known = names  # the table's nodes: their fragments are cached
        self._scores = scores
        self._unknown = unknown  # any name a request sent: score 0, not cached
        self._items: list[dict[str, Any]] | None = None

    def _list(self) -> list[dict[str, Any]]:
        if self._items is None:
            pairs = [*zip(self._known, self._scores, strict=True), *((n, 0) for n in self._unknown)]
            self._items = [{"Host": n, "Score": s} for n, s in pairs]
        return self._items

    @overload
    def __getitem__(self, i: int) -> dict[str, Any]: ...
    @overload
    def __getitem__(self, i: slice) -> list[dict[str, Any]]: ...
    def __getitem__(self, i: int | slice) -> dict[str, Any] | list[dict[str, Any]]:
        return self._list()[i]

    def __len__(self) -> int:
        return len(self._known) + len(self._unknown)

    def __eq__(self, other: object) -> bool:
        return self._list() == list(other) if isinstance(other, Sequence) else NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def to_json(self) -> str:
        frags = self._fragments
        known = self._known
        if len(frags) > 100_000:
            frags.clear()
        try:
            entries = list(map(frags.__getitem__, known))
        except KeyError:  # a node not seen before
            for name in known:
                if name not in frags:
                    host = '{"Host":' + json.dumps(name) + ',"Score":'
                    frags[name] = tuple(f"{host}{s}}}" for s in range(MAX_EXTENDER_PRIORITY + 1))
            entries = list(map(frags.__getitem__, known))
        # C-level maps pick each node's entry for its score: no Python code runs per node
        out = ",".join(map(getitem, entries, self._scores))
        if self._unknown:
            rest = ",".join('{"Host":' + json.dumps(n) + ',"Score":0}' for n in self._unknown)
            out = f"{out},{rest}" if out else rest
        return "[" + out + "]"


def _node_name(node: Any, i: int) -> str:
    """``metadata.name`` of ``ExtenderArgs.Nodes.items[i]``; BadRequest naming the item."""
    where = f"ExtenderArgs.Nodes.items[{i}].metadata.name"
    meta = node.get("metadata") if isinstance(node, dict) else None
    name = meta.get("name") if isinstance(meta, dict) else None
    if name is None:
        raise BadRequest(f"{where} missing")
    if not isinstance(name, str):
        raise BadRequest(f"{where} must be a string, not {type(name).__name__}")
    return name


def _filter_result(
    names: list[str], failed: dict[str, str], unresolvable: dict[str, str], items: list[Any] | None = None
) -> dict[str, Any]:
    """An ``ExtenderFilterResult``; ``items``: the request's node objects, if it sent them."""
    nodes = None
    if items is not None:
        passed = set(names)
        nodes = {"items": [n for n in items if n["metadata"]["name"] in passed]}
    return {
        "Nodes": nodes,
        "NodeNames": names,
        "FailedNodes": failed,
        "FailedAndUnresolvableNodes": unresolvable,
        "Error": "",
    }


def _pick(
    items: list[Any],
    names: Sequence[str],
    kind: str,
    profile: str,
    key: Callable[[Any], str] = lambda p: p.name,
) -> list[Any]:
    by_name = {key(it): it for it in items}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise PolicyError(
            f"profile {profile!r} has no {kind} plugin(s) {unknown}; it has: {', '.join(by_name) or 'none'}"
        )
    return [by_name[n] for n in names]
