"""Regression decode_total_follows_chain.

A sibling of ``window_fork_keeps_depth`` (a block's stored token total diverging from its
chain), found while checking every table block's ``num_tokens_total`` against the model.

Violation when recorded (bundled allocator, main 14f8269; vLLM 0.8 passes):

    [LRU] evicted id 1 (last_accessed=-1.0, hashed_tokens=8) is not least recently used at
          step 7: TableAllocate(tokens=(1, 1, 1, 1), device=<Dev.GPU: 'gpu'>, extra_hash=None,
          window=None)
      expected: [2]
      observed: 1

The lookahead block (id 2) is made while its predecessor is still empty, so it stores a total
of 1 (stored, not live: docs/API.md). The table's decode fast path then added each written token to
that stale total instead of recomputing it (predecessor's total + own tokens) as every other
append does: id 2 filled with a total of 5, not 12, and the evictor ranked it below id 1.

Program (one operation per line):

    # block_size=4 num_gpu_blocks=3 num_cpu_blocks=0
      0  table_allocate(tokens=[0], device=gpu, extra_hash=None, window=None)    # -> t0
      1  table_append(t0, tokens=[0]*7, lookahead=1)    # ids [0, 1, 2], id 2 empty
      2-5  table_append(t0, tokens=[0], lookahead=0)    # x4: id 2 full
      6  table_free(t0)    # ids 0, 1, 2 evictable (4, 8, 12 tokens), never accessed
      7  table_allocate(tokens=[1]*4, device=gpu, extra_hash=None, window=None)    # evicts 2
"""

from __future__ import annotations

from prefixcache.block_table import BlockTable
from prefixcache.cpu_gpu_block_allocator import CpuGpuBlockAllocator
from prefixcache.utils import Device
from properties.core.replay import replay_regression

CONFIG = {'block_size': 4, 'num_gpu_blocks': 3, 'num_cpu_blocks': 0}
DECODE = {'op': 'table_append', 'table': 0, 'tokens': [0], 'lookahead': 0, 'computed': None}
PROGRAM = [
    {'op': 'table_allocate', 'tokens': [0], 'device': 'gpu', 'extra_hash': None,
     'window': None},
    {'op': 'table_append', 'table': 0, 'tokens': [0] * 7, 'lookahead': 1, 'computed': None},
    DECODE, DECODE, DECODE, DECODE,
    {'op': 'table_free', 'table': 0},
    {'op': 'table_allocate', 'tokens': [1] * 4, 'device': 'gpu', 'extra_hash': None,
     'window': None},
]


def test_decode_total_follows_chain() -> None:
    """Replays the program under the oracle against the selected target; passes once the bug
    is fixed."""
    replay_regression(CONFIG, PROGRAM)


def test_decoded_lookahead_block_counts_its_prefix() -> None:
    """The bundled allocator directly: each decode step leaves the block's total at its
    predecessor's total plus its own tokens."""
    allocator = CpuGpuBlockAllocator.create("prefix_caching", 3, 0, 4)
    table = BlockTable(4, allocator)
    table.allocate([0], device=Device.GPU)
    table.append_token_ids([0] * 7, 1)
    totals = []
    for _ in range(4):
        table.append_token_ids([0], 0)
        totals.append(table.blocks[2].num_tokens_total)
    assert totals == [9, 10, 11, 12]
