"""What the command modules share: the usage error, argument types, reading and writing files."""

from __future__ import annotations

import argparse
import math
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape

if TYPE_CHECKING:  # the extender's modules load only for its subcommands
    from stickypack.extender.config import ExtenderConfig

EXIT_USAGE = 2


class UsageError(Exception):
    """Bad command-line input: printed as one line, exit status 2."""


def _non_negative_int(text: str) -> int:
    """An argparse type: an integer >= 0 (argparse turns the error into exit status 2)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is negative")
    return value


#: Seconds per unit of a Go ``time.Duration`` string (what the cluster-autoscaler's
#: duration flags take: ``1h``, ``30m``, ``1h30m``, ``90s``, ``500ms``).
#: (Go takes both micro signs: U+00B5 and the Greek U+03BC.)
_GO_DURATION_UNITS = {
    "h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "\u00b5s": 1e-6, "\u03bcs": 1e-6, "ns": 1e-9,
}  # fmt: skip
_GO_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(h|ms|m|s|us|\u00b5s|\u03bcs|ns)")


def _duration_s(text: str) -> float:
    """An argparse type: a duration as Go writes one (``1h``, ``30m``, ``1h30m``, ``0s``) or
    plain seconds, as seconds >= 0."""
    try:
        value = float(text)
    except ValueError:
        sign, body = (text[0], text[1:]) if text[:1] in ("+", "-") else ("", text)  # Go takes a sign
        parts = _GO_DURATION_PART.findall(body)
        if not parts or "".join(n + u for n, u in parts) != body:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not a duration (1h, 30m, 1h30m, 90s, or seconds)"
            ) from None
        value = sum(float(n) * _GO_DURATION_UNITS[u] for n, u in parts) * (-1 if sign == "-" else 1)
    value += 0.0  # -0 is 0
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration >= 0")
    return value


def _add_output(parser: argparse.ArgumentParser) -> None:
    """The ``-o/--output FILE`` every ``render`` command takes (default: standard output)."""
    parser.add_argument("--output", "-o", type=Path, default=None, help="file to write (default: stdout)")


def _write_output(path: Path | None, text: str) -> int:
    if path:
        try:
            path.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"cannot write {path}: {exc.strerror or exc}") from None
    else:
        sys.stdout.write(text)
    return 0


def _load_extender_config(args: argparse.Namespace) -> ExtenderConfig:
    from stickypack.extender.config import ConfigError, load_config

    try:
        config = load_config(args.config)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    if args.kubeconfig:
        config.cluster.kubeconfig = args.kubeconfig
    return config


def _cluster_failure(command: str, exc: Exception) -> int:
    """A command's failure to work with the cluster, in one line: a kubeconfig that cannot be
    used is bad input (:class:`UsageError`, status 2); the API server not reached, a request
    refused (RBAC) or another error of the cluster's is printed here, status 1."""
    from stickypack.kube.client import ApiUnreachableError, KubeconfigError, describe_error

    if isinstance(exc, KubeconfigError):
        raise UsageError(str(exc)) from None
    text = str(exc) if isinstance(exc, ApiUnreachableError) else describe_error(exc)
    Console(stderr=True).print(
        f"[red]stickypack {command}: error:[/] {escape(text)}", highlight=False, soft_wrap=True
    )
    return 1


def _read_pod_file(path: Path) -> dict[str, Any]:
    """A Pod from a YAML or JSON file; :class:`UsageError` naming the file otherwise."""
    from stickypack.core.yamltext import YAMLTextError, load_yaml
    from stickypack.textfile import TextFileError, read_text_file

    try:
        raw = load_yaml(read_text_file(path), str(path))
    except (TextFileError, YAMLTextError) as exc:
        raise UsageError(str(exc)) from None
    if not isinstance(raw, dict) or raw.get("kind", "Pod") != "Pod" or not isinstance(raw.get("spec"), dict):
        raise UsageError(f"{path}: not a Pod (a mapping with kind: Pod and a spec)")
    return raw
