"""kube-scheduler's DRA allocator: whether a pod's claims not allocated yet can be allocated on a node.

kube-scheduler v1.37.2's DynamicResources Filter allocates the pod's unallocated claims on
each node with ``k8s.io/dynamic-resource-allocation/structured``; with its default feature
gates (DRAConsumableCapacity and DRADeviceBindingConditions on) that is the *incubating*
allocator. This module follows it:

* **Pools** a node can use (``GatherPools``): of every ResourceSlice with ``nodeName`` the
  node, or without one whose ``allNodes`` is true, whose ``nodeSelector`` matches the node,
  or (``perDeviceNodeSelection``) one of whose devices' ``nodeName``/``allNodes``/
  ``nodeSelector`` does; per pool (driver and name) the slices of the newest generation
  among those. A pool whose slices are not all there (``resourceSliceCount``) counts the
  cluster's slices of that generation (those not for this node too) and is incomplete when
  they fall short, left out when a newer generation exists elsewhere. A pool with duplicate
  device names, duplicate counter sets or a device consuming a counter no set has is
  invalid. Pools are searched by driver and pool name, those with a device with
  ``bindingConditions`` last; slices by name; devices in slice order.
* **Requests**, claim by claim in the pod's order, request by request: ``exactly`` with
  ``allocationMode`` ``ExactCount`` (``count``, 1 by default) or ``All`` (every selectable
  device of the pools: an incomplete or invalid pool is then an error), or
  ``firstAvailable``, whose subrequests are tried in order. A device is selectable when it
  matches the DeviceClass's selectors, then the request's, and (``perDeviceNodeSelection``)
  its own node selection; it is free when no allocated claim of the cluster holds it
  (admin-access results hold nothing; a result with a ``shareID`` holds a share, not the
  device, but consumes its counters) and no claim being allocated does (an admin-access
  request only avoids its own claim's); a device tainted ``NoSchedule`` or ``NoExecute``
  needs a toleration of the request (its taints: the slice's own, then those of every
  DeviceTaintRule selecting it, as upstream's ResourceSlice tracker appends them); a
  device consuming shared counters needs them left (the pool's counter sets less what
  allocated devices, and the devices being allocated, consume); ``constraints``
  ``matchAttribute`` and ``distinctAttribute`` (a fully qualified name, or the driver's
  own attribute) bind the requests they name (all when none). A claim takes at most 32 devices.
* **Search**: exhaustive backtracking in that order, devices of one request taken as
  combinations, the first full solution wins; so the verdict (a solution exists or not)
  is upstream's, and so are its errors, which it meets in the same order: a selector that
  does not compile or errs at run time (a missing attribute), met on a device before a
  solution is found, is an error that fails the whole scheduling attempt (not just the
  node).

Not modelled, and said (:attr:`NodeAllocation.not_modelled`, never a pass or a failure):
a request with ``capacity`` requirements or a candidate device with
``allowMultipleAllocations`` (consumable capacity), a selector using CEL this project does
not evaluate (:class:`SelectorNotModelled`), a node that fits while the DeviceTaintRules
are not known (not listed: their taints could only take devices away), a claim whose
DeviceClass is not known (not listed),
derived attributes (alpha, off), and the allocator's timeout (DRASchedulerFilterTimeout).

Pure: the API's dicts in; selectors are compiled by the caller's ``compile_selector``
(:data:`CompileSelector`; the CEL binding is :mod:`stickypack.dracel`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any, Protocol

from stickypack.core.apiread import Malformed, listed, named, optional_mapping
from stickypack.core.labels import NodeSelectorTerm
from stickypack.core.quantity import QuantityError, parse_quantity

#: At most this many devices in one claim's allocation (``AllocationResultsMaxSize``).
MAX_DEVICES_PER_CLAIM = 32

#: Why a node where the claims fit is not judged when the DeviceTaintRules could not be
#: listed (their taints could take the devices found away; a node that fails fails with them).
UNKNOWN_TAINT_RULES = "the DeviceTaintRules could not be listed: their taints are not applied"


@dataclass(frozen=True, slots=True)
class DeviceView:
    """What a CEL selector sees of a device: its driver, its ``attributes`` (qualified
    name to the API's DeviceAttribute object), its ``capacity`` values (qualified name to
    a quantity), ``allowMultipleAllocations``, and ``capacity_text``: the capacities as
    served (Kubernetes' representation of a quantity, which CEL's ``isInteger`` reads,
    follows its text; a capacity without one is taken as written in its canonical form)."""

    driver: str
    attributes: Mapping[str, Any]
    capacity: Mapping[str, Fraction]
    allow_multiple_allocations: bool = False
    capacity_text: Mapping[str, str] = field(default_factory=dict)


class SelectorError(Exception):
    """A selector that does not compile (``compile_error``) or errs on a device; the
    message is the error's detail."""

    def __init__(self, message: str, compile_error: bool = False) -> None:
        super().__init__(message)
        self.compile_error = compile_error


class SelectorNotModelled(Exception):
    """A selector this project's CEL binding does not evaluate (a function it lacks)."""


class Selector(Protocol):
    """A compiled selector expression."""

    def matches(self, device: DeviceView) -> bool:
        """Whether ``device`` passes; raises :class:`SelectorError` or
        :class:`SelectorNotModelled`."""
        ...


#: Compiles a CEL expression (errors raised by :meth:`Selector.matches`, not here).
CompileSelector = Callable[[str], Selector]

#: A device: its driver, pool and name.
DeviceId = tuple[str, str, str]


def _terms(value: Any, what: str) -> tuple[NodeSelectorTerm, ...] | None:
    if value is None:
        return None
    terms = []
    for k, raw in enumerate(
        listed(optional_mapping(value, what).get("nodeSelectorTerms"), f"{what}.nodeSelectorTerms")
    ):
        try:
            term = NodeSelectorTerm.from_dict(optional_mapping(raw, f"{what}.nodeSelectorTerms[{k}]"))
        except (KeyError, TypeError, ValueError) as exc:
            raise Malformed(f"{what}.nodeSelectorTerms[{k}]: {exc}") from None
        if not term.usable:
            raise Malformed(f"{what}.nodeSelectorTerms[{k}] cannot be parsed")
        terms.append(term)
    return tuple(terms)


def _quantity(value: Any, what: str) -> Fraction:
    if not isinstance(value, str | int) or isinstance(value, bool):
        raise Malformed(f"{what} is not a quantity")
    try:
        return parse_quantity(value)
    except QuantityError:
        raise Malformed(f"{what} is not a quantity") from None


def _counters(value: Any, what: str) -> dict[str, Fraction]:
    return {
        str(name): _quantity(optional_mapping(counter, f"{what}.{name}").get("value"), f"{what}.{name}.value")
        for name, counter in optional_mapping(value, what).items()
    }


@dataclass(frozen=True, slots=True)
class _Device:
    name: str
    view: DeviceView
    taints: tuple[Mapping[str, Any], ...]
    consumes: tuple[tuple[str, dict[str, Fraction]], ...]
    binding_conditions: bool
    node_name: str | None
    all_nodes: bool
    node_selector: tuple[NodeSelectorTerm, ...] | None


@dataclass(frozen=True, slots=True)
class _Slice:
    name: str
    driver: str
    pool: str
    generation: int
    slice_count: int
    node_name: str | None
    all_nodes: bool
    node_selector: tuple[NodeSelectorTerm, ...] | None
    per_device: bool
    devices: tuple[_Device, ...]
    shared_counters: tuple[tuple[str, dict[str, Fraction]], ...]


def _read_slice(obj: Any) -> _Slice:
    meta = optional_mapping(optional_mapping(obj, "the object").get("metadata"), "metadata")
    spec = optional_mapping(obj.get("spec"), "spec")
    driver = named(spec.get("driver"), "spec.driver")
    pool = optional_mapping(spec.get("pool"), "spec.pool")
    devices = []
    for k, raw in enumerate(listed(spec.get("devices"), "spec.devices")):
        at = f"spec.devices[{k}]"
        raw = optional_mapping(raw, at)
        capacity, capacity_text = {}, {}
        for name, cap in optional_mapping(raw.get("capacity"), f"{at}.capacity").items():
            value = optional_mapping(cap, f"{at}.capacity.{name}").get("value")
            capacity[str(name)] = _quantity(value, f"{at}.capacity.{name}.value")
            capacity_text[str(name)] = str(value)
        consumes = tuple(
            (
                named(
                    optional_mapping(c, f"{at}.consumesCounters[{j}]").get("counterSet"),
                    f"{at}.consumesCounters[{j}]",
                ),
                _counters(c.get("counters"), f"{at}.consumesCounters[{j}].counters"),
            )
            for j, c in enumerate(listed(raw.get("consumesCounters"), f"{at}.consumesCounters"))
        )
        multiple = raw.get("allowMultipleAllocations") is True
        devices.append(
            _Device(
                name=named(raw.get("name"), f"{at}.name"),
                view=DeviceView(
                    driver,
                    dict(optional_mapping(raw.get("attributes"), f"{at}.attributes")),
                    capacity,
                    multiple,
                    capacity_text,
                ),
                taints=tuple(
                    optional_mapping(t, f"{at}.taints") for t in listed(raw.get("taints"), f"{at}.taints")
                ),
                consumes=consumes,
                binding_conditions=raw.get("bindingConditions") is not None,
                node_name=raw.get("nodeName") or None,
                all_nodes=raw.get("allNodes") is True,
                node_selector=_terms(raw.get("nodeSelector"), f"{at}.nodeSelector"),
            )
        )
    shared = tuple(
        (
            named(
                optional_mapping(s, f"spec.sharedCounters[{j}]").get("name"), f"spec.sharedCounters[{j}].name"
            ),
            _counters(s.get("counters"), f"spec.sharedCounters[{j}].counters"),
        )
        for j, s in enumerate(listed(spec.get("sharedCounters"), "spec.sharedCounters"))
    )
    generation, count = pool.get("generation"), pool.get("resourceSliceCount")
    if not isinstance(generation, int) or not isinstance(count, int) or count < 1:
        raise Malformed("spec.pool has no generation or resourceSliceCount")
    return _Slice(
        name=str(meta.get("name") or ""),
        driver=driver,
        pool=named(pool.get("name"), "spec.pool.name"),
        generation=generation,
        slice_count=count,
        node_name=spec.get("nodeName") or None,
        all_nodes=spec.get("allNodes") is True,
        node_selector=_terms(spec.get("nodeSelector"), "spec.nodeSelector"),
        per_device=spec.get("perDeviceNodeSelection") is True,
        devices=tuple(devices),
        shared_counters=shared,
    )


@dataclass(frozen=True, slots=True)
class _TaintRule:
    """A DeviceTaintRule's ``spec``: ``taint`` applies to the devices of the slices whose
    driver and pool match ``driver`` and ``pool``, named ``device`` (None: any)."""

    name: str
    driver: str | None
    pool: str | None
    device: str | None
    taint: Mapping[str, Any]


def _optional_str(value: Any, what: str) -> str | None:
    return None if value is None else named(value, what)


def _read_taint_rule(obj: Any) -> _TaintRule | None:
    """The rule of a DeviceTaintRule, or None when it has no ``spec.deviceSelector`` (it
    selects no device, as upstream's tracker reads it)."""
    meta = optional_mapping(optional_mapping(obj, "the object").get("metadata"), "metadata")
    spec = optional_mapping(obj.get("spec"), "spec")
    if spec.get("deviceSelector") is None:
        return None
    taint = optional_mapping(spec.get("taint"), "spec.taint")
    selector = optional_mapping(spec.get("deviceSelector"), "spec.deviceSelector")
    return _TaintRule(
        name=str(meta.get("name") or ""),
        driver=_optional_str(selector.get("driver"), "spec.deviceSelector.driver"),
        pool=_optional_str(selector.get("pool"), "spec.deviceSelector.pool"),
        device=_optional_str(selector.get("device"), "spec.deviceSelector.device"),
        taint=taint,
    )


def _with_rule_taints(s: _Slice, rules: Sequence[_TaintRule]) -> _Slice:
    """``s`` with each rule's taint appended to the taints of the devices it selects (upstream's
    ``applyPatches``: a rule whose driver or pool is not the slice's skips it; one naming a
    device, every other device; the rules in the given order)."""
    applying = [r for r in rules if r.driver in (None, s.driver) and r.pool in (None, s.pool)]
    if not applying:
        return s
    devices = tuple(
        replace(d, taints=(*d.taints, *(r.taint for r in applying if r.device in (None, d.name))))
        for d in s.devices
    )
    return replace(s, devices=devices)


def _node_matches(
    labels: Mapping[str, str],
    node: str,
    node_name: str | None,
    all_nodes: bool,
    terms: tuple[NodeSelectorTerm, ...] | None,
) -> bool:
    if node_name:
        return node_name == node
    if all_nodes:
        return True
    if terms is not None:
        return any(t.matches(labels, node) for t in terms)
    return False


@dataclass(slots=True)
class _Pool:
    driver: str
    name: str
    slices: list[_Slice] = field(default_factory=list)  # targeting the node, by name
    elsewhere: list[_Slice] = field(default_factory=list)  # of its generation, not for the node
    counter_sets: dict[str, dict[str, Fraction]] = field(default_factory=dict)
    incomplete: bool = False
    invalid: str | None = None

    @property
    def id(self) -> str:
        return f"{self.driver}/{self.name}"


@dataclass(frozen=True, slots=True)
class NodeAllocation:
    """One node's outcome: ``fits`` (the claims can all be allocated there); else
    ``reason``, kube-scheduler's words for an unschedulable node (``cannot allocate all
    claims``); ``error``: a fatal error met there (the scheduling attempt fails:
    ``SchedulerError``); ``not_modelled``: why the node is not judged (it passes).
    ``devices``: when the claims fit (and were judged), the devices the allocator picks,
    per claim in the order given (upstream's first solution: what the scheduler would
    allocate with the cluster's devices as given)."""

    fits: bool
    reason: str | None = None
    error: str | None = None
    not_modelled: str | None = None
    devices: tuple[tuple[DeviceId, ...], ...] = ()


@dataclass(frozen=True, slots=True)
class _Request:
    """A request or subrequest: ``name`` (``parent/sub`` for a subrequest: the full name),
    ``base`` and ``sub`` as constraints name them."""

    name: str
    base: str
    sub: str
    class_name: str
    mode: str
    count: int
    admin: bool
    selectors: tuple[str, ...]
    tolerations: tuple[Mapping[str, Any], ...]
    capacity: bool

    @property
    def own_name(self) -> str:
        """The name upstream's messages give it (a subrequest's own, without its parent's)."""
        return self.sub or self.base


def _read_request(raw: Mapping[str, Any], base: str, sub: str) -> _Request:
    selectors = []
    for k, s in enumerate(listed(raw.get("selectors"), "selectors")):
        cel = optional_mapping(optional_mapping(s, f"selectors[{k}]").get("cel"), f"selectors[{k}].cel")
        expression = cel.get("expression")
        if not isinstance(expression, str):
            raise Malformed(
                f"request {base}, selector #{k}: CEL expression empty (unsupported selector type?)"
            )
        selectors.append(expression)
    count = raw.get("count", 1)
    return _Request(
        name=f"{base}/{sub}" if sub else base,
        base=base,
        sub=sub,
        class_name=str(raw.get("deviceClassName") or ""),
        mode=str(raw.get("allocationMode") or "ExactCount"),
        count=count if isinstance(count, int) and not isinstance(count, bool) else 1,
        admin=raw.get("adminAccess") is True,
        selectors=tuple(selectors),
        tolerations=tuple(
            optional_mapping(t, "tolerations") for t in listed(raw.get("tolerations"), "tolerations")
        ),
        capacity=raw.get("capacity") is not None,
    )


@dataclass(frozen=True, slots=True)
class ClaimRequests:
    key: str  # namespace/name
    requests: tuple[tuple[_Request, ...], ...]  # each: one request, or its subrequests in order
    constraints: tuple[tuple[str, str, frozenset[str]], ...]  # (kind, attribute, requests)

    @property
    def takes_a_free_device(self) -> bool:
        """Whether any allocation of it takes at least one device no claim holds: it has a
        request, and none of its requests or subrequests asks for admin access (which may
        use a device another claim holds)."""
        options = [request for choice in self.requests for request in choice]
        return bool(options) and not any(request.admin for request in options)


def read_claim(key: str, obj: Mapping[str, Any]) -> ClaimRequests:
    """A claim's requests and constraints; ValueError (one line) for one not shaped as
    served."""
    try:
        devices = optional_mapping(optional_mapping(obj.get("spec"), "spec").get("devices"), "spec.devices")
        requests: list[tuple[_Request, ...]] = []
        for k, raw in enumerate(listed(devices.get("requests"), "spec.devices.requests")):
            raw = optional_mapping(raw, f"spec.devices.requests[{k}]")
            base = str(raw.get("name") or "")
            if raw.get("exactly") is not None:
                requests.append((_read_request(optional_mapping(raw["exactly"], "exactly"), base, ""),))
            else:
                subs = listed(raw.get("firstAvailable"), "firstAvailable")
                requests.append(
                    tuple(
                        _read_request(optional_mapping(s, "firstAvailable"), base, str(s.get("name") or ""))
                        for s in subs
                    )
                )
        constraints = []
        for k, raw in enumerate(listed(devices.get("constraints"), "spec.devices.constraints")):
            raw = optional_mapping(raw, f"spec.devices.constraints[{k}]")
            names = frozenset(str(n) for n in listed(raw.get("requests"), "requests"))
            if isinstance(raw.get("matchAttribute"), str):
                constraints.append(("match", raw["matchAttribute"], names))
            elif isinstance(raw.get("distinctAttribute"), str):
                constraints.append(("distinct", raw["distinctAttribute"], names))
            else:
                raise Malformed(f"constraint #{k}: empty constraint (unsupported constraint type?)")
    except Malformed as exc:
        raise ValueError(f"ResourceClaim {key}: {exc}") from None
    return ClaimRequests(key, tuple(requests), tuple(constraints))


def _attribute(device: _Device, driver: str, name: str) -> Any:
    """``lookupAttribute``: the fully qualified name, or the driver's own without domain."""
    attrs = device.view.attributes
    if name in attrs:
        return attrs[name]
    domain, _, ident = name.partition("/")
    if domain == driver and ident in attrs:
        return attrs[ident]
    return None


def _attribute_key(value: Any) -> tuple[str, Any] | None:
    if isinstance(value, Mapping):
        for kind in ("string", "int", "bool", "version"):
            if kind in value and value[kind] is not None:
                return kind, value[kind]
    return None


class _Constraint:
    def __init__(self, kind: str, attribute: str, requests: frozenset[str]) -> None:
        self.kind, self.attribute, self.requests = kind, attribute, requests
        self.values: list[tuple[str, Any] | None] = []

    def applies(self, request: _Request) -> bool:
        if not self.requests:
            return True
        return request.base in self.requests or (bool(request.sub) and request.name in self.requests)

    def add(self, request: _Request, device: _Device, driver: str) -> bool:
        if not self.applies(request):
            return True
        raw = _attribute(device, driver, self.attribute)
        if raw is None:
            return False
        value = _attribute_key(raw)
        if value is None:
            return False
        if self.kind == "match":
            if self.values and self.values[0] != value:
                return False
        elif value in self.values:
            return False
        self.values.append(value)
        return True

    def remove(self, request: _Request) -> None:
        if self.applies(request):
            self.values.pop()


def _tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    if toleration.get("effect") and toleration.get("effect") != taint.get("effect"):
        return False
    if toleration.get("key") and toleration.get("key") != taint.get("key"):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Equal":
        return (toleration.get("value") or "") == (taint.get("value") or "")
    return operator == "Exists"


def _taint_prevents(device: _Device, request: _Request) -> bool:
    return any(
        taint.get("effect") in ("NoSchedule", "NoExecute")
        and not any(_tolerates(t, taint) for t in request.tolerations)
        for taint in device.taints
    )


class _Fatal(Exception):
    """An error that fails the scheduling attempt (upstream's ``Allocate`` error)."""


class _NotModelled(Exception):
    """What the search met and this module does not model (consumable capacity, CEL the
    binding lacks...): the node is not judged (:attr:`NodeAllocation.not_modelled`)."""


class _TooMany(Exception):
    """``errAllocationResultMaxSizeExceeded``: a request would take the claim past
    :data:`MAX_DEVICES_PER_CLAIM`; upstream backtracks past the earlier requests' devices
    (their count is fixed) up to a ``firstAvailable`` choice or the claim."""


def _object_name(obj: Any) -> str:
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    name = meta.get("name") if isinstance(meta, Mapping) else None
    return str(name or "(unnamed)")


class DraAllocator:
    """The cluster's slices, allocated devices and DeviceClasses, to allocate a pod's
    unallocated claims on one node at a time (:meth:`allocate`). Built from every
    ResourceSlice and ResourceClaim of the cluster (as listed), the DeviceClasses by name
    (None: not listed), the CEL binding and the cluster's DeviceTaintRules (None: not
    listed; then a node where the claims fit is not judged, :attr:`NodeAllocation.not_modelled`).
    A slice, claim or rule not shaped as served is left out, named in :attr:`problems`."""

    def __init__(
        self,
        slices: Iterable[Mapping[str, Any]],
        claims: Iterable[Mapping[str, Any]],
        classes: Mapping[str, Mapping[str, Any]] | None,
        compile_selector: CompileSelector,
        taint_rules: Iterable[Mapping[str, Any]] | None = (),
    ) -> None:
        self.problems: list[str] = []
        rules: list[_TaintRule] = []
        for obj in taint_rules or ():
            try:
                rule = _read_taint_rule(obj)
            except Malformed as exc:
                self.problems.append(f"DeviceTaintRule {_object_name(obj)}: {exc}; left out")
                continue
            if rule is not None:
                rules.append(rule)
        #: whether the DeviceTaintRules are known (listed)
        self.taint_rules_known = taint_rules is not None
        self.slices: list[_Slice] = []
        for obj in slices:
            try:
                self.slices.append(_with_rule_taints(_read_slice(obj), rules))
            except Malformed as exc:
                self.problems.append(f"ResourceSlice {_object_name(obj)}: {exc}; left out")
        #: devices allocated to one claim (not free); ``shared``: devices a claim has a share
        #: of (a result with a ``shareID``: consumable capacity), not in use as a whole but
        #: consuming their counters, as upstream's ``IsDeviceAllocated`` counts them
        self.allocated: set[DeviceId] = set()
        self.shared: set[DeviceId] = set()
        for obj in claims:
            status = obj.get("status") if isinstance(obj, Mapping) else None
            allocation = status.get("allocation") if isinstance(status, Mapping) else None
            devices = allocation.get("devices") if isinstance(allocation, Mapping) else None
            results = devices.get("results") if isinstance(devices, Mapping) else None
            for r in results if isinstance(results, list) else ():
                if isinstance(r, Mapping) and r.get("adminAccess") is not True:
                    device = (str(r.get("driver")), str(r.get("pool")), str(r.get("device")))
                    (self.allocated if r.get("shareID") is None else self.shared).add(device)
        self.classes = classes
        self._compile = compile_selector
        self._compiled: dict[str, Selector] = {}
        self._local: dict[str, list[_Slice]] = {}  # node-local slices by node
        self._shared: list[_Slice] = []  # the others (node selection by selector, all nodes...)
        self._by_pool: dict[tuple[str, str], list[_Slice]] = {}
        for s in self.slices:
            if s.node_name:
                self._local.setdefault(s.node_name, []).append(s)
            else:
                self._shared.append(s)
            self._by_pool.setdefault((s.driver, s.pool), []).append(s)

    def selector(self, expression: str) -> Selector:
        found = self._compiled.get(expression)
        if found is None:
            found = self._compiled[expression] = self._compile(expression)
        return found

    def pools(self, node: str, labels: Mapping[str, str]) -> list[_Pool]:
        """``GatherPools``: the pools ``node`` can use, in search order."""
        by_pool: dict[tuple[str, str], list[_Slice]] = {}
        for s in [*self._local.get(node, ()), *self._shared]:
            if s.node_name or s.all_nodes or s.node_selector is not None:
                relevant = _node_matches(labels, node, s.node_name, s.all_nodes, s.node_selector)
            elif s.per_device:
                relevant = any(
                    _node_matches(labels, node, d.node_name, d.all_nodes, d.node_selector) for d in s.devices
                )
            else:
                continue
            if not relevant:
                continue
            kept = by_pool.setdefault((s.driver, s.pool), [])
            if kept and s.generation < kept[0].generation:
                continue
            if kept and s.generation > kept[0].generation:
                kept.clear()
            kept.append(s)
        plain: list[_Pool] = []
        waiting: list[_Pool] = []
        for (driver, name), found in by_pool.items():
            pool = _Pool(driver, name)
            generation, count = found[0].generation, found[0].slice_count
            if len(found) != count:
                same = self._by_pool[(driver, name)]
                if any(s.generation > generation for s in same):
                    continue  # obsolete
                everywhere = [s for s in same if s.generation == generation]
                if len(everywhere) != count:
                    pool.incomplete = True
                    plain.append(pool)
                    continue
                ids = {id(s) for s in found}
                pool.elsewhere = [s for s in everywhere if id(s) not in ids]
            pool.slices = sorted(found, key=lambda s: s.name)
            self._validate(pool)
            has_conditions = any(d.binding_conditions for s in pool.slices for d in s.devices)
            (waiting if has_conditions else plain).append(pool)
        order = sorted(plain, key=lambda p: (p.driver, p.name))
        return order + sorted(waiting, key=lambda p: (p.driver, p.name))

    @staticmethod
    def _validate(pool: _Pool) -> None:
        counter_slices = [s for s in pool.slices + pool.elsewhere if s.shared_counters]
        pool.slices = [s for s in pool.slices if not s.shared_counters]
        pool.elsewhere = [s for s in pool.elsewhere if not s.shared_counters]
        names: set[str] = set()
        for s in pool.slices:
            for d in s.devices:
                if d.name in names:
                    pool.invalid = f"duplicate device name {d.name}"
                    return
                names.add(d.name)
        for s in counter_slices:
            for set_name, counters in s.shared_counters:
                if set_name in pool.counter_sets:
                    pool.invalid = f"duplicate counter set name {set_name}"
                    return
                pool.counter_sets[set_name] = counters
        for s in pool.slices + pool.elsewhere:
            for d in s.devices:
                for set_name, counters in d.consumes:
                    if set_name not in pool.counter_sets:
                        pool.invalid = f"counter set {set_name} not found"
                        return
                    missing = [c for c in counters if c not in pool.counter_sets[set_name]]
                    if missing:
                        pool.invalid = f"counter {missing[0]} not found in counter set {set_name}"
                        return

    def allocate(
        self, node: str, labels: Mapping[str, str], claims: Sequence[ClaimRequests]
    ) -> NodeAllocation:
        """Whether ``claims`` (the pod's unallocated claims, in its order) can all be
        allocated on ``node`` (of ``labels``), as upstream's ``Allocate`` decides."""
        if not claims:
            return NodeAllocation(True)
        try:
            search = _Search(self, node, labels, claims)
            done = search.run()
        except _Fatal as exc:
            return NodeAllocation(False, error=str(exc))
        except _NotModelled as exc:
            return NodeAllocation(True, not_modelled=str(exc))
        if done and not self.taint_rules_known:
            return NodeAllocation(True, not_modelled=UNKNOWN_TAINT_RULES)
        if done:
            return NodeAllocation(True, devices=search.solution)
        if any(p.invalid for p in search.pools):
            return NodeAllocation(False, "invalid resource pools were encountered")
        return NodeAllocation(False, "cannot allocate all claims")


@dataclass(slots=True)
class _Candidate:
    device: _Device
    pool: _Pool
    slice: _Slice

    @property
    def id(self) -> DeviceId:
        return (self.pool.driver, self.pool.name, self.device.name)


class _Search:
    """One ``Allocate`` call: the requests' data, then the backtracking search."""

    def __init__(
        self, alloc: DraAllocator, node: str, labels: Mapping[str, str], claims: Sequence[ClaimRequests]
    ) -> None:
        self.alloc, self.node, self.labels, self.claims = alloc, node, labels, claims
        self.pools = alloc.pools(node, labels)
        self.matches: dict[tuple[DeviceId, int, int, int], bool] = {}
        self.allocating: dict[DeviceId, set[int]] = {}
        self.consumed: dict[str, dict[str, dict[str, Fraction]]] = {}  # pool id -> set -> counter
        self.available: dict[str, dict[str, dict[str, Fraction]]] = {}
        self.results = [0] * len(claims)
        self.solution: tuple[tuple[DeviceId, ...], ...] = ()  # set once one is found
        self.constraints = [[_Constraint(*c) for c in claim.constraints] for claim in claims]
        self.all_devices: dict[tuple[int, int, int], list[_Candidate]] = {}
        for ci, claim in enumerate(claims):
            minimum = 0
            for ri, options in enumerate(claim.requests):
                least = None
                for si, request in enumerate(options):
                    self._validate(ci, ri, si, request)
                    n = len(self.all_devices[(ci, ri, si)]) if request.mode == "All" else request.count
                    least = n if least is None else min(least, n)
                if least is not None and least > MAX_DEVICES_PER_CLAIM - minimum:
                    raise _Fatal(
                        f"claim {claim.key}, request {options[0].base}: adding {least} devices exceeds the "
                        f"claim limit of {MAX_DEVICES_PER_CLAIM}, with {minimum} already accounted for"
                    )
                minimum += least or 0

    def _class(self, ci: int, request: _Request) -> Mapping[str, Any]:
        classes = self.alloc.classes
        if classes is None:
            raise _NotModelled(f"claim {self.claims[ci].key}: its DeviceClass could not be listed")
        found = classes.get(request.class_name)
        if found is None:
            raise _Fatal(
                f"claim {self.claims[ci].key}, request {request.own_name}: could not retrieve device class "
                f'{request.class_name}: deviceclass.resource.k8s.io "{request.class_name}" not found'
            )
        return found

    def _validate(self, ci: int, ri: int, si: int, request: _Request) -> None:
        claim = self.claims[ci]
        if request.capacity:
            raise _NotModelled(
                f"claim {claim.key}, request {request.name}: capacity requests (consumable capacity)"
            )
        if not request.class_name:
            raise _Fatal(f"claim {claim.key}, request {request.own_name}: missing device class name")
        if request.mode not in ("ExactCount", "All"):
            raise _Fatal(
                f"claim {claim.key}, request {request.own_name}: unsupported count mode {request.mode}"
            )
        self._class(ci, request)
        if request.mode != "All":
            return
        found = []
        for pool in self.pools:
            if pool.incomplete:
                raise _Fatal(
                    f"claim {claim.key}, request {request.own_name}: asks for all devices, but resource pool "
                    f"{pool.id} is currently being updated"
                )
            if pool.invalid:
                raise _Fatal(
                    f"claim {claim.key}, request {request.own_name}: asks for all devices, but resource pool "
                    f"{pool.id} is currently invalid"
                )
            for s in pool.slices:
                for d in s.devices:
                    candidate = _Candidate(d, pool, s)
                    if self._selectable(ci, ri, si, request, candidate):
                        found.append(candidate)
        self.all_devices[(ci, ri, si)] = found

    def _selectable(self, ci: int, ri: int, si: int, request: _Request, c: _Candidate) -> bool:
        key = (c.id, ci, ri, si)
        known = self.matches.get(key)
        if known is not None:
            return known
        device_class = self._class(ci, request)
        spec = device_class.get("spec")
        class_selectors = spec.get("selectors") if isinstance(spec, Mapping) else None
        expressions = []
        for s in class_selectors if isinstance(class_selectors, list) else ():
            cel = s.get("cel") if isinstance(s, Mapping) else None
            expressions.append(cel.get("expression") if isinstance(cel, Mapping) else None)
        ok = self._match(f"class {request.class_name}", expressions, c) and self._match(
            f"claim {self.claims[ci].key}", list(request.selectors), c
        )
        if ok and c.slice.per_device:
            d = c.device
            ok = _node_matches(self.labels, self.node, d.node_name, d.all_nodes, d.node_selector)
        if ok and c.device.view.allow_multiple_allocations:
            claim = self.claims[ci].key
            raise _NotModelled(f"claim {claim}: a device allowing multiple allocations (consumable capacity)")
        self.matches[key] = ok
        return ok

    def _match(self, owner: str, expressions: list[Any], c: _Candidate) -> bool:
        for i, expression in enumerate(expressions):
            if not isinstance(expression, str):
                raise _Fatal(f"{owner}: selector #{i}: CEL expression empty (unsupported selector type?)")
            try:
                if not self.alloc.selector(expression).matches(c.device.view):
                    return False
            except SelectorNotModelled as exc:
                raise _NotModelled(f"{owner}: selector #{i}: {exc}") from None
            except SelectorError as exc:
                if exc.compile_error:
                    raise _Fatal(f"{owner}: selector #{i}: CEL compile error: {exc}") from None
                raise _Fatal(
                    f"{owner}: selector #{i} on device {'/'.join(c.id)}: CEL runtime error: {exc}"
                ) from None
        return True

    def run(self) -> bool:
        try:
            return self._one(0, 0, 0, 0, False, (0, 0, 0))
        except _TooMany:
            return False

    def _in_use(self, device: DeviceId) -> bool:
        return device in self.alloc.allocated or bool(self.allocating.get(device))

    def _one(self, ci: int, ri: int, si: int, di: int, in_sub: bool, start: tuple[int, int, int]) -> bool:
        """``allocateOne``: device ``di`` of (sub)request ``si`` of request ``ri`` of claim
        ``ci``, searching from ``start`` (pool, slice, device) within one request."""
        if ci >= len(self.claims):
            held = self.allocating.items()
            claims = range(len(self.claims))
            self.solution = tuple(tuple(d for d, owners in held if k in owners) for k in claims)
            return True
        claim = self.claims[ci]
        if ri >= len(claim.requests):
            try:
                return self._one(ci + 1, 0, 0, 0, False, (0, 0, 0))
            except _TooMany:
                return False
        options = claim.requests[ri]
        if not in_sub and options and options[0].sub:
            exceeded = True
            for k in range(len(options)):
                try:
                    if self._one(ci, ri, k, 0, True, (0, 0, 0)):
                        return True
                    exceeded = False
                except _TooMany:
                    continue
            if exceeded:
                raise _TooMany
            return False
        if not options:
            return self._one(ci, ri + 1, 0, 0, False, (0, 0, 0))
        request = options[si]
        every = request.mode == "All"
        if every and not self.all_devices[(ci, ri, si)]:
            return False
        needed = len(self.all_devices[(ci, ri, si)]) if every else request.count
        if di >= needed:
            return self._one(ci, ri + 1, 0, 0, False, (0, 0, 0))
        if needed - di > MAX_DEVICES_PER_CLAIM - self.results[ci]:
            raise _TooMany
        if every:
            c = self.all_devices[(ci, ri, si)][di]
            undo = self._take(ci, request, c, must=True)
            if undo is None:
                return False
            try:
                if self._one(ci, ri, si, di + 1, in_sub, (0, 0, 0)):
                    return True
            finally:
                undo()  # a solution found is not kept: only whether there is one counts
            return False
        for pi in range(start[0], len(self.pools)):
            pool = self.pools[pi]
            if pool.incomplete or pool.invalid:
                continue
            for sj in range(start[1] if pi == start[0] else 0, len(pool.slices)):
                s = pool.slices[sj]
                first = start[2] if (pi, sj) == start[:2] else 0
                for dk in range(first, len(s.devices)):
                    c = _Candidate(s.devices[dk], pool, s)
                    if request.admin and ci in self.allocating.get(c.id, ()):
                        continue
                    if not request.admin and self._in_use(c.id):
                        continue
                    if not self._selectable(ci, ri, si, request, c):
                        continue
                    undo = self._take(ci, request, c, must=False)
                    if undo is None:
                        continue
                    try:
                        if self._one(ci, ri, si, di + 1, in_sub, (pi, sj, dk + 1)):
                            return True
                    finally:
                        undo()
        return False

    def _take(self, ci: int, request: _Request, c: _Candidate, must: bool) -> Callable[[], None] | None:
        """``allocateDevice``: mark ``c`` allocated for claim ``ci`` (counters, constraints),
        returning how to undo it, or None when it cannot be taken."""
        if request.admin and ci in self.allocating.get(c.id, ()):
            return None
        if not request.admin and self._in_use(c.id):
            return None
        if _taint_prevents(c.device, request):
            return None
        if c.device.consumes and not self._counters(c, 1):
            return None
        added: list[_Constraint] = []
        for constraint in self.constraints[ci]:
            if not constraint.add(request, c.device, c.pool.driver):
                for done in reversed(added):
                    done.remove(request)
                if c.device.consumes:
                    self._counters(c, -1)
                if must:
                    raise _Fatal(
                        f"claim {self.claims[ci].key}, request {request.own_name}: cannot add device "
                        f"{'/'.join(c.id)} because a claim constraint would not be satisfied"
                    )
                return None
            added.append(constraint)
        self.allocating.setdefault(c.id, set()).add(ci)
        self.results[ci] += 1

        def undo() -> None:
            self.results[ci] -= 1
            self.allocating[c.id].discard(ci)
            for done in reversed(added):
                done.remove(request)
            if c.device.consumes:
                self._counters(c, -1)

        return undo

    def _counters(self, c: _Candidate, sign: int) -> bool:
        """Add (``sign`` 1, when they fit what is left) or give back (-1) the counters
        ``c``'s device consumes."""
        pool = c.pool
        if pool.id not in self.available:
            left = {name: dict(counters) for name, counters in pool.counter_sets.items()}
            for s in pool.slices + pool.elsewhere:
                for d in s.devices:
                    device = (pool.driver, pool.name, d.name)
                    if device not in self.alloc.allocated and device not in self.alloc.shared:
                        continue
                    for set_name, counters in d.consumes:
                        for name, value in counters.items():
                            if name in left.get(set_name, {}):
                                left[set_name][name] -= value
            self.available[pool.id] = left
        consumed = self.consumed.setdefault(pool.id, {})
        for set_name, counters in c.device.consumes:
            into = consumed.setdefault(set_name, {})
            for name, value in counters.items():
                into[name] = into.get(name, Fraction(0)) + sign * value
        if sign < 0:
            return True
        left = self.available[pool.id]
        for set_name, counters in left.items():
            for name, value in counters.items():
                if value < consumed.get(set_name, {}).get(name, Fraction(0)):
                    self._counters(c, -1)
                    return False
        return True
