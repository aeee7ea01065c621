"""``--sim-config FILE``: override any model parameter from YAML.

```yaml
autoscaler: {scale_down_unneeded_time_s: 300, scale_down_utilization_threshold: 0.6}
cache: {high_images: 100, low_images: 80, hit_time_fraction: 0.25}
binder: {changes_per_day: 1.0, user_memory: 1G, build_memory: 4G}
dask: {worker_cpu_m: 1000, worker_memory: 4Gi}
pool: {allocatable: {cpu: 15890m, memory: 100Gi, pods: 110}, provision_delay_s: 120}
```

Every section and key is optional; an unknown key or a bad value is an error that names the
file, the section and the key. Resource sizes take Kubernetes quantities (``450M``, ``2Gi``,
``500m``) or plain integers in the model's unit (millicores for a ``*_cpu_m`` key, bytes);
``pool.allocatable`` is a Kubernetes resource list, a plain number in its resource's own
unit (``cpu: 8`` is 8 cores).
"""

from __future__ import annotations

import dataclasses
import math
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError

from stickypack.core.labels import is_label
from stickypack.core.quantity import QuantityError, int_value, milli_value
from stickypack.core.resources import parse_milli_resource_list, round_up_amounts
from stickypack.core.yamltext import YAMLTextError, load_yaml
from stickypack.sim.model import (
    AutoscalerConfig,
    BinderModel,
    CacheConfig,
    DaskModel,
    NodePool,
    check_provisioning,
)
from stickypack.sim.workloads import Workload
from stickypack.textfile import TextFileError, read_text_file


class SimConfigError(ValueError):
    """A simulation config that cannot be used; the message names file, section and key."""


@dataclass(frozen=True, slots=True)
class SimConfig:
    autoscaler: AutoscalerConfig = field(default_factory=AutoscalerConfig)
    cache: CacheConfig = field(default_factory=CacheConfig)
    binder: BinderModel = field(default_factory=BinderModel)
    dask: DaskModel = field(default_factory=DaskModel)
    #: Field overrides applied to every node pool of the workload.
    pool: Mapping[str, Any] = field(default_factory=dict)

    def apply_to(self, workload: Workload) -> Workload:
        """The workload with its pools overridden."""
        if self.pool:
            workload.pools = [dataclasses.replace(p, **self._overrides(p)) for p in workload.pools]
        return workload

    def _overrides(self, pool: NodePool) -> dict[str, Any]:
        overrides = dict(self.pool)
        if "allocatable" in overrides:  # a partial allocatable changes only what it names
            overrides["allocatable"] = {**pool.allocatable, **overrides["allocatable"]}
        return overrides


_MILLI = {"user_cpu_m", "build_cpu_m", "worker_cpu_m"}
_BYTES = {
    "user_memory",
    "build_memory",
    "worker_memory",
    "image_size_median",
    "builder_image_size",
    "worker_image_size",
}


def _section(cls: type, raw: Any, where: str) -> Any:
    if raw is None:
        return cls()
    if not isinstance(raw, Mapping):
        raise SimConfigError(f"{where}: must be a mapping of keys to values")
    names = {f.name: f for f in dataclasses.fields(cls)}
    hints = typing.get_type_hints(cls)
    if cls is NodePool:  # overrides apply to every pool: a pool's name (prices and node
        names.pop("name")  # names are looked up by it) must stay its own
    values: dict[str, Any] = {}
    for key, value in raw.items():
        if key not in names:
            raise SimConfigError(f"{where}.{key}: unknown key; valid: {', '.join(sorted(names))}")
        try:
            if key in _MILLI:  # a number in millicores, or a quantity string ("500m", "1")
                value = _millicores(value)
            elif key in _BYTES:
                value = int_value(value)
            elif key == "allocatable":
                value = _allocatable(value)
            else:
                if isinstance(value, bool) and hints[key] is not bool:  # pydantic reads true as 1
                    raise ValueError("a number, not true or false")
                value = TypeAdapter(hints[key]).validate_python(value, strict=False)
                if isinstance(value, float) and not math.isfinite(value):
                    raise ValueError("must be a finite number")
                if key == "labels":  # node labels: policies' selectors match them as Kubernetes does
                    for k, v in value.items():
                        if not is_label(k, v):
                            raise ValueError(f"{k}={v} is not a valid Kubernetes label")
        except (ValidationError, QuantityError, TypeError, ValueError, AttributeError) as exc:
            raise SimConfigError(f"{where}.{key}: bad value {value!r}: {_short(exc)}") from None
        values[key] = value
    try:
        # checks the ranges (a pool's too, though only its overrides are kept; allocatable
        # is merged into each pool's, so a partial one is checked against the default's)
        checked = dict(values)
        if cls is NodePool and "allocatable" in values:
            checked["allocatable"] = {**NodePool().allocatable, **values["allocatable"]}
        built = cls(**checked)
    except ValueError as exc:
        raise SimConfigError(f"{where}.{exc}") from None
    return values if cls is NodePool else built


def _allocatable(value: Any) -> dict[str, int]:
    """A pool's allocatable: resource names to quantities, in the model's units, not
    clamped (the pool's range check refuses what is too large instead of cutting it)."""
    if not isinstance(value, Mapping):
        raise ValueError("a mapping of resource names to quantities")
    for name in value:
        if not isinstance(name, str) or not name:
            raise ValueError(f"a resource name is a non-empty string, got {name!r}")
    return round_up_amounts(parse_milli_resource_list(value), clamp=False)


def _millicores(value: Any) -> int:
    """A ``*_cpu_m`` value: a number is millicores (whole), a string a Kubernetes quantity
    in cores (``"500m"``, ``"2"`` = 2000)."""
    if isinstance(value, bool):
        raise ValueError("a number of millicores or a quantity string like '500m'")
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if not value.is_integer():
            raise ValueError("millicores are whole numbers (or give a quantity string like '0.5')")
        return int(value)
    return milli_value(value)


def _short(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        return "; ".join(e["msg"] for e in exc.errors())
    return str(exc)


def load_sim_config(path: str | Path) -> SimConfig:
    """Read and validate a simulation config file."""
    path = Path(path)
    try:
        raw = load_yaml(read_text_file(path), str(path))
    except (TextFileError, YAMLTextError) as exc:
        raise SimConfigError(str(exc)) from None
    if raw is None:
        return SimConfig()
    if not isinstance(raw, Mapping):
        raise SimConfigError(f"{path}: a simulation config is a YAML mapping of sections")
    sections = {
        "autoscaler": AutoscalerConfig,
        "cache": CacheConfig,
        "binder": BinderModel,
        "dask": DaskModel,
        "pool": NodePool,
    }
    unknown = sorted(str(key) for key in set(raw) - set(sections))
    if unknown:
        raise SimConfigError(f"{path}: unknown section(s) {', '.join(unknown)}; valid: {', '.join(sections)}")
    built = {name: _section(cls, raw.get(name), f"{path}: {name}") for name, cls in sections.items()}
    pool = built.pop("pool")
    overrides = pool if isinstance(pool, dict) else {}
    try:  # the workloads' pools come up in the default delay unless the file changes it
        delay = overrides.get("provision_delay_s", NodePool().provision_delay_s)
        check_provisioning(NodePool(provision_delay_s=delay), built["autoscaler"])
    except ValueError as exc:
        raise SimConfigError(f"{path}: pool.{exc}") from None
    return SimConfig(pool=overrides, **built)
