"""The pod model, the node table, policy loading, and the core's purity."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Literal

import numpy as np
import pytest

from stickypack.cli import main
from stickypack.core import NodeTable, Pod, PodSpecError, PolicyError, Taint, policy_from_yaml
from stickypack.core.framework import SchedulingContext, ScorePlugin
from stickypack.core.history import BuildHistory

CORE = Path(__file__).resolve().parents[1] / "src" / "stickypack" / "core"
Gi = 1024**3


def test_core_imports_nothing_outside_core_and_does_no_io():
    """Every module of core, plugins included: the standard library (minus I/O, clock and
    randomness), numpy, yaml, pydantic and core itself; no open(), no reading the clock."""
    import sys

    allowed = {"numpy", "yaml", "pydantic"}
    stdlib_io = {
        "os", "io", "socket", "time", "random", "secrets", "subprocess", "pathlib",
        "asyncio", "urllib", "http", "logging", "threading", "shutil", "tempfile", "sys",
    }  # fmt: skip
    paths = sorted(CORE.rglob("*.py"))
    assert CORE / "plugins" / "builds.py" in paths
    for path in paths:
        where = path.relative_to(CORE)
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:  # relative: inside core by construction
                    continue
                names = [node.module or ""]
            for name in names:
                top = name.split(".")[0]
                assert top not in stdlib_io, f"{where} imports {name}"
                if top == "stickypack":
                    assert name.startswith("stickypack.core"), f"{where} imports {name}"
                else:
                    assert top in allowed or top in sys.stdlib_module_names, f"{where} imports {name}"
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "open":
                pytest.fail(f"{where} calls open()")
            func = node.func if isinstance(node, ast.Call) else None
            if isinstance(func, ast.Attribute) and func.attr in ("now", "utcnow", "today"):
                pytest.fail(f"{where} reads the clock ({func.attr}())")


def test_pod_requests_like_kubernetes():
    raw = {
        "metadata": {
            "name": "p",
            "namespace": "ns",
            "labels": {"a": "b"},
            "ownerReferences": [{"kind": "ReplicaSet", "controller": True, "name": "rs"}],
        },
        "spec": {
            "schedulerName": "stickypack",
            "containers": [
                {"name": "a", "resources": {"requests": {"cpu": "250m", "memory": "1Gi"}}},
                {"name": "b", "resources": {"limits": {"cpu": "1", "memory": "512Mi"}}},  # requests = limits
                {"name": "c"},
            ],
            "initContainers": [
                {"name": "big-init", "resources": {"requests": {"cpu": "2", "memory": "100Mi"}}},
                {"name": "sidecar", "restartPolicy": "Always", "resources": {"requests": {"cpu": "100m"}}},
            ],
            "overhead": {"cpu": "10m"},
            "tolerations": [{"key": "k", "operator": "Exists"}],
        },
    }
    pod = Pod.from_dict(raw)
    # containers 1250m + sidecar 100m = 1350m; the init container runs with the sidecars
    # started before it (none): max(1350m, 2000m) = 2000m; plus overhead 10m
    assert pod.requests["cpu"] == 2010
    assert pod.requests["memory"] == Gi + 512 * 1024**2
    # scoring requests: container c gets 100m/200Mi, the sidecar 200Mi memory
    assert pod.nonzero_cpu == max(250 + 1000 + 100 + 100, 2000 + 0) + 10
    assert pod.owner_kind == "ReplicaSet" and pod.scheduler_name == "stickypack"
    assert pod.key == "ns/p" and pod.tolerations[0].operator == "Exists"


def test_pod_level_resources_replace_the_containers_sum():
    # PodLevelResources (beta, on by default since 1.34): they were once ignored, so such a
    # pod counted as its containers' 100m
    spec = {
        "containers": [{"name": "c", "resources": {"requests": {"cpu": "100m", "nvidia.com/gpu": 1}}}],
        "resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "4", "memory": "4Gi"}},
        "overhead": {"cpu": "10m"},
    }
    pod = Pod.from_dict({"metadata": {"name": "p"}, "spec": spec})
    # cpu from the pod-level request, memory defaulted from its limit, the gpu from the container
    assert pod.requests == {"cpu": 2010, "memory": 4 * Gi, "nvidia.com/gpu": 1}
    # scoring reads the containers (100m, and 200Mi for none), as kube-scheduler v1.37.2 does:
    # benchmarks/fidelity.py disagreed on 7 of 600 cases while the model scored pod-level ones
    assert (pod.nonzero_cpu, pod.nonzero_memory) == (110, 200 * 1024**2)


def test_bad_pod_dict_is_a_clear_error():
    with pytest.raises(PodSpecError, match="cannot read pod"):
        Pod.from_dict({"spec": {"containers": [{"resources": {"requests": {"cpu": "lots"}}}]}})


def test_fractional_requests_are_summed_then_rounded():
    """The API server stores every quantity rounded up to thousandths of its unit, and
    kube-scheduler adds a pod's quantities and rounds the total once (tests/test_fidelity.py
    checks it on the real scheduler)."""
    from stickypack.core.quantity import QuantityError

    def pod(requests: list[dict], **spec) -> Pod:
        containers = [{"name": f"c{i}", "resources": {"requests": r}} for i, r in enumerate(requests)]
        return Pod.from_dict({"metadata": {"name": "p"}, "spec": {"containers": containers, **spec}})

    halves = pod([{"memory": "0.5", "cpu": "0.5m", "example.com/x": "500m"}] * 2)
    assert halves.requests == {"memory": 1, "cpu": 2, "example.com/x": 1}
    assert pod([{"memory": "0.4"}] * 2).requests == {"memory": 1}  # 0.8 rounds up once
    assert pod([{"memory": "0.9995"}, {"memory": "0.0005"}]).requests == {"memory": 2}  # 1.000 + 0.001
    assert pod([{"memory": "1.5"}], overhead={"memory": "0.5"}).requests == {"memory": 2}
    init = [{"name": "i", "resources": {"requests": {"memory": "0.7"}}}]
    assert pod([{"memory": "0.5"}, {"memory": "0.4"}], initContainers=init).requests == {"memory": 1}
    assert pod([{"memory": "0.5"}]).nonzero_memory == 1 and pod([{}]).nonzero_memory == 200 * 1024**2
    for negative in ("-0.4m", "-0.0001"):
        with pytest.raises((PodSpecError, QuantityError), match="negative"):
            pod([{"cpu": negative}])


def test_a_bound_pod_adds_its_pod_level_requests_to_its_node():
    """kube-scheduler scores a pod being placed by its containers' requests (100m / 200Mi
    where a container sets none) but counts a bound pod's pod-level requests on its node
    (NodeInfo), with the defaults only where neither level names the resource
    (benchmarks/fidelity.py checks it against the real scheduler)."""

    def pod(containers: list[dict], level: dict | None) -> Pod:
        spec: dict = {
            "containers": [{"name": f"c{i}", "resources": {"requests": r}} for i, r in enumerate(containers)]
        }
        if level is not None:
            spec["resources"] = {"requests": level}
        return Pod.from_dict({"metadata": {"name": "p"}, "spec": spec})

    plain = pod([{"cpu": "200m"}], None)
    assert (plain.nonzero_cpu, plain.bound_nonzero_cpu, plain.bound_nonzero_memory) == (200, None, None)
    both = pod([{"cpu": "200m"}, {}], {"cpu": "1", "memory": "1Gi"})
    assert (both.nonzero_cpu, both.nonzero_memory) == (300, 2 * 200 * 1024**2)  # scored by containers
    assert (both.bound_nonzero_cpu, both.bound_nonzero_memory) == (1000, 1024**3)  # counted by pod level
    cpu_only = pod([{"cpu": "200m", "memory": "100Mi"}, {}], {"cpu": "1"})
    # memory: the containers' sum, no default for the container without one
    assert (cpu_only.bound_nonzero_cpu, cpu_only.bound_nonzero_memory) == (1000, 100 * 1024**2)
    neither = pod([{}, {}], {"cpu": "1"})
    assert neither.bound_nonzero_memory == 2 * 200 * 1024**2  # named at neither level: defaults
    # pod-level limits alone: the API server takes the requests from the containers first
    # (pkg/api/pod/util.go defaultPodLevelRequests), from the limits only where they have none
    limited = Pod.from_dict(
        {
            "metadata": {"name": "p"},
            "spec": {
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "200m"}}}],
                "resources": {"limits": {"cpu": "1", "memory": "1Gi"}},
            },
        }
    )
    assert limited.requests == {"cpu": 200, "memory": 1024**3}
    assert (limited.bound_nonzero_cpu, limited.bound_nonzero_memory) == (200, 1024**3)
    table = NodeTable()
    row = table.upsert_node("n", {"cpu": 4000, "memory": 8 * 1024**3, "pods": 110})
    table.add_pod(row, both)
    assert table.nonzero[row].tolist() == [1000, 1024**3]
    table.remove_pod(row, both)
    assert table.nonzero[row].tolist() == [0, 0]


def test_an_init_containers_zero_request_names_the_resource_as_kube_scheduler_reads_it():
    """An init container's request of 0 names the resource, as a container's does:
    component-helpers v0.37.2 resource/helpers.go ``maxResourceList`` takes a resource the
    list lacks whatever its amount, so with pod-level requests kube-scheduler's NodeInfo
    (k8s.io/kubernetes@v1.37.2 pkg/scheduler/framework/types.go,
    ``getNonMissingContainerRequests``) gives the pod no 200Mi default memory: 0 is counted.
    tests/test_fidelity.py checks it on the real API server and scheduler."""

    def pod(container: dict, init: dict) -> Pod:
        spec = {
            "resources": {"requests": {"cpu": "1"}},
            "containers": [{"name": "c", "resources": {"requests": container}}],
            "initContainers": [{"name": "i", "resources": {"requests": init}}],
        }
        return Pod.from_dict({"metadata": {"name": "p"}, "spec": spec})

    def bound(p: Pod) -> tuple[int | None, int | None]:
        return p.bound_nonzero_cpu, p.bound_nonzero_memory

    # 1 core from the pod level; memory 0, not 200Mi (209715200)
    assert bound(pod({"memory": "0"}, {})) == (1000, 0)
    assert bound(pod({}, {"memory": "0"})) == (1000, 0)
    assert bound(pod({}, {})) == (1000, 200 * 1024**2)  # named nowhere: the default
    assert pod({}, {"memory": "0"}).requests == {"cpu": 1000}  # a zero request is no request to fit


def test_quantities_past_int64_are_clamped_not_wrapped():
    # the API server takes "100Ei"; once it overflowed the node table's int64 columns (a
    # half-registered node, then 500s) or wrapped two 7Ei pods to a negative total
    from stickypack.core.resources import MAX_AMOUNT, parse_resource_list

    assert parse_resource_list({"cpu": "100Ei", "memory": "7Ei"}) == {"cpu": MAX_AMOUNT, "memory": MAX_AMOUNT}
    big = {"resources": {"requests": {"memory": "7Ei"}}}
    pod = Pod.from_dict({"metadata": {"name": "p"}, "spec": {"containers": [big, big]}})
    assert pod.requests["memory"] == MAX_AMOUNT
    t = NodeTable()
    row = t.upsert_node("n", parse_resource_list({"cpu": "100Ei", "memory": "100Ei", "pods": "110"}))
    t.add_pod(row, pod)
    t.add_pod(row, pod)
    assert t.requested[row, t.rindex["memory"]] == 2 * MAX_AMOUNT  # no wrap to a negative
    with pytest.raises(ValueError, match="node m: allocatable cpu must be an integer"):
        t.upsert_node("m", {"cpu": 2**70, "memory": Gi, "pods": 10})
    assert "m" not in t.index  # not half-registered


def test_node_table_add_remove_reuse():
    t = NodeTable(capacity=1)
    a = t.upsert_node("a", {"cpu": 1000, "memory": Gi, "pods": 10}, created=500.0)
    b = t.upsert_node("b", {"cpu": 2000, "memory": Gi, "pods": 10, "nvidia.com/gpu": 1})
    assert len(t) == 2 and t.alloc.shape[0] >= 2
    p = Pod("p", requests={"cpu": 300, "nvidia.com/gpu": 1}, annotations={"binder-repo": "r"})
    t.add_pod(b, p)
    assert t.requested[b, t.rindex["cpu"]] == 300 and t.requested[b, t.rindex["pods"]] == 1
    assert t.builds[b] == 1 and t.build_starts[b] == 1
    t.remove_pod(b, p)
    assert t.requested[b].sum() == 0 and t.builds[b] == 0 and t.build_starts[b] == 1
    assert t.active_indices().tolist() == [a, b]  # cached: removing a node must drop it
    t.remove_node("a")
    assert "a" not in t and t.active_indices().tolist() == [b]
    c = t.upsert_node("c", {"cpu": 1})
    assert c == a  # the freed row is reused
    assert t.created[c] == 0.0  # not a's creation time: a node without one counts as oldest
    assert set(t.node_names(t.active_indices())) == {"b", "c"}


def test_node_table_lists_timed_pods_for_drain_forecasts():
    t = NodeTable()
    a = t.upsert_node("a", {"cpu": 1000, "memory": Gi, "pods": 10})
    b = t.upsert_node("b", {"cpu": 1000, "memory": Gi, "pods": 10})
    pods = [Pod(f"u{k}", created=100.0 * k) for k in range(100)]  # more than the initial 64 entries
    for k, p in enumerate(pods):
        t.add_pod(a if k % 2 == 0 else b, p)
    t.add_pod(a, Pod("build", created=0.0, annotations={"binder-repo": "r"}))  # builds: not listed
    t.add_pod(a, Pod("untimed"))  # no creation time: not listed
    # a DaemonSet's pod and a static pod's mirror live as long as their node and do not keep
    # it (the autoscaler removes a node with only those): not sessions, not listed
    daemon = Pod("kube-proxy-x", created=0.0, owner_kind="DaemonSet")
    mirror = Pod("etcd-a", created=0.0, annotations={"kubernetes.io/config.mirror": "abc"})
    t.add_pod(a, daemon)
    t.add_pod(b, mirror)
    rows, ages = t.pod_ages(10_000.0)
    assert sorted(zip(rows.tolist(), ages.tolist(), strict=True)) == sorted(
        ((a if k % 2 == 0 else b), 10_000.0 - 100.0 * k) for k in range(100)
    )
    # counted twice (an assumption, then the watch's binding), removed twice: gone only then
    t.add_pod(b, pods[1])
    t.remove_pod(b, pods[1])
    assert (t.pod_ages(0.0)[0] == b).sum() == 50
    t.remove_pod(b, pods[1])
    assert (t.pod_ages(0.0)[0] == b).sum() == 49
    assert t.pod_ages(0.0)[1].min() == 0.0  # created in the future: age 0
    t.remove_node("a")  # its pods go with it
    rows, _ = t.pod_ages(10_000.0)
    assert rows.tolist() == [b] * 49
    c = t.upsert_node("c", {"cpu": 1000, "memory": Gi, "pods": 10})
    assert c == a and (t.pod_ages(0.0)[0] == c).sum() == 0


def test_build_history_bounds_and_forgetting():
    h = BuildHistory(ttl_s=100, max_nodes_per_repo=2, max_repos=2)
    h.record("r1", "n1", 10)
    h.record("r1", "n2", 20)
    h.record("r1", "n3", 30)
    assert h.nodes_for("r1", 40) == ["n3", "n2"]
    h.record("r2", "n1", 40)
    h.record("r3", "n1", 50)  # r1 is the least recently built: dropped
    assert h.nodes_for("r1", 50) == [] and len(h) == 2
    assert h.nodes_for("r2", 200) == []  # past the TTL
    assert h.forget_node("n1") == 2 and len(h) == 0


def test_a_late_older_record_does_not_make_its_repo_the_most_recent():
    # once it moved r1 to the most recent end, so r2 (built later) was dropped instead
    h = BuildHistory(ttl_s=1000, max_repos=2)
    h.record("r1", "n1", 10)
    h.record("r2", "n1", 20)
    h.record("r1", "n2", 5)  # arrives late: older than r1's build on n1
    h.record("r3", "n1", 30)
    assert (h.nodes_for("r1", 40), h.nodes_for("r2", 40)) == ([], ["n1"])
    h.record("r2", "n2", 35)  # a newer one does make it the most recent
    h.record("r4", "n1", 40)
    assert (h.nodes_for("r2", 50), h.nodes_for("r3", 50)) == (["n2", "n1"], [])


def test_a_late_older_record_of_the_same_node_keeps_the_newer_time():
    h = BuildHistory(ttl_s=100)
    h.record("r", "n1", 20)
    h.record("r", "n2", 15)
    h.record("r", "n1", 10)  # arrives late: older than n1's build at 20
    assert h.to_dict() == {"r": {"n1": 20, "n2": 15}}
    # at 118 the horizon is 18: n1 (20) is fresh, n2 (15) is not; had 10 overwritten 20, none
    assert h.nodes_for("r", 118) == ["n1"]


def test_an_entry_exactly_ttl_old_is_still_fresh_and_not_expired():
    h = BuildHistory(ttl_s=100)
    h.record("r", "n1", 10)
    assert h.nodes_for("r", 110) == ["n1"]  # 110 - 100 = 10: exactly at the horizon
    assert h.nodes_for("r", 110.5) == []  # horizon 10.5: past it
    assert h.expire(110) == 0 and h.to_dict() == {"r": {"n1": 10}}
    assert h.expire(110.5) == 1 and len(h) == 0


def test_forgetting_a_repos_last_node_drops_the_repo():
    """An emptied repo takes no place among ``max_repos``: it does not push out an older one."""
    h = BuildHistory(ttl_s=1000, max_repos=2)
    h.record("r1", "n1", 10)
    h.record("r2", "n1", 20)
    assert h.forget("r2", "n1") and not h.forget("r2", "n1")
    assert len(h) == 1 and h.to_dict() == {"r1": {"n1": 10}}
    h.record("r3", "n1", 30)  # 2 repos (r1, r3): none dropped
    assert h.to_dict() == {"r1": {"n1": 10}, "r3": {"n1": 30}}
    assert h.nodes_for("r1", 40) == ["n1"]


def test_forget_node_up_to_a_time_drops_entries_dated_at_it():
    h = BuildHistory(ttl_s=1000)
    h.record("r1", "n1", 10)
    h.record("r2", "n1", 20)
    h.record("r2", "n2", 10)
    assert h.forget_node("n1", up_to=9.5) == 0  # both of n1's entries are later
    assert h.forget_node("n1", up_to=10) == 1  # r1's, dated 10 itself; r2's (20) stays
    assert h.to_dict() == {"r2": {"n1": 20, "n2": 10}}


def test_a_bare_scorer_name_is_weight_one():
    policy = policy_from_yaml("name: x\nprofiles:\n- name: p\n  filters: []\n  score: [TaintToleration]\n")
    ((scorer),) = policy.profiles[0].scorers
    assert (scorer.plugin.name, scorer.weight) == ("TaintToleration", 1)


def test_policy_errors_say_where():
    with pytest.raises(PolicyError, match=r"mine.yaml: invalid policy: profiles: .*at least 1"):
        policy_from_yaml("name: x\nprofiles: []\n", source="mine.yaml")
    with pytest.raises(PolicyError, match=r"score\[0\]: bad args for NodeResourcesFit: unknown strategy"):
        policy_from_yaml(
            "name: x\nprofiles:\n- name: p\n  filters: []\n  score:\n"
            "  - {plugin: NodeResourcesFit, args: {strategy: Sideways}}\n"
        )
    with pytest.raises(PolicyError) as bad_weight:
        policy_from_yaml(
            "name: x\nprofiles:\n- name: p\n  filters: [5]\n  score: [{plugin: NodeAffinity, weight: 2.5}]\n",
            source="mine.yaml",
        )
    assert str(bad_weight.value) == (
        "mine.yaml: invalid policy: profiles[0].filters[0]: expected a plugin name or a mapping "
        "{plugin, weight, args}; profiles[0].score[0].weight: Input should be a valid integer, "
        "got a number with a fractional part"
    )
    with pytest.raises(PolicyError) as bad_yaml:
        policy_from_yaml("name: x\nprofiles:\n  a: 1\n b: 2\n", source="mine.yaml")
    # one line, with where: file, line and column of the problem
    assert str(bad_yaml.value) == (
        "mine.yaml:4:2: not valid YAML: expected <block end>, but found '<block mapping start>'"
        " (while parsing a block mapping)"
    )


def test_yaml_keys_after_a_merge_key_are_still_checked_for_duplicates() -> None:
    """``load_yaml`` skips a merge key ``<<`` (its values may be overridden) and goes on
    checking the mapping's other keys: ``a`` given twice after it is refused."""
    from stickypack.core.yamltext import YAMLTextError, load_yaml

    text = "base: &b {x: 1}\nm:\n  <<: *b\n  a: 1\n  a: 2\n"
    with pytest.raises(YAMLTextError) as err:
        load_yaml(text, "m.yaml")
    # the second ``a`` is on line 5, column 3 (1-based)
    assert (
        str(err.value) == "m.yaml:5:3: not valid YAML: found duplicate key 'a' (while constructing a mapping)"
    )
    assert load_yaml("base: &b {x: 1}\nm:\n  <<: *b\n  x: 2\n", "m.yaml")["m"] == {"x": 2}


def test_a_yaml_sequence_as_a_mapping_key_is_a_yaml_error_not_a_traceback() -> None:
    """A complex key (``? [a]``) is no scalar: the duplicate check leaves it to PyYAML, which
    refuses it as unhashable, one line naming the file (it once met ``set`` and raised
    ``TypeError``)."""
    from stickypack.core.yamltext import YAMLTextError, load_yaml

    with pytest.raises(YAMLTextError) as err:
        load_yaml("? [a]\n: 1\n", "k.yaml")
    assert str(err.value).startswith("k.yaml:1:3: not valid YAML: found unhashable key")


def test_a_yaml_error_without_a_mark_is_its_first_line() -> None:
    """PyYAML's ``ReaderError`` (a control character) has no mark and no ``problem``: its
    message's first line is kept (the second, ``in "<unicode string>", position 4``, says
    nothing of the file), after the file's name."""
    from stickypack.core.yamltext import YAMLTextError, load_yaml

    with pytest.raises(YAMLTextError) as err:
        load_yaml("a: b\x07\n", "bad.yaml")  # BEL, U+0007, at position 4
    assert str(err.value) == (
        "bad.yaml: not valid YAML: unacceptable character #x0007: special characters are not allowed"
    )


def test_dask_retirement_is_read_shown_and_checked():
    base = "name: x\nprofiles:\n- {name: p, filters: [], score: []}\n"
    assert policy_from_yaml(base).dask_retirement == "distributed"
    policy = policy_from_yaml(base + "dask_retirement: node-aware\n")
    assert policy.dask_retirement == "node-aware" and policy.describe()["dask_retirement"] == "node-aware"
    with pytest.raises(PolicyError) as exc:
        policy_from_yaml(base + "dask_retirement: emptiest\n", source="mine.yaml")
    assert str(exc.value) == (
        "mine.yaml: invalid policy: dask_retirement: Input should be 'distributed' or 'node-aware'"
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        # each of these was once accepted without a word
        ("name: ''\nprofiles:\n- {name: p, filters: [], score: []}\n", "name: String should have at least 1"),
        ("name: x\nprofiles:\n- {name: '', filters: [], score: []}\n", "profiles[0].name: String should"),
        (
            "name: x\nprofiles:\n- {name: p, filters: [], score: []}\n- {name: p, filters: [], score: []}\n",
            "profiles[1].name: 'p' is given twice",
        ),
        (
            "name: x\nprofiles:\n- {name: p, filters: [{plugin: NodeAffinity, weight: 5}], score: []}\n",
            "profiles[0].filters[0]: NodeAffinity takes no weight",
        ),
        (  # weight 1 written out is a weight given too, though it is the default
            "name: x\nprofiles:\n- {name: p, filters: [{plugin: NodeAffinity, weight: 1}], score: []}\n",
            "profiles[0].filters[0]: NodeAffinity takes no weight",
        ),
        (
            "name: x\nprofiles:\n- {name: p, filters: [], score: [], mutate: [{plugin: BinderHubStickyBuilds,"
            " weight: 0}]}\n",
            "profiles[0].mutate[0]: BinderHubStickyBuilds takes no weight",
        ),
        (
            "name: x\nprofiles:\n- {name: p, filters: [], score: [{plugin: NodeAffinity, weight: true}]}\n",
            "profiles[0].score[0].weight: Value error, Input should be an integer, not true",
        ),
    ],
)
def test_policy_names_and_weights_that_say_nothing_are_refused(text, message):
    with pytest.raises(PolicyError) as exc:
        policy_from_yaml(text, source="mine.yaml")
    assert message in str(exc.value) and str(exc.value).startswith("mine.yaml: invalid policy: ")


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        # NaN and infinity once passed the range check and crashed the run in math.ceil
        ("{plugin: BuildLocality, args: {load_bound: .nan}}", "load_bound: Input should be a finite number"),
        ("{plugin: BuildLocality, args: {load_bound: .inf}}", "load_bound: Input should be a finite number"),
        # a finite factor past MAX_BOUND_FACTOR would overflow ceil(factor * total / n) to infinity
        ("{plugin: BuildLocality, args: {load_bound: 1e308}}", "build bounds need 1 <= load_bound <= 1e+06"),
        ("{plugin: BuildLocality, args: {spread_bound: 1e308}}", "1 <= spread_bound <= 1e+06"),
        ("{plugin: BuildLocality, args: {top_k: 2.5}}", "top_k: Input should be a valid integer"),
        ("{plugin: BuildSpread, args: {bogus: 1}}", "unknown argument 'bogus'; valid: skip_quiet, settle_s"),
        # an int64 overflow once changed results silently
        ("{plugin: LeastAllocated, weight: 100000000000000000000000}", "weight: Input should be less than"),
        ("{plugin: LeastAllocated, args: {resources: [{weight: 1}]}}", "resources as a list is of"),
        ("{plugin: MostAllocated, args: {resources: {cpu: 101}}}", "of 'cpu' must be an integer in 1..100"),
        # kube-scheduler refuses to start with these (ValidateNodeResourcesBalancedAllocationArgs);
        # the weights were once taken and ignored
        (
            "{plugin: NodeResourcesBalancedAllocation, args: {resources: {cpu: 2, memory: 1}}}",
            "resource weight of 'cpu' is 2; kube-scheduler takes 1 only",
        ),
        (
            "{plugin: NodeResourcesBalancedAllocation, args: {resources: [{name: cpu}, {name: cpu}]}}",
            "resource 'cpu' is given twice",
        ),
        # an infinite utilization once crashed with OverflowError; 2.5 was cut to 2
        (
            "{plugin: RequestedToCapacityRatio, args: {shape: [{utilization: .inf, score: 1}]}}",
            "shape points need integer utilization and score: inf is not an integer",
        ),
        (
            "{plugin: RequestedToCapacityRatio, args: {shape: [{utilization: 2.5, score: 1}]}}",
            "2.5 is not an integer",
        ),
        (
            "{plugin: RequestedToCapacityRatio, args: {shape: [{utilization: '50', score: 1}]}}",
            "'50' is not a number",
        ),
        # kube-scheduler's validateFunctionShape: utilizations strictly increasing, within
        # 0..100, scores within 0..10; an int32 field takes no boolean
        (
            "{plugin: RequestedToCapacityRatio, args: {shape: [{utilization: 50, score: 1}, "
            "{utilization: 50, score: 2}]}}",
            "shape utilizations must increase strictly",
        ),
        (
            "{plugin: RequestedToCapacityRatio, args: {shape: [{utilization: true, score: 1}]}}",
            "True is not a number",
        ),
        # an empty shape was once the default shape without a word (kube-scheduler refuses it)
        ("{plugin: RequestedToCapacityRatio, args: {shape: []}}", "shape needs at least one point"),
        # a negative room to keep once let every node score 100 without a word
        ("{plugin: BuildHeadroom, args: {cpu: '-1'}}", "BuildHeadroom needs cpu and memory >= 0"),
        ("{plugin: BuildHeadroom, args: {memory: -2G}}", "BuildHeadroom needs cpu and memory >= 0"),
        # true where a number is due was once read as 1 (one core, a top-1 ranking)
        ("{plugin: BuildLocality, args: {top_k: true}}", "top_k: expected a number, not true"),
        # under one 10 s step of its table the horizon was read as 0 without a word
        ("{plugin: DrainForecast, args: {horizon_s: 5}}", "DrainForecast horizon_s must be in [10, 604800]"),
        ("{plugin: BuildHeadroom, args: {cpu: true}}", "cpu: expected a number, not true"),
    ],
)
def test_plugin_args_are_checked_against_their_types(entry, message):
    text = f"name: x\nprofiles:\n- name: p\n  filters: []\n  score:\n  - {entry}\n"
    with pytest.raises(PolicyError) as exc:
        policy_from_yaml(text, source="mine.yaml")
    assert message in str(exc.value) and str(exc.value).startswith("mine.yaml: ")


def test_plugin_args_are_read_as_yaml_is_written():
    text = (
        "name: x\nprofiles:\n- name: p\n  filters: []\n  score:\n"
        "  - {plugin: BuildSpread, args: {skip_quiet: 'false', settle_s: '60'}}\n"
    )
    spread = policy_from_yaml(text).profiles[0].scorers[0].plugin
    assert spread.skip_quiet is False and spread.settle_s == 60.0  # 'false' once counted as true


def test_policies_command_lists_builtins(capsys):
    assert main(["policies"]) == 0
    out = capsys.readouterr().out
    for name in ("default", "z2jh", "binderhub", "stickypack", "oracle"):
        assert name in out


def test_render_scheduler_config(tmp_path, capsys):
    import yaml

    out = tmp_path / "sched.yaml"
    assert main(["render", "scheduler-config", "--profiles", "stickypack", "-o", str(out)]) == 0
    config = yaml.safe_load(out.read_text())
    assert config["kind"] == "KubeSchedulerConfiguration"
    assert [p["schedulerName"] for p in config["profiles"]] == ["stickypack"]
    assert main(["render", "scheduler-config", "--profiles", "nope"]) == 2
    valid = "valid: default-scheduler, stickypack, stickypack-builds, z2jh"
    # one line naming the profile and listing the valid ones, as simulate's unknown names
    assert f"unknown scheduler profile 'nope'; {valid}" in capsys.readouterr().err
    assert main(["render", "scheduler-config", "--profiles", "z2jh,x,y"]) == 2
    assert f"unknown scheduler profiles 'x', 'y'; {valid}" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("http://", "--extender-url must be http://HOST[:PORT]"),
        ("ftp://x", "--extender-url must be http://HOST[:PORT]"),
        ("http://[::1", "Invalid IPv6 URL"),
        ("http://x:99999", "Port out of range"),
        # kube-scheduler would have failed every call, and ignored the extender silently
        ("https://x:8888", "the extender serves plain HTTP (no TLS)"),
        ("http://x:8888/?a=b", "no query, fragment, user or spaces"),
        ("http://x:8888/#f", "no query, fragment, user or spaces"),
        ("http://u@x:8888", "no query, fragment, user or spaces"),
        ("http://@x:8888", "no query, fragment, user or spaces"),  # an empty user is a user
        ("http://x:8888/a b", "no query, fragment, user or spaces"),
    ],
)
def test_render_refuses_an_extender_url_kube_scheduler_could_not_use(url, message, capsys):
    assert main(["render", "scheduler-config", "--extender-url", url]) == 2
    assert message in capsys.readouterr().err


def test_render_routing_refuses_a_namespace_longer_than_a_label_value(capsys):
    # it is rendered as a kubernetes.io/metadata.name label value, which the API limits to 63
    ns = "a" * 64
    assert main(["render", "scheduler-routing", "--selector", "a=b", "--namespace", ns]) == 2
    assert "is not a valid namespace name" in capsys.readouterr().err


def test_render_refuses_an_extender_weight_without_an_extender(capsys):
    # it was once dropped without a word, leaving the operator's weight out of the config
    assert main(["render", "scheduler-config", "--extender-weight", "197"]) == 2
    assert "--extender-weight needs --extender-url" in capsys.readouterr().err


def test_render_with_only_a_policy_file_renders_only_its_profiles(tmp_path: Path) -> None:
    """Without ``--profiles``, ``stickypack`` is the default only when no ``--policy-file``
    is given: with one, its profiles alone."""
    import yaml

    mine = tmp_path / "mine.yaml"
    mine.write_text(
        "name: mine\nprofiles:\n"
        "  - {name: mine-spread, filters: [NodeResourcesFit], score: [LeastAllocated]}\n"
    )
    out = tmp_path / "sched.yaml"
    assert main(["render", "scheduler-config", "--policy-file", str(mine), "-o", str(out)]) == 0
    assert [p["schedulerName"] for p in yaml.safe_load(out.read_text())["profiles"]] == ["mine-spread"]
    assert main(["render", "scheduler-config", "-o", str(out)]) == 0
    assert [p["schedulerName"] for p in yaml.safe_load(out.read_text())["profiles"]] == ["stickypack"]


def test_render_profiles_skip_empty_names_and_blanks(tmp_path: Path) -> None:
    """``--profiles " z2jh,, stickypack,"``: names stripped, the empty ones between and
    after commas left out (not an unknown profile ``""``)."""
    import yaml

    out = tmp_path / "sched.yaml"
    assert main(["render", "scheduler-config", "--profiles", " z2jh,, stickypack,", "-o", str(out)]) == 0
    assert [p["schedulerName"] for p in yaml.safe_load(out.read_text())["profiles"]] == ["z2jh", "stickypack"]


def test_render_extender_weight_is_a_positive_int32(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """kube-scheduler's extender weight is an int32 > 0: 2**31 - 1 = 2147483647 is taken,
    2**31 = 2147483648 and 0 are refused."""
    import yaml

    out = tmp_path / "sched.yaml"
    argv = ["render", "scheduler-config", "--extender-url", "http://x:8888", "-o", str(out)]
    assert main([*argv, "--extender-weight", "2147483647"]) == 0
    assert yaml.safe_load(out.read_text())["extenders"][0]["weight"] == 2147483647
    for weight in ("2147483648", "0"):
        assert main([*argv, "--extender-weight", weight]) == 2
        assert f"--extender-weight must be a positive int32, got {weight}" in capsys.readouterr().err


def test_render_to_an_unwritable_path_is_a_clear_error(tmp_path, capsys):
    target = tmp_path / "missing-dir" / "config.yaml"
    assert main(["render", "scheduler-config", "--profiles", "stickypack", "--output", str(target)]) == 2
    assert f"cannot write {target}: No such file or directory" in capsys.readouterr().err


def test_a_creation_time_without_a_zone_is_utc_whatever_the_local_zone(monkeypatch):
    import time

    def created(stamp: str) -> float | None:
        return Pod.from_dict({"metadata": {"name": "p", "creationTimestamp": stamp}, "spec": {}}).created

    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    try:
        assert created("2026-12-02T10:00:00") == created("2026-12-02T10:00:00Z") == 1796205600.0
    finally:
        monkeypatch.undo()
        time.tzset()
    with pytest.raises(PodSpecError, match="not-a-time"):
        created("not-a-time")


def test_a_plugin_of_ones_own_comes_from_a_new_registry_not_a_global():
    from stickypack.core import BUILTIN_PLUGINS, SchedulingContext
    from stickypack.core.framework import ScorePlugin

    class Last(ScorePlugin):
        """The last candidate row 100, the others 0."""

        name = "Last"

        def score(self, pod, table, idx, ctx):
            return np.where(idx == idx.max(), 100, 0)

    text = "name: mine\nprofiles:\n- name: p\n  filters: []\n  score: [Last]\n"
    with pytest.raises(PolicyError, match="unknown score plugin 'Last'"):
        policy_from_yaml(text)
    with pytest.raises(TypeError):
        BUILTIN_PLUGINS.scorers["Last"] = Last  # type: ignore[index]
    mine = BUILTIN_PLUGINS.with_plugins(scorers={"Last": Last})
    policy = policy_from_yaml(text, plugins=mine)
    t = NodeTable()
    for n in ("a", "b", "c"):
        t.upsert_node(n, {"cpu": 1000, "memory": Gi, "pods": 10})
    assert policy.select(Pod("x"), t, SchedulingContext(now=0.0), np.random.default_rng(0)) == 2
    assert "Last" not in BUILTIN_PLUGINS.scorers and "MostAllocated" in mine.scorers


def test_pod_images_are_read_as_image_locality_looks_them_up():
    pod = Pod.from_dict(
        {
            "metadata": {"name": "p"},
            "spec": {
                "initContainers": [{"name": "i", "image": "busybox"}],
                "containers": [
                    {"name": "a", "image": "registry:5000/team/app"},  # the port's colon is before the slash
                    {"name": "b", "image": "quay.io/x/y:1.2"},
                    {"name": "c", "image": "x/y@sha256:abc"},
                ],
                "volumes": [{"name": "v", "image": {"reference": "data/set"}}, {"name": "w", "emptyDir": {}}],
            },
        }
    )
    assert pod.images == (
        "busybox:latest",
        "registry:5000/team/app:latest",
        "quay.io/x/y:1.2",
        "x/y@sha256:abc",
        "data/set:latest",
    )


def test_node_table_keeps_which_nodes_list_each_image():
    t = NodeTable()
    a = t.upsert_node("a", {"cpu": 1000}, images={"img:1": 5, "img:latest": 5, "other:2": 7})
    b = t.upsert_node("b", {"cpu": 1000}, images={"img:1": 5})
    assert t.image_rows["img:1"] == {a: 5, b: 5} and t.image_rows["other:2"] == {a: 7}
    t.set_taints("a", [])  # a description update without images keeps them
    assert t.images[a] == {"img:1": 5, "img:latest": 5, "other:2": 7}
    t.upsert_node("a", {"cpu": 1000}, images={"img:1": 6})  # the list replaced
    assert t.image_rows["img:1"] == {a: 6, b: 5} and "other:2" not in t.image_rows
    t.remove_image(b, "img:1")
    t.remove_image(b, "never-listed")
    assert t.image_rows["img:1"] == {a: 6}
    t.remove_node("a")
    assert t.image_rows == {}
    c = t.upsert_node("c", {"cpu": 1000})  # a reused row lists nothing of its old node
    assert c == a and t.images[c] == {}
    with pytest.raises(ValueError, match="image img size"):
        t.upsert_node("d", {"cpu": 1000}, images={"img": -1})
    assert "d" not in t


def test_a_node_table_of_other_resources_counts_cpu_memory_and_pods_first():
    t = NodeTable(resources=("nvidia.com/gpu",))
    assert t.resources == ["cpu", "memory", "pods", "nvidia.com/gpu"]
    row = t.upsert_node("n", {"nvidia.com/gpu": 2})
    t.add_pod(row, Pod("p", requests={"nvidia.com/gpu": 1}))
    assert t.requested[row].tolist() == [0, 0, 1, 1]  # cpu 0, memory 0, one pod, one gpu


def test_a_node_table_made_without_room_grows_to_take_nodes():
    t = NodeTable(capacity=0)
    assert [t.upsert_node(name, {"cpu": 1000}) for name in ("a", "b", "c")] == [0, 1, 2]


def test_numpy_integers_are_taken_as_amounts_and_image_sizes():
    t = NodeTable()
    row = t.upsert_node("n", {"cpu": np.int64(4000), "memory": np.int64(Gi)}, images={"img": np.int64(5)})
    assert t.alloc[row, :2].tolist() == [4000, Gi] and t.image_size == {"img": 5}


def test_a_removed_nodes_row_is_left_blank_and_reused_blank():
    """A freed row counts no pod and describes no node, so a column summed over every slot
    (testing.live_fidelity sums the pods column so) sees the live nodes only; the node that
    takes the row over starts with none of the old one's builds or extra columns."""
    t = NodeTable()
    t.ensure_extra("expiry")
    a = t.upsert_node("a", {"cpu": 1000, "pods": 10}, labels={"gpu": "yes"})
    assert t.labelled(("gpu",))[a]  # kept up to date from here on
    t.add_pod(a, Pod("build", requests={"cpu": 100}, annotations={"binder-repo": "r"}))
    t.add_pod(a, Pod("user", requests={"cpu": 200}))
    t.extra["expiry"][a] = 99.0
    assert t.requested[a].tolist() == [300, 0, 2] and t.build_starts[a] == 1
    t.remove_node("a")
    assert t.requested[a].tolist() == [0, 0, 0] and t.requested[:, t.rindex["pods"]].sum() == 0
    assert t.alloc[a].tolist() == [0, 0, 0] and not t.ready[a] and not t.labelled(("gpu",))[a]
    c = t.upsert_node("c", {"cpu": 1000, "pods": 10})
    assert c == a
    assert t.build_starts[c] == 0 and t.extra["expiry"][c] == 0.0  # not a's 1 build and 99.0


def test_extra_columns_grow_with_the_table():
    t = NodeTable(capacity=1)
    t.ensure_extra("expiry")
    a = t.upsert_node("a", {"cpu": 1000})
    t.extra["expiry"][a] = 7.0
    b = t.upsert_node("b", {"cpu": 1000})  # row 1: the table doubled to 2 rows
    assert t.extra["expiry"].shape == (t.alloc.shape[0],) and t.extra["expiry"][[a, b]].tolist() == [7.0, 0.0]


def test_a_node_update_replaces_allocatable_time_and_images_it_gives():
    t = NodeTable()
    row = t.upsert_node("n", {"cpu": 4000, "nvidia.com/gpu": 2}, created=500.0, images={"img:1": 5})
    t.upsert_node("n", {"cpu": 4000, "nvidia.com/gpu": 2})  # no time, no images: both kept
    assert t.created[row] == 500.0 and t.images[row] == {"img:1": 5}
    # the GPUs gone from allocatable, a creation time of 0 (the oldest) and no images listed
    t.upsert_node("n", {"cpu": 4000}, created=0.0, images={})
    assert t.alloc[row, t.rindex["nvidia.com/gpu"]] == 0 and t.alloc[row, t.rindex["cpu"]] == 4000
    assert t.created[row] == 0.0 and t.images[row] == {} and "img:1" not in t.image_rows


def test_set_taints_keeps_the_nodes_readiness_and_cordon():
    t = NodeTable()
    row = t.upsert_node("n", {"cpu": 1000}, ready=False, unschedulable=True, created=5.0)
    t.set_taints("n", [Taint("k", "", "NoSchedule")])
    assert (bool(t.ready[row]), bool(t.unschedulable[row]), bool(t.hard_tainted[row])) == (False, True, True)
    assert t.created[row] == 5.0


def test_adding_an_image_a_node_lists_already_takes_its_new_size_while_no_other_lists_it():
    t = NodeTable()
    a = t.upsert_node("a", {"cpu": 1000})
    t.add_image(a, "img", 5)
    t.add_image(a, "img", 7)  # listed again, rebuilt: no other node lists it, so 7
    assert t.image_size["img"] == 7 and t.image_rows["img"] == {a: 7}
    b = t.upsert_node("b", {"cpu": 1000}, images={"img": 9})
    # b lists it too: the one size stays 7, kept while any node lists the name, as in
    # kube-scheduler's cache (b's 9 did not replace it, nor does a's 8 now)
    t.add_image(a, "img", 8)
    assert t.image_size["img"] == 7 and t.image_rows["img"] == {a: 8, b: 9}


def test_a_pod_requesting_a_resource_new_to_the_table_is_counted():
    t = NodeTable()
    row = t.upsert_node("n", {"cpu": 1000, "pods": 10})
    t.add_pod(row, Pod("p", requests={"cpu": 100, "example.com/fpga": 2}))
    assert t.requested[row, t.rindex["example.com/fpga"]] == 2 and t.requested[row, t.rindex["cpu"]] == 100


def test_a_policy_built_in_code_refuses_an_unknown_dask_retirement():
    import dataclasses

    policy = policy_from_yaml("name: x\nprofiles:\n- {name: p, filters: [], score: []}\n")
    assert dataclasses.replace(policy, dask_retirement="node-aware").dask_retirement == "node-aware"
    with pytest.raises(
        PolicyError, match=r"policy x: dask_retirement 'node_aware'; valid: distributed, node-aware"
    ):
        dataclasses.replace(policy, dask_retirement="node_aware")


def test_a_profile_sums_weighted_scores_checks_plugins_and_matches_every_label() -> None:
    """``Profile.scores`` is ``sum(weight * score)``: node a scores (100, 0) and node b
    (0, 40) from two scorers of weights 1 and 3, so a totals 1*100 + 3*0 = 100 and b
    1*0 + 3*40 = 120, and b is picked (unweighted, a's 100 would beat b's 40). A checked
    scorer's negative score and a checked filter's non-bool mask are contract errors;
    ``matches`` wants every label of ``match_labels``, not any."""
    from stickypack.core.framework import (
        FilterPlugin,
        PluginContractError,
        Profile,
        SchedulingContext,
        ScorePlugin,
        WeightedScorer,
    )

    class Fixed(ScorePlugin):
        def __init__(self, name: str, by_node: dict[str, int]) -> None:
            self.name, self.by_node = name, by_node

        def score(self, pod: Pod, table: NodeTable, idx: np.ndarray, ctx: SchedulingContext) -> np.ndarray:
            return np.array([self.by_node[table.names[i]] for i in idx.tolist()], dtype=np.int64)

    class Ones(FilterPlugin):
        name = "Ones"

        def filter(self, pod: Pod, table: NodeTable, idx: np.ndarray, ctx: SchedulingContext) -> np.ndarray:
            return np.ones(idx.shape[0], dtype=np.int64)  # truthy, but not a bool mask

    table = NodeTable()
    for name in ("a", "b"):
        table.upsert_node(name, {"cpu": 4000, "memory": 16 * 2**30, "pods": 110})
    pod = Pod.from_dict({"metadata": {"name": "p", "labels": {"app": "x"}}, "spec": {"containers": [{}]}})
    ctx, rng = SchedulingContext(), np.random.default_rng(0)
    first, second = Fixed("First", {"a": 100, "b": 0}), Fixed("Second", {"a": 0, "b": 40})
    profile = Profile("p", [], [WeightedScorer(first, 1), WeightedScorer(second, 3)])
    idx = np.array([table.index["a"], table.index["b"]])
    assert profile.scores(pod, table, idx, ctx).tolist() == [100, 120]
    assert table.names[profile.select(pod, table, ctx, rng)] == "b"

    negative = Fixed("Negative", {"a": -1, "b": 50})
    with pytest.raises(PluginContractError, match=r"Negative returned scores -1\.\.50"):
        Profile("p", [], [WeightedScorer(negative, 1)], checked=(negative,)).scores(pod, table, idx, ctx)
    ones = Ones()
    with pytest.raises(PluginContractError, match="filter plugin Ones returned an int64 array"):
        Profile("p", [ones], [], checked=(ones,)).feasible(pod, table, ctx)

    assert Profile("p", [], [], match_labels={"app": "x"}).matches(pod)
    assert not Profile("p", [], [], match_labels={"app": "x", "role": "build"}).matches(pod)


# ---- held by a mutation audit of core/policy.py and core/framework.py ----


def test_node_resources_fit_without_a_strategy_is_least_allocated() -> None:
    # kube-scheduler's default scoring strategy (NodeResourcesFitArgs.scoringStrategy.type)
    policy = policy_from_yaml("name: x\nprofiles:\n- name: p\n  filters: []\n  score: [NodeResourcesFit]\n")
    assert policy.profiles[0].scorers[0].plugin.strategy == "LeastAllocated"


class _Flags(ScorePlugin):
    """A scorer of one's own whose arguments are typed so that true is, or is not, theirs."""

    name = "Flags"

    def __init__(
        self,
        anything: object = None,
        mode: Literal["auto", True] = "auto",
        count: int | bool = 0,
        ratio: float | None = None,
    ) -> None:
        self.anything, self.mode, self.count, self.ratio = anything, mode, count, ratio

    def score(self, pod: Pod, table: NodeTable, idx: np.ndarray, ctx: SchedulingContext) -> np.ndarray:
        return np.zeros(idx.shape[0], dtype=np.int64)


@pytest.mark.parametrize(
    ("arg", "message"),
    [
        ("anything", None),  # object: any value
        ("mode", None),  # a literal with True among its values
        ("count", None),  # a union with bool among its members
        ("ratio", "ratio: expected a number, not true"),  # float | None: no boolean
    ],
)
def test_true_is_taken_where_the_arguments_type_admits_a_boolean(arg: str, message: str | None) -> None:
    from stickypack.core import BUILTIN_PLUGINS

    mine = BUILTIN_PLUGINS.with_plugins(scorers={"Flags": _Flags})
    text = (
        f"name: x\nprofiles:\n- name: p\n  filters: []\n  score: [{{plugin: Flags, args: {{{arg}: true}}}}]\n"
    )
    if message is None:
        plugin = policy_from_yaml(text, plugins=mine).profiles[0].scorers[0].plugin
        assert getattr(plugin, arg) is True
    else:
        with pytest.raises(PolicyError, match=message):
            policy_from_yaml(text, plugins=mine)


def test_a_plugin_of_ones_own_replaces_a_built_in_of_its_name() -> None:
    # with_plugins: "a name given again is replaced", a filter's as a scorer's
    from stickypack.core import BUILTIN_PLUGINS
    from stickypack.core.framework import FilterPlugin

    class NodeAge(_Flags):
        name = "NodeAge"

    class NodeReady(FilterPlugin):
        name = "NodeReady"

        def filter(self, pod: Pod, table: NodeTable, idx: np.ndarray, ctx: SchedulingContext) -> np.ndarray:
            return np.ones(idx.shape[0], dtype=bool)

    mine = BUILTIN_PLUGINS.with_plugins(filters={"NodeReady": NodeReady}, scorers={"NodeAge": NodeAge})
    policy = policy_from_yaml(
        "name: x\nprofiles:\n- {name: p, filters: [NodeReady], score: [NodeAge]}\n", plugins=mine
    )
    assert type(policy.profiles[0].filters[0]) is NodeReady
    assert type(policy.profiles[0].scorers[0].plugin) is NodeAge
    assert BUILTIN_PLUGINS.scorers["NodeAge"] is not NodeAge  # the built-in registry unchanged
    assert BUILTIN_PLUGINS.filters["NodeReady"] is not NodeReady


def test_a_score_weight_is_an_int32_as_kube_schedulers_plugin_weight() -> None:
    # Plugin.Weight is int32 in KubeSchedulerConfiguration: 2**31 - 1 = 2147483647 is the
    # largest, 2**31 refused
    def weighed(weight: int) -> str:
        entry = f"{{plugin: NodeAge, weight: {weight}}}"
        return f"name: x\nprofiles:\n- {{name: p, filters: [], score: [{entry}]}}\n"

    assert policy_from_yaml(weighed(2147483647)).profiles[0].scorers[0].weight == 2147483647
    with pytest.raises(PolicyError, match="weight: Input should be less than or equal to 2147483647"):
        policy_from_yaml(weighed(2147483648))


def test_a_pod_no_profile_matches_is_served_by_the_last_profile() -> None:
    text = (
        "name: x\nprofiles:\n"
        "- {name: builds, match: {labels: {component: build}}, filters: [], score: []}\n"
        "- {name: users, match: {labels: {component: user}}, filters: [], score: []}\n"
    )
    policy = policy_from_yaml(text)
    assert policy.profile_for(Pod("p", labels={"component": "build"})).name == "builds"
    assert policy.profile_for(Pod("p", labels={"component": "dask"})).name == "users"


def test_mutators_run_in_turn_each_on_the_pod_the_last_returned() -> None:
    # a mutator may return a new pod: the next one, and the caller, get that pod
    from stickypack.core import BUILTIN_PLUGINS, PodMutator

    class Suffix(PodMutator):
        name = "Suffix"

        def mutate(self, pod: Pod, table: NodeTable, ctx: SchedulingContext) -> Pod:
            return Pod(pod.name + "-x", labels=dict(pod.labels))

    mine = BUILTIN_PLUGINS.with_plugins(mutators={"Suffix": Suffix})
    policy = policy_from_yaml(
        "name: x\nprofiles:\n- {name: p, mutate: [Suffix, Suffix], filters: [], score: []}\n", plugins=mine
    )
    assert policy.prepare(Pod("p"), NodeTable(), SchedulingContext()).name == "p-x-x"


def test_a_plugin_of_ones_own_missing_an_argument_is_told_bad_args() -> None:
    from stickypack.core import BUILTIN_PLUGINS

    class Needy(_Flags):
        name = "Needy"

        def __init__(self, level: int) -> None:
            super().__init__()
            self.level = level

    mine = BUILTIN_PLUGINS.with_plugins(scorers={"Needy": Needy})
    with pytest.raises(PolicyError, match=r"score\[0\]: bad args for Needy: .*missing 1 required.*'level'"):
        policy_from_yaml("name: x\nprofiles:\n- {name: p, filters: [], score: [Needy]}\n", plugins=mine)


def test_prepare_runs_the_mutators_of_the_profile_it_is_given() -> None:
    # the profile given, not the one the pod's labels match (a pod of no label matches
    # the last, mutator-less profile here)
    from stickypack.core import BUILTIN_PLUGINS, PodMutator

    class Suffix(PodMutator):
        name = "Suffix"

        def mutate(self, pod: Pod, table: NodeTable, ctx: SchedulingContext) -> Pod:
            return Pod(pod.name + "-x")

    mine = BUILTIN_PLUGINS.with_plugins(mutators={"Suffix": Suffix})
    text = (
        "name: x\nprofiles:\n- {name: builds, match: {labels: {component: build}}, mutate: [Suffix],"
        " filters: [], score: []}\n- {name: rest, filters: [], score: []}\n"
    )
    policy = policy_from_yaml(text, plugins=mine)
    builds = policy.profiles[0]
    assert policy.prepare(Pod("p"), NodeTable(), SchedulingContext()).name == "p"
    assert policy.prepare(Pod("p"), NodeTable(), SchedulingContext(), profile=builds).name == "p-x"


def test_a_checked_filter_mask_of_the_wrong_length_is_a_contract_error() -> None:
    from stickypack.core.framework import FilterPlugin, PluginContractError, Profile

    class Long(FilterPlugin):
        name = "Long"

        def filter(self, pod: Pod, table: NodeTable, idx: np.ndarray, ctx: SchedulingContext) -> np.ndarray:
            return np.ones(idx.shape[0] + 1, dtype=bool)  # one verdict too many

    table = NodeTable()
    for name in ("a", "b"):
        table.upsert_node(name, {"cpu": 4000, "memory": 16 * Gi, "pods": 110})
    long = Long()
    with pytest.raises(
        PluginContractError,
        match=r"filter plugin Long returned a bool array of shape \(3,\); expected a bool array of 2",
    ):
        Profile("p", [long], [], checked=(long,)).feasible(Pod("x"), table, SchedulingContext())


def test_a_checked_scorer_answering_one_score_for_two_nodes_is_a_contract_error() -> None:
    # numpy would broadcast the one score to both nodes without a word
    from stickypack.core.framework import PluginContractError, Profile, WeightedScorer

    class One(_Flags):
        name = "One"

        def score(self, pod: Pod, table: NodeTable, idx: np.ndarray, ctx: SchedulingContext) -> np.ndarray:
            return np.array([100], dtype=np.int64)

    table = NodeTable()
    for name in ("a", "b"):
        table.upsert_node(name, {"cpu": 4000, "memory": 16 * Gi, "pods": 110})
    one = One()
    profile = Profile("p", [], [WeightedScorer(one, 1)], checked=(one,))
    with pytest.raises(
        PluginContractError,
        match=r"score plugin One returned an int64 array of shape \(1,\); expected an int64 array of 2",
    ):
        profile.scores(Pod("x"), table, np.array([table.index["a"], table.index["b"]]), SchedulingContext())


def test_a_plugin_of_ones_own_given_no_args_is_described_by_its_name_alone() -> None:
    # policies --show writes {plugin: Flags}, not {plugin: Flags, args: {}}
    from stickypack.core import BUILTIN_PLUGINS

    mine = BUILTIN_PLUGINS.with_plugins(scorers={"Flags": _Flags})
    policy = policy_from_yaml("name: x\nprofiles:\n- {name: p, filters: [], score: [Flags]}\n", plugins=mine)
    assert policy.profiles[0].describe()["score"] == [{"plugin": "Flags", "weight": 1}]
    policy = policy_from_yaml(
        "name: x\nprofiles:\n- {name: p, filters: [], score: [{plugin: Flags, args: {count: 2}}]}\n",
        plugins=mine,
    )
    assert policy.profiles[0].describe()["score"] == [{"plugin": "Flags", "args": {"count": 2}, "weight": 1}]


def test_a_checked_scorer_over_no_node_is_no_contract_error() -> None:
    from stickypack.core.framework import Profile, WeightedScorer

    flags = _Flags()
    profile = Profile("p", [], [WeightedScorer(flags, 1)], checked=(flags,))
    empty = np.array([], dtype=np.int64)
    assert profile.scores(Pod("x"), NodeTable(), empty, SchedulingContext()).tolist() == []


def test_a_profile_is_described_with_its_match_and_weights_and_reads_back_the_same() -> None:
    from stickypack.core.policy import policy_from_dict

    text = (
        "name: x\nprofiles:\n- {name: builds, match: {labels: {component: build}}, filters: [NodeReady],"
        " score: [{plugin: NodeAge, weight: 3}]}\n- {name: rest, filters: [], score: []}\n"
    )
    policy = policy_from_yaml(text)
    shown = policy.profiles[0].describe()
    assert shown["match"] == {"labels": {"component": "build"}}
    assert [s["weight"] for s in shown["score"]] == [3]
    again = policy_from_dict(policy.describe())
    assert again.describe() == policy.describe()
    assert again.profile_for(Pod("p", labels={"component": "build"})).name == "builds"


def test_select_with_one_feasible_node_binds_it_without_scoring() -> None:
    # kube-scheduler skips scoring when one node passes the filters; a scorer is not
    # called then (ScorePlugin.score's contract)
    from stickypack.core.framework import Profile, WeightedScorer

    called: list[int] = []

    class Counting(_Flags):
        name = "Counting"

        def score(self, pod: Pod, table: NodeTable, idx: np.ndarray, ctx: SchedulingContext) -> np.ndarray:
            called.append(idx.shape[0])
            return np.zeros(idx.shape[0], dtype=np.int64)

    table = NodeTable()
    table.upsert_node("only", {"cpu": 4000, "memory": 16 * Gi, "pods": 110})
    profile = Profile("p", [], [WeightedScorer(Counting(), 1)])
    rng = np.random.default_rng(0)
    assert profile.select(Pod("x"), table, SchedulingContext(), rng) == table.index["only"]
    assert called == []
    table.upsert_node("other", {"cpu": 4000, "memory": 16 * Gi, "pods": 110})
    profile.select(Pod("x"), table, SchedulingContext(), rng)
    assert called == [2]


def test_a_pod_dict_without_namespace_scheduler_or_node_reads_as_kubernetes_defaults_it() -> None:
    """What a pod dict may leave out reads as the API server fills it in: namespace
    ``default``, ``schedulerName: default-scheduler``; an empty ``nodeName`` is no node; a pod
    the webhook sees before the API server names it (``generateName``) goes by that prefix."""
    bare = Pod.from_dict({"metadata": {"name": "p"}, "spec": {"nodeName": ""}})
    assert (bare.namespace, bare.key) == ("default", "default/p")
    assert (bare.scheduler_name, bare.node_name) == ("default-scheduler", None)
    generated = Pod.from_dict({"metadata": {"generateName": "build-"}, "spec": {"schedulerName": ""}})
    assert (generated.name, generated.scheduler_name) == ("build-", "default-scheduler")
    named = Pod.from_dict({"metadata": {"name": "p", "generateName": "build-"}, "spec": {"nodeName": "n1"}})
    assert (named.name, named.node_name) == ("p", "n1")


def test_the_controller_is_read_with_its_api_group_and_a_missing_name_as_none() -> None:
    """``owner_group`` is the controller's ``apiVersion`` before its ``/``, "" for the core
    group's ``v1`` (what ``explain`` compares with ``apps``); a controller reference without a
    name gives ``owner_name`` None."""

    def owner(ref: dict[str, object]) -> Pod:
        return Pod.from_dict({"metadata": {"name": "p", "ownerReferences": [ref]}, "spec": {}})

    ds = owner({"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds", "controller": True})
    assert (ds.owner_kind, ds.owner_name, ds.owner_group) == ("DaemonSet", "ds", "apps")
    rc = owner({"apiVersion": "v1", "kind": "ReplicationController", "name": "rc", "controller": True})
    assert (rc.owner_kind, rc.owner_name, rc.owner_group) == ("ReplicationController", "rc", "")
    nameless = owner({"apiVersion": "apps.kruise.io/v1beta1", "kind": "StatefulSet", "controller": True})
    assert (nameless.owner_name, nameless.owner_group) == (None, "apps.kruise.io")


def test_required_node_affinity_that_is_no_object_is_named_and_an_empty_one_matches_nothing() -> None:
    """``requiredDuringSchedulingIgnoredDuringExecution`` of another shape than an object is
    an error naming it, even when it is empty (``[]``, ``""``); an object without terms is
    kept as no terms, which match no node (component-helpers ``nodeaffinity.NodeSelector``:
    no term matches), not read as no node affinity at all."""
    from stickypack.core.framework import SchedulingContext
    from stickypack.core.plugins import NodeAffinityFilter
    from stickypack.core.pod import REQUIRED

    def pod(required: object) -> Pod:
        spec = {"affinity": {"nodeAffinity": {REQUIRED: required}}}
        return Pod.from_dict({"metadata": {"name": "p"}, "spec": spec})

    where = rf"spec\.affinity\.nodeAffinity\.{REQUIRED}"
    for bad in ([], "", 0):
        with pytest.raises(PodSpecError, match=f"{where} must be an object"):
            pod(bad)
    t = NodeTable()
    t.upsert_node("a", {"cpu": 1000, "memory": Gi, "pods": 10})
    idx = t.active_indices()
    assert pod(None).required_terms is None
    assert NodeAffinityFilter().filter(pod(None), t, idx, SchedulingContext()).tolist() == [True]
    assert pod({}).required_terms == ()
    assert NodeAffinityFilter().filter(pod({}), t, idx, SchedulingContext()).tolist() == [False]


def test_a_grace_period_of_zero_is_kept_and_a_non_integer_one_is_unknown() -> None:
    """``terminationGracePeriodSeconds: 0`` is a grace period of 0 s, not an unknown one (the
    cluster-autoscaler's ``IsPodLongTerminating`` would take its default 30 s for that); a
    boolean is no integer."""
    from stickypack.core.explain import (
        DEFAULT_GRACE_PERIOD_S,
        LONG_TERMINATING_EXTRA_S,
        ScaleDownRules,
        is_long_terminating,
    )

    def pod(grace: object) -> Pod:
        meta = {"name": "p", "deletionTimestamp": "2026-12-02T10:00:00Z"}
        return Pod.from_dict({"metadata": meta, "spec": {"terminationGracePeriodSeconds": grace}})

    assert pod(0).grace_period_s == 0 and pod(45).grace_period_s == 45
    assert pod(True).grace_period_s is None and pod(-1).grace_period_s is None
    deleted = pod(0).deleted
    assert deleted is not None
    # deleted + 0 s grace + 30 s extra < now = deleted + 31 s; with the default 30 s grace, not
    now = deleted + LONG_TERMINATING_EXTRA_S + 1
    assert DEFAULT_GRACE_PERIOD_S == 30
    assert is_long_terminating(pod(0), ScaleDownRules(now=now))
    assert not is_long_terminating(pod(True), ScaleDownRules(now=now))


@pytest.mark.parametrize("weight", [0, 101, 1.5, True, "5", None])
def test_an_affinity_weight_outside_1_to_100_is_refused_naming_the_term(weight: object) -> None:
    """The API server takes a preferred term's weight from 1 to 100, an integer."""
    from stickypack.core.pod import PREFERRED

    node = {"nodeAffinity": {PREFERRED: [{"weight": weight, "preference": {}}]}}
    with pytest.raises(PodSpecError, match=rf"nodeAffinity\.{PREFERRED}\[0\]\.weight: .*1 to 100"):
        Pod.from_dict({"metadata": {"name": "p"}, "spec": {"affinity": node}})
    term = {"labelSelector": {"matchLabels": {"a": "b"}}, "topologyKey": "k"}
    anti = {"podAntiAffinity": {PREFERRED: [{"weight": weight, "podAffinityTerm": term}]}}
    with pytest.raises(PodSpecError, match=rf"podAntiAffinity\.{PREFERRED}\[0\]\.weight: .*1 to 100"):
        Pod.from_dict({"metadata": {"name": "p"}, "spec": {"affinity": anti}})


def test_affinity_weights_1_and_100_are_taken() -> None:
    """The bounds of 1..100 themselves, and a whole float as JSON may give it."""
    from stickypack.core.pod import PREFERRED

    preferred = [{"weight": w, "preference": {}} for w in (1, 100, 7.0)]
    spec = {"affinity": {"nodeAffinity": {PREFERRED: preferred}}}
    pod = Pod.from_dict({"metadata": {"name": "p"}, "spec": spec})
    assert [t.weight for t in pod.preferred_terms] == [1, 100, 7]


def test_an_init_container_runs_beside_the_sidecars_started_before_it() -> None:
    """component-helpers ``resource.PodRequests``: a regular init container's requests are
    added to those of the restartable (sidecar) init containers listed before it, and the
    pod asks for the larger of that peak and its containers plus all sidecars."""
    spec = {
        "initContainers": [
            {"name": "sidecar", "restartPolicy": "Always", "resources": {"requests": {"cpu": "500m"}}},
            {"name": "init", "resources": {"requests": {"cpu": "1"}}},
        ],
        "containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}],
    }
    pod = Pod.from_dict({"metadata": {"name": "p"}, "spec": spec})
    # init with the sidecar: 1000m + 500m = 1500m; containers with it: 100m + 500m = 600m
    assert pod.requests["cpu"] == 1500


def test_pod_level_requests_replace_hugepages_but_not_extended_resources() -> None:
    """kube-scheduler reads pod-level requests for the resources pod-level resources support
    (``IsSupportedPodLevelResource``: cpu, memory, hugepages-*); any other resource comes
    from the containers."""
    mi = 1024**2
    container = {"requests": {"cpu": "100m", "hugepages-2Mi": "2Mi", "example.com/x": "1"}}
    spec = {
        "containers": [{"name": "c", "resources": container}],
        "resources": {"requests": {"cpu": "1", "hugepages-2Mi": "4Mi", "example.com/x": "5"}},
    }
    pod = Pod.from_dict({"metadata": {"name": "p"}, "spec": spec})
    # cpu 1 core and hugepages 4Mi from the pod level; example.com/x 1 from the container
    assert pod.requests == {"cpu": 1000, "hugepages-2Mi": 4 * mi, "example.com/x": 1}


def test_a_pod_may_request_32_distinct_resources_but_not_33() -> None:
    """:data:`MAX_POD_RESOURCES` (32) is the most a pod may request."""
    from stickypack.core.pod import MAX_POD_RESOURCES

    def pod(n: int) -> Pod:
        requests = {f"example.com/r{i}": "1" for i in range(n)}
        spec = {"containers": [{"name": "c", "resources": {"requests": requests}}]}
        return Pod.from_dict({"metadata": {"name": "p"}, "spec": spec})

    assert MAX_POD_RESOURCES == 32
    assert len(pod(32).requests) == 32
    with pytest.raises(PodSpecError, match="33 distinct resources requested; at most 32"):
        pod(33)


def test_names_and_labels_are_taken_up_to_the_api_servers_lengths() -> None:
    """k8s.io/apimachinery ``util/validation``: a DNS label (``IsDNS1123Label``) of at most 63
    characters, not ending in ``-``; a label key (``IsQualifiedName``) of a name of at most 63
    characters after an optional DNS-subdomain prefix of at most 253; a label value
    (``IsValidLabelValue``) of at most 63, checked with the key."""
    from stickypack.core.labels import is_dns_label, is_label

    assert is_dns_label("a" * 63) and not is_dns_label("a" * 64)
    assert is_dns_label("a-b") and not is_dns_label("ab-") and not is_dns_label("-ab")
    assert is_label("a" * 63, "v") and not is_label("a" * 64, "v")
    prefix = ".".join(["a" * 63] * 3 + ["a" * 61])  # 3 * 63 + 61 + 3 dots = 253 characters
    assert len(prefix) == 253
    assert is_label(f"{prefix}/k", "v") and not is_label(f"{prefix}a/k", "v")
    assert is_label("k", "v" * 63) and not is_label("k", "v" * 64)
    assert is_label("k", "") and not is_label("k", "not a value") and not is_label("k", "-v")


def test_a_taint_is_written_as_the_api_writes_it() -> None:
    """``Taint.to_dict``: key and effect, the value only when there is one (as a node's
    ``spec.taints`` lists it); :meth:`Taint.from_dict` reads it back."""
    assert Taint("k").to_dict() == {"key": "k", "effect": "NoSchedule"}
    tainted = Taint("k", "v", "NoExecute")
    assert tainted.to_dict() == {"key": "k", "value": "v", "effect": "NoExecute"}
    assert Taint.from_dict(tainted.to_dict()) == tainted
