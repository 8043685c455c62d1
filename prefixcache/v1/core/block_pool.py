"""The v1 block pool (names and semantics of upstream's ``vllm.v1.core.block_pool``, 0.33.0, with
0.34.0's ``free_blocks(..., evict_first)``).

State and invariants, kept by every method (checked by ``tests/v1/allocator``):

- ``blocks[0]`` is ``null_block``: never queued, never keyed, skipped by ``touch`` /
  ``free_blocks``; its ``ref_cnt`` is not maintained.
- Every other block has ``ref_cnt >= 0`` and is in ``free_block_queue`` exactly when
  ``ref_cnt == 0``; ``get_num_free_blocks()`` is the queue's length.
- ``cached_block_hash_to_block`` maps each key to the blocks it reaches (several blocks may share
  a key: block tables are append-only, so duplicates are not merged). A block reachable under a
  key has it as its primary ``block_hash`` or in ``cached_block_hashes_by_block[block_id]``
  (aliases at other prefix lengths), and vice versa. A block has at most one key per prefix
  length.
- Replaying ``take_events()`` into ``KVEventReplica`` yields exactly the map's keys (when events
  are enabled).

Every method validates its whole input before changing anything: a typed error
(``prefixcache.v1.errors``) leaves the pool, its blocks and its event queue as they were. The
hot paths check as they go and undo what they did at the first entry they do not take:
``touch`` counts held blocks and hands the rest of the call to a pass that also unlinks free
ones; ``free_blocks`` counts down and links keyed blocks after the queue's last block, the tail
sentinel re-linked only after the pass; ``cache_full_blocks`` keys fresh held blocks and defers
anything else to its checked path, from the state as it was. Ownership is identity with the
pool's own object (``blocks[b.block_id] is b``); the hot paths test it as ``b._owner is pool``,
a stamp only the pool sets on its own objects and that no copy of a block carries (anything
unstamped goes to the identity test). Each operation costs O(1) per block (or key) it touches.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from operator import length_hint
from typing import Any, Protocol

from prefixcache.v1 import kv_events
from prefixcache.v1.core.kv_cache_utils import (
    GROUP_SUFFIXES,
    MAX_GROUP_ID,
    BlockHash,
    BlockHashList,
    BlockHashWithGroupId,
    ExternalBlockHash,
    FreeKVCacheBlockQueue,
    KVCacheBlock,
    generate_block_hash_extra_keys,
    generate_lookahead_block_hash_extra_keys,
    get_block_hash,
    get_group_id,
    get_mm_features_in_window,
    make_block_hash_with_group_id,
    maybe_convert_block_hash,
    resolve_block_hashes,
    to_event_extra_keys,
)
from prefixcache.v1.errors import (
    CacheConflictError,
    DoubleFreeError,
    ForeignBlockError,
    FreeQueueError,
    InvalidBlockError,
    InvalidBlockIdError,
    MissingBlockHashesError,
    NoFreeBlocksError,
    PoolArgumentError,
    UnheldBlockError,
)
from prefixcache.v1.kv_events import MEDIUM_GPU, KVCacheEvent

__all__ = ["BlockHashToBlockMap", "BlockPool", "KVCacheMetricsCollector"]

logger = logging.getLogger(__name__)

#: Group 0, the lookup hot path's group list (compared, never mutated) and its key suffix.
_GROUP_0 = 0
_ONLY_GROUP_0 = [_GROUP_0]
_SUFFIX_0 = GROUP_SUFFIXES[0]


class KVCacheMetricsCollector(Protocol):
    """What the pool calls on an optional metrics collector (upstream's class of that name)."""

    def on_block_allocated(self, block: KVCacheBlock) -> None: ...
    def on_block_accessed(self, block: KVCacheBlock) -> None: ...
    def on_block_evicted(self, block: KVCacheBlock) -> None: ...
    def reset(self) -> None: ...


class BlockHashToBlockMap:
    """Key -> block(s). A key reaching one block stores the block itself, several a
    ``{block_id: block}`` dict in insertion order (upstream's layout, to spare the GC).

    ``_group0`` mirrors group 0's entries keyed by the bare ``BlockHash``, each to the block
    ``get_one_block`` returns (the first-inserted): the lookup hot path builds no key and takes
    no branch. Every change of ``_cache`` goes through this class or keeps the mirror itself."""

    def __init__(self) -> None:
        self._cache: dict[BlockHashWithGroupId, KVCacheBlock | dict[int, KVCacheBlock]] = {}
        self._group0: dict[BlockHash, KVCacheBlock] = {}

    def get_one_block(self, key: BlockHashWithGroupId) -> KVCacheBlock | None:
        """The first-inserted block under ``key``, or ``None``."""
        blocks = self._cache.get(key)
        if blocks is None or isinstance(blocks, KVCacheBlock):
            return blocks
        return next(iter(blocks.values()))

    def contain(self, key: BlockHashWithGroupId, block_id: int) -> bool:
        """Whether ``key`` reaches the block ``block_id``."""
        blocks = self._cache.get(key)
        if blocks is None:
            return False
        if isinstance(blocks, KVCacheBlock):
            return blocks.block_id == block_id
        return block_id in blocks

    def num_blocks(self, key: BlockHashWithGroupId) -> int:
        """How many blocks ``key`` reaches."""
        blocks = self._cache.get(key)
        if blocks is None:
            return 0
        return 1 if isinstance(blocks, KVCacheBlock) else len(blocks)

    def _set(
        self, key: BlockHashWithGroupId, value: KVCacheBlock | dict[int, KVCacheBlock]
    ) -> None:
        self._cache[key] = value
        if key.endswith(_SUFFIX_0):
            self._group0[key[:-4]] = (  # type: ignore[index]
                value if isinstance(value, KVCacheBlock) else next(iter(value.values()))
            )

    def _delete(self, key: BlockHashWithGroupId) -> None:
        del self._cache[key]
        if key.endswith(_SUFFIX_0):
            del self._group0[key[:-4]]  # type: ignore[arg-type]

    def insert(self, key: BlockHashWithGroupId, block: KVCacheBlock) -> None:
        """Make ``key`` reach ``block`` too (no-op if it already does)."""
        blocks = self._cache.get(key)
        if blocks is None:
            self._set(key, block)
        elif isinstance(blocks, KVCacheBlock):
            if blocks.block_id != block.block_id:
                self._set(key, {blocks.block_id: blocks, block.block_id: block})
        else:
            blocks[block.block_id] = block

    def pop(self, key: BlockHashWithGroupId, block_id: int) -> KVCacheBlock | None:
        """Stop ``key`` reaching ``block_id``; the block, or ``None`` (nothing changes) if it
        did not."""
        blocks = self._cache.get(key)
        if blocks is None:
            return None
        if isinstance(blocks, KVCacheBlock):
            if blocks.block_id != block_id:
                return None
            self._delete(key)
            return blocks
        block = blocks.pop(block_id, None)
        if not blocks:  # a dict that shrinks to one block stays a dict, as upstream's
            self._delete(key)
        elif key.endswith(_SUFFIX_0):  # the first block may have gone
            self._group0[key[:-4]] = next(iter(blocks.values()))  # type: ignore[index]
        return block

    def iter_blocks(self) -> Iterable[KVCacheBlock]:
        """Every (key, block) pair's block, with repeats for blocks under several keys."""
        for blocks in self._cache.values():
            if isinstance(blocks, KVCacheBlock):
                yield blocks
            else:
                yield from blocks.values()

    def __len__(self) -> int:
        return len(self._cache)

    def __bool__(self) -> bool:
        return bool(self._cache)


def _check_count(value: object, what: str) -> int:
    if type(value) is not int or value < 0:
        raise PoolArgumentError(f"{what} must be a non-negative int, got {value!r}")
    return value


def _check_group_id(value: object) -> int:
    if type(value) is not int or not 0 <= value <= MAX_GROUP_ID:
        raise PoolArgumentError(f"kv_cache_group_id must be an int in [0, 2**32), got {value!r}")
    return value


class BlockPool:
    """Allocates, frees and caches KV-cache blocks.

    Args as upstream: ``num_gpu_blocks`` (> 0, block 0 becomes the null block),
    ``enable_caching``, ``hash_block_size`` (granularity of ``request.block_hashes``; a group's
    block size is a multiple of it), ``enable_kv_cache_events``, ``metrics_collector``,
    ``num_hash_lookahead_tokens``, ``medium`` (reported in events).

    ``kv_event_classes`` names the classes events are built from (any object with
    ``BlockStored``, ``BlockRemoved`` and ``AllBlocksCleared`` taking upstream's fields):
    ``prefixcache.v1.kv_events`` by default; an engine that publishes events sets it to
    ``vllm.distributed.kv_events`` so its publisher and ``KVCacheManager`` see its own types.
    """

    kv_event_classes: Any = kv_events

    def __init__(
        self,
        num_gpu_blocks: int,
        enable_caching: bool,
        hash_block_size: int,
        enable_kv_cache_events: bool = False,
        metrics_collector: KVCacheMetricsCollector | None = None,
        num_hash_lookahead_tokens: int = 0,
        medium: str = MEDIUM_GPU,
    ) -> None:
        if type(num_gpu_blocks) is not int or num_gpu_blocks <= 0:
            raise PoolArgumentError(
                f"num_gpu_blocks must be a positive int, got {num_gpu_blocks!r}"
            )
        if type(hash_block_size) is not int or hash_block_size <= 0:
            raise PoolArgumentError(
                f"hash_block_size must be a positive int, got {hash_block_size!r}"
            )
        if type(num_hash_lookahead_tokens) is bool:  # vLLM's callers may pass a flag (0 or 1)
            num_hash_lookahead_tokens = int(num_hash_lookahead_tokens)
        _check_count(num_hash_lookahead_tokens, "num_hash_lookahead_tokens")
        self.num_gpu_blocks = num_gpu_blocks
        self.medium = medium
        self.enable_caching = enable_caching
        self.hash_block_size = hash_block_size
        self.num_hash_lookahead_tokens = num_hash_lookahead_tokens
        self.blocks: list[KVCacheBlock] = [
            KVCacheBlock(idx, pool=self) for idx in range(num_gpu_blocks)
        ]
        self.free_block_queue = FreeKVCacheBlockQueue(self.blocks)
        self.cached_block_hash_to_block = BlockHashToBlockMap()
        #: ``cached_block_hash_to_block._cache`` itself (one attribute load on the lookup path);
        #: re-pointed wherever the map is replaced.
        self._key_map = self.cached_block_hash_to_block._cache
        #: ``cached_block_hash_to_block._group0`` (group 0 by bare hash), likewise.
        self._group0_map = self.cached_block_hash_to_block._group0
        #: block id -> its alias keys (insertion ordered), each with the prefix length it covers.
        self.cached_block_hashes_by_block: dict[int, dict[BlockHashWithGroupId, int | None]] = {}
        self.null_block = self.free_block_queue.popleft()
        self.null_block.is_null = True
        #: ``blocks`` with ``None`` in the null block's slot: ``_members[b.block_id] is b`` is the
        #: ownership test of the checked paths, and it sends the null block to their rare branch.
        self._members: list[KVCacheBlock | None] = [None, *self.blocks[1:]]
        self._stamp_members()
        self.enable_kv_cache_events = enable_kv_cache_events
        self.kv_event_queue: list[KVCacheEvent] = []
        self.metrics_collector = metrics_collector
        self._reuse_watchers: dict[int, Callable[[KVCacheBlock], None]] = {}

    @property
    def metrics_collector(self) -> KVCacheMetricsCollector | None:
        """The optional metrics collector (upstream's attribute; settable)."""
        return self._metrics_collector

    @metrics_collector.setter
    def metrics_collector(self, collector: KVCacheMetricsCollector | None) -> None:
        self._metrics_collector = collector
        #: What ``touch``'s fast path compares each block's ``_owner`` with: the pool, or with a
        #: collector an object no block carries, so that every call takes the observed path.
        self._touch_owner: object = object() if collector is not None else self

    def __setstate__(self, state: dict[str, Any]) -> None:
        """A deep copy or an unpickled pool: its blocks come without ``_owner``; stamp them."""
        self.__dict__.update(state)
        self._stamp_members()

    # --- ownership and validation -----------------------------------------------------

    def _stamp_members(self) -> None:
        # ``_owner`` (``kv_cache_utils._PoolStamp``) is the hot paths' ownership test: set on the
        # pool's own objects, never on the null block (those paths send it to their rare branch
        # as they do a block of another pool).
        for block in self._members[1:]:
            block._owner = self  # type: ignore[union-attr]

    def _owns(self, block: object) -> bool:
        # Identity with the pool's own object decides; a negative or foreign id can only index
        # some other block object (block ids are positions), so it fails the identity test.
        try:
            return self.blocks[block.block_id] is block  # type: ignore[attr-defined]
        except (AttributeError, IndexError, TypeError):
            return False

    def _check_owned(self, block: object) -> KVCacheBlock:
        if not self._owns(block):
            raise ForeignBlockError(f"{block!r} is not a block of this pool")
        return block  # type: ignore[return-value]

    def _check_release(self, blocks: Sequence[KVCacheBlock], what: str) -> list[KVCacheBlock]:
        """The non-null entries of ``blocks`` (all this pool's), each at most ref_cnt times."""
        owned: list[KVCacheBlock] = []
        counts: dict[int, int] = {}
        for block in blocks:
            self._check_owned(block)
            if block.is_null:
                continue
            # Found by identity: (re-)stamped (a shallow copy of the pool takes the stamps).
            block._owner = self  # type: ignore[misc]
            seen = counts.get(block.block_id, 0) + 1
            if seen > block.ref_cnt:
                raise DoubleFreeError(
                    f"cannot {what} block {block.block_id}: ref_cnt {block.ref_cnt} "
                    f"would drop below zero"
                )
            counts[block.block_id] = seen
            owned.append(block)
        return owned

    # --- keys and events --------------------------------------------------------------

    def _block_keys(self, block: KVCacheBlock) -> list[BlockHashWithGroupId]:
        keys: list[BlockHashWithGroupId] = []
        if block._block_hash is not None:
            keys.append(block._block_hash)
        aliases = self.cached_block_hashes_by_block.get(block.block_id)
        if aliases:
            keys.extend(aliases)
        return keys

    def _remove_cached_block_hashes(self, block: KVCacheBlock) -> list[BlockHashWithGroupId]:
        """Drop every key of ``block``; return the keys that now reach no block at all."""
        keys = self._block_keys(block)
        if not keys:
            return []
        self.cached_block_hashes_by_block.pop(block.block_id, None)
        gone: list[BlockHashWithGroupId] = []
        cache = self.cached_block_hash_to_block
        for key in keys:
            cache.pop(key, block.block_id)
            if key not in cache._cache:
                gone.append(key)
        block.reset_hash()
        return gone

    def _emit_block_removed_events(self, keys: list[BlockHashWithGroupId]) -> None:
        if not self.enable_kv_cache_events:
            return
        for key in keys:
            self.kv_event_queue.append(
                self.kv_event_classes.BlockRemoved(
                    block_hashes=[maybe_convert_block_hash(get_block_hash(key))],
                    medium=self.medium,
                    group_idx=get_group_id(key),
                )
            )

    def _insert_block_hash(
        self, key: BlockHashWithGroupId, block: KVCacheBlock, num_tokens: int | None
    ) -> None:
        """Make ``key`` reach ``block``: as its primary key if it has none, else as an alias."""
        if block._block_hash == key:
            return
        if block._block_hash is None:
            block.set_block_hash(key, num_tokens=num_tokens)
        else:
            self.cached_block_hashes_by_block.setdefault(block.block_id, {})[key] = num_tokens
        self.cached_block_hash_to_block.insert(key, block)

    def _has_key_for_length(self, block: KVCacheBlock, num_tokens: int) -> bool:
        if block._block_hash_num_tokens == num_tokens:
            return True
        aliases = self.cached_block_hashes_by_block.get(block.block_id)
        return bool(aliases) and num_tokens in aliases.values()  # type: ignore[union-attr]

    def generate_event_extra_keys(
        self, request: Any, start: int, end: int, start_mm_idx: int
    ) -> tuple[tuple[Any, ...] | None, int]:
        """The extra keys an event reports for the block ``[start, end)`` of ``request``
        (and the next multimodal index): they cover the window its key covers, the lookahead
        tokens included (vLLM 0.34's public name and signature)."""
        if self.num_hash_lookahead_tokens:
            return generate_lookahead_block_hash_extra_keys(
                request, start, end, end + self.num_hash_lookahead_tokens, start_mm_idx
            )
        return generate_block_hash_extra_keys(request, start, end, start_mm_idx)

    def get_lookahead_token_ids(self, request: Any, block_end: int) -> list[int]:
        """The ``num_hash_lookahead_tokens`` tokens after ``block_end`` that the block's key
        covers, as events report them (vLLM 0.34's public name and signature)."""
        return list(request.all_token_ids[block_end : block_end + self.num_hash_lookahead_tokens])

    def _stored_event(
        self,
        request: Any,
        hashes: BlockHashList,
        first: int,
        stop: int,
        block_size: int,
        kv_cache_group_id: int,
    ) -> KVCacheEvent:
        """``BlockStored`` for the consecutive blocks ``[first, stop)`` of ``request``."""
        block_hashes: list[ExternalBlockHash] = []
        extra_keys: list[tuple[Any, ...] | None] = []
        lookahead: list[list[int]] | None = [] if self.num_hash_lookahead_tokens else None
        mm_idx = 0
        mm_features = request.mm_features
        if first and mm_features:
            mm_idx, _ = get_mm_features_in_window(
                mm_features, first * block_size, (first + 1) * block_size
            )
        for i in range(first, stop):
            block_hashes.append(maybe_convert_block_hash(hashes[i]))
            keys, mm_idx = self.generate_event_extra_keys(
                request, i * block_size, (i + 1) * block_size, mm_idx
            )
            extra_keys.append(keys)
            if lookahead is not None:
                lookahead.append(self.get_lookahead_token_ids(request, (i + 1) * block_size))
        parent = maybe_convert_block_hash(hashes[first - 1]) if first else None
        return self._block_stored(request, block_hashes, parent, first * block_size,
                                  stop * block_size, block_size, extra_keys, lookahead,
                                  kv_cache_group_id)

    def _block_stored(
        self,
        request: Any,
        block_hashes: list[ExternalBlockHash],
        parent: ExternalBlockHash | None,
        start: int,
        end: int,
        block_size: int,
        extra_keys: list[tuple[Any, ...] | None],
        lookahead: list[list[int]] | None,
        kv_cache_group_id: int,
    ) -> KVCacheEvent:
        """The ``BlockStored`` of ``block_hashes``, each naming ``block_size`` of the request's
        tokens ``[start, end)``, under ``parent``."""
        lora = request.lora_request
        event: KVCacheEvent = self.kv_event_classes.BlockStored(
            block_hashes=block_hashes,
            parent_block_hash=parent,
            token_ids=list(request.all_token_ids[start:end]),
            block_size=block_size,
            lora_id=lora.lora_int_id if lora else None,
            medium=self.medium,
            lora_name=lora.lora_name if lora else None,
            extra_keys=to_event_extra_keys(extra_keys),
            group_idx=kv_cache_group_id,
            session_id=getattr(request, "session_id", None),
            lookahead_token_ids=lookahead,
        )
        return event

    def _partial_stored_event(
        self, request: Any, num_tokens: int, block_size: int, kv_cache_group_id: int
    ) -> KVCacheEvent:
        """``BlockStored`` for a partial block keyed at ``num_tokens``: its tokens from the
        block's start (``block_size`` is their count: one hash names them), and as parent the
        key of the block before it (the request's hash at the block boundary; None for the
        first block). Upstream names the fine-grained hash just before ``num_tokens`` instead,
        which no event ever stored (vllm#58119): a router cannot attach the block to its
        prefix tree."""
        start = (num_tokens - 1) // block_size * block_size
        hbs = self.hash_block_size
        hashes = request.block_hashes
        mm_idx = 0
        if start and request.mm_features:
            mm_idx, _ = get_mm_features_in_window(request.mm_features, start, num_tokens)
        keys, _ = self.generate_event_extra_keys(request, start, num_tokens, mm_idx)
        parent = maybe_convert_block_hash(hashes[start // hbs - 1]) if start else None
        lookahead = ([self.get_lookahead_token_ids(request, num_tokens)]
                     if self.num_hash_lookahead_tokens else None)
        key = maybe_convert_block_hash(hashes[num_tokens // hbs - 1])
        return self._block_stored(request, [key], parent, start, num_tokens, num_tokens - start,
                                  [keys], lookahead, kv_cache_group_id)

    def _check_block_size(self, block_size: object) -> int:
        if type(block_size) is not int or block_size <= 0 or block_size % self.hash_block_size != 0:
            raise PoolArgumentError(
                f"block_size must be a positive multiple of hash_block_size "
                f"{self.hash_block_size}, got {block_size!r}"
            )
        return block_size

    # --- lookups ----------------------------------------------------------------------

    def get_cached_block(
        self, block_hash: BlockHash, kv_cache_group_ids: list[int]
    ) -> list[KVCacheBlock] | None:
        """One block per group reached by ``block_hash`` (the first cached when several are), or
        ``None`` if any group misses. A list equal to ``[0]`` is looked up in group 0's mirror by
        the bare hash."""
        if kv_cache_group_ids == _ONLY_GROUP_0:
            # The hot path: group 0 alone (a list of one id equal to 0), looked up by the bare
            # hash: no key is built.
            found = self._group0_map.get(block_hash)
            if found is not None:
                return [found]
            if type(block_hash) is bytes:
                return None
            # Not bytes: the key built below refuses it (or misses) as the key map would.
        cache = self._key_map
        if len(kv_cache_group_ids) == 1:
            group_id = kv_cache_group_ids[0]
            try:  # GROUP_SUFFIXES[group_id] raises IndexError past the precomputed ids
                if type(group_id) is int and group_id >= 0:
                    hit = cache.get(block_hash + GROUP_SUFFIXES[group_id])  # type: ignore[call-overload]
                else:
                    hit = cache.get(make_block_hash_with_group_id(block_hash, group_id))
            except IndexError:
                hit = cache.get(make_block_hash_with_group_id(block_hash, group_id))
            if hit is None:
                return None
            if type(hit) is dict:
                hit = next(iter(hit.values()))
            return [hit]
        cached: list[KVCacheBlock] = []
        for group_id in kv_cache_group_ids:
            if type(group_id) is int and 0 <= group_id < 64:
                blocks = cache.get(BlockHashWithGroupId(block_hash + GROUP_SUFFIXES[group_id]))
            else:
                blocks = cache.get(make_block_hash_with_group_id(block_hash, group_id))
            if blocks is None:
                return None
            if isinstance(blocks, dict):
                blocks = next(iter(blocks.values()))
            cached.append(blocks)
        return cached

    # --- caching ----------------------------------------------------------------------

    def cache_full_blocks(
        self,
        request: Any,
        blocks: list[KVCacheBlock],
        num_cached_blocks: int,
        num_full_blocks: int,
        block_size: int,
        kv_cache_group_id: int,
        block_mask: list[bool] | None = None,
    ) -> None:
        """Key ``blocks[num_cached_blocks:num_full_blocks]`` (now full) with the request's hashes
        at ``block_size``, skipping the null block and blocks whose ``block_mask`` entry is false.

        A block already keyed with the same key is left alone; one keyed for a shorter prefix (a
        partial entry) is promoted; any other existing key is a ``CacheConflictError``. Blocks
        must be this pool's and held. Emits one ``BlockStored`` per run of consecutive newly keyed
        blocks, so each event's tokens, parent and hashes describe the same blocks.
        """
        if (
            type(num_cached_blocks) is not int
            or type(num_full_blocks) is not int
            or num_cached_blocks < 0
        ):
            _check_count(num_cached_blocks, "num_cached_blocks")  # raises, or:
            _check_count(num_full_blocks, "num_full_blocks")  # raises
        if num_cached_blocks >= num_full_blocks:
            # (``num_full_blocks > num_cached_blocks >= 0`` past this test.)
            if num_full_blocks < 0:
                _check_count(num_full_blocks, "num_full_blocks")  # raises
            return
        if num_full_blocks > len(blocks):
            raise PoolArgumentError(f"num_full_blocks {num_full_blocks} > {len(blocks)} blocks")
        hash_block_size = self.hash_block_size
        # ``block_size is hash_block_size`` (the same int object: the common case) needs no test.
        resolve = block_size is not hash_block_size
        if resolve and (
            type(block_size) is not int or block_size <= 0 or block_size % hash_block_size
        ):
            self._check_block_size(block_size)  # raises
        # Group 0's keys are mirrored; another group's go to a throwaway dict (fast path below).
        if kv_cache_group_id is _GROUP_0:
            suffix = _SUFFIX_0
            mirror: dict[Any, KVCacheBlock] = self._group0_map
        elif type(kv_cache_group_id) is int and 0 <= kv_cache_group_id < 64:
            suffix = GROUP_SUFFIXES[kv_cache_group_id]
            mirror = {}
        else:
            _check_group_id(kv_cache_group_id)
            suffix = make_block_hash_with_group_id(BlockHash(b""), kv_cache_group_id)
            mirror = {}
        new_full_blocks = blocks[num_cached_blocks:num_full_blocks]
        if block_mask is not None and len(block_mask) != len(new_full_blocks):
            raise PoolArgumentError(
                f"block_mask has {len(block_mask)} entries for {len(new_full_blocks)} blocks"
            )
        block_hashes = request.block_hashes
        if resolve and block_size != hash_block_size:
            block_hashes = resolve_block_hashes(block_hashes, hash_block_size, block_size)
        if len(block_hashes) < num_full_blocks:
            raise MissingBlockHashesError(
                f"request has {len(block_hashes)} block hashes at block size {block_size}, "
                f"{num_full_blocks} needed"
            )
        if block_mask is None:
            # The common case in one pass: every block this pool's, held, keyless and its key new
            # to the map; each is keyed as it is checked. Anything else (the null block, a
            # duplicate, a key already present, every refusal) undoes that pass's prefix and
            # takes the checked path below, from the state as it was.
            cache = self._key_map
            index = num_cached_blocks
            try:
                for block in new_full_blocks:
                    if (
                        block._owner is not self
                        or block.ref_cnt <= 0
                        or block._block_hash is not None
                    ):
                        break
                    block_hash = block_hashes[index]
                    new_key: BlockHashWithGroupId = block_hash + suffix
                    if new_key in cache:
                        break
                    mirror[block_hash] = block
                    cache[new_key] = block
                    index += 1
                    block._block_hash = new_key
                    block._block_hash_num_tokens = index * block_size
                else:
                    if self.enable_kv_cache_events:
                        self.kv_event_queue.append(
                            self._stored_event(request, block_hashes, num_cached_blocks,
                                               num_full_blocks, block_size, kv_cache_group_id)
                        )
                    return
            except Exception:  # the checked path reports it, from the state before
                pass
            for block in new_full_blocks[: index - num_cached_blocks]:
                keyed = block._block_hash
                if keyed is None:  # pragma: no cover - keyed just above
                    continue
                del cache[keyed]
                del mirror[keyed[:-4]]
                block._block_hash = block._block_hash_num_tokens = None
        # Validate everything first (nothing changes on a typed error), then apply the plan.
        plan: list[tuple[int, KVCacheBlock, BlockHashWithGroupId, bool]] = []
        seen: dict[int, None] = {}
        pool_blocks = self.blocks
        for offset, block in enumerate(new_full_blocks):
            try:
                if pool_blocks[block.block_id] is not block:
                    raise ForeignBlockError(f"{block!r} is not a block of this pool")
            except (AttributeError, IndexError, TypeError):
                raise ForeignBlockError(f"{block!r} is not a block of this pool") from None
            if block.is_null or (block_mask is not None and not block_mask[offset]):
                continue
            block_id = block.block_id
            if block.ref_cnt <= 0:
                raise UnheldBlockError(f"block {block_id} is free; only held blocks are cached")
            if block_id in seen:
                raise PoolArgumentError(f"block {block_id} appears twice")
            seen[block_id] = None
            index = num_cached_blocks + offset
            # A key is the hash with the group suffix (``make_block_hash_with_group_id``); the
            # ``BlockHashWithGroupId`` call is left out: NewType calls cost a C call per block.
            key: BlockHashWithGroupId = block_hashes[index] + suffix
            current = block._block_hash
            if current is not None:
                if current == key:
                    continue
                held = block._block_hash_num_tokens
                if held is None or held >= (index + 1) * block_size:
                    raise CacheConflictError(
                        f"block {block_id} is already cached under another key ({held} tokens)"
                    )
            plan.append((index, block, key, current is not None))

        events = self.enable_kv_cache_events
        run_start = -1
        prev_index = -2
        cache_map = self.cached_block_hash_to_block
        for index, block, key, promote in plan:
            if promote:
                self._emit_block_removed_events(self._remove_cached_block_hashes(block))
            # The block is keyless now: ``_insert_block_hash`` of a primary key, inlined.
            block._block_hash = key
            block._block_hash_num_tokens = (index + 1) * block_size
            cache_map.insert(key, block)
            if events and index != prev_index + 1:
                if run_start >= 0:
                    self.kv_event_queue.append(
                        self._stored_event(
                            request,
                            block_hashes,
                            run_start,
                            prev_index + 1,
                            block_size,
                            kv_cache_group_id,
                        )
                    )
                run_start = index
            prev_index = index
        if events and run_start >= 0:
            self.kv_event_queue.append(
                self._stored_event(
                    request,
                    block_hashes,
                    run_start,
                    prev_index + 1,
                    block_size,
                    kv_cache_group_id,
                )
            )

    def emit_cached_block_events(
        self, request: Any, num_cached_blocks: int, block_size: int, kv_cache_group_id: int
    ) -> None:
        """Announce (``BlockStored``) the request's first ``num_cached_blocks`` blocks, reused
        from the cache, without changing any state. Only keys actually in the cache map are
        announced (the leading run of them), so replicas never learn a key the pool lacks."""
        _check_count(num_cached_blocks, "num_cached_blocks")
        self._check_block_size(block_size)
        _check_group_id(kv_cache_group_id)
        if not self.enable_kv_cache_events or num_cached_blocks == 0:
            return
        block_hashes = resolve_block_hashes(request.block_hashes, self.hash_block_size, block_size)
        stop = min(num_cached_blocks, len(block_hashes))
        cache = self.cached_block_hash_to_block._cache
        present = 0
        while present < stop and (
            make_block_hash_with_group_id(block_hashes[present], kv_cache_group_id) in cache
        ):
            present += 1
        if present:
            self.kv_event_queue.append(
                self._stored_event(request, block_hashes, 0, present, block_size, kv_cache_group_id)
            )

    def cache_partial_block(
        self,
        request: Any,
        block: KVCacheBlock,
        num_tokens: int,
        kv_cache_group_id: int,
        block_size: int,
        replace_existing_hashes: bool = False,
    ) -> BlockHashWithGroupId | None:
        """Make the held ``block`` reachable under the request's hash at the ``num_tokens``
        prefix boundary (a positive multiple of ``hash_block_size``); returns that key, or
        ``None`` for the null block.

        The key becomes the block's primary key if it has none, or if its primary key covers a
        shorter prefix (then every old key is dropped); otherwise it is an alias. A second,
        different key for a prefix length the block already has a key for is a
        ``CacheConflictError``. ``replace_existing_hashes`` drops every old key first (the
        block's contents were replaced).
        """
        self._check_owned(block)
        if block.is_null:
            return None
        self._check_block_size(block_size)
        _check_group_id(kv_cache_group_id)
        if type(num_tokens) is not int or num_tokens <= 0 or num_tokens % self.hash_block_size != 0:
            raise PoolArgumentError(
                f"num_tokens must be a positive multiple of {self.hash_block_size}, "
                f"got {num_tokens!r}"
            )
        num_hash_blocks = num_tokens // self.hash_block_size
        if num_hash_blocks > len(request.block_hashes):
            raise MissingBlockHashesError(
                f"request has {len(request.block_hashes)} block hashes, {num_hash_blocks} needed"
            )
        if block.ref_cnt <= 0:
            raise UnheldBlockError(f"block {block.block_id} is free; only held blocks are cached")
        key = make_block_hash_with_group_id(
            request.block_hashes[num_hash_blocks - 1], kv_cache_group_id
        )
        already_cached = block._block_hash == key or key in self.cached_block_hashes_by_block.get(
            block.block_id, ()
        )
        primary_tokens = block._block_hash_num_tokens
        replace = replace_existing_hashes or (
            not already_cached
            and block._block_hash is not None
            and primary_tokens is not None
            and primary_tokens < num_tokens
        )
        if not replace:
            if already_cached:
                return key
            if self._has_key_for_length(block, num_tokens):
                raise CacheConflictError(
                    f"block {block.block_id} already has a different key for {num_tokens} tokens"
                )
        else:
            self._emit_block_removed_events(self._remove_cached_block_hashes(block))
        self._insert_block_hash(key, block, num_tokens)
        if self.enable_kv_cache_events:
            self.kv_event_queue.append(
                self._partial_stored_event(request, num_tokens, block_size, kv_cache_group_id)
            )
        return key

    def move_block_hashes(self, src_block: KVCacheBlock, dst_block: KVCacheBlock) -> None:
        """Re-point every key of ``src_block`` to ``dst_block`` (a private copy of its contents).
        Keys stay reachable throughout, so no events are emitted. ``dst_block`` must be a keyless,
        non-null block of this pool."""
        self._check_owned(src_block)
        self._check_owned(dst_block)
        if dst_block.is_null or src_block is dst_block:
            raise CacheConflictError("keys cannot move to the null block or onto themselves")
        if self._block_keys(dst_block):
            raise CacheConflictError(f"block {dst_block.block_id} already has keys")
        primary = src_block._block_hash
        if primary is None:
            return
        num_tokens = src_block._block_hash_num_tokens
        aliases = self.cached_block_hashes_by_block.pop(src_block.block_id, None)
        cache = self.cached_block_hash_to_block
        cache.pop(primary, src_block.block_id)
        cache.insert(primary, dst_block)
        if aliases:
            for key in aliases:
                cache.pop(key, src_block.block_id)
                cache.insert(key, dst_block)
            self.cached_block_hashes_by_block[dst_block.block_id] = aliases
        src_block.reset_hash()
        dst_block.set_block_hash(primary, num_tokens=num_tokens)

    # --- allocation -------------------------------------------------------------------

    def get_new_blocks(self, num_blocks: int) -> list[KVCacheBlock]:
        """Take ``num_blocks`` blocks from the head of the free queue, each keyless and with
        ``ref_cnt == 1``; ``NoFreeBlocksError`` (a ``ValueError``) if fewer are free. A taken
        block loses its keys (``BlockRemoved`` for keys no other block still has), whether or
        not caching is enabled."""
        if type(num_blocks) is not int or num_blocks < 0:
            _check_count(num_blocks, "num_blocks")  # raises
        queue = self.free_block_queue
        if num_blocks > queue.num_free_blocks:
            raise NoFreeBlocksError(f"Cannot get {num_blocks} free blocks from the pool")
        if self._metrics_collector is not None or self._reuse_watchers:
            return self._get_new_blocks_observed(num_blocks)
        # The hot path: ``FreeKVCacheBlockQueue.popleft_n`` inlined, each block's keys dropped
        # as it is taken.
        aliases = self.cached_block_hashes_by_block
        cache = self._key_map
        group0 = self._group0_map
        head = queue.fake_free_list_head
        # (Queued blocks and the sentinels always link on: the ``None`` of the type is unreachable.)
        block: KVCacheBlock = head.next_free_block  # type: ignore[assignment]
        ret: list[KVCacheBlock] = []
        for _ in range(num_blocks):
            if block._block_hash is not None or (aliases and block.block_id in aliases):
                key = block._block_hash
                if (
                    key is not None
                    and cache.get(key) is block
                    and not (aliases and block.block_id in aliases)
                ):
                    # The common eviction: one key, reaching this block only. It is
                    # ``_remove_cached_block_hashes`` for that case, inlined. The group-0
                    # mirror reaches this block exactly when ``key`` is of group 0: a block
                    # without aliases has no other key (cheaper than a suffix test).
                    del cache[key]
                    bare = key[:-4]
                    if group0.get(bare) is block:  # type: ignore[call-overload]
                        del group0[bare]  # type: ignore[arg-type]
                    block._block_hash = block._block_hash_num_tokens = None
                    if self.enable_kv_cache_events:
                        self._emit_block_removed_events([key])
                else:
                    self._emit_block_removed_events(self._remove_cached_block_hashes(block))
            block.ref_cnt = 1
            ret.append(block)
            block.prev_free_block = None
            # Unlinked, and ``block`` moves on to the next one (the old block's link is cleared
            # first: the targets are assigned left to right).
            block.next_free_block, block = None, block.next_free_block  # type: ignore[assignment]
        # ``block`` is the first block left (or the tail sentinel): the new head.
        head.next_free_block = block
        block.prev_free_block = head
        queue.num_free_blocks -= num_blocks
        return ret

    def _get_new_blocks_observed(self, num_blocks: int) -> list[KVCacheBlock]:
        """``get_new_blocks`` (checked) with a metrics collector or blocks awaiting reuse
        watchers: the blocks are taken first, watchers told, then keys dropped."""
        ret = self.free_block_queue.popleft_n(num_blocks)
        if self._reuse_watchers:
            self._notify_reuse(ret)
        metrics = self._metrics_collector
        aliases = self.cached_block_hashes_by_block
        evict_metrics = metrics is not None and self.enable_caching
        for block in ret:
            if evict_metrics:
                metrics.on_block_evicted(block)  # type: ignore[union-attr]
            if block._block_hash is not None or block.block_id in aliases:
                self._emit_block_removed_events(self._remove_cached_block_hashes(block))
            block.ref_cnt = 1
            if metrics is not None:
                metrics.on_block_allocated(block)
        return ret

    def _notify_reuse(self, blocks: Iterable[KVCacheBlock]) -> None:
        for block in blocks:
            watcher = self._reuse_watchers.pop(block.block_id, None)
            if watcher is not None:
                watcher(block)

    def unpin_blocks(
        self, blocks: Iterable[KVCacheBlock], on_reuse: Callable[[KVCacheBlock], None]
    ) -> None:
        """Drop one reference per entry; blocks reaching ``ref_cnt == 0`` join the queue tail
        (evicted last) whether keyed or not. ``on_reuse`` is called when ``get_new_blocks`` hands
        such a block out again (or the cache is reset)."""
        listed = list(blocks)
        for block in listed:
            if self._owns(block) and block.is_null:
                raise InvalidBlockError("the null block cannot be unpinned")
        owned = self._check_release(listed, "unpin")
        released: list[KVCacheBlock] = []
        for block in owned:
            block.ref_cnt -= 1
            self._reuse_watchers[block.block_id] = on_reuse
            if block.ref_cnt == 0:
                released.append(block)
        self.free_block_queue.append_n(released)

    def _maybe_evict_cached_block(self, block: KVCacheBlock) -> bool:
        """Drop every key of ``block`` (it stays allocated or queued where it is); whether it had
        any."""
        self._check_owned(block)
        if self._metrics_collector is not None:
            self._metrics_collector.on_block_evicted(block)
        if block._block_hash is None and block.block_id not in self.cached_block_hashes_by_block:
            return False
        self._emit_block_removed_events(self._remove_cached_block_hashes(block))
        return True

    def touch(self, blocks: Sequence[KVCacheBlock]) -> None:
        """Add a reference to each entry (a cache hit); a free block leaves the queue. The null
        block is skipped. Every entry must be this pool's."""
        if type(blocks) is not list:
            blocks = list(blocks)
        owner = self._touch_owner
        # The fast path, for held blocks of this pool: count the reference as we go. Anything
        # else (a free block, an entry that is not this pool's, a metrics collector) ends it at
        # that entry, and ``_touch_rest`` takes over from there. (Hit lists are short: the
        # fixed cost per call is kept low.)
        try:
            for block in blocks:
                if block._owner is not owner:
                    if block is self.null_block:
                        continue
                    break
                ref = block.ref_cnt
                if not ref:
                    break
                block.ref_cnt = ref + 1
            else:
                return
        except (AttributeError, IndexError, TypeError):  # not a block: refused like a foreign one
            pass
        self._touch_rest(blocks, block)

    def _touch_rest(self, listed: Sequence[KVCacheBlock], stop: object) -> None:
        """``touch`` from the entry ``stop`` on, the entries before it already counted: free
        blocks leave the queue after the pass; a refused entry undoes the whole pass."""
        # ``stop`` is the first entry that is ``stop`` by identity: any earlier one would have
        # stopped the fast path too (a free block is counted at its first entry).
        start = next(i for i, entry in enumerate(listed) if entry is stop)
        if self._metrics_collector is not None:  # ``_touch_owner`` is no pool's: none counted
            self._touch_observed(listed)
            return
        members = self._members
        null = self.null_block
        queued: list[KVCacheBlock] = []
        index = start
        try:
            for index in range(start, len(listed)):
                block = listed[index]
                if members[block.block_id] is not block:
                    if block is null:
                        continue
                    break
                if block.ref_cnt == 0:
                    queued.append(block)
                block.ref_cnt += 1
            else:
                queue = self.free_block_queue
                for block in queued:  # ``FreeKVCacheBlockQueue._unlink``, inlined
                    prev_block = block.prev_free_block
                    next_block = block.next_free_block
                    if prev_block is None or next_block is None:  # pragma: no cover
                        raise FreeQueueError(f"block {block.block_id} is not in the free queue")
                    prev_block.next_free_block = next_block
                    next_block.prev_free_block = prev_block
                    block.prev_free_block = block.next_free_block = None
                queue.num_free_blocks -= len(queued)
                return
        except (AttributeError, IndexError, TypeError):  # not a block: refused like a foreign one
            pass
        # ``listed[index]`` is refused; every entry before it was counted (the null block
        # excepted).
        refused = listed[index]
        for counted in listed[:index]:
            if counted is not null:
                counted.ref_cnt -= 1
        raise ForeignBlockError(f"{refused!r} is not a block of this pool")

    def _touch_observed(self, listed: Sequence[KVCacheBlock]) -> None:
        """``touch`` with a metrics collector: every entry checked first, then one
        ``on_block_accessed`` per non-null entry as its reference is added."""
        pool_blocks = self.blocks
        for block in listed:
            try:
                owned = pool_blocks[block.block_id] is block
            except (AttributeError, IndexError, TypeError):
                owned = False
            if not owned:
                raise ForeignBlockError(f"{block!r} is not a block of this pool")
        queue = self.free_block_queue
        metrics = self._metrics_collector
        null = self.null_block
        for block in listed:
            if block is null:
                continue
            if block.ref_cnt == 0:
                queue._unlink(block)
            block.ref_cnt += 1
            if metrics is not None:
                metrics.on_block_accessed(block)

    def is_block_writable(self, block: KVCacheBlock) -> bool:
        """Whether the block's sole holder may write it: not null, ``ref_cnt == 1``, keyless."""
        return not block.is_null and block.ref_cnt == 1 and block.block_hash is None

    def free_blocks(
        self, ordered_blocks: Iterable[KVCacheBlock], evict_first: bool = False
    ) -> None:
        """Drop one reference per entry, in eviction-priority order (first evicted first).
        Blocks reaching ``ref_cnt == 0`` re-enter the queue: keyless ones (or all, with caching
        off or ``evict_first``: another tier holds their contents) at the head, keyed ones at
        the tail, each group in the given order. The null block is skipped; blocks of another
        ``BlockPool`` are freed there. A block listed more times than it is held is a
        ``DoubleFreeError``."""
        listed = ordered_blocks if type(ordered_blocks) is list else list(ordered_blocks)
        caching = self.enable_caching and not evict_first
        to_head: list[KVCacheBlock] = []
        queue = self.free_block_queue
        tail = queue.fake_free_list_tail
        # Fast path, one pass: decrement as we go; an entry that is refused (not this pool's
        # block, or not held) ends it, and the pass is undone below. Keyless blocks reaching
        # zero (all, with caching off) are kept for the head; keyed ones are linked as we go
        # after the queue's last block ``last_queued``, the tail sentinel re-linked after the
        # pass (so the chain hangs off the queue only until then).
        last_queued = tail.prev_free_block
        if last_queued is None:  # pragma: no cover - sentinel links never break
            raise FreeQueueError("tail sentinel lost its link")
        last = last_queued
        linked = 0
        entries = iter(listed)
        try:
            for block in entries:
                if block._owner is not self:
                    if block is self.null_block:
                        continue
                    break
                ref = block.ref_cnt
                if ref > 1:  # still held: the common case of a shared prefix
                    block.ref_cnt = ref - 1
                    continue
                if ref < 1:  # not held: refused below
                    break
                block.ref_cnt = 0
                if block._block_hash is None or not caching:
                    to_head.append(block)
                else:
                    block.prev_free_block = last
                    last.next_free_block = block
                    last = block
                    linked += 1
            else:
                if linked:
                    last.next_free_block = tail
                    tail.prev_free_block = last
                    queue.num_free_blocks += linked
                if to_head:  # ``FreeKVCacheBlockQueue._prepend_unchecked``, inlined
                    prev = queue.fake_free_list_head
                    first: KVCacheBlock = prev.next_free_block  # type: ignore[assignment]
                    for block in to_head:
                        block.prev_free_block = prev
                        prev.next_free_block = block
                        prev = block
                    prev.next_free_block = first
                    first.prev_free_block = prev
                    queue.num_free_blocks += len(to_head)
                return
        except Exception:  # not a block: refused like a foreign one (the checked path reports it)
            pass
        # Refused: unhook the chain, restore the counts; the refused entry is the last one the
        # iterator handed out. The checked path raises, or frees other pools' blocks too.
        chained = last_queued.next_free_block
        while chained is not None and chained is not tail:
            following = chained.next_free_block
            chained.prev_free_block = chained.next_free_block = None
            chained = following
        last_queued.next_free_block = tail
        self._undo_free(listed[: len(listed) - length_hint(entries) - 1])
        self._free_checked(listed, evict_first)

    def _undo_free(self, blocks: list[KVCacheBlock]) -> None:
        for block in blocks:
            if not block.is_null:
                block.ref_cnt += 1

    def _free_checked(self, listed: list[KVCacheBlock], evict_first: bool = False) -> None:
        """``free_blocks`` with every entry checked first, other pools' blocks routed there."""
        own: list[KVCacheBlock] = []
        others: dict[int, tuple[BlockPool, list[KVCacheBlock]]] = {}
        for block in listed:
            pool = getattr(block, "pool", None)
            if pool is not self and isinstance(pool, BlockPool) and pool._owns(block):
                others.setdefault(id(pool), (pool, []))[1].append(block)
            else:
                own.append(block)
        released = self._check_release(own, "free")
        checked = [(pool, pool._check_release(blocks, "free")) for pool, blocks in others.values()]
        self._release(released, evict_first)
        for pool, blocks in checked:
            pool._release(blocks, evict_first)

    def _release(self, blocks: list[KVCacheBlock], evict_first: bool = False) -> None:
        """Drop one reference per entry of ``blocks`` (checked by ``_check_release``, so the
        fast path of :meth:`free_blocks` takes them all) and queue those reaching zero."""
        self.free_blocks(blocks, evict_first)

    def evict_blocks(self, block_ids: Iterable[int]) -> None:
        """Drop the keys of the blocks ``block_ids`` (held blocks stay held, free ones stay
        queued). Ids outside ``[0, num_gpu_blocks)`` raise ``InvalidBlockIdError``."""
        ids = list(block_ids)
        for block_id in ids:
            if type(block_id) is not int or not 0 <= block_id < self.num_gpu_blocks:
                raise InvalidBlockIdError(
                    f"Invalid block_id {block_id!r}: not in [0, {self.num_gpu_blocks})"
                )
        for block_id in ids:
            self._maybe_evict_cached_block(self.blocks[block_id])

    def reset_prefix_cache(self) -> bool:
        """Drop every key if no block but the null block is in use (``AllBlocksCleared``);
        ``False`` and no change otherwise."""
        num_used = self.num_gpu_blocks - self.free_block_queue.num_free_blocks
        if num_used != 1:
            logger.warning(
                "Failed to reset prefix cache because some blocks (%d) are not freed yet",
                num_used - 1,
            )
            return False
        keyed = list(self.cached_block_hash_to_block.iter_blocks())
        self.cached_block_hash_to_block = BlockHashToBlockMap()
        self._key_map = self.cached_block_hash_to_block._cache
        self._group0_map = self.cached_block_hash_to_block._group0
        self.cached_block_hashes_by_block.clear()
        if self._reuse_watchers:
            self._notify_reuse([self.blocks[block_id] for block_id in list(self._reuse_watchers)])
        for block in keyed:
            block.reset_hash()
        if self._metrics_collector is not None:
            self._metrics_collector.reset()
        if self.enable_kv_cache_events:
            self.kv_event_queue.append(self.kv_event_classes.AllBlocksCleared())
        return True

    # --- accounting -------------------------------------------------------------------

    def get_num_free_blocks(self) -> int:
        """Blocks in the free queue (free or evictable)."""
        return self.free_block_queue.num_free_blocks

    def get_usage(self) -> float:
        """Fraction of the non-null blocks in use, in ``[0, 1]``."""
        total = self.num_gpu_blocks - 1
        if not total:
            return 0.0
        return 1.0 - (self.free_block_queue.num_free_blocks / total)

    def take_events(self) -> list[KVCacheEvent]:
        """Every event since the last call, oldest first; the queue is emptied."""
        if not self.enable_kv_cache_events:
            return []
        events = self.kv_event_queue
        self.kv_event_queue = []
        return events
