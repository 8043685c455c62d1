"""The SGLang family's invariants: the core's universal ones, plus the radix cache's, in the
family's words (``docs/CONTRACT.md``, section SGLang, names what each one protects)."""

from __future__ import annotations

from models.core.invariants import Invariant, Invariants


class SGLangInvariants(Invariants):
    """The radix cache's invariant set (``SGLangInvariants.OWN``, ``for inv in ...``)."""

    MATCH = Invariant("MATCH", "match_prefix finds the longest cached page-aligned prefix of "
                               "the key in its extra_key namespace")
    CACHE = Invariant("CACHE", "the tree holds exactly the slots inserted and not evicted; "
                               "insert's prefix_len counts the tokens it already held")
    OWN = Invariant("OWN", "the tree, the running requests, the bare allocations and the "
                           "allocator's free list partition the pool: no slot is owned twice "
                           "or lost; available_size is the free count, never above capacity")
    LOCK = Invariant("LOCK", "lock counts never go below zero; a locked node and its ancestors "
                             "are never evicted; a split node keeps its locks")
    SIZE = Invariant("SIZE", "evictable_size + protected_size is the tree's tokens; each is "
                             "the tokens of the unlocked / locked nodes")
    EVICT = Invariant("EVICT", "evict takes only unlocked leaves, least recently used first, "
                               "until enough tokens are freed, and frees each slot once")
    NAMESPACE = Invariant("NAMESPACE", "keys of different extra_key namespaces never share a "
                                       "node or a slot")
    SWA = Invariant("SWA", "with a sliding window W: a matched prefix's last W tokens hold "
                           "their SWA KV; the tree, the running requests and the SWA free list "
                           "partition the SWA pool, and each full slot's SWA peer is its own; "
                           "a lock's window is never dropped; SWA eviction frees each SWA slot "
                           "once; the SWA sizes count the tree's SWA KV, the protected part "
                           "covering every window")


F = SGLangInvariants
