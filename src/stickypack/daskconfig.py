"""Dask configuration helpers: what dask-gateway and the dask-kubernetes operator need for
node-aware retirement (:mod:`stickypack.dask`), written for them.

Node-aware retirement needs three things in the pods a Dask cluster runs (operator guide,
"Dask: shrink by whole nodes"): the preload ``stickypack.dask`` in the scheduler, the same
preload in each worker, and each worker's node name from the downward API in
``STICKYPACK_NODE_NAME``. distributed reads a preload from its environment variable only
when the command line names no ``--preload``; where it names one, the preload goes on the
command line too. These helpers apply those rules so nobody has to:

- :func:`dask_gateway_config`: Python for the dask-gateway chart's ``gateway.extraConfig``
  (its traitlets configuration). dask-gateway's scheduler command names its own preload, so
  ``--preload stickypack.dask`` is added to ``KubeClusterConfig.scheduler_cmd`` (and to
  ``worker_cmd`` where the workers' command names a ``--preload``); the workers' variables
  are appended to ``KubeClusterConfig.worker_extra_container_config`` (dask-gateway appends
  that ``env`` to its own). Self-contained: the gateway's image need not have stickypack
  installed, only the Dask image.
- :func:`dask_kubernetes_spec`: a ``DaskCluster`` or ``DaskWorkerGroup`` of the
  dask-kubernetes operator with the variables (or ``--preload``) added to its scheduler's and
  workers' containers, and optionally (``http_api``) the scheduler's HTTP routes naming
  distributed's HTTP API, which the operator asks to retire workers.

Pure: dictionaries and strings in and out; no distributed needed (unlike
:mod:`stickypack.dask`).
"""

from __future__ import annotations

import ast
import copy
import json
import reprlib
from collections.abc import Mapping
from typing import Any

from stickypack.core.yamltext import dump_yaml

#: The preload module (``stickypack.dask``) both halves load.
PRELOAD = "stickypack.dask"
#: The environment variable a worker reads its node name from (downward API ``spec.nodeName``).
NODE_ENV = "STICKYPACK_NODE_NAME"
#: distributed's configuration variables for the scheduler's and the workers' preloads.
SCHEDULER_PRELOAD_ENV = "DASK_DISTRIBUTED__SCHEDULER__PRELOAD"
WORKER_PRELOAD_ENV = "DASK_DISTRIBUTED__WORKER__PRELOAD"
#: distributed's configuration variable for the modules whose routes the scheduler's HTTP
#: server (its dashboard port) serves, ``distributed.scheduler.http.routes``.
SCHEDULER_ROUTES_ENV = "DASK_DISTRIBUTED__SCHEDULER__HTTP__ROUTES"
#: The route module of distributed's HTTP API (``POST /api/v1/retire_workers`` and others),
#: which the dask-kubernetes operator retires workers through.
HTTP_API_ROUTE = "distributed.http.scheduler.api"
#: distributed's default ``distributed.scheduler.http.routes``, the same in 2024.4.2 (the
#: oldest distributed :mod:`stickypack.dask` takes) and 2026.11.0 (the one tested). Written
#: here rather than read from the distributed installed where the render runs: the
#: scheduler's image may hold another. ``distributed.http.health`` serves ``/health``, the
#: operator's readiness and liveness probes.
DISTRIBUTED_SCHEDULER_ROUTES = (
    "distributed.http.scheduler.prometheus",
    "distributed.http.scheduler.info",
    "distributed.http.scheduler.json",
    "distributed.http.health",
    "distributed.http.proxy",
    "distributed.http.statics",
)


class DaskConfigError(ValueError):
    """A Dask resource or setting these helpers cannot complete; the message says where."""


def node_name_env() -> dict[str, Any]:
    """The container ``env`` entry that gives a worker its node's name."""
    return {"name": NODE_ENV, "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}


#: The words dask reads from a ``DASK_*`` variable as YAML would (``dask.config.interpret_value``).
_DASK_WORDS: dict[str, object] = {"none": None, "null": None, "false": False, "true": True}


def _dask_value(current: str) -> object:
    """What dask reads from a ``DASK_*`` variable's value (``dask.config.interpret_value``):
    a Python literal, else ``none``, ``null``, ``false`` or ``true`` (any case) as YAML
    would, else the string."""
    try:
        return ast.literal_eval(current)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return _DASK_WORDS.get(current.lower(), current)


def _with_preload_value(current: str) -> str:
    """An ``env`` value for a preload variable that keeps ``current`` and adds
    :data:`PRELOAD`: dask parses the variable with ``ast.literal_eval`` (so a list literal
    names several modules), else reads ``none``, ``null``, ``false`` and ``true`` (any case)
    as YAML would, else takes the string; None and False name no module (distributed fails
    on them, and a module named ``null`` no scheduler could import)."""
    parsed = _dask_value(current)
    if parsed is None or parsed is False:
        modules: list[str] = []
    else:
        modules = [str(m) for m in parsed] if isinstance(parsed, list | tuple) else [str(parsed)]
    modules = [m for m in modules if m]
    if PRELOAD in modules:
        return current
    if not modules:
        return PRELOAD
    return json.dumps([PRELOAD, *modules])


def _add_preload_env(env: object, variable: str, where: str) -> list[Any]:
    """``env`` (a container's ``env`` list, or None) with ``variable`` naming
    :data:`PRELOAD` as well as what it named."""
    entries = _env_list(env, where)
    for i, entry in enumerate(entries):
        if entry.get("name") != variable:
            continue
        if "valueFrom" in entry:
            raise DaskConfigError(
                f"{where}: {variable} comes from valueFrom; set it to a value, or add {PRELOAD} to its source"
            )
        entries[i] = {**entry, "value": _with_preload_value(str(entry.get("value") or ""))}
        return entries
    return [*entries, {"name": variable, "value": PRELOAD}]


def _add_env(env: object, extra: Mapping[str, Any], where: str) -> list[Any]:
    """``env`` with ``extra`` in place of the first entry of the same name (others of that
    name dropped), else at the end."""
    entries = _env_list(env, where)
    at = next((i for i, e in enumerate(entries) if e.get("name") == extra["name"]), len(entries))
    rest = [e for e in entries[at:] if e.get("name") != extra["name"]]
    return [*entries[:at], dict(extra), *rest]


def _env_list(env: object, where: str) -> list[dict[str, Any]]:
    if env is None:
        return []
    if not isinstance(env, list) or not all(isinstance(e, Mapping) for e in env):
        raise DaskConfigError(f"{where}: env must be a list of {{name, value}} entries")
    return [dict(e) for e in env]


def _names_preload(words: list[str]) -> bool:
    return any(w == "--preload" or w.startswith("--preload=") for w in words)


def _names_ours(words: list[str]) -> bool:
    return PRELOAD in words or f"--preload={PRELOAD}" in words


def _add_preload(container: dict[str, Any], variable: str, where: str) -> None:
    """Make the container's Dask process load :data:`PRELOAD`: on its command line when
    that names a ``--preload`` already (distributed then ignores the variable), else in
    ``variable``. A shell command (a word with spaces, as ``sh -c`` runs) that names a
    ``--preload`` but not ours is an error: it cannot be edited safely."""
    words: list[str] = []
    for key in ("command", "args"):
        part = container.get(key)
        if part is not None and (not isinstance(part, list) or not all(isinstance(w, str) for w in part)):
            raise DaskConfigError(f"{where}.{key}: must be a list of strings, got {part!r}")
        for i, word in enumerate(part or []):
            shell = word.split()
            if len(shell) > 1 and _names_preload(shell):
                if _names_ours(shell):
                    return
                raise DaskConfigError(
                    f"{where}.{key}[{i}]: a shell command that names --preload, so distributed "
                    f"ignores {variable}; add --preload {PRELOAD} to it"
                )
        words += part or []
    if not _names_preload(words):
        container["env"] = _add_preload_env(container.get("env"), variable, where)
        return
    if _names_ours(words):
        return
    key = "args" if container.get("args") else "command"
    container[key] = [*container[key], "--preload", PRELOAD]


def _described(value: object) -> str:
    """``value`` as a message names it: its type and, shortened, itself."""
    return "None" if value is None else f"the {type(value).__name__} {reprlib.repr(value)}"


def _with_api_route(current: str, where: str) -> str:
    """A value for :data:`SCHEDULER_ROUTES_ENV` that keeps the routes ``current`` names, in
    their order, and adds :data:`HTTP_API_ROUTE`; ``current`` itself where it names that
    already. A value dask does not read as a list (or tuple) of module names is an error:
    distributed would fail on it, or iterate a string's characters."""
    parsed = _dask_value(current)
    if not isinstance(parsed, list | tuple) or not all(isinstance(r, str) for r in parsed):
        raise DaskConfigError(
            f"{where}: {SCHEDULER_ROUTES_ENV}: dask reads {_described(parsed)}, not a list of route "
            'modules; write it as a list of quoted module names, e.g. ["distributed.http.health"]'
        )
    if HTTP_API_ROUTE in parsed:
        return current
    return json.dumps([*parsed, HTTP_API_ROUTE])


def _add_http_api(container: dict[str, Any], where: str) -> None:
    """Make the container's scheduler serve distributed's HTTP API: :data:`SCHEDULER_ROUTES_ENV`
    set to :data:`DISTRIBUTED_SCHEDULER_ROUTES` and :data:`HTTP_API_ROUTE`, or, where the
    container sets it already (every entry of that name), the API added to its routes.
    ``dask scheduler`` takes no routes on its command line, but a shell string that sets
    the variable overrides ``env`` and cannot be edited safely: an error."""
    for key in ("command", "args"):
        part = container.get(key)
        if part is not None and (not isinstance(part, list) or not all(isinstance(w, str) for w in part)):
            raise DaskConfigError(f"{where}.{key}: must be a list of strings, got {part!r}")
        for i, word in enumerate(part or []):
            if len(word.split()) > 1 and SCHEDULER_ROUTES_ENV in word:
                raise DaskConfigError(
                    f"{where}.{key}[{i}]: a shell command that sets {SCHEDULER_ROUTES_ENV}, over the "
                    f"container's env; add {HTTP_API_ROUTE} to it there"
                )
    entries = _env_list(container.get("env"), where)
    ours = [i for i, entry in enumerate(entries) if entry.get("name") == SCHEDULER_ROUTES_ENV]
    for i in ours:
        if "valueFrom" in entries[i]:
            raise DaskConfigError(
                f"{where}: {SCHEDULER_ROUTES_ENV} comes from valueFrom; set it to a value, or add "
                f"{HTTP_API_ROUTE} to its source"
            )
        entries[i] = {**entries[i], "value": _with_api_route(str(entries[i].get("value") or ""), where)}
    if not ours:
        entries.append(
            {
                "name": SCHEDULER_ROUTES_ENV,
                "value": json.dumps([*DISTRIBUTED_SCHEDULER_ROUTES, HTTP_API_ROUTE]),
            }
        )
    container["env"] = entries


def _containers(pod_spec: object, where: str) -> list[dict[str, Any]]:
    if not isinstance(pod_spec, Mapping):
        raise DaskConfigError(f"{where}: expected a pod spec (a mapping with containers)")
    containers = pod_spec.get("containers")
    if not isinstance(containers, list) or not containers or not all(isinstance(c, dict) for c in containers):
        raise DaskConfigError(f"{where}.containers: expected a non-empty list of containers")
    return containers


def dask_kubernetes_spec(
    resource: Mapping[str, Any], scheduler_name: str | None = None, *, http_api: bool = False
) -> dict[str, Any]:
    """A copy of ``resource``, a dask-kubernetes operator ``DaskCluster`` or
    ``DaskWorkerGroup`` (``kubernetes.dask.org/v1``, as a dict), set up for node-aware
    retirement: every container of the worker pod spec gets :data:`NODE_ENV` from the
    downward API and the worker preload, every container of a DaskCluster's scheduler pod
    spec the scheduler preload (each on the command line where that names a ``--preload``
    already, else in distributed's variable, kept beside a preload the variable names).
    ``scheduler_name`` (optional) becomes the worker pods' ``schedulerName``, for clusters
    without the routing webhook. ``http_api``: every container of a DaskCluster's scheduler
    pod spec also gets :data:`SCHEDULER_ROUTES_ENV` naming :data:`HTTP_API_ROUTE` (beside
    the routes it names, else distributed's defaults), so the scheduler serves the HTTP API
    the operator retires workers through; a DaskWorkerGroup, which has no scheduler, is
    left as without it. Applying it twice changes nothing more. Raises
    :class:`DaskConfigError` naming the part that is not what the operator takes."""
    if not isinstance(resource, Mapping):
        raise DaskConfigError("expected a DaskCluster or DaskWorkerGroup (a mapping)")
    kind = resource.get("kind")
    if kind not in ("DaskCluster", "DaskWorkerGroup"):
        raise DaskConfigError(f"kind {kind!r}: expected DaskCluster or DaskWorkerGroup")
    out = copy.deepcopy(dict(resource))
    spec = out.get("spec")
    if not isinstance(spec, dict):
        raise DaskConfigError(f"{kind}.spec: missing or not a mapping")
    worker = spec.get("worker")
    if not isinstance(worker, dict):
        raise DaskConfigError(f"{kind}.spec.worker: missing or not a mapping")
    worker_spec = worker.get("spec")
    for i, container in enumerate(_containers(worker_spec, f"{kind}.spec.worker.spec")):
        where = f"{kind}.spec.worker.spec.containers[{i}]"
        container["env"] = _add_env(container.get("env"), node_name_env(), where)
        _add_preload(container, WORKER_PRELOAD_ENV, where)
    if scheduler_name is not None:
        assert isinstance(worker_spec, dict)
        worker_spec["schedulerName"] = scheduler_name
    if kind == "DaskCluster":
        scheduler = spec.get("scheduler")
        if not isinstance(scheduler, dict):
            raise DaskConfigError("DaskCluster.spec.scheduler: missing or not a mapping")
        for i, container in enumerate(_containers(scheduler.get("spec"), "DaskCluster.spec.scheduler.spec")):
            where = f"DaskCluster.spec.scheduler.spec.containers[{i}]"
            _add_preload(container, SCHEDULER_PRELOAD_ENV, where)
            if http_api:
                _add_http_api(container, where)
    return out


def dask_gateway_config(scheduler_name: str | None = None) -> str:
    """Python for the dask-gateway chart's ``gateway.extraConfig`` (run by the gateway as
    traitlets configuration, after the chart's own) that sets every cluster up for
    node-aware retirement: ``--preload stickypack.dask`` added to
    ``KubeClusterConfig.scheduler_cmd`` (as dask-gateway's own ``KubeClusterConfig`` reads
    the configuration so far: a string is one word, ``ClusterConfig``'s value inherited,
    ``c.KubeClusterConfig.scheduler_cmd.append(...)`` applied; dask-gateway's default
    ``dask-scheduler`` otherwise), and :data:`NODE_ENV` and the worker preload added to
    ``KubeClusterConfig.worker_extra_container_config``'s ``env`` (entries of the same
    names replaced, the rest kept; a worker preload set there or in ``environment`` kept
    beside ours); where the workers' command line names a ``--preload`` already
    (``worker_cmd``, or the extra container config's ``args``), distributed ignores that
    variable, so ``--preload stickypack.dask`` goes on ``worker_cmd`` as well.
    ``scheduler_name`` (optional) goes into ``worker_extra_pod_config`` as
    the workers' ``schedulerName``, for clusters without the routing webhook. Needs
    nothing of stickypack in the gateway's image (it imports dask-gateway-server's
    ``KubeClusterConfig``). Settings a cluster options handler returns per cluster are
    not seen: one that replaces ``scheduler_cmd``, ``worker_cmd``, ``environment`` or
    ``worker_extra_container_config`` must keep ours itself."""
    sections = [
        [*_GATEWAY_SETUP, *_gateway_scheduler_preload()],
        _gateway_preloads_function(),
        _gateway_worker_preload_cmd(),
        _gateway_worker_env(),
    ]
    if scheduler_name is not None:
        sections.append(_gateway_scheduler_name(scheduler_name))
    body = sections[0]
    for section in sections[1:]:  # a blank line between sections
        body = [*body, "", *section]
    lines = [
        "# Node-aware retirement for Dask clusters (stickypack render dask-gateway;",
        "# docs/operator-guide.md, 'Dask: shrink by whole nodes'). The Dask image needs",
        "# stickypack[dask] installed; this gateway's image does not. Runs after the chart's",
        "# own configuration, so it extends what the chart's values set.",
        "def _stickypack_dask(c):",
        *(f"    {line}" if line else "" for line in body),
        "",
        "",
        "_stickypack_dask(c)",
        "del _stickypack_dask",
    ]
    return "\n".join(lines) + "\n"


# The sections of dask_gateway_config's function, each a list of lines of Python run by the
# gateway with `c`, its traitlets configuration, and the names the sections before define.

#: Imports, and ``now``: dask-gateway's own reading of the configuration so far;
#: ``cluster``: where the sections write.
_GATEWAY_SETUP = (
    "import ast",
    "import json",
    "",
    "from dask_gateway_server.backends.kubernetes.backend import KubeClusterConfig",
    "",
    "# What dask-gateway makes of the configuration so far (the chart's values, extraConfig",
    "# run before this one): a command given as one string is one word, ClusterConfig's",
    "# values are inherited, placeholders such as c.KubeClusterConfig.scheduler_cmd.append(...)",
    "# are applied.",
    "now = KubeClusterConfig(config=c)",
    "cluster = c.KubeClusterConfig",
)


def _gateway_scheduler_preload() -> list[str]:
    """``--preload stickypack.dask`` added to ``scheduler_cmd`` unless it names it already."""
    return [
        "cmd = list(now.scheduler_cmd)",
        f"if {PRELOAD!r} not in cmd and {'--preload=' + PRELOAD!r} not in cmd:",
        f"    cmd += ['--preload', {PRELOAD!r}]",
        "cluster.scheduler_cmd = cmd",
    ]


def _gateway_preloads_function() -> list[str]:
    """``preloads(value)``: the modules a preload variable's value names, as dask reads it
    (the gateway's copy of :func:`_with_preload_value`'s reading)."""
    return [
        "def preloads(value):  # as dask reads the variable: a module, a list literal, or none",
        "    try:",
        "        value = ast.literal_eval(value)",
        "    except (ValueError, SyntaxError, MemoryError, RecursionError):",
        f"        value = {_DASK_WORDS!r}.get(value.lower(), value)",
        "    if value is None or value is False:",
        "        return []",
        "    names = [str(v) for v in value] if isinstance(value, (list, tuple)) else [str(value)]",
        "    return [n for n in names if n]",
    ]


def _gateway_worker_preload_cmd() -> list[str]:
    """``--preload stickypack.dask`` added to ``worker_cmd`` where the workers' command
    line names another ``--preload`` (distributed then ignores the variable); ``extra``:
    the worker container's extra configuration, which the next section completes."""
    return [
        "# distributed reads the workers' preload variable only where their command line names no",
        "# --preload. Their command line is worker_cmd, dask-gateway's own arguments, then the",
        "# extra container config's command and args (merged in): where it names one, ours goes",
        "# on worker_cmd too.",
        "extra = dict(now.worker_extra_container_config)",
        "worker_cmd = list(now.worker_cmd)",
        "words = [",
        "    w for part in (worker_cmd, extra.get('command'), extra.get('args'))",
        "    if isinstance(part, list) for w in part if isinstance(w, str)",
        "]",
        "if any(w == '--preload' or w.startswith('--preload=') for w in words) and not (",
        f"    {PRELOAD!r} in words or {'--preload=' + PRELOAD!r} in words",
        "):",
        f"    cluster.worker_cmd = [*worker_cmd, '--preload', {PRELOAD!r}]",
    ]


def _gateway_worker_env() -> list[str]:
    """:data:`NODE_ENV` and the worker preload variable (ours beside the modules it names
    in ``environment`` or the extra ``env``) put in the extra container config's ``env``,
    replacing entries of those names; a ``valueFrom`` preload or an ``env`` that is not a
    list of entries stops the gateway with a message."""
    return [
        "# A worker container has `environment`'s variables, then the extra env; of two entries",
        "# of one name the last wins. A worker preload set there is kept beside ours.",
        "env = extra.get('env') or []",
        "if not isinstance(env, list) or not all(isinstance(e, dict) for e in env):",
        "    raise ValueError(",
        "        'stickypack: worker_extra_container_config env must be a list of {name, value} '",
        "        'entries (Helm: gateway.backend.worker.extraContainerConfig.env), got %r' % (env,)",
        "    )",
        "env = list(env)",
        f"preload = str(now.environment.get({WORKER_PRELOAD_ENV!r}) or '')",
        "for e in env:",
        f"    if e.get('name') == {WORKER_PRELOAD_ENV!r}:",
        "        if 'valueFrom' in e:",
        "            raise ValueError(",
        f"                'stickypack: {WORKER_PRELOAD_ENV} comes from valueFrom in '",
        f"                'worker_extra_container_config; set it to a value, or add {PRELOAD} to its source'",
        "            )",
        "        preload = str(e.get('value') or '')",
        "names = preloads(preload)",
        f"if {PRELOAD!r} not in names:",
        f"    names = [{PRELOAD!r}, *names]",
        "value = names[0] if len(names) == 1 else json.dumps(names)",
        f"ours = [{node_name_env()!r}, {{'name': {WORKER_PRELOAD_ENV!r}, 'value': value}}]",
        "extra['env'] = [e for e in env if e.get('name') not in {o['name'] for o in ours}] + ours",
        "cluster.worker_extra_container_config = extra",
    ]


def _gateway_scheduler_name(scheduler_name: str) -> list[str]:
    """``scheduler_name`` as the worker pods' ``schedulerName`` (``worker_extra_pod_config``)."""
    return [
        "pod = dict(now.worker_extra_pod_config)",
        f"pod['schedulerName'] = {scheduler_name!r}",
        "cluster.worker_extra_pod_config = pod",
    ]


def dask_gateway_values(scheduler_name: str | None = None) -> dict[str, Any]:
    """Helm values for the dask-gateway chart: :func:`dask_gateway_config` under
    ``gateway.extraConfig.stickypack`` (the chart runs its ``extraConfig`` entries in key
    order)."""
    return {"gateway": {"extraConfig": {"stickypack": dask_gateway_config(scheduler_name)}}}


def dask_gateway_values_yaml(scheduler_name: str | None = None) -> str:
    """:func:`dask_gateway_values` as YAML, the code as a literal block."""
    return dump_yaml(dask_gateway_values(scheduler_name))
