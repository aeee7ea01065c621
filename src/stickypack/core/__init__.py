"""The placement engine: pure, no I/O, no clock, no globals.

Everything else in stickypack (the simulator, the live extender, the routing webhook,
``stickypack inspect``, BinderHub's library mode, the Dask preload) drives these same
objects.
"""

from stickypack.core.framework import (
    MAX_NODE_SCORE,
    FilterPlugin,
    PluginContractError,
    PodMutator,
    Profile,
    SchedulingContext,
    ScorePlugin,
)
from stickypack.core.history import BuildHistory
from stickypack.core.labels import Taint, Toleration
from stickypack.core.nodetable import NodeTable
from stickypack.core.pod import Pod, PodSpecError
from stickypack.core.policy import (
    BUILTIN_PLUGINS,
    PluginRegistry,
    Policy,
    PolicyError,
    policy_from_dict,
    policy_from_yaml,
)
from stickypack.core.quantity import QuantityError, int_value, milli_value, parse_quantity
from stickypack.core.rendezvous import bounded_load_pick, rendezvous_rank, weighted_rendezvous_rank

__all__ = [
    "BUILTIN_PLUGINS",
    "MAX_NODE_SCORE",
    "BuildHistory",
    "FilterPlugin",
    "NodeTable",
    "PluginContractError",
    "PluginRegistry",
    "Pod",
    "PodMutator",
    "PodSpecError",
    "Policy",
    "PolicyError",
    "Profile",
    "QuantityError",
    "SchedulingContext",
    "ScorePlugin",
    "Taint",
    "Toleration",
    "bounded_load_pick",
    "int_value",
    "milli_value",
    "parse_quantity",
    "policy_from_dict",
    "policy_from_yaml",
    "rendezvous_rank",
    "weighted_rendezvous_rank",
]
