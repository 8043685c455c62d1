"""Observation: what the runner reads of the target besides plan results, type-checked: free
counts, drained copy-on-writes, a block's and a table's state, and the private state the
upstream family shares (content map, evictor ids, refcounts; hit-rate windows) for
introspection. Nothing here changes the target.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import suppress
from itertools import compress
from operator import attrgetter
from typing import Any, NamedTuple

from models.families.v0.hit_window import FIELDS as WINDOW_FIELDS
from models.families.v0.operations import DEVICES, Dev, Tokens
from properties.families.v0.adapter.base import AdapterCore
from properties.families.v0.adapter.values import (
    checked_int,
    checked_ints,
    checked_opt_int,
    checked_pairs,
    wrong_type,
)

#: A ``metric_data``'s hit-rate window fields, in order (AttributeError if one is missing).
_window_fields = attrgetter(*WINDOW_FIELDS)

#: A tracker's ``active`` flag.
_active = attrgetter("active")

#: The item types of a list of ints and of optional ints (one set test per list).
_INT = frozenset({int})
_OPT_INT = frozenset({int, type(None)})


class Introspection(NamedTuple):
    """What :meth:`ObservationReads.introspect` reads of the family's private state."""

    cached: dict[Dev, frozenset[int]]  # content-map ids per device
    evictable: dict[Dev, frozenset[int]]  # evictor ids per device
    refcounts: dict[int, int]  # every id's
    #: per device, each evictable id's (``last_accessed``, ``num_hashed_tokens``) as the
    #: evictor's metadata shows them; None where an entry shows no such fields
    ranks: dict[Dev, dict[int, tuple[object, object]]] | None
    #: per device, each active id's ``last_accessed`` as its tracker shows it; None where the
    #: allocator keeps no ``_block_tracker`` of such trackers
    access: dict[Dev, dict[int, object]] | None


def _int_set(values: Any) -> frozenset[int]:
    """``values`` as a frozenset of ints (each converted unless all are plain ints)."""
    shown = frozenset(values)
    return shown if set(map(type, shown)) <= _INT else frozenset(int(v) for v in shown)


class ObservationReads(AdapterCore):
    """The runner's reads of the target's state."""

    def free_count(self, dev: Dev) -> int:
        count = self.alloc.get_num_free_blocks(self.member(dev))
        return count if type(count) is int else checked_int(
            count, f"alloc.get_num_free_blocks(Device.{dev.name})")

    def drain_cows(self) -> tuple[tuple[int, int], ...]:
        """``clear_copy_on_writes()``, as the engine calls it after every scheduling step."""
        raw = self.alloc.clear_copy_on_writes()
        self.last_drained = raw  # the runner checks it is not changed afterwards
        pairs = checked_pairs(raw, "alloc.clear_copy_on_writes")
        return tuple((s, d) for s, d in pairs)

    def block_state(self, obj: Any) -> tuple[int | None, Tokens, int | None]:
        """(id, tokens, content hash) of a block object, type-checked."""
        bid = obj.block_id
        if bid is not None and type(bid) is not int:
            bid = checked_opt_int(bid, "block.block_id")
        toks = obj.token_ids
        if type(toks) is not list or not set(map(type, toks)) <= _INT:
            toks = checked_ints(toks, "block.token_ids")
        chash = obj.content_hash
        if chash is not None and type(chash) is not int:
            chash = checked_opt_int(chash, "block.content_hash")
        return bid, tuple(toks), chash

    def block_id(self, obj: Any) -> int | None:
        """A block object's ``block_id``, type-checked (nothing else of it is read)."""
        bid = obj.block_id
        return bid if bid is None or type(bid) is int else checked_opt_int(bid, "block.block_id")

    def block_total(self, obj: Any) -> int:
        """A prefix-caching block object's ``num_tokens_total``, type-checked."""
        total = obj.num_tokens_total
        return total if type(total) is int else checked_int(total, "block.num_tokens_total")

    def table_totals(self, obj: Any) -> tuple[int | None, ...] | None:
        """Each block's ``num_tokens_total`` of a block table (already read by
        :meth:`table_state`), type-checked; ``None`` for a block that does not define it
        (``NotImplementedError``, as the null block, docs/API.md), and ``None`` for the whole table
        when a block's class has no such attribute (a target that does not expose it)."""
        shown: list[int | None] = []
        for block in obj.blocks:
            if getattr(type(block), "num_tokens_total", None) is None:
                return None
            try:
                total = block.num_tokens_total
            except NotImplementedError:
                shown.append(None)
                continue
            shown.append(total if type(total) is int
                         else checked_int(total, "BlockTable.blocks[i].num_tokens_total"))
        return tuple(shown)

    def block_extra(self, obj: Any) -> int | None:
        """A block object's ``extra_hash`` property (vLLM generation), type-checked."""
        return checked_opt_int(obj.extra_hash, "block.extra_hash")

    def table_state(self, obj: Any) -> tuple[tuple[int | None, ...], Tokens]:
        """(ids, tokens) of a block table; ``blocks``, ``physical_block_ids`` and the token
        list are type-checked (``physical_block_ids`` is the table's own list, see docs/API.md)."""
        blocks = obj.blocks
        if type(blocks) is not list:
            raise wrong_type("BlockTable.blocks", "list of blocks", blocks)
        ids = tuple(b.block_id for b in blocks)
        if not set(map(type, ids)) <= _OPT_INT:
            for i in ids:
                checked_opt_int(i, "BlockTable.blocks[i].block_id")
        physical = obj.physical_block_ids
        if type(physical) is not list or not set(map(type, physical)) <= _INT:
            checked_ints(physical, "BlockTable.physical_block_ids")
        toks = obj._get_all_token_ids()
        if type(toks) is not list or not set(map(type, toks)) <= _INT:
            toks = checked_ints(toks, "BlockTable._get_all_token_ids()")
        return ids, tuple(toks)

    def introspect(self) -> Introspection | None:
        """Content-map ids, evictor ids and refcounts from the family's private state, with
        the access-time inputs of the eviction rank where the allocator shows them (see
        :class:`Introspection`)."""
        subs = getattr(self.alloc, "_allocators", None)
        if not isinstance(subs, Mapping):
            return None
        cached: dict[Dev, frozenset[int]] = {}
        evictable: dict[Dev, frozenset[int]] = {}
        ranks: dict[Dev, dict[int, tuple[object, object]]] | None = {}
        access: dict[Dev, dict[int, object]] | None = {}
        refcounts: dict[int, int] = {}
        for dev in DEVICES:
            sub = subs.get(self.member(dev))
            if sub is None:
                cached[dev] = evictable[dev] = frozenset()
                continue
            counter = getattr(sub, "_refcounter", None)
            counts = getattr(counter, "_refcounts", None)
            if not isinstance(counts, Mapping):
                return None
            # plain ints (every bundled and upstream allocator's) are taken as they are
            if set(map(type, counts)) <= _INT and set(map(type, counts.values())) <= _INT:
                refcounts.update(counts)
            else:
                refcounts.update({int(k): int(v) for k, v in counts.items()})
            content = getattr(sub, "_cached_blocks", None)
            if content is None:
                cached[dev] = evictable[dev] = frozenset()
                continue
            cached[dev] = _int_set(content.values())
            table_ = getattr(sub.evictor, "free_table", None)
            if table_ is None:
                return None
            evictable[dev] = _int_set(table_)
            if ranks is not None:
                try:
                    ranks[dev] = {int(block_id): (meta.last_accessed, meta.num_hashed_tokens)
                                  for block_id, meta in table_.items()}
                except (AttributeError, TypeError, ValueError):  # no such metadata: no ranks
                    ranks = None
            trackers: Any = getattr(sub, "_block_tracker", None)
            if access is not None:
                try:  # the active trackers picked in C: most ids of a pool are free
                    active = compress(trackers.items(), map(_active, trackers.values()))
                    access[dev] = {int(block_id): tracker.last_accessed
                                   for block_id, tracker in active}
                except (AttributeError, TypeError, ValueError):  # no such trackers: no times
                    access = None
        return Introspection(cached, evictable, refcounts, ranks, access)

    def metric_windows(self) -> dict[Dev, tuple[object, ...]] | None:
        """Per device whose allocator has a ``metric_data`` with every window field
        (``models.families.v0.hit_window.FIELDS``), those fields; None when no allocator shows
        them."""
        subs = getattr(self.alloc, "_allocators", None)
        if not isinstance(subs, Mapping):
            return None
        shown: dict[Dev, tuple[object, ...]] = {}
        for dev in DEVICES:
            metric = getattr(subs.get(self.member(dev)), "metric_data", None)
            if metric is not None:
                with suppress(AttributeError):  # not every field: this device shows none
                    shown[dev] = _window_fields(metric)
        return shown or None
