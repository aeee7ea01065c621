"""Render kube-scheduler configuration (``KubeSchedulerConfiguration``, API ``v1``).

``scheduler_config(["stickypack"])`` returns a dict ready to be dumped as YAML and passed to
``kube-scheduler --config``. Each profile name maps to a builder in :data:`PROFILE_BUILDERS`
(a function returning one entry of ``profiles``), so a new profile is one more builder.

Profiles:

``stickypack``
    Packing, the scoring of the zero-to-jupyterhub user-scheduler
    (``jupyterhub/values.yaml`` ``scheduling.userScheduler``) without ImageLocality:
    NodeResourcesBalancedAllocation and ImageLocality disabled for scoring; NodeAffinity
    14631, InterPodAffinity 1331, NodeResourcesFit 121 with the ``MostAllocated`` strategy
    (cpu 1, memory 1); TaintToleration, PodTopologySpread and VolumeBinding keep their
    default weights. The weights are powers of 11, so a higher plugin always dominates the
    sum of the lower ones. ImageLocality (z2jh: 11) is off because it draws a session to the
    nodes that list its image, against the packing order: the simulated ``stickypack``
    policy with it met the issue's per-day criteria on fewer trace days (docs/simulator.md,
    "Images"), so the simulated policy has none and the rendered profile matches it.
``z2jh``
    The zero-to-jupyterhub user-scheduler's scoring exactly, ImageLocality 11 included
    (what the simulator's ``z2jh`` policy models, and what the fidelity tests compare it
    with), for a cluster that wants it as z2jh ships it.
``default-scheduler``
    kube-scheduler's defaults (LeastAllocated spreading), under its usual name.
``stickypack-builds``
    For BinderHub build pods, used with the stickypack extender (:func:`extender_entry`):
    NodeResourcesFit ``MostAllocated`` (cpu 1, memory 1), BalancedAllocation, ImageLocality
    and InterPodAffinity off (as the simulated policy's build profile), the other plugins at
    their default weights; the extender adds build locality, node age and scale-down
    awareness. InterPodAffinity scored BinderHub's preferred anti-affinity among build pods
    (sticky builds off, its default): up to 200 points (weight 2) for a node running no
    build, against the policy, which spreads builds by its load bound instead, and unseen by
    the extender's prediction of kube-scheduler's pick. kube-scheduler calls an extender for
    *every* profile of its configuration.

:func:`scheduler_routing` renders the other half: a ``MutatingAdmissionPolicy`` that sends
labelled pods (build pods, Dask workers) to one of these schedulers (Kubernetes 1.36+) and,
given a webhook route's :class:`~stickypack.core.routing.RoutePlacement`, to a node pool
too (node affinity ANDed into the pod's, tolerations added), annotating each routed pod
as the webhook does: one fixed CEL JSON Patch, :data:`ROUTING_PATCH_EXPRESSION`, reading
the route from the policy's variables, with the webhook's result for every pod);
:func:`webhook_configuration` the
``MutatingWebhookConfiguration`` that does the same through the stickypack webhook, on any
Kubernetes.

This module only builds data; it starts nothing. The CLI (``stickypack render
scheduler-config`` and ``render scheduler-routing``) prints :func:`scheduler_config_yaml` and
:func:`scheduler_routing_yaml`.
"""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Callable, Mapping, Sequence
from string import Template
from typing import Any

from stickypack.core.framework import Profile
from stickypack.core.plugins.kubescheduler import KUBE_SCHEDULER_SCORERS
from stickypack.core.policy import Policy
from stickypack.core.routing import (
    MAX_ANNOTATION_BYTES,
    ROUTE_ANNOTATION,
    ROUTE_ANNOTATION_PATH,
    RoutePlacement,
    SchedulerRoute,
)
from stickypack.core.yamltext import dump_yaml, dump_yaml_all

API_VERSION = "kubescheduler.config.k8s.io/v1"
KIND = "KubeSchedulerConfiguration"

#: Score weights of the z2jh user-scheduler but ImageLocality's, used by the ``stickypack``
#: profile; the ``z2jh`` profile adds :data:`Z2JH_IMAGE_LOCALITY_WEIGHT`.
PACKING_SCORE_WEIGHTS: dict[str, int] = {
    "NodeAffinity": 14631,
    "InterPodAffinity": 1331,
    "NodeResourcesFit": 121,
}
Z2JH_IMAGE_LOCALITY_WEIGHT = 11


def _most_allocated_args() -> dict[str, Any]:
    """NodeResourcesFit scoring by ``MostAllocated``, cpu and memory weighted 1 each."""
    resources = [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]
    return {
        "name": "NodeResourcesFit",
        "args": {"scoringStrategy": {"type": "MostAllocated", "resources": resources}},
    }


#: The ``percentageOfNodesToScore`` of stickypack's own profiles: every feasible node is
#: scored in a cluster of any size (kube-scheduler's adaptive default scores only the first
#: feasible nodes it finds from a rotating start in a cluster of 100 nodes or more, so a pod
#: would miss the fullest node, and a build its cache node, when they are not among those).
SCORE_EVERY_NODE = 100


def _packing_profile(scheduler_name: str, weights: Mapping[str, int]) -> dict[str, Any]:
    """Fill the most-allocated node that fits, scoring with ``weights`` (plugin -> weight)."""
    # BalancedAllocation is turned off so it cannot pull pods apart, ImageLocality too
    # unless weighted here; a re-weighted plugin must be disabled before it can be enabled
    # again with another weight.
    disabled = [{"name": "NodeResourcesBalancedAllocation"}]
    if "ImageLocality" not in weights:
        disabled.append({"name": "ImageLocality"})
    disabled += [{"name": name} for name in weights]
    return {
        "schedulerName": scheduler_name,
        "plugins": {
            "score": {
                "disabled": disabled,
                "enabled": [{"name": name, "weight": weight} for name, weight in weights.items()],
            }
        },
        "pluginConfig": [_most_allocated_args()],
    }


def _stickypack_profile() -> dict[str, Any]:
    """Packing profile: the z2jh user-scheduler's scoring without ImageLocality, scoring
    every feasible node (:data:`SCORE_EVERY_NODE`)."""
    packing = _packing_profile("stickypack", PACKING_SCORE_WEIGHTS)
    return {
        "schedulerName": packing.pop("schedulerName"),
        "percentageOfNodesToScore": SCORE_EVERY_NODE,
        **packing,
    }


def _z2jh_profile() -> dict[str, Any]:
    """The z2jh user-scheduler's scoring, ImageLocality 11 included."""
    return _packing_profile("z2jh", {**PACKING_SCORE_WEIGHTS, "ImageLocality": Z2JH_IMAGE_LOCALITY_WEIGHT})


def _default_profile() -> dict[str, Any]:
    """kube-scheduler's default plugins and weights, as ``default-scheduler``."""
    return {"schedulerName": "default-scheduler"}


def _stickypack_builds_profile() -> dict[str, Any]:
    """Build pods: pack (MostAllocated) and let the extender add locality, every feasible
    node scored (:data:`SCORE_EVERY_NODE`: the extender's prioritize sees only those)."""
    # InterPodAffinity off too: it would weigh BinderHub's preferred anti-affinity among
    # build pods (its default) against locality, which the policy's build profile does not
    off = ["NodeResourcesBalancedAllocation", "ImageLocality", "InterPodAffinity"]
    return {
        "schedulerName": "stickypack-builds",
        "percentageOfNodesToScore": SCORE_EVERY_NODE,
        "plugins": {"score": {"disabled": [{"name": name} for name in off]}},
        "pluginConfig": [_most_allocated_args()],
    }


#: Weight of the stickypack extender: the sum of the weights of the plugins it runs in the
#: ``stickypack-builds`` profile of the ``stickypack`` policy (BuildLocality 10, NodeAge 3,
#: ScaleDownAware 2), so ``Score * weight * 10`` keeps the policy's balance against
#: kube-scheduler's own ``weight * score`` sums.
EXTENDER_WEIGHT = 15
#: kube-scheduler's client defaults (qps 50, burst 100) cap binds near 50 pods/s.
EXTENDER_CLIENT_QPS = 500
EXTENDER_CLIENT_BURST = 1000


def extender_entry(
    url_prefix: str, *, weight: int = EXTENDER_WEIGHT, http_timeout: str = "2s"
) -> dict[str, Any]:
    """One ``extenders[]`` entry for the stickypack extender at ``url_prefix``.

    ``nodeCacheCapable``: only node names are sent (the extender has its own node cache);
    ``ignorable``: when the extender is down or errs, pods are scheduled without it;
    no ``managedResources``: it is asked about every pod (it passes pods it does not manage
    through unchanged).
    """
    return {
        "urlPrefix": url_prefix.rstrip("/"),
        "filterVerb": "filter",
        "prioritizeVerb": "prioritize",
        "weight": weight,
        "enableHTTPS": False,
        "httpTimeout": http_timeout,
        "nodeCacheCapable": True,
        "ignorable": True,
    }


#: Profile name -> builder returning one ``profiles[]`` entry (a fresh dict on each call).
PROFILE_BUILDERS: dict[str, Callable[[], dict[str, Any]]] = {
    "stickypack": _stickypack_profile,
    "z2jh": _z2jh_profile,
    "default-scheduler": _default_profile,
    "stickypack-builds": _stickypack_builds_profile,
}


#: kube-scheduler's filters that the core models: a profile without one of them gets it
#: disabled in its KubeSchedulerConfiguration profile. kube-scheduler's other filters
#: (NodePorts, NodeName, volumes, PodTopologySpread, InterPodAffinity, ...) stay on, as in
#: every kube-scheduler profile: a policy cannot name them (the core models them for
#: ``inspect``'s scale-down check only).
KUBE_FILTERS = ("NodeUnschedulable", "NodeResourcesFit", "NodeAffinity", "TaintToleration")
#: The core's filters that need nothing in the profile: kube-scheduler keeps a node that is
#: not Ready off by its ``node.kubernetes.io/not-ready`` taint (TaintToleration).
NO_KUBE_FILTER = ("NodeReady",)


def _resource_specs(resources: dict[str, int]) -> list[dict[str, Any]]:
    return [{"name": name, "weight": weight} for name, weight in resources.items()]


def kube_scheduler_profile(
    profile: Profile,
    scheduler_name: str | None = None,
    where: str | None = None,
    percentage_of_nodes_to_score: int = 0,
) -> dict[str, Any]:
    """The ``KubeSchedulerConfiguration`` profile (``profiles[]`` entry, API ``v1``) that
    scores as ``profile`` does, named ``scheduler_name`` (default: the profile's name), with
    the ``percentageOfNodesToScore`` of its policy (omitted when 0, kube-scheduler's
    adaptive default).

    Every default score plugin is disabled (``*``) and the profile's scorers enabled with
    their weights (a weight of 0 leaves the plugin out); the modelled filters the profile
    does not list (:data:`KUBE_FILTERS`) are disabled. Arguments: NodeResourcesFit's
    ``strategy``, ``resources`` and ``shape`` become ``scoringStrategy`` (``type``,
    ``resources`` as ``{name, weight}``, ``requestedToCapacityRatio.shape``);
    NodeResourcesBalancedAllocation's ``resources`` its ``resources`` (weight 1 each, as
    both take them only). Mutators are not scheduler settings (BinderHub's affinity is on the pod
    it creates) and are left out.

    Raises ``ValueError`` for what a kube-scheduler profile cannot hold: a plugin that is
    not kube-scheduler's (stickypack's own run in the extender) or a scorer named twice."""
    described = profile.describe()
    where = f"{where}: profile {profile.name}" if where else f"profile {profile.name}"
    names = [f["plugin"] for f in described["filters"]]
    foreign = [n for n in names if n not in KUBE_FILTERS and n not in NO_KUBE_FILTER]
    if foreign:
        raise ValueError(
            f"{where}: filters {foreign} are not kube-scheduler's (stickypack's own plugins run "
            "in `stickypack extender`: --profiles stickypack-builds with --extender-url)"
        )
    enabled: list[dict[str, Any]] = []
    plugin_config: list[dict[str, Any]] = []
    seen: set[str] = set()
    for entry in described["score"]:
        name, weight, args = entry["plugin"], entry["weight"], entry.get("args") or {}
        if name not in KUBE_SCHEDULER_SCORERS:
            raise ValueError(
                f"{where}: score plugin {name} is not kube-scheduler's (stickypack's own plugins "
                "run in `stickypack extender`: --profiles stickypack-builds with --extender-url)"
            )
        if name in seen:
            raise ValueError(f"{where}: {name} scores twice; a kube-scheduler profile holds it once")
        seen.add(name)
        if weight == 0:
            continue
        enabled.append({"name": name, "weight": weight})
        if name == "NodeResourcesFit":
            strategy: dict[str, Any] = {
                "type": args["strategy"],
                "resources": _resource_specs(args["resources"]),
            }
            if args["strategy"] == "RequestedToCapacityRatio":
                strategy["requestedToCapacityRatio"] = {"shape": args["shape"]}
            plugin_config.append({"name": name, "args": {"scoringStrategy": strategy}})
        elif name == "NodeResourcesBalancedAllocation":  # weights are 1 (the policy checks it)
            plugin_config.append({"name": name, "args": {"resources": _resource_specs(args["resources"])}})
    plugins: dict[str, Any] = {"score": {"disabled": [{"name": "*"}], "enabled": enabled}}
    off = [{"name": n} for n in KUBE_FILTERS if n not in names]
    if off:
        plugins["filter"] = {"disabled": off}
    out: dict[str, Any] = {"schedulerName": scheduler_name or profile.name}
    if percentage_of_nodes_to_score:
        out["percentageOfNodesToScore"] = percentage_of_nodes_to_score
    out["plugins"] = plugins
    if plugin_config:
        out["pluginConfig"] = plugin_config
    return out


def scheduler_config(
    profiles: Sequence[str],
    *,
    policies: Sequence[Policy] = (),
    kubeconfig: str | None = None,
    extender: dict[str, Any] | None = None,
    qps: float | None = None,
    burst: int | None = None,
) -> dict[str, Any]:
    """Return a ``KubeSchedulerConfiguration`` dict with the named profiles, in that order.

    Args:
        profiles: names from :data:`PROFILE_BUILDERS` (e.g. ``["stickypack"]``); each becomes
            one entry of ``profiles`` with that ``schedulerName``.
        policies: policies of one's own, after those: each of their profiles becomes an
            entry named as the profile (:func:`kube_scheduler_profile`).
        kubeconfig: path written to ``clientConnection.kubeconfig`` (omitted when None: the
            scheduler then uses ``--kubeconfig`` or its in-cluster config).
        extender: one entry for the top-level ``extenders`` list (keys as in the v1 API:
            ``urlPrefix``, ``filterVerb``, ``prioritizeVerb``, ``weight``,
            ``nodeCacheCapable``, ...). kube-scheduler calls an extender for every profile
            of the configuration it is in.
        qps, burst: ``clientConnection.qps``/``burst`` (omitted when None).

    Leader election is off (one scheduler process per configuration); its lock is named
    for the profiles (:func:`lease_name`, in ``kube-system``), so turning it on never takes
    the default scheduler's lock ``kube-system/kube-scheduler``.

    Raises:
        ValueError: for an unknown or repeated profile name, no profile, or a policy's
            profile a kube-scheduler profile cannot hold.
    """
    if isinstance(profiles, str):
        raise TypeError("profiles must be a list of profile names, not a string")
    unknown = [p for p in profiles if p not in PROFILE_BUILDERS]
    if unknown:
        which = ("profiles " if len(unknown) > 1 else "profile ") + ", ".join(repr(p) for p in unknown)
        raise ValueError(f"unknown scheduler {which}; valid: {', '.join(sorted(PROFILE_BUILDERS))}")
    rendered = [PROFILE_BUILDERS[name]() for name in profiles]
    for policy in policies:
        rendered += [
            kube_scheduler_profile(
                p,
                where=f"policy {policy.name}",
                percentage_of_nodes_to_score=policy.percentage_of_nodes_to_score,
            )
            for p in policy.profiles
        ]
    names = [p["schedulerName"] for p in rendered]
    if not names:
        raise ValueError("at least one profile is needed")
    # where each name comes from, for the message: --profiles' own, or a policy's profile
    origins = [*profiles]
    origins += [f"policy {policy.name}'s {p.name}" for policy in policies for p in policy.profiles]
    twice = next((name for name in names if names.count(name) > 1), None)
    if twice is not None:
        clash = ", then ".join(origin for origin, name in zip(origins, names, strict=True) if name == twice)
        raise ValueError(f"profile {twice!r} named twice (profiles: {clash})")
    config: dict[str, Any] = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "leaderElection": {
            "leaderElect": False,
            "resourceName": lease_name(names),
            "resourceNamespace": LEASE_NAMESPACE,
        },
    }
    if kubeconfig is not None:
        config["clientConnection"] = {"kubeconfig": str(kubeconfig)}
    if qps is not None or burst is not None:
        connection = config.setdefault("clientConnection", {})
        if qps is not None:
            connection["qps"] = qps
        if burst is not None:
            connection["burst"] = burst
    config["profiles"] = rendered
    if extender is not None:
        config["extenders"] = [copy.deepcopy(extender)]
    return config


#: Where the rendered configuration's leader-election Lease lives (kube-scheduler's default).
LEASE_NAMESPACE = "kube-system"


def lease_name(profiles: Sequence[str]) -> str:
    """The leader-election Lease of a configuration with these profiles: ``<profiles>-scheduler``
    (``stickypack-builds-scheduler``), never the default scheduler's ``kube-scheduler``."""
    return "-".join(profiles) + "-scheduler"


def scheduler_config_yaml(profiles: Sequence[str], **kwargs: Any) -> str:
    """:func:`scheduler_config` as a YAML document (keys in the order written)."""
    return dump_yaml(scheduler_config(profiles, **kwargs))


#: Kubernetes' label a namespace carries with its own name (set by the API server).
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


def scheduler_routing(
    scheduler_name: str,
    selector: Mapping[str, str],
    namespace: str | None = None,
    placement: RoutePlacement | None = None,
) -> list[dict[str, Any]]:
    """A ``MutatingAdmissionPolicy`` and its binding (``admissionregistration.k8s.io/v1``,
    on by default from Kubernetes 1.36), both named :func:`routing_policy_name`
    (``stickypack-route-to-<scheduler_name>``), that give every pod created with the labels
    ``selector`` the ``schedulerName`` ``scheduler_name``: how build pods reach the
    ``stickypack-builds`` scheduler (BinderHub sets no scheduler name) without a webhook.

    Only pods left on ``default-scheduler`` are changed, so a pod that names its scheduler
    keeps it. ``namespace`` limits it to one namespace (else every namespace).

    Each routed pod is changed as the webhook's :func:`~stickypack.core.routing.route_pod`
    changes it for a route named like the policy (compared on kube-apiserver 1.37 for chosen
    and generated pods, ``tests/test_routing_policy.py``): the scheduler name; the
    annotation ``stickypack.io/scheduler-route`` set to the policy's name (the policy's
    route name, as the webhook writes its route's), left out when it would take the pod's
    annotations beyond the API server's 256 KiB; and, given ``placement`` (a webhook
    route's :class:`~stickypack.core.routing.RoutePlacement`), that node affinity and those
    tolerations, with the result
    :meth:`RoutePlacement.patch <stickypack.core.routing.RoutePlacement.patch>` gives: the
    required terms ANDed into the pod's own (every pod term paired with every route term;
    a pod term without requirements kept as it is), the preferred terms appended, each
    toleration appended unless the pod has an equal one. It is one ``JSONPatch`` mutation
    for every route, with or without a placement: the fixed CEL expression
    :data:`ROUTING_PATCH_EXPRESSION`, which reads the scheduler name, the route name and
    the placement (empty lists for none) from the policy's ``spec.variables``
    (:func:`routing_variables`: CEL literals). Raises ``ValueError`` for a placement a
    policy cannot carry: a toleration's ``tolerationSeconds`` beyond +-(2**53 - 1)
    (:data:`MAX_EXACT_PATCH_INT`). The Helm chart's ``routing.routes`` render the same
    policies.

    ``failurePolicy: Ignore``: when the policy cannot run (a CEL error, its cost budget
    exceeded, a patch operation that does not apply), the API server skips that mutation
    and creates the pod as it was sent, for the default scheduler. The scheduler name, the
    annotation and the placement are one patch: a pod is routed whole or not at all, never
    half-way (tested on kube-apiserver 1.37; the webhook's failure leaves the pod unchanged
    too). The cost budget is far off: a pod with 2000 tolerations, 100 required terms of 20
    requirements each and 2000 annotations of 250 KB in all is routed and annotated
    (tested). One failure ``Ignore`` does not cover: a patched pod the API server cannot
    decode fails the pod's creation (an internal error, on 1.37); the expression only
    writes strings, lists and small integers, and the one value that could not decode, a
    ``tolerationSeconds`` beyond :data:`MAX_EXACT_PATCH_INT`, is refused here.
    """
    if not selector:
        raise ValueError("a routing needs a label selector (it would catch every pod)")
    name = routing_policy_name(scheduler_name)
    pods = {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}
    unnamed = 'object.spec.schedulerName == "default-scheduler"'
    variables = routing_variables(scheduler_name, name, placement or RoutePlacement())
    mutation = {"patchType": "JSONPatch", "jsonPatch": {"expression": ROUTING_PATCH_EXPRESSION}}
    policy: dict[str, Any] = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {
            "matchConstraints": {"resourceRules": [pods]},
            "matchConditions": [{"name": "default-scheduler-only", "expression": unnamed}],
            # Ignore: if the policy cannot run, the pod is created for the default scheduler.
            "failurePolicy": "Ignore",
            "reinvocationPolicy": "Never",
            "variables": variables,
            "mutations": [mutation],
        },
    }
    match: dict[str, Any] = {"objectSelector": {"matchLabels": dict(selector)}}
    if namespace is not None:
        match["namespaceSelector"] = {"matchLabels": {NAMESPACE_NAME_LABEL: namespace}}
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingAdmissionPolicyBinding",
        "metadata": {"name": name},
        "spec": {"policyName": name, "matchResources": match},
    }
    return [policy, binding]


def routing_policy_name(scheduler_name: str) -> str:
    """The name of the routing policy (and binding) for ``scheduler_name``:
    ``stickypack-route-to-<scheduler_name>``, one per scheduler. It is also the route's name
    the policy writes into a routed pod's ``stickypack.io/scheduler-route`` annotation."""
    return f"stickypack-route-to-{scheduler_name}"


#: The largest integer (either sign) a rendered policy's JSON Patch carries: the API server
#: turns the patch's CEL values into JSON through ``google.protobuf.Value``, and CEL writes
#: an integer beyond this (JavaScript's safe range) as a string, which a pod's
#: ``tolerationSeconds`` (int64) does not decode from: kube-apiserver 1.37 then answers the
#: pod's creation with an internal error, ``failurePolicy: Ignore`` notwithstanding
#: (2**53 - 1 arrives; 2**53 fails, ``tests/test_routing_policy.py``).
MAX_EXACT_PATCH_INT = 2**53 - 1


def _cel_string(text: str) -> str:
    """``text`` as a CEL string literal, written as Go's JSON encoder without HTML escaping
    (sprig's ``toRawJson``, what the Helm chart writes) writes it: ``json.dumps`` with the
    non-ASCII characters as they are, but U+2028 and U+2029 escaped."""
    return json.dumps(text, ensure_ascii=False).replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def _cel(value: Any) -> str:
    """JSON data (dicts with string keys, lists, strings, ints, bools, None) as a CEL
    literal. Each map value is wrapped in ``dyn()``: Kubernetes' CEL refuses a literal
    whose values differ in type (``HomogeneousAggregateLiterals``), as a toleration's
    strings and ``tolerationSeconds`` do. Map keys are written sorted, and strings as
    :func:`_cel_string` writes them, so that the Helm chart's ``stickypack.cel`` template
    (``charts/stickypack/templates/_helpers.tpl``) writes the same text. Raises
    ``ValueError`` for an integer beyond :data:`MAX_EXACT_PATCH_INT`."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        if abs(value) > MAX_EXACT_PATCH_INT:
            raise ValueError(f"{value} is beyond +-(2**53 - 1), which a CEL JSON Patch cannot carry")
        return str(value)
    if isinstance(value, str):
        return _cel_string(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_cel(v) for v in value) + "]"
    if isinstance(value, Mapping):
        if not all(isinstance(k, str) for k in value):
            raise TypeError(f"not JSON data (a key is not a string): {value!r}")
        return "{" + ", ".join(f"{_cel_string(k)}: dyn({_cel(value[k])})" for k in sorted(value)) + "}"
    raise TypeError(f"not JSON data: {value!r}")


#: The ``spec.variables`` of every routing policy, in this order: the scheduler name and
#: the route name (strings: the policy's name, :func:`routing_policy_name`), the
#: placement's required node selector terms, its preferred terms and its tolerations
#: (lists, each possibly empty), written as CEL literals (:func:`routing_variables`) and
#: read by :data:`ROUTING_PATCH_EXPRESSION`.
ROUTING_VARIABLES = ("schedulerName", "routeName", "requiredTerms", "preferredTerms", "tolerations")

#: The ``JSONPatch`` expression of every routing policy: the same text for every route, the
#: route's scheduler name, route name and placement read from the policy's variables
#: (:data:`ROUTING_VARIABLES`; ``variables.<name>`` in CEL). The Helm chart reads the same
#: text from ``charts/stickypack/files/routing-patch.cel`` (a test checks the two are
#: equal). It gives the pod (``object``, as the API server hands it to a policy: the pod's
#: typed values, a field left out when empty; of the lists only ``nodeSelectorTerms`` may
#: be null, as its Go field is written even when empty) the operations of
#: :func:`~stickypack.core.routing.route_pod` for a route named ``routeName`` (the same
#: resulting pod; the operations differ in form): it sets ``schedulerName``, adds the
#: placement to the pod's spec (a part of the placement that is empty adds no operation)
#: and annotates the pod.
#:
#: Node affinity: a pod without ``spec.affinity`` (or without ``nodeAffinity`` in it) gets
#: the placement's node affinity whole (``na``: its non-empty parts, CEL's optional map
#: entries; named by mapping a one-element list, as kube-apiserver 1.37 offers a policy no
#: ``cel.bind``: "undeclared reference to 'cel'"). Otherwise the required part is
#: replaced by the AND: each of the pod's ``nodeSelectorTerms`` becomes one term per route
#: term (their ``matchExpressions`` and ``matchFields`` concatenated, the pod's rebuilt as
#: plain maps: a JSON Patch value cannot carry the API server's typed Go values, "type
#: conversion error from struct type v1.NodeSelectorRequirement to *structpb.Value"),
#: except a term without requirements, kept once (as ``{}``, how the API server stores it)
#: (``map`` then ``flatten``, of CEL's list extension); a pod without required terms
#: (none, null or empty) gets the route's. The preferred terms are appended with ``/-``
#: (or added whole when the pod has none).
#:
#: Tolerations: each route toleration the pod has no equal of (key, value and effect with
#: the API's "" defaults, operator "" read as ``Equal``, the same ``tolerationSeconds`` or
#: none on both: :func:`stickypack.core.routing._toleration_key`) is appended with ``/-``
#: (all of them, added whole, when the pod has none). The route's tolerations are read as
#: :meth:`RoutePlacement.from_dict` normalises them: ``operator`` always written, an empty
#: ``key``, ``value`` or ``effect`` left out. The pod's own preferred terms and tolerations
#: are never written back, so its ``tolerationSeconds`` never pass through CEL's JSON
#: conversion (:data:`MAX_EXACT_PATCH_INT`).
#:
#: Annotation: ``stickypack.io/scheduler-route: <routeName>``
#: (:data:`~stickypack.core.routing.ROUTE_ANNOTATION`), the whole
#: ``/metadata/annotations`` for a pod without annotations (or with an empty map), else
#: the one key (``~1`` escaping its ``/`` in the JSON Pointer; ``add`` replaces a value
#: the pod has). Left out, as the webhook leaves it out, when the pod's annotations without
#: that key, plus the key and ``routeName``, come to more than
#: :data:`~stickypack.core.routing.MAX_ANNOTATION_BYTES` (the API server's limit, which
#: would fail the pod's creation): each annotation's key and value concatenated, all of
#: them joined (the strings extension's ``join``) and measured in bytes
#: (``size(bytes(s))``: UTF-8, where ``size(s)`` counts code points).
ROUTING_PATCH_EXPRESSION = Template(
    """\
[JSONPatch{op: "add", path: "/spec/schedulerName", value: variables.schedulerName}] +
(size(variables.requiredTerms) == 0 && size(variables.preferredTerms) == 0 ? []
  : !has(object.spec.affinity) || !has(object.spec.affinity.nodeAffinity)
  ? [{
      ?"requiredDuringSchedulingIgnoredDuringExecution": size(variables.requiredTerms) == 0
        ? optional.none() : optional.of(dyn({"nodeSelectorTerms": variables.requiredTerms})),
      ?"preferredDuringSchedulingIgnoredDuringExecution": size(variables.preferredTerms) == 0
        ? optional.none() : optional.of(dyn(variables.preferredTerms))
    }].map(na, has(object.spec.affinity)
      ? JSONPatch{op: "add", path: "/spec/affinity/nodeAffinity", value: na}
      : JSONPatch{op: "add", path: "/spec/affinity", value: {"nodeAffinity": na}})
  : (size(variables.requiredTerms) == 0 ? [] : [JSONPatch{op: "add",
      path: "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution",
      value: {"nodeSelectorTerms":
        has(object.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution)
          && has(object.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution
            .nodeSelectorTerms)
          && dyn(object.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution
            .nodeSelectorTerms) != null
          && size(object.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution
            .nodeSelectorTerms) > 0
        ? object.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution
          .nodeSelectorTerms.map(t,
            size(t.?matchExpressions.orValue([])) == 0 && size(t.?matchFields.orValue([])) == 0
            ? [dyn({})]
            : variables.requiredTerms.map(r, {
                "matchExpressions": dyn(t.?matchExpressions.orValue([]).map(e, {"key": dyn(e.key),
                    "operator": dyn(e.operator), "values": dyn(e.?values.orValue([]).map(v, v))})
                  + r.?matchExpressions.orValue([])),
                "matchFields": dyn(t.?matchFields.orValue([]).map(e, {"key": dyn(e.key),
                    "operator": dyn(e.operator), "values": dyn(e.?values.orValue([]).map(v, v))})
                  + r.?matchFields.orValue([]))})).flatten()
        : variables.requiredTerms}}]) +
    (size(variables.preferredTerms) == 0 ? []
      : has(object.spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution)
      ? variables.preferredTerms.map(p, JSONPatch{op: "add",
          path: "/spec/affinity/nodeAffinity/preferredDuringSchedulingIgnoredDuringExecution/-",
          value: p})
      : [JSONPatch{op: "add",
          path: "/spec/affinity/nodeAffinity/preferredDuringSchedulingIgnoredDuringExecution",
          value: variables.preferredTerms}])) +
(size(variables.tolerations) == 0 ? []
  : !has(object.spec.tolerations)
  ? [JSONPatch{op: "add", path: "/spec/tolerations", value: variables.tolerations}]
  : variables.tolerations.filter(r, !object.spec.tolerations.exists(o,
        o.?key.orValue("") == r.?key.orValue("") && o.?value.orValue("") == r.?value.orValue("")
        && o.?effect.orValue("") == r.?effect.orValue("")
        && (o.?operator.orValue("") == "" ? "Equal" : o.operator) == r.operator
        && (has(r.tolerationSeconds)
          ? has(o.tolerationSeconds) && o.tolerationSeconds == r.tolerationSeconds
          : !has(o.tolerationSeconds))))
    .map(r, JSONPatch{op: "add", path: "/spec/tolerations/-", value: r})) +
(!has(object.metadata.annotations) || size(object.metadata.annotations) == 0
  ? [JSONPatch{op: "add", path: "/metadata/annotations",
      value: {$key: variables.routeName}}]
  : size(bytes(object.metadata.annotations.filter(k, k != $key)
        .map(k, k + object.metadata.annotations[k]).join()
      + $key + variables.routeName)) <= $max_bytes
  ? [JSONPatch{op: "add", path: $path,
      value: variables.routeName}]
  : [])"""
).substitute(
    key=_cel_string(ROUTE_ANNOTATION),
    path=_cel_string(ROUTE_ANNOTATION_PATH),
    max_bytes=MAX_ANNOTATION_BYTES,
)


def routing_variables(
    scheduler_name: str, route_name: str, placement: RoutePlacement
) -> list[dict[str, str]]:
    """The ``spec.variables`` of the routing policy named ``route_name`` that sends pods to
    ``scheduler_name`` with ``placement`` (an empty one for none): :data:`ROUTING_VARIABLES`,
    each a CEL literal (:func:`_cel`) of the placement as :meth:`RoutePlacement.from_dict`
    normalised it. Raises ``ValueError`` for a toleration's ``tolerationSeconds`` beyond
    +-(2**53 - 1) (:data:`MAX_EXACT_PATCH_INT`), which CEL would write into the patch as a
    string."""
    for i, toleration in enumerate(placement.tolerations):
        seconds = toleration.get("tolerationSeconds")
        if seconds is not None and abs(seconds) > MAX_EXACT_PATCH_INT:
            raise ValueError(
                f"tolerations[{i}]: tolerationSeconds {seconds} is beyond +-(2**53 - 1), which a "
                "MutatingAdmissionPolicy's JSON Patch cannot carry (CEL writes it as a string); "
                "the webhook's routes can"
            )
    values: tuple[Any, ...] = (
        scheduler_name,
        route_name,
        list(placement.required_terms),
        list(placement.preferred),
        list(placement.tolerations),
    )
    return [{"name": name, "expression": _cel(v)} for name, v in zip(ROUTING_VARIABLES, values, strict=True)]


def scheduler_routing_yaml(
    scheduler_name: str,
    selector: Mapping[str, str],
    namespace: str | None = None,
    placement: RoutePlacement | None = None,
) -> str:
    """:func:`scheduler_routing` as a two-document YAML stream (a CEL expression of several
    lines as a literal block)."""
    return dump_yaml_all(scheduler_routing(scheduler_name, selector, namespace, placement))


#: Name of the rendered ``MutatingWebhookConfiguration``.
WEBHOOK_CONFIGURATION_NAME = "stickypack-scheduler-routing"
#: Seconds the API server waits for the webhook before its ``failurePolicy`` (Ignore) applies.
WEBHOOK_TIMEOUT_S = 5


def webhook_configuration(
    routes: Sequence[SchedulerRoute],
    *,
    url: str | None = None,
    service: tuple[str, str, int] | None = None,
    ca_bundle: bytes | None = None,
    inject_ca_from: str | None = None,
    timeout_s: int = WEBHOOK_TIMEOUT_S,
) -> dict[str, Any]:
    """A ``MutatingWebhookConfiguration`` (``admissionregistration.k8s.io/v1``, Kubernetes
    1.16+; a route's ``namespaces`` need 1.21+, whose API server puts the
    ``kubernetes.io/metadata.name`` label on every namespace) that sends the creation of
    the pods ``routes`` may match to the stickypack webhook (``stickypack webhook``): at
    ``url`` (``https://HOST[:PORT]/mutate``) or at the Service ``service`` = ``(namespace,
    name, port)``, path ``/mutate``.

    One webhook entry per route, with the route's pod selector as ``objectSelector`` and its
    namespaces as ``namespaceSelector``, so the API server calls the webhook only for pods a
    route may match; the webhook itself applies the routes in order (first match wins).
    ``failurePolicy: Ignore``: while the webhook is down or slow (``timeout_s``), pods are
    created unchanged, for the default scheduler. ``ca_bundle``: PEM of the CA that signed
    the webhook's certificate; ``inject_ca_from`` (``namespace/certificate``) lets
    cert-manager fill it in instead.
    """
    if (url is None) == (service is None):
        raise ValueError("give the webhook's url or its service, not both")
    if not routes:
        raise ValueError("no routes: the configuration would call the webhook for nothing")
    client: dict[str, Any]
    if url is not None:
        client = {"url": url}
    else:
        assert service is not None
        namespace, name, port = service
        client = {"service": {"namespace": namespace, "name": name, "port": port, "path": "/mutate"}}
    if ca_bundle:
        client["caBundle"] = base64.b64encode(ca_bundle).decode("ascii")
    pods = {
        "operations": ["CREATE"],
        "apiGroups": [""],
        "apiVersions": ["v1"],
        "resources": ["pods"],
        "scope": "Namespaced",
    }
    webhooks = []
    for route in routes:
        entry: dict[str, Any] = {
            "name": f"{route.name}.routing.stickypack.io",
            "admissionReviewVersions": ["v1"],
            "sideEffects": "None",
            "failurePolicy": "Ignore",
            "matchPolicy": "Equivalent",
            "reinvocationPolicy": "Never",
            "timeoutSeconds": timeout_s,
            "clientConfig": copy.deepcopy(client),
            "rules": [copy.deepcopy(pods)],
            "objectSelector": route.pods.to_dict(),
        }
        if route.namespaces:
            entry["namespaceSelector"] = {
                "matchExpressions": [
                    {"key": NAMESPACE_NAME_LABEL, "operator": "In", "values": list(route.namespaces)}
                ]
            }
        webhooks.append(entry)
    metadata: dict[str, Any] = {"name": WEBHOOK_CONFIGURATION_NAME}
    if inject_ca_from:
        metadata["annotations"] = {"cert-manager.io/inject-ca-from": inject_ca_from}
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": metadata,
        "webhooks": webhooks,
    }


def webhook_configuration_yaml(routes: Sequence[SchedulerRoute], **kwargs: Any) -> str:
    """:func:`webhook_configuration` as YAML."""
    return dump_yaml(webhook_configuration(routes, **kwargs))
