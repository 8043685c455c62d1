"""Hand classification of the mutants `pytest properties` does not kill.

RULES: (module, function regex, mutant numbers or None for all, group[, "unexec"]); the first
match wins; rules marked "unexec" apply only to mutants the suite never executes (they were
written from the never-executed list).
GROUPS: group -> (category, text). Categories: b = semantically equivalent (or equivalent for
every caller in the package), c = message text or misuse validation / injected-hash handling
(re-run with tests/hardening), d = a gap of the suite (with the proposal that would kill it).
"""

from __future__ import annotations

GROUPS: dict[str, tuple[str, str]] = {
    # ---- (b) equivalent
    "B-FAST": (
        "b",
        "Fast path or memo only: the mutant takes the slower public path "
        "(`prev.content_hash`, `prev.num_tokens_total`) or recomputes a memoised hash; "
        "every observable value is identical.",
    ),
    "B-UNREACH": (
        "b",
        "Defensive path unreachable through the allocator/BlockTable API, or an "
        "argument whose only caller passes the same value (BlockTable's "
        "`_allocate_blocks_for_token_ids` is only called with prev_block=None): a "
        "non-PrefixCachingBlock (mock) predecessor, a full block whose predecessor has "
        "no memoised hash (promotion hashes blocks in chain order), duplicate hashes "
        "inside one chain request, `zip(..., strict=...)` over two lists built with "
        "equal lengths.",
    ),
    "B-INIT": (
        "b",
        "Initial value that is overwritten before it is read (`enable()`/`reset()`, "
        "`_new_block` sets `_owner`), or replaced by another falsy value that is only "
        "tested for truthiness.",
    ),
    "B-INNER": (
        "b",
        "Arguments of the wrapped inner `NaiveBlock` (prev, allocator, CoW target) "
        "or of the hashless allocator's block factory, which PrefixCachingBlock never "
        "uses: the wrapper keeps prev/allocator itself, appends to the inner token list "
        "directly, and creates blocks from its own pool.",
    ),
    "B-ARITH": (
        "b",
        "Same value or same order for every input: `create` passing "
        "`range(num_gpu_blocks)` or nothing (the default is the same range); "
        "`lookahead > empty` vs `>=` "
        "adds `cdiv(0, block_size) == 0` at equality; `block.content_hash` of a non-full "
        "block is already None; evictor keys shifted by a constant (`- _SIGN_BIT`, "
        "add order starting at 1, 0.0 mapped just below the smallest positive float) "
        "keep the same order.",
    ),
    "B-TIES": (
        "b",
        "Insertion-order tie-break of the evictor (equal time and depth): outside the "
        "contract the suite checks (models/families/v0/lru.py permits the whole minimal bucket, "
        "since vLLM breaks such ties by id and Aphrodite by insertion order). The "
        "evictor's own docstring promises insertion order; tests/allocator/"
        "test_evictor.py checks it.",
    ),
    "B-PERF": (
        "b",
        "When the evictor compacts its heap (threshold arithmetic): compaction "
        "rebuilds the heap from the live keys and changes no result, only cost.",
    ),
    "B-IGNORED": (
        "b",
        "Argument the callee ignores: `mark_blocks_as_computed` marks every id "
        "promoted since the last call whatever ids it is given (as upstream).",
    ),
    "B-TYPE": ("b", "`typing.cast` target changed: no runtime effect."),
    "B-POOL": (
        "b",
        "Block-object pool sizing/recycling only (performance): pooled blocks are "
        "re-initialised from explicit arguments on reuse, a block that is not returned "
        "to the pool is simply garbage-collected, and the hashless allocator's own pool "
        "is never used by the prefix-caching allocator.",
    ),
    # ---- (c) message text and misuse validation
    "C-MSG": (
        "c",
        "Error-message, log-message or argument-name (`what`) text only. No test "
        "checks message text (tests/hardening checks the exact error class and an "
        "unchanged state), and docs/API.md specifies no message except that "
        "NoFreeBlocksError has none.",
    ),
    "C-VAL": (
        "c",
        "Validation of misuse (argument types, device argument to a single-device "
        "allocator, bad extra_hash / prev_block, appends to hashed, computed or freed "
        "blocks). The properties suite only issues valid calls; tests/hardening covers "
        "misuse.",
    ),
    "C-HASH": (
        "c",
        "Handling of an injected `hash_function`; the properties target never injects "
        "one (tests/hardening/test_isolation.py does).",
    ),
    # ---- (d) gaps
    "D-PROMOTE": (
        "d",
        "Promotion of an appended-to-full block onto an id *already cached* for "
        "the same content (`promote_to_immutable_block` switch branch) is never "
        "executed. Proposal (block-level machine, `append`): when an open block's "
        "remaining slots can complete a content the oracle already caches after the "
        "same prefix (oracle.hit_candidates(prev, dev, extra)), draw the completing "
        "tokens from that content; the oracle then checks the id switch, refcounts of "
        "both ids and the free count (RC, FREE, CACHE).",
    ),
    "D-EVICTABLE": (
        "d",
        "Queries on *evictable* ids are never made: `mark_blocks_as_accessed` "
        "of an evictable id (evictor.update), `block_is_computed` of an evictable "
        "id. Proposal (block-level): `mark_accessed` draws from "
        "`oracle.live_blocks() + oracle.evictable_ids()`, and `cached_prefix` also "
        "queries the hashes of freed chains (the model knows them), so LRU order "
        "updates and computed=evictable are judged (LRU, COMPUTED). (`add` mutants that "
        "change the key layout keep the order of `add`ed keys and break only "
        "against keys rebuilt by `update`, which never runs.)",
    ),
    "D-PREFIX-PARTIAL": (
        "d",
        "`find_cached_blocks_prefix` is only asked about whole live "
        "chains, whose cached-and-computed prefix is all or nothing, so "
        "`length += 2` survives. Proposal (block-level `cached_prefix`): query "
        "the chain's hashes followed by hashes that are not cached (or a chain "
        "after a partial `mark_computed`), and let the oracle compare the exact "
        "returned prefix (HIT/COMPUTED).",
    ),
    "D-EXTRA": (
        "d",
        "Dropping `extra_hash` from a content hash (single immutable allocation, "
        "mutable block promoted by append, `get_num_free_blocks_needed`) is not "
        "detected: block-level `_full_tokens` only offers hit candidates cached with "
        "the *same* extra key, and mutable blocks are allocated without one. Proposal: "
        "(1) `allocate_mutable` draws `extra_hashes(caps)` like `allocate_immutable`; "
        "(2) `_full_tokens` also samples contents cached under a *different* extra key "
        "after the same prefix, which must miss (oracle HIT/CACHE isolation); "
        "(3) sequence-level: draw the extra key from {None, 1} and the suffix from the "
        "system prompts so that equal token chains with different keys meet.",
    ),
    "D-BLOCKATTR": (
        "d",
        "Attributes of the block objects are not compared with the model: "
        "`prev_block` of an immutable block (`_allocate_immutable(None, ...)`), "
        "`extra_hash`, `last_accessed`, `computed`. Proposal (oracle step check, "
        "models/): for every live handle compare `prev_block` identity with the "
        "model's chain, `extra_hash`, `num_tokens_total`, `is_full`, and "
        "`computed` with the model's computed set.",
    ),
    "D-RESET": (
        "d",
        "State after a *successful* `reset_prefix_cache` is barely exercised "
        "(it only succeeds when no block is in use): a mutant that leaves "
        "`content_hash = ''` on reset ids survives, though a reused id then goes to the "
        "evictor instead of the free deque when freed. Proposal (block-level rule "
        "`drain_and_reset`): free every live block, reset, then continue; the oracle's "
        "FREE/CACHE/LEAK checks see the reused ids.",
    ),
    "D-SWAPSHARED": (
        "d",
        "Swapping several handles that share one id, or several chains, in "
        "one call (forked sequences swapped together, `_share_block_id`, more than "
        "one non-full block in a swap-in) is never done. Proposal: "
        "sequence-level `swap_group` swaps a table together with its forks in one "
        "`swap` call (as vLLM swaps a sequence group); block-level `swap` of the "
        "union of a chain and its fork (SWAP, RC).",
    ),
    "D-COW": (
        "d",
        "Copy-on-write when an appendable block is shared by exactly two handles "
        "(`refcount <= 2` instead of `<= 1`) survives 40 examples; the block-level machine "
        "kills it at the profile's 150. At 40 examples neither machine appends to a "
        "partial block right after forking it once. Proposal (block-level): a `fork_then_append` "
        "rule (fork a chain whose last block is partial, then append to one of the two "
        "handles) so the COW/CONTENT checks see it in every run; also worth checking why "
        "the sequence-level fork+append path does not catch it.",
    ),
    "D-CAPACITY": (
        "d",
        "The capacity pre-check of `BlockTable.append_token_ids` "
        "(`_check_append_fits`: new blocks for tokens + lookahead, copy-on-write "
        "copies, ids a window returns) can be made optimistic without the suite "
        "noticing: the allocation that follows raises the same NoFreeBlocksError, "
        "and appends exactly at the free-block boundary with a shared last block "
        "are rare. Proposal (sequence-level): an `append_at_capacity` rule that "
        "picks tokens + lookahead so the need is exactly free, free+1 (the model "
        "knows both), on a forked table so a CoW copy counts; the oracle already "
        "judges the outcome and ATOMIC (no partial append).",
    ),
    "D-TABLE-IDS": (
        "d",
        "`BlockList.append_token_ids` not refreshing the cached id of a block "
        "whose id changed during the append (copy-on-write or promotion onto a "
        "cached id) survives: the table's `physical_block_ids` are not compared "
        "with the model right after such an append. Proposal (sequence-level "
        "oracle, TABLE): after every `TableAppend`, compare "
        "`table.physical_block_ids` with the ids of the table's block objects and "
        "with the model.",
    ),
    "D-POOL": (
        "d",
        "`BlockPool.free_block` accepting a block whose pool slot holds a *different* "
        "object would recycle a slot that is still in use (e.g. a block made by the GPU "
        "pool, swapped and freed on the CPU). Not detected. Proposal (block-level): "
        "swap a chain out, free it on the destination, allocate there again, and let "
        "the oracle check every live handle's tokens and id (CONTENT, TABLE).",
    ),
    "D-TIME": (
        "d",
        "Access times outside the machines' clock (which starts at 0 and advances by "
        "0, 1 or 2.5) never occur: -0.0 (must tie with 0.0), negative times other than "
        "the never-accessed default -1 (so the negative branch of the IEEE-754 key "
        "mapping is only ever asked to put -1 below 0.0), times beyond 2**53 where "
        "float rounding matters. Proposal: `tick()` occasionally "
        "jumps to -0.0, a negative value or a large exact float; the LRU model ranks "
        "them exactly.",
    ),
    "D-APPEND-SWAPPED": (
        "d",
        "Appending to a block whose owner differs from the allocator that "
        "created it (created on CPU, swapped to GPU) never happens, so "
        "choosing `_allocator` instead of `_owner` survives. Proposal "
        "(block-level): allow `append` on GPU blocks that were created on the "
        "CPU and swapped in (the model tracks the device), judged by RC/COW/FREE.",
    ),
    "D-API-TRACKERS": (
        "d",
        "`ComputedBlocksTracker`, `LastAccessBlocksTracker` and "
        "`_tracker_hash_function` are never driven by the state machines (they are "
        "covered only by tests/allocator). Proposal: a sequence-level rule per "
        "scheduler call: `get_num_cached_tokens(seq)` checked against the model's "
        "cached-and-computed prefix length, `get_cached_computed_blocks_and_update` "
        "against the model's computed ids, and `update_seq_blocks_last_access` "
        "through the LRU model (HIT, COMPUTED, LRU).",
    ),
    "D-API-OTHER": (
        "d",
        "API entry points the machines never call or call only one way: "
        "`get_common_computed_block_ids`, `is_block_cached`, the "
        "`hash_block_tokens` classmethod, `get_physical_block_id`, direct "
        "`block_is_computed`, construction without `block_ids`, the default of "
        "`skip_last_block_id`, `get_num_free_blocks_needed` with a predecessor, re-using a "
        "`BlockTable` after `free`, `BlockTable.get_num_required_blocks` and "
        "`get_num_blocks_touched_by_append_slots`. "
        "Proposal: block-level query rules for each (the model can answer all of "
        "them), and calling `get_computed_block_ids` with the default argument.",
    ),
    "D-COMPUTED": (
        "d",
        "Computed marks of ids that change hands inside one scheduling step are "
        "not judged: an id revived from the evictor by a hit must be computed "
        "(`_acquire_cached`), and an id evicted and reused before the next "
        "`mark_blocks_as_computed` must leave the touched set (`_take_fresh_id`). "
        "Proposal (block-level): after any allocation that hits an evictable id or "
        "evicts, run `computed_block_ids` / `cached_prefix` on the affected chains "
        "before `mark_computed`; the oracle's COMPUTED model already knows both "
        "answers.",
    ),
    "D-HELPERS": (
        "d",
        "Public queries and helpers the machines never call: "
        "`get_block_device`, `get_physical_block_id`, `get_num_total_blocks(device)`, "
        "`get_and_reset_swaps`, `CopyOnWriteTracker.is_appendable`/`pending`, "
        "`ReadOnlyRefCounter.get`, `BlockMetaData.__eq__` and its `num_hashed_tokens` / "
        "`last_accessed` fields (upstream's `free_table` metadata), "
        "`LRUEvictor.peek_order`. "
        "Proposal (block-level `query` rule): call each and compare with the model "
        "(device of every live id, swap mapping since the last call, appendability = "
        "refcount <= 1).",
    ),
    "D-EVICTOR-CHURN": (
        "d",
        "Stale heap keys of the LRU evictor barely occur in 40 examples of "
        "<= 40 steps: heap compaction never triggers, and accepting a stale key "
        "as live in `evict` (upstream vLLM's evictor-stale-entry deviation) "
        "survives. Proposal: a "
        "block-level rule that frees and re-hits many cached blocks in one step "
        "(or a 'churn' config with 200 steps); the LRU model judges the order.",
    ),
    "D-SLIDING": (
        "d",
        "Sliding-window block tables and the null block are never driven "
        "(`max_block_sliding_window`, `num_computed_slots`, dropping window blocks, "
        "`BlockList.__setitem__`). Proposal: a sequence-level config option "
        "`sliding_window` (drawn from {None, 1..3 blocks}) passing `num_computed_slots` "
        "on append; the model frees dropped blocks and counts the null block once.",
    ),
    "D-NAIVE": (
        "d",
        "The naive allocator (allocator_type='naive') is never the target: "
        "`pytest properties` judges `prefix_caching` only. Proposal: run the machines "
        "for both allocator types (parametrize the target's `allocator_type`, or a CI "
        "job `pytest properties --allocator-type naive`). Mutants of NaiveBlock fields and "
        "NaiveBlockAllocator set-up that the prefix-caching allocator does not use (it "
        "wraps a NaiveBlock and keeps a NaiveBlockAllocator only for its free deque and "
        "refcounts) are equivalent for that target and are listed here too.",
    ),
    "D-HASH-WIDE": (
        "d",
        "The variable-width encoding of the default hash (tokens outside the "
        "fixed-width range, long varints) and the extra-key builders "
        "(`make_extra_hash`, multimodal items) are never executed at this budget. "
        "Proposal: `tokens()` draws `_WILD` values with fixed probability (e.g. "
        "`st.one_of(small, sampled_from(_WILD))`) instead of the tail of one "
        "integer range, and `extra_hashes` also draws `make_extra_hash(...)` "
        "values; HASH checks collisions between distinct contents. (An encoding mutant that "
        "stays deterministic but loses injectivity is only caught when two "
        "colliding contents meet.)",
    ),
    "D-METRIC-WINDOW": (
        "d",
        "The hit-rate metric's completed-window arithmetic "
        "(`CacheMetricData.query` after a full window of queries) never runs: "
        "runs make far fewer queries than one window. Proposal: a unit-level "
        "property on CacheMetricData with a window-sized burst, or a "
        "block-level `hit_burst` rule; the oracle models the hit rate exactly.",
    ),
    "UNCLASSIFIED": ("?", "not yet classified"),
}

PCB = "prefix_caching_block"
RULES: list[tuple[str, str, set[int] | None, str] | tuple[str, str, set[int] | None, str, str]] = [
    # prefix_caching_block
    (PCB, r"x__real_block$", None, "B-FAST"),
    (PCB, r"x__owner_hash_function$", {6}, "B-TYPE"),
    (PCB, r"x__owner_hash_function$", None, "C-HASH"),
    (PCB, r"xǁBlockTrackerǁ(__init__|disable)$", None, "B-INIT"),
    (PCB, r"xǁBlockTrackerǁreset$", None, "D-API-OTHER"),
    (PCB, r"xǁPrefixCachingBlockǁ__init__$", {9}, "C-VAL"),
    (PCB, r"xǁPrefixCachingBlockǁ__init__$", {42}, "C-HASH"),
    (PCB, r"xǁPrefixCachingBlockǁ__init__$", {40, 44, 46}, "B-INIT"),
    (PCB, r"xǁPrefixCachingBlockǁ__init__$", {43, 45}, "D-BLOCKATTR"),
    (PCB, r"xǁPrefixCachingBlockǁ__init__$", None, "B-INNER"),
    (PCB, r"xǁPrefixCachingBlockǁ_update_num_tokens_total$", {9, 10}, "B-UNREACH"),
    (PCB, r"xǁPrefixCachingBlockǁ_update_num_tokens_total$", None, "B-FAST"),
    (PCB, r"xǁPrefixCachingBlockǁappend_token_ids$", {14, 16}, "D-APPEND-SWAPPED"),
    (PCB, r"xǁPrefixCachingBlockǁappend_token_ids$", {15}, "B-INIT"),
    (PCB, r"xǁPrefixCachingBlockǁappend_token_ids$", None, "C-VAL"),
    (PCB, r"xǁPrefixCachingBlockǁ_current_hash$", None, "B-FAST"),
    (PCB, r"xǁPrefixCachingBlockǁ_compute_content_hash$", {27, 31}, "D-EXTRA"),
    (PCB, r"xǁPrefixCachingBlockǁ_compute_content_hash$", {9, 10, 11, 17, 33}, "B-FAST"),
    (PCB, r"xǁPrefixCachingBlockǁ_compute_content_hash$", None, "B-UNREACH"),
    (PCB, r"xǁPrefixCachingBlockǁhash_block_tokens$", None, "D-API-OTHER"),
    (PCB, r"xǁPrefixCachingBlockAllocatorǁ__init__$", {20, 21, 27}, "C-HASH"),
    (PCB, r"xǁPrefixCachingBlockAllocatorǁ__init__$", {9, 11, 12}, "D-API-OTHER"),
    (PCB, r"xǁPrefixCachingBlockAllocatorǁ__init__$", {48}, "B-INNER"),
    (PCB, r"xǁPrefixCachingBlockAllocatorǁ__init__$", {60}, "D-HELPERS"),
    (PCB, r"xǁPrefixCachingBlockAllocatorǁ__init__$", None, "B-POOL"),
    (PCB, r"xǁPrefixCachingBlockAllocatorǁallocate_immutable_block$", {9, 16}, "D-EXTRA"),
    (PCB, r"xǁPrefixCachingBlockAllocatorǁallocate_immutable_block$", {13}, "D-BLOCKATTR"),
    (PCB, r"xǁPrefixCachingBlockAllocatorǁallocate_immutable_block$", None, "C-VAL"),
    (PCB, r"xǁPrefixCachingBlockAllocatorǁget_num_free_blocks_needed$", {14}, "D-EXTRA"),
    (PCB, r"xǁPrefixCachingBlockAllocatorǁget_num_free_blocks_needed$", {12}, "D-API-OTHER"),
    (PCB, r"xǁPrefixCachingBlockAllocatorǁget_num_free_blocks_needed$", None, "C-VAL"),
    (PCB, r"xǁPrefixCachingBlockAllocatorǁget_computed_block_ids$", {1}, "D-API-OTHER"),
    (PCB, r"xǁPrefixCachingBlockAllocatorǁfind_cached_blocks_prefix$", None, "D-PREFIX-PARTIAL"),
    (PCB, r"xǁPrefixCachingBlockAllocatorǁreset_prefix_cache$", {7, 8}, "C-MSG"),
    (PCB, r"xǁPrefixCachingBlockAllocatorǁreset_prefix_cache$", None, "D-RESET"),
    (PCB, r"xǁPrefixCachingBlockAllocatorǁ_count_needed$", None, "B-UNREACH"),
    (PCB, r"xǁPrefixCachingBlockAllocatorǁ_share_block_id$", None, "D-SWAPSHARED"),
    (
        PCB,
        r"xǁPrefixCachingBlockAllocatorǁ(get_physical_block_id|is_block_cached|get_common_computed_block_ids)$",
        None,
        "D-API-OTHER",
    ),
    (PCB, r"xǁPrefixCachingBlockAllocatorǁpromote_to_immutable_block$", None, "D-PROMOTE"),
    (
        PCB,
        r"xǁPrefixCachingBlockAllocatorǁ(mark_blocks_as_accessed|block_is_computed)$",
        None,
        "D-EVICTABLE",
    ),
    (PCB, r"xǁPrefixCachingBlockAllocatorǁ_create_block$", {8, 15}, "D-EXTRA"),
    (PCB, r"xǁPrefixCachingBlockAllocatorǁ_create_block$", {7, 14}, "B-INIT"),
    (PCB, r"xǁPrefixCachingBlockAllocatorǁ(_take_fresh_id|_acquire_cached)$", None, "D-COMPUTED"),
    (PCB, r"xǁPrefixCachingBlockAllocatorǁ_chain_hashes$", {18, 22}, "D-EXTRA"),
    (PCB, r"xǁPrefixCachingBlockAllocatorǁ_chain_hashes$", {8}, "C-VAL"),
    (PCB, r"xǁPrefixCachingBlockAllocatorǁ_new_block$", {6, 11}, "D-EXTRA"),
    (PCB, r"xǁPrefixCachingBlockAllocatorǁallocate_mutable_block$", {7}, "D-EXTRA"),
    (
        PCB,
        r"xǁPrefixCachingBlockAllocatorǁallocate_(mutable_block|immutable_blocks)$",
        {1, 2, 3},
        "C-VAL",
    ),
    (PCB, r"xǁPrefixCachingBlockAllocatorǁallocate_immutable_blocks$", {15}, "D-EXTRA"),
    (PCB, r"xǁPrefixCachingBlockAllocatorǁallocate_immutable_blocks$", {24}, "B-UNREACH"),
    (
        PCB,
        r"xǁPrefixCachingBlockAllocatorǁ_allocate_immutable$",
        {8, 11, 16, 17, 28},
        "D-BLOCKATTR",
    ),
    (PCB, r"xǁPrefixCachingBlockAllocatorǁ_allocate_immutable$", {21}, "B-INIT"),
    (PCB, r"xǁPrefixCachingBlockAllocatorǁ_allocate_immutable$", {37}, "B-FAST"),
    (PCB, r"xǁPrefixCachingBlockAllocatorǁallocate_immutable_blocks$", {27, 28}, "B-UNREACH"),
    (PCB, r"xǁPrefixCachingBlockAllocatorǁallocate_immutable_blocks$", {33}, "D-BLOCKATTR"),
    (PCB, r"xǁPrefixCachingBlockAllocatorǁfree$", {1, 9, 10}, "B-POOL"),
    (PCB, r"xǁPrefixCachingBlockAllocatorǁfree$", {8}, "D-BLOCKATTR"),
    (PCB, r"xǁPrefixCachingBlockAllocatorǁfork$", {6}, "C-MSG"),
    (PCB, r"xǁPrefixCachingBlockAllocatorǁfork$", {20, 23, 24}, "B-UNREACH"),
    (PCB, r"xǁPrefixCachingBlockAllocatorǁfork$", {30}, "D-EXTRA"),
    (PCB, r"xǁPrefixCachingBlockAllocatorǁfork$", {35, 36}, "B-FAST"),
    (PCB, r"xǁPrefixCachingBlockAllocatorǁfork$", {37, 38, 39, 40}, "B-FAST"),
    (PCB, r"xǁPrefixCachingBlockAllocatorǁget_num_free_blocks$", {1}, "C-VAL"),
    (PCB, r"xǁPrefixCachingBlockAllocatorǁcow_block_if_not_appendable$", {5}, "D-COW"),
    (PCB, r"xǁPrefixCachingBlockAllocatorǁcow_block_if_not_appendable$", {8}, "B-UNREACH"),
    (PCB, r"xǁPrefixCachingBlockAllocatorǁget_num_blocks_touched$", {1}, "D-API-OTHER"),
    (PCB, r"xǁPrefixCachingBlockAllocatorǁget_num_blocks_touched$", {16}, "B-ARITH"),
    (PCB, r"xǁPrefixCachingBlockAllocatorǁget_num_free_blocks_needed_for_swap_in$", {6}, "B-ARITH"),
    (
        PCB,
        r"xǁPrefixCachingBlockAllocatorǁget_num_free_blocks_needed_for_swap_in$",
        {8},
        "D-SWAPSHARED",
    ),
    (PCB, r"xǁPrefixCachingBlockAllocatorǁswap_out$", {6}, "C-VAL"),
    (PCB, r"xǁPrefixCachingBlockAllocatorǁswap_out$", {12, 15, 16}, "B-UNREACH"),
    (PCB, r"xǁPrefixCachingBlockAllocatorǁswap_in$", {16}, "B-ARITH"),
    (PCB, r"xǁPrefixCachingBlockAllocatorǁswap_in$", {26}, "B-INIT"),
    ("evictor", r"xǁBlockMetaDataǁ__init__$", {2, 3}, "D-HELPERS"),
    ("evictor", r"xǁBlockMetaDataǁ__init__$", {4, 5, 6}, "B-INIT"),
    ("evictor", r"x__time_field$", {3, 5}, "D-TIME"),
    ("evictor", r"x__time_field$", {23, 24, 31}, "B-ARITH"),
    ("evictor", r"x__time_field$", None, "D-TIME"),
    ("evictor", r"xǁLRUEvictorǁ__init__$", {4}, "B-ARITH"),
    ("evictor", r"xǁLRUEvictorǁadd$", {3, 4, 9, 11, 12, 15, 16, 17}, "C-VAL"),
    ("evictor", r"xǁLRUEvictorǁadd$", {26, 29}, "D-EVICTABLE"),
    ("evictor", r"xǁLRUEvictorǁadd$", {30, 31, 32}, "B-TIES"),
    ("evictor", r"xǁLRUEvictorǁadd$", {34}, "B-ARITH"),
    ("evictor", r"xǁLRUEvictorǁadd$", {37, 38}, "D-HELPERS"),
    ("evictor", r"xǁLRUEvictorǁevict$", {14}, "D-EVICTOR-CHURN"),
    ("evictor", r"xǁLRUEvictorǁ_maybe_compact$", {4, 5, 6, 7}, "B-PERF"),
    ("block_table", r"xǁBlockTableǁ__init__$", {16}, "D-SLIDING"),
    (
        "block_table",
        r"xǁBlockTableǁ(get_num_required_blocks|append_token_ids)$",
        {1},
        "D-API-OTHER",
    ),
    ("block_table", r"xǁBlockTableǁallocate$", {4}, "C-VAL"),
    ("block_table", r"xǁBlockTableǁallocate$", {23, 35, 39}, "D-EXTRA"),
    ("block_table", r"xǁBlockTableǁ_needed_for_immutable$", {3, 7}, "D-EXTRA"),
    ("block_table", r"xǁBlockTableǁ_allocate_blocks_for_token_ids$", {15, 19, 26, 29}, "D-EXTRA"),
    ("block_table", r"xǁBlockTableǁ_allocate_blocks_for_token_ids$", {12}, "B-UNREACH"),
    ("block_table", r"xǁBlockTableǁ_allocate_blocks_for_token_ids$", {3}, "B-INIT"),
    ("block_table", r"xǁBlockTableǁappend_token_ids$", {14}, "C-VAL"),
    ("block_table", r"xǁBlockTableǁappend_token_ids$", {16}, "D-SLIDING"),
    ("block_table", r"xǁBlockTableǁappend_token_ids$", {26}, "D-CAPACITY"),
    ("block_table", r"xǁBlockTableǁappend_token_ids$", {35, 37}, "D-EXTRA"),
    ("block_table", r"xǁBlockTableǁ_sliding_window_end$", {1}, "D-SLIDING"),
    (
        "block_table",
        r"xǁBlockTableǁ_check_append_fits$",
        {9, 40, 61, 62, 63, 70, 71, 73},
        "D-CAPACITY",
    ),
    (
        "block_table",
        r"xǁBlockTableǁ_check_append_fits$",
        {3, 7, 11, 42, 44, 45, 46, 68, 69},
        "D-SLIDING",
    ),
    ("block_table", r"xǁBlockTableǁensure_num_empty_slots$", {11}, "C-VAL"),
    ("block_table", r"xǁBlockTableǁensure_num_empty_slots$", {14}, "B-ARITH"),
    ("block_table", r"xǁBlockTableǁensure_num_empty_slots$", {27, 30}, "D-EXTRA"),
    ("block_table", r"xǁBlockTableǁfork$", {12, 16}, "D-SLIDING"),
    ("block_table", r"xǁBlockTableǁfree$", {2}, "D-SLIDING"),
    ("block_table", r"xǁBlockTableǁfree$", {4}, "C-VAL"),
    ("block_table", r"xǁBlockTableǁfree$", {9}, "B-UNREACH"),
    ("block_table", r"xǁBlockTableǁ_held_handles$", {7, 8}, "C-VAL"),
    ("cpu_gpu_block_allocator", r"xǁCpuGpuBlockAllocatorǁcreate$", {14, 49, 53}, "B-ARITH"),
    ("cpu_gpu_block_allocator", r"xǁCpuGpuBlockAllocatorǁcreate$", {23, 24}, "D-NAIVE"),
    ("cpu_gpu_block_allocator", r"xǁCpuGpuBlockAllocatorǁcreate$", {50, 54, 59, 63}, "C-HASH"),
    ("cpu_gpu_block_allocator", r"xǁCpuGpuBlockAllocatorǁ__init__$", {3}, "C-VAL"),
    ("cpu_gpu_block_allocator", r"xǁCpuGpuBlockAllocatorǁ__init__$", {15, 16, 17}, "D-HELPERS"),
    ("cpu_gpu_block_allocator", r"xǁCpuGpuBlockAllocatorǁ__init__$", {19}, "D-SLIDING"),
    ("cpu_gpu_block_allocator", r"xǁCpuGpuBlockAllocatorǁ_allocator_for$", {3}, "C-VAL"),
    (
        "cpu_gpu_block_allocator",
        r"xǁCpuGpuBlockAllocatorǁallocate_(mutable_block|immutable_block|immutable_blocks)$",
        None,
        "D-EXTRA",
    ),
    (
        "cpu_gpu_block_allocator",
        r"xǁCpuGpuBlockAllocatorǁget_num_free_blocks_needed$",
        {1},
        "D-API-OTHER",
    ),
    (
        "cpu_gpu_block_allocator",
        r"xǁCpuGpuBlockAllocatorǁget_num_free_blocks_needed$",
        {3, 6},
        "D-EXTRA",
    ),
    (
        "cpu_gpu_block_allocator",
        r"xǁCpuGpuBlockAllocatorǁget_computed_block_ids$",
        {1},
        "D-API-OTHER",
    ),
    (
        "cpu_gpu_block_allocator",
        r"xǁCpuGpuBlockAllocatorǁget_num_blocks_touched$",
        {1},
        "D-API-OTHER",
    ),
    (
        "cpu_gpu_block_allocator",
        r"xǁCpuGpuBlockAllocatorǁmark_blocks_as_computed$",
        {1},
        "B-IGNORED",
    ),
    ("cpu_gpu_block_allocator", r"xǁCpuGpuBlockAllocatorǁswap$", {15, 16, 17, 18, 26}, "C-VAL"),
    ("cpu_gpu_block_allocator", r"xǁCpuGpuBlockAllocatorǁswap$", {48, 51, 52}, "B-UNREACH"),
    ("naive_block", r"x_held_block_id$|x_forkable_block_id$", {7, 11, 14}, "C-VAL"),
    ("naive_block", r"xǁNaiveBlockǁ__init__$|xǁNaiveBlockAllocatorǁ", None, "D-NAIVE"),
    (
        "common",
        r"xǁRefCounterǁas_readonly$|xǁReadOnlyRefCounterǁ__init__$|xǁCopyOnWriteTrackerǁ__init__$",
        None,
        "D-HELPERS",
    ),
    ("common", r"xǁCopyOnWriteTrackerǁrecord_cow$", {1}, "C-VAL"),
    ("common", r"xǁBlockPoolǁ__init__$", {1, 2}, "C-VAL"),
    ("common", r"xǁBlockPoolǁ__init__$", {7}, "B-POOL"),
    ("common", r"xǁBlockPoolǁinit_block$", {17, 20}, "B-POOL"),
    ("common", r"xǁBlockPoolǁinit_block$", {12, 13}, "D-EXTRA"),
    ("common", r"xǁBlockListǁ__init__$", {1, 2}, "B-INIT"),
    ("common", r"xǁBlockListǁreset$", {1, 2}, "D-API-OTHER"),
    ("common", r"xǁBlockListǁappend_token_ids$", {2, 4, 5}, "D-TABLE-IDS"),
    ("common", r"xǁBlockPoolǁfree_block$", {15}, "D-POOL"),
    ("common", r"xǁBlockPoolǁ(init_block|free_block)$", None, "B-POOL"),
    ("common", r"xǁCacheMetricDataǁquery$", {4, 5, 6, 10, 11, 12, 13}, "D-METRIC-WINDOW"),
    ("common", r"x_get_all_blocks_recursively$", {11}, "B-UNREACH"),
    ("hashing", r"x__varint$", {4, 5}, "D-HASH-WIDE"),
    (
        PCB,
        r"x__tracker_hash_function$|xǁ(ComputedBlocksTracker|LastAccessBlocksTracker)ǁ",
        None,
        "D-API-TRACKERS",
    ),
    # evictor
    ("evictor", r"xǁBlockMetaDataǁ__eq__$|xǁLRUEvictorǁpeek_order$", None, "D-HELPERS", "unexec"),
    ("evictor", r"xǁLRUEvictorǁ(__contains__|update)$", None, "D-EVICTABLE", "unexec"),
    ("evictor", r"xǁLRUEvictorǁ_maybe_compact$", None, "D-EVICTOR-CHURN", "unexec"),
    # block_table
    (
        "block_table",
        r"xǁBlockTableǁ(_sliding_window_end|_check_append_fits)$",
        None,
        "D-SLIDING",
        "unexec",
    ),
    ("block_table", r"xǁBlockTableǁ__init__$", {3, 5, 6}, "D-SLIDING", "unexec"),
    ("block_table", r"xǁBlockTableǁappend_token_ids$", set(range(28, 34)), "D-SLIDING", "unexec"),
    (
        "block_table",
        r"xǁBlockTableǁ(get_num_required_blocks|get_num_blocks_touched_by_append_slots)$",
        None,
        "D-API-OTHER",
        "unexec",
    ),
    # cpu_gpu_block_allocator
    (
        "cpu_gpu_block_allocator",
        r"xǁNullBlockǁ|allocate_or_get_null_block$",
        None,
        "D-SLIDING",
        "unexec",
    ),
    (
        "cpu_gpu_block_allocator",
        r"xǁCpuGpuBlockAllocatorǁcreate$",
        set(range(25, 43)),
        "D-NAIVE",
        "unexec",
    ),
    (
        "cpu_gpu_block_allocator",
        r"xǁCpuGpuBlockAllocatorǁfree$",
        set(range(3, 15)),
        "C-VAL",
        "unexec",
    ),
    (
        "cpu_gpu_block_allocator",
        r"xǁCpuGpuBlockAllocatorǁ(get_block_device|get_num_total_blocks|get_physical_block_id|get_and_reset_swaps)$",
        None,
        "D-HELPERS",
        "unexec",
    ),
    (
        "cpu_gpu_block_allocator",
        r"xǁCpuGpuBlockAllocatorǁget_common_computed_block_ids$",
        None,
        "D-API-OTHER",
        "unexec",
    ),
    (
        "cpu_gpu_block_allocator",
        r"xǁCpuGpuBlockAllocatorǁswap$",
        set(range(60, 66)),
        "D-SWAPSHARED",
        "unexec",
    ),
    ("cpu_gpu_block_allocator", r"x__share_block_id$", None, "D-SWAPSHARED", "unexec"),
    # common
    (
        "common",
        r"xǁReadOnlyRefCounterǁget$|xǁCopyOnWriteTrackerǁ(is_appendable|pending)$",
        None,
        "D-HELPERS",
        "unexec",
    ),
    ("common", r"xǁBlockListǁ__setitem__$", None, "D-SLIDING", "unexec"),
    ("common", r"xǁCacheMetricDataǁquery$", set(range(14, 29)), "D-METRIC-WINDOW", "unexec"),
    # naive_block
    ("naive_block", r"x_held_block_id$", {12, 13, 14}, "C-VAL", "unexec"),
    ("naive_block", r"xǁNaiveBlockAllocatorǁget_physical_block_id$", None, "D-HELPERS", "unexec"),
    (
        "naive_block",
        r"xǁNaiveBlockAllocatorǁ|xǁNaiveBlockǁappend_token_ids$",
        None,
        "D-NAIVE",
        "unexec",
    ),
    # hashing
    (
        "hashing",
        r"x__varint$|x__encode_bytes$|x__encode_tokens$|x__encode_mm_item$|x_make_extra_hash$",
        None,
        "D-HASH-WIDE",
        "unexec",
    ),
    # _validation
    ("_validation", r"x_checked_list$", {1, 2, 3}, "C-VAL", "unexec"),
]
