"""Reports of a comparison: a terminal table (rich), JSON, and PNG plots (matplotlib)."""

from __future__ import annotations

import bisect
import json
import statistics
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from stickypack.sim.metrics import METRICS, Series, round_metric

if TYPE_CHECKING:
    from matplotlib.axes import Axes


@dataclass(slots=True)
class PolicyRun:
    policy: str
    metrics: dict[str, float]
    series: Series


@dataclass(slots=True)
class Comparison:
    """Every policy's run on one workload."""

    scenario: str
    seed: int
    load_scale: float
    runs: list[PolicyRun] = field(default_factory=list)
    trace_errors: int = 0
    trace_error_examples: list[str] = field(default_factory=list)

    def to_json(self, timing: bool = False) -> dict[str, Any]:
        """``{"scenario", "seed", "load_scale", "results": [{"policy", <metric>...}]}``, plus
        ``"malformed_trace_lines"`` when the trace had any. Without ``timing`` the measured
        ``wall_s`` is left out, so a seed reproduces it byte for byte."""
        out: dict[str, Any] = {"scenario": self.scenario, "seed": self.seed, "load_scale": self.load_scale}
        if self.trace_errors:
            out["malformed_trace_lines"] = self.trace_errors
        out["results"] = [_json_row(run.policy, run.metrics, timing) for run in self.runs]
        return out

    def write_json(self, path: Path, timing: bool = False) -> None:
        _write_json(path, self.to_json(timing))


def _json_row(policy: str, metrics: dict[str, float], timing: bool) -> dict[str, Any]:
    """One policy's metrics in ``METRICS`` order, floats rounded; ``wall_s`` only with
    ``timing`` (it is measured, so not reproducible)."""
    row: dict[str, Any] = {"policy": policy}
    for name in METRICS:
        value = metrics.get(name)
        if value is None or (name == "wall_s" and not timing):
            continue
        row[name] = value if isinstance(value, int) else round_metric(float(value))
    return row


def _write_json(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


@dataclass(slots=True)
class SeedSweep:
    """The same comparison at several seeds (``--seeds``).

    A seed draws session lengths, build times, which launches build and the tie-breaks, so
    one run's differences between policies carry that noise: at mybinder.org's rate a hit
    rate turns on a few builds. The same seed gives every policy the same draws, so seeds
    pair the policies' runs; the table counts on how many seeds each policy was best.
    """

    comparisons: list[Comparison]

    @property
    def seeds(self) -> list[int]:
        return [c.seed for c in self.comparisons]

    @property
    def policies(self) -> list[str]:
        return [run.policy for run in self.comparisons[0].runs] if self.comparisons else []

    def values(self, policy: str, metric: str) -> list[float]:
        """``metric`` of ``policy`` at each seed, in seed order (seeds where it is absent
        are left out)."""
        out = []
        for cmp in self.comparisons:
            for run in cmp.runs:
                if run.policy == policy and metric in run.metrics:
                    out.append(float(run.metrics[metric]))
        return out

    def best_count(self, policy: str, metric: str, lower_is_better: bool = True) -> int:
        """On how many seeds ``policy`` had the best ``metric`` (ties count for each)."""
        wins = 0
        for cmp in self.comparisons:
            values = {run.policy: run.metrics.get(metric) for run in cmp.runs}
            present = [v for v in values.values() if v is not None]
            mine = values.get(policy)
            if mine is None or not present:
                continue
            best = min(present) if lower_is_better else max(present)
            wins += mine == best
        return wins

    def to_json(self, timing: bool = False) -> dict[str, Any]:
        """``{"scenario", "seeds", "load_scale", "results": [{"policy", <metric mean>...}],
        "runs": [<each seed's Comparison JSON>]}``: ``results`` holds each metric's mean
        over the seeds, ``runs`` what ``--seed`` would write for each."""
        first = self.comparisons[0]
        out: dict[str, Any] = {
            "scenario": first.scenario,
            "seeds": self.seeds,
            "load_scale": first.load_scale,
        }
        if first.trace_errors:
            out["malformed_trace_lines"] = first.trace_errors
        out["results"] = [_json_row(policy, self.means(policy), timing) for policy in self.policies]
        out["runs"] = [cmp.to_json(timing) for cmp in self.comparisons]
        return out

    def means(self, policy: str) -> dict[str, float]:
        """Each metric's mean over the seeds (a float even for counts)."""
        means = {}
        for name in METRICS:
            values = self.values(policy, name)
            if values:
                means[name] = statistics.fmean(values)
        return means

    def write_json(self, path: Path, timing: bool = False) -> None:
        _write_json(path, self.to_json(timing))


_COLUMNS = (
    ("node_hours", "node-h", "{:.1f}"),
    ("ratio_to_bound", "x bound", "{:.3f}"),
    ("ratio_to_floor", "x floor", "{:.3f}"),
    ("peak_nodes", "peak", "{:d}"),
    ("final_nodes", "final", "{:d}"),
    ("pending_p95_s", "pending p95 s", "{:.0f}"),
    ("builds", "builds", "{:d}"),
    ("build_cache_hit_rate", "cache hits", "{:.1%}"),
    ("build_cache_lost_share", "cache lost", "{:.1%}"),
    ("build_p50_s", "build p50 s", "{:.0f}"),
    ("build_p95_s", "build p95 s", "{:.0f}"),
    ("max_node_build_share", "top node builds", "{:.1%}"),
    ("wall_s", "wall s", "{:.2f}"),
)

#: The columns of the ``--seeds`` table (each cell holds a mean and a range).
_SWEEP_COLUMNS = (
    "node_hours",
    "ratio_to_bound",
    "peak_nodes",
    "final_nodes",
    "builds",
    "build_cache_hit_rate",
    "build_cache_lost_share",
    "max_node_build_share",
)


def render_table(cmp: Comparison, console: Console) -> None:
    """Print the comparison as a table, with the bound and floor in the title."""
    title = (
        f"{cmp.scenario} (seed {cmp.seed}, load x{cmp.load_scale:g}): lower bound "
        f"{_span(cmp, 'lower_bound_node_hours', '{:.1f}')} node-h, "
        f"CA floor {_span(cmp, 'floor_node_hours', '{:.1f}')} node-h, "
        f"bound's final nodes {_span(cmp, 'lower_bound_final_nodes', '{:.0f}')}"
    )
    rows = []
    for run in cmp.runs:
        cells = []
        for key, _, fmt in _COLUMNS:
            value = run.metrics.get(key, 0)
            cells.append(fmt.format(int(value)) if fmt == "{:d}" else fmt.format(value))
        rows.append((run.policy, cells))
    _print_tables(console, title, [header for _, header, _ in _COLUMNS], rows)
    _print_unscheduled({run.policy: [run.metrics.get("pods_unscheduled", 0)] for run in cmp.runs}, console)
    _print_trace_errors(cmp, console)


def _print_tables(
    console: Console, title: str, headers: Sequence[str], rows: Sequence[tuple[str, Sequence[str]]]
) -> None:
    """Print ``rows`` (a policy, then its cell under each header) as one table, or, on a
    console too narrow for that, as several tables of the same rows, each with the policy
    column and as many of the other columns as fit at the width of their longest word.

    Rich, short of room, narrows columns below their longest word and folds a cell anywhere:
    node-hours ``129.2`` printed as ``129.`` over ``2``. Here a cell only wraps between its
    words (a mean and its range), a header between its words too.
    """
    names = [name for name, _ in rows]
    columns = range(len(headers))
    texts = [[headers[i], *(cells[i] for _, cells in rows)] for i in columns]
    natural = [max(map(len, column)) for column in texts]
    least = [max(len(word) for text in column for word in text.split() or [""]) for column in texts]
    name_width = max(map(len, ["policy", *names]))

    def width(group: Sequence[int], widths: Sequence[int]) -> int:
        # rich's default box: a rule before each column and after the last, one space of
        # padding on each side of a cell
        return sum(widths[i] + 3 for i in group) + name_width + 3 + 1

    groups: list[list[int]] = []
    if width(columns, natural) <= console.width:
        groups.append(list(columns))
    else:
        for i in columns:
            if groups and width([*groups[-1], i], least) <= console.width:
                groups[-1].append(i)
            else:
                groups.append([i])
    for number, group in enumerate(groups):
        widths = {i: least[i] for i in group}
        spare = console.width - width(group, least)
        for i in sorted(group, key=lambda i: natural[i] - least[i]):  # fewest wrapped headers
            if natural[i] - least[i] <= spare:
                spare -= natural[i] - least[i]
                widths[i] = natural[i]
        table = Table(title=escape(title) if number == 0 else None)
        table.add_column("policy", style="bold", no_wrap=True, min_width=name_width)
        for i in group:
            table.add_column(escape(headers[i]), justify="right", width=widths[i], overflow="fold")
        for name, cells in rows:
            table.add_row(escape(name), *(escape(cells[i]) for i in group))
        console.print(table)


def _span(cmp: Comparison, key: str, fmt: str) -> str:
    """One metric over the runs as ``low`` or ``low-high``: the bound and floor are per run
    (a policy's cache hits and waits move when its pods start), so they may differ a little."""
    values = [fmt.format(run.metrics.get(key, 0)) for run in cmp.runs] or [fmt.format(0)]
    low = min(values, key=float)
    high = max(values, key=float)
    return low if low == high else f"{low}-{high}"


def _print_trace_errors(cmp: Comparison, console: Console) -> None:
    if cmp.trace_errors:
        console.print(f"[yellow]{cmp.trace_errors} malformed trace line(s) skipped[/], first:")
        for example in cmp.trace_error_examples:
            console.print(f"  {escape(example)}")


def _print_unscheduled(counts: dict[str, list[float]], console: Console) -> None:
    """Say which policies left pods unscheduled at the end (the table's node-hours and
    pending times count only the pods that ran, so they would look fine)."""
    for policy, values in counts.items():
        worst = int(max(values, default=0))
        if worst:
            console.print(
                f"[yellow]{escape(policy)}: {worst} pod(s) never scheduled[/] (they fit no node of "
                "the pool, or no node came up): its figures cover only the pods that ran"
            )


def render_sweep_table(sweep: SeedSweep, console: Console) -> None:
    """Print each metric's mean over the seeds with its range, ``mean (min-max)``, and on
    how many seeds each policy used the fewest node-hours and had the most cache hits."""
    n = len(sweep.comparisons)
    first = sweep.comparisons[0]
    bound = statistics.fmean(sweep.values(sweep.policies[0], "lower_bound_node_hours") or [0.0])
    title = (
        f"{first.scenario} (seeds {', '.join(map(str, sweep.seeds))}, load x{first.load_scale:g}): "
        f"mean (min-max) over {n} seeds; lower bound {bound:.1f} node-h on average"
    )
    columns = [c for c in _COLUMNS if c[0] in _SWEEP_COLUMNS]
    policies = sweep.policies
    any_builds = any(sum(sweep.values(p, "builds")) for p in sweep.policies)
    rows = []
    for policy in sweep.policies:
        cells = []
        for key, _, fmt in columns:
            values = sweep.values(policy, key)
            if not values:
                cells.append("")
                continue
            mean = ("{:.1f}" if fmt == "{:d}" else fmt).format(statistics.fmean(values))
            f = "{:.0f}" if fmt == "{:d}" else fmt
            low, high = f.format(min(values)), f.format(max(values))
            cells.append(mean if low == high else f"{mean} ({low}-{high})")
        cells.append(f"{sweep.best_count(policy, 'node_hours')}/{n}")
        hits = sweep.best_count(policy, "build_cache_hit_rate", lower_is_better=False)
        cells.append(f"{hits}/{n}" if any_builds else "-")
        rows.append((policy, cells))
    headers = [header for _, header, _ in columns] + ["fewest node-h", "most hits"]
    _print_tables(console, title, headers, rows)
    _print_unscheduled({p: sweep.values(p, "pods_unscheduled") for p in policies}, console)
    _print_trace_errors(first, console)


def write_plots(cmp: Comparison, directory: Path) -> list[Path]:
    """Nodes over time per policy with the bound and floor; build-time CDF. Returns paths."""
    figures = plot_figures(cmp)  # first: it picks matplotlib's file-only backend
    import matplotlib.pyplot as plt

    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    try:
        for name, fig in figures.items():
            path = directory / name
            fig.savefig(path, dpi=110, bbox_inches="tight")
            paths.append(path)
    finally:
        for fig in figures.values():
            plt.close(fig)
    if "build_time_cdf.png" not in figures:  # none left from an earlier run into the same directory
        (directory / "build_time_cdf.png").unlink(missing_ok=True)
    return paths


def _held_to_end(times: Sequence[float], values: Sequence[int], end: float) -> tuple[list[float], list[int]]:
    """A step series (``times`` in seconds) drawn up to the run's ``end`` as the table reads
    it: the value in effect just before ``end`` held to it. At ``end`` itself every pod has
    left, so the bound there is 0 (the table's "bound's final nodes" is the value before), and
    a step plot stops at its last point, which may come before ``end``."""
    before = bisect.bisect_left(times, end)
    if not before:
        return list(times), list(values)
    return [*times[:before], end], [*values[:before], values[before - 1]]


def plot_figures(cmp: Comparison) -> dict[str, Any]:
    """The plots as matplotlib figures, by file name: ``nodes.png`` (nodes over time per policy
    with the bound and floor) and, when there were builds, ``build_time_cdf.png``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    def hours(ts: Sequence[float]) -> list[float]:
        return [t / 3600 for t in ts]

    def width(i: int) -> float:
        # policies often coincide for hours (two spreading ones on a trace day): each line
        # is narrower than the one before, so one drawn over another leaves it showing
        return 1.5 + 2.0 * (len(cmp.runs) - 1 - i) / max(len(cmp.runs) - 1, 1)

    def finish(ax: Axes, title: str, xlabel: str, ylabel: str) -> None:
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        # a trace's label names every file: broken after its commas, not drawn across the page
        label = cmp.scenario.replace(",", ", ")
        ax.set_title(textwrap.fill(f"{title}: {label}", width=90, break_on_hyphens=False))
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)  # beside the data

    figures: dict[str, Any] = {}
    fig, ax = plt.subplots(figsize=(10, 5))
    for i, run in enumerate(cmp.runs):
        ax.step(hours(run.series.node_t), run.series.node_n, where="post", label=run.policy, lw=width(i))
    if cmp.runs:
        s = cmp.runs[0].series
        # The bound and floor are per run; they differ little, so the first run's are drawn.
        first = cmp.runs[0].policy
        for (t, n), color, style, what in (
            (_held_to_end(s.bound_t, s.bound_n, s.node_t[-1]), "black", "--", "lower bound"),
            (_held_to_end(s.floor_t, s.floor_n, s.node_t[-1]), "grey", ":", "CA floor"),
        ):
            ax.step(hours(t), n, where="post", color=color, linestyle=style, label=f"{what} ({first}'s run)")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    since = "the start"
    if cmp.scenario.startswith("trace:"):
        since = "midnight UTC of the trace's first day"
    elif cmp.scenario == "binder-day":  # its day's busiest hour is 14:00 UTC
        since = "midnight UTC"
    finish(ax, "Nodes over time", f"hours since {since}", "nodes")
    figures["nodes.png"] = fig

    if any(run.series.build_durations for run in cmp.runs):
        fig, ax = plt.subplots(figsize=(8, 5))
        for i, run in enumerate(cmp.runs):
            d = sorted(run.series.build_durations)
            if d:
                cdf = [(k + 1) / len(d) for k in range(len(d))]
                ax.step(d, cdf, where="post", label=run.policy, lw=width(i))
        finish(ax, "Build time CDF", "build time, s (creation to completion)", "fraction of builds")
        figures["build_time_cdf.png"] = fig
    return figures
