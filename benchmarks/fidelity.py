"""Fidelity: do stickypack's policies choose what the real scheduler chooses?

Usage: python benchmarks/fidelity.py --cases 300 --seed 1 [--policy default|z2jh|both] [--images]
       python benchmarks/fidelity.py --families all|noderesources,rtcr,... --cases 300 --seed 1
       python benchmarks/fidelity.py --policy stickypack --cases 480 --seed 1
           [--user-weights rendered|policy] [--build-score A,B,...] [--build-filters A,B,...]

Starts the local control plane (tools/k8s/build.sh builds it), runs random cases against the
real kube-scheduler (default profile; the rendered `z2jh` profile, the z2jh user-scheduler's
scoring with ImageLocality 11), prints each disagreement with its case, and as its last line
`agreement: X (k/n)` over all policies run. `--images`: nodes list images and pods run them
(ImageLocality scores; see `stickypack.testing.fidelity`).

`--policy stickypack`: the live stickypack deployment (`stickypack.testing.live_fidelity`):
kube-scheduler with the rendered `stickypack-builds` profile and the build extender as
configured by default, and with the rendered `stickypack` profile and the operator guide's
user-pod extender, both extenders over HTTP fed by their watches; random build and user
cases (half each; a burst's pods judged in turn), batches of 24 at pod ages of 0, 900, 2400
and 7200 s in turn, judged against the core `stickypack` policy. Prints each disagreement
with its cause, a summary per kind of pod (causes; how often the extender's integer score
changes the live best nodes, and what that costs in the policy's points), and the agreement
last. What-ifs: `--user-weights policy` renders kube-scheduler's plugins of the `stickypack`
profile in the policy's balance (TaintToleration 91, NodeAffinity 60 against
NodeResourcesFit 121; shipped: z2jh's 3 and 14631); `--build-score` / `--build-filters` set
the build extender's `score` / `filters` (its weight: their weight sum);
`--build-kube-weights InterPodAffinity=2` renders kube-scheduler's plugins of the
`stickypack-builds` profile at those weights (`InterPodAffinity=2`: as rendered before it was turned off).

`--families`: instead of the built-in policies, the plugin families of
`stickypack.testing.plugin_fidelity` (`noderesources`, `rtcr`, `balanced`, `taints`,
`affinity`, `builds`; `all`): each runs its own small policies against matching
kube-scheduler profiles, `--cases` cases per family; per family it prints the agreement, the
cases where the policy's best were fewer than the feasible nodes (`decisive`), and the
agreement had each case been scored by the family's next policy (`crossed`: lower when the
plugin's arguments matter).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from stickypack.policies import load_builtin
from stickypack.render import scheduler_config
from stickypack.testing.controlplane import ControlPlane
from stickypack.testing.fidelity import agreement, run_cases

# our policy name -> (rendered profile, schedulerName)
REAL = {"default": ("default-scheduler", "default-scheduler"), "z2jh": ("z2jh", "z2jh")}


def live(args: argparse.Namespace) -> int:
    from stickypack.testing import live_fidelity as lf

    policy = load_builtin("stickypack")
    options: dict = {}
    if args.user_weights == "policy":
        options["user_kube_weights"] = lf.policy_balanced_weights(policy)
    build: dict = {}
    if args.build_score:
        build["score"] = args.build_score.split(",")
        profile = next(p for p in policy.profiles if p.name == lf.BUILD_SCHEDULER)
        weights = {s.plugin.name: s.weight for s in profile.scorers}
        options["build_weight"] = sum(weights[n] for n in build["score"])
    if args.build_filters:
        build["filters"] = args.build_filters.split(",")
    if args.build_kube_weights:
        pairs = (item.split("=") for item in args.build_kube_weights.split(","))
        options["build_kube_weights"] = {name: int(weight) for name, weight in pairs}
    if build:
        options["build_extender"] = build
    started = time.monotonic()
    with ControlPlane() as cp:
        deployment = lf.start_live(cp, f"fidelity-{args.seed}", **options)
        try:
            cases = lf.run_live_cases(
                cp, deployment, args.cases, args.seed, age_offset_s=[0, 900, 2400, 7200]
            )
        finally:
            deployment.stop(cp)
    for case in cases:
        if not case.agrees or not case.explained:
            print(f"[stickypack] disagreement\n{case.describe()}")
    for kind, figures in lf.summary(cases).items():
        print(f"{kind}: {json.dumps(figures)}")
    ok = sum(c.agrees for c in cases)
    print(
        f"{len({c.index for c in cases})} cases, {len(cases)} decisions, {time.monotonic() - started:.0f} s"
    )
    print(f"agreement: {lf.agreement(cases):.4f} ({ok}/{len(cases)})")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cases", type=int, default=300)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--policy", choices=["default", "z2jh", "both", "stickypack"], default="both")
    parser.add_argument("--images", action="store_true", help="nodes list images that pods run")
    parser.add_argument("--user-weights", choices=["rendered", "policy"], default="rendered")
    parser.add_argument(
        "--build-score", default="", help="the build extender's score plugins, comma-separated"
    )
    parser.add_argument("--build-filters", default="", help="the build extender's filters, comma-separated")
    parser.add_argument(
        "--build-kube-weights",
        default="",
        help="Plugin=weight,... rendered into the stickypack-builds profile",
    )
    parser.add_argument(
        "--families", default=None, help="plugin families to run instead (comma list, or all)"
    )
    args = parser.parse_args()
    if args.families:
        return families(args.families, args.cases, args.seed)
    if args.policy == "stickypack":
        return live(args)
    names = ["default", "z2jh"] if args.policy == "both" else [args.policy]
    all_cases = []
    with ControlPlane() as cp:
        cp.start_scheduler(scheduler_config(sorted({REAL[n][0] for n in names})))
        for name in names:
            cases = run_cases(
                cp, load_builtin(name), REAL[name][1], args.cases, args.seed, images=args.images
            )
            bad = [c for c in cases if not c.agrees]
            for case in bad:
                print(f"[{name}] disagreement\n{case.describe()}")
            print(f"{name}: agreement {agreement(cases):.4f} ({len(cases) - len(bad)}/{len(cases)})")
            all_cases.extend(cases)
    ok = sum(c.agrees for c in all_cases)
    print(f"agreement: {agreement(all_cases):.4f} ({ok}/{len(all_cases)})")
    return 0


def families(names: str, cases: int, seed: int) -> int:
    """Run the plugin families ``names`` (``all``, or a comma list); see the module's notes."""
    from stickypack.testing.plugin_fidelity import FAMILIES, crossed, decisive, run_family

    chosen = list(FAMILIES) if names == "all" else [n.strip() for n in names.split(",") if n.strip()]
    unknown = [n for n in chosen if n not in FAMILIES]
    if unknown:
        raise SystemExit(f"unknown families {unknown}; known: {', '.join(FAMILIES)}")
    all_cases = []
    with ControlPlane() as cp:
        for name in chosen:
            family = FAMILIES[name]
            done = run_family(cp, family, cases, seed)
            bad = [c for c in done if not c.agrees]
            for case in bad:
                print(f"[{name}] disagreement\n{case.describe()}")
            print(
                f"{name}: agreement {agreement(done):.4f} ({len(done) - len(bad)}/{len(done)}), "
                f"decisive {sum(map(decisive, done))}, crossed {crossed(done, family):.4f}"
            )
            all_cases.extend(done)
    ok = sum(c.agrees for c in all_cases)
    print(f"agreement: {agreement(all_cases):.4f} ({ok}/{len(all_cases)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
