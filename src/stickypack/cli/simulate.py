"""``stickypack simulate`` (policies compared on a trace or a scenario) and ``stickypack policies``."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape

from stickypack.cli.common import UsageError

if TYPE_CHECKING:  # loaded by the handlers only: `stickypack --help` imports none of them
    from stickypack.core.policy import Policy
    from stickypack.sim.config import SimConfig
    from stickypack.sim.report import Comparison
    from stickypack.sim.traces import TraceErrors
    from stickypack.sim.workloads import Workload

#: Launches are held in memory: a day at x1000 is about 17 million, several GiB.
MAX_LOAD_SCALE = 1000.0
#: Most seeds one ``--seeds`` may ask for (a seed is a full run of every policy).
MAX_SEEDS = 1000
#: A run stopped by Ctrl-C exits as a shell reports a command SIGINT stopped (128 + 2).
EXIT_INTERRUPTED = 130
#: Scenarios of a fixed size, which ``--load-scale`` does not change.
LOAD_FREE_SCENARIOS = ("dask-burst", "dask-adapt")


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``simulate`` and ``policies``."""
    _add_simulate(sub)
    _add_policies(sub)


def _add_simulate(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``simulate``: what to run (a scenario or a trace, the policies, the model, the seeds,
    the load) and where its results go."""
    sim = sub.add_parser("simulate", help="compare policies on a trace or a scenario")
    src = sim.add_mutually_exclusive_group(required=True)
    src.add_argument("--scenario", metavar="NAME", help="dask-burst, dask-adapt or binder-day")
    src.add_argument(
        "--trace",
        nargs="+",
        metavar="PATH",
        help="launch-event files (JSON lines, plain or gzip) or directories of .jsonl[.gz] files",
    )
    sim.add_argument(
        "--policies",
        default=None,
        help="comma-separated built-in policy names (default: default,z2jh,binderhub,stickypack; "
        "with --policy-file, none unless named)",
    )
    sim.add_argument(
        "--policy-file",
        action="append",
        default=[],
        metavar="FILE",
        help="a policy of your own (YAML); repeatable",
    )
    sim.add_argument(
        "--plugins",
        action="append",
        default=[],
        metavar="FILE",
        help="Python file of your own plugins for --policy-file policies (docs/configuration.md); repeatable",
    )
    sim.add_argument(
        "--sim-config", type=Path, metavar="FILE", help="override model parameters (YAML; docs/simulator.md)"
    )
    sim.add_argument(
        "--seed", type=int, default=None, metavar="N", help="seed of every random draw (default 0)"
    )
    sim.add_argument(
        "--seeds",
        default=None,
        metavar="LIST",
        help=f"run at several seeds, e.g. 0-4 or 0,3,7 (at most {MAX_SEEDS}): means, ranges and wins "
        "per policy",
    )
    sim.add_argument(
        "--load-scale",
        type=float,
        default=1.0,
        metavar="X",
        help=f"replay a trace or binder-day at X times its rate (0 < X <= {MAX_LOAD_SCALE:g})",
    )
    sim.add_argument("--json", type=Path, metavar="FILE", help="write the metrics as JSON")
    sim.add_argument(
        "--timing", action="store_true", help="include wall_s in the JSON (then it is not reproducible)"
    )
    sim.add_argument("--plots", type=Path, metavar="DIR", help="write PNG plots into DIR")
    sim.add_argument("--quiet", action="store_true", help="no progress bar")
    sim.add_argument(
        "--jobs",
        type=int,
        default=None,
        metavar="N",
        help="policies simulated in parallel (default: one per core)",
    )
    sim.set_defaults(handler=_simulate)


def _add_policies(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``policies``: the built-ins listed, or one policy shown in full."""
    pol = sub.add_parser("policies", help="list the built-in policies, or show one in full")
    pol.add_argument(
        "--show",
        metavar="NAME|FILE",
        default=None,
        help="print a built-in policy or a policy file as YAML, every plugin argument given",
    )
    pol.add_argument(
        "--plugins", action="append", default=[], metavar="FILE", help="Python file of your own plugins"
    )
    pol.set_defaults(handler=_policies)


def _simulate(args: argparse.Namespace, console: Console) -> int:
    from stickypack.core import PluginContractError

    try:
        return _run_simulate(args, console)
    except PluginContractError as exc:  # a plugin of --plugins answered out of contract
        raise UsageError(str(exc)) from None
    except KeyboardInterrupt:  # Ctrl-C in a long run: stopped, not crashed
        Console(stderr=True).print("stickypack simulate: interrupted", highlight=False)
        return EXIT_INTERRUPTED


def _run_simulate(args: argparse.Namespace, console: Console) -> int:
    """``simulate``, step by step: the arguments and inputs are checked first (a
    :class:`UsageError`, before anything is simulated or created), then the output
    directories are created, each seed is run, and the table is printed and the files
    written. One check comes later: a trace that ``--load-scale`` leaves without a launch
    at some seed is a :class:`UsageError` when that seed's workload is made
    (:func:`_trace_workloads`), once the directories exist."""
    seeds = _checked_seeds(args)
    policies = _load_policies(args)
    config = _load_sim_config(args)
    workloads = (
        _scenario_workloads(args, config) if args.scenario is not None else _trace_workloads(args, config)
    )
    _check_outputs(args)  # after the inputs are checked: their usage errors leave no directory
    comparisons = _run_seeds(args, seeds, policies, config, workloads)
    _report(args, comparisons, console)
    return 0


def _checked_seeds(args: argparse.Namespace) -> list[int]:
    """The seeds to run (``--seeds``, else ``--seed``, else 0), once ``--load-scale``,
    ``--jobs``, ``--seed`` and ``--seeds`` are checked, in that order: a
    :class:`UsageError` for the first that is wrong. Reads no file."""
    if not 0 < args.load_scale <= MAX_LOAD_SCALE:
        raise UsageError(
            f"--load-scale must be > 0 and <= {MAX_LOAD_SCALE:g} (a trace day at x{MAX_LOAD_SCALE:g} is"
            f" about 17 million launches), got {args.load_scale}"
        )
    if args.jobs is not None and args.jobs < 1:
        raise UsageError(f"--jobs must be >= 1, got {args.jobs}")
    if args.seed is not None and args.seeds is not None:
        raise UsageError("give --seed or --seeds, not both")
    if args.seed is not None and args.seed < 0:
        raise UsageError(f"--seed must be >= 0 (numpy seeds are non-negative), got {args.seed}")
    return parse_seeds(args.seeds) if args.seeds is not None else [args.seed or 0]


def _load_policies(args: argparse.Namespace) -> list[Policy]:
    """The policies to compare: the built-ins ``--policies`` names (without it, the default
    comparison, or none when a ``--policy-file`` is given), then each ``--policy-file``
    read with the ``--plugins`` files' plugins. A :class:`UsageError` for an unknown or
    empty name, ``--plugins`` without a policy file, a file that cannot be read, or two
    policies of one name (results, plots and progress are keyed by name)."""
    from stickypack.core.policy import PolicyError
    from stickypack.plugin_files import load_plugin_files
    from stickypack.policies import BUILTIN, DEFAULT_COMPARISON, load_builtin, load_policy_file

    if args.policies is None:
        names = [] if args.policy_file else list(DEFAULT_COMPARISON)
    else:
        names = parse_policy_names(args.policies, BUILTIN)
    unknown = [n for n in names if n not in BUILTIN]
    if unknown:
        raise UsageError(f"unknown policy {', '.join(map(repr, unknown))}; valid: {', '.join(BUILTIN)}")
    if args.plugins and not args.policy_file:
        raise UsageError("--plugins is for the plugins a --policy-file names; give the policy file too")
    try:
        plugins = load_plugin_files(args.plugins)
        policies = [load_builtin(n) for n in names] + [load_policy_file(f, plugins) for f in args.policy_file]
    except PolicyError as exc:
        raise UsageError(str(exc)) from None
    seen: set[str] = set()
    for policy in policies:  # results, plots and progress are keyed by name
        if policy.name in seen:
            raise UsageError(
                f"policy {policy.name!r} is given twice (a --policy-file's name must differ from the "
                "other policies')"
            )
        seen.add(policy.name)
    return policies


def _load_sim_config(args: argparse.Namespace) -> SimConfig:
    """``--sim-config``'s model parameters, else the defaults; a :class:`UsageError` naming
    the file and field when it cannot be used."""
    from stickypack.sim.config import SimConfig, SimConfigError, load_sim_config

    try:
        return load_sim_config(args.sim_config) if args.sim_config else SimConfig()
    except SimConfigError as exc:
        raise UsageError(str(exc)) from None


@dataclass
class _Workloads:
    """What ``simulate`` runs: ``label``, the run's name in the reports (the scenario, or
    ``trace:`` and the files' names); ``factory_for(seed)``, a function making that seed's
    workload for one policy (called once per policy); ``errors``, the malformed lines of
    the trace (none for a scenario)."""

    label: str
    factory_for: Callable[[int], Callable[[], Workload]]
    errors: TraceErrors


def _scenario_workloads(args: argparse.Namespace, config: SimConfig) -> _Workloads:
    """``--scenario``'s workloads; a :class:`UsageError` for an unknown scenario, or a
    ``--load-scale`` given to one of a fixed size. Each policy gets a fresh copy of the
    workload (its pods are mutable), ``config`` applied."""
    from stickypack.sim.traces import TraceErrors
    from stickypack.sim.workloads import SCENARIOS

    if args.scenario not in SCENARIOS:
        raise UsageError(f"unknown scenario {args.scenario!r}; valid: {', '.join(SCENARIOS)}")
    if args.load_scale != 1.0 and args.scenario in LOAD_FREE_SCENARIOS:
        raise UsageError(f"--load-scale applies to --trace and binder-day; {args.scenario} has a fixed size")
    builder = SCENARIOS[args.scenario]

    def factory_for(seed: int) -> Callable[[], Workload]:
        def factory() -> Workload:  # a fresh copy per policy: pods are mutable
            return config.apply_to(builder(seed, args.load_scale, config.binder, config.dask))

        return factory

    return _Workloads(args.scenario, factory_for, TraceErrors())


def _trace_workloads(args: argparse.Namespace, config: SimConfig) -> _Workloads:
    """``--trace``'s workloads: the launches of every file read now; a :class:`UsageError`
    when a file cannot be read, none holds a launch, or ``--load-scale`` keeps fewer than
    one on average. ``factory_for(seed)`` builds the seed's workload when called (a
    :class:`UsageError` when the scaling kept no launch at that seed), one copy for every
    policy (launch jobs hold no pods)."""
    from stickypack.sim.traces import TraceErrors, read_launches
    from stickypack.sim.workloads import trace_workload

    errors = TraceErrors()
    try:
        launches = read_launches(args.trace, errors)
    except OSError as exc:  # a trace not found, or a directory that cannot be listed
        raise UsageError(str(exc)) from None
    if not launches:
        why = "the trace holds no readable launch events"
        if errors.count:
            why += f"; {errors.count} malformed line(s), first: " + "; ".join(errors.first)
        raise UsageError(why)
    label = "trace:" + ",".join(Path(p).name for p in args.trace)
    if len(launches) * args.load_scale < 1:
        raise UsageError(
            f"--load-scale {args.load_scale:g} keeps fewer than one of the trace's "
            f"{len(launches)} launch(es) on average: nothing to simulate"
        )

    def factory_for(seed: int) -> Callable[[], Workload]:
        workload = config.apply_to(
            trace_workload(launches, seed, args.load_scale, model=config.binder, name=label)
        )
        if not workload.jobs:
            raise UsageError(
                f"--load-scale {args.load_scale:g} kept none of the trace's {len(launches)} "
                f"launch(es) at seed {seed}: nothing to simulate"
            )
        return lambda: workload  # launch jobs hold no pods: one copy serves every policy

    return _Workloads(label, factory_for, errors)


def _run_seeds(
    args: argparse.Namespace,
    seeds: list[int],
    policies: list[Policy],
    config: SimConfig,
    workloads: _Workloads,
) -> list[Comparison]:
    """Every policy run on each seed's workload (:func:`~stickypack.sim.runner.compare`,
    ``--jobs`` in parallel), one :class:`Comparison` per seed, in order, labelled with the
    run's name and the trace's malformed lines. A progress bar per policy on a terminal's
    standard error (not with ``--quiet``), advancing by one per seed, gone at the end."""
    from stickypack.sim.runner import compare

    bars = _ProgressBars(policies, len(seeds)) if not args.quiet and sys.stderr.isatty() else None
    comparisons = []
    try:
        for seed in seeds:
            cmp = compare(
                workloads.factory_for(seed),
                policies,
                seed=seed,
                load_scale=args.load_scale,
                autoscaler=config.autoscaler,
                cache=config.cache,
                progress=bars.update if bars is not None else None,
                jobs=args.jobs,
            )
            cmp.scenario = workloads.label
            cmp.trace_errors = workloads.errors.count
            cmp.trace_error_examples = workloads.errors.first
            comparisons.append(cmp)
            if bars is not None:
                bars.done += 1
    finally:
        if bars is not None:
            bars.stop()
    return comparisons


class _ProgressBars:
    """A transient progress bar per policy on standard error, each counting seeds: ``done``
    seeds finished, and :meth:`update` (``compare``'s progress callback) adding the running
    seed's fraction."""

    def __init__(self, policies: list[Policy], seeds: int) -> None:
        from rich.progress import Progress

        self.done = 0
        self._progress = Progress(console=Console(stderr=True), transient=True)
        self._progress.start()
        self._tasks = {
            p.name: self._progress.add_task(f"simulating {escape(p.name)}", total=seeds) for p in policies
        }

    def update(self, name: str, fraction: float) -> None:
        self._progress.update(self._tasks[name], completed=self.done + fraction)

    def stop(self) -> None:
        self._progress.stop()


def _report(args: argparse.Namespace, comparisons: list[Comparison], console: Console) -> None:
    """The results on ``console``: one seed's table, or with ``--seeds`` the sweep's; then
    ``--json`` (the same report; ``wall_s`` with ``--timing``) and ``--plots`` (of the
    first seed), each file's path printed. A file that cannot be written is a
    :class:`UsageError` (the table is out already)."""
    from stickypack.sim.report import SeedSweep, render_sweep_table, render_table, write_plots

    report: Comparison | SeedSweep
    if args.seeds is None:
        report = comparisons[0]
        render_table(report, console)
    else:
        report = SeedSweep(comparisons)
        render_sweep_table(report, console)
    if args.json:
        try:
            report.write_json(args.json, timing=args.timing)
        except OSError as exc:  # the table is out already; say what could not be written
            raise UsageError(f"cannot write {exc.filename or args.json}: {exc.strerror or exc}") from None
        console.print(f"JSON: {escape(str(args.json))}")
    if args.plots:
        if len(comparisons) > 1:
            console.print(f"plots of seed {comparisons[0].seed}:")
        try:
            paths = write_plots(comparisons[0], args.plots)
        except OSError as exc:
            raise UsageError(f"cannot write {exc.filename or args.plots}: {exc.strerror or exc}") from None
        for path in paths:
            console.print(f"plot: {escape(str(path))}")


def parse_policy_names(spec: str, valid: Sequence[str]) -> list[str]:
    """``--policies``: comma-separated policy names, spaces around them dropped. An empty
    list (``''``) or an empty item (``a,,b``, ``a,``) is a :class:`UsageError` listing
    ``valid``: a list written by a script whose variable came out empty must not silently
    mean the default policies, or fewer policies than it names."""
    names = [name.strip() for name in spec.split(",")]
    if not any(names):
        raise UsageError(f"--policies names no policy; valid: {', '.join(valid)}")
    empty = next((i for i, name in enumerate(names, 1) if not name), None)
    if empty is not None:
        raise UsageError(f"--policies {spec!r}: item {empty} is empty; valid: {', '.join(valid)}")
    return names


def parse_seeds(spec: str) -> list[int]:
    """``--seeds``: comma-separated seeds and inclusive ranges (``0-4``, ``0,3,7``,
    ``0-2,9``), each seed once, in the order given."""
    seeds: list[int] = []
    given: set[int] = set()
    for item in spec.split(","):
        item = item.strip()
        low, sep, high = item.partition("-")
        try:
            first, last = (int(low), int(high)) if sep else (int(item), int(item))
        except ValueError:
            raise UsageError(
                f"--seeds: {item!r} is not a seed or a range of seeds (like 0-4 or 0,3,7)"
            ) from None
        if first > last:
            raise UsageError(f"--seeds: the range {item!r} runs backwards")
        if first < 0:
            raise UsageError(f"--seeds: seeds are >= 0, got {item!r}")
        if len(seeds) + last - first + 1 > MAX_SEEDS:
            raise UsageError(f"--seeds: at most {MAX_SEEDS} seeds (each is a full run of every policy)")
        for seed in range(first, last + 1):
            if seed in given:
                raise UsageError(f"--seeds: seed {seed} is given twice")
            given.add(seed)
            seeds.append(seed)
    return seeds


def _check_outputs(args: argparse.Namespace) -> None:
    """Fail before a long run, not after it, when ``--json`` or ``--plots`` cannot be written:
    create their directories now (once the other arguments and the inputs have been checked)."""
    dirs = [("--json", Path(args.json).parent)] if args.json else []
    if args.plots:
        dirs.append(("--plots", Path(args.plots)))
    for flag, directory in dirs:
        # the nearest existing path at or above the directory: a file there is in the way
        found = next((path for path in (directory, *directory.parents) if path.exists()), None)
        if found is not None and not found.is_dir():
            if found == directory:
                raise UsageError(f"{flag}: {directory} is a file, not a directory")
            raise UsageError(f"{flag}: cannot create directory {directory}: {found} is a file")
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(f"{flag}: cannot create directory {directory}: {exc.strerror or exc}") from None
        if not os.access(directory, os.W_OK):
            raise UsageError(f"{flag}: directory {directory} is not writable")
    if args.json and Path(args.json).is_dir():
        raise UsageError(f"--json: {args.json} is a directory; give a file name")


def _policies(args: argparse.Namespace, console: Console) -> int:
    from rich.table import Table

    from stickypack.policies import BUILTIN, load_builtin

    if args.plugins and args.show is None:
        raise UsageError("--plugins goes with --show FILE (the policy file that names them)")
    if args.show is not None:
        import yaml

        from stickypack.core.policy import PolicyError
        from stickypack.plugin_files import load_plugin_files
        from stickypack.policies import load_policy

        try:
            policy = load_policy(args.show, load_plugin_files(args.plugins))
        except PolicyError as exc:
            raise UsageError(f"--show: {exc}") from None
        sys.stdout.write(yaml.safe_dump(policy.describe(), sort_keys=False, width=100))
        return 0

    table = Table(title="built-in policies")
    table.add_column("name", style="bold")
    table.add_column("profiles")
    table.add_column("description")
    for name in BUILTIN:
        policy = load_builtin(name)
        table.add_row(name, escape(", ".join(p.name for p in policy.profiles)), escape(policy.description))
    console.print(table)
    return 0
