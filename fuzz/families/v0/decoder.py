"""Bytes to programs of the shared operation vocabulary (``models.families.v0.operations``).

A :class:`Decoder` reads its pool shape from the first bytes, then produces one operation at a
time from the bytes that follow, asking the oracle (the model of the program so far) which
choices exist: live handles, blocks that may be appended to, contents already cached (so
allocations hit), chains that may be swapped or forked, tables running on the GPU. Every
operation it returns is in contract for the target's capabilities:

- nothing the model calls out of contract (``Oracle.contract_error``);
- misuse (double free, over-append, ...) only for targets claiming typed errors and atomicity;
- for a target that does not claim atomicity, nothing the model says would run out of free
  blocks half way (``Oracle.would_fail_no_free``).

Byte layout: ``[block size] [GPU blocks] [CPU blocks] [prompts (sequence level)]`` then per
operation an opcode byte (``byte % len(table)`` over a fixed weighted table of generators) and
the generator's own choices. A generator may queue a follow-up generator, which runs next
without an opcode byte (with default choices if the bytes have run out). A generator that finds
nothing to act on, or whose operation is not admissible, is skipped with its follow-up;
decoding stops at ``max_ops`` operations or when the bytes run out and no follow-up is queued,
so every input terminates after at most ``2 * len(data)`` generator calls.

Block level only: four GPU-byte values of 256 select a *long pool* (room for a chain longer
than CPython's default recursion limit of 1000 frames; block size 1 or 2). There the table
gains a long-chain production: an opcode byte, a length rung and a short token pattern build an
immutable chain of up to :data:`LONG_CHAIN_BLOCKS` blocks, and its follow-up is one operation
that walks the whole chain (fork by default, swap, or a chain query). Programs there stop after
:data:`LONG_POOL_MAX_OPS` operations, since every step's snapshot is linear in the live blocks.
The block level also drives ``BlockTable`` operations at a low weight: only a table chains a
block after an empty one (growing by several blocks for lookahead slots).

Block and sequence level: one opcode entry is the *extension entry*, whose next byte picks
among table queries, sliding-window tables, the null block (read-outs, refused writes),
engine-side operations (sequence trackers only for targets whose adapter finds them:
:meth:`Decoder.use_adapter`; block refcount/device queries and ``hash_block_tokens``
likewise), refused re-allocation of a live table and malformed arguments.
Extra hashes are the alphabet's ints or ``None``, or request keys (``ExtraKey``) whose fields
the target folds in (:func:`extras_for`).
Adding an operation there is one weighted production; the opcode bytes of the others keep
their meaning.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, replace

from fuzz.core.bytesource import ByteSource
from fuzz.families.v0.alphabet import (
    ADVERSARIAL_EXTRA_KEYS,
    ADVERSARIAL_EXTRAS,
    MERSENNE_61,
    PLAIN_EXTRA_KEYS,
    PLAIN_EXTRAS,
    adversarial_token,
    plain_token,
)
from models.families.v0 import operations as ops
from models.families.v0.capabilities import Capabilities, Config
from models.families.v0.malformed import ARGUMENTS, bad_values
from models.families.v0.operations import Dev, Op, Tokens
from models.families.v0.ops import construction
from models.families.v0.oracle import Oracle
from models.families.v0.request_keys import KEY_ARGUMENTS  # request keys
from models.families.v0.request_keys import bad_values as key_bad_values
from models.families.v0.window import holds_null
from properties.families.v0.judge import V0Judge

MAX_OPS = 48
MAX_BLOCK_SIZE = 16
MAX_GPU_BLOCKS = 12
MAX_CPU_BLOCKS = 6

#: A chain past CPython's default recursion limit (1000 frames): code that walks a chain by
#: recursion fails on it.
LONG_CHAIN_BLOCKS = 1100
#: Lengths the long-chain production draws from (the last rung is the one that matters; the
#: others are cheap and exercise long-but-legal chains, hits on them and exhaustion).
LONG_CHAIN_RUNGS: tuple[int, ...] = (64, LONG_CHAIN_BLOCKS, LONG_CHAIN_BLOCKS)
#: GPU blocks of a long pool: one longest chain plus a tiny pool's worth of room.
LONG_POOL_GPU_BLOCKS = LONG_CHAIN_BLOCKS + MAX_GPU_BLOCKS
#: GPU-byte values from this one up select the long pool (block level; 252 = 21 * 12, so the
#: tiny pool sizes stay uniform over the other values).
LONG_POOL_BYTE = 252
#: Operations per program in a long pool (each step costs ~10 ms there, ~0.5 ms in a tiny one).
LONG_POOL_MAX_OPS = 4
#: Block sizes of a long pool: 1 or 2 (what matters there is the chain's length in blocks, and
#: every token costs hashing and model time).
LONG_POOL_MAX_BLOCK_SIZE = 2


#: Misuse the model asks a typed error for, but that a pooled-block allocator cannot always
#: detect: a fork of a chain holding a freed block whose object the block pool has already
#: handed out again, and a second ``free()`` of an (empty) block table. Not generated until
#: the contract settles them.
DISPUTED_MISUSE: tuple[type[Op], ...] = (ops.Fork, ops.TableFree)


class Level(enum.Enum):
    """Which part of the vocabulary a harness exercises; the value is the harness name."""

    BLOCK = "block_level"
    SEQUENCE = "sequence_level"
    HASHING = "hashing"


#: The engine's per-sequence tracker operations (only for targets that have the trackers).
TRACKER_OPS: tuple[type[Op], ...] = (ops.TrackerStart, ops.SeqTrack, ops.SeqUntrack,
                                     ops.SeqCachedTokens, ops.SeqComputedIds, ops.SeqAccess,
                                     ops.SeqStampBlocks,
                                     ops.SeqTrackerEdit)  # stale ids: ``_tracker_edit``
TRACKER_KINDS = frozenset(cls.kind for cls in TRACKER_OPS)
#: What the extension entry produces at both levels (see ``Decoder._extension_table``), at the
#: block level only (questions about block handles) and at the sequence level only (the
#: per-sequence trackers).
_BOTH_EXTRAS: tuple[type[Op], ...] = (ops.TableSlots, ops.IdSpace, ops.SwapLog, ops.Malformed,
                                      ops.NullBlockQuery, ops.NullBlockMisuse,
                                      ops.TableReallocate)
_BLOCK_EXTRAS: tuple[type[Op], ...] = (ops.CommonComputedIds, ops.HitBurst, ops.BlockInfo,
                                       *ops.HASH_OPS)  # content hash: ``_content_hash``
_BLOCK_EXTRAS += ops.EVICTOR_OPS  # evictor level: ``_evictor_op``
EVICTOR_KINDS = frozenset(cls.kind for cls in ops.EVICTOR_OPS)
#: Evictor level: the block ids (re-added after evict/remove), the few times (drawn in any
#: order: ties, times that go back) and the token counts of ``_evictor_op``.
EVICTOR_IDS = 8
EVICTOR_TIMES: tuple[float, ...] = (0.0, 1.0, 2.0, 3.0, 7.5)
EVICTOR_MAX_TOKENS = 4
_BLOCK_EXTRAS += ops.REFCOUNT_OPS  # refcount level: ``_refcount_op``
REFCOUNT_KINDS = frozenset(cls.kind for cls in ops.REFCOUNT_OPS)
#: Refcount level: counters are built over ids ``0..REFCOUNT_IDS-1`` (duplicates allowed).
REFCOUNT_IDS = 6
# device calls: ``_device_call`` (``DeviceFreeId`` is the machines' only: it needs a naive
# allocator's ``free_block_id``)
_BLOCK_EXTRAS += (ops.DeviceSwap, ops.DeviceSwapMisuse, ops.DeviceMisuse)
DEVICE_KINDS = frozenset(cls.kind for cls in ops.DEVICE_OPS)
DEVICE_MISUSE_KINDS = frozenset({ops.DeviceSwapMisuse.kind, ops.DeviceMisuse.kind})
# end device calls
# construction: ``_construct`` (an allocator built beside the program's) over a few ids of
# ``CONSTRUCT_IDS`` (the largest id too)
_BLOCK_EXTRAS += (ops.Construct,)
_BLOCK_EXTRAS += (ops.InjectedHash,)  # ``_injected_hash``
CONSTRUCT_IDS: tuple[int, ...] = (0, 1, 2, 3, 5, 8, 13, 2**64 - 1)
# end construction
#: Extension kinds that are misuse by definition (only for targets with typed errors and
#: atomicity, as ``malformed``).
MISUSE_KINDS = frozenset({"malformed", "null_block_misuse", "table_reallocate"})

ALL_KINDS = frozenset(ops.OPS_BY_KIND)
LEVEL_KINDS: dict[Level, frozenset[str]] = {
    Level.BLOCK: frozenset(cls.kind for cls in (*ops.BLOCK_OPS, *ops.TABLE_OPS, *_BLOCK_EXTRAS,
                                                *_BOTH_EXTRAS)),
    Level.SEQUENCE: frozenset(cls.kind for cls in (*ops.TABLE_OPS, *_BOTH_EXTRAS,
                                                   *TRACKER_OPS)),
    Level.HASHING: frozenset({"allocate_immutable", "allocate_immutable_chain", "table_allocate",
                              "append", "allocate_mutable", "free", "table_free", "fork",
                              "cached_prefix", "reset_prefix_cache", "mark_computed"}),
}
# stale ids: a stale id list at the block level (``_mark_stale``)
LEVEL_KINDS[Level.BLOCK] |= {ops.MarkStaleIds.kind}
# freed behind: a table's block freed behind it, the computed tracker told it lost blocks
LEVEL_KINDS[Level.SEQUENCE] |= {ops.TableFreeBlock.kind, ops.SeqLostBlocks.kind}


def decode_config(src: ByteSource, caps: Capabilities, *, long_pool: bool = False) -> Config:
    """Block size 1..16, 1..12 GPU blocks, 0..6 CPU blocks (0 without swap); with
    ``long_pool``, GPU bytes from :data:`LONG_POOL_BYTE` up select
    :data:`LONG_POOL_GPU_BLOCKS` GPU blocks of size 1 or 2."""
    block_size = 1 + src.below(MAX_BLOCK_SIZE)
    gpu_byte = src.byte()
    if long_pool and gpu_byte >= LONG_POOL_BYTE:
        gpu = LONG_POOL_GPU_BLOCKS
        block_size = 1 + (block_size - 1) % LONG_POOL_MAX_BLOCK_SIZE
    else:
        gpu = 1 + gpu_byte % MAX_GPU_BLOCKS
    cpu = src.below(MAX_CPU_BLOCKS + 1)
    return Config(block_size, gpu, cpu if caps.swap else 0, caps)


Generator = Callable[[Oracle], Op | None]


@dataclass(frozen=True, slots=True)
class _Entry:
    weight: int
    make: Generator


class Decoder:
    """Decodes ``data`` for ``level`` against the capabilities ``caps``; feed it the oracle
    that judges the program after each step (``next_op``)."""

    def __init__(self, data: bytes, level: Level, caps: Capabilities, *,
                 max_ops: int = MAX_OPS, trackers: bool = False,
                 block_info: bool = False, hash_recompute: bool = False,
                 evictor: bool = False, refcount: bool = False,
                 device_calls: bool = False, construct: bool = False,
                 injected_hash: bool = False) -> None:
        self.src = ByteSource(data)
        self.level = level
        self.caps = caps
        self.trackers = trackers
        self.block_info = block_info
        self.hash_recompute = hash_recompute
        self.evictor = evictor  # evictor level
        self.refcount = refcount  # refcount level
        self.device_calls = device_calls  # device calls
        self.construct = construct  # construction
        self.injected_hash = injected_hash  # create takes hash_function
        self.config = decode_config(self.src, caps, long_pool=level is Level.BLOCK)
        self.long_pool = self.config.num_gpu_blocks > MAX_GPU_BLOCKS
        self.max_ops = min(max_ops, LONG_POOL_MAX_OPS) if self.long_pool else max_ops
        self.bs = self.config.block_size
        self.devices = (Dev.GPU, Dev.CPU) if self.config.num_cpu_blocks else (Dev.GPU,)
        self.adversarial = level is Level.HASHING
        self.extras = extras_for(caps, adversarial=self.adversarial)
        self.misuse_allowed = caps.typed_errors and caps.atomic
        self.clock = 0.0
        self.emitted = 0
        self.seen_blocks: set[int] = set()
        self.seen_tables: set[int] = set()
        self.prompts: list[Tokens] = []
        self.op_starts: list[int] = []  # byte offset where each emitted operation began
        self.then: Generator | None = None  # a production's follow-up, run before the next pick
        if level is Level.SEQUENCE:
            for _ in range(1 + self.src.below(3)):
                self.prompts.append(self._tokens(self.src.int_in(self.bs, 3 * self.bs)))
        self.table = self._opcode_table()
        self.extensions = self._extension_table()

    def use_adapter(self, *, trackers: bool, block_info: bool, hash_recompute: bool,
                    evictor: bool = False, refcount: bool = False,
                    device_calls: bool = False, construct: bool = False,
                    injected_hash: bool = False) -> None:
        """What the target's adapter finds once an allocator exists (after the pool shape is
        decoded): the engine's sequence trackers, ``get_block_refcount``/``get_block_device``
        (``BlockInfo``), the blocks' ``hash_block_tokens`` (``HashRecompute``) and the GPU
        allocator's evictor class (``EVICTOR_OPS``) and its counter and CoW tracker classes
        (``REFCOUNT_OPS``), and its per-device allocators (``DEVICE_OPS``). Call before the
        first operation."""
        self.trackers = trackers
        self.block_info = block_info
        self.hash_recompute = hash_recompute
        self.evictor = evictor  # evictor level
        self.refcount = refcount  # refcount level
        self.device_calls = device_calls  # device calls
        self.construct = construct  # construction: the allocator classes (``Construct``)
        self.injected_hash = injected_hash  # create takes hash_function (``InjectedHash``)
        self.extensions = self._extension_table()

    def attach(self, judge: V0Judge) -> None:
        """Offer what the judge's target adapter finds (:meth:`use_adapter`)."""
        from fuzz.families.v0.features import adapter_features

        self.use_adapter(**adapter_features(judge.runner))

    # ------------------------------------------------------------------ driving

    def next_op(self, judge: V0Judge | Oracle) -> Op | None:
        """The next admissible operation (following the judge's model, or a bare oracle), or
        None when the program ends."""
        oracle = judge.oracle if isinstance(judge, V0Judge) else judge
        self.seen_blocks.update(oracle.live_blocks())
        self.seen_tables.update(oracle.live_tables())
        while self.emitted < self.max_ops and (self.then or not self.src.exhausted):
            start = self.src.consumed
            make = self.then or self.src.pick(self.table)
            self.then = None
            op = make(oracle)
            if op is not None and self.admissible(oracle, op):
                self.emitted += 1
                self.op_starts.append(start)
                return op
            self.then = None  # a skipped production takes its follow-up with it
        return None

    def kinds(self) -> frozenset[str]:
        """The operation kinds this decoder can produce (its opcode table's generators may
        each produce a few kinds; this is what a seed corpus should cover)."""
        return LEVEL_KINDS[self.level] & self.available_kinds()

    def available_kinds(self) -> frozenset[str]:
        caps = self.caps
        out = set(ALL_KINDS)
        if not caps.vllm_api:
            out -= {"cached_prefix", "count_full_touched", "reset_prefix_cache"}
        if not caps.aphrodite_api:
            out -= {"computed_block_ids", "count_touched"}
        if len(self.devices) < 2:
            out -= {"swap", "table_swap"}
        if not caps.prefix_caching:
            out -= {"hit_burst"}
        if not self.trackers:
            out -= TRACKER_KINDS
        if not caps.vllm_api:
            out -= {"seq_cached_tokens"}  # the vLLM computed tracker's question
        if not caps.aphrodite_api:
            out -= {"seq_computed_ids"}  # the Aphrodite computed tracker's question
        if not self.block_info:
            out -= {"block_info"}
        if not caps.prefix_caching:  # content hash: prefix-caching blocks only
            out -= {cls.kind for cls in ops.HASH_OPS}
        elif not self.hash_recompute:  # int-like allocations need no hash_block_tokens
            out -= {ops.HashRecompute.kind}
        if not self.misuse_allowed:
            out -= MISUSE_KINDS
        if not self.evictor:  # evictor level: no evictor class the adapter can build
            out -= EVICTOR_KINDS
        if not self.refcount:  # refcount level: no counter/tracker classes the adapter can build
            out -= REFCOUNT_KINDS
        # device calls: per-device allocators the adapter finds; swaps need both devices
        out -= {ops.DeviceFreeId.kind}
        if not self.device_calls:
            out -= DEVICE_KINDS
        if len(self.devices) < 2:
            out -= {ops.DeviceSwap.kind}
        if not self.misuse_allowed:
            out -= DEVICE_MISUSE_KINDS
        if not self.construct:  # construction: the adapter finds no classes to build
            out -= {ops.Construct.kind}
        if not self.injected_hash:  # create takes no hash_function
            out -= {ops.InjectedHash.kind}
        if not (self.trackers and caps.aphrodite_api and self.misuse_allowed):
            out -= {ops.SeqLostBlocks.kind}  # freed behind: a misuse of the Aphrodite tracker
        return frozenset(out)

    def admissible(self, oracle: Oracle, op: Op) -> bool:
        if oracle.contract_error(op) is not None:
            return False
        if oracle.is_misuse(op):
            return self.misuse_allowed and not isinstance(op, DISPUTED_MISUSE)
        return self.caps.atomic or not oracle.would_fail_no_free(op)

    def _opcode_table(self) -> tuple[Generator, ...]:
        caps, swap = self.caps, len(self.devices) > 1
        pc = caps.prefix_caching
        if self.level is Level.SEQUENCE:
            entries = [
                _Entry(3, self._table_allocate), _Entry(4, self._table_append),
                _Entry(1, self._table_ensure_slots), _Entry(2, self._table_fork),
                _Entry(2, self._table_free), _Entry(2 if swap else 0, self._table_swap),
                _Entry(1, self._table_mark_accessed), _Entry(1, self._mark_computed),
                _Entry(1, self._hit_rate), _Entry(1, self._clear_cows),
                _Entry(1 if caps.vllm_api else 0, self._reset_prefix_cache),
                _Entry(1 if self.misuse_allowed else 0, self._table_misuse),
                _Entry(3, self._extension),
            ]
        elif self.level is Level.HASHING:
            entries = [
                _Entry(4, self._allocate_immutable), _Entry(3 if pc else 0, self._near_miss),
                _Entry(2, self._allocate_chain), _Entry(2, self._table_allocate),
                _Entry(2, self._append), _Entry(1, self._allocate_mutable),
                _Entry(3, self._free), _Entry(1, self._table_free), _Entry(1, self._fork),
                _Entry(1 if caps.vllm_api else 0, self._cached_prefix),
                _Entry(1 if caps.vllm_api else 0, self._reset_prefix_cache),
                _Entry(1, self._mark_computed),
            ]
        else:
            entries = [
                _Entry(2, self._allocate_mutable), _Entry(3, self._allocate_immutable),
                _Entry(2, self._allocate_chain), _Entry(6 if self.long_pool else 0,
                                                        self._allocate_long_chain),
                _Entry(3, self._append), _Entry(2, self._fork),
                _Entry(3, self._free), _Entry(2 if swap else 0, self._swap),
                _Entry(1, self._mark_accessed), _Entry(1, self._mark_computed),
                _Entry(1 if caps.aphrodite_api else 0, self._computed_block_ids),
                _Entry(1 if caps.vllm_api else 0, self._cached_prefix),
                _Entry(1 if caps.aphrodite_api else 0, self._count_touched),
                _Entry(1 if caps.vllm_api else 0, self._count_full_touched),
                _Entry(1, self._clear_cows), _Entry(1, self._hit_rate),
                _Entry(1 if caps.vllm_api else 0, self._reset_prefix_cache),
                _Entry(1, self._null_block), _Entry(1 if self.misuse_allowed else 0, self._misuse),
                # BlockTables over the same pool: the only way to chain after an empty block.
                _Entry(1, self._table_allocate), _Entry(1, self._table_append),
                _Entry(1, self._table_ensure_slots), _Entry(1, self._table_other),
                _Entry(3, self._extension),
            ]
        return tuple(e.make for e in entries for _ in range(e.weight))

    def _extension_table(self) -> tuple[Generator, ...]:
        """The productions behind the opcode table's one extension entry: table queries,
        sliding-window tables, engine-side operations and malformed arguments. Adding an
        operation is one weighted entry here; the opcode bytes of everything else keep their
        meaning (only inputs that pick the extension entry decode differently)."""
        caps, block = self.caps, self.level is Level.BLOCK
        entries = [
            _Entry(2, self._table_allocate_windowed), _Entry(2, self._slide),
            _Entry(1, self._table_slots), _Entry(1, self._id_space), _Entry(1, self._swap_log),
            _Entry(3 if self.trackers and not block else 0, self._tracker),
            _Entry(2 if self.misuse_allowed else 0, self._malformed),
            _Entry(1 if block else 0, self._common_computed_ids),
            # when KV is written: a request aborted around its batch, then asked for again
            # (one of the common prefix's two slots, so no other opcode byte changes meaning)
            _Entry(1 if block else 0, self._aborted_request),
            _Entry(2 if block and caps.prefix_caching else 0, self._hit_burst),
            # At the sequence level only a window's slide takes the null block: ask often.
            _Entry(1 if block else 3, self._null_block_query),
            _Entry(0 if not self.misuse_allowed else 1 if block else 3, self._null_block_misuse),
            _Entry(1 if self.misuse_allowed else 0, self._table_reallocate),
            _Entry(2 if block and self.block_info else 0, self._block_info),
            _Entry(2 if block and caps.prefix_caching else 0, self._content_hash),
            # stale ids: stale id lists, swaps of handles sharing an id, one-tracker edits
            _Entry(2 if block else 0, self._mark_stale),
            _Entry(2 if block and len(self.devices) > 1 else 0, self._swap_shared),
            _Entry(1 if self.trackers and not block else 0, self._tracker_edit),
            _Entry(2 if block and self.evictor else 0, self._evictor_op),  # evictor level
            _Entry(1 if block and self.refcount else 0, self._refcount_op),  # refcount level
            _Entry(1 if block and self.device_calls else 0, self._device_call),  # device calls
            _Entry(1 if block and self.construct else 0, self._construct),  # construction
            _Entry(1 if block and self.injected_hash else 0, self._injected_hash),
            # freed behind: a table's block freed through the allocator; tracker misuse
            _Entry(0 if block else 2, self._free_behind),
            _Entry(1 if self.trackers and not block and self.misuse_allowed else 0,
                   self._tracker_misuse),
            # request keys: a malformed argument of the target's own key builder
            _Entry(1 if block and self.misuse_allowed and caps.key_builder else 0,
                   self._malformed_key),
            # a table whose window dropped blocks: forked, swapped, decoded or freed (sequence
            # level; the block level reaches them through its table entries)
            _Entry(0 if block else 2, self._window_life),
        ]
        return tuple(e.make for e in entries for _ in range(e.weight))

    def _extension(self, oracle: Oracle) -> Op | None:
        return self.src.pick(self.extensions)(oracle)

    # ------------------------------------------------------------------ values

    def _token(self) -> int:
        return adversarial_token(self.src) if self.adversarial else plain_token(self.src)

    def _tokens(self, n: int) -> Tokens:
        return tuple(self._token() for _ in range(n))

    def _extra(self) -> ops.Extra:
        if not (self.caps.extra_keys and self.caps.vllm_api):
            return None
        return self.src.pick(self.extras)

    def _device(self, oracle: Oracle, prev: int | None) -> Dev:
        return oracle.device_of(prev) if prev is not None else self.src.pick(self.devices)

    def _tick(self, steps: tuple[float, ...]) -> float:
        self.clock += self.src.pick(steps)
        return self.clock

    def _gpu_blocks(self, oracle: Oracle) -> list[int]:
        return [h for h in oracle.live_blocks() if oracle.device_of(h) is Dev.GPU]

    def _chain_end(self, oracle: Oracle, *, hashed: bool) -> int | None:
        """None or a live block that may be extended: last of its chain, and hashed (for an
        immutable successor) or full (for a mutable one)."""
        ends = [h for h in oracle.live_blocks() if oracle.last_in_chain(h)
                and (oracle.is_hashed(h) if hashed else oracle.is_full(h))]
        return self.src.pick([None, *ends])

    def _full_tokens(self, oracle: Oracle, prev: int | None, dev: Dev,
                     extra: ops.Extra) -> Tokens:
        """A full block's tokens; with a flag, content already cached after ``prev``."""
        hit = self.src.flag(40)
        known = oracle.hit_candidates(prev, dev, extra) if self.caps.prefix_caching else []
        if hit and known:
            return self.src.pick(known)
        return self._tokens(self.bs)

    # ------------------------------------------------------------------ block level

    def _allocate_mutable(self, oracle: Oracle) -> Op | None:
        prev = self._chain_end(oracle, hashed=False)
        return ops.AllocateMutable(prev, self._device(oracle, prev))

    def _prev_and_extra(self, oracle: Oracle) -> tuple[int | None, Dev, ops.Extra]:
        prev = self._chain_end(oracle, hashed=True)
        dev = self._device(oracle, prev)
        extra = oracle.extra_of(prev) if prev is not None else self._extra()
        return prev, dev, extra

    def _allocate_immutable(self, oracle: Oracle) -> Op | None:
        prev, dev, extra = self._prev_and_extra(oracle)
        return ops.AllocateImmutable(prev, self._full_tokens(oracle, prev, dev, extra), dev,
                                     extra)

    def _allocate_chain(self, oracle: Oracle) -> Op | None:
        prev, dev, extra = self._prev_and_extra(oracle)
        count = self.src.int_in(1, 4)
        first = self._full_tokens(oracle, prev, dev, extra)
        chunks = (first, *(self._tokens(self.bs) for _ in range(count - 1)))
        return ops.AllocateImmutableChain(prev, chunks, dev, extra)

    def _allocate_long_chain(self, oracle: Oracle) -> Op | None:
        """An immutable chain of a :data:`LONG_CHAIN_RUNGS` length from a few bytes: its chunks
        repeat a pattern of one to three chunks (the chain hash still makes every block
        distinct), the first one possibly cached content. Its follow-up (:meth:`_walk_chain`)
        is one operation over the whole chain."""
        self.then = self._walk_chain
        prev, dev, extra = self._prev_and_extra(oracle)
        count = self.src.pick(LONG_CHAIN_RUNGS)
        first = self._full_tokens(oracle, prev, dev, extra)
        pattern = (first, *(self._tokens(self.bs) for _ in range(self.src.below(3))))
        chunks = tuple(pattern[i % len(pattern)] for i in range(count))
        return ops.AllocateImmutableChain(prev, chunks, dev, extra)

    def _walk_chain(self, oracle: Oracle) -> Op | None:
        """An operation that walks the whole chain ending at the newest block (the long chain
        just made, if that succeeded): fork it, swap it, or one of the chain queries."""
        live = oracle.live_blocks()
        if not live:
            return None
        last = live[-1]
        chain = tuple(oracle.chain_of(last))
        dev = oracle.device_of(last)
        other = Dev.CPU if dev is Dev.GPU else Dev.GPU
        caps, gpu = self.caps, dev is Dev.GPU
        walks: list[Callable[[], Op]] = [lambda: ops.Fork(last)] * 2
        if len(self.devices) > 1:
            walks.append(lambda: ops.Swap(chain, dev, other))
        if caps.aphrodite_api:
            walks.append(lambda: ops.CountTouched(chain, dev, self.src.int_in(0, self.bs)))
            if gpu:
                walks.append(lambda: ops.ComputedBlockIds(chain, self.src.flag(70)))
        if caps.vllm_api:
            walks.append(lambda: ops.CountFullTouched(chain, dev))
            if gpu:
                walks.append(lambda: ops.CachedPrefix(chain, Dev.GPU))
        if gpu:
            walks.append(lambda: ops.MarkAccessed(chain, self._tick((0.0, 1.0))))
        return self.src.pick(walks)()

    def _near_miss(self, oracle: Oracle) -> Op | None:
        """Cached content with one token, or the extra key, swapped for a value that weak
        hashes confuse with it: a different block that must not hit."""
        prev, dev, extra = self._prev_and_extra(oracle)
        known = oracle.hit_candidates(prev, dev, extra)
        if not known:
            return None
        tokens = list(self.src.pick(known))
        if prev is None and self.src.flag(30):
            other = self._extra()
            return ops.AllocateImmutable(None, tuple(tokens), dev, other)
        i = self.src.below(len(tokens))
        tokens[i] = _partner(tokens[i], self.src.below(4))
        return ops.AllocateImmutable(prev, tuple(tokens), dev, extra)

    def _append(self, oracle: Oracle) -> Op | None:
        open_blocks = [h for h in oracle.live_blocks() if oracle.appendable(h)]
        if not open_blocks:
            return None
        h = self.src.pick(open_blocks)
        room = self.bs - len(oracle.tokens_of(h))
        return ops.Append(h, self._tokens(self.src.int_in(1, room)))

    def _fork(self, oracle: Oracle) -> Op | None:
        live = oracle.live_blocks()
        return ops.Fork(self.src.pick(live)) if live else None

    def _free(self, oracle: Oracle) -> Op | None:
        live = oracle.live_blocks()
        return ops.Free(self.src.pick(live)) if live else None

    def _swap(self, oracle: Oracle) -> Op | None:
        live = oracle.live_blocks()
        if not live or len(self.devices) < 2:
            return None
        h = self.src.pick(live)
        src = oracle.device_of(h)
        return ops.Swap(tuple(oracle.chain_of(h)), src, Dev.CPU if src is Dev.GPU else Dev.GPU)

    def _mark_accessed(self, oracle: Oracle) -> Op | None:
        gpu = self._gpu_blocks(oracle)
        if not gpu:
            return None
        chosen = self.src.subset(gpu, 4, min_size=1)
        return ops.MarkAccessed(chosen, self._tick((0.0, 1.0, 2.5)))

    def _mark_computed(self, oracle: Oracle) -> Op | None:
        return ops.MarkComputed()

    def _gpu_chain(self, oracle: Oracle) -> tuple[int, ...] | None:
        gpu = self._gpu_blocks(oracle)
        return tuple(oracle.chain_of(self.src.pick(gpu))) if gpu else None

    def _computed_block_ids(self, oracle: Oracle) -> Op | None:
        chain = self._gpu_chain(oracle)
        skip_last = not self.src.flag(30)
        return None if chain is None else ops.ComputedBlockIds(chain, skip_last)

    def _cached_prefix(self, oracle: Oracle) -> Op | None:
        chain = self._gpu_chain(oracle)
        return None if chain is None else ops.CachedPrefix(chain, Dev.GPU)

    def _count_touched(self, oracle: Oracle) -> Op | None:
        blocks = self.src.subset(oracle.live_blocks(), 4)
        return ops.CountTouched(blocks, self.src.pick(self.devices), self.src.int_in(0, 9))

    def _count_full_touched(self, oracle: Oracle) -> Op | None:
        blocks = self.src.subset(oracle.live_blocks(), 4)
        return ops.CountFullTouched(blocks, self.src.pick(self.devices))

    def _clear_cows(self, oracle: Oracle) -> Op | None:
        return ops.ClearCopyOnWrites()

    def _hit_rate(self, oracle: Oracle) -> Op | None:
        return ops.HitRate(self.src.pick(self.devices))

    def _reset_prefix_cache(self, oracle: Oracle) -> Op | None:
        return ops.ResetPrefixCache(self.src.pick((None, *self.devices)))

    def _null_block(self, oracle: Oracle) -> Op | None:
        return ops.GetNullBlock()

    def _misuse(self, oracle: Oracle) -> Op | None:
        """A call the contract says must be refused with a typed error, state unchanged."""
        live = oracle.live_blocks()
        dead = sorted(self.seen_blocks - set(live))
        kind = self.src.below(6)
        h = self.src.pick(live) if live else None
        if kind == 0 and dead:
            return ops.Free(self.src.pick(dead))
        if kind == 1 and h is not None:  # over-append, or append to a hashed block
            room = self.bs - len(oracle.tokens_of(h))
            return ops.Append(h, self._tokens(self.src.int_in(min(room + 1, self.bs + 1),
                                                              self.bs + 1)))
        if kind == 2:  # an immutable block of the wrong length
            size = self.src.pick((self.bs + 1, max(self.bs - 1, 0)))
            return ops.AllocateImmutable(None, self._tokens(size), self.src.pick(self.devices))
        if kind == 3 and h is not None:  # swap from the wrong device, or twice the same block
            dev = oracle.device_of(h)
            if self.src.flag(50) or len(self.devices) < 2:
                other = Dev.CPU if dev is Dev.GPU else Dev.GPU
                return ops.Swap((h, h), dev, other)
            return ops.Swap((h,), Dev.CPU if dev is Dev.GPU else Dev.GPU, dev)
        if kind == 4:  # computed ids of no blocks with skip_last
            return ops.ComputedBlockIds((), True) if self.caps.aphrodite_api else None
        if kind == 5 and h is not None:  # CPU blocks where only GPU blocks are allowed
            return ops.MarkAccessed((h,), self._tick((0.0, 1.0)))
        return None

    # ------------------------------------------------------------------ sequence level

    def _running(self, oracle: Oracle) -> list[int]:
        return [t for t in oracle.live_tables() if oracle.table_device(t) is Dev.GPU]

    def _table_allocate(self, oracle: Oracle) -> Op | None:
        prefix: Tokens = self.src.pick([(), *self.prompts]) if self.prompts else ()
        size = self.src.int_in(0 if prefix else 1, 2 * self.bs)
        if self.adversarial and prefix == () and self.src.flag(40):
            cached = oracle.cached_contents(Dev.GPU)
            if cached:  # a cached prefix (so the table hits) plus a tail
                prefix = self.src.pick(cached)[0]
        return ops.TableAllocate(prefix + self._tokens(size), Dev.GPU, self._extra())

    def _table_append(self, oracle: Oracle) -> Op | None:
        running = self._running(oracle)
        if not running:
            return None
        t = self.src.pick(running)
        tokens = self._tokens(self.src.int_in(1, 2 * self.bs))
        lookahead = self.src.int_in(0, self.bs)
        if oracle.model.tables[t].window is None:
            return ops.TableAppend(t, tokens, lookahead)
        # A sliding-window table: usually everything so far computed, sometimes less.
        length = oracle.table_len(t)
        computed = length if self.src.flag(60) else self.src.int_in(0, length)
        return ops.TableAppend(t, tokens, lookahead, computed)

    def _table_ensure_slots(self, oracle: Oracle) -> Op | None:
        running = self._running(oracle)
        if not running:
            return None
        return ops.TableEnsureSlots(self.src.pick(running), self.src.int_in(0, 2 * self.bs))

    def _table_fork(self, oracle: Oracle) -> Op | None:
        running = self._running(oracle)
        return ops.TableFork(self.src.pick(running)) if running else None

    def _table_free(self, oracle: Oracle) -> Op | None:
        live = oracle.live_tables()
        return ops.TableFree(self.src.pick(live)) if live else None

    def _table_swap(self, oracle: Oracle) -> Op | None:
        live = oracle.live_tables()
        if not live or len(self.devices) < 2:
            return None
        t = self.src.pick(live)
        src = oracle.table_device(t)
        return ops.TableSwap(t, src, Dev.CPU if src is Dev.GPU else Dev.GPU)

    def _table_other(self, oracle: Oracle) -> Op | None:
        """Block level: the rarer table operations behind one opcode entry."""
        return self.src.pick(self._table_rare)(oracle)

    @property
    def _table_rare(self) -> tuple[Generator, ...]:
        swap = (self._table_swap,) if len(self.devices) > 1 else ()
        return (self._table_fork, self._table_free, self._table_mark_accessed, *swap)

    def _table_mark_accessed(self, oracle: Oracle) -> Op | None:
        running = self._running(oracle)
        if not running:
            return None
        return ops.TableMarkAccessed(self.src.pick(running), self._tick((0.0, 1.0)))

    def _table_misuse(self, oracle: Oracle) -> Op | None:
        dead = sorted(self.seen_tables - set(oracle.live_tables()))
        kind = self.src.below(3)
        if kind == 0 or not dead:
            return ops.TableAllocate((), Dev.GPU, None)
        t = self.src.pick(dead)
        if kind == 1:
            return ops.TableEnsureSlots(t, self.src.int_in(0, self.bs))
        return ops.TableAppend(t, self._tokens(1), 0)

    # ------------------------------------------------------------------ extension entries

    def _table_allocate_windowed(self, oracle: Oracle) -> Op | None:
        """A request of a sliding-window model (a window of one or two blocks), long enough
        that its first decode step with everything computed drops a block."""
        window = 1 + self.src.below(2)
        request = self._table_allocate(oracle)
        if not isinstance(request, ops.TableAllocate):
            return None
        short = max(0, (window + 1) * self.bs - len(request.tokens))
        return replace(request, tokens=request.tokens + self._tokens(short), window=window)

    def _slide(self, oracle: Oracle) -> Op | None:
        """A decode step of a sliding-window table with everything so far computed: blocks
        below the window go back to the pool and the null block takes their place."""
        tables = oracle.model.tables
        windowed = [t for t in self._running(oracle) if tables[t].window is not None]
        if not windowed:
            return None
        t = self.src.pick(windowed)
        return ops.TableAppend(t, self._tokens(self.src.int_in(1, self.bs)), 0,
                               oracle.table_len(t))

    def _window_life(self, oracle: Oracle) -> Op | None:
        """A table whose sliding window dropped blocks, in whatever state the program
        reached (running or swapped out, forked, shared): forked, swapped to the other
        device, decoded with everything so far computed, or freed. Before any table holds
        the null block, a slide that may drop one, with this as its follow-up."""
        slide = None if self._dropped(oracle) else self._slide(oracle)
        if slide is not None:
            self.then = self._dropped_life
        return slide if slide is not None else self._dropped_life(oracle)

    def _dropped(self, oracle: Oracle) -> list[int]:
        tables = oracle.model.tables
        return [t for t in oracle.live_tables() if holds_null(tables[t])]

    def _dropped_life(self, oracle: Oracle) -> Op | None:
        dropped = self._dropped(oracle)
        if not dropped:
            return None
        t = self.src.pick(dropped)
        src = oracle.table_device(t)
        kind = self.src.below(4)
        if kind == 0 and src is Dev.GPU:
            return ops.TableFork(t)
        if kind == 1 and src is Dev.GPU:
            return ops.TableAppend(t, self._tokens(self.src.int_in(0, self.bs)), 0,
                                   oracle.table_len(t))
        if kind == 3 or len(self.devices) < 2:
            return ops.TableFree(t)
        return ops.TableSwap(t, src, Dev.CPU if src is Dev.GPU else Dev.GPU)

    def _table_slots(self, oracle: Oracle) -> Op | None:
        """A table's slot read-outs for its sequence plus a few unseen tokens."""
        live = oracle.live_tables()
        if not live:
            return None
        t = self.src.pick(live)
        new = self._tokens(self.src.int_in(0, 2 * self.bs))
        return ops.TableSlots(t, oracle.table_tokens(t) + new, self.src.int_in(0, 2 * self.bs))

    def _id_space(self, oracle: Oracle) -> Op | None:
        """A device's size, every id, and the physical ids of up to four of its ids."""
        dev = self.src.pick(self.devices)
        cfg = self.config
        first = 0 if dev is Dev.GPU else cfg.num_gpu_blocks
        size = cfg.num_gpu_blocks if dev is Dev.GPU else cfg.num_cpu_blocks
        ids = range(first, first + size)
        return ops.IdSpace(dev, self.src.subset(ids, 4, min_size=1))

    def _swap_log(self, oracle: Oracle) -> Op | None:
        return ops.SwapLog()

    def _tracker(self, oracle: Oracle) -> Op | None:
        """The engine's per-sequence trackers: created once, then a sequence is added, asked
        how much of it is cached (vLLM) or which of its blocks are computed (Aphrodite),
        stamped with its access time, or removed. A question may be asked again after a
        scheduling step (follow-up), as a scheduler does: frozen in prefill, a computed-id
        list that stops at its first gap."""
        seqs = oracle.model.seqs
        if not seqs.started:
            self.then = self._tracker  # a new tracker's first job: add a sequence
            return ops.TrackerStart()
        live = oracle.live_tables()
        candidates: list[Op] = [ops.SeqTrack(t) for t in live if t not in seqs.entries]
        for t, e in sorted(seqs.entries.items()):
            if e.access:
                candidates += [ops.SeqAccess(t, self.clock), ops.SeqStampBlocks(t),
                               ops.SeqUntrack(t, e.computed is not None or e.frozen is not None),
                               ops.SeqComputedIds(t), ops.SeqCachedTokens(t, True),
                               ops.SeqCachedTokens(t, False)]
        candidates = [op for op in candidates if oracle.contract_error(op) is None]
        if not candidates:
            return None
        op = self.src.pick(candidates)
        if isinstance(op, ops.SeqAccess):
            return ops.SeqAccess(op.table, self._tick((0.0, 1.0)))
        if isinstance(op, ops.SeqComputedIds | ops.SeqCachedTokens) and self.src.flag(50):
            self.then = self._then_ask_again(op)
        elif self.src.flag(50):
            self.then = self._tracker  # trackers see runs of calls, one per sequence
        return op

    def _then_ask_again(self, question: Op) -> Generator:
        """Follow-up: end the scheduling step, then ask ``question`` again."""
        def again(oracle: Oracle) -> Op | None:
            return question

        def step(oracle: Oracle) -> Op | None:
            self.then = again
            return ops.MarkComputed()

        return step

    def _aborted_request(self, oracle: Oracle) -> Op | None:
        """A request aborted before (or after) the batch that computes it, then the same
        prompt again: maybe a mark first (the batch ran), the blocks of a hashed GPU chain
        from its first block freed last first (or only its first blocks, which mutable
        allocations then evict while the tail stays cached), maybe a mark (the batch ran
        without it), the chain's contents allocated again, and what is computed of the new
        chain asked, maybe again after the next mark. Follow-ups carry each step. (Without
        prefix caching: the common computed prefix instead.)"""
        if not self.caps.prefix_caching:
            return self._common_computed_ids(oracle)
        chains = [c for c in (oracle.chain_of(h) for h in self._gpu_blocks(oracle)
                              if oracle.last_in_chain(h))
                  if c and oracle.model.blocks[c[0]].prev is None
                  and all(oracle.is_hashed(h) for h in c)]
        if not chains:
            return None
        chain = self.src.pick(chains)
        chunks = tuple(oracle.tokens_of(h) for h in chain)
        extra = oracle.extra_of(chain[0])
        head_only = len(chain) > 1 and self.src.flag(50)
        k = self.src.int_in(1, len(chain) - 1) if head_only else len(chain)
        pending = list(chain[:k]) if head_only else list(reversed(chain))
        head = [oracle.model.blocks[h].content for h in chain[:k]] if head_only else []
        taken: list[int] = []
        known: set[int] = set()
        asks = [kind for kind, api in (("ids", self.caps.aphrodite_api),
                                       ("prefix", self.caps.vllm_api)) if api]
        made: set[int] = set()
        asked: list[bool] = []

        def question(o: Oracle) -> Op | None:
            new = tuple(sorted(set(o.live_blocks()) - made))
            if not new or not asks:
                return None
            if not asked and self.src.flag(50):
                self.then = self._then_ask_again_of(question)
            asked.append(True)
            if self.src.pick(asks) == "ids":
                return ops.ComputedBlockIds(new, not self.src.flag(30))
            return ops.CachedPrefix(new, Dev.GPU)

        def again(o: Oracle) -> Op | None:
            made.update(o.live_blocks())
            self.then = question
            return ops.AllocateImmutableChain(None, chunks, Dev.GPU, extra)

        def drain(o: Oracle) -> Op | None:
            """Mutable allocations until the freed head is evicted, then room for the
            re-request (one of them freed)."""
            live = set(o.live_blocks())
            taken.extend(sorted(live - known) if known else ())
            known.clear()
            known.update(live)
            gpu = o.model.pools[Dev.GPU]
            if any(c in gpu.id_of for c in head) and o.free_count(Dev.GPU):
                self.then = drain
                return ops.AllocateMutable(None, Dev.GPU)
            if taken:
                self.then = again
                return ops.Free(taken[-1])
            return again(o)

        after_free = drain if head_only else again

        def mark_then_again(o: Oracle) -> Op | None:
            self.then = after_free
            return ops.MarkComputed()

        def free_next(o: Oracle) -> Op | None:
            h = pending.pop(0)
            if pending:
                self.then = free_next
            elif self.src.flag(50):
                self.then = mark_then_again
            else:
                self.then = after_free
            return ops.Free(h)

        if self.src.flag(30):
            self.then = free_next
            return ops.MarkComputed()
        return free_next(oracle)

    def _then_ask_again_of(self, question: Generator) -> Generator:
        """Follow-up: end the scheduling step, then ``question`` (a generator) again."""
        def step(oracle: Oracle) -> Op | None:
            self.then = question
            return ops.MarkComputed()

        return step

    def _common_computed_ids(self, oracle: Oracle) -> Op | None:
        """The common computed prefix of a batch: one to three prefixes of GPU chains."""
        lists = []
        for _ in range(1 + self.src.below(3)):
            chain = self._gpu_chain(oracle) or ()
            lists.append(chain[:self.src.int_in(0, len(chain))])
        return ops.CommonComputedIds(tuple(lists))

    def _hit_burst(self, oracle: Oracle) -> Op | None:
        """A burst of requests for cached, held content (one, a few, or more than the
        hit-rate window of 1000 queries); its follow-up reads the device's hit rate."""
        held = [h for h in oracle.live_blocks()[-16:] if oracle.contract_error(ops.HitBurst(
            h, 1, oracle.device_of(h), oracle.extra_of(h))) is None]
        if not held:
            return None
        h = self.src.pick(held)
        dev = oracle.device_of(h)
        self.then = lambda _: ops.HitRate(dev)
        return ops.HitBurst(h, self.src.pick((1, 3, 1001)), dev, oracle.extra_of(h))

    def _after_null(self, oracle: Oracle, use: Generator) -> Op | None:
        """``use`` of the null block; before it exists (sequence level), a window's slide that
        may take it, with ``use`` as the follow-up."""
        if oracle.model.null_id is not None:
            return use(oracle)
        slide = self._slide(oracle) if self.level is Level.SEQUENCE else None
        if slide is not None:
            self.then = use
        return slide

    def _null_block_query(self, oracle: Oracle) -> Op | None:
        """What the null block shows (stamped at the current clock on prefix-caching
        targets), once a window dropped a block or ``GetNullBlock`` took it."""
        def query(o: Oracle) -> Op | None:
            if o.model.null_id is None:
                return None
            return ops.NullBlockQuery(self._tick((0.0, 1.0)) if self.caps.prefix_caching
                                      else None)
        return self._after_null(oracle, query)

    def _null_block_misuse(self, oracle: Oracle) -> Op | None:
        """A write to the existing null block (append, set its id, fork): typed error, state
        unchanged."""
        def write(o: Oracle) -> Op | None:
            if o.model.null_id is None:
                return None
            return ops.NullBlockMisuse(self.src.pick(ops.NULL_BLOCK_WRITES))
        return self._after_null(oracle, write)

    def _table_reallocate(self, oracle: Oracle) -> Op | None:
        """``allocate`` again on a live table that holds blocks: typed error, state
        unchanged."""
        live = oracle.live_tables()
        if not live:
            return None
        t = self.src.pick(live)
        return ops.TableReallocate(t, self._tokens(self.src.int_in(1, 2 * self.bs)))

    def _block_info(self, oracle: Oracle) -> Op | None:
        """Refcount and device of up to four live blocks, the first one shared when some block
        is (forked or hit): each refcount must count the id's live holders."""
        live = oracle.live_blocks()
        if not live:
            return None
        shared = [h for h in live if oracle.model.shared(oracle.model.blocks[h])]
        first = (self.src.pick(shared),) if shared and self.src.flag(60) else ()
        rest = self.src.subset([h for h in live if h not in first], 4 - len(first),
                               min_size=0 if first else 1)
        return ops.BlockInfo(first + rest)

    # -- evictor level (models.families.v0.evictor_model)

    def _evictor_op(self, oracle: Oracle) -> Op | None:
        """One operation on the target's standalone evictor: add, update, remove, evict or a
        membership question over ids ``0..EVICTOR_IDS-1``, at one of a few times in any order,
        0..``EVICTOR_MAX_TOKENS`` hashed tokens. Misuse (update/remove of a non-candidate,
        evict when empty, add of a candidate) only for targets that take misuse. Often another
        evictor operation follows (an evictor's bugs show in sequences: add, update, evict)."""
        if self.src.flag(60):
            self.then = self._evictor_op
        held = sorted(oracle.evictor.meta)
        absent = [i for i in range(EVICTOR_IDS) if i not in oracle.evictor.meta]
        which = self.src.below(5)
        misuse = self.misuse_allowed and self.src.flag(15)
        time = self.src.pick(EVICTOR_TIMES)
        if which == 0:  # add: an absent id, or (misuse) a candidate
            pool = held if misuse and held else absent
            if not pool:
                return ops.EvictorEvict()
            return ops.EvictorAdd(self.src.pick(pool), self.src.below(256),
                                  self.src.int_in(0, EVICTOR_MAX_TOKENS), time)
        if which in (1, 2):  # update / remove: a candidate, or (misuse) a non-candidate
            pool = absent if misuse or not held else held
            if not pool or (not held and not misuse):
                return None
            block_id = self.src.pick(pool)
            return ops.EvictorUpdate(block_id, time) if which == 1 \
                else ops.EvictorRemove(block_id)
        if which == 3:  # evict: needs a candidate unless misuse
            return ops.EvictorEvict() if held or misuse else None
        return ops.EvictorContains(self.src.subset(range(EVICTOR_IDS), 3, min_size=1))

    # -- freed behind (models.families.v0.table_misuse, models.families.v0.ops.tracker_misuse)

    def _free_behind(self, oracle: Oracle) -> Op | None:
        """A block of a running table (no window) freed through the allocator: often the one
        the next token goes into. For targets that take misuse, half the time followed by a
        call the damaged table must refuse (an append into the freed block, a fork, freeing
        the block again)."""
        m = oracle.model
        running = [t for t in self._running(oracle) if m.tables[t].window is None]
        if not running:
            return None
        t = self.src.pick(running)
        last = len(m.tables[t].blocks) - 1
        written = min(last, oracle.table_len(t) // self.bs)
        index = written if self.src.flag(50) else self.src.int_in(0, last)
        if self.misuse_allowed and self.src.flag(50):
            self.then = self._then_damaged(t, index)
        return ops.TableFreeBlock(t, index)

    def _then_damaged(self, t: int, index: int) -> Generator:
        """Follow-up: a call on damaged table ``t`` that must be refused."""
        def damaged(oracle: Oracle) -> Op | None:
            candidates = [op for op in (ops.TableAppend(t, (self._token(),)), ops.TableFork(t),
                                        ops.TableFreeBlock(t, index)) if oracle.is_misuse(op)]
            return self.src.pick(candidates) if candidates else None

        return damaged

    def _tracker_misuse(self, oracle: Oracle) -> Op | None:
        """The Aphrodite computed tracker asked about a sequence with the ids of a table
        holding fewer blocks than its computed-id list covers (it lost blocks)."""
        m = oracle.model
        running = [t for t in self._running(oracle) if m.tables[t].window is None]
        candidates = [ops.SeqLostBlocks(t, u) for t in running for u in running]
        candidates = [op for op in candidates if oracle.is_misuse(op)]
        return self.src.pick(candidates) if candidates else None

    # -- end freed behind

    # -- device calls (models.families.v0.ops.device)

    def _device_call(self, oracle: Oracle) -> Op | None:
        """One device's own allocator called directly: a swap by hand of a block (or its
        chain's blocks on its device) to the other device; or, for targets that take misuse,
        40% of the time a call it must refuse (a swap-in of held blocks, another device's
        block swapped out or freed, a device argument, an id it does not own; an id no device
        owns asked of the device-aware allocator when it has the block queries)."""
        live = oracle.live_blocks()
        if self.misuse_allowed and self.src.flag(40):
            return self._device_misuse(oracle, live)
        if not live or len(self.devices) < 2:
            return None
        h = self.src.pick(live)
        src = oracle.device_of(h)
        chain = tuple(k for k in oracle.chain_of(h) if oracle.device_of(k) is src)
        dst = Dev.CPU if src is Dev.GPU else Dev.GPU
        return ops.DeviceSwap(chain if self.src.flag(50) else (h,), src, dst)

    def _device_misuse(self, oracle: Oracle, live: list[int]) -> Op | None:
        dev = self.src.pick(self.devices)
        total = self.config.num_gpu_blocks + self.config.num_cpu_blocks
        actions = ["device_argument", "physical_unknown", "swap_in_held", "swap_out_foreign",
                   "free_foreign", *(("refcount_unknown", "device_unknown")
                                     if self.block_info else ()),
                   "device_argument_immutable", "device_argument_chain"]
        action = self.src.pick(actions)
        if action.startswith("device_argument"):
            return ops.DeviceMisuse(action, dev)
        if action == "physical_unknown":
            other = oracle.model.pools[Dev.CPU if dev is Dev.GPU else Dev.GPU].ids
            return ops.DeviceMisuse(action, dev, other[0] if other else total)
        if action in ("refcount_unknown", "device_unknown"):
            return ops.DeviceMisuse(action, Dev.GPU, self.src.pick((-1, total)))
        mine = [h for h in live if oracle.device_of(h) is dev]
        theirs = [h for h in live if oracle.device_of(h) is not dev]
        pool = mine + theirs if action == "swap_in_held" else theirs
        if not pool:
            return None
        return ops.DeviceSwapMisuse(action, (self.src.pick(pool),), dev)

    # -- end device calls

    # -- construction (models.families.v0.ops.construction)

    def _injected_hash(self, _: Oracle) -> Op | None:
        """An allocator built by ``create`` with an injected, order-blind hash: a block,
        its rotation and a second block (``models.families.v0.injected_hash``)."""
        bs = self.config.block_size
        block = self._tokens(bs)
        return ops.InjectedHash(block, block[1:] + block[:1], self._tokens(bs))

    def _construct(self, oracle: Oracle) -> Op | None:
        """An allocator built beside the program's over up to four ids of
        :data:`CONSTRUCT_IDS` in the order drawn, alone or as both devices (disjoint ids; 30%
        of the time as many ids numbered and built by the device-aware ``create``); for
        targets that take misuse, 40% of the time with one constructor argument malformed
        (``models.families.v0.ops.construction``; the hash-function extension is left to the
        machines)."""
        allocator = self.src.pick(ops.CONSTRUCT_ALLOCATORS)
        ids = self.src.subset(CONSTRUCT_IDS, 4)
        devices = self.src.flag(40)
        cpu_ids = self.src.subset([i for i in CONSTRUCT_IDS if i not in ids], 3) \
            if devices else ()
        op = ops.Construct(allocator, ids, devices, cpu_ids)
        if devices and self.src.flag(30):  # as many ids, through ``create``
            g = len(ids)
            return replace(op, ids=tuple(range(g)), cpu_ids=tuple(range(g, g + len(cpu_ids))),
                           create=True)
        if not (self.misuse_allowed and self.src.flag(40)):
            return op
        argument = self.src.pick([a for a, (_, on) in construction.ARGUMENTS.items()
                                  if a != "hash_function" and (
                                      on in (None, allocator) or (on == "devices" and devices))])
        values = construction.bad_values(op, argument)
        return replace(op, argument=argument, bad=self.src.pick(values)) if values else None

    # -- end construction

    # -- refcount level (models.families.v0.refcount_model)

    def _refcount_op(self, oracle: Oracle) -> Op | None:
        """One operation on the target's standalone counter and CoW tracker: a fresh counter
        over one to four ids of ``0..REFCOUNT_IDS-1`` (duplicates allowed; always first), else
        incr, decr (of a counted id), get (directly or through the read-only view),
        ``is_appendable`` (of an id or none), ``record_cow`` of small ids, ``clear_cows``, now
        and then a fresh counter. Misuse (an unknown or bool id, decr at 0, incr/decr through
        the view, a ``None`` in a pair) only for targets that take misuse. Often another
        refcount operation follows (counts build up over several steps)."""
        if self.src.flag(60):
            self.then = self._refcount_op
        counts = oracle.refcount.counts
        which = self.src.below(7)
        if counts is None or which == 6:
            size = self.src.int_in(1, 4)
            return ops.RefNew(tuple(self.src.below(REFCOUNT_IDS) for _ in range(size)))
        if self.misuse_allowed and self.src.flag(15):
            return self._refcount_misuse(which, counts)
        ids = sorted(counts)
        counted = [i for i in ids if counts[i] > 0]
        if which in (0, 2, 3) and ids:
            block_id = self.src.pick(ids)
            if which == 0:
                return ops.RefIncr(block_id)
            if which == 2:
                return ops.RefGet(block_id, self.src.flag(40))
            return ops.CowAppendable(None if self.src.flag(20) else block_id)
        if which == 1:
            return ops.RefDecr(self.src.pick(counted)) if counted else None
        if which == 4:
            return ops.CowRecord(self.src.below(8), self.src.below(8))
        return ops.CowClear() if which == 5 else None

    def _refcount_misuse(self, which: int, counts: dict[int, int]) -> Op:
        """The misuse of ``which``'s kind: through the view (incr/decr), an unknown id (incr,
        get, ``is_appendable``), a bool id (get), decr at 0, a ``None`` in a pair."""
        unknown = next(i for i in range(REFCOUNT_IDS + 1) if i not in counts)
        view = self.src.flag(50)
        if which == 0:
            return ops.RefIncr(self.src.pick(sorted(counts)) if view and counts else unknown,
                               readonly=view and bool(counts))
        if which == 1:
            zero = sorted(i for i, n in counts.items() if n == 0)
            return ops.RefDecr(self.src.pick(zero) if zero and not view else unknown,
                               readonly=view)
        if which == 2:
            return ops.RefGet(self.src.flag(50) if view else unknown, self.src.flag(50))
        if which == 3:
            return ops.CowAppendable(unknown)
        return ops.CowRecord(None, self.src.below(8)) if view \
            else ops.CowRecord(self.src.below(8), None)

    # -- stale ids (models.families.v0: stale_ids, shared_swap, tracker_edits)

    def _mark_stale(self, oracle: Oracle) -> Op | None:
        """A stale id list: up to three freed handles (the ids they held; for targets with
        typed errors also a free one), sometimes with a live GPU block; then, often, a drain
        of the GPU pool so the evictions show the LRU order."""
        freed = sorted(oracle.model.seqs.freed_ids)
        if not freed:
            return None
        chosen = self.src.subset(freed, 3, min_size=1)
        gpu = self._gpu_blocks(oracle)
        if gpu and self.src.flag(30):
            chosen += (self.src.pick(gpu),)
        if self.src.flag(50):
            self.then = self._then_drain(1 + self.src.below(3))
        return ops.MarkStaleIds(chosen, self._tick((1.0, 2.5, 0.0)))

    def _then_drain(self, left: int) -> Generator:
        """Follow-up: ``left`` more GPU mutable allocations than the hashless ids (evictions)."""
        def drain(oracle: Oracle) -> Op | None:
            nonlocal left
            if len(oracle.model.pools[Dev.GPU].hashless) == 0:
                left -= 1
            if left > 0:
                self.then = drain
            return ops.AllocateMutable(None, Dev.GPU)

        return drain

    def _swap_shared(self, oracle: Oracle) -> Op | None:
        """A block swapped with every live handle sharing its id (its forks), alone or with
        their chains."""
        m = oracle.model
        live = oracle.live_blocks()
        shared = [h for h in live if m.shared(m.blocks[h])]
        if not shared:
            return None
        rec = m.blocks[self.src.pick(shared)]
        mates = [h for h in live if m.blocks[h].id == rec.id and m.blocks[h].device is rec.device]
        if self.src.flag(50):
            mates = [h for k in mates for h in oracle.chain_of(k)]
        dst = Dev.CPU if rec.device is Dev.GPU else Dev.GPU
        return ops.Swap(tuple(dict.fromkeys(mates)), rec.device, dst)

    def _tracker_edit(self, oracle: Oracle) -> Op | None:
        """One tracker's ``add_seq`` or ``remove_seq`` of a recent table (the trackers are
        created first)."""
        if not oracle.model.seqs.started:
            return ops.TrackerStart()
        tables = sorted(oracle.model.tables)[-4:]
        if not tables:
            return None
        return ops.SeqTrackerEdit(self.src.pick(tables), self.src.pick(ops.TRACKERS),
                                  self.src.flag(50))

    # -- content hash (models.families.v0.ops.hashing)

    def _content_hash(self, oracle: Oracle) -> Op | None:
        """A live block's ``content_hash`` against ``hash_block_tokens`` recomputed from its
        own state (token ids as int-subclass instances on a flag byte); or first an
        int-subclass re-request of a hashed block's content (a hit on the plain-int original,
        recomputed next); or, for targets with typed errors, a malformed hash call."""
        blocks = oracle.model.blocks
        asks = [op for op in (ops.HashRecompute(h, blocks[h].prev is None)
                              for h in oracle.live_blocks()) if oracle.contract_error(op) is None]
        if not asks:
            return None
        ask = self.src.pick(asks)
        mode = self.src.below(3)
        rec = blocks[ask.block]
        if not self.hash_recompute:  # no hash_block_tokens to ask: the int-like re-request only
            if rec.content is None:
                return None
            return ops.AllocateImmutableIntLike(rec.prev, tuple(rec.tokens), rec.device,
                                                rec.extra)
        if mode == 1 and rec.content is not None:
            def recompute_new(o: Oracle) -> Op | None:
                newest = max(o.live_blocks(), default=None)
                return None if newest is None else ops.HashRecompute(newest, ask.is_first_block,
                                                                     True)
            self.then = recompute_new
            return ops.AllocateImmutableIntLike(rec.prev, tuple(rec.tokens), rec.device,
                                                rec.extra)
        if mode == 2 and self.misuse_allowed:
            argument = self.src.pick(("is_first_block", "prev_block_hash", "token_ids"))
            kind = ARGUMENTS[ops.HashRecompute, argument][0]
            like = tuple(rec.tokens) if argument == "token_ids" else ask.is_first_block
            return ops.Malformed(ask, argument, self.src.pick(bad_values(kind, self.config,
                                                                         like)))
        return replace(ask, int_like=self.src.flag())

    def _malformed(self, oracle: Oracle) -> Op | None:
        """A call this level makes, decoded as usual, with one validated argument replaced
        by a value of the wrong type or range (``models.families.v0.malformed``): typed error, state
        unchanged."""
        cls, argument = self.src.pick(self.malformable)
        call = self._makers[cls](oracle)
        self.then = None  # the call is not run, so neither is its follow-up
        if call is None or (isinstance(call, ops.TableAppend) and call.computed is not None):
            return None  # a sliding-window append's plan ends with another call
        kind = ARGUMENTS[cls, argument][0]
        # a table call's extra_hash is the table's (no field of its own)
        bad = self.src.pick(bad_values(kind, self.config, getattr(call, argument, None)))
        return ops.Malformed(call, argument, bad)

    def _malformed_key(self, oracle: Oracle) -> Op | None:
        """Request keys: a GPU block of fresh tokens under one of the alphabet's keys, its key
        builder given a malformed argument (``models.families.v0.request_keys``): typed error,
        nothing allocated."""
        keys = [e for e in self.extras if isinstance(e, ops.ExtraKey)]
        if not keys:
            return None
        argument = self.src.pick(sorted(KEY_ARGUMENTS))
        key = self.src.pick(keys)
        call = ops.AllocateImmutable(None, tuple(self._token() for _ in range(self.bs)),
                                     Dev.GPU, key)
        op = ops.Malformed(call, argument, self.src.pick(key_bad_values(KEY_ARGUMENTS[argument])))
        return op if oracle.is_misuse(op) else None

    @property
    def _makers(self) -> dict[type[Op], Generator]:
        """The production of a call of each operation class a malformed argument may go to."""
        return {
            ops.AllocateMutable: self._allocate_mutable,
            ops.AllocateImmutable: self._allocate_immutable,
            ops.AllocateImmutableChain: self._allocate_chain, ops.Append: self._append,
            ops.Fork: self._fork, ops.Free: self._free, ops.Swap: self._swap,
            ops.MarkAccessed: self._mark_accessed, ops.ComputedBlockIds: self._computed_block_ids,
            ops.CachedPrefix: self._cached_prefix, ops.CountTouched: self._count_touched,
            ops.CountFullTouched: self._count_full_touched, ops.HitRate: self._hit_rate,
            ops.ResetPrefixCache: self._reset_prefix_cache,
            ops.TableAllocate: self._table_allocate, ops.TableAppend: self._table_append,
            ops.TableEnsureSlots: self._table_ensure_slots,
            ops.TableMarkAccessed: self._table_mark_accessed,
        }

    @property
    def malformable(self) -> list[tuple[type[Op], str]]:
        """(operation class, argument) pairs of this level's validated arguments."""
        level = ops.BLOCK_OPS if self.level is Level.BLOCK else ops.TABLE_OPS
        makers = self._makers
        return sorted(((cls, arg) for cls, arg in ARGUMENTS if cls in level and cls in makers),
                      key=lambda pair: (pair[0].kind, pair[1]))


def extras_for(caps: Capabilities, *, adversarial: bool) -> tuple[ops.Extra, ...]:
    """The extra hashes the decoder draws from: the alphabet's ints and ``None``, then the
    request keys whose fields the target's extra-key function folds in
    (``caps.extra_key_fields``)."""
    ints = ADVERSARIAL_EXTRAS if adversarial else PLAIN_EXTRAS
    keys = ADVERSARIAL_EXTRA_KEYS if adversarial else PLAIN_EXTRA_KEYS
    return (*ints, *(k for k in keys if k.fields_used <= caps.extra_key_fields))


def _partner(token: int, which: int) -> int:
    """A different id that weak hashes confuse with ``token``."""
    if which == 0:
        return {-1: -2, -2: -1}.get(token, -1 if token != -1 else -2)
    if which == 1:
        return token + MERSENNE_61
    if which == 2:
        return token - MERSENNE_61
    return token + 2**64
