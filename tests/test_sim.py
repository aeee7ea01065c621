"""The simulator on the Dask stories, real trace files and bad input."""

from __future__ import annotations

import dataclasses
import gzip
import io
import itertools
import json
import re
import time
from pathlib import Path

import pytest
from rich.console import Console

from stickypack.cli import main
from stickypack.sim.metrics import BoundTracker, Series, integrate_step, window_max_step
from stickypack.sim.model import BinderModel
from stickypack.sim.report import (
    Comparison,
    PolicyRun,
    SeedSweep,
    plot_figures,
    render_sweep_table,
    render_table,
)
from stickypack.sim.traces import Launch, TraceErrors, read_launches, repo_url
from stickypack.sim.workloads import binder_jobs

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "mybinder-events"
DAY = DATA / "events-2019-03-09.jsonl.gz"


def run_json(tmp_path: Path, *args: str) -> dict:
    out = tmp_path / "r.json"
    assert main(["simulate", *args, "--json", str(out), "--quiet"]) == 0
    return json.loads(out.read_text())


def by_policy(result: dict) -> dict[str, dict]:
    return {r["policy"]: r for r in result["results"]}


def test_dask_burst_default_pins_nodes_packing_does_not(tmp_path):
    result = run_json(tmp_path, "--scenario", "dask-burst")
    r = by_policy(result)
    assert set(r) == {"default", "z2jh", "binderhub", "stickypack"}
    assert 15 <= r["default"]["peak_nodes"] <= 25  # "grow the cluster to about 20 nodes"
    assert r["default"]["final_nodes"] >= 10
    for name in ("z2jh", "stickypack"):
        assert r[name]["final_nodes"] == r[name]["lower_bound_final_nodes"] == 1
        assert r[name]["node_hours"] < r["default"]["node_hours"]
    for row in result["results"]:
        assert row["node_hours"] >= row["floor_node_hours"] >= row["lower_bound_node_hours"] > 0
        assert row["pods_scheduled"] == 1020


def test_parallel_runs_report_in_the_order_asked_with_the_same_bytes(tmp_path):
    # The workers take the costliest policy first; the report must not show it.
    outs = {}
    for jobs in ("1", "2"):
        outs[jobs] = tmp_path / f"jobs{jobs}.json"
        argv = ["simulate", "--scenario", "dask-adapt", "--policies", "z2jh,default,stickypack"]
        assert main([*argv, "--jobs", jobs, "--json", str(outs[jobs]), "--quiet"]) == 0
    result = json.loads(outs["2"].read_text())
    assert [r["policy"] for r in result["results"]] == ["z2jh", "default", "stickypack"]
    assert outs["1"].read_bytes() == outs["2"].read_bytes()


def test_seeds_report_each_seed_as_its_own_run_and_the_means(tmp_path, capsys):
    argv = ["--scenario", "dask-adapt", "--policies", "z2jh,stickypack"]
    sweep = run_json(tmp_path, *argv, "--seeds", "0-1,3")
    assert sweep["seeds"] == [0, 1, 3]
    table = capsys.readouterr().out
    assert "mean (min-max) over 3 seeds" in table and "fewest node-h" in table
    # each run is what --seed alone writes, and the results are their means
    singles = [run_json(tmp_path, *argv, "--seed", str(seed)) for seed in (0, 1, 3)]
    assert sweep["runs"] == singles
    assert len({r["results"][0]["node_hours"] for r in singles}) > 1  # the seeds differ
    for i, row in enumerate(sweep["results"]):
        assert row["policy"] == singles[0]["results"][i]["policy"]
        values = [s["results"][i]["node_hours"] for s in singles]
        assert row["node_hours"] == pytest.approx(sum(values) / 3, abs=1e-3)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--seeds", "x"], "--seeds: 'x' is not a seed or a range of seeds"),
        (["--seeds", "3-1"], "--seeds: the range '3-1' runs backwards"),
        (["--seeds", "0-2,1"], "--seeds: seed 1 is given twice"),
        (["--seeds", "0-1", "--seed", "4"], "give --seed or --seeds, not both"),
        (["--seed", "-1"], "--seed must be >= 0"),
        (["--load-scale", "0"], "--load-scale must be > 0 and <= 1000"),
        (["--load-scale", "1e9"], "--load-scale must be > 0 and <= 1000"),  # billions of launches in memory
        (["--jobs", "0"], "--jobs must be >= 1"),
        # an O(n^2) check once made this run for hours before the first simulation
        (["--seeds", "0-100000000000"], "--seeds: at most 1000 seeds"),
        (["--policies", ",,"], "--policies names no policy"),
        (["--load-scale", "2"], "--load-scale applies to --trace and binder-day; dask-adapt has a fixed"),
        # rich markup in a message once crashed the error printer itself
        (["--policies", "[/x]"], "unknown policy '[/x]'"),
    ],
)
def test_bad_seeds_are_clear_errors(args, message, capsys):
    assert main(["simulate", "--scenario", "dask-adapt", *args, "--quiet"]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("policies", "message"),
    [
        # an empty list once meant the default four, and empty items were dropped unsaid
        ("", "--policies names no policy"),
        (" , ", "--policies names no policy"),
        ("default,,z2jh", "--policies 'default,,z2jh': item 2 is empty"),
        ("z2jh,", "--policies 'z2jh,': item 2 is empty"),
        (",default", "--policies ',default': item 1 is empty"),
    ],
)
def test_an_empty_policy_list_or_item_is_an_error(policies, message, tmp_path, capsys):
    mine = tmp_path / "mine.yaml"
    mine.write_text("name: mine\nprofiles: [{name: a, filters: [], score: []}]\n")
    out = tmp_path / "out" / "r.json"
    for extra in ([], ["--policy-file", str(mine)]):  # with a policy file of one's own too
        argv = ["simulate", "--scenario", "dask-adapt", "--policies", policies, *extra]
        assert main([*argv, "--quiet", "--json", str(out)]) == 2
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
        assert "valid: default, z2jh, binderhub, stickypack, oracle" in err
        assert not out.parent.exists()  # refused before the run


def test_same_seed_same_bytes(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    for out in (a, b):
        assert main(["simulate", "--scenario", "dask-adapt", "--json", str(out), "--quiet"]) == 0
    assert a.read_bytes() == b.read_bytes()
    c = tmp_path / "c.json"
    assert (
        main(
            [
                "simulate",
                "--scenario",
                "binder-day",
                "--seed",
                "3",
                "--json",
                str(c),
                "--quiet",
                "--policies",
                "binderhub",
            ]
        )
        == 0
    )
    d = tmp_path / "d.json"
    assert (
        main(
            [
                "simulate",
                "--scenario",
                "binder-day",
                "--seed",
                "4",
                "--json",
                str(d),
                "--quiet",
                "--policies",
                "binderhub",
            ]
        )
        == 0
    )
    assert c.read_bytes() != d.read_bytes()


def test_trace_day_all_policies(tmp_path):
    result = run_json(tmp_path, "--trace", str(DAY), "--policies", "default,z2jh,binderhub,stickypack,oracle")
    r = by_policy(result)
    for row in r.values():
        assert row["builds"] > 100
        assert 0 < row["build_cache_hit_rate"] < 1
        assert row["pods_unscheduled"] == 0
        assert row["ratio_to_bound"] >= 1.0
    # packing beats spreading on node-hours; sticky builds beat no stickiness on cache hits
    assert r["z2jh"]["node_hours"] < r["default"]["node_hours"]
    assert r["binderhub"]["build_cache_hit_rate"] > r["default"]["build_cache_hit_rate"]
    assert r["stickypack"]["build_cache_hit_rate"] > r["z2jh"]["build_cache_hit_rate"]
    assert r["oracle"]["node_hours"] <= min(r[p]["node_hours"] for p in ("default", "z2jh", "binderhub"))
    # every build is a hit or one kind of miss; a repo's first build is the same under any policy
    firsts = set()
    parts = ("build_cache_hit_rate", "build_first_share", "build_cache_lost_share", "build_elsewhere_share")
    for row in r.values():
        assert sum(row[k] for k in parts) == pytest.approx(1.0, abs=1e-5)
        firsts.add(round(row["build_first_share"] * row["builds"]))
    assert len(firsts) == 1 and firsts.pop() > 0
    # locality is what sends rebuilds to the node that has the cache; rendezvous order moves
    # when nodes come and go between a repo's builds (hours apart), the build history does not
    elsewhere = {p: r[p]["build_elsewhere_share"] for p in r}
    assert elsewhere["stickypack"] < elsewhere["binderhub"] < elsewhere["default"]
    assert elsewhere["stickypack"] < elsewhere["default"] / 4


def test_plots_written(tmp_path):
    assert (
        main(
            [
                "simulate",
                "--scenario",
                "binder-day",
                "--policies",
                "z2jh,stickypack",
                "--plots",
                str(tmp_path / "plots"),
                "--quiet",
            ]
        )
        == 0
    )
    for name in ("nodes.png", "build_time_cdf.png"):
        data = (tmp_path / "plots" / name).read_bytes()
        assert data.startswith(b"\x89PNG") and len(data) > 10_000
    # a run without builds into the same directory once left binder-day's CDF there, as if
    # it were the Dask run's
    plots = ["--plots", str(tmp_path / "plots"), "--quiet"]
    assert main(["simulate", "--scenario", "dask-adapt", "--policies", "z2jh", *plots]) == 0
    assert sorted(f.name for f in (tmp_path / "plots").iterdir()) == ["nodes.png"]


def test_the_plotted_bound_and_floor_end_where_the_table_says():
    # The lower bound's line dropped to 0 at the run's last instant (every pod has left then)
    # while the table's title said "bound's final nodes 1", and the floor's stopped at its
    # last step, an hour before the end: both now hold the value in effect just before the
    # end up to the end, as the node lines do.
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from stickypack.policies import load_builtin
    from stickypack.sim.runner import compare
    from stickypack.sim.workloads import dask_burst

    cmp = compare(lambda: dask_burst(0), [load_builtin("z2jh")], seed=0, jobs=1)
    (run,) = cmp.runs
    assert run.series.bound_n[-1] == 0 < run.metrics["lower_bound_final_nodes"]  # the case
    figures = plot_figures(cmp)
    try:
        lines = {line.get_label(): line for line in figures["nodes.png"].axes[0].get_lines()}
        end = lines["z2jh"].get_xdata()[-1]
        bound, floor = lines["lower bound (z2jh's run)"], lines["CA floor (z2jh's run)"]
        assert bound.get_xdata()[-1] == floor.get_xdata()[-1] == end
        assert bound.get_ydata()[-1] == run.metrics["lower_bound_final_nodes"]
        # the floor's last step came before the end (a step plot stopped the line there)
        assert run.series.floor_t[-1] < run.series.node_t[-1]
        assert floor.get_ydata()[-1] == run.series.floor_n[-1] > 0
        assert 0 not in list(bound.get_ydata())[-2:]
    finally:
        for fig in figures.values():
            plt.close(fig)


def test_the_plots_keep_every_policy_and_the_legend_clear_of_the_data():
    # The legend sat on the lines (a trace day's binderhub at 6 nodes under it), a policy whose
    # line another drew over was not there at all (default under binderhub all day), the node
    # axis read 2.5 nodes, and the names of 15 trace files made a title 3,000 pixels wide.
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    days = ",".join(f"events-2019-03-{day:02d}.jsonl.gz" for day in range(4, 19))
    cmp = Comparison(f"trace:{days}", 0, 1.0)
    t, n = [0.0, 3600.0, 7200.0, 36000.0], [1, 3, 5, 2]
    for name in ("default", "binderhub", "stickypack"):  # the first two alike, as on a trace day
        node_n = n if name != "stickypack" else [1, 2, 2, 1]
        series = Series(t, node_n, t, [1, 2, 2, 1], t, [1, 2, 2, 2], [300.0, 90.0, 600.0])
        cmp.runs.append(PolicyRun(name, {}, series))
    figures = plot_figures(cmp)
    try:
        assert sorted(figures) == ["build_time_cdf.png", "nodes.png"]
        for fig in figures.values():
            (ax,) = fig.axes
            fig.canvas.draw()
            renderer = fig.canvas.get_renderer()
            legend, axes = ax.get_legend().get_window_extent(renderer), ax.get_window_extent(renderer)
            assert legend.x0 >= axes.x1  # beside the plot, not on it
            assert all(len(line) <= 100 for line in ax.get_title().splitlines())
            assert "events-2019-03-18.jsonl.gz" in ax.get_title().replace("\n", "")
            widths = [line.get_linewidth() for line in ax.get_lines()[:3]]
            assert widths[0] > widths[1] > widths[2]  # a policy drawn over another shows around it
        nodes = figures["nodes.png"].axes[0]
        assert all(float(tick).is_integer() for tick in nodes.get_yticks())
        assert nodes.get_xlabel() == "hours since midnight UTC of the trace's first day"
    finally:
        for fig in figures.values():
            plt.close(fig)
    for scenario, label in (
        ("binder-day", "hours since midnight UTC"),
        ("dask-burst", "hours since the start"),
    ):
        one = Comparison(scenario, 0, 1.0, [PolicyRun("z2jh", {}, Series(t, n, t, n, t, n, []))])
        figures = plot_figures(one)
        assert list(figures) == ["nodes.png"] and figures["nodes.png"].axes[0].get_xlabel() == label
        plt.close(figures["nodes.png"])


def test_unknown_names_exit_2_and_list_valid(capsys):
    assert main(["simulate", "--scenario", "nope"]) == 2
    err = capsys.readouterr().err
    assert "dask-burst" in err and "binder-day" in err
    assert main(["simulate", "--scenario", "dask-burst", "--policies", "default,fancy"]) == 2
    err = capsys.readouterr().err
    assert "'fancy'" in err and "stickypack" in err


def test_policy_file(tmp_path, capsys):
    good = tmp_path / "mine.yaml"
    good.write_text(
        "name: mine\nprofiles:\n  - name: p\n    filters: [NodeResourcesFit]\n"
        "    score: [{plugin: MostAllocated, weight: 1}]\n"
    )
    result = run_json(tmp_path, "--scenario", "dask-burst", "--policy-file", str(good))
    assert [r["policy"] for r in result["results"]] == ["mine"]
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nprofiles:\n  - name: p\n    filters: [Nope]\n    score: []\n")
    assert main(["simulate", "--scenario", "dask-burst", "--policy-file", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "bad.yaml" in err and "profiles[0]" in err and "Nope" in err


def test_malformed_trace_lines_counted_not_fatal(tmp_path, capsys):
    trace = tmp_path / "events-bad.jsonl.gz"
    good = (
        '{"timestamp": "2019-03-04T00:0%d:00+00:00", "provider": "GitHub", '
        '"spec": "o/r/master", "status": "success"}'
    )
    lines = [good % i for i in range(5)]
    lines.insert(2, "{not json")
    lines.insert(4, '{"timestamp": "2019-03-04T00:03:00+00:00", "provider": "GitHub"}')
    lines.append('["a list"]')
    with gzip.open(trace, "wt") as fh:
        fh.write("\n".join(lines) + "\n")
    errors = TraceErrors()
    launches = read_launches([trace], errors)
    assert len(launches) == 5
    assert errors.count == 3
    assert errors.first[0].startswith(f"{trace}:3: not JSON")
    assert f"{trace}:5: missing field 'spec'" in errors.first[1]
    result = run_json(tmp_path, "--trace", str(trace), "--policies", "z2jh")
    assert result["malformed_trace_lines"] == 3
    assert "3 malformed trace line(s)" in capsys.readouterr().out


def _launch_line(timestamp: str, provider: object = "GitHub", spec: object = "o/r/master") -> str:
    return json.dumps({"timestamp": timestamp, "provider": provider, "spec": spec, "status": "success"})


def test_a_stray_timestamp_is_an_error_not_a_replay_of_millennia(tmp_path):
    # once, one year-9999 line made a replay of 8,000 years that never finished
    day = [_launch_line(f"2019-03-04T10:0{i}:00+00:00") for i in range(4)]
    stray = _launch_line("9999-12-31T23:59:00+00:00")
    named = tmp_path / "events-2019-03-04.jsonl"
    named.write_text("\n".join([*day[:2], stray, *day[2:]]) + "\n")
    errors = TraceErrors()
    launches = read_launches([named], errors)
    assert len(launches) == 4 and max(a.t for a in launches) < 86400
    assert errors.first == [
        f"{named}:3: timestamp 9999-12-31T23:59:00+00:00 is not on the file's day 2019-03-04"
    ]
    # a file not named for its day keeps its longest run of events; a week is kept whole
    unnamed = tmp_path / "mine.jsonl"
    week = [_launch_line(f"2019-03-{d:02d}T12:00:00+00:00") for d in range(4, 11)]
    unnamed.write_text("\n".join([_launch_line("1970-01-01T00:00:00+00:00"), *week, stray]) + "\n")
    errors = TraceErrors()
    launches = read_launches([unnamed], errors)
    assert len(launches) == 7 and launches[-1].t == 6 * 86400 + 12 * 3600
    assert errors.count == 2
    assert errors.first[0].startswith(f"{unnamed}:1: timestamp 1970-01-01T00:00:00+00:00 is 17,960 days from")


@pytest.mark.parametrize(
    ("provider", "spec", "why"),
    [(None, "o/r/master", "provider is not a name: None"), ("GitHub", {"x": 1}, "spec is not a repository")],
)
def test_provider_and_spec_must_be_strings(tmp_path, provider, spec, why):
    trace = tmp_path / "t.jsonl"
    trace.write_text(_launch_line("2019-03-04T10:00:00Z", provider, spec) + "\n")
    errors = TraceErrors()
    assert read_launches([trace], errors) == [] and errors.count == 1 and why in errors.first[0]


def test_bad_timestamp_names_the_field_and_a_zoneless_one_is_utc(tmp_path, monkeypatch):
    trace = tmp_path / "events-ts.jsonl"
    trace.write_text(
        '{"timestamp": "yesterday", "provider": "GitHub", "spec": "o/r/master"}\n'
        '{"timestamp": "2019-03-04T05:00:00", "provider": "GitHub", "spec": "o/r/master"}\n'
        '{"timestamp": "2019-03-04T06:00:00+00:00", "provider": "GitHub", "spec": "o/r/master"}\n'
    )
    monkeypatch.setenv("TZ", "America/New_York")  # a zoneless time must not be read as local
    time.tzset()
    try:
        errors = TraceErrors()
        launches = read_launches([trace], errors)
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()
    assert errors.count == 1
    assert errors.first[0] == f"{trace}:1: timestamp is not ISO 8601: 'yesterday'"
    assert [a.t for a in launches] == [5 * 3600.0, 6 * 3600.0]  # from the day's UTC midnight


def test_unwritable_outputs_fail_before_the_run(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    for flag, target in (("--plots", blocker / "plots"), ("--json", blocker / "out" / "r.json")):
        assert main(["simulate", "--scenario", "dask-burst", flag, str(target)]) == 2
        captured = capsys.readouterr()
        assert f"{flag}: cannot create directory" in captured.err
        assert "node-h" not in captured.out  # failed before simulating
    assert main(["simulate", "--scenario", "dask-burst", "--json", str(tmp_path)]) == 2
    captured = capsys.readouterr()
    assert f"--json: {tmp_path} is a directory" in captured.err and "node-h" not in captured.out


def test_a_usage_error_creates_no_output_directory(tmp_path, capsys):
    # the output directories were made before the names were checked, so a typo left them
    plots, out = tmp_path / "plots", tmp_path / "out"
    outputs = ["--plots", str(plots), "--json", str(out / "r.json")]
    for args in (
        ["--scenario", "nope"],
        ["--scenario", "dask-burst", "--policies", "fancy"],
        ["--trace", str(tmp_path / "nope.jsonl")],
    ):
        assert main(["simulate", *args, *outputs, "--quiet"]) == 2
        assert "error" in capsys.readouterr().err
        assert not plots.exists() and not out.exists()


@pytest.mark.parametrize(
    ("flag", "target", "message"),
    [
        ("--plots", "a-file", "--plots: {d}/a-file is a file, not a directory"),
        ("--json", "a-file/r.json", "--json: {d}/a-file is a file, not a directory"),
        ("--json", "a-file/x/r.json", "--json: cannot create directory {d}/a-file/x: {d}/a-file is a file"),
    ],
)
def test_an_output_under_a_file_says_which_file(tmp_path, capsys, flag, target, message):
    # "cannot create directory .../a-file: File exists", as if a directory were in the way
    (tmp_path / "a-file").write_text("mine\n")
    args = ["--scenario", "dask-adapt", "--policies", "z2jh", flag, str(tmp_path / target)]
    assert main(["simulate", *args]) == 2
    err = capsys.readouterr().err
    assert message.format(d=tmp_path) in " ".join(err.split()) and "Traceback" not in err
    assert (tmp_path / "a-file").read_text() == "mine\n"


def test_several_days_replay_back_to_back():
    errors = TraceErrors()
    days = [DATA / "events-2019-03-09.jsonl.gz", DATA / "events-2018-11-05.jsonl.gz"]
    launches = read_launches(days, errors)
    assert errors.count == 0
    assert launches[0].t == 0.0  # the 2018 day comes first, from its midnight
    assert 86400 <= launches[-1].t < 2 * 86400  # the 2019 day follows as day two
    assert all(a.t <= b.t for a, b in itertools.pairwise(launches))


def test_a_directory_means_its_event_files():
    from stickypack.sim.traces import trace_files

    files = trace_files([DATA])
    assert len(files) == 15 and all(f.name.startswith("events-") for f in files)


def test_python_dash_m_stickypack_is_the_command():
    # "No module named stickypack.__main__": only python -m stickypack.cli worked
    import subprocess
    import sys

    argv = [sys.executable, "-m", "stickypack", "simulate", "--scenario", "nope"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2
    assert "stickypack simulate: error: unknown scenario 'nope'" in done.stderr
    assert "Traceback" not in done.stderr


def _children_cpu_s(pid: int) -> list[float]:
    """The CPU time (user + system, seconds) of each child process of ``pid`` (Linux /proc)."""
    import os

    ticks = os.sysconf("SC_CLK_TCK")
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            # after "(comm)": state, ppid, ... utime and stime are the 12th and 13th fields
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone meanwhile
        if int(fields[1]) == pid:
            found.append((int(fields[11]) + int(fields[12])) / ticks)
    return found


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_ctrl_c_stops_a_run_in_one_line(jobs, tmp_path):
    # a 20-line traceback from deep in the engine, as if the simulator had crashed
    import os
    import signal
    import subprocess
    import sys

    plots = tmp_path / "plots"  # created once every input is checked, just before the run
    argv = [sys.executable, "-m", "stickypack", "simulate", "--trace", str(DAY), "--load-scale", "20"]
    argv += ["--policies", "z2jh,stickypack", "--jobs", jobs, "--quiet", "--plots", str(plots)]
    # a new process group, as a shell gives a command, and Ctrl-C reaches the whole group
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )

    def under_way() -> bool:
        # a day at x20 takes minutes: the run is under way once the plots directory is there
        # and, with workers, each of them is simulating (an idle worker has used next to no
        # CPU; one interrupted while waiting for its task would print its own traceback)
        if not plots.is_dir():
            return False
        return int(jobs) == 1 or sum(cpu >= 0.5 for cpu in _children_cpu_s(proc.pid)) >= int(jobs)

    try:
        deadline = time.monotonic() + 120
        while not under_way():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the run never got under way"
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    assert proc.returncode == 130
    assert err.strip() == "stickypack simulate: interrupted" and out == ""


def test_missing_trace_is_a_clear_error(tmp_path, capsys):
    assert main(["simulate", "--trace", str(tmp_path / "nope.jsonl")]) == 2
    assert "trace not found" in capsys.readouterr().err


def test_a_day_name_that_is_no_date_is_reported_not_a_traceback(tmp_path, capsys):
    trace = tmp_path / "events-2019-02-30.jsonl"
    trace.write_text('{"timestamp": "2019-02-28T10:00:00", "provider": "GitHub", "spec": "a/b/main"}\n')
    assert main(["simulate", "--trace", str(trace), "--policies", "default", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "the name's day 2019-02-30 is not a date" in out and "Traceback" not in out


def test_a_trace_directory_that_cannot_be_listed_is_one_line(tmp_path, capsys, monkeypatch):
    # tests run as root here, which lists any directory: make the listing fail as it would
    def refuse(self):
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "iterdir", refuse)
    assert main(["simulate", "--trace", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"Permission denied: '{tmp_path}'" in err and "Traceback" not in err


def test_a_trace_of_only_bad_lines_says_where(tmp_path, capsys):
    trace = tmp_path / "events-junk.jsonl"
    trace.write_text('{"provider": "GitHub"}\nnot json\n')
    assert main(["simulate", "--trace", str(trace)]) == 2
    err = capsys.readouterr().err
    assert "no readable launch events; 2 malformed line(s)" in err
    assert f"{trace}:1: missing field 'timestamp'" in err and f"{trace}:2: not JSON" in err


def test_a_load_scale_that_keeps_no_launch_is_an_error_not_a_table_of_zeros(tmp_path, capsys):
    trace = tmp_path / "events-few.jsonl"
    trace.write_text(
        "".join(_launch_line(f"2019-03-04T1{i}:00:00Z", "GitHub", "o/r/master") + "\n" for i in range(3))
    )
    out = tmp_path / "out"
    assert (
        main(["simulate", "--trace", str(trace), "--load-scale", "0.1", "--plots", str(out), "--quiet"]) == 2
    )
    err = capsys.readouterr().err
    assert (
        "--load-scale 0.1 keeps fewer than one of the trace's 3 launch(es)" in err and "Traceback" not in err
    )
    assert not out.exists()  # a usage error leaves no directory
    # a scale that keeps some on average but none at this seed says so too
    for seed in range(50):
        if (
            main(["simulate", "--trace", str(trace), "--load-scale", "0.4", "--seed", str(seed), "--quiet"])
            == 2
        ):
            assert f"kept none of the trace's 3 launch(es) at seed {seed}" in capsys.readouterr().err
            break
    else:
        pytest.fail("no seed of 50 kept none of 3 launches at 0.4 (0.6**3 = 22% each)")


def test_repo_url():
    assert repo_url("GitHub", "org/repo/feature/with/slash") == "https://github.com/org/repo"
    assert repo_url("Gist", "user/abc123/master") == "https://gist.github.com/user/abc123"
    assert repo_url("Zenodo", "10.5281/zenodo.3242074") == "zenodo:10.5281/zenodo.3242074"
    assert repo_url("GitLab", "group/sub/repo/main") == "gitlab:group/sub/repo"
    with pytest.raises(ValueError):
        repo_url("GitHub", "justone")


def test_bound_and_floor():
    bound = BoundTracker([1000, 1000, 10])
    import numpy as np

    bound.change(0.0, np.array([600, 100, 1]), 1)  # above half a node: 1
    bound.change(10.0, np.array([600, 100, 1]), 1)  # two big pods: 2
    bound.change(20.0, np.array([600, 100, 1]), -1)
    assert bound.times == [0.0, 10.0, 20.0] and bound.values == [1, 2, 1]
    assert integrate_step(bound.times, bound.values, 30.0) == 10 + 20 + 10
    ft, fv = window_max_step(bound.times, bound.values, 5.0, 30.0)
    assert (ft, fv) == ([0.0, 10.0, 25.0], [1, 2, 1])


def test_pods_big_in_different_resources_may_share_a_node():
    """A cpu-heavy and a memory-heavy pod fit one node together: the bound is 1, not 2."""
    import numpy as np

    bound = BoundTracker([1000, 1000, 10])
    bound.change(0.0, np.array([600, 100, 1]), 1)
    bound.change(0.0, np.array([100, 600, 1]), 1)
    assert bound.values[-1] == 1
    bound.change(5.0, np.array([700, 100, 1]), 1)  # a second cpu-heavy pod needs its own node
    assert bound.values[-1] == 2
    halves = BoundTracker([1000, 1000, 10])
    halves.change(0.0, np.array([500, 100, 1]), 1)
    halves.change(0.0, np.array([500, 100, 1]), 1)  # exactly half each: both fit one node
    assert halves.values[-1] == 1


def test_sim_config_overrides_and_errors(tmp_path, capsys):
    cfg = tmp_path / "sim.yaml"
    cfg.write_text("dask: {worker_cpu_m: '1', worker_memory: 4Gi}\npool: {provision_delay_s: 60}\n")
    base = by_policy(run_json(tmp_path, "--scenario", "dask-burst", "--policies", "z2jh"))["z2jh"]
    big = by_policy(
        run_json(tmp_path, "--scenario", "dask-burst", "--policies", "z2jh", "--sim-config", str(cfg))
    )
    # workers of 1 cpu instead of 600m: more nodes at the peak
    assert big["z2jh"]["peak_nodes"] > base["peak_nodes"]
    bad = tmp_path / "bad.yaml"
    bad.write_text("autoscaler: {scan_every: 3}\n")
    assert main(["simulate", "--scenario", "dask-burst", "--sim-config", str(bad)]) == 2
    assert "autoscaler.scan_every: unknown key" in capsys.readouterr().err
    bad.write_text("cache: {high_images: lots}\n")
    assert main(["simulate", "--scenario", "dask-burst", "--sim-config", str(bad)]) == 2
    assert "cache.high_images: bad value 'lots'" in capsys.readouterr().err
    bad.write_text("weather: {}\n")
    assert main(["simulate", "--scenario", "dask-burst", "--sim-config", str(bad)]) == 2
    assert "unknown section(s) weather" in capsys.readouterr().err
    bad.write_text("autoscaler: [\n")
    assert main(["simulate", "--scenario", "dask-burst", "--sim-config", str(bad)]) == 2
    assert f"{bad}:2:1: not valid YAML: expected the node content" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("text", "message"),
    [
        # a scan interval <= 0 once made the autoscaler loop forever
        ("autoscaler: {scan_interval_s: -1}\n", "autoscaler.scan_interval_s must be >= 1, got -1.0"),
        ("binder: {session_max_s: 1e12}\n", "binder.session_max_s must be <= 7 days"),
        ("cache: {high_images: 10, low_images: 20}\n", "cache.low_images must be in [0, high_images]"),
        ("pool: {allocatable: {cpu: '0'}}\n", "pool.allocatable.cpu must be > 0 and <= 1099511627776, got 0"),
        ("binder: {first_launch_build_prob: 1.5}\n", "binder.first_launch_build_prob must be in [0, 1]"),
        # sizes past int64's reach once ended in an OverflowError mid-run
        ("dask: {worker_memory: 1000Ei}\n", "dask.worker_memory must be >= 0 and <= 1125899906842624"),
        ("binder: {user_cpu_m: 2.5}\n", "binder.user_cpu_m: bad value 2.5: millicores are whole numbers"),
        ("binder: {session_sigma: 50}\n", "binder.session_sigma must be in [0, 5]"),
        ("1: {a: 1}\nfoo: {}\n", "unknown section(s) 1, foo"),
        ("autoscaler: {'[/x]': 1}\n", "autoscaler.[/x]: unknown key"),
        # every pool would get the one name, which prices are looked up by
        ("pool: {name: big}\n", "pool.name: unknown key; valid: allocatable, labels, max_size"),
        ("pool: " + "[" * 5000 + "]" * 5000 + "\n", "not valid YAML: nested too deeply"),
        # each of these was once taken without a word: cut to 2**50, read as 1, infinite
        (
            "pool: {allocatable: {memory: 1e300}}\n",
            "pool.allocatable.memory must be > 0 and <= 1125899906842624",
        ),
        ("pool: {allocatable: {example.com/gpu: 1e300}}\n", "pool.allocatable.example.com/gpu must be >= 0"),
        ("pool: {allocatable: {null: 1}}\n", "pool.allocatable: bad value {None: 1}: a resource name is"),
        (
            "pool: {allocatable: {'': 1}}\n",
            "pool.allocatable: bad value {'': 1}: a resource name is a non-empty",
        ),
        ("cache: {high_images: true}\n", "cache.high_images: bad value True: a number, not true or false"),
        (
            "binder: {changes_per_day: .inf}\n",
            "binder.changes_per_day: bad value inf: must be a finite number",
        ),
        ("pool: {price_per_hour: .nan}\n", "pool.price_per_hour: bad value nan: must be a finite number"),
        (
            "pool: {labels: {'a b': x}}\n",
            "a b=x is not a valid Kubernetes label",
        ),
        # the key given is the one named (it once said "pool.max_size must be >= min_size
        # and >= 1, got 500", a value the file did not have)
        ("pool: {min_size: 600}\n", "pool.min_size must be <= max_size (500), got 600"),
        ("pool: {max_size: 0}\n", "pool.max_size must be >= 1, got 0"),
        (
            "autoscaler: {scale_down_utilization_threshold: -0.1}\n",
            "autoscaler.scale_down_utilization_threshold must be in [0, 1], got -0.1",
        ),
        (
            "autoscaler: {scale_down_utilization_threshold: 1.5}\n",
            "autoscaler.scale_down_utilization_threshold must be in [0, 1], got 1.5",
        ),
    ],
)
def test_sim_config_out_of_range_values_are_named(tmp_path, capsys, text, message):
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    assert main(["simulate", "--scenario", "dask-burst", "--sim-config", str(bad)]) == 2
    assert message in capsys.readouterr().err


def test_sim_config_takes_a_utilization_threshold_of_zero():
    """The autoscaler's flag checks no range and its FAQ suggests 0 (only nodes whose pods
    request nothing are then underutilized): the model takes 0 and 1, the ends of [0, 1]."""
    from stickypack.sim.model import AutoscalerConfig

    for threshold in (0.0, 1.0):
        assert (
            AutoscalerConfig(scale_down_utilization_threshold=threshold).scale_down_utilization_threshold
            == threshold
        )


def test_sim_config_reads_sizes_in_the_models_units(tmp_path):
    """docs: ``*_cpu_m`` take millicores (a whole number) or a quantity string in cores; the
    memory and image sizes take bytes or a quantity."""
    from stickypack.sim.config import load_sim_config

    path = tmp_path / "c.yaml"
    path.write_text(
        "binder: {build_cpu_m: '1', user_cpu_m: 250.0, build_memory: 2Gi, builder_image_size: 1G}\n"
        "dask: {worker_cpu_m: 1500m, worker_image_size: 1Gi}\n"
    )
    config = load_sim_config(path)
    assert config.binder.build_cpu_m == 1000  # '1' core = 1000 millicores
    assert config.binder.user_cpu_m == 250  # a float that is whole: millicores as given
    assert config.binder.build_memory == 2 * 1024**3
    assert config.binder.builder_image_size == 10**9
    assert config.dask.worker_cpu_m == 1500  # '1500m' = 1.5 cores
    assert config.dask.worker_image_size == 1024**3


def test_sim_config_takes_true_only_where_the_model_has_a_flag(tmp_path):
    from stickypack.sim.config import SimConfigError, load_sim_config

    path = tmp_path / "c.yaml"
    path.write_text("autoscaler: {soft_taint_unneeded: false}\n")
    assert load_sim_config(path).autoscaler.soft_taint_unneeded is False
    path.write_text("binder: {user_cpu_m: true}\n")  # not 1 millicore
    with pytest.raises(SimConfigError, match=r"binder\.user_cpu_m: bad value True"):
        load_sim_config(path)


def test_sim_config_a_partial_allocatable_changes_only_what_it_names_in_every_pool(tmp_path):
    """``pool: {allocatable: {cpu: 4}}`` sets every pool's cpu to 4000 m and keeps each
    pool's own memory and pods; the other pool keys override every pool too."""
    from stickypack.sim.config import load_sim_config
    from stickypack.sim.model import NodePool
    from stickypack.sim.workloads import Workload

    path = tmp_path / "c.yaml"
    path.write_text("pool: {allocatable: {cpu: 4}, provision_delay_s: 60}\n")
    small = NodePool(name="small", allocatable={"cpu": 2000, "memory": 8 * 1024**3, "pods": 30})
    big = NodePool(name="big", allocatable={"cpu": 16000, "memory": 64 * 1024**3, "pods": 110})
    workload = load_sim_config(path).apply_to(Workload("w", [], [small, big]))
    assert [p.name for p in workload.pools] == ["small", "big"]
    assert [p.allocatable for p in workload.pools] == [
        {"cpu": 4000, "memory": 8 * 1024**3, "pods": 30},
        {"cpu": 4000, "memory": 64 * 1024**3, "pods": 110},
    ]
    assert [p.provision_delay_s for p in workload.pools] == [60, 60]


def test_sim_config_checks_the_pools_provision_delay_against_the_autoscalers_wait(tmp_path):
    """A pool's nodes must come up within ``autoscaler.max_node_provision_time_s`` (900 s by
    default): 1000 s is refused by default and taken when the wait is 1200 s."""
    from stickypack.sim.config import SimConfigError, load_sim_config

    path = tmp_path / "c.yaml"
    path.write_text("pool: {provision_delay_s: 1000}\n")
    with pytest.raises(SimConfigError, match=r"pool\.provision_delay_s must be <= autoscaler"):
        load_sim_config(path)
    path.write_text("pool: {provision_delay_s: 1000}\nautoscaler: {max_node_provision_time_s: 1200}\n")
    assert load_sim_config(path).pool == {"provision_delay_s": 1000}


def test_an_empty_sim_config_is_every_default(tmp_path):
    from stickypack.sim.config import SimConfig, load_sim_config

    path = tmp_path / "c.yaml"
    path.write_text("# nothing set\n")
    assert load_sim_config(path) == SimConfig()


def test_a_lone_surrogate_in_yaml_is_refused_where_it_is(tmp_path, capsys):
    # YAML's "\ud800" escape makes a str no output can encode: a policy named so once ended
    # the run, after simulating, in a UnicodeEncodeError traceback printing the table
    mine = tmp_path / "mine.yaml"
    mine.write_text('name: "x\\ud800"\nprofiles: [{name: a, filters: [], score: []}]\n')
    assert main(["simulate", "--scenario", "dask-adapt", "--policy-file", str(mine), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert f"{mine}:1:7: not valid YAML: " in err and "surrogate" in err and "Traceback" not in err
    conf = tmp_path / "sc.yaml"
    conf.write_text('pool:\n  labels: {"a\\udc80": b}\n')
    assert main(["simulate", "--scenario", "dask-adapt", "--sim-config", str(conf), "--quiet"]) == 2
    assert f"{conf}:2:12: not valid YAML: " in capsys.readouterr().err


def test_a_key_given_twice_in_yaml_is_refused_not_half_lost(tmp_path, capsys):
    # once the second section silently replaced the first: scan_interval_s 30 was lost
    conf = tmp_path / "sc.yaml"
    conf.write_text(
        "autoscaler: {scan_interval_s: 30}\ncache: {hit_time_fraction: 0.5}\n"
        "autoscaler: {scale_down_unneeded_time_s: 300}\n"
    )
    assert main(["simulate", "--scenario", "dask-adapt", "--sim-config", str(conf), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert f"{conf}:3:1: not valid YAML: found duplicate key 'autoscaler'" in err
    mine = tmp_path / "mine.yaml"
    mine.write_text("name: a\nprofiles: [{name: p, filters: [], score: [], filters: [NodeReady]}]\n")
    assert main(["simulate", "--scenario", "dask-adapt", "--policy-file", str(mine), "--quiet"]) == 2
    assert f"{mine}:2:46: not valid YAML: found duplicate key 'filters'" in capsys.readouterr().err
    # a merge key's values may be overridden, as YAML means them to be
    merged = tmp_path / "merged.yaml"
    merged.write_text(
        "name: m\nprofiles:\n  - &b {name: p, match: {labels: {a: b}}, filters: [], score: []}\n"
        "  - {<<: *b, name: q, match: {}}\n"
    )
    assert main(["simulate", "--scenario", "dask-adapt", "--policy-file", str(merged), "--quiet"]) == 0


def test_node_records_account_for_every_build_and_every_lost_cache():
    from stickypack.policies import load_builtin
    from stickypack.sim.engine import Simulation
    from stickypack.sim.workloads import trace_workload

    workload = trace_workload(read_launches([DATA / "events-2019-03-05.jsonl.gz"], TraceErrors()), 0, 1.0)
    result = Simulation(load_builtin("stickypack"), workload, seed=0).run()
    m, nodes = result.metrics, result.nodes
    assert sum(n.builds for n in nodes) == m["builds"]
    assert max(n.builds for n in nodes) == round(m["max_node_build_share"] * m["builds"])
    lost = sum(n.caches_lost for n in nodes)
    assert lost == round(m["build_cache_lost_share"] * m["builds"]) > 0
    # on this day the image cleaner prunes nothing rebuilt later: every lost cache went with a
    # deleted node
    assert all(n.deleted_at is not None for n in nodes if n.caches_lost)
    assert len({n.name for n in nodes}) == len(nodes)
    assert all(n.deleted_at is None or n.deleted_at > n.ready_at for n in nodes)


@pytest.mark.parametrize("every_s", [120.0, 3600.0])
def test_change_model_rebuilds_at_the_change_rate_however_often_a_repo_launches(every_s):
    """A repo changes 0.5 times a day (Poisson), so over 200 days it rebuilds about 100
    times whether it is launched every 2 minutes or every hour (a launch builds only if a change
    came since the last build; launches that find the image current do not draw again)."""
    days = 200
    launches = [Launch(k * every_s, "https://github.com/org/hot") for k in range(int(days * 86400 / every_s))]
    model = BinderModel(first_launch_build_prob=0.0, changes_per_day=0.5)
    builds = sum(job.needs_build for job in binder_jobs(launches, model, seed=3))
    # Poisson(100) +- 4 sd, less the launches' own delay (at most one gap a change)
    assert 60 <= builds <= 140, builds
    assert binder_jobs(launches, model, seed=3) == binder_jobs(launches, model, seed=3)


def test_tie_breaks_are_drawn_apart_from_the_traffic():
    """The simulation's seed draws only kube-scheduler's tie-breaks: on one workload other
    draws schedule the same pods and builds, and z2jh's random ties change its node-hours
    (what ``benchmarks/tie_breaks.py`` relies on)."""
    from stickypack.policies import load_builtin
    from stickypack.sim.engine import Simulation
    from stickypack.sim.workloads import trace_workload

    workload = trace_workload(read_launches([DATA / "events-2019-03-11.jsonl.gz"], TraceErrors()), 0, 1.0)
    z2jh = load_builtin("z2jh")
    runs = [Simulation(z2jh, workload, seed=draw).run().metrics for draw in (0, 1)]
    again = Simulation(z2jh, workload, seed=0).run().metrics
    assert runs[0] == again  # a draw is reproducible on the same workload
    for key in ("builds", "pods_scheduled"):
        assert runs[0][key] == runs[1][key]
    assert runs[0]["node_hours"] != runs[1]["node_hours"]


def test_a_policys_run_does_not_depend_on_the_others_compared():
    """One policy's metrics are the same alone, beside others, and under another name (what
    ``benchmarks/policy_trials.py`` relies on to cache the built-ins' runs)."""
    import dataclasses

    from stickypack.policies import load_builtin
    from stickypack.sim.runner import compare
    from stickypack.sim.workloads import trace_workload

    workload = trace_workload(read_launches([DATA / "events-2019-03-11.jsonl.gz"], TraceErrors()), 2, 1.0)
    ours = load_builtin("stickypack")
    renamed = dataclasses.replace(load_builtin("stickypack"), name="candidate")
    alone = compare(lambda: workload, [ours], seed=2, jobs=1).runs[0].metrics
    beside = compare(lambda: workload, [load_builtin("z2jh"), renamed], seed=2, jobs=1).runs
    alone.pop("wall_s")
    assert beside[1].policy == "candidate"
    assert {k: v for k, v in beside[1].metrics.items() if k != "wall_s"} == alone
    assert beside[0].metrics["node_hours"] != alone["node_hours"]


@pytest.mark.parametrize(
    "args",
    [
        ["simulate", "--scenario", "dask-burst", "--policy-file"],
        ["simulate", "--scenario", "dask-burst", "--sim-config"],
        ["extender", "--check", "--config"],
    ],
)
def test_a_binary_or_unreadable_file_is_one_line(tmp_path, capsys, args):
    binary = tmp_path / "policy.yaml"
    binary.write_bytes(b"name: x\n\xff\xfe")
    assert main([*args, str(binary)]) == 2
    err = capsys.readouterr().err
    assert f"{binary}: not UTF-8 text (byte 0xff at offset 8)" in err and "Traceback" not in err
    assert main([*args, str(tmp_path)]) == 2  # a directory
    assert f"{tmp_path}: cannot read: Is a directory" in capsys.readouterr().err


def test_a_partial_allocatable_changes_only_what_it_names(tmp_path):
    cfg = tmp_path / "sim.yaml"
    cfg.write_text("pool: {allocatable: {memory: 8Gi}}\n")
    base = by_policy(run_json(tmp_path, "--scenario", "dask-burst", "--policies", "z2jh"))["z2jh"]
    small = by_policy(
        run_json(tmp_path, "--scenario", "dask-burst", "--policies", "z2jh", "--sim-config", str(cfg))
    )["z2jh"]
    # 3 workers of 2.25 GiB fit a node of 8 GiB, 53 a node of 121 GiB: many more nodes
    assert small["peak_nodes"] > 3 * base["peak_nodes"]


def test_a_whole_float_of_millicores_is_millicores(tmp_path):
    as_int, as_float = tmp_path / "int.yaml", tmp_path / "float.yaml"
    as_int.write_text("dask: {worker_cpu_m: 2000}\n")
    as_float.write_text("dask: {worker_cpu_m: 2000.0}\n")
    args = ["--scenario", "dask-adapt", "--policies", "z2jh", "--sim-config"]
    runs = [by_policy(run_json(tmp_path, *args, str(c))) for c in (as_int, as_float)]
    assert runs[0] == runs[1]


def test_pods_that_never_fit_are_called_out(tmp_path, capsys):
    cfg = tmp_path / "sim.yaml"
    cfg.write_text("dask: {worker_cpu_m: 100000000}\n")  # 100,000 cores: fits no node
    result = by_policy(
        run_json(tmp_path, "--scenario", "dask-burst", "--policies", "z2jh", "--sim-config", str(cfg))
    )["z2jh"]
    assert result["pods_unscheduled"] > 0 and result["pods_scheduled"] == 0
    out = capsys.readouterr().out
    assert f"z2jh: {result['pods_unscheduled']} pod(s) never scheduled" in out


def test_a_policy_file_may_not_reuse_a_name(tmp_path, capsys):
    mine = tmp_path / "mine.yaml"
    mine.write_text("name: default\nprofiles: [{name: a, filters: [], score: []}]\n")
    args = ["simulate", "--scenario", "dask-adapt", "--policies", "default", "--policy-file", str(mine)]
    assert main(args) == 2
    assert "policy 'default' is given twice" in capsys.readouterr().err


@pytest.mark.parametrize("width", [80, 100, 120, 150, 200])
def test_a_narrow_terminal_never_breaks_a_number_in_the_tables(width):
    # rich cut cells to fit a terminal: "stickypa\u2026" at 150 columns, node-hours 1234.6 as
    # "123\u2026" at 100, a number the JSON does not have; then it folded them, "1234." over
    # "6" at 100 columns and "(1234.6-12" over "37.9)" at 120: a reader took 1234 for the
    # node-hours. On a narrow terminal the columns go into several tables instead.
    metrics = {"node_hours": 1234.56, "ratio_to_bound": 1.23456, "ratio_to_floor": 1.1875}
    metrics |= {"peak_nodes": 123, "final_nodes": 12, "pending_p95_s": 1234.0, "builds": 4321}
    metrics |= {"build_cache_hit_rate": 0.6471, "build_cache_lost_share": 0.0312, "build_p50_s": 316.0}
    metrics |= {"build_p95_s": 1882.0, "max_node_build_share": 0.1234, "wall_s": 123.45}
    series = Series([], [], [], [], [], [], [])
    policies = ("default", "z2jh", "binderhub", "stickypack")

    def comparison(seed: int) -> Comparison:
        cmp = Comparison("trace:events-2019-03-05.jsonl.gz", seed, 10.0)
        for name in policies:
            seeded = {"node_hours": 1234.56 + 3.3 * seed, "build_cache_hit_rate": 0.6471 + 1e-4 * seed}
            cmp.runs.append(PolicyRun(name, metrics | seeded, series))
        return cmp

    def printed(render) -> list[str]:
        console = Console(width=width, file=io.StringIO(), color_system=None)
        render(console)
        lines = console.file.getvalue().splitlines()
        assert all(len(line) <= width for line in lines)
        assert not any("\u2026" in line for line in lines)
        return lines

    single = printed(lambda console: render_table(comparison(0), console))
    cells = ["1234.6", "1.235", "1.188", "123", "12", "1234", "4321", "64.7%", "3.1%", "316", "1882"]
    for name in policies:  # every cell whole on its policy's row, and each row's cells once
        rows = [line for line in single if line.startswith(f"\u2502 {name} ")]
        assert rows
        words = " ".join(rows).replace("\u2502", " ").split()
        for cell in [*cells, "12.3%", "123.45"]:
            assert cell in words
        assert len([word for word in words if word != name]) == 13  # the name starts each table's row
    sweep = printed(lambda console: render_sweep_table(SeedSweep([comparison(0), comparison(1)]), console))
    text = " ".join(line.replace("\u2502", " ") for line in sweep).split()
    # a mean with its range, each whole; a range whose ends print alike is left out
    assert "1236.2" in text and "(1234.6-1237.9)" in text and text.count("64.7%") == len(policies)
    assert "(64.7%-64.7%)" not in text


def test_markup_in_names_and_trace_lines_is_printed_as_is(tmp_path, capsys):
    mine = tmp_path / "mine.yaml"
    mine.write_text('name: "[/bad]"\nprofiles: [{name: a, filters: [], score: []}]\n')
    trace = tmp_path / "events-2019-03-04.jsonl"
    lines = [_launch_line(f"2019-03-04T10:0{i}:00+00:00") for i in range(4)]
    lines.append(_launch_line("[red]x"))
    trace.write_text("\n".join(lines) + "\n")
    out_json = tmp_path / "r.json"
    args = ["simulate", "--trace", str(trace), "--policy-file", str(mine), "--json", str(out_json), "--quiet"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "[/bad]" in out and "timestamp is not ISO 8601: '[red]x'" in out
    assert json.loads(out_json.read_text())["results"][0]["policy"] == "[/bad]"


def test_odd_trace_lines_and_files_are_counted_not_fatal(tmp_path):
    day = [_launch_line(f"2019-03-04T10:0{i}:00+00:00") for i in range(4)]
    odd = [
        "[" * 100_000 + "]" * 100_000,  # once a RecursionError that ended the run
        _launch_line("0001-01-01T00:00:00+14:00"),  # once a ValueError while describing it
        _launch_line("x" * 10_000),
    ]
    trace = tmp_path / "odd.jsonl"
    trace.write_text("\n".join(day + odd) + "\n")
    # a gzip header, then a deflate block of the reserved type 3: once a zlib.error traceback
    corrupt = gzip.compress(b"")[:10] + b"\xff\xff\xff\xff"
    (tmp_path / "corrupt.jsonl.gz").write_bytes(corrupt)
    errors = TraceErrors()
    launches = read_launches([trace, tmp_path / "corrupt.jsonl.gz"], errors)
    assert len(launches) == 4
    assert errors.count == 4
    assert f"{trace}:5: JSON nested too deeply" in errors.first
    long_line = f"{trace}:7: timestamp is not ISO 8601: 'xxx"
    assert any(e.startswith(long_line) and len(e) < 200 for e in errors.first)
    assert any(f"{trace}:6: timestamp" in e and "s since the epoch" in e for e in errors.first)
    assert any(e.startswith(f"{tmp_path / 'corrupt.jsonl.gz'}: cannot read file") for e in errors.first)


def test_a_number_too_long_to_convert_is_a_malformed_line(tmp_path, capsys):
    # json.loads raises a plain ValueError (not JSONDecodeError) for an integer of more than
    # 4300 digits (Python's int_max_str_digits): once a traceback that ended the run
    day = [_launch_line(f"2019-03-04T10:0{i}:00+00:00") for i in range(4)]
    huge = '{"timestamp": ' + "9" * 5000 + ', "provider": "GitHub", "spec": "o/r/master"}'
    trace = tmp_path / "events-2019-03-04.jsonl"
    trace.write_text("\n".join([*day, huge]) + "\n")
    errors = TraceErrors()
    assert len(read_launches([trace], errors)) == 4
    assert errors.count == 1 and errors.first[0].startswith(f"{trace}:5: not JSON")
    assert main(["simulate", "--trace", str(trace), "--policies", "default", "--quiet"]) == 0
    assert "1 malformed trace line(s)" in capsys.readouterr().out


def test_a_lone_surrogate_in_a_spec_is_a_malformed_line(tmp_path, capsys):
    # "\ud800" is valid JSON to Python but no UTF-8 string: once a UnicodeEncodeError
    # traceback from the rendezvous hash of the repo, after the trace was read
    day = [_launch_line(f"2019-03-04T10:0{i}:00+00:00") for i in range(4)]
    odd = '{"timestamp": "2019-03-04T10:05:00", "provider": "GitHub", "spec": "o\\ud800/r/main"}'
    trace = tmp_path / "events-2019-03-04.jsonl"
    trace.write_text("\n".join([*day, odd]) + "\n")
    errors = TraceErrors()
    launches = read_launches([trace], errors)
    assert len(launches) == 4 and errors.count == 1
    assert errors.first[0].startswith(f"{trace}:5: spec is not a repository spec")
    args = ["simulate", "--trace", str(trace), "--policies", "binderhub,stickypack", "--quiet", "--jobs", "1"]
    assert main(args) == 0
    assert "1 malformed trace line(s)" in capsys.readouterr().out


def test_a_status_that_is_not_a_word_is_a_malformed_line(tmp_path):
    # a list or a number as status was once skipped as "not a success", uncounted
    day = [_launch_line(f"2019-03-04T10:0{i}:00+00:00") for i in range(4)]
    failed = json.dumps(
        {"timestamp": "2019-03-04T10:06:00", "provider": "GitHub", "spec": "o/f/m", "status": "failure"}
    )
    odd = '{"timestamp": "2019-03-04T10:05:00", "provider": "GitHub", "spec": "o/r/m", "status": ["success"]}'
    trace = tmp_path / "events-2019-03-04.jsonl"
    trace.write_text("\n".join([*day, odd, failed]) + "\n")
    errors = TraceErrors()
    assert len(read_launches([trace], errors)) == 4  # the failed launch is not replayed, nor counted
    assert errors.count == 1 and errors.first == [f"{trace}:5: status is not a word: ['success']"]


def _seeded_simulation(policy: str, jobs: list, pool, seed_repos: dict[str, str], cache=None):
    """A Simulation whose nodes, as they join, hold ``seed_repos[node]``'s image and its
    history entry (as if built earlier in the replay); ``binds`` records (time, repo, node)
    of each build."""
    from stickypack.policies import load_builtin
    from stickypack.sim.engine import Simulation
    from stickypack.sim.workloads import Workload

    class Seeded(Simulation):
        binds: list[tuple[float, str, str]]

        def _join(self, node) -> None:
            super()._join(node)
            repo = seed_repos.get(node.name)
            if repo is not None:
                node.cache.touch(repo)
                self.history.record(repo, node.name, 0.0)

        def _bind(self, sp, slot) -> None:
            super()._bind(sp, slot)
            if sp.pod.build_repo:
                self.binds.append((self.now, sp.pod.build_repo, self.by_slot[slot].name))

    sim = Seeded(load_builtin(policy), Workload("seeded", jobs, [pool], BinderModel()), cache=cache)
    sim.binds = []
    return sim


def _filler(name: str, cpu_m: int, node: str, duration_s: float):
    from stickypack.core.pod import Pod
    from stickypack.core.resources import CPU, MEMORY
    from stickypack.sim.workloads import PodJob

    gib = 1024**3
    pod = Pod(
        name=name,
        requests={CPU: cpu_m, MEMORY: gib},
        nonzero_cpu=cpu_m,
        nonzero_memory=gib,
        node_selector={"kubernetes.io/hostname": node},
    )
    return PodJob(0.0, pod, duration=duration_s)


def test_a_build_waiting_for_its_cache_node_does_not_hold_up_other_builds():
    # Once, pending pods of one shape were skipped after the first failed: a build held by
    # DelayForLocality for its full cache node kept every later build of the same size
    # pending, here B's for 600 s though B's own cache node had room from t=100.
    from stickypack.core.resources import CPU, MEMORY, PODS
    from stickypack.sim.model import NodePool
    from stickypack.sim.workloads import LaunchJob

    alloc = {CPU: 4000, MEMORY: 64 * 1024**3, PODS: 110}
    pool = NodePool(name="p", allocatable=alloc, min_size=2, max_size=2)
    jobs = [
        _filler("fill-1", 3500, "p-00001", 5000.0),  # A's cache node: no room for a build
        _filler("fill-2", 2500, "p-00002", 5000.0),
        _filler("fill-2s", 1000, "p-00002", 100.0),  # B's cache node has room from t=100
        LaunchJob(10.0, "A", 60.0, True, 300.0),
        LaunchJob(20.0, "B", 60.0, True, 300.0),
    ]
    sim = _seeded_simulation("stickypack", jobs, pool, {"p-00001": "A", "p-00002": "B"})
    sim.run()
    when = {repo: (t, node) for t, repo, node in sim.binds}
    assert when["B"] == (100.0, "p-00002")  # as soon as its cache node has room
    assert when["A"][0] == pytest.approx(610.0)  # A waited its 600 s, then went where there was room


def test_an_image_the_cleaner_prunes_leaves_the_build_history():
    # Once the history kept pointing builds at nodes whose image the cleaner had deleted.
    from stickypack.core.resources import CPU, MEMORY, PODS
    from stickypack.sim.model import CacheConfig, NodePool
    from stickypack.sim.workloads import LaunchJob

    alloc = {CPU: 8000, MEMORY: 64 * 1024**3, PODS: 110}
    pool = NodePool(name="p", allocatable=alloc, min_size=1, max_size=1)
    jobs = [LaunchJob(10.0 + 1000 * i, repo, 60.0, True, 100.0) for i, repo in enumerate(["r1", "r2", "r3"])]
    sim = _seeded_simulation("stickypack", jobs, pool, {}, cache=CacheConfig(high_images=2, low_images=1))
    sim.run()
    assert [repo for _, repo, _ in sim.binds] == ["r1", "r2", "r3"]
    node = sim.binds[0][2]
    # the third image made the cleaner prune to one: only r3's image and history are left
    assert sim.history.nodes_for("r1", sim.now) == [] and sim.history.nodes_for("r2", sim.now) == []
    assert sim.history.nodes_for("r3", sim.now) == [node]


def test_a_pool_slower_than_the_autoscaler_waits_is_refused(tmp_path, capsys):
    cfg = tmp_path / "sim.yaml"
    cfg.write_text("pool: {provision_delay_s: 1200}\n")
    assert main(["simulate", "--scenario", "dask-burst", "--sim-config", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert "pool.provision_delay_s must be <= autoscaler.max_node_provision_time_s (900" in err
    cfg.write_text("pool: {provision_delay_s: 1200}\nautoscaler: {max_node_provision_time_s: 1800}\n")
    args = ["--scenario", "dask-burst", "--policies", "z2jh", "--sim-config", str(cfg)]
    result = by_policy(run_json(tmp_path, *args))
    assert result["z2jh"]["pending_p95_s"] >= 1200


def test_binder_day_spans_the_whole_day_in_its_diurnal_shape():
    # it once cut the thinned launch times at a count, which dropped the last two hours
    import numpy as np

    from stickypack.sim.workloads import LaunchJob, binder_day

    for seed in (0, 1):
        t = np.array([j.t for j in binder_day(seed).jobs if isinstance(j, LaunchJob)])
        hourly = np.bincount((t // 3600).astype(int), minlength=24)
        assert 12_800 - 500 < t.size < 12_800 + 500  # Poisson(12,800) +- 4.4 sd
        assert t.max() > 23.5 * 3600 and hourly[22] > 0.3 * hourly.max() and hourly[23] > 0.3 * hourly.max()
        assert hourly.argmax() in (13, 14, 15)
        # rate 1 + 0.39 cos(...) over 24 h: the busiest hour ~5.8% of the day, the quietest ~2.5%
        assert 0.052 < hourly.max() / t.size < 0.064 and 0.019 < hourly.min() / t.size < 0.031


def _record_trims(name: str):
    """dask-adapt (seed 0) under a built-in policy, recording per trim the workers retired,
    the nodes of those kept and how many were not placed yet."""
    from stickypack.policies import load_builtin
    from stickypack.sim.engine import Simulation
    from stickypack.sim.workloads import dask_adapt

    class Recording(Simulation):
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            self.retired: list[list[str]] = []
            self.kept_nodes: list[set[str | None]] = []
            self.unplaced: list[int] = []

        def _trim(self, job) -> None:
            before = set(self.groups.get(job.group, {}))
            self.unplaced.append(sum(sp.node is None for sp in self.groups.get(job.group, {}).values()))
            super()._trim(job)
            after = self.groups.get(job.group, {})
            self.retired.append(sorted(before - set(after)))
            self.kept_nodes.append({sp.node for sp in after.values()})

    sim = Recording(load_builtin(name), dask_adapt(0), seed=0)
    sim.run()
    return sim


def test_every_policy_with_distributed_retirement_retires_the_same_dask_workers():
    # the trims once drew from the tie-break stream, which each policy uses differently, so
    # the policies were compared on different retirements
    retired = {name: _record_trims(name).retired for name in ("default", "z2jh", "binderhub")}
    assert [len(r) for r in retired["z2jh"]] == [90, 90, 90]
    assert retired["default"] == retired["z2jh"] == retired["binderhub"]


def test_node_aware_retirement_keeps_the_dask_workers_on_the_fewest_nodes():
    from stickypack.policies import load_builtin

    assert load_builtin("stickypack").dask_retirement == "node-aware"
    assert load_builtin("z2jh").dask_retirement == "distributed"
    ours, theirs = _record_trims("stickypack"), _record_trims("z2jh")
    assert [len(r) for r in ours.retired] == [90, 90, 90]
    # a node (7,910 millicores, 29 GiB) holds 12 workers (600 millicores, 2.25 GiB): the
    # 10 kept are those of the fullest node
    assert [len(nodes) for nodes in ours.kept_nodes] == [1, 1, 1]
    assert ours.unplaced == [0, 0, 0]  # every worker placed: the plugin's case (docs/simulator.md)
    assert all(len(nodes) >= 5 for nodes in theirs.kept_nodes)  # random retirement pins many


def test_dask_adapt_node_aware_retirement_lets_nodes_go(tmp_path):
    r = by_policy(run_json(tmp_path, "--scenario", "dask-adapt", "--policies", "z2jh,stickypack"))
    assert r["stickypack"]["final_nodes"] == r["stickypack"]["lower_bound_final_nodes"] == 1
    assert r["z2jh"]["final_nodes"] >= 5
    assert r["stickypack"]["node_hours"] < 0.9 * r["z2jh"]["node_hours"]


def test_nodes_ready_at_once_take_the_pending_pods_in_the_same_scan(tmp_path):
    # with provision_delay_s 0, new nodes once sat empty until the next scan (tainted as
    # deletion candidates meanwhile): pods waited two scans, not one at most
    cfg = tmp_path / "instant.yaml"
    cfg.write_text("pool: {provision_delay_s: 0}\n")
    result = run_json(tmp_path, "--scenario", "dask-burst", "--policies", "z2jh", "--sim-config", str(cfg))
    row = by_policy(result)["z2jh"]
    assert row["pods_unscheduled"] == 0 and row["pending_p95_s"] <= 10.0  # one scan interval


def _cpu_job(name: str, t: float, duration: float):
    from stickypack.core.pod import Pod
    from stickypack.core.resources import CPU, MEMORY
    from stickypack.sim.workloads import PodJob

    pod = Pod(name=name, requests={CPU: 1000, MEMORY: 2**30}, nonzero_cpu=1000, nonzero_memory=2**30)
    return PodJob(t, pod, duration=duration)


def _small_pool():
    from stickypack.core.resources import CPU, MEMORY, PODS
    from stickypack.sim.model import NodePool

    return NodePool(name="p", allocatable={CPU: 4000, MEMORY: 16 * 2**30, PODS: 110}, min_size=0)


def test_a_pod_created_at_a_scan_with_nothing_else_left_still_gets_its_node():
    # The autoscaler leaves a pod created at the very instant of its scan to the next scan;
    # the run once stopped there instead ("nothing can change"), with the pod unscheduled
    # and no node-hours, as if it fit no node.
    from stickypack.policies import load_builtin
    from stickypack.sim.engine import Simulation
    from stickypack.sim.workloads import Workload

    jobs = [_cpu_job("p0", 10.0, 100.0)]  # the first scan is at 10 s
    result = Simulation(load_builtin("z2jh"), Workload("at-a-scan", jobs, [_small_pool()]), seed=0).run()
    m = result.metrics
    assert (m["pods_scheduled"], m["pods_unscheduled"]) == (1, 0)
    # asked at the 20 s scan, ready 210 s later, the pod runs 230-330 s
    assert [(n.ready_at, n.deleted_at) for n in result.nodes] == [(230.0, None)]
    assert m["node_hours"] * 3600 == pytest.approx(330 - 20)
    assert m["pending_p95_s"] == pytest.approx(220.0)


def test_repo_url_github_git_suffix_is_the_same_repo():
    # BinderHub's GitHub provider strips a ".git" suffix from the repo name: both specs are
    # https://github.com/jakevdp/PythonDataScienceHandbook (both in events-2019-03-04)
    url = "https://github.com/jakevdp/PythonDataScienceHandbook"
    assert repo_url("GitHub", "jakevdp/PythonDataScienceHandbook.git/master") == url
    assert repo_url("GitHub", "jakevdp/PythonDataScienceHandbook/master") == url
    # only a suffix, and case is kept (image names hash the case-sensitive slug)
    assert repo_url("GitHub", "org/my.github.io/main") == "https://github.com/org/my.github.io"
    qiskit = repo_url("GitHub", "Qiskit/qiskit-tutorial/master")
    assert qiskit != repo_url("GitHub", "QISKit/qiskit-tutorial/master")


def test_repo_url_unquotes_escaped_git_and_gitlab_urls():
    # BinderHub unquotes the Git provider's URL and GitLab's namespace: an escaped spec the
    # re-saved archive left as is ("%2f", "%2E") names the same repo as its decoded form
    assert repo_url("GitLab", "d-e%2fdx-punch/master") == repo_url("GitLab", "d-e/dx-punch/master")
    assert repo_url("GitLab", "group%2Fproject/main") == "gitlab:group/project"
    # as BinderHub gets it (namespace escaped): the ref is all after the first slash
    assert repo_url("GitLab", "group%2Fproject/feature/x") == "gitlab:group/project"
    git = "git:github.com/sungykim/math3976"
    assert repo_url("Git", "github%2Ecom/sungykim/math3976/65d3846abdee78fea9c05ccbad7e3dd85cc91914") == git
    assert repo_url("Git", "github.com/sungykim/math3976/f9f00b4b0ece90b4db0ab9b2ef6f1d9c055d1961") == git


def test_repo_url_edges_slashes_a_missing_ref_and_only_githubs_git_suffix():
    # the spec is stripped of slashes at both ends: "/org/repo/main/" is org/repo
    assert repo_url("GitHub", "/org/repo/main/") == "https://github.com/org/repo"
    # org/repo with no ref is enough (the error says "needs org/repo"); one segment is not
    assert repo_url("GitHub", "org/repo") == "https://github.com/org/repo"
    with pytest.raises(ValueError, match="needs org/repo"):
        repo_url("Gist", "user")
    # BinderHub strips ".git" for GitHub only (its GitHubRepoProvider); a Gist keeps it
    assert repo_url("Gist", "user/abc.git/master") == "https://gist.github.com/user/abc.git"
    # a git provider's spec of one segment, no escaped slash: the whole spec, not ""
    assert repo_url("GitLab", "project") == "gitlab:project"
    assert repo_url("Git", "/github.com/o/r/main") == "git:github.com/o/r"


def test_only_the_first_few_malformed_lines_are_kept_all_are_counted(tmp_path):
    trace = tmp_path / "bad.jsonl"
    trace.write_text("".join(f"{{not json {i}\n" for i in range(7)))  # lines 1..7, all bad
    errors = TraceErrors()
    assert read_launches([trace], errors) == []
    # MAX_REPORTED_ERRORS = 5: lines 1..5 kept with their reason, 7 counted
    assert errors.count == 7
    assert [e.split(": ")[0] for e in errors.first] == [f"{trace}:{i}" for i in range(1, 6)]


def test_a_node_lists_its_largest_images_and_the_cleaner_prunes_the_oldest():
    from stickypack.sim.cache import NodeImages
    from stickypack.sim.model import CacheConfig

    images = NodeImages(CacheConfig(high_images=4, low_images=2, node_status_max_images=2))
    assert images.touch("a", 10) == [("a", 10)]
    assert images.touch("b", 30) == [("b", 30)]
    assert images.touch("c", 5) == []  # held, but smaller than both listed
    assert images.touch("d", 20) == [("a", None), ("d", 20)]  # pushes the smallest listed out
    assert images.touch("b", 30) == []  # already held: only its use is recorded
    assert images.listed == {"b": 30, "d": 20}
    # a fifth image: the cleaner keeps the 2 most recently used (b, e), so d goes, and the
    # largest remaining moves into the list
    assert images.touch("e", 1) == [("d", None), ("e", 1)]
    assert images.listed == {"b": 30, "e": 1} and "a" not in images and "d" not in images
    unlimited = NodeImages(CacheConfig(node_status_max_images=-1))
    for k in range(60):
        unlimited.touch(f"i{k}", k)
    assert len(unlimited.listed) == 60


def test_user_pods_run_their_repos_image_a_new_tag_at_each_build():
    model = BinderModel(first_launch_build_prob=1.0, changes_per_day=0.0)
    launches = [Launch(0.0, "https://github.com/a/b"), Launch(60.0, "https://github.com/a/b"),
                Launch(120.0, "https://github.com/c/d")]  # fmt: skip
    jobs = binder_jobs(launches, model, seed=0)
    first, again, other = jobs
    assert first.needs_build and not again.needs_build
    assert first.image == again.image and first.image.endswith(":1")  # built once, run twice
    assert other.image != first.image and first.image_size == again.image_size > 0
    never = binder_jobs(launches, BinderModel(first_launch_build_prob=0.0), seed=0)
    assert never[0].image.endswith(":0")  # the image it had before the replay


def test_image_sizes_are_a_model_parameter(tmp_path):
    from stickypack.sim.config import SimConfigError, load_sim_config

    path = tmp_path / "c.yaml"
    path.write_text(
        "binder: {image_size_median: 1Gi, builder_image_size: 0}\ncache: {node_status_max_images: -1}\n"
    )
    config = load_sim_config(path)
    assert config.binder.image_size_median == 1024**3 and config.cache.node_status_max_images == -1
    path.write_text("cache: {node_status_max_images: -2}\n")
    with pytest.raises(SimConfigError, match="node_status_max_images must be >= -1"):
        load_sim_config(path)


def test_a_simulated_node_lists_the_images_of_the_pods_it_ran_and_built():
    from stickypack.policies import load_builtin
    from stickypack.sim.engine import Simulation
    from stickypack.sim.model import NodePool
    from stickypack.sim.workloads import BUILDER_IMAGE, trace_workload

    model = BinderModel(first_launch_build_prob=1.0, changes_per_day=0.0, builder_image_size=123)
    launches = [Launch(0.0, "https://github.com/a/b"), Launch(3600.0, "https://github.com/c/d")]
    workload = trace_workload(launches, seed=0, model=model, pool=NodePool(min_size=1))
    sim = Simulation(load_builtin("z2jh"), workload, seed=0)
    sim.run()
    (node,) = sim.nodes.values()
    listed = sim.table.images[node.slot]
    jobs = workload.jobs
    assert listed == {
        BUILDER_IMAGE: 123,
        jobs[0].image: jobs[0].image_size,
        jobs[1].image: jobs[1].image_size,
    }
    assert all(sim.table.image_rows[name] == {node.slot: size} for name, size in listed.items())


def test_binder_day_draws_as_many_repos_as_a_trace_day():
    # The 15 trace days: 490-728 distinct repos, 41-52% of them launched once, the ten most
    # launched taking 72-81% of launches (docs/simulator.md, "binder-day"); the old model drew
    # ~450 distinct repos.
    from collections import Counter

    from stickypack.sim.workloads import binder_day

    for seed in (0, 1):
        launches = Counter(job.repo for job in binder_day(seed).jobs)
        total = sum(launches.values())
        once = sum(1 for n in launches.values() if n == 1)
        top = sum(n for _, n in launches.most_common(10))
        assert 550 <= len(launches) <= 700 and 0.35 <= once / len(launches) <= 0.55
        assert 0.70 <= top / total <= 0.80


def test_dask_adapt_trims_to_the_workers_asked_and_refuses_impossible_counts():
    from stickypack.sim.workloads import PodJob, TrimJob, dask_adapt

    jobs = dask_adapt(0, keep=30).jobs
    assert [j.keep for j in jobs if isinstance(j, TrimJob)] == [30, 30, 30]
    assert sum(isinstance(j, PodJob) for j in jobs) == 100 + 70 + 70  # rounds top up to 100
    with pytest.raises(ValueError, match=r"keep must be 0\.\.100 workers, not 101"):
        dask_adapt(0, keep=101)


def test_the_pools_are_the_contexts_node_groups():
    """The simulator's pools reach ScaleDownAware as the extender's node groups do: by the
    pool label its nodes carry, each with its pool's minimum size (a minimum of 0 left out:
    it keeps no node)."""
    import dataclasses

    from stickypack.policies import load_builtin
    from stickypack.sim.engine import POOL_LABEL, Simulation
    from stickypack.sim.workloads import dask_burst

    workload = dask_burst(0)
    assert [pool.min_size for pool in workload.pools] == [0]
    sim = Simulation(load_builtin("stickypack"), workload, seed=0)
    groups = sim.ctx.node_groups
    assert groups is not None and groups.label_keys == (POOL_LABEL,) and dict(groups.min_sizes) == {}
    kept = dataclasses.replace(workload, pools=[dataclasses.replace(workload.pools[0], min_size=2)])
    groups = Simulation(load_builtin("stickypack"), kept, seed=0).ctx.node_groups
    assert groups is not None and dict(groups.min_sizes) == {workload.pools[0].name: 2}
    assert groups.group_of({POOL_LABEL: workload.pools[0].name}) == workload.pools[0].name


def test_a_trim_retires_its_workers_at_once_and_a_waiting_one_never_runs():
    # A trim is one decision: the pods it retires go together. Once the room each retired
    # worker freed was handed, within the same trim, to a waiting worker the trim also
    # retired: bound and deleted at one instant, it counted as scheduled (with its wait in
    # pending_p95_s) though it never ran. Likewise a waiting worker whose cluster ends at
    # this instant must not be bound as the cluster's other workers end.
    import dataclasses

    from stickypack.policies import load_builtin
    from stickypack.sim.engine import Simulation
    from stickypack.sim.workloads import TrimJob, dask_adapt, dask_burst

    class Recording(Simulation):
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            self.bound_at: dict[int, float] = {}
            self.created: list = []
            self.retired_bound_at_trim = 0
            self.waiting_retired = 0

        def _create(self, *args, **kwargs):
            sp = super()._create(*args, **kwargs)
            self.created.append(sp)
            return sp

        def _bind(self, sp, slot) -> None:
            super()._bind(sp, slot)
            self.bound_at[sp.uid] = self.now

        def _trim(self, job) -> None:
            waiting = {uid for uid, sp in self.groups.get(job.group, {}).items() if sp.node is None}
            members = set(self.groups.get(job.group, {}))
            super()._trim(job)
            retired = members - set(self.groups.get(job.group, {}))
            self.waiting_retired += len(retired & waiting)
            self.retired_bound_at_trim += sum(self.bound_at.get(uid) == self.now for uid in retired)

    workload = dask_adapt(0)  # 12 workers fit a node: on one node most of them wait
    workload.pools = [dataclasses.replace(workload.pools[0], max_size=1)]
    sim = Recording(load_builtin("z2jh"), workload, seed=0)
    m = sim.run().metrics
    made = sum(not isinstance(j, TrimJob) for j in workload.jobs)
    assert m["pods_scheduled"] + m["pods_unscheduled"] == made == 280
    assert sim.waiting_retired > 0 and sim.retired_bound_at_trim == 0
    # every worker retired while waiting, or waiting when the cluster ended, never ran
    assert m["pods_scheduled"] == len(sim.bound_at) and m["pods_unscheduled"] >= sim.waiting_retired
    # users leaving: a worker still waiting when its user leaves is not bound as the user's
    # other workers end at that instant (dask-burst on 5 nodes: 10 once were)
    burst = dask_burst(0)
    burst.pools = [dataclasses.replace(burst.pools[0], max_size=5)]
    sim = Recording(load_builtin("z2jh"), burst, seed=0)
    m = sim.run().metrics
    ends = {sp.uid: job.end_at for sp, job in zip(sim.created, burst.jobs, strict=True)}
    assert m["pods_unscheduled"] > 0 and m["pods_scheduled"] + m["pods_unscheduled"] == 1020
    assert all(t < ends[uid] for uid, t in sim.bound_at.items())


def test_a_gzip_file_cut_mid_stream_says_after_which_line(tmp_path, capsys):
    # A download cut short: the lines before the cut are replayed, and the report names the
    # line where reading stopped (it once said "cannot read file", with no line, as if
    # nothing of it had been read)
    day = [_launch_line(f"2019-03-04T10:{i:02d}:00+00:00") for i in range(60)]
    whole = gzip.compress(("\n".join(day) + "\n").encode(), mtime=0)
    trace = tmp_path / "events-2019-03-04.jsonl.gz"
    trace.write_bytes(whole[: len(whole) - 12])  # the last bytes of the stream and the trailer
    errors = TraceErrors()
    launches = read_launches([trace], errors)
    read = len(launches)
    assert 0 < read < 60 and errors.count == 1
    assert errors.first[0].startswith(f"{trace}:{read + 1}: the file ends mid-stream, {read} lines read: ")
    assert main(["simulate", "--trace", str(trace), "--policies", "default", "--quiet"]) == 0
    assert f"{trace}:{read + 1}: the file ends mid-stream" in capsys.readouterr().out


def test_an_empty_trace_file_is_reported_not_skipped_unseen(tmp_path, capsys):
    # A day file of 0 bytes (a download that failed; gzip reads it as no data) once added
    # nothing and said nothing: a directory of three days replayed two, back to back
    for day in (4, 6):
        lines = [_launch_line(f"2019-03-{day:02d}T10:0{i}:00+00:00") for i in range(3)]
        with gzip.open(tmp_path / f"events-2019-03-{day:02d}.jsonl.gz", "wt") as fh:
            fh.write("\n".join(lines) + "\n")
    empty = tmp_path / "events-2019-03-05.jsonl.gz"
    empty.write_bytes(b"")
    errors = TraceErrors()
    launches = read_launches([tmp_path], errors)
    assert len(launches) == 6 and launches[-1].t < 2 * 86400  # the 6th follows the 4th
    assert errors.count == 1 and errors.first == [f"{empty}: empty file, no launch events"]
    blank = tmp_path / "blank.jsonl"
    blank.write_text("\n  \n")  # blank lines only: as empty
    errors = TraceErrors()
    assert read_launches([blank], errors) == [] and errors.first == [f"{blank}: empty file, no launch events"]
    assert main(["simulate", "--trace", str(tmp_path), "--policies", "default", "--quiet"]) == 0
    assert f"{empty}: empty file, no launch events" in capsys.readouterr().out


def test_a_trace_is_read_as_gzip_or_text_by_its_content_not_its_name(tmp_path):
    # a plain file named .gz was refused whole ("Not a gzipped file"), and a gzip file named
    # .jsonl was read as text: every line of compressed bytes a malformed line
    text = "\n".join(_launch_line(f"2019-03-04T10:0{i}:00+00:00") for i in range(4)) + "\n"
    plain_as_gz = tmp_path / "plain.jsonl.gz"
    plain_as_gz.write_text(text)
    gz_as_plain = tmp_path / "events-2019-03-04.jsonl"  # named for its day: checked against it
    gz_as_plain.write_bytes(gzip.compress(text.encode()))
    for trace in (plain_as_gz, gz_as_plain):
        errors = TraceErrors()
        launches = read_launches([trace], errors)
        assert (errors.count, errors.first) == (0, [])
        assert [a.t for a in launches] == [36000.0 + 60 * i for i in range(4)]
    # a directory picks files by name (.jsonl, .jsonl.gz) and reads each by its content
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "a.jsonl.gz").write_text(text)
    (folder / "b.jsonl").write_bytes(gzip.compress(text.encode()))
    (folder / "c.json").write_text(text)  # not picked: its name
    errors = TraceErrors()
    launches = read_launches([folder], errors)
    assert len(launches) == 8 and errors.count == 0
    assert launches[-1].t == 86400 + 36180.0  # b.jsonl replayed after a.jsonl.gz: 2 files, no c


def test_a_misnamed_trace_runs_through_the_command(tmp_path):
    text = "\n".join(_launch_line(f"2019-03-04T10:0{i}:00+00:00") for i in range(4)) + "\n"
    plain_as_gz, gz_as_plain = tmp_path / "a.jsonl.gz", tmp_path / "b.jsonl"
    plain_as_gz.write_text(text)
    gz_as_plain.write_bytes(gzip.compress(text.encode()))
    result = run_json(tmp_path, "--trace", str(plain_as_gz), str(gz_as_plain), "--policies", "z2jh")
    assert "malformed_trace_lines" not in result
    assert result["results"][0]["pods_scheduled"] > 0


def test_a_broken_or_foreign_trace_file_is_one_error(tmp_path):
    import bz2
    import lzma

    text = "\n".join(_launch_line(f"2019-03-04T10:{i:02d}:00+00:00") for i in range(40)) + "\n"
    truncated = tmp_path / "cut.jsonl"  # gzip, named as text, cut short
    truncated.write_bytes(gzip.compress(text.encode())[:-40])
    junk = tmp_path / "junk.jsonl.gz"  # neither gzip nor text: lines of bytes with NULs
    junk.write_bytes(bytes(range(256)) * 40)
    xz, bz = tmp_path / "x.jsonl.gz", tmp_path / "b.jsonl"
    xz.write_bytes(lzma.compress(text.encode()))
    bz.write_bytes(bz2.compress(text.encode()))
    errors = TraceErrors()
    launches = read_launches([truncated], errors)
    assert 0 < len(launches) < 40 and errors.count == 1
    assert errors.first[0].startswith(f"{truncated}:{len(launches) + 1}: the file ends mid-stream")
    for path, why in (
        (junk, "binary data, not JSON lines (a NUL byte in line 1)"),
        (xz, "xz-compressed; only gzip and plain text are read"),
        (bz, "bzip2-compressed; only gzip and plain text are read"),
    ):
        errors = TraceErrors()
        assert read_launches([path], errors) == []
        assert errors.first == [f"{path}: cannot read file: {why}"]


@pytest.mark.parametrize("jobs", [1, 2])
def test_each_run_reports_its_progress_while_it_runs(jobs, monkeypatch):
    """With workers (``--jobs`` above 1) a policy's bar once filled only when its run was
    over and the runs listed before it too: the workers sent no progress. Here each run,
    after its first report, waits until the parent has seen it, which it never would if the
    reports came with the results; and the results are those of a run without progress."""
    import multiprocessing

    from stickypack.policies import load_builtin
    from stickypack.sim import runner
    from stickypack.sim.workloads import dask_adapt

    names = ["z2jh", "stickypack"]
    seen = {name: multiprocessing.get_context("fork").Event() for name in names}  # shared by fork
    wait_s = 120.0  # a deadlock guard, not a timing: the parent answers in well under a second

    class Gated(runner.Simulation):
        def run(self) -> runner.RunResult:
            report, name = self.progress, self.policy.name
            if report is not None:

                def gated(fraction: float) -> None:
                    report(fraction)
                    if fraction < 1.0 and not seen[name].wait(wait_s):
                        raise RuntimeError(f"{name}: the parent never saw this run's progress")

                self.progress = gated
            return super().run()

    calls: list[tuple[str, float]] = []

    def progress(name: str, fraction: float) -> None:
        calls.append((name, fraction))
        if fraction < 1.0:
            seen[name].set()

    monkeypatch.setattr(runner, "Simulation", Gated)
    policies = [load_builtin(name) for name in names]
    followed = runner.compare(lambda: dask_adapt(0), policies, seed=0, progress=progress, jobs=jobs)
    monkeypatch.undo()
    for name in names:
        fractions = [f for n, f in calls if n == name]
        assert len(fractions) > 2 and fractions[0] < 1.0 and fractions[-1] == 1.0, fractions
        assert fractions == sorted(fractions)  # never backwards
    quiet = runner.compare(lambda: dask_adapt(0), policies, seed=0, jobs=1)

    def metrics(cmp: Comparison) -> list[dict]:
        return [{k: v for k, v in run.metrics.items() if k != "wall_s"} for run in cmp.runs]

    assert [run.policy for run in followed.runs] == names
    assert metrics(followed) == metrics(quiet)


@pytest.mark.parametrize("jobs", [1, 2])
def test_each_run_is_reported_done_when_it_ends(jobs, monkeypatch):
    """A run's last report from the simulation may come before its end (it reports at most
    every 600 simulated seconds): ``compare`` reports 1.0 for each run once it is over, in
    this process as from the workers, so no bar is left short of full. Here the simulation
    reports nothing at all."""
    from stickypack.policies import load_builtin
    from stickypack.sim import runner
    from stickypack.sim.workloads import dask_adapt

    class Silent(runner.Simulation):
        def run(self) -> runner.RunResult:
            self.progress = None
            return super().run()

    calls: list[tuple[str, float]] = []
    monkeypatch.setattr(runner, "Simulation", Silent)
    policies = [load_builtin(name) for name in ("z2jh", "stickypack")]
    runner.compare(
        lambda: dask_adapt(0), policies, seed=0, progress=lambda n, f: calls.append((n, f)), jobs=jobs
    )
    assert sorted(calls) == [("stickypack", 1.0), ("z2jh", 1.0)]


def test_a_trim_that_retires_no_worker_is_no_event_for_waiting_pods():
    # Waiting pods are retried when room frees (a pod ends, a node joins, a trim retires
    # workers) and at each scan: a trim that keeps every worker frees nothing. Here a build
    # waits (DelayForLocality, 600 s) for its full cache node p-00001 from 15 s; its wait is
    # over at 615 s, so the scan at 620 s sends it to p-00002, not the trim at 616 s.
    from stickypack.core.resources import CPU, MEMORY, PODS
    from stickypack.sim.model import NodePool
    from stickypack.sim.workloads import LaunchJob, TrimJob

    alloc = {CPU: 4000, MEMORY: 64 * 1024**3, PODS: 110}
    pool = NodePool(name="p", allocatable=alloc, min_size=2, max_size=2)
    worker = dataclasses.replace(_filler("w", 100, "p-00002", 5000.0), group="g")
    jobs = [
        _filler("fill-1", 3500, "p-00001", 5000.0),  # A's cache node: no room for a build
        worker,
        LaunchJob(15.0, "A", 60.0, True, 300.0),
        TrimJob(616.0, "g", 1),  # keeps its one worker
    ]
    sim = _seeded_simulation("stickypack", jobs, pool, {"p-00001": "A"})
    sim.run()
    assert sim.binds == [(620.0, "A", "p-00002")]


def test_a_build_leaves_its_image_on_its_node():
    # The 2019 mybinder.org built on the node's own Docker: the image a build makes stays on
    # its node (listed in status.images) whether or not its session runs there. Here the
    # session (8000m) fits no node of 7910m, so only the build put the image there.
    from stickypack.policies import load_builtin
    from stickypack.sim.engine import Simulation
    from stickypack.sim.model import NodePool
    from stickypack.sim.workloads import BUILDER_IMAGE, trace_workload

    model = BinderModel(
        first_launch_build_prob=1.0, changes_per_day=0.0, builder_image_size=123, user_cpu_m=8000
    )
    workload = trace_workload(
        [Launch(0.0, "https://github.com/a/b")], seed=0, model=model, pool=NodePool(min_size=1)
    )
    sim = Simulation(load_builtin("z2jh"), workload, seed=0)
    m = sim.run().metrics
    assert (m["builds"], m["pods_scheduled"], m["pods_unscheduled"]) == (1, 1, 1)
    (node,) = sim.nodes.values()
    (job,) = workload.jobs
    assert sim.table.images[node.slot] == {BUILDER_IMAGE: 123, job.image: job.image_size}


def _model_ranges():
    from stickypack.core.resources import CPU, MEMORY, PODS
    from stickypack.sim.model import (
        MAX_BYTES,
        MAX_MILLICORES,
        MAX_PODS,
        AutoscalerConfig,
        CacheConfig,
        DaskModel,
        NodePool,
    )

    top = {CPU: MAX_MILLICORES, MEMORY: MAX_BYTES, PODS: MAX_PODS}
    # (model, values at the end of each range: taken, one step past it: refused, the message)
    return [
        (
            AutoscalerConfig,
            {"scan_interval_s": 1.0},
            {"scan_interval_s": 0.999},
            "scan_interval_s must be >= 1",
        ),
        (AutoscalerConfig, {"max_node_provision_time_s": 0.001}, {"max_node_provision_time_s": 0.0}, "> 0"),
        (AutoscalerConfig, {"max_empty_bulk_delete": 1}, {"max_empty_bulk_delete": 0}, "must be >= 1"),
        (
            AutoscalerConfig,
            {"scale_down_unneeded_time_s": 0.0, "scale_down_delay_after_add_s": 0.0},
            {"scale_down_delay_after_add_s": -0.001},
            "scale_down_delay_after_add_s must be >= 0",
        ),
        (
            CacheConfig,
            {"high_images": 1, "low_images": 1},
            {"high_images": 0, "low_images": 0},
            "high_images must be >= 1",
        ),
        (
            CacheConfig,
            {"high_images": 5, "low_images": 5},
            {"high_images": 5, "low_images": 6},
            "low_images must be in",
        ),
        (
            CacheConfig,
            {"hit_time_fraction": 1.0},
            {"hit_time_fraction": 1.001},
            "hit_time_fraction must be in [0, 1]",
        ),
        (
            NodePool,
            {"allocatable": top},
            {"allocatable": {**top, CPU: MAX_MILLICORES + 1}},
            "allocatable.cpu must be",
        ),
        (
            NodePool,
            {"allocatable": {**top, "example.com/gpu": 0}},
            {"allocatable": {**top, "example.com/gpu": -1}},
            "allocatable.example.com/gpu must be >= 0",
        ),
        (
            NodePool,
            {"min_size": 0, "price_per_hour": 0.0},
            {"price_per_hour": -0.01},
            "price_per_hour must be >= 0",
        ),
        (
            NodePool,
            {"min_size": 3, "max_size": 3},
            {"min_size": 4, "max_size": 3},
            "min_size must be <= max_size (3)",
        ),
        (
            NodePool,
            {"provision_delay_s": 0.0},
            {"provision_delay_s": -0.001},
            "provision_delay_s must be >= 0",
        ),
        (
            BinderModel,
            {"session_max_s": 7 * 86400.0},
            {"session_max_s": 7 * 86400.0 + 1},
            "session_max_s must be <= 7",
        ),
        (BinderModel, {"build_max_s": 86400.0}, {"build_max_s": 86401.0}, "build_max_s must be <= 1 day"),
        (BinderModel, {"build_median_s": 0.001}, {"build_median_s": 0.0}, "build_median_s must be > 0"),
        (
            BinderModel,
            {"user_cpu_m": 0, "user_memory": 0, "build_cpu_m": MAX_MILLICORES, "build_memory": MAX_BYTES},
            {"build_cpu_m": MAX_MILLICORES + 1},
            "build_cpu_m must be >= 0 and <=",
        ),
        (
            BinderModel,
            {"image_size_sigma": 5.0},
            {"image_size_sigma": 5.001},
            "image_size_sigma must be in [0, 5]",
        ),
        (
            BinderModel,
            {"changes_per_day": 0.0, "idle_cull_s": 0.0},
            {"idle_cull_s": -0.001},
            "idle_cull_s must be >= 0",
        ),
        (
            BinderModel,
            {"first_launch_build_prob": 1.0, "builder_image_size": 0},
            {"first_launch_build_prob": 1.001},
            "first_launch_build_prob must be in [0, 1]",
        ),
        (
            DaskModel,
            {"worker_cpu_m": 0, "worker_image_size": 0},
            {"worker_image_size": -1},
            "worker_image_size must be",
        ),
    ]


@pytest.mark.parametrize(("model", "taken", "refused", "message"), _model_ranges())
def test_each_model_range_takes_its_ends_and_refuses_past_them(model, taken, refused, message):
    # docs/simulator.md gives each range; its closed ends are values a run may use
    made = model(**taken)
    assert all(getattr(made, key) == value for key, value in taken.items())
    with pytest.raises(ValueError, match=re.escape(message)):
        model(**refused)


def test_a_pool_may_take_as_long_to_come_up_as_the_autoscaler_waits():
    from stickypack.sim.model import AutoscalerConfig, NodePool, check_provisioning

    autoscaler = AutoscalerConfig(max_node_provision_time_s=300.0)
    check_provisioning(NodePool(provision_delay_s=300.0), autoscaler)
    with pytest.raises(
        ValueError, match=r"provision_delay_s must be <= autoscaler\.max_node_provision_time_s \(300;"
    ):
        check_provisioning(NodePool(provision_delay_s=300.5), autoscaler)


def test_a_build_waiting_for_its_cache_node_asks_for_no_new_node():
    # The autoscaler runs kube-scheduler's own filters (not the extender's): a pod that fits
    # an existing node, held back only by DelayForLocality, is not unschedulable to it. A's
    # build waits 600 s for its full cache node p-00001 while p-00002 has room; the pool
    # could grow to 3 nodes but asks for none, and the build goes to p-00002 at the 610 s scan.
    from stickypack.core.resources import CPU, MEMORY, PODS
    from stickypack.sim.model import NodePool
    from stickypack.sim.workloads import LaunchJob

    alloc = {CPU: 4000, MEMORY: 64 * 1024**3, PODS: 110}
    pool = NodePool(name="p", allocatable=alloc, min_size=2, max_size=3)
    jobs = [_filler("fill-1", 3500, "p-00001", 5000.0), LaunchJob(10.0, "A", 60.0, True, 300.0)]
    sim = _seeded_simulation("stickypack", jobs, pool, {"p-00001": "A"})
    sim.run()
    assert sim.binds == [(610.0, "A", "p-00002")]
    assert [node.name for node in sim.all_nodes] == ["p-00001", "p-00002"]


def test_the_build_cache_cleaner_prunes_the_least_recently_built_down_to_low():
    from stickypack.sim.cache import NodeCache
    from stickypack.sim.model import CacheConfig

    cache = NodeCache(CacheConfig(high_images=3, low_images=1))
    assert [cache.touch(repo) for repo in ("a", "b", "c")] == [[], [], []]  # 3: not over high
    assert cache.touch("a") == []  # built again: now the most recently built
    # a fourth repo: over 3, so the cleaner prunes to 1, least recently built first
    assert cache.touch("d") == ["b", "c", "a"]
    assert len(cache) == 1 and "d" in cache and "a" not in cache


def test_a_node_lists_its_largest_images_and_refills_the_list_with_the_largest_left():
    from stickypack.sim.cache import NodeImages
    from stickypack.sim.model import CacheConfig

    images = NodeImages(CacheConfig(high_images=3, low_images=2, node_status_max_images=1))
    assert images.touch("a", 10) == [("a", 10)]
    assert images.touch("e", 10) == []  # as large as the one listed: the list keeps a
    assert images.touch("b", 30) == [("a", None), ("b", 30)]
    assert images.touch("a", 10) == []  # used again: now the most recently used
    # a fourth image, c (20): not larger than b, so not listed; over 3 held, the cleaner
    # keeps the 2 most recently used (a, c): e and b go, and of a (10) and c (20) the larger
    # takes b's place in the list
    assert images.touch("c", 20) == [("b", None), ("c", 20)]
    assert images.listed == {"c": 20} and "a" in images and "b" not in images
    none = NodeImages(CacheConfig(node_status_max_images=0))  # kubelet lists none
    assert none.touch("a", 10) == [] and none.listed == {} and "a" in none


def test_a_text_trace_starting_bzh_is_read_as_text_not_refused_as_bzip2(tmp_path):
    # bzip2's magic is "BZh" then a block-size digit 1-9: "BZh" then a letter is text
    text = "BZhello, not JSON\n" + _launch_line("2019-03-04T10:00:00+00:00") + "\n"
    trace = tmp_path / "t.jsonl"
    trace.write_text(text)
    errors = TraceErrors()
    launches = read_launches([trace], errors)
    assert [a.t for a in launches] == [36000.0]  # line 2 replayed: 10:00 from midnight
    assert errors.count == 1 and errors.first[0].startswith(f"{trace}:1: not JSON")


def test_a_directory_with_event_files_reads_only_those(tmp_path):
    # the archive's index.jsonl beside its events-*.jsonl is not read as launches
    (tmp_path / "events-2019-03-04.jsonl").write_text(_launch_line("2019-03-04T10:00:00+00:00") + "\n")
    (tmp_path / "index.jsonl").write_text(_launch_line("2019-03-05T11:00:00+00:00") + "\n")
    from stickypack.sim.traces import trace_files

    assert trace_files([tmp_path]) == [tmp_path / "events-2019-03-04.jsonl"]
    errors = TraceErrors()
    assert read_launches([tmp_path], errors) == [Launch(36000.0, "https://github.com/o/r")]
    assert errors.count == 0


def test_launches_of_one_minute_keep_their_order_in_the_file(tmp_path):
    # sorted by time only: "z" before "a" at 10:00, then "m" at 09:59 goes first
    trace = tmp_path / "t.jsonl"
    lines = [
        _launch_line("2019-03-04T10:00:00+00:00", spec="o/z/main"),
        _launch_line("2019-03-04T10:00:00+00:00", spec="o/a/main"),
        _launch_line("2019-03-04T09:59:00+00:00", spec="o/m/main"),
    ]
    trace.write_text("\n".join(lines) + "\n")
    launches = read_launches([trace], TraceErrors())
    assert [(a.t, a.repo.rsplit("/", 1)[1]) for a in launches] == [
        (35940.0, "m"),
        (36000.0, "z"),
        (36000.0, "a"),
    ]


def test_files_named_out_of_date_order_replay_in_date_order(tmp_path):
    # a.jsonl holds 2019-03-05 12:00, b.jsonl 2019-03-04 06:00: b's day first (t = 6 h),
    # then a's as day two (t = 86400 + 12 h), whatever order the files are given in
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text(_launch_line("2019-03-05T12:00:00+00:00", spec="o/a/main") + "\n")
    b.write_text(_launch_line("2019-03-04T06:00:00+00:00", spec="o/b/main") + "\n")
    for order in ([a, b], [b, a]):
        launches = read_launches(order, TraceErrors())
        assert [(x.t, x.repo) for x in launches] == [
            (6 * 3600.0, "https://github.com/o/b"),
            (86400.0 + 12 * 3600.0, "https://github.com/o/a"),
        ]


def test_each_file_starts_the_day_after_the_previous_files_last_day(tmp_path):
    # a: one day (03-04 10:00); b: two days (03-10 23:00, 03-11 01:00); c: one day (03-20
    # 00:30). a is day 0, b days 1-2, c day 3: offsets 0, 86400 and 3 * 86400
    files = []
    for name, stamps in (
        ("a", ["2019-03-04T10:00:00+00:00"]),
        ("b", ["2019-03-10T23:00:00+00:00", "2019-03-11T01:00:00+00:00"]),
        ("c", ["2019-03-20T00:30:00+00:00"]),
    ):
        path = tmp_path / f"{name}.jsonl"
        path.write_text("".join(_launch_line(s) + "\n" for s in stamps))
        files.append(path)
    launches = read_launches(files, TraceErrors())
    assert [a.t for a in launches] == [
        10 * 3600.0,
        86400.0 + 23 * 3600.0,
        2 * 86400.0 + 3600.0,
        3 * 86400.0 + 1800.0,
    ]


def test_a_gap_of_exactly_two_days_keeps_one_run_and_a_tie_keeps_the_first_run(tmp_path):
    # MAX_GAP_S = 2 days: 03-04 00:00 and 03-06 00:00 are one run, both replayed
    exact = tmp_path / "exact.jsonl"
    exact.write_text(
        _launch_line("2019-03-04T00:00:00+00:00") + "\n" + _launch_line("2019-03-06T00:00:00+00:00") + "\n"
    )
    errors = TraceErrors()
    assert [a.t for a in read_launches([exact], errors)] == [0.0, 2 * 86400.0] and errors.count == 0
    # two runs of two events, 6 days apart: the earlier run is kept, the later two are errors
    tie = tmp_path / "tie.jsonl"
    stamps = ["2019-03-04T01:00:00", "2019-03-04T02:00:00", "2019-03-10T01:00:00", "2019-03-10T02:00:00"]
    tie.write_text("".join(_launch_line(s + "+00:00") + "\n" for s in stamps))
    errors = TraceErrors()
    assert [a.t for a in read_launches([tie], errors)] == [3600.0, 7200.0]
    assert errors.count == 2 and errors.first[0].startswith(f"{tie}:3: timestamp 2019-03-10T01:00:00+00:00")


def test_a_nul_byte_after_line_one_is_one_malformed_line_not_a_binary_file(tmp_path):
    trace = tmp_path / "t.jsonl"
    lines = [
        _launch_line("2019-03-04T10:00:00+00:00"),
        '{"x": 1}\0',
        _launch_line("2019-03-04T10:01:00+00:00"),
    ]
    trace.write_text("\n".join(lines) + "\n")
    errors = TraceErrors()
    assert [a.t for a in read_launches([trace], errors)] == [36000.0, 36060.0]  # lines 1 and 3
    assert errors.count == 1 and errors.first[0].startswith(f"{trace}:2: not JSON")


def test_a_day_file_takes_its_midnight_and_refuses_the_next_midnight(tmp_path):
    named = tmp_path / "events-2019-03-04.jsonl"
    stamps = ["2019-03-04T00:00:00+00:00", "2019-03-04T23:59:00+00:00", "2019-03-05T00:00:00+00:00"]
    named.write_text("".join(_launch_line(s) + "\n" for s in stamps))
    errors = TraceErrors()
    # the day is [00:00, 24:00): t = 0 and 23:59 (86340 s) kept, the next midnight refused
    assert [a.t for a in read_launches([named], errors)] == [0.0, 86340.0]
    assert errors.first == [
        f"{named}:3: timestamp 2019-03-05T00:00:00+00:00 is not on the file's day 2019-03-04"
    ]


def test_a_gzip_file_cut_in_its_first_line_says_no_line_was_read(tmp_path):
    # one line with no newline, its gzip trailer cut: reading ends (EOFError) before line 1
    # is whole, so the report names line 1 and 0 lines read, as for a later cut
    trace = tmp_path / "cut.jsonl.gz"
    trace.write_bytes(gzip.compress(_launch_line("2019-03-04T10:00:00+00:00").encode(), mtime=0)[:-8])
    errors = TraceErrors()
    assert read_launches([trace], errors) == []
    assert errors.count == 1 and errors.first[0].startswith(
        f"{trace}:1: the file ends mid-stream, 0 lines read: "
    )


def test_only_a_successful_launch_is_replayed_and_an_empty_provider_or_spec_is_malformed(tmp_path):
    trace = tmp_path / "t.jsonl"
    ok = json.loads(_launch_line("2019-03-04T10:00:00+00:00"))
    lines = [
        json.dumps(ok),  # replayed
        json.dumps({**ok, "status": "pending"}),  # not a success: skipped, not counted
        json.dumps({**ok, "provider": ""}),  # an error
        json.dumps({**ok, "provider": "GitLab", "spec": "//"}),  # an error: no repo at all
    ]
    trace.write_text("\n".join(lines) + "\n")
    errors = TraceErrors()
    assert [a.t for a in read_launches([trace], errors)] == [36000.0]
    assert errors.first == [
        f"{trace}:3: provider is not a name: ''",
        f"{trace}:4: spec is not a repository spec: '//'",
    ]


def test_binderhub_pods_request_the_models_cpu_and_memory_and_run_their_image():
    from stickypack.core.resources import CPU, MEMORY
    from stickypack.sim.workloads import BUILDER_IMAGE, build_pod, user_pod

    model = BinderModel(user_cpu_m=10, user_memory=450, build_cpu_m=1000, build_memory=2000)
    user = user_pod("u", model)
    # 10 millicores is 10 for scoring too: kube-scheduler's non-zero default (100m) is for a
    # pod that does not request the resource (pkg/scheduler/util/pod_resources.go)
    assert (user.requests[CPU], user.requests[MEMORY], user.nonzero_cpu, user.nonzero_memory) == (
        10,
        450,
        10,
        450,
    )
    assert user.images == ()  # no image given: none to score, not ("",)
    assert user_pod("u", model, "img:1").images == ("img:1",)
    build = build_pod("b", "https://github.com/o/r", model)
    assert (build.requests[CPU], build.requests[MEMORY], build.nonzero_cpu) == (1000, 2000, 1000)
    assert build.images == (BUILDER_IMAGE,)


def test_a_load_scale_of_zero_or_less_is_refused():
    launches = [Launch(0.0, "https://github.com/o/r")]
    for scale in (0.0, -1.0):
        with pytest.raises(ValueError, match="load scale must be > 0"):
            binder_jobs(launches, BinderModel(), seed=0, load_scale=scale)


def test_copies_of_a_launch_spread_over_its_whole_minute():
    # load 200: 200 copies of a launch at t = 600, each at its own second of [600, 660)
    jobs = binder_jobs([Launch(600.0, "https://github.com/o/r")], BinderModel(), seed=0, load_scale=200.0)
    t = sorted(j.t for j in jobs)
    assert len(t) == 200 and t[0] >= 600.0 and t[-1] < 660.0
    # uniform over 60 s: P(all 200 in one half) = 2 * 0.5**200
    assert t[0] < 630.0 < t[-1]


def test_a_session_is_its_active_time_plus_the_idle_cull_at_most_the_max_and_a_build_at_most_its_max():
    # sigma 0: every active time is its median (600 s) and every cold build its median (300 s)
    launches = [Launch(0.0, "https://github.com/o/r")]
    model = BinderModel(session_median_s=600.0, session_sigma=0.0, idle_cull_s=300.0, build_sigma=0.0)
    (job,) = binder_jobs(launches, model, seed=0)
    assert job.session_s == 600.0 + 300.0 and job.build_cold_s == 300.0
    capped = BinderModel(
        session_median_s=600.0, session_sigma=0.0, idle_cull_s=300.0, session_max_s=800.0,
        build_median_s=300.0, build_sigma=0.0, build_max_s=200.0,
    )  # fmt: skip
    (job,) = binder_jobs(launches, capped, seed=0)
    assert job.session_s == 800.0 and job.build_cold_s == 200.0  # min(900, 800), min(300, 200)


def test_image_sizes_are_capped_at_a_pebibyte():
    # median 2**50 bytes, sigma 5: about half the repos draw more than 2**50, held at it
    from stickypack.sim.model import MAX_BYTES

    launches = [Launch(60.0 * k, f"https://github.com/o/r{k}") for k in range(20)]
    model = BinderModel(image_size_median=MAX_BYTES, image_size_sigma=5.0)
    sizes = [j.image_size for j in binder_jobs(launches, model, seed=0)]
    assert max(sizes) == MAX_BYTES == 2**50 and min(sizes) < MAX_BYTES  # P(no draw above) = 2**-20


def test_binder_day_draws_from_1010_repos_to_the_last_of_the_zipf_tail():
    # 1 top repo, 9 next, 1,000 in the Zipf tail: repo-0 .. repo-1009. repo-1009's share is
    # 0.33 * 1000**-1.1 / sum(k**-1.1, k=1..1000) ~ 0.33 * 5.0e-4 / 5.2 ~ 3.2e-5: ~6 of
    # 200,000 launches (P(none) ~ e**-6)
    from stickypack.sim.workloads import binder_day

    repos = {int(j.repo.rsplit("-", 1)[1]) for j in binder_day(0, launches_per_day=200_000).jobs}
    assert max(repos) == 1009 and min(repos) == 0


def test_dask_burst_late_users_stay_two_hours_from_their_start_and_each_user_leaves_at_its_time():
    from stickypack.sim.workloads import PodJob, dask_burst

    jobs = [j for j in dask_burst(0).jobs if isinstance(j, PodJob)]
    late = {(j.group, j.t, j.end_at) for j in jobs if j.group and j.group.startswith("late")}
    # late0 at 4500 s, late1 30 s later, each for 7200 s
    assert late == {("late0", 4500.0, 11700.0), ("late1", 4530.0, 11730.0)}
    leave = {j.group: j.end_at for j in jobs if j.group and j.group.startswith("u")}
    # the 100 first users leave at 3900 s plus up to 5 minutes, each at its own time
    assert len(leave) == 100 and len(set(leave.values())) == 100
    assert all(3900.0 <= t < 4200.0 for t in leave.values())  # type: ignore[operator]


def test_dask_adapt_keeps_zero_to_100_workers_and_trims_22_minutes_into_each_round():
    from stickypack.sim.workloads import PodJob, TrimJob, dask_adapt

    jobs = dask_adapt(0, keep=0).jobs
    # 2 minutes of requests + 20 of work = 1320 s into each 2400 s round
    assert [(j.t, j.keep) for j in jobs if isinstance(j, TrimJob)] == [(1320.0, 0), (3720.0, 0), (6120.0, 0)]
    assert sum(isinstance(j, PodJob) for j in jobs) == 300  # each round asks 100 anew
    assert sum(isinstance(j, PodJob) for j in dask_adapt(0, keep=100).jobs) == 100  # nothing trimmed


def test_the_scenarios_take_the_seeds_load_scale_and_models():
    from stickypack.core.resources import CPU
    from stickypack.sim.model import DaskModel
    from stickypack.sim.workloads import SCENARIOS, PodJob

    binder, dask = BinderModel(), DaskModel(worker_cpu_m=123)
    once = len(SCENARIOS["binder-day"](0, 1.0, binder, dask).jobs)
    twice = len(SCENARIOS["binder-day"](0, 2.0, binder, dask).jobs)
    assert twice == 2 * once  # a whole scale: every launch twice
    for name in ("dask-burst", "dask-adapt"):
        pods = [j.pod for j in SCENARIOS[name](0, 1.0, binder, dask).jobs if isinstance(j, PodJob)]
        assert {p.requests[CPU] for p in pods} == {123}


def test_a_fractional_load_scale_repeats_each_launch_floor_or_ceil_times():
    # load 2.5: each of 40 launches (an hour apart) twice, or three times with probability
    # 0.5: between 80 and 120 jobs, each copy within its launch's minute
    launches = [Launch(3600.0 * k, f"https://github.com/o/r{k}") for k in range(40)]
    jobs = binder_jobs(launches, BinderModel(), seed=0, load_scale=2.5)
    copies = [sum(1 for j in jobs if j.repo == a.repo and a.t <= j.t < a.t + 60.0) for a in launches]
    assert set(copies) == {2, 3} and sum(copies) == len(jobs)  # P(all 2 or all 3) = 2 * 0.5**40


def test_binder_days_launches_fall_within_its_day():
    # launch times are rounded down to the minute, as the archive's are, then spread over
    # that minute: the last minute's launches stay before 24:00 (86400 s). Unrounded, a
    # launch x s before midnight would cross it with probability x / 60: a few launches a
    # minute at night cross it on most days
    from stickypack.sim.workloads import binder_day

    for seed in range(6):
        t = [j.t for j in binder_day(seed).jobs]
        assert min(t) >= 0.0 and max(t) < 86400.0


# --- Reports, the runner and the command on tiny hand-made inputs (mutation audit) ---------


def _printed(render, width: int = 200) -> str:
    console = Console(width=width, file=io.StringIO(), color_system=None)
    render(console)
    return console.file.getvalue()


def _empty_series() -> Series:
    return Series([], [], [], [], [], [], [])


def _rows(text: str) -> dict[str, list[str]]:
    """Each table row's words after the policy name, by policy (one table wide enough)."""
    rows = {}
    for line in text.splitlines():
        words = line.replace("\u2502", " ").split()
        if words and words[0] in ("a", "b"):
            rows[words[0]] = words[1:]
    return rows


def test_a_single_malformed_trace_line_is_in_the_json():
    # 1 malformed line is as much a fact of the run as 3
    cmp = Comparison(
        "trace:x", 0, 1.0, [PolicyRun("a", {"node_hours": 1.0}, _empty_series())], trace_errors=1
    )
    assert cmp.to_json()["malformed_trace_lines"] == 1
    assert SeedSweep([cmp]).to_json()["malformed_trace_lines"] == 1
    assert "malformed_trace_lines" not in Comparison("trace:x", 0, 1.0).to_json()


def _sweep(per_seed: list[dict[str, dict[str, float]]]) -> SeedSweep:
    comparisons = []
    for seed, runs in enumerate(per_seed):
        cmp = Comparison("s", seed, 1.0)
        cmp.runs = [PolicyRun(name, metrics, _empty_series()) for name, metrics in runs.items()]
        comparisons.append(cmp)
    return SeedSweep(comparisons)


def test_best_count_takes_the_lowest_or_the_highest_and_ties_win_for_each():
    # seed 0: a 10 node-h, b 12 -> a best; seed 1: 11 and 11, a tie -> both best: a 2, b 1.
    # hits, higher is better: seed 0: a 0.5, b 0.7 -> b; seed 1: 0.6 each -> both: a 1, b 2.
    sweep = _sweep(
        [
            {
                "a": {"node_hours": 10.0, "build_cache_hit_rate": 0.5},
                "b": {"node_hours": 12.0, "build_cache_hit_rate": 0.7},
            },
            {
                "a": {"node_hours": 11.0, "build_cache_hit_rate": 0.6},
                "b": {"node_hours": 11.0, "build_cache_hit_rate": 0.6},
            },
        ]
    )
    assert [sweep.best_count(p, "node_hours") for p in "ab"] == [2, 1]
    assert [sweep.best_count(p, "build_cache_hit_rate", lower_is_better=False) for p in "ab"] == [1, 2]
    # the table's last two columns: fewest node-h, most hits (builds > 0 here)
    for runs in sweep.comparisons[0].runs + sweep.comparisons[1].runs:
        runs.metrics["builds"] = 2
    rows = _rows(_printed(lambda console: render_sweep_table(sweep, console)))
    assert rows["a"][-2:] == ["2/2", "1/2"] and rows["b"][-2:] == ["1/2", "2/2"]


def test_the_title_spans_the_bound_numerically_and_once_when_alike():
    # bounds 9.5 and 10.3 node-h: as numbers 9.5 is the lower ("10.3" < "9.5" as strings)
    cmp = Comparison("s", 0, 1.0)
    for name, bound in (("a", 10.3), ("b", 9.5)):
        cmp.runs.append(
            PolicyRun(name, {"lower_bound_node_hours": bound, "floor_node_hours": 12.0}, _empty_series())
        )
    text = " ".join(_printed(lambda console: render_table(cmp, console)).split())
    assert "lower bound 9.5-10.3 node-h" in text
    assert "CA floor 12.0 node-h" in text  # both runs' floors print alike: one figure, no "12.0-12.0"


def test_the_sweep_calls_out_pods_unscheduled_at_any_seed():
    # a: none at seed 0, 3 at seed 1 -> its worst, 3, is called out; b: none at either
    sweep = _sweep(
        [
            {"a": {"pods_unscheduled": 0}, "b": {"pods_unscheduled": 0}},
            {"a": {"pods_unscheduled": 3}, "b": {"pods_unscheduled": 0}},
        ]
    )
    text = " ".join(_printed(lambda console: render_sweep_table(sweep, console)).split())
    assert "a: 3 pod(s) never scheduled" in text and "b:" not in text


def test_the_sweep_shows_a_count_columns_mean_with_a_decimal():
    # peak nodes 3 and 4 over two seeds: mean 3.5, not rounded to a whole node
    sweep = _sweep([{"a": {"peak_nodes": 3}}, {"a": {"peak_nodes": 4}}])
    text = " ".join(_printed(lambda console: render_sweep_table(sweep, console)).split())
    assert "3.5 (3-4)" in text


def test_most_hits_is_counted_when_any_policy_built_and_a_dash_when_none_did():
    # b built 2 images, a none: the hit-rate wins count (b's 0.5 beats a's 0.0 on 1 seed of 1)
    built = _sweep(
        [{"a": {"builds": 0, "build_cache_hit_rate": 0.0}, "b": {"builds": 2, "build_cache_hit_rate": 0.5}}]
    )
    rows = _rows(_printed(lambda console: render_sweep_table(built, console)))
    assert rows["a"][-1] == "0/1" and rows["b"][-1] == "1/1"
    none = _sweep([{"a": {"builds": 0}, "b": {"builds": 0}}])
    rows = _rows(_printed(lambda console: render_sweep_table(none, console)))
    assert rows["a"][-1] == "-" and rows["b"][-1] == "-"


def test_the_build_time_cdf_is_sorted_rises_to_one_and_shows_when_any_run_built():
    import matplotlib.pyplot as plt

    t = [0.0, 3600.0]
    built = Series(t, [1, 1], t, [1, 1], t, [1, 1], [300.0, 90.0, 600.0])
    cmp = Comparison(
        "s",
        0,
        1.0,
        [PolicyRun("a", {}, built), PolicyRun("b", {}, Series(t, [1, 1], t, [1, 1], t, [1, 1], []))],
    )
    figures = plot_figures(cmp)
    try:
        assert sorted(figures) == ["build_time_cdf.png", "nodes.png"]  # b built nothing, a did
        (line,) = figures["build_time_cdf.png"].axes[0].get_lines()
        # 3 builds sorted: 90 s, 300 s, 600 s at 1/3, 2/3 and 3/3 of the builds
        assert list(line.get_xdata()) == [90.0, 300.0, 600.0]
        assert list(line.get_ydata()) == pytest.approx([1 / 3, 2 / 3, 1.0])
    finally:
        for fig in figures.values():
            plt.close(fig)


def test_a_worker_reports_at_each_step_of_progress_and_not_between():
    from stickypack.sim import runner

    class Queue:  # what the reporter needs of the worker's queue: put
        def __init__(self) -> None:
            self.items: list[tuple[int, float]] = []

        def put(self, item: tuple[int, float]) -> None:
            self.items.append(item)

    queue = Queue()
    report = runner._Reporter(7, queue)  # type: ignore[arg-type]
    assert runner.PROGRESS_STEP == 0.01
    for fraction in (0.0, 0.005, 0.01, 0.015, 0.02):
        report(fraction)
    # 0.0 is the first (past -1.0); 0.005 is under 0.0 + 0.01; 0.01 is exactly one step on;
    # 0.015 is under 0.01 + 0.01; 0.02 is exactly one more step
    assert queue.items == [(7, 0.0), (7, 0.01), (7, 0.02)]


def test_placement_cost_counts_the_catch_all_profiles_weighted_plugins(tmp_path):
    from stickypack.policies import load_policy_file
    from stickypack.sim.runner import placement_cost

    text = """name: p
profiles:
  - name: build
    match: {labels: {component: binderhub-build}}
    filters: [NodeResourcesFit, NodeAffinity, TaintToleration]
    score: [{plugin: MostAllocated, weight: 1}, {plugin: LeastAllocated, weight: 1}]
  - name: rest
    filters: [NodeResourcesFit]
    score: [{plugin: MostAllocated, weight: 1}, {plugin: LeastAllocated, weight: 0}]
"""
    path = tmp_path / "p.yaml"
    path.write_text(text)
    # the catch-all "rest": 1 filter + 1 scorer of non-zero weight = 2 (the build profile's 5
    # places build pods only; a weight-0 scorer is not run)
    assert placement_cost(load_policy_file(path)) == 2
    path.write_text(text.replace("  - name: rest\n", "  - name: rest\n    match: {labels: {a: b}}\n"))
    assert placement_cost(load_policy_file(path)) == 5  # no catch-all: the largest, 3 + 2


def test_one_job_runs_each_policy_in_this_process_on_its_own_workload_copy(monkeypatch):
    import os

    from stickypack.policies import load_builtin
    from stickypack.sim import runner
    from stickypack.sim.workloads import dask_adapt

    pids: list[int] = []  # a forked worker's appends would not reach this list
    workloads: list[object] = []

    class Here(runner.Simulation):
        def run(self) -> runner.RunResult:
            pids.append(os.getpid())
            workloads.append(self.workload)
            return super().run()

    monkeypatch.setattr(runner, "Simulation", Here)
    policies = [load_builtin(name) for name in ("z2jh", "stickypack")]
    cmp = runner.compare(lambda: dask_adapt(0), policies, seed=0, jobs=1)
    assert pids == [os.getpid(), os.getpid()]
    assert workloads[0] is not workloads[1]  # each policy its own copy: pods are mutable
    assert all(run.metrics["wall_s"] > 0 for run in cmp.runs)  # measured: the time each run took


class _Reports:
    """A stand-in for the workers' queue in :func:`runner._follow`: what it holds is read in order."""

    def __init__(self, items: list[tuple[int, float]]) -> None:
        self.items = items

    def empty(self) -> bool:
        return not self.items

    def get(self) -> tuple[int, float]:
        return self.items.pop(0)


def test_a_report_arriving_after_its_run_ended_does_not_move_the_bar_back():
    from concurrent.futures import Future

    from stickypack.sim import runner

    a, b = Future(), Future()
    a.set_result(None)
    reports = _Reports([(0, 0.5)])
    calls: list[tuple[str, float]] = []

    def progress(name: str, fraction: float) -> None:
        calls.append((name, fraction))
        if (name, fraction) == ("a", 1.0):  # a late report of a's, then b ends
            reports.items.append((0, 0.7))
            b.set_result(None)

    runner._follow([a, b], reports, ["a", "b"], progress)  # type: ignore[arg-type]
    assert calls == [("a", 0.5), ("a", 1.0), ("b", 1.0)]


def test_follow_stops_at_a_failed_run_and_leaves_its_error_to_the_caller():
    from concurrent.futures import Future

    from stickypack.sim import runner

    a, b = Future(), Future()  # b never ends: following it on would never return
    a.set_exception(RuntimeError("boom"))
    calls: list[tuple[str, float]] = []
    import threading

    follow = threading.Thread(
        target=runner._follow,
        args=([a, b], _Reports([]), ["a", "b"], lambda n, f: calls.append((n, f))),
        daemon=True,
    )
    follow.start()
    follow.join(30)  # a guard against a hang, not a timing: it returns in one poll (0.1 s)
    assert not follow.is_alive(), "_follow went on after a run failed"
    assert calls == []  # a failed: no full bar for it


def test_parse_seeds_takes_a_one_seed_range_and_exactly_the_most_seeds():
    from stickypack.cli.common import UsageError
    from stickypack.cli.simulate import MAX_SEEDS, parse_seeds

    assert parse_seeds("2-2") == [2]  # a range of one seed is not backwards
    assert MAX_SEEDS == 1000
    assert parse_seeds("0-999") == list(range(1000))  # 999 - 0 + 1 = 1000 seeds: the most
    assert len(parse_seeds("0-998,5000")) == 1000
    for spec in ("0-1000", "0-998,5000-5001"):  # 1001 seeds
        with pytest.raises(UsageError, match="at most 1000 seeds"):
            parse_seeds(spec)


def test_a_load_scale_of_exactly_the_most_passes_the_range_check(capsys):
    # 1000 is allowed (0 < X <= 1000): dask-adapt then refuses it for its fixed size instead
    assert main(["simulate", "--scenario", "dask-adapt", "--load-scale", "1000", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "--load-scale applies to --trace and binder-day" in err and "must be > 0" not in err
    assert main(["simulate", "--scenario", "dask-adapt", "--load-scale", "1000.5", "--quiet"]) == 2
    assert "--load-scale must be > 0 and <= 1000" in capsys.readouterr().err


def test_a_load_scale_keeping_one_launch_on_average_is_not_refused_up_front(tmp_path, capsys):
    # 2 launches at x0.5: 1.0 on average, not fewer than one (a seed may still keep none)
    trace = tmp_path / "events-two.jsonl"
    trace.write_text("".join(_launch_line(f"2019-03-04T1{i}:00:00Z") + "\n" for i in range(2)))
    main(["simulate", "--trace", str(trace), "--load-scale", "0.5", "--policies", "z2jh", "--quiet"])
    assert "keeps fewer than one" not in capsys.readouterr().err


def test_ctrl_c_exits_130_with_one_line(monkeypatch, capsys):
    from stickypack.cli import simulate

    def interrupted(args, console):
        raise KeyboardInterrupt

    monkeypatch.setattr(simulate, "_run_simulate", interrupted)
    assert main(["simulate", "--scenario", "dask-adapt"]) == 130  # 128 + SIGINT's 2, as a shell
    assert capsys.readouterr().err.strip() == "stickypack simulate: interrupted"


def test_the_progress_bars_count_the_seeds_done(monkeypatch):
    # --seeds 0,1: each bar's total is 2 seeds; at the end it shows 1 done + 1.0 of the last
    import sys

    from stickypack.cli import simulate

    finals: dict[str, float] = {}

    class Recorded(simulate._ProgressBars):
        def stop(self) -> None:
            finals.update({task.description: task.completed for task in self._progress.tasks})
            super().stop()

    monkeypatch.setattr(simulate, "_ProgressBars", Recorded)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)  # bars are drawn on a terminal only
    argv = ["simulate", "--scenario", "dask-adapt", "--policies", "z2jh", "--seeds", "0,1", "--jobs", "1"]
    assert main(argv) == 0
    assert finals == {"simulating z2jh": 2.0}


def test_the_plots_are_of_the_first_seed_given_and_say_so_only_for_several(tmp_path, monkeypatch, capsys):
    from stickypack.sim import report

    plotted: list[int] = []
    monkeypatch.setattr(report, "write_plots", lambda cmp, directory: plotted.append(cmp.seed) or [])
    plots = ["--plots", str(tmp_path / "plots"), "--quiet", "--scenario", "dask-adapt", "--policies", "z2jh"]
    assert main(["simulate", *plots, "--seeds", "3,1"]) == 0
    assert plotted == [3] and "plots of seed 3:" in capsys.readouterr().out
    assert main(["simulate", *plots]) == 0  # one seed, the default 0: nothing to say which
    assert plotted == [3, 0] and "plots of seed" not in capsys.readouterr().out


def test_table_columns_fit_the_terminal_exactly():
    """``_print_tables``' arithmetic on tiny tables: a table is ``sum(width + 3)`` over its
    columns plus 1 (rich's box rules and one space of padding each side), the policy column's
    width here 6 ("policy")."""
    from stickypack.sim.report import _print_tables

    def tables(width: int, headers: list[str], cells: list[str]) -> tuple[int, str]:
        text = _printed(lambda console: _print_tables(console, "t", headers, [("a", cells)]), width)
        assert all(len(line) <= width for line in text.splitlines())
        return text.count("policy"), text

    two = ["aa bb", "cc dd"]  # each 5 wide on one line, 2 at least
    # on one line: (5 + 3) * 2 + 6 + 3 + 1 = 26 columns; at least (2 + 3) * 2 + 10 = 20
    count, text = tables(26, two, ["1", "2"])
    assert count == 1 and "aa bb" in text and "cc dd" in text
    count, text = tables(20, two, ["1", "2"])  # both columns at their least: still one table
    assert count == 1 and "aa bb" not in text and "cc dd" not in text
    count, text = tables(23, two, ["1", "2"])  # 3 to spare: exactly what one header needs
    assert count == 1 and "aa bb" in text and "cc dd" not in text
    count, text = tables(25, two, ["1", "2"])  # 1 short of one line: 5 to spare, one header whole
    assert count == 1 and "aa bb" in text and "cc dd" not in text
    # 6 to spare, 2 at least each: the two headers needing 3 more each are whole, not the one
    # needing 5 (the fewest wrapped headers): 3 * (2 + 3) + 10 = 25, + 6 = 31
    count, text = tables(31, ["a bb cc", "dd ee", "ff gg"], ["1", "2", "3"])
    assert count == 1 and "dd ee" in text and "ff gg" in text and "a bb cc" not in text


def test_the_sweeps_means_leave_out_a_metric_no_seed_has():
    # node-hours 1.0 and 2.0 over two seeds: mean 1.5; no build times at all: no mean for them
    sweep = _sweep([{"a": {"node_hours": 1.0}}, {"a": {"node_hours": 2.0}}])
    assert sweep.means("a") == {"node_hours": 1.5}
    assert sweep.to_json()["results"] == [{"policy": "a", "node_hours": 1.5}]
