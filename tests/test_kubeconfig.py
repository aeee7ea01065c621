"""Every command that reads a kubeconfig (``inspect``, ``forget-node``, ``extender``) says in
one line what is wrong with one it cannot use, naming the file, with exit status 2 (bad
input), as every other bad input; an API server it cannot connect to is one line too,
naming the server and the kubeconfig, with status 1 (``inspect`` and ``forget-node``; the
extender serves, not ready, and its watches retry). Run through the CLI's ``main`` and, for
the exit status of the real process, as ``python -m stickypack.cli``."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from stickypack.cli import main

COMMANDS = ["inspect", "forget-node n1", "extender"]


def _kubeconfig(server: str = "https://127.0.0.1:6443", **changes: object) -> dict:
    """A kubeconfig of one cluster, context and user, with ``changes`` to its top level."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": server, "insecure-skip-tls-verify": True}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "k", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "k",
        **changes,
    }


def _write(text: str | bytes) -> Callable[[Path], Path]:
    def make(tmp_path: Path) -> Path:
        path = tmp_path / "kubeconfig"
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(text)
        return path

    return make


def _yaml(**changes: object) -> Callable[[Path], Path]:
    return _write(yaml.safe_dump(_kubeconfig(**changes)))


def _directory(tmp_path: Path) -> Path:
    path = tmp_path / "kubeconfig.d"
    path.mkdir()
    return path


def _missing_ca(tmp_path: Path) -> Path:
    config = _kubeconfig()
    config["clusters"][0]["cluster"] = {
        "server": "https://127.0.0.1:6443",
        "certificate-authority": "gone.crt",
    }
    return _write(yaml.safe_dump(config))(tmp_path)


#: (case, a kubeconfig written into tmp_path, what the message says after its path)
BAD: list[tuple[str, Callable[[Path], Path], str]] = [
    ("missing", lambda tmp_path: tmp_path / "no-such-kubeconfig", ": not found"),
    ("a directory", _directory, ": cannot read: Is a directory"),
    ("not UTF-8", _write(b"apiVersion: v1\nkind: \xff\n"), ": not UTF-8 text (byte 0xff at offset 21)"),
    ("not YAML", _write("clusters: [\n"), ":2:1: not valid YAML: expected the node content"),
    ("empty", _write(""), ": not a kubeconfig (empty, not a mapping with clusters, contexts and users)"),
    ("a list", _write("- a\n"), ": not a kubeconfig (a YAML list, not a mapping"),
    ("clusters not a list", _yaml(clusters=5), ": clusters is not a list of entries with a name"),
    ("no current context", _yaml(**{"current-context": ""}), ": no current-context"),
    (
        "an unknown current context",
        _yaml(**{"current-context": "other"}),
        ": its current-context 'other' is not one of its contexts (k)",
    ),
    (
        "a context naming no cluster",
        _yaml(contexts=[{"name": "k", "context": {"user": "u"}}]),
        ": context 'k' names no cluster",
    ),
    (
        "a context naming a cluster not there",
        _yaml(contexts=[{"name": "k", "context": {"cluster": "gone", "user": "u"}}]),
        ": context 'k' names cluster 'gone', which it does not define (its clusters: c)",
    ),
    (
        "a cluster without a server",
        _yaml(clusters=[{"name": "c", "cluster": {}}]),
        ": cluster 'c' (context 'k') has no server",
    ),
    ("its CA file missing", _missing_ca, ": cannot be used: ConfigException: File does not exists: "),
]


def _one_error_line(err: str, out: str, command: str) -> str:
    assert not out and err.count("\n") == 1 and "Traceback" not in err, (out, err)
    prefix = f"stickypack {command.split()[0]}: error: "
    assert err.startswith(prefix), err
    return err[len(prefix) :].rstrip("\n")


@pytest.fixture(autouse=True)
def _no_cluster_around(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No $KUBECONFIG, not in a pod, no ~/.kube/config: only what a test gives is read."""
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize(("case", "make", "says"), BAD, ids=[b[0] for b in BAD])
def test_a_kubeconfig_that_cannot_be_used_is_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str, case: str, make: Callable, says: str
) -> None:
    if case == "its CA file missing":  # relative to the kubeconfig's directory, as kubectl reads it
        says += str(tmp_path / "gone.crt")
    path = make(tmp_path)
    assert main([*command.split(), "--kubeconfig", str(path)]) == 2
    out, err = capsys.readouterr()
    assert _one_error_line(err, out, command).startswith(f"kubeconfig {path}{says}"), err


def test_an_unreadable_kubeconfig_is_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A file its mode keeps from us (not for root, who reads any file), and a directory
    given as the file (for anyone)."""
    unreadable = [tmp_path / "a-directory"]
    unreadable[0].mkdir()
    if os.geteuid() != 0:
        path = _yaml()(tmp_path)
        path.chmod(0)
        unreadable.append(path)
    for path in unreadable:
        for command in COMMANDS:
            assert main([*command.split(), "--kubeconfig", str(path)]) == 2
            out, err = capsys.readouterr()
            assert _one_error_line(err, out, command).startswith(f"kubeconfig {path}: cannot read: "), err


@pytest.mark.parametrize("command", COMMANDS)
def test_where_the_kubeconfig_came_from_is_said(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    """The default ~/.kube/config and $KUBECONFIG (one file, or a list of which none is
    there) are named as such; the in-cluster configuration without its files, likewise."""
    default = tmp_path / "home" / ".kube" / "config"
    assert main(command.split()) == 2
    out, err = capsys.readouterr()
    line = _one_error_line(err, out, command)
    assert (
        line == f"kubeconfig {default} (the default: none given, no $KUBECONFIG, not in a cluster): not found"
    )

    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "env-config"))
    assert main(command.split()) == 2
    out, err = capsys.readouterr()
    assert (
        _one_error_line(err, out, command)
        == f"kubeconfig {tmp_path / 'env-config'} (from $KUBECONFIG): not found"
    )

    both = f"{tmp_path / 'a'}:{tmp_path / 'b'}"
    monkeypatch.setenv("KUBECONFIG", both)
    assert main(command.split()) == 2
    out, err = capsys.readouterr()
    assert (
        _one_error_line(err, out, command)
        == f"kubeconfig {both} (from $KUBECONFIG): none of its files is there"
    )

    monkeypatch.delenv("KUBECONFIG")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    assert main(command.split()) == 2
    out, err = capsys.readouterr()
    assert _one_error_line(err, out, command).startswith(
        "the in-cluster configuration (the pod's service account): cannot be used: ConfigException: "
        "Service token file does not exist"
    ), err


def test_a_kubeconfig_list_is_merged_and_a_missing_file_of_it_skipped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """$KUBECONFIG of several files, as kubectl and kubernetes_asyncio take it: one file's
    context names a cluster another defines; a file of the list not there is skipped; a bad
    one is named within the list."""
    clusters = tmp_path / "clusters"
    clusters.write_text(
        yaml.safe_dump({"clusters": _kubeconfig(server=f"https://127.0.0.1:{_closed_port()}")["clusters"]})
    )
    rest = _kubeconfig()
    del rest["clusters"]
    contexts = tmp_path / "contexts"
    contexts.write_text(yaml.safe_dump(rest))
    monkeypatch.setenv("KUBECONFIG", f"{tmp_path / 'gone'}:{clusters}:{contexts}")
    assert main(["inspect"]) == 1  # read, merged, and the API server tried
    out, err = capsys.readouterr()
    assert "cannot connect to the API server https://127.0.0.1:" in _one_error_line(err, out, "inspect")

    contexts.write_text("contexts: [\n")
    assert main(["inspect"]) == 2
    out, err = capsys.readouterr()
    line = _one_error_line(err, out, "inspect")
    assert line.startswith(
        f"kubeconfig {contexts} (of {tmp_path / 'gone'}:{clusters}:{contexts}):2:1: not valid YAML"
    )


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again on leaving: nothing listens there


@pytest.mark.parametrize("command", ["inspect", "forget-node n1"])
def test_an_api_server_not_there_is_one_line_naming_it_and_the_kubeconfig(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    server = f"https://127.0.0.1:{_closed_port()}"
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(_kubeconfig(server=server)))
    assert main([*command.split(), "--kubeconfig", str(path)]) == 1
    out, err = capsys.readouterr()
    line = _one_error_line(err, out, command)
    assert line.startswith(f"cannot connect to the API server {server} (from kubeconfig {path}): "), line
    assert "Connect call failed" in line


def test_the_process_exits_2_with_one_line(tmp_path: Path) -> None:
    """The real command, as a user runs it: status 2, one line on stderr, nothing else."""
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(_kubeconfig(**{"current-context": "other"})))
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")}
    for command in COMMANDS:
        done = subprocess.run(
            [sys.executable, "-m", "stickypack.cli", *command.split(), "--kubeconfig", str(path)],
            capture_output=True, text=True, timeout=60, env=env,
        )  # fmt: skip
        assert done.returncode == 2, (command, done.stderr)
        assert done.stderr == (
            f"stickypack {command.split()[0]}: error: kubeconfig {path}: its current-context 'other' "
            "is not one of its contexts (k)\n"
        ), done.stderr
        assert not done.stdout


def test_the_extender_serves_while_its_api_server_is_not_there(tmp_path: Path) -> None:
    """A service keeps serving: with an API server that cannot be connected to, the extender
    starts, answers /healthz, is not ready, and logs its watches' retries naming the host."""
    import time
    import urllib.error
    import urllib.request

    api_port, port = _closed_port(), _closed_port()
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(_kubeconfig(server=f"https://127.0.0.1:{api_port}")))
    log = tmp_path / "extender.log"
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")}
    env.update(NO_PROXY="127.0.0.1", no_proxy="127.0.0.1")
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def get(what: str) -> tuple[int, str]:
        try:
            with opener.open(f"http://127.0.0.1:{port}{what}", timeout=2) as resp:
                return resp.status, resp.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()
        except OSError:
            return 0, ""

    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "stickypack.cli", "extender", "--kubeconfig", str(path),
             "--host", "127.0.0.1", "--port", str(port)],
            stdout=out, stderr=subprocess.STDOUT, env=env,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while get("/healthz")[0] != 200 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert proc.poll() is None, log.read_text()
        assert get("/healthz")[0] == 200
        status, body = get("/readyz")
        assert status == 503 and "nodes cache not synced" in body
        while f"Cannot connect to host 127.0.0.1:{api_port}" not in log.read_text():
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
    finally:
        proc.terminate()
        proc.wait(20)


def test_an_empty_kubeconfig_option_or_variable_is_not_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--kubeconfig ""`` and ``KUBECONFIG=`` are taken as not given, as kubectl takes an
    empty $KUBECONFIG: the next source is read (here the default ~/.kube/config)."""
    from stickypack.kube.client import kubeconfig_path

    default = str(tmp_path / "home" / ".kube" / "config")
    said = f"kubeconfig {default} (the default: none given, no $KUBECONFIG, not in a cluster)"
    monkeypatch.setenv("KUBECONFIG", "")
    assert kubeconfig_path("") == kubeconfig_path(None) == (default, said)


def _check(tmp_path: Path, *docs: dict) -> str | None:
    """check_kubeconfig on ``docs`` written as files a, b, ... and given as one list: its
    message after the source's name, None when it takes them."""
    from stickypack.kube.client import KubeconfigError, check_kubeconfig

    paths = []
    for k, doc in enumerate(docs):
        path = tmp_path / "abcdef"[k]
        path.write_text(yaml.safe_dump(doc))
        paths.append(str(path))
    try:
        check_kubeconfig(":".join(paths), "SOURCE")
    except KubeconfigError as exc:
        return str(exc).removeprefix("SOURCE")
    return None


def test_kubeconfig_files_merge_as_kubernetes_asyncio_merges_them(tmp_path: Path) -> None:
    """As its ``KubeConfigMerger``: of clusters (or contexts) of one name, in one file or
    across the list, the first is kept; the last file that sets ``current-context`` sets it."""
    first = _kubeconfig(server="https://first:6443")
    # a second cluster "c" (no server) and context "k" (another cluster) in the same file...
    first["clusters"].append({"name": "c", "cluster": {}})
    first["contexts"].append({"name": "k", "context": {"cluster": "gone"}})
    assert _check(tmp_path, first) is None
    # ...and in a later file of the list: the first ones are used
    later = {
        "clusters": [{"name": "c", "cluster": {}}],
        "contexts": [{"name": "k", "context": {"cluster": "gone"}}],
    }
    assert _check(tmp_path, first, later) is None
    # the later file's current-context wins over the first's
    other = {"contexts": [{"name": "k2", "context": {"cluster": "gone"}}], "current-context": "k2"}
    assert _check(tmp_path, first, other) == (
        ": context 'k2' names cluster 'gone', which it does not define (its clusters: c)"
    )


@pytest.mark.parametrize(
    ("changes", "says"),
    [
        (
            {"clusters": [{"cluster": {"server": "https://x:6443"}}]},
            ": clusters is not a list of entries with a name",
        ),
        ({"contexts": [{"name": "k", "context": {"cluster": ""}}]}, ": context 'k' names no cluster"),
        (
            {"clusters": [{"name": "c", "cluster": {"server": ""}}]},
            ": cluster 'c' (context 'k') has no server",
        ),
        (
            {"clusters": [{"name": "c", "cluster": {"server": 6443}}]},
            ": cluster 'c' (context 'k') has no server",
        ),
    ],
    ids=["a cluster without a name", "an empty cluster name", "an empty server", "a server not a string"],
)
def test_a_kubeconfig_entry_without_what_it_needs_is_named(tmp_path: Path, changes: dict, says: str) -> None:
    assert _check(tmp_path, _kubeconfig(**changes)) == says


def test_a_timeout_or_a_refused_connection_is_an_api_server_not_there() -> None:
    """``connection_failed``: what ``api_client`` turns into its one line naming the server.
    A timeout (an API server that accepts and never answers, past the request timeout) is
    one; an HTTP error is not."""
    import aiohttp
    from kubernetes_asyncio.client.exceptions import ApiException

    from stickypack.kube.client import connection_failed

    assert connection_failed(TimeoutError())
    assert connection_failed(aiohttp.ClientConnectionError("refused"))
    assert not connection_failed(ApiException(status=503, reason="Service Unavailable"))


async def test_the_in_cluster_configuration_connects_to_the_service_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In a pod (no kubeconfig, $KUBERNETES_SERVICE_HOST set) the client connects to the
    service address with the service account's token and CA (files written here where the
    pod's would be mounted)."""
    import trustme
    from kubernetes_asyncio.config import incluster_config

    from stickypack.kube.client import make_api_client

    token, ca = tmp_path / "token", tmp_path / "ca.crt"
    token.write_text("the-token")
    trustme.CA().cert_pem.write_to_path(str(ca))
    monkeypatch.setattr(incluster_config, "SERVICE_TOKEN_FILENAME", str(token))
    monkeypatch.setattr(incluster_config, "SERVICE_CERT_FILENAME", str(ca))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    api = await make_api_client()
    try:
        assert api.configuration.host == "https://10.0.0.1:443"
        assert api.configuration.ssl_ca_cert == str(ca)
    finally:
        await api.close()


async def test_a_link_to_a_file_not_there_in_a_kubeconfig_list_is_skipped(tmp_path: Path) -> None:
    """A file of a ``:``-separated list that is a symbolic link to nothing is not there, as
    kubectl (its read fails "does not exist") and kubernetes_asyncio (``os.path.exists``)
    take it: skipped, the list read on. Alone, it cannot be read."""
    from kubernetes_asyncio import client, config

    from stickypack.kube.client import KubeconfigError, check_kubeconfig

    link, good = tmp_path / "link", tmp_path / "good"
    link.symlink_to(tmp_path / "gone")
    good.write_text(yaml.safe_dump(_kubeconfig(server="https://good:6443")))
    paths = f"{link}:{good}"
    check_kubeconfig(paths, "SOURCE")
    cfg = client.Configuration()
    await config.load_kube_config(config_file=paths, client_configuration=cfg)
    assert cfg.host == "https://good:6443"  # what the library makes of the same list
    with pytest.raises(KubeconfigError, match=f"^kubeconfig {link}: "):
        check_kubeconfig(str(link), f"kubeconfig {link}")
