"""Block-level state machine: the allocator API called directly, as a block manager would,
judged after every step by the model and the shadow KV memory."""

from __future__ import annotations

from hypothesis import strategies as st
from hypothesis.stateful import initialize, precondition, rule

from models import operations as ops
from models.capabilities import Config
from models.operations import Dev
from properties.machines.base import OracleMachine
from properties.selection import current_target
from properties.strategies import configs, extra_hashes, tokens


def _has_blocks(m: BlockLevelMachine) -> bool:
    return bool(m.oracle.live_blocks())


class BlockLevelMachine(OracleMachine):
    """Allocate, append (copy-on-write, promotion), fork, free, swap, mark, query."""

    @initialize(config=st.deferred(lambda: configs(current_target().caps)))
    def start(self, config: Config) -> None:
        self.setup(config)

    # ------------------------------------------------------------------ helpers

    def _chain_end(self, data: st.DataObject, *, hashed: bool) -> int | None:
        """None, or a live block that may be extended (last of its chain; hashed if asked)."""
        ends = [h for h in self.oracle.live_blocks()
                if self.oracle.last_in_chain(h)
                and (self.oracle.is_hashed(h) if hashed else self.oracle.is_full(h))]
        if not ends:
            return None
        return data.draw(st.one_of(st.none(), st.sampled_from(ends)), label="prev")

    def _device(self, data: st.DataObject, prev: int | None) -> Dev:
        if prev is not None:
            return self.oracle.device_of(prev)
        return data.draw(st.sampled_from(self.devices()), label="device")

    def _full_tokens(self, data: st.DataObject, prev: int | None, dev: Dev,
                     extra: int | None) -> tuple[int, ...]:
        """Block contents, often one already cached after ``prev`` so the allocation hits."""
        bs = self.config.block_size
        known = self.oracle.hit_candidates(prev, dev, extra)
        if known:
            return data.draw(st.one_of(tokens(bs, bs), st.sampled_from(known)), label="tokens")
        return data.draw(tokens(bs, bs), label="tokens")

    def _some_blocks(self, data: st.DataObject) -> tuple[int, ...]:
        live = self.oracle.live_blocks()
        return tuple(data.draw(st.lists(st.sampled_from(live), max_size=4, unique=True),
                               label="blocks"))

    # ------------------------------------------------------------------ allocation

    @rule(data=st.data())
    def allocate_mutable(self, data: st.DataObject) -> None:
        prev = self._chain_end(data, hashed=False)
        self.do(ops.AllocateMutable(prev, self._device(data, prev)))

    @rule(data=st.data())
    def allocate_immutable(self, data: st.DataObject) -> None:
        prev = self._chain_end(data, hashed=True)
        dev = self._device(data, prev)
        extra = self.oracle.extra_of(prev) if prev is not None else data.draw(
            extra_hashes(self.caps), label="extra_hash")
        self.do(ops.AllocateImmutable(prev, self._full_tokens(data, prev, dev, extra), dev, extra))

    @rule(data=st.data(), n=st.integers(1, 4))
    def allocate_chain(self, data: st.DataObject, n: int) -> None:
        prev = self._chain_end(data, hashed=True)
        dev = self._device(data, prev)
        extra = self.oracle.extra_of(prev) if prev is not None else data.draw(
            extra_hashes(self.caps), label="extra_hash")
        bs = self.config.block_size
        chunks = tuple(data.draw(tokens(bs, bs), label="chunk") for _ in range(n))
        self.do(ops.AllocateImmutableChain(prev, chunks, dev, extra))

    # ------------------------------------------------------------------ writes

    @precondition(_has_blocks)
    @rule(data=st.data())
    def append(self, data: st.DataObject) -> None:
        open_blocks = [h for h in self.oracle.live_blocks() if self.oracle.appendable(h)]
        if not open_blocks:
            return
        h = data.draw(st.sampled_from(open_blocks), label="block")
        room = self.config.block_size - len(self.oracle.tokens_of(h))
        self.do(ops.Append(h, data.draw(tokens(1, room), label="tokens")))

    @precondition(_has_blocks)
    @rule(data=st.data())
    def fork(self, data: st.DataObject) -> None:
        self.do(ops.Fork(data.draw(st.sampled_from(self.oracle.live_blocks()), label="block")))

    @precondition(_has_blocks)
    @rule(data=st.data())
    def free(self, data: st.DataObject) -> None:
        self.do(ops.Free(data.draw(st.sampled_from(self.oracle.live_blocks()), label="block")))

    @precondition(lambda m: _has_blocks(m) and m.config.num_cpu_blocks > 0)
    @rule(data=st.data())
    def swap(self, data: st.DataObject) -> None:
        h = data.draw(st.sampled_from(self.oracle.live_blocks()), label="block")
        chain = tuple(self.oracle.chain_of(h))
        src = self.oracle.device_of(h)
        dst = Dev.CPU if src is Dev.GPU else Dev.GPU
        self.do(ops.Swap(chain, src, dst))

    # ------------------------------------------------------------------ bookkeeping

    @precondition(_has_blocks)
    @rule(data=st.data(), step=st.sampled_from((0.0, 1.0, 2.5)))
    def mark_accessed(self, data: st.DataObject, step: float) -> None:
        gpu = [h for h in self.oracle.live_blocks() if self.oracle.device_of(h) is Dev.GPU]
        if not gpu:
            return
        chosen = tuple(data.draw(st.lists(st.sampled_from(gpu), min_size=1, max_size=4,
                                          unique=True), label="blocks"))
        self.do(ops.MarkAccessed(chosen, self.tick(step)))

    @rule()
    def mark_computed(self) -> None:
        self.do(ops.MarkComputed())

    @rule()
    def clear_cows(self) -> None:
        self.do(ops.ClearCopyOnWrites())

    @rule(data=st.data())
    def hit_rate(self, data: st.DataObject) -> None:
        self.do(ops.HitRate(data.draw(st.sampled_from(self.devices()), label="device")))

    @precondition(lambda m: m.caps.vllm_api)
    @rule(data=st.data())
    def reset_prefix_cache(self, data: st.DataObject) -> None:
        dev = data.draw(st.sampled_from((None, *self.devices())), label="device")
        self.do(ops.ResetPrefixCache(dev))

    # ------------------------------------------------------------------ queries

    def _gpu_chain(self, data: st.DataObject) -> tuple[int, ...] | None:
        gpu = [h for h in self.oracle.live_blocks() if self.oracle.device_of(h) is Dev.GPU]
        if not gpu:
            return None
        return tuple(self.oracle.chain_of(data.draw(st.sampled_from(gpu), label="block")))

    @precondition(lambda m: _has_blocks(m) and m.caps.aphrodite_api)
    @rule(data=st.data(), skip_last=st.booleans())
    def computed_block_ids(self, data: st.DataObject, skip_last: bool) -> None:
        chain = self._gpu_chain(data)
        if chain is not None:
            self.do(ops.ComputedBlockIds(chain, skip_last))

    @precondition(lambda m: _has_blocks(m) and m.caps.vllm_api)
    @rule(data=st.data())
    def cached_prefix(self, data: st.DataObject) -> None:
        chain = self._gpu_chain(data)
        if chain is not None:
            self.do(ops.CachedPrefix(chain, Dev.GPU))

    @precondition(lambda m: _has_blocks(m) and m.caps.aphrodite_api)
    @rule(data=st.data(), lookahead=st.integers(0, 9))
    def count_touched(self, data: st.DataObject, lookahead: int) -> None:
        dev = data.draw(st.sampled_from(self.devices()), label="device")
        self.do(ops.CountTouched(self._some_blocks(data), dev, lookahead))

    @precondition(lambda m: _has_blocks(m) and m.caps.vllm_api)
    @rule(data=st.data())
    def count_full_touched(self, data: st.DataObject) -> None:
        dev = data.draw(st.sampled_from(self.devices()), label="device")
        self.do(ops.CountFullTouched(self._some_blocks(data), dev))


TestBlockLevel = BlockLevelMachine.TestCase
