"""The simulator's `default` and `z2jh` policies pick the nodes the real kube-scheduler picks.

Random cases (node sizes, bound pods, taints, tolerations, preferred affinity) placed by the
real kube-scheduler of the local control plane; the node it binds must be among the policy's
top-scoring nodes. `benchmarks/fidelity.py --cases 300` runs the long version.
"""

from __future__ import annotations

import pytest

from stickypack.policies import load_builtin
from stickypack.render import scheduler_config
from stickypack.testing.fidelity import agreement, run_cases

pytestmark = pytest.mark.controlplane

CASES = 40


@pytest.mark.parametrize(
    ("policy", "profile"),
    [("default", "default-scheduler"), ("z2jh", "stickypack")],
)
def test_policy_agrees_with_kube_scheduler(cluster, policy, profile):
    cluster.start_scheduler(scheduler_config([profile]))
    cases = run_cases(cluster, load_builtin(policy), profile, CASES, seed=7)
    bad = [c.describe() for c in cases if not c.agrees]
    assert len(cases) == CASES
    assert all(c.chosen is not None for c in cases), "\n".join(bad)
    assert agreement(cases) >= 0.975, "\n".join(bad)


def test_a_spreading_policy_disagrees_with_the_packing_scheduler(cluster):
    """The check has teeth: `default` (spreading) against the packing profile disagrees."""
    cluster.start_scheduler(scheduler_config(["stickypack"]))
    cases = run_cases(cluster, load_builtin("default"), "stickypack", 25, seed=11)
    assert agreement(cases) < 0.8
