"""Sequence-level state machine: ``BlockTable``s driven the way an engine drives them.

Prompts share a few system prefixes, decode appends reserve lookahead slots, parallel sampling
forks tables (copy-on-write), preemption swaps whole sequences to the CPU and back, and tiny
pools keep memory pressure, eviction and ``NoFreeBlocksError`` in play.
"""

from __future__ import annotations

from hypothesis import strategies as st
from hypothesis.stateful import initialize, precondition, rule

from models import operations as ops
from models.capabilities import Config
from models.operations import Dev, Op
from properties.machines.base import OracleMachine
from properties.machines.block_level import naive_target
from properties.selection import current_target
from properties.strategies import configs, extra_hashes, tokens, twin


def _has_tables(m: SequenceLevelMachine) -> bool:
    return bool(m.oracle.live_tables())


class SequenceLevelMachine(OracleMachine):
    """Allocate prompts, append decode tokens, fork, swap out and in, free."""

    prompts: list[tuple[int, ...]]

    @initialize(config=st.deferred(lambda: configs(current_target().caps)), data=st.data())
    def start(self, config: Config, data: st.DataObject) -> None:
        self.setup(config)
        bs = config.block_size
        self.prompts = data.draw(st.lists(tokens(bs, 3 * bs), min_size=1, max_size=3),
                                 label="system prompts")

    def _tables_on(self, dev: Dev) -> list[int]:
        return [t for t in self.oracle.live_tables() if self.oracle.table_device(t) is dev]

    @rule(data=st.data())
    def allocate(self, data: st.DataObject) -> None:
        """A new request: a shared system prompt (or none, or a twin of one that a weak hash
        confuses with it) plus a unique suffix."""
        bs = self.config.block_size
        prompts = st.sampled_from(self.prompts)
        prefix = data.draw(st.one_of(st.just(()), prompts, prompts.map(twin)), label="prefix")
        suffix = data.draw(tokens(0 if prefix else 1, 2 * bs), label="suffix")
        extra = data.draw(extra_hashes(self.caps), label="extra_hash")
        self.do(ops.TableAllocate(prefix + suffix, Dev.GPU, extra))

    @precondition(_has_tables)
    @rule(data=st.data())
    def append(self, data: st.DataObject) -> None:
        """A decode step: new tokens, with lookahead slots reserved as speculative decoding does."""
        running = self._tables_on(Dev.GPU)
        if not running:
            return
        bs = self.config.block_size
        t = data.draw(st.sampled_from(running), label="table")
        new = data.draw(tokens(1, 2 * bs), label="tokens")
        lookahead = data.draw(st.integers(0, bs), label="lookahead")
        self.do(ops.TableAppend(t, new, lookahead))

    @precondition(_has_tables)
    @rule(data=st.data())
    def ensure_slots(self, data: st.DataObject) -> None:
        running = self._tables_on(Dev.GPU)
        if running:
            t = data.draw(st.sampled_from(running), label="table")
            slots = data.draw(st.integers(0, 2 * self.config.block_size), label="slots")
            self.do(ops.TableEnsureSlots(t, slots))

    @precondition(_has_tables)
    @rule(data=st.data())
    def fork(self, data: st.DataObject) -> None:
        """Parallel sampling: a child sequence shares every block of its parent."""
        running = self._tables_on(Dev.GPU)
        if running:
            self.do(ops.TableFork(data.draw(st.sampled_from(running), label="table")))

    @precondition(_has_tables)
    @rule(data=st.data())
    def free(self, data: st.DataObject) -> None:
        self.do(ops.TableFree(data.draw(st.sampled_from(self.oracle.live_tables()),
                                        label="table")))

    @precondition(lambda m: _has_tables(m) and m.config.num_cpu_blocks > 0)
    @rule(data=st.data())
    def swap(self, data: st.DataObject) -> None:
        """Preemption by swapping: a running sequence goes to the CPU, a swapped one comes back."""
        t = data.draw(st.sampled_from(self.oracle.live_tables()), label="table")
        src = self.oracle.table_device(t)
        dst = Dev.CPU if src is Dev.GPU else Dev.GPU
        self.do(ops.TableSwap(t, src, dst))

    @precondition(_has_tables)
    @rule(data=st.data(), step=st.sampled_from((0.0, 1.0)))
    def mark_accessed(self, data: st.DataObject, step: float) -> None:
        running = self._tables_on(Dev.GPU)
        if running:
            t = data.draw(st.sampled_from(running), label="table")
            self.do(ops.TableMarkAccessed(t, self.tick(step)))

    @rule()
    def mark_computed(self) -> None:
        """End of a scheduling step: blocks written this step become computed."""
        self.do(ops.MarkComputed())

    @rule()
    def hit_rate(self) -> None:
        self.do(ops.HitRate(Dev.GPU))

    @precondition(lambda m: m.caps.typed_errors)
    @rule(data=st.data())
    def misuse(self, data: st.DataObject) -> None:
        """Growing or forking a freed table, a swap from the wrong device, marking a swapped-out
        table, an empty prompt: the target must refuse them with a typed error and change
        nothing (ATOMIC). (Freeing, swapping or marking a freed table touches no block: the
        reference allocator treats those as no-ops, so they are not generated; see the report
        on the model's classification.)"""
        m = self.oracle.model
        candidates: list[Op] = [ops.TableAllocate(())]
        for t in sorted(m.tables)[-3:]:
            if not m.tables[t].live:
                candidates += [ops.TableFork(t), ops.TableAppend(t, (1,)),
                               ops.TableEnsureSlots(t, 1)]
                continue
            dev = m.tables[t].device
            candidates.append(ops.TableSwap(t, Dev.CPU if dev is Dev.GPU else Dev.GPU, dev))
            if dev is Dev.CPU:
                candidates.append(ops.TableMarkAccessed(t, self.clock))
        candidates = [op for op in candidates if self.oracle.is_misuse(op)]
        self.do(data.draw(st.sampled_from(candidates), label="misuse"))


class NaiveSequenceLevelMachine(SequenceLevelMachine):
    """The same machine against the selected target's naive allocator type."""

    @initialize(config=st.deferred(lambda: configs(naive_target().caps)), data=st.data())
    def start(self, config: Config, data: st.DataObject) -> None:
        self.target = naive_target()
        super().start(config, data)


TestSequenceLevel = SequenceLevelMachine.TestCase
