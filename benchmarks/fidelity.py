"""Fidelity: do stickypack's `default` and `z2jh` policies choose what kube-scheduler chooses?

Usage: python benchmarks/fidelity.py --cases 300 --seed 1 [--policy default|z2jh|both] [--images]
       python benchmarks/fidelity.py --families all|noderesources,rtcr,... --cases 300 --seed 1

Starts the local control plane (tools/k8s/build.sh builds it), runs random cases against the
real kube-scheduler (default profile; the rendered `z2jh` profile, the z2jh user-scheduler's
scoring with ImageLocality 11), prints each disagreement with its case, and as its last line
`agreement: X (k/n)` over all policies run. `--images`: nodes list images and pods run them
(ImageLocality scores; see `stickypack.testing.fidelity`).

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
import sys

from stickypack.policies import load_builtin
from stickypack.render import scheduler_config
from stickypack.testing.controlplane import ControlPlane
from stickypack.testing.fidelity import agreement, run_cases

# our policy name -> (rendered profile, schedulerName)
REAL = {"default": ("default-scheduler", "default-scheduler"), "z2jh": ("z2jh", "z2jh")}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cases", type=int, default=300)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--policy", choices=["default", "z2jh", "both"], default="both")
    parser.add_argument("--images", action="store_true", help="nodes list images that pods run")
    parser.add_argument(
        "--families", default=None, help="plugin families to run instead (comma list, or all)"
    )
    args = parser.parse_args()
    if args.families:
        return families(args.families, args.cases, args.seed)
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
