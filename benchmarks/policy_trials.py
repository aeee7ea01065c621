"""Candidate policies against the built-ins over seeds: how the stickypack policy is designed.

Usage: python benchmarks/policy_trials.py CANDIDATE.yaml [...] [--scale 1] [--seeds 0-4]
       [--plugins FILE.py] [--jobs 2] [--cache DIR]

Each candidate is a policy file (the `stickypack simulate --policy-file` format) simulated on
every trace day in ../shared in the place of `stickypack`, against `default`, `z2jh` and
`binderhub` on the same traffic. A policy's run depends only on the policy, the day, the seed
and the load scale (the seed draws the sessions, build times, changes and tie-breaks; each
policy draws from its own streams), so the built-ins' runs are cached under `--cache`, keyed
by a digest of the package's source and the day's file.

`--plugins FILE.py` adds the plugins a Python file defines (as `stickypack simulate
--plugins` does: docs/configuration.md, "Plugins of your own"), for prototypes that are
not in the package (`benchmarks/trials/` holds the ones `docs/simulator.md` reports).

Per candidate and seed it prints the days meeting the issue's criteria (N, H, S as in
`trace_days.py`, and all three), the mean ratio of the candidate's node-hours to the best
other policy's, its hits and its busiest-node builds against binderhub's summed over the
days, and the days that miss. Last line: days meeting all three per candidate, over all seeds.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from functools import cache
from pathlib import Path
from typing import Any

from trace_days import DATA, best_other_node_hours, count, criteria

SRC = Path(__file__).resolve().parents[1] / "src/stickypack"
BUILTINS = ("default", "z2jh", "binderhub")
KEPT = ("node_hours", "build_cache_hit_rate", "max_node_build_share", "builds")


@cache
def _registry(plugins: str | None) -> Any:
    """The built-in plugins plus those of the file ``plugins`` (loaded once per process)."""
    from stickypack.core.policy import BUILTIN_PLUGINS
    from stickypack.plugin_files import load_plugin_files

    return BUILTIN_PLUGINS if plugins is None else load_plugin_files([plugins])


def run_one(job: tuple[str, str, int, float, str | None]) -> dict[str, float]:
    """One day, one policy (a built-in's name or a policy file), one seed and scale."""
    from stickypack.policies import load_builtin, load_policy_file
    from stickypack.sim.runner import compare
    from stickypack.sim.traces import TraceErrors, read_launches
    from stickypack.sim.workloads import trace_workload

    day, policy_name, seed, scale, plugins = job
    workload = trace_workload(read_launches([day], TraceErrors()), seed, scale)
    if policy_name in BUILTINS:
        policy = load_builtin(policy_name)
    else:
        policy = load_policy_file(policy_name, plugins=_registry(plugins))
    metrics = compare(lambda: workload, [policy], seed=seed, load_scale=scale, jobs=1).runs[0].metrics
    return {k: metrics[k] for k in KEPT}


def source_digest(days: list[str]) -> str:
    """A digest of the package's source, the trace files and the metrics kept, so a cache
    never outlives any of them."""
    h = hashlib.sha256(",".join(KEPT).encode())
    for path in sorted(SRC.rglob("*")):
        if path.suffix in {".py", ".yaml"}:
            h.update(str(path.relative_to(SRC)).encode() + b"\0" + path.read_bytes())
    for day in days:
        h.update(Path(day).name.encode() + b"\0" + Path(day).read_bytes())
    return h.hexdigest()[:16]


def read_cache(path: Path) -> dict[str, Any] | None:
    """The cached built-ins' runs, or None when absent or unreadable (a cache miss)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def write_cache(path: Path, runs: dict[str, Any]) -> None:
    """Written whole or not at all: an interrupted run leaves no half-written cache."""
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(runs), encoding="utf-8")
    os.replace(tmp, path)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("candidates", nargs="+", type=Path, help="policy files")
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--seeds", default="0-4", help="as simulate --seeds: 0-4, 0,3,7, 0-2,9")
    parser.add_argument("--plugins", type=Path, default=None, help="a Python file of extra plugins")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument(
        "--cache", type=Path, default=Path.home() / ".cache/stickypack/policy-trials", help="built-ins' runs"
    )
    args = parser.parse_args()
    days = sorted(str(p) for p in DATA.glob("events-*.jsonl.gz"))
    if not days:
        parser.error(f"no trace days (events-*.jsonl.gz) in {DATA}")
    from stickypack.cli import UsageError, parse_seeds

    try:
        seeds = parse_seeds(args.seeds)
    except UsageError as exc:
        parser.error(str(exc))
    plugins = str(args.plugins.resolve()) if args.plugins else None
    from stickypack.core.policy import PolicyError
    from stickypack.policies import load_policy_file

    for cand in args.candidates:  # refused here, in one line, rather than in every worker
        try:
            load_policy_file(cand, plugins=_registry(plugins))
        except PolicyError as exc:
            parser.error(str(exc))
    args.cache.mkdir(parents=True, exist_ok=True)
    digest = source_digest(days)
    totals = dict.fromkeys(map(str, args.candidates), 0)
    with ProcessPoolExecutor(args.jobs) as pool:
        for seed in seeds:
            cached = args.cache / f"{digest}-seed{seed}-x{args.scale:g}.json"
            base = read_cache(cached)
            if base is None:
                jobs = [(d, p, seed, args.scale, None) for d in days for p in BUILTINS]
                base = {}
                for (day, name, *_), m in zip(jobs, pool.map(run_one, jobs), strict=True):
                    base.setdefault(Path(day).name, {})[name] = m
                write_cache(cached, base)
            for cand in map(str, args.candidates):
                jobs = [(d, cand, seed, args.scale, plugins) for d in days]
                ok_n = ok_h = ok_s = every = 0
                ratio = hits = share = 0
                misses = []
                for day, sp in zip(days, pool.map(run_one, jobs), strict=True):
                    m = {**base[Path(day).name], "stickypack": sp}
                    ok = criteria(m)
                    ok_n, ok_h, ok_s, every = ok_n + ok[0], ok_h + ok[1], ok_s + ok[2], every + all(ok)
                    ratio += sp["node_hours"] / best_other_node_hours(m)
                    bh = m["binderhub"]
                    hits += count(sp, "build_cache_hit_rate") - count(bh, "build_cache_hit_rate")
                    share += count(sp, "max_node_build_share") - count(bh, "max_node_build_share")
                    if not all(ok):
                        tag = Path(day).name.removeprefix("events-").removesuffix(".jsonl.gz")
                        misses.append(tag + ":" + "".join(c for c, o in zip("NHS", ok, strict=True) if not o))
                totals[cand] += every
                print(
                    f"{cand} seed {seed} x{args.scale:g}: all three {every}/{len(days)}"
                    f" (N {ok_n}, H {ok_h}, S {ok_s}); node-hours / best other {ratio / len(days):.4f};"
                    f" hits {hits:+d}, busiest-node builds {share:+d} against binderhub;"
                    f" misses {' '.join(misses) or 'none'}",
                    flush=True,
                )
    print(
        "days meeting all three over seeds "
        + args.seeds
        + ": "
        + ", ".join(f"{c} {n}/{len(days) * len(seeds)}" for c, n in totals.items())
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
