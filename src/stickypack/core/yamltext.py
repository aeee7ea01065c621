"""YAML text to Python values, with one-line errors that say where."""

from __future__ import annotations

from typing import Any

import yaml


class YAMLTextError(ValueError):
    """Text that is not valid YAML; the message is one line: ``source:line:column: ...``."""


def load_yaml(text: str, source: str) -> Any:
    """``yaml.safe_load(text)``; invalid YAML raises :class:`YAMLTextError` naming ``source``
    and, when the parser knows it, the line and column (1-based) of the problem."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise YAMLTextError(describe_yaml_error(exc, source)) from None
    except RecursionError:  # the parser recurses once per level of nesting
        raise YAMLTextError(f"{source}: not valid YAML: nested too deeply") from None


def describe_yaml_error(exc: yaml.YAMLError, source: str) -> str:
    """``source:line:column: not valid YAML: problem (context)`` on one line."""
    mark = getattr(exc, "problem_mark", None)
    where = f"{source}:{mark.line + 1}:{mark.column + 1}" if mark is not None else source
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    context = getattr(exc, "context", None)
    return f"{where}: not valid YAML: {problem}" + (f" ({context})" if context else "")
