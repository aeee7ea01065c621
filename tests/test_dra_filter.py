"""kube-scheduler's DynamicResources filter where it needs no CEL (``core.dra.claims_verdict``,
``DynamicResourcesFilter``) and how ``explain_placement`` names it: pure, on hand-made
ResourceClaim dicts as the API serves them (kube-scheduler v1.37.2's
``dynamicresources.go`` and ``k8s.io/dynamic-resource-allocation/resourceclaim``)."""

from __future__ import annotations

import copy
import time
from typing import Any

import pytest
from rich.console import Console

from stickypack.core.dra import ClaimsVerdict, DynamicResourcesFilter, claim_key, claims_verdict
from stickypack.core.explain import KUBE_FILTER_ORDER, explain_placement
from stickypack.core.framework import Profile, SchedulingContext
from stickypack.core.nodetable import NodeTable
from stickypack.core.pod import Pod, PodClaimRef
from stickypack.policies import load_builtin
from stickypack.testing import pod_manifest

GI = 1024**3
POD_UID = "pod-uid-1"


def _pod(name: str = "p", cpu: str = "1", *refs: dict[str, Any], uid: str = POD_UID, **status: Any) -> Pod:
    raw = pod_manifest(name, cpu=cpu, memory="1Gi")
    raw["metadata"]["uid"] = uid
    raw["spec"]["resourceClaims"] = list(refs)
    if status:
        raw["status"] = status
    return Pod.from_dict(raw)


def _named(entry: str, claim: str) -> dict[str, Any]:
    return {"name": entry, "resourceClaimName": claim}


def _templated(entry: str) -> dict[str, Any]:
    return {"name": entry, "resourceClaimTemplateName": "gpu-template"}


def _claim(
    name: str,
    node_selector: dict[str, Any] | None = None,
    *,
    allocated: bool = True,
    owner: str | None = None,
    deleting: bool = False,
    reserved: int = 0,
) -> dict[str, Any]:
    """A claim, allocated (with the ``nodeSelector`` given, else none) unless told not."""
    meta: dict[str, Any] = {"name": name, "namespace": "default", "uid": f"{name}-uid"}
    if owner is not None:
        meta["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": owner, "controller": True}
        ]
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    status: dict[str, Any] = {}
    if allocated:
        result = {"request": "gpu", "driver": "gpu.example.com", "pool": "pool", "device": "dev-0"}
        status["allocation"] = {"devices": {"results": [result]}}
        if node_selector is not None:
            status["allocation"]["nodeSelector"] = node_selector
    if reserved:
        status["reservedFor"] = [
            {"resource": "pods", "name": f"u{k}", "uid": f"u{k}"} for k in range(reserved)
        ]
    return {"metadata": meta, "spec": {"devices": {"requests": []}}, "status": status}


def _by_key(*claims: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {claim_key(c): c for c in claims}


def _on_node(name: str) -> dict[str, Any]:
    """A node selector as DRA drivers' node-local allocations have it: ``metadata.name``."""
    return {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [name]}]}]
    }


def _table(*nodes: str, labels: dict[str, dict[str, str]] | None = None) -> NodeTable:
    table = NodeTable()
    for name in nodes:
        table.upsert_node(
            name, {"cpu": 4000, "memory": 16 * GI, "pods": 110}, labels=(labels or {}).get(name, {})
        )
    return table


def test_pod_claim_refs_are_read_as_kube_schedulers_resourceclaim_name() -> None:
    """``resourceClaimName``; a template entry's claim from ``status.resourceClaimStatuses``,
    unknown without one (not created yet) and None with one
    that names none (intentionally not created); neither field set."""
    pod = _pod(
        "p",
        "1",
        _named("a", "shared"),
        _templated("b"),
        _templated("c"),
        _templated("d"),
        {"name": "e"},
        resourceClaimStatuses=[
            {"name": "b", "resourceClaimName": "p-b-x1"},
            {"name": "d"},
        ],
    )
    assert pod.claim_refs == (
        PodClaimRef("a", "shared"),
        PodClaimRef("b", "p-b-x1", template=True, template_name="gpu-template"),
        PodClaimRef("c", None, template=True, listed=False, template_name="gpu-template"),
        PodClaimRef("d", None, template=True, listed=True, template_name="gpu-template"),
        PodClaimRef("e", None, listed=False),
    )
    assert pod.resource_claims == ("shared", "p-b-x1", "", "", "")  # the autoscaler's reading, as before


def test_prefilter_rejects_every_node_for_a_claim_missing_being_deleted_or_not_the_pods() -> None:
    """``foreachPodResourceClaim``'s rules and words, the first entry that fails: a claim
    that does not exist, a template's claim not created yet (a pod the API server stored:
    it has a uid), a claim being deleted, a template's claim another pod controls, an entry
    with neither field; a template entry whose status names no claim is skipped."""
    owned = _claim("p-gpu-x", owner=POD_UID)
    cases = [
        ((_named("a", "gone"),), {}, 'could not find ResourceClaim "default/gone"'),
        ((_templated("a"),), {}, 'pod "default/p": ResourceClaim not created yet'),
        ((_named("a", "old"),), {}, 'resourceclaim "old" is being deleted'),
        ((_templated("a"),), {"resourceClaimStatuses": [{"name": "a", "resourceClaimName": "other"}]},
         "ResourceClaim default/other was not created for Pod default/p (Pod is not owner)"),
        (({"name": "a"},), {},
         'pod "default/p", spec.resourceClaim "a": none of the supported fields are set'),
        # the first failing entry names the verdict
        ((_named("a", "gone"), _named("b", "old")), {}, 'could not find ResourceClaim "default/gone"'),
    ]  # fmt: skip
    claims = _by_key(owned, _claim("old", deleting=True), _claim("other", owner="someone-else"))
    for refs, status, why in cases:
        verdict = claims_verdict(_pod("p", "1", *refs, **status), claims)
        assert verdict.rejected == why, refs
    # the pod's own claim from its template, and a template entry intentionally not created
    ok = _pod("p", "1", _templated("a"), _templated("b"), resourceClaimStatuses=[
        {"name": "a", "resourceClaimName": "p-gpu-x"}, {"name": "b"}])  # fmt: skip
    assert claims_verdict(ok, claims) == ClaimsVerdict(None, (("p-gpu-x", None),), (), ("p-gpu-x",))
    # the same status on a pod file without a uid: the claim is not the pod's
    stripped = _pod(
        "p",
        "1",
        _templated("a"),
        uid="",
        resourceClaimStatuses=[{"name": "a", "resourceClaimName": "p-gpu-x"}],
    )
    assert claims_verdict(stripped, claims).rejected == (
        "ResourceClaim default/p-gpu-x was not created for Pod default/p (Pod is not owner)"
    )
    # a pod file without a uid nor status: the template's claim is made when it is created
    new = claims_verdict(_pod("p", "1", _templated("gpu"), uid=""), claims)
    assert new == ClaimsVerdict(None, (), ("gpu (from its template, made when the pod is created)",))


def test_a_claim_reserved_for_256_consumers_is_no_rejection_in_v1_37() -> None:
    """``ResourceClaimReservedForMaxSize`` (256): kube-scheduler v1.37.2's
    ``resourceclaim.CanBeReserved`` is always true, so a claim whose ``reservedFor`` is full
    and names another pod is not "in use" to its PreFilter; judged by its node selector."""
    full = _claim("full", _on_node("a"), reserved=256)
    verdict = claims_verdict(_pod("p", "1", _named("x", "full")), _by_key(full))
    assert verdict.rejected is None and [name for name, _ in verdict.allocated] == ["full"]


def test_an_allocated_claims_node_selector_removes_the_nodes_it_does_not_match() -> None:
    """Filter: each allocated claim's node selector must match the node (terms ORed, by
    labels and ``metadata.name``); an allocation without one allows every node; claims not
    allocated are listed as not judged and allow every node; a pod without claims passes.
    A selector kube-scheduler cannot parse fails its PreFilter: every node rejected."""
    table = _table("a", "b", "c", labels={"b": {"zone": "z2"}, "c": {"zone": "z2"}})
    idx = table.active_indices()
    zone = {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z2"]}]}]
    }
    either = {"nodeSelectorTerms": [*_on_node("a")["nodeSelectorTerms"], *_on_node("c")["nodeSelectorTerms"]]}
    bad = {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.uid", "operator": "In", "values": ["x"]}]}]
    }
    claims = _by_key(
        _claim("on-b", _on_node("b")),
        _claim("zone", zone),
        _claim("either", either),
        _claim("anywhere"),
        _claim("pending", allocated=False),
        _claim("bad", bad),
    )
    plugin = DynamicResourcesFilter(claims)

    def passing(*claim_names: str) -> list[str]:
        pod = _pod("p", "1", *(_named(f"r{k}", n) for k, n in enumerate(claim_names)))
        return table.node_names(idx[plugin.filter(pod, table, idx, SchedulingContext())])

    assert passing() == ["a", "b", "c"]
    assert passing("on-b") == ["b"]
    assert passing("zone") == ["b", "c"]
    assert passing("either") == ["a", "c"]
    assert passing("zone", "either") == ["c"]
    assert passing("on-b", "either") == []  # allocated on two different nodes: nowhere
    assert passing("anywhere", "pending") == ["a", "b", "c"]
    assert passing("bad") == []
    verdict = plugin.verdict(_pod("p", "1", _named("x", "pending"), _named("y", "on-b")))
    unallocated = [n for n, _ in verdict.unallocated]
    assert (unallocated, [n for n, _ in verdict.allocated]) == (["pending"], ["on-b"])
    assert plugin.verdict(_pod("p", "1", _named("x", "bad"))).rejected == (
        "ResourceClaim default/bad: status.allocation.nodeSelector.nodeSelectorTerms[0] cannot be parsed"
    )


def test_explain_names_dynamic_resources_where_kube_scheduler_runs_it() -> None:
    """DynamicResources runs right after InterPodAffinity (``applyDynamicResources``): a node
    both it and NodeResourcesFit reject is NodeResourcesFit's; one only its node selector
    rejects is DynamicResources'. Its PreFilter rejection (a missing claim) comes before any
    Filter: every node is DynamicResources', even one out of room, and also with pods
    nominated there (it reads no other pod: its verdict is the same in both passes)."""
    order = list(KUBE_FILTER_ORDER)
    assert order.index("DynamicResources") == order.index("InterPodAffinity") + 1 == len(order) - 1
    table = _table("a", "b", "c")
    table.add_pod(table.index["c"], _pod("filler", "3500m"))  # c: no room for 1 core
    claims = _by_key(_claim("on-a", _on_node("a")), _claim("on-c", _on_node("c")))
    default = load_builtin("default").profiles[0]
    profile = Profile(default.name, [*default.filters, DynamicResourcesFilter(claims)], default.scorers)
    ctx = SchedulingContext()

    def verdicts(pod: Pod, nominated: dict[str, list[Pod]] | None = None) -> dict[str, str | None]:
        return {
            v.node: v.filtered_by for v in explain_placement(profile, pod, table, ctx, nominated).verdicts
        }

    assert verdicts(_pod("p", "1", _named("x", "on-a"))) == {
        "a": None,
        "b": "DynamicResources",
        "c": "NodeResourcesFit",
    }
    assert verdicts(_pod("p", "1", _named("x", "on-c"))) == {
        "a": "DynamicResources",
        "b": "DynamicResources",
        "c": "NodeResourcesFit",
    }
    missing = _pod("p", "1", _named("x", "gone"))
    assert verdicts(missing) == dict.fromkeys("abc", "DynamicResources")
    waiting = [_pod("waiting", "3500m")]
    explanation = explain_placement(profile, missing, table, ctx, {"a": waiting})
    assert explanation.best == [] and all(
        (v.filtered_by, v.with_nominated) == ("DynamicResources", False) for v in explanation.verdicts
    )
    # a waiting pod that fills a: named by NodeResourcesFit, which runs before DynamicResources
    assert verdicts(_pod("p", "1", _named("x", "on-a")), {"a": waiting})["a"] == "NodeResourcesFit"
    # without the filter (no --dra), claims are not judged: as before
    plain = explain_placement(default, missing, table, ctx)
    assert sorted(plain.best) == ["a", "b"]


def test_the_claims_slimmer_keeps_what_the_prefilter_reads() -> None:
    """The informers' and the snapshot's ResourceClaims keep ``deletionTimestamp`` and the
    controller's uid (an owner that is not the controller dropped), beside the allocation
    with its node selector."""
    from stickypack.kube.dra import slim_resource_claim

    raw = _claim("c", _on_node("a"), owner=POD_UID, deleting=True)
    raw["metadata"]["ownerReferences"].insert(0, {"kind": "Other", "name": "o", "uid": "not-it"})
    raw["metadata"]["labels"] = {"dropped": "yes"}
    slim = slim_resource_claim(raw)
    assert slim["metadata"]["ownerReferences"] == [{"uid": POD_UID, "controller": True}]
    assert (
        slim["metadata"]["deletionTimestamp"] == "2026-01-01T00:00:00Z" and "labels" not in slim["metadata"]
    )
    assert slim["status"]["allocation"]["nodeSelector"] == _on_node("a")
    claims = _by_key(slim)
    pod = _pod("p", "1", _templated("g"), resourceClaimStatuses=[{"name": "g", "resourceClaimName": "c"}])
    assert claims_verdict(pod, claims).rejected == 'resourceclaim "c" is being deleted'
    del slim["metadata"]["deletionTimestamp"]
    assert claims_verdict(pod, claims).rejected is None


def test_the_placement_says_why_every_node_is_rejected_and_which_claims_are_not_judged() -> None:
    from stickypack.cli.inspect import _print_dynamic_resources

    def printed(judged: dict[str, Any] | None) -> str:
        console = Console(record=True, width=300)
        _print_dynamic_resources(console, judged)
        return console.export_text()

    assert printed(None) == ""
    unlisted = printed({"device_classes_read": False, "rejected": None, "allocated": [], "not_judged": []})
    assert unlisted.startswith("DeviceClasses could not be listed (no `list` right on deviceclasses)")
    assert printed({"rejected": None, "allocated": ["a"], "not_judged": []}) == ""
    text = printed(
        {"rejected": 'could not find ResourceClaim "default/[x]"', "allocated": [], "not_judged": []}
    )
    assert text == 'DynamicResources rejects every node: could not find ResourceClaim "default/[x]"\n'
    text = printed({"rejected": None, "allocated": ["c"], "not_judged": [], "deallocates": ["c", "d"]})
    assert text.startswith(
        "no node passes: kube-scheduler's DynamicResources PostFilter then deallocates one of c, d"
    )
    text = printed({"rejected": None, "allocated": [], "not_judged": ["gpu", "[red]y"]})
    assert "not judged" in text and text.rstrip().endswith("gpu; [red]y")
    text = printed(
        {
            "rejected": None,
            "allocated": [],
            "not_judged": [],
            "cannot_allocate": {"a": "cannot allocate all claims"},
            "scheduler_error": 'running "DynamicResources" filter plugin: claim x: [bad]',
        }
    )
    assert "scheduling attempt fails (SchedulerError" in text and "claim x: [bad]" in text
    assert "cannot allocate the pod's claims on 1 node(s) (a): cannot allocate all claims" in text
    many = {
        "rejected": None,
        "allocated": [],
        "not_judged": [],
        "problems": ["ResourceSlice s: spec is not an object"],
    }
    many["cannot_allocate"] = {f"n{k}": "cannot allocate all claims" for k in range(7)}
    text = printed(many)
    assert "on 7 node(s) (n0, n1, n2, n3, n4 and 2 more)" in text
    assert "DRA object not read: ResourceSlice s: spec is not an object" in text


def test_without_the_claims_listed_the_placement_says_they_are_not_judged() -> None:
    """``dra_read`` false with ``--pod``: the line says the nodes are weighed without DRA and
    the pod's claims are not judged; the node report's line says the first only."""
    from stickypack.cli.inspect import _print_dra_unread

    def printed(placing: bool) -> str:
        console = Console(record=True, width=400)
        _print_dra_unread(console, {"dra_read": False}, placing)
        return console.export_text()

    assert (
        printed(True)
        .rstrip()
        .endswith("nodes are weighed without DRA, and the pod's claims are not judged (DynamicResources)")
    )
    assert printed(False).rstrip().endswith("nodes are weighed without DRA")


def _unallocated(name: str, *requests: dict[str, Any]) -> dict[str, Any]:
    claim = _claim(name, allocated=False)
    claim["spec"] = {"devices": {"requests": list(requests)}}
    return claim


def test_a_claim_not_allocated_asking_for_a_device_class_that_does_not_exist_rejects_every_node() -> None:
    """PreFilter on a claim not allocated yet (``validateDeviceClass``): each request's
    class (``exactly``, or each ``firstAvailable`` subrequest's, named ``request/sub``) must
    exist; a request naming none is an unsupported type, one of neither kind an unknown
    type. With the classes not known (not listed), not checked: the claim is not judged."""
    gpu = {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}
    missing = {"name": "big", "exactly": {"deviceClassName": "huge.example.com"}}
    alternatives = {
        "name": "any",
        "firstAvailable": [
            {"name": "fast", "deviceClassName": "gpu.example.com"},
            {"name": "slow", "deviceClassName": "old.example.com"},
        ],
    }
    claims = _by_key(
        _unallocated("ok", gpu),
        _unallocated("missing", gpu, missing),
        _unallocated("alternatives", alternatives),
        _unallocated("unsupported", {"name": "r", "exactly": {"deviceClassName": ""}}),
        _unallocated("unknown", {"name": "r"}),
    )
    classes = {"gpu.example.com"}
    expected = {
        "ok": None,
        "missing": "request big: device class huge.example.com does not exist",
        "alternatives": "request any/slow: device class old.example.com does not exist",
        "unsupported": "request r: unsupported request type",
        "unknown": "resource claim default/unknown, request r: unknown request type",
    }
    for name, why in expected.items():
        pod = _pod("p", "1", _named("x", name))
        assert claims_verdict(pod, claims, classes).rejected == why, name
        assert claims_verdict(pod, claims).rejected is None, name  # classes not known
        assert [n for n, _ in claims_verdict(pod, claims).unallocated] == [name]
    # claim by claim: an allocated claim earlier is judged first, and a later missing claim
    # (an existence check, made for every claim first) wins over a class
    claims.update(
        _by_key(_claim("bad", {"nodeSelectorTerms": [{"matchFields": [{"key": "x", "operator": "In"}]}]}))
    )
    pod = _pod("p", "1", _named("x", "bad"), _named("y", "missing"))
    assert "nodeSelectorTerms[0] cannot be parsed" in str(claims_verdict(pod, claims, classes).rejected)
    pod = _pod("p", "1", _named("x", "missing"), _named("y", "gone"))
    assert claims_verdict(pod, claims, classes).rejected == 'could not find ResourceClaim "default/gone"'


def test_the_claims_slimmer_keeps_the_requests_device_classes_only() -> None:
    from stickypack.kube.dra import slim_resource_claim

    raw = _unallocated(
        "c",
        {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com", "count": 2, "selectors": ["cel"]}},
        {"name": "any", "firstAvailable": [{"name": "a", "deviceClassName": "x", "selectors": ["cel"]}]},
    )
    slim = slim_resource_claim(raw)
    assert slim["spec"] == {
        "devices": {
            "requests": [
                {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}},
                {"name": "any", "firstAvailable": [{"name": "a", "deviceClassName": "x"}]},
            ]
        }
    }
    pod = _pod("p", "1", _named("x", "c"))
    assert claims_verdict(pod, _by_key(slim), {"gpu.example.com"}).rejected == (
        "request any/a: device class x does not exist"
    )


def test_when_no_node_passes_the_postfilter_deallocates_a_claim_no_other_pod_uses() -> None:
    """kube-scheduler's DynamicResources PostFilter (no node passed): an allocated claim
    whose node selector a node it filtered did not match, reserved for no pod or for this
    one alone, is deallocated, so its next attempt allocates it afresh. Not one another pod
    uses, not when a node passes, not when no node reached DynamicResources (every node out
    of room: its Filter never ran)."""
    from stickypack.cli.inspect import _deallocated_claims

    other = {"resource": "pods", "name": "o", "uid": "other-uid"}
    mine = {"resource": "pods", "name": "p", "uid": POD_UID}
    claims = _by_key(
        _claim("elsewhere", _on_node("gone")),
        _claim("mine-only", _on_node("gone")),
        _claim("shared", _on_node("gone")),
        _claim("on-a", _on_node("a")),
    )
    claims[("default", "mine-only")]["status"]["reservedFor"] = [mine]
    claims[("default", "shared")]["status"]["reservedFor"] = [mine, other]
    plugin = DynamicResourcesFilter(claims)
    default = load_builtin("default").profiles[0]
    profile = Profile(default.name, [*default.filters, plugin], default.scorers)
    table = _table("a", "b")
    ctx = SchedulingContext()

    def deallocates(cpu: str, *names: str) -> list[str]:
        pod = _pod("p", cpu, *(_named(f"r{k}", n) for k, n in enumerate(names)))
        return _deallocated_claims(plugin, pod, table, explain_placement(profile, pod, table, ctx))

    assert plugin.verdict(_pod("p", "1", _named("x", "mine-only"), _named("y", "shared"))).unshared == (
        "mine-only",
    )
    assert deallocates("1", "elsewhere", "mine-only", "shared") == ["elsewhere", "mine-only"]
    assert deallocates("1", "shared") == []
    assert deallocates("1", "on-a") == []  # a passes
    # on-a is unavailable on b, elsewhere on both: kube-scheduler picks one of them at random
    assert deallocates("1", "on-a", "elsewhere") == ["on-a", "elsewhere"]
    assert deallocates("8", "elsewhere") == []  # no node has room: DynamicResources never ran


def test_a_claim_not_shaped_as_served_is_a_clear_rejection_never_a_traceback() -> None:
    """An allocation, a node selector or a requirement that is not what the API serves is
    named (what and where) as the reason every node is rejected; a ``reservedFor`` that is
    not a list counts no user."""
    pod = _pod("p", "1", _named("x", "c"))
    for allocation, why in [
        (7, "ResourceClaim default/c: status.allocation is not an object"),
        ({"nodeSelector": 5}, "ResourceClaim default/c: status.allocation.nodeSelector is not an object"),
        (
            {"nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [{"operator": "In"}]}]}},
            "ResourceClaim default/c: status.allocation.nodeSelector.nodeSelectorTerms[0]: "
            "a requirement has no 'key'",
        ),
    ]:
        claim = _claim("c")
        claim["status"]["allocation"] = allocation
        assert claims_verdict(pod, _by_key(claim)).rejected == why
    claim = _claim("c")
    claim["status"]["reservedFor"] = {"not": "a list"}
    assert claims_verdict(pod, _by_key(claim)).unshared == ("c",)


def _bound_by_conditions(
    name: str, conditions: list[dict[str, str]] | None, allocated_at: str = "2026-01-01T00:00:00Z"
) -> dict[str, Any]:
    """A claim allocated on ``a`` whose device waits for binding condition ``Attached``
    (failure condition ``Failed``), its device status holding ``conditions`` (None: no
    device status yet)."""
    claim = _claim(name, _on_node("a"))
    allocation = claim["status"]["allocation"]
    allocation["allocationTimestamp"] = allocated_at
    result = allocation["devices"]["results"][0]
    result |= {"bindingConditions": ["Attached"], "bindingFailureConditions": ["Failed"]}
    if conditions is not None:
        device = {k: result[k] for k in ("driver", "pool", "device")}
        claim["status"]["devices"] = [{**device, "conditions": conditions}]
    return claim


def test_an_allocated_claim_whose_devices_binding_failed_or_timed_out_is_unavailable_everywhere() -> None:
    """DRADeviceBindingConditions (beta, on by default): a device's binding failure
    condition true makes its claim unavailable on every node (``isClaimReadyForBinding``'s
    error, in its words); binding conditions not all true 600 s (the default
    ``bindingTimeout``) after the allocation too (``isClaimTimeout``), not before, and not
    once they are true. Without the time (``now`` None) a timeout is not judged."""
    start = 1767225600.0  # 2026-01-01T00:00:00Z
    failed = {"type": "Failed", "status": "True", "reason": "NoFabric", "message": "switch down"}
    waiting = {"type": "Attached", "status": "False", "reason": "", "message": ""}
    attached = {"type": "Attached", "status": "True", "reason": "", "message": ""}
    claims = _by_key(
        _bound_by_conditions("failed", [waiting, failed]),
        _bound_by_conditions("waiting", [waiting]),
        _bound_by_conditions("no-status", None),
        _bound_by_conditions("attached", [attached]),
    )
    table = _table("a", "b")
    idx = table.active_indices()

    def judged(name: str, now: float | None) -> tuple[tuple[tuple[str, str], ...], list[str]]:
        plugin = DynamicResourcesFilter(claims, now=now)
        pod = _pod("p", "1", _named("x", name))
        return plugin.verdict(pod).unbindable, table.node_names(idx[plugin.filter(pod, table, idx, ctx)])

    ctx = SchedulingContext()
    why = 'device binding failed: claim=failed, reason=NoFabric, message="switch down"'
    assert judged("failed", start + 1) == ((("failed", why),), [])
    assert judged("failed", None) == ((("failed", why),), [])
    for name in ("waiting", "no-status"):
        assert judged(name, start + 599) == ((), ["a"]), name
        assert judged(name, None) == ((), ["a"]), name
        late = f"binding timed out: claim={name}, allocated 601 s ago"
        assert judged(name, start + 601) == (((name, late),), []), name
    assert judged("attached", start + 10_000) == ((), ["a"])
    # unavailable everywhere: the PostFilter may deallocate it when no node passes
    verdict = DynamicResourcesFilter(claims, now=start + 1).verdict(_pod("p", "1", _named("x", "failed")))
    assert verdict.unavailable_on({}, "a") == ["failed"]


def test_a_node_selector_term_or_binding_field_not_shaped_as_served_is_named_never_a_traceback() -> None:
    """A term's ``matchExpressions`` or ``matchFields`` that is not a list of objects, and a
    result's ``bindingConditions`` or ``bindingFailureConditions`` that is not a list (a
    string would be read letter by letter), are named (what and where) as the reason every
    node is rejected, by ``claims_verdict`` and by the filter alike."""
    where = "ResourceClaim default/c: status.allocation.nodeSelector.nodeSelectorTerms[0]"
    term_cases: list[tuple[dict[str, Any], str]] = [
        ({"matchExpressions": "zone=a"}, f"{where}.matchExpressions is not a list"),
        ({"matchExpressions": [5]}, f"{where}.matchExpressions[0] is not an object"),
        ({"matchFields": {"key": "metadata.name"}}, f"{where}.matchFields is not a list"),
        ({"matchFields": ["metadata.name"]}, f"{where}.matchFields[0] is not an object"),
    ]
    results = "ResourceClaim default/c: status.allocation.devices.results[0]"
    binding_cases: list[tuple[dict[str, Any], str]] = [
        ({"bindingConditions": "Attached"}, f"{results}.bindingConditions is not a list"),
        (
            {"bindingConditions": ["Attached"], "bindingFailureConditions": "Failed"},
            f"{results}.bindingFailureConditions is not a list",
        ),
    ]
    table = _table("a")
    idx = table.active_indices()
    pod = _pod("p", "1", _named("x", "c"))
    claims = []
    for term, why in term_cases:
        claim = _claim("c", {"nodeSelectorTerms": [term]})
        claims.append((claim, why))
    for fields, why in binding_cases:
        claim = _bound_by_conditions("c", [{"type": "Failed", "status": "True"}])
        claim["status"]["allocation"]["devices"]["results"][0] |= fields
        claims.append((claim, why))
    for claim, why in claims:
        plugin = DynamicResourcesFilter(_by_key(claim), now=1767225600.0)
        assert plugin.verdict(pod).rejected == why
        assert not plugin.filter(pod, table, idx, SchedulingContext()).any()


def test_a_device_class_name_not_shaped_as_served_is_named_never_a_traceback() -> None:
    """A request's or subrequest's ``deviceClassName`` that is not a string (a list, an
    object: unhashable, so no lookup among the DeviceClasses) is named (what and where) as
    the reason every node is rejected, never a traceback."""
    where = "ResourceClaim default/c: spec.devices.requests[0]"
    for request, why in [
        ({"name": "r", "exactly": {"deviceClassName": ["gpu"]}}, f"{where}.exactly.deviceClassName"),
        (
            {"name": "r", "firstAvailable": [{"name": "s", "deviceClassName": {"gpu": 1}}]},
            f"{where}.firstAvailable[0].deviceClassName",
        ),
    ]:
        claim = _unallocated("c", request)
        verdict = claims_verdict(_pod("p", "1", _named("x", "c")), _by_key(claim), frozenset({"gpu"}))
        assert verdict.rejected is not None and verdict.rejected.startswith(why), verdict.rejected
        assert "is not a string" in verdict.rejected


def test_binding_condition_names_and_owner_references_not_shaped_as_served_are_no_traceback() -> None:
    """A binding (failure) condition that is not a string, or a device condition whose
    ``type`` is not one (unhashable: no lookup), is named with its field as the reason every
    node is rejected; ``ownerReferences`` that is not a list is read as no controller (a
    template's claim is then not the pod's), never a traceback (found by fuzzing the claim's
    fields)."""
    results = "ResourceClaim default/c: status.allocation.devices.results[0]"
    cases: list[tuple[dict[str, Any], list[dict[str, Any]], str]] = [
        ({"bindingConditions": [["Attached"]]}, [], f"{results}.bindingConditions[0] ['Attached'] is not"),
        (
            {"bindingFailureConditions": [{"k": 5}]},
            [],
            f"{results}.bindingFailureConditions[0] {{'k': 5}} is",
        ),
        (
            {},
            [{"type": ["Attached"], "status": "True"}],
            "ResourceClaim default/c: status.devices[0].conditions[0].type ['Attached'] is not a string",
        ),
    ]
    pod = _pod("p", "1", _named("x", "c"))
    for fields, conditions, why in cases:
        claim = _bound_by_conditions("c", conditions)
        claim["status"]["allocation"]["devices"]["results"][0] |= fields
        plugin = DynamicResourcesFilter(_by_key(claim), now=1767225600.0)
        rejected = plugin.verdict(pod).rejected
        assert rejected is not None and rejected.startswith(why), rejected
    owned = _claim("c", owner=POD_UID)
    owned["metadata"]["ownerReferences"] = 1.5
    templated = _pod(
        "p", "1", _templated("x"), resourceClaimStatuses=[{"name": "x", "resourceClaimName": "c"}]
    )
    assert claims_verdict(templated, _by_key(owned)).rejected == (
        "ResourceClaim default/c was not created for Pod default/p (Pod is not owner)"
    )


def test_a_claim_is_unavailable_on_a_node_only_when_every_term_of_its_node_selector_misses_it() -> None:
    """``unavailable_on`` (what the PostFilter reads): a node selector's terms are ORed, so a
    claim allocated for ``a`` or ``c`` is available on both and unavailable on ``b`` only; a
    claim without a node selector is available everywhere."""
    either = {"nodeSelectorTerms": [*_on_node("a")["nodeSelectorTerms"], *_on_node("c")["nodeSelectorTerms"]]}
    claims = _by_key(_claim("either", either), _claim("anywhere"))
    verdict = claims_verdict(_pod("p", "1", _named("x", "either"), _named("y", "anywhere")), claims)
    assert [verdict.unavailable_on({}, node) for node in "abc"] == [[], ["either"], []]


def test_a_templates_claim_is_the_pods_only_through_an_owner_reference_that_is_its_controller() -> None:
    """``metav1.GetControllerOf``: an owner reference naming the pod's uid but without
    ``controller: true`` (absent, or false) does not make the claim the pod's; with it, it does."""
    pod = _pod("p", "1", _templated("x"), resourceClaimStatuses=[{"name": "x", "resourceClaimName": "c"}])
    not_owner = "ResourceClaim default/c was not created for Pod default/p (Pod is not owner)"
    for flag in ({}, {"controller": False}, {"controller": True}):
        claim = _claim("c")
        claim["metadata"]["ownerReferences"] = [{"kind": "Pod", "name": "p", "uid": POD_UID, **flag}]
        expected = None if flag.get("controller") else not_owner
        assert claims_verdict(pod, _by_key(claim)).rejected == expected, flag


def test_a_request_with_an_empty_first_available_list_is_of_an_unknown_type() -> None:
    """PreFilter's switch: ``exactly`` set, else ``len(firstAvailable) > 0``, else "unknown
    request type": an empty ``firstAvailable`` (and no ``exactly``) is the last."""
    claim = _unallocated("c", {"name": "r", "firstAvailable": []})
    verdict = claims_verdict(_pod("p", "1", _named("x", "c")), _by_key(claim), {"gpu.example.com"})
    assert verdict.rejected == "resource claim default/c, request r: unknown request type"


def test_binding_conditions_are_read_device_by_device_and_condition_by_condition() -> None:
    """``isClaimReadyForBinding`` and ``isClaimTimeout`` on hand-made claims allocated at
    ``start`` (binding condition ``Attached``, failure condition ``Failed`` on dev-0):
    a first result without binding conditions does not end the check of the next one; the
    device status read is the result's own (driver, pool and device: another device of the
    same pool failing is not it); a condition type's first entry counts (``FindStatusCondition``);
    a failure condition that is not ``True`` is no failure; every binding condition must be
    true; the timeout is reached only strictly after 600 s (Go's ``Before``)."""
    start = 1767225600.0  # 2026-01-01T00:00:00Z
    attached = {"type": "Attached", "status": "True"}
    not_attached = {"type": "Attached", "status": "False"}
    failed = {"type": "Failed", "status": "True", "reason": "NoFabric", "message": "switch down"}
    table = _table("a", "b")
    idx = table.active_indices()

    def unbindable(claim: dict[str, Any], now: float) -> tuple[tuple[str, str], ...]:
        plugin = DynamicResourcesFilter(_by_key(claim), now=now)
        pod = _pod("p", "1", _named("x", claim["metadata"]["name"]))
        passing = table.node_names(idx[plugin.filter(pod, table, idx, SchedulingContext())])
        verdict = plugin.verdict(pod)
        assert passing == ([] if verdict.unbindable else ["a"])
        return verdict.unbindable

    why = 'device binding failed: claim=c, reason=NoFabric, message="switch down"'
    # a result with no binding conditions first: the second's failure is still found
    claim = _bound_by_conditions("c", [failed])
    plain = {"request": "cpu", "driver": "other.example.com", "pool": "p", "device": "d"}
    claim["status"]["allocation"]["devices"]["results"].insert(0, plain)
    assert unbindable(claim, start + 1) == (("c", why),)
    # dev-1 of the same driver and pool failed, listed first; dev-0 (the result's) is attached
    claim = _bound_by_conditions("c", [attached])
    dev0 = claim["status"]["devices"][0]
    claim["status"]["devices"].insert(0, {**dev0, "device": "dev-1", "conditions": [failed]})
    assert unbindable(claim, start + 10_000) == ()
    # two entries of type Attached: the first (True) counts, so no timeout
    assert unbindable(_bound_by_conditions("c", [attached, not_attached]), start + 10_000) == ()
    # its failure condition present but False: no failure, and attached: ready
    assert (
        unbindable(_bound_by_conditions("c", [attached, {**failed, "status": "False"}]), start + 10_000) == ()
    )
    # two binding conditions, one true: not ready, so timed out after 600 s
    claim = _bound_by_conditions("c", [attached])
    claim["status"]["allocation"]["devices"]["results"][0]["bindingConditions"] = ["Attached", "Powered"]
    assert unbindable(claim, start + 601) == (("c", "binding timed out: claim=c, allocated 601 s ago"),)
    # exactly 600 s after the allocation: allocationTimestamp + 600 s is not before now
    assert unbindable(_bound_by_conditions("c", [not_attached]), start + 600) == ()


def test_a_pod_file_without_uid_and_an_entry_naming_neither_claim_nor_template_is_rejected() -> None:
    """Only a template entry of a pod file without a uid is left unjudged (its claim made
    when the pod is created); an entry naming neither field is ``resourceclaim.Name``'s
    ``ErrAPIUnsupported`` whether the pod has a uid or not."""
    verdict = claims_verdict(_pod("p", "1", {"name": "a"}, uid=""), {})
    assert verdict.rejected == 'pod "default/p", spec.resourceClaim "a": none of the supported fields are set'


def test_a_claim_without_status_is_not_allocated_and_not_judged() -> None:
    """A claim just created has no ``status`` (the slimmer keeps it None): not allocated,
    so left to the allocator (``unallocated``), not named malformed."""
    claim = _unallocated("c", {"name": "r", "exactly": {"deviceClassName": "gpu.example.com"}})
    pod = _pod("p", "1", _named("x", "c"))
    for status in (None, "absent"):
        if status is None:
            claim["status"] = None
        else:
            del claim["status"]
        verdict = claims_verdict(pod, _by_key(claim), {"gpu.example.com"})
        unallocated = [n for n, _ in verdict.unallocated]
        assert (verdict.rejected, verdict.not_judged, unallocated, verdict.allocated) == (None, (), ["c"], ())


def test_a_claim_reserved_for_another_pod_alone_is_shared() -> None:
    """``unshared`` (what the PostFilter may deallocate): reservedFor empty or naming this
    pod alone; one naming another pod alone is shared, and so is any claim for a pod without uid
    reserved for someone."""
    claim = _claim("c", _on_node("gone"))
    pod = _pod("p", "1", _named("x", "c"))
    for users, expected in [
        ([], ("c",)),
        ([{"resource": "pods", "name": "p", "uid": POD_UID}], ("c",)),
        ([{"resource": "pods", "name": "o", "uid": "other-uid"}], ()),
    ]:
        claim["status"]["reservedFor"] = users
        assert claims_verdict(pod, _by_key(claim)).unshared == expected, users
    claim["status"]["reservedFor"] = [{"resource": "pods", "name": "o", "uid": "other-uid"}]
    assert claims_verdict(_pod("p", "1", _named("x", "c"), uid=""), _by_key(claim)).unshared == ()


def test_the_claims_slimmer_keeps_the_users_uids_and_the_devices_conditions() -> None:
    """The snapshot's claims keep ``status.reservedFor``'s uids (who uses the claim, for the
    PostFilter) and ``status.devices``' conditions (for binding conditions): judged on the
    slim claim as on the raw one."""
    from stickypack.kube.dra import slim_resource_claim

    failed = {"type": "Failed", "status": "True", "reason": "NoFabric", "message": "switch down",
              "lastTransitionTime": "2026-01-01T00:00:00Z"}  # fmt: skip
    raw = _bound_by_conditions("c", [failed])
    raw["status"]["reservedFor"] = [{"resource": "pods", "name": "o", "uid": "other-uid"}]
    slim = slim_resource_claim(raw)
    assert slim["status"]["reservedFor"] == [{"uid": "other-uid"}]
    assert slim["status"]["devices"] == [
        {"driver": "gpu.example.com", "pool": "pool", "device": "dev-0", "conditions": [failed]}
    ]
    pod = _pod("p", "1", _named("x", "c"))
    judged = [claims_verdict(pod, _by_key(c), now=1767225601.0) for c in (raw, slim)]
    assert judged[0] == judged[1] and judged[0].unshared == () and len(judged[0].unbindable) == 1
    mine = copy.deepcopy(raw)
    mine["status"]["reservedFor"] = [{"resource": "pods", "name": "p", "uid": POD_UID}]
    assert claims_verdict(pod, _by_key(slim_resource_claim(mine))).unshared == ("c",)


def test_the_reports_dynamic_resources_from_the_listed_claims_and_classes() -> None:
    """``inspect --pod --dra``'s ``dynamic_resources`` from a snapshot's DRA objects: the
    DeviceClasses listed are checked (a claim asking for another class rejects every node)
    and said read; not listed (None), not checked and said unread; a claim allocated 700 s
    before now (the wall clock) with its binding condition not true is unbindable, with
    why."""
    from stickypack.cli.inspect import _dynamic_resources
    from stickypack.kube.cache import ClusterCache
    from stickypack.kube.snapshot import DraObjects, Snapshot

    missing = _unallocated("wants", {"name": "r", "exactly": {"deviceClassName": "huge.example.com"}})
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 700))
    slow = _bound_by_conditions("slow", [{"type": "Attached", "status": "False"}], allocated_at=stamp)
    claims = [missing, slow]

    def report(classes: frozenset[str] | None, claim: str) -> dict[str, Any]:
        snap = Snapshot(ClusterCache(clock=lambda: 0.0), dra=DraObjects([], claims, classes))
        judged = _dynamic_resources(snap, _pod("p", "1", _named("x", claim)))
        assert judged is not None
        return judged[1]

    listed = report(frozenset({"gpu.example.com"}), "wants")
    assert (listed["device_classes_read"], listed["rejected"]) == (
        True,
        "request r: device class huge.example.com does not exist",
    )
    unlisted = report(None, "wants")
    assert (unlisted["device_classes_read"], unlisted["rejected"], unlisted["allocates"]) == (
        False,
        None,
        ["wants"],
    )
    (why,) = report(None, "slow")["unbindable"]
    assert why.startswith("binding timed out: claim=slow, allocated 7")  # 700 s, or a second more
    assert _dynamic_resources(Snapshot(ClusterCache(clock=lambda: 0.0)), _pod()) is None  # no --dra


def test_resource_claims_entries_the_api_server_refuses_are_named() -> None:
    """``inspect --pod``'s check of ``spec.resourceClaims`` (the API server's validation): an
    entry needs a name and exactly one of ``resourceClaimName`` and
    ``resourceClaimTemplateName``; each alone is fine."""
    from stickypack.cli.inspect import _resource_claims_problem

    assert _resource_claims_problem(None) is None
    assert _resource_claims_problem([_named("a", "c"), _templated("b")]) is None
    assert _resource_claims_problem([_named("a", "c"), {"resourceClaimName": "c"}]) == (
        "spec.resourceClaims[1].name: None is not a name"
    )
    assert _resource_claims_problem(
        [{"name": "a", "resourceClaimName": "c", "resourceClaimTemplateName": "t"}]
    ) == ("spec.resourceClaims[0]: resourceClaimName and resourceClaimTemplateName both set (one only)")


def test_the_placement_says_a_gated_pod_is_held_and_the_claims_not_judged_without_dra_objects() -> None:
    """``_print_placement``: the pod's scheduling gates in kube-scheduler's words (Go's
    ``%v`` of the names: space-separated in brackets); DRA objects not listed with ``--pod``:
    the pod's claims are not judged either."""
    from stickypack.cli.inspect import _print_placement

    report = {
        "pod": "default/p", "policy": "default", "profile": "default-scheduler", "weights": {},
        "best": ["a"], "nodes": [{"node": "a", "filtered_by": None, "with_nominated_pods": False,
                                  "scores": {}, "total": 0}],
        "history": "none", "unreadable_pods": [], "dra_read": False, "priority": None,
        "priority_from": "not read", "nominated_pods": {}, "namespaces_read": True,
        "volumes_read": True, "scheduling_gates": ["example.com/a", "example.com/b"],
    }  # fmt: skip
    console = Console(record=True, width=400)
    _print_placement(console, report)
    text = console.export_text()
    assert "(SchedulingGates: waiting for scheduling gates: [example.com/a example.com/b]);" in text
    assert "nodes are weighed without DRA, and the pod's claims are not judged (DynamicResources)" in text
    console = Console(record=True, width=400)
    _print_placement(console, report | {"scheduling_gates": [], "dra_read": None})
    assert "SchedulingGates" not in console.export_text() and "DRA" not in console.export_text()


def test_binding_timeout_needs_a_waiting_result_and_an_allocation_timestamp_and_takes_the_timeout_given() -> (
    None
):
    """``isClaimTimeout``: once some result has binding conditions (another result without any
    does not hide it), the timeout counts from ``allocationTimestamp``; an allocation without
    one never times out (no traceback); ``binding_timeout_s`` replaces the default 600 s."""
    start = 1767225600.0  # 2026-01-01T00:00:00Z
    waiting = [{"type": "Attached", "status": "False"}]
    pod = _pod("p", "1", _named("x", "c"))

    def unbindable(claim: dict[str, Any], now: float, timeout_s: float | None = None) -> tuple[str, ...]:
        plugin = (
            DynamicResourcesFilter(_by_key(claim), now=now)
            if timeout_s is None
            else DynamicResourcesFilter(_by_key(claim), now=now, binding_timeout_s=timeout_s)
        )
        return tuple(why for _, why in plugin.verdict(pod).unbindable)

    # a result without binding conditions listed after the waiting one: still timed out
    claim = _bound_by_conditions("c", waiting)
    plain = {"request": "cpu", "driver": "other.example.com", "pool": "p", "device": "d"}
    claim["status"]["allocation"]["devices"]["results"].append(plain)
    assert unbindable(claim, start + 601) == ("binding timed out: claim=c, allocated 601 s ago",)
    # no allocationTimestamp: not judged, however late
    claim = _bound_by_conditions("c", waiting)
    del claim["status"]["allocation"]["allocationTimestamp"]
    assert unbindable(claim, start + 10_000) == ()
    # a bindingTimeout of 60 s: timed out after 61 s, not after 59 s
    claim = _bound_by_conditions("c", waiting)
    assert unbindable(claim, start + 61, 60.0) == ("binding timed out: claim=c, allocated 61 s ago",)
    assert unbindable(claim, start + 59, 60.0) == ()


def test_explain_names_dynamic_resources_before_stickypacks_own_filters() -> None:
    """The extender's filters run after every kube-scheduler filter: a node both a
    stickypack filter (here one rejecting ``b``) and DynamicResources reject is named
    DynamicResources, though it comes after that filter in the profile (``inspect --pod``
    appends it)."""
    import numpy as np

    from stickypack.core.framework import FilterPlugin

    class NotB(FilterPlugin):
        name = "NotB"

        def filter(self, pod: Pod, table: NodeTable, idx: np.ndarray, ctx: SchedulingContext) -> np.ndarray:
            return np.array([name != "b" for name in table.node_names(idx)], dtype=bool)

    table = _table("a", "b", "c")
    plugin = DynamicResourcesFilter(_by_key(_claim("on-a", _on_node("a"))))
    default = load_builtin("default").profiles[0]
    profile = Profile(default.name, [*default.filters, NotB(), plugin], default.scorers)
    explanation = explain_placement(profile, _pod("p", "1", _named("x", "on-a")), table, SchedulingContext())
    assert {v.node: v.filtered_by for v in explanation.verdicts} == {
        "a": None,
        "b": "DynamicResources",
        "c": "DynamicResources",
    }


def test_scheduling_gates_not_a_list_are_refused_and_unbindable_claims_printed() -> None:
    """``_scheduling_gates``: no field or an empty list is no gate; a value that is not a
    list (an empty string, an object) is refused as the API server refuses it.
    ``_print_dynamic_resources`` names each unbindable claim's reason."""
    from stickypack.cli.inspect import _print_dynamic_resources, _scheduling_gates

    assert (
        _scheduling_gates({"spec": {}}) == [] and _scheduling_gates({"spec": {"schedulingGates": []}}) == []
    )
    assert _scheduling_gates({"spec": {"schedulingGates": [{"name": "g"}]}}) == ["g"]
    for odd in ("", {}):
        with pytest.raises(ValueError) as refused:
            _scheduling_gates({"spec": {"schedulingGates": odd}})
        assert str(refused.value) == f"spec.schedulingGates: {odd!r} is not a list"
    console = Console(record=True, width=300)
    why = 'device binding failed: claim=c, reason=NoFabric, message="[b]switch down"'
    _print_dynamic_resources(
        console, {"rejected": None, "allocated": ["c"], "not_judged": [], "unbindable": [why]}
    )
    assert console.export_text() == f"DynamicResources finds a claim unavailable on every node: {why}\n"


def test_a_template_entrys_claim_is_the_first_status_of_its_name_and_an_empty_name_is_none() -> None:
    """``resourceclaim.Name`` returns the first ``resourceClaimStatuses`` entry of the entry's
    name (the API server refuses duplicates, but a pod file may have them); a
    ``resourceClaimName`` that is the empty string (refused too) is read as not set, as the
    docstring of ``_claim_refs`` says: the claim intentionally not created."""
    statuses = [{"name": "b", "resourceClaimName": "p-b-1"}, {"name": "b", "resourceClaimName": "p-b-2"}]
    twice = _pod("p", "1", _templated("b"), resourceClaimStatuses=statuses)
    assert twice.claim_refs == (PodClaimRef("b", "p-b-1", template=True, template_name="gpu-template"),)
    empty = _pod("p", "1", _templated("b"), resourceClaimStatuses=[{"name": "b", "resourceClaimName": ""}])
    assert empty.claim_refs == (
        PodClaimRef("b", None, template=True, listed=True, template_name="gpu-template"),
    )
    assert claims_verdict(empty, {}) == ClaimsVerdict()  # nothing to check


def test_the_postfilter_deallocates_only_a_claim_unavailable_on_some_node_it_filtered() -> None:
    """The claims unavailable are judged node by node (labels and name): a claim allocated
    for ``a`` or ``b`` by ``metadata.name`` is available on both filtered nodes, so only the
    claim allocated on a node that is gone is one the PostFilter deallocates."""
    from stickypack.cli.inspect import _deallocated_claims

    either = {"nodeSelectorTerms": [*_on_node("a")["nodeSelectorTerms"], *_on_node("b")["nodeSelectorTerms"]]}
    plugin = DynamicResourcesFilter(_by_key(_claim("either", either), _claim("elsewhere", _on_node("gone"))))
    default = load_builtin("default").profiles[0]
    profile = Profile(default.name, [*default.filters, plugin], default.scorers)
    table = _table("a", "b")
    pod = _pod("p", "1", _named("x", "either"), _named("y", "elsewhere"))
    explanation = explain_placement(profile, pod, table, SchedulingContext())
    assert explanation.best == []
    assert _deallocated_claims(plugin, pod, table, explanation) == ["elsewhere"]


def test_a_pod_files_template_entry_is_judged_as_the_claim_made_from_its_template() -> None:
    """With the templates listed, a pod file's template entry (no uid, no status) is the
    claim the controller will make: not allocated (left to the allocator), its DeviceClass
    checked; a template that does not exist means the claim is never made: every node
    rejected. Without them, not judged, as before."""
    pod = _pod("p", "1", _templated("gpu"), uid="")
    request = {"name": "r", "exactly": {"deviceClassName": "gpu.example.com"}}
    template = {
        "metadata": {"name": "gpu-template", "namespace": "default"},
        "spec": {"spec": {"devices": {"requests": [request]}}},
    }
    templates = {("default", "gpu-template"): template}
    verdict = claims_verdict(pod, {}, {"gpu.example.com"}, templates=templates)
    assert verdict.rejected is None and verdict.not_judged == ()
    ((name, claim),) = verdict.unallocated
    assert name == "gpu (from ResourceClaimTemplate gpu-template)"
    assert claim == {
        "metadata": {"name": "p-gpu", "namespace": "default"},
        "spec": {"devices": {"requests": [request]}},
    }
    assert claims_verdict(pod, {}, {"other.example.com"}, templates=templates).rejected == (
        "request r: device class gpu.example.com does not exist"
    )
    assert claims_verdict(pod, {}, {"gpu.example.com"}, templates={}).rejected == (
        'pod "default/p": ResourceClaim not created yet '
        "(ResourceClaimTemplate default/gpu-template does not exist)"
    )
    assert claims_verdict(pod, {}, {"gpu.example.com"}).not_judged == (
        "gpu (from its template, made when the pod is created)",
    )


def test_a_cel_error_fails_the_attempt_only_where_dynamic_resources_runs() -> None:
    """kube-scheduler runs a node's filters in order and stops at the first that rejects
    it: a CEL error on a node NodeResourcesFit already rejects is never met, so the
    attempt goes on (``scheduler_error`` null, the other node best); met on a node that
    reaches DynamicResources, it fails the attempt: no node is best. What the allocator does
    not model is said per reason, the nodes named (five, then a count)."""
    from stickypack.cli.inspect import _allocation_outcomes
    from stickypack.core.draalloc import DraAllocator
    from stickypack.dracel import compile_selector

    def device(name: str, **attributes: str) -> dict[str, Any]:
        return {"name": name, "attributes": {k: {"string": v} for k, v in attributes.items()}}

    def pool(node: str, *devices: dict[str, Any]) -> dict[str, Any]:
        spec = {"driver": "gpu.example.com", "nodeName": node, "devices": list(devices),
                "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}}  # fmt: skip
        return {"metadata": {"name": node}, "spec": spec}

    classes = {"gpu": {"metadata": {"name": "gpu"}, "spec": {}}}
    selector = {"cel": {"expression": 'device.attributes["gpu.example.com"].model == "a100"'}}
    wants = _unallocated(
        "wants", {"name": "r", "exactly": {"deviceClassName": "gpu", "selectors": [selector]}}
    )
    default = load_builtin("default").profiles[0]
    pod = _pod("p", "1", _named("x", "wants"))

    def judge(table: NodeTable, slices: list[dict[str, Any]]) -> tuple[list[str], dict[str, Any]]:
        allocator = DraAllocator(slices, [wants], classes, compile_selector)
        plugin = DynamicResourcesFilter(_by_key(wants), set(classes), allocator=allocator)
        profile = Profile(default.name, [*default.filters, plugin], default.scorers)
        explanation = explain_placement(profile, pod, table, SchedulingContext())
        judged: dict[str, Any] = {"not_judged": [], "cannot_allocate": {}, "scheduler_error": None}
        return _allocation_outcomes(plugin, judged, explanation).best, judged

    table = _table("a", "b")
    table.add_pod(table.index["a"], _pod("filler", "3500m"))  # a: no room for 1 core
    slices = [pool("a", device("d0")), pool("b", device("d0", model="a100"))]
    best, judged = judge(table, slices)
    assert (best, judged["scheduler_error"], judged["cannot_allocate"]) == (["b"], None, {})
    table = _table("a", "b")
    best, judged = judge(table, slices)
    assert best == [] and judged["scheduler_error"].startswith(
        'running "DynamicResources" filter plugin: claim default/wants: selector #0 on device '
        "gpu.example.com/a/d0: CEL runtime error: no such key: model"
    )
    assert judged["cannot_allocate"] == {"a": judged["scheduler_error"].removeprefix(
        'running "DynamicResources" filter plugin: '
    )}  # fmt: skip
    for count, more in ((7, " and 2 more"), (5, "")):
        many = _table(*(f"n{k}" for k in range(count)))
        multiple = [pool(f"n{k}", {**device("d0"), "allowMultipleAllocations": True}) for k in range(count)]
        unselective = _unallocated("wants", {"name": "r", "exactly": {"deviceClassName": "gpu"}})
        allocator = DraAllocator(multiple, [unselective], classes, compile_selector)
        plugin = DynamicResourcesFilter(_by_key(unselective), set(classes), allocator=allocator)
        profile = Profile(default.name, [*default.filters, plugin], default.scorers)
        explanation = explain_placement(profile, pod, many, SchedulingContext())
        judged = {"not_judged": [], "cannot_allocate": {}, "scheduler_error": None}
        best = _allocation_outcomes(plugin, judged, explanation).best
        assert sorted(best) == [f"n{k}" for k in range(count)]
        (note,) = judged["not_judged"]
        assert note == (
            "claim default/wants: a device allowing multiple allocations (consumable capacity) "
            f"(on n0, n1, n2, n3, n4{more}: passes there)"
        )
