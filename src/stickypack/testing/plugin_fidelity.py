"""Does each kube-scheduler plugin of the core score as the real one does, with its own
arguments? Random cases per *family* of plugins, each against policies of its own.

:mod:`stickypack.testing.fidelity` compares the built-in ``default`` and ``z2jh`` policies
with the real kube-scheduler. Those use a few plugin settings only (LeastAllocated and
MostAllocated over cpu and memory, weight 1 each; zero to two PreferNoSchedule taints;
preferred node affinity on one label). A :class:`Family` here holds several small
policies (YAML, as a user writes them: ``docs/configuration.md``) that put one plugin to
work with other arguments: RequestedToCapacityRatio shapes, resource weights and extended
resources (``nvidia.com/gpu``, ``example.com/foo``, ``ephemeral-storage``) for
NodeResourcesFit and NodeResourcesBalancedAllocation, up to five PreferNoSchedule taints
against tolerations of every form, several weighted preferred node-affinity terms with
every operator and ``matchFields``, and BinderHub's build-pod anti-affinity
(InterPodAffinity). Each policy has one profile; :func:`kube_scheduler_profile` turns it
into the matching ``KubeSchedulerConfiguration`` profile, named as the policy's profile.
One kube-scheduler runs all the profiles of a family, and case ``i`` goes to profile
``i mod n`` (its pod's ``schedulerName``). The cases run through
:func:`~stickypack.testing.fidelity.run_cases` (batches, one label per case) and agree
when the real choice is among the policy's best.

The profiles of these policies are written by
:func:`stickypack.render.kube_scheduler_profile`, what ``stickypack render scheduler-config
--policy-file`` writes.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from stickypack.core import NodeTable, Pod, SchedulingContext
from stickypack.core.framework import Profile
from stickypack.core.policy import Policy, policy_from_yaml
from stickypack.render import API_VERSION, KIND, kube_scheduler_profile
from stickypack.testing.controlplane import ControlPlane, pod_manifest
from stickypack.testing.fidelity import (
    _CPUS,
    _MEMS,
    _POD_CPU,
    _POD_MEM,
    CASE_LABEL,
    Case,
    _node_table,
    run_cases,
)


def kube_scheduler_config(policies: Sequence[Policy]) -> dict[str, Any]:
    """A ``KubeSchedulerConfiguration`` with one profile per policy (its only profile, named
    as that profile: :func:`kube_scheduler_profile`)."""
    profiles = []
    for policy in policies:
        if len(policy.profiles) != 1:
            raise ValueError(f"policy {policy.name}: one profile expected, got {len(policy.profiles)}")
        profiles.append(kube_scheduler_profile(policy.profiles[0]))
    return {"apiVersion": API_VERSION, "kind": KIND, "profiles": profiles}


# ---- families ------------------------------------------------------------------------------

GPU = "nvidia.com/gpu"
FOO = "example.com/foo"
#: Resources a pod must list in its limits too, equal to its requests (extended resources).
_EXTENDED = (GPU, FOO)


Draw = Callable[[random.Random, int, str, Profile], Case]


@dataclass(frozen=True)
class Family:
    """Plugins checked together: ``policies`` (YAML, one profile each, every profile name
    distinct) and ``draw(rng, index, scheduler_name, profile)``, which makes a case whose pod
    goes to ``scheduler_name`` and fits a node under ``profile``'s filters."""

    name: str
    summary: str
    policies: tuple[str, ...]
    draw: Draw

    def load(self) -> list[Policy]:
        return [policy_from_yaml(text, f"{self.name}[{i}]") for i, text in enumerate(self.policies)]


def _manifest(
    name: str, requests: dict[str, str], scheduler_name: str | None = None, **kwargs: Any
) -> dict[str, Any]:
    """A pod requesting ``requests`` (cpu and memory as :func:`pod_manifest`; an extended
    resource with a limit equal to its request, as the API server demands)."""
    raw = pod_manifest(name, cpu=requests.get("cpu"), memory=requests.get("memory"), **kwargs)
    if scheduler_name is not None:
        raw["spec"]["schedulerName"] = scheduler_name
    resources = raw["spec"]["containers"][0]["resources"]
    resources["requests"].update({k: v for k, v in requests.items() if k not in ("cpu", "memory")})
    limits = {k: v for k, v in requests.items() if k in _EXTENDED}
    if limits:
        resources["limits"] = limits
    return raw


def _nodes(rng: random.Random, label: str, extended: bool) -> list[dict[str, Any]]:
    nodes = []
    for j in range(rng.randint(2, 6)):
        node: dict[str, Any] = {
            "name": f"{label}-n{j}",
            "cpu": rng.choice(_CPUS),
            "memory": rng.choice(_MEMS),
            "labels": {CASE_LABEL: label},
            "taints": [],
        }
        if extended:
            node["ephemeral_storage"] = rng.choice(["20Gi", "50Gi", "100Gi", "200Gi"])
            ext = {}
            if rng.random() < 0.6:
                ext[GPU] = rng.choice(["1", "2", "4", "8"])
            if rng.random() < 0.5:
                ext[FOO] = rng.choice(["3", "10", "100"])
            node["extended"] = ext
        nodes.append(node)
    return nodes


def _requests(rng: random.Random, extended: bool, bound: bool) -> dict[str, str]:
    """Random requests: cpu and memory (either may be absent), and with ``extended`` now
    and then GPUs, ``example.com/foo`` and ephemeral storage."""
    out = {k: v for k, v in (("cpu", rng.choice(_POD_CPU)), ("memory", rng.choice(_POD_MEM))) if v}
    if extended:
        if rng.random() < (0.3 if bound else 0.5):
            out[GPU] = str(rng.randint(1, 2))
        if rng.random() < (0.3 if bound else 0.4):
            out[FOO] = str(rng.randint(1, 5))
        if rng.random() < (0.3 if bound else 0.4):
            out["ephemeral-storage"] = rng.choice(["1Gi", "5Gi", "10Gi"])
    return out


def _bind(
    rng: random.Random, label: str, nodes: list[dict[str, Any]], make: Callable[[str], dict[str, Any]]
) -> list[dict[str, Any]]:
    """Up to four pods per node made by ``make(name)``, each bound to a random node where it
    fits (as a kubelet would keep them)."""
    table = _node_table([Case(-1, nodes, [], {})])
    bound = []
    for k in range(rng.randint(0, 4 * len(nodes))):
        node = rng.choice(nodes)
        raw = make(f"{label}-b{k}")
        raw["spec"]["nodeName"] = node["name"]
        pod, i = Pod.from_dict(raw), table.slot(node["name"])
        vec = table.pod_vector(pod)
        if (table.requested[i] + vec > table.alloc[i])[vec > 0].any():
            continue
        table.add_pod(i, pod)
        bound.append(raw)
    return bound


def _fits(case: Case, profile: Profile) -> bool:
    table: NodeTable = _node_table([case])
    return bool(profile.feasible(Pod.from_dict(case.pod), table, SchedulingContext()).size)


def _until_feasible(draw: Callable[[], Case], profile: Profile) -> Case:
    while True:
        case = draw()
        if _fits(case, profile):
            return case


def _draw_resources(rng: random.Random, index: int, scheduler_name: str, profile: Profile) -> Case:
    """Nodes of random cpu, memory, ephemeral storage, GPUs and ``example.com/foo``; bound
    pods requesting them; a pod that may request any of them."""
    label = f"c{index}"

    def one() -> Case:
        nodes = _nodes(rng, label, extended=True)
        bound = _bind(rng, label, nodes, lambda name: _manifest(name, _requests(rng, True, bound=True)))
        pod = _manifest(f"{label}-pod", _requests(rng, True, bound=False), scheduler_name)
        pod["spec"]["nodeSelector"] = {CASE_LABEL: label}
        if rng.random() < 0.2:
            # an init container: the pod needs the larger of it and the containers, per
            # resource (and kube-scheduler's 100m / 200Mi for what it leaves unset, in scoring)
            init = _manifest("init", _requests(rng, True, bound=False))["spec"]["containers"][0]
            pod["spec"]["initContainers"] = [{**init, "name": "init"}]
        return Case(index, nodes, bound, pod)

    return _until_feasible(one, profile)


_SOFT_KEYS = ("pa", "pb", "pc", "pd", "pe")
_TOLERATIONS: tuple[dict[str, str], ...] = (
    {"key": "pa", "operator": "Exists"},  # any effect
    {"key": "pb", "operator": "Equal", "value": "x", "effect": "PreferNoSchedule"},
    {"key": "pc", "operator": "Equal", "value": "y"},
    {"key": "pd", "operator": "Exists", "effect": "NoSchedule"},  # not for PreferNoSchedule
    {"key": "pe", "operator": "Equal", "value": "", "effect": "PreferNoSchedule"},
    {"key": "pb", "operator": "Exists", "effect": "NoExecute"},  # not for PreferNoSchedule
    {"key": "hard", "operator": "Equal", "value": "1", "effect": "NoSchedule"},
)


def _draw_taints(rng: random.Random, index: int, scheduler_name: str, profile: Profile) -> Case:
    """Nodes with zero to five PreferNoSchedule taints (keys ``pa``..``pe``, values ``x``,
    ``y`` or none) and now and then a NoSchedule or NoExecute one; a pod with tolerations of
    every form (by key, by key and value, for one effect or all, an empty key tolerating
    every PreferNoSchedule taint, or every taint)."""
    label = f"c{index}"

    def one() -> Case:
        nodes = _nodes(rng, label, extended=False)
        for node in nodes:
            count = rng.choice([0, 0, 1, 2, 3, 4, 5])
            for key in rng.sample(_SOFT_KEYS, count):
                value = rng.choice(["", "x", "y"])
                node["taints"].append(
                    f"{key}={value}:PreferNoSchedule" if value else f"{key}:PreferNoSchedule"
                )
            if rng.random() < 0.15:
                node["taints"].append("hard=1:NoSchedule")
            if rng.random() < 0.1:
                node["taints"].append("pd:NoSchedule")
            if rng.random() < 0.1:
                node["taints"].append("pb=x:NoExecute")
        bound = _bind(rng, label, nodes, lambda name: _manifest(name, _requests(rng, False, bound=True)))
        pod = _manifest(f"{label}-pod", _requests(rng, False, bound=False), scheduler_name)
        pod["spec"]["nodeSelector"] = {CASE_LABEL: label}
        tolerations = [dict(t) for t in rng.sample(_TOLERATIONS, rng.choice([0, 1, 1, 2, 3]))]
        if rng.random() < 0.05:
            tolerations.append({"operator": "Exists", "effect": "PreferNoSchedule"})
        if rng.random() < 0.03:
            tolerations.append({"operator": "Exists"})  # every taint
        if tolerations:
            pod["spec"]["tolerations"] = tolerations
        return Case(index, nodes, bound, pod)

    return _until_feasible(one, profile)


def _expression(rng: random.Random) -> dict[str, Any]:
    kind = rng.randrange(7)
    if kind == 0:
        return {"key": "zone", "operator": "In", "values": rng.sample("abc", rng.randint(1, 2))}
    if kind == 1:
        return {"key": "zone", "operator": "NotIn", "values": [rng.choice("abc")]}
    if kind == 2:
        return {
            "key": "tier",
            "operator": "In",
            "values": rng.sample(["gold", "silver", "bronze"], rng.randint(1, 2)),
        }
    if kind == 3:
        return {"key": rng.choice(["tier", "ssd"]), "operator": rng.choice(["Exists", "DoesNotExist"])}
    if kind == 4:
        return {"key": "gen", "operator": rng.choice(["Gt", "Lt"]), "values": [str(rng.randint(0, 12))]}
    if kind == 5:
        return {
            "key": "gen",
            "operator": "In",
            "values": [str(rng.randint(1, 12)) for _ in range(rng.randint(1, 3))],
        }
    return {"key": "ssd", "operator": "NotIn", "values": ["true"]}


def _field(rng: random.Random, nodes: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "key": "metadata.name",
        "operator": rng.choice(["In", "NotIn"]),
        "values": [rng.choice(nodes)["name"]],
    }


def _draw_affinity(rng: random.Random, index: int, scheduler_name: str, profile: Profile) -> Case:
    """Nodes labelled ``zone``, now and then ``tier``, ``gen`` (an integer) and ``ssd``; a pod
    with one to five preferred terms (weights 1..100) of zero to three expressions of every
    operator and now and then a ``matchFields`` on the node's name (an empty term now and
    then, which matches no node), and in a quarter of the cases required terms too (the
    name NotIn, or a zone)."""
    label = f"c{index}"

    def one() -> Case:
        nodes = _nodes(rng, label, extended=False)
        for node in nodes:
            labels = node["labels"]
            labels["zone"] = rng.choice("abc")
            if rng.random() < 0.7:
                labels["tier"] = rng.choice(["gold", "silver", "bronze"])
            if rng.random() < 0.8:
                # an integer, now and then with a leading zero or none at all (Gt and Lt
                # match no node whose value is not an integer)
                labels["gen"] = rng.choice([str(rng.randint(1, 12))] * 8 + ["07", "v3"])
            if rng.random() < 0.4:
                labels["ssd"] = "true"
        bound = _bind(rng, label, nodes, lambda name: _manifest(name, _requests(rng, False, bound=True)))
        pod = _manifest(f"{label}-pod", _requests(rng, False, bound=False), scheduler_name)
        pod["spec"]["nodeSelector"] = {CASE_LABEL: label}
        terms = []
        for _ in range(rng.randint(1, 5)):
            term: dict[str, Any] = {}
            if rng.random() > 0.05:
                exprs = [_expression(rng) for _ in range(rng.randint(0, 3))]
                if exprs:
                    term["matchExpressions"] = exprs
                if not exprs or rng.random() < 0.3:
                    term["matchFields"] = [_field(rng, nodes)]
            terms.append({"weight": rng.randint(1, 100), "preference": term})
        affinity: dict[str, Any] = {"preferredDuringSchedulingIgnoredDuringExecution": terms}
        if rng.random() < 0.25:
            required = [
                {"matchFields": [{**_field(rng, nodes), "operator": "NotIn"}]}
                if rng.random() < 0.6
                else {"matchExpressions": [_expression(rng)]}
                for _ in range(rng.randint(1, 2))
            ]
            affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": required}
        pod["spec"]["affinity"] = {"nodeAffinity": affinity}
        return Case(index, nodes, bound, pod)

    return _until_feasible(one, profile)


#: BinderHub's build pods: labels, the repo annotation and (sticky builds off, its default)
#: the preferred anti-affinity against other build pods.
BUILD_ANTI_AFFINITY = {
    "podAntiAffinity": {
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
}


def _build_pod(
    name: str, requests: dict[str, str], repo: str, scheduler_name: str | None = None
) -> dict[str, Any]:
    raw = _manifest(name, requests, scheduler_name, labels={"component": "binderhub-build"})
    raw["metadata"]["annotations"] = {"binder-repo": repo}
    raw["spec"]["affinity"] = copy.deepcopy(BUILD_ANTI_AFFINITY)
    return raw


def _draw_builds(rng: random.Random, index: int, scheduler_name: str, profile: Profile) -> Case:
    """Nodes with user pods and BinderHub build pods bound (each build pod with BinderHub's
    anti-affinity), and a build pod to place, with it too."""
    label = f"c{index}"

    def bound_pod(name: str) -> dict[str, Any]:
        requests = _requests(rng, False, bound=True)
        if rng.random() < 0.5:
            return _build_pod(name, requests, f"https://github.com/org/repo{rng.randint(0, 3)}")
        return _manifest(name, requests)

    def one() -> Case:
        nodes = _nodes(rng, label, extended=False)
        bound = _bind(rng, label, nodes, bound_pod)
        pod = _build_pod(
            f"{label}-pod",
            _requests(rng, False, bound=False),
            f"https://github.com/org/repo{rng.randint(0, 3)}",
            scheduler_name,
        )
        pod["spec"]["nodeSelector"] = {CASE_LABEL: label}
        return Case(index, nodes, bound, pod)

    return _until_feasible(one, profile)


def _default_profile_as(name: str) -> str:
    """The built-in ``default`` policy's profile (kube-scheduler's default scoring), named
    ``name``, as a one-profile policy without BinderHub's mutator (the cases' build pods
    carry the affinity already)."""
    from stickypack.policies import load_builtin

    profile = load_builtin("default").profiles[0].describe()
    profile.pop("mutate", None)
    profile["name"] = name
    return yaml.safe_dump({"name": name, "profiles": [profile]}, sort_keys=False)


_F = "filters: [NodeUnschedulable, NodeResourcesFit, NodeAffinity, TaintToleration]"

#: The families' policies, as a user writes them (``docs/configuration.md``): one YAML
#: document each, one profile named as the policy.
POLICIES: dict[str, str] = {
    "noderesources": f"""
name: least-weighted
profiles:
  - name: least-weighted
    {_F}
    score:
      - plugin: NodeResourcesFit
        args: {{strategy: LeastAllocated, resources: {{cpu: 3, memory: 1, nvidia.com/gpu: 5}}}}
---
name: most-weighted
profiles:
  - name: most-weighted
    {_F}
    score:
      - plugin: NodeResourcesFit
        args:
          strategy: MostAllocated
          resources: {{cpu: 1, memory: 4, nvidia.com/gpu: 2, ephemeral-storage: 1}}
---
name: least-foo
profiles:
  - name: least-foo
    {_F}
    score:
      - plugin: LeastAllocated
        args: {{resources: {{example.com/foo: 7, memory: 2, pods: 3}}}}
---
name: most-extended
profiles:
  - name: most-extended
    {_F}
    score:
      - plugin: MostAllocated
        args: {{resources: {{nvidia.com/gpu: 3, example.com/foo: 1, cpu: 1}}}}
      - {{plugin: TaintToleration, weight: 3}}
""",
    "rtcr": f"""
name: rtcr-pack
profiles:
  - name: rtcr-pack
    {_F}
    score:
      - plugin: RequestedToCapacityRatio
        args: {{resources: {{cpu: 1, memory: 1}}}}
---
name: rtcr-spread
profiles:
  - name: rtcr-spread
    {_F}
    score:
      - plugin: NodeResourcesFit
        args:
          strategy: RequestedToCapacityRatio
          resources: {{cpu: 2, memory: 1, nvidia.com/gpu: 3}}
          shape: [{{utilization: 0, score: 10}}, {{utilization: 100, score: 0}}]
---
name: rtcr-wavy
profiles:
  - name: rtcr-wavy
    {_F}
    score:
      - plugin: RequestedToCapacityRatio
        args:
          resources: {{cpu: 1, memory: 5, example.com/foo: 2, ephemeral-storage: 1}}
          shape:
            - {{utilization: 0, score: 0}}
            - {{utilization: 30, score: 8}}
            - {{utilization: 60, score: 3}}
            - {{utilization: 100, score: 10}}
---
name: rtcr-middle
profiles:
  - name: rtcr-middle
    {_F}
    score:
      - plugin: RequestedToCapacityRatio
        weight: 2
        args:
          resources: {{cpu: 1, memory: 1, nvidia.com/gpu: 1}}
          shape: [{{utilization: 20, score: 2}}, {{utilization: 80, score: 9}}]
""",
    "balanced": f"""
name: balanced-gpu
profiles:
  - name: balanced-gpu
    {_F}
    score:
      - plugin: NodeResourcesBalancedAllocation
        args: {{resources: {{cpu: 1, memory: 1, nvidia.com/gpu: 1}}}}
---
name: balanced-four
profiles:
  - name: balanced-four
    {_F}
    score:
      - plugin: NodeResourcesBalancedAllocation
        args: {{resources: {{cpu: 1, memory: 1, ephemeral-storage: 1, example.com/foo: 1}}}}
---
name: balanced-two
profiles:
  - name: balanced-two
    {_F}
    score:
      - plugin: NodeResourcesBalancedAllocation
        args: {{resources: {{memory: 1, nvidia.com/gpu: 1}}}}
---
name: balanced-least
profiles:
  - name: balanced-least
    {_F}
    score:
      - plugin: NodeResourcesBalancedAllocation
        args: {{resources: {{cpu: 1, memory: 1, nvidia.com/gpu: 1}}}}
      - plugin: NodeResourcesFit
        args: {{strategy: LeastAllocated, resources: {{cpu: 1, memory: 1, nvidia.com/gpu: 1}}}}
""",
    "taints": f"""
name: taints-most
profiles:
  - name: taints-most
    {_F}
    score:
      - TaintToleration
      - {{plugin: NodeResourcesFit, weight: 2, args: {{strategy: MostAllocated}}}}
---
name: taints-only
profiles:
  - name: taints-only
    {_F}
    score: [TaintToleration]
---
name: taints-least
profiles:
  - name: taints-least
    {_F}
    score:
      - {{plugin: TaintToleration, weight: 3}}
      - {{plugin: NodeResourcesFit, args: {{strategy: LeastAllocated}}}}
""",
    "affinity": f"""
name: affinity-most
profiles:
  - name: affinity-most
    {_F}
    score:
      - NodeAffinity
      - {{plugin: NodeResourcesFit, args: {{strategy: MostAllocated}}}}
---
name: affinity-only
profiles:
  - name: affinity-only
    {_F}
    score: [NodeAffinity]
---
name: affinity-least
profiles:
  - name: affinity-least
    {_F}
    score:
      - {{plugin: NodeAffinity, weight: 2}}
      - {{plugin: NodeResourcesFit, args: {{strategy: LeastAllocated}}}}
""",
    "builds": f"""
name: builds-only
profiles:
  - name: builds-only
    {_F}
    score: [InterPodAffinity]
""",
}


def _family(name: str, summary: str, draw: Draw, *more: str) -> Family:
    texts = tuple(t.strip() + "\n" for t in POLICIES[name].split("\n---\n"))
    return Family(name, summary, (*texts, *more), draw)


FAMILIES: dict[str, Family] = {
    family.name: family
    for family in (
        _family(
            "noderesources",
            "NodeResourcesFit LeastAllocated / MostAllocated with resource weights and extended resources",
            _draw_resources,
        ),
        _family(
            "rtcr", "NodeResourcesFit RequestedToCapacityRatio: shapes and resource weights", _draw_resources
        ),
        _family(
            "balanced",
            "NodeResourcesBalancedAllocation over extended resources and ephemeral storage",
            _draw_resources,
        ),
        _family(
            "taints", "TaintToleration: up to five PreferNoSchedule taints against tolerations", _draw_taints
        ),
        _family(
            "affinity", "NodeAffinity: weighted preferred terms, every operator, matchFields", _draw_affinity
        ),
        _family(
            "builds",
            "InterPodAffinity: BinderHub's build-pod anti-affinity (the case the core models), alone and in "
            "kube-scheduler's default profile",
            _draw_builds,
            _default_profile_as("builds-default"),
        ),
    )
}


def run_family(
    cp: ControlPlane,
    family: Family,
    cases: int,
    seed: int,
    batch: int = 25,
    on_case: Callable[[Case], None] | None = None,
) -> list[Case]:
    """Run ``cases`` random cases of ``family`` on a kube-scheduler started here with its
    profiles (:func:`kube_scheduler_config`; stopped at the end), case ``i`` on profile
    ``i mod n``; returns them with the real choice and the policy's best."""
    policies = family.load()
    by_name = {p.profiles[0].name: p for p in policies}
    handle = cp.start_scheduler(kube_scheduler_config(policies), name=f"family-{family.name}")
    try:

        def draw(rng: random.Random, index: int) -> Case:
            policy = policies[index % len(policies)]
            return family.draw(rng, index, policy.profiles[0].name, policy.profiles[0])

        return run_cases(
            cp,
            lambda case: by_name[case.pod["spec"]["schedulerName"]],
            policies[0].profiles[0].name,
            cases,
            seed,
            batch=batch,
            on_case=on_case,
            draw=draw,
        )
    finally:
        cp.stop_scheduler(handle)


def decisive(case: Case) -> bool:
    """Whether the policy's best are fewer than the feasible nodes (so the real choice
    among them says something)."""
    return 0 < len(case.top) < len(case.scores)


def crossed(cases: Sequence[Case], family: Family) -> float:
    """Agreement when each case is scored by the family's *next* policy (``i + 1 mod n``),
    not its own: how much the arguments matter (lower than :func:`agreement` when they do)."""
    from stickypack.testing.fidelity import score_case

    policies = family.load()
    n = len(policies)
    hits = 0
    for case in cases:
        own = next(
            i for i, p in enumerate(policies) if p.profiles[0].name == case.pod["spec"]["schedulerName"]
        )
        other = Case(case.index, case.nodes, case.bound, case.pod)
        hits += case.chosen in score_case(other, policies[(own + 1) % n])
    return hits / len(cases) if cases else 0.0
