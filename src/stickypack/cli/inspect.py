"""``stickypack inspect`` (a live cluster as the autoscaler sees it, or where a pod would go
and why) and ``stickypack forget-node`` (a node's build history dropped)."""

from __future__ import annotations

import argparse
import dataclasses
import reprlib
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape

from stickypack.cli.common import (
    UsageError,
    _cluster_failure,
    _duration_s,
    _load_extender_config,
    _non_negative_int,
    _read_pod_file,
)

if TYPE_CHECKING:  # the extender's and the API client's modules load only when run
    from rich.table import Table

    from stickypack.core.dra import DraDevices, DraReading, DynamicResourcesFilter
    from stickypack.core.drain import ScaleDownPlan
    from stickypack.core.explain import NodeReport, PlacementExplanation, ScaleDownRules
    from stickypack.core.framework import Profile, SchedulingContext
    from stickypack.core.history import BuildHistory
    from stickypack.core.nodegroups import NodeGroups
    from stickypack.core.nodetable import NodeTable
    from stickypack.core.pod import Pod
    from stickypack.core.podaffinity import PodsOnNodes
    from stickypack.core.policy import Policy
    from stickypack.extender.config import ExtenderConfig
    from stickypack.kube.snapshot import Snapshot


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``inspect`` and ``forget-node``."""
    insp = sub.add_parser(
        "inspect",
        help="a live cluster's nodes as the autoscaler sees them, or where a pod would go and why",
    )
    _add_kubeconfig(insp)
    _add_placement_arguments(insp)
    _add_autoscaler_arguments(insp)
    _add_utilization_arguments(insp)
    _add_node_group_arguments(insp)
    insp.add_argument(
        "--dra",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="your autoscaler runs with --enable-dynamic-resource-allocation: a node with node-local "
        "ResourceSlices is weighed by its most used DRA device pool, in the node report and by "
        "ScaleDownAware with --pod, and the scale-down plan moves a pod whose claims hold "
        "node-local devices only to a node where kube-scheduler's allocator can allocate them again "
        "(the DeviceClasses' and requests' CEL selectors); with --pod, the "
        "pod's claims are judged as kube-scheduler's DynamicResources does, its claims not allocated "
        "yet allocated node by node with the DeviceClasses' and requests' CEL selectors "
        "(lists ResourceSlices, ResourceClaims and DeviceClasses, with --pod ResourceClaimTemplates; "
        "default: off, or the config's cluster.dra)",
    )
    insp.add_argument("--json", action="store_true", help="print JSON instead of a table")
    insp.set_defaults(handler=_inspect)

    forget = sub.add_parser("forget-node", help="forget a node's build history (its image cache is gone)")
    forget.add_argument("node", metavar="NODE")
    forget.add_argument("--config", type=Path, default=None, metavar="FILE", help="extender configuration")
    _add_kubeconfig(forget)
    forget.add_argument("--namespace", default=None, help="namespace of the history (overrides the config)")
    forget.set_defaults(handler=_forget_node)


def _add_kubeconfig(parser: argparse.ArgumentParser) -> None:
    """``--kubeconfig``, the cluster both commands read."""
    parser.add_argument(
        "--kubeconfig",
        default=None,
        help="kubeconfig (default: $KUBECONFIG, else in-cluster, else ~/.kube/config)",
    )


def _add_placement_arguments(insp: argparse.ArgumentParser) -> None:
    """``inspect --pod`` and what places it: the extender configuration, policy, profile."""
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
        "--policy",
        default=None,
        help="with --pod: a built-in policy or a policy file (default: the config's policy, else stickypack)",
    )
    insp.add_argument(
        "--profile",
        default=None,
        help="with --pod: the policy's profile (default: the extender's for a pod it manages (--config), "
        "else the one matching the pod)",
    )
    insp.add_argument(
        "--scheduler-profile",
        action="append",
        default=[],
        metavar="NAME",
        help="with --pod: another profile (schedulerName) of the kube-scheduler that runs the pod's; "
        "the pending pods of that profile nominated to a node count too, as that kube-scheduler "
        "counts them (repeatable)",
    )


def _add_autoscaler_arguments(insp: argparse.ArgumentParser) -> None:
    """The cluster-autoscaler's flags ``inspect`` weighs nodes by: its utilization
    threshold and drainability rules (which pods keep a node)."""
    insp.add_argument(
        "--threshold",
        type=float,
        default=None,
        help="the autoscaler's --scale-down-utilization-threshold, 0 to 1 (default 0.5, or the "
        "config's); 0: only nodes at utilization 0 are candidates, as in cluster-autoscaler 1.35+",
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
        "--blocking-system-pod-distruption-timeout",  # sic: the autoscaler's spelling
        "--blocking-system-pod-disruption-timeout",
        dest="system_pod_timeout",
        type=_duration_s,
        default=None,
        metavar="DURATION",
        help="your autoscaler's (1.33+) --blocking-system-pod-distruption-timeout (default 1h): a "
        "kube-system pod without a budget pins its node only until it is this old",
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


def _add_utilization_arguments(insp: argparse.ArgumentParser) -> None:
    """The cluster-autoscaler's flags on what counts in a node's utilization: DaemonSet and
    mirror pods' requests, and a GPU node's GPUs (its threshold, the labels that mark one)."""
    for flag, what in (("daemonsets", "DaemonSet"), ("mirror-pods", "mirror")):
        insp.add_argument(
            f"--ignore-{flag}-utilization",
            action=argparse.BooleanOptionalAction,
            default=None,
            help=f"your autoscaler's --ignore-{flag}-utilization: {what} pods' requests left out of "
            "a node's utilization and allocatable (default: off, or the config's)",
        )
    insp.add_argument(
        "--gpu-threshold",
        type=float,
        default=None,
        metavar="X",
        help="your autoscaler's --scale-down-gpu-utilization-threshold, for GPU nodes, 0 to 1 "
        "(default 0.5, or the config's)",
    )
    insp.add_argument(
        "--gpu-label",
        action="append",
        default=None,
        metavar="KEY",
        help="a node label that marks a GPU node, your cloud provider's (repeatable; default "
        "the config's cluster.gpu_labels, else cloud.google.com/gke-accelerator and "
        "k8s.amazonaws.com/accelerator; AKS: kubernetes.azure.com/accelerator, before "
        "cluster-autoscaler 1.31 accelerator)",
    )


def _add_node_group_arguments(insp: argparse.ArgumentParser) -> None:
    """The autoscaler's node groups and the limits that keep nodes: groups' minimum sizes,
    the cluster's minimum cores and memory."""
    insp.add_argument(
        "--node-group-label",
        action="append",
        default=None,
        metavar="KEY",
        help="a node label whose value names the autoscaler's node group of a node (repeatable: "
        "the values joined by '/', e.g. the pool and topology.kubernetes.io/zone for GKE's "
        "per-zone groups; default the config's cluster.node_group_labels, else the first of "
        "cloud.google.com/gke-nodepool, eks.amazonaws.com/nodegroup, kubernetes.azure.com/agentpool)",
    )
    insp.add_argument(
        "--min-size",
        action="append",
        type=_min_size,
        default=None,
        metavar="GROUP=N",
        help="a node group's minimum size (repeatable; default the config's "
        "cluster.node_group_min_sizes): the autoscaler removes none of its nodes at or under it",
    )
    for flag, unit in (("cores", "cores"), ("memory", "GiB")):
        insp.add_argument(
            f"--{flag}-total",
            type=_min_max,
            default=None,
            metavar="MIN:MAX",
            help=f"your autoscaler's --{flag}-total ({unit}): it removes no node that would take the "
            f"cluster's {flag} under MIN",
        )


def _min_size(text: str) -> tuple[str, int]:
    """An argparse type: ``GROUP=N``, a node group's name and its minimum size (>= 0)."""
    name, sep, size = text.rpartition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"{text!r} is not GROUP=N (a node group and its minimum size)")
    try:
        value = int(size)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: {size!r} is not an integer") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: the minimum size is negative")
    return name, value


def _min_max(text: str) -> tuple[int, int]:
    """An argparse type: ``MIN:MAX``, integers with 0 <= MIN <= MAX (the autoscaler's
    ``--cores-total`` and ``--memory-total``)."""
    low, sep, high = text.partition(":")
    try:
        pair = (int(low), int(high))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not MIN:MAX (two integers)") from None
    if not sep or pair[0] < 0 or pair[1] < pair[0]:
        raise argparse.ArgumentTypeError(f"{text!r} is not MIN:MAX with 0 <= MIN <= MAX")
    return pair


def _inspect(args: argparse.Namespace, console: Console) -> int:
    """``stickypack inspect``: the report (:func:`_inspect_cluster`) printed as tables, or
    as JSON with ``--json``; a cluster that cannot be read is one line and status 1 or 2
    (:func:`~stickypack.cli.common._cluster_failure`)."""
    import asyncio
    import json

    config = _settings(args)
    _check_settings(args)
    pod_dict = _read_pod_file(args.pod) if args.pod is not None else None
    try:
        report = asyncio.run(_inspect_cluster(args, config, pod_dict))
    except UsageError:
        raise
    except Exception as exc:  # kubeconfig: status 2; network, RBAC: status 1; one line
        return _cluster_failure("inspect", exc)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        _print_inspection(console, report)
    return 0


def _settings(args: argparse.Namespace) -> ExtenderConfig:
    """The extender configuration (``--config``, else the defaults; its kubeconfig
    ``--kubeconfig`` when given). Each of the autoscaler's settings not given on the
    command line (``--threshold``, ``--gpu-threshold``, ``--gpu-label``, the
    ``--ignore-*-utilization`` flags, ``--node-group-label``, ``--dra``) is set in ``args``
    from the configuration's ``cluster`` section, and ``args.min_size`` becomes a dict
    (group to minimum size), so the rest of ``inspect`` reads them from ``args``."""
    from stickypack.extender.config import ExtenderConfig

    config = _load_extender_config(args) if args.config else ExtenderConfig()
    cluster = config.cluster
    if args.kubeconfig:
        cluster.kubeconfig = args.kubeconfig
    for dest, default in (
        ("threshold", cluster.utilization_threshold),
        ("gpu_threshold", cluster.gpu_utilization_threshold),
        ("gpu_label", list(cluster.gpu_labels)),
        ("ignore_daemonsets_utilization", cluster.ignore_daemonsets_utilization),
        ("ignore_mirror_pods_utilization", cluster.ignore_mirror_pods_utilization),
        ("node_group_label", list(cluster.node_group_labels)),
        ("dra", cluster.dra),
    ):
        if getattr(args, dest) is None:
            setattr(args, dest, default)
    args.min_size = dict(cluster.node_group_min_sizes if args.min_size is None else args.min_size)
    return config


def _check_settings(args: argparse.Namespace) -> None:
    """The settings of ``args`` once :func:`_settings` completed them: a :class:`UsageError`
    for a ``--gpu-label`` or ``--node-group-label`` that is not a label key, a threshold out
    of [0, 1], a flag of the node report's given with ``--pod``, or one of ``--pod``'s
    (``--policy``, ``--profile``, ``--scheduler-profile``: the node report places no pod)
    given without it."""
    import math

    from stickypack.core.labels import LABEL_KEY

    for flag, keys in (("--gpu-label", args.gpu_label), ("--node-group-label", args.node_group_label)):
        for key in keys:
            if not LABEL_KEY.fullmatch(key):
                raise UsageError(f"{flag}: {key!r} is not a label key")
    # 0 as the autoscaler takes it (it checks no range): since 1.35.0 (1.34.3, 1.33.4, 1.32.6)
    # a node over the threshold is kept, so at 0 only nodes at utilization 0 are candidates
    # (before, it kept a node at or over it: at 0 every node). Under 0 no node would be a
    # candidate, over 1 every node not overcommitted: refused as the mistakes they are
    for flag, value in (("--threshold", args.threshold), ("--gpu-threshold", args.gpu_threshold)):
        if not (math.isfinite(value) and 0 <= value <= 1):
            raise UsageError(f"{flag} must be in [0, 1], got {value:g}")
    node_report_only = [
        flag
        for flag, given in (
            ("--local-storage-moves", args.local_storage_moves),
            ("--system-pods-move", args.system_pods_move),
            ("--expendable-pods-priority-cutoff", args.expendable_pods_priority_cutoff is not None),
            ("--min-replica-count", args.min_replica_count is not None),
            ("--blocking-system-pod-distruption-timeout", args.system_pod_timeout is not None),
            ("--cores-total", args.cores_total is not None),
            ("--memory-total", args.memory_total is not None),
        )
        if given
    ]
    if args.pod is not None and node_report_only:
        raise UsageError(f"{', '.join(node_report_only)}: for the node report, not with --pod")
    pod_only = [
        flag
        for flag, given in (
            ("--policy", args.policy is not None),
            ("--profile", args.profile is not None),
            ("--scheduler-profile", bool(args.scheduler_profile)),
        )
        if given
    ]
    if args.pod is None and pod_only:
        raise UsageError(f"{', '.join(pod_only)}: for --pod, not for the node report")


async def _inspect_cluster(
    args: argparse.Namespace, config: ExtenderConfig, pod_dict: dict[str, Any] | None
) -> dict[str, Any]:
    """The report ``stickypack inspect`` prints, as JSON-ready data: without ``pod_dict``
    the node report (:func:`_node_report_json`); with it (``--pod``), where the policy would
    place that pod and why (:func:`_placement_json`). The pod and the policy are read
    before the cluster is, so that their errors come first."""
    placing = _placing(args, config, pod_dict) if pod_dict is not None else None
    snap, history, priority = await _read_cluster(
        args,
        config,
        placing[0] if placing else None,
        pod_dict,
        spreads=placing is not None and _scores_spreading(*placing[1:]),
    )
    if placing is None:
        return _node_report_json(args, snap)
    status = pod_dict.get("status") if pod_dict is not None else None
    own = status.get("nominatedNodeName") if isinstance(status, Mapping) else None
    gates = _scheduling_gates(pod_dict) if pod_dict is not None else []
    return _placement_json(
        args, snap, history, priority, *placing, own if isinstance(own, str) and own else None, gates
    )


def _placing(
    args: argparse.Namespace, config: ExtenderConfig, pod_dict: dict[str, Any]
) -> tuple[Pod, Policy, Profile | None]:
    """The pod of ``--pod``, the policy that places it (``--policy``, else the
    configuration's) and its profile: ``--profile``, else with ``--config`` the extender's
    for a pod it manages, else None (the policy's profile for the pod, chosen once its
    mutators have run, as simulated). A pod or policy that cannot be read is a
    :class:`UsageError`."""
    from stickypack.core.pod import Pod, PodSpecError
    from stickypack.core.policy import PolicyError
    from stickypack.extender.engine import select_profile
    from stickypack.extender.server import load_policy
    from stickypack.kube.cache import matches

    try:
        pod = Pod.from_dict(pod_dict)
    except PodSpecError as exc:
        raise UsageError(f"{args.pod}: {exc}") from None
    # what the pod's priority is read from (_pod_priority), as the API server takes them
    spec = pod_dict.get("spec") or {}
    if "priorityClassName" in spec and not isinstance(spec["priorityClassName"], str | None):
        raise UsageError(f"{args.pod}: spec.priorityClassName: {spec['priorityClassName']!r} is not a string")
    if spec.get("priority") is not None and pod.priority is None:
        raise UsageError(f"{args.pod}: spec.priority: {spec['priority']!r} is not an int32")
    claims_problem = _resource_claims_problem(spec.get("resourceClaims"))
    if claims_problem is not None:
        raise UsageError(f"{args.pod}: {claims_problem}")
    try:
        _scheduling_gates(pod_dict)
    except ValueError as exc:
        raise UsageError(f"{args.pod}: {exc}") from None
    profile = None
    try:
        policy = load_policy(args.policy or config.policy, config.plugins)
        if args.profile:
            profile = select_profile(policy, args.profile)
        elif args.config and matches(pod.labels, config.pods.manage):
            # the extender places the pods it manages with its profile (null: the first)
            profile = select_profile(policy, config.profile)
    except PolicyError as exc:
        raise UsageError(str(exc)) from None
    return pod, policy, profile


def _scheduling_gates(pod_dict: Mapping[str, Any]) -> list[str]:
    """The names of a pod's ``spec.schedulingGates``: while it has any, kube-scheduler's
    SchedulingGates PreEnqueue holds it (no attempt, before DynamicResources' PreEnqueue).
    A :class:`ValueError` naming the field for what the API server refuses (not a list, an
    entry that is not an object with a non-empty string ``name``)."""
    spec = pod_dict.get("spec")
    gates = spec.get("schedulingGates") if isinstance(spec, Mapping) else None
    if gates is None:
        return []
    if not isinstance(gates, list):
        raise ValueError(f"spec.schedulingGates: {gates!r} is not a list")
    names = []
    for k, gate in enumerate(gates):
        name = gate.get("name") if isinstance(gate, Mapping) else None
        if not isinstance(name, str) or not name:
            raise ValueError(f"spec.schedulingGates[{k}]: {gate!r} is not an object with a name")
        names.append(name)
    return names


def _resource_claims_problem(claims: Any) -> str | None:
    """What the API server refuses in a pod's ``spec.resourceClaims`` (``claims``), named
    with its field, or None: not a list, an entry that is not an object or has no name, one
    naming neither a claim (``resourceClaimName``) nor a template
    (``resourceClaimTemplateName``) or both, a name that is not a non-empty string. Such a
    pod is never created, so kube-scheduler's DynamicResources never judges it; the core's
    :class:`~stickypack.core.pod.Pod` reads such entries leniently (as not set)."""
    if claims is None:
        return None
    if not isinstance(claims, list):
        return f"spec.resourceClaims: {claims!r} is not a list"
    for k, entry in enumerate(claims):
        where = f"spec.resourceClaims[{k}]"
        if not isinstance(entry, Mapping):
            return f"{where}: {entry!r} is not an object"
        for field in ("name", "resourceClaimName", "resourceClaimTemplateName"):
            value = entry.get(field)
            if (field == "name" or value is not None) and not (isinstance(value, str) and value):
                return f"{where}.{field}: {value!r} is not a name"
        named, templated = entry.get("resourceClaimName"), entry.get("resourceClaimTemplateName")
        if named is None and templated is None:
            return f"{where}: one of resourceClaimName, resourceClaimTemplateName must be set"
        if named is not None and templated is not None:
            return f"{where}: resourceClaimName and resourceClaimTemplateName both set (one only)"
    return None


@dataclasses.dataclass(frozen=True)
class PodPriority:
    """The priority ``inspect --pod`` places the pod at: ``value`` (None: not known, taken
    as 0) and where it comes from (``source``, said in the report)."""

    value: int | None
    source: str


def _scores_spreading(policy: Policy, profile: Profile | None) -> bool:
    """Whether ``profile`` (None: any of ``policy``'s) scores PodTopologySpread."""
    profiles = [profile] if profile is not None else policy.profiles
    return any(ws.plugin.name == "PodTopologySpread" and ws.weight for p in profiles for ws in p.scorers)


async def _read_cluster(
    args: argparse.Namespace,
    config: ExtenderConfig,
    pod: Pod | None,
    pod_dict: dict[str, Any] | None,
    spreads: bool = False,
) -> tuple[Snapshot, BuildHistory | None, PodPriority | None]:
    """The cluster, read once (:func:`~stickypack.kube.snapshot.take_snapshot`; its DRA
    objects with ``--dra``), and, when a ``pod`` is placed (``--pod``, read from
    ``pod_dict``), the extender's build history with ``--config`` (else None) and the pod's
    priority (:func:`_pod_priority`; else None). For the node report it lists the pods'
    controllers and counts nominated pods on their nodes, as the autoscaler does; for a
    pod's placement the cache keeps the nodes' DRA readings as the extender does, and the
    nominated pods are kept apart, for the filters (as kube-scheduler counts them). With
    ``spreads`` (a profile that may place the pod scores PodTopologySpread), for a pod
    without spread constraints, its default spread selector too
    (:func:`~stickypack.kube.snapshot.spread_selector`)."""
    from stickypack.extender.server import history_limits, make_store
    from stickypack.kube.cache import ClusterCache
    from stickypack.kube.client import api_client
    from stickypack.kube.history import HistoryRecorder
    from stickypack.kube.snapshot import spread_selector, take_snapshot

    placing = pod is not None
    async with api_client(config.cluster.kubeconfig) as api:
        cache = ClusterCache(
            build_selector=config.pods.build_selector,
            builder_selector=config.pods.builder_selector,
            dra=placing and args.dra,  # --pod: the nodes' DRA readings as the extender keeps them
        )
        snap = await take_snapshot(
            api,
            cache,
            controllers=not placing,
            dra=args.dra,
            # kube-scheduler's allocator (--pod's DynamicResources; the plan's moved claims)
            device_classes=placing or args.dra,
            claim_templates=placing,  # a pod file's claims from templates
            nominated=not placing,
            nominated_apart=placing,
            namespaces_and_volumes=True,
        )
        history = None
        priority = None
        if pod is not None:
            if args.config:
                recorder = HistoryRecorder(make_store(config, api), history_limits(config))
                await recorder.load()
                history = recorder.history
            priority = await _pod_priority(api, pod, pod_dict or {}, snap, args.scheduler_profile)
            if spreads and not (pod.spread_constraints or pod.soft_spread_constraints):
                # kube-scheduler's system default spreading selects by it
                snap.default_spread_selector, snap.spread_selector_read = await spread_selector(api, pod)
    return snap, history, priority


async def _pod_priority(
    api: Any, pod: Pod, pod_dict: dict[str, Any], snap: Snapshot, also: Sequence[str] = ()
) -> PodPriority:
    """``pod``'s priority as the API server's Priority admission would set it
    (:func:`~stickypack.kube.snapshot.admitted_priority`): its ``spec.priority`` if the file
    gives one; else, only when a pending pod of its scheduler is nominated to a node (the
    only use ``inspect`` has for it), read from the PriorityClasses; else None."""
    from stickypack.kube.snapshot import admitted_priority, priority_classes

    spec = pod_dict.get("spec") or {}
    if pod.priority is not None:
        return PodPriority(pod.priority, "spec.priority")
    if not _nominated_for_scheduler(snap, pod, also):
        return PodPriority(None, "not read (no pending pod of its scheduler is nominated to a node)")
    classes, refused = await priority_classes(api)
    if classes is None:
        return PodPriority(None, f"unknown: the PriorityClasses could not be listed ({refused}); taken as 0")
    value = admitted_priority(spec, classes)
    name = spec.get("priorityClassName")
    if name:
        if value is None:
            return PodPriority(None, f"unknown: no PriorityClass {name!r} (the API server refuses the pod)")
        return PodPriority(value, f"PriorityClass {name}")
    default = [n for n, (v, global_default) in classes.items() if global_default and v == value]
    source = f"global default PriorityClass {min(default)}" if default else "no default PriorityClass"
    return PodPriority(value, source)


def _nominated_for_scheduler(snap: Snapshot, pod: Pod, also: Sequence[str] = ()) -> dict[str, list[Pod]]:
    """The pending pods nominated to each node whose scheduler is ``pod``'s or one of
    ``also`` (the other profiles of the kube-scheduler that runs it, ``--scheduler-profile``:
    a kube-scheduler keeps the nominations of the pods it schedules, of every profile, and
    only those), by node."""
    names = {pod.scheduler_name, *also}
    found: dict[str, list[Pod]] = {}
    for node, pods in snap.nominated_pods.items():
        mine = [p for p in pods if p.scheduler_name in names]
        if mine:
            found[node] = mine
    return found


def _placement_json(
    args: argparse.Namespace,
    snap: Snapshot,
    history: BuildHistory | None,
    priority: PodPriority | None,
    pod: Pod,
    policy: Policy,
    profile: Profile | None,
    nominated_node: str | None = None,
    scheduling_gates: Sequence[str] = (),
) -> dict[str, Any]:
    """The report of ``inspect --pod``, as JSON-ready data: ``pod`` placed by ``policy``
    (``profile``, else the policy's profile for the pod once its mutators have run) on the
    cluster of ``snap``, every node's filter or scores
    (:func:`~stickypack.core.explain.explain_placement`), with the build history
    ``history`` (None: none) and the autoscaler's settings ``inspect`` was given;
    ``nominated_node``: the pod file's ``status.nominatedNodeName``, the node kube-scheduler
    tries first; ``scheduling_gates``: its gates' names (kube-scheduler holds it while it has
    any; the nodes are judged as once they are removed)."""
    from stickypack.core.explain import explain_placement, nominated_pods_for
    from stickypack.core.framework import feasible_nodes_to_find, prefilter_node_names
    from stickypack.core.volumes import PersistentVolumesFilter

    table = snap.cache.table
    history_note = "from the extender's store" if history is not None else "none (give --config)"
    if history is not None:
        older = _forget_earlier_machines(history, table)
        if older:
            history_note += f" (left out: entries older than their node on {', '.join(older)})"
    _feed_dra(snap)
    ctx = _autoscaler_context(
        args,
        now=time.time(),
        history=history,
        builder_nodes=snap.cache.builder_nodes(),
        dra=snap.dra is not None,
    )
    if snap.default_spread_selector is not None:
        pod = dataclasses.replace(pod, default_spread_selector=snap.default_spread_selector)
    pod = policy.prepare(pod, table, ctx, profile)
    if profile is None:
        profile = policy.profile_for(pod)
    if priority is not None and pod.priority is None:
        pod = dataclasses.replace(pod, priority=priority.value)
    nominated = _nominated_for_scheduler(snap, pod, args.scheduler_profile)
    if snap.claim_volumes is not None:  # kube-scheduler's volume filters, in every profile
        profile = dataclasses.replace(
            profile, filters=[*profile.filters, PersistentVolumesFilter(snap.claim_volumes)]
        )
    dynamic_resources = _dynamic_resources(snap, pod)
    if dynamic_resources is not None:  # kube-scheduler's DRA filter, in every profile
        filters = [*profile.filters, dynamic_resources[0]]
        if dynamic_resources[0].extended:  # NodeResourcesFit leaves those to DynamicResources
            from stickypack.core.plugins.kubescheduler import DraDelegatingFitFilter, NodeResourcesFitFilter

            delegating = DraDelegatingFitFilter(dynamic_resources[0].extended)
            filters = [delegating if type(f) is NodeResourcesFitFilter else f for f in filters]
        profile = dataclasses.replace(profile, filters=filters)
    on_nodes = _pods_on_nodes(snap, pod)
    explanation = explain_placement(profile, pod, table, ctx, nominated, on_nodes, nominated_node)
    if dynamic_resources is not None:
        plugin, judged = dynamic_resources
        judged["deallocates"] = _deallocated_claims(plugin, pod, table, explanation)
        explanation = _allocation_outcomes(plugin, judged, explanation)
    feasible = sum(1 for v in explanation.verdicts if not v.filtered_by)
    percentage = policy.percentage_of_nodes_to_score
    named = prefilter_node_names(pod)  # NodeAffinity's PreFilter: the search is of these alone
    searched = len(table) if named is None else sum(1 for name in named if name in table.index)
    search = {  # kube-scheduler's search for feasible nodes (percentageOfNodesToScore)
        "percentage": percentage,
        "nodes": searched,
        "nodes_to_find": feasible_nodes_to_find(searched, percentage) if profile.scores_nodes else 1,
        "feasible": feasible,
    }
    counted = {  # on the nodes explain_placement judges: not a node gone since the nomination
        node: keys
        for node, pods in sorted(nominated.items())
        if node in table.index
        and table.active[table.index[node]]
        and (keys := [p.key for p in nominated_pods_for(pod, pods)])
    }
    return {
        "pod": pod.key,
        "policy": policy.name,
        "profile": explanation.profile,
        "weights": dict(explanation.weights),
        "best": explanation.best,
        "nodes": [
            {
                "node": v.node,
                "filtered_by": v.filtered_by,
                "with_nominated_pods": v.with_nominated,
                "scores": dict(v.scores),
                "total": v.total,
            }
            for v in explanation.verdicts
        ],
        "history": history_note,
        "priority": pod.priority,
        "priority_from": priority.source if priority is not None else "spec.priority",
        "nominated_pods": counted,
        "nominated_node": nominated_node,
        "scheduling_gates": list(scheduling_gates),
        "namespaces_read": snap.namespace_labels is not None,
        "spread_selector_read": snap.spread_selector_read,
        "volumes_read": snap.claim_volumes is not None,
        "unreadable_pods": snap.unreadable,
        "dra_read": _dra_read(args, snap),
        "dynamic_resources": dynamic_resources[1] if dynamic_resources is not None else None,
        "kube_scheduler_search": search,
    }


def _dynamic_resources(snap: Snapshot, pod: Pod) -> tuple[DynamicResourcesFilter, dict[str, Any]] | None:
    """With the DRA objects read (``--dra``): kube-scheduler's DynamicResources filter
    (:class:`~stickypack.core.dra.DynamicResourcesFilter`, on the listed claims, DeviceClasses
    and ResourceClaimTemplates, with kube-scheduler's allocator,
    :class:`~stickypack.core.draalloc.DraAllocator`, and its CEL, :mod:`stickypack.dracel`)
    and the report's ``dynamic_resources``: whether the DeviceClasses, the templates and the
    DeviceTaintRules could be listed (``device_classes_read``, ``templates_read``,
    ``taint_rules_read``), why it rejects every node
    (``rejected``, or None), the allocated claims whose node selectors it judges
    (``allocated``), why some of those are unavailable on every node (``unbindable``: their
    devices' binding failed or timed out), the claims not allocated, which the allocator
    judges node by node (``allocates``), the pod's extended resources a DeviceClass backs
    (``extended_resources``), the slices that could not be read (``problems``), what is not
    judged (``not_judged``), and (set once the nodes are judged, :func:`_deallocated_claims`
    and :func:`_allocation_outcomes`) those its PostFilter would deallocate one of
    (``deallocates``), why the allocator rejects each node (``cannot_allocate``) and the
    error that fails the scheduling attempt (``scheduler_error``); None without them."""
    from stickypack.core.dra import DynamicResourcesFilter, claim_key, extended_resource_classes
    from stickypack.core.draalloc import DraAllocator
    from stickypack.dracel import compile_selector

    if snap.dra is None:
        return None
    claims = {claim_key(obj): obj for obj in snap.dra.claims}
    allocator = DraAllocator(
        snap.dra.slices, snap.dra.claims, snap.dra.device_classes, compile_selector, snap.dra.taint_rules
    )
    templates = snap.dra.templates
    backed = extended_resource_classes(snap.dra.device_classes or {})
    extended = {r: backed[r] for r, amount in sorted(pod.requests.items()) if amount > 0 and r in backed}
    plugin = DynamicResourcesFilter(
        claims, snap.dra.classes, now=time.time(), allocator=allocator, templates=templates, extended=extended
    )
    verdict = plugin.verdict(pod)
    report: dict[str, Any] = {
        "device_classes_read": snap.dra.classes is not None,
        "templates_read": templates is not None,
        "taint_rules_read": snap.dra.taint_rules is not None,
        "rejected": verdict.rejected,
        "allocated": [name for name, _ in verdict.allocated],
        "unbindable": [why for _, why in verdict.unbindable],
        "not_judged": list(verdict.not_judged),
        "allocates": [name for name, _ in verdict.unallocated] if verdict.rejected is None else [],
        "cannot_allocate": {},
        "scheduler_error": None,
        "problems": list(allocator.problems),
        "extended_resources": extended,
    }
    unknown = [r for r in sorted(pod.requests) if "/" in r and snap.dra.device_classes is None]
    if unknown:
        report["not_judged"].append(
            f"extended resources {', '.join(unknown)}: whether a DeviceClass backs them (DRA) is not "
            "known, the DeviceClasses could not be listed"
        )
    return plugin, report


def _allocation_outcomes(
    plugin: DynamicResourcesFilter, judged: dict[str, Any], explanation: PlacementExplanation
) -> PlacementExplanation:
    """The allocator's outcomes in the report's ``dynamic_resources``: ``cannot_allocate``,
    why each node DynamicResources names could not take the pod's unallocated claims
    (kube-scheduler's words); ``scheduler_error``, the error met on such a node (a CEL
    selector's), which fails kube-scheduler's whole scheduling attempt (``SchedulerError``:
    no node is chosen, so ``best`` is emptied); ``not_judged``, with what the allocator does
    not model and where. ``explanation`` is returned, with no best node after an error."""
    outcomes = plugin.outcomes()
    not_modelled: dict[str, list[str]] = {}
    for node, outcome in sorted(outcomes.items()):
        if outcome.not_modelled is not None:
            not_modelled.setdefault(outcome.not_modelled, []).append(node)
    for why, nodes in not_modelled.items():
        named = ", ".join(nodes[:5]) + (f" and {len(nodes) - 5} more" if len(nodes) > 5 else "")
        judged["not_judged"].append(f"{why} (on {named}: passes there)")
    for v in explanation.verdicts:
        found = outcomes.get(v.node)
        if v.filtered_by != plugin.name or found is None or found.fits:
            continue
        outcome = found
        if outcome.error is not None:
            if judged["scheduler_error"] is None:
                judged["scheduler_error"] = f'running "{plugin.name}" filter plugin: {outcome.error}'
            judged["cannot_allocate"][v.node] = outcome.error
        else:
            judged["cannot_allocate"][v.node] = outcome.reason
    if judged["scheduler_error"] is not None:
        return dataclasses.replace(explanation, best=[])
    return explanation


def _deallocated_claims(
    plugin: DynamicResourcesFilter, pod: Pod, table: NodeTable, explanation: PlacementExplanation
) -> list[str]:
    """When no node passes: the pod's allocated claims of which kube-scheduler's
    DynamicResources PostFilter deallocates one (at random) for its next attempt to allocate
    afresh, those no other pod uses whose node selector a node it filtered (every earlier
    filter passed there) does not match; else none."""
    verdict = plugin.verdict(pod)
    if explanation.best or verdict.rejected is not None:
        return []
    unavailable: set[str] = set()
    for v in explanation.verdicts:
        if v.filtered_by == plugin.name:
            info = table.info[table.index[v.node]]
            if info is not None:
                unavailable.update(verdict.unavailable_on(info.labels, info.name))
    return [name for name in verdict.unshared if name in unavailable]


def _pods_on_nodes(snap: Snapshot, pod: Pod) -> PodsOnNodes | None:
    """The pods bound to the nodes, for kube-scheduler's NodePorts, InterPodAffinity and
    PodTopologySpread filters (:class:`~stickypack.core.podaffinity.PodsOnNodes`, the
    namespaces' labels for the terms' ``namespaceSelector``) and its InterPodAffinity and
    PodTopologySpread scores, or None when neither ``pod`` nor a pod on a node or nominated
    to one has required pod (anti-)affinity terms, host ports or ``DoNotSchedule`` spread
    constraints (those filters then pass every node), neither ``pod`` nor a pod on a node
    has preferred pod (anti-)affinity terms and ``pod`` has no spread constraint or default
    selector to score (those scores are then skipped)."""
    from stickypack.core.podaffinity import (
        has_inter_pod_rules,
        has_preferred_pod_affinity,
        pods_on_table_nodes,
    )
    from stickypack.core.topologyspread import scores_spread

    bound = [(node, p) for node, pods in snap.pods_by_node.items() for p in pods]
    waiting = (p for pods in snap.nominated_pods.values() for p in pods)
    if not (
        has_inter_pod_rules(pod)
        or has_preferred_pod_affinity(pod)
        or scores_spread(pod)  # PodTopologySpread's score counts the pods on the nodes
        or any(has_inter_pod_rules(p) or has_preferred_pod_affinity(p) for _, p in bound)
        or any(has_inter_pod_rules(p) for p in waiting)
    ):
        return None
    return pods_on_table_nodes(snap.cache.table, bound, snap.namespace_labels)


def _forget_earlier_machines(history: BuildHistory, table: NodeTable) -> list[str]:
    """As the extender does (``HistoryRecorder.check_nodes``), in memory only: the entries
    of ``history`` older than their node (by its creation time, where known) forgotten, as
    an earlier machine's of that name, deleted while no extender watched, whose image cache
    went with it; the names of those nodes, sorted."""
    older = []
    for node, i in table.index.items():
        created = float(table.created[i])  # 0: not known
        if created > 0 and history.forget_node(node, up_to=created):
            older.append(node)
    return sorted(older)


def _feed_dra(snap: Snapshot) -> None:
    """With the cache's DRA tracker (``--pod --dra``), the snapshot's ResourceSlices and
    ResourceClaims fed to it as the extender's informers feed it, and the nodes' DRA
    readings brought up to date in the table."""
    tracker = snap.cache.dra
    if tracker is not None and snap.dra is not None:
        for obj in snap.dra.slices:
            tracker.slice_event("ADDED", obj)
        for obj in snap.dra.claims:
            tracker.claim_event("ADDED", obj)
        snap.cache.refresh_dra()


def _dra_read(args: argparse.Namespace, snap: Snapshot) -> bool | None:
    """The report's ``dra_read``: with ``--dra``, whether the DRA objects could be listed;
    None without."""
    return (snap.dra is not None) if args.dra else None


def _autoscaler_context(args: argparse.Namespace, **more: Any) -> SchedulingContext:
    """A :class:`SchedulingContext` with the autoscaler's settings ``inspect`` was given (its
    thresholds, GPU labels, ignore flags and node groups' minimum sizes), and ``more`` of its
    fields."""
    from stickypack.core.framework import SchedulingContext

    return SchedulingContext(
        utilization_threshold=args.threshold,
        gpu_utilization_threshold=args.gpu_threshold,
        gpu_labels=tuple(args.gpu_label),
        ignore_daemonsets_utilization=args.ignore_daemonsets_utilization,
        ignore_mirror_pods_utilization=args.ignore_mirror_pods_utilization,
        node_groups=_node_groups(args) if args.min_size else None,
        **more,
    )


def _node_groups(args: argparse.Namespace) -> NodeGroups:
    """The node groups of ``--node-group-label`` and ``--min-size`` (each defaulted to the
    config's by :func:`_settings`)."""
    from stickypack.core.nodegroups import NodeGroups

    return NodeGroups(tuple(args.node_group_label), dict(args.min_size))


def _node_report_json(args: argparse.Namespace, snap: Snapshot) -> dict[str, Any]:
    """The node report ``stickypack inspect`` prints (no ``--pod``), as JSON-ready data:
    each node as the cluster-autoscaler weighs it, then its scale-down simulation over the
    nodes nothing pins (:func:`~stickypack.core.drain.plan_scale_down`, which spends the
    disruption budgets node by node; with ``--dra``, its
    claims' node-local devices moved too, :class:`~stickypack.core.dra.DraDevices`), then the nodes it
    would remove that a node group's minimum size or the cluster's minimum cores or memory
    keep (:func:`~stickypack.core.nodegroups.kept_at_limits`)."""
    from stickypack.core.explain import node_report

    table = snap.cache.table
    rules = _scale_down_rules(args, snap)
    dra, devices = _read_dra(snap, rules)
    nodes = node_report(table, snap.pods_by_node, rules, dra=dra.nodes if dra is not None else None)
    groups = _node_groups(args)
    group_of, at_min = _group_membership(table, groups)
    verdicts = _verdicts_before_plan(nodes, at_min, args.threshold, args.gpu_threshold)
    plan = _scale_down_plan(args, snap, rules, nodes, verdicts, devices)
    kept = _kept_at_limits(args, snap, groups, plan)
    verdicts = _verdicts_after_plan(nodes, verdicts, plan, kept)
    nodes = _pinned_by_spent_budgets(nodes, plan)
    removed = {n for n in plan.removable if n not in kept}
    return {
        "threshold": args.threshold,
        "gpu_threshold": args.gpu_threshold,
        "ignore_daemonsets_utilization": rules.ignore_daemonsets_utilization,
        "ignore_mirror_pods_utilization": rules.ignore_mirror_pods_utilization,
        "nodes": [
            _node_json(
                r, v, group_of.get(r.node), plan.no_room.get(r.node), _moves_off(r.node, removed, snap, plan)
            )
            for r, v in zip(nodes, verdicts, strict=True)
        ],
        "summary": _summary_json(args, verdicts),
        "node_groups": _node_groups_json(args, table, groups, group_of, removed),
        **_unread_json(args, snap, dra),
    }


def _scale_down_rules(args: argparse.Namespace, snap: Snapshot) -> ScaleDownRules:
    """The autoscaler's drainability rules and utilization settings ``inspect`` was given
    (each flag not given at the autoscaler's default), with the budgets and controllers
    ``snap`` read and the time now."""
    from stickypack.core.explain import (
        BLOCKING_SYSTEM_POD_DISRUPTION_TIMEOUT_S,
        EXPENDABLE_PODS_PRIORITY_CUTOFF,
        ScaleDownRules,
    )

    return ScaleDownRules(
        local_storage_pins=not args.local_storage_moves,
        system_pods_pin=not args.system_pods_move,
        budgets=snap.budgets,
        controllers=snap.controllers,
        unlisted_controller_kinds=frozenset(snap.unlisted_controllers),
        min_replica_count=args.min_replica_count or 0,
        system_pod_disruption_timeout_s=(
            BLOCKING_SYSTEM_POD_DISRUPTION_TIMEOUT_S
            if args.system_pod_timeout is None
            else args.system_pod_timeout
        ),
        gpu_labels=tuple(args.gpu_label),
        ignore_daemonsets_utilization=args.ignore_daemonsets_utilization,
        ignore_mirror_pods_utilization=args.ignore_mirror_pods_utilization,
        now=time.time(),
        expendable_priority_cutoff=(
            EXPENDABLE_PODS_PRIORITY_CUTOFF
            if args.expendable_pods_priority_cutoff is None
            else args.expendable_pods_priority_cutoff
        ),
    )


def _read_dra(snap: Snapshot, rules: ScaleDownRules) -> tuple[DraReading | None, DraDevices | None]:
    """With the DRA objects read (``--dra``): each node's DRA utilization, from the claims
    of the pods in the autoscaler's snapshot (expendable ones left out), and the devices
    the scale-down plan moves, as the autoscaler's removal simulation does (every pod a
    claim's user, expendable ones too; the objects it cannot read are those the reading
    reports, with the claims whose requests the plan cannot read, and so counts devices
    for; the plan allocates a moved pod's released claims again with kube-scheduler's
    allocator and its CEL, as for ``--pod``). Both None without them."""
    from stickypack.core.dra import DraDevices, dra_utilization
    from stickypack.core.draalloc import DraAllocator
    from stickypack.core.explain import is_expendable
    from stickypack.dracel import compile_selector

    if snap.dra is None:
        return None, None
    in_snapshot = {
        node: [p for p in pods if not is_expendable(p, rules)] for node, pods in snap.pods_by_node.items()
    }
    dra = dra_utilization(snap.dra.slices, snap.dra.claims, in_snapshot)
    # DeviceTaintRules left out (the allocator takes none): whether the autoscaler's DRA
    # snapshot applies them is not known here (docs/operator-guide.md)
    allocator = DraAllocator(snap.dra.slices, snap.dra.claims, snap.dra.device_classes, compile_selector)
    devices = DraDevices.read(snap.dra.slices, snap.dra.claims, snap.pods_by_node, allocator)
    # the reading names each object left out; the devices add the claims they only count
    dra.problems.extend(p for p in devices.problems if p not in dra.problems)
    return dra, devices


def _group_membership(table: NodeTable, groups: NodeGroups) -> tuple[dict[str, str | None], set[str]]:
    """Each node's node group (by name; None: in none known), and the nodes of a group at
    or under its minimum size."""
    rows = table.active_indices()
    group_of = dict(zip(table.node_names(rows), groups.groups(table, rows), strict=True))
    at_min = set(table.node_names(rows[groups.at_min_size(table, rows)]))
    return group_of, at_min


def _verdicts_before_plan(
    nodes: Sequence[NodeReport], at_min: set[str], threshold: float, gpu_threshold: float
) -> list[str]:
    """Each node's :meth:`NodeReport.verdict` at the thresholds (fractions), but ``min-size``
    for a node ``removable`` or ``empty`` in a group at or under its minimum size
    (``at_min``): the autoscaler never takes it as a candidate
    (its PreFilteringScaleDownNodeProcessor), its pods stay, and it stays a destination for
    others'."""
    from stickypack.core.nodegroups import MIN_SIZE

    verdicts = [r.verdict(threshold, gpu_threshold) for r in nodes]
    return [
        MIN_SIZE if r.node in at_min and v in ("removable", "empty") else v
        for r, v in zip(nodes, verdicts, strict=True)
    ]


def _scale_down_plan(
    args: argparse.Namespace,
    snap: Snapshot,
    rules: ScaleDownRules,
    nodes: Sequence[NodeReport],
    verdicts: Sequence[str],
    devices: DraDevices | None,
) -> ScaleDownPlan:
    """The autoscaler removes an unpinned node at or under its threshold only if its pods
    fit elsewhere: its candidates (the nodes ``removable`` or ``empty``) checked as it
    does (:func:`~stickypack.core.drain.plan_scale_down`), with kube-scheduler's filters
    (the default policy's). Its order puts empty nodes first (EmptySorting), so they take
    no pods of the others; among the rest (its node list's order, after the nodes it found
    unneeded before, which cannot be known here) the least utilized first."""
    from stickypack.core.drain import plan_scale_down
    from stickypack.policies import load_builtin

    ctx = _autoscaler_context(args)
    candidates = sorted(
        ((r, v) for r, v in zip(nodes, verdicts, strict=True) if v in ("removable", "empty")),
        key=lambda rv: (rv[1] != "empty", rv[0].utilization, rv[0].node),
    )
    filters = load_builtin("default").profiles[0].filters
    return plan_scale_down(
        snap.cache.table,
        snap.pods_by_node,
        [r.node for r, _ in candidates],
        filters,
        rules,
        ctx,
        namespace_labels=snap.namespace_labels,
        claim_volumes=snap.claim_volumes,
        dra=devices,
    )


def _kept_at_limits(
    args: argparse.Namespace, snap: Snapshot, groups: NodeGroups, plan: ScaleDownPlan
) -> dict[str, str]:
    """The nodes the plan found removable that the autoscaler keeps, and why
    (:func:`~stickypack.core.nodegroups.kept_at_limits`): going through them (empty ones
    first, as its RemovableAt; within each its map order, unspecified, so which of a
    group's nodes it keeps can differ), the groups' minimum sizes and the cluster's minimum
    cores and memory (``--cores-total``, ``--memory-total`` in GiB) keep some."""
    from stickypack.core.nodegroups import ResourceMinimums, kept_at_limits

    mins = tuple((total or (0, 0))[0] for total in (args.cores_total, args.memory_total))
    return kept_at_limits(
        snap.cache.table,
        plan.removable,
        groups,
        snap.capacity,
        ResourceMinimums(mins[0], mins[1] * 1024**3),
    )


def _verdicts_after_plan(
    nodes: Sequence[NodeReport], verdicts: Sequence[str], plan: ScaleDownPlan, kept: Mapping[str, str]
) -> list[str]:
    """The verdicts once the plan is known: ``no-room`` for a candidate whose pods would
    not all fit, ``pinned`` for one a spent budget holds, the reason (``min-size``,
    ``resource-limit``) for one ``kept`` at the limits; the others as they were."""
    return [
        "no-room" if r.node in plan.no_room else "pinned" if r.node in plan.blocked else kept.get(r.node, v)
        for r, v in zip(nodes, verdicts, strict=True)
    ]


def _pinned_by_spent_budgets(nodes: Sequence[NodeReport], plan: ScaleDownPlan) -> list[NodeReport]:
    """``nodes``, a node a budget holds once the nodes before it took its disruptions
    (``plan.blocked``) pinned by that pod, with that reason."""
    import dataclasses

    return [
        dataclasses.replace(
            r,
            pinning=(*r.pinning, plan.blocked[r.node][0]),
            pin_reasons=(*r.pin_reasons, plan.blocked[r.node][1]),
        )
        if r.node in plan.blocked
        else r
        for r in nodes
    ]


def _moves_off(node: str, removed: set[str], snap: Snapshot, plan: ScaleDownPlan) -> dict[str, str]:
    """Where the plan moves the pods of ``node`` (pod key to node name) when the autoscaler
    removes it (one of ``removed``); none otherwise."""
    if node not in removed:
        return {}
    return {p.key: plan.moves[p.key] for p in snap.pods_by_node.get(node, ()) if p.key in plan.moves}


def _node_json(
    r: NodeReport, verdict: str, group: str | None, no_room_for: str | None, moves: dict[str, str]
) -> dict[str, Any]:
    """One node of the report as JSON-ready data (fractions rounded to 4 places):
    ``r`` with its final ``verdict``, its node ``group``, the pod that would fit on no other
    node (``no_room_for``) and the ``moves`` of its pods."""
    return {
        "node": r.node,
        "ready": r.ready,
        "unschedulable": r.unschedulable,
        "scale_down_disabled": r.scale_down_disabled,
        "autoscaler": r.autoscaler,
        "autoscaler_since": r.autoscaler_since,
        "cpu": round(r.cpu, 4),
        "memory": round(r.memory, 4),
        "gpu": None if r.gpu is None else round(r.gpu, 4),
        "dra": None if r.dra is None else round(r.dra, 4),
        "dra_pool": r.dra_pool,
        "dra_error": r.dra_error,
        "utilization_error": r.utilization_error,
        "utilization": round(r.utilization, 4),
        "pods": r.pods,
        "daemon_pods": r.daemon_pods,
        "expendable_pods": r.expendable_pods,
        "terminating_pods": r.terminating_pods,
        "builds": r.builds,
        "pinning": list(r.pinning),
        "pin_reasons": dict(zip(r.pinning, r.pin_reasons, strict=True)),
        "node_group": group,
        "verdict": verdict,
        "no_room_for": no_room_for,
        "moves": moves,
    }


def _summary_json(args: argparse.Namespace, verdicts: Sequence[str]) -> dict[str, int]:
    """How many nodes have each verdict of :data:`VERDICTS`, but ``incomplete`` only with
    ``--dra`` or when some node is (one without cpu or memory allocatable), and ``min-size``
    and ``resource-limit`` only with minimum sizes or totals: without them the summary has
    no such key."""
    limited = bool(args.min_size) or args.cores_total is not None or args.memory_total is not None
    return {
        v: verdicts.count(v)
        for v in VERDICTS
        if (v != "incomplete" or args.dra or v in verdicts) and (v not in LIMIT_VERDICTS or limited)
    }


def _node_groups_json(
    args: argparse.Namespace,
    table: NodeTable,
    groups: NodeGroups,
    group_of: Mapping[str, str | None],
    removed: set[str],
) -> dict[str, dict[str, Any]]:
    """Each node group with a node or a minimum size (by name): its size, its minimum size
    (``--min-size``; None: none) and how many of its nodes the autoscaler would remove."""
    sizes = groups.sizes(table)
    return {
        g: {
            "size": sizes.get(g, 0),
            "min_size": args.min_size.get(g),
            "removes": sum(1 for n in removed if group_of.get(n) == g),
        }
        for g in sorted(set(sizes) | set(args.min_size))
    }


def _unread_json(args: argparse.Namespace, snap: Snapshot, dra: DraReading | None) -> dict[str, Any]:
    """What the report could not count, read or list: pods whose spec could not be read,
    pending pods counted on the node they are nominated to, whether each kind of object
    could be listed, and the DRA objects the reading left out."""
    return {
        "unreadable_pods": snap.unreadable,
        "nominated_pods": snap.nominated,
        "budgets_read": snap.budgets is not None,
        "controllers_read": snap.controllers is not None and not snap.unlisted_controllers,
        "controllers_unlisted": sorted(snap.unlisted_controllers),
        "namespaces_read": snap.namespace_labels is not None,
        "volumes_read": snap.claim_volumes is not None,
        "dra_read": _dra_read(args, snap),
        "dra_problems": dra.problems if dra is not None else [],
    }


#: The node report's verdicts: :meth:`NodeReport.verdict`'s, ``no-room`` for a node whose
#: pods would fit on no other node (:func:`~stickypack.core.drain.plan_scale_down`), and
#: :data:`LIMIT_VERDICTS`.
VERDICTS = (
    "busy", "deleting", "disabled", "pinned", "no-room", "min-size", "resource-limit", "removable", "empty",
    "incomplete",
)  # fmt: skip
#: A node the autoscaler would remove but keeps for its group's minimum size, or for the
#: cluster's minimum cores or memory (:func:`~stickypack.core.nodegroups.kept_at_limits`).
LIMIT_VERDICTS = ("min-size", "resource-limit")


def _print_inspection(console: Console, report: dict[str, Any]) -> None:
    """Print ``report`` (:func:`_inspect_cluster`'s): the node report, or a pod's
    placement."""
    if "pod" in report:
        _print_placement(console, report)
    else:
        _print_node_report(console, report)


def _print_node_report(console: Console, report: dict[str, Any]) -> None:
    """The node report: a table of the nodes, a line counting their verdicts, then a line
    for each thing the report could not count or read."""
    console.print(_node_table(report))
    console.print(_summary_line(report), highlight=False)
    _print_node_report_notes(console, report)


def _node_table(report: dict[str, Any]) -> Table:
    """The nodes of the node report as a table, utilizations in percent; the columns
    ``group``, ``gpu`` and ``dra`` only when some node has a value there."""
    from rich.table import Table

    nodes = report["nodes"]
    gpus = any(n["gpu"] is not None for n in nodes)
    dras = any(n["dra"] is not None or n["dra_error"] is not None for n in nodes)
    grouped = any(n["node_group"] is not None for n in nodes)
    table = Table(title=_node_table_title(report, gpus))
    numbers = ("cpu", "memory", *(("gpu",) if gpus else ()), *(("dra",) if dras else ()), "pods", "builds")
    for column in ("node", *(("group",) if grouped else ()), *numbers, "autoscaler", "verdict", "pinned by"):
        table.add_column(column, justify="right" if column in numbers else "left")
    now = time.time()
    for n in nodes:
        gpu = (_percent(n["gpu"]),) if gpus else ()
        dra = (_percent(n["dra"]),) if dras else ()
        group = (escape(n["node_group"] or ""),) if grouped else ()  # label values, not markup
        table.add_row(
            n["node"], *group, _percent(n["cpu"]), _percent(n["memory"]), *gpu, *dra, str(n["pods"]),
            str(n["builds"]), _autoscaler_cell(n, now), n["verdict"], _pinned_by_cell(n),
        )  # fmt: skip
    return table


def _node_table_title(report: dict[str, Any], gpus: bool) -> str:
    """The node table's title: the thresholds (the GPU one when there are ``gpus``), and
    the pods left out of the utilization."""
    title = f"nodes as the cluster-autoscaler sees them (threshold {report['threshold']:g}"
    title += f", GPU nodes {report['gpu_threshold']:g}" if gpus else ""
    ignored = [
        what
        for what, key in (("DaemonSet", "daemonsets"), ("mirror", "mirror_pods"))
        if report[f"ignore_{key}_utilization"]
    ]
    return title + (f"; {' and '.join(ignored)} pods not counted)" if ignored else ")")


def _percent(fraction: float | None) -> str:
    """A fraction in whole percent; empty for None."""
    return "" if fraction is None else f"{fraction:.0%}"


def _autoscaler_cell(node: dict[str, Any], now: float) -> str:
    """A node's ``autoscaler`` column: the autoscaler's taint (``deleting``, ``candidate``)
    with its age at ``now`` (Unix seconds) when it has a time not in the future, else
    ``not ready`` or ``cordoned`` where the node is."""
    state = node["autoscaler"] or (
        "not ready" if not node["ready"] else "cordoned" if node["unschedulable"] else ""
    )
    since = node["autoscaler_since"]
    if since is not None and since <= now:
        state += f" {_age(now - since)}"
    return state


def _pinned_by_cell(node: dict[str, Any]) -> str:
    """A node's ``pinned by`` column, the first three of: why the autoscaler cannot weigh
    it, its pods that pin it (with why), and its pod no other node would take."""
    pinning = [f"{key} ({node['pin_reasons'][key]})" for key in node["pinning"]]
    if node["no_room_for"]:
        pinning.append(f"{node['no_room_for']} (no other node takes it)")
    if node["dra_error"]:
        pinning.insert(0, escape(node["dra_error"]))  # names from ResourceSlices
    if node["utilization_error"]:
        pinning.insert(0, node["utilization_error"])
    return _first(pinning, 3)


def _first(items: list[str], most: int) -> str:
    """The first ``most`` of ``items``, joined by commas, then how many more, ``(+N)``."""
    return ", ".join(items[:most]) + (f" (+{len(items) - most})" if len(items) > most else "")


def _summary_line(report: dict[str, Any]) -> str:
    """The line under the node table: how many nodes, and how many have each verdict
    (the rarer ones only when some node has them)."""
    summary = report["summary"]
    parts = [f"{summary['busy']} busy", f"{summary['pinned']} at or under the threshold but pinned"]
    if summary["no-room"]:
        parts.append(f"{summary['no-room']} whose pods fit on no other node")
    parts += [f"{summary['removable']} removable", f"{summary['empty']} empty"]
    for verdict, what in (
        ("deleting", "being deleted by the autoscaler"),
        ("disabled", "with scale-down disabled"),
        ("min-size", "kept at their node group's minimum size"),
        ("resource-limit", "kept by the cluster's minimum cores or memory"),
        ("incomplete", "the autoscaler cannot weigh (kept)"),
    ):
        if summary.get(verdict):
            parts.append(f"{summary[verdict]} {what}")
    return f"{len(report['nodes'])} nodes: {', '.join(parts)}"


#: The node report's notes on the objects it could not list: its key, false when they
#: could not be listed, and what that leaves out.
_UNLISTED_NOTES = (
    (
        "budgets_read",
        "PodDisruptionBudgets could not be listed (no `list` right on poddisruptionbudgets): "
        "pods they cover, and kube-system pods, are judged without them",
    ),
    (
        "namespaces_read",
        "namespaces could not be listed (no `list` right on namespaces): a pod affinity "
        "term's namespaceSelector is taken to select every namespace",
    ),
    (
        "volumes_read",
        "persistent volumes could not be listed (no `list` right on persistentvolumeclaims and "
        "persistentvolumes): where a pod's volumes let it move is not weighed",
    ),
)


#: ``inspect --pod``'s note when the objects kube-scheduler's default spreading selects by
#: could not be listed (``spread_selector_read`` false).
_SPREAD_SELECTOR_NOTE = (
    "Services, ReplicationControllers, ReplicaSets or StatefulSets could not be listed (no `list` right "
    "on them in the pod's namespace): PodTopologySpread's system default spreading is not scored"
)


def _print_node_report_notes(console: Console, report: dict[str, Any]) -> None:
    """The lines under the node report's summary, each only when it has something to say:
    the pods not counted, the deletions that look stuck, the node groups given a minimum
    size that no node is in, the pending pods counted where nominated, the objects that
    could not be listed or read."""
    from stickypack.core.explain import NODE_DELETION_TIME_S

    _print_unreadable(console, report["unreadable_pods"])
    stuck = _stuck_deletions(report["nodes"], time.time())
    if stuck:
        console.print(
            f"tainted ToBeDeletedByClusterAutoscaler {NODE_DELETION_TIME_S / 60:g} or more minutes ago "
            f"(or at no time it can read): {_first(stuck, 5)}; the autoscaler no longer takes such a "
            "node as being deleted and weighs it again: a deletion stuck, or a taint left by an "
            "autoscaler that stopped (it removes them when it starts); shown here as deleting",
            highlight=False,
        )
    nowhere = [g for g, group in report["node_groups"].items() if group["size"] == 0]
    if nowhere:  # a typo, or groups named by other labels (--node-group-label)
        console.print(
            f"no node is in node group {', '.join(map(repr, nowhere))} given a minimum size "
            "(groups are named by --node-group-label, or the pool labels)",
            highlight=False,
        )
    if report["nominated_pods"]:
        console.print(
            f"{len(report['nominated_pods'])} pending pods counted on the node the scheduler "
            "nominated them to, as the autoscaler counts them",
            highlight=False,
        )
    for key, note in _UNLISTED_NOTES:
        if not report[key]:
            console.print(note, highlight=False)
    _print_dra_unread(console, report)
    problems = report["dra_problems"]
    for problem in problems[:5]:
        console.print(f"DRA: {escape(problem)}", highlight=False, soft_wrap=True)
    if len(problems) > 5:
        console.print(f"DRA: {len(problems) - 5} more objects left out (see --json)", highlight=False)
    if report["controllers_unlisted"]:
        kinds = ", ".join(report["controllers_unlisted"])
        console.print(
            f"controllers could not be listed: {kinds} (no `list` right on them, or not served): "
            "a pod's controller of those kinds is taken to exist",
            highlight=False,
        )


def _stuck_deletions(nodes: Sequence[dict[str, Any]], now: float) -> list[str]:
    """The ``deleting`` nodes of the node report whose taint is
    :data:`~stickypack.core.explain.NODE_DELETION_TIME_S` or more old at ``now`` (Unix
    seconds), or has no time the autoscaler can read: its ``IsNodeBeingDeleted`` is false
    for them."""
    from stickypack.core.explain import NODE_DELETION_TIME_S

    return [
        n["node"]
        for n in nodes
        if n["autoscaler"] == "deleting"
        and (n["autoscaler_since"] is None or now - n["autoscaler_since"] >= NODE_DELETION_TIME_S)
    ]


def _print_placement(console: Console, report: dict[str, Any]) -> None:
    """A pod's placement: a table of every node's scores by plugin (with its weight) and
    total, or the filter that removed it; then the build history used, whether the DRA
    objects could not be listed, the best nodes and the pods not counted."""
    from rich.table import Table

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
            why = f"filtered by {n['filtered_by']}"
            if n["with_nominated_pods"]:
                why += " (nominated pods)"
            table.add_row(n["node"], *["" for _ in plugins], escape(why))
        else:
            table.add_row(n["node"], *[str(n["scores"][p]) for p in plugins], str(n["total"]))
    console.print(table)
    console.print(f"build history: {report['history']}", highlight=False)
    _print_dra_unread(console, report, placing=True)
    gates = report.get("scheduling_gates")
    if gates:  # as SchedulingGates' PreEnqueue says it (Go's %v of the names)
        waiting = escape(f"waiting for scheduling gates: [{' '.join(gates)}]")
        console.print(
            f"kube-scheduler holds the pod, not trying any node (SchedulingGates: {waiting}); the nodes "
            "are judged as once the gates are removed",
            highlight=False,
            soft_wrap=True,
        )
    _print_dynamic_resources(console, report.get("dynamic_resources"))
    nominated = report["nominated_pods"]
    if nominated:
        pods = "; ".join(f"{', '.join(keys)} on {node}" for node, keys in nominated.items())
        console.print(
            f"filtered with the pending pods nominated there of priority >= {report['priority'] or 0} "
            f"(priority: {escape(report['priority_from'])}), as kube-scheduler filters: {escape(pods)}",
            highlight=False,
            soft_wrap=True,
        )
    for key, note in _UNLISTED_NOTES[1:]:  # the namespaces' and the volumes'
        if report[key] is False:
            console.print(note, highlight=False)
    if report.get("spread_selector_read") is False:
        console.print(_SPREAD_SELECTOR_NOTE, highlight=False)
    best = report["best"]
    own = report.get("nominated_node")
    search = report.get("kube_scheduler_search")
    # one to find of more than one feasible: only a profile that scores nothing stops there
    takes_first = search is not None and search["feasible"] > search["nodes_to_find"] == 1
    if search is not None and takes_first and best != [own]:
        console.print(
            f"kube-scheduler takes the first of these {search['feasible']} feasible nodes it finds "
            "(the profile scores nothing), searching from where its last search stopped",
            highlight=False,
            soft_wrap=True,
        )
    elif search and search["feasible"] > search["nodes_to_find"] and best != [own]:
        percentage = f"{search['percentage']}" if search["percentage"] else "0, adaptive"
        console.print(
            f"kube-scheduler scores only the first {search['nodes_to_find']} of these {search['feasible']} "
            f"feasible nodes it finds (percentageOfNodesToScore {percentage}, of {search['nodes']} nodes), "
            "searching from where its last search stopped: it picks the best of those, which may not be "
            "the best here, and normalized scores are of those nodes",
            highlight=False,
            soft_wrap=True,
        )
    note = " (the pod's nominated node: kube-scheduler tries it first and takes it if it fits)"
    console.print(
        f"best: {', '.join(best)}"
        + (
            " (kube-scheduler picks one at random)"
            if len(best) > 1 and not takes_first
            else note
            if best == [own]
            else ""
        )
        if best
        else "best: none (no node passes the filters)",
        highlight=False,
    )
    _print_unreadable(console, report["unreadable_pods"])


def _print_dra_unread(console: Console, report: dict[str, Any], placing: bool = False) -> None:
    """A line when ``--dra`` was given and the DRA objects could not be listed (``placing``,
    ``--pod``: the pod's claims are not judged either)."""
    if report["dra_read"] is False:
        claims = ", and the pod's claims are not judged (DynamicResources)" if placing else ""
        console.print(
            "ResourceSlices and ResourceClaims could not be listed (no `list` right on resourceslices "
            f"and resourceclaims, or resource.k8s.io/v1 not served): nodes are weighed without DRA{claims}",
            highlight=False,
        )


def _print_dynamic_resources(console: Console, judged: dict[str, Any] | None) -> None:
    """With ``--dra``: whether the DeviceClasses, the templates (when the pod's entries need
    them) or the DeviceTaintRules (when a node is not judged for it) could not be listed,
    why kube-scheduler's DynamicResources rejects every node, and the pod's claims not
    allocated, which are not judged."""
    from stickypack.core.draalloc import UNKNOWN_TAINT_RULES

    if judged is None:
        return
    if judged.get("device_classes_read") is False:
        console.print(
            "DeviceClasses could not be listed (no `list` right on deviceclasses): a claim's "
            "missing DeviceClass is not checked",
            highlight=False,
        )
    if judged.get("templates_read") is False and any("from its template" in n for n in judged["not_judged"]):
        console.print(
            "ResourceClaimTemplates could not be listed (no `list` right on resourceclaimtemplates): "
            "the claims the pod's template entries make are not judged",
            highlight=False,
        )
    if judged.get("taint_rules_read") is False and any(
        UNKNOWN_TAINT_RULES in n for n in judged["not_judged"]
    ):
        console.print(
            "DeviceTaintRules could not be listed (no `list` right on devicetaintrules, or not served): "
            "their taints are not applied, and a node where the pod's claims fit is not judged",
            highlight=False,
        )
    if judged["rejected"] is not None:  # claim names are the API server's; the pod file's are not
        why = escape(judged["rejected"])
        console.print(f"DynamicResources rejects every node: {why}", highlight=False, soft_wrap=True)
    for why in judged.get("unbindable") or ():
        console.print(
            f"DynamicResources finds a claim unavailable on every node: {escape(why)}", highlight=False
        )
    if judged.get("deallocates"):
        console.print(
            "no node passes: kube-scheduler's DynamicResources PostFilter then deallocates one of "
            f"{escape(', '.join(judged['deallocates']))} (no other pod uses it) and its next attempt "
            "allocates it afresh, which this report does not show",
            highlight=False,
            soft_wrap=True,
        )
    if judged.get("scheduler_error"):
        console.print(
            "kube-scheduler's scheduling attempt fails (SchedulerError, retried with backoff; no node "
            f"is chosen): {escape(judged['scheduler_error'])}",
            highlight=False,
            soft_wrap=True,
        )
    by_reason: dict[str, list[str]] = {}
    for node, why in (judged.get("cannot_allocate") or {}).items():
        by_reason.setdefault(why, []).append(node)
    for why, nodes in by_reason.items():
        named = ", ".join(nodes[:5]) + (f" and {len(nodes) - 5} more" if len(nodes) > 5 else "")
        console.print(
            f"DynamicResources cannot allocate the pod's claims on {len(nodes)} node(s) ({escape(named)}): "
            f"{escape(why)}",
            highlight=False,
            soft_wrap=True,
        )
    for resource, device_class in (judged.get("extended_resources") or {}).items():
        console.print(
            f"extended resource {escape(resource)} is backed by DeviceClass {escape(device_class)}: on a "
            "node without it allocatable, DynamicResources allocates it from the class's devices",
            highlight=False,
            soft_wrap=True,
        )
    for problem in judged.get("problems") or ():
        console.print(f"DRA object not read: {escape(problem)}", highlight=False, soft_wrap=True)
    if judged["not_judged"]:
        console.print(
            f"not judged (every node passes for it here): {escape('; '.join(judged['not_judged']))}",
            highlight=False,
            soft_wrap=True,
        )


def _age(seconds: float) -> str:
    """A span as ``kubectl`` shows ages: ``45s``, ``12m``, ``3h``, ``2d``."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{int(seconds)}s"


def _print_unreadable(console: Console, keys: list[str]) -> None:
    """The pods the snapshot skipped (their requests are missing from every node), if any."""
    if keys:
        few = (
            "1 pod could not be read and is"
            if len(keys) == 1
            else f"{len(keys)} pods could not be read and are"
        )
        console.print(f"{few} not counted: {escape(_first(keys, 5))}", highlight=False, soft_wrap=True)


def _forget_node(args: argparse.Namespace, console: Console) -> int:
    import asyncio

    from stickypack.core.labels import DNS_SUBDOMAIN, is_dns_label
    from stickypack.extender.server import make_store
    from stickypack.kube.client import api_client
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
        async with api_client(config.cluster.kubeconfig) as api:
            return await forget_node(make_store(config, api), args.node, NO_LIMITS)

    try:
        dropped = asyncio.run(run())
    except Exception as exc:  # kubeconfig: status 2; API unreachable, RBAC: status 1; one line
        return _cluster_failure("forget-node", exc)
    console.print(f"forgot node {escape(args.node)}: {dropped} build history entries dropped")
    return 0
