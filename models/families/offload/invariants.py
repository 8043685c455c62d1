"""The offload tier's invariants: the core's universal ones and the tier's own, in the words of
the connector that drives it (``docs/CONTRACT.md``, "The offload tier")."""

from __future__ import annotations

from models.core.invariants import Invariant, Invariants


class OffloadInvariants(Invariants):
    """The offload family's set (``OffloadInvariants.HIT``, ``for inv in OffloadInvariants``)."""

    HIT = Invariant("HIT", "a key reported HIT is loadable and its chunk holds exactly the "
                           "content stored under it until its load completes; lookup answers "
                           "HIT, HIT_PENDING or MISS as the key is stored, being written or "
                           "absent")
    PINNED = Invariant("PINNED", "no chunk is evicted or handed to a new store while its write "
                                 "is pending, while a load reads it (also a transfer in flight "
                                 "at a reset, until the workers flushed), nor while its key "
                                 "is in the offer being stored")
    ACCOUNT = Invariant("ACCOUNT", "every chunk is free, pending or stored, exactly once: a "
                                   "store is refused exactly when not enough chunks can be "
                                   "freed, nothing leaks across failed stores, loads, request "
                                   "finish and reset")
    RESET = Invariant("RESET", "a reset serves nothing stored before it")
    ADMIT = Invariant("ADMIT", "store_threshold admits a key on the offer of its "
                               "store_threshold-th distinct request, and every admitted key "
                               "not resident is stored")
    ORDER = Invariant("ORDER", "eviction takes the policy's victims: LRU the least recently "
                               "used (per-request recency); ARC T1 while it is at or above its "
                               "adaptive target, else T2, ghosts within capacity")
    EVENTS = Invariant("EVENTS", "the events, replayed in order, rebuild exactly the keys the "
                                 "tier serves")


F = OffloadInvariants
