"""``BuildHistory``: which node built which repo, and when.

Pure data: every method takes the time it needs as an argument (seconds since the epoch or
any fixed origin). The live service stores it (see ``stickypack.kube.history``), the
simulator keeps it in memory; both feed it to the ``BuildLocality`` scorer.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Mapping


class BuildHistory:
    """Repo -> {node: time of its latest build there}, bounded and expiring.

    ``ttl_s``: entries older than this are forgotten (seconds). ``max_nodes_per_repo``: only
    the most recent nodes of a repo are kept. ``max_repos``: least recently built repos are
    dropped first when the history grows beyond it.
    """

    def __init__(self, ttl_s: float = 7 * 86400, max_nodes_per_repo: int = 3, max_repos: int = 20000) -> None:
        self.ttl_s = ttl_s
        self.max_nodes_per_repo = max_nodes_per_repo
        self.max_repos = max_repos
        self._repos: OrderedDict[str, dict[str, float]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._repos)

    def record(self, repo: str, node: str, when: float) -> None:
        """Remember that ``node`` finished a build of ``repo`` at ``when``. The repo becomes
        the most recently built unless it has a newer build already (a late, older record
        does not save it from ``max_repos``)."""
        nodes = self._repos.get(repo, {})
        newest = max(nodes.values(), default=float("-inf"))
        if when >= nodes.get(node, float("-inf")):
            nodes[node] = when
        if len(nodes) > self.max_nodes_per_repo:
            keep = sorted(nodes.items(), key=lambda kv: (-kv[1], kv[0]))[: self.max_nodes_per_repo]
            nodes = dict(keep)
        self._repos[repo] = nodes  # a known repo keeps its place
        if when >= newest:
            self._repos.move_to_end(repo)
        while len(self._repos) > self.max_repos:
            self._repos.popitem(last=False)

    def nodes_for(self, repo: str, now: float) -> list[str]:
        """Nodes that built ``repo`` within the TTL, most recent first."""
        nodes = self._repos.get(repo)
        if not nodes:
            return []
        horizon = now - self.ttl_s
        fresh = [(t, n) for n, t in nodes.items() if t >= horizon]
        fresh.sort(key=lambda tn: (-tn[0], tn[1]))
        return [n for _, n in fresh]

    def forget(self, repo: str, node: str) -> bool:
        """Drop ``node``'s entry for ``repo`` (its image was pruned). Returns whether there was one."""
        nodes = self._repos.get(repo)
        if not nodes or node not in nodes:
            return False
        del nodes[node]
        if not nodes:
            del self._repos[repo]
        return True

    def forget_node(self, node: str, up_to: float = float("inf")) -> int:
        """Drop every entry of ``node`` (deleted, or its image cache pruned), or only those
        dated ``up_to`` or earlier. Returns how many."""
        dropped = 0
        for repo in list(self._repos):
            nodes = self._repos[repo]
            when = nodes.get(node)
            if when is not None and when <= up_to:
                del nodes[node]
                dropped += 1
                if not nodes:
                    del self._repos[repo]
        return dropped

    def expire(self, now: float) -> int:
        """Drop entries older than the TTL. Returns how many."""
        horizon = now - self.ttl_s
        dropped = 0
        for repo in list(self._repos):
            nodes = self._repos[repo]
            for node in [n for n, t in nodes.items() if t < horizon]:
                del nodes[node]
                dropped += 1
            if not nodes:
                del self._repos[repo]
        return dropped

    def items(self) -> Iterable[tuple[str, Mapping[str, float]]]:
        """(repo, {node: time}) pairs, oldest repo first."""
        return self._repos.items()

    def merge(self, entries: Mapping[str, Mapping[str, float]]) -> None:
        """Add entries from a stored copy (newest time wins per repo and node)."""
        for repo, nodes in entries.items():
            for node, when in nodes.items():
                self.record(repo, node, float(when))

    def to_dict(self) -> dict[str, dict[str, float]]:
        """A JSON-ready copy."""
        return {repo: dict(nodes) for repo, nodes in self._repos.items()}
