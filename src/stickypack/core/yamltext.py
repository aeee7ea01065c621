"""YAML text to Python values, with one-line errors that say where; Python values to YAML
text that Kubernetes' own YAML readers take as written (:func:`dump_yaml`)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import yaml


class YAMLTextError(ValueError):
    """Text that is not valid YAML; the message is one line: ``source:line:column: ...``."""


class _Loader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses a string no output can encode and a mapping key
    given twice (the later value would silently replace the earlier; YAML forbids it)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
                continue  # a merge key's values may be overridden, as YAML means them to be
            key = self.construct_object(key_node)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping",
                    node.start_mark,
                    f"found duplicate key {key!r}",
                    key_node.start_mark,
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)

    def construct_yaml_str(self, node: yaml.Node) -> str:
        value: str = super().construct_yaml_str(node)
        try:
            value.encode()
        except UnicodeEncodeError:  # a "\ud800" escape: a lone surrogate, not a character
            raise yaml.constructor.ConstructorError(
                None, None, "a lone surrogate escape is not a character", node.start_mark
            ) from None
        return value


_Loader.add_constructor("tag:yaml.org,2002:str", _Loader.construct_yaml_str)


def load_yaml(text: str, source: str) -> Any:
    """``yaml.safe_load(text)``; invalid YAML raises :class:`YAMLTextError` naming ``source``
    and, when the parser knows it, the line and column (1-based) of the problem."""
    try:
        return yaml.load(text, Loader=_Loader)  # a SafeLoader: no Python objects
    except yaml.YAMLError as exc:
        raise YAMLTextError(describe_yaml_error(exc, source)) from None
    except RecursionError:  # the parser recurses once per level of nesting
        raise YAMLTextError(f"{source}: not valid YAML: nested too deeply") from None


def load_yaml_all(text: str, source: str) -> list[Any]:
    """The documents of ``text`` (``yaml.safe_load_all``), empty ones left out; errors as
    :func:`load_yaml`'s."""
    try:
        return [doc for doc in yaml.load_all(text, Loader=_Loader) if doc is not None]
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


#: Plain scalars that PyYAML (YAML 1.1, its own resolvers) writes unquoted as strings but that
#: the Go YAML readers of kubectl, helm and the API server (``sigs.k8s.io/yaml``) take for
#: something else: the booleans y/n, floats without a dot (``1e3``: YAML 1.2's and Go's float
#: form), integers Go's ``strconv.ParseInt(s, 0, 64)`` reads (``0o17``, ``0X1F``, ``0B101``).
_GO_NOT_A_STRING = re.compile(
    r"[yYnN]"
    r"|[-+]?(?:\.[0-9_]+|[0-9][0-9_]*(?:\.[0-9_]*)?)(?:[eE][-+]?[0-9]+)?"
    r"|[-+]?0[xXoObB][0-9a-fA-F_]*"
)


class KubernetesDumper(yaml.SafeDumper):
    """``yaml.SafeDumper`` for YAML that Kubernetes tools read: a string a Go YAML reader
    would take for a number or a boolean is quoted (:data:`_GO_NOT_A_STRING`; PyYAML quotes
    those of its own rules), and a string of several lines without trailing blanks is
    written as a literal ``|`` block (code, CEL)."""


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    style: str | None = None
    if "\n" in value and not any(line != line.rstrip() for line in value.splitlines()):
        style = "|"
    elif _GO_NOT_A_STRING.fullmatch(value):
        style = "'"
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


KubernetesDumper.add_representer(str, _represent_str)


def dump_yaml(data: Any) -> str:
    """``data`` as one YAML document for Kubernetes tools (:class:`KubernetesDumper`), keys in
    the order given."""
    return yaml.dump(data, Dumper=KubernetesDumper, sort_keys=False, default_flow_style=False)


def dump_yaml_all(documents: Iterable[Any]) -> str:
    """``documents`` as a YAML stream, each as :func:`dump_yaml` writes it."""
    return yaml.dump_all(documents, Dumper=KubernetesDumper, sort_keys=False, default_flow_style=False)
