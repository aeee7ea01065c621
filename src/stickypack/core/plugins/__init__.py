"""Filter and score plugins, each with a name and one job, composed by profiles
(:mod:`stickypack.core.framework`, :mod:`stickypack.core.policy`).

- :mod:`.kubescheduler`: kube-scheduler's own plugins, with its integer arithmetic.
- :mod:`.builds`: stickypack's plugins for build pods (locality, spread, room for builds).
- :mod:`.scaledown`: stickypack's plugins for not blocking scale-down, and the oracle's.
- :mod:`.binderhub`: what BinderHub itself does to a build pod (pod mutators).
- :mod:`.common`: what they share.
"""

from stickypack.core.plugins.binderhub import BinderHubAntiAffinity, BinderHubStickyBuilds
from stickypack.core.plugins.builds import (
    BuildBounds,
    BuildHeadroom,
    BuildLocality,
    BuildSpread,
    CacheKeeper,
    DelayForLocality,
)
from stickypack.core.plugins.common import (
    PluginArgsError,
    ScoreMemo,
    default_normalize,
    min_max_scores,
    node_state_keys,
)
from stickypack.core.plugins.kubescheduler import (
    BalancedAllocation,
    BuildAntiAffinity,
    ImageLocality,
    LeastAllocated,
    MostAllocated,
    NodeAffinityFilter,
    NodeAffinityScore,
    NodeReady,
    NodeResourcesFitFilter,
    NodeUnschedulable,
    PodTopologySpreadScore,
    RequestedToCapacityRatio,
    TaintTolerationFilter,
    TaintTolerationScore,
    node_matches_required,
)
from stickypack.core.plugins.scaledown import (
    EXPECTED_END_ANNOTATION,
    DrainForecast,
    LifetimeAware,
    NodeAge,
    ScaleDownAware,
    ScaleDownAwareFilter,
    gpu_columns,
    kept_at_min_size,
    quiet_nodes,
    utilization_and_threshold,
    utilization_with,
)

__all__ = [
    "EXPECTED_END_ANNOTATION",
    "BalancedAllocation",
    "BinderHubAntiAffinity",
    "BinderHubStickyBuilds",
    "BuildAntiAffinity",
    "BuildBounds",
    "BuildHeadroom",
    "BuildLocality",
    "BuildSpread",
    "CacheKeeper",
    "DelayForLocality",
    "DrainForecast",
    "ImageLocality",
    "LeastAllocated",
    "LifetimeAware",
    "MostAllocated",
    "NodeAffinityFilter",
    "NodeAffinityScore",
    "NodeAge",
    "NodeReady",
    "NodeResourcesFitFilter",
    "NodeUnschedulable",
    "PluginArgsError",
    "PodTopologySpreadScore",
    "RequestedToCapacityRatio",
    "ScaleDownAware",
    "ScaleDownAwareFilter",
    "ScoreMemo",
    "TaintTolerationFilter",
    "TaintTolerationScore",
    "default_normalize",
    "gpu_columns",
    "kept_at_min_size",
    "min_max_scores",
    "node_matches_required",
    "node_state_keys",
    "quiet_nodes",
    "utilization_and_threshold",
    "utilization_with",
]
