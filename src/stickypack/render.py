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
    NodeResourcesFit ``MostAllocated`` (cpu 1, memory 1), BalancedAllocation and
    ImageLocality off (as the simulated policy's build profile), the other plugins at their
    default weights; the extender adds build locality and scale-down
    awareness. kube-scheduler calls an extender for *every* profile of its configuration.

:func:`scheduler_routing` renders the other half: a ``MutatingAdmissionPolicy`` that sends
labelled pods (build pods, Dask workers) to one of these schedulers (Kubernetes 1.36+);
:func:`webhook_configuration` the ``MutatingWebhookConfiguration`` that does the same
through the stickypack webhook, on any Kubernetes.

This module only builds data; it starts nothing. The CLI (``stickypack render
scheduler-config`` and ``render scheduler-routing``) prints :func:`scheduler_config_yaml` and
:func:`scheduler_routing_yaml`.
"""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import yaml

from stickypack.core.routing import SchedulerRoute

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
    """Packing profile: the z2jh user-scheduler's scoring without ImageLocality."""
    return _packing_profile("stickypack", PACKING_SCORE_WEIGHTS)


def _z2jh_profile() -> dict[str, Any]:
    """The z2jh user-scheduler's scoring, ImageLocality 11 included."""
    return _packing_profile("z2jh", {**PACKING_SCORE_WEIGHTS, "ImageLocality": Z2JH_IMAGE_LOCALITY_WEIGHT})


def _default_profile() -> dict[str, Any]:
    """kube-scheduler's default plugins and weights, as ``default-scheduler``."""
    return {"schedulerName": "default-scheduler"}


def _stickypack_builds_profile() -> dict[str, Any]:
    """Build pods: pack (MostAllocated) and let the extender add locality."""
    return {
        "schedulerName": "stickypack-builds",
        "plugins": {
            "score": {"disabled": [{"name": "NodeResourcesBalancedAllocation"}, {"name": "ImageLocality"}]}
        },
        "pluginConfig": [_most_allocated_args()],
    }


#: Weight of the stickypack extender: the sum of the weights of the plugins it runs in the
#: ``stickypack-builds`` profile of the ``stickypack`` policy (BuildLocality 10,
#: ScaleDownAware 2), so ``Score * weight * 10`` keeps the policy's balance against
#: kube-scheduler's own ``weight * score`` sums.
EXTENDER_WEIGHT = 12
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


def scheduler_config(
    profiles: Sequence[str],
    *,
    kubeconfig: str | None = None,
    extender: dict[str, Any] | None = None,
    qps: float | None = None,
    burst: int | None = None,
) -> dict[str, Any]:
    """Return a ``KubeSchedulerConfiguration`` dict with the named profiles, in that order.

    Args:
        profiles: names from :data:`PROFILE_BUILDERS` (e.g. ``["stickypack"]``); each becomes
            one entry of ``profiles`` with that ``schedulerName``.
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
        ValueError: for an unknown or repeated profile name, or no profile.
    """
    if isinstance(profiles, str):
        raise TypeError("profiles must be a list of profile names, not a string")
    if not profiles:
        raise ValueError("at least one profile is needed")
    unknown = [p for p in profiles if p not in PROFILE_BUILDERS]
    if unknown:
        raise ValueError(f"unknown scheduler profile(s) {unknown}; known: {sorted(PROFILE_BUILDERS)}")
    if len(set(profiles)) != len(profiles):
        raise ValueError(f"profile named twice in {list(profiles)}")
    config: dict[str, Any] = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "leaderElection": {
            "leaderElect": False,
            "resourceName": lease_name(profiles),
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
    config["profiles"] = [PROFILE_BUILDERS[name]() for name in profiles]
    if extender is not None:
        config["extenders"] = [copy.deepcopy(extender)]
    return config


#: Where the rendered configuration's leader-election Lease lives (kube-scheduler's default).
LEASE_NAMESPACE = "kube-system"


def lease_name(profiles: Sequence[str]) -> str:
    """The leader-election Lease of a configuration with these profiles: ``<profiles>-scheduler``
    (``stickypack-builds-scheduler``), never the default scheduler's ``kube-scheduler``."""
    return "-".join(profiles) + "-scheduler"


def scheduler_config_yaml(
    profiles: Sequence[str],
    *,
    kubeconfig: str | None = None,
    extender: dict[str, Any] | None = None,
    qps: float | None = None,
    burst: int | None = None,
) -> str:
    """:func:`scheduler_config` as a YAML document (keys in the order written)."""
    return yaml.safe_dump(
        scheduler_config(profiles, kubeconfig=kubeconfig, extender=extender, qps=qps, burst=burst),
        sort_keys=False,
        default_flow_style=False,
    )


#: Kubernetes' label a namespace carries with its own name (set by the API server).
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


def scheduler_routing(
    scheduler_name: str, selector: Mapping[str, str], namespace: str | None = None
) -> list[dict[str, Any]]:
    """A ``MutatingAdmissionPolicy`` and its binding (``admissionregistration.k8s.io/v1``,
    on by default from Kubernetes 1.36) that give every pod created with the labels
    ``selector`` the ``schedulerName`` ``scheduler_name``: how build pods reach the
    ``stickypack-builds`` scheduler (BinderHub sets no scheduler name) without a webhook.

    Only pods left on ``default-scheduler`` are changed, so a pod that names its scheduler
    keeps it. ``namespace`` limits it to one namespace (else every namespace).
    """
    if not selector:
        raise ValueError("a routing needs a label selector (it would catch every pod)")
    name = f"stickypack-route-to-{scheduler_name}"
    pods = {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}
    unnamed = 'object.spec.schedulerName == "default-scheduler"'
    set_name = f"Object{{spec: Object.spec{{schedulerName: {json.dumps(scheduler_name)}}}}}"
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
            "mutations": [
                {
                    "patchType": "ApplyConfiguration",
                    "applyConfiguration": {"expression": set_name},
                }
            ],
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


def scheduler_routing_yaml(
    scheduler_name: str, selector: Mapping[str, str], namespace: str | None = None
) -> str:
    """:func:`scheduler_routing` as a two-document YAML stream."""
    return yaml.safe_dump_all(
        scheduler_routing(scheduler_name, selector, namespace), sort_keys=False, default_flow_style=False
    )


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
    return yaml.safe_dump(webhook_configuration(routes, **kwargs), sort_keys=False, default_flow_style=False)
