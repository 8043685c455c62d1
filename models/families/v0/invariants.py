"""The v0 block manager's invariants (the core's universal ones, plus the block manager's).

Each names the wrong output or wrong metric it prevents in ``docs/CONTRACT.md``.
"""

from __future__ import annotations

from models.core.invariants import Invariant, Invariants


class Family(Invariants):
    """The v0 family's invariant set (``Family.RC``, ``for inv in Family``)."""

    RC = Invariant("RC", "refcounts equal the live handles holding each id")
    LEAK = Invariant("LEAK", "every id is in exactly one state; nothing lost, duplicated or "
                             "double-owned")
    FREE = Invariant("FREE", "free counts are exact and admission checks are sound")
    CACHE = Invariant("CACHE", "content map and evictor agree; reused ids forget old content")
    CONTENT = Invariant("CONTENT", "hits and live sequences read exactly their own content")
    COW = Invariant("COW", "writes to shared blocks go to a fresh id with exactly one recorded "
                           "pair")
    SWAP = Invariant("SWAP", "swaps preserve content and map source-device ids to "
                             "destination-device ids")
    HASH = Invariant("HASH", "different content (prefix, tokens, extra keys) never shares a "
                             "cached block")
    LRU = Invariant("LRU", "the victim is the least recently used, ties to the most hashed "
                           "tokens")
    COMPUTED = Invariant("COMPUTED", "computed is reported only after marking, as a prefix")
    HIT = Invariant("HIT", "hit-rate counters count each query once")
    TABLE = Invariant("TABLE", "table ids, chains and token counts agree; forks of any length "
                               "work")
