"""The event-driven simulator: one policy, one workload, a cluster-autoscaler model.

Events are kept in a heap of ``(time, sequence, kind, payload)``; the workload's jobs are
already time-ordered and are merged in from a cursor. Everything random is drawn from
generators seeded by the run's seed, so a seed reproduces a run exactly.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from stickypack.core.framework import NodeScan, Profile, SchedulingContext
from stickypack.core.history import BuildHistory
from stickypack.core.labels import DELETION_CANDIDATE_TAINT, HOSTNAME_LABEL, PREFER_NO_SCHEDULE, Taint
from stickypack.core.nodegroups import NodeGroups
from stickypack.core.nodetable import NodeTable
from stickypack.core.plugins import EXPECTED_END_ANNOTATION, LifetimeAware
from stickypack.core.pod import Pod
from stickypack.core.policy import Policy
from stickypack.core.resources import CPU, MEMORY, PODS
from stickypack.core.retirement import choose_retirements
from stickypack.policies import load_builtin
from stickypack.sim.cache import NodeCache, NodeImages
from stickypack.sim.metrics import (
    BoundTracker,
    Series,
    integrate_step,
    percentile,
    window_max_step,
)
from stickypack.sim.model import AutoscalerConfig, CacheConfig, NodePool, check_provisioning
from stickypack.sim.workloads import LaunchJob, PodJob, TrimJob, Workload, build_pod, user_pod

_END, _READY, _SCAN = 0, 1, 2
_SOFT_TAINT = Taint(DELETION_CANDIDATE_TAINT, "", PREFER_NO_SCHEDULE)
#: The label a simulated node carries with its pool's name: the autoscaler model's node group.
POOL_LABEL = "stickypack.io/pool"


@dataclass(slots=True, eq=False)
class SimPod:
    """A pod in flight: its job and what happened to it."""

    pod: Pod
    profile: Profile  # the policy profile that places it
    created: float
    duration: float | None
    end_at: float | None
    group: str | None = None
    launch: LaunchJob | None = None
    uid: int = 0
    slot: int = -1
    node: str | None = None
    ends: float | None = None
    done: bool = False
    #: Pods of one retry key fail to fit alike (requests, tolerations, selectors, profile):
    #: after one fails, the rest wait for the next event.
    retry_key: tuple[Any, ...] = ()
    #: (cpu millicores, memory bytes, 1 pod): what it adds to its node's requests.
    vec: np.ndarray | None = None


@dataclass(slots=True, eq=False)
class SimNode:
    """A node of the simulated cluster: asked for at ``requested_at``, ready at ``ready_at``
    (seconds from the run's start), its pods by uid, its build cache."""

    name: str
    pool: NodePool
    requested_at: float
    ready_at: float
    slot: int = -1
    pods: dict[int, SimPod] = field(default_factory=dict)
    cache: NodeCache | None = None
    images: NodeImages | None = None
    deleted_at: float | None = None
    unneeded_since: float | None = None
    builds: int = 0
    caches_lost: int = 0  # later builds that missed because this node, their last, was gone


@dataclass(frozen=True, slots=True)
class NodeRecord:
    """One node's life in a run: seconds from the start; ``deleted_at`` None if it stayed.

    ``builds``: build pods bound to it. ``caches_lost``: builds counted as
    ``build_cache_lost_share`` whose repo had last been built on this node.
    """

    name: str
    ready_at: float
    deleted_at: float | None
    builds: int
    caches_lost: int


@dataclass(slots=True)
class RunResult:
    """Raw metrics of one run (see :data:`stickypack.sim.metrics.METRICS`) and its series."""

    metrics: dict[str, float]
    series: Series
    nodes: list[NodeRecord] = field(default_factory=list)


class Simulation:
    """Runs ``policy`` over ``workload`` with the autoscaler and cache models."""

    def __init__(
        self,
        policy: Policy,
        workload: Workload,
        *,
        seed: int = 0,
        autoscaler: AutoscalerConfig | None = None,
        cache: CacheConfig | None = None,
        history_ttl_s: float = 7 * 86400.0,
        progress: Callable[[float], None] | None = None,
    ) -> None:
        self.policy = policy
        self.workload = workload
        self.ca = autoscaler or AutoscalerConfig()
        for pool in workload.pools:
            check_provisioning(pool, self.ca)
        self.cache_config = cache or CacheConfig()
        #: Tie-breaks among equally scored nodes: each policy draws a different number.
        self.rng = np.random.default_rng([seed, 10])
        #: Per profile name, its kube-scheduler's search for feasible nodes, carried across
        #: its scheduling cycles (in a cluster of 100 nodes or more it scores only the nodes
        #: it finds first): each profile is a scheduler of its own, as the built-in policies
        #: are deployed (z2jh's user-scheduler beside the default scheduler; stickypack's
        #: build and user schedulers, each with its extender), with a search of its own.
        self.scans = {
            profile.name: NodeScan(policy.percentage_of_nodes_to_score) for profile in policy.profiles
        }
        #: Which Dask workers a trim retires: a stream of its own, so every policy retires
        #: the same workers (drawn from the tie-break stream, they differed per policy).
        self.trim_rng = np.random.default_rng([seed, 11])
        self.progress = progress
        self.table = NodeTable()
        self.history = BuildHistory(ttl_s=history_ttl_s)
        self.ctx = SchedulingContext(
            history=self.history,
            utilization_threshold=self.ca.scale_down_utilization_threshold,
            # the pools are the autoscaler model's node groups: ScaleDownAware reads them as
            # the extender reads cluster.node_group_min_sizes (a minimum of 0 keeps no node
            # it could weigh: left out, so pools without one cost no lookup per decision)
            node_groups=NodeGroups(
                (POOL_LABEL,), {pool.name: pool.min_size for pool in workload.pools if pool.min_size}
            ),
        )
        self._ca_profile = load_builtin("default").profiles[0]
        self.needs_expiry = any(
            isinstance(s.plugin, LifetimeAware) for prof in policy.profiles for s in prof.scorers
        )
        if self.needs_expiry:
            self.table.ensure_extra("expiry")
        #: Events: (time, sequence number: ties in push order, _END with the pod that ends,
        #: _READY with the node that becomes ready, or _SCAN with None).
        self.heap: list[tuple[float, int, int, SimPod | SimNode | None]] = []
        self.seq = 0
        self.nodes: dict[str, SimNode] = {}
        self.by_slot: dict[int, SimNode] = {}
        self.upcoming: dict[str, SimNode] = {}
        self.pending: dict[int, SimPod] = {}
        self.groups: dict[str, dict[int, SimPod]] = {}
        self.building: dict[str, SimPod] = {}
        self.waiting: dict[str, list[LaunchJob]] = {}
        self.node_counter = 0
        self.pod_counter = 0
        self.uid_counter = 0
        self.last_scale_up = -math.inf
        self.live_pods = 0
        # Nodes of allocatable C: with pools of several sizes, each resource's largest (no
        # node holds more, and no node takes two pods above half of it), so it stays a bound.
        self.bound = BoundTracker(
            [max(p.allocatable.get(r, 0) for p in workload.pools) or 1 for r in (CPU, MEMORY, PODS)]
        )
        self.node_t: list[float] = [0.0]
        self.node_n: list[int] = [0]
        self.pending_s: list[float] = []
        self.build_s: list[float] = []
        # Each build is a cache hit or misses because it is its repo's first build in the
        # run, its caches are all lost (node deleted or image pruned), or it was built away
        # from a live node that had the cache.
        self.build_outcomes = {"hit": 0, "first": 0, "lost": 0, "elsewhere": 0}
        # repo -> the node of its latest build (its keys: every repo built so far)
        self.last_build_node: dict[str, SimNode] = {}
        #: Image name -> size in bytes, of every image a pod may run.
        self.image_sizes: dict[str, int] = dict(workload.image_sizes)
        self.scheduled = 0
        self.unscheduled = 0
        self.all_nodes: list[SimNode] = []
        self.now = 0.0
        self.last_end = 0.0

    # ---- event plumbing -----------------------------------------------------------------

    def _push(self, t: float, kind: int, payload: SimPod | SimNode | None) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (t, self.seq, kind, payload))

    def _record_nodes(self) -> None:
        n = len(self.nodes) + len(self.upcoming)
        if self.node_t[-1] == self.now:
            self.node_n[-1] = n
        else:
            self.node_t.append(self.now)
            self.node_n.append(n)

    # ---- run ----------------------------------------------------------------------------

    def run(self) -> RunResult:
        """Replay the workload to its last pod's end; the metrics and the node series."""
        for pool in self.workload.pools:
            for _ in range(pool.min_size):
                self._add_node(pool, requested_at=0.0, ready_at=0.0)
        jobs = self.workload.jobs
        cursor = 0
        last_job_t = jobs[-1].t if jobs else 0.0
        self._push(self.ca.scan_interval_s, _SCAN, None)
        next_progress = 0.0
        while True:
            heap_t = self.heap[0][0] if self.heap else math.inf
            if cursor < len(jobs) and jobs[cursor].t <= heap_t:
                job = jobs[cursor]
                cursor += 1
                self.now = job.t
                self._job(job)
                continue
            if not self.heap:
                break
            t, _, kind, payload = heapq.heappop(self.heap)
            self.now = t
            if kind == _END:
                assert isinstance(payload, SimPod)
                self._end(payload)
            elif kind == _READY:
                assert isinstance(payload, SimNode)
                self._ready(payload)
            else:
                if cursor >= len(jobs) and self.live_pods == 0:
                    break
                self._scan()
                # only pods that fit nowhere are left: nothing can change (but a pod created at
                # this scan's instant is the next scan's to scale up for)
                if (
                    cursor >= len(jobs)
                    and not self.heap
                    and all(sp.created < t for sp in self.pending.values())
                ):
                    break
                self._push(t + self.ca.scan_interval_s, _SCAN, None)
            if self.progress is not None and t >= next_progress:
                self.progress(min(t / max(last_job_t, 1.0), 1.0))
                next_progress = t + 600.0
        return self._result()

    # ---- jobs ---------------------------------------------------------------------------

    def _job(self, job: object) -> None:
        if isinstance(job, PodJob):
            self._create(job.pod, job.duration, job.end_at, job.group)
        elif isinstance(job, LaunchJob):
            self._launch(job)
        elif isinstance(job, TrimJob):
            self._trim(job)

    def _launch(self, job: LaunchJob) -> None:
        repo = job.repo
        self.image_sizes[job.image] = job.image_size  # what its build makes, its session runs
        if repo in self.building:
            self.waiting.setdefault(repo, []).append(job)
        elif job.needs_build:
            self.pod_counter += 1
            pod = build_pod(f"build-{self.pod_counter}", repo, self.workload.binder)
            sp = self._create(pod, job.build_cold_s, None, None, launch=job)
            self.building[repo] = sp
            self.waiting.setdefault(repo, []).append(job)
        else:
            self._start_session(job)

    def _start_session(self, job: LaunchJob) -> None:
        self.pod_counter += 1
        pod = user_pod(f"jupyter-{self.pod_counter}", self.workload.binder, job.image)
        self._create(pod, job.session_s, None, None)

    def _trim(self, job: TrimJob) -> None:
        members = self.groups.get(job.group, {})
        excess = len(members) - job.keep
        if excess <= 0:
            return
        ids = sorted(members)
        if self.policy.dask_retirement == "node-aware":
            placed = {uid: members[uid].node for uid in ids}
            retired = [members[uid] for uid in choose_retirements(placed, excess)]
        else:
            chosen = self.trim_rng.choice(len(ids), size=excess, replace=False)
            retired = [members[ids[k]] for k in sorted(int(c) for c in chosen)]
        # one decision: the workers go together, and only then do waiting pods get the room
        # (retrying after each, a waiting worker the trim retires later was bound first)
        for sp in retired:
            self._finish(sp, retry=False)
        if self.pending:
            self._retry_pending()

    # ---- pods ---------------------------------------------------------------------------

    def _create(
        self,
        pod: Pod,
        duration: float | None,
        end_at: float | None,
        group: str | None,
        launch: LaunchJob | None = None,
    ) -> SimPod:
        self.ctx.now = self.now
        self.ctx.cache.clear()
        pod.created = self.now
        pod = self.policy.prepare(pod, self.table, self.ctx)
        self.uid_counter += 1
        profile = self.policy.profile_for(pod)
        sp = SimPod(pod, profile, self.now, duration, end_at, group, launch, self.uid_counter)
        # pending pods of one retry key fail alike, so one failure skips the rest until the
        # next event; a pod a pod-specific filter judges (a build waiting for its cache node)
        # is its own key, or it would hold up builds that could go now
        sp.retry_key = (
            tuple(sorted(pod.requests.items())),
            pod.tolerations,
            tuple(sorted(pod.node_selector.items())),
            pod.required_terms,
            id(sp.profile),
            sp.uid if any(f.pod_specific for f in profile.filters) else 0,
        )
        sp.vec = np.array([pod.requests.get(CPU, 0), pod.requests.get(MEMORY, 0), 1], dtype=np.int64)
        self.live_pods += 1
        if group is not None:
            self.groups.setdefault(group, {})[sp.uid] = sp
        if end_at is not None:
            self._push(end_at, _END, sp)
        if not self._try_bind(sp):
            self.pending[sp.uid] = sp
        return sp

    def _try_bind(self, sp: SimPod) -> bool:
        if sp.end_at is not None and sp.end_at <= self.now:
            return False  # deleted at this instant (its end is due): it never runs
        ctx = self.ctx
        ctx.now = self.now
        ctx.cache.clear()
        pod = sp.pod
        if self.needs_expiry:
            end = sp.end_at if sp.end_at is not None else self.now + (sp.duration or 0.0)
            pod.annotations[EXPECTED_END_ANNOTATION] = repr(end)
        slot = sp.profile.select(pod, self.table, ctx, self.rng, self.scans[sp.profile.name])
        if slot is None:
            return False
        self._bind(sp, slot)
        return True

    def _bind(self, sp: SimPod, slot: int) -> None:
        node = self.by_slot[slot]
        now = self.now
        self.table.add_pod(slot, sp.pod)
        for image in sp.pod.images:  # kubelet pulls what the node lacks
            self._use_image(node, image)
        node.pods[sp.uid] = sp
        sp.slot, sp.node = slot, node.name
        self.scheduled += 1
        self.pending_s.append(now - sp.created)
        duration = sp.duration
        repo = sp.pod.build_repo
        if repo is not None and duration is not None:
            node.builds += 1
            assert node.cache is not None
            if repo in node.cache:
                outcome = "hit"
                duration *= self.cache_config.hit_time_fraction
            elif repo not in self.last_build_node:
                outcome = "first"
            elif any(n.cache is not None and repo in n.cache for n in self.nodes.values()):
                outcome = "elsewhere"
            else:
                outcome = "lost"
                self.last_build_node[repo].caches_lost += 1
            self.build_outcomes[outcome] += 1
            self.last_build_node[repo] = node
        if sp.end_at is None:
            sp.ends = now + (duration or 0.0)
            self._push(sp.ends, _END, sp)
        else:
            sp.ends = sp.end_at
        if self.needs_expiry:
            col = self.table.extra["expiry"]
            col[slot] = max(col[slot], sp.ends)
        assert sp.vec is not None
        self.bound.change(now, sp.vec, 1)

    def _end(self, sp: SimPod) -> None:
        if not sp.done:
            self._finish(sp)

    def _finish(self, sp: SimPod, retry: bool = True) -> None:
        """The pod ends (or is deleted while pending); ``retry``: then retry the waiting
        pods (a caller ending several pods at once retries once, after the last)."""
        sp.done = True
        self.live_pods -= 1
        self.last_end = self.now
        if sp.group is not None:
            self.groups[sp.group].pop(sp.uid, None)
        if sp.slot < 0:
            self.pending.pop(sp.uid, None)
            self.unscheduled += 1
            if sp.launch is not None:  # a build deleted before it ran: launches give up
                self.building.pop(sp.launch.repo, None)
                self.waiting.pop(sp.launch.repo, None)
            return
        node = self.by_slot[sp.slot]
        self.table.remove_pod(sp.slot, sp.pod)
        del node.pods[sp.uid]
        assert sp.vec is not None
        self.bound.change(self.now, sp.vec, -1)
        if self.needs_expiry:
            self.table.extra["expiry"][sp.slot] = max(
                (p.ends or 0.0 for p in node.pods.values()), default=0.0
            )
        repo = sp.pod.build_repo
        if repo is not None and sp.launch is not None:
            self.build_s.append(self.now - sp.created)
            self.history.record(repo, node.name, self.now)
            assert node.cache is not None
            for pruned in node.cache.touch(repo):  # the image cleaner ran: those images are gone
                self.history.forget(pruned, node.name)
            if sp.launch.image:
                self._use_image(node, sp.launch.image)  # the image it built
            self.building.pop(repo, None)
            for job in self.waiting.pop(repo, []):
                self._start_session(job)
        if retry and self.pending:
            self._retry_pending()

    def _retry_pending(self) -> None:
        failed: set[tuple[Any, ...]] = set()
        for key, sp in list(self.pending.items()):
            if sp.retry_key in failed:
                continue
            if self._try_bind(sp):
                del self.pending[key]
            else:
                failed.add(sp.retry_key)

    def _use_image(self, node: SimNode, image: str) -> None:
        """``node`` holds ``image`` now; what its kubelet lists follows."""
        assert node.images is not None
        for name, size in node.images.touch(image, self.image_sizes.get(image, 0)):
            if size is None:
                self.table.remove_image(node.slot, name)
            else:
                self.table.add_image(node.slot, name, size)

    # ---- nodes and the autoscaler ----------------------------------------------------

    def _add_node(self, pool: NodePool, requested_at: float, ready_at: float) -> SimNode:
        self.node_counter += 1
        node = SimNode(f"{pool.name}-{self.node_counter:05d}", pool, requested_at, ready_at)
        self.all_nodes.append(node)
        if ready_at <= self.now:
            self._join(node)
        else:
            self.upcoming[node.name] = node
            self._push(ready_at, _READY, node)
        self._record_nodes()
        return node

    def _join(self, node: SimNode) -> None:
        node.slot = self.table.upsert_node(
            node.name,
            node.pool.allocatable,
            # kubelet's own labels: the hostname (BinderHub's sticky affinity names it)
            labels={**node.pool.labels, POOL_LABEL: node.pool.name, HOSTNAME_LABEL: node.name},
            created=node.requested_at,
        )
        if self.needs_expiry:
            self.table.extra["expiry"][node.slot] = 0.0
        node.cache = NodeCache(self.cache_config)
        node.images = NodeImages(self.cache_config)
        self.nodes[node.name] = node
        self.by_slot[node.slot] = node

    def _ready(self, node: SimNode) -> None:
        self.upcoming.pop(node.name, None)
        self._join(node)
        self._record_nodes()
        if self.pending:
            self._retry_pending()

    def _scan(self) -> None:
        if self.pending:
            self._retry_pending()  # kube-scheduler retries waiting pods periodically too
        if self.pending:
            self._scale_up()
        self._scale_down()

    def _scale_up(self) -> None:
        """Least-waste expander over the pools; binpacking estimate on empty nodes, counting
        the free room of nodes already on their way."""
        # CA simulates kube-scheduler's own filters: a pod that fits an existing node (but
        # waits for another reason, e.g. delay scheduling) does not trigger a scale-up.
        pending = [
            sp
            for sp in self.pending.values()
            if sp.created < self.now and self._ca_profile.feasible(sp.pod, self.table, self.ctx).size == 0
        ]
        if not pending:
            return
        best: tuple[float, NodePool, int] | None = None
        for pool in self.workload.pools:
            alloc = np.array(
                [
                    pool.allocatable.get(CPU, 0),
                    pool.allocatable.get(MEMORY, 0),
                    pool.allocatable.get(PODS, 110),
                ]
            )
            bins: list[np.ndarray] = [alloc.copy() for n in self.upcoming.values() if n.pool is pool]
            on_the_way = len(bins)
            new = 0
            for sp in pending:
                vec = sp.vec
                assert vec is not None
                if (vec > alloc).any():
                    continue  # fits no node of this pool
                for b in bins:
                    if (vec <= b).all():
                        b -= vec
                        break
                else:
                    b = alloc - vec
                    bins.append(b)
                    new += 1
            size = sum(1 for n in self.nodes.values() if n.pool is pool) + sum(
                1 for n in self.upcoming.values() if n.pool is pool
            )
            new = min(new, pool.max_size - size)
            if new <= 0:
                continue
            # the option's waste: its new nodes' unused cpu and memory fractions, over the pods
            # they take (those that fit a node on its way are not the option's: the autoscaler
            # filters them out before scale-up); each new node's used room is what its bin lost
            used = sum((alloc - b for b in bins[on_the_way : on_the_way + new]), np.zeros(3, dtype=np.int64))
            total = alloc[:2] * new
            waste = float(((total - used[:2]) / total).sum())
            if best is None or waste < best[0]:
                best = (waste, pool, new)
        if best is None:
            return
        _, pool, new = best
        for _ in range(new):
            self._add_node(pool, requested_at=self.now, ready_at=self.now + pool.provision_delay_s)
        self.last_scale_up = self.now
        if pool.provision_delay_s <= 0:
            # the nodes are ready now: the pods go to them before scale-down sees them empty
            self._retry_pending()

    def _scale_down(self) -> None:
        ca = self.ca
        table = self.table
        now = self.now
        removable: list[SimNode] = []
        for node in list(self.nodes.values()):
            # Only an empty node is unneeded: the workloads' pods are bare (the autoscaler does
            # not evict them), and draining pods that have a controller is not modelled.
            unneeded = not node.pods
            if unneeded:
                if node.unneeded_since is None:
                    node.unneeded_since = now
                    if ca.soft_taint_unneeded:
                        table.set_taints(node.name, [_SOFT_TAINT])
                if now - node.unneeded_since >= ca.scale_down_unneeded_time_s:
                    removable.append(node)
            elif node.unneeded_since is not None:
                node.unneeded_since = None
                if ca.soft_taint_unneeded:
                    table.set_taints(node.name, [])
        if not removable or now - self.last_scale_up < ca.scale_down_delay_after_add_s:
            return
        removed = 0
        for node in removable:
            if removed >= ca.max_empty_bulk_delete:
                break
            pool_size = sum(1 for n in self.nodes.values() if n.pool is node.pool)
            if pool_size <= node.pool.min_size or node.pods:
                continue
            self._delete_node(node)
            removed += 1

    def _delete_node(self, node: SimNode) -> None:
        self.table.remove_node(node.name)
        del self.nodes[node.name]
        del self.by_slot[node.slot]
        node.deleted_at = self.now
        node.cache = None
        node.images = None
        self.history.forget_node(node.name)
        self._record_nodes()

    # ---- results -----------------------------------------------------------------------

    def _result(self) -> RunResult:
        self.unscheduled += len(self.pending)
        # The run ends when the last pod ends; nodes still up then count until that moment.
        # Pods that never fit may keep the autoscaler asking for nodes after it: those
        # count nothing (not a negative span) and are not in the peak.
        horizon = self.last_end
        upto = int(np.searchsorted(self.node_t, horizon, side="right"))
        final_nodes = self.node_n[upto - 1]

        def charged_s(n: SimNode) -> float:
            end = min(n.deleted_at if n.deleted_at is not None else horizon, horizon)
            return max(end - n.requested_at, 0.0)

        node_hours = sum(charged_s(n) for n in self.all_nodes) / 3600.0
        price = {p.name: p.price_per_hour for p in self.workload.pools}
        cost = sum(charged_s(n) / 3600.0 * price[n.pool.name] for n in self.all_nodes)
        bt, bv = self.bound.times, self.bound.values
        bound_hours = integrate_step(bt, bv, horizon) / 3600.0
        ft, fv = window_max_step(bt, bv, self.ca.scale_down_unneeded_time_s, horizon)
        floor_hours = integrate_step(ft, fv, horizon) / 3600.0
        outcomes = self.build_outcomes
        total_builds = sum(outcomes.values())

        def of_builds(n: int) -> float:
            return n / total_builds if total_builds else 0.0

        share = of_builds(max((n.builds for n in self.all_nodes), default=0))
        # the bound in effect just before the end (at the end itself every pod has left)
        final_bound = bv[int(np.searchsorted(bt, horizon, side="left")) - 1] if horizon > 0 else 0
        metrics = {
            "node_hours": node_hours,
            "lower_bound_node_hours": bound_hours,
            "ratio_to_bound": node_hours / bound_hours if bound_hours else 0.0,
            "floor_node_hours": floor_hours,
            "ratio_to_floor": node_hours / floor_hours if floor_hours else 0.0,
            "peak_nodes": max(self.node_n[:upto]),
            "final_nodes": final_nodes,
            "lower_bound_final_nodes": final_bound,
            "pods_scheduled": self.scheduled,
            "pods_unscheduled": self.unscheduled,
            "pending_p95_s": percentile(self.pending_s, 95),
            "builds": total_builds,
            "build_cache_hit_rate": of_builds(outcomes["hit"]),
            "build_first_share": of_builds(outcomes["first"]),
            "build_cache_lost_share": of_builds(outcomes["lost"]),
            "build_elsewhere_share": of_builds(outcomes["elsewhere"]),
            "build_p50_s": percentile(self.build_s, 50),
            "build_p95_s": percentile(self.build_s, 95),
            "max_node_build_share": share,
            "cost": cost,
        }
        # the node count holds until the end: close the step series there for plots
        node_t = [t for t in self.node_t if t <= horizon] + [horizon]
        node_n = [*self.node_n[: len(node_t) - 1], final_nodes]
        series = Series(node_t, node_n, bt, bv, ft, fv, self.build_s)
        nodes = [
            NodeRecord(n.name, n.ready_at, n.deleted_at, n.builds, n.caches_lost) for n in self.all_nodes
        ]
        return RunResult(metrics, series, nodes)
