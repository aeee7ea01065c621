"""Plugins of your own from a Python file: `simulate --plugins`, the extender's `plugins:`,
their errors in one line, and the contract checks on their answers."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from stickypack.cli import main
from stickypack.core import NodeTable, PluginContractError, Pod, SchedulingContext
from stickypack.plugin_files import PluginFileError, load_plugin_files
from stickypack.policies import load_policy_file

PLUGINS = '''
import numpy as np

from stickypack.core import MAX_NODE_SCORE, ScorePlugin

CALLS = []


class Youngest(ScorePlugin):
    """The newest node scores 100, the oldest 0."""

    name = "Youngest"

    def __init__(self, scale: int = 1) -> None:
        self.scale = scale

    def score(self, pod, table, idx, ctx):
        CALLS.append(len(idx))
        order = np.argsort(np.argsort(-table.created[idx], kind="stable"), kind="stable")
        top = max(len(idx) - 1, 1)
        return (MAX_NODE_SCORE * (len(idx) - 1 - order) // top // self.scale).astype(np.int64)


class Floats(ScorePlugin):
    name = "Floats"

    def score(self, pod, table, idx, ctx):
        return np.full(len(idx), 50.0)


class TooHigh(ScorePlugin):
    name = "TooHigh"

    def score(self, pod, table, idx, ctx):
        return np.full(len(idx), 1000, dtype=np.int64)


SCORERS = {"Youngest": Youngest, "Floats": Floats, "TooHigh": TooHigh}
'''


def policy(tmp_path: Path, scorer: str, name: str = "mine") -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(
        textwrap.dedent(f"""\
            name: {name}
            profiles:
              - name: all
                filters: [NodeUnschedulable, NodeResourcesFit]
                score:
                  - {{plugin: MostAllocated, weight: 1}}
                  - {scorer}
            """)
    )
    return path


@pytest.fixture
def plugin_file(tmp_path: Path) -> Path:
    path = tmp_path / "my_plugins.py"
    path.write_text(PLUGINS)
    return path


def test_simulate_runs_a_policy_with_a_plugin_of_ones_own(tmp_path, plugin_file, capsys) -> None:
    out = tmp_path / "r.json"
    mine = policy(tmp_path, "{plugin: Youngest, weight: 2, args: {scale: 2}}")
    args = ["simulate", "--scenario", "dask-burst", "--policies", "z2jh", "--policy-file", str(mine)]
    assert main([*args, "--plugins", str(plugin_file), "--jobs", "1", "--quiet", "--json", str(out)]) == 0
    results = json.loads(out.read_text())["results"]
    assert [r["policy"] for r in results] == ["z2jh", "mine"]
    # the module loaded from this test's file: other tests load the same text from files of
    # their own, whose CALLS stay empty
    (module,) = [
        m
        for n, m in list(sys.modules.items())
        if n.startswith("stickypack_plugins_") and Path(getattr(m, "__file__", "")) == plugin_file
    ]
    assert module.CALLS and max(module.CALLS) >= 2  # it scored real decisions
    assert main([*args]) == 2  # without --plugins the policy names an unknown plugin
    assert "unknown score plugin 'Youngest'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("scorer", "message"),
    [
        ("Floats", "score plugin Floats returned a float64 array of shape"),
        ("TooHigh", "score plugin TooHigh returned scores 1000..1000; scores are 0..100"),
    ],
)
def test_a_plugin_out_of_contract_is_one_line(tmp_path, plugin_file, capsys, scorer, message) -> None:
    args = ["simulate", "--scenario", "dask-burst", "--policy-file", str(policy(tmp_path, scorer))]
    assert main([*args, "--plugins", str(plugin_file), "--jobs", "1", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_the_contract_is_checked_only_for_plugins_from_outside(tmp_path, plugin_file) -> None:
    registry = load_plugin_files([plugin_file])
    table = NodeTable()
    for n in ("a", "b"):
        table.upsert_node(n, {"cpu": 4000, "memory": 2**33, "pods": 110})
    pod = Pod("p", requests={"cpu": 100})
    ours = load_policy_file(policy(tmp_path, "Floats"), registry)
    with pytest.raises(PluginContractError, match="Floats"):
        ours.select(pod, table, SchedulingContext(), np.random.default_rng(0))
    assert registry.checked == {"Youngest", "Floats", "TooHigh"}
    assert ours.profiles[0].checked and not load_policy_file(policy(tmp_path, "NodeAge")).profiles[0].checked


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("def broken(:\n", "my_plugins.py:1: syntax error"),
        ("raise RuntimeError('no GPU here')\n", "my_plugins.py: failed to load: RuntimeError: no GPU here"),
        ("X = 1\n", "defines none of FILTERS, SCORERS, MUTATORS"),
        ("SCORERS = [1]\n", "SCORERS must be a dict"),
        ("SCORERS = {'A': 3}\n", "SCORERS['A'] must map a name to a plugin class"),
        ("SCORERS = {'': object}\n", "SCORERS[''] must map a name to a plugin class"),
        ("SCORERS = {5: object}\n", "SCORERS[5] must map a name to a plugin class"),
        (
            "from stickypack.core.plugins.scaledown import NodeAge\nSCORERS = {'NodeAge': NodeAge}\n",
            "SCORERS names NodeAge, which is taken already",
        ),
    ],
)
def test_a_bad_plugin_file_is_one_line(tmp_path, capsys, text, message) -> None:
    path = tmp_path / "my_plugins.py"
    path.write_text(text)
    with pytest.raises(PluginFileError, match=message.replace("[", r"\[").replace("(", r"\(")):
        load_plugin_files([path])
    args = ["simulate", "--scenario", "dask-burst", "--policy-file", str(policy(tmp_path, "NodeAge"))]
    assert main([*args, "--plugins", str(path)]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert main([*args, "--plugins", str(tmp_path / "missing.py")]) == 2
    assert "missing.py: no such plugin file" in capsys.readouterr().err


def test_the_extender_takes_plugins_from_its_config(tmp_path, plugin_file, capsys) -> None:
    mine = policy(tmp_path, "{plugin: Youngest, weight: 3}")
    cfg = tmp_path / "extender.yaml"
    cfg.write_text(
        f"policy: {mine}\nplugins: [{plugin_file}]\nprofile: all\nfilters: []\nscore: [Youngest]\n"
    )
    assert main(["extender", "--config", str(cfg), "--check"]) == 0
    assert "extender weight 3" in capsys.readouterr().out
    cfg.write_text(f"policy: {mine}\nprofile: all\nfilters: []\nscore: [Youngest]\n")
    assert main(["extender", "--config", str(cfg), "--check"]) == 2
    assert "unknown score plugin 'Youngest'" in capsys.readouterr().err


def test_the_documented_example_runs(tmp_path) -> None:
    """The plugin file in docs/configuration.md, as written there, with a policy naming it."""
    doc = (Path(__file__).resolve().parents[1] / "docs/configuration.md").read_text()
    example = doc.split("```python\n# my_plugins.py\n", 1)[1].split("```", 1)[0]
    path = tmp_path / "my_plugins.py"
    path.write_text(example)
    out = tmp_path / "r.json"
    mine = policy(tmp_path, "{plugin: FewestPods, weight: 5}")
    args = ["simulate", "--scenario", "dask-burst", "--policy-file", str(mine), "--plugins", str(path)]
    assert main([*args, "--quiet", "--json", str(out)]) == 0
    assert json.loads(out.read_text())["results"][0]["pods_scheduled"] > 0


@pytest.mark.parametrize("name", ["default", "z2jh", "binderhub", "stickypack", "oracle"])
def test_policies_show_writes_a_policy_file_that_reads_back_the_same(tmp_path, capsys, name) -> None:
    """`stickypack policies --show` gives every argument, defaults included; the YAML it
    prints is a policy file that loads to a policy with the same description."""
    import yaml

    from stickypack.policies import load_builtin

    assert main(["policies", "--show", name]) == 0
    shown = capsys.readouterr().out
    path = tmp_path / "shown.yaml"
    path.write_text(shown)
    again = load_policy_file(path)
    assert again.describe() == load_builtin(name).describe() == yaml.safe_load(shown)
    if name == "stickypack":  # a default the built-in file leaves out is written
        assert "horizon_s: 3600.0" in shown


def test_policies_show_takes_a_file_with_its_plugins(tmp_path, plugin_file, capsys) -> None:
    mine = policy(tmp_path, "{plugin: Youngest, weight: 2}")
    assert main(["policies", "--show", str(mine), "--plugins", str(plugin_file)]) == 0
    assert "plugin: Youngest" in capsys.readouterr().out
    assert main(["policies", "--show", str(mine)]) == 2
    err = capsys.readouterr().err
    assert "unknown score plugin 'Youngest'" in err
    assert "built-in policies" not in err  # the file exists: its fault is all there is to say


def test_policies_show_of_a_misspelled_name_lists_the_built_in_ones(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["policies", "--show", "stikypack"]) == 2
    err = capsys.readouterr().err
    assert "stikypack: not a built-in policy (default, z2jh, binderhub, stickypack, oracle) nor a file" in err


BUILD_CHECKS = """
import numpy as np
from stickypack.core import PodMutator, ScorePlugin


class Misnamed(ScorePlugin):
    name = "SomethingElse"

    def score(self, pod, table, idx, ctx):
        return np.zeros(len(idx), dtype=np.int64)


class NotAPlugin:
    name = "NotAPlugin"

    def score(self, pod, table, idx, ctx):
        return np.zeros(len(idx), dtype=np.int64)


class Picky(ScorePlugin):
    name = "Picky"

    def __init__(self, level: int = 1) -> None:
        if level > 3:
            raise ValueError("level must be at most 3")
        self.level = level

    def score(self, pod, table, idx, ctx):
        return np.full(len(idx), self.level, dtype=np.int64)


class Forgetful(PodMutator):
    name = "Forgetful"

    def mutate(self, pod, table, ctx):
        return None


SCORERS = {"Misnamed": Misnamed, "NotAPlugin": NotAPlugin, "Picky": Picky}
MUTATORS = {"Forgetful": Forgetful}
"""


@pytest.mark.parametrize(
    ("scorer", "message"),
    [
        ("Misnamed", "Misnamed built a plugin named 'SomethingElse'; give its class name = 'Misnamed'"),
        (
            "NotAPlugin",
            "NotAPlugin built a NotAPlugin, not a score plugin (subclass stickypack.core.ScorePlugin)",
        ),
        ("{plugin: Picky, args: {level: 5}}", "Picky failed to build: ValueError: level must be at most 3"),
        (
            "{plugin: Picky, args: {level: many}}",
            "bad args for Picky: level: Input should be a valid integer",
        ),
    ],
)
def test_a_plugin_of_ones_own_is_checked_when_built(tmp_path, capsys, scorer, message) -> None:
    path = tmp_path / "checks.py"
    path.write_text(BUILD_CHECKS)
    args = ["simulate", "--scenario", "dask-burst", "--policy-file", str(policy(tmp_path, scorer))]
    assert main([*args, "--plugins", str(path), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_a_plugin_of_ones_own_shows_with_its_args_and_mutators_are_checked(tmp_path, capsys) -> None:
    path = tmp_path / "checks.py"
    path.write_text(BUILD_CHECKS)
    mine = policy(tmp_path, "{plugin: Picky, weight: 2, args: {level: 2}}")
    assert main(["policies", "--show", str(mine), "--plugins", str(path)]) == 0
    shown = capsys.readouterr().out
    assert "plugin: Picky\n    args:\n      level: 2\n" in shown
    again = tmp_path / "again.yaml"
    again.write_text(shown)
    registry = load_plugin_files([path, path])  # the same file twice: loaded once, no clash
    assert load_policy_file(again, registry).describe() == load_policy_file(mine, registry).describe()
    text = mine.read_text().replace("  - name: all\n", "  - name: all\n    mutate: [Forgetful]\n")
    mine.write_text(text)
    args = ["simulate", "--scenario", "dask-burst", "--policy-file", str(mine), "--plugins", str(path)]
    assert main([*args, "--quiet", "--jobs", "1"]) == 2
    assert "mutate plugin Forgetful returned a NoneType; expected a Pod" in capsys.readouterr().err


def test_plugins_without_the_policy_that_names_them_is_a_usage_error(tmp_path, plugin_file, capsys) -> None:
    assert main(["simulate", "--scenario", "dask-burst", "--plugins", str(plugin_file)]) == 2
    assert "--plugins is for the plugins a --policy-file names" in capsys.readouterr().err
    assert main(["policies", "--plugins", str(plugin_file)]) == 2
    assert "--plugins goes with --show FILE" in capsys.readouterr().err
    with pytest.raises(PluginFileError, match="a directory, not a plugin file"):
        load_plugin_files([tmp_path])
    exits = tmp_path / "exits.py"
    exits.write_text("import sys\nsys.exit(3)\n")
    with pytest.raises(PluginFileError, match="failed to load: SystemExit: 3"):
        load_plugin_files([exits])


def _scorer_file(path: Path, cls: str) -> Path:
    """A plugin file defining one score plugin class ``cls`` (every node scores 0)."""
    path.write_text(
        textwrap.dedent(f"""\
            import numpy as np
            from stickypack.core import ScorePlugin

            class {cls}(ScorePlugin):
                name = "{cls}"

                def score(self, pod, table, idx, ctx):
                    return np.zeros(len(idx), dtype=np.int64)

            SCORERS = {{"{cls}": {cls}}}
            """)
    )
    return path


def test_the_plugins_of_every_file_are_kept(tmp_path) -> None:
    # two files, one scorer each: the registry has both (the second file adds to the
    # first's, not to the built-in plugins alone)
    first = _scorer_file(tmp_path / "first.py", "Alpha")
    second = _scorer_file(tmp_path / "second.py", "Beta")
    registry = load_plugin_files([first, second])
    assert {"Alpha", "Beta"} <= set(registry.scorers)
    assert registry.checked == {"Alpha", "Beta"}


def test_each_file_is_a_module_of_its_own_so_its_classes_pickle(tmp_path) -> None:
    # pickle finds a class by its module's name in sys.modules: two files need two module
    # names, or the first file's class is looked up in the second's module
    import pickle

    registry = load_plugin_files(
        [_scorer_file(tmp_path / "a.py", "Alpha"), _scorer_file(tmp_path / "b.py", "Beta")]
    )
    alpha, beta = registry.scorers["Alpha"], registry.scorers["Beta"]
    assert pickle.loads(pickle.dumps(alpha)) is alpha and pickle.loads(pickle.dumps(beta)) is beta


def test_one_file_under_two_spellings_is_loaded_once(tmp_path, monkeypatch) -> None:
    # my_plugins.py relative to the working directory and its absolute path are one file:
    # its plugins once, no "taken already" (in either order)
    path = _scorer_file(tmp_path / "my_plugins.py", "Alpha")
    monkeypatch.chdir(tmp_path)
    for paths in ([path, Path("my_plugins.py")], [Path("my_plugins.py"), path]):
        assert "Alpha" in load_plugin_files(paths).scorers


def test_a_file_defining_a_kind_as_none_defines_none_of_it(tmp_path) -> None:
    # FILTERS = None reads as no filters (``getattr(...) or {}``), not as a bad FILTERS
    path = _scorer_file(tmp_path / "p.py", "Alpha")
    path.write_text(path.read_text() + "FILTERS = None\nMUTATORS = {}\n")
    assert "Alpha" in load_plugin_files([path]).scorers


@pytest.mark.parametrize("text", ["def broken(:\n", "raise RuntimeError('no GPU here')\n"])
def test_a_file_that_fails_to_load_leaves_no_module_behind(tmp_path, text) -> None:
    path = tmp_path / "broken.py"
    path.write_text(text)
    with pytest.raises(PluginFileError):
        load_plugin_files([path])
    left = [n for n, m in list(sys.modules.items()) if getattr(m, "__file__", None) == str(path)]
    assert left == []


def test_a_path_that_is_no_regular_file_is_refused_without_reading_it(tmp_path) -> None:
    # a named pipe called fifo.py exists but is no file: refused at once (is_file), not
    # opened, where reading would wait for a writer forever
    import os
    import threading

    fifo = tmp_path / "fifo.py"
    os.mkfifo(fifo)
    errors: list[str] = []

    def load() -> None:
        try:
            load_plugin_files([fifo])
        except PluginFileError as exc:
            errors.append(str(exc))

    thread = threading.Thread(target=load, daemon=True)
    thread.start()
    thread.join(5)
    blocked = thread.is_alive()
    if blocked:  # it is reading the pipe: write nothing and close, so the thread ends
        with open(fifo, "w"):
            pass
        thread.join(5)
    assert not blocked
    assert len(errors) == 1 and errors[0].startswith(f"{fifo}: "), errors


STATEFUL = """
import numpy as np
from stickypack.core import ScorePlugin


class RoundRobin(ScorePlugin):
    name = "RoundRobin"

    def __init__(self) -> None:
        self.calls = 0  # state kept between decisions, as a live service's plugin may

    def score(self, pod, table, idx, ctx):
        self.calls += 1
        out = np.zeros(len(idx), dtype=np.int64)
        out[self.calls % len(idx)] = 100
        return out


SCORERS = {"RoundRobin": RoundRobin}
"""


def test_a_plugin_keeping_state_starts_afresh_in_every_run(tmp_path, capsys) -> None:
    """`--seeds` runs one seed after another in one process with `--jobs 1` and in fresh
    forked workers otherwise: the JSON must not depend on it (a plugin's state of seed 0
    carried into seed 1's run made it do so)."""
    path = tmp_path / "stateful.py"
    path.write_text(STATEFUL)
    mine = policy(tmp_path, "{plugin: RoundRobin, weight: 2}")
    args = ["simulate", "--scenario", "binder-day", "--policy-file", str(mine), "--plugins", str(path)]
    outs = []
    for jobs, seeds in (("1", "0-1"), ("1", "1"), ("2", "0-1")):
        outs.append(tmp_path / f"r{jobs}-{seeds}.json")
        assert (
            main(
                [
                    *args,
                    "--policies",
                    "z2jh",
                    "--seeds",
                    seeds,
                    "--jobs",
                    jobs,
                    "--quiet",
                    "--json",
                    str(outs[-1]),
                ]
            )
            == 0
        )
    capsys.readouterr()
    one_by_one, seed_1, forked = (json.loads(o.read_text())["runs"] for o in outs)
    assert one_by_one == forked
    assert one_by_one[1] == seed_1[0]


PER_DECISION = """
import numpy as np
from stickypack.core import ScorePlugin


class FewestBuilds(ScorePlugin):
    name = "FewestBuilds"

    def score(self, pod, table, idx, ctx):
        if "builds" not in ctx.cache:  # once per decision, kept in its scratch space
            ctx.cache.update(builds=table.builds.copy())
        builds = ctx.cache["builds"][idx]
        return np.where(builds == builds.min(), 100, 0).astype(np.int64)


SCORERS = {"FewestBuilds": FewestBuilds}
"""


@pytest.mark.parametrize(
    "how", ["ctx.cache.update(builds=", "ctx.cache |= dict(builds=", "ctx.cache.setdefault('builds', "]
)
def test_the_extender_forgets_what_a_plugin_put_in_ctx_cache_after_each_decision(tmp_path, how) -> None:
    """`ctx.cache` is scratch space for one decision, in the simulator (cleared before each)
    and in the extender; a key set with `update` or `|=` once outlived its decision there,
    so the next pod was scored on the first one's view of the cluster."""
    from stickypack.extender.engine import Extender, select_profile
    from stickypack.kube.cache import ClusterCache

    now = 1_800_000_000.0

    def node(name: str) -> dict:
        status = {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}}
        return {
            "metadata": {"name": name},
            "status": {**status, "conditions": [{"type": "Ready", "status": "True"}]},
        }

    def build_pod(name: str, repo: str = "https://github.com/org/r", node_name: str | None = None) -> dict:
        meta = {"name": name, "namespace": "binder", "uid": name, "labels": {"component": "binderhub-build"}}
        spec = {"containers": [{"name": "b", "resources": {"requests": {"cpu": "1"}}}]}
        if node_name:
            spec["nodeName"] = node_name
        return {"metadata": {**meta, "annotations": {"binder-repo": repo}}, "spec": spec}

    path = tmp_path / "per_decision.py"
    path.write_text(PER_DECISION.replace("ctx.cache.update(builds=", how))
    mine = policy(tmp_path, "{plugin: FewestBuilds, weight: 1}")
    profile = select_profile(load_policy_file(mine, load_plugin_files([path])), "all")
    cache = ClusterCache(clock=lambda: now, ttl_clock=lambda: now)
    for name in ("node-0", "node-1"):
        cache.node_event("ADDED", node(name))
    ext = Extender(
        cache, profile, filter_names=[], score_names=["FewestBuilds"], clock=lambda: now, assume=False
    )

    def best(pod: str) -> list[str]:
        scores, _ = ext.prioritize({"Pod": build_pod(pod), "NodeNames": ["node-0", "node-1"]})
        return [s["Host"] for s in scores if s["Score"] == 10]

    assert best("b1") == ["node-0", "node-1"]
    running = build_pod("running", repo="https://github.com/org/other", node_name="node-0")
    cache.pod_event("ADDED", {**running, "status": {"phase": "Running"}})
    assert best("b2") == ["node-1"]  # node-0 now runs a build
