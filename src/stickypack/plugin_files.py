"""Plugins of your own, from Python files: ``stickypack simulate --plugins FILE`` and the
extender's ``plugins:`` key.

A plugin file is a Python module that defines, at module level, one or more of the dicts
``FILTERS``, ``SCORERS`` and ``MUTATORS``: the name a policy YAML uses -> the plugin class
(a subclass of ``stickypack.core.FilterPlugin``, ``ScorePlugin`` or ``PodMutator``) or any
callable that builds one from the YAML ``args``. Outside ``core`` because it reads and runs
files; the core only sees the resulting :class:`~stickypack.core.PluginRegistry`, which
checks every answer of these plugins (``PluginContractError`` naming the plugin).
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from stickypack.core.policy import BUILTIN_PLUGINS, PluginRegistry, PolicyError

#: The dicts a plugin file may define, in the order PluginRegistry.with_plugins takes them.
KINDS = ("FILTERS", "SCORERS", "MUTATORS")


class PluginFileError(PolicyError):
    """A plugin file that cannot be used; the message is one line naming the file."""


def load_plugin_files(paths: Iterable[str | Path], base: PluginRegistry = BUILTIN_PLUGINS) -> PluginRegistry:
    """``base`` plus the plugins of each file in ``paths``. A name that ``base`` or an
    earlier file already has is refused: a policy's meaning must not depend on which file
    was given last."""
    registry = base
    seen: set[Path] = set()
    for path in map(Path, paths):
        if path.resolve() in seen:  # the same file twice: its plugins once
            continue
        seen.add(path.resolve())
        found = _plugins_of(path)
        have = (registry.filters, registry.scorers, registry.mutators)
        for kind, plugins, taken in zip(KINDS, found, have, strict=True):
            clash = sorted(set(plugins) & set(taken))
            if clash:
                raise PluginFileError(f"{path}: {kind} names {', '.join(clash)}, which is taken already")
        registry = registry.with_plugins(*found)
    return registry


def _plugins_of(path: Path) -> tuple[dict[str, Callable[..., Any]], ...]:
    """The FILTERS, SCORERS and MUTATORS of the file at ``path`` (empty where not defined)."""
    if path.is_dir():
        raise PluginFileError(f"{path}: a directory, not a plugin file")
    if not path.is_file():
        raise PluginFileError(f"{path}: no such plugin file")
    # a stable module name of its own, so the classes' module resolves (type hints, pickling)
    name = "stickypack_plugins_" + hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:12]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise PluginFileError(f"{path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except SyntaxError as exc:
        del sys.modules[name]
        raise PluginFileError(f"{path}:{exc.lineno}: syntax error: {exc.msg}") from None
    except (Exception, SystemExit) as exc:  # the file's own code failed: say so in one line
        del sys.modules[name]
        raise PluginFileError(f"{path}: failed to load: {type(exc).__name__}: {exc}") from None
    found: list[dict[str, Callable[..., Any]]] = []
    for kind in KINDS:
        plugins = getattr(module, kind, None) or {}
        if not isinstance(plugins, Mapping):
            raise PluginFileError(f"{path}: {kind} must be a dict of name -> plugin class")
        for key, factory in plugins.items():
            if not isinstance(key, str) or not key or not callable(factory):
                raise PluginFileError(f"{path}: {kind}[{key!r}] must map a name to a plugin class")
        found.append(dict(plugins))
    if not any(found):
        raise PluginFileError(f"{path}: defines none of {', '.join(KINDS)} (dicts of name -> plugin class)")
    return tuple(found)
