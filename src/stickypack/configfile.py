"""A service's YAML configuration: read from a file and validated by a pydantic model, with
one-line errors that name the file and the field (``extender.yaml: history.ttl_s: Input
should be a valid number``). The extender's and the webhook's configurations load through
it; each passes its own error type, so its callers catch what they did before.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from stickypack.core.yamltext import YAMLTextError, load_yaml
from stickypack.textfile import TextFileError, read_text_file

M = TypeVar("M", bound=BaseModel)


def validation_problems(exc: ValidationError) -> str:
    """Each error as ``field.path: message``, joined by "; " (pydantic's "Value error, "
    prefix of a validator's own message dropped)."""
    return "; ".join(
        f"{'.'.join(str(x) for x in e['loc']) or '<top>'}: {e['msg'].removeprefix('Value error, ')}"
        for e in exc.errors()
    )


def model_from_dict(model: type[M], raw: Any, source: str, what: str, error: type[ValueError]) -> M:
    """``raw`` (parsed YAML; None is an empty file) validated as ``model``; raises ``error``
    with ``source`` and the fields at fault. ``what`` names the configuration in the
    message for a document that is not a mapping."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise error(f"{source}: the {what} configuration must be a YAML mapping")
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise error(f"{source}: {validation_problems(exc)}") from None
    except ValueError as exc:  # raised outside pydantic's wrapping (selector parsing)
        raise error(f"{source}: {exc}") from None


def model_from_file(model: type[M], path: str | Path | None, what: str, error: type[ValueError]) -> M:
    """Read and validate the file ``path`` as ``model`` (None: all defaults)."""
    if path is None:
        return model()
    path = Path(path)
    try:
        raw = load_yaml(read_text_file(path), str(path))
    except (TextFileError, YAMLTextError) as exc:
        raise error(str(exc)) from None
    return model_from_dict(model, raw, str(path), what, error)
