"""How much of the trace-day verdict is the seed? The issue's criteria over seeds.

Usage: python benchmarks/trace_seeds.py [--scales 1] [--seeds 0,1,2,3,4] [--jobs 2]

For each seed and load scale, every trace day in ../shared is simulated with `default`,
`z2jh`, `binderhub` and `stickypack` (the seed draws the session lengths, build times, the
change model and tie-breaks). Per seed and scale it prints how many days meet each
criterion (N: stickypack's node-hours <= 1.01 x the best other policy's; H: its cache-hit
rate >= binderhub's; S: its busiest-node build share <= binderhub's) and all three, with the
mean node-hours ratio to the best other policy and the mean hit-rate and share differences
to binderhub. With several seeds, a table per day follows: the mean and standard deviation
over the seeds of z2jh's and stickypack's node-hours over the lower bound and of binderhub's
and stickypack's hit rates and shares, and on how many seeds each criterion held.
Last line: days meeting all three, over all seeds and scales.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from trace_days import DATA, best_other_node_hours, criteria, run_day

POLICIES = ("default", "z2jh", "binderhub", "stickypack")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scales", default="1")
    parser.add_argument("--seeds", default="0,1,2,3,4")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    days = sorted(str(p) for p in DATA.glob("events-*.jsonl.gz"))
    scales = [float(s) for s in args.scales.split(",")]
    seeds = [int(s) for s in args.seeds.split(",")]
    jobs = [(d, sc, se, POLICIES) for sc in scales for se in seeds for d in days]
    with ProcessPoolExecutor(args.jobs) as pool:
        results = list(pool.map(run_day, jobs))
    print(
        "| scale | seed | N | H | S | all three | node-hours / best other |",
        "hit - binderhub | share - binderhub |",
    )
    print("|---|---|---|---|---|---|---|---|---|")
    total = 0
    for scale in scales:
        for seed in seeds:
            rows = [r[2] for job, r in zip(jobs, results, strict=True) if job[1:3] == (scale, seed)]
            n = h = s = every = 0
            ratios, dhit, dshare = [], [], []
            for m in rows:
                sp, bh = m["stickypack"], m["binderhub"]
                ok = criteria(m)
                n, h, s, every = n + ok[0], h + ok[1], s + ok[2], every + all(ok)
                ratios.append(sp["node_hours"] / best_other_node_hours(m))
                dhit.append(sp["build_cache_hit_rate"] - bh["build_cache_hit_rate"])
                dshare.append(sp["max_node_build_share"] - bh["max_node_build_share"])
            total += every
            d = len(rows)
            print(
                f"| {scale:g} | {seed} | {n}/{d} | {h}/{d} | {s}/{d} | {every}/{d} | "
                f"{statistics.mean(ratios):.3f} | {statistics.mean(dhit):+.3f} | "
                f"{statistics.mean(dshare):+.3f} |"
            )
    if len(seeds) > 1:
        for scale in scales:
            print_noise(scale, days, seeds, jobs, results)
    print(f"all three criteria met on {total}/{len(results)} day x seed x scale runs")
    return 0


def _mean_sd(values: list[float], pct: bool = False) -> str:
    """``mean ± sd``: three decimals, or in percent with one."""
    k, digits = (100, 1) if pct else (1, 3)
    mean, sd = statistics.mean(values) * k, statistics.stdev(values) * k
    return f"{mean:.{digits}f} ± {sd:.{digits}f}"


def print_noise(
    scale: float,
    days: list[str],
    seeds: list[int],
    jobs: list[tuple[str, float, int, tuple[str, ...]]],
    results: list[tuple[str, float, dict[str, dict[str, float]], float]],
) -> None:
    """Per day, over the seeds: mean and standard deviation of z2jh's and stickypack's
    node-hours over the lower bound, binderhub's and stickypack's cache-hit rates and
    busiest-node shares, and on how many seeds each criterion held. The spread is what a
    single seed's verdict is decided against."""
    print()
    print(f"Load scale {scale:g}, per day over seeds {','.join(map(str, seeds))} (mean ± sd):")
    print(
        "| day | z2jh node-h / bound | stickypack node-h / bound | hits binderhub | hits stickypack |",
        "share binderhub | share stickypack | N | H | S |",
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    sd_z, sd_sp = [], []
    for day in days:
        rows = [r[2] for job, r in zip(jobs, results, strict=True) if job[0] == day and job[1] == scale]
        z = [m["z2jh"]["node_hours"] / m["z2jh"]["lower_bound_node_hours"] for m in rows]
        sp = [m["stickypack"]["node_hours"] / m["stickypack"]["lower_bound_node_hours"] for m in rows]
        sd_z.append(statistics.stdev(z))
        sd_sp.append(statistics.stdev(sp))

        oks = [criteria(m) for m in rows]
        print(
            f"| {Path(day).name[7:17]} | {_mean_sd(z)} | {_mean_sd(sp)} |",
            f"{_mean_sd([m['binderhub']['build_cache_hit_rate'] for m in rows], True)}% |",
            f"{_mean_sd([m['stickypack']['build_cache_hit_rate'] for m in rows], True)}% |",
            f"{_mean_sd([m['binderhub']['max_node_build_share'] for m in rows], True)}% |",
            f"{_mean_sd([m['stickypack']['max_node_build_share'] for m in rows], True)}% |",
            " | ".join(f"{sum(ok[i] for ok in oks)}/{len(oks)}" for i in range(3)),
            "|",
        )
    print(
        f"mean sd of node-h / bound over the days: z2jh {statistics.mean(sd_z):.3f}, "
        f"stickypack {statistics.mean(sd_sp):.3f}"
    )


if __name__ == "__main__":
    sys.exit(main())
