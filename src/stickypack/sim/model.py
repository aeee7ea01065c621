"""The simulator's model of a cluster: node pools, the cluster-autoscaler, build caches,
and the workload assumptions. Every number here is a documented default that a caller can
override (see ``docs/simulator.md``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from stickypack.core.resources import CPU, MAX_AMOUNT, MEMORY, PODS

GiB = 1024**3
#: Largest sizes the model takes (a node's allocatable, a pod's request): far above any real
#: node, and low enough that kube-scheduler's ``requested * 100 * weight`` stays in int64.
MAX_MILLICORES = 2**40
MAX_BYTES = 2**50  # 1 PiB
MAX_PODS = 1_000_000
#: Largest lognormal sigma: beyond it the draws overflow to infinity (and are capped anyway).
MAX_SIGMA = 5.0
_MAX_SIZE = {CPU: MAX_MILLICORES, MEMORY: MAX_BYTES, PODS: MAX_PODS}


def _require(ok: bool, key: str, rule: str, value: object) -> None:
    """Raise ``ValueError("<key> must be <rule>, got <value>")`` unless ``ok``: a model
    parameter outside its range would make the simulation meaningless or never end."""
    if not ok:
        raise ValueError(f"{key} must be {rule}, got {value!r}")


def _require_request(model: object, cpu_keys: tuple[str, ...], memory_keys: tuple[str, ...]) -> None:
    """Pod requests in the model: millicores and bytes, >= 0 and at most the largest node."""
    for keys, limit in ((cpu_keys, MAX_MILLICORES), (memory_keys, MAX_BYTES)):
        for key in keys:
            value = getattr(model, key)
            _require(0 <= value <= limit, key, f">= 0 and <= {limit}", value)


@dataclass(frozen=True, slots=True)
class NodePool:
    """A group of identical nodes the autoscaler can grow and shrink.

    ``allocatable``: cpu millicores, memory bytes, pods. ``price_per_hour`` in any currency.
    ``provision_delay_s``: seconds from the scale-up decision to a Ready node (GCE: 3-4 min).
    """

    name: str = "user"
    allocatable: dict[str, int] = field(default_factory=lambda: {CPU: 7_910, MEMORY: 47 * GiB, PODS: 110})
    price_per_hour: float = 0.47
    min_size: int = 1
    max_size: int = 500
    provision_delay_s: float = 210.0
    labels: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for resource in (CPU, MEMORY, PODS):
            amount = self.allocatable.get(resource, 0)
            limit = _MAX_SIZE[resource]
            _require(0 < amount <= limit, f"allocatable.{resource}", f"> 0 and <= {limit}", amount)
        for resource, amount in self.allocatable.items():  # extended resources
            if resource not in _MAX_SIZE:
                _require(
                    0 <= amount <= MAX_AMOUNT, f"allocatable.{resource}", f">= 0 and <= {MAX_AMOUNT}", amount
                )
        _require(self.price_per_hour >= 0, "price_per_hour", ">= 0", self.price_per_hour)
        _require(self.min_size >= 0, "min_size", ">= 0", self.min_size)
        _require(self.max_size >= 1, "max_size", ">= 1", self.max_size)
        # named as min_size: with max_size >= 1 checked first, a --sim-config that sets only
        # max_size passes the default min_size (1), so the key named is one the file sets
        _require(self.min_size <= self.max_size, "min_size", f"<= max_size ({self.max_size})", self.min_size)
        _require(self.provision_delay_s >= 0, "provision_delay_s", ">= 0", self.provision_delay_s)


@dataclass(frozen=True, slots=True)
class AutoscalerConfig:
    """cluster-autoscaler flags, with its documented defaults (FAQ.md)."""

    scan_interval_s: float = 10.0
    scale_down_utilization_threshold: float = 0.5
    scale_down_unneeded_time_s: float = 600.0
    scale_down_delay_after_add_s: float = 600.0
    max_node_provision_time_s: float = 900.0
    max_empty_bulk_delete: int = 10
    #: Put ``DeletionCandidateOfClusterAutoscaler`` (PreferNoSchedule) on unneeded nodes.
    soft_taint_unneeded: bool = True
    #: Only least-waste is modelled (the z2jh and GKE default).
    expander: str = "least-waste"

    def __post_init__(self) -> None:
        # the run scans every scan_interval_s until the last pod ends: under 1 s, a day's
        # replay would take hours (the cluster-autoscaler's own default is 10 s)
        _require(self.scan_interval_s >= 1, "scan_interval_s", ">= 1", self.scan_interval_s)
        threshold = self.scale_down_utilization_threshold
        _require(0 <= threshold <= 1, "scale_down_utilization_threshold", "in [0, 1]", threshold)
        for key in ("scale_down_unneeded_time_s", "scale_down_delay_after_add_s"):
            _require(getattr(self, key) >= 0, key, ">= 0", getattr(self, key))
        provision = self.max_node_provision_time_s
        _require(provision > 0, "max_node_provision_time_s", "> 0", provision)
        _require(self.max_empty_bulk_delete >= 1, "max_empty_bulk_delete", ">= 1", self.max_empty_bulk_delete)
        expander = self.expander
        _require(expander == "least-waste", "expander", "'least-waste' (the one modelled)", expander)


@dataclass(frozen=True, slots=True)
class CacheConfig:
    """Per-node image cache of built repos and the image cleaner.

    A node keeps the images of repos it built; when it holds more than ``high_images`` the
    image cleaner prunes the least recently used down to ``low_images``. The defaults take
    a 400 GB image disk, the cleaner's 80% trigger and ~1.5 GB of own layers per repo2docker
    image (base layers are shared). A deleted node's
    cache is gone. A build is a *hit* when its node built the same repo before (any ref);
    a hit takes ``hit_time_fraction`` of the cold build time.

    What a node lists in ``status.images`` (kube-scheduler's ImageLocality reads it): every
    image it built or pulled for a pod, the least recently used pruned by the same
    thresholds, and of those only the ``node_status_max_images`` largest, as kubelet
    reports them (``--node-status-max-images``; -1: all).
    """

    high_images: int = 200
    low_images: int = 150
    hit_time_fraction: float = 0.3
    node_status_max_images: int = 50

    def __post_init__(self) -> None:
        _require(self.high_images >= 1, "high_images", ">= 1", self.high_images)
        low = self.low_images
        _require(0 <= low <= self.high_images, "low_images", "in [0, high_images]", low)
        _require(0 <= self.hit_time_fraction <= 1, "hit_time_fraction", "in [0, 1]", self.hit_time_fraction)
        listed = self.node_status_max_images
        _require(listed >= -1, "node_status_max_images", ">= -1 (-1: all)", listed)


@dataclass(frozen=True, slots=True)
class BinderModel:
    """Assumptions that turn launch events into pods (the trace carries no build data).

    Change model: the first launch of a repo in a replay needs a build with probability
    ``first_launch_build_prob`` (repos new to the site, or changed since their last build
    before the replay); after that, a repo changes as a Poisson process of
    ``changes_per_day`` and a launch needs a build when the repo changed since its last
    build. Launches of a repo while it builds wait for that build.

    Sessions: active time lognormal (median ``session_median_s``, sigma
    ``session_sigma``) plus the idle culler's ``idle_cull_s``, at most ``session_max_s``.
    Builds: cold time lognormal (median ``build_median_s``, sigma ``build_sigma``), at most
    ``build_max_s`` (BinderHub fails builds beyond an hour).
    Pods: mybinder.org's user pod guarantees (``user_cpu_m`` millicores, ``user_memory``
    bytes); build pods ``build_cpu_m`` / ``build_memory``.
    Images: a user pod runs its repo's image, a new tag at each build; a repo's image is
    lognormal in size (bytes; median ``image_size_median``, sigma ``image_size_sigma``,
    drawn once per repo); build pods run repo2docker's image of ``builder_image_size``.
    """

    first_launch_build_prob: float = 0.3
    changes_per_day: float = 0.5
    session_median_s: float = 600.0
    session_sigma: float = 1.0
    idle_cull_s: float = 600.0
    session_max_s: float = 6 * 3600.0
    build_median_s: float = 300.0
    build_sigma: float = 0.6
    build_max_s: float = 3600.0
    user_cpu_m: int = 10
    user_memory: int = 450_000_000
    build_cpu_m: int = 1000
    build_memory: int = 2_000_000_000
    image_size_median: int = 2_500_000_000
    image_size_sigma: float = 0.5
    builder_image_size: int = 400_000_000

    def __post_init__(self) -> None:
        prob = self.first_launch_build_prob
        _require(0 <= prob <= 1, "first_launch_build_prob", "in [0, 1]", prob)
        for key in ("session_median_s", "session_max_s", "build_median_s", "build_max_s"):
            _require(getattr(self, key) > 0, key, "> 0", getattr(self, key))
        # the replay runs until the last pod ends, scanning every scan_interval_s: cap them
        _require(self.session_max_s <= 7 * 86400, "session_max_s", "<= 7 days (604800)", self.session_max_s)
        _require(self.build_max_s <= 86400, "build_max_s", "<= 1 day (86400)", self.build_max_s)
        for key in ("changes_per_day", "idle_cull_s"):
            _require(getattr(self, key) >= 0, key, ">= 0", getattr(self, key))
        for key in ("image_size_median", "builder_image_size"):
            _require(
                0 <= getattr(self, key) <= MAX_BYTES, key, f">= 0 and <= {MAX_BYTES}", getattr(self, key)
            )
        for key in ("session_sigma", "build_sigma", "image_size_sigma"):
            _require(0 <= getattr(self, key) <= MAX_SIGMA, key, f"in [0, {MAX_SIGMA:g}]", getattr(self, key))
        _require_request(self, ("user_cpu_m", "build_cpu_m"), ("user_memory", "build_memory"))


@dataclass(frozen=True, slots=True)
class DaskModel:
    """Dask worker pods (bare pods, as dask-gateway and classic dask-kubernetes make them),
    running one image of ``worker_image_size`` bytes."""

    worker_cpu_m: int = 600
    worker_memory: int = int(2.25 * GiB)
    worker_image_size: int = 1_000_000_000

    def __post_init__(self) -> None:
        _require_request(self, ("worker_cpu_m",), ("worker_memory",))
        size = self.worker_image_size
        _require(0 <= size <= MAX_BYTES, "worker_image_size", f">= 0 and <= {MAX_BYTES}", size)


DASK_POOL = NodePool(
    name="dask",
    allocatable={CPU: 31_850, MEMORY: 121 * GiB, PODS: 110},
    price_per_hour=1.55,
    min_size=0,
)


def check_provisioning(pool: NodePool, autoscaler: AutoscalerConfig) -> None:
    """Raise ``ValueError`` when ``pool``'s nodes take longer to come up than the autoscaler
    waits for them (``max_node_provision_time_s``): it would give up every new node and back
    off, which the model does not simulate (its scale-ups always succeed)."""
    delay, limit = pool.provision_delay_s, autoscaler.max_node_provision_time_s
    _require(
        delay <= limit,
        "provision_delay_s",
        f"<= autoscaler.max_node_provision_time_s ({limit:g}; failed scale-ups are not modelled)",
        delay,
    )
