"""Public home of the rendezvous-hashing helpers (implemented in :mod:`stickypack.core.rendezvous`)."""

from stickypack.core.rendezvous import (
    bounded_load_pick,
    rendezvous_rank,
    rendezvous_score,
    weighted_rendezvous_rank,
)

__all__ = ["bounded_load_pick", "rendezvous_rank", "rendezvous_score", "weighted_rendezvous_rank"]
