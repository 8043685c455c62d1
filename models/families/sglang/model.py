"""The SGLang family's model: the radix tree a correct cache holds (:mod:`.tree`), who owns
each KV slot, and a shadow KV memory; each ``check_*`` takes what the target answered to one
call, raises a :class:`~models.core.invariants.Violation` naming the broken invariant, and
otherwise applies the call to the model.

Ownership: every slot of the pool is owned by exactly one of the tree, a running request (the
slots it allocated and computed, until its insert hands them over), a hold (a bare ``alloc``
at the allocator level, until it frees them) and the allocator's free list. Shadow KV
memory: ``kv[slot]`` is the KV the slot holds, named by the token prefix that
computed it and its ``extra_key`` (``(extra_key, tokens[:i + 1])`` for the ``i``-th token). A
request writes it for every slot it allocated, when it allocates them (its prefill computes
them); a slot freed (a duplicate insert frees, an evicted one) holds no KV any more.

What the target may choose is open: which free slots ``alloc`` hands out. What it must answer
is not: match lengths and slots, insert's ``prefix_len``, which slots eviction frees (the
least recently used unlocked leaves), the sizes, and the free list after every call.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from models.core.invariants import Invariant, Violation
from models.families.sglang.invariants import SGLangInvariants as F
from models.families.sglang.ops import TreeConfig
from models.families.sglang.tree import Inserted, Key, ModelTree, Node


def check_free_list(family: Invariant, slot: str, a_slot: str, free_list: str, free: Counter[int],
                    unowned: set[int], owner: Callable[[int], object]) -> None:
    """A pool's free list (``free``, slot -> times listed) is exactly the slots nobody owns
    (``unowned``), once each: a slot listed twice is handed out twice, an owned one listed is
    handed to a second owner (one request reads another's KV), an unowned one missing is lost
    capacity. ``slot`` (with its article, ``a_slot``) and ``free_list`` name them in the
    messages."""
    twice = sorted(s for s, n in free.items() if n > 1)
    if twice:
        raise Violation(family, f"no {slot} is on the {free_list} twice", observed=twice)
    owned = sorted((s, owner(s)) for s in free if s not in unowned)
    if owned:
        raise Violation(family, f"{a_slot} on the {free_list} is owned", observed=owned)
    lost = sorted(unowned - set(free))
    if lost:
        raise Violation(family, f"every {slot} nobody owns is on the {free_list} (lost "
                        f"{slot}s)", observed=lost)


class OutOfContract(Exception):
    """A program the model cannot judge: it finishes or unlocks a request that is not in that
    state (never made, refused, finished, not held)."""


@dataclass
class Request:
    """A scheduled request: its tokens, what it matched, its slots (the matched tree slots,
    then its own), and the node it holds locked (None: none)."""

    tokens: tuple[int, ...]
    extra_key: str | None
    matched: int
    slots: list[int]
    node: Node | None
    state: str = "running"  # running -> held | done
    #: FULL + SWA: the lock's SWA part was released early (its window is unprotected).
    swa_released: bool = False


@dataclass
class TreeModel:
    """See the module docstring."""

    config: TreeConfig
    tree: ModelTree = field(init=False)
    free: set[int] = field(init=False)
    kv: dict[int, Key] = field(default_factory=dict)
    requests: list[Request | None] = field(default_factory=list)
    #: Bare allocations (``alloc`` outside a request, the allocator level): each hold's KV
    #: row (a slot per token; ``alloc_extend`` / ``alloc_decode`` grow it, its last page may
    #: be partly used but is held whole) until it frees it (None: freed); numbered by grant.
    holds: list[list[int] | None] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.tree = ModelTree(self.config.page_size)
        ps = self.config.page_size
        # Slot 0 (page 0) is the padding slot, never handed out.
        self.free = {p * ps + i for p in range(1, self.config.pages + 1) for i in range(ps)}

    # ------------------------------------------------------------------ who owns what

    def owner(self, slot: int) -> str:
        if slot in self.free:
            return "the free list"
        if slot in self.tree.slots():
            return "the tree"
        for i, req in enumerate(self.requests):
            if req is not None and req.state == "running" and \
                    slot in self.pages_of(req.slots[req.matched:]):
                return f"running request {i}"
        for i, held in enumerate(self.holds):
            if held is not None and slot in self.pages_of(held):
                return f"hold {i}"
        return "nobody"

    def pages_of(self, row: Sequence[int]) -> set[int]:
        """Every slot of the pages ``row`` uses (a partly used page is held whole)."""
        ps = self.config.page_size
        return {page * ps + i for page in {s // ps for s in row} for i in range(ps)}

    def hold(self, hold: int) -> list[int]:
        """The slots of live hold ``hold`` (out of contract: never granted, or freed)."""
        if not 0 <= hold < len(self.holds):
            raise OutOfContract(f"hold {hold} was never granted ({len(self.holds)} were)")
        found = self.holds[hold]
        if found is None:
            raise OutOfContract(f"hold {hold} was freed already")
        return found

    def release(self, hold: int) -> list[int]:
        """Hold ``hold`` frees its slots: they go back to the free list, holding no KV."""
        slots = self.hold(hold)
        self.holds[hold] = None
        for slot in self.pages_of(slots):
            self.free.add(slot)
            self.kv.pop(slot, None)
        return slots

    def check_extend(self, hold: int, tokens: int, got: Sequence[int] | None) -> None:
        """``alloc_extend`` of hold ``hold``'s row by ``tokens`` tokens (``alloc_decode``: 1)
        answered ``got``: the rest of the row's last page first (the slots after its last
        slot), then whole free pages, a token's slot at its offset in its page; None only
        when fewer pages are free than needed. The new pages become the hold's."""
        row = self.hold(hold)
        if got is None:
            self.check_row_extend(row, tokens, None)
            return
        row.extend(self.check_row_extend(row, tokens, got))

    def check_row_extend(self, row: Sequence[int], tokens: int,
                         got: Sequence[int] | None) -> list[int]:
        """A KV row (``row``: a slot per token) grown by ``tokens`` tokens answered ``got``
        (see :meth:`check_extend`); the new pages leave the free list; the new slots."""
        ps = self.config.page_size
        prefix, seq = len(row), len(row) + tokens
        need = -(-seq // ps) - -(-prefix // ps)
        free_pages = {s // ps for s in self.free}
        if got is None:
            if len(free_pages) >= need:
                raise Violation(F.OWN, f"alloc_extend refused {need} page(s) with "
                                f"{len(free_pages)} free", expected=need, observed=None)
            return []
        got = list(got)
        if len(got) != tokens:
            raise Violation(F.OWN, "alloc_extend hands out a slot per new token",
                            expected=tokens, observed=got)
        new: list[int] = []
        for pos, slot in zip(range(prefix, seq), got, strict=True):
            if pos % ps:  # the page of the token before
                before = row[-1] if pos == prefix else got[pos - prefix - 1]
                if slot != before + 1:
                    raise Violation(F.OWN, f"alloc_extend: token {pos} continues the page of "
                                    "the token before", expected=before + 1, observed=got)
            elif slot % ps or slot // ps not in free_pages or slot // ps in new:
                raise Violation(F.OWN, f"alloc_extend: token {pos} starts a whole free page "
                                "of its own", expected="a free page's first slot",
                                observed=(slot, self.owner(slot)))
            else:
                new.append(slot // ps)
        for page in new:
            self.free -= {page * ps + i for i in range(ps)}
        return got

    def check_extend_batch(self, holds: Sequence[int], tokens: Sequence[int],
                           got: Sequence[int] | None) -> None:
        """One ``alloc_extend`` (or ``alloc_decode``) for several holds at once, hold
        ``holds[i]`` by ``tokens[i]`` tokens, answered ``got``: None only when fewer pages
        are free than the whole batch needs; else each hold's slots in turn, in hold order,
        each as :meth:`check_extend` demands (no page handed to two of them)."""
        rows = [self.hold(h) for h in holds]
        ps = self.config.page_size
        need = sum(-(-(len(row) + t) // ps) - -(-len(row) // ps)
                   for row, t in zip(rows, tokens, strict=True))
        if got is None:
            free_pages = len({s // ps for s in self.free})
            if free_pages >= need:
                raise Violation(F.OWN, f"alloc_extend refused a batch of {len(holds)} "
                                f"needing {need} page(s) with {free_pages} free",
                                expected=need, observed=None)
            return
        got = list(got)
        if len(got) != sum(tokens):
            raise Violation(F.OWN, "alloc_extend hands out a slot per new token of the batch",
                            expected=sum(tokens), observed=got)
        at = 0
        for hold, t in zip(holds, tokens, strict=True):
            self.check_extend(hold, t, got[at:at + t])
            at += t

    def request(self, req: int, state: str) -> Request:
        if not 0 <= req < len(self.requests):
            raise OutOfContract(f"request {req} was never made ({len(self.requests)} were)")
        found = self.requests[req]
        if found is None:
            raise OutOfContract(f"request {req} was refused (no slots)")
        if found.state != state:
            raise OutOfContract(f"request {req} is {found.state}, not {state}")
        return found

    # ------------------------------------------------------------------ checks

    def check_match(self, tokens: Sequence[int], extra_key: str | None, length: int,
                    slots: Sequence[int]) -> Node:
        """``match_prefix`` answered ``length`` tokens with ``slots``; the model's node."""
        want_len, want_slots = self.tree.peek(tokens, extra_key)
        if len(slots) != length:
            raise Violation(F.CONTENT, "match_prefix returns one slot per matched token",
                            expected=length, observed=list(slots))
        self.check_content(tokens, extra_key, slots, "match_prefix")
        if length % self.config.page_size or length > len(tokens):
            raise Violation(F.MATCH, "the matched length is a page-aligned prefix of the key",
                            expected=want_len, observed=length)
        if length < want_len:
            raise Violation(F.MATCH, "match_prefix misses cached tokens (lost hits)",
                            expected=want_len, observed=length)
        if length > want_len or list(slots) != want_slots[:length]:
            raise Violation(F.CACHE, "match_prefix returns the slots the tree was given",
                            expected=want_slots, observed=list(slots))
        node, _, _ = self.tree.match(tokens, extra_key)
        return node

    def check_content(self, tokens: Sequence[int], extra_key: str | None,
                      slots: Sequence[int], call: str) -> None:
        """Each slot holds the KV of its token's prefix in ``extra_key``'s namespace."""
        for i, slot in enumerate(slots):
            want = (extra_key, tuple(tokens[:i + 1]))
            held = self.kv.get(slot)
            if held == want:
                continue
            if held is not None and held[1] == want[1]:
                raise Violation(F.NAMESPACE, f"{call} serves slot {slot} of another extra_key "
                                f"namespace for token {i}", expected=want, observed=held)
            raise Violation(F.CONTENT, f"{call}: slot {slot} (token {i}) holds other KV "
                            f"(owned by {self.owner(slot)})", expected=want, observed=held)

    def check_alloc(self, need: int, got: Sequence[int] | None) -> list[int] | None:
        """``alloc(need)`` answered ``got``: None only when fewer slots are free; else
        ``need`` distinct free slots, whole pages. The slots become the caller's."""
        if got is None:
            if len(self.free) >= need:
                raise Violation(F.OWN, f"alloc({need}) refused with {len(self.free)} slots "
                                "free", expected=need, observed=None)
            return None
        got = list(got)
        if len(got) != need or len(set(got)) != need:
            raise Violation(F.OWN, f"alloc({need}) hands out {need} distinct slots",
                            expected=need, observed=got)
        taken = [(s, self.owner(s)) for s in got if s not in self.free]
        if taken:
            raise Violation(F.OWN, "alloc hands out only free slots",
                            expected="free slots", observed=taken)
        ps = self.config.page_size
        for i in range(0, need, ps):
            page = got[i:i + ps]
            if page[0] % ps or page != list(range(page[0], page[0] + ps)):
                raise Violation(F.OWN, "alloc hands out whole pages", observed=got)
        self.free -= set(got)
        return got

    def compute(self, tokens: Sequence[int], extra_key: str | None, start: int,
                slots: Sequence[int]) -> None:
        """The request's prefill writes its KV into its own slots (tokens ``start`` on)."""
        for i, slot in enumerate(slots):
            self.kv[slot] = (extra_key, tuple(tokens[:start + i + 1]))

    def check_insert(self, req: Request, prev_prefix_len: int, prefix_len: int) -> Inserted:
        """``insert`` of ``req``'s tokens answered ``prefix_len``; applies it: the tree adopts
        the request's slots past what it held, the duplicates go back to the free list."""
        done = self.tree.insert(req.tokens, req.slots, req.extra_key, prev_prefix_len)
        if prefix_len != done.prefix_len:
            raise Violation(F.CACHE, "insert's prefix_len counts the tokens the tree held",
                            expected=done.prefix_len, observed=prefix_len)
        for slot in done.duplicates:
            self.free.add(slot)
            self.kv.pop(slot, None)
        return done

    def check_evict(self, num_tokens: int, evicted: int, freed: Counter[int]) -> None:
        """``evict(num_tokens)`` reported ``evicted`` tokens and put ``freed`` (a multiset)
        on the free list."""
        locked = self.tree.locked_slots()
        held = self.tree.slots()
        twice = sorted(s for s, n in freed.items() if n > 1)
        if twice:
            raise Violation(F.EVICT, "evict frees each slot once", observed=twice)
        if set(freed) & locked:
            raise Violation(F.LOCK, "evict frees slots of locked nodes",
                            observed=sorted(set(freed) & locked))
        foreign = sorted((s, self.owner(s)) for s in freed if s not in held)
        if foreign:
            raise Violation(F.EVICT, "evict frees only slots the tree holds", observed=foreign)
        want_tokens, gone = self.tree.evict(num_tokens)
        want = sorted(s for node in gone for s in node.value)
        if sorted(freed) != want:
            raise Violation(F.EVICT, f"evict({num_tokens}) frees the least recently used "
                            "unlocked leaves", expected=want, observed=sorted(freed))
        if evicted != want_tokens:
            raise Violation(F.EVICT, "evict reports the tokens it evicted",
                            expected=want_tokens, observed=evicted)
        for slot in want:
            self.free.add(slot)
            self.kv.pop(slot, None)

    def check_pool(self, free: Counter[int], available: int,
                   sizes: tuple[int, int, int]) -> None:
        """After every operation: the free list is exactly the model's, once each; the sizes
        are the tree's."""
        check_free_list(F.OWN, "slot", "a slot", "free list", free, self.free, self.owner)
        capacity = self.config.size
        if available > capacity:
            raise Violation(F.OWN, "available_size never exceeds the capacity",
                            expected=capacity, observed=available)
        if available != len(self.free):
            raise Violation(F.OWN, "available_size counts the free slots",
                            expected=len(self.free), observed=available)
        evictable, protected = self.tree.sizes()
        want = (evictable, protected, evictable + protected)
        if tuple(sizes) != want:
            raise Violation(F.SIZE, "(evictable_size, protected_size, total_size) are the "
                            "tokens of the unlocked and locked nodes, and their sum",
                            expected=want, observed=tuple(sizes))
