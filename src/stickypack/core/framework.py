"""The scoring pipeline, modelled on kube-scheduler's scheduling framework.

A *filter plugin* removes nodes a pod cannot use; a *score plugin* gives every remaining node
an integer score 0..100 (already normalized, as kube-scheduler's NormalizeScore leaves it); a
*profile* runs its filters, then sums ``weight * score`` over its scorers, and picks a node
with the highest total, ties broken uniformly at random. Everything works on arrays of
:class:`~stickypack.core.nodetable.NodeTable` rows.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from stickypack.core.history import BuildHistory
from stickypack.core.nodegroups import NodeGroups
from stickypack.core.nodetable import NodeTable
from stickypack.core.pod import Pod

if TYPE_CHECKING:
    from stickypack.core.podaffinity import PodsOnNodes

MAX_NODE_SCORE = 100


@dataclass(slots=True)
class SchedulingContext:
    """What a scheduling decision may read besides the pod and the node table.

    ``now``: the current time in seconds (the caller's clock; the core has none).
    ``history``: where repos were built. ``builder_nodes``: the nodes that can build (the
    nodes of BinderHub's builder DaemonSet); ``None`` means every node in the table.
    ``utilization_threshold``: the cluster-autoscaler's scale-down utilization threshold;
    ``gpu_utilization_threshold`` its threshold for GPU nodes (nodes with
    a GPU resource allocatable, ``nvidia.com/gpu``, ``amd.com/gpu``...: ``core.resources.GPU_RESOURCES``,
    which it weighs by their GPU requests alone); ``gpu_labels``: its cloud provider's GPU
    node labels (keys): a node carrying one but no GPU allocatable yet is a GPU node whose
    GPUs are not ready, which it takes as unused. Empty (the default, the simulator's): no
    label is read. ``ignore_daemonsets_utilization`` / ``ignore_mirror_pods_utilization``:
    its flags of those names, which leave DaemonSet / mirror pods' requests out of a node's
    utilization, taken out of its allocatable too (``NodeTable.unweighed_requested``).
    ``node_groups``: its node groups and their minimum sizes (:class:`NodeGroups`): a node
    of a group at or under its minimum size is one it never removes; None (the default):
    no group has a minimum.
    ``dra``: its ``--enable-dynamic-resource-allocation``: a node with node-local
    ResourceSlices is weighed by its most used DRA device pool (unless a GPU resource weighs
    it first), as the driver keeps it in the table (:func:`~stickypack.core.dra.set_node_dra`;
    a driver that keeps none leaves every node weighed by cpu and memory). False (the
    default, the simulator's): nothing of DRA is read.
    ``pods_on_nodes``: the pods bound to the table's nodes, with their labels and pod
    (anti-)affinity (:class:`~stickypack.core.podaffinity.PodsOnNodes` of the table's rows),
    for scorers that read the pods on nodes as kube-scheduler's do; None (the default, the
    simulator's and the extender's): not known, and such a scorer scores what the table alone
    says. :func:`~stickypack.core.explain.explain_placement` sets it when given them.
    ``cache``: scratch space for one decision (the simulator clears it before each; keys
    beginning ``rendezvous:`` are reserved: the extender keeps those while the builder
    nodes stay the same). ``now``'s origin is the driver's: the simulator counts from the
    run's start, the extender from the Unix epoch; compare times, not clock readings.
    """

    now: float = 0.0
    history: BuildHistory | None = None
    builder_nodes: Sequence[str] | None = None
    utilization_threshold: float = 0.5
    gpu_utilization_threshold: float = 0.5
    gpu_labels: tuple[str, ...] = ()
    ignore_daemonsets_utilization: bool = False
    ignore_mirror_pods_utilization: bool = False
    node_groups: NodeGroups | None = None
    dra: bool = False
    pods_on_nodes: PodsOnNodes | None = None
    cache: dict[str, Any] = field(default_factory=dict)


class PluginContractError(RuntimeError):
    """A plugin from outside the package broke its contract (a filter's mask or a scorer's
    scores of the wrong type, length or range, a mutator's result not a Pod); the message
    names the plugin."""


class FilterPlugin(abc.ABC):
    """Removes nodes: ``filter`` returns a boolean mask over ``idx`` (True: node passes)."""

    name: ClassVar[str] = ""
    #: The YAML ``args`` it was built from, kept for a plugin from outside the package so
    #: the default :meth:`describe` can write them.
    given_args: dict[str, Any] | None = None
    #: True when the verdict depends on more of the pod than its shape (requests,
    #: tolerations, selectors, affinity), e.g. its repo or its age: two pods of one shape can
    #: then get different answers, so a driver must not infer one's from the other's.
    pod_specific: ClassVar[bool] = False

    @abc.abstractmethod
    def filter(self, pod: Pod, table: NodeTable, idx: np.ndarray, ctx: SchedulingContext) -> np.ndarray:
        """A mask over ``idx``: True where the node passes."""

    def describe(self) -> dict[str, Any]:
        """The plugin as a policy file names it: ``{"plugin": name}`` (plus ``args``)."""
        return _described(self.name, self.given_args)


class ScorePlugin(abc.ABC):
    """Scores nodes: ``score`` returns int64 scores 0..100 over ``idx``."""

    name: ClassVar[str] = ""
    given_args: dict[str, Any] | None = None  # as FilterPlugin's

    @abc.abstractmethod
    def score(self, pod: Pod, table: NodeTable, idx: np.ndarray, ctx: SchedulingContext) -> np.ndarray:
        """An int64 array with one score in 0..100 per entry of ``idx`` (NodeTable rows of
        the feasible nodes), higher is better. Not called when :meth:`skip_in` is true, when
        the plugin's weight is 0, or when only one node is feasible. Must not change
        ``table``; ``ctx.cache`` is scratch space for one decision (keys beginning
        ``rendezvous:`` are reserved: the extender keeps them across decisions)."""

    def skip(self, pod: Pod) -> bool:
        """True when the plugin has nothing to say about ``pod`` (kube's PreScore Skip)."""
        return False

    def skip_in(self, pod: Pod, ctx: SchedulingContext) -> bool:
        """:meth:`skip` in the decision's context, which profiles ask: a scorer whose Skip
        depends on more than the pod (the pods on the nodes, ``ctx.pods_on_nodes``)
        overrides it; by default, :meth:`skip`."""
        return self.skip(pod)

    def describe(self) -> dict[str, Any]:
        """The plugin as a policy file names it: ``{"plugin": name}`` (plus ``args``)."""
        return _described(self.name, self.given_args)


class PodMutator(abc.ABC):
    """Changes a pod before its first scheduling attempt, as a client of the API would
    (BinderHub setting the affinity of its build pods). Returns the pod to schedule."""

    name: ClassVar[str] = ""
    given_args: dict[str, Any] | None = None  # as FilterPlugin's

    @abc.abstractmethod
    def mutate(self, pod: Pod, table: NodeTable, ctx: SchedulingContext) -> Pod:
        """The pod to create (the same object, changed, or a new one)."""

    def describe(self) -> dict[str, Any]:
        """The plugin as a policy file names it: ``{"plugin": name}`` (plus ``args``)."""
        return _described(self.name, self.given_args)


#: kube-scheduler scores every feasible node of a cluster under this many nodes, and at
#: least this many feasible nodes of a larger one (``minFeasibleNodesToFind``).
MIN_FEASIBLE_NODES_TO_FIND = 100
#: The lowest adaptive percentage (``minFeasibleNodesPercentageToFind``).
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5


def feasible_nodes_to_find(num_all_nodes: int, percentage: int = 0) -> int:
    """How many feasible nodes kube-scheduler finds before it stops filtering and scores
    them (``numFeasibleNodesToFind``), in a cluster of ``num_all_nodes`` nodes, with
    ``percentageOfNodesToScore`` ``percentage`` (0: adaptive, ``50 - nodes / 125`` percent,
    at least 5): every node under 100 nodes, else that percentage of the nodes (rounded
    down), at least 100."""
    if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND:
        return num_all_nodes
    if percentage == 0:
        percentage = max(50 - num_all_nodes // 125, MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND)
    return max(num_all_nodes * percentage // 100, MIN_FEASIBLE_NODES_TO_FIND)


def prefilter_node_names(pod: Pod) -> frozenset[str] | None:
    """The names of the only nodes kube-scheduler searches for ``pod`` (NodeAffinity's
    PreFilter, ``preRes.NodeNames``): when every one of its required node selector terms has
    a ``matchFields`` ``metadata.name`` ``In`` requirement, the union over the terms of the
    names each term's ``In`` requirements all name (any number of values, valid or not, as
    PreFilter reads them); None (every node) otherwise. Names of no node are kept: the
    search drops them."""
    terms = pod.required_terms
    if not terms:
        return None
    names: set[str] = set()
    for term in terms:
        named: set[str] | None = None
        for req in term.fields:
            if req.key == "metadata.name" and req.operator == "In":
                named = set(req.values) if named is None else named & set(req.values)
        if named is None:  # a term not naming nodes: any node may match it
            return None
        names |= named
    return frozenset(names)


@dataclass(slots=True)
class NodeScan:
    """kube-scheduler's search for feasible nodes, which a scheduler carries from one
    scheduling cycle to the next (``findNodesThatPassFilters``).

    It checks the nodes in its snapshot's order (:meth:`NodeTable.scheduler_order`) from
    ``next_start`` on, round the end, and stops once it has found
    :func:`feasible_nodes_to_find` of them (one when the profile scores nothing); only those
    are scored. ``next_start`` (its ``nextStartNodeIndex``) then moves on by the nodes
    checked, modulo the number of all nodes, so every node gets its turn across pods.
    ``percentage``: its ``percentageOfNodesToScore`` (0: adaptive; 100: every feasible node
    is scored, in any cluster).

    A pod whose required node affinity names its nodes (:func:`prefilter_node_names`) is
    searched for on those nodes alone: their count sets how many to find, the start is taken
    modulo it, and every one checked moves ``next_start`` on (a pod naming one node moves it
    by one).

    kube-scheduler checks the nodes in parallel (16 goroutines, chunks of consecutive
    nodes), so which nodes it has found when it stops varies from run to run; this takes
    the first ones in order, the search its code describes. It lists the named nodes of a
    pod's ``matchFields`` in a Go map's random order; this keeps the snapshot's order (the
    same nodes are found whenever fewer than 100 are named, all of them)."""

    percentage: int = 0
    next_start: int = 0

    def sample(
        self,
        feasible: np.ndarray,
        table: NodeTable,
        scoring: bool = True,
        node_names: frozenset[str] | None = None,
    ) -> np.ndarray:
        """The rows of ``feasible`` (the rows of ``table`` that pass the filters) that
        kube-scheduler scores, in its search's order (all of them, as given, when it finds
        no more than it looks for); moves ``next_start`` on. ``scoring``: whether the
        profile scores (kube-scheduler looks for one feasible node when it does not);
        ``node_names``: the only nodes PreFilter leaves to search (None: all)."""
        order = table.scheduler_order()  # the cycle's snapshot, as UpdateSnapshot takes it
        num_all = order.size
        if num_all == 0:
            return feasible
        nodes = order
        if node_names is not None:
            named = np.zeros(table.active.shape[0], dtype=bool)
            named[[table.index[n] for n in node_names if n in table.index]] = True
            nodes = order[named[order]]
            feasible = feasible[named[feasible]]
        wanted = feasible_nodes_to_find(nodes.size, self.percentage) if scoring else 1
        if feasible.size <= wanted:  # every node checked
            self.next_start = (self.next_start + nodes.size) % num_all
            return feasible
        start = self.next_start % nodes.size
        searched = np.concatenate((nodes[start:], nodes[:start]))
        passes = np.zeros(table.active.shape[0], dtype=bool)
        passes[feasible] = True
        found = np.flatnonzero(passes[searched])[:wanted]
        self.next_start = (self.next_start + int(found[-1]) + 1) % num_all
        return searched[found]


@dataclass(slots=True)
class WeightedScorer:
    """A scorer and its weight in its profile (0..2**31-1, kube-scheduler's int32)."""

    plugin: ScorePlugin
    weight: int


def check_mask(plugin: FilterPlugin, mask: Any, idx: np.ndarray) -> np.ndarray:
    """``mask`` if it is a bool array of one verdict per entry of ``idx``, else
    :class:`PluginContractError` naming the plugin."""
    if not isinstance(mask, np.ndarray) or mask.dtype != np.bool_ or mask.shape != idx.shape:
        raise PluginContractError(
            f"filter plugin {plugin.name or type(plugin).__name__} returned {_shown(mask)}; "
            f"expected a bool array of {idx.shape[0]} (one per candidate node)"
        )
    return mask


def check_scores(plugin: ScorePlugin, scores: Any, idx: np.ndarray) -> np.ndarray:
    """``scores`` if it is an int64 array of one score in 0..100 per entry of ``idx``, else
    :class:`PluginContractError` naming the plugin."""
    name = plugin.name or type(plugin).__name__
    if not isinstance(scores, np.ndarray) or scores.dtype != np.int64 or scores.shape != idx.shape:
        raise PluginContractError(
            f"score plugin {name} returned {_shown(scores)}; "
            f"expected an int64 array of {idx.shape[0]} (one per candidate node)"
        )
    if scores.size and (scores.min() < 0 or scores.max() > MAX_NODE_SCORE):
        raise PluginContractError(
            f"score plugin {name} returned scores {int(scores.min())}..{int(scores.max())}; "
            f"scores are 0..{MAX_NODE_SCORE}"
        )
    return scores


def _described(name: str, args: dict[str, Any] | None) -> dict[str, Any]:
    return {"plugin": name, "args": dict(args)} if args else {"plugin": name}


def _shown(value: Any) -> str:
    if isinstance(value, np.ndarray):
        article = "an" if str(value.dtype)[0] in "aeiou" else "a"
        return f"{article} {value.dtype} array of shape {value.shape}"
    return f"a {type(value).__name__}"


@dataclass(slots=True)
class Profile:
    """Filters and weighted scorers; ``match`` selects the pods it serves by label."""

    name: str
    filters: list[FilterPlugin]
    scorers: list[WeightedScorer]
    match_labels: Mapping[str, str] = field(default_factory=dict)
    mutators: list[PodMutator] = field(default_factory=list)
    #: Plugins whose every answer is checked (:func:`check_mask`, :func:`check_scores`, a
    #: mutator's result in ``Policy.prepare``): those from outside the package
    #: (``PluginRegistry.with_plugins``).
    checked: tuple[FilterPlugin | ScorePlugin | PodMutator, ...] = ()

    def matches(self, pod: Pod) -> bool:
        """True when the pod carries every label of ``match_labels``."""
        labels = pod.labels
        return all(labels.get(k) == v for k, v in self.match_labels.items())

    def feasible(self, pod: Pod, table: NodeTable, ctx: SchedulingContext) -> np.ndarray:
        """Rows of the nodes that pass every filter, ascending."""
        idx = table.active_indices()
        for plugin in self.filters:
            if idx.size == 0:
                break
            mask = plugin.filter(pod, table, idx, ctx)
            if self.checked and plugin in self.checked:
                mask = check_mask(plugin, mask, idx)
            idx = idx[mask]
        return idx

    def scores(self, pod: Pod, table: NodeTable, idx: np.ndarray, ctx: SchedulingContext) -> np.ndarray:
        """Total ``sum(weight * score)`` per row of ``idx``."""
        total = np.zeros(idx.shape[0], dtype=np.int64)
        for ws in self.scorers:
            if ws.weight == 0 or ws.plugin.skip_in(pod, ctx):
                continue
            scores = ws.plugin.score(pod, table, idx, ctx)
            if self.checked and ws.plugin in self.checked:
                scores = check_scores(ws.plugin, scores, idx)
            total += ws.weight * scores
        return total

    @property
    def scores_nodes(self) -> bool:
        """Whether the profile scores at all (a scorer of non-zero weight)."""
        return any(ws.weight != 0 for ws in self.scorers)

    def select(
        self,
        pod: Pod,
        table: NodeTable,
        ctx: SchedulingContext,
        rng: np.random.Generator,
        scan: NodeScan | None = None,
    ) -> int | None:
        """The row kube-scheduler would bind ``pod`` to, or ``None`` if no node fits.

        With one feasible node, scoring is skipped, as in kube-scheduler. ``scan``: the
        scheduler's search for feasible nodes (:class:`NodeScan`), so only the nodes it
        finds are scored; None: every feasible node is.
        """
        idx = self.feasible(pod, table, ctx)
        if scan is not None:
            idx = scan.sample(idx, table, self.scores_nodes, prefilter_node_names(pod))
        if idx.size == 0:
            return None
        if idx.size == 1:
            return int(idx[0])
        total = self.scores(pod, table, idx, ctx)
        best = np.flatnonzero(total == total.max())
        pick = best[0] if best.size == 1 else best[int(rng.integers(best.size))]
        return int(idx[pick])

    def describe(self) -> dict[str, Any]:
        """The profile as a policy file writes it, every plugin argument given (defaults
        included): ``stickypack policies --show``."""
        out: dict[str, Any] = {"name": self.name}
        if self.match_labels:
            out["match"] = {"labels": dict(self.match_labels)}
        if self.mutators:
            out["mutate"] = [m.describe() for m in self.mutators]
        out["filters"] = [f.describe() for f in self.filters]
        out["score"] = [{**s.plugin.describe(), "weight": s.weight} for s in self.scorers]
        return out
