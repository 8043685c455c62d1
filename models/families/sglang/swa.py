"""The SGLang family's FULL + SWA model: :class:`~models.families.sglang.model.TreeModel`
with a sliding window ``W`` (``TreeConfig.window``) and a second pool for the sliding-window
(SWA) KV.

A request needs the full KV of every token of its prefix and the SWA KV of only its last ``W``
tokens. Every full slot of the tree or of a running request has at most one SWA peer (the
SWA slot holding the same token's sliding-window KV, ``swa``); a tree token without one is
*tombstoned*: its full KV is cached, its SWA KV was dropped. The tree, the running requests
and the SWA free list partition the SWA pool (through their full slots' peers). A lock holds
the full KV of its whole prefix and the SWA KV of its *window*: the last ``W`` tokens, and may
protect more of its path's SWA KV (SGLang locks whole nodes): ``swa_protected_size`` lies
between the windows' tokens and the locked paths' tokens holding SWA KV.

What the target may choose is wider than at the FULL level, and the model reads each choice
from what the call freed, then holds the target to it: which tokens a full eviction drops
(any unlocked tokens, whole suffixes of the tree, least recently used or not), which SWA KV an
SWA eviction drops (any tree token outside every lock's window; a token whose full KV it
frees too is evicted whole), and how an insert treats a duplicate token the tree holds
tombstoned (keep the tree's full slot and adopt the caller's SWA slot, take the caller's full
and SWA slots for it and free the tree's full slot (never a locked one), or free the caller's
two and leave the tombstone), and whether releasing a lock's SWA part drops the SWA KV it no
longer protects at once. What it must answer is not: ``match_prefix`` returns the longest
page-aligned cached prefix whose last ``W`` tokens (all of them, for a prefix shorter than
``W``) hold SWA KV; an eviction short of what was asked leaves nothing of that kind
evictable; the free lists, the full->SWA peers of the tree's slots and the four sizes after
every call (the SWA split between evictable and protected within the bounds above).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from models.core.invariants import Violation
from models.families.sglang.invariants import SGLangInvariants as F
from models.families.sglang.model import Request, TreeModel, check_free_list
from models.families.sglang.tree import Key, Node


@dataclass
class SWAModel(TreeModel):
    """See the module docstring."""

    swa_free: set[int] = field(init=False)
    #: Each live full slot's SWA peer (tree tokens and running requests' own slots).
    swa: dict[int, int] = field(default_factory=dict)
    #: The shadow SWA memory: the KV each SWA slot holds, named as ``kv`` names it.
    swa_kv: dict[int, Key] = field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__post_init__()
        ps = self.config.page_size
        self.swa_free = {p * ps + i for p in range(1, self.config.swa_pages + 1)
                         for i in range(ps)}

    # ------------------------------------------------------------------ reads

    @property
    def window(self) -> int:
        return self.config.window

    def windows(self) -> set[int]:
        """The full slots of every lock's window (the last ``W`` tokens of its prefix)."""
        out: set[int] = set()
        for req in self.requests:
            if req is not None and req.node is not None and not req.swa_released:
                out.update(self.tree.path_slots(req.node)[-self.window:])
        return out

    def swa_sizes(self) -> tuple[int, int]:
        """(SWA evictable, SWA protected) at the least protection the contract allows: tree
        tokens with SWA KV outside and inside the windows."""
        live = [s for s in self.tree.slots() if s in self.swa]
        inside = self.windows()
        protected = sum(1 for s in live if s in inside)
        return len(live) - protected, protected

    def swa_owner(self, slot: int) -> str:
        if slot in self.swa_free:
            return "the SWA free list"
        for full, peer in self.swa.items():
            if peer == slot:
                return f"the SWA peer of full slot {full} ({self.owner(full)})"
        return "nobody"

    def usable(self, tokens: Sequence[int], extra_key: str | None) -> tuple[int, int]:
        """(the cached prefix's length, the longest page-aligned prefix of it whose window
        holds SWA KV: what ``match_prefix`` must answer)."""
        cached, slots = self.tree.peek(tokens, extra_key)
        ps, w = self.config.page_size, self.window
        for end in range(cached, 0, -ps):
            if all(s in self.swa for s in slots[max(0, end - w):end]):
                return cached, end
        return cached, 0

    # ------------------------------------------------------------------ checks

    def check_swa_match(self, tokens: Sequence[int], extra_key: str | None, length: int,
                        slots: Sequence[int], peers: Sequence[int]) -> Node:
        """``match_prefix`` answered ``length`` tokens with ``slots``, whose last ``W`` have
        the SWA peers ``peers``; the model's node (its tree split where the match ends)."""
        cached, want = self.usable(tokens, extra_key)
        if len(slots) != length:
            raise Violation(F.CONTENT, "match_prefix returns one slot per matched token",
                            expected=length, observed=list(slots))
        self.check_content(tokens, extra_key, slots, "match_prefix")
        if length % self.config.page_size or length > len(tokens):
            raise Violation(F.MATCH, "the matched length is a page-aligned prefix of the key",
                            expected=want, observed=length)
        if want < length <= cached:
            raise Violation(F.SWA, f"match_prefix returns {length} tokens whose last "
                            f"{self.window} lack SWA KV (tombstoned); the match must be cut "
                            "back to where the window holds it", expected=want,
                            observed=length)
        if length < want:
            raise Violation(F.MATCH, "match_prefix misses cached tokens whose window holds SWA "
                            "KV (lost hits)", expected=want, observed=length)
        _, held = self.tree.peek(tokens, extra_key)
        if length > cached or list(slots) != held[:length]:
            raise Violation(F.CACHE, "match_prefix returns the slots the tree was given",
                            expected=held[:want], observed=list(slots))
        self.check_peers(tokens, extra_key, slots[max(0, length - self.window):length],
                         peers, max(0, length - self.window), "match_prefix")
        node, _, _ = self.tree.match(list(tokens)[:length], extra_key)
        return node

    def check_peers(self, tokens: Sequence[int], extra_key: str | None, slots: Sequence[int],
                    peers: Sequence[int], start: int, call: str) -> None:
        """The SWA peers the target maps ``slots`` (tokens ``start`` on) to are the model's,
        and hold those tokens' SWA KV."""
        for i, (slot, peer) in enumerate(zip(slots, peers, strict=True)):
            want = self.swa.get(slot)
            if peer != want:
                raise Violation(F.SWA, f"{call}: full slot {slot} (token {start + i}) maps to "
                                f"SWA slot {peer} ({self.swa_owner(peer)})", expected=want,
                                observed=peer)
            key = (extra_key, tuple(tokens[:start + i + 1]))
            if self.swa_kv.get(peer) != key:
                raise Violation(F.SWA, f"{call}: SWA slot {peer} (token {start + i}) holds "
                                "other KV", expected=key, observed=self.swa_kv.get(peer))

    def check_swa_alloc(self, need: int, full: Sequence[int] | None, free_full: int,
                        peers: Sequence[int]) -> list[int] | None:
        """``alloc(need)`` answered ``full`` (with SWA peers ``peers``): None only when one
        pool has fewer than ``need`` free slots; else ``need`` free full slots, each with a
        distinct free SWA peer."""
        if full is None:
            if len(self.free) >= need and len(self.swa_free) >= need:
                raise Violation(F.SWA, f"alloc({need}) refused with {len(self.free)} full and "
                                f"{len(self.swa_free)} SWA slots free", expected=need,
                                observed=None)
            return None
        got = self.check_alloc(need, full)
        if got is None:  # unreachable: check_alloc returns None only for None
            return None
        peers = list(peers)
        taken = [(s, self.swa_owner(s)) for s in peers if s not in self.swa_free]
        if taken or len(set(peers)) != len(peers):
            raise Violation(F.SWA, "alloc pairs each full slot with a distinct free SWA slot",
                            expected="free SWA slots", observed=taken or peers)
        self.swa_free -= set(peers)
        self.swa.update(zip(got, peers, strict=True))
        return got

    def compute(self, tokens: Sequence[int], extra_key: str | None, start: int,
                slots: Sequence[int]) -> None:
        """The prefill writes full and SWA KV of the request's own tokens."""
        super().compute(tokens, extra_key, start, slots)
        for i, slot in enumerate(slots):
            self.swa_kv[self.swa[slot]] = (extra_key, tuple(tokens[:start + i + 1]))

    def _free_full(self, slot: int) -> None:
        self.free.add(slot)
        self.kv.pop(slot, None)

    def _free_swa(self, full: int) -> None:
        peer = self.swa.pop(full, None)
        if peer is not None:
            self.swa_free.add(peer)
            self.swa_kv.pop(peer, None)

    def check_swa_insert(self, req: Request, prev: int, prefix_len: int,
                         freed: Counter[int], freed_swa: Counter[int]) -> None:
        """``insert`` of ``req`` answered ``prefix_len`` and freed ``freed`` / ``freed_swa``:
        the tree adopts the tail; a duplicate of a token with SWA KV is freed whole (both
        slots); a duplicate of a tombstoned token goes one of the three ways of the module
        docstring, read from what was freed."""
        _, held = self.tree.peek(req.tokens, req.extra_key)
        locked = self.tree.locked_slots()
        done = self.tree.insert(req.tokens, req.slots, req.extra_key, prev)
        if prefix_len != done.prefix_len:
            raise Violation(F.CACHE, "insert's prefix_len counts the tokens the tree held",
                            expected=done.prefix_len, observed=prefix_len)
        want, want_swa = Counter[int](), Counter[int]()
        for i in range(prev, done.prefix_len):
            mine, tree = req.slots[i], held[i]
            if mine == tree:
                continue
            peer = self.swa.get(mine)
            if tree in self.swa or peer is None or (mine in freed and peer in freed_swa):
                want[mine] += 1  # freed whole; the tree keeps its token as it was
                if peer is not None:
                    want_swa[peer] += 1
                self._free_full(mine)
                self._free_swa(mine)
            elif tree in freed:  # the tree takes the caller's two slots
                if tree in locked:
                    raise Violation(F.LOCK, f"insert frees full slot {tree} of a locked node "
                                    "(to take the caller's slot for its tombstoned token)",
                                    observed=tree)
                want[tree] += 1
                self.tree.replace_slot(tree, mine)
                self._free_full(tree)
            else:  # the tree keeps its full slot and adopts the caller's SWA KV
                want[mine] += 1
                self.swa[tree] = self.swa.pop(mine)
                self._free_full(mine)
        if freed != want or freed_swa != want_swa:
            raise Violation(F.SWA if freed == want else F.OWN,
                            "insert frees exactly the caller's duplicates (full and SWA)",
                            expected=(sorted(want.elements()), sorted(want_swa.elements())),
                            observed=(sorted(freed.elements()), sorted(freed_swa.elements())))

    def check_swa_evict(self, num_tokens: int, swa_num_tokens: int, evicted: int,
                        swa_evicted: int, freed: Counter[int], freed_swa: Counter[int]) -> None:
        """``evict(num_tokens, swa_num_tokens)`` reported ``evicted`` / ``swa_evicted`` and
        freed ``freed`` / ``freed_swa`` (multisets)."""
        held = self.tree.slots()
        twice = sorted(s for c in (freed, freed_swa) for s, n in c.items() if n > 1)
        if twice:
            raise Violation(F.EVICT, "evict frees each slot once", observed=twice)
        foreign = sorted((s, self.owner(s)) for s in freed if s not in held)
        if foreign:
            raise Violation(F.EVICT, "evict frees only slots the tree holds", observed=foreign)
        peers = {self.swa[s]: s for s in held if s in self.swa}
        foreign = sorted((s, self.swa_owner(s)) for s in freed_swa if s not in peers)
        if foreign:
            raise Violation(F.SWA, "evict frees only SWA slots of the tree's tokens",
                            observed=foreign)
        windows = self.windows()
        hit = sorted(peers[s] for s in freed_swa if peers[s] in windows)
        if hit:
            raise Violation(F.LOCK, "evict drops the SWA KV of a lock's window",
                            observed=hit)
        why = self.tree.remove(set(freed))
        if why is not None:
            raise Violation(F.LOCK if "locked" in why else F.EVICT,
                            "evict drops whole unlocked suffixes of the tree", observed=why)
        lost = sorted(self.swa[s] for s in freed if s in self.swa and
                      self.swa[s] not in freed_swa)
        if lost:
            raise Violation(F.SWA, "evicting a token frees its SWA KV too", observed=lost)
        for slot in freed:
            self._free_full(slot)
            self._free_swa(slot)
        for peer in freed_swa:
            if peer not in self.swa_free:
                self._free_swa(peers[peer])
        if (evicted, swa_evicted) != (len(freed), len(freed_swa)):
            raise Violation(F.EVICT, "evict reports the full and SWA tokens it freed",
                            expected=(len(freed), len(freed_swa)),
                            observed=(evicted, swa_evicted))
        evictable, _ = self.tree.sizes()
        if evicted < num_tokens and evictable:
            raise Violation(F.EVICT, f"evict({num_tokens}) stops with {evictable} unlocked "
                            "tokens left", expected=num_tokens, observed=evicted)

    def check_swa_release(self, req: Request, freed: Counter[int],
                          freed_swa: Counter[int]) -> None:
        """``req`` released its lock's SWA part, freeing ``freed`` / ``freed_swa``: no full
        slot; SWA KV of tree tokens outside every window left (a cache may drop it then, as
        0.5.18's ``dec_swa_lock_only`` does for a leaf), each once."""
        req.swa_released = True
        if freed:
            raise Violation(F.OWN, "releasing a lock's SWA part frees no full slot",
                            observed=sorted(freed.elements()))
        peers = {self.swa[s]: s for s in self.tree.slots() if s in self.swa}
        windows = self.windows()
        bad = sorted((p, self.swa_owner(p)) for p, n in freed_swa.items()
                     if n > 1 or p not in peers or peers[p] in windows)
        if bad:
            raise Violation(F.SWA, "releasing a lock's SWA part frees only SWA KV of tree "
                            "tokens outside every window, once", observed=bad)
        for peer in freed_swa:
            self._free_swa(peers[peer])

    def check_swa_pool(self, free: Counter[int], available: int, sizes: tuple[int, int],
                       slots: Sequence[int], peers: Sequence[int]) -> None:
        """After every operation: the SWA free list is the model's, once each; the tree's
        slots ``slots`` map to ``peers`` (0: none) as the model's do; the SWA sizes."""
        check_free_list(F.SWA, "SWA slot", "an SWA slot", "SWA free list", free,
                        self.swa_free, self.swa_owner)
        if available != len(self.swa_free):
            raise Violation(F.SWA, "swa_available_size counts the free SWA slots",
                            expected=len(self.swa_free), observed=available)
        wrong = [(s, p, self.swa.get(s, 0)) for s, p in zip(slots, peers, strict=True)
                 if p != self.swa.get(s, 0)]
        if wrong:
            raise Violation(F.SWA, "the tree's full slots map to their own SWA peers (0: "
                            "tombstoned)", expected=[w[2] for w in wrong],
                            observed=[(w[0], w[1]) for w in wrong])
        live = {s for s in self.tree.slots() if s in self.swa}
        windows = self.windows()
        if windows - live:
            raise Violation(F.LOCK, "a lock's window keeps its SWA KV",
                            observed=sorted(windows - live))
        locked = live & self.tree.locked_slots()
        evictable, protected = sizes
        if evictable + protected != len(live) or not len(windows) <= protected <= len(locked):
            raise Violation(F.SWA, "swa_evictable_size + swa_protected_size are the tree's "
                            "tokens holding SWA KV; the protected ones cover every lock's "
                            "window and lie on locked paths",
                            expected=(len(live), f"{len(windows)}..{len(locked)} protected"),
                            observed=tuple(sizes))
