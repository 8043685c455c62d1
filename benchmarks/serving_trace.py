"""A deterministic serving trace at block-table level, in the shared operation vocabulary.

:func:`generate` simulates an engine's scheduler over a seeded request stream and emits the
``BlockTable`` operations it would issue: many requests share a few system prompts and add a
unique suffix; follow-up turns re-send a finished conversation (cache hits, including revivals
from the evictor); decode steps append one token, or several with lookahead slots reserved
(speculative decoding); parallel sampling forks the table after prefill (copy-on-write on the
shared tail); under memory pressure the newest running group is preempted, swapped to the CPU
when it fits there and recomputed otherwise; finished sequences are freed, so their cached
blocks wait in the evictor and later allocations evict them.

The calls follow vLLM 0.8's ``SelfAttnBlockSpaceManager``: each decode append is followed by
``clear_copy_on_writes`` (``append_slots``); a sequence's blocks are marked accessed once, when
it is freed (its ``LastAccessBlocksTracker`` defers the mark), and, unlike vLLM, also before a
swap-out (see Determinism); ``mark_blocks_as_computed`` runs once per scheduling step; the
compiled benchmark converts each swap's mapping with ``get_physical_block_id`` per id. The
engine's read-only per-step queries (``can_append_slots``'s counts, ``get_block_table``) are
not in the vocabulary and are left out.

Contract: every operation of a trace succeeds on every conforming allocator. Admission uses a
worst-case count of the ids in use per device (``_Ledger``): every logical block is counted as
its own id except those shared by ``fork``, which share one. Cache hits and promotions onto
cached ids only ever make the real count smaller, so an operation whose worst-case need fits
in ``total - worst-case used`` fits in the real free count, whatever the cache holds.

Determinism: the output depends only on :class:`TraceConfig` (one ``random.Random(seed)``).
Every table is marked accessed with its own timestamp before it is freed or swapped out, so
GPU eviction never meets a tie the contract leaves open and all conforming LRU allocators keep
the same GPU cache (CPU blocks cannot be marked; their ties may differ between allocators).
"""

from __future__ import annotations

import random
from collections import Counter, deque
from dataclasses import dataclass, field, replace

from models.families.v0 import operations as ops
from models.families.v0.operations import Dev, Op

__all__ = ["Trace", "TraceConfig", "TraceError", "generate"]


class TraceError(ValueError):
    """The configuration cannot produce a trace (a request can never fit the GPU pool)."""


@dataclass(frozen=True, slots=True)
class TraceConfig:
    """Shape of the workload; ``num_requests`` is the scale knob (see :meth:`scaled`).

    Length ranges are inclusive ``(low, high)`` token counts, drawn uniformly.
    """

    seed: int = 0
    num_requests: int = 600
    block_size: int = 16
    num_gpu_blocks: int = 2048
    num_cpu_blocks: int = 4096
    max_running: int = 64  # sequence groups decoding at once
    arrivals_per_step: int = 3  # mean new requests per scheduling step
    num_system_prompts: int = 4
    system_prompt_tokens: tuple[int, int] = (64, 512)
    suffix_tokens: tuple[int, int] = (4, 200)
    output_tokens: tuple[int, int] = (8, 200)
    no_system_prompt: float = 0.1  # share of requests without a system prompt
    follow_up: float = 0.2  # share of requests continuing a finished conversation
    parallel_sampling: float = 0.2  # share of requests sampling several sequences
    max_samples: int = 4
    speculative: float = 0.3  # share of requests decoding with lookahead slots
    lookahead: int = 4
    lora: float = 0.1  # share of requests with an extra key (a LoRA id)
    vocab: int = 32_000
    watermark: float = 0.01  # GPU share kept free when admitting new work
    # False: swap out only while the CPU has never had to evict (ids ever taken on the CPU
    # stay within its pool; else preempt by recomputation). CPU blocks cannot be marked
    # accessed, so their eviction ties are left open by the contract, and vLLM 0.8's evictor
    # can return a stale heap entry there (AssertionError in ``_maybe_allocate_evicted_block_id``).
    cpu_evictions: bool = False

    def scaled(self, scale: float) -> TraceConfig:
        """The same workload with ``scale`` times as many requests."""
        return replace(self, num_requests=max(1, round(self.num_requests * scale)))


@dataclass(frozen=True, slots=True)
class Trace:
    """A generated program, the pool shape it was admitted against, and what it exercises.

    ``steps`` holds the index in ``program`` just past each scheduling step's last operation;
    ``worst_free`` the ledger's lower bound on each device's free count at those points.
    """

    config: TraceConfig
    program: tuple[Op, ...]
    steps: tuple[int, ...]
    worst_free: tuple[tuple[int, int], ...]
    stats: dict[str, int]

    def op_counts(self) -> Counter[str]:
        return Counter(op.kind for op in self.program)


# --------------------------------------------------------------------------- bookkeeping


class _Block:
    """One logical block: an id in the worst case, shared only through forks."""

    __slots__ = ("refs",)

    def __init__(self) -> None:
        self.refs = 1


@dataclass(slots=True, eq=False)
class _Seq:
    handle: int
    tokens: list[int]
    blocks: list[_Block]
    remaining: int  # decode tokens still to produce


@dataclass(slots=True, eq=False)
class _Request:
    prompt: tuple[int, ...]
    extra: int | None
    samples: int
    output: int
    speculative: bool


@dataclass(slots=True, eq=False)
class _Group:
    request: _Request
    seqs: list[_Seq] = field(default_factory=list)
    device: Dev = Dev.GPU


class _Ledger:
    """Worst-case ids in use per device; ``free(dev)`` never exceeds the real free count."""

    def __init__(self, config: TraceConfig) -> None:
        self.total = {Dev.GPU: config.num_gpu_blocks, Dev.CPU: config.num_cpu_blocks}
        self.used = {Dev.GPU: 0, Dev.CPU: 0}
        self.taken = {Dev.GPU: 0, Dev.CPU: 0}  # ids ever taken, an upper bound

    def never_evicts(self, dev: Dev, count: int) -> bool:
        """Taking ``count`` more ids on ``dev`` cannot need an eviction."""
        return self.taken[dev] + count <= self.total[dev]

    def free(self, dev: Dev) -> int:
        return self.total[dev] - self.used[dev]

    def new(self, dev: Dev, count: int) -> list[_Block]:
        self.used[dev] += count
        self.taken[dev] += count
        return [_Block() for _ in range(count)]

    def release(self, dev: Dev, blocks: list[_Block]) -> None:
        for block in blocks:
            block.refs -= 1
            if block.refs == 0:
                self.used[dev] -= 1


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


# --------------------------------------------------------------------------- the scheduler


class _Scheduler:
    def __init__(self, config: TraceConfig) -> None:
        c = self.c = config
        if c.block_size < 1 or c.num_gpu_blocks < 2 or c.max_running < 1:
            raise TraceError("need block_size >= 1, num_gpu_blocks >= 2, max_running >= 1")
        self.rng = random.Random(c.seed)
        self.ledger = _Ledger(c)
        self.program: list[Op] = []
        self.steps: list[int] = []
        self.worst_free: list[tuple[int, int]] = []
        self.stats: Counter[str] = Counter()
        self.next_table = 0
        self.now = 0.0
        self.waiting: deque[_Request] = deque()
        self.running: list[_Group] = []
        self.swapped: deque[_Group] = deque()
        self.histories: deque[tuple[tuple[int, ...], int | None]] = deque(maxlen=64)
        self.arrived = 0
        self.finished = 0
        self.reserve = max(1, round(c.watermark * c.num_gpu_blocks))
        self.prompts = [self._tokens(self.rng.randint(*c.system_prompt_tokens))
                        for _ in range(c.num_system_prompts)]
        # Largest footprint of one group, so every request can run alone on an empty GPU.
        longest = (max(c.system_prompt_tokens) + max(c.suffix_tokens) + max(c.output_tokens)
                   + c.lookahead + c.block_size)
        self.max_tokens = (c.num_gpu_blocks - self.reserve - 2 * c.max_samples) * c.block_size \
            // c.max_samples
        if self.max_tokens < longest // 2:
            raise TraceError(f"a GPU pool of {c.num_gpu_blocks} blocks is too small for "
                             f"requests of up to {longest} tokens")

    # ------------------------------------------------------------------ emission

    def emit(self, op: Op) -> None:
        self.program.append(op)

    def _tokens(self, n: int) -> tuple[int, ...]:
        return tuple(self.rng.randrange(self.c.vocab) for _ in range(n))

    def _new_handle(self) -> int:
        handle = self.next_table
        self.next_table += 1
        return handle

    def _mark(self, seq: _Seq) -> None:
        self.now += 1.0
        self.emit(ops.TableMarkAccessed(seq.handle, self.now))

    # ------------------------------------------------------------------ requests

    def _arrive(self) -> None:
        c, rng = self.c, self.rng
        for _ in range(rng.randint(0, 2 * c.arrivals_per_step)):
            if self.arrived >= c.num_requests:
                return
            self.arrived += 1
            if self.histories and rng.random() < c.follow_up:
                history, extra = rng.choice(self.histories)
                prompt = history + self._tokens(rng.randint(*c.suffix_tokens))
                self.stats["follow_ups"] += 1
            else:
                extra = rng.choice((1, 2, 3)) if rng.random() < c.lora else None
                system = () if rng.random() < c.no_system_prompt else rng.choice(self.prompts)
                prompt = system + self._tokens(rng.randint(*c.suffix_tokens))
            samples = rng.randint(2, c.max_samples) if rng.random() < c.parallel_sampling else 1
            output = rng.randint(*c.output_tokens)
            # Keep every group small enough to run alone (follow-ups grow without bound); the
            # prefix is kept, as that is what the cache can serve.
            prompt = prompt[:max(1, self.max_tokens - output - c.lookahead - c.block_size)]
            self.waiting.append(_Request(prompt, extra, samples, output,
                                         rng.random() < c.speculative))

    def _admit(self, request: _Request) -> bool:
        need = _cdiv(len(request.prompt), self.c.block_size)
        if need + self.reserve > self.ledger.free(Dev.GPU):
            return False
        handle = self._new_handle()
        self.emit(ops.TableAllocate(request.prompt, Dev.GPU, request.extra))
        first = _Seq(handle, list(request.prompt), self.ledger.new(Dev.GPU, need),
                     request.output)
        group = _Group(request, [first])
        for _ in range(request.samples - 1):
            self.emit(ops.TableFork(first.handle))
            for block in first.blocks:
                block.refs += 1
            group.seqs.append(_Seq(self._new_handle(), list(first.tokens), list(first.blocks),
                                   request.output))
            self.stats["forks"] += 1
        self.running.append(group)
        self.stats["admitted"] += 1
        return True

    # ------------------------------------------------------------------ preemption

    def _preempt(self, group: _Group) -> None:
        """Swap ``group`` out to the CPU if it fits there, else free it for recomputation."""
        self.running.remove(group)
        for seq in group.seqs:
            self._mark(seq)  # as the engine does before giving blocks back
        need = sum(len(seq.blocks) for seq in group.seqs)
        fits = need <= self.ledger.free(Dev.CPU) and (
            self.c.cpu_evictions or self.ledger.never_evicts(Dev.CPU, need))
        if fits:
            for seq in group.seqs:
                self.emit(ops.TableSwap(seq.handle, Dev.GPU, Dev.CPU))
                self.ledger.release(Dev.GPU, seq.blocks)
                seq.blocks = self.ledger.new(Dev.CPU, len(seq.blocks))
            group.device = Dev.CPU
            self.swapped.append(group)
            self.stats["swap_outs"] += 1
            return
        for seq in group.seqs:
            self.emit(ops.TableFree(seq.handle))
            self.ledger.release(Dev.GPU, seq.blocks)
        lead = group.seqs[0]
        left = max(seq.remaining for seq in group.seqs)
        request = group.request
        self.waiting.appendleft(_Request(tuple(lead.tokens), request.extra, len(group.seqs),
                                         left, request.speculative))
        self.stats["recomputes"] += 1

    def _swap_in(self, group: _Group) -> bool:
        need = sum(len(seq.blocks) for seq in group.seqs)
        if need + self.reserve > self.ledger.free(Dev.GPU):
            return False
        for seq in group.seqs:
            self.emit(ops.TableSwap(seq.handle, Dev.CPU, Dev.GPU))
            self.ledger.release(Dev.CPU, seq.blocks)
            seq.blocks = self.ledger.new(Dev.GPU, len(seq.blocks))
        group.device = Dev.GPU
        self.running.append(group)
        self.stats["swap_ins"] += 1
        return True

    # ------------------------------------------------------------------ decode

    def _append_cost(self, seq: _Seq, count: int, lookahead: int) -> tuple[int, range]:
        bs = self.c.block_size
        empty = len(seq.blocks) * bs - len(seq.tokens)
        new = _cdiv(count + lookahead - empty, bs) if count + lookahead > empty else 0
        written = range(len(seq.tokens) // bs, (len(seq.tokens) + count - 1) // bs + 1)
        shared = sum(1 for i in written if i < len(seq.blocks) and seq.blocks[i].refs > 1)
        return new + shared, written

    def _decode(self, group: _Group, seq: _Seq) -> bool:
        """One decode append for ``seq``; False if ``group`` itself had to be preempted."""
        c = self.c
        spec = group.request.speculative
        count = min(seq.remaining, self.rng.randint(1, c.lookahead + 1) if spec else 1)
        lookahead = c.lookahead if spec else 0
        cost, written = self._append_cost(seq, count, lookahead)
        while cost > self.ledger.free(Dev.GPU):
            victim = self.running[-1]
            self._preempt(victim)
            if victim is group:
                return False
            cost, written = self._append_cost(seq, count, lookahead)
        tokens = self._tokens(count)
        self.emit(ops.TableAppend(seq.handle, tokens, lookahead))
        self.emit(ops.ClearCopyOnWrites())  # append_slots returns the new copy-on-writes
        bs = c.block_size
        empty = len(seq.blocks) * bs - len(seq.tokens)
        if count + lookahead > empty:
            seq.blocks += self.ledger.new(Dev.GPU, _cdiv(count + lookahead - empty, bs))
        for i in written:
            if seq.blocks[i].refs > 1:  # copy on write
                seq.blocks[i].refs -= 1
                seq.blocks[i] = self.ledger.new(Dev.GPU, 1)[0]
                self.stats["cows"] += 1
        seq.tokens += tokens
        seq.remaining -= count
        return True

    # ------------------------------------------------------------------ the step

    def step(self) -> None:
        c = self.c
        self._arrive()
        while self.swapped and len(self.running) < c.max_running:
            if not self._swap_in(self.swapped[0]):
                break
            self.swapped.popleft()
        while self.waiting and not self.swapped and len(self.running) < c.max_running:
            if not self._admit(self.waiting[0]):
                break
            self.waiting.popleft()
        if not self.running and (self.waiting or self.swapped):
            raise TraceError("no progress: the GPU pool cannot hold the next request")
        for group in list(self.running):
            if group not in self.running:
                continue  # preempted by an earlier group of this step
            for seq in list(group.seqs):
                if seq.remaining and not self._decode(group, seq):
                    break
        done: list[tuple[_Seq, int | None]] = []
        for group in list(self.running):
            for seq in [s for s in group.seqs if not s.remaining]:
                group.seqs.remove(seq)
                done.append((seq, group.request.extra))
            if not group.seqs:
                self.running.remove(group)
                self.finished += 1
        for seq, extra in done:
            self._mark(seq)  # vLLM 0.8 defers the access mark of a sequence to its free
            self.emit(ops.TableFree(seq.handle))
            self.ledger.release(Dev.GPU, seq.blocks)
            self.histories.append((tuple(seq.tokens), extra))
        self.emit(ops.MarkComputed())
        self.steps.append(len(self.program))
        self.worst_free.append((self.ledger.free(Dev.GPU), self.ledger.free(Dev.CPU)))

    def run(self) -> Trace:
        c = self.c
        # Stop with work in flight, so the final state is not trivially empty.
        keep = min(c.max_running // 2, c.num_requests // 4)
        while self.finished < c.num_requests - keep or self.arrived < c.num_requests:
            self.step()
            if not (self.waiting or self.running or self.swapped) and \
                    self.arrived >= c.num_requests:
                break
        for group in self.swapped:  # abort what waits on the CPU
            for seq in group.seqs:
                self.emit(ops.TableFree(seq.handle))
                self.ledger.release(Dev.CPU, seq.blocks)
        self.swapped.clear()
        self.steps.append(len(self.program))
        self.worst_free.append((self.ledger.free(Dev.GPU), self.ledger.free(Dev.CPU)))
        stats = dict(self.stats)
        stats.update(steps=len(self.steps), tables=self.next_table,
                     running_at_end=sum(len(g.seqs) for g in self.running))
        return Trace(c, tuple(self.program), tuple(self.steps), tuple(self.worst_free), stats)


def generate(config: TraceConfig) -> Trace:
    """The trace for ``config``; the same config always yields the same program."""
    return _Scheduler(config).run()
