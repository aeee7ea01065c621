"""Each kube-scheduler plugin of the core, with arguments the built-in policies never give
it, picks the nodes the real kube-scheduler picks.

Per family of :mod:`stickypack.testing.plugin_fidelity` (RequestedToCapacityRatio shapes,
LeastAllocated / MostAllocated resource weights with GPUs and other extended resources,
BalancedAllocation over extended resources, several PreferNoSchedule taints, weighted
preferred node affinity with ``matchFields``, BinderHub's build anti-affinity), a few
random cases on the real kube-scheduler running the family's profiles; the node it binds
must be among the policy's best. ``benchmarks/fidelity.py --families all --cases 300``
runs the long version.
"""

from __future__ import annotations

import pytest
import yaml

from stickypack.core.policy import policy_from_yaml
from stickypack.policies import load_builtin
from stickypack.render import scheduler_config
from stickypack.testing.fidelity import agreement
from stickypack.testing.plugin_fidelity import FAMILIES, decisive, kube_scheduler_profile, run_family

FAMILY_CASES = 12


@pytest.mark.controlplane
@pytest.mark.parametrize("family", list(FAMILIES))
def test_plugin_family_agrees_with_kube_scheduler(cluster, family):
    cases = run_family(cluster, FAMILIES[family], FAMILY_CASES, seed=7, batch=FAMILY_CASES)
    bad = [c.describe() for c in cases if not c.agrees]
    assert len(cases) == FAMILY_CASES
    assert all(c.chosen is not None for c in cases), "\n".join(bad)
    assert agreement(cases) == 1.0, "\n".join(bad)
    # case i ran on the family's profile i mod n, so every profile with its arguments
    names = [p.profiles[0].name for p in FAMILIES[family].load()]
    assert [c.pod["spec"]["schedulerName"] for c in cases] == [names[c.index % len(names)] for c in cases]
    # the policy's best are fewer than the feasible nodes in enough cases to tell
    assert sum(map(decisive, cases)) >= FAMILY_CASES // 3


def test_every_family_policy_renders_and_every_profile_is_served():
    """Each family's policies load and render (profile names unique within the family), and
    every profile gets cases."""
    for family in FAMILIES.values():
        policies = family.load()
        names = [p.profiles[0].name for p in policies]
        assert len(set(names)) == len(names), family.name
        for policy in policies:
            rendered = kube_scheduler_profile(policy.profiles[0])
            assert rendered["plugins"]["score"]["disabled"] == [{"name": "*"}]
            assert rendered["schedulerName"] == policy.profiles[0].name


def test_the_z2jh_user_profile_renders_as_render_writes_it():
    """The translation of a policy profile and ``render``'s own z2jh profile enable the same
    score plugins with the same weights and arguments."""
    ours = kube_scheduler_profile(load_builtin("z2jh").profiles[1], "z2jh")
    theirs = scheduler_config(["z2jh"])["profiles"][0]
    weights = {e["name"]: e["weight"] for e in ours["plugins"]["score"]["enabled"]}
    assert weights == {
        **{e["name"]: e["weight"] for e in theirs["plugins"]["score"]["enabled"]},
        # kept at their default weights by render (as z2jh does), named by the policy
        "TaintToleration": 3,
        "PodTopologySpread": 2,
    }
    assert ours["pluginConfig"] == theirs["pluginConfig"]
    assert "filter" not in ours["plugins"]


POLICY = """
name: p
profiles:
  - name: p
    filters: [NodeUnschedulable, NodeResourcesFit, {filters}]
    score:
{score}
"""


@pytest.mark.parametrize(
    ("filters", "score", "message"),
    [
        ("ScaleDownAware", "      - TaintToleration", "filters .'ScaleDownAware'. are not kube-scheduler's"),
        ("NodeAffinity", "      - BuildLocality", "score plugin BuildLocality is not kube-scheduler's"),
        ("NodeAffinity", "      - LeastAllocated\n      - MostAllocated", "NodeResourcesFit scores twice"),
    ],
)
def test_what_a_kube_scheduler_profile_cannot_hold_is_refused(filters, score, message):
    policy = policy_from_yaml(POLICY.format(filters=filters, score=score))
    with pytest.raises(ValueError, match=message):
        kube_scheduler_profile(policy.profiles[0])


def test_left_out_filters_are_disabled_and_weight_zero_scorers_left_out():
    policy = policy_from_yaml(
        POLICY.format(
            filters="NodeReady",
            score="      - {plugin: TaintToleration, weight: 0}\n"
            "      - {plugin: RequestedToCapacityRatio, weight: 4}",
        )
    )
    rendered = kube_scheduler_profile(policy.profiles[0])
    disabled = [{"name": "NodeAffinity"}, {"name": "TaintToleration"}]
    assert rendered["plugins"]["filter"] == {"disabled": disabled}
    assert rendered["plugins"]["score"]["enabled"] == [{"name": "NodeResourcesFit", "weight": 4}]
    assert yaml.safe_load(yaml.safe_dump(rendered["pluginConfig"])) == [
        {
            "name": "NodeResourcesFit",
            "args": {
                "scoringStrategy": {
                    "type": "RequestedToCapacityRatio",
                    "resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}],
                    "requestedToCapacityRatio": {
                        "shape": [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]
                    },
                }
            },
        }
    ]


def test_weight_one_scorers_resource_weights_and_balanced_resources_are_rendered():
    """Only a weight of 0 leaves a scorer out (1 is kube-scheduler's smallest weight);
    NodeResourcesFit's resource weights are written as given (cpu 1, memory 3, as
    ``scoringStrategy.resources``); NodeResourcesBalancedAllocation's resources become its
    ``args.resources`` (weight 1 each, the only weight kube-scheduler's
    ValidateNodeResourcesBalancedAllocationArgs takes); ``scheduler_name`` overrides the
    profile's name; a profile whose scorers take no arguments has no ``pluginConfig``."""
    policy = policy_from_yaml(
        POLICY.format(
            filters="NodeAffinity, TaintToleration",
            score="      - {plugin: TaintToleration, weight: 1}\n"
            "      - {plugin: MostAllocated, weight: 2, args: {resources: {cpu: 1, memory: 3}}}\n"
            "      - {plugin: NodeResourcesBalancedAllocation, weight: 5,"
            " args: {resources: {cpu: 1, nvidia.com/gpu: 1}}}",
        )
    )
    rendered = kube_scheduler_profile(policy.profiles[0], "renamed")
    assert rendered["schedulerName"] == "renamed"  # the profile's own name is "p"
    assert rendered["plugins"]["score"]["enabled"] == [
        {"name": "TaintToleration", "weight": 1},
        {"name": "NodeResourcesFit", "weight": 2},
        {"name": "NodeResourcesBalancedAllocation", "weight": 5},
    ]
    assert rendered["pluginConfig"] == [
        {
            "name": "NodeResourcesFit",
            "args": {
                "scoringStrategy": {
                    "type": "MostAllocated",
                    "resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 3}],
                }
            },
        },
        {
            "name": "NodeResourcesBalancedAllocation",
            "args": {"resources": [{"name": "cpu", "weight": 1}, {"name": "nvidia.com/gpu", "weight": 1}]},
        },
    ]
    assert "filter" not in rendered["plugins"]  # all four modelled filters listed
    plain = policy_from_yaml(POLICY.format(filters="NodeAffinity", score="      - TaintToleration"))
    assert "pluginConfig" not in kube_scheduler_profile(plain.profiles[0])


EMPTY_RESOURCES = """
name: {name}
profiles:
  - name: {name}
    filters: [NodeUnschedulable, NodeResourcesFit, NodeAffinity, TaintToleration]
    score:
      - plugin: {plugin}
        args: {{resources: {{}}}}
"""


@pytest.mark.controlplane
def test_empty_resources_mean_cpu_and_memory_as_in_kube_scheduler(cluster):
    """kube-scheduler's v1 defaulting gives NodeResourcesFit's scoring strategy and
    NodeResourcesBalancedAllocation an empty ``resources`` list cpu and memory at weight 1
    (it starts with such a profile): LeastAllocated sends the pod to the emptier node,
    BalancedAllocation to the node whose balance it improves. The policies read an empty
    ``resources`` the same way, so their best is the node kube-scheduler binds."""
    from stickypack.core import NodeTable, Pod, SchedulingContext
    from stickypack.core.resources import parse_resource_list
    from stickypack.testing.controlplane import pod_manifest
    from stickypack.testing.fidelity import wait_scheduler_cache
    from stickypack.testing.plugin_fidelity import kube_scheduler_config

    policies = {
        name: policy_from_yaml(EMPTY_RESOURCES.format(name=name, plugin=plugin))
        for name, plugin in (("least", "LeastAllocated"), ("balanced", "NodeResourcesBalancedAllocation"))
    }
    handle = cluster.start_scheduler(kube_scheduler_config(list(policies.values())))
    table = NodeTable()
    fillers = []
    for group in policies:
        # `cpu`: half its cpu requested; `memory`: half its memory
        for node, (cpu, memory) in (("cpu", ("2", "512Mi")), ("memory", ("250m", "8Gi"))):
            name = f"{group}-{node}"
            cluster.create_node(name, cpu="4", memory="16Gi", labels={"for": group})
            allocatable = parse_resource_list({"cpu": "4", "memory": "16Gi", "pods": "110"})
            table.upsert_node(name, allocatable, labels={"for": group})
            filler = pod_manifest(f"{name}-filler", cpu=cpu, memory=memory)
            filler["spec"]["nodeName"] = name
            fillers.append(filler)
            table.add_pod(table.slot(name), Pod.from_dict(filler))
    cluster.create_pods(fillers)
    wait_scheduler_cache(cluster, [handle], len(table), len(fillers), 30)
    # a memory-heavy pod: LeastAllocated (cpu and memory) prefers `cpu`, whose memory is
    # free; BalancedAllocation prefers `cpu` too, whose balance the pod's memory restores
    pods = {
        group: pod_manifest(
            f"{group}-pod", cpu="250m", memory="6Gi", scheduler_name=group, node_selector={"for": group}
        )
        for group in policies
    }
    cluster.create_pods(list(pods.values()))
    chosen = cluster.wait_bound([p["metadata"]["name"] for p in pods.values()])
    for group, policy in policies.items():
        pod = Pod.from_dict(pods[group])
        profile = policy.profiles[0]
        idx = profile.feasible(pod, table, SchedulingContext())
        totals = profile.scores(pod, table, idx, SchedulingContext())
        best = set(table.node_names(idx[totals == totals.max()]))
        assert chosen[f"{group}-pod"] == f"{group}-cpu", (group, chosen)  # kube-scheduler
        assert best == {f"{group}-cpu"}, (
            group,
            dict(zip(table.node_names(idx), totals.tolist(), strict=True)),
        )


@pytest.mark.parametrize(
    ("resources", "refused"),
    [
        (
            [{"name": "cpu", "weight": 2}, {"name": "memory", "weight": 1}],
            "weight: Invalid value: 2: must be 1",
        ),
        ([{"name": "cpu", "weight": 1}, {"name": "cpu", "weight": 1}], "Duplicate value"),
        ([], None),  # defaulted to cpu and memory
    ],
)
def test_kube_scheduler_refuses_the_balanced_allocation_weights_policies_refuse(tmp_path, resources, refused):
    """kube-scheduler will not start with NodeResourcesBalancedAllocation weights other than
    1 or a resource named twice (so a policy refuses them too), and takes an empty list: its
    configuration check, the binary run with a kubeconfig it cannot read."""
    import subprocess

    from conftest import needs_binaries

    binary = needs_binaries("kube-scheduler")["kube-scheduler"]
    config = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": str(tmp_path / "absent")},
        "leaderElection": {"leaderElect": False},
        "profiles": [
            {
                "schedulerName": "x",
                "pluginConfig": [
                    {"name": "NodeResourcesBalancedAllocation", "args": {"resources": resources}}
                ],
            }
        ],
    }
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    run = subprocess.run(
        [binary, f"--config={path}", "--secure-port=0"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert run.returncode != 0
    # past the configuration check, it stops at the kubeconfig
    assert (refused or "absent: no such file") in run.stderr, run.stderr


TWO_PROFILES = """
name: mine
profiles:
  - name: mine-pack
    filters: [NodeUnschedulable, NodeResourcesFit, NodeAffinity, TaintToleration]
    score:
      - plugin: RequestedToCapacityRatio
        weight: 2
        args: {shape: [{utilization: 0, score: 0}, {utilization: 100, score: 10}]}
      - {plugin: TaintToleration, weight: 1}
  - name: mine-spread
    filters: [NodeUnschedulable, NodeResourcesFit, NodeAffinity, TaintToleration]
    score:
      - {plugin: LeastAllocated, weight: 1, args: {resources: {cpu: 1, memory: 1}}}
"""


@pytest.mark.controlplane
def test_render_scheduler_config_writes_a_policy_file_the_real_scheduler_runs(cluster, tmp_path, capsys):
    """``render scheduler-config --policy-file``: each profile of the policy becomes a
    kube-scheduler profile named as it (beside ``--profiles``), and the real scheduler run
    with the file packs a pod of the packing profile onto the fuller node and spreads one of
    the spreading profile onto the emptier, as the policy's profiles score them."""
    from stickypack.cli import main
    from stickypack.core import NodeTable, Pod, SchedulingContext
    from stickypack.core.resources import parse_resource_list
    from stickypack.render import kube_scheduler_profile
    from stickypack.testing.controlplane import pod_manifest
    from stickypack.testing.fidelity import wait_scheduler_cache

    policy_file = tmp_path / "mine.yaml"
    policy_file.write_text(TWO_PROFILES)
    out = tmp_path / "scheduler.yaml"
    argv = ["render", "scheduler-config", "--policy-file", str(policy_file), "--profiles", "z2jh"]
    assert main([*argv, "-o", str(out)]) == 0
    config = yaml.safe_load(out.read_text())
    policy = policy_from_yaml(TWO_PROFILES)
    assert [p["schedulerName"] for p in config["profiles"]] == ["z2jh", "mine-pack", "mine-spread"]
    assert config["profiles"][1:] == [
        yaml.safe_load(yaml.safe_dump(kube_scheduler_profile(p))) for p in policy.profiles
    ]
    assert config["leaderElection"]["resourceName"] == "z2jh-mine-pack-mine-spread-scheduler"
    handle = cluster.start_scheduler(out)
    table = NodeTable()
    fillers = []
    for node, cpu in (("full", "3"), ("empty", "500m")):
        cluster.create_node(node, cpu="4", memory="16Gi")
        table.upsert_node(node, parse_resource_list({"cpu": "4", "memory": "16Gi", "pods": "110"}))
        filler = pod_manifest(f"{node}-filler", cpu=cpu, memory="1Gi")
        filler["spec"]["nodeName"] = node
        fillers.append(filler)
        table.add_pod(table.slot(node), Pod.from_dict(filler))
    cluster.create_pods(fillers)
    wait_scheduler_cache(cluster, [handle], len(table), len(fillers), 30)
    pods = [
        pod_manifest(name, cpu="500m", memory="1Gi", scheduler_name=name)
        for name in ("mine-pack", "mine-spread")
    ]
    cluster.create_pods(pods)
    chosen = cluster.wait_bound(["mine-pack", "mine-spread"])
    assert chosen == {"mine-pack": "full", "mine-spread": "empty"}
    for profile, manifest in zip(policy.profiles, pods, strict=True):
        pod = Pod.from_dict(manifest)
        idx = profile.feasible(pod, table, SchedulingContext())
        totals = profile.scores(pod, table, idx, SchedulingContext())
        assert table.node_names(idx[totals == totals.max()]) == [chosen[profile.name]]


@pytest.mark.parametrize(
    ("policy", "args", "message"),
    [
        (None, ["--policy-file", "stickypack"], "stickypack: cannot read"),
        ("name: x\nprofiles: 3\n", [], "profiles"),
        (
            "name: x\nprofiles:\n  - name: b\n    filters: [NodeResourcesFit]\n    score: [BuildLocality]\n",
            [],
            "policy x: profile b: score plugin BuildLocality is not kube-scheduler's (stickypack's own",
        ),
        (
            "name: x\nprofiles:\n  - name: z2jh\n    filters: [NodeResourcesFit]\n"
            "    score: [LeastAllocated]\n",
            ["--profiles", "z2jh"],
            "profile 'z2jh' named twice (profiles: z2jh, then policy x's z2jh)",
        ),
    ],
)
def test_render_a_policy_file_a_scheduler_cannot_hold_is_one_line(tmp_path, capsys, policy, args, message):
    from stickypack.cli import main

    argv = ["render", "scheduler-config", *args]
    if policy is not None:
        path = tmp_path / "p.yaml"
        path.write_text(policy)
        argv += ["--policy-file", str(path)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err, err


# ---- the harness's own parts, without a control plane ----------------------------------------


def test_every_family_loads_each_of_its_policies_named_as_its_one_profile():
    """Each policy of a family loads (all of them) as one profile named as the policy, and
    the family's configuration has one kube-scheduler profile per policy, in order, named
    as that profile (case ``i`` goes to profile ``i mod n`` by that name)."""
    from stickypack.testing.plugin_fidelity import kube_scheduler_config

    for family in FAMILIES.values():
        policies = family.load()
        assert len(policies) == len(family.policies), family.name
        for policy in policies:
            assert [p.name for p in policy.profiles] == [policy.name], family.name
        config = kube_scheduler_config(policies)
        assert [p["schedulerName"] for p in config["profiles"]] == [p.name for p in policies]
    two = policy_from_yaml(TWO_PROFILES)
    with pytest.raises(ValueError, match="policy mine: one profile expected, got 2"):
        kube_scheduler_config([two])


def test_the_builds_family_also_runs_kube_schedulers_default_profile():
    """``builds-default``: the built-in ``default`` profile (kube-scheduler's default
    scoring) under another name, without its BinderHub mutator."""
    by_name = {p.name: p.profiles[0] for p in FAMILIES["builds"].load()}
    assert set(by_name) == {"builds-only", "builds-default"}
    ours = by_name["builds-default"].describe()
    theirs = load_builtin("default").profiles[0].describe()
    assert ours["score"] == theirs["score"]
    assert ours["filters"] == theirs["filters"]
    assert "mutate" not in ours


def test_a_family_pod_requests_what_it_is_given_with_limits_for_extended_resources():
    from stickypack.testing.plugin_fidelity import FOO, GPU, _manifest

    requests = {"cpu": "1", "memory": "1Gi", GPU: "2", FOO: "3", "ephemeral-storage": "5Gi"}
    raw = _manifest("p", requests, "profile-x")
    resources = raw["spec"]["containers"][0]["resources"]
    assert resources["requests"] == requests
    assert resources["limits"] == {GPU: "2", FOO: "3"}  # the API server demands them equal
    assert raw["spec"]["schedulerName"] == "profile-x"
    assert _manifest("q", {"cpu": "1"})["spec"]["schedulerName"] == "default-scheduler"


def test_a_family_build_pod_carries_the_anti_affinity_binderhub_gives_it():
    """The build pods the ``builds`` family binds and places carry the term the core's
    BinderHubAntiAffinity mutator adds to a build pod (weight 100, by hostname, against
    build pods), and match it themselves."""
    from stickypack.core import NodeTable, Pod, SchedulingContext
    from stickypack.core.plugins.binderhub import BinderHubAntiAffinity
    from stickypack.testing.plugin_fidelity import _build_pod, _manifest

    built = Pod.from_dict(_build_pod("b", {"cpu": "1"}, "https://github.com/org/repo0"))
    plain = _manifest("b", {"cpu": "1"}, labels=dict(built.labels))
    plain["metadata"]["annotations"] = {"binder-repo": "https://github.com/org/repo0"}
    mutated = BinderHubAntiAffinity().mutate(Pod.from_dict(plain), NodeTable(), SchedulingContext())
    assert built.build_repo is not None
    assert built.pod_anti_affinity == mutated.pod_anti_affinity
    assert len(built.pod_anti_affinity) == 1
    # and in full, as inspect's InterPodAffinity score reads it with the pods on the nodes
    assert built.preferred_pod_anti_affinity == mutated.preferred_pod_anti_affinity
    assert dict(built.pod_anti_affinity[0].match_labels).items() <= dict(built.labels).items()


def _family_cases(name: str, count: int = 30):
    """``count`` cases of family ``name`` drawn as :func:`run_family` draws them (case ``i``
    for profile ``i mod n``), with that profile."""
    import random

    family = FAMILIES[name]
    policies = family.load()
    rng = random.Random(3)
    for i in range(count):
        profile = policies[i % len(policies)].profiles[0]
        yield family.draw(rng, i, profile.name, profile), profile


def test_family_cases_see_their_own_nodes_fit_one_and_bound_pods_fit_theirs():
    from stickypack.core import Pod, SchedulingContext
    from stickypack.testing.fidelity import CASE_LABEL, _node_table

    for name in FAMILIES:
        for case, profile in _family_cases(name):
            label = f"c{case.index}"
            assert case.pod["spec"]["nodeSelector"] == {CASE_LABEL: label}, name
            assert all(n["labels"][CASE_LABEL] == label for n in case.nodes)
            assert case.pod["spec"]["schedulerName"] == profile.name
            table = _node_table([case])
            assert profile.feasible(Pod.from_dict(case.pod), table, SchedulingContext()).size, (
                name,
                case.index,
            )
            rows = table.active_indices()
            # every resource, extended ones included: no node holds more than it has
            assert (table.requested[rows] <= table.alloc[rows]).all(), (name, case.describe())


def test_each_familys_cases_put_its_plugin_to_work():
    """What each family's draw promises: GPUs, init containers, nodes of several ephemeral
    storage sizes (resources); nodes with three or more PreferNoSchedule taints,
    tolerations (taints); a ``gen`` label no integer operator matches, several preferred
    terms, required terms (affinity); bound build pods (builds)."""
    from stickypack.testing.plugin_fidelity import GPU

    resources = [c for c, _ in _family_cases("noderesources")]
    assert any(GPU in c.pod["spec"]["containers"][0]["resources"]["requests"] for c in resources)
    assert any(c.pod["spec"].get("initContainers") for c in resources)
    assert any(len({n["ephemeral_storage"] for n in c.nodes}) > 1 for c in resources)
    taints = [c for c, _ in _family_cases("taints")]
    soft = [sum(t.endswith(":PreferNoSchedule") for t in n["taints"]) for c in taints for n in c.nodes]
    assert max(soft) >= 3
    assert any(c.pod["spec"].get("tolerations") for c in taints)
    affinity = [c for c, _ in _family_cases("affinity")]
    gens = {n["labels"].get("gen") for c in affinity for n in c.nodes}
    assert {"07", "v3"} & gens
    terms = [
        c.pod["spec"]["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
        for c in affinity
    ]
    assert max(map(len, terms)) >= 3  # one to five weighted terms
    assert any(
        "requiredDuringSchedulingIgnoredDuringExecution" in c.pod["spec"]["affinity"]["nodeAffinity"]
        for c in affinity
    )
    builds = [c for c, _ in _family_cases("builds")]
    assert any(b["metadata"].get("annotations", {}).get("binder-repo") for c in builds for b in c.bound)


def test_decisive_cases_are_those_whose_best_are_fewer_than_the_feasible_nodes():
    from stickypack.testing.fidelity import Case

    assert decisive(Case(0, [], [], {}, top=["a"], scores={"a": 2, "b": 1}))
    assert not decisive(Case(0, [], [], {}, top=["a", "b"], scores={"a": 2, "b": 2}))  # a tie
    assert not decisive(Case(0, [], [], {}, top=[], scores={}))  # no feasible node


SPREAD_AND_PACK = (
    """
name: spread
profiles:
  - name: spread
    filters: [NodeUnschedulable, NodeResourcesFit, NodeAffinity, TaintToleration]
    score: [{plugin: LeastAllocated, args: {resources: {cpu: 1, memory: 1}}}]
""",
    """
name: pack
profiles:
  - name: pack
    filters: [NodeUnschedulable, NodeResourcesFit, NodeAffinity, TaintToleration]
    score: [{plugin: MostAllocated, args: {resources: {cpu: 1, memory: 1}}}]
""",
)


def test_crossed_scores_each_case_by_the_familys_next_policy():
    """Nodes ``empty`` and ``full`` (4 cores, 16Gi; a pod of 2 cores and 4Gi on ``full``);
    the pod asks 1 core and 1Gi. ``spread`` prefers ``empty`` ((75 + 93) // 2 = 84 against
    (25 + 68) // 2 = 46), ``pack`` prefers ``full`` ((75 + 31) // 2 = 53 against
    (25 + 6) // 2 = 15). Case 0 (spread, chose ``empty``) scored by pack: a miss; case 1
    (pack, chose ``full``) scored by spread: a miss; case 2 (spread, chose ``full``) scored
    by pack: a hit. Crossed agreement 1/3 (2/3 scored by their own policy)."""
    from stickypack.testing.controlplane import pod_manifest
    from stickypack.testing.fidelity import CASE_LABEL, Case
    from stickypack.testing.plugin_fidelity import Family, _draw_resources, crossed

    family = Family("hand", "spread, then pack", SPREAD_AND_PACK, _draw_resources)

    def case(index: int, profile: str, chosen: str) -> Case:
        label = f"c{index}"
        nodes = [
            {
                "name": f"{label}-{n}",
                "cpu": "4",
                "memory": "16Gi",
                "labels": {CASE_LABEL: label},
                "taints": [],
            }
            for n in ("empty", "full")
        ]
        for node in nodes:
            node["taints"] = []
        filler = pod_manifest(f"{label}-filler", cpu="2", memory="4Gi")
        filler["spec"]["nodeName"] = f"{label}-full"
        pod = pod_manifest(f"{label}-pod", cpu="1", memory="1Gi", scheduler_name=profile)
        pod["spec"]["nodeSelector"] = {CASE_LABEL: label}
        return Case(index, nodes, [filler], pod, chosen=f"{label}-{chosen}")

    cases = [case(0, "spread", "empty"), case(1, "pack", "full"), case(2, "spread", "full")]
    assert crossed(cases, family) == 1 / 3
    assert all(c.scores == {} for c in cases)  # the cases themselves are left as they were
    assert crossed([], family) == 0.0
