"""A real, local Kubernetes control plane for tests: etcd, kube-apiserver, kube-scheduler.

No kubelet and no containers: Nodes are API objects whose status the harness fills in
(capacity, allocatable, a Ready condition), and bound pods simply stay ``Pending`` with
``spec.nodeName`` set, which is all a scheduler test needs.

Typical use::

    from stickypack.testing import ControlPlane

    with ControlPlane() as cp:
        cp.start_scheduler({"profiles": [{"schedulerName": "default-scheduler"}]})
        cp.create_node("n1", cpu="4", memory="16Gi")
        cp.create_pod("p1", cpu="500m", memory="1Gi")
        assert cp.wait_bound(["p1"]) == {"p1": "n1"}

Binaries come from :func:`binaries_dir` (``$STICKYPACK_K8S_BIN``, else the cache filled by
``tools/k8s/build.sh``, i.e. ``make k8s``). Every process runs in its own process group and
is stopped with SIGTERM, then SIGKILL; processes still alive at interpreter exit are killed
by an ``atexit`` hook, and, where ``setpriv`` exists, they also get SIGKILL if the Python
process dies. Each process logs to a file in the work directory, which is deleted after a
clean stop and kept (and its path printed) after a failure or with ``keep=True``.

Units: CPU and memory are Kubernetes quantities (``"500m"``, ``"4"``, ``"16Gi"``), times
and timeouts are seconds.
"""

from __future__ import annotations

import asyncio
import atexit
import base64
import contextlib
import copy
import datetime
import itertools
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import weakref
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import yaml

if TYPE_CHECKING:
    from kubernetes_asyncio.client import ApiClient, Configuration

__all__ = [
    "BinariesNotFoundError",
    "ControlPlane",
    "ControlPlaneError",
    "SchedulerHandle",
    "binaries_dir",
    "find_binaries",
    "pod_manifest",
]

T = TypeVar("T")

#: Binaries a ControlPlane needs (helm is built too: ``find_binaries(names=["helm"])``).
REQUIRED_BINARIES: tuple[str, ...] = ("etcd", "kube-apiserver", "kube-scheduler")
#: Environment variable naming a directory that holds the binaries.
BIN_ENV = "STICKYPACK_K8S_BIN"
#: Environment variable naming the build cache (same meaning as in tools/k8s/build.sh).
CACHE_ENV = "STICKYPACK_K8S_CACHE"

_REPO_ROOT = Path(__file__).resolve().parents[3]
_BUILD_HINT = "build them with `make k8s` (tools/k8s/build.sh) or point $STICKYPACK_K8S_BIN at them"
_SERVICE_CIDR = "10.0.0.0/24"


class ControlPlaneError(RuntimeError):
    """A control-plane process failed to start, died, or an API wait timed out."""


class BinariesNotFoundError(ControlPlaneError, FileNotFoundError):
    """etcd, kube-apiserver or kube-scheduler is missing."""


# --------------------------------------------------------------------------- binaries


def versions_file() -> Path | None:
    """The ``tools/k8s/versions.env`` of the source checkout, if there is one."""
    for root in (_REPO_ROOT, Path.cwd()):
        path = root / "tools" / "k8s" / "versions.env"
        if path.is_file():
            return path
    return None


def _read_versions(path: Path) -> dict[str, str]:
    values: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, value = line.split("=", 1)
            values[key.strip()] = value.strip().strip("'\"")
    return values


def pinned_versions() -> dict[str, str]:
    """``{"K8S_VERSION": "v1.37.2", "ETCD_VERSION": ..., "HELM_VERSION": ...}`` from
    ``tools/k8s/versions.env`` (empty when not running from a source checkout)."""
    path = versions_file()
    return _read_versions(path) if path else {}


def binaries_dir() -> Path:
    """Directory holding ``etcd``, ``kube-apiserver`` and ``kube-scheduler``.

    ``$STICKYPACK_K8S_BIN`` if set; else the directory that ``tools/k8s/build.sh`` fills and
    prints: ``${STICKYPACK_K8S_CACHE:-~/.cache/stickypack/k8s}/bin-kubernetes-<v>-etcd-<v>-
    helm-<v>-prometheus-<v>-operator-<v>`` with the versions of ``tools/k8s/versions.env``
    (it also holds ``helm``, ``promtool`` and ``crds/``, the prometheus-operator CRDs). The
    directory may not exist yet; :func:`find_binaries` checks.
    """
    explicit = os.environ.get(BIN_ENV)
    if explicit:
        return Path(explicit).expanduser()
    versions = pinned_versions()
    keys = (
        "K8S_VERSION",
        "ETCD_VERSION",
        "HELM_VERSION",
        "PROMETHEUS_VERSION",
        "PROMETHEUS_OPERATOR_VERSION",
    )
    try:
        k8s, etcd, helm, prometheus, operator = (versions[k] for k in keys)
    except KeyError:
        raise BinariesNotFoundError(
            f"no tools/k8s/versions.env found (looked in {_REPO_ROOT} and {Path.cwd()}) and "
            f"${BIN_ENV} is not set: set ${BIN_ENV} to a directory with "
            f"{', '.join(REQUIRED_BINARIES)}"
        ) from None
    cache = Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "stickypack" / "k8s")
    name = f"bin-kubernetes-{k8s}-etcd-{etcd}-helm-{helm}-prometheus-{prometheus}-operator-{operator}"
    return cache.expanduser() / name


def find_binaries(
    bin_dir: str | os.PathLike[str] | None = None,
    names: Sequence[str] = REQUIRED_BINARIES,
) -> dict[str, Path]:
    """Paths of the named binaries in ``bin_dir`` (default :func:`binaries_dir`).

    Raises:
        BinariesNotFoundError: naming every missing binary and how to build them.
    """
    directory = Path(bin_dir) if bin_dir is not None else binaries_dir()
    found: dict[str, Path] = {}
    missing: list[str] = []
    for name in names:
        path = directory / name
        if path.is_file() and os.access(path, os.X_OK):
            found[name] = path
        else:
            missing.append(name)
    if missing:
        raise BinariesNotFoundError(
            f"control-plane binaries missing in {directory}: {', '.join(missing)}; {_BUILD_HINT}"
        )
    return found


# --------------------------------------------------------------------------- processes


@dataclass
class _Process:
    name: str
    popen: subprocess.Popen[bytes]
    log_path: Path

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None


_LIVE: dict[int, _Process] = {}
_LIVE_LOCK = threading.Lock()


def _spawn(name: str, args: Sequence[str | Path], log_path: Path, cwd: Path) -> _Process:
    """Start ``args`` in a new process group, stdout+stderr appended to ``log_path``."""
    cmd = [str(a) for a in args]
    setpriv = shutil.which("setpriv")
    if (
        setpriv
        and sys.platform.startswith("linux")
        and (threading.current_thread() is threading.main_thread())
    ):
        # The kernel sends SIGKILL to the child when its parent thread dies (pytest killed
        # hard, so that atexit never runs). Only from the main thread: the signal is tied
        # to the thread that forked.
        cmd = [setpriv, "--pdeathsig", "KILL", "--", *cmd]
    env = dict(os.environ)
    env["NO_PROXY"] = env["no_proxy"] = ",".join(
        x for x in ("127.0.0.1,localhost", env.get("NO_PROXY", "")) if x
    )
    with open(log_path, "ab") as log:
        log.write(f"# {' '.join(cmd)}\n".encode())
        log.flush()
        popen = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env=env,
            start_new_session=True,
        )
    proc = _Process(name, popen, log_path)
    with _LIVE_LOCK:
        _LIVE[proc.pid] = proc
    return proc


def _terminate(proc: _Process, timeout: float = 10.0) -> None:
    """SIGTERM the process group, wait up to ``timeout`` seconds, then SIGKILL it."""
    pgid = proc.pid  # start_new_session: the leader's pid is the group id
    if proc.alive():
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.popen.wait(timeout)
    # Kill whatever is left of the group (also children of a leader that already exited).
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.popen.wait(10)
    with _LIVE_LOCK:
        _LIVE.pop(proc.pid, None)


_PLANES: weakref.WeakSet[ControlPlane] = weakref.WeakSet()


@atexit.register
def _kill_leftovers() -> None:
    """At interpreter exit: stop control planes never stopped (their logs are kept and
    their path printed), then kill any process still alive."""
    for plane in list(_PLANES):
        with contextlib.suppress(Exception):
            plane.stop(failed=True)
    with _LIVE_LOCK:
        procs = list(_LIVE.values())
    for proc in reversed(procs):
        _terminate(proc, timeout=3.0)


def _log_tail(path: Path, lines: int = 25) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join(text[-lines:])


_PORTS_GIVEN: set[int] = set()


def _free_port() -> int:
    """A loopback TCP port that is free now (not handed out before by this process)."""
    for _ in range(100):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _PORTS_GIVEN:
            _PORTS_GIVEN.add(port)
            return port
    raise ControlPlaneError("no free loopback port")


def _http_get(url: str, context: ssl.SSLContext | None, timeout: float = 2.0) -> tuple[int, str]:
    handlers: list[urllib.request.BaseHandler] = [urllib.request.ProxyHandler({})]
    if context is not None:
        handlers.append(urllib.request.HTTPSHandler(context=context))
    opener = urllib.request.build_opener(*handlers)
    try:
        with opener.open(url, timeout=timeout) as resp:
            return resp.status, resp.read().decode(errors="replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")


def _wait_healthy(
    proc: _Process,
    url: str,
    context: ssl.SSLContext | None,
    timeout: float,
    ok: Callable[[int, str], bool] = lambda status, _body: status == 200,
) -> None:
    deadline = time.monotonic() + timeout
    last = "no answer"
    while time.monotonic() < deadline:
        if not proc.alive():
            raise ControlPlaneError(
                f"{proc.name} exited with code {proc.popen.returncode} while starting; "
                f"log {proc.log_path}:\n{_log_tail(proc.log_path)}"
            )
        try:
            status, body = _http_get(url, context)
            if ok(status, body):
                return
            last = f"HTTP {status}: {body[:500]}"
        except (OSError, ssl.SSLError) as e:
            last = repr(e)
        time.sleep(0.1)
    raise ControlPlaneError(
        f"{proc.name} not healthy at {url} after {timeout:.0f} s (last: {last}); "
        f"log {proc.log_path}:\n{_log_tail(proc.log_path)}"
    )


# --------------------------------------------------------------------------- certificates


@dataclass(frozen=True)
class _Certs:
    ca: Path  # CA of the apiserver's serving certificate
    serving_cert: Path
    serving_key: Path
    client_ca: Path
    admin_cert: Path
    admin_key: Path
    sa_public: Path
    sa_private: Path


def _make_certs(directory: Path) -> _Certs:
    import trustme
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    directory.mkdir(parents=True, exist_ok=True)
    serving_ca = trustme.CA(organization_name="stickypack test serving CA")
    serving = serving_ca.issue_cert(
        "127.0.0.1",
        "localhost",
        "kubernetes",
        "kubernetes.default",
        "kubernetes.default.svc",
        "kubernetes.default.svc.cluster.local",
        "10.0.0.1",
        common_name="kube-apiserver",
    )
    client_ca = trustme.CA(organization_name="stickypack test client CA")
    # The apiserver takes the user from the CN and the groups from O.
    admin = client_ca.issue_cert("admin", common_name="admin", organization_name="system:masters")
    certs = _Certs(
        ca=directory / "ca.crt",
        serving_cert=directory / "apiserver.crt",
        serving_key=directory / "apiserver.key",
        client_ca=directory / "client-ca.crt",
        admin_cert=directory / "admin.crt",
        admin_key=directory / "admin.key",
        sa_public=directory / "sa.pub",
        sa_private=directory / "sa.key",
    )
    serving_ca.cert_pem.write_to_path(str(certs.ca))
    for i, pem in enumerate(serving.cert_chain_pems):
        pem.write_to_path(str(certs.serving_cert), append=i > 0)
    serving.private_key_pem.write_to_path(str(certs.serving_key))
    client_ca.cert_pem.write_to_path(str(certs.client_ca))
    for i, pem in enumerate(admin.cert_chain_pems):
        pem.write_to_path(str(certs.admin_cert), append=i > 0)
    admin.private_key_pem.write_to_path(str(certs.admin_key))
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    certs.sa_private.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    certs.sa_public.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    for path in (certs.serving_key, certs.admin_key, certs.sa_private):
        path.chmod(0o600)
    return certs


def _kubeconfig(server: str, certs: _Certs) -> dict[str, Any]:
    def b64(path: Path) -> str:
        return base64.b64encode(path.read_bytes()).decode()

    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "stickypack",
                "cluster": {"server": server, "certificate-authority-data": b64(certs.ca)},
            }
        ],
        "users": [
            {
                "name": "admin",
                "user": {
                    "client-certificate-data": b64(certs.admin_cert),
                    "client-key-data": b64(certs.admin_key),
                },
            }
        ],
        "contexts": [{"name": "stickypack", "context": {"cluster": "stickypack", "user": "admin"}}],
        "current-context": "stickypack",
    }


# --------------------------------------------------------------------------- helpers


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _taint(spec: str | Mapping[str, str]) -> dict[str, str]:
    """``"key=value:Effect"``, ``"key:Effect"`` or a taint dict -> a taint dict."""
    if isinstance(spec, Mapping):
        return dict(spec)
    key_value, sep, effect = spec.rpartition(":")
    if not sep or not key_value:
        raise ValueError(f"taint {spec!r}: expected 'key=value:Effect' or 'key:Effect'")
    key, _, value = key_value.partition("=")
    taint = {"key": key, "effect": effect}
    if value:
        taint["value"] = value
    return taint


def pod_manifest(
    name: str,
    *,
    cpu: str | None = "100m",
    memory: str | None = "128Mi",
    scheduler_name: str = "default-scheduler",
    labels: Mapping[str, str] | None = None,
    tolerations: Sequence[Mapping[str, Any]] | None = None,
    node_selector: Mapping[str, str] | None = None,
    namespace: str = "default",
    image: str = "registry.k8s.io/pause:3.10",
) -> dict[str, Any]:
    """A bare Pod dict with one container requesting ``cpu`` and ``memory``.

    ``cpu``/``memory`` are quantities (``"500m"``, ``"2Gi"``); None leaves that request out.
    The image is never pulled (there is no kubelet). Edit the dict freely, then pass it to
    :meth:`ControlPlane.create_pod` as ``pod=``.
    """
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    spec: dict[str, Any] = {
        "schedulerName": scheduler_name,
        "terminationGracePeriodSeconds": 0,
        "containers": [{"name": "main", "image": image, "resources": {"requests": requests}}],
    }
    if tolerations:
        spec["tolerations"] = [dict(t) for t in tolerations]
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels or {})},
        "spec": spec,
    }


@dataclass
class SchedulerHandle:
    """A kube-scheduler process started by :meth:`ControlPlane.start_scheduler`."""

    name: str
    config: dict[str, Any]  # the KubeSchedulerConfiguration actually used
    config_path: Path
    log_path: Path
    port: int  # secure serving port on 127.0.0.1 (/healthz, /readyz, /metrics)
    _process: _Process = field(repr=False)

    @property
    def pid(self) -> int:
        return self._process.pid

    @property
    def alive(self) -> bool:
        return self._process.alive()

    @property
    def scheduler_names(self) -> list[str]:
        """The ``schedulerName`` of each profile this process serves."""
        return [p.get("schedulerName", "default-scheduler") for p in self.config["profiles"]]


async def _awaited(awaitable: Awaitable[T]) -> T:
    """``await awaitable`` as a coroutine (what ``run_coroutine_threadsafe`` takes)."""
    return await awaitable


class _LoopThread:
    """A private asyncio loop in a daemon thread, so sync code (and code already running
    inside another event loop, e.g. an async test) can drive kubernetes_asyncio."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(
            target=self.loop.run_forever, name="stickypack-controlplane-loop", daemon=True
        )
        self.thread.start()

    def run(self, coro: Awaitable[T], timeout: float | None) -> T:
        future = asyncio.run_coroutine_threadsafe(_awaited(coro), self.loop)
        try:
            return future.result(timeout)
        except TimeoutError:
            future.cancel()
            raise

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        if not self.thread.is_alive():
            self.loop.close()


# --------------------------------------------------------------------------- ControlPlane


class ControlPlane:
    """etcd + kube-apiserver on free loopback ports, plus any number of kube-schedulers.

    Args:
        bin_dir: directory with ``etcd``, ``kube-apiserver``, ``kube-scheduler``
            (default :func:`binaries_dir`).
        work_dir: where certificates, kubeconfig, etcd data, scheduler configs and logs
            go (default: a new temporary directory).
        keep: keep the work directory even after a clean stop.
        startup_timeout: seconds to wait for each process to become healthy.
        verbosity: klog ``--v`` level of kube-apiserver and kube-scheduler logs.
        apiserver_args: extra kube-apiserver flags (``"--flag=value"`` strings).

    Use as a context manager, or call :meth:`start` and :meth:`stop`. Logs:
    ``<work_dir>/etcd.log``, ``kube-apiserver.log``, ``scheduler-<name>.log``.
    """

    def __init__(
        self,
        bin_dir: str | os.PathLike[str] | None = None,
        *,
        work_dir: str | os.PathLike[str] | None = None,
        keep: bool = False,
        startup_timeout: float = 90.0,
        verbosity: int = 2,
        apiserver_args: Sequence[str] = (),
    ) -> None:
        self._bin_dir = Path(bin_dir) if bin_dir is not None else None
        self._requested_work_dir = Path(work_dir) if work_dir is not None else None
        self.keep = keep
        self.startup_timeout = startup_timeout
        self.verbosity = verbosity
        self.apiserver_args = tuple(apiserver_args)
        self.work_dir: Path | None = None
        self.kubeconfig: Path | None = None  # admin kubeconfig (group system:masters)
        self.server: str | None = None  # https://127.0.0.1:<port>
        self.etcd_url: str | None = None  # http://127.0.0.1:<port>
        self.failed = False  # set by stop(failed=True) or a failed start
        self._binaries: dict[str, Path] = {}
        self._certs: _Certs | None = None
        self._etcd: _Process | None = None
        self._apiserver: _Process | None = None
        self._schedulers: list[SchedulerHandle] = []
        self._all_processes: list[_Process] = []
        self._loop: _LoopThread | None = None
        self._api: ApiClient | None = None  # lives on self._loop
        self._scheduler_count = 0
        self._stopped = False

    # ------------------------------------------------------------------ lifecycle

    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        self.stop(failed=exc_type is not None)

    @property
    def running(self) -> bool:
        return self._apiserver is not None and self._apiserver.alive()

    def start(self) -> ControlPlane:
        """Start etcd and kube-apiserver, wait until /readyz answers ok and the ``default``
        namespace exists. Returns self. On failure everything started is stopped, the work
        directory is kept, and :class:`ControlPlaneError` names the log to read."""
        if self._apiserver is not None:
            raise ControlPlaneError("control plane already started")
        self._binaries = find_binaries(self._bin_dir)
        self._stopped = False
        _PLANES.add(self)
        if self._requested_work_dir is not None:
            self.work_dir = self._requested_work_dir
            self.work_dir.mkdir(parents=True, exist_ok=True)
        else:
            self.work_dir = Path(tempfile.mkdtemp(prefix="stickypack-controlplane-"))
        try:
            self._certs = _make_certs(self.work_dir / "pki")
            self._start_etcd()
            self._start_apiserver()
            self._start_client()
            self._wait_for_namespace("default")
        except BaseException as e:
            self.stop(failed=True)
            if isinstance(e, ControlPlaneError):
                raise ControlPlaneError(f"{e}\n(work dir kept: {self.work_dir})") from None
            raise
        return self

    def stop(self, *, failed: bool = False) -> None:
        """Stop every scheduler, kube-apiserver and etcd (SIGTERM, then SIGKILL after 10 s)
        and wait for them. The work directory is removed unless ``keep`` was set or the run
        failed (``failed=True`` or an earlier failure); then its path is printed to stderr.
        Safe to call twice."""
        _PLANES.discard(self)
        self.failed = self.failed or failed
        if self._stopped:
            return
        if self._loop is not None:
            if self._api is not None:
                with contextlib.suppress(Exception):
                    self._loop.run(self._api.close(), timeout=5)
                self._api = None
            self._loop.close()
            self._loop = None
        for handle in list(self._schedulers):
            self.stop_scheduler(handle)
        for proc in (self._apiserver, self._etcd):
            if proc is not None:
                _terminate(proc)
        self._apiserver = self._etcd = None
        self._stopped = True
        if self.work_dir is not None and self.work_dir.exists():
            if self.failed or self.keep:
                print(f"stickypack control plane: logs kept in {self.work_dir}", file=sys.stderr)
            elif self._requested_work_dir is None:
                shutil.rmtree(self.work_dir, ignore_errors=True)

    @property
    def pids(self) -> dict[str, int]:
        """``{process name: pid}`` of every process this control plane ever started
        (``etcd``, ``kube-apiserver``, ``scheduler-<name>``), running or not."""
        return {p.name: p.pid for p in self._all_processes}

    def _spawn(self, name: str, args: Sequence[str | Path]) -> _Process:
        assert self.work_dir is not None
        proc = _spawn(name, args, self.work_dir / f"{name}.log", cwd=self.work_dir)
        self._all_processes.append(proc)
        return proc

    def _start_etcd(self) -> None:
        assert self.work_dir is not None
        for attempt in range(3):  # a port taken between probing and binding: try new ports
            client, peer = _free_port(), _free_port()
            proc = self._spawn(
                "etcd",
                [
                    self._binaries["etcd"],
                    "--name=stickypack",
                    f"--data-dir={self.work_dir / 'etcd-data'}",
                    f"--listen-client-urls=http://127.0.0.1:{client}",
                    f"--advertise-client-urls=http://127.0.0.1:{client}",
                    f"--listen-peer-urls=http://127.0.0.1:{peer}",
                    f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
                    f"--initial-cluster=stickypack=http://127.0.0.1:{peer}",
                    "--unsafe-no-fsync",
                    "--log-level=warn",
                ],
            )
            try:
                _wait_healthy(
                    proc,
                    f"http://127.0.0.1:{client}/health",
                    None,
                    self.startup_timeout,
                    ok=lambda status, body: status == 200 and '"true"' in body,
                )
            except ControlPlaneError:
                _terminate(proc)
                if attempt == 2 or "address already in use" not in _log_tail(proc.log_path):
                    raise
                continue
            self._etcd = proc
            self.etcd_url = f"http://127.0.0.1:{client}"
            return

    def _start_apiserver(self) -> None:
        assert self.work_dir is not None and self._certs is not None
        certs = self._certs
        context = ssl.create_default_context(cafile=str(certs.ca))
        context.load_cert_chain(str(certs.admin_cert), str(certs.admin_key))
        for attempt in range(3):
            port = _free_port()
            proc = self._spawn(
                "kube-apiserver",
                [
                    self._binaries["kube-apiserver"],
                    f"--etcd-servers={self.etcd_url}",
                    "--bind-address=127.0.0.1",
                    "--advertise-address=127.0.0.1",
                    f"--secure-port={port}",
                    f"--cert-dir={self.work_dir / 'apiserver-certs'}",
                    f"--tls-cert-file={certs.serving_cert}",
                    f"--tls-private-key-file={certs.serving_key}",
                    f"--client-ca-file={certs.client_ca}",
                    f"--service-cluster-ip-range={_SERVICE_CIDR}",
                    "--authorization-mode=RBAC",
                    "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                    f"--service-account-key-file={certs.sa_public}",
                    f"--service-account-signing-key-file={certs.sa_private}",
                    # No controller-manager runs: without these two every pod would need a
                    # ServiceAccount token and every Node would keep the not-ready taint.
                    "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
                    # The endpoint reconciler refuses a loopback advertise address.
                    "--endpoint-reconciler-type=none",
                    # Pod templates are watched from etcd itself, not the watch cache, so a
                    # test can compact etcd and meet a real 410 Gone (tests/test_kube_live.py).
                    "--watch-cache-sizes=podtemplates#0",
                    "--allow-privileged=true",
                    "--profiling=false",
                    f"--v={self.verbosity}",
                    *self.apiserver_args,
                ],
            )
            try:
                _wait_healthy(proc, f"https://127.0.0.1:{port}/readyz", context, self.startup_timeout)
            except ControlPlaneError:
                _terminate(proc)
                if attempt == 2 or "address already in use" not in _log_tail(proc.log_path):
                    raise
                continue
            self._apiserver = proc
            self.server = f"https://127.0.0.1:{port}"
            self.kubeconfig = self.work_dir / "admin.kubeconfig"
            self.kubeconfig.write_text(yaml.safe_dump(_kubeconfig(self.server, certs)))
            self.kubeconfig.chmod(0o600)
            return

    # ------------------------------------------------------------------ API access

    def client_configuration(self) -> Configuration:
        """A fresh ``kubernetes_asyncio.client.Configuration`` for the admin user, for code
        that wants its own async client (``ApiClient(configuration=cp.client_configuration())``)."""
        from kubernetes_asyncio import client

        if self.server is None or self._certs is None:
            raise ControlPlaneError("control plane not started")
        cfg = client.Configuration(host=self.server)
        cfg.ssl_ca_cert = str(self._certs.ca)
        cfg.cert_file = str(self._certs.admin_cert)
        cfg.key_file = str(self._certs.admin_key)
        cfg.verify_ssl = True
        return cfg

    def _start_client(self) -> None:
        from kubernetes_asyncio import client

        cfg = self.client_configuration()
        self._loop = _LoopThread()

        async def make() -> ApiClient:
            return client.ApiClient(configuration=cfg)

        self._api = self._loop.run(make(), timeout=30)

    def call(self, fn: Callable[[ApiClient], Awaitable[T]], timeout: float | None = 60.0) -> T:
        """Run ``await fn(api_client)`` on the harness's private event loop and return its
        result; ``api_client`` is a ``kubernetes_asyncio.client.ApiClient`` for the admin
        user. Example: ``cp.call(lambda api: CoreV1Api(api).list_namespace())``.
        ``timeout`` in seconds (None: no limit)."""
        if self._loop is None or self._api is None:
            raise ControlPlaneError("control plane not started")
        api = self._api
        return self._loop.run(fn(api), timeout)

    def _core(self, fn: Callable[[Any], Awaitable[T]], timeout: float | None = 60.0) -> T:
        """``await fn(core)`` as :meth:`call`, ``core`` a ``CoreV1Api`` (given as Any: bodies
        go in as dicts, which its stubs refuse)."""
        from kubernetes_asyncio import client

        return self.call(lambda api: fn(client.CoreV1Api(api)), timeout)

    def _to_dict(self, obj: object) -> Any:
        """A model (or a list of them) in the API's JSON shape."""
        if self._api is None:
            raise ControlPlaneError("control plane not started")
        return self._api.sanitize_for_serialization(obj)

    def _wait_for_namespace(self, name: str) -> None:
        from kubernetes_asyncio.client.exceptions import ApiException

        deadline = time.monotonic() + self.startup_timeout
        while True:
            try:
                self._core(lambda core: core.read_namespace(name))
                return
            except ApiException as e:
                if e.status != 404 or time.monotonic() > deadline:
                    raise ControlPlaneError(f"namespace {name!r} not available: {e}") from e
            time.sleep(0.1)

    def grant_cluster_rules(
        self, name: str, rules: Sequence[Mapping[str, Any]], namespace: str = "default"
    ) -> None:
        """Create the ServiceAccount ``namespace/name`` and give it exactly ``rules`` (RBAC
        PolicyRule dicts: ``apiGroups``, ``resources``, ``verbs``), cluster-wide: a
        ClusterRole and a ClusterRoleBinding both named ``name``. Its kubeconfig:
        :meth:`service_account_kubeconfig`; undo with :meth:`revoke_cluster_rules`."""
        from kubernetes_asyncio import client

        async def grant(api: Any) -> None:
            # dict bodies: the generated client serializes them as it would its own models
            core: Any = client.CoreV1Api(api)
            rbac: Any = client.RbacAuthorizationV1Api(api)
            await core.create_namespaced_service_account(namespace, {"metadata": {"name": name}})
            await rbac.create_cluster_role({"metadata": {"name": name}, "rules": [dict(r) for r in rules]})
            binding = {
                "metadata": {"name": name},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
                "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
            }
            await rbac.create_cluster_role_binding(binding)

        self.call(grant)

    def set_cluster_rules(self, name: str, rules: Sequence[Mapping[str, Any]]) -> None:
        """Give what :meth:`grant_cluster_rules` created exactly ``rules`` from now on (its
        ClusterRole replaced; the account, its tokens and binding kept)."""
        from kubernetes_asyncio import client

        async def replace(api: Any) -> None:
            rbac: Any = client.RbacAuthorizationV1Api(api)
            role = await rbac.read_cluster_role(name)
            role.rules = [dict(r) for r in rules]
            await rbac.replace_cluster_role(name, role)

        self.call(replace)

    def revoke_cluster_rules(self, name: str, namespace: str = "default") -> None:
        """Delete what :meth:`grant_cluster_rules` created."""
        from kubernetes_asyncio import client

        async def revoke(api: Any) -> None:
            rbac = client.RbacAuthorizationV1Api(api)
            await rbac.delete_cluster_role_binding(name)
            await rbac.delete_cluster_role(name)
            await client.CoreV1Api(api).delete_namespaced_service_account(name, namespace)

        self.call(revoke)

    def service_account_kubeconfig(
        self, name: str, namespace: str = "default", *, expiration_seconds: int = 3600
    ) -> Path:
        """Mint a token for the ServiceAccount ``namespace/name`` (TokenRequest API, valid
        ``expiration_seconds``, at least 600) and write a kubeconfig that authenticates with
        it to ``<work_dir>/sa-<namespace>-<name>.kubeconfig``; returns that path. Whatever
        uses it has exactly the ServiceAccount's RBAC rights, as a pod running as it would.

        Raises:
            kubernetes_asyncio.client.exceptions.ApiException: 404 when there is no such
                ServiceAccount.
        """
        if self.server is None or self._certs is None or self.work_dir is None:
            raise ControlPlaneError("control plane not started")
        body = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": expiration_seconds},
        }
        review = self._core(lambda core: core.create_namespaced_service_account_token(name, namespace, body))
        user = f"system:serviceaccount:{namespace}:{name}"
        config = _kubeconfig(self.server, self._certs)
        config["users"] = [{"name": user, "user": {"token": review.status.token}}]
        config["contexts"] = [{"name": "stickypack", "context": {"cluster": "stickypack", "user": user}}]
        path = self.work_dir / f"sa-{namespace}-{name}.kubeconfig"
        path.write_text(yaml.safe_dump(config))
        path.chmod(0o600)
        return path

    # ------------------------------------------------------------------ schedulers

    def start_scheduler(
        self,
        config: Mapping[str, Any] | str | os.PathLike[str] | None = None,
        name: str | None = None,
        *,
        timeout: float | None = None,
        args: Sequence[str] = (),
        leader_elect: bool = False,
        kubeconfig: str | os.PathLike[str] | None = None,
    ) -> SchedulerHandle:
        """Start a kube-scheduler with a ``KubeSchedulerConfiguration`` and wait until its
        /readyz answers ok.

        Args:
            config: the configuration as a dict, YAML text, or a path to a YAML file;
                None means kube-scheduler's defaults (profile ``default-scheduler``).
                ``apiVersion``/``kind`` default to ``kubescheduler.config.k8s.io/v1``.
                The harness always sets ``clientConnection.kubeconfig`` (this control
                plane's admin kubeconfig) and ``leaderElection.leaderElect`` (to
                ``leader_elect``; the config's lock name and namespace are kept), and
                raises ``clientConnection.qps``/``burst`` to 5000 unless given.
            name: label for the log (``scheduler-<name>.log``); default: the profiles'
                scheduler names. Made unique.
            timeout: seconds to wait for readiness (default ``startup_timeout``).
            args: extra kube-scheduler flags.
            leader_elect: run leader election (readiness is then waited for as usual;
                a scheduler that does not hold its lock does not schedule).
            kubeconfig: connect as this kubeconfig's user instead of the admin (e.g. a
                ServiceAccount's, :meth:`service_account_kubeconfig`), and delegate
                authentication and authorization with it too, as a scheduler running
                in-cluster does with its ServiceAccount (it then reads
                ``kube-system/extension-apiserver-authentication``).

        Several schedulers may run at once (each on its own secure port).
        """
        if not self.running or self.work_dir is None or self.kubeconfig is None:
            raise ControlPlaneError("control plane not running")
        cfg = _load_scheduler_config(config)
        connection = cfg.setdefault("clientConnection", {})
        connection["kubeconfig"] = str(kubeconfig if kubeconfig is not None else self.kubeconfig)
        if kubeconfig is not None:
            delegation = [
                f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}",
            ]
            args = [*delegation, *args]
        connection.setdefault("qps", 5000)
        connection.setdefault("burst", 5000)
        election = dict(cfg.get("leaderElection") or {})
        election["leaderElect"] = leader_elect
        cfg["leaderElection"] = election
        profiles = cfg.setdefault("profiles", [{"schedulerName": "default-scheduler"}])
        self._scheduler_count += 1
        base = name or "+".join(p.get("schedulerName", "default-scheduler") for p in profiles)
        base = "".join(c if c.isalnum() or c in "-_.+" else "_" for c in base) or "scheduler"
        taken = {p.name for p in self._all_processes}
        label = base if f"scheduler-{base}" not in taken else f"{base}-{self._scheduler_count}"
        directory = self.work_dir / f"scheduler-{label}"
        directory.mkdir(parents=True, exist_ok=True)
        config_path = directory / "config.yaml"
        config_path.write_text(yaml.safe_dump(cfg, sort_keys=False))
        for attempt in range(3):
            port = _free_port()
            proc = self._spawn(
                f"scheduler-{label}",
                [
                    self._binaries["kube-scheduler"],
                    f"--config={config_path}",
                    f"--secure-port={port}",
                    "--bind-address=127.0.0.1",
                    f"--cert-dir={directory / 'certs'}",
                    # /metrics without credentials, on loopback (scheduler_cache_sizes)
                    "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
                    f"--v={self.verbosity}",
                    *args,
                ],
            )
            try:
                _wait_healthy(
                    proc,
                    f"https://127.0.0.1:{port}/readyz",
                    ssl._create_unverified_context(),  # its own self-signed serving cert
                    timeout if timeout is not None else self.startup_timeout,
                )
            except ControlPlaneError as e:
                _terminate(proc)
                if attempt == 2 or "address already in use" not in _log_tail(proc.log_path):
                    self.failed = True
                    raise ControlPlaneError(f"{e}\n(work dir kept: {self.work_dir})") from None
                continue
            handle = SchedulerHandle(label, cfg, config_path, proc.log_path, port, proc)
            self._schedulers.append(handle)
            return handle
        raise AssertionError("unreachable")

    def stop_scheduler(self, handle: SchedulerHandle) -> None:
        """Stop one scheduler (SIGTERM, then SIGKILL after 10 s) and wait for it."""
        _terminate(handle._process)
        if handle in self._schedulers:
            self._schedulers.remove(handle)

    def stop_schedulers(self) -> None:
        """Stop every scheduler started by :meth:`start_scheduler`."""
        for handle in list(self._schedulers):
            self.stop_scheduler(handle)

    def scheduler_cache_sizes(self, handle: SchedulerHandle) -> dict[str, int]:
        """The scheduler's ``scheduler_cache_size`` gauge by type (``nodes``, ``pods``,
        ``assumed_pods``): what its cache holds, refreshed by kube-scheduler about once a
        second. Empty when /metrics cannot be read."""
        from prometheus_client.parser import text_string_to_metric_families

        try:
            status, body = _http_get(
                f"https://127.0.0.1:{handle.port}/metrics", ssl._create_unverified_context()
            )
        except (OSError, ssl.SSLError):
            return {}
        if status != 200:
            return {}
        return {
            sample.labels["type"]: int(sample.value)
            for family in text_string_to_metric_families(body)
            if family.name == "scheduler_cache_size"
            for sample in family.samples
        }

    @property
    def schedulers(self) -> list[SchedulerHandle]:
        """Schedulers currently running (started and not stopped)."""
        return list(self._schedulers)

    # ------------------------------------------------------------------ nodes

    def create_node(
        self,
        name: str,
        cpu: str = "4",
        memory: str = "16Gi",
        pods: int = 110,
        labels: Mapping[str, str] | None = None,
        taints: Sequence[str | Mapping[str, str]] | None = None,
        ready: bool = True,
        *,
        ephemeral_storage: str = "100Gi",
        images: Sequence[Mapping[str, Any]] | None = None,
        extended: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """Create a Node and fill its status through the status subresource.

        Capacity and allocatable are both ``cpu`` (cores, a quantity), ``memory`` (bytes, a
        quantity), ``pods`` (count) and ``ephemeral_storage``, plus ``extended`` resources
        (name to quantity, such as ``{"nvidia.com/gpu": "4"}``). Labels get
        ``kubernetes.io/hostname``, ``kubernetes.io/os`` and ``kubernetes.io/arch`` defaults.
        ``taints``: ``"key=value:Effect"``, ``"key:Effect"`` or taint dicts. ``ready=False``
        sets the Ready condition to False and adds the ``node.kubernetes.io/not-ready:
        NoSchedule`` taint that the (absent) node lifecycle controller would add.
        ``images``: ``status.images`` as a kubelet lists them, entries ``{"names": [...],
        "sizeBytes": n}`` (kube-scheduler's ImageLocality reads them); none when None.
        Returns the Node as a dict (JSON field names).
        """
        node_labels = {
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            **(labels or {}),
        }
        node_taints = [_taint(t) for t in taints or ()]
        if not ready:
            node_taints.append({"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"})
        body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": node_labels},
            "spec": {"taints": node_taints} if node_taints else {},
        }
        resources = {
            "cpu": str(cpu),
            "memory": str(memory),
            "pods": str(pods),
            "ephemeral-storage": str(ephemeral_storage),
            **(extended or {}),
        }
        now = _now()
        status = {
            "capacity": resources,
            "allocatable": resources,
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True" if ready else "False",
                    "reason": "KubeletReady" if ready else "KubeletNotReady",
                    "message": "fake node of the stickypack test control plane",
                    "lastHeartbeatTime": now,
                    "lastTransitionTime": now,
                }
            ],
            "addresses": [{"type": "Hostname", "address": name}],
        }
        if images:
            status["images"] = [{"names": list(i["names"]), "sizeBytes": int(i["sizeBytes"])} for i in images]

        async def create(core: Any) -> Any:
            created = self._to_dict(await core.create_node(body))
            created["status"] = status
            return await core.replace_node_status(name, created)

        return self._to_dict(self._core(create))

    def nodes(self) -> list[dict[str, Any]]:
        """All Nodes, as dicts."""
        return self._to_dict(self._core(lambda core: core.list_node()))["items"]

    def delete_all_nodes(self, timeout: float = 60.0) -> None:
        """Delete every Node (grace period 0) and wait until none is left."""

        async def delete(core: Any) -> None:
            await core.delete_collection_node(grace_period_seconds=0)
            await _until(lambda: core.list_node(), lambda r: not r.items, timeout, "nodes")

        self._core(delete, timeout=timeout + 10)

    # ------------------------------------------------------------------ pods

    def create_pod(
        self,
        name: str | None = None,
        *,
        pod: Mapping[str, Any] | None = None,
        namespace: str | None = None,
        **options: Any,
    ) -> dict[str, Any]:
        """Create one Pod and return it as a dict.

        Either ``name`` plus the keyword options of :func:`pod_manifest` (``cpu``,
        ``memory``, ``scheduler_name``, ``labels``, ``tolerations``, ``node_selector``), or
        ``pod``: a complete Pod dict, sent as is. ``namespace`` defaults to the pod's own,
        else ``"default"``.
        """
        if (pod is None) == (name is None):
            raise TypeError("give either name (and pod_manifest options) or pod")
        if pod is None:
            assert name is not None
            body = pod_manifest(name, namespace=namespace or "default", **options)
        elif options:
            raise TypeError(f"options {sorted(options)} cannot be combined with pod=")
        else:
            body = copy.deepcopy(dict(pod))
        return self.create_pods([body], namespace=namespace)[0]

    def dry_run_pod(self, pod: Mapping[str, Any], namespace: str = "default") -> dict[str, Any]:
        """``pod`` as the API server would store it, admission (policies, webhooks) and
        defaults applied (``dryRun=All``: nothing is stored)."""
        body = copy.deepcopy(dict(pod))

        async def create(core: Any) -> Any:
            return await core.create_namespaced_pod(namespace, body, dry_run="All")

        return self._to_dict(self._core(create))

    @contextlib.contextmanager
    def admission_policies(self, docs: Sequence[Mapping[str, Any]], wait: bool = True) -> Iterator[None]:
        """Create the ``MutatingAdmissionPolicy`` and ``MutatingAdmissionPolicyBinding``
        documents ``docs`` (``admissionregistration.k8s.io/v1``), wait (unless not
        ``wait``) until the API server applies each binding (a dry-run pod with its
        ``objectSelector``'s labels, in ``default``, leaves ``default-scheduler``: the API
        server picks a new policy up within a second or so), and delete them on leaving."""
        from kubernetes_asyncio import client

        plural = {
            "MutatingAdmissionPolicy": "mutatingadmissionpolicies",
            "MutatingAdmissionPolicyBinding": "mutatingadmissionpolicybindings",
        }

        async def apply(api: Any, delete: bool = False) -> None:
            custom = client.CustomObjectsApi(api)
            for doc in docs:
                args = ("admissionregistration.k8s.io", "v1", plural[doc["kind"]])
                if delete:
                    await custom.delete_cluster_custom_object(*args, doc["metadata"]["name"])
                else:
                    await custom.create_cluster_custom_object(*args, dict(doc))

        self.call(apply)
        try:
            for binding in (d for d in docs if wait and d["kind"] == "MutatingAdmissionPolicyBinding"):
                labels = binding["spec"]["matchResources"]["objectSelector"]["matchLabels"]
                deadline = time.monotonic() + 20
                for n in itertools.count():
                    probe = self.dry_run_pod(pod_manifest(f"probe-{n}", labels=labels))
                    if probe["spec"]["schedulerName"] != "default-scheduler":
                        break
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"{binding['metadata']['name']} never applied")
                    time.sleep(0.1)
            yield
        finally:
            self.call(lambda api: apply(api, delete=True))

    def create_pods(
        self, pods: Iterable[Mapping[str, Any]], *, namespace: str | None = None
    ) -> list[dict[str, Any]]:
        """Create several Pods (dicts, e.g. from :func:`pod_manifest`) concurrently; returns
        them as dicts, in order."""
        bodies = [copy.deepcopy(dict(p)) for p in pods]

        async def create(core: Any) -> list[Any]:
            return await asyncio.gather(
                *(
                    core.create_namespaced_pod(
                        namespace or b.get("metadata", {}).get("namespace") or "default", b
                    )
                    for b in bodies
                )
            )

        return [self._to_dict(p) for p in self._core(create)]

    def pods(self, namespace: str | None = None) -> list[dict[str, Any]]:
        """Pods of ``namespace`` (all namespaces when None), as dicts."""
        if namespace is None:
            result = self._core(lambda core: core.list_pod_for_all_namespaces())
        else:
            result = self._core(lambda core: core.list_namespaced_pod(namespace))
        return self._to_dict(result)["items"]

    def placements(self, namespace: str = "default") -> dict[str, str | None]:
        """``{pod name: node name, or None while unbound}`` for the pods of ``namespace``."""
        return {p["metadata"]["name"]: p.get("spec", {}).get("nodeName") for p in self.pods(namespace)}

    def wait_bound(
        self, names: Iterable[str] | str, timeout: float = 60.0, namespace: str = "default"
    ) -> dict[str, str]:
        """Wait until every named pod has a ``spec.nodeName``; returns ``{pod: node}``.

        Raises:
            ControlPlaneError: after ``timeout`` seconds, listing the pods still unbound and
                their PodScheduled condition messages.
        """
        wanted = [names] if isinstance(names, str) else list(names)
        deadline = time.monotonic() + timeout
        while True:
            pods = {p["metadata"]["name"]: p for p in self.pods(namespace)}
            bound = {
                n: pods[n]["spec"]["nodeName"]
                for n in wanted
                if n in pods and pods[n].get("spec", {}).get("nodeName")
            }
            if len(bound) == len(wanted):
                return bound
            if time.monotonic() > deadline:
                unbound = {n: _scheduled_message(pods.get(n)) for n in wanted if n not in bound}
                raise ControlPlaneError(
                    f"{len(unbound)} of {len(wanted)} pods not bound after {timeout} s: "
                    f"{unbound}; scheduler logs: "
                    f"{[str(h.log_path) for h in self._schedulers]}"
                )
            time.sleep(0.1)

    def wait_unschedulable(
        self, names: Iterable[str] | str, timeout: float = 60.0, namespace: str = "default"
    ) -> dict[str, str]:
        """Wait until every named pod is unbound with condition PodScheduled=False, reason
        Unschedulable; returns ``{pod: condition message}``.

        Raises:
            ControlPlaneError: after ``timeout`` seconds, or when one of them gets bound.
        """
        wanted = [names] if isinstance(names, str) else list(names)
        deadline = time.monotonic() + timeout
        while True:
            pods = {p["metadata"]["name"]: p for p in self.pods(namespace)}
            done: dict[str, str] = {}
            for n in wanted:
                pod = pods.get(n)
                if pod is None:
                    continue
                if pod.get("spec", {}).get("nodeName"):
                    raise ControlPlaneError(
                        f"pod {n} was bound to {pod['spec']['nodeName']}, expected unschedulable"
                    )
                cond = _condition(pod, "PodScheduled")
                if cond and cond.get("status") == "False" and cond.get("reason") == "Unschedulable":
                    done[n] = cond.get("message", "")
            if len(done) == len(wanted):
                return done
            if time.monotonic() > deadline:
                raise ControlPlaneError(
                    f"pods not marked Unschedulable after {timeout} s: {sorted(set(wanted) - set(done))}"
                )
            time.sleep(0.1)

    def delete_all_pods(self, timeout: float = 60.0) -> None:
        """Delete every Pod of every namespace (grace period 0) and wait until none is left."""

        async def delete(core: Any) -> None:
            pods = await core.list_pod_for_all_namespaces()
            namespaces = {p.metadata.namespace for p in pods.items}
            await asyncio.gather(
                *(core.delete_collection_namespaced_pod(ns, grace_period_seconds=0) for ns in namespaces)
            )
            await _until(lambda: core.list_pod_for_all_namespaces(), lambda r: not r.items, timeout, "pods")

        self._core(delete, timeout=timeout + 10)

    # ------------------------------------------------------------------ volumes

    def create_bound_claim(
        self,
        name: str,
        *,
        namespace: str = "default",
        node_selector_terms: Sequence[Mapping[str, Any]] | None = None,
        labels: Mapping[str, str] | None = None,
        storage: str = "1Gi",
    ) -> None:
        """A ``hostPath`` PersistentVolume ``name`` and a PersistentVolumeClaim ``name`` in
        ``namespace`` bound to each other as the PV controller (which does not run here)
        binds them: the volume's ``claimRef`` and the claim's ``volumeName``, both ``Bound``
        (status subresource), the claim annotated ``pv.kubernetes.io/bind-completed`` (what
        kube-scheduler's VolumeBinding takes for a bound claim). ``node_selector_terms``:
        the volume's ``spec.nodeAffinity.required`` terms (none when None); ``labels``: the
        volume's labels (zone and region labels are VolumeZone's)."""
        volume: dict[str, Any] = {
            "metadata": {"name": name, "labels": dict(labels or {})},
            "spec": {
                "capacity": {"storage": storage},
                "accessModes": ["ReadWriteOnce"],
                "persistentVolumeReclaimPolicy": "Retain",
                "storageClassName": "",
                "hostPath": {"path": f"/tmp/stickypack-{name}"},
                "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "name": name,
                             "namespace": namespace},
            },
        }  # fmt: skip
        if node_selector_terms is not None:
            volume["spec"]["nodeAffinity"] = {"required": {"nodeSelectorTerms": list(node_selector_terms)}}
        claim = {
            "metadata": {"name": name, "annotations": {"pv.kubernetes.io/bind-completed": "yes"}},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": storage}},
                "storageClassName": "",
                "volumeName": name,
            },
        }

        async def create(core: Any) -> None:
            await core.create_persistent_volume(volume)
            await core.create_namespaced_persistent_volume_claim(namespace, claim)
            await core.patch_persistent_volume_status(name, {"status": {"phase": "Bound"}})
            bound = {"phase": "Bound", "accessModes": ["ReadWriteOnce"], "capacity": {"storage": storage}}
            status = {"status": bound}
            await core.patch_namespaced_persistent_volume_claim_status(name, namespace, status)

        self._core(create)

    def delete_all_volumes(self, timeout: float = 60.0) -> None:
        """Delete every PersistentVolumeClaim and PersistentVolume, their protection
        finalizers taken off first (the controller that would take them off does not run)."""

        async def delete(core: Any) -> None:
            unprotected = {"metadata": {"finalizers": None}}
            for claim in (await core.list_persistent_volume_claim_for_all_namespaces()).items:
                meta = claim.metadata
                await core.patch_namespaced_persistent_volume_claim(meta.name, meta.namespace, unprotected)
                await core.delete_namespaced_persistent_volume_claim(meta.name, meta.namespace)
            for volume in (await core.list_persistent_volume()).items:
                await core.patch_persistent_volume(volume.metadata.name, unprotected)
                await core.delete_persistent_volume(volume.metadata.name)
            list_claims = core.list_persistent_volume_claim_for_all_namespaces
            await _until(lambda: list_claims(), lambda r: not r.items, timeout, "claims")
            await _until(lambda: core.list_persistent_volume(), lambda r: not r.items, timeout, "volumes")

        self._core(delete, timeout=timeout + 10)

    # ---- DRA (resource.k8s.io/v1) ---------------------------------------------------------------

    def create_device_pool(self, node: str, devices: int, *, driver: str = "gpu.example.com") -> None:
        """A DeviceClass named ``driver`` (unless there is one) and a node-local ResourceSlice
        named ``node`` publishing ``devices`` devices (``dev-0``...) in pool ``node`` of
        ``driver``, as a DRA driver's kubelet plugin would."""
        from kubernetes_asyncio import client
        from kubernetes_asyncio.client.exceptions import ApiException

        async def create(api: Any) -> None:
            resource: Any = client.ResourceV1Api(api)  # bodies as dicts
            try:
                await resource.create_device_class({"metadata": {"name": driver}, "spec": {}})
            except ApiException as exc:
                if exc.status != 409:
                    raise
            pool = {"name": node, "generation": 1, "resourceSliceCount": 1}
            published = [{"name": f"dev-{k}"} for k in range(devices)]
            spec = {"driver": driver, "nodeName": node, "pool": pool, "devices": published}
            await resource.create_resource_slice({"metadata": {"name": node}, "spec": spec})

        self.call(create)

    def create_claim(
        self,
        name: str,
        count: int,
        *,
        driver: str = "gpu.example.com",
        namespace: str = "default",
    ) -> None:
        """A ResourceClaim named ``name`` for ``count`` devices of the DeviceClass ``driver``
        (:meth:`create_device_pool`), not allocated (:meth:`allocate_claim`)."""
        from kubernetes_asyncio import client

        request = {"name": "devices", "exactly": {"deviceClassName": driver, "count": count}}
        body = {"metadata": {"name": name}, "spec": {"devices": {"requests": [request]}}}
        resource: Callable[[Any], Any] = client.ResourceV1Api  # bodies as dicts
        self.call(lambda api: resource(api).create_namespaced_resource_claim(namespace, body))

    def allocate_claim(
        self,
        name: str,
        node: str | None,
        devices: Iterable[str] = (),
        *,
        driver: str = "gpu.example.com",
        namespace: str = "default",
    ) -> None:
        """Write claim ``name``'s allocation through the status subresource, as kube-scheduler's
        DRA plugin would: ``devices`` of pool ``node`` of ``driver``; ``node`` None takes
        the allocation away (the claim deallocated)."""
        from kubernetes_asyncio import client

        allocation = None
        if node is not None:
            results = [{"request": "devices", "driver": driver, "pool": node, "device": d} for d in devices]
            allocation = {"devices": {"results": results}}
        status = {"status": {"allocation": allocation}}
        self.call(
            lambda api: client.ResourceV1Api(api).patch_namespaced_resource_claim_status(
                name, namespace, status
            )
        )

    def create_device_taint_rule(
        self,
        name: str,
        taint: Mapping[str, Any],
        driver: str | None = None,
        pool: str | None = None,
        device: str | None = None,
    ) -> None:
        """A ``resource.k8s.io/v1`` DeviceTaintRule ``name`` putting ``taint`` (``key``,
        ``value``, ``effect``) on the devices of ``driver``, ``pool`` and ``device`` (None:
        any); kubernetes_asyncio has no v1 client method for the kind."""
        selector = {k: v for k, v in (("driver", driver), ("pool", pool), ("device", device)) if v}
        body = {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceTaintRule",
            "metadata": {"name": name},
            "spec": {"deviceSelector": selector, "taint": dict(taint)},
        }
        self.call(
            lambda api: api.call_api(
                "/apis/resource.k8s.io/v1/devicetaintrules",
                "POST",
                body=body,
                header_params={"Content-Type": "application/json", "Accept": "application/json"},
                auth_settings=["BearerToken"],
            )
        )

    def delete_all_dra(self) -> None:
        """Delete every ResourceClaim, ResourceSlice, DeviceClass and DeviceTaintRule
        (nothing where ``resource.k8s.io/v1`` is not served)."""
        from kubernetes_asyncio import client
        from kubernetes_asyncio.client.exceptions import ApiException

        async def delete(api: Any) -> None:
            resource = client.ResourceV1Api(api)
            try:
                claims = (await resource.list_resource_claim_for_all_namespaces()).items
            except ApiException as exc:
                if exc.status == 404:
                    return
                raise
            for claim in claims:
                await resource.delete_namespaced_resource_claim(claim.metadata.name, claim.metadata.namespace)
            await resource.delete_collection_resource_slice()
            await resource.delete_collection_device_class()
            try:
                await api.call_api(
                    "/apis/resource.k8s.io/v1/devicetaintrules",
                    "DELETE",
                    header_params={"Accept": "application/json"},
                    auth_settings=["BearerToken"],
                )
            except ApiException as exc:
                if exc.status != 404:
                    raise

        self.call(delete)

    def reset(self) -> None:
        """A clean slate: stop all schedulers, delete all pods, then all claims and volumes,
        then all nodes."""
        self.stop_schedulers()
        self.delete_all_pods()
        self.delete_all_volumes()
        self.delete_all_nodes()


def _condition(pod: Mapping[str, Any] | None, kind: str) -> dict[str, Any] | None:
    for cond in (pod or {}).get("status", {}).get("conditions") or []:
        if cond.get("type") == kind:
            return cond
    return None


def _scheduled_message(pod: Mapping[str, Any] | None) -> str:
    if pod is None:
        return "no such pod"
    cond = _condition(pod, "PodScheduled")
    if cond is None:
        return "not yet seen by a scheduler (check its schedulerName)"
    return f"{cond.get('reason')}: {cond.get('message')}"


async def _until(
    get: Callable[[], Awaitable[Any]], done: Callable[[Any], bool], timeout: float, what: str
) -> None:
    deadline = time.monotonic() + timeout
    while True:
        result = await get()
        if done(result):
            return
        if time.monotonic() > deadline:
            raise ControlPlaneError(f"{what} still present after {timeout} s")
        await asyncio.sleep(0.1)


def _load_scheduler_config(config: Mapping[str, Any] | str | os.PathLike[str] | None) -> dict[str, Any]:
    if config is None:
        cfg: dict[str, Any] = {}
    elif isinstance(config, Mapping):
        cfg = copy.deepcopy(dict(config))
    elif isinstance(config, os.PathLike):
        cfg = yaml.safe_load(Path(config).read_text()) or {}
    else:
        cfg = yaml.safe_load(config) or {}
    if not isinstance(cfg, dict):
        raise ValueError("a KubeSchedulerConfiguration must be a mapping")
    cfg.setdefault("apiVersion", "kubescheduler.config.k8s.io/v1")
    cfg.setdefault("kind", "KubeSchedulerConfiguration")
    return cfg
