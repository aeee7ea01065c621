"""What BinderHub itself does to a build pod, as pod mutators: sticky builds' preferred node
affinity and the build pods' preferred anti-affinity."""

from __future__ import annotations

from stickypack.core.framework import (
    PodMutator,
    SchedulingContext,
)
from stickypack.core.labels import (
    HOSTNAME_LABEL,
    NodeSelectorTerm,
    PreferredTerm,
    Requirement,
)
from stickypack.core.nodetable import NodeTable
from stickypack.core.pod import BUILD_LABELS, Pod, PodAffinityTerm
from stickypack.core.podaffinity import RequiredPodAffinityTerm, WeightedPodAffinityTerm
from stickypack.core.rendezvous import rendezvous_rank
from stickypack.core.routing import LabelSelector


class BinderHubStickyBuilds(PodMutator):
    """What BinderHub does to a build pod with ``sticky_builds = True``: a preferred node
    affinity, weight 100, ``kubernetes.io/hostname In [top rendezvous node]`` over the
    builder nodes, keyed by the repo URL."""

    name = "BinderHubStickyBuilds"

    def mutate(self, pod: Pod, table: NodeTable, ctx: SchedulingContext) -> Pod:
        repo = pod.build_repo
        if repo is None:
            return pod
        buckets = ctx.builder_nodes if ctx.builder_nodes is not None else list(table.index)
        ranked = rendezvous_rank(buckets, repo)
        if not ranked:
            return pod
        term = NodeSelectorTerm((Requirement(HOSTNAME_LABEL, "In", (ranked[0],)),))
        pod.preferred_terms = (*pod.preferred_terms, PreferredTerm(100, term))
        return pod


class BinderHubAntiAffinity(PodMutator):
    """What BinderHub does to a build pod with sticky builds off (its default): a preferred
    pod anti-affinity, weight 100, topology hostname, against other build pods (of the pod's
    namespace): in :attr:`Pod.pod_anti_affinity` and, in full, in
    :attr:`Pod.preferred_pod_anti_affinity`. A build pod that carries that term already (one
    read from the cluster, which BinderHub made) is left as it is."""

    name = "BinderHubAntiAffinity"

    def mutate(self, pod: Pod, table: NodeTable, ctx: SchedulingContext) -> Pod:
        term = PodAffinityTerm(100, tuple(sorted(BUILD_LABELS.items())), HOSTNAME_LABEL)
        if pod.build_repo is None or term in pod.pod_anti_affinity:
            return pod  # a build pod read from the cluster has it from BinderHub already
        pod.pod_anti_affinity = (*pod.pod_anti_affinity, term)
        selector = LabelSelector(dict(BUILD_LABELS), ())
        full = RequiredPodAffinityTerm(selector, HOSTNAME_LABEL, frozenset({pod.namespace}))
        pod.preferred_pod_anti_affinity = (
            *pod.preferred_pod_anti_affinity,
            WeightedPodAffinityTerm(100, full),
        )
        return pod
