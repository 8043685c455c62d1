"""Engine-like ``BlockTable`` workloads, recorded as traces (``fuzz/families/v0/traces/``).

A tiny scheduler drives block tables the way a serving engine's block manager does: requests
arrive with shared system prompts, are admitted when the GPU has room, decode one token per
step (with speculative lookahead slots in some workloads), fork for parallel sampling (so
writes copy on write), are preempted by swapping to the CPU (or freed for recompute) when the
GPU runs out, swap back in when it has room, and finish. Every step ends as an engine step
does: blocks marked accessed and computed, copy-on-writes drained. All randomness is seeded.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from fuzz.families.v0.trace import RecordingAllocator
from prefixcache import PrefixCacheError
from prefixcache.block_table import BlockTable
from prefixcache.cpu_gpu_block_allocator import CpuGpuBlockAllocator
from prefixcache.errors import NoFreeBlocksError
from prefixcache.utils import Device


@dataclass(frozen=True)
class Workload:
    """Shape of one recorded workload."""

    name: str
    seed: int
    block_size: int
    num_gpu_blocks: int
    num_cpu_blocks: int
    steps: int
    arrival: float = 0.5  # chance a request arrives each step
    fork_rate: float = 0.0  # chance an admitted request is forked (parallel sampling)
    # Speculative slots reserved on each decode step. BlockTable then chains empty blocks after
    # a partial one, which the block-level contract calls out of contract, so the shipped
    # workloads keep it at 0 (reported to the lead).
    lookahead: int = 0
    max_new_tokens: tuple[int, int] = (4, 16)
    description: str = ""


WORKLOADS: tuple[Workload, ...] = (
    Workload("chat_prefix_sharing", 11, 4, 32, 0, 40, arrival=0.6,
             description="chat requests sharing three system prompts: cache hits, eviction"),
    Workload("parallel_sampling_cow", 12, 4, 24, 8, 45, arrival=0.4, fork_rate=0.6,
             description="parallel sampling: forked sequences copy on write as they decode"),
    Workload("preemption_swap", 13, 2, 14, 14, 60, arrival=0.7, max_new_tokens=(6, 20),
             description="a small GPU: preemption by swap out and swap in, or recompute"),
)


@dataclass
class _Seq:
    table: BlockTable
    tokens: list[int]
    left: int
    on_gpu: bool = True


@dataclass
class _Engine:
    w: Workload
    alloc: RecordingAllocator
    rng: random.Random
    prompts: list[list[int]]
    waiting: list[tuple[list[int], int]] = field(default_factory=list)
    running: list[_Seq] = field(default_factory=list)
    swapped: list[_Seq] = field(default_factory=list)
    clock: float = 0.0

    def new_table(self) -> BlockTable:
        return BlockTable(block_size=self.w.block_size, block_allocator=self.alloc)

    def arrive(self) -> None:
        if self.rng.random() < self.w.arrival:
            prompt = list(self.rng.choice(self.prompts)) if self.rng.random() < 0.8 else []
            prompt += [self.rng.randrange(1000) for _ in range(self.rng.randint(1, 3 *
                                                                                self.w.block_size))]
            self.waiting.append((prompt, self.rng.randint(*self.w.max_new_tokens)))

    def admit(self) -> None:
        while self.waiting and not self.swapped:
            prompt, budget = self.waiting[0]
            table = self.new_table()
            try:
                table.allocate(prompt, device=Device.GPU)
            except NoFreeBlocksError:
                return
            self.waiting.pop(0)
            seq = _Seq(table, prompt, budget)
            self.running.append(seq)
            gpu_ids = table.physical_block_ids
            self.alloc.get_computed_block_ids([], list(gpu_ids), True)
            if self.rng.random() < self.w.fork_rate:
                self.running.append(_Seq(table.fork(), list(prompt), budget))

    def decode(self) -> None:
        for seq in list(self.running):
            if seq not in self.running:
                continue
            token = self.rng.randrange(1000)
            while True:
                try:
                    seq.table.append_token_ids([token], num_lookahead_slots=self.w.lookahead)
                    seq.tokens.append(token)
                    seq.left -= 1
                    break
                except NoFreeBlocksError:
                    victim = self.running[-1]
                    self.preempt(victim)
                    if victim is seq:
                        break
            if seq.left <= 0 and seq in self.running:
                seq.table.free()
                self.running.remove(seq)

    def preempt(self, seq: _Seq) -> None:
        self.running.remove(seq)
        blocks = seq.table.blocks
        fits = self.w.num_cpu_blocks and self.alloc.get_num_blocks_touched(
            blocks, Device.CPU) <= self.alloc.get_num_free_blocks(Device.CPU)
        if fits:
            self.alloc.swap(blocks, Device.GPU, Device.CPU)
            seq.table.update(blocks)
            seq.on_gpu = False
            self.swapped.append(seq)
        else:  # recompute: free now, re-admit the whole sequence later
            seq.table.free()
            self.waiting.insert(0, (seq.tokens, seq.left))

    def swap_in(self) -> None:
        while self.swapped:
            seq = self.swapped[0]
            blocks = seq.table.blocks
            if self.alloc.get_num_blocks_touched(blocks, Device.GPU) + len(self.running) > \
                    self.alloc.get_num_free_blocks(Device.GPU):
                return
            self.alloc.swap(blocks, Device.CPU, Device.GPU)
            seq.table.update(blocks)
            seq.on_gpu = True
            self.swapped.pop(0)
            self.running.append(seq)

    def end_step(self) -> None:
        self.clock += 1.0
        for seq in self.running:
            self.alloc.mark_blocks_as_accessed(seq.table.physical_block_ids, self.clock)
        self.alloc.mark_blocks_as_computed([])
        self.alloc.clear_copy_on_writes()
        if self.rng.random() < 0.2:
            self.alloc.get_prefix_cache_hit_rate(Device.GPU)


def record(w: Workload) -> RecordingAllocator:
    """Run workload ``w`` on the bundled allocator under a recorder; every request finishes
    and every table is freed at the end."""
    inner = CpuGpuBlockAllocator.create("prefix_caching", w.num_gpu_blocks, w.num_cpu_blocks,
                                        w.block_size)
    alloc = RecordingAllocator(inner, w.block_size, misuse_types=(PrefixCacheError,),
                               describe=f"prefixcache bundled allocator; workload {w.name}: "
                                        f"{w.description}")
    rng = random.Random(w.seed)
    prompts = [[rng.randrange(1000) for _ in range(rng.randint(2, 4) * w.block_size)]
               for _ in range(3)]
    engine = _Engine(w, alloc, rng, prompts)
    for _ in range(w.steps):
        engine.arrive()
        engine.swap_in()
        engine.admit()
        engine.decode()
        engine.end_step()
    for seq in engine.running + engine.swapped:
        seq.table.free()
    alloc.clear_copy_on_writes()
    return alloc
