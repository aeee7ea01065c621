"""Built-in policies (YAML files shipped with the package) and loading of users' own."""

from __future__ import annotations

import functools
from importlib import resources
from pathlib import Path

from stickypack.core.policy import BUILTIN_PLUGINS, PluginRegistry, Policy, PolicyError, policy_from_yaml
from stickypack.textfile import TextFileError, read_text_file

#: Built-in policy names, in the order reports list them.
BUILTIN = ("default", "z2jh", "binderhub", "stickypack", "oracle")
#: The policies ``stickypack simulate`` compares when none are named.
DEFAULT_COMPARISON = ("default", "z2jh", "binderhub", "stickypack")


@functools.cache
def builtin_text(name: str) -> str:
    """The YAML text of built-in policy ``name``."""
    if name not in BUILTIN:
        raise PolicyError(f"unknown policy {name!r}; valid: {', '.join(BUILTIN)}")
    return resources.files(__package__).joinpath(f"{name}.yaml").read_text(encoding="utf-8")


def load_builtin(name: str) -> Policy:
    """Built-in policy ``name``; :class:`PolicyError` lists the valid names otherwise."""
    return policy_from_yaml(builtin_text(name), source=f"builtin:{name}")


def load_policy_file(path: str | Path, plugins: PluginRegistry = BUILTIN_PLUGINS) -> Policy:
    """A user's policy from a YAML file, built from ``plugins`` (the built-ins unless
    given: ``BUILTIN_PLUGINS.with_plugins(...)`` adds one's own); errors name the file and
    the field."""
    path = Path(path)
    try:
        text = read_text_file(path)
    except TextFileError as exc:
        raise PolicyError(str(exc)) from None
    return policy_from_yaml(text, source=str(path), plugins=plugins)


def load_policy(name_or_path: str, plugins: PluginRegistry = BUILTIN_PLUGINS) -> Policy:
    """Built-in policy ``name_or_path``, else the policy file at that path
    (:func:`load_policy_file`); a name that is neither (a misspelt built-in as much as a
    missing file) is a :class:`PolicyError` that lists the built-in names."""
    if name_or_path in BUILTIN:
        return load_builtin(name_or_path)
    if not Path(name_or_path).exists():
        raise PolicyError(f"{name_or_path}: not a built-in policy ({', '.join(BUILTIN)}) nor a file")
    return load_policy_file(name_or_path, plugins)
