"""The scheduler-routing webhook: the pure routing rules, the service over real TLS on
loopback (wire format, bad input, fuzzing, metrics), its command line, and, on the real
kube-apiserver and kube-scheduler, pods created without a scheduler name reaching the
packing scheduler through the rendered ``MutatingWebhookConfiguration``."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import copy
import dataclasses
import json
import os
import re
import shutil
import signal
import ssl
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import trustme
import yaml
from cryptography import x509
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import read_answer
from stickypack.cli import main
from stickypack.core.labels import DNS_SUBDOMAIN
from stickypack.core.plugins.kubescheduler import node_matches_required
from stickypack.core.pod import Pod
from stickypack.core.routing import (
    ROUTE_ANNOTATION,
    LabelSelector,
    RoutePlacement,
    SchedulerRoute,
    SelectorError,
    route_pod,
)
from stickypack.render import scheduler_config, webhook_configuration, webhook_configuration_yaml
from stickypack.testing import ControlPlane, pod_manifest
from stickypack.webhook.config import ConfigError, WebhookConfig, config_from_dict, load_config
from stickypack.webhook.server import WebhookThread

# ---------------------------------------------------------------------------- routing rules


def _route(name: str, scheduler: str, selector: dict, namespaces: tuple[str, ...] = ()) -> SchedulerRoute:
    return SchedulerRoute(name, scheduler, LabelSelector.from_dict(selector), namespaces)


def _pod(
    labels: dict[str, str] | None = None, scheduler: str | None = "default-scheduler", **meta: Any
) -> dict:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "x"}]}
    if scheduler is not None:
        spec["schedulerName"] = scheduler
    return {"metadata": {"name": "p", "labels": labels or {}, **meta}, "spec": spec}


def _apply(pod: dict, patch: list[dict]) -> dict:
    """Apply the "add" operations route_pod emits (JSON Pointer, RFC 6901)."""
    pod = json.loads(json.dumps(pod))
    for op in patch:
        assert op["op"] == "add"
        *parents, last = [t.replace("~1", "/").replace("~0", "~") for t in op["path"].split("/")[1:]]
        target = pod
        for token in parents:
            target = target[token]
        target[last] = op["value"]
    return pod


def test_label_selector_follows_kubernetes_semantics() -> None:
    sel = LabelSelector.from_dict(
        {
            "matchLabels": {"app": "dask"},
            "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["a", "b"]},
                {"key": "gpu", "operator": "DoesNotExist"},
                {"key": "team", "operator": "Exists"},
                {"key": "env", "operator": "NotIn", "values": ["prod"]},
            ],
        }
    )
    base = {"app": "dask", "tier": "a", "team": "x"}
    assert sel.matches(base)
    assert sel.matches({**base, "env": "dev"})
    assert not sel.matches({**base, "env": "prod"})
    assert not sel.matches({**base, "gpu": "1"})
    assert not sel.matches({**base, "tier": "c"})
    assert not sel.matches({k: v for k, v in base.items() if k != "team"})
    assert not sel.matches({**base, "app": "other"})
    assert LabelSelector.from_dict({}).matches({"anything": "x"})  # empty matches all
    assert LabelSelector.from_dict(sel.to_dict()) == sel


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"matchLabels": {"a": "b c"}}, "matchLabels: a=b c is not a valid label"),
        ({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]}, "operator 'Gt' is not"),
        ({"matchExpressions": [{"key": "a", "operator": "In"}]}, "In needs at least one value"),
        (
            {"matchExpressions": [{"key": "a", "operator": "NotIn", "values": []}]},
            "NotIn needs at least one value",
        ),
        (
            {"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]},
            "Exists takes no values",
        ),
        ({"matchExpressions": [{"key": "-a", "operator": "Exists"}]}, "key '-a' is not a valid label key"),
        ({"matchExpressions": {"key": "a"}}, "matchExpressions must be a list"),
        ({"matchLabel": {"a": "b"}}, "unknown label selector field(s) matchLabel"),
        ("a=b", "a label selector is a mapping"),
        # wrong types are refused, not read as empty (as the API server refuses them)
        ({"matchLabels": []}, "matchLabels must be a mapping"),
        ({"matchLabels": {"a": "b"}, "matchExpressions": {}}, "matchExpressions must be a list"),
        ({"matchLabels": {"a": "b"}, "matchExpressions": ""}, "matchExpressions must be a list"),
        ({"matchExpressions": [{"key": "a", "operator": "Exists", "values": {}}]}, "values must be a list"),
        ({"matchExpressions": [{"key": "a", "operator": "Exists", "values": 0}]}, "values must be a list"),
    ],
)
def test_bad_label_selectors_say_what_is_wrong(raw: object, message: str) -> None:
    with pytest.raises(SelectorError, match=None) as err:
        LabelSelector.from_dict(raw)
    assert message in str(err.value)


def test_route_pod_first_match_wins_and_sets_scheduler_and_annotation() -> None:
    routes = [
        _route("builds", "stickypack-builds", {"matchLabels": {"component": "binderhub-build"}}, ("binder",)),
        _route("workers", "stickypack", {"matchLabels": {"dask.org/component": "worker"}}),
        _route(
            "all-dask", "other", {"matchExpressions": [{"key": "dask.org/component", "operator": "Exists"}]}
        ),
    ]
    worker = _pod({"dask.org/component": "worker"})
    decision = route_pod(routes, worker, "team-a")
    assert decision.route == "workers"
    routed = _apply(worker, decision.patch)
    assert routed["spec"]["schedulerName"] == "stickypack"
    assert routed["metadata"]["annotations"] == {ROUTE_ANNOTATION: "workers"}
    # an existing annotation map keeps its entries ("/" in the key escaped as ~1)
    annotated = _pod({"dask.org/component": "worker"}, annotations={"keep": "me"})
    decision = route_pod(routes, annotated, "team-a")
    assert "~1" in decision.patch[1]["path"]
    assert _apply(annotated, decision.patch)["metadata"]["annotations"] == {
        "keep": "me",
        ROUTE_ANNOTATION: "workers",
    }
    # no schedulerName at all is the default scheduler too
    assert route_pod(routes, _pod({"dask.org/component": "worker"}, scheduler=None), "x").route == "workers"
    # the namespace list
    build = _pod({"component": "binderhub-build"})
    assert route_pod(routes, build, "binder").route == "builds"
    assert route_pod(routes, build, "elsewhere").route is None
    assert route_pod(routes, _pod({"dask.org/component": "scheduler"}), "x").route == "all-dask"


def test_route_pod_keeps_a_named_scheduler_and_leaves_unmatched_pods() -> None:
    routes = [_route("workers", "stickypack", {"matchLabels": {"dask.org/component": "worker"}})]
    named = route_pod(routes, _pod({"dask.org/component": "worker"}, scheduler="mine"), "x")
    assert (named.route, named.patch) == (None, [])
    assert "mine" in named.reason
    already = route_pod(routes, _pod({"dask.org/component": "worker"}, scheduler="stickypack"), "x")
    assert (already.route, already.patch) == ("workers", [])
    plain = route_pod(routes, _pod({"app": "web"}), "x")
    assert (plain.route, plain.patch, plain.reason) == (None, [], "no route matches")
    with pytest.raises(ValueError, match=r"metadata\.labels"):
        route_pod(routes, {"metadata": {"labels": {"a": 1}}, "spec": {}}, "x")
    with pytest.raises(ValueError, match="not a Pod"):
        route_pod(routes, {"metadata": {}, "spec": []}, "x")


@pytest.mark.parametrize(
    ("pod", "message"),
    [
        ({"spec": {}}, "not a Pod: metadata and spec must be mappings"),
        ({"metadata": None, "spec": {}}, "not a Pod: metadata and spec must be mappings"),
        ({"metadata": {"labels": []}, "spec": {}}, "metadata.labels must map strings to strings"),
        ({"metadata": {"labels": ""}, "spec": {}}, "metadata.labels must map strings to strings"),
        ({"metadata": {"annotations": "x"}, "spec": {}}, "metadata.annotations must map strings"),
        ({"metadata": {"annotations": ["a"]}, "spec": {}}, "metadata.annotations must map strings"),
        ({"metadata": {"annotations": {"a": 1}}, "spec": {}}, "metadata.annotations must map strings"),
        ({"metadata": {}, "spec": {"schedulerName": 0}}, "spec.schedulerName must be a string"),
        ({"metadata": {}, "spec": {"schedulerName": False}}, "spec.schedulerName must be a string"),
    ],
)
def test_route_pod_refuses_what_is_not_a_pod_rather_than_patch_it(pod: dict, message: str) -> None:
    """A route whose selector matches a pod without labels (DoesNotExist) would otherwise
    answer with a patch that cannot apply to the object (``/metadata/annotations`` of an
    object without metadata), or silently drop what it cannot read."""
    routes = [_route("r", "s", {"matchExpressions": [{"key": "x", "operator": "DoesNotExist"}]})]
    with pytest.raises(ValueError, match=re.escape(message)):
        route_pod(routes, pod, "n")
    # null where the API server leaves a field out is the field left out
    pod = {"metadata": {"labels": None, "annotations": None}, "spec": {"schedulerName": None}}
    routed = _apply(pod, route_pod(routes, pod, "n").patch)
    assert routed["metadata"]["annotations"] == {ROUTE_ANNOTATION: "r"}
    assert routed["spec"]["schedulerName"] == "s"


def test_a_route_must_name_pods() -> None:
    with pytest.raises(SelectorError, match="empty pod selector"):
        SchedulerRoute("r", "stickypack", LabelSelector())
    with pytest.raises(SelectorError, match="not a DNS label"):
        _route("Bad_Name", "stickypack", {"matchLabels": {"a": "b"}})
    # the API server validates the patched pod: a bad schedulerName would fail its creation
    with pytest.raises(SelectorError, match="'Not A Name' is not a valid scheduler name"):
        _route("r", "Not A Name", {"matchLabels": {"a": "b"}})
    with pytest.raises(SelectorError, match="is not a valid scheduler name"):
        _route("r", "a" * 254, {"matchLabels": {"a": "b"}})


USER_POOL = {
    "matchExpressions": [{"key": "hub.jupyter.org/node-purpose", "operator": "In", "values": ["user"]}]
}
USER_TAINT = {
    "key": "hub.jupyter.org/dedicated",
    "operator": "Equal",
    "value": "user",
    "effect": "NoSchedule",
}


def _placed_route(**placement: Any) -> SchedulerRoute:
    return SchedulerRoute(
        "workers",
        "stickypack",
        LabelSelector.from_dict({"matchLabels": {"dask.org/component": "worker"}}),
        placement=RoutePlacement.from_dict(**placement),
    )


def test_a_route_adds_its_placement_to_the_pods_own() -> None:
    """Required node affinity is ANDed into the pod's (each of its terms gains the route's
    requirements), preferred terms and new tolerations are appended, and the rest of the
    pod's affinity (pod anti-affinity) is kept."""
    route = _placed_route(
        node_affinity={
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [USER_POOL]},
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 10, "preference": USER_POOL}],
        },
        tolerations=[{"key": "hub.jupyter.org/dedicated", "value": "user", "effect": "NoSchedule"}],
    )
    zone = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
    named_node = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}
    anti = {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "podAffinityTerm": {}}]}
    pod = _pod({"dask.org/component": "worker"})
    pod["spec"]["affinity"] = {
        "podAntiAffinity": anti,
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [zone, named_node, {}]},
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 5, "preference": zone}],
        },
    }
    # the same toleration as the route's, written with the API's defaults left out... and another
    pod["spec"]["tolerations"] = [
        {"key": "hub.jupyter.org/dedicated", "value": "user", "effect": "NoSchedule"},
        {"key": "gpu", "operator": "Exists"},
    ]
    routed = _apply(pod, route_pod([route], pod, "x").patch)
    affinity = routed["spec"]["affinity"]
    assert affinity["podAntiAffinity"] == anti
    terms = affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [
        {"matchExpressions": zone["matchExpressions"] + USER_POOL["matchExpressions"]},
        {**named_node, **USER_POOL},
        {},  # matched no node, and still matches none
    ]
    assert affinity["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"] == [
        {"weight": 5, "preference": zone},
        {"weight": 10, "preference": USER_POOL},
    ]
    assert routed["spec"]["tolerations"] == pod["spec"]["tolerations"]  # nothing new
    # a bare pod gets the route's placement as it is
    bare = _apply(
        _pod({"dask.org/component": "worker"}),
        route_pod([route], _pod({"dask.org/component": "worker"}), "x").patch,
    )
    assert bare["spec"]["affinity"] == {"nodeAffinity": route.placement.to_dict()["node_affinity"]}
    assert bare["spec"]["tolerations"] == [USER_TAINT]
    # a pod that names its scheduler is left alone, placement too; one that names the
    # route's scheduler already as well
    for scheduler in ("mine", "stickypack"):
        assert (
            route_pod([route], _pod({"dask.org/component": "worker"}, scheduler=scheduler), "x").patch == []
        )
    # an empty placement adds nothing but the scheduler and the annotation
    plain = route_pod([_placed_route()], _pod({"dask.org/component": "worker"}), "x").patch
    assert [op["path"] for op in plain] == ["/spec/schedulerName", "/metadata/annotations"]


requirement = st.sampled_from(
    [
        {"key": "pool", "operator": "In", "values": ["user"]},
        {"key": "pool", "operator": "NotIn", "values": ["core"]},
        {"key": "zone", "operator": "In", "values": ["a", "b"]},
        {"key": "zone", "operator": "DoesNotExist"},
        {"key": "size", "operator": "Gt", "values": ["4"]},
        {"key": "size", "operator": "Lt", "values": ["16"]},
    ]
)
term_strategy = st.lists(requirement, min_size=1, max_size=3).map(lambda rs: {"matchExpressions": rs})
terms_strategy = st.lists(term_strategy, min_size=1, max_size=3)
node_labels = st.fixed_dictionaries(
    {},
    optional={
        "pool": st.sampled_from(["user", "core"]),
        "zone": st.sampled_from(["a", "b", "c"]),
        "size": st.sampled_from(["2", "8", "32"]),
    },
)


@settings(max_examples=300, deadline=None)
@given(own=st.none() | terms_strategy, ours=terms_strategy, labels=node_labels)
def test_routed_required_affinity_is_the_and_of_the_pods_and_the_routes(
    own: list[dict] | None, ours: list[dict], labels: dict[str, str]
) -> None:
    """What kube-scheduler's NodeAffinity filter (the simulator's, tested against it) makes of
    the routed pod: a node passes if and only if it passes the pod's own terms and the
    route's."""
    route = _placed_route(
        node_affinity={"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": ours}}
    )
    pod = _pod({"dask.org/component": "worker"})
    if own is not None:
        pod["spec"]["affinity"] = {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": own}}
        }
    routed = _apply(pod, route_pod([route], pod, "x").patch)

    def passes(manifest: dict) -> bool:
        return node_matches_required(Pod.from_dict(manifest), labels, "node-1")

    only_ours = _pod({})
    only_ours["spec"]["affinity"] = {"nodeAffinity": route.placement.to_dict()["node_affinity"]}
    assert passes(routed) == (passes(pod) and passes(only_ours))


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=10,
)
near_terms = st.lists(
    st.fixed_dictionaries({}, optional={"matchExpressions": json_values, "matchFields": json_values})
    | json_values,
    max_size=3,
)


@settings(max_examples=300, deadline=None)
@given(
    affinity=json_values
    | st.fixed_dictionaries(
        {},
        optional={
            "nodeAffinity": json_values
            | st.fixed_dictionaries(
                {},
                optional={
                    "requiredDuringSchedulingIgnoredDuringExecution": json_values
                    | st.fixed_dictionaries({"nodeSelectorTerms": near_terms | json_values}),
                    "preferredDuringSchedulingIgnoredDuringExecution": json_values,
                },
            ),
            "podAntiAffinity": json_values,
        },
    ),
    tolerations=json_values
    | st.lists(st.dictionaries(st.sampled_from(["key", "value", "effect"]), json_values)),
)
def test_any_affinity_or_tolerations_get_a_patch_or_a_value_error(
    affinity: object, tolerations: object
) -> None:
    """Whatever a pod's own affinity and tolerations are, routing it with a placement
    answers a patch or refuses with ValueError (the webhook's 400), never anything else."""
    route = _placed_route(
        node_affinity={
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [USER_POOL]},
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "preference": USER_POOL}],
        },
        tolerations=[USER_TAINT],
    )
    pod = _pod({"dask.org/component": "worker"})
    pod["spec"]["affinity"] = affinity
    pod["spec"]["tolerations"] = tolerations
    try:
        decision = route_pod([route], pod, "x")
    except ValueError:
        return
    routed = _apply(pod, decision.patch)
    assert routed["spec"]["schedulerName"] == "stickypack"
    assert USER_TAINT in routed["spec"]["tolerations"] or any(
        _same_toleration(t, USER_TAINT) for t in routed["spec"]["tolerations"]
    )


@pytest.mark.parametrize(
    "spec",
    [
        {"affinity": None, "tolerations": None},
        {"affinity": {"nodeAffinity": None}},
        {"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 5, "preference": {"matchExpressions": [{"key": "zone", "operator": "Exists"}]}}]}}},
        {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": None, "matchFields": [
                {"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}}}},
    ],
)  # fmt: skip
def test_null_or_partial_affinity_and_tolerations_get_the_placement(spec: dict) -> None:
    """Shapes the API server hands over (null fields, node affinity with only preferred
    terms, a term with only matchFields) are patched, not refused as the property test
    above would allow."""
    route = _placed_route(node_affinity=_required(USER_POOL)["node_affinity"], tolerations=[USER_TAINT])
    pod = _pod({"dask.org/component": "worker"})
    pod["spec"].update(copy.deepcopy(spec))
    routed = _apply(pod, route_pod([route], pod, "x").patch)
    node_affinity = routed["spec"]["affinity"]["nodeAffinity"]
    for term in node_affinity["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]:
        assert USER_POOL["matchExpressions"][0] in term["matchExpressions"]
    own = (spec.get("affinity") or {}).get("nodeAffinity") or {}
    for key, value in own.items():
        if key != "requiredDuringSchedulingIgnoredDuringExecution":
            assert node_affinity[key] == value
    assert routed["spec"]["tolerations"] == [USER_TAINT]


def _same_toleration(a: dict, b: dict) -> bool:
    return all(
        (a.get(k) or d) == (b.get(k) or d)
        for k, d in (("key", ""), ("operator", "Equal"), ("value", ""), ("effect", ""))
    )


def _required(*terms: object) -> dict:
    return {
        "node_affinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}
        }
    }


def _expression(key: str, operator: str, *values: str) -> dict:
    return {"matchExpressions": [{"key": key, "operator": operator, "values": list(values)}]}


@pytest.mark.parametrize(
    ("placement", "message"),
    [
        ({"node_affinity": []}, "node_affinity is a mapping"),
        ({"node_affinity": {"required": {}}}, "unknown field(s) required"),
        (_required(), "give at least one term"),
        (_required({}), "nodeSelectorTerms[0]: an empty term matches no node"),
        (_required(_expression("size", "Gt", "big")), "matchExpressions[0]: size Gt ['big'] is not a valid"),
        (
            _required(_expression("a", "Near", "b")),
            "'Near' is not one of In, NotIn, Exists, DoesNotExist, Gt, Lt",
        ),
        (
            _required({"matchFields": [{"key": "metadata.labels", "operator": "In", "values": ["b"]}]}),
            "matchFields[0]: a field requirement is key metadata.name",
        ),
        (  # the API server validates it as a node name (confirmed on kube-apiserver 1.37: 422)
            _required({"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["Bad_Node"]}]}),
            "matchFields[0]: 'Bad_Node' is not a node name",
        ),
        (
            {
                "node_affinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {"weight": 0, "preference": USER_POOL}
                    ]
                }
            },
            "[0].weight: an integer from 1 to 100, got 0",
        ),
        ({"tolerations": {"key": "a"}}, "tolerations: expected a list"),
        (
            {"tolerations": [{"value": "user"}]},
            "tolerations[0]: a toleration without a key must have operator",
        ),
        (
            {"tolerations": [{"key": "a", "operator": "Exists", "value": "b"}]},
            "operator Exists takes no value",
        ),
        ({"tolerations": [{"key": "a", "effect": "NoRun"}]}, "effect 'NoRun' is not one of"),
        (
            {"tolerations": [{"key": "a", "tolerationSeconds": 30}]},
            "tolerationSeconds needs effect NoExecute",
        ),
        ({"tolerations": [{"key": "a b"}]}, "key 'a b' is not a valid taint key"),
        # YAML's unquoted 0 and false are not the empty value (which tolerates another taint)
        ({"tolerations": [{"key": "a", "value": 0}]}, "key, operator, value and effect are strings"),
        ({"tolerations": [{"key": "a", "value": False}]}, "key, operator, value and effect are strings"),
        (
            {"tolerations": [{"key": "a", "effect": "NoExecute", "tolerationSeconds": 2**63}]},
            "tolerationSeconds must be a 64-bit integer",
        ),
        ({"tolerations": [{"key": "a", "op": "Equal"}]}, "unknown field(s) op"),
        ({"node_affinity": {1: "a", "b": "c"}}, "node_affinity: unknown field(s) 1, b"),  # not a TypeError
        ({"tolerations": [{1: "a", "b": "c"}]}, "unknown field(s) 1, b"),
    ],
)
def test_bad_placements_say_what_is_wrong(placement: dict, message: str) -> None:
    """The API server would refuse a pod patched with them, failing its creation."""
    with pytest.raises(SelectorError) as err:
        RoutePlacement.from_dict(**placement)
    assert message in str(err.value)


#: matchFields values shaped as node names (DNS subdomains, which the pattern takes at any
#: length): 253 characters, the most a node name has, and 254, of labels of 63 characters at
#: most (a node name has no label limit of its own: one label of 254 is refused for its length
#: alone as well).
NODE_NAME_253 = ".".join(["a" * 63, "b" * 63, "c" * 63, "d" * 61])
NODE_NAME_254 = ".".join(["a" * 63, "b" * 63, "c" * 63, "d" * 62])


def _named_node(name: str) -> dict:
    return {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [name]}]}


def test_a_field_requirement_takes_node_names_of_up_to_253_characters() -> None:
    assert (len(NODE_NAME_253), len(NODE_NAME_254)) == (253, 254)
    # the pattern takes both: only the length refuses the longer
    assert DNS_SUBDOMAIN.fullmatch(NODE_NAME_254) and DNS_SUBDOMAIN.fullmatch("a" * 254)
    placement = RoutePlacement.from_dict(**_required(_named_node(NODE_NAME_253)))
    assert placement.required_terms == (_named_node(NODE_NAME_253),)
    for name in (NODE_NAME_254, "a" * 254):
        with pytest.raises(SelectorError) as err:
            RoutePlacement.from_dict(**_required(_named_node(name)))
        assert f"nodeSelectorTerms[0].matchFields[0]: {name!r} is not a node name" in str(err.value)


@pytest.mark.controlplane
def test_the_api_server_takes_the_node_names_a_field_requirement_takes(cluster: ControlPlane) -> None:
    """A pod whose required node affinity names a node by ``metadata.name`` is created
    exactly when :meth:`RoutePlacement.from_dict` takes that term."""
    from kubernetes_asyncio.client.exceptions import ApiException

    # a label of 64 characters is no DNS label, yet a node name: the API server checks no label length
    expected = {
        NODE_NAME_253: True,
        NODE_NAME_254: False,
        "a" * 64: True,
        "a" * 254: False,
        "Bad_Node": False,
    }
    for name, valid in expected.items():
        pod = pod_manifest("named-node")
        pod["spec"]["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [_named_node(name)]}
            }
        }
        try:
            cluster.dry_run_pod(pod)
            created = True
        except ApiException as exc:
            assert exc.status == 422, exc
            created = False
        try:
            RoutePlacement.from_dict(**_required(_named_node(name)))
            taken = True
        except SelectorError:
            taken = False
        assert (created, taken) == (valid, valid), name


# ---------------------------------------------------------------------------- configuration


def test_default_configuration_routes_dask_workers_of_gateway_and_operator() -> None:
    routes = WebhookConfig().scheduler_routes()
    gateway = _pod({"app.kubernetes.io/component": "dask-worker", "gateway.dask.org/instance": "g"})
    operator = _pod({"dask.org/component": "worker", "dask.org/cluster-name": "c"})
    assert route_pod(routes, gateway, "any").route == "dask-gateway-workers"
    assert route_pod(routes, operator, "any").route == "dask-kubernetes-workers"
    assert route_pod(routes, _pod({"app.kubernetes.io/component": "dask-scheduler"}), "any").route is None
    assert {r.scheduler_name for r in routes} == {"stickypack"}


@pytest.mark.parametrize("listen", [None, {}, {"host": "127.0.0.1"}])
def test_the_webhooks_default_port_is_8443_however_much_of_listen_is_given(listen: dict | None) -> None:
    """docs/configuration.md: `listen: {host: 0.0.0.0, port: 8443}`; a `listen` that sets
    only the host once took the extender's port, 8888."""
    config = config_from_dict({} if listen is None else {"listen": listen})
    assert config.listen.port == 8443
    assert config.listen.host == (listen or {}).get("host", "0.0.0.0")
    assert config_from_dict({"listen": {"port": 9443}}).listen.port == 9443


def test_configuration_errors_name_file_and_field(tmp_path: Path) -> None:
    path = tmp_path / "webhook.yaml"
    path.write_text(
        "routes:\n"
        "  - name: workers\n"
        "    pod_selector: {matchExpressions: [{key: a, operator: Gt, values: ['1']}]}\n"
        "  - name: workers\n"
        "    scheduler_name: Not A Name\n"
        "    pod_selector: a=b\n"
    )
    with pytest.raises(ConfigError) as err:
        load_config(path)
    text = str(err.value)
    assert text.startswith(f"{path}: ")
    assert "routes.0.pod_selector: matchExpressions[0]: operator 'Gt'" in text
    assert "routes.1.scheduler_name: 'Not A Name' is not a valid scheduler name" in text
    path.write_text("routes:\n  - name: a\n    pod_selector: x=1\n  - name: a\n    pod_selector: y=2\n")
    with pytest.raises(ConfigError, match=r"route name\(s\) a given more than once"):
        load_config(path)
    path.write_text(
        "routes:\n"
        "  - name: a\n"
        "    pod_selector: x=1\n"
        "    node_affinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{}]}}\n"
        "    tolerations: [{key: a, operator: Exists, value: b}]\n"
    )
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert (
        "routes.0.node_affinity: requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]: "
        "an empty term matches no node" in str(err.value)
    )
    assert "routes.0.tolerations: [0]: operator Exists takes no value" in str(err.value)
    path.write_text("routes: [{name: a, pod_selector: x=1, node_affinity: []}]\n")
    with pytest.raises(ConfigError, match=r"routes\.0\.node_affinity: is a mapping \(a nodeAffinity\)"):
        load_config(path)
    path.write_text("routes: [{name: a, pod_selector: ''}]\n")
    with pytest.raises(ConfigError, match="an empty selector would route every pod"):
        load_config(path)
    path.write_text("tls: {cert_file: c.pem}\n")
    with pytest.raises(ConfigError, match=r"tls: .*give both cert_file and key_file"):
        load_config(path)
    path.write_text("- a\n")
    with pytest.raises(ConfigError, match="must be a YAML mapping"):
        load_config(path)
    path.write_text("routes: [\n")
    with pytest.raises(ConfigError, match=str(path)):
        load_config(path)
    assert config_from_dict({"routes": [{"name": "a", "pod_selector": "x=1", "namespaces": ["n"]}]}).routes[
        0
    ].namespaces == ["n"]


@pytest.mark.parametrize("text", ["[]\n", "0\n", "''\n", "hello\n", "- a\n"])
def test_a_configuration_document_that_is_not_a_mapping_is_refused(tmp_path: Path, text: str) -> None:
    # configfile.model_from_dict: only an empty file (YAML null) means all defaults; an
    # empty list, 0, '' or a scalar is no mapping, in the webhook's and the extender's
    from stickypack.extender.config import ConfigError as ExtenderConfigError
    from stickypack.extender.config import load_config as load_extender_config

    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=f"{path}: the webhook configuration must be a YAML mapping"):
        load_config(path)
    with pytest.raises(
        ExtenderConfigError, match=f"{path}: the extender configuration must be a YAML mapping"
    ):
        load_extender_config(path)
    path.write_text("")
    assert load_config(path) == WebhookConfig()


def test_an_empty_configuration_path_is_a_file_that_cannot_be_read() -> None:
    # only None (no --config) means all defaults; "" is the path "." (a directory)
    with pytest.raises(ConfigError, match="cannot read"):
        load_config("")


def test_a_problem_of_the_whole_document_is_named_top() -> None:
    # configfile.validation_problems: an error of no field (a model-level validator) is
    # named "<top>", and pydantic's "Value error, " prefix is dropped
    from pydantic import BaseModel, ValidationError, model_validator

    from stickypack.configfile import validation_problems

    class Pair(BaseModel):
        a: int = 0
        b: int = 0

        @model_validator(mode="after")
        def _sum(self) -> Pair:
            if self.a + self.b > 1:
                raise ValueError("a + b must be at most 1")
            return self

    with pytest.raises(ValidationError) as raised:
        Pair.model_validate({"a": 1, "b": 1})
    assert validation_problems(raised.value) == "<top>: a + b must be at most 1"


# docs/configuration.md's webhook reference (and the extender's for `listen`): the ends of each
# range are taken, the value just past one refused, with the key named.
_NAME_253 = ".".join(["a" * 63, "b" * 63, "c" * 63, "d" * 61])  # 63+1+63+1+63+1+61 = 253 characters


@pytest.mark.parametrize(
    ("raw", "where"),
    [
        ({"listen": {"port": -1}}, "listen.port"),
        ({"listen": {"port": 65536}}, "listen.port"),
        ({"tls": {"reload_interval_s": -1}}, "tls.reload_interval_s"),
        ({"tls": {"reload_interval_s": float("inf")}}, "tls.reload_interval_s"),
        ({"tls": {"key_file": "k.pem"}}, "tls: give both"),  # the key alone, as the cert alone
        ({"routes": []}, "routes: List should have at least 1 item"),  # at least one route
        ({"max_request_bytes": 1023}, "max_request_bytes"),  # >= 1024
        ({"routes": [{"name": "Not_A_Label", "pod_selector": "x=1"}]}, "routes.0.name"),
        ({"routes": [{"name": "a", "pod_selector": "x=1", "namespaces": ["Bad NS"]}]}, "routes.0.namespaces"),
        (
            {"routes": [{"name": "a", "pod_selector": "x=1", "scheduler_name": _NAME_253 + "d"}]},
            "routes.0.scheduler_name",
        ),
    ],
)
def test_configuration_refuses_a_value_past_its_range_naming_the_key(raw: dict, where: str) -> None:
    with pytest.raises(ConfigError) as err:
        config_from_dict(raw, "webhook.yaml")
    assert f"webhook.yaml: {where}" in str(err.value)


def test_configuration_takes_the_ends_of_each_range() -> None:
    config = config_from_dict(
        {
            "listen": {"port": 0},  # 0..65535
            "tls": {"reload_interval_s": 0},  # 0: never reload
            "max_request_bytes": 1024,
            "routes": [
                {"name": "a", "pod_selector": "x=1", "scheduler_name": _NAME_253}
            ],  # 253: a DNS subdomain's most
        }
    )
    assert (config.listen.port, config.tls.reload_interval_s, config.max_request_bytes) == (0, 0, 1024)
    assert config.routes[0].scheduler_name == _NAME_253
    assert config_from_dict({"listen": {"port": 65535}}).listen.port == 65535


def test_a_routes_namespaces_and_placement_reach_the_scheduler_route() -> None:
    """What a route's entry says is what :meth:`WebhookConfig.scheduler_routes` routes by:
    its namespaces, node affinity and tolerations."""
    config = config_from_dict(
        {
            "routes": [
                {
                    "name": "a",
                    "pod_selector": "x=1",
                    "namespaces": ["n"],
                    "tolerations": [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}],
                }
            ]
        }
    )
    (route,) = config.scheduler_routes()
    assert route.namespaces == ("n",)
    pod = _pod({"x": "1"})
    assert route_pod([route], pod, "other").route is None  # another namespace: not routed
    decision = route_pod([route], pod, "n")
    assert decision.route == "a"
    routed = _apply(pod, decision.patch)
    assert routed["spec"]["schedulerName"] == "stickypack"
    assert routed["spec"]["tolerations"] == [
        {"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}
    ]


# ---------------------------------------------------------------------------- the service


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A CA and a serving certificate for 127.0.0.1 (what the API server checks)."""
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    folder = tmp_path_factory.mktemp("webhook-tls")
    cert.cert_chain_pems[0].write_to_path(str(folder / "tls.crt"))
    cert.private_key_pem.write_to_path(str(folder / "tls.key"))
    ca.cert_pem.write_to_path(str(folder / "ca.crt"))
    context = ssl.create_default_context()
    ca.configure_trust(context)
    return {
        "cert": str(folder / "tls.crt"),
        "key": str(folder / "tls.key"),
        "ca": folder / "ca.crt",
        "ctx": context,
    }


def _config(tls: dict[str, Any], routes: list[dict] | None = None, **extra: Any) -> WebhookConfig:
    raw: dict[str, Any] = {"tls": {"cert_file": tls["cert"], "key_file": tls["key"]}, **extra}
    if routes is not None:
        raw["routes"] = routes
    return config_from_dict(raw)


@pytest.fixture(scope="module")
def service(tls: dict[str, Any]) -> Iterator[WebhookThread]:
    with WebhookThread(_config(tls, max_request_bytes=64 * 1024)) as thread:
        yield thread


def _review(pod: dict, namespace: str = "team-a", **request: Any) -> dict:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": str(uuid.uuid4()),
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "operation": "CREATE",
            "namespace": namespace,
            "object": pod,
            **request,
        },
    }


def _post(service: WebhookThread, tls: dict[str, Any], body: Any, raw: bytes | None = None) -> httpx.Response:
    content = raw if raw is not None else json.dumps(body).encode()
    with httpx.Client(verify=tls["ctx"]) as client:
        return client.post(
            f"{service.url}/mutate", content=content, headers={"content-type": "application/json"}
        )


def test_service_answers_a_review_over_tls_with_a_json_patch(service: WebhookThread, tls: dict) -> None:
    assert service.url.startswith("https://")
    review = _review(_pod({"dask.org/component": "worker"}))
    response = _post(service, tls, review)
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["apiVersion"] == "admission.k8s.io/v1" and answer["kind"] == "AdmissionReview"
    assert answer["response"]["uid"] == review["request"]["uid"]
    assert answer["response"]["allowed"] is True
    assert answer["response"]["patchType"] == "JSONPatch"
    patch = json.loads(base64.b64decode(answer["response"]["patch"]))
    assert _apply(review["request"]["object"], patch)["spec"]["schedulerName"] == "stickypack"
    # unmatched pods, other kinds, other operations: allowed, no patch
    for other in (
        _review(_pod({"app": "web"})),
        _review(_pod({"dask.org/component": "worker"}), operation="UPDATE"),
        _review({"metadata": {}}, kind={"group": "apps", "version": "v1", "kind": "Deployment"}),
        # a kind named Pod of another API group (a custom resource) is not a Pod
        _review(
            _pod({"dask.org/component": "worker"}),
            kind={"group": "example.com", "version": "v1", "kind": "Pod"},
        ),
        _review(_pod({"dask.org/component": "worker"}), subResource="status"),
    ):
        answer = _post(service, tls, other).json()["response"]
        assert answer == {"uid": other["request"]["uid"], "allowed": True}
    # v1beta1 reviews are answered in kind
    old = _review(_pod({"dask.org/component": "worker"}))
    old["apiVersion"] = "admission.k8s.io/v1beta1"
    assert _post(service, tls, old).json()["apiVersion"] == "admission.k8s.io/v1beta1"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"{not json", "request body is not valid JSON"),
        (b"[1, 2]", "the body is not a JSON object"),
        (b'{"kind": "Pod", "apiVersion": "v1"}', "expected kind AdmissionReview"),
        (b'{"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1"}', "request: missing"),
        (b'{"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1", "request": {}}', "request.uid"),
        (
            b'{"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1", "request": {"uid": ""}}',
            "request.uid",
        ),
        (  # a pod create whose namespace is a number
            b'{"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1", "request": {"uid": "u", '
            b'"kind": {"group": "", "version": "v1", "kind": "Pod"}, "operation": "CREATE", "namespace": 5, '
            b'"object": {"metadata": {"name": "p"}, "spec": {"containers": []}}}}',
            "request.namespace: missing or not a string",
        ),
    ],
)
def test_bad_requests_get_400_with_what_is_wrong(
    service: WebhookThread, tls: dict, body: bytes, message: str
) -> None:
    response = _post(service, tls, None, raw=body)
    assert response.status_code == 400
    assert message in response.json()["error"]


def test_bad_pods_and_oversized_bodies_get_400_and_the_service_keeps_serving(
    service: WebhookThread, tls: dict
) -> None:
    bad = _review({"metadata": {"labels": {"a": 1}}, "spec": {}})
    response = _post(service, tls, bad)
    assert response.status_code == 400
    assert response.json()["error"] == "request.object: metadata.labels must map strings to strings"
    no_metadata = _review({"spec": {"containers": []}})
    response = _post(service, tls, no_metadata)
    assert response.status_code == 400
    assert response.json()["error"].startswith("request.object: the object is not a Pod")
    no_object = _review(_pod())
    del no_object["request"]["object"]
    assert "request.object: missing" in _post(service, tls, no_object).json()["error"]
    huge = _review(_pod({"dask.org/component": "worker"}, annotations={"big": "x" * 100_000}))
    response = _post(service, tls, huge)
    assert response.status_code == 400
    assert "exceeds the limit of 65536 bytes" in response.json()["error"]
    # what is echoed back of a bad value is cut short (the body may be up to the limit)
    response = _post(service, tls, {"kind": "AdmissionReview", "apiVersion": "v" * 50_000})
    assert response.status_code == 400
    assert "expected kind AdmissionReview" in response.json()["error"]
    assert len(response.json()["error"]) < 500
    with httpx.Client(verify=tls["ctx"]) as client:
        assert client.get(f"{service.url}/mutate").status_code == 405
        assert client.get(f"{service.url}/nope").status_code == 404
        # a trailing slash makes another path: 404 (counted), not a redirect to /mutate
        assert client.post(f"{service.url}/mutate/", json={}).status_code == 404
        assert client.get(f"{service.url}/healthz").text == "ok"
    assert _post(service, tls, _review(_pod({"dask.org/component": "worker"}))).status_code == 200


def test_a_bad_value_is_echoed_whole_up_to_80_characters_of_its_repr(
    service: WebhookThread, tls: dict
) -> None:
    """``_brief``: the repr of a bad value is echoed whole up to 80 characters, else its
    first 77 and "...". A kind of 78 "k" has a repr of 80 characters (two quotes): whole;
    one of 79 has 81: cut to the quote, 76 "k" and "..." (80 characters)."""
    for length, echoed in ((78, "'" + "k" * 78 + "'"), (79, "'" + "k" * 76 + "...")):
        body = {"kind": "k" * length, "apiVersion": "admission.k8s.io/v1", "request": {"uid": "u"}}
        response = _post(service, tls, body)
        assert response.status_code == 400
        error = response.json()["error"]
        assert f"got kind {echoed}, apiVersion " in error, (length, error)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    body=st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=8),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
        max_leaves=12,
    ),
    labels=st.dictionaries(st.text(max_size=12), st.text(max_size=12) | st.integers(), max_size=3),
    where=st.sampled_from(["body", "object", "labels", "spec"]),
)
def test_fuzzed_reviews_get_200_or_400_never_500(
    service: WebhookThread, tls: dict, body: object, labels: dict, where: str
) -> None:
    review = _review(_pod({"dask.org/component": "worker"}))
    if where == "body":
        sent: object = body
    elif where == "object":
        review["request"]["object"] = body
        sent = review
    elif where == "labels":
        review["request"]["object"]["metadata"]["labels"] = labels
        sent = review
    else:
        review["request"]["object"]["spec"] = body
        sent = review
    response = _post(service, tls, sent)
    assert response.status_code in (200, 400), response.text
    if response.status_code == 400:
        assert response.json()["error"]
    else:
        assert response.json()["response"]["allowed"] is True


def test_metrics_count_reviews_by_outcome_and_route(tls: dict) -> None:
    with WebhookThread(_config(tls)) as thread:
        _post(thread, tls, _review(_pod({"dask.org/component": "worker"})))
        _post(thread, tls, _review(_pod({"app": "web"})))
        _post(thread, tls, None, raw=b"nope")
        # a dry run (`kubectl apply --dry-run=server`, `dryRun=All`) gets the same patch, as
        # the API server must show what would happen, but creates no pod: not `routed`
        worker = _review(_pod({"dask.org/component": "worker"}))
        dry = _review(_pod({"dask.org/component": "worker"}), dryRun=True)
        dry["request"]["uid"] = worker["request"]["uid"]
        assert _post(thread, tls, dry).json() == _post(thread, tls, worker).json()
        _post(thread, tls, _review(_pod({"app": "web"}), dryRun=True))
        _post(thread, tls, _review(_pod({"dask.org/component": "worker"}), dryRun=False))
        bad_flag = _post(thread, tls, _review(_pod({"dask.org/component": "worker"}), dryRun="yes"))
        assert bad_flag.status_code == 400
        assert bad_flag.json()["error"] == "request.dryRun: not a boolean ('yes')"
        with httpx.Client(verify=tls["ctx"]) as client:
            # a webhook configuration with another path, or a client using GET, once left
            # no trace here (the API server then creates the pod unrouted)
            assert client.post(f"{thread.url}/mutating", json={}).status_code == 404
            assert client.get(f"{thread.url}/mutate").status_code == 405
            text = client.get(f"{thread.url}/metrics").text
    assert 'stickypack_webhook_reviews_total{outcome="routed",route="dask-kubernetes-workers"} 3.0' in text
    assert 'stickypack_webhook_reviews_total{outcome="dry_run",route="dask-kubernetes-workers"} 1.0' in text
    assert 'stickypack_webhook_reviews_total{outcome="dry_run",route=""} 1.0' in text
    assert 'stickypack_webhook_reviews_total{outcome="unchanged",route=""} 1.0' in text
    assert 'stickypack_webhook_reviews_total{outcome="bad_request",route=""} 2.0' in text
    assert 'stickypack_webhook_reviews_total{outcome="not_found",route=""} 1.0' in text
    assert 'stickypack_webhook_reviews_total{outcome="method_not_allowed",route=""} 1.0' in text
    assert "stickypack_webhook_request_duration_seconds_count 8.0" in text


def test_a_pod_already_naming_the_routes_scheduler_gets_no_patch_and_counts_unchanged(tls: dict) -> None:
    """A worker that names the route's scheduler (stickypack) already matches the route but
    needs nothing: allowed without a patch (no ``patchType``), counted ``unchanged`` under
    the route's name, not ``routed``."""
    with WebhookThread(_config(tls)) as thread:
        review = _review(_pod({"dask.org/component": "worker"}, scheduler="stickypack"))
        answer = _post(thread, tls, review).json()["response"]
        assert answer == {"uid": review["request"]["uid"], "allowed": True}
        with httpx.Client(verify=tls["ctx"]) as client:
            text = client.get(f"{thread.url}/metrics").text
    assert 'stickypack_webhook_reviews_total{outcome="unchanged",route="dask-kubernetes-workers"} 1.0' in text
    assert 'outcome="routed"' not in text
    # the one review is timed: its duration (milliseconds on loopback), not a clock reading
    (duration,) = [
        float(line.split()[-1])
        for line in text.splitlines()
        if line.startswith("stickypack_webhook_request_duration_seconds_sum ")
    ]
    assert "stickypack_webhook_request_duration_seconds_count 1.0" in text
    assert 0 < duration < 1.0, duration


def test_certificate_metrics_count_reloads_only_and_keep_the_served_expiry() -> None:
    """``WebhookMetrics.tls_loaded``: the first load (outcome None) is not a reload; a
    failed reload is counted but leaves the expiry of the certificate still served; both
    reload series are exported at 0 from the start (``increase()`` misses a series that
    first appears at 1)."""
    from stickypack.webhook.app import WebhookMetrics

    metrics = WebhookMetrics()

    def reloads() -> dict[str, float]:
        return {
            s.labels["outcome"]: s.value
            for m in metrics.registry.collect()
            if m.name == "stickypack_webhook_certificate_reloads"
            for s in m.samples
            if s.name.endswith("_total")
        }

    def expiry() -> float:
        return metrics.tls_expiry._value.get()

    assert reloads() == {"loaded": 0.0, "failed": 0.0}
    metrics.tls_loaded(None, 1000.0)  # the first pair served, expiring at t=1000
    assert reloads() == {"loaded": 0.0, "failed": 0.0} and expiry() == 1000.0
    metrics.tls_loaded("failed", 2000.0)  # a pair expiring at 2000 that did not load
    assert reloads() == {"loaded": 0.0, "failed": 1.0} and expiry() == 1000.0
    metrics.tls_loaded("loaded", 3000.0)
    assert reloads() == {"loaded": 1.0, "failed": 1.0} and expiry() == 3000.0
    metrics.tls_loaded("loaded", None)  # loaded, its expiry unreadable: the last one known stays
    assert reloads() == {"loaded": 2.0, "failed": 1.0} and expiry() == 3000.0


# ---------------------------------------------------------------------------- command line


def test_render_webhook_config(tmp_path: Path, tls: dict, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "webhook.yaml"
    cfg.write_text(
        "routes:\n"
        "  - {name: builds, scheduler_name: stickypack-builds, pod_selector: component=binderhub-build,"
        " namespaces: [binder]}\n"
        "  - {name: workers, pod_selector: {matchExpressions: [{key: dask.org/component, operator: In,"
        " values: [worker]}]}}\n"
    )
    argv = ["render", "webhook-config", "--config", str(cfg), "--service", "sp/stickypack-webhook:8443"]
    assert main([*argv, "--ca-bundle", str(tls["ca"])]) == 0
    doc = yaml.safe_load(capsys.readouterr().out)
    assert doc["kind"] == "MutatingWebhookConfiguration"
    builds, workers = doc["webhooks"]
    assert builds["name"] == "builds.routing.stickypack.io"
    assert builds["clientConfig"]["service"] == {
        "namespace": "sp",
        "name": "stickypack-webhook",
        "port": 8443,
        "path": "/mutate",
    }
    assert base64.b64decode(builds["clientConfig"]["caBundle"]) == tls["ca"].read_bytes()
    assert builds["objectSelector"] == {"matchLabels": {"component": "binderhub-build"}}
    assert builds["namespaceSelector"]["matchExpressions"][0]["values"] == ["binder"]
    assert "namespaceSelector" not in workers
    assert workers["objectSelector"]["matchExpressions"][0]["key"] == "dask.org/component"
    assert {w["failurePolicy"] for w in doc["webhooks"]} == {"Ignore"}
    assert {w["sideEffects"] for w in doc["webhooks"]} == {"None"}
    for entry in doc["webhooks"]:  # the rest of what docs/configuration.md promises
        assert entry["timeoutSeconds"] == 5
        assert entry["reinvocationPolicy"] == "Never"
        assert entry["matchPolicy"] == "Equivalent"
        assert entry["admissionReviewVersions"] == ["v1"]
        assert entry["rules"] == [
            {"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"],
             "scope": "Namespaced"}
        ]  # fmt: skip
    assert doc["metadata"]["name"] == "stickypack-scheduler-routing"
    assert main(["render", "webhook-config", "--url", "https://h/mutate", "--inject-ca-from", "sp/cert"]) == 0
    doc = yaml.safe_load(capsys.readouterr().out)
    assert doc["metadata"]["annotations"] == {"cert-manager.io/inject-ca-from": "sp/cert"}
    assert "caBundle" not in doc["webhooks"][0]["clientConfig"]
    # without a CA bundle the API server checks the certificate against its system roots,
    # which a Service's (``NAME.NAMESPACE.svc``) never passes: nothing would be routed
    assert main(["render", "webhook-config", "--service", "sp/hook"]) == 0
    captured = capsys.readouterr()
    assert yaml.safe_load(captured.out)["kind"] == "MutatingWebhookConfiguration"
    assert "warning: no --ca-bundle or --inject-ca-from" in captured.err
    not_pem = tmp_path / "x.pem"
    not_pem.write_text("hello")
    # a PEM with the key too (a "combined" file) would put the private key into a
    # cluster-scoped object anyone who may read webhook configurations can read
    with_key = tmp_path / "combined.pem"
    with_key.write_bytes(tls["ca"].read_bytes() + Path(tls["key"]).read_bytes())
    for bad, message in [
        (["--url", "http://h/mutate"], "--url must be https://"),
        (["--url", "https://h/m", "--ca-bundle", str(tls["ca"]), "--inject-ca-from", "sp/c"], "not both"),
        # the API server would POST to /, which the webhook answers 404: nothing routed
        (["--url", "https://h"], "--url needs the webhook's path"),
        (["--url", "https://h:8443/"], "--url needs the webhook's path"),
        (["--service", "nope"], "--service must be NAMESPACE/NAME[:PORT]"),
        (["--service", "a/b:99999"], "the port must be in 1..65535"),
        (["--service", "a/b:"], "--service must be NAMESPACE/NAME[:PORT]"),
        (["--service", "a/b: 80"], "--service must be NAMESPACE/NAME[:PORT]"),
        (["--service", "a/b:8_0"], "--service must be NAMESPACE/NAME[:PORT]"),
        (["--url", "https://h/m", "--ca-bundle", str(not_pem)], "not PEM certificates"),
        (["--url", "https://h/m", "--ca-bundle", str(with_key)], "PRIVATE KEY' PEM block"),
        (["--url", "https://h/m", "--ca-bundle", str(tmp_path / "none")], "cannot read"),
        (["--url", "https://h/m", "--config", str(tmp_path / "none")], "cannot read"),
    ]:
        assert main(["render", "webhook-config", *bad]) == 2, bad
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err, (bad, err)


def test_render_webhook_config_checks_where_it_calls_and_warns_only_without_a_ca(
    tmp_path: Path, tls: dict, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--service NAMESPACE/NAME[:PORT]``: port 1..65535 (443 without one), ASCII digits, a
    namespace that is a DNS label; ``--url``: https with a host, no user, query or fragment,
    a port in range; ``--inject-ca-from NAMESPACE/CERTIFICATE`` (the name a DNS subdomain);
    the warning about a missing CA only for a Service given neither CA source."""

    def render(*argv: str) -> tuple[dict, str]:
        assert main(["render", "webhook-config", *argv]) == 0, argv
        captured = capsys.readouterr()
        return yaml.safe_load(captured.out), captured.err

    doc, err = render("--service", "sp/hook:65535", "--ca-bundle", str(tls["ca"]))
    assert doc["webhooks"][0]["clientConfig"]["service"]["port"] == 65535 and err == ""
    doc, err = render("--service", "sp/hook", "--inject-ca-from", "sp/webhook.v1")
    assert doc["webhooks"][0]["clientConfig"]["service"]["port"] == 443 and err == ""
    assert doc["metadata"]["annotations"] == {"cert-manager.io/inject-ca-from": "sp/webhook.v1"}
    doc, err = render("--url", "https://h/mutate")  # the system roots may well trust a URL's host
    assert doc["webhooks"][0]["clientConfig"]["url"] == "https://h/mutate" and err == ""
    trusted = tmp_path / "trusted.pem"  # OpenSSL's own block, which Go's PEM reader skips
    trusted.write_text(
        tls["ca"].read_text()
        + "-----BEGIN TRUSTED CERTIFICATE-----\nAA==\n-----END TRUSTED CERTIFICATE-----\n"
    )
    for bad, message in [
        (["--url", ""], "--url must be https://"),
        (["--url", "https://u@h/mutate"], "--url must be https://"),
        (["--url", "https:///mutate"], "--url must be https://"),
        (["--url", "https://h/mutate?a=b"], "--url must be https://"),
        (["--url", "https://h/mutate#f"], "--url must be https://"),
        (["--url", "https://h:99999/mutate"], "Port out of range"),
        (["--service", "sp/hook:0"], "the port must be in 1..65535"),
        (["--service", "sp/hook:\u0668\u0660"], "--service must be NAMESPACE/NAME[:PORT]"),  # Arabic-Indic 80
        (["--service", "Sp/hook"], "--service must be NAMESPACE/NAME[:PORT]"),
        (
            ["--url", "https://h/m", "--inject-ca-from", "s.p/cert"],
            "--inject-ca-from must be NAMESPACE/CERTIFICATE",
        ),
        (["--url", "https://h/m", "--ca-bundle", str(trusted)], "found a 'TRUSTED CERTIFICATE' PEM block"),
    ]:
        assert main(["render", "webhook-config", *bad]) == 2, bad
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err, (bad, err)


def test_render_webhook_config_writes_a_ca_bundle_as_ascii(
    tmp_path: Path, tls: dict, capsys: pytest.CaptureFixture[str]
) -> None:
    """The ``--ca-bundle`` file's text is copied as ASCII, any other character a ``?``: a
    comment ``für`` before the certificate is written ``f?r``."""
    bundle = tmp_path / "ca.pem"
    bundle.write_text("# CA f\u00fcr Tests\n" + tls["ca"].read_text(), encoding="utf-8")
    assert main(["render", "webhook-config", "--url", "https://h/mutate", "--ca-bundle", str(bundle)]) == 0
    ca = base64.b64decode(yaml.safe_load(capsys.readouterr().out)["webhooks"][0]["clientConfig"]["caBundle"])
    assert ca == b"# CA f?r Tests\n" + tls["ca"].read_bytes()


def test_webhook_configuration_refuses_both_or_neither_client_and_no_routes() -> None:
    """``webhook_configuration`` takes the webhook's url or its service, exactly one, and at
    least one route (none would register a webhook called for nothing)."""
    routes = [SchedulerRoute("builds", "stickypack-builds", LabelSelector({"component": "binderhub-build"}))]
    for client in ({}, {"url": "https://h/mutate", "service": ("sp", "hook", 8443)}):
        with pytest.raises(ValueError, match="url or its service, not both"):
            webhook_configuration(routes, **client)
    with pytest.raises(ValueError, match="no routes"):
        webhook_configuration([], url="https://h/mutate")
    (entry,) = webhook_configuration(routes, url="https://h/mutate", timeout_s=3)["webhooks"]
    assert entry["clientConfig"] == {"url": "https://h/mutate"}
    assert entry["timeoutSeconds"] == 3


def test_webhook_configuration_entries_share_nothing() -> None:
    """Each route's entry has its own ``clientConfig`` and ``rules``: editing one leaves the
    other as it was, and the YAML writes both out (no ``&id001`` anchor and ``*id001``
    alias, which a shared object would get)."""
    names = ("builds", "workers")
    routes = [SchedulerRoute(name, "stickypack", LabelSelector({"component": name})) for name in names]
    text = webhook_configuration_yaml(routes, service=("sp", "hook", 8443))
    assert "&id" not in text and "*id" not in text
    first, second = webhook_configuration(routes, service=("sp", "hook", 8443))["webhooks"]
    first["clientConfig"]["service"]["port"] = 1
    first["rules"][0]["operations"].append("UPDATE")
    assert second["clientConfig"]["service"]["port"] == 8443
    assert second["rules"][0]["operations"] == ["CREATE"]


def test_webhook_command_serves_tls_and_stops_on_sigterm(tmp_path: Path, tls: dict) -> None:
    from stickypack.extender.server import loopback_socket

    sock = loopback_socket()  # a free port: bound, then released for the child
    port = sock.getsockname()[1]
    sock.close()
    argv = [sys.executable, "-m", "stickypack.cli", "webhook", "--host", "127.0.0.1", "--port", str(port)]
    tls_args = ["--tls-cert", tls["cert"], "--tls-key", tls["key"]]
    log = tmp_path / "webhook.log"
    with log.open("w") as out:
        proc = subprocess.Popen([*argv, *tls_args], stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                response = httpx.get(f"https://127.0.0.1:{port}/readyz", verify=tls["ctx"], timeout=1)
                break
            except httpx.HTTPError:
                assert proc.poll() is None, log.read_text()
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.1)
        assert response.text == "ok"
        review = _review(_pod({"app.kubernetes.io/component": "dask-worker"}))
        answer = httpx.post(f"https://127.0.0.1:{port}/mutate", json=review, verify=tls["ctx"]).json()
        assert answer["response"]["patchType"] == "JSONPatch"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0, log.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert "Traceback" not in log.read_text()
    assert "no TLS certificate" not in log.read_text()  # the warning is for plain HTTP


def _free_port() -> int:
    from stickypack.extender.server import loopback_socket

    sock = loopback_socket()  # a free port: bound, then released for the child
    port: int = sock.getsockname()[1]
    sock.close()
    return port


def test_webhook_command_listens_where_host_and_port_say_over_its_configuration(tmp_path: Path) -> None:
    """``--host`` and ``--port`` replace ``listen.host`` and ``listen.port``: the configuration
    names 192.0.2.1 (TEST-NET-1, no address of this machine: it could not listen there) and
    another port; the service answers on 127.0.0.1 and the port given, over plain HTTP with a
    warning that the API server calls webhooks over HTTPS only."""
    port, other = _free_port(), _free_port()
    cfg = tmp_path / "webhook.yaml"
    cfg.write_text(yaml.safe_dump({"listen": {"host": "192.0.2.1", "port": other}}))
    argv = [sys.executable, "-m", "stickypack.cli", "webhook", "--config", str(cfg)]
    log = tmp_path / "webhook.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [*argv, "--host", "127.0.0.1", "--port", str(port)], stdout=out, stderr=subprocess.STDOUT
        )
    try:
        _until(lambda: proc.poll() is not None or _answers(f"http://127.0.0.1:{port}/readyz"), timeout=20)
        assert proc.poll() is None, log.read_text()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0, log.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = log.read_text()
    assert "warning: no TLS certificate; the API server calls webhooks over HTTPS only" in " ".join(
        text.split()
    )
    assert "Traceback" not in text


def test_an_empty_host_option_replaces_the_configured_host_and_a_taken_port_is_status_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--host ""`` (every address, as ``listen.host: ""``) replaces the configured
    127.0.0.3: with the port taken on 127.0.0.1, listening on every address fails (Linux
    refuses 0.0.0.0:P while 127.0.0.1:P listens; 127.0.0.3:P alone would be free), which is one
    line naming where and exit status 1, not a traceback."""
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        cfg = tmp_path / "webhook.yaml"
        cfg.write_text(yaml.safe_dump({"listen": {"host": "127.0.0.3", "port": port}}))
        argv = [sys.executable, "-m", "stickypack.cli", "webhook", "--config", str(cfg), "--host", ""]
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            _, err = proc.communicate(timeout=20)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert proc.returncode == 1, err
    assert f"stickypack webhook: error: cannot serve on :{port}" in err and "Traceback" not in err


def test_a_services_ending_is_its_exit_status(capsys: pytest.CaptureFixture[str]) -> None:
    """``_run_service`` (both services' runner): the service's coroutine ending by
    ``SystemExit`` with status 0 or None (a clean stop) is status 0; another status (uvicorn's
    when it cannot listen) is one line naming the address, status 1; any other exception
    one line naming it, status 1."""
    from stickypack.cli.services import _run_service

    async def ends(exc: BaseException | None) -> None:
        if exc is not None:
            raise exc

    for exc in (None, SystemExit(0), SystemExit(None)):
        assert _run_service("webhook", ends(exc), "127.0.0.1", 8443, "warning") == 0, exc
        assert capsys.readouterr().err == ""
    assert _run_service("webhook", ends(SystemExit(3)), "127.0.0.1", 8443, "warning") == 1
    assert "stickypack webhook: error: cannot serve on 127.0.0.1:8443" in capsys.readouterr().err
    assert _run_service("extender", ends(RuntimeError("no luck")), "h", 1, "warning") == 1
    assert "stickypack extender: error: RuntimeError: no luck" in capsys.readouterr().err


def test_sigterm_while_a_review_is_still_arriving_answers_it_without_a_traceback(tmp_path: Path) -> None:
    # uvicorn cancels a request still open when its graceful shutdown (5 s) runs out: the
    # cancellation escaped the app, uvicorn logged "Exception in ASGI application" with a
    # traceback and answered a bare "Internal Server Error"
    from stickypack.extender.server import GRACEFUL_SHUTDOWN_S, loopback_socket
    from test_extender_e2e import stalled_request

    sock = loopback_socket()  # a free port: bound, then released for the child
    port = sock.getsockname()[1]
    sock.close()
    log = tmp_path / "webhook.log"
    argv = [sys.executable, "-m", "stickypack.cli", "webhook", "--host", "127.0.0.1", "--port", str(port)]
    with log.open("w") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    stalled = None
    try:
        _until(lambda: proc.poll() is not None or _answers(f"http://127.0.0.1:{port}/readyz"), timeout=30)
        assert proc.poll() is None, log.read_text()
        stalled = stalled_request(port, "/mutate")  # the request is open, its body awaited
        proc.send_signal(signal.SIGTERM)
        stalled.settimeout(GRACEFUL_SHUTDOWN_S + 10)
        answer = b""
        while chunk := stalled.recv(4096):
            answer += chunk
        assert proc.wait(timeout=20) == 0, log.read_text()
    finally:
        if stalled is not None:
            stalled.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 503"), answer
    assert "stopping" in json.loads(body)["error"], answer
    text = log.read_text()
    assert "Traceback" not in text and "Exception in ASGI application" not in text, text


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def _write_pair(folder: Path, ca: trustme.CA, *, cert: bool = True, key: bool = True) -> None:
    """A serving certificate of ``ca`` for 127.0.0.1 into ``folder``'s tls.crt and tls.key,
    each swapped in whole (written aside, then renamed over), as a Secret volume updates."""
    issued = ca.issue_cert("127.0.0.1")
    for wanted, name, pem in (
        (cert, "tls.crt", issued.cert_chain_pems[0]),
        (key, "tls.key", issued.private_key_pem),
    ):
        if wanted:
            pem.write_to_path(str(folder / f".{name}.new"))
            (folder / f".{name}.new").replace(folder / name)


def _trusted_by(url: str, ca: trustme.CA) -> bool:
    """Whether a new TLS connection to ``url`` verifies against ``ca``."""
    context = ssl.create_default_context()
    ca.configure_trust(context)
    try:
        return httpx.get(url, verify=context, timeout=2).status_code == 200
    except httpx.ConnectError as exc:
        if "CERTIFICATE_VERIFY_FAILED" not in str(exc):
            raise
        return False


def _until(check: Any, timeout: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout
    while not (result := check()):
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)
    return result


def test_certificate_reloading_refuses_a_server_without_tls(tmp_path: Path) -> None:
    """Reloading certificates needs the TLS context the server serves with: a plain-HTTP
    uvicorn configuration is refused at once, not at the first renewal."""
    from stickypack.extender.server import start_certificate_reloader, uvicorn_config
    from stickypack.webhook.app import make_app

    config = uvicorn_config(make_app(WebhookConfig().scheduler_routes()), "127.0.0.1", 0)
    with pytest.raises(ValueError, match="serves no TLS"):
        start_certificate_reloader(config, str(tmp_path / "tls.crt"), str(tmp_path / "tls.key"), interval_s=0)


def test_a_renewed_certificate_is_served_without_a_restart(tmp_path: Path) -> None:
    """cert-manager renews into the Secret, the kubelet swaps the mounted files: new
    connections get the new certificate. A half-done rotation (the new certificate beside
    the old key) is not loaded; the old pair keeps serving until the key arrives. The
    reloads and the checks are counted and the served certificate's expiry is a metric. A
    webhook with reloading off, serving the same files beside it, runs no check and keeps the
    certificate it read at start."""
    old_ca, new_ca = trustme.CA(), trustme.CA()
    _write_pair(tmp_path, old_ca)
    tls_config = {"cert_file": str(tmp_path / "tls.crt"), "key_file": str(tmp_path / "tls.key")}
    config = config_from_dict({"tls": {**tls_config, "reload_interval_s": 0.1}})
    off_config = config_from_dict({"tls": {**tls_config, "reload_interval_s": 0}})
    with WebhookThread(config) as thread, WebhookThread(off_config) as off:
        url, off_url = f"{thread.url}/healthz", f"{off.url}/healthz"
        assert _trusted_by(url, old_ca) and not _trusted_by(url, new_ca)
        assert _trusted_by(off_url, old_ca)
        assert thread.tls_reloading is not None and off.tls_reloading is None

        def count(outcome: str, webhook: WebhookThread = thread) -> float:
            return webhook.metrics.tls_loads.labels(outcome)._value.get()

        def checks(webhook: WebhookThread) -> float:
            return webhook.metrics.tls_checks._value.get()

        first_expiry = thread.metrics.tls_expiry._value.get()
        _write_pair(tmp_path, new_ca, key=False)  # the certificate first; its key is still the old one
        _until(lambda: count("failed") == 1)
        assert _trusted_by(url, old_ca) and count("loaded") == 0
        _write_pair(tmp_path, new_ca)
        _until(lambda: count("loaded") == 1)
        assert _trusted_by(url, new_ca) and not _trusted_by(url, old_ca)
        served = x509.load_pem_x509_certificate((tmp_path / "tls.crt").read_bytes())
        assert thread.metrics.tls_expiry._value.get() == served.not_valid_after_utc.timestamp()
        assert first_expiry > 0
        # at least one check per change seen (the files may change within one interval)
        assert checks(thread) >= 2
        # the reloading webhook has found and served the new pair (its checks came round);
        # the one with reloading off runs no checker, so it made no check and serves the old
        assert checks(off) == 0 and count("loaded", off) == count("failed", off) == 0
        assert _trusted_by(off_url, old_ca) and not _trusted_by(off_url, new_ca)


def test_webhook_command_reloads_a_renewed_certificate(tmp_path: Path) -> None:
    """The same through ``stickypack webhook`` itself (its serve loop, not the test thread)."""
    from stickypack.extender.server import loopback_socket

    old_ca, new_ca = trustme.CA(), trustme.CA()
    _write_pair(tmp_path, old_ca)
    cfg = tmp_path / "webhook.yaml"
    tls_config = {"cert_file": str(tmp_path / "tls.crt"), "key_file": str(tmp_path / "tls.key")}
    cfg.write_text(yaml.safe_dump({"tls": {**tls_config, "reload_interval_s": 0.2}}))
    sock = loopback_socket()
    port = sock.getsockname()[1]
    sock.close()
    log = tmp_path / "webhook.log"
    argv = [sys.executable, "-m", "stickypack.cli", "webhook", "--config", str(cfg), "--host", "127.0.0.1"]
    with log.open("w") as out:
        proc = subprocess.Popen([*argv, "--port", str(port)], stdout=out, stderr=subprocess.STDOUT)
    url = f"https://127.0.0.1:{port}/metrics"
    try:

        def up() -> bool:
            assert proc.poll() is None, log.read_text()
            try:
                return _trusted_by(url, old_ca)
            except httpx.HTTPError:
                return False

        _until(up, timeout=30)
        _write_pair(tmp_path, new_ca)
        _until(lambda: _trusted_by(url, new_ca))
        metrics = httpx.get(url, verify=_context(new_ca)).text
        assert 'stickypack_webhook_certificate_reloads_total{outcome="loaded"} 1.0' in metrics
        checks = re.search(r"^stickypack_webhook_certificate_checks_total (\S+)$", metrics, re.M)
        assert checks is not None and float(checks.group(1)) >= 1, metrics
        assert "stickypack_webhook_certificate_expiry_timestamp_seconds " in metrics
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0, log.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert "reloaded" in log.read_text() and "Traceback" not in log.read_text()


def _kubelet_write(folder: Path, ca: trustme.CA, version: int) -> Path:
    """A Secret volume's update as the kubelet's AtomicWriter does it: the pair into a new
    timestamped folder, ``..data`` swapped to it by a rename, tls.crt and tls.key symlinks
    into ``..data``; returns the new folder."""
    issued = ca.issue_cert("127.0.0.1")
    stamped = folder / f"..2026_01_0{version}_00_00_00.{version}"
    stamped.mkdir()
    issued.cert_chain_pems[0].write_to_path(str(stamped / "tls.crt"))
    issued.private_key_pem.write_to_path(str(stamped / "tls.key"))
    (folder / "..data_tmp").symlink_to(stamped.name)
    (folder / "..data_tmp").replace(folder / "..data")
    for name in ("tls.crt", "tls.key"):
        if not (folder / name).is_symlink():
            (folder / name).symlink_to(f"..data/{name}")
    return stamped


def _handshake(client: ssl.SSLContext, server: ssl.SSLContext) -> tuple[ssl.SSLObject, ssl.SSLObject]:
    """A TLS handshake between ``client`` and ``server`` in memory (no sockets): the two
    ends, after ten rounds of messages passed both ways. A verification failure raises
    ``ssl.SSLCertVerificationError``; check the outcome with each end's ``do_handshake``."""
    c_in, c_out, s_in, s_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
    cli = client.wrap_bio(c_in, c_out, server_hostname="127.0.0.1")
    srv = server.wrap_bio(s_in, s_out, server_side=True)
    for _ in range(10):
        for end in (cli, srv):
            with contextlib.suppress(ssl.SSLWantReadError):
                end.do_handshake()
        s_in.write(c_out.read())
        c_in.write(s_out.read())
    return cli, srv


def _served_by(context: ssl.SSLContext, ca: trustme.CA) -> bool:
    """Whether a handshake with a server of ``context`` verifies against ``ca``."""
    client = ssl.create_default_context()
    ca.configure_trust(client)
    try:
        cli, _ = _handshake(client, context)
        cli.do_handshake()
    except ssl.SSLCertVerificationError:
        return False
    return True


def test_the_reloader_follows_a_secret_volumes_symlink_swap(tmp_path: Path) -> None:
    """The kubelet swaps ``..data`` to a new folder and removes the old one: the reloader
    sees the new pair through the unchanged tls.crt / tls.key symlinks."""
    from stickypack.extender.server import CertificateReloader, ServerTLS

    old_ca, new_ca = trustme.CA(), trustme.CA()
    old = _kubelet_write(tmp_path, old_ca, 1)
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    reloader = CertificateReloader(context, str(cert), str(key), interval_s=1, tls=ServerTLS())
    assert reloader.check() is None and _served_by(context, old_ca)
    _kubelet_write(tmp_path, new_ca, 2)
    shutil.rmtree(old)
    assert reloader.check() is True and reloader.check() is None
    assert _served_by(context, new_ca) and not _served_by(context, old_ca)


def test_the_reloader_sees_a_rewrite_of_the_same_size_and_mtime(tmp_path: Path) -> None:
    """A file rewritten in place (same inode, same size, within the filesystem's mtime
    granularity) is still a change."""
    from stickypack.extender.server import CertificateReloader, ServerTLS

    _write_pair(tmp_path, trustme.CA())
    key = tmp_path / "tls.key"
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tmp_path / "tls.crt", key)
    reloader = CertificateReloader(
        context, str(tmp_path / "tls.crt"), str(key), interval_s=1, tls=ServerTLS()
    )
    before = key.stat()
    with key.open("r+b") as f:  # the same length, not a key any more
        f.write(b"x" * before.st_size)
    os.utime(key, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert (key.stat().st_ino, key.stat().st_size) == (before.st_ino, before.st_size)
    assert reloader.check() is False


def test_the_reloader_outlives_an_unexpected_error(tmp_path: Path) -> None:
    """An error the reloader did not foresee (here from its ``on_load``) is logged; the
    next change is still loaded."""
    from stickypack.extender.server import CertificateReloader, ServerTLS

    _write_pair(tmp_path, trustme.CA())
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tmp_path / "tls.crt", tmp_path / "tls.key")
    outcomes: list[str] = []

    def on_load(outcome: str, not_after: float | None) -> None:
        outcomes.append(outcome)
        if len(outcomes) == 1:
            raise RuntimeError("boom")

    reloader = CertificateReloader(
        context,
        str(tmp_path / "tls.crt"),
        str(tmp_path / "tls.key"),
        interval_s=0.01,
        on_load=on_load,
        tls=ServerTLS(),
    )
    last_ca = trustme.CA()

    async def scenario() -> None:
        task = asyncio.ensure_future(reloader.run())
        try:
            for ca in (trustme.CA(), last_ca):
                _write_pair(tmp_path, ca)
                count = len(outcomes)
                for _ in range(500):
                    if len(outcomes) > count and outcomes[-1] == "loaded":
                        break
                    await asyncio.sleep(0.01)
            assert not task.done()
        finally:
            task.cancel()

    asyncio.run(scenario())
    assert outcomes[-1] == "loaded" and _served_by(context, last_ca)


def test_the_reloader_switches_to_a_pair_of_another_key_kind(tmp_path: Path) -> None:
    """OpenSSL keeps one certificate per kind of key in a context: an RSA pair loaded over
    an ECDSA one would be served beside it, the old (soon expired) ECDSA certificate still
    to every client that prefers ECDSA. The reloader hands new connections a new context
    instead, so the renewed pair alone is served, whatever its kind, and back again."""
    from stickypack.extender.server import CertificateReloader, ServerTLS

    cas = {trustme.KeyType.ECDSA: trustme.CA(), trustme.KeyType.RSA: trustme.CA()}

    def write(kind: trustme.KeyType, folder: Path = tmp_path) -> None:
        folder.mkdir(exist_ok=True)
        issued = cas[kind].issue_cert("127.0.0.1", key_type=kind)
        issued.cert_chain_pems[0].write_to_path(str(folder / "tls.crt"))
        issued.private_key_pem.write_to_path(str(folder / "tls.key"))

    write(trustme.KeyType.ECDSA)
    write(trustme.KeyType.RSA, tmp_path / "new")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tmp_path / "tls.crt", tmp_path / "tls.key")
    outcomes: list[str] = []
    reloader = CertificateReloader(
        context,
        str(tmp_path / "tls.crt"),
        str(tmp_path / "tls.key"),
        interval_s=1,
        on_load=lambda outcome, _: outcomes.append(outcome),
        tls=ServerTLS(),
    )
    both = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)  # what loading it into the live context does
    both.load_cert_chain(tmp_path / "tls.crt", tmp_path / "tls.key")
    both.load_cert_chain(tmp_path / "new" / "tls.crt", tmp_path / "new" / "tls.key")
    assert _served_by(both, cas[trustme.KeyType.ECDSA]) and not _served_by(both, cas[trustme.KeyType.RSA])
    for name in ("tls.crt", "tls.key"):
        (tmp_path / "new" / name).replace(tmp_path / name)
    assert reloader.check() is True and outcomes == ["loaded"]
    assert _served_by(context, cas[trustme.KeyType.RSA]) and not _served_by(
        context, cas[trustme.KeyType.ECDSA]
    )
    write(trustme.KeyType.ECDSA)  # and back
    assert reloader.check() is True
    assert _served_by(context, cas[trustme.KeyType.ECDSA]) and not _served_by(
        context, cas[trustme.KeyType.RSA]
    )


def test_certificate_reloading_off_reports_the_expiry_and_runs_no_check(tmp_path: Path) -> None:
    """``start_certificate_reloader`` with ``interval_s`` 0 (``tls.reload_interval_s: 0``):
    the served certificate's expiry (2030-01-01) is reported once, as the first load
    (outcome None), and no task runs: no check is made."""
    from datetime import UTC, datetime

    from stickypack.extender.server import start_certificate_reloader, uvicorn_config
    from stickypack.webhook.app import make_app

    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    not_after = datetime(2030, 1, 1, tzinfo=UTC)
    issued = trustme.CA().issue_cert("127.0.0.1", not_after=not_after)
    issued.cert_chain_pems[0].write_to_path(str(cert))
    issued.private_key_pem.write_to_path(str(key))
    config = uvicorn_config(
        make_app(WebhookConfig().scheduler_routes()),
        "127.0.0.1",
        0,
        ssl_certfile=str(cert),
        ssl_keyfile=str(key),
    )
    loads: list[tuple[str | None, float | None]] = []
    checks: list[None] = []

    async def scenario() -> bool:
        task = start_certificate_reloader(
            config, str(cert), str(key), interval_s=0,
            on_load=lambda outcome, when: loads.append((outcome, when)), on_check=lambda: checks.append(None),
        )  # fmt: skip
        await asyncio.sleep(0.05)
        if task is not None:
            task.cancel()
        return task is None

    assert asyncio.run(scenario())
    assert loads == [(None, not_after.timestamp())] and checks == []


def test_the_reloaders_expiry_is_the_served_certificates(tmp_path: Path) -> None:
    """``CertificateReloader.not_after``: the expiry of the certificate served, read at
    start (2030-01-01), kept when a pair fails to load (a 2032 certificate beside the old
    key), the renewed one's once reloaded (2031-01-01)."""
    from datetime import UTC, datetime

    from stickypack.extender.server import CertificateReloader, ServerTLS

    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"

    def write(year: int, *, with_key: bool = True) -> float:
        not_after = datetime(year, 1, 1, tzinfo=UTC)
        issued = trustme.CA().issue_cert("127.0.0.1", not_after=not_after)
        issued.cert_chain_pems[0].write_to_path(str(cert))
        if with_key:
            issued.private_key_pem.write_to_path(str(key))
        return not_after.timestamp()

    first = write(2030)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    reloader = CertificateReloader(context, str(cert), str(key), interval_s=1, tls=ServerTLS())
    assert reloader.not_after() == first
    write(2032, with_key=False)
    assert reloader.check() is False and reloader.not_after() == first
    renewed = write(2031)
    assert reloader.check() is True and reloader.not_after() == renewed


def test_the_reloader_sets_no_sni_callback_until_it_reloads(tmp_path: Path) -> None:
    """With reloading off (``tls.reload_interval_s: 0``) the reloader is still made, to
    report the certificate's expiry: it must leave the live context as it is, with no
    callback into Python in every handshake; the first pair reloaded sets it."""
    from stickypack.extender.server import CertificateReloader, ServerTLS

    old_ca, new_ca = trustme.CA(), trustme.CA()
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    for ca in (old_ca, new_ca):
        issued = ca.issue_cert("127.0.0.1")
        issued.cert_chain_pems[0].write_to_path(str(cert))
        issued.private_key_pem.write_to_path(str(key))
        if ca is old_ca:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(cert, key)
            reloader = CertificateReloader(context, str(cert), str(key), interval_s=0, tls=ServerTLS())
            assert context.sni_callback is None and reloader.not_after() is not None
    assert reloader.check() is True and context.sni_callback is not None
    assert _served_by(context, new_ca)


def test_a_reloaded_pair_keeps_the_servers_tls_settings(tmp_path: Path) -> None:
    """The new context is made with the settings uvicorn gave the live one
    (``ServerTLS.from_uvicorn``): a server that asks for client certificates still verifies
    them against its CA, and one that offers ALPN still does, after the handover."""
    import uvicorn

    from stickypack.extender.server import CertificateReloader, ServerTLS

    server_ca, client_ca, new_ca = trustme.CA(), trustme.CA(), trustme.CA()
    cert, key, cas = tmp_path / "tls.crt", tmp_path / "tls.key", tmp_path / "clients.pem"
    client_ca.cert_pem.write_to_path(str(cas))

    def write(ca: trustme.CA) -> None:
        issued = ca.issue_cert("127.0.0.1")
        issued.cert_chain_pems[0].write_to_path(str(cert))
        issued.private_key_pem.write_to_path(str(key))

    write(server_ca)
    uv = uvicorn.Config(
        lambda *_: None,
        ssl_certfile=str(cert),
        ssl_keyfile=str(key),
        ssl_cert_reqs=ssl.CERT_REQUIRED,
        ssl_ca_certs=str(cas),
        ssl_ciphers="ECDHE+AESGCM",
        lifespan="off",
    )
    uv.load()
    tls = ServerTLS.from_uvicorn(uv)
    assert (tls.verify_mode, tls.ca_certs, tls.ciphers) == (ssl.CERT_REQUIRED, str(cas), "ECDHE+AESGCM")
    tls = dataclasses.replace(tls, alpn_protocols=("h2", "http/1.1"))  # as an h2 protocol class has
    uv.ssl.set_alpn_protocols(["h2", "http/1.1"])
    reloader = CertificateReloader(uv.ssl, str(cert), str(key), interval_s=1, tls=tls)
    write(new_ca)
    assert reloader.check() is True

    def handshake(with_cert: bool) -> str | None:
        client = _context(new_ca)
        client.set_alpn_protocols(["h2"])
        if with_cert:
            client_ca.issue_cert("client.example").configure_cert(client)
        _, srv = _handshake(client, uv.ssl)
        srv.do_handshake()
        assert srv.getpeercert() and srv.context is not uv.ssl  # the new context's
        return srv.selected_alpn_protocol()

    assert handshake(with_cert=True) == "h2"
    with pytest.raises(ssl.SSLError):
        handshake(with_cert=False)


def _context(ca: trustme.CA) -> ssl.SSLContext:
    context = ssl.create_default_context()
    ca.configure_trust(context)
    return context


def test_webhook_command_checks_its_inputs(
    tmp_path: Path, tls: dict, capsys: pytest.CaptureFixture[str]
) -> None:
    from cryptography.hazmat.primitives import serialization

    key = serialization.load_pem_private_key(Path(tls["key"]).read_bytes(), password=None)
    encrypted = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"secret"),
    )
    Path(tls["key"] + ".enc").write_bytes(encrypted)  # would have made OpenSSL ask for it
    assert main(["webhook", "--check"]) == 0
    assert "dask-gateway-workers -> stickypack" in capsys.readouterr().out
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate")
    for bad, message in [
        (["--tls-cert", tls["cert"]], "give both --tls-cert and --tls-key"),
        (["--tls-cert", str(junk), "--tls-key", tls["key"]], f"TLS certificate {junk}"),
        (
            ["--tls-cert", tls["cert"], "--tls-key", tls["key"] + ".enc"],
            "the key is encrypted: give it unencrypted",
        ),
        (["--tls-cert", tls["cert"], "--tls-key", str(tmp_path / "missing")], "TLS certificate"),
        # an empty path is no file: refused now, not when uvicorn fails to load it at start-up
        (["--tls-cert", tls["cert"], "--tls-key", ""], f"TLS certificate {tls['cert']} / key : "),
        (["--tls-cert", "", "--tls-key", tls["key"]], "TLS certificate  / key "),
        (["--port", "70000"], "--port must be in 0..65535"),
        (["--host", "http://x"], "--host:"),
        (["--config", str(tmp_path / "missing.yaml")], "cannot read"),
    ]:
        assert main(["webhook", "--check", *bad]) == 2, bad
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err, (bad, err)
    assert main(["webhook", "--check", "--tls-cert", str(junk), "--tls-key", tls["key"]]) == 2
    assert "encrypted" not in capsys.readouterr().err  # the certificate is at fault, not the key


def test_webhook_route_shows_a_pods_route_and_patch_without_a_cluster(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``stickypack webhook --route POD``: what the service would answer for that pod (the
    same ``route_pod``), the namespace from the pod or ``--namespace``; bad input is one line."""
    config = tmp_path / "webhook.yaml"
    route = {
        "name": "team-b-only",
        "pod_selector": "dask.org/component=worker",
        "namespaces": ["team-b"],
        "tolerations": [{"key": "dedicated", "operator": "Exists"}],
    }
    config.write_text(yaml.safe_dump({"routes": [route]}))
    pod = _pod({"dask.org/component": "worker"}, namespace="team-b")
    pod_file = tmp_path / "pod.yaml"
    pod_file.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Pod", **pod}))
    argv = ["webhook", "--config", str(config), "--route", str(pod_file)]
    assert main(argv) == 0
    shown = yaml.safe_load(capsys.readouterr().out)
    routes = load_config(config).scheduler_routes()
    assert shown == {"namespace": "team-b", **_decision(route_pod(routes, pod, "team-b"))}
    assert shown["route"] == "team-b-only" and "/spec/tolerations" in [op["path"] for op in shown["patch"]]
    assert main([*argv, "--namespace", "team-a"]) == 0
    assert yaml.safe_load(capsys.readouterr().out) == {
        "namespace": "team-a", "route": None, "reason": "no route matches", "patch": []
    }  # fmt: skip
    pod_file.write_text("kind: Service\nspec: {}\n")
    for bad, message in [
        (argv, f"{pod_file}: not a Pod"),
        (["webhook", "--route", str(tmp_path / "missing.yaml")], "cannot read"),
        (["webhook", "--namespace", "x"], "--namespace is for --route"),
    ]:
        assert main(bad) == 2, bad
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err, (bad, err)
    pod_file.write_text(yaml.safe_dump({"kind": "Pod", "metadata": {"labels": {"a": 1}}, "spec": {}}))
    assert main(["webhook", "--route", str(pod_file)]) == 2
    assert "metadata.labels must map strings to strings" in capsys.readouterr().err
    # an empty namespace is none: the pod's namespace is then "default", as the API server's
    pod_file.write_text(yaml.safe_dump({"kind": "Pod", "metadata": {"namespace": ""}, "spec": {}}))
    assert main(["webhook", "--route", str(pod_file)]) == 0
    assert yaml.safe_load(capsys.readouterr().out)["namespace"] == "default"
    # a file without ``kind`` is taken as a Pod (the kind defaults to Pod);
    # without a ``spec`` mapping it is no Pod
    pod_file.write_text("metadata: {namespace: team-c}\nspec: {}\n")
    assert main(["webhook", "--route", str(pod_file)]) == 0
    assert yaml.safe_load(capsys.readouterr().out)["namespace"] == "team-c"
    for no_spec in ("kind: Pod\nmetadata: {}\n", "kind: Pod\nspec: []\n"):
        pod_file.write_text(no_spec)
        assert main(["webhook", "--route", str(pod_file)]) == 2
        assert f"{pod_file}: not a Pod (a mapping with kind: Pod and a spec)" in capsys.readouterr().err
    pod_file.write_text("kind: Pod\nmetadata: [x]\nspec: {}\n")  # metadata not a mapping
    assert main(["webhook", "--route", str(pod_file)]) == 2
    err = capsys.readouterr().err
    assert "metadata and spec must be mappings" in err and "Traceback" not in err


def _decision(decision: Any) -> dict[str, Any]:
    return {"route": decision.route, "reason": decision.reason, "patch": decision.patch}


# ---------------------------------------------------------------------------- real control plane


def _ensure_namespace(cp: ControlPlane, name: str) -> None:
    from kubernetes_asyncio.client.exceptions import ApiException

    async def create(core: Any) -> None:
        try:
            await core.create_namespace({"metadata": {"name": name}})
        except ApiException as exc:
            if exc.status != 409:
                raise

    cp._core(create)
    cp._wait_for_namespace(name)


def _register(cp: ControlPlane, doc: dict, *, delete: bool = False) -> None:
    from kubernetes_asyncio import client

    async def go(api: Any) -> None:
        admission = client.AdmissionregistrationV1Api(api)
        if delete:
            await admission.delete_mutating_webhook_configuration(doc["metadata"]["name"])
        else:
            await admission.create_mutating_webhook_configuration(doc)

    cp.call(go)


@contextmanager
def _registered_webhook(
    cluster: ControlPlane,
    tls: dict,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    routes: list[dict],
    probe_labels: dict[str, str],
) -> Iterator[WebhookThread]:
    """The webhook serving ``routes`` over TLS, registered with the real API server from
    ``stickypack render webhook-config``, once the API server routes a pod labelled
    ``probe_labels`` (it picks a new configuration up within a second or so)."""
    cfg = tmp_path / "webhook.yaml"
    cfg.write_text(
        yaml.safe_dump({"routes": routes, "tls": {"cert_file": tls["cert"], "key_file": tls["key"]}})
    )
    with WebhookThread(load_config(cfg)) as thread:
        url = f"{thread.url}/mutate"
        assert (
            main(
                [
                    "render",
                    "webhook-config",
                    "--config",
                    str(cfg),
                    "--url",
                    url,
                    "--ca-bundle",
                    str(tls["ca"]),
                ]
            )
            == 0
        )
        doc = yaml.safe_load(capsys.readouterr().out)
        _register(cluster, doc)
        try:
            deadline = time.monotonic() + 20
            for i in range(200):
                probe = cluster.create_pod(
                    pod=pod_manifest(f"probe-{i}", labels=probe_labels, cpu=None, memory=None)
                )
                if probe["spec"]["schedulerName"] != "default-scheduler" or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            assert probe["spec"]["schedulerName"] != "default-scheduler", (
                "the API server never called the webhook"
            )
            cluster.delete_all_pods()
            yield thread
        finally:
            _register(cluster, doc, delete=True)
            cluster.delete_all_pods()


@pytest.fixture
def routed_cluster(
    cluster: ControlPlane, tls: dict, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> Iterator[tuple[ControlPlane, WebhookThread, str]]:
    """The control plane with the webhook serving the default routes plus a build route for
    namespace ``binder``, registered from ``stickypack render webhook-config``; yields the
    cluster, the webhook and a label value unique to this test."""
    mark = uuid.uuid4().hex[:8]
    routes = [
        {
            "name": "builds",
            "scheduler_name": "stickypack-builds",
            "namespaces": ["binder"],
            "pod_selector": f"component=binderhub-build,test={mark}",
        },
        {
            "name": "dask-gateway-workers",
            "pod_selector": f"app.kubernetes.io/component=dask-worker,test={mark}",
        },
        {
            "name": "dask-kubernetes-workers",
            "pod_selector": {"matchLabels": {"dask.org/component": "worker", "test": mark}},
        },
    ]
    for ns in ("binder", "team-a", "team-b"):
        _ensure_namespace(cluster, ns)
    probe = {"dask.org/component": "worker", "test": mark}
    with _registered_webhook(cluster, tls, capsys, tmp_path, routes, probe) as thread:
        yield cluster, thread, mark


@pytest.mark.controlplane
def test_api_server_routes_pods_through_the_webhook(
    routed_cluster: tuple[ControlPlane, WebhookThread, str],
) -> None:
    """The real kube-apiserver calls the webhook over TLS (checked against the rendered
    caBundle) and applies its patch; pods the routes do not name keep their scheduler."""
    cluster, thread, mark = routed_cluster
    before = _reviews(thread)

    def create(name: str, namespace: str, labels: dict[str, str], **kw: Any) -> dict:
        return cluster.create_pod(pod=pod_manifest(name, namespace=namespace, labels=labels, **kw))

    gateway = create("gw", "team-a", {"app.kubernetes.io/component": "dask-worker", "test": mark})
    operator = create("op", "team-b", {"dask.org/component": "worker", "test": mark})
    build = create("build", "binder", {"component": "binderhub-build", "test": mark})
    stray_build = create("stray-build", "team-a", {"component": "binderhub-build", "test": mark})
    named = create("named", "team-a", {"dask.org/component": "worker", "test": mark}, scheduler_name="mine")
    plain = create("plain", "team-a", {"app": "web"})
    assert gateway["spec"]["schedulerName"] == "stickypack"
    assert gateway["metadata"]["annotations"][ROUTE_ANNOTATION] == "dask-gateway-workers"
    assert operator["spec"]["schedulerName"] == "stickypack"
    assert operator["metadata"]["annotations"][ROUTE_ANNOTATION] == "dask-kubernetes-workers"
    assert build["spec"]["schedulerName"] == "stickypack-builds"
    assert stray_build["spec"]["schedulerName"] == "default-scheduler"  # not in namespace binder
    assert named["spec"]["schedulerName"] == "mine"
    assert plain["spec"]["schedulerName"] == "default-scheduler"
    assert ROUTE_ANNOTATION not in (plain["metadata"].get("annotations") or {})
    # the API server called the webhook only for pods a route's selectors may match: not
    # for "plain", nor for "stray-build" (the builds route's namespaceSelector); "named" was
    # sent (its labels match) and left unchanged
    sent = _reviews(thread) - before
    assert sent == Counter(
        {("routed", "dask-gateway-workers"): 1, ("routed", "dask-kubernetes-workers"): 1,
         ("routed", "builds"): 1, ("unchanged", ""): 1}
    ), sent  # fmt: skip


@pytest.mark.controlplane
def test_a_dry_run_create_is_routed_but_counted_as_a_dry_run(
    routed_cluster: tuple[ControlPlane, WebhookThread, str],
) -> None:
    """A ``dryRun=All`` create (what ``kubectl apply --dry-run=server`` sends for a new pod)
    reaches the webhook (the rendered entries declare ``sideEffects: None``; the API server
    refuses a dry run to an entry that may have side effects): the answer shows the route's
    scheduler and annotation, nothing is stored, and the review is counted as ``dry_run``,
    not ``routed``. The same pod created for real is then counted ``routed``."""
    from kubernetes_asyncio.client.exceptions import ApiException

    cluster, thread, mark = routed_cluster
    labels = {"dask.org/component": "worker", "test": mark}
    before = _reviews(thread)
    dry = cluster.dry_run_pod(pod_manifest("dry", namespace="team-b", labels=labels), namespace="team-b")
    assert dry["spec"]["schedulerName"] == "stickypack"
    assert dry["metadata"]["annotations"][ROUTE_ANNOTATION] == "dask-kubernetes-workers"
    mine = pod_manifest("dry-named", namespace="team-b", labels=labels, scheduler_name="mine")
    named = cluster.dry_run_pod(mine, namespace="team-b")
    assert named["spec"]["schedulerName"] == "mine"
    sent = _reviews(thread) - before
    assert sent == Counter({("dry_run", "dask-kubernetes-workers"): 1, ("dry_run", ""): 1}), sent

    async def stored(core: Any) -> int:
        try:
            await core.read_namespaced_pod("dry", "team-b")
        except ApiException as exc:
            return exc.status
        return 200

    assert cluster._core(stored) == 404  # a dry run stores nothing
    real = cluster.create_pod(pod=pod_manifest("dry", namespace="team-b", labels=labels))
    assert real["spec"]["schedulerName"] == "stickypack"  # what the dry run showed
    assert real["metadata"]["annotations"] == dry["metadata"]["annotations"]
    sent = _reviews(thread) - before
    route = "dask-kubernetes-workers"
    assert sent == Counter({("dry_run", route): 1, ("dry_run", ""): 1, ("routed", route): 1}), sent


@pytest.mark.controlplane
def test_a_routes_placement_takes_workers_to_its_node_pool(
    cluster: ControlPlane, tls: dict, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """z2jh's user nodes are labelled ``hub.jupyter.org/node-purpose=user`` and tainted
    ``hub.jupyter.org/dedicated=user:NoSchedule``. A route carrying that affinity and
    toleration takes Dask workers created with neither to those nodes, where the real
    kube-scheduler packs them; a worker's own required affinity (zone b) still holds, ANDed
    with the route's, and its pod anti-affinity is kept; other pods stay off the pool."""
    mark = uuid.uuid4().hex[:8]
    route = {
        "name": "pool-workers",
        "pod_selector": f"dask.org/component=worker,test={mark}",
        "node_affinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [USER_POOL]}
        },
        "tolerations": [{"key": "hub.jupyter.org/dedicated", "value": "user", "effect": "NoSchedule"}],
    }
    labels = {"dask.org/component": "worker", "test": mark}
    with _registered_webhook(cluster, tls, capsys, tmp_path, [route], labels):
        cluster.start_scheduler(scheduler_config(["stickypack", "default-scheduler"]))
        for i in range(6):
            cluster.create_node(f"core-{i}", cpu="8", memory="32Gi", labels={"zone": "a"})
        for i, zone in enumerate("aabb"):
            cluster.create_node(
                f"user-{i}",
                cpu="8",
                memory="32Gi",
                labels={"hub.jupyter.org/node-purpose": "user", "zone": zone},
                taints=["hub.jupyter.org/dedicated=user:NoSchedule"],
            )
        workers = [pod_manifest(f"worker-{i}", cpu="1", memory="2Gi", labels=labels) for i in range(12)]
        created = cluster.create_pods(workers)
        assert all(p["spec"]["tolerations"][-1]["key"] == "hub.jupyter.org/dedicated" for p in created)
        placed = cluster.wait_bound([p["metadata"]["name"] for p in workers])
        assert all(node.startswith("user-") for node in placed.values()), placed
        assert len(set(placed.values())) == 2, placed  # 12 one-core workers, packed on 8-core nodes

        in_b = pod_manifest("worker-zone-b", cpu="1", memory="2Gi", labels=labels)
        anti = {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 1,
                    "podAffinityTerm": {
                        "labelSelector": {"matchLabels": {"x": "y"}},
                        "topologyKey": "kubernetes.io/hostname",
                    },
                }
            ]
        }
        in_b["spec"]["affinity"] = {
            "podAntiAffinity": anti,
            "nodeAffinity": _required(_expression("zone", "In", "b"))["node_affinity"],
        }
        created_b = cluster.create_pod(pod=in_b)
        assert created_b["spec"]["affinity"]["podAntiAffinity"] == anti
        assert cluster.wait_bound("worker-zone-b")["worker-zone-b"] in ("user-2", "user-3")

        web = cluster.create_pod("web", cpu="1", memory="2Gi", labels={"app": "web"})
        assert "affinity" not in web["spec"] and not any(
            t.get("key") == "hub.jupyter.org/dedicated" for t in web["spec"].get("tolerations") or []
        )
        assert cluster.wait_bound("web")["web"].startswith("core-")


def _reviews(thread: WebhookThread) -> Counter[tuple[str, str]]:
    """The webhook's review counts by (outcome, route), from its Prometheus counter."""
    counts: Counter[tuple[str, str]] = Counter()
    for metric in thread.metrics.reviews.collect():
        for sample in metric.samples:
            if sample.name.endswith("_total"):
                counts[(sample.labels["outcome"], sample.labels["route"])] = int(sample.value)
    return counts


@pytest.mark.controlplane
def test_routed_dask_workers_are_packed_by_the_real_scheduler(
    routed_cluster: tuple[ControlPlane, WebhookThread, str],
) -> None:
    """The Dask story without touching the pods' spec: twenty workers of two users in two
    namespaces, created for the default scheduler, reach the ``stickypack`` profile through
    the webhook and land on the fewest nodes that hold them (3 of 20)."""
    cluster, _, mark = routed_cluster
    cluster.start_scheduler(scheduler_config(["stickypack", "default-scheduler"]))
    for i in range(20):
        cluster.create_node(f"node-{i:02d}", cpu="8", memory="32Gi")
    placed: dict[str, str] = {}
    for namespace, label in (("team-a", "app.kubernetes.io/component"), ("team-b", "dask.org/component")):
        value = "dask-worker" if label.startswith("app.") else "worker"
        pods = [
            pod_manifest(
                f"worker-{i}", namespace=namespace, cpu="1", memory="4Gi", labels={label: value, "test": mark}
            )
            for i in range(10)
        ]
        created = cluster.create_pods(pods)
        assert {p["spec"]["schedulerName"] for p in created} == {"stickypack"}
        placed |= {
            f"{namespace}/{k}": v
            for k, v in cluster.wait_bound([p["metadata"]["name"] for p in pods], namespace=namespace).items()
        }
    assert len(placed) == 20
    assert len(set(placed.values())) == 3, placed


@pytest.mark.controlplane
def test_pods_are_created_unchanged_while_the_webhook_is_down(
    routed_cluster: tuple[ControlPlane, WebhookThread, str],
) -> None:
    """failurePolicy Ignore: with the webhook stopped, a Dask worker is still created (for the
    default scheduler), without waiting out the timeout."""
    cluster, thread, mark = routed_cluster
    thread.stop()
    start = time.monotonic()
    pod = cluster.create_pod(
        pod=pod_manifest("orphan", namespace="team-a", labels={"dask.org/component": "worker", "test": mark})
    )
    assert pod["spec"]["schedulerName"] == "default-scheduler"
    assert time.monotonic() - start < 5


@pytest.mark.controlplane
def test_api_server_applies_the_patch_to_every_annotation_shape(
    routed_cluster: tuple[ControlPlane, WebhookThread, str],
) -> None:
    """A patch the API server cannot apply fails the pod's creation (an internal error, which
    ``failurePolicy: Ignore`` does not cover), so each shape a routed pod's annotations can
    have reaches the real API server: none, empty, others (the route annotation's ``/`` is
    escaped as ``~1`` in the patch's JSON Pointer), and a stale route annotation."""
    cluster, _, mark = routed_cluster
    labels = {"dask.org/component": "worker", "test": mark}
    shapes: dict[str, dict[str, str] | None] = {
        "none": None,
        "empty": {},
        "others": {"keep": "me", "example.com/other": "x"},
        "stale": {ROUTE_ANNOTATION: "old-route", "keep": "me"},
    }
    for name, existing in shapes.items():
        manifest = pod_manifest(f"ann-{name}", namespace="team-a", labels=labels)
        if existing is not None:
            manifest["metadata"]["annotations"] = existing
        pod = cluster.create_pod(pod=manifest)
        assert pod["spec"]["schedulerName"] == "stickypack", name
        want = {**(existing or {}), ROUTE_ANNOTATION: "dask-kubernetes-workers"}
        assert pod["metadata"]["annotations"] == want, name


@pytest.mark.controlplane
def test_a_pod_two_routes_match_goes_to_the_first_though_both_entries_call(
    routed_cluster: tuple[ControlPlane, WebhookThread, str],
) -> None:
    """The rendered configuration has one entry per route, so the API server calls the
    webhook once for each route whose selectors match: the first call routes the pod by the
    first matching route, the second finds it already there and leaves it (``unchanged``)."""
    cluster, thread, mark = routed_cluster
    before = _reviews(thread)
    labels = {"app.kubernetes.io/component": "dask-worker", "dask.org/component": "worker", "test": mark}
    pod = cluster.create_pod(pod=pod_manifest("both", namespace="team-a", labels=labels))
    assert pod["spec"]["schedulerName"] == "stickypack"
    assert pod["metadata"]["annotations"] == {ROUTE_ANNOTATION: "dask-gateway-workers"}
    sent = _reviews(thread) - before
    assert sent == Counter(
        {("routed", "dask-gateway-workers"): 1, ("unchanged", "dask-gateway-workers"): 1}
    ), sent


def test_a_stalled_review_gets_408_while_others_are_answered() -> None:
    """A client that never finishes its body holds no request open: 408 after the body
    timeout, counted as ``timeout``, while other reviews are answered meanwhile."""
    import socket

    from stickypack.extender.server import AppThread
    from stickypack.webhook.app import WebhookMetrics, make_app

    metrics = WebhookMetrics()
    app = make_app(WebhookConfig().scheduler_routes(), metrics=metrics, body_timeout_s=0.5)
    with AppThread(app) as server, httpx.Client(base_url=server.url, timeout=10) as client:
        stalled = socket.create_connection(("127.0.0.1", server.port))
        try:
            stalled.sendall(b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{")
            review = _review(_pod({"dask.org/component": "worker"}))
            assert client.post("/mutate", json=review).json()["response"]["patchType"] == "JSONPatch"
            stalled.settimeout(5)  # a missing 408 fails the test by timing out here
            answer = read_answer(stalled, b"not received within")
            assert answer.startswith(b"HTTP/1.1 408") and b"not received within 0.5 s" in answer
        finally:
            stalled.close()
        assert (
            'stickypack_webhook_reviews_total{outcome="timeout",route=""} 1.0' in client.get("/metrics").text
        )


def test_a_pod_whose_annotations_are_full_is_routed_without_the_annotation() -> None:
    from stickypack.core.routing import MAX_ANNOTATION_BYTES

    routes = WebhookConfig().scheduler_routes()
    key = "big"
    room = MAX_ANNOTATION_BYTES - len(key) - len(ROUTE_ANNOTATION) - len("dask-kubernetes-workers")
    fits = _pod({"dask.org/component": "worker"}, annotations={key: "x" * room})
    decision = route_pod(routes, fits, "x")
    assert (
        _apply(fits, decision.patch)["metadata"]["annotations"][ROUTE_ANNOTATION] == "dask-kubernetes-workers"
    )
    full = _pod({"dask.org/component": "worker"}, annotations={key: "x" * (room + 1)})
    decision = route_pod(routes, full, "x")
    routed = _apply(full, decision.patch)
    assert routed["spec"]["schedulerName"] == "stickypack"
    assert ROUTE_ANNOTATION not in routed["metadata"]["annotations"]
    assert "annotations full" in decision.reason


def test_the_annotations_room_is_counted_in_bytes_not_characters() -> None:
    """The API server counts the annotations' size in bytes: "\u00e9" is one character and two
    bytes, so a value of them can leave room by its characters and none by its bytes."""
    from stickypack.core.routing import MAX_ANNOTATION_BYTES

    routes = WebhookConfig().scheduler_routes()
    route_name = "dask-kubernetes-workers"
    room = MAX_ANNOTATION_BYTES - len("big") - len(ROUTE_ANNOTATION) - len(route_name)
    fits = _pod({"dask.org/component": "worker"}, annotations={"big": "\u00e9" * (room // 2)})
    decision = route_pod(routes, fits, "x")
    assert _apply(fits, decision.patch)["metadata"]["annotations"][ROUTE_ANNOTATION] == route_name
    over = "\u00e9" * (room // 2 + 1)  # room // 2 + 1 characters <= room, 2 * (room // 2 + 1) bytes > room
    assert len(over) <= room < len(over.encode())
    full = _pod({"dask.org/component": "worker"}, annotations={"big": over})
    decision = route_pod(routes, full, "x")
    routed = _apply(full, decision.patch)
    assert routed["spec"]["schedulerName"] == "stickypack"
    assert routed["metadata"]["annotations"] == {"big": over}
    assert "annotations full" in decision.reason


@pytest.mark.controlplane
def test_the_api_server_takes_a_routed_pod_whose_annotations_are_nearly_full(
    routed_cluster: tuple[ControlPlane, WebhookThread, str],
) -> None:
    """Adding the route annotation to a pod whose annotations are at the API server's
    256 KiB limit would make its creation fail (validation runs after mutation, whatever
    the failurePolicy): such a pod is routed without it."""
    from stickypack.core.routing import MAX_ANNOTATION_BYTES

    cluster, _, mark = routed_cluster
    pod = pod_manifest("full", namespace="team-a", labels={"dask.org/component": "worker", "test": mark})
    pod["metadata"]["annotations"] = {"big": "x" * (MAX_ANNOTATION_BYTES - len("big") - 10)}
    created = cluster.create_pod(pod=pod, namespace="team-a")
    assert created["spec"]["schedulerName"] == "stickypack"
    assert ROUTE_ANNOTATION not in created["metadata"]["annotations"]
