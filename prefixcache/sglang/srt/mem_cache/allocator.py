"""Token-slot allocators (``sglang.srt.mem_cache.allocator``), standard library only.

Upstream hands out and takes back int64 tensors; here slot indices are sequences of ints in,
lists of ints out (any ``Sequence[int]`` is accepted, e.g. a list or an ``array('q')``).

Contract (both allocators):

* Slots are ``1..size``; slot 0 is the reserved padding slot and never handed out. The paged
  allocator hands out whole pages ``1..size // page_size`` (slots ``p * page_size + i``).
* Every slot is either free or allocated. ``free`` of a slot that is free (or was never
  allocated), of a slot outside the pool, or of the same slot twice in one call raises
  (:class:`DoubleFreeError`, :class:`InvalidSlotError`) and frees nothing: ``available_size()``
  never exceeds the capacity. Upstream keeps no such record and accepts all of these.
* Order, as upstream on a CPU host without ``need_sort``: ``alloc`` takes from the front of
  the free list; the token allocator appends freed slots at the back (FIFO reuse), the paged
  one puts freed pages at the front (LIFO reuse), ``free`` in ascending page order (upstream's
  ``torch.unique``) and ``free_segment`` in the segment's order. With ``need_sort`` freed slots
  are staged and merged in sorted order when ``alloc`` runs short.
* ``free_group_begin``/``free_group_end`` defer frees to the end of the group; each ``free``
  in the group is still checked when it is called.
* The paged allocator's ``alloc_extend`` / ``alloc_decode`` extend requests' KV rows (upstream's
  CPU path, ``alloc_extend_naive`` / ``alloc_decode_naive``): the rest of the page of a row's
  last slot first, then whole new pages from the front of the free list; None, taking
  nothing, when fewer pages are free than the batch needs. A ``last_loc`` that is not the
  slot of the token before the extension, or not handed out, raises.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import chain

from prefixcache.sglang.errors import DoubleFreeError, InvalidArgumentError, InvalidSlotError

__all__ = ["BaseTokenToKVPoolAllocator", "PagedTokenToKVPoolAllocator", "TokenToKVPoolAllocator"]


class BaseTokenToKVPoolAllocator:
    """Shared state: ``size`` slots in units of ``page_size``; ``dtype``, ``device`` and
    ``kvcache`` are kept for signature compatibility and not used.

    ``free_pages`` (a list, front = next out) and ``release_pages`` (staged when
    ``need_sort``) hold the free page ids; ``_allocated`` is the set of handed-out page ids, so
    every check is a C-level set operation (no per-slot Python loop on the page-size-1 path).
    """

    def __init__(self, size: int, page_size: int, dtype: object, device: str,
                 kvcache: object, need_sort: bool) -> None:
        if not isinstance(size, int) or size < 0:
            raise InvalidArgumentError(f"size must be a non-negative int, got {size!r}")
        if not isinstance(page_size, int) or page_size < 1:
            raise InvalidArgumentError(f"page_size must be a positive int, got {page_size!r}")
        self.size = size
        self.page_size = page_size
        self.dtype = dtype
        self.device = device
        self._kvcache = kvcache
        self.need_sort = need_sort
        self.num_pages = size // page_size
        self.free_pages: list[int] = []
        self.release_pages: list[int] = []
        self._allocated: set[int] = set()
        self.free_group: list[list[int]] | None = None
        self.clear()

    @property
    def size_full(self) -> int:
        return self.size

    def clear(self) -> None:
        """Everything free again, in ascending order; any open free group is dropped."""
        self.free_pages = list(range(1, self.num_pages + 1))
        self.release_pages = []
        self._allocated = set()
        self.free_group = None

    def available_size(self) -> int:
        """Free slots (staged ones included); at most ``size``."""
        return (len(self.free_pages) + len(self.release_pages)) * self.page_size

    def get_kvcache(self) -> object:
        return self._kvcache

    def merge_and_sort_free(self) -> None:
        if self.release_pages:
            self.free_pages = sorted(self.free_pages + self.release_pages)
            self.release_pages = []

    def alloc(self, need_size: int) -> list[int] | None:
        """``need_size`` slots (a multiple of ``page_size``), or None if too few are free."""
        if not isinstance(need_size, int) or need_size < 0:
            raise InvalidArgumentError(f"need_size must be a non-negative int, got {need_size!r}")
        ps = self.page_size
        if need_size % ps:
            raise InvalidArgumentError(f"need_size {need_size} is not a multiple of page "
                                       f"size {ps}")
        num_pages = need_size // ps
        if self.need_sort and num_pages > len(self.free_pages):
            self.merge_and_sort_free()
        free = self.free_pages
        if num_pages > len(free):
            return None
        pages = free[:num_pages]
        del free[:num_pages]
        self._allocated.update(pages)
        if ps == 1:
            return pages
        return list(chain.from_iterable([range(p * ps, p * ps + ps) for p in pages]))

    def _pages_of(self, free_index: Sequence[int], *, whole: bool) -> list[int]:
        """The distinct pages of ``free_index`` in first-seen order, checked: each is
        allocated, and (``whole``) none repeats. Raises before any change."""
        ps = self.page_size
        if ps == 1:
            pages = list(free_index)
            distinct: set[int] | list[int] = set(pages)
        else:
            pages = list(dict.fromkeys([slot // ps for slot in free_index]))
            distinct = pages
            if any(slot < 0 for slot in free_index):
                raise InvalidSlotError(f"negative slot in {list(free_index)[:8]}")
        if not self._allocated.issuperset(distinct):
            for page in pages:
                if page not in self._allocated:
                    slot = page * ps
                    if not 1 <= page <= self.num_pages:
                        raise InvalidSlotError(f"slot {slot} is not in this pool "
                                               f"(1..{self.size})")
                    raise DoubleFreeError(f"slot {slot} is free already (or was never "
                                          "allocated)")
        if whole and len(distinct) != len(pages):
            raise DoubleFreeError("a slot appears twice in one free")
        return pages

    def all_allocated(self, slots: Sequence[int]) -> bool:
        """Whether every one of ``slots`` is handed out (a C-level check at page size 1). At
        larger page sizes ``slots`` is a page-aligned run (whole pages, as the tree holds
        them): one slot per page is checked."""
        ps = self.page_size
        if ps == 1:
            return self._allocated.issuperset(slots)
        reps = slots[::ps]
        return all(s >= 0 for s in reps) and self._allocated.issuperset(
            [s // ps for s in reps])

    def _release(self, pages: list[int]) -> None:
        raise NotImplementedError

    def free(self, free_index: Sequence[int]) -> None:
        """Return ``free_index``'s slots (pages) to the pool; checked first (see module)."""
        pages = self._pages_of(free_index, whole=self.page_size == 1)
        if not pages:
            return
        if self.page_size > 1:
            pages.sort()
        self._commit(pages)

    def free_segment(self, free_index: Sequence[int], *, start_pos: int) -> None:
        """Free ``kv_row[start_pos : start_pos + len(free_index)]`` of one request: a
        page-aligned start, each page once (the whole last page is released)."""
        ps = self.page_size
        if start_pos % ps:
            raise InvalidArgumentError(f"segment start {start_pos} is not page-aligned")
        # A segment's tokens are contiguous per page: one slot per page names it (upstream's
        # ``free_index[::page_size]``).
        pages = self._pages_of(free_index if ps == 1 else free_index[::ps], whole=True)
        if pages:
            self._commit(pages)

    def _commit(self, pages: list[int]) -> None:
        self._allocated.difference_update(pages)
        if self.free_group is not None:
            self.free_group.append(pages)
            return
        self._release(pages)

    def free_group_begin(self) -> None:
        if self.free_group is not None:
            raise InvalidArgumentError("free groups cannot be nested")
        self.free_group = []

    def free_group_end(self) -> None:
        pending, self.free_group = self.free_group, None
        if pending is None:
            raise InvalidArgumentError("free_group_end without free_group_begin")
        for pages in pending:
            self._release(pages)

    def allocated(self, slot: int) -> bool:
        """Whether ``slot`` is currently handed out (pending group frees count as free)."""
        return slot >= 0 and slot // self.page_size in self._allocated


class TokenToKVPoolAllocator(BaseTokenToKVPoolAllocator):
    """One slot per token: ``TokenToKVPoolAllocator(size, dtype, device, kvcache, need_sort)``.
    Freed slots go to the back of the free list (or are staged when ``need_sort``)."""

    def __init__(self, size: int, dtype: object = None, device: str = "cpu",
                 kvcache: object = None, need_sort: bool = False) -> None:
        super().__init__(size, 1, dtype, device, kvcache, need_sort)

    def available_size(self) -> int:
        return len(self.free_pages) + len(self.release_pages)

    def _release(self, pages: list[int]) -> None:
        if self.need_sort:
            self.release_pages.extend(pages)
        else:
            self.free_pages.extend(pages)


class PagedTokenToKVPoolAllocator(BaseTokenToKVPoolAllocator):
    """Whole pages: ``PagedTokenToKVPoolAllocator(size, page_size, dtype, device, kvcache,
    need_sort)``. Freed pages go to the front of the free list (or are staged)."""

    def __init__(self, size: int, page_size: int, dtype: object = None, device: str = "cpu",
                 kvcache: object = None, need_sort: bool = False) -> None:
        super().__init__(size, page_size, dtype, device, kvcache, need_sort)

    def alloc_extend(self, prefix_lens: Sequence[int], prefix_lens_cpu: Sequence[int],
                     seq_lens: Sequence[int], seq_lens_cpu: Sequence[int],
                     last_loc: Sequence[int], extend_num_tokens: int,
                     num_new_pages: int | None = None) -> list[int] | None:
        """Slots for tokens ``prefix_lens[i]..seq_lens[i] - 1`` of each request, in request
        order: first the rest of the page holding ``last_loc[i]`` (the slot of the request's
        last token; ``-1`` with an empty prefix), then whole new pages from the front of the
        free list. None (nothing taken) when fewer pages are free than the batch needs.
        ``prefix_lens_cpu``, ``seq_lens_cpu`` and ``num_new_pages`` are upstream's host copies
        and hint; the lists given are used."""
        ps = self.page_size
        if not len(prefix_lens) == len(seq_lens) == len(last_loc):
            raise InvalidArgumentError("prefix_lens, seq_lens and last_loc differ in length")
        spans = list(zip(prefix_lens, seq_lens, last_loc, strict=True))
        for prefix, seq, last in spans:
            if not 0 <= prefix <= seq:
                raise InvalidArgumentError(f"prefix {prefix} and sequence {seq} lengths")
            if (last + 1) % ps != prefix % ps:
                raise InvalidArgumentError(f"last_loc {last} is not token {prefix - 1}'s slot "
                                           f"(page size {ps})")
            if prefix % ps and not self.allocated(last):
                raise InvalidSlotError(f"last_loc {last} is not handed out")
        if extend_num_tokens != sum(seq - prefix for prefix, seq, _ in spans):
            raise InvalidArgumentError(f"extend_num_tokens {extend_num_tokens} is not the "
                                       "sum of the extensions")
        need = sum(-(-seq // ps) - -(-prefix // ps) for prefix, seq, _ in spans)
        return self._extend(spans, need)

    def alloc_decode(self, seq_lens: Sequence[int], seq_lens_cpu: Sequence[int],
                     last_loc: Sequence[int]) -> list[int] | None:
        """One slot per request for token ``seq_lens[i] - 1``: ``last_loc[i] + 1`` inside a
        page, else a new page's first slot; None (nothing taken) when too few pages are
        free."""
        spans = [(seq - 1, seq, last) for seq, last in zip(seq_lens, last_loc, strict=True)]
        return self.alloc_extend([p for p, _, _ in spans], [], [s for _, s, _ in spans], [],
                                 [last for _, _, last in spans], len(spans))

    def _extend(self, spans: list[tuple[int, int, int]], need: int) -> list[int] | None:
        if self.need_sort and need > len(self.free_pages):
            self.merge_and_sort_free()
        free = self.free_pages
        if need > len(free):
            return None
        ps, taken = self.page_size, 0
        out: list[int] = []
        for prefix, seq, last in spans:
            for pos in range(prefix, seq):
                if pos % ps:  # inside the page of the token before
                    out.append(out[-1] + 1 if pos > prefix else last + 1)
                else:
                    out.append(free[taken] * ps)
                    taken += 1
        pages = free[:taken]
        del free[:taken]
        self._allocated.update(pages)
        return out

    def free_page_ids(self, page_ids: Sequence[int]) -> None:
        """Free exactly these pages, each once, in the order given."""
        pages = self._pages_of([page * self.page_size for page in page_ids], whole=True)
        if pages:
            self._commit(pages)

    def _release(self, pages: list[int]) -> None:
        if self.need_sort:
            self.release_pages.extend(pages)
        else:
            self.free_pages[0:0] = pages
