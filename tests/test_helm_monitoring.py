"""The chart's Prometheus Operator objects (``monitoring.*``): ServiceMonitors that select the
extender's and the webhook's Services, and a PrometheusRule whose alerts are checked and
unit-tested with the real ``promtool`` (``promtool check rules``, ``promtool test rules``:
each alert fires on the series it is about, at the time its ``for`` says, and not on
healthy ones), whose metric names the real extender and webhook export, and whose objects
the real API server accepts with the real prometheus-operator CRDs installed.

helm and promtool are built by ``tools/k8s/build.sh`` (the CRDs fetched there too): with
``CI=true`` a missing one fails the tests, otherwise they are skipped.
"""

from __future__ import annotations

import json
import re
import ssl
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from conftest import missing, needs_binaries
from stickypack.testing import ControlPlane, binaries_dir
from test_helm_chart import CHART, WEBHOOK_ROUTES, Helm, _own_ca_pem, _request, _tls_values, find, helm, one

__all__ = ["helm"]  # the fixture, shared with test_helm_chart

ON = ("monitoring.serviceMonitor.enabled=true", "monitoring.prometheusRule.enabled=true")
NS = {"namespace": "binder", "pod": "sp-extender-0"}


def _crds() -> list[Path]:
    folder = binaries_dir() / "crds"
    files = sorted(folder.glob("monitoring.coreos.com_*.yaml"))
    if not files:
        missing(f"no prometheus-operator CRDs in {folder}")
    return files


def _docs(helm: Helm, *sets: str, webhook: str | None = "generated") -> list[dict]:
    values = None
    if webhook is not None:
        tls = _tls_values(webhook, _own_ca_pem())
        values = {"webhook": {"enabled": True, "config": {"routes": WEBHOOK_ROUTES}, "tls": tls}}
    return helm.template(*sets, namespace="binder", values=values)


def _rules(helm: Helm, *sets: str) -> list[dict[str, Any]]:
    """The PrometheusRule's groups."""
    return one(_docs(helm, *ON, *sets), "PrometheusRule", "stickypack")["spec"]["groups"]


# --------------------------------------------------------------------------- objects


def test_monitoring_is_off_by_default(helm: Helm) -> None:
    docs = _docs(helm)
    assert not [d for d in docs if d["apiVersion"].startswith("monitoring.coreos.com/")]


def test_service_monitors_select_the_services_and_their_ports(helm: Helm) -> None:
    """Each ServiceMonitor's selector picks exactly its component's Service (of the other
    Services, none), in the release namespace, on a port that Service has; the webhook's
    is scraped over HTTPS checked against the CA of its serving certificate."""
    docs = _docs(helm, *ON, "monitoring.serviceMonitor.labels.release=kube-prometheus-stack")
    monitors = find(docs, "ServiceMonitor")
    assert sorted(m["metadata"]["name"] for m in monitors) == ["stickypack-extender", "stickypack-webhook"]
    services = find(docs, "Service")
    for monitor in monitors:
        spec = monitor["spec"]
        assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
        assert spec["namespaceSelector"] == {"matchNames": ["binder"]}
        wanted = spec["selector"]["matchLabels"]
        chosen = [s for s in services if wanted.items() <= s["metadata"]["labels"].items()]
        assert [s["metadata"]["name"] for s in chosen] == [monitor["metadata"]["name"]]
        ports = {p["name"] for p in chosen[0]["spec"]["ports"]}
        (endpoint,) = spec["endpoints"]
        assert endpoint["port"] in ports and endpoint["path"] == "/metrics"
    webhook = one(docs, "ServiceMonitor", "stickypack-webhook")["spec"]["endpoints"][0]
    assert webhook["scheme"] == "https"
    assert webhook["tlsConfig"]["serverName"] == "stickypack-webhook.binder.svc"
    secret = webhook["tlsConfig"]["ca"]["secret"]
    assert "ca.crt" in one(docs, "Secret", secret["name"])["data"] and secret["key"] == "ca.crt"


def test_a_webhook_with_its_own_secret_is_checked_against_its_ca_bundle(helm: Helm) -> None:
    """With ``webhook.tls.secretName`` (a Secret that need not hold ``ca.crt``) the CA the
    API server is given, ``webhook.tls.caBundle``, goes into a ConfigMap the ServiceMonitor
    names."""
    docs = _docs(helm, *ON, webhook="secret")
    ca = one(docs, "ServiceMonitor", "stickypack-webhook")["spec"]["endpoints"][0]["tlsConfig"]["ca"]
    assert ca == {"configMap": {"name": "stickypack-webhook-ca", "key": "ca.crt"}}
    bundle = one(docs, "ConfigMap", "stickypack-webhook-ca")["data"]["ca.crt"]
    assert bundle.startswith("-----BEGIN CERTIFICATE-----")


def test_alerts_follow_the_components_and_the_thresholds(helm: Helm) -> None:
    rules = _rules(helm)[0]["rules"]
    assert [r["alert"] for r in rules] == [
        "StickypackExtenderWatchStale",
        "StickypackExtenderWatchDown",
        "StickypackExtenderErrors",
        "StickypackExtenderSlow",
        "StickypackExtenderHistoryNotStored",
        "StickypackExtenderBadEvents",
        "StickypackExtenderDraInactive",
        "StickypackWebhookCertificateExpiry",
        "StickypackWebhookFailOpen",
        "StickypackWebhookCertificateReloadFailed",
    ]
    docs = _docs(
        helm,
        *ON,
        "monitoring.prometheusRule.watchStaleSeconds=120",
        "monitoring.prometheusRule.severity=page",
        "extender.enabled=false",
        "scheduler.builds.extenderURL=http://x:1",
    )
    rules = one(docs, "PrometheusRule", "stickypack")["spec"]["groups"][0]["rules"]
    assert [r["alert"] for r in rules] == [
        "StickypackWebhookCertificateExpiry",
        "StickypackWebhookFailOpen",
        "StickypackWebhookCertificateReloadFailed",
    ]
    assert {r["labels"]["severity"] for r in rules} == {"page"}
    stale = _rules(helm, "monitoring.prometheusRule.watchStaleSeconds=120")[0]["rules"][0]
    assert stale["expr"].endswith("> 120")


# --------------------------------------------------------------------------- promtool


def _promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(needs_binaries("promtool")["promtool"]), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _alert(name: str, at: str, *expected: dict[str, Any]) -> dict[str, Any]:
    return {"eval_time": at, "alertname": name, "exp_alerts": list(expected)}


def _firing(labels: dict[str, str], **annotations: str) -> dict[str, Any]:
    return {"exp_labels": {**labels, "severity": "warning"}, "exp_annotations": annotations}


def _annotations(rules: list[dict], alert: str, **values: str) -> dict[str, str]:
    """The alert's annotations with ``{{ $labels.x }}`` and ``{{ $value | f }}`` filled in
    by hand (``values``: what each template gives)."""
    rule = next(r for r in rules if r["alert"] == alert)
    out = {}
    for key, text in rule["annotations"].items():
        for template, value in values.items():
            text = text.replace(template, value)
        assert "{{" not in text, f"{alert} {key}: {text}"
        out[key] = text
    return out


def test_promtool_checks_the_rules_and_each_alert_fires_when_it_should(helm: Helm, tmp_path: Path) -> None:
    """``promtool check rules`` passes, and ``promtool test rules`` runs each alert over a
    series that should fire it (at the minute its ``for`` says, not before) beside one that
    should not: a watch silent for more than 600 s, one closed for 5 minutes, an internal
    error, a p99 of 248.5 ms, failed history writes with operations pending, a skipped
    event, DRA off for 15 minutes, a certificate 6 days from expiry, a failed reload."""
    groups = _rules(helm)
    rules = groups[0]["rules"]
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": groups}))
    checked = _promtool("check", "rules", "rules.yaml", cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS: 10 rules found" in checked.stdout

    def series(name: str, values: str, **labels: str) -> dict[str, str]:
        text = ",".join(f'{k}="{v}"' for k, v in {**NS, **labels}.items())
        return {"series": f"{name}{{{text}}}", "values": values}

    pods = {**NS, "kind": "pods"}
    bucket = "stickypack_extender_request_duration_seconds_bucket"
    fast = {"pod": "sp-extender-1"}
    route = "dask-gateway.routing.stickypack.io"
    fail_open = "apiserver_admission_webhook_fail_open_count"  # kube-apiserver's
    tests = [
        {  # staleness grows 60 s a minute: over 600 from 11m, firing 2m later
            "interval": "1m",
            "input_series": [
                series("stickypack_extender_cache_staleness_seconds", "0+60x20", kind="pods"),
                series("stickypack_extender_cache_staleness_seconds", "0x20", kind="nodes"),
            ],
            "alert_rule_test": [
                _alert("StickypackExtenderWatchStale", "12m"),
                _alert(
                    "StickypackExtenderWatchStale",
                    "13m",
                    _firing(
                        pods,
                        **_annotations(
                            rules,
                            "StickypackExtenderWatchStale",
                            **{"{{ $labels.kind }}": "pods", "{{ $value | humanizeDuration }}": "13m 0s"},
                        ),
                    ),
                ),
            ],
        },
        {  # the pods watch closed from 2m: firing at 7m
            "interval": "1m",
            "input_series": [
                series("stickypack_extender_watch_connected", "1 1 0x10", kind="pods"),
                series("stickypack_extender_watch_connected", "1x12", kind="nodes"),
            ],
            "alert_rule_test": [
                _alert("StickypackExtenderWatchDown", "6m"),
                _alert(
                    "StickypackExtenderWatchDown",
                    "7m",
                    _firing(
                        pods,
                        **_annotations(
                            rules, "StickypackExtenderWatchDown", **{"{{ $labels.kind }}": "pods"}
                        ),
                    ),
                ),
            ],
        },
        {  # one internal error at 3m; bad requests are not errors
            "interval": "1m",
            "input_series": [
                series("stickypack_extender_requests_total", "0 0 0 1x10", verb="filter", outcome="error"),
                series("stickypack_extender_requests_total", "0+5x13", verb="filter", outcome="bad_request"),
            ],
            "alert_rule_test": [
                _alert("StickypackExtenderErrors", "2m"),
                _alert(
                    "StickypackExtenderErrors",
                    "3m",
                    _firing(NS, **_annotations(rules, "StickypackExtenderErrors")),
                ),
            ],
        },
        {  # every answer in (0.1 s, 0.25 s]: p99 0.2485 s from 1m, firing 15m later; the
            # other pod's answers all take under 5 ms
            "interval": "1m",
            "input_series": [
                series(bucket, "0x30", le="0.005"),
                series(bucket, "0x30", le="0.1"),
                series(bucket, "0+10x30", le="0.25"),
                series(bucket, "0+10x30", le="+Inf"),
                series(bucket, "0+10x30", le="0.005", **fast),
                series(bucket, "0+10x30", le="0.1", **fast),
                series(bucket, "0+10x30", le="0.25", **fast),
                series(bucket, "0+10x30", le="+Inf", **fast),
            ],
            "alert_rule_test": [
                _alert("StickypackExtenderSlow", "15m"),
                _alert(
                    "StickypackExtenderSlow",
                    "16m",
                    _firing(
                        NS,
                        **_annotations(
                            rules, "StickypackExtenderSlow", **{"{{ $value | humanizeDuration }}": "248.5ms"}
                        ),
                    ),
                ),
            ],
        },
        {  # writes fail from 2m with operations pending: firing at 17m; a pod whose writes
            # failed once but stored everything since does not
            "interval": "1m",
            "input_series": [
                series("stickypack_extender_history_write_errors_total", "0 0 1+1x30"),
                series("stickypack_extender_history_pending_ops", "5x32"),
                series("stickypack_extender_history_write_errors_total", "0 0 1x30", **fast),
                series("stickypack_extender_history_pending_ops", "5 5 0x30", **fast),
            ],
            "alert_rule_test": [
                _alert("StickypackExtenderHistoryNotStored", "16m"),
                _alert(
                    "StickypackExtenderHistoryNotStored",
                    "17m",
                    _firing(NS, **_annotations(rules, "StickypackExtenderHistoryNotStored")),
                ),
            ],
        },
        {  # a pods event skipped at 2m; a steady zero for nodes
            "interval": "1m",
            "input_series": [
                series("stickypack_extender_watch_bad_events_total", "0 0 1x30", kind="pods"),
                series("stickypack_extender_watch_bad_events_total", "0x32", kind="nodes"),
            ],
            "alert_rule_test": [
                _alert("StickypackExtenderBadEvents", "1m"),
                _alert(
                    "StickypackExtenderBadEvents",
                    "2m",
                    _firing(
                        pods,
                        **_annotations(
                            rules, "StickypackExtenderBadEvents", **{"{{ $labels.kind }}": "pods"}
                        ),
                    ),
                ),
            ],
        },
        {  # DRA off from 2m: firing at 17m
            "interval": "1m",
            "input_series": [
                series("stickypack_extender_dra_active", "1 1 0x30"),
                series("stickypack_extender_dra_active", "1x32", **fast),
            ],
            "alert_rule_test": [
                _alert("StickypackExtenderDraInactive", "16m"),
                _alert(
                    "StickypackExtenderDraInactive",
                    "17m",
                    _firing(NS, **_annotations(rules, "StickypackExtenderDraInactive")),
                ),
            ],
        },
        {  # a certificate expiring 6 days after the epoch (promtool's clock starts there):
            # firing after an hour, 5 days 23 hours left; one of 10 days does not
            "interval": "5m",
            "input_series": [
                series("stickypack_webhook_certificate_expiry_timestamp_seconds", "518400x20"),
                series("stickypack_webhook_certificate_expiry_timestamp_seconds", "864000x20", **fast),
            ],
            "alert_rule_test": [
                _alert("StickypackWebhookCertificateExpiry", "55m"),
                _alert(
                    "StickypackWebhookCertificateExpiry",
                    "60m",
                    _firing(
                        NS,
                        **_annotations(
                            rules,
                            "StickypackWebhookCertificateExpiry",
                            **{"{{ $value | humanizeDuration }}": "5d 23h 0m 0s"},
                        ),
                    ),
                ),
            ],
        },
        {  # the API server failed to call a route's entry at 3m (its counter born at 1), and
            # never again: firing from 3m until the failure is 10 minutes old; another
            # webhook's failures are not ours
            "interval": "1m",
            "input_series": [
                {
                    "series": f'{fail_open}{{name="{route}",type="admit"}}',
                    "values": "_ _ _ 1x20",
                },
                {
                    "series": f'{fail_open}{{name="other.example.com",type="admit"}}',
                    "values": "1+1x23",
                },
            ],
            "alert_rule_test": [
                _alert("StickypackWebhookFailOpen", "2m"),
                _alert(
                    "StickypackWebhookFailOpen",
                    "3m",
                    _firing(
                        {"name": route},
                        **_annotations(rules, "StickypackWebhookFailOpen", **{"{{ $labels.name }}": route}),
                    ),
                ),
                _alert(
                    "StickypackWebhookFailOpen",
                    "12m",
                    _firing(
                        {"name": route},
                        **_annotations(rules, "StickypackWebhookFailOpen", **{"{{ $labels.name }}": route}),
                    ),
                ),
                _alert("StickypackWebhookFailOpen", "14m"),
            ],
        },
        {  # a reload failed at 2m; the other pod's loaded
            "interval": "1m",
            "input_series": [
                series("stickypack_webhook_certificate_reloads_total", "0 0 1x30", outcome="failed"),
                series("stickypack_webhook_certificate_reloads_total", "0 0 1x30", outcome="loaded", **fast),
            ],
            "alert_rule_test": [
                _alert("StickypackWebhookCertificateReloadFailed", "1m"),
                _alert(
                    "StickypackWebhookCertificateReloadFailed",
                    "2m",
                    _firing(NS, **_annotations(rules, "StickypackWebhookCertificateReloadFailed")),
                ),
            ],
        },
    ]
    (tmp_path / "tests.yaml").write_text(
        yaml.safe_dump({"rule_files": ["rules.yaml"], "evaluation_interval": "1m", "tests": tests})
    )
    tested = _promtool("test", "rules", "tests.yaml", cwd=tmp_path)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "SUCCESS" in tested.stdout


# --------------------------------------------------------------------------- the services


def _exported_names(metrics_text: str) -> set[str]:
    """Every series name ``metrics_text`` can carry (counters with ``_total``, histograms
    with their ``_bucket``, ``_sum`` and ``_count``), from its families: a labelled metric
    with no sample yet still names its family."""
    names: set[str] = set()
    for family in text_string_to_metric_families(metrics_text):
        names.add(family.name)
        names.update(sample.name for sample in family.samples)
        suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count")}.get(family.type, ())
        names.update(family.name + suffix for suffix in suffixes)
    return names


@pytest.mark.controlplane
def test_every_metric_the_alerts_and_the_dashboard_read_is_exported_by_the_services(
    helm: Helm, controlplane: ControlPlane, tmp_path: Path
) -> None:
    """The names the alert expressions and the dashboard's queries read, against the
    ``/metrics`` of the real extender (with ``cluster.dra``, on the local API server) and
    the real webhook: a metric renamed in the code fails here, not in an operator's
    Prometheus or Grafana."""
    import trustme

    from stickypack.extender.config import config_from_dict as extender_config
    from stickypack.extender.server import ServiceThread
    from stickypack.webhook.config import config_from_dict as webhook_config
    from stickypack.webhook.server import WebhookThread

    read = {
        name
        for rule in _rules(helm)[0]["rules"]
        for name in re.findall(r"\bstickypack_[a-z_]+", rule["expr"])
    }
    cfg = extender_config(
        {"history": {"store": "memory"}, "cluster": {"kubeconfig": str(controlplane.kubeconfig), "dra": True}}
    )
    with ServiceThread(cfg) as ext:
        exported = _exported_names(httpx.get(f"{ext.url}/metrics").text)
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    cert.cert_chain_pems[0].write_to_path(str(tmp_path / "tls.crt"))
    cert.private_key_pem.write_to_path(str(tmp_path / "tls.key"))
    tls = {"cert_file": str(tmp_path / "tls.crt"), "key_file": str(tmp_path / "tls.key")}
    with WebhookThread(webhook_config({"tls": tls})) as webhook:
        context = ssl.create_default_context()
        ca.configure_trust(context)
        exported |= _exported_names(httpx.get(f"{webhook.url}/metrics", verify=context).text)
    assert len(read) == 10  # both of StickypackExtenderHistoryNotStored's
    assert read <= exported, sorted(read - exported)
    shown = {name for expr in _dashboard_queries() for name in re.findall(r"\bstickypack_[a-z_]+", expr)}
    assert len(shown) == 20
    assert shown <= exported, sorted(shown - exported)


def test_every_labelled_series_an_alert_selects_is_exported_at_zero_before_its_first_event(
    helm: Helm,
) -> None:
    """A series an alert picks by a label value (``requests_total{outcome="error"}``,
    ``certificate_reloads_total{outcome="failed"}``) is exported at 0 by a service that has
    seen none yet: ``increase()`` takes a series that first appears at 1 for one that was
    always 1, so the first internal error, or a failed reload (counted once: the same files
    are not tried again), would never fire its alert."""
    from stickypack.extender.metrics import Metrics
    from stickypack.webhook.app import WebhookMetrics

    exported = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for metrics in (Metrics(), WebhookMetrics())
        for family in text_string_to_metric_families(metrics.render()[0].decode())
        for sample in family.samples
    }
    selected = [
        (name, dict(re.findall(r'(\w+)="([^"]*)"', matchers)))
        for rule in _rules(helm)[0]["rules"]
        for name, matchers in re.findall(r"\b(stickypack_[a-z_]+)\{([^}]*)\}", rule["expr"])
    ]
    assert sorted(name for name, _ in selected) == [
        "stickypack_extender_requests_total",
        "stickypack_webhook_certificate_reloads_total",
    ]
    for name, labels in selected:
        values = [
            value
            for (sample, sample_labels), value in exported.items()
            if sample == name and labels.items() <= dict(sample_labels).items()
        ]
        assert values and set(values) == {0.0}, (name, labels, values)


# --------------------------------------------------------------------------- API server


def _install_crds(cp: ControlPlane) -> None:
    """The prometheus-operator CRDs (from its module, ``tools/k8s/build.sh``), created if
    missing and waited for until Established."""
    for path in _crds():
        crd = yaml.safe_load(path.read_text())
        name = crd["metadata"]["name"]
        base = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
        status, body = _request(cp, "POST", base, crd)
        assert status in (201, 409), f"{name}: HTTP {status} {body.get('message')}"
        deadline = time.monotonic() + 30
        while True:
            status, body = _request(cp, "GET", f"{base}/{name}")
            conditions = {c["type"]: c["status"] for c in (body.get("status") or {}).get("conditions") or []}
            if conditions.get("Established") == "True":
                break
            assert time.monotonic() < deadline, f"{name} never Established: {body.get('status')}"
            time.sleep(0.1)


@pytest.mark.controlplane
@pytest.mark.parametrize("webhook", ["generated", "secret"])
def test_the_api_server_accepts_the_monitoring_objects(
    controlplane: ControlPlane, helm: Helm, webhook: str
) -> None:
    """With the real ServiceMonitor and PrometheusRule CRDs installed, each monitoring
    object, sent as a dry run with strict field validation, is accepted: the CRDs' schemas
    check every field (a misspelt one is an error, not dropped)."""
    _install_crds(controlplane)
    plural = {"ServiceMonitor": "servicemonitors", "PrometheusRule": "prometheusrules"}
    docs = [d for d in _docs(helm, *ON, webhook=webhook) if d["kind"] in plural]
    assert sorted(d["kind"] for d in docs) == ["PrometheusRule", "ServiceMonitor", "ServiceMonitor"]
    for doc in docs:
        path = f"/apis/monitoring.coreos.com/v1/namespaces/default/{plural[doc['kind']]}"
        doc["metadata"]["namespace"] = "default"
        query = [("dryRun", "All"), ("fieldValidation", "Strict")]
        status, body = _request(controlplane, "POST", path, doc, query)
        assert status == 201, f"{doc['kind']} {doc['metadata']['name']}: HTTP {status} {body.get('message')}"
    # and one it should refuse: the CRD's schema is the one checking
    bad = dict(docs[0], spec={**docs[0]["spec"], "endpoint": []})
    path = f"/apis/monitoring.coreos.com/v1/namespaces/default/{plural[bad['kind']]}"
    status, body = _request(
        controlplane, "POST", path, bad, [("dryRun", "All"), ("fieldValidation", "Strict")]
    )
    assert status == 400 and "endpoint" in body.get("message", ""), body


def test_install_notes_name_the_monitoring_objects(helm: Helm) -> None:
    """NOTES.txt (rendered by an install, where an error would fail it) says what monitoring
    put in, and nothing of it when off."""

    def notes(*sets: str) -> str:
        args = ["install", "sp", str(CHART), "--namespace", "binder", "--dry-run=client"]
        for value in sets:
            args += ["--set", value]
        out = helm.run(*args).stdout
        return out[out.index("NOTES:") :]

    assert "Monitoring" not in notes()
    both = notes(*ON)
    assert (
        "- Monitoring: ServiceMonitors (every 30s), PrometheusRule sp-stickypack (alerts Stickypack*);"
        in both
    )
    rule_only = notes("monitoring.prometheusRule.enabled=true")
    assert "- Monitoring: PrometheusRule sp-stickypack (alerts Stickypack*);" in rule_only
    dashboard = notes("monitoring.grafanaDashboard.enabled=true")
    assert "- Monitoring: Grafana dashboard sp-stickypack-dashboard;" in dashboard


# --------------------------------------------------------------------------- dashboard


def _dashboard_queries() -> list[str]:
    """Every panel query of the committed dashboard."""
    dashboard = json.loads((CHART / "files" / "grafana-dashboard.json").read_text())
    return [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]


def test_the_dashboard_is_the_committed_file_in_a_configmap_the_sidecar_finds(helm: Helm) -> None:
    assert not find(_docs(helm, *ON), "ConfigMap", "stickypack-dashboard")
    docs = _docs(
        helm, "monitoring.grafanaDashboard.enabled=true", "monitoring.grafanaDashboard.namespace=grafana"
    )
    config = one(docs, "ConfigMap", "stickypack-dashboard")
    assert config["metadata"]["namespace"] == "grafana"
    assert config["metadata"]["labels"]["grafana_dashboard"] == "1"
    committed = json.loads((CHART / "files" / "grafana-dashboard.json").read_text())
    assert json.loads(config["data"]["stickypack.json"]) == committed
    assert committed["uid"] == "stickypack" and len(committed["panels"]) == 14


def test_promtool_parses_every_dashboard_query(tmp_path: Path) -> None:
    """Each panel's query, with the dashboard's ``$namespace`` as Grafana fills it for
    "All" (``.*``), is valid PromQL to the real promtool (each checked as a recording rule)."""
    queries = _dashboard_queries()
    assert all("$namespace" in q or "apiserver_" in q for q in queries)
    rules = [
        {"record": f"stickypack:dashboard_query_{i}", "expr": q.replace("$namespace", ".*")}
        for i, q in enumerate(queries)
    ]
    (tmp_path / "queries.yaml").write_text(
        yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]})
    )
    checked = _promtool("check", "rules", "queries.yaml", cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(rules)} rules found" in checked.stdout
