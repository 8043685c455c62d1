"""Regression hit_stays_evictable.

From crash-block_level-1ea042aaa86074ed (harness block_level, target
      tests.zoo.v0.broken:hit_stays_evictable), minimized to 25 bytes.

Violation when recorded:

    [CACHE] evictable ids on gpu at step 4: AllocateImmutable(prev=None, tokens=(0,),
          device=<Dev.GPU: 'gpu'>, extra_hash=7)
      expected: []
      observed: [0]

Program (one operation per line):

    # block_size=1 num_gpu_blocks=1 num_cpu_blocks=4
      0  allocate_mutable(prev=None, device=cpu)    # -> b0
      1  reset_prefix_cache()    # = False
      2  allocate_immutable(prev=None, tokens=[0], device=gpu, extra_hash=7)    # -> b1
      3  free(block=b1)
      4  allocate_immutable(prev=None, tokens=[0], device=gpu, extra_hash=7)    # -> b2
"""

from __future__ import annotations

from properties.core.replay import replay_regression

CONFIG = {'block_size': 1, 'num_gpu_blocks': 1, 'num_cpu_blocks': 4}
PROGRAM = [
    {'op': 'allocate_mutable', 'prev': None, 'device': 'cpu'},
    {'op': 'reset_prefix_cache', 'device': None},
    {'op': 'allocate_immutable', 'prev': None, 'tokens': [0], 'device': 'gpu', 'extra_hash': 7},
    {'op': 'free', 'block': 1},
    {'op': 'allocate_immutable', 'prev': None, 'tokens': [0], 'device': 'gpu', 'extra_hash': 7},
]


def test_hit_stays_evictable() -> None:
    """Replays the program under the oracle against the selected target; passes once the bug
    is fixed."""
    replay_regression(CONFIG, PROGRAM)
