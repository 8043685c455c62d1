"""Broken radix caches and token-slot allocators: each mutant is one or two small patches of
the bundled reference's source (``prefixcache/sglang/srt/mem_cache/radix_cache.py`` or
``allocator.py``, applied with :func:`tests.zoo.patching.apply`, scoped and checked to apply
exactly once), built on first use; never a copy. ``MUTANTS`` says which invariant the sglang
family's machine must catch each one with.

Select one as a target: ``--allocator tests.zoo.sglang.mutants:<name>`` (each name is a
function returning its :class:`~properties.families.sglang.targets.TreeTarget`).
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from properties.families.sglang.targets import TreeTarget, bundled_target
from tests.zoo.patching import Patch, apply

PACKAGE = "prefixcache.sglang.srt.mem_cache"
SOURCE = Path(__file__).resolve().parents[3] / "prefixcache" / "sglang" / "srt" / "mem_cache"
RADIX, ALLOC = "radix_cache", "allocator"
SWA_RADIX, SWA_ALLOC = "swa_radix_cache", "swa_allocator"


@dataclass(frozen=True, slots=True)
class Mutant:
    """``patches`` of one module (``radix_cache`` or ``allocator``); ``invariant``: what the
    machine must catch it with; ``why``: the bug, in a scheduler's words."""

    module: str
    patches: tuple[tuple[str, str, str], ...]  # (scope, find, replace)
    invariant: str
    why: str
    also: tuple[str, ...] = ()  # another invariant the same bug may show first

    @property
    def caught_by(self) -> tuple[str, ...]:
        return (self.invariant, *self.also)


def _m(module: str, invariant: str, why: str, *patches: tuple[str, str, str],
       also: tuple[str, ...] = ()) -> Mutant:
    return Mutant(module, patches, invariant, why, also)


RC = "RadixCache"
MUTANTS: dict[str, Mutant] = {
    # ---------------------------------------------------------------- MATCH
    "match_skips_partial_node": _m(
        RADIX, "MATCH", "a match ending inside a node misses that node's matched pages",
        (f"{RC}._match", "if split_child is not None:", "if False:")),
    "match_not_page_aligned": _m(
        RADIX, "MATCH", "a partial match is not cut to whole pages (page size > 1)",
        (f"{RC}._walk", "return node, pos, child, common // ps * ps",
         "return node, pos, child, common")),
    "short_keys_never_match": _m(
        RADIX, "MATCH", "a key shorter than two pages never matches",
        (f"{RC}.match_prefix", "if not tokens:", "if len(tokens) < 2 * self.page_size:")),
    "match_loses_namespace": _m(
        RADIX, "NAMESPACE", "lookups ignore extra_key while inserts keep it: a namespaced key "
        "is served the default namespace's slots",
        (f"{RC}._lookup_key", "return (extra_key, first) if at_root else first",
         "return (None, first) if at_root else first"),
        also=("MATCH",)),  # the namespaced key misses its own nodes
    # ---------------------------------------------------------------- CONTENT / CACHE
    "match_drops_last_slot": _m(
        RADIX, "CONTENT", "device_indices lacks the last matched token's slot",
        (f"{RC}.match_prefix", "return self._result(node, matched, indices)",
         "return self._result(node, matched, indices[:-1])")),
    "match_reverses_node_slots": _m(
        RADIX, "CONTENT", "match returns each node's slots in reverse order",
        (f"{RC}._match", "values.append(x.value)", "values.append(x.value[::-1])")),
    "leaf_takes_first_slots": _m(
        RADIX, "CONTENT", "a new leaf takes the value's first slots, not those past the match",
        (f"{RC}.insert", "tokens[pos:], value[pos:], key.extra_key",
         "tokens[pos:], value[:n - pos], key.extra_key"),
        also=("CRASH", "LOCK")),  # a slot held twice: a double free refused, or a
    # locked prefix's slot evicted through the leaf
    "insert_reports_total": _m(
        RADIX, "CACHE", "insert's prefix_len counts the whole key, not what the tree held",
        (f"{RC}.insert", "return InsertResult(prefix_len=prefix_len,",
         "return InsertResult(prefix_len=n,")),
    # ---------------------------------------------------------------- NAMESPACE
    "leaf_forgets_namespace": _m(
        RADIX, "NAMESPACE", "a new leaf is filed under no extra_key: other namespaces hit it",
        (f"{RC}.insert", "tokens[pos:], value[pos:], key.extra_key",
         "tokens[pos:], value[pos:], None"),
        also=("MATCH",)),  # the namespaced key misses the leaf
    "namespace_ignored": _m(
        RADIX, "NAMESPACE", "extra_key is ignored everywhere: namespaces share nodes",
        (f"{RC}._lookup_key", "return (extra_key, first) if at_root else first",
         "return (None, first) if at_root else first"),
        (f"{RC}._child_key", "return (node.extra_key, first) if node.parent is self.root_node",
         "return (None, first) if node.parent is self.root_node")),
    # ---------------------------------------------------------------- OWN
    "insert_frees_identical_slots": _m(
        RADIX, "OWN", "insert frees the caller's slots in [prev, prefix_len) even where they "
        "are the tree's own (upstream Unified's rule)",
        (f"{RC}._duplicates", "if value[i] != tree_slots[i - begin]:", "if True:")),
    "insert_keeps_duplicates": _m(
        RADIX, "OWN", "insert never frees duplicates: the slots leak",
        (f"{RC}.insert", "if duplicates and alloc is not None:", "if False:")),
    "evict_frees_nothing": _m(
        RADIX, "EVICT", "evicted slots never go back to the allocator",
        (f"{RC}.evict", "alloc.free_segment(node.value, start_pos=0)", "pass")),
    "alloc_keeps_pages_free": _m(
        ALLOC, "OWN", "alloc hands out pages it leaves on the free list",
        ("BaseTokenToKVPoolAllocator.alloc", "del free[:num_pages]", "pass")),
    "alloc_refuses_exact_fit": _m(
        ALLOC, "OWN", "alloc refuses when exactly enough slots are free",
        ("BaseTokenToKVPoolAllocator.alloc", "if num_pages > len(free):",
         "if num_pages >= len(free):")),
    "free_appends_twice": _m(
        ALLOC, "EVICT", "a freed slot is put on the free list twice",
        ("TokenToKVPoolAllocator._release", "self.free_pages.extend(pages)",
         "self.free_pages.extend(pages + pages[:1])")),
    "available_size_off_by_one": _m(
        ALLOC, "OWN", "available_size counts one slot too many",
        ("TokenToKVPoolAllocator.available_size",
         "return len(self.free_pages) + len(self.release_pages)",
         "return len(self.free_pages) + len(self.release_pages) + 1")),
    "paged_alloc_shifted": _m(
        ALLOC, "OWN", "paged alloc hands out slots shifted by one (not whole pages)",
        ("BaseTokenToKVPoolAllocator.alloc", "range(p * ps, p * ps + ps)",
         "range(p * ps + 1, p * ps + ps + 1)")),
    # ---------------------------------------------------------------- OWN: the allocator level
    "free_skips_the_double_free_check": _m(
        ALLOC, "OWN", "free takes back a slot that is free already (upstream's double free): "
        "only a misuse probe makes the call",
        ("BaseTokenToKVPoolAllocator._pages_of",
         "if not self._allocated.issuperset(distinct):", "if False:")),
    "extend_leaves_pages_free": _m(
        ALLOC, "OWN", "alloc_extend / alloc_decode hand out new pages they leave on the free "
        "list",
        ("PagedTokenToKVPoolAllocator._extend", "del free[:taken]", "pass")),
    "free_group_drops_first_free": _m(
        ALLOC, "OWN", "free_group_end releases every free of the group but the first: its "
        "slots are lost",
        ("BaseTokenToKVPoolAllocator.free_group_end", "for pages in pending:",
         "for pages in pending[1:]:")),
    # ---------------------------------------------------------------- LOCK
    "split_drops_locks": _m(
        RADIX, "SIZE", "a split's new parent starts unlocked (its unlock then miscounts)",
        (f"{RC}._split", "new.lock_ref = child.lock_ref", "new.lock_ref = 0")),
    "locked_leaf_stays_evictable": _m(
        RADIX, "LOCK", "locking a leaf leaves it among the eviction candidates",
        (f"{RC}.inc_lock_ref", "leaves.discard(x)", "pass")),
    "locked_leaves_are_candidates": _m(
        RADIX, "LOCK", "the candidate set ignores lock counts",
        (f"{RC}._refresh", "if node.lock_ref == 0 and not node.children and",
         "if not node.children and")),
    "evict_takes_stale_candidates": _m(
        RADIX, "LOCK", "eviction trusts a heap entry of a leaf locked since it was pushed",
        (f"{RC}.evict", "if stamp != node.last_access_time or node not in leaves:",
         "if stamp != node.last_access_time or node.parent is None:")),
    # ---------------------------------------------------------------- SIZE
    "inc_lock_skips_ancestors": _m(
        RADIX, "SIZE", "inc_lock_ref locks the node only, not its ancestors",
        (f"{RC}.inc_lock_ref", "x = x.parent  # type: ignore[assignment]", "x = root")),
    "dec_lock_keeps_protected": _m(
        RADIX, "SIZE", "an unlocked node's tokens are not counted evictable again",
        (f"{RC}.dec_lock_ref", "self.evictable_size_ += size", "pass")),
    "new_leaf_not_counted": _m(
        RADIX, "SIZE", "a new leaf's first page is not counted",
        (f"{RC}.insert", "self.evictable_size_ += n - pos",
         "self.evictable_size_ += n - pos - self.page_size")),
    # ---------------------------------------------------------------- EVICT
    "match_does_not_touch": _m(
        RADIX, "EVICT", "a match does not refresh the path's LRU time",
        (f"{RC}._match", "self._stamp_path(node, stamp)", "pass")),
    "frozen_clock": _m(
        RADIX, "EVICT", "the LRU clock never advances: eviction goes by node age",
        (f"{RC}._tick", "self._clock += 1", "self._clock += 0")),
    "evict_most_recent": _m(
        RADIX, "EVICT", "eviction takes the most recently used leaf",
        (f"{RC}.evict", "stamp, _, node = heapq.heappop(heap)",
         "stamp, _, node = heap.pop(heap.index(max(heap)))")),
    "evict_one_leaf_too_many": _m(
        RADIX, "EVICT", "eviction goes on once enough tokens are freed",
        (f"{RC}.evict", "while evicted < num_tokens and heap:",
         "while evicted <= num_tokens and heap:")),
    "emptied_parent_not_candidate": _m(
        RADIX, "EVICT", "a parent left childless never becomes evictable",
        (f"{RC}.evict", "self._refresh(parent)", "pass")),
    "unlock_does_not_refresh": _m(
        RADIX, "EVICT", "a node unlocked to zero does not become an eviction candidate",
        (f"{RC}.dec_lock_ref", "self._refresh(x)", "pass")),
    "evict_counts_pages": _m(
        RADIX, "EVICT", "eviction counts one token per leaf, not its length",
        (f"{RC}.evict", "evicted += len(node.value)", "evicted += 1")),
}

SW = "SWARadixCache"
SA = "SWATokenToKVPoolAllocator"
#: FULL + SWA mutants: patches of ``swa_radix_cache.py`` / ``swa_allocator.py``, caught by the
#: SWA level's machine (``test_sglang_swa.py``).
SWA_MUTANTS: dict[str, Mutant] = {
    "swa_match_ignores_tombstones": _m(
        SWA_RADIX, "SWA", "a match is not cut back where its window lost SWA KV: attention "
        "reads dropped sliding-window KV",
        (f"{SW}._usable", "if all(x.swa_live[i] for x, i in held[max(0, end - w):end]):",
         "if True:"),
        also=("CRASH",)),  # or locking the stale window is refused
    "swa_evict_ignores_windows": _m(
        SWA_RADIX, "LOCK", "SWA eviction drops the SWA KV of a running request's window",
        (f"{SW}.evict", "if any(live and not lock for live, lock in zip(x.swa_live, x.swa_lock,",
         "if any(live for live, lock in zip(x.swa_live, x.swa_lock,"),
        (f"{SW}.evict", "strict=True)) if live and not lock]", "strict=True)) if live]"),
        also=("SWA",)),
    "swa_recover_loses_mapping": _m(
        SWA_RADIX, "SWA", "re-inserting a tombstoned token revives it without pointing its "
        "full slot at the caller's SWA slot: a stale full->SWA mapping, the SWA slot lost",
        (f"{SW}.insert", "alloc.set_full_to_swa_mapping([node.value[at]],",
         "_ = ([node.value[at]],"),
        also=("CRASH",)),
    "swa_window_one_short": _m(
        SWA_RADIX, "LOCK", "a lock protects one token less than the window",
        (f"{SW}._window", "while x is not self.root_node and len(out) < self.sliding_window_size:",
         "while x is not self.root_node and len(out) < self.sliding_window_size - 1:"),
        (f"{SW}._window", "if len(out) == self.sliding_window_size:",
         "if len(out) == self.sliding_window_size - 1:"),
        also=("SWA",)),
    "swa_sizes_count_tombstones": _m(
        SWA_RADIX, "SWA", "swa_evictable_size counts tombstoned tokens",
        (f"{SW}._swa_count", "if live and (lock > 0) == locked)", "if (lock > 0) == locked)")),
    "swa_free_swa_keeps_slots": _m(
        SWA_ALLOC, "SWA", "free_swa clears the mapping but never returns the SWA slots",
        (f"{SA}.free_swa", "self.swa_attn_allocator.free(peers)", "pass"),
        also=("EVICT",)),  # the tree reports SWA tokens evicted that never came free
    "swa_alloc_shares_a_slot": _m(
        SWA_ALLOC, "SWA", "alloc pairs every new full slot with the same SWA slot",
        (f"{SA}.alloc", "self.full_to_swa_index_mapping[f] = s",
         "self.full_to_swa_index_mapping[f] = swa[0]"),
        also=("CRASH",)),  # or its own free refuses the shared peer on a valid eviction
}


RQ = "release_kv_cache"
#: Request-level mutants: patches of the bundled request API (``RadixCache.checkpoint``,
#: ``release_kv_cache`` in ``radix_cache.py``), caught by the request level's machine
#: (``test_sglang_request.py``).
REQUEST_MUTANTS: dict[str, Mutant] = {
    "preempt_frees_published_prefix": _m(
        RADIX, "OWN", "a retraction frees the whole row, the tree's published prefix too: "
        "KV the tree still serves goes back on the free list",
        (RQ, "tree_cache.free_kv_row(kv, [(kv.cache_protected_len, req.owned_kv_len())])",
         "tree_cache.free_kv_row(kv, [(kv.cache_protected_len if checkpoint else 0, "
         "req.owned_kv_len())])"),
        also=("CONTENT",)),
    "finish_keeps_lock": _m(
        RADIX, "SIZE", "a finished request never releases its lock: its path stays protected "
        "(never evictable) for good",
        (RQ, "tree_cache.unlock(req.lock)", "tree_cache.unlock(None if checkpoint else req.lock)"),
        also=("LOCK", "EVICT")),
    "checkpoint_keeps_duplicates": _m(
        RADIX, "OWN", "a checkpoint inserts with prev_prefix_len past the duplicates: the "
        "request's own copies of KV the tree already held are never freed (lost slots)",
        (f"{RC}.checkpoint", "prev_prefix_len=protected))", "prev_prefix_len=aligned))")),
    "checkpoint_row_not_repointed": _m(
        RADIX, "CONTENT", "a checkpoint frees the request's duplicate slots but leaves its row "
        "pointing at them: it reads KV a later request overwrites",
        (f"{RC}.checkpoint", "if protected < aligned and kv.req_pool_idx is not None:",
         "if False:"),
        also=("OWN",)),
    "checkpoint_lock_not_moved": _m(
        RADIX, "SIZE", "a checkpoint locks the new node without releasing the old lock: the "
        "old path stays locked after the request finishes",
        (f"{RC}.checkpoint", "self.unlock(req.lock)", "pass"),
        also=("LOCK", "EVICT")),
    "finish_skips_prompt_split": _m(
        RADIX, "EVICT", "a finished request's outputs stay in one node with its prompt: an "
        "eviction takes the prompt with them",
        (f"{RC}.checkpoint", "if 0 < prompt < aligned:", "if False:")),
}


@functools.cache
def module(name: str) -> ModuleType:
    """The patched module of mutant ``name`` (``tests.zoo.sglang.mutants.<name>``)."""
    mutant = (MUTANTS[name] if name in MUTANTS else REQUEST_MUTANTS[name]
              if name in REQUEST_MUTANTS else SWA_MUTANTS[name])
    path = SOURCE / f"{mutant.module}.py"
    source = path.read_text(encoding="utf-8")
    for scope, find, replace in mutant.patches:
        source = apply(source, Patch(f"sglang/srt/mem_cache/{mutant.module}", scope, find,
                                     replace), name)
    qualified = f"{__name__}.{name}"
    spec = importlib.util.spec_from_loader(qualified, loader=None)
    if spec is None:
        raise ImportError(qualified)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[qualified] = mod
    exec(compile(source, f"<{qualified}>", "exec"), mod.__dict__)
    return mod


def target(name: str) -> TreeTarget:
    """Mutant ``name`` as a target: its patched module with the bundled other one."""
    patched = module(name)
    if name in SWA_MUTANTS:
        if SWA_MUTANTS[name].module == SWA_RADIX:
            return bundled_target(patched, importlib.import_module(f"{PACKAGE}.{SWA_ALLOC}"),
                                  name=f"zoo/{name}", version="mutant")
        return bundled_target(importlib.import_module(f"{PACKAGE}.{SWA_RADIX}"), patched,
                              name=f"zoo/{name}", version="mutant")
    if name in REQUEST_MUTANTS or MUTANTS[name].module == RADIX:
        return bundled_target(patched, importlib.import_module(f"{PACKAGE}.{ALLOC}"),
                              name=f"zoo/{name}", version="mutant")
    return bundled_target(importlib.import_module(f"{PACKAGE}.{RADIX}"), patched,
                          name=f"zoo/{name}", version="mutant")


def _factory(name: str) -> Any:
    def make() -> TreeTarget:
        return target(name)

    make.__name__ = make.__qualname__ = name
    return make


for _name in [*MUTANTS, *REQUEST_MUTANTS, *SWA_MUTANTS]:
    globals()[_name] = _factory(_name)
