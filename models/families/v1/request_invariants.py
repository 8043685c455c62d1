"""The v1 request level's invariants (vLLM's ``KVCacheManager`` as its scheduler drives it):
the core's universal ones, plus the manager's, in its words.

The short names are the block level's where the promise is the same one seen from above
(``RC``, ``LEAK``, ``FREE``, ``CACHE``, ``HIT``, ``COMPUTED``, ``TABLE``), so one defect is
named alike at both levels; the set holds only what the request level checks (no ``HASH`` or
``LRU`` rows: its judge does not look at them). What each protects is in
``docs/CONTRACT.md``.
"""

from __future__ import annotations

from models.core.invariants import Invariant, Invariants


class ManagerInvariants(Invariants):
    """The request level's invariant set (``ManagerInvariants.RC``, ``for inv in ...``)."""

    RC = Invariant("RC", "each block's ref_cnt equals the request-table entries holding it")
    LEAK = Invariant("LEAK", "only running requests hold blocks, no block serves two places, "
                             "and the free queue holds exactly the unreferenced blocks")
    FREE = Invariant("FREE", "get_num_free_blocks counts the free queue and usage is the "
                             "fraction of usable blocks not free")
    CACHE = Invariant("CACHE", "reset_prefix_cache succeeds exactly when no request holds "
                               "blocks, evict_blocks drops exactly the named keys, and "
                               "take_events replays to the keys the pool holds")
    HIT = Invariant("HIT", "the prefix cache stats count each admitted lookup once, with its "
                           "hit, and a reset; get_num_cached_tokens is the hit a lookup gets; "
                           "estimate_cached_tokens is the prefix the request's keyed blocks "
                           "serve")
    COMPUTED = Invariant("COMPUTED", "a hit is aligned to every group's block size, leaves the "
                                     "last token to compute and covers only computed KV")
    TABLE = Invariant("TABLE", "allocate_slots gives every group a block for each position to "
                               "compute or look ahead, starting with the hit blocks")
