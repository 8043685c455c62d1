"""Drives one BlockPool through the v1 vocabulary; the only place release API drift lives.

Blocks cross the boundary as ids (``pool.blocks[id]``); requests as
:class:`~properties.families.v1.stand_ins.StandInRequest` whose ``block_hashes`` the target's own
request hasher fills. Snapshots walk the free queue with a bound, so a corrupted (cyclic)
queue is reported instead of hanging.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from models.core.invariants import Violation
from models.families.v1.invariants import Family
from models.families.v1.ops import Req
from models.families.v1.pool_model import Key, Observed, PoolConfig
from properties.families.v1.stand_ins import LoraRef, MMFeature, MMPosition, StandInRequest
from properties.families.v1.targets import PoolTarget


def stand_in(index: int, req: Req) -> StandInRequest:
    lora = None if req.lora is None else LoraRef(req.lora, f"lora{req.lora}", f"/l/{req.lora}")
    mm = [MMFeature(ident, MMPosition(off, length)) for ident, off, length in req.mm]
    return StandInRequest(request_id=f"r{index}", all_token_ids=list(req.tokens),
                          lora_request=lora, cache_salt=req.salt, mm_features=mm,
                          prompt_embeds=req.embeds)


def key_parts(key: bytes) -> Key:
    """A block key (``BlockHashWithGroupId``) as ``(block hash, group id)``: the hash's bytes
    and the 4-byte big-endian group id that ends it."""
    return bytes(key[:-4]), int.from_bytes(key[-4:], "big")


def split_key(key: bytes | None) -> Key | None:
    """:func:`key_parts` of a block's key, ``None`` for a block without one."""
    return None if key is None else key_parts(key)


class PoolAdapter:
    def __init__(self, target: PoolTarget, config: PoolConfig) -> None:
        self.target = target
        self.config = config
        self.pool = target.create(config)
        self._hasher = target.hasher(config.hash_block_size, config.lookahead)
        self.requests: list[StandInRequest] = []
        #: block ids ``unpin_blocks``'s ``on_reuse`` reported, in call order (the executor
        #: drains it); a plain closure, so a deep-copied pool shares it (probes restore it)
        self.reused: list[int] = []
        reused = self.reused
        self.on_reuse = lambda block: reused.append(block.block_id)

    # -------------------------------------------------------------- requests
    def add_request(self, req: Req) -> list[bytes]:
        r = stand_in(len(self.requests), req)
        r.block_hashes.extend(self._hasher(r))
        self.requests.append(r)
        return [bytes(h) for h in r.block_hashes]

    # -------------------------------------------------------------- operations
    def _blocks(self, ids: Sequence[int]) -> list[Any]:
        return [self.pool.blocks[i] for i in ids]

    def get_new_blocks(self, n: int) -> list[int]:
        out = self.pool.get_new_blocks(n)
        if not isinstance(out, list):
            raise Violation(Family.TARGET, "get_new_blocks must return a list", observed=out)
        return [b.block_id for b in out]

    def check_handed_out(self, ids: Sequence[int]) -> None:
        for i in ids:
            b = self.pool.blocks[i]
            shape = (b.ref_cnt, b.block_hash, bool(b.is_null), b.prev_free_block is None
                     and b.next_free_block is None)
            if shape != (1, None, False, True):
                raise Violation(Family.RC, f"handed-out block {i} must be (ref_cnt 1, no hash,"
                                " not null, off the queue)", expected=(1, None, False, True),
                                observed=shape)

    def touch(self, ids: Sequence[int]) -> None:
        blocks = self._blocks(ids)
        self.pool.touch((blocks,) if self.target.caps.touch_per_group else blocks)

    def free_blocks(self, ids: Sequence[int], evict_first: bool = False) -> None:
        if evict_first:
            self.pool.free_blocks(self._blocks(ids), evict_first=True)
        else:
            self.pool.free_blocks(self._blocks(ids))

    def unpin_blocks(self, ids: Sequence[int]) -> None:
        self.pool.unpin_blocks(self._blocks(ids), self.on_reuse)

    def move_block_hashes(self, src: int, dst: int) -> None:
        self.pool.move_block_hashes(self.pool.blocks[src], self.pool.blocks[dst])

    def emit_cached_block_events(self, req: int, num_cached: int, group: int) -> None:
        self.pool.emit_cached_block_events(self.requests[req], num_cached,
                                           self.config.group_block_sizes[group], group)

    def cache_full_blocks(self, req: int, ids: Sequence[int], num_cached: int, num_full: int,
                          group: int, mask: Sequence[bool] | None = None) -> None:
        extra = {} if mask is None else {"block_mask": list(mask)}
        self.pool.cache_full_blocks(self.requests[req], self._blocks(ids), num_cached, num_full,
                                    self.config.group_block_sizes[group], group, **extra)

    def cache_partial_block(self, req: int, block: int, num_tokens: int, group: int,
                            replace: bool = False) -> Any:
        # replace_existing_hashes only when set: a release without it is never given it.
        extra = {"replace_existing_hashes": True} if replace else {}
        return self.pool.cache_partial_block(self.requests[req], self.pool.blocks[block],
                                             num_tokens, group,
                                             self.config.group_block_sizes[group], **extra)

    def get_cached_block(self, hash_: bytes, groups: Sequence[int]) -> list[int] | None:
        out = self.pool.get_cached_block(hash_, list(groups))
        return None if out is None else [b.block_id for b in out]

    def evict_blocks(self, ids: Sequence[int]) -> None:
        self.pool.evict_blocks(set(ids))

    def reset_prefix_cache(self) -> bool:
        return bool(self.pool.reset_prefix_cache())

    def take_events(self) -> list[Any]:
        return list(self.pool.take_events())

    # -------------------------------------------------------------- observation
    def free_queue(self, pool: Any = None) -> list[int]:
        pool = self.pool if pool is None else pool
        queue = pool.free_block_queue
        head = getattr(queue, "fake_free_list_head", None)
        if head is None:
            return [b.block_id for b in queue.get_all_free_blocks()]
        out: list[int] = []
        node = head.next_free_block
        tail = queue.fake_free_list_tail
        while node is not None and node is not tail:
            out.append(node.block_id)
            if len(out) > self.config.num_blocks:
                raise Violation(Family.LEAK, "free queue has a cycle", observed=out[:12])
            node = node.next_free_block
        if node is None:
            raise Violation(Family.LEAK, "free queue does not reach its tail", observed=out)
        return out

    def snapshot(self, pool: Any = None) -> Observed:
        pool = self.pool if pool is None else pool
        blocks = pool.blocks[1:]
        null = pool.null_block
        if null is not pool.blocks[0] or not null.is_null:
            raise Violation(Family.TARGET, "the null block must be block 0, is_null",
                            observed=null)
        writable_of = getattr(pool, "is_block_writable", None)
        writable = (None if writable_of is None
                    else {b.block_id: bool(writable_of(b)) for b in blocks})
        return Observed(ref={b.block_id: b.ref_cnt for b in blocks},
                        free=self.free_queue(pool),
                        primary={b.block_id: split_key(b.block_hash) for b in blocks},
                        num_free=pool.get_num_free_blocks(), usage=pool.get_usage(),
                        writable=writable)
