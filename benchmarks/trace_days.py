"""Every trace day in ../shared, every policy, at load scales 1 and 10: the RESULTS table.

Usage: python benchmarks/trace_days.py [--scales 1,10] [--seed 0] [--jobs 2] [--out FILE]

Prints a markdown table per load scale (node-hours of each policy, its ratio to the lower
bound, the CA floor and the oracle; stickypack's cache-hit rate and busiest-node build share
beside binderhub's) and checks the issue's criteria per day: stickypack's node-hours at most
1.01 x the best of default, z2jh and binderhub; its cache-hit rate at least binderhub's; its
busiest-node build share at most binderhub's. Last line: how many day x scale pairs pass.
"""

from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

DATA = Path(__file__).resolve().parents[1].parent / "shared/data/mybinder-events"
POLICIES = ("default", "z2jh", "binderhub", "stickypack", "oracle")


def run_day(
    args: tuple[str, float, int, tuple[str, ...]],
) -> tuple[str, float, dict[str, dict[str, float]], float]:
    """Simulate one trace file at one load scale and seed with each of the named policies."""
    from stickypack.policies import load_builtin
    from stickypack.sim.runner import compare
    from stickypack.sim.traces import TraceErrors, read_launches
    from stickypack.sim.workloads import trace_workload

    path, scale, seed, policies = args
    started = time.perf_counter()
    workload = trace_workload(read_launches([path], TraceErrors()), seed, scale)
    cmp = compare(lambda: workload, [load_builtin(p) for p in policies], seed=seed, load_scale=scale, jobs=1)
    return Path(path).name, scale, {r.policy: r.metrics for r in cmp.runs}, time.perf_counter() - started


def best_other_node_hours(m: dict[str, dict[str, float]]) -> float:
    """The fewest node-hours of default, z2jh and binderhub in one day's metrics."""
    return min(m[p]["node_hours"] for p in ("default", "z2jh", "binderhub"))


def count(metrics: dict[str, float], share: str) -> int:
    """A share of one policy's builds as a number of builds."""
    return round(metrics[share] * metrics["builds"])


def criteria(m: dict[str, dict[str, float]]) -> tuple[bool, bool, bool]:
    """The issue's per-day criteria: N, H, S (see the module docstring)."""
    sp, bh = m["stickypack"], m["binderhub"]
    return (
        sp["node_hours"] <= 1.01 * best_other_node_hours(m),
        sp["build_cache_hit_rate"] >= bh["build_cache_hit_rate"],
        sp["max_node_build_share"] <= bh["max_node_build_share"],
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scales", default="1,10")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--out", type=Path, default=None, help="also write the tables to this file")
    args = parser.parse_args()
    days = sorted(str(p) for p in DATA.glob("events-*.jsonl.gz"))
    scales = [float(s) for s in args.scales.split(",")]
    jobs = [(d, s, args.seed, POLICIES) for s in scales for d in days]
    with ProcessPoolExecutor(args.jobs) as pool:
        results = list(pool.map(run_day, jobs))
    lines: list[str] = []
    passed = 0
    for scale in scales:
        lines += [
            f"\n### Load scale {scale:g} (seed {args.seed})\n",
            "node-hours per policy (ratio to the lower bound / to the CA floor / to the oracle); "
            "stickypack vs binderhub cache-hit rate and busiest-node build share; criteria "
            "N = node-hours <= 1.01 x best of default, z2jh, binderhub, H = hit rate >= binderhub's, "
            "S = share <= binderhub's (in brackets: hits, and builds on the busiest node); "
            "lost sp/bh: builds whose cache had gone with its node (share of all builds)\n",
            "| day | bound | floor | "
            + " | ".join(POLICIES)
            + " | builds | hit sp/bh | lost sp/bh | share sp/bh | N H S |",
            "|---|---|---|" + "---|" * len(POLICIES) + "---|---|---|---|---|",
        ]
        for name, sc, m, _ in results:
            if sc != scale:
                continue
            bound = m["default"]["lower_bound_node_hours"]
            floor = m["default"]["floor_node_hours"]
            oracle = m["oracle"]["node_hours"]
            cells = [
                f"{m[p]['node_hours']:.1f} ({m[p]['node_hours'] / bound:.2f}/"
                f"{m[p]['node_hours'] / floor:.2f}/{m[p]['node_hours'] / oracle:.2f})"
                for p in POLICIES
            ]
            sp, bh = m["stickypack"], m["binderhub"]
            ok = criteria(m)
            passed += all(ok)
            day = name.removeprefix("events-").removesuffix(".jsonl.gz")
            lines.append(
                f"| {day} | {bound:.1f} | {floor:.1f} | "
                + " | ".join(cells)
                + f" | {sp['builds']}"
                + f" | {sp['build_cache_hit_rate']:.3f}/{bh['build_cache_hit_rate']:.3f}"
                + f" ({count(sp, 'build_cache_hit_rate')}/{count(bh, 'build_cache_hit_rate')})"
                + f" | {sp['build_cache_lost_share']:.3f}/{bh['build_cache_lost_share']:.3f}"
                + f" | {sp['max_node_build_share']:.3f}/{bh['max_node_build_share']:.3f}"
                + f" ({count(sp, 'max_node_build_share')}/{count(bh, 'max_node_build_share')}) | "
                + " ".join("ok" if o else "NO" for o in ok)
                + " |"
            )
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    wall = sum(r[3] for r in results)
    print(f"criteria met on {passed}/{len(results)} day x scale runs (cpu-seconds {wall:.0f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
