"""Per-node build caches, the image cleaner, and the images a node lists."""

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


class NodeImages:
    """The images a node holds (built or pulled for a pod), least recently used first, and
    the ones its kubelet lists in ``status.images``: the ``node_status_max_images`` largest."""

    __slots__ = ("_held", "config", "listed")

    def __init__(self, config: CacheConfig) -> None:
        self.config = config
        self._held: OrderedDict[str, int] = OrderedDict()
        #: What the node lists: image name -> size in bytes.
        self.listed: dict[str, int] = {}

    def __contains__(self, name: str) -> bool:
        return name in self._held

    def touch(self, name: str, size: int) -> list[tuple[str, int | None]]:
        """The node uses image ``name`` of ``size`` bytes now (a pull when it had none).
        Returns the changes to its list, in order: ``(name, size)`` listed, ``(name, None)``
        no longer listed."""
        held = self._held
        if name in held:
            held.move_to_end(name)
            return []
        held[name] = size
        changes: list[tuple[str, int | None]] = []
        cap = self.config.node_status_max_images
        listed = self.listed
        if cap < 0 or len(listed) < cap:
            listed[name] = size
            changes.append((name, size))
        elif cap > 0:
            smallest = min(listed, key=listed.__getitem__)
            if size > listed[smallest]:
                del listed[smallest]
                listed[name] = size
                changes += [(smallest, None), (name, size)]
        if len(held) > self.config.high_images:
            while len(held) > self.config.low_images:
                gone = held.popitem(last=False)[0]
                if listed.pop(gone, None) is not None:
                    changes.append((gone, None))
            room = len(held) if cap < 0 else min(cap, len(held))
            if len(listed) < room:  # the largest of the rest move up into the list
                rest = sorted(((s, n) for n, s in held.items() if n not in listed), reverse=True)
                for s, n in rest[: room - len(listed)]:
                    listed[n] = s
                    changes.append((n, s))
        return changes
