"""SGLang targets: a radix cache and its token-slot allocator behind one driver interface.

A :class:`TreeTarget` builds trees of one implementation: ``create(size, page_size)`` returns
a driver with ``alloc``, ``free``, ``free_segment``, ``free_group``, ``alloc_extend`` and
``alloc_decode`` and their batched forms ``alloc_extend_rows`` / ``alloc_decode_rows`` (where
``extends``: paged, with a CPU path), ``available_size``,
``free_slots`` (the allocator's free slots as a multiset), ``match``, ``insert`` (duplicates
end freed, whichever tree it is), ``lock``, ``unlock``, ``lock_count``, ``evict`` (tokens
evicted, the slots it freed) and ``sizes``: upstream's trees through
:class:`~properties.families.sglang.driver.UpstreamTree`, a bundled-style tree (a module with
``RadixCache``, ``RadixKey``, ``CacheInitParams`` and the parameter records, over an allocator
module) through :class:`BundledTree`. The suite never imports the bundled
reference: it is found by name, as any target is.
"""

from __future__ import annotations

import importlib
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from properties.core.sources import UpstreamError
from properties.core.targets import TargetError, resolve

#: The bundled reference, as ``--allocator`` names it.
BUNDLED_SPEC = "prefixcache.sglang.srt.mem_cache.radix_cache:RadixCache"
#: The bundled FULL + SWA reference.
BUNDLED_SWA_SPEC = "prefixcache.sglang.srt.mem_cache.swa_radix_cache:SWARadixCache"
#: What a radix cache class has (how ``accepts`` recognises one without building it).
CACHE_METHODS = ("match_prefix", "insert", "evict", "inc_lock_ref", "dec_lock_ref",
                 "evictable_size", "protected_size")


#: Rows of a driver's request-to-token pool (the request level keeps fewer requests alive).
ROWS = 16


@dataclass(frozen=True)
class TreeTarget:
    """One implementation: ``kind`` is ``bundled``, ``classic``, ``unified-python`` or
    ``unified-rust``; ``frees_duplicates``: its insert frees the caller's duplicate slots
    (classic's caller does it, the driver plays that part); ``misuse_types``: the typed
    errors it claims to refuse misuse with, changing nothing (empty: no such claim)."""

    name: str
    version: str
    kind: str
    create: Callable[[int, int], Any]
    frees_duplicates: bool = True
    misuse_types: tuple[type[BaseException], ...] = ()
    #: A FULL + SWA tree: ``create(size, page_size, swa_size, window)`` (defaults: the full
    #: pool's size, a window of 2), judged by the SWA machine only.
    swa: bool = False
    #: Its driver has the request API (``req_open`` ... ``req_row``): the request level's
    #: machine runs (:mod:`properties.families.sglang.requests`).
    requests: bool = False
    #: The FULL tree level's machine runs (an upstream request-level target runs only its
    #: own level, with its own expected failures).
    tree: bool = True

    def describe(self) -> str:
        who = "the tree frees" if self.frees_duplicates else "the caller frees"
        what = "FULL + SWA radix cache" if self.swa else "radix cache"
        return f"{self.name} {self.version} ({self.kind} {what}; {who} insert's duplicates)"


class BundledTree:
    """A bundled-style ``RadixCache`` (``cache_module``) over ``TokenToKVPoolAllocator`` or
    ``PagedTokenToKVPoolAllocator`` (``alloc_module``), in the driver's terms."""

    def __init__(self, cache_module: ModuleType, alloc_module: ModuleType, size: int,
                 page_size: int) -> None:
        self.page_size = page_size
        self.allocator = (alloc_module.TokenToKVPoolAllocator(size) if page_size == 1
                          else alloc_module.PagedTokenToKVPoolAllocator(size, page_size))
        self.extends = page_size > 1 and hasattr(self.allocator, "alloc_extend")
        m = cache_module
        #: The request API (``checkpoint``, ``release_kv_cache``) over a request-to-token pool.
        self.requests = hasattr(m, "ReqToTokenPool") and hasattr(m, "release_kv_cache")
        self._pool: Any = m.ReqToTokenPool(ROWS, size + 2) if self.requests else None
        self.cache = m.RadixCache(m.CacheInitParams(False, self._pool, self.allocator,
                                                    page_size))
        self._key, self._match = m.RadixKey, m.MatchPrefixParams
        self._insert, self._evict = m.InsertParams, m.EvictParams
        self._module = m

    def alloc(self, n: int) -> list[int] | None:
        got = self.allocator.alloc(n)
        return None if got is None else list(got)

    def free(self, slots: Sequence[int]) -> None:
        self.allocator.free(list(slots))

    def free_segment(self, slots: Sequence[int], start_pos: int = 0) -> None:
        self.allocator.free_segment(list(slots), start_pos=start_pos)

    def free_group(self, parts: Sequence[Sequence[int]]) -> None:
        self.allocator.free_group_begin()
        for part in parts:
            self.free(part)
        self.allocator.free_group_end()

    def alloc_extend(self, prefix_len: int, seq_len: int, last_loc: int) -> list[int] | None:
        got = self.allocator.alloc_extend([prefix_len], [prefix_len], [seq_len], [seq_len],
                                          [last_loc], seq_len - prefix_len)
        return None if got is None else list(got)

    def alloc_decode(self, seq_len: int, last_loc: int) -> list[int] | None:
        got = self.allocator.alloc_decode([seq_len], [seq_len], [last_loc])
        return None if got is None else list(got)

    def alloc_extend_rows(self, rows: Sequence[tuple[int, int, int]]) -> list[int] | None:
        """One ``alloc_extend`` for several requests: ``(prefix_len, seq_len, last_loc)``
        each, their new slots in request order."""
        prefix, seq, last = ([row[i] for row in rows] for i in range(3))
        got = self.allocator.alloc_extend(prefix, prefix, seq, seq, last,
                                          sum(s - p for p, s, _ in rows))
        return None if got is None else list(got)

    def alloc_decode_rows(self, rows: Sequence[tuple[int, int]]) -> list[int] | None:
        """One ``alloc_decode`` for several requests: ``(seq_len, last_loc)`` each."""
        seq, last = [row[0] for row in rows], [row[1] for row in rows]
        got = self.allocator.alloc_decode(seq, seq, last)
        return None if got is None else list(got)

    def available_size(self) -> int:
        return int(self.allocator.available_size())

    def free_slots(self) -> Counter[int]:
        ps = self.page_size
        pages = list(self.allocator.free_pages) + list(self.allocator.release_pages)
        return Counter(p * ps + i if ps > 1 else p for p in pages for i in range(ps))

    def match(self, tokens: Sequence[int], extra_key: str | None = None
              ) -> tuple[int, Any, list[int]]:
        m = self.cache.match_prefix(self._match(self._key(list(tokens), extra_key)))
        return int(m.device_prefix_len), m.last_device_node, list(m.device_indices)

    def insert(self, tokens: Sequence[int], slots: Sequence[int], extra_key: str | None = None,
               prev_prefix_len: int = 0) -> int:
        aligned = len(tokens) // self.page_size * self.page_size
        params = self._insert(self._key(list(tokens[:aligned]), extra_key),
                              list(slots[:aligned]), prev_prefix_len=prev_prefix_len)
        return int(self.cache.insert(params).prefix_len)

    def lock(self, node: Any) -> Any:
        return self.cache.lock(node)

    def unlock(self, receipt: Any) -> None:
        self.cache.unlock(receipt)

    def lock_count(self, node: Any) -> int | None:
        return int(node.lock_ref)

    def evict(self, num_tokens: int) -> tuple[int, Counter[int]]:
        before = self.free_slots()
        result = self.cache.evict(self._evict(num_tokens))
        return int(result.num_tokens_evicted), self.free_slots() - before

    def sizes(self) -> tuple[int, int, int]:
        c = self.cache
        return int(c.evictable_size()), int(c.protected_size()), int(c.total_size())


    # -- the request API: the scheduler's part, then the cache's calls ------- #

    def req_open(self, tokens: Sequence[int], extra_key: str | None = None) -> Any:
        """A new waiting request with prompt ``tokens``."""
        self._rids = getattr(self, "_rids", 0) + 1
        return self._module.Req(f"r{self._rids}", list(tokens), extra_key)

    def req_admit(self, req: Any) -> tuple[int, list[int]]:
        """Admission: match all its tokens, lock the match, take a row holding the match."""
        m = self.cache.match_prefix(self._match(self._key(req.fill_ids, req.extra_key)))
        matched, slots = int(m.device_prefix_len), list(m.device_indices)
        req.prefix_len, req.last_node = matched, m.last_device_node
        req.lock = self.cache.lock(m.last_device_node)
        if self._pool.alloc([req]) is None:
            raise RuntimeError(f"no request row left of {ROWS}")
        if matched:
            self._pool.write((req.kv.req_pool_idx, slice(0, matched)), slots)
        req.kv.cache_protected_len = req.kv.kv_committed_len = matched
        req.kv.kv_allocated_len = matched
        return matched, slots

    def req_extend(self, req: Any, n: int) -> list[int] | None:
        """The next ``n`` positions' slots (``alloc`` / ``alloc_extend``), their KV computed."""
        have = req.kv.kv_committed_len
        row = self._pool.req_to_token[req.kv.req_pool_idx]
        got = (self.alloc(n) if self.page_size == 1
               else self.alloc_extend(have, have + n, row[have - 1] if have else -1))
        if got is None:
            return None
        self._pool.write((req.kv.req_pool_idx, slice(have, have + n)), got)
        req.kv.kv_committed_len = req.kv.kv_allocated_len = have + n
        return got

    def req_decode(self, req: Any, token: int) -> int | None:
        """A sampled ``token``: its slot (``alloc`` / ``alloc_decode``), its KV computed."""
        have = req.kv.kv_committed_len
        row = self._pool.req_to_token[req.kv.req_pool_idx]
        got = (self.alloc(1) if self.page_size == 1
               else self.alloc_decode(have + 1, row[have - 1] if have else -1))
        if got is None:
            return None
        req.output_ids.append(token)
        self._pool.write((req.kv.req_pool_idx, slice(have, have + 1)), got)
        req.kv.kv_committed_len = req.kv.kv_allocated_len = have + 1
        return int(got[0])

    def req_checkpoint(self, req: Any) -> None:
        self.cache.checkpoint(req, up_to=req.kv.kv_committed_len)

    def req_release(self, req: Any, checkpoint: bool) -> None:
        """Finish (``checkpoint``: the request is finished first) or retract."""
        if checkpoint:
            req.finished_reason = "length"
        self._module.release_kv_cache(req, self.cache, checkpoint=checkpoint)
        if not checkpoint:
            req.reset_for_retract()

    def req_row(self, req: Any) -> list[int]:
        if req.kv.req_pool_idx is None:
            return []
        return list(self._pool.req_to_token[req.kv.req_pool_idx][:req.kv.kv_committed_len])

    def req_tokens(self, req: Any) -> list[int]:
        return list(req.fill_ids)

    def req_running(self, req: Any) -> bool:
        return req.kv.req_pool_idx is not None


class BundledSWATree(BundledTree):
    """A bundled-style ``SWARadixCache`` (``cache_module``) over ``SWATokenToKVPoolAllocator``
    (``alloc_module``): the driver's calls plus ``swa_of``, ``swa_free_slots``,
    ``swa_available_size``, ``swa_sizes`` and a two-part ``evict``."""

    def __init__(self, cache_module: ModuleType, alloc_module: ModuleType, size: int,
                 page_size: int, swa_size: int | None = None, window: int = 2) -> None:
        self.page_size = page_size
        self.allocator = alloc_module.SWATokenToKVPoolAllocator(
            size, size if swa_size is None else swa_size, page_size)
        self.extends = False
        m = cache_module
        self.cache = m.SWARadixCache(m.CacheInitParams(False, None, self.allocator, page_size,
                                                       sliding_window_size=window))
        self._key, self._match = m.RadixKey, m.MatchPrefixParams
        self._insert, self._evict = m.InsertParams, m.EvictParams

    def available_size(self) -> int:
        return int(self.allocator.full_available_size())

    def free_slots(self) -> Counter[int]:
        return Counter(self.allocator.full_attn_allocator.free_pages)

    def swa_free_slots(self) -> Counter[int]:
        return Counter(self.allocator.swa_attn_allocator.free_pages)

    def swa_available_size(self) -> int:
        return int(self.allocator.swa_available_size())

    def swa_of(self, slots: Sequence[int]) -> list[int]:
        return [int(self.allocator.full_to_swa_index_mapping[s]) for s in slots]

    def evict(self, num_tokens: int, swa_num_tokens: int = 0  # type: ignore[override]
              ) -> tuple[int, int, Counter[int], Counter[int]]:
        full, swa = self.free_slots(), self.swa_free_slots()
        result = self.cache.evict(self._evict(num_tokens, swa_num_tokens))
        return (int(result.num_tokens_evicted), int(result.swa_num_tokens_evicted),
                self.free_slots() - full, self.swa_free_slots() - swa)

    def swa_sizes(self) -> tuple[int, int]:
        return int(self.cache.swa_evictable_size()), int(self.cache.swa_protected_size())

    def release_swa(self, receipt: Any) -> None:
        self.cache.release_swa(receipt)


def bundled_target(cache_module: ModuleType, alloc_module: ModuleType | None = None,
                   name: str = "bundled", version: str = "reference") -> TreeTarget:
    """Trees of ``cache_module``'s ``RadixCache`` over ``alloc_module``'s allocators (None:
    the allocator module beside the cache module)."""
    swa = hasattr(cache_module, "SWARadixCache")
    if alloc_module is None:
        alloc_module = importlib.import_module(cache_module.__name__.rpartition(".")[0] + (
            ".swa_allocator" if swa else ".allocator"))
    allocators = alloc_module

    def create(size: int, page_size: int) -> BundledTree:
        return BundledTree(cache_module, allocators, size, page_size)

    def create_swa(size: int, page_size: int, swa_size: int | None = None,
                   window: int = 2) -> BundledSWATree:
        return BundledSWATree(cache_module, allocators, size, page_size, swa_size, window)

    # A bundled-style tree claims typed errors when its module names their base class.
    base = getattr(cache_module, "SGLangCacheError", None)
    claimed = (base,) if isinstance(base, type) and issubclass(base, Exception) else ()
    requests = hasattr(cache_module, "ReqToTokenPool") and hasattr(cache_module,
                                                                   "release_kv_cache")
    return TreeTarget(name, version, "bundled", create_swa if swa else create,
                      misuse_types=claimed, swa=swa, requests=requests and not swa)


def upstream_target(version: str, kind: str, level: str = "tree") -> TreeTarget:
    """Upstream SGLang ``version``'s ``kind`` tree (``classic``, ``unified-python``,
    ``unified-rust``), read from its wheel, judged at ``level`` (``tree``, or ``request``:
    through its request API); raises :class:`TargetError` saying why it cannot load here."""
    if level not in ("tree", "request"):
        raise ValueError(f"level {level!r}: tree or request")
    requests = level == "request"
    from properties.families.sglang import upstream
    from properties.families.sglang.driver import UpstreamTree

    why = upstream.unavailable_reason(version)
    if why is not None:
        raise TargetError(why)
    try:
        mods = upstream.load_sglang(version=version)
        probe = UpstreamTree(mods, kind, 8, 1, requests)  # a release without it says so
    except (UpstreamError, ValueError) as exc:
        raise TargetError(f"sglang {version} {kind}: {exc}") from exc
    if requests and not probe.requests:
        raise TargetError(f"sglang {version} {kind}: no request API the suite can drive")

    def create(size: int, page_size: int) -> UpstreamTree:
        return UpstreamTree(mods, kind, size, page_size, requests)

    name = f"sglang-{kind}" + ("-request" if requests else "")
    return TreeTarget(name, version, kind, create, frees_duplicates=kind != "classic",
                      requests=requests, tree=not requests)


def upstream_swa_target(version: str, kind: str) -> TreeTarget:
    """Upstream SGLang ``version``'s FULL + SWA tree ``kind`` (``swa-unified-python``,
    ``swa-unified-rust``, ``swa-classic``: 0.5.18's ``SWARadixCache``); raises
    :class:`TargetError` saying why it cannot load here."""
    from properties.families.sglang import upstream
    from properties.families.sglang.swa_driver import UpstreamSWATree

    why = upstream.unavailable_reason(version)
    if why is not None:
        raise TargetError(why)
    try:
        mods = upstream.load_sglang(version=version)
        if mods.swa_error is not None:
            raise UpstreamError(mods.swa_error)
        UpstreamSWATree(mods, kind, 8, 1, 8, 2)  # a release without this tree says so here
    except (UpstreamError, ValueError) as exc:
        raise TargetError(f"sglang {version} {kind}: {exc}") from exc

    def create(size: int, page_size: int, swa_size: int | None = None,
               window: int = 2) -> UpstreamSWATree:
        return UpstreamSWATree(mods, kind, size, page_size, swa_size, window)

    return TreeTarget(f"sglang-{kind}", version, kind, create, swa=True)


def tree_target(spec: str) -> TreeTarget:
    """The :class:`TreeTarget` ``spec`` names: a radix cache class (a bundled-style module),
    or a callable returning a TreeTarget."""
    obj = resolve(spec)
    if isinstance(obj, type):
        if not all(callable(getattr(obj, m, None)) for m in CACHE_METHODS):
            raise TargetError(f"{spec!r} is not a radix cache (it lacks one of "
                              f"{', '.join(CACHE_METHODS)})")
        module = sys.modules[obj.__module__]
        return bundled_target(module, name=obj.__module__.split(".")[0])
    made = obj()
    if not isinstance(made, TreeTarget):
        raise TargetError(f"{spec!r} returned {type(made).__name__}, not a TreeTarget")
    return made


def open_target(spec: str) -> TreeTarget:
    """:func:`tree_target`, for reproducers."""
    return tree_target(spec)
