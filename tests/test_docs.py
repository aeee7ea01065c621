"""The reference tables of docs/ against the code they describe: each fact checked here once
drifted, or could without any other test noticing."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from stickypack.extender.config import ExtenderConfig
from stickypack.extender.server import api_rights
from stickypack.kube.cache import parse_selector
from stickypack.kube.client import ApiRight, rule_rights
from stickypack.render import EXTENDER_WEIGHT
from stickypack.webhook.config import WebhookConfig, config_from_dict

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
SRC = ROOT / "src" / "stickypack"


def _fields(model: type[BaseModel], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """``(dotted key, default)`` of every leaf of a configuration model."""
    for name, field in model.model_fields.items():
        kind = field.annotation
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            yield from _fields(kind, f"{prefix}{name}.")
        else:
            default = field.default_factory() if field.default_factory is not None else field.default
            yield f"{prefix}{name}", default


def _extender_table() -> dict[str, list[str]]:
    """docs/operator-guide.md's `extender.yaml` reference: key -> the default cell's
    backticked values (a row naming two keys gives each its own value, or both the one)."""
    text = (DOCS / "operator-guide.md").read_text()
    section = text.split("## Configuration reference (`extender.yaml`)", 1)[1]
    table = section.split("\n\n", 2)[1]
    out: dict[str, list[str]] = {}
    for row in table.splitlines():
        if not row.startswith("| `"):
            continue
        keys_cell, default_cell = row.split(" | ")[:2]
        keys = re.findall(r"`([^`]+)`", keys_cell)
        values = re.findall(r"`([^`]+)`", default_cell)
        for i, key in enumerate(keys):
            out[key] = [values[i]] if len(keys) > 1 and len(values) == len(keys) else values
    return out


def test_the_extender_reference_names_every_key_with_its_default() -> None:
    documented = _extender_table()
    fields = dict(_fields(ExtenderConfig))
    assert set(documented) == set(fields), "keys in one and not the other"
    for key, default in fields.items():
        values = documented[key]
        where = f"operator-guide.md, {key}: {values} against the code's {default!r}"
        first = values[0]
        if default is None:  # filled in at run time from the environment
            assert first.startswith("$"), where
        elif isinstance(default, bool):
            assert first == str(default).lower(), where
        elif isinstance(default, int | float):
            assert float(first) == default, where
        elif isinstance(default, str):
            assert first == default, where
        elif key.startswith("pods."):  # label selectors, written key=value,...
            assert parse_selector(first) == default, where
        else:
            listed = yaml.safe_load(first)
            assert (listed if isinstance(listed, list | dict) else values) == default, where


def test_the_simulate_reference_names_every_option_and_metric() -> None:
    import argparse

    from stickypack.cli import _parser
    from stickypack.sim.metrics import METRICS

    text = (DOCS / "configuration.md").read_text()
    section = text.split("## `stickypack simulate`", 1)[1].split("\n## ", 1)[0]
    documented = re.findall(r"^\| `(--[a-z-]+)", section, flags=re.M)
    sub = next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction))
    simulate = sub.choices["simulate"]
    options = [o for a in simulate._actions for o in a.option_strings if o.startswith("--") and o != "--help"]
    assert sorted(documented) == sorted(options)
    metrics = section.split("Metrics: ", 1)[1].split(". See", 1)[0]
    assert sorted(re.findall(r"`(\w+)`", metrics)) == sorted(METRICS)


def test_the_simulator_reference_names_every_model_key_with_its_default() -> None:
    import dataclasses

    from stickypack.core.quantity import int_value
    from stickypack.sim.model import AutoscalerConfig, BinderModel, CacheConfig, DaskModel, NodePool

    text = (DOCS / "simulator.md").read_text()
    table = text.split("| section.key | default | meaning |", 1)[1].split("\n\n", 1)[0]
    documented: dict[str, str] = {}
    for row in table.splitlines()[2:]:
        keys_cell, default_cell = row.split(" | ")[:2]
        keys = re.findall(r"`(\w+\.\w+)`", keys_cell)
        values = [v.strip().strip("`") for v in default_cell.split(" / ")]
        for i, key in enumerate(keys):
            documented[key] = values[i] if len(values) == len(keys) else default_cell
    sections = {"autoscaler": AutoscalerConfig(), "cache": CacheConfig(), "binder": BinderModel()}
    sections |= {"dask": DaskModel(), "pool": NodePool()}
    keys = {f"{name}.{f.name}" for name, obj in sections.items() for f in dataclasses.fields(obj)}
    assert set(documented) == keys - {"pool.name"}
    for key, shown in documented.items():
        name, attr = key.split(".")
        if name == "pool":  # "per workload": the trace's pool is in "Node pools"
            continue
        default = getattr(sections[name], attr)
        where = f"simulator.md, {key}: {shown} against the code's {default!r}"
        if isinstance(default, bool):
            assert shown == str(default).lower(), where
        elif isinstance(default, str):
            assert shown == default, where
        elif shown.replace(".", "").isdigit():
            assert float(shown) == default, where
        else:  # a size: a Kubernetes quantity
            assert int_value(shown) == default, where


def test_the_webhook_reference_shows_the_defaults() -> None:
    text = (DOCS / "configuration.md").read_text()
    section = text.split("## The webhook (`webhook.yaml`)", 1)[1]
    block = section.split("```yaml\n", 1)[1].split("```", 1)[0]
    shown = yaml.safe_load(block)
    assert config_from_dict(shown, "configuration.md") == WebhookConfig()
    assert set(shown) == set(WebhookConfig.model_fields)
    shown_leaves = set(shown["listen"]) | set(shown["tls"])
    assert shown_leaves == {"host", "port", "cert_file", "key_file", "reload_interval_s"}


def test_the_documented_extender_weight_is_the_rendered_one() -> None:
    conf = (DOCS / "configuration.md").read_text()
    said = re.search(r"default (\d+), the built-in extender configuration's", conf)
    assert said is not None and int(said.group(1)) == EXTENDER_WEIGHT
    guide = (DOCS / "operator-guide.md").read_text()
    assert f"`Σ weight` ({EXTENDER_WEIGHT} for the built-in policy)" in guide
    assert f"`weight: {EXTENDER_WEIGHT}`" in guide


def _extender_rbac_rows() -> list[tuple[str, str]]:
    """docs/operator-guide.md's RBAC table: (who, rules) of each of the extender's rows (a
    row with an empty "who" continues the one above)."""
    text = (DOCS / "operator-guide.md").read_text()
    table = text.split("\n## RBAC\n", 1)[1].strip("\n").split("\n\n", 1)[0]
    rows, who = [], ""
    for line in table.splitlines()[2:]:
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        who = cells[0] or who
        if who.startswith("extender"):
            rows.append((who, cells[1]))
    return rows


def _documented_rights(config: ExtenderConfig) -> frozenset[ApiRight]:
    """The rights the extender's rows give it with ``config``: a row "only with `key: value`"
    (or "only with `flag`") applies when the configuration says so; a Role's rights are in
    ``history.namespace``, the rest cluster-wide. A rule is "`resource`, ... (`group`, a
    note): verb, ...", the group left out for the core group."""
    settings = {
        "history.store": config.history.store,
        "cluster.dra": config.cluster.dra,
    }
    out: frozenset[ApiRight] = frozenset()
    for who, rule in _extender_rbac_rows():
        conditions = [c.split(": ") for c in re.findall(r"only with `([^`]+)`", who)]
        if not all(settings[c[0]] == (c[1] if len(c) > 1 else True) for c in conditions):
            continue
        namespace = config.history.resolved_namespace() if "Role in `history.namespace`" in who else None
        head, verbs = rule.rsplit(": ", 1)
        match = re.fullmatch(r"(.*?)(?: \((.*)\))?", head)
        assert match is not None, rule
        groups = re.findall(r"`([^`]+)`", match.group(2) or "") or [""]
        resources = re.findall(r"`([^`]+)`", match.group(1))
        assert resources and len(groups) == 1, rule
        out |= rule_rights(groups[0], resources, [v.strip() for v in verbs.split(",")], namespace)
    return out


@pytest.mark.parametrize("store", ["configmap", "node-annotations", "memory"])
@pytest.mark.parametrize("dra", [False, True])
def test_the_rbac_table_gives_the_extender_the_rights_its_calls_need(store: str, dra: bool) -> None:
    """The operator guide's RBAC rows for the extender are what its code calls
    (:func:`stickypack.extender.server.api_rights`), in each history store, with and without
    ``cluster.dra``: nothing missing, nothing more."""
    config = ExtenderConfig.model_validate(
        {"history": {"store": store, "namespace": "hist"}, "cluster": {"dra": dra}}
    )
    assert sorted(_documented_rights(config)) == sorted(api_rights(config))


def _may_import() -> dict[str, set[str]]:
    """docs/architecture.md's module table: module -> the stickypack modules it may import
    (the names of its "may import" column, outside parentheses)."""
    text = (DOCS / "architecture.md").read_text()
    ours = {p.stem for p in SRC.iterdir() if p.suffix == ".py" or (p / "__init__.py").exists()}
    out: dict[str, set[str]] = {}
    for row in text.splitlines():
        match = re.match(r"\| `stickypack\.(\w+)` \|.*\| (.*) \|$", row)
        if not match:
            continue
        column = re.sub(r"\([^()]*(\([^()]*\)[^()]*)*\)", "", match.group(2))
        names = {w.strip().strip("`").split(" ")[0] for w in column.split(",")}
        out[match.group(1)] = names & ours if "everything" not in column else ours
    return out


def _imports(module: str) -> Iterator[tuple[str, str]]:
    """``(file, stickypack module)`` of every import of another stickypack module by
    ``module`` (a package or a file), lazy imports inside functions included."""
    path = SRC / module
    files = sorted(path.rglob("*.py")) if path.is_dir() else [SRC / f"{module}.py"]
    for file in files:
        for node in ast.walk(ast.parse(file.read_text())):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                names = [node.module]
                if node.module == "stickypack":
                    names = [f"stickypack.{a.name}" for a in node.names]
            for name in names:
                parts = name.split(".")
                if parts[0] == "stickypack" and len(parts) > 1 and parts[1] != module:
                    yield str(file.relative_to(SRC)), parts[1]


def test_each_module_imports_only_what_the_architecture_table_allows() -> None:
    table = _may_import()
    named = {"core", "policies", "sim", "kube", "extender", "webhook", "render", "cli", "testing"}
    assert named <= set(table), "a module of the table is missing from it"
    for module, allowed in table.items():
        assert (SRC / module).is_dir() or (SRC / f"{module}.py").is_file(), f"no module stickypack.{module}"
        for file, imported in _imports(module):
            why = f"{file} imports stickypack.{imported}; architecture.md allows {sorted(allowed)}"
            assert imported in allowed, why


def test_the_readme_asks_for_the_go_the_tools_modules_need() -> None:
    """README's Go minimum is the highest ``go`` line of the Go modules the tests' binaries
    are built from (tools/k8s/*/go.mod): an older Go cannot build that module."""
    lines = [
        re.search(r"^go (\d+(?:\.\d+)*)$", mod.read_text(), re.MULTILINE)
        for mod in sorted((ROOT / "tools" / "k8s").glob("*/go.mod"))
    ]
    assert len(lines) >= 4 and all(lines), "a tools/k8s module without a go line"
    needed = max((m.group(1) for m in lines if m), key=lambda v: tuple(map(int, v.split("."))))
    said = re.findall(r"Go (\d+(?:\.\d+)*)\+", (ROOT / "README.md").read_text())
    assert said == [needed], (said, needed)
