"""Metrics: node-hours against a lower bound and a CA-aware floor, and build statistics."""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

#: Metric names, in report order. ``wall_s`` is measured, so it is left out of the
#: byte-reproducible JSON unless asked for (``--timing``).
METRICS = (
    "node_hours",
    "lower_bound_node_hours",
    "ratio_to_bound",
    "floor_node_hours",
    "ratio_to_floor",
    "peak_nodes",
    "final_nodes",
    "lower_bound_final_nodes",
    "pods_scheduled",
    "pods_unscheduled",
    "pending_p95_s",
    "builds",
    "build_cache_hit_rate",
    "build_first_share",
    "build_cache_lost_share",
    "build_elsewhere_share",
    "build_p50_s",
    "build_p95_s",
    "max_node_build_share",
    "cost",
    "wall_s",
)


class BoundTracker:
    """The per-instant lower bound on nodes from the running pods' requests.

    With identical nodes of allocatable ``C``: the largest, over resources ``r``, of
    ``ceil(sum_r / C_r)`` and of the number of pods asking more than ``C_r / 2`` of ``r`` (no
    two of those share a node). Units as the node table's. With nodes of several sizes,
    ``C_r`` is the largest node's ``r``, which keeps both terms a bound.
    """

    def __init__(self, capacity: Sequence[int]) -> None:
        # Python ints, not numpy: three resources per call, where numpy's per-call cost
        # would dominate (this runs twice per pod).
        self.capacity = [int(c) for c in capacity]
        self.sums = [0] * len(self.capacity)
        self.big = [0] * len(self.capacity)
        self.value = 0
        self.times: list[float] = [0.0]
        self.values: list[int] = [0]

    def change(self, t: float, vec: np.ndarray, sign: int) -> None:
        """A pod with request row ``vec`` starts (+1) or ends (-1) at ``t``."""
        row = vec.tolist()
        cap = self.capacity
        sums = self.sums
        big = self.big
        for k, x in enumerate(row):
            sums[k] += sign * x
            if 2 * x > cap[k]:
                big[k] += sign
        need = max(max(-(-s // c) for s, c in zip(sums, cap, strict=True)), max(big))
        if need != self.value:
            self.value = need
            if self.times[-1] == t:
                self.values[-1] = need
            else:
                self.times.append(t)
                self.values.append(need)


def integrate_step(times: Sequence[float], values: Sequence[float], horizon: float) -> float:
    """Integral over [times[0], horizon] of a right-continuous step function (value-seconds)."""
    t = np.asarray(times, dtype=np.float64)
    v = np.asarray(values, dtype=np.float64)
    keep = t < horizon
    t, v = t[keep], v[keep]
    if t.size == 0:
        return 0.0
    ends = np.append(t[1:], horizon)
    return float((v * (ends - t)).sum())


def window_max_step(
    times: Sequence[float], values: Sequence[int], window: float, horizon: float
) -> tuple[list[float], list[int]]:
    """``f(t) = max of g over [t - window, t]`` for a step function ``g``, as a step function.

    A node the autoscaler no longer needs stays ``window`` (scale-down-unneeded-time) more,
    so this is a floor on nodes that no autoscaled placement can beat.
    """
    events: list[tuple[float, int, int]] = []  # (time, kind 0=start 1=expire, index)
    for i, t in enumerate(times):
        events.append((t, 0, i))
        end = times[i + 1] if i + 1 < len(times) else horizon
        events.append((end + window, 1, i))
    events.sort()
    out_t: list[float] = []
    out_v: list[int] = []
    active: deque[int] = deque()  # indices with decreasing values
    expired: set[int] = set()
    for t, kind, i in events:
        if t > horizon:
            break
        if kind == 1:
            expired.add(i)
        else:
            while active and values[active[-1]] <= values[i]:
                active.pop()
            active.append(i)
        while active and active[0] in expired:
            active.popleft()
        v = values[active[0]] if active else 0
        if not out_v or out_v[-1] != v:
            if out_t and out_t[-1] == t:
                out_v[-1] = v
            else:
                out_t.append(t)
                out_v.append(v)
    return out_t, out_v


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100), 0.0 for no values."""
    if len(values) == 0:
        return 0.0
    return float(np.percentile(np.asarray(values, dtype=np.float64), q))


@dataclass(slots=True)
class Series:
    """Node count and bound over time, for plots."""

    node_t: list[float]
    node_n: list[int]
    bound_t: list[float]
    bound_n: list[int]
    floor_t: list[float]
    floor_n: list[int]
    build_durations: list[float]


def round_metric(value: float) -> float:
    """Metrics go to JSON rounded to 6 significant digits, so reruns compare byte for byte."""
    if value == 0 or not math.isfinite(value):
        return float(value)
    return float(f"{value:.6g}")
