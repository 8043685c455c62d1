"""Refinement of fresh ids: the contract lets a target pick any hashless-free id, and only when
there is none, any least-recently-used evictable id (any evictable one without the LRU claim).

The model takes the id the target shows whenever it is such a choice. When it is not, the
shown id is judged (:func:`judge`: outside the device, still in use, a cached id of other
content, an unneeded eviction, a younger victim). A wrong victim the model holds evictable (the
CACHE and LRU findings) is still taken as the target shows it, so the rest of the step is judged
against what the target really holds and the finding is not hidden behind a knock-on one (the
id the model would have evicted instead, shown next, is no second owner); any other shown id is
replaced by a permitted one.
An id the target may never show (``may_hide``: the block can be promoted onto a cached id in
the same step) is left to the chooser, which explores every permitted victim.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from models.families.v0.invariants import Family
from models.families.v0.ops.values import Dev
from models.families.v0.pool import Pool

if TYPE_CHECKING:
    from models.families.v0.allocator_model import Model

F = Family


class ModelError(Exception):
    """The model's own bookkeeping broke (a bug here, never the target's)."""


def fresh(m: Model, dev: Dev, hint: int | None, *, may_hide: bool = False,
          content: int | None = None) -> int:
    """A fresh id for a new writer on ``dev``: hashless first, else an LRU victim."""
    pool = m.pools[dev]
    if pool.hashless:
        if hint is not None and hint in pool.hashless:
            chosen = hint
        else:
            if not may_hide:
                judge(m, pool, hint, content)
                if hint is not None and hint in pool.evictor:  # CACHE: follow the target
                    pool.evict(hint)
                    return hint
            chosen = _spare_hashless(m, pool)
        pool.take_hashless(chosen)
        return chosen
    permitted = pool.evictor.minimal() if m.caps.lru else frozenset(pool.evictor)
    if not permitted:
        raise ModelError(f"no free id on {dev.value} although the step was judged to fit")
    if hint is not None and hint in permitted:
        options = [hint]
        if may_hide:
            options += sorted(permitted - {hint})
    else:
        if not may_hide:
            judge(m, pool, hint, content)
        if may_hide:
            options = _unseen_first(m, dev, sorted(permitted))
        elif hint is not None and hint in pool.evictor:  # LRU: follow the target's victim
            options = [hint]
        else:
            options = [min(permitted)]
    victim = m.c.chooser.choose(options)
    pool.evict(victim)
    return victim


def _unseen_first(m: Model, dev: Dev, options: list[int]) -> list[int]:
    """With introspection a hidden victim cannot still be evictable afterwards (a
    ``TableAppend`` never frees an id to the evictor)."""
    evictable = m.c.after.evictable
    if evictable is None:
        return options
    gone = [o for o in options if o not in evictable.get(dev, frozenset())]
    return gone or options[:1]


def _spare_hashless(m: Model, pool: Pool) -> int:
    """Any hashless id the target does not show elsewhere in this step."""
    avoid = m.c.hint_ids
    popped: list[int] = []
    chosen = pool.hashless.pop()
    while chosen in avoid and pool.hashless:
        popped.append(chosen)
        chosen = pool.hashless.pop()
    pool.hashless.update(popped)
    pool.hashless.add(chosen)
    return chosen


def judge(m: Model, pool: Pool, hint: int | None, content: int | None) -> None:
    """The target showed ``hint`` where a fresh id was due and it is not a permitted one; flags
    only (the caller decides which id the model takes)."""
    if hint is None:
        return  # nothing shown: the snapshot comparison reports it
    c = m.c
    owner = m.pool_of(hint)
    if owner is None:
        c.flag(F.LEAK, f"id {hint} is outside every device's range", observed=hint)
    elif owner is not pool:
        fam = F.SWAP if c.swapping else F.LEAK
        c.flag(fam, f"id {hint} of {owner.dev.value} handed out on {pool.dev.value}",
               observed=hint)
    elif content is not None and pool.is_active(hint) and \
            pool.content_of.get(hint, content) != content:
        c.flag(F.CONTENT, f"a block was served by id {hint}, which holds other live content "
               "(a cache hit on different content)", observed=hint)
    elif pool.is_active(hint):
        c.flag(F.LEAK, f"id {hint} handed to a second owner while still in use",
               observed=hint, root_cause=True)
    elif hint in pool.evictor and pool.hashless:
        c.flag(F.CACHE, f"cached id {hint} evicted while hashless-free ids were available",
               expected=f"one of {len(pool.hashless)} hashless ids", observed=hint)
    elif hint in pool.evictor:
        rank = pool.evictor.rank(hint)
        best = sorted(pool.evictor.minimal())
        c.flag(F.LRU, f"evicted id {hint} (last_accessed={rank[0]}, "
               f"hashed_tokens={-rank[1]}) is not least recently used",
               expected=best, observed=hint)
