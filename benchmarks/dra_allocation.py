"""What CEL costs kube-scheduler's DRA allocator as ``inspect --pod --dra`` runs it.

Usage: python benchmarks/dra_allocation.py [--nodes 1000] [--devices 8] [--repeat 3] [--distinct]

A cluster of ``--nodes`` nodes, each publishing a node-local ResourceSlice of ``--devices``
GPUs (half of the nodes a100s, half t4s), and a claim for two devices, allocated on every
node (``DraAllocator.allocate``, as the DynamicResources filter asks it node by node):
once with a DeviceClass and a request that select by CEL (the driver, then ``model ==
"a100"`` and a memory capacity of at least 40Gi), once with a DeviceClass without selectors
(the baseline: the same search without CEL). Each best of ``--repeat`` runs, a fresh
allocator each time (its per-device memo of selector results starts empty). ``--distinct``
gives every device a serial number attribute of its own, so no two devices look alike and
the memo saves nothing: every device is evaluated. Last line: the seconds of each and their
ratio.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from stickypack.core.draalloc import DraAllocator, read_claim
from stickypack.dracel import compile_selector

DRIVER = "gpu.example.com"


def _slices(nodes: int, devices: int, distinct: bool) -> list[dict[str, Any]]:
    out = []
    for n in range(nodes):
        model = "a100" if n % 2 == 0 else "t4"
        memory = "80Gi" if model == "a100" else "16Gi"
        out.append(
            {
                "metadata": {"name": f"n{n:05d}-gpus"},
                "spec": {
                    "driver": DRIVER,
                    "nodeName": f"n{n:05d}",
                    "pool": {"name": f"n{n:05d}", "generation": 1, "resourceSliceCount": 1},
                    "devices": [
                        {
                            "name": f"gpu-{d}",
                            "attributes": {
                                "model": {"string": model},
                                **({"serial": {"string": f"{n}-{d}"}} if distinct else {}),
                            },
                            "capacity": {"memory": {"value": memory}},
                        }
                        for d in range(devices)
                    ],
                },
            }
        )
    return out


def _allocate_everywhere(slices: list[dict[str, Any]], with_cel: bool, nodes: int) -> tuple[float, int]:
    """Seconds to allocate the claim on every node, and on how many it fits."""
    selectors = [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}] if with_cel else []
    classes = {"gpu": {"metadata": {"name": "gpu"}, "spec": {"selectors": selectors}}}
    exactly: dict[str, Any] = {"deviceClassName": "gpu", "count": 2}
    if with_cel:
        exactly["selectors"] = [
            {"cel": {"expression": f'device.attributes["{DRIVER}"].model == "a100"'}},
            {"cel": {"expression": f'device.capacity["{DRIVER}"].memory.compareTo(quantity("40Gi")) >= 0'}},
        ]
    claim = {
        "metadata": {"name": "c", "namespace": "default"},
        "spec": {"devices": {"requests": [{"name": "gpus", "exactly": exactly}]}},
    }
    start = time.perf_counter()
    allocator = DraAllocator(slices, [], classes, compile_selector)
    claims = [read_claim("default/c", claim)]
    fits = sum(allocator.allocate(f"n{n:05d}", {}, claims).fits for n in range(nodes))
    return time.perf_counter() - start, fits


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--devices", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--distinct", action="store_true", help="no two devices alike")
    args = parser.parse_args()
    slices = _slices(args.nodes, args.devices, args.distinct)
    best: dict[bool, tuple[float, int]] = {}
    for _ in range(args.repeat):
        for with_cel in (False, True):  # alternating, so both see the same host
            took = _allocate_everywhere(slices, with_cel, args.nodes)
            if with_cel not in best or took[0] < best[with_cel][0]:
                best[with_cel] = took
    (plain, plain_fits), (cel, cel_fits) = best[False], best[True]
    alike = "every device distinct" if args.distinct else "devices of a model alike"
    print(f"{args.nodes} nodes x {args.devices} devices ({alike}), a claim for 2:")
    print(f"fits on {plain_fits} without CEL")
    print(f"with CEL (a100, >= 40Gi): fits on {cel_fits}")
    print(f"no selectors: {plain:.3f} s; CEL selectors: {cel:.3f} s; ratio: {cel / plain:.2f}")


if __name__ == "__main__":
    main()
