"""The Helm chart (charts/stickypack) with the real helm binary, and installed into the local
control plane: its objects, its scheduler configurations (the committed output of
``stickypack render scheduler-config``), and its RBAC, used for real: the kube-scheduler and
the extender run with tokens of the chart's ServiceAccounts. The webhook component: its
MutatingWebhookConfiguration against ``stickypack render webhook-config``'s, its three TLS
modes, its generated certificate (checked with ``cryptography``, served by the real
``stickypack webhook``, kept by ``helm upgrade``), failurePolicy Ignore on the API server.

helm is found like the control plane's binaries (:func:`stickypack.testing.find_binaries`):
with ``CI=true`` a missing binary fails the tests, otherwise they are skipped.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import re
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from conftest import needs_binaries
from stickypack.cli import main as cli_main
from stickypack.core.routing import (
    PREFERRED,
    REQUIRED,
    ROUTE_ANNOTATION,
    LabelSelector,
    RoutePlacement,
    SchedulerRoute,
    SelectorError,
    route_pod,
)
from stickypack.extender.config import ClusterConfig, ExtenderConfig, HistoryConfig, PodsConfig
from stickypack.extender.server import api_rights
from stickypack.kube.client import ApiRight, rule_rights
from stickypack.render import ROUTING_PATCH_EXPRESSION, _cel, routing_policy_name, scheduler_routing
from stickypack.testing import ControlPlane, ControlPlaneError
from stickypack.testing.controlplane import pinned_versions
from stickypack.webhook.config import RouteConfig, WebhookConfig, config_from_dict, load_config

REPO = Path(__file__).resolve().parents[1]
CHART = REPO / "charts" / "stickypack"
FILES = CHART / "files"
#: The committed scheduler configurations and the `stickypack render` arguments that write them.
RENDERED: dict[str, list[str]] = {
    "scheduler-stickypack.yaml": ["--profiles", "stickypack"],
    "scheduler-stickypack-builds.yaml": [
        "--profiles",
        "stickypack-builds",
        "--extender-url",
        "http://stickypack-extender:8888",
    ],
}
#: Kinds the chart creates, with their API path pieces: (group/version, plural, namespaced).
KINDS: dict[str, tuple[str, str, bool]] = {
    "ConfigMap": ("v1", "configmaps", True),
    "Secret": ("v1", "secrets", True),
    "ServiceAccount": ("v1", "serviceaccounts", True),
    "Service": ("v1", "services", True),
    "Deployment": ("apps/v1", "deployments", True),
    "PodDisruptionBudget": ("policy/v1", "poddisruptionbudgets", True),
    "Role": ("rbac.authorization.k8s.io/v1", "roles", True),
    "RoleBinding": ("rbac.authorization.k8s.io/v1", "rolebindings", True),
    "ClusterRole": ("rbac.authorization.k8s.io/v1", "clusterroles", False),
    "ClusterRoleBinding": ("rbac.authorization.k8s.io/v1", "clusterrolebindings", False),
    "MutatingAdmissionPolicy": ("admissionregistration.k8s.io/v1", "mutatingadmissionpolicies", False),
    "MutatingAdmissionPolicyBinding": (
        "admissionregistration.k8s.io/v1",
        "mutatingadmissionpolicybindings",
        False,
    ),
    "MutatingWebhookConfiguration": (
        "admissionregistration.k8s.io/v1",
        "mutatingwebhookconfigurations",
        False,
    ),
}


# --------------------------------------------------------------------------- helm


@dataclass(frozen=True)
class Helm:
    """The helm binary with its own cache/config/data directories (nothing of the user's)."""

    path: Path
    home: Path

    def run(
        self, *args: str, kubeconfig: Path | None = None, check: bool = True
    ) -> subprocess.CompletedProcess:
        env = {
            **os.environ,
            "HELM_CACHE_HOME": str(self.home / "cache"),
            "HELM_CONFIG_HOME": str(self.home / "config"),
            "HELM_DATA_HOME": str(self.home / "data"),
            "NO_PROXY": "127.0.0.1,localhost",
            "no_proxy": "127.0.0.1,localhost",
        }
        env.pop("KUBECONFIG", None)
        cmd = [str(self.path), *args]
        if kubeconfig is not None:
            cmd += ["--kubeconfig", str(kubeconfig)]
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
        if check and done.returncode != 0:
            raise AssertionError(f"{' '.join(cmd)} exited {done.returncode}:\n{done.stderr}{done.stdout}")
        return done

    def values_file(self, values: dict) -> Path:
        """``values`` written to a file for ``-f`` (lists and PEM text survive, unlike ``--set``)."""
        path = self.home / f"values-{uuid.uuid4().hex[:8]}.yaml"
        path.write_text(yaml.safe_dump(values))
        return path

    def template(
        self,
        *sets: str,
        namespace: str = "binder",
        release: str = "stickypack",
        values: dict | None = None,
    ) -> list[dict]:
        """``helm template`` with ``--set`` values (and ``values`` as a file): the objects, parsed."""
        args = ["template", release, str(CHART), "--namespace", namespace]
        if values is not None:
            args += ["-f", str(self.values_file(values))]
        for value in sets:
            args += ["--set", value]
        return [doc for doc in yaml.safe_load_all(self.run(*args).stdout) if doc]


@pytest.fixture(scope="session")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Helm:
    return Helm(needs_binaries("helm")["helm"], tmp_path_factory.mktemp("helm-home"))


def find(docs: list[dict], kind: str, name: str | None = None) -> list[dict]:
    return [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]


def one(docs: list[dict], kind: str, name: str) -> dict:
    found = find(docs, kind, name)
    assert len(found) == 1, (
        f"{kind} {name}: {len(found)} found in {[(d['kind'], d['metadata']['name']) for d in docs]}"
    )
    return found[0]


def committed(name: str) -> dict:
    return yaml.safe_load((FILES / name).read_text())


def scheduler_config_of(docs: list[dict], configmap: str) -> dict:
    return yaml.safe_load(one(docs, "ConfigMap", configmap)["data"]["config.yaml"])


def rules(docs: list[dict], kind: str, name: str) -> list[dict]:
    return one(docs, kind, name)["rules"]


# --------------------------------------------------------------------------- no cluster


@pytest.mark.parametrize("name", sorted(RENDERED))
def test_committed_scheduler_configs_are_what_render_writes(name: str, tmp_path: Path) -> None:
    """files/ holds `stickypack render scheduler-config` output, byte for byte: one source of
    truth for the profiles. A change to stickypack.render must be rendered into the chart."""
    out = tmp_path / name
    assert cli_main(["render", "scheduler-config", *RENDERED[name], "-o", str(out)]) == 0
    command = " ".join(
        ["stickypack render scheduler-config", *RENDERED[name], "-o", f"charts/stickypack/files/{name}"]
    )
    assert (FILES / name).read_text() == out.read_text(), (
        f"charts/stickypack/files/{name} differs from what stickypack renders now; regenerate it: {command}"
    )


def test_committed_routing_expression_is_renders() -> None:
    """files/routing-patch.cel, which every route of the chart uses, is
    stickypack.render.ROUTING_PATCH_EXPRESSION (and a newline): one expression for both."""
    assert (FILES / "routing-patch.cel").read_text() == ROUTING_PATCH_EXPRESSION + "\n", (
        "charts/stickypack/files/routing-patch.cel differs from "
        "stickypack.render.ROUTING_PATCH_EXPRESSION; write the constant (and a newline) into it"
    )


def test_scheduler_image_matches_the_tested_kubernetes_minor() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    tag = values["scheduler"]["image"]["tag"]
    pinned = pinned_versions()["K8S_VERSION"]
    assert tag.split(".")[:2] == pinned.split(".")[:2], f"scheduler.image.tag {tag} vs versions.env {pinned}"


def test_every_value_is_commented_and_in_the_schema() -> None:
    """Each key of values.yaml that the chart defines (not the free-form maps it passes on,
    like resources or extender.config) has a comment line right above it, and
    values.schema.json knows it (the schema forbids unknown keys)."""
    text = (CHART / "values.yaml").read_text()
    lines = text.splitlines()
    schema = json.loads((CHART / "values.schema.json").read_text())
    uncommented: list[str] = []

    def walk(node: yaml.Node, spec: dict, where: str) -> None:
        assert isinstance(node, yaml.MappingNode)
        for key_node, value_node in node.value:
            key = f"{where}{key_node.value}"
            assert key_node.value in spec["properties"], f"{key} is not in values.schema.json"
            line = key_node.start_mark.line
            if not lines[line - 1].strip().startswith("#"):
                uncommented.append(key)
            child = spec["properties"][key_node.value]
            if "properties" in child and isinstance(value_node, yaml.MappingNode) and value_node.value:
                walk(value_node, child, f"{key}.")

    walk(yaml.compose(text), schema, "")
    assert not uncommented, f"keys of values.yaml without a comment line above: {uncommented}"


def test_schema_knows_the_extenders_configuration_keys() -> None:
    """extender.config in the schema has the extender's keys (pydantic models), but listen
    (the chart's) and cluster.kubeconfig (in-cluster)."""
    schema = json.loads((CHART / "values.schema.json").read_text())
    config = schema["properties"]["extender"]["properties"]["config"]
    assert set(config["properties"]) == set(ExtenderConfig.model_fields) - {"listen"}
    for key, model in (("pods", PodsConfig), ("history", HistoryConfig), ("cluster", ClusterConfig)):
        expected = set(model.model_fields) - ({"kubeconfig"} if key == "cluster" else set())
        assert set(config["properties"][key]["properties"]) == expected, key


def test_lint_passes(helm: Helm) -> None:
    out = helm.run("lint", "--strict", str(CHART)).stdout
    assert "0 chart(s) failed" in out


def test_defaults_render_every_component_with_the_committed_configs(helm: Helm, tmp_path: Path) -> None:
    docs = helm.template()
    for doc in docs:
        assert doc["apiVersion"] and doc["kind"] in KINDS and doc["metadata"]["name"], doc
        assert doc["metadata"]["labels"]["app.kubernetes.io/instance"] == "stickypack"
    # the release named stickypack: the extender's Service is the URL committed in files/
    one(docs, "Service", "stickypack-extender")
    assert scheduler_config_of(docs, "stickypack-scheduler") == committed("scheduler-stickypack.yaml")
    assert scheduler_config_of(docs, "stickypack-build-scheduler") == committed(
        "scheduler-stickypack-builds.yaml"
    )
    # both schedulers: the official image, the pinned tag, in-cluster (no kubeconfig)
    for name in ("stickypack-scheduler", "stickypack-build-scheduler"):
        pod = one(docs, "Deployment", name)["spec"]["template"]["spec"]
        (container,) = pod["containers"]
        assert container["image"] == f"registry.k8s.io/kube-scheduler:{pinned_versions()['K8S_VERSION']}"
        assert "--config=/etc/stickypack/config.yaml" in container["command"]
        assert pod["serviceAccountName"] == "stickypack-scheduler"
        assert "clientConnection" not in scheduler_config_of(docs, name) or (
            "kubeconfig" not in scheduler_config_of(docs, name)["clientConnection"]
        )
    # the extender: its command, probes, metrics, and a configuration the extender accepts
    pod = one(docs, "Deployment", "stickypack-extender")["spec"]["template"]
    (container,) = pod["spec"]["containers"]
    assert container["command"] == ["stickypack", "extender", "--config", "/etc/stickypack/extender.yaml"]
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert pod["metadata"]["annotations"]["prometheus.io/scrape"] == "true"
    assert {
        "name": "POD_NAMESPACE",
        "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}},
    } in container["env"]
    config = yaml.safe_load(one(docs, "ConfigMap", "stickypack-extender")["data"]["extender.yaml"])
    assert (
        config["listen"] == {"host": "0.0.0.0", "port": 8888} and config["history"]["namespace"] == "binder"
    )
    path = tmp_path / "extender.yaml"
    path.write_text(yaml.safe_dump(config))
    assert cli_main(["extender", "--config", str(path), "--check"]) == 0
    # routing off, webhook absent
    assert not find(docs, "MutatingAdmissionPolicy")


def test_default_rbac_is_the_operator_guides_table(helm: Helm) -> None:
    docs = helm.template()
    bound = {
        d["roleRef"]["name"]: (d["kind"], d["metadata"].get("namespace"), d["subjects"])
        for d in docs
        if d["kind"] in ("ClusterRoleBinding", "RoleBinding")
    }
    scheduler = [{"kind": "ServiceAccount", "name": "stickypack-scheduler", "namespace": "binder"}]
    extender = [{"kind": "ServiceAccount", "name": "stickypack-extender", "namespace": "binder"}]
    assert bound == {
        "system:kube-scheduler": ("ClusterRoleBinding", None, scheduler),
        "system:volume-scheduler": ("ClusterRoleBinding", None, scheduler),
        "extension-apiserver-authentication-reader": ("RoleBinding", "kube-system", scheduler),
        "stickypack-extender": ("ClusterRoleBinding", None, extender),
        "stickypack-extender-history": ("RoleBinding", "binder", extender),
    }
    assert rules(docs, "ClusterRole", "stickypack-extender") == [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["list", "watch"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch"]},
    ]
    history = one(docs, "Role", "stickypack-extender-history")
    assert history["metadata"]["namespace"] == "binder"
    assert history["rules"] == [
        {
            "apiGroups": [""],
            "resources": ["configmaps"],
            "verbs": ["get", "list", "watch", "create", "update"],
        }
    ]
    assert not find(docs, "Role", "stickypack-scheduler-leases")  # one replica each: no election


def _names(docs: list[dict]) -> set[tuple[str, str]]:
    return {(d["kind"], d["metadata"]["name"]) for d in docs}


def test_each_component_toggles_on_its_own(helm: Helm) -> None:
    everything = _names(helm.template("routing.enabled=true"))

    no_schedulers = _names(helm.template("scheduler.enabled=false"))
    assert not {n for n in no_schedulers if "scheduler" in n[1]}
    assert ("Deployment", "stickypack-extender") in no_schedulers

    packing_only = helm.template("scheduler.builds.enabled=false")
    assert ("Deployment", "stickypack-scheduler") in _names(packing_only)
    assert ("Deployment", "stickypack-build-scheduler") not in _names(packing_only)
    assert ("ClusterRoleBinding", "stickypack-scheduler-kube-scheduler") in _names(packing_only)

    builds_only = _names(helm.template("scheduler.packing.enabled=false"))
    assert ("Deployment", "stickypack-build-scheduler") in builds_only
    assert ("Deployment", "stickypack-scheduler") not in builds_only

    none = _names(helm.template("scheduler.packing.enabled=false", "scheduler.builds.enabled=false"))
    assert not {n for n in none if "scheduler" in n[1]}

    external = "http://extender.elsewhere.svc:9000/x"
    no_extender = helm.template("extender.enabled=false", f"scheduler.builds.extenderURL={external}/")
    assert not {n for n in _names(no_extender) if "extender" in n[1]}
    (entry,) = scheduler_config_of(no_extender, "stickypack-build-scheduler")["extenders"]
    assert entry["urlPrefix"] == external  # the trailing slash cut, as render does

    routed = {n for n in everything if n[0].startswith("MutatingAdmissionPolicy")}
    assert routed == {
        ("MutatingAdmissionPolicy", "stickypack-route-to-stickypack-builds"),
        ("MutatingAdmissionPolicyBinding", "stickypack-route-to-stickypack-builds"),
    }
    assert everything - routed == _names(helm.template())


def test_builds_without_an_extender_is_a_clear_error(helm: Helm) -> None:
    done = helm.run("template", "x", str(CHART), "--set", "extender.enabled=false", check=False)
    assert done.returncode != 0
    assert "scheduler.builds needs an extender" in done.stderr


def test_replicas_turn_leader_election_and_its_lease_role_on(helm: Helm) -> None:
    docs = helm.template("scheduler.builds.replicas=2")
    builds = scheduler_config_of(docs, "stickypack-build-scheduler")
    assert builds["leaderElection"] == {
        **committed("scheduler-stickypack-builds.yaml")["leaderElection"],
        "leaderElect": True,
    }
    assert scheduler_config_of(docs, "stickypack-scheduler")["leaderElection"]["leaderElect"] is False
    role = one(docs, "Role", "stickypack-scheduler-leases")
    assert role["metadata"]["namespace"] == "kube-system"
    assert role["rules"] == [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "resourceNames": ["stickypack-builds-scheduler"],
            "verbs": ["get", "update"],
        },
    ]
    both = helm.template("scheduler.builds.replicas=2", "scheduler.packing.replicas=3")
    names = rules(both, "Role", "stickypack-scheduler-leases")[1]["resourceNames"]
    assert names == ["stickypack-scheduler", "stickypack-builds-scheduler"]
    assert one(both, "Deployment", "stickypack-scheduler")["spec"]["replicas"] == 3


@pytest.mark.parametrize(
    ("store", "node_verbs", "history_role"),
    [
        ("configmap", ["list", "watch"], True),
        ("node-annotations", ["get", "list", "watch", "patch"], False),
        ("memory", ["list", "watch"], False),
    ],
)
def test_history_store_decides_the_extenders_rights(
    helm: Helm, store: str, node_verbs: list[str], history_role: bool
) -> None:
    docs = helm.template(f"extender.config.history.store={store}", "extender.config.history.namespace=hist")
    assert rules(docs, "ClusterRole", "stickypack-extender")[0]["verbs"] == node_verbs
    roles = find(docs, "Role", "stickypack-extender-history")
    assert bool(roles) == history_role
    if history_role:
        assert roles[0]["metadata"]["namespace"] == "hist"
        assert one(docs, "RoleBinding", "stickypack-extender-history")["metadata"]["namespace"] == "hist"


def test_cluster_dra_grants_the_extender_the_dra_objects(helm: Helm) -> None:
    """Only with ``cluster.dra`` may the extender list and watch ResourceSlices and
    ResourceClaims (the operator guide's RBAC table); the setting reaches its configuration."""
    dra = {"apiGroups": ["resource.k8s.io"], "resources": ["resourceslices", "resourceclaims"],
           "verbs": ["list", "watch"]}  # fmt: skip
    for values, granted in (((), False), (("extender.config.cluster.dra=false",), False),
                            (("extender.config.cluster.dra=true",), True)):  # fmt: skip
        docs = helm.template(*values)
        assert (dra in rules(docs, "ClusterRole", "stickypack-extender")) == granted, values
    docs = helm.template("extender.config.cluster.dra=true")
    config = yaml.safe_load(one(docs, "ConfigMap", "stickypack-extender")["data"]["extender.yaml"])
    assert config["cluster"]["dra"] is True


def granted(docs: list[dict], namespace: str, account: str) -> frozenset[ApiRight]:
    """The rights the rendered roles bound to the ServiceAccount ``namespace/account`` give
    it, rule by rule expanded (a ClusterRole's through a ClusterRoleBinding: cluster-wide;
    a Role's: in its namespace)."""
    subject = {"kind": "ServiceAccount", "name": account, "namespace": namespace}
    out: frozenset[ApiRight] = frozenset()
    for binding in docs:
        if binding["kind"] not in ("ClusterRoleBinding", "RoleBinding") or subject not in binding["subjects"]:
            continue
        where = binding["metadata"].get("namespace")
        (role,) = [
            d
            for d in docs
            if d["kind"] == binding["roleRef"]["kind"]
            and d["metadata"]["name"] == binding["roleRef"]["name"]
            and d["metadata"].get("namespace") == where
        ]
        for rule in role["rules"]:
            assert "resourceNames" not in rule, rule  # not expanded here
            for group in rule["apiGroups"]:
                out |= rule_rights(group, rule["resources"], rule["verbs"], where)
    return out


def rendered_extender_config(docs: list[dict]) -> ExtenderConfig:
    text = one(docs, "ConfigMap", "stickypack-extender")["data"]["extender.yaml"]
    return ExtenderConfig.model_validate(yaml.safe_load(text))


@pytest.mark.parametrize("store", ["configmap", "node-annotations", "memory"])
@pytest.mark.parametrize("dra", [False, True])
def test_the_extenders_roles_grant_exactly_what_its_calls_need(helm: Helm, store: str, dra: bool) -> None:
    """In every configuration the chart renders for the extender, its roles grant the rights
    :func:`stickypack.extender.server.api_rights` lists for the calls the code makes with
    that configuration, and nothing else (that list is checked against the API server's audit
    log of a running extender by :func:`test_the_extenders_calls_are_the_charts_rights`)."""
    for sets in ((), ("extender.config.history.namespace=hist",)):
        docs = helm.template(
            f"extender.config.history.store={store}", f"extender.config.cluster.dra={str(dra).lower()}", *sets
        )
        config = rendered_extender_config(docs)
        assert (config.history.store, config.cluster.dra) == (store, dra)
        need = api_rights(config)
        assert granted(docs, "binder", "stickypack-extender") == need, (sets, sorted(need))


def test_extender_settings_reach_its_configuration(helm: Helm) -> None:
    docs = helm.template(
        "extender.port=9999",
        "extender.config.filters={ScaleDownAware,DelayForLocality}",
        "extender.files.mine\\.yaml=name: mine",
        "scheduler.builds.extenderWeight=20",
        "extender.service.port=80",
    )
    data = one(docs, "ConfigMap", "stickypack-extender")["data"]
    config = yaml.safe_load(data["extender.yaml"])
    assert config["listen"]["port"] == 9999
    assert config["filters"] == ["ScaleDownAware", "DelayForLocality"]
    assert data["mine.yaml"] == "name: mine"
    (container,) = one(docs, "Deployment", "stickypack-extender")["spec"]["template"]["spec"]["containers"]
    assert container["ports"] == [{"name": "http", "containerPort": 9999}]
    (entry,) = scheduler_config_of(docs, "stickypack-build-scheduler")["extenders"]
    assert entry["weight"] == 20 and entry["urlPrefix"] == "http://stickypack-extender:80"
    assert one(docs, "Service", "stickypack-extender")["spec"]["ports"][0]["port"] == 80


#: Chart routes with placements, in the shapes RoutePlacement.from_dict normalises: every
#: part; preferred terms only; required terms only; tolerations only (the operator left out,
#: empty key, value and effect, tolerationSeconds 0, negative and the largest a policy
#: carries); parts that are empty or null (no placement: empty lists).
PLACED_ROUTES: list[dict] = [
    {
        "schedulerName": "full",
        "selector": {"placed": "full"},
        "node_affinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": "hub.jupyter.org/node-purpose", "operator": "In", "values": ["user"]},
                            {"key": "gpu", "operator": "DoesNotExist", "values": []},
                        ],
                        "matchFields": [],
                    },
                    {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["node-1"]}]},
                ]
            },
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 100,
                    "preference": {"matchExpressions": [{"key": "size", "operator": "Gt", "values": ["4"]}]},
                }
            ],
        },
        "tolerations": [
            {
                "key": "hub.jupyter.org/dedicated",
                "operator": "Equal",
                "value": "user",
                "effect": "NoSchedule",
            },
            {"key": "drain", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60},
        ],
    },
    {
        "schedulerName": "preferred-only",
        "selector": {"placed": "preferred"},
        "namespace": "binder",
        "node_affinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 1,
                    "preference": {
                        "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n.1"]}]
                    },
                },
                {
                    "weight": 7,
                    "preference": {
                        "matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["a", "b"]}]
                    },
                },
            ]
        },
        "tolerations": None,
    },
    {
        "schedulerName": "required-only",
        "selector": {"placed": "required"},
        "node_affinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "example.org/pool", "operator": "Exists"}]}
                ]
            },
            "preferredDuringSchedulingIgnoredDuringExecution": [],
        },
    },
    {
        "schedulerName": "tolerations-only",
        "selector": {"placed": "tolerations"},
        "tolerations": [
            {"key": "a"},
            {"operator": "Exists"},
            {"key": "b", "operator": "Equal", "value": "", "effect": ""},
            {"key": "c", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 0},
            {"key": "d", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": -5},
            {"key": "e", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 2**53 - 1},
            {"key": "f", "value": "A-._z0", "effect": "PreferNoSchedule"},
        ],
    },
    {"schedulerName": "empty-parts", "selector": {"placed": "empty"}, "node_affinity": {}, "tolerations": []},
    {
        "schedulerName": "null-parts",
        "selector": {"placed": "null"},
        "node_affinity": None,
        "tolerations": None,
    },
]


def _routing_docs(helm: Helm, routes: list[dict]) -> list[dict]:
    """The chart's routing objects for these routes, without the chart's labels."""
    docs = helm.template(values={"routing": {"enabled": True, "routes": routes}})
    docs = [d for d in docs if d["kind"].startswith("MutatingAdmissionPolicy")]
    for doc in docs:
        assert doc["metadata"].pop("labels")["app.kubernetes.io/component"] == "routing"
    return docs


def _rendered_routing(route: dict) -> list[dict]:
    """What `stickypack render scheduler-routing` writes for a chart route."""
    placement = RoutePlacement.from_dict(route.get("node_affinity"), route.get("tolerations"))
    return scheduler_routing(route["schedulerName"], route["selector"], route.get("namespace"), placement)


def test_routing_is_what_render_scheduler_routing_writes(helm: Helm) -> None:
    """Each route's policy and binding are what ``scheduler_routing`` returns, with the
    route's placement (RoutePlacement.from_dict of its node_affinity and tolerations): the
    fixed expression and the same variables, character for character, the route name (the
    policy's name, which the pods' annotation carries) among them; a route without a
    placement has empty lists."""
    routes = [
        {
            "schedulerName": "stickypack-builds",
            "selector": {"component": "binderhub-build"},
            "namespace": "binder",
        },
        {"schedulerName": "stickypack", "selector": {"app.kubernetes.io/component": "dask-worker", "a": "b"}},
        *PLACED_ROUTES,
    ]
    docs = _routing_docs(helm, routes)
    expected = [doc for route in routes for doc in _rendered_routing(route)]

    def key(doc: dict) -> tuple[str, str]:
        return doc["kind"], doc["metadata"]["name"]

    assert sorted(docs, key=key) == sorted(expected, key=key)  # helm orders objects by kind
    policies = [d for d in docs if d["kind"] == "MutatingAdmissionPolicy"]
    variables = {
        d["metadata"]["name"]: {v["name"]: v["expression"] for v in d["spec"]["variables"]} for d in policies
    }
    assert all(v["routeName"] == _cel(name) for name, v in variables.items())
    placed = {
        name
        for name, v in variables.items()
        if (v["requiredTerms"], v["preferredTerms"], v["tolerations"]) != ("[]",) * 3
    }
    assert placed == {
        f"stickypack-route-to-{name}"
        for name in ("full", "preferred-only", "required-only", "tolerations-only")
    }


def _helm_md_values_files() -> list[dict]:
    """The values files docs/helm.md shows (its ```yaml blocks), as written there."""
    text = (REPO / "docs" / "helm.md").read_text()
    return [yaml.safe_load(block) for block in re.findall(r"```yaml\n(.*?)```", text, re.DOTALL)]


def test_helm_mds_values_files_render_what_they_say(helm: Helm) -> None:
    """Each values file of docs/helm.md, passed with ``-f``: the routing ones give each route
    the policy and binding ``stickypack render scheduler-routing`` writes for it (the z2jh
    example's placement included), the webhook's gives one webhook entry per route, in
    order, and a ``webhook.yaml`` that ``stickypack webhook`` loads with those routes."""
    files = _helm_md_values_files()
    assert [sorted(f) for f in files] == [["routing"], ["routing"], ["webhook"]]
    for values in files[:2]:
        routes = values["routing"]["routes"]
        docs = [d for d in helm.template(values=values) if d["kind"].startswith("MutatingAdmissionPolicy")]
        for doc in docs:
            doc["metadata"].pop("labels")
        expected = [doc for route in routes for doc in _rendered_routing(route)]
        assert sorted(docs, key=lambda d: (d["kind"], d["metadata"]["name"])) == sorted(
            expected, key=lambda d: (d["kind"], d["metadata"]["name"])
        )
    assert _rendered_routing(files[1]["routing"]["routes"][0]) != _rendered_routing(
        {k: v for k, v in files[1]["routing"]["routes"][0].items() if k in ("schedulerName", "selector")}
    )  # the placement is in the policy
    docs = helm.template(values=files[2])
    routes = files[2]["webhook"]["config"]["routes"]
    mwc = one(docs, "MutatingWebhookConfiguration", "stickypack-scheduler-routing")
    assert [w["name"] for w in mwc["webhooks"]] == [f"{r['name']}.routing.stickypack.io" for r in routes]
    webhook_yaml = one(docs, "ConfigMap", "stickypack-webhook")["data"]["webhook.yaml"]
    loaded = config_from_dict(yaml.safe_load(webhook_yaml), "webhook.yaml")
    assert [(r.name, r.scheduler_name) for r in loaded.routes] == [
        (r["name"], r.get("scheduler_name", "stickypack")) for r in routes
    ]


#: Strings the chart's CEL literals must write as _cel does: quotes, backslashes, what Go's
#: JSON encoder escapes (U+2028, U+2029, control characters) or might (<, >, &), non-ASCII.
CEL_STRINGS = [
    'q"uote',
    "back\\slash\\",
    "line\u2028sep\u2029",
    "emoji \U0001f600 and \u00e9",
    "ctl\x01\x08\x0c\x1f\x7f",
    "tab\tnl\ncr\r",
    "html <a href='x'>&amp;</a>",
    "\\u0041 not an escape",
    "",
]


def _cel_chart(tmp_path: Path) -> Path:
    """A copy of the chart with one more template: the stickypack.cel literal of each value
    of ``cel``, base64 (YAML takes no control characters), without the schema (the values
    are free)."""
    import shutil

    chart = tmp_path / "chart"
    shutil.copytree(CHART, chart)
    (chart / "values.schema.json").unlink()
    (chart / "templates" / "cel-test.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cel-test}\ndata:\n"
        "{{- range $key, $value := .Values.cel }}\n"
        '  {{ $key }}: {{ include "stickypack.cel" $value | b64enc }}\n'
        "{{- end }}\n"
    )
    return chart


def test_the_charts_cel_literals_are_cels(helm: Helm, tmp_path: Path) -> None:
    """The chart's stickypack.cel template writes what stickypack.render._cel writes, for
    strings of every kind (quotes, backslashes, escapes), nested maps (keys sorted), lists,
    integers (read by Helm as float64, up to 2**53 - 1), booleans and null; a fraction or an
    integer beyond 2**53 - 1 fails."""
    values = {
        "strings": CEL_STRINGS,
        "map": {"z": {"b": [1, -2, 0], "a": None}, "A": True, "m": False, 'k"ey': "v"},
        "edge": [2**53 - 1, -(2**53 - 1), {}, []],
        "nested": PLACED_ROUTES[0],
    }
    chart = _cel_chart(tmp_path)
    out = helm.run(
        "template",
        "x",
        str(chart),
        "--show-only",
        "templates/cel-test.yaml",
        "-f",
        str(helm.values_file({"cel": values})),
    )
    data = yaml.safe_load(out.stdout)["data"]
    assert {key: _b64(text) for key, text in data.items()} == {
        key: _cel(value) for key, value in values.items()
    }
    for bad, message in ((1.5, "1.5: not an integer"), (2**53, "not an integer within")):
        done = helm.run(
            "template", "x", str(chart), "-f", str(helm.values_file({"cel": {"bad": bad}})), check=False
        )
        assert done.returncode != 0 and message in done.stderr, done.stderr


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("scheduler.packing.replicas=-1", "at '/scheduler/packing/replicas': minimum: got -1, want 0"),
        ("extender.replicas=-2", "at '/extender/replicas': minimum: got -2, want 0"),
        ("scheduler.replica=2", "at '/scheduler': additional properties 'replica' not allowed"),
        ("extender.config.history.store=etcd", "at '/extender/config/history/store': value must be one of"),
        (
            "extender.config.listen.port=1",
            "at '/extender/config': additional properties 'listen' not allowed",
        ),
        ("scheduler.builds.extenderURL=https://x:1", "'https://x:1' does not match pattern"),
        ("extender.port=70000", "at '/extender/port': maximum: got 70,000, want 65,535"),
        ("routing.routes[0].schedulerName=Bad_Name", "at '/routing/routes/0'"),
        ("scheduler.logLevel=loud", "at '/scheduler/logLevel': got string, want integer"),
        (
            "webhook.config.routes[0].tolerations[0].operator=Maybe",
            "at '/webhook/config/routes/0/tolerations/0/operator'",
        ),
        (
            "webhook.config.routes[0].node_affinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight=0",
            "at '/webhook/config/routes/0/node_affinity/preferredDuringSchedulingIgnoredDuringExecution/0'",
        ),
        (  # Helm reads the number as float64, exact to 2**53 only; a policy's patch carries no more
            ",".join(
                f"routing.routes[0].tolerations[0].{setting}"
                for setting in (
                    "key=a",
                    "operator=Exists",
                    "effect=NoExecute",
                    "tolerationSeconds=9007199254740992",
                )
            ),
            "at '/routing/routes/0/tolerations/0/tolerationSeconds': maximum",
        ),
        (  # the webhook's routes share the definition (Helm would round the seconds)
            ",".join(
                f"webhook.config.routes[0].tolerations[0].{setting}"
                for setting in (
                    "key=a",
                    "operator=Exists",
                    "effect=NoExecute",
                    "tolerationSeconds=-9007199254740992",
                )
            ),
            "at '/webhook/config/routes/0/tolerations/0/tolerationSeconds': minimum",
        ),
        ("routing.routes[0].tolerations[0].operator=Maybe", "at '/routing/routes/0/tolerations/0/operator'"),
        ("monitoring.serviceMonitor.interval=30 seconds", "at '/monitoring/serviceMonitor/interval'"),
        ("monitoring.prometheusRule.latencyP99Seconds=0", "at '/monitoring/prometheusRule/latencyP99"),
        ("monitoring.prometheusRule.for=5m", "at '/monitoring/prometheusRule': additional properties 'for'"),
        ("monitoring.grafanaDashboard.namespace=Bad_NS", "at '/monitoring/grafanaDashboard/namespace'"),
        ("routing.routes[0].node_affinty.x=1", "additional properties 'node_affinty' not allowed"),
        (
            "routing.routes[0].node_affinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight=0",
            "at '/routing/routes/0/node_affinity/preferredDuringSchedulingIgnoredDuringExecution/0/weight'",
        ),
        (  # the API server validates a matchFields value as a node name
            ",".join(
                "webhook.config.routes[0].node_affinity.requiredDuringSchedulingIgnoredDuringExecution"
                f".nodeSelectorTerms[0].matchFields[0].{setting}"
                for setting in ("key=metadata.name", "operator=In", "values[0]=Not_A_Node")
            ),
            "at '/webhook/config/routes/0/node_affinity/requiredDuringSchedulingIgnoredDuringExecution/"
            "nodeSelectorTerms/0/matchFields/0/values/0'",
        ),
    ],
)
def test_bad_values_fail_with_a_schema_error_naming_the_key(helm: Helm, setting: str, message: str) -> None:
    done = helm.run("template", "x", str(CHART), "--set", setting, check=False)
    assert done.returncode != 0
    assert "values don't meet the specifications of the schema" in done.stderr
    assert message in done.stderr, done.stderr


@pytest.mark.parametrize(
    ("placement", "message"),
    [
        (  # RoutePlacement.from_dict refuses a term of empty lists as it refuses {}
            {
                "node_affinity": {
                    REQUIRED: {"nodeSelectorTerms": [{"matchExpressions": [], "matchFields": []}]}
                }
            },
            f"at '/routing/routes/0/node_affinity/{REQUIRED}/nodeSelectorTerms/0'",
        ),
        (
            {"node_affinity": {PREFERRED: [{"weight": 1, "preference": {"matchFields": []}}]}},
            f"at '/routing/routes/0/node_affinity/{PREFERRED}/0/preference'",
        ),
        ({"node_affinity": {REQUIRED: {"nodeSelectorTerms": []}}}, "minItems: got 0, want 1"),
        (
            {"tolerations": [{"key": "a", "effect": "NoSchedule", "tolerationSeconds": 5}]},
            "at '/routing/routes/0/tolerations/0/effect'",
        ),
        (
            {"tolerations": [{"key": "a", "operator": "Exists", "value": "v"}]},
            "at '/routing/routes/0/tolerations/0",
        ),
        ({"tolerations": [{"value": "v"}]}, "missing property 'key'"),
        (
            {"tolerations": [{"key": "a", "effect": "NoExecute", "tolerationSeconds": 1.5}]},
            "at '/routing/routes/0/tolerations/0/tolerationSeconds': got number, want integer",
        ),
    ],
)
def test_bad_routing_placements_fail_with_a_schema_error_naming_the_key(
    helm: Helm, placement: dict, message: str
) -> None:
    """A routing route's node_affinity and tolerations are checked by the webhook routes'
    definitions: what RoutePlacement.from_dict would refuse fails before any template runs."""
    route = {"schedulerName": "s", "selector": {"a": "b"}, **placement}
    values = helm.values_file({"routing": {"enabled": True, "routes": [route]}})
    done = helm.run("template", "x", str(CHART), "-f", str(values), check=False)
    assert done.returncode != 0
    assert "values don't meet the specifications of the schema" in done.stderr
    assert message in done.stderr, done.stderr
    with pytest.raises(SelectorError):  # the same placement, refused by the webhook's code
        RoutePlacement.from_dict(placement.get("node_affinity"), placement.get("tolerations"))


def test_duplicate_routes_fail_clearly(helm: Helm, tmp_path: Path) -> None:
    values = tmp_path / "v.yaml"
    route = {"schedulerName": "stickypack", "selector": {"a": "b"}}
    values.write_text(yaml.safe_dump({"routing": {"enabled": True, "routes": [route, route]}}))
    done = helm.run("template", "x", str(CHART), "-f", str(values), check=False)
    assert done.returncode != 0 and "two routes name schedulerName stickypack" in done.stderr


# --------------------------------------------------------------------------- the webhook (helm template)

#: Routes exercising every pod_selector form the chart translates (a string with spaces and
#: empty parts, matchLabels with matchExpressions, namespaces, another scheduler).
WEBHOOK_ROUTES: list[dict] = [
    {
        "name": "builds",
        "scheduler_name": "stickypack-builds",
        "pod_selector": " component = binderhub-build ,, app=binder,",
        "namespaces": ["binder", "binder-staging"],
    },
    {
        "name": "workers",
        "pod_selector": {
            "matchLabels": {"app.kubernetes.io/component": "dask-worker"},
            "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["a", "b"]},
                {"key": "example.org/no-route", "operator": "DoesNotExist"},
            ],
        },
    },
    {
        "name": "only-expressions",
        "pod_selector": {"matchExpressions": [{"key": "x", "operator": "Exists"}]},
        "node_affinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": "hub.jupyter.org/node-purpose", "operator": "In", "values": ["user"]}
                        ]
                    },
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}]},
                ]
            },
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 50,
                    "preference": {"matchExpressions": [{"key": "size", "operator": "Gt", "values": ["4"]}]},
                }
            ],
        },
        "tolerations": [
            {
                "key": "hub.jupyter.org/dedicated",
                "operator": "Equal",
                "value": "user",
                "effect": "NoSchedule",
            },
            {"operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60},
        ],
    },
]


def _own_ca_pem() -> str:
    """The PEM of a CA of the user's own (webhook.tls.secretName mode)."""
    import trustme

    return trustme.CA().cert_pem.bytes().decode()


def _tls_values(mode: str, ca_pem: str) -> dict:
    return {
        "generated": {},
        "secret": {"secretName": "my-webhook-tls", "caBundle": ca_pem},
        "cert-manager": {
            "certManager": {"enabled": True, "issuerRef": {"name": "my-issuer", "kind": "ClusterIssuer"}}
        },
    }[mode]


def _render_webhook_config(
    tmp_path: Path, webhook_yaml: str, service: str, ca_pem: str | None, inject: str | None
) -> dict:
    """What `stickypack render webhook-config` writes for this webhook.yaml and Service."""
    config = tmp_path / "webhook.yaml"
    config.write_text(webhook_yaml)
    out = tmp_path / "webhook-config.yaml"
    args = ["render", "webhook-config", "--config", str(config), "--service", service, "-o", str(out)]
    if ca_pem is not None:
        (tmp_path / "ca.crt").write_text(ca_pem)
        args += ["--ca-bundle", str(tmp_path / "ca.crt")]
    if inject is not None:
        args += ["--inject-ca-from", inject]
    assert cli_main(args) == 0
    return yaml.safe_load(out.read_text())


def _b64(text: str) -> str:
    return base64.b64decode(text).decode()


def test_webhook_defaults_are_the_webhooks_own() -> None:
    """values.yaml's webhook.config is `stickypack webhook`'s default configuration (the two
    Dask routes, its limits), written out."""
    values = yaml.safe_load((CHART / "values.yaml").read_text())["webhook"]
    assert values["enabled"] is False and values["replicas"] == 2
    chart = config_from_dict(values["config"]).model_dump(exclude={"listen", "tls"})
    assert chart == WebhookConfig().model_dump(exclude={"listen", "tls"})
    assert set(values["config"]) == set(WebhookConfig.model_fields) - {"listen", "tls"}


def test_schema_knows_the_webhook_routes_keys() -> None:
    """A webhook route in the schema has the keys of a route of webhook.yaml (pydantic)."""
    schema = json.loads((CHART / "values.schema.json").read_text())
    route = schema["properties"]["webhook"]["properties"]["config"]["properties"]["routes"]["items"]
    assert set(route["properties"]) == set(RouteConfig.model_fields)


def test_webhook_component_objects(helm: Helm, tmp_path: Path) -> None:
    """webhook.enabled adds exactly the webhook's objects; its Deployment runs the extender's
    image as the operator guide says, as restricted as the extender; its account has no
    token and no binding; its webhook.yaml is one `stickypack webhook` loads."""
    plain = helm.template()
    docs = helm.template("webhook.enabled=true")
    added = _names(docs) - _names(plain)
    assert added == {
        ("ServiceAccount", "stickypack-webhook"),
        ("ConfigMap", "stickypack-webhook"),
        ("Secret", "stickypack-webhook-tls"),
        ("Deployment", "stickypack-webhook"),
        ("PodDisruptionBudget", "stickypack-webhook"),
        ("Service", "stickypack-webhook"),
        ("MutatingWebhookConfiguration", "stickypack-scheduler-routing"),
    }
    assert _names(plain) <= _names(docs)
    for doc in docs:
        if (doc["kind"], doc["metadata"]["name"]) in added:
            assert doc["metadata"]["labels"]["app.kubernetes.io/component"] == "webhook"
    account = one(docs, "ServiceAccount", "stickypack-webhook")
    assert account["automountServiceAccountToken"] is False
    bound = [s for d in docs if d["kind"].endswith("Binding") for s in d["subjects"]]
    assert not [s for s in bound if s["name"] == "stickypack-webhook"]  # no RBAC at all
    deployment = one(docs, "Deployment", "stickypack-webhook")
    assert deployment["spec"]["replicas"] == 2
    pod = deployment["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "stickypack-webhook" and pod["automountServiceAccountToken"] is False
    (container,) = pod["containers"]
    extender_pod = one(docs, "Deployment", "stickypack-extender")["spec"]["template"]["spec"]
    (extender,) = extender_pod["containers"]
    assert container["image"] == extender["image"] == "stickypack:0.1.0"
    assert container["imagePullPolicy"] == extender["imagePullPolicy"]
    assert container["command"] == [
        "stickypack", "webhook", "--config", "/etc/stickypack/webhook.yaml",
        "--tls-cert", "/tls/tls.crt", "--tls-key", "/tls/tls.key",
    ]  # fmt: skip
    assert container["ports"] == [{"name": "https", "containerPort": 8443}]
    for probe, path in (("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")):
        assert container[probe]["httpGet"] == {"path": path, "port": "https", "scheme": "HTTPS"}
    assert container["securityContext"] == extender["securityContext"]
    assert pod["securityContext"] == extender_pod["securityContext"]
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes[mounts["/tls"]]["secret"] == {"secretName": "stickypack-webhook-tls"}
    assert volumes[mounts["/etc/stickypack"]]["configMap"] == {"name": "stickypack-webhook"}
    service = one(docs, "Service", "stickypack-webhook")["spec"]
    assert service["ports"] == [{"name": "https", "port": 443, "targetPort": "https"}]
    assert service["selector"] == deployment["spec"]["template"]["metadata"]["labels"]
    text = one(docs, "ConfigMap", "stickypack-webhook")["data"]["webhook.yaml"]
    (tmp_path / "webhook.yaml").write_text(text)
    config = load_config(tmp_path / "webhook.yaml")
    assert (config.listen.host, config.listen.port) == ("0.0.0.0", 8443)
    assert (config.tls.cert_file, config.tls.key_file) == ("/tls/tls.crt", "/tls/tls.key")
    assert [r.name for r in config.routes] == ["dask-gateway-workers", "dask-kubernetes-workers"]

    own = helm.template(
        "webhook.enabled=true",
        "webhook.image.repository=registry.example.org/hook",
        "webhook.image.tag=1.2",
        "webhook.image.pullPolicy=Always",
        "webhook.replicas=3",
    )
    hook = one(own, "Deployment", "stickypack-webhook")
    (container,) = hook["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "registry.example.org/hook:1.2" and container["imagePullPolicy"] == "Always"
    assert hook["spec"]["replicas"] == 3
    same = helm.template("webhook.enabled=true", "extender.image.repository=r/x", "extender.image.tag=v9")
    (container,) = one(same, "Deployment", "stickypack-webhook")["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "r/x:v9"


def test_webhook_config_changes_roll_the_pods(helm: Helm) -> None:
    def annotations(*sets: str) -> dict:
        docs = helm.template("webhook.enabled=true", *sets)
        return one(docs, "Deployment", "stickypack-webhook")["spec"]["template"]["metadata"]["annotations"]

    before, after = annotations(), annotations("webhook.config.log_level=debug")
    assert before["checksum/config"] != after["checksum/config"]
    # generated mode: the certificate's checksum too (a new certificate needs a restart)
    assert "checksum/tls" in before


@pytest.mark.parametrize(
    ("mode", "release", "namespace"),
    [
        ("generated", "stickypack", "binder"),
        ("secret", "hub", "team-a"),
        ("cert-manager", "stickypack", "sp"),
    ],
)
def test_webhook_configuration_is_what_render_writes(
    helm: Helm, tmp_path: Path, mode: str, release: str, namespace: str
) -> None:
    """In each TLS mode, the chart's MutatingWebhookConfiguration is, but for its labels,
    what `stickypack render webhook-config --config <the ConfigMap's webhook.yaml> --service
    <namespace>/<Service>:443` writes with the mode's CA (--ca-bundle of the generated
    Secret's ca.crt or of webhook.tls.caBundle; --inject-ca-from the Certificate). Mode
    cert-manager is checked here only: the test control plane has no cert-manager CRDs."""
    ca_pem = _own_ca_pem()
    values = {
        "webhook": {"enabled": True, "config": {"routes": WEBHOOK_ROUTES}, "tls": _tls_values(mode, ca_pem)}
    }
    lint = helm.run("lint", "--strict", str(CHART), "-f", str(helm.values_file(values)))
    assert "0 chart(s) failed" in lint.stdout
    docs = helm.template(values=values, release=release, namespace=namespace)
    fullname = "stickypack" if release == "stickypack" else f"{release}-stickypack"
    service = f"{fullname}-webhook"
    mwc = one(docs, "MutatingWebhookConfiguration", "stickypack-scheduler-routing")
    assert mwc["metadata"].pop("labels")["app.kubernetes.io/instance"] == release
    webhook_yaml = one(docs, "ConfigMap", f"{fullname}-webhook")["data"]["webhook.yaml"]
    secrets = find(docs, "Secret")
    pod = one(docs, "Deployment", f"{fullname}-webhook")["spec"]["template"]
    (tls_volume,) = [v for v in pod["spec"]["volumes"] if v["name"] == "tls"]
    if mode == "generated":
        (secret,) = secrets
        assert (
            secret["type"] == "kubernetes.io/tls" and secret["metadata"]["name"] == f"{fullname}-webhook-tls"
        )
        ca, inject = _b64(secret["data"]["ca.crt"]), None
        assert "checksum/tls" in pod["metadata"]["annotations"]
    elif mode == "secret":
        assert not secrets and not find(docs, "Certificate")  # the user's Secret
        ca, inject = ca_pem, None
        assert tls_volume["secret"]["secretName"] == "my-webhook-tls"
    else:
        assert not secrets  # cert-manager writes it
        ca, inject = None, f"{namespace}/{fullname}-webhook"
        certificate = one(docs, "Certificate", f"{fullname}-webhook")
        assert certificate["apiVersion"] == "cert-manager.io/v1"
        assert certificate["spec"] == {
            "secretName": f"{fullname}-webhook-tls",
            "dnsNames": [f"{service}.{namespace}.svc", f"{service}.{namespace}.svc.cluster.local"],
            "duration": "2160h",
            "issuerRef": {"name": "my-issuer", "kind": "ClusterIssuer", "group": "cert-manager.io"},
        }
        assert tls_volume["secret"]["secretName"] == certificate["spec"]["secretName"]
    rendered = _render_webhook_config(tmp_path, webhook_yaml, f"{namespace}/{service}:443", ca, inject)
    assert mwc == rendered
    # the placement reaches the webhook's configuration as given
    placed = config_from_dict(yaml.safe_load(webhook_yaml)).scheduler_routes()[2].placement
    assert placed == RoutePlacement.from_dict(
        WEBHOOK_ROUTES[2]["node_affinity"], WEBHOOK_ROUTES[2]["tolerations"]
    )
    assert [w["name"] for w in mwc["webhooks"]] == [
        f"{r['name']}.routing.stickypack.io" for r in WEBHOOK_ROUTES
    ]
    # what the translation gave, spelled out (render's side is tested in tests/test_webhook.py)
    builds, workers, expressions = mwc["webhooks"]
    assert builds["objectSelector"] == {"matchLabels": {"component": "binderhub-build", "app": "binder"}}
    assert builds["namespaceSelector"]["matchExpressions"][0]["values"] == ["binder", "binder-staging"]
    assert (
        workers["objectSelector"] == WEBHOOK_ROUTES[1]["pod_selector"] and "namespaceSelector" not in workers
    )
    assert expressions["objectSelector"] == {"matchExpressions": [{"key": "x", "operator": "Exists"}]}


def test_generated_certificate_is_valid_for_the_service(helm: Helm) -> None:
    """`helm template` (no cluster: lookup finds nothing) generates a new CA each time; the
    certificate is for the Service's names, signed by the CA in the caBundle."""
    first = helm.template(
        "webhook.enabled=true", "webhook.tls.validityDays=30", release="hub", namespace="ns"
    )
    secret = one(first, "Secret", "hub-stickypack-webhook-tls")["data"]
    (entry, *_) = one(first, "MutatingWebhookConfiguration", "stickypack-scheduler-routing")["webhooks"]
    assert entry["clientConfig"]["caBundle"] == secret["ca.crt"]
    cert = _check_serving_certificate(
        secret, entry["clientConfig"]["caBundle"], "hub-stickypack-webhook.ns.svc"
    )
    lifetime = cert.not_valid_after_utc - cert.not_valid_before_utc
    assert 29 <= lifetime.days <= 31
    again = one(
        helm.template("webhook.enabled=true", release="hub", namespace="ns"),
        "Secret",
        "hub-stickypack-webhook-tls",
    )
    assert again["data"]["ca.crt"] != secret["ca.crt"]


def _check_serving_certificate(data: dict[str, str], ca_bundle: str, host: str) -> Any:
    """The Secret's tls.crt (base64 ``data``) chains to the CA of ``ca_bundle`` (base64 PEM),
    is a serving certificate for ``host`` and ``host.cluster.local``, valid now, and matches
    tls.key. Returns the certificate."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    from cryptography.x509.oid import ExtendedKeyUsageOID
    from cryptography.x509.verification import PolicyBuilder, Store

    cert = x509.load_pem_x509_certificate(base64.b64decode(data["tls.crt"]))
    authorities = x509.load_pem_x509_certificates(base64.b64decode(ca_bundle))
    for name in (host, f"{host}.cluster.local"):
        verifier = PolicyBuilder().store(Store(authorities)).build_server_verifier(x509.DNSName(name))
        chain = verifier.verify(cert, [])  # raises unless signed by the bundle's CA, valid for name, now
        assert chain[-1] in authorities
    with pytest.raises(x509.verification.VerificationError):
        PolicyBuilder().store(Store(authorities)).build_server_verifier(x509.DNSName(f"x{host}")).verify(
            cert, []
        )
    usage = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert ExtendedKeyUsageOID.SERVER_AUTH in usage
    key = serialization.load_pem_private_key(base64.b64decode(data["tls.key"]), password=None)
    assert key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    ) == cert.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return cert


def _one_route(pod_selector: Any, **route: Any) -> dict:
    return {"config": {"routes": [{"name": "d", "pod_selector": pod_selector, **route}]}}


ROUTE0 = "at '/webhook/config/routes/0"
PEM = "-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n"


@pytest.mark.parametrize(
    ("webhook", "message"),
    [
        (_one_route("a=b", name="Dask"), f"{ROUTE0}/name': 'Dask' does not match pattern"),
        (_one_route(""), f"{ROUTE0}/pod_selector': 'anyOf' failed"),
        (_one_route(" , "), f"{ROUTE0}/pod_selector': 'anyOf' failed"),
        (_one_route("a==b"), f"{ROUTE0}/pod_selector': 'anyOf' failed"),
        (
            _one_route({"matchLabels": {}}),
            f"{ROUTE0}/pod_selector/matchLabels': minProperties: got 0, want 1",
        ),
        (
            _one_route({"matchExpressions": [{"key": "a", "operator": "In"}]}),
            f"{ROUTE0}/pod_selector/matchExpressions/0': missing property 'values'",
        ),
        (
            _one_route({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]}),
            f"{ROUTE0}/pod_selector/matchExpressions/0/operator': value must be one of",
        ),
        (_one_route("a=b", namespaces=["Team"]), f"{ROUTE0}/namespaces/0': 'Team' does not match pattern"),
        ({"config": {"routes": []}}, "at '/webhook/config/routes': minItems: got 0, want 1"),
        ({"config": {"max_request_bytes": 10}}, "at '/webhook/config/max_request_bytes': minimum: got 10"),
        ({"config": {"listen": {"port": 1}}}, "at '/webhook/config': additional properties 'listen'"),
        ({"tls": {"secretName": "s", "caBundle": "LS0tLS1CRUdJTi"}}, "at '/webhook/tls/caBundle': 'anyOf'"),
        (
            {"tls": {"secretName": "s", "caBundle": PEM + "-----BEGIN PRIVATE KEY-----\n"}},
            "at '/webhook/tls/caBundle': 'not' failed",
        ),
        ({"replicas": -1}, "at '/webhook/replicas': minimum: got -1, want 0"),
        ({"image": {"pullPolicy": "Sometimes"}}, "at '/webhook/image/pullPolicy': value must be one of"),
    ],
)
def test_bad_webhook_values_fail_with_a_schema_error_naming_the_key(
    helm: Helm, webhook: dict, message: str
) -> None:
    values = helm.values_file({"webhook": {"enabled": True, **webhook}})
    done = helm.run("template", "x", str(CHART), "-f", str(values), check=False)
    assert done.returncode != 0
    assert "values don't meet the specifications of the schema" in done.stderr
    assert message in done.stderr, done.stderr


@pytest.mark.parametrize(
    ("webhook", "message"),
    [
        (
            {
                "config": {
                    "routes": [{"name": "d", "pod_selector": "a=b"}, {"name": "d", "pod_selector": "c=d"}]
                }
            },
            "two routes named d",
        ),
        (_one_route("a=b,a=c"), "a given twice with different values"),
        ({"tls": {"secretName": "mine"}}, "webhook.tls.secretName needs webhook.tls.caBundle"),
        ({"tls": {"caBundle": PEM}}, "webhook.tls.caBundle is for webhook.tls.secretName"),
        ({"tls": {"certManager": {"enabled": True}}}, "needs webhook.tls.certManager.issuerRef.name"),
        (
            {"tls": {"secretName": "s", "certManager": {"enabled": True, "issuerRef": {"name": "i"}}}},
            "not both",
        ),
    ],
)
def test_webhook_values_the_schema_cannot_check_fail_clearly(helm: Helm, webhook: dict, message: str) -> None:
    values = helm.values_file({"webhook": {"enabled": True, **webhook}})
    done = helm.run("template", "x", str(CHART), "-f", str(values), check=False)
    assert done.returncode != 0 and message in done.stderr, done.stderr


# --------------------------------------------------------------------------- the control plane


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _api_path(doc: dict, namespace: str) -> str:
    group_version, plural, namespaced = KINDS[doc["kind"]]
    base = "/api/v1" if group_version == "v1" else f"/apis/{group_version}"
    ns = doc["metadata"].get("namespace") or namespace
    return f"{base}/namespaces/{ns}/{plural}" if namespaced else f"{base}/{plural}"


def _request(
    cp: ControlPlane, method: str, path: str, body: Any = None, query: list | None = None
) -> tuple[int, Any]:
    """A raw API request as the admin: (HTTP status, JSON body)."""

    async def go(api: Any) -> tuple[int, Any]:
        resp = await api.call_api(
            path,
            method,
            query_params=query or [],
            header_params={"Accept": "application/json", "Content-Type": "application/json"},
            body=body,
            _preload_content=False,
        )
        try:
            raw = await resp.read()
        finally:
            resp.release()
        return resp.status, json.loads(raw or b"{}")

    return cp.call(go)


def _get(cp: ControlPlane, doc: dict, namespace: str) -> int:
    return _request(cp, "GET", f"{_api_path(doc, namespace)}/{doc['metadata']['name']}")[0]


def _access(
    cp: ControlPlane,
    user: str,
    verb: str,
    resource: str,
    namespace: str = "",
    name: str = "",
    group: str = "",
) -> bool:
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": user,
            "groups": ["system:serviceaccounts", "system:authenticated"],
            "resourceAttributes": {
                "verb": verb,
                "resource": resource,
                "group": group,
                "namespace": namespace,
                "name": name,
            },
        },
    }
    status, body = _request(cp, "POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", review)
    assert status == 201, body
    return bool(body["status"].get("allowed"))


@pytest.mark.controlplane
@pytest.mark.parametrize(
    ("sets", "webhook"),
    [
        ((), None),
        (("routing.enabled=true", "scheduler.builds.replicas=2", "scheduler.packing.replicas=2"), None),
        (("scheduler.enabled=false",), None),
        (("extender.enabled=false", "scheduler.builds.extenderURL=http://x:1"), None),
        (("extender.config.history.store=node-annotations", "extender.files.p\\.yaml=x"), None),
        ((), "generated"),
        ((), "secret"),
    ],
    ids=[
        "defaults",
        "routing-and-leader-election",
        "no-scheduler",
        "no-extender",
        "node-annotations",
        "webhook-generated-tls",
        "webhook-own-secret",
    ],
)
def test_the_api_server_accepts_every_object(
    controlplane: ControlPlane, helm: Helm, sets: tuple[str, ...], webhook: str | None
) -> None:
    """Each object of each variant, sent to the real API server as a dry run with strict
    field validation: a misspelt or misplaced field is an error, not silently dropped. (The
    webhook's cert-manager mode is not here: the control plane has no cert-manager CRDs.)"""
    values = None
    if webhook is not None:
        tls = _tls_values(webhook, _own_ca_pem())
        values = {"webhook": {"enabled": True, "config": {"routes": WEBHOOK_ROUTES}, "tls": tls}}
    docs = helm.template(*sets, namespace="default", values=values)
    assert docs
    if webhook is not None:
        assert find(docs, "MutatingWebhookConfiguration")
    for doc in docs:
        status, body = _request(
            controlplane,
            "POST",
            _api_path(doc, "default"),
            doc,
            [("dryRun", "All"), ("fieldValidation", "Strict")],
        )
        assert status == 201, f"{doc['kind']} {doc['metadata']['name']}: HTTP {status} {body.get('message')}"


@pytest.mark.controlplane
def test_the_api_server_accepts_the_placed_routes(controlplane: ControlPlane, helm: Helm) -> None:
    """The policies of :data:`PLACED_ROUTES` (a placement of each shape), sent as a dry run
    with strict field validation: the API server compiles the fixed expression with each
    route's variables."""
    docs = _routing_docs(helm, PLACED_ROUTES)
    assert len(docs) == 2 * len(PLACED_ROUTES)
    for doc in docs:
        query = [("dryRun", "All"), ("fieldValidation", "Strict")]
        status, body = _request(controlplane, "POST", _api_path(doc, "default"), doc, query)
        assert status == 201, f"{doc['kind']} {doc['metadata']['name']}: HTTP {status} {body.get('message')}"


@dataclass
class Installed:
    cp: ControlPlane
    helm: Helm
    namespace: str
    release: str
    extender_port: int
    route_label: dict[str, str]
    webhook_label: dict[str, str]
    manifest: list[dict]

    def configmap(self, name: str) -> dict:
        from kubernetes_asyncio import client

        cm = self.cp.call(lambda api: client.CoreV1Api(api).read_namespaced_config_map(name, self.namespace))
        return cm.data

    def kubeconfig(self, account: str) -> Path:
        return self.cp.service_account_kubeconfig(f"{self.release}-{account}", self.namespace)


#: The placement of the installed chart's routing route: a required term (ANDed with a
#: pod's own), a preferred term, two tolerations (one with tolerationSeconds, one with the
#: operator left out).
INSTALLED_ROUTE_PLACEMENT: dict[str, Any] = {
    "node_affinity": {
        REQUIRED: {
            "nodeSelectorTerms": [
                {
                    "matchExpressions": [
                        {"key": "hub.jupyter.org/node-purpose", "operator": "In", "values": ["user"]}
                    ]
                }
            ]
        },
        PREFERRED: [
            {"weight": 10, "preference": {"matchExpressions": [{"key": "gpu", "operator": "DoesNotExist"}]}}
        ],
    },
    "tolerations": [
        {"key": "hub.jupyter.org/dedicated", "value": "user", "effect": "NoSchedule"},
        {"key": "drain", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30},
    ],
}


@pytest.fixture(scope="module")
def installed(
    controlplane: ControlPlane, helm: Helm, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Installed]:
    """The chart installed with helm into a namespace of its own (release "stickypack"): the
    builds scheduler with two replicas (leader election) asking an extender on a loopback
    port, a route for pods with a label of this run (with :data:`INSTALLED_ROUTE_PLACEMENT`),
    and the webhook (generated TLS) with two
    routes for pods with another label of this run: one in this namespace only, to
    stickypack-builds ("key=value" selector), one with matchExpressions."""
    assert controlplane.kubeconfig is not None
    namespace = f"sp-helm-{uuid.uuid4().hex[:6]}"
    port = _free_port()
    # label values that begin with a letter: helm reads the values file as YAML 1.2, where a
    # bare hex string such as 1e345678 is a number, which PyYAML (YAML 1.1) writes unquoted
    route_label = {"stickypack-helm-test": f"r{uuid.uuid4().hex[:8]}"}
    webhook_label = {"stickypack-helm-webhook": f"w{uuid.uuid4().hex[:8]}"}
    ((key, value),) = webhook_label.items()
    webhook_routes = [
        {
            "name": "helm-test",
            "scheduler_name": "stickypack-builds",
            "pod_selector": f"{key}={value}",
            "namespaces": [namespace],
        },
        {
            "name": "helm-test-tiers",
            "pod_selector": {
                "matchLabels": webhook_label,
                "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}],
            },
        },
    ]
    values = tmp_path_factory.mktemp("values") / "values.yaml"
    values.write_text(
        yaml.safe_dump(
            {
                "scheduler": {"builds": {"replicas": 2, "extenderURL": f"http://127.0.0.1:{port}"}},
                "extender": {"config": {"history": {"flush_interval_s": 0.05}}},
                "routing": {
                    "enabled": True,
                    "routes": [
                        {
                            "schedulerName": "stickypack",
                            "selector": route_label,
                            "namespace": namespace,
                            **INSTALLED_ROUTE_PLACEMENT,
                        }
                    ],
                },
                "webhook": {"enabled": True, "config": {"routes": webhook_routes}},
            }
        )
    )
    release = "stickypack"
    helm.run(
        "install", release, str(CHART), "--namespace", namespace, "--create-namespace", "-f", str(values),
        kubeconfig=controlplane.kubeconfig,
    )  # fmt: skip
    manifest = helm.run(
        "get", "manifest", release, "--namespace", namespace, kubeconfig=controlplane.kubeconfig
    )
    docs = [d for d in yaml.safe_load_all(manifest.stdout) if d]
    try:
        yield Installed(controlplane, helm, namespace, release, port, route_label, webhook_label, docs)
    finally:
        helm.run(
            "uninstall", release, "--namespace", namespace, kubeconfig=controlplane.kubeconfig, check=False
        )


@pytest.mark.controlplane
def test_install_creates_every_object_with_the_committed_configs(installed: Installed) -> None:
    kinds = {d["kind"] for d in installed.manifest}
    assert kinds == set(KINDS), kinds  # every kind the chart has, with these values
    missing = [
        (d["kind"], d["metadata"]["name"])
        for d in installed.manifest
        if _get(installed.cp, d, installed.namespace) != 200
    ]
    assert not missing
    status = installed.helm.run(
        "status",
        installed.release,
        "--namespace",
        installed.namespace,
        "-o",
        "json",
        kubeconfig=installed.cp.kubeconfig,
    )
    assert json.loads(status.stdout)["info"]["status"] == "deployed"
    packing = yaml.safe_load(installed.configmap("stickypack-scheduler")["config.yaml"])
    assert packing == committed("scheduler-stickypack.yaml")
    builds = yaml.safe_load(installed.configmap("stickypack-build-scheduler")["config.yaml"])
    expected = committed("scheduler-stickypack-builds.yaml")
    expected["leaderElection"]["leaderElect"] = True  # two replicas
    expected["extenders"][0]["urlPrefix"] = f"http://127.0.0.1:{installed.extender_port}"
    assert builds == expected


def _scheduler_config(installed: Installed, configmap: str) -> dict:
    return yaml.safe_load(installed.configmap(configmap)["config.yaml"])


@pytest.mark.controlplane
def test_schedulers_run_with_the_charts_service_account_alone(
    installed: Installed, cluster: ControlPlane
) -> None:
    """kube-scheduler, authenticated by a token of the chart's scheduler ServiceAccount and
    nothing else, with the chart's configurations: both profiles bind pods, the builds
    scheduler holds its own Lease (leader election, two replicas), and its log shows no
    request refused (the authentication reader RoleBinding included)."""
    from kubernetes_asyncio import client

    kubeconfig = installed.kubeconfig("scheduler")
    cluster.create_node("n1", cpu="8", memory="32Gi")
    cluster.create_node("n2", cpu="8", memory="32Gi")
    packing = _scheduler_config(installed, "stickypack-scheduler")
    builds = _scheduler_config(installed, "stickypack-build-scheduler")
    handles = [
        cluster.start_scheduler(packing, kubeconfig=kubeconfig, timeout=30),
        cluster.start_scheduler(
            builds, kubeconfig=kubeconfig, leader_elect=builds["leaderElection"]["leaderElect"], timeout=30
        ),
    ]
    pods = [f"user-{i}" for i in range(3)]
    cluster.create_pods([{"metadata": {"name": n}, **_pod_spec("stickypack")} for n in pods])
    placed = cluster.wait_bound(pods, timeout=30)
    assert len(set(placed.values())) == 1  # the packing profile: one node
    build_pods = [f"build-{i}" for i in range(2)]
    cluster.create_pods([{"metadata": {"name": n}, **_pod_spec("stickypack-builds")} for n in build_pods])
    assert set(cluster.wait_bound(build_pods, timeout=30)) == set(build_pods)
    lease = cluster.call(
        lambda api: client.CoordinationV1Api(api).read_namespaced_lease(
            "stickypack-builds-scheduler", "kube-system"
        )
    )
    assert lease.spec.holder_identity.startswith(socket.gethostname() + "_")  # kube-scheduler's identity
    for handle in handles:
        log = handle.log_path.read_text()
        assert "forbidden" not in log, log[-3000:]
        assert "Unable to get configmap/extension-apiserver-authentication" not in log


def _pod_spec(scheduler: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "spec": {
            "schedulerName": scheduler,
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "main",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
                }
            ],
        },
    }


def _service_account(cp: ControlPlane, namespace: str, name: str) -> None:
    from kubernetes_asyncio import client

    cp.call(
        lambda api: client.CoreV1Api(api).create_namespaced_service_account(
            namespace, {"metadata": {"name": name}}
        )
    )


@pytest.mark.controlplane
def test_without_the_charts_bindings_the_scheduler_does_not_run(
    installed: Installed, cluster: ControlPlane
) -> None:
    """The rights come from the chart's bindings: an account without them cannot start the
    scheduler (its informers are refused), and one bound like the chart but without the
    authentication reader RoleBinding logs the error the operator guide quotes."""
    namespace = installed.namespace
    _service_account(cluster, namespace, "nobody")
    config = _scheduler_config(installed, "stickypack-scheduler")
    was_failed = cluster.failed
    with pytest.raises(ControlPlaneError, match="not healthy") as failed:
        cluster.start_scheduler(
            config, kubeconfig=cluster.service_account_kubeconfig("nobody", namespace), timeout=5
        )
    log = Path(re.search(r"log (/\S+\.log):", str(failed.value)).group(1)).read_text()  # type: ignore[union-attr]
    assert f'nodes is forbidden: User \\"system:serviceaccount:{namespace}:nobody\\"' in log
    cluster.failed = was_failed  # an expected failure: no reason to keep the logs

    _service_account(cluster, namespace, "no-reader")
    for role in ("system:kube-scheduler", "system:volume-scheduler"):
        binding = {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": f"{namespace}-no-reader-{role.split(':')[1]}"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [{"kind": "ServiceAccount", "name": "no-reader", "namespace": namespace}],
        }
        assert (
            _request(cluster, "POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", binding)[0]
            == 201
        )
    try:
        handle = cluster.start_scheduler(
            config, kubeconfig=cluster.service_account_kubeconfig("no-reader", namespace), timeout=30
        )
        cluster.create_node("n1")
        cluster.create_pod(pod={"metadata": {"name": "p"}, **_pod_spec("stickypack")})
        assert cluster.wait_bound(["p"], timeout=30) == {"p": "n1"}
        assert "Unable to get configmap/extension-apiserver-authentication" in handle.log_path.read_text()
    finally:
        for role in ("kube-scheduler", "volume-scheduler"):
            _request(
                cluster,
                "DELETE",
                f"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{namespace}-no-reader-{role}",
            )


def _extender_process(
    installed: Installed, tmp_path: Path, kubeconfig: Path
) -> tuple[subprocess.Popen, Callable[[str], tuple[int, str]]]:
    """`stickypack extender` with the chart's extender.yaml (from its ConfigMap), as the
    Deployment runs it, but on loopback and with a ServiceAccount's kubeconfig."""
    return _run_extender(
        installed.configmap("stickypack-extender")["extender.yaml"],
        kubeconfig,
        installed.namespace,
        installed.extender_port,
        tmp_path,
    )


def _run_extender(
    config_text: str, kubeconfig: Path, namespace: str, port: int, tmp_path: Path
) -> tuple[subprocess.Popen, Callable[[str], tuple[int, str]]]:
    """`stickypack extender` with the configuration ``config_text`` in ``namespace`` (its
    POD_NAMESPACE), on 127.0.0.1:``port``, connecting with ``kubeconfig``; its log in
    ``tmp_path/extender.log``. Returns the process and a GET of one of its paths."""
    config = tmp_path / "extender.yaml"
    config.write_text(config_text)
    log = tmp_path / "extender.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "stickypack.cli", "extender", "--config", str(config),
             "--kubeconfig", str(kubeconfig), "--host", "127.0.0.1", "--port", str(port)],
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            env={**os.environ, "POD_NAMESPACE": namespace, "NO_PROXY": "127.0.0.1,localhost",
                 "no_proxy": "127.0.0.1,localhost"},
        )  # fmt: skip

    def get(path: str) -> tuple[int, str]:
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        try:
            with opener.open(f"http://127.0.0.1:{port}{path}", timeout=2) as resp:
                return resp.status, resp.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()
        except OSError as exc:
            return 0, repr(exc)

    return proc, get


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


def _wait(predicate: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.1)


def _metrics(text: str) -> dict[str, float]:
    return {
        s.name + json.dumps(s.labels, sort_keys=True): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


@pytest.mark.controlplane
def test_extender_runs_with_the_charts_service_account_alone(
    installed: Installed, cluster: ControlPlane, tmp_path: Path
) -> None:
    """`stickypack extender` with the chart's configuration and a token of the chart's
    extender ServiceAccount: it becomes ready (nodes, pods and its history listed and
    watched), scores build pods for the chart's build scheduler (same account rights as
    in-cluster), and writes the build history ConfigMap (created, then updated)."""
    from kubernetes_asyncio import client

    for i in range(3):
        cluster.create_node(f"n{i}", cpu="8", memory="32Gi")
    proc, get = _extender_process(installed, tmp_path, installed.kubeconfig("extender"))
    try:
        _wait(lambda: proc.poll() is not None or get("/readyz")[0] == 200, 30, "extender /readyz")
        assert proc.poll() is None, (tmp_path / "extender.log").read_text()
        assert get("/healthz")[0] == 200
        builds = _scheduler_config(installed, "stickypack-build-scheduler")
        cluster.start_scheduler(builds, kubeconfig=installed.kubeconfig("scheduler"), timeout=30)
        repos = ["https://github.com/org/one", "https://github.com/org/two"]
        for i, repo in enumerate(repos):
            meta = {"name": f"build-{i}", "labels": {"component": "binderhub-build"}}
            pod = {
                "metadata": {**meta, "annotations": {"binder-repo": repo}},
                **_pod_spec("stickypack-builds"),
            }
            cluster.create_pod(pod=pod)
            node = cluster.wait_bound([f"build-{i}"], timeout=30)[f"build-{i}"]
            cluster.call(
                lambda api, i=i: client.CoreV1Api(api).delete_namespaced_pod(f"build-{i}", "default")
            )

            def stored(repo: str = repo, node: str = node) -> bool:
                try:
                    data = installed.configmap("stickypack-build-history-0")
                except Exception:
                    return False
                return node in json.loads(data["history.json"])["repos"].get(repo, {})

            _wait(stored, 20, f"{repo} recorded on {node}")
        samples = _metrics(get("/metrics")[1])
        assert samples["stickypack_extender_cache_nodes{}"] == 3
        decided = samples.get(
            'stickypack_extender_decisions_total{"managed": "true", "verb": "prioritize"}', 0
        )
        assert (
            decided
            + samples.get('stickypack_extender_decisions_total{"managed": "true", "verb": "filter"}', 0)
            >= 2
        )
        assert not any(
            v for k, v in samples.items() if k.startswith("stickypack_extender_history_write_errors")
        )
    finally:
        _stop(proc)
    log = (tmp_path / "extender.log").read_text()
    # "HTTP 403" as the extender logs a refusal (a bare "403" also matched a pid or a time)
    assert "HTTP 403" not in log and "forbidden" not in log.lower(), log[-3000:]


#: The audit policy of :func:`audited`: every request of a ServiceAccount, at Metadata level
#: (user, verb, objectRef, response code), and nothing else.
AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [{"level": "Metadata", "userGroups": ["system:serviceaccounts"]}, {"level": "None"}],
}


@pytest.fixture(scope="module")
def audited(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[ControlPlane, Path]]:
    """A control plane of its own whose API server writes an audit log (the path returned)
    of every ServiceAccount's requests (:data:`AUDIT_POLICY`): what a component's code asks
    of the API server, as the API server saw it."""
    needs_binaries()
    where = tmp_path_factory.mktemp("audit")
    policy = where / "audit-policy.yaml"
    policy.write_text(yaml.safe_dump(AUDIT_POLICY))
    log = where / "audit.log"
    cp = ControlPlane(apiserver_args=[f"--audit-policy-file={policy}", f"--audit-log-path={log}"])
    cp.start()
    try:
        yield cp, log
    finally:
        cp.stop(failed=cp.failed or request.session.testsfailed > 0)


def _audited_requests(log: Path, user: str) -> list[dict]:
    """The audit events of ``user``'s requests (one per stage logged)."""
    events = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    return [e for e in events if e["user"]["username"] == user]


def _right_of(event: dict) -> ApiRight:
    """The RBAC right an audited resource request needed."""
    ref = event.get("objectRef")
    assert ref is not None and not ref.get("subresource"), event["requestURI"]  # none expected
    return ApiRight(ref.get("apiGroup", ""), ref["resource"], event["verb"], ref.get("namespace"))


@pytest.mark.controlplane
@pytest.mark.parametrize(
    ("store", "dra"), [("configmap", True), ("node-annotations", False), ("memory", False)]
)
def test_the_extenders_calls_are_the_charts_rights(
    audited: tuple[ControlPlane, Path], helm: Helm, tmp_path: Path, store: str, dra: bool
) -> None:
    """The chart's extender RBAC (rendered for ``store`` and ``cluster.dra``) applied to a
    real API server, and `stickypack extender` run with a token of its ServiceAccount alone:
    it becomes ready (its informers listed and watching, its history loaded), records two
    builds and forgets a deleted node in its store, with no request refused; and what the
    API server's audit log shows it asked for is exactly what the chart grants and what
    :func:`stickypack.extender.server.api_rights` lists. A node changed after the extender
    read it makes its node-annotations write conflict, so the re-read (``get``) is used too."""
    from kubernetes_asyncio import client

    cp, audit_log = audited
    cp.reset()
    namespace = f"sp-rbac-{uuid.uuid4().hex[:6]}"
    release = f"r{uuid.uuid4().hex[:6]}"
    cp._core(lambda core: core.create_namespace({"metadata": {"name": namespace}}))
    docs = helm.template(
        f"extender.config.history.store={store}",
        f"extender.config.cluster.dra={str(dra).lower()}",
        namespace=namespace,
        release=release,
        values={"extender": {"config": {"history": {"flush_interval_s": 0.05}}}},
    )
    fullname = f"{release}-stickypack"
    account = f"{fullname}-extender"
    kinds = ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
    rbac = [d for d in docs if d["kind"] in kinds and "extender" in d["metadata"]["name"]]
    assert {d["kind"] for d in rbac} >= {"ServiceAccount", "ClusterRole", "ClusterRoleBinding"}
    for doc in rbac:
        status, body = _request(cp, "POST", _api_path(doc, namespace), doc)
        assert status == 201, body
    config_text = one(docs, "ConfigMap", f"{fullname}-extender")["data"]["extender.yaml"]
    config = ExtenderConfig.model_validate(yaml.safe_load(config_text))
    chart_grants = granted(docs, namespace, account)
    assert chart_grants == api_rights(config)
    for name in ("n0", "n1"):
        cp.create_node(name, cpu="8", memory="32Gi")
    proc, get = _run_extender(
        config_text, cp.service_account_kubeconfig(account, namespace), namespace, _free_port(), tmp_path
    )

    def metric(name: str) -> float:
        return _metrics(get("/metrics")[1]).get(name + "{}", -1.0)

    def build(i: int, node: str) -> None:
        repo = f"https://github.com/org/repo-{i}"
        meta = {"name": f"build-{i}", "labels": {"component": "binderhub-build"},
                "annotations": {"binder-repo": repo}}  # fmt: skip
        spec = _pod_spec("stickypack-builds")
        cp.create_pod(pod={**spec, "metadata": meta, "spec": {**spec["spec"], "nodeName": node}})
        cp._core(lambda core: core.delete_namespaced_pod(f"build-{i}", "default", grace_period_seconds=0))
        _wait(lambda: metric("stickypack_extender_builds_recorded_total") >= i + 1, 20, f"build {i} recorded")
        _wait(lambda: metric("stickypack_extender_history_pending_ops") == 0, 20, f"build {i} stored")

    try:
        _wait(lambda: proc.poll() is not None or get("/readyz")[0] == 200, 30, "extender /readyz")
        assert proc.poll() is None, (tmp_path / "extender.log").read_text()
        # n0 changed after the extender read it: a node-annotations write to it conflicts
        cp._core(lambda core: core.patch_node("n0", {"metadata": {"labels": {"touched": "yes"}}}))
        build(0, "n0")
        build(1, "n1")
        cp._core(lambda core: core.delete_node("n1"))
        _wait(lambda: metric("stickypack_extender_cache_nodes") == 1, 20, "n1 gone from the extender")
        _wait(lambda: metric("stickypack_extender_history_pending_ops") == 0, 20, "n1 forgotten")
        assert metric("stickypack_extender_history_write_errors_total") == 0
        if store == "configmap":
            cm = cp._core(lambda core: core.read_namespaced_config_map(f"{config.history.name}-0", namespace))
            stored = json.loads(cm.data["history.json"])
            assert set(stored["repos"]) == {"https://github.com/org/repo-0"}  # repo-1 forgotten with n1
            assert "n1" in stored["forgotten"]
        elif store == "node-annotations":
            node = cp._core(lambda core: core.read_node("n0"))
            stored = json.loads(node.metadata.annotations["stickypack.io/build-history"])
            assert set(stored) == {"https://github.com/org/repo-0"}
        else:
            assert metric("stickypack_extender_history_repos") == 1
    finally:
        _stop(proc)
    log = (tmp_path / "extender.log").read_text()
    assert proc.returncode == 0, log[-3000:]
    requests = _audited_requests(audit_log, f"system:serviceaccount:{namespace}:{account}")
    refused = [(e["verb"], e["requestURI"]) for e in requests if e["responseStatus"]["code"] in (401, 403)]
    assert not refused
    used = frozenset(_right_of(e) for e in requests)
    assert sorted(used) == sorted(chart_grants)
    cp._core(lambda core: core.delete_namespaced_service_account(account, namespace))
    rbac_api: Any = client.RbacAuthorizationV1Api
    cp.call(lambda api: rbac_api(api).delete_cluster_role_binding(account))
    cp.call(lambda api: rbac_api(api).delete_cluster_role(account))
    cp.reset()


@pytest.mark.controlplane
def test_without_the_charts_bindings_the_extender_is_never_ready(
    installed: Installed, cluster: ControlPlane, tmp_path: Path
) -> None:
    _service_account(cluster, installed.namespace, "no-rights")
    proc, get = _extender_process(
        installed, tmp_path, cluster.service_account_kubeconfig("no-rights", installed.namespace)
    )
    try:
        _wait(lambda: proc.poll() is not None or get("/readyz")[0] != 0, 30, "the extender to answer")
        log = tmp_path / "extender.log"
        refused = [f"{kind}: watch error HTTP 403: {kind} is forbidden" for kind in ("nodes", "pods")]
        _wait(lambda: all(r in log.read_text() for r in refused), 30, "both lists refused")
        status, body = get("/readyz")
        assert status == 503 and "nodes cache not synced" in body and "pods cache not synced" in body
    finally:
        _stop(proc)


@pytest.mark.controlplane
def test_the_accounts_have_no_right_beyond_the_table(installed: Installed) -> None:
    """The rights the operator guide's table grants, and nothing more (SubjectAccessReview)."""
    ns = installed.namespace
    scheduler = f"system:serviceaccount:{ns}:stickypack-scheduler"
    extender = f"system:serviceaccount:{ns}:stickypack-extender"
    webhook = f"system:serviceaccount:{ns}:stickypack-webhook"
    cp = installed.cp
    granted = [
        (extender, "list", "nodes", "", "", ""),
        (extender, "watch", "pods", "", "", ""),
        (extender, "update", "configmaps", ns, "stickypack-build-history-0", ""),
        (scheduler, "create", "bindings", "default", "", ""),
        (scheduler, "update", "leases", "kube-system", "stickypack-builds-scheduler", "coordination.k8s.io"),
        (scheduler, "get", "configmaps", "kube-system", "extension-apiserver-authentication", ""),
    ]
    refused = [
        (extender, "patch", "nodes", "", "n1", ""),  # configmap store: no node writes
        (extender, "get", "nodes", "", "n1", ""),  # it lists and watches them: no get
        (extender, "get", "pods", "default", "p", ""),
        (extender, "create", "configmaps", "default", "", ""),  # only in its history namespace
        (extender, "get", "secrets", ns, "", ""),
        (extender, "create", "bindings", "default", "", ""),
        (
            scheduler,
            "update",
            "leases",
            "kube-system",
            "stickypack-scheduler",
            "coordination.k8s.io",
        ),  # 1 replica
        (scheduler, "get", "secrets", ns, "", ""),
        (scheduler, "update", "configmaps", ns, "stickypack-build-history-0", ""),
        # the webhook reads nothing from the API server: not even its own objects
        (webhook, "get", "secrets", ns, "stickypack-webhook-tls", ""),
        (webhook, "get", "configmaps", ns, "stickypack-webhook", ""),
        (webhook, "list", "pods", "", "", ""),
        (webhook, "get", "mutatingwebhookconfigurations", "", "", "admissionregistration.k8s.io"),
    ]
    assert [_access(cp, *g) for g in granted] == [True] * len(granted)
    assert [_access(cp, *r) for r in refused] == [False] * len(refused)


@pytest.mark.controlplane
def test_routing_gives_labelled_pods_the_routes_scheduler(
    installed: Installed, cluster: ControlPlane
) -> None:
    """The installed route's policy gives a labelled pod of its namespace the route's
    scheduler, placement and annotation, as the webhook's :func:`route_pod` gives them for
    a route named like the policy (the same pod without the labels, admitted, then
    patched): a pod without affinity, tolerations or annotations, and one with a required
    term, tolerations (one the route's too, written with the operator left out) and
    annotations of its own. Elsewhere, pods are left alone."""
    deadline = time.monotonic() + 20
    for i in range(100):  # the API server picks a new policy up within a second or so
        probe = cluster.create_pod(
            pod={
                "metadata": {"name": f"probe-{i}", "labels": installed.route_label},
                **_pod_spec("default-scheduler"),
            },
            namespace=installed.namespace,
        )
        if probe["spec"]["schedulerName"] != "default-scheduler" or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert probe["spec"]["schedulerName"] == "stickypack"
    placement = RoutePlacement.from_dict(**INSTALLED_ROUTE_PLACEMENT)
    zone = {"key": "zone", "operator": "In", "values": ["a"]}
    node = {"key": "metadata.name", "operator": "In", "values": ["n1"]}
    own = _pod_spec("default-scheduler")
    own["spec"]["affinity"] = {
        "nodeAffinity": {
            REQUIRED: {"nodeSelectorTerms": [{"matchExpressions": [zone]}, {"matchFields": [node]}]}
        }
    }
    own["spec"]["tolerations"] = [
        {"key": "gpu", "operator": "Exists"},
        {"key": "hub.jupyter.org/dedicated", "value": "user", "effect": "NoSchedule"},
    ]
    own_annotations = {"example.org/owner": "\u00e9quipe \U0001f680", ROUTE_ANNOTATION: "stale"}
    placed = cluster.create_pod(
        pod={
            "metadata": {
                "name": "own-placement",
                "labels": installed.route_label,
                "annotations": own_annotations,
            },
            **own,
        },
        namespace=installed.namespace,
    )
    selector = LabelSelector.from_dict({"matchLabels": installed.route_label})
    route = SchedulerRoute(routing_policy_name("stickypack"), "stickypack", selector, placement=placement)
    for pod, sent, sent_annotations in (
        (probe, _pod_spec("default-scheduler"), None),
        (placed, own, own_annotations),
    ):
        name = f"unlabelled-{pod['metadata']['name']}"
        unlabelled = {**sent, "metadata": {"name": name, "annotations": sent_annotations}}
        base = cluster.dry_run_pod(unlabelled, namespace=installed.namespace)
        base["metadata"]["labels"] = dict(installed.route_label)
        expected = {"spec": base["spec"], "annotations": base["metadata"].get("annotations")}
        for op in route_pod([route], base, installed.namespace).patch:
            # each adds the whole /spec/<field>, the annotations, or the route's annotation
            if op["path"].startswith("/spec/"):
                expected["spec"][op["path"].removeprefix("/spec/")] = op["value"]
            elif op["path"] == "/metadata/annotations":
                expected["annotations"] = op["value"]
            else:
                assert op["path"] == "/metadata/annotations/stickypack.io~1scheduler-route"
                expected["annotations"][ROUTE_ANNOTATION] = op["value"]
        stored = {"spec": pod["spec"], "annotations": pod["metadata"].get("annotations")}
        assert stored == expected, pod["metadata"]["name"]
        assert pod["metadata"]["annotations"][ROUTE_ANNOTATION] == "stickypack-route-to-stickypack"
    assert placed["metadata"]["annotations"]["example.org/owner"] == own_annotations["example.org/owner"]
    # what the equality stands for, spelled out
    (route_term,) = placement.required_terms
    purpose = route_term["matchExpressions"][0]
    terms = placed["spec"]["affinity"]["nodeAffinity"][REQUIRED]["nodeSelectorTerms"]
    assert terms == [
        {"matchExpressions": [zone, purpose]},
        {"matchExpressions": [purpose], "matchFields": [node]},
    ]
    keys = [t.get("key") for t in placed["spec"]["tolerations"]]
    # the pod's own first (the dedicated one not repeated), the API server's defaults, the route's
    assert keys[:2] == ["gpu", "hub.jupyter.org/dedicated"] and keys[-1] == "drain"
    assert keys.count("hub.jupyter.org/dedicated") == 1
    elsewhere = cluster.create_pod(
        pod={
            "metadata": {"name": "elsewhere", "labels": installed.route_label},
            **_pod_spec("default-scheduler"),
        }
    )
    assert elsewhere["spec"]["schedulerName"] == "default-scheduler"  # the route's namespace only
    assert "affinity" not in elsewhere["spec"] and "annotations" not in elsewhere["metadata"]


# --------------------------------------------------------------------------- the webhook, installed

WEBHOOK_CONFIGURATION = {
    "kind": "MutatingWebhookConfiguration",
    "metadata": {"name": "stickypack-scheduler-routing"},
}


def _object(cp: ControlPlane, kind: str, name: str, namespace: str) -> dict:
    status, body = _request(cp, "GET", f"{_api_path({'kind': kind, 'metadata': {}}, namespace)}/{name}")
    assert status == 200, f"{kind} {name}: HTTP {status} {body.get('message')}"
    return body


def _text(cp: ControlPlane, path: str) -> str:
    """A non-JSON GET as the admin (the API server's /metrics)."""

    async def go(api: Any) -> str:
        resp = await api.call_api(path, "GET", header_params={"Accept": "text/plain"}, _preload_content=False)
        try:
            return (await resp.read()).decode()
        finally:
            resp.release()

    return cp.call(go)


def _fail_open_count(cp: ControlPlane, webhook: str) -> float:
    """kube-apiserver's apiserver_admission_webhook_fail_open_count for one webhook entry:
    the calls that failed and were ignored (failurePolicy Ignore)."""
    prefix, label = "apiserver_admission_webhook_fail_open_count{", f'name="{webhook}"'
    lines = _text(cp, "/metrics").splitlines()  # a plain scan: the full parse takes 0.5 s
    return sum(float(line.rsplit(" ", 1)[1]) for line in lines if line.startswith(prefix) and label in line)


def _installed_webhook(installed: Installed) -> tuple[dict, dict, str]:
    """The installed Secret's data, MutatingWebhookConfiguration and webhook.yaml."""
    cp, ns = installed.cp, installed.namespace
    secret = _object(cp, "Secret", "stickypack-webhook-tls", ns)
    config = _object(cp, "MutatingWebhookConfiguration", "stickypack-scheduler-routing", ns)
    return secret["data"], config, installed.configmap("stickypack-webhook")["webhook.yaml"]


@pytest.mark.controlplane
def test_installed_webhook_configuration_equals_renders_and_fails_open(
    installed: Installed, cluster: ControlPlane, tmp_path: Path
) -> None:
    """The API server holds the chart's MutatingWebhookConfiguration: every field `stickypack
    render webhook-config` writes for the installed webhook.yaml, Service and CA, as written
    (the API server adds its defaults). No webhook pod runs (no kubelet): the Service has no
    endpoints, the API server's call fails, and a pod a route matches is created unchanged
    (failurePolicy Ignore), within the entry's timeoutSeconds; the API server's fail-open
    counter for the entry shows it did call."""
    data, stored, webhook_yaml = _installed_webhook(installed)
    ns = installed.namespace
    assert stored["metadata"]["labels"]["app.kubernetes.io/instance"] == installed.release
    rendered = _render_webhook_config(
        tmp_path, webhook_yaml, f"{ns}/stickypack-webhook:443", _b64(data["ca.crt"]), None
    )
    assert len(stored["webhooks"]) == len(rendered["webhooks"]) == 2
    for got, want in zip(stored["webhooks"], rendered["webhooks"], strict=True):
        assert {key: got[key] for key in want} == want
    status, slices = _request(
        cluster,
        "GET",
        f"/apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices",
        query=[("labelSelector", "kubernetes.io/service-name=stickypack-webhook")],
    )
    assert status == 200 and not [e for s in slices["items"] for e in s.get("endpoints") or []]
    entry = "helm-test.routing.stickypack.io"
    timeout = stored["webhooks"][0]["timeoutSeconds"]
    before = _fail_open_count(cluster, entry)
    deadline = time.monotonic() + 20
    for i in range(100):  # the API server picks a new configuration up within a second or so
        start = time.monotonic()
        pod = cluster.create_pod(
            pod={
                "metadata": {"name": f"hooked-{i}", "labels": installed.webhook_label},
                **_pod_spec("default-scheduler"),
            },
            namespace=ns,
        )
        took = time.monotonic() - start
        assert pod["spec"]["schedulerName"] == "default-scheduler"
        assert "stickypack.io/scheduler-route" not in (pod["metadata"].get("annotations") or {})
        assert took < timeout + 2, f"creating a pod took {took:.1f} s (timeoutSeconds {timeout})"
        after = _fail_open_count(cluster, entry)
        if after > before or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert after > before, "the API server never called the webhook entry"


def _https(
    port: int,
    context: ssl.SSLContext,
    server_hostname: str,
    method: str,
    path: str,
    body: bytes | None = None,
) -> tuple[int, bytes]:
    """An HTTPS request to 127.0.0.1:``port`` that checks the certificate as the API server
    does for the Service: against ``context``'s CA, for ``server_hostname``."""
    with (
        socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
        context.wrap_socket(raw, server_hostname=server_hostname) as tls,
    ):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        conn.sock = tls  # already connected: HTTP over this TLS socket
        headers = {"Host": f"{server_hostname}:443", "Content-Type": "application/json"}
        conn.request(method, path, body=body, headers=headers)
        response = conn.getresponse()
        return response.status, response.read()


def _admission_review(pod: dict, namespace: str) -> bytes:
    return json.dumps(
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": str(uuid.uuid4()),
                "kind": {"group": "", "version": "v1", "kind": "Pod"},
                "resource": {"group": "", "version": "v1", "resource": "pods"},
                "operation": "CREATE",
                "namespace": namespace,
                "object": pod,
            },
        }
    ).encode()


@pytest.mark.controlplane
def test_the_webhook_serves_the_installed_certificate_and_configuration(
    installed: Installed, tmp_path: Path
) -> None:
    """`stickypack webhook` run as the Deployment runs it (its command, the installed
    ConfigMap's webhook.yaml, the installed Secret's tls.crt and tls.key), on loopback: a TLS
    client that trusts only the installed caBundle and checks the name
    stickypack-webhook.<namespace>.svc (what the API server checks) gets the JSON Patch
    for a pod the route matches; the certificate is refused for another name and by the
    system's trust roots. The generated certificate also checks out with cryptography."""
    data, stored, webhook_yaml = _installed_webhook(installed)
    ns = installed.namespace
    host = f"stickypack-webhook.{ns}.svc"
    ca_bundle = stored["webhooks"][0]["clientConfig"]["caBundle"]
    assert {w["clientConfig"]["caBundle"] for w in stored["webhooks"]} == {ca_bundle}
    _check_serving_certificate(data, ca_bundle, host)
    files = {"webhook.yaml": webhook_yaml.encode()}
    files |= {name: base64.b64decode(data[name]) for name in ("tls.crt", "tls.key")}
    for name, content in files.items():
        (tmp_path / name).write_bytes(content)
    port = _free_port()
    log = tmp_path / "webhook.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "stickypack.cli", "webhook", "--config", str(tmp_path / "webhook.yaml"),
             "--tls-cert", str(tmp_path / "tls.crt"), "--tls-key", str(tmp_path / "tls.key"),
             "--host", "127.0.0.1", "--port", str(port)],
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    trusted = ssl.create_default_context(cadata=_b64(ca_bundle))

    def ready() -> bool:
        if proc.poll() is not None:
            raise AssertionError(f"stickypack webhook exited {proc.returncode}: {log.read_text()}")
        try:
            return _https(port, trusted, host, "GET", "/readyz")[0] == 200
        except OSError:
            return False

    try:
        _wait(ready, 20, "stickypack webhook /readyz over TLS")
        assert _https(port, trusted, f"{host}.cluster.local", "GET", "/healthz")[0] == 200
        pod = {"metadata": {"name": "p", "labels": installed.webhook_label}, **_pod_spec("default-scheduler")}
        status, body = _https(port, trusted, host, "POST", "/mutate", _admission_review(pod, ns))
        assert status == 200, body
        response = json.loads(body)["response"]
        assert response["allowed"] is True and response["patchType"] == "JSONPatch"
        patch = json.loads(base64.b64decode(response["patch"]))
        assert patch == [
            {"op": "add", "path": "/spec/schedulerName", "value": "stickypack-builds"},
            {
                "op": "add",
                "path": "/metadata/annotations",
                "value": {"stickypack.io/scheduler-route": "helm-test"},
            },
        ]
        # the route is for this namespace only: the webhook itself leaves the pod elsewhere alone
        status, body = _https(port, trusted, host, "POST", "/mutate", _admission_review(pod, "elsewhere"))
        assert status == 200 and "patch" not in json.loads(body)["response"]
        with pytest.raises(ssl.SSLCertVerificationError, match=r"mismatch|not valid"):
            _https(port, trusted, f"other.{ns}.svc", "GET", "/readyz")
        with pytest.raises(ssl.SSLCertVerificationError, match="unable to get local issuer"):
            _https(port, ssl.create_default_context(), host, "GET", "/readyz")
    finally:
        _stop(proc)


@pytest.mark.controlplane
def test_upgrade_keeps_the_generated_certificate(installed: Installed) -> None:
    """`helm upgrade` finds the Secret (lookup) and keeps the CA and certificate, in the Secret,
    the caBundle and the pods' checksum/tls; a changed webhook.config changes checksum/config
    (the pods roll). `helm template`, where lookup finds nothing, would generate a new CA."""
    cp, ns = installed.cp, installed.namespace

    def annotations() -> dict:
        deployment = _object(cp, "Deployment", "stickypack-webhook", ns)
        return deployment["spec"]["template"]["metadata"]["annotations"]

    data, stored, _ = _installed_webhook(installed)
    before = annotations()
    installed.helm.run(
        "upgrade", installed.release, str(CHART), "--namespace", ns, "--reuse-values",
        "--set", "webhook.config.log_level=debug", kubeconfig=cp.kubeconfig,
    )  # fmt: skip
    data_after, stored_after, webhook_yaml = _installed_webhook(installed)
    after = annotations()
    assert data_after == data
    assert [w["clientConfig"]["caBundle"] for w in stored_after["webhooks"]] == [
        w["clientConfig"]["caBundle"] for w in stored["webhooks"]
    ]
    assert after["checksum/tls"] == before["checksum/tls"]
    assert yaml.safe_load(webhook_yaml)["log_level"] == "debug"
    assert after["checksum/config"] != before["checksum/config"]
    offline = installed.helm.template("webhook.enabled=true", namespace=ns)
    assert one(offline, "Secret", "stickypack-webhook-tls")["data"]["ca.crt"] != data["ca.crt"]


@pytest.mark.controlplane
def test_uninstall_removes_what_it_installed(installed: Installed) -> None:
    """Last in this file (the module's release is gone after it). The build history the
    extender wrote is not the chart's and stays; the cluster-wide webhook configuration
    goes (pods stop being sent to a webhook that is no more)."""
    cp = installed.cp
    assert _get(cp, WEBHOOK_CONFIGURATION, installed.namespace) == 200
    history = {"kind": "ConfigMap", "metadata": {"name": "stickypack-build-history-0"}}
    had_history = _get(cp, history, installed.namespace) == 200  # if the extender test wrote one
    assert not find(installed.manifest, "ConfigMap", "stickypack-build-history-0")
    installed.helm.run(
        "uninstall", installed.release, "--namespace", installed.namespace, kubeconfig=cp.kubeconfig
    )

    def gone() -> list[tuple[str, str]]:
        return [
            (d["kind"], d["metadata"]["name"])
            for d in installed.manifest
            if _get(cp, d, installed.namespace) != 404
        ]

    _wait(lambda: not gone(), 20, "the release's objects to go")
    assert _get(cp, WEBHOOK_CONFIGURATION, installed.namespace) == 404
    assert find(installed.manifest, "MutatingWebhookConfiguration", "stickypack-scheduler-routing")
    listed = installed.helm.run("list", "--namespace", installed.namespace, "-q", kubeconfig=cp.kubeconfig)
    assert listed.stdout.strip() == ""
    assert (_get(cp, history, installed.namespace) == 200) == had_history


def test_webhook_disruption_budget_only_with_replicas_to_spare(helm: Helm) -> None:
    """Two webhook pods get a PodDisruptionBudget that lets a drain take one at a time and
    selects exactly the Deployment's pods; one pod gets none (a budget would block the
    drain, and with it the autoscaler's scale-down); it can be switched off."""
    docs = helm.template("webhook.enabled=true")
    (budget,) = find(docs, "PodDisruptionBudget")
    deployment = one(docs, "Deployment", "stickypack-webhook")
    assert budget["spec"] == {
        "maxUnavailable": 1,
        "selector": {"matchLabels": deployment["spec"]["selector"]["matchLabels"]},
    }
    assert not find(helm.template("webhook.enabled=true", "webhook.replicas=1"), "PodDisruptionBudget")
    assert not find(
        helm.template("webhook.enabled=true", "webhook.podDisruptionBudget=false"), "PodDisruptionBudget"
    )
    assert not find(helm.template(), "PodDisruptionBudget")  # nothing else in the chart has one
