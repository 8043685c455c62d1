"""Sequence-level state machine: ``BlockTable``s driven the way an engine drives them.

Prompts share a few system prefixes, decode appends reserve lookahead slots, parallel sampling
forks tables (copy-on-write), preemption swaps whole sequences to the CPU and back, and tiny
pools keep memory pressure, eviction and ``NoFreeBlocksError`` in play.
"""

from __future__ import annotations

from hypothesis import strategies as st
from hypothesis.stateful import initialize, precondition, rule

from models.families.v0 import operations as ops
from models.families.v0.capabilities import Config
from models.families.v0.malformed import ARGUMENTS, bad_values
from models.families.v0.operations import Dev, Op
from models.families.v0.window import holds_null
from properties.core.draws import draw
from properties.core.selection import current_target
from properties.families.v0.machines.base import V0Machine
from properties.families.v0.machines.block_level import naive_target
from properties.families.v0.strategies import configs_of, extra_hashes, tokens, twin


def _has_tables(m: SequenceLevelMachine) -> bool:
    return bool(m.oracle.live_tables())


class SequenceLevelMachine(V0Machine):
    """Allocate prompts, append decode tokens, fork, swap out and in, free."""

    prompts: list[tuple[int, ...]]

    @initialize(config=configs_of(lambda: current_target().caps), data=st.data())
    def start(self, config: Config, data: st.DataObject) -> None:
        self.setup(config)
        bs = config.block_size
        self.prompts = draw(data, st.lists(tokens(bs, 3 * bs), min_size=1, max_size=3),
                                 label="system prompts")

    def _tables_on(self, dev: Dev) -> list[int]:
        return [t for t in self.oracle.live_tables() if self.oracle.table_device(t) is dev]

    def _dropped(self) -> list[int]:
        """Live tables whose sliding window dropped blocks (they hold the null block)."""
        tables = self.oracle.model.tables
        return [t for t in self.oracle.live_tables() if holds_null(tables[t])]

    def _request(self, data: st.DataObject) -> ops.TableAllocate:
        bs = self.config.block_size
        prompts = st.sampled_from(self.prompts)
        prefix = draw(data, st.one_of(st.just(()), prompts, prompts.map(twin)), label="prefix")
        suffix = draw(data, tokens(0 if prefix else 1, 2 * bs), label="suffix")
        extra = draw(data, extra_hashes(self.caps), label="extra_hash")
        return ops.TableAllocate(prefix + suffix, Dev.GPU, extra)

    @rule(data=st.data())
    def allocate(self, data: st.DataObject) -> None:
        """A new request: a shared system prompt (or none, or a twin of one that a weak hash
        confuses with it) plus a unique suffix."""
        self.do(self._request(data))

    @rule(data=st.data(), window=st.integers(1, 2))
    def allocate_windowed(self, data: st.DataObject, window: int) -> None:
        """A request of a sliding-window model: its appends drop blocks below the window."""
        request = self._request(data)
        short = max(0, (window + 1) * self.config.block_size - len(request.tokens))
        pad = draw(data, tokens(short, short + 1), label="padding")  # the first slide drops
        self.do(ops.TableAllocate(request.tokens + pad, request.device, request.extra_hash,
                                  window))

    @precondition(lambda m: bool(m._windowed()))
    @rule(data=st.data())
    def slide(self, data: st.DataObject) -> None:
        """A decode step of a sliding-window sequence with everything so far computed: blocks
        below the window go back to the pool and the null block takes their place."""
        t = draw(data, st.sampled_from(self._windowed()), label="table")
        new = draw(data, tokens(1, self.config.block_size), label="tokens")
        self._windowed_append(ops.TableAppend(t, new, 0, self.oracle.table_len(t)))
        if self.caps.atomic and not getattr(self, "_tight", False) and t in self._windowed():
            self._tight_slide(t)

    def _tight_slide(self, t: int) -> None:
        """Once per example: slides of whole blocks, largest first, until one fits. The first
        ones refused need just one id more than the free ones plus those the window's drop
        gives back: refused, nothing changed (ATOMIC)."""
        self._tight = True
        m = self.oracle.model
        bs = self.config.block_size
        for k in range(m.pools[Dev.GPU].free + len(m.tables[t].blocks) + 1, 0, -1):
            if self._ok(ops.TableAppend(t, (5,) * (k * bs), 0, self.oracle.table_len(t))):
                return

    def _windowed_append(self, op: ops.TableAppend) -> None:
        """``op``; if it took the null block, every write to the null block at once, and its
        free and fork on the GPU allocator itself (each must be refused, changing nothing):
        ``window_misuse`` alone reached the writes too rarely, and never draws the others."""
        had_null = self.oracle.model.null_id is not None
        first_drop = op.table not in self._dropped()
        self.do(op)
        if first_drop and op.table in self._dropped() \
                and not getattr(self, "_first_drop_done", False):
            self._first_window_life(op.table)
        if self.caps.typed_errors and not had_null and self.oracle.model.null_id is not None:
            device_calls = getattr(self.runner.adapter, "has_device_calls", False)
            for action in ops.NULL_BLOCK_MISUSES:
                if action.startswith("device_") and not device_calls:
                    continue
                write = ops.NullBlockMisuse(action)
                if self.oracle.is_misuse(write):
                    self.do(write)

    def _first_window_life(self, t: int) -> None:
        """Once per example, when a table's window first drops blocks (no draw, so seeded
        schedules are unchanged): the engine's two moves for a long sliding-window sequence,
        preemption by swapping (out and back) and parallel sampling (a fork). ``window_life``
        draws the same moves in every later state; this makes the first one certain."""
        self._first_drop_done = True
        if self.config.num_cpu_blocks > 0 and self._ok(ops.TableSwap(t, Dev.GPU, Dev.CPU)):
            self.do(ops.SwapLog())
            if self._ok(ops.TableSwap(t, Dev.CPU, Dev.GPU)):
                self.do(ops.SwapLog())
        if t in self.oracle.live_tables() and self.oracle.table_device(t) is Dev.GPU:
            self.do(ops.TableFork(t))

    def _tracked_prompt(self, data: st.DataObject) -> tuple[ops.Tokens, ops.Extra]:
        """A request's prompt of at least one full block and its extra hash, the trackers
        started (``recompute`` and ``aborted_prefill`` follow one request through them)."""
        if not self.oracle.model.seqs.started:
            self.do(ops.TrackerStart())
        request = self._request(data)
        bs = self.config.block_size
        short = max(0, bs - len(request.tokens))
        padding = draw(data, tokens(short, short + bs), label="padding")
        return request.tokens + padding, request.extra_hash

    def _windowed(self) -> list[int]:
        tables = self.oracle.model.tables
        return [t for t in self._tables_on(Dev.GPU) if tables[t].window is not None]

    @precondition(_has_tables)
    @rule(data=st.data())
    def append(self, data: st.DataObject) -> None:
        """A decode step: new tokens (or none: only lookahead slots), with lookahead slots
        reserved as speculative decoding does."""
        running = self._tables_on(Dev.GPU)
        if not running:
            return
        bs = self.config.block_size
        t = draw(data, st.sampled_from(running), label="table")
        new = draw(data, tokens(0, 2 * bs), label="tokens")
        lookahead = draw(data, st.integers(0, bs), label="lookahead")
        computed = None
        if self.oracle.model.tables[t].window is not None:
            # Usually everything written so far (no chunked prefill), sometimes less.
            length = self.oracle.table_len(t)
            computed = draw(data, st.one_of(st.just(length), st.integers(0, length)),
                                 label="num_computed_slots")
        self._windowed_append(ops.TableAppend(t, new, lookahead, computed))

    @precondition(_has_tables)
    @rule(data=st.data())
    def ensure_slots(self, data: st.DataObject) -> None:
        running = self._tables_on(Dev.GPU)
        if running:
            t = draw(data, st.sampled_from(running), label="table")
            slots = draw(data, st.integers(0, 2 * self.config.block_size), label="slots")
            self.do(ops.TableEnsureSlots(t, slots))

    @precondition(_has_tables)
    @rule(data=st.data())
    def fork(self, data: st.DataObject) -> None:
        """Parallel sampling: a child sequence shares every block of its parent (then, maybe,
        decodes its first token: a write into the shared last block, copied on write)."""
        running = self._tables_on(Dev.GPU)
        if running:
            self._fork(draw(data, st.sampled_from(running), label="table"), data)

    def _fork(self, t: int, data: st.DataObject) -> None:
        """Fork ``t``; maybe the child's first decode step, in place (copy-on-write; a
        sliding-window child with everything so far computed)."""
        before = set(self.oracle.model.tables)
        self.do(ops.TableFork(t))
        children = set(self.oracle.model.tables) - before
        if not children:
            return
        child = children.pop()
        computed = None
        if self.oracle.model.tables[child].window is not None:
            computed = self.oracle.table_len(child)
        decode = ops.TableAppend(child, draw(data, tokens(1, 1), label="token"), 0, computed)
        valid = self.oracle.contract_error(decode) is None and not self.oracle.is_misuse(decode)
        if valid and draw(data, st.booleans(), label="child decodes"):
            self.do(decode)

    @precondition(lambda m: bool(m._dropped()))
    @rule(data=st.data())
    def window_life(self, data: st.DataObject) -> None:
        """A sliding-window sequence whose window dropped blocks, in whatever state the
        example reached (running or swapped out, forked, shared, near a full pool): parallel
        sampling forks it, preemption swaps it out or back, it decodes, or it ends. Each
        must work on the window's blocks alone, the null block never moved or counted."""
        t = draw(data, st.sampled_from(self._dropped()), label="windowed table")
        src = self.oracle.table_device(t)
        actions = ["swap", "free"] if self.config.num_cpu_blocks > 0 else ["free"]
        if src is Dev.GPU:
            actions += ["fork", "decode"]
        action = draw(data, st.sampled_from(actions), label="window action")
        if action == "fork":
            self._fork(t, data)
        elif action == "decode":
            new = draw(data, tokens(0, self.config.block_size), label="tokens")
            self._windowed_append(ops.TableAppend(t, new, 0, self.oracle.table_len(t)))
        elif action == "swap":
            self.do(ops.TableSwap(t, src, Dev.CPU if src is Dev.GPU else Dev.GPU))
        else:
            self.do(ops.TableFree(t))

    @precondition(_has_tables)
    @rule(data=st.data())
    def free(self, data: st.DataObject) -> None:
        self.do(ops.TableFree(draw(data, st.sampled_from(self.oracle.live_tables()),
                                        label="table")))

    @precondition(lambda m: _has_tables(m) and m.config.num_cpu_blocks > 0)
    @rule(data=st.data())
    def swap(self, data: st.DataObject) -> None:
        """Preemption by swapping: a running sequence goes to the CPU, a swapped one comes back.
        As vLLM's block manager does after every table swap, the engine then takes the swap log
        (``get_and_reset_swaps``) to learn which KV to copy: it must hold this swap's pairs only."""
        t = draw(data, st.sampled_from(self.oracle.live_tables()), label="table")
        src = self.oracle.table_device(t)
        dst = Dev.CPU if src is Dev.GPU else Dev.GPU
        if self._ok(ops.TableSwap(t, src, dst)):
            self.do(ops.SwapLog())

    @precondition(_has_tables)
    @rule(data=st.data(), step=st.sampled_from((0.0, 1.0)))
    def mark_accessed(self, data: st.DataObject, step: float) -> None:
        running = self._tables_on(Dev.GPU)
        if running:
            t = draw(data, st.sampled_from(running), label="table")
            self.do(ops.TableMarkAccessed(t, self.tick(step)))

    @rule()
    def mark_computed(self) -> None:
        """End of a scheduling step: blocks written this step become computed."""
        self.do(ops.MarkComputed())

    @rule()
    def hit_rate(self) -> None:
        self.do(ops.HitRate(Dev.GPU))

    # -- table queries: what a block manager reads, each predicted by the model

    @precondition(_has_tables)
    @rule(data=st.data())
    def slots(self, data: st.DataObject) -> None:
        """The sequence's unseen tokens and the worst-case blocks their append touches."""
        bs = self.config.block_size
        t = draw(data, st.sampled_from(self.oracle.live_tables()), label="table")
        new = draw(data, tokens(0, 2 * bs), label="tokens")
        lookahead = draw(data, st.integers(0, 2 * bs), label="lookahead")
        self.do(ops.TableSlots(t, self.oracle.table_tokens(t) + new, lookahead))

    @rule(data=st.data())
    def id_space(self, data: st.DataObject) -> None:
        """Physical ids of a whole device, its size and every id."""
        dev = draw(data, st.sampled_from(self.devices()), label="device")
        first = 0 if dev is Dev.GPU else self.config.num_gpu_blocks
        size = self.config.num_gpu_blocks if dev is Dev.GPU else self.config.num_cpu_blocks
        self.do(ops.IdSpace(dev, tuple(range(first, first + size))))

    @rule()
    def swap_log(self) -> None:
        self.do(ops.SwapLog())

    @precondition(lambda m: m.oracle.model.null_id is not None)
    @rule()
    def null_block(self) -> None:
        """What a sliding-window table's null block shows: the empty block it wraps."""
        self.do(ops.NullBlockQuery(self.clock if self.oracle.model.pc else None))

    # ------------------------------------------------------------------ engine-side

    @rule(data=st.data(), step=st.sampled_from((0.0, 1.0)))
    def track(self, data: st.DataObject, step: float) -> None:
        """The engine's per-sequence trackers: created once; a sequence is added when it is
        scheduled, asked how much of it is cached (vLLM, frozen during prefill) or which of its
        blocks are computed (Aphrodite), stamped with its access time, and removed."""
        o = self.oracle
        seqs = o.model.seqs
        if self.runner.adapter.tracker_module() is None:
            return
        if not seqs.started:
            self.do(ops.TrackerStart())
            return
        tracked = sorted(t for t, e in seqs.entries.items() if e.access)
        live = set(o.live_tables())
        candidates: list[Op] = [ops.SeqTrack(t) for t in sorted(live - set(seqs.entries))]
        for t in tracked:
            e = seqs.entries[t]
            candidates += [ops.SeqAccess(t, self.clock + step), ops.SeqStampBlocks(t),
                           ops.SeqUntrack(t, e.computed is not None or e.frozen is not None),
                           ops.SeqComputedIds(t), ops.SeqCachedTokens(t, True),
                           ops.SeqCachedTokens(t, False)]
        candidates = [op for op in candidates if o.contract_error(op) is None]
        if not candidates:
            return
        op = draw(data, st.sampled_from(candidates), label="tracker")
        if isinstance(op, ops.SeqAccess):
            op = ops.SeqAccess(op.table, self.tick(step))
        self.do(op)
        if isinstance(op, ops.SeqComputedIds | ops.SeqCachedTokens) and draw(data,
                st.booleans(), label="next step asks again"):
            # The scheduler asks every step: the answer must stay frozen in prefill, and a
            # computed-id list stops growing once it has a gap.
            self.do(ops.MarkComputed())
            if o.contract_error(op) is None:
                self.do(op)

    # ------------------------------------------------------------------ stale ids

    def _tracker_edits(self) -> list[Op]:
        tables = sorted(self.oracle.model.tables)[-4:]
        return [ops.SeqTrackerEdit(t, tracker, add) for t in tables for tracker in ops.TRACKERS
                for add in (True, False)]

    @precondition(lambda m: m.oracle.model.seqs.started)
    @rule(data=st.data())
    def tracker_edit(self, data: st.DataObject) -> None:
        """One tracker's ``add_seq``/``remove_seq`` alone: that tracker's entry starts empty
        or goes, the other tracker keeps its own (a computed-id list outlives the access
        entry, and the other way round). For targets with typed errors also an add of a
        sequence that tracker holds or a remove of one it does not (refused, nothing
        changed)."""
        o = self.oracle
        candidates = [op for op in self._tracker_edits() if o.contract_error(op) is None
                      and (self.caps.typed_errors or not o.is_misuse(op))]
        if candidates:
            self.do(draw(data, st.sampled_from(candidates), label="tracker edit"))

    # ------------------------------------------------------------------ end stale ids

    # ------------------------------------------------------------------ freed behind

    def _plain_running(self) -> list[int]:
        """Running GPU tables without a sliding window."""
        tables = self.oracle.model.tables
        return [t for t in self._tables_on(Dev.GPU) if tables[t].window is None]

    @precondition(_has_tables)
    @rule(data=st.data())
    def free_behind(self, data: st.DataObject) -> None:
        """An engine bug: a block a running table holds is freed through the allocator (a
        legal free). For targets with typed errors, then a call that would touch the freed
        block: the table's ``free`` or ``fork``, an append into it, or freeing it again, each
        refused with nothing changed. Often the engine then gives the table's other blocks
        back one by one (all it may still do) and drops it (``models.families.v0.table_misuse``)."""
        running = self._plain_running()
        if not running:
            return
        t = draw(data, st.sampled_from(running), label="table")
        o = self.oracle
        last = len(o.model.tables[t].blocks) - 1
        written = min(last, o.table_len(t) // self.config.block_size)  # the next token's block
        index = draw(data, st.one_of(st.just(written), st.integers(0, last)), label="index")
        self.do(ops.TableFreeBlock(t, index))
        if self.caps.typed_errors:
            # The engine's next call for the sequence is most often a decode step of one token
            # (mostly in place, where the fast path must refuse too), else its free (twice as
            # often as the rest).
            decode, free = ops.TableAppend(t, (1,)), ops.TableFree(t)
            candidates: list[Op] = [decode, free, free, ops.TableFork(t),
                                    ops.TableFreeBlock(t, index),
                                    ops.TableAppend(t, (1,) * self.config.block_size)]
            candidates = [op for op in candidates if o.is_misuse(op)]
            if decode in candidates and draw(data, st.booleans(), label="decodes"):
                candidates = [decode]
            if candidates:
                self.do(draw(data, st.sampled_from(candidates), label="misuse"))
        if draw(data, st.booleans(), label="give the rest back"):
            rec = o.model.tables[t]
            for i, key in enumerate(rec.blocks):
                if o.model.blocks[key].live:
                    self.do(ops.TableFreeBlock(t, i))

    # ------------------------------------------------------------------ end freed behind

    # ------------------------------------------------------------------ tracker lifecycle

    @precondition(lambda m: _has_tables(m) and m.runner.adapter.tracker_module() is not None)
    @rule(data=st.data(), step=st.sampled_from((0.0, 1.0)))
    def sequence_life(self, data: st.DataObject, step: float) -> None:
        """One sequence through the engine's trackers in a row, as a block manager's steps
        drive them: tracked when scheduled, its access time set (or not: stamping then marks
        nothing), asked which of its blocks are computed (Aphrodite; a list with a gap is
        returned as it was) or how many of its tokens are cached (vLLM), then maybe a decode
        step of one token (written in place; a forked table's shared block is copied on write)
        and asked again before and after the step's blocks became computed; when it finishes,
        its blocks stamped with that access time (so they enter the evictor with it: later
        evictions judge the order, LRU), its table freed, and it is untracked. For targets with
        typed errors, sometimes a question the trackers must refuse, changing nothing
        (``_ask_wrongly``), and a finished sequence whose list had no gap asked again before
        it is untracked (it has no blocks)."""
        o = self.oracle
        running = self._plain_running()
        if not running:
            return
        t = draw(data, st.sampled_from(running), label="table")

        def ask(op: Op) -> bool:
            valid = o.contract_error(op) is None and not o.is_misuse(op)
            if valid:
                self.do(op)
            return valid

        if not o.model.seqs.started:
            self.do(ops.TrackerStart())
        entry = o.model.seqs.entries.get(t)
        if entry is None or not entry.access:
            ask(ops.SeqTrack(t))
        if draw(data, st.booleans(), label="access time set"):  # else stamping marks nothing
            ask(ops.SeqAccess(t, self.tick(step)))
        if draw(data, st.booleans(), label="previous step ended"):
            self.do(ops.MarkComputed())
        questions: list[Op] = [ops.SeqComputedIds(t)] if self.caps.aphrodite_api else []
        if self.caps.vllm_api:
            questions += [ops.SeqCachedTokens(t, True), ops.SeqCachedTokens(t, False)]
        if not questions:
            return
        question = draw(data, st.sampled_from(questions), label="question")
        if ask(question) and draw(data, st.booleans(), label="decodes"):
            # one token (or none: a step whose token is already in): in place, or copied on
            # write; asked again before and after the step ends (the block it fills is
            # computed only then: the list may get a gap)
            ask(ops.TableAppend(t, draw(data, tokens(0, 1), label="token")))
            ask(question)
            self.do(ops.MarkComputed())
            ask(question)
        if self.caps.typed_errors and draw(data, st.booleans(), label="asks wrongly"):
            self._ask_wrongly(t, data)
        if not draw(data, st.booleans(), label="finishes"):
            return
        ask(ops.SeqStampBlocks(t))
        if not ask(ops.TableFree(t)):
            return
        late = ops.SeqComputedIds(t)
        if self.caps.typed_errors and o.contract_error(late) is None and o.is_misuse(late):
            self.do(late)
        entry = o.model.seqs.entries.get(t)
        if entry is not None:
            ask(ops.SeqUntrack(t, entry.computed is not None or entry.frozen is not None))

    def _ask_wrongly(self, t: int, data: st.DataObject) -> None:
        """A tracker question to refuse about sequence ``t``: its computed ids with the ids of
        a table holding fewer blocks than its list covers (when there is none, the engine
        allocates the sequence's first block again as a new table, as a recompute that kept
        the tracker's entry would), or its cached tokens from a tracker without a block size."""
        o = self.oracle
        m = o.model
        wrong: list[Op] = [ops.SeqLostBlocks(t, u) for u in self._plain_running()]
        entry = m.seqs.entries.get(t)
        if not any(map(o.is_misuse, wrong)) and entry is not None and entry.computed \
                and not entry.gap:
            rec = m.tables[t]
            again = ops.TableAllocate(rec.tokens[:self.config.block_size], Dev.GPU, rec.extra)
            if o.contract_error(again) is None and not o.is_misuse(again):
                tables = set(m.tables)
                self.do(again)
                wrong += [ops.SeqLostBlocks(t, u) for u in set(o.model.tables) - tables]
        if self.runner.adapter.tracker_builds_unsized():
            wrong.append(ops.SeqCachedTokensUnsized(t))
        wrong = [op for op in wrong if o.is_misuse(op)]
        if wrong:
            self.do(draw(data, st.sampled_from(wrong), label="tracker misuse"))

    # ------------------------------------------------------------------ end tracker lifecycle

    # ------------------------------------------------------------------ recompute

    def _ask(self, op: Op) -> bool:
        """Do ``op`` if it is valid now (in contract, not misuse); whether it was."""
        valid = self.oracle.contract_error(op) is None and not self.oracle.is_misuse(op)
        if valid:
            self.do(op)
        return valid

    def _new_table(self, op: ops.TableAllocate) -> int | None:
        """Allocate ``op``'s table if valid; its handle, None if it was not made."""
        before = set(self.oracle.model.tables)
        if not self._ask(op):
            return None
        made = set(self.oracle.model.tables) - before
        return made.pop() if made else None

    def _questions(self, t: int) -> None:
        """What the scheduler asks the computed tracker about sequence ``t``: its computed ids
        (Aphrodite) and its cached tokens outside prefill (vLLM)."""
        if self.caps.aphrodite_api:
            self._ask(ops.SeqComputedIds(t))
        if self.caps.vllm_api:
            self._ask(ops.SeqCachedTokens(t, False))

    @precondition(lambda m: m.runner.adapter.tracker_module() is not None)
    @rule(data=st.data())
    def recompute(self, data: st.DataObject) -> None:
        """One request through the trackers from its prompt (at least one full block) to its
        end, then preempted by recomputation. Tracked with an access time; its prefill ends
        (its blocks become computed) and the trackers are asked; decode steps cross at least
        one block boundary (the tracker hashes the new full blocks on from the last hash it
        kept) and it is asked again, after the step ends or not yet; when it finishes its
        blocks are stamped with its access time, the table freed and the sequence untracked.
        Then the same tokens come back as a new table: the freed cached blocks are revived
        from the evictor (computed, as a cache hit is) and the new sequence is asked at once."""
        o = self.oracle
        bs = self.config.block_size
        prompt, extra = self._tracked_prompt(data)
        t = self._new_table(ops.TableAllocate(prompt, Dev.GPU, extra))
        if t is None:
            return
        self._ask(ops.SeqTrack(t))
        self._ask(ops.SeqAccess(t, self.tick(1.0)))
        self.do(ops.MarkComputed())  # the prefill step ends
        self._questions(t)
        self._ask(ops.TableAppend(t, draw(data, tokens(bs, 2 * bs), label="decoded")))
        if draw(data, st.booleans(), label="step ends"):
            self.do(ops.MarkComputed())
        self._questions(t)
        self._ask(ops.SeqStampBlocks(t))
        everything = o.table_tokens(t)
        if not self._ask(ops.TableFree(t)):
            return
        entry = o.model.seqs.entries.get(t)
        if entry is not None:
            self._ask(ops.SeqUntrack(t, entry.computed is not None or entry.frozen is not None))
        u = self._new_table(ops.TableAllocate(everything, Dev.GPU, extra))
        if u is not None and self._ask(ops.SeqTrack(u)):
            self._questions(u)

    @precondition(lambda m: m.caps.prefix_caching
                  and m.runner.adapter.tracker_module() is not None)
    @rule(data=st.data())
    def aborted_prefill(self, data: st.DataObject) -> None:
        """Requests aborted (or preempted) around the batch that would compute their prompt,
        then the prompt again. One or two tables of one batch share a prompt (at least one
        full block; the second hits blocks whose KV is not written yet); a drawn subset is
        freed before the mark that ends the batch (which may then come, without them) or
        after it; the prompt comes back as a new table, is tracked and asked what is
        computed (a hit on a block nobody wrote must not count), and often asked again once
        its own prefill's mark came."""
        prompt, extra = self._tracked_prompt(data)
        tables: list[int] = []
        for _ in range(draw(data, st.integers(1, 2), label="requests")):
            t = self._new_table(ops.TableAllocate(prompt, Dev.GPU, extra))
            if t is None:
                break
            tables.append(t)
        if not tables:
            return
        when = draw(data, st.sampled_from(("before", "after")), label="abort vs mark")
        if when == "after":
            self.do(ops.MarkComputed())
        for t in draw(data, st.lists(st.sampled_from(tables), min_size=1, unique=True),
                           label="aborted"):
            self._ask(ops.TableFree(t))
        if when == "before" and draw(data, st.booleans(), label="batch ran without them"):
            self.do(ops.MarkComputed())
        u = self._new_table(ops.TableAllocate(prompt, Dev.GPU, extra))
        if u is None or not self._ask(ops.SeqTrack(u)):
            return
        self._questions(u)
        if draw(data, st.booleans(), label="prefill ran"):
            self.do(ops.MarkComputed())
            self._questions(u)

    # ------------------------------------------------------------------ end recompute

    @precondition(lambda m: m.caps.typed_errors)
    @rule(data=st.data())
    def misuse(self, data: st.DataObject) -> None:
        """Growing or forking a freed table, a swap from the wrong device, marking a swapped-out
        table, an empty prompt: the target must refuse them with a typed error and change
        nothing (ATOMIC). (Freeing, swapping or marking a freed table touches no block: the
        reference allocator treats those as no-ops, so they are not generated.) Also
        allocating a table twice and tracker calls for an untracked (or already tracked)
        sequence. Then a call with a malformed argument."""
        m = self.oracle.model
        candidates: list[Op] = [ops.TableAllocate(())]
        for t in sorted(m.tables)[-3:]:
            if not m.tables[t].live:
                candidates += [ops.TableFork(t), ops.TableAppend(t, (1,)),
                               ops.TableEnsureSlots(t, 1)]
                continue
            rec = m.tables[t]
            candidates.append(ops.TableReallocate(t, self.prompts[0]))
            dev = rec.device
            if rec.window is not None and dev is Dev.GPU:
                candidates.append(ops.TableAppend(t, (1,)))  # no num_computed_slots
            candidates.append(ops.TableSwap(t, Dev.CPU if dev is Dev.GPU else Dev.GPU, dev))
            candidates.append(ops.TableSwap(t, dev, dev))  # to itself
            if dev is Dev.CPU:
                candidates.append(ops.TableMarkAccessed(t, self.clock))
        if m.seqs.started:  # tracking a tracked sequence, or using an untracked one
            for t in sorted(m.tables)[-3:]:
                candidates += [ops.SeqTrack(t), ops.SeqAccess(t, self.clock),
                               ops.SeqStampBlocks(t), ops.SeqUntrack(t), ops.SeqComputedIds(t)]
            candidates += self._tracker_edits()  # stale ids: one tracker's add/remove
        candidates = [op for op in candidates if self.oracle.is_misuse(op)]
        self.do(draw(data, st.sampled_from(candidates), label="misuse"))
        for op in self._malformed(data):
            if self.oracle.is_misuse(op):
                self.do(op)
        # the table's extra_hash malformed in calls that allocate nothing (only the
        # argument check can refuse it); cheap, so both calls each time
        running = self._tables_on(Dev.GPU)
        if running:
            bad = draw(data, st.sampled_from(bad_values(
                ARGUMENTS[ops.TableAppend, "extra_hash"][0], self.config)), label="bad extra")
            for call in (ops.TableEnsureSlots(running[-1], 0), ops.TableAppend(running[-1], ())):
                op = ops.Malformed(call, "extra_hash", bad)
                if self.oracle.is_misuse(op):
                    self.do(op)

    @precondition(lambda m: m.caps.typed_errors and (m.oracle.model.null_id is not None
                                                      or bool(m._windowed())))
    @rule(data=st.data())
    def window_misuse(self, data: st.DataObject) -> None:
        """Writes to the null block (``append_token_ids``, setting ``block_id``, ``fork``) and
        sliding-window appends the table must refuse, changing nothing: no
        ``num_computed_slots``, a window moved past the last block, or one that drops the
        block the tokens go into or its predecessor while it is not full (a table with a
        spare lookahead block gets one first)."""
        m = self.oracle.model
        bs = self.config.block_size
        candidates: list[Op] = []
        if m.null_id is not None:
            candidates += [ops.NullBlockMisuse(a) for a in ops.NULL_BLOCK_WRITES]
        windowed = self._windowed()
        if windowed:
            t = draw(data, st.sampled_from(windowed), label="table")
            written = self.oracle.table_len(t) // bs  # the block the next token goes into
            if written + 1 >= len(m.tables[t].blocks) and draw(data, st.booleans(),
                                                                     label="spare"):
                self.do(ops.TableEnsureSlots(t, (written + 2) * bs - self.oracle.table_len(t)))
            rec = self.oracle.model.tables[t]  # the model may have moved on
            window = rec.window or 0
            candidates += [ops.TableAppend(t, (1,)),  # no num_computed_slots
                           ops.TableAppend(t, (), 0, (len(rec.blocks) + window) * bs),
                           ops.TableAppend(t, (1,), 0, (written + 1 + window) * bs),
                           # drops the predecessor of the partial block being written
                           ops.TableAppend(t, (), 0, (written + window) * bs)]
        candidates = [op for op in candidates if self.oracle.is_misuse(op)]
        if candidates:
            self.do(draw(data, st.sampled_from(candidates), label="misuse"))

    def _malformed(self, data: st.DataObject) -> list[Op]:
        """a table call with one validated argument replaced by a malformed value (wrong-
        typed or bool tokens, a negative or non-int lookahead or slot count, a device that is
        not a ``Device``, a bad extra_hash or time stamp); empty if it needs a running table
        and there is none."""
        cls, argument = draw(data, st.sampled_from(_TABLE_ARGUMENTS), label="argument")
        running = self._tables_on(Dev.GPU)
        t = running[-1] if running else None
        calls: dict[type[Op], Op | None] = {
            ops.TableAllocate: ops.TableAllocate(self.prompts[0]),
            ops.TableAppend: None if t is None else ops.TableAppend(t, (1,)),
            ops.TableEnsureSlots: None if t is None else ops.TableEnsureSlots(t, 1),
            ops.TableMarkAccessed: None if t is None else ops.TableMarkAccessed(t, self.clock),
            ops.HitRate: ops.HitRate(),
            ops.ResetPrefixCache: ops.ResetPrefixCache(),
        }
        call = calls[cls]
        if call is None:
            return []
        like = getattr(call, argument, None)  # a table call's extra_hash is the table's
        bad = draw(data, st.sampled_from(bad_values(ARGUMENTS[cls, argument][0], self.config,
                                                   like)), label="malformed value")
        return [ops.Malformed(call, argument, bad)]


#: The validated arguments of sequence-level calls (the malformed call of ``misuse``).
_TABLE_ARGUMENTS = sorted(((cls, arg) for cls, arg in ARGUMENTS if cls in ops.TABLE_OPS),
                          key=lambda pair: (pair[0].kind, pair[1]))


class NaiveSequenceLevelMachine(SequenceLevelMachine):
    """The same machine against the selected target's naive allocator type."""

    @initialize(config=configs_of(lambda: naive_target().caps), data=st.data())
    def start(self, config: Config, data: st.DataObject) -> None:
        self.target = naive_target()
        super().start(config, data)


TestSequenceLevel = SequenceLevelMachine.TestCase
