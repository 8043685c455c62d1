"""Regression window_fork_keeps_depth.

From an unseeded run of properties/families/v0/test_sequence_level.py against the bundled
allocator (main 14f8269).

Violation when recorded:

    [LEAK] id 1 handed to a second owner while still in use at step 5: TableAllocate(
          tokens=(0, 0, 0, 0, 0, 0, 0, 0), device=<Dev.GPU: 'gpu'>, extra_hash=0, window=None)
      expected: None
      observed: 1

The LEAK is a consequence: the step's first eviction was already wrong (LRU: id 0 evicted
with 4 hashed tokens while id 1, 8 hashed tokens, was due first; both never accessed; the oracle
now reports it so: fresh_ids follows the wrong victim instead of taking id 1 itself). The
window drop makes the surviving block (id 1) the first of its chain but keeps its token
total (8). ``fork`` rebuilt the child's copy from the chain it walks, which now starts at that
block, so the child's handle of id 1 counted 4 tokens; freed last, it gave the evictor 4 as
``num_hashed_tokens``. An id's eviction rank then depended on which of its handles was freed
last. Fixed in ``PrefixCachingBlockAllocator.fork``: a forked block keeps its original's total.

Program (one operation per line):

    # block_size=4 num_gpu_blocks=3 num_cpu_blocks=0
      0  table_allocate(tokens=[0]*8, device=gpu, extra_hash=None, window=1)    # -> t0 [0, 1]
      1  table_append(t0, tokens=[], lookahead=0, computed=8)    # id 0 dropped; null id 2
      2  table_fork(t0)    # -> t1 [2, 1]
      3  table_free(t0)
      4  table_free(t1)    # id 1 evictable
      5  table_allocate(tokens=[0]*8, device=gpu, extra_hash=0, window=None)    # evicts
"""

from __future__ import annotations

import pytest

from prefixcache.block_table import BlockTable
from prefixcache.cpu_gpu_block_allocator import CpuGpuBlockAllocator
from prefixcache.utils import Device
from properties.core.replay import replay_regression

CONFIG = {'block_size': 4, 'num_gpu_blocks': 3, 'num_cpu_blocks': 0}
TOKENS = [0] * 8
PROGRAM = [
    {'op': 'table_allocate', 'tokens': TOKENS, 'device': 'gpu', 'extra_hash': None,
     'window': 1},
    {'op': 'table_append', 'table': 0, 'tokens': [], 'lookahead': 0, 'computed': 8},
    {'op': 'table_fork', 'table': 0},
    {'op': 'table_free', 'table': 0},
    {'op': 'table_free', 'table': 1},
    {'op': 'table_allocate', 'tokens': TOKENS, 'device': 'gpu', 'extra_hash': 0,
     'window': None},
]


def test_window_fork_keeps_depth() -> None:
    """Replays the program under the oracle against the selected target; passes once the bug
    is fixed."""
    replay_regression(CONFIG, PROGRAM)


@pytest.mark.parametrize("free_parent_first", [True, False])
def test_forked_window_survivor_evicts_by_its_depth(free_parent_first: bool) -> None:
    """The bundled allocator directly: after the drop and a fork, both handles of the
    survivor count 8 tokens, so whichever is freed last the deeper id is evicted first."""
    allocator = CpuGpuBlockAllocator.create("prefix_caching", 3, 0, 4)
    parent = BlockTable(4, allocator, max_block_sliding_window=1)
    parent.allocate(TOKENS, device=Device.GPU)
    parent.append_token_ids([], 0, 8)
    child = parent.fork()
    survivor = parent.physical_block_ids[1]
    assert [t.blocks[1].num_tokens_total for t in (parent, child)] == [8, 8]
    for table in (parent, child) if free_parent_first else (child, parent):
        table.free()
    other = BlockTable(4, allocator)
    other.allocate([1] * 4, device=Device.GPU)  # a miss: one eviction
    assert other.physical_block_ids == [survivor]
