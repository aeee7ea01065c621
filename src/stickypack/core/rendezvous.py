"""Rendezvous (highest-random-weight) hashing, in BinderHub's exact order.

``rendezvous_rank`` reproduces ``binderhub.utils.rendezvous_rank``: each bucket scores the first
8 bytes of ``blake2b(b"<key>-<bucket>", digest_size=8)`` read big-endian, and buckets are sorted
by ``(score, bucket)`` from high to low. A cluster moving from BinderHub's sticky builds to
stickypack therefore sends each repo to the same node first, and its caches stay warm.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from hashlib import blake2b
from typing import TypeVar

B = TypeVar("B", bound=Hashable)

_TWO_64 = float(2**64)


def rendezvous_score(bucket: object, key: object) -> int:
    """BinderHub's 64-bit score of ``bucket`` for ``key``."""
    digest = blake2b(b"%s-%s" % (str(key).encode(), str(bucket).encode()), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def rendezvous_rank(buckets: Iterable[B], key: object) -> list[B]:
    """Buckets ordered best first for ``key``, exactly as BinderHub orders them."""
    ranking = [(rendezvous_score(b, key), b) for b in buckets]
    ranking.sort(reverse=True)
    return [b for _, b in ranking]


def weighted_rendezvous_rank(weights: Mapping[B, float], key: object) -> list[B]:
    """Weighted rendezvous hashing: bucket ``b`` wins a share ``w_b / sum(w)`` of keys.

    Score ``-w / ln(u)`` with ``u`` in (0, 1) from BinderHub's hash (Schindelhauer and
    Schomaker's logarithmic method), so with equal weights the order equals
    :func:`rendezvous_rank`'s. Buckets with weight <= 0 are left out.
    """
    scored = []
    for bucket, weight in weights.items():
        if weight <= 0:
            continue
        u = (rendezvous_score(bucket, key) + 0.5) / _TWO_64
        scored.append((-weight / math.log(u), rendezvous_score(bucket, key), bucket))
    scored.sort(reverse=True)
    return [b for _, _, b in scored]


def bounded_load_pick(
    ranked: Sequence[B], loads: Mapping[B, int], c: float = 1.25, extra: int = 1
) -> B | None:
    """First bucket in ``ranked`` whose load stays within ``c`` times the mean load.

    Consistent hashing with bounded loads (Mirrokni, Thorup, Zadimoghaddam, 2018): with the
    new item counted (``extra``), a bucket may hold at most ``ceil(c * total / n)`` items,
    so no bucket gets more than ``c`` times its fair share. Returns ``None`` for no buckets.
    ``c`` must be >= 1 (below it the cap is under the mean, and some bucket must exceed it);
    ``ValueError`` otherwise, NaN included. ``c = inf`` bounds nothing, nor does a finite
    ``c`` whose ``c * total`` is past the float range: the first bucket. When no bucket can
    take ``extra`` more within the cap (only possible for ``extra`` > 1), the first bucket.
    """
    if not c >= 1:  # also NaN
        raise ValueError(f"bounded_load_pick needs c >= 1, got {c!r}")
    if not ranked:
        return None
    total = sum(loads.get(b, 0) for b in ranked) + extra
    share = c * total / len(ranked)
    if not math.isfinite(share):  # c = inf (times a total of 0: NaN) or past the float range
        return ranked[0]
    cap = math.ceil(share)
    for bucket in ranked:
        if loads.get(bucket, 0) + extra <= cap:
            return bucket
    return ranked[0]  # none can take ``extra`` (> 1) more within the cap
