"""The ``stickypack`` command line.

``stickypack simulate``  compare placement policies on a trace or a scenario (no cluster)
``stickypack policies``  list the built-in policies
``stickypack render``    write configuration for a real cluster (KubeSchedulerConfiguration)
``stickypack extender``  run the kube-scheduler extender (sticky builds)
``stickypack webhook``   run the admission webhook that gives labelled pods a schedulerName
``stickypack forget-node``  forget a node's build history (for an image cleaner)
``stickypack inspect``   what a live cluster looks like to the autoscaler, or where a pod would go and why
"""

from __future__ import annotations

import argparse
import os
import reprlib
import sys
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape

if TYPE_CHECKING:  # the extender's modules load only for its subcommands
    from stickypack.core.routing import RoutePlacement
    from stickypack.extender.config import ExtenderConfig, ListenConfig

EXIT_USAGE = 2


#: Launches are held in memory: a day at x1000 is about 17 million, several GiB.
MAX_LOAD_SCALE = 1000.0
#: Most seeds one ``--seeds`` may ask for (a seed is a full run of every policy).
MAX_SEEDS = 1000
#: Scenarios of a fixed size, which ``--load-scale`` does not change.
LOAD_FREE_SCENARIOS = ("dask-burst", "dask-adapt")


class UsageError(Exception):
    """Bad command-line input: printed as one line, exit status 2."""


def _non_negative_int(text: str) -> int:
    """An argparse type: an integer >= 0 (argparse turns the error into exit status 2)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is negative")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="stickypack", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)

    sim = sub.add_parser("simulate", help="compare policies on a trace or a scenario")
    src = sim.add_mutually_exclusive_group(required=True)
    src.add_argument("--scenario", help="dask-burst, dask-adapt or binder-day")
    src.add_argument(
        "--trace", nargs="+", metavar="PATH", help="launch-event files (.jsonl, .jsonl.gz) or directories"
    )
    sim.add_argument(
        "--policies",
        default=None,
        help="comma-separated built-in policy names (default: default,z2jh,binderhub,stickypack)",
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
    sim.add_argument("--seed", type=int, default=None, help="seed of every random draw (default 0)")
    sim.add_argument(
        "--seeds",
        default=None,
        metavar="LIST",
        help="run at several seeds, e.g. 0-4 or 0,3,7: means, ranges and wins per policy",
    )
    sim.add_argument(
        "--load-scale", type=float, default=1.0, help="replay a trace at this many times its rate"
    )
    sim.add_argument("--json", type=Path, metavar="FILE", help="write the metrics as JSON")
    sim.add_argument(
        "--timing", action="store_true", help="include wall_s in the JSON (then it is not reproducible)"
    )
    sim.add_argument("--plots", type=Path, metavar="DIR", help="write PNG plots into DIR")
    sim.add_argument("--quiet", action="store_true", help="no progress bar")
    sim.add_argument(
        "--jobs", type=int, default=None, help="policies simulated in parallel (default: one per core)"
    )

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

    render = sub.add_parser("render", help="write configuration for a real cluster")
    render_sub = render.add_subparsers(dest="what", required=True)
    sched = render_sub.add_parser(
        "scheduler-config", help="a KubeSchedulerConfiguration with stickypack's profiles"
    )
    sched.add_argument("--profiles", default="stickypack", help="comma-separated profiles to include")
    sched.add_argument("--kubeconfig", default=None, help="clientConnection.kubeconfig to set")
    _add_output(sched)
    sched.add_argument(
        "--extender-url",
        default=None,
        metavar="URL",
        help="add the stickypack extender at URL (e.g. http://stickypack-extender:8888) and raise qps/burst",
    )

    routing = render_sub.add_parser(
        "scheduler-routing",
        help="a MutatingAdmissionPolicy that gives labelled pods a schedulerName (Kubernetes 1.36+)",
    )
    routing.add_argument(
        "--scheduler-name", default="stickypack-builds", help="the schedulerName to set (a rendered profile)"
    )
    routing.add_argument(
        "--selector",
        default="component=binderhub-build",
        help="labels of the pods to route, key=value[,key=value...] (default: BinderHub build pods)",
    )
    routing.add_argument("--namespace", default=None, help="only pods of this namespace (default: all)")
    routing.add_argument(
        "--placement",
        default=None,
        metavar="FILE",
        help="YAML with node_affinity and/or tolerations to add to routed pods (as a webhook route's)",
    )
    _add_output(routing)

    hook_cfg = render_sub.add_parser(
        "webhook-config",
        help="the MutatingWebhookConfiguration that registers `stickypack webhook` (any Kubernetes)",
    )
    hook_cfg.add_argument(
        "--config", type=Path, default=None, metavar="FILE", help="webhook YAML configuration (its routes)"
    )
    where = hook_cfg.add_mutually_exclusive_group(required=True)
    where.add_argument("--url", default=None, help="the webhook's https://HOST[:PORT]/mutate")
    where.add_argument(
        "--service", default=None, metavar="NAMESPACE/NAME[:PORT]", help="the webhook's Service (port 443)"
    )
    hook_cfg.add_argument(
        "--ca-bundle", type=Path, default=None, metavar="FILE", help="PEM of the CA that signed its cert"
    )
    hook_cfg.add_argument(
        "--inject-ca-from",
        default=None,
        metavar="NAMESPACE/CERTIFICATE",
        help="let cert-manager fill in the CA bundle from this Certificate",
    )
    _add_output(hook_cfg)

    gateway = render_sub.add_parser(
        "dask-gateway",
        help="Helm values for the dask-gateway chart: node-aware retirement for every Dask cluster",
    )
    operator = render_sub.add_parser(
        "dask-kubernetes",
        help="a dask-kubernetes DaskCluster or DaskWorkerGroup set up for node-aware retirement",
    )
    operator.add_argument(
        "file", metavar="FILE", help="YAML of DaskCluster/DaskWorkerGroup documents, - for stdin"
    )
    for dask_parser in (gateway, operator):
        dask_parser.add_argument(
            "--scheduler-name",
            default=None,
            help="also give worker pods this schedulerName (not needed with the routing webhook)",
        )
        _add_output(dask_parser)

    sched.add_argument(
        "--extender-weight",
        type=int,
        default=None,
        metavar="N",
        help="the extender entry's weight (default: that of the default extender configuration; "
        "`stickypack extender --check` prints the one for yours)",
    )

    ext = sub.add_parser("extender", help="run the kube-scheduler extender")
    ext.add_argument("--config", type=Path, default=None, metavar="FILE", help="extender YAML configuration")
    ext.add_argument("--kubeconfig", default=None, help="kubeconfig (default: $KUBECONFIG, else in-cluster)")
    ext.add_argument("--host", default=None, help="listen address (overrides listen.host)")
    ext.add_argument("--port", type=int, default=None, help="listen port (overrides listen.port)")
    ext.add_argument("--check", action="store_true", help="validate the configuration and exit")

    hook = sub.add_parser("webhook", help="run the admission webhook giving labelled pods a schedulerName")
    hook.add_argument("--config", type=Path, default=None, metavar="FILE", help="webhook YAML configuration")
    hook.add_argument("--host", default=None, help="listen address (overrides listen.host)")
    hook.add_argument("--port", type=int, default=None, help="listen port (overrides listen.port)")
    hook.add_argument("--tls-cert", default=None, metavar="FILE", help="PEM certificate (tls.cert_file)")
    hook.add_argument("--tls-key", default=None, metavar="FILE", help="PEM private key (tls.key_file)")
    hook.add_argument("--check", action="store_true", help="validate the configuration and exit")
    hook.add_argument(
        "--route",
        type=Path,
        default=None,
        metavar="POD",
        help="print the route a Pod (YAML or JSON file) would take and the patch, then exit",
    )
    hook.add_argument(
        "--namespace", default=None, help="with --route: the pod's namespace (default: its own, else default)"
    )

    insp = sub.add_parser(
        "inspect",
        help="a live cluster's nodes as the autoscaler sees them, or where a pod would go and why",
    )
    insp.add_argument("--kubeconfig", default=None, help="kubeconfig (default: $KUBECONFIG or in-cluster)")
    insp.add_argument(
        "--pod",
        type=Path,
        default=None,
        metavar="FILE",
        help="a Pod (YAML or JSON): explain where the policy would place it, node by node",
    )
    insp.add_argument(
        "--config",
        type=Path,
        default=None,
        metavar="FILE",
        help="an extender configuration: its policy, profile, threshold and build history",
    )
    insp.add_argument(
        "--policy", default=None, help="a built-in policy or a policy file (default: stickypack)"
    )
    insp.add_argument(
        "--profile",
        default=None,
        help="the policy's profile (default: the extender's for a pod it manages (--config), "
        "else the one matching the pod)",
    )
    insp.add_argument(
        "--threshold",
        type=float,
        default=None,
        help="the autoscaler's scale-down utilization threshold (default 0.5, or the config's)",
    )
    insp.add_argument(
        "--local-storage-moves",
        action="store_true",
        help="your autoscaler runs with --skip-nodes-with-local-storage=false: local storage pins no node",
    )
    insp.add_argument(
        "--system-pods-move",
        action="store_true",
        help="your autoscaler runs with --skip-nodes-with-system-pods=false: kube-system pods need no budget",
    )
    insp.add_argument(
        "--expendable-pods-priority-cutoff",
        type=int,
        default=None,
        metavar="N",
        help="your autoscaler's cutoff (default -10): pods of a lower priority count for nothing",
    )
    insp.add_argument(
        "--min-replica-count",
        type=_non_negative_int,
        default=None,
        metavar="N",
        help="your autoscaler's --min-replica-count (default 0): a pod of a ReplicaSet or "
        "ReplicationController wanting fewer replicas pins its node",
    )
    insp.add_argument(
        "--gpu-threshold",
        type=float,
        default=None,
        metavar="X",
        help="your autoscaler's --scale-down-gpu-utilization-threshold, for GPU nodes (default 0.5, "
        "or the config's)",
    )
    insp.add_argument(
        "--gpu-label",
        action="append",
        default=None,
        metavar="KEY",
        help="a node label that marks a GPU node, your cloud provider's (repeatable; default "
        "cloud.google.com/gke-accelerator and k8s.amazonaws.com/accelerator; AKS: accelerator)",
    )
    insp.add_argument("--json", action="store_true", help="print JSON instead of a table")

    forget = sub.add_parser("forget-node", help="forget a node's build history (its image cache is gone)")
    forget.add_argument("node", metavar="NODE")
    forget.add_argument("--config", type=Path, default=None, metavar="FILE", help="extender configuration")
    forget.add_argument("--kubeconfig", default=None, help="kubeconfig (default: $KUBECONFIG or in-cluster)")
    forget.add_argument("--namespace", default=None, help="namespace of the history (overrides the config)")
    return parser


def _simulate(args: argparse.Namespace, console: Console) -> int:
    from stickypack.core import PluginContractError

    try:
        return _run_simulate(args, console)
    except PluginContractError as exc:  # a plugin of --plugins answered out of contract
        raise UsageError(str(exc)) from None


def _run_simulate(args: argparse.Namespace, console: Console) -> int:
    from stickypack.core.policy import PolicyError
    from stickypack.plugin_files import load_plugin_files
    from stickypack.policies import BUILTIN, DEFAULT_COMPARISON, load_builtin, load_policy_file
    from stickypack.sim.report import Comparison, SeedSweep, render_sweep_table, render_table, write_plots
    from stickypack.sim.runner import compare
    from stickypack.sim.traces import TraceErrors, read_launches
    from stickypack.sim.workloads import SCENARIOS, Workload, trace_workload

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
    seeds = parse_seeds(args.seeds) if args.seeds is not None else [args.seed or 0]
    names = (
        [n.strip() for n in args.policies.split(",") if n.strip()]
        if args.policies
        else ([] if args.policy_file else list(DEFAULT_COMPARISON))
    )
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
    if not policies:
        raise UsageError(f"--policies names no policy; valid: {', '.join(BUILTIN)}")
    seen: set[str] = set()
    for policy in policies:  # results, plots and progress are keyed by name
        if policy.name in seen:
            raise UsageError(
                f"policy {policy.name!r} is given twice (a --policy-file's name must differ from the "
                "other policies')"
            )
        seen.add(policy.name)

    from stickypack.sim.config import SimConfig, SimConfigError, load_sim_config

    try:
        config = load_sim_config(args.sim_config) if args.sim_config else SimConfig()
    except SimConfigError as exc:
        raise UsageError(str(exc)) from None
    errors = TraceErrors()
    if args.scenario is not None:
        if args.scenario not in SCENARIOS:
            raise UsageError(f"unknown scenario {args.scenario!r}; valid: {', '.join(SCENARIOS)}")
        if args.load_scale != 1.0 and args.scenario in LOAD_FREE_SCENARIOS:
            raise UsageError(
                f"--load-scale applies to --trace and binder-day; {args.scenario} has a fixed size"
            )
        builder = SCENARIOS[args.scenario]

        def factory_for(seed: int) -> Callable[[], Workload]:
            def factory() -> Workload:  # a fresh copy per policy: pods are mutable
                return config.apply_to(builder(seed, args.load_scale, config.binder, config.dask))

            return factory

        label = args.scenario
    else:
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

        def factory_for(seed: int) -> Callable[[], Workload]:
            workload = config.apply_to(
                trace_workload(launches, seed, args.load_scale, model=config.binder, name=label)
            )
            return lambda: workload  # launch jobs hold no pods: one copy serves every policy

    _check_outputs(args)  # after every input is checked: a usage error leaves no directory
    progress_cb = None
    done = 0  # seeds finished, for the progress bar
    if not args.quiet and sys.stderr.isatty():
        from rich.progress import Progress

        prog = Progress(console=Console(stderr=True), transient=True)
        prog.start()
        tasks = {p.name: prog.add_task(f"simulating {escape(p.name)}", total=len(seeds)) for p in policies}

        def progress_cb(name: str, fraction: float) -> None:
            prog.update(tasks[name], completed=done + fraction)
    else:
        prog = None
    comparisons = []
    try:
        for seed in seeds:
            cmp = compare(
                factory_for(seed),
                policies,
                seed=seed,
                load_scale=args.load_scale,
                autoscaler=config.autoscaler,
                cache=config.cache,
                progress=progress_cb,
                jobs=args.jobs,
            )
            cmp.scenario = label
            cmp.trace_errors = errors.count
            cmp.trace_error_examples = errors.first
            comparisons.append(cmp)
            done += 1
    finally:
        if prog is not None:
            prog.stop()
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
    return 0


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
        from stickypack.policies import load_policy_file

        try:
            plugins = load_plugin_files(args.plugins)
            policy = load_builtin(args.show) if args.show in BUILTIN else load_policy_file(args.show, plugins)
        except PolicyError as exc:
            raise UsageError(f"--show: {exc} (built-in policies: {', '.join(BUILTIN)})") from None
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


def _check_url(url: str) -> None:
    """``--extender-url``: http://host[:port][/path], or a usage error saying what is wrong.

    kube-scheduler appends ``/filter`` and ``/prioritize`` to it and ignores a failing
    extender (``ignorable``), so a URL it cannot use would silently turn the extender off."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 -- raises ValueError for a port out of range or not a number
    except ValueError as exc:
        raise UsageError(f"--extender-url {url!r}: {exc}") from None
    if parts.scheme == "https":
        raise UsageError(
            f"--extender-url {url!r}: the extender serves plain HTTP (no TLS); use http://HOST[:PORT]"
        )
    if parts.scheme != "http" or not parts.hostname:
        raise UsageError(f"--extender-url must be http://HOST[:PORT], got {url!r}")
    if parts.query or parts.fragment or parts.username is not None or any(c.isspace() for c in url):
        raise UsageError(
            f"--extender-url {url!r}: no query, fragment, user or spaces (kube-scheduler appends /filter)"
        )


def _add_output(parser: argparse.ArgumentParser) -> None:
    """The ``-o/--output FILE`` every ``render`` command takes (default: standard output)."""
    parser.add_argument("--output", "-o", type=Path, default=None, help="file to write (default: stdout)")


def _render(args: argparse.Namespace) -> int:
    from stickypack.render import (
        EXTENDER_CLIENT_BURST,
        EXTENDER_CLIENT_QPS,
        EXTENDER_WEIGHT,
        extender_entry,
        scheduler_config_yaml,
    )

    if args.what == "scheduler-routing":
        return _write_output(args.output, _routing_yaml(args))
    if args.what == "webhook-config":
        return _write_output(args.output, _webhook_config_yaml(args))
    if args.what in ("dask-gateway", "dask-kubernetes"):
        return _write_output(args.output, _dask_yaml(args))
    profiles = [p.strip() for p in args.profiles.split(",") if p.strip()]
    extra: dict[str, Any] = {}
    if args.extender_weight is not None and not args.extender_url:
        raise UsageError("--extender-weight needs --extender-url (the extender it weighs)")
    if args.extender_url:
        _check_url(args.extender_url)
        weight = EXTENDER_WEIGHT if args.extender_weight is None else args.extender_weight
        if not 1 <= weight <= 2**31 - 1:
            raise UsageError(f"--extender-weight must be a positive int32, got {weight}")
        extra = {
            "extender": extender_entry(args.extender_url, weight=weight),
            "qps": EXTENDER_CLIENT_QPS,
            "burst": EXTENDER_CLIENT_BURST,
        }
    try:
        text = scheduler_config_yaml(profiles, kubeconfig=args.kubeconfig, **extra)
    except (KeyError, ValueError) as exc:
        raise UsageError(str(exc).strip("'\"")) from None
    return _write_output(args.output, text)


def _dask_yaml(args: argparse.Namespace) -> str:
    import yaml

    from stickypack.core.labels import DNS_SUBDOMAIN
    from stickypack.core.yamltext import YAMLTextError, load_yaml_all
    from stickypack.daskconfig import DaskConfigError, dask_gateway_values_yaml, dask_kubernetes_spec
    from stickypack.textfile import TextFileError, read_text_file

    name = args.scheduler_name
    if name is not None and (not DNS_SUBDOMAIN.fullmatch(name) or len(name) > 253):
        raise UsageError(f"--scheduler-name {name!r} is not a valid scheduler name (a DNS subdomain)")
    if args.what == "dask-gateway":
        return dask_gateway_values_yaml(name)
    source = "<stdin>" if args.file == "-" else args.file
    try:
        text = sys.stdin.read() if args.file == "-" else read_text_file(Path(args.file))
        docs = load_yaml_all(text, source)
    except (TextFileError, YAMLTextError) as exc:
        raise UsageError(str(exc)) from None
    if not docs:
        raise UsageError(f"{source}: no documents (expected a DaskCluster or DaskWorkerGroup)")
    out = []
    for i, doc in enumerate(docs):
        try:
            out.append(dask_kubernetes_spec(doc, scheduler_name=name))
        except DaskConfigError as exc:
            raise UsageError(f"{source}: document {i + 1}: {exc}") from None
    return yaml.safe_dump_all(out, sort_keys=False, default_flow_style=False)


def _routing_yaml(args: argparse.Namespace) -> str:
    from stickypack.core.labels import DNS_SUBDOMAIN, is_dns_label
    from stickypack.kube.cache import parse_selector
    from stickypack.render import scheduler_routing_yaml

    if not DNS_SUBDOMAIN.fullmatch(args.scheduler_name) or len(args.scheduler_name) > 200:
        raise UsageError(f"--scheduler-name {args.scheduler_name!r} is not a valid scheduler name")
    if args.namespace is not None and not is_dns_label(args.namespace):
        raise UsageError(f"--namespace {args.namespace!r} is not a valid namespace name")
    try:
        selector = parse_selector(args.selector)
        if not selector:
            raise ValueError("a routing needs a label selector (it would catch every pod)")
    except ValueError as exc:
        raise UsageError(f"--selector: {exc}") from None
    placement = None if args.placement is None else _read_placement(args.placement)
    try:
        return scheduler_routing_yaml(args.scheduler_name, selector, args.namespace, placement)
    except ValueError as exc:  # a placement the policy cannot carry
        raise UsageError(f"{args.placement}: {exc}") from None


def _read_placement(path: str) -> RoutePlacement:
    """The placement in the YAML file ``path`` (``node_affinity`` and/or ``tolerations``, as
    a webhook route writes them), validated as a route's; :class:`UsageError` naming the
    file and what is wrong."""
    from stickypack.core.routing import RoutePlacement, SelectorError
    from stickypack.core.yamltext import YAMLTextError, load_yaml
    from stickypack.textfile import TextFileError, read_text_file

    try:
        raw = load_yaml(read_text_file(Path(path)), path)
    except (TextFileError, YAMLTextError) as exc:
        raise UsageError(str(exc)) from None
    keys = ("node_affinity", "tolerations")
    if not isinstance(raw, dict):
        raise UsageError(
            f"{path}: expected a mapping with node_affinity and/or tolerations, got {reprlib.repr(raw)}"
        )
    unknown = sorted(map(str, set(raw) - set(keys)))
    if unknown:
        raise UsageError(
            f"{path}: unknown key(s) {', '.join(unknown)} (a placement has {' and '.join(keys)})"
        )
    try:
        return RoutePlacement.from_dict(raw.get("node_affinity"), raw.get("tolerations"))
    except SelectorError as exc:
        raise UsageError(f"{path}: {exc}") from None


def _webhook_config_yaml(args: argparse.Namespace) -> str:
    import re
    from urllib.parse import urlsplit

    from stickypack.core.labels import DNS_SUBDOMAIN, is_dns_label
    from stickypack.render import webhook_configuration_yaml
    from stickypack.textfile import TextFileError, read_text_file
    from stickypack.webhook.config import ConfigError, load_config

    try:
        config = load_config(args.config)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    service: tuple[str, str, int] | None = None
    if args.url is not None:
        try:
            parts = urlsplit(args.url)
            parts.port  # noqa: B018 -- raises ValueError for a port out of range or not a number
        except ValueError as exc:
            raise UsageError(f"--url {args.url!r}: {exc}") from None
        if parts.scheme != "https" or not parts.hostname or parts.query or parts.fragment or parts.username:
            raise UsageError(
                f"--url must be https://HOST[:PORT]/PATH (the API server calls webhooks over HTTPS "
                f"only; no query, fragment or user), got {args.url!r}"
            )
        if parts.path in ("", "/"):
            raise UsageError(
                f"--url needs the webhook's path, e.g. https://{parts.netloc}/mutate (the API server "
                f"would POST to /, which `stickypack webhook` answers 404), got {args.url!r}"
            )
    else:
        text, colon, port_text = args.service.partition(":")
        namespace, slash, name = text.partition("/")
        if (
            not slash
            or not is_dns_label(namespace)
            or not is_dns_label(name)
            or (colon and not (port_text.isascii() and port_text.isdigit()))
        ):
            raise UsageError(f"--service must be NAMESPACE/NAME[:PORT], got {args.service!r}")
        port = int(port_text) if colon else 443
        if not 1 <= port <= 65535:
            raise UsageError(f"--service {args.service!r}: the port must be in 1..65535")
        service = (namespace, name, port)
    ca = None
    if args.ca_bundle is not None:
        try:
            ca = read_text_file(args.ca_bundle).encode("ascii", "replace")
        except TextFileError as exc:
            raise UsageError(str(exc)) from None
        from cryptography import x509

        try:
            x509.load_pem_x509_certificates(ca)
        except ValueError as exc:
            raise UsageError(f"--ca-bundle {args.ca_bundle}: not PEM certificates ({exc})") from None
        other = sorted({m for m in re.findall(rb"-----BEGIN ([^-]+)-----", ca) if m != b"CERTIFICATE"})
        if other:  # e.g. a combined cert-and-key file: the key must not reach the cluster object
            raise UsageError(
                f"--ca-bundle {args.ca_bundle}: found a '{other[0].decode()}' PEM block; give the CA's "
                "certificate(s) alone (the bundle is copied into a cluster-wide object)"
            )
    if args.inject_ca_from is not None:
        if args.ca_bundle is not None:
            raise UsageError(
                "give --ca-bundle or --inject-ca-from, not both (cert-manager would overwrite the bundle)"
            )
        namespace, slash, name = args.inject_ca_from.partition("/")
        if not slash or not is_dns_label(namespace) or not DNS_SUBDOMAIN.fullmatch(name):
            raise UsageError(f"--inject-ca-from must be NAMESPACE/CERTIFICATE, got {args.inject_ca_from!r}")
    if service is not None and ca is None and args.inject_ca_from is None:
        Console(stderr=True).print(
            "stickypack render: warning: no --ca-bundle or --inject-ca-from: the API server will "
            "check the webhook's certificate against its system trust roots, which a Service's "
            "certificate rarely passes (then every pod is created unrouted)",
            highlight=False,
            soft_wrap=True,
        )
    return webhook_configuration_yaml(
        config.scheduler_routes(),
        url=args.url,
        service=service,
        ca_bundle=ca,
        inject_ca_from=args.inject_ca_from,
    )


def _write_output(path: Path | None, text: str) -> int:
    if path:
        try:
            path.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"cannot write {path}: {exc.strerror or exc}") from None
    else:
        sys.stdout.write(text)
    return 0


def _load_extender_config(args: argparse.Namespace) -> ExtenderConfig:
    from stickypack.extender.config import ConfigError, load_config

    try:
        config = load_config(args.config)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    if args.kubeconfig:
        config.cluster.kubeconfig = args.kubeconfig
    return config


def _extender(args: argparse.Namespace, console: Console) -> int:
    from stickypack.core.policy import PolicyError
    from stickypack.extender.server import ExtenderService, serve

    config = _load_extender_config(args)
    _listen_overrides(args, config.listen)
    try:
        service = ExtenderService(config)  # loads the policy and checks the plugin names
    except PolicyError as exc:
        where = f"{args.config}: " if args.config and not str(exc).startswith(str(args.config)) else ""
        raise UsageError(f"{where}{exc}") from None
    if args.check:
        weight = service.extender.weight
        console.print(
            f"configuration ok; extender weight {weight} (the sum of its score plugins' weights: "
            f"render scheduler-config --extender-weight {weight})"
        )
        return 0
    return _run_service("extender", serve(config), config.listen.host, config.listen.port, config.log_level)


def _listen_overrides(args: argparse.Namespace, listen: ListenConfig) -> None:
    """``--host`` and ``--port`` into a service's ``listen`` section, checked."""
    if args.host is not None:
        from pydantic import ValidationError

        from stickypack.extender.config import ListenConfig

        try:
            ListenConfig(host=args.host)
        except ValidationError as exc:
            raise UsageError(f"--host: {exc.errors()[0]['msg']}") from None
        listen.host = args.host
    if args.port is not None:
        if not 0 <= args.port <= 65535:
            raise UsageError(f"--port must be in 0..65535, got {args.port}")
        listen.port = args.port


def _run_service(name: str, main: Coroutine[Any, Any, None], host: str, port: int, log_level: str) -> int:
    """Run a service's coroutine until it stops; a failure to start is one line, status 1."""
    import asyncio
    import logging

    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        import uvloop  # a faster event loop when installed (it is a dependency on Linux)

        run: Callable[[Coroutine[Any, Any, None]], None] = uvloop.run
    except ImportError:
        run = asyncio.run
    try:
        run(main)
    except SystemExit as exc:  # uvicorn exits with status 3 when it cannot listen
        if exc.code in (0, None):
            return 0
        Console(stderr=True).print(
            f"[red]stickypack {name}: error:[/] cannot serve on {escape(host)}:{port} "
            "(the log line above says why)",
            highlight=False,
            soft_wrap=True,
        )
        return 1
    except Exception as exc:  # a start-up failure (kubeconfig, bad address, certificate): one line
        Console(stderr=True).print(
            f"[red]stickypack {name}: error:[/] {type(exc).__name__}: {escape(str(exc))}",
            highlight=False,
            soft_wrap=True,
        )
        return 1
    return 0


def _read_pod_file(path: Path) -> dict[str, Any]:
    """A Pod from a YAML or JSON file; :class:`UsageError` naming the file otherwise."""
    from stickypack.core.yamltext import YAMLTextError, load_yaml
    from stickypack.textfile import TextFileError, read_text_file

    try:
        raw = load_yaml(read_text_file(path), str(path))
    except (TextFileError, YAMLTextError) as exc:
        raise UsageError(str(exc)) from None
    if not isinstance(raw, dict) or raw.get("kind", "Pod") != "Pod" or not isinstance(raw.get("spec"), dict):
        raise UsageError(f"{path}: not a Pod (a mapping with kind: Pod and a spec)")
    return raw


def _route_one(config: Any, path: Path, namespace: str | None, console: Console) -> int:
    """``webhook --route``: the route a pod would take and the patch, without a cluster."""
    import yaml

    from stickypack.core.routing import route_pod

    pod = _read_pod_file(path)
    metadata = pod.get("metadata")
    if namespace is None:
        namespace = metadata.get("namespace") if isinstance(metadata, dict) else None
        namespace = namespace if isinstance(namespace, str) and namespace else "default"
    try:
        decision = route_pod(config.scheduler_routes(), pod, namespace)
    except ValueError as exc:
        raise UsageError(f"{path}: {exc}") from None
    report = {
        "namespace": namespace,
        "route": decision.route,
        "reason": decision.reason,
        "patch": decision.patch,
    }
    console.print(
        yaml.safe_dump(report, sort_keys=False), end="", highlight=False, markup=False, soft_wrap=True
    )
    return 0


def _webhook(args: argparse.Namespace, console: Console) -> int:
    import ssl

    from stickypack.webhook.config import ConfigError, load_config
    from stickypack.webhook.server import serve

    try:
        config = load_config(args.config)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    if args.namespace is not None and args.route is None:
        raise UsageError("--namespace is for --route")
    if args.route is not None:
        return _route_one(config, args.route, args.namespace, console)
    _listen_overrides(args, config.listen)
    if (args.tls_cert is None) != (args.tls_key is None):
        raise UsageError("give both --tls-cert and --tls-key, or neither")
    if args.tls_cert is not None:
        config.tls.cert_file, config.tls.key_file = args.tls_cert, args.tls_key
    if config.tls.cert_file and config.tls.key_file:
        try:  # a bad certificate is found now, not when the first TLS handshake fails
            # an encrypted key would make OpenSSL prompt for its password on the terminal
            ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(
                config.tls.cert_file, config.tls.key_file, password=lambda: b""
            )
        except (OSError, ssl.SSLError) as exc:
            try:
                encrypted = b"ENCRYPTED" in Path(config.tls.key_file).read_bytes()
            except OSError:
                encrypted = False
            hint = " (the key is encrypted: give it unencrypted)" if encrypted else ""
            raise UsageError(
                f"TLS certificate {config.tls.cert_file} / key {config.tls.key_file}: {exc}{hint}"
            ) from None
    routes = ", ".join(f"{r.name} -> {r.scheduler_name}" for r in config.routes)
    if args.check:
        console.print(f"configuration ok; routes: {escape(routes)}", highlight=False)
        return 0
    if not config.tls.cert_file:
        Console(stderr=True).print(
            "stickypack webhook: warning: no TLS certificate; the API server calls webhooks over "
            "HTTPS only (serve plain HTTP behind a TLS-terminating proxy, or for tests)",
            highlight=False,
            soft_wrap=True,
        )
    return _run_service("webhook", serve(config), config.listen.host, config.listen.port, config.log_level)


def _inspect(args: argparse.Namespace, console: Console) -> int:
    import asyncio
    import json
    import math

    from stickypack.extender.config import ExtenderConfig

    config = _load_extender_config(args) if args.config else ExtenderConfig()
    if args.kubeconfig:
        config.cluster.kubeconfig = args.kubeconfig
    threshold = config.cluster.utilization_threshold if args.threshold is None else args.threshold
    if args.gpu_threshold is None:
        args.gpu_threshold = config.cluster.gpu_utilization_threshold
    for flag, value in (("--threshold", threshold), ("--gpu-threshold", args.gpu_threshold)):
        if value is not None and not (math.isfinite(value) and 0 < value <= 1):
            raise UsageError(f"{flag} must be in (0, 1], got {value}")
    node_report_only = [
        flag
        for flag, given in (
            ("--local-storage-moves", args.local_storage_moves),
            ("--system-pods-move", args.system_pods_move),
            ("--expendable-pods-priority-cutoff", args.expendable_pods_priority_cutoff is not None),
            ("--min-replica-count", args.min_replica_count is not None),
            ("--gpu-label", args.gpu_label is not None),
        )
        if given
    ]
    if args.pod is not None and node_report_only:
        raise UsageError(f"{', '.join(node_report_only)}: for the node report, not with --pod")
    pod_dict = _read_pod_file(args.pod) if args.pod is not None else None
    try:
        report = asyncio.run(_inspect_cluster(args, config, threshold, pod_dict))
    except UsageError:
        raise
    except Exception as exc:  # kubeconfig, network, RBAC: one line, status 1
        from stickypack.kube.client import describe_error

        Console(stderr=True).print(
            f"[red]stickypack inspect: error:[/] {escape(describe_error(exc))}",
            highlight=False,
            soft_wrap=True,
        )
        return 1
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        _print_inspection(console, report)
    return 0


async def _inspect_cluster(
    args: argparse.Namespace, config: ExtenderConfig, threshold: float, pod_dict: dict[str, Any] | None
) -> dict[str, Any]:
    """The report ``stickypack inspect`` prints, as JSON-ready data."""
    from stickypack.core.explain import (
        DEFAULT_GPU_LABELS,
        EXPENDABLE_PODS_PRIORITY_CUTOFF,
        ScaleDownRules,
        explain_placement,
        node_report,
    )
    from stickypack.core.framework import SchedulingContext
    from stickypack.core.pod import Pod, PodSpecError
    from stickypack.core.policy import PolicyError
    from stickypack.extender.engine import select_profile
    from stickypack.extender.server import history_limits, load_policy, make_store
    from stickypack.kube.cache import ClusterCache, matches
    from stickypack.kube.client import make_api_client
    from stickypack.kube.history import HistoryRecorder
    from stickypack.kube.snapshot import take_snapshot

    policy = profile = pod = None
    if pod_dict is not None:
        try:
            pod = Pod.from_dict(pod_dict)
        except PodSpecError as exc:
            raise UsageError(f"{args.pod}: {exc}") from None
        try:
            policy = load_policy(args.policy or config.policy, config.plugins)
            if args.profile:
                profile = select_profile(policy, args.profile)
            elif args.config and matches(pod.labels, config.pods.manage):
                # the extender places the pods it manages with its profile (null: the first)
                profile = select_profile(policy, config.profile)
            # else: the policy's profile for the pod, once its mutators have run (as simulated)
        except PolicyError as exc:
            raise UsageError(str(exc)) from None
    api = await make_api_client(config.cluster.kubeconfig)
    try:
        cache = ClusterCache(
            build_selector=config.pods.build_selector, builder_selector=config.pods.builder_selector
        )
        snap = await take_snapshot(api, cache, controllers=pod is None)
        history = None
        if pod is not None and args.config:
            recorder = HistoryRecorder(make_store(config, api), history_limits(config))
            await recorder.load()
            history = recorder.history
    finally:
        await api.close()
    import time

    table = snap.cache.table
    if pod is None:
        rules = ScaleDownRules(
            local_storage_pins=not args.local_storage_moves,
            system_pods_pin=not args.system_pods_move,
            budgets=snap.budgets,
            controllers=snap.controllers,
            unlisted_controller_kinds=frozenset(snap.unlisted_controllers),
            min_replica_count=args.min_replica_count or 0,
            gpu_labels=DEFAULT_GPU_LABELS if args.gpu_label is None else tuple(args.gpu_label),
            now=time.time(),
            expendable_priority_cutoff=(
                EXPENDABLE_PODS_PRIORITY_CUTOFF
                if args.expendable_pods_priority_cutoff is None
                else args.expendable_pods_priority_cutoff
            ),
        )
        nodes = node_report(table, snap.pods_by_node, rules)
        gpu_threshold = args.gpu_threshold
        verdicts = [r.verdict(threshold, gpu_threshold) for r in nodes]
        return {
            "threshold": threshold,
            "gpu_threshold": gpu_threshold,
            "nodes": [
                {
                    "node": r.node,
                    "ready": r.ready,
                    "unschedulable": r.unschedulable,
                    "scale_down_disabled": r.scale_down_disabled,
                    "autoscaler": r.autoscaler,
                    "cpu": round(r.cpu, 4),
                    "memory": round(r.memory, 4),
                    "gpu": None if r.gpu is None else round(r.gpu, 4),
                    "utilization": round(r.utilization, 4),
                    "pods": r.pods,
                    "daemon_pods": r.daemon_pods,
                    "expendable_pods": r.expendable_pods,
                    "terminating_pods": r.terminating_pods,
                    "builds": r.builds,
                    "pinning": list(r.pinning),
                    "pin_reasons": dict(zip(r.pinning, r.pin_reasons, strict=True)),
                    "verdict": v,
                }
                for r, v in zip(nodes, verdicts, strict=True)
            ],
            "summary": {v: verdicts.count(v) for v in ("busy", "disabled", "pinned", "removable", "empty")},
            "unreadable_pods": snap.unreadable,
            "budgets_read": snap.budgets is not None,
            "controllers_read": snap.controllers is not None and not snap.unlisted_controllers,
            "controllers_unlisted": sorted(snap.unlisted_controllers),
        }
    assert policy is not None
    ctx = SchedulingContext(
        now=time.time(),
        history=history,
        builder_nodes=snap.cache.builder_nodes(),
        utilization_threshold=threshold,
        gpu_utilization_threshold=args.gpu_threshold,
    )
    pod = policy.prepare(pod, table, ctx, profile)
    if profile is None:
        profile = policy.profile_for(pod)
    explanation = explain_placement(profile, pod, table, ctx)
    return {
        "pod": pod.key,
        "policy": policy.name,
        "profile": explanation.profile,
        "weights": dict(explanation.weights),
        "best": explanation.best,
        "nodes": [
            {"node": v.node, "filtered_by": v.filtered_by, "scores": dict(v.scores), "total": v.total}
            for v in explanation.verdicts
        ],
        "history": "from the extender's store" if history is not None else "none (give --config)",
        "unreadable_pods": snap.unreadable,
    }


def _print_inspection(console: Console, report: dict[str, Any]) -> None:
    from rich.table import Table

    if "pod" not in report:
        gpus = any(n["gpu"] is not None for n in report["nodes"])
        title = f"nodes as the cluster-autoscaler sees them (threshold {report['threshold']:g}"
        title += f", GPU nodes {report['gpu_threshold']:g})" if gpus else ")"
        table = Table(title=title)
        numbers = ("cpu", "memory", *(("gpu",) if gpus else ()), "pods", "builds")
        for column in ("node", *numbers, "autoscaler", "verdict", "pinned by"):
            table.add_column(column, justify="right" if column in numbers else "left")
        for n in report["nodes"]:
            state = n["autoscaler"] or (
                "not ready" if not n["ready"] else "cordoned" if n["unschedulable"] else ""
            )
            pinning = [f"{key} ({n['pin_reasons'][key]})" for key in n["pinning"]]
            shown = ", ".join(pinning[:3]) + (f" (+{len(pinning) - 3})" if len(pinning) > 3 else "")
            gpu = (("" if n["gpu"] is None else f"{n['gpu']:.0%}"),) if gpus else ()
            table.add_row(
                n["node"], f"{n['cpu']:.0%}", f"{n['memory']:.0%}", *gpu, str(n["pods"]), str(n["builds"]),
                state, n["verdict"], shown,
            )  # fmt: skip
        console.print(table)
        summary = report["summary"]
        console.print(
            f"{len(report['nodes'])} nodes: {summary['busy']} busy, {summary['pinned']} under the threshold "
            f"but pinned, {summary['removable']} removable, {summary['empty']} empty"
            + (f", {summary['disabled']} with scale-down disabled" if summary["disabled"] else ""),
            highlight=False,
        )
        _print_unreadable(console, report["unreadable_pods"])
        if not report["budgets_read"]:
            console.print(
                "PodDisruptionBudgets could not be listed (no `list` right on poddisruptionbudgets): "
                "pods they cover, and kube-system pods, are judged without them",
                highlight=False,
            )
        if report["controllers_unlisted"]:
            kinds = ", ".join(report["controllers_unlisted"])
            console.print(
                f"controllers could not be listed: {kinds} (no `list` right on them, or not served): "
                "a pod's controller of those kinds is taken to exist",
                highlight=False,
            )
        return
    plugins = list(report["weights"])
    # the pod file, a policy file and plugin files are not checked by an API server: their
    # names are printed as written, never read as console markup
    table = Table(title=escape(f"{report['pod']}: policy {report['policy']}, profile {report['profile']}"))
    table.add_column("node")
    for name in plugins:
        table.add_column(escape(f"{name} x{report['weights'][name]}"), justify="right")
    table.add_column("total", justify="right")
    for n in report["nodes"]:
        if n["filtered_by"]:
            table.add_row(n["node"], *["" for _ in plugins], escape(f"filtered by {n['filtered_by']}"))
        else:
            table.add_row(n["node"], *[str(n["scores"][p]) for p in plugins], str(n["total"]))
    console.print(table)
    console.print(f"build history: {report['history']}", highlight=False)
    best = report["best"]
    console.print(
        f"best: {', '.join(best)}" + (" (kube-scheduler picks one at random)" if len(best) > 1 else "")
        if best
        else "best: none (no node passes the filters)",
        highlight=False,
    )
    _print_unreadable(console, report["unreadable_pods"])


def _print_unreadable(console: Console, keys: list[str]) -> None:
    """The pods the snapshot skipped (their requests are missing from every node), if any."""
    if keys:
        shown = ", ".join(keys[:5]) + (f" (+{len(keys) - 5})" if len(keys) > 5 else "")
        few = (
            "1 pod could not be read and is"
            if len(keys) == 1
            else f"{len(keys)} pods could not be read and are"
        )
        console.print(f"{few} not counted: {escape(shown)}", highlight=False, soft_wrap=True)


def _forget_node(args: argparse.Namespace, console: Console) -> int:
    import asyncio

    from stickypack.core.labels import DNS_SUBDOMAIN, is_dns_label
    from stickypack.extender.server import make_store
    from stickypack.kube.client import make_api_client
    from stickypack.kube.history import NO_LIMITS, forget_node

    if len(args.node) > 253 or not DNS_SUBDOMAIN.fullmatch(args.node):
        shown = reprlib.repr(args.node)  # cut: a name may be any length
        raise UsageError(f"{shown} is not a node name (a DNS subdomain: lowercase a-z, 0-9, '-', '.')")
    config = _load_extender_config(args)
    if args.namespace:
        if not is_dns_label(args.namespace):
            raise UsageError(f"--namespace {args.namespace!r} is not a namespace name (a DNS label)")
        config.history.namespace = args.namespace
    if config.history.store == "memory":
        raise UsageError("history.store is memory: there is no stored history to forget")

    async def run() -> int:
        api = await make_api_client(config.cluster.kubeconfig)
        try:
            return await forget_node(make_store(config, api), args.node, NO_LIMITS)
        finally:
            await api.close()

    try:
        dropped = asyncio.run(run())
    except Exception as exc:  # API unreachable, RBAC, kubeconfig: one line, status 1
        from stickypack.kube.client import describe_error

        Console(stderr=True).print(
            f"[red]stickypack forget-node: error:[/] {escape(describe_error(exc))}",
            highlight=False,
            soft_wrap=True,
        )
        return 1
    console.print(f"forgot node {escape(args.node)}: {dropped} build history entries dropped")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    console = Console() if sys.stdout.isatty() else Console(width=200)
    try:
        if args.command == "simulate":
            return _simulate(args, console)
        if args.command == "policies":
            return _policies(args, console)
        if args.command == "render":
            return _render(args)
        if args.command == "extender":
            return _extender(args, console)
        if args.command == "webhook":
            return _webhook(args, console)
        if args.command == "inspect":
            return _inspect(args, console)
        if args.command == "forget-node":
            return _forget_node(args, console)
    except UsageError as exc:
        Console(stderr=True).print(
            f"[red]stickypack {args.command}: error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True
        )
        return EXIT_USAGE
    return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
