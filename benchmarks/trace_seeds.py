"""How much of the trace-day verdict is the seed? The issue's criteria over seeds.

Usage: python benchmarks/trace_seeds.py [--scales 1] [--seeds 0,1,2,3,4] [--jobs 2]

For each seed and load scale, every trace day in ../shared is simulated with `default`,
`z2jh`, `binderhub` and `stickypack` (the seed draws the session lengths, build times, the
change model and tie-breaks). Per seed and scale it prints how many days meet each
criterion (N: stickypack's node-hours <= 1.01 x the best other policy's; H: its cache-hit
rate >= binderhub's; S: its busiest-node build share <= binderhub's) and all three, with the
mean node-hours ratio to the best other policy and the mean hit-rate and share differences
to binderhub. Last line: days meeting all three, over all seeds and scales.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from concurrent.futures import ProcessPoolExecutor

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
    print(f"all three criteria met on {total}/{len(results)} day x seed x scale runs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
