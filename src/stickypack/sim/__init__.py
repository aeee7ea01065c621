"""The what-if simulator: workloads, a cluster-autoscaler model, build caches, metrics."""

from stickypack.sim.engine import Simulation
from stickypack.sim.runner import compare

__all__ = ["Simulation", "compare"]
