"""Blocks, the free queue and block hashing of the v1 pool (names as upstream's
``vllm.v1.core.kv_cache_utils``).

Keys. A block's key is ``BlockHashWithGroupId``: the request's chained ``BlockHash`` (bytes) with
the KV-cache group id appended as 4 big-endian bytes, so ``key -> (hash, group)`` is a bijection
whatever the hash length. A ``BlockHash`` is ``hash_fn((parent hash or NONE_HASH, tokens,
extra keys))``; with ``prefixcache.v1.hashing.sha256`` the encoding is injective and the digest
256 bits wide. Extra keys, in order: LoRA (``("lora", name, path, int id)``), multimodal inputs
(``("mm", identifier, offset in block)``), the cache salt (first block only), prompt-embeds
digests: requests that differ in any of them never share a key.

Requests are duck-typed (upstream's ``vllm.v1.request.Request`` or any object with
``block_hashes``, ``all_token_ids``, ``num_tokens``, ``mm_features``, ``lora_request``,
``cache_salt``, ``prompt_embeds`` and optionally ``session_id``).
"""

from __future__ import annotations

import bisect
import hashlib
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NewType, TypeAlias, overload

from prefixcache.v1.errors import (
    CacheConflictError,
    FreeQueueError,
    InvalidArgumentError,
    NoFreeBlocksError,
    PoolArgumentError,
)
from prefixcache.v1.hashing import sha256

if TYPE_CHECKING:
    from prefixcache.v1.core.block_pool import BlockPool

__all__ = [
    "DEFAULT_NONE_HASH_SEED",
    "NONE_HASH",
    "BlockHash",
    "BlockHashList",
    "BlockHashListWithBlockSize",
    "BlockHashWithGroupId",
    "ExternalBlockHash",
    "FreeKVCacheBlockQueue",
    "KVCacheBlock",
    "generate_block_hash_extra_keys",
    "generate_lookahead_block_hash_extra_keys",
    "get_block_hash",
    "get_group_id",
    "get_mm_features_in_window",
    "get_none_hash_seed",
    "get_request_block_hasher",
    "hash_block_tokens",
    "init_none_hash",
    "make_block_hash_with_group_id",
    "maybe_convert_block_hash",
    "resolve_block_hashes",
    "resolve_none_hash_seed",
    "to_event_extra_keys",
]

BlockHash = NewType("BlockHash", bytes)
BlockHashWithGroupId = NewType("BlockHashWithGroupId", bytes)
ExternalBlockHash: TypeAlias = bytes | int

#: Largest group id the 4-byte suffix can carry.
MAX_GROUP_ID = (1 << 32) - 1


#: The 4-byte suffixes of the first group ids, precomputed for the lookup hot path.
GROUP_SUFFIXES = tuple(i.to_bytes(4, "big") for i in range(64))


def make_block_hash_with_group_id(block_hash: BlockHash, group_id: int) -> BlockHashWithGroupId:
    """``block_hash`` with ``group_id`` appended as 4 big-endian bytes (``0 <= group_id < 2**32``;
    ``OverflowError`` otherwise, as upstream)."""
    if type(group_id) is int and 0 <= group_id < 64:
        return BlockHashWithGroupId(block_hash + GROUP_SUFFIXES[group_id])
    return BlockHashWithGroupId(block_hash + group_id.to_bytes(4, "big", signed=False))


def get_block_hash(key: BlockHashWithGroupId) -> BlockHash:
    """The ``BlockHash`` part of a key."""
    return BlockHash(key[:-4])


def get_group_id(key: BlockHashWithGroupId) -> int:
    """The group id part of a key."""
    return int.from_bytes(key[-4:], "big", signed=False)


def maybe_convert_block_hash(hash_bytes: BlockHash) -> ExternalBlockHash:
    """The hash as published in events: the low 64 bits as an int when
    ``VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES`` is ``1`` (upstream's default), else the bytes."""
    if os.environ.get("VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES", "1") == "0":
        return hash_bytes
    return int.from_bytes(hash_bytes, byteorder="big") & ((1 << 64) - 1)


# --- the seed of every chain -------------------------------------------------------------

DEFAULT_NONE_HASH_SEED = "vllm-none-hash"
_NONE_HASH_SEED: str | None = None


def resolve_none_hash_seed(hash_fn: Callable[[Any], bytes]) -> str:
    """``PYTHONHASHSEED`` when set, else the fixed default (every supported hash function is
    cryptographic, so a public seed does not weaken collision resistance)."""
    del hash_fn
    seed = os.getenv("PYTHONHASHSEED")
    return seed if seed is not None else DEFAULT_NONE_HASH_SEED


def get_none_hash_seed() -> str:
    """The seed ``NONE_HASH`` was derived from (the default before ``init_none_hash``)."""
    return DEFAULT_NONE_HASH_SEED if _NONE_HASH_SEED is None else _NONE_HASH_SEED


def init_none_hash(hash_fn: Callable[[Any], bytes]) -> None:
    """Derive ``NONE_HASH``, the parent hash of every first block, with ``hash_fn``."""
    global NONE_HASH, _NONE_HASH_SEED
    seed = resolve_none_hash_seed(hash_fn)
    value = hash_fn(seed)
    if not isinstance(value, bytes) or not value:
        raise InvalidArgumentError("hash_fn must return non-empty bytes")
    _NONE_HASH_SEED = seed
    NONE_HASH = BlockHash(value)


#: Parent hash of first blocks. Initialised with ``prefixcache.v1.hashing.sha256`` at import
#: (upstream leaves it unset until ``init_none_hash``); ``init_none_hash`` replaces it.
NONE_HASH: BlockHash = BlockHash(sha256(resolve_none_hash_seed(sha256)))


# --- blocks and the free queue ---------------------------------------------------------


class _PoolStamp:
    """``_owner``: the pool whose ``blocks`` list holds this very object, set by that pool only
    (at construction, when it is unpickled or deep-copied, or once its checked paths have found
    the block by identity). The pool's hot paths test ``block._owner is self``: one attribute,
    no lookup by id. It is never copied: a copy of a block, or a block built outside a pool
    with ``pool=...``, has none (``AttributeError``), so those paths hand it to the identity
    test, which refuses it (a deep copy of a block deep-copies its pool too, and only that copy
    of the pool stamps it)."""

    __slots__ = ("_owner",)
    _owner: object

    def __getstate__(self) -> object:
        """The default state without ``_owner`` (``copy``, ``deepcopy`` and ``pickle``)."""
        state = object.__getstate__(self)
        if type(state) is tuple and len(state) == 2 and isinstance(state[1], dict):
            slots = {k: v for k, v in state[1].items() if k != "_owner"}
            return state[0], slots or None
        return state


@dataclass(slots=True, eq=False)
class KVCacheBlock(_PoolStamp):
    """Metadata of one KV-cache block.

    ``ref_cnt`` counts holders; a block with ``ref_cnt == 0`` (other than the null block) is in
    its pool's free queue, linked through ``prev_free_block`` / ``next_free_block`` (both
    ``None`` exactly when it is not queued). ``block_hash`` is its primary key (``None`` when it
    has none) and ``block_hash_num_tokens`` the prefix length that key covers. Equality is
    identity (upstream compares fields, recursively through the queue links).
    """

    block_id: int
    ref_cnt: int = 0
    pool: BlockPool | None = field(default=None, repr=False, compare=False, kw_only=True)
    _block_hash: BlockHashWithGroupId | None = None
    _block_hash_num_tokens: int | None = None
    prev_free_block: KVCacheBlock | None = None
    next_free_block: KVCacheBlock | None = None
    is_null: bool = False

    @property
    def block_hash(self) -> BlockHashWithGroupId | None:
        """The primary key, or ``None``."""
        return self._block_hash

    @property
    def block_hash_num_tokens(self) -> int | None:
        """Prefix length covered by the primary key, or ``None``."""
        return self._block_hash_num_tokens

    def set_block_hash(
        self, block_hash: BlockHashWithGroupId, num_tokens: int | None = None
    ) -> None:
        """Give the block its primary key; ``CacheConflictError`` if it already has one."""
        if self._block_hash is not None or self._block_hash_num_tokens is not None:
            raise CacheConflictError(f"block {self.block_id} already has a hash")
        self._block_hash = block_hash
        self._block_hash_num_tokens = num_tokens

    def reset_hash(self) -> None:
        """Drop the primary key (the pool drops the map entries)."""
        self._block_hash = None
        self._block_hash_num_tokens = None

    def __repr__(self) -> str:
        prev_id = self.prev_free_block.block_id if self.prev_free_block else None
        next_id = self.next_free_block.block_id if self.next_free_block else None
        return (
            f"KVCacheBlock(block_id={self.block_id}, ref_cnt={self.ref_cnt}, "
            f"_block_hash={self._block_hash!r}, "
            f"_block_hash_num_tokens={self._block_hash_num_tokens}, "
            f"prev_free_block={prev_id}, next_free_block={next_id})"
        )


class FreeKVCacheBlockQueue:
    """Intrusive doubly linked list of free blocks, in eviction order (head first).

    Order promise (kept by the pool): least recently freed first; among blocks freed together,
    the caller's order (engines free a request's blocks tail first). Sentinels
    ``fake_free_list_head`` / ``fake_free_list_tail`` are never handed out. Every operation is
    O(1) per block, checks its blocks' queue state first and raises ``FreeQueueError`` (a
    ``RuntimeError``) or ``NoFreeBlocksError`` without changing anything.
    """

    def __init__(self, blocks: list[KVCacheBlock]) -> None:
        self.num_free_blocks = len(blocks)
        self.fake_free_list_head = KVCacheBlock(block_id=-1)
        self.fake_free_list_tail = KVCacheBlock(block_id=-1)
        prev = self.fake_free_list_head
        for block in blocks:
            prev.next_free_block = block
            block.prev_free_block = prev
            prev = block
        prev.next_free_block = self.fake_free_list_tail
        self.fake_free_list_tail.prev_free_block = prev

    @staticmethod
    def _is_queued(block: KVCacheBlock) -> bool:
        return block.prev_free_block is not None or block.next_free_block is not None

    def _check_not_queued(self, blocks: Sequence[KVCacheBlock]) -> None:
        seen: set[int] = set()
        for block in blocks:
            if self._is_queued(block) or id(block) in seen:
                raise FreeQueueError(f"block {block.block_id} is already in the free queue")
            if block is self.fake_free_list_head or block is self.fake_free_list_tail:
                raise FreeQueueError("the queue's sentinels cannot be queued")
            seen.add(id(block))

    def popleft(self) -> KVCacheBlock:
        """Remove and return the head block; ``NoFreeBlocksError`` (a ``ValueError``) if empty."""
        first = self.fake_free_list_head.next_free_block
        if first is None or first is self.fake_free_list_tail:
            raise NoFreeBlocksError("No free blocks available")
        self._unlink(first)
        return first

    def popleft_n(self, n: int) -> list[KVCacheBlock]:
        """Remove and return the first ``n`` blocks, in order."""
        if type(n) is not int or n < 0:
            raise PoolArgumentError(f"cannot pop {n!r} blocks")
        if n > self.num_free_blocks:
            raise NoFreeBlocksError(f"cannot pop {n} of {self.num_free_blocks} free blocks")
        head = self.fake_free_list_head
        ret: list[KVCacheBlock] = []
        curr = head.next_free_block
        for _ in range(n):
            if curr is None:  # pragma: no cover - num_free_blocks is exact
                raise FreeQueueError("free list shorter than its count")
            ret.append(curr)
            nxt = curr.next_free_block
            curr.prev_free_block = curr.next_free_block = None
            curr = nxt
        if curr is not None and n:
            head.next_free_block = curr
            curr.prev_free_block = head
        self.num_free_blocks -= n
        return ret

    def _unlink(self, block: KVCacheBlock) -> None:
        prev_block = block.prev_free_block
        next_block = block.next_free_block
        if prev_block is None or next_block is None:
            raise FreeQueueError(f"block {block.block_id} is not in the free queue")
        prev_block.next_free_block = next_block
        next_block.prev_free_block = prev_block
        block.prev_free_block = block.next_free_block = None
        self.num_free_blocks -= 1

    def remove(self, block: KVCacheBlock) -> None:
        """Take ``block`` out of the queue; ``FreeQueueError`` if it is not queued."""
        if block is self.fake_free_list_head or block is self.fake_free_list_tail:
            raise FreeQueueError("the queue's sentinels cannot be removed")
        self._unlink(block)

    def append(self, block: KVCacheBlock) -> None:
        """Queue ``block`` at the tail (evicted last)."""
        self.append_n([block])

    def append_n(self, blocks: list[KVCacheBlock]) -> None:
        """Queue ``blocks`` at the tail, in order."""
        if blocks:
            self._check_not_queued(blocks)
            self._append_unchecked(blocks)

    def prepend_n(self, blocks: list[KVCacheBlock]) -> None:
        """Queue ``blocks`` at the head, in order (``blocks[0]`` is evicted first)."""
        if blocks:
            self._check_not_queued(blocks)
            self._prepend_unchecked(blocks)

    def _append_unchecked(self, blocks: list[KVCacheBlock]) -> None:
        """``append_n`` for callers that know no block is queued (the pool's frees)."""
        tail = self.fake_free_list_tail
        last = tail.prev_free_block
        if last is None:  # pragma: no cover - sentinel links never break
            raise FreeQueueError("tail sentinel lost its link")
        for block in blocks:
            block.prev_free_block = last
            last.next_free_block = block
            last = block
        last.next_free_block = tail
        tail.prev_free_block = last
        self.num_free_blocks += len(blocks)

    def _prepend_unchecked(self, blocks: list[KVCacheBlock]) -> None:
        """``prepend_n`` for callers that know no block is queued (the pool's frees)."""
        head = self.fake_free_list_head
        first = head.next_free_block
        if first is None:  # pragma: no cover - sentinel links never break
            raise FreeQueueError("head sentinel lost its link")
        prev = head
        for block in blocks:
            block.prev_free_block = prev
            prev.next_free_block = block
            prev = block
        prev.next_free_block = first
        first.prev_free_block = prev
        self.num_free_blocks += len(blocks)

    def get_all_free_blocks(self) -> list[KVCacheBlock]:
        """Every queued block, head first (O(n); for tests and checks)."""
        return list(self.iter_blocks_after(None))

    def iter_blocks_after(self, cursor: KVCacheBlock | None) -> Iterator[KVCacheBlock]:
        """Queued blocks in eviction order after ``cursor`` (from the head when ``None``)."""
        curr = (
            self.fake_free_list_head.next_free_block if cursor is None else cursor.next_free_block
        )
        while curr is not None and curr is not self.fake_free_list_tail:
            yield curr
            curr = curr.next_free_block


# --- extra keys --------------------------------------------------------------------------


def get_mm_features_in_window(mm_features: Sequence[Any], start: int, end: int) -> tuple[int, int]:
    """``(lo, hi)``: indices of the features overlapping ``[start, end)`` (features sorted by
    offset and non-overlapping)."""
    lo = bisect.bisect_left(
        mm_features, start + 1, key=lambda f: f.mm_position.offset + f.mm_position.length
    )
    hi = bisect.bisect_left(mm_features, end, key=lambda f: f.mm_position.offset)
    return lo, hi


def _gen_mm_extra_hash_keys(
    request: Any, start_token_idx: int, end_token_idx: int, start_mm_idx: int
) -> tuple[list[Any], int]:
    """``("mm", identifier, offset - block start)`` for each input overlapping the block, and the
    index of the first input the next block can overlap."""
    extra_keys: list[Any] = []
    mm_features = request.mm_features
    if not mm_features:
        return extra_keys, start_mm_idx
    last = mm_features[-1].mm_position
    if last.offset + last.length <= start_token_idx:
        return extra_keys, start_mm_idx
    if start_mm_idx < 0:
        if -start_mm_idx > len(mm_features):
            raise PoolArgumentError(f"start_mm_idx {start_mm_idx} out of range")
        start_mm_idx += len(mm_features)
    idx = start_mm_idx
    while idx < len(mm_features):
        feature = mm_features[idx]
        if feature.identifier is None:
            raise InvalidArgumentError("a multimodal feature has no identifier")
        offset = feature.mm_position.offset
        length = feature.mm_position.length
        if end_token_idx <= offset:
            break
        if start_token_idx >= offset + length:
            idx += 1
            continue
        extra_keys.append(("mm", feature.identifier, offset - start_token_idx))
        if end_token_idx >= offset + length:
            idx += 1
        else:
            break
    return extra_keys, idx


def _gen_lora_extra_hash_keys(request: Any) -> list[tuple[Any, ...]]:
    """``("lora", name, path, int id)``: the int id is unique per loaded adapter, so two adapters
    sharing a name (and even a path) never share KV (upstream keys on name and path only)."""
    lora = request.lora_request
    if not lora:
        return []
    return [("lora", lora.lora_name, lora.lora_path, lora.lora_int_id)]


def _tensor_bytes(value: Any) -> bytes:
    """Raw bytes of a buffer or a (CPU or device) torch tensor."""
    try:
        return memoryview(value).tobytes()
    except TypeError:
        torch = sys.modules.get("torch")
        if torch is None:
            raise InvalidArgumentError(
                f"prompt_embeds of type {type(value).__name__} are not a buffer"
            ) from None
        data: bytes = value.flatten().cpu().contiguous().view(torch.uint8).numpy().tobytes()
        return data


def _gen_prompt_embeds_extra_hash_keys(
    request: Any, start_token_idx: int, end_token_idx: int
) -> list[tuple[str, bytes]]:
    """``("prompt_embeds", sha256 of the block's embeddings)``, cached per block range."""
    if request.prompt_embeds is None:
        return []
    cache: dict[tuple[int, int], bytes] | None = getattr(
        request, "_prompt_embeds_per_block_hashes", None
    )
    block_range = (start_token_idx, end_token_idx)
    digest = cache.get(block_range) if cache is not None else None
    if digest is None:
        digest = hashlib.sha256(
            _tensor_bytes(request.prompt_embeds[start_token_idx:end_token_idx])
        ).digest()
        if cache is not None:
            cache[block_range] = digest
    return [("prompt_embeds", digest)]


def generate_block_hash_extra_keys(
    request: Any, start_token_idx: int, end_token_idx: int, start_mm_idx: int
) -> tuple[tuple[Any, ...] | None, int]:
    """Extra keys of the block ``[start_token_idx, end_token_idx)``: LoRA, multimodal, cache salt
    (first block only), prompt embeds; ``None`` when there are none. Also returns the next
    multimodal index."""
    mm_keys, next_mm_idx = _gen_mm_extra_hash_keys(
        request, start_token_idx, end_token_idx, start_mm_idx
    )
    salt = request.cache_salt
    salt_keys: list[Any] = [("cache_salt", salt)] if start_token_idx == 0 and salt else []
    keys: list[Any] = (
        _gen_lora_extra_hash_keys(request)
        + mm_keys
        + salt_keys
        + _gen_prompt_embeds_extra_hash_keys(request, start_token_idx, end_token_idx)
    )
    return (tuple(keys) if keys else None), next_mm_idx


def generate_lookahead_block_hash_extra_keys(
    request: Any,
    start_token_idx: int,
    end_token_idx: int,
    hash_end_token_idx: int,
    start_mm_idx: int,
) -> tuple[tuple[Any, ...] | None, int]:
    """Extra keys of a block and its lookahead tokens; the multimodal index is rewound to the
    first input that still overlaps the next block."""
    keys, mm_idx = generate_block_hash_extra_keys(
        request, start_token_idx, hash_end_token_idx, start_mm_idx
    )
    while mm_idx > 0:
        pos = request.mm_features[mm_idx - 1].mm_position
        if pos.offset + pos.length <= end_token_idx:
            break
        mm_idx -= 1
    return keys, mm_idx


def to_event_extra_keys(
    extra_keys: Sequence[tuple[Any, ...] | None] | None,
) -> list[tuple[Any, ...] | None] | None:
    """Per-block extra keys in the untagged shape events publish: bare LoRA names, cache salts and
    prompt-embeds digests, ``(identifier, offset)`` pairs for multimodal inputs."""
    if not extra_keys:
        return None
    return [
        None if keys is None else tuple(key[1:] if key[0] == "mm" else key[1] for key in keys)
        for keys in extra_keys
    ]


# --- hashing -----------------------------------------------------------------------------


def hash_block_tokens(
    hash_function: Callable[[Any], bytes],
    parent_block_hash: BlockHash | None,
    curr_block_token_ids: Sequence[int],
    extra_keys: tuple[Any, ...] | None = None,
) -> BlockHash:
    """``hash_function((parent or NONE_HASH, tuple(tokens), extra_keys))``; the result must be
    bytes (``InvalidArgumentError`` otherwise: an int hash such as builtin ``hash`` is neither
    collision resistant nor a valid key)."""
    if not parent_block_hash:
        parent_block_hash = NONE_HASH
    value = hash_function((parent_block_hash, tuple(curr_block_token_ids), extra_keys))
    if not isinstance(value, bytes) or not value:
        raise InvalidArgumentError(
            f"hash_function returned {type(value).__name__}, expected non-empty bytes"
        )
    return BlockHash(value)


def get_request_block_hasher(
    hash_block_size: int,
    caching_hash_fn: Callable[[Any], bytes],
    num_hash_lookahead_tokens: int = 0,
) -> Callable[[Any], list[BlockHash]]:
    """The per-request hasher: returns the hashes of the ``hash_block_size`` blocks completed
    since ``request.block_hashes`` was last extended, chained over the whole prefix.

    With ``num_hash_lookahead_tokens = L > 0`` a block's hash also covers the ``L`` tokens after
    it (its extra keys become ``(E, *those tokens)``) and is produced only once they exist.
    """
    if type(hash_block_size) is not int or hash_block_size <= 0:
        raise PoolArgumentError(f"hash_block_size must be a positive int, got {hash_block_size!r}")
    if type(num_hash_lookahead_tokens) is bool:  # vLLM's callers may pass a flag (0 or 1)
        num_hash_lookahead_tokens = int(num_hash_lookahead_tokens)
    if type(num_hash_lookahead_tokens) is not int or num_hash_lookahead_tokens < 0:
        raise PoolArgumentError("num_hash_lookahead_tokens must be a non-negative int")
    lookahead = num_hash_lookahead_tokens

    def request_block_hasher(request: Any) -> list[BlockHash]:
        start = len(request.block_hashes) * hash_block_size
        num_tokens = request.num_tokens - lookahead
        if start + hash_block_size > num_tokens:
            return []
        mm_idx = 0
        mm_features = request.mm_features
        if start > 0 and mm_features:
            last = mm_features[-1].mm_position
            if last.offset + last.length > start:
                mm_idx, _ = get_mm_features_in_window(mm_features, start, start + hash_block_size)
        parent: BlockHash | None = request.block_hashes[-1] if request.block_hashes else None
        tokens = request.all_token_ids
        new_hashes: list[BlockHash] = []
        while start + hash_block_size <= num_tokens:
            end = start + hash_block_size
            extra: tuple[Any, ...] | None
            if lookahead:
                keys, mm_idx = generate_lookahead_block_hash_extra_keys(
                    request, start, end, end + lookahead, mm_idx
                )
                extra = (keys, *tokens[end : end + lookahead])
            else:
                extra, mm_idx = generate_block_hash_extra_keys(request, start, end, mm_idx)
            parent = hash_block_tokens(caching_hash_fn, parent, tokens[start:end], extra)
            new_hashes.append(parent)
            start = end
        return new_hashes

    return request_block_hasher


class BlockHashListWithBlockSize:
    """A read-only view of ``hash_block_size`` hashes at a coarser ``target_block_size`` (a
    multiple): coarse block ``i``'s hash is the fine hash at its last boundary, which already
    chains over the whole prefix."""

    def __init__(
        self, block_hashes: list[BlockHash], hash_block_size: int, target_block_size: int
    ) -> None:
        if (
            hash_block_size <= 0
            or target_block_size <= 0
            or target_block_size % hash_block_size != 0
        ):
            raise PoolArgumentError(
                f"block size {target_block_size} is not a multiple of {hash_block_size}"
            )
        self.block_hashes = block_hashes
        self.scale_factor = target_block_size // hash_block_size

    def __len__(self) -> int:
        return len(self.block_hashes) // self.scale_factor

    @overload
    def __getitem__(self, idx: int) -> BlockHash: ...

    @overload
    def __getitem__(self, idx: slice) -> list[BlockHash]: ...

    def __getitem__(self, idx: int | slice) -> BlockHash | list[BlockHash]:
        if isinstance(idx, slice):
            return [self._get_value_at(i) for i in range(*idx.indices(len(self)))]
        if isinstance(idx, int):
            n = len(self)
            if idx < 0:
                idx += n
            if not 0 <= idx < n:
                raise IndexError(idx)
            return self._get_value_at(idx)
        raise TypeError(f"Invalid index type: {type(idx)!r}")

    def __iter__(self) -> Iterator[BlockHash]:
        for i in range(len(self)):
            yield self._get_value_at(i)

    def _get_value_at(self, idx: int) -> BlockHash:
        return self.block_hashes[(idx + 1) * self.scale_factor - 1]


BlockHashList = list[BlockHash] | BlockHashListWithBlockSize


def resolve_block_hashes(
    block_hashes: BlockHashList,
    hash_block_size: int,
    block_size: int,
    *,
    supports_fine_grained_hash_lookup: bool = False,
    alignment_tokens: int | None = None,
) -> BlockHashList:
    """The request's hashes viewed at ``block_size`` (itself when the sizes match, or when
    fine-grained lookups at ``alignment_tokens < block_size`` keep the raw hashes)."""
    if block_size == hash_block_size:
        return block_hashes
    if isinstance(block_hashes, BlockHashListWithBlockSize):
        if block_hashes.scale_factor * hash_block_size != block_size:
            raise PoolArgumentError("block-hash view has another block size")
        return block_hashes
    if (
        supports_fine_grained_hash_lookup
        and alignment_tokens is not None
        and alignment_tokens < block_size
        and block_size % alignment_tokens == 0
    ):
        return block_hashes
    return BlockHashListWithBlockSize(block_hashes, hash_block_size, block_size)
