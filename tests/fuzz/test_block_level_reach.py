"""What the block-level harness reaches beyond tiny pools of plain blocks: a long pool with
chains past CPython's recursion limit and a walk over each, and ``BlockTable`` operations (the
only way to chain a block after an empty one). Each reach is shown by a hand-built input that
the bundled allocator passes and the zoo mutant it is for fails."""

from __future__ import annotations

import sys

import pytest

from fuzz.core.execution import execute
from fuzz.families.v0.decoder import (
    LEVEL_KINDS,
    LONG_CHAIN_BLOCKS,
    LONG_POOL_BYTE,
    LONG_POOL_GPU_BLOCKS,
    LONG_POOL_MAX_BLOCK_SIZE,
    LONG_POOL_MAX_OPS,
    MAX_GPU_BLOCKS,
    Decoder,
    Level,
)
from fuzz.families.v0.listing import format_program
from models.core.invariants import Violation
from models.families.v0 import operations as ops
from models.families.v0.capabilities import Capabilities
from models.families.v0.invariants import Family
from models.families.v0.operations import Op, Outcome, Snapshot
from properties.core.targets import Target, load_target
from properties.families.v0.runner import Runner

LONG_CONFIG = bytes([0, LONG_POOL_BYTE, 0])  # block size 1, long pool, no CPU pool
TINY_CONFIG = bytes([3, MAX_GPU_BLOCKS - 1, 0])  # block size 4, 12 GPU blocks, no CPU pool


def _opcode(config: bytes, caps: Capabilities, generator: str) -> int:
    """The opcode byte that selects ``generator`` in the block-level table for ``config``."""
    table = Decoder(config, Level.BLOCK, caps).table
    return [make.__name__ for make in table].index(generator)


def test_long_pool_is_block_level_only() -> None:
    caps = load_target("tests.zoo.v0.broken:recursive_fork").caps
    block = Decoder(LONG_CONFIG, Level.BLOCK, caps)
    assert block.config.num_gpu_blocks == LONG_POOL_GPU_BLOCKS
    assert block.max_ops == LONG_POOL_MAX_OPS
    assert "_allocate_long_chain" in {make.__name__ for make in block.table}
    sizes = {Decoder(bytes([b, LONG_POOL_BYTE, 0]), Level.BLOCK, caps).config.block_size
             for b in range(16)}
    assert sizes == set(range(1, LONG_POOL_MAX_BLOCK_SIZE + 1))
    for level in (Level.SEQUENCE, Level.HASHING):
        assert Decoder(LONG_CONFIG, level, caps).config.num_gpu_blocks == \
            1 + LONG_POOL_BYTE % MAX_GPU_BLOCKS
    tiny = Decoder(bytes([0, LONG_POOL_BYTE - 1, 0]), Level.BLOCK, caps)
    assert tiny.config.num_gpu_blocks == MAX_GPU_BLOCKS
    assert "_allocate_long_chain" not in {make.__name__ for make in tiny.table}


def _long_chain_input(caps: Capabilities) -> bytes:
    """A long chain (rung byte 1) whose bytes run out before its walk: the walk defaults to a
    fork of the chain's last block."""
    return LONG_CONFIG + bytes([_opcode(LONG_CONFIG, caps, "_allocate_long_chain")]) + b"\x01" * 5


def test_a_chain_past_the_recursion_limit_is_built_and_forked(bundled: Target) -> None:
    assert sys.getrecursionlimit() < LONG_CHAIN_BLOCKS
    result = execute(_long_chain_input(bundled.caps), bundled, Level.BLOCK)
    assert result.violation is None, str(result.violation)
    chain, fork = result.program
    assert isinstance(chain, ops.AllocateImmutableChain)
    assert len(chain.chunks) == LONG_CHAIN_BLOCKS
    assert fork == ops.Fork(LONG_CHAIN_BLOCKS - 1)
    assert len(result.outcomes[1].new_blocks) == LONG_CHAIN_BLOCKS
    listing = format_program(result.config, result.program, result.outcomes)
    assert f"({LONG_CHAIN_BLOCKS} in all)" in listing
    assert len(listing) < 1000


def test_recursive_fork_fails_on_the_long_chain() -> None:
    target = load_target("tests.zoo.v0.broken:recursive_fork")
    result = execute(_long_chain_input(target.caps), target, Level.BLOCK)
    assert result.violation is not None
    assert result.violation.family is Family.TABLE
    assert "RecursionError" in str(result.violation)
    assert result.violation.step == 1


def test_block_level_vocabulary_includes_tables(bundled: Target) -> None:
    table_kinds = {cls.kind for cls in ops.TABLE_OPS}
    assert table_kinds <= LEVEL_KINDS[Level.BLOCK]
    with_cpu_pool = bytes([3, MAX_GPU_BLOCKS - 1, 3])
    assert table_kinds <= Decoder(with_cpu_pool, Level.BLOCK, bundled.caps).kinds()


def _table_growth_input(caps: Capabilities) -> bytes:
    """A table of one full block (tokens 1 2 3 0), then one token appended with four lookahead
    slots: two new blocks, the second chained after the first while it is still empty."""
    extra = b"\x00" if caps.extra_keys and caps.vllm_api else b""
    allocate = bytes([_opcode(TINY_CONFIG, caps, "_table_allocate"), 3, 1, 2, 3, 0]) + extra
    append = bytes([_opcode(TINY_CONFIG, caps, "_table_append"), 0, 1, 4])
    return TINY_CONFIG + allocate + append


def test_a_table_grows_by_two_blocks_at_block_level(bundled: Target) -> None:
    result = execute(_table_growth_input(bundled.caps), bundled, Level.BLOCK)
    assert result.violation is None, str(result.violation)
    assert result.program == [ops.TableAllocate((1, 2, 3, 0)),
                              ops.TableAppend(0, (1,), 4)]


def test_table_holds_block_twice_fails_at_block_level() -> None:
    target = load_target("tests.zoo.v0.broken:table_holds_block_twice")
    result = execute(_table_growth_input(target.caps), target, Level.BLOCK)
    assert result.violation is not None
    assert result.violation.family in {Family.RC, Family.LEAK, Family.TABLE, Family.COW}


def test_a_runner_violation_ends_the_execution(bundled: Target,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The runner may itself judge a step (a target that misbehaves); execute() returns that
    verdict like the oracle's, instead of raising."""
    real = Runner.execute

    def second_step_misbehaves(self: Runner, op: Op) -> tuple[Outcome, Snapshot]:
        if len(self.log) == 1:
            raise Violation(Family.CRASH, "target misbehaved (test)")
        return real(self, op)

    monkeypatch.setattr(Runner, "execute", second_step_misbehaves)
    result = execute(_table_growth_input(bundled.caps), bundled, Level.BLOCK)
    assert result.violation is not None
    assert result.violation.family is Family.CRASH
    assert result.violation.step == 1
    assert len(result.program) == 2
    assert len(result.outcomes) == 1


@pytest.mark.parametrize("name", ["factory_raises", "factory_returns_none"])
def test_a_misbehaving_factory_is_a_recorded_verdict(name: str) -> None:
    """The factory runs inside the judged region: its failure becomes the execution's
    violation (with the target's name), not an exception out of the fuzz loop."""
    target = load_target(f"tests.hardening.misbehaving.targets:{name}").with_step_timeout(5)
    # The faults spare the loader's 2+2-block probe: pick an input with a bigger pool.
    data = next(d for first in range(256)
                if (c := Decoder(d := bytes([first, 7] * 32), Level.BLOCK, target.caps).config)
                .num_gpu_blocks + c.num_cpu_blocks > 4)
    result = execute(data, target, Level.BLOCK)
    assert result.violation is not None
    assert result.violation.family in (Family.CRASH, Family.TARGET)
    assert result.judge is None and not result.program
