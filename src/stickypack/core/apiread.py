"""Reading the API server's objects as dicts: each reader returns the value it checks or
raises :class:`Malformed` with what is wrong, for the caller to name the object and leave
it out. For objects the API server validates (DRA's slices and claims), so a failure means
an object not shaped as served (another version, a hand-made test object)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class Malformed(ValueError):
    """An object that is not what the API serves."""


def mapping(value: Any, what: str) -> Mapping[str, Any]:
    """``value``, an object (``what`` names it in the message)."""
    if not isinstance(value, Mapping):
        raise Malformed(f"{what} is not an object")
    return value


def optional_mapping(value: Any, what: str) -> Mapping[str, Any]:
    """``value``, an object; ``{}`` for None (a field left out)."""
    return {} if value is None else mapping(value, what)


def listed(value: Any, what: str) -> list[Any]:
    """``value``, a list; ``[]`` for None (a field left out)."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise Malformed(f"{what} is not a list")
    return value


def named(value: Any, what: str) -> str:
    """``value``, a non-empty string (a name)."""
    if not isinstance(value, str) or not value:
        raise Malformed(f"{what} is not a name")
    return value
