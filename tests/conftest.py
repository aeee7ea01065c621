"""Shared fixtures.

Control plane (tests marked ``@pytest.mark.controlplane``):

``controlplane``
    session-scoped :class:`stickypack.testing.ControlPlane` (etcd + kube-apiserver), started
    once per session on first use. If the binaries are missing the test fails when
    ``CI=true`` and is skipped otherwise (build them with ``make k8s``).
``cluster``
    function-scoped: the same control plane after ``reset()`` (no pods, no nodes, no
    schedulers); reset again after the test.

When a control-plane test fails, its report names the directory with the etcd,
kube-apiserver and kube-scheduler logs, and that directory is kept after the session.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

import pytest

from stickypack.testing import BinariesNotFoundError, ControlPlane, find_binaries


def missing(what: str, fix: str = "run `make k8s` first") -> NoReturn:
    """A test's dependency is missing (by default one that ``make k8s`` builds): a failure
    on CI (``CI=true``), where it must be there, a skip elsewhere, saying ``fix``."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true and {what}", pytrace=False)
    pytest.skip(f"{what} (skipped outside CI; {fix})")


def needs_binaries(*names: str) -> dict[str, Path]:
    """The paths of the named binaries of the control plane's directory
    (:func:`~stickypack.testing.find_binaries`; all of them without names), or
    :func:`missing`."""
    try:
        return find_binaries(names=names) if names else find_binaries()
    except BinariesNotFoundError as e:
        missing(str(e))


_RUNNING: list[ControlPlane] = []


@pytest.fixture(scope="session")
def controlplane(request: pytest.FixtureRequest) -> Iterator[ControlPlane]:
    """The session's control plane (etcd + kube-apiserver, no scheduler)."""
    needs_binaries()
    cp = ControlPlane()
    cp.start()
    _RUNNING.append(cp)
    try:
        yield cp
    finally:
        _RUNNING.remove(cp)
        cp.stop(failed=cp.failed or request.session.testsfailed > 0)


@pytest.fixture
def cluster(controlplane: ControlPlane) -> Iterator[ControlPlane]:
    """The session control plane with a clean slate: no pods, nodes or schedulers."""
    controlplane.reset()
    yield controlplane
    controlplane.reset()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    outcome = yield
    report = outcome.get_result()
    if report.failed and _RUNNING and item.get_closest_marker("controlplane"):
        for cp in _RUNNING:
            cp.failed = True  # keep its logs
            report.sections.append(
                ("control plane", f"logs of etcd, kube-apiserver, schedulers: {cp.work_dir}")
            )


def read_answer(conn: socket.socket, marker: bytes) -> bytes:
    """What ``conn`` receives until ``marker`` has arrived or the server closes (an answer's
    headers and body may come in pieces); the socket's timeout bounds the wait, so a missing
    answer fails the caller's test by timing out."""
    answer = b""
    while marker not in answer:
        chunk = conn.recv(4096)
        if not chunk:
            break
        answer += chunk
    return answer
