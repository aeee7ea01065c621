"""The reference tables of docs/ against the code they describe: each fact checked here once
drifted, or could without any other test noticing."""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from stickypack.cli import main
from stickypack.extender.config import ExtenderConfig
from stickypack.extender.server import api_rights
from stickypack.kube.cache import parse_selector
from stickypack.kube.client import ApiRight, rule_rights
from stickypack.kube.history import ConfigMapHistoryStore, NodeAnnotationHistoryStore
from stickypack.policies import load_builtin
from stickypack.render import EXTENDER_WEIGHT, PROFILE_BUILDERS
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


def test_every_command_line_option_is_in_the_docs() -> None:
    """Each option of each ``stickypack`` command (``render``'s subcommands included) is
    named somewhere in README.md or docs/: an option a user can only find in ``--help`` is
    one the guides forgot (simulate's table is checked in full above)."""
    import argparse

    from stickypack.cli import _parser

    text = "\n".join(p.read_text() for p in [ROOT / "README.md", *sorted(DOCS.glob("*.md"))])

    Parser = argparse.ArgumentParser

    def commands(parser: Parser, prefix: str) -> Iterator[tuple[str, Parser]]:
        sub = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
        for name, child in sub.choices.items() if sub else ():
            yield f"{prefix}{name}", child
            yield from commands(child, f"{prefix}{name} ")

    missing = [
        f"stickypack {command} {option}"
        for command, parser in commands(_parser(), "")
        for action in parser._actions
        for option in action.option_strings
        if option.startswith("--") and option != "--help"
        and not re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", text)
    ]  # fmt: skip
    assert not missing, f"options no doc names: {missing}"


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


def test_the_rbac_table_gives_the_image_cleaner_the_rights_forget_node_needs() -> None:
    """The operator guide's row for an image cleaner running ``stickypack forget-node``: the
    rights of the history store it writes to (``api_rights`` of each store class), a Role for
    the ConfigMaps, a ClusterRole for the nodes."""
    text = (DOCS / "operator-guide.md").read_text()
    row = next(line for line in text.splitlines() if line.startswith("| image cleaner running"))
    rules = row.split(" | ")[1]
    configmap, annotations = rules.split("; with `history.store: node-annotations` instead ")
    assert configmap == "Role: `configmaps`: get, create, update", row
    assert annotations == "ClusterRole `nodes`: get, list, patch", row

    def said(rule: str, namespace: str | None) -> frozenset[ApiRight]:
        resource, verbs = rule.split("`: ")
        return rule_rights("", [resource.rsplit("`", 1)[1]], verbs.split(", "), namespace)

    assert said(configmap, "binder") == ConfigMapHistoryStore.api_rights("binder")
    assert said(annotations, None) == NodeAnnotationHistoryStore.api_rights()


def _code_block(text: str, after: str) -> str:
    """The first fenced code block after ``after`` in ``text``, its indentation removed."""
    block = text.split(after, 1)[1].split("```", 2)[1]
    lines = block.split("\n")[1:]  # the fence's language
    indent = min(len(line) - len(line.lstrip()) for line in lines if line.strip())
    return "\n".join(line[indent:] for line in lines)


def _checked_weight(path: Path, capsys: pytest.CaptureFixture[str]) -> int:
    """``stickypack extender --config path --check``: it accepts the file; the weight it prints."""
    assert main(["extender", "--config", str(path), "--check"]) == 0, capsys.readouterr().err
    said = re.search(r"extender weight (\d+)", capsys.readouterr().out)
    assert said is not None
    return int(said.group(1))


def test_the_operator_guides_extender_files_pass_check_with_the_weights_it_gives(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Install step 1's ``extender.yaml`` and the user-pod extender's ``user-extender.yaml``,
    as written, pass ``stickypack extender --check``; the weight sum the guide says the
    latter prints is the one it prints, and the weight it tells to render is that sum scaled
    from the policy's NodeResourcesFit weight to the rendered profile's."""
    guide = (DOCS / "operator-guide.md").read_text()
    install = tmp_path / "extender.yaml"
    install.write_text(_code_block(guide, "1. **Extender configuration** (`extender.yaml`"))
    assert _checked_weight(install, capsys) == EXTENDER_WEIGHT
    user = tmp_path / "user-extender.yaml"
    user.write_text(_code_block(guide, "### User pods with the simulated profile's scale-down scorers"))
    assert user.read_text().startswith("# user-extender.yaml\n")
    weight = _checked_weight(user, capsys)
    check = "`stickypack extender --config user-extender.yaml --check`"
    assert f"{check} prints the weight sum ({weight})" in guide
    enabled = PROFILE_BUILDERS["stickypack"]()["plugins"]["score"]["enabled"]
    rendered = next(p["weight"] for p in enabled if p["name"] == "NodeResourcesFit")
    profile = next(p for p in load_builtin("stickypack").profiles if p.name == "stickypack")
    policy = next(s.weight for s in profile.scorers if s.plugin.name == "NodeResourcesFit")
    scaled = round(rendered * weight / policy)
    assert f"`{rendered} x {weight} / {policy} ~ {scaled}`" in guide
    assert f"--extender-weight {scaled}`" in guide


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
    """docs/architecture.md's module table: module -> what it may import: the stickypack
    modules (``stickypack.kube``) and the libraries (``numpy``) its "may import" column
    names outside parentheses (``a/b`` names both; "everything" allows anything)."""
    text = (DOCS / "architecture.md").read_text()
    ours = {p.stem for p in SRC.iterdir() if p.suffix == ".py" or (p / "__init__.py").exists()}
    out: dict[str, set[str]] = {}
    for row in text.splitlines():
        match = re.match(r"\| `stickypack\.(\w+)` \|.*\| (.*) \|$", row)
        if not match:
            continue
        column = re.sub(r"\([^()]*(\([^()]*\)[^()]*)*\)", "", match.group(2))
        names = {n.strip().strip("`").split(" ")[0] for w in column.split(",") for n in w.split("/")}
        out[match.group(1)] = {f"stickypack.{n}" if n in ours else n for n in names}
    return out


#: Import names whose distribution architecture.md names otherwise.
_DISTRIBUTIONS = {"yaml": "pyyaml", "celpy": "cel-python"}


def _imports(module: str) -> Iterator[tuple[str, str]]:
    """``(file, what)`` of every import by ``module`` (a package or a file) of another
    stickypack module (``stickypack.kube``) or of a library outside the standard library (its
    distribution's name: ``pyyaml``), lazy imports inside functions included."""
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
                    yield str(file.relative_to(SRC)), f"stickypack.{parts[1]}"
                elif parts[0] not in sys.stdlib_module_names and parts[0] != "stickypack":
                    yield str(file.relative_to(SRC)), _DISTRIBUTIONS.get(parts[0], parts[0])


def test_each_module_imports_only_what_the_architecture_table_allows() -> None:
    """Other stickypack modules and libraries alike: a library the table does not name for a
    module (numpy in the webhook, say) is a dependency its readers do not expect."""
    table = _may_import()
    named = {"core", "policies", "sim", "kube", "extender", "webhook", "render", "cli", "testing"}
    assert named <= set(table), "a module of the table is missing from it"
    for module, allowed in table.items():
        assert (SRC / module).is_dir() or (SRC / f"{module}.py").is_file(), f"no module stickypack.{module}"
        for file, imported in _imports(module):
            why = f"{file} imports {imported}; architecture.md allows {sorted(allowed)}"
            assert imported in allowed or "everything" in allowed, why


def _normalized(name: str) -> str:
    """A distribution's name as pip compares them: ``kubernetes_asyncio`` is ``kubernetes-asyncio``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _declared_distributions() -> set[str]:
    """Every distribution pyproject.toml asks for, runtime and extras alike (normalized)."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"].values()
    wanted = [*project["dependencies"], *(d for extra in extras for d in extra)]
    return {_normalized(re.split(r"[\s<>=!~;\[]", d, maxsplit=1)[0]) for d in wanted}


def test_every_dependency_has_its_why_in_the_architecture() -> None:
    """Each distribution of pyproject.toml has a row in architecture.md's "Dependencies and
    why" (a newcomer asks why it is there), and each library the package imports is one of
    them (a library reached only through another's dependencies may go when that one
    changes)."""
    text = (DOCS / "architecture.md").read_text()
    table = text.split("\n## Dependencies and why\n", 1)[1].split("\n|---|", 1)[1]
    documented = {
        _normalized(word)
        for row in table.strip().splitlines()
        for word in re.findall(r"[A-Za-z][\w.-]*", row.strip("|").split(" | ")[0])
    }
    declared = _declared_distributions()
    assert declared - documented == set(), "in pyproject.toml, without a row in architecture.md"
    modules = {p.stem for p in SRC.iterdir() if p.suffix == ".py" or (p / "__init__.py").exists()}
    modules.discard("__main__")
    imported = {(file, _normalized(lib)) for m in modules for file, lib in _imports(m) if "." not in lib}
    undeclared = sorted(f"{file} imports {lib}" for file, lib in imported if lib not in declared)
    assert not undeclared, "not in pyproject.toml"


def test_stickypack_help_loads_no_library_the_commands_need() -> None:
    """architecture.md: heavy imports stay inside the command handlers, so ``stickypack
    --help`` loads none of them: outside the standard library, only rich (the console
    ``main`` hands the handlers)."""
    script = (
        "import sys\nbefore = set(sys.modules)\nfrom stickypack.cli import main\ntry:\n"
        "    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "print(' '.join(sorted({m.split('.')[0] for m in set(sys.modules) - before})))"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    loaded = set(out.stdout.splitlines()[-1].split()) - set(sys.stdlib_module_names)
    assert loaded == {"rich", "stickypack"}, sorted(loaded)


def test_stickypack_help_lists_each_command_in_plain_text(capsys: pytest.CaptureFixture[str]) -> None:
    """``stickypack --help``'s description: one line per command, in the order the commands
    are listed below it, written for a terminal (no reST ``double backticks``)."""
    import argparse

    from stickypack.cli import _parser

    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    description = out.split("\n\n", 1)[1].split("\npositional arguments:", 1)[0]
    assert "``" not in description, description
    listed = re.findall(r"^ *stickypack ([a-z-]+) ", description, flags=re.M)
    sub = next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert listed == list(sub.choices), description


def _architecture_entries() -> dict[str, str]:
    """docs/architecture.md's entry of each module of its table (``core`` -> its row and the
    list of its modules in "The core")."""
    text = (DOCS / "architecture.md").read_text()
    rows = {m.group(1): m.group(0) for m in re.finditer(r"^\| `stickypack\.(\w+)` \|.*$", text, re.MULTILINE)}
    rows["core"] += "\n" + text.split("\nIts modules: ", 1)[1].split("\n\n", 1)[0]
    return rows


def test_the_architecture_and_the_readme_name_every_module() -> None:
    """A newcomer finds each module where the map puts it: a top-level one has its row in
    architecture.md's table and its line in README's Layout; one inside a package is named
    (backticked) in its package's entry."""
    entries = _architecture_entries()
    layout = (ROOT / "README.md").read_text().split("\n## Layout\n", 1)[1]
    for path in sorted(SRC.rglob("*.py")):
        parts = path.relative_to(SRC).with_suffix("").parts
        parts = parts[:-1] if parts[-1] == "__init__" else parts
        if not parts or parts[-1] == "__main__":
            continue
        name = "stickypack." + ".".join(parts)
        assert parts[0] in entries, f"{name} has no row in architecture.md's module table"
        assert re.search(rf"\b{parts[0]}(/|\.py)", layout), f"README's Layout does not name {name}"
        named = re.search(rf"`{parts[-1]}[`/.]", entries[parts[0]])
        assert len(parts) == 1 or named, f"architecture.md's stickypack.{parts[0]} entry does not name {name}"


def _module(name: str) -> Any:
    """The module ``name`` (imported), or None."""
    if name.endswith(".__main__"):  # runs the command
        return None
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def _resolves(module: str, dotted: str) -> bool:
    """Whether ``dotted`` (``cache.node_images``, ``NodeTable.extra``) is reached from module
    ``module``: its attributes, its package's modules, an attribute a class's ``__init__``
    sets on its instances."""
    obj = _module(module)
    parts = dotted.split(".")
    for i, part in enumerate(parts):
        if hasattr(obj, part):
            obj = getattr(obj, part)
        elif hasattr(obj, "__path__") and _module(f"{obj.__name__}.{part}"):
            obj = _module(f"{obj.__name__}.{part}")
        else:
            init = getattr(obj.__init__, "__code__", None) if isinstance(obj, type) else None
            return init is not None and i == len(parts) - 1 and part in init.co_names
    return True


def _holds(module: str, dotted: str) -> bool:
    """Whether ``dotted`` is in ``module`` (a package: in it or one of its modules), or is a
    cross-reference that says where it lives: the name of a package ``module`` is in
    (``core``'s ``Pod``), or a path from one (``explain.node_report``, ``stickypack.dask``)."""
    package = getattr(_module(module), "__path__", None)
    inside = [m.name for m in pkgutil.walk_packages(package, f"{module}.")] if package else []
    outside = [module.rsplit(".", n)[0] for n in range(1, module.count(".") + 1)]
    if dotted.startswith("stickypack."):
        return _resolves("stickypack", dotted.removeprefix("stickypack."))
    return any(_resolves(m, dotted) for m in [module, *inside, *outside])


#: Names architecture.md's module entries give in backticks that are not stickypack's:
#: Kubernetes kinds, fields and values, the cluster-autoscaler's and Dask's names, keys of
#: configuration files.
_NOT_OURS = {
    "DaskCluster", "DaskWorkerGroup", "DoNotSchedule", "MutatingAdmissionPolicy",
    "MutatingWebhookConfiguration", "RemovableAt", "cluster.dra", "gateway.extraConfig",
    "status.images",
}  # fmt: skip


def _placed(text: str, module: str) -> Iterator[tuple[str, str]]:
    """``(module, name)`` of each code name in ``text`` (backticked, with a capital, an
    underscore or a dot: ``ClusterCache``, ``api_rights``): one inside the parentheses after
    a module's name (`` `cache` (...)``, ``kube (...)``) placed in that module, any other in
    ``module``."""
    rest, at = "", 0
    for head in re.finditer(r"`?(\w+)/?`?\s+\(", text):
        if head.start() < at:  # inside the parentheses of the module before
            continue
        sub = next((m for m in (f"{module}.{head[1]}", f"stickypack.{head[1]}") if _module(m)), None)
        if sub is None:  # a word, not a module: its parentheses are prose
            continue
        end, depth = head.end(), 1
        while depth and end < len(text):
            depth += {"(": 1, ")": -1}.get(text[end], 0)
            end += 1
        yield from _placed(text[head.end() : end - 1], sub)
        rest, at = rest + text[at : head.start()], end
    for name in re.findall(r"`([A-Za-z_]\w*(?:\.\w+)*)(?:\(\))?`", rest + text[at:]):
        if (name != name.lower() or "_" in name or "." in name) and name not in _NOT_OURS:
            yield module, name


def test_the_architecture_places_each_name_in_the_module_that_holds_it() -> None:
    """A class, function or constant architecture.md names in a module's entry is an
    attribute of that module under that name: renamed or moved, the map would send a
    newcomer to the wrong file."""
    entries = _architecture_entries()
    placed = [p for top, entry in entries.items() for p in _placed(entry, f"stickypack.{top}")]
    assert ("stickypack.core.drain", "plan_scale_down") in placed
    assert ("stickypack.kube", "cache.node_images") in placed
    wrong = [f"{name} (in {module}'s entry)" for module, name in placed if not _holds(module, name)]
    assert not wrong, f"architecture.md names what is not there: {wrong}"


def test_the_stickypack_names_of_the_docs_exist() -> None:
    """Every backticked ``stickypack.<module>...`` name in README.md and docs/ is a module or
    an attribute under that name (``stickypack.yaml``, ``stickypack.cel``: a file and a Helm
    template)."""
    for doc in [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]:
        for name in re.findall(r"`(stickypack(?:\.\w+)+)(?:\(\))?`", doc.read_text()):
            if name not in ("stickypack.yaml", "stickypack.cel"):
                assert _holds("stickypack", name), f"{doc.name}: {name} does not exist"


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


def _helm_values_table() -> dict[str, tuple[str, int, int]]:
    """docs/helm.md's Values table: key -> (its default cell, its place among the row's keys,
    how many keys the row names). A cell of keys ``a.b.c``, ``.d``, ``.e`` names ``a.b.c``,
    ``a.b.d`` and ``a.b.e``."""
    text = (DOCS / "helm.md").read_text()
    table = text.split("\n## Values\n", 1)[1].split("\n| key |", 1)[1].split("\n\n", 1)[0]
    out: dict[str, tuple[str, int, int]] = {}
    for row in table.splitlines()[2:]:
        keys_cell, default_cell = [c.strip() for c in row.strip().strip("|").split(" | ")][:2]
        keys, parent = re.findall(r"`([^`]+)`", keys_cell), ""
        for i, key in enumerate(keys):
            key = parent + key if key.startswith(".") else key
            parent = key.rsplit(".", 1)[0]
            out[key] = (default_cell, i, len(keys))
    return out


def test_the_helm_values_table_names_every_key_with_its_default() -> None:
    """Every key of the chart's values.yaml is in docs/helm.md's table (a mapping either as
    itself or key by key), with its default: the backticked value (one per key where the cell
    names several), ``empty`` for an empty one, and for a mapping such as ``resources`` written
    out in words, each of its values. A list of routes is described in words, not checked."""
    documented = _helm_values_table()
    values = yaml.safe_load((ROOT / "charts" / "stickypack" / "values.yaml").read_text())
    seen: set[str] = set()

    def leaves(node: dict[str, Any], prefix: str) -> Iterator[tuple[str, Any]]:
        for name, value in node.items():
            key = prefix + name
            if key not in documented and isinstance(value, dict) and value:
                yield from leaves(value, key + ".")
            else:
                yield key, value

    for key, value in leaves(values, ""):
        assert key in documented, f"values.yaml's {key} is not in helm.md's Values table"
        seen.add(key)
        cell, place, keys = documented[key]
        where = f"helm.md, {key}: {cell!r} against values.yaml's {value!r}"
        said = re.findall(r"`([^`]+)`", cell)
        if keys > 1 and len(said) == keys:
            said = [said[place]]
        if cell == "empty":
            assert value in ({}, [], ""), where
        elif isinstance(value, list) and value and isinstance(value[0], dict):
            continue
        elif isinstance(value, dict) and not said:
            flat = yaml.safe_dump(value)
            assert all(str(v) in cell for v in re.findall(r": (\S+)\n", flat)), where
        else:
            assert said and yaml.safe_load(said[0]) == value, where
    assert set(documented) - seen == set(), "documented keys values.yaml does not have"
