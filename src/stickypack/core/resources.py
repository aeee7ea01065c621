"""Integer resources as kube-scheduler counts them.

cpu is in millicores, memory and ephemeral-storage in bytes, ``pods`` in pods, extended
resources (``nvidia.com/gpu``...) in their own integer unit. A resource list is a plain
``dict[str, int]``.
"""

from __future__ import annotations

from collections.abc import Mapping

from stickypack.core.quantity import QuantityError, milli_value, parse_quantity

CPU = "cpu"
MEMORY = "memory"
PODS = "pods"
EPHEMERAL_STORAGE = "ephemeral-storage"
#: The GPU resources the cluster-autoscaler knows (its ``GPUVendorResourceNames``), in its
#: order: a GPU node is weighed by the first of them it has allocatable. NVIDIA's, Intel's
#: Gaudi and Xe, AMD's and Windows' DirectX.
GPU_RESOURCES = (
    "nvidia.com/gpu",
    "habana.ai/gaudi",
    "gpu.intel.com/xe",
    "amd.com/gpu",
    "microsoft.com/directx",
)

#: Requests kube-scheduler assumes for scoring when a container sets none
#: (``DefaultMilliCPURequest``, ``DefaultMemoryRequest``): 100 millicores and 200 MiB.
DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024

ResourceList = dict[str, int]


#: Largest amount of one resource we hold (millicores, bytes, count): 2**50, about a
#: thousand trillion. Larger quantities ("100Ei", which the API server accepts) are clamped
#: to it, so sums over a node's pods and kube-scheduler's ``requested * 100`` stay in int64
#: (kube-scheduler's own int64 arithmetic overflows there; no real node or pod comes near).
MAX_AMOUNT = 2**50


def clamp_amounts(resources: ResourceList) -> ResourceList:
    """``resources`` with every amount at most :data:`MAX_AMOUNT`, in place."""
    for name, amount in resources.items():
        if amount > MAX_AMOUNT:
            resources[name] = MAX_AMOUNT
    return resources


def parse_resource_list(raw: Mapping[str, object] | None) -> ResourceList:
    """Turn a Kubernetes ResourceList (``{"cpu": "500m", "memory": "1Gi"}``) into integers,
    each at most :data:`MAX_AMOUNT`. A negative amount is refused (``QuantityError``), as the
    API server refuses it in requests, limits and a node's allocatable."""
    # rounding up to thousandths, then to whole units, is rounding up to whole units
    return round_up_amounts(parse_milli_resource_list(raw))


def parse_milli_resource_list(raw: Mapping[str, object] | None, where: str = "") -> ResourceList:
    """A container's or a pod's ResourceList in thousandths of each resource's unit, each
    value rounded up there, as the API server stores it (``SetDefaults_ResourceList`` rounds
    every quantity up to milli scale): cpu ``"0.5m"`` is 1 millicore, memory ``"0.5"`` is
    500 thousandths of a byte. kube-scheduler adds these and rounds the pod's total once
    (:func:`round_up_amounts`), so two containers of 0.5 bytes need 1 byte. A negative
    amount is refused (``QuantityError``), as the API server refuses it. ``where`` names the
    list in an error (``spec.containers[0].resources.requests``: its ``.cpu`` is named),
    which then also refuses a list that is not a mapping."""
    if where and raw and not isinstance(raw, Mapping):
        raise QuantityError(f"{where} must be an object, got {brief_repr(raw)}")
    out: ResourceList = {}
    for name, quantity in (raw or {}).items():
        at = f"{where}.{name}" if where else str(name)
        try:
            amount = milli_value(quantity)  # type: ignore[arg-type]
        except QuantityError as exc:
            if not where:
                raise
            raise QuantityError(f"{at}: {exc}") from None
        if amount < 0 or (amount == 0 and parse_quantity(quantity) < 0):  # type: ignore[arg-type]
            raise QuantityError(f"{at}: a negative quantity: {quantity!r}")
        out[str(name)] = amount
    return out


def brief_repr(value: object, limit: int = 60) -> str:
    """``repr(value)``, cut to ``limit`` characters (an error shows what it got, not all of it)."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 3]}..."


def round_up_amounts(millis: ResourceList, clamp: bool = True) -> ResourceList:
    """Thousandths (:func:`parse_milli_resource_list`) to the units kube-scheduler counts:
    cpu stays in millicores, every other resource is rounded up to whole units
    (``Quantity.Value()``); each at most :data:`MAX_AMOUNT` unless ``clamp`` is false (for
    a caller that refuses larger ones rather than cut them)."""
    units = {name: v if name == CPU else -(-v // 1000) for name, v in millis.items()}
    return clamp_amounts(units) if clamp else units


def add_into(total: ResourceList, other: Mapping[str, int]) -> None:
    """``total += other``, per resource, in place."""
    for name, amount in other.items():
        total[name] = total.get(name, 0) + amount


def max_into(total: ResourceList, other: Mapping[str, int]) -> None:
    """``total = max(total, other)``, per resource, in place. A resource ``total`` lacks is
    taken whatever its amount, 0 included (component-helpers' ``maxResourceList``): an init
    container's request of 0 names the resource, which kube-scheduler's NodeInfo then
    counts as 0 rather than its default for a pod with pod-level requests."""
    for name, amount in other.items():
        if name not in total or amount > total[name]:
            total[name] = amount
