"""The zoo registry: every mutant as a target spec ``tests.zoo.v0.broken:<name>``.

``ZOO[name]`` is a :class:`Mutant`: its patches of the reference package
(:mod:`tests.zoo.patching`), a one-line description of its bug, and the invariant families that
may legitimately report it. Its factory (``CpuGpuBlockAllocator.create`` of the patched copy
``prefixcache_zoo.<name>``) is a module attribute named ``name``, so the spec resolves and
reproducer scripts can import it. The mutants claim what the bundled allocator claims
(``prefixcache_claims``): they are the bundled allocator plus one bug.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from models.core.invariants import Invariant
from models.families.v0.invariants import Family
from tests.zoo.patching import Patch, claims, factory, register
from tests.zoo.v0 import allocator_mutants as am
from tests.zoo.v0 import construction_mutants as cm
from tests.zoo.v0 import contract_mutants as km18
from tests.zoo.v0 import device_call_mutants as vm
from tests.zoo.v0 import device_mutants as dm
from tests.zoo.v0 import engine_mutants as xm
from tests.zoo.v0 import error_class_mutants as ecm
from tests.zoo.v0 import evictor_mutants as em
from tests.zoo.v0 import hash_quality_mutants as qk
from tests.zoo.v0 import hash_surface_mutants as sm
from tests.zoo.v0 import hashing_mutants as hm
from tests.zoo.v0 import heldout_mutants as ho
from tests.zoo.v0 import query_mutants as qm
from tests.zoo.v0 import refcount_mutants as rm
from tests.zoo.v0 import request_key_mutants as pm
from tests.zoo.v0 import stale_id_mutants as im
from tests.zoo.v0 import table_mutants as tm
from tests.zoo.v0 import tracker_mutants as km
from tests.zoo.v0 import window_metric_mutants as wm

F = Family
Factory = Callable[..., Any]

#: Which state machines can reach a bug, in the order to try them.
BLOCK = "block"
SEQUENCE = "sequence"
EVICTOR = "evictor"  # the evictor-level machine (the target's evictor driven directly)
REFCOUNT = "refcount"  # the refcount-level machine (its RefCounter/CoW tracker, directly)
#: A dedicated long-chain program (``run_program``), for bugs the tiny pools cannot show.
LONG_CHAIN = "long_chain"
#: The direct hash-quality check (``properties.families.v0.hash_quality``), for keys too weak to
#collide : within an example.
HASH_QUALITY = "hash_quality"
#: Checks that run once, whatever the budget.
ONE_SHOT = (LONG_CHAIN, HASH_QUALITY)


@dataclass(frozen=True, slots=True)
class Mutant:
    """A broken allocator: its patches of the reference, its bug, and who may report it."""

    name: str
    patches: tuple[Patch, ...]
    bug: str
    families: frozenset[Invariant]
    checks: tuple[str, ...] = (BLOCK, SEQUENCE)

    @property
    def spec(self) -> str:
        return f"{__name__}:{self.name}"

    @property
    def factory(self) -> Factory:
        """``CpuGpuBlockAllocator.create`` of the patched copy."""
        built: Factory = globals()[self.name]
        return built


def _mutants() -> Iterable[Mutant]:
    def m(name: str, bug: str, families: Iterable[Invariant], checks: tuple[str, ...] = (
            BLOCK, SEQUENCE), *, patches: tuple[Patch, ...]) -> Mutant:
        return Mutant(name, patches, bug, frozenset(families), checks)

    # -- the example bug classes of docs/INVARIANTS.md, in its order
    yield m("duplicate_promotion_cached_free",
            "a block promoted onto a duplicate frees its own id through the cached path",
            (F.CACHE, F.LEAK), patches=am.CACHED_PATH_DUPLICATE_FREE)
    yield m("recursive_fork", "fork walks the chain recursively (RecursionError past ~1000)",
            (F.TABLE,), (LONG_CHAIN,), patches=am.RECURSIVE_FORK)
    yield m("evictor_assumes_time_order",
            "the evictor takes the first-added candidate as least recently used",
            (F.LRU,), patches=em.ARRIVAL_ORDER)
    yield m("table_holds_block_twice",
            "a block chained after an empty block reuses its id: one table holds it twice",
            (F.RC, F.LEAK, F.TABLE, F.COW, F.CONTENT), (SEQUENCE, BLOCK),
            patches=am.RESERVED_ID_SHARED)
    # A collision hands one physical id to two different contents: HASH, CONTENT or LEAK.
    yield m("hash_ignores_extra_key", "the content hash leaves out the LoRA / extra key",
            (F.HASH, F.CONTENT, F.LEAK), patches=hm.HASH_IGNORING_EXTRA)
    # The engine's extra-key function (a claim) drops the cache salt: salted requests share
    # (and a malformed salt it never reads is accepted: ATOMIC, models.families.v0.request_keys).
    yield m("extra_key_ignores_salt", "the extra-key function leaves out the cache salt",
            (F.HASH, F.CONTENT, F.LEAK, F.ATOMIC), patches=hm.EXTRA_HASH_IGNORING_SALT)
    yield m("python_tuple_hash", "the content hash is Python hash() of the token tuple",
            (F.HASH, F.CONTENT, F.LEAK), patches=hm.PYTHON_TUPLE_HASH)
    yield m("is_full_off_by_one", "a block is hashed (and promoted) one token before it is full",
            (F.CACHE, F.CONTENT), patches=hm.EARLY_HASH)
    yield m("hit_stays_evictable",
            "a cache hit on an evictable id does not remove it from the evictor",
            (F.CACHE, F.CONTENT, F.FREE), patches=am.HIT_STAYS_EVICTABLE)
    yield m("evictor_branch_wrong_count",
            "release moves an id to the evictor / free deque at refcount 1, not 0",
            (F.RC, F.CACHE, F.LEAK, F.FREE), patches=am.EARLY_EVICTOR_BRANCH)
    yield m("eviction_keeps_content_entry",
            "eviction does not drop the victim's hash -> id content-map entry",
            (F.CACHE, F.CONTENT), patches=am.EVICTION_KEEPS_CONTENT_ENTRY)
    yield m("cow_not_recorded", "copy-on-write records no (src, dst) pair",
            (F.COW, F.CONTENT), patches=am.COW_NOT_RECORDED)
    yield m("cow_recorded_reversed", "copy-on-write records (dst, src)",
            (F.COW, F.CONTENT), patches=am.COW_RECORDED_REVERSED)
    yield m("swap_mapping_reversed", "swap returns {destination id: source id}",
            (F.SWAP,), patches=dm.SWAP_MAPPING_REVERSED)
    yield m("free_count_omits_evictor", "the free count leaves out the evictable ids",
            (F.FREE, F.CACHE), patches=am.FREE_COUNT_OMITS_EVICTOR)
    yield m("free_count_double_counts", "the free count counts every evictable id twice",
            (F.FREE, F.ATOMIC), patches=am.FREE_COUNT_DOUBLE_COUNTS)
    yield m("chain_hash_drops_prefix", "the previous block's hash is left out of the chain hash",
            (F.HASH, F.CONTENT, F.LEAK), patches=hm.HASH_DROPPING_PREFIX)
    yield m("free_on_every_decrement",
            "a hashless id is pushed on the free deque on every decrement, not only at zero",
            (F.LEAK, F.FREE, F.RC), patches=am.PUSH_ON_EVERY_DECREMENT)
    yield m("fork_drops_total",
            "fork does not copy a block's token total (a window's first kept block)",
            (F.TABLE, F.LRU, F.LEAK), patches=am.FORK_DROPS_TOTAL)
    yield m("fork_one_ref_short", "fork takes no reference for the first block of the chain",
            (F.RC,), patches=am.FORK_ONE_REF_SHORT)
    yield m("immutable_blocks_keep_partial",
            "allocate_immutable_blocks runs out half way and keeps what it took",
            (F.ATOMIC, F.LEAK), patches=am.IMMUTABLE_BLOCKS_KEEP_PARTIAL)
    # -- more classes like them
    yield m("lru_tie_ignores_depth", "LRU ties ignore the hashed-token count",
            (F.LRU,), patches=em.DEPTH_BLIND)
    # LRU (the evictor ranks by it), or TABLE: every block's num_tokens_total is checked
    yield m("tokens_total_not_chained",
            "num_tokens_total counts the block's own tokens only (evictor depth is wrong)",
            (F.LRU, F.TABLE), patches=hm.LOCAL_TOKEN_COUNT)
    # Trusting its own wrong flag, the allocator also moves a decoding block onto such an id
    # (it does not know the KV was never written): the block's first tokens' KV is lost.
    yield m("computed_before_marked", "a newly cached id is reported computed before marking",
            (F.COMPUTED, F.CONTENT), patches=am.COMPUTED_ON_PROMOTION)
    yield m("hit_counted_twice", "taking a cached reference records a second hit",
            (F.HIT,), patches=am.HIT_COUNTED_TWICE)
    yield m("miss_counted_on_failure", "a failed immutable allocation still counts a miss",
            (F.HIT, F.ATOMIC), patches=am.MISS_COUNTED_ON_FAILURE)
    yield m("touched_count_undercounts",
            "swap-in estimates count a block cached on an evictable id as free of charge",
            (F.FREE,), patches=am.TOUCHED_COUNTS_EVICTABLE_AS_RESIDENT)
    yield m("swap_in_on_source_device", "swap brings the blocks back in on the source device",
            (F.SWAP,), patches=dm.SWAP_IN_ON_SOURCE)
    yield m("cow_destination_left_free",
            "copy-on-write peeks its destination id: it stays free and is handed out again",
            (F.LEAK, F.FREE, F.RC, F.CONTENT), patches=am.COW_DESTINATION_LEFT_FREE)
    yield m("cow_releases_first",
            "copy-on-write drops the shared reference before it has a fresh id",
            (F.ATOMIC, F.RC), patches=am.COW_RELEASES_FIRST)
    yield m("reset_while_in_use",
            "reset_prefix_cache proceeds while mutable (uncached) blocks are in use",
            (F.CACHE,), patches=am.RESET_WHILE_IN_USE)
    yield m("evicts_before_hashless",
            "fresh ids come from the evictor while hashless-free ids exist",
            (F.CACHE, F.LRU), patches=am.EVICTS_BEFORE_HASHLESS)
    yield m("cached_prefix_bisect",
            "find_cached_blocks_prefix bisects, assuming cached+computed blocks are prefix-closed",
            (F.COMPUTED,), patches=am.BISECTED_CACHED_PREFIX)
    # -- engine-side questions: only CommonComputedIds / HitBurst reach these
    yield m("common_computed_shortest",
            "get_common_computed_block_ids returns the shortest list, not the common prefix",
            (F.COMPUTED,), (BLOCK,), patches=xm.COMMON_COMPUTED_SHORTEST)
    yield m("hit_rate_window_forgets",
            "the hit-rate counters restart after every completed window of 1000 queries",
            (F.HIT,), (BLOCK,), patches=xm.HIT_RATE_WINDOW_FORGETS)
    # -- table queries and sliding windows: only TableSlots / IdSpace / SwapLog and
    # windowed tables reach these
    yield m("physical_id_not_offset",
            "get_physical_block_id returns the absolute id (CPU ids are not offset to 0..C-1)",
            (F.SWAP,), (SEQUENCE,), patches=tm.PHYSICAL_ID_NOT_OFFSET)
    yield m("swap_log_not_reset", "get_and_reset_swaps returns the swap log but keeps it",
            (F.SWAP,), (SEQUENCE,), patches=tm.SWAP_LOG_NOT_RESET)
    yield m("null_block_freed",
            "free of the null block frees the GPU block it wraps while it stays in use",
            (F.FREE, F.LEAK, F.RC), (SEQUENCE,), patches=tm.NULL_BLOCK_FREED)
    yield m("owner_read_without_default",
            "a GPU allocator's free reads block._owner without a default: freeing the null "
            "block there (it has no owner) crashes instead of being refused",
            (F.CRASH,), (SEQUENCE,), patches=tm.OWNER_READ_WITHOUT_DEFAULT)
    # -- extension queries: only BlockInfo reaches these
    yield m("refcount_caps_at_one",
            "get_block_refcount reports 1 for a shared id (held or not, not how often)",
            (F.RC,), (BLOCK,), patches=qm.REFCOUNT_CAPS_AT_ONE)
    yield m("null_block_writable",
            "the null block takes tokens: append_token_ids writes into the block it wraps",
            (F.TABLE,), (SEQUENCE,), patches=tm.NULL_BLOCK_WRITABLE)
    # -- hit metrics count admissions only; sliding-window tables swap
    yield m("swap_in_counts_queries",
            "a swap-in counts a cache query per full block (a hit on a cached id, else a miss)",
            (F.HIT,), patches=wm.SWAP_IN_COUNTS_QUERIES)
    # SWAP: the valid swap of a windowed table is refused (a typed refusal of a valid swap)
    yield m("window_swap_refuses_null",
            "swap does not skip the null block: a table whose window dropped blocks cannot swap",
            (F.SWAP,), (SEQUENCE,), patches=wm.WINDOW_SWAP_REFUSES_NULL)
    # SWAP (mapping, devices), LEAK/FREE (the null id released), TABLE (a table shows a
    # CPU id at a dropped entry), CONTENT (the released id is handed to another block)
    yield m("window_swap_moves_null",
            "swap moves the block the null block wraps to the other device with the table",
            (F.SWAP, F.LEAK, F.FREE, F.TABLE, F.CONTENT), (SEQUENCE,),
            patches=wm.WINDOW_SWAP_MOVES_NULL)
    # RC: the oracle's family for a valid table fork refused with a typed error (the chain
    # walk meets the freed block: ForkError; its recycled object: a cycle or a foreign chain)
    yield m("window_drop_keeps_link",
            "the window drop leaves the first kept block linked to the freed one: fork walks "
            "out of the table",
            (F.RC, F.TABLE), (SEQUENCE,), patches=wm.WINDOW_DROP_KEEPS_LINK)
    # -- the content-hash surface: only HashRecompute (and its malformed calls) reaches these
    yield m("public_hash_drops_prefix",
            "the block class's hash_block_tokens leaves out the predecessor's hash",
            (F.HASH,), (BLOCK,), patches=sm.PUBLIC_HASH_DROPS_PREFIX)
    yield m("content_hash_unchained",
            "content_hash hashes every block as a first block (hash_block_tokens is right)",
            (F.HASH, F.CONTENT, F.LEAK, F.CACHE, F.FREE), (BLOCK,),
            patches=sm.UNCHAINED_CONTENT_HASH)
    yield m("hash_arguments_unchecked",
            "hash_block_tokens checks no argument (truthy first flag, stray predecessor hash)",
            (F.ATOMIC,), (BLOCK,), patches=sm.LAX_HASH_ARGUMENTS)
    yield m("int_like_tokens_keyed_apart",
            "the hash keys token ids by repr, so int-subclass ids hash apart from their ints",
            (F.HASH,), (BLOCK,), patches=sm.TEXT_KEY)

    # -- weak keys: only the direct hash-quality check reaches these
    yield m("key_truncated_16_bits",
            "the block key is the digest truncated to 16 bits (collides past a few hundred blocks)",
            (F.HASH,), (HASH_QUALITY,), patches=qk.KEY_TRUNCATED_16_BITS)

    # -- stale ids: stale id lists, swaps of shared ids, one-tracker edits reach these
    yield m("stale_mark_skips_evictor",
            "mark_blocks_as_accessed ignores evictable ids (their LRU rank never moves)",
            # LRU; or CONTENT: the oracle attributes the hit on an id it evicted earlier
            (F.LRU, F.CONTENT), (BLOCK,), patches=im.STALE_MARK_SKIPS_EVICTOR)
    yield m("stale_mark_ignores_free_ids",
            "mark_blocks_as_accessed skips a free id instead of raising ValueError",
            (F.LRU,), (BLOCK,), patches=im.STALE_MARK_IGNORES_FREE_IDS)
    yield m("swap_splits_shared_ids",
            "a swap of handles sharing an id gives each its own destination id (one pair kept)",
            # ATOMIC: a swap naming one handle twice needs two destination ids; on a full
            # pool the second is missing and the first stays taken (the refusal leaks it)
            (F.SWAP, F.RC, F.LEAK, F.ATOMIC), (BLOCK,), patches=im.SWAP_SPLITS_SHARED_IDS)
    yield m("computed_tracker_readds",
            "ComputedBlocksTracker.add_seq of a tracked sequence restarts its list, no error",
            (F.COMPUTED,), (SEQUENCE,), patches=km.TRACKER_READDS)
    # -- end stale ids

    # -- freed behind: only a table block freed through the allocator (TableFreeBlock) and
    # tracker misuse (SeqLostBlocks) reach these
    yield m("table_free_before_check",
            "BlockTable.free frees block after block and fails only at one freed behind it",
            (F.ATOMIC,), (SEQUENCE,), patches=km.TABLE_FREE_BEFORE_CHECK)
    yield m("tracker_keeps_lost_blocks",
            "the computed tracker returns its old list for a sequence that lost blocks",
            (F.COMPUTED,), (SEQUENCE,), patches=km.TRACKER_KEEPS_LOST_BLOCKS)
    # -- end freed behind

    # -- the evictor's own contract (docs/API.md §6): only the evictor machine reaches these
    yield m("evictor_ties_to_shallowest", "equal times evict the fewest hashed tokens first",
            (F.LRU,), (EVICTOR,), patches=em.SHALLOW_TIE)
    yield m("evictor_update_forward_only", "evictor.update ignores a time older than the last",
            (F.LRU,), (EVICTOR,), patches=em.FORWARD_ONLY_UPDATE)
    yield m("evictor_remove_keeps_count", "evictor.remove does not decrement num_blocks",
            (F.LEAK,), (EVICTOR,), patches=em.REMOVE_KEEPS_COUNT)
    yield m("evictor_remove_absent_silent", "evictor.remove of a non-candidate raises nothing",
            (F.LEAK,), (EVICTOR,), patches=em.LAX_REMOVE)

    # -- error classes: typed and atomic, but not the builtin docs/API.md pins
    # (models.families.v0.error_classes)
    yield m("no_free_blocks_not_value_error", "NoFreeBlocksError is a RuntimeError, not a "
            "ValueError", (F.CRASH,), (BLOCK,), patches=ecm.RUNTIME_NO_FREE_BLOCKS)
    yield m("evictor_update_value_error", "evictor.update of a non-candidate raises a "
            "ValueError, not a KeyError", (F.CRASH,), (EVICTOR,),
            patches=ecm.VALUE_ERROR_UPDATE)
    yield m("unknown_device_value_error", "a device that is not a Device raises a ValueError, "
            "not a KeyError", (F.CRASH,), (BLOCK,), patches=ecm.VALUE_ERROR_DEVICE)
    # -- end error classes

    # -- construction: only Construct (an allocator built beside the program's) reaches these
    yield m("lenient_block_ids",
            "the constructor drops bad block ids (duplicates, non-ints, out of range) silently",
            (F.ATOMIC,), (BLOCK,), patches=cm.LENIENT_BLOCK_IDS)
    # Its own ids read back wrong (LEAK, SWAP), or refused (a valid construction refused
    # with a typed error: the construction's misuse family, ATOMIC).
    yield m("block_ids_assumed_contiguous",
            "the constructor turns explicit block ids into a range from the smallest",
            (F.LEAK, F.SWAP, F.ATOMIC), (BLOCK,), patches=cm.CONTIGUOUS_IDS)
    yield m("create_accepts_any_type", "create builds naive allocators for an unknown type",
            (F.ATOMIC,), (BLOCK,), patches=cm.ANY_TYPE_CREATES)
    # -- end construction

    # -- refcount level: RefCounter and CopyOnWriteTracker (docs/API.md §7), driven directly
    yield m("refcount_view_allows_incr", "the read-only view's incr goes through to the counter",
            (F.RC,), (REFCOUNT,), patches=rm.LEAKY_VIEW)
    yield m("refcount_decr_clamps_at_zero", "RefCounter.decr at 0 returns 0 instead of raising",
            (F.RC,), (REFCOUNT,), patches=rm.CLAMPING)
    yield m("refcount_view_of_a_copy", "as_readonly views a new counter, not the live counts",
            (F.RC, F.COW), (REFCOUNT,), patches=rm.SNAPSHOT_VIEW)
    yield m("cow_clear_keeps_pairs", "CopyOnWriteTracker.clear_cows returns the pairs, keeps them",
            (F.COW,), (REFCOUNT,), patches=rm.STICKY_COW)
    yield m("cow_appendable_shared_by_two", "is_appendable is true at refcount 2",
            (F.COW,), (REFCOUNT,), patches=rm.SHARED_BY_TWO)
    yield m("cow_record_accepts_none", "record_cow records a pair with a None id",
            (F.COW,), (REFCOUNT,), patches=rm.NONE_TOLERANT_COW)
    # -- end refcount level

    # -- device calls: one device's own allocator called directly (models.families.v0.ops.device)
    yield m("swap_in_fails_midway",
            "a device's swap_in takes ids without checking the free count (partial on failure; "
            "a miss counted)",
            (F.ATOMIC, F.HIT), (BLOCK,), patches=vm.SWAP_IN_MIDWAY_FAILURE)
    yield m("swap_in_takes_held_blocks",
            "a device's swap_in gives a block that still holds an id a second one",
            (F.SWAP,), (BLOCK,), patches=vm.SWAP_IN_TAKES_HELD_BLOCKS)
    # -- end device calls

    # -- request keys: a claimed key builder (tests.zoo.v0.request_key_mutants)
    yield m("key_builder_bool_lora", "the key builder takes a bool LoRA id as adapter 0 or 1",
            (F.ATOMIC, F.HASH), (BLOCK,), patches=pm.BOOL_LORA_IS_INT)
    yield m("key_builder_bytes_salt_ignored",
            "the key builder drops a bytes salt: bytes-salted requests share with unsalted ones",
            (F.HASH, F.CONTENT, F.LEAK, F.CACHE, F.FREE), (BLOCK,), patches=pm.BYTES_SALT_IGNORED)
    # Equal keys that stop sharing: equal content under two hashes (HASH), a missed reuse
    # (CACHE), or a fresh id the full pool does not have (FREE).
    yield m("key_builder_bytes_salt_apart",
            "the key builder folds a bytes salt in as its repr: b'a' stops sharing with 'a'",
            (F.HASH, F.CACHE, F.FREE), (BLOCK,), patches=pm.BYTES_SALT_APART)
    # -- end request keys

    # -- computed answers (tests.zoo.v0.contract_mutants)
    yield m("freed_unwritten_computed",
            "a block freed before any mark is reported computed when a re-request hits it",
            (F.COMPUTED, F.CONTENT),  # and a decoding block moves onto it (as above)
            patches=km18.FREED_UNWRITTEN_STAYS_COMPUTED)
    yield m("computed_ids_with_holes",
            "get_computed_block_ids skips an uncomputed id and reports the computed ones after it",
            (F.COMPUTED,), patches=km18.COMPUTED_IDS_WITH_HOLES)
    # -- end computed answers

    # -- the held-out mutants (tests.zoo.v0.heldout_mutants)
    yield m("release_files_block_time",
            "release files the block object's access time, not the id's",
            (F.LRU,), patches=ho.RELEASE_FILES_BLOCK_TIME)
    yield m("revival_double_ref", "reviving an evictable id takes two references",
            (F.RC, F.LEAK, F.FREE), patches=ho.REVIVAL_DOUBLE_REF)
    yield m("touched_not_cleared",
            "the touched set is never cleared: a reused id is computed after the next mark",
            (F.COMPUTED,), patches=ho.TOUCHED_NOT_CLEARED)
    yield m("unwritten_kept_on_reuse", "an evicted id keeps its unwritten mark into its next life",
            (F.COMPUTED, F.CONTENT), patches=ho.UNWRITTEN_KEPT_ON_REUSE)
    yield m("evicted_id_keeps_hash", "an evicted id's tracker keeps its old content hash",
            (F.CACHE, F.HASH, F.LEAK), patches=ho.EVICTED_ID_KEEPS_HASH)
    yield m("revival_not_touched", "an unwritten id revived by a hit is never marked computed",
            (F.COMPUTED,), patches=ho.REVIVAL_NOT_TOUCHED)
    yield m("forget_unwritten_stays_evictable",
            "an unwritten id leaving the cache stays in the evictor as well",
            (F.CACHE, F.FREE, F.LEAK), patches=ho.FORGET_UNWRITTEN_STAYS_EVICTABLE)
    yield m("promotion_counts_hit", "a promotion onto a duplicate counts as a cache hit",
            (F.HIT,), patches=ho.PROMOTION_COUNTS_HIT)
    yield m("promote_onto_unwritten",
            "a filled block moves onto a cached id whose KV was never written",
            (F.CONTENT, F.COMPUTED), patches=ho.PROMOTE_ONTO_UNWRITTEN)
    yield m("chain_memo_ignores_extra", "the chain-hash memo ignores the extra key",
            (F.HASH, F.CONTENT, F.LEAK), patches=ho.CHAIN_MEMO_IGNORES_EXTRA)
    yield m("swap_in_miss_not_cached", "a full block swapped in on a miss is not cached",
            (F.CACHE,), patches=ho.SWAP_IN_MISS_NOT_CACHED)
    yield m("cow_pair_off_by_one", "a block shared by two is appended in place",
            (F.COW, F.CONTENT, F.LEAK), patches=ho.COW_PAIR_OFF_BY_ONE)
    yield m("table_tail_not_counted", "table allocation does not count the tail's block",
            (F.ATOMIC, F.FREE), patches=ho.TABLE_TAIL_NOT_COUNTED)
    yield m("lookahead_estimate_short", "the touched estimate drops one lookahead overflow",
            (F.FREE,), patches=ho.LOOKAHEAD_ESTIMATE_SHORT)
    yield m("common_computed_counts_empty", "the common computed prefix counts empty lists",
            (F.COMPUTED,), patches=ho.COMMON_COMPUTED_COUNTS_EMPTY)
    yield m("mark_accessed_skips_last", "the fast access mark skips the last id",
            (F.LRU,), patches=ho.MARK_ACCESSED_SKIPS_LAST)
    yield m("fork_shares_token_list", "a fork's handles share one token list",
            (F.TABLE, F.CONTENT, F.COW), patches=ho.FORK_SHARES_TOKEN_LIST)
    yield m("run_appended_not_pushed", "same-time eviction keys are appended, not heap-pushed",
            (F.LRU,), patches=ho.RUN_APPENDED_NOT_PUSHED)
    yield m("evict_takes_stale_key", "eviction takes a stale key as live",
            (F.LRU, F.LEAK, F.FREE), patches=ho.EVICT_TAKES_STALE_KEY)
    yield m("compaction_drops_runs", "evictor compaction drops the same-time runs' live keys",
            (F.CRASH, F.LRU, F.LEAK, F.FREE), (EVICTOR, BLOCK), patches=ho.COMPACTION_DROPS_RUNS)
    yield m("reset_keeps_unwritten", "a prefix-cache reset keeps the unwritten marks",
            (F.COMPUTED, F.CONTENT, F.TABLE), (BLOCK,), patches=ho.RESET_KEEPS_UNWRITTEN)
    yield m("decode_counts_one_slot", "an in-place append counts one slot whatever it wrote",
            (F.TABLE,), (SEQUENCE, BLOCK), patches=ho.DECODE_COUNTS_ONE_SLOT)
    # FREE for these two: the append's admission shows it first (no copies to pay for; a
    # window moved past the table's end refused where the pool was short).
    yield m("speculative_writes_shared", "a multi-block append writes into shared blocks",
            (F.COW, F.CONTENT, F.LEAK, F.FREE), (SEQUENCE,),
            patches=ho.SPECULATIVE_WRITES_SHARED)
    yield m("window_end_off_by_one", "a sliding window drops one block too many",
            (F.TABLE, F.CONTENT, F.LEAK, F.FREE), (SEQUENCE,), patches=ho.WINDOW_END_OFF_BY_ONE)
    yield m("table_fork_forgets_slots", "a forked table counts one slot fewer",
            (F.TABLE,), (SEQUENCE,), patches=ho.TABLE_FORK_FORGETS_SLOTS)
    yield m("window_rate_old_count", "the completed-window hit rate divides by the old count",
            (F.HIT,), patches=ho.WINDOW_RATE_OLD_COUNT)
    yield m("swap_estimate_counts_handles", "swap's admission counts every handle, not every id",
            (F.FREE, F.SWAP), patches=ho.SWAP_ESTIMATE_COUNTS_HANDLES)
    yield m("free_table_keeps_ids", "a table free leaves its blocks' ids set",
            (F.TABLE, F.RC, F.LEAK), (SEQUENCE,), patches=ho.FREE_TABLE_KEEPS_IDS)
    yield m("block_append_total_stale", "a partial block's append leaves its token total stale",
            (F.TABLE, F.LRU), patches=ho.BLOCK_APPEND_TOTAL_STALE)
    # COMPUTED too: a sequence's cached-token count takes blocks cached under another key.
    yield m("block_hash_drops_extra", "a block's own content hash leaves out its extra key",
            (F.HASH, F.CACHE, F.CONTENT, F.COMPUTED), (SEQUENCE, BLOCK),
            patches=ho.BLOCK_HASH_DROPS_EXTRA)
    yield m("ensure_slots_rounds_down", "ensure_num_empty_slots rounds the blocks it adds down",
            (F.TABLE, F.FREE, F.CACHE, F.CONTENT), (SEQUENCE,),
            patches=ho.ENSURE_SLOTS_ROUNDS_DOWN)
    yield m("append_fit_ignores_copies", "the append admission check ignores copy-on-write copies",
            (F.ATOMIC, F.FREE), (SEQUENCE,), patches=ho.APPEND_FIT_IGNORES_COPIES)
    yield m("slow_mark_skips_active",
            "a mark of active and evictable ids together stamps the evictable ones only",
            (F.LRU,), patches=ho.SLOW_MARK_SKIPS_ACTIVE)
    yield m("tracker_gap_never_set", "the computed tracker forgets a gap and extends past it",
            (F.COMPUTED,), (SEQUENCE,), patches=ho.TRACKER_GAP_NEVER_SET)
    yield m("num_cached_not_frozen", "the cached-token count moves during prefill",
            (F.COMPUTED,), (SEQUENCE,), patches=ho.NUM_CACHED_NOT_FROZEN)
    yield m("seq_access_ignores_time", "a sequence's access time never reaches its blocks",
            (F.LRU,), (SEQUENCE,), patches=ho.SEQ_ACCESS_IGNORES_TIME)
    yield m("table_tail_drops_extra", "a table's tail block loses the extra key",
            (F.HASH, F.CACHE, F.CONTENT), (SEQUENCE, BLOCK), patches=ho.TABLE_TAIL_DROPS_EXTRA)
    yield m("speculative_new_no_extra", "blocks a multi-block append adds lose the extra key",
            (F.HASH, F.CACHE, F.CONTENT, F.COMPUTED), (SEQUENCE,),
            patches=ho.SPECULATIVE_NEW_NO_EXTRA)
    yield m("lora_zero_is_none", "LoRA adapter 0 alone keys as no LoRA",
            (F.HASH, F.ATOMIC), (BLOCK,), patches=ho.LORA_ZERO_IS_NONE)
    yield m("revival_written_uncomputed", "a hit reviving a written id reports it uncomputed",
            (F.COMPUTED,), patches=ho.REVIVAL_WRITTEN_UNCOMPUTED)
    yield m("chain_on_gpu_always", "immutable chains always go to the GPU",
            (F.SWAP, F.LEAK, F.CACHE, F.FREE), (BLOCK,), patches=ho.CHAIN_ON_GPU_ALWAYS)
    yield m("full_touched_counts_resident", "the full-touched estimate counts resident blocks",
            (F.FREE,), (BLOCK,), patches=ho.FULL_TOUCHED_COUNTS_RESIDENT)
    yield m("update_keeps_meta_time", "evictor.update re-ranks the id but shows the old time",
            (F.LRU,), (BLOCK, EVICTOR), patches=ho.UPDATE_KEEPS_META_TIME)
    yield m("tracker_hashes_unchained", "the computed tracker restarts the chain at each increment",
            (F.COMPUTED,), (SEQUENCE,), patches=ho.TRACKER_HASHES_UNCHAINED)
    yield m("remove_seq_keeps_frozen", "removing a sequence keeps its frozen cached-token count",
            (F.COMPUTED,), (SEQUENCE,), patches=ho.REMOVE_SEQ_KEEPS_FROZEN)
    yield m("hit_rate_of_windows", "the hit rate is the completed windows' average",
            (F.HIT,), patches=ho.HIT_RATE_OF_WINDOWS)
    yield m("reset_all_past_refusal", "a reset of every device goes on past a refusal",
            (F.CACHE, F.ATOMIC), (BLOCK,), patches=ho.RESET_ALL_PAST_REFUSAL)
    yield m("append_touch_estimate_short", "the append touch estimate ignores the partial block",
            (F.FREE,), (SEQUENCE,), patches=ho.APPEND_TOUCH_ESTIMATE_SHORT)
    yield m("unseen_off_by_one", "a table's unseen tokens skip one",
            (F.TABLE,), (SEQUENCE,), patches=ho.UNSEEN_OFF_BY_ONE)
    # -- end held-out mutants

ZOO: dict[str, Mutant] = {mutant.name: mutant for mutant in _mutants()}

#: Mutants whose only bug is an error of the wrong builtin class: caught as CRASH by design.
WRONG_ERROR_CLASS = frozenset({"no_free_blocks_not_value_error", "evictor_update_value_error",
                               "unknown_device_value_error"})
#: Mutants whose only bug is an error no contract allows (an untyped crash of a call that must
#: be refused), or whose first observable effect is one (candidates lost inside the evictor's
#: private heaps, while every id the suite can read is where it belongs, until an eviction pops
#: an empty heap): CRASH is their explanation too.
UNTYPED_CRASH = frozenset({"owner_read_without_default", "compaction_drops_runs"})

# Every factory is a module attribute, so ``tests.zoo.v0.broken:<name>`` resolves.
for _mutant in ZOO.values():
    register(_mutant.name, _mutant.patches)
    globals()[_mutant.name] = factory(_mutant.name, __name__)


def prefixcache_claims(target_factory: Any) -> dict[str, Any]:
    """Claims of a zoo factory (read by ``properties.core.targets.load_target``): those of its
    patched copy of the package."""
    return claims(getattr(target_factory, "__name__", "?"))
