"""``stickypack render scheduler-routing [--placement]``: the ``MutatingAdmissionPolicy`` gives
routed pods the scheduler, the node affinity and tolerations a webhook route's
:class:`RoutePlacement` gives them, and the webhook's ``stickypack.io/scheduler-route``
annotation (the policy's name, unless the pod's annotations are full). On the real
kube-apiserver, each pod the policy admits is compared with what the webhook's pure code
(:func:`route_pod`, for a route named like the policy) makes of the same pod, for chosen
pods and for generated ones."""

from __future__ import annotations

import copy
import json
import time
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from kubernetes_asyncio.client.exceptions import ApiException

from stickypack.cli import main
from stickypack.core.routing import (
    MAX_ANNOTATION_BYTES,
    PREFERRED,
    REQUIRED,
    ROUTE_ANNOTATION,
    LabelSelector,
    RoutePlacement,
    SchedulerRoute,
    route_pod,
)
from stickypack.render import (
    MAX_EXACT_PATCH_INT,
    ROUTING_PATCH_EXPRESSION,
    ROUTING_VARIABLES,
    _cel,
    routing_policy_name,
    scheduler_routing,
    scheduler_routing_yaml,
)
from stickypack.testing import ControlPlane, pod_manifest

POOL = {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["user"]}]}
NODE_N1 = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}
ZONE = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
DEDICATED = {"key": "hub.jupyter.org/dedicated", "value": "user", "effect": "NoSchedule"}
DRAIN = {"key": "drain", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30}
#: Every part of a placement: two required terms (one of matchFields), a preferred term,
#: two tolerations (one with tolerationSeconds).
FULL = {
    "node_affinity": {
        REQUIRED: {"nodeSelectorTerms": [POOL, NODE_N1]},
        PREFERRED: [{"weight": 10, "preference": POOL}],
    },
    "tolerations": [DEDICATED, DRAIN],
}


# ---------------------------------------------------------------------------- rendering


def test_every_policy_is_the_one_json_patch_expression_with_its_variables() -> None:
    """With a placement or without (or with an empty one): one ``JSONPatch`` mutation, the
    fixed :data:`ROUTING_PATCH_EXPRESSION`, scheduler name and annotation included, so a
    failing expression leaves the pod wholly unrouted; the route is in the variables: the
    scheduler name, the route name (the policy's), and the placement's lists (empty for
    none)."""
    plain = scheduler_routing("stickypack", {"a": "b"})
    assert scheduler_routing("stickypack", {"a": "b"}, placement=RoutePlacement()) == plain
    placed = scheduler_routing("stickypack", {"a": "b"}, placement=RoutePlacement.from_dict(**FULL))
    assert placed[1] == plain[1]
    assert plain[0]["metadata"]["name"] == routing_policy_name("stickypack")
    assert routing_policy_name("stickypack") == "stickypack-route-to-stickypack"
    for policy in (plain[0], placed[0]):
        assert policy["spec"]["failurePolicy"] == "Ignore"
        (mutation,) = policy["spec"]["mutations"]
        assert mutation == {"patchType": "JSONPatch", "jsonPatch": {"expression": ROUTING_PATCH_EXPRESSION}}
    assert ROUTING_PATCH_EXPRESSION.startswith(
        '[JSONPatch{op: "add", path: "/spec/schedulerName", value: variables.schedulerName}]'
    )
    assert '"pool"' not in ROUTING_PATCH_EXPRESSION  # the placement is in the variables only
    # the annotation's key and its JSON Pointer (``/`` escaped as ``~1``) are written in
    assert '"/metadata/annotations/stickypack.io~1scheduler-route"' in ROUTING_PATCH_EXPRESSION
    assert f"<= {MAX_ANNOTATION_BYTES}" in ROUTING_PATCH_EXPRESSION
    variables = {v["name"]: v["expression"] for v in plain[0]["spec"]["variables"]}
    assert variables == {
        "schedulerName": '"stickypack"',
        "routeName": '"stickypack-route-to-stickypack"',
        "requiredTerms": "[]",
        "preferredTerms": "[]",
        "tolerations": "[]",
    }
    variables = {v["name"]: v["expression"] for v in placed[0]["spec"]["variables"]}
    assert list(variables) == list(ROUTING_VARIABLES)
    assert variables["routeName"] == '"stickypack-route-to-stickypack"'
    assert '"pool"' in variables["requiredTerms"]
    # the YAML writes the expression as a block, and reads back as the same policy
    text = scheduler_routing_yaml("stickypack", {"a": "b"}, placement=RoutePlacement.from_dict(**FULL))
    assert "expression: |-\n" in text
    assert list(yaml.safe_load_all(text)) == placed


def test_a_toleration_seconds_no_json_patch_carries_is_refused() -> None:
    """CEL writes an integer beyond 2**53 - 1 into a JSON Patch as a string, which
    ``tolerationSeconds`` does not decode from (checked on kube-apiserver 1.37): refused at
    render time rather than a policy that never routes."""
    edge = {**DRAIN, "tolerationSeconds": MAX_EXACT_PATCH_INT}
    scheduler_routing("s", {"a": "b"}, placement=RoutePlacement.from_dict(tolerations=[edge]))
    for seconds in (MAX_EXACT_PATCH_INT + 1, -MAX_EXACT_PATCH_INT - 1):
        beyond = RoutePlacement.from_dict(tolerations=[DEDICATED, {**DRAIN, "tolerationSeconds": seconds}])
        with pytest.raises(ValueError, match=r"tolerations\[1\]: tolerationSeconds .* beyond"):
            scheduler_routing("s", {"a": "b"}, placement=beyond)


def test_a_routing_without_a_selector_and_what_cel_cannot_carry_are_refused() -> None:
    """``scheduler_routing`` refuses an empty selector (its binding would catch every pod);
    ``_cel`` writes the integers +-(2**53 - 1) as they are and refuses one beyond them, of
    either sign (CEL would write it into a JSON Patch as a string), and a map key that is
    not a string (no CEL string literal)."""
    with pytest.raises(ValueError, match="needs a label selector"):
        scheduler_routing("stickypack", {})
    assert _cel(MAX_EXACT_PATCH_INT) == "9007199254740991"
    assert _cel(-MAX_EXACT_PATCH_INT) == "-9007199254740991"
    for beyond in (MAX_EXACT_PATCH_INT + 1, -MAX_EXACT_PATCH_INT - 1):
        with pytest.raises(ValueError, match="beyond"):
            _cel(beyond)
    assert _cel(("a", 1)) == _cel(["a", 1]) == '["a", 1]'  # a placement's tuples are lists
    with pytest.raises(TypeError, match="a key is not a string"):
        _cel({1: "a"})  # json.dumps would write the key as 1, no CEL string


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("- a\n", "expected a mapping with node_affinity and/or tolerations, got ['a']"),
        ("", "expected a mapping with node_affinity and/or tolerations, got None"),
        ("tolerashuns: []\n", "unknown key(s) tolerashuns (a placement has node_affinity and tolerations)"),
        ("tolerations: [{key: a, effect: NoRun}]\n", "tolerations[0]: effect 'NoRun' is not one of"),
        (
            "node_affinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{}]}}\n",
            "nodeSelectorTerms[0]: an empty term matches no node",
        ),
        ("tolerations: [{key: a, value: 0}]\n", "key, operator, value and effect are strings"),
        (
            "tolerations: [{operator: Exists, effect: NoExecute, tolerationSeconds: 9007199254740992}]",
            "tolerations[0]: tolerationSeconds 9007199254740992 is beyond",
        ),
        ("a: [\n", "not valid YAML"),
        (b"\xff", "not UTF-8 text"),
    ],
)
def test_a_bad_placement_file_says_which_file_and_what(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str | bytes, message: str
) -> None:
    """Validated as a webhook route's placement; exit status 2, one line, no traceback."""
    path = tmp_path / "placement.yaml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    assert main(["render", "scheduler-routing", "--placement", str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert str(path) in captured.err and message in " ".join(captured.err.split())
    assert "Traceback" not in captured.err


def test_render_routing_checks_its_scheduler_name_namespace_and_selector(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``--scheduler-name``: a DNS subdomain of at most 200 characters (the policy is named
    ``stickypack-route-to-<NAME>``); ``--namespace``: a DNS label (no dot); ``--selector``:
    not empty (the policy would catch every pod), each refusal one line naming the flag."""
    name_200 = ".".join(["a" * 63, "b" * 63, "c" * 63, "d" * 8])  # 63 * 3 + 8 + 3 dots = 200
    assert len(name_200) == 200
    assert main(["render", "scheduler-routing", "--scheduler-name", name_200]) == 0
    policy = next(yaml.safe_load_all(capsys.readouterr().out))
    assert policy["metadata"]["name"] == f"stickypack-route-to-{name_200}"  # 220 <= 253 characters
    for argv, message in [
        (["--scheduler-name", name_200 + "d"], "is not a valid scheduler name"),  # 201
        (["--namespace", "team.a"], "--namespace 'team.a' is not a valid namespace name"),
        (["--selector", ""], "--selector: a routing needs a label selector"),
    ]:
        assert main(["render", "scheduler-routing", *argv]) == 2, argv
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err, (argv, err)


def test_a_missing_placement_file_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["render", "scheduler-routing", "--placement", str(tmp_path / "nope.yaml")]) == 2
    assert "nope.yaml: cannot read" in capsys.readouterr().err


def test_the_documented_placement_file_renders(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The ``--placement`` example of docs/configuration.md, as written there."""
    doc = (Path(__file__).resolve().parents[1] / "docs/configuration.md").read_text()
    section = doc.split("## `stickypack render scheduler-routing`", 1)[1].split("\n## ", 1)[0]
    example = section.split("```yaml\n", 1)[1].split("```", 1)[0]
    (tmp_path / "placement.yaml").write_text(example)
    assert main(["render", "scheduler-routing", "--placement", str(tmp_path / "placement.yaml")]) == 0
    policy = next(yaml.safe_load_all(capsys.readouterr().out))
    variables = {v["name"]: v["expression"] for v in policy["spec"]["variables"]}
    assert '"hub.jupyter.org/node-purpose"' in variables["requiredTerms"]
    assert '"hub.jupyter.org/dedicated"' in variables["tolerations"]


# ---------------------------------------------------------------------------- the API server


def _routed(pod: Mapping[str, Any]) -> dict[str, Any]:
    """What routing may change in a pod: its spec, and its annotations (None for none)."""
    return {"spec": pod["spec"], "annotations": pod["metadata"].get("annotations")}


def _as_the_webhook_routes(route: SchedulerRoute, base: Mapping[str, Any]) -> dict[str, Any]:
    """:func:`_routed` of ``base`` (a pod as admission sees it) once the webhook's
    :func:`route_pod` patch for ``route`` is applied: its ``add`` operations on
    ``/spec/<field>``, ``/metadata/annotations`` and ``/metadata/annotations/<key>``."""
    pod = copy.deepcopy(dict(base))
    for op in route_pod([route], pod, "default").patch:
        assert op["op"] == "add"
        section, *tokens = op["path"].split("/")[1:]
        if section == "spec":
            assert len(tokens) == 1, op
            pod["spec"][tokens[0]] = op["value"]
        elif tokens == ["annotations"]:
            pod["metadata"]["annotations"] = op["value"]
        else:
            assert section == "metadata" and len(tokens) == 2 and tokens[0] == "annotations", op
            pod["metadata"]["annotations"][tokens[1].replace("~1", "/").replace("~0", "~")] = op["value"]
    return _routed(pod)


def _admitted_as(cluster: ControlPlane, pod: Mapping[str, Any]) -> dict[str, Any]:
    """``pod`` as admission sees it, without our policy: its dry run without labels (the
    API server's defaults and earlier admission plugins, such as DefaultTolerationSeconds,
    applied). A pod valid only once routed (required node affinity without terms, which the
    route's terms complete) is dry-run without that part, then given it back."""
    bare = copy.deepcopy(dict(pod))
    bare["metadata"] = {**bare["metadata"], "labels": {}, "name": f"base-{uuid.uuid4().hex[:8]}"}
    affinity = bare["spec"].get("affinity")
    required = ((affinity or {}).get("nodeAffinity") or {}).get(REQUIRED)
    terms_to_come = required is not None and not required.get("nodeSelectorTerms")
    if terms_to_come:
        del bare["spec"]["affinity"]["nodeAffinity"][REQUIRED]
    base = cluster.dry_run_pod(bare)
    if terms_to_come:
        node_affinity = base["spec"].setdefault("affinity", {}).setdefault("nodeAffinity", {})
        node_affinity[REQUIRED] = copy.deepcopy(required)
    base["metadata"]["labels"] = dict(pod["metadata"]["labels"])  # for the route to match
    return base


def _route(
    selector: dict[str, str], placement: RoutePlacement, scheduler: str = "stickypack"
) -> SchedulerRoute:
    """The webhook's route the policy of ``scheduler_routing(scheduler, selector,
    placement=placement)`` stands for: named like the policy, whose name the policy's
    annotation carries."""
    selector_ = LabelSelector.from_dict({"matchLabels": selector})
    return SchedulerRoute(routing_policy_name(scheduler), scheduler, selector_, placement=placement)


def _pod(
    name: str, labels: dict[str, str], scheduler: str = "default-scheduler", **spec: Any
) -> dict[str, Any]:
    pod = pod_manifest(name, labels=labels, scheduler_name=scheduler)
    pod["spec"].update(copy.deepcopy(spec))
    return pod


@pytest.mark.controlplane
def test_the_policy_places_pods_as_the_webhook_does(
    cluster: ControlPlane, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``render scheduler-routing --placement`` applied to kube-apiserver: every pod it
    routes is stored with the spec (and the annotation) the webhook's :func:`route_pod`
    gives the same pod, for
    pods without affinity, with an empty one, with pod anti-affinity only, with two required
    terms of their own (and an empty term), with preferred terms, with required node
    affinity that has no terms yet, with the route's toleration already (written with the
    defaults left out), with other tolerations (one whose ``tolerationSeconds`` is beyond
    2**53). Pods that name a scheduler, and unlabelled pods, are stored untouched."""
    labels = {"route": uuid.uuid4().hex[:8]}
    placement_file = tmp_path / "placement.yaml"
    placement_file.write_text(yaml.safe_dump(FULL))
    argv = [
        "render",
        "scheduler-routing",
        "--scheduler-name",
        "stickypack",
        "--placement",
        str(placement_file),
    ]
    assert main([*argv, "--selector", f"route={labels['route']}"]) == 0
    docs = list(yaml.safe_load_all(capsys.readouterr().out))
    route = _route(labels, RoutePlacement.from_dict(**FULL))
    own_required = {"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": [ZONE, NODE_N1]}}}
    anti = {"podAntiAffinity": {PREFERRED: [{"weight": 1, "podAffinityTerm": {"topologyKey": "zone"}}]}}
    others = [
        {"key": "gpu", "operator": "Exists"},
        {**DRAIN, "tolerationSeconds": 2**62 + 1},  # not equal: other seconds, beyond 2**53
        {**DEDICATED, "effect": "NoExecute"},  # not equal: other effect
    ]
    pods = [
        _pod("none", labels),
        _pod("empty-affinity", labels, affinity={}),
        _pod("anti-affinity-only", labels, affinity=anti),
        _pod("own-required", labels, affinity={**own_required, **anti}),
        _pod(
            "own-empty-term", labels, affinity={"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": [ZONE, {}]}}}
        ),
        _pod(
            "own-preferred",
            labels,
            affinity={"nodeAffinity": {PREFERRED: [{"weight": 5, "preference": ZONE}]}},
        ),
        _pod("no-terms-yet", labels, affinity={"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": []}}}),
        _pod("equal-toleration", labels, tolerations=[DEDICATED]),
        _pod("equal-drain", labels, tolerations=[{**DRAIN, "operator": "Exists"}]),
        _pod("other-tolerations", labels, tolerations=others),
        _pod("names-scheduler", labels, scheduler="mine", affinity=own_required, tolerations=[DRAIN]),
        _pod("unlabelled", {}, affinity=own_required),
    ]
    with cluster.admission_policies(docs):
        bases = {p["metadata"]["name"]: _admitted_as(cluster, p) for p in pods}
        created = {p["metadata"]["name"]: p for p in cluster.create_pods(pods)}
    try:
        for name, pod in created.items():
            assert _routed(pod) == _as_the_webhook_routes(route, bases[name]), name
        routed = {n for n, p in created.items() if p["spec"]["schedulerName"] == "stickypack"}
        assert routed == {p["metadata"]["name"] for p in pods} - {"names-scheduler", "unlabelled"}
        annotated = {n for n, p in created.items() if p["metadata"].get("annotations")}
        assert annotated == routed
        assert created["none"]["metadata"]["annotations"] == {ROUTE_ANNOTATION: route.name}
        # what the equality above stands for, spelled out for two pods
        terms = created["own-required"]["spec"]["affinity"]["nodeAffinity"][REQUIRED]["nodeSelectorTerms"]
        assert terms == [
            {"matchExpressions": ZONE["matchExpressions"] + POOL["matchExpressions"]},
            {**ZONE, **NODE_N1},
            {**NODE_N1, **POOL},
            {"matchFields": NODE_N1["matchFields"] * 2},
        ]
        tolerations = created["other-tolerations"]["spec"]["tolerations"]
        assert tolerations[:3] == others  # its own first, seconds exact
        assert tolerations[-2:] == [{"operator": "Equal", **DEDICATED}, DRAIN]
        assert created["names-scheduler"]["spec"] == bases["names-scheduler"]["spec"]
        assert created["unlabelled"]["spec"] == bases["unlabelled"]["spec"]
    finally:
        cluster.delete_all_pods()


#: Bytes of the route annotation the policy of ``stickypack`` adds: its key and the policy's name.
_ROUTE_ANNOTATION_BYTES = len(ROUTE_ANNOTATION) + len(routing_policy_name("stickypack"))


def _annotations_at(total: int, **others: str) -> dict[str, str]:
    """``others`` and ``big``, whose value (mostly 2- and 3-byte characters) brings them with
    the route annotation of the ``stickypack`` policy to ``total`` bytes."""
    used = sum(len(k.encode()) + len(v.encode()) for k, v in others.items() if k != ROUTE_ANNOTATION)
    room = total - used - len("big") - _ROUTE_ANNOTATION_BYTES
    wide = "\u00e9\u20ac" * (room // 5 - 1)  # 5 bytes, 2 characters
    return {**others, "big": wide + "x" * (room - len(wide.encode()))}


@pytest.mark.parametrize("placement", [None, "full"])
@pytest.mark.controlplane
def test_the_policy_annotates_pods_as_the_webhook_does(cluster: ControlPlane, placement: str | None) -> None:
    """Every pod is stored with the annotations the webhook's :func:`route_pod` gives it
    (a route named like the policy): without annotations, with an empty map, with others,
    with the route's key at another value (replaced), with annotations that come to exactly
    256 KiB with the route's (added) or one byte more (left out, the pod routed without
    it), counted in bytes (the big value has fewer characters than bytes, so counting
    characters would find room), and the same with a stale route annotation, which the new
    one replaces and so is not counted. A pod that names its scheduler keeps its
    annotations."""
    labels = {"route": uuid.uuid4().hex[:8]}
    route = _route(labels, RoutePlacement.from_dict(**FULL) if placement else RoutePlacement())
    stale = {ROUTE_ANNOTATION: "other-route"}
    shapes: dict[str, dict[str, str] | None] = {
        "none": None,
        "empty": {},
        "others": {"example.org/team": "\u00e9quipe \U0001f680", "b": ""},
        "stale": {"a": "b", ROUTE_ANNOTATION: "other-route"},
        "stale-only": {ROUTE_ANNOTATION: "other-route"},
        "exactly-full": _annotations_at(MAX_ANNOTATION_BYTES, a="\u00e9"),
        "one-byte-over": _annotations_at(MAX_ANNOTATION_BYTES + 1, a="\u00e9"),
        "two-bytes-over": _annotations_at(MAX_ANNOTATION_BYTES + 2),
        "stale-exactly-full": _annotations_at(MAX_ANNOTATION_BYTES, **stale),
        "stale-one-byte-over": _annotations_at(MAX_ANNOTATION_BYTES + 1, **stale),
    }
    full = _annotations_at(MAX_ANNOTATION_BYTES + 1)
    assert sum(len(k) + len(v) for k, v in full.items()) + _ROUTE_ANNOTATION_BYTES < MAX_ANNOTATION_BYTES
    pods = {name: _pod(f"annotations-{name}", labels) for name in shapes}
    for name, sent in shapes.items():
        if sent is not None:
            pods[name]["metadata"]["annotations"] = sent
    pods["names-scheduler"] = _pod("annotations-names-scheduler", labels, scheduler="mine")
    pods["names-scheduler"]["metadata"]["annotations"] = {"a": "b"}
    docs = scheduler_routing("stickypack", labels, placement=route.placement)
    with cluster.admission_policies(docs):
        for name, pod in pods.items():
            admitted = cluster.dry_run_pod(pod)
            assert _routed(admitted) == _as_the_webhook_routes(route, _admitted_as(cluster, pod)), name
            annotations = admitted["metadata"].get("annotations") or {}
            routed = name != "names-scheduler"
            assert (admitted["spec"]["schedulerName"] == "stickypack") == routed, name
            annotated = annotations.get(ROUTE_ANNOTATION) == "stickypack-route-to-stickypack"
            assert annotated == (routed and "over" not in name), name
            if "over" in name:
                assert annotations == pod["metadata"]["annotations"], name  # left as they were


# generated pods: node affinity and tolerations in the shapes the API server takes
_requirement = st.sampled_from(
    [
        {"key": "pool", "operator": "In", "values": ["user"]},
        {"key": "zone", "operator": "NotIn", "values": ["a", "b"]},
        {"key": "gpu", "operator": "Exists"},
        {"key": "size", "operator": "Gt", "values": ["4"]},
    ]
)
_field = st.sampled_from(
    [
        {"key": "metadata.name", "operator": "In", "values": ["n1"]},
        {"key": "metadata.name", "operator": "NotIn", "values": ["n2"]},
    ]
)
_term = st.fixed_dictionaries(
    {},
    optional={
        "matchExpressions": st.lists(_requirement, max_size=2),
        "matchFields": st.lists(_field, max_size=1),
    },
)
_filled_term = st.lists(_requirement, min_size=1, max_size=2).map(lambda rs: {"matchExpressions": rs})
_node_affinity = st.fixed_dictionaries(
    {},
    optional={
        REQUIRED: st.fixed_dictionaries({"nodeSelectorTerms": st.lists(_term, max_size=3)}),
        PREFERRED: st.lists(
            st.fixed_dictionaries({"weight": st.integers(1, 100), "preference": _filled_term}), max_size=2
        ),
    },
)
_affinity = st.none() | st.fixed_dictionaries(
    {},
    optional={
        "nodeAffinity": _node_affinity,
        "podAntiAffinity": st.just({PREFERRED: [{"weight": 1, "podAffinityTerm": {"topologyKey": "zone"}}]}),
    },
)
_toleration = st.sampled_from(
    [
        DEDICATED,
        {**DEDICATED, "operator": "Equal"},
        {**DEDICATED, "effect": "NoExecute"},
        DRAIN,
        {**DRAIN, "tolerationSeconds": 31},
        {**DRAIN, "tolerationSeconds": 2**62},
        {"key": "drain", "operator": "Exists", "effect": "NoExecute"},
        {"key": "gpu", "operator": "Exists"},
        {"operator": "Exists"},
    ]
)
#: Annotations: none, an empty map, or a few, the route's among them now and then (another
#: value), their values of 1- to 4-byte UTF-8 characters.
_annotations = st.one_of(
    st.none(),
    st.just({}),
    st.dictionaries(
        st.sampled_from(["a", "example.org/b", ROUTE_ANNOTATION]),
        st.text(alphabet=st.sampled_from("aZ-\u00e9\u20ac\U0001f600"), max_size=4),
        min_size=1,
        max_size=3,
    ),
)


def _fill_annotations(annotations: dict[str, str] | None, route_name: str, over: int) -> dict[str, str]:
    """``annotations`` and one more, ``fill``, whose value brings them, without a route
    annotation but with ``route_name``'s, to ``over`` bytes beyond :data:`MAX_ANNOTATION_BYTES`
    (0: exactly there; negative: under). Its value is mostly 2-byte characters, so that
    counting characters instead of bytes would find room."""
    own = {k: v for k, v in (annotations or {}).items() if k != ROUTE_ANNOTATION}
    used = sum(len(k.encode()) + len(v.encode()) for k, v in own.items())
    room = MAX_ANNOTATION_BYTES + over - used - len(ROUTE_ANNOTATION) - len(route_name.encode()) - len("fill")
    return {**(annotations or {}), "fill": "\u00e9" * (room // 2 - 10) + "x" * (room - 2 * (room // 2 - 10))}


#: The policies of the generated pods: every part; tolerations only; one required term; none.
_PLACEMENTS = {
    "full": RoutePlacement.from_dict(**FULL),
    "tolerations": RoutePlacement.from_dict(tolerations=[DRAIN, {"key": "gpu", "operator": "Exists"}]),
    "required": RoutePlacement.from_dict(node_affinity={REQUIRED: {"nodeSelectorTerms": [NODE_N1]}}),
    "none": RoutePlacement(),
}


@pytest.fixture
def generated_policies(cluster: ControlPlane) -> Iterator[dict[str, SchedulerRoute]]:
    """One policy per :data:`_PLACEMENTS` entry, for pods labelled ``placement=<key>``."""
    routes = {key: _route({"placement": key}, p, f"to-{key}") for key, p in _PLACEMENTS.items()}
    docs = [
        doc
        for route in routes.values()
        for doc in scheduler_routing(
            route.scheduler_name, route.pods.to_dict()["matchLabels"], placement=route.placement
        )
    ]
    with cluster.admission_policies(docs):
        yield routes


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    key=st.sampled_from(sorted(_PLACEMENTS)),
    scheduler=st.sampled_from(["default-scheduler", "default-scheduler", "default-scheduler", "mine"]),
    affinity=_affinity,
    tolerations=st.none() | st.lists(_toleration, max_size=3),
    annotations=_annotations,
    # how far beyond the annotations' limit a filler takes the pod with the route's annotation
    over=st.none() | st.none() | st.sampled_from([-1, 0, 1, 2]),
)
@pytest.mark.controlplane
def test_generated_pods_are_placed_as_the_webhook_places_them(
    cluster: ControlPlane,
    generated_policies: dict[str, SchedulerRoute],
    key: str,
    scheduler: str,
    affinity: dict[str, Any] | None,
    tolerations: list[dict[str, Any]] | None,
    annotations: dict[str, str] | None,
    over: int | None,
) -> None:
    """Whatever the pod's affinity, tolerations and annotations, the policy's dry run stores
    the spec and annotations the webhook's :func:`route_pod` gives the same pod (a pod that
    names a scheduler: its own), the route annotation left out by both when the annotations
    would come to more than 256 KiB with it."""
    spec: dict[str, Any] = {}
    if affinity is not None:
        spec["affinity"] = affinity
    if tolerations is not None:
        spec["tolerations"] = tolerations
    route = generated_policies[key]
    pod = _pod(f"gen-{uuid.uuid4().hex[:8]}", {"placement": key}, scheduler, **spec)
    if over is not None:
        annotations = _fill_annotations(annotations, route.name, over)
    if annotations is not None:
        pod["metadata"]["annotations"] = annotations
    expected = _as_the_webhook_routes(route, _admitted_as(cluster, pod))
    required = ((expected["spec"].get("affinity") or {}).get("nodeAffinity") or {}).get(REQUIRED)
    if required is not None and not required.get("nodeSelectorTerms"):
        # required node affinity without terms, not routed or routed without required terms:
        # invalid, through the webhook as through the policy
        with pytest.raises(ApiException) as refused:
            cluster.dry_run_pod(pod)
        assert refused.value.status == 422
        event("refused: required node affinity without terms")
        return
    admitted = cluster.dry_run_pod(pod)
    event("routed" if scheduler == "default-scheduler" else "names its scheduler")
    own = ((pod["spec"].get("affinity") or {}).get("nodeAffinity") or {}).get(REQUIRED)
    if own and scheduler == "default-scheduler" and key in ("full", "required"):
        event(f"routed with {len(own['nodeSelectorTerms'])} own required term(s)")
    if scheduler == "default-scheduler" and over is not None:
        event(f"routed with annotations {over:+d} bytes from the limit")
    assert admitted["spec"] == expected["spec"], json.dumps(pod["spec"])
    assert admitted["metadata"].get("annotations") == expected["annotations"], (annotations or {}).keys()
    routed = scheduler == "default-scheduler"
    assert (admitted["spec"]["schedulerName"] == f"to-{key}") == routed
    stored = admitted["metadata"].get("annotations") or {}
    assert (stored.get(ROUTE_ANNOTATION) == route.name) == (routed and (over is None or over <= 0))


@pytest.mark.controlplane
def test_a_failing_expression_leaves_the_pod_as_it_was_sent(cluster: ControlPlane) -> None:
    """``failurePolicy: Ignore``, and the scheduler name, the placement and the annotation in
    one patch: when the expression fails (here an operation appended to it that fails for
    pods labelled ``fail``), the pod is created as it was sent, neither routed, placed nor
    annotated."""
    labels = {"route": uuid.uuid4().hex[:8]}
    docs = scheduler_routing("stickypack", labels, placement=RoutePlacement.from_dict(**FULL))
    patch = docs[0]["spec"]["mutations"][0]["jsonPatch"]
    patch["expression"] += (
        ' + ("fail" in object.metadata.labels'
        ' ? [JSONPatch{op: "add", path: "/spec/hostname", value: string(int(object.metadata.name))}] : [])'
    )
    with cluster.admission_policies(docs):  # live: a pod without the label is routed
        pod = _pod("sent", {**labels, "fail": "yes"})
        assert _routed(cluster.dry_run_pod(pod)) == _routed(_admitted_as(cluster, pod))  # not annotated


@pytest.mark.controlplane
def test_a_patch_the_pod_cannot_decode_fails_its_creation(
    cluster: ControlPlane, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Why a ``tolerationSeconds`` beyond 2**53 - 1 is refused at render time: CEL writes it
    into the patch as a string, and kube-apiserver answers the pod's creation with an
    internal error despite ``failurePolicy: Ignore`` (the decoding of the patched pod is not
    a policy failure). Rendered here by lifting the refusal."""
    import stickypack.render

    monkeypatch.setattr(stickypack.render, "MAX_EXACT_PATCH_INT", 2**63)
    labels = {"route": uuid.uuid4().hex[:8]}
    unsafe = RoutePlacement.from_dict(tolerations=[{**DRAIN, "tolerationSeconds": 2**53}])
    with cluster.admission_policies(scheduler_routing("stickypack", labels, placement=unsafe), wait=False):
        deadline = time.monotonic() + 20
        while True:  # created unrouted until the API server has the policy
            try:
                sent = cluster.dry_run_pod(_pod(f"sent-{uuid.uuid4().hex[:8]}", labels))
            except ApiException as exc:
                assert exc.status == 500 and "tolerationSeconds of type int64" in str(exc.body)
                break
            assert sent["spec"]["schedulerName"] == "default-scheduler"
            assert time.monotonic() < deadline, "the policy never applied"
            time.sleep(0.1)


#: A placement whose tolerations are written in the shapes a pod's equal one can differ in:
#: no key (operator Exists), an empty value and effect, tolerationSeconds 0 and negative, a
#: label value of every character a label value takes.
EDGE_PLACEMENT = {
    "node_affinity": {
        REQUIRED: {"nodeSelectorTerms": [POOL]},
        PREFERRED: [{"weight": 3, "preference": POOL}],
    },
    "tolerations": [
        {"operator": "Exists"},
        {"key": "a", "operator": "Equal", "value": "", "effect": ""},
        {"key": "b", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 0},
        {"key": "c", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": -5},
        {"key": "lbl", "value": "A-._z0", "effect": "NoSchedule"},
        DRAIN,
    ],
}


@pytest.mark.controlplane
def test_edge_shapes_are_placed_as_the_webhook_places_them(cluster: ControlPlane) -> None:
    """Pods whose tolerations equal the route's but are written otherwise (no key, the
    operator or effect left out or empty, tolerationSeconds 0 or negative), one equal but
    for its seconds, and affinities of odd shapes (pod affinity only, preferred terms empty
    or null, an empty nodeAffinity, a term of empty lists): the policy stores what the
    webhook gives, and routes every one."""
    labels = {"route": uuid.uuid4().hex[:8]}
    placement = RoutePlacement.from_dict(**EDGE_PLACEMENT)
    route = _route(labels, placement)
    pod_affinity = {"podAffinity": {PREFERRED: [{"weight": 1, "podAffinityTerm": {"topologyKey": "zone"}}]}}
    b, c = ({"operator": "Exists", "effect": "NoExecute", "key": key} for key in "bc")
    shapes: dict[str, dict[str, Any]] = {
        "exists-no-key": {"tolerations": [{"operator": "Exists"}]},
        "exists-empty-key-effect": {"tolerations": [{"operator": "Exists", "effect": "", "key": ""}]},
        "operator-left-out": {"tolerations": [{"key": "a"}]},
        "exists-not-equal": {"tolerations": [{"key": "a", "operator": "Exists"}]},
        "seconds-zero": {"tolerations": [{**b, "tolerationSeconds": 0}]},
        "seconds-none": {"tolerations": [b]},
        "seconds-negative": {"tolerations": [{**c, "tolerationSeconds": -5}]},
        "other-seconds": {"tolerations": [{**DRAIN, "tolerationSeconds": 31}]},
        "label-value": {"tolerations": [{"key": "lbl", "operator": "Equal", "value": "A-._z0"}]},
        "pod-affinity-only": {"affinity": pod_affinity},
        "preferred-empty": {"affinity": {"nodeAffinity": {PREFERRED: []}}},
        "preferred-null": {"affinity": {"nodeAffinity": {PREFERRED: None}}},
        "node-affinity-empty": {"affinity": {"nodeAffinity": {}}},
        "empty-term-only": {"affinity": {"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": [{}]}}}},
        "term-of-empty-lists": {
            "affinity": {
                "nodeAffinity": {
                    REQUIRED: {"nodeSelectorTerms": [{"matchExpressions": [], "matchFields": []}, ZONE]}
                }
            }
        },
        "tolerations-empty": {"tolerations": []},
    }
    with cluster.admission_policies(scheduler_routing("stickypack", labels, placement=placement)):
        for name, spec in shapes.items():
            pod = _pod(f"edge-{name}", labels, **spec)
            admitted = cluster.dry_run_pod(pod)
            assert admitted["spec"]["schedulerName"] == "stickypack", name
            assert _routed(admitted) == _as_the_webhook_routes(route, _admitted_as(cluster, pod)), name


#: Strings a CEL string literal must carry exactly: quotes, backslashes, line and paragraph
#: separators, characters beyond the BMP, control characters, CEL's other escapes.
NASTY_STRINGS = [
    'q"uote',
    "back\\slash\\",
    "line\u2028sep\u2029",
    "emoji \U0001f600 and \u00e9",
    "ctl\x01\x1f\x7f",
    "tab\tnl\ncr\r",
    "single ' back ` question ? dollar $ brace {}",
    "\\u0041 not an escape",
    "/slash \\/",
]


@pytest.mark.controlplane
def test_cel_literals_carry_any_string(cluster: ControlPlane) -> None:
    """The policy's strings are written as CEL literals by ``json.dumps`` (placement values
    are validated label keys and values, but the writer must not depend on it): on the real
    API server, each string of :data:`NASTY_STRINGS` written so arrives unchanged."""
    from stickypack.render import _cel

    labels = {"route": uuid.uuid4().hex[:8]}
    docs = scheduler_routing("stickypack", labels, placement=RoutePlacement.from_dict(tolerations=[DRAIN]))
    value = "{" + ", ".join(f'"k{i}": {_cel(s)}' for i, s in enumerate(NASTY_STRINGS)) + "}"
    docs[0]["spec"]["mutations"][0]["jsonPatch"]["expression"] += (
        f' + [JSONPatch{{op: "add", path: "/metadata/annotations", value: {value}}}]'
    )
    with cluster.admission_policies(docs):
        admitted = cluster.dry_run_pod(_pod("nasty", labels))
    assert admitted["metadata"]["annotations"] == {f"k{i}": s for i, s in enumerate(NASTY_STRINGS)}


@pytest.mark.controlplane
def test_a_large_pod_is_routed_within_the_cost_budget(cluster: ControlPlane) -> None:
    """The CEL cost budget is far off: a pod with 2000 tolerations, 100 required terms of 20
    requirements each and 2000 annotations of 250 KB in all is routed and annotated, as the
    webhook places it (:data:`FULL`: 200 terms come out, 2000 x 2 tolerations compared, the
    annotations joined and measured)."""
    labels = {"route": uuid.uuid4().hex[:8]}
    route = _route(labels, RoutePlacement.from_dict(**FULL))
    terms = [
        {"matchExpressions": [{"key": f"k{i}-{j}", "operator": "In", "values": ["v"]} for j in range(20)]}
        for i in range(100)
    ]
    tolerations = [{"key": f"t{i}", "operator": "Exists"} for i in range(2000)]
    affinity = {"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": terms}}}
    pod = _pod("large", labels, affinity=affinity, tolerations=tolerations)
    pod["metadata"]["annotations"] = {f"a{i}": "\u00e9" * 60 for i in range(2000)}
    with cluster.admission_policies(scheduler_routing("stickypack", labels, placement=route.placement)):
        admitted = cluster.dry_run_pod(pod)
    assert admitted["spec"]["schedulerName"] == "stickypack"
    assert admitted["metadata"]["annotations"][ROUTE_ANNOTATION] == route.name
    assert len(admitted["spec"]["affinity"]["nodeAffinity"][REQUIRED]["nodeSelectorTerms"]) == 200
    assert _routed(admitted) == _as_the_webhook_routes(route, _admitted_as(cluster, pod))


#: Placements of one part each: the policy's other lists are empty and add no operation.
ONE_PART_PLACEMENTS = {
    "preferred": {"node_affinity": {PREFERRED: [{"weight": 7, "preference": ZONE}]}},
    "required": {"node_affinity": {REQUIRED: {"nodeSelectorTerms": [POOL]}}},
    "tolerations": {"tolerations": [DEDICATED]},
}


@pytest.mark.parametrize("part", sorted(ONE_PART_PLACEMENTS))
@pytest.mark.controlplane
def test_a_placement_of_one_part_adds_that_part_only(cluster: ControlPlane, part: str) -> None:
    """Preferred terms only, required terms only, tolerations only: every pod shape is
    stored as the webhook gives it (the empty parts' variables are ``[]`` and patch
    nothing: a pod's own affinity or tolerations stay as they are)."""
    labels = {"route": uuid.uuid4().hex[:8]}
    route = _route(labels, RoutePlacement.from_dict(**ONE_PART_PLACEMENTS[part]))
    shapes: dict[str, dict[str, Any]] = {
        "none": {},
        "own-required": {"affinity": {"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": [ZONE]}}}},
        "own-preferred": {"affinity": {"nodeAffinity": {PREFERRED: [{"weight": 5, "preference": POOL}]}}},
        "tolerations": {"tolerations": [DRAIN]},
    }
    docs = scheduler_routing("stickypack", labels, placement=route.placement)
    with cluster.admission_policies(docs):
        for name, spec in shapes.items():
            pod = _pod(f"{part}-{name}", labels, **spec)
            admitted = cluster.dry_run_pod(pod)
            assert admitted["spec"]["schedulerName"] == "stickypack", name
            assert _routed(admitted) == _as_the_webhook_routes(route, _admitted_as(cluster, pod)), name


#: Label values that PyYAML writes as plain strings unless told otherwise, but that Go's YAML
#: readers (kubectl, helm, the API server: ``sigs.k8s.io/yaml``) take for a float, a boolean
#: or an integer.
GO_NOT_STRINGS = ("1e3", "1E3", "y", "N", "0o17", "0X1F", "0b101")


def test_rendered_yaml_quotes_what_go_would_not_read_as_a_string() -> None:
    """:func:`~stickypack.core.yamltext.dump_yaml` quotes each of :data:`GO_NOT_STRINGS` and
    what PyYAML quotes itself, leaves other strings plain, and reads back as written."""
    from stickypack.core.yamltext import dump_yaml

    for value in (*GO_NOT_STRINGS, "1_000", "07", "true", "2024-01-01", "1.5", ".5"):
        text = dump_yaml({"v": value})
        assert text == f"v: '{value}'\n" and yaml.safe_load(text) == {"v": value}, text
    for value in ("abc", "x1e3", "1e3x", "yy", "stickypack-builds"):
        assert dump_yaml({"v": value}) == f"v: {value}\n"
    assert dump_yaml({"v": "a\nb\n"}) == "v: |\n  a\n  b\n"


def test_rendered_yaml_quotes_go_number_forms_pyyaml_leaves_plain() -> None:
    """Forms only Go reads as numbers, which PyYAML (YAML 1.1) writes plain: an upper-case
    ``0B``/``0O`` prefix (``strconv.ParseInt(s, 0, 64)``, which go-yaml v2's ``resolve``
    tries on a plain scalar), and a float without a digit before the dot, signed or with an
    exponent (go-yaml v2's ``yamlStyleFloat``,
    ``^[-+]?(\\.[0-9]+|[0-9]+(\\.[0-9]*)?)([eE][-+]?[0-9]+)?$``): 0B101 = 5, 0O17 = 15,
    .5e3 = 500.0, -.5 = -0.5 there. Each is quoted here."""
    from stickypack.core.yamltext import dump_yaml

    for value in ("0B101", "0O17", ".5e3", "-.5"):
        assert yaml.safe_dump({"v": value}) == f"v: {value}\n"  # PyYAML alone: plain
        assert dump_yaml({"v": value}) == f"v: '{value}'\n", value


def test_rendered_yaml_keeps_keys_in_the_order_given() -> None:
    """``dump_yaml`` and ``dump_yaml_all`` write a mapping's keys in the order given
    (``apiVersion`` and ``kind`` first, as Kubernetes documents are read), not sorted, and
    nested mappings as blocks."""
    from stickypack.core.yamltext import dump_yaml, dump_yaml_all

    doc = {"kind": "K", "apiVersion": "v1", "spec": {"z": 1, "a": [2]}}
    text = "kind: K\napiVersion: v1\nspec:\n  z: 1\n  a:\n  - 2\n"
    assert dump_yaml(doc) == text
    assert dump_yaml_all([doc, doc]) == f"{text}---\n{text}"


@pytest.mark.controlplane
def test_rendered_routing_yaml_is_read_by_the_api_servers_yaml_as_written(
    cluster: ControlPlane, capsys: pytest.CaptureFixture[str]
) -> None:
    """``render scheduler-routing`` and ``render webhook-config`` with selector values that Go's
    YAML reads as numbers or booleans unless quoted, sent as YAML (``application/yaml``, a dry
    run) to kube-apiserver, which decodes it as ``kubectl apply -f`` would: accepted, with
    the values as strings. (PyYAML once wrote ``route: 1e3`` plain: "cannot unmarshal number
    into ... of type string".)"""
    import ssl

    import httpx

    cfg = cluster.client_configuration()
    selector = ",".join(f"k{i}={v}" for i, v in enumerate(GO_NOT_STRINGS))
    assert main(["render", "scheduler-routing", "--selector", selector]) == 0
    routing = capsys.readouterr().out
    hook_config = Path(cluster.work_dir or ".") / "routes.yaml"
    hook_config.write_text(
        yaml.safe_dump({"routes": [{"name": "go-yaml", "scheduler_name": "x", "pod_selector": selector}]})
    )
    assert main(["render", "webhook-config", "--config", str(hook_config), "--url", "https://h/mutate"]) == 0
    hook = capsys.readouterr().out
    group = "/apis/admissionregistration.k8s.io/v1"
    paths = {
        "MutatingAdmissionPolicy": f"{group}/mutatingadmissionpolicies",
        "MutatingAdmissionPolicyBinding": f"{group}/mutatingadmissionpolicybindings",
        "MutatingWebhookConfiguration": f"{group}/mutatingwebhookconfigurations",
    }
    sent = 0
    tls = ssl.create_default_context(cafile=cfg.ssl_ca_cert)
    tls.load_cert_chain(cfg.cert_file, cfg.key_file)  # the admin user
    with httpx.Client(verify=tls) as http:
        for text in (routing, hook):
            for document in text.split("\n---\n"):
                kind = yaml.safe_load(document)["kind"]
                response = http.post(
                    f"{cfg.host}{paths[kind]}?dryRun=All",
                    content=document.encode(),
                    headers={"Content-Type": "application/yaml", "Accept": "application/json"},
                )
                assert response.status_code == 201, (kind, response.text)
                stored = json.dumps(response.json())
                if kind != "MutatingAdmissionPolicy":  # the policy holds no selector
                    assert all(f'"{v}"' in stored for v in GO_NOT_STRINGS), (kind, stored)
                sent += 1
    assert sent == 3
