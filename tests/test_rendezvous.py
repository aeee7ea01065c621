"""rendezvous_rank against BinderHub's formula and BinderHub's three rendezvous properties."""

from __future__ import annotations

import math
import random
from collections import Counter
from hashlib import blake2b

import pytest

from stickypack.rendezvous import (
    bounded_load_pick,
    rendezvous_rank,
    weighted_rendezvous_rank,
)


def binderhub_formula(buckets, key):
    """The formula REFERENCE.md states for binderhub.utils.rendezvous_rank, written out."""
    scored = []
    for bucket in buckets:
        digest = blake2b(f"{key}-{bucket}".encode(), digest_size=8).digest()
        scored.append((int.from_bytes(digest, "big"), bucket))
    return [b for _, b in sorted(scored, reverse=True)]


def test_matches_binderhub_on_10000_random_cases():
    rng = random.Random(20261202)
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789-./:"
    for _ in range(10_000):
        n = rng.randint(0, 30)
        # dict.fromkeys: distinct, in the order drawn (a set's order would follow PYTHONHASHSEED)
        buckets = list(dict.fromkeys("".join(rng.choices(alphabet, k=rng.randint(1, 40))) for _ in range(n)))
        key = "https://github.com/" + "".join(rng.choices(alphabet, k=rng.randint(1, 60)))
        assert rendezvous_rank(buckets, key) == binderhub_formula(buckets, key)


def test_known_order_is_stable():
    # Pinned: the order binderhub.utils.rendezvous_rank gives, computed outside this project
    # with its own expression, blake2b(b"%s-%s" % (key, bucket), digest_size=8) read big-endian
    # (scores 0xd0da2bd4..., 0x9552625b..., 0x75b09c41..., 0x3d1c5b45..., 0x2cba5411...).
    # Any change of hash input, digest size or byte order changes it.
    nodes = [f"node-{i}" for i in range(5)]
    ranked = rendezvous_rank(nodes, "https://github.com/binder-examples/requirements")
    assert ranked == ["node-1", "node-3", "node-2", "node-4", "node-0"]


def test_removing_a_loser_keeps_the_winner():
    keys = [f"repo-{i}" for i in range(500)]
    buckets = [f"node-{i}" for i in range(10)]
    for key in keys:
        ranked = rendezvous_rank(buckets, key)
        winner = ranked[0]
        for loser in ranked[1:]:
            fewer = [b for b in buckets if b != loser]
            assert rendezvous_rank(fewer, key)[0] == winner


def test_order_independent_of_other_buckets():
    base = [f"node-{i}" for i in range(80)]
    more = base + [f"extra-{i}" for i in range(20)]
    for key in ("a", "https://github.com/x/y", "42"):
        ranked_more = [b for b in rendezvous_rank(more, key) if b in set(base)]
        assert ranked_more == rendezvous_rank(base, key)


def test_redistribution_when_a_bucket_is_added():
    keys = [f"key-{i}" for i in range(3000)]
    before = {k: rendezvous_rank(["b1", "b2"], k)[0] for k in keys}
    after = {k: rendezvous_rank(["b1", "b2", "b3"], k)[0] for k in keys}
    moved = [k for k in keys if before[k] != after[k]]
    assert 0.31 <= len(moved) / len(keys) <= 0.35
    assert all(after[k] == "b3" for k in moved)
    taken_from = Counter(before[k] for k in moved)
    assert abs(taken_from["b1"] - taken_from["b2"]) < 0.15 * len(moved)


def test_weighted_with_equal_weights_is_the_plain_order():
    nodes = [f"n{i}" for i in range(12)]
    for key in range(200):
        assert weighted_rendezvous_rank(dict.fromkeys(nodes, 1.0), key) == rendezvous_rank(nodes, key)


def test_weighted_shares_follow_weights():
    weights = {"big": 3.0, "small": 1.0}
    wins = Counter(weighted_rendezvous_rank(weights, f"k{i}")[0] for i in range(8000))
    assert 0.72 <= wins["big"] / 8000 <= 0.78


def test_weighted_drops_zero_weights():
    assert weighted_rendezvous_rank({"a": 0.0, "b": 1.0}, "k") == ["b"]


@pytest.mark.parametrize(
    ("loads", "expected"),
    [
        ({"a": 0, "b": 0, "c": 0}, "a"),  # cap ceil(1.25 * 1 / 3) = 1: a takes it
        ({"a": 5, "b": 0, "c": 0}, "b"),  # cap ceil(1.25 * 6 / 3) = 3: a would hold 6
        ({"a": 2, "b": 0, "c": 0}, "b"),  # cap ceil(1.25 * 3 / 3) = 2: a would hold 3
        ({"a": 1, "b": 0, "c": 0}, "b"),  # cap ceil(1.25 * 2 / 3) = 1: a would hold 2
        ({"a": 2, "b": 2, "c": 0}, "a"),  # the new item counts: cap ceil(1.25 * 5 / 3) = 3, not 2
    ],
)
def test_bounded_load_pick(loads, expected):
    assert bounded_load_pick(["a", "b", "c"], loads, c=1.25) == expected


def test_bounded_load_never_exceeds_bound():
    rng = random.Random(1)
    nodes = [f"n{i}" for i in range(8)]
    loads = dict.fromkeys(nodes, 0)
    for i in range(2000):
        key = "hot" if rng.random() < 0.6 else f"repo{i}"
        pick = bounded_load_pick(rendezvous_rank(nodes, key), loads, c=1.25)
        loads[pick] += 1
        assert max(loads.values()) <= math.ceil(1.25 * sum(loads.values()) / len(nodes))
    # the hot key still lands on its own top node as often as the bound allows
    assert loads[rendezvous_rank(nodes, "hot")[0]] == max(loads.values())
    assert bounded_load_pick([], {}) is None
    # c below 1 caps every bucket under the mean: once it silently returned the first bucket
    with pytest.raises(ValueError, match="c >= 1"):
        bounded_load_pick(["a", "b"], {"a": 1, "b": 1}, c=0.5)
    # more than one new item may fit nowhere within the cap: the first bucket takes them
    assert bounded_load_pick(["a", "b", "c"], {"a": 5, "b": 5, "c": 5}, c=1, extra=3) == "a"


@pytest.mark.parametrize(
    ("c", "loads", "extra"),
    [
        (math.inf, {"a": 5, "b": 0, "c": 0}, 1),  # c = 1.25 would pick b (cap 3)
        (1e308, {"a": 5, "b": 0, "c": 0}, 1),  # total 6: 1e308 * 6 is past the float range
        (math.inf, {"a": 9, "b": 0, "c": 9}, 3),  # extra > 1; c = 1 would pick b (cap 7)
        (1e308, {"a": 9, "b": 0, "c": 9}, 3),
        (math.inf, {"a": 0, "b": 0, "c": 0}, 0),  # total 0: inf * 0 would be NaN
    ],
)
def test_bounded_load_pick_without_a_bound_picks_the_first_bucket(c: float, loads: dict, extra: int) -> None:
    """A cap of infinity (or of c * total past the float range) bounds nothing: the first
    ranked bucket takes the item whatever its load (once an OverflowError from ceil)."""
    assert bounded_load_pick(["a", "b", "c"], loads, c=c, extra=extra) == "a"
    assert bounded_load_pick(["c", "b", "a"], loads, c=c, extra=extra) == "c"


@pytest.mark.parametrize("ranked", [["a", "b"], []])
def test_bounded_load_pick_refuses_a_nan_c(ranked: list[str]) -> None:
    """NaN compares false with everything, so ``c < 1`` would let it through (to a
    ValueError from ceil that names no argument, or to None for no buckets)."""
    with pytest.raises(ValueError, match=r"bounded_load_pick needs c >= 1, got nan"):
        bounded_load_pick(ranked, {"a": 1, "b": 1}, c=math.nan)
