"""kube-scheduler's DRA allocator (``core.draalloc``) and the CEL selectors it runs
(``stickypack.dracel``): pure, on the API's dicts."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np
import pytest

from stickypack.core.dra import DynamicResourcesFilter
from stickypack.core.draalloc import (
    DeviceView,
    DraAllocator,
    NodeAllocation,
    SelectorError,
    SelectorNotModelled,
    read_claim,
)
from stickypack.core.framework import SchedulingContext
from stickypack.core.nodetable import NodeTable
from stickypack.core.pod import Pod
from stickypack.dracel import compile_selector
from stickypack.testing import pod_manifest

DRIVER = "gpu.example.com"


def _device(name: str, **attributes: Any) -> dict[str, Any]:
    """A device with attributes given as ``model="a100"``, ``cores=8``, ``fast=True`` or
    ``version=("version", "1.2.3")``."""
    attrs: dict[str, Any] = {}
    for key, value in attributes.items():
        if isinstance(value, tuple):
            attrs[key] = {value[0]: value[1]}
        elif isinstance(value, bool):
            attrs[key] = {"bool": value}
        elif isinstance(value, int):
            attrs[key] = {"int": value}
        else:
            attrs[key] = {"string": value}
    return {"name": name, "attributes": attrs, "capacity": {"memory": {"value": "40Gi"}}}


def _slice(
    node: str | None, *devices: dict[str, Any], pool: str | None = None, **spec: Any
) -> dict[str, Any]:
    pool_name = pool or node or "shared"
    body: dict[str, Any] = {
        "driver": DRIVER,
        "pool": {
            "name": pool_name,
            "generation": spec.pop("generation", 1),
            "resourceSliceCount": spec.pop("count", 1),
        },
        "devices": list(devices),
        **spec,
    }
    if node is not None:
        body["nodeName"] = node
    return {"metadata": {"name": spec.get("name", f"{pool_name}-{node}")}, "spec": body}


CLASSES = {
    "gpu": {
        "metadata": {"name": "gpu"},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
    }
}


def _request(name: str = "r", count: int = 1, *selectors: str, **extra: Any) -> dict[str, Any]:
    exactly = {"deviceClassName": "gpu", "count": count, **extra}
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    return {"name": name, "exactly": exactly}


def _claim(name: str, *requests: dict[str, Any], constraints: list[Any] | None = None) -> dict[str, Any]:
    devices: dict[str, Any] = {"requests": list(requests)}
    if constraints:
        devices["constraints"] = constraints
    return {"metadata": {"name": name, "namespace": "default"}, "spec": {"devices": devices}}


def _held(name: str, node: str, *devices: str, admin: bool = False) -> dict[str, Any]:
    results = [
        {"request": "r", "driver": DRIVER, "pool": node, "device": d, "adminAccess": admin} for d in devices
    ]
    claim = _claim(name, _request())
    claim["status"] = {"allocation": {"devices": {"results": results}}}
    return claim


def _fits(
    slices: list[dict[str, Any]],
    *claims: dict[str, Any],
    node: str = "a",
    held: list[Any] = (),
    labels: dict[str, str] | None = None,
) -> Any:
    allocator = DraAllocator(slices, list(held), CLASSES, compile_selector)
    read = [read_claim(f"default/{c['metadata']['name']}", c) for c in claims]
    return allocator.allocate(node, labels or {}, read)


def _view(**attributes: Any) -> DeviceView:
    device = _device("d", **attributes)
    return DeviceView(DRIVER, device["attributes"], {"memory": Fraction(40 * 2**30)})


def _cel(expression: str, view: DeviceView | None = None) -> bool:
    return compile_selector(expression).matches(
        view or _view(model="a100", cores=8, fast=True, fw=("version", "1.4.2"))
    )


# ---- CEL -------------------------------------------------------------------------------------


def test_cel_reads_attributes_of_each_type_with_or_without_their_domain() -> None:
    assert _cel(f'device.attributes["{DRIVER}"].model == "a100"')
    assert _cel(f'device.attributes["{DRIVER}"].cores > 4 && device.attributes["{DRIVER}"].fast')
    assert not _cel(f'device.attributes["{DRIVER}"].cores == "8"')  # heterogeneous: not equal, no error
    assert _cel(f'device.attributes["{DRIVER}"].model.startsWith("a") && device.driver == "{DRIVER}"')
    assert _cel(f'"model" in device.attributes["{DRIVER}"] && !has(device.attributes["{DRIVER}"].gone)')
    other = DeviceView(DRIVER, {"other.example.com/zone": {"string": "z1"}}, {})
    assert _cel('device.attributes["other.example.com"].zone == "z1"', other)
    assert not _cel('has(device.attributes["nothing.example.com"].zone)')  # a missing domain: empty


def test_cel_capacity_is_a_quantity_and_versions_are_semver() -> None:
    memory = f'device.capacity["{DRIVER}"].memory'
    assert _cel(f'{memory}.isGreaterThan(quantity("10Gi")) && {memory}.compareTo(quantity("40Gi")) == 0')
    assert not _cel(f'{memory}.isLessThan(quantity("1Gi"))')
    assert _cel(f"{memory}.isInteger() && {memory}.asInteger() == 42949672960 && {memory}.sign() == 1")
    assert _cel(f'{memory} == quantity("40960Mi") && isQuantity("1.5") && !isQuantity("x")')
    version = f'device.attributes["{DRIVER}"].fw'
    assert _cel(f'{version}.isGreaterThan(semver("1.4.0")) && {version}.isLessThan(semver("1.10.0"))')
    assert _cel(f"{version}.major() == 1 && {version}.minor() == 4 && {version}.patch() == 2")
    assert _cel('semver("1.0.0-alpha").isLessThan(semver("1.0.0")) && isSemver("2.0.0") && !isSemver("v2")')
    assert _cel('semver("1.0.0-alpha.1").isLessThan(semver("1.0.0-alpha.beta"))')


def test_cel_errors_a_missing_attribute_and_a_result_not_bool_as_upstream_words_them() -> None:
    with pytest.raises(
        SelectorError, match=r"^no such key: gone\. consider using CEL optional chaining"
    ) as err:
        _cel(f'device.attributes["{DRIVER}"].gone == "x"')
    assert not err.value.compile_error
    with pytest.raises(SelectorError, match="no such key: zone"):
        _cel('device.attributes["nothing.example.com"].zone == "x"')
    with pytest.raises(SelectorError, match="could not be converted to bool"):
        _cel(f'device.attributes["{DRIVER}"].model')
    # an error one side of || or && absorbed, as CEL's commutative logic does
    assert _cel(f'device.attributes["{DRIVER}"].gone == "x" || true')


#: Each expression with what kube-scheduler v1.37.2's CEL environment
#: (``k8s.io/dynamic-resource-allocation/cel``, cel-go) evaluates it to on the device of
#: :func:`_cel` (capacity ``memory`` served as ``40Gi``, ``milli`` as ``1500m``): checked by
#: running that package's ``DeviceMatches`` on these very expressions.
UPSTREAM_CEL = {
    # isInteger/asInteger read how resource.Quantity holds the value (an int64 of scale >= 0)
    'quantity("2").isInteger()': True,
    'quantity("1000m").isInteger()': False,
    'quantity("1.0").isInteger()': False,
    'quantity("1Ei").isInteger()': False,
    'quantity("1E").isInteger()': True,
    'quantity("10E").isInteger()': False,
    'quantity("100Gi").isInteger()': True,
    'quantity("1.5e3").isInteger()': True,
    'quantity("99999999999999999999").isInteger()': False,
    'quantity("1").add(quantity("500m")).add(quantity("500m")).isInteger()': False,
    'quantity("1").add(quantity("500m")).add(quantity("500m")).compareTo(quantity("2")) == 0': True,
    'quantity("1").add(1).isInteger()': True,
    'quantity("1.5e3").asInteger() == 1500': True,
    'quantity("3k").sub(quantity("1k")).asInteger() == 2000': True,
    'quantity("3k").sub(1).asInteger() == 2999': True,
    f'device.capacity["{DRIVER}"].memory.isInteger()': True,
    f'device.capacity["{DRIVER}"].milli.isInteger()': False,
    f'device.capacity["{DRIVER}"].milli.add(quantity("500m")).isInteger()': False,
    # values finer than nano are rounded up to a nano; binary ones capped at 2**63 - 1
    'quantity("1e-10").compareTo(quantity("1n")) == 0': True,
    'quantity("-1e-10").compareTo(quantity("-1n")) == 0': True,
    'quantity("1.5e-9").compareTo(quantity("2n")) == 0': True,
    'quantity("16Ei").compareTo(quantity("9223372036854775807")) == 0': True,
    # numbers of different kinds compare by value
    f'device.attributes["{DRIVER}"].cores == 8.0': True,
    f'device.attributes["{DRIVER}"].cores != 8.0': False,
    f'device.attributes["{DRIVER}"].cores == 8u': True,
    f'device.attributes["{DRIVER}"].cores < 9.5': True,
    f'device.attributes["{DRIVER}"].cores > 7.5': True,
    f'device.attributes["{DRIVER}"].cores in [8.0]': True,
    f'[device.attributes["{DRIVER}"].cores] == [8.0]': True,
    f'{{"a": device.attributes["{DRIVER}"].cores}} == {{"a": 8.0}}': True,
    # semver precedence
    'semver("1.2.3").isGreaterThan(semver("1.2.3-rc.1"))': True,
    'semver("1.2.3-alpha.10").isGreaterThan(semver("1.2.3-alpha.9"))': True,
    'semver("1.2.3-alpha.beta").isGreaterThan(semver("1.2.3-alpha.1"))': True,
    'semver("1.2.3+build").compareTo(semver("1.2.3")) == 0': True,
    'semver("v1.2", true).minor() == 2': True,
    'semver("01.2.3", true).major() == 1': True,
    'isSemver("1.2")': False,
    # boundaries: digits Kubernetes holds as an int64 (18, fewer with a binary suffix), a sum
    # back to zero taking the other's scale, a zero added, comparisons of equal values
    'quantity("100Ti").isInteger()': False,
    'quantity("1234567890123456789").isInteger()': False,
    'quantity("5n").sub(quantity("5n")).add(quantity("1")).isInteger()': True,
    'quantity("1k").add(quantity("0")).asInteger() == 1000': True,
    'quantity("3k").sub(quantity("1k")).compareTo(quantity("2k")) == 0': True,
    'quantity("10000000000000000000").compareTo(quantity("9223372036854775807")) == 1': True,
    'quantity("1").compareTo(quantity("2")) == -1': True,
    'semver("1.0.0").compareTo(semver("2.0.0")) == -1': True,
    'quantity("1").isLessThan(quantity("1"))': False,
    'quantity("1").isGreaterThan(quantity("1"))': False,
    'semver("1.0.0-alpha").isLessThan(semver("1.0.0-alpha.1"))': True,
    'sign(quantity("0")) == 0': True,
    f'device.attributes["{DRIVER}"].cores <= 8': True,
    f'device.attributes["{DRIVER}"].fast == 1': False,
    "[1] == [1, 2]": False,
    "8 in [1, 8]": True,
    # the strings extension at its edges
    '"abcabc".lastIndexOf("bc", 4) == 4': True,
    '"abc".indexOf("", 3) == 3': True,
    '"abc".indexOf("c", 4) == -1': True,
    '"abc".lastIndexOf("c", 5) == 2': False,
    '"abc".lastIndexOf("c", 1) == -1': True,
    '"abc".lastIndexOf("c", 3) == -1': True,
    '"abc".lastIndexOf("", 5) == 3': True,
    '"ab😀c".indexOf("c") == 3': True,
    '"ab😀c".substring(2, 3) == "😀"': True,
    '"abc".substring(1, 1) == ""': True,
    '"xyz".upperAscii() == "XYZ"': True,
}

#: Errors, in cel-go's words (checked as :data:`UPSTREAM_CEL`).
UPSTREAM_CEL_ERRORS = {
    'quantity("1000m").asInteger() == 1': "cannot convert value to integer",
    'quantity("1kk") == quantity("1")': "unable to parse quantity's suffix",
    'quantity("1Q") == quantity("1")': "quantities must match the regular expression "
    "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
    'quantity("") == quantity("1")': "quantities must match the regular expression "
    "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
    f'device.attributes["{DRIVER}"].model': "CEL result of type string could not be converted to bool: "
    "unsupported native conversion from string to 'bool'",
    f'device.attributes["{DRIVER}"].cores': "CEL result of type int could not be converted to bool: "
    "unsupported type conversion from 'int' to bool",
    f'device.attributes["{DRIVER}"].fw': "CEL result of type kubernetes.Semver could not be converted to "
    "bool: type conversion error from 'Semver' to 'bool'",
    f'device.attributes["{DRIVER}"]["gone"] == 1': "no such key: gone. consider using CEL optional chaining "
    "(.? followed by orValue()) or guarding the check with has() for optional fields",
    '"abc".indexOf("c", -1) == -1': "index out of range: -1",
    '"abc".lastIndexOf("c", -1) == -1': "index out of range: -1",
    '"abc".charAt(4) == ""': "index out of range: 4",
    '"abc".substring(2, 1) == ""': "invalid substring range. start: 2, end: 1",
    '{"a": 1}["b"] == 1': "no such key: b. consider using CEL optional chaining (.? followed by orValue()) "
    "or guarding the check with has() for optional fields",
}


def _upstream_view() -> DeviceView:
    view = _view(model="a100", cores=8, fast=True, fw=("version", "1.4.2"))
    capacity = {"memory": Fraction(40 * 2**30), "milli": Fraction(3, 2)}
    return DeviceView(DRIVER, view.attributes, capacity, False, {"memory": "40Gi", "milli": "1500m"})


def test_cel_a_selectors_kept_result_tells_capacities_apart_by_how_they_are_held() -> None:
    selector = compile_selector(f'device.capacity["{DRIVER}"].memory.isInteger()')
    assert selector.matches(DeviceView(DRIVER, {}, {"memory": Fraction(1)}, False, {"memory": "1"}))
    assert not selector.matches(DeviceView(DRIVER, {}, {"memory": Fraction(1)}, False, {"memory": "1000m"}))


@pytest.mark.parametrize("expression", sorted(UPSTREAM_CEL))
def test_cel_evaluates_as_kubernetes_cel_environment(expression: str) -> None:
    assert _cel(expression, _upstream_view()) is UPSTREAM_CEL[expression]


@pytest.mark.parametrize("expression", sorted(UPSTREAM_CEL_ERRORS))
def test_cel_errs_in_kubernetes_cel_environments_words(expression: str) -> None:
    with pytest.raises(SelectorError) as err:
        _cel(expression, _upstream_view())
    assert str(err.value) == UPSTREAM_CEL_ERRORS[expression] and not err.value.compile_error


def test_cel_a_compile_error_is_raised_when_matched_and_unmodelled_functions_are_said() -> None:
    broken = compile_selector("device.driver ==")  # compiling never raises
    with pytest.raises(SelectorError, match="compilation failed") as err:
        broken.matches(_view())
    assert err.value.compile_error
    with pytest.raises(SelectorError, match="undeclared reference to 'nosuch'"):
        _cel("nosuch(device.driver)")
    for expression in (
        'device.attributes["x"].?y.orValue("z") == "z"',
        "ip(device.driver).family() == 4",
        "sets.contains([1], [1])",
        "[1, 2].sum() == 3",
    ):
        with pytest.raises(SelectorNotModelled):
            _cel(expression)


# ---- the allocator ---------------------------------------------------------------------------


def test_a_node_passes_when_its_devices_match_the_class_and_request_selectors() -> None:
    slices = [_slice("a", _device("d0", model="a100")), _slice("b", _device("d0", model="t4"))]
    claim = _claim("c", _request("r", 1, f'device.attributes["{DRIVER}"].model == "a100"'))
    assert _fits(slices, claim, node="a").fits
    outcome = _fits(slices, claim, node="b")
    assert (outcome.fits, outcome.reason) == (False, "cannot allocate all claims")
    assert not _fits(slices, claim, node="c").fits  # no slice: nothing to allocate from


def test_a_node_that_fits_gives_the_devices_of_upstreams_first_solution_per_claim() -> None:
    """``NodeAllocation.devices``: per claim, in the order given, the devices the search's
    first solution takes (the scale-down plan takes them); none when the claims do not fit."""
    model = f'device.attributes["{DRIVER}"].model'
    devices = [_device("d0", model="t4"), _device("d1", model="a100"), _device("d2", model="t4")]
    slices = [_slice("a", *devices)]
    a100 = _claim("big", _request("r", 1, f'{model} == "a100"'))
    two = _claim("two", _request("r", 2))
    outcome = _fits(slices, a100, two)
    assert (outcome.fits, outcome.devices) == (
        True,
        (((DRIVER, "a", "d1"),), ((DRIVER, "a", "d0"), (DRIVER, "a", "d2"))),
    )
    assert _fits(slices, a100, two, _claim("more", _request("r", 1))).devices == ()


def test_devices_allocated_to_other_claims_are_not_free_but_admin_access_ones_are() -> None:
    slices = [_slice("a", _device("d0"), _device("d1"))]
    two = _claim("c", _request("r", 2))
    assert _fits(slices, two).fits
    assert not _fits(slices, two, held=[_held("other", "a", "d1")]).fits
    assert _fits(slices, two, held=[_held("watcher", "a", "d1", admin=True)]).fits
    assert _fits(slices, _claim("c", _request("r", 1)), held=[_held("other", "a", "d1")]).fits
    # two claims of the pod take distinct devices
    assert not _fits(slices, two, _claim("d", _request("r", 1))).fits


def test_the_search_backtracks_over_earlier_choices_as_upstreams_exhaustive_search() -> None:
    """``any`` takes d0 first; ``only0`` can use d0 alone: a greedy pick fails, upstream's
    backtracking (and this) puts ``any`` on d1."""
    slices = [_slice("a", _device("d0", slot=0), _device("d1", slot=1))]
    claim = _claim("c", _request("any", 1), _request("only0", 1, f'device.attributes["{DRIVER}"].slot == 0'))
    assert _fits(slices, claim).fits


def test_first_available_falls_back_to_a_later_subrequest() -> None:
    slices = [_slice("a", _device("d0", model="t4"))]
    sub = {"deviceClassName": "gpu", "count": 1}
    claim = _claim(
        "c",
        {
            "name": "r",
            "firstAvailable": [
                {
                    **sub,
                    "name": "big",
                    "selectors": [{"cel": {"expression": f'device.attributes["{DRIVER}"].model == "a100"'}}],
                },
                {**sub, "name": "small"},
            ],
        },
    )
    assert _fits(slices, claim).fits
    claim["spec"]["devices"]["requests"][0]["firstAvailable"].pop()
    assert not _fits(slices, claim).fits


def test_match_and_distinct_attribute_constraints_bind_the_requests_they_name() -> None:
    slices = [_slice("a", _device("d0", numa=0), _device("d1", numa=1), _device("d2", numa=1))]
    match = [{"matchAttribute": f"{DRIVER}/numa", "requests": ["x", "y"]}]
    pair = (_request("x", 1, f'device.attributes["{DRIVER}"].numa == 0'), _request("y", 1))
    assert not _fits(slices, _claim("c", *pair, constraints=match)).fits  # numa 0 has one device
    assert _fits(
        slices, _claim("c", _request("x", 2), constraints=[{"matchAttribute": f"{DRIVER}/numa"}])
    ).fits
    distinct = [{"distinctAttribute": f"{DRIVER}/numa"}]
    assert _fits(slices, _claim("c", _request("x", 2), constraints=distinct)).fits
    assert not _fits(slices, _claim("c", _request("x", 3), constraints=distinct)).fits
    # an attribute a device lacks fails the constraint
    assert not _fits(
        slices, _claim("c", _request("x", 1), constraints=[{"matchAttribute": f"{DRIVER}/gone"}])
    ).fits


def test_a_tainted_device_needs_a_toleration() -> None:
    tainted = _device("d0")
    tainted["taints"] = [{"key": "broken", "value": "yes", "effect": "NoSchedule"}]
    slices = [_slice("a", tainted)]
    assert not _fits(slices, _claim("c", _request("r", 1))).fits
    tolerated = _request("r", 1, tolerations=[{"key": "broken", "operator": "Exists"}])
    assert _fits(slices, _claim("c", tolerated)).fits
    wrong = _request("r", 1, tolerations=[{"key": "broken", "operator": "Equal", "value": "no"}])
    assert not _fits(slices, _claim("c", wrong)).fits
    other_key = _request("r", 1, tolerations=[{"key": "other", "operator": "Exists"}])
    assert not _fits(slices, _claim("c", other_key)).fits
    other_effect = _request("r", 1, tolerations=[{"operator": "Exists", "effect": "NoExecute"}])
    assert not _fits(slices, _claim("c", other_effect)).fits
    tainted["taints"][0]["effect"] = "NoExecute"
    assert not _fits(slices, _claim("c", _request("r", 1))).fits
    assert _fits(slices, _claim("c", other_effect)).fits
    tainted["taints"][0]["effect"] = "None"  # only NoSchedule and NoExecute keep a device
    assert _fits(slices, _claim("c", _request("r", 1))).fits


def _taint_rule(
    name: str, effect: str = "NoSchedule", key: str = "broken", **selector: str | None
) -> dict[str, Any]:
    """A DeviceTaintRule selecting by ``driver``, ``pool``, ``device`` (the keys given)."""
    taint = {"key": key, "value": "yes", "effect": effect, "timeAdded": "2026-12-08T00:00:00Z"}
    return {"metadata": {"name": name}, "spec": {"deviceSelector": selector, "taint": taint}}


def _free_devices(
    slices: list[dict[str, Any]], rules: list[dict[str, Any]] | None, *tolerations: dict[str, Any]
) -> dict[str, list[str]]:
    """Per node, which of its devices one request (tolerating ``tolerations``) can take:
    each device asked for alone by name (a selector)."""
    allocator = DraAllocator(slices, [], CLASSES, compile_selector, rules)
    free: dict[str, list[str]] = {}
    for s in slices:
        node = s["spec"]["nodeName"]
        for d in s["spec"]["devices"]:
            extra = {"tolerations": list(tolerations)} if tolerations else {}
            request = _request("r", 1, f'device.attributes["{DRIVER}"].id == "{d["name"]}"', **extra)
            if allocator.allocate(node, {}, [read_claim("default/c", _claim("c", request))]).fits:
                free.setdefault(node, []).append(d["name"])
    return free


def test_device_taint_rules_taint_the_devices_their_selector_names_as_upstreams_tracker() -> None:
    """A rule's taint is appended to every device of a slice whose driver and pool its
    selector names (an unset field: any), the device too when it names one; one without a
    selector taints nothing; the taint then keeps the device as a slice's own does."""
    slices = [
        _slice(node, *(_device(d, id=d) for d in ("d0", "d1")), pool=f"pool-{node}") for node in ("a", "b")
    ]
    every = {"a": ["d0", "d1"], "b": ["d0", "d1"]}
    assert _free_devices(slices, []) == every
    assert _free_devices(slices, [_taint_rule("all-of-driver", driver=DRIVER)]) == {}
    assert _free_devices(slices, [_taint_rule("other-driver", driver="other.example.com")]) == every
    assert _free_devices(slices, [_taint_rule("pool", pool="pool-a")]) == {"b": ["d0", "d1"]}
    assert _free_devices(slices, [_taint_rule("device", device="d1")]) == {"a": ["d0"], "b": ["d0"]}
    exact = _taint_rule("exact", driver=DRIVER, pool="pool-b", device="d0")
    assert _free_devices(slices, [exact]) == {"a": ["d0", "d1"], "b": ["d1"]}
    no_selector = _taint_rule("nothing")
    del no_selector["spec"]["deviceSelector"]
    assert _free_devices(slices, [no_selector]) == every
    # effects: NoExecute keeps a device from scheduling too, None does not
    assert _free_devices(slices, [_taint_rule("evict", "NoExecute", pool="pool-a")]) == {"b": ["d0", "d1"]}
    assert _free_devices(slices, [_taint_rule("none", "None", pool="pool-a")]) == every
    # tolerations of the request, as for a slice's own taints; every taint needs one
    tolerate = {"key": "broken", "operator": "Exists", "effect": "NoSchedule"}
    assert _free_devices(slices, [_taint_rule("pool", pool="pool-a")], tolerate) == every
    two = [_taint_rule("pool", pool="pool-a"), _taint_rule("other", key="hot", device="d0")]
    assert _free_devices(slices, two, tolerate) == {"a": ["d1"], "b": ["d1"]}
    own = _slice("a", {**_device("d0", id="d0"), "taints": [{"key": "own", "effect": "NoSchedule"}]})
    assert _free_devices([own], [_taint_rule("pool", pool="a")], tolerate) == {}


def test_device_taint_rules_not_listed_leave_a_fitting_node_unjudged_and_bad_rules_are_named() -> None:
    slices = [_slice("a", _device("d0"))]
    claim = [read_claim("default/c", _claim("c", _request()))]
    unlisted = DraAllocator(slices, [], CLASSES, compile_selector, None)
    outcome = unlisted.allocate("a", {}, claim)
    assert (
        outcome.fits
        and outcome.not_modelled == "the DeviceTaintRules could not be listed: their taints are not applied"
    )
    assert not unlisted.allocate("b", {}, claim).fits  # no device there: fails with any rules
    bad = _taint_rule("bad", driver=DRIVER)
    bad["spec"]["taint"] = "broken"
    allocator = DraAllocator(slices, [], CLASSES, compile_selector, [bad, _taint_rule("odd", pool=7)])  # type: ignore[arg-type]
    assert allocator.problems == [
        "DeviceTaintRule bad: spec.taint is not an object; left out",
        "DeviceTaintRule odd: spec.deviceSelector.pool is not a name; left out",
    ]
    # judged in full (the rules read, the bad ones left out): d0 is the device it picks
    assert allocator.allocate("a", {}, claim) == NodeAllocation(True, devices=(((DRIVER, "a", "d0"),),))


def test_all_mode_takes_every_selectable_device_and_errs_on_an_incomplete_pool() -> None:
    slices = [_slice("a", _device("d0"), _device("d1"))]
    every = _claim("c", _request("r", 0, allocationMode="All"))
    assert _fits(slices, every).fits
    assert not _fits(slices, every, held=[_held("other", "a", "d0")]).fits
    incomplete = [_slice("a", _device("d0"), count=2)]
    outcome = _fits(incomplete, every)
    assert outcome.error == (
        f"claim default/c, request r: asks for all devices, but resource pool {DRIVER}/a "
        "is currently being updated"
    )
    assert not _fits(incomplete, _claim("c", _request("r", 1))).fits  # exact count: skipped, no error


def test_node_selection_of_slices_and_devices_and_the_newest_generation() -> None:
    zoned = _slice(
        None,
        _device("z0"),
        pool="zone",
        nodeSelector={
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z1"]}]}]
        },
    )
    claim = _claim("c", _request("r", 1))
    assert _fits([zoned], claim, labels={"zone": "z1"}).fits
    assert not _fits([zoned], claim, labels={"zone": "z2"}).fits
    assert _fits([_slice(None, _device("g"), pool="net", allNodes=True)], claim).fits
    per_device = _slice(
        None,
        {**_device("p0"), "nodeName": "b"},
        {**_device("p1"), "nodeName": "a"},
        pool="per",
        perDeviceNodeSelection=True,
    )
    assert _fits([per_device], _claim("c", _request("r", 1))).fits
    assert not _fits([per_device], _claim("c", _request("r", 2))).fits  # p0 is b's
    old = _slice("a", _device("d0"), _device("d1"), generation=1, name="old")
    new = _slice("a", _device("d0"), generation=2, name="new")
    assert not _fits([old, new], _claim("c", _request("r", 2))).fits
    assert _fits([old, new], _claim("c", _request("r", 1))).fits  # the newest generation's
    # a node selector's terms are ORed
    terms = [{"matchExpressions": [{"key": k, "operator": "In", "values": ["y"]}]} for k in ("p", "q")]
    either = _slice(None, _device("e0"), pool="either", nodeSelector={"nodeSelectorTerms": terms})
    assert _fits([either], claim, labels={"q": "y"}).fits


def _counter_slice() -> dict[str, Any]:
    """Node a's slice of shared counters (``gpu0``: 40Gi of memory), one of its pool's two
    slices."""
    return {
        "metadata": {"name": "counters"},
        "spec": {
            "driver": DRIVER,
            "nodeName": "a",
            "pool": {"name": "a", "generation": 1, "resourceSliceCount": 2},
            "sharedCounters": [{"name": "gpu0", "counters": {"memory": {"value": "40Gi"}}}],
        },
    }


def test_partitionable_devices_need_the_counters_they_consume() -> None:
    counters = _counter_slice()

    def part(name: str, memory: str) -> dict[str, Any]:
        return {
            "name": name,
            "consumesCounters": [{"counterSet": "gpu0", "counters": {"memory": {"value": memory}}}],
        }

    devices = _slice(
        "a", part("whole", "40Gi"), part("half0", "20Gi"), part("half1", "20Gi"), count=2, name="devs"
    )
    assert _fits([counters, devices], _claim("c", _request("r", 2))).fits  # the two halves
    assert not _fits([counters, devices], _claim("c", _request("r", 3))).fits
    assert not _fits([counters, devices], _claim("c", _request("r", 1)), held=[_held("o", "a", "whole")]).fits


def test_a_cel_error_is_met_only_on_a_device_the_search_reaches() -> None:
    """Upstream finds a runtime error where it evaluates the selector: d0 matches first, so
    a one-device claim never evaluates d1 (which lacks the attribute); two devices do."""
    slices = [_slice("a", _device("d0", model="a100"), _device("d1"))]
    selector = f'device.attributes["{DRIVER}"].model == "a100"'
    assert _fits(slices, _claim("c", _request("r", 1, selector))).fits
    outcome = _fits(slices, _claim("c", _request("r", 2, selector)))
    assert (outcome.fits, outcome.error) == (
        False,
        f"claim default/c: selector #0 on device {DRIVER}/a/d1: CEL runtime error: no such key: model. "
        "consider using CEL optional chaining (.? followed by orValue()) or guarding the check with has() "
        "for optional fields",
    )
    broken = _claim("c", _request("r", 1, "device.driver =="))
    assert (broken_outcome := _fits(slices, broken)).error is not None
    assert broken_outcome.error.startswith(
        "claim default/c: selector #0: CEL compile error: compilation failed"
    )


def test_what_the_allocator_does_not_model_passes_the_node_and_says_why() -> None:
    slices = [_slice("a", {**_device("d0"), "allowMultipleAllocations": True})]
    outcome = _fits(slices, _claim("c", _request("r", 1)))
    assert outcome.fits and "allowing multiple allocations" in str(outcome.not_modelled)
    capacity = _request("r", 1, capacity={"requests": {"memory": "1Gi"}})
    assert "capacity requests" in str(_fits([_slice("a", _device("d0"))], _claim("c", capacity)).not_modelled)
    unlisted = DraAllocator([_slice("a", _device("d0"))], [], None, compile_selector)
    outcome = unlisted.allocate("a", {}, [read_claim("default/c", _claim("c", _request()))])
    assert outcome.fits and "DeviceClass could not be listed" in str(outcome.not_modelled)


def test_a_claim_takes_up_to_32_devices_and_the_limit_counts_each_requests_least() -> None:
    """``AllocationResultsMaxSize``: 32 devices in one claim fit; upstream's check before the
    search adds each request's least count (a ``firstAvailable``'s smallest subrequest)."""
    slices = [_slice("a", *(_device(f"d{k}") for k in range(33)))]
    assert _fits(slices, _claim("c", _request("r0", 16), _request("r1", 16))).fits
    error = _fits(slices, _claim("c", _request("r0", 12), _request("r1", 12), _request("r2", 12))).error
    assert error == (
        "claim default/c, request r2: adding 12 devices exceeds the claim limit of 32, with 24 already "
        "accounted for"
    )
    sub = {"deviceClassName": "gpu"}
    either = {"name": "r", "firstAvailable": [{**sub, "name": "many", "count": 40}, {**sub, "name": "one"}]}
    assert _fits(slices, _claim("c", either)).fits


def test_a_request_upstream_cannot_read_and_an_invalid_pool_are_said_in_its_words() -> None:
    bogus = _request("r", 1, allocationMode="Bogus")
    assert _fits([_slice("a", _device("d0"))], _claim("c", bogus)).error == (
        "claim default/c, request r: unsupported count mode Bogus"
    )
    # a subrequest is named by its own name, as upstream's deviceSubRequestAccessor
    sub = {
        "name": "r",
        "firstAvailable": [{"deviceClassName": "gpu", "name": "big", "allocationMode": "Bogus"}],
    }
    assert _fits([_slice("a", _device("d0"))], _claim("c", sub)).error == (
        "claim default/c, request big: unsupported count mode Bogus"
    )
    unknown = {"name": "r", "exactly": {"deviceClassName": "nope"}}
    assert _fits([_slice("a", _device("d0"))], _claim("c", unknown)).error == (
        "claim default/c, request r: could not retrieve device class nope: "
        'deviceclass.resource.k8s.io "nope" not found'
    )
    twice = _slice("a", _device("d0"), _device("d0"))  # a duplicate device name
    outcome = _fits([twice], _claim("c", _request("r", 1)))
    assert (outcome.fits, outcome.reason) == (False, "invalid resource pools were encountered")
    every = _request("r", allocationMode="All")
    assert _fits([twice], _claim("c", every)).error == (
        f"claim default/c, request r: asks for all devices, but resource pool {DRIVER}/a is currently invalid"
    )
    # All with no device matching: nothing to allocate is no allocation
    none = _request("r", 1, f'device.attributes["{DRIVER}"].model == "h100"', allocationMode="All")
    assert not _fits([_slice("a", _device("d0", model="a100"))], _claim("c", none)).fits


def test_a_selectors_result_is_kept_per_request_only_as_computed() -> None:
    """r1 takes any device, r2 only an a100; three t4s: r2 meets each t4 again as r1's choice
    changes, and must refuse it every time."""
    slices = [_slice("a", *(_device(f"d{k}", model="t4") for k in range(3)))]
    claim = _claim(
        "c", _request("r1", 1), _request("r2", 1, f'device.attributes["{DRIVER}"].model == "a100"')
    )
    assert not _fits(slices, claim).fits


def test_a_later_requests_failure_backtracks_over_an_earlier_subrequests_devices() -> None:
    """r0's subrequest takes d0 first, which r1 needs: upstream tries r0's next device (d1)
    before giving up on the subrequest."""
    slices = [_slice("a", _device("d0", model="b"), _device("d1", model="c"))]
    first = {"name": "r0", "firstAvailable": [{"deviceClassName": "gpu", "name": "any"}]}
    later = {
        "name": "r1",
        "firstAvailable": [
            {
                "deviceClassName": "gpu",
                "name": "b",
                "selectors": [{"cel": {"expression": f'device.attributes["{DRIVER}"].model == "b"'}}],
            }
        ],
    }
    assert _fits(slices, _claim("c", first, later)).fits


def test_constraints_name_subrequests_and_qualified_attributes_of_their_own_domain() -> None:
    slices = [_slice("a", _device("d0", model="x"), _device("d1", model="y"))]
    sub = {"name": "r0", "firstAvailable": [{"deviceClassName": "gpu", "name": "s"}]}
    match = [{"matchAttribute": f"{DRIVER}/model", "requests": ["r0/s", "r1"]}]
    assert not _fits(slices, _claim("c", sub, _request("r1", 1), constraints=match)).fits
    foreign = [{"matchAttribute": "other.example.com/model"}]  # the devices have none
    assert not _fits(slices, _claim("c", _request("r", 1), constraints=foreign)).fits


def test_pools_with_binding_conditions_are_searched_last() -> None:
    """p1 (a device with bindingConditions) sorts before p2 but is searched after it, so the
    search meets p2's device, which lacks the attribute, first: a CEL error."""
    waiting = {**_device("w0", model="a100"), "bindingConditions": ["ready"]}
    p1 = _slice("a", waiting, _device("w1", model="a100"), pool="p1", name="p1")
    p2 = _slice("a", _device("x0"), pool="p2", name="p2")
    outcome = _fits([p1, p2], _claim("c", _request("r", 1, f'device.attributes["{DRIVER}"].model == "a100"')))
    assert outcome.error is not None and f"on device {DRIVER}/p2/x0: CEL runtime error" in outcome.error


def test_a_device_shared_by_another_claim_is_not_in_use_but_its_counters_are() -> None:
    """A result with a ``shareID`` (consumable capacity) is a share of the device, not the
    device: upstream's ``deviceInUse`` does not count it, so the device is a candidate (here
    not modelled, never "cannot allocate"), while ``IsDeviceAllocated`` does: its counters
    are consumed."""
    shared = _held("sharer", "a", "d0")
    shared["status"]["allocation"]["devices"]["results"][0]["shareID"] = "0a1b"
    slices = [_slice("a", {**_device("d0"), "allowMultipleAllocations": True})]
    outcome = _fits(slices, _claim("c", _request("r", 1)), held=[shared])
    assert outcome.fits and "allowing multiple allocations" in str(outcome.not_modelled)
    counters = _counter_slice()
    consuming = [{"counterSet": "gpu0", "counters": {"memory": {"value": "40Gi"}}}]
    devices = _slice(
        "a",
        {**_device("d0"), "allowMultipleAllocations": True, "consumesCounters": consuming},
        {**_device("d1"), "consumesCounters": consuming},
        count=2,
        name="devs",
    )
    only_d1 = _request("r", 1, "device.allowMultipleAllocations == false")
    assert _fits([counters, devices], _claim("c", only_d1)).fits
    assert not _fits([counters, devices], _claim("c", only_d1), held=[shared]).fits


def test_the_filter_allocates_the_pods_unallocated_claims_node_by_node() -> None:
    """With an allocator, DynamicResources passes only the nodes whose devices fit the
    claim (before, every node passed for a claim not allocated)."""
    slices = [_slice("a", _device("d0", model="t4")), _slice("b", _device("d0", model="a100"))]
    claim = _claim("c", _request("r", 1, f'device.attributes["{DRIVER}"].model == "a100"'))
    table = NodeTable()
    for name in ("a", "b"):
        table.upsert_node(name, {"cpu": 4000, "memory": 2**34, "pods": 110})
    raw = pod_manifest("p", cpu="1", memory="1Gi")
    raw["metadata"]["uid"] = "u"
    raw["spec"]["resourceClaims"] = [{"name": "x", "resourceClaimName": "c"}]
    pod = Pod.from_dict(raw)
    allocator = DraAllocator(slices, [claim], CLASSES, compile_selector)
    plugin = DynamicResourcesFilter({("default", "c"): claim}, set(CLASSES), allocator=allocator)
    idx = table.active_indices()
    mask = plugin.filter(pod, table, idx, SchedulingContext())
    assert dict(zip(table.node_names(idx), mask.tolist(), strict=True)) == {"a": False, "b": True}
    assert plugin.outcomes()["a"].reason == "cannot allocate all claims"
    assert np.all(
        DynamicResourcesFilter({("default", "c"): claim}, set(CLASSES)).filter(
            pod, table, idx, SchedulingContext()
        )
    )


def test_cel_semver_normalizes_when_asked_as_the_kubernetes_library() -> None:
    assert _cel('semver("v1.2", true) == semver("1.2.0") && isSemver("01.2.3", true) && !isSemver("01.2.3")')
    with pytest.raises(SelectorError, match="could not parse"):
        _cel('semver("v1.2") == semver("1.2.0")')


def test_the_taint_rule_slimmer_keeps_what_the_allocator_reads() -> None:
    """``inspect --pod --dra`` lists DeviceTaintRules through ``allocation_device_taint_rule``:
    the allocator decides on them as on the rules served (with status and metadata)."""
    from stickypack.kube.dra import allocation_device_taint_rule

    rule = _taint_rule("r", pool="a", device="d0")
    rule["metadata"].update({"uid": "u", "managedFields": [{"manager": "x"}]})
    rule["status"] = {"conditions": [{"type": "EvictionInProgress", "status": "False"}]}
    slim = allocation_device_taint_rule(rule)
    assert (slim["metadata"]["name"], slim["spec"]) == ("r", rule["spec"])
    assert "status" not in slim and "managedFields" not in slim["metadata"]
    slices = [_slice(node, _device("d0", id="d0"), _device("d1", id="d1")) for node in ("a", "b")]
    assert _free_devices(slices, [rule]) == _free_devices(slices, [slim]) == {"a": ["d1"], "b": ["d0", "d1"]}
    assert allocation_device_taint_rule({"spec": "odd"}) == {"spec": "odd"}  # named by the allocator


def test_the_allocation_slimmers_keep_what_the_allocator_reads() -> None:
    """``inspect --pod --dra`` lists slices and claims through
    ``allocation_resource_slice`` / ``allocation_resource_claim``: the allocator decides
    on them as on the objects served (whose metadata and status carry more)."""
    from stickypack.kube.dra import allocation_resource_claim, allocation_resource_slice

    tainted = {**_device("d1", model="a100"), "taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}]}
    served = [_slice("a", _device("d0", model="t4"), tainted), _slice("b", _device("d0", model="a100"))]
    for obj in served:
        obj["metadata"].update({"uid": "u", "managedFields": [{"manager": "x"}], "labels": {"a": "b"}})
    claim = _claim(
        "c",
        _request("r", 1, f'device.attributes["{DRIVER}"].model == "a100"'),
        constraints=[{"matchAttribute": f"{DRIVER}/model"}],
    )
    claim["spec"]["devices"]["config"] = [{"opaque": {"driver": DRIVER, "parameters": {}}}]
    holder = _held("h", "b", "d0")

    def outcomes(slices: list[Any], claims: list[Any]) -> dict[str, Any]:
        allocator = DraAllocator(slices, claims, CLASSES, compile_selector)
        read = read_claim("default/c", claims[0])
        return {node: allocator.allocate(node, {}, [read]) for node in ("a", "b")}

    full = outcomes(served, [claim, holder])
    slim = outcomes(
        [allocation_resource_slice(s) for s in served],
        [allocation_resource_claim(c) for c in (claim, holder)],
    )
    assert full == slim and not full["a"].fits and not full["b"].fits  # tainted; held


def test_objects_not_shaped_as_served_are_named_never_a_traceback() -> None:
    bad_slice = {"metadata": {"name": "s"}, "spec": {"driver": DRIVER, "pool": "p"}}
    allocator = DraAllocator([bad_slice, _slice("a", _device("d0"))], [], CLASSES, compile_selector)
    assert allocator.problems == ["ResourceSlice s: spec.pool is not an object; left out"]
    with pytest.raises(ValueError, match=r"^ResourceClaim default/c: spec.devices.requests is not a list$"):
        read_claim("default/c", {"spec": {"devices": {"requests": "gpu"}}})
    table = NodeTable()
    table.upsert_node("a", {"cpu": 4000, "memory": 2**34, "pods": 110})
    raw = pod_manifest("p", cpu="1", memory="1Gi")
    raw["spec"]["resourceClaims"] = [{"name": "x", "resourceClaimName": "c"}]
    odd = {"metadata": {"name": "c", "namespace": "default"}, "spec": {"devices": {"requests": "gpu"}}}
    plugin = DynamicResourcesFilter({("default", "c"): odd}, None, allocator=allocator)
    pod = Pod.from_dict(raw)
    assert plugin.filter(pod, table, table.active_indices(), SchedulingContext()).tolist() == [True]
    assert "spec.devices.requests is not a list" in str(plugin.outcomes()["a"].not_modelled)


def test_extended_resources_map_to_device_classes_as_kube_schedulers_cache() -> None:
    from stickypack.core.dra import extended_resource_classes

    def cls(name: str, resource: str | None, stamp: str) -> dict[str, Any]:
        spec = {"extendedResourceName": resource} if resource else {}
        return {"metadata": {"name": name, "creationTimestamp": stamp}, "spec": spec}

    classes = {
        "old": cls("old", "example.com/gpu", "2026-01-01T00:00:00Z"),
        "new": cls("new", "example.com/gpu", "2026-02-01T00:00:00Z"),
        "b": cls("b", "example.com/fpga", "2026-01-01T00:00:00Z"),
        "a": cls("a", "example.com/fpga", "2026-01-01T00:00:00Z"),
        "plain": cls("plain", None, "2026-01-01T00:00:00Z"),
    }
    mapping = extended_resource_classes(classes)
    assert mapping["example.com/gpu"] == "new"  # the newest
    assert mapping["example.com/fpga"] == "a"  # a tie: the first by name
    assert mapping["deviceclass.resource.kubernetes.io/plain"] == "plain"
    assert mapping["deviceclass.resource.kubernetes.io/old"] == "old"


def test_dra_backed_extended_resources_go_to_dynamic_resources_on_nodes_without_them() -> None:
    """NodeResourcesFit leaves a DRA-backed extended resource to DynamicResources on a node
    listing none of it allocatable; DynamicResources then allocates the pod's request from
    the class's devices: ``a`` publishes one device, ``b`` two, ``c`` lists the resource
    allocatable (a device plugin's, checked by NodeResourcesFit alone)."""
    from stickypack.core.plugins.kubescheduler import DraDelegatingFitFilter, NodeResourcesFitFilter

    table = NodeTable()
    for name in ("a", "b"):
        table.upsert_node(name, {"cpu": 4000, "memory": 2**34, "pods": 110})
    table.upsert_node("c", {"cpu": 4000, "memory": 2**34, "pods": 110, "example.com/gpu": 1})
    raw = pod_manifest("p", cpu="1", memory="1Gi")
    resources = raw["spec"]["containers"][0]["resources"]
    resources["requests"]["example.com/gpu"] = "2"
    resources.setdefault("limits", {})["example.com/gpu"] = "2"
    pod = Pod.from_dict(raw)
    idx = table.active_indices()
    names = table.node_names(idx)
    ctx = SchedulingContext()
    plain = NodeResourcesFitFilter().filter(pod, table, idx, ctx)
    assert dict(zip(names, plain.tolist(), strict=True)) == {"a": False, "b": False, "c": False}
    fit = DraDelegatingFitFilter({"example.com/gpu"}).filter(pod, table, idx, ctx)
    assert dict(zip(names, fit.tolist(), strict=True)) == {"a": True, "b": True, "c": False}
    slices = [_slice("a", _device("d0")), _slice("b", _device("d0"), _device("d1"))]
    allocator = DraAllocator(slices, [], CLASSES, compile_selector)
    plugin = DynamicResourcesFilter(
        {}, set(CLASSES), allocator=allocator, extended={"example.com/gpu": "gpu"}
    )
    mask = plugin.filter(pod, table, idx, ctx)
    assert dict(zip(names, mask.tolist(), strict=True)) == {"a": False, "b": True, "c": True}
    assert plugin.outcomes()["a"].reason == "cannot allocate all claims"
    assert "c" not in plugin.outcomes()  # a device plugin's resource: nothing for DRA there


def test_the_extended_resources_claim_is_allocated_after_the_pods_claims() -> None:
    """Upstream appends the extended resources' claim to the pod's claims: on ``a`` (one
    device, lacking the attribute the pod's claim selects on) the search meets the claim's
    CEL error before finding the two devices the extended resource wants missing."""
    table = NodeTable()
    table.upsert_node("a", {"cpu": 4000, "memory": 2**34, "pods": 110})
    raw = pod_manifest("p", cpu="1", memory="1Gi")
    raw["metadata"]["uid"] = "u"
    raw["spec"]["resourceClaims"] = [{"name": "x", "resourceClaimName": "c"}]
    resources = raw["spec"]["containers"][0]["resources"]
    resources["requests"]["example.com/gpu"] = "2"
    resources.setdefault("limits", {})["example.com/gpu"] = "2"
    pod = Pod.from_dict(raw)
    claim = _claim("c", _request("r", 1, f'device.attributes["{DRIVER}"].model == "a100"'))
    allocator = DraAllocator([_slice("a", _device("d0"))], [claim], CLASSES, compile_selector)
    plugin = DynamicResourcesFilter(
        {("default", "c"): claim}, set(CLASSES), allocator=allocator, extended={"example.com/gpu": "gpu"}
    )
    assert not plugin.filter(pod, table, table.active_indices(), SchedulingContext()).any()
    assert "CEL runtime error: no such key: model" in str(plugin.outcomes()["a"].error)


def test_a_selectors_result_is_kept_per_device_as_it_sees_it() -> None:
    """Devices alike (one model on many nodes) are evaluated once; one that differs in any
    attribute or capacity is evaluated again; an error is kept too."""
    selector = compile_selector(f'device.attributes["{DRIVER}"].model == "a100"')
    calls = []
    evaluate = selector._evaluate

    def counted(device: DeviceView) -> Any:
        calls.append(device)
        return evaluate(device)

    selector._evaluate = counted  # type: ignore[method-assign]
    a100 = DeviceView(DRIVER, {"model": {"string": "a100"}}, {"memory": Fraction(1)})
    assert selector.matches(a100) and selector.matches(
        DeviceView(DRIVER, {"model": {"string": "a100"}}, {"memory": Fraction(1)})
    )
    assert not selector.matches(DeviceView(DRIVER, {"model": {"string": "t4"}}, {"memory": Fraction(1)}))
    assert selector.matches(DeviceView(DRIVER, {"model": {"string": "a100"}}, {"memory": Fraction(2)}))
    bare = DeviceView(DRIVER, {}, {})
    for _ in range(2):
        with pytest.raises(SelectorError, match="no such key: model"):
            selector.matches(bare)
    assert len(calls) == 4


def test_cel_strings_extension_as_kubernetes_loads_it() -> None:
    view = DeviceView(
        DRIVER, {"product": {"string": "NVIDIA A100-SXM4-40GB"}, "tags": {"string": " a,b,c "}}, {}
    )
    product = f'device.attributes["{DRIVER}"].product'
    tags = f'device.attributes["{DRIVER}"].tags'
    for expression in (
        f'{product}.lowerAscii().contains("a100") && {product}.upperAscii() == "NVIDIA A100-SXM4-40GB"',
        f'{product}.indexOf("A100") == 7 && {product}.lastIndexOf("0") == 18 && {product}.indexOf("x") == -1',
        f'{product}.charAt(0) == "N" && {product}.substring(7, 11) == "A100"',
        f'{product}.substring(17) == "40GB" && {product}.charAt(21) == ""',
        f'{tags}.trim().split(",") == ["a", "b", "c"] && {tags}.trim().split(",", 2) == ["a", "b,c"]',
        f'["a", "b"].join("-") == "a-b" && {product}.replace("-", " ", 1) == "NVIDIA A100 SXM4-40GB"',
        "[1, 2, 3].indexOf(2) == 1 && [1, 2, 2].lastIndexOf(2) == 2",
    ):
        assert compile_selector(expression).matches(view), expression
    with pytest.raises(SelectorError, match="index out of range"):
        compile_selector(f"{product}.charAt(99) == 'x'").matches(view)
    with pytest.raises(SelectorNotModelled, match="function sort"):
        compile_selector("[2, 1].sort() == [1, 2]").matches(view)


def test_cel_python_failing_on_its_own_is_not_judged_never_a_traceback() -> None:
    """An exception of cel-python's own (not a CEL error: its recursion limit, a bug) makes
    the selector not judged, said with what it was."""
    selector = compile_selector("device.driver == 'x'")

    class Broken:
        def evaluate(self, activation: Any) -> Any:
            raise RecursionError("maximum recursion depth exceeded")

    selector._program = Broken()
    with pytest.raises(
        SelectorNotModelled, match=r"cel-python could not evaluate it \(RecursionError: maximum"
    ):
        selector.matches(_view())
