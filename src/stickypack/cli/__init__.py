"""The ``stickypack`` command line: one module per command family.

Each module defines its commands' argparse subparsers (``add_parser(sub)``) and their
handlers (``set_defaults(handler=...)``, called as ``handler(args, console)``):

``simulate.py``  ``stickypack simulate``, ``stickypack policies``
``render.py``    ``stickypack render scheduler-config | scheduler-routing | webhook-config |
                 dask-gateway | dask-kubernetes``
``services.py``  ``stickypack extender``, ``stickypack webhook`` (the long-running services;
                 ``webhook --route``)
``inspect.py``   ``stickypack inspect``, ``stickypack forget-node``
``common.py``    what they share: :class:`UsageError` (one line, exit status 2), argument
                 types, reading a Pod file, writing ``--output``, loading the extender's config

A new command family is one module here, one entry in :data:`FAMILIES` and a line per
command in :data:`DESCRIPTION`. Heavy imports (numpy, kubernetes_asyncio, uvicorn,
matplotlib...) stay inside the handlers, so that ``stickypack --help`` is fast.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from rich.console import Console
from rich.markup import escape

from stickypack.cli import inspect, render, services, simulate
from stickypack.cli.common import EXIT_USAGE, UsageError
from stickypack.cli.simulate import parse_seeds

__all__ = ["EXIT_USAGE", "FAMILIES", "UsageError", "main", "parse_seeds"]

#: ``stickypack --help``'s description: plain text for a terminal, a line per command in the
#: order the parser lists them (tests/test_docs.py checks both).
DESCRIPTION = """Pod placement for JupyterHub, BinderHub and Dask on Kubernetes.

  stickypack simulate     compare placement policies on a trace or a scenario (no cluster)
  stickypack policies     list the built-in policies, or show one in full
  stickypack render       write configuration for a real cluster: KubeSchedulerConfiguration,
                          pod routing (MutatingAdmissionPolicy or the webhook's registration),
                          the Dask preload's settings for dask-gateway and dask-kubernetes
  stickypack extender     run the kube-scheduler extender (sticky builds)
  stickypack webhook      run the admission webhook that gives labelled pods a schedulerName
  stickypack inspect      what a live cluster looks like to the autoscaler, or where a pod
                          would go and why
  stickypack forget-node  forget a node's build history (for an image cleaner)

'stickypack COMMAND --help' lists a command's options.
"""

#: The command families, in the order ``stickypack --help`` lists their commands.
FAMILIES = (simulate, render, services, inspect)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="stickypack", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for family in FAMILIES:
        family.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    console = Console() if sys.stdout.isatty() else Console(width=200)
    handler: Callable[[argparse.Namespace, Console], int] = args.handler  # set by the command's module
    try:
        return handler(args, console)
    except UsageError as exc:
        Console(stderr=True).print(
            f"[red]stickypack {args.command}: error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True
        )
        return EXIT_USAGE
