"""Per-node build caches and the image cleaner."""

from __future__ import annotations

from collections import OrderedDict

from stickypack.sim.model import CacheConfig


class NodeCache:
    """Repos whose images a node holds, least recently used first."""

    __slots__ = ("_images", "config")

    def __init__(self, config: CacheConfig) -> None:
        self.config = config
        self._images: OrderedDict[str, None] = OrderedDict()

    def __contains__(self, repo: str) -> bool:
        return repo in self._images

    def __len__(self) -> int:
        return len(self._images)

    def touch(self, repo: str) -> list[str]:
        """Record a build of ``repo``; returns the repos the image cleaner pruned, if it ran."""
        self._images[repo] = None
        self._images.move_to_end(repo)
        pruned: list[str] = []
        if len(self._images) > self.config.high_images:
            while len(self._images) > self.config.low_images:
                pruned.append(self._images.popitem(last=False)[0])
        return pruned
